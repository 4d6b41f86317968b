# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_megatron_log: the one reader of Megatron-DeepSpeed's training_log lines (job status, launch
wait, job_probe and the monitoring exporter all call it).

Two kinds of lines: published ones, read from
tests/fixtures/published-excerpts/megatron-deepspeed-training-log.txt (real runs), and lines made
by running ``training_log``'s format strings (megatron/training.py) on chosen values, for the
cases no published log shows: NaN losses (Python prints a NaN through ``{:.6E}`` as ``NAN`` and
through ``{:.3f}`` as ``nan``), a bf16 NaN on HEAD (which drops a loss whose average is not > 0,
so the line has no loss and a NaN grad norm), fp16 skipped steps, and before_rebase (no tgs).
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import log as ml

PUBLISHED = (Path(__file__).resolve().parents[4] / "fixtures" / "published-excerpts"
             / "megatron-deepspeed-training-log.txt").read_text().splitlines()
DS_TIMER, MDS_768, DS_LOG_DIST, MDS_1536, RANK7_NO_TOKENS, BIGSCIENCE_SECONDS = PUBLISHED


def _line(it="10/     100", loss=" lm loss: 1.012345E+01 |", scale=" loss scale: 1.0 |", grad=" grad norm: 3.456 |",
          skipped=0, nan=0, tgs=" tokens per gpu per second (tgs): 5042.400 |"):
    """training_log's format strings, field for field, on the values given."""
    return (" iteration       %s | consumed samples:           80 | consumed tokens:       163840 |"
            " elapsed time per iteration (ms): 812.3 | learning rate: 6.000E-05 | global batch size:     8 |"
            "%s%s%s actual seqlen:  2048 | number of skipped iterations: %3d | number of nan iterations: %3d |"
            " samples per second: 9.849 |%s TFLOPs: 120.45 |" % (it, loss, scale, grad, skipped, nan, tgs))


HEALTHY = _line()
NAN_LOSS = _line(loss=" lm loss: NAN |", grad=" grad norm: nan |")
BF16_NAN_HEAD = _line(loss="", grad=" grad norm: nan |")
FP16_NAN_SKIPPED = _line(scale=" loss scale: 16384.0 |", grad="", skipped=3, nan=1)
FP16_OVERFLOW = _line(scale=" loss scale: 8192.0 |", skipped=2)
BEFORE_REBASE_PDSH = "node1: " + _line(it="200/    1000", scale=" loss scale: 65536.0 |", tgs="")
MOE = _line(loss=" lm loss: 7.500000E+00 | moe loss: 1.200000E-02 |")


@pytest.mark.parametrize("line, expected", [
    (MDS_768, {"iteration": 199, "train_iters": 317892, "consumed_samples": 152832, "consumed_tokens": 625999872,
               "iteration_time_ms": 14287.5, "learning_rate": 2.407e-4, "global_batch_size": 768,
               "lm_loss": 5.905366, "losses": {"lm loss": 5.905366}, "loss_scale": 8192.0, "seq_length": 4096,
               "skipped_iterations": 0, "nan_iterations": 0, "samples_per_second": 53.753,
               "tokens_per_gpu_per_second": 1146.733, "tflops": 69.85}),
    (MDS_1536, {"iteration": 5, "train_iters": 10, "loss_scale": 4294967296.0, "grad_norm": 0.0,
                "lm_loss": 11.00078, "tflops": 153.38}),
    (RANK7_NO_TOKENS, {"iteration": 4, "train_iters": 30517, "consumed_samples": 64, "iteration_time_ms": 15232.8,
                       "grad_norm": 36.543, "tokens_per_gpu_per_second": 537.788}),
    # The BigScience fork prints seconds: read as milliseconds like every other line.
    (BIGSCIENCE_SECONDS, {"iteration": 13910, "iteration_time_ms": 11180.0, "num_zeros": 0.0,
                          "consumed_tokens": 29171384320, "lm_loss": 2.152785}),
    (HEALTHY, {"iteration": 10, "train_iters": 100, "consumed_samples": 80, "iteration_time_ms": 812.3,
               "learning_rate": 6.0e-5, "global_batch_size": 8, "loss_scale": 1.0, "grad_norm": 3.456,
               "seq_length": 2048, "skipped_iterations": 0, "nan_iterations": 0, "samples_per_second": 9.849,
               "tokens_per_gpu_per_second": 5042.4, "tflops": 120.45, "losses": {"lm loss": 10.12345}}),
    (FP16_NAN_SKIPPED, {"iteration": 10, "loss_scale": 16384.0, "skipped_iterations": 3, "nan_iterations": 1}),
    (BEFORE_REBASE_PDSH, {"iteration": 200, "train_iters": 1000, "tflops": 120.45, "lm_loss": 10.12345}),
    (MOE, {"losses": {"lm loss": 7.5, "moe loss": 0.012}, "lm_loss": 7.5}),
], ids=["published-768", "published-1536-grad-norm-0", "published-rank-prefix", "published-seconds",
        "healthy", "fp16-nan-skipped", "before-rebase-pdsh", "moe-second-loss"])
