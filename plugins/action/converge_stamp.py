# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fills the converge stamp's input digests on the controller, then writes it with the module.

The digests come from this run's converge plan (playbooks/provision.yml registers it as
``__megatron_converge`` before any role), so the stamp records exactly what the next plan will
compare. A role run outside provision.yml (a molecule converge, a playbook of one's own) has no
plan: the digests are computed here the same way (plugin_utils/_converge_inputs).
"""
from __future__ import annotations

from typing import Any, Dict

from ansible.plugins.action import ActionBase

from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles
from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _converge_inputs

PLAN_VAR = "__megatron_converge"


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Any = None, task_vars: Any = None) -> Dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        role = str(args.get("role") or "")
        planned = ((task_vars.get(PLAN_VAR) or {}).get("inputs") or {}).get(role) if PLAN_VAR in task_vars else None
        if isinstance(planned, dict) and planned.get("digest"):
            args["digest"], args["inputs"] = planned["digest"], dict(planned.get("inputs") or {})
        else:
            profile_name = task_vars.get("megatron_stack_profile")
            profile = _stack_profiles.get(self._templar.template(profile_name) if profile_name else None)
            args["digest"], args["inputs"] = _converge_inputs.role_inputs(
                role, task_vars, self._templar, self._loader.load_from_file, profile)
        result.update(self._execute_module(module_name="megatron_ds.cluster.converge_stamp", module_args=args,
                                           task_vars=task_vars))
        return result
