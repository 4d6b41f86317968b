#!/usr/bin/env python3
"""Benchmark: the guide's scale, 8 simulated nodes (the shape of inventories/prod), against 1.

For each size (default 1, then 8) it starts fresh simulated nodes (scripts/sim-cluster, prefix
scale<N>), then times:

  * site.yml cold (bare nodes to a verified cluster), and site.yml again (the re-run, which must
    change nothing), with ansible.posix.profile_tasks on the re-run so that the tasks whose time
    grows with N can be read off;
  * at the largest size, the burn-in (playbooks/burnin.yml, 2 CPU ranks per node: 8 x 2 = 16
    ranks through DeepSpeed's launcher over pdsh), with its tokens/s per node;

  * at the largest size, on the same provisioned nodes, the converged re-run rounds
    (--rerun-nodes, default 1, 3, 8): site.yml again on the first N nodes, --repeat times, beside
    playbooks/preflight.yml on them and, with --baseline REF, REF's site.yml once (the re-run before
    converge by verification). From these it fits the controller's CPU and the nodes' CPU per node
    (least squares over N) and writes the paper model for 64 and 128 nodes (see model());

  * at the largest size, on the same provisioned nodes, bench/preflight_vs_ping.py's rounds
    (ping, the facts call, playbooks/preflight.yml; with --baseline REF also REF's preflight.yml
    side by side) for the first N nodes, for every N of --preflight-nodes (default 1, 3, 8);

and samples the machine's memory throughout (every simulated node shares it). It prints one
report: cold, re-run, re-run/cold, the re-run at N=8 against N=1 (goal <= 1.3x), the tasks that
grew most, the burn-in, the memory peak and the preflight/ping table (goal <= 1.5x). Logs and
summary.json go to bench/results/scale-<time>/. The cluster helpers (a size's fresh nodes, the
timed playbook runs, profile_tasks) are bench/site_rerun.py's, the preflight rounds
bench/preflight_vs_ping.py's.

    bench/scale.py [--nodes 1 8] [--rerun-nodes 1 3 8] [--preflight-nodes 1 3 8] [--repeat 3]
                   [--baseline REF] [--skip-rerun] [--skip-preflight] [--skip-burnin] [--keep]

The nodes use inventories/sim/group_vars (the `cpu` profile, the tiny job) with a global batch of
48, which divides into data parallel 2 x N for N = 1, 2, 3, 4, 6 and 8.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parent))
import preflight_vs_ping as pvp  # noqa: E402  (bench/ is no package: its scripts import each other by path)
import site_rerun as sr  # noqa: E402

REPO = sr.REPO
GOAL_RERUN_GROWTH = 1.3
GROUP_VARS = "---\n# Written by bench/scale.py: data parallel is 2 x N; 48 divides it for N = 1, 2, 3, 4, 6, 8.\n" \
             "megatron_job_global_batch_size: 48\n"
# The paper model's controller: 16 cores, ansible.cfg's forks.
MODEL_CORES = 16
MODEL_FORKS = 32
MODEL_SIZES = (8, 64, 128)
log = sr.log


@dataclass
class Size:
    nodes: int
    cold: Optional[sr.Run] = None
    rerun: Optional[sr.Run] = None
    burnin: Optional[sr.Run] = None
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


def scale_group_vars(directory: Path) -> None:
    """inventories/sim's settings, with a global batch that data parallel 2 x N divides. Both in
    group_vars/all/ (read in name order, the later file wins), since the job is also validated on
    localhost, which is in no node group."""
    (directory / "group_vars" / "all").mkdir(parents=True)
    (directory / "group_vars" / "all" / "00-sim.yml").symlink_to(REPO / "inventories" / "sim" / "group_vars" / "all.yml")
    (directory / "group_vars" / "all" / "10-scale.yml").write_text(GROUP_VARS)


def preflight_rounds(nodes: List[int], prefix: str, args: argparse.Namespace, out: Path) -> List[pvp.SizeResult]:
    """preflight_vs_ping's rounds on the first N nodes of the provisioned cluster, for each N."""
    results = []
    for n in sorted(set(nodes)):
        directory = out / f"preflight-inventory-{n}"
        directory.mkdir()
        scale_group_vars(directory)
        inventory = directory / "hosts.yml"
        sr.sim_cluster("inventory", "--nodes", str(n), "--prefix", prefix, "--output", str(inventory))
        results.append(pvp.time_rounds(pvp.SizeResult(nodes=n), inventory, args, out / f"preflight-{n}.log"))
    return results


