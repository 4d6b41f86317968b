# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a job log says: the launcher's start and exit lines, Megatron's iteration lines (read
by the Megatron log parser, which the monitoring exporter shares), the burn-in's lines, saved
and loaded checkpoints and the SIGTERM exit.

No Ansible imports; Python 3.8 compatible (parts run on the nodes through job_probe).
"""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .._mds.log import parse_iteration, parse_number
from .._checkpoint import STEP_TAG as _STEP_TAG


# The launcher wrapper appends this line when the DeepSpeed runner exits (start task of the
# megatron_launch role); ``parse_log`` reads the status back.
LAUNCH_MARK = "=== megatron_launch"
_LAUNCH_START = re.compile(r"^=== megatron_launch (\S+): start (\S+) (.*)$")
_LAUNCH_EXIT = re.compile(r"^=== megatron_launch (\S+): launcher exited rc=(-?\d+)")

_MEGATRON_SAVED = re.compile(r"successfully saved checkpoint at iteration\s+(\d+) to (\S+)")
_MEGATRON_LOADED = re.compile(r"successfully loaded checkpoint from (\S+) .*?at iteration (\d+)")
_MEGATRON_SIGTERM = "exiting program after receiving SIGTERM"

# The burn-in (roles/megatron_launch/files/burnin_gpt.py)
_BURNIN_STEP = re.compile(r"BURNIN step=(\d+) loss=([-+0-9.eEnaif]+) step_time=([0-9.]+)s tokens_per_s_per_rank=([0-9.]+)")
_RESULT_TAG = "BURNIN_RESULT "
# burnin_gpt.py result_lines: one rank's result cut into numbered chunks, each line closed by "|".
_RESULT_PART = re.compile(r"BURNIN_RESULT_PART (\d+) (\d+)/(\d+) (.*?)\|(?=$|BURNIN_RESULT)")
_BURNIN_CHECKPOINT = re.compile(r"BURNIN checkpoint (\S+) \((\w+)\)")
_BURNIN_RESUMED = re.compile(r"BURNIN resumed from (\S+) at step (\d+)")

# DeepSpeed's runner logs the pdsh command it runs (deepspeed/launcher/runner.py `cmd = ...`),
# which sets every .deepspeed_env variable as `export K=V;` (multinode_runner.py PDSHRunner), the
# value in double quotes from DeepSpeed 0.15.2. Those values are megatron_job_env's, tokens
# included: what the collection shows of a log hides them.
_EXPORT = re.compile(r'(\bexport\s+[A-Za-z_][A-Za-z0-9_]*=)("(?:[^"\\]|\\.)*"|[^;\s]*)')
HIDDEN = "<hidden>"


def redact_exports(line: str) -> str:
    """``line`` with the value of every ``export K=V`` replaced by <hidden>."""
    return _EXPORT.sub(lambda match: match.group(1) + HIDDEN, line)


# Lines worth showing when a run failed (the last ones are kept).
_ERROR = re.compile(r"Traceback \(most recent call last\)|\b\w*(Error|Exception)\b: |exits with return code|"
                    r"ssh exited with exit code|Killed|Segmentation fault")


def burnin_results_in(line: str) -> Tuple[List[Dict[str, Any]], bool]:
    """Every ``BURNIN_RESULT {json}`` in one log line, and whether one did not decode.

    The ranks of a node share the launcher's stdout, and Python's print() writes the text and
    its newline separately, so two ranks' results can land on one line (and an empty line
    after it). Each JSON object is decoded where it starts, wherever it is in the line.
    """
    decoder = json.JSONDecoder()
    found: List[Dict[str, Any]] = []
    bad = False
    start = line.find(_RESULT_TAG)
    while start >= 0:
        begin = start + len(_RESULT_TAG)
        try:
            value, end = decoder.raw_decode(line, begin)
        except ValueError:
            bad = True
            end = begin
        else:
            if isinstance(value, dict):
                found.append(value)
            else:
                bad = True
        start = line.find(_RESULT_TAG, end)
    return found, bad


class ResultParts:
    """The burn-in's results from their ``BURNIN_RESULT_PART`` lines, in whatever order the
    launcher's output brought the ranks' lines.

    A part seen again (the same rank, index and count) replaces the earlier one; a rank whose
    parts are incomplete or do not decode is reported, not guessed at.
    """

    def __init__(self) -> None:
        self.parts: Dict[Tuple[int, int], Dict[int, str]] = {}

    def add(self, line: str) -> bool:
        """Take the parts in one log line; whether it held any."""
        matches = list(_RESULT_PART.finditer(line))
        for match in matches:
            rank, index, count = int(match.group(1)), int(match.group(2)), int(match.group(3))
            self.parts.setdefault((rank, count), {})[index] = match.group(4)
        return bool(matches)

    def results(self) -> Tuple[List[Dict[str, Any]], List[str]]:
        """The decoded results, by rank, and one problem line per rank that did not decode."""
        found: List[Dict[str, Any]] = []
        problems: List[str] = []
        for (rank, count), chunks in sorted(self.parts.items()):
            missing = [index for index in range(1, count + 1) if index not in chunks]
            if missing:
                problems.append("BURNIN_RESULT_PART of rank %d: part(s) %s of %d missing from the log"
                                % (rank, ",".join(str(index) for index in missing), count))
                continue
            try:
                value = json.loads("".join(chunks[index] for index in range(1, count + 1)))
            except ValueError as err:
                problems.append("BURNIN_RESULT_PART of rank %d: its %d part(s) do not decode (%s)" % (rank, count, err))
                continue
            if isinstance(value, dict):
                found.append(value)
            else:
                problems.append("BURNIN_RESULT_PART of rank %d: not a JSON object" % rank)
        return found, problems


def iteration_entry(line: str) -> Tuple[Optional[str], Optional[Dict[str, Any]]]:
    """("megatron" | "burnin", the iteration's record) for an iteration line of either, else
    (None, None). A burn-in record carries iteration, lm_loss, step_time_s and
    tokens_per_gpu_per_second."""
    entry = parse_iteration(line)
    if entry is not None:
        return "megatron", entry
    step = _BURNIN_STEP.search(line)
    if not step:
        return None, None
    return "burnin", {
        "iteration": int(step.group(1)),
        "lm_loss": parse_number(step.group(2)),
        "step_time_s": float(step.group(3)),
        "tokens_per_gpu_per_second": float(step.group(4)),
    }


def launch_losses(lines: Iterable[str]) -> List[List[Tuple[int, float]]]:
    """(iteration, lm loss) of every launch in a job log, one list per ``=== megatron_launch
    ...: start`` line (iterations before the first start line, and lines without a loss, are left
    out): what a resumed launch logged again can be set beside what the launch before it logged."""
    out: List[List[Tuple[int, float]]] = []
    for line in lines:
        line = str(line).rstrip("\n")
        if _LAUNCH_START.match(line):
            out.append([])
            continue
        entry = iteration_entry(line)[1]
        if entry is not None and entry.get("lm_loss") is not None and out:
            out[-1].append((entry["iteration"], entry["lm_loss"]))
    return out


def parse_log(lines: Iterable[str], error_lines: int = 8) -> Dict[str, Any]:
    """What a job log (the launcher's output, all nodes through pdsh) says.

    Only the part after the last ``=== megatron_launch ...: start`` line counts when there is one,
    so a log appended by several runs describes the latest.
    """
    lines = [str(line).rstrip("\n") for line in lines]
    for index in range(len(lines) - 1, -1, -1):
        if _LAUNCH_START.match(lines[index]):
            lines = lines[index:]
            break
    summary: Dict[str, Any] = {
        "kind": None,
        "started": None,
        "iterations_logged": 0,
        "first": None,
        "last": None,
        "saved": [],
        "loaded": None,
        "sigterm": False,
        "launcher_rc": None,
        "finished_at": None,
        "burnin_results": [],
        "errors": [],
    }
    errors: List[str] = []
    parts = ResultParts()
    for line in lines:
        start = _LAUNCH_START.match(line)
        if start:
            summary["started"] = {"at": start.group(1), "script": start.group(2), "command": start.group(3)}
            continue
        finish = _LAUNCH_EXIT.match(line)
        if finish:
            summary["finished_at"] = finish.group(1)
            summary["launcher_rc"] = int(finish.group(2))
            continue
        kind, entry = iteration_entry(line)
        if entry is not None:
            summary["kind"] = kind
            summary["iterations_logged"] += 1
            if summary["first"] is None:
                summary["first"] = entry
            summary["last"] = entry
            continue
        if parts.add(line):
            summary["kind"] = summary["kind"] or "burnin"
            continue
        if _RESULT_TAG in line:
            found, bad = burnin_results_in(line)
            summary["burnin_results"].extend(found)
            if bad:
                errors.append(line.strip()[:300])
            summary["kind"] = summary["kind"] or "burnin"
            continue
        saved = _MEGATRON_SAVED.search(line)
        if saved:
            summary["saved"].append({"iteration": int(saved.group(1)), "path": saved.group(2), "reason": None})
            continue
        saved = _BURNIN_CHECKPOINT.search(line)
        if saved:
            path = saved.group(1)
            step = _STEP_TAG.match(os.path.basename(path))
            summary["saved"].append({"iteration": int(step.group(1)) if step else None, "path": path,
                                     "reason": saved.group(2)})
            if saved.group(2) == "SIGTERM":
                summary["sigterm"] = True
            continue
        loaded = _MEGATRON_LOADED.search(line)
        if loaded:
            summary["loaded"] = {"path": loaded.group(1), "iteration": int(loaded.group(2))}
            continue
        loaded = _BURNIN_RESUMED.search(line)
        if loaded:
            summary["loaded"] = {"path": loaded.group(1), "iteration": int(loaded.group(2))}
            continue
        if _MEGATRON_SIGTERM in line:
            summary["sigterm"] = True
            continue
        if _ERROR.search(line):
            errors.append(redact_exports(line.strip())[:300])
    found, problems = parts.results()
    summary["burnin_results"].extend(found)
    errors.extend(problems)
    summary["errors"] = errors[-error_lines:] if error_lines else []
    return summary
