"""The clean stack that converge put on every node, read back from the node (testinfra).

test_drift_matrix.py then checks what preflight says about it; these tests check that the
stack is really there, in the form a real node has it.
"""
from __future__ import annotations

import json
import os
import re

import pytest
import testinfra

from conftest import stack

STACK = stack()
# Both commits of files/megatron-checkout.sh are reproducible: fixed trees, authors and dates.
MEGATRON_HEAD = "50fd2836c9636c8a542794c16975a33e0bb528cb"


@pytest.fixture(scope="module")
def job(host):
    return host.ansible.get_variables()


def test_venv_has_torch_cpu_and_deepspeed(host, job):
    python = "%s/bin/python" % job["megatron_job_venv"]
    assert host.file(python).is_symlink  # a venv made by python3 -m venv, not a copy of Python
    out = host.check_output("%s -I -c %s", python,
                            "import importlib.metadata as m, sys; print(sys.prefix, m.version('torch'), m.version('deepspeed'))")
    assert out.split() == [job["megatron_job_venv"], "2.13.0+cpu", STACK["preflight_drift_deepspeed"]]
    assert "Python 3.11." in host.check_output("%s --version", python)


def test_cuda_toolkit_is_11_7_1(host):
    link = host.file(STACK["preflight_drift_cuda_link"])
    assert link.is_symlink and link.linked_to == STACK["preflight_drift_cuda_home"]
    version = json.loads(host.file(STACK["preflight_drift_cuda_home"] + "/version.json").content_string)
    assert version["cuda"] == {"name": "CUDA SDK", "version": "11.7.1"}


@pytest.mark.parametrize("key, prefix, numbers", [
    ("preflight_drift_cudnn_header", "CUDNN", {"MAJOR": "8", "MINOR": "6", "PATCHLEVEL": "0"}),
    ("preflight_drift_nccl_header", "NCCL", {"MAJOR": "2", "MINOR": "16", "PATCH": "5"}),
])
def test_version_headers(host, key, prefix, numbers):
    text = host.file(STACK[key]).content_string
    found = dict(re.findall(r"(?m)^#define %s_(MAJOR|MINOR|PATCHLEVEL|PATCH) (\d+)$" % prefix, text))
    assert found == numbers


def test_driver_standin_is_the_only_standin(host):
    standin = json.loads(host.file(STACK["preflight_drift_standin_file"]).content_string)
    assert standin == STACK["preflight_drift_standin"]
    assert set(standin) == {"driver", "gpus"}
    # No NVIDIA driver or tool pretends to be there.
    assert not host.file("/proc/driver/nvidia/version").exists
    assert not host.exists("nvidia-smi") and not host.exists("nvcc")


def test_megatron_checkout_is_a_git_repository_at_the_same_commit(host, job):
    git = "git -c safe.directory=* -C %s" % job["megatron_job_megatron_dir"]
    assert host.check_output(git + " rev-parse HEAD") == MEGATRON_HEAD
    assert host.check_output(git + " rev-parse --abbrev-ref HEAD") == "main"
    assert host.check_output(git + " status --porcelain") == ""
    assert host.file(job["megatron_job_megatron_dir"] + "/megatron/__init__.py").exists


def test_memlock_limits_ask_for_unlimited(host):
    lines = {tuple(line.split()) for line in host.file(STACK["preflight_drift_memlock_file"]).content_string.splitlines()
             if line and not line.startswith("#")}
    assert lines == {(who, kind, "memlock", "unlimited") for who in ("*", "root") for kind in ("soft", "hard")}


def test_head_reaches_the_node_as_the_training_user(host, job):
    """What the launcher (pdsh) does: ssh from the head node, batch mode, strict host keys."""
    head = sorted(host.ansible.get_variables()["groups"]["megatron_head"])[0]
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    head_host = testinfra.get_host("ansible://%s?ansible_inventory=%s" % (head, inventory))
    name = host.ansible.get_variables()["inventory_hostname"]
    cmd = "ssh -o BatchMode=yes -o StrictHostKeyChecking=yes %s hostname" % name
    out = head_host.check_output("su - %s -c %s", job["cluster_ssh_user"], cmd)
    assert out == name


def test_clock_is_synchronised_by_chrony(host):
    tracking = host.check_output("chronyc -n tracking")
    assert re.search(r"(?m)^Leap status\s*:\s*Normal$", tracking)
