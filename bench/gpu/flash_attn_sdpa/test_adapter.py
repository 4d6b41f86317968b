"""Check the adapter against explicit softmax attention (float64) on random data."""
import math
import sys

import torch

from flash_attn.flash_attn_interface import flash_attn_varlen_func


def reference(q, k, v, b, causal, scale):
    q4, k4, v4 = (t.view(b, -1, t.shape[1], t.shape[2]).transpose(1, 2).double() for t in (q, k, v))
    scores = q4 @ k4.transpose(-1, -2) * scale
    if causal:
        s = scores.shape[-1]
        scores = scores.masked_fill(torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    out = torch.softmax(scores, -1) @ v4
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[1], v.shape[2])


def main() -> int:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    worst = 0.0
    for b, s, h, d, causal in [(2, 128, 4, 64, True), (3, 256, 8, 128, True), (2, 64, 2, 32, False)]:
        q, k, v = (torch.randn(b * s, h, d, device=device, dtype=dtype) for dummy in range(3))
        cu = torch.arange(0, (b + 1) * s, s, dtype=torch.int32, device=device)
        scale = 1 / math.sqrt(d)
        out = flash_attn_varlen_func(q, k, v, cu, cu, s, s, 0.0, softmax_scale=scale, causal=causal)
        ref = reference(q, k, v, b, causal, scale)
        err = ((out.double() - ref).norm() / ref.norm()).item()
        worst = max(worst, err)
        print("b=%d s=%d h=%d d=%d causal=%s rel_err=%.2e" % (b, s, h, d, causal, err))
    limit = 1e-2 if dtype == torch.bfloat16 else 1e-5
    print("adapter %s (worst %.2e, limit %.0e)" % ("OK" if worst < limit else "WRONG", worst, limit))
    return 0 if worst < limit else 1


if __name__ == "__main__":
    sys.exit(main())
