# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's matrix: per node, each installed version against the stack profile and
against the rules NVIDIA and DeepSpeed enforce at run time, and each install against what pip
and git recorded (damaged installs).

Pure functions, no Ansible imports; _preflight runs :data:`MATRIX_CHECKS` on every node.
"""
from __future__ import annotations

import re
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from .._facts.integrity import MANIFEST_NAME
from .rows import (
    FAIL,
    MISSING,
    NO_GPU,
    PASS,
    SKIP,
    WARN,
    NodeCheck,
    Row,
    _Context,
    _broken_install,
    _get,
    _int,
    _is_plain_version,
    _mm,
    _nvcc_version,
    _role,
    _row,
    _satisfies,
    _show,
    _text,
    _torch_unusable,
    _version,
    nvcc_torch_compatible,
)
from .._stack import driver_lifecycle as _lifecycle
from .._stack import gpu_arch as _gpu_arch
from .._stack.profiles import DS_CUDA_MINOR_MISMATCH_OK, UnknownCudaError, min_driver_for_cuda
from .._stack.versions import compare, local_label, major, parse


# ---------------------------------------------------------------------------------------
# Matrix checks: one function per check, each returns the row for one node
# ---------------------------------------------------------------------------------------


def _cpu_skip(ctx: _Context, check: str, node: str, component: str) -> Optional[Row]:
    if ctx.cuda:
        return None
    return _row(check, SKIP, node, component, fix="profile %s runs on CPU: no %s needed" % (ctx.name, component))


def no_gpu_on_bus(facts: Mapping[str, Any]) -> bool:
    """True only when the node's PCI bus was read and holds no NVIDIA GPU (``gpus.pci_devices``
    is an empty list); None (not read, older facts) says nothing."""
    devices = _get(facts, "gpus", "pci_devices")
    return isinstance(devices, list) and not devices


def _no_gpu_fix(node: str) -> str:
    return ("%s: no PCI display controller from NVIDIA (vendor 0x10de) on %s, so no driver can load: check that "
            "the GPUs are seated and powered (lspci -d 10de:), or take %s out of the cluster's nodes" % (NO_GPU, node, node))


def check_driver(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "driver.version", "driver"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    found = _text(_get(facts, "driver", "version"))
    needs: List[Tuple[str, str]] = []
    unknown: List[str] = []
    if ctx.spec("driver", "min"):
        needs.append((str(ctx.spec("driver", "min")), "profile %s minimum" % ctx.name))
    toolkit = _text(_get(facts, "cuda", "version"))
    torch_cuda = _text(_get(facts, "torch", "cuda"))
    for what, cuda in (("CUDA toolkit", toolkit), ("torch built for CUDA", torch_cuda)):
        if cuda:
            try:
                needs.append((min_driver_for_cuda(cuda), "%s %s" % (what, cuda)))
            except UnknownCudaError as exc:
                # The table lacks the release: say so rather than judge by a guessed minimum.
                unknown.append(str(exc))
            except ValueError:
                pass  # an unreadable version: the CUDA and torch checks report it
    if not needs:
        if unknown:
            return _row(check, WARN, node, comp, found, "a known minimum driver", "; ".join(unknown))
        return _row(check, SKIP, node, comp, found, fix="no driver minimum known for this stack")
    floor = needs[0][0]
    for need, _why in needs[1:]:
        if compare(need, floor) > 0:
            floor = need
    why = ", ".join(reason for need, reason in needs if compare(need, floor) == 0)
    expected = ">= %s (%s)" % (floor, why)
    install = ctx.spec("driver", "install") or floor
    if compare(str(install), floor) < 0:
        install = floor
    fix = "install NVIDIA driver %s or newer on %s with %s, then reboot" % (install, node, _role("nvidia_driver"))
    if found is None and no_gpu_on_bus(facts):
        return _row(check, FAIL, node, comp, NO_GPU, expected, _no_gpu_fix(node))
    if found is None:
        return _row(check, FAIL, node, comp, MISSING, expected, "no NVIDIA driver loaded: " + fix)
    try:
        ok = compare(found, floor) >= 0
    except ValueError:
        return _row(check, FAIL, node, comp, found, expected, "unreadable driver version: " + fix)
    if ok and unknown:
        return _row(check, WARN, node, comp, found, expected, "; ".join(unknown))
    return _row(check, PASS if ok else FAIL, node, comp, found, expected, "" if ok else fix)


def check_fabric_manager(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "fabric_manager.version", "fabric_manager"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    if not _get(facts, "nvswitch", "present"):
        return _row(check, SKIP, node, comp, fix="no NVSwitch on this node: fabric manager not needed")
    driver = _text(_get(facts, "driver", "version"))
    version = _text(_get(facts, "fabric_manager", "version"))
    installed = _get(facts, "fabric_manager", "installed")
    active = _get(facts, "fabric_manager", "active")
    expected = "%s (== driver), service active" % _show(driver)
    pin = "install nvidia-fabricmanager pinned to driver %s (and libnvidia-nscq) on %s with %s" % (
        _show(driver),
        node,
        _role("nvidia_driver"),
    )
    if not installed or version is None:
        return _row(check, FAIL, node, comp, "not installed", expected, pin + "; NVSwitch systems fail CUDA init without it")
    try:
        same = driver is not None and parse(version) == parse(driver)
    except ValueError:
        same = False
    if not same:
        return _row(check, FAIL, node, comp, version, expected, pin + ": fabric manager refuses to start on another driver version")
    if not active:
        return _row(
            check, FAIL, node, comp, "%s, not active" % version, expected,
            "start and enable nvidia-fabricmanager on %s (systemctl enable --now nvidia-fabricmanager)" % node,
        )
    return _row(check, PASS, node, comp, "%s, active" % version, expected)


def check_cuda_toolkit(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "cuda.toolkit", "cuda"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    spec = str(ctx.spec("cuda", "version"))
    found = _text(_get(facts, "cuda", "version"))
    source = _text(_get(facts, "cuda", "source")) or "unknown source"
    fix = "install CUDA %s (profile %s) on %s with %s" % (ctx.spec("cuda", "install") or spec, ctx.name, node, _role("cuda_toolkit"))
    if found is None:
        return _row(check, FAIL, node, comp, MISSING, spec, "no CUDA toolkit found: " + fix)
    shown = "%s (%s)" % (found, source)
    ok = _satisfies(found, spec)
    if not ok and _is_plain_version(spec) and _mm(found) is not None and _mm(found) == _mm(spec):
        # nvcc, ptxas and library names carry the release (13.0) and a component version
        # (13.0.88), never the toolkit update (11.7.1); version.json from 11.8 on is reported
        # as major.minor. Where the update is not visible, judge at major.minor.
        if source != "version.json" or len(parse(found)) < len(parse(spec)):
            return _row(check, PASS, node, comp, shown + "; update level not visible", spec)
    if ok is None:
        return _row(check, FAIL, node, comp, shown, spec, "unreadable CUDA version: " + fix)
    return _row(check, PASS if ok else FAIL, node, comp, shown, spec, "" if ok else fix)


def check_nvcc_torch(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "cuda.nvcc_vs_torch", "nvcc"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    torch_cuda = _text(_get(facts, "torch", "cuda"))
    unusable = _torch_unusable(facts)
    if unusable:
        return _row(check, SKIP, node, comp, fix=unusable)
    if torch_cuda is None:
        return _row(check, SKIP, node, comp, fix="torch is a CPU build (see torch.cuda)")
    nvcc = _nvcc_version(facts)
    want = _mm(torch_cuda)
    try:
        minors = DS_CUDA_MINOR_MISMATCH_OK.get(major(torch_cuda), [])
    except ValueError:
        minors = []
    if want in minors:
        expected = "nvcc %s-%s (DeepSpeed's minor-mismatch list)" % (minors[0], minors[-1])
    else:
        expected = "nvcc %s exactly (DeepSpeed's rule)" % want
    if nvcc is None:
        return _row(
            check, FAIL, node, comp, "nvcc not found", expected,
            "install the CUDA %s toolkit on %s with %s: Megatron's fused-kernel loader and DeepSpeed's "
            "op builder run CUDA_HOME/bin/nvcc" % (_mm(torch_cuda), node, _role("cuda_toolkit")),
        )
    try:
        ok = nvcc_torch_compatible(nvcc, torch_cuda)
    except ValueError:
        ok = False
    fix = (
        "make nvcc and torch agree on %s: install CUDA %s with %s, or torch built for CUDA %s with "
        "%s; DeepSpeed refuses to build ops otherwise" % (node, _mm(torch_cuda), _role("cuda_toolkit"), _mm(nvcc), _role("python_env"))
    )
    return _row(check, PASS if ok else FAIL, node, comp, "nvcc %s, torch.version.cuda %s" % (nvcc, torch_cuda), expected, "" if ok else fix)


def check_cudnn_system(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "cudnn.system", "cudnn"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    spec = str(ctx.spec("cudnn", "version"))
    cuda_major = ctx.spec("cudnn", "cuda_major")
    expected = "%s (cuda%s build)" % (spec, cuda_major) if cuda_major else spec
    found = _version(facts, "cudnn", "version")
    fix = "install cuDNN %s (profile %s) on %s with %s" % (ctx.spec("cudnn", "install") or spec, ctx.name, node, _role("cudnn"))
    if found is None:
        return _row(check, FAIL, node, comp, MISSING, expected, "no system cuDNN found: " + fix)
    source = _text(_get(facts, "cudnn", "source"))
    shown = "%s (%s)" % (found, source) if source else found
    ok = _satisfies(found, spec)
    if ok:
        return _row(check, PASS, node, comp, shown, expected)
    try:
        wrong_major = major(found) != major(spec)
    except ValueError:
        wrong_major = True
    if wrong_major:
        fix += "; cuDNN %s is another major, which extensions built against cuDNN %s cannot load" % (
            _show(found).split(".", 1)[0], spec.split(".", 1)[0])
    return _row(check, FAIL, node, comp, shown, expected, fix)


def _torch_child(ctx: _Context, check: str, comp: str, node: str, facts: Mapping[str, Any], what: str) -> Row:
    """torch's bundled cuDNN / NCCL: the versions torch actually loads (docs/upstream-facts.md §H)."""
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    unusable = _torch_unusable(facts)
    if unusable:
        return _row(check, SKIP, node, comp, fix=unusable)
    if _text(_get(facts, "torch", "cuda")) is None:
        return _row(check, SKIP, node, comp, fix="torch is a CPU build (see torch.cuda)")
    found = _version(facts, "torch", what)
    spec = ctx.spec("torch", what)
    if spec is None:
        return _row(check, PASS, node, comp, _show(found), "not pinned by profile %s (reported only)" % ctx.name)
    fix = "reinstall torch %s from %s (profile %s) with %s on %s: torch loads its own %s, not the system one" % (
        ctx.pip_version("torch"), ctx.spec("torch", "index_url"), ctx.name, _role("python_env"), node,
        "cuDNN" if what == "cudnn" else "NCCL",
    )
    if found is None:
        if _text(_get(facts, "torch", "source")) == "files":
            # Read from files, a torch that bundles the library in torch/lib names no version.
            return _row(
                check, WARN, node, comp, "not readable from the venv's files", str(spec),
                "rerun with preflight_python_probe=import (gpu_stack_facts python_probe=import) to read "
                "the %s that torch loads on %s; if it is still missing: %s" % (
                    "cuDNN" if what == "cudnn" else "NCCL", node, fix),
            )
        return _row(check, FAIL, node, comp, MISSING, str(spec), fix)
    ok = _satisfies(found, str(spec))
    return _row(check, PASS if ok else FAIL, node, comp, found, str(spec), "" if ok else fix)


