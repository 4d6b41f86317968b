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

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

from ansible.errors import AnsibleError

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec

NODES_GROUP = "megatron_nodes"
HEAD_GROUP = "megatron_head"
ADDRESS_VAR = _job_schema.PREFIX + "node_address"
# The role's defaults take these from outside it (schema INHERITED): the inventory-wide name wins
# over the schema default unless the job variable itself is set.
INHERITED_FROM = {"stack_profile": "megatron_stack_profile", "nccl_env": "nccl_env"}

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
