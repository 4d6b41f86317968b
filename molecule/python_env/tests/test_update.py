"""The role run again after something changed (run once per verify, after the state tests).

- node1: the pinned ref moves from tag v1 to v2 in the toy repository: the checkout follows.
- node3: the training user appears (as cluster_ssh would create it): the venv and the checkout
  that root owned until now are handed over to it.
(Idempotence at a pinned ref is molecule's own idempotence step.)
"""
from __future__ import annotations

import json
import subprocess

import pytest

from python_env_helpers import MEGATRON_DIR, REAL_MDS, VENV, flat, run_playbook

pytestmark = pytest.mark.skipif(
    REAL_MDS, reason="the git update needs the toy repository (MEGATRON_DS_SRC is set: the checkout is an archive)")


def _docker(node: str, *cmd: str) -> str:
    return subprocess.run(["docker", "exec", node, *cmd], check=True, capture_output=True, text=True).stdout.strip()


def test_update_ref_and_hand_over_to_the_new_user():
    _docker("node3", "useradd", "--uid", "2000", "--create-home", "--shell", "/bin/bash", "megatron")
    v2 = json.dumps({"python_env_megatron_version": "v2"})
    result, recap = run_playbook("converge.yml", "-e", v2, limit="node1,node3")
    out = flat(result)
    assert result.returncode == 0, out
    assert recap["node1"][0] >= 1 and recap["node3"][0] >= 1, out

    for node in ("node1", "node3"):
        head = _docker(node, "sudo", "-u", "megatron", "git", "-C", MEGATRON_DIR, "rev-parse", "HEAD")
        assert head == _docker(node, "git", "-C", "/srv/git/toy-megatron.git", "rev-parse", "v2^{commit}")
        revision = _docker(node, "sudo", "-u", "megatron", VENV + "/bin/python", "-I", "-c",
                           "import sys; sys.path.insert(0, %r); import megatron; print(megatron.TOY_REVISION)" % MEGATRON_DIR)
        assert revision == "v2"
    owners = _docker("node3", "stat", "-c", "%U", VENV, VENV + "/lib/python3.11/site-packages/torch/__init__.py",
                     MEGATRON_DIR, MEGATRON_DIR + "/megatron/__init__.py")
    assert owners.split() == ["megatron"] * 4
