# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The flash-attention SDPA adapter (roles/python_env/files/flash_attn_sdpa) on CPU in float32,
against float64 softmax attention, and its packaging (pyproject version == __version__)."""
from __future__ import annotations

import importlib
import importlib.util
import json
import math
import pathlib
import re
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

FILES = pathlib.Path(__file__).resolve().parents[4] / "roles" / "python_env" / "files"
ADAPTER = FILES / "flash_attn_sdpa"


@pytest.fixture(scope="module")
def adapter():
    """flash_attn from the role's files (no bytecode written there: the role copies the tree)."""
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    sys.path.insert(0, str(ADAPTER))
    try:
        for name in [m for m in sys.modules if m == "flash_attn" or m.startswith("flash_attn.")]:
            del sys.modules[name]
        package = importlib.import_module("flash_attn")
        interface = importlib.import_module("flash_attn.flash_attn_interface")
        assert pathlib.Path(package.__file__).parent == ADAPTER / "flash_attn"
        yield package, interface.flash_attn_varlen_func
    finally:
        sys.path.remove(str(ADAPTER))
        sys.dont_write_bytecode = saved
        for name in [m for m in sys.modules if m == "flash_attn" or m.startswith("flash_attn.")]:
            del sys.modules[name]


def _role_check_module():
    """The role's own check script, whose float64 softmax attention is the reference here too."""
    spec = importlib.util.spec_from_file_location("check_flash_attn", str(FILES / "check_flash_attn.py"))
    loaded = importlib.util.module_from_spec(spec)
    saved = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        spec.loader.exec_module(loaded)
    finally:
        sys.dont_write_bytecode = saved
    return loaded


reference = _role_check_module().reference


def tensors(batch, seq, heads, kv_heads, dim, seed=0):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn(batch * seq, heads, dim, generator=gen)
    k = torch.randn(batch * seq, kv_heads, dim, generator=gen)
    v = torch.randn(batch * seq, kv_heads, dim, generator=gen)
    cu = torch.arange(0, (batch + 1) * seq, seq, dtype=torch.int32)
    return q, k, v, cu


@pytest.mark.parametrize(
    "batch, seq, heads, kv_heads, dim, causal, scale",
    [
        (2, 128, 4, 4, 64, True, None),     # Megatron's training call: causal, default scale
        (3, 64, 8, 8, 128, True, 0.1),
        (2, 64, 2, 2, 32, False, None),
        (1, 17, 3, 3, 16, False, 0.5),      # odd sizes
        (2, 64, 8, 2, 32, True, None),      # grouped-query: 4 query heads per kv head
        (2, 32, 6, 3, 16, False, 0.25),     # grouped-query, non-causal
        (2, 32, 4, 1, 16, True, None),      # multi-query
    ],
)
def test_uniform_batches_match_float64_attention(adapter, batch, seq, heads, kv_heads, dim, causal, scale):
    dummy, func = adapter
    q, k, v, cu = tensors(batch, seq, heads, kv_heads, dim)
    out = func(q, k, v, cu, cu, seq, seq, 0.0, softmax_scale=scale, causal=causal)
    assert out.shape == (batch * seq, heads, dim) and out.dtype == torch.float32
    ref = reference(q, k, v, batch, causal, scale if scale is not None else 1 / math.sqrt(dim))
    assert ((out.double() - ref).norm() / ref.norm()).item() < 1e-5


def test_causal_differs_from_non_causal(adapter):
    # The mask is applied (a guard against an adapter that ignores causal=).
    dummy, func = adapter
    q, k, v, cu = tensors(2, 32, 2, 2, 16)
    assert not torch.allclose(func(q, k, v, cu, cu, 32, 32, causal=True), func(q, k, v, cu, cu, 32, 32, causal=False))


@pytest.mark.parametrize(
    "shapes, kwargs, words",
    [
        # Ragged cu_seqlens: 2 sequences of 2 and 3 tokens (max 3), total 5 != 2 x 3.
        ((5, 2, 2, 8, [0, 2, 5], 3), {}, "sequences of different lengths"),
        ((7, 2, 2, 8, [0, 4, 7], 4), {"causal": True}, "sequences of different lengths"),
        # Keys of another length with causal=True: flash-attn's bottom-right mask is not SDPA's.
        ((8, 2, 2, 8, [0, 4, 8], 4), {"causal": True, "kv_total": 12, "max_k": 6}, "causal attention needs equal q/k lengths"),
        # Query heads not a multiple of the kv heads.
        ((8, 3, 2, 8, [0, 4, 8], 4), {}, "not a multiple of 2 key/value heads"),
        # flash-attn 2 arguments the adapter does not implement.
        ((8, 2, 2, 8, [0, 4, 8], 4), {"window_size": (64, 0)}, "unsupported arguments ['window_size']"),
        ((8, 2, 2, 8, [0, 4, 8], 4), {"alibi_slopes": None, "return_attn_probs": True},
         "unsupported arguments ['alibi_slopes', 'return_attn_probs']"),
    ],
)
def test_unsupported_calls_raise(adapter, shapes, kwargs, words):
    dummy, func = adapter
    total, heads, kv_heads, dim, cu_list, max_q = shapes
    kwargs = dict(kwargs)
    kv_total = kwargs.pop("kv_total", total)
    max_k = kwargs.pop("max_k", max_q)
    causal = kwargs.pop("causal", False)
    q = torch.randn(total, heads, dim)
    k = torch.randn(kv_total, kv_heads, dim)
    v = torch.randn(kv_total, kv_heads, dim)
    cu = torch.tensor(cu_list, dtype=torch.int32)
    cu_k = torch.arange(0, kv_total + 1, max_k, dtype=torch.int32) if kv_total != total else cu
    with pytest.raises(NotImplementedError, match=re.escape(words)):
        func(q, k, v, cu, cu_k, max_q, max_k, 0.0, causal=causal, **kwargs)


def test_package_metadata_matches_the_module(adapter):
    package, dummy = adapter
    text = (ADAPTER / "pyproject.toml").read_text()
    assert re.search(r'^name = "megatron-ds-flash-attn-sdpa"$', text, re.M)
    assert re.search(r'^version = "([^"]+)"$', text, re.M).group(1) == package.__version__
    assert re.search(r'^packages = \["flash_attn"\]$', text, re.M)
    assert package.ADAPTER == "torch-sdpa"


def test_role_check_script_passes_on_the_adapter(tmp_path):
    # The role's verify step, run the way the role runs it (its own process, CPU, float32).
    env = {"PYTHONPATH": str(ADAPTER), "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, str(FILES / "check_flash_attn.py")], cwd=str(tmp_path), env=env,
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["adapter"] == "torch-sdpa" and result["checked"] and result["ok"]
    assert result["device"] == "cpu" and result["dtype"] == "float32" and result["worst_rel_err"] < 1e-5


def test_role_owner_probe_reads_the_expected_version(tmp_path):
    out = subprocess.run([sys.executable, "-I", str(FILES / "flash_attn_owner.py"), str(ADAPTER)],
                         capture_output=True, text=True, check=True)
    result = json.loads(out.stdout)
    assert result["expected"] == "2.0.0+sdpa"
    assert set(result) == {"owners", "loose", "expected"}
