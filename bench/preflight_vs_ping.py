#!/usr/bin/env python3
"""Benchmark: playbooks/preflight.yml against `ansible -m ping` on the same simulated nodes.

Issue 6 sets the goal: preflight costs at most 1.5 x a plain `ansible -m ping` of the same
nodes, whatever the number of nodes. For each N (default 1, 3, 6) this script:

  1. grows the simulated cluster to N nodes (scripts/sim-cluster, prefix `pfbench`, its own
     Docker network) and writes an inventory with the preflight settings of
     molecule/preflight_drift (profile `cpu`, the venv, the checkout, the training user);
  2. provisions the nodes with that scenario's prepare.yml and converge.yml (--stack full, the
     default): the training user and ssh trust, chrony, the torch CPU + DeepSpeed venv, the
     CUDA/cuDNN/NCCL files and the checkout. Both playbooks are idempotent, so growing from 3
     to 6 nodes provisions only the new ones. With --stack bare the nodes stay as sim-cluster
     starts them (no venv: the facts skip the torch import, and the ssh sweep fails);
  3. runs each command once to warm up (first imports write byte code, ssh masters start),
     then --repeat rounds of, in turn, `ansible megatron_nodes -m ansible.builtin.ping`, the
     facts module alone without the venv, with the venv read from its files
     (python_probe=files, the default) and with the venv imported (python_probe=import:
     torch and DeepSpeed imported on every node), then `ansible-playbook
     playbooks/preflight.yml` in both modes (-e preflight_python_probe=files|import). It
     keeps the median of each.

It prints one table: nodes, the medians (with min-max), preflight / ping in both modes against
the goal (the default, files mode, is the one held to it), the machine's load, and the
preflight verdict. Preflight's verdict does not matter for its cost,
but the table says it.
(On machines whose Docker engine cannot grant unlimited memlock, memlock.unlimited fails
everywhere.) Logs and a JSON summary go to bench/results/preflight_vs_ping-<timestamp>/.
The simulated nodes share this machine's cores, so the imports in the facts step of N nodes
compete for them; on a real cluster every node imports on its own CPUs.

With --baseline REF (a commit, e.g. main), the same rounds also run REF's playbooks/preflight.yml
with REF's own plugins (unpacked with `git archive` under the results directory), so a change is
measured before and after, side by side, on the same nodes and under the same load.

    bench/preflight_vs_ping.py [--nodes 1 3 6] [--repeat 3] [--stack full|bare] [--baseline REF] [--no-import] [--keep]

bench/scale.py calls time_rounds() on the nodes it provisioned with site.yml.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parents[1]
SIM_CLUSTER = REPO / "scripts" / "sim-cluster"
SCENARIO = REPO / "molecule" / "preflight_drift"
GOAL = 1.5
# The job settings playbooks/preflight.yml reads, as in molecule/preflight_drift/molecule.yml.
GROUP_VARS = {
    "megatron_stack_profile": "cpu",
    "megatron_job_venv": "/opt/megatron/venv",
    "megatron_job_megatron_dir": "/opt/megatron/Megatron-DeepSpeed",
    "cluster_ssh_user": "megatron",
}
SUMMARY = re.compile(r"preflight (passed|FAILED) for profile \S+ on \d+ node\(s\): [^\n]*?(?= [A-Z]+ |$| PLAY RECAP)")


def log(msg: str) -> None:
    print(f"bench: {msg}", file=sys.stderr, flush=True)


def tool(name: str) -> str:
    """The Ansible executable next to this Python (the project's venv), else the one on PATH."""
    local = Path(sys.executable).parent / name
    return str(local) if local.exists() else name


def env(tree: Optional[Path] = None) -> Dict[str, str]:
    """Ansible's environment; ``tree`` is a baseline checkout whose config and collection win."""
    result = dict(os.environ)
    if tree is not None:
        result.update(ANSIBLE_CONFIG=str(tree / "ansible.cfg"), ANSIBLE_COLLECTIONS_PATH=str(tree / ".collections"))
    result.setdefault("ANSIBLE_CONFIG", str(REPO / "ansible.cfg"))
    # Each size is a different set of containers under reused names: no fact cache across them.
    result.update(ANSIBLE_CACHE_PLUGIN="memory", ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    return result


@dataclass
class Timed:
    seconds: float
    returncode: int
    verdict: str = ""


COMMANDS = ("ping", "facts_no_venv", "facts", "facts_import", "preflight", "preflight_import", "preflight_baseline")


@dataclass
class SizeResult:
    nodes: int
    runs: Dict[str, List[Timed]] = field(default_factory=lambda: {name: [] for name in COMMANDS})
    loads: List[float] = field(default_factory=list)  # 1-minute load average before each round
    provision_seconds: float = 0.0

    def median(self, name: str) -> Optional[float]:
        runs = self.runs[name]
        return statistics.median(r.seconds for r in runs) if runs else None

    def ratio_of(self, name: str) -> Optional[float]:
        ping, other = self.median("ping"), self.median(name)
        if ping and other is not None:
            return other / ping
        return None

    @property
    def ratio(self) -> Optional[float]:
        """preflight / ping in the default mode (python_probe=files): the one the goal is for."""
        return self.ratio_of("preflight")


def run(argv: List[str], logfile: Path, check: bool = True, tree: Optional[Path] = None) -> Timed:
    started = time.monotonic()
    with logfile.open("a") as handle:
        handle.write("$ %s\n" % " ".join(argv))
        handle.flush()
        proc = subprocess.run(argv, cwd=str(tree or REPO), env=env(tree), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=False)
        handle.write(proc.stdout)
    seconds = time.monotonic() - started
    if check and proc.returncode != 0:
        raise SystemExit(f"bench: `{' '.join(argv)}` failed (exit {proc.returncode}); see {logfile}")
    match = SUMMARY.search(" ".join(proc.stdout.split()))  # the summary line may be wrapped
    return Timed(seconds, proc.returncode, match.group(0).split("; report:")[0] if match else "")


def write_inventory(directory: Path, nodes: int, prefix: str, logfile: Path) -> Path:
    inventory = directory / "hosts.yml"
    run([sys.executable, str(SIM_CLUSTER), "inventory", "--nodes", str(nodes), "--prefix", prefix,
         "--output", str(inventory)], logfile)
    group_vars = directory / "group_vars"
    group_vars.mkdir(exist_ok=True)
    (group_vars / "megatron_nodes.yml").write_text(
        "---\n# Written by bench/preflight_vs_ping.py: molecule/preflight_drift's job settings.\n"
        + "".join(f"{key}: {value}\n" for key, value in GROUP_VARS.items()))
    return inventory


def measure(size: int, args: argparse.Namespace, out: Path) -> SizeResult:
    logfile = out / f"nodes-{size}.log"
    result = SizeResult(nodes=size)
    log(f"{size} node(s): starting the simulated cluster")
    run([sys.executable, str(SIM_CLUSTER), "up", "--nodes", str(size), "--prefix", args.prefix], logfile)
    inventory = write_inventory(out / f"inventory-{size}", size, args.prefix, logfile)
    if args.stack == "full":
        log(f"{size} node(s): provisioning the preflight_drift stack (prepare.yml, converge.yml)")
        started = time.monotonic()
        for playbook in ("prepare.yml", "converge.yml"):
            run([tool("ansible-playbook"), "-i", str(inventory), str(SCENARIO / playbook)], logfile)
        result.provision_seconds = time.monotonic() - started
    time_rounds(result, inventory, args, logfile)
    return result


def time_rounds(result: SizeResult, inventory: Path, args: argparse.Namespace, logfile: Path) -> SizeResult:
    """The warm-up and the timed rounds on the nodes of ``inventory`` (already provisioned).
    ``args``: repeat, baseline_tree (or None) and no_import (skip the import-mode commands)."""
    adhoc = [tool("ansible"), "megatron_nodes", "-i", str(inventory)]
    facts = adhoc + ["-m", "megatron_ds.cluster.gpu_stack_facts", "--become", "-a"]
    commands = {
        "ping": (adhoc + ["-m", "ansible.builtin.ping"], True),
        "facts_no_venv": (facts + [json.dumps({"megatron_dir": GROUP_VARS["megatron_job_megatron_dir"]})], True),
        "facts": (facts + [json.dumps({"venv": GROUP_VARS["megatron_job_venv"], "python_probe": "files",
                                       "megatron_dir": GROUP_VARS["megatron_job_megatron_dir"]})], True),
        "facts_import": (facts + [json.dumps({"venv": GROUP_VARS["megatron_job_venv"], "python_probe": "import",
                                              "megatron_dir": GROUP_VARS["megatron_job_megatron_dir"]})], True),
        "preflight": ([tool("ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "preflight.yml"),
                       "-e", "preflight_python_probe=files"], False),
        "preflight_import": ([tool("ansible-playbook"), "-i", str(inventory), str(REPO / "playbooks" / "preflight.yml"),
                              "-e", "preflight_python_probe=import"], False),
    }
    if getattr(args, "no_import", False):
        del commands["facts_import"], commands["preflight_import"]
    trees: Dict[str, Optional[Path]] = {name: None for name in commands}
    if args.baseline_tree:
        commands["preflight_baseline"] = ([tool("ansible-playbook"), "-i", str(inventory),
                                           str(args.baseline_tree / "playbooks" / "preflight.yml"),
                                           "-e", "preflight_python_probe=files"], False)
        trees["preflight_baseline"] = args.baseline_tree
    size = result.nodes
    log(f"{size} node(s): warming up")
    for name, (argv, check) in commands.items():
        run(argv, logfile, check=check, tree=trees[name])
    for index in range(args.repeat):
        log(f"{size} node(s): round {index + 1}/{args.repeat}")
        result.loads.append(os.getloadavg()[0])
        for name, (argv, check) in commands.items():
            result.runs[name].append(run(argv, logfile, check=check, tree=trees[name]))
    return result


def unpack_baseline(ref: str, out: Path) -> Path:
    """REF's tree, plugins included (.collections links back to its root), unpacked once under ``out``."""
    tree = out / "baseline"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", ref], stdout=subprocess.PIPE, check=True)
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    # The wheelhouse and the other caches are git-ignored: REF's playbooks find this checkout's.
    (tree / ".cache").symlink_to(REPO / ".cache")
    return tree


def fmt(values: List[Timed]) -> str:
    if not values:
        return "-"
    seconds = sorted(r.seconds for r in values)
    return "%.1f (%.1f-%.1f)" % (statistics.median(seconds), seconds[0], seconds[-1])


def table(results: List[SizeResult], stack: str, repeat: int) -> str:
    columns = "%-6s %-15s %-15s %-15s %-15s %-15s %-15s %-15s %-8s %-9s %-5s %-9s %-5s %s"
    lines = [
        f"preflight vs ping, simulated nodes (stack: {stack}), median of {repeat} rounds, seconds (min-max);"
        f" files = python_probe=files (default), import = python_probe=import; goal: preflight (files) <= {GOAL}x ping",
        columns % ("nodes", "ping", "facts, no venv", "facts, files", "facts, import", "preflight files",
                   "preflight import", "pf baseline", "pf/ping", "base/ping", "goal", "pf-imp/p", "load",
                   "preflight verdict (files)"),
    ]
    for r in results:
        ratio, ratio_import, ratio_base = r.ratio, r.ratio_of("preflight_import"), r.ratio_of("preflight_baseline")
        last = r.runs["preflight"][-1] if r.runs["preflight"] else None
        verdict = (last.verdict or "exit %d" % last.returncode) if last else ""
        lines.append(columns % (
            r.nodes, fmt(r.runs["ping"]), fmt(r.runs["facts_no_venv"]), fmt(r.runs["facts"]), fmt(r.runs["facts_import"]),
            fmt(r.runs["preflight"]), fmt(r.runs["preflight_import"]), fmt(r.runs["preflight_baseline"]),
            "%.2fx" % ratio if ratio else "-", "%.2fx" % ratio_base if ratio_base else "-",
            "ok" if ratio is not None and ratio <= GOAL else "MISS",
            "%.2fx" % ratio_import if ratio_import else "-",
            "%.1f" % statistics.mean(r.loads) if r.loads else "-", verdict))
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 3, 6])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--stack", choices=("full", "bare"), default="full")
    parser.add_argument("--prefix", default="pfbench")
    parser.add_argument("--keep", action="store_true", help="leave the simulated nodes running")
    parser.add_argument("--baseline", metavar="REF", help="also time REF's playbooks/preflight.yml (e.g. main)")
    parser.add_argument("--no-import", action="store_true",
                        help="skip the python_probe=import commands (the slowest; not held to the goal)")
    args = parser.parse_args()
    if args.repeat < 1 or min(args.nodes) < 1:
        parser.error("--repeat and every --nodes value must be at least 1")

    out = REPO / "bench" / "results" / time.strftime("preflight_vs_ping-%Y%m%d-%H%M%S")
    out.mkdir(parents=True)
    args.baseline_tree = unpack_baseline(args.baseline, out) if args.baseline else None
    results: List[SizeResult] = []
    try:
        # Ascending: sim-cluster grows the cluster, and the playbooks provision only new nodes.
        for size in sorted(set(args.nodes)):
            results.append(measure(size, args, out))
    finally:
        if not args.keep:
            run([sys.executable, str(SIM_CLUSTER), "down", "--prefix", args.prefix], out / "down.log", check=False)
    report = table(results, args.stack, args.repeat)
    print(report)
    summary = {
        "stack": args.stack,
        "baseline": args.baseline,
        "command": " ".join(sys.argv),
        "repeat": args.repeat,
        "goal_ratio": GOAL,
        "host": os.uname().nodename,
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "results": [dict(asdict(r), medians={name: r.median(name) for name in COMMANDS}, ratio=r.ratio,
                         ratio_import=r.ratio_of("preflight_import"), ratio_baseline=r.ratio_of("preflight_baseline"))
                    for r in results],
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "table.txt").write_text(report + "\n")
    log(f"logs and summary in {out.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
