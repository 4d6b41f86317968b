# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The converge_stamp action (plugins/action/converge_stamp.py): the digest comes from this run's
plan, or is computed as the plan computes it; and converge_plan's documentation against the action's
argument spec (the module file is documentation only)."""
from __future__ import annotations

from typing import Any, Dict
from unittest.mock import MagicMock

from ansible_collections.megatron_ds.cluster.plugins.action import converge_plan as plan_action
from ansible_collections.megatron_ds.cluster.plugins.action.converge_stamp import ActionModule
from ansible_collections.megatron_ds.cluster.plugins.modules import converge_plan as plan_doc
from ansible_collections.megatron_ds.cluster.tests.support.action_harness import make_action
from ansible_collections.megatron_ds.cluster.tests.unit import module_runner as runner


def test_converge_plan_documents_the_actions_argument_spec():
    plan = type("plan", (), {"ARGUMENT_SPEC": plan_action.ARGUMENT_SPEC, "DOCUMENTATION": plan_doc.DOCUMENTATION,
                             "EXAMPLES": plan_doc.EXAMPLES, "RETURN": plan_doc.RETURN})
    runner.assert_options_match_argument_spec(plan)


def _action(args: Dict[str, Any]) -> Any:
    action = make_action(ActionModule, args)
    action._execute_module = MagicMock(side_effect=lambda **kw: {"changed": True, "module_args": kw["module_args"]})
    return action


def test_the_action_takes_the_digest_from_this_runs_plan():
    planned = {"inputs": {"nccl": {"digest": "abc", "inputs": {"nccl_version": "x"}}}}
    result = _action({"role": "nccl", "files": ["/etc/megatron/nccl.env"]}).run(
        task_vars={"__megatron_converge": planned, "inventory_hostname": "node1"})
    sent = result["module_args"]
    assert sent["digest"] == "abc" and sent["inputs"] == {"nccl_version": "x"} and sent["files"] == ["/etc/megatron/nccl.env"]


def test_the_action_computes_the_digest_the_plan_would_without_a_plan():
    task_vars = {"inventory_hostname": "node1", "groups": {"megatron_nodes": ["node1"]}, "hostvars": {"node1": {}},
                 "megatron_stack_profile": "cpu"}
    planned = make_action(plan_action.ActionModule, {"facts": None, "roles": ["nccl"], "profile": "cpu"}).run(task_vars=task_vars)
    result = _action({"role": "nccl"}).run(task_vars=task_vars)
    assert result["module_args"]["digest"] == planned["inputs"]["nccl"]["digest"]
