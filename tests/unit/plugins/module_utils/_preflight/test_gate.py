# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Unit tables for the preflight checks (plugins/module_utils/_preflight/gate.py)."""
from __future__ import annotations

import copy
import json
import os
import re
from typing import Any, Callable, Dict, List, Optional

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import parsers as _gpu_parsers
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import python_stack as _gpu_python
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import gate as pf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import cluster as pcluster
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import matrix as pmatrix
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import rows as prows
from ansible_collections.megatron_ds.cluster.plugins.module_utils import _report
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles

NODES = ("node1", "node2", "node3")
FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "gpu-host-h200x2")

# What a node built for a profile reports where the profile only pins a series (nvcc's own
# component version, torch's bundled libraries). Real values: nvcc 11.7.99 ships with CUDA
# 11.7.1 (docs/upstream-facts.md §H), 13.0.88 with 13.0 (the GPU validation host).
NVCC = {"cu117": "11.7.99", "cu121": "12.1.105", "cu130": "13.0.88"}
TORCH_CUDNN = {"cu117": "8.5.0", "cu121": "8.9.2", "cu130": "9.19.0"}
TORCH_NCCL = {"cu117": "2.14.3", "cu121": "2.18.1", "cu130": "2.28.9"}
DRIVER_FM_PROFILES = ("cu117", "cu121", "cu130")


def whole(checked: int, source: Optional[str]) -> Dict[str, Any]:
    """gpu_stack_facts' ``files`` of an install that matches its record (pip's RECORD, git's index)."""
    return {"source": source, "checked": checked, "bad_count": 0, "bad": [], "error": None}


def make_node(profile_name: str, hostname: str) -> Dict[str, Any]:
    """gpu_stack_facts of a node that matches ``profile_name`` exactly (an 8 x A100 HGX node)."""
    profile = _stack_profiles.get(profile_name)
    gpu = profile["accelerator"] == "cuda"
    venv = "/opt/megatron/venv"
    python = {"cu117": "3.9.18", "cu121": "3.10.12", "cu130": "3.12.3", "cpu": "3.11.2"}[profile_name]
    torch_version = profile["torch"]["pip"].partition("==")[2] or "2.13.0"
    driver = profile["driver"]["install"] if gpu else None
    facts: Dict[str, Any] = {
        "hostname": hostname,
        "os": {"id": "ubuntu", "version_id": "22.04"},
        "python": {"version": python, "executable": venv + "/bin/python3"},
        "driver": {"version": driver, "kernel_module": "proprietary" if gpu else None, "source": "proc" if gpu else None},
        "gpus": {
            "count": 8 if gpu else 0,
            "model": "NVIDIA A100-SXM4-80GB" if gpu else None,
            "models": ["NVIDIA A100-SXM4-80GB"] if gpu else [],
            "memory_mib": 81920 if gpu else None,
            "uuids": ["GPU-%s-%d" % (hostname, i) for i in range(8)] if gpu else [],
            "list": [
                {"index": i, "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-%s-%d" % (hostname, i),
                 "memory_mib": 81920, "pci_bus_id": "0000:%02x:00.0" % (0x10 + i), "persistence_mode": "Enabled"}
                for i in range(8)
            ] if gpu else [],
        },
        "nvswitch": {"present": gpu, "count": 6 if gpu else 0},
        "fabric_manager": {"installed": gpu, "version": driver, "active": gpu},
        "cuda": {
            "version": profile["cuda"]["install"] if gpu else None,
            "source": "version.json" if gpu else None,
            "home": "/usr/local/cuda" if gpu else None,
            "nvcc_version": NVCC.get(profile_name),
            "installed": [{"path": "/usr/local/cuda-%s" % profile["cuda"]["version"], "version": profile["cuda"]["install"],
                           "source": "version.json"}] if gpu else [],
        },
        "cudnn": {"version": profile["cudnn"]["install"] if gpu else None, "source": "header" if gpu else None},
        "nccl": {"version": profile["nccl"]["install"].split("-")[0] if gpu else None, "source": "header" if gpu else None,
                 "library": "/usr/lib/x86_64-linux-gnu/libnccl.so.2" if gpu else None},
        "torch": {
            "version": "%s+%s" % (torch_version, profile["torch"]["local"]),
            "cuda": profile["torch"]["cuda"],
            "cudnn": TORCH_CUDNN.get(profile_name),
            "nccl": TORCH_NCCL.get(profile_name),
            "error": None,
            "files": whole(20817, venv + "/lib/python3/site-packages/torch-x.dist-info/RECORD"),
        },
        "deepspeed": {"version": profile["deepspeed"]["pip"].partition("==")[2], "error": None,
                      "files": whole(1190, venv + "/lib/python3/site-packages/deepspeed-x.dist-info/RECORD")},
        "venv": venv,
        "megatron_deepspeed": {"path": "/opt/megatron/Megatron-DeepSpeed", "commit": "9446eaac", "present": True,
                               "files": whole(1342, "/opt/megatron/Megatron-DeepSpeed/.git/index")},
        "apex": {"present": gpu, "cuda_ext": gpu,
                 "files": whole(260, venv + "/lib/python3/site-packages/apex-0.1.dist-info/RECORD") if gpu else whole(0, None)},
        "infiniband": {
            "hcas": [
                {"name": "mlx5_%d" % i, "ports": [{"port": 1, "state": "Active", "phys_state": "LinkUp",
                                                  "rate": "200 Gb/sec (4X HDR)", "link_layer": "InfiniBand"}]}
                for i in range(4)
            ],
            "peermem_loaded": gpu,
        },
        "memlock": {"current": "unlimited", "noninteractive_ssh": "unlimited"},
        "disk": {"/shared": {"free_bytes": 2 * 10**12, "exists": True}},
        "clock": {"synchronized": True, "offset_ms": 0.4, "source": "chrony"},
    }
    return facts


def make_cluster(profile_name: str = "cu117") -> Dict[str, Dict[str, Any]]:
    return {node: make_node(profile_name, node) for node in NODES}


def full_options(profile_name: str = "cu117") -> Dict[str, Any]:
    gpu = profile_name != "cpu"
    return {
        "slots": {node: 8 for node in NODES},
        "infiniband_required": True,
        "gpudirect": gpu,
        "min_free_gb": 100,
        "ssh_reachable": {node: True for node in NODES},
        "max_clock_offset_ms": 100,
    }


def run(cluster: Dict[str, Any], profile_name: str = "cu117", options: Optional[Dict[str, Any]] = None) -> List[pf.Row]:
    return pf.run_checks(cluster, _stack_profiles.get(profile_name), full_options(profile_name) if options is None else options)


def by_status(rows: List[pf.Row], status: str) -> List[pf.Row]:
    return [row for row in rows if row.status == status]


def row_for(rows: List[pf.Row], check: str, node: str) -> pf.Row:
    matches = [row for row in rows if row.check == check and row.node == node]
    assert len(matches) == 1, (check, node, matches)
    return matches[0]


def setpath(facts: Dict[str, Any], path: str, value: Any) -> None:
    keys = path.split(".")
    for key in keys[:-1]:
        facts = facts[key]
    facts[keys[-1]] = value


