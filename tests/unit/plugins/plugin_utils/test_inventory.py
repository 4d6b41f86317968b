# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""plugin_utils/_inventory.py: what inventory_check.yml refuses, as tables; and the repository's
own inventories and molecule scenarios pass (no name they set is taken for a typo)."""
from __future__ import annotations

import pathlib
from typing import Any, Dict, List

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _inventory

REPO = pathlib.Path(__file__).resolve().parents[4]


@pytest.mark.parametrize(("names", "expected"), [
    (["megatron_job_micro_batch"], ["megatron_job_micro_batch (did you mean megatron_job_micro_batch_size?)"]),
    (["python_env_pth", "ansible_host", "my_own_var"], ["python_env_pth (did you mean python_env_path?)"]),
    (["megatron_sheduler"], ["megatron_sheduler (did you mean megatron_scheduler?)"]),
    (["slurm_xyzzy_qqq"], ["slurm_xyzzy_qqq (no variable of the collection is near it)"]),
    (["megatron_job_micro_batch_size", "megatron_nvidia_mirror_url", "__megatron_job_spec", "megatron_stack_profile"], []),
], ids=["job typo", "role typo", "cluster setting typo", "no close name", "known names"])
def test_misspelt(names: List[str], expected: List[str]) -> None:
    assert _inventory.misspelt(names) == expected


@pytest.mark.parametrize(("nodes", "expected"), [
    ({"n1": {"ansible_host": "10.0.0.1"}, "n2": {"ansible_host": "10.0.0.2"}}, []),
    ({"n1": {"ansible_host": "10.0.0.1"}, "n2": {"ansible_host": "10.0.0.1"}},
     ["10.0.0.1 is the address of n1 (ansible_host) and n2 (ansible_host)"]),
    ({"n1": {}, "n3": {"megatron_job_node_address": "n1"}},
     ["n1 is the address of n1 (inventory name) and n3 (megatron_job_node_address)"]),
    ({"n1": {"ansible_host": "127.0.0.1", "ansible_connection": "local"},
      "n2": {"ansible_host": "127.0.0.1", "ansible_connection": "local"}}, []),
    ({"n1": {"ansible_host": "n1"}}, []),
], ids=["distinct", "same ansible_host", "hostfile name of another node", "local connection", "one node, two names"])
def test_duplicate_addresses(nodes: Dict[str, Dict[str, Any]], expected: List[str]) -> None:
    assert _inventory.duplicate_addresses(nodes) == expected


def test_spaced_paths() -> None:
    assert _inventory.spaced_paths({"python_env_path": "/opt/my venv", "megatron_job_venv": "/opt/v",
                                    "megatron_job_workdir": "/a b"}) == ["python_env_path is '/opt/my venv'"]


def _names(node: Any) -> List[str]:
    found: List[str] = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append(str(key))
            found.extend(_names(value))
    elif isinstance(node, list):
        for value in node:
            found.extend(_names(value))
    return found


@pytest.mark.parametrize("path", sorted(str(p.relative_to(REPO)) for p in list(REPO.glob("inventories/*/group_vars/*.yml"))
                                        + list(REPO.glob("inventories/*/hosts.yml")) + list(REPO.glob("molecule/*/molecule.yml"))))
def test_the_repositorys_inventories_pass(path: str) -> None:
    data = yaml.safe_load((REPO / path).read_text())
    # Group names (megatron_nodes, megatron_head) are keys too, not variables.
    names = [n for n in _names(data) if n not in ("megatron_nodes", "megatron_head")]
    assert _inventory.misspelt(names) == []
