# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mixture-of-experts rules: what Megatron-DeepSpeed and DeepSpeed assert when they build a
job with --num-experts above 1, restated for a controller without a checkout.

The MoE setting is read from the arguments that run (``model.moe_of`` of the spec's extra_args,
which for a train.sh are the flags no job variable carries), so a spec and a train.sh are
judged alike. The head era's cites are Megatron-DeepSpeed 4efb479d and DeepSpeed 0.19.6 (the
cu121/cu130 profiles); the before_rebase era (9446eaac with DeepSpeed 0.9.2) is judged only on
what its Megatron-DeepSpeed code shows.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping

from .._mds.args import BEFORE_REBASE
from .args import zero0_optimizer
from .findings import finding
from .model import Moe, experts_per_layer, moe_of

Add = Callable[[Dict[str, str]], None]

# DeepSpeed 0.19.6's messages, verbatim.
DS_MOE_GROUP_MSG = ("The model has moe layers, but None of the param groups are marked as MoE. Create a param group "
                    "with 'moe' key set to True before creating optimizer")
DS_MOE_ZERO3_MSG = "Native DeepSpeed MoE is not supported with ZeRO Stage 3. Use AutoEP or choose ZeRO stage 1/2."
MDS_MOE_LIST_MSG = "num_experts must be either a single value or a list of the same length as the number of MoE layers"
MDS_MOE_PIPE_MSG = "Pipe and/or Grad partitioning are not supported for MoE model"


def _where(job: Any, key: str, flag: str) -> str:
    """The setting a fix names: the job variable for a spec, the flag for a train.sh."""
    return flag if job.from_script or not key else "megatron_job_%s" % key


def check_moe(job: Any, facts: Any, add: Add) -> None:
    """Mixture of experts: the expert counts, expert parallelism, ZeRO and the pipeline."""
    moe = moe_of(job.spec.get("extra_args") or ())
    layers = job.spec.get("num_layers")
    if moe is None or not layers:
        return
    per_layer = experts_per_layer(moe, int(layers))
    if per_layer is None:
        _list_length(job, moe, int(layers), add)
        return
    if not any(n > 1 for n in per_layer):
        return
    if job.era == BEFORE_REBASE:
        _before_rebase_pipeline(job, add)
        return
    _expert_counts(moe, per_layer, add)
    _expert_groups(job, facts, moe, add)
    _zero(job, facts, moe, add)
    _pipeline_partitioning(job, add)


