# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every reason not to start a job, each naming the node: data files, required files, the
ssh sweep, checkpoints a node lacks.

No Ansible imports; Python 3.8 compatible (parts run on the nodes through job_probe).
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from .data_index import index_problems
from .status import _one_line, _script_of


def data_files(data_path: Any) -> List[str]:
    """The .bin/.idx files every rank opens for Megatron's --data-path (one prefix, or
    ``weight prefix weight prefix ...``)."""
    items = data_path if isinstance(data_path, (list, tuple)) else str(data_path or "").split()
    prefixes = []
    for item in items:
        text = str(item).strip()
        if not text:
            continue
        try:
            float(text)
            continue  # a blend weight
        except ValueError:
            prefixes.append(text)
    return [p + ext for p in prefixes for ext in (".bin", ".idx")]


def required_files(paths: Any, what: str, fix: str) -> List[Dict[str, str]]:
    """``paths`` (a list, or one path) as prelaunch_problems' ``required`` entries, each with
    the same ``what`` and ``fix``: what community.general.dict_kv + combine did, without a
    collection beyond ansible-core at the launch."""
    items = paths if isinstance(paths, (list, tuple)) else [paths]
    out = []
    for path in items:
        if not isinstance(path, str) or not path:
            raise ValueError("required_files: expected paths as non-empty strings, found %r" % (path,))
        out.append({"path": path, "what": str(what), "fix": str(fix)})
    return out


def prelaunch_problems(probes: Mapping[str, Mapping[str, Any]], required: Sequence[Mapping[str, Any]] = (),
                       ssh: Optional[Mapping[str, Any]] = None, head: str = "", script: str = "",
                       user: str = "", unwritable: Optional[Mapping[str, str]] = None) -> List[str]:
    """Every reason not to start, each naming the node and what to do.

    ``probes``: node -> the job_probe result on it, or ``{"unreachable": true, "msg": ...}`` /
    ``{"failed": true, "msg": ...}`` when Ansible could not run it. ``required``: files that
    must exist on every probed node, as ``{"path", "what", "fix"}``. ``ssh``: node -> ssh's exit
    code and message from the head node as the training user (``{"rc": 255, "msg": ...}``).
    ``unwritable``: node -> the checkpoint directory (or its nearest existing parent) the
    training user cannot write there ('' or absent when it can).
    """
    problems: List[str] = []
    for node in sorted(probes):
        probe = probes[node] or {}
        if probe.get("unreachable"):
            problems.append("%s: unreachable by Ansible (%s); bring the node back or take it out of "
                            "megatron_nodes" % (node, _one_line(probe.get("msg"))))
            continue
        if probe.get("failed"):
            problems.append("%s: the pre-launch probe failed (%s)" % (node, _one_line(probe.get("msg"))))
            continue
        for port_text, owners in sorted((probe.get("listeners") or {}).items()):
            if owners:
                who = ", ".join("pid %s (%s)" % (o.get("pid") or "?", o.get("cmdline") or "process not visible")
                                for o in owners)
                problems.append(
                    "%s: port %s (the rendezvous port, megatron_job_master_port) is already in use by %s; "
                    "stop that process or choose another port" % (node, port_text, who))
        ranks = probe.get("ranks") or []
        if ranks:
            running = sorted(set(_script_of(r.get("cmdline")) for r in ranks))
            problems.append(
                "%s: %d rank process(es) of %s already running (pids %s): a job is running; check it with "
                "playbooks/status.yml or stop it with playbooks/stop.yml before starting %s"
                % (node, len(ranks), ", ".join(running), ", ".join(str(r.get("pid")) for r in ranks),
                   script or "another"))
        paths = probe.get("paths") or {}
        for item in required:
            path = str(item.get("path"))
            if not (paths.get(path) or {}).get("exists"):
                problems.append("%s: %s %s is missing; %s"
                                % (node, item.get("what") or "file", path, item.get("fix") or "create it"))
        for path in sorted(paths):
            for problem in index_problems(path, (paths[path] or {}).get("index") or {}):
                problems.append("%s: %s" % (node, problem["text"]))
    for node in sorted(unwritable or {}):
        where = str((unwritable or {})[node] or "").strip()
        if where:
            problems.append(
                "%s: the checkpoint directory is not writable by %s (%s); the first save would kill the job: "
                "give it to that user (the shared_storage role creates it so)" % (node, user or "the training user", where))
    for node in sorted(ssh or {}):
        entry = (ssh or {})[node] or {}
        if entry.get("rc", 0) != 0:
            problems.append(
                "%s: unreachable over ssh from the head node %s as %s (%s); the launcher's pdsh needs it: "
                "start sshd there or check the node, then re-run (cluster_ssh role: tasks_from verify)"
                % (node, head, user or "the training user", _one_line(entry.get("msg")) or "rc %s" % entry.get("rc")))
    return _group_by_text(problems)


def _group_by_text(problems: Sequence[str]) -> List[str]:
    """``node1: X``, ``node2: X`` -> ``node1, node2: X`` (order of first appearance kept)."""
    order: List[str] = []
    nodes: Dict[str, List[str]] = {}
    for problem in problems:
        node, sep, text = problem.partition(": ")
        key = text if sep else problem
        if key not in nodes:
            order.append(key)
            nodes[key] = []
        if sep and node not in nodes[key]:
            nodes[key].append(node)
    return ["%s: %s" % (", ".join(nodes[key]), key) if nodes[key] else key for key in order]


def parse_ssh_sweep(lines: Iterable[str], addresses: Mapping[str, str]) -> Dict[str, Dict[str, Any]]:
    """``ok NAME`` / ``fail NAME reason`` lines of the head node's ssh sweep -> node -> {rc, msg}.

    ``addresses`` maps inventory names to the names ssh used (the hostfile's)."""
    by_address: Dict[str, Dict[str, Any]] = {}
    for line in lines:
        parts = str(line).strip().split(" ", 2)
        if len(parts) >= 2 and parts[0] in ("ok", "fail"):
            by_address[parts[1]] = {"rc": 0 if parts[0] == "ok" else 255, "msg": parts[2] if len(parts) > 2 else ""}
    return {node: by_address[address] for node, address in addresses.items() if address in by_address}


def checkpoint_lacking(checkpoints: Mapping[str, Mapping[str, Any]], tag: str) -> Dict[str, Any]:
    """Which nodes lack part of checkpoint ``tag``: its ``latest`` file, or a file another node has.

    ``checkpoints``: node -> job_probe's ``checkpoint`` result listing ``tag`` on that node.
    """
    union = sorted(set(name for ck in checkpoints.values() for name in ((ck or {}).get("files") or [])))
    lacking = []
    for node in sorted(checkpoints):
        ck = checkpoints[node] or {}
        missing = set(union) - set(ck.get("files") or [])
        if ck.get("latest") != tag or missing:
            lacking.append(node)
    return {"files": union, "lacking": lacking}
