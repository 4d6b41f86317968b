# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tables for the slurm role's pure helpers (plugins/module_utils/_slurm/conf.py)."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._slurm import conf as _slurm

# Real `slurmd -C` lines: a Debian 12 node container on a 2-core machine (slurm-wlm 22.05.8), and
# the shape an 8 x A100 HGX node (2 sockets x 64 cores, SMT) reports.
CONTAINER = ("NodeName=728fd557d73a CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 "
             "RealMemory=24105\nUpTime=0-00:54:59\n")
HGX = ("NodeName=gpu01 CPUs=256 Boards=1 SocketsPerBoard=2 CoresPerSocket=64 ThreadsPerCore=2 RealMemory=2063937\n"
       "UpTime=12-03:00:01\n")
TWO_BOARDS = "NodeName=x CPUs=16 Boards=2 SocketsPerBoard=2 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=64000"


@pytest.mark.parametrize("text, expected", [
    (CONTAINER, {"CPUs": 2, "Sockets": 1, "CoresPerSocket": 2, "ThreadsPerCore": 1, "RealMemory": 24105}),
    (HGX, {"CPUs": 256, "Sockets": 2, "CoresPerSocket": 64, "ThreadsPerCore": 2, "RealMemory": 2063937}),
    (TWO_BOARDS, {"CPUs": 16, "Sockets": 4, "CoresPerSocket": 4, "ThreadsPerCore": 1, "RealMemory": 64000}),
])
def test_parse_slurmd_hardware(text, expected):
    assert _slurm.parse_slurmd_hardware(text, "n1") == expected


@pytest.mark.parametrize("text, message", [
    ("", "lacks CPUs, Boards"),
    (None, "lacks CPUs"),
    ("slurmd: fatal: Unable to determine this slurmd's NodeName", "node n1: `slurmd -C` printed"),
    ("NodeName=x CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1", "lacks RealMemory"),
    ("NodeName=x CPUs=two Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=1", "non-integer"),
])
def test_parse_slurmd_hardware_refuses(text, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("`", "`")):
        _slurm.parse_slurmd_hardware(text, "n1")


HW = {"CPUs": 256, "Sockets": 2, "CoresPerSocket": 64, "ThreadsPerCore": 2, "RealMemory": 2063937}


@pytest.mark.parametrize("kwargs, expected", [
    ({"name": "gpu01", "address": "10.10.0.11", "hardware": HW, "gpus": 8, "memory_reserve_mb": 1024},
     "NodeName=gpu01 NodeAddr=10.10.0.11 CPUs=256 Sockets=2 CoresPerSocket=64 ThreadsPerCore=2 RealMemory=2062913 "
     "Gres=gpu:8 State=UNKNOWN"),
    ({"name": "node1", "address": "", "hardware": HW},
     "NodeName=node1 CPUs=256 Sockets=2 CoresPerSocket=64 ThreadsPerCore=2 RealMemory=2063937 State=UNKNOWN"),
    ({"name": "n-2.a", "address": "172.18.0.3", "hardware": HW, "gpus": 0, "features": ["a100", ""], "weight": 10},
     "NodeName=n-2.a NodeAddr=172.18.0.3 CPUs=256 Sockets=2 CoresPerSocket=64 ThreadsPerCore=2 RealMemory=2063937 "
     "Features=a100 Weight=10 State=UNKNOWN"),
])
def test_node_line(kwargs, expected):
    assert _slurm.node_line(**kwargs) == expected


@pytest.mark.parametrize("kwargs, message", [
    ({"name": "", "address": "", "hardware": HW}, "not a valid Slurm NodeName"),
    ({"name": "bad name", "address": "", "hardware": HW}, "not a valid Slurm NodeName"),
    ({"name": "n1", "address": "", "hardware": HW, "gpus": -1}, "negative"),
    ({"name": "n1", "address": "", "hardware": dict(HW, RealMemory=1000), "memory_reserve_mb": 1024},
     "leaves -24 MB for jobs.*Lower slurm_memory_reserve_mb"),
])
def test_node_line_refuses(kwargs, message):
    with pytest.raises(ValueError, match=message):
        _slurm.node_line(**kwargs)


@pytest.mark.parametrize("paths, expected", [
    ([], []),
    (None, []),
    # find results, as ansible.builtin.find returns them
    ([{"path": "/dev/nvidia1"}, {"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia0"}], ["/dev/nvidia0", "/dev/nvidia1"]),
    # numeric order, not text order; uvm, caps, modeset and NVSwitches are not GPUs
    (["/dev/nvidia10", "/dev/nvidia2", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools", "/dev/nvidia-modeset",
      "/dev/nvidia-nvswitch0", "/dev/nvidia-caps", "/dev/nvidia2"], ["/dev/nvidia2", "/dev/nvidia10"]),
])
def test_gpu_device_files(paths, expected):
    assert _slurm.gpu_device_files(paths) == expected


@pytest.mark.parametrize("choice, role, kind, expected", [
    ("auto", "guest", "docker", "linuxproc"),
    ("auto", "guest", "container", "linuxproc"),
    ("auto", "guest", "lxc", "linuxproc"),
    ("auto", "guest", "kvm", "cgroup"),        # a VM owns its cgroups
    ("auto", "host", "kvm", "cgroup"),         # a hypervisor host
    ("auto", "", "", "cgroup"),                # bare metal: Ansible reports NA or nothing
    ("auto", "NA", "NA", "cgroup"),
    ("cgroup", "guest", "docker", "cgroup"),   # an explicit choice wins
    ("linuxproc", "", "", "linuxproc"),
])
def test_process_tracking(choice, role, kind, expected):
    assert _slurm.process_tracking(choice, role, kind) == expected


def test_process_tracking_refuses_unknown():
    with pytest.raises(ValueError, match="slurm_process_tracking is 'pgid'; expected one of auto, cgroup, linuxproc"):
        _slurm.process_tracking("pgid", "", "")
