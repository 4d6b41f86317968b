# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/preflight.yml through ansible-playbook on this machine (three nodes with the local
connection), for its wiring: the head node's facts call runs the ssh sweep (there is no task of
its own any more), and the gate reads each node's answer from that call's registered result.

The sweep's ssh to 127.0.0.1 may or may not get in on this machine; either way each node must
have a `ssh.from_head` row that says what ssh answered, never "not tried". When the head node
cannot be reached, every node reads "not tried" and the play still reaches the gate.
"""
from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys
from typing import Any, Dict, List

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.tests.support import tools

REPO = pathlib.Path(__file__).resolve().parents[2]


def _run(tmp_path: pathlib.Path, head_vars: Dict[str, Any]) -> List[Dict[str, Any]]:
    playbook = tools.require("ansible-playbook")
    try:
        import pwd
        user = pwd.getpwuid(os.geteuid()).pw_name
    except (ImportError, KeyError):
        pytest.skip("the current user has no name")
    nodes = {"node%d" % i: {"megatron_job_node_address": "127.0.0.1"} for i in (1, 2, 3)}
    nodes["node1"].update(head_vars)
    inventory = {"all": {
        # become off: the sweep then runs as this user, who is also the training user here.
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "ansible_become": False, "megatron_stack_profile": "cpu", "cluster_ssh_user": user,
                 "megatron_job_venv": str(tmp_path / "no-venv"), "preflight_report_dir": str(tmp_path / "reports")},
        "children": {"megatron_head": {"hosts": {"node1": {}}}, "megatron_nodes": {"hosts": nodes}},
    }}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    env = tools.environ(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
                        ANSIBLE_NOCOLOR="1", ANSIBLE_CACHE_PLUGIN="memory")
    proc = subprocess.run([playbook, "-i", str(tmp_path / "hosts.yml"),
                           str(REPO / "playbooks" / "preflight.yml")],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300, check=False)
    output = proc.stdout + proc.stderr
    assert "is undefined" not in output, output
    # The include of the facts call (skipped after a converge check that changed nothing), the
    # facts call and the gate: the sweep is no task of its own. (cluster_defaults, listed first,
    # adds only the check of the cluster-wide settings.)
    assert output.count("TASK [Preflight | ") == 3, output
    reports = sorted((tmp_path / "reports").glob("preflight-*.json"))
    assert reports, output
    return json.loads(reports[-1].read_text())["rows"]


def _ssh_rows(rows: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    return {row["node"]: row for row in rows if row["check"] == "ssh.from_head"}


def test_the_head_nodes_facts_call_sweeps_every_node(tmp_path: pathlib.Path) -> None:
    rows = _ssh_rows(_run(tmp_path, {}))
    assert sorted(rows) == ["node1", "node2", "node3"]
    for row in rows.values():
        assert row["found"] in ("reachable", "not reachable"), row
        assert row["status"] == ("pass" if row["found"] == "reachable" else "fail"), row


def test_an_unreachable_head_leaves_every_node_not_tried(tmp_path: pathlib.Path) -> None:
    # ssh to a closed port: the head node's facts call never runs.
    head = {"ansible_connection": "ssh", "ansible_host": "127.0.0.1", "ansible_port": 1,
            "ansible_ssh_common_args": "-o ConnectTimeout=5"}
    rows = _run(tmp_path, head)
    # node1 itself fails as unreachable (its other rows are not judged); the others were not tried.
    assert {node: (row["status"], row["found"]) for node, row in _ssh_rows(rows).items()} == {
        node: ("warn", "not tried") for node in ("node2", "node3")}
    gathered = [row for row in rows if row["check"] == "facts.gathered" and row["node"] == "node1"]
    assert gathered and gathered[0]["status"] == "fail" and "unreachable" in gathered[0]["found"], gathered
