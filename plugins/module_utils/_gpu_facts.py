# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Everything the gpu_stack_facts module reports about one node, as pure parsers + collectors.

Runs on the managed node: standard library only, Python 3.8+. No Ansible imports, so the
parsers are unit-tested on recorded real outputs and the collectors on a fake filesystem tree.

Two rules hold everywhere:

* Nothing raises. A missing tool, file or module gives null/empty values; an unexpected
  failure is recorded in ``errors`` (one line each, naming the component) and the section
  keeps its empty defaults.
* Nothing changes on the node. Only reads files and runs read-only commands.

Every path a collector touches is a *node path* ("/usr/local/cuda"). :class:`Host` maps it
under ``root`` (a fake tree in tests) and follows symlinks inside that root, so an absolute
link such as ``/usr/local/cuda -> /etc/alternatives/cuda`` stays inside the tree. Facts always
report node paths, never the mapped ones.
"""
from __future__ import annotations

import json
import os
import re
import resource
import shlex
import socket
import subprocess
import xml.etree.ElementTree as ET
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ansible_collections.megatron_ds.cluster.plugins.module_utils import _integrity

RunResult = Tuple[int, str, str]
Runner = Callable[[Sequence[str], float], RunResult]

_VERSION = r"\d+(?:\.\d+)+"
# /usr/local/nvidia/bin: where GPU container images and some clouds put nvidia-smi (it is
# there on the GPU validation host); a non-login Ansible PATH rarely has it.
_STANDARD_BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
                      "/usr/local/nvidia/bin")
# Tools write for humans; the C locale keeps the words the parsers look for.
_C_LOCALE = {"LC_ALL": "C", "LANG": "C"}


# --------------------------------------------------------------------------- running things
def run_command(argv: Sequence[str], timeout: float) -> RunResult:
    """Run ``argv`` (no shell) with a timeout. Never raises: rc 127 = not runnable, 124 = timed out."""
    env = dict(os.environ)
    env.update(_C_LOCALE)
    try:
        proc = subprocess.run(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=timeout, env=env, check=False,
        )
    except subprocess.TimeoutExpired:
        return 124, "", "timed out after %ss" % timeout
    except OSError as exc:
        return 127, "", str(exc)
    return (
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def resolve_in_root(root: str, path: str) -> str:
    """The real path of node path ``path`` inside ``root``, following symlinks as a chroot would.

    With ``root`` '/' this is ``os.path.realpath``. Otherwise an absolute link target restarts
    at ``root``, and '..' never climbs above it. Loops stop after 40 links (like the kernel).
    """
    if root in ("", "/"):
        return os.path.realpath(path)
    pending = [p for p in path.split("/") if p not in ("", ".")]
    done: List[str] = []
    links = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = os.path.join(root, *(done + [part]))
        if os.path.islink(candidate) and links < 40:
            links += 1
            target = os.readlink(candidate)
            if target.startswith("/"):
                done = []
            pending = [p for p in target.split("/") if p not in ("", ".")] + pending
            continue
        done.append(part)
    return os.path.join(root, *done)


class Host:
    """The node as the collectors see it: files under ``root`` and a command runner."""

    def __init__(self, root: str = "/", run: Optional[Runner] = None, timeout: float = 120.0,
                 search_path: Optional[str] = None) -> None:
        self.root = root or "/"
        self.timeout = timeout
        self._run = run or run_command
        # The module's own PATH only means something on the real root.
        if search_path is None:
            search_path = os.environ.get("PATH", "") if self.root == "/" else ""
        self._search_dirs = [d for d in search_path.split(os.pathsep) if d.startswith("/")]

    def path(self, node_path: str) -> str:
        return resolve_in_root(self.root, node_path)

    def exists(self, node_path: str) -> bool:
        return os.path.exists(self.path(node_path))

    def isdir(self, node_path: str) -> bool:
        return os.path.isdir(self.path(node_path))

    def isfile(self, node_path: str) -> bool:
        return os.path.isfile(self.path(node_path))

    def exec_path(self, node_path: str) -> str:
        """Where to exec ``node_path``: its directory resolved inside root, its last component
        left alone. A venv's bin/python is a symlink to the base interpreter, and Python finds
        its venv (pyvenv.cfg) only when started through the link itself."""
        directory, name = os.path.split(node_path.rstrip("/"))
        return os.path.join(self.path(directory or "/"), name)

    def is_executable(self, node_path: str) -> bool:
        real = self.exec_path(node_path)
        return os.path.isfile(real) and os.access(real, os.X_OK)

    def read_text(self, node_path: str, limit: int = 4 * 1024 * 1024) -> Optional[str]:
        data = self.read_bytes(node_path, limit)
        return None if data is None else data.decode("utf-8", "replace")

    def read_bytes(self, node_path: str, limit: int = 64 * 1024 * 1024) -> Optional[bytes]:
        try:
            with open(self.path(node_path), "rb") as handle:
                return handle.read(limit)
        except (OSError, ValueError):
            return None

    def listdir(self, node_path: str) -> List[str]:
        try:
            return sorted(os.listdir(self.path(node_path)))
        except OSError:
            return []

    def which_all(self, name: str) -> List[str]:
        """Node paths of executable ``name``: PATH first (real root only), then the standard dirs."""
        found = []
        for directory in self._search_dirs + list(_STANDARD_BIN_DIRS):
            candidate = directory.rstrip("/") + "/" + name
            if candidate not in found and self.is_executable(candidate):
                found.append(candidate)
        return found

    def which(self, name: str) -> Optional[str]:
        found = self.which_all(name)
        return found[0] if found else None

    def run(self, argv: Sequence[str], timeout: Optional[float] = None) -> RunResult:
        """Run a command whose argv[0] is a node path (mapped under root)."""
        argv = list(argv)
        if argv and argv[0].startswith("/"):
            argv[0] = self.exec_path(argv[0])
        try:
            return self._run(argv, timeout or self.timeout)
        except Exception as exc:  # a runner must not take the facts down with it
            return 127, "", "%s: %s" % (type(exc).__name__, exc)


def _first_line(text: str) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _cmd_error(argv: Sequence[str], result: RunResult) -> str:
    rc, out, err = result
    detail = _first_line(err) or _first_line(out) or "no output"
    return "%s: exit %s: %s" % (" ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv)), rc, detail)


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


def _mib(value: Optional[str]) -> Optional[int]:
    match = re.match(r"^\s*(\d+)(?:\s*MiB)?\s*$", value or "")
    return int(match.group(1)) if match else None


def _na(value: Optional[str]) -> Optional[str]:
    value = (value or "").strip()
    return None if value in ("", "N/A", "[N/A]", "[Not Supported]", "Not Supported") else value


def _enabled(value: Optional[str]) -> Optional[bool]:
    value = (value or "").strip().lower()
    return True if value == "enabled" else False if value == "disabled" else None


def parse_nvidia_smi_xml(text: str) -> Dict[str, Any]:
    """``nvidia-smi -q -x`` -> driver/CUDA version and one dict per GPU (index = order listed).

    Raises ValueError when the text is not the nvidia_smi_log XML.
    """
    try:
        root = ET.fromstring(text.strip())
    except ET.ParseError as exc:
        raise ValueError("not nvidia-smi XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise ValueError("not nvidia-smi XML: root element is <%s>" % root.tag)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        gpus.append({
            "index": index,
            "name": _na(gpu.findtext("product_name")),
            "uuid": _na(gpu.findtext("uuid")),
            "memory_mib": _mib(gpu.findtext("fb_memory_usage/total")),
            "pci_bus_id": _na(gpu.findtext("pci/pci_bus_id")) or _na(gpu.get("id")),
            "persistence_mode": _enabled(gpu.findtext("persistence_mode")),
        })
    return {
        "driver_version": _na(root.findtext("driver_version")),
        "cuda_version": _na(root.findtext("cuda_version")),
        "gpus": gpus,
    }


# The CSV fallback asks for the same columns as the recorded fixture.
SMI_QUERY_FIELDS = "index,name,uuid,driver_version,memory.total,pci.bus_id,persistence_mode,compute_mode"


def parse_nvidia_smi_csv(text: str) -> Dict[str, Any]:
    """``nvidia-smi --query-gpu=... --format=csv`` (header line kept) -> same shape as the XML parser.

    Columns are found by header name, so their order and any unit suffix (``[MiB]``) do not matter.
    """
    lines = [line for line in (text or "").splitlines() if line.strip()]
    if not lines:
        return {"driver_version": None, "cuda_version": None, "gpus": []}
    header = [re.sub(r"\s*\[.*\]$", "", h.strip()) for h in lines[0].split(",")]
    if "name" not in header and "uuid" not in header:
        raise ValueError("nvidia-smi CSV without a header line: %r" % lines[0])
    gpus = []
    driver = None
    for position, line in enumerate(lines[1:]):
        cells = [c.strip() for c in line.split(",")]
        row = dict(zip(header, cells))
        index = row.get("index", "")
        driver = driver or _na(row.get("driver_version"))
        gpus.append({
            "index": int(index) if index.isdigit() else position,
            "name": _na(row.get("name")),
            "uuid": _na(row.get("uuid")),
            "memory_mib": _mib(row.get("memory.total")),
            "pci_bus_id": _na(row.get("pci.bus_id")),
            "persistence_mode": _enabled(row.get("persistence_mode")),
        })
    return {"driver_version": driver, "cuda_version": None, "gpus": gpus}


def summarize_gpus(gpus: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The ``gpus`` section: ``model`` is the one name every GPU shares (null when mixed or none);
    ``memory_mib`` the smallest GPU's memory, the one that limits a job."""
    names = [g["name"] for g in gpus if g.get("name")]
    models = sorted(set(names))
    memories = [g["memory_mib"] for g in gpus if isinstance(g.get("memory_mib"), int)]
    return {
        "count": len(gpus),
        "model": models[0] if len(models) == 1 and len(names) == len(gpus) else None,
        "models": models,
        "memory_mib": min(memories) if memories else None,
        "uuids": [g["uuid"] for g in gpus if g.get("uuid")],
        "list": gpus,
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


# --------------------------------------------------------------------------- collectors
def collect_os(host: Host) -> Dict[str, Optional[str]]:
    text = host.read_text("/etc/os-release")
    if text is None:
        text = host.read_text("/usr/lib/os-release")
    return parse_os_release(text)


def collect_nvidia(host: Host, errors: List[str]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """driver + gpus: /proc/driver/nvidia/version for the driver, ONE ``nvidia-smi -q -x`` for
    the GPUs (CSV query only when the XML fails)."""
    driver: Dict[str, Any] = {"version": None, "kernel_module": None, "source": None}
    parsed = parse_proc_driver_version(host.read_text("/proc/driver/nvidia/version"))
    if parsed["version"]:
        driver.update(parsed, source="/proc/driver/nvidia/version")
    smi_data: Optional[Dict[str, Any]] = None
    smi = host.which("nvidia-smi")
    if smi:
        argv = [smi, "-q", "-x"]
        result = host.run(argv)
        if result[0] == 0:
            try:
                smi_data = parse_nvidia_smi_xml(result[1])
            except ValueError as exc:
                errors.append("gpus: nvidia-smi -q -x: %s" % exc)
        else:
            errors.append("gpus: " + _cmd_error(argv, result))
        if smi_data is None:
            argv = [smi, "--query-gpu=" + SMI_QUERY_FIELDS, "--format=csv"]
            result = host.run(argv)
            if result[0] == 0:
                try:
                    smi_data = parse_nvidia_smi_csv(result[1])
                except ValueError as exc:
                    errors.append("gpus: nvidia-smi --query-gpu: %s" % exc)
            else:
                errors.append("gpus: " + _cmd_error(argv, result))
    gpus = summarize_gpus(smi_data["gpus"] if smi_data else [])
    if driver["version"] is None and smi_data and smi_data.get("driver_version"):
        driver.update(version=smi_data["driver_version"], source="nvidia-smi")
    return driver, gpus


def collect_nvswitch(host: Host) -> Dict[str, Any]:
    """NVSwitch devices: /proc/driver/nvidia-nvswitch/devices/* (one entry per switch), else the
    /dev/nvidia-nvswitchN nodes (nvidia-nvswitchctl is the control node, not a switch)."""
    count = len(host.listdir("/proc/driver/nvidia-nvswitch/devices"))
    if not count:
        count = len([n for n in host.listdir("/dev") if re.match(r"^nvidia-nvswitch\d+$", n)])
    return {"present": count > 0, "count": count}


def collect_fabric_manager(host: Host) -> Dict[str, Any]:
    facts: Dict[str, Any] = {"installed": False, "version": None, "active": None}
    binary = host.which("nv-fabricmanager")
    if binary:
        facts["installed"] = True
        rc, out, err = host.run([binary, "--version"])
        facts["version"] = parse_fabricmanager_version(out + "\n" + err)
    # dpkg-query only where dpkg lists such a package: most nodes have none, and a process per
    # node is what the facts call must not spend for nothing.
    listed = any(re.match(r"^nvidia-fabricmanager.*\.list$", n) for n in host.listdir("/var/lib/dpkg/info"))
    dpkg = host.which("dpkg-query") if listed else None
    if dpkg and facts["version"] is None:
        rc, out, _err = host.run([dpkg, "-W", "-f=${Package} ${Version} ${db:Status-Abbrev}\n",
                                  "nvidia-fabricmanager*"])
        version = parse_dpkg_fabricmanager(out) if rc == 0 else None
        if version:
            facts.update(installed=True, version=version)
    # Whether the service runs matters only where it is installed (null elsewhere).
    systemctl = host.which("systemctl") if facts["installed"] else None
    if systemctl:
        _rc, out, _err = host.run([systemctl, "is-active", "nvidia-fabricmanager"])
        # Only a systemd that answers gives a verdict; "offline" / "Failed to connect" stay null.
        state = _first_line(out)
        if state in ("active", "reloading"):
            facts["active"] = True
        elif state in ("inactive", "failed", "activating", "deactivating", "maintenance"):
            facts["active"] = False
    return facts


def detect_cuda(host: Host, home: str, cache: Dict[str, Dict[str, Any]]) -> Dict[str, Any]:
    """Version of the toolkit at ``home``: version.json, then bin/nvcc, then bin/ptxas, then
    the libcudart.so.X.Y.Z file name. ``nvcc_version`` is nvcc's own version when nvcc runs."""
    key = host.path(home)
    if key in cache:
        return cache[key]
    found: Dict[str, Any] = {"version": None, "source": None, "nvcc_version": None}
    version = parse_cuda_version_json(host.read_text(home + "/version.json"))
    if version:
        found.update(version=version, source="version.json")
    for tool in ("nvcc", "ptxas"):
        path = home + "/bin/" + tool
        if not host.is_executable(path):
            continue
        rc, out, _err = host.run([path, "--version"])
        tool_version = parse_cuda_tool_version(out) if rc == 0 else None
        if tool == "nvcc":
            found["nvcc_version"] = tool_version
        if tool_version and not found["version"]:
            found.update(version=tool_version, source=tool)
        if found["version"] and tool == "nvcc":
            break
    if not found["version"]:
        libs = []
        for libdir in [home + "/lib64", home + "/lib"] + [
                home + "/targets/" + t + "/lib" for t in host.listdir(home + "/targets")]:
            for name in host.listdir(libdir):
                lib_version = library_version(name, "libcudart.so")
                if lib_version:
                    libs.append(lib_version)
        if libs:
            found.update(version=max(libs, key=lambda v: (len(v.split(".")), _version_key(v))),
                         source="library")
    cache[key] = found
    return found


def collect_cuda(host: Host) -> Dict[str, Any]:
    cache: Dict[str, Dict[str, Any]] = {}
    candidates = ["/usr/local/" + n for n in host.listdir("/usr/local")
                  if n == "cuda" or n.startswith("cuda-")]
    candidates = [c for c in candidates if host.isdir(c)]
    installed = []
    for path in candidates:
        found = detect_cuda(host, path, cache)
        installed.append({"path": path, "version": found["version"], "source": found["source"]})

    home = None
    if host.isdir("/usr/local/cuda"):
        home = "/usr/local/cuda"
    else:
        # A distribution toolkit (Debian's nvidia-cuda-toolkit: /usr/bin/nvcc, headers in
        # /usr/include); a wrapper script in /usr/local/bin does not make /usr/local a toolkit.
        for nvcc in host.which_all("nvcc"):
            prefix = os.path.dirname(os.path.dirname(nvcc))
            if host.isfile(prefix + "/include/cuda_runtime_api.h"):
                home = prefix
                break
        if home is None and installed:
            versioned = [i for i in installed if i["version"]]
            if versioned:
                home = max(versioned, key=lambda i: _version_key(i["version"]))["path"]
        if home and home not in candidates:
            found = detect_cuda(host, home, cache)
            installed.append({"path": home, "version": found["version"], "source": found["source"]})
    found = detect_cuda(host, home, cache) if home else {"version": None, "source": None, "nvcc_version": None}
    return {
        "version": found["version"],
        "source": found["source"],
        "home": home,
        "nvcc_version": found["nvcc_version"],
        "installed": installed,
    }


def _include_dirs(cuda_home: Optional[str]) -> List[str]:
    dirs = ["/usr/include", "/usr/include/x86_64-linux-gnu", "/usr/include/aarch64-linux-gnu",
            "/usr/local/cuda/include"]
    if cuda_home and cuda_home + "/include" not in dirs:
        dirs.append(cuda_home + "/include")
    return dirs


def collect_cudnn(host: Host, cuda_home: Optional[str]) -> Dict[str, Optional[str]]:
    """System cuDNN from its header: cudnn_version.h (cuDNN >= 8, also the Debian alternatives
    name cudnn_version_v9.h), then cudnn.h (cuDNN 7 kept the version there)."""
    dirs = _include_dirs(cuda_home)
    names = [(d, "cudnn_version.h") for d in dirs]
    names += [(d, n) for d in dirs for n in host.listdir(d) if re.match(r"^cudnn_version_v\d+\.h$", n)]
    names += [(d, "cudnn.h") for d in dirs]
    for directory, name in names:
        path = directory + "/" + name
        version = parse_cudnn_header(host.read_text(path))
        if version:
            return {"version": version, "source": path}
    return {"version": None, "source": None}


_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu",
             "/usr/lib64", "/usr/lib", "/usr/local/lib", "/usr/local/nccl/lib", "/usr/local/cuda/lib64",
             "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/targets/sbsa-linux/lib")


def collect_nccl(host: Host, cuda_home: Optional[str]) -> Dict[str, Optional[str]]:
    """System NCCL: nccl.h for the version, plus the fully versioned libnccl.so.X.Y.Z file.

    Library directories are read in the dynamic loader's usual order, so the first one found is
    the one a program would most likely load. Without a header the file name gives the version.
    """
    facts: Dict[str, Optional[str]] = {"version": None, "source": None, "library": None}
    for directory in _include_dirs(cuda_home) + ["/usr/local/nccl/include"]:
        path = directory + "/nccl.h"
        version = parse_nccl_header(host.read_text(path))
        if version:
            facts.update(version=version, source=path)
            break
    seen = set()
    for directory in _LIB_DIRS:
        real = host.path(directory)
        if real in seen:
            continue
        seen.add(real)
        libs = [(library_version(n, "libnccl.so"), n) for n in host.listdir(directory)]
        libs = [(v, n) for v, n in libs if v and len(v.split(".")) >= 3]
        if libs:
            version, name = max(libs, key=lambda item: _version_key(item[0]))
            facts["library"] = directory + "/" + name
            if not facts["version"]:
                facts.update(version=version, source=facts["library"])
            break
    return facts


# Runs inside the training venv's python. One process for torch, DeepSpeed and apex: importing
# torch dominates the cost. Anything the imports print goes to stderr (fd 1 is redirected), so
# stdout carries only the JSON. Python 3.6+ syntax: old stacks run old interpreters.
PROBE_SCRIPT = r'''
import json, os, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

def err(exc):
    return "%s: %s" % (type(exc).__name__, exc)

def dist_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return None

r = {"python": {"version": "%d.%d.%d" % tuple(sys.version_info[:3]), "executable": sys.executable}}
t = {"version": dist_version("torch"), "cuda": None, "cudnn": None, "nccl": None, "error": None}
try:
    import torch
    t["version"] = str(torch.__version__)
    t["cuda"] = torch.version.cuda
    try:
        t["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        pass
    if t["cuda"]:
        try:
            v = torch.cuda.nccl.version()
            t["nccl"] = list(v) if isinstance(v, tuple) else v
        except Exception:
            pass
except BaseException as exc:
    t["error"] = err(exc)
r["torch"] = t

d = {"version": dist_version("deepspeed"), "error": None}
try:
    import deepspeed
    d["version"] = str(getattr(deepspeed, "__version__", d["version"]))
except BaseException as exc:
    d["error"] = err(exc)
r["deepspeed"] = d

a = {"present": False, "cuda_ext": False, "error": None}
try:
    import importlib, importlib.util
    apex = importlib.import_module("apex")
    if importlib.util.find_spec("apex.normalization") is None and importlib.util.find_spec("apex.optimizers") is None:
        a["error"] = "the importable apex (%s) is not NVIDIA apex" % getattr(apex, "__file__", "?")
    else:
        a["present"] = True
        missing = []
        for name in ("amp_C", "fused_layer_norm_cuda"):
            try:
                importlib.import_module(name)
            except BaseException as exc:
                missing.append("%s (%s)" % (name, err(exc)))
        a["cuda_ext"] = not missing
        if missing:
            a["error"] = "apex CUDA extensions not importable: " + "; ".join(missing)
except BaseException as exc:
    a["error"] = err(exc)
r["apex"] = a

out.write(json.dumps(r, default=str))
out.flush()
'''


def _empty_python_stack(reason: Optional[str], source: Optional[str] = None) -> Dict[str, Any]:
    return {
        "python": {"version": None, "executable": None, "source": None},
        "torch": {"version": None, "cuda": None, "cudnn": None, "nccl": None, "error": reason, "source": source},
        "deepspeed": {"version": None, "error": reason, "source": source},
        "apex": {"present": False, "cuda_ext": False, "error": reason, "source": source},
    }


def parse_probe_output(stdout: str) -> Dict[str, Any]:
    """The probe's JSON -> python/torch/deepspeed/apex sections, with every version a string."""
    data = json.loads(stdout.strip().splitlines()[-1])
    facts = _empty_python_stack(None, "import")
    python = data.get("python") or {}
    facts["python"]["version"] = _str_or_none(python.get("version"))
    facts["python"]["source"] = "import"
    torch = data.get("torch") or {}
    facts["torch"].update(
        version=_str_or_none(torch.get("version")),
        cuda=_str_or_none(torch.get("cuda")),
        cudnn=cudnn_version_from_int(torch.get("cudnn")),
        nccl=nccl_version_from_torch(torch.get("nccl")),
        error=_str_or_none(torch.get("error")),
    )
    deepspeed = data.get("deepspeed") or {}
    facts["deepspeed"].update(version=_str_or_none(deepspeed.get("version")),
                              error=_str_or_none(deepspeed.get("error")))
    apex = data.get("apex") or {}
    facts["apex"].update(present=bool(apex.get("present")), cuda_ext=bool(apex.get("cuda_ext")),
                         error=_str_or_none(apex.get("error")))
    return facts


def _str_or_none(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def collect_python_stack(host: Host, venv: Optional[str], errors: List[str], probe: str = "files") -> Dict[str, Any]:
    """python/torch/deepspeed/apex of ``venv``: from its files (``probe='files'``, no process) or
    by importing them in the venv's python (``probe='import'``, seconds of CPU). Each of torch,
    deepspeed and apex carries ``files``, its installed files against pip's RECORD (empty when
    there is nothing to check)."""
    stack = _read_python_stack(host, venv, errors, probe)
    for name in CHECKED_DISTRIBUTIONS:
        stack[name].setdefault("files", _integrity.empty())
    return stack


def _read_python_stack(host: Host, venv: Optional[str], errors: List[str], probe: str) -> Dict[str, Any]:
    if not venv:
        return _empty_python_stack("no venv given")
    python = next((venv.rstrip("/") + "/bin/" + n for n in ("python", "python3")
                   if host.is_executable(venv.rstrip("/") + "/bin/" + n)), None)
    if python is None:
        reason = "no python in venv %s (looked for bin/python, bin/python3)" % venv
        errors.append("python: " + reason)
        return _empty_python_stack(reason, probe)
    if probe == "files":
        return read_python_stack_files(host, venv, python)
    if probe != "import":
        raise ValueError("python_probe is %r; expected one of %s" % (probe, ", ".join(PYTHON_PROBES)))
    # -I: the venv's own packages only; PYTHONPATH, user site and the current directory of the
    # Ansible run would otherwise change what imports.
    argv = [python, "-I", "-c", PROBE_SCRIPT]
    result = host.run(argv)
    if result[0] != 0:
        reason = "%s -I -c <probe>: exit %s: %s" % (python, result[0], _first_line(result[2][-2000:]) or "no output")
        errors.append("python: " + reason)
        return _empty_python_stack(reason, probe)
    try:
        facts = parse_probe_output(result[1])
    except (ValueError, IndexError, AttributeError) as exc:
        reason = "probe output is not JSON: %s" % exc
        errors.append("python: " + reason)
        return _empty_python_stack(reason, probe)
    facts["python"]["executable"] = python
    version = facts["python"]["version"] or ""
    add_installed_files(_Venv(host, venv, ".".join(version.split(".")[:2]) or None), facts)
    return facts


# --------------------------------------------------------------------------- the venv, from files
# The default way to read the training stack (python_probe=files): no process at all. The import
# probe costs seconds of CPU per node (importing torch); these are a few stat() and small reads.
PYTHON_PROBES = ("files", "import")

_METADATA_VERSION_RE = re.compile(r"^Version:\s*(\S+)\s*$", re.M)
_DIST_DIR_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*?)-(?P<version>[^-/]+?)\.(?P<kind>dist|egg)-info$")
_PYVENV_VERSION_RE = re.compile(r"^\s*(?:version|version_info)\s*=\s*(\d+\.\d+(?:\.\d+)?)", re.M)
_LIB_PYTHON_RE = re.compile(r"^(?:python|pypy)(\d+\.\d+)$")


def _dist_key(name: str) -> str:
    """PEP 503 normalisation, with '_' (what wheel dist-info directory names use)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def parse_pyvenv_cfg(text: Optional[str]) -> Optional[str]:
    """``version = 3.11.2`` (venv) or ``version_info = 3.11.2.final.0`` (virtualenv, uv) -> '3.11.2'."""
    match = _PYVENV_VERSION_RE.search(text or "")
    return match.group(1) if match else None


def parse_metadata_version(text: Optional[str]) -> Optional[str]:
    """``Version:`` of a METADATA / PKG-INFO header (the body after the first blank line is ignored)."""
    header = re.split(r"\n\s*\n", text or "", maxsplit=1)[0]
    match = _METADATA_VERSION_RE.search(header)
    return match.group(1) if match else None


def _assigned_string(text: Optional[str], name: str) -> Tuple[bool, Optional[str]]:
    """``name = 'x'`` / ``name: Optional[str] = 'x'`` / ``name = None`` in a generated module.

    (found, value): torch 1.13 writes ``cuda = '11.7'``, torch 2.x ``cuda: Optional[str] = '12.1'``,
    CPU builds ``None``; DeepSpeed's git_version_info_installed.py ``version='0.9.2'``.
    """
    match = re.search(r"^%s\s*(?::[^=\n]*)?=\s*(?:'([^'\n]*)'|\"([^\"\n]*)\"|(None))\s*$" % re.escape(name),
                      text or "", re.M)
    if not match:
        return False, None
    if match.group(3):
        return True, None
    return True, match.group(1) if match.group(1) is not None else match.group(2)


def parse_torch_version_py(text: Optional[str]) -> Dict[str, Any]:
    """torch/version.py -> {'version': '2.1.0+cu121', 'cuda': '12.1' or None, 'readable': bool}."""
    has_version, version = _assigned_string(text, "__version__")
    _has_cuda, cuda = _assigned_string(text, "cuda")
    return {"version": version or None, "cuda": cuda or None, "readable": has_version and bool(version)}


def _first3(version: Optional[str]) -> Optional[str]:
    """'8.5.0.96' -> '8.5.0' (the form torch reports, see cudnn_version_from_int); '2.21.5' stays."""
    numbers = re.findall(r"\d+", (version or "").split("+", 1)[0])
    return ".".join(str(int(n)) for n in numbers[:3]) if len(numbers) >= 3 else None


class _Venv:
    """The site-packages directories of one venv and the distributions installed in them."""

    def __init__(self, host: Host, venv: str, python_mm: Optional[str]) -> None:
        self.host = host
        self.venv = venv.rstrip("/")
        self.sites: List[str] = []
        seen = set()
        for lib in ("lib", "lib64"):
            names = [n for n in host.listdir("%s/%s" % (self.venv, lib)) if _LIB_PYTHON_RE.match(n)]
            # The interpreter's own series first, should an old venv leave another one behind.
            names.sort(key=lambda n: (_LIB_PYTHON_RE.match(n).group(1) != python_mm, n))  # type: ignore[union-attr]
            for name in names:
                site = "%s/%s/%s/site-packages" % (self.venv, lib, name)
                real = host.path(site)
                if real not in seen and host.isdir(site):
                    seen.add(real)
                    self.sites.append(site)
        self.dists: Dict[str, List[Tuple[str, str]]] = {}  # key -> [(metadata dir, version)]
        for site in self.sites:
            for entry in host.listdir(site):
                match = _DIST_DIR_RE.match(entry)
                if not match:
                    continue
                path = site + "/" + entry
                meta = path + ("/METADATA" if match.group("kind") == "dist" else "/PKG-INFO")
                if match.group("kind") == "egg" and host.isfile(path):
                    meta = path  # an egg-info file, not a directory
                version = parse_metadata_version(self.host.read_text(meta, limit=64 * 1024)) or match.group("version")
                self.dists.setdefault(_dist_key(match.group("name")), []).append((path, version))

    def lib_series(self) -> Optional[str]:
        """'3.11' from lib/python3.11 (the fallback when pyvenv.cfg has no version)."""
        for site in self.sites:
            match = _LIB_PYTHON_RE.match(site.split("/")[-2])
            if match:
                return match.group(1)
        return None

    def find(self, relative: str) -> Optional[str]:
        """The node path of ``relative`` in the first site-packages that has it."""
        for site in self.sites:
            if self.host.exists(site + "/" + relative):
                return site + "/" + relative
        return None

    def dist(self, name: str) -> Tuple[Optional[str], Optional[str], List[str]]:
        """(version, metadata dir, every version found) of distribution ``name``."""
        found = self.dists.get(_dist_key(name)) or []
        if not found:
            return None, None, []
        return found[0][1], found[0][0], [version for _path, version in found]

    def editable_source(self, meta_dir: Optional[str]) -> Optional[str]:
        """Where an editable install (pip install -e) keeps its code: direct_url.json's file:// URL."""
        if not meta_dir:
            return None
        try:
            data = json.loads(self.host.read_text(meta_dir + "/direct_url.json") or "")
        except ValueError:
            return None
        url = str(data.get("url") or "") if isinstance(data, dict) else ""
        editable = isinstance(data, dict) and isinstance(data.get("dir_info"), dict) and data["dir_info"].get("editable")
        if editable and url.startswith("file://"):
            return url[len("file://"):].rstrip("/") or "/"
        return None

    def package_file(self, meta_dir: Optional[str], relative: str) -> Optional[str]:
        """``relative`` (e.g. 'torch/version.py') in site-packages, else in the editable source tree."""
        found = self.find(relative)
        if found:
            return found
        source = self.editable_source(meta_dir)
        if source and self.host.exists(source + "/" + relative):
            return source + "/" + relative
        return None


def _public(version: str) -> str:
    return version.split("+", 1)[0].strip().lower()


def _consistency_error(name: str, venv: str, versions: List[str], package: Optional[str], relative: str,
                       pkg_version: Optional[str]) -> Optional[str]:
    """Why what pip recorded and what Python would import disagree, or None."""
    if len(versions) > 1:
        return ("%s has %d distributions in %s (%s): an interrupted upgrade; import would mix them"
                % (name, len(versions), venv, ", ".join(versions)))
    if versions and package is None:
        return ("%s's dist-info says %s but site-packages/%s is missing: a half-removed install"
                % (name, versions[0], relative))
    if not versions and package is not None:
        return ("%s has a package (%s) but no dist-info: installed outside pip, or a half-removed install"
                % (name, package))
    # PyPI's torch wheels drop the local label from the metadata only (METADATA 2.1.2,
    # torch.__version__ 2.1.2+cu121): compare the public versions.
    if versions and pkg_version and _public(pkg_version) != _public(versions[0]):
        return ("%s's dist-info says %s but %s says %s: a mixed install" % (name, versions[0], package, pkg_version))
    return None


def _nvidia_dist_version(venv: _Venv, component: str, cuda_major: Optional[str]) -> Optional[str]:
    """Version of nvidia-<component>-cu<N> (the wheel torch loads its cuDNN/NCCL from), the one
    for torch's CUDA major first."""
    pattern = re.compile(r"^nvidia_%s_cu(\d+)$" % component)
    found = []
    for key, dists in venv.dists.items():
        match = pattern.match(key)
        if match:
            found.append((match.group(1) == cuda_major, dists[0][1]))
    if not found:
        return None
    found.sort(key=lambda item: (item[0], _version_key(item[1])), reverse=True)
    return found[0][1]


def _torch_lib_version(venv: _Venv, stem: str) -> Optional[str]:
    """A library torch bundles in torch/lib with a full version in its name (libcudnn.so.8.x.y)."""
    lib = venv.find("torch/lib")
    versions = [library_version(n, stem) for n in venv.host.listdir(lib)] if lib else []
    versions = [v for v in versions if v and len(v.split(".")) >= 3]
    return max(versions, key=_version_key) if versions else None


def read_torch_files(venv: _Venv) -> Dict[str, Any]:
    facts: Dict[str, Any] = {"version": None, "cuda": None, "cudnn": None, "nccl": None, "error": None,
                             "source": "files"}
    dist_version, meta_dir, versions = venv.dist("torch")
    version_py = venv.package_file(meta_dir, "torch/version.py")
    parsed = parse_torch_version_py(venv.host.read_text(version_py)) if version_py else None
    if version_py and parsed and not parsed["readable"]:
        facts["error"] = "%s does not assign __version__: a damaged install" % version_py
    facts["version"] = (parsed or {}).get("version") or dist_version
    if facts["version"] is None:
        facts["error"] = facts["error"] or "torch is not installed in %s" % venv.venv
        return facts
    facts["error"] = facts["error"] or _consistency_error(
        "torch", venv.venv, versions, version_py, "torch/version.py", (parsed or {}).get("version"))
    facts["cuda"] = (parsed or {}).get("cuda")
    if facts["cuda"]:
        cuda_major = facts["cuda"].split(".", 1)[0]
        # pip wheels of torch >= 1.13 load cuDNN and NCCL from NVIDIA's own wheels; a torch that
        # bundles them in torch/lib rarely names the full version there (then null: see the docs).
        cudnn = _nvidia_dist_version(venv, "cudnn", cuda_major)
        if cudnn is None:
            header = venv.find("nvidia/cudnn/include/cudnn_version.h")
            cudnn = parse_cudnn_header(venv.host.read_text(header)) if header else None
        facts["cudnn"] = _first3(cudnn or _torch_lib_version(venv, "libcudnn.so"))
        nccl = _nvidia_dist_version(venv, "nccl", cuda_major)
        if nccl is None:
            header = venv.find("nvidia/nccl/include/nccl.h")
            nccl = parse_nccl_header(venv.host.read_text(header)) if header else None
        facts["nccl"] = _first3(nccl or _torch_lib_version(venv, "libnccl.so"))
    return facts


def read_deepspeed_files(venv: _Venv) -> Dict[str, Any]:
    facts: Dict[str, Any] = {"version": None, "error": None, "source": "files"}
    dist_version, meta_dir, versions = venv.dist("deepspeed")
    init = venv.package_file(meta_dir, "deepspeed/__init__.py")
    pkg_version = None
    if init:
        info = venv.host.read_text(init.rsplit("/", 1)[0] + "/git_version_info_installed.py")
        pkg_version = _assigned_string(info, "version")[1]
    facts["version"] = dist_version or pkg_version
    if facts["version"] is None and init is None:
        facts["error"] = "deepspeed is not installed in %s" % venv.venv
        return facts
    facts["error"] = _consistency_error("deepspeed", venv.venv, versions, init, "deepspeed/__init__.py", pkg_version)
    return facts


_APEX_EXTENSIONS = ("amp_C", "fused_layer_norm_cuda")


def read_apex_files(venv: _Venv) -> Dict[str, Any]:
    facts: Dict[str, Any] = {"present": False, "cuda_ext": False, "error": None, "source": "files"}
    # `python setup.py install` (older apex instructions) leaves an egg directory in site-packages.
    roots = list(venv.sites)
    for site in venv.sites:
        roots += [site + "/" + n for n in venv.host.listdir(site) if n.endswith(".egg") and venv.host.isdir(site + "/" + n)]
    apex = next((r + "/apex" for r in roots if venv.host.isdir(r + "/apex")), None)
    if apex is None:
        facts["error"] = "apex is not installed in %s" % venv.venv
        return facts
    if not (venv.host.isdir(apex + "/normalization") or venv.host.isdir(apex + "/optimizers")):
        facts["error"] = "%s is not NVIDIA apex (no apex/normalization, no apex/optimizers)" % apex
        return facts
    facts["present"] = True
    names = [n for r in roots for n in venv.host.listdir(r)]
    missing = [e for e in _APEX_EXTENSIONS if not any(re.match(re.escape(e) + r"(\..*)?\.so$", n) for n in names)]
    facts["cuda_ext"] = not missing
    if missing:
        facts["error"] = "apex CUDA extensions not built: no %s in site-packages" % ", ".join(e + "*.so" for e in missing)
    return facts


def read_python_stack_files(host: Host, venv: str, python: str) -> Dict[str, Any]:
    """The python/torch/deepspeed/apex sections from the venv's files alone (no process)."""
    venv = venv.rstrip("/")
    facts = _empty_python_stack(None)
    version = parse_pyvenv_cfg(host.read_text(venv + "/pyvenv.cfg"))
    source = "pyvenv.cfg" if version else None
    stack = _Venv(host, venv, ".".join(version.split(".")[:2]) if version else None)
    if version is None:
        version = stack.lib_series()
        source = "lib directory" if version else None
    facts["python"].update(version=version, executable=python, source=source)
    if not stack.sites:
        reason = "no site-packages in %s (looked for lib/python3*/site-packages, lib64)" % venv
        facts["torch"].update(error=reason, source="files")
        facts["deepspeed"].update(error=reason, source="files")
        facts["apex"].update(error=reason, source="files")
        return facts
    facts["torch"] = read_torch_files(stack)
    facts["deepspeed"] = read_deepspeed_files(stack)
    facts["apex"] = read_apex_files(stack)
    add_installed_files(stack, facts)
    return facts


# The distributions whose installed files are checked against pip's RECORD: the training stack.
CHECKED_DISTRIBUTIONS = ("torch", "deepspeed", "apex")


def add_installed_files(venv: "_Venv", facts: Dict[str, Any]) -> None:
    """``files`` of the torch, deepspeed and apex sections: their installed files against pip's
    RECORD (sizes; see _integrity). A few stat() calls per file, no process."""
    for name in CHECKED_DISTRIBUTIONS:
        _version, meta_dir, _versions = venv.dist(name)
        section = facts[name]
        if meta_dir is None:
            section["files"] = _integrity.empty()
        else:
            section["files"] = _integrity.check_record(venv.host.read_bytes, venv.host.path, meta_dir)


def read_git_commit(host: Host, path: str) -> Optional[str]:
    """HEAD commit from the files alone: .git file or dir, HEAD, loose ref, packed-refs, commondir."""
    gitdir = git_dir(host, path)
    if gitdir is None:
        return None
    dirs = [gitdir]
    common = (host.read_text(gitdir + "/commondir") or "").strip()
    if common:
        dirs.append(os.path.normpath(common if common.startswith("/") else gitdir + "/" + common))
    kind, value = parse_git_head(host.read_text(gitdir + "/HEAD"))
    if kind == "sha":
        return value
    if kind != "ref" or not value:
        return None
    for directory in dirs:
        kind2, sha = parse_git_head(host.read_text(directory + "/" + value))
        if kind2 == "sha":
            return sha
    for directory in dirs:
        refs = parse_packed_refs(host.read_text(directory + "/packed-refs"))
        if value in refs:
            return refs[value]
    return None


def git_dir(host: Host, path: str) -> Optional[str]:
    """The git directory of the checkout at ``path``: ``.git``, or where a ``.git`` file points
    (a worktree, a submodule); None when it is not a git checkout."""
    gitdir = path.rstrip("/") + "/.git"
    if host.isfile(gitdir):
        pointer = (host.read_text(gitdir) or "").strip()
        if not pointer.startswith("gitdir:"):
            return None
        target = pointer[len("gitdir:"):].strip()
        gitdir = os.path.normpath(target if target.startswith("/") else path.rstrip("/") + "/" + target)
    return gitdir if host.isdir(gitdir) else None


def collect_megatron(host: Host, path: Optional[str]) -> Dict[str, Any]:
    facts: Dict[str, Any] = {"path": path, "commit": None, "present": False, "files": _integrity.empty()}
    if not path or not host.isdir(path):
        return facts
    facts["present"] = host.isfile(path.rstrip("/") + "/pretrain_gpt.py") or host.isdir(path.rstrip("/") + "/megatron")
    # The files first: HEAD and its ref are two small reads, where git is a process per node.
    facts["commit"] = read_git_commit(host, path)
    git = host.which("git") if facts["commit"] is None else None
    if git:
        # What the files cannot tell (a reftable repository, say). safe.directory: the checkout
        # may belong to the training user while facts run as root.
        rc, out, _err = host.run([git, "-c", "safe.directory=*", "-C", host.path(path), "rev-parse", "HEAD"])
        if rc == 0 and re.match(r"^[0-9a-f]{40}([0-9a-f]{24})?$", out.strip()):
            facts["commit"] = out.strip()
    gitdir = git_dir(host, path)
    if gitdir:
        # A linked worktree keeps its config (the object format) in the common directory.
        common = (host.read_text(gitdir + "/commondir") or "").strip()
        if common and not common.startswith("/"):
            common = os.path.normpath(gitdir + "/" + common)
        config = host.read_text(gitdir + "/config") or (host.read_text(common + "/config") if common else None)
        facts["files"] = _integrity.check_git_index(host.read_bytes, host.path, path, gitdir, config)
    return facts


def _port_key(name: str) -> Tuple[int, str]:
    return (int(name), "") if name.isdigit() else (1 << 30, name)


def collect_infiniband(host: Host) -> Dict[str, Any]:
    base = "/sys/class/infiniband"
    hcas = []
    for hca in host.listdir(base):
        ports = []
        for port in sorted(host.listdir("%s/%s/ports" % (base, hca)), key=_port_key):
            if not port.isdigit():
                continue
            prefix = "%s/%s/ports/%s/" % (base, hca, port)
            rate = (host.read_text(prefix + "rate") or "").strip() or None
            link_layer = (host.read_text(prefix + "link_layer") or "").strip() or None
            ports.append({
                "port": int(port),
                "state": parse_sysfs_state(host.read_text(prefix + "state")),
                "phys_state": parse_sysfs_state(host.read_text(prefix + "phys_state")),
                "rate": rate,
                "link_layer": link_layer,
            })
        hcas.append({"name": hca, "ports": ports})
    modules = parse_proc_modules(host.read_text("/proc/modules"))
    # nv_peer_mem is the older Mellanox module that gives the same GPUDirect RDMA path.
    return {"hcas": hcas, "peermem_loaded": "nvidia_peermem" in modules or "nv_peer_mem" in modules}


def memlock_limit() -> str:
    soft, _hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    return "unlimited" if soft == resource.RLIM_INFINITY else str(soft // 1024)


def parse_ulimit_l(text: Optional[str]) -> Optional[str]:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    if lines and re.match(r"^(unlimited|\d+)$", lines[-1]):
        return lines[-1]
    return None


def ssh_memlock_argv(host: Host, user: str, timeout: float, euid: int, current_user: Optional[str]
                     ) -> Tuple[Optional[List[str]], Optional[str]]:
    """The command that reads ``ulimit -l`` in a non-interactive ssh session of ``user`` on
    localhost, as ``user`` (su when the module runs as root). The known-hosts file is
    /dev/null so the check writes nothing."""
    ssh = host.which("ssh")
    if not ssh:
        return None, "ssh client not found"
    remote = [ssh, "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
              "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR",
              "-o", "ConnectTimeout=%d" % max(1, int(min(timeout, 30))),
              "%s@localhost" % user, "ulimit -l"]
    if current_user == user:
        return remote, None
    if euid != 0:
        return None, "checking as %s needs root on the node (become: true)" % user
    su = host.which("su")
    if not su:
        return None, "su not found"
    return [su, "-s", "/bin/sh", user, "-c", " ".join(shlex.quote(a) for a in remote)], None


def collect_memlock(host: Host, ssh_user: Optional[str], errors: List[str]) -> Dict[str, Any]:
    facts: Dict[str, Any] = {"current": memlock_limit(), "noninteractive_ssh": None,
                             "noninteractive_ssh_error": None}
    if not ssh_user:
        return facts
    try:
        import pwd
        current_user: Optional[str] = pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        current_user = None
    argv, problem = ssh_memlock_argv(host, ssh_user, host.timeout, os.geteuid(), current_user)
    if argv is None:
        facts["noninteractive_ssh_error"] = problem
    else:
        result = host.run(argv)
        value = parse_ulimit_l(result[1]) if result[0] == 0 else None
        if value is None:
            facts["noninteractive_ssh_error"] = "ssh %s@localhost 'ulimit -l': exit %s: %s" % (
                ssh_user, result[0], _first_line(result[2]) or _first_line(result[1]) or "no output")
        facts["noninteractive_ssh"] = value
    if facts["noninteractive_ssh_error"]:
        errors.append("memlock: " + facts["noninteractive_ssh_error"])
    return facts


def collect_disk(host: Host, paths: Sequence[str]) -> Dict[str, Dict[str, Any]]:
    """Free bytes for an unprivileged writer on the filesystem of each path; for a path that
    does not exist yet, on the filesystem of its nearest existing parent (where it will be made)."""
    facts = {}
    for path in paths:
        exists = host.exists(path)
        probe = path
        while not host.exists(probe) and probe not in ("/", ""):
            probe = os.path.dirname(probe.rstrip("/")) or "/"
        free = None
        try:
            stat = os.statvfs(host.path(probe))
            free = stat.f_bavail * stat.f_frsize
        except OSError:
            pass
        facts[path] = {"free_bytes": free, "exists": exists}
    return facts


def collect_clock(host: Host) -> Dict[str, Any]:
    chronyc = host.which("chronyc")
    if chronyc:
        rc, out, _err = host.run([chronyc, "-n", "tracking"])
        parsed = parse_chronyc_tracking(out) if rc == 0 else {"synchronized": None}
        if parsed["synchronized"] is not None:
            return dict(parsed, source="chronyc")
    timedatectl = host.which("timedatectl")
    if timedatectl:
        rc, out, _err = host.run([timedatectl, "show"])
        parsed = parse_timedatectl_show(out) if rc == 0 else {"synchronized": None}
        if parsed["synchronized"] is not None:
            return dict(parsed, source="timedatectl")
    return {"synchronized": None, "offset_ms": None, "source": None}


def _guard(errors: List[str], name: str, default: Any, func: Callable[..., Any], *args: Any) -> Any:
    """Run one collector; a bug or surprise in it costs that section, never the whole call."""
    try:
        return func(*args)
    except Exception as exc:  # the contract: missing things are null, never an exception
        errors.append("%s: %s: %s" % (name, type(exc).__name__, exc))
        return default


_EMPTY: Dict[str, Any] = {
    "driver": {"version": None, "kernel_module": None, "source": None},
    "cuda": {"version": None, "source": None, "home": None, "nvcc_version": None, "installed": []},
    "os": {"id": None, "version_id": None},
    "nvswitch": {"present": False, "count": 0},
    "fabric_manager": {"installed": False, "version": None, "active": None},
    "cudnn": {"version": None, "source": None},
    "nccl": {"version": None, "source": None, "library": None},
    "infiniband": {"hcas": [], "peermem_loaded": False},
    "memlock": {"current": None, "noninteractive_ssh": None, "noninteractive_ssh_error": None},
    "clock": {"synchronized": None, "offset_ms": None, "source": None},
}


def _empty(section: str) -> Any:
    return json.loads(json.dumps(_EMPTY[section]))  # a fresh copy each time


def collect(host: Host, venv: Optional[str] = None, megatron_dir: Optional[str] = None,
            disk_paths: Sequence[str] = (), ssh_user: Optional[str] = None,
            python_probe: str = "files") -> Dict[str, Any]:
    """Every fact of the gpu_stack_facts contract for this node."""
    if python_probe not in PYTHON_PROBES:
        raise ValueError("python_probe is %r; expected one of %s" % (python_probe, ", ".join(PYTHON_PROBES)))
    errors: List[str] = []
    driver, gpus = _guard(errors, "gpus", (_empty("driver"), summarize_gpus([])), collect_nvidia, host, errors)
    cuda = _guard(errors, "cuda", _empty("cuda"), collect_cuda, host)
    stack = _guard(errors, "python", _empty_python_stack(None), collect_python_stack, host, venv, errors,
                   python_probe)
    megatron = _guard(errors, "megatron_deepspeed", {"path": megatron_dir, "commit": None, "present": False},
                      collect_megatron, host, megatron_dir)
    facts = {
        "hostname": _guard(errors, "hostname", None, socket.gethostname),
        "os": _guard(errors, "os", _empty("os"), collect_os, host),
        "python": stack["python"],
        "driver": driver,
        "gpus": gpus,
        "nvswitch": _guard(errors, "nvswitch", _empty("nvswitch"), collect_nvswitch, host),
        "fabric_manager": _guard(errors, "fabric_manager", _empty("fabric_manager"), collect_fabric_manager, host),
        "cuda": cuda,
        "cudnn": _guard(errors, "cudnn", _empty("cudnn"), collect_cudnn, host, cuda["home"]),
        "nccl": _guard(errors, "nccl", _empty("nccl"), collect_nccl, host, cuda["home"]),
        "torch": stack["torch"],
        "deepspeed": stack["deepspeed"],
        "venv": venv or None,
        "megatron_deepspeed": megatron,
        "apex": stack["apex"],
        "infiniband": _guard(errors, "infiniband", _empty("infiniband"), collect_infiniband, host),
        "memlock": _guard(errors, "memlock", _empty("memlock"), collect_memlock, host, ssh_user, errors),
        "disk": _guard(errors, "disk", {}, collect_disk, host, list(disk_paths or [])),
        "clock": _guard(errors, "clock", _empty("clock"), collect_clock, host),
    }
    facts["errors"] = errors
    return facts
