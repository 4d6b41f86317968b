# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Forward+backward time of Megatron-DeepSpeed's elementwise chains, eager (as Megatron runs them on
torch 2.11 with the cu130 profile) against roles/python_env/files/fused_ops (megatron_ds_fused_ops)'s torch.compile'd kernels, at the
shapes of the 1.23B model of docs/benchmarks.md (mds_grid.MODEL: seq 2048, hidden 2048, 16 heads), side by side in
one process. Also prints the largest difference of the outputs and input gradients from a float32
evaluation of the same arithmetic, for both, so that the compiled kernels are checked where they run.

    python3 bench/gpu/fused_ops_bench.py [--micro 16] [--reps 20]

Per iteration, each op runs (per layer and micro batch) as in the transformer layer: the GPT,
bias+GeLU once and bias+dropout+add twice; the llama preset, SwiGLU once, rotary twice (query
and key) and dropout+add twice (no biases); the printed saving multiplies by the 24 layers and the
micro batches of an iteration (--grad-acc).
"""
import argparse
import json
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles", "python_env", "files", "fused_ops"))
import megatron_ds_fused_ops as fused_ops  # noqa: E402  (the role's copy: what the venv gets)
import torch.nn.functional as F  # noqa: E402
from mds_grid import MODEL  # noqa: E402  (the grid's one model shape, beside this file)


def bias_dropout_add_train(x, bias, residual, prob):
    """Megatron's bias_dropout_add(..., training=True), which fused_ops leaves alone: timed here
    compiled against eager to show why."""
    if bias is not None:
        x = x + bias
    return residual + F.dropout(x, p=prob, training=True)


LAYERS = MODEL["num_layers"]


def timed(fn, args, reps):
    """mean ms of forward + backward of fn(*args) over reps, after 3 warm-up calls."""
    grads = [a for a in args if isinstance(a, torch.Tensor) and a.requires_grad]
    out = None
    for _warm in range(3):
        out = fn(*args)
        out.backward(torch.ones_like(out))
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _rep in range(reps):
        out = fn(*args)
        out.backward(torch.ones_like(out))
    end.record()
    torch.cuda.synchronize()
    for g in grads:
        g.grad = None
    return start.elapsed_time(end) / reps


def error(fn, ref_fn, args):
    """largest |difference| of output and input gradients against float32 eager arithmetic
    (None where dropout makes the two differ by design)."""
    if any(isinstance(x, float) and x > 0 for x in args):
        return None
    ref_args = [a.detach().float().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
    run_args = [a.detach().clone().requires_grad_(a.requires_grad) if isinstance(a, torch.Tensor) else a for a in args]
    ref, out = ref_fn(*ref_args), fn(*run_args)
    g = torch.randn_like(ref)
    ref.backward(g)
    out.backward(g.to(out.dtype))
    worst = (out.float() - ref).abs().max().item()
    for a, b in zip(run_args, ref_args):
        if isinstance(a, torch.Tensor) and a.requires_grad:
            worst = max(worst, (a.grad.float() - b.grad).abs().max().item())
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--micro", type=int, default=16)
    ap.add_argument("--grad-acc", type=int, default=4)
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    torch.manual_seed(0)
    dev, bf = "cuda", torch.bfloat16
    s, b, h, heads = MODEL["seq_length"], a.micro, MODEL["hidden_size"], MODEL["num_attention_heads"]
    d = h // heads
    ffn_gpt, ffn_llama = 4 * h, int(8 * h / 3 / 64) * 64

    def t(*shape, grad=True):
        return torch.randn(*shape, device=dev, dtype=bf).requires_grad_(grad)

    freqs = torch.arange(s, device=dev, dtype=torch.float32)[:, None] * (
        1.0 / 10000 ** (torch.arange(0, d, 2, device=dev).float() / d))[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)[:, None, None, :]
    cos, sin = emb.cos().to(bf), emb.sin().to(bf)
    cases = {
        "bias_gelu": ((t(s, b, ffn_gpt), t(ffn_gpt)), {"gpt": 1}),
        "bias_dropout_add_train": ((t(s, b, h), t(h), t(s, b, h), 0.1), {"gpt": 2}),
        "bias_add_p0": ((t(s, b, h), t(h), t(s, b, h), 0.0), {}),
        "swiglu": ((t(s, b, 2 * ffn_llama),), {"llama": 1}),
        "rotary": ((t(s, b, heads, d), cos, sin), {"llama": 2}),
        "dropout_add_no_bias": ((t(s, b, h), None, t(s, b, h), 0.0), {"llama": 2}),
    }
    eager = dict(fused_ops.KERNELS, bias_dropout_add_train=bias_dropout_add_train)
    compiled = dict(fused_ops.compile_kernels(True), bias_dropout_add_train=torch.compile(bias_dropout_add_train, dynamic=False))
    print("compiled:", fused_ops.STATE)
    rows, saving = [], {"gpt": 0.0, "llama": 0.0}
    for name, (args, uses) in cases.items():
        kernel = name if name in eager else "bias_dropout_add_train"
        e_ms = timed(eager[kernel], args, a.reps)
        c_ms = timed(compiled[kernel], args, a.reps)
        e_err, c_err = error(eager[kernel], eager[kernel], args), error(compiled[kernel], eager[kernel], args)
        row = {"op": name, "eager_ms": round(e_ms, 3), "compiled_ms": round(c_ms, 3), "speedup": round(e_ms / c_ms, 2),
               "eager_err_vs_fp32": e_err, "compiled_err_vs_fp32": c_err, "uses_per_layer": uses}
        rows.append(row)
        for model, n in uses.items():
            saving[model] += (e_ms - c_ms) * n * LAYERS * a.grad_acc
        print(json.dumps(row), flush=True)
    print("FUSED_OPS_BENCH micro=%d grad_acc=%d saving per iteration: gpt %.0f ms, llama %.0f ms" % (
        a.micro, a.grad_acc, saving["gpt"], saving["llama"]))
    out = os.environ.get("OUT")
    if out:
        with open(os.path.join(out, "fused_ops_bench-m%d.json" % a.micro), "w") as f:
            json.dump({"rows": rows, "saving_ms": saving, "torch": torch.__version__}, f, indent=1)


if __name__ == "__main__":
    main()
