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
