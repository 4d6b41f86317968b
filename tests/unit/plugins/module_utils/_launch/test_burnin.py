# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_launch.burnin: the burn-in report (per-node figures, slow nodes, problems) and its table."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import burnin as la_burnin

from .launch_fixtures import burnin_result as _result


def test_burnin_report_passes_a_healthy_run():
    results = [_result(h, r) for r, h in enumerate(["n1", "n1", "n2", "n2"])]
    report = la_burnin.burnin_report(results, node_count=2, ranks_per_node=2)
    assert report["problems"] == [] and report["slow_nodes"] == []
    assert report["nodes"]["n1"]["tokens_per_s"] == 200.0 and report["nodes"]["n1"]["tflops"] == 1.0
    assert report["loss_went_down"] is True and report["world"] == 4
    assert la_burnin.burnin_table(report)[1].split()[:3] == ["n1", "2", "200.0"]


@pytest.mark.parametrize("results, expected", [
    # n3 is 20% below the median probe figure
    ([_result("n1", 0), _result("n2", 1), _result("n3", 2, probe_tokens_per_s=160.0)], ["n3: 20.0% slower"]),
    # 9% below: within the threshold
    ([_result("n1", 0), _result("n2", 1), _result("n3", 2, probe_tokens_per_s=182.0)], []),
])
def test_burnin_report_flags_a_node_slower_than_the_median(results, expected):
    report = la_burnin.burnin_report(results, node_count=3, ranks_per_node=1, threshold=0.10)
    assert [m[:len(e)] for m, e in zip(report["slow_messages"], expected)] == expected
    assert report["slow_nodes"] == [e.split(":")[0] for e in expected]
    assert report["problems"] == []


@pytest.mark.parametrize("results, node_count, ranks, problem", [
    ([_result("n1", 0, final_loss=6.3)], 1, 1, "loss did not go down"),
    ([_result("n1", 0, initial_loss=None)], 1, 1, "loss did not go down"),
    ([_result("n1", 0), _result("n2", 1)], 3, 1, "results from 2 host(s) (n1, n2), expected 3 nodes"),
    ([_result("n1", 0), _result("n2", 1)], 2, 2, "n1: 1 rank(s) reported, expected 2"),
    ([_result("n2", 1)], 1, 1, "no BURNIN_RESULT from global rank 0"),
])
def test_burnin_report_problems(results, node_count, ranks, problem):
    report = la_burnin.burnin_report(results, node_count=node_count, ranks_per_node=ranks)
    assert any(p.startswith(problem) for p in report["problems"]), report["problems"]


def _cal(matmul, node, world):
    return {"matmul_tflops": matmul, "node_busbw_gbps": node, "world_busbw_gbps": world}


@pytest.mark.parametrize("hosts, calibrations, expected", [
    # Two hosts: the slowest rank's matmul, the slowest node's NVLink, the world across the fabric.
    (["n1", "n1", "n2", "n2"], [_cal(700.0, 350.0, 40.0), _cal(710.0, 352.0, 41.0), _cal(690.0, 340.0, 39.5),
                                _cal(705.0, 341.0, 40.2)],
     {"matmul_tflops": 690.0, "nvlink_busbw_gbps": 340.0, "internode_busbw_gbps": 39.5, "ranks": 4, "hosts": 2}),
    # One host: the world is the node, no inter-node figure.
    (["n1", "n1"], [_cal(700.0, 350.0, 351.0), _cal(701.0, 352.0, 350.0)],
     {"matmul_tflops": 700.0, "nvlink_busbw_gbps": 350.0, "internode_busbw_gbps": None, "ranks": 2, "hosts": 1}),
    # One rank per host (groups of one): no NVLink figure; an old burn-in without calibration: None.
    (["n1", "n2"], [_cal(300.0, None, 20.0), {}],
     {"matmul_tflops": 300.0, "nvlink_busbw_gbps": None, "internode_busbw_gbps": 20.0, "ranks": 2, "hosts": 2}),
])
def test_burnin_report_calibration_takes_the_slowest(hosts, calibrations, expected):
    results = []
    for rank, (host, cal) in enumerate(zip(hosts, calibrations)):
        result = _result(host, rank)
        if cal:
            result["calibration"] = cal
        results.append(result)
    calibration = la_burnin.burnin_report(results)["calibration"]
    assert {k: calibration[k] for k in expected} == expected


@pytest.mark.parametrize("boots, slow, noted", [
    # Three containers on one machine: one kernel, so n3's deficit is not a slow node.
    (["b1", "b1", "b1"], [], True),
    # Three machines: n3 is slow.
    (["b1", "b2", "b3"], ["n3"], False),
    # An older burn-in without boot ids: judged as before.
    ([None, None, None], ["n3"], False),
])
def test_nodes_on_one_kernel_are_not_called_slow(boots, slow, noted):
    results = [_result("n1", 0, boot_id=boots[0]), _result("n2", 1, boot_id=boots[1]),
               _result("n3", 2, boot_id=boots[2], probe_tokens_per_s=120.0)]
    report = la_burnin.burnin_report(results, node_count=3, ranks_per_node=1)
    assert report["slow_nodes"] == slow
    assert bool(report["slow_note"]) == noted
    if noted:
        assert report["slow_messages"] == [] and "share one kernel" in la_burnin.burnin_table(report)[-1]
    assert report["nodes"]["n3"]["below_median"] == pytest.approx(0.4)
