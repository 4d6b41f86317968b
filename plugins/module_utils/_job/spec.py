# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job spec: ``normalize`` (defaults, coercion, ``auto`` resolved) and ``derive`` (world,
DP, gradient accumulation, padded vocabulary, parameters).

``normalize`` is the one way a set of ``megatron_job_*`` variables becomes a job spec: the
megatron_job role (through the ``megatron_ds.cluster.job_spec`` filter), the validate_job
action and the tests all call it, and every builder in ``args`` calls it again (it is
idempotent), so a spec is read with one set of rules wherever it comes from.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, Mapping, Optional

from .._stack import profiles as _stack_profiles
from .model import default_ffn_hidden_size, gpt_parameters, padded_vocab_size
from .schema import (
    AUTO,
    AUTO_BOOL_KEYS,
    DEFAULTS,
    FIELDS,
    NODES,
    SCHEMA,
    TEMPLATED_DEFAULTS,
    JobError,
    coerce,
    strip_prefix,
    to_bool,
    to_int,
    var,
)

# Tokenizer vocabularies the parameter count needs (GPT-2 BPE: 50257 tokens).

# Megatron-DeepSpeed's messages (arguments.py, microbatches.py).
MDS_GLOBAL_BATCH_MSG = (
    "global batch size ({}) is not divisible by micro batch size ({}) times data parallel size ({})"
)
MDS_WORLD_MSG = (
    "world size ({}) is not divisible by tensor parallel size ({}) times pipeline parallel "
    "size ({}) times seqence parallel size ({})"
)


def normalize(spec_vars: Mapping[str, Any], nodes: Any = None) -> Dict[str, Any]:
    """The full job spec from ``spec_vars`` (megatron_job_* variables or stripped names).

    Strips the prefix, fills every missing key from the schema (paths computed from ``name``
    and ``workdir`` as the role's defaults do), coerces numbers and booleans given as strings
    (``-e megatron_job_tensor_parallel=4``), lower-cases choices, and resolves ``auto``
    (use_flash_attn, bias_gelu_fusion) with the spec's stack profile. ``ffn_hidden_size``
    stays null when not given: Megatron then computes it (4 x hidden, less with --swiglu), and
    the job passes no --ffn-hidden-size. ``nodes`` (the argument, else a ``nodes`` key) is kept
    as an integer. Keys that are not spec variables are ignored here; _job_schema.unknown_keys
    lists them. Raises JobError naming the variable, the value found and the value expected.
    Idempotent: normalize(normalize(x)) == normalize(x).
    """
    given = strip_prefix(spec_vars)
    spec: Dict[str, Any] = {}
    for field in FIELDS:
        if field.name in TEMPLATED_DEFAULTS:
            continue
        value = given.get(field.name, field.default)
        if value is field.default and isinstance(value, (dict, list)):
            value = copy.deepcopy(value)
        spec[field.name] = coerce(field.name, value)
    for key in TEMPLATED_DEFAULTS:
        if key not in given:
            spec[key] = DEFAULTS[key].format(**spec)
        else:
            spec[key] = coerce(key, given[key]) if given[key] is not None or SCHEMA[key].nullable else DEFAULTS[key].format(**spec)
    gelu_auto = isinstance(spec["bias_gelu_fusion"], str) and spec["bias_gelu_fusion"].strip().lower() == AUTO
    for key in sorted(AUTO_BOOL_KEYS):
        spec[key] = resolve_auto(key, spec[key], spec["stack_profile"])
    if gelu_auto and spec["fused_ops"]:
        # Megatron's bias-GeLU fusion path is then served by the compiled kernel of
        # megatron_ds_fused_ops, not TorchScript: worth taking where the profile's torch cannot fuse.
        spec["bias_gelu_fusion"] = True
    out = {field.name: spec[field.name] for field in FIELDS}
    if nodes is None:
        nodes = given.get(NODES)
    if nodes is not None:
        count = to_int(NODES, nodes)
        if count < 1:
            raise JobError("nodes: found %d, expected >= 1; put the training nodes in inventory group "
                           "megatron_nodes" % count)
        out[NODES] = count
    return out


def resolve_auto(key: str, value: Any, profile_name: Optional[str]) -> bool:
    """An AUTO_BOOL_KEYS setting as a bool: ``auto`` follows the stack profile
    (_stack_profiles.AUTO_SETTINGS: use_flash_attn is true where the profile requires flash
    attention, cu130; bias_gelu_fusion is false where its torch cannot fuse the TorchScript
    bias-GeLU, cu130); anything else is read as a bool. JobError naming
    megatron_job_stack_profile when the profile is unknown."""
    if isinstance(value, str) and value.strip().lower() == AUTO:
        try:
            return _stack_profiles.auto_setting(key, profile_name)
        except _stack_profiles.UnknownProfileError as exc:
            raise JobError("%s: %s" % (var("stack_profile"), exc.args[0] if exc.args else exc)) from None
    return to_bool(key, value)


def int_or_none(value: Any) -> Optional[int]:
    """A lenient int for values read from files the user wrote (None when it is not one)."""
    try:
        if value is None or isinstance(value, bool):
            return None
        return int(value)
    except (TypeError, ValueError):
        return None