def mutate(**changes: Any) -> Callable[[Dict[str, Any]], None]:
    """A mutation: dotted fact path -> new value (double underscores stand for dots)."""
    def apply(facts: Dict[str, Any]) -> None:
        for path, value in changes.items():
            setpath(facts, path.replace("__", "."), value)
    return apply


# ---------------------------------------------------------------------------------------
# The clean clusters
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile_name", ["cu117", "cu121", "cu130", "cpu"])
def test_clean_cluster_passes(profile_name):
    rows = run(make_cluster(profile_name), profile_name)
    assert by_status(rows, pf.FAIL) == []
    assert by_status(rows, pf.WARN) == []
    assert len(by_status(rows, pf.PASS)) > 20


def test_clean_cluster_has_a_row_per_node_for_every_matrix_check():
    rows = run(make_cluster())
    for check in ("driver.version", "cuda.toolkit", "cuda.nvcc_vs_torch", "cudnn.system", "cudnn.torch", "nccl.system",
                  "nccl.torch", "torch.version", "torch.cuda", "deepspeed.version", "python.version", "apex.cuda_ext",
                  "gpu.present", "fabric_manager.version", "same.torch", "hostfile.slots", "memlock.unlimited",
                  "infiniband.ports", "infiniband.peermem", "disk.free", "ssh.from_head", "clock.sync"):
        assert [row_for(rows, check, node).status for node in NODES] == [pf.PASS] * 3, check


def test_cpu_profile_skips_gpu_rows_with_a_reason():
    rows = run(make_cluster("cpu"), "cpu")
    for check in ("driver.version", "fabric_manager.version", "cuda.toolkit", "cuda.nvcc_vs_torch", "cudnn.system",
                  "cudnn.torch", "nccl.system", "nccl.torch", "torch.cuda", "apex.cuda_ext", "gpu.present", "hostfile.slots"):
        row = row_for(rows, check, "node1")
        assert row.status == pf.SKIP and "cpu" in row.fix, check
    for check in ("same.driver", "same.cuda", "same.gpu_count", "same.torch_nccl"):
        assert row_for(rows, check, pf.ALL_NODES).status == pf.SKIP
    # The Python stack is still checked on CPU.
    assert row_for(rows, "torch.version", "node1").status == pf.PASS
    assert row_for(rows, "deepspeed.version", "node1").status == pf.PASS


# ---------------------------------------------------------------------------------------
# Drift on one node: exactly that node and component fail, nothing else does
# ---------------------------------------------------------------------------------------

DRIFT = [
    # (id, profile, mutation of node2, failing components on node2)
    ("driver-too-old", "cu117", mutate(driver__version="510.47.03", fabric_manager__version="510.47.03"), {"driver"}),
    ("driver-other-branch", "cu117", mutate(driver__version="525.85.12", fabric_manager__version="525.85.12"), {"driver"}),
    ("fabric-manager-version", "cu117", mutate(fabric_manager__version="515.48.07"), {"fabric_manager"}),
    ("fabric-manager-inactive", "cu117", mutate(fabric_manager__active=False), {"fabric_manager"}),
    ("fabric-manager-missing", "cu117", mutate(fabric_manager__installed=False, fabric_manager__version=None), {"fabric_manager"}),
    ("cuda-toolkit-update", "cu117", mutate(cuda__version="11.7.0", cuda__nvcc_version="11.7.64"), {"cuda", "nvcc"}),
    # 11.8 on one node: toolkit and driver floor both move (11.8 needs 520.61.05), nvcc 11.8
    # against torch 11.7 is still accepted by DeepSpeed.
    ("cuda-toolkit-11.8", "cu117", mutate(cuda__version="11.8.0", cuda__nvcc_version="11.8.89"), {"cuda", "nvcc", "driver"}),
    ("cuda-missing", "cu117", mutate(cuda__version=None, cuda__source=None, cuda__nvcc_version=None), {"cuda", "nvcc"}),
    ("nvcc-12-vs-torch-13", "cu130", mutate(cuda__version="12.8", cuda__source="nvcc", cuda__nvcc_version="12.8.93"), {"cuda", "nvcc"}),
    ("cudnn-minor", "cu117", mutate(cudnn__version="8.5.0.96"), {"cudnn"}),
    ("cudnn-major", "cu117", mutate(cudnn__version="9.1.0"), {"cudnn"}),
    ("cudnn-missing", "cu117", mutate(cudnn__version=None), {"cudnn"}),
    ("torch-cudnn", "cu117", mutate(torch__cudnn="8.6.0"), {"torch.cudnn"}),
    ("torch-cudnn-code", "cu130", mutate(torch__cudnn="90100"), {"torch.cudnn"}),
    ("nccl", "cu117", mutate(nccl__version="2.18.3"), {"nccl"}),
    ("nccl-missing", "cu130", mutate(nccl__version=None), {"nccl"}),
    # cu117 does not pin torch's NCCL: only the cross-node rule catches it.
    ("torch-nccl-unpinned", "cu117", mutate(torch__nccl="2.14.4"), {"torch.nccl"}),
    ("torch-nccl-pinned", "cu130", mutate(torch__nccl="2.27.3"), {"torch.nccl"}),
    ("torch-version", "cu117", mutate(torch__version="1.13.0+cu117"), {"torch"}),
    ("torch-major", "cu117", mutate(torch__version="2.0.1+cu117"), {"torch"}),
    ("torch-cuda-build", "cu117", mutate(torch__version="1.13.1+cu116", torch__cuda="11.6"), {"torch"}),
    ("torch-cpu-build", "cu130", mutate(torch__version="2.11.0+cpu", torch__cuda=None, torch__cudnn=None, torch__nccl=None), {"torch"}),
    ("torch-broken", "cu117", mutate(torch__version=None, torch__cuda=None, torch__cudnn=None, torch__nccl=None,
                                     torch__error="ImportError: libcudnn.so.8: cannot open shared object file"), {"torch"}),
    # A version with an error: what pip recorded is there, the package is not (files probe), or
    # the import fails (import probe). The version alone must not pass.
    ("torch-half-removed", "cu117", mutate(torch__error="torch's dist-info says 1.13.1 but site-packages/torch/version.py "
                                                        "is missing: a half-removed install"), {"torch"}),
    ("torch-half-removed-cpu", "cpu", mutate(torch__cuda=None, torch__error="torch's dist-info says 2.13.0+cpu but "
                                             "site-packages/torch/version.py is missing: a half-removed install"), {"torch"}),
    ("torch-import-fails-with-metadata", "cu130", mutate(torch__cuda=None, torch__cudnn=None, torch__nccl=None,
                                                         torch__error="ModuleNotFoundError: No module named 'torch'"),
     {"torch"}),
    ("deepspeed", "cu117", mutate(deepspeed__version="0.9.5"), {"deepspeed"}),
    ("deepspeed-half-removed", "cu121", mutate(deepspeed__error="deepspeed's dist-info says 0.19.6 but "
                                               "site-packages/deepspeed/__init__.py is missing: a half-removed install"),
     {"deepspeed"}),
    ("deepspeed-import-fails-with-metadata", "cpu", mutate(deepspeed__error="ImportError: cannot import name 'BUFSIZE'"),
     {"deepspeed"}),
    ("deepspeed-too-new-for-mds", "cu130", mutate(deepspeed__version="0.19.7"), {"deepspeed"}),
    ("deepspeed-broken", "cu117", mutate(deepspeed__version=None, deepspeed__error="ImportError: cannot import name 'BUFSIZE'"), {"deepspeed"}),
    ("python-in-range", "cu117", mutate(python__version="3.10.12"), {"python"}),
    ("python-out-of-range", "cu117", mutate(python__version="3.12.1"), {"python"}),
    ("apex-no-cuda-ext", "cu117", mutate(apex__cuda_ext=False), {"apex"}),
    ("megatron-commit", "cu117", mutate(megatron_deepspeed__commit="4efb479d"), {"megatron_deepspeed"}),
    ("megatron-path", "cu117", mutate(megatron_deepspeed__path="/home/me/Megatron-DeepSpeed"), {"megatron_deepspeed"}),
    ("venv-path", "cu117", mutate(venv="/opt/other/venv", python__executable="/opt/other/venv/bin/python3"), {"venv"}),
    ("memlock-current", "cu117", mutate(memlock__current="65536"), {"memlock"}),
    ("memlock-ssh", "cu117", mutate(memlock__noninteractive_ssh="64"), {"memlock"}),
    ("gpu-count", "cu117", mutate(gpus__count=7), {"gpu", "hostfile"}),
    ("gpu-none", "cu117", mutate(gpus__count=0), {"gpu", "hostfile"}),
    ("gpu-model", "cu117", mutate(gpus__model="NVIDIA A100-SXM4-40GB"), {"gpu"}),
    ("clock-unsynced", "cu117", mutate(clock__synchronized=False), {"clock"}),
    ("clock-offset", "cu117", mutate(clock__offset_ms=-250.0), {"clock"}),
    ("ib-all-down", "cu117", lambda f: [p.update(state="Down", phys_state="Polling")
                                        for h in f["infiniband"]["hcas"] for p in h["ports"]], {"infiniband"}),
    ("ib-no-hca", "cu117", mutate(infiniband__hcas=[]), {"infiniband"}),
    ("peermem", "cu117", mutate(infiniband__peermem_loaded=False), {"peermem"}),
    ("disk-full", "cu117", mutate(disk={"/shared": {"free_bytes": 5 * 10**9, "exists": True}}), {"disk"}),
    ("disk-not-mounted", "cu117", mutate(disk={"/shared": {"free_bytes": None, "exists": False}}), {"disk"}),
]


