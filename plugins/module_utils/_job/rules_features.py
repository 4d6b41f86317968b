# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rules about DeepSpeed features and the stack: ZeRO, precision, checkpoints and resume,
activation checkpointing, and the settings the stack profile decides (flash attention,
bias-GeLU fusion). ``rules.validate`` calls them in order.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, Mapping, NamedTuple, Optional

from .. import _checkpoint
from .._stack import profiles as _stack_profiles
from .args import (BF16_PIPE_ZERO_OPTIMIZER_SINCE, BF16_ZERO0_FP32_ACCUMULATION_REFUSED_SINCE, LATE_ADAM_WRAPPERS,
                   PRECISION_FLAGS, needs_fp32_grad_accum, zero0_optimizer)
from .findings import finding
from .inputs import last_value
from .memory import version_lt
from .schema import PREFIX, ZERO_STAGES
from .spec import int_or_none
from .._mds.args import BEFORE_REBASE, HEAD

# Every flag that turns on Megatron-DeepSpeed's flash attention (args.use_flash_attn is their
# OR, docs/upstream-facts.md §A). The SDPA adapter serves only the v2 import (flash_attn_varlen_func).
FLASH_ATTN_FLAGS = ("--use-flash-attn-v2", "--use-flash-attn", "--use-flash-attn-v1",
                    "--use-flash-attn-triton", "--use-flash-attn-builder")
# Why a profile requires flash attention: its torch breaks the unfused path (docs/upstream-facts.md §G).
FLASH_ATTN_REQUIRED_REASON = (
    "Megatron-DeepSpeed's unfused attention fails on this profile's torch (docs/upstream-facts.md §G: "
    "CoreAttention.forward raises 'view size is not compatible with input tensor's size and "
    "stride', .view on non-contiguous query/key/value)"
)

# DeepSpeed ships deepspeed.checkpoint.ds_to_universal from 0.11.2 (#4516, ZeRO-1 only);
# 0.12.0 is the first minor release with it and is what this collection supports.
UNIVERSAL_CHECKPOINT_MIN_DEEPSPEED = "0.12.0"
# ZeRO keys DeepSpeed's config model accepts (field names and aliases; extra keys are
# forbidden and fail at start). HEAD edaa7221 and v0.9.2 deepspeed/runtime/zero/config.py.
ZERO_KEYS_HEAD = frozenset({
    "allgather_bucket_size", "allgather_partitions", "allgather_sequential",
    "contiguous_gradients", "cpu_offload", "cpu_offload_param", "cpu_offload_use_pin_memory",
    "elastic_checkpoint", "enable_sanity_checks", "gather_16bit_weights_on_model_save",
    "ignore_unused_parameters", "leaf_module", "legacy_stage1", "load_from_fp32_weights",
    "log_trace_cache_warnings", "max_live_parameters", "max_reuse_distance",
    "memory_efficient_linear", "mics_hierarchical_params_gather", "mics_shard_size",
    "model_persistence_threshold", "module_granularity_threshold", "offload_optimizer",
    "offload_param", "overlap_comm", "override_module_apply", "param_persistence_threshold",
    "pipeline_loading_checkpoint", "prefetch_bucket_size", "reduce_bucket_size", "reduce_scatter",
    "round_robin_gradients", "save_muon_momentum_buffer_in_memory", "stage",
    "stage3_allgather_sequential", "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save", "stage3_max_live_parameters",
    "stage3_max_reuse_distance", "stage3_model_persistence_threshold",
    "stage3_module_granularity_threshold", "stage3_param_persistence_threshold",
    "stage3_prefetch_bucket_size", "stage3_use_all_reduce_for_fetch_params", "sub_group_size",
    "use_all_reduce_for_fetch_params", "use_multi_rank_bucket_allreduce", "zenflow",
    "zero_hpz_partition_size", "zero_quantized_gradients", "zero_quantized_nontrainable_weights",
    "zero_quantized_weights", "zeropp_loco_param",
})
ZERO_KEYS_092 = frozenset({
    "allgather_bucket_size", "allgather_partitions", "contiguous_gradients", "cpu_offload",
    "cpu_offload_param", "cpu_offload_use_pin_memory", "elastic_checkpoint",
    "gather_16bit_weights_on_model_save", "ignore_unused_parameters", "legacy_stage1",
    "load_from_fp32_weights", "max_live_parameters", "max_reuse_distance",
    "memory_efficient_linear", "mics_hierarchical_params_gather", "mics_shard_size",
    "model_persistence_threshold", "offload_optimizer", "offload_param", "overlap_comm",
    "param_persistence_threshold", "prefetch_bucket_size", "reduce_bucket_size", "reduce_scatter",
    "round_robin_gradients", "stage", "stage3_gather_16bit_weights_on_model_save",
    "stage3_gather_fp16_weights_on_model_save", "stage3_max_live_parameters",
    "stage3_max_reuse_distance", "stage3_model_persistence_threshold",
    "stage3_param_persistence_threshold", "stage3_prefetch_bucket_size", "sub_group_size",
})

# DeepSpeed's messages, verbatim (deepspeed/runtime/config.py, fp16 checks, engine.py
# _configure_optimizer).
DS_PIPE_ZERO_MSG = "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"
DS_BF16_FP16_MSG = "bfloat16 and fp16 modes cannot be simultaneously enabled"
DS_OFFLOAD_CLIENT_OPT_MSG = (
    "You are using ZeRO-Offload with a client provided optimizer (...) which in most cases "
    "will yield poor performance. Please either use deepspeed.ops.adam.DeepSpeedCPUAdam or set "
    "an optimizer in your ds-config"
)


def ds_get(config: Mapping[str, Any], *path: str) -> Any:
    node: Any = config
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def offload_device(value: Any) -> str:
    if isinstance(value, Mapping):
        return str(value.get("device") or "none").lower()
    if value in (None, False):
        return "none"
    return "cpu" if value is True else str(value).lower()


