# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""gpu_stack_facts builders for the preflight tests: a node that matches a profile exactly, a cluster
of them, the options of a full preflight, and run_checks with the rows it returns. Used by the
_preflight test modules, _slurm/test_health.py and the preflight action plugin's tests (imported as
ansible_collections.megatron_ds.cluster.tests.unit.plugins.module_utils._preflight.preflight_facts)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import gate as pf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles


NODES = ("node1", "node2", "node3")


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
    if profile_name == "cu117":
        # The profile installs 515.65.01, a branch past NVIDIA's end of life (driver.lifecycle warns,
        # test_matrix.py); a clean cu117 site keeps a supported driver, here the H200 host's recorded one.
        driver = "580.159.04"
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
        # The venv's whole set (what python_env installs for the profile, abridged) and the RECORD
        # check of every distribution but torch, DeepSpeed and apex.
        "packages": {
            "installed": {"torch": torch_version, "deepspeed": profile["deepspeed"]["pip"].partition("==")[2],
                          "numpy": "1.26.4" if profile_name == "cu117" else "2.2.6", "pydantic": "2.14.4",
                          "ninja": "1.13.2", "typing_extensions": "4.16.0"},
            "files": dict(whole(6154, "every pip RECORD of the venv but torch, deepspeed and apex"),
                          hashed=0, unhashed=0, distributions=4, bad_distributions=[]),
            # python_env's own .pth (no RECORD owns it), allowed by the preflight
            "unowned": {"count": 1, "entries": [{"path": venv + "/lib/python3/site-packages/megatron_ds_fused_ops.pth",
                                                 "kind": "pth", "detail": "1 import line(s) run at every interpreter start"}]},
            # python_env's constraints file in the venv: what the role pinned (the build tools too)
            "pins": {"source": venv + "/megatron-ds/constraints.txt",
                     "pins": {"pip": "25.3", "numpy": "1.26.4" if profile_name == "cu117" else "2.2.6",
                              "pydantic": "2.14.4", "torch": torch_version}},
        },
        "infiniband": {
            "hcas": [
                {"name": "mlx5_%d" % i, "ports": [{"port": 1, "state": "Active", "phys_state": "LinkUp",
                                                  "rate": "200 Gb/sec (4X HDR)", "link_layer": "InfiniBand"}]}
                for i in range(4)
            ],
            "peermem_loaded": gpu,
            # MLNX OFED's peer-memory client, as nvidia_peermem registers it on a working node
            "peermem_module": "nvidia_peermem" if gpu else None,
            "memory_peers": ["nv_mem"] if gpu else [],
        },
        "memlock": {"current": "unlimited", "noninteractive_ssh": "unlimited"},
        "disk": {"/shared": {"free_bytes": 2 * 10**12, "exists": True}},
        "clock": {"synchronized": True, "offset_ms": 0.4, "source": "chrony"},
        # what the nccl and infiniband roles write, the same on every node
        "nccl_env": {"user": "megatron", "values": {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "=mlx5_0:1"},
                     "sources": {"NCCL_DEBUG": "/etc/megatron/nccl.env", "NCCL_IB_HCA": "/etc/megatron/nccl.d/infiniband.env"},
                     "read": ["/etc/environment", "/home/megatron/.bashrc", "/etc/megatron/nccl.env",
                              "/etc/megatron/nccl.d/infiniband.env"], "error": None},
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
        # The driver lifecycle's date, fixed so that the tests do not age.
        "today": "2026-12-01",
    }


def run(cluster: Dict[str, Any], profile_name: str = "cu117", options: Optional[Dict[str, Any]] = None) -> List[pf.Row]:
    return pf.run_checks(cluster, _stack_profiles.get(profile_name), full_options(profile_name) if options is None else options)


def by_status(rows: List[pf.Row], status: str) -> List[pf.Row]:
    return [row for row in rows if row.status == status]


def row_for(rows: List[pf.Row], check: str, node: str) -> pf.Row:
    matches = [row for row in rows if row.check == check and row.node == node]
    assert len(matches) == 1, (check, node, matches)
    return matches[0]
