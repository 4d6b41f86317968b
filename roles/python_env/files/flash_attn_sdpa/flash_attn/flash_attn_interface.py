# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""flash_attn_varlen_func for uniform-length batches, on torch SDPA (see package doc)."""
import torch.nn.functional as F

__all__ = ["flash_attn_varlen_func"]


def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                           dropout_p=0.0, softmax_scale=None, causal=False, **unsupported):
    """Same arguments and result layout as flash-attn 2: q/k/v are (total_tokens, heads, dim)."""
    if unsupported:
        raise NotImplementedError("flash_attn SDPA adapter: unsupported arguments %s" % sorted(unsupported))
    batch = cu_seqlens_q.numel() - 1
    # Shapes alone prove uniform lengths when total == batch * max: no host sync needed.
    if q.shape[0] != batch * max_seqlen_q or k.shape[0] != batch * max_seqlen_k:
        raise NotImplementedError(
            "flash_attn SDPA adapter: sequences of different lengths in one batch "
            "(total %d tokens, %d sequences, max %d); install the real flash-attn for this"
            % (q.shape[0], batch, max_seqlen_q))
    if causal and max_seqlen_q != max_seqlen_k:
        # flash-attn aligns the causal mask to the bottom right; SDPA's is_causal to the top left.
        raise NotImplementedError("flash_attn SDPA adapter: causal attention needs equal q/k lengths")
    if q.shape[1] % k.shape[1] != 0:
        raise NotImplementedError(
            "flash_attn SDPA adapter: %d query heads are not a multiple of %d key/value heads"
            % (q.shape[1], k.shape[1]))
    q4, k4, v4 = (t.view(batch, -1, t.shape[1], t.shape[2]).transpose(1, 2) for t in (q, k, v))
    if k4.shape[1] != q4.shape[1]:  # grouped-query attention: repeat the kv heads
        rep = q4.shape[1] // k4.shape[1]
        k4, v4 = k4.repeat_interleave(rep, dim=1), v4.repeat_interleave(rep, dim=1)
    out = F.scaled_dot_product_attention(q4, k4, v4, dropout_p=dropout_p, is_causal=causal,
                                         scale=softmax_scale)
    return out.transpose(1, 2).reshape(q.shape[0], q.shape[1], v.shape[2])
