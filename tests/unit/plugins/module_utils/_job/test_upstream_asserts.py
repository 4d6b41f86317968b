# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Megatron-DeepSpeed's option checks as data (plugins/module_utils/_job/upstream_asserts.py):
every row refuses its own case and passes a legal job, and, where a checkout and a venv are given
(MEGATRON_DS_SRC, MEGATRON_DS_PYTHON), upstream itself refuses each row's example at the row's
own line, so a row that disagrees with upstream fails here."""
from __future__ import annotations

import re
import subprocess

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import upstream_asserts as ua
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import oracle
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds.args import BEFORE_REBASE, HEAD, split_args
from ansible_collections.megatron_ds.cluster.tests.support import upstream

# A legal job (the simulated cluster's, 6 ranks), as the job model renders it.
BASE = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "128",
        "--max-position-embeddings", "128", "--micro-batch-size", "1", "--global-batch-size", "12",
        "--train-iters", "20", "--lr", "0.0001", "--lr-warmup-iters", "2", "--lr-decay-iters", "20",
        "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000", "--tensor-model-parallel-size", "1",
        "--pipeline-model-parallel-size", "1", "--deepspeed", "--deepspeed_config", "ds_config.json",
        "--zero-stage", "1"]
DS_CONFIG = {"train_batch_size": 12, "train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 1}}

# Rows whose case cannot be made by adding options to BASE: the flags given by hand.
BY_HAND = {
    "zero-bubble pipeline needs DeepSpeed": ["--enable-zbh1-pipeline", "--train-iters", "5"],
    "sample-based decay": ["--train-samples", "100", "--lr-decay-iters", "10"],
    "sample-based warmup": ["--train-samples", "100", "--lr-warmup-iters", "10"],
    "one fp8 format": ["--fp8-e4m3", "--fp8-hybrid", "--transformer-impl", "transformer_engine"],
    "a layer count": ["--hidden-size", "64", "--seq-length", "128"],
    "a sequence length": ["--num-layers", "2", "--hidden-size", "64"],
}


def flags_of(argv, era=HEAD):
    out = {}
    for parsed in split_args(argv, era):
        out.setdefault(parsed.flag, []).append(parsed.values)
    return out


def case(row):
    return BY_HAND.get(row.check) or BASE + list(row.example)


def test_every_row_has_a_case_and_a_line():
    for row in ua.ROWS:
        assert row.example or row.check in BY_HAND, row.check
        assert row.lines and set(row.lines) <= {HEAD, BEFORE_REBASE}, row.check
    assert len({row.check for row in ua.ROWS}) == len(ua.ROWS)


@pytest.mark.parametrize("row", ua.ROWS, ids=[row.check for row in ua.ROWS])
def test_each_row_refuses_its_case(row):
    era = HEAD if HEAD in row.lines else BEFORE_REBASE
    found = [f for f in ua.refusals(flags_of(case(row), era), era) if f["check"] == row.check]
    assert len(found) == 1
    assert found[0]["status"] == "fail"
    assert "megatron/arguments.py:%d" % row.lines[era] in found[0]["fix"]


@pytest.mark.parametrize("era", [HEAD, BEFORE_REBASE])
def test_a_legal_job_passes_every_row(era):
    assert ua.refusals(flags_of(BASE, era), era) == []


@pytest.mark.parametrize("argv, era, checks", [
    # a row of the head era alone says nothing in the cu117 era
    (BASE + ["--enable-zbh1-exact-semantics"], BEFORE_REBASE, []),
    (BASE + ["--fp16-lm-cross-entropy"], BEFORE_REBASE, ["fp16 cross entropy needs --fp16"]),
    (BASE + ["--fp16", "--fp16-lm-cross-entropy"], HEAD, []),
    (BASE + ["--bf16", "--fp32-residual-connection"], HEAD, []),
    (BASE + ["--weight-decay-incr-style", "cosine", "--start-weight-decay", "0.1", "--end-weight-decay", "0.0"], HEAD, []),
    (BASE + ["--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-split-rank", "1"], HEAD, []),
    (BASE + ["--pipeline-model-parallel-size", "4", "--num-layers-per-virtual-pipeline-stage", "1"], HEAD, []),
    (BASE + ["--accumulate-allreduce-grads-in-fp32"], HEAD, []),
])
def test_legal_and_era_cases(argv, era, checks):
    assert [f["check"] for f in ua.refusals(flags_of(argv, era), era)] == checks


def test_rows_for_matches_the_options_read():
    assert [r.check for r in ua.rows_for(["--fp16", "--fp16-lm-cross-entropy"])] == ["fp16 cross entropy needs --fp16"]
    assert ua.rows_for(["--nothing"]) == []


@upstream.needs_upstream
@pytest.mark.parametrize("row", [r for r in ua.ROWS if HEAD in r.lines and r.check not in BY_HAND],
                         ids=[r.check for r in ua.ROWS if HEAD in r.lines and r.check not in BY_HAND])
def test_upstream_refuses_each_case_at_the_rows_line(row):
    """The oracle: the checkout's own validate_args refuses the row's case, first at the row's line
    (or at an earlier row's line that the case also breaks, as the static rules say too)."""
    argv = case(row)
    request = {"megatron_dir": upstream.SOURCE, "argv": argv, "world_size": 6, "ds_config": DS_CONFIG, "env": {}}
    proc = subprocess.run([upstream.PYTHON, oracle.__file__, oracle.encode_request(request)],
                          capture_output=True, text=True, check=False, timeout=600)
    verdict = oracle.parse_output(proc.stdout)
    assert verdict["ran"], verdict["reason"]
    assert verdict["findings"], "upstream accepts %s" % argv
    where = verdict["findings"][0]["where"]
    line = int(re.match(r"megatron/arguments\.py:(\d+)$", where).group(1))
    static = sorted(ua.refusals(flags_of(argv), HEAD), key=lambda f: int(re.search(r":(\d+) at", f["fix"]).group(1)))
    assert static, "no static row refuses %s" % argv
    assert "megatron/arguments.py:%d " % line in static[0]["fix"], (where, static[0])
