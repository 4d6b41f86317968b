"""playbooks/provision.yml re-run on the launch scenario's nodes, converging by verification.

Last of the verifier's files (pytest runs them in name order): it provisions os_base, infiniband
and the GPU roles on nodes the other tests used as converge.yml left them.

1. The first provision.yml provisions what converge.yml did not (os_base, infiniband, the GPU roles
   that the cpu profile leaves alone) and skips the roles converge.yml ran: their stamps, written
   inside the roles without a plan, give the same digests as the plan made before any role.
2. Then the venvs drift (issue 40): on node1 `pip install numpy==<another release>` by hand, a clean
   install that every RECORD check passes; on node2 the same, and a file of that numpy rewritten (pip's
   RECORD no longer matches); node3 gets a changed role variable (os_base_extra_packages). One re-run
   repairs all three: python_env runs on node1 and node2 and puts the profile's numpy back (the repair
   names the pin, not the drifted release the facts read), os_base runs on node3 alone and installs jq,
   every other node and role is skipped.
3. A third run has nothing to do (changed=0 everywhere); --check --diff prints the plan per node.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any, Dict, List, Tuple

import pytest

from launch_helpers import INVENTORY, NODES, PROJECT_DIR, module, node
from ansible_collections.megatron_ds.cluster.tests.support.ansible_run import ansible_env, ansible_playbook_argv

VENV = "/opt/megatron/venv"
PLAN_TASK = "Provision | Decide which roles this node needs, and why"
# A per-host value, rendered per node: only node3's os_base inputs change.
NODE3_JQ = {"os_base_extra_packages": "{{ ['jq'] if inventory_hostname == 'node3' else [] }}"}


def provision(*args: str, extra: Dict[str, Any] = None) -> Tuple[int, Dict[str, Any], float]:
    """provision.yml with the json callback: (rc, its result tree, seconds)."""
    env = ansible_env(PROJECT_DIR)
    env.update(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    argv = list(args) + (["-e", json.dumps(extra)] if extra else [])
    started = time.monotonic()
    result = subprocess.run(ansible_playbook_argv(INVENTORY, PROJECT_DIR / "playbooks" / "provision.yml", *argv),
                            env=env, cwd=PROJECT_DIR, text=True, capture_output=True, timeout=1200, check=False)
    elapsed = time.monotonic() - started
    try:
        tree = json.loads(result.stdout)
    except ValueError:
        raise AssertionError("provision.yml printed no JSON (rc %d):\n%s\n%s"
                             % (result.returncode, result.stdout[-4000:], result.stderr[-4000:]))
    print("--- provision.yml %s: rc %d in %.0f s" % (" ".join(argv), result.returncode, elapsed))
    return result.returncode, tree, elapsed


def failures(tree: Dict[str, Any]) -> List[str]:
    found = []
    for play in tree["plays"]:
        for task in play["tasks"]:
            for host, res in task["hosts"].items():
                if res.get("failed") or res.get("unreachable"):
                    found.append("%s %s: %s" % (host, task["task"]["name"], str(res.get("msg"))[:600]))
    return found


def plans(tree: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """{node: the converge_plan result} of the run."""
    for task in tree["plays"][0]["tasks"]:
        if task["task"]["name"] == PLAN_TASK:
            return task["hosts"]
    raise AssertionError("no converge plan task in the run")


def ran(tree: Dict[str, Any]) -> Dict[str, List[str]]:
    """{node: the roles whose plays ran a task on it}."""
    seen: Dict[str, List[str]] = {}
    for play in tree["plays"][1:]:
        name = play["play"]["name"]
        if not name.startswith("Provision | ") or "facts" in name:
            continue
        for task in play["tasks"]:
            for host in task["hosts"]:
                seen.setdefault(host, [])
                if name not in seen[host]:
                    seen[host].append(name)
    return seen


def changed(tree: Dict[str, Any]) -> Dict[str, int]:
    return dict((host, stats.get("changed", 0)) for host, stats in tree["stats"].items())


def numpy_damage() -> Tuple[str, str]:
    """(numpy's version.py on node2, its sha256 as installed)."""
    out = node("node2").run("ls -d %s/lib/python3*/site-packages/numpy/version.py", VENV)
    assert out.rc == 0, out.stderr
    path = out.stdout.strip()
    return path, node("node2").check_output("sha256sum %s | cut -d' ' -f1", path)


# The numpy release of the version drift: any release but the profile's pin, with a CPython 3.11 wheel.
NUMPY_DRIFT = "2.3.5"


def numpy_version(host: str) -> str:
    return node(host).check_output("%s/bin/python -c 'import importlib.metadata as m; print(m.version(\"numpy\"))'", VENV)


@pytest.fixture(scope="module")
def drift_wheel(tmp_path_factory) -> str:
    """numpy NUMPY_DRIFT's wheel for the nodes (CPython 3.11, Debian 12), from the controller's pip
    configuration, as prepare.yml fills the wheelhouse."""
    dest = tmp_path_factory.mktemp("drift-wheel")
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    "--python-version=3.11", "--implementation=cp", "--abi=cp311",
                    "--platform=manylinux_2_28_x86_64", "--platform=manylinux_2_17_x86_64",
                    "--dest", str(dest), "numpy==%s" % NUMPY_DRIFT], check=True, timeout=600)
    return str(next(dest.glob("numpy-%s-*.whl" % NUMPY_DRIFT)))


