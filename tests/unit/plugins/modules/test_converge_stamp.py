# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The converge_stamp module as Ansible runs it (docs against the argument spec, whole-module runs
in tmp_path), and the converge section of gpu_stack_facts reading the stamps back. Only modules and
module_utils are importable here (ansible-test's module context); the action plugins' tests are in
tests/unit/plugins/action/."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.modules import converge_plan as plan_doc
from ansible_collections.megatron_ds.cluster.plugins.modules import converge_stamp as module
from ansible_collections.megatron_ds.cluster.plugins.modules import gpu_stack_facts as facts_module
from ansible_collections.megatron_ds.cluster.tests.unit import module_runner as runner


def run_module(args: Dict[str, Any], tmp_path: Path) -> Dict[str, Any]:
    return runner.run_module(module, args, tmp_path, timeout=60)


@pytest.mark.parametrize("name", ["DOCUMENTATION", "EXAMPLES", "RETURN"])
def test_docs_are_yaml(name):
    assert runner.module_docs(module)[name]
    assert runner.module_docs(plan_doc)[name]


def test_documented_options_match_the_argument_spec():
    runner.assert_options_match_argument_spec(module)


@pytest.mark.parametrize("existing, digest, check_mode, written, on_disk", [
    (None, "d1", False, True, "d1"),
    ("d1", "d1", False, False, "d1"),
    ("d0", "d1", False, True, "d1"),
    (None, "d1", True, False, None),
    ("d0", "d1", True, False, "d0"),
])
def test_writes_the_stamp_only_when_it_differs_and_never_reports_a_change(tmp_path, existing, digest, check_mode,
                                                                          written, on_disk):
    directory = tmp_path / "converge"
    managed = tmp_path / "nccl.env"
    managed.write_text("NCCL_DEBUG=WARN\n")
    args = {"role": "nccl", "files": [str(managed)], "dir": str(directory), "digest": digest, "inputs": {"v": "1"}}
    if existing:
        assert run_module(dict(args, digest=existing), tmp_path)["written"] is True
    if check_mode:
        args["_ansible_check_mode"] = True
    result = run_module(args, tmp_path)
    assert result["_rc"] == 0 and result["changed"] is False and result["written"] is written
    path = directory / "nccl.json"
    assert result["path"] == str(path)
    if on_disk is None:
        assert not path.exists()
    else:
        stamp = json.loads(path.read_text())
        assert stamp["digest"] == on_disk and stamp["files"][str(managed)].startswith("sha256:")


@pytest.mark.parametrize("args, message", [
    ({"role": "nccl"}, "role nccl: no input digest; run the task through its action plugin"),
    ({"role": "Bad-Name", "digest": "d"}, "'Bad-Name' is not a role name"),
])
def test_bad_arguments_fail_with_a_message(tmp_path, args, message):
    result = run_module(dict(args, dir=str(tmp_path)), tmp_path)
    assert result["failed"] and message in result["msg"]


def test_gpu_stack_facts_reads_the_stamps_back(tmp_path):
    directory = tmp_path / "converge"
    managed = tmp_path / "limits.conf"
    managed.write_text("* - memlock unlimited\n")
    assert run_module({"role": "os_base", "files": [str(managed)], "dir": str(directory), "digest": "d1"}, tmp_path)["written"]
    managed.write_text("* - memlock 64\n")
    result = runner.run_module(facts_module, {"converge_dir": str(directory)}, tmp_path)
    converge = result["ansible_facts"]["gpu_stack_facts"]["converge"]
    assert converge == {"os_base": {"digest": "d1", "inputs": {}, "problems": ["%s changed since the role wrote it" % managed]}}


def test_gpu_stack_facts_without_converge_dir_reports_no_stamps(tmp_path):
    result = runner.run_module(facts_module, {}, tmp_path)
    assert "converge" not in result["ansible_facts"]["gpu_stack_facts"]
