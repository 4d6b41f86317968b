# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one shape the job rules judge: a spec read once, with everything that decides how it is judged.

A job reaches the rules in one of two forms, a normalized spec (spec.normalize) or a train.sh read
by script.parse_train_script, whose spec has the same keys with Megatron-DeepSpeed's own defaults
where the script passes no flag. ``read`` turns either into a ``JobInput``: the spec, the keys set
explicitly, the Megatron-DeepSpeed era, the argument list that will run (args.arguments for a
spec, the script's own words for a train.sh), those arguments by flag, the cluster's shape and
the checkpoint to resume. Values the user typed into other files (the cluster numbers an action
was given, a resume layout) are turned into integers here, once; the rules read typed values.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

from typing import Any, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .._mds.args import era_for_deepspeed, split_args
from .._stack import profiles as _stack_profiles
from .args import arguments, flatten
from .spec import int_or_none

Flags = Dict[str, List[Tuple[str, ...]]]


class JobInput(NamedTuple):
    """A job as the rules judge it. ``gpus`` is ranks per node (the spec's, else the node's),
    ``node_gpus`` the GPUs a node has (the cluster's, else the hostfile's smallest slot count, else
    ``gpus``); ``findings`` are what reading a train.sh found, reported first."""

    spec: Mapping[str, Any]
    explicit: FrozenSet[str]
    from_script: bool
    era: str
    deepspeed_version: Optional[str]
    args: List[str]
    dropped: List[Tuple[str, str]]
    flags: Flags
    extra: List[str]
    ds: Optional[Dict[str, Any]]
    nodes: Optional[int]
    gpus: Optional[int]
    node_gpus: Optional[int]
    hosts: Optional[Mapping[str, int]]
    gpu_memory_mib: Optional[int]
    resume: Optional[Dict[str, Any]]
    script: Optional[Mapping[str, Any]]
    findings: List[Dict[str, str]]
    tp: int
    pp: int
    # The planner's GPU name (the cluster's gpu_model: the inventory's megatron_gpu_model or the
    # nodes' facts); None when unknown. Judged against the stack profile's architectures.
    gpu_model: Optional[str] = None


def era_of(spec: Mapping[str, Any], deepspeed_version: Optional[str] = None) -> str:
    """The Megatron-DeepSpeed era that judges the job: the one the given DeepSpeed version
    imports, else the one the spec's stack profile installs (the same by construction for
    the profile's own pin), else HEAD."""
    if deepspeed_version:
        return era_for_deepspeed(deepspeed_version)
    try:
        return _stack_profiles.mds_era(spec.get("stack_profile"))
    except _stack_profiles.UnknownProfileError:
        return era_for_deepspeed(None)


def judged_arguments(spec: Mapping[str, Any], deepspeed_version: Optional[str] = None) -> Tuple[List[str], List[Tuple[str, str]]]:
    """The pretrain_gpt.py arguments the rules judge for a spec, and the settings left
    out: args.arguments, the builder train.sh renders, for the era of ``era_of``."""
    groups, dropped = arguments(spec, era=era_of(spec, deepspeed_version))
    return flatten(groups), dropped


def flag_values(args: Sequence[str], era: str) -> Flags:
    """Each flag of an argument list with the values of every occurrence, in order."""
    out: Flags = {}
    for parsed in split_args(args, era):
        out.setdefault(parsed.flag, []).append(parsed.values)
    return out


def last_value(flags: Mapping[str, List[Tuple[str, ...]]], flag: str) -> Optional[str]:
    """The value of a flag's last occurrence (argparse keeps the last), None when absent or bare."""
    values = flags.get(flag) or []
    return values[-1][0] if values and values[-1] else None


def _resume(resume: Optional[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """{tp, pp, no_pipeline_parallel} of the checkpoint to load, the layout as integers."""
    if not resume:
        return None
    return {
        "tp": int_or_none(resume.get("tp") or resume.get("tensor_parallel")),
        "pp": int_or_none(resume.get("pp") or resume.get("pipeline_parallel")),
        "no_pipeline_parallel": resume.get("no_pipeline_parallel"),
    }


def _shape(spec: Mapping[str, Any], cluster: Mapping[str, Any]) -> Tuple[Optional[int], Optional[int], Optional[int]]:
    """(nodes, ranks per node, GPUs per node) from the cluster given, its hostfile and the spec."""
    hosts = cluster.get("hosts")
    nodes = int_or_none(cluster.get("nodes"))
    if nodes is None and hosts:
        nodes = len(hosts)
    node_gpus = int_or_none(cluster.get("gpus_per_node"))
    if node_gpus is None and hosts:
        node_gpus = min(hosts.values())
    job_gpus = spec.get("gpus_per_node")
    if node_gpus is None:
        node_gpus = job_gpus
    return nodes, (job_gpus if job_gpus is not None else node_gpus), node_gpus


def read(spec: Mapping[str, Any], ds_config: Optional[Mapping[str, Any]] = None,
         cluster: Optional[Mapping[str, Any]] = None, resume: Optional[Mapping[str, Any]] = None,
         deepspeed_version: Optional[str] = None, script: Optional[Mapping[str, Any]] = None) -> JobInput:
    """The job as the rules judge it; the arguments are those of rules.validate."""
    cluster = cluster or {}
    if script is not None:
        era = script.get("era", era_for_deepspeed(deepspeed_version))
        args, dropped = list(script.get("args", [])), []  # type: Tuple[List[str], List[Tuple[str, str]]]
        explicit = frozenset(script.get("explicit", []))
    else:
        era = era_of(spec, deepspeed_version)
        args, dropped = judged_arguments(spec, deepspeed_version)
        explicit = frozenset(spec)
    nodes, gpus, node_gpus = _shape(spec, cluster)
    return JobInput(
        spec=spec, explicit=explicit, from_script=script is not None, era=era,
        deepspeed_version=deepspeed_version, args=args, dropped=dropped, flags=flag_values(args, era),
        extra=list(spec.get("extra_args") or []), ds=dict(ds_config) if ds_config is not None else None,
        nodes=nodes, gpus=gpus, node_gpus=node_gpus, hosts=cluster.get("hosts"),
        gpu_memory_mib=int_or_none(cluster.get("gpu_memory_mib")), resume=_resume(resume), script=script,
        findings=list(script.get("findings", [])) if script else [],
        tp=spec.get("tensor_parallel") or 1, pp=spec.get("pipeline_parallel") or 1,
        gpu_model=cluster.get("gpu_model") or None,
    )
