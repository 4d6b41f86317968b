# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Unit tests for the preflight action plugin (plugins/action/preflight.py).

The ActionModule is built the way ansible-core's own action tests build theirs: a mocked
task carrying the args, a mocked connection and play context; run() gets task_vars.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

import pytest
from ansible.errors import AnsibleActionFail

from ansible_collections.megatron_ds.cluster.plugins.action.preflight import ActionModule, facts_from_hostvars
from ansible_collections.megatron_ds.cluster.tests.support.action_harness import make_action as build_action
from ansible_collections.megatron_ds.cluster.tests.unit.plugins.module_utils._preflight.preflight_facts import NODES, make_cluster, make_node


def make_action(args: Dict[str, Any], check_mode: bool = False) -> ActionModule:
    return build_action(ActionModule, args, check_mode=check_mode, basedir=None)


REPORTS: Dict[str, str] = {}


@pytest.fixture(autouse=True)
def report_dir(tmp_path, monkeypatch):
    """Every action run writes its report files under the test's own directory; the output is
    wrapped as on a terminal of 200 columns (160 at most), whatever runs the tests."""
    monkeypatch.setenv("COLUMNS", "200")
    REPORTS["dir"] = str(tmp_path / "reports")
    yield REPORTS["dir"]


def run_action(args: Dict[str, Any], task_vars: Optional[Dict[str, Any]] = None, **kwargs: Any) -> Dict[str, Any]:
    args = dict(args)
    args.setdefault("report_dir", REPORTS["dir"])
    return make_action(args, **kwargs).run(task_vars=task_vars or {})


def rows_of(result: Dict[str, Any]) -> list:
    """Every row, from the JSON report file the action wrote (the result does not carry them)."""
    with open(result["report"]["json"]) as handle:
        return json.load(handle)["rows"]


def clean_args(**extra: Any) -> Dict[str, Any]:
    args: Dict[str, Any] = {"profile": "cu117", "facts": make_cluster(), "slots": {n: 8 for n in NODES},
                            "infiniband_required": True, "gpudirect": True, "min_free_gb": 100,
                            "ssh_reachable": {n: 0 for n in NODES}}
    args.update(extra)
    return args


# ---------------------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("check_mode", [False, True])
def test_clean_cluster_passes_with_one_summary_line_naming_the_report(check_mode, report_dir):
    result = run_action(clean_args(), check_mode=check_mode)
    assert not result.get("failed")
    assert result["changed"] is False
    assert result["failures"] == 0 and result["summary"]["fail"] == 0
    assert result["profile"] == "cu117"
    assert "rows" not in result and "table" not in result  # printed once, in msg; every row is in the files
    assert result["msg"].startswith("preflight passed for profile cu117 on 3 node(s)")
    assert result["msg"].replace("\n     ", " ").endswith("; report: %s" % result["report"]["text"])
    assert os.path.dirname(result["report"]["text"]) == report_dir
    assert result["_ansible_verbose_always"] is True
    assert {row["status"] for row in rows_of(result)} == {"pass"}
    text = open(result["report"]["text"]).read()
    assert text.splitlines()[3].split() == ["STATUS", "CHECK", "NODE", "COMPONENT", "FOUND", "EXPECTED"]
    assert len(text.splitlines()) == 5 + len(rows_of(result))


def test_drift_fails_with_one_line_per_failure_and_a_summary():
    facts = make_cluster()
    facts["node3"]["deepspeed"]["version"] = "0.10.0"
    result = run_action(clean_args(facts=facts))
    assert result["failed"] is True
    assert result["failures"] == 2
    failing = [row for row in rows_of(result) if row["status"] == "fail"]
    assert {(row["check"], row["node"], row["component"]) for row in failing} == {
        ("deepspeed.version", "node3", "deepspeed"), ("same.deepspeed", "node3", "deepspeed")}
    lines = result["msg"].splitlines()
    heads = [line for line in lines if not line.startswith(" ")]
    assert [line.split(":")[0] for line in heads] == [
        "FAIL node3 deepspeed (deepspeed.version)", "FAIL node3 deepspeed (same.deepspeed)", "preflight FAILED for profile cu117 on 3 node(s)"]
    assert " ".join(line.strip() for line in lines).endswith(
        "preflight FAILED for profile cu117 on 3 node(s): 2 failed, 0 warning(s), %d passed, 0 skipped; failing: node3; "
        "report: %s" % (result["summary"]["pass"], result["report"]["text"]))
    assert all(len(line) <= 160 - 8 for line in lines)
    assert "0.10.0" in heads[0]


