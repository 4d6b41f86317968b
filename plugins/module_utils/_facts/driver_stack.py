# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What breaks a GPU node silently between two runs: the user-space driver replaced under a
loaded kernel module, a kernel installed without the driver's modules, peermem out of step
with the RDMA stack.

Runs on the managed node: standard library only, Python 3.8+, read-only, no process started
(file names and symlinks only; the kernel log is read where it is readable).

- **User-space against the loaded module.** An unattended upgrade replaces libnvidia-ml and
  libcuda but cannot reload the kernel module: NVML then fails with "Driver/library version
  mismatch" until a reboot. The loaded module's version is /proc/driver/nvidia/version's (or
  /sys/module/nvidia/version); the user-space one is the version in the file name that
  ``libnvidia-ml.so.1`` resolves to (``libnvidia-ml.so.535.129.03``).
- **The kernel the next boot runs.** DKMS builds the module per kernel; a kernel installed
  without it boots without the driver. The newest kernel under /lib/modules is the one the
  distribution's boot loader defaults to after a kernel upgrade (Debian and Ubuntu order their
  GRUB entries by version); a node whose newest kernel is not the running one and has no
  ``nvidia.ko`` (or ``nvidia-peermem.ko`` where the running kernel has one) is named before it
  reboots.
- **peermem and the RDMA stack.** After an OFED/DOCA change the kernel refuses nvidia-peermem
  with "disagrees about version of symbol" in its log.
"""
from __future__ import annotations

import os
import re
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence

# Where distributions put the NVIDIA user-space libraries (Debian/Ubuntu multiarch, RHEL lib64,
# the runfile's /usr/lib64, and /usr/lib).
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")
_LIB_VERSION = re.compile(r"^libnvidia-ml\.so\.(\d+\.\d+(?:\.\d+)?)$")
_KERNEL_MODULE_VERSION = re.compile(r"^\s*(\d+\.\d+(?:\.\d+)?)\s*$")
_SYMBOL_ERROR = re.compile(r"(nvidia[_-]peermem|nv_peer_mem)\S*: disagrees about version of symbol (\S+)")
# Where a driver's modules land for one kernel: DKMS's updates/dkms, the runfile's
# kernel/drivers/video, Ubuntu's prebuilt linux-modules-nvidia (kernel/nvidia-*), extra/.
_MODULE_NAMES = {"nvidia": ("nvidia.ko", "nvidia.ko.xz", "nvidia.ko.zst"),
                 "nvidia_peermem": ("nvidia-peermem.ko", "nvidia-peermem.ko.xz", "nvidia-peermem.ko.zst")}
# The most files one kernel's module tree is searched through (a full tree is about 6000).
MAX_MODULE_FILES = 20000


def userspace_version(names: Iterable[str], resolved: Optional[str]) -> Optional[str]:
    """The user-space driver version: the ``libnvidia-ml.so.<version>`` that
    ``libnvidia-ml.so.1`` resolves to, else the only such file in the directory's ``names``."""
    if resolved:
        match = _LIB_VERSION.match(os.path.basename(resolved))
        if match:
            return match.group(1)
    found = sorted({m.group(1) for m in (_LIB_VERSION.match(n) for n in names) if m})
    return found[0] if len(found) == 1 else None


def kernel_module_version(text: Optional[str]) -> Optional[str]:
    """/sys/module/nvidia/version: the loaded module's version, one line."""
    match = _KERNEL_MODULE_VERSION.match(text or "")
    return match.group(1) if match else None


def _kernel_key(release: str) -> List[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"[.\-+~]", release)]


def newest_kernel(releases: Sequence[str]) -> Optional[str]:
    """The newest of the installed kernel releases (``6.1.0-28-amd64`` > ``6.1.0-9-amd64``)."""
    def key(release: str) -> List[Any]:
        # Numbers sort before words at the same place: compare as (is_text, value) pairs.
        return [(isinstance(p, str), p) for p in _kernel_key(release)]
    return max(releases, key=key) if releases else None


def modules_in(files: Iterable[str]) -> Dict[str, bool]:
    """Which of the driver's modules a kernel's module tree holds, from its file names."""
    names = {os.path.basename(f) for f in files}
    return {module: any(n in names for n in candidates) for module, candidates in _MODULE_NAMES.items()}


def symbol_errors(kernel_log: Optional[str]) -> List[str]:
    """peermem's "disagrees about version of symbol" lines of the kernel log, each once."""
    out: List[str] = []
    for match in _SYMBOL_ERROR.finditer(kernel_log or ""):
        line = "%s: disagrees about version of symbol %s" % (match.group(1), match.group(2))
        if line not in out:
            out.append(line)
    return out


def _walk_files(root: str, limit: int = MAX_MODULE_FILES) -> List[str]:
    out: List[str] = []
    for folder, _dirs, files in os.walk(root):
        out.extend(files)
        if len(out) > limit:
            break
    return out


def collect_driver_stack(path: Callable[[str], str], read_text: Callable[[str], Optional[str]],
                         running_kernel: Optional[str]) -> Dict[str, Any]:
    """The facts above. ``path`` maps a node path to this process's view (the facts' root)."""
    facts: Dict[str, Any] = {"userspace_version": None, "userspace_library": None, "module_version": None,
                             "running_kernel": running_kernel, "next_kernel": None, "next_kernel_modules": None,
                             "running_kernel_modules": None, "peermem_symbol_errors": []}
    for lib_dir in LIB_DIRS:
        local = path(lib_dir)
        link = os.path.join(local, "libnvidia-ml.so.1")
        try:
            names = os.listdir(local)
        except OSError:
            continue
        # readlink, not realpath: under a facts root an absolute target would leave the root.
        resolved = os.readlink(link) if os.path.islink(link) else None
        version = userspace_version(names, resolved)
        if version:
            facts["userspace_version"] = version
            facts["userspace_library"] = os.path.join(lib_dir, "libnvidia-ml.so.%s" % version)
            break
    facts["module_version"] = kernel_module_version(read_text("/sys/module/nvidia/version"))
    try:
        releases = [r for r in os.listdir(path("/lib/modules")) if os.path.isdir(os.path.join(path("/lib/modules"), r))]
    except OSError:
        releases = []
    newest = newest_kernel(releases)
    facts["next_kernel"] = newest
    if newest:
        facts["next_kernel_modules"] = modules_in(_walk_files(path("/lib/modules/" + newest)))
    if running_kernel and running_kernel in releases:
        facts["running_kernel_modules"] = (facts["next_kernel_modules"] if running_kernel == newest
                                           else modules_in(_walk_files(path("/lib/modules/" + running_kernel))))
    # /dev/kmsg needs privilege and blocks; the persistent kernel logs are plain files. Their
    # last 2 MiB: the errors that matter are those since the last module load.
    for log in ("/var/log/kern.log", "/var/log/dmesg"):
        text = tail_text(path(log))
        if text:
            facts["peermem_symbol_errors"] = symbol_errors(text)
            break
    return facts


def tail_text(local_path: str, size: int = 2 * 1024 * 1024) -> Optional[str]:
    """The last ``size`` bytes of a file as text, or None."""
    try:
        with open(local_path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - size))
            return handle.read().decode("utf-8", "replace")
    except (OSError, ValueError):
        return None
