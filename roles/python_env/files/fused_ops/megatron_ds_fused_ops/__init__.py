# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""torch.compile'd stand-ins for the elementwise chains of Megatron-DeepSpeed's transformer layer
that run unfused on torch 2.11: Megatron's bias-GeLU, rotary embeddings and SwiGLU (issue 18).

Megatron-DeepSpeed HEAD fuses bias+GeLU with TorchScript (megatron/model/fused_bias_gelu.py),
whose GPU fuser is gone from torch >= 2.2, so the cu130 stack profile turns that path off
(--no-bias-gelu-fusion: a bias add and an erf GeLU). Rotary embeddings
(megatron/model/rotary_pos_embedding.py apply_rotary_pos_emb) and SwiGLU (the closure in
megatron/model/transformer.py ParallelMLP.__init__) run as chains of separate PyTorch ops, with
no switch to fuse them. Each is written here once in plain PyTorch, with Megatron's arithmetic,
and compiled by torch.compile (one Triton kernel for the forward and one for the backward).

``install()`` replaces Megatron's functions when ``megatron.model.transformer`` is imported,
through an import hook, so the checkout's files stay as they are:

  * ``bias_gelu_impl``        (the --bias-gelu-fusion path; tanh GeLU, as Megatron's)
  * ``apply_rotary_pos_emb``  (--use-rotary-position-embeddings)
  * the SwiGLU activation of ``ParallelMLP`` (--swiglu)

Megatron's bias+dropout+add is left to Megatron: compiled, it measured slower than eager on
H200 (bench/gpu/fused_ops_bench.py), and a compiled dropout draws its own random numbers.

The python_env role installs this package with ``megatron_ds_fused_ops.pth``, which calls
``install()`` in every interpreter of the venv that has MEGATRON_DS_FUSED_OPS=1 in its
environment (the job's .deepspeed_env, megatron_job_fused_ops) and does nothing otherwise.
Without a GPU, or where torch.compile cannot be set up, the eager functions are used and
``STATE`` says why. Numerical equality with Megatron's arithmetic: tests/unit/roles/python_env/test_fused_ops.py;
the compiled kernels against float32 on the GPU, and their speed: bench/gpu/fused_ops_bench.py.
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
from typing import Any, Callable, Dict, Optional

import torch
import torch.nn.functional as F

__version__ = "1.0.0"
# The variable the .pth looks for (the job sets it), and the one that keeps the eager functions.
ENV = "MEGATRON_DS_FUSED_OPS"
EAGER_ENV = ENV + "_EAGER"
STATE: Dict[str, Any] = {"compiled": None, "patched": [], "why": ""}


# ------------------------------------------------------------------ the arithmetic, in eager form

def bias_gelu(y: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """Megatron's fused_bias_gelu.bias_gelu: the tanh approximation of GeLU of ``y + bias``."""
    x = bias + y
    return x * 0.5 * (1.0 + torch.tanh(0.79788456 * x * (1 + 0.044715 * x * x)))


def swiglu(x: torch.Tensor) -> torch.Tensor:
    """ParallelMLP's swiglu: silu of the first half of the last dimension times the second half."""
    a, b = torch.chunk(x, 2, dim=-1)
    return F.silu(a) * b


def rotary(t: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """apply_rotary_pos_emb's formula: t * cos + rotate_half(t) * sin over the first cos.shape[-1]
    channels, where rotate_half([x1, x2]) = [-x2, x1] (halves of the last dimension)."""
    rot = cos.shape[-1]
    if t.shape[-1] != rot:
        t_rot, t_pass = t[..., :rot], t[..., rot:]
    else:
        t_rot, t_pass = t, None
    x1, x2 = torch.chunk(t_rot, 2, dim=-1)
    out = t_rot * cos + torch.cat((-x2, x1), dim=-1) * sin
    return out if t_pass is None else torch.cat((out, t_pass), dim=-1)


# --------------------------------------------------------------------------------- compilation

# What install() compiles and patches in.
KERNELS: Dict[str, Callable] = {"bias_gelu": bias_gelu, "swiglu": swiglu, "rotary": rotary}


def compile_kernels(enabled: Optional[bool] = None) -> Dict[str, Callable]:
    """torch.compile each function once (shapes are fixed within a job: dynamic=False). On a host
    without CUDA, or where torch.compile cannot be set up, the eager functions stay."""
    if enabled is None:
        enabled = torch.cuda.is_available() and os.environ.get(EAGER_ENV, "") != "1"
    if not enabled:
        STATE.update(compiled=False, why="no CUDA device or %s=1" % EAGER_ENV)
        return dict(KERNELS)
    try:
        compiled = {name: torch.compile(fn, dynamic=False) for name, fn in KERNELS.items()}
    except Exception as exc:  # noqa: BLE001  torch.compile raises many kinds at set-up; the job goes on unfused
        STATE.update(compiled=False, why="torch.compile failed: %s" % exc)
        return dict(KERNELS)
    STATE.update(compiled=True, why="")
    return compiled


class _CosSin:
    """cos and sin of the rotary frequencies, cast to the activations' dtype the way Megatron's
    apply_rotary_pos_emb does, kept per (frequencies, length, dtype)."""

    def __init__(self) -> None:
        self.key: Any = None
        self.value: Any = None

    def __call__(self, freqs: torch.Tensor, t: torch.Tensor):
        key = (freqs.data_ptr(), tuple(freqs.shape), t.shape[0], t.dtype, t.device)
        if key != self.key:
            part = freqs[: t.shape[0]]
            self.key, self.value = key, (part.cos().to(t.dtype), part.sin().to(t.dtype))
        return self.value


def make_replacements(kernels: Dict[str, Callable]) -> Dict[str, Callable]:
    """The functions with Megatron's own signatures, calling the (compiled) kernels."""
    cos_sin = _CosSin()

    def apply_rotary_pos_emb(t, freqs):
        cos, sin = cos_sin(freqs, t)
        return kernels["rotary"](t, cos, sin)

    def bias_gelu_impl(y, bias):
        return kernels["bias_gelu"](y, bias)

    return {"apply_rotary_pos_emb": apply_rotary_pos_emb, "bias_gelu_impl": bias_gelu_impl,
            "swiglu": kernels["swiglu"]}


def patch_transformer(module: Any, replacements: Dict[str, Callable]) -> None:
    """Point megatron.model.transformer's module-level names at the replacements (its forward
    methods look them up at call time) and give every SwiGLU ParallelMLP the fused activation."""
    for name in ("bias_gelu_impl", "apply_rotary_pos_emb"):
        if hasattr(module, name):
            setattr(module, name, replacements[name])
            STATE["patched"].append(name)
    mlp = getattr(module, "ParallelMLP", None)
    if mlp is not None and not getattr(mlp.__init__, "_megatron_ds_fused", False):
        original = mlp.__init__

        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if getattr(self, "swiglu", False):
                self.activation_func = replacements["swiglu"]

        __init__._megatron_ds_fused = True  # type: ignore[attr-defined]
        mlp.__init__ = __init__
        STATE["patched"].append("ParallelMLP.swiglu")


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any, after: Callable[[Any], None]) -> None:
        self.loader, self.after = loader, after

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        self.after(module)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds megatron.model.transformer the usual way, then patches it once it has run."""

    def __init__(self, name: str, after: Callable[[Any], None]) -> None:
        self.name, self.after = name, after

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _PatchingLoader(spec.loader, self.after)
        return spec


def install(module_name: str = "megatron.model.transformer") -> None:
    """Patch ``module_name`` when it is imported (or now, if it already is). Once per process."""
    if any(isinstance(f, _Finder) for f in sys.meta_path) or STATE["patched"]:
        return
    replacements = make_replacements(compile_kernels())

    def after(module):
        patch_transformer(module, replacements)
        # One line per job in the training log, from global rank 0: what runs fused, and whether compiled.
        if os.environ.get("RANK", "0") == "0":
            print("megatron_ds fused ops: %s (compiled: %s%s)" % (
                ", ".join(STATE["patched"]), STATE["compiled"], "; " + STATE["why"] if STATE["why"] else ""),
                file=sys.stderr, flush=True)

    if module_name in sys.modules:
        after(sys.modules[module_name])
    else:
        sys.meta_path.insert(0, _Finder(module_name, after))
