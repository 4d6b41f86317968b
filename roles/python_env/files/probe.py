# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read what the training venv provides, as the launcher will see it; print one JSON object.

Run by the python_env role with the venv's interpreter and -I (so only the venv's own
packages count): python -I probe.py [MEGATRON_DIR]. Every import is tried separately and its
error recorded, so one broken package does not hide the others.
"""
import json
import os
import sys


def _dotted(number):
    """cuDNN and NCCL versions as torch returns them (8500, (2, 14, 3), 2.14.3) -> '8.5.0'."""
    if number is None:
        return None
    if isinstance(number, (tuple, list)):
        return ".".join(str(part) for part in number)
    number = int(number)
    if number >= 10000:  # NCCL 2.x packed as major*10000 + minor*100 + patch
        return "%d.%d.%d" % (number // 10000, number // 100 % 100, number % 100)
    return "%d.%d.%d" % (number // 1000, number // 100 % 10, number % 100)


def _error(exc):
    return "%s: %s" % (type(exc).__name__, exc)


def probe(megatron_dir):
    out = {
        "python": {"executable": sys.executable, "version": "%d.%d.%d" % sys.version_info[:3]},
        "venv": sys.prefix,
        "torch": {"version": None, "cuda": None, "cudnn": None, "nccl": None, "error": None},
        "torchvision": {"version": None, "error": None},
        "deepspeed": {"version": None, "error": None},
        "megatron_deepspeed": {"path": megatron_dir or None, "present": False, "error": None},
        "apex": {"present": False, "cuda_ext": False, "error": None},
    }
    try:
        import torch

        out["torch"]["version"] = torch.__version__
        out["torch"]["cuda"] = torch.version.cuda
        out["torch"]["cudnn"] = _dotted(torch.backends.cudnn.version())
        if torch.version.cuda:
            try:
                out["torch"]["nccl"] = _dotted(torch.cuda.nccl.version())
            except Exception as exc:  # a CUDA build without NCCL, or no driver on this node
                out["torch"]["error"] = "nccl: " + _error(exc)
    except Exception as exc:
        out["torch"]["error"] = _error(exc)
    # After torch: a torchvision built for another torch fails here ("operator torchvision::nms
    # does not exist"), which is what pretrain_gpt.py would meet at its first import.
    try:
        import torchvision

        out["torchvision"]["version"] = torchvision.__version__
    except Exception as exc:
        out["torchvision"]["error"] = _error(exc)
    try:
        import deepspeed

        out["deepspeed"]["version"] = deepspeed.__version__
    except Exception as exc:
        out["deepspeed"]["error"] = _error(exc)
    if megatron_dir and os.path.isdir(os.path.join(megatron_dir, "megatron")):
        sys.path.insert(0, megatron_dir)
        try:
            import megatron  # noqa: F401

            out["megatron_deepspeed"]["present"] = True
        except Exception as exc:
            out["megatron_deepspeed"]["error"] = _error(exc)
    try:
        import apex  # noqa: F401

        out["apex"]["present"] = hasattr(apex, "__path__") and os.path.isdir(
            os.path.join(list(apex.__path__)[0], "normalization"))
        if out["apex"]["present"]:
            import amp_C  # noqa: F401  (needs torch imported first: libc10.so)
            import fused_layer_norm_cuda  # noqa: F401

            out["apex"]["cuda_ext"] = True
    except Exception as exc:
        out["apex"]["error"] = _error(exc)
    return out


def main():
    # Imports print (DeepSpeed's accelerator banner, C++ code writing to fd 1): send all of it
    # to stderr, so stdout carries the JSON alone.
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        result = probe(sys.argv[1] if len(sys.argv) > 1 else None)
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
    sys.stdout.write(json.dumps(result, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
