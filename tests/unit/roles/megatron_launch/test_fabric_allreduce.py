# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/megatron_launch/files/fabric_allreduce.py: its sizes, and three real gloo ranks on this machine."""
from __future__ import annotations

import importlib.util
import json
import pathlib
import socket
import subprocess
import sys

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[4] / "roles" / "megatron_launch" / "files" / "fabric_allreduce.py"
SPEC = importlib.util.spec_from_file_location("fabric_allreduce", str(SCRIPT))
probe = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(probe)  # type: ignore[union-attr]


@pytest.mark.parametrize("text, backend, expected", [
    ("auto", "gloo", [64]),
    ("auto", "nccl", [256, 1024]),
    ("", "gloo", [64]),
    ("64, 256", "nccl", [64, 256]),
])
def test_sizes(text, backend, expected):
    assert probe.sizes(text, backend) == expected


@pytest.mark.parametrize("text", ["0", "64,-1"])
def test_sizes_refuse_what_measures_nothing(text):
    with pytest.raises(ValueError, match="expected positive sizes in MiB"):
        probe.sizes(text, "gloo")


def test_three_ranks_sum_and_rank0_reports():
    pytest.importorskip("torch")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    ranks = [subprocess.Popen([sys.executable, str(SCRIPT), "--rank", str(rank), "--world", "3", "--master", "127.0.0.1",
                               "--port", str(port), "--mib", "64", "--backend", "gloo", "--timeout", "60"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for rank in range(3)]
    outputs = [rank.communicate(timeout=180) for rank in ranks]
    assert [rank.returncode for rank in ranks] == [0, 0, 0], outputs
    lines = [line for line in outputs[0][0].splitlines() if line.startswith(probe.MARK + " ")]
    assert not any(probe.MARK in out for out, _err in outputs[1:])  # rank 0 alone reports
    document = json.loads(lines[-1][len(probe.MARK) + 1:])
    assert (document["tool"], document["ranks"], document["algorithm"]) == ("gloo", 3, None)
    [row] = document["results"]
    assert (row["size"], row["wrong"]) == (64 << 20, 0)
    assert row["busbw"] == pytest.approx(row["algbw"] * 4 / 3, rel=1e-3)
