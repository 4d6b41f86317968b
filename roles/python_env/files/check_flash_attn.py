# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Call flash_attn_varlen_func once, the way Megatron-DeepSpeed's FlashSelfAttention does
(--use-flash-attn-v2), and compare it with explicit softmax attention in float64.

Importing is not enough: an adapter that imports but computes another function would train
a wrong model. Uniform-length batches (cu_seqlens = arange(0, (b + 1) * s, s)), causal and
not, multi-head and grouped-query. On a GPU in bf16 (limit 1e-2 relative error), on CPU in
float32 (limit 1e-5); the real flash-attn has no CPU kernels, so without a GPU it is only
imported. Prints one JSON line; exit 0 when the check passes, 1 when it does not.

Usage: python check_flash_attn.py
"""
import json
import math
import sys

import torch

# (batch, seq, query heads, kv heads, head dim, causal)
CASES = [(2, 128, 4, 4, 64, True), (3, 256, 8, 8, 128, True), (2, 64, 2, 2, 32, False), (2, 64, 8, 2, 32, True)]


def reference(q, k, v, b, causal, scale):
    """softmax(q k^T * scale [+ causal mask]) v in float64, kv heads repeated for GQA."""
    q4, k4, v4 = (t.view(b, -1, t.shape[1], t.shape[2]).transpose(1, 2).double() for t in (q, k, v))
    if k4.shape[1] != q4.shape[1]:
        rep = q4.shape[1] // k4.shape[1]
        k4, v4 = k4.repeat_interleave(rep, dim=1), v4.repeat_interleave(rep, dim=1)
    scores = q4 @ k4.transpose(-1, -2) * scale
    if causal:
        s = scores.shape[-1]
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    out = torch.softmax(scores, -1) @ v4
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[1], v.shape[2])


def check(func, device, dtype):
    """The worst relative error of ``func`` over CASES."""
    generator = torch.Generator().manual_seed(0)
    worst = 0.0
    for b, s, h, hkv, d, causal in CASES:
        q = torch.randn(b * s, h, d, generator=generator).to(device=device, dtype=dtype)
        k, v = (torch.randn(b * s, hkv, d, generator=generator).to(device=device, dtype=dtype) for dummy in range(2))
        cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device=device)
        scale = 1 / math.sqrt(d)
        out = func(q, k, v, cu, cu, s, s, 0.0, softmax_scale=scale, causal=causal)
        ref = reference(q, k, v, b, causal, scale)
        worst = max(worst, ((out.double() - ref).norm() / ref.norm()).item())
    return worst


def main():
    import flash_attn
    from flash_attn.flash_attn_interface import flash_attn_varlen_func

    cuda = torch.cuda.is_available()
    result = {
        "version": getattr(flash_attn, "__version__", None),
        "adapter": getattr(flash_attn, "ADAPTER", None),
        "path": list(getattr(flash_attn, "__path__", [])),
        "device": "cuda" if cuda else "cpu",
        "dtype": "bfloat16" if cuda else "float32",
        "limit": 1e-2 if cuda else 1e-5,
        "worst_rel_err": None,
        "checked": False,
        "ok": True,
    }
    if cuda or result["adapter"]:
        worst = check(flash_attn_varlen_func, result["device"], torch.bfloat16 if cuda else torch.float32)
        result.update(worst_rel_err=worst, checked=True, ok=worst < result["limit"])
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
