# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The slurm filters resolve to module_utils/_slurm; its errors become AnsibleFilterError."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.filter.slurm import FilterModule

FILTERS = FilterModule().filters()
LINE = "NodeName=n CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=4000"


@pytest.mark.parametrize("name, args, expected", [
    ("slurmd_hardware", (LINE, "n"), {"CPUs": 2, "Sockets": 1, "CoresPerSocket": 2, "ThreadsPerCore": 1,
                                      "RealMemory": 4000}),
    ("slurm_node_line", ("n", "10.0.0.1", {"CPUs": 2, "Sockets": 1, "CoresPerSocket": 2, "ThreadsPerCore": 1,
                                           "RealMemory": 4000}, 2, 1000),
     "NodeName=n NodeAddr=10.0.0.1 CPUs=2 Sockets=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=3000 Gres=gpu:2 "
     "State=UNKNOWN"),
    ("slurm_gpu_devices", ([{"path": "/dev/nvidia0"}, {"path": "/dev/nvidiactl"}],), ["/dev/nvidia0"]),
    ("slurm_process_tracking", ("auto", "guest", "docker"), "linuxproc"),
])
def test_filters(name, args, expected):
    assert FILTERS[name](*args) == expected


@pytest.mark.parametrize("name, args", [
    ("slurmd_hardware", ("garbage", "n")),
    ("slurm_node_line", ("n", "", {"CPUs": 2}, 0, 0)),   # a hardware dict without RealMemory
    ("slurm_process_tracking", ("pgid", "", "")),
])
def test_errors_become_filter_errors(name, args):
    with pytest.raises(AnsibleFilterError, match="megatron_ds.cluster.%s" % name):
        FILTERS[name](*args)
