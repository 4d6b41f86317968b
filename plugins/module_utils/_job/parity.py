# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Layouts that train the same: what was measured of each way a layout departs from the
reference (data parallel with ZeRO-1, no recompute), on CPU and on a GPU, and the planner's test.

A layout the planner ranks must train the same mathematics as the reference: its loss after N
iterations must agree with ZeRO-1's within the spread of one layout across seeds (issue 25,
item 7). Each departure carries its CPU verdict (``verdict``, ``evidence``) and, where one was
made, its GPU measurement (``gpu``: verdict, figures, where). The GPU verdict is the one that
counts (``verdict()``): the CPU runs are fp32 or bf16 emulated on a small model, the jobs run in
bf16 on GPUs, and where the two were both measured they have disagreed (ZeRO-3 at weight decay 0:
ZeRO-1's losses to 1e-6 on CPU, 0.051 above them on an H100). The planner ranks a layout only
when every departure it makes agrees: on a GPU for those a GPU run can compare from ZeRO-1's own
weights (GPU_DECIDES: a GPU parity never measured, or not agreeing, leaves the layout out with the
reason), on CPU for tensor and pipeline parallelism (``gpu_observed`` keeps what a GPU showed). RULE (judged per job
by a validation rule: the cases that depend on the DeepSpeed release, the precision or the
Megatron-DeepSpeed era) is a CPU verdict; the validation rules still warn a job that asks for one.

The figures are in docs/benchmarks.md: "Layouts that train the same" (the real pretrain_gpt.py
on CPU, fp32 and bf16, three seeds; bench/layout_parity.py, bench/layout_parity_cpu.json), "ZeRO-0
against ZeRO-1" (bench/zero0_parity.py on CPU and one H200), the H200 grid
(bench/gpu/h200_grid.json) and "ZeRO-3 and ZeRO-0 against ZeRO-1 on a GPU". No Ansible imports:
unit-tested alone.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

AGREES = "agrees"
DIFFERS = "differs"
RULE = "rule"
# A CPU verdict that was never made: the departure cannot run there (the fused ops are compiled for
# the GPU), so only its GPU row can admit it.
NOT_MEASURED = "not measured"

PARITY: Dict[str, Dict[str, Any]] = {
    "tensor_parallel": {
        "verdict": AGREES,
        "evidence": "pretrain_gpt.py on CPU, 3 seeds, 50 iterations: TP 2 and TP 2 x DP 2 within the reference's "
                    "seed range (TP 2 x PP 2 too)",
        "gpu_observed": "g2-tp2-m16 (2 x H200, lm loss 7.848 at iterations 5-8) against g1-m16 (one H200, "
                        "7.943): not a parity run, TP 2 draws its weight shards from other random streams",
    },
    "pipeline_parallel": {
        "verdict": AGREES,
        "evidence": "pretrain_gpt.py on CPU, 3 seeds, 50 iterations: PP 2 and PP 2 x DP 2 within the reference's "
                    "seed range (TP 2 x PP 2 too)",
        "gpu_observed": "g2-pp2-m16 (2 x H200, bf16, 1.23B GPT, global batch 64): lm loss 8.551 at iterations 5-8 "
                        "against 7.943 for g1-m16: not a parity run, on a GPU Megatron seeds each pipeline stage "
                        "with seed + 100 x its rank (megatron/initialize.py:286-287 at 4efb479d), so the second "
                        "stage starts from other weights; on CPU the seed is not offset and PP 2 agrees",
    },
    "zero_0": {
        "verdict": RULE,
        "rule": "ZeRO-0 optimizer trains like ZeRO-1",
        "evidence": "fp32: the same losses as ZeRO-1 to the last digit (pretrain_gpt.py on CPU); bf16/fp16: the "
                    "optimizer wrapper DeepSpeed picks decides (bench/zero0_parity.py, CPU and one H200)",
        "gpu": {
            "verdict": DIFFERS,
            "evidence": "bf16 leaves ZeRO-1 at the first step with a learning rate: 1.23B GPT +0.155 at iteration 5 "
                        "(one H100); lm loss 8.595 against 7.943 at iterations 5-8 (g1-m16-z0, one H200); the "
                        "128-wide model +0.110 at step 8 (bench/zero0_parity.py, one H200). fp32 not measured on a GPU",
            "where": "one H100 (issue 42); one H200 (bench/gpu/h200_grid.json, bench/zero0_parity.py)",
        },
    },
    "zero_2": {
        "verdict": AGREES,
        "evidence": "the same losses as ZeRO-1 to the last digit: pretrain_gpt.py on CPU (fp32, 3 seeds) and on "
                    "one H200 (bf16, g1-m16-z2)",
        "gpu": {
            "verdict": AGREES,
            "evidence": "bf16, 1.23B GPT, lm loss at iterations 5-8: 7.943276 for ZeRO-1 and ZeRO-2 at DP 1 (g1-m16, "
                        "g1-m16-z2); 7.828142 / 7.828236 (DP 2, micro 16) and 7.834439 / 7.834479 (DP 2, micro 32)",
            "where": "one H200 and 2 x H200, bench/gpu/h200_grid.json",
        },
    },
    "zero_3": {
        "verdict": RULE,
        "rule": "ZeRO-3 keeps weight decay",
        "evidence": "head era: every parameter loses its weight decay under deepspeed.zero.Init (1.40 below ZeRO-1 "
                    "at iteration 50 on CPU; ZeRO-1 at --weight-decay 0 gives ZeRO-3's losses to 1e-6)",
        "gpu": {
            "verdict": DIFFERS,
            "evidence": "also at weight decay 0: 1.23B GPT, bf16, 30 iterations: ZeRO-3 starts from other weights "
                        "(another loss at iteration 1) and ends 0.051 above ZeRO-1 at weight decay 0, where two "
                        "ZeRO-1 runs differ by 0.019",
            "where": "one H100 (issue 42)",
        },
    },
    "recompute": {
        "verdict": AGREES,
        "evidence": "the same losses with and without full recompute: Megatron's own on CPU (fp32, 3 seeds), "
                    "DeepSpeed's on one H200 (bf16, g1-m16 and g1-m16-rc: 7.943276 both)",
        "gpu": {
            "verdict": AGREES,
            "evidence": "DeepSpeed's full recompute, bf16, 1.23B GPT, lm loss at iterations 5-8: 7.943276 with and "
                        "without (g1-m16-rc, g1-m16); 7.828135 against 7.828142 at DP 2 (g2-dp2-z1-m16-rc)",
            "where": "one H200 and 2 x H200, bench/gpu/h200_grid.json",
        },
    },
    "fused_ops": {
        "verdict": NOT_MEASURED,
        "evidence": "not run on CPU: megatron_ds_fused_ops replaces CUDA paths (bias-GeLU, rotary, SwiGLU)",
        "gpu": {
            "verdict": AGREES,
            "evidence": "bf16, lm loss at iteration 8 with and without megatron_job_fused_ops, the renderer's files: "
                        "1.23B GPT ZeRO-1 7.9116 / 7.9119 and ZeRO-2 7.9119 / 7.9119, llama preset ZeRO-1 7.8268 and "
                        "7.8250 / 7.8253 and 7.8286 (two runs each: the unfused pair differs by 0.0032) and ZeRO-2 7.8251 / "
                        "7.8257 (one H100, h1-*); GPT recompute 7.941456 / 7.943276, llama recompute 7.825867 / "
                        "7.825577 (one H200, call9-*). 8 iterations, as the ZeRO-2 and recompute verdicts",
            "where": "one H100 (bench/gpu/h100_picks) and one H200 (bench/gpu/h200_fused)",
        },
    },
}


def departures(layout: Mapping[str, Any]) -> List[str]:
    """How ``layout`` ({tp, pp, zero, recompute, fused_ops}) departs from data parallel with ZeRO-1."""
    out = []
    if int(layout.get("tp") or 1) > 1:
        out.append("tensor_parallel")
    if int(layout.get("pp") or 1) > 1:
        out.append("pipeline_parallel")
    zero = int(layout.get("zero") if layout.get("zero") is not None else 1)
    if zero != 1:
        out.append("zero_%d" % zero)
    if layout.get("recompute"):
        out.append("recompute")
    # The job's compiled elementwise kernels are not the planner's choice but change the arithmetic
    # of every layout it ranks: they need a verdict like any other departure.
    if layout.get("fused_ops"):
        out.append("fused_ops")
    return out


def verdict(row: Mapping[str, Any]) -> Tuple[str, str]:
    """A departure's verdict and where it was measured: the GPU's where one was made, over the CPU's."""
    gpu = row.get("gpu")
    if gpu:
        return gpu["verdict"], gpu.get("where", "a GPU")
    return row.get("verdict", ""), "CPU"


# The departures a GPU run can compare with ZeRO-1 from the same initial weights: their GPU verdict
# decides, and without one they are not ranked. TP and PP cannot be compared that way by design (each
# TP shard and, on a GPU, each pipeline stage draws its weights from its own random stream): their
# CPU parity, three seeds within the reference's spread, decides, and a GPU run is an observation.
GPU_DECIDES = frozenset({"zero_0", "zero_2", "zero_3", "recompute", "fused_ops"})


def unproven(layout: Mapping[str, Any], table: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Optional[str]:
    """Why ``layout`` may not be ranked, or None: a departure with no parity measurement; one that a
    GPU can compare (GPU_DECIDES) without a GPU verdict of AGREES (issue 42: what a GPU measured wins);
    TP or PP whose CPU verdict is not AGREES."""
    table = PARITY if table is None else table
    for name in departures(layout):
        row = table.get(name)
        what = name.replace("_", " ")
        if row is None:
            return "loss parity with ZeRO-1 not measured (%s)" % what
        if name in GPU_DECIDES and not row.get("gpu"):
            return "GPU loss parity with ZeRO-1 not measured (%s)" % what
        if verdict(row)[0] != AGREES:
            return "loss differs from ZeRO-1%s (%s)" % (" on a GPU" if row.get("gpu") else "", what)
    return None


def rules() -> List[str]:
    """The validation checks whose warning keeps a layout out of the planner's ranking: those of the
    departures whose verdict (the GPU's over the CPU's) is RULE. None today: each RULE row was
    measured to differ on a GPU, which leaves its layouts out before any rule is asked."""
    return sorted(row["rule"] for row in PARITY.values() if verdict(row)[0] == RULE)
