# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_job.rules_features: the resume judgement resume.yml makes once, before anything is copied
(judge_resume), the fix it gives for a layout change per stack (universal_fix), and bf16 ZeRO-1
under the pipeline engine of DeepSpeed < 0.11.2 (the renderer's data_types key and the rule for a
user's own ds_config). The other rules are tabled in test_rules.py."""
from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules as _job_rules
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules_features as rf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.tests.support import deepspeed_092

MP2 = ["mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt"]
PIPE = ["layer_01-model_00-model_states.pt", "mp_rank_00_model_states.pt",
        "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"]
GRID = dict(world_size=2, tensor_parallel=1, pipeline_parallel=1)


@pytest.mark.parametrize("version, era, wanted", [
    ("0.19.6", "head", "ds_to_universal --input_folder /ck/global_step5 --output_folder /ck/global_step5_universal"),
    ("0.12.0", "head", "then resume with --universal-checkpoint"),
    ("0.14.0", "before_rebase", "before_rebase Megatron-DeepSpeed has no --universal-checkpoint; resume with TP 2 PP 1"),
    ("0.9.2", "before_rebase", "DeepSpeed <0.12 has no universal checkpoint (found 0.9.2); resume with TP 2 PP 1"),
    (None, "head", "found unknown version"),
])
def test_universal_fix_per_stack(version, era, wanted):
    assert wanted in rf.universal_fix(version, era, 2, 1, source="/ck/global_step5")


def test_universal_fix_keeps_the_placeholder_for_validation():
    assert "--input_folder <save>/global_stepN " in rf.universal_fix("0.19.6", "head", 2, 1)


@pytest.mark.parametrize("names, profile, form, wanted", [
    # TP 2 into TP 1: the fix follows the profile's stack
    (MP2, "cu130", True, ["tensor_parallel=2, expected 1: a TP/PP change needs a conversion: convert once"]),
    (MP2, "cu117", True, ["tensor_parallel=2, expected 1: a TP/PP change needs a conversion: refuse: DeepSpeed <0.12"]),
    # the same grid and form: nothing
    (["mp_rank_00_model_states.pt"], "cu130", True, []),
    # the model form: a pipeline-engine tag into a --no-pipeline-parallel job, and the reverse
    (PIPE, "cu130", True, ["saved without --no-pipeline-parallel and the job runs with it"]),
    (["mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
      "zero_pp_rank_1_mp_rank_00_optim_states.pt"], "cu130", False,
     ["saved with --no-pipeline-parallel and the job runs without it"]),
    # form unknown (None): not judged
    (PIPE, "cu130", None, []),
])
def test_judge_resume(names, profile, form, wanted):
    got = rf.judge_resume(names, "/ck", "global_step5", GRID, profile, form)
    assert len(got["mismatches"]) == len(wanted), got["mismatches"]
    for text, message in zip(wanted, got["mismatches"]):
        assert text in message
    assert got["layout"]["kind"] in ("pipeline", "no_pipeline")


def test_judge_resume_of_an_unreadable_tag_says_nothing_about_form():
    got = rf.judge_resume(["model_optim_rng.pt"], "/ck", "global_step5", GRID, "cu130", True)
    assert got["layout"]["kind"] == "unknown" and got["mismatches"] == []


# ------------------------------------- bf16 + ZeRO-1 under the pipeline engine, DeepSpeed < 0.11.2
REPO = pathlib.Path(__file__).resolve().parents[5]


def _prod_spec():
    """inventories/prod's job: its megatron_job_* variables, 8 nodes, its stack profile."""
    data = yaml.safe_load((REPO / "inventories" / "prod" / "group_vars" / "all.yml").read_text())
    job = {k[len("megatron_job_"):]: v for k, v in data.items() if k.startswith("megatron_job_")}
    job["stack_profile"] = data["megatron_stack_profile"]
    return _job_spec.normalize(job, nodes=8)


@pytest.mark.parametrize("version, stage, bf16, pipeline, needed", [
    ("0.9.2", 1, True, True, True),
    ("0.11.1", 1, True, True, True),
    ("0.11.2", 1, True, True, False),      # using_bf16_optimizer (DeepSpeed PR #4516)
    ("0.19.6", 1, True, True, False),
    ("0.9.2", 0, True, True, False),       # no ZeRO: bf16 accumulates in fp32 already
    ("0.9.2", 2, True, False, False),
    ("0.9.2", 1, False, True, False),      # fp16/fp32: no bf16 code path
    ("0.9.2", 1, True, False, False),      # --no-pipeline-parallel: the plain engine
    (None, 1, True, True, False),          # unknown: the key would change the optimizer, so not written
])
def test_needs_fp32_grad_accum(version, stage, bf16, pipeline, needed):
    assert _job_args.needs_fp32_grad_accum(stage, bf16, pipeline, version) is needed


def test_the_prod_job_renders_a_ds_config_deepspeed_092_can_step():
    job = _prod_spec()
    assert (job["stack_profile"], job["precision"], job["zero_stage"], job["no_pipeline_parallel"]) == ("cu117", "bf16", 1, False)
    ds = _job_args.ds_config(job)
    assert ds["data_types"] == {"grad_accum_dtype": "fp32"}
    assert deepspeed_092.optimizer_wrapper(ds) == deepspeed_092.BFLOAT16
    assert deepspeed_092.pipeline_engine_steps(ds)
    # the same file without the key is what crashed at step 1: the ZeRO optimizer
    del ds["data_types"]
    assert deepspeed_092.optimizer_wrapper(ds) == deepspeed_092.ZERO
    assert not deepspeed_092.pipeline_engine_steps(ds)


@pytest.mark.parametrize("profile, written", [("cu117", True), ("cu121", False), ("cu130", False)])
def test_the_key_follows_the_profiles_deepspeed(profile, written):
    assert ("data_types" in _job_args.ds_config(_prod_spec(), profile)) is written


def _finding(findings, check):
    return [f for f in findings if f["check"] == check]


@pytest.mark.parametrize("data_types, version, status", [
    ({"grad_accum_dtype": "fp32"}, "0.9.2", "pass"),
    (None, "0.9.2", "fail"),
    ({"grad_accum_dtype": "bf16"}, "0.9.2", "fail"),
    (None, "0.11.2", None),                # not judged: this DeepSpeed steps with the ZeRO optimizer
])
def test_a_users_ds_config_without_the_key_fails_naming_version_key_and_fix(data_types, version, status):
    job = _prod_spec()
    ds = _job_args.ds_config(job, "cu130")
    if data_types is not None:
        ds["data_types"] = data_types
    got = _finding(_job_rules.validate(job, ds, {"nodes": 8, "gpus_per_node": 8}, None, version),
                   "bf16 ZeRO-1 pipeline optimizer")
    if status is None:
        assert got == []
        return
    assert [f["status"] for f in got] == [status]
    if status == "fail":
        assert "DeepSpeed %s" % version in got[0]["found"]
        assert '"data_types": {"grad_accum_dtype": "fp32"}' in got[0]["fix"]
        assert ">= 0.11.2" in got[0]["fix"]


# ---------------------------------------------------------------------------------------
# ZeRO-0 in half precision: the optimizer wrapper DeepSpeed's _do_optimizer_sanity_check picks
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("precision, pipeline, version, accum, wrapper", [
    ("fp32", False, "0.19.6", None, ""),
    ("fp16", False, "0.9.2", None, "FP16"),
    ("fp16", True, "0.19.6", None, "FP16"),
    ("fp16", False, "0.19.6", "fp32", "refused"),
    ("bf16", False, "0.9.2", None, "BFLOAT16"),       # v0.17.5 and older: fp32 accumulation by default
    ("bf16", False, "0.17.5", None, "BFLOAT16"),
    ("bf16", False, "0.17.5", "bf16", "refused"),     # 'Bfloat16 wrapper must use ... fp32'
    ("bf16", True, "0.17.5", "bf16", "BFLOAT16"),
    ("bf16", False, "0.17.6", None, "DDP_BFLOAT16"),  # PR #7515: bf16 accumulation by default
    ("bf16", False, "0.18.4", "fp32", "BFLOAT16"),
    ("bf16", False, "0.18.5", "fp32", "refused"),     # PR #7790: 'unsupported mix'
    ("bf16", True, "0.18.5", "fp32", "refused"),
    ("bf16", True, "0.19.6", None, "BFLOAT16"),
    ("bf16", False, "0.19.6", None, "DDP_BFLOAT16"),
    ("bf16", False, None, None, "DDP_BFLOAT16"),      # unknown: the newest
])
def test_zero0_optimizer(precision, pipeline, version, accum, wrapper):
    assert _job_args.zero0_optimizer(precision, pipeline, version, accum) == wrapper


@pytest.mark.parametrize("over, data_types, version, status, words", [
    ({"precision": "bf16"}, None, "0.19.6", "warn", "DDP_BFLOAT16 wraps the optimizer in FP16_Optimizer"),
    ({"precision": "bf16"}, None, "0.19.6", "warn", "use ZeRO-1 (megatron_job_zero_stage: 1)"),
    ({"precision": "bf16"}, None, "0.18.0", "warn", '"data_types": {"grad_accum_dtype": "fp32"}'),
    ({"precision": "bf16"}, {"grad_accum_dtype": "fp32"}, "0.18.0", "pass", "BFLOAT16"),
    ({"precision": "bf16"}, {"grad_accum_dtype": "fp32"}, "0.19.6", "fail", "unsupported mix"),
    ({"precision": "bf16"}, None, "0.16.1", "pass", "BFLOAT16"),
    ({"precision": "fp16"}, None, "0.19.6", "warn", "FP16 wraps the optimizer"),
    ({"precision": "bf16", "no_pipeline_parallel": False}, None, "0.19.6", "pass", "pipeline engine: BFLOAT16"),
    ({"precision": "fp32", "use_flash_attn": False}, None, "0.19.6", None, ""),
])
def test_zero0_optimizer_rule(over, data_types, version, status, words):
    job = _job_spec.normalize(dict({"tensor_parallel": 1, "zero_stage": 0, "global_batch_size": 64,
                                    "stack_profile": "cu130"}, **over), nodes=8)
    ds = _job_args.ds_config(job, "cu130")
    if data_types is not None:
        ds["data_types"] = data_types
    got = _finding(_job_rules.validate(job, ds, {"nodes": 8, "gpus_per_node": 8}, None, version),
                   rf.ZERO0_PARITY_CHECK)
    if status is None:
        assert got == []
        return
    assert [f["status"] for f in got] == [status]
    assert words in "%s | %s" % (got[0]["found"], got[0]["fix"])


def test_zero0_rule_without_a_version_reads_the_profiles_deepspeed():
    """The cu117 profile pins DeepSpeed 0.9.2, whose bf16 ZeRO-0 takes BF16_Optimizer."""
    for profile, status in (("cu117", "pass"), ("cu130", "warn")):
        job = _job_spec.normalize({"tensor_parallel": 1, "zero_stage": 0, "stack_profile": profile,
                                   "use_flash_attn": False, "global_batch_size": 64}, nodes=8)
        got = _finding(_job_rules.validate(job, None, {"nodes": 8, "gpus_per_node": 8}), rf.ZERO0_PARITY_CHECK)
        assert [f["status"] for f in got] == [status], got


# ---------------------------------------------------------------------------------------
# ZeRO-3 under deepspeed.zero.Init: the head era's no-decay test sees every parameter as 1-D
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile, zero, decay, status", [
    ("cu130", 3, 0.1, "warn"),       # head era: every parameter in the no-decay group
    ("cu130", 3, 0.0, "pass"),       # nothing to lose
    ("cpu", 3, 0.01, "warn"),
    ("cu117", 3, 0.1, "pass"),       # before_rebase groups by module type and name: unaffected
    ("cu130", 2, 0.1, None),         # zero.Init is off below stage 3
    ("cu130", 1, 0.1, None),
])
def test_zero3_weight_decay_rule(profile, zero, decay, status):
    job = _job_spec.normalize({"tensor_parallel": 1, "zero_stage": zero, "weight_decay": decay, "global_batch_size": 64,
                               "stack_profile": profile, "use_flash_attn": False,
                               "precision": "fp32" if profile == "cpu" else "bf16"}, nodes=8)
    got = _finding(_job_rules.validate(job, _job_args.ds_config(job, profile), {"nodes": 8, "gpus_per_node": 8}),
                   rf.ZERO3_WEIGHT_DECAY_CHECK)
    assert [f["status"] for f in got] == ([status] if status else [])
    if status == "warn":
        assert "megatron/optimizer/__init__.py:40" in got[0]["fix"] and "Use ZeRO-2 or ZeRO-1" in got[0]["fix"]
        assert "--weight-decay %g" % decay in got[0]["found"]


