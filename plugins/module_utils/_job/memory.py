# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-GPU memory estimate of a job, and the rule that compares it with the GPU.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Tuple

from .._stack import profiles as _stack_profiles
from .findings import finding
from .model import (KNOWN_VOCAB_SIZES, Moe, experts_per_layer, gpt_parameters, layer_parameters, llama_layer_parameters,
                    mlp_parameters, moe_of)
from .._stack.versions import compare

# DeepSpeed's ZeRO-2 estimator changed from 4P + 16P/N to 2P + 18P/N in 0.14.3.
ZERO2_ESTIMATOR_CHANGED = "0.14.3"

# The guide's OOM advice (问题2：OOM), which the memory finding makes concrete.
GUIDE_OOM_ADVICE = (
    "the guide's OOM advice: lower the micro batch (--micro-batch-size; keep "
    "--global-batch-size so gradient accumulation grows), turn on activation checkpointing "
    "(--checkpoint-activations), or ZeRO-3 with CPU offload"
)

# Fixed per-GPU memory that is not model state or activations: CUDA context, NCCL
# buffers, allocator fragmentation. A round figure: the estimate is rough (+-20%).
RESERVED_BYTES = 2 * 1024 ** 3
# Bytes kept per attention-score element (a x s x s per micro batch and layer, over TP) when
# the scores are materialised (no flash attention, no selective recompute). Megatron's fused
# scaled-masked-softmax kernel keeps its 16-bit output (2), the dropout mask (1) and the
# dropout output the value matmul reads (2): Korthikanti et al.'s 5. Without the fusion
# (--no-masked-softmax-fusion, the cu130 profile) FusedScaleMaskSoftmax runs torch.softmax in
# fp32 (softmax_in_fp32) and keeps its fp32 output (4) + mask (1) + dropout output (2) = 7.
# Measured on H200 (g1-m4-nf: 7.4 per element over 24 layers, the backward transient included).
SCORE_BYTES_FUSED = 5.0
SCORE_BYTES_UNFUSED = 7.0
# The backward pass of one layer with materialised scores holds, besides what is kept, the
# gradients of the scores (fp32 softmax backward input and output, 16-bit copies): fitted on
# g1-m4-nf-rc and g1-m8-nf-rc (20 and 25 bytes per element beyond flash with full recompute,
# where the recomputed layer's 7 are part of it), 14 per element.
SCORE_BACKWARD_BYTES = 14.0
# LLaMA-style layers (megatron_job_model_preset: llama) keep more than GPT's: the SwiGLU MLP
# keeps the fc1 output (2f wide), silu's output and the gated product (f wide each): 8 f/h
# bytes per s b h instead of GeLU's 4 f/h; and Megatron-DeepSpeed's rotary embedding runs as
# unfused PyTorch ops on q and k (megatron/model/rotary_pos_embedding.py), whose fp32
# products are kept. The rotary term is fitted on g1-llama-m16 (93.9 GiB reserved against
# 78.8 for the GPT of the same shape): 4.5 bytes per s b h, over TP.
ROTARY_BYTES = 4.5
# ZeRO stage 0 with bf16 or fp16: DeepSpeed's BF16_Optimizer / FP16_Optimizer keep 16-bit
# params and grads, fp32 master params and Adam's two moments: 2 + 2 + 4 + 8 = 16 bytes per
# parameter (g1-m16-z0 measured 7.4 GiB below ZeRO-1's 4P + 16P of the same 1.23B).
ZERO0_MIXED_BYTES = 16
PRESETS = ("gpt", "llama")
MIB = 1024 ** 2
GIB = 1024 ** 3
MEMORY_WARN_FRACTION = 0.90


def version_lt(version: Optional[str], bound: str) -> bool:
    """``version`` < ``bound``; False when the version is unknown or unreadable."""
    if not version:
        return False
    try:
        return compare(version, bound) < 0
    except ValueError:
        return False


