#!/usr/bin/env python3
"""Benchmark: how often the megatron_ds.cluster.job lookup runs, and what it costs, in one
`ansible-playbook playbooks/status.yml` over N hosts (default 8) on this machine.

The hosts are inventory names that all use the local connection (ansible_connection: local,
this Python), so every task really runs, reading an empty work directory: status.yml reports
"no job" per node, which costs the same templating as a running job. The playbook runs in a
child Python whose LookupBase subclass hook wraps the job lookup's run(): every call appends
its CPU time to a trace file (the forked workers too), and every reading of the job it had to
compute (not answered from its cache) to another. It prints the number of lookup calls,
the CPU seconds spent inside them, and the CPU seconds of the whole ansible-playbook run
(user + system of the child and its workers).

    bench/job_lookup_calls.py [--hosts 8] [--repeat 3] [--playbook playbooks/status.yml]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

REPO = Path(__file__).resolve().parents[1]

# The child: wraps the job lookup's run() as its class is defined, then is ansible-playbook.
CHILD = r"""
import os, sys, time
from ansible.plugins.lookup import LookupBase
trace = os.environ["JOB_LOOKUP_TRACE"]
def _hook(cls, **kwargs):
    if cls.__module__.endswith("megatron_ds.cluster.plugins.lookup.job"):
        inner = cls.run
        def run(self, *args, **kw):
            start = time.process_time()
            try:
                return inner(self, *args, **kw)
            finally:
                with open(trace, "a") as out:
                    out.write("%.6f\n" % (time.process_time() - start))
        cls.run = run
        # The job's reading itself (templating every megatron_job_* variable, the spec
        # normalized): what a call that is not answered from the lookup's cache costs.
        inputs = sys.modules[cls.__module__]._job_inputs
        job = inputs.job
        def counted(*args, **kw):
            with open(trace + ".computed", "a") as out:
                out.write("1\n")
            return job(*args, **kw)
        inputs.job = counted
LookupBase.__init_subclass__ = classmethod(_hook)
from ansible.cli.playbook import main
sys.argv = ["ansible-playbook"] + sys.argv[1:]
main()
"""


def inventory(hosts: int, workdir: Path) -> Dict[str, object]:
    names = {"node%d" % i: {} for i in range(1, hosts + 1)}
    return {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "ansible_become": False, "megatron_stack_profile": "cpu",
                 "megatron_job_workdir": str(workdir / "job")},
        "children": {"megatron_head": {"hosts": {"node1": {}}}, "megatron_nodes": {"hosts": names}},
    }}


def one_run(hosts: int, playbook: str, tmp: Path) -> Dict[str, float]:
    inv = tmp / "hosts.json"
    inv.write_text(json.dumps(inventory(hosts, tmp)))
    trace = tmp / "trace.txt"
    for old in (trace, Path(str(trace) + ".computed")):
        if old.exists():
            old.unlink()
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_NOCOLOR="1", JOB_LOOKUP_TRACE=str(trace))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run([sys.executable, "-c", CHILD, "-i", str(inv), str(REPO / playbook)],
                          capture_output=True, text=True, env=env, cwd=str(REPO), check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if "PLAY RECAP" not in proc.stdout:
        sys.exit("the playbook did not run:\n" + proc.stdout[-3000:] + proc.stderr[-3000:])
    calls = [float(x) for x in trace.read_text().split()] if trace.exists() else []
    computed = Path(str(trace) + ".computed")
    return {"calls": len(calls), "computed": len(computed.read_text().split()) if computed.exists() else 0, "lookup_cpu_s": sum(calls), "rc": proc.returncode,
            "run_cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--playbook", default="playbooks/status.yml")
    args = parser.parse_args()
    runs: List[Dict[str, float]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for _run in range(args.repeat):
            runs.append(one_run(args.hosts, args.playbook, Path(tmp)))
    print("%s, %d hosts, %d runs (rc %s)" % (args.playbook, args.hosts, len(runs), sorted({r["rc"] for r in runs})))
    print("job lookup calls per run: %s, of which computed (not from its cache): %s"
          % (sorted({r["calls"] for r in runs}), sorted({r["computed"] for r in runs})))
    for key in ("lookup_cpu_s", "run_cpu_s"):
        values = [r[key] for r in runs]
        print("%-13s median %.2f s (min %.2f, max %.2f)" % (key, statistics.median(values), min(values), max(values)))


if __name__ == "__main__":
    main()