def test_iteration_lines_are_read_field_by_field(line, expected):
    record = ml.parse_iteration(line)
    for key, value in expected.items():
        assert record[key] == (pytest.approx(value) if isinstance(value, float) else value), key


@pytest.mark.parametrize("line, absent", [
    (MDS_768, "grad_norm"),                        # no grad norm printed (fp16 without clipping stats)
    (RANK7_NO_TOKENS, "consumed_tokens"),
    (FP16_NAN_SKIPPED, "grad_norm"),
    (BEFORE_REBASE_PDSH, "tokens_per_gpu_per_second"),
    (BF16_NAN_HEAD, "lm_loss"),
])
def test_fields_a_line_lacks_stay_absent(line, absent):
    assert absent not in ml.parse_iteration(line)


@pytest.mark.parametrize("line, kind", [
    (MDS_768, int), (MDS_1536, int),
])
def test_integer_fields_stay_integers(line, kind):
    record = ml.parse_iteration(line)
    assert isinstance(record["global_batch_size"], kind) and isinstance(record["consumed_samples"], kind)


@pytest.mark.parametrize("line", [
    "",
    DS_TIMER,
    DS_LOG_DIST,
    "[before the start of training step] datetime: 2026-11-29 17:22:50",
    " validation loss at iteration 100 | lm loss value: 7.1E+00 | lm loss PPL: 1.2E+03 |",
    "time (ms) | forward-compute: 300.1 | backward-compute: 500.2",
    "[Rank 0] (after 10 iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0",
    "iteration 10 of 100",
], ids=["empty", "ds-timer", "ds-log-dist", "datetime", "validation", "timers", "memory", "prose"])
def test_other_lines_are_not_iterations(line):
    assert ml.parse_iteration(line) is None


@pytest.mark.parametrize("line, nonfinite", [
    (MDS_768, False),
    (MDS_1536, False),
    (BIGSCIENCE_SECONDS, False),
    (HEALTHY, False),
    (NAN_LOSS, True),
    (BF16_NAN_HEAD, True),
    (FP16_NAN_SKIPPED, True),     # a skipped step whose loss was inf/NaN
    (FP16_OVERFLOW, False),       # overflow skips without NaN are routine in fp16
    (BEFORE_REBASE_PDSH, False),
], ids=["published-768", "published-1536", "published-seconds", "healthy", "nan-loss", "bf16-nan-head",
        "fp16-nan-iteration", "fp16-overflow", "before-rebase"])
def test_nonfinite_intervals(line, nonfinite):
    assert ml.is_nonfinite(ml.parse_iteration(line)) is nonfinite


@pytest.mark.parametrize("text, expected", [
    ("8", 8), ("  152832", 152832), ("-3", -3), ("812.3", 812.3), ("6.000E-05", 6e-5), ("1.0", 1.0),
    ("n/a", None), ("", None),
])
def test_parse_number(text, expected):
    value = ml.parse_number(text)
    assert value == expected and type(value) is type(expected)


@pytest.mark.parametrize("text, check", [("NAN", math.isnan), ("nan", math.isnan), ("-INF", math.isinf),
                                         ("inf", math.isinf)])
def test_parse_number_reads_python_nan_and_inf_spellings(text, check):
    assert check(ml.parse_number(text))
