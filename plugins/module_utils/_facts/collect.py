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

This file holds the system collectors and ``collect``; :class:`Host` and the command runner are in
host.py, the parsers of command outputs and files in parsers.py (nvidia-smi's XML and CSV through
smi.py, the collection's one nvidia-smi reader), the venv's python stack (files and import probe)
in python_stack.py.
"""
from __future__ import annotations

import json
import os
import re
import resource
import shlex
import socket
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from . import driver_stack as _driver_stack
from . import imports as _imports
from . import integrity as _integrity
from .host import Host, _cmd_error, _first_line
from .parsers import (
    SMI_QUERY_FIELDS,
    _version_key,
    library_version,
    parse_chronyc_tracking,
    parse_cuda_tool_version,
    parse_cuda_version_json,
    parse_cudnn_header,
    parse_dpkg_fabricmanager,
    parse_fabricmanager_version,
    is_nvidia_gpu,
    parse_git_head,
    parse_nccl_header,
    parse_nvidia_smi_csv,
    parse_nvidia_smi_xml,
    parse_os_release,
    parse_packed_refs,
    parse_proc_driver_version,
    parse_proc_modules,
    parse_sysfs_state,
    parse_timedatectl_show,
    parse_ulimit_l,
    summarize_gpus,
)
from .nccl_env import collect_nccl_env
from .python_stack import PYTHON_PROBES, _empty_python_stack, collect_python_stack, empty_packages


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
    pci_devices = collect_pci_gpus(host)
    # With no NVIDIA GPU on the bus nvidia-smi can only fail (exit 9, no driver loaded); its
    # failure would be reported as a problem of the facts on a node whose only fact is "no GPU".
    smi = host.which("nvidia-smi") if pci_devices != [] else None
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
    gpus = summarize_gpus(smi_data["gpus"] if smi_data else [], pci_devices)
    if driver["version"] is None and smi_data and smi_data.get("driver_version"):
        driver.update(version=smi_data["driver_version"], source="nvidia-smi")
    return driver, gpus


def collect_pci_gpus(host: Host) -> Optional[List[str]]:
    """PCI addresses of the NVIDIA GPUs on the bus, driver bound or not; None where the node
    shows no PCI bus in sysfs (nothing can be said). An empty list is what tells "no NVIDIA GPU
    on this node" from "a GPU without a working driver"."""
    if not host.isdir("/sys/bus/pci/devices"):
        return None
    found = []
    for address in sorted(host.listdir("/sys/bus/pci/devices")):
        base = "/sys/bus/pci/devices/" + address
        if is_nvidia_gpu(host.read_text(base + "/vendor"), host.read_text(base + "/class")):
            found.append(address)
    return found


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


# python_env's marker of a tree unpacked from an archive (roles/python_env/tasks/source_archive.yml).
ARCHIVE_MARKER = ".megatron-ds-archive.sha256"


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
    elif host.isfile(path.rstrip("/") + "/" + _integrity.MANIFEST_NAME) or host.isfile(path.rstrip("/") + "/" + ARCHIVE_MARKER):
        # Unpacked from an archive by python_env: no index, its manifest instead.
        facts["files"] = _integrity.check_manifest(host.read_bytes, host.path, path)
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
    # nv_peer_mem is the older Mellanox module that gives the same GPUDirect RDMA path. Which one
    # is loaded matters: NCCL before 2.23.4 finds GPUDirect RDMA only through the peer-memory
    # clients registered under /sys/kernel/mm/memory_peers (nv_mem, nv_mem_nc), which
    # nvidia_peermem does not always register (_preflight.known_bad).
    module = next((name for name in ("nvidia_peermem", "nv_peer_mem") if name in modules), None)
    return {"hcas": hcas, "peermem_loaded": module is not None, "peermem_module": module,
            "memory_peers": host.listdir("/sys/kernel/mm/memory_peers")}


def memlock_limit(which: int = 0) -> str:
    """The soft (``which`` 0) or hard (1) RLIMIT_MEMLOCK of this process, as ``ulimit -l`` prints it."""
    value = resource.getrlimit(resource.RLIMIT_MEMLOCK)[which]
    return "unlimited" if value == resource.RLIM_INFINITY else str(value // 1024)


# What says "this node is a container": the files Docker and Podman put there, then the
# variable systemd-nspawn, LXC and Podman set for PID 1, then a container runtime's cgroup.
_CONTAINER_FILES = ("/.dockerenv", "/run/.containerenv")
_CONTAINER_CGROUP = re.compile(r"(docker|containerd|kubepods|libpod|lxc)")


def container_evidence(host: Host) -> Optional[str]:
    """Why this node looks like a container (a file, PID 1's ``container=``, a cgroup), or None.
    A container's memlock ceiling is its runtime's, and no file inside can raise it."""
    for path in _CONTAINER_FILES:
        if host.exists(path):
            return path
    environ = host.read_bytes("/proc/1/environ", limit=64 * 1024) or b""
    for item in environ.split(b"\0"):
        if item.startswith(b"container="):
            return "PID 1 has %s" % item.decode("utf-8", "replace")
    cgroup = host.read_text("/proc/1/cgroup", limit=64 * 1024) or ""
    match = _CONTAINER_CGROUP.search(cgroup)
    return "PID 1's cgroup names %s" % match.group(1) if match else None


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
    facts: Dict[str, Any] = {"current": memlock_limit(), "hard": memlock_limit(1), "container": container_evidence(host),
                             "noninteractive_ssh": None, "noninteractive_ssh_error": None}
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


# The head node's ssh sweep (playbooks/preflight.yml): ssh from the head node to every node as the
# training user, the way pdsh starts the ranks, all in the background, then their exit codes in
# the order given. StrictHostKeyChecking=yes and BatchMode=yes: a node the launcher would prompt
# for (unknown host key, password) counts as unreachable, as it would for pdsh. Each ssh reads
# `ulimit -l` in that non-interactive session, the limit ranks started by pdsh get. It prints
# "<address> <exit code> <ulimit -l or ->" per node. It runs beside the rest of the facts call on
# the head node, so the sweep costs no task and no round trip of its own.
SSH_SWEEP_SCRIPT = """out=$(mktemp -d) || exit 1
i=0
for node in "$@"; do
  i=$((i + 1))
  ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o ConnectTimeout=10 "$node" 'ulimit -l' </dev/null >"$out/$i" 2>/dev/null &
  eval "pid_$i=$!"
done
i=0
for node in "$@"; do
  i=$((i + 1))
  eval "wait \\$pid_$i"
  rc=$?
  limit=$(tail -n 1 "$out/$i" | tr -d ' ')
  echo "$node $rc ${limit:--}"
done
rm -rf "$out"
"""
_SWEEP_LINE = re.compile(r"^(\S+) ([0-9]+) (\S+)$")


def ssh_sweep_argv(host: Host, user: str, targets: Sequence[str], euid: int, current_user: Optional[str]
                   ) -> Tuple[Optional[List[str]], Optional[str]]:
    """The command that runs the ssh sweep to ``targets`` as ``user`` (su when the module runs as
    root), or why it cannot run."""
    if not host.which("ssh"):
        return None, "ssh client not found"
    if current_user == user:
        return ["/bin/sh", "-c", SSH_SWEEP_SCRIPT, "preflight-ssh-sweep"] + list(targets), None
    if euid != 0:
        return None, "sweeping as %s needs root on the node (become: true)" % user
    su = host.which("su")
    if not su:
        return None, "su not found"
    return [su, "-s", "/bin/sh", user, "-c", SSH_SWEEP_SCRIPT, "preflight-ssh-sweep"] + list(targets), None


def parse_ssh_sweep(output: str, targets: Sequence[str]) -> List[Dict[str, Any]]:
    """The sweep's "<address> <rc> <ulimit -l or ->" lines, one dict per target in the order
    given; a target without its line (the sweep died) is left out, so it reads "not tried"."""
    lines = [m.groups() for m in (_SWEEP_LINE.match(line.strip()) for line in (output or "").splitlines()) if m]
    nodes = []
    for target, (address, rc, limit) in zip(targets, lines):
        if address != target:
            break  # out of step: trust nothing after it
        nodes.append({"address": address, "rc": int(rc), "memlock": limit})
    return nodes


class SshSweep:
    """The head node's ssh sweep, started at once in a thread and read at the end of the facts
    call: the ssh handshakes overlap the reading of the venv and the checkout."""

    def __init__(self, host: Host, user: Optional[str], targets: Sequence[str]) -> None:
        self.targets = list(targets)
        self._result: Optional[Tuple[int, str, str]] = None
        self._thread: Optional[threading.Thread] = None
        try:
            import pwd
            current_user: Optional[str] = pwd.getpwuid(os.geteuid()).pw_name
        except (ImportError, KeyError):
            current_user = None
        self.user = user or current_user or str(os.geteuid())
        self.argv, self.problem = ssh_sweep_argv(host, self.user, self.targets, os.geteuid(), current_user)
        if self.argv is not None:
            argv = self.argv
            self._thread = threading.Thread(target=self._run, args=(host, argv), name="ssh-sweep")
            self._thread.daemon = True
            self._thread.start()

    def _run(self, host: Host, argv: Sequence[str]) -> None:
        self._result = host.run(argv)

    def facts(self) -> Dict[str, Any]:
        """{user, nodes: [{address, rc, memlock}], error}; error names why nodes are missing."""
        facts: Dict[str, Any] = {"user": self.user, "nodes": [], "error": self.problem}
        if self._thread is None:
            return facts
        self._thread.join()
        rc, out, err = self._result or (1, "", "the sweep gave no result")
        facts["nodes"] = parse_ssh_sweep(out, self.targets)
        if rc != 0 or len(facts["nodes"]) < len(self.targets):
            facts["error"] = "ssh sweep as %s: exit %s, %d of %d nodes answered: %s" % (
                self.user, rc, len(facts["nodes"]), len(self.targets), _first_line(err) or _first_line(out) or "no output")
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
    "infiniband": {"hcas": [], "peermem_loaded": False, "peermem_module": None, "memory_peers": []},
    "memlock": {"current": None, "hard": None, "container": None, "noninteractive_ssh": None,
                "noninteractive_ssh_error": None},
    "clock": {"synchronized": None, "offset_ms": None, "source": None},
    "nccl_env": {"user": None, "values": {}, "sources": {}, "read": [], "error": "failed"},
}


def _empty(section: str) -> Any:
    return json.loads(json.dumps(_EMPTY[section]))  # a fresh copy each time


def collect_trainer_imports(host: Host, venv: Optional[str], megatron_dir: Optional[str], entry: str,
                            accelerator: str) -> Optional[Dict[str, Any]]:
    """The entry script's start-up imports (_imports) against the venv's site-packages and its
    interpreter's standard library; None without a checkout or a venv."""
    if not venv or not megatron_dir or not host.isfile(megatron_dir.rstrip("/") + "/" + entry):
        return None
    listdir = host.listdir  # node paths under the facts' root; [] for a missing directory
    libs = sorted(name for name in listdir(venv.rstrip("/") + "/lib") if re.match(r"^python\d+\.\d+$", name))
    site = [venv.rstrip("/") + "/lib/%s/site-packages" % name for name in libs]
    home = (_imports.pyvenv_home(host.read_text(venv.rstrip("/") + "/pyvenv.cfg")) or "").rstrip("/")
    # pyvenv.cfg's home is the base interpreter's bin directory: its library is ../lib/pythonX.Y.
    base_lib = os.path.dirname(home) + "/lib/" + libs[-1] if home and libs else None
    outside, walked, error = _imports.closure(megatron_dir.rstrip("/"), entry, host.read_text,
                                              host.isfile, accelerator)
    available = _imports.stdlib_names(base_lib, listdir) | _imports.site_names(site, listdir)
    return {"entry": entry, "accelerator": accelerator, "walked": walked, "outside": len(outside),
            "missing": _imports.missing(outside, available), "error": error}


def collect(host: Host, venv: Optional[str] = None, megatron_dir: Optional[str] = None,
            disk_paths: Sequence[str] = (), ssh_user: Optional[str] = None,
            python_probe: str = "files", ssh_sweep_user: Optional[str] = None,
            ssh_sweep_targets: Sequence[str] = (), megatron_entry: str = "pretrain_gpt.py",
            accelerator: str = "cuda", training_user: Optional[str] = None,
            nccl_env_file: Optional[str] = None, nccl_env_dir: Optional[str] = None) -> Dict[str, Any]:
    """Every fact of the gpu_stack_facts contract for this node (and ``ssh_sweep`` when targets
    are given: the head node of playbooks/preflight.yml). ``nccl_env``: the NCCL_* variables a rank
    of ``training_user`` gets from its shell files and the launcher's ``nccl_env_file`` and
    ``nccl_env_dir`` (see _nccl_env)."""
    if python_probe not in PYTHON_PROBES:
        raise ValueError("python_probe is %r; expected one of %s" % (python_probe, ", ".join(PYTHON_PROBES)))
    errors: List[str] = []
    # First, so that its ssh sessions run while the rest is read.
    sweep = SshSweep(host, ssh_sweep_user, ssh_sweep_targets) if ssh_sweep_targets else None
    driver, gpus = _guard(errors, "gpus", (_empty("driver"), summarize_gpus([])), collect_nvidia, host, errors)
    cuda = _guard(errors, "cuda", _empty("cuda"), collect_cuda, host)
    stack = _guard(errors, "python", _empty_python_stack(None), collect_python_stack, host, venv, errors,
                   python_probe)
    megatron = _guard(errors, "megatron_deepspeed", {"path": megatron_dir, "commit": None, "present": False},
                      collect_megatron, host, megatron_dir)
    megatron["imports"] = _guard(errors, "megatron_deepspeed.imports", None, collect_trainer_imports, host, venv,
                                 megatron_dir, megatron_entry, accelerator)
    facts = {
        "hostname": _guard(errors, "hostname", None, socket.gethostname),
        "os": _guard(errors, "os", _empty("os"), collect_os, host),
        "python": stack["python"],
        "driver": driver,
        # The running kernel is this process's only where the facts' root is the node's own.
        "driver_stack": _guard(errors, "driver_stack", None, _driver_stack.collect_driver_stack, host.path,
                               host.read_text, os.uname().release if host.path("/") == "/" else None),
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
        "packages": stack.get("packages") or empty_packages(),
        "infiniband": _guard(errors, "infiniband", _empty("infiniband"), collect_infiniband, host),
        "memlock": _guard(errors, "memlock", _empty("memlock"), collect_memlock, host, ssh_user, errors),
        "disk": _guard(errors, "disk", {}, collect_disk, host, list(disk_paths or [])),
        "clock": _guard(errors, "clock", _empty("clock"), collect_clock, host),
        "nccl_env": _guard(errors, "nccl_env", _empty("nccl_env"), collect_nccl_env, host, training_user,
                           nccl_env_file, nccl_env_dir),
    }
    if sweep is not None:
        facts["ssh_sweep"] = _guard(errors, "ssh_sweep", {"user": sweep.user, "nodes": [], "error": "failed"},
                                    sweep.facts)
        if facts["ssh_sweep"]["error"]:
            errors.append("ssh_sweep: " + facts["ssh_sweep"]["error"])
    facts["errors"] = errors
    return facts
