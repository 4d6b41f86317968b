# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stack profiles and compatibility matrix: the one source of truth.

Roles read it through the ``megatron_ds.cluster.stack_profile`` lookup, preflight and job
validation import it directly. Change a version here and every installer and every check
follows. Every number carries its source (see docs/stack-profiles.md and docs/upstream-facts.md).

Version fields are *specs* understood by ``_versions.satisfies``: ``2.28`` means any 2.28.x,
``>=0.16.1,<=0.19.6`` a range. ``install`` fields are the exact artifact a role installs.
"""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional

# Minimum Linux x86_64 driver per CUDA release ("Toolkit Driver Version", CUDA release notes
# Table 3). Keys are the toolkit versions; a lookup falls back to major.minor only. A release
# without a row is an error (UnknownCudaError), never a guess: the major's compatibility floor
# (Table 2) runs a newer minor only with PTX JIT limits, so it is not a minimum for the stack.
CUDA_MIN_DRIVER: Dict[str, str] = {
    "11.7.0": "515.43.04",
    "11.7.1": "515.48.07",
    "11.7": "515.43.04",
    "11.8": "520.61.05",
    "12.1": "530.30.02",
    "13.0": "580.65.06",
}

# DeepSpeed op_builder/builder.py cuda_minor_mismatch_ok: within a major, nvcc and
# torch.version.cuda may differ in the minor only when both minors are listed.
# v0.9.2 lists 10.x and 11.x; HEAD adds 12.x (no 12.7) and has no entry for 13.
DS_CUDA_MINOR_MISMATCH_OK: Dict[int, List[str]] = {
    10: ["10.0", "10.1", "10.2"],
    11: ["11.0", "11.1", "11.2", "11.3", "11.4", "11.5", "11.6", "11.7", "11.8"],
    12: ["12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9"],
}

# DeepSpeed versions that Megatron-DeepSpeed HEAD imports (docs/upstream-facts.md §E, "version coupling"):
# deepspeed.sequence.fpdt_layer appears in 0.16.1, deepspeed.compression.compress is gone
# in 0.19.7.
MDS_HEAD_DEEPSPEED = ">=0.16.1,<=0.19.6"

# CUDA redist components a Megatron-DeepSpeed node needs: nvcc and headers for apex and the
# DeepSpeed/Megatron JIT kernels (cccl: CUB/Thrust), the runtime, and the math libraries whose
# headers torch extensions include. Names are the keys of NVIDIA's redistrib_<ver>.json.
REDIST_COMPONENTS_11: List[str] = [
    "cuda_cccl", "cuda_cudart", "cuda_cupti", "cuda_nvcc", "cuda_nvml_dev", "cuda_nvrtc",
    "cuda_nvtx", "libcublas", "libcufft", "libcurand", "libcusolver", "libcusparse",
]
REDIST_COMPONENTS_12: List[str] = sorted(REDIST_COMPONENTS_11 + ["cuda_profiler_api", "libnvjitlink"])
# CUDA 13 split nvcc: the crt headers and libnvvm are components of their own.
REDIST_COMPONENTS_13: List[str] = sorted(REDIST_COMPONENTS_12 + ["cuda_crt", "libnvvm"])

PROFILES: Dict[str, Dict[str, Any]] = {
    "cu117": {
        "description": "The guide's stack: CUDA 11.7.1, cuDNN 8.6, NCCL 2.16.5, torch 1.13.1, DeepSpeed 0.9.2",
        "accelerator": "cuda",
        "driver": {"min": "515.65.01", "install": "515.65.01", "branch": "515"},
        "cuda": {
            "version": "11.7.1",
            "install": "11.7.1",
            "runfile": "cuda_11.7.1_515.65.01_linux.run",
            "runfile_sha256": "52286a29706549b7d0feeb0e7e3eca1b15287c436a69fa880ad385b1be3e04db",
            # Redist install: the components named here are taken from redistrib_<install>.json,
            # which carries each archive's sha256. Pin the manifest itself here once you have
            # verified it (None: trust the manifest served over HTTPS or by your mirror).
            "redist_components": REDIST_COMPONENTS_11,
            "redist_manifest_sha256": None,
        },
        # sha256 of cudnn-linux-x86_64-8.6.0.163_cuda11-archive.tar.xz (nixpkgs cudnn
        # releases.nix, SRI sha256-u8OW30cpTGV+3AnGAGdNYIyxv8gLgtz0VHBgwhcRFZ4=). NVIDIA's cuDNN
        # manifests are known (TensorFlow's list) only from 8.9.4.25 on, so it is pinned here.
        # version: what the check compares, at the precision cudnn_version.h carries
        # (MAJOR.MINOR.PATCHLEVEL, never the build number); install: the archive's full version.
        "cudnn": {
            "version": "8.6.0",
            "install": "8.6.0.163",
            "cuda_major": 11,
            "sha256": "bbc396df47294c657edc09c600674d608cb1bfc80b82dcf4547060c21711159e",
        },
        # NCCL ships no 11.7 build; the cuda11.8 build is minor-version compatible.
        # NVIDIA publishes no checksum for the txz: record the one you verified (nccl_sha256).
        "nccl": {"version": "2.16.5", "install": "2.16.5-1", "cuda_build": "11.8", "sha256": None},
        "python": {"version": ">=3.8,<=3.11", "preferred": "3.9"},
        "torch": {
            "version": "1.13.1",
            "pip": "torch==1.13.1",
            # CPython versions with a linux x86_64 wheel of this torch (PyPI; checked with pip
            # --dry-run --python-version). python_env refuses any other interpreter up front.
            "wheel_pythons": ["3.7", "3.8", "3.9", "3.10", "3.11"],
            "cuda": "11.7",
            "local": "cu117",
            "index_url": "https://download.pytorch.org/whl/cu117",
            # torchvision: the release paired with this torch in PyTorch's compatibility table,
            # from the same index. Head-era megatron/training.py imports the vision code at
            # module level (megatron/data/vit_dataset.py:6 imports torchvision), so
            # pretrain_gpt.py does not start without it.
            "torchvision": "torchvision==0.14.1",
            # The PyPI cu117 wheel pulls nvidia-cudnn-cu11==8.5.0.96 and links NCCL statically.
            "cudnn": "8.5",
            "nccl": None,
        },
        "deepspeed": {"version": "0.9.2", "pip": "deepspeed==0.9.2"},
        # DeepSpeed 0.9.2 needs pydantic 1.x and fails to import with NumPy 2 (docs/upstream-facts.md §H).
        "pip_extra": ["pydantic<2", "numpy<2"],
        # era: the flag table (_mds_args) and requirement set (python_env) of the checkout.
        "megatron_deepspeed": {"ref": "before_rebase", "era": "before_rebase", "needs_apex": True},
        # NVIDIA apex commit of the profile's torch era: tag 23.05 (2023-04), torch 1.13 era.
        "apex": {"ref": "0da3ffb92ee6fbe5336602f0e3989db1cd16f880"},
        # DeepSpeed 0.9.2 fails to import with NumPy 2.
        "numpy": "1.24.4",
        "megatron_flags": [],
        # before_rebase has no --use-flash-attn* flags at all (docs/upstream-facts.md §A).
        "flash_attn": None,
        # GPU architectures (gpu_arch.py). torch: torch.cuda.get_arch_list() of the wheel, as
        # torch 1.13.1+cu117 prints it when it meets an H100 ("supports CUDA capabilities sm_37
        # sm_50 sm_60 sm_70 sm_75 sm_80 sm_86", quoted in pytorch/pytorch#90761, 2022-12-13; not
        # run here). toolkit: what CUDA 11.7's nvcc can build apex and DeepSpeed's ops for; sm_90
        # (Hopper) and sm_89 (Ada) first came with CUDA 11.8 (NVIDIA's "CUDA Toolkit, Driver, and
        # Architecture Matrix").
        "arch": {
            "torch": ["sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"],
            "toolkit": ["3.5", "8.7"],
            "source": "torch's own warning quoted in pytorch/pytorch#90761; CUDA 11.8 is the first toolkit with sm_90",
            "verified": False,
        },
    },
    "cu121": {
        "description": "CUDA 12.1.1, cuDNN 8.9 (cuda12), NCCL 2.18, torch 2.1, DeepSpeed 0.16.1-0.19.6",
        "accelerator": "cuda",
        "driver": {"min": "530.30.02", "install": "530.30.02", "branch": "530"},
        "cuda": {
            "version": "12.1",
            "install": "12.1.1",
            "runfile": "cuda_12.1.1_530.30.02_linux.run",
            "runfile_sha256": "d74022d41d80105319dfa21beea39b77a5b9919539c0487a05caaf2446d6a70e",
            "redist_components": REDIST_COMPONENTS_12,
            "redist_manifest_sha256": None,
        },
        # sha256 from NVIDIA's cudnn redistrib_8.9.7.29.json (linux-x86_64, cuda12).
        "cudnn": {
            "version": "8.9",
            "install": "8.9.7.29",
            "cuda_major": 12,
            "sha256": "475333625c7e42a7af3ca0b2f7506a106e30c93b1aa0081cd9c13efb6e21e3bb",
        },
        "nccl": {"version": "2.18", "install": "2.18.1-1", "cuda_build": "12.1", "sha256": None},
        "python": {"version": "3.10", "preferred": "3.10"},
        "torch": {
            "version": "2.1",
            "pip": "torch==2.1.2",
            "wheel_pythons": ["3.8", "3.9", "3.10", "3.11"],
            "cuda": "12.1",
            "local": "cu121",
            "index_url": "https://download.pytorch.org/whl/cu121",
            "torchvision": "torchvision==0.16.2",
            "cudnn": "8.9",
            "nccl": "2.18",
        },
        "deepspeed": {"version": MDS_HEAD_DEEPSPEED, "pip": "deepspeed==0.19.6"},
        "pip_extra": [],
        "megatron_deepspeed": {"ref": "main", "era": "head", "needs_apex": True},
        "apex": {"ref": "4138d31ff0acf4071d1dc001ccb7cd6e00800324"},  # tag 24.04.01
        # torch 2.1 was built against NumPy 1.x and cannot exchange arrays with NumPy 2.
        "numpy": "1.26.4",
        "megatron_flags": [],
        # Megatron-DeepSpeed HEAD has --use-flash-attn-v2; the unfused path is not known to fail
        # with torch 2.1, so flash attention stays the user's choice (python_env_flash_attn).
        "flash_attn": {"required": False, "provider": None},
        # torch: the list the PyTorch cu121 wheels print in "not compatible" warnings (sm_50 to
        # sm_90, e.g. FlyMyAI/flymyai-lora-trainer#47); not verified here for 2.1.2 itself.
        # toolkit: CUDA 12 dropped Kepler (sm_35/37); 12.1 builds up to sm_90, Blackwell came
        # with 12.8 (NVIDIA's architecture matrix).
        "arch": {
            "torch": ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
            "toolkit": ["5.0", "9.0"],
            "source": "PyTorch cu12x wheels' get_arch_list (not verified here for 2.1.2); NVIDIA's architecture matrix",
            "verified": False,
        },
    },
    "cu130": {
        "description": "Hopper hosts: CUDA 13.0, cuDNN 9, NCCL 2.28, torch 2.11, DeepSpeed 0.16.1-0.19.6",
        "accelerator": "cuda",
        "driver": {"min": "580.65.06", "install": "580.65.06", "branch": "580"},
        "cuda": {
            "version": "13.0",
            "install": "13.0.2",
            "runfile": None,
            "runfile_sha256": None,
            "redist_components": REDIST_COMPONENTS_13,
            "redist_manifest_sha256": None,
        },
        # cuDNN 9 publishes redistrib_<ver>.json: the sha256 is read from it (sha256 None).
        "cudnn": {"version": "9", "install": "9.14.0.64", "cuda_major": 13, "sha256": None},
        "nccl": {"version": "2.28", "install": "2.28.3-1", "cuda_build": "13.0", "sha256": None},
        "python": {"version": "3.12", "preferred": "3.12"},
        "torch": {
            "version": "2.11",
            "pip": "torch==2.11.0",
            "wheel_pythons": ["3.10", "3.11", "3.12", "3.13", "3.14"],
            "cuda": "13.0",
            "local": "cu130",
            "index_url": "https://download.pytorch.org/whl/cu130",
            "torchvision": "torchvision==0.26.0",
            "cudnn": "9",
            "nccl": "2.28",
        },
        "deepspeed": {"version": MDS_HEAD_DEEPSPEED, "pip": "deepspeed==0.19.6"},
        "pip_extra": [],
        "megatron_deepspeed": {"ref": "main", "era": "head", "needs_apex": True},
        # apex of 2026-07-08: the one that built against torch 2.11 on the H200 host.
        "apex": {"ref": "6424da3b4faa6c8f062da4a48c424fff3f02d42d"},
        "numpy": "2.2.6",
        # The Megatron JIT softmax kernels always target sm_70, which nvcc 13 cannot build.
        "megatron_flags": ["--no-masked-softmax-fusion"],
        # The unfused attention path fails on torch 2.11 (docs/upstream-facts.md §G: CoreAttention.forward
        # calls .view on non-contiguous query/key/value), so --use-flash-attn-v2 is required.
        # flash-attn is a source build that outlasts provisioning; "sdpa" installs the
        # collection's adapter serving flash_attn_varlen_func from torch's fused SDPA kernels.
        "flash_attn": {"required": True, "provider": "sdpa"},
        # torch >= 2.2 has no TorchScript GPU fuser left for Megatron's @torch.jit.script
        # bias-GeLU: set_jit_fusion_options() turns NNC off and asks for nvfuser, a no-op, so
        # the "fused" function runs as one kernel per operation (34 for forward + backward, 5x
        # the time of a bias add + GeLU; 35.8% vs 46.0% MFU on 2 x H200, docs/benchmarks.md).
        "torchscript_fusion": False,
        # The collection's torch.compile'd bias-GeLU, rotary embedding and SwiGLU
        # (roles/python_env/files/fused_ops), opted in by this profile: on one H200 the llama
        # preset ran 419.0 -> 492.9 TFLOP/s and the GPT 452.8 -> 466.0 (docs/benchmarks.md).
        "fused_ops": True,
        # torch: sm_90 verified: torch 2.11.0+cu130 ran on the 2 x H200 host (capability 9.0,
        # docs/upstream-facts.md §G; tests/fixtures/gpu-host-h200x2/gpu-host-stack.txt). The
        # rest (sm_75 to sm_120) follows the cu128 wheels' list and is not verified here.
        # toolkit: CUDA 13 dropped Maxwell, Pascal and Volta (last supported by 12.x) and builds
        # Blackwell (10.0, 12.0) (NVIDIA's architecture matrix).
        "arch": {
            "torch": ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
            "toolkit": ["7.5", "12.0"],
            "source": "sm_90 ran on the H200 host (2026-11-29); the other entries not verified here",
            "verified": False,
        },
    },
    "cpu": {
        "description": "Simulated cluster and tests: no GPU, torch CPU, DeepSpeed over gloo",
        "accelerator": "cpu",
        "driver": None,
        "cuda": None,
        "cudnn": None,
        "nccl": None,
        "python": {"version": ">=3.10", "preferred": "3.11"},
        "torch": {
            "version": "2.13",
            # The CPU build (2.13.0+cpu) comes from index_url or a wheelhouse; PyPI's 2.13.0 is
            # a CUDA build with several GB of NVIDIA wheels.
            "pip": "torch==2.13.0",
            "wheel_pythons": ["3.10", "3.11", "3.12", "3.13", "3.14"],
            "cuda": None,
            "local": "cpu",
            "index_url": "https://download.pytorch.org/whl/cpu",
            # No torchvision: PyPI's is a CUDA build whose _C.so links libc10_cuda.so and
            # libtorch_cuda.so, so it does not load beside this CPU torch ("operator
            # torchvision::nms does not exist"), and the CPU index's 0.28.0+cpu is not mirrored
            # where the collection is tested. This profile runs the burn-in and the role tests;
            # pretrain_gpt.py needs torchvision, and preflight's import check refuses it here,
            # naming the profile cpu-pypi (docs/stack-profiles.md).
            "torchvision": None,
            "cudnn": None,
            "nccl": None,
        },
        # DeepSpeed >= 0.14.1 falls back to gloo when oneCCL is missing (docs/upstream-facts.md §D5).
        "deepspeed": {"version": MDS_HEAD_DEEPSPEED, "pip": "deepspeed==0.19.6"},
        "pip_extra": [],
        "megatron_deepspeed": {"ref": "main", "era": "head", "needs_apex": False},
        "apex": None,  # Megatron-DeepSpeed imports apex only on CUDA
        "numpy": "2.2.6",
        "megatron_flags": [],
        # Megatron's FlashSelfAttention asserts its tensors are on the accelerator and fp16/bf16:
        # nothing to install on CPU, and the unfused path runs there (docs/upstream-facts.md §D5).
        "flash_attn": {"required": False, "provider": None},
        "arch": None,  # no GPU code
    },
    # The real pretrain_gpt.py on CPU nodes (make demo with MEGATRON_DS_SRC). PyPI's torch for
    # linux x86_64 is a CUDA 13.0 build that runs on a machine without a GPU, and PyPI's
    # torchvision of the same release loads beside it; together about 5.5 GB in the venv (the
    # cpu profile's torch is about 0.7 GB). Verified here on 2026-12-07: the unmodified
    # Megatron-DeepSpeed 4efb479d imports pretrain_gpt.py's modules with torch 2.14.1+cu130,
    # torchvision 0.29.1 and DeepSpeed 0.19.6 (DS_ACCELERATOR=cpu), CPython 3.11.
    "cpu-pypi": {
        "description": "Simulated cluster running the real trainer: PyPI's torch and torchvision (CUDA builds) on CPU",
        "accelerator": "cpu",
        "driver": None,
        "cuda": None,
        "cudnn": None,
        "nccl": None,
        "python": {"version": ">=3.10", "preferred": "3.11"},
        "torch": {
            "version": "2.14",
            "pip": "torch==2.14.1",
            # Only 3.11 was installed here; PyPI publishes 2.14.1 for the same CPythons as 2.13.
            "wheel_pythons": ["3.10", "3.11", "3.12", "3.13", "3.14"],
            # torch.version.cuda of the PyPI build: it brings CUDA 13.0 user-space libraries as
            # nvidia-* wheels, which load without a driver; no CUDA code runs here.
            "cuda": "13.0",
            "local": None,
            "index_url": None,
            "torchvision": "torchvision==0.29.1",
            "cudnn": None,
            "nccl": None,
        },
        "deepspeed": {"version": MDS_HEAD_DEEPSPEED, "pip": "deepspeed==0.19.6"},
        "pip_extra": [],
        "megatron_deepspeed": {"ref": "main", "era": "head", "needs_apex": False},
        "apex": None,
        "numpy": "2.2.6",
        "megatron_flags": [],
        "flash_attn": {"required": False, "provider": None},
        "arch": None,
    },
}

# The profile a role or check uses when megatron_stack_profile is not set. Roles get it through
# the stack_profile lookup (an empty name), never by repeating it.
DEFAULT_PROFILE = "cu117"
# The training venv, the same path on every node (the launcher starts the same interpreter
# everywhere). python_env_path and megatron_job_venv default to it; the profile dict carries it
# as ``venv`` so roles outside a play with either role read it from the lookup.
VENV = "/opt/megatron/venv"


class UnknownProfileError(KeyError):
    pass


class UnknownCudaError(ValueError):
    """A CUDA release that CUDA_MIN_DRIVER has no row for."""


def names() -> List[str]:
    return sorted(PROFILES)


def get(name: Optional[str]) -> Dict[str, Any]:
    """A deep copy of profile ``name`` with its name filled in; a clear error when unknown."""
    name = name or DEFAULT_PROFILE
    if name not in PROFILES:
        raise UnknownProfileError(
            "unknown stack profile %r; expected one of %s. Set megatron_stack_profile in "
            "group_vars/all to one of them." % (name, ", ".join(names()))
        )
    profile = copy.deepcopy(PROFILES[name])
    profile["name"] = name
    # Derived facts, filled in by their one accessor so Jinja reads the same values as Python.
    profile["deepspeed"]["pinned"] = deepspeed_pin(profile)
    profile["venv"] = VENV
    return profile


def _profile(profile: Any) -> Dict[str, Any]:
    return profile if isinstance(profile, dict) else get(profile)


def deepspeed_pin(profile: Any) -> Optional[str]:
    """The DeepSpeed version the profile installs ('deepspeed==0.9.2' -> '0.9.2'), else None."""
    pip = str((_profile(profile).get("deepspeed") or {}).get("pip") or "")
    sep, version = pip.partition("==")[1:]
    return version.strip() if sep and version.strip() else None


def deepspeed_at_least(profile: Any, version: str) -> bool:
    """True only when the profile pins a DeepSpeed >= ``version``; unpinned counts as older."""
    from .versions import compare  # local import keeps the data module flat

    pinned = deepspeed_pin(profile)
    return pinned is not None and compare(pinned, version) >= 0


def mds_era(profile: Any) -> str:
    """The Megatron-DeepSpeed era (``head`` or ``before_rebase``) of the checkout the profile
    installs: which flag table (_mds_args) judges its arguments and which requirement set
    python_env installs."""
    return str(_profile(profile)["megatron_deepspeed"]["era"])


def apex_ref(profile: Any) -> str:
    """The NVIDIA apex commit the profile builds ('' where it builds none)."""
    return str((_profile(profile).get("apex") or {}).get("ref") or "")


def numpy_pin(profile: Any) -> str:
    """The NumPy release the profile's torch and DeepSpeed import with."""
    return str(_profile(profile)["numpy"])


