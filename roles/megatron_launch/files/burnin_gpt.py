# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""megatron_ds.cluster burn-in: a small GPT trained through deepspeed.initialize.

It runs under the DeepSpeed launcher with the job's own hostfile, launcher, .deepspeed_env and
rendered ds_config.json, so a burn-in exercises the same path as pretrain_gpt.py without needing
Megatron-DeepSpeed, a tokenizer or a dataset:

    deepspeed --hostfile <workdir>/hostfile ... burnin_gpt.py --ds-config <workdir>/ds_config.json \
        --layers 4 --hidden 256 --heads 4 --seq 256 --steps 50 --save <dir> --save-interval 20

CPU ranks (DS_ACCELERATOR=cpu) talk over gloo; CUDA ranks over NCCL, in bf16 when the config
enables it. Like pretrain_gpt.py, the optimizer is built here and handed to deepspeed.initialize
(the rendered config has no "optimizer" block): torch AdamW, or DeepSpeedCPUAdam when the config
offloads the optimizer to the CPU (DeepSpeed refuses another optimizer with ZeRO-Offload).

Output: one line per step from rank 0 (`BURNIN step=...`), then each rank's result as JSON, in
`BURNIN_RESULT_PART <rank> <i>/<n> <chunk>|` lines (result_lines). Rank 0's result also carries
the per-node table and `slow_nodes`; every result carries `allreduce_gate`, the world
all-reduce timed at the fabric gate's large sizes (--gate-mib), which the controller judges
against the threshold of module_utils/_fabric.

Throughput figures:
* tokens/s per rank = micro x grad_acc x seq x timed steps / timed seconds (the first step of a
  run is not timed: it includes allocation and any kernel compilation).
* FLOPs per token (forward + backward) = 6 x P + 12 x L x h x s, where P counts the weights of
  the matrix multiplications (attention and MLP projections and the LM head; embedding lookups
  and LayerNorms excluded), L = layers, h = hidden, s = sequence length. 6P is 2 FLOPs per
  weight per token forward and 4 backward; 12 L h s is the attention score and value products
  (QK^T and AV, 2 x 2 x s x h per token per layer forward, x3 with backward), counted without
  the causal saving, as Megatron and PaLM count them.
* TFLOP/s per rank = FLOPs per token x tokens/s per rank / 1e12.

Finding a slow node: data parallelism makes every rank wait for the slowest at each gradient
reduction, so the end-to-end tokens/s is the same on every node. Each rank therefore also runs a
short communication-free probe (forward + backward of the same model on its own device, before
training) and rank 0 all-gathers the probe figures; a node whose mean probe tokens/s per rank is
more than --slow-threshold (10%) below the median node is listed in `slow_nodes`.

Checkpoints use DeepSpeed's layout (engine.save_checkpoint, tag global_step<N>); --load resumes
from the `latest` tag and continues to --steps. SIGTERM (what the launcher sends on stop) makes
every rank finish its step, save and exit 0, like Megatron's --exit-signal-handler.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import statistics
import sys
import time
from typing import Any, Dict, List, Optional

import torch
import torch.distributed as torch_dist
from torch import nn
import torch.nn.functional as F

import deepspeed
from deepspeed.accelerator import get_accelerator

# A rank's result goes out in numbered parts of at most this many characters, each on a line of
# its own ending in "|". Under srun, slurmstepd forwards a task's output in messages of at most
# 1024 bytes (SLURM_IO_MAX_MSG_LEN, src/common/io_hdr.h), so a longer line reaches the job log in pieces that
# another task's output can land between: rank 0's line (node table, calibration, fabric gate)
# was cut that way in a resumed 6-rank job. A line shorter than a message arrives whole.
RESULT_PART_TAG = "BURNIN_RESULT_PART"
RESULT_PART_CHARS = 800