def enabled(section: Any) -> Optional[bool]:
    if isinstance(section, Mapping):
        value = section.get("enabled", False)
        if isinstance(value, str):
            return value.lower() == "true"
        return bool(value)
    return None


ZERO0_PARITY_CHECK = "ZeRO-0 optimizer trains like ZeRO-1"


def _check_zero0_optimizer(spec: Mapping[str, Any], ds: Optional[Mapping[str, Any]], pipeline_engine: bool,
                           deepspeed_version: Optional[str], add: Callable[[Dict[str, str]], None]) -> None:
    """Half precision without ZeRO: the optimizer wrapper DeepSpeed picks (_job.args.zero0_optimizer).
    FP16_Optimizer starts Adam a step late, so the loss trails ZeRO-1's at the same seed and data
    (a warning; the planner does not rank such layouts); a combination DeepSpeed refuses fails."""
    if ds is not None:
        precision = "bf16" if enabled(ds.get("bf16")) or enabled(ds.get("bfloat16")) else (
            "fp16" if enabled(ds.get("fp16")) else "fp32")
        data_types = ds.get("data_types") if isinstance(ds.get("data_types"), Mapping) else {}
        accum = data_types.get("grad_accum_dtype")
    else:
        precision, accum = spec.get("precision") or "fp32", None
    if precision == "fp32":
        return
    version = deepspeed_version
    if not version:
        try:
            version = _stack_profiles.deepspeed_pin(spec.get("stack_profile") or _stack_profiles.DEFAULT_PROFILE)
        except _stack_profiles.UnknownProfileError:
            version = None
    wrapper = zero0_optimizer(precision, pipeline_engine, version, accum)
    found = "%s without ZeRO on DeepSpeed %s%s%s: %s" % (
        precision, version or "(unknown: the newest)", ", pipeline engine" if pipeline_engine else "",
        ", data_types.grad_accum_dtype %s" % accum if accum else "", wrapper or "no wrapper")
    expected = "BF16_Optimizer, or ZeRO-1"
    if wrapper == "refused":
        add(finding(
            ZERO0_PARITY_CHECK, "fail", "zero", found, expected,
            "DeepSpeed stops in deepspeed.initialize with NotImplementedError (_do_optimizer_sanity_check, "
            "deepspeed/runtime/engine.py:1976-1977 at v0.19.5: 'unsupported mix of model_dtype and "
            "grad_accum_dtype'; from %s a bf16 model without ZeRO cannot accumulate in fp32, and before 0.17.6 "
            "it had to): remove data_types.grad_accum_dtype from ds_config.json, or use ZeRO-1"
            % BF16_ZERO0_FP32_ACCUMULATION_REFUSED_SINCE,
        ))
    elif wrapper in LATE_ADAM_WRAPPERS:
        way = ('add "data_types": {"grad_accum_dtype": "fp32"} to ds_config.json (BF16_Optimizer on this '
               'DeepSpeed), or use ZeRO-1' if precision == "bf16" and zero0_optimizer(
                   precision, pipeline_engine, version, "fp32") == "BFLOAT16" else "use ZeRO-1 (megatron_job_zero_stage: 1)")
        add(finding(
            ZERO0_PARITY_CHECK, "warn", "zero", found, expected,
            "%s wraps the optimizer in FP16_Optimizer, which takes one Adam step on zero gradients when it is "
            "built (deepspeed/runtime/fp16/fused_optimizer.py:121-133 at v0.19.5), so the first real update is "
            "Adam's second (0.74 of its size) after an extra weight decay, and the loss trails ZeRO-1's at the "
            "same seed and data (docs/benchmarks.md, 'ZeRO-0 against ZeRO-1'); %s" % (wrapper, way),
        ))
    else:
        add(finding(ZERO0_PARITY_CHECK, "pass", "zero", found, expected))


ZERO3_WEIGHT_DECAY_CHECK = "ZeRO-3 keeps weight decay"


def _check_zero3_weight_decay(spec: Mapping[str, Any], init_stage: Optional[int], era: str,
                              add: Callable[[Dict[str, str]], None]) -> None:
    """--zero-stage 3 on the head era: pretrain_gpt.py builds the model inside deepspeed.zero.Init
    (pretrain_gpt.py:46-50 at 4efb479d, enabled by args.zero_stage == 3), which partitions each
    parameter as it is made and leaves it the shape (0,) (DeepSpeed runtime/zero/
    partition_parameters.py free_param, 0.19.6:323; the layer's shape is in ds_shape). The head era
    puts a parameter in the no-decay group when ``len(param.shape) == 1``
    (megatron/optimizer/__init__.py:40), so every parameter goes there, and the scheduler gives that
    group weight decay 0 (megatron/optimizer_param_scheduler.py:157). Measured on CPU with
    pretrain_gpt.py (docs/benchmarks.md, "Layouts that train the same"): ZeRO-3 logs the losses of
    ZeRO-1 at --weight-decay 0, to 1e-6 at all 50 iterations. The before_rebase era groups by
    module type and the bias name (megatron/optimizer/__init__.py:30-55 at 9446eaac), which the
    partitioning does not touch."""
    if init_stage != 3:
        return
    try:
        decay = float(spec.get("weight_decay") if spec.get("weight_decay") is not None else 0.01)
    except (TypeError, ValueError):
        return
    found = "--zero-stage 3 (deepspeed.zero.Init), --weight-decay %g, Megatron-DeepSpeed %s era" % (decay, era)
    if era == BEFORE_REBASE or decay == 0.0:
        add(finding(ZERO3_WEIGHT_DECAY_CHECK, "pass", "zero", found, "the weight decay asked for"))
        return
    add(finding(
        ZERO3_WEIGHT_DECAY_CHECK, "warn", "zero", found, "weight decay %g on the weights" % decay,
        "this Megatron-DeepSpeed trains every parameter without weight decay under ZeRO-3: the model is "
        "built inside deepspeed.zero.Init, which leaves each parameter the shape (0,), and the optimizer "
        "puts every 1-dimensional parameter in its no-decay group (megatron/optimizer/__init__.py:40; "
        "pretrain_gpt.py:46-50; docs/benchmarks.md, 'Layouts that train the same'). Use ZeRO-2 or ZeRO-1 "
        "(megatron_job_zero_stage), which keep the decay, or set --weight-decay 0 to train as ZeRO-3 does",
    ))


