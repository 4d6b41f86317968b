# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tables for the converge decisions (plugins/module_utils/_converge/plan.py): which preflight
check each role repairs, the input digests, the decision and its reasons, the plan of a node, the
venv repairs named by the facts call, and the text --check --diff prints."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._converge import plan as cp
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import cluster as pcluster
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import matrix as pmatrix

COLLECTION = {"version": "1.0.0", "role_files": "abc", "profile": "p"}


def _inputs(role: str = "os_base", **variables):
    return cp.role_inputs(cp.BY_NAME[role], variables or {"os_base_extra_packages": []}, COLLECTION,
                          {"nodes": ["node1"]})


def _stamp(inputs, **extra):
    stamp = {"digest": cp.inputs_digest(inputs), "inputs": dict(inputs), "problems": []}
    stamp.update(extra)
    return stamp


@pytest.mark.parametrize("check, role", [
    ("driver.version", "nvidia_driver"),
    ("fabric_manager.version", "nvidia_driver"),
    ("cuda.toolkit", "cuda_toolkit"),
    ("cudnn.system", "cudnn"),
    ("nccl.system", "nccl"),
    ("torch.files", "python_env"),
    ("packages.files", "python_env"),
    ("megatron_deepspeed.present", "python_env"),
    ("cuda.nvcc_vs_torch", "python_env"),
    ("clock.sync", "os_base"),
    ("memlock.unlimited", "os_base"),
    ("infiniband.ports", "infiniband"),
    ("ssh.from_head", "cluster_ssh"),
    ("gpu.present", None),
    ("hostfile.slots", None),
    ("disk.free", None),
    ("facts.gathered", None),
    ("same.torch", None),
    # no role removes a file it did not install: the converge plan must not rerun python_env for it
    ("venv.unowned_code", None),
])
def test_role_for_check(check, role):
    assert cp.role_for_check(check) == role


def test_every_per_node_preflight_check_a_role_can_repair_is_owned():
    """A new preflight check of a component some role installs must name that role here."""
    owned = [spec_check.rstrip(".") for spec in cp.ROLES for spec_check in spec.checks]
    assert all(any(check.startswith(prefix) for prefix in owned) for check in
               ("driver.version", "cuda.toolkit", "cudnn.system", "nccl.system", "python.version",
                "torch.version", "deepspeed.version", "apex.files", "packages.files"))
    assert {fn.__name__ for fn in pcluster.CLUSTER_CHECKS} >= {"check_clock", "check_memlock", "check_ssh"}
    assert len(pmatrix.MATRIX_CHECKS) >= 20


@pytest.mark.parametrize("role, cluster_key", [("os_base", True), ("python_env", False), ("cluster_ssh", True)])
def test_role_inputs_name_each_variable_the_collection_and_the_cluster_where_read(role, cluster_key):
    inputs = cp.role_inputs(cp.BY_NAME[role], {"b_var": 1, "a_var": [1, 2]}, COLLECTION, {"nodes": ["n1"]})
    assert list(inputs)[:3] == ["a_var", "b_var", "(collection)"]
    assert ("(cluster members)" in inputs) is cluster_key


def test_role_inputs_leave_volatile_variables_out():
    inputs = cp.role_inputs(cp.BY_NAME["python_env"], {"python_env_repair": ["numpy==1.26.4"], "python_env_venv": "/v"},
                            COLLECTION)
    assert "python_env_repair" not in inputs and "python_env_venv" in inputs


@pytest.mark.parametrize("left, right, same", [
    ({"a": 1, "b": [1, 2]}, {"b": [1, 2], "a": 1}, True),
    ({"a": 1}, {"a": "1"}, False),
    ({"a": [1, 2]}, {"a": [2, 1]}, False),
    ({"a": None}, {}, False),
])
def test_short_digest_ignores_key_order_only(left, right, same):
    assert (cp.short_digest(left) == cp.short_digest(right)) is same


