#!/usr/bin/env python3
"""Benchmark: site.yml on the simulated cluster, cold and then re-run, for several cluster sizes.

For each N (default 1, 3, 6) it starts N fresh nodes with scripts/sim-cluster (prefix
bench<N>, its own Docker network), runs `ansible-playbook <playbook> -i <inventory for N>`
twice, and prints the wall time of each run, the re-run/cold ratio and the number of changed
tasks (summed over the PLAY RECAP). Then it shows how the re-run time grows with N, and tears
the nodes down. A re-run should change nothing and cost a small fraction of the cold run; its
growth with N shows what each extra node costs the controller.

    bench/site_rerun.py [--nodes 1 3 6] [--playbook site.yml] [--keep]

The generated inventory sits next to a link to inventories/sim/group_vars, so the runs use
the simulated cluster's settings. Logs and a JSON summary go to bench/results/<timestamp>/.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
SIM_CLUSTER = REPO / "scripts" / "sim-cluster"
RECAP = re.compile(
    r"^(?P<host>\S+)\s*:\s*ok=(?P<ok>\d+)\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
    r"\s+failed=(?P<failed>\d+)",
    re.M,
)
# ansible.posix.profile_tasks' closing list: "<role : task name> ----- 1.23s"
PROFILE = re.compile(r"^(?P<task>\S.*?) -{3,} (?P<seconds>\d+\.\d+)s\s*$", re.M)


@dataclass
class Run:
    seconds: float
    returncode: int
    changed: int
    failed: int
    unreachable: int
    hosts: int
    log: str
    # CPU seconds (user + system) of ansible-playbook and its children (the docker/ssh clients):
    # the controller's share. The modules run inside the nodes and are not in it.
    controller_cpu: float = 0.0
    # CPU seconds the simulated nodes used during the run (their cgroups): the modules' share.
    # On real hardware every node has its own CPUs; here they all share the controller's.
    node_cpu: float = 0.0


@dataclass
class SizeResult:
    nodes: int
    cold: Optional[Run] = None
    rerun: Optional[Run] = None
    error: str = ""
    load_before: float = 0.0  # 1-minute load average when the size started: other work skews times

    @property
    def ratio(self) -> Optional[float]:
        if self.cold and self.rerun and self.cold.seconds > 0:
            return self.rerun.seconds / self.cold.seconds
        return None


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def parse_recap(output: str) -> Dict[str, int]:
    """Sum the PLAY RECAP counters over hosts (the last recap line of each host wins)."""
    per_host: Dict[str, Dict[str, int]] = {}
    for m in RECAP.finditer(output):
        per_host[m.group("host")] = {k: int(m.group(k)) for k in ("ok", "changed", "unreachable", "failed")}
    totals = {k: sum(h[k] for h in per_host.values()) for k in ("ok", "changed", "unreachable", "failed")}
    totals["hosts"] = len(per_host)
    return totals


def ansible_playbook() -> str:
    local = Path(sys.executable).parent / "ansible-playbook"
    return str(local) if local.exists() else "ansible-playbook"


def run_playbook(playbook: Path, inventory: Path, log_file: Path, extra: Optional[dict] = None,
                 env: Optional[Dict[str, str]] = None, profile: bool = False, prefix: Optional[str] = None) -> Run:
    """One timed ``ansible-playbook`` run; ``extra`` goes in as -e JSON, ``env`` on top of Ansible's
    environment, and ``profile`` turns on ansible.posix.profile_tasks (every task, in run order).
    With ``prefix``, the CPU time of the simulated nodes <prefix>-node* is measured too."""
    full_env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    if profile:
        full_env.update(ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_TASK_OUTPUT_LIMIT="all",
                        PROFILE_TASKS_SORT_ORDER="none")
    full_env.update(env or {})
    argv = [ansible_playbook(), "-i", str(inventory), str(playbook)] + (["-e", json.dumps(extra)] if extra else [])
    nodes_before = nodes_cpu(prefix) if prefix else 0.0
    start, before = time.monotonic(), _children_cpu()
    proc = subprocess.run(argv, cwd=REPO, env=full_env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          check=False)
    seconds, controller = time.monotonic() - start, _children_cpu() - before
    node_cpu = nodes_cpu(prefix) - nodes_before if prefix else 0.0
    log_file.write_text("$ %s\n%s" % (" ".join(argv), proc.stdout))
    recap = parse_recap(proc.stdout)
    return Run(seconds=seconds, returncode=proc.returncode, changed=recap["changed"], failed=recap["failed"],
               unreachable=recap["unreachable"], hosts=recap["hosts"], log=_shown(log_file),
               controller_cpu=controller, node_cpu=node_cpu)


def nodes_cpu(prefix: str) -> float:
    """CPU seconds used so far by the running containers <prefix>-node*, summed from their
    cgroups (v1 cpuacct, or v2 cpu.stat under either cgroup driver); 0.0 where none is readable."""
    try:
        ids = subprocess.run(["docker", "ps", "-q", "--no-trunc", "--filter", "name=^%s-node" % prefix],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, check=False).stdout.split()
    except OSError:
        return 0.0
    total = 0.0
    for cid in ids:
        for path in ("/sys/fs/cgroup/cpuacct/docker/%s/cpuacct.usage" % cid,
                     "/sys/fs/cgroup/system.slice/docker-%s.scope/cpu.stat" % cid,
                     "/sys/fs/cgroup/docker/%s/cpu.stat" % cid):
            try:
                text = Path(path).read_text()
            except OSError:
                continue
            if path.endswith("cpuacct.usage"):
                total += int(text.strip()) / 1e9
            else:
                usage = dict(line.split(None, 1) for line in text.splitlines() if " " in line)
                total += int(usage.get("usage_usec", 0)) / 1e6
            break
    return total


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def task_times(output: str) -> Dict[str, float]:
    """profile_tasks' seconds per task name (a name met more than once, e.g. in two plays, sums)."""
    times: Dict[str, float] = {}
    for m in PROFILE.finditer(output):
        times[m.group("task")] = times.get(m.group("task"), 0.0) + float(m.group("seconds"))
    return times


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(REPO))
    except ValueError:
        return str(path)


