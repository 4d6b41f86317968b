#!/usr/bin/env python3
"""Bare bf16 matrix-product rate on each visible GPU: the ceiling MFU figures sit under.

Prints one JSON line per GPU: {"bench": "matmul", "gpu": i, "n": N, "tflops": ...}.
Times with CUDA events, median of repeated products on random data (zeros run faster
and would flatter the ceiling), after warm-up.
"""
import argparse
import json
import statistics

import torch


def bench(device: int, n: int, reps: int) -> float:
    torch.cuda.set_device(device)
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for dummy in range(3):
        a @ b
    torch.cuda.synchronize()
    times = []
    for dummy in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1000.0)
    return 2 * n ** 3 / statistics.median(times) / 1e12


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--reps", type=int, default=20)
    args = parser.parse_args()
    for device in range(torch.cuda.device_count()):
        print(json.dumps({"bench": "matmul", "gpu": device, "name": torch.cuda.get_device_name(device),
                          "n": args.n, "dtype": "bf16", "tflops": round(bench(device, args.n, args.reps), 1)}))


if __name__ == "__main__":
    main()
