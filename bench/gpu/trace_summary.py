# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a training step's GPU time goes, from a PyTorch profiler trace.

    python3 bench/gpu/trace_summary.py TRACE.pt.trace.json[.gz] [--top 15]

Reads the Chrome-trace JSON that torch.profiler's tensorboard_trace_handler writes (what
Megatron-DeepSpeed's --profile pt and profile.yml produce), sums every GPU kernel's duration
by category (matmul, attention, elementwise, normalization, communication, optimizer, ...)
and prints each category's share of the kernel time, the GPU's busy fraction over the traced
span (kernels on any stream, overlaps merged) and the top kernels by total time.
"""
import argparse
import gzip
import json
import re
import sys
from typing import Any, Dict, Iterable, List, Mapping, Sequence, Tuple

# First match wins; patterns are matched against the lower-cased kernel name.
CATEGORIES: Sequence[Tuple[str, str]] = (
    ("communication", r"nccl|allreduce|all_reduce|reduce_scatter|allgather"),
    ("attention", r"flash|fmha|attention|sdpa|cudnn_generated_fort_native_sdpa"),
    ("matmul", r"gemm|nvjet|cutlass|xmma|cublas|matmul|wgmma"),
    ("normalization", r"layer_?norm|layernorm|rms_?norm|cuapplylayernorm|cucomputegradinput|cucomputepartgradgammabeta|cucomputegradgammabeta"),
    ("optimizer", r"multi_tensor|adam|\blamb\b"),  # not the "lambda" of templated kernels
    ("softmax/loss", r"softmax|cross_entropy|nll_loss|log_softmax"),
    ("dropout", r"dropout|fused_dropout"),
    ("reduction", r"reduce_kernel|reduction"),
    ("copy", r"copy|cat_|catarray|transpose|memcpy|memset|fill"),
    ("elementwise", r"elementwise|vectorized|unrolled|pointwise|gelu|tanh|activation"),
)


def category(name: str) -> str:
    lowered = name.lower()
    for label, pattern in CATEGORIES:
        if re.search(pattern, lowered):
            return label
    return "other"


def kernel_events(trace: Mapping[str, Any]) -> List[Dict[str, Any]]:
    """The trace's GPU kernel events (complete events with a duration)."""
    events = trace.get("traceEvents", []) if isinstance(trace, Mapping) else []
    return [e for e in events
            if isinstance(e, Mapping) and str(e.get("cat", "")).lower() in ("kernel", "gpu_memcpy", "gpu_memset")
            and e.get("ph") == "X" and isinstance(e.get("dur"), (int, float))]


def busy_time(intervals: Iterable[Tuple[float, float]]) -> float:
    """Total length of the union of [start, end) intervals."""
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


def summarize(trace: Mapping[str, Any], top: int = 15) -> Dict[str, Any]:
    """Kernel time by category, GPU busy fraction and the top kernels. Times in microseconds."""
    kernels = kernel_events(trace)
    by_cat: Dict[str, float] = {}
    by_name: Dict[str, List[float]] = {}
    for e in kernels:
        name = str(e.get("name", "?"))
        by_cat[category(name)] = by_cat.get(category(name), 0.0) + float(e["dur"])
        slot = by_name.setdefault(name, [0.0, 0])
        slot[0] += float(e["dur"])
        slot[1] += 1
    total = sum(by_cat.values())
    if kernels:
        span_start = min(float(e["ts"]) for e in kernels)
        span_end = max(float(e["ts"]) + float(e["dur"]) for e in kernels)
        span = span_end - span_start
        busy = busy_time((float(e["ts"]), float(e["ts"]) + float(e["dur"])) for e in kernels)
    else:
        span = busy = 0.0
    top_kernels = sorted(by_name.items(), key=lambda kv: kv[1][0], reverse=True)[:top]
    return {
        "kernels": len(kernels),
        "kernel_us": total,
        "span_us": span,
        "busy_us": busy,
        "busy_fraction": busy / span if span else 0.0,
        "categories": sorted(by_cat.items(), key=lambda kv: kv[1], reverse=True),
        "top": [(name, us, int(n)) for name, (us, n) in top_kernels],
    }


def load(path: str) -> Dict[str, Any]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as handle:
        return json.load(handle)


def render(summary: Mapping[str, Any]) -> str:
    total = summary["kernel_us"] or 1.0
    lines = [
        "%d kernels, %.1f ms of kernel time over a %.1f ms span; GPU busy %.1f%%"
        % (summary["kernels"], summary["kernel_us"] / 1e3, summary["span_us"] / 1e3,
           100.0 * summary["busy_fraction"]),
        "%-16s %10s %7s" % ("category", "ms", "share"),
    ]
    for label, us in summary["categories"]:
        lines.append("%-16s %10.1f %6.1f%%" % (label, us / 1e3, 100.0 * us / total))
    lines.append("top kernels (ms, calls, category):")
    for name, us, calls in summary["top"]:
        lines.append("  %9.1f %6d  %-13s %s" % (us / 1e3, calls, category(name), name[:110]))
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args(argv)
    print(render(summarize(load(args.trace), args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