# ------------------------------------------------------------------------------------------------
# Model
# ------------------------------------------------------------------------------------------------
class Block(nn.Module):
    """Pre-LayerNorm transformer block: causal self-attention (SDPA) and a 4h GELU MLP."""

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, seq, hidden = x.shape
        qkv = self.qkv(self.ln1(x)).view(batch, seq, 3, self.heads, hidden // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)  # each (batch, heads, seq, head_dim)
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(batch, seq, hidden))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab: int, seq: int, layers: int, hidden: int, heads: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads) for layer in range(layers))
        self.ln_f = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, vocab, bias=False)
        for module in self.modules():
            if isinstance(module, (nn.Linear, nn.Embedding)):
                nn.init.normal_(module.weight, std=0.02)
                if getattr(module, "bias", None) is not None:
                    nn.init.zeros_(module.bias)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Mean next-token cross-entropy of ``tokens`` (batch, seq)."""
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        x = self.tok(tokens) + self.pos(positions)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(
            logits[:, :-1].reshape(-1, logits.shape[-1]).float(), tokens[:, 1:].reshape(-1)
        )


def matmul_params(model: nn.Module) -> int:
    return sum(m.weight.numel() for m in model.modules() if isinstance(m, nn.Linear))


def flops_per_token(params: int, layers: int, hidden: int, seq: int) -> float:
    return 6.0 * params + 12.0 * layers * hidden * seq


# ------------------------------------------------------------------------------------------------
# Helpers
# ------------------------------------------------------------------------------------------------
def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0], allow_abbrev=False)
    parser.add_argument("--ds-config", required=True, help="the rendered ds_config.json")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--seq", type=int, default=256)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=50, help="total optimizer steps (a resumed run continues to it)")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--save", default=None, help="checkpoint directory (DeepSpeed layout)")
    parser.add_argument("--save-interval", type=int, default=0, help="save every N steps; 0 saves only at the end")
    parser.add_argument("--load", default=None, help="resume from this checkpoint directory's `latest` tag")
    parser.add_argument("--universal-checkpoint", action="store_true",
                        help="--load reads the tag in `latest_universal`, written by DeepSpeed's ds_to_universal "
                             "(a checkpoint saved with another DP size; DeepSpeed's checkpoint.load_universal)")
    parser.add_argument("--pool", type=int, default=64, help="synthetic sequences per rank, cycled so the loss can fall")
    parser.add_argument("--probe-steps", type=int, default=3, help="communication-free forward+backward steps per rank")
    parser.add_argument("--slow-threshold", type=float, default=0.10, help="flag nodes this fraction below the median")
    parser.add_argument("--calibrate-matmul", type=int, default=None,
                        help="square matmul size timed per rank for the planner (0: skip; default 8192 on a GPU, 512 on CPU)")
    parser.add_argument("--calibrate-mib", type=int, default=None,
                        help="all-reduce size timed over the world and each node (0: skip; default 256 on a GPU, 4 on CPU)")
    parser.add_argument("--gate-mib", default=None,
                        help="comma-separated all-reduce sizes in MiB timed over the world for the fabric gate "
                             "(0: skip; default 64 on CPU, 256,1024 on a GPU: large enough to measure bandwidth)")
    parser.add_argument("--seed", type=int, default=1234)
    # Megatron-DeepSpeed's profiler flags (megatron/profiler.py), same meaning: the PyTorch
    # profiler over steps START..END on the chosen ranks, traces written under --profile-dir.
    parser.add_argument("--profile", choices=("pt", "pt-full"), default=None,
                        help="profile with the PyTorch profiler; pt-full also records call stacks")
    parser.add_argument("--profile-steps", "--profile_steps", default="2,3", help="START,END (1-based, inclusive)")
    parser.add_argument("--profile-ranks", type=int, nargs="+", default=None, help="global ranks to profile (all when omitted)")
    parser.add_argument("--profile-dir", default=None, help="trace directory (default: <save>/../profile)")
    # The DeepSpeed launcher passes --local_rank=N unless --no_local_rank; LOCAL_RANK is set too.
    parser.add_argument("--local_rank", "--local-rank", type=int, default=None)
    args = parser.parse_args(argv)
    if args.hidden % args.heads:
        parser.error("--hidden %d is not divisible by --heads %d" % (args.hidden, args.heads))
    return args


# Test-only fault injection (the chaos tests of roles/supervisor): the loss of optimizer step N
# becomes NaN on every rank, as a diverging run's would. Unset or 0: never.
NAN_AT_ENV = "MEGATRON_DS_BURNIN_NAN_AT_STEP"


def load_config(path: str, world: int) -> Dict[str, Any]:
    """The rendered config, with train_batch_size re-derived for this job's data parallelism.

    The burn-in model is pure data parallel (DP = world), while the Megatron job's config was
    written for DP = world / (TP x PP); micro batch and gradient accumulation are kept.
    """
    with open(path, "r", encoding="utf-8") as handle:
        config = json.load(handle)
    micro = int(config.get("train_micro_batch_size_per_gpu", 1))
    grad_acc = int(config.get("gradient_accumulation_steps", 1))
    config["train_micro_batch_size_per_gpu"] = micro
    config["gradient_accumulation_steps"] = grad_acc
    config["train_batch_size"] = micro * grad_acc * world
    return config


def make_optimizer(model: nn.Module, config: Dict[str, Any], lr: float) -> torch.optim.Optimizer:
    offload = (config.get("zero_optimization") or {}).get("offload_optimizer") or {}
    if offload.get("device") == "cpu":
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        return DeepSpeedCPUAdam(model.parameters(), lr=lr, weight_decay=0.01)
    return torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)


def synthetic_pool(args: argparse.Namespace, rank: int, device: torch.device) -> torch.Tensor:
    """Random token sequences, different per rank, fixed per seed: learnable by memorising."""
    generator = torch.Generator().manual_seed(args.seed * 1000 + rank)
    return torch.randint(0, args.vocab, (args.pool, args.seq), generator=generator).to(device)


def synchronize() -> None:
    get_accelerator().synchronize()


def probe(args: argparse.Namespace, device: torch.device, dtype: torch.dtype, micro: int) -> float:
    """Tokens/s of forward+backward on this rank alone (no collective), for slow-node detection."""
    model = GPT(args.vocab, args.seq, args.layers, args.hidden, args.heads).to(device=device, dtype=dtype)
    tokens = torch.randint(0, args.vocab, (micro, args.seq), device=device)
    model(tokens).backward()  # warm-up, not timed
    synchronize()
    start = time.perf_counter()
    for probe_step in range(args.probe_steps):  # pylint: disable=unused-variable
        model.zero_grad(set_to_none=True)
        model(tokens).backward()
    synchronize()
    elapsed = time.perf_counter() - start
    del model
    return micro * args.seq * args.probe_steps / max(elapsed, 1e-9)


def matmul_tflops(device: torch.device, dtype: torch.dtype, size: int, reps: int = 5) -> float:
    """TFLOP/s of a square matmul of random data on this rank alone: the rate the planner scales
    (_job.plan.GPUS' matmul_tflops is the same measurement)."""
    left = torch.randn(size, size, device=device).to(dtype)
    right = torch.randn(size, size, device=device).to(dtype)
    torch.matmul(left, right)  # warm-up: kernel selection
    synchronize()
    start = time.perf_counter()
    for rep in range(reps):  # pylint: disable=unused-variable
        torch.matmul(left, right)
    synchronize()
    return 2.0 * size ** 3 * reps / max(time.perf_counter() - start, 1e-9) / 1e12


def allreduce_busbw(device: torch.device, mib: int, group: Any = None, reps: int = 5) -> Optional[float]:
    """Bus bandwidth in GB/s of a sum all-reduce of ``mib`` MiB over ``group`` (the world when
    None), as nccl-tests reports it: bytes x 2(n-1)/n per second; None for a group of one."""
    ranks = torch_dist.get_world_size(group)
    if ranks < 2:
        return None
    tensor = torch.ones(mib * 1024 * 1024 // 4, dtype=torch.float32, device=device)
    torch_dist.all_reduce(tensor, group=group)  # warm-up: connections, buffers
    synchronize()
    torch_dist.barrier(group=group)
    start = time.perf_counter()
    for rep in range(reps):  # pylint: disable=unused-variable
        torch_dist.all_reduce(tensor, group=group)
    synchronize()
    seconds = max(time.perf_counter() - start, 1e-9) / reps
    return tensor.numel() * 4 * 2.0 * (ranks - 1) / ranks / seconds / 1e9


def calibrate(args: argparse.Namespace, device: torch.device, dtype: torch.dtype, hostname: str) -> Dict[str, Any]:
    """What plan.yml reads from the report: this rank's matmul rate, the all-reduce bus bandwidth
    over the world (across nodes when there are several: the ring crosses the fabric) and over
    this rank's node. Every rank calls it: the node groups are created collectively."""
    gpu = device.type != "cpu"
    size = args.calibrate_matmul if args.calibrate_matmul is not None else (8192 if gpu else 512)
    mib = args.calibrate_mib if args.calibrate_mib is not None else (256 if gpu else 4)
    out: Dict[str, Any] = {}
    if size > 0:
        out["matmul_tflops"] = round(matmul_tflops(device, dtype, size), 4)
        out["matmul_size"] = size
    if mib > 0:
        hosts: List[Any] = [None] * torch_dist.get_world_size()
        torch_dist.all_gather_object(hosts, hostname)
        mine = None
        for host in sorted(set(hosts)):
            group = torch_dist.new_group([rank for rank, name in enumerate(hosts) if name == host])
            if host == hostname:
                mine = group
        world_busbw = allreduce_busbw(device, mib)
        node_busbw = allreduce_busbw(device, mib, mine)
        out["allreduce_mib"] = mib
        out["world_busbw_gbps"] = None if world_busbw is None else round(world_busbw, 3)
        out["node_busbw_gbps"] = None if node_busbw is None else round(node_busbw, 3)
    return out


def allreduce_gate(device: torch.device, sizes_mib: List[int], reps: int = 3) -> Optional[Dict[str, Any]]:
    """The fabric gate's measurement: a sum all-reduce over the world at each size, as nccl-tests'
    all_reduce_perf reports it (time per call, algbw = bytes / time, busbw = algbw x 2(n-1)/n), in
    the burn-in's own JSON that module_utils/_fabric/allreduce.py parse_gloo reads. One warm-up
    call per size also checks the data: every element of a sum of ones is the world size."""
    ranks = torch_dist.get_world_size()
    if ranks < 2 or not sizes_mib:
        return None
    results = []
    for mib in sizes_mib:
        tensor = torch.ones(mib * 1024 * 1024 // 4, dtype=torch.float32, device=device)
        torch_dist.all_reduce(tensor)  # warm-up (connections, buffers) and the data check
        synchronize()
        wrong = int((tensor != float(ranks)).sum().item())
        torch_dist.barrier()
        start = time.perf_counter()
        for rep in range(reps):  # pylint: disable=unused-variable
            torch_dist.all_reduce(tensor)
        synchronize()
        seconds = max(time.perf_counter() - start, 1e-9) / reps
        size = tensor.numel() * 4
        algbw = size / seconds / 1e9
        results.append({"size": size, "time_us": round(seconds * 1e6, 3), "algbw": round(algbw, 4),
                        "busbw": round(algbw * 2.0 * (ranks - 1) / ranks, 4), "wrong": wrong})
        del tensor
    backend = str(torch_dist.get_backend())
    return {"tool": backend, "ranks": ranks, "results": results,
            # NCCL picks Tree or Ring itself unless told; the gate wants Ring across nodes.
            "algorithm": os.environ.get("NCCL_ALGO") if backend == "nccl" else None}


def result_lines(rank: int, result: Dict[str, Any]) -> List[str]:
    """The rank's result as `BURNIN_RESULT_PART <rank> <i>/<n> <chunk>|` lines: compact JSON cut
    into chunks that, read back in order, decode to the result (module_utils/_launch/logs.py
    ResultParts). The closing "|" keeps a chunk's trailing space from being taken for line
    padding."""
    text = json.dumps(result, sort_keys=True, separators=(",", ":"))
    chunks = [text[at:at + RESULT_PART_CHARS] for at in range(0, len(text), RESULT_PART_CHARS)]
    return ["%s %d %d/%d %s|\n" % (RESULT_PART_TAG, rank, index + 1, len(chunks), chunk)
            for index, chunk in enumerate(chunks)]


def gate_sizes(text: Optional[str], gpu: bool) -> List[int]:
    """--gate-mib as a list of sizes; "0" or empty turns the gate's measurement off."""
    if text is None:
        return [256, 1024] if gpu else [64]
    sizes = [int(part) for part in str(text).replace(" ", "").split(",") if part]
    return [size for size in sizes if size > 0]


def boot_id() -> Optional[str]:
    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            return handle.read().strip() or None
    except OSError:
        return None


def node_table(gathered: List[Dict[str, Any]], threshold: float) -> Dict[str, Any]:
    """Per-node mean probe tokens/s per rank, the median node, and nodes below it by > threshold."""
    per_node: Dict[str, List[float]] = {}
    for item in gathered:
        per_node.setdefault(item["hostname"], []).append(item["probe_tokens_per_s"])
    nodes = {
        host: {"ranks": len(values), "probe_tokens_per_s_per_rank": statistics.mean(values)}
        for host, values in sorted(per_node.items())
    }
    median = statistics.median(n["probe_tokens_per_s_per_rank"] for n in nodes.values())
    slow = []
    for host, node in nodes.items():
        deficit = 1.0 - node["probe_tokens_per_s_per_rank"] / median if median > 0 else 0.0
        node["below_median"] = round(deficit, 4)
        if deficit > threshold:
            slow.append(host)
    return {"nodes": nodes, "median_probe_tokens_per_s_per_rank": median, "slow_nodes": slow}


class StopFlag:
    """SIGTERM handler: remember the signal; the training loop saves and exits at a step end."""

    def __init__(self) -> None:
        self.received = False
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, signum: int, frame: Any) -> None:  # pylint: disable=unused-argument
        self.received = True

    @staticmethod
    def settle() -> None:
        """Ignore SIGTERM from here on: the ranks agreed to stop and save. Every rank stops when
        any rank was signalled, so a rank whose own signal comes late (stop.yml signals the nodes
        one by one) may get it after its save, during interpreter shutdown, where Python's
        handlers are already gone: it would die with -15 and fail its launcher."""
        signal.signal(signal.SIGTERM, signal.SIG_IGN)

    def any_rank(self, device: torch.device) -> bool:
        flag = torch.tensor([1.0 if self.received else 0.0], device=device)
        torch_dist.all_reduce(flag, op=torch_dist.ReduceOp.MAX)
        return bool(flag.item() > 0)


def mean_across_ranks(value: float, device: torch.device) -> float:
    tensor = torch.tensor([value], dtype=torch.float64 if device.type == "cpu" else torch.float32, device=device)
    torch_dist.all_reduce(tensor)
    return float(tensor.item()) / torch_dist.get_world_size()


def save(engine: Any, directory: Optional[str], reason: str, rank: int) -> Optional[str]:
    if not directory:
        return None
    engine.save_checkpoint(directory, client_state={"burnin_step": engine.global_steps})
    tag = "global_step%d" % engine.global_steps
    if rank == 0:
        print("BURNIN checkpoint %s/%s (%s)" % (directory, tag, reason), flush=True)
    return os.path.join(directory, tag)


# ------------------------------------------------------------------------------------------------
# Main
# ------------------------------------------------------------------------------------------------
class Profiler:
    """torch.profiler over steps START..END of this run (counted from its first step), as
    Megatron-DeepSpeed's megatron/profiler.py does; a no-op on ranks that are not profiled."""

    def __init__(self, args: argparse.Namespace, rank: int, device: torch.device, hostname: str) -> None:
        self.profiler: Any = None
        self.step = 0
        self.directory: Optional[str] = None
        if not args.profile or (args.profile_ranks is not None and rank not in args.profile_ranks):
            return
        self.start, self.end = (int(v) for v in args.profile_steps.split(","))
        if not 1 <= self.start <= self.end:
            raise SystemExit("--profile-steps %s: want START,END with 1 <= START <= END" % args.profile_steps)
        self.directory = args.profile_dir or os.path.join(os.path.dirname(os.path.abspath(args.save or ".")), "profile")
        activities = [torch.profiler.ProfilerActivity.CPU]
        if device.type == "cuda":
            activities.append(torch.profiler.ProfilerActivity.CUDA)
        self.profiler = torch.profiler.profile(
            schedule=torch.profiler.schedule(wait=0, warmup=0, active=self.end - self.start + 1, repeat=1),
            activities=activities,
            on_trace_ready=torch.profiler.tensorboard_trace_handler(
                self.directory, worker_name="%s_rank%d" % (hostname, rank), use_gzip=True),
            with_stack=args.profile == "pt-full",
        )

    def begin(self) -> None:
        self.step += 1
        if self.profiler is not None and self.step == self.start:
            self.profiler.start()

    def end_step(self, rank: int) -> None:
        if self.profiler is None or not self.start <= self.step <= self.end:
            return
        self.profiler.step()
        if self.step == self.end:
            self.profiler.stop()
            print("BURNIN profile rank %d steps %d-%d written to %s" % (rank, self.start, self.end, self.directory),
                  flush=True)


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    stop = StopFlag()
    deepspeed.init_distributed()
    rank = torch_dist.get_rank()
    world = torch_dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", args.local_rank or 0))
    accelerator = get_accelerator()
    if accelerator.device_name() == "cpu":
        device = torch.device("cpu")
        if "OMP_NUM_THREADS" not in os.environ:
            # Every local rank would otherwise start one thread per core, and the ranks of a
            # node then fight over the cores (measured: 10x slower with 2 ranks on 2 cores).
            local_size = int(os.environ.get("LOCAL_SIZE", "1") or 1)
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // max(local_size, 1)))
    else:
        accelerator.set_device(local_rank)
        device = torch.device(accelerator.device_name(local_rank))
    hostname = socket.gethostname()

    config = load_config(args.ds_config, world)
    if args.universal_checkpoint:
        # What Megatron-DeepSpeed's --universal-checkpoint does (megatron/training.py): the engine
        # then loads `latest_universal` and re-partitions the optimizer state for this DP size.
        config.setdefault("checkpoint", {})["load_universal"] = True
    micro = config["train_micro_batch_size_per_gpu"]
    grad_acc = config["gradient_accumulation_steps"]
    bf16 = bool((config.get("bf16") or {}).get("enabled"))
    fp16 = bool((config.get("fp16") or {}).get("enabled"))
    dtype = torch.bfloat16 if bf16 else torch.float16 if fp16 else torch.float32

    torch.manual_seed(args.seed)
    torch_dist.barrier()  # every rank probes at the same time, as it will train
    probe_tps = probe(args, device, dtype, micro)
    calibration = calibrate(args, device, dtype, hostname)
    gate = allreduce_gate(device, gate_sizes(args.gate_mib, device.type != "cpu"))

    model = GPT(args.vocab, args.seq, args.layers, args.hidden, args.heads)
    params = matmul_params(model)
    flops_tok = flops_per_token(params, args.layers, args.hidden, args.seq)
    engine = deepspeed.initialize(
        model=model, optimizer=make_optimizer(model, config, args.lr), config=config
    )[0]
    start_step = 0
    if args.load:
        load_path, client_state = engine.load_checkpoint(args.load)
        if load_path is None:
            if rank == 0:
                print("BURNIN no checkpoint under %s: starting from step 0" % args.load, flush=True)
        else:
            start_step = int(engine.global_steps)
            if rank == 0:
                print(
                    "BURNIN resumed from %s at step %d (client state %s)"
                    % (load_path, start_step, (client_state or {}).get("burnin_step")),
                    flush=True,
                )
    if rank == 0:
        print(
            "BURNIN start: world %d, micro %d x grad_acc %d x seq %d, %d layers, hidden %d, heads %d, "
            "%d matmul params, %.3g FLOPs/token, dtype %s, steps %d..%d"
            % (world, micro, grad_acc, args.seq, args.layers, args.hidden, args.heads, params,
               flops_tok, str(dtype).replace("torch.", ""), start_step + 1, args.steps),
            flush=True,
        )

    pool = synthetic_pool(args, rank, device)
    nan_at = int(os.environ.get(NAN_AT_ENV, "0") or 0)
    profiler = Profiler(args, rank, device, hostname)
    tokens_per_step = micro * grad_acc * args.seq
    initial_loss = final_loss = float("nan")
    timed_steps, timed_seconds = 0, 0.0
    checkpoint: Optional[str] = None
    # Where the data stands after start_step steps (Megatron's consumed samples): a resume sees
    # the samples the uninterrupted run would see next, not the start of the pool again (which the
    # model has seen most often, so the loss after every resume dipped).
    cursor = start_step * micro * grad_acc
    stopped = False
    step = start_step
    while step < args.steps:
        profiler.begin()
        synchronize()
        began = time.perf_counter()
        losses = []
        for micro_step in range(grad_acc):  # pylint: disable=unused-variable
            index = torch.arange(cursor, cursor + micro) % args.pool
            cursor += micro
            loss = engine(pool[index])
            if nan_at == int(engine.global_steps) + 1:
                loss = loss * float("nan")  # test-only fault injection, see NAN_AT_ENV
            engine.backward(loss)
            engine.step()
            losses.append(float(loss.detach().float().item()))
        synchronize()
        elapsed = time.perf_counter() - began
        profiler.end_step(rank)
        step = int(engine.global_steps)
        if step > start_step + 1:  # the first step pays for allocation and compilation
            timed_steps += 1
            timed_seconds += elapsed
        step_loss = mean_across_ranks(sum(losses) / len(losses), device)
        if math.isnan(initial_loss):
            initial_loss = step_loss
        final_loss = step_loss
        if rank == 0:
            print(
                "BURNIN step=%d loss=%.4f step_time=%.3fs tokens_per_s_per_rank=%.1f"
                % (step, step_loss, elapsed, tokens_per_step / max(elapsed, 1e-9)),
                flush=True,
            )
        if stop.any_rank(device):
            stop.settle()
            checkpoint = save(engine, args.save, "SIGTERM", rank)
            stopped = True
            break
        if args.save and args.save_interval and step % args.save_interval == 0 and step < args.steps:
            checkpoint = save(engine, args.save, "interval", rank)
    if not stopped and step > start_step:
        checkpoint = save(engine, args.save, "end", rank)

    tokens_per_s = tokens_per_step * timed_steps / timed_seconds if timed_seconds > 0 else float("nan")
    result: Dict[str, Any] = {
        "hostname": hostname,
        "rank": rank,
        "local_rank": local_rank,
        "world": world,
        "device": str(device),
        "dtype": str(dtype).replace("torch.", ""),
        "start_step": start_step,
        "final_step": step,
        "stopped_by_sigterm": stopped,
        "timed_steps": timed_steps,
        "tokens_per_s": round(tokens_per_s, 2) if not math.isnan(tokens_per_s) else None,
        "tflops": round(flops_tok * tokens_per_s / 1e12, 4) if not math.isnan(tokens_per_s) else None,
        "probe_tokens_per_s": round(probe_tps, 2),
        "probe_tflops": round(flops_tok * probe_tps / 1e12, 4),
        "flops_per_token": flops_tok,
        "flops_formula": "6*P + 12*L*h*s (P = matmul weights)",
        "initial_loss": None if math.isnan(initial_loss) else round(initial_loss, 5),
        "final_loss": None if math.isnan(final_loss) else round(final_loss, 5),
        "loss_ratio": None if math.isnan(initial_loss) else round(final_loss / initial_loss, 5),
        "checkpoint": checkpoint,
        "calibration": calibration,
        "allreduce_gate": gate,
        # The kernel's boot id: nodes that share one are containers on one machine, whose probes
        # compete for the same CPUs (the report does not call one of them slow).
        "boot_id": boot_id(),
    }
    gathered: List[Any] = [None] * world
    torch_dist.all_gather_object(gathered, {"hostname": hostname, "probe_tokens_per_s": probe_tps})
    if rank == 0:
        result.update(node_table(gathered, args.slow_threshold))
        result["slow_threshold"] = args.slow_threshold
    # One write per part line: the ranks of a node share the launcher's stdout, and print()
    # writes the text and its newline apart, so two ranks' lines could run into one.
    for line in result_lines(rank, result):
        sys.stdout.write(line)
        sys.stdout.flush()
    torch_dist.barrier()
    # Tear the process group down here rather than at interpreter exit, where its threads (gloo,
    # DeepSpeed's shared-memory all-reduce) are destroyed in no fixed order: a rank of a finished
    # 2-rank run once aborted there (exit -6) after printing its result, failing its launcher.
    torch_dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
