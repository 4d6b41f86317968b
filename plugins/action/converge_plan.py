# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side converge plan for one host: which provisioning roles it needs, and why.

A thin adapter: the host's inputs per role come from plugin_utils/_converge_inputs, the
decisions from module_utils/_converge/plan.py, the health from the preflight's own checks
(module_utils/_preflight/gate.py) run on this node's facts. It touches no host. Documentation
lives in plugins/modules/converge_plan.py.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.megatron_ds.cluster.plugins.module_utils._converge import plan as _plan
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import gate as _preflight
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles
from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _converge_inputs

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = {
    "facts": {"type": "raw"},
    "mode": {"type": "str", "default": _plan.VERIFY, "choices": list(_plan.MODES)},
    "roles": {"type": "list", "elements": "str", "default": [spec.name for spec in _plan.ROLES]},
    "profile": {"type": "str"},
    "checks": {"type": "dict", "default": {}},
    "torch_spec": {"type": "str", "default": ""},
    "deepspeed_spec": {"type": "str", "default": ""},
}


def node_facts(raw: Any) -> Mapping[str, Any]:
    """gpu_stack_facts out of a registered result (or the facts themselves); {} when there are none."""
    if not isinstance(raw, Mapping) or raw.get("failed") or raw.get("unreachable") or raw.get("skipped"):
        return {}
    facts = (raw.get("ansible_facts") or {}).get("gpu_stack_facts") if "ansible_facts" in raw else raw
    return facts if isinstance(facts, Mapping) else {}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False
    _requires_connection = False

    def run(self, tmp: Any = None, task_vars: Any = None) -> Dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        _validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        node = str(task_vars.get("inventory_hostname"))
        try:
            profile = _stack_profiles.get(args["profile"])
        except _stack_profiles.UnknownProfileError as exc:
            raise AnsibleActionFail("converge_plan: node %s: %s" % (node, exc.args[0]))
        unknown = [name for name in args["roles"] if name not in _plan.BY_NAME]
        if unknown:
            raise AnsibleActionFail(
                "converge_plan: node %s: roles %s are not provisioning roles; expected some of %s"
                % (node, ", ".join(unknown), ", ".join(_plan.BY_NAME)))

        facts = node_facts(args["facts"])
        gathered = bool(facts)
        stamps = facts.get("converge") if isinstance(facts.get("converge"), Mapping) else {}
        rows: List[Mapping[str, Any]] = []
        if gathered:
            rows = [row.as_dict() for row in _preflight.run_checks({node: facts}, profile, args["checks"])]
        computed = _converge_inputs.host_inputs(args["roles"], task_vars, self._templar, self._loader.load_from_file,
                                                profile)
        inputs = dict((role, {"digest": digest, "inputs": role_inputs}) for role, (digest, role_inputs) in computed.items())
        plan = _plan.plan_node(args["roles"], dict((r, v["inputs"]) for r, v in inputs.items()),
                               stamps, rows, args["mode"])
        if not gathered and args["mode"] != _plan.FULL:
            for decision in plan.values():
                decision.run = True
                decision.reasons.insert(0, "the facts call gave no answer")
        repair = _plan.venv_repairs(facts, args["torch_spec"], args["deepspeed_spec"]) if gathered else []
        lines = _plan.plan_lines(node, plan)
        result.update(
            changed=False,
            plan=dict((role, decision.as_dict()) for role, decision in plan.items()),
            run=[role for role, decision in plan.items() if decision.run],
            # Stamps to remove before their roles run: a run that stops half-way must not leave
            # a stamp that says the node is as the inputs ask.
            invalidate=[role for role, decision in plan.items() if decision.run and role in stamps],
            inputs=inputs,
            repair={"python_env": repair},
            lines=lines,
            msg="; ".join(line for line in lines if " runs: " in line) or "%s: every role converged" % node,
        )
        return result