@pytest.mark.parametrize("case, profile_name, change, components", DRIFT, ids=[c[0] for c in DRIFT])
def test_drift_on_one_node_fails_that_node_and_component_only(case, profile_name, change, components):
    cluster = make_cluster(profile_name)
    change(cluster["node2"])
    rows = run(cluster, profile_name)
    failed = by_status(rows, pf.FAIL)
    assert failed, case
    assert {row.node for row in failed} == {"node2"}
    assert {row.component for row in failed} == components
    for row in failed:
        assert row.found and row.expected and row.fix, row
        assert row.found != row.expected
    # No false positive on the untouched nodes, and no stray warnings anywhere.
    assert [row for row in rows if row.node in ("node1", "node3") and row.status in (pf.FAIL, pf.WARN)] == []
    assert by_status(rows, pf.WARN) == []


@pytest.mark.parametrize("component, check, version", [
    ("torch", "torch.version", "1.13.1+cu117"),
    ("deepspeed", "deepspeed.version", "0.9.2"),
])
def test_a_version_with_an_error_fails_and_says_how_to_reinstall(component, check, version):
    cluster = make_cluster("cu117")
    error = "%s's dist-info says %s but site-packages/%s is missing: a half-removed install" % (
        component, version.split("+")[0], component)
    cluster["node2"][component]["error"] = error
    rows = run(cluster, "cu117")
    row = row_for(rows, check, "node2")
    assert row.status == pf.FAIL
    assert row.found == "%s, broken: %s" % (version, error)
    assert "node2" in row.fix and "python_env" in row.fix and "--force-reinstall" in row.fix
    assert "/opt/megatron/venv/bin/pip" in row.fix
    if component == "torch":
        # Reported once: what depends on torch's own values skips on that node.
        for dependent in ("cuda.nvcc_vs_torch", "cudnn.torch", "nccl.torch", "torch.cuda"):
            dep = row_for(rows, dependent, "node2")
            assert dep.status == pf.SKIP and "torch is broken" in dep.fix, dep
        assert not [r for r in rows if r.check.startswith("same.torch_") and r.node == "node2"]


@pytest.mark.parametrize("header, status", [
    ("8.6.0", pf.PASS),         # what cudnn_version.h of 8.6.0.163 carries (the known bug: it failed)
    ("8.6.0.163", pf.PASS),
    ("8.6.1", pf.FAIL),
    ("8.5.0", pf.FAIL),
])
def test_cu117_system_cudnn_is_compared_at_the_headers_precision(header, status):
    cluster = make_cluster("cu117")
    for facts in cluster.values():
        facts["cudnn"]["version"] = header
    rows = run(cluster, "cu117")
    assert {row_for(rows, "cudnn.system", node).status for node in NODES} == {status}


@pytest.mark.parametrize("what, check", [("cudnn", "cudnn.torch"), ("nccl", "nccl.torch")])
@pytest.mark.parametrize("source, status", [("files", pf.WARN), ("import", pf.FAIL), (None, pf.FAIL)])
def test_torch_library_unreadable_from_files_warns(what, check, source, status):
    # A torch that bundles cuDNN/NCCL in torch/lib names no version there: the files probe
    # cannot tell, so it is a warning that says how to read it, not a false failure.
    cluster = make_cluster("cu130")
    cluster["node2"]["torch"][what] = None
    if source:
        cluster["node2"]["torch"]["source"] = source
    row = row_for(run(cluster, "cu130"), check, "node2")
    assert row.status == status
    if status == pf.WARN:
        assert row.found == "not readable from the venv's files" and "preflight_python_probe=import" in row.fix
        assert "node2" in row.fix


@pytest.mark.parametrize(
    "path, value, check, components",
    [
        ("ssh", False, "ssh.from_head", {"ssh"}),
        ("ssh", 255, "ssh.from_head", {"ssh"}),
        ("slots", 4, "hostfile.slots", {"hostfile"}),
    ],
)
def test_cluster_options_on_one_node(path, value, check, components):
    options = full_options()
    options["ssh_reachable" if path == "ssh" else "slots"]["node2"] = value
    rows = run(make_cluster(), options=options)
    failed = by_status(rows, pf.FAIL)
    assert [(row.check, row.node) for row in failed] == [(check, "node2")]
    assert {row.component for row in failed} == components


def test_ssh_exit_code_zero_counts_as_reachable():
    options = full_options()
    options["ssh_reachable"] = {node: 0 for node in NODES}
    assert by_status(run(make_cluster(), options=options), pf.FAIL) == []