class ZeroSetup(NamedTuple):
    """The ZeRO configuration the job runs: from ds_config.json when given, else from the spec.
    ``valid`` is False when the JSON's stage is not 0-3 (``stage`` then reads 0)."""

    stage: int
    offload_optimizer: bool
    offload_param: bool
    source: str
    section: Mapping[str, Any]
    valid: bool
    reduce_bucket_size: Optional[int]
    allgather_bucket_size: Optional[int]


def zero_setup(spec: Mapping[str, Any], ds: Optional[Mapping[str, Any]]) -> ZeroSetup:
    """The stage, offloads and buckets DeepSpeed will use."""
    if ds is None:
        arg_stage = spec.get("zero_stage")
        return ZeroSetup(arg_stage if arg_stage is not None else 0, spec.get("zero_offload_optimizer") == "cpu",
                         spec.get("zero_offload_param") == "cpu", "megatron_job_zero_stage", {}, True,
                         spec.get("zero_reduce_bucket_size"), spec.get("zero_allgather_bucket_size"))
    raw = ds.get("zero_optimization")
    section: Mapping[str, Any] = raw if isinstance(raw, Mapping) else {}
    # ds_config.json is the user's own file: "2" reads as 2, as DeepSpeed's config model reads it.
    stage = int_or_none(section.get("stage", 0))
    return ZeroSetup(
        stage if stage in ZERO_STAGES else 0,
        offload_device(section.get("offload_optimizer")) != "none" or bool(section.get("cpu_offload")),
        offload_device(section.get("offload_param")) != "none" or bool(section.get("cpu_offload_param")),
        "ds_config zero_optimization.stage", section, stage in ZERO_STAGES,
        int_or_none(section.get("reduce_bucket_size")), int_or_none(section.get("allgather_bucket_size")),
    )


def _check_zero_section(job: Any, zero: ZeroSetup, add: Callable[[Dict[str, str]], None]) -> None:
    """ds_config's zero_optimization section: a stage DeepSpeed knows, and only keys it declares."""
    if not zero.valid:
        add(finding("ds_config ZeRO stage", "fail", "zero", zero.section.get("stage"), "0, 1, 2 or 3",
                    "set zero_optimization.stage to 0-3"))
    known = ZERO_KEYS_092 if job.era == BEFORE_REBASE else ZERO_KEYS_HEAD
    unknown = sorted(k for k in zero.section if k not in known)
    if unknown:
        add(finding(
            "ds_config zero_optimization keys", "fail", "ds_config", ", ".join(unknown),
            "keys DeepSpeed's ZeRO config declares",
            "DeepSpeed's config model forbids unknown keys (pydantic extra=forbid) and stops at "
            "start; remove or correct them",
        ))


def _check_zero_pipeline(zero: ZeroSetup, pp: int, ds_pipeline: bool, add: Callable[[Dict[str, str]], None]) -> None:
    """DeepSpeed's pipeline engine takes ZeRO-0/1 only."""
    stage = zero.stage
    if stage >= 2 and ds_pipeline:
        if pp > 1:
            fix = ("use ZeRO-1 (zero_stage: 1) to keep PP %d, or set PP 1 with --no-pipeline-parallel "
                   "to keep ZeRO-%d" % (pp, stage))
        else:
            fix = ("add --no-pipeline-parallel (megatron_job_no_pipeline_parallel: true): without it "
                   "Megatron-DeepSpeed wraps the model in DeepSpeed's PipelineModule even with PP 1; or use ZeRO-1")
        add(finding(
            "ZeRO stage vs pipeline engine", "fail", "zero",
            "ZeRO-%d (%s), DeepSpeed pipeline engine (PP %d%s)" % (
                stage, zero.source, pp, ", no --no-pipeline-parallel" if pp == 1 else ""),
            "ZeRO-0/1 with the pipeline engine", "DeepSpeed asserts '%s'; %s" % (DS_PIPE_ZERO_MSG, fix),
        ))
    else:
        add(finding("ZeRO stage vs pipeline engine", "pass", "zero",
                    "ZeRO-%d, %s" % (stage, "pipeline engine" if ds_pipeline else "--no-pipeline-parallel"),
                    "ZeRO-2/3 only with --no-pipeline-parallel"))


def _check_bf16_pipe_optimizer(ds: Mapping[str, Any], stage: int, ds_pipeline: bool, deepspeed_version: Optional[str],
                               add: Callable[[Dict[str, str]], None]) -> None:
    """bf16 under ZeRO-1 with the pipeline engine needs fp32 gradient accumulation on some DeepSpeed releases."""
    bf16 = bool(enabled(ds.get("bf16")) or enabled(ds.get("bfloat16")))
    if not needs_fp32_grad_accum(stage, bf16, ds_pipeline, deepspeed_version):
        return
    data_types = ds.get("data_types") if isinstance(ds.get("data_types"), Mapping) else {}
    accum = data_types.get("grad_accum_dtype")
    ok = str(accum).lower() == "fp32"
    add(finding(
        "bf16 ZeRO-1 pipeline optimizer", "pass" if ok else "fail", "zero",
        "DeepSpeed %s, bf16, ZeRO-1, pipeline engine, data_types.grad_accum_dtype %s" % (
            deepspeed_version, "fp32" if ok else ("missing" if accum is None else accum)),
        'ds_config "data_types": {"grad_accum_dtype": "fp32"}',
        "" if ok else (
            "DeepSpeed %s keeps bf16 gradient accumulation under ZeRO and so wraps the optimizer in its "
            "ZeRO optimizer, but its pipeline engine calls clear_lp_grads() and get_grads_for_reduction(), "
            "which only the BF16 optimizer has: the first step stops with an AttributeError. Add "
            '"data_types": {"grad_accum_dtype": "fp32"} to ds_config.json (the megatron_job role writes '
            "it), or use DeepSpeed >= %s" % (deepspeed_version, BF16_PIPE_ZERO_OPTIMIZER_SINCE)),
    ))


