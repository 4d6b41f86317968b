# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tables for the partition fit check (plugins/module_utils/_slurm/fit.py)."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._slurm import fit

# `scontrol show partition -o train` of slurm-wlm 22.05.8 (the molecule slurm scenario's shape).
TRAIN = ("PartitionName=train AllowGroups=ALL AllowAccounts=ALL AllowQos=ALL AllocNodes=ALL Default=YES QoS=N/A "
         "DefaultTime=NONE DisableRootJobs=NO ExclusiveUser=NO GraceTime=0 Hidden=NO MaxNodes=UNLIMITED "
         "MaxTime=UNLIMITED MinNodes=0 LLN=NO MaxCPUsPerNode=UNLIMITED Nodes=node[1-3] PriorityJobFactor=1 "
         "PriorityTier=1 RootOnly=NO ReqResv=NO OverSubscribe=NO OverTimeLimit=NONE PreemptMode=OFF State=UP "
         "TotalCPUs=6 TotalNodes=3 SelectTypeParameters=NONE JobDefaults=(null) DefMemPerNode=UNLIMITED "
         "MaxMemPerNode=UNLIMITED\n")
GPU8 = TRAIN.replace("MaxNodes=UNLIMITED", "MaxNodes=8").replace("TotalNodes=3", "TotalNodes=8").replace(
    "Nodes=node[1-3]", "Nodes=gpu[01-08]")
DOWN = TRAIN.replace("State=UP", "State=DOWN")
SINFO_CPU = "node1|idle|(null)|2\nnode2|mixed|(null)|2\nnode3|idle|(null)|2\n"
SINFO_GPU = "\n".join("gpu%02d|idle|gpu:8(S:0-1)|256" % i for i in range(1, 9))


@pytest.mark.parametrize("text, expected", [
    (TRAIN, {"name": "train", "state": "UP", "total_nodes": 3, "max_nodes": None, "max_time": "UNLIMITED",
             "nodes": "node[1-3]"}),
    (GPU8, {"name": "train", "state": "UP", "total_nodes": 8, "max_nodes": 8, "max_time": "UNLIMITED",
            "nodes": "gpu[01-08]"}),
    ("", {}),
    ("slurm_load_partitions: Invalid partition name specified", {}),
])
def test_parse_partition(text, expected):
    assert fit.parse_partition(text) == expected


@pytest.mark.parametrize("gres, gpus", [
    ("gpu:8", 8), ("gpu:8(S:0-1)", 8), ("gpu:a100:8(S:0-1)", 8), ("gpu:a100:4(S:0),gpu:h100:4(S:1)", 8),
    ("(null)", 0), ("", 0), (None, 0), ("shard:16,gpu:2", 2), ("mps:100", 0),
])
def test_gres_gpus(gres, gpus):
    assert fit.gres_gpus(gres) == gpus


def test_parse_sinfo_nodes_keeps_one_entry_per_node():
    text = "node1|idle|(null)|2\nnode1|idle|(null)|2\nnode2|DRAINED|gpu:8|128\n\ngarbage\n"
    assert fit.parse_sinfo_nodes(text) == [
        {"name": "node1", "state": "idle", "gpus": 0, "cpus": 2},
        {"name": "node2", "state": "drained", "gpus": 8, "cpus": 128},
    ]


@pytest.mark.parametrize("state, ok", [
    ("idle", True), ("mixed", True), ("allocated", True), ("completing", True), ("planned", False),
    ("drained", False), ("draining", False), ("down", False), ("down*", False), ("idle*", False),
    ("unknown", False), ("fail", False), ("reboot^", False), ("idle~", True),
])
def test_usable(state, ok):
    assert fit.usable(state) is ok


def sinfo(text):
    return fit.parse_sinfo_nodes(text)


@pytest.mark.parametrize("partition, nodes, want, ranks, gpu, problems", [
    # The simulated cluster: 3 nodes x 2 CPU ranks fit, 4 nodes or 3 ranks per node do not.
    (TRAIN, SINFO_CPU, 3, 2, False, []),
    (TRAIN, SINFO_CPU, 4, 2, False, ["slurm partition train has 3 node(s), the job needs 4"]),
    (TRAIN, SINFO_CPU, 3, 3, False, ["slurm partition train: 0 node(s) can take 3 CPU rank(s) each, the job needs 3 "
                                     "(fewer than 3 CPUs: node1 (2 CPUs), node2 (2 CPUs), node3 (2 CPUs))"]),
    # A drained node: the job would pend; the drained node is named.
    (TRAIN, SINFO_CPU.replace("node3|idle", "node3|drained"), 3, 2, False,
     ["slurm partition train: 2 node(s) can take 2 CPU rank(s) each, the job needs 3 (not available: node3 (drained))"]),
    # The guide's cluster: 8 x 8 GPUs fit; 9 nodes exceed MaxNodes and the partition; 16 GPUs per node do not exist.
    (GPU8, SINFO_GPU, 8, 8, True, []),
    (GPU8, SINFO_GPU, 9, 8, True, ["MaxNodes=8, the job needs 9 nodes", "has 8 node(s), the job needs 9"]),
    (GPU8, SINFO_GPU, 2, 16, True, ["0 node(s) can take 16 GPU rank(s) each, the job needs 2 (fewer than 16 GPUs: "
                                    "gpu01 (8 GPUs)"]),
    # CPU nodes in a partition asked for GPU ranks.
    (TRAIN, SINFO_CPU, 1, 1, True, ["0 node(s) can take 1 GPU rank(s) each, the job needs 1"]),
    (DOWN, SINFO_CPU, 3, 2, False, ["slurm partition train: State=DOWN, expected UP"]),
    ("", "", 1, 1, True, ["slurm partition train: not found"]),
])
def test_layout_problems(partition, nodes, want, ranks, gpu, problems):
    found = fit.layout_problems("train", fit.parse_partition(partition), sinfo(nodes), want, ranks, gpu)
    assert len(found) == len(problems), found
    for message, expected in zip(found, problems):
        assert expected in message
