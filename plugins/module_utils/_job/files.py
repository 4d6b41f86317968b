# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files around the command line: ``.deepspeed_env`` (the environment of every rank) and
the DeepSpeed hostfile, written from the job spec, and the readers of a hostfile and a
ds_config.json the user already has (DeepSpeed's own rules, its own messages).

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import collections
import json
import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .._stack import profiles as _stack_profiles
from . import hops as _hops
from .args import ProfileArg, _prepare, ds_config, launch_args, train_arg_groups
from .schema import JobError
from .spec import summary

# What a .deepspeed_env value and a node's name may hold is the rule of their hop (hops.HOPS:
# "deepspeed_env", "hostfile"); these names stay for the modules that read them from here.
DS_ENV_SAFE_VALUE = _hops.DS_ENV_SAFE
DS_ENV_QUOTING_SINCE = _hops.DS_ENV_QUOTING_SINCE
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# DS_ENV_FILE (an absolute .deepspeed_env path) is honoured from DS 0.10.1 (PR #4006). Older
# DeepSpeed reads only ~/.deepspeed_env and ./.deepspeed_env (the launcher's cwd).
DS_ENV_FILE_SINCE = "0.10.1"
# The PATH every rank gets after the venv's (and CUDA's) bin.
SYSTEM_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin")

# The variable megatron_ds_fused_ops.pth looks for (roles/python_env/files/fused_ops).
FUSED_OPS_ENV = "MEGATRON_DS_FUSED_OPS"


def deepspeed_env(spec: Mapping[str, Any], profile: ProfileArg = None) -> Dict[str, str]:
    """The variables every rank on every node must see, later sources winning.

    Order: the venv's PATH and the Megatron checkout on PYTHONPATH, the accelerator's needs
    (CUDA_HOME, or DS_ACCELERATOR=cpu and MAX_JOBS=1), MEGATRON_DS_FUSED_OPS=1 with ``fused_ops``, the nccl
    role's ``nccl_env``, then the job's ``env``.
    A variable set to null in ``env`` or ``nccl_env`` is left out.
    """
    job, prof = _prepare(spec, profile)
    venv = job["venv"].rstrip("/")
    env: Dict[str, Optional[str]] = {}
    path = [venv + "/bin"]
    if prof.get("accelerator") == "cpu":
        # CPU ranks use DeepSpeed's CPU accelerator (gloo); auto-detection would also get
        # there, but only after a warning and a failed CUDA probe on every rank.
        env["DS_ACCELERATOR"] = "cpu"
        # The first launch on a node JIT-builds DeepSpeed's deepspeed_shm_comm_op (torch's
        # cpp_extension, ninja): one compiler per source file, about 1 GB each. One at a time keeps
        # eight simulated nodes on one 24 GB machine from running it out of memory
        # (docs/benchmarks.md, the 8-node bench); torch's lock already builds once per node.
        env["MAX_JOBS"] = "1"
    elif job["cuda_home"] is not None:
        env["CUDA_HOME"] = job["cuda_home"].rstrip("/")
        path.append(env["CUDA_HOME"] + "/bin")
    env["PATH"] = ":".join(path + list(SYSTEM_PATH))
    env["PYTHONPATH"] = job["megatron_dir"].rstrip("/")
    if job.get("fused_ops"):
        # megatron_ds_fused_ops.pth (python_env_fused_ops) installs its import hook only in a
        # process that has this: the ranks, not every interpreter of the venv.
        env[FUSED_OPS_ENV] = "1"
    for source in ("nccl_env", "env"):
        for key, value in job[source].items():
            env.pop(key, None)  # re-inserted last: a later source overrides
            env[key] = value
    return {k: v for k, v in env.items() if v is not None}


def deepspeed_env_lines(spec: Mapping[str, Any], profile: ProfileArg = None) -> List[str]:
    """``KEY=VALUE`` lines for .deepspeed_env, refusing what DeepSpeed's parser would break on.

    DeepSpeed splits every line on the first '=' (a blank or comment line crashes it), strips
    the value, and writes ``export KEY=VALUE;`` into the pdsh command. It double-quotes the value
    only from 0.15.2 on, so with an older pinned DeepSpeed (the cu117 profile's 0.9.2) a value
    with spaces or other shell characters is rejected here rather than broken on the nodes.
    """
    job, prof = _prepare(spec, profile)
    return _env_lines(deepspeed_env(job, prof), prof)


def _env_lines(env: Mapping[str, str], prof: Mapping[str, Any]) -> List[str]:
    """deepspeed_env_lines of an environment already built for profile ``prof``."""
    quotes = _stack_profiles.deepspeed_at_least(prof, DS_ENV_QUOTING_SINCE)
    lines = []
    for key, value in env.items():
        where = "megatron_job_env / nccl_env variable %s" % key
        if not _ENV_KEY.match(key):
            raise JobError(
                "%s: %r is not a valid environment variable name (expected letters, digits and "
                "'_', not starting with a digit); rename it" % (where, key)
            )
        if value != value.strip():
            raise JobError(
                "%s: value %r has leading or trailing whitespace, which DeepSpeed strips; "
                "remove it" % (where, value)
            )
        bad = _hops.refusal("deepspeed_env", value, quotes=True)
        if bad is not None:
            raise JobError(
                "%s: value %r contains a newline, '\"', '`', '$' or '\\' (here %s; control characters "
                "too); the DeepSpeed launcher hands the value to a remote shell, which would expand or "
                "break on it. Write the final value literally" % (where, value, _hops.printable(bad))
            )
        if _hops.refusal("deepspeed_env", value, quotes) is not None:
            raise JobError(
                "%s: value %r contains spaces or shell characters. DeepSpeed %s (stack profile "
                "%s) writes .deepspeed_env values unquoted into the pdsh 'export' line "
                "(quoting arrived in DeepSpeed %s), so the remote shell would split it. Use "
                "only letters, digits and @%%+=:,./- in the value, or a stack profile with "
                "DeepSpeed >= %s"
                % (where, value, _stack_profiles.deepspeed_pin(prof) or "(unpinned)", prof.get("name"),
                   DS_ENV_QUOTING_SINCE, DS_ENV_QUOTING_SINCE)
            )
        lines.append("%s=%s" % (key, value))
    return lines


def deepspeed_env_file_supported(profile: ProfileArg = None) -> bool:
    """Whether the profile's DeepSpeed reads .deepspeed_env from the DS_ENV_FILE path."""
    return _stack_profiles.deepspeed_at_least(profile, DS_ENV_FILE_SINCE)


def hostfile_lines(hosts: Sequence[str], slots: Any) -> List[str]:
    """``host slots=N`` per host, refusing what DeepSpeed or pdsh would refuse."""
    try:
        count = int(slots)
    except (TypeError, ValueError):
        count = 0
    if count < 1:
        raise JobError(
            "hostfile: slots is %r, expected a positive integer; set megatron_job_gpus_per_node" % (slots,)
        )
    if not hosts:
        raise JobError(
            "hostfile: no hosts; put the training nodes in inventory group megatron_nodes"
        )
    seen: Dict[str, int] = {}
    lines = []
    for index, host in enumerate(hosts):
        name = str(host).strip()
        if _hops.refusal("hostfile", name) is not None:
            raise JobError(
                "hostfile: node address %r cannot be used (%s may hold only %s); set "
                "megatron_job_node_address for that host to its ssh name"
                % (host, _hops.HOPS["hostfile"].where, _hops.HOPS["hostfile"].allowed)
            )
        if name in seen:
            raise JobError(
                "hostfile: nodes #%d and #%d both resolve to %r; DeepSpeed refuses duplicate "
                "hostfile entries. Give each inventory host its own megatron_job_node_address"
                % (seen[name] + 1, index + 1, name)
            )
        seen[name] = index
        lines.append("%s slots=%d" % (name, count))
    return lines


def contents(spec: Mapping[str, Any], profile: ProfileArg, hosts: Sequence[str]) -> Dict[str, Any]:
    """Everything the megatron_job role's four templates write, computed once from one spec.

    The role computes this into one fact and the templates (train.sh, ds_config.json,
    .deepspeed_env, hostfile) only lay it out, so each file's content has one builder and the
    fact is what was written. ``hosts`` are the launcher's names for the nodes, in rank order.

    The environment's values are checked here but not returned, only its names: the role keeps
    this in a fact, which ``-v`` prints, and megatron_job_env holds a job's tokens. The
    .deepspeed_env template builds its lines with the ``deepspeed_env_lines`` filter itself.
    """
    job, prof = _prepare(spec, profile)
    env = deepspeed_env(job, prof)
    _env_lines(env, prof)  # its own messages for the deepspeed_env hop
    _hops.refuse_spec(job)  # the rule validate.yml reports (hop_findings), as the renderers' gate
    return {
        "summary": summary(job),
        "ds_config": ds_config(job, prof),
        "launch_args": launch_args(job),
        "train_arg_groups": train_arg_groups(job, prof),
        "deepspeed_env_keys": sorted(env),
        "deepspeed_env_file_supported": deepspeed_env_file_supported(prof),
        "hostfile_lines": hostfile_lines(hosts, job["gpus_per_node"]),
    }


# A hostfile line as DeepSpeed's launcher reads it (runner.py _parse_hostfile).
_HOSTFILE_RE = re.compile(r"^(\S+)\s+slots=(\d+)")


class HostfileError(JobError):
    """DeepSpeed's own ValueError text for a hostfile it would refuse."""


def parse_hostfile(text: Union[str, Sequence[str]]) -> "collections.OrderedDict[str, int]":
    """Hosts and slots, in order, exactly as DeepSpeed's runner._parse_hostfile reads them:
    regex ``^(\\S+)\\s+slots=(\\d+)`` on each stripped line, ``#`` comment lines and blank lines
    skipped, a repeated host or a line that does not match raises HostfileError (DeepSpeed
    raises ValueError with the same words), and an empty pool too."""
    pool: "collections.OrderedDict[str, int]" = collections.OrderedDict()
    for raw in text.splitlines() if isinstance(text, str) else text:
        line = raw.strip()
        match = _HOSTFILE_RE.search(line)
        if line.startswith("#") or line == "":
            continue
        if match:
            host = match.group(1)
            if host in pool:
                raise HostfileError(
                    "Hostfile contains multiple entries for %s, unable to proceed with launching" % host
                )
            pool[host] = int(match.group(2))
        else:
            raise HostfileError("Hostfile contains a bad entry: %s, unable to proceed with launching" % line)
    if not pool:
        raise HostfileError("Hostfile is empty or not formatted correctly, unable to proceed with launching.")
    return pool


class DsConfigError(JobError):
    """A ds_config.json that is not a JSON object."""


def load_ds_config(text: str) -> Tuple[Dict[str, Any], List[str]]:
    """(config, duplicate keys). Megatron-DeepSpeed reads the file with a plain json.load
    (training.py _create_ds_config_dict), so a duplicated key silently keeps the last value;
    DeepSpeed itself would raise 'Duplicate keys in DeepSpeed config'. Raises DsConfigError
    on invalid JSON or a top level that is not an object."""
    duplicates: List[str] = []

    def hook(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
        seen: Dict[str, Any] = {}
        for key, value in pairs:
            if key in seen:
                duplicates.append(key)
            seen[key] = value
        return seen

    try:
        config = json.loads(text, object_pairs_hook=hook)
    except ValueError as exc:
        raise DsConfigError("ds_config is not valid JSON: %s" % exc)
    if not isinstance(config, dict):
        raise DsConfigError("ds_config must be a JSON object, found %s" % type(config).__name__)
    return config, duplicates