def derive(spec: Mapping[str, Any], nodes: Any = None, gpus_per_node: Any = None, *,
           strict: bool = False) -> Dict[str, Any]:
    """The numbers every job file needs, from a normalized spec and the cluster shape
    (``nodes`` and ``gpus_per_node`` default to the spec's).

    Returns world_size (= nodes x gpus_per_node), model_parallel_size (TP x PP),
    sequence_parallel_size (DeepSpeed-Ulysses SP, 1 without it), data_parallel_size
    (world / (TP x PP x SP), None when it does not divide), micro_batch_size,
    global_batch_size (Megatron's default micro x DP when the spec has none),
    gradient_accumulation_steps (global / (micro x DP), None when it does not divide),
    train_batch_size and train_micro_batch_size_per_gpu (what ds_config.json must carry),
    ffn_hidden_size (Megatron's 4 x hidden when the spec has none), kv_channels,
    num_layers_per_stage (None when uneven), padded_vocab_size, num_parameters,
    ds_pipeline_engine (DeepSpeed's PipelineModule is used unless no_pipeline_parallel),
    zero_stage, bf16, fp16.

    With ``strict=True`` (what rendering the job files needs) a shape that does not divide
    raises JobError saying what to change.
    """
    nodes = spec.get(NODES) if nodes is None else nodes
    if nodes is None:
        raise JobError("nodes is missing: put the training nodes in inventory group megatron_nodes")
    nodes = int(nodes)
    gpus = int(spec.get("gpus_per_node") if gpus_per_node is None else gpus_per_node)
    tp = int_or_none(spec.get("tensor_parallel")) or 1
    pp = int_or_none(spec.get("pipeline_parallel")) or 1
    sp = int_or_none(spec.get("ds_sequence_parallel_size")) or 1
    world = nodes * gpus
    model_parallel = tp * pp
    # DeepSpeed-Ulysses splits each sequence over sp ranks that hold the same model part, so
    # data parallel is what is left (Megatron-DeepSpeed megatron/arguments.py:101-108 and
    # core/parallel_state.py:154 at 4efb479d); DeepSpeedConfig's batch arithmetic reads the same
    # data parallel size from Megatron's mpu (deepspeed/runtime/config.py:701-704 at v0.19.5).
    ranks_per_replica = model_parallel * sp
    dp = world // ranks_per_replica if world % ranks_per_replica == 0 and world >= ranks_per_replica else None
    micro = int_or_none(spec.get("micro_batch_size"))
    global_batch = int_or_none(spec.get("global_batch_size"))
    if global_batch is None and micro and dp:
        global_batch = micro * dp
    grad_acc = None
    if micro and dp and global_batch and global_batch % (micro * dp) == 0:
        grad_acc = global_batch // (micro * dp)
    hidden = int_or_none(spec.get("hidden_size"))
    heads = int_or_none(spec.get("num_attention_heads"))
    layers = int_or_none(spec.get("num_layers"))
    ffn = int_or_none(spec.get("ffn_hidden_size")) or default_ffn_hidden_size(spec, hidden)
    precision = spec.get("precision") or "fp32"
    derived = {
        "nodes": nodes,
        "gpus_per_node": gpus,
        "world_size": world,
        "tensor_parallel": tp,
        "pipeline_parallel": pp,
        "model_parallel_size": model_parallel,
        "sequence_parallel_size": sp,
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
        "zero_stage": int_or_none(spec.get("zero_stage")),
        "bf16": precision == "bf16",
        "fp16": precision == "fp16",
    }
    if strict:
        problems = []
        if dp is None:
            problems.append(
                "world size %d (%d nodes x %d GPUs) is not divisible by TP %d x PP %d%s, so the GPUs "
                "cannot be split into tensor_parallel %d x pipeline_parallel %d%s: make "
                "megatron_job_tensor_parallel x megatron_job_pipeline_parallel%s divide %d, or change "
                "the node count" % (
                    world, nodes, gpus, tp, pp, " x SP %d" % sp if sp > 1 else "", tp, pp,
                    " x ds_sequence_parallel_size %d" % sp if sp > 1 else "",
                    " x megatron_job_ds_sequence_parallel_size" if sp > 1 else "", world)
            )
        elif micro and global_batch and grad_acc is None:
            problems.append(
                "global_batch_size %d is not divisible by micro_batch_size %d x data parallel %d "
                "(Megatron asserts: %s): make megatron_job_global_batch_size a multiple of %d"
                % (global_batch, micro, dp, MDS_GLOBAL_BATCH_MSG.format(global_batch, micro, dp), micro * dp)
            )
        if problems:
            raise JobError("; ".join(problems))
    return derived


def summary(spec: Mapping[str, Any]) -> Dict[str, int]:
    """The shape train.sh's header states (nodes, gpus_per_node, world, tp, pp, dp, micro,
    global, grad_acc): ``derive(strict=True)`` of the normalized spec under short names."""
    d = derive(normalize(spec), strict=True)
    return {
        "nodes": d["nodes"],
        "gpus_per_node": d["gpus_per_node"],
        "world": d["world_size"],
        "tp": d["tensor_parallel"],
        "pp": d["pipeline_parallel"],
        "dp": d["data_parallel_size"],
        "micro": d["micro_batch_size"],
        "global": d["global_batch_size"],
        "grad_acc": d["gradient_accumulation_steps"],
    }
