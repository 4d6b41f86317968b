# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the controller trusts and keeps (issue 39): host keys checked after first contact, and a
fact cache outside the checkout that only its user can read, without the nodes' environment.

ansible.cfg and the inventories are read as files; the cache plugin runs under ansible-playbook
with a HOME of the test's own, so the directory it makes is the one ansible.cfg names.
"""
from __future__ import annotations

import configparser
import pathlib
import stat
import subprocess
import sys

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.tests.support import tools

REPO = pathlib.Path(__file__).resolve().parents[2]


def _cfg() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(str(REPO / "ansible.cfg"))
    return parser


def test_host_keys_are_checked_and_recorded_outside_the_checkout():
    cfg = _cfg()
    assert cfg.getboolean("defaults", "host_key_checking") is True
    args = cfg.get("ssh_connection", "ssh_args").split()
    assert "StrictHostKeyChecking=accept-new" in args
    known = [a.split("=", 1)[1] for a in args if a.startswith("UserKnownHostsFile=")]
    assert known and known[0].startswith("~/"), known


def test_no_inventory_turns_host_key_checking_off():
    for path in sorted(REPO.glob("inventories/**/*.yml")):
        text = path.read_text()
        assert "StrictHostKeyChecking=no" not in text, path
        assert "UserKnownHostsFile=/dev/null" not in text, path
        assert "host_key_checking: false" not in text.lower(), path


def test_the_simvm_inventory_records_its_own_keys():
    """Its VMs get new keys every run: a known_hosts file of its own, emptied by scripts/sim-vm up,
    in ansible_ssh_args (ssh keeps the first value of an option; ssh_common_args come after)."""
    group = yaml.safe_load((REPO / "inventories/simvm/hosts.yml").read_text())["all"]["children"]["megatron_nodes"]
    args = group["vars"]["ansible_ssh_args"]
    assert "StrictHostKeyChecking=accept-new" in args.split()
    assert "-o UserKnownHostsFile={{ inventory_dir }}/../../.cache/simvm/known_hosts" in args
    assert "ansible_ssh_common_args" not in group["vars"]
    assert 'ssh-keygen -q -R "[127.0.0.1]:' in (REPO / "scripts/sim-vm").read_text()


def test_the_fact_cache_is_private_and_outside_the_checkout():
    cfg = _cfg()
    assert cfg.get("defaults", "fact_caching") == "megatron_ds.cluster.private_jsonfile"
    assert cfg.get("defaults", "fact_caching_connection").startswith("~/")


def _gather_subsets():
    for path in sorted(list(REPO.glob("roles/*/tasks/*.yml")) + list(REPO.glob("playbooks/*.yml"))):
        text = path.read_text()
        for doc in [yaml.safe_load(text) or []]:
            stack = list(doc) if isinstance(doc, list) else []
            while stack:
                item = stack.pop()
                if not isinstance(item, dict):
                    continue
                for key in ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks"):
                    stack.extend(item.get(key) or [])
                if item.get("gather_facts") is True:
                    yield str(path.relative_to(REPO)), item.get("name"), item.get("gather_subset")
                setup = item.get("ansible.builtin.setup")
                if isinstance(setup, dict):
                    yield str(path.relative_to(REPO)), item.get("name"), setup.get("gather_subset")


def test_no_fact_gathering_takes_the_nodes_environment():
    found = list(_gather_subsets())
    assert len(found) >= 10
    loud = [(p, n, s) for p, n, s in found if not s or not ({"!env", "!min"} & set(s))]
    assert loud == []


@pytest.mark.parametrize("stale_mode", [None, 0o755])
def test_the_cache_plugin_keeps_the_directory_0700_and_files_0600(tmp_path, stale_mode):
    playbook = tools.require("ansible-playbook")
    home = tmp_path / "home"
    cache = home / ".cache" / "megatron_ds" / "facts"
    if stale_mode is not None:  # a directory an earlier ansible.cfg or a person made
        cache.mkdir(parents=True)
        cache.chmod(stale_mode)
    (tmp_path / "play.yml").write_text(
        "- hosts: localhost\n  gather_facts: true\n  gather_subset: ['!all', '!env']\n  tasks: []\n")
    env = tools.environ(HOME=str(home), ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
                        ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    env.pop("ANSIBLE_CACHE_PLUGIN", None)
    env.pop("ANSIBLE_CACHE_PLUGIN_CONNECTION", None)
    run = subprocess.run([playbook, "-i", "localhost,", "-c", "local", str(tmp_path / "play.yml")],
                         capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300, check=False)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    assert stat.S_IMODE(cache.stat().st_mode) == 0o700
    files = list(cache.iterdir())
    assert files, "no facts were cached"
    for path in files:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert "ansible_env" not in path.read_text(), path