def _check_zero_stage_agrees(job: Any, stage: int, add: Callable[[Dict[str, str]], None]) -> None:
    """Megatron's --zero-stage against the stage in ds_config.json."""
    arg_stage = job.spec.get("zero_stage")
    if job.from_script and "zero_stage" not in job.explicit:
        found = "--zero-stage not given (Megatron default 1)"
    else:
        found = "--zero-stage %s" % arg_stage
    ok = arg_stage == stage
    add(finding(
        "--zero-stage == ds_config stage", "pass" if ok else "fail", "zero",
        "%s, ds_config stage %d" % (found, stage), "equal",
        "" if ok else "DeepSpeed takes the stage from the JSON, Megatron-DeepSpeed uses "
        "--zero-stage for deepspeed.zero.Init (stage 3) and its statistics; pass --zero-stage %d" % stage,
    ))


def _check_offload(job: Any, zero: ZeroSetup, add: Callable[[Dict[str, str]], None]) -> None:
    """Parameter offload needs ZeRO-3; optimizer offload needs DeepSpeed's CPU Adam."""
    if zero.offload_param and zero.stage != 3:
        add(finding(
            "offload_param only with ZeRO-3", "fail", "zero", "offload_param with ZeRO-%d" % zero.stage, "ZeRO-3",
            "parameter offload is valid only with stage 3 (DeepSpeed ignores it otherwise); use ZeRO-3 "
            "(with --no-pipeline-parallel) or drop offload_param",
        ))
    if not zero.offload_optimizer:
        return
    cpu_optimizer = "--cpu-optimizer" in job.flags and "--cpu_torch_adam" not in job.flags
    forced = job.ds is None or job.ds.get("zero_force_ds_cpu_optimizer", True) not in (False, "false")
    if not cpu_optimizer and forced:
        add(finding(
            "ZeRO-Offload optimizer", "fail", "zero",
            "offload_optimizer cpu, Megatron's GPU optimizer (no --cpu-optimizer)",
            "--cpu-optimizer (DeepSpeedCPUAdam)",
            "DeepSpeed raises ZeRORuntimeException: '%s ...'; pass --cpu-optimizer (megatron_job_"
            "zero_offload_optimizer: cpu does it), or set \"zero_force_ds_cpu_optimizer\": false "
            "and accept a slow client optimizer" % DS_OFFLOAD_CLIENT_OPT_MSG,
        ))


def _check_ds_client_sections(spec: Mapping[str, Any], ds: Mapping[str, Any], add: Callable[[Dict[str, str]], None]) -> None:
    """ds_config optimizer and scheduler sections, which Megatron-DeepSpeed's own optimizer overrides."""
    if isinstance(ds.get("optimizer"), Mapping):
        params = ds["optimizer"].get("params") or {}
        conflicts = []
        for key, spec_key in (("lr", "lr"), ("weight_decay", "weight_decay")):
            if key in params and spec.get(spec_key) is not None and float(params[key]) != float(spec[spec_key]):
                conflicts.append("%s %r vs --%s %r" % (key, params[key], key.replace("_", "-"), spec[spec_key]))
        add(finding(
            "ds_config optimizer section", "warn", "ds_config",
            "optimizer %s%s" % (ds["optimizer"].get("type"), (" (" + "; ".join(conflicts) + ")") if conflicts else ""),
            "no optimizer section",
            "ignored: Megatron-DeepSpeed passes its own optimizer to deepspeed.initialize ('Using client "
            "Optimizer as basic optimizer'), so --lr, --weight-decay and --adam-* rule; remove the section",
        ))
    if isinstance(ds.get("scheduler"), Mapping):
        add(finding(
            "ds_config scheduler section", "warn", "ds_config", "scheduler %s" % ds["scheduler"].get("type"),
            "no scheduler section", "ignored: Megatron-DeepSpeed passes its own LR scheduler; use --lr-* flags",
        ))


def check_zero(job: Any, facts: Any, add: Callable[[Dict[str, str]], None]) -> None:
    """The ZeRO rules, on the setup ``facts.zero`` (zero_setup) that the memory estimate uses too."""
    spec, ds, zero = job.spec, job.ds, facts.zero
    if ds is not None:
        _check_zero_section(job, zero, add)
    ds_pipeline = not spec.get("no_pipeline_parallel")
    _check_zero_pipeline(zero, job.pp, ds_pipeline, add)
    if ds is not None:
        _check_bf16_pipe_optimizer(ds, zero.stage, ds_pipeline, job.deepspeed_version, add)
    if zero.stage == 0:
        _check_zero0_optimizer(spec, ds, ds_pipeline, job.deepspeed_version, add)
    # zero.Init follows Megatron's --zero-stage, not the JSON (a mismatch fails below).
    arg_stage = spec.get("zero_stage")
    _check_zero3_weight_decay(spec, arg_stage if arg_stage is not None else zero.stage, job.era, add)
    if ds is not None:
        _check_zero_stage_agrees(job, zero.stage, add)
    _check_offload(job, zero, add)
    if ds is not None:
        _check_ds_client_sections(spec, ds, add)


