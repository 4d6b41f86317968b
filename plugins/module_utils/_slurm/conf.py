# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers of the slurm role: what slurm.conf and gres.conf say about each node.

* ``parse_slurmd_hardware(text)``: the node's hardware as ``slurmd -C`` prints it. slurmd
  compares the NodeName line against exactly this at registration and drains a node whose
  line claims more, so the line is built from it rather than from Ansible's processor facts.
* ``node_line(...)``: one ``NodeName=`` line of slurm.conf.
* ``gpu_device_files(paths)``: the ``/dev/nvidiaN`` GPU device files, in minor-number order.
* ``process_tracking(choice, virtualization_role, virtualization_type)``: ``cgroup`` or
  ``linuxproc``.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, Optional

HARDWARE_KEYS = ("CPUs", "Boards", "SocketsPerBoard", "CoresPerSocket", "ThreadsPerCore", "RealMemory")
_PAIR_RE = re.compile(r"(\w+)=(\S+)")
_GPU_DEVICE_RE = re.compile(r"^/dev/nvidia(\d+)$")
# systemd-detect-virt / Ansible's virtualization_type names of container runtimes: in them the
# cgroup tree belongs to the host's runtime, and slurmd cannot create its own hierarchy.
CONTAINER_TYPES = ("docker", "container", "containerd", "podman", "lxc", "lxc-libvirt", "openvz",
                   "systemd-nspawn", "rkt", "wsl", "proot", "pouch")
PROCESS_TRACKING = ("auto", "cgroup", "linuxproc")


def parse_slurmd_hardware(text: Optional[str], node: str = "?") -> Dict[str, int]:
    """``slurmd -C`` output -> {CPUs, Sockets, CoresPerSocket, ThreadsPerCore, RealMemory} (ints)."""
    pairs = dict(_PAIR_RE.findall(text or ""))
    missing = [key for key in HARDWARE_KEYS if key not in pairs]
    if missing:
        raise ValueError(
            "node %s: `slurmd -C` printed %r, which lacks %s; expected a line like 'NodeName=n CPUs=8 Boards=1 "
            "SocketsPerBoard=2 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=64000'. Run `slurmd -C` on the node "
            "to see why." % (node, (text or "").strip()[:200], ", ".join(missing)))
    try:
        values = dict((key, int(pairs[key])) for key in HARDWARE_KEYS)
    except ValueError as exc:
        raise ValueError("node %s: `slurmd -C` printed a non-integer value (%s) in %r" % (node, exc, text)) from exc
    return {
        "CPUs": values["CPUs"],
        # slurm.conf's Sockets counts every socket of the node; slurmd -C splits it over boards.
        "Sockets": values["Boards"] * values["SocketsPerBoard"],
        "CoresPerSocket": values["CoresPerSocket"],
        "ThreadsPerCore": values["ThreadsPerCore"],
        "RealMemory": values["RealMemory"],
    }


def node_line(name: str, address: str, hardware: Mapping[str, Any], gpus: int = 0, memory_reserve_mb: int = 0,
              features: Iterable[str] = (), weight: Optional[int] = None) -> str:
    """One slurm.conf NodeName line. ``memory_reserve_mb`` is kept from jobs for the OS and daemons."""
    if not name or not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]*$", name):
        raise ValueError("node name %r is not a valid Slurm NodeName (letters, digits, '.', '_', '-')" % name)
    if int(gpus) < 0:
        raise ValueError("node %s: GPU count %r is negative" % (name, gpus))
    memory = int(hardware["RealMemory"]) - int(memory_reserve_mb)
    if memory < 1:
        raise ValueError(
            "node %s: RealMemory %s MB minus slurm_memory_reserve_mb %s leaves %d MB for jobs; expected at least 1. "
            "Lower slurm_memory_reserve_mb." % (name, hardware["RealMemory"], memory_reserve_mb, memory))
    parts = ["NodeName=%s" % name]
    if address:
        parts.append("NodeAddr=%s" % address)
    parts.extend("%s=%d" % (key, int(hardware[key])) for key in ("CPUs", "Sockets", "CoresPerSocket", "ThreadsPerCore"))
    parts.append("RealMemory=%d" % memory)
    if int(gpus) > 0:
        parts.append("Gres=gpu:%d" % int(gpus))
    feature_list = [str(f) for f in features if str(f)]
    if feature_list:
        parts.append("Features=%s" % ",".join(feature_list))
    if weight is not None:
        parts.append("Weight=%d" % int(weight))
    parts.append("State=UNKNOWN")
    return " ".join(parts)


def gpu_device_files(paths: Iterable[Any]) -> List[str]:
    """``/dev/nvidiaN`` files (GPUs) from a list of paths or find results, sorted by minor number.

    ``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-caps`` and NVSwitch files are not GPUs.
    """
    found = []
    for entry in paths or []:
        path = entry.get("path") if isinstance(entry, Mapping) else entry
        match = _GPU_DEVICE_RE.match(str(path or ""))
        if match:
            found.append((int(match.group(1)), str(path)))
    return [path for _minor, path in sorted(set(found))]


def process_tracking(choice: str, virtualization_role: Optional[str], virtualization_type: Optional[str]) -> str:
    """``cgroup`` on a real host or VM, ``linuxproc`` in a container; ``choice`` other than auto wins."""
    if choice not in PROCESS_TRACKING:
        raise ValueError("slurm_process_tracking is %r; expected one of %s" % (choice, ", ".join(PROCESS_TRACKING)))
    if choice != "auto":
        return choice
    in_container = (virtualization_role or "") == "guest" and (virtualization_type or "") in CONTAINER_TYPES
    return "linuxproc" if in_container else "cgroup"
