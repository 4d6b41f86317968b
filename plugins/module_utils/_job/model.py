# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The transformer's formulas, once: the FFN size Megatron-DeepSpeed picks, the padded
vocabulary, parameters per layer and in all, and the matmul FLOPs per token.

Every caller (derive, the rules, the memory estimate, the planner, the train.sh reader) reads
these; a second copy is how validation once judged a llama FFN of 4h while Megatron built
int(8h/3 / 64) x 64. No Ansible imports.
"""
from __future__ import annotations

import math
from typing import Any, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .._mds.args import split_args

# GPT-2 BPE (megatron/tokenizer/gpt2_tokenization.py); the padding rule of
# megatron/tokenizer/tokenizer.py _vocab_size_with_padding (--make-vocab-size-divisible-by 128).
KNOWN_VOCAB_SIZES = {"GPT2BPETokenizer": 50257}
MAKE_VOCAB_SIZE_DIVISIBLE_BY = 128


def is_llama(spec: Mapping[str, Any]) -> bool:
    """The llama preset: --swiglu, no biases, RMSNorm, rotary positions, untied output layer."""
    return (spec.get("model_preset") or "gpt") == "llama"


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


def default_ffn_hidden_size(spec: Mapping[str, Any], hidden: Optional[int]) -> Optional[int]:
    """Megatron-DeepSpeed's --ffn-hidden-size default (megatron/arguments.py 287-296 at 4efb479d): 4h, or with
    --swiglu (the llama preset) int(8h/3 / 64) x 64, which keeps the MLP's parameters near
    GPT's and a multiple of 64."""
    if not hidden:
        return None
    if is_llama(spec):
        return int((4 * hidden * 2 / 3) / 64) * 64
    return 4 * hidden


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
    ffn = int(spec.get("ffn_hidden_size") or default_ffn_hidden_size(spec, hidden))
    vocab = padded_vocab_size(spec) or KNOWN_VOCAB_SIZES["GPT2BPETokenizer"]
    experts = moe_extra_parameters(spec, moe_of(spec.get("extra_args") or ()))
    if is_llama(spec):
        # No biases, RMSNorm, SwiGLU (3hf), rotary (no position table), untied output layer.
        return layers * (4 * hidden * hidden + 3 * hidden * ffn + 2 * hidden) + 2 * vocab * hidden + hidden + experts
    return layers * layer_parameters(hidden, ffn) + vocab * hidden + positions * hidden + 2 * hidden + experts


class Moe(NamedTuple):
    """DeepSpeed mixture of experts as Megatron-DeepSpeed builds it from its flags: --num-experts
    (one count, or one per MoE layer), --expert-interval (every k-th layer is an MoE layer,
    default 2), --moe-expert-parallel-size (EP, default 1), --enable-expert-tensor-parallelism,
    --mlp-type residual, --create-moe-param-group."""

    experts: Tuple[int, ...]
    interval: int
    ep: int
    expert_tp: bool
    residual: bool
    param_group: bool


def moe_of(args: Sequence[str]) -> Optional[Moe]:
    """The MoE setting of an argument list, None for a dense model: no --num-experts above 1, or
    --num-experts-switch (Megatron-LM's SwitchMLP, which replaces DeepSpeed's MoE: megatron/model/
    transformer.py:1062 at 4efb479d, not modelled), or values argparse would refuse (judged
    elsewhere)."""
    last = {}
    for parsed in split_args(list(args)):
        last[parsed.flag] = parsed.values
    if "--num-experts-switch" in last:
        return None
    try:
        experts = tuple(int(v) for v in last.get("--num-experts") or ("1",))
        interval = int((last.get("--expert-interval") or ("2",))[0])
        ep = int((last.get("--moe-expert-parallel-size") or ("1",))[0])
    except ValueError:
        return None
    if not experts or max(experts) <= 1:
        return None
    return Moe(experts, interval, ep, "--enable-expert-tensor-parallelism" in last,
               (last.get("--mlp-type") or ("standard",))[0] == "residual", "--create-moe-param-group" in last)


