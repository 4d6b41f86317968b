# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""megatron_ds_fused_ops (roles/python_env/files/fused_ops): its three functions against independent forms of Megatron-DeepSpeed's
arithmetic (values and gradients, float64 on the CPU), and the import hook that puts them into
megatron.model.transformer (a stand-in module with Megatron's names, in a subprocess so that the
hook leaves this interpreter alone). The compiled kernels are checked on the GPU host by
bench/gpu/fused_ops_bench.py."""
import math
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

PACKAGE_DIR = pathlib.Path(__file__).resolve().parents[4] / "roles" / "python_env" / "files" / "fused_ops"
sys.path.insert(0, str(PACKAGE_DIR))
import megatron_ds_fused_ops as fused_ops  # noqa: E402  (a role's file, installed into the venv on the nodes)


def _t(*shape):
    return torch.randn(*shape, dtype=torch.float64).requires_grad_(True)


def _rotate_half_by_index(x):
    # [-x2, x1]: channel i < half takes -x[i + half], channel i >= half takes x[i - half]
    half = x.shape[-1] // 2
    idx = torch.arange(x.shape[-1])
    src = torch.where(idx < half, idx + half, idx - half)
    sign = torch.where(idx < half, -1.0, 1.0).to(x.dtype)
    return x[..., src] * sign


def _gelu_tanh_grad(x):
    # d/dx of 0.5 x (1 + tanh(k (x + 0.044715 x^3))), k = sqrt(2 / pi)
    k = math.sqrt(2 / math.pi)
    inner = k * (x + 0.044715 * x ** 3)
    th = torch.tanh(inner)
    return 0.5 * (1 + th) + 0.5 * x * (1 - th ** 2) * k * (1 + 3 * 0.044715 * x ** 2)


@pytest.mark.parametrize("shape, rot", [
    ((6, 2, 3, 8), 8),      # every channel rotated
    ((5, 1, 2, 12), 8),     # partial rotary: the last 4 channels pass through
    ((4, 3, 1, 2), 2),
])
def test_rotary_matches_the_rotate_half_formula(shape, rot):
    t = _t(*shape)
    half_angles = torch.rand(shape[0], 1, 1, rot // 2, dtype=torch.float64) * 6
    angles = torch.cat((half_angles, half_angles), dim=-1)  # RotaryEmbedding: channel i and i + rot/2 share a frequency
    cos, sin = angles.cos(), angles.sin()
    out = fused_ops.rotary(t, cos, sin)
    want = torch.cat((t[..., :rot] * cos + _rotate_half_by_index(t[..., :rot]) * sin, t[..., rot:]), dim=-1)
    assert torch.allclose(out, want, atol=1e-12)
    # the rotation keeps each pair's norm: a check that does not repeat the formula
    pairs = t[..., :rot].reshape(*shape[:-1], 2, rot // 2)
    got_pairs = out[..., :rot].reshape(*shape[:-1], 2, rot // 2)
    assert torch.allclose(pairs.norm(dim=-2), got_pairs.norm(dim=-2), atol=1e-10)
    assert torch.autograd.gradcheck(lambda x: fused_ops.rotary(x, cos, sin), (t,))


@pytest.mark.parametrize("shape", [(3, 2, 8), (1, 1, 2), (4, 6)])
def test_swiglu_is_silu_of_the_first_half_times_the_second(shape):
    x = _t(*shape)
    half = shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    assert torch.allclose(fused_ops.swiglu(x), a / (1 + torch.exp(-a)) * b, atol=1e-12)
    assert torch.autograd.gradcheck(fused_ops.swiglu, (x,))


@pytest.mark.parametrize("shape", [(3, 2, 8), (2, 5)])
def test_bias_gelu_and_its_gradient_match_megatrons_tanh_formulas(shape):
    y, bias = _t(*shape), _t(shape[-1])
    out = fused_ops.bias_gelu(y, bias)
    x = (y + bias).detach()
    assert torch.allclose(out, 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), atol=1e-8)
    g = torch.randn_like(out)
    out.backward(g)
    # Megatron's bias_gelu_back returns the same tensor for the input and the bias (summed by autograd)
    assert torch.allclose(y.grad, _gelu_tanh_grad(x) * g, atol=1e-7)
    assert torch.allclose(bias.grad, (_gelu_tanh_grad(x) * g).reshape(-1, shape[-1]).sum(0), atol=1e-7)


@pytest.mark.parametrize("enabled, env, compiled", [
    (False, {}, False),
    (None, {"MEGATRON_DS_FUSED_OPS_EAGER": "1"}, False),
])
def test_compile_kernels_falls_back_to_the_eager_functions(monkeypatch, enabled, env, compiled):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    kernels = fused_ops.compile_kernels(enabled)
    assert kernels == fused_ops.KERNELS
    assert fused_ops.STATE["compiled"] is compiled and fused_ops.STATE["why"]


def test_rotary_replacement_caches_cos_and_sin_per_length_and_dtype():
    calls = []

    def kernel(t, cos, sin):
        calls.append((cos, sin))
        return t

    apply = fused_ops.make_replacements(dict(fused_ops.KERNELS, rotary=kernel))["apply_rotary_pos_emb"]
    freqs = torch.rand(8, 1, 1, 4, dtype=torch.float64)
    apply(torch.zeros(8, 1, 1, 4, dtype=torch.float32), freqs)
    apply(torch.zeros(8, 1, 1, 4, dtype=torch.float32), freqs)
    apply(torch.zeros(6, 1, 1, 4, dtype=torch.float32), freqs)
    assert calls[0][0] is calls[1][0]                       # same length and dtype: kept
    assert calls[2][0].shape[0] == 6 and calls[2][0].dtype == torch.float32   # Megatron casts to t's dtype
    assert torch.allclose(calls[2][1].double(), freqs[:6].sin(), atol=1e-6)


STAND_IN = '''
import torch
def bias_gelu_impl(y, bias): return "original"
def bias_dropout_add_fused_train(x, bias, residual, prob): return "original"
def apply_rotary_pos_emb(t, freqs): return "original"
class ParallelMLP:
    def __init__(self, swiglu):
        self.swiglu = swiglu
        self.activation_func = "original"
'''


def test_install_patches_megatron_transformer_when_it_is_imported(tmp_path):
    pkg = tmp_path / "megatron" / "model"
    pkg.mkdir(parents=True)
    (tmp_path / "megatron" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "transformer.py").write_text(STAND_IN)
    probe = textwrap.dedent('''
        import json, sys
        sys.path[:0] = [%r, %r]
        import megatron_ds_fused_ops as fused_ops
        fused_ops.install()
        fused_ops.install()  # a second call changes nothing
        assert "megatron.model.transformer" not in sys.modules
        from megatron.model import transformer as tr
        print(json.dumps({
            "names": [n for n in ("bias_gelu_impl", "bias_dropout_add_fused_train", "apply_rotary_pos_emb")
                      if getattr(tr, n).__module__ == "megatron_ds_fused_ops"],
            "swiglu": tr.ParallelMLP(True).activation_func is fused_ops.KERNELS["swiglu"],
            "gelu_mlp": tr.ParallelMLP(False).activation_func,
            "state": fused_ops.STATE}))
    ''' % (str(PACKAGE_DIR), str(tmp_path)))
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", RANK="0")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=False, timeout=300)
    assert done.returncode == 0, done.stderr
    import json
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["names"] == ["bias_gelu_impl", "apply_rotary_pos_emb"]  # bias+dropout+add stays Megatron's
    assert got["swiglu"] is True and got["gelu_mlp"] == "original"
    assert got["state"]["compiled"] is False
    assert "megatron_ds fused ops: bias_gelu_impl, apply_rotary_pos_emb, ParallelMLP.swiglu (compiled: False" in done.stderr
    assert done.stderr.count("megatron_ds fused ops") == 1


@pytest.mark.parametrize("env, imported", [
    ({}, False),                               # a venv's every other interpreter: nothing happens
    ({"MEGATRON_DS_FUSED_OPS": "0"}, False),
    ({"MEGATRON_DS_FUSED_OPS": "1"}, True),    # the job's ranks (.deepspeed_env)
])
def test_the_pth_line_installs_the_hook_only_for_the_job(env, imported):
    line = (PACKAGE_DIR / "megatron_ds_fused_ops.pth").read_text()
    assert line.startswith("import ") and line.count("\n") == 1  # site.py executes a .pth line only if it starts so
    probe = ("import sys; sys.path.insert(0, %r); exec(%r); import json; "
             "print(json.dumps(['megatron_ds_fused_ops' in sys.modules, "
             "any(type(f).__name__ == '_Finder' for f in sys.meta_path)]))" % (str(PACKAGE_DIR), line))
    clean = {k: v for k, v in os.environ.items() if k != "MEGATRON_DS_FUSED_OPS"}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False, timeout=300,
                          env=dict(clean, CUDA_VISIBLE_DEVICES="", **env))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[%s, %s]" % (str(imported).lower(), str(imported).lower())


def test_distribution_version_matches_the_package():
    import re
    text = (PACKAGE_DIR / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', text, re.M).group(1) == fused_ops.__version__
    assert 'packages = ["megatron_ds_fused_ops"]' in text