def test_decide_skips_a_role_whose_stamp_and_health_hold():
    inputs = _inputs()
    assert cp.decide(cp.BY_NAME["os_base"], inputs, _stamp(inputs), []).as_dict() == {"run": False, "reasons": []}


@pytest.mark.parametrize("stamp_of, failing, mode, reasons", [
    (None, [], cp.VERIFY, ["no stamp: never provisioned by this collection"]),
    ("same", [], cp.FULL, ["megatron_converge: full"]),
    ("changed", [], cp.VERIFY, ["inputs changed: os_base_extra_packages"]),
    ("added", [], cp.VERIFY, ["inputs changed: os_base_new_var"]),
    ("same", ["clock.sync"], cp.VERIFY, ["preflight clock.sync fails"]),
    ("problems", [], cp.VERIFY, ["service chrony is inactive"]),
    ("changed", ["clock.sync"], cp.FULL,
     ["megatron_converge: full", "inputs changed: os_base_extra_packages", "preflight clock.sync fails"]),
])
def test_decide_runs_with_every_reason(stamp_of, failing, mode, reasons):
    now = _inputs(os_base_extra_packages=["jq"])
    stamp = None
    if stamp_of == "same":
        stamp = _stamp(now)
    elif stamp_of == "changed":
        stamp = _stamp(_inputs(os_base_extra_packages=[]))
    elif stamp_of == "added":
        recorded = dict(now)
        now = dict(now, os_base_new_var="x1")
        stamp = _stamp(recorded)
    elif stamp_of == "problems":
        stamp = _stamp(now, problems=["service chrony is inactive"])
    decision = cp.decide(cp.BY_NAME["os_base"], now, stamp, failing, mode)
    assert decision.run is True
    assert decision.reasons == reasons


def test_decide_names_at_most_six_changed_inputs():
    old = dict(("v%d" % i, "a") for i in range(9))
    new = dict(("v%d" % i, "b") for i in range(9))
    decision = cp.decide(cp.BY_NAME["nccl"], new, {"digest": "x", "inputs": old}, [])
    assert decision.reasons == ["inputs changed: v0, v1, v2, v3, v4, v5 and 3 more"]


def test_decide_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="megatron_converge is 'fast'; expected one of verify, full"):
        cp.decide(cp.BY_NAME["nccl"], {}, None, [], "fast")


def test_failing_checks_by_role_keeps_failures_of_repairable_checks_once():
    rows = [
        {"check": "torch.files", "status": "fail"},
        {"check": "packages.files", "status": "fail"},
        {"check": "packages.files", "status": "fail"},
        {"check": "clock.sync", "status": "warn"},
        {"check": "gpu.present", "status": "fail"},
        {"check": "nccl.system", "status": "pass"},
    ]
    assert cp.failing_checks_by_role(rows) == {"python_env": ["torch.files", "packages.files"]}


@pytest.mark.parametrize("found, expected", [
    ("missing", {"nvidia_driver": ["driver.version"]}),
    ("470.239.06", {"nvidia_driver": ["driver.version"]}),
    # The PCI bus holds no NVIDIA GPU (the VMs of make vm-test): no driver install can load there.
    ("no NVIDIA GPU on this node", {}),
])
def test_failing_driver_rows_run_the_driver_role_unless_there_is_no_gpu(found, expected):
    assert cp.failing_checks_by_role([{"check": "driver.version", "status": "fail", "found": found}]) == expected


def test_plan_node_decides_each_role_in_the_order_given():
    inputs = {"os_base": _inputs(), "python_env": _inputs("python_env", python_env_venv="/v")}
    stamps = {"os_base": _stamp(inputs["os_base"]), "python_env": _stamp(inputs["python_env"])}
    plan = cp.plan_node(["python_env", "os_base"], inputs, stamps, [{"check": "packages.files", "status": "fail"}])
    assert list(plan) == ["python_env", "os_base"]
    assert plan["python_env"].reasons == ["preflight packages.files fails"] and not plan["os_base"].run


def test_plan_node_refuses_a_role_without_a_converge_check():
    with pytest.raises(ValueError, match="'megatron_job', which is not a provisioning role"):
        cp.plan_node(["megatron_job"], {}, {}, [])


