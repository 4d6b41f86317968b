# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job as upstream's oracle (``_mds/oracle.py``) is asked about it: the exact argument list
train.sh passes to pretrain_gpt.py, the ds_config.json it points at, the environment every rank
gets (.deepspeed_env), and the world size the launch will have, all from the one builder of the
job files (``_job.files`` / ``_job.args``), so the oracle judges what is launched.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import re
import subprocess
from typing import Any, Dict, List, Mapping, Optional

from .._mds import oracle as _mds_oracle
from . import findings as _job_findings
from .args import ProfileArg, _prepare, ds_config, train_args
from .files import deepspeed_env
from .schema import JobError


def request(spec: Mapping[str, Any], profile: ProfileArg = None, megatron_dir: Optional[str] = None,
            workdir: Optional[str] = None, nodes: Optional[int] = None, files_here: bool = False) -> Dict[str, Any]:
    """The oracle's request for a job spec: ``argv``, ``ds_config``, ``env``, ``world_size``
    (nodes x GPUs per node), and where the checkout and the job's directory are (the spec's own
    ``megatron_dir`` and ``workdir`` unless given). ``files_here``: the oracle runs where the
    job's files are (the head node), so a tokenizer file it cannot read is a refusal, not a
    stage it leaves to the head node."""
    raw = dict(spec)
    if nodes is not None:
        raw["nodes"] = nodes
    if not raw.get("nodes"):
        raise JobError("the oracle needs the node count: give nodes, or a spec with nodes (the job lookup's spec has them)")
    job, prof = _prepare(raw, profile)
    count = job["nodes"]
    return {
        "megatron_dir": megatron_dir or job["megatron_dir"],
        "workdir": workdir or job["workdir"],
        "argv": train_args(job, prof),
        "ds_config": ds_config(job, prof),
        "env": deepspeed_env(job, prof),
        "world_size": int(count) * int(job["gpus_per_node"]),
        "args_defaults": dict(_mds_oracle.PRETRAIN_GPT_DEFAULTS),
        "files_here": bool(files_here),
    }


def encoded_request(spec: Mapping[str, Any], profile: ProfileArg = None, megatron_dir: Optional[str] = None,
                    workdir: Optional[str] = None, nodes: Optional[int] = None, files_here: bool = False) -> str:
    """``request`` as the one shell-safe argument the oracle file takes."""
    return _mds_oracle.encode_request(request(spec, profile, megatron_dir, workdir, nodes, files_here))


def verdict(stdout: str) -> Dict[str, Any]:
    """The oracle's verdict from its stdout, with ``lines`` (one per finding, as the user reads it)."""
    result = _mds_oracle.parse_output(stdout)
    result["lines"] = _mds_oracle.finding_lines(result)
    return result


def oracle_file() -> str:
    """Path of the oracle script on this machine (run by the training venv's python)."""
    return _mds_oracle.__file__


# How each era's megatron/arguments.py declares parse_args: 9446eaac (before_rebase)
# arguments.py:24 takes ``defaults`` and validates inside; 4efb479d (head) arguments.py:21 does not.
_PARSE_ARGS_ERA = (
    (re.compile(r"^def parse_args\(extra_args_provider=None,\s*defaults=", re.M), "before_rebase"),
    (re.compile(r"^def parse_args\(extra_args_provider=None,\s*ignore_unknown_args=", re.M), "head"),
)
_ERA_CHECKOUT = {"before_rebase": "the before_rebase branch (9446eaac)", "head": "main (4efb479d)"}


def checkout_era(arguments_py: Optional[str]) -> Optional[str]:
    """The era of a checkout, from the text of its megatron/arguments.py; None when neither
    signature is there (another fork, a file that could not be read)."""
    for pattern, era in _PARSE_ARGS_ERA:
        if arguments_py and pattern.search(arguments_py):
            return era
    return None


