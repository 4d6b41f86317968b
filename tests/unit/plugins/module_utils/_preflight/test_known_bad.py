# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_preflight.known_bad: each documented broken combination as a table of nodes that have it, nodes
just past the fix, and nodes whose facts cannot tell; and the table itself (a source, a fix, a
status for every entry)."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import gate as pf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import known_bad as kb

from .preflight_facts import make_cluster, row_for, run


def test_every_entry_has_a_source_a_fix_and_a_status():
    assert len(kb.KNOWN_BAD) == len(kb.KNOWN_BAD_CHECKS) >= 2
    for entry in kb.KNOWN_BAD:
        assert entry.check.startswith("known_bad.") and entry.status in (pf.FAIL, pf.WARN)
        assert ":" in entry.source and entry.fix and entry.effect


def _apply(node: Dict[str, Any], changes: Dict[str, Any]) -> None:
    for path, value in changes.items():
        section, key = path.split(".", 1)
        if section == "packages":
            node["packages"]["installed"][key] = value
        else:
            node[section][key] = value


@pytest.mark.parametrize("profile, changes, status, found", [
    # the cu117 stack as pinned: DeepSpeed 0.9.2 with numpy<2
    ("cu117", {"packages.numpy": "1.26.4"}, pf.PASS, "not affected"),
    # numpy upgraded on one node: the launcher would stop with ImportError
    ("cu117", {"packages.numpy": "2.2.6"}, pf.FAIL, "DeepSpeed 0.9.2 with NumPy 2.2.6"),
    # the last release with `from numpy import BUFSIZE`, and the first without
    ("cu130", {"deepspeed.version": "0.14.3", "packages.numpy": "2.0.0"}, pf.FAIL, "DeepSpeed 0.14.3 with NumPy 2.0.0"),
    ("cu130", {"deepspeed.version": "0.14.4", "packages.numpy": "2.0.0"}, pf.PASS, "not affected"),
    # no numpy in the facts (an older collection): cannot tell
    ("cu130", {"packages.numpy": None}, pf.SKIP, ""),
])
def test_deepspeed_with_numpy_2(profile, changes, status, found):
    cluster = make_cluster(profile)
    _apply(cluster["node2"], changes)
    if changes.get("packages.numpy", "") is None:
        del cluster["node2"]["packages"]["installed"]["numpy"]
    row = row_for(run(cluster, profile), "known_bad.deepspeed_numpy2", "node2")
    assert (row.status, row.found) == (status, found)
    if status == pf.FAIL:
        assert "node2" in row.fix and "from numpy import BUFSIZE" in row.fix and "numpy<2" in row.fix
        assert "scheduler.py:8" in row.fix


@pytest.mark.parametrize("changes, status, found", [
    # the healthy A100 node: nvidia_peermem registered nv_mem, NCCL finds it
    ({}, pf.PASS, "not affected"),
    # nvidia_peermem loaded but not registered under memory_peers, torch's NCCL 2.14.3 (issue NVIDIA/nccl#1676)
    ({"infiniband.memory_peers": []}, pf.WARN, "NCCL 2.14.3, nvidia_peermem loaded, no /sys/kernel/mm/memory_peers/nv_mem"),
    # the release that also checks /sys/module/nvidia_peermem
    ({"infiniband.memory_peers": [], "torch.nccl": "2.23.4"}, pf.PASS, "not affected"),
    ({"infiniband.memory_peers": [], "torch.nccl": "2.22.3"}, pf.WARN, "NCCL 2.22.3"),
    # the older module registers nv_mem itself
    ({"infiniband.memory_peers": ["nv_mem"], "infiniband.peermem_module": "nv_peer_mem"}, pf.PASS, "not affected"),
    # no peer-memory module at all (DMA-BUF, or no GPUDirect): not this entry's concern
    ({"infiniband.peermem_loaded": False, "infiniband.peermem_module": None}, pf.PASS, "not affected"),
    # no RDMA port: NCCL uses sockets
    ({"infiniband.hcas": []}, pf.SKIP, ""),
    # facts of an older collection (no module name): cannot tell
    ({"infiniband.peermem_module": None}, pf.SKIP, ""),
])
def test_nccl_with_nvidia_peermem(changes, status, found):
    cluster = make_cluster("cu117")
    _apply(cluster["node3"], changes)
    row = row_for(run(cluster, "cu117"), "known_bad.nccl_peermem", "node3")
    assert row.status == status and found in row.found
    if status == pf.WARN:
        assert "NCCL >= 2.23.4" in row.fix and "net_ib.cc:610-620" in row.fix and "NVIDIA/nccl#1676" in row.fix


def test_a_clean_cluster_passes_every_entry():
    for profile in ("cu117", "cu121", "cu130", "cpu"):
        rows = [row for row in run(make_cluster(profile), profile) if row.check.startswith("known_bad.")]
        assert rows and {row.status for row in rows} <= {pf.PASS, pf.SKIP}, (profile, rows)
