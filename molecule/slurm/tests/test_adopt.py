"""slurm_manage: false on the converged cluster: the role only checks the Slurm it finds.

The same playbook is run again with the site's-own-Slurm switch: it must change nothing on
healthy nodes, and fail naming the node where scontrol cannot reach slurmctld (munge stopped).
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
import testinfra

INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE", "")
REPO = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", "."))

pytestmark = pytest.mark.skipif(not INVENTORY, reason="runs under molecule verify (needs MOLECULE_INVENTORY_FILE)")


def adopt() -> subprocess.CompletedProcess:
    command = ["ansible-playbook", "-i", INVENTORY, str(REPO / "playbooks" / "slurm.yml"), "-e", "slurm_manage=false"]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1"))


def text(result: subprocess.CompletedProcess) -> str:
    """stdout and stderr with whitespace collapsed: Ansible wraps long messages."""
    return " ".join((result.stdout + " " + result.stderr).split())


def test_adopting_a_working_slurm_changes_nothing():
    result = adopt()
    assert result.returncode == 0, text(result)
    recap = dict(re.findall(r"(node\d) : ok=\d+ changed=(\d+)", text(result)))
    assert recap == {"node1": "0", "node2": "0", "node3": "0"}, text(result)


def test_adopting_fails_on_a_node_slurm_cannot_reach():
    node3 = testinfra.get_host("ansible://node3?ansible_inventory=%s" % INVENTORY)
    node3.check_output("systemctl stop munge")
    try:
        result = adopt()
    finally:
        node3.check_output("systemctl start munge")
    assert result.returncode != 0
    assert "slurm: node node3: slurm_manage is false (the site's own Slurm)" in text(result)
    assert "Add the node to your Slurm, or set slurm_manage: true" in text(result)
