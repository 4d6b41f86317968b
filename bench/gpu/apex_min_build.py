# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Builds only the three NVIDIA apex extensions that Megatron-DeepSpeed imports at start-up
with --no-gradient-accumulation-fusion (amp_C, fused_layer_norm_cuda, apex_C), one process each
and all three at once, through torch.utils.cpp_extension.load. Sources and compiler flags are
those of apex's setup.py (--cpp_ext / --cuda_ext), which has no switch for a subset and builds
twelve extensions one after another (134-141 s on 32 cores for these three alone, arch 9.0).

    TORCH_CUDA_ARCH_LIST=9.0 MAX_JOBS=$(nproc) python3 bench/gpu/apex_min_build.py APEX_SRC OUT_DIR

OUT_DIR receives amp_C.so, fused_layer_norm_cuda.so and apex_C.so; put them and APEX_SRC/apex
on the interpreter's path. Each is imported once after its build (torch first: amp_C links
libc10).
"""
import os
import subprocess
import sys
import time

EXTENSIONS = {
    "apex_C": {"sources": ["csrc/flatten_unflatten.cpp"], "cxx": ["-O3"], "nvcc": None},
    "amp_C": {
        "sources": ["csrc/amp_C_frontend.cpp", "csrc/multi_tensor_sgd_kernel.cu", "csrc/multi_tensor_scale_kernel.cu",
                    "csrc/multi_tensor_axpby_kernel.cu", "csrc/multi_tensor_l2norm_kernel.cu",
                    "csrc/multi_tensor_l2norm_kernel_mp.cu", "csrc/multi_tensor_l2norm_scale_kernel.cu",
                    "csrc/multi_tensor_lamb_stage_1.cu", "csrc/multi_tensor_lamb_stage_2.cu", "csrc/multi_tensor_adam.cu",
                    "csrc/multi_tensor_adagrad.cu", "csrc/multi_tensor_novograd.cu", "csrc/multi_tensor_lamb.cu",
                    "csrc/multi_tensor_lamb_mp.cu", "csrc/update_scale_hysteresis.cu"],
        "cxx": ["-O3"], "nvcc": ["-lineinfo", "-O3", "--use_fast_math"],
    },
    "fused_layer_norm_cuda": {
        "sources": ["csrc/layer_norm_cuda.cpp", "csrc/layer_norm_cuda_kernel.cu"],
        "cxx": ["-O3"], "nvcc": ["-maxrregcount=50", "-O3", "--use_fast_math"],
    },
}


def build_one(name: str, src: str, out: str) -> None:
    import shutil

    import torch  # noqa: F401  (loaded before the extension: it links libc10)
    from torch.utils.cpp_extension import load

    ext = EXTENSIONS[name]
    build = os.path.join(out, "build-" + name)
    os.makedirs(build, exist_ok=True)
    load(name=name, sources=[os.path.join(src, s) for s in ext["sources"]], extra_cflags=ext["cxx"],
         extra_cuda_cflags=ext["nvcc"] or [], build_directory=build, with_cuda=ext["nvcc"] is not None, verbose=False)
    shutil.copy2(os.path.join(build, name + ".so"), os.path.join(out, name + ".so"))


def main() -> int:
    if len(sys.argv) == 4 and sys.argv[1] in EXTENSIONS:
        build_one(sys.argv[1], sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    src, out = (os.path.abspath(a) for a in sys.argv[1:])
    missing = [s for e in EXTENSIONS.values() for s in e["sources"] if not os.path.exists(os.path.join(src, s))]
    if missing:
        print("apex source %s lacks %s" % (src, ", ".join(missing)))
        return 2
    os.makedirs(out, exist_ok=True)
    start = time.time()
    procs = {name: subprocess.Popen([sys.executable, os.path.abspath(__file__), name, src, out]) for name in EXTENSIONS}
    failed = []
    for name, proc in procs.items():
        if proc.wait() != 0:
            failed.append(name)
        print("apex %s: rc %s at %.0f s" % (name, proc.returncode, time.time() - start), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
