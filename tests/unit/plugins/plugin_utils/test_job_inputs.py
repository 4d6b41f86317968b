# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reader of the job on the controller (plugins/plugin_utils/_job_inputs.py): the job
variables, what the job role inherits, the normalized spec and the cluster's shape."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleError

from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _job_inputs


def same(value):
    return value


def variables(nodes=("n1", "n2"), head=(), addresses=None, spares=(), **job):
    hostvars = {h: {} for h in list(nodes) + list(head) + list(spares)}
    for host, address in (addresses or {}).items():
        hostvars[host]["megatron_job_node_address"] = address
    out = {"groups": {"megatron_nodes": list(nodes), "megatron_head": list(head), "spares": list(spares)},
           "hostvars": hostvars}
    out.update(job)
    return out


@pytest.mark.parametrize("given, expected", [
    ({"megatron_job_tensor_parallel": 2, "other": 1}, {"megatron_job_tensor_parallel": 2}),
    # The role inherits these from outside it; the job's own variable wins.
    ({"megatron_stack_profile": "cpu"}, {"megatron_job_stack_profile": "cpu"}),
    ({"megatron_stack_profile": "cpu", "megatron_job_stack_profile": "cu130"}, {"megatron_job_stack_profile": "cu130"}),
    ({"nccl_env": {"NCCL_DEBUG": "INFO"}}, {"megatron_job_nccl_env": {"NCCL_DEBUG": "INFO"}}),
    ({"megatron_stack_profile": ""}, {}),
])
def test_spec_vars(given, expected):
    assert _job_inputs.spec_vars(given, same) == expected


def test_spec_vars_without_inheritance_leaves_the_profile_to_the_caller():
    assert _job_inputs.spec_vars({"megatron_stack_profile": "cpu"}, same, inherit=False) == {}


def test_a_variable_that_does_not_template_is_named():
    def broken(value):
        raise AnsibleError("'undefined_thing' is undefined")
    with pytest.raises(_job_inputs.JobInputError, match="megatron_job_name cannot be templated.*undefined_thing"):
        _job_inputs.spec_vars({"megatron_job_name": "{{ undefined_thing }}"}, broken)


@pytest.mark.parametrize("inventory, head, rank0, hosts", [
    (variables(), "n1", "n1", ["n1", "n2"]),
    # The head group's first host runs the launcher; global rank 0 is still the first node.
    (variables(head=("login",)), "login", "n1", ["n1", "n2"]),
    # A node's own address is what ssh and the hostfile use.
    (variables(addresses={"n2": "10.0.0.2"}), "n1", "n1", ["n1", "10.0.0.2"]),
    (variables(addresses={"n2": ""}), "n1", "n1", ["n1", "n2"]),
    (variables(nodes=()), "", "", []),
])
def test_cluster(inventory, head, rank0, hosts):
    shape = _job_inputs.cluster(inventory, same)
    assert (shape["head"], shape["rank0"], shape["hosts"]) == (head, rank0, hosts)
    assert list(shape["addresses"].values()) == hosts


def test_extra_groups_get_addresses_too():
    shape = _job_inputs.cluster(variables(spares=("s1",), addresses={"s1": "10.0.0.9"}), same, extra_groups=["spares"])
    assert shape["nodes"] == ["n1", "n2"] and shape["addresses"]["s1"] == "10.0.0.9"


@pytest.mark.parametrize("job, key, expected", [
    # Schema defaults, the ones roles used to repeat as literals (TP 8, not 1).
    ({}, "tensor_parallel", 8),
    ({}, "log_file", "/opt/megatron/jobs/gpt/logs/train.log"),
    # Paths follow the job's name when only the name is set.
    ({"megatron_job_name": "llm"}, "log_file", "/opt/megatron/jobs/llm/logs/train.log"),
    ({"megatron_job_name": "llm"}, "checkpoint_dir", "/shared/checkpoints/llm"),
    ({"megatron_stack_profile": "cpu"}, "stack_profile", "cpu"),
    ({}, "nodes", 2),
])
def test_job_spec(job, key, expected):
    assert _job_inputs.job(variables(**job), same)["spec"][key] == expected


