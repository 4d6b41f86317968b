# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mixture-of-experts rules (_job.rules_moe) and the expert parameters of the model and the
memory estimate: each refused case with upstream's cite, each beside a legal neighbour."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import memory as _job_memory
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import model as _job_model
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules as _job_rules
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.tests.support.findings import expect

CLUSTER = {"nodes": 8, "gpus_per_node": 8, "gpu_memory_mib": 81920}
HEAD_DS = "0.19.6"
OLD_DS = "0.9.2"
MOE = ["--num-experts", "8", "--moe-expert-parallel-size", "8", "--create-moe-param-group"]


def run(over: Dict[str, Any], version: str = HEAD_DS, ds: Optional[Dict[str, Any]] = None) -> List[Dict[str, str]]:
    spec = _job_spec.normalize(over)
    return _job_rules.validate(spec, ds, dict(CLUSTER), None, version)


def with_moe(extra: List[str], **over: Any) -> Dict[str, Any]:
    spec: Dict[str, Any] = {"extra_args": extra}
    spec.update(over)
    return spec


# (name, spec, version, check, status (None: no such finding), words in the fix or found)
CASES = [
    ("legal MoE: experts pass", with_moe(MOE), HEAD_DS, "experts divisible by expert parallel size", "pass", "8 experts, EP 8"),
    ("legal MoE: groups pass", with_moe(MOE), HEAD_DS, "expert parallel size divides its ranks", "pass", "world / PP = 64"),
    ("legal MoE: param groups", with_moe(MOE), HEAD_DS, "MoE parameter groups", None, ""),
    ("dense: no MoE finding", {}, HEAD_DS, "experts divisible by expert parallel size", None, ""),
    ("one expert: dense", with_moe(["--num-experts", "1"]), HEAD_DS, "experts divisible by expert parallel size", None, ""),
    # deepspeed/moe/layer.py:59 (0.19.6)
    ("experts % EP", with_moe(["--num-experts", "6", "--moe-expert-parallel-size", "4", "--create-moe-param-group"]),
     HEAD_DS, "experts divisible by expert parallel size", "fail", "Number of experts (6) should be divisible by expert parallel size (4)"),
    # megatron/model/transformer.py:1651 at 4efb479d: 40 layers / interval 2 = 20 MoE layers
    ("experts list of 3", with_moe(["--num-experts", "8", "8", "8", "--create-moe-param-group"]), HEAD_DS,
     "--num-experts list length", "fail", "transformer.py:1651"),
    ("experts list of 20", with_moe(["--num-experts"] + ["8"] * 20 + ["--create-moe-param-group"]), HEAD_DS,
     "--num-experts list length", None, ""),
    ("experts list on before_rebase", with_moe(["--num-experts", "8", "8"]), OLD_DS,
     "--num-experts list length", "fail", "transformer.py:666 at 9446eaac"),
    # deepspeed/utils/groups.py:351 (0.19.6): EP divides world / PP
    ("EP does not divide the stage", with_moe(["--num-experts", "48", "--moe-expert-parallel-size", "48",
                                              "--create-moe-param-group"]), HEAD_DS,
     "expert parallel size divides its ranks", "fail", "groups.py:351"),
    # deepspeed/utils/groups.py:568 (0.19.6): with expert TP, EP divides DP (8 here)
    ("expert TP: EP above DP", with_moe(["--num-experts", "16", "--moe-expert-parallel-size", "16",
                                        "--enable-expert-tensor-parallelism", "--create-moe-param-group"]), HEAD_DS,
     "expert parallel size divides its ranks", "fail", "groups.py:568"),
    ("no expert TP: EP 16 of 64", with_moe(["--num-experts", "16", "--moe-expert-parallel-size", "16",
                                           "--create-moe-param-group"]), HEAD_DS,
     "expert parallel size divides its ranks", "pass", ""),
    # deepspeed/runtime/engine.py:1976 (0.19.6)
    ("ZeRO-3", with_moe(MOE, zero_stage=3), HEAD_DS, "MoE under ZeRO-3", "fail",
     "Native DeepSpeed MoE is not supported with ZeRO Stage 3"),
    ("ZeRO-2", with_moe(MOE, zero_stage=2), HEAD_DS, "MoE under ZeRO-3", None, ""),
    # deepspeed/runtime/zero/stage_1_and_2.py:788 (0.19.6)
    ("ZeRO-1 without MoE groups", with_moe(["--num-experts", "8"]), HEAD_DS, "MoE parameter groups", "fail",
     "None of the param groups are marked as MoE"),
    ("ZeRO-0 DDP bf16 without MoE groups", with_moe(["--num-experts", "8"], zero_stage=0), HEAD_DS,
     "MoE parameter groups", None, ""),
    # deepspeed/runtime/bf16_optimizer.py:126 (0.19.6): bf16 without ZeRO under the pipeline engine
    ("ZeRO-0 BF16 optimizer without MoE groups", with_moe(["--num-experts", "8"], zero_stage=0, no_pipeline_parallel=False),
     HEAD_DS, "MoE parameter groups", "fail", "bf16_optimizer.py:126"),
    # deepspeed/runtime/zero/stage_1_and_2.py:781 and 786 (0.19.6)
    ("ZeRO-2 without contiguous gradients", with_moe(MOE, zero_stage=2, zero_contiguous_gradients=False), HEAD_DS,
     "MoE with ZeRO-2 contiguous gradients", "fail", "stage_1_and_2.py:781"),
    ("ZeRO-1 without contiguous gradients", with_moe(MOE, zero_contiguous_gradients=False), HEAD_DS,
     "MoE with ZeRO-2 contiguous gradients", None, ""),
    ("ZeRO-1 without reduce scatter", with_moe(MOE, zero_reduce_scatter=False), HEAD_DS,
     "MoE with ZeRO reduce scatter", "fail", "stage_1_and_2.py:786"),
    # 9446eaac megatron/model/gpt_model.py:230-237: the pipeline model builds no experts
    ("before_rebase pipeline drops experts", with_moe(["--num-experts", "8"], no_pipeline_parallel=False, zero_stage=0),
     OLD_DS, "MoE built by the pipeline model", "warn", "gpt_model.py:230-237"),
    ("before_rebase without the pipeline", with_moe(["--num-experts", "8"]), OLD_DS,
     "MoE built by the pipeline model", None, ""),
]