def check_precision(job: Any, facts: Any, add: Callable[[Dict[str, str]], None]) -> None:
    """--bf16/--fp16 against each other and against ds_config.json's sections."""
    spec, ds, extra = job.spec, job.ds, job.extra
    precision = spec.get("precision") or "fp32"
    arg_flags = set()
    if precision in ("bf16", "fp16"):
        arg_flags.add(precision)
    arg_flags.update(PRECISION_FLAGS[f] for f in extra if f in PRECISION_FLAGS)
    if len(arg_flags) > 1:
        add(finding(
            "--bf16 xor --fp16", "fail", "precision", "--bf16 and --fp16", "one of them",
            "Megatron asserts not (fp16 and bf16); keep --bf16 (A100/H100) or --fp16",
        ))
        return
    args_precision = arg_flags.pop() if arg_flags else "fp32"
    if ds is None:
        add(finding("precision", "pass", "precision", args_precision, "bf16|fp16|fp32"))
        return
    bf16 = enabled(ds.get("bf16"))
    if bf16 is None:
        bf16 = enabled(ds.get("bfloat16"))
    fp16 = enabled(ds.get("fp16"))
    if bf16 and fp16:
        add(finding(
            "ds_config bf16 xor fp16", "fail", "ds_config", "bf16.enabled and fp16.enabled", "one of them",
            "DeepSpeed asserts '%s'; disable one" % DS_BF16_FP16_MSG,
        ))
        return
    json_precision = "bf16" if bf16 else "fp16" if fp16 else "fp32"
    ok = json_precision == args_precision
    add(finding(
        "ds_config precision == arguments", "pass" if ok else "fail", "precision",
        "ds_config %s, arguments %s" % (json_precision, "--" + args_precision if args_precision != "fp32" else "fp32"),
        "the same precision",
        "" if ok else "Megatron builds %s parameters while DeepSpeed's optimizer is set up for %s; set "
        "%s.enabled in ds_config.json to match %s" % (
            args_precision, json_precision, args_precision if args_precision != "fp32" else "bf16/fp16",
            "--" + args_precision if args_precision != "fp32" else "no precision flag"),
    ))


def universal_fix(deepspeed_version: Optional[str], era: str, ck_tp: Any, ck_pp: Any,
                  source: str = "<save>/global_stepN") -> str:
    """What to do about a checkpoint saved with another layout (TP/PP, or DP under ZeRO), for the
    stack at hand: convert with DeepSpeed's universal checkpoint where both DeepSpeed (>= 0.12,
    ds_to_universal) and the Megatron-DeepSpeed era (--universal-checkpoint) have it, else resume
    with the saved shape. ``source``: the tag to convert."""
    has_universal = deepspeed_version is not None and not version_lt(deepspeed_version, UNIVERSAL_CHECKPOINT_MIN_DEEPSPEED)
    if has_universal and era == HEAD:
        return ("convert once with DeepSpeed's universal checkpoint: python -m deepspeed.checkpoint.ds_to_universal "
                "--input_folder %s --output_folder %s_universal "
                "(Megatron-DeepSpeed on PYTHONPATH), then resume with --universal-checkpoint "
                "(megatron_job_extra_args: ['--universal-checkpoint'])" % (source, source))
    if has_universal:
        return ("refuse: DeepSpeed %s has ds_to_universal, but the before_rebase Megatron-DeepSpeed "
                "has no --universal-checkpoint; resume with TP %s PP %s, or move to the HEAD stack"
                % (deepspeed_version, ck_tp, ck_pp))
    return ("refuse: DeepSpeed <0.12 has no universal checkpoint (found %s); resume with TP %s PP %s, "
            "or upgrade DeepSpeed (>= %s) and convert with ds_to_universal"
            % (deepspeed_version or "unknown version", ck_tp, ck_pp, UNIVERSAL_CHECKPOINT_MIN_DEEPSPEED))


def judge_resume(names: Iterable[str], path: str, tag: str, expect: Mapping[str, Any], profile: Any,
                 no_pipeline_parallel: Optional[bool] = None) -> Dict[str, Any]:
    """A resume's one judgement of checkpoint tag ``tag``: its layout from the union of its file
    names on every node (``_checkpoint.classify``) against the job's grid ``expect``, with the fix
    the profile's DeepSpeed and Megatron-DeepSpeed allow, and the model form (a tag saved with or
    without --no-pipeline-parallel loads only into the same form). ``{layout, mismatches}``."""
    def fix(layout: Mapping[str, Any]) -> str:
        return universal_fix(_stack_profiles.deepspeed_pin(profile), _stack_profiles.mds_era(profile),
                             layout.get("tensor_parallel"), layout.get("pipeline_parallel"),
                             source="%s/%s" % (str(path).rstrip("/"), tag))

    judged = _checkpoint.judge_listing(names, path, tag, expect, fix=fix)
    layout = judged["layout"]
    if no_pipeline_parallel is not None and layout.get("tensor_parallel") is not None \
            and (not layout["pipeline"]) != bool(no_pipeline_parallel):
        judged["mismatches"].insert(0, (
            "%s/%s was saved %s --no-pipeline-parallel and the job runs %s it: a model saved in one form cannot be "
            "converted to the other (not even by the universal checkpoint); resume with the form it was saved in"
            % (str(path).rstrip("/"), tag, "with" if not layout["pipeline"] else "without",
               "with" if no_pipeline_parallel else "without")))
    return judged


