# -*- coding: utf-8 -*-
"""The collection builds with ansible-galaxy, installs, and its playbooks run by FQCN."""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ansible_collections.megatron_ds.cluster.tests.support import tools

REPO = Path(__file__).resolve().parents[2]


def run(args, cwd, env=None):
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    galaxy = tools.require("ansible-galaxy")
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
    built = run([galaxy, "collection", "build", "--output-path", str(tmp)], src, env)
    assert built.returncode == 0, built.stderr
    tarball = next(tmp.glob("megatron_ds-cluster-*.tar.gz"))
    cols = tmp / "cols"
    done = run([galaxy, "collection", "install", "--force", "--no-deps", "-p", str(cols),
                str(tarball)], tmp, env)
    assert done.returncode == 0, done.stderr
    env["ANSIBLE_COLLECTIONS_PATH"] = str(cols)
    return {"cols": cols, "env": env, "tmp": tmp, "tarball": tarball}


# What a user of the collection runs, and what only developing it needs (galaxy.yml build_ignore
# must keep the second list out; written here independently of galaxy.yml).
SHIPPED = ("plugins/", "roles/", "playbooks/", "meta/", "docs/", "inventories/prod/")
SHIPPED_FILES = ("README.md", "COPYING", "requirements.txt", "tests/wheelhouse/fill.py", "changelogs/changelog.yaml")
DEV_ONLY = ("tests/unit/", "tests/integration/", "tests/fixtures/", "tests/mirror/", "tests/sanity/",
            "tests/support/", "tests/output/", "molecule/", "bench/", "scripts/", "inventories/sim/",
            "changelogs/fragments/", ".cache/", ".venv/", ".collections/", ".config/", ".device/", ".whl/",
            ".git/", ".ci/", ".pytest_cache/")
DEV_ONLY_FILES = ("Makefile", "pyproject.toml", "requirements-test.txt", "CONTRIBUTING.md", "ansible.cfg",
                  ".yamllint", ".ansible-lint", ".gitignore")


def _listing(installed):
    names = run(["tar", "tzf", str(installed["tarball"])], installed["tmp"]).stdout.splitlines()
    return {name.rstrip("/") for name in names}


def test_tarball_ships_every_plugin_role_and_playbook(installed):
    listing = _listing(installed)
    tracked = run(["git", "ls-files", "--", *SHIPPED, *SHIPPED_FILES], REPO).stdout.split()
    assert tracked, "git ls-files found nothing to compare with"
    missing = [name for name in tracked if name not in listing and "__pycache__" not in name]
    assert not missing, "left out of the tarball: %s" % missing
    assert "playbooks/site.yml" in listing and "plugins/modules/gpu_stack_facts.py" in listing


def test_tarball_leaves_out_development_files_and_local_state(installed):
    listing = _listing(installed)
    dev = sorted(name for name in listing
                 if name in DEV_ONLY_FILES or name.rstrip("/") in [d.rstrip("/") for d in DEV_ONLY]
                 or name.startswith(DEV_ONLY) or "__pycache__" in name or name.endswith(".pyc"))
    assert not dev, "development-only paths in the tarball: %s" % dev


def test_site_playbook_runs_by_fqcn(installed):
    result = run([tools.require("ansible-playbook"), "megatron_ds.cluster.site", "--syntax-check",
                  "-i", str(REPO / "inventories/prod")], installed["tmp"], installed["env"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ansible_collections/megatron_ds/cluster/playbooks/site.yml" in result.stdout


def test_validate_playbook_runs_by_fqcn_on_the_prod_example(installed):
    result = run([tools.require("ansible-playbook"), "megatron_ds.cluster.validate",
                  "-i", str(REPO / "inventories/prod")], installed["tmp"], installed["env"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 fail" in result.stdout
