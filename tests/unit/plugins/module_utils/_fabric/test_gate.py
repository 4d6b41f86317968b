# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The burn-in's all-reduce gate: its figure at large sizes against the threshold of its scope."""
from __future__ import annotations

import json

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import gate

MIB = 1 << 20
HDR = "200 Gb/sec (4X HDR)"


def _port(rate, state="4: ACTIVE", hca="mlx5_0"):
    return {"hca": hca, "port": "1", "state": state, "rate": rate, "link_layer": "InfiniBand"}


@pytest.mark.parametrize("facts, rates", [
    ({"ports": [_port(HDR), _port(HDR, state="1: DOWN"), _port("")]}, [HDR]),
    ({"ports": []}, []),
    ({}, []),
    (None, []),
])
def test_active_rates(facts, rates):
    assert gate.active_rates(facts) == rates


def _result(rows, tool="gloo", ranks=6, algorithm=None):
    return {"rank": 0, "allreduce_gate": {"tool": tool, "ranks": ranks, "algorithm": algorithm, "results": rows}}


def _row(size, busbw, wrong=0):
    return {"size": size, "time_us": 1000.0, "algbw": busbw * 0.6, "busbw": busbw, "wrong": wrong}


SOCKETS = {"node1": {}, "node2": {}, "node3": {}}
HDR_NODES = {"node1": {"ports": [_port(HDR)] * 2}, "node2": {"ports": [_port(HDR)]}}


@pytest.mark.parametrize("results, facts, kwargs, passed, line", [
    pytest.param([_result([_row(64 * MIB, 0.41)])], SOCKETS, {}, True,
                 "world all-reduce over 3 nodes (gloo, 6 ranks, 64 MiB): 0.41 GB/s measured, expected no threshold: "
                 "not gated (no active HCA port rate on node1, node2, node3)", id="sim-cluster-not-gated"),
    pytest.param([_result([_row(64 * MIB, 0.41)])], SOCKETS, {"override": 0.3}, True,
                 "0.41 GB/s measured, expected >= 0.3 GB/s (site override: set by the site): PASS", id="site-passes"),
    # A link at half its rate: half the site's figure.
    pytest.param([_result([_row(64 * MIB, 0.2)])], SOCKETS, {"override": 0.3}, False,
                 "0.2 GB/s measured, expected >= 0.3 GB/s (site override: set by the site): FAIL", id="site-fails"),
    # The slowest node (one HDR port) sets 25 GB/s x 0.8.
    pytest.param([_result([_row(256 * MIB, 19.0)], tool="nccl", algorithm="Ring")], HDR_NODES, {}, False,
                 "19 GB/s measured, expected >= 20 GB/s (detected hardware: slowest node node2: 1 port(s) x 200 Gb/s",
                 id="below-the-slowest-node"),
    pytest.param([_result([_row(256 * MIB, 40.0)], tool="nccl", algorithm=None)], HDR_NODES, {}, False,
                 "FAIL: cross-node all-reduce ran with NCCL_ALGO=unset", id="nccl-without-ring"),
    # nccl-tests#212: only the small size was measured, so there is no figure to pass.
    pytest.param([_result([_row(4 * MIB, 9.0)])], SOCKETS, {"override": 0.3}, False,
                 "(gloo, 6 ranks, no size of 64 MiB or more): no figure measured", id="small-sizes-only"),
    pytest.param([_result([_row(64 * MIB, 0.5, wrong=3)])], SOCKETS, {"override": 0.3}, False,
                 "FAIL: 3 wrong element(s)", id="wrong-sum"),
    pytest.param([_result([_row(64 * MIB, 3.0)], ranks=2)], {"node1": {}}, {}, True,
                 "all-reduce within the node (gloo, 2 ranks, 64 MiB): 3 GB/s measured, expected no threshold",
                 id="one-node-no-links-known"),
    pytest.param([{"rank": 0, "allreduce_gate": None}], SOCKETS, {}, True, "not measured", id="not-measured"),
    pytest.param([], SOCKETS, {}, True, "not measured", id="no-results"),
])
def test_burnin_gate(results, facts, kwargs, passed, line):
    verdict = gate.burnin_gate(results, facts, **kwargs)
    assert verdict["passed"] is passed
    assert line in verdict["line"], verdict["line"]