# What python_env_flash_attn may install: the collection's SDPA adapter, or flash-attn from pip.
FLASH_ATTN_PROVIDERS = ("sdpa", "pip")


def flash_attn(profile: Any) -> Dict[str, Any]:
    """The profile's flash-attention policy, always a dict: ``supported`` (its
    Megatron-DeepSpeed has --use-flash-attn-v2), ``required`` (the job cannot run without it)
    and ``provider`` (what python_env installs by default: "sdpa", "pip" or None).
    ``profile`` is a profile dict or a name (None: the default profile)."""
    policy = _profile(profile).get("flash_attn")
    if not policy:
        return {"supported": False, "required": False, "provider": None}
    return {
        "supported": True,
        "required": bool(policy.get("required")),
        "provider": policy.get("provider") or None,
    }


def torchscript_fusion(profile: Any) -> bool:
    """Whether the profile's torch fuses Megatron's TorchScript bias-GeLU on the GPU (absent:
    true; cu130's torch 2.11 does not, so megatron_job_bias_gelu_fusion: auto turns it off).
    ``profile`` is a profile dict or a name (None: the default profile)."""
    return bool(_profile(profile).get("torchscript_fusion", True))


def fused_ops(profile: Any) -> bool:
    """Whether the profile opts in to the collection's compiled elementwise kernels
    (megatron_ds_fused_ops: python_env_fused_ops and megatron_job_fused_ops at auto); absent:
    false. ``profile`` is a profile dict or a name (None: the default profile)."""
    return bool(_profile(profile).get("fused_ops", False))