@pytest.mark.parametrize("spec,version,check,status,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_moe_rule(spec, version, check, status, words):
    findings = run(spec, version)
    expect(findings, check, status, words)


def test_legal_moe_job_has_no_moe_failure():
    findings = run(with_moe(MOE))
    assert not [f for f in findings if f["component"] == "moe" and f["status"] != "pass"]


@pytest.mark.parametrize("pipeline,status", [
    ({"pipe_partitioned": True}, "fail"),
    ({"grad_partitioned": True}, "fail"),
    ({"pipe_partitioned": False, "grad_partitioned": False}, None),
    ({}, None),  # gpt_model.py:381-382 read an absent key as false
])
def test_moe_pipeline_partitioning(pipeline, status):
    # megatron/model/gpt_model.py:383 at 4efb479d: MoE with PP > 1 and TP > 1 under GPTModelPipe
    spec = _job_spec.normalize(with_moe(MOE, tensor_parallel=2, pipeline_parallel=2, no_pipeline_parallel=False), nodes=8)
    ds = _job_args.ds_config(spec)
    ds["pipeline"] = pipeline
    findings = _job_rules.validate(spec, ds, dict(CLUSTER), None, HEAD_DS)
    matches = [f for f in findings if f["check"] == "MoE without pipeline partitioning"]
    if status is None:
        assert not matches
    else:
        assert matches[0]["status"] == status and "Pipe and/or Grad partitioning" in matches[0]["fix"]


GPT_1_3B = {"num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "seq_length": 2048,
            "max_position_embeddings": 2048, "tensor_parallel": 1}


def test_experts_per_layer_is_upstreams():
    moe = _job_model.moe_of(["--num-experts", "4", "--expert-interval", "2"])
    assert _job_model.experts_per_layer(moe, 6) == [1, 4, 1, 4, 1, 4]
    listed = _job_model.moe_of(["--num-experts", "2", "4", "8", "--expert-interval", "2"])
    assert _job_model.experts_per_layer(listed, 6) == [1, 2, 1, 4, 1, 8]
    assert _job_model.experts_per_layer(listed, 8) is None  # 4 MoE layers, 3 counts: upstream asserts
    assert _job_model.moe_of(["--num-experts", "1"]) is None
    assert _job_model.moe_of(["--num-experts", "8", "--num-experts-switch", "8"]) is None


def test_expert_weights_are_counted():
    dense = _job_spec.normalize(GPT_1_3B)
    moe = _job_spec.normalize(dict(GPT_1_3B, extra_args=["--num-experts", "16", "--create-moe-param-group"]))
    h, f = 2048, 4 * 2048
    mlp = 2 * h * f + f + h
    extra = 12 * (15 * mlp + h * 16)  # 24 layers / interval 2; 15 more MLPs and a gate each
    assert _job_model.gpt_parameters(moe) == _job_model.gpt_parameters(dense) + extra
    assert 7.0e9 < _job_model.gpt_parameters(moe) < 7.6e9  # a 1.3B GPT with 16 experts: about 7.4B


def test_memory_counts_local_experts():
    spec = _job_spec.normalize(dict(GPT_1_3B, extra_args=["--num-experts", "16", "--create-moe-param-group"]))
    dense = _job_spec.normalize(GPT_1_3B)
    zero = {"stage": 1}
    derived = _job_spec.derive(spec, 2, 8)
    one_ep = _job_memory.estimate_memory(spec, derived, zero, HEAD_DS)
    spec_ep = _job_spec.normalize(dict(GPT_1_3B, extra_args=["--num-experts", "16", "--moe-expert-parallel-size", "16",
                                                             "--create-moe-param-group"]))
    ep16 = _job_memory.estimate_memory(spec_ep, derived, zero, HEAD_DS)
    base = _job_memory.estimate_memory(dense, _job_spec.derive(dense, 2, 8), zero, HEAD_DS)
    assert one_ep["params_total"] == _job_model.gpt_parameters(spec)
    # EP 1: every rank keeps all 16 experts; EP 16: one expert each, about the dense size.
    assert one_ep["params_per_gpu"] > 5 * base["params_per_gpu"]
    assert base["params_per_gpu"] < ep16["params_per_gpu"] < 1.01 * base["params_per_gpu"]
    assert one_ep["model_states"] > ep16["model_states"] > base["model_states"]
    assert "experts" in ep16["formula"]