def check_cudnn_torch(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    return _torch_child(ctx, "cudnn.torch", "torch.cudnn", node, facts, "cudnn")


def check_nccl_system(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "nccl.system", "nccl"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    spec = str(ctx.spec("nccl", "version"))
    found = _version(facts, "nccl", "version")
    install = str(ctx.spec("nccl", "install") or spec)
    fix = "install NCCL %s (profile %s) on %s with %s" % (install, ctx.name, node, _role("nccl"))
    if found is None:
        return _row(check, FAIL, node, comp, MISSING, spec, "no system NCCL found: " + fix)
    ok = _satisfies(found, spec)
    return _row(check, PASS if ok else FAIL, node, comp, found, spec, "" if ok else fix)


def check_nccl_torch(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    return _torch_child(ctx, "nccl.torch", "torch.nccl", node, facts, "nccl")


def check_torch_version(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "torch.version", "torch"
    spec = str(ctx.spec("torch", "version"))
    label = ctx.spec("torch", "local")
    expected = "%s (+%s)" % (spec, label) if label else spec
    found = _text(_get(facts, "torch", "version"))
    fix = "run %s on %s so torch matches (%s from %s)" % (
        _role("python_env"), node, ctx.spec("torch", "pip"), ctx.spec("torch", "index_url"))
    error = _text(_get(facts, "torch", "error"))
    if found is None:
        shown = "not importable: %s" % error if error else MISSING
        return _row(check, FAIL, node, comp, shown, expected, fix)
    if error:
        # The version alone is what pip recorded; a torch that does not import (or is half
        # removed) must not pass on it.
        return _row(check, FAIL, node, comp, "%s, broken: %s" % (found, error), expected,
                    _broken_install(ctx, node, facts, "torch", "torch"))
    ok = _satisfies(found, spec)
    have_label = local_label(found)
    if ok and label and have_label and have_label != label:
        # A CUDA build of torch still runs on a CPU profile; only a CUDA profile needs the label.
        status = FAIL if ctx.cuda else WARN
        return _row(check, status, node, comp, found, expected, fix)
    return _row(check, PASS if ok else FAIL, node, comp, found, expected, "" if ok else fix)


def check_torch_cuda(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "torch.cuda", "torch"
    if not ctx.cuda:
        return _row(check, SKIP, node, comp, fix="profile %s runs on CPU: any torch build will do" % ctx.name)
    unusable = _torch_unusable(facts)
    if unusable:
        return _row(check, SKIP, node, comp, fix=unusable)
    spec = str(ctx.spec("torch", "cuda"))
    found = _text(_get(facts, "torch", "cuda"))
    fix = "run %s on %s so torch matches (a +%s build of %s)" % (
        _role("python_env"), node, ctx.spec("torch", "local"), ctx.spec("torch", "pip"))
    if found is None:
        return _row(check, FAIL, node, comp, "None (CPU-only torch)", spec, fix)
    ok = _mm(found) is not None and _mm(found) == _mm(spec)
    return _row(check, PASS if ok else FAIL, node, comp, found, spec, "" if ok else fix)


def check_deepspeed(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "deepspeed.version", "deepspeed"
    spec = str(ctx.spec("deepspeed", "version"))
    found = _text(_get(facts, "deepspeed", "version"))
    fix = "run %s on %s so DeepSpeed matches (%s)" % (_role("python_env"), node, ctx.spec("deepspeed", "pip"))
    error = _text(_get(facts, "deepspeed", "error"))
    if found is None:
        return _row(check, FAIL, node, comp, "not importable: %s" % error if error else MISSING, spec, fix)
    if error:
        return _row(check, FAIL, node, comp, "%s, broken: %s" % (found, error), spec,
                    _broken_install(ctx, node, facts, "DeepSpeed", "deepspeed"))
    ok = _satisfies(found, spec)
    return _row(check, PASS if ok else FAIL, node, comp, found, spec, "" if ok else fix)


def check_python(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "python.version", "python"
    spec = str(ctx.spec("python", "version"))
    found = _text(_get(facts, "python", "version"))
    fix = "rebuild the venv on %s with Python %s (profile %s allows %s) with %s" % (
        node, ctx.spec("python", "preferred"), ctx.name, spec, _role("python_env"))
    if found is None:
        return _row(check, FAIL, node, comp, MISSING, spec, fix)
    # Profiles name Python series ('<=3.11' means any 3.11.x), so compare major.minor.
    ok = _satisfies(_mm(found), spec)
    return _row(check, PASS if ok else FAIL, node, comp, found, spec, "" if ok else fix)


def check_apex(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "apex.cuda_ext", "apex"
    if not ctx.cuda:
        return _row(check, SKIP, node, comp, fix="profile %s runs on CPU: Megatron does not import apex there" % ctx.name)
    if not ctx.spec("megatron_deepspeed", "needs_apex"):
        return _row(check, SKIP, node, comp, fix="profile %s does not need apex" % ctx.name)
    present = bool(_get(facts, "apex", "present"))
    cuda_ext = bool(_get(facts, "apex", "cuda_ext"))
    found = "not installed" if not present else ("with CUDA extensions" if cuda_ext else "without CUDA extensions")
    ok = present and cuda_ext
    fix = (
        "build NVIDIA apex with --cpp_ext --cuda_ext against CUDA %s on %s with %s: Megatron-DeepSpeed "
        "imports amp_C and fused_layer_norm_cuda at start-up" % (ctx.spec("torch", "cuda"), node, _role("python_env"))
    )
    return _row(check, PASS if ok else FAIL, node, comp, found, "with CUDA extensions (amp_C, fused_layer_norm_cuda)", "" if ok else fix)


def check_gpus(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "gpu.present", "gpu"
    if not ctx.cuda:
        return _row(check, SKIP, node, comp, fix="profile %s runs on CPU" % ctx.name)
    count = _int(_get(facts, "gpus", "count")) or 0
    model = _text(_get(facts, "gpus", "model"))
    if count > 0:
        return _row(check, PASS, node, comp, "%d x %s" % (count, _show(model)), ">= 1 GPU")
    if no_gpu_on_bus(facts):
        return _row(check, FAIL, node, comp, NO_GPU, ">= 1 GPU", _no_gpu_fix(node))
    return _row(
        check, FAIL, node, comp, "no GPU", ">= 1 GPU",
        "nvidia-smi sees no GPU on %s: check the driver (%s) and the hardware, or use the cpu profile" % (node, _role("nvidia_driver")),
    )


def check_gpu_arch(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    """Each GPU's compute capability (gpu_stack_facts, else the GPU's name) against what the
    profile's torch wheel carries and its toolkit builds apex and DeepSpeed's ops for."""
    check, comp = "gpu.arch", "gpu"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    arch = ctx.spec("arch") or {}
    expected = "torch %s; toolkit builds %s" % (" ".join(arch.get("torch") or []), " to ".join(arch.get("toolkit") or []))
    gpus = _get(facts, "gpus", "list") or []
    seen: "dict[Any, str]" = {}
    for gpu in gpus if isinstance(gpus, list) else []:
        if isinstance(gpu, Mapping):
            name = _text(gpu.get("name")) or _text(_get(facts, "gpus", "model")) or "GPU"
            seen.setdefault(_gpu_arch.capability_of(name, gpu.get("compute_capability")), name)
    if not seen and _get(facts, "gpus", "model"):
        model = _text(_get(facts, "gpus", "model"))
        seen[_gpu_arch.capability_of(model, _get(facts, "gpus", "compute_capability"))] = model or "GPU"
    if not seen:
        return _row(check, SKIP, node, comp, "no GPU listed", expected, "gpu.present reports the GPUs")
    if None in seen:
        return _row(check, WARN, node, comp, "%s: compute capability unknown" % seen[None], expected,
                    "add the GPU to GPU_CAPABILITY in plugins/module_utils/_stack/gpu_arch.py, or run a driver whose "
                    "nvidia-smi answers --query-gpu=compute_cap")
    found = ", ".join("%s %s" % (seen[cap], _gpu_arch.show(cap)) for cap in sorted(seen))
    refusals = [_gpu_arch.refusal(ctx.name, seen[cap], cap) for cap in sorted(seen)]
    refusals = [text for text in refusals if text]
    if refusals:
        return _row(check, FAIL, node, comp, found, expected, "%s: %s" % (node, "; ".join(refusals)))
    return _row(check, PASS, node, comp, found, expected)


def check_driver_lifecycle(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    """A warning, never a failure, when the node's driver branch is past NVIDIA's end of life on
    the preflight's date (option ``today``, default today), naming the supported branch to move to."""
    check, comp = "driver.lifecycle", "driver"
    skipped = _cpu_skip(ctx, check, node, comp)
    if skipped:
        return skipped
    found = _text(_get(facts, "driver", "version"))
    if found is None:
        return _row(check, SKIP, node, comp, MISSING, fix="driver.version reports the missing driver")
    when = ctx.options.get("today")
    try:
        verdict = _lifecycle.verdict(found, ctx.spec("cuda", "version"), when)
    except ValueError:
        return _row(check, WARN, node, comp, found, "a supported branch",
                    "the preflight's date %r is not YYYY-MM-DD" % (when,))
    as_of = _lifecycle.as_date(when).isoformat()
    expected = "a branch NVIDIA still supports on %s" % as_of
    if verdict["status"] == "unknown":
        return _row(check, SKIP, node, comp, found, expected,
                    "%s: add its row to plugins/module_utils/_stack/driver_lifecycle.py from NVIDIA's table" % verdict["text"])
    shown = "%s: %s" % (found, verdict["text"])
    if verdict["status"] == "supported":
        return _row(check, PASS, node, comp, shown, expected)
    target = verdict["upgrade"]
    move = ("move %s to %s, which runs CUDA %s (set the driver version for %s; NVIDIA's minimum for the profile, %s, "
            "still holds for a site that keeps its own driver)" % (
                node, _lifecycle.describe(target), ctx.spec("cuda", "version"), _role("nvidia_driver"), ctx.spec("driver", "min"))
            if target else "no branch in the lifecycle table is supported on %s: update the table" % as_of)
    return _row(check, WARN, node, comp, shown, expected, "past end of life (no security fixes): " + move)


# ---------------------------------------------------------------------------------------
# What changes under a node between two runs (_facts/driver_stack.py)
# ---------------------------------------------------------------------------------------
_HOLD_FIX = ("then keep unattended upgrades off the driver (nvidia_driver_hold and os_base's "
             "unattended-upgrades blacklist)")


def check_driver_userspace(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Optional[Row]:
    """The loaded kernel module against the user-space driver: after a package update replaced
    the libraries under a loaded module, NVML fails with "Driver/library version mismatch"
    until the module is reloaded."""
    if not ctx.cuda:
        return None
    check, comp = "driver.userspace", "driver"
    stack = _get(facts, "driver_stack") or {}
    module = _text(stack.get("module_version")) if isinstance(stack, Mapping) else None
    if module is None and _text(_get(facts, "driver", "source")) == "/proc/driver/nvidia/version":
        module = _text(_get(facts, "driver", "version"))
    user = _text(stack.get("userspace_version")) if isinstance(stack, Mapping) else None
    if module is None or user is None:
        return None  # no loaded module or no library: driver.version says so
    found = "kernel module %s loaded, user-space %s (%s)" % (module, user, _show(stack.get("userspace_library")))
    if module == user:
        return _row(check, PASS, node, comp, found, "the same version")
    return _row(check, FAIL, node, comp, found, "the same version",
                "the user-space driver was replaced under the loaded module (NVML: Driver/library version "
                "mismatch): reboot %s, or unload and reload the nvidia modules with no GPU process running; %s"
                % (node, _HOLD_FIX))


def check_next_boot(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Optional[Row]:
    """The kernel the next boot runs has the driver's modules the running kernel has: a kernel
    installed without its DKMS build boots without the driver (or without peermem)."""
    if not ctx.cuda:
        return None
    check, comp = "driver.next_boot", "driver"
    stack = _get(facts, "driver_stack") or {}
    if not isinstance(stack, Mapping):
        return None
    running, newest = _text(stack.get("running_kernel")), _text(stack.get("next_kernel"))
    now = stack.get("running_kernel_modules") or {}
    then = stack.get("next_kernel_modules") or {}
    if not running or not newest or not isinstance(now, Mapping) or not isinstance(then, Mapping):
        return None
    if newest == running:
        return _row(check, PASS, node, comp, "runs its newest kernel %s" % running, "the next boot's kernel has the driver's modules")
    lost = [name for name in ("nvidia", "nvidia_peermem") if now.get(name) and not then.get(name)]
    found = "running %s; next boot %s has %s" % (
        running, newest, ", ".join("%s %s" % (n, "yes" if then.get(n) else "no") for n in ("nvidia", "nvidia_peermem")))
    if not lost:
        return _row(check, PASS, node, comp, found, "the next boot's kernel has the driver's modules")
    status = FAIL if "nvidia" in lost or ctx.options.get("infiniband_required") else WARN
    return _row(check, status, node, comp, found, "%s built for %s too" % (" and ".join(lost), newest),
                "%s would boot without %s: build it for that kernel before rebooting (dkms autoinstall -k %s, or "
                "run %s again), or keep the running kernel (hold linux-image packages); %s"
                % (node, " and ".join(lost), newest, _role("nvidia_driver"), _HOLD_FIX))


def check_peermem_symbols(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Optional[Row]:
    """nvidia-peermem refused by the kernel after an OFED/DOCA change ("disagrees about version
    of symbol"): GPUDirect RDMA is off, and NCCL falls back to staging through host memory."""
    stack = _get(facts, "driver_stack") or {}
    errors = list(stack.get("peermem_symbol_errors") or []) if isinstance(stack, Mapping) else []
    if not ctx.cuda or not errors:
        return None
    return _row("infiniband.peermem_symbols", FAIL if ctx.options.get("infiniband_required") else WARN, node,
                "infiniband", "; ".join(errors[:3]), "nvidia-peermem built against the installed RDMA stack",
                "rebuild nvidia-peermem against the installed OFED/DOCA on %s (reinstall the driver after the "
                "RDMA stack, %s), then reload it; hold the RDMA packages with the driver's" % (node, _role("nvidia_driver")))


def check_megatron(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "megatron_deepspeed.present", "megatron_deepspeed"
    path = _text(_get(facts, "megatron_deepspeed", "path"))
    if _get(facts, "megatron_deepspeed", "present"):
        commit = _text(_get(facts, "megatron_deepspeed", "commit"))
        shown = commit if commit else "no git commit (not a git checkout: an archive?)"
        return _row(check, PASS, node, comp, "%s at %s" % (shown, _show(path)), "a checkout (ref %s)" % ctx.spec("megatron_deepspeed", "ref"))
    if ctx.options.get("megatron_checkout") is False:
        # The inventory installs none (python_env_megatron_source: none, the demo without a
        # source): nothing to warn about; a launch of pretrain_gpt.py still refuses without one.
        return _row(check, SKIP, node, comp, "no checkout at %s" % _show(path),
                    fix="the inventory installs no checkout (python_env_megatron_source: none)")
    # A warning, not a failure: preflight also runs right after provisioning, before the
    # checkout; the launch itself fails loudly without it.
    return _row(
        check, WARN, node, comp, "no checkout at %s" % _show(path), "a checkout (ref %s)" % ctx.spec("megatron_deepspeed", "ref"),
        "check out Megatron-DeepSpeed %s on %s with %s" % (ctx.spec("megatron_deepspeed", "ref"), node, _role("python_env")),
    )


def check_trainer_imports(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Optional[Row]:
    """Every module the entry script imports at start-up resolves in the venv (gpu_stack_facts'
    static walk, _facts/imports.py). Without it every rank dies at its first import, after the
    launch: head-era megatron/training.py reaches torchvision through the vision code."""
    check, comp = "megatron_deepspeed.imports", "megatron_deepspeed"
    found = _get(facts, "megatron_deepspeed", "imports")
    if not isinstance(found, Mapping):
        return None  # no checkout or no venv yet: check_megatron says so
    entry = _text(found.get("entry")) or "pretrain_gpt.py"
    missing = [m for m in (found.get("missing") or []) if isinstance(m, Mapping)]
    walked = "%s modules of the checkout walked from %s (%s)" % (found.get("walked"), entry, found.get("accelerator"))
    if not missing:
        return _row(check, PASS, node, comp, walked, "every start-up import resolves in %s" % _show(_get(facts, "venv")))
    shown = "; ".join("%s (imported at %s)" % (m.get("module"), ", ".join(str(w) for w in (m.get("imported_at") or [])))
                      for m in missing)
    install = ", ".join(str(m.get("package")) for m in missing)
    return _row(check, FAIL, node, comp, "not importable from the venv: " + shown,
                "every start-up import of %s resolves in %s" % (entry, _show(_get(facts, "venv"))),
                "install %s into the venv on %s (%s), then run preflight again" % (install, node, _role("python_env")))


# ---------------------------------------------------------------------------------------
# Damaged installs: what gpu_stack_facts found against pip's RECORD and git's index
# ---------------------------------------------------------------------------------------


def _files_found(files: Mapping[str, Any], against: str) -> str:
    bad = [str(item) for item in (files.get("bad") or [])]
    count = _int(files.get("bad_count")) or len(bad)
    shown = "; ".join(bad)
    if count > len(bad):
        shown += "; ... (%d more)" % (count - len(bad))
    return "%d of %d files differ from %s: %s" % (count, _int(files.get("checked")) or 0, against, shown)


def _files_row(ctx: _Context, node: str, facts: Mapping[str, Any], check: str, section: str, against: str,
               expected: str, fix: str, missing_is: str = FAIL) -> Row:
    comp = section
    files = _get(facts, section, "files")
    if not isinstance(files, Mapping):
        return _row(check, SKIP, node, comp, fix="gpu_stack_facts did not compare the files (an older collection)")
    if (_int(files.get("bad_count")) or 0) > 0 or files.get("bad"):
        return _row(check, missing_is, node, comp, _files_found(files, against), expected, fix)
    error = _text(files.get("error"))
    if error:
        return _row(check, WARN, node, comp, error, expected, fix)
    checked = _int(files.get("checked")) or 0
    if checked == 0:
        return _row(check, SKIP, node, comp, fix="nothing to compare on %s (not installed, or no %s)" % (node, against))
    return _row(check, PASS, node, comp, "%d files as recorded" % checked, expected)


def _reinstall_fix(ctx: _Context, node: str, facts: Mapping[str, Any], component: str, spec_key: str) -> str:
    venv = _text(_get(facts, "venv")) or "<venv>"
    index = ctx.spec(spec_key, "index_url") if spec_key == "torch" else None
    return (
        "reinstall %s on %s: %s/bin/pip install --force-reinstall --no-deps '%s'%s, then rerun "
        "playbooks/preflight.yml (re-running playbooks/provision.yml alone keeps it: pip takes the "
        "recorded version as installed)" % (
            component, node, venv, ctx.spec(spec_key, "pip"), " --index-url %s" % index if index else "")
    )


PIP_RECORD = "pip's RECORD"
PIP_EXPECTED = "every file pip installed, at its recorded size (and sha256 where written since)"
# The reinstall command a packages.files row gives names at most this many distributions.
SHOWN_REINSTALL = 8


def check_torch_files(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    return _files_row(ctx, node, facts, "torch.files", "torch", PIP_RECORD, PIP_EXPECTED,
                      _reinstall_fix(ctx, node, facts, "torch", "torch"))


def check_deepspeed_files(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    return _files_row(ctx, node, facts, "deepspeed.files", "deepspeed", PIP_RECORD, PIP_EXPECTED,
                      _reinstall_fix(ctx, node, facts, "DeepSpeed", "deepspeed"))


def check_apex_files(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    venv = _text(_get(facts, "venv")) or "<venv>"
    fix = ("rebuild apex on %s: %s/bin/pip uninstall -y apex, then re-run playbooks/provision.yml (%s builds "
           "it again)" % (node, venv, _role("python_env")))
    # Only a profile whose Megatron-DeepSpeed imports apex fails on it; elsewhere it is a warning.
    needed = ctx.cuda and bool(ctx.spec("megatron_deepspeed", "needs_apex"))
    return _files_row(ctx, node, facts, "apex.files", "apex", PIP_RECORD, PIP_EXPECTED, fix, FAIL if needed else WARN)


def check_packages_files(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    """Every other distribution of the venv against its RECORD: numpy, pydantic, ... break torch or
    DeepSpeed as surely as their own files do, and are checked the same way."""
    venv = _text(_get(facts, "venv")) or "<venv>"
    bad = [str(item) for item in (_get(facts, "packages", "files", "bad_distributions") or [])]
    shown = " ".join("'%s'" % item for item in bad[:SHOWN_REINSTALL]) or "<name>==<version>"
    fix = ("reinstall them on %s: %s/bin/pip install --force-reinstall --no-deps %s, then rerun "
           "playbooks/preflight.yml (re-running playbooks/provision.yml alone keeps them: pip takes the "
           "recorded versions as installed)" % (node, venv, shown))
    return _files_row(ctx, node, facts, "packages.files", "packages", PIP_RECORD, PIP_EXPECTED, fix)


# Distributions whose version has a row of its own against the profile (torch.version,
# deepspeed.version): left out of packages.pinned so that one drift is reported once.
PINNED_ELSEWHERE = ("torch", "deepspeed")
# How many off-pin distributions a packages.pinned row spells out.
SHOWN_PINNED = 8
_PLAIN_RELEASE = re.compile(r"^\d+(?:\.\d+)*(?:\+[A-Za-z0-9.]+)?$")


def same_version(installed: str, pinned: str) -> bool:
    """What pip's ``==`` accepts for plain releases: '2.2' is '2.2.0'; local labels must agree."""
    if installed.lower() == pinned.lower():
        return True
    if not (_PLAIN_RELEASE.match(installed) and _PLAIN_RELEASE.match(pinned)):
        return False
    return compare(installed, pinned) == 0 and local_label(installed).lower() == local_label(pinned).lower()


def check_packages_pinned(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    """Every installed distribution that python_env's constraints file pins (gpu_stack_facts'
    packages.pins) at that version. A ``pip install numpy==<other>`` by hand passes every RECORD
    check, and same.packages sees it only beside other nodes; this row sees it on one node, and its
    check id is python_env's, so provision.yml's converge check runs the role there, which puts the
    pin back."""
    check, comp = "packages.pinned", "packages"
    pins = _get(facts, "packages", "pins")
    installed = _get(facts, "packages", "installed")
    if not isinstance(pins, Mapping) or not isinstance(pins.get("pins"), Mapping):
        return _row(check, SKIP, node, comp, fix="no constraints file of python_env in the venv on %s "
                    "(a venv the collection did not make): nothing pins its versions" % node)
    if not isinstance(installed, Mapping) or not installed:
        return _row(check, SKIP, node, comp, fix="gpu_stack_facts listed no distribution in the venv on %s" % node)
    source = _text(pins.get("source")) or "the venv's constraints file"
    expected = "every installed distribution at its pin in %s" % source
    off: List[Tuple[str, str, str]] = []
    compared = 0
    for name in sorted(pins["pins"]):
        version = _text(installed.get(name))
        if name in PINNED_ELSEWHERE or version is None:
            continue
        compared += 1
        pinned = str(pins["pins"][name])
        if not all(same_version(one, pinned) for one in version.split(",")):
            off.append((name, version, pinned))
    if not off:
        return _row(check, PASS, node, comp, "%d pinned distribution(s) at their pins" % compared, expected)
    found = "; ".join("%s %s (pinned %s)" % item for item in off[:SHOWN_PINNED])
    if len(off) > SHOWN_PINNED:
        found += "; ... (%d more)" % (len(off) - SHOWN_PINNED)
    venv = _text(_get(facts, "venv")) or "<venv>"
    fix = ("re-run playbooks/provision.yml: its converge check runs %s on %s, which installs the pins again "
           "(by hand: %s/bin/pip install --no-deps --constraint %s %s)"
           % (_role("python_env"), node, venv, source, " ".join("'%s==%s'" % (n, p) for n, _v, p in off[:SHOWN_PINNED])))
    return _row(check, FAIL, node, comp, "%d distribution(s) off their pin: %s" % (len(off), found), expected, fix)


# Names the collection itself puts into site-packages without a RECORD: python_env's fused-ops
# hook (roles/python_env/tasks/fused_ops.yml; pip cannot install a .pth from a pyproject build),
# and the helper virtualenv and uv write into every venv they create.
COLLECTION_UNOWNED = ("megatron_ds_fused_ops.pth", "_virtualenv.pth", "_virtualenv.py")
# How many files a venv.unowned_code row names.
SHOWN_UNOWNED = 5


def check_unowned_code(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    """Code in site-packages that no installer's record owns (gpu_stack_facts' packages.unowned):
    a .pth runs its import lines in every rank's interpreter, sitecustomize at every start, a stray
    module shadows or adds an import; none of it is in any version or RECORD comparison. Its own
    check id: no role removes such a file, so the converge plan must not run python_env for it."""
    check, comp = "venv.unowned_code", "venv"
    unowned = _get(facts, "packages", "unowned")
    if not isinstance(unowned, Mapping):
        return _row(check, SKIP, node, comp, fix="gpu_stack_facts did not list site-packages (no venv, or an older collection)")
    allowed = set(COLLECTION_UNOWNED) | set(str(name) for name in (ctx.options.get("allowed_unowned") or []))
    entries = [e for e in (unowned.get("entries") or []) if isinstance(e, Mapping)]
    listed = len(entries)
    bad = [e for e in entries if str(e.get("path") or "").rsplit("/", 1)[-1] not in allowed]
    # Entries past the facts' list are counted only: they fail too, as nothing says they are allowed.
    more = max(0, (_int(unowned.get("count")) or 0) - listed)
    expected = "only files pip installed in site-packages (or named in preflight_allowed_unowned)"
    if not bad and not more:
        shown = ", ".join(str(e.get("path") or "").rsplit("/", 1)[-1] for e in entries)
        return _row(check, PASS, node, comp, "nothing outside a RECORD" + (" but the allowed %s" % shown if shown else ""),
                    expected)
    found = "; ".join("%s (%s: %s)" % (e.get("path"), e.get("kind"), e.get("detail")) for e in bad[:SHOWN_UNOWNED])
    if len(bad) + more > SHOWN_UNOWNED:
        found += "; ... (%d more)" % (len(bad) + more - min(len(bad), SHOWN_UNOWNED))
    paths = " ".join("'%s'" % e.get("path") for e in bad[:SHOWN_UNOWNED]) or (
        "<the files beyond the facts' list: ls %s/lib/python3*/site-packages>" % (_text(_get(facts, "venv")) or "<venv>"))
    fix = ("find out who put them there, then remove them on %s (rm -r %s); a .pth of the site's own: add "
           "its name to preflight_allowed_unowned" % (node, paths))
    return _row(check, FAIL, node, comp, "%d file(s) no RECORD owns that Python runs or imports: %s"
                % (len(bad) + more, found), expected, fix)


def check_megatron_files(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    path = _text(_get(facts, "megatron_deepspeed", "path")) or "<checkout>"
    source = _text(_get(facts, "megatron_deepspeed", "files", "source")) or ""
    if source.endswith("/" + MANIFEST_NAME):
        # Unpacked from an archive (python_env_megatron_source: archive): no git to restore from.
        fix = ("unpack the archive again on %s: remove %s/.megatron-ds-archive.sha256 and re-run "
               "playbooks/provision.yml (python_env replaces the tree and writes a new manifest)" % (node, path))
        return _files_row(ctx, node, facts, "megatron_deepspeed.files", "megatron_deepspeed", "the archive's manifest",
                          "every file as unpacked", fix)
    fix = ("restore the checkout on %s: git -C %s checkout -- . (or re-run playbooks/provision.yml with "
           "python_env_megatron_force=true, which resets it to ref %s)" % (node, path, ctx.spec("megatron_deepspeed", "ref")))
    return _files_row(ctx, node, facts, "megatron_deepspeed.files", "megatron_deepspeed", "git's index",
                      "every tracked file as checked out", fix)


MATRIX_CHECKS: Sequence[NodeCheck] = (
    check_gpus,
    check_driver,
    check_driver_userspace,
    check_next_boot,
    check_peermem_symbols,
    check_gpu_arch,
    check_driver_lifecycle,
    check_fabric_manager,
    check_cuda_toolkit,
    check_nvcc_torch,
    check_cudnn_system,
    check_cudnn_torch,
    check_nccl_system,
    check_nccl_torch,
    check_python,
    check_torch_version,
    check_torch_cuda,
    check_deepspeed,
    check_torch_files,
    check_deepspeed_files,
    check_apex,
    check_apex_files,
    check_packages_files,
    check_packages_pinned,
    check_unowned_code,
    check_megatron,
    check_trainer_imports,
    check_megatron_files,
)
