# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Cluster-wide checks, run once: every artifact was fetched from the mirror exactly once for
the three nodes (its access log), and, by running ansible-playbook against the converged
nodes, what must NOT happen: a tampered archive installed, a cuDNN build for the wrong CUDA
major, a change reported by the driver role in check mode on a node whose driver already
satisfies the profile, or by the toolkit role on a node whose toolkit, installed by someone
else, is the profile's release."""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess

import pytest
import testinfra

SCENARIO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE", "")
EPHEMERAL = os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "")

pytestmark = pytest.mark.skipif(not INVENTORY, reason="runs under molecule verify (needs MOLECULE_INVENTORY_FILE)")

# These tests drive ansible-playbook themselves: run them once, not once per host.
testinfra_hosts = ["node1"]


def _playbook(name: str, *args: str) -> subprocess.CompletedProcess:
    cmd = ["ansible-playbook", "-i", INVENTORY, os.path.join(SCENARIO, name), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False,
                          env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))


def _text(result: subprocess.CompletedProcess) -> str:
    """stdout and stderr with whitespace collapsed: Ansible wraps long messages."""
    return " ".join((result.stdout + " " + result.stderr).split())


def _node(name: str):
    return testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY))


def _recap(stdout: str, host: str) -> dict:
    match = re.search(r"^%s\s+:\s+(.*)$" % re.escape(host), stdout, re.M)
    assert match, stdout[-2000:]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match.group(1))}


def _mirror() -> dict:
    with open(os.path.join(EPHEMERAL, "mirror.json")) as handle:
        return json.load(handle)


def test_each_artifact_fetched_once_for_three_nodes(host):
    """Converge and idempotence ran on node1..node3: one upstream download per artifact."""
    mirror = _mirror()
    with open(mirror["access_log"]) as handle:
        log = handle.read()
    served = re.findall(r'"GET (/\S+) HTTP/1\.[01]" 200 ', log)
    for rel in mirror["files"]:
        if rel.startswith(mirror["tampered_prefix"] + "/"):
            continue
        assert served.count("/" + rel) == 1, (rel, served)


def test_tampered_archive_is_refused_and_nothing_installed(host):
    mirror = _mirror()
    manifest_path = os.path.join(mirror["site"], "tampered/compute/cuda/redist/redistrib_11.7.1.json")
    with open(manifest_path) as handle:
        entry = json.load(handle)["cuda_cudart"]["linux-x86_64"]
    expected = entry["sha256"]
    with open(os.path.join(mirror["site"], "tampered/compute/cuda/redist", entry["relative_path"]), "rb") as handle:
        found = hashlib.sha256(handle.read()).hexdigest()

    result = _playbook("refuse-tampered.yml")
    out = _text(result)
    assert result.returncode != 0, out[-3000:]
    assert "refusing to install on node3" in out
    assert "cuda_cudart-linux-x86_64-11.7.99-archive.tar.xz" in out
    assert "found sha256 %s, expected %s" % (found, expected) in out
    assert "Nothing was installed" in out
    assert "If the mirror is stale or tampered with, re-sync it from NVIDIA" in out
    assert "download(s) failed" not in out

    node3 = _node("node3")
    assert not node3.file("/opt/megatron-tampered").exists
    assert node3.file("/var/cache/megatron_ds/nvidia").listdir() == []
    # get_url deletes a download whose checksum differs: the cache keeps nothing bad either.
    cached = os.path.join(EPHEMERAL, "tampered-cache/compute/cuda/redist/cuda_cudart/linux-x86_64")
    assert not os.path.exists(cached) or os.listdir(cached) == []


def test_unreachable_mirror_is_refused_as_a_download_failure(host):
    result = _playbook("refuse-unreachable.yml")
    out = _text(result)
    assert result.returncode != 0, out[-3000:]
    assert "refusing to install on node3" in out
    assert "redistrib_11.7.1.json from http://127.0.0.1:9/mirror/compute/cuda/redist/redistrib_11.7.1.json" in out
    assert "1 download(s) failed: check that localhost reaches http://127.0.0.1:9/mirror/compute/cuda/redist" in out
    assert "set megatron_nvidia_mirror_url" in out
    # Not a checksum problem: no advice to re-sync a stale or tampered mirror.
    assert "stale or tampered" not in out
    assert "Nothing was installed" in out
    assert not _node("node3").file("/opt/megatron-unreachable").exists


def test_cudnn_for_another_cuda_major_is_refused_before_any_change(host):
    node2 = _node("node2")
    marker = "/usr/local/cuda-11.7/.megatron_ds-cudnn.json"
    before = node2.file(marker).content_string

    result = _playbook("refuse-cudnn-major.yml")
    out = _text(result)
    assert result.returncode != 0, out[-3000:]
    assert "cudnn on node2: found CUDA 11.7 at /usr/local/cuda-11.7 (CUDA major 11)" in out
    assert "expected CUDA major 12" in out
    assert "Nothing was changed" in out
    assert _recap(result.stdout, "node2")["changed"] == 0
    assert node2.file(marker).content_string == before