def test_unreachable_node_is_one_fail_row_and_is_left_out_of_the_rest():
    cluster: Dict[str, Any] = make_cluster()
    cluster["node2"] = {"unreachable": True, "msg": "Failed to connect to the host via ssh: timeout"}
    rows = run(cluster)
    failed = by_status(rows, pf.FAIL)
    assert [(row.check, row.node, row.component) for row in failed] == [("facts.gathered", "node2", "connection")]
    assert failed[0].found == "unreachable over ssh node2:22: Failed to connect to the host via ssh: timeout"
    assert not [row for row in rows if row.node == "node2" and row.check != "facts.gathered"]
    assert pf.summary_line(rows, "cu117").endswith("; failing: node2; unreachable: node2")


# What Ansible registers for a node it cannot reach, per connection plugin.
DOCKER_STOPPED = {  # community.docker.docker, container stopped: a "module failure", not unreachable
    "failed": True, "msg": "Module result deserialization failed: No start of json char found", "rc": 1,
    "module_stdout": "", "module_stderr": "Error response from daemon: container 6c3f0a is not running\n"}
SSH_DOWN = {"unreachable": True, "changed": False,
            "msg": "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.13 port 22: Connection refused"}


@pytest.mark.parametrize("raw, error", [
    (SSH_DOWN, "Failed to connect to the host via ssh: ssh: connect to host 10.0.0.13 port 22: Connection refused"),
    (DOCKER_STOPPED, "Error response from daemon: container 6c3f0a is not running"),
    (dict(DOCKER_STOPPED, module_stderr="Error response from daemon: No such container: node3"),
     "Error response from daemon: No such container: node3"),
    ({"failed": True, "msg": "MODULE FAILURE", "module_stderr": "ssh: Could not resolve hostname gpu9: Name or service not known"},
     "ssh: Could not resolve hostname gpu9: Name or service not known"),
    ({"unreachable": True}, "no error message"),
    # The node answered and the module failed: not a connection problem.
    ({"failed": True, "msg": "gpu_stack_facts: timeout is 0; give a positive number of seconds per command"}, None),
    ({"changed": False, "ansible_facts": {}}, None),
    (None, None),
])
def test_unreachable_error(raw, error):
    assert pf.unreachable_error(raw) == error


@pytest.mark.parametrize("variables, described", [
    ({"ansible_connection": "community.docker.docker", "ansible_host": None}, "docker container node3"),
    ({"ansible_connection": "community.docker.docker", "ansible_host": "pfbench-node3"}, "docker container pfbench-node3"),
    ({"ansible_connection": "docker"}, "docker container node3"),
    ({}, "ssh node3:22"),
    ({"ansible_host": "10.0.0.13", "ansible_port": 2222, "ansible_user": "ops"}, "ssh ops@10.0.0.13:2222"),
    ({"ansible_connection": "ansible.builtin.ssh", "ansible_host": "gpu3.example"}, "ssh gpu3.example:22"),
    ({"ansible_connection": "local"}, "local"),
    ({"ansible_connection": "community.general.lxd", "ansible_host": "c3"}, "community.general.lxd c3"),
    (None, "ssh node3:22"),
])
def test_describe_connection(variables, described):
    assert pf.describe_connection("node3", variables) == described


@pytest.mark.parametrize("raw, connection, found, fix", [
    (DOCKER_STOPPED, "docker container node3",
     "unreachable over docker container node3: Error response from daemon: container 6c3f0a is not running",
     "start the container (docker start node3), then rerun playbooks/preflight.yml"),
    (SSH_DOWN, "ssh ops@10.0.0.13:22",
     "unreachable over ssh ops@10.0.0.13:22: Failed to connect to the host via ssh: ssh: connect to host 10.0.0.13 "
     "port 22: Connection refused",
     "ssh -p 22 ops@10.0.0.13 true must work"),
])
def test_stopped_node_is_called_unreachable_with_its_connection(raw, connection, found, fix):
    cluster: Dict[str, Any] = make_cluster()
    cluster["node3"] = raw
    options = dict(full_options(), connections={"node3": connection})
    row = row_for(run(cluster, options=options), "facts.gathered", "node3")
    assert (row.status, row.component, row.found) == (pf.FAIL, "connection", found)
    assert row.expected == "node3 answers over %s" % connection
    assert fix in row.fix
    assert "deserialization" not in row.found


@pytest.mark.parametrize(
    "raw, reason",
    [
        (None, "no gpu_stack_facts"),
        ({}, "no gpu_stack_facts"),
        ({"failed": True, "msg": "nvidia-smi timed out"}, "gpu_stack_facts failed: nvidia-smi timed out"),
        ({"skipped": True}, "skipped"),
    ],
)
def test_missing_facts_reason(raw, reason):
    cluster: Dict[str, Any] = make_cluster()
    cluster["node3"] = raw
    row = row_for(run(cluster), "facts.gathered", "node3")
    assert row.status == pf.FAIL and reason in row.found


def test_node_named_only_in_the_hostfile_has_no_facts():
    options = full_options()
    options["slots"]["node4"] = 8
    failed = by_status(run(make_cluster(), options=options), pf.FAIL)
    assert [(row.check, row.node) for row in failed] == [("facts.gathered", "node4")]
    assert "not in the play" in failed[0].found


@pytest.mark.parametrize(
    "wrapper",
    [
        lambda facts: {"ansible_facts": {"gpu_stack_facts": facts}, "changed": False},
        lambda facts: {"gpu_stack_facts": facts, "changed": False},
    ],
    ids=["ansible_facts", "top-level"],
)
def test_module_results_are_unwrapped(wrapper):
    cluster = {node: wrapper(facts) for node, facts in make_cluster().items()}
    assert by_status(run(cluster), pf.FAIL) == []


# ---------------------------------------------------------------------------------------
# Cross-node majority rules
# ---------------------------------------------------------------------------------------


def test_majority_value_is_expected_and_minority_is_named():
    cluster = make_cluster()
    cluster["node1"]["megatron_deepspeed"]["commit"] = "4efb479d"
    row = row_for(run(cluster), "same.megatron_commit", "node1")
    assert row.status == pf.FAIL
    assert row.found == "4efb479d"
    assert row.expected.startswith("9446eaac")


def test_tie_names_every_node():
    cluster = {node: make_node("cu117", node) for node in ("node1", "node2")}
    cluster["node2"]["megatron_deepspeed"]["commit"] = "4efb479d"
    options = full_options()
    options["slots"] = {"node1": 8, "node2": 8}
    options["ssh_reachable"] = {"node1": True, "node2": True}
    rows = run(cluster, options=options)
    failed = by_status(rows, pf.FAIL)
    assert {(row.check, row.node) for row in failed} == {("same.megatron_commit", "node1"), ("same.megatron_commit", "node2")}
    assert "no majority" in failed[0].expected


def test_one_node_is_always_consistent_with_itself():
    rows = run({"node1": make_node("cu117", "node1")}, options={})
    assert [row for row in rows if row.check.startswith("same.") and row.status != pf.PASS] == []


