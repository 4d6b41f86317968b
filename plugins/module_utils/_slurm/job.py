# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What Slurm says about one submitted job, read by job_probe for status, wait and stop.

Three sources, in the order they are asked: ``squeue`` (pending, running and recently ended
jobs, with ``--states=all``), ``sacct`` (the accounting database; absent without slurmdbd, as
the slurm role sets Slurm up) and ``scontrol show job`` (slurmctld's memory, which keeps an
ended job for MinJobAge, 300 s by default). The first one that knows the job wins.

* ``parse_submit(text)``: the job id printed by ``sbatch --parsable``.
* ``parse_squeue(text, job_id)``: ``squeue --noheader --states=all --jobs=ID --format=SQUEUE_FORMAT``.
* ``parse_sacct(text, job_id)``: ``sacct --noheader --parsable2 --jobs=ID --format=SACCT_FORMAT``.
* ``parse_scontrol_job(text)``: ``scontrol show job -o ID``.
* ``job_state(job_id, squeue, sacct, scontrol)``: one answer from the three.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Optional

SQUEUE_FORMAT = "%i|%T|%r|%M|%N|%B"
SACCT_FORMAT = "JobID,State,ExitCode,Elapsed,NodeList"
# Job states in which the job holds, or is about to hold, its nodes (squeue(1) JOB STATE CODES).
ACTIVE_STATES = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "REQUEUE_FED",
                 "REQUEUE_HOLD", "RESIZING", "SIGNALING", "STAGE_OUT", "STOPPED", "RESV_DEL_HOLD")
_PAIR_RE = re.compile(r"(\w+)=(\S*)")
_SUBMIT_RE = re.compile(r"^\s*(\d+)(?:;\S+)?\s*$")


def parse_submit(text: Optional[str]) -> str:
    """``sbatch --parsable`` prints ``JOBID`` or ``JOBID;CLUSTER``; the id. Raises ValueError
    with what sbatch printed when there is none (the submit failed)."""
    for line in (text or "").splitlines():
        match = _SUBMIT_RE.match(line)
        if match:
            return match.group(1)
    raise ValueError("sbatch printed no job id (%r); expected `sbatch --parsable` to print one, e.g. 42"
                     % (text or "").strip()[:300])


def _base_state(state: str) -> str:
    # sacct prints "CANCELLED by 2000"; squeue and scontrol print the bare name.
    return (state or "").strip().split(" ")[0].upper()


def parse_squeue(text: Optional[str], job_id: Any) -> Dict[str, Any]:
    """The job's line of squeue (SQUEUE_FORMAT): state, reason, elapsed, nodes, batch host; {} if absent."""
    wanted = str(job_id)
    for line in (text or "").splitlines():
        fields = line.strip().split("|")
        if len(fields) != 6 or fields[0] != wanted:
            continue
        _id, state, reason, elapsed, nodes, batch_host = fields
        return {"state": _base_state(state), "reason": "" if reason in ("None", "(null)") else reason,
                "elapsed": elapsed, "nodes": "" if nodes == "(null)" else nodes,
                "batch_host": "" if batch_host in ("(null)", "n/a") else batch_host, "source": "squeue"}
    return {}


def parse_sacct(text: Optional[str], job_id: Any) -> Dict[str, Any]:
    """The allocation's line of sacct (SACCT_FORMAT, --parsable2), not its steps; {} if absent."""
    wanted = str(job_id)
    for line in (text or "").splitlines():
        fields = line.strip().split("|")
        if len(fields) != 5 or fields[0] != wanted:
            continue
        _id, state, exit_code, elapsed, nodes = fields
        return {"state": _base_state(state), "exit_code": exit_code, "elapsed": elapsed,
                "nodes": "" if nodes in ("None assigned", "(null)") else nodes, "source": "sacct"}
    return {}


def parse_scontrol_job(text: Optional[str]) -> Dict[str, Any]:
    """``scontrol show job -o ID``: state, reason, exit code, restarts, nodes, batch host; {} if unknown."""
    pairs = dict(_PAIR_RE.findall(text or ""))
    if "JobId" not in pairs or "JobState" not in pairs:
        return {}
    restarts = pairs.get("Restarts", "0")
    return {"state": _base_state(pairs["JobState"]),
            "reason": "" if pairs.get("Reason") in (None, "None", "(null)") else pairs["Reason"],
            "exit_code": pairs.get("ExitCode", ""), "elapsed": pairs.get("RunTime", ""),
            "nodes": "" if pairs.get("NodeList") in (None, "(null)") else pairs["NodeList"],
            "batch_host": "" if pairs.get("BatchHost") in (None, "(null)") else pairs["BatchHost"],
            "restarts": int(restarts) if restarts.isdigit() else 0, "source": "scontrol"}


def job_state(job_id: Any, squeue: Optional[str] = None, sacct: Optional[str] = None,
              scontrol: Optional[str] = None) -> Dict[str, Any]:
    """One answer about ``job_id`` from the three sources (the first that knows the job, then
    the others fill what it lacks). ``alive``: the job holds or waits for its nodes.
    ``state`` UNKNOWN: no source knows it (purged from slurmctld's memory and no accounting)."""
    found: Dict[str, Any] = {}
    for part in (parse_squeue(squeue, job_id), parse_sacct(sacct, job_id), parse_scontrol_job(scontrol)):
        for key, value in part.items():
            if key not in found or found[key] in ("", None):
                found[key] = value
    state = found.get("state") or "UNKNOWN"
    result = {"job_id": str(job_id), "state": state, "alive": state in ACTIVE_STATES,
              "reason": found.get("reason", ""), "exit_code": found.get("exit_code", ""),
              "elapsed": found.get("elapsed", ""), "nodes": found.get("nodes", ""),
              "batch_host": found.get("batch_host", ""), "restarts": found.get("restarts", 0),
              "source": found.get("source", "none")}
    return result
