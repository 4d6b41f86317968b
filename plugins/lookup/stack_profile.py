# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: stack_profile
author: megatron_ds.cluster developers (@megatron-ds)
version_added: 1.0.0
short_description: Read a stack profile from the collection's compatibility matrix
description:
  - Returns the named stack profile (driver, CUDA, cuDNN, NCCL, Python, torch, DeepSpeed,
    Megatron-DeepSpeed pins) from the one table that roles, preflight and job validation share.
  - An empty name is the collection's default profile. Without a name, every profile of the
    table, so a list of the known profiles is never written out by hand.
options:
  _terms:
    description:
      - Profile names, for example C(cu117), C(cu121), C(cu130) or C(cpu).
      - None at all returns every profile of the table, sorted by name.
    required: false
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Show the CUDA version of the cu117 profile
  ansible.builtin.debug:
    msg: "{{ lookup('megatron_ds.cluster.stack_profile', 'cu117').cuda.version }}"

- name: Name every profile the collection knows
  ansible.builtin.debug:
    msg: "{{ query('megatron_ds.cluster.stack_profile') | map(attribute='name') | join(', ') }}"
"""

RETURN = r"""
_raw:
  description: One dictionary per profile name, with the profile's name under C(name).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        result = []
        for term in terms or _stack_profiles.names():
            try:
                result.append(_stack_profiles.get(term))
            except _stack_profiles.UnknownProfileError as exc:
                raise AnsibleLookupError(str(exc.args[0])) from exc
        return result
