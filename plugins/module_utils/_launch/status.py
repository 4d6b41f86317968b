# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A job's status across the nodes, its summary lines, and the tail of a log file.

No Ansible imports; Python 3.8 compatible (parts run on the nodes through job_probe).
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Mapping, Optional, Tuple


def _script_of(cmdline: Any) -> str:
    match = re.search(r" -u (\S+)", str(cmdline or ""))
    return os.path.basename(match.group(1)) if match else "a training script"


def _one_line(text: Any, limit: int = 300) -> str:
    return " ".join(str(text or "").split())[:limit]


def job_status(probes: Mapping[str, Mapping[str, Any]], head: str, rank0: str,
               record: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The state of the last launched job from every node's job_probe result.

    ``probes``: node -> job_probe result (ranks on every node; log and launcher on ``head``;
    checkpoint on ``rank0``), or ``{"unreachable": true}``. ``state`` is one of
    ``running`` (the launcher lives and ranks run), ``starting`` (the launcher lives, no rank
    yet), ``finished`` (launcher rc 0), ``stopped`` (it saved on SIGTERM and exited),
    ``failed`` (non-zero rc, or ranks gone while the launcher lives), ``not started`` (no record).
    A job of the slurm backend (job_probe's ``slurm`` on ``head``, the node holding its log) is
    ``queued`` while Slurm keeps it PENDING, and ``failed`` when Slurm ended it without the
    batch script's exit line (cancelled, timed out, node failure); ``slurm`` carries Slurm's view.
    """
    head_probe = probes.get(head) or {}
    log = head_probe.get("log") or {}
    launcher = head_probe.get("launcher") or {}
    checkpoint = (probes.get(rank0) or {}).get("checkpoint") or {}
    nodes: Dict[str, Dict[str, Any]] = {}
    unreachable = []
    for node in sorted(probes):
        probe = probes[node] or {}
        if probe.get("unreachable") or probe.get("failed"):
            unreachable.append(node)
            nodes[node] = {"reachable": False, "ranks": None, "local_ranks": [], "pids": []}
            continue
        ranks = probe.get("ranks") or []
        nodes[node] = {"reachable": True, "ranks": len(ranks),
                       "local_ranks": sorted(r.get("local_rank") for r in ranks if r.get("local_rank") is not None),
                       "pids": [r.get("pid") for r in ranks]}
    alive_ranks = sum(n["ranks"] or 0 for n in nodes.values())
    rc = log.get("launcher_rc")
    slurm = head_probe.get("slurm") or {}
    if not record:
        state = "not started"
    elif slurm.get("state") in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"):
        state = "queued"
    elif launcher.get("alive"):
        state = "running" if alive_ranks else ("failed" if log.get("iterations_logged") else "starting")
    elif rc == 0 and log.get("sigterm"):
        state = "stopped"
    elif rc == 0:
        state = "finished"
    elif rc is None and not launcher.get("alive"):
        state = "failed" if not alive_ranks else "running"
    else:
        state = "failed"
    last = log.get("last") or {}
    saved = log.get("saved") or []
    return {
        "job": (record or {}).get("job"),
        "state": state,
        "backend": (record or {}).get("backend", "pdsh"),
        "slurm": slurm,
        "launcher": launcher,
        "launcher_rc": rc,
        "started": log.get("started"),
        "finished_at": log.get("finished_at"),
        "ranks_alive": alive_ranks,
        "nodes": nodes,
        "unreachable": unreachable,
        "iteration": last.get("iteration"),
        "train_iters": last.get("train_iters"),
        "loss": last.get("lm_loss"),
        "tokens_per_gpu_per_second": last.get("tokens_per_gpu_per_second"),
        "tflops": last.get("tflops"),
        "iterations_logged": log.get("iterations_logged"),
        "resumed_from": (log.get("loaded") or {}),
        "last_saved": saved[-1] if saved else None,
        "checkpoint_dir": checkpoint.get("dir"),
        "checkpoint_latest": checkpoint.get("latest"),
        "checkpoint_tags": checkpoint.get("tags") or [],
        "log_file": log.get("file"),
        "errors": log.get("errors") or [],
        "tail": log.get("tail") or [],
    }


def status_lines(status: Mapping[str, Any]) -> List[str]:
    """A job_status as lines for people."""
    def show(value: Any) -> str:
        return "-" if value is None or value == "" else str(value)

    lines = ["job %s: %s%s" % (show(status.get("job")), status.get("state"),
                               (" (launcher rc %s)" % status["launcher_rc"]) if status.get("launcher_rc") is not None else "")]
    slurm = status.get("slurm") or {}
    if slurm:
        lines.append("slurm job %s: %s%s, nodes %s, elapsed %s, restarts %s (from %s)" % (
            show(slurm.get("job_id")), show(slurm.get("state")),
            (" (%s)" % slurm["reason"]) if slurm.get("reason") else "", show(slurm.get("nodes")),
            show(slurm.get("elapsed")), show(slurm.get("restarts")), show(slurm.get("source"))))
    if status.get("iteration") is not None:
        lines.append("iteration %s/%s, loss %s, tokens/s per GPU %s, TFLOP/s %s" % (
            show(status.get("iteration")), show(status.get("train_iters")), show(status.get("loss")),
            show(status.get("tokens_per_gpu_per_second")), show(status.get("tflops"))))
    tags = ", ".join(status.get("checkpoint_tags") or []) or "none"
    lines.append("checkpoint: %s/%s (tags: %s)"
                 % (show(status.get("checkpoint_dir")), show(status.get("checkpoint_latest")), tags))
    for node, row in sorted((status.get("nodes") or {}).items()):
        if not row.get("reachable"):
            lines.append("%-20s unreachable" % node)
        else:
            lines.append("%-20s %d rank(s) alive%s" % (node, row.get("ranks") or 0,
                                                       (" (local ranks %s)" % ",".join(str(r) for r in row["local_ranks"]))
                                                       if row.get("local_ranks") else ""))
    for error in status.get("errors") or []:
        lines.append("error: %s" % error)
    return lines


def tail_text(path: str, offset: int = 0, max_bytes: int = 4 * 1024 * 1024) -> Tuple[List[str], int]:
    """Lines of ``path`` from byte ``offset`` (at most the last ``max_bytes``), and the file size."""
    size = os.path.getsize(path)
    start = max(int(offset or 0), size - int(max_bytes))
    if start > size:  # the log was truncated or replaced since the offset was taken
        start = max(0, size - int(max_bytes))
    cut = start > int(offset or 0) and start > 0
    with open(path, "rb") as handle:
        handle.seek(start - 1 if cut else start)
        data = handle.read()
    if cut:
        # Started inside the file: keep only whole lines (drop up to the first line break).
        data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
    return data.decode("utf-8", "replace").splitlines(), size
