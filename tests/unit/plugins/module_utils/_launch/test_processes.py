# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_launch.processes: the rank pattern and the /proc readers (against fake /proc trees)."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Dict, List

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import processes as la_processes


RANK = "/opt/megatron/venv/bin/python3 -u pretrain_gpt.py --local_rank=1 --tensor-model-parallel-size 1"


# --------------------------------------------------------------------------- rank pattern
@pytest.mark.parametrize("script, cmdline, matches", [
    ("pretrain_gpt.py", RANK, True),
    ("pretrain_gpt.py", "/opt/megatron/venv/bin/python3.11 -u /opt/Megatron-DeepSpeed/pretrain_gpt.py --local_rank=0", True),
    ("/x/burnin_gpt.py", "/opt/venv/bin/python -u /opt/jobs/a/burnin/burnin_gpt.py --local_rank=3 --ds-config c", True),
    # the DeepSpeed runner, pdsh, launch.py and a wrapper never carry `-u <script>`
    ("pretrain_gpt.py", "/opt/megatron/venv/bin/python3 /opt/megatron/venv/bin/deepspeed --hostfile h pretrain_gpt.py --x", False),
    ("pretrain_gpt.py", "pdsh -S -f 1024 -w n1,n2 export A=1; cd /d; /v/bin/python3 -u -m deepspeed.launcher.launch "
                        "--world_info=e30= --node_rank=%n --master_port=29500 pretrain_gpt.py --x", False),
    ("pretrain_gpt.py", "/v/bin/python3 -u -m deepspeed.launcher.launch --world_info=e30= pretrain_gpt.py --x", False),
    ("pretrain_gpt.py", "/bin/bash -c \"$1\" >>\"$2\" 2>&1 megatron-launch /opt/jobs/gpt/train.sh", False),
    ("pretrain_gpt.py", "python3 -u pretrain_gpt_v2.py --local_rank=0", False),
    ("burnin_gpt.py", RANK, False),
])
def test_rank_pattern_matches_ranks_only(script, cmdline, matches):
    assert bool(re.search(la_processes.rank_pattern(script), cmdline)) is matches


def test_rank_pattern_is_a_posix_ere_that_pgrep_accepts(tmp_path):
    """pkill/pgrep use POSIX extended regexes: the pattern must work there too."""
    pattern = la_processes.rank_pattern("pretrain_gpt.py")
    if not os.path.exists("/usr/bin/pgrep"):
        pytest.skip("pgrep not installed here")
    # pgrep returns 1 (no match) for a valid pattern, 2 for an invalid one
    result = subprocess.run(["pgrep", "-f", pattern], capture_output=True, check=False)
    assert result.returncode in (0, 1), result.stderr


def test_rank_pattern_refuses_an_empty_name():
    with pytest.raises(ValueError):
        la_processes.rank_pattern("/")


# --------------------------------------------------------------------------- /proc readers
def _fake_proc(tmp_path: Path, processes: Dict[int, List[str]], sockets: Dict[int, str], listen: List[tuple]) -> Path:
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    rows = []
    for index, (port, state, inode) in enumerate(listen):
        rows.append("   %d: 00000000:%04X 00000000:0000 %s 00000000:00000000 00:00000000 00000000  1000        0 %s 1\n"
                    % (index, port, state, inode))
    (proc / "net" / "tcp").write_text(header + "".join(rows))
    (proc / "net" / "tcp6").write_text(header)
    for pid, argv in processes.items():
        (proc / str(pid) / "fd").mkdir(parents=True)
        (proc / str(pid) / "cmdline").write_bytes(b"\x00".join(a.encode() for a in argv) + b"\x00")
    for pid, inode in sockets.items():
        os.symlink("socket:[%s]" % inode, str(proc / str(pid) / "fd" / "3"))
    return proc


def test_scan_listeners_finds_the_process_on_the_port(tmp_path):
    proc = _fake_proc(tmp_path, {4242: ["python3", "-m", "http.server", "29500"], 7: ["sshd"]},
                      {4242: "555", 7: "556"}, [(29500, "0A", "555"), (22, "0A", "556"), (29501, "01", "557")])
    found = la_processes.scan_listeners([29500, 29501, 8080], proc=str(proc))
    assert found[29500] == [{"pid": 4242, "cmdline": "python3 -m http.server 29500"}]
    assert found[29501] == [] and found[8080] == []  # 29501 is ESTABLISHED, not LISTEN


def test_scan_listeners_reports_an_invisible_owner(tmp_path):
    proc = _fake_proc(tmp_path, {}, {}, [(29500, "0A", "999")])
    assert la_processes.scan_listeners([29500], proc=str(proc))[29500] == [{"pid": None, "cmdline": ""}]


def test_scan_processes_finds_ranks_with_their_local_rank(tmp_path):
    proc = _fake_proc(tmp_path, {
        10: ["/v/bin/python3", "-u", "pretrain_gpt.py", "--local_rank=0", "--x"],
        11: ["/v/bin/python3", "-u", "pretrain_gpt.py", "--local_rank=1", "--x"],
        12: ["/v/bin/python3", "-u", "-m", "deepspeed.launcher.launch", "pretrain_gpt.py"],
    }, {}, [])
    found = la_processes.scan_processes(la_processes.rank_pattern("pretrain_gpt.py"), proc=str(proc), exclude=[11])
    assert [(p["pid"], p["local_rank"]) for p in found] == [(10, 0)]
