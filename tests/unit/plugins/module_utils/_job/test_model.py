# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The transformer's formulas (plugins/module_utils/_job/model.py), and the rule that reads them:
Megatron-DeepSpeed's FFN default, parameters, FLOPs per token."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import model as _job_model
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules as _job_rules
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec


@pytest.mark.parametrize("preset,hidden,layers,seq,vocab,expected", [
    # GPT, f = 4h: Megatron-DeepSpeed's 72 L h^2 (1 + s/6h + V/12Lh) per token
    ("gpt", 2048, 24, 2048, 8192, 72 * 24 * 2048 ** 2 * (1 + 2048 / (6 * 2048) + 8192 / (12 * 24 * 2048))),
    # llama, f = 5440: 3 x 2 x (4h^2 + 3hf) per layer + scores + logits
    ("llama", 2048, 24, 2048, 8192, 3 * (2 * 24 * (4 * 2048 ** 2 + 3 * 2048 * 5440) + 4 * 24 * 2048 * 2048 + 2 * 2048 * 8192)),
])
def test_model_flops_per_token(preset, hidden, layers, seq, vocab, expected):
    spec = _job_spec.normalize({"hidden_size": hidden, "num_layers": layers, "seq_length": seq,
                                "num_attention_heads": 16, "max_position_embeddings": seq, "model_preset": preset})
    derived = dict(_job_spec.derive(spec, 1, 1), padded_vocab_size=vocab)
    assert _job_model.model_flops_per_token(spec, derived) == pytest.approx(expected)


@pytest.mark.parametrize("hidden,preset,ffn", [(2048, "gpt", 8192), (2048, "llama", 5440), (4096, "llama", 10880),
                                               (5120, "llama", 13632)])
def test_default_ffn_follows_megatron(hidden, preset, ffn):
    assert _job_model.default_ffn_hidden_size({"model_preset": preset}, hidden) == ffn


def test_llama_parameters_match_megatrons_count():
    spec = _job_spec.normalize({"hidden_size": 2048, "num_layers": 24, "num_attention_heads": 16, "seq_length": 2048,
                                "max_position_embeddings": 2048, "model_preset": "llama", "tokenizer_type": "NullTokenizer",
                                "vocab_size": 8191})
    assert _job_model.gpt_parameters(spec) == 1238468608  # Megatron printed it on the H200 host


@pytest.mark.parametrize("preset, hidden, heads, tp, ffn, status, fix", [
    # The llama preset's FFN is int(8h/3 / 64) x 64 = 4096 at h 1536; TP 3 does not divide it, and
    # the gated fc1 (2f = 8192) is the first layer whose divide() asserts.
    # (Judged as 4h = 6144 before, validation passed and Megatron stopped at start-up.)
    ("llama", 1536, 12, 3, 4096, "fail", "ColumnParallelLinear asserts '8192 is not divisible by 3'"),
    ("gpt", 1536, 12, 3, 6144, None, None),          # 4h = 6144 divides by 3
    ("llama", 1536, 12, 2, 4096, None, None),        # TP 2 divides 4096
])
def test_ffn_divisible_by_tp_uses_megatrons_default(preset, hidden, heads, tp, ffn, status, fix):
    spec = _job_spec.normalize({"hidden_size": hidden, "num_attention_heads": heads, "num_layers": 12,
                                "seq_length": 1024, "max_position_embeddings": 1024, "model_preset": preset,
                                "tensor_parallel": tp, "pipeline_parallel": 1, "stack_profile": "cu130",
                                "micro_batch_size": 1, "global_batch_size": 8})
    assert _job_spec.derive(spec, 1, tp)["ffn_hidden_size"] == ffn
    found = [f for f in _job_rules.validate(spec, cluster={"nodes": 1, "gpus_per_node": tp})
             if f["check"] == "ffn hidden % TP == 0"]
    if status is None:
        assert found == []
    else:
        assert [f["status"] for f in found] == [status]
        assert "ffn %d, TP %d" % (ffn, tp) in found[0]["found"]
        assert fix in found[0]["fix"]