def _list_length(job: Any, moe: Moe, layers: int, add: Add) -> None:
    # get_num_experts_per_layer (4efb479d megatron/model/transformer.py:1651; 9446eaac
    # ParallelTransformer, transformer.py:666), called for every GPT model at HEAD.
    line = "transformer.py:666 at 9446eaac" if job.era == BEFORE_REBASE else "transformer.py:1651 at 4efb479d"
    if moe.interval < 1:
        add(finding("--expert-interval >= 1", "fail", "moe", "--expert-interval %d" % moe.interval, ">= 1",
                    "Megatron-DeepSpeed divides the layers by --expert-interval when it builds them (%s) and "
                    "stops; set --expert-interval 1 or more" % line))
        return
    add(finding(
        "--num-experts list length", "fail", "moe",
        "--num-experts %s for %d layers / --expert-interval %d = %d MoE layers" % (
            " ".join(str(n) for n in moe.experts), layers, moe.interval, layers // moe.interval),
        "one count or %d counts" % (layers // moe.interval),
        "Megatron-DeepSpeed asserts '%s' (megatron/model/%s); give one --num-experts value or one per MoE "
        "layer" % (MDS_MOE_LIST_MSG, line)))


def _before_rebase_pipeline(job: Any, add: Add) -> None:
    """9446eaac's GPTModelPipe builds its layers with no experts (megatron/model/gpt_model.py:230-237
    passes no num_experts to ParallelTransformerLayerPipe), so under DeepSpeed's pipeline engine the
    MoE flags are silently ignored and a dense model trains."""
    if job.spec.get("no_pipeline_parallel"):
        return
    add(finding(
        "MoE built by the pipeline model", "warn", "moe", "--num-experts with DeepSpeed's pipeline engine",
        "--no-pipeline-parallel on Megatron-DeepSpeed 9446eaac",
        "that checkout's GPTModelPipe builds every layer dense (megatron/model/gpt_model.py:230-237 at 9446eaac "
        "passes no num_experts), so the job trains without experts; set %s (with PP 1) or use a stack "
        "profile with Megatron-DeepSpeed HEAD" % _where(job, "no_pipeline_parallel", "--no-pipeline-parallel")))


def _expert_counts(moe: Moe, per_layer: Any, add: Add) -> None:
    bad = sorted({n for n in per_layer if n > 1 and n % moe.ep})
    if bad:
        add(finding(
            "experts divisible by expert parallel size", "fail", "moe",
            "%s experts, --moe-expert-parallel-size %d" % ("/".join(str(n) for n in bad), moe.ep),
            "every MoE layer's experts a multiple of %d" % moe.ep,
            "DeepSpeed's MoE asserts 'Number of experts (%d) should be divisible by expert parallel size (%d)' "
            "(deepspeed/moe/layer.py:59 in 0.19.6); set --moe-expert-parallel-size to a divisor of the experts"
            % (bad[0], moe.ep)))
    else:
        add(finding("experts divisible by expert parallel size", "pass", "moe",
                    "%s experts, EP %d" % ("/".join(str(n) for n in sorted(set(per_layer)) if n > 1), moe.ep),
                    "a multiple of EP"))


def _expert_groups(job: Any, facts: Any, moe: Moe, add: Add) -> None:
    """DeepSpeed builds the expert groups when the engine starts (MoE.set_deepspeed_parallelism,
    deepspeed/runtime/engine.py:1915): without expert tensor parallelism, from consecutive ranks of
    each pipeline stage, asserting that EP divides world / PP (deepspeed/utils/groups.py:351); with
    it, asserting that EP divides the data-parallel size (groups.py:568). groups.mpu is always set
    by Megatron-DeepSpeed (Megatron's mpu or the pipeline grid), so PP is the job's."""
    derived = facts.derived
    world, pp, dp = derived["world_size"], derived["pipeline_parallel"], facts.dp
    if moe.expert_tp:
        if not dp:
            return
        ranks, what, line = dp, "data-parallel size %d" % dp, "568"
    else:
        ranks, what, line = world // pp, "world / PP = %d" % (world // pp), "351"
    ok = ranks % moe.ep == 0
    add(finding(
        "expert parallel size divides its ranks", "pass" if ok else "fail", "moe",
        "--moe-expert-parallel-size %d, %s" % (moe.ep, what), "a divisor of %d" % ranks,
        "" if ok else "DeepSpeed asserts '%d is not divisible by %d' when it builds the expert groups "
        "(deepspeed/utils/groups.py:%s in 0.19.6); pick --moe-expert-parallel-size among the divisors of %d"
        % (ranks, moe.ep, line, ranks)))


def _zero_flag(job: Any, zero: Any, key: str) -> bool:
    if job.ds is None:
        return job.spec.get("zero_" + key, True) is not False
    return zero.section.get(key, True) is not False


def _grad_accum_dtype(job: Any) -> Any:
    data_types = (job.ds or {}).get("data_types")
    return data_types.get("grad_accum_dtype") if isinstance(data_types, Mapping) else None


def _optimizer(job: Any, zero: Any) -> str:
    """The optimizer wrapper DeepSpeed 0.19.6 picks (_do_optimizer_sanity_check, deepspeed/runtime/
    engine.py:2064-2109): "ZERO" (DeepSpeedZeroOptimizer), "BFLOAT16" (BF16_Optimizer: bf16
    ZeRO-1 with fp32 gradient accumulation and no offload, or bf16 without ZeRO under the pipeline
    engine) or another wrapper, which has no MoE check."""
    precision = str(job.spec.get("precision") or "fp32").lower()
    accum = _grad_accum_dtype(job)
    if zero.stage in (1, 2):
        if (precision == "bf16" and str(accum).lower() in ("fp32", "float32") and zero.stage == 1
                and not zero.offload_optimizer and not zero.offload_param):
            return "BFLOAT16"
        return "ZERO"
    return zero0_optimizer(precision, not job.spec.get("no_pipeline_parallel"), job.deepspeed_version, accum)


def _zero(job: Any, facts: Any, moe: Moe, add: Add) -> None:
    zero = facts.zero
    if zero.stage == 3:
        add(finding(
            "MoE under ZeRO-3", "fail", "moe", "--num-experts with %s 3" % zero.source, "ZeRO stage 0, 1 or 2",
            "DeepSpeed raises '%s' (deepspeed/runtime/engine.py:1976 in 0.19.6); set %s to 1 or 2"
            % (DS_MOE_ZERO3_MSG, _where(job, "zero_stage", "zero_optimization.stage"))))
        return
    optimizer = _optimizer(job, zero)
    if optimizer in ("ZERO", "BFLOAT16") and not moe.param_group:
        cite = ("deepspeed/runtime/zero/stage_1_and_2.py:788" if optimizer == "ZERO"
                else "deepspeed/runtime/bf16_optimizer.py:126")
        add(finding(
            "MoE parameter groups", "fail", "moe",
            "ZeRO-%d (%s optimizer) without --create-moe-param-group" % (
                zero.stage, "DeepSpeed's ZeRO" if optimizer == "ZERO" else "DeepSpeed's BF16"),
            "--create-moe-param-group",
            "DeepSpeed asserts '%s' (%s in 0.19.6); Megatron-DeepSpeed marks the expert parameters with "
            "split_params_into_different_moe_groups_for_optimizer only under --create-moe-param-group "
            "(megatron/optimizer/__init__.py:79-81 at 4efb479d): add it" % (DS_MOE_GROUP_MSG, cite)))
    if optimizer != "ZERO":
        return
    if zero.stage == 2 and not _zero_flag(job, zero, "contiguous_gradients"):
        add(finding(
            "MoE with ZeRO-2 contiguous gradients", "fail", "moe", "contiguous_gradients false", "true",
            "DeepSpeed asserts 'Contiguous Gradients in ZeRO Stage 2 must be set to True for MoE' "
            "(deepspeed/runtime/zero/stage_1_and_2.py:781 in 0.19.6); set %s: true"
            % _where(job, "zero_contiguous_gradients", "zero_optimization.contiguous_gradients")))
    if not _zero_flag(job, zero, "reduce_scatter"):
        add(finding(
            "MoE with ZeRO reduce scatter", "fail", "moe", "reduce_scatter false", "true",
            "DeepSpeed's ZeRO-1/2 optimizer asserts 'Reduce Scatter in ZeRO Stage 2 must be set to True for MoE' "
            "(deepspeed/runtime/zero/stage_1_and_2.py:786 in 0.19.6); set %s: true"
            % _where(job, "zero_reduce_scatter", "zero_optimization.reduce_scatter")))


def _pipeline_partitioning(job: Any, add: Add) -> None:
    """GPTModelPipe asserts that an MoE model with PP > 1 and TP > 1 has neither pipe_partitioned
    nor grad_partitioned set in ds_config's pipeline section (megatron/model/gpt_model.py:380-384
    at 4efb479d: it reads the config dict, where an absent key counts as false)."""
    if job.spec.get("no_pipeline_parallel") or job.pp < 2 or job.tp < 2 or not job.ds:
        return
    pipeline: Mapping[str, Any] = job.ds.get("pipeline") if isinstance(job.ds.get("pipeline"), Mapping) else {}
    on = [key for key in ("pipe_partitioned", "grad_partitioned") if pipeline.get(key, False)]
    if on:
        add(finding(
            "MoE without pipeline partitioning", "fail", "moe",
            "pipeline.%s with MoE, TP %d, PP %d" % (" and ".join(on), job.tp, job.pp),
            "pipe_partitioned and grad_partitioned false",
            "Megatron-DeepSpeed asserts '%s' when it builds GPTModelPipe (megatron/model/gpt_model.py:383 at "
            "4efb479d); set them false in ds_config.json's pipeline section" % MDS_MOE_PIPE_MSG))
