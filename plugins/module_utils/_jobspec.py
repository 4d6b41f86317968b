# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job spec: normalisation, derived numbers, parsers for existing job files, validation.

The job spec is the ``megatron_job_*`` variables of ``roles/megatron_job/defaults/main.yml``
with the prefix stripped. Templates (hostfile, ds_config.json, train.sh) and the
controller-side validation both start from ``normalize()`` and ``derive()``, so they agree by
construction. ``parse_train_script()``, ``parse_hostfile()`` and ``load_ds_config()`` read a
job the user already has, so the same ``validate()`` can judge it.

Every rule quotes the check that Megatron-DeepSpeed or DeepSpeed itself would fail on, with
its own message where it has one (shared FACTS.md A, B, D). No Ansible imports: this module
is unit-tested alone and imported by the validate_job action and by the template filters.
"""
from __future__ import annotations

import ast
import collections
import json
import math
import operator
import re
import shlex
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import _stack_profiles
from ._mds_args import (
    ArgValueError,
    BEFORE_REBASE,
    HEAD,
    LAUNCHER_ARGS,
    LAUNCHERS,
    TORCHRUN_ARGS,
    args_for,
    classify,
    coerce,
    era_for_deepspeed,
    split_args,
)

PREFIX = "megatron_job_"

# --------------------------------------------------------------------------------------------
# The spec: defaults, types, choices
# --------------------------------------------------------------------------------------------

# Mirrors roles/megatron_job/defaults/main.yml (a unit test keeps the two identical). Values
# that the YAML computes from other variables are format strings over the spec here.
DEFAULTS: Dict[str, Any] = {
    # Identity and paths
    "name": "gpt",
    "workdir": "/opt/megatron/jobs/{name}",
    "megatron_dir": "/opt/megatron/Megatron-DeepSpeed",
    "venv": "/opt/megatron/venv",
    "checkpoint_dir": "/shared/checkpoints/{name}",
    "tensorboard_dir": "/shared/tensorboard/{name}",
    "log_dir": "{workdir}/logs",
    "log_file": "{log_dir}/train.log",
    "cuda_home": "/usr/local/cuda",
    "nccl_env_file": "/etc/megatron/nccl.env",
    "nccl_env_dir": "/etc/megatron/nccl.d",
    "load": True,
    # Stack and ownership. The YAML default is megatron_stack_profile | default('cu117').
    "stack_profile": "cu117",
    "user": "megatron",
    "group": "{user}",
    # Cluster shape
    "gpus_per_node": 8,
    "launcher": "pdsh",
    "master_port": 29500,
    "master_addr": None,
    # Parallelism
    "tensor_parallel": 8,
    "pipeline_parallel": 1,
    "no_pipeline_parallel": True,
    "sequence_parallel": False,
    # Model
    "num_layers": 40,
    "hidden_size": 5120,
    "num_attention_heads": 40,
    "seq_length": 2048,
    "max_position_embeddings": 2048,
    "ffn_hidden_size": None,
    # Batch
    "micro_batch_size": 1,
    "global_batch_size": 512,
    # Optimisation
    "train_iters": 1000000,
    "lr": 6.0e-5,
    "min_lr": 6.0e-6,
    "lr_decay_style": "cosine",
    "lr_warmup_iters": 2000,
    "weight_decay": 0.1,
    "clip_grad": 1.0,
    "adam_beta1": 0.9,
    "adam_beta2": 0.95,
    "init_method_std": 0.006,
    # Precision
    "precision": "bf16",
    "fp16_initial_scale_power": 16,
    # ZeRO
    "zero_stage": 1,
    "zero_offload_optimizer": "none",
    "zero_offload_param": "none",
    "zero_pin_memory": True,
    "zero_overlap_comm": True,
    "zero_contiguous_gradients": True,
    "zero_allgather_partitions": True,
    "zero_allgather_bucket_size": 500000000,
    "zero_reduce_scatter": True,
    "zero_reduce_bucket_size": 500000000,
    # Activation checkpointing
    "activation_checkpointing": False,
    "partition_activations": False,
    "contiguous_memory_optimization": False,
    "checkpoint_in_cpu": False,
    # Fast paths
    # auto: on where the stack profile requires it (cu130, FACTS.md G), else off.
    "use_flash_attn": "auto",
    "masked_softmax_fusion": True,
    # auto: on unless the stack profile's torch cannot fuse the TorchScript function (cu130).
    "bias_gelu_fusion": "auto",
    "bias_dropout_fusion": True,
    "gradient_accumulation_fusion": False,
    # Logging, evaluation, checkpoints
    "log_interval": 10,
    "eval_interval": 100,
    "eval_iters": 10,
    "save_interval": 1000,
    "exit_signal_handler": True,
    # Data
    "data_path": "/shared/data/my-gpt_text_document",
    "tokenizer_type": "GPT2BPETokenizer",
    "vocab_file": "/shared/data/vocab.json",
    "merge_file": "/shared/data/merges.txt",
    "vocab_size": None,
    "tokenizer_model": None,
    "split": "969,30,1",
    "num_workers": 2,
    # Environment and pass-through. The YAML default of nccl_env is nccl_env | default({}).
    "env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"},
    "nccl_env": {},
    "extra_args": [],
}

# Keys whose default is computed from other keys, in dependency order.
TEMPLATED_DEFAULTS = ("workdir", "checkpoint_dir", "tensorboard_dir", "log_dir", "log_file", "group")

INT_KEYS = frozenset({
    "gpus_per_node", "master_port", "tensor_parallel", "pipeline_parallel", "num_layers",
    "hidden_size", "num_attention_heads", "seq_length", "max_position_embeddings",
    "ffn_hidden_size", "micro_batch_size", "global_batch_size", "train_iters", "lr_warmup_iters",
    "fp16_initial_scale_power", "zero_stage", "zero_allgather_bucket_size",
    "zero_reduce_bucket_size", "log_interval", "eval_interval", "eval_iters", "save_interval",
    "vocab_size", "num_workers",
})
FLOAT_KEYS = frozenset({
    "lr", "min_lr", "weight_decay", "clip_grad", "adam_beta1", "adam_beta2", "init_method_std",
})
BOOL_KEYS = frozenset(k for k, v in DEFAULTS.items() if isinstance(v, bool))
# Booleans that also take "auto" (resolved from the stack profile by normalize()).
AUTO_BOOL_KEYS = frozenset(_stack_profiles.AUTO_SETTINGS)
# May be null: Megatron computes them (ffn = 4 x hidden) or only some tokenizers need them.
NULLABLE_KEYS = frozenset({
    "ffn_hidden_size", "vocab_size", "vocab_file", "merge_file", "tokenizer_model", "master_addr",
})
# Must be >= 1 (they divide, or Megatron asserts > 0).
POSITIVE_KEYS = frozenset({
    "gpus_per_node", "tensor_parallel", "pipeline_parallel", "num_layers", "hidden_size",
    "num_attention_heads", "seq_length", "max_position_embeddings", "ffn_hidden_size",
    "micro_batch_size", "global_batch_size", "train_iters", "master_port",
})
CHOICES: Dict[str, Tuple[str, ...]] = {
    "launcher": ("pdsh", "openmpi", "slurm"),
    "precision": ("bf16", "fp16", "fp32"),
    "zero_offload_optimizer": ("none", "cpu"),
    "zero_offload_param": ("none", "cpu"),
    "lr_decay_style": ("constant", "linear", "cosine", "inverse-square-root"),
    "tokenizer_type": (
        "BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer",
        "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HFTokenizer", "NullTokenizer",
    ),
}
ZERO_STAGES = (0, 1, 2, 3)

# megatron_job_* variables that are not part of the spec: inputs of playbooks/validate.yml,
# and the per-host address the hostfile lists.
NON_SPEC_KEYS = frozenset({"script", "ds_config_file", "hostfile", "node_address"})

# spec key -> (flag, kind). kind "value": the flag takes the spec's value; "true": the flag is
# present when the spec value is true; "false": present when the spec value is false
# (Megatron's --no-* store_false flags). Precision, --save/--load and the launcher options are
# handled apart. The train.sh template and parse_train_script() both read this table.
SPEC_ARGS: Tuple[Tuple[str, str, str], ...] = (
    ("tensor_parallel", "--tensor-model-parallel-size", "value"),
    ("pipeline_parallel", "--pipeline-model-parallel-size", "value"),
    ("no_pipeline_parallel", "--no-pipeline-parallel", "true"),
    ("sequence_parallel", "--sequence-parallel", "true"),
    ("num_layers", "--num-layers", "value"),
    ("hidden_size", "--hidden-size", "value"),
    ("num_attention_heads", "--num-attention-heads", "value"),
    ("seq_length", "--seq-length", "value"),
    ("max_position_embeddings", "--max-position-embeddings", "value"),
    ("ffn_hidden_size", "--ffn-hidden-size", "value"),
    ("micro_batch_size", "--micro-batch-size", "value"),
    ("global_batch_size", "--global-batch-size", "value"),
    ("train_iters", "--train-iters", "value"),
    ("lr", "--lr", "value"),
    ("min_lr", "--min-lr", "value"),
    ("lr_decay_style", "--lr-decay-style", "value"),
    ("lr_warmup_iters", "--lr-warmup-iters", "value"),
    ("weight_decay", "--weight-decay", "value"),
    ("clip_grad", "--clip-grad", "value"),
    ("adam_beta1", "--adam-beta1", "value"),
    ("adam_beta2", "--adam-beta2", "value"),
    ("init_method_std", "--init-method-std", "value"),
    ("zero_stage", "--zero-stage", "value"),
    ("activation_checkpointing", "--checkpoint-activations", "true"),
    ("partition_activations", "--partition-activations", "true"),
    ("contiguous_memory_optimization", "--contigious-checkpointing", "true"),
    ("checkpoint_in_cpu", "--checkpoint-in-cpu", "true"),
    ("use_flash_attn", "--use-flash-attn-v2", "true"),
    ("masked_softmax_fusion", "--no-masked-softmax-fusion", "false"),
    ("bias_gelu_fusion", "--no-bias-gelu-fusion", "false"),
    ("bias_dropout_fusion", "--no-bias-dropout-fusion", "false"),
    ("gradient_accumulation_fusion", "--no-gradient-accumulation-fusion", "false"),
    ("log_interval", "--log-interval", "value"),
    ("eval_interval", "--eval-interval", "value"),
    ("eval_iters", "--eval-iters", "value"),
    ("save_interval", "--save-interval", "value"),
    ("exit_signal_handler", "--exit-signal-handler", "true"),
    ("data_path", "--data-path", "value"),
    ("tokenizer_type", "--tokenizer-type", "value"),
    ("vocab_file", "--vocab-file", "value"),
    ("merge_file", "--merge-file", "value"),
    ("vocab_size", "--vocab-size", "value"),
    ("tokenizer_model", "--tokenizer-model", "value"),
    ("split", "--split", "value"),
    ("num_workers", "--num-workers", "value"),
    ("tensorboard_dir", "--tensorboard-dir", "value"),
)
SPEC_FLAG_KEYS: Dict[str, str] = {flag: key for key, flag, kind in SPEC_ARGS}
PRECISION_FLAGS = {"--bf16": "bf16", "--fp16": "fp16"}
# Settings that DeepSpeed applies only through deepspeed.checkpointing.configure(), which
# Megatron-DeepSpeed calls only with --deepspeed-activation-checkpointing (initialize.py:266).
DS_CHECKPOINTING_KEYS = ("partition_activations", "contiguous_memory_optimization", "checkpoint_in_cpu")

# Settings the job files refuse to render on a Megatron-DeepSpeed without the flag (the user
# asked for a feature the stack lacks); the others (--exit-signal-handler) are left out with
# a warning.
DROPPED_IS_ERROR = frozenset({"--sequence-parallel", "--use-flash-attn-v2", "--vocab-size", "--tokenizer-model"})

# Every flag that turns on Megatron-DeepSpeed's flash attention (args.use_flash_attn is their
# OR, FACTS.md A). The SDPA adapter serves only the v2 import (flash_attn_varlen_func).
FLASH_ATTN_FLAGS = ("--use-flash-attn-v2", "--use-flash-attn", "--use-flash-attn-v1",
                    "--use-flash-attn-triton", "--use-flash-attn-builder")
FLASH_ATTN_AUTO = "auto"
# Why a profile requires flash attention: its torch breaks the unfused path (FACTS.md G).
FLASH_ATTN_REQUIRED_REASON = (
    "Megatron-DeepSpeed's unfused attention fails on this profile's torch (FACTS.md G: "
    "CoreAttention.forward raises 'view size is not compatible with input tensor's size and "
    "stride', .view on non-contiguous query/key/value)"
)

# Tokenizer vocabularies the parameter count needs (GPT-2 BPE: 50257 tokens).
KNOWN_VOCAB_SIZES = {"GPT2BPETokenizer": 50257}
MAKE_VOCAB_SIZE_DIVISIBLE_BY = 128

# DeepSpeed ships deepspeed.checkpoint.ds_to_universal from 0.11.2 (#4516, ZeRO-1 only);
# 0.12.0 is the first minor release with it and is what this collection supports.
UNIVERSAL_CHECKPOINT_MIN_DEEPSPEED = "0.12.0"
# DeepSpeed's ZeRO-2 estimator changed from 4P + 16P/N to 2P + 18P/N in 0.14.3.
ZERO2_ESTIMATOR_CHANGED = "0.14.3"

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

# DeepSpeed's messages, verbatim (FACTS.md D1, D2, D3; engine.py _configure_optimizer).
DS_BATCH_MSG = (
    "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
    "gradient_acc_step * world_size {} != {} * {} * {}"
)
DS_BATCH_MISSING_MSG = "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"
DS_PIPE_ZERO_MSG = "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"
DS_BF16_FP16_MSG = "bfloat16 and fp16 modes cannot be simultaneously enabled"
DS_OFFLOAD_CLIENT_OPT_MSG = (
    "You are using ZeRO-Offload with a client provided optimizer (...) which in most cases "
    "will yield poor performance. Please either use deepspeed.ops.adam.DeepSpeedCPUAdam or set "
    "an optimizer in your ds-config"
)
DS_DIVISIBLE_MSG = "Train batch size must be divisible by micro-batch data parallelism"
# Megatron-DeepSpeed's messages (arguments.py, microbatches.py).
MDS_GLOBAL_BATCH_MSG = (
    "global batch size ({}) is not divisible by micro batch size ({}) times data parallel size ({})"
)
MDS_WORLD_MSG = (
    "world size ({}) is not divisible by tensor parallel size ({}) times pipeline parallel "
    "size ({}) times seqence parallel size ({})"
)
MDS_NO_PP_MSG = "pipeline_model_parallel_size must be 1 if pipeline parallel is disabled"

# The guide's OOM advice (问题2：OOM), which the memory finding makes concrete.
GUIDE_OOM_ADVICE = (
    "the guide's OOM advice: lower the micro batch (--micro-batch-size; keep "
    "--global-batch-size so gradient accumulation grows), turn on activation checkpointing "
    "(--checkpoint-activations), or ZeRO-3 with CPU offload"
)

# Fixed per-GPU memory that is not model state or activations: CUDA context, NCCL
# buffers, allocator fragmentation. A round figure: the estimate is rough (+-20%).
RESERVED_BYTES = 2 * 1024 ** 3
MIB = 1024 ** 2
GIB = 1024 ** 3
MEMORY_WARN_FRACTION = 0.90


class JobSpecError(ValueError):
    """A job spec value of the wrong type or out of range; the message names the variable."""


# --------------------------------------------------------------------------------------------
# normalize / derive
# --------------------------------------------------------------------------------------------


def strip_prefix(spec_vars: Mapping[str, Any]) -> Dict[str, Any]:
    """``megatron_job_x`` -> ``x``; unprefixed keys pass through. A key given both ways with
    different values is an error (which one would the user expect?)."""
    out: Dict[str, Any] = {}
    given_as: Dict[str, str] = {}
    for raw_key, value in spec_vars.items():
        key = raw_key[len(PREFIX):] if raw_key.startswith(PREFIX) else raw_key
        if key in out and out[key] != value:
            raise JobSpecError(
                "the job spec sets %s twice, as %s=%r and %s=%r: keep one (the megatron_job_ "
                "variable)" % (key, given_as[key], out[key], raw_key, value)
            )
        out[key] = value
        given_as[key] = raw_key
    return out


def unknown_keys(spec_vars: Mapping[str, Any]) -> List[str]:
    """Keys that are not job spec variables (typos such as megatron_job_micro_batch),
    prefixed as given, sorted. Inputs of validate.yml (NON_SPEC_KEYS) are not reported."""
    found = []
    for raw_key in spec_vars:
        key = raw_key[len(PREFIX):] if raw_key.startswith(PREFIX) else raw_key
        if key not in DEFAULTS and key not in NON_SPEC_KEYS:
            found.append(raw_key)
    return sorted(found)


def _var(key: str) -> str:
    return PREFIX + key


def _to_int(key: str, value: Any) -> int:
    if isinstance(value, bool):
        raise JobSpecError("%s: found %r, expected an integer" % (_var(key), value))
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            return int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                number = math.nan
            if not math.isnan(number) and number.is_integer():
                return int(number)
    raise JobSpecError("%s: found %r, expected an integer" % (_var(key), value))


def _to_float(key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise JobSpecError("%s: found %r, expected a number" % (_var(key), value))
    try:
        return float(value)
    except (TypeError, ValueError):
        raise JobSpecError("%s: found %r, expected a number" % (_var(key), value))


_TRUE = {"true", "yes", "on", "1", "y"}
_FALSE = {"false", "no", "off", "0", "n"}


def _to_bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise JobSpecError("%s: found %r, expected true or false" % (_var(key), value))


def _coerce_key(key: str, value: Any) -> Any:
    if value is None:
        if key in NULLABLE_KEYS:
            return None
        raise JobSpecError("%s: found null, expected a value (default %r)" % (_var(key), DEFAULTS[key]))
    if key in INT_KEYS:
        value = _to_int(key, value)
        if key in POSITIVE_KEYS and value < 1:
            raise JobSpecError("%s: found %d, expected an integer >= 1" % (_var(key), value))
        if value < 0:
            raise JobSpecError("%s: found %d, expected an integer >= 0" % (_var(key), value))
        if key == "zero_stage" and value not in ZERO_STAGES:
            raise JobSpecError("%s: found %d, expected one of 0, 1, 2, 3" % (_var(key), value))
        return value
    if key in FLOAT_KEYS:
        return _to_float(key, value)
    if key in AUTO_BOOL_KEYS and isinstance(value, str) and value.strip().lower() == FLASH_ATTN_AUTO:
        return FLASH_ATTN_AUTO
    if key in BOOL_KEYS or key in AUTO_BOOL_KEYS:
        return _to_bool(key, value)
    if key in ("env", "nccl_env"):
        if not isinstance(value, Mapping):
            raise JobSpecError("%s: found %r, expected a mapping NAME: value" % (_var(key), value))
        return {str(k): "" if v is None else str(v) for k, v in value.items()}
    if key == "extra_args":
        if isinstance(value, str):
            return shlex.split(value)
        if not isinstance(value, (list, tuple)):
            raise JobSpecError("%s: found %r, expected a list of arguments" % (_var(key), value))
        return [str(v) for v in value]
    value = str(value)
    if key in CHOICES:
        lowered = {c.lower(): c for c in CHOICES[key]}
        if key in ("zero_offload_optimizer", "zero_offload_param") and value.strip() == "":
            value = "none"
        if value.strip().lower() not in lowered:
            raise JobSpecError(
                "%s: found %r, expected one of %s" % (_var(key), value, ", ".join(CHOICES[key]))
            )
        return lowered[value.strip().lower()]
    return value


def normalize(spec_vars: Mapping[str, Any]) -> Dict[str, Any]:
    """The full job spec from ``spec_vars`` (megatron_job_* variables or stripped names).

    Strips the prefix, fills every missing key from DEFAULTS (paths computed from ``name`` and
    ``workdir`` as the role's defaults do), coerces numbers and booleans given as strings
    (``-e megatron_job_tensor_parallel=4``), lower-cases choices, and derives
    ``ffn_hidden_size`` (Megatron's default, 4 x hidden) when it is null. Keys that are not
    spec variables are ignored here; ``unknown_keys()`` lists them. Raises JobSpecError
    naming the variable, the value found and the value expected.
    """
    given = strip_prefix(spec_vars)
    spec: Dict[str, Any] = {}
    for key, default in DEFAULTS.items():
        if key in TEMPLATED_DEFAULTS:
            continue
        value = given.get(key, default)
        if isinstance(value, (dict, list)) and value is default:
            value = json.loads(json.dumps(default))
        spec[key] = _coerce_key(key, value)
    for key in TEMPLATED_DEFAULTS:
        if key in given and given[key] is not None:
            spec[key] = str(given[key])
        else:
            spec[key] = DEFAULTS[key].format(**spec)
    if spec["ffn_hidden_size"] is None:
        spec["ffn_hidden_size"] = 4 * spec["hidden_size"]
    for key in sorted(AUTO_BOOL_KEYS):
        spec[key] = resolve_auto(key, spec[key], spec["stack_profile"])
    return {key: spec[key] for key in DEFAULTS}


def resolve_auto(key: str, value: Any, profile_name: Optional[str]) -> bool:
    """An AUTO_BOOL_KEYS setting as a bool: ``auto`` follows the stack profile
    (_stack_profiles.AUTO_SETTINGS: use_flash_attn is true where the profile requires flash
    attention, cu130; bias_gelu_fusion is false where its torch cannot fuse the TorchScript
    bias-GeLU, cu130); anything else is read as a bool. JobSpecError naming
    megatron_job_stack_profile when the profile is unknown."""
    if isinstance(value, str) and value.strip().lower() == FLASH_ATTN_AUTO:
        try:
            return _stack_profiles.auto_setting(key, profile_name)
        except _stack_profiles.UnknownProfileError as exc:
            raise JobSpecError("%s: %s" % (_var("stack_profile"), exc.args[0] if exc.args else exc))
    return _to_bool(key, value)


def padded_vocab_size(spec: Mapping[str, Any]) -> Optional[int]:
    """Megatron's _vocab_size_with_padding: the vocabulary rounded up to a multiple of
    128 x TP. NullTokenizer adds one EOD token. None when the tokenizer's size is unknown."""
    tokenizer = spec.get("tokenizer_type") or "GPT2BPETokenizer"
    if tokenizer == "NullTokenizer":
        if spec.get("vocab_size") is None:
            return None
        size = int(spec["vocab_size"]) + 1
    elif spec.get("vocab_size") is not None and tokenizer not in KNOWN_VOCAB_SIZES:
        size = int(spec["vocab_size"])
    elif tokenizer in KNOWN_VOCAB_SIZES:
        size = KNOWN_VOCAB_SIZES[tokenizer]
    else:
        return None
    multiple = MAKE_VOCAB_SIZE_DIVISIBLE_BY * max(1, int(spec.get("tensor_parallel") or 1))
    return int(math.ceil(size / float(multiple)) * multiple)


def layer_parameters(hidden: int, ffn: int) -> int:
    """Parameters of one GPT transformer layer: attention QKV + projection with biases
    (4h^2 + 4h), MLP with biases (2hf + f + h), two layernorms (4h): 4h^2 + 2hf + 9h + f,
    which is 12h^2 + 13h for the usual f = 4h."""
    return 4 * hidden * hidden + 2 * hidden * ffn + 9 * hidden + ffn


def gpt_parameters(spec: Mapping[str, Any]) -> Optional[int]:
    """Total parameters: L x layer + V x h (word embeddings, tied with the output layer) +
    max_position_embeddings x h (learned positions) + 2h (final layernorm). V is the padded
    vocabulary; 50257 (GPT-2 BPE) is assumed when the tokenizer does not say."""
    try:
        layers = int(spec["num_layers"])
        hidden = int(spec["hidden_size"])
        positions = int(spec["max_position_embeddings"])
    except (KeyError, TypeError, ValueError):
        return None
    ffn = int(spec.get("ffn_hidden_size") or 4 * hidden)
    vocab = padded_vocab_size(spec) or KNOWN_VOCAB_SIZES["GPT2BPETokenizer"]
    return layers * layer_parameters(hidden, ffn) + vocab * hidden + positions * hidden + 2 * hidden


def _int_or_none(value: Any) -> Optional[int]:
    try:
        if value is None or isinstance(value, bool):
            return None
        return int(value)
    except (TypeError, ValueError):
        return None


def derive(spec: Mapping[str, Any], nodes: int, gpus_per_node: int, *, strict: bool = False) -> Dict[str, Any]:
    """The numbers every job file needs, from a normalized spec and the cluster shape.

    Returns world_size (= nodes x gpus_per_node), model_parallel_size (TP x PP),
    data_parallel_size (world / (TP x PP), None when it does not divide), micro_batch_size,
    global_batch_size (Megatron's default micro x DP when the spec has none),
    gradient_accumulation_steps (global / (micro x DP), None when it does not divide),
    train_batch_size and train_micro_batch_size_per_gpu (what ds_config.json must carry),
    ffn_hidden_size, kv_channels, num_layers_per_stage (None when uneven), padded_vocab_size,
    num_parameters, ds_pipeline_engine (DeepSpeed's PipelineModule is used unless
    no_pipeline_parallel), zero_stage, bf16, fp16.

    With ``strict=True`` a shape that does not divide raises JobSpecError saying what to change.
    """
    nodes = int(nodes)
    gpus = int(gpus_per_node)
    tp = _int_or_none(spec.get("tensor_parallel")) or 1
    pp = _int_or_none(spec.get("pipeline_parallel")) or 1
    world = nodes * gpus
    model_parallel = tp * pp
    dp = world // model_parallel if model_parallel and world % model_parallel == 0 and world >= model_parallel else None
    micro = _int_or_none(spec.get("micro_batch_size"))
    global_batch = _int_or_none(spec.get("global_batch_size"))
    if global_batch is None and micro and dp:
        global_batch = micro * dp
    grad_acc = None
    if micro and dp and global_batch and global_batch % (micro * dp) == 0:
        grad_acc = global_batch // (micro * dp)
    hidden = _int_or_none(spec.get("hidden_size"))
    heads = _int_or_none(spec.get("num_attention_heads"))
    layers = _int_or_none(spec.get("num_layers"))
    ffn = _int_or_none(spec.get("ffn_hidden_size")) or (4 * hidden if hidden else None)
    precision = spec.get("precision") or "fp32"
    derived = {
        "nodes": nodes,
        "gpus_per_node": gpus,
        "world_size": world,
        "tensor_parallel": tp,
        "pipeline_parallel": pp,
        "model_parallel_size": model_parallel,
        "data_parallel_size": dp,
        "micro_batch_size": micro,
        "global_batch_size": global_batch,
        "gradient_accumulation_steps": grad_acc,
        "train_batch_size": global_batch,
        "train_micro_batch_size_per_gpu": micro,
        "ffn_hidden_size": ffn,
        "kv_channels": hidden // heads if hidden and heads and hidden % heads == 0 else None,
        "num_layers_per_stage": layers // pp if layers and layers % pp == 0 else None,
        "padded_vocab_size": padded_vocab_size(spec),
        "num_parameters": gpt_parameters(spec),
        "ds_pipeline_engine": not bool(spec.get("no_pipeline_parallel")),
        "zero_stage": _int_or_none(spec.get("zero_stage")),
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
    }
    if strict:
        problems = []
        if dp is None:
            problems.append(
                "world size %d (%d nodes x %d GPUs) is not divisible by TP %d x PP %d: change "
                "megatron_job_tensor_parallel / megatron_job_pipeline_parallel or the node count"
                % (world, nodes, gpus, tp, pp)
            )
        elif micro and global_batch and grad_acc is None:
            problems.append(
                MDS_GLOBAL_BATCH_MSG.format(global_batch, micro, dp)
                + ": make megatron_job_global_batch_size a multiple of %d" % (micro * dp)
            )
        if problems:
            raise JobSpecError("; ".join(problems))
    return derived


def spec_to_args(spec: Mapping[str, Any], era: str = HEAD) -> Tuple[List[str], List[Tuple[str, str]]]:
    """The pretrain_gpt.py arguments the spec stands for, in SPEC_ARGS order, followed by
    ``extra_args``. Returns (args, dropped): ``dropped`` lists (flag, reason) for settings the
    era's parser does not have (before_rebase has no --exit-signal-handler,
    --use-flash-attn-v2, --sequence-parallel, --no-gradient-accumulation-fusion (it has no
    such fusion), --vocab-size); they are left out rather than crash argparse.

    Also emitted: --bf16/--fp16 from precision, --zero-stage, --deepspeed-activation-checkpointing
    when a DeepSpeed-only checkpointing setting is on (it is what applies them),
    --cpu-optimizer when the optimizer is offloaded (DeepSpeed refuses a client GPU optimizer
    with ZeRO-Offload), --save/--load from checkpoint_dir/load. The caller adds --deepspeed
    --deepspeed_config PATH.
    """
    table = args_for(era)
    args: List[str] = []
    dropped: List[Tuple[str, str]] = []

    def emit(flag: str, *values: str) -> None:
        if flag in table:
            args.append(flag)
            args.extend(values)
        else:
            dropped.append((flag, "Megatron-DeepSpeed %s has no %s" % (era, flag)))

    for key, flag, kind in SPEC_ARGS:
        value = spec.get(key)
        if kind == "value":
            if value is None or value == "":
                continue
            if key == "data_path":
                emit(flag, *str(value).split())
            elif isinstance(value, float):
                emit(flag, repr(value))
            else:
                emit(flag, str(value))
        elif kind == "true" and value:
            emit(flag)
        elif kind == "false" and value is False:
            if key == "gradient_accumulation_fusion" and era == BEFORE_REBASE:
                continue  # before_rebase has no such fusion, so nothing to turn off
            emit(flag)
    if spec.get("precision") in PRECISION_FLAGS.values():
        emit("--" + spec["precision"])
    if any(spec.get(key) for key in DS_CHECKPOINTING_KEYS):
        emit("--deepspeed-activation-checkpointing")
    if spec.get("zero_offload_optimizer") == "cpu":
        emit("--cpu-optimizer")
    if spec.get("checkpoint_dir"):
        emit("--save", str(spec["checkpoint_dir"]))
        if spec.get("load"):
            emit("--load", str(spec["checkpoint_dir"]))
    if spec.get("tokenizer_type") != "NullTokenizer" and "--vocab-size" in args:
        index = args.index("--vocab-size")
        del args[index:index + 2]
    args.extend(str(a) for a in spec.get("extra_args") or [])
    return args, dropped


# --------------------------------------------------------------------------------------------
# Hostfile and ds_config
# --------------------------------------------------------------------------------------------

_HOSTFILE_RE = re.compile(r"^(\S+)\s+slots=(\d+)")


class HostfileError(ValueError):
    """DeepSpeed's own ValueError text for a hostfile it would refuse."""


def parse_hostfile(text: str) -> "collections.OrderedDict[str, int]":
    """Hosts and slots, in order, exactly as DeepSpeed's runner._parse_hostfile reads them:
    regex ``^(\\S+)\\s+slots=(\\d+)`` on each stripped line, ``#`` comment lines and blank lines
    skipped, a repeated host or a line that does not match raises HostfileError (DeepSpeed
    raises ValueError with the same words), and an empty pool too."""
    pool: "collections.OrderedDict[str, int]" = collections.OrderedDict()
    for raw in text.splitlines():
        line = raw.strip()
        match = _HOSTFILE_RE.search(line)
        if line.startswith("#") or line == "":
            continue
        if match:
            host = match.group(1)
            if host in pool:
                raise HostfileError(
                    "Hostfile contains multiple entries for %s, unable to proceed with launching" % host
                )
            pool[host] = int(match.group(2))
        else:
            raise HostfileError("Hostfile contains a bad entry: %s, unable to proceed with launching" % line)
    if not pool:
        raise HostfileError("Hostfile is empty or not formatted correctly, unable to proceed with launching.")
    return pool


class DsConfigError(ValueError):
    pass


def load_ds_config(text: str) -> Tuple[Dict[str, Any], List[str]]:
    """(config, duplicate keys). Megatron-DeepSpeed reads the file with a plain json.load
    (training.py _create_ds_config_dict), so a duplicated key silently keeps the last value;
    DeepSpeed itself would raise 'Duplicate keys in DeepSpeed config'. Raises DsConfigError
    on invalid JSON or a top level that is not an object."""
    duplicates: List[str] = []

    def hook(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
        seen: Dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                duplicates.append(key)
            seen[key] = value
        return seen

    try:
        config = json.loads(text, object_pairs_hook=hook)
    except ValueError as exc:
        raise DsConfigError("ds_config is not valid JSON: %s" % exc)
    if not isinstance(config, dict):
        raise DsConfigError("ds_config must be a JSON object, found %s" % type(config).__name__)
    return config, duplicates


# --------------------------------------------------------------------------------------------
# train.sh parser
# --------------------------------------------------------------------------------------------

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(\+?)=")
_DECLARATION = {"export", "declare", "typeset", "local", "readonly"}
_WRAPPERS = {"nohup", "env", "time", "exec", "stdbuf", "numactl", "srun", "mpirun", "nsys", "sudo"}


class _Lexed:
    """One shell word after expansion: its text, whether it was an assignment, which
    variables could not be resolved."""

    __slots__ = ("text", "assign", "unresolved")

    def __init__(self, text: str, assign: Optional[Tuple[str, str]], unresolved: List[str]) -> None:
        self.text = text
        self.assign = assign
        self.unresolved = unresolved


def _split_statements(text: str) -> List[str]:
    """Raw statements: line continuations joined, comments dropped, split at unquoted
    newlines, ``;``, ``&&``, ``||``, ``|`` and a lone ``&``."""
    out: List[str] = []
    cur: List[str] = []
    i = 0
    quote: Optional[str] = None
    depth = 0  # inside $( ... )
    n = len(text)
    while i < n:
        c = text[i]
        if quote == "'":
            cur.append(c)
            if c == "'":
                quote = None
            i += 1
            continue
        if c == "\\" and i + 1 < n:
            if text[i + 1] == "\n":
                i += 2
                continue
            cur.append(text[i:i + 2])
            i += 2
            continue
        if quote == '"':
            cur.append(c)
            if c == '"':
                quote = None
            elif c == "$" and text.startswith("$(", i):
                depth += 1
                cur.append("(")
                i += 1
            elif c == "(" and depth:
                depth += 1
            elif c == ")" and depth:
                depth -= 1
            i += 1
            continue
        if c in ("'", '"', "`"):
            if c == "`":
                end = text.find("`", i + 1)
                end = n - 1 if end < 0 else end
                cur.append(text[i:end + 1])
                i = end + 1
                continue
            quote = c
            cur.append(c)
            i += 1
            continue
        if c == "$" and text.startswith("$(", i):
            depth += 1
            cur.append("$(")
            i += 2
            continue
        if c == ")" and depth:
            depth -= 1
            cur.append(c)
            i += 1
            continue
        if depth:
            if c == "(":
                depth += 1
            cur.append(c)
            i += 1
            continue
        if c == "#" and (not cur or cur[-1][-1:] in (" ", "\t", "\n", ";", "&", "|")):
            while i < n and text[i] != "\n":
                i += 1
            continue
        if c in "\n;|&":
            previous = "".join(cur)
            if c == "&" and (previous.endswith(">") or previous.endswith("<") or text.startswith("&>", i)):
                cur.append(c)
                i += 1
                continue
            statement = previous.strip()
            if statement:
                out.append(statement)
            cur = []
            i += 2 if text[i:i + 2] in ("&&", "||") else 1
            continue
        cur.append(c)
        i += 1
    statement = "".join(cur).strip()
    if statement:
        out.append(statement)
    return out


_ARITH_OPS: Dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Div: operator.floordiv, ast.Mod: operator.mod,
}


def _arith(expr: str, variables: Mapping[str, str]) -> Optional[str]:
    """Evaluate bash $(( )) integer arithmetic over + - * / % and parentheses; None if not."""
    def name(match: "re.Match[str]") -> str:
        return variables.get(match.group(1), "0") or "0"

    expr = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", name, expr)
    expr = re.sub(r"\b([A-Za-z_][A-Za-z0-9_]*)\b", name, expr)
    try:
        tree = ast.parse(expr.replace("/", "//").strip(), mode="eval")
    except SyntaxError:
        return None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            return _ARITH_OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        raise ValueError("unsupported")

    try:
        return str(ev(tree))
    except (ValueError, ZeroDivisionError):
        return None


def _lex_words(statement: str, variables: Mapping[str, str],
               tainted: Optional[Mapping[str, List[str]]] = None) -> List[_Lexed]:
    """Split a statement into words the way bash would after parameter expansion: quotes
    removed, $VAR / ${VAR} / ${VAR:-default} / $((arithmetic)) expanded, unquoted expansions
    word-split, redirections dropped. Unknown variables stay as written ('$FOO') and are
    reported; command substitutions stay as written too."""
    words: List[_Lexed] = []
    i = 0
    n = len(statement)
    while i < n:
        while i < n and statement[i] in " \t\n":
            i += 1
        if i >= n:
            break
        # Redirections: [n]>file, >>file, <file, 2>&1, &>file.
        redirect = re.match(r"(\d*|&)(>>|>&|<&|>|<)(&?\d+|-)?", statement[i:])
        if redirect and redirect.group(2) and (redirect.group(1) or statement[i] in "<>"):
            i += redirect.end()
            if not redirect.group(3):
                while i < n and statement[i] in " \t":
                    i += 1
                while i < n and statement[i] not in " \t\n":
                    i += 1
            continue
        fields: List[str] = []
        cur: Optional[str] = None
        unresolved: List[str] = []
        assign: Optional[Tuple[str, str]] = None
        match = _ASSIGN_RE.match(statement[i:])
        no_split = False
        if match:
            assign = (match.group(1), "")
            i += match.end()
            cur = ""
            no_split = True

        def add_literal(text: str) -> None:
            nonlocal cur
            cur = (cur or "") + text

        def add_expansion(text: str, quoted: bool) -> None:
            nonlocal cur
            if quoted or no_split:
                add_literal(text)
                return
            parts = re.split(r"[ \t\n]+", text)
            for index, part in enumerate(parts):
                if index > 0 and cur is not None:
                    fields.append(cur)
                    cur = None
                if part:
                    cur = (cur or "") + part

        def backtick(pos: int) -> int:
            """Keep the `...` substitution at statement[pos] opaque; return the index after it."""
            end = statement.find("`", pos + 1)
            end = n - 1 if end < 0 else end
            add_literal(_opaque(statement[pos:end + 1]))
            unresolved.append(statement[pos:end + 1])
            return end + 1

        def expand(pos: int, quoted: bool) -> int:
            """Expand the $-construct at statement[pos]; return the index after it."""
            rest = statement[pos:]
            if rest.startswith("$(("):
                end = _closing_paren(rest, 1)
                if end > 0 and rest[end - 1] == ")":
                    value = None if "$(" in rest[3:end - 1] or "`" in rest[3:end - 1] else _arith(rest[3:end - 1], variables)
                    if value is not None:
                        add_expansion(value, quoted)
                    else:
                        add_literal(_opaque(rest[:end + 1]))
                        unresolved.append(rest[:end + 1])
                    return pos + end + 1
            if rest.startswith("$("):
                end = _closing_paren(rest, 1)
                if end < 0:
                    add_literal(rest)
                    unresolved.append(rest)
                    return n
                add_literal(_opaque(rest[:end + 1]))
                unresolved.append(rest[:end + 1])
                return pos + end + 1
            if rest.startswith("${"):
                end = rest.find("}")
                if end < 0:
                    add_literal(rest)
                    return n
                body = rest[2:end]
                m = re.match(r"^([A-Za-z_][A-Za-z0-9_]*|\d+|[@*#?$!])(?:(:?[-=+?])(.*))?$", body, re.S)
                if not m:
                    add_literal(rest[:end + 1])
                    unresolved.append(rest[:end + 1])
                    return pos + end + 1
                var, op, word = m.group(1), m.group(2), m.group(3) or ""
                value = variables.get(var)
                is_set = value is not None
                empty = not value
                if op in (":-", ":="):
                    chosen = word if empty else value
                    if op == ":=" and empty:
                        variables[var] = word  # type: ignore[index]
                    add_expansion(_expand_plain(chosen or "", variables, unresolved), quoted)
                elif op in ("-", "="):
                    chosen = value if is_set else word
                    add_expansion(_expand_plain(chosen or "", variables, unresolved), quoted)
                elif op in (":+", "+"):
                    if (not empty) if op == ":+" else is_set:
                        add_expansion(_expand_plain(word, variables, unresolved), quoted)
                elif var in ("@", "*"):
                    unresolved.append("$" + var)
                elif is_set:
                    add_expansion(value or "", quoted)
                    unresolved.extend((tainted or {}).get(var, []))
                else:
                    add_literal(rest[:end + 1])
                    unresolved.append(rest[:end + 1])
                return pos + end + 1
            m = re.match(r"^\$([A-Za-z_][A-Za-z0-9_]*|\d|[@*#?$!])", rest)
            if not m:
                add_literal("$")
                return pos + 1
            var = m.group(1)
            if var in ("@", "*"):
                unresolved.append("$" + var)
            elif var in variables:
                add_expansion(variables[var], quoted)
                unresolved.extend((tainted or {}).get(var, []))
            else:
                add_literal(m.group(0))
                unresolved.append(m.group(0))
            return pos + m.end()

        while i < n and statement[i] not in " \t\n":
            c = statement[i]
            if c == "'":
                end = statement.find("'", i + 1)
                end = n if end < 0 else end
                add_literal(statement[i + 1:end])
                i = end + 1
            elif c == '"':
                i += 1
                if cur is None:
                    cur = ""
                while i < n and statement[i] != '"':
                    ch = statement[i]
                    if ch == "\\" and i + 1 < n and statement[i + 1] in '$`"\\':
                        add_literal(statement[i + 1])
                        i += 2
                    elif ch == "$":
                        i = expand(i, True)
                    elif ch == "`":
                        i = backtick(i)
                    else:
                        add_literal(ch)
                        i += 1
                i += 1
            elif c == "\\":
                if i + 1 < n:
                    add_literal(statement[i + 1])
                i += 2
            elif c == "$":
                i = expand(i, False)
            elif c == "`":
                i = backtick(i)
            else:
                add_literal(c)
                i += 1
        if cur is not None:
            fields.append(cur)
        if assign is not None:
            words.append(_Lexed("".join(fields), (assign[0], "".join(fields)), unresolved))
        else:
            for index, field in enumerate(fields):
                words.append(_Lexed(field, None, unresolved if index == 0 else []))
            if not fields and unresolved:
                words.append(_Lexed("", None, unresolved))
    return [w for w in words if w.text != "" or w.assign is not None or w.unresolved]


def _opaque(construct: str) -> str:
    """A command substitution we cannot run, kept as one word (its blanks squeezed out) so a
    variable holding it does not split into stray arguments when expanded."""
    return re.sub(r"\s+", "", construct)


def _closing_paren(text: str, start: int) -> int:
    """Index of the parenthesis that closes the one at ``text[start]``, or -1."""
    level = 0
    for offset in range(start, len(text)):
        if text[offset] == "(":
            level += 1
        elif text[offset] == ")":
            level -= 1
            if level == 0:
                return offset
    return -1


def _expand_plain(text: str, variables: Mapping[str, str], unresolved: List[str]) -> str:
    """Expand $VAR / ${VAR} inside a ${VAR:-default} word."""
    def sub(match: "re.Match[str]") -> str:
        var = match.group(1) or match.group(2)
        if var in variables:
            return variables[var]
        unresolved.append(match.group(0))
        return match.group(0)

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, text)


def _is_shell_syntax(word: str) -> bool:
    """Redirections and separators that eval must see unquoted."""
    return re.match(r"^(\d*|&)(>>|>&|<&|>|<)(&?\d+|-)?$|^(\||;|&&|\|\||&)$", word) is not None


def _basename(word: str) -> str:
    return word.rstrip("/").rsplit("/", 1)[-1]


def _is_python(word: str) -> bool:
    return re.match(r"^python(\d+(\.\d+)?)?$", _basename(word)) is not None


def _finding(check: str, status: str, component: str, found: Any, expected: Any, fix: str = "") -> Dict[str, str]:
    return {
        "check": check,
        "status": status,
        "component": component,
        "found": _text(found),
        "expected": _text(expected),
        "fix": fix,
    }


def _text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


def script_defaults(era: str = HEAD) -> Dict[str, Any]:
    """A spec with the values Megatron-DeepSpeed uses when train.sh passes no flag: argparse
    defaults (and pretrain_gpt.py's tokenizer default), not this collection's defaults.
    Keys train.sh cannot express (paths of the venv, the checkout ...) are None."""
    table = args_for(era)
    spec: Dict[str, Any] = {key: None for key in DEFAULTS}
    for key, flag, kind in SPEC_ARGS:
        if flag not in table:
            # The era has no such switch: the feature is off (flags) or unset (values).
            spec[key] = None if kind == "value" else False
            continue
        default = table[flag].default
        if kind == "true":
            spec[key] = False
        elif kind == "false":
            spec[key] = True
        else:
            spec[key] = default
    if era == BEFORE_REBASE:
        # No such fusion (and no apex requirement for it) before the rebase.
        spec["gradient_accumulation_fusion"] = False
    spec["zero_stage"] = int(spec["zero_stage"] or 0)  # argparse default is the float 1.0
    spec["tokenizer_type"] = spec["tokenizer_type"] or "GPT2BPETokenizer"  # pretrain_gpt.py args_defaults
    spec["precision"] = "fp32"
    spec["load"] = False
    spec["checkpoint_dir"] = None
    spec["gpus_per_node"] = None
    spec["launcher"] = "pdsh"
    spec["master_port"] = 29500
    spec["env"] = {}
    spec["nccl_env"] = {}
    spec["extra_args"] = []
    return spec


def parse_train_script(text: str, env: Optional[Mapping[str, str]] = None, era: str = HEAD) -> Dict[str, Any]:
    """Read an existing train.sh (like the guide's) into a spec comparable to normalize()'s.

    Understands VAR=value / export VAR=value, $VAR ${VAR} ${VAR:-default} $((arithmetic)),
    quotes, line continuations, comments, redirections, and the training command in the forms
    ``deepspeed [launcher options] pretrain_gpt.py [args]``, ``python -m
    deepspeed.launcher.runner ...``, ``torchrun ...`` and ``python -m
    torch.distributed.run|launch ...`` (wrappers such as nohup or nsys in front are skipped).

    Returns a dict with:
      spec           every DEFAULTS key; flags absent from the script get Megatron-DeepSpeed's
                     own defaults (script_defaults), not this collection's;
      explicit       spec keys the script set;
      launcher       {command, num_nodes, num_gpus, hostfile, include, exclude, master_port,
                      master_addr, launcher, options}; None values where not given;
      script         the training script path; args: the Megatron arguments as a list;
      deepspeed      --deepspeed given; deepspeed_config: its path (None when absent);
      load_dir       --load's directory (None when absent);
      variables      the shell variables at the command; exported: names exported;
      unknown_flags / obsolete_flags / misspelt_flags / era_missing_flags / deprecated_flags:
                     [{flag, message, replacement}] from the _mds_args table;
      findings       parse problems (no training command, unresolved variables, bad values,
                     repeated flags) as validate() findings.
    Every flag that maps to no spec key (unknown, obsolete, --recompute-*, --cpu-optimizer ...)
    lands in spec['extra_args'] with its values, so validate() judges it like a spec's
    extra_args.
    """
    variables: Dict[str, str] = dict(env or {})
    # Variables whose value holds something not evaluated here ($(command), unknown $VAR):
    # their uses are reported too.
    tainted: Dict[str, List[str]] = {}
    exported: List[str] = []
    findings: List[Dict[str, str]] = []
    command: Optional[List[_Lexed]] = None
    command_env: Dict[str, str] = {}
    script_index = -1
    pending = _split_statements(text)
    while pending:
        statement = pending.pop(0)
        words = _lex_words(statement, variables, tainted)
        if not words:
            continue
        if words[0].text == "eval" and words[0].assign is None:
            # eval re-reads its expanded arguments as shell text (run_cmd="deepspeed ... &> log").
            pending[:0] = _split_statements(" ".join(shlex.quote(w.text) if not _is_shell_syntax(w.text) else w.text
                                                     for w in words[1:]))
            continue
        head_index = 0
        prefix_env: Dict[str, str] = {}
        prefix_taint: Dict[str, List[str]] = {}
        while head_index < len(words) and words[head_index].assign is not None:
            name, value = words[head_index].assign  # type: ignore[misc]
            prefix_env[name] = value
            prefix_taint[name] = list(words[head_index].unresolved)
            head_index += 1
        if head_index == len(words):
            variables.update(prefix_env)
            for name, constructs in prefix_taint.items():
                if constructs:
                    tainted[name] = constructs
                else:
                    tainted.pop(name, None)
            continue
        first = words[head_index].text
        if first in _DECLARATION:
            for word in words[head_index + 1:]:
                if word.assign is not None:
                    name = word.assign[0]
                    variables[name] = word.assign[1]
                    if word.unresolved:
                        tainted[name] = list(word.unresolved)
                    else:
                        tainted.pop(name, None)
                elif _NAME_RE.fullmatch(word.text):
                    name = word.text
                else:
                    continue
                if first == "export" or first == "declare" and "-x" in [w.text for w in words]:
                    if name not in exported:
                        exported.append(name)
            continue
        index = _find_training_script(words, head_index)
        if index is None:
            continue
        if command is not None:
            findings.append(_finding(
                "train.sh: one training command", "warn", "train.sh",
                "another training command: %s" % " ".join(w.text for w in words[:index + 1]),
                "one launch of pretrain_gpt.py", "only the first one is validated",
            ))
            continue
        command, script_index, command_env = words, index, prefix_env

    result: Dict[str, Any] = {
        "spec": script_defaults(era),
        "explicit": [],
        "launcher": {
            "command": None, "num_nodes": None, "num_gpus": None, "hostfile": None,
            "include": None, "exclude": None, "master_port": None, "master_addr": None,
            "launcher": None, "options": [],
        },
        "script": None,
        "args": [],
        "deepspeed": False,
        "deepspeed_config": None,
        "load_dir": None,
        "variables": variables,
        "exported": exported,
        "unknown_flags": [],
        "obsolete_flags": [],
        "misspelt_flags": [],
        "era_missing_flags": [],
        "deprecated_flags": [],
        "findings": findings,
        "era": era,
    }
    if command is None:
        findings.append(_finding(
            "train.sh: training command", "fail", "train.sh", "no pretrain_*.py launch found",
            "deepspeed [launcher options] pretrain_gpt.py [arguments]",
            "point megatron_job_script at the script that launches pretrain_gpt.py",
        ))
        return result

    spec = result["spec"]
    spec["env"] = {name: variables.get(name, "") for name in exported}
    spec["env"].update(command_env)
    unresolved = sorted({u for w in command for u in w.unresolved})
    if unresolved:
        positional = [u for u in unresolved if u in ("$@", "$*")]
        others = [u for u in unresolved if u not in positional]
        if others:
            findings.append(_finding(
                "train.sh: variables resolved", "warn", "train.sh", ", ".join(others),
                "every variable set in the script",
                "these come from the caller's environment and are not checked; set them in the "
                "script or pass env to the parser",
            ))
        if positional:
            findings.append(_finding(
                "train.sh: arguments passed through", "warn", "train.sh", ", ".join(positional),
                "no pass-through arguments",
                "arguments given to train.sh at run time are not validated",
            ))
    launcher_words = [w.text for w in command[:script_index]]
    result["script"] = command[script_index].text
    _parse_launcher(launcher_words, result["launcher"], findings)
    launcher = result["launcher"]
    if launcher["num_gpus"] is not None:
        spec["gpus_per_node"] = launcher["num_gpus"]
    if launcher["launcher"]:
        spec["launcher"] = launcher["launcher"].lower()
    if launcher["master_port"] is not None:
        spec["master_port"] = launcher["master_port"]

    args = [w.text for w in command[script_index + 1:] if w.text not in ("$@", "$*")]
    result["args"] = args
    _read_megatron_args(args, era, result)
    return result


def _is_launcher(word: str) -> bool:
    return _basename(word) in ("deepspeed", "torchrun") or _is_python(word)


def _find_training_script(words: Sequence[_Lexed], start: int = 0) -> Optional[int]:
    """Index of the training script word (pretrain_*.py preferred) when the command at
    ``words[start]`` is a launcher (deepspeed, torchrun, python), possibly behind wrappers
    such as nohup or nsys; None otherwise (echo "deepspeed ... pretrain_gpt.py" is not a launch)."""
    texts = [w.text for w in words]
    command = texts[start] if start < len(texts) else ""
    if not _is_launcher(command) and _basename(command) not in _WRAPPERS:
        return None
    candidates = [i for i, t in enumerate(texts) if i > start and re.search(r"(^|/)pretrain_\w+\.py$", t)]
    if not candidates:
        candidates = [
            i for i, t in enumerate(texts)
            if i > start and t.endswith(".py") and any(_is_launcher(x) for x in texts[start:i])
        ]
    if not candidates:
        return None
    index = candidates[0]
    return index if any(_is_launcher(t) for t in texts[start:index]) else None


def _parse_launcher(words: List[str], launcher: Dict[str, Any], findings: List[Dict[str, str]]) -> None:
    """Fill ``launcher`` from the words before the training script."""
    start = None
    kind = None
    for i, word in enumerate(words):
        base = _basename(word)
        if base == "deepspeed":
            kind, start = "deepspeed", i + 1
            break
        if base == "torchrun":
            kind, start = "torchrun", i + 1
            break
        if _is_python(word) and i + 2 <= len(words) and words[i + 1:i + 2] == ["-m"] and i + 2 < len(words):
            module = words[i + 2]
            if module in ("torch.distributed.run", "torch.distributed.launch"):
                kind, start = module, i + 3
                break
            if module in ("deepspeed.launcher.runner", "deepspeed"):
                kind, start = "deepspeed", i + 3
                break
        if _is_python(word):
            kind, start = "python", i + 1
    launcher["command"] = kind
    if start is None:
        return
    options = words[start:]
    launcher["options"] = options
    if kind == "deepspeed":
        table = {flag: (arg.dest or flag.lstrip("-").replace("-", "_"), arg) for flag, arg in LAUNCHER_ARGS.items()}
        i = 0
        while i < len(options):
            word = options[i]
            flag, eq, inline = word.partition("=")
            entry = table.get(flag)
            if entry is None:
                findings.append(_finding(
                    "launcher option %s" % word, "fail", "launcher", word,
                    "a deepspeed launcher option (%s ...)" % ", ".join(sorted(f for f in LAUNCHER_ARGS if f.startswith("--"))[:6]),
                    "remove it or move it after pretrain_gpt.py if it is a Megatron flag",
                ))
                i += 1
                continue
            dest, arg = entry
            if arg.action != "store":
                launcher[dest] = True
                i += 1
                continue
            if eq:
                value = inline
                i += 1
            elif i + 1 < len(options):
                value = options[i + 1]
                i += 2
            else:
                findings.append(_finding(
                    "launcher option %s" % flag, "fail", "launcher", flag, "%s VALUE" % flag,
                    "give %s a value" % flag,
                ))
                break
            if arg.type == "int":
                try:
                    launcher[dest] = int(value)
                except ValueError:
                    findings.append(_finding(
                        "launcher option %s" % flag, "fail", "launcher", "%s %s" % (flag, value),
                        "an integer", "set the variable it comes from in the script",
                    ))
            else:
                launcher[dest] = value
    elif kind in ("torchrun", "torch.distributed.run", "torch.distributed.launch"):
        i = 0
        while i < len(options):
            flag, eq, inline = options[i].partition("=")
            dest = TORCHRUN_ARGS.get(flag)
            if dest is None:
                i += 1
                continue
            if eq:
                value, i = inline, i + 1
            elif i + 1 < len(options) and not options[i + 1].startswith("-"):
                value, i = options[i + 1], i + 2
            else:
                i += 1
                continue
            if dest in ("num_nodes", "num_gpus", "master_port", "node_rank"):
                try:
                    launcher[dest] = int(value.split(":")[-1])
                except ValueError:
                    findings.append(_finding(
                        "launcher option %s" % flag, "fail", "launcher", "%s %s" % (flag, value),
                        "an integer", "set the variable it comes from in the script",
                    ))
            else:
                launcher[dest] = value


def _read_megatron_args(args: List[str], era: str, result: Dict[str, Any]) -> None:
    spec = result["spec"]
    findings = result["findings"]
    explicit: List[str] = result["explicit"]
    table = args_for(era)
    seen: Dict[str, int] = {}
    precision_flags: List[str] = []
    for parsed in split_args(args, era):
        flag, values = parsed.flag, list(parsed.values)
        if flag == "":
            findings.append(_finding(
                "train.sh: stray value %s" % values[0], "fail", "arguments", values[0],
                "every value after a flag that takes one",
                "argparse stops with 'unrecognized arguments: %s'; remove it or add its flag" % values[0],
            ))
            continue
        seen[flag] = seen.get(flag, 0) + 1
        if seen[flag] == 2:
            findings.append(_finding(
                "%s given once" % flag, "warn", "arguments", "%s repeated" % flag, "once",
                "argparse keeps the last value; remove the other occurrences",
            ))
        note = classify(flag, era)
        if note.status != "known":
            bucket = {
                "obsolete": "obsolete_flags", "misspelt": "misspelt_flags", "unknown": "unknown_flags",
                "era_missing": "era_missing_flags", "deprecated": "deprecated_flags",
            }[note.status]
            result[bucket].append({"flag": flag, "message": note.message, "replacement": note.replacement})
        if note.status not in ("known", "deprecated"):
            spec["extra_args"].extend([flag] + values)
            continue
        key = SPEC_FLAG_KEYS.get(flag)
        try:
            value = coerce(flag, values, era)
        except ArgValueError as exc:
            findings.append(_finding(
                "%s value" % flag, "fail", "arguments", " ".join([flag] + values),
                "%s %s" % (flag, _expected_value(table[flag])),
                "argparse stops with: %s; fix the value (or the variable it comes from)" % exc,
            ))
            continue
        if flag in PRECISION_FLAGS:
            precision_flags.append(flag)
            if len(precision_flags) == 1:
                spec["precision"] = PRECISION_FLAGS[flag]
                explicit.append("precision")
            else:
                spec["extra_args"].append(flag)
            continue
        if flag == "--deepspeed":
            result["deepspeed"] = True
            continue
        if flag == "--deepspeed_config":
            result["deepspeed_config"] = value
            continue
        if flag == "--save":
            spec["checkpoint_dir"] = value
            explicit.append("checkpoint_dir")
            continue
        if flag == "--load":
            result["load_dir"] = value
            spec["load"] = True
            explicit.append("load")
            continue
        if key is None:
            spec["extra_args"].extend([flag] + values)
            continue
        if key == "data_path":
            value = " ".join(value)
        elif key == "zero_stage":
            value = int(value)
        spec[key] = value
        if key not in explicit:
            explicit.append(key)
    if spec.get("ffn_hidden_size") is None and isinstance(spec.get("hidden_size"), int):
        spec["ffn_hidden_size"] = 4 * spec["hidden_size"]


def _expected_value(arg: Any) -> str:
    if arg.choices:
        return "{%s}" % ",".join(str(c) for c in arg.choices)
    if arg.nargs in ("*", "+"):
        return "VALUE [VALUE ...]"
    return {"int": "INT", "float": "FLOAT"}.get(arg.type or "", "VALUE")


# --------------------------------------------------------------------------------------------
# Memory estimate
# --------------------------------------------------------------------------------------------


def _version_lt(version: Optional[str], bound: str) -> bool:
    if not version:
        return False
    from ._versions import compare  # local: keeps the import graph of the data modules flat

    try:
        return compare(version, bound) < 0
    except ValueError:
        return False


def estimate_memory(
    spec: Mapping[str, Any],
    derived: Mapping[str, Any],
    zero: Mapping[str, Any],
    deepspeed_version: Optional[str] = None,
    checkpointing: Optional[str] = None,
) -> Dict[str, Any]:
    """A per-GPU memory estimate in bytes, for the busiest pipeline stage.

    ``zero``: {stage, offload_optimizer (bool), offload_param (bool), reduce_bucket_size,
    allgather_bucket_size}. ``checkpointing``: None, 'full' or 'selective'.

    Model states follow DeepSpeed's estimators (FACTS.md D6) applied to the parameters one GPU
    holds after tensor and pipeline sharding (P_gpu: the first stage's layers / TP, plus the
    word embeddings / TP and the position embeddings), with ZeRO sharding over the data
    parallel group N = DP. Mixed precision:
      ZeRO-0  20 P_gpu (16-bit params and grads, fp32 grads, fp32 master, Adam m and v)
      ZeRO-1  4 P_gpu + 16 P_gpu / N            (offloaded optimizer: 4 P_gpu)
      ZeRO-2  2 P_gpu + 18 P_gpu / N            (DeepSpeed < 0.14.3 printed 4P + 16P/N;
                                                 offloaded optimizer: 2 P_gpu)
      ZeRO-3  4 L + 18 P_gpu / N, L = the largest layer / TP (offloaded optimizer:
              4 L + 2 P_gpu / N; offloaded parameters too: 4 L)
    fp32 training uses 4-byte params and grads and no master copy.
    Activations per layer and micro batch (Korthikanti et al. 2022, "Reducing Activation
    Recomputation in Large Transformer Models", 16-bit): s b h (10 + 24/t + 5 a s / (h t)),
    with sequence parallelism s b h (34 + 5 a s / h) / t; flash attention or selective
    recomputation drop the 5 a s / h term (no s x s scores kept); full recomputation keeps
    2 s b h per layer plus one layer's full activations. The first stage keeps
    min(PP, gradient accumulation) micro batches in flight (1F1B); the last stage adds the
    fp32 logits 4 s b V / t. Plus ZeRO-1/2 communication buckets (reduce + allgather bucket
    elements x 2 bytes) and RESERVED_BYTES for the CUDA context, NCCL and fragmentation.
    Rough by design (+-20%): it catches a plan that cannot fit, not a 5% margin.
    """
    tp = derived["tensor_parallel"]
    pp = derived["pipeline_parallel"]
    dp = derived["data_parallel_size"] or 1
    hidden = int(spec["hidden_size"])
    heads = int(spec["num_attention_heads"])
    layers = int(spec["num_layers"])
    seq = int(spec["seq_length"])
    positions = int(spec["max_position_embeddings"])
    ffn = int(derived["ffn_hidden_size"] or 4 * hidden)
    vocab = derived["padded_vocab_size"] or KNOWN_VOCAB_SIZES["GPT2BPETokenizer"]
    micro = int(derived["micro_batch_size"] or 1)
    grad_acc = derived["gradient_accumulation_steps"] or 1
    mixed = spec.get("precision") in ("bf16", "fp16")
    stage = int(zero.get("stage") or 0)
    offload_opt = bool(zero.get("offload_optimizer"))
    offload_param = bool(zero.get("offload_param"))

    per_layer = layer_parameters(hidden, ffn)
    layers_per_stage = int(math.ceil(layers / float(pp)))
    embed = vocab * hidden / tp
    if pp == 1:
        params_gpu = layers * per_layer / tp + embed + positions * hidden + 2 * hidden
    else:
        # First stage: word + position embeddings; last stage: the tied output embedding copy.
        params_gpu = layers_per_stage * per_layer / tp + embed + max(positions * hidden, 2 * hidden)
    largest_layer = max(per_layer / tp, embed)

    work = 2 if mixed else 4
    if stage == 3:
        factor = 18 if mixed else 16
        if offload_opt and offload_param:
            model_states = 4 * largest_layer
        elif offload_opt:
            model_states = 4 * largest_layer + 2 * params_gpu / dp
        elif offload_param:
            model_states = 4 * largest_layer + (factor - 2) * params_gpu / dp
        else:
            model_states = 4 * largest_layer + factor * params_gpu / dp
        formula = "ZeRO-3: 4 x largest layer + %s" % (
            "0" if offload_opt and offload_param else "2 P/N" if offload_opt else "%d P/N" % factor
        )
    elif stage == 2:
        if offload_opt:
            model_states, formula = work * params_gpu, "ZeRO-2 offload: %d P" % work
        elif mixed and _version_lt(deepspeed_version, ZERO2_ESTIMATOR_CHANGED):
            model_states, formula = 4 * params_gpu + 16 * params_gpu / dp, "ZeRO-2 (DeepSpeed < 0.14.3): 4P + 16P/N"
        elif mixed:
            model_states, formula = 2 * params_gpu + 18 * params_gpu / dp, "ZeRO-2: 2P + 18P/N"
        else:
            model_states, formula = 4 * params_gpu + 12 * params_gpu / dp, "ZeRO-2 fp32: 4P + 12P/N"
    elif stage == 1:
        if offload_opt:
            model_states, formula = 2 * work * params_gpu, "ZeRO-1 offload: %d P" % (2 * work)
        elif mixed:
            model_states, formula = 4 * params_gpu + 16 * params_gpu / dp, "ZeRO-1: 4P + 16P/N"
        else:
            model_states, formula = 8 * params_gpu + 8 * params_gpu / dp, "ZeRO-1 fp32: 8P + 8P/N"
    else:
        model_states = (20 if mixed else 16) * params_gpu
        formula = "no ZeRO: %dP" % (20 if mixed else 16)

    sequence_parallel = bool(spec.get("sequence_parallel")) and tp > 1
    drop_scores = bool(spec.get("use_flash_attn")) or checkpointing == "selective"
    attention = 0.0 if drop_scores else 5.0 * heads * seq / hidden
    sbh = float(seq) * micro * hidden
    if sequence_parallel:
        full_layer = sbh * (34 + attention) / tp
    else:
        full_layer = sbh * (10 + 24.0 / tp + attention / tp)
    act_bytes = 1 if mixed else 2  # the paper counts 16-bit activations
    full_layer *= act_bytes
    if checkpointing == "full":
        kept_layer = 2 * sbh * act_bytes / (tp if sequence_parallel else 1)
        stage_layers = kept_layer * layers_per_stage
        recompute_peak = full_layer
    else:
        stage_layers = full_layer * layers_per_stage
        recompute_peak = 0.0
    in_flight = min(pp, grad_acc) if pp > 1 else 1
    logits = 4.0 * seq * micro * vocab / tp
    first_activations = stage_layers * in_flight + recompute_peak + (logits if pp == 1 else 0)
    last_activations = stage_layers + recompute_peak + logits
    activations = max(first_activations, last_activations)

    if stage in (1, 2):
        buffers = 2.0 * (int(zero.get("reduce_bucket_size") or 5e8) + int(zero.get("allgather_bucket_size") or 5e8))
    elif stage == 3:
        buffers = 2.0 * int(zero.get("reduce_bucket_size") or 5e8)
    else:
        buffers = 0.0
    total = model_states + activations + buffers + RESERVED_BYTES
    return {
        "params_total": gpt_parameters(spec),
        "params_per_gpu": int(params_gpu),
        "model_states": int(model_states),
        "activations": int(activations),
        "buffers": int(buffers),
        "reserved": RESERVED_BYTES,
        "total": int(total),
        "formula": formula,
        "in_flight_micro_batches": in_flight,
    }


# --------------------------------------------------------------------------------------------
# validate
# --------------------------------------------------------------------------------------------


def _flag_values(args: Sequence[str], era: str) -> Dict[str, List[Tuple[str, ...]]]:
    out: Dict[str, List[Tuple[str, ...]]] = {}
    for parsed in split_args(args, era):
        out.setdefault(parsed.flag, []).append(parsed.values)
    return out


def _ds_get(config: Mapping[str, Any], *path: str) -> Any:
    node: Any = config
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def _ds_int(config: Mapping[str, Any], key: str, findings: List[Dict[str, str]]) -> Optional[int]:
    value = config.get(key)
    if value is None:
        return None
    number = _int_or_none(value)
    if number is None or isinstance(value, float) and not value.is_integer():
        findings.append(_finding(
            "ds_config %s is an integer" % key, "fail", "ds_config", "%s: %r" % (key, value),
            "an integer", "write a number (Megatron-DeepSpeed does not resolve 'auto')",
        ))
        return None
    return number


def _offload_device(value: Any) -> str:
    if isinstance(value, Mapping):
        return str(value.get("device") or "none").lower()
    if value in (None, False):
        return "none"
    return "cpu" if value is True else str(value).lower()


def _enabled(section: Any) -> Optional[bool]:
    if isinstance(section, Mapping):
        value = section.get("enabled", False)
        if isinstance(value, str):
            return value.lower() == "true"
        return bool(value)
    return None


def validate(
    spec: Mapping[str, Any],
    ds_config: Optional[Mapping[str, Any]] = None,
    cluster: Optional[Mapping[str, Any]] = None,
    resume_checkpoint: Optional[Mapping[str, Any]] = None,
    deepspeed_version: Optional[str] = None,
    script: Optional[Mapping[str, Any]] = None,
) -> List[Dict[str, str]]:
    """Every check of a job against Megatron-DeepSpeed's and DeepSpeed's own rules.

    ``spec``: normalize()'s output, or parse_train_script()['spec'].
    ``ds_config``: the ds_config.json dict; None when the templates will write it from the
    spec (then the JSON-vs-arguments checks hold by construction and are not run).
    ``cluster``: {nodes, gpus_per_node, gpu_memory_mib (optional), hosts (optional
    {host: slots} from parse_hostfile)}; gpus_per_node defaults to the spec's.
    ``resume_checkpoint``: {tp, pp, no_pipeline_parallel (optional)} of the checkpoint to load.
    ``deepspeed_version``: picks the Megatron-DeepSpeed era of the flag table (before_rebase
    below 0.16.1), the universal-checkpoint advice and the ZeRO-2 estimator.
    ``script``: parse_train_script()'s result, for the launcher and --deepspeed checks and its
    parse findings.

    Returns findings {check, status: pass|fail|warn, component, found, expected, fix}.
    """
    findings: List[Dict[str, str]] = []
    add = findings.append
    cluster = dict(cluster or {})
    era = script.get("era", era_for_deepspeed(deepspeed_version)) if script else era_for_deepspeed(deepspeed_version)
    from_script = script is not None
    explicit = set(script.get("explicit", [])) if script else set(DEFAULTS)
    if script:
        findings.extend(script.get("findings", []))

    # The arguments the job passes: the spec's own flags plus its extra_args.
    if from_script:
        job_args = list(script.get("args", []))  # type: ignore[union-attr]
        dropped: List[Tuple[str, str]] = []
    else:
        job_args, dropped = spec_to_args(spec, era)
    flags = _flag_values(job_args, era)
    extra = list(spec.get("extra_args") or [])

    # ---------------------------------------------------------------- cluster
    nodes = _int_or_none(cluster.get("nodes"))
    hosts = cluster.get("hosts")
    if nodes is None and hosts:
        nodes = len(hosts)
    job_gpus = _int_or_none(spec.get("gpus_per_node"))
    node_gpus = _int_or_none(cluster.get("gpus_per_node"))
    if node_gpus is None and hosts:
        node_gpus = min(hosts.values())
    if node_gpus is None:
        node_gpus = job_gpus
    if job_gpus is None:
        job_gpus = node_gpus
    if not nodes or not job_gpus:
        add(_finding(
            "cluster shape known", "fail", "cluster", "nodes=%s gpus_per_node=%s" % (nodes, job_gpus),
            "nodes >= 1 and gpus_per_node >= 1",
            "put the nodes in the inventory group megatron_nodes, or pass nodes= and gpus_per_node=",
        ))
        return findings
    if node_gpus is not None and job_gpus > node_gpus:
        add(_finding(
            "ranks per node <= GPUs per node", "fail", "cluster",
            "%d ranks per node, %d GPUs per node" % (job_gpus, node_gpus), "<= %d" % node_gpus,
            "set megatron_job_gpus_per_node (deepspeed --num_gpus) to %d" % node_gpus,
        ))
    elif node_gpus is not None and job_gpus < node_gpus:
        add(_finding(
            "ranks per node == GPUs per node", "warn", "cluster",
            "%d ranks per node, %d GPUs per node" % (job_gpus, node_gpus), str(node_gpus),
            "%d GPUs per node stay idle; set megatron_job_gpus_per_node: %d if that is not meant"
            % (node_gpus - job_gpus, node_gpus),
        ))
    world = nodes * job_gpus
    add(_finding("world size", "pass", "cluster", "%d nodes x %d GPUs = %d" % (nodes, job_gpus, world),
                 "nodes x GPUs per node"))
    if hosts:
        _check_hosts(hosts, nodes, job_gpus, add)

    # ---------------------------------------------------------------- launcher (train.sh)
    if script:
        _check_launcher(script, nodes, job_gpus, hosts, add)

    # ---------------------------------------------------------------- arguments
    _check_arguments(spec, script, era, extra, dropped, add)

    tp = _int_or_none(spec.get("tensor_parallel")) or 1
    pp = _int_or_none(spec.get("pipeline_parallel")) or 1
    derived = derive(spec, nodes, job_gpus)
    dp = derived["data_parallel_size"]

    # ---------------------------------------------------------------- parallelism
    _check_parallelism(spec, derived, nodes, job_gpus, add)

    # ---------------------------------------------------------------- model shape
    _check_model(spec, tp, pp, era, add)

    # ---------------------------------------------------------------- batch
    ds = dict(ds_config) if ds_config is not None else None
    micro, micro_note = _effective_micro(spec, extra, ds, dp, findings)
    global_batch = _int_or_none(spec.get("global_batch_size"))
    global_note = ""
    if global_batch is None and micro and dp:
        global_batch = micro * dp
        global_note = " (--global-batch-size not given: Megatron uses micro x DP)"
    _check_batch(spec, ds, micro, micro_note, global_batch, global_note, dp, from_script, add, findings)

    # ---------------------------------------------------------------- ZeRO
    zero = _check_zero(spec, ds, flags, explicit, from_script, pp, deepspeed_version, era, add, findings)

    # ---------------------------------------------------------------- precision
    _check_precision(spec, ds, extra, from_script, add)

    # ---------------------------------------------------------------- checkpoints and resume
    _check_checkpoints(spec, flags, resume_checkpoint, tp, pp, deepspeed_version, era, add)

    # ---------------------------------------------------------------- activation checkpointing
    checkpointing = _check_activation_checkpointing(spec, ds, flags, derived, add)

    # ---------------------------------------------------------------- attention
    _check_flash_attn(spec, flags, from_script, add)
    _check_bias_gelu_fusion(spec, flags, from_script, add)

    # ---------------------------------------------------------------- memory
    if dp and all(_int_or_none(spec.get(k)) for k in ("num_layers", "hidden_size", "num_attention_heads", "seq_length", "max_position_embeddings")):
        mem_derived = dict(derived)
        mem_derived["micro_batch_size"] = micro or 1
        if micro and global_batch and dp and global_batch % (micro * dp) == 0:
            mem_derived["gradient_accumulation_steps"] = global_batch // (micro * dp)
        _check_memory(spec, mem_derived, zero, deepspeed_version, checkpointing,
                      _int_or_none(cluster.get("gpu_memory_mib")), add)
    return findings


def _check_hosts(hosts: Mapping[str, int], nodes: int, job_gpus: int, add: Callable[[Dict[str, str]], None]) -> None:
    if len(hosts) != nodes:
        add(_finding(
            "hostfile hosts == nodes", "fail", "hostfile", "%d hosts" % len(hosts), "%d nodes" % nodes,
            "list exactly the training nodes in the hostfile (DeepSpeed uses every host listed, "
            "or the first --num_nodes of them)",
        ))
    short = {host: slots for host, slots in hosts.items() if slots < job_gpus}
    if short:
        add(_finding(
            "hostfile slots >= GPUs per node", "fail", "hostfile",
            ", ".join("%s slots=%d" % item for item in short.items()), "slots=%d" % job_gpus,
            "set slots to the GPU count of each node; DeepSpeed starts one rank per slot",
        ))
    if len(set(hosts.values())) > 1:
        add(_finding(
            "hostfile slots identical", "warn", "hostfile",
            ", ".join("%s slots=%d" % item for item in hosts.items()), "the same slots on every host",
            "Megatron's parallel groups assume the same GPU count per node",
        ))


def _check_launcher(script: Mapping[str, Any], nodes: int, job_gpus: int, hosts: Any,
                    add: Callable[[Dict[str, str]], None]) -> None:
    launcher = script.get("launcher") or {}
    if launcher.get("command") not in (None, "deepspeed"):
        add(_finding(
            "launcher is deepspeed", "warn", "launcher", launcher.get("command"), "deepspeed",
            "this collection launches with the deepspeed runner (pdsh/openmpi/slurm); torchrun "
            "works per node but is not what train.yml starts",
        ))
    num_nodes = launcher.get("num_nodes")
    num_gpus = launcher.get("num_gpus")  # already the spec's gpus_per_node: judged with the cluster
    if num_nodes is not None and num_nodes > 0 and num_nodes != nodes:
        add(_finding(
            "launcher --num_nodes == nodes", "fail", "launcher", "--num_nodes=%d" % num_nodes,
            "--num_nodes=%d" % nodes,
            "the job would run on %d nodes, not %d: set --num_nodes to the node count (or drop it "
            "to use every hostfile host)" % (num_nodes, nodes),
        ))
    if (launcher.get("include") or launcher.get("exclude")) and (
        (num_nodes is not None and num_nodes >= 0) or (num_gpus is not None and num_gpus >= 0)
    ):
        add(_finding(
            "launcher include/exclude alone", "fail", "launcher",
            "--include/--exclude with --num_nodes/--num_gpus", "one or the other",
            "DeepSpeed raises 'Cannot specify num_nodes/gpus with include/exclude'",
        ))
    if launcher.get("launcher") and launcher["launcher"].lower() not in LAUNCHERS:
        add(_finding(
            "launcher backend", "fail", "launcher", launcher["launcher"], "|".join(LAUNCHERS),
            "DeepSpeed raises NotImplementedError('Unknown launcher ...')",
        ))
    if launcher.get("command") == "deepspeed" and nodes > 1 and not launcher.get("hostfile") and not hosts:
        add(_finding(
            "launcher hostfile", "warn", "launcher", "no --hostfile",
            "--hostfile listing the %d nodes" % nodes,
            "DeepSpeed then reads /job/hostfile; without it it runs on local GPUs only and raises "
            "'Num nodes is >1 but no extra nodes available via hostfile'. Pass --hostfile "
            "(train.yml renders one) or validate with hostfile=",
        ))
    if not script.get("deepspeed"):
        add(_finding(
            "--deepspeed given", "fail", "arguments", "no --deepspeed", "--deepspeed",
            "without --deepspeed Megatron trains without DeepSpeed and ignores ds_config.json; add --deepspeed",
        ))
    elif not script.get("deepspeed_config"):
        add(_finding(
            "--deepspeed_config given", "fail", "arguments", "no --deepspeed_config",
            "--deepspeed_config PATH",
            "Megatron-DeepSpeed opens args.deepspeed_config at start; pass --deepspeed_config "
            "ds_config.json (underscore spelling)",
        ))


def _check_arguments(spec: Mapping[str, Any], script: Optional[Mapping[str, Any]], era: str,
                     extra: List[str], dropped: List[Tuple[str, str]],
                     add: Callable[[Dict[str, str]], None]) -> None:
    where = "train.sh" if script else "megatron_job_extra_args"
    for parsed in split_args(extra, era):
        flag, values = parsed.flag, parsed.values
        if flag == "":
            continue
        if flag in PRECISION_FLAGS:
            continue  # judged by the precision checks
        note = classify(flag, era)
        shown = " ".join((flag,) + tuple(values))
        if note.status in ("obsolete", "misspelt", "unknown", "era_missing"):
            fix = note.message
            if note.replacement and note.status == "obsolete" and values:
                fix += " (%s %s)" % (note.replacement, values[0])
            add(_finding("%s accepted by pretrain_gpt.py" % flag, "fail", "arguments", shown,
                         note.replacement or "no such flag", fix))
            continue
        if note.status == "deprecated":
            add(_finding("%s (deprecated upstream)" % flag, "pass", "arguments", shown,
                         note.replacement or "-", note.message))
        if not script and flag in SPEC_FLAG_KEYS:
            key = SPEC_FLAG_KEYS[flag]
            add(_finding(
                "%s set by the spec, not extra_args" % flag, "fail", "arguments",
                "%s: %s" % (where, shown), "%s%s" % (PREFIX, key),
                "argparse keeps the last occurrence, so ds_config.json and train.sh would "
                "disagree; set %s%s instead" % (PREFIX, key),
            ))
            continue
        try:
            coerce(flag, list(values), era)
        except ArgValueError as exc:
            add(_finding("%s value" % flag, "fail", "arguments", shown, _expected_value(args_for(era)[flag]),
                         "argparse stops with: %s" % exc))
    for flag, reason in dropped:
        key = SPEC_FLAG_KEYS.get(flag, flag)
        if flag in DROPPED_IS_ERROR:
            add(_finding(
                "%s available" % flag, "fail", "arguments", "%s%s asks for %s" % (PREFIX, key, flag),
                "a Megatron-DeepSpeed that has %s" % flag,
                "%s; turn %s%s off or pick a stack profile with Megatron-DeepSpeed HEAD" % (reason, PREFIX, key),
            ))
        else:
            add(_finding(
                "%s available" % flag, "warn", "arguments", "%s%s asks for %s" % (PREFIX, key, flag), "left out",
                "%s, so train.sh leaves it out and the setting has no effect on this stack" % reason,
            ))
    # Required by validate_args / the tokenizer.
    required = (
        ("num_layers", "--num-layers"), ("hidden_size", "--hidden-size"),
        ("num_attention_heads", "--num-attention-heads"),
        ("max_position_embeddings", "--max-position-embeddings"), ("seq_length", "--seq-length"),
    )
    for key, flag in required:
        if spec.get(key) is None:
            add(_finding(
                "%s given" % flag, "fail", "arguments", "missing", flag,
                "Megatron-DeepSpeed asserts '%s argument is None'; add %s" % (key, flag),
            ))
    if spec.get("train_iters") is None and "--train-samples" not in extra:
        add(_finding(
            "--train-iters or --train-samples given", "fail", "arguments", "neither",
            "--train-iters N", "add --train-iters (or --train-samples)",
        ))
    lr, min_lr = spec.get("lr"), spec.get("min_lr")
    if isinstance(lr, (int, float)) and isinstance(min_lr, (int, float)) and min_lr > lr:
        add(_finding("--min-lr <= --lr", "fail", "arguments", "min_lr %r > lr %r" % (min_lr, lr),
                     "min_lr <= lr", "Megatron asserts args.min_lr <= args.lr; lower --min-lr"))
    tokenizer = spec.get("tokenizer_type") or "GPT2BPETokenizer"
    if tokenizer == "GPT2BPETokenizer" and (not spec.get("vocab_file") or not spec.get("merge_file")):
        add(_finding(
            "GPT2BPETokenizer files given", "fail", "data",
            "vocab_file=%s merge_file=%s" % (spec.get("vocab_file"), spec.get("merge_file")),
            "--vocab-file and --merge-file",
            "the GPT-2 BPE tokenizer asserts both; give the vocab.json and merges.txt paths",
        ))
    if tokenizer == "NullTokenizer" and spec.get("vocab_size") is None:
        add(_finding("NullTokenizer vocab size", "fail", "data", "no --vocab-size", "--vocab-size N",
                     "NullTokenizer asserts args.vocab_size is not None"))


def _check_parallelism(spec: Mapping[str, Any], derived: Mapping[str, Any], nodes: int, gpus: int,
                       add: Callable[[Dict[str, str]], None]) -> None:
    tp, pp, world = derived["tensor_parallel"], derived["pipeline_parallel"], derived["world_size"]
    if tp > world or pp > max(1, world // tp):
        add(_finding(
            "TP x PP <= world size", "fail", "parallelism", "TP %d x PP %d on %d GPUs" % (tp, pp, world),
            "TP <= %d, PP <= world / TP" % world,
            "Megatron silently clamps TP to min(TP, world) and PP to min(PP, world // TP), so the "
            "job would not run the plan you wrote; lower them",
        ))
    if derived["data_parallel_size"] is None:
        add(_finding(
            "TP x PP divides the world size", "fail", "parallelism",
            "world %d, TP %d x PP %d = %d" % (world, tp, pp, tp * pp), "a divisor of %d" % world,
            "Megatron asserts: " + MDS_WORLD_MSG.format(world, tp, pp, 1)
            + "; choose TP x PP among the divisors of %d" % world,
        ))
    else:
        add(_finding("data parallel size", "pass", "parallelism",
                     "DP = %d / (TP %d x PP %d) = %d" % (world, tp, pp, derived["data_parallel_size"]),
                     "world / (TP x PP)"))
    if tp > gpus:
        add(_finding(
            "TP <= GPUs per node", "fail", "parallelism", "TP %d, %d GPUs per node" % (tp, gpus),
            "TP <= %d" % gpus,
            "tensor parallelism all-reduces in every layer and belongs inside a node (the guide: "
            "tensor parallel inside a node, pipeline across nodes); set TP <= %d and raise PP" % gpus,
        ))
    elif gpus % tp:
        add(_finding(
            "TP divides GPUs per node", "warn", "parallelism", "TP %d, %d GPUs per node" % (tp, gpus),
            "a divisor of %d" % gpus, "some tensor-parallel groups straddle two nodes; pick a divisor of %d" % gpus,
        ))
    else:
        add(_finding("TP inside a node", "pass", "parallelism", "TP %d, %d GPUs per node" % (tp, gpus),
                     "TP <= GPUs per node"))
    if spec.get("no_pipeline_parallel") and pp > 1:
        add(_finding(
            "--no-pipeline-parallel needs PP 1", "fail", "parallelism",
            "--no-pipeline-parallel with PP %d" % pp, "PP 1",
            "Megatron-DeepSpeed asserts '%s': drop --no-pipeline-parallel (and use ZeRO-0/1) or set PP 1" % MDS_NO_PP_MSG,
        ))
    if spec.get("sequence_parallel") and tp == 1:
        add(_finding(
            "--sequence-parallel with TP > 1", "warn", "parallelism", "--sequence-parallel with TP 1",
            "TP > 1", "Megatron turns sequence parallelism off when TP is 1; drop the flag",
        ))


def _check_model(spec: Mapping[str, Any], tp: int, pp: int, era: str, add: Callable[[Dict[str, str]], None]) -> None:
    heads = _int_or_none(spec.get("num_attention_heads"))
    hidden = _int_or_none(spec.get("hidden_size"))
    layers = _int_or_none(spec.get("num_layers"))
    seq = _int_or_none(spec.get("seq_length"))
    positions = _int_or_none(spec.get("max_position_embeddings"))
    ffn = _int_or_none(spec.get("ffn_hidden_size")) or (4 * hidden if hidden else None)
    if heads:
        ok = heads % tp == 0
        add(_finding(
            "attention heads % TP == 0", "pass" if ok else "fail", "model", "%d heads, TP %d" % (heads, tp),
            "heads divisible by TP",
            "" if ok else "Megatron asserts '%d is not divisible by %d' (heads per TP rank); pick TP "
            "among the divisors of %d or change the head count" % (heads, tp, heads),
        ))
    if hidden and heads:
        ok = hidden % heads == 0
        add(_finding(
            "hidden % heads == 0", "pass" if ok else "fail", "model", "hidden %d, %d heads" % (hidden, heads),
            "hidden divisible by heads",
            "" if ok else "Megatron asserts hidden_size % num_attention_heads == 0 (without "
            "--kv-channels); change --hidden-size or --num-attention-heads",
        ))
    if ffn and ffn % tp:
        add(_finding(
            "ffn hidden % TP == 0", "fail", "model", "ffn %d, TP %d" % (ffn, tp), "ffn divisible by TP",
            "ColumnParallelLinear asserts '%d is not divisible by %d'; change --ffn-hidden-size" % (ffn, tp),
        ))
    if layers:
        ok = layers % pp == 0
        add(_finding(
            "layers % PP == 0", "pass" if ok else "warn", "model", "%d layers, PP %d" % (layers, pp),
            "layers divisible by PP",
            "" if ok else "DeepSpeed's pipeline partitions the layers unevenly (partition_method "
            "type:transformer); the largest stage sets memory and step time. Pick PP among the "
            "divisors of %d" % layers,
        ))
    if seq and positions:
        ok = positions >= seq
        add(_finding(
            "max-position-embeddings >= seq-length", "pass" if ok else "fail", "model",
            "max_position_embeddings %d, seq_length %d" % (positions, seq), ">= seq_length",
            "" if ok else "Megatron asserts args.max_position_embeddings >= args.seq_length; raise "
            "--max-position-embeddings to %d" % seq,
        ))


def _effective_micro(spec: Mapping[str, Any], extra: List[str], ds: Optional[Dict[str, Any]],
                     dp: Optional[int], findings: List[Dict[str, str]]) -> Tuple[Optional[int], str]:
    micro = _int_or_none(spec.get("micro_batch_size"))
    if micro is not None:
        return micro, ""
    obsolete = [p for p in split_args(extra) if p.flag == "--batch-size" and p.values]
    note = "--micro-batch-size missing"
    intended = None
    if obsolete and _int_or_none(obsolete[-1].values[0]):
        intended = int(obsolete[-1].values[0])
        note += "; the obsolete --batch-size %d taken as the intended micro batch below" % intended
    findings.append(_finding(
        "--micro-batch-size given", "fail", "batch", "missing" if intended is None else
        "missing (only the obsolete --batch-size %d)" % intended, "--micro-batch-size N (> 0)",
        "Megatron-DeepSpeed asserts args.micro_batch_size is not None; add --micro-batch-size%s"
        % (" %d" % intended if intended else ""),
    ))
    return intended, note


def _ds_batch(ds: Dict[str, Any], dp: int, findings: List[Dict[str, str]]) -> Tuple[Optional[int], Optional[int], Optional[int], str]:
    """DeepSpeed's _set_batch_related_parameters: fill the missing one of train_batch_size,
    train_micro_batch_size_per_gpu, gradient_accumulation_steps from the other two (world_size
    there is the data-parallel size)."""
    train = _ds_int(ds, "train_batch_size", findings)
    micro = _ds_int(ds, "train_micro_batch_size_per_gpu", findings)
    acc = _ds_int(ds, "gradient_accumulation_steps", findings)
    derived = ""
    if train is not None and micro is not None and acc is not None:
        pass
    elif train is not None and micro is not None:
        acc = train // micro // dp
        derived = "gradient_accumulation_steps = %d // %d // %d = %d" % (train, micro, dp, acc)
    elif train is not None and acc is not None:
        micro = train // dp // acc
        derived = "train_micro_batch_size_per_gpu = %d // %d // %d = %d" % (train, dp, acc, micro)
    elif micro is not None and acc is not None:
        train = micro * acc * dp
        derived = "train_batch_size = %d * %d * %d = %d" % (micro, acc, dp, train)
    elif train is not None:
        acc, micro = 1, train // dp
        derived = "gradient_accumulation_steps = 1, train_micro_batch_size_per_gpu = %d // %d = %d" % (train, dp, micro)
    elif micro is not None:
        train, acc = micro * dp, 1
        derived = "gradient_accumulation_steps = 1, train_batch_size = %d * %d = %d" % (micro, dp, train)
    return train, micro, acc, derived


def _check_batch(spec: Mapping[str, Any], ds: Optional[Dict[str, Any]], micro: Optional[int], micro_note: str,
                 global_batch: Optional[int], global_note: str, dp: Optional[int], from_script: bool,
                 add: Callable[[Dict[str, str]], None], findings: List[Dict[str, str]]) -> None:
    if dp is None:
        return
    if micro is not None and micro < 1:
        add(_finding("--micro-batch-size > 0", "fail", "batch", micro, "> 0", "Megatron asserts micro_batch_size > 0"))
        return
    if micro and global_batch:
        ok = global_batch % (micro * dp) == 0
        add(_finding(
            "global batch divisible by micro x DP", "pass" if ok else "fail", "batch",
            "global %d, micro %d, DP %d%s" % (global_batch, micro, dp, global_note),
            "a multiple of %d" % (micro * dp),
            "" if ok else "Megatron asserts: %s; set --global-batch-size to a multiple of %d (e.g. %d)"
            % (MDS_GLOBAL_BATCH_MSG.format(global_batch, micro, dp), micro * dp,
               max(1, global_batch // (micro * dp)) * micro * dp),
        ))
    if ds is None:
        if micro and global_batch:
            acc = global_batch // (micro * dp)
            ok = global_batch == micro * acc * dp
            add(_finding(
                "train_batch_size == micro x grad_acc x DP", "pass" if ok else "fail", "batch",
                "%d = %d x %d x %d" % (global_batch, micro, acc, dp) if ok else
                DS_BATCH_MSG.format(global_batch, micro, acc, dp),
                "equal (no ds_config.json given)" if from_script else "equal (ds_config.json is written from the spec)",
                "" if ok else "DeepSpeed asserts it; make megatron_job_global_batch_size a multiple of %d" % (micro * dp),
            ))
        return
    train, ds_micro, acc, how = _ds_batch(ds, dp, findings)
    if train is None and ds_micro is None:
        add(_finding("ds_config batch sizes", "fail", "ds_config", "neither given", "train_batch_size and "
                     "train_micro_batch_size_per_gpu", "DeepSpeed asserts: " + DS_BATCH_MISSING_MSG))
        return
    via = " (DeepSpeed derives %s)" % how if how else ""
    if train is not None and ds_micro is not None and acc is not None:
        ok = train == ds_micro * acc * dp
        add(_finding(
            "ds_config train_batch_size == micro x grad_acc x DP", "pass" if ok else "fail", "ds_config",
            ("%d == %d * %d * %d" % (train, ds_micro, acc, dp) if ok else DS_BATCH_MSG.format(train, ds_micro, acc, dp)) + via,
            "train_batch_size == train_micro_batch_size_per_gpu * gradient_accumulation_steps * DP",
            "" if ok else "DeepSpeed asserts this at deepspeed.initialize (world_size there is the "
            "data-parallel size %d); make the three agree, or give two and let DeepSpeed compute the third" % dp,
        ))
    if micro is not None and ds_micro is not None:
        ok = ds_micro == micro
        micro_via = " (DeepSpeed derives it: %s)" % how if "train_micro_batch_size_per_gpu =" in how else ""
        add(_finding(
            "ds_config micro batch == --micro-batch-size", "pass" if ok else "fail", "batch",
            "ds_config %d%s, --micro-batch-size %s" % (
                ds_micro, micro_via, micro if not micro_note else "%d (%s)" % (micro, micro_note)),
            "equal", "" if ok else "set train_micro_batch_size_per_gpu to %d (Megatron's data loader and "
            "DeepSpeed must agree on the micro batch)" % micro,
        ))
    if global_batch is not None and train is not None:
        ok = train == global_batch
        add(_finding(
            "ds_config train_batch_size == --global-batch-size", "pass" if ok else "fail", "batch",
            "ds_config %d, global batch %d%s" % (train, global_batch, global_note), "equal",
            "" if ok else "Megatron-DeepSpeed resets DeepSpeed's batch to its global batch every step "
            "(DeepSpeed then raises '%s' when it does not divide); set train_batch_size to %d or "
            "--global-batch-size to %d" % (DS_DIVISIBLE_MSG, global_batch, train),
        ))


def _check_zero(spec: Mapping[str, Any], ds: Optional[Dict[str, Any]], flags: Mapping[str, Any], explicit: Iterable[str],
                from_script: bool, pp: int, deepspeed_version: Optional[str], era: str,
                add: Callable[[Dict[str, str]], None], findings: List[Dict[str, str]]) -> Dict[str, Any]:
    arg_stage = _int_or_none(spec.get("zero_stage"))
    zero_section: Mapping[str, Any] = {}
    if ds is not None:
        raw = ds.get("zero_optimization")
        zero_section = raw if isinstance(raw, Mapping) else {}
        stage = _int_or_none(zero_section.get("stage", 0))
        if stage not in ZERO_STAGES:
            add(_finding("ds_config ZeRO stage", "fail", "zero", zero_section.get("stage"), "0, 1, 2 or 3",
                         "set zero_optimization.stage to 0-3"))
            stage = 0
        offload_opt = _offload_device(zero_section.get("offload_optimizer")) != "none" or bool(zero_section.get("cpu_offload"))
        offload_param = _offload_device(zero_section.get("offload_param")) != "none" or bool(zero_section.get("cpu_offload_param"))
        known = ZERO_KEYS_092 if era == BEFORE_REBASE else ZERO_KEYS_HEAD
        unknown = sorted(k for k in zero_section if k not in known)
        if unknown:
            add(_finding(
                "ds_config zero_optimization keys", "fail", "ds_config", ", ".join(unknown),
                "keys DeepSpeed's ZeRO config declares",
                "DeepSpeed's config model forbids unknown keys (pydantic extra=forbid) and stops at "
                "start; remove or correct them",
            ))
        stage_source = "ds_config zero_optimization.stage"
    else:
        stage = arg_stage if arg_stage is not None else 0
        offload_opt = spec.get("zero_offload_optimizer") == "cpu"
        offload_param = spec.get("zero_offload_param") == "cpu"
        stage_source = "megatron_job_zero_stage"
    ds_pipeline = not spec.get("no_pipeline_parallel")
    if stage >= 2 and ds_pipeline:
        if pp > 1:
            fix = ("use ZeRO-1 (zero_stage: 1) to keep PP %d, or set PP 1 with --no-pipeline-parallel "
                   "to keep ZeRO-%d" % (pp, stage))
        else:
            fix = ("add --no-pipeline-parallel (megatron_job_no_pipeline_parallel: true): without it "
                   "Megatron-DeepSpeed wraps the model in DeepSpeed's PipelineModule even with PP 1; or use ZeRO-1")
        add(_finding(
            "ZeRO stage vs pipeline engine", "fail", "zero",
            "ZeRO-%d (%s), DeepSpeed pipeline engine (PP %d%s)" % (
                stage, stage_source, pp, ", no --no-pipeline-parallel" if pp == 1 else ""),
            "ZeRO-0/1 with the pipeline engine", "DeepSpeed asserts '%s'; %s" % (DS_PIPE_ZERO_MSG, fix),
        ))
    else:
        add(_finding("ZeRO stage vs pipeline engine", "pass", "zero",
                     "ZeRO-%d, %s" % (stage, "pipeline engine" if ds_pipeline else "--no-pipeline-parallel"),
                     "ZeRO-2/3 only with --no-pipeline-parallel"))
    if ds is not None:
        if from_script and "zero_stage" not in explicit:
            found = "--zero-stage not given (Megatron default 1)"
        else:
            found = "--zero-stage %s" % arg_stage
        ok = arg_stage == stage
        add(_finding(
            "--zero-stage == ds_config stage", "pass" if ok else "fail", "zero",
            "%s, ds_config stage %d" % (found, stage), "equal",
            "" if ok else "DeepSpeed takes the stage from the JSON, Megatron-DeepSpeed uses "
            "--zero-stage for deepspeed.zero.Init (stage 3) and its statistics; pass --zero-stage %d" % stage,
        ))
    if offload_param and stage != 3:
        add(_finding(
            "offload_param only with ZeRO-3", "fail", "zero", "offload_param with ZeRO-%d" % stage, "ZeRO-3",
            "parameter offload is valid only with stage 3 (DeepSpeed ignores it otherwise); use ZeRO-3 "
            "(with --no-pipeline-parallel) or drop offload_param",
        ))
    if offload_opt:
        cpu_optimizer = "--cpu-optimizer" in flags and "--cpu_torch_adam" not in flags
        forced = ds is None or ds.get("zero_force_ds_cpu_optimizer", True) not in (False, "false")
        if not cpu_optimizer and forced:
            add(_finding(
                "ZeRO-Offload optimizer", "fail", "zero",
                "offload_optimizer cpu, Megatron's GPU optimizer (no --cpu-optimizer)",
                "--cpu-optimizer (DeepSpeedCPUAdam)",
                "DeepSpeed raises ZeRORuntimeException: '%s ...'; pass --cpu-optimizer (megatron_job_"
                "zero_offload_optimizer: cpu does it), or set \"zero_force_ds_cpu_optimizer\": false "
                "and accept a slow client optimizer" % DS_OFFLOAD_CLIENT_OPT_MSG,
            ))
    if ds is not None and isinstance(ds.get("optimizer"), Mapping):
        params = ds["optimizer"].get("params") or {}
        conflicts = []
        for key, spec_key in (("lr", "lr"), ("weight_decay", "weight_decay")):
            if key in params and spec.get(spec_key) is not None and float(params[key]) != float(spec[spec_key]):
                conflicts.append("%s %r vs --%s %r" % (key, params[key], key.replace("_", "-"), spec[spec_key]))
        add(_finding(
            "ds_config optimizer section", "warn", "ds_config",
            "optimizer %s%s" % (ds["optimizer"].get("type"), (" (" + "; ".join(conflicts) + ")") if conflicts else ""),
            "no optimizer section",
            "ignored: Megatron-DeepSpeed passes its own optimizer to deepspeed.initialize ('Using client "
            "Optimizer as basic optimizer'), so --lr, --weight-decay and --adam-* rule; remove the section",
        ))
    if ds is not None and isinstance(ds.get("scheduler"), Mapping):
        add(_finding(
            "ds_config scheduler section", "warn", "ds_config", "scheduler %s" % ds["scheduler"].get("type"),
            "no scheduler section", "ignored: Megatron-DeepSpeed passes its own LR scheduler; use --lr-* flags",
        ))
    return {
        "stage": stage,
        "offload_optimizer": offload_opt,
        "offload_param": offload_param,
        "reduce_bucket_size": _int_or_none(zero_section.get("reduce_bucket_size")) if ds is not None else spec.get("zero_reduce_bucket_size"),
        "allgather_bucket_size": _int_or_none(zero_section.get("allgather_bucket_size")) if ds is not None else spec.get("zero_allgather_bucket_size"),
    }


def _check_precision(spec: Mapping[str, Any], ds: Optional[Dict[str, Any]], extra: List[str], from_script: bool,
                     add: Callable[[Dict[str, str]], None]) -> None:
    precision = spec.get("precision") or "fp32"
    arg_flags = set()
    if precision in ("bf16", "fp16"):
        arg_flags.add(precision)
    arg_flags.update(PRECISION_FLAGS[f] for f in extra if f in PRECISION_FLAGS)
    if len(arg_flags) > 1:
        add(_finding(
            "--bf16 xor --fp16", "fail", "precision", "--bf16 and --fp16", "one of them",
            "Megatron asserts not (fp16 and bf16); keep --bf16 (A100/H100) or --fp16",
        ))
        return
    args_precision = arg_flags.pop() if arg_flags else "fp32"
    if ds is None:
        add(_finding("precision", "pass", "precision", args_precision, "bf16|fp16|fp32"))
        return
    bf16 = _enabled(ds.get("bf16"))
    if bf16 is None:
        bf16 = _enabled(ds.get("bfloat16"))
    fp16 = _enabled(ds.get("fp16"))
    if bf16 and fp16:
        add(_finding(
            "ds_config bf16 xor fp16", "fail", "ds_config", "bf16.enabled and fp16.enabled", "one of them",
            "DeepSpeed asserts '%s'; disable one" % DS_BF16_FP16_MSG,
        ))
        return
    json_precision = "bf16" if bf16 else "fp16" if fp16 else "fp32"
    ok = json_precision == args_precision
    add(_finding(
        "ds_config precision == arguments", "pass" if ok else "fail", "precision",
        "ds_config %s, arguments %s" % (json_precision, "--" + args_precision if args_precision != "fp32" else "fp32"),
        "the same precision",
        "" if ok else "Megatron builds %s parameters while DeepSpeed's optimizer is set up for %s; set "
        "%s.enabled in ds_config.json to match %s" % (
            args_precision, json_precision, args_precision if args_precision != "fp32" else "bf16/fp16",
            "--" + args_precision if args_precision != "fp32" else "no precision flag"),
    ))


def _check_checkpoints(spec: Mapping[str, Any], flags: Mapping[str, Any], resume: Optional[Mapping[str, Any]],
                       tp: int, pp: int, deepspeed_version: Optional[str], era: str,
                       add: Callable[[Dict[str, str]], None]) -> None:
    if spec.get("checkpoint_dir"):
        interval = _int_or_none(spec.get("save_interval"))
        ok = interval is not None and interval > 0
        add(_finding(
            "--save with --save-interval", "pass" if ok else "fail", "checkpoints",
            "--save %s, --save-interval %s" % (spec["checkpoint_dir"], interval), "--save-interval N",
            "" if ok else "Megatron asserts args.save_interval is not None when --save is set; add --save-interval",
        ))
    if not resume:
        return
    ck_tp = _int_or_none(resume.get("tp") or resume.get("tensor_parallel"))
    ck_pp = _int_or_none(resume.get("pp") or resume.get("pipeline_parallel"))
    ck_nopp = resume.get("no_pipeline_parallel")
    if ck_nopp is not None and bool(ck_nopp) != bool(spec.get("no_pipeline_parallel")):
        add(_finding(
            "checkpoint model form", "fail", "resume",
            "checkpoint %s --no-pipeline-parallel" % ("with" if ck_nopp else "without"),
            "job %s --no-pipeline-parallel" % ("with" if spec.get("no_pipeline_parallel") else "without"),
            "a model saved with --no-pipeline-parallel cannot be converted to or from the pipeline "
            "form (not even by the universal checkpoint); resume with the form it was saved in",
        ))
    if (ck_tp, ck_pp) == (tp, pp):
        add(_finding("checkpoint TP/PP == job TP/PP", "pass", "resume", "TP %s PP %s" % (ck_tp, ck_pp),
                     "TP %d PP %d" % (tp, pp)))
        return
    has_universal = deepspeed_version is not None and not _version_lt(deepspeed_version, UNIVERSAL_CHECKPOINT_MIN_DEEPSPEED)
    if has_universal and era == HEAD:
        fix = ("convert once with DeepSpeed's universal checkpoint: python -m deepspeed.checkpoint.ds_to_universal "
               "--input_folder <save>/global_stepN --output_folder <save>/global_stepN_universal "
               "(Megatron-DeepSpeed on PYTHONPATH), then resume with --universal-checkpoint "
               "(megatron_job_extra_args: ['--universal-checkpoint'])")
    elif has_universal:
        fix = ("refuse: DeepSpeed %s has ds_to_universal, but the before_rebase Megatron-DeepSpeed "
               "has no --universal-checkpoint; resume with TP %s PP %s, or move to the HEAD stack"
               % (deepspeed_version, ck_tp, ck_pp))
    else:
        fix = ("refuse: DeepSpeed <0.12 has no universal checkpoint (found %s); resume with TP %s PP %s, "
               "or upgrade DeepSpeed (>= %s) and convert with ds_to_universal"
               % (deepspeed_version or "unknown version", ck_tp, ck_pp, UNIVERSAL_CHECKPOINT_MIN_DEEPSPEED))
    add(_finding(
        "checkpoint TP/PP == job TP/PP", "fail", "resume", "checkpoint TP %s PP %s" % (ck_tp, ck_pp),
        "TP %d PP %d (the job)" % (tp, pp),
        "loading a DeepSpeed checkpoint needs the same TP/PP; " + fix,
    ))


def _check_activation_checkpointing(spec: Mapping[str, Any], ds: Optional[Dict[str, Any]], flags: Mapping[str, Any],
                                    derived: Mapping[str, Any], add: Callable[[Dict[str, str]], None]) -> Optional[str]:
    granularity_values = flags.get("--recompute-granularity") or []
    granularity = granularity_values[-1][0] if granularity_values and granularity_values[-1] else None
    method_values = flags.get("--recompute-method") or []
    method = method_values[-1][0] if method_values and method_values[-1] else None
    checkpoint = bool(spec.get("activation_checkpointing")) or "--checkpoint-activations" in flags
    if "--recompute-activations" in flags:
        granularity = "selective"
    # --deepspeed-activation-checkpointing only picks DeepSpeed's implementation; Megatron
    # checkpoints nothing unless --checkpoint-activations or --recompute-* asks
    # (transformer.py ParallelTransformer.forward).
    any_checkpointing = checkpoint or granularity is not None
    json_partition = bool(_ds_get(ds or {}, "activation_checkpointing", "partition_activations"))
    partition = bool(spec.get("partition_activations")) or "--partition-activations" in flags or json_partition
    if partition:
        source = []
        if json_partition:
            source.append("ds_config activation_checkpointing.partition_activations")
        if spec.get("partition_activations") or "--partition-activations" in flags:
            source.append("--partition-activations")
        add(_finding(
            "activation partitioning needs checkpointing", "pass" if any_checkpointing else "fail",
            "activation checkpointing",
            "%s%s" % (" and ".join(source), "" if any_checkpointing else ", no activation checkpointing"),
            "--checkpoint-activations (or --recompute-granularity full) with --deepspeed-activation-checkpointing",
            "" if any_checkpointing else "partitioning splits the checkpointed activations across TP ranks, so "
            "with nothing checkpointed it does nothing and the memory plan is wrong; add --checkpoint-activations "
            "--deepspeed-activation-checkpointing (megatron_job_activation_checkpointing: true) or drop partitioning",
        ))
        if any_checkpointing and "--deepspeed-activation-checkpointing" not in flags:
            add(_finding(
                "DeepSpeed checkpointing configured", "warn", "activation checkpointing",
                "partitioning without --deepspeed-activation-checkpointing", "--deepspeed-activation-checkpointing",
                "Megatron-DeepSpeed calls deepspeed.checkpointing.configure() (which applies partitioning, "
                "contiguous memory and CPU checkpointing) only with --deepspeed-activation-checkpointing; add it",
            ))
    # Megatron-DeepSpeed passes its own flag values (never None) to
    # deepspeed.checkpointing.configure(), which lets them overwrite the JSON section.
    section = _ds_get(ds or {}, "activation_checkpointing")
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
            add(_finding(
                "ds_config activation_checkpointing applied", "warn", "activation checkpointing",
                "ds_config sets " + ", ".join(overridden), "the matching Megatron flags",
                "Megatron-DeepSpeed calls deepspeed.checkpointing.configure() with its own flag values, which "
                "overwrite the JSON; pass the flags in brackets (with --deepspeed-activation-checkpointing)",
            ))
    if derived.get("ds_pipeline_engine") and not checkpoint and granularity is not None and not (
        granularity == "full" and method == "uniform"
    ):
        add(_finding(
            "recompute honoured by the DeepSpeed pipeline", "warn", "activation checkpointing",
            "--recompute-granularity %s%s" % (granularity, " --recompute-method %s" % method if method else ""),
            "--checkpoint-activations, or --recompute-granularity full --recompute-method uniform",
            "the DeepSpeed pipeline engine (used without --no-pipeline-parallel) checkpoints only with those; "
            "this setting recomputes nothing",
        ))
    if checkpoint or granularity == "full":
        return "full"
    if granularity == "selective":
        return "selective"
    return None


def _check_flash_attn(spec: Mapping[str, Any], flags: Mapping[str, Any], from_script: bool,
                      add: Callable[[Dict[str, str]], None]) -> None:
    """Flash attention where the stack profile requires it (cu130: the unfused path fails,
    FACTS.md G), the flag the installed provider serves, and half precision (Megatron's
    FlashSelfAttention asserts q, k, v are fp16 or bf16)."""
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
            add(_finding(
                check, "fail", "attention", found, "--use-flash-attn-v2",
                "%s, so the job would stop at its first forward pass; %s, with flash_attn in the venv "
                "(python_env_flash_attn: auto installs the %s provider)" % (
                    FLASH_ATTN_REQUIRED_REASON, fix, policy["provider"] or "profile's"),
            ))
        elif policy["provider"] == "sdpa" and "--use-flash-attn-v2" not in given:
            add(_finding(
                check, "warn", "attention", "%s: %s" % (where, " ".join(given)), "--use-flash-attn-v2",
                "the profile's flash_attn provider (python_env_flash_attn: sdpa) serves only "
                "flash_attn_varlen_func, which --use-flash-attn-v2 imports; %s need the real flash-attn "
                "(python_env_flash_attn: pip), else use --use-flash-attn-v2" % " ".join(given),
            ))
        else:
            add(_finding(check, "pass", "attention", "%s: %s" % (where, " ".join(given)), "--use-flash-attn-v2"))
    if given:
        half = set(PRECISION_FLAGS).intersection(flags) or spec.get("precision") in ("bf16", "fp16")
        if not half:
            add(_finding(
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


def _check_bias_gelu_fusion(spec: Mapping[str, Any], flags: Mapping[str, Any], from_script: bool,
                            add: Callable[[Dict[str, str]], None]) -> None:
    """A warning where the job keeps Megatron's TorchScript bias-GeLU on a profile whose torch
    cannot fuse it (cu130): it runs, only slower."""
    profile_name = spec.get("stack_profile")
    try:
        fuses = _stack_profiles.torchscript_fusion(profile_name)
    except _stack_profiles.UnknownProfileError:
        return  # the stack profile's own check names it
    if fuses:
        return
    profile = profile_name or _stack_profiles.DEFAULT_PROFILE
    check = "bias-GeLU without TorchScript fusion on stack profile %s" % profile
    if "--no-bias-gelu-fusion" in flags:
        where = "train.sh" if from_script else "job spec"
        add(_finding(check, "pass", "performance", "%s: --no-bias-gelu-fusion" % where, "--no-bias-gelu-fusion"))
        return
    found, fix = (("train.sh has no --no-bias-gelu-fusion", "add --no-bias-gelu-fusion to the pretrain_gpt.py arguments")
                  if from_script else
                  ("%sbias_gelu_fusion: true" % PREFIX, "set %sbias_gelu_fusion: auto (or false)" % PREFIX))
    add(_finding(check, "warn", "performance", found, "--no-bias-gelu-fusion",
                 "%s; %s" % (BIAS_GELU_SLOW_REASON, fix)))


def _check_memory(spec: Mapping[str, Any], derived: Mapping[str, Any], zero: Mapping[str, Any],
                  deepspeed_version: Optional[str], checkpointing: Optional[str], gpu_mib: Optional[int],
                  add: Callable[[Dict[str, str]], None]) -> None:
    estimate = estimate_memory(spec, derived, zero, deepspeed_version, checkpointing)
    total_gib = estimate["total"] / float(GIB)
    found = "~%.1f GiB per GPU: model states %.1f (%s, P_gpu %.2fB of %.2fB), activations %.1f (micro %d x %d in flight%s), buffers %.1f, reserved %.1f" % (
        total_gib, estimate["model_states"] / float(GIB), estimate["formula"],
        estimate["params_per_gpu"] / 1e9, (estimate["params_total"] or 0) / 1e9,
        estimate["activations"] / float(GIB), derived["micro_batch_size"] or 1, estimate["in_flight_micro_batches"],
        ", %s recompute" % checkpointing if checkpointing else "",
        estimate["buffers"] / float(GIB), estimate["reserved"] / float(GIB),
    )
    if not gpu_mib:
        add(_finding(
            "memory per GPU", "warn", "memory", found, "GPU memory unknown",
            "pass gpu_memory_mib (e.g. 81920 for A100 80GB, 143771 for H200) to compare",
        ))
        return
    capacity = gpu_mib * float(MIB)
    ratio = estimate["total"] / capacity
    expected = "<= %d%% of %.1f GiB" % (int(MEMORY_WARN_FRACTION * 100), capacity / GIB)
    if ratio <= MEMORY_WARN_FRACTION:
        add(_finding("memory per GPU", "pass", "memory", "%s (%.0f%%)" % (found, ratio * 100), expected))
        return
    alternatives = []
    micro = derived["micro_batch_size"] or 1
    if micro > 1:
        smaller = dict(derived)
        smaller["micro_batch_size"] = 1
        alternatives.append("--micro-batch-size 1: ~%.1f GiB" % (
            estimate_memory(spec, smaller, zero, deepspeed_version, checkpointing)["total"] / GIB))
    if checkpointing != "full":
        alternatives.append("--checkpoint-activations: ~%.1f GiB" % (
            estimate_memory(spec, derived, zero, deepspeed_version, "full")["total"] / GIB))
    offloaded = dict(zero)
    offloaded.update({"stage": 3, "offload_optimizer": True, "offload_param": True})
    no_pipe = dict(derived)
    no_pipe["data_parallel_size"] = derived["data_parallel_size"] * derived["pipeline_parallel"]
    no_pipe["pipeline_parallel"] = 1
    alternatives.append("ZeRO-3 + CPU offload (needs PP 1 and --no-pipeline-parallel, plus --cpu-optimizer): ~%.1f GiB" % (
        estimate_memory(spec, no_pipe, offloaded, deepspeed_version, checkpointing or "full")["total"] / GIB))
    add(_finding(
        "memory per GPU", "fail" if ratio > 1.0 else "warn", "memory", "%s (%.0f%%)" % (found, ratio * 100), expected,
        "%s. Estimates: %s" % (GUIDE_OOM_ADVICE[0].upper() + GUIDE_OOM_ADVICE[1:], "; ".join(alternatives)),
    ))


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------

_STATUS_ORDER = {"fail": 0, "warn": 1, "pass": 2}


def failed(findings: Iterable[Mapping[str, str]]) -> List[Mapping[str, str]]:
    return [f for f in findings if f.get("status") == "fail"]


# Column caps of the table (STATUS, COMPONENT, CHECK, FOUND, EXPECTED); longer cells wrap.
TABLE_WIDTHS = (6, 24, 40, 52, 36)


def format_findings(findings: Sequence[Mapping[str, str]], widths: Sequence[int] = TABLE_WIDTHS) -> str:
    """A plain-text table, one row per finding in the order given (STATUS, COMPONENT, CHECK,
    FOUND, EXPECTED), long cells wrapped at ``widths``, each failing or warning row followed
    by its fix, and a closing count line."""
    import textwrap

    headers = ("STATUS", "COMPONENT", "CHECK", "FOUND", "EXPECTED")
    keys = ("status", "component", "check", "found", "expected")
    caps = list(widths)
    rows = [[str(f.get(k, "")) for k in keys] for f in findings]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = min(max(widths[i], len(cell)), max(caps[i], len(headers[i])))
    rule = "-+-".join("-" * w for w in widths)
    lines = [" | ".join(h.ljust(widths[i]) for i, h in enumerate(headers)), rule]
    for finding, row in zip(findings, rows):
        wrapped = [textwrap.wrap(cell, widths[i]) or [""] for i, cell in enumerate(row)]
        for line_no in range(max(len(w) for w in wrapped)):
            lines.append(" | ".join(
                (wrapped[i][line_no] if line_no < len(wrapped[i]) else "").ljust(widths[i])
                for i in range(len(headers))
            ).rstrip())
        if finding.get("status") in ("fail", "warn") and finding.get("fix"):
            for fix_line in textwrap.wrap("fix: " + finding["fix"], sum(widths) + 3 * len(widths),
                                          initial_indent="    ", subsequent_indent="         "):
                lines.append(fix_line)
    counts = collections.Counter(f.get("status") for f in findings)
    lines.append(rule)
    lines.append("%d fail, %d warn, %d pass" % (counts.get("fail", 0), counts.get("warn", 0), counts.get("pass", 0)))
    return "\n".join(lines)
