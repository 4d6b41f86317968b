# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The plays' host lists on the shipped inventories, controller only (--list-hosts connects to
nothing): every play resolves without "Could not match supplied host pattern" (the demo printed
it for slurm_controller, a group an inventory need not have), and the Slurm play covers the
training nodes plus the controller where the inventory names one."""
import os
import subprocess

import pytest

from ansible_collections.megatron_ds.cluster.tests.support import tools

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAYBOOK = tools.find("ansible-playbook")


def list_hosts(inventory, playbook, *extra):
    env = tools.environ(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    proc = subprocess.run([PLAYBOOK, "-i", inventory, os.path.join(REPO, "playbooks", playbook), "--list-hosts",
                           "-e", "ansible_host=127.0.0.1"] + list(extra),
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout


@pytest.mark.skipif(PLAYBOOK is None, reason=tools.missing("ansible-playbook"))
@pytest.mark.parametrize("inventory, playbook", [
    ("inventories/sim", "slurm.yml"),
    ("inventories/sim", "provision.yml"),
    ("inventories/prod", "slurm.yml"),
])
def test_no_unmatched_host_pattern(inventory, playbook):
    out = list_hosts(os.path.join(REPO, inventory), playbook)
    assert "Could not match supplied host pattern" not in out, out


@pytest.mark.skipif(PLAYBOOK is None, reason=tools.missing("ansible-playbook"))
def test_the_slurm_play_adds_a_named_controller_once(tmp_path):
    inventory = tmp_path / "hosts.yml"
    inventory.write_text("all:\n  children:\n    megatron_nodes:\n      hosts:\n        n1:\n        n2:\n"
                         "    slurm_controller:\n      hosts:\n        ctl:\n        n1:\n")
    out = list_hosts(str(inventory), "slurm.yml")
    assert "hosts (3):" in out and all(name in out for name in ("n1", "n2", "ctl")), out