def sim_cluster(*args: str) -> None:
    subprocess.run([sys.executable, str(SIM_CLUSTER), *args], cwd=REPO, check=True, stdout=subprocess.DEVNULL)


# What a size's inventory directory gets beside hosts.yml (default: inventories/sim/group_vars),
# and what runs on the nodes after the re-run, before they are torn down.
GroupVars = Callable[[Path], None]
After = Callable[[int, Path, "SizeResult"], None]


def sim_group_vars(directory: Path) -> None:
    """group_vars next to the inventory: the simulated cluster's settings apply to these nodes too."""
    (directory / "group_vars").symlink_to(REPO / "inventories" / "sim" / "group_vars")


def bench_size(nodes: int, playbook: Path, results_dir: Path, keep: bool, prefix: Optional[str] = None,
               group_vars: GroupVars = sim_group_vars, profile_rerun: bool = False, env: Optional[Dict[str, str]] = None,
               after: Optional[After] = None, phase_hook: Optional[Callable[[str], None]] = None) -> SizeResult:
    """Fresh nodes, the playbook cold then again, ``after`` (if given), then teardown (unless keep)."""
    prefix = prefix or f"bench{nodes}"
    result = SizeResult(nodes=nodes, load_before=os.getloadavg()[0])
    hook = phase_hook or (lambda _phase: None)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}-inv-") as tmp:
        inventory = Path(tmp) / "hosts.yml"
        group_vars(Path(tmp))
        try:
            hook(f"N={nodes} start")
            log(f"N={nodes}: starting {nodes} node(s) (prefix {prefix})")
            sim_cluster("up", "--nodes", str(nodes), "--prefix", prefix, "--inventory", str(inventory))
            for phase in ("cold", "rerun"):
                hook(f"N={nodes} {playbook.name} {phase}")
                log(f"N={nodes}: {phase} run of {playbook.name}")
                run = run_playbook(playbook, inventory, results_dir / f"N{nodes}-{phase}.log", env=env,
                                   profile=profile_rerun and phase == "rerun", prefix=prefix)
                setattr(result, phase, run)
                log(f"N={nodes}: {phase} {run.seconds:.1f} s, changed={run.changed}, rc={run.returncode}")
                if run.returncode != 0 or run.failed or run.unreachable:
                    result.error = f"{phase} run failed (rc={run.returncode}); see {run.log}"
                    break
            if after is not None and not result.error:
                after(nodes, inventory, result)
        except subprocess.CalledProcessError as exc:
            result.error = f"sim-cluster failed: {exc}"
        finally:
            if not keep:
                sim_cluster("down", "--prefix", prefix)
    return result