def check_checkpoints(job: Any, facts: Any, add: Callable[[Dict[str, str]], None]) -> None:
    """--save with its interval, --no-load-optim under DeepSpeed, and the layout of the checkpoint to resume."""
    spec, flags, era = job.spec, job.flags, job.era
    if spec.get("checkpoint_dir"):
        interval = spec.get("save_interval")
        ok = interval is not None and interval > 0
        add(finding(
            "--save with --save-interval", "pass" if ok else "fail", "checkpoints",
            "--save %s, --save-interval %s" % (spec["checkpoint_dir"], interval), "--save-interval N",
            "" if ok else "Megatron asserts args.save_interval is not None when --save is set; add --save-interval",
        ))
    if "--no-load-optim" in flags:
        # Under --deepspeed, Megatron-DeepSpeed hands the load to DeepSpeed's engine without
        # load_optimizer_states (megatron/checkpointing.py:541-548 at 4efb479d, 276-283 at
        # before_rebase 9446eaac) and reads --no-load-optim only in the branch without DeepSpeed
        # (line 628-629; 400-401): the Adam state comes back whatever the flag says. Found on CPU
        # with pretrain_gpt.py: a resume with the flag logged the same losses as one without.
        add(finding(
            "--no-load-optim honoured under DeepSpeed", "warn", "resume", "--no-load-optim",
            "--finetune, or neither",
            "Megatron-DeepSpeed ignores --no-load-optim with --deepspeed (megatron/checkpointing.py "
            + ("541-548, 628-629" if era == "head" else "276-283, 400-401")
            + "): the optimizer state is loaded anyway. To start the optimizer afresh use --finetune, which also "
            "restarts the iteration count and the learning-rate schedule at 0; else drop the flag",
        ))
    if job.resume:
        _check_resume(job, add)


def _check_resume(job: Any, add: Callable[[Dict[str, str]], None]) -> None:
    """The checkpoint's TP/PP and model form against the job's."""
    spec, tp, pp = job.spec, job.tp, job.pp
    ck_tp, ck_pp, ck_nopp = job.resume["tp"], job.resume["pp"], job.resume["no_pipeline_parallel"]
    if ck_nopp is not None and bool(ck_nopp) != bool(spec.get("no_pipeline_parallel")):
        add(finding(
            "checkpoint model form", "fail", "resume",
            "checkpoint %s --no-pipeline-parallel" % ("with" if ck_nopp else "without"),
            "job %s --no-pipeline-parallel" % ("with" if spec.get("no_pipeline_parallel") else "without"),
            "a model saved with --no-pipeline-parallel cannot be converted to or from the pipeline "
            "form (not even by the universal checkpoint); resume with the form it was saved in",
        ))
    if (ck_tp, ck_pp) == (tp, pp):
        add(finding("checkpoint TP/PP == job TP/PP", "pass", "resume", "TP %s PP %s" % (ck_tp, ck_pp),
                    "TP %d PP %d" % (tp, pp)))
        return
    fix = universal_fix(job.deepspeed_version, job.era, ck_tp, ck_pp)
    add(finding(
        "checkpoint TP/PP == job TP/PP", "fail", "resume", "checkpoint TP %s PP %s" % (ck_tp, ck_pp),
        "TP %d PP %d (the job)" % (tp, pp),
        "loading a DeepSpeed checkpoint needs the same TP/PP; " + fix,
    ))


CPU_DS_CHECKPOINTING_CHECK = "DeepSpeed activation checkpointing runs on the accelerator"


class Recompute(NamedTuple):
    """What the job recomputes: ``checkpoint`` (--checkpoint-activations or the spec's switch), the
    last --recompute-granularity and --recompute-method, and ``kind`` for the memory estimate
    ("full", "selective" or None)."""

    checkpoint: bool
    granularity: Optional[str]
    method: Optional[str]
    kind: Optional[str]


def recompute(spec: Mapping[str, Any], flags: Mapping[str, Any]) -> Recompute:
    """Activation checkpointing and recompute as Megatron-DeepSpeed reads its flags."""
    granularity = last_value(flags, "--recompute-granularity")
    checkpoint = bool(spec.get("activation_checkpointing")) or "--checkpoint-activations" in flags
    if "--recompute-activations" in flags:
        granularity = "selective"
    kind = "full" if checkpoint or granularity == "full" else "selective" if granularity == "selective" else None
    return Recompute(checkpoint, granularity, last_value(flags, "--recompute-method"), kind)


def check_activation_checkpointing(job: Any, facts: Any, add: Callable[[Dict[str, str]], None]) -> None:
    """Activation checkpointing and recompute as Megatron-DeepSpeed and DeepSpeed take them."""
    spec, flags, rec = job.spec, job.flags, facts.recompute
    # --deepspeed-activation-checkpointing only picks DeepSpeed's implementation; Megatron
    # checkpoints nothing unless --checkpoint-activations or --recompute-* asks
    # (transformer.py ParallelTransformer.forward).
    any_checkpointing = rec.checkpoint or rec.granularity is not None
    if any_checkpointing and "--deepspeed-activation-checkpointing" in flags:
        _check_cpu_ds_checkpointing(spec, add)
    _check_partitioning(spec, job.ds, flags, any_checkpointing, add)
    _check_ds_checkpointing_section(job.ds, flags, add)
    _check_recompute_method(job.era, facts.derived, flags, rec.checkpoint, rec.granularity, rec.method, add)


def _check_cpu_ds_checkpointing(spec: Mapping[str, Any], add: Callable[[Dict[str, str]], None]) -> None:
    """DeepSpeed's checkpointing cannot run on the CPU accelerator."""
    try:
        accelerator = _stack_profiles.get(spec.get("stack_profile")).get("accelerator")
    except _stack_profiles.UnknownProfileError:
        accelerator = None
    if accelerator != "cpu":
        return
    # Found by bench/layout_parity.py: every rank of the role's recompute row stopped at its
    # first forward.
    add(finding(
        CPU_DS_CHECKPOINTING_CHECK, "fail", "activation checkpointing",
        "--deepspeed-activation-checkpointing on the %s stack profile (DS_ACCELERATOR=cpu)" % spec.get("stack_profile"),
        "Megatron's own recompute on CPU ranks",
        "DeepSpeed's checkpoint function takes a stream from the accelerator "
        "(deepspeed/runtime/activation_checkpointing/checkpointing.py:604-605 at 0.19.6), and the CPU "
        "accelerator's Stream is None (deepspeed/accelerator/cpu_accelerator.py:118-120): every rank stops at "
        "its first forward with \"TypeError: 'NoneType' object is not callable\". Set "
        "megatron_job_activation_checkpointing: false and give Megatron's own recompute in "
        "megatron_job_extra_args (--recompute-granularity full --recompute-method uniform "
        "--recompute-num-layers 1), which trains the same (docs/benchmarks.md, 'Layouts that train the same')",
    ))


