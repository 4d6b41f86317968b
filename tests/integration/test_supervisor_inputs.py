# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/supervise.yml's input checks through ansible-playbook on this machine, in check mode
(the local connection, no become): what the role refuses before it changes anything, and that a
good inventory gets past them to the next refusal (no relaunch command installed here).

Under the Slurm backend the batch step writes the log on the job's first node and the supervisor
reads it locally, so the head node must be that node (molecule/chaos runs the supervisor under
both backends on a head node that is).
"""
from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Any, Dict, List

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.tests.support import tools

REPO = pathlib.Path(__file__).resolve().parents[2]
INPUTS_OK = "the relaunch command /nonexistent/ansible-playbook is"


def _run(tmp_path: pathlib.Path, head: List[str], variables: Dict[str, Any]) -> subprocess.CompletedProcess:
    playbook = tools.require("ansible-playbook")
    inventory = {"all": {
        "vars": dict({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                      "ansible_become": False, "megatron_stack_profile": "cpu",
                      "supervisor_ansible_playbook": "/nonexistent/ansible-playbook",
                      "supervisor_dir": str(tmp_path / "supervisor")}, **variables),
        "children": {"megatron_head": {"hosts": {h: {} for h in head}},
                     "megatron_nodes": {"hosts": {"node1": {}, "node2": {}}}},
    }}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    env = tools.environ(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
                        ANSIBLE_NOCOLOR="1", ANSIBLE_CACHE_PLUGIN="memory")
    return subprocess.run([playbook, "-i", str(tmp_path / "hosts.yml"), "--check",
                           str(REPO / "playbooks" / "supervise.yml")],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300, check=False)


@pytest.mark.parametrize(("head", "variables", "words"), [
    # Slurm: the head node must be the first node, where the batch step writes the log
    (["node3"], {"megatron_launch_backend": "slurm"}, "head node node3 under backend slurm"),
    (["node3"], {"megatron_scheduler": "slurm"}, "head node node3 under backend slurm"),
    ([], {"megatron_launch_backend": "slurm"}, INPUTS_OK),
    # pdsh: the launcher's log is on the head node wherever it is
    (["node3"], {}, INPUTS_OK),
    # the argument spec answers first
    (["node3"], {"supervisor_relaunch_connection": "root"},
     "supervisor_relaunch_connection must be one of: training_user, inventory, got: root"),
    ([], {"supervisor_listen_address": "0.0.0.0"}, "listen address 0.0.0.0 (expected a chosen address"),
    ([], {"supervisor_listen_address": "0.0.0.0", "supervisor_listen_any": True}, INPUTS_OK),
])
def test_supervise_input_checks(tmp_path, head, variables, words):
    run = _run(tmp_path, head, variables)
    output = " ".join((run.stdout + run.stderr).split())
    assert run.returncode == 2, output[-3000:]
    assert words in output, output[-3000:]
    if words != INPUTS_OK:
        assert "Check the relaunch command exists" not in output  # refused before anything else
