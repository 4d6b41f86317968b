# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/inventory_check.yml, the first play of site.yml, through ansible-playbook on this
machine (two nodes with the local connection).

It once failed on every inventory whose nodes all set megatron_stack_profile: a variable the
second profile check needs was defined only on the first task ("'__inventory_default_profile'
is undefined"), and the demo's site.yml stopped there; and the scheduler check's message read a
variable that nodes need not set ("has no attribute 'megatron_scheduler'"), which ansible-core
2.19 evaluates even when the check passes. The molecule scenarios start later in the
flow, so only the demo saw it.
"""
from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys
from typing import Any, Dict

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.tests.support import tools

REPO = pathlib.Path(__file__).resolve().parents[2]


def _run(tmp_path: pathlib.Path, node_vars: Dict[str, Dict[str, Any]]) -> subprocess.CompletedProcess:
    playbook = tools.require("ansible-playbook")
    inventory = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
        "children": {"megatron_head": {"hosts": {"node1": {}}},
                     "megatron_nodes": {"hosts": node_vars}},
    }}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    env = tools.environ(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
                        ANSIBLE_NOCOLOR="1", ANSIBLE_CACHE_PLUGIN="memory")
    return subprocess.run([playbook, "-i", str(tmp_path / "hosts.yml"),
                           str(REPO / "playbooks" / "inventory_check.yml"), "--limit", "localhost,megatron_nodes"],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300, check=False)


@pytest.mark.parametrize(("node_vars", "rc", "words"), [
    ({"node1": {"megatron_stack_profile": "cpu"}, "node2": {"megatron_stack_profile": "cpu"}}, 0, ""),
    ({"node1": {}, "node2": {}}, 0, ""),  # the collection's default profile
    ({"node1": {"megatron_stack_profile": "cpu"}, "node2": {"megatron_stack_profile": "cu130"}}, 2,
     "Nodes disagree on megatron_stack_profile"),
    ({"node1": {"megatron_stack_profile": "cu999"}, "node2": {"megatron_stack_profile": "cu999"}}, 2,
     "expected one of cpu, cpu-pypi, cu117, cu121, cu130"),
    ({"node1": {"megatron_scheduler": "pbs"}, "node2": {}}, 2, "megatron_scheduler is 'pbs', expected none"),
    ({"node1": {}, "node2": {"megatron_launch_data_input": "/c.jsonl", "megatron_launch_data_stage": "never"}}, 2,
     "node2: megatron_launch_data_input is now megatron_data_input; megatron_launch_data_stage is now megatron_data_stage"),
    # Values that reach a shell (issue 39): refused before any host changes, naming value, character and hop.
    ({"node1": {"megatron_stack_profile": "cu117", "nccl_env": {"NCCL_SOCKET_IFNAME": "eth0;touch x"}},
      "node2": {"megatron_stack_profile": "cu117"}}, 2,
     "nccl_env.NCCL_SOCKET_IFNAME = 'eth0;touch x' holds ';', which the pdsh command line that DeepSpeed builds"),
    ({"node1": {"megatron_stack_profile": "cpu", "nccl_env": {"NCCL_DEBUG": "$(id)"}},
      "node2": {"megatron_stack_profile": "cpu"}}, 2, "nccl_env.NCCL_DEBUG = '$(id)' holds '$'"),
    ({"node1": {"megatron_stack_profile": "cpu", "nccl_env": {"NCCL_SOCKET_IFNAME": "^lo,docker0", "NCCL_DEBUG": "it's"}},
      "node2": {"megatron_stack_profile": "cpu"}}, 0, ""),
    ({"node1": {}, "node2": {"megatron_job_node_address": "-oProxyCommand=touch"}}, 2,
     "Node node2: megatron_job_node_address is '-oProxyCommand=touch', which holds '-'"),
], ids=["same profile", "default profile", "profiles differ", "unknown profile", "unknown scheduler", "renamed variables",
        "nccl_env shell characters on DeepSpeed 0.9.2", "nccl_env substitution", "nccl_env legal values",
        "node address read as an ssh option"])
def test_inventory_check(tmp_path: pathlib.Path, node_vars: Dict[str, Dict[str, Any]], rc: int, words: str) -> None:
    result = _run(tmp_path, node_vars)
    output = result.stdout + result.stderr
    assert "is undefined" not in output, output
    assert result.returncode == rc, output
    assert words in output


def test_a_new_profile_row_is_known_everywhere_at_once(tmp_path: pathlib.Path) -> None:
    """A profile added to the table (plugins/module_utils/_stack/profiles.py) and to nothing else
    passes the inventory check: its list of known profiles is read from the table."""
    playbook = tools.require("ansible-playbook")
    copy = tmp_path / "collections" / "ansible_collections" / "megatron_ds" / "cluster"
    for part in ("plugins", "roles", "playbooks", "meta"):
        shutil.copytree(REPO / part, copy / part, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "galaxy.yml", copy / "galaxy.yml")
    profiles = copy / "plugins" / "module_utils" / "_stack" / "profiles.py"
    profiles.write_text(profiles.read_text() + '\nPROFILES["cu999"] = copy.deepcopy(PROFILES["cu121"])\n')
    (tmp_path / "ansible.cfg").write_text("[defaults]\ncollections_path = %s\n" % (tmp_path / "collections"))
    inventory = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "megatron_stack_profile": "cu999"},
        "children": {"megatron_nodes": {"hosts": {"node1": {}, "node2": {}}}},
    }}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    env = tools.environ(ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
                        ANSIBLE_NOCOLOR="1", ANSIBLE_CACHE_PLUGIN="memory")
    result = subprocess.run([playbook, "-i", str(tmp_path / "hosts.yml"),
                             str(copy / "playbooks" / "inventory_check.yml"), "--limit", "localhost,megatron_nodes"],
                            capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300, check=False)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Require a known stack profile" in output
    # The same run without the row refuses the profile, naming the table's profiles.
    profiles.write_text(profiles.read_text().replace('PROFILES["cu999"]', '_UNUSED'))
    result = subprocess.run([playbook, "-i", str(tmp_path / "hosts.yml"),
                             str(copy / "playbooks" / "inventory_check.yml"), "--limit", "localhost,megatron_nodes"],
                            capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300, check=False)
    assert result.returncode == 2 and "megatron_stack_profile is 'cu999', expected one of cpu, cpu-pypi, cu117, cu121, cu130" in (
        result.stdout + result.stderr), result.stdout + result.stderr