@pytest.mark.parametrize("nodes, results, addresses, ranks", [
    # The world first: one rank per node, rank 0 on the first node's cluster address.
    (["n1", "n2", "n3"], [], {"n1": "10.0.0.1"},
     {"n1": (0, 3, "10.0.0.1", 29610), "n2": (1, 3, "10.0.0.1", 29610), "n3": (2, 3, "10.0.0.1", 29610)}),
    # Two halves in one round: a port each, rank 0 on each half's first node (its name without an address).
    (["n1", "n2", "n3", "n4"], [{"nodes": ["n1", "n2", "n3", "n4"], "passed": False}], {},
     {"n1": (0, 2, "n1", 29610), "n2": (1, 2, "n1", 29610), "n3": (0, 2, "n3", 29611), "n4": (1, 2, "n3", 29611)}),
    # Done: nobody runs.
    (["n1", "n2"], [{"nodes": ["n1", "n2"], "passed": True}], {}, {}),
])
def test_bisect_round(nodes, results, addresses, ranks):
    step = gate.bisect_round(nodes, results, addresses, 29610)
    assert {node: (r["rank"], r["world"], r["master"], r["port"]) for node, r in step["ranks"].items()} == ranks
    assert step["done"] == (not ranks)


DOC = {"tool": "gloo", "ranks": 2, "algorithm": None,
       "results": [{"size": 64 << 20, "time_us": 1.0, "algbw": 0.5, "busbw": 0.5, "wrong": 0}]}
TWO_PORTS = {"ports": [{"state": "4: ACTIVE", "rate": "200 Gb/sec (4X HDR)"}, {"state": "4: ACTIVE", "rate": "200 Gb/sec (4X HDR)"}]}


@pytest.mark.parametrize("stdout, expected", [
    ("noise\nFABRIC_ALLREDUCE %s\n" % json.dumps(DOC), DOC),
    ("", None),
    ("FABRIC_ALLREDUCE_NOT {}", None),
])
def test_probe_document(stdout, expected):
    assert gate.probe_document(stdout) == expected


@pytest.mark.parametrize("facts, override, passed, expected, origin", [
    # One rank per node drives one port: 200 Gb/s = 25 GB/s x 0.8, not both ports' 40.
    ({"a": TWO_PORTS, "b": TWO_PORTS}, None, False, 20.0, "detected hardware"),
    ({"a": TWO_PORTS, "b": TWO_PORTS}, 0.4, True, 0.4, "site override"),
    ({}, None, True, None, "detected hardware"),  # no HCA, no figure: printed, not gated
])
def test_round_results_judge_each_group(facts, override, passed, expected, origin):
    outputs = {"a": {"stdout": "FABRIC_ALLREDUCE %s" % json.dumps(DOC), "rc": 0}, "b": {"stdout": "", "rc": 0}}
    [result] = gate.round_results([["a", "b"]], outputs, facts, 0.8, override)
    assert (result["nodes"], result["passed"], result["measured"]) == (["a", "b"], passed, 0.5)
    assert (result["threshold"]["expected"], result["threshold"]["origin"]) == (expected, origin)
    assert result["line"].startswith("all-reduce over a+b, one rank per node (gloo, 2 ranks, 64 MiB): 0.5 GB/s measured")
    # Measured against expected with the threshold's origin, or why there is no threshold.
    if expected is None:
        assert "expected no threshold: not gated (no active HCA port rate on a, b)" in result["line"]
    else:
        assert "expected >= %.4g GB/s (%s: " % (expected, origin) in result["line"]


def test_a_group_without_figures_stops_the_bisection_naming_each_rank():
    outputs = {"a": {"stdout": "", "stderr": "ModuleNotFoundError: No module named 'torch'", "rc": 1},
               "b": {"rc": 1, "msg": "Timeout exceeded"}}
    with pytest.raises(ValueError, match=r"over a\+b gave no figures \(a: rc 1: ModuleNotFoundError.*; b: rc 1: Timeout exceeded\)"):
        gate.round_results([["a", "b"]], outputs, {})
