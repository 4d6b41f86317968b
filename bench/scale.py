#!/usr/bin/env python3
"""Benchmark: the guide's scale, 8 simulated nodes (the shape of inventories/prod), against 1.

For each size (default 1, then 8) it starts fresh simulated nodes (scripts/sim-cluster, prefix
scale<N>), then times:

  * site.yml cold (bare nodes to a verified cluster), and site.yml again (the re-run, which must
    change nothing), with ansible.posix.profile_tasks on the re-run so that the tasks whose time
    grows with N can be read off;
  * at the largest size, the burn-in (playbooks/burnin.yml, 2 CPU ranks per node: 8 x 2 = 16
    ranks through DeepSpeed's launcher over pdsh), with its tokens/s per node;

and samples the machine's memory throughout (every simulated node shares it). It then runs
bench/preflight_vs_ping.py --nodes 1 3 8 as it is (its own nodes, provisioned by
molecule/preflight_drift) and prints one report: cold, re-run, re-run/cold, the re-run at N=8
against N=1 (goal <= 1.3x), the tasks that grew most, the burn-in, the memory peak and the
preflight/ping table. Logs and summary.json go to bench/results/scale-<time>/.

    bench/scale.py [--nodes 1 8] [--preflight-nodes 1 3 8] [--repeat 3] [--skip-preflight] [--skip-burnin] [--keep]

The nodes use inventories/sim/group_vars (the `cpu` profile, the tiny job) with a global batch of
16, which divides into data parallel 2 x N for N = 1, 2, 4 and 8.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
SIM_CLUSTER = REPO / "scripts" / "sim-cluster"
GOAL_RERUN_GROWTH = 1.3
RECAP = re.compile(r"^(?P<host>\S+)\s*:\s*ok=\d+\s+changed=(?P<changed>\d+)\s+unreachable=(?P<unreachable>\d+)"
                   r"\s+failed=(?P<failed>\d+)", re.M)
# ansible.posix.profile_tasks' closing list: "<role : task name> ----- 1.23s"
PROFILE = re.compile(r"^(?P<task>\S.*?) -{3,} (?P<seconds>\d+\.\d+)s\s*$", re.M)
GROUP_VARS = "---\n# Written by bench/scale.py: data parallel is 2 x N; 16 divides it for N = 1, 2, 4, 8.\n" \
             "megatron_job_global_batch_size: 16\n"


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


@dataclass
class Timed:
    seconds: float
    returncode: int
    changed: int = 0
    failed: int = 0
    unreachable: int = 0
    log: str = ""


@dataclass
class Size:
    nodes: int
    cold: Optional[Timed] = None
    rerun: Optional[Timed] = None
    burnin: Optional[Timed] = None
    burnin_report: Optional[dict] = None
    rerun_tasks: Dict[str, float] = field(default_factory=dict)
    load_before: float = 0.0
    error: str = ""


class MemorySampler(threading.Thread):
    """The machine's used memory (MemTotal - MemAvailable) every `interval` s; peak per phase."""

    def __init__(self, interval: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.interval, self.phase, self.peaks = interval, "start", {}  # type: float, str, Dict[str, float]
        self._stop = threading.Event()

    @staticmethod
    def used_gib() -> float:
        info = dict(line.split(":", 1) for line in Path("/proc/meminfo").read_text().splitlines())
        kib = int(info["MemTotal"].split()[0]) - int(info["MemAvailable"].split()[0])
        return kib / 1024 / 1024

    def run(self) -> None:
        while not self._stop.wait(self.interval):
            used = self.used_gib()
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), used)

    def stop(self) -> None:
        self._stop.set()


def tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else name


def playbook(path: str, inventory: Path, logfile: Path, extra: Optional[dict] = None, profile: bool = False) -> Timed:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1",
               # ansible.cfg's fact cache (jsonfile, gathering=smart), as a user's re-run has it, but
               # one per run of this bench: fresh nodes must not inherit another run's facts.
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(logfile.parent / "facts"))
    if profile:
        env.update(ANSIBLE_CALLBACKS_ENABLED="ansible.posix.profile_tasks", PROFILE_TASKS_TASK_OUTPUT_LIMIT="all",
                   PROFILE_TASKS_SORT_ORDER="none")
    argv = [tool("ansible-playbook"), "-i", str(inventory), path] + (["-e", json.dumps(extra)] if extra else [])
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=REPO, env=env, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          check=False)
    seconds = time.monotonic() - started
    logfile.write_text("$ %s\n%s" % (" ".join(argv), proc.stdout))
    per_host = {m.group("host"): m for m in RECAP.finditer(proc.stdout)}
    return Timed(seconds, proc.returncode, sum(int(m.group("changed")) for m in per_host.values()),
                 sum(int(m.group("failed")) for m in per_host.values()),
                 sum(int(m.group("unreachable")) for m in per_host.values()), str(logfile.relative_to(REPO)))