def test_only_the_parts_asked_for_and_the_shape_alone_does_not_judge_the_spec():
    inventory = variables(megatron_job_tensor_parallel="many")
    assert set(_job_inputs.job(inventory, same, parts=["cluster"])) == {"cluster"}
    with pytest.raises(_job_inputs.JobInputError, match="job spec invalid: .*tensor_parallel"):
        _job_inputs.job(inventory, same, parts=["spec"])
    with pytest.raises(_job_inputs.JobInputError, match="unknown part 'shape'"):
        _job_inputs.job(inventory, same, parts=["shape"])


def test_no_nodes_gives_a_spec_without_a_node_count():
    assert "nodes" not in _job_inputs.job(variables(nodes=()), same)["spec"]


# --------------------------------------------------------------------------------------------
# The inputs validate_job and plan_job share
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("given, hosts, inventory, script, expected", [
    (3, ["a"], variables(), None, (3, "nodes argument")),
    (None, ["a", "b", "c"], variables(), None, (3, "hostfile")),
    (None, None, variables(), None, (2, "inventory group megatron_nodes")),
    (None, None, variables(nodes=()), {"launcher": {"num_nodes": 4}}, (4, "the script's --num_nodes")),
    (None, None, variables(nodes=()), None, (None, "unknown")),
])
def test_node_count(given, hosts, inventory, script, expected):
    assert _job_inputs.node_count(given, hosts, inventory, script) == expected


@pytest.mark.parametrize("facts, expected", [
    ({}, (None, None)),
    ({"n1": {"gpus": {"count": 8, "memory_mib": 81920}}, "n2": {"gpus": {"count": 4, "memory_mib": 40960}}}, (4, 40960)),
    # A node with no GPU counts for nothing; cached facts sit under ansible_facts.
    ({"n1": {"gpus": {"count": 0}}, "n2": {"gpus": {"count": 8, "memory_mib": 143771}}}, (8, 143771)),
])
def test_gpu_facts_take_the_smallest_node(facts, expected):
    inventory = variables()
    for host, fact in facts.items():
        inventory["hostvars"][host] = {"ansible_facts": {"gpu_stack_facts": fact}}
    assert _job_inputs.gpu_facts(inventory) == expected


@pytest.mark.parametrize("given, inventory, profile, expected_profile", [
    (None, {"megatron_job_tensor_parallel": 2}, "cpu", "cpu"),
    (None, {"megatron_job_stack_profile": "cu130"}, "cpu", "cu130"),
    ({"tensor_parallel": 1}, {"megatron_job_stack_profile": "cu130"}, None, "cu117"),  # spec= replaces the inventory
])
def test_spec_from_vars(given, inventory, profile, expected_profile):
    assert _job_inputs.spec_from_vars(given, inventory, same, profile)[1]["stack_profile"] == expected_profile


def test_spec_from_vars_names_what_is_invalid():
    with pytest.raises(_job_inputs.JobInputError, match="^Job spec invalid: .*tensor_parallel"):
        _job_inputs.spec_from_vars({"tensor_parallel": "x"}, {}, same, None)


def test_profile_deepspeed():
    assert _job_inputs.profile_deepspeed("cu117") == "0.9.2"
    with pytest.raises(_job_inputs.JobInputError, match="nosuch"):
        _job_inputs.profile_deepspeed("nosuch")


def test_controller_paths(tmp_path):
    found = tmp_path / "train.sh"
    found.write_text("x")
    assert _job_inputs.resolve_path("train.sh", "script", lambda p: str(tmp_path / p)) == str(found)
    assert _job_inputs.read_text(str(found), "script") == "x"
    with pytest.raises(_job_inputs.JobInputError, match="^script: missing.sh not found on the controller"):
        _job_inputs.resolve_path("missing.sh", "script", lambda p: str(tmp_path / p))
    with pytest.raises(_job_inputs.JobInputError, match="^hostfile: cannot read"):
        _job_inputs.read_text(str(tmp_path / "none"), "hostfile")
