# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One rank of the fabric gate's all-reduce over a set of nodes: one rank per node, timed at large sizes.

The bisection (roles/megatron_launch/tasks/fabric_gate.yml) starts this on every node of each
group it measures, with the job's .deepspeed_env in the environment:

  python fabric_allreduce.py --rank R --world N --master ADDR --port P [--mib 64,256] [--backend gloo]

One rank per node, so that what is timed is the network between the nodes and not the links
inside one. NCCL on GPUs (the play sets NCCL_ALGO=Ring: Tree across nodes reports more than the
network carries, nccl-tests#196), gloo without a GPU. Rank 0 prints one line,
``FABRIC_ALLREDUCE {...}``, in the burn-in's own all-reduce JSON (module_utils/_fabric/allreduce.py
parse_gloo: time per call, algbw = bytes / time, busbw = algbw x 2(n-1)/n as nccl-tests computes
it) with every element of the sum checked.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from typing import Any, Dict, List, Optional

MARK = "FABRIC_ALLREDUCE"


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--world", type=int, required=True)
    parser.add_argument("--master", required=True, help="address of rank 0's node")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--mib", default="auto", help="comma-separated message sizes in MiB; auto: 64 through gloo, "
                        "256,1024 through NCCL")
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--backend", choices=("auto", "nccl", "gloo"), default="auto")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for the other ranks")
    return parser.parse_args(argv)


def sizes(text: str, backend: str) -> List[int]:
    """--mib as a list of positive sizes in MiB. auto: 64 MiB through gloo (a CPU copy: larger only
    takes longer), 256 and 1024 through NCCL, past the knee of every fabric (nccl-tests#212)."""
    if str(text).strip() in ("", "auto"):
        return [256, 1024] if backend == "nccl" else [64]
    out = [int(part) for part in str(text).replace(" ", "").split(",") if part]
    if not out or any(size <= 0 for size in out):
        raise ValueError("--mib %r: expected positive sizes in MiB, e.g. 64,256" % text)
    return out


def measure(torch: Any, dist: Any, device: Any, mib_sizes: List[int], reps: int) -> List[Dict[str, Any]]:
    ranks = dist.get_world_size()
    results = []
    for mib in mib_sizes:
        tensor = torch.ones(mib * 1024 * 1024 // 4, dtype=torch.float32, device=device)
        dist.all_reduce(tensor)  # warm-up (connections, buffers) and the data check
        if device.type == "cuda":
            torch.cuda.synchronize()
        wrong = int((tensor != float(ranks)).sum().item())
        dist.barrier()
        start = time.perf_counter()
        for _rep in range(reps):
            dist.all_reduce(tensor)
        if device.type == "cuda":
            torch.cuda.synchronize()
        seconds = max(time.perf_counter() - start, 1e-9) / reps
        size = tensor.numel() * 4
        algbw = size / seconds / 1e9
        results.append({"size": size, "time_us": round(seconds * 1e6, 3), "algbw": round(algbw, 4),
                        "busbw": round(algbw * 2.0 * (ranks - 1) / ranks, 4), "wrong": wrong})
        del tensor
    return results


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    import torch  # pylint: disable=import-outside-toplevel
    import torch.distributed as dist  # pylint: disable=import-outside-toplevel

    backend = args.backend
    if backend == "auto":
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    mib_sizes = sizes(args.mib, backend)
    device = torch.device("cuda", 0) if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(0)
    dist.init_process_group(backend, init_method="tcp://%s:%d" % (args.master, args.port), rank=args.rank,
                            world_size=args.world, timeout=datetime.timedelta(seconds=args.timeout))
    try:
        results = measure(torch, dist, device, mib_sizes, args.reps)
    finally:
        dist.destroy_process_group()
    if args.rank == 0:
        print("%s %s" % (MARK, json.dumps({
            "tool": backend, "ranks": args.world, "results": results,
            "algorithm": os.environ.get("NCCL_ALGO") if backend == "nccl" else None})))
    return 0


if __name__ == "__main__":
    sys.exit(main())
