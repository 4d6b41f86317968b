# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: job
author: megatron_ds.cluster developers (@megatron-ds)
version_added: 1.0.0
short_description: The job spec and the cluster's shape, read once from the inventory
description:
  - Reads every C(megatron_job_*) variable visible to the task (plus C(megatron_stack_profile) and
    C(nccl_env), which the job role inherits), and returns the normalized job spec the job files,
    validation and the planner use, with the stack profile resolved and every default applied.
  - Also returns the cluster's shape from the inventory groups, so no role or playbook computes
    the head node or the nodes' ssh names itself.
  - Fails, naming the variable, when the spec is invalid.
options:
  _terms:
    description:
      - Which parts to return, each as its own element, among C(spec), C(cluster) and C(vars); none gives one
        dictionary with all three. Asking for C(cluster) alone does not judge the spec.
    required: false
    type: list
    elements: str
  nodes_group:
    description: Inventory group of the training nodes.
    type: str
    default: megatron_nodes
  head_group:
    description: Inventory group whose first host runs the launcher; the first node when it is empty.
    type: str
    default: megatron_head
  extra_groups:
    description: Groups whose members get an entry in C(cluster.addresses) too (for example spare nodes).
    type: list
    elements: str
    default: []
"""

EXAMPLES = r"""
- name: Show where the job logs
  ansible.builtin.debug:
    msg: "{{ lookup('megatron_ds.cluster.job').spec.log_file }}"

- name: Show the head node and the nodes' ssh names
  ansible.builtin.debug:
    msg: "{{ lookup('megatron_ds.cluster.job', 'cluster').head }}: {{ lookup('megatron_ds.cluster.job', 'cluster').hosts }}"
"""

RETURN = r"""
_raw:
  description: One dictionary with the three parts below, or with terms, each part asked for.
  type: list
  elements: dict
  contains:
    spec:
      description:
        - The normalized job spec, keys without the C(megatron_job_) prefix (C(tensor_parallel), C(log_file), ...),
          plus C(nodes), the size of O(nodes_group), when it has members.
      type: dict
    cluster:
      description: C(nodes) (list), C(head), C(rank0) (the first node), C(addresses) (host to ssh name) and C(hosts) (ssh names in node order).
      type: dict
    vars:
      description: The C(megatron_job_*) variables it was read from, templated.
      type: dict
"""

import copy

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _job_inputs

# Answers already computed in this process, by their inputs. A role default that names the lookup
# is templated again at every reference (status.yml over 8 hosts called it 131 times), and each
# time templated every megatron_job_* variable and normalized the spec anew. The key holds the
# raw values the answer is built from, so an answer is reused only for the same inputs; inputs
# that are themselves templates (they may read anything) are not cached.
_CACHE = {}
_CACHE_MAX = 64


def _is_template(value):
    if isinstance(value, str):
        return "{{" in value or "{%" in value
    if isinstance(value, dict):
        return any(_is_template(k) or _is_template(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_is_template(v) for v in value)
    return False


def _cache_key(variables, nodes_group, head_group, extra_groups, parts):
    """The inputs of an answer, or None when one of them is a template."""
    names = sorted(k for k in variables if str(k).startswith("megatron_job_"))
    names += sorted(v for v in _job_inputs.INHERITED_FROM.values() if v in variables)
    raw = [(name, variables[name]) for name in names]
    groups = variables.get("groups") or {}
    members = [(g, tuple(groups.get(g) or ())) for g in [nodes_group, head_group] + list(extra_groups or [])]
    hostvars = variables.get("hostvars") or {}
    addresses = []
    for host in {h for _g, hosts in members for h in hosts}:
        try:
            addresses.append((host, hostvars[host].get(_job_inputs.ADDRESS_VAR)))
        except (KeyError, AttributeError):
            addresses.append((host, None))
    if _is_template(raw) or _is_template(addresses):
        return None
    try:
        return repr((tuple(parts), raw, members, sorted(addresses, key=repr)))
    except Exception:  # a value without a stable repr: compute instead
        return None


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        parts = list(terms or _job_inputs.PARTS)
        variables = variables or {}
        groups = (self.get_option("nodes_group"), self.get_option("head_group"), self.get_option("extra_groups"))
        key = _cache_key(variables, groups[0], groups[1], groups[2], parts)
        found = _CACHE.get(key) if key is not None else None
        if found is None:
            try:
                found = _job_inputs.job(variables, self._templar.template, *groups, parts=parts)
            except _job_inputs.JobInputError as exc:
                raise AnsibleLookupError("megatron_ds.cluster.job: %s" % exc) from exc
            if key is not None:
                if len(_CACHE) >= _CACHE_MAX:
                    _CACHE.clear()
                _CACHE[key] = found
        # A copy: a caller that changes its answer must not change the next caller's.
        found = copy.deepcopy(found)
        return [found[part] for part in parts] if terms else [found]
