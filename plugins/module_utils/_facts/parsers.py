# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers behind gpu_stack_facts: what nvidia-smi, the CUDA tools, headers, version
files, chronyc, sysfs and git leave as text, turned into values. nvidia-smi's XML and CSV are
read by smi.py, the collection's one reader of them; here is only the facts' view of its result.

Runs on the managed node: standard library only, Python 3.8+. No I/O here: the collectors in
_gpu_facts and _gpu_python read the node and hand the text over, so each parser is
unit-tested on recorded real outputs.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from . import smi

_VERSION = r"\d+(?:\.\d+)+"


# --------------------------------------------------------------------------- small parsers
def parse_os_release(text: Optional[str]) -> Dict[str, Optional[str]]:
    """``ID`` and ``VERSION_ID`` from /etc/os-release text (quotes removed)."""
    values: Dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip().strip("\"'")
    return {"id": values.get("ID") or None, "version_id": values.get("VERSION_ID") or None}


_NVRM_RE = re.compile(r"NVRM version:\s*NVIDIA UNIX\b(?P<desc>.*?)\bKernel Module\b(?:\s+for\s+\S+)?\s+(?P<ver>" + _VERSION + r")")


def parse_proc_driver_version(text: Optional[str]) -> Dict[str, Optional[str]]:
    """Driver version and kernel-module flavour from /proc/driver/nvidia/version.

    Open:        ``NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build ...``
    Proprietary: ``NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 ...``
    """
    for line in (text or "").splitlines():
        match = _NVRM_RE.search(line)
        if match:
            flavour = "open" if "Open" in match.group("desc").split() else "proprietary"
            return {"version": match.group("ver"), "kernel_module": flavour}
    return {"version": None, "kernel_module": None}


def gpu_facts(smi_data: Dict[str, Any]) -> Dict[str, Any]:
    """The facts' view of the nvidia-smi reader's result (smi.parse_xml, smi.parse_csv): driver and
    CUDA version, and per GPU its index, name, uuid, memory_mib (memory.total in whole MiB),
    pci_bus_id, persistence_mode, architecture and compute_capability ("9.0"; None where
    nvidia-smi gives neither compute_cap nor an architecture of one capability)."""
    gpus = []
    for gpu in smi_data["gpus"]:
        total = gpu.get("memory_total_bytes")
        gpus.append({
            "index": gpu["index"],
            "name": gpu.get("name"),
            "uuid": gpu.get("uuid"),
            "memory_mib": None if total is None else int(total // smi.MIB),
            "pci_bus_id": gpu.get("pci_bus_id"),
            "persistence_mode": gpu.get("persistence_mode"),
            "architecture": gpu.get("architecture"),
            "compute_capability": gpu.get("compute_capability"),
        })
    return {"driver_version": smi_data.get("driver_version"), "cuda_version": smi_data.get("cuda_version"),
            "gpus": gpus}


def parse_nvidia_smi_xml(text: str) -> Dict[str, Any]:
    """``nvidia-smi -q -x`` -> driver/CUDA version and one dict per GPU (index = order listed).

    Raises ValueError when the text is not the nvidia_smi_log XML.
    """
    return gpu_facts(smi.parse_xml(text))


# The CSV fallback asks for the same columns as the recorded fixture.
SMI_QUERY_FIELDS = ",".join(smi.query_fields(("index", "name", "uuid", "driver_version", "memory_total_bytes",
                                              "pci_bus_id", "persistence_mode", "compute_mode")))


def parse_nvidia_smi_csv(text: str) -> Dict[str, Any]:
    """``nvidia-smi --query-gpu=... --format=csv`` (header line kept) -> same shape as the XML parser.

    Columns are found by header name, so their order and any unit suffix (``[MiB]``) do not matter.
    Raises ValueError without a header line, or for a row that does not have the header's columns.
    """
    return gpu_facts(smi.parse_csv(text))


NVIDIA_PCI_VENDOR = "0x10de"


def is_nvidia_gpu(vendor: Optional[str], pci_class: Optional[str]) -> bool:
    """Whether a PCI function is an NVIDIA GPU, from its sysfs ``vendor`` and ``class`` files:
    vendor 0x10de and base class 0x03 (display controller: VGA 0x0300, 3D 0x0302). NVSwitches
    (class 0x0680) and NVIDIA's audio functions (0x0403) are not GPUs."""
    vendor = (vendor or "").strip().lower()
    pci_class = (pci_class or "").strip().lower()
    return vendor == NVIDIA_PCI_VENDOR and pci_class.startswith("0x03") and len(pci_class) == 8


def summarize_gpus(gpus: List[Dict[str, Any]], pci_devices: Optional[List[str]] = None) -> Dict[str, Any]:
    """The ``gpus`` section: ``model`` is the one name every GPU shares (null when mixed or none);
    ``memory_mib`` the smallest GPU's memory, the one that limits a job; ``pci_devices`` the NVIDIA
    GPUs on the PCI bus (None: the bus was not read); ``compute_capability`` the one every GPU
    reports (null when they differ or one is unknown)."""
    names = [g["name"] for g in gpus if g.get("name")]
    models = sorted(set(names))
    capabilities = set(g.get("compute_capability") for g in gpus)
    memories = [g["memory_mib"] for g in gpus if isinstance(g.get("memory_mib"), int)]
    return {
        "count": len(gpus),
        "model": models[0] if len(models) == 1 and len(names) == len(gpus) else None,
        "models": models,
        "memory_mib": min(memories) if memories else None,
        # The one capability every GPU shares (null when mixed, unknown or no GPU).
        "compute_capability": capabilities.pop() if len(capabilities) == 1 else None,
        "uuids": [g["uuid"] for g in gpus if g.get("uuid")],
        "list": gpus,
        "pci_devices": pci_devices,
    }


_CUDA_TOOLS_RE = re.compile(r"Cuda compilation tools, release (\d+\.\d+), V(" + _VERSION + r")")
_CUDA_RELEASE_RE = re.compile(r"\brelease (\d+\.\d+)\b")


def parse_cuda_tool_version(text: Optional[str]) -> Optional[str]:
    """``nvcc --version`` / ``ptxas --version`` -> '13.0.88' (from 'V13.0.88'), else the release '13.0'."""
    text = text or ""
    match = _CUDA_TOOLS_RE.search(text)
    if match:
        return match.group(2)
    match = _CUDA_RELEASE_RE.search(text)
    return match.group(1) if match else None


def parse_cuda_version_json(text: Optional[str]) -> Optional[str]:
    """``cuda.version`` of a toolkit's version.json.

    From CUDA 11.8 on the third field can be a release date ('11.8.20220929'); that is not an
    update level, so such a version is reported as major.minor ('11.8').
    """
    try:
        data = json.loads(text or "")
        version = str(data["cuda"]["version"]).strip()
    except (ValueError, KeyError, TypeError):
        return None
    parts = version.split(".")
    if not re.match("^" + _VERSION + "$", version):
        return None
    if len(parts) >= 3 and len(parts[2]) >= 8:
        return ".".join(parts[:2])
    return version


def library_version(filename: str, stem: str) -> Optional[str]:
    """'libcudart.so.11.7.99' with stem 'libcudart.so' -> '11.7.99'; None for other names."""
    match = re.match(r"^" + re.escape(stem) + r"\.(\d+(?:\.\d+)*)$", filename)
    return match.group(1) if match else None


def _version_key(version: str) -> Tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version))