def task_times(logfile: Path) -> Dict[str, float]:
    """profile_tasks' per-task seconds (a task seen twice, e.g. in two plays, sums)."""
    times: Dict[str, float] = {}
    for m in PROFILE.finditer(logfile.read_text()):
        times[m.group("task")] = times.get(m.group("task"), 0.0) + float(m.group("seconds"))
    return times


def sim(*args: str) -> None:
    subprocess.run([sys.executable, str(SIM_CLUSTER), *args], cwd=REPO, check=True, stdout=subprocess.DEVNULL)


def measure(nodes: int, burnin: bool, out: Path, memory: MemorySampler, keep: bool) -> Size:
    size = Size(nodes, load_before=os.getloadavg()[0])
    prefix = f"scale{nodes}"
    with tempfile.TemporaryDirectory(prefix=f"{prefix}-inv-") as tmp:
        inventory = Path(tmp) / "hosts.yml"
        (Path(tmp) / "group_vars").mkdir()
        (Path(tmp) / "group_vars" / "all.yml").symlink_to(REPO / "inventories" / "sim" / "group_vars" / "all.yml")
        (Path(tmp) / "group_vars" / "megatron_nodes.yml").write_text(GROUP_VARS)
        try:
            memory.phase = f"N={nodes} start"
            log(f"N={nodes}: starting {nodes} node(s) (prefix {prefix})")
            sim("up", "--nodes", str(nodes), "--prefix", prefix, "--inventory", str(inventory))
            for phase in ("cold", "rerun"):
                memory.phase = f"N={nodes} site.yml {phase}"
                log(f"N={nodes}: site.yml {phase}")
                run = playbook("site.yml", inventory, out / f"N{nodes}-site-{phase}.log", profile=phase == "rerun")
                setattr(size, phase, run)
                log(f"N={nodes}: site.yml {phase} {run.seconds:.1f} s, changed={run.changed}, rc={run.returncode}")
                if run.returncode or run.failed or run.unreachable:
                    size.error = f"site.yml {phase} failed (rc {run.returncode}); see {run.log}"
                    return size
            size.rerun_tasks = task_times(out / f"N{nodes}-site-rerun.log")
            if burnin:
                memory.phase = f"N={nodes} burn-in"
                log(f"N={nodes}: burn-in, {nodes} x 2 ranks")
                report = out / f"N{nodes}-burnin.json"
                size.burnin = playbook("playbooks/burnin.yml", inventory, out / f"N{nodes}-burnin.log",
                                       {"megatron_launch_burnin_dest": str(report)})
                size.burnin_report = json.loads(report.read_text()) if report.is_file() else None
                if size.burnin.returncode:
                    size.error = f"burn-in failed (rc {size.burnin.returncode}); see {size.burnin.log}"
        except subprocess.CalledProcessError as exc:
            size.error = f"sim-cluster failed: {exc}"
        finally:
            if not keep:
                sim("down", "--prefix", prefix)
    return size