# ---------------------------------------------------------------------------------------
# Matrix rules on their own
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nvcc, torch_cuda, ok",
    [
        ("11.7.99", "11.7", True),
        ("11.8.89", "11.7", True),  # DeepSpeed lists 11.0-11.8
        ("11.7", "11.8", True),
        ("12.1.105", "12.4", True),
        ("12.7.1", "12.8", False),  # 12.7 is not in DeepSpeed's list
        ("12.8.93", "13.0", False),  # another major
        ("13.0.88", "13.0", True),
        ("13.1.80", "13.0", False),  # 13.x has no entry: must be equal
        ("10.2.89", "11.7", False),
    ],
)
def test_nvcc_torch_rule(nvcc, torch_cuda, ok):
    assert prows.nvcc_torch_compatible(nvcc, torch_cuda) is ok


def test_nvcc_11_8_against_torch_11_7_is_allowed_in_the_matrix_row():
    cluster = make_cluster()
    cluster["node2"]["cuda"].update(version="11.8.0", nvcc_version="11.8.89")
    assert row_for(run(cluster), "cuda.nvcc_vs_torch", "node2").status == pf.PASS


@pytest.mark.parametrize(
    "toolkit, torch_cuda, driver, status, expected_floor",
    [
        ("11.7.1", "11.7", "515.65.01", pf.PASS, "515.65.01"),  # the profile's own minimum binds
        ("11.8.0", "11.7", "515.65.01", pf.FAIL, "520.61.05"),  # the toolkit raises the floor
        ("11.7.1", "11.8", "515.65.01", pf.FAIL, "520.61.05"),  # so does torch's CUDA
        ("11.7.1", "11.7", "515.48.07", pf.FAIL, "515.65.01"),
        ("11.7.1", "11.7", "580.159.04", pf.PASS, "515.65.01"),
    ],
)
def test_driver_floor(toolkit, torch_cuda, driver, status, expected_floor):
    cluster = make_cluster()
    for facts in cluster.values():
        facts["cuda"]["version"] = toolkit
        facts["torch"]["cuda"] = torch_cuda
        facts["driver"]["version"] = facts["fabric_manager"]["version"] = driver
    row = row_for(run(cluster), "driver.version", "node1")
    assert row.status == status
    assert row.expected.startswith(">= " + expected_floor)


def test_driver_missing():
    cluster = make_cluster()
    cluster["node2"]["driver"]["version"] = None
    row = row_for(run(cluster), "driver.version", "node2")
    assert row.status == pf.FAIL and row.found == prows.MISSING and "nvidia_driver" in row.fix


@pytest.mark.parametrize(
    "version, source, status",
    [
        ("11.7.1", "version.json", pf.PASS),
        ("11.7.0", "version.json", pf.FAIL),
        ("11.7.99", "nvcc", pf.PASS),  # nvcc cannot tell 11.7.0 from 11.7.1: judged at 11.7
        ("11.7", "ptxas", pf.PASS),
        ("11.7.99", "library", pf.PASS),  # libcudart.so.11.7.99
        ("11.7", "version.json", pf.PASS),  # a dated version.json reported as major.minor
        ("11.8.89", "nvcc", pf.FAIL),
        ("garbage", "nvcc", pf.FAIL),
    ],
)
def test_toolkit_precision_follows_the_source(version, source, status):
    cluster = make_cluster()
    cluster["node1"]["cuda"].update(version=version, source=source)
    assert row_for(run(cluster), "cuda.toolkit", "node1").status == status


def test_facts_module_problems_are_a_warning_on_the_facts_row():
    cluster = make_cluster()
    cluster["node2"]["errors"] = ["gpus: nvidia-smi -q -x: exit 9: No devices were found"]
    rows = run(cluster)
    assert by_status(rows, pf.FAIL) == []
    row = row_for(rows, "facts.gathered", "node2")
    assert row.status == pf.WARN and "No devices were found" in row.found


def test_fabric_manager_skipped_without_nvswitch():
    cluster = make_cluster()
    for facts in cluster.values():
        facts["nvswitch"] = {"present": False, "count": 0}
        facts["fabric_manager"] = {"installed": False, "version": None, "active": False}
    row = row_for(run(cluster), "fabric_manager.version", "node1")
    assert row.status == pf.SKIP and "NVSwitch" in row.fix


@pytest.mark.parametrize(
    "cudnn_code, nccl_raw, cudnn, nccl",
    [
        (91900, [2, 28, 9], "9.19.0", "2.28.9"),  # the H200 host: torch 2.11 returns a tuple (a list in JSON)
        (90000, 22809, "9.0.0", "2.28.9"),  # cuDNN 9 and NCCL >= 2.9 codes: X*10000 + Y*100 + Z
        (8907, 2804, "8.9.7", "2.8.4"),  # cuDNN 8 and NCCL <= 2.8 codes: X*1000 + Y*100 + Z
    ],
)
def test_library_codes_are_decoded_once_on_the_node(cudnn_code, nccl_raw, cudnn, nccl):
    """The import probe's raw codes are decoded by gpu_stack_facts on the node
    (_gpu_python.parse_probe_output); the gate reads the dotted value it gets, unchanged."""
    probe = {"python": {"version": "3.12.3"},
             "torch": {"version": "2.11.0+cu130", "cuda": "13.0", "cudnn": cudnn_code, "nccl": nccl_raw},
             "deepspeed": {"version": "0.18.2"}, "apex": {}}
    decoded = _gpu_python.parse_probe_output(json.dumps(probe))["torch"]
    assert (decoded["cudnn"], decoded["nccl"]) == (cudnn, nccl)
    cluster = make_cluster("cu130")
    for facts in cluster.values():
        facts["torch"].update(cudnn=decoded["cudnn"], nccl=decoded["nccl"])
    rows = run(cluster, "cu130")
    assert row_for(rows, "nccl.torch", "node1").found == nccl
    assert row_for(rows, "same.torch_cudnn", "node1").found == cudnn


def test_the_gate_has_no_decoder_of_its_own():
    """Decoding lives in _gpu_parsers only (issue 14): no preflight module has a second copy with other
    thresholds."""
    for module in (pf, prows, pmatrix, pcluster):
        assert not hasattr(module, "_code_to_version")
    assert prows._version({"torch": {"cudnn": "9.19.0"}}, "torch", "cudnn") == "9.19.0"


def test_torch_label_on_cpu_profile_is_only_a_warning():
    cluster = make_cluster("cpu")
    for facts in cluster.values():
        facts["torch"].update(version="2.13.0+cu128", cuda="12.8")
    rows = run(cluster, "cpu")
    assert by_status(rows, pf.FAIL) == []
    assert {row.check for row in by_status(rows, pf.WARN)} == {"torch.version"}


@pytest.mark.parametrize(
    "clock, status",
    [
        ({"synchronized": True, "offset_ms": 99.0, "source": "chrony"}, pf.PASS),
        ({"synchronized": True, "offset_ms": -101.0, "source": "chrony"}, pf.FAIL),
        ({"synchronized": False, "offset_ms": 0.1, "source": "timedatectl"}, pf.FAIL),
        ({"synchronized": None, "offset_ms": None, "source": None}, pf.WARN),
        ({"synchronized": None, "offset_ms": 3.0, "source": "ntpq"}, pf.PASS),
    ],
)
def test_clock(clock, status):
    cluster = make_cluster()
    cluster["node1"]["clock"] = clock
    assert row_for(run(cluster), "clock.sync", "node1").status == status