def parse_cudnn_header(text: Optional[str]) -> Optional[str]:
    """CUDNN_MAJOR/MINOR/PATCHLEVEL -> '8.6.0' (cudnn_version.h for cuDNN >= 8, cudnn.h before)."""
    found = {}
    for key in ("MAJOR", "MINOR", "PATCHLEVEL"):
        match = re.search(r"^\s*#\s*define\s+CUDNN_%s\s+(\d+)\b" % key, text or "", re.M)
        if not match:
            return None
        found[key] = match.group(1)
    return "%s.%s.%s" % (found["MAJOR"], found["MINOR"], found["PATCHLEVEL"])


def parse_nccl_header(text: Optional[str]) -> Optional[str]:
    """NCCL_MAJOR/MINOR/PATCH of nccl.h -> '2.28.3' (NCCL_SUFFIX appended when not empty)."""
    found = {}
    for key in ("MAJOR", "MINOR", "PATCH"):
        match = re.search(r"^\s*#\s*define\s+NCCL_%s\s+(\d+)\b" % key, text or "", re.M)
        if not match:
            return None
        found[key] = match.group(1)
    suffix = re.search(r'^\s*#\s*define\s+NCCL_SUFFIX\s+"([^"]*)"', text or "", re.M)
    return "%s.%s.%s%s" % (found["MAJOR"], found["MINOR"], found["PATCH"], suffix.group(1) if suffix else "")


