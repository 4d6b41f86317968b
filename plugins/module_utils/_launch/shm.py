# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The /dev/shm buffers that DeepSpeed's CPU all-reduce leaves behind when a rank dies.

No Ansible imports; Python 3.8 compatible (parts run on the nodes through job_probe).
"""
from __future__ import annotations

import os
from typing import Iterable, List


# DeepSpeed's CPU all-reduce (csrc/cpu/comm/shm.cpp, shm_initialize) gives each rank a shared
# memory buffer named deepspeed_allreduce_buffer_<uid>_<MASTER_ADDR>_<MASTER_PORT>_<rank> of about
# 66 MB and never unlinks it (shared_close is not called). Every CPU job leaves them in /dev/shm,
# which is RAM: 211 of them held 14 GB of a 24 GB machine and starved it (docs/operations.md §7).
SHM_BUFFER_PREFIX = "deepspeed_allreduce_buffer_"


def stale_shm_buffers(names: Iterable[str], uid: int, mapped: Iterable[str],
                      shm_dir: str = "/dev/shm") -> List[str]:
    """The DeepSpeed buffers of ``uid`` among ``names`` (entries of ``shm_dir``) that no process
    maps (``mapped``: the paths of /proc/*/maps); those of a running job are kept, since a rank
    that starts late opens its peers' buffers by name."""
    prefix = "%s%d_" % (SHM_BUFFER_PREFIX, int(uid))
    in_use = set(mapped)
    return sorted(os.path.join(shm_dir, name) for name in names
                  if name.startswith(prefix) and os.path.join(shm_dir, name) not in in_use)


def mapped_paths(proc: str = "/proc", under: str = "/dev/shm/") -> List[str]:
    """Paths under ``under`` that some process maps, read from /proc/<pid>/maps (the processes one
    may read: enough for one's own buffers)."""
    found = set()
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            with open(os.path.join(proc, entry, "maps"), "r", encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    path = line.rstrip("\n").split(None, 5)[5:]
                    if path and path[0].startswith(under):
                        found.add(path[0].replace(" (deleted)", ""))
        except OSError:
            continue
    return sorted(found)


def sweep_shm_buffers(uid: int, shm_dir: str = "/dev/shm", proc: str = "/proc", remove: bool = True) -> List[str]:
    """Remove ``uid``'s DeepSpeed CPU all-reduce buffers that no process maps; the removed paths
    (with ``remove`` false, the paths that would be: check mode)."""
    try:
        names = os.listdir(shm_dir)
    except OSError:
        return []
    stale = stale_shm_buffers(names, uid, mapped_paths(proc, shm_dir.rstrip("/") + "/"), shm_dir)
    if not remove:
        return stale
    removed = []
    for path in stale:
        try:
            os.unlink(path)
            removed.append(path)
        except OSError:
            continue
    return removed


def shm_sweep_command(shm_dir: str = "/dev/shm") -> str:
    """sweep_shm_buffers as one POSIX shell command, for the supervisor, which reaches the nodes
    over ssh as the training user (its own uid, ``id -u``) and has no module there."""
    return ('for f in %s/%s"$(id -u)"_*; do [ -f "$f" ] || continue; '
            'grep -qsF "$f" /proc/[0-9]*/maps || rm -f "$f"; done; true') % (shm_dir.rstrip("/"), SHM_BUFFER_PREFIX)
