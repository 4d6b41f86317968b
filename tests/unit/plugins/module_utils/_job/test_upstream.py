# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job as the upstream oracle is asked about it (plugins/module_utils/_job/upstream.py)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import files as _job_files
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import upstream
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job.schema import JobError
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import oracle
from ansible_collections.megatron_ds.cluster.tests.support import upstream as upstream_support

SPEC = {"stack_profile": "cpu", "gpus_per_node": 2, "tensor_parallel": 1, "pipeline_parallel": 1, "zero_stage": 1,
        "num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "seq_length": 128,
        "max_position_embeddings": 128, "micro_batch_size": 1, "global_batch_size": 12, "precision": "fp32",
        "tokenizer_type": "NullTokenizer", "vocab_size": 1000}


@pytest.mark.parametrize("nodes, given, world", [(3, {}, 6), (None, {"nodes": 2}, 4), (1, {"nodes": 2}, 2)])
def test_request_is_what_train_sh_passes(nodes, given, world):
    spec = dict(SPEC, **given)
    request = upstream.request(spec, nodes=nodes, megatron_dir="/m")
    job = dict(spec, nodes=world // 2)
    assert request["argv"] == _job_args.train_args(job)
    assert request["ds_config"] == _job_args.ds_config(job)
    assert request["env"] == _job_files.deepspeed_env(job)
    assert request["world_size"] == world and request["megatron_dir"] == "/m"
    assert request["args_defaults"] == {"tokenizer_type": "GPT2BPETokenizer"}
    assert oracle.decode_request(upstream.encoded_request(spec, nodes=nodes, megatron_dir="/m")) == request


def test_request_needs_the_node_count():
    with pytest.raises(JobError, match="needs the node count"):
        upstream.request(SPEC)


@pytest.mark.parametrize("verdict, rows", [
    ({"ran": False, "reason": "cannot import"}, []),
    ({"ran": True, "findings": [], "data_parallel": 6, "versions": {"deepspeed": "0.19.6"}},
     [("pass", "-", "accepted (data parallel 6, DeepSpeed 0.19.6)")]),
    ({"ran": True, "findings": [oracle.finding("megatron", "assert", "x does not hold", "megatron/arguments.py:75",
                                               ["--hidden-size", "--num-attention-heads"])]},
     [("fail", "upstream: Megatron-DeepSpeed validate_args (megatron/arguments.py:75)",
       "--hidden-size --num-attention-heads")]),
    ({"ran": True, "findings": [oracle.finding("deepspeed", "DeepSpeedConfigError", "bad batch")]},
     [("fail", "upstream: DeepSpeed DeepSpeedConfig", "-")]),
])
def test_findings(verdict, rows):
    got = upstream.findings(verdict)
    assert len(got) == len(rows)
    for finding, (status, check_or_found, found) in zip(got, rows):
        assert finding["status"] == status
        if status == "fail":
            assert finding["check"] == check_or_found and finding["found"] == found
            assert finding["fix"].startswith("upstream: ")
        else:
            assert finding["found"] == found


def test_verdict_adds_the_lines():
    stdout = oracle.MARKER + '{"ran": true, "findings": [{"source": "deepspeed", "kind": "a", "message": "m", ' \
                             '"where": "", "flags": [], "line": ""}]}\n'
    assert upstream.verdict(stdout)["lines"] == ["DeepSpeed refuses the job: m"]


def test_run_oracle_reports_a_python_that_cannot_run():
    got = upstream.run_oracle({"megatron_dir": "/m", "argv": [], "world_size": 1}, "/nonexistent/python")
    assert got["ran"] is False and "cannot run /nonexistent/python" in got["reason"]


@upstream_support.needs_upstream
def test_the_rendered_job_is_what_upstream_accepts():
    """The job model's own argument list and ds_config for the simulated cluster pass upstream."""
    got = upstream.run_oracle(upstream.request(SPEC, nodes=3, megatron_dir=upstream_support.SOURCE),
                              upstream_support.PYTHON)
    assert got["ran"], got["reason"]
    assert got["findings"] == [] and got["data_parallel"] == 6


@pytest.mark.parametrize("text, era", [
    ("def parse_args(extra_args_provider=None, defaults={},\n               ignore_unknown_args=False):\n", "before_rebase"),
    ("import os\n\ndef parse_args(extra_args_provider=None, ignore_unknown_args=False):\n", "head"),
    ("def parse_args(args=None):\n", None),
    ("", None),
    (None, None),
])
def test_checkout_era(text, era):
    assert upstream.checkout_era(text) == era


@pytest.mark.parametrize("job_era, found, ds_version, ds_era, words", [
    ("before_rebase", "head", None, None, ["cannot judge", "before_rebase era", "is the head era", "9446eaac"]),
    ("head", "before_rebase", None, None, ["cannot judge", "is the before_rebase era", "4efb479d"]),
    ("head", None, None, None, ["like neither era"]),
    ("before_rebase", "before_rebase", "0.19.6", "head", ["DeepSpeed 0.19.6", "head era", "profile's DeepSpeed"]),
    ("head", "head", "0.19.6", "head", None),
    ("before_rebase", "before_rebase", None, None, None),
])
def test_era_mismatch(job_era, found, ds_version, ds_era, words):
    said = upstream.era_mismatch(job_era, "/src/mds", found, ds_version, ds_era)
    assert (said is None) if words is None else all(word in said for word in words), said


@pytest.mark.skipif(not os.path.isfile(os.path.join(upstream_support.SOURCE, "megatron", "arguments.py")),
                    reason="no Megatron-DeepSpeed checkout: set MEGATRON_DS_SRC to one")
def test_checkout_era_of_a_real_checkout():
    with open(os.path.join(upstream_support.SOURCE, "megatron", "arguments.py"), encoding="utf-8") as handle:
        assert upstream.checkout_era(handle.read()) in ("head", "before_rebase")


@pytest.mark.parametrize("result, said", [
    ({"stages": [{"stage": "microbatches", "ran": True}, {"stage": "tokenizer", "ran": False, "reason": "no files"},
                 {"stage": "data split", "ran": True}]},
     ", then the start-up's microbatches, tokenizer (not run: no files), data split"),
    ({"stages": []}, ""),
    ({}, ""),
])
def test_stages_said(result, said):
    assert upstream.stages_said(result) == said


def test_a_start_up_refusal_names_its_stage_and_what_the_line_also_reads():
    result = {"ran": True, "findings": [{"source": "megatron", "stage": "tokenizer", "message": "m",
                                         "where": "megatron/tokenizer/tokenizer.py:40", "flags": ["--tokenizer-type"],
                                         "reads": ["--vocab-size", "--tokenizer-type"]}]}
    row = upstream.findings(result)[0]
    assert row["check"] == "upstream: Megatron-DeepSpeed start-up (tokenizer) (megatron/tokenizer/tokenizer.py:40)"
    assert row["found"] == "--tokenizer-type" and "(the line also reads --vocab-size)" in row["fix"]
