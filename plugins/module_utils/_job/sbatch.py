# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Slurm side of a job: the ``#SBATCH`` options and the srun line of the sbatch script,
from the same job spec as train.sh.

The sbatch script (roles/megatron_launch/templates/job.sbatch.j2) runs what train.sh runs: the pretrain_gpt.py
arguments come from ``args.train_arg_groups`` and the environment from
``files.deepspeed_env``; only the start of the ranks differs. Under Slurm the ranks are
the tasks of one ``srun`` step, one per GPU, and a small wrapper gives each of them the
variables that torch.distributed's ``env://`` rendezvous and Megatron-DeepSpeed read (RANK,
WORLD_SIZE, LOCAL_RANK, from SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; MASTER_ADDR and
MASTER_PORT come from the batch script). docs/slurm.md says why this beats DeepSpeed's own
``--launcher slurm`` (which starts the script under srun without those variables).

* ``sbatch_options(spec, ...)``: the ``#SBATCH`` lines: nodes and tasks per node from the spec,
  GPUs per node, ``--requeue``, ``--signal=TERM@<seconds>``, the per-job log (``%j``).
* ``srun_args(spec)``: srun's options for the ranks.
* ``rank_command(python, script)``: the wrapper and the interpreter that start each rank.
* ``time_limit_seconds(text)``: Slurm's time format in seconds (None: no limit).

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import hops as _hops
from .schema import JobError
from .spec import derive, normalize

# Slurm keeps the warning time of --signal in 16 bits (sbatch(1): "may be up to 65535").
SIGNAL_MAX_SECONDS = 65535
# Slurm sends the --signal signal up to 60 s later than asked (its event timer's resolution),
# so the warning must leave at least that much before the limit for the save itself.
SIGNAL_RESOLUTION = 60
_TIME_RE = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
# \Z, not $: '$' also matches before a final newline, which would end the #SBATCH line.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
_UNLIMITED = ("", "unlimited", "infinite")

# The per-rank environment, from srun's own variables. LOCAL_SIZE is what the burn-in reads to
# share the node's cores; LOCAL_WORLD_SIZE is torch's name for it. --local_rank=N goes last on
# the command line, as DeepSpeed's launch.py passes it, so status.yml tells the local ranks apart
# the same way under both backends. The wrapper adds the interpreter's -u itself: srun's own
# command line then holds `<python> <script>` without it, so the rank pattern of status and stop
# (`<python> -u <script>`) matches the ranks only, not srun.
RANK_WRAPPER = (
    'export RANK="${SLURM_PROCID}" WORLD_SIZE="${SLURM_NTASKS}" LOCAL_RANK="${SLURM_LOCALID}" '
    'LOCAL_SIZE="${SLURM_NTASKS_PER_NODE%%(*}" LOCAL_WORLD_SIZE="${SLURM_NTASKS_PER_NODE%%(*}"; '
    'python="$1"; shift; exec "${python}" -u "$@" --local_rank="${SLURM_LOCALID}"'
)


def time_limit_seconds(text: Any) -> Optional[int]:
    """Slurm's ``--time`` formats (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) in seconds; None when
    empty, UNLIMITED or INFINITE. Raises JobError on anything else."""
    value = str(text if text is not None else "").strip()
    if value.lower() in _UNLIMITED:
        return None
    match = _TIME_RE.match(value)
    if not match:
        raise JobError("slurm time limit %r: expected Slurm's format (minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM or "
                       "D-HH:MM:SS), or empty for the partition's limit; set megatron_launch_slurm_time_limit"
                       % value)
    days, first, second, third = match.groups()
    numbers = [int(part) for part in (first, second, third) if part is not None]
    if days is None:
        # M | M:S | H:M:S
        if len(numbers) == 1:
            hours, minutes, seconds = 0, numbers[0], 0
        elif len(numbers) == 2:
            hours, minutes, seconds = 0, numbers[0], numbers[1]
        else:
            hours, minutes, seconds = numbers
        return hours * 3600 + minutes * 60 + seconds
    # D-H | D-H:M | D-H:M:S
    hours = numbers[0]
    minutes = numbers[1] if len(numbers) > 1 else 0
    seconds = numbers[2] if len(numbers) > 2 else 0
    return int(days) * 86400 + hours * 3600 + minutes * 60 + seconds


def _check_name(what: str, value: str, variable: str) -> None:
    if value and not _NAME_RE.match(value):
        raise JobError("slurm %s %r: expected letters, digits, '.', '_' or '-' (no spaces or shell characters); "
                       "set %s" % (what, value, variable))


