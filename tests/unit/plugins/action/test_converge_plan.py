# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the converge_plan action (plugins/action/converge_plan.py) and the role inputs it
digests (plugins/plugin_utils/_converge_inputs.py), with a real DataLoader and Templar."""
from __future__ import annotations

import copy
from typing import Any, Dict, List, Optional

import pytest
from ansible.errors import AnsibleActionFail
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.megatron_ds.cluster.plugins.action.converge_plan import ActionModule, node_facts
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles
from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _converge_inputs
from ansible_collections.megatron_ds.cluster.tests.support.action_harness import make_action

NODES = ["node1", "node2"]
ROLES = ["os_base", "nccl"]


def inventory(**overrides: Any) -> Dict[str, Any]:
    task_vars: Dict[str, Any] = {"inventory_hostname": "node1", "groups": {"all": NODES, "megatron_nodes": NODES},
                                 "hostvars": {node: {"ansible_host": node} for node in NODES},
                                 "megatron_stack_profile": "cpu"}
    task_vars.update(overrides)
    return task_vars


def run_action(task_vars: Dict[str, Any], facts: Any = None, roles: Optional[List[str]] = None,
               mode: str = "verify") -> Dict[str, Any]:
    args: Dict[str, Any] = {"facts": facts, "mode": mode, "roles": roles or ROLES, "profile": "cpu",
                            "checks": {"clock": "advisory", "memlock": "advisory"}}
    return make_action(ActionModule, args).run(task_vars=task_vars)


def stamps_from(result: Dict[str, Any], **problems: List[str]) -> Dict[str, Any]:
    return {role: {"digest": value["digest"], "inputs": value["inputs"], "problems": problems.get(role, [])}
            for role, value in result["inputs"].items()}


def registered(facts: Dict[str, Any]) -> Dict[str, Any]:
    return {"changed": False, "ansible_facts": {"gpu_stack_facts": facts}}


def converged(task_vars: Dict[str, Any]) -> Dict[str, Any]:
    """Facts of a node that the roles finished on with ``task_vars``: their stamps, nothing broken."""
    first = run_action(task_vars, registered({"hostname": "node1", "clock": {"synchronized": True, "offset_ms": 0.1}}))
    return {"hostname": "node1", "clock": {"synchronized": True, "offset_ms": 0.1}, "converge": stamps_from(first)}


@pytest.mark.parametrize("raw, expected", [
    (None, {}),
    ({"skipped": True}, {}),
    ({"failed": True, "msg": "boom"}, {}),
    ({"unreachable": True}, {}),
    ({"ansible_facts": {"gpu_stack_facts": {"clock": {}}}}, {"clock": {}}),
    ({"clock": {}}, {"clock": {}}),
])
def test_node_facts_takes_the_facts_out_of_a_registered_result(raw, expected):
    assert node_facts(raw) == expected


def test_without_facts_every_role_runs_and_says_why():
    result = run_action(inventory(), {"skipped": True})
    assert result["run"] == ROLES and result["invalidate"] == []
    assert result["plan"]["os_base"]["reasons"][0] == "the facts call gave no answer"
    assert result["changed"] is False


def test_a_converged_node_runs_nothing():
    task_vars = inventory()
    result = run_action(task_vars, registered(converged(task_vars)))
    assert result["run"] == [] and result["msg"] == "node1: every role converged"
    assert result["repair"] == {"python_env": []}


def test_a_changed_variable_runs_only_its_role_and_names_it():
    facts = converged(inventory())
    result = run_action(inventory(os_base_extra_packages=["jq"]), registered(facts))
    assert result["run"] == ["os_base"] and result["invalidate"] == ["os_base"]
    assert result["plan"]["os_base"]["reasons"] == ["inputs changed: os_base_extra_packages"]


def test_a_variable_that_names_another_is_compared_rendered():
    # Inventory text is trusted as a template, as Ansible's inventory loader marks it.
    named = trust_as_template("{{ site_packages }}")
    facts = converged(inventory(site_packages=["jq"], os_base_extra_packages=named))
    same = run_action(inventory(site_packages=["jq"], os_base_extra_packages=named), registered(facts))
    other = run_action(inventory(site_packages=["gdb"], os_base_extra_packages=named), registered(facts))
    assert same["run"] == [] and other["run"] == ["os_base"]


def test_a_new_cluster_member_reruns_the_roles_that_read_the_cluster():
    facts = converged(inventory())
    bigger = inventory(groups={"all": NODES + ["node3"], "megatron_nodes": NODES + ["node3"]})
    bigger["hostvars"]["node3"] = {"ansible_host": "node3"}
    result = run_action(bigger, registered(facts))
    assert result["run"] == ["os_base"]
    assert result["plan"]["os_base"]["reasons"] == ["inputs changed: (cluster members)"]


def test_a_stamp_problem_and_a_failing_check_run_the_role():
    facts = converged(inventory())
    facts["converge"]["nccl"]["problems"] = ["/etc/megatron/nccl.env is gone"]
    facts["clock"] = {"synchronized": False, "offset_ms": 900.0}
    task_vars = inventory()
    args_checks = {"clock": "required"}
    action = make_action(ActionModule, {"facts": registered(facts), "roles": ROLES, "profile": "cpu", "checks": args_checks})
    result = action.run(task_vars=task_vars)
    assert result["run"] == ["os_base", "nccl"]
    assert result["plan"]["os_base"]["reasons"] == ["preflight clock.sync fails"]
    assert result["plan"]["nccl"]["reasons"] == ["/etc/megatron/nccl.env is gone"]


def test_a_damaged_distribution_runs_python_env_with_a_repair_list():
    facts = converged(inventory())
    facts["packages"] = {"files": {"bad_count": 1, "bad": ["numpy 1.26.4: x"], "bad_distributions": ["numpy==1.26.4"],
                                   "checked": 10}}
    result = run_action(inventory(), registered(facts), roles=ROLES + ["python_env"])
    assert "python_env" in result["run"]
    assert "preflight packages.files fails" in result["plan"]["python_env"]["reasons"]
    assert result["repair"] == {"python_env": ["numpy==1.26.4"]}


def test_full_mode_runs_everything_even_when_converged():
    result = run_action(inventory(), registered(converged(inventory())), mode="full")
    assert result["run"] == ROLES
    assert all(value["reasons"] == ["megatron_converge: full"] for value in result["plan"].values())


def test_the_plan_says_per_role_what_runs_and_why():
    facts = converged(inventory())
    result = run_action(inventory(os_base_extra_packages=["jq"]), registered(facts))
    assert result["lines"] == ["node1: os_base runs: inputs changed: os_base_extra_packages",
                               "node1: nccl converged (stamp and health checks pass)"]
    assert result["msg"] == "node1: os_base runs: inputs changed: os_base_extra_packages"


@pytest.mark.parametrize("args, message", [
    ({"roles": ["megatron_job"], "profile": "cpu"}, "megatron_job are not provisioning roles; expected some of os_base"),
    ({"roles": ROLES, "profile": "cu999"}, "node node1: .*cu999"),
])
def test_bad_arguments_fail_naming_the_node_and_the_value(args, message):
    action = make_action(ActionModule, dict(args, facts=None))
    with pytest.raises(AnsibleActionFail, match=message):
        action.run(task_vars=inventory())


@pytest.mark.parametrize("role", ["os_base", "cluster_ssh", "python_env", "infiniband", "slurm"])
def test_inputs_are_the_same_inside_the_role_as_before_it(role):
    """The converge_stamp action computes the digest inside the role (its defaults loaded, facts
    and role paths set) when no plan was made: it must equal the plan's, taken before any role."""
    loader = DataLoader()
    templar = Templar(loader=loader)
    profile = _stack_profiles.get("cpu")
    before = inventory(os_base_extra_packages=["jq"])
    # Inside the role its defaults are loaded, under the inventory's values.
    inside = dict(_converge_inputs.role_defaults(role, loader.load_from_file))
    inside.update(copy.deepcopy(before))
    inside.update({"role_path": "/x/roles/" + role, "role_name": role,
                   "ansible_facts": {"os_family": "Debian", "architecture": "x86_64"}, "ansible_os_family": "Debian"})
    assert (_converge_inputs.role_inputs(role, before, templar, loader.load_from_file, profile)
            == _converge_inputs.role_inputs(role, inside, templar, loader.load_from_file, profile))


def test_an_unknown_role_has_no_inputs():
    loader = DataLoader()
    with pytest.raises(Exception, match="'megatron_job' is not a provisioning role"):
        _converge_inputs.role_inputs("megatron_job", inventory(), Templar(loader=loader), loader.load_from_file)
