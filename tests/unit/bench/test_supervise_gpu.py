# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/gpu/supervise_gpu.py: reading Megatron-DeepSpeed's log per launch, comparing the losses a
resumed run logs again, and the recorded H200 result (bench/gpu/h200_supervise) it reported."""
import importlib.util
import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "..", "bench", "gpu")
_spec = importlib.util.spec_from_file_location("supervise_gpu", os.path.join(BENCH, "supervise_gpu.py"))
sup = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sup)


def _line(iteration, loss):
    # as Megatron-DeepSpeed HEAD printed it on the H200 host (bench/gpu/h200_supervise)
    return (" iteration %8d/  100000 | consumed samples: %12d | consumed tokens: %12d | elapsed time per iteration "
            "(ms): 109.2 | learning rate: 6.000E-05 | global batch size:    16 | lm loss: %E | loss scale: 1.0 |"
            % (iteration, 16 * iteration, 32768 * iteration, loss))


@pytest.mark.parametrize("first, second, step, same, diff", [
    # resumed from the tag at 3 after logging 5: iterations 4-5 logged twice, the same losses
    ([(1, 9.0), (2, 8.5), (3, 8.0), (4, 7.5), (5, 7.0)], [(4, 7.5), (5, 7.0), (6, 6.5)], 3, [4, 5], 0.0),
    # a different loss at 5 after the resume is measured, not hidden
    ([(1, 9.0), (2, 8.5), (3, 8.0), (4, 7.5), (5, 7.0)], [(4, 7.5), (5, 7.25)], 3, [4, 5], 0.25),
    # nothing logged past the tag before the fault: nothing to compare
    ([(1, 9.0), (2, 8.5)], [(3, 8.0)], 2, [], None),
])
def test_runs_and_compare(tmp_path, first, second, step, same, diff):
    log = tmp_path / "train.log"
    lines = ["=== megatron_launch 2026-12-01T18:01:00Z: start pretrain_gpt.py /w/train.sh"]
    lines += [_line(i, l) for i, l in first]
    lines += ["=== megatron_launch 2026-12-01T18:02:00Z: launcher exited rc=137",
              "=== megatron_launch 2026-12-01T18:02:05Z: start pretrain_gpt.py /w/train.sh"]
    lines += [_line(i, l) for i, l in second]
    log.write_text("\n".join(lines) + "\n")
    assert sup.runs(str(log)) == [first, second]
    assert sup.last_iteration(str(log)) == second[-1][0]
    got = sup.compare(str(log), step)
    assert got["same_iterations"] == same and got["resumed_first"] == second[0][0]
    assert got["loss_at_tag"] == dict(first).get(step)
    assert got["max_abs_diff"] == (pytest.approx(diff) if diff is not None else None)


def test_recorded_h200_result_is_what_docs_cite():
    with open(os.path.join(BENCH, "h200_supervise", "supervise_gpu.json")) as handle:
        result = json.load(handle)
    faults = [f for f in result["figures"] if f.get("fault") != "startup"]
    assert result["ok"] and [f["resumed_step"] for f in faults] == [50, 60]
    assert faults[1]["damaged"] == "global_step70"
    for fault in faults:
        assert fault["loss"]["max_abs_diff"] == 0.0 and fault["loss"]["same_iterations"]
        assert fault["iterations_lost"] <= 2 * result["vars"]["megatron_job_save_interval"]