@pytest.mark.parametrize("facts, torch_spec, expected", [
    ({}, "", []),
    ({"torch": {"version": "2.3.1+cpu", "files": {"bad_count": 2, "bad": ["x"]}}}, "", ["torch==2.3.1+cpu"]),
    ({"torch": {"version": "2.3.1", "files": {"bad_count": 1}}}, "torch==2.3.1", ["torch==2.3.1"]),
    ({"deepspeed": {"version": "0.19.6+abc", "files": {"bad": ["ds"]}}}, "", ["deepspeed==0.19.6"]),
    ({"torch": {"version": "2.3.1", "files": {"bad_count": 0, "bad": []}},
      "packages": {"files": {"bad_count": 3, "bad_distributions": ["numpy==1.26.4", "six==1.16.0"]}}}, "",
     ["numpy==1.26.4", "six==1.16.0"]),
    ({"packages": {"files": None}}, "", []),
    # issue 40: numpy drifted to 2.1.3 by hand, and a file of it differs. python_env's main install puts
    # the pin (2.2.6) back first; the repair names the pin, never the drifted version the facts read.
    ({"packages": {"files": {"bad_count": 1, "bad_distributions": ["numpy==2.1.3", "six==1.16.0"]},
                   "pins": {"source": "/v/megatron-ds/constraints.txt", "pins": {"numpy": "2.2.6"}}}}, "",
     ["numpy==2.2.6", "six==1.16.0"]),
    ({"torch": {"version": "2.1.0+cpu", "files": {"bad_count": 1}},
      "deepspeed": {"version": "0.19.7", "files": {"bad_count": 1}},
      "packages": {"pins": {"source": "c", "pins": {"torch": "2.13.0+cpu", "deepspeed": "0.19.6"}}}}, "",
     ["torch==2.13.0+cpu", "deepspeed==0.19.6"]),
    # pins without a files section, or a pins section that is not a mapping: the facts' versions
    ({"packages": {"files": {"bad_distributions": ["six==1.16.0"]}, "pins": None}}, "", ["six==1.16.0"]),
])
def test_venv_repairs_names_every_damaged_distribution(facts, torch_spec, expected):
    assert cp.venv_repairs(facts, torch_spec) == expected


def test_plan_lines_say_what_runs_and_why():
    plan = {"os_base": cp.Decision(False), "python_env": cp.Decision(True, ["preflight torch.files fails", "no stamp"])}
    assert cp.plan_lines("node2", plan) == [
        "node2: os_base converged (stamp and health checks pass)",
        "node2: python_env runs: preflight torch.files fails; no stamp",
    ]


def test_the_roles_are_those_of_provision_yml_in_its_order():
    expected = ["os_base", "nvidia_driver", "cuda_toolkit", "cudnn", "nccl", "cluster_ssh", "infiniband",
                "python_env", "shared_storage", "slurm"]
    assert [spec.name for spec in cp.ROLES] == expected
    assert cp.TOGETHER == ("cluster_ssh", "shared_storage", "slurm")


def test_provision_yml_runs_each_role_on_its_converge_group_in_plan_order():
    import os
    import re

    import yaml
    path = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "..", "playbooks", "provision.yml")
    plays = yaml.safe_load(open(path))
    order = []
    for play in plays:
        for entry in play.get("roles") or []:
            role = entry["role"].rsplit(".", 1)[-1]
            if role == "cluster_defaults":  # the cluster-wide settings, listed first where they are read
                continue
            assert re.search(r"groups\['megatron_converge_%s'\]" % role, play["hosts"]), play["name"]
            assert play.get("gather_facts") is False, play["name"]
            order.append(role)
    assert order == [spec.name for spec in cp.ROLES if spec.name != "slurm"]
    planned = plays[0]["vars"]["__converge_roles"]
    assert all(name in planned for name in order)
    assert "intersect(%s)" % list(cp.TOGETHER) in plays[0]["vars"]["__converge_together"].replace('"', "'")
