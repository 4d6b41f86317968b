# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job as the inventory gives it, read once on the controller.

The ``job`` lookup (every role and playbook), and the validate_job and plan_job actions read the
job through these functions: the ``megatron_job_*`` variables templated (``spec_vars``), the
variables the job role inherits from outside it (``megatron_stack_profile``, ``nccl_env``), the
normalized spec (module_utils/_job/spec.py ``normalize``: defaults, coercion, ``auto`` resolved
with the profile), and the cluster's shape (``cluster``: nodes, head, rank 0, ssh addresses).
``template`` is the caller's templar, so a variable that names another is resolved as Ansible
would.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Tuple

from ansible.errors import AnsibleError
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles

NODES_GROUP = "megatron_nodes"
HEAD_GROUP = "megatron_head"
ADDRESS_VAR = _job_schema.PREFIX + "node_address"
# The role's defaults take these from outside it (schema INHERITED): the inventory-wide name wins
# over the schema default unless the job variable itself is set.
INHERITED_FROM = {"stack_profile": "megatron_stack_profile", "nccl_env": "nccl_env", "user": "cluster_ssh_user"}

Template = Callable[[Any], Any]


class JobInputError(ValueError):
    """A job variable that cannot be read; the message names it and what to do."""


def spec_vars(variables: Mapping[str, Any], template: Template, inherit: bool = True) -> Dict[str, Any]:
    """Every ``megatron_job_*`` variable visible to the caller, templated; with ``inherit``, also the
    ones the job role takes from outside it (validate_job resolves the profile itself, from its
    own ``stack_profile`` option first)."""
    out: Dict[str, Any] = {}
    for name in sorted(k for k in variables if str(k).startswith(_job_schema.PREFIX)):
        try:
            out[name] = template(variables[name])
        except AnsibleError as exc:
            raise JobInputError("Job spec variable %s cannot be templated: %s; fix its value in the inventory" % (name, exc)) from exc
    for key, outer in INHERITED_FROM.items() if inherit else ():
        if _job_schema.PREFIX + key not in out and outer in variables:
            value = template(variables[outer])
            if value not in (None, ""):
                out[_job_schema.PREFIX + key] = value
    return out


def _group(variables: Mapping[str, Any], name: str) -> List[str]:
    groups = variables.get("groups") or {}
    return list(groups.get(name) or [])


def cluster(variables: Mapping[str, Any], template: Template, nodes_group: str = NODES_GROUP,
            head_group: str = HEAD_GROUP, extra_groups: Iterable[str] = ()) -> Dict[str, Any]:
    """The cluster's shape: ``nodes`` (the training group, in order), ``head`` (first of the head
    group, else the first node: it runs the launcher), ``rank0`` (the first node: global rank 0
    binds the rendezvous port and writes ``latest``), ``addresses`` (host -> the name ssh and the
    hostfile use: its megatron_job_node_address, else its inventory name; for the nodes and the
    members of ``extra_groups``) and ``hosts`` (those names in node order)."""
    nodes = _group(variables, nodes_group)
    head = (_group(variables, head_group) + nodes)[:1]
    members = list(nodes)
    for group in extra_groups:
        members += [h for h in _group(variables, group) if h not in members]
    hostvars = variables.get("hostvars") or {}
    addresses: Dict[str, str] = {}
    for host in members:
        given = None
        try:
            given = hostvars[host].get(ADDRESS_VAR)
        except (KeyError, AttributeError):
            given = None
        given = template(given) if given is not None else None
        addresses[host] = str(given) if given not in (None, "") else host
    return {
        "nodes": nodes,
        "head": head[0] if head else "",
        "rank0": nodes[0] if nodes else "",
        "addresses": addresses,
        "hosts": [addresses[h] for h in nodes],
    }


PARTS = ("spec", "cluster", "vars")


