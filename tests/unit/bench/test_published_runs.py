# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The planner's time model against published A100 runs (bench/published/megatron_runs.json,
through bench/published_runs.py): every row within 15%, the A100 fraction the one the fit rows
give, and the FLOPs count the sources use."""
import importlib.util
import os

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import plan

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("published_runs", os.path.join(HERE, "..", "..", "..", "bench", "published_runs.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)

ROWS = bench.load()


def test_the_rows_carry_their_sources_and_both_roles():
    assert len(ROWS) >= 8
    assert {row["role"] for row in ROWS} == {"fit", "check"}
    for row in ROWS:
        assert row["source"] and row["evidence"], row["id"]
        assert row["published"].get("tflops_per_gpu") or row["published"].get("iteration_s"), row["id"]


@pytest.mark.parametrize("row", ROWS, ids=[row["id"] for row in ROWS])
def test_prediction_within_15_percent_of_the_published_run(row):
    result = bench.predict(row)
    assert abs(result["error"]) <= 0.15, "%s: predicted %.2f s per iteration (%s), published %s: %+.1f%%" % (
        row["id"], result["step_s"], result["layout"], result["published"], 100 * result["error"])


def test_the_a100_fraction_is_the_fit_of_the_fit_rows():
    assert plan.GPUS["A100-80GB"]["achieved_fraction"] == pytest.approx(bench.fit(ROWS), abs=0.0051)


@pytest.mark.parametrize("row_id, seconds, tflops", [
    # Both sources print an iteration time beside the TFLOP/s they computed from it.
    ("megatron-readme-gpt3-175B-1024gpu", 32.0, 138.0),
    ("bloom176b-production", 104.70, 149.77),
])
def test_eq3_flops_give_the_sources_own_tflops(row_id, seconds, tflops):
    row = next(r for r in ROWS if r["id"] == row_id)
    assert bench.eq3_flops(row) / seconds / row["gpus"] / 1e12 == pytest.approx(tflops, rel=0.005)


def test_the_plans_stated_uncertainty_is_the_published_rows_error():
    errors = [bench.predict(row)["error"] for row in ROWS]
    low, high, what = plan.MODEL_ERROR["A100-80GB"]
    assert (low, high) == (pytest.approx(min(errors), abs=0.0015), pytest.approx(max(errors), abs=0.0015))
    assert str(len(ROWS)) in what
    assert plan.uncertainty("A100-80GB") == "the model's throughput was -12.1% to +6.5% of 16 published A100 runs"
    assert "never checked" in plan.uncertainty("B200")