def test_clock_limit_is_an_option():
    cluster = make_cluster()
    cluster["node1"]["clock"]["offset_ms"] = 40.0
    options = full_options()
    options["max_clock_offset_ms"] = 20
    assert row_for(run(cluster, options=options), "clock.sync", "node1").status == pf.FAIL


def test_one_ib_port_down_is_a_warning():
    cluster = make_cluster()
    cluster["node2"]["infiniband"]["hcas"][3]["ports"][0]["state"] = "Down"
    rows = run(cluster)
    assert by_status(rows, pf.FAIL) == []
    row = row_for(rows, "infiniband.ports", "node2")
    assert row.status == pf.WARN and "mlx5_3/1 Down" in row.found


def test_ib_and_peermem_are_skipped_unless_asked():
    cluster = make_cluster()
    for facts in cluster.values():
        facts["infiniband"] = {"hcas": [], "peermem_loaded": False}
    options = full_options()
    options.update(infiniband_required=False, gpudirect=False)
    rows = run(cluster, options=options)
    assert by_status(rows, pf.FAIL) == []
    assert row_for(rows, "infiniband.ports", "node1").status == pf.SKIP
    assert row_for(rows, "infiniband.peermem", "node1").status == pf.SKIP


@pytest.mark.parametrize(
    "disk_paths, status, words",
    [
        (None, pf.PASS, "/shared"),
        (["/shared"], pf.PASS, "/shared"),
        (["/shared", "/data"], pf.FAIL, "/data: not measured"),
    ],
)
def test_disk_paths(disk_paths, status, words):
    options = full_options()
    options["disk_paths"] = disk_paths
    row = row_for(run(make_cluster(), options=options), "disk.free", "node1")
    assert row.status == status and words in (row.found + row.expected)


def test_memlock_not_reported_over_ssh_is_judged_on_current_only():
    cluster = make_cluster()
    cluster["node1"]["memlock"]["noninteractive_ssh"] = None
    assert row_for(run(cluster), "memlock.unlimited", "node1").status == pf.PASS


def test_memlock_ssh_session_that_could_not_be_read_warns():
    cluster = make_cluster()
    cluster["node1"]["memlock"].update(noninteractive_ssh=None,
                                       noninteractive_ssh_error="ssh megatron@localhost 'ulimit -l': exit 255")
    row = row_for(run(cluster), "memlock.unlimited", "node1")
    assert row.status == pf.WARN and "exit 255" in row.found


def test_megatron_checkout_missing_is_a_warning():
    cluster = make_cluster()
    for facts in cluster.values():
        facts["megatron_deepspeed"] = {"path": "/opt/megatron/Megatron-DeepSpeed", "commit": None, "present": False}
    rows = run(cluster)
    assert by_status(rows, pf.FAIL) == []
    assert {row.check for row in by_status(rows, pf.WARN)} == {"megatron_deepspeed.present"}


def test_node_in_facts_but_not_in_hostfile_is_a_warning():
    options = full_options()
    del options["slots"]["node3"]
    row = row_for(run(make_cluster(), options=options), "hostfile.slots", "node3")
    assert row.status == pf.WARN and "slots=8" in row.fix


# ---------------------------------------------------------------------------------------
# The GPU validation host (tests/fixtures/gpu-host-h200x2): real facts, real verdicts
# ---------------------------------------------------------------------------------------


def _read(name: str) -> str:
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def _header_version(name: str, prefix: str, patch: str) -> str:
    text = _read(name)
    parts = [re.search(r"#define %s_%s (\d+)" % (prefix, key), text).group(1) for key in ("MAJOR", "MINOR", patch)]
    return ".".join(parts)


def h200_facts(deepspeed: str) -> Dict[str, Any]:
    """gpu_stack_facts of the 2 x H200 host, read from the recorded outputs.

    What the recordings do not cover comes from docs/upstream-facts.md §G: DeepSpeed (0.17.5 and 0.19.6 ran
    there as wheels), apex HEAD built with its CUDA extensions, a Megatron-DeepSpeed HEAD
    checkout. There is no NVSwitch, fabric manager, InfiniBand or systemd (no clock state).
    """
    gpus = [line.split(", ") for line in _read("nvidia-smi-query.csv").splitlines()[1:]]
    stack = _read("gpu-host-stack.txt")
    torch_info = json.loads(re.search(r"### python/torch\n(\{.*?\n\})", stack, re.S).group(1))
    nvcc = re.search(r"release (\d+\.\d+), V(\S+)", stack)
    memlock = re.search(r"### ulimit -l\n(\S+)", stack).group(1)
    memlock_ssh = re.search(r"### ulimit -l in non-interactive bash\n(\S+)", stack).group(1)
    venv = torch_info["executable"].rsplit("/bin/", 1)[0]
    return {
        "hostname": "gpu-host",
        "os": {"id": "ubuntu", "version_id": "24.04"},
        "python": {"version": torch_info["python"], "executable": torch_info["executable"]},
        "driver": {"version": gpus[0][3], "kernel_module": "open", "source": "/proc/driver/nvidia/version"},
        "gpus": {
            "count": len(gpus),
            "model": gpus[0][1],
            "models": sorted(set(g[1] for g in gpus)),
            "memory_mib": int(gpus[0][4].split()[0]),
            "uuids": [g[2] for g in gpus],
            "list": [{"index": int(g[0]), "name": g[1], "uuid": g[2], "memory_mib": int(g[4].split()[0]),
                      "pci_bus_id": g[5], "persistence_mode": g[6]} for g in gpus],
        },
        "nvswitch": {"present": False, "count": 0},
        "fabric_manager": {"installed": False, "version": None, "active": None},
        "cuda": {"version": nvcc.group(2), "source": "nvcc", "home": "/usr/local/cuda", "nvcc_version": nvcc.group(2),
                 "installed": [{"path": "/usr/local/cuda-13.0", "version": nvcc.group(2), "source": "nvcc"}]},
        "cudnn": {"version": _header_version("system-usr-include-cudnn_version.h", "CUDNN", "PATCHLEVEL"), "source": "header"},
        "nccl": {"version": _header_version("system-usr-include-nccl.h", "NCCL", "PATCH"), "source": "header",
                 "library": "/lib/x86_64-linux-gnu/libnccl.so.2"},
        # torch's codes as gpu_stack_facts decodes them on the node (never in the gate).
        "torch": {"version": torch_info["torch"], "cuda": torch_info["torch_cuda"],
                  "cudnn": _gpu_parsers.cudnn_version_from_int(torch_info["cudnn"]),
                  "nccl": _gpu_parsers.nccl_version_from_torch(torch_info["nccl"]), "error": None},
        "deepspeed": {"version": deepspeed, "error": None},
        "venv": venv,
        "megatron_deepspeed": {"path": "/opt/megatron/Megatron-DeepSpeed", "commit": "4efb479d", "present": True},
        "apex": {"present": True, "cuda_ext": True},
        "infiniband": {"hcas": [], "peermem_loaded": False},
        "memlock": {"current": memlock, "noninteractive_ssh": memlock_ssh},
        "disk": {},
        "clock": {"synchronized": None, "offset_ms": None, "source": None},
    }