def _check_partitioning(spec: Mapping[str, Any], ds: Optional[Mapping[str, Any]], flags: Mapping[str, Any],
                        any_checkpointing: bool, add: Callable[[Dict[str, str]], None]) -> None:
    """Activation partitioning needs something checkpointed, and DeepSpeed's checkpointing configured."""
    json_partition = bool(ds_get(ds or {}, "activation_checkpointing", "partition_activations"))
    partition = bool(spec.get("partition_activations")) or "--partition-activations" in flags or json_partition
    if not partition:
        return
    source = []
    if json_partition:
        source.append("ds_config activation_checkpointing.partition_activations")
    if spec.get("partition_activations") or "--partition-activations" in flags:
        source.append("--partition-activations")
    add(finding(
        "activation partitioning needs checkpointing", "pass" if any_checkpointing else "fail",
        "activation checkpointing",
        "%s%s" % (" and ".join(source), "" if any_checkpointing else ", no activation checkpointing"),
        "--checkpoint-activations (or --recompute-granularity full) with --deepspeed-activation-checkpointing",
        "" if any_checkpointing else "partitioning splits the checkpointed activations across TP ranks, so "
        "with nothing checkpointed it does nothing and the memory plan is wrong; add --checkpoint-activations "
        "--deepspeed-activation-checkpointing (megatron_job_activation_checkpointing: true) or drop partitioning",
    ))
    if any_checkpointing and "--deepspeed-activation-checkpointing" not in flags:
        add(finding(
            "DeepSpeed checkpointing configured", "warn", "activation checkpointing",
            "partitioning without --deepspeed-activation-checkpointing", "--deepspeed-activation-checkpointing",
            "Megatron-DeepSpeed calls deepspeed.checkpointing.configure() (which applies partitioning, "
            "contiguous memory and CPU checkpointing) only with --deepspeed-activation-checkpointing; add it",
        ))


def _check_ds_checkpointing_section(ds: Optional[Mapping[str, Any]], flags: Mapping[str, Any],
                                    add: Callable[[Dict[str, str]], None]) -> None:
    """ds_config's activation_checkpointing keys that Megatron-DeepSpeed's own flags overwrite."""
    # Megatron-DeepSpeed passes its own flag values (never None) to
    # deepspeed.checkpointing.configure(), which lets them overwrite the JSON section.
    section = ds_get(ds or {}, "activation_checkpointing")
    if isinstance(section, Mapping):
        overridden = [
            "%s (%s)" % (json_key, flag)
            for json_key, flag in (
                ("partition_activations", "--partition-activations"),
                ("contiguous_memory_optimization", "--contigious-checkpointing"),
                ("cpu_checkpointing", "--checkpoint-in-cpu"),
            )
            if section.get(json_key) and flag not in flags
        ]
        if overridden:
            add(finding(
                "ds_config activation_checkpointing applied", "warn", "activation checkpointing",
                "ds_config sets " + ", ".join(overridden), "the matching Megatron flags",
                "Megatron-DeepSpeed calls deepspeed.checkpointing.configure() with its own flag values, which "
                "overwrite the JSON; pass the flags in brackets (with --deepspeed-activation-checkpointing)",
            ))


def _check_recompute_method(era: str, derived: Mapping[str, Any], flags: Mapping[str, Any], checkpoint: bool,
                            granularity: Optional[str], method: Optional[str],
                            add: Callable[[Dict[str, str]], None]) -> None:
    """The recompute method each model path needs, and what the DeepSpeed pipeline engine honours."""
    # HEAD's ParallelTransformer (the model without the DeepSpeed pipeline engine) checkpoints
    # through DeepSpeed only with --deepspeed-activation-checkpointing; otherwise it takes
    # Megatron's path, which needs --recompute-method and raises at the first forward without it
    # (megatron/model/transformer.py _checkpointed_forward).
    if (era == HEAD and checkpoint and not derived.get("ds_pipeline_engine")
            and "--deepspeed-activation-checkpointing" not in flags and method is None):
        add(finding(
            "activation recompute method", "fail", "activation checkpointing",
            "--checkpoint-activations without --deepspeed-activation-checkpointing or --recompute-method",
            "--checkpoint-activations --deepspeed-activation-checkpointing, or --recompute-method uniform|block",
            "Megatron-DeepSpeed HEAD then stops at the first forward with 'Invalid activation recompute "
            "method.'; add --deepspeed-activation-checkpointing (what megatron_job_activation_checkpointing: "
            "true renders) or --recompute-granularity full --recompute-method uniform",
        ))
    # validate_args: selective recompute takes no method (megatron/arguments.py:380-383 at
    # 4efb479d; 9446eaac has no --recompute-granularity).
    if era == HEAD and granularity == "selective" and method is not None:
        add(finding(
            "recompute method with selective granularity", "fail", "activation checkpointing",
            "--recompute-granularity selective --recompute-method %s" % method, "no --recompute-method with selective",
            "Megatron-DeepSpeed's validate_args asserts 'recompute method is not yet supported for selective "
            "recomputing granularity'; drop --recompute-method, or use --recompute-granularity full",
        ))
    if derived.get("ds_pipeline_engine") and not checkpoint and granularity is not None and not (
        granularity == "full" and method == "uniform"
    ):
        add(finding(
            "recompute honoured by the DeepSpeed pipeline", "warn", "activation checkpointing",
            "--recompute-granularity %s%s" % (granularity, " --recompute-method %s" % method if method else ""),
            "--checkpoint-activations, or --recompute-granularity full --recompute-method uniform",
            "the DeepSpeed pipeline engine (used without --no-pipeline-parallel) checkpoints only with those; "
            "this setting recomputes nothing",
        ))