def cudnn_version_from_int(value: Any) -> Optional[str]:
    """torch.backends.cudnn.version() -> dotted string: 8500 -> '8.5.0', 91900 -> '9.19.0'.

    cuDNN 9 encodes MAJOR*10000 + MINOR*100 + PATCH; cuDNN 8 and older MAJOR*1000 + MINOR*100 + PATCH.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    if value >= 90000:
        return "%d.%d.%d" % (value // 10000, value % 10000 // 100, value % 100)
    return "%d.%d.%d" % (value // 1000, value % 1000 // 100, value % 100)


def nccl_version_from_torch(value: Any) -> Optional[str]:
    """torch.cuda.nccl.version() -> '2.28.9'.

    Recent torch returns a tuple (2, 28, 9) (a 4th item is a suffix string); old torch an int
    code, NCCL_VERSION(X,Y,Z) = X*1000+Y*100+Z up to 2.8 and X*10000+Y*100+Z after.
    """
    if isinstance(value, (list, tuple)):
        numbers = [str(v) for v in value[:3] if isinstance(v, int) and not isinstance(v, bool)]
        return ".".join(numbers) if len(numbers) == 3 else None
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    if value >= 10000:
        return "%d.%d.%d" % (value // 10000, value % 10000 // 100, value % 100)
    return "%d.%d.%d" % (value // 1000, value % 1000 // 100, value % 100)


def parse_chronyc_tracking(text: Optional[str]) -> Dict[str, Any]:
    """``chronyc tracking`` -> synchronized and offset_ms (system clock minus NTP time).

    'System time : 0.000006523 seconds slow of NTP time' -> -0.006523 ms ('fast' is positive).
    'Leap status : Not synchronised' -> synchronized false, and the offset means nothing then.
    """
    fields: Dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    if "Leap status" not in fields and "System time" not in fields:
        return {"synchronized": None, "offset_ms": None}
    leap = fields.get("Leap status", "")
    ref = fields.get("Reference ID", "")
    synchronized = bool(leap) and "not synchron" not in leap.lower() and not ref.startswith("00000000")
    offset = None
    match = re.match(r"^([0-9.]+) seconds (fast|slow) of NTP time", fields.get("System time", ""))
    if match and synchronized:
        offset = float(match.group(1)) * 1000.0 * (1 if match.group(2) == "fast" else -1)
    return {"synchronized": synchronized, "offset_ms": offset}


def parse_timedatectl_show(text: Optional[str]) -> Dict[str, Any]:
    """``timedatectl show`` -> synchronized from NTPSynchronized=yes|no; no offset there."""
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "NTPSynchronized":
            return {"synchronized": value.strip() == "yes", "offset_ms": None}
    return {"synchronized": None, "offset_ms": None}


def parse_proc_modules(text: Optional[str]) -> List[str]:
    """Names of loaded kernel modules from /proc/modules."""
    return [line.split()[0] for line in (text or "").splitlines() if line.strip()]


def parse_sysfs_state(text: Optional[str]) -> Optional[str]:
    """IB sysfs 'state'/'phys_state' ('4: ACTIVE', '5: LinkUp') -> the word ('ACTIVE', 'LinkUp')."""
    value = (text or "").strip()
    if not value:
        return None
    match = re.match(r"^\d+:\s*(.+)$", value)
    return match.group(1).strip() if match else value


def parse_fabricmanager_version(text: Optional[str]) -> Optional[str]:
    """``nv-fabricmanager --version`` ('Fabric Manager version is : 535.161.08') -> '535.161.08'."""
    match = re.search(r"Fabric Manager version is\s*:?\s*(" + _VERSION + ")", text or "")
    return match.group(1) if match else None


def parse_dpkg_fabricmanager(text: Optional[str]) -> Optional[str]:
    """``dpkg-query -W -f='${Package} ${Version} ${db:Status-Abbrev}\\n' 'nvidia-fabricmanager*'``
    -> upstream version of the installed package ('535.129.03-1' -> '535.129.03'), dev packages skipped."""
    for line in (text or "").splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[2].startswith("ii"):
            continue
        if not re.match(r"^nvidia-fabricmanager(-\d+)?$", parts[0]):
            continue
        version = parts[1].split(":", 1)[-1]
        version = version.rsplit("-", 1)[0] if "-" in version else version
        return version
    return None


def parse_git_head(text: Optional[str]) -> Tuple[Optional[str], Optional[str]]:
    """.git/HEAD -> ('ref', 'refs/heads/main') or ('sha', '<40 hex>') or (None, None)."""
    value = (text or "").strip()
    if value.startswith("ref:"):
        return "ref", value[4:].strip()
    if re.match(r"^[0-9a-f]{40}([0-9a-f]{24})?$", value):
        return "sha", value
    return None, None


def parse_packed_refs(text: Optional[str]) -> Dict[str, str]:
    refs = {}
    for line in (text or "").splitlines():
        if not line or line[0] in "#^":
            continue
        parts = line.split()
        if len(parts) == 2 and re.match(r"^[0-9a-f]{40,64}$", parts[0]):
            refs[parts[1]] = parts[0]
    return refs


def parse_ulimit_l(text: Optional[str]) -> Optional[str]:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if lines and re.match(r"^(unlimited|\d+)$", lines[-1]):
        return lines[-1]
    return None
