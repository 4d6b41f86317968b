# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rank processes of a job and the ports they listen on, read from /proc (the job_probe
module runs these on the nodes).

No Ansible imports; Python 3.8 compatible (parts run on the nodes through job_probe).
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, Optional, Sequence


def rank_pattern(script: str) -> str:
    """The extended regex matching the rank processes of ``script`` in ``pgrep -f`` / ``pkill -f``.

    DeepSpeed's launch.py starts each rank as ``<python> -u <script> --local_rank=N ...``. The
    runner (``deepspeed ... script``), pdsh, its ssh and ``python -u -m deepspeed.launcher.launch
    ... script`` also carry the script in their command lines, but never right after ``-u``.
    Only the script's file name is required (train.sh passes ``pretrain_gpt.py`` relative to the
    checkout), with any directory before it.
    """
    name = os.path.basename(str(script).rstrip("/"))
    if not name:
        raise ValueError("rank_pattern: empty script name")
    return r"python[0-9.]* -u ([^ ]*/)?%s( |$)" % re.escape(name)


def _cmdline(raw: bytes) -> str:
    return raw.replace(b"\x00", b" ").decode("utf-8", "replace").strip()


def _local_rank(cmdline: str) -> Optional[int]:
    match = re.search(r"--local[_-]rank[= ](\d+)", cmdline)
    return int(match.group(1)) if match else None


def scan_processes(pattern: str, proc: str = "/proc", exclude: Sequence[int] = ()) -> List[Dict[str, Any]]:
    """Processes whose command line matches ``pattern`` (re.search), like ``pgrep -af``."""
    regex = re.compile(pattern)
    found = []
    try:
        entries = os.listdir(proc)
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            with open(os.path.join(proc, entry, "cmdline"), "rb") as handle:
                cmdline = _cmdline(handle.read())
            uid = os.stat(os.path.join(proc, entry)).st_uid
        except OSError:
            continue
        if cmdline and regex.search(cmdline):
            found.append({"pid": int(entry), "uid": uid, "cmdline": cmdline[:500],
                          "local_rank": _local_rank(cmdline)})
    return sorted(found, key=lambda item: item["pid"])


def _listening_inodes(proc: str, ports: Iterable[int]) -> Dict[str, int]:
    """socket inode -> port, for TCP sockets in LISTEN (state 0A) on one of ``ports``."""
    wanted = set(int(p) for p in ports)
    inodes: Dict[str, int] = {}
    for table in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", table), "r", encoding="ascii", errors="replace") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 10 or fields[3] != "0A":
                continue
            try:
                port = int(fields[1].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if port in wanted:
                inodes[fields[9]] = port
    return inodes


def scan_listeners(ports: Iterable[int], proc: str = "/proc") -> Dict[int, List[Dict[str, Any]]]:
    """For each port, the processes listening on it (TCP), with pid and command line.

    A listener whose process cannot be found (another network namespace, or no permission to
    read /proc/<pid>/fd) is reported with pid None.
    """
    ports = [int(p) for p in ports]
    result: Dict[int, List[Dict[str, Any]]] = {port: [] for port in ports}
    inodes = _listening_inodes(proc, ports)
    if not inodes:
        return result
    owners: Dict[str, Dict[str, Any]] = {}
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        entries = []
    for entry in entries:
        fd_dir = os.path.join(proc, entry, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            match = re.match(r"socket:\[(\d+)\]$", target)
            if match and match.group(1) in inodes and match.group(1) not in owners:
                try:
                    with open(os.path.join(proc, entry, "cmdline"), "rb") as handle:
                        cmdline = _cmdline(handle.read())
                except OSError:
                    cmdline = ""
                owners[match.group(1)] = {"pid": int(entry), "cmdline": cmdline[:300]}
    for inode, port in inodes.items():
        entry = owners.get(inode, {"pid": None, "cmdline": ""})
        if entry not in result[port]:
            result[port].append(entry)
    return result
