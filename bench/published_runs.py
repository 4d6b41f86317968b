# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the planner's time model against published A100 training runs.

bench/published/megatron_runs.json holds Megatron-LM and Megatron-DeepSpeed runs on A100-80GB
clusters with their sources (Narayanan et al. 2021 Table 1, Korthikanti et al. 2022, the
Megatron-LM README's GPT-3 175B, BigScience's BLOOM 176B). For each row this script builds the
job spec, runs ``_job.plan.step_time`` with the row's layout, recomputation, interleaved stages
and inter-node bandwidth, and prints the predicted iteration time and per-GPU TFLOP/s beside the
published ones, with the error. TFLOP/s are counted as the sources count them: Narayanan et al.'s
eq. 3, 96 B s l h^2 (1 + s/6h + V/16lh), which includes the recomputed forward; Korthikanti et
al.'s rows (selective recomputation) are compared by iteration time.

With --fit it also prints the A100 matmul fraction that fits the rows marked ``fit`` best (the
least squares of the log error), which is ``_job.plan.GPUS["A100-80GB"]["achieved_fraction"]``:

    python bench/published_runs.py [--fit] [--json]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Any, Dict, List, Mapping, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROWS = os.path.join(HERE, "published", "megatron_runs.json")


def _imports():
    sys.path.insert(0, os.path.join(ROOT, ".collections"))
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import plan, spec  # noqa: E402
    return plan, spec


def load(path: str = ROWS) -> List[Dict[str, Any]]:
    with open(path) as handle:
        return json.load(handle)["rows"]


def eq3_flops(row: Mapping[str, Any]) -> float:
    """FLOPs of one iteration as Narayanan et al. count them (eq. 3, with recomputation)."""
    b, s = row["global_batch_size"], row["seq_length"]
    layers, h, vocab = row["num_layers"], row["hidden_size"], row["padded_vocab_size"]
    return 96.0 * b * s * layers * h * h * (1 + s / (6.0 * h) + vocab / (16.0 * layers * h))


def predict(row: Mapping[str, Any], achieved_fraction: Optional[float] = None) -> Dict[str, Any]:
    """The predicted iteration (parts and total, seconds), per-GPU eq. 3 TFLOP/s, and the error
    against what the row publishes (positive: the model is optimistic)."""
    plan, spec = _imports()
    nodes = row["gpus"] // row["gpus_per_node"]
    job = spec.normalize({
        "num_layers": row["num_layers"], "hidden_size": row["hidden_size"],
        "num_attention_heads": row["num_attention_heads"], "seq_length": row["seq_length"],
        "max_position_embeddings": row["seq_length"], "global_batch_size": row["global_batch_size"],
        "micro_batch_size": row["micro_batch_size"], "tensor_parallel": row["tensor_parallel"],
        "pipeline_parallel": row["pipeline_parallel"], "no_pipeline_parallel": row["pipeline_parallel"] == 1,
        "zero_stage": 1 if row["framework"] == "Megatron-DeepSpeed" else 0, "precision": row["precision"],
        "activation_checkpointing": row["recompute"] == "full", "gpus_per_node": row["gpus_per_node"],
        "tokenizer_type": "NullTokenizer", "vocab_size": row["padded_vocab_size"],
    })
    derived = dict(spec.derive(job, nodes, row["gpus_per_node"]))
    derived["padded_vocab_size"] = row["padded_vocab_size"]
    rates: Dict[str, Any] = {"internode_busbw_gbps": row["internode_busbw_gbps"]}
    if achieved_fraction is not None:
        rates["achieved_fraction"] = achieved_fraction
    hw = plan.hardware(row["gpu"], rates)
    parts = plan.step_time(job, derived, hw, row["recompute"] == "full", nodes, row["gpus_per_node"],
                           virtual_stages=int(row.get("virtual_stages") or 1),
                           selective=row["recompute"] == "selective")
    # eq. 3 counts a full recomputation: no TFLOP/s figure for the selective rows.
    tflops = None if row["recompute"] == "selective" else eq3_flops(row) / parts["total"] / row["gpus"] / 1e12
    published = row["published"]
    if "iteration_s" in published and row["id"].split("-")[0] != "megatron":
        error = published["iteration_s"] / parts["total"] - 1
        basis = "iteration %.2f s" % published["iteration_s"]
    else:
        error = tflops / published["tflops_per_gpu"] - 1
        basis = "%.1f TFLOP/s" % published["tflops_per_gpu"]
    return {"id": row["id"], "role": row["role"], "step_s": parts["total"], "tflops_per_gpu": tflops,
            "error": error, "published": basis, "parts": parts,
            "layout": "TP%d PP%d DP%d mb%d" % (derived["tensor_parallel"], derived["pipeline_parallel"],
                                               derived["data_parallel_size"], derived["micro_batch_size"])}


def fit(rows: List[Mapping[str, Any]]) -> float:
    """The achieved fraction in [0.40, 0.95] (steps of 0.005) with the least sum of squared log
    errors over the rows marked fit."""
    best = None
    for step in range(80, 191):
        fraction = step * 0.005
        loss = sum(math.log1p(predict(row, fraction)["error"]) ** 2 for row in rows if row["role"] == "fit")
        if best is None or loss < best[0]:
            best = (loss, fraction)
    return round(best[1], 3)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--fit", action="store_true", help="also print the best A100 matmul fraction")
    parser.add_argument("--json", action="store_true", help="print the predictions as JSON")
    args = parser.parse_args(argv)
    rows = load()
    results = [predict(row) for row in rows]
    if args.json:
        sys.stdout.write(json.dumps(results, indent=1) + "\n")
        return 0
    sys.stdout.write("%-34s %-5s %-20s %10s %11s  %-20s %7s\n" % (
        "row", "role", "layout", "step s", "TFLOP/s", "published", "error"))
    for result in results:
        tflops = "-" if result["tflops_per_gpu"] is None else "%.1f" % result["tflops_per_gpu"]
        sys.stdout.write("%-34s %-5s %-20s %10.2f %11s  %-20s %+6.1f%%\n" % (
            result["id"], result["role"], result["layout"], result["step_s"], tflops,
            result["published"], 100 * result["error"]))
    for role in ("fit", "check"):
        errors = [abs(r["error"]) for r in results if r["role"] == role]
        sys.stdout.write("%s rows: %d, largest error %.1f%%, mean absolute %.1f%%\n" % (
            role, len(errors), 100 * max(errors), 100 * sum(errors) / len(errors)))
    if args.fit:
        sys.stdout.write("best A100 achieved fraction on the fit rows: %.3f\n" % fit(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
