# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric gate against a link made slow on purpose: N network namespaces ("nodes") on one
bridge, every link shaped with `tc tbf` to the same rate, one node's link (both directions) to a
fraction of it; then the gate's bisection, with the play's own probe and modules
(roles/megatron_launch/files/fabric_allreduce.py, module_utils/_fabric gate, bisect, verdict),
must name that node within ceil(log2 N) + 2 rounds; before that, with every link at the same
rate, every healthy run must pass.

    sudo python tests/chaos/fabric_netns.py [--nodes 4] [--rate-mbit 1000] [--slow node3]
        [--slow-factor 0.5] [--healthy-runs 10] [--report fabric-chaos.json]

Root, iproute2 with `tc` and the kernel's sch_tbf, and a python with torch (gloo) are needed.
Why namespaces and not the Docker nodes: shaping needs NET_ADMIN on the link (the Docker nodes
have only SYS_ADMIN) and the nodes' venv with torch takes a converge of its own; a namespace
has its own interfaces, routes and qdiscs, which is all the gate measures. The threshold is the
shaped rate x --fraction, given as the site's figure: namespaces have no HCA for the gate to read
a port rate from. gloo's 4-rank all-reduce over TCP reaches about 0.8 of a shaped link (0.099 to
0.119 GB/s of 0.125 measured), the gate's default 0.8 would fail healthy runs, so `make
chaos-fabric` gives 0.7 (a link at half the rate measures about 0.47 of it).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time
from typing import Any, Dict, List, Optional

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROBE = ROOT / "roles" / "megatron_launch" / "files" / "fabric_allreduce.py"
PREFIX = "mdsfab"
SUBNET = "10.231.77"


def sh(*argv: str) -> None:
    subprocess.run(list(argv), check=True, capture_output=True, text=True)


def netns(node: str) -> str:
    return "%s-%s" % (PREFIX, node)


def up(nodes: List[str]) -> Dict[str, str]:
    """The namespaces, the bridge (in a namespace of its own: nothing of the host's network is touched) and the links."""
    switch = netns("sw")
    sh("ip", "netns", "add", switch)
    sh("ip", "-n", switch, "link", "add", "br0", "type", "bridge")
    sh("ip", "-n", switch, "link", "set", "br0", "up")
    addresses = {}
    for index, node in enumerate(nodes, start=1):
        space = netns(node)
        sh("ip", "netns", "add", space)
        sh("ip", "-n", space, "link", "set", "lo", "up")
        inner, outer = "%sn%d" % (PREFIX, index), "%ss%d" % (PREFIX, index)
        sh("ip", "link", "add", inner, "type", "veth", "peer", "name", outer)
        sh("ip", "link", "set", inner, "netns", space)
        sh("ip", "link", "set", outer, "netns", switch)
        sh("ip", "-n", switch, "link", "set", outer, "master", "br0")
        sh("ip", "-n", switch, "link", "set", outer, "up")
        addresses[node] = "%s.%d" % (SUBNET, index)
        sh("ip", "-n", space, "addr", "add", addresses[node] + "/24", "dev", inner)
        sh("ip", "-n", space, "link", "set", inner, "up")
    return addresses


def shape(nodes: List[str], rate_mbit: float, slow: Optional[str], factor: float) -> Dict[str, float]:
    """tbf on both ends of every node's link: the node's egress (inside) and its ingress (the switch's egress)."""
    rates = {}
    for index, node in enumerate(nodes, start=1):
        rate = rate_mbit * (factor if node == slow else 1.0)
        # The bucket holds 10 ms at the rate (at least 64 KiB): a smaller one caps below the rate.
        burst = max(int(rate * 1e6 / 8 / 100), 64 * 1024)
        for space, dev in ((netns(node), "%sn%d" % (PREFIX, index)), (netns("sw"), "%ss%d" % (PREFIX, index))):
            sh("ip", "netns", "exec", space, "tc", "qdisc", "replace", "dev", dev, "root", "tbf",
               "rate", "%dkbit" % int(rate * 1000), "burst", str(burst), "latency", "100ms")
        rates[node] = rate
    return rates


def down(nodes: List[str]) -> None:
    for node in list(nodes) + ["sw"]:
        subprocess.run(["ip", "netns", "del", netns(node)], capture_output=True, check=False)


def measure_round(python: str, nodes: List[str], step: Dict[str, Any], mib: str, timeout: int) -> Dict[str, Any]:
    """Every rank of the round at once, each in its node's namespace; {node: stdout, stderr, rc}."""
    running = {}
    for node, rank in step["ranks"].items():
        index = nodes.index(node) + 1
        env = dict(os.environ, GLOO_SOCKET_IFNAME="%sn%d" % (PREFIX, index), OMP_NUM_THREADS="1")
        running[node] = subprocess.Popen(
            ["ip", "netns", "exec", netns(node), python, "-u", str(PROBE), "--rank", str(rank["rank"]),
             "--world", str(rank["world"]), "--master", rank["master"], "--port", str(rank["port"]),
             "--mib", mib, "--backend", "gloo", "--timeout", str(timeout)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    outputs = {}
    for node, proc in running.items():
        out, err = proc.communicate(timeout=timeout + 60)
        outputs[node] = {"stdout": out, "stderr": err, "rc": proc.returncode}
    return outputs


def bisect_once(python: str, nodes: List[str], addresses: Dict[str, str], min_gbps: float, mib: str,
                timeout: int, port: int) -> Dict[str, Any]:
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import gate, verdict

    results: List[Dict[str, Any]] = []
    started = time.monotonic()
    while True:
        step = gate.bisect_round(nodes, results, addresses, port)
        if step["done"]:
            break
        outputs = measure_round(python, nodes, step, mib, timeout)
        results.extend(gate.round_results(step["measure"], outputs, {}, override=min_gbps))
        port += len(step["measure"])  # a port closed a moment ago may still linger in TIME_WAIT
    document = verdict.build(nodes, results, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.time())
    document["seconds"] = round(time.monotonic() - started, 1)
    return document


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--rate-mbit", type=float, default=1000.0)
    parser.add_argument("--slow", default="node3")
    parser.add_argument("--slow-factor", type=float, default=0.5)
    parser.add_argument("--fraction", type=float, default=0.8)
    parser.add_argument("--healthy-runs", type=int, default=10)
    parser.add_argument("--mib", default="64")
    parser.add_argument("--timeout", type=int, default=120)
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--report", default="")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / ".collections"))
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import bisect

    nodes = ["node%d" % index for index in range(1, args.nodes + 1)]
    # The gate's figure for a link of this rate: its bytes per second x the gate's fraction.
    min_gbps = round(args.rate_mbit / 8.0 / 1000.0 * args.fraction, 4)
    down(nodes)
    report: Dict[str, Any] = {"nodes": nodes, "rate_mbit": args.rate_mbit, "min_gbps": min_gbps,
                              "slow": args.slow, "slow_factor": args.slow_factor, "round_bound": bisect.node_round_bound(len(nodes)),
                              "healthy": [], "slow_run": None}
    try:
        addresses = up(nodes)
        shape(nodes, args.rate_mbit, None, 1.0)
        for run in range(args.healthy_runs):
            document = bisect_once(args.python, nodes, addresses, min_gbps, args.mib, args.timeout, 29700 + run * 50)
            world = document["world"] or {}
            report["healthy"].append({"healthy": document["healthy"], "rounds": document["rounds"],
                                      "world_gbps": world.get("measured"), "seconds": document["seconds"],
                                      "named": sorted(document["named"])})
            print("healthy run %d: %s" % (run + 1, world.get("line")), flush=True)
        shape(nodes, args.rate_mbit, args.slow, args.slow_factor)
        document = bisect_once(args.python, nodes, addresses, min_gbps, args.mib, args.timeout, 29700 + args.healthy_runs * 50)
        report["slow_run"] = {key: document[key] for key in ("healthy", "rounds", "round_bound", "culprit_nodes", "culprit_links",
                                                             "ambiguous", "named", "lines", "seconds")}
        for line in document["lines"]:
            print(line, flush=True)
    finally:
        down(nodes)
    healthy_ok = all(run["healthy"] for run in report["healthy"])
    slow = report["slow_run"] or {}
    named_ok = (sorted(slow.get("named") or {}) == [args.slow] and int(slow.get("rounds") or 99) <= report["round_bound"])
    report["passed"] = healthy_ok and named_ok
    print("healthy runs passed: %d/%d; slow %s named: %s in %s round(s) (bound %d)" % (
        sum(1 for run in report["healthy"] if run["healthy"]), len(report["healthy"]), args.slow,
        sorted(slow.get("named") or {}), slow.get("rounds"), report["round_bound"]), flush=True)
    if args.report:
        pathlib.Path(args.report).write_text(json.dumps(report, indent=2, sort_keys=True) + "\n")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