def experts_per_layer(moe: Moe, layers: int) -> Optional[List[int]]:
    """Experts of each layer, Megatron-DeepSpeed's get_num_experts_per_layer (megatron/model/
    transformer.py:1650-1660 at 4efb479d): layer n (from 1) is an MoE layer when n % interval == 0,
    with the one count given or the (n - 1) // interval-th of the list. None where upstream
    stops: a list whose length is not layers // interval (the assert at 1651), or an interval
    below 1."""
    if moe.interval < 1:
        return None
    moe_layers = layers // moe.interval
    if len(moe.experts) not in (1, moe_layers):
        return None
    counts = list(moe.experts) * moe_layers if len(moe.experts) == 1 else list(moe.experts)
    return [counts[(n - 1) // moe.interval] if n % moe.interval == 0 else 1 for n in range(1, layers + 1)]


def mlp_parameters(spec: Mapping[str, Any], hidden: int, ffn: int) -> int:
    """One MLP: GPT's fc1 and fc2 with biases (2hf + f + h), or the llama preset's SwiGLU without
    biases (3hf)."""
    return 3 * hidden * ffn if is_llama(spec) else 2 * hidden * ffn + ffn + hidden


def moe_layer_extra(spec: Mapping[str, Any], moe: Moe, hidden: int, ffn: int, experts: int) -> int:
    """Parameters one MoE layer adds to the dense layer it replaces: experts - 1 more MLPs, the
    gate (Linear(h, experts) without bias, deepspeed/moe/sharded_moe.py TopKGate), and for a
    residual MoE the dense MLP kept beside the experts and its Linear(h, 2) coefficient
    (deepspeed/moe/layer.py MoE.__init__)."""
    mlp = mlp_parameters(spec, hidden, ffn)
    extra = (experts - 1) * mlp + hidden * experts
    if moe.residual:
        extra += mlp + 2 * hidden + 2
    return extra


def moe_extra_parameters(spec: Mapping[str, Any], moe: Optional[Moe]) -> int:
    """Parameters the experts add to the dense model; 0 for a dense model or a layout upstream
    refuses."""
    if moe is None:
        return 0
    try:
        layers, hidden = int(spec["num_layers"]), int(spec["hidden_size"])
    except (KeyError, TypeError, ValueError):
        return 0
    per_layer = experts_per_layer(moe, layers)
    if per_layer is None:
        return 0
    ffn = int(spec.get("ffn_hidden_size") or default_ffn_hidden_size(spec, hidden))
    return sum(moe_layer_extra(spec, moe, hidden, ffn, n) for n in per_layer if n > 1)


def llama_layer_parameters(hidden: int, ffn: int) -> int:
    """Parameters of one LLaMA-style layer (--swiglu --disable-bias-linear --normalization
    rmsnorm): QKV and projection without biases 4h^2, SwiGLU's fc1 (h x 2f) and fc2 (f x h)
    3hf, two RMSNorm weights 2h."""
    return 4 * hidden * hidden + 3 * hidden * ffn + 2 * hidden


def model_flops_per_token(spec: Mapping[str, Any], derived: Mapping[str, Any]) -> float:
    """Forward + backward matmul FLOPs per token of the whole model (no recompute): 3 x forward,
    forward = 2 x (QKV and projection 4h^2 + MLP 2hf, or 3hf for SwiGLU) per layer + the
    attention scores and their product with V 2 x 2 s h per layer + the logits 2 h V. For GPT
    with f = 4h this is Megatron-DeepSpeed's 72 L h^2 (1 + s/6h + V/12Lh)."""
    hidden = int(spec["hidden_size"])
    layers = int(spec["num_layers"])
    seq = int(spec["seq_length"])
    ffn = int(derived.get("ffn_hidden_size") or default_ffn_hidden_size(spec, hidden))
    vocab = int(derived.get("padded_vocab_size") or KNOWN_VOCAB_SIZES["GPT2BPETokenizer"])
    mlp = (3 if is_llama(spec) else 2) * hidden * ffn
    forward = 2.0 * layers * (4 * hidden * hidden + mlp) + 4.0 * layers * seq * hidden + 2.0 * hidden * vocab
    return 3.0 * forward
