# -*- coding: utf-8 -*-
"""The collection builds with ansible-galaxy, installs, and its playbooks run by FQCN."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


def run(args, cwd, env=None):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    if not (BIN / "ansible-galaxy").exists():
        pytest.skip("ansible-galaxy is not installed beside %s" % sys.executable)
    tmp = tmp_path_factory.mktemp("build")
    # Build from the files git would ship, not from a work tree with caches in it.
    src = tmp / "src"
    files = run(["git", "ls-files", "-co", "--exclude-standard"], REPO).stdout.split()
    for name in files:
        if name.startswith(".collections/"):
            continue
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        if (REPO / name).is_file():
            shutil.copy2(REPO / name, src / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    built = run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(tmp)], src, env)
    assert built.returncode == 0, built.stderr
    tarball = next(tmp.glob("megatron_ds-cluster-*.tar.gz"))
    cols = tmp / "cols"
    done = run([str(BIN / "ansible-galaxy"), "collection", "install", "--force", "--no-deps", "-p", str(cols),
                str(tarball)], tmp, env)
    assert done.returncode == 0, done.stderr
    env["ANSIBLE_COLLECTIONS_PATH"] = str(cols)
    return {"cols": cols, "env": env, "tmp": tmp, "tarball": tarball}


def test_tarball_leaves_out_local_state(installed):
    listing = run(["tar", "tzf", str(installed["tarball"])], installed["tmp"]).stdout.splitlines()
    assert "playbooks/site.yml" in listing and "plugins/modules/gpu_stack_facts.py" in listing
    assert not [n for n in listing if n.startswith((".venv", ".collections", ".cache", ".device", ".whl"))]


def test_site_playbook_runs_by_fqcn(installed):
    result = run([str(BIN / "ansible-playbook"), "megatron_ds.cluster.site", "--syntax-check",
                  "-i", str(REPO / "inventories/prod")], installed["tmp"], installed["env"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ansible_collections/megatron_ds/cluster/playbooks/site.yml" in result.stdout


def test_validate_playbook_runs_by_fqcn_on_the_prod_example(installed):
    result = run([str(BIN / "ansible-playbook"), "megatron_ds.cluster.validate",
                  "-i", str(REPO / "inventories/prod")], installed["tmp"], installed["env"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 fail" in result.stdout
