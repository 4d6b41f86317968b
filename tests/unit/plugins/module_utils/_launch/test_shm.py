# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_launch.shm: DeepSpeed's CPU all-reduce buffers in /dev/shm, which are stale and how they are swept."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import List

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import shm as la_shm


BUF = la_shm.SHM_BUFFER_PREFIX


@pytest.mark.parametrize("names, uid, mapped, expected", [
    ([], 1000, [], []),
    ([BUF + "1000_node1_29500_0", BUF + "1000_node1_29500_1"], 1000, [],
     ["/dev/shm/" + BUF + "1000_node1_29500_0", "/dev/shm/" + BUF + "1000_node1_29500_1"]),
    # A running job's buffer is kept: a late rank opens its peers' buffers by name.
    ([BUF + "1000_node1_29500_0", BUF + "1000_node1_29501_0"], 1000, ["/dev/shm/" + BUF + "1000_node1_29500_0"],
     ["/dev/shm/" + BUF + "1000_node1_29501_0"]),
    # Another user's buffers, uid 10000 (prefix of 1000 as text) and other files are left.
    ([BUF + "0_a_1_0", BUF + "10000_a_1_0", "sem.mp-1", "torch_123"], 1000, [], []),
    ([BUF + "0_a_1_0"], 0, [], ["/dev/shm/" + BUF + "0_a_1_0"]),
])
def test_stale_shm_buffers(names, uid, mapped, expected):
    assert la_shm.stale_shm_buffers(names, uid, mapped) == expected


def _fake_maps(proc: Path, pid: int, paths: List[str]) -> None:
    (proc / str(pid)).mkdir(parents=True)
    lines = ["7f00-7f01 rw-s 00000000 00:1a %d %s" % (i, path) for i, path in enumerate(paths)]
    lines.append("7f02-7f03 r-xp 00000000 08:01 1 /usr/lib/libc.so.6")
    lines.append("7ffd-7ffe rw-p 00000000 00:00 0")
    (proc / str(pid) / "maps").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("per_pid, expected", [
    ({}, []),
    ({10: ["/dev/shm/a"], 11: ["/dev/shm/a", "/dev/shm/b c"]}, ["/dev/shm/a", "/dev/shm/b c"]),
    ({12: ["/dev/shm/gone (deleted)", "/tmp/x"]}, ["/dev/shm/gone"]),
])
def test_mapped_paths(tmp_path, per_pid, expected):
    for pid, paths in per_pid.items():
        _fake_maps(tmp_path, pid, paths)
    (tmp_path / "self").mkdir()  # not a pid: skipped
    assert la_shm.mapped_paths(str(tmp_path)) == expected


def test_sweep_shm_buffers_keeps_a_mapped_buffer(tmp_path):
    """Against this process's real /proc: the buffer it maps stays, the stale one goes."""
    import mmap
    shm = tmp_path / "shm"
    shm.mkdir()
    uid = os.getuid()
    live, stale, other = (shm / (BUF + "%d_h_1_0" % uid), shm / (BUF + "%d_h_1_1" % uid), shm / "other")
    for path in (live, stale, other):
        path.write_bytes(b"\0" * 4096)
    with open(live, "r+b") as handle, mmap.mmap(handle.fileno(), 4096) as mapping:
        assert la_shm.sweep_shm_buffers(uid, str(shm)) == [str(stale)]
        assert mapping[0] == 0
    assert sorted(os.listdir(shm)) == sorted([live.name, other.name])
    assert la_shm.sweep_shm_buffers(uid, str(shm)) == [str(live)]
    assert la_shm.sweep_shm_buffers(uid, str(tmp_path / "absent")) == []


def test_shm_sweep_command_matches_sweep_shm_buffers(tmp_path):
    """The supervisor's shell form removes what sweep_shm_buffers would, and keeps a mapped buffer."""
    import mmap
    uid = os.getuid()
    names = [BUF + "%d_h_1_0" % uid, BUF + "%d_h_1_1" % uid, BUF + "%d_h_1_0" % (uid + 1), "other"]
    for name in names:
        (tmp_path / name).write_bytes(b"\0" * 4096)
    with open(tmp_path / names[0], "r+b") as handle, mmap.mmap(handle.fileno(), 4096):
        expected = la_shm.stale_shm_buffers(os.listdir(tmp_path), uid, la_shm.mapped_paths(under=str(tmp_path) + "/"),
                                            str(tmp_path))
        proc = subprocess.run(["sh", "-c", la_shm.shm_sweep_command(str(tmp_path) + "/")], check=False)
        assert proc.returncode == 0
        assert expected == [str(tmp_path / names[1])]
        assert sorted(os.listdir(tmp_path)) == sorted([names[0], names[2], "other"])