def fit_line(xs: List[float], ys: List[float]) -> Optional[tuple]:
    """Least-squares slope and intercept, or None with fewer than two distinct x."""
    if len(set(xs)) < 2:
        return None
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return slope, my - slope * mx


def report(results: List[SizeResult], playbook: Path) -> str:
    lines = [f"site re-run benchmark: {playbook} ({os.cpu_count()} CPUs on the controller and nodes)", ""]
    lines.append(f"{'nodes':>5}  {'cold s':>8}  {'re-run s':>8}  {'re-run/cold':>11}  {'changed cold':>12}  "
                 f"{'changed re-run':>14}  {'load':>5}")
    for r in results:
        if r.error and not (r.cold and r.rerun):
            lines.append(f"{r.nodes:>5}  FAILED: {r.error}")
            continue
        assert r.cold and r.rerun
        lines.append(
            f"{r.nodes:>5}  {r.cold.seconds:>8.1f}  {r.rerun.seconds:>8.1f}  {r.ratio:>11.3f}  "
            f"{r.cold.changed:>12}  {r.rerun.changed:>14}  {r.load_before:>5.1f}"
            + (f"   ({r.error})" if r.error else "")
        )
    done = [r for r in results if r.cold and r.rerun and not r.error]
    if done:
        lines += ["", "re-run time against cluster size:"]
        base = done[0]
        assert base.rerun
        for r in done:
            assert r.rerun
            lines.append(
                f"  N={r.nodes:<3} re-run {r.rerun.seconds:6.1f} s  x{r.rerun.seconds / base.rerun.seconds:5.2f} "
                f"of N={base.nodes}  ({r.rerun.seconds / r.nodes:5.2f} s per node)"
            )
        fit = fit_line([float(r.nodes) for r in done], [r.rerun.seconds for r in done if r.rerun])
        if fit:
            slope, intercept = fit
            lines.append(f"  fit: re-run ~ {intercept:.1f} s + {slope:.2f} s x N")
        if any(r.rerun and r.rerun.changed for r in done):
            lines.append("  NOTE: a re-run changed something: the playbook is not idempotent")
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, nargs="+", default=[1, 3, 6], help="cluster sizes (default: 1 3 6)")
    p.add_argument("--playbook", default="site.yml", help="playbook to run (default: site.yml)")
    p.add_argument("--keep", action="store_true", help="leave the nodes running afterwards")
    p.add_argument("--results", default=str(REPO / "bench" / "results"), help="where logs and JSON go")
    args = p.parse_args(argv)

    playbook = Path(args.playbook)
    if not playbook.is_absolute():
        playbook = Path.cwd() / playbook if (Path.cwd() / playbook).exists() else REPO / playbook
    if not playbook.is_file():
        print(f"bench: playbook {playbook} not found; pass --playbook", file=sys.stderr)
        return 2
    if any(n < 1 for n in args.nodes):
        print(f"bench: --nodes must all be >= 1, got {args.nodes}", file=sys.stderr)
        return 2

    results_dir = Path(args.results) / time.strftime("site_rerun-%Y%m%d-%H%M%S")
    results_dir.mkdir(parents=True, exist_ok=True)
    results = []
    for nodes in sorted(set(args.nodes)):
        results.append(bench_size(nodes, playbook, results_dir, args.keep))

    text = report(results, playbook)
    print(text)
    (results_dir / "summary.txt").write_text(text + "\n")
    (results_dir / "summary.json").write_text(json.dumps(
        {"playbook": str(playbook), "results": [dict(asdict(r), ratio=r.ratio) for r in results]}, indent=2) + "\n")
    log(f"logs and summary in {results_dir}")
    return 1 if any(r.error for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