def drift_numpy(host: str, wheel: str) -> None:
    """`pip install numpy==NUMPY_DRIFT` on the node by hand, as the training user (the venv's owner)."""
    subprocess.run(["docker", "cp", wheel, "%s:/tmp/" % host], check=True)
    owner = node(host).check_output("stat -c %%U %s", VENV)
    node(host).run_expect([0], "runuser -u %s -- %s/bin/pip install --quiet --no-deps --no-index /tmp/%s",
                          owner, VENV, wheel.rsplit("/", 1)[-1])
    assert numpy_version(host) == NUMPY_DRIFT


@pytest.fixture(scope="module")
def first_run():
    rc, tree, seconds = provision()
    assert rc == 0 and not failures(tree), failures(tree)
    print("first provision.yml after converge.yml on 3 nodes: %.1f s" % seconds)
    return tree


def test_the_first_run_provisions_the_rest_and_skips_what_converge_yml_did(first_run):
    for host, result in plans(first_run).items():
        plan = result["plan"]
        for role in ("cluster_ssh", "python_env", "shared_storage"):
            assert not plan[role]["run"], (host, role, plan[role]["reasons"])
        assert plan["os_base"]["run"] and plan["os_base"]["reasons"] == ["no stamp: never provisioned by this collection"]
    for host in NODES:
        stamps = node(host).run("ls /var/lib/megatron_ds/converge")
        assert set(stamps.stdout.split()) >= {"os_base.json", "infiniband.json", "python_env.json", "nccl.json"}


def test_one_rerun_repairs_drifted_and_damaged_packages_and_applies_a_changed_variable(first_run, drift_wheel):
    path, installed_sha = numpy_damage()
    pinned = numpy_version("node1")
    assert pinned != NUMPY_DRIFT and numpy_version("node2") == pinned
    # node1: a clean install of another release; node2: the same, then a file of it damaged (the issue's
    # failed repair: the reinstall named the drifted release, which the constraints refuse).
    drift_numpy("node1", drift_wheel)
    drift_numpy("node2", drift_wheel)
    node("node2").run_expect([0], "echo '# damaged' >> %s", path)
    assert not node("node3").package("jq").is_installed
    rc, tree, seconds = provision(extra=NODE3_JQ)
    assert rc == 0 and not failures(tree), failures(tree)
    print("re-run repairing node1, node2 and node3: %.1f s" % seconds)
    runs = dict((host, result["run"]) for host, result in plans(tree).items())
    assert runs == {"node1": ["python_env"], "node2": ["python_env"], "node3": ["os_base"]}, plans(tree)
    assert plans(tree)["node1"]["plan"]["python_env"]["reasons"] == ["preflight packages.pinned fails"]
    assert plans(tree)["node1"]["repair"]["python_env"] == []
    node2_reasons = ["preflight packages.files fails", "preflight packages.pinned fails"]
    assert plans(tree)["node2"]["plan"]["python_env"]["reasons"] == node2_reasons
    assert plans(tree)["node2"]["repair"]["python_env"] == ["numpy==%s" % pinned]
    assert plans(tree)["node3"]["plan"]["os_base"]["reasons"] == ["inputs changed: os_base_extra_packages"]
    assert ran(tree) == {"node1": ["Provision | Python training environment"],
                         "node2": ["Provision | Python training environment"],
                         "node3": ["Provision | Base operating system"]}
    # node1 and node2: the profile's numpy again; node2's file as pip installed it, and the whole venv
    # matches pip's RECORD and its pins.
    assert numpy_version("node1") == numpy_version("node2") == pinned
    assert node("node2").check_output("sha256sum %s | cut -d' ' -f1", path) == installed_sha
    for host in ("node1", "node2"):
        facts = module(host, "megatron_ds.cluster.gpu_stack_facts", {"venv": VENV})["ansible_facts"]["gpu_stack_facts"]
        assert facts["packages"]["files"]["bad_count"] == 0, facts["packages"]["files"]
        assert facts["packages"]["pins"]["pins"]["numpy"] == pinned, facts["packages"]["pins"]
    # node3: the new package is there, and only there.
    assert node("node3").package("jq").is_installed and not node("node2").package("jq").is_installed


def test_a_converged_rerun_does_nothing_and_check_diff_prints_the_plan(first_run):
    rc, tree, seconds = provision(extra=NODE3_JQ)
    assert rc == 0 and not failures(tree), failures(tree)
    assert all(result["run"] == [] for result in plans(tree).values()), plans(tree)
    assert ran(tree) == {} and set(changed(tree).values()) == {0}
    print("converged re-run of provision.yml on 3 nodes: %.1f s" % seconds)

    # Without the variable node3's os_base inputs differ again: --check --diff says so and changes nothing.
    rc, tree, seconds = provision("--check", "--diff")
    assert rc == 0, failures(tree)
    shown = [task for task in tree["plays"][0]["tasks"] if task["task"]["name"].startswith("Provision | Show the plan")]
    assert shown, [task["task"]["name"] for task in tree["plays"][0]["tasks"]]
    assert shown[0]["hosts"]["node3"]["msg"][0] == "node3: os_base runs: inputs changed: os_base_extra_packages"
    assert shown[0]["hosts"]["node1"]["msg"][0] == "node1: os_base converged (stamp and health checks pass)"
    assert node("node3").package("jq").is_installed