@pytest.mark.parametrize("profile, over, status", [
    # the role's recompute renders --deepspeed-activation-checkpointing: no stream on the CPU accelerator
    ("cpu", {"activation_checkpointing": True}, "fail"),
    ("cpu", {"activation_checkpointing": False}, None),
    # Megatron's own recompute needs no stream
    ("cpu", {"extra_args": ["--recompute-granularity", "full", "--recompute-method", "uniform",
                            "--recompute-num-layers", "1"]}, None),
    ("cu130", {"activation_checkpointing": True}, None),
])
def test_deepspeed_checkpointing_on_the_cpu_accelerator(profile, over, status):
    job = _job_spec.normalize(dict({"tensor_parallel": 1, "global_batch_size": 64, "stack_profile": profile,
                                    "use_flash_attn": False, "precision": "fp32" if profile == "cpu" else "bf16"},
                                   **over), nodes=8)
    got = _finding(_job_rules.validate(job, _job_args.ds_config(job, profile), {"nodes": 8, "gpus_per_node": 8}),
                   rf.CPU_DS_CHECKPOINTING_CHECK)
    assert [f["status"] for f in got] == ([status] if status else [])
    if status:
        assert "cpu_accelerator.py:118-120" in got[0]["fix"] and "--recompute-granularity full" in got[0]["fix"]