def _profile_unfuses_softmax(spec: Mapping[str, Any]) -> bool:
    """The spec's stack profile forces --no-masked-softmax-fusion (cu130: its fused kernel is
    not built for that CUDA); an unknown profile forces nothing."""
    try:
        flags = _stack_profiles.get(spec.get("stack_profile") or _stack_profiles.DEFAULT_PROFILE).get("megatron_flags") or ()
    except _stack_profiles.UnknownProfileError:
        return False
    return "--no-masked-softmax-fusion" in flags


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

    Model states follow DeepSpeed's estimators (docs/upstream-facts.md §D6) applied to the parameters one GPU
    holds after tensor and pipeline sharding (P_gpu: the first stage's layers / TP, plus the
    word embeddings / TP and the position embeddings), with ZeRO sharding over the data
    parallel group N = DP. Mixed precision:
      ZeRO-0  16 P_gpu (16-bit params and grads, fp32 master, Adam m and v: ZERO0_MIXED_BYTES)
      ZeRO-1  4 P_gpu + 16 P_gpu / N            (offloaded optimizer: 4 P_gpu)
      ZeRO-2  2 P_gpu + 18 P_gpu / N            (DeepSpeed < 0.14.3 printed 4P + 16P/N;
                                                 offloaded optimizer: 2 P_gpu)
      ZeRO-3  4 L + 18 P_gpu / N, L = the largest layer / TP (offloaded optimizer:
              4 L + 2 P_gpu / N; offloaded parameters too: 4 L)
    fp32 training uses 4-byte params and grads and no master copy.
    Activations per layer and micro batch (Korthikanti et al. 2022, "Reducing Activation
    Recomputation in Large Transformer Models", 16-bit): s b h (10 + (8 + MLP + scores) / t),
    MLP = 4 f/h (GeLU; 16 for f = 4h, the paper's 24/t in all) or 8 f/h + ROTARY_BYTES for the
    llama preset (SwiGLU, unfused rotary), scores = SCORE_BYTES_FUSED (5) or, with the unfused
    fp32 softmax, SCORE_BYTES_UNFUSED (7) x a s / h; with sequence parallelism everything is
    over t. DeepSpeed-Ulysses sequence parallelism (SP) divides the activations and logits by
    SP, and ZeRO's N is DP x SP. Flash attention or selective recomputation drop the scores; otherwise one layer's
    backward adds SCORE_BACKWARD_BYTES per score element. Full recomputation keeps 2 s b h per
    layer plus one layer's full activations. The first stage keeps
    min(PP, gradient accumulation) micro batches in flight (1F1B); the last stage adds the
    fp32 logits 4 s b V / t. Plus ZeRO-1/2 communication buckets (reduce + allgather bucket
    elements x 2 bytes) and RESERVED_BYTES for the CUDA context, NCCL and fragmentation.
    Checked against PyTorch's max reserved memory on H200 (docs/benchmarks.md, 20 one-GPU
    configurations of a 1.23B GPT and the llama preset: -7% to +3%); the TP and PP terms are
    the paper's, not measured here.
    """
    shape = _shape(spec, derived)
    params_gpu, largest_layer = _parameters_per_gpu(shape)
    model_states, formula = _model_states(shape, zero, params_gpu, largest_layer, deepspeed_version)
    experts = _expert_parameters_per_gpu(spec, shape, moe_of(spec.get("extra_args") or ()))
    if experts is not None:
        dense_change, expert_params, expert_dp = experts
        params_gpu += dense_change
        model_states, formula = _model_states(shape, zero, params_gpu, largest_layer, deepspeed_version)
        expert_states = _model_states(shape._replace(dp=expert_dp), zero, expert_params, largest_layer, deepspeed_version)[0]
        if _zero_stage(zero) == 3:
            expert_states -= 4 * largest_layer  # the working layer is counted once, in the dense part
        model_states += expert_states
        params_gpu += expert_params
        formula += " (experts: %.2fB per GPU, N = %d)" % (expert_params / 1e9, expert_dp)
    activations, in_flight = _activations(spec, shape, checkpointing)
    buffers = _buffers(zero)
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


class _Shape(NamedTuple):
    """The numbers of a job the estimate reads, defaults applied."""

    tp: int
    pp: int
    sp: int  # DeepSpeed-Ulysses sequence parallel
    dp: int  # ZeRO's N: data parallel x sp
    hidden: int
    heads: int
    layers: int
    layers_per_stage: int
    seq: int
    positions: int  # learned position embeddings (0 for llama's rotary)
    ffn: int
    vocab: int
    micro: int
    grad_acc: int
    mixed: bool  # bf16 or fp16
    llama: bool


def _shape(spec: Mapping[str, Any], derived: Mapping[str, Any]) -> _Shape:
    pp = derived["pipeline_parallel"]
    # ZeRO partitions over data parallel x DeepSpeed sequence parallel: DeepSpeed hands its ZeRO
    # optimizers the sequence-data-parallel group (deepspeed/runtime/engine.py:1798 and 2307 at v0.19.5).
    sp = int(derived.get("sequence_parallel_size") or 1)
    hidden = int(spec["hidden_size"])
    layers = int(spec["num_layers"])
    positions = int(spec["max_position_embeddings"])
    llama = (spec.get("model_preset") or "gpt") == "llama"
    return _Shape(
        tp=derived["tensor_parallel"],
        pp=pp,
        sp=sp,
        dp=(derived["data_parallel_size"] or 1) * sp,
        hidden=hidden,
        heads=int(spec["num_attention_heads"]),
        layers=layers,
        layers_per_stage=int(math.ceil(layers / float(pp))),
        seq=int(spec["seq_length"]),
        positions=0 if llama else positions,  # llama's rotary embeddings: no learned position table
        ffn=int(derived["ffn_hidden_size"] or 4 * hidden),
        vocab=derived["padded_vocab_size"] or KNOWN_VOCAB_SIZES["GPT2BPETokenizer"],
        micro=int(derived["micro_batch_size"] or 1),
        grad_acc=derived["gradient_accumulation_steps"] or 1,
        mixed=spec.get("precision") in ("bf16", "fp16"),
        llama=llama,
    )


def _parameters_per_gpu(shape: _Shape) -> Tuple[float, float]:
    """P_gpu, the parameters of the busiest pipeline stage over TP, and the largest layer / TP."""
    per_layer = llama_layer_parameters(shape.hidden, shape.ffn) if shape.llama else layer_parameters(shape.hidden, shape.ffn)
    embed = shape.vocab * shape.hidden / shape.tp
    if shape.pp == 1:
        # Untied embeddings (llama) add the output layer's own V x h / TP.
        params_gpu = (shape.layers * per_layer / shape.tp + embed * (2 if shape.llama else 1) + shape.positions * shape.hidden
                      + 2 * shape.hidden)
    else:
        # First stage: word + position embeddings; last stage: the tied output embedding copy.
        params_gpu = shape.layers_per_stage * per_layer / shape.tp + embed + max(shape.positions * shape.hidden, 2 * shape.hidden)
    return params_gpu, max(per_layer / shape.tp, embed)


def _expert_parameters_per_gpu(spec: Mapping[str, Any], shape: _Shape, moe: Optional[Moe]) -> Optional[Tuple[float, float, int]]:
    """For an MoE job, the busiest stage's (change of the dense parameters per GPU, expert
    parameters per GPU, ZeRO's N for the experts); None for a dense job or a layout upstream
    refuses. An MoE layer's experts replace its dense MLP: each rank keeps experts / EP of them
    (deepspeed/moe/layer.py:63), whole unless --enable-expert-tensor-parallelism splits them
    over TP (megatron/core/tensor_parallel/layers.py:529 at 4efb479d); the gate (h x experts) and
    a residual MoE's dense MLP and coefficient stay with the dense parameters. ZeRO partitions
    the expert parameters over the expert-data-parallel group (stage_1_and_2.py:797): the ranks
    of a pipeline stage / EP without expert tensor parallelism (deepspeed/utils/groups.py:351-369),
    DP / EP with it (groups.py:568)."""
    if moe is None:
        return None
    per_layer = experts_per_layer(moe, shape.layers)
    if per_layer is None or moe.ep < 1:
        return None
    mlp = mlp_parameters(spec, shape.hidden, shape.ffn)
    expert_mlp = mlp / shape.tp if moe.expert_tp else float(mlp)
    best = None
    for start in range(0, shape.layers, shape.layers_per_stage):
        stage = [n for n in per_layer[start:start + shape.layers_per_stage] if n > 1]
        dense = sum(-mlp / shape.tp + shape.hidden * n + ((expert_mlp + 2 * shape.hidden + 2) if moe.residual else 0)
                    for n in stage)
        experts = sum(n // moe.ep * expert_mlp for n in stage)
        if best is None or dense + experts > best[0] + best[1]:
            best = (dense, experts)
    ranks = shape.dp // shape.sp * (1 if moe.expert_tp else shape.tp)
    return best[0], best[1], max(1, ranks // moe.ep)


class _States(NamedTuple):
    """What the model-state formulas of a ZeRO stage read."""

    params: float  # P_gpu
    largest_layer: float
    dp: int
    mixed: bool
    offload_optimizer: bool
    offload_param: bool
    deepspeed_version: Optional[str]


def _zero0_states(s: _States) -> Tuple[float, str]:
    bytes_per_param = ZERO0_MIXED_BYTES if s.mixed else 16
    return bytes_per_param * s.params, "no ZeRO: %dP" % bytes_per_param


def _zero1_states(s: _States) -> Tuple[float, str]:
    work = 2 if s.mixed else 4
    if s.offload_optimizer:
        return 2 * work * s.params, "ZeRO-1 offload: %d P" % (2 * work)
    if s.mixed:
        return 4 * s.params + 16 * s.params / s.dp, "ZeRO-1: 4P + 16P/N"
    return 8 * s.params + 8 * s.params / s.dp, "ZeRO-1 fp32: 8P + 8P/N"


def _zero2_states(s: _States) -> Tuple[float, str]:
    work = 2 if s.mixed else 4
    if s.offload_optimizer:
        return work * s.params, "ZeRO-2 offload: %d P" % work
    if s.mixed and version_lt(s.deepspeed_version, ZERO2_ESTIMATOR_CHANGED):
        return 4 * s.params + 16 * s.params / s.dp, "ZeRO-2 (DeepSpeed < 0.14.3): 4P + 16P/N"
    if s.mixed:
        return 2 * s.params + 18 * s.params / s.dp, "ZeRO-2: 2P + 18P/N"
    return 4 * s.params + 12 * s.params / s.dp, "ZeRO-2 fp32: 4P + 12P/N"


def _zero3_states(s: _States) -> Tuple[float, str]:
    factor = 18 if s.mixed else 16
    if s.offload_optimizer and s.offload_param:
        return 4 * s.largest_layer, "ZeRO-3: 4 x largest layer + 0"
    if s.offload_optimizer:
        return 4 * s.largest_layer + 2 * s.params / s.dp, "ZeRO-3: 4 x largest layer + 2 P/N"
    if s.offload_param:
        return 4 * s.largest_layer + (factor - 2) * s.params / s.dp, "ZeRO-3: 4 x largest layer + %d P/N" % factor
    return 4 * s.largest_layer + factor * s.params / s.dp, "ZeRO-3: 4 x largest layer + %d P/N" % factor


# Any other stage (0, None, unknown) is counted as no ZeRO.
_ZERO_STATES: Dict[int, Callable[[_States], Tuple[float, str]]] = {1: _zero1_states, 2: _zero2_states, 3: _zero3_states}


def _zero_stage(zero: Mapping[str, Any]) -> int:
    return int(zero.get("stage") or 0)


def _model_states(shape: _Shape, zero: Mapping[str, Any], params_gpu: float, largest_layer: float,
                  deepspeed_version: Optional[str]) -> Tuple[float, str]:
    """Bytes of parameters, gradients and optimizer state per GPU, and the formula used."""
    states = _States(params_gpu, largest_layer, shape.dp, shape.mixed, bool(zero.get("offload_optimizer")),
                     bool(zero.get("offload_param")), deepspeed_version)
    return _ZERO_STATES.get(_zero_stage(zero), _zero0_states)(states)


def _score_bytes(spec: Mapping[str, Any], checkpointing: Optional[str]) -> float:
    """Bytes kept per attention-score element: none with flash attention or selective recompute."""
    if bool(spec.get("use_flash_attn")) or checkpointing == "selective":
        return 0.0
    fused_softmax = spec.get("masked_softmax_fusion", True) is not False and not _profile_unfuses_softmax(spec)
    return SCORE_BYTES_FUSED if fused_softmax else SCORE_BYTES_UNFUSED


def _layer_activations(shape: _Shape, sequence_parallel: bool, score_bytes: float) -> Tuple[float, float]:
    """One layer's kept activations for one micro batch, and its backward's score gradients."""
    # Per s b h of one layer, in bytes (16-bit; the paper's counts): the parts TP does not split
    # (two layernorm inputs 4, QKV and fc1 inputs 4, two dropout masks 2) and the parts it does
    # (Q, K, V 6, the projection input 2, the MLP 4 f/h, or 8 f/h for SwiGLU, rotary).
    mlp = (8.0 if shape.llama else 4.0) * shape.ffn / shape.hidden
    split = 8.0 + mlp + (ROTARY_BYTES if shape.llama else 0.0)
    scores = score_bytes * shape.heads * shape.seq / shape.hidden
    sbh = _sbh(shape)
    if sequence_parallel:
        full_layer = sbh * (10 + split + scores) / shape.tp
    else:
        full_layer = sbh * (10 + (split + scores) / shape.tp)
    act_scale = _activation_scale(shape)
    full_layer *= act_scale
    score_backward = (act_scale * sbh * SCORE_BACKWARD_BYTES * shape.heads * shape.seq / shape.hidden / shape.tp
                      if score_bytes else 0.0)
    return full_layer, score_backward


def _sbh(shape: _Shape) -> float:
    # DeepSpeed-Ulysses keeps seq / SP tokens per rank outside attention, and inside it all seq
    # tokens of heads / SP heads, the same bytes; the scores keep the full seq for that.
    return float(shape.seq) / shape.sp * shape.micro * shape.hidden


def _activation_scale(shape: _Shape) -> int:
    return 1 if shape.mixed else 2  # the paper counts 16-bit activations


def _activations(spec: Mapping[str, Any], shape: _Shape, checkpointing: Optional[str]) -> Tuple[float, int]:
    """Activation bytes of the busier of the first and last pipeline stage, and the micro
    batches the first stage keeps in flight."""
    sequence_parallel = bool(spec.get("sequence_parallel")) and shape.tp > 1
    full_layer, score_backward = _layer_activations(shape, sequence_parallel, _score_bytes(spec, checkpointing))
    if checkpointing == "full":
        kept_layer = 2 * _sbh(shape) * _activation_scale(shape) / (shape.tp if sequence_parallel else 1)
        stage_layers = kept_layer * shape.layers_per_stage
        recompute_peak = full_layer + score_backward
    else:
        stage_layers = full_layer * shape.layers_per_stage
        recompute_peak = score_backward
    in_flight = min(shape.pp, shape.grad_acc) if shape.pp > 1 else 1
    logits = 4.0 * shape.seq / shape.sp * shape.micro * shape.vocab / shape.tp
    first_activations = stage_layers * in_flight + recompute_peak + (logits if shape.pp == 1 else 0)
    last_activations = stage_layers + recompute_peak + logits
    return max(first_activations, last_activations), in_flight


def _buffers(zero: Mapping[str, Any]) -> float:
    """ZeRO's communication buckets: reduce + allgather elements x 2 bytes (ZeRO-3: reduce only)."""
    stage = _zero_stage(zero)
    if stage in (1, 2):
        return 2.0 * (int(zero.get("reduce_bucket_size") or 5e8) + int(zero.get("allgather_bucket_size") or 5e8))
    if stage == 3:
        return 2.0 * int(zero.get("reduce_bucket_size") or 5e8)
    return 0.0


def check_memory(spec: Mapping[str, Any], derived: Mapping[str, Any], zero: Mapping[str, Any],
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
        add(finding(
            "memory per GPU", "warn", "memory", found, "GPU memory unknown",
            "pass gpu_memory_mib (e.g. 81920 for A100 80GB, 143771 for H200) to compare",
        ))
        return
    capacity = gpu_mib * float(MIB)
    ratio = estimate["total"] / capacity
    expected = "<= %d%% of %.1f GiB" % (int(MEMORY_WARN_FRACTION * 100), capacity / GIB)
    if ratio <= MEMORY_WARN_FRACTION:
        add(finding("memory per GPU", "pass", "memory", "%s (%.0f%%)" % (found, ratio * 100), expected))
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
    add(finding(
        "memory per GPU", "fail" if ratio > 1.0 else "warn", "memory", "%s (%.0f%%)" % (found, ratio * 100), expected,
        "%s. Estimates: %s" % (GUIDE_OOM_ADVICE[0].upper() + GUIDE_OOM_ADVICE[1:], "; ".join(alternatives)),
    ))