def job(variables: Mapping[str, Any], template: Template, nodes_group: str = NODES_GROUP,
        head_group: str = HEAD_GROUP, extra_groups: Iterable[str] = (),
        given: Optional[Mapping[str, Any]] = None, parts: Iterable[str] = PARTS) -> Dict[str, Any]:
    """``spec`` (the normalized spec, with ``nodes`` when the group has members), ``cluster``
    (cluster()) and ``vars`` (the variables the spec is read from), each only when in ``parts``,
    so a caller that needs the shape alone does not judge the spec. ``given`` replaces the
    inventory's variables."""
    parts = tuple(parts)
    unknown = [p for p in parts if p not in PARTS]
    if unknown:
        raise JobInputError("unknown part %s; ask for %s" % (", ".join(map(repr, unknown)), ", ".join(PARTS)))
    out: Dict[str, Any] = {}
    shape = cluster(variables, template, nodes_group, head_group, extra_groups)
    if "cluster" in parts:
        out["cluster"] = shape
    if "spec" in parts or "vars" in parts:
        raw = dict(given) if given is not None else spec_vars(variables, template)
        if "vars" in parts:
            out["vars"] = raw
        if "spec" in parts:
            try:
                out["spec"] = _job_spec.normalize(raw, nodes=len(shape["nodes"]) or None)
            except _job_schema.JobError as exc:
                raise JobInputError("job spec invalid: %s" % exc) from exc
    return out