@pytest.mark.parametrize("verbosity, passes", [(0, False), (1, True)])
def test_pass_lines_only_with_verbosity(monkeypatch, verbosity, passes):
    from ansible_collections.megatron_ds.cluster.plugins.action import preflight as action

    monkeypatch.setattr(action.display, "verbosity", verbosity)
    result = run_action(clean_args())
    assert any(line.startswith("pass all driver (driver.version)") for line in result["msg"].splitlines()) is passes


def test_an_unwritable_report_dir_keeps_the_verdict_and_says_why(tmp_path):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    result = run_action(clean_args(report_dir=str(blocker / "reports")))
    assert not result.get("failed")
    assert result["report"]["text"] is None and "preflight_report_dir" in result["report"]["error"]
    assert "no report: cannot write to %s" % (blocker / "reports") in result["msg"].replace("\n     ", " ")


@pytest.mark.parametrize("fail_on_warn, failed", [(False, False), (True, True)])
def test_fail_on_warn(fail_on_warn, failed):
    facts = make_cluster()
    facts["node1"]["clock"] = {"synchronized": None, "offset_ms": None, "source": None}
    result = run_action(clean_args(facts=facts, fail_on_warn=fail_on_warn))
    assert bool(result.get("failed")) is failed
    assert result["summary"]["warn"] == 1
    if failed:
        text = " ".join(result["msg"].split())
        assert text.count("preflight passed") + text.count("preflight FAILED") == 1
        assert "(fail_on_warn is true); report: " in text


def test_unreachable_result_becomes_a_failing_row():
    facts: Dict[str, Any] = {node: {"ansible_facts": {"gpu_stack_facts": f}, "changed": False}
                             for node, f in make_cluster().items()}
    facts["node2"] = {"unreachable": True, "msg": "Failed to connect to the host via ssh"}
    result = run_action(clean_args(facts=facts))
    assert result["failed"] is True
    failing = [row for row in rows_of(result) if row["status"] == "fail"]
    assert [(row["check"], row["node"]) for row in failing] == [("facts.gathered", "node2")]
    assert failing[0]["found"] == "unreachable over ssh node2:22: Failed to connect to the host via ssh"


def test_the_connection_of_an_unreachable_node_comes_from_its_hostvars():
    facts: Dict[str, Any] = dict(make_cluster())
    facts["node3"] = {"failed": True, "msg": "Module result deserialization failed: No start of json char found",
                      "module_stderr": "Error response from daemon: container 9f2 is not running"}
    hostvars = {node: {"ansible_connection": "community.docker.docker", "ansible_host": "sim-" + node} for node in NODES}
    result = run_action(clean_args(facts=facts), task_vars={"hostvars": hostvars})
    line = " ".join(result["msg"].split())
    assert ("FAIL node3 connection (facts.gathered): found unreachable over docker container sim-node3: Error "
            "response from daemon: container 9f2 is not running; expected node3 answers over docker container sim-node3; "
            "fix: start the container (docker start sim-node3)") in line
    assert "; unreachable: node3; report: " in line


@pytest.mark.parametrize("hostvars, expected", [
    ({"n1": {"ansible_host": "10.0.0.1", "ansible_user": "ops"}}, {"n1": "ssh ops@10.0.0.1:22"}),
    ({}, {"n1": "ssh n1:22"}),  # a host without variables
])
def test_connections_from_hostvars(hostvars, expected):
    from ansible_collections.megatron_ds.cluster.plugins.action.preflight import connections_from_hostvars

    assert connections_from_hostvars(hostvars, ["n1"]) == expected


def test_h200_like_single_node_on_cu130():
    facts = {"gpu-host": make_node("cu130", "gpu-host")}
    result = run_action({"profile": "cu130", "facts": facts, "slots": {"gpu-host": 8}})
    assert not result.get("failed")


# ---------------------------------------------------------------------------------------
# Facts from hostvars (the default)
# ---------------------------------------------------------------------------------------


