# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Unit tables for the preflight gate (plugins/module_utils/_preflight/gate.py): run_checks over whole
clusters (clean, drifted, unreachable nodes, the GPU validation host), the facts row, the summary line
and the terminal form."""
from __future__ import annotations

import copy
import json
import os
import re
from typing import Any, Callable, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import parsers as _gpu_parsers
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import gate as pf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import cluster as pcluster
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import matrix as pmatrix
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import rows as prows
from ansible_collections.megatron_ds.cluster.plugins.module_utils import _report

from .preflight_facts import NODES, by_status, full_options, make_cluster, row_for, run


FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "gpu-host-h200x2")


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
    ("cuda-toolkit-11.8", "cu117", mutate(cuda__version="11.8.0", cuda__nvcc_version="11.8.89", driver__version="515.65.01",
                                          fabric_manager__version="515.65.01"), {"cuda", "nvcc", "driver"}),
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
    # The one warning a drift may add: the drifted node's CUDA release has no minimum-driver row
    # (12.8, 11.6), which the driver check says instead of guessing a minimum; and a drifted node's
    # driver on a branch past NVIDIA's end of life (driver.lifecycle).
    stray = [row for row in by_status(rows, pf.WARN) if not (row.check == "driver.version" and "to CUDA_MIN_DRIVER" in row.fix)
             and not (row.check == "driver.lifecycle" and row.node == "node2")]
    assert stray == []


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


def test_facts_module_problems_are_a_warning_on_the_facts_row():
    cluster = make_cluster()
    cluster["node2"]["errors"] = ["gpus: nvidia-smi -q -x: exit 9: No devices were found"]
    rows = run(cluster)
    assert by_status(rows, pf.FAIL) == []
    row = row_for(rows, "facts.gathered", "node2")
    assert row.status == pf.WARN and "No devices were found" in row.found


def test_the_gate_has_no_decoder_of_its_own():
    """Decoding lives in _gpu_parsers only (issue 14): no preflight module has a second copy with other
    thresholds."""
    for module in (pf, prows, pmatrix, pcluster):
        assert not hasattr(module, "_code_to_version")
    assert prows._version({"torch": {"cudnn": "9.19.0"}}, "torch", "cudnn") == "9.19.0"


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
                           "deepspeed.version", "python.version", "gpu.arch"}
    assert {row.component for row in failed.values()} == {"cuda", "cudnn", "torch.cudnn", "nccl", "torch", "deepspeed", "python",
                                                          "gpu"}
    # Hopper against the guide's stack: node, GPU, capability, the profile's arch list, the profiles that fit.
    arch = failed["gpu.arch"]
    assert arch.found == "NVIDIA H200 9.0"
    assert arch.expected == "torch sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86; toolkit builds 3.5 to 8.7"
    assert arch.fix.startswith("gpu-host: stack profile cu117 cannot run on NVIDIA H200 (compute capability 9.0)")
    assert arch.fix.endswith("set megatron_stack_profile to cu121 or cu130")
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
    assert "pass all driver (driver.version): 580.159.04" in verbose
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


def test_inputs_are_not_modified():
    cluster = make_cluster()
    before = copy.deepcopy(cluster)
    run(cluster)
    assert cluster == before