def era_mismatch(job_era: str, source: str, found_era: Optional[str], deepspeed_version: Optional[str] = None,
                 deepspeed_era: Optional[str] = None) -> Optional[str]:
    """Why the oracle cannot judge this job with this checkout (and, once it ran, this
    DeepSpeed), or None when they are the job's own era. Judging a before_rebase job with
    head-era code says nothing about the code that will run."""
    if found_era is None:
        return ("cannot judge: %s/megatron/arguments.py declares parse_args like neither era "
                "(before_rebase 9446eaac, head 4efb479d); point MEGATRON_DS_SRC at a checkout of the job's era, %s"
                % (source, _ERA_CHECKOUT.get(job_era, job_era)))
    if found_era != job_era:
        return ("cannot judge: the job runs Megatron-DeepSpeed's %s era (its stack profile), but MEGATRON_DS_SRC "
                "(%s) is the %s era; point it at %s" % (job_era, source, found_era, _ERA_CHECKOUT.get(job_era, job_era)))
    if deepspeed_era is not None and deepspeed_era != job_era:
        return ("cannot judge: the job's era is %s, but MEGATRON_DS_PYTHON's DeepSpeed %s belongs to the %s era; "
                "give a python with the profile's DeepSpeed" % (job_era, deepspeed_version, deepspeed_era))
    return None


def stages_said(result: Mapping[str, Any]) -> str:
    """', then the microbatches, the tokenizer (not run: ...) and the data split' for a note."""
    parts = ["%s%s" % (st.get("stage"), "" if st.get("ran") else " (not run: %s)" % st.get("reason"))
             for st in result.get("stages") or () if isinstance(st, Mapping)]
    return (", then the start-up's " + ", ".join(parts)) if parts else ""


def findings(result: Mapping[str, Any]) -> List[Dict[str, str]]:
    """The verdict as validate_job findings: one failing row per upstream refusal, quoting upstream
    and naming where it refused and the flags that line reads; one passing row when upstream
    accepted the job; nothing when it could not run (the caller notes why)."""
    if not result.get("ran"):
        return []
    out = []
    for item in result.get("findings") or ():
        if item["source"] == "megatron":
            who = "Megatron-DeepSpeed " + ("validate_args" if not item.get("stage") else "start-up (%s)" % item["stage"])
        else:
            who = "DeepSpeed DeepSpeedConfig"
        flags = list(item.get("flags") or ())
        also = [f for f in item.get("reads") or () if f not in flags]
        out.append(_job_findings.finding(
            "upstream: %s%s" % (who, (" (%s)" % item["where"]) if item.get("where") else ""), "fail",
            "upstream", " ".join(flags) or "-", "accepted by upstream",
            "upstream: %s; change %s%s" % (item["message"], ", ".join(flags) or "the job",
                                           (" (the line also reads %s)" % ", ".join(also)) if also else "")))
    if not out:
        out.append(_job_findings.finding(
            "upstream: Megatron-DeepSpeed validate_args and DeepSpeed DeepSpeedConfig", "pass", "upstream",
            "accepted (data parallel %s, DeepSpeed %s)" % (result.get("data_parallel"), (result.get("versions") or {}).get("deepspeed")),
            "accepted by upstream"))
    return out


def run_oracle(req: Mapping[str, Any], python: str, timeout: int = 600) -> Dict[str, Any]:
    """Run the oracle file with ``python`` (a venv with torch and DeepSpeed) on ``req``; the verdict,
    or ``ran`` false with the reason when it cannot run."""
    try:
        proc = subprocess.run([python, oracle_file(), _mds_oracle.encode_request(req)], capture_output=True,
                              text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"ran": False, "reason": "cannot run %s: %s" % (python, exc), "findings": []}
    try:
        return verdict(proc.stdout)
    except ValueError as exc:
        reason = "%s (rc %d): %s; stderr ends: %s" % (python, proc.returncode, exc, proc.stderr.strip()[-400:])
        return {"ran": False, "reason": reason, "findings": []}
