# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/scale.py's paper model and its fits: the per-node costs taken from the re-run rounds, the
wall time they give for a larger cluster, and the report's goal lines."""
import importlib.util
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "..", "bench"))
_spec = importlib.util.spec_from_file_location("scale", os.path.join(HERE, "..", "..", "..", "bench", "scale.py"))
bench = importlib.util.module_from_spec(_spec)
sys.modules["scale"] = bench  # dataclasses look their module up while the class is built
_spec.loader.exec_module(bench)
sr = bench.sr


def _run(seconds, ctrl, nodes_cpu, changed=0):
    return sr.Run(seconds=seconds, returncode=0, changed=changed, failed=0, unreachable=0, hosts=1, log="x",
                  controller_cpu=ctrl, node_cpu=nodes_cpu)


def _round(n, seconds, ctrl, nodes_cpu, pf, base=None):
    r = bench.RerunRound(n, converged=[_run(seconds, ctrl, nodes_cpu)] * 3, preflight=[_run(pf, 1, 1)] * 3)
    if base:
        r.baseline = _run(*base)
    return r


@pytest.mark.parametrize("nodes, best, worst", [
    (1, 3.0 + 1.0 / 16 + 2.0, 3.0 + 1.0 + 2.0),
    (32, 3.0 + 32.0 / 16 + 2.0, 3.0 + 32.0 + 2.0),
    (33, 3.0 + 33.0 / 16 + 4.0, 3.0 + 33.0 + 4.0),
    (128, 3.0 + 128.0 / 16 + 8.0, 3.0 + 128.0 + 8.0),
])
def test_model_spreads_the_controller_over_cores_and_the_nodes_over_forks(nodes, best, worst):
    assert bench.model(1.0, 3.0, 2.0, nodes) == pytest.approx((best, worst))


def test_model_with_fewer_forks_than_cores_uses_the_forks():
    assert bench.model(1.0, 0.0, 0.0, 64, cores=16, forks=8) == pytest.approx((8.0, 64.0))


def test_fit_takes_the_median_of_each_round_and_skips_missing_baselines():
    rounds = [_round(1, 10, 4.0, 1.0, 5), _round(3, 12, 6.0, 3.0, 6), _round(8, 17, 11.0, 8.0, 8)]
    slope, fixed = bench.fit(rounds, lambda r: bench.RerunRound.median(r.converged, "controller_cpu"))
    assert slope == pytest.approx(1.0) and fixed == pytest.approx(3.0)
    assert bench.fit(rounds, lambda r: r.baseline.seconds if r.baseline else float("nan")) is None


def test_rerun_report_says_whether_the_goals_are_met():
    rounds = [_round(1, 10, 4.0, 1.0, 5, (60, 20, 30)), _round(3, 12, 6.0, 3.0, 6, (150, 50, 90)),
              _round(8, 17, 11.0, 8.0, 8, (300, 130, 320))]
    text = "\n".join(bench.rerun_report(rounds, "main"))
    assert "goals at N=8: re-run/preflight 2.12 (<= 3: met), controller CPU per node 1.38 s (<= 2: met)" in text
    assert "converged re-run, controller CPU      1.00 s per node +    3.0 s" in text
    assert "baseline re-run" in text and "N=128:" in text
    assert "17.6x" in text  # 300 / 17 at N=8


def test_rerun_report_flags_a_missed_goal():
    rounds = [_round(1, 30, 4.0, 1.0, 5), _round(8, 40, 40.0, 8.0, 8)]
    assert "(<= 3: MISSED), controller CPU per node 5.00 s (<= 2: MISSED)" in "\n".join(bench.rerun_report(rounds, None))