# Job settings whose value "auto" (megatron_job_use_flash_attn, megatron_job_bias_gelu_fusion,
# megatron_job_fused_ops) follows the stack profile: flash attention where the profile requires
# it, the TorchScript bias-GeLU where the profile's torch can fuse it (_job_spec.normalize also
# turns it on where the fused ops serve it), the fused ops where the profile opts in.
AUTO_SETTINGS = {
    "use_flash_attn": lambda profile: flash_attn(profile)["required"],
    "bias_gelu_fusion": torchscript_fusion,
    "fused_ops": fused_ops,
}


def auto_setting(key: str, profile: Any) -> bool:
    """What ``auto`` means for job setting ``key`` on ``profile`` (a dict or a name)."""
    return bool(AUTO_SETTINGS[key](profile))


def min_driver_for_cuda(cuda_version: str) -> str:
    """The lowest driver that runs CUDA ``cuda_version``, most specific row first (the release,
    then its major.minor). UnknownCudaError when the table has neither: add the row."""
    from .versions import major_minor  # local import keeps the data module flat

    for key in (cuda_version, major_minor(cuda_version)):
        if key in CUDA_MIN_DRIVER:
            return CUDA_MIN_DRIVER[key]
    raise UnknownCudaError(
        "no minimum driver known for CUDA %s: add a row for %s to CUDA_MIN_DRIVER in "
        "plugins/module_utils/_stack/profiles.py (CUDA release notes, Table 3)"
        % (cuda_version, major_minor(cuda_version)))
