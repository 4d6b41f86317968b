# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The layout planner: every valid parallel layout of a job spec on a cluster, with its
per-GPU memory (the job validation's own estimate, ``memory``) and a step-time model, ranked.

A layout is TP, PP, DP (what is left of the world), the ZeRO stage, the micro batch and full
activation recompute; the model, the global batch, precision and flash attention stay the
spec's. Each candidate is judged by ``rules.validate``, the very rules of validate.yml: a
layout with a failing finding is not offered (the memory finding fails above the GPU's
memory), one with a warning above 90% of it is offered last.

The step-time model (per optimizer step, one pipeline stage, no overlap assumed):
  matmul    model FLOPs per GPU (Megatron-DeepSpeed's count: 3 passes, 4 with recompute) over
            the achieved rate R: R fitted on the H200 grid
            (docs/benchmarks.md); R scales with the GPU's measured (burn-in) or listed matmul rate;
  attention without flash attention, a cost per attention-score element (fitted, H200);
  elementwise the llama preset's unfused rotary and SwiGLU ops, a cost per s x b x h element
            and layer (fitted on g1-llama-m16 against g1-m16-b);
  p2p       PP: the activations and their gradients between stages, inter-node when a stage
            fills a node;
  TP        4 all-reduces of s b h 16-bit values per layer and micro batch (6 with recompute),
            at the intra-node all-reduce bus bandwidth: time = bytes x 2(t-1)/t / busbw;
  DP        the gradient reduce (ZeRO 0-2: reduce-scatter + all-gather = one all-reduce of the
            16-bit gradients; ZeRO-3 1.5x for the parameter gathers) at the intra-node bus
            bandwidth when the DP group fits in a node, else the inter-node one; ZeRO-2 reduces
            after every micro batch (ZeRO-1 after the last): (accumulation - 1) more bucket
            copies on HBM, and reduce-scatters when DP > 1 (ZERO2_GRAD_BYTES_PER_PARAM);
  bubble    the 1F1B schedule takes (m + PP - 1) micro-batch slots for m micro batches;
  other     a host launch floor per micro batch and layer, and a per-step cost per parameter
            (the optimizer step), both fitted on H200.
No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import math
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from . import memory as _job_memory
from . import rules as _job_rules
from . import spec as _job_spec
from .model import model_flops_per_token
from . import parity as _job_parity
from .schema import JobError, coerce

# GPUs the planner knows: dense bf16 peak and HBM bandwidth (NVIDIA's datasheets), memory, and
# what a burn-in measured or, lacking that, what this project measured (H200: KINDS.md's
# random-data matmul 790 TFLOP/s; NVLink all-reduce bus bandwidth). achieved_fraction is the
# share of that matmul rate a whole training step reaches: on the H200 fitted on our grid (the
# ACHIEVED_FRACTION below); on the A100 fitted on the ten rows of Narayanan et al. 2021 Table 1
# (bench/published_runs.py --fit; the other published rows are held out: docs/planning.md).
# The A100's is higher because the elementwise work folded into it moves memory, and an A100
# has more bandwidth per FLOP. "interconnect" figures are per-GPU inter-node bus bandwidth
# over InfiniBand HDR 200 Gb/s per GPU (8 x 25 GB/s; a ring all-reduce reaches about 20).
GPUS: Dict[str, Dict[str, float]] = {
    "H200": {"peak_tflops": 989.0, "memory_mib": 143771, "matmul_tflops": 790.0, "nvlink_busbw_gbps": 360.0,
             "hbm_gbps": 4800.0},
    "H100": {"peak_tflops": 989.0, "memory_mib": 81559, "matmul_tflops": 750.0, "nvlink_busbw_gbps": 360.0,
             "hbm_gbps": 3350.0},
    "A100-80GB": {"peak_tflops": 312.0, "memory_mib": 81920, "matmul_tflops": 270.0, "nvlink_busbw_gbps": 230.0,
                  "hbm_gbps": 2039.0, "achieved_fraction": 0.735},
    "A100-40GB": {"peak_tflops": 312.0, "memory_mib": 40960, "matmul_tflops": 270.0, "nvlink_busbw_gbps": 230.0,
                  "hbm_gbps": 1555.0, "achieved_fraction": 0.735},
}
# How far the time model has been off on measured runs of each GPU: predicted throughput over
# measured, less one (positive: optimistic), printed with every plan as its uncertainty. A100:
# the 16 published runs of bench/published/megatron_runs.json (fitted and held out alike); H200:
# our grid and side-by-side runs, step time -10% to +8% (docs/planning.md, "Measured error"); H100:
# the planner's first choice and runner-up for the GPT and the llama preset, fused and not, ten runs
# (bench/gpu/h100_picks, `mds_grid.py predict --gpu H100`): pessimistic by 3.1% to 5.9%.
MODEL_ERROR: Dict[str, Tuple[float, float, str]] = {
    "H100": (-0.059, -0.031, "our H100 runs"),
    "A100-80GB": (-0.121, 0.065, "16 published A100 runs"),
    "A100-40GB": (-0.121, 0.065, "16 published A100-80GB runs"),
    "H200": (-0.08, 0.10, "our H200 runs"),
}


def uncertainty(gpu: str) -> str:
    """The model's measured error for ``gpu``, as the plan's header states it."""
    if gpu not in MODEL_ERROR:
        return "the time model was never checked on a %s" % gpu
    low, high, what = MODEL_ERROR[gpu]
    return "the model's throughput was %+.1f%% to %+.1f%% of %s" % (100 * low, 100 * high, what)


DEFAULT_INTERNODE_BUSBW_GBPS = 20.0
# The inventory variable that names the cluster's GPUs (a key of GPUS).
GPU_MODEL_VAR = "megatron_gpu_model"


def gpu_key(name: Optional[str], memory_mib: Optional[int] = None) -> Optional[str]:
    """The planner's GPU (a key of GPUS) for a name as nvidia-smi reports it ('NVIDIA H200',
    'NVIDIA A100-SXM4-80GB', 'NVIDIA H100 80GB HBM3') or as an inventory writes it ('a100-80gb');
    the A100's memory size from the name, else from ``memory_mib``. None: not a GPU it knows."""
    text = re.sub(r"[^a-z0-9]", "", str(name or "").lower())
    for key in GPUS:
        if re.sub(r"[^a-z0-9]", "", key.lower()) == text:
            return key
    if "h200" in text:
        return "H200"
    if "h100" in text:
        return "H100"
    if "a100" in text:
        if "80gb" in text:
            return "A100-80GB"
        if "40gb" in text:
            return "A100-40GB"
        if memory_mib:
            return "A100-80GB" if int(memory_mib) > 60000 else "A100-40GB"
    return None


# Calibration on the H200 grid (bench/gpu/h200_grid.json, 1.23B GPT, grad-acc 4): the iteration
# time is linear in the micro batch from micro 4 to 32, 36.4 ms per sample (g1-m8 to g1-m24:
# 481 TFLOP/s of model FLOPs, 0.609 of the GPU's 790 TFLOP/s random-data matmul rate) plus 130
# ms, of which about 40 are the optimizer step (Adam over 1.23B parameters, about 20 bytes read
# and written each at 4.8 TB/s, plus the gradient norm: per parameter) and the rest 22.5 ms per
# micro batch (0.94 ms per layer: launches, small kernels). Micro 1 (g1-m1, 584 ms) is slower than
# that line: the host launches a micro batch no faster than 5.67 ms per layer.
H200_MATMUL_TFLOPS = 790.0
H200_HBM_GBPS = 4800.0
# Megatron's fused scale-mask-softmax and the attention dropout, in 16 bits, per score element:
# forward 4 (read, write) + 5 (dropout: read, write, 1-byte mask), backward 5 + 6 (softmax: read
# its output and the gradient, write one); a recomputed forward moves its 9 again. Counted, not
# measured, at 80% of the HBM bandwidth (what a streaming kernel reaches).
FUSED_SCORE_BYTES = 20.0
FUSED_SCORE_RECOMPUTE_BYTES = 9.0
HBM_EFFICIENCY = 0.8
ACHIEVED_FRACTION = 481.0 / H200_MATMUL_TFLOPS
STEP_SECONDS_PER_PARAM = 0.040 / 1229574144
MICRO_SECONDS_PER_LAYER = 0.0225 / 24
LAUNCH_FLOOR_SECONDS_PER_LAYER = (0.584 - 0.040) / 4 / 24
# g1-m4-nf against g1-m4: 853 ms more per 16 samples of 24 layers, 16 x 2048 x 2048 scores each.
UNFUSED_SCORE_SECONDS = 0.853 / (16 * 24 * 16 * 2048 * 2048)
# g1-llama-m16 against g1-m16-b: 161 ms more per 64 samples of 24 layers, s x h = 2048 x 2048.
LLAMA_ELEMENTWISE_SECONDS = 0.1615 / (64 * 24 * 2048 * 2048)
# megatron_job_fused_ops against the same job without, one H200 (bench/gpu/h200_fused, the runs
# call8-* and call9-*, which ran what ships): the step less the optimizer step took 0.972 and 0.964 of the time
# for the GPT (bias-GeLU) and 0.848 and 0.828 for the llama preset (rotary, SwiGLU); the run
# call7-* of an earlier version (0.968 and 0.831) is the check.
FUSED_OPS_FACTOR = {"gpt": 0.968, "llama": 0.838}
# ZeRO-3 against ZeRO-1 at DP 2, micro 16, two H200s (g2-dp2-z3-m16 against g2-dp2-z1-m16):
# 6.1% more time per iteration, which the gathers alone (priced in the DP part) do not explain.
ZERO3_HOOK_FRACTION = 0.061
# ZeRO-2 against ZeRO-1 (DeepSpeed 0.19.6, deepspeed/runtime/zero/stage_1_and_2.py). At DP 1 neither
# shards anything: each flat 16-bit group is cut into as many partitions as the data-parallel group has
# ranks (:472, get_data_parallel_partitions :1979-1984: `dp = dist.get_world_size(...)`, `base_size =
# total_num_elements // dp`), one partition holding all of it at DP 1, so the fp32 copy, Adam's moments
# and the gradients are whole on the rank under either stage and the memory estimate is the same. What
# still differs is when the gradients are reduced. ZeRO-2 reduces
# the gradients after every micro batch, ZeRO-1 only after the last one of the step
# (reduce_ready_partitions_and_remove_grads, :1777-1779: `partition_gradients or
# is_gradient_accumulation_boundary()`). Each reduction, also at DP 1, copies every 16-bit gradient
# into the contiguous bucket (:1240-1242), divides it by the DP size in place (:1446, a kernel even
# when that is 1) and copies it back into the partition's gradient buffer (:1752-1761 and
# copy_grads_in_partition, :1694-1696): read and write 2 bytes three times, 12 bytes per parameter.
# So ZeRO-2 adds (accumulation - 1) x 12 bytes per parameter of HBM traffic per step and, at DP > 1,
# (accumulation - 1) reduce-scatters of the 16-bit gradients. Counted, not fitted: at DP 1 it is
# 0.5% of the 1.23B GPT's step on an H200 (g1-m16-z2 measured 0.1% slower than g1-m16-b, 0.8%
# faster than g1-m16, whose two ZeRO-1 runs differ by 0.9%: below the noise of one run); at DP 2
# g2-dp2-z2-m16 and -m32 measured 1.4% and 1.0% slower than their ZeRO-1 rows.
ZERO2_GRAD_BYTES_PER_PARAM = 12.0
MEMORY_MARGIN = _job_memory.MEMORY_WARN_FRACTION
MICRO_CHOICES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64)
# Judging one candidate layout (normalize, every rule, the memory estimate) took about 2.5 ms on the
# controller (the default spec on 1 to 128 nodes x 8 GPUs: 384 to 736 candidates in 1.3 to 1.8 s),
# so this many answer within about 5 s; a larger search is refused at once, saying what to pin.
MAX_CANDIDATES = 2000


def divisors(number: int) -> List[int]:
    """The divisors of ``number``, ascending, in about sqrt(number) steps (a layer count such as
    1e10 once took minutes here)."""
    small = [d for d in range(1, math.isqrt(number) + 1) if number % d == 0]
    return small + [number // d for d in reversed(small) if d * d != number]


def allreduce_seconds(nbytes: float, ranks: int, busbw_gbps: float) -> float:
    """A ring all-reduce of ``nbytes`` over ``ranks`` at bus bandwidth ``busbw_gbps`` (GB/s, as
    nccl-tests and burn-in report it): algorithm time = bytes x 2(n-1)/n / busbw."""
    if ranks <= 1 or nbytes <= 0:
        return 0.0
    return nbytes * 2.0 * (ranks - 1) / ranks / (busbw_gbps * 1e9)


BURNIN_RATES = ("matmul_tflops", "nvlink_busbw_gbps", "internode_busbw_gbps")


def burnin_rates(report: Mapping[str, Any], source: str) -> Tuple[Dict[str, float], str]:
    """The rates a burn-in report measured (``calibration``: the slowest rank's matmul rate, the
    slowest node's all-reduce bus bandwidth, the world's across nodes), as hardware()'s
    overrides, and the sentence the plan's header carries. A burn-in on CPU ranks (the simulated
    cluster) or from before the calibration gives no rates and says why."""
    calibration = report.get("calibration") or {}
    devices = calibration.get("devices") or []
    if not calibration or not any(calibration.get(key) for key in BURNIN_RATES):
        return {}, "burn-in report %s not used: it has no calibration (a burn-in from before it)" % source
    if devices and all(str(d).startswith("cpu") for d in devices):
        return {}, "burn-in report %s not used: it ran on CPU ranks" % source
    rates = {key: float(calibration[key]) for key in BURNIN_RATES if calibration.get(key)}
    shown = {"matmul_tflops": "matmul %.0f TFLOP/s", "nvlink_busbw_gbps": "in-node all-reduce %.0f GB/s",
             "internode_busbw_gbps": "inter-node all-reduce %.1f GB/s"}
    return rates, "calibrated by the burn-in report %s (%s rank(s) on %s host(s)%s): %s" % (
        source, calibration.get("ranks", "?"), calibration.get("hosts", "?"),
        "" if report.get("passed", True) else ", a failed burn-in",
        ", ".join(shown[key] % value for key, value in rates.items()))


def hardware(gpu: Optional[str] = None, rates: Optional[Mapping[str, Any]] = None) -> Dict[str, float]:
    """The figures the time model uses: the GPU's listed ones, overridden by ``rates``
    (peak_tflops, matmul_tflops, memory_mib, nvlink_busbw_gbps, internode_busbw_gbps: what
    burnin.yml or bench/gpu/matmul.py and allreduce.py measured)."""
    name = gpu or "H200"
    if name not in GPUS:
        raise JobError("planner: GPU %r is not known; expected one of %s, or give peak_tflops, "
                       "matmul_tflops, memory_mib and nvlink_busbw_gbps" % (name, ", ".join(sorted(GPUS))))
    out = dict(GPUS[name])
    out["internode_busbw_gbps"] = DEFAULT_INTERNODE_BUSBW_GBPS
    for key, value in (rates or {}).items():
        if value is not None:
            out[key] = float(value)
    return out


def step_time(spec: Mapping[str, Any], derived: Mapping[str, Any], hw: Mapping[str, float],
              recompute: bool, nodes: int, gpus_per_node: int, virtual_stages: int = 1,
              selective: bool = False) -> Dict[str, float]:
    """Seconds per optimizer step by part (matmul, attention, elementwise, tp, launch, bubble,
    step, dp) and the total, for the busiest pipeline stage. ``recompute``: full recomputation
    (every layer's forward again); ``selective``: Megatron's selective recomputation (the
    attention core's forward again, Korthikanti et al. 2022); ``virtual_stages``: Megatron-LM's
    interleaved schedule, which divides the bubble (DeepSpeed's pipeline engine has none)."""
    tp = derived["tensor_parallel"]
    pp = derived["pipeline_parallel"]
    dp = derived["data_parallel_size"]
    micro = derived["micro_batch_size"]
    grad_acc = derived["gradient_accumulation_steps"]
    seq = int(spec["seq_length"])
    hidden = int(spec["hidden_size"])
    heads = int(spec["num_attention_heads"])
    layers_stage = int(math.ceil(int(spec["num_layers"]) / float(pp)))
    # Each rank of a DeepSpeed-Ulysses group holds seq / SP tokens (its all-to-alls are not modelled).
    sp = int(derived.get("sequence_parallel_size") or 1)
    tokens_micro = micro * seq / float(sp)
    flops_token = model_flops_per_token(spec, derived) * (4.0 / 3.0 if recompute else 1.0)
    if selective and not recompute:
        flops_token += 4.0 * int(spec["num_layers"]) * seq * hidden  # Q K^T and P V again
    rate = hw["matmul_tflops"] * 1e12 * hw.get("achieved_fraction", ACHIEVED_FRACTION)
    per_micro = {"matmul": tokens_micro * flops_token / (tp * pp) / rate}
    # The score ops, the llama elementwise ops and the optimizer step move memory: measured on
    # the H200, scaled by HBM bandwidth.
    scale = H200_HBM_GBPS / hw.get("hbm_gbps", H200_HBM_GBPS)
    passes = 2.0 if recompute else 1.0  # the unfused ops run again in the recomputed forward
    scores = micro * heads * seq * seq * layers_stage / tp / sp
    if spec.get("masked_softmax_fusion", True) is not False and not _job_memory._profile_unfuses_softmax(spec):
        # The fused kernel and the attention dropout, 16-bit: counted bytes, not measured.
        moved = FUSED_SCORE_BYTES + (FUSED_SCORE_RECOMPUTE_BYTES if recompute or selective else 0.0)
        attention = scores * moved / (hw.get("hbm_gbps", H200_HBM_GBPS) * 1e9 * HBM_EFFICIENCY)
    else:
        attention = scores * UNFUSED_SCORE_SECONDS * (1 + 0.5 * (passes - 1)) * scale
    per_micro["attention"] = 0.0 if spec.get("use_flash_attn") else attention
    sbh = tokens_micro * hidden * layers_stage / tp
    per_micro["elementwise"] = sbh * LLAMA_ELEMENTWISE_SECONDS * scale if spec.get("model_preset") == "llama" else 0.0
    tp_bytes = 2.0 * tokens_micro * hidden * layers_stage * (6 if recompute else 4)
    per_micro["tp"] = allreduce_seconds(tp_bytes, tp, hw["nvlink_busbw_gbps"])
    # Pipeline: each stage sends its micro batch's s b h 16-bit activations forward and their
    # gradients back; across nodes when one stage fills a node.
    link = hw["internode_busbw_gbps"] if tp * dp >= gpus_per_node and nodes > 1 else hw["nvlink_busbw_gbps"]
    per_micro["p2p"] = 2.0 * 2.0 * tokens_micro * hidden / tp / (link * 1e9) if pp > 1 else 0.0
    compute = ("matmul", "attention", "elementwise")
    factor = 1.0
    if spec.get("fused_ops"):
        # The compiled bias-GeLU, rotary and SwiGLU replace elementwise chains whose time the
        # fit folded into these parts (it was made on runs without them).
        factor *= FUSED_OPS_FACTOR["llama" if spec.get("model_preset") == "llama" else "gpt"]
    if int(spec.get("zero_stage") or 0) == 3:
        factor *= 1.0 + ZERO3_HOOK_FRACTION  # its parameter hooks run on every layer, even at DP 1
    for key in compute:
        per_micro[key] *= factor
    busy = sum(per_micro.values())
    floor = LAUNCH_FLOOR_SECONDS_PER_LAYER * layers_stage * (4.0 / 3.0 if recompute else 1.0)
    overhead = MICRO_SECONDS_PER_LAYER * layers_stage * (4.0 / 3.0 if recompute else 1.0)
    per_micro["launch"] = max(overhead, floor - busy)
    slot = busy + per_micro["launch"]
    parts = {key: value * grad_acc for key, value in per_micro.items()}
    parts["bubble"] = slot * (pp - 1) / float(virtual_stages)
    params_gpu = _job_memory.estimate_memory(spec, derived, {"stage": 1})["params_per_gpu"]
    parts["step"] = STEP_SECONDS_PER_PARAM * params_gpu * scale
    volume = 2.0 * params_gpu * (1.5 if int(spec.get("zero_stage") or 0) == 3 else 1.0)
    inside = tp * dp <= gpus_per_node or nodes == 1
    busbw = hw["nvlink_busbw_gbps"] if inside else hw["internode_busbw_gbps"]
    parts["dp"] = allreduce_seconds(volume, dp * sp, busbw)
    if int(spec.get("zero_stage") or 0) == 2 and grad_acc > 1:
        # ZeRO-2's reductions of the micro batches before the last (ZERO2_GRAD_BYTES_PER_PARAM): the
        # bucket copies on HBM, and a reduce-scatter (half an all-reduce) each when DP > 1.
        extra = grad_acc - 1
        parts["step"] += extra * ZERO2_GRAD_BYTES_PER_PARAM * params_gpu / (
            hw.get("hbm_gbps", H200_HBM_GBPS) * 1e9 * HBM_EFFICIENCY)
        parts["dp"] += extra * allreduce_seconds(2.0 * params_gpu, dp * sp, busbw) / 2.0
    parts["total"] = sum(parts.values())
    return parts


def _layout_spec(spec: Mapping[str, Any], layout: Mapping[str, Any]) -> Dict[str, Any]:
    raw = dict(spec)
    raw.update({
        "tensor_parallel": layout["tp"],
        "pipeline_parallel": layout["pp"],
        "no_pipeline_parallel": layout["pp"] == 1,
        "micro_batch_size": layout["micro"],
        "zero_stage": layout["zero"],
        "activation_checkpointing": layout["recompute"],
    })
    return _job_spec.normalize(raw)


def enumerate_layouts(spec: Mapping[str, Any], nodes: int, gpus_per_node: int,
                      keep: Optional[Mapping[str, Any]] = None,
                      zero_stages: Sequence[int] = (0, 1, 2, 3),
                      micro_choices: Sequence[int] = MICRO_CHOICES) -> Iterable[Dict[str, Any]]:
    """Candidate layouts before the rules: TP a divisor of the GPUs per node that divides the
    attention heads (Megatron asserts it), PP a divisor of the layers with TP x PP dividing the
    world, micro batches that divide global / DP; ``keep`` pins any of tp, pp, zero, micro,
    recompute (the supervisor re-plans for fewer nodes with TP and PP kept)."""
    keep = dict(keep or {})
    # DeepSpeed-Ulysses SP is the job's choice, kept as given: it takes its share of the world.
    sp = int(spec.get("ds_sequence_parallel_size") or 1)
    world = nodes * gpus_per_node
    heads = int(spec["num_attention_heads"])
    global_batch = int(spec["global_batch_size"])
    for tp in divisors(gpus_per_node):
        if heads % tp or ("tp" in keep and tp != keep["tp"]):
            continue
        if world % (tp * sp):
            continue
        # PP divides both the layers and what TP x SP leave of the world: walk the smaller of the two.
        layers = int(spec["num_layers"])
        for pp in divisors(world // (tp * sp)):
            if layers % pp or ("pp" in keep and pp != keep["pp"]):
                continue
            dp = world // (tp * pp * sp)
            for micro in micro_choices:
                if global_batch % (micro * dp) or ("micro" in keep and micro != keep["micro"]):
                    continue
                for zero in zero_stages:
                    if "zero" in keep and zero != keep["zero"]:
                        continue
                    for recompute in (False, True):
                        if "recompute" in keep and recompute != keep["recompute"]:
                            continue
                        yield {"tp": tp, "pp": pp, "dp": dp, "micro": micro, "zero": zero, "recompute": recompute}


# At equal predicted speed ZeRO-3 last, then the least memory: the model prices no ZeRO-3 parameter
# gathers at DP 1, and ZeRO-3 measured 7% slower than ZeRO-1 on two H200s (docs/benchmarks.md,
# g2-dp2-z3-m16 against g2-dp2-z1-m16). What is still equal goes by the layout itself, never by the
# order the candidates came in: the lower ZeRO stage first, then TP, PP, micro batch, no recompute.
# ZeRO-1 and ZeRO-2 tie only at DP 1 with one micro batch a step: both then reduce after every micro
# batch (the condition of stage_1_and_2.py:1778 holds for both) and shard nothing, so they run the
# same work, and the rule takes ZeRO-1, the reference every parity verdict is measured against (with
# accumulation the model prices ZeRO-2 behind, as one H100 measured it: 1.3-1.4% slower in all four
# pairs, docs/benchmarks.md). The plan's table states the rule under the rows that tie (tied()).
TIE_RULE = "ZeRO-3 last, less memory, lower ZeRO stage, TP, PP, micro batch, no recompute first"


def rank_key(row: Mapping[str, Any]) -> Tuple[Any, ...]:
    """The planner's order: fitting layouts first, then by predicted tokens/s, then TIE_RULE."""
    return (not row["fits"], -row["tokens_per_s"], row["zero"] == 3, row["memory_gib"],
            row["zero"], row["tp"], row["pp"], row["micro"], row["recompute"])


def tied(layouts: Sequence[Mapping[str, Any]]) -> List[List[int]]:
    """Runs of consecutive ranks (from 1) whose predicted tokens/s are equal and that fit alike:
    their order comes from TIE_RULE, not from the model."""
    runs: List[List[int]] = []
    for index in range(1, len(layouts)):
        before, row = layouts[index - 1], layouts[index]
        if before["fits"] == row["fits"] and math.isclose(before["tokens_per_s"], row["tokens_per_s"], rel_tol=1e-12):
            if runs and runs[-1][-1] == index:
                runs[-1].append(index + 1)
            else:
                runs.append([index, index + 1])
    return runs


def plan(spec: Mapping[str, Any], nodes: int, gpus_per_node: int, gpu_memory_mib: Optional[int] = None,
         gpu: Optional[str] = None, rates: Optional[Mapping[str, Any]] = None,
         keep: Optional[Mapping[str, Any]] = None, deepspeed_version: Optional[str] = None,
         padded_vocab_size: Optional[int] = None) -> Dict[str, Any]:
    """Every valid layout of ``spec`` on ``nodes`` x ``gpus_per_node`` GPUs, ranked: layouts
    within MEMORY_MARGIN of the GPU's memory first, then by predicted tokens per second.

    Returns {layouts: [{tp, pp, dp, micro, zero, recompute, grad_acc, memory_gib,
    memory_fraction, step_s, tokens_per_s, mfu, parts, fits, spec}], rejected: {reason: count},
    hardware}. ``padded_vocab_size`` replaces the vocabulary the spec implies (a vocab file
    the spec cannot read)."""
    # The GPUs per node may come from the task rather than the spec: the same bounds as the spec's.
    gpus_per_node = coerce("gpus_per_node", gpus_per_node)
    base = dict(spec, gpus_per_node=gpus_per_node)
    candidates = list(enumerate_layouts(base, nodes, gpus_per_node, keep))
    searched = len(candidates)
    if searched > MAX_CANDIDATES:
        raise JobError(
            "the layout search of %d node(s) x %d GPUs has %d candidates, more than the %d judged within about 5 s "
            "(%d layers, global batch %d): pin part of the layout with keep (plan.yml: -e '{\"plan_keep\": {\"tp\": 8, "
            "\"zero\": 1}}'), or choose a layer count and global batch with fewer divisors"
            % (nodes, gpus_per_node, searched, MAX_CANDIDATES, int(spec["num_layers"]), int(spec["global_batch_size"])))
    hw = hardware(gpu, rates)
    memory_mib = int(gpu_memory_mib or hw["memory_mib"])
    hw["memory_mib"] = memory_mib
    cluster = {"nodes": nodes, "gpus_per_node": gpus_per_node, "gpu_memory_mib": memory_mib}
    layouts: List[Dict[str, Any]] = []
    rejected: Dict[str, int] = {}
    # Per failing check, how many judged layouts it refused and its first finding (its fix): a
    # check that refused every judged layout is what the job must change, named first when
    # nothing is ranked (refusal()).
    judged = 0
    refusing: Dict[str, int] = {}
    findings_of: Dict[str, Dict[str, str]] = {}
    parity_rules = set(_job_parity.rules())
    for layout in candidates:
        try:
            job = _layout_spec(base, layout)
        except JobError as exc:
            rejected[str(exc)] = rejected.get(str(exc), 0) + 1
            continue
        # A layout must train the same mathematics as the others (_job.parity): each way it departs
        # from DP with ZeRO-1 agrees, on a GPU where a GPU can compare it (ZeRO-0/2/3, recompute, and
        # the job's fused ops, which every layout of it runs), on CPU for TP and PP. Measured to differ
        # (ZeRO-0 in bf16, ZeRO-3 even at weight decay 0) leaves it out, with the reason; a job that
        # asks for either still gets the rule's warning.
        why = _job_parity.unproven(dict(layout, fused_ops=job["fused_ops"]))
        if why:
            rejected[why] = rejected.get(why, 0) + 1
            continue
        findings = _job_rules.validate(job, None, cluster, None, deepspeed_version)
        failed = [f for f in findings if f["status"] == "fail"
                  or (f["check"] in parity_rules and f["status"] == "warn")]
        judged += 1
        for check in sorted({f["check"] for f in failed}):
            refusing[check] = refusing.get(check, 0) + 1
            findings_of.setdefault(check, next(f for f in failed if f["check"] == check))
        if failed:
            reason = failed[0]["check"]
            rejected[reason] = rejected.get(reason, 0) + 1
            continue
        derived = dict(_job_spec.derive(job, nodes, gpus_per_node))
        if padded_vocab_size:
            derived["padded_vocab_size"] = padded_vocab_size
        zero = {"stage": job["zero_stage"],
                "offload_optimizer": job["zero_offload_optimizer"] != "none",
                "offload_param": job["zero_offload_param"] != "none",
                "reduce_bucket_size": job["zero_reduce_bucket_size"],
                "allgather_bucket_size": job["zero_allgather_bucket_size"]}
        memory = _job_memory.estimate_memory(job, derived, zero, deepspeed_version,
                                             "full" if layout["recompute"] else None)
        fraction = memory["total"] / (memory_mib * float(_job_memory.MIB))
        if fraction > 1.0:
            rejected["memory per GPU"] = rejected.get("memory per GPU", 0) + 1
            continue
        parts = step_time(job, derived, hw, layout["recompute"], nodes, gpus_per_node)
        tokens = derived["global_batch_size"] * int(job["seq_length"]) / parts["total"]
        model_flops = model_flops_per_token(job, derived) * tokens / (nodes * gpus_per_node)
        layouts.append(dict(
            layout, grad_acc=derived["gradient_accumulation_steps"],
            memory_gib=memory["total"] / float(_job_memory.GIB), memory_fraction=fraction,
            fits=fraction <= MEMORY_MARGIN, step_s=parts["total"], tokens_per_s=tokens,
            mfu=model_flops / (hw["peak_tflops"] * 1e12), parts=parts, spec=job,
        ))
    layouts.sort(key=rank_key)
    refused_by = [dict(findings_of[check], layouts=count) for check, count in sorted(refusing.items())
                  if count == judged]
    return {"layouts": layouts, "rejected": rejected, "hardware": hw, "judged": judged, "refused_by": refused_by}


def refusal(result: Mapping[str, Any], nodes: int, gpus_per_node: int) -> Optional[str]:
    """The first line of a plan that ranks nothing: the checks that refused every layout the rules
    judged, each with its finding and fix (the job must change that, not the cluster); else the
    reasons that refused the most; else, when layouts were valid but none within MEMORY_MARGIN,
    the memory. None when a layout fits."""
    if any(row["fits"] for row in result["layouts"]):
        return None
    where = "%d node(s) x %d GPUs" % (nodes, gpus_per_node)
    memory = "no layout of %s fits within %d%% of the GPU memory" % (where, int(100 * MEMORY_MARGIN))
    if result["layouts"]:
        return memory
    blocking = [f for f in result.get("refused_by") or [] if f["check"] != "memory per GPU"]
    if blocking:
        return "no layout of %s passes the job rules: %s" % (where, "; ".join(
            "'%s' refused all %d layout(s) the rules judged (found %s, expected %s): %s" % (
                f["check"], f["layouts"], f["found"], f["expected"], f["fix"] or "see validate.yml")
            for f in blocking))
    if result.get("refused_by"):
        return memory
    top = sorted(result["rejected"].items(), key=lambda kv: -kv[1])[:3]
    return "no layout of %s passes the job rules; most refused by: %s" % (
        where, ", ".join("%s (%d)" % kv for kv in top) or "nothing was enumerated")


def best_layout(spec: Mapping[str, Any], nodes: int, gpus_per_node: int,
                keep_model_parallel: bool = True, **kwargs: Any) -> Optional[Dict[str, Any]]:
    """The first-ranked layout that fits with margin, for a re-plan on ``nodes`` nodes: with
    ``keep_model_parallel`` the spec's TP and PP stay (a checkpoint of that shape loads without
    conversion) and the global batch always stays; None when no layout fits."""
    keep = {}
    if keep_model_parallel:
        keep = {"tp": int(spec.get("tensor_parallel") or 1), "pp": int(spec.get("pipeline_parallel") or 1)}
    ranked = plan(spec, nodes, gpus_per_node, keep=keep, **kwargs)["layouts"]
    for row in ranked:
        if row["fits"]:
            return row
    return None


SPEC_KEYS = ("tensor_parallel", "pipeline_parallel", "no_pipeline_parallel", "micro_batch_size",
             "global_batch_size", "zero_stage", "activation_checkpointing", "model_preset")


def layout_vars(row: Mapping[str, Any]) -> Dict[str, Any]:
    """The megatron_job_* variables of a ranked layout, for group_vars."""
    return {"megatron_job_" + key: row["spec"][key] for key in SPEC_KEYS}


def prediction(row: Mapping[str, Any], gpus: int, gpu: str, calibrated: Optional[str] = None) -> Dict[str, Any]:
    """What status.yml compares a running job with: the chosen layout, its predicted tokens/s per
    GPU, memory and MFU, the GPU, and the model's measured error on that GPU."""
    error = MODEL_ERROR.get(gpu)
    return {
        "layout": describe(row), "tp": row["tp"], "pp": row["pp"], "dp": row["dp"], "micro": row["micro"],
        "zero": row["zero"], "recompute": row["recompute"], "gpu": gpu, "gpus": gpus,
        "tokens_per_gpu_per_s": round(row["tokens_per_s"] / float(gpus), 1),
        "step_s": round(row["step_s"], 3), "memory_gib": round(row["memory_gib"], 1), "mfu": round(row["mfu"], 4),
        "model_error": list(error[:2]) if error else None, "calibration": calibrated,
    }


def against(status: Mapping[str, Any], predicted: Mapping[str, Any], spec: Mapping[str, Any]) -> Optional[str]:
    """status.yml's line for a running job against the plan's prediction: measured tokens/s per
    GPU over predicted, with the model's error on the GPU for scale; or why the two cannot be
    compared (another layout than the plan's). None when the job has logged no throughput."""
    measured = status.get("tokens_per_gpu_per_second")
    if measured in (None, "") or not predicted.get("tokens_per_gpu_per_s"):
        return None
    layout = (int(spec.get("tensor_parallel") or 1), int(spec.get("pipeline_parallel") or 1),
              int(spec.get("micro_batch_size") or 1), int(spec.get("zero_stage") or 0))
    planned = (predicted.get("tp"), predicted.get("pp"), predicted.get("micro"), predicted.get("zero"))
    if layout != planned:
        return "plan: not compared, the job runs TP%d PP%d mb%d Z%d and the plan chose %s" % (
            layout + (predicted.get("layout"),))
    # As MODEL_ERROR counts it: predicted over measured, less one (positive: the plan was optimistic).
    error = float(predicted["tokens_per_gpu_per_s"]) / float(measured) - 1
    band = predicted.get("model_error")
    return "plan: %s predicted %.1f tokens/s per GPU, measured %.1f: prediction %+.1f%%%s" % (
        predicted.get("layout"), float(predicted["tokens_per_gpu_per_s"]), float(measured), 100 * error,
        " (on measured %s runs it was %+.1f%% to %+.1f%%)" % (predicted.get("gpu"), 100 * band[0], 100 * band[1])
        if band else "")


def describe(row: Mapping[str, Any]) -> str:
    return "TP%d PP%d DP%d Z%d mb%d%s" % (row["tp"], row["pp"], row["dp"], row["zero"], row["micro"],
                                          " rc" if row["recompute"] else "")


def table(result: Mapping[str, Any], limit: int = 20) -> List[str]:
    """The ranked layouts as text lines (at most 160 columns)."""
    hw = result["hardware"]
    lines = ["%-4s %-24s %6s %11s %8s %9s %12s %6s  %s" % (
        "rank", "layout", "accum", "memory GiB", "of GPU", "step s", "tokens/s", "MFU", "time s: matmul/attn/elem/tp+p2p/dp/bubble/other")]
    for index, row in enumerate(result["layouts"][:limit], 1):
        parts = row["parts"]
        lines.append("%-4d %-24s %6d %11.1f %7.0f%%%s %9.2f %12s %5.1f%%  %s" % (
            index, describe(row), row["grad_acc"], row["memory_gib"], 100 * row["memory_fraction"],
            " " if row["fits"] else "!", row["step_s"], "{:,.0f}".format(row["tokens_per_s"]), 100 * row["mfu"],
            "/".join("%.2f" % v for v in [parts[k] for k in ("matmul", "attention", "elementwise")]
                     + [parts["tp"] + parts["p2p"]] + [parts[k] for k in ("dp", "bubble")] + [parts["launch"] + parts["step"]])))
    lines = [line[:160] for line in lines]
    runs = [run for run in tied(result["layouts"][:limit]) if len(run) > 1]
    if runs:
        lines += _wrapped("equal predictions, ordered by the tie rule (%s): ranks %s" % (
            TIE_RULE, ", ".join("=".join(str(rank) for rank in run) for run in runs)))
    lines += _wrapped("%d valid layouts (! = above %d%% of %.1f GiB); rejected by the job rules: %s" % (
        len(result["layouts"]), int(100 * MEMORY_MARGIN), hw["memory_mib"] / 1024.0,
        ", ".join("%s %d" % (k, v) for k, v in sorted(result["rejected"].items(), key=lambda kv: -kv[1])) or "none"))
    return lines


def _wrapped(text: str, width: int = 160) -> List[str]:
    """``text`` in lines of at most ``width`` columns, cut after a comma rather than losing its end."""
    lines = []
    while len(text) > width:
        cut = text.rfind(", ", 0, width)
        cut = cut + 1 if cut > 0 else width
        lines.append(text[:cut])
        text = "  " + text[cut:].lstrip()
    lines.append(text)
    return lines