def test_h200_fixture_reads_as_recorded():
    facts = h200_facts("0.19.6")
    assert facts["driver"]["version"] == "580.159.04"
    assert facts["cuda"]["version"] == "13.0.88"
    assert facts["cudnn"]["version"] == "9.14.0" and facts["nccl"]["version"] == "2.28.3"
    assert facts["torch"]["version"] == "2.11.0+cu130" and facts["torch"]["cuda"] == "13.0"
    assert facts["python"]["version"] == "3.12.3"
    assert facts["gpus"]["count"] == 2 and facts["gpus"]["model"] == "NVIDIA H200" and facts["gpus"]["memory_mib"] == 143771
    assert facts["memlock"] == {"current": "unlimited", "noninteractive_ssh": "unlimited"}


def _h200_options() -> Dict[str, Any]:
    return {"slots": {"gpu-host": 2}, "infiniband_required": False, "gpudirect": False}


@pytest.mark.parametrize("deepspeed", ["0.17.5", "0.19.6"])
def test_h200_passes_for_cu130(deepspeed):
    rows = run({"gpu-host": h200_facts(deepspeed)}, "cu130", _h200_options())
    assert by_status(rows, pf.FAIL) == []
    # The host has no systemd: the clock state is unknown, which warns and does not fail.
    assert {row.check for row in by_status(rows, pf.WARN)} == {"clock.sync"}
    assert row_for(rows, "cudnn.torch", "gpu-host").found == "9.19.0"
    assert row_for(rows, "nccl.torch", "gpu-host").found == "2.28.9"
    assert row_for(rows, "hostfile.slots", "gpu-host").status == pf.PASS


def test_h200_fails_for_cu117_saying_why():
    rows = run({"gpu-host": h200_facts("0.17.5")}, "cu117", _h200_options())
    failed = {row.check: row for row in by_status(rows, pf.FAIL)}
    assert set(failed) == {"cuda.toolkit", "cudnn.system", "cudnn.torch", "nccl.system", "torch.version", "torch.cuda",
                           "deepspeed.version", "python.version"}
    assert {row.component for row in failed.values()} == {"cuda", "cudnn", "torch.cudnn", "nccl", "torch", "deepspeed", "python"}
    # The driver is new enough for CUDA 11.7; nvcc and torch agree with each other.
    assert row_for(rows, "driver.version", "gpu-host").status == pf.PASS
    assert row_for(rows, "cuda.nvcc_vs_torch", "gpu-host").status == pf.PASS
    assert failed["cudnn.system"].found.startswith("9.14.0") and "8.6.0.163" in failed["cudnn.system"].fix
    assert "another major" in failed["cudnn.system"].fix
    assert failed["torch.version"].found == "2.11.0+cu130" and "1.13.1" in failed["torch.version"].expected
    assert failed["python.version"].found == "3.12.3"
    assert failed["deepspeed.version"].expected == "0.9.2"


def test_h200_with_one_gpu_in_the_hostfile_fails_slots():
    options = _h200_options()
    options["slots"] = {"gpu-host": 8}
    failed = by_status(run({"gpu-host": h200_facts("0.19.6")}, "cu130", options), pf.FAIL)
    assert [(row.check, row.found, row.expected) for row in failed] == [("hostfile.slots", "2 GPUs", "8 slots")]


# ---------------------------------------------------------------------------------------
# The table and the summary
# ---------------------------------------------------------------------------------------


def test_terminal_form_fits_160_columns_and_lists_failures_per_node():
    """The default output (module_utils/_report.py): one wrapped line per failing row, nothing
    for the passes, within 160 columns, though the cu117 EXPECTED and FIX cells are long."""
    cluster = make_cluster()
    cluster["node3"]["torch"]["version"] = "1.13.0+cu117"
    rows = run(cluster)
    text = _report.render([row.as_dict() for row in rows], pf.summary_line(rows, "cu117"), verbosity=0, width=160)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 160
    starts = [line for line in lines if not line.startswith(" ")]
    assert [line.split(":")[0] for line in starts[:-1]] == ["FAIL node3 torch (torch.version)", "FAIL node3 torch (same.torch)"]
    assert starts[-1].startswith("preflight FAILED for profile cu117 on 3 node(s)")
    assert "python_env" in text and "1.13.0+cu117" in text
    # With -v every check has a pass line; 'all' where every node passed.
    verbose = _report.render([row.as_dict() for row in rows], "x", verbosity=1, width=160).splitlines()
    assert "pass all driver (driver.version): 515.65.01" in verbose
    assert any(line.startswith("pass node1,node2 torch (torch.version): ") for line in verbose)


def test_terminal_form_of_a_clean_cluster_is_the_summary_alone():
    rows = run(make_cluster())
    assert _report.render([row.as_dict() for row in rows], pf.summary_line(rows, "cu117")) == pf.summary_line(rows, "cu117")


def test_summary_line():
    cluster = make_cluster()
    cluster["node2"]["nccl"]["version"] = "2.18.3"
    rows = run(cluster)
    line = pf.summary_line(rows, "cu117")
    assert line.startswith("preflight FAILED for profile cu117 on 3 node(s): 2 failed")
    assert line.endswith("failing: node2")
    assert pf.summary_line(run(make_cluster()), "cu117").startswith("preflight passed")


def test_rows_serialise():
    row = run(make_cluster())[0]
    assert set(row.as_dict()) == {"check", "status", "node", "component", "found", "expected", "fix"}
    json.dumps([r.as_dict() for r in run(make_cluster())])


def test_inputs_are_not_modified():
    cluster = make_cluster()
    before = copy.deepcopy(cluster)
    run(cluster)
    assert cluster == before


def _no_rdma(facts: Dict[str, Any]) -> None:
    facts["infiniband"]["hcas"] = []


def _rdma_down(facts: Dict[str, Any]) -> None:
    for hca in facts["infiniband"]["hcas"]:
        for port in hca["ports"]:
            port.update(state="Down", phys_state="Polling")


# (id, mode, infiniband_required, gpudirect, node facts, status of a node capped at 8192 kB, words)
MEMLOCK_POLICY = [
    ("auto-ib-required", "auto", True, False, _no_rdma, pf.FAIL, ""),
    ("auto-gpudirect", "auto", False, True, _no_rdma, pf.FAIL, ""),
    ("auto-active-port-seen", "auto", False, False, lambda f: None, pf.FAIL, ""),
    ("auto-no-rdma", "auto", False, False, _no_rdma, pf.WARN, "NCCL uses sockets"),
    ("auto-rdma-ports-down", "auto", False, False, _rdma_down, pf.WARN, "advised, not required"),
    ("required-without-rdma", "required", False, False, _no_rdma, pf.FAIL, ""),
    ("advisory-with-ib", "advisory", True, True, lambda f: None, pf.WARN, "memlock: advisory"),
]


@pytest.mark.parametrize("mode, ib_required, gpudirect, shape, status, words",
                         [case[1:] for case in MEMLOCK_POLICY], ids=[case[0] for case in MEMLOCK_POLICY])