def test_driver_role_in_check_mode_reports_no_change_on_a_satisfied_node(host):
    result = _playbook("check-driver.yml", "--check")
    out = _text(result)
    assert result.returncode == 0, out[-3000:]
    recap = _recap(result.stdout, "node1")
    assert recap["changed"] == 0 and recap["failed"] == 0
    assert "keep 515.65.01" in out


@pytest.fixture()
def vendor_stack():
    """node2 gets a GPU stack these roles did not install: the converged CUDA 11.7 tree (with its
    cuDNN) and NCCL tree copied under /opt/vendor without the install markers. The test mirror's
    toolkit has NVIDIA's real ptxas and no nvcc driver, so cuda_toolkit finds the release through
    its ptxas fallback."""
    node2 = _node("node2")
    setup = node2.run("mkdir -p /opt/vendor && cp -a /usr/local/cuda-11.7 /opt/vendor/cuda-11.7 && "
                      "cp -a /usr/local/nccl-2.16.5 /opt/vendor/nccl-2.16.5 && "
                      "rm /opt/vendor/cuda-11.7/.megatron_ds-*.json /opt/vendor/nccl-2.16.5/.megatron_ds-*.json && "
                      "/opt/vendor/cuda-11.7/bin/ptxas --version")
    assert setup.rc == 0, setup.stderr
    assert "release 11.7, V11.7.99" in setup.stdout
    yield node2
    node2.run("rm -rf /opt/vendor")


@pytest.mark.parametrize("check", [True, False], ids=["check mode", "applied"])
def test_stack_installed_by_someone_else_is_adopted(vendor_stack, check):
    result = _playbook("adopt-stack.yml", *(["--check"] if check else []))
    out = _text(result)
    assert result.returncode == 0, out[-3000:]
    assert _recap(result.stdout, "node2")["changed"] == 0
    assert ("node2: found CUDA 11.7 in /opt/vendor/cuda-11.7 (V11.7.99), not installed by this role: it is "
            "the release of CUDA 11.7.1 (profile cu117), so cuda_toolkit leaves it") in out
    assert ("node2: found cuDNN 8.6.0 (/opt/vendor/cuda-11.7/include/cudnn_version.h, "
            "/opt/vendor/cuda-11.7/lib64/libcudnn.so.8), not installed by this role: it is cuDNN 8.6.0.163") in out
    assert ("node2: found NCCL 2.16.5 (/opt/vendor/nccl-2.16.5/include/nccl.h, /opt/vendor/nccl-2.16.5/lib/libnccl.so.2), "
            "not installed by this role: it is NCCL 2.16.5-1") in out
    # Nothing planned, fetched or deployed: those includes were skipped (their TASK headers still
    # print), so none was included and no artifact task ran; no link made, no marker written.
    for included in ("plan-redist.yml for node2", "/deploy.yml for node2", "manifest.yml for node2",
                     "deploy-txz.yml for node2"):
        assert included not in out, included
    # nvidia_artifacts ran only its adopt entry point: none of deploy's or fetch's tasks.
    for task in ("Read the install marker of", "Decide whether this node needs", "Download into the cache"):
        assert task not in out, task
    for path in ("/opt/vendor/cuda", "/opt/vendor/nccl", "/opt/vendor/cuda-11.7/.megatron_ds-cuda_toolkit.json",
                 "/opt/vendor/cuda-11.7/.megatron_ds-cudnn.json", "/opt/vendor/nccl-2.16.5/.megatron_ds-nccl.json"):
        assert not vendor_stack.file(path).exists, path
    assert vendor_stack.file("/usr/local/cuda").linked_to == "/usr/local/cuda-11.7"
    assert vendor_stack.file("/usr/local/nccl").linked_to == "/usr/local/nccl-2.16.5"


def test_adoption_can_be_turned_off(vendor_stack):
    result = _playbook("adopt-stack.yml", "--check", "-e", "cuda_toolkit_adopt=false", "-e", "cudnn_adopt=false",
                       "-e", "nccl_adopt=false")
    out = _text(result)
    assert result.returncode == 0, out[-3000:]
    assert "found CUDA" not in out and "found cuDNN" not in out and "found NCCL" not in out
    # In check mode the profile's own toolkit, cuDNN and NCCL would be installed over them.
    assert "CUDA toolkit on node2 would install" in out
    assert "cuDNN on node2 would install" in out
    assert "NCCL on node2 would install" in out
    assert _recap(result.stdout, "node2")["changed"] >= 3
    assert not vendor_stack.file("/opt/vendor/cuda-11.7/.megatron_ds-cuda_toolkit.json").exists