def preflight_vs_ping(nodes: List[int], repeat: int, out: Path) -> Optional[dict]:
    """bench/preflight_vs_ping.py as it is; its summary.json."""
    before = set((REPO / "bench" / "results").glob("preflight_vs_ping-*"))
    argv = [sys.executable, str(REPO / "bench" / "preflight_vs_ping.py"), "--nodes", *map(str, nodes),
            "--repeat", str(repeat)]
    log("preflight vs ping: " + " ".join(argv[1:]))
    proc = subprocess.run(argv, cwd=REPO, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
    (out / "preflight_vs_ping.log").write_text(proc.stdout)
    new = sorted(set((REPO / "bench" / "results").glob("preflight_vs_ping-*")) - before)
    summary = new[-1] / "summary.json" if new else None
    if proc.returncode or not summary or not summary.is_file():
        log(f"preflight_vs_ping failed (rc {proc.returncode}); see {out / 'preflight_vs_ping.log'}")
        return None
    data = json.loads(summary.read_text())
    data["table"] = (new[-1] / "table.txt").read_text()
    return data


def growth(base: Size, big: Size, top: int = 12) -> List[str]:
    """The re-run tasks whose time grew most from `base` to `big`, with their ratio."""
    rows = []
    for task, seconds in big.rerun_tasks.items():
        before = base.rerun_tasks.get(task, 0.0)
        rows.append((seconds - before, task, before, seconds))
    rows.sort(reverse=True)
    return ["  %+6.2f s  %6.2f -> %6.2f s  (x%s)  %s" % (d, b, s, ("%.1f" % (s / b)) if b > 0.005 else "-", t)
            for d, t, b, s in rows[:top]]


def report(sizes: List[Size], peaks: Dict[str, float], preflight: Optional[dict]) -> str:
    mem_total = int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024
    lines = [f"scale benchmark, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, {mem_total:.1f} GiB memory "
             "(controller and every simulated node share them)", "",
             f"{'nodes':>5}  {'cold s':>7}  {'re-run s':>8}  {'re-run/cold':>11}  {'changed re-run':>14}  {'load':>5}"]
    for s in sizes:
        if s.cold and s.rerun:
            lines.append(f"{s.nodes:>5}  {s.cold.seconds:>7.1f}  {s.rerun.seconds:>8.1f}  "
                         f"{s.rerun.seconds / s.cold.seconds:>11.3f}  {s.rerun.changed:>14}  {s.load_before:>5.1f}")
        if s.error:
            lines.append(f"{s.nodes:>5}  FAILED: {s.error}")
    done = [s for s in sizes if s.rerun and not (s.error and not s.burnin)]
    if len(done) >= 2:
        base, big = done[0], done[-1]
        ratio = big.rerun.seconds / base.rerun.seconds
        lines += ["", f"re-run at N={big.nodes} against N={base.nodes}: {big.rerun.seconds:.1f} / {base.rerun.seconds:.1f} s"
                  f" = {ratio:.2f}x (goal <= {GOAL_RERUN_GROWTH}x: {'ok' if ratio <= GOAL_RERUN_GROWTH else 'MISS'});"
                  f" nodes x{big.nodes / base.nodes:.0f}",
                  f"re-run tasks that grew most from N={base.nodes} to N={big.nodes} (profile_tasks):"]
        lines += growth(base, big)
    for s in sizes:
        if s.burnin and s.burnin_report:
            r = s.burnin_report
            lines += ["", f"burn-in at N={s.nodes}: {r.get('world')} ranks, {s.burnin.seconds:.1f} s wall, loss "
                      f"{r.get('initial_loss')} -> {r.get('final_loss')}, {'passed' if r.get('passed') else 'FAILED'}"]
            for node, row in sorted(r.get("nodes", {}).items()):
                lines.append(f"  {node:<16} {row.get('tokens_per_s') or 0:>9.1f} tokens/s  ({row.get('ranks')} ranks)")
    if peaks:
        lines += ["", "memory used on the machine, peak per phase (GiB of %.1f):" % mem_total]
        lines += [f"  {phase:<28} {peak:5.1f}" for phase, peak in peaks.items()]
    if preflight:
        lines += ["", "bench/preflight_vs_ping.py (as it is):", preflight["table"].rstrip()]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, nargs="+", default=[1, 8], help="sizes; the burn-in runs at the largest")
    p.add_argument("--preflight-nodes", type=int, nargs="+", default=[1, 3, 8])
    p.add_argument("--repeat", type=int, default=3, help="rounds of preflight_vs_ping.py")
    p.add_argument("--skip-preflight", action="store_true")
    p.add_argument("--skip-burnin", action="store_true", help="no burn-in at the largest size")
    p.add_argument("--keep", action="store_true", help="leave the nodes running")
    args = p.parse_args(argv)
    if min(args.nodes) < 1 or min(args.preflight_nodes) < 1:
        p.error("every size must be at least 1")
    out = REPO / "bench" / "results" / time.strftime("scale-%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    memory = MemorySampler()
    memory.start()
    sizes = [measure(n, n == max(args.nodes) and not args.skip_burnin, out, memory, args.keep)
             for n in sorted(set(args.nodes))]
    preflight = None
    if not args.skip_preflight:
        memory.phase = "preflight_vs_ping"
        preflight = preflight_vs_ping(args.preflight_nodes, args.repeat, out)
    memory.stop()
    text = report(sizes, memory.peaks, preflight)
    print(text)
    (out / "summary.txt").write_text(text + "\n")
    (out / "summary.json").write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpus": os.cpu_count(),
        "sizes": [asdict(s) for s in sizes], "memory_peaks_gib": memory.peaks, "preflight_vs_ping": preflight,
    }, indent=2) + "\n")
    log(f"logs and summary in {out.relative_to(REPO)}")
    return 1 if any(s.error for s in sizes) or (not args.skip_preflight and preflight is None) else 0


if __name__ == "__main__":
    sys.exit(main())