def test_memlock_is_required_where_nccl_uses_rdma(mode, ib_required, gpudirect, shape, status, words):
    cluster = make_cluster()
    for facts in cluster.values():
        shape(facts)
    cluster["node2"]["memlock"].update(current="8192", noninteractive_ssh="8192")
    options = dict(full_options(), infiniband_required=ib_required, gpudirect=gpudirect, memlock=mode)
    rows = run(cluster, options=options)
    row = row_for(rows, "memlock.unlimited", "node2")
    assert row.status == status, row
    assert words in row.expected and row.found == "current 8192, non-interactive ssh 8192"
    assert "os_base" in row.fix and "node2" in row.fix
    # A node with unlimited memlock passes whatever the mode.
    assert row_for(rows, "memlock.unlimited", "node1").status == pf.PASS


@pytest.mark.parametrize("mode, synced, offset, status", [
    ("required", False, None, pf.FAIL),
    ("advisory", False, None, pf.WARN),
    ("advisory", True, 500.0, pf.WARN),
    ("advisory", True, 3.0, pf.PASS),
    (None, False, None, pf.FAIL),  # the default is required
])
def test_clock_mode(mode, synced, offset, status):
    cluster = make_cluster()
    cluster["node2"]["clock"].update(synchronized=synced, offset_ms=offset)
    options = dict(full_options())
    if mode:
        options["clock"] = mode
    row = row_for(run(cluster, options=options), "clock.sync", "node2")
    assert row.status == status, row
    assert row.status == pf.PASS or "node2" in row.fix


def test_megatron_checkout_without_git_says_so():
    cluster = make_cluster()
    for facts in cluster.values():
        facts["megatron_deepspeed"]["commit"] = None
    row = row_for(run(cluster), "megatron_deepspeed.present", "node1")
    assert row.status == pf.PASS and row.found.startswith("no git commit (not a git checkout")


# ---------------------------------------------------------------------------------------
# Damaged installs (gpu_stack_facts' files sections)
# ---------------------------------------------------------------------------------------

DAMAGE = {"source": "x/RECORD", "checked": 20817, "bad_count": 7, "error": None,
          "bad": ["torch/lib/libtorch_cpu.so: 1048576 bytes, RECORD says 452984832", "torch/version.py: missing",
                  "torch/a.py: missing", "torch/b.py: missing", "torch/c.py: missing"]}


@pytest.mark.parametrize("profile_name, section, check, status, fix_words", [
    ("cu117", "torch", "torch.files", pf.FAIL,
     ["pip install --force-reinstall --no-deps 'torch==1.13.1' --index-url https://download.pytorch.org/whl/cu117",
      "playbooks/provision.yml alone keeps it"]),
    ("cpu", "deepspeed", "deepspeed.files", pf.FAIL, ["--force-reinstall --no-deps 'deepspeed==0.19.6'"]),
    ("cu117", "apex", "apex.files", pf.FAIL, ["pip uninstall -y apex", "playbooks/provision.yml"]),
    ("cpu", "apex", "apex.files", pf.WARN, ["pip uninstall -y apex"]),  # on CPU Megatron-DeepSpeed does not import apex
    ("cpu", "megatron_deepspeed", "megatron_deepspeed.files", pf.FAIL,
     ["git -C /opt/megatron/Megatron-DeepSpeed checkout -- .", "python_env_megatron_force=true"]),
])
def test_damaged_install_fails_naming_node_package_files_and_fix(profile_name, section, check, status, fix_words):
    cluster = make_cluster(profile_name)
    cluster["node2"][section]["files"] = dict(DAMAGE)
    rows = run(cluster, profile_name)
    row = row_for(rows, check, "node2")
    assert (row.status, row.component) == (status, section)
    assert row.found.startswith("7 of 20817 files differ from ")
    assert "torch/lib/libtorch_cpu.so: 1048576 bytes, RECORD says 452984832" in row.found and "(2 more)" in row.found
    assert "node2" in row.fix and all(words in row.fix for words in fix_words), row.fix
    # Only that node and that check: a damaged file changes no version.
    assert [(r.check, r.node) for r in rows if r.status in (pf.FAIL, pf.WARN)] == [(check, "node2")]


@pytest.mark.parametrize("source, against, fix_words", [
    ("/opt/megatron/Megatron-DeepSpeed/.git/index", "git's index", ["checkout -- ."]),
    ("/opt/megatron/Megatron-DeepSpeed/.megatron-ds-manifest", "the archive's manifest",
     ["remove /opt/megatron/Megatron-DeepSpeed/.megatron-ds-archive.sha256", "playbooks/provision.yml"]),
])
def test_damaged_checkout_fix_follows_how_it_was_installed(source, against, fix_words):
    cluster = make_cluster("cpu")
    cluster["node3"]["megatron_deepspeed"]["files"] = dict(DAMAGE, source=source)
    row = row_for(run(cluster, "cpu"), "megatron_deepspeed.files", "node3")
    assert row.status == pf.FAIL and ("differ from %s:" % against) in row.found
    assert all(words in row.fix for words in fix_words), row.fix


@pytest.mark.parametrize("files, status, found", [
    ({"source": "x/RECORD", "checked": 1190, "bad_count": 0, "bad": [], "error": None}, pf.PASS, "1190 files as recorded"),
    ({"source": "x/RECORD", "checked": 0, "bad_count": 0, "bad": [], "error": "no RECORD in x: installed without pip, or damaged"},
     pf.WARN, "no RECORD in x: installed without pip, or damaged"),
    ({"source": None, "checked": 0, "bad_count": 0, "bad": [], "error": None}, pf.SKIP, ""),
    (None, pf.SKIP, ""),  # facts of an older gpu_stack_facts: nothing compared
])
def test_files_row_states(files, status, found):
    cluster = make_cluster("cpu")
    if files is None:
        del cluster["node1"]["deepspeed"]["files"]
    else:
        cluster["node1"]["deepspeed"]["files"] = files
    row = row_for(run(cluster, "cpu"), "deepspeed.files", "node1")
    assert (row.status, row.found) == (status, found)


@pytest.mark.parametrize("swept, status, found", [
    ("1024", pf.FAIL, "current unlimited, non-interactive ssh 1024"),
    ("unlimited", pf.PASS, "current unlimited, non-interactive ssh unlimited"),
    ("-", pf.PASS, "current unlimited"),  # ssh failed there (ssh.from_head says so): only the current limit
])
def test_memlock_of_the_ssh_session_from_the_head_nodes_sweep(swept, status, found):
    """playbooks/preflight.yml reads `ulimit -l` in each node's ssh session from the head node's
    sweep (ssh_memlock) instead of an ssh per node inside the facts call."""
    cluster = make_cluster()
    for facts in cluster.values():
        facts["memlock"] = {"current": "unlimited", "noninteractive_ssh": None, "noninteractive_ssh_error": None}
    options = dict(full_options(), ssh_memlock={"node1": "unlimited", "node2": swept, "node3": "unlimited"})
    row = row_for(run(cluster, options=options), "memlock.unlimited", "node2")
    assert (row.status, row.found) == (status, found)