# --------------------------------------------------------------------------------------------
# The inputs validate_job and plan_job share (each action is a thin adapter around these).
# --------------------------------------------------------------------------------------------
def spec_from_vars(given: Optional[Mapping[str, Any]], variables: Mapping[str, Any], template: Template,
                   profile_name: Optional[str]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(the job variables, the normalized spec) from an action's ``spec=`` argument or the task's
    ``megatron_job_*`` variables. ``profile_name`` (the action's ``stack_profile`` option, else
    the inventory's ``megatron_stack_profile``) applies unless the spec names its own profile."""
    raw = dict(given) if given is not None else spec_vars(variables, template, inherit=False)
    if profile_name and not any(k in raw for k in ("stack_profile", _job_schema.PREFIX + "stack_profile")):
        raw = dict(raw, stack_profile=profile_name)
    try:
        return raw, _job_spec.normalize(raw)
    except _job_schema.JobError as exc:
        raise JobInputError("Job spec invalid: %s" % exc) from exc


def template_var(variables: Mapping[str, Any], template: Template, name: str) -> Any:
    """A task variable, templated; None when it is not set."""
    return template(variables[name]) if name in variables else None


def profile_deepspeed(name: Optional[str]) -> Optional[str]:
    """The DeepSpeed version the stack profile pins."""
    try:
        return _stack_profiles.deepspeed_pin(name)
    except _stack_profiles.UnknownProfileError as exc:
        raise JobInputError(str(exc.args[0])) from exc


def resolve_path(path: str, option: str, path_dwim: Callable[[str], str]) -> str:
    """A controller path: absolute, relative to the current directory, or relative to the
    playbook directory (``path_dwim``), in that order."""
    candidates = [path]
    if not os.path.isabs(path):
        candidates.append(path_dwim(path))
    for candidate in candidates:
        if os.path.isfile(candidate):
            return os.path.abspath(candidate)
    raise JobInputError("%s: %s not found on the controller (looked in %s); give an existing path"
                        % (option, path, ", ".join(os.path.abspath(c) for c in candidates)))


def read_text(path: str, option: str) -> str:
    """A controller file's text, or an error that names the option."""
    try:
        with open(path, "rb") as handle:
            return to_text(handle.read(), errors="surrogate_or_strict")
    except (IOError, OSError, UnicodeError) as exc:
        raise JobInputError("%s: cannot read %s: %s" % (option, path, exc)) from exc


def _node_gpus(variables: Mapping[str, Any], nodes_group: str) -> List[Tuple[str, Mapping[str, Any]]]:
    """(host, the gpus part of its gpu_stack_facts) for each node whose facts are known, gathered
    in this run (a registered fact) or cached by the last preflight (ansible_facts)."""
    hostvars = variables.get("hostvars") or {}
    found = []
    for host in _group(variables, nodes_group):
        try:
            facts = hostvars[host].get("gpu_stack_facts") or (hostvars[host].get("ansible_facts") or {}).get("gpu_stack_facts")
            gpus = (facts or {}).get("gpus") or {}
        except (KeyError, AttributeError, TypeError):
            continue
        if isinstance(gpus, Mapping):
            found.append((host, gpus))
    return found


def gpu_facts(variables: Mapping[str, Any], nodes_group: str = NODES_GROUP) -> Tuple[Optional[int], Optional[int]]:
    """(smallest GPU count, smallest GPU memory in MiB) over the nodes whose gpu_stack_facts are
    known (gathered in this run or cached); (None, None) otherwise."""
    counts: List[int] = []
    memories: List[int] = []
    for _host, gpus in _node_gpus(variables, nodes_group):
        if isinstance(gpus.get("count"), int) and gpus["count"] > 0:
            counts.append(gpus["count"])
        if isinstance(gpus.get("memory_mib"), int):
            memories.append(gpus["memory_mib"])
    return (min(counts) if counts else None), (min(memories) if memories else None)


def gpu_model(variables: Mapping[str, Any], template: Template,
              nodes_group: str = NODES_GROUP) -> Tuple[Optional[str], str]:
    """(the planner's GPU name, where it came from): the inventory's ``megatron_gpu_model``, else
    the GPU name in the nodes' gpu_stack_facts (gathered in this run or cached by the last
    preflight) when every node reports the same one; (None, why not) otherwise. An unknown name
    raises JobInputError naming the known ones."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import plan as _job_plan

    given = template_var(variables, template, _job_plan.GPU_MODEL_VAR)
    if given not in (None, ""):
        key = _job_plan.gpu_key(str(given))
        if key is None:
            raise JobInputError("%s is %r; expected one of %s (the planner's GPUs)" % (
                _job_plan.GPU_MODEL_VAR, given, ", ".join(sorted(_job_plan.GPUS))))
        return key, "inventory %s" % _job_plan.GPU_MODEL_VAR
    seen = {}
    for host, gpus in _node_gpus(variables, nodes_group):
        if gpus.get("model"):
            seen[host] = (gpus["model"], gpus.get("memory_mib"))
    models = sorted(set(_job_plan.gpu_key(name, memory) or name for name, memory in seen.values()))
    if len(models) == 1 and models[0] in _job_plan.GPUS:
        return models[0], "gpu_stack_facts of %d node(s) (%s)" % (len(seen), sorted(set(n for n, _m in seen.values()))[0])
    if len(models) > 1:
        return None, "the nodes' gpu_stack_facts name different GPUs (%s)" % ", ".join(models)
    if models:
        return None, "the nodes' gpu_stack_facts name %s, which the planner does not know" % models[0]
    return None, "neither %s in the inventory nor gpu_stack_facts of the nodes" % _job_plan.GPU_MODEL_VAR


def node_count(given: Optional[int], hosts: Any, variables: Mapping[str, Any],
               script: Optional[Mapping[str, Any]] = None, nodes_group: str = NODES_GROUP) -> Tuple[Optional[int], str]:
    """(the number of nodes, where it came from): the action's ``nodes=``, a hostfile's hosts, the
    inventory group, a train.sh's ``--num_nodes``, in that order."""
    if given is not None:
        return given, "nodes argument"
    if hosts:
        return len(hosts), "hostfile"
    group = _group(variables, nodes_group)
    if group:
        return len(group), "inventory group %s" % nodes_group
    launcher = (script or {}).get("launcher") or {}
    if launcher.get("num_nodes"):
        return launcher["num_nodes"], "the script's --num_nodes"
    return None, "unknown"
