# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Does a job layout fit a Slurm partition? Answered before a submit, from Slurm's own output.

A job that asks for more nodes or GPUs per node than the partition can give does not fail: it
pends for ever (``Resources``, ``PartitionNodeLimit``, ``ReqNodeNotAvail``). This module turns
``scontrol show partition -o <name>`` and ``sinfo --Node`` into the reasons not to submit.
Input is the layout only (nodes, ranks per node, whether ranks are GPUs), so the launch backend
can call it with whatever its job model derives.

* ``parse_partition(text)``: ``scontrol show partition -o NAME`` -> dict.
* ``parse_sinfo_nodes(text)``: ``sinfo --noheader --Node --partition=P --format=%N|%T|%G|%c`` -> list.
* ``gres_gpus(gres)``: the GPU count in a Gres string (``gpu:8``, ``gpu:a100:8(S:0-1)``).
* ``layout_problems(...)``: every reason the layout cannot start, each naming what was found,
  what was expected and what to do.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

SINFO_FORMAT = "%N|%T|%G|%c"
# sinfo --Node %T states in which a node takes no new job. A trailing '*' (not responding) counts too.
UNUSABLE_STATES = ("down", "drained", "draining", "drain", "fail", "failing", "future", "unknown", "inval",
                   "maint", "reboot", "power_down", "powered_down", "powering_down", "powering_up", "planned")
_PAIR_RE = re.compile(r"(\w+)=(\S*)")
_GPU_RE = re.compile(r"(?:^|,)gpu(?::[^:,()]+)?:(\d+)")


def parse_partition(text: Optional[str]) -> Dict[str, Any]:
    """The keys of ``scontrol show partition -o`` that a layout depends on; {} when none printed."""
    pairs = dict(_PAIR_RE.findall(text or ""))
    if "PartitionName" not in pairs:
        return {}

    def number(key: str) -> Optional[int]:
        value = pairs.get(key, "")
        return int(value) if value.isdigit() else None  # UNLIMITED, or absent

    return {
        "name": pairs["PartitionName"],
        "state": pairs.get("State", ""),
        "total_nodes": number("TotalNodes"),
        "max_nodes": number("MaxNodes"),
        "max_time": pairs.get("MaxTime", ""),
        "nodes": pairs.get("Nodes", ""),
    }


def gres_gpus(gres: Optional[str]) -> int:
    """GPUs in a Gres string: ``gpu:8`` -> 8, ``gpu:a100:4(S:0),gpu:h100:4(S:1)`` -> 8, ``(null)`` -> 0."""
    return sum(int(count) for count in _GPU_RE.findall(gres or ""))


def parse_sinfo_nodes(text: Optional[str]) -> List[Dict[str, Any]]:
    """One entry per node: name, state (lower case, '*' kept), gpus, cpus."""
    nodes = []
    for line in (text or "").splitlines():
        fields = line.strip().split("|")
        if len(fields) != 4 or not fields[0]:
            continue
        name, state, gres, cpus = fields
        nodes.append({"name": name, "state": state.strip().lower(), "gpus": gres_gpus(gres),
                      "cpus": int(cpus) if cpus.strip().isdigit() else 0})
    # sinfo lists a node once per partition and state line; keep the first.
    seen, unique = set(), []
    for node in nodes:
        if node["name"] not in seen:
            seen.add(node["name"])
            unique.append(node)
    return unique


def usable(state: str) -> bool:
    base = state.rstrip("*~#!%$@^-")
    return not state.endswith("*") and not any(base.startswith(bad) for bad in UNUSABLE_STATES)


def layout_problems(partition_name: str, partition: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]],
                    nodes_wanted: int, ranks_per_node: int, gpu_ranks: bool = True) -> List[str]:
    """Why ``nodes_wanted`` x ``ranks_per_node`` cannot start in the partition; [] when it can.

    ``gpu_ranks``: one GPU per rank (Gres=gpu); False for CPU ranks (the simulated cluster),
    which need a CPU each.
    """
    if not partition:
        return ["slurm partition %s: not found (scontrol show partition printed nothing); expected an existing "
                "partition: set megatron_launch_slurm_partition to one that `sinfo -s` lists" % partition_name]
    problems = []
    if partition.get("state") and partition["state"] != "UP":
        problems.append("slurm partition %s: State=%s, expected UP: `scontrol update PartitionName=%s State=UP`, or "
                        "choose another partition" % (partition_name, partition["state"], partition_name))
    max_nodes = partition.get("max_nodes")
    if max_nodes is not None and nodes_wanted > max_nodes:
        problems.append("slurm partition %s: MaxNodes=%d, the job needs %d nodes: use a partition that allows it, or a "
                        "layout with fewer nodes" % (partition_name, max_nodes, nodes_wanted))
    total = partition.get("total_nodes")
    if total is not None and nodes_wanted > total:
        problems.append("slurm partition %s has %d node(s), the job needs %d: add nodes to the partition or plan for "
                        "%d" % (partition_name, total, nodes_wanted, total))
        return problems
    what, key = ("GPU", "gpus") if gpu_ranks else ("CPU", "cpus")
    fit = [n for n in nodes if usable(n["state"]) and n[key] >= ranks_per_node]
    if len(fit) < nodes_wanted:
        unusable = ["%s (%s)" % (n["name"], n["state"]) for n in nodes if not usable(n["state"])]
        small = ["%s (%d %s)" % (n["name"], n[key], what + "s") for n in nodes
                 if usable(n["state"]) and n[key] < ranks_per_node]
        detail = "; ".join(part for part in (
            ("not available: " + ", ".join(unusable)) if unusable else "",
            ("fewer than %d %ss: %s" % (ranks_per_node, what, ", ".join(small))) if small else "") if part)
        problems.append(
            "slurm partition %s: %d node(s) can take %d %s rank(s) each, the job needs %d%s: resume or repair the "
            "nodes (`sinfo -R` says why they are out), or plan for %d node(s)" % (
                partition_name, len(fit), ranks_per_node, what, nodes_wanted,
                " (%s)" % detail if detail else "", len(fit)))
    return problems