def check_flash_attn(job: Any, facts: Any, add: Callable[[Dict[str, str]], None]) -> None:
    """Flash attention where the stack profile requires it (cu130: the unfused path fails,
    docs/upstream-facts.md §G), the flag the installed provider serves, and half precision (Megatron's
    FlashSelfAttention asserts q, k, v are fp16 or bf16)."""
    spec, flags, from_script = job.spec, job.flags, job.from_script
    profile_name = spec.get("stack_profile")
    try:
        policy = _stack_profiles.flash_attn(profile_name)
    except _stack_profiles.UnknownProfileError:
        return  # the stack profile's own check names it
    profile = profile_name or _stack_profiles.DEFAULT_PROFILE
    given = [flag for flag in FLASH_ATTN_FLAGS if flag in flags]
    where = "train.sh" if from_script else "job spec"
    if policy["required"]:
        check = "flash attention on stack profile %s" % profile
        if not given:
            if from_script:
                found, fix = "train.sh has no --use-flash-attn* flag", "add --use-flash-attn-v2 to the pretrain_gpt.py arguments of train.sh"
            else:
                found, fix = ("%suse_flash_attn: false" % PREFIX,
                              "set %suse_flash_attn: auto (or true)" % PREFIX)
            add(finding(
                check, "fail", "attention", found, "--use-flash-attn-v2",
                "%s, so the job would stop at its first forward pass; %s, with flash_attn in the venv "
                "(python_env_flash_attn: auto installs the %s provider)" % (
                    FLASH_ATTN_REQUIRED_REASON, fix, policy["provider"] or "profile's"),
            ))
        elif policy["provider"] == "sdpa" and "--use-flash-attn-v2" not in given:
            add(finding(
                check, "warn", "attention", "%s: %s" % (where, " ".join(given)), "--use-flash-attn-v2",
                "the profile's flash_attn provider (python_env_flash_attn: sdpa) serves only "
                "flash_attn_varlen_func, which --use-flash-attn-v2 imports; %s need the real flash-attn "
                "(python_env_flash_attn: pip), else use --use-flash-attn-v2" % " ".join(given),
            ))
        else:
            add(finding(check, "pass", "attention", "%s: %s" % (where, " ".join(given)), "--use-flash-attn-v2"))
    if given:
        half = set(PRECISION_FLAGS).intersection(flags) or spec.get("precision") in ("bf16", "fp16")
        if not half:
            add(finding(
                "flash attention in half precision", "fail", "attention",
                "%s with fp32" % " ".join(given), "--bf16 or --fp16",
                "Megatron-DeepSpeed's FlashSelfAttention asserts q, k, v are fp16 or bf16; set "
                "%sprecision: bf16 (or fp16)" % PREFIX if not from_script else
                "Megatron-DeepSpeed's FlashSelfAttention asserts q, k, v are fp16 or bf16; add --bf16 (and "
                "bf16.enabled in ds_config.json)",
            ))


# Why bias-GeLU fusion is slower on a profile whose torch has no TorchScript GPU fuser.
BIAS_GELU_SLOW_REASON = (
    "Megatron-DeepSpeed's bias-GeLU fusion is a TorchScript function, and this profile's torch "
    "has no TorchScript GPU fuser left (set_jit_fusion_options asks for nvfuser, a no-op since "
    "torch 2.2), so it runs unfused: 34 kernels and 5x the time of a bias add + GeLU per layer, "
    "35.8% instead of 46.0% MFU for a 1.3B GPT on 2 x H200 (docs/benchmarks.md)"
)


def check_bias_gelu_fusion(job: Any, facts: Any, add: Callable[[Dict[str, str]], None]) -> None:
    """A warning where the job keeps Megatron's TorchScript bias-GeLU on a profile whose torch
    cannot fuse it (cu130): it runs, only slower."""
    spec, flags, from_script = job.spec, job.flags, job.from_script
    profile_name = spec.get("stack_profile")
    try:
        fuses = _stack_profiles.torchscript_fusion(profile_name)
    except _stack_profiles.UnknownProfileError:
        return  # the stack profile's own check names it
    if fuses:
        return
    profile = profile_name or _stack_profiles.DEFAULT_PROFILE
    check = "bias-GeLU without TorchScript fusion on stack profile %s" % profile
    if spec.get("fused_ops") and not from_script and "--no-bias-gelu-fusion" not in flags:
        # The fusion path runs megatron_ds_fused_ops's compiled kernel instead of TorchScript.
        add(finding(check, "pass", "performance", "%sfused_ops: true (a compiled bias-GeLU)" % PREFIX,
                    "--no-bias-gelu-fusion, or megatron_job_fused_ops"))
        return
    if "--no-bias-gelu-fusion" in flags:
        where = "train.sh" if from_script else "job spec"
        add(finding(check, "pass", "performance", "%s: --no-bias-gelu-fusion" % where, "--no-bias-gelu-fusion"))
        return
    found, fix = (("train.sh has no --no-bias-gelu-fusion", "add --no-bias-gelu-fusion to the pretrain_gpt.py arguments")
                  if from_script else
                  ("%sbias_gelu_fusion: true" % PREFIX, "set %sbias_gelu_fusion: auto (or false)" % PREFIX))
    add(finding(check, "warn", "performance", found, "--no-bias-gelu-fusion",
                "%s; %s" % (BIAS_GELU_SLOW_REASON, fix)))
