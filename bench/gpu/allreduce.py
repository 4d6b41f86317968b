#!/usr/bin/env python3
"""All-reduce bus bandwidth through torch.distributed (NCCL on GPUs, gloo on CPU).

Start it with any launcher that sets RANK/WORLD_SIZE/LOCAL_RANK (torchrun, or DeepSpeed's
launcher). Reports algorithm and bus bandwidth the way nccl-tests does:
busbw = algbw * 2 * (n - 1) / n for all-reduce. Prints JSON lines from rank 0.
"""
import argparse
import json
import os
import statistics
import time

import torch
import torch.distributed as dist


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes-mb", default="1,16,128,1024")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None)
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", args.local_rank or 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if cuda else "gloo")
    world, rank = dist.get_world_size(), dist.get_rank()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    for size_mb in [float(s) for s in args.sizes_mb.split(",")]:
        numel = int(size_mb * 2 ** 20) // 4
        tensor = torch.ones(numel, dtype=torch.float32, device=device)
        for dummy in range(5):
            dist.all_reduce(tensor)
        times = []
        for dummy in range(args.iters):
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
            dist.all_reduce(tensor)
            if cuda:
                torch.cuda.synchronize()
            times.append(time.perf_counter() - start)
        tensor.fill_(1.0)
        dist.all_reduce(tensor)
        correct = bool(torch.all(tensor == world).item())
        seconds = statistics.median(times)
        algbw = numel * 4 / seconds / 1e9
        if rank == 0:
            print(json.dumps({"bench": "allreduce", "world": world, "bytes": numel * 4,
                              "time_us": round(seconds * 1e6, 1), "algbw_GBps": round(algbw, 1),
                              "busbw_GBps": round(algbw * 2 * (world - 1) / world, 1),
                              "correct": correct}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
