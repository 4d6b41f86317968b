# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Megatron-DeepSpeed's bias-GeLU "fusion" against a bias add and torch's GeLU, on one GPU.

Megatron-DeepSpeed's bias_gelu is a TorchScript function. Its set_jit_fusion_options() turns
the TensorExpr fuser off and asks for nvfuser, which torch >= 2.2 no longer has (a no-op with
a warning), so the "fused" function may run as one kernel per arithmetic operation. This
script applies the same JIT options, times forward + backward of both paths on the MLP's
4h-wide activation (seq x micro x ffn, bf16) and counts the CUDA kernels each launches.

    python3 bench/gpu/bias_gelu.py [--seq 2048] [--micro 16] [--ffn 8192] [--mds <checkout>]

With --mds (or MEGATRON_DS_SRC) the GeLUFunction is loaded from that checkout's
megatron/model/fused_bias_gelu.py; without it, the same tanh-approximation formula is
scripted here. Prints milliseconds per forward + backward, the ratio and the kernel counts.
"""
import argparse
import importlib.util
import os
import sys
import time

import torch
import torch.nn.functional as F


def set_mds_jit_options() -> None:
    """What Megatron-DeepSpeed's initialize.set_jit_fusion_options() does on torch >= 1.10."""
    torch._C._jit_set_profiling_executor(True)
    torch._C._jit_set_profiling_mode(True)
    torch._C._jit_override_can_fuse_on_cpu(False)
    torch._C._jit_override_can_fuse_on_gpu(False)
    torch._C._jit_set_texpr_fuser_enabled(False)
    if hasattr(torch._C, "_jit_set_nvfuser_enabled"):
        torch._C._jit_set_nvfuser_enabled(True)  # a no-op with a warning on torch >= 2.2
    torch._C._debug_set_autodiff_subgraph_inlining(False)


@torch.jit.script
def _bias_gelu(bias, y):
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


@torch.jit.script
def _bias_gelu_back(g, bias, y):
    x = bias + y
    tanh_out = torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x))
    ff = 0.5 * x * ((1 - tanh_out * tanh_out) * (0.79788456 + 0.1070322243 * x * x)) + 0.5 * (1 + tanh_out)
    return ff * g


class _LocalGeLU(torch.autograd.Function):
    """The tanh-approximation bias-GeLU as Megatron writes it (when no checkout is given)."""

    @staticmethod
    def forward(ctx, inp, bias):
        ctx.save_for_backward(inp, bias)
        return _bias_gelu(bias, inp)

    @staticmethod
    def backward(ctx, grad_output):
        inp, bias = ctx.saved_tensors
        tmp = _bias_gelu_back(grad_output, bias, inp)
        return tmp, tmp


def load_mds_gelu(checkout: str):
    """GeLUFunction.apply from a Megatron-DeepSpeed checkout (the file imports only torch)."""
    path = os.path.join(checkout, "megatron", "model", "fused_bias_gelu.py")
    spec = importlib.util.spec_from_file_location("mds_fused_bias_gelu", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.bias_gelu_impl, path


def eager_bias_gelu(inp, bias):
    """What Megatron's ParallelMLP does with --no-bias-gelu-fusion."""
    return F.gelu(inp + bias)


def fwd_bwd(fn, inp, bias, grad):
    out = fn(inp, bias)
    out.backward(grad)


def time_ms(fn, inp, bias, grad, iters: int) -> float:
    for _warmup in range(3):  # the profiling executor specialises after two runs
        fwd_bwd(fn, inp, bias, grad)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _iteration in range(iters):
        fwd_bwd(fn, inp, bias, grad)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) * 1000.0 / iters


def count_kernels(fn, inp, bias, grad) -> int:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fwd_bwd(fn, inp, bias, grad)
        torch.cuda.synchronize()
    return sum(1 for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seq", type=int, default=2048)
    parser.add_argument("--micro", type=int, default=16)
    parser.add_argument("--ffn", type=int, default=8192, help="4 x hidden")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--layers", type=int, default=24, help="to scale the per-layer cost to a step")
    parser.add_argument("--mds", default=os.environ.get("MEGATRON_DS_SRC"))
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("bias_gelu: no CUDA device; nothing measured")
        return 1
    set_mds_jit_options()
    if args.mds:
        fused, where = load_mds_gelu(args.mds)
    else:
        fused, where = _LocalGeLU.apply, "formula scripted in bench/gpu/bias_gelu.py"
    shape = (args.seq, args.micro, args.ffn)
    inp = torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    bias = torch.randn(args.ffn, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    grad = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    print("torch %s, %s, shape %s bf16, bias_gelu from %s"
          % (torch.__version__, torch.cuda.get_device_name(0), "x".join(map(str, shape)), where))
    rows = []
    for name, fn in (("megatron bias_gelu (TorchScript)", fused),
                     ("bias add + F.gelu (--no-bias-gelu-fusion)", eager_bias_gelu)):
        ms = time_ms(fn, inp, bias, grad, args.iters)
        kernels = count_kernels(fn, inp, bias, grad)
        rows.append((name, ms, kernels))
        print("%-44s %8.3f ms fwd+bwd  %3d kernels  %7.1f ms per step of %d layers"
              % (name, ms, kernels, ms * args.layers, args.layers))
    with torch.no_grad():
        ref = eager_bias_gelu(inp.float(), bias.float())
        err = (fused(inp, bias).float() - ref).abs().max().item()
    print("ratio TorchScript / eager: %.2fx; max |difference| tanh-approx vs exact GeLU: %.3g"
          % (rows[0][1] / rows[1][1], err))
    return 0


if __name__ == "__main__":
    sys.exit(main())