def test_default_facts_come_from_the_play_hosts_hostvars():
    cluster = make_cluster()
    hostvars = {
        "node1": {"gpu_stack_facts": cluster["node1"]},
        # Facts not injected as variables: only under ansible_facts.
        "node2": {"ansible_facts": {"gpu_stack_facts": cluster["node2"]}},
        "node3": {"gpu_stack_facts": cluster["node3"]},
        "other": {"gpu_stack_facts": make_node("cu130", "other")},  # not in this play
    }
    task_vars = {"hostvars": hostvars, "ansible_play_hosts_all": list(NODES)}
    result = run_action(clean_args(facts=None), task_vars)
    assert not result.get("failed"), result["msg"]
    assert "other" not in {row["node"] for row in rows_of(result)}


def test_default_facts_missing_on_a_play_host_fail_that_host():
    cluster = make_cluster()
    hostvars = {"node1": {"gpu_stack_facts": cluster["node1"]}, "node2": {}, "node3": {"gpu_stack_facts": cluster["node3"]}}
    task_vars = {"hostvars": hostvars, "ansible_play_hosts_all": list(NODES)}
    result = run_action({"profile": "cu117"}, task_vars)
    assert result["failed"] is True
    assert [(r["check"], r["node"]) for r in rows_of(result) if r["status"] == "fail"] == [("facts.gathered", "node2")]


@pytest.mark.parametrize(
    "hostvars, hosts, expected",
    [
        ({"a": {"gpu_stack_facts": {"hostname": "a"}}}, ["a"], {"a": {"hostname": "a"}}),
        ({"a": {"ansible_facts": {"gpu_stack_facts": {"hostname": "a"}}}}, ["a"], {"a": {"hostname": "a"}}),
        ({"a": {"gpu_stack_facts": "garbage"}}, ["a"], {"a": None}),
        ({}, ["a"], {"a": None}),
        ({"a": {"gpu_stack_facts": {"hostname": "a"}}, "b": {}}, ["a"], {"a": {"hostname": "a"}}),
    ],
)
def test_facts_from_hostvars(hostvars, hosts, expected):
    assert facts_from_hostvars(hostvars, hosts) == expected


# ---------------------------------------------------------------------------------------
# Bad arguments: AnsibleActionFail saying what to change
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args, words",
    [
        ({"profile": "cu118", "facts": {"n": {"hostname": "n"}}}, ["unknown stack profile 'cu118'", "cpu, cpu-pypi, cu117, cu121, cu130"]),
        ({"profile": " ", "facts": {"n": {"hostname": "n"}}}, ["profile is empty", "cu117"]),
        ({"facts": {"n": {"hostname": "n"}}}, ["profile"]),
        ({"profile": "cu117", "facts": {"n": {"hostname": "n"}}, "colour": "red"}, ["colour"]),
        ({"profile": "cu117", "facts": {"n": "text"}}, ["facts for n is a str"]),
        ({"profile": "cu117", "facts": {"n": {"hostname": "n"}}, "slots": {"n": "eight"}}, ["slots for n is 'eight'"]),
        ({"profile": "cu117", "facts": {"n": {"hostname": "n"}}, "slots": {"n": -1}}, ["slots for n"]),
        ({"profile": "cu117", "facts": {"n": {"hostname": "n"}}, "min_free_gb": -5}, ["min_free_gb"]),
        ({"profile": "cu117", "facts": {"n": {"hostname": "n"}}, "max_clock_offset_ms": 0}, ["max_clock_offset_ms"]),
        ({"profile": "cu117", "facts": {"n": {"hostname": "n"}}, "infiniband_required": "maybe"}, ["infiniband_required"]),
        ({"profile": "cu117", "facts": {}}, ["no nodes to check"]),
        ({"profile": "cu117"}, ["no nodes to check"]),
    ],
)
def test_bad_arguments(args, words):
    with pytest.raises(AnsibleActionFail) as excinfo:
        run_action(args)
    message = str(excinfo.value)
    for word in words:
        assert word in message


def test_slots_as_strings_of_digits_are_accepted():
    result = run_action(clean_args(slots={n: "8" for n in NODES}))
    assert not result.get("failed")