def sbatch_options(spec: Mapping[str, Any], job_name: str, output: str, partition: str = "",
                   time_limit: Any = "", signal_seconds: Any = 300, gpus: bool = True,
                   nodelist: Sequence[str] = (), requeue: bool = True,
                   extra: Sequence[str] = ()) -> List[str]:
    """The ``#SBATCH`` options of the job ``spec`` (each without the ``#SBATCH`` prefix).

    ``spec``: the job spec (normalized or not) with ``nodes``: ``--nodes`` and
    ``--ntasks-per-node`` (one task per rank: gpus_per_node of them) come from it, so the
    allocation is the world size that validate_job judged. ``gpus``: ask for
    ``--gpus-per-node`` (false on the CPU profile: no Gres). ``output``: the log path, with
    ``%j`` for the job id. ``signal_seconds``: ``--signal=TERM@N``, no ``B:``: Slurm then sends
    SIGTERM to the job's steps, i.e. to every rank that srun started (with ``B:`` only the
    batch shell would get it, and the ranks would be killed without a save at the limit);
    0 leaves it out. Raises JobError naming the variable to change.
    """
    job = normalize(spec)
    shape = derive(job, strict=True)
    name = str(job_name or "")
    _check_name("job name", name, "megatron_job_name")
    _check_name("partition", str(partition or ""), "megatron_launch_slurm_partition")
    bad = _hops.refusal("sbatch_option", output)
    if bad is not None:
        raise JobError("slurm output %r holds %s, which %s cannot carry (%s); set megatron_launch_slurm_log_file, "
                       "or megatron_job_workdir that its default is built from, without it"
                       % (output, _hops.printable(bad), _hops.HOPS["sbatch_option"].where,
                          _hops.HOPS["sbatch_option"].allowed))
    if "%j" not in str(output):
        raise JobError("slurm output %r has no %%j: two jobs (or a requeued one) would share one log; keep %%j in "
                       "megatron_launch_slurm_log_file" % output)
    try:
        warning = int(signal_seconds)
    except (TypeError, ValueError):
        raise JobError("megatron_launch_slurm_signal_seconds %r: expected a number of seconds" % (signal_seconds,))
    if warning < 0 or warning > SIGNAL_MAX_SECONDS:
        raise JobError("megatron_launch_slurm_signal_seconds %d: expected 0..%d (Slurm keeps it in 16 bits)"
                       % (warning, SIGNAL_MAX_SECONDS))
    limit = time_limit_seconds(time_limit)
    if limit is not None and warning and warning + SIGNAL_RESOLUTION > limit:
        raise JobError(
            "megatron_launch_slurm_signal_seconds %d with a time limit of %s (%d s): the ranks would get SIGTERM "
            "before they could run (Slurm may send it up to %d s early); lower the warning or raise "
            "megatron_launch_slurm_time_limit" % (warning, time_limit, limit, SIGNAL_RESOLUTION))
    options = ["--job-name=%s" % name]
    if partition:
        options.append("--partition=%s" % partition)
    options += ["--nodes=%d" % shape["nodes"], "--ntasks-per-node=%d" % shape["gpus_per_node"]]
    if gpus:
        options.append("--gpus-per-node=%d" % shape["gpus_per_node"])
    if nodelist:
        hosts = [str(host) for host in nodelist]
        for host in hosts:
            _check_name("node name", host, "the inventory (Slurm's NodeName is the node's hostname)")
        if len(hosts) != shape["nodes"]:
            raise JobError("slurm nodelist %s names %d node(s), the job spec has %d: pin every node of the job or "
                           "none" % (",".join(hosts), len(hosts), shape["nodes"]))
        options.append("--nodelist=%s" % ",".join(hosts))
    # One training job per node: it takes every core and all of the memory (CR_Core_Memory
    # would otherwise give it one core per task and DefMemPerNode).
    options += ["--exclusive", "--mem=0"]
    if limit is not None:
        options.append("--time=%s" % str(time_limit).strip())
    options.append("--requeue" if requeue else "--no-requeue")
    if warning:
        options.append("--signal=TERM@%d" % warning)
    options += ["--output=%s" % output, "--open-mode=append"]
    for option in extra:
        text = str(option)
        if not text.startswith("--") or _hops.refusal("script", text) is not None:
            raise JobError("megatron_launch_slurm_extra_options item %r: expected one long sbatch option such as "
                           "--account=ml" % text)
        options.append(text)
    return options


def srun_args(spec: Mapping[str, Any]) -> List[str]:
    """srun's options for the ranks: one task per rank, block placement (ranks 0..G-1 on the first
    node, where MASTER_ADDR points), and every task killed when one fails (a rank that died
    would otherwise leave the others blocked in their next collective)."""
    shape = derive(normalize(spec), strict=True)
    return ["--nodes=%d" % shape["nodes"], "--ntasks-per-node=%d" % shape["gpus_per_node"],
            "--ntasks=%d" % shape["world_size"], "--distribution=block", "--kill-on-bad-exit=1",
            "--export=ALL"]


def rank_command(python: str, script: str) -> List[str]:
    """What srun starts on every task: the wrapper that sets the rank variables and execs
    ``<python> -u <script>`` (the job's arguments follow). ``-u``: unbuffered, as DeepSpeed's
    launch.py starts ranks, so the log is read live and the rank pattern of status and stop
    matches the ranks under both backends (and never srun, see RANK_WRAPPER)."""
    if not python or not script:
        raise JobError("rank_command: the venv's python and the script are both required (got %r, %r)"
                       % (python, script))
    return ["/bin/bash", "-c", RANK_WRAPPER, "megatron-rank", str(python), str(script)]


def launch_summary(spec: Mapping[str, Any]) -> Dict[str, int]:
    """nodes, ranks per node and world size of the allocation (what the fit check compares)."""
    shape = derive(normalize(spec), strict=True)
    return {"nodes": shape["nodes"], "ranks_per_node": shape["gpus_per_node"], "world_size": shape["world_size"]}
