# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bad inventories stop in playbooks/inventory_check.yml, the first play of site.yml, before any
host changes (issue 39, "bad input stops at the door"). Each row is an inventory an adversarial
user tried; the run must fail in the localhost play (no node is contacted: the nodes here would
be reached over ssh) with a message that names the host, the variable and the value.
"""
from __future__ import annotations

import pathlib
import subprocess
import sys
from typing import Any, Dict, List, Optional

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.tests.support import tools

REPO = pathlib.Path(__file__).resolve().parents[2]


def _run(tmp_path: pathlib.Path, inventory_text: str) -> subprocess.CompletedProcess:
    playbook = tools.require("ansible-playbook")
    (tmp_path / "hosts.yml").write_text(inventory_text)
    env = tools.environ(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
                        ANSIBLE_NOCOLOR="1", ANSIBLE_CACHE_PLUGIN="memory")
    return subprocess.run([playbook, "-i", str(tmp_path / "hosts.yml"), str(REPO / "playbooks" / "inventory_check.yml")],
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300, check=False)


def _inventory(nodes: Dict[str, Dict[str, Any]], head: Optional[List[str]] = None,
               group_vars: Optional[Dict[str, Any]] = None) -> str:
    # ssh to an unroutable test address: the localhost play must stop first, or the run is unreachable.
    all_vars = {"ansible_connection": "ssh", "ansible_python_interpreter": sys.executable}
    all_vars.update(group_vars or {})
    return yaml.safe_dump({"all": {"vars": all_vars, "children": {
        "megatron_head": {"hosts": {name: {} for name in (head or ["node1"])}},
        "megatron_nodes": {"hosts": nodes},
    }}})


TWO = {"node1": {"ansible_host": "192.0.2.1"}, "node2": {"ansible_host": "192.0.2.2"}}
ROWS = [
    ("duplicate ansible_host", _inventory({"node1": {"ansible_host": "192.0.2.1"}, "node2": {"ansible_host": "192.0.2.1"}}),
     ["192.0.2.1 is the address of node1 (ansible_host) and node2 (ansible_host)"]),
    ("node named like another's address", _inventory({"192.0.2.2": {}, "node1": {"ansible_host": "192.0.2.2"}}),
     ["192.0.2.2 is the address of 192.0.2.2 (inventory name) and node1 (ansible_host)"]),
    ("duplicate megatron_job_node_address", _inventory({
        "node1": {"ansible_host": "192.0.2.1", "megatron_job_node_address": "gpu1"},
        "node2": {"ansible_host": "192.0.2.2", "megatron_job_node_address": "gpu1"}}),
     ["gpu1 is the address of node1 (megatron_job_node_address) and node2 (megatron_job_node_address)"]),
    ("duplicate os_base_cluster_address", _inventory({
        "node1": {"ansible_host": "192.0.2.1", "os_base_cluster_address": "10.9.0.1"},
        "node2": {"ansible_host": "192.0.2.2", "os_base_cluster_address": "10.9.0.1"}}),
     ["10.9.0.1 is the address of node1 (os_base_cluster_address) and node2 (os_base_cluster_address)"]),
    ("head node outside megatron_nodes", _inventory(TWO, head=["node9"]),
     ["megatron_head holds node9, which is not in megatron_nodes (node1, node2)"]),
    ("venv path with a space", _inventory(TWO, group_vars={"python_env_path": "/opt/my venv"}),
     ["Node node1: python_env_path is '/opt/my venv', expected a path without whitespace"]),
    ("CUDA home with a space", _inventory({"node1": {"ansible_host": "192.0.2.1"},
                                           "node2": {"ansible_host": "192.0.2.2", "megatron_job_cuda_home": "/usr/local/cuda 12"}}),
     ["Node node2: megatron_job_cuda_home is '/usr/local/cuda 12'"]),
    ("misspelt job variable", _inventory(TWO, group_vars={"megatron_job_micro_batch": 4}),
     ["megatron_job_micro_batch (did you mean megatron_job_micro_batch_size?)"]),
    ("misspelt cluster setting", _inventory(TWO, group_vars={"preflight_clok": "advisory"}),
     ["preflight_clok (did you mean preflight_clock?)"]),
    ("YAML syntax error", "all:\n  children:\n    megatron_nodes:\n      hosts:\n        node1: {ansible_host: 192.0.2.1\n        node2:\n",
     ["Completely failed to parse inventory source", "hosts.yml", "YAML parsing failed"]),
]


@pytest.mark.parametrize(("inventory", "words"), [row[1:] for row in ROWS], ids=[row[0] for row in ROWS])
def test_bad_inventory_stops_before_any_node(tmp_path: pathlib.Path, inventory: str, words: List[str]) -> None:
    result = _run(tmp_path, inventory)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "UNREACHABLE" not in output and "Gathering Facts" not in output, output
    for word in words:
        assert word in output, output


def test_misspelt_variable_only_warns_when_asked(tmp_path: pathlib.Path) -> None:
    """megatron_unknown_variables: warn reports the name and lets the run go on (to the nodes,
    unreachable here, so only the localhost play is judged)."""
    result = _run(tmp_path, _inventory(TWO, group_vars={"megatron_job_micro_batch": 4, "megatron_unknown_variables": "warn"}))
    output = result.stdout + result.stderr
    assert "WARNING node1: megatron_job_micro_batch (did you mean megatron_job_micro_batch_size?)" in output, output
    assert "localhost                  : ok=" in output and "failed=0" in output.split("localhost  ")[-1].split("\n")[0], output