@dataclass
class RerunRound:
    """site.yml re-run on the first N nodes of a converged cluster: this tree's (converge by
    verification, --repeat times), REF's (once), and playbooks/preflight.yml (--repeat times)."""

    nodes: int
    converged: List[sr.Run] = field(default_factory=list)
    preflight: List[sr.Run] = field(default_factory=list)
    baseline: Optional[sr.Run] = None
    # profile_tasks of the last converged re-run (the first may do the work a change of the
    # inventory's members asks for): seconds per task, slowest first.
    tasks: List[tuple] = field(default_factory=list)

    @staticmethod
    def median(runs: List[sr.Run], key: str = "seconds") -> float:
        values = sorted(getattr(run, key) for run in runs)
        return values[len(values) // 2] if values else float("nan")


def baseline_env(tree: Path, env: Dict[str, str]) -> Dict[str, str]:
    """Ansible's environment for REF's tree: its own config, collection and roles."""
    return dict(env, ANSIBLE_CONFIG=str(tree / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(tree / ".collections"),
                ANSIBLE_ROLES_PATH=str(tree / "roles"))


def rerun_rounds(nodes: List[int], prefix: str, args: argparse.Namespace, out: Path,
                 env: Dict[str, str]) -> List[RerunRound]:
    """For each N, the converged re-run on the first N nodes, side by side with preflight and REF."""
    rounds, inventories = [], {}
    for n in sorted(set(nodes)):
        directory = out / f"rerun-inventory-{n}"
        directory.mkdir()
        scale_group_vars(directory)
        inventory = inventories[n] = directory / "hosts.yml"
        sr.sim_cluster("inventory", "--nodes", str(n), "--prefix", prefix, "--output", str(inventory))
        current = RerunRound(n)
        for i in range(args.repeat):
            log(f"re-run round N={n} #{i + 1}: site.yml, then preflight.yml")
            current.converged.append(sr.run_playbook(REPO / "site.yml", inventory, out / f"rerun-{n}-{i}.log",
                                                     env=env, profile=i == args.repeat - 1, prefix=prefix))
            current.preflight.append(sr.run_playbook(REPO / "playbooks" / "preflight.yml", inventory,
                                                     out / f"rerun-{n}-{i}-preflight.log", env=env, prefix=prefix))
            if i == args.repeat - 1:
                times = sr.task_times((out / f"rerun-{n}-{i}.log").read_text())
                current.tasks = sorted(times.items(), key=lambda item: -item[1])
        rounds.append(current)
    # REF's re-runs last: REF's os_base installs REF's library on the nodes, which this tree's
    # converge check would then rightly see as drift and repair.
    for current in rounds if args.baseline_tree else []:
        log(f"re-run round N={current.nodes}: {args.baseline}'s site.yml")
        current.baseline = sr.run_playbook(args.baseline_tree / "site.yml", inventories[current.nodes],
                                           out / f"rerun-{current.nodes}-baseline.log",
                                           env=baseline_env(args.baseline_tree, env), prefix=prefix)
    for current in rounds:
        bad = [run for run in current.converged + current.preflight + [current.baseline]
               if run is not None and (run.returncode or run.failed or run.unreachable)]
        if bad:
            log(f"re-run round N={current.nodes}: a run failed; see {bad[0].log}")
    return rounds


def fit(rounds: List[RerunRound], pick) -> Optional[tuple]:
    """(per node, fixed) of ``pick(round)`` over N by least squares; None below two sizes."""
    points = [(float(r.nodes), pick(r)) for r in rounds]
    points = [(size, value) for size, value in points if not math.isnan(value)]  # a missing baseline
    return sr.fit_line([size for size, value in points], [value for size, value in points]) if points else None


def model(per_node_cpu: float, fixed_cpu: float, node_seconds: float, nodes: int,
          cores: int = MODEL_CORES, forks: int = MODEL_FORKS) -> tuple:
    """Wall seconds of a run on ``nodes`` nodes for a controller of ``cores`` cores with ``forks``:
    (best, worst). Best: the per-node controller work spreads over min(cores, forks) processes; worst:
    it is all serial (the strategy's own loop). The nodes work in parallel, ``forks`` at a time, each
    for ``node_seconds`` (its module runs, on its own CPUs). The fixed part (start-up, parsing the
    playbooks, the controller-only plays) is serial in both."""
    batches = -(-nodes // forks)
    node_part = batches * node_seconds
    best = fixed_cpu + per_node_cpu * nodes / min(cores, forks) + node_part
    worst = fixed_cpu + per_node_cpu * nodes + node_part
    return best, worst


def rerun_report(rounds: List[RerunRound], baseline: Optional[str]) -> List[str]:
    med = RerunRound.median
    lines = ["", "converged re-run of site.yml on the first N nodes of the provisioned cluster (median of "
             f"{len(rounds[0].converged) if rounds else 0}; {baseline or 'no baseline'} once):",
             f"{'nodes':>5}  {'re-run s':>8}  {'preflight s':>11}  {'re-run/pf':>9}  {'ctrl CPU s':>10}  "
             f"{'per node':>8}  {'nodes CPU s':>11}  {'changed, last':>13}  {'baseline s':>10}  {'base ctrl CPU':>13}  {'speed-up':>8}"]
    for r in rounds:
        ctrl = med(r.converged, "controller_cpu")
        base = r.baseline
        lines.append(
            f"{r.nodes:>5}  {med(r.converged):>8.1f}  {med(r.preflight):>11.1f}  {med(r.converged) / med(r.preflight):>9.2f}"
            f"  {ctrl:>10.1f}  {ctrl / r.nodes:>8.2f}  {med(r.converged, 'node_cpu'):>11.1f}"
            f"  {r.converged[-1].changed:>13}"
            + (f"  {base.seconds:>10.1f}  {base.controller_cpu:>13.1f}  {base.seconds / med(r.converged):>7.1f}x"
               if base else ""))
    if rounds:
        top = max(rounds, key=lambda r: r.nodes)
        ratio = med(top.converged) / med(top.preflight)
        per_node = med(top.converged, "controller_cpu") / top.nodes
        lines.append(f"goals at N={top.nodes}: re-run/preflight {ratio:.2f} (<= 3: {'met' if ratio <= 3 else 'MISSED'}), "
                     f"controller CPU per node {per_node:.2f} s (<= 2: {'met' if per_node <= 2 else 'MISSED'})")
    if rounds and rounds[-1].tasks:
        top = max(rounds, key=lambda r: r.nodes)
        lines += ["", f"where the converged re-run's time goes at N={top.nodes} (profile_tasks, last round):"]
        lines += [f"  {seconds:6.2f} s  {task}" for task, seconds in top.tasks[:10]]
    fits = {
        "converged re-run, controller CPU": fit(rounds, lambda r: med(r.converged, "controller_cpu")),
        "converged re-run, nodes' CPU": fit(rounds, lambda r: med(r.converged, "node_cpu")),
        "converged re-run, wall": fit(rounds, lambda r: med(r.converged)),
        "preflight, wall": fit(rounds, lambda r: med(r.preflight)),
    }
    if any(r.baseline for r in rounds):
        fits.update({
            "baseline re-run, controller CPU": fit(rounds, lambda r: r.baseline.controller_cpu if r.baseline else float("nan")),
            "baseline re-run, nodes' CPU": fit(rounds, lambda r: r.baseline.node_cpu if r.baseline else float("nan")),
        })
    lines += ["", "least-squares fits over N (seconds = per node x N + fixed):"]
    for name, line in fits.items():
        if line:
            lines.append(f"  {name:<34} {line[0]:7.2f} s per node + {line[1]:6.1f} s")
    lines += ["", f"paper model: a {MODEL_CORES}-core controller, forks {MODEL_FORKS}, each node on its own CPUs "
              "(best: per-node controller work on every core; worst: all of it serial):"]
    for label, cpu_key, node_key in (("converged re-run", "converged re-run, controller CPU", "converged re-run, nodes' CPU"),
                                     ("baseline re-run", "baseline re-run, controller CPU", "baseline re-run, nodes' CPU")):
        cpu, nodes_cpu = fits.get(cpu_key), fits.get(node_key)
        if not cpu or not nodes_cpu:
            continue
        cells = []
        for n in MODEL_SIZES:
            best, worst = model(max(cpu[0], 0.0), max(cpu[1], 0.0), max(nodes_cpu[0], 0.0), n)
            cells.append(f"N={n}: {best:.0f}-{worst:.0f} s, controller {max(cpu[1], 0) + max(cpu[0], 0) * n:.0f} CPU s")
        lines.append(f"  {label:<17} " + "; ".join(cells))
    return lines


def measure(nodes: int, burnin: bool, args: argparse.Namespace, out: Path, memory: "MemorySampler") -> Size:
    size = Size(nodes)
    prefix = f"scale{nodes}"

    def after(n: int, inventory: Path, result: sr.SizeResult) -> None:
        if burnin:
            memory.phase = f"N={n} burn-in"
            log(f"N={n}: burn-in, {n} x 2 ranks")
            report = out / f"N{n}-burnin.json"
            size.burnin = sr.run_playbook(REPO / "playbooks" / "burnin.yml", inventory, out / f"N{n}-burnin.log",
                                          {"megatron_launch_burnin_dest": str(report)}, env=env, prefix=prefix)
            size.burnin_report = json.loads(report.read_text()) if report.is_file() else None
            log(f"N={n}: burn-in {size.burnin.seconds:.1f} s, rc={size.burnin.returncode}")
            if size.burnin.returncode:
                size.error = f"burn-in failed (rc {size.burnin.returncode}); see {size.burnin.log}"
        if args.rerun_here:
            memory.phase = "converged re-runs"
            args.rerun_results = rerun_rounds([r for r in args.rerun_nodes if r <= n], prefix, args, out, env)
        if args.preflight_here:
            memory.phase = "preflight vs ping"
            args.preflight_results = preflight_rounds([p for p in args.preflight_nodes if p <= n], prefix, args, out)

    def phase(name: str) -> None:
        memory.phase = name

    # ansible.cfg's fact cache (jsonfile, gathering=smart), as a user's re-run has it, but one per
    # size: fresh nodes must not inherit another run's facts.
    env = {"ANSIBLE_CACHE_PLUGIN_CONNECTION": str(out / f"facts-{nodes}")}
    result = sr.bench_size(nodes, REPO / "site.yml", out, args.keep, prefix=prefix, group_vars=scale_group_vars,
                           profile_rerun=True, env=env, after=after, phase_hook=phase)
    size.cold, size.rerun, size.load_before = result.cold, result.rerun, result.load_before
    size.error = result.error or size.error
    if result.rerun:
        size.rerun_tasks = sr.task_times((out / f"N{nodes}-rerun.log").read_text())
    return size


def growth(base: Size, big: Size, top: int = 12) -> List[str]:
    """The re-run tasks whose time grew most from `base` to `big`, with their ratio."""
    rows = []
    for task, seconds in big.rerun_tasks.items():
        before = base.rerun_tasks.get(task, 0.0)
        rows.append((seconds - before, task, before, seconds))
    rows.sort(reverse=True)
    return ["  %+6.2f s  %6.2f -> %6.2f s  (x%s)  %s" % (d, b, s, ("%.1f" % (s / b)) if b > 0.005 else "-", t)
            for d, t, b, s in rows[:top]]


def report(sizes: List[Size], peaks: Dict[str, float], preflight: List[pvp.SizeResult], repeat: int,
           reruns: Optional[List[RerunRound]] = None, baseline: Optional[str] = None) -> str:
    mem_total = int(Path("/proc/meminfo").read_text().split()[1]) / 1024 / 1024
    lines = [f"scale benchmark, {time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs, {mem_total:.1f} GiB memory "
             "(controller and every simulated node share them)", "",
             f"{'nodes':>5}  {'cold s':>7}  {'re-run s':>8}  {'re-run/cold':>11}  {'changed re-run':>14}  {'load':>5}"
             f"  {'CPU s, controller / nodes: cold':>31}  {'re-run':>13}"]
    for s in sizes:
        if s.cold and s.rerun:
            lines.append(f"{s.nodes:>5}  {s.cold.seconds:>7.1f}  {s.rerun.seconds:>8.1f}  "
                         f"{s.rerun.seconds / s.cold.seconds:>11.3f}  {s.rerun.changed:>14}  {s.load_before:>5.1f}"
                         f"  {s.cold.controller_cpu:>23.1f} / {s.cold.node_cpu:<5.1f}"
                         f"  {s.rerun.controller_cpu:>5.1f} / {s.rerun.node_cpu:<5.1f}")
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
            lines += ["", f"burn-in at N={s.nodes}: {r.get('world')} ranks, {s.burnin.seconds:.1f} s wall, "
                      f"nodes' CPU {s.burnin.node_cpu:.0f} s, loss "
                      f"{r.get('initial_loss')} -> {r.get('final_loss')}, {'passed' if r.get('passed') else 'FAILED'}"]
            for node, row in sorted(r.get("nodes", {}).items()):
                lines.append(f"  {node:<16} {row.get('tokens_per_s') or 0:>9.1f} tokens/s  ({row.get('ranks')} ranks)")
    if reruns:
        lines += rerun_report(reruns, baseline)
    if peaks:
        lines += ["", "memory used on the machine, peak per phase (GiB of %.1f):" % mem_total]
        lines += [f"  {phase:<28} {peak:5.1f}" for phase, peak in peaks.items()]
    if preflight:
        lines += ["", "preflight vs ping on the first N provisioned nodes (bench/preflight_vs_ping.py's rounds):",
                  pvp.table(preflight, "site.yml", repeat)]
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, nargs="+", default=[1, 8],
                   help="sizes; the burn-in and the preflight rounds run at the largest")
    p.add_argument("--preflight-nodes", type=int, nargs="+", default=[1, 3, 8],
                   help="preflight vs ping on the first N nodes of the largest size, for each N")
    p.add_argument("--rerun-nodes", type=int, nargs="+", default=[1, 3, 8],
                   help="converged re-runs of site.yml on the first N nodes of the largest size, for each N")
    p.add_argument("--repeat", type=int, default=3, help="timed preflight vs ping rounds and converged re-runs per N")
    p.add_argument("--baseline", metavar="REF",
                   help="also time REF's playbooks/preflight.yml and REF's site.yml re-run (e.g. main)")
    p.add_argument("--skip-rerun", action="store_true", help="no converged re-run rounds")
    p.add_argument("--with-import", action="store_true", help="also time python_probe=import (slow)")
    p.add_argument("--skip-preflight", action="store_true")
    p.add_argument("--skip-burnin", action="store_true", help="no burn-in at the largest size")
    p.add_argument("--keep", action="store_true", help="leave the nodes running")
    args = p.parse_args(argv)
    if min(args.nodes) < 1 or min(args.preflight_nodes) < 1 or min(args.rerun_nodes) < 1 or args.repeat < 1:
        p.error("every size and --repeat must be at least 1")
    if not args.skip_rerun and max(args.rerun_nodes) > max(args.nodes):
        p.error("--rerun-nodes %s: the largest is more than the largest --nodes (%d)" % (args.rerun_nodes, max(args.nodes)))
    if not args.skip_preflight and max(args.preflight_nodes) > max(args.nodes):
        p.error("--preflight-nodes %s: the largest is more than the largest --nodes (%d)"
                % (args.preflight_nodes, max(args.nodes)))
    out = REPO / "bench" / "results" / time.strftime("scale-%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    args.baseline_tree = pvp.unpack_baseline(args.baseline, out) if args.baseline else None
    args.no_import = not args.with_import
    args.preflight_results = []
    args.rerun_results = []
    memory = MemorySampler()
    memory.start()
    sizes = []
    for n in sorted(set(args.nodes)):
        args.preflight_here = n == max(args.nodes) and not args.skip_preflight
        args.rerun_here = n == max(args.nodes) and not args.skip_rerun
        sizes.append(measure(n, n == max(args.nodes) and not args.skip_burnin, args, out, memory))
    memory.stop()
    text = report(sizes, memory.peaks, args.preflight_results, args.repeat, args.rerun_results, args.baseline)
    print(text)
    (out / "summary.txt").write_text(text + "\n")
    (out / "summary.json").write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "cpus": os.cpu_count(), "command": " ".join(sys.argv),
        "baseline": args.baseline, "sizes": [asdict(s) for s in sizes], "memory_peaks_gib": memory.peaks,
        "reruns": [asdict(r) for r in args.rerun_results],
        "preflight_vs_ping": [dict(asdict(r), medians={name: r.median(name) for name in pvp.COMMANDS}, ratio=r.ratio,
                                   ratio_baseline=r.ratio_of("preflight_baseline")) for r in args.preflight_results],
    }, indent=2) + "\n")
    log(f"logs and summary in {out.relative_to(REPO)}")
    missing_preflight = not args.skip_preflight and not args.preflight_results
    missing_rerun = not args.skip_rerun and not args.rerun_results
    return 1 if any(s.error for s in sizes) or missing_preflight or missing_rerun else 0


if __name__ == "__main__":
    sys.exit(main())
