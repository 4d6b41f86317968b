# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The slurm filters resolve to module_utils/_slurm/conf.py; its errors become AnsibleFilterError."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.filter.slurm import FilterModule

FILTERS = FilterModule().filters()
PARTITION = "PartitionName=train MaxNodes=UNLIMITED Nodes=n[1-2] State=UP TotalNodes=2\n"
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
    ("slurm_submitted_job_id", ("42;molecule\n",), "42"),
    ("slurm_layout_problems", (PARTITION, "n1|idle|(null)|2\nn2|idle|(null)|2\n", "train", 2, 2, False), []),
    ("slurm_layout_problems", (PARTITION, "n1|idle|(null)|2\nn2|drained|(null)|2\n", "train", 2, 2, False),
     ["slurm partition train: 1 node(s) can take 2 CPU rank(s) each, the job needs 2 (not available: n2 (drained)): "
      "resume or repair the nodes (`sinfo -R` says why they are out), or plan for 1 node(s)"]),
    ("slurm_layout_problems", ("", "", "gone", 2, 2, True),
     ["slurm partition gone: not found (scontrol show partition printed nothing); expected an existing partition: "
      "set megatron_launch_slurm_partition to one that `sinfo -s` lists"]),
])
def test_filters(name, args, expected):
    assert FILTERS[name](*args) == expected


@pytest.mark.parametrize("name, args", [
    ("slurmd_hardware", ("garbage", "n")),
    ("slurm_node_line", ("n", "", {"CPUs": 2}, 0, 0)),   # a hardware dict without RealMemory
    ("slurm_process_tracking", ("pgid", "", "")),
    ("slurm_submitted_job_id", ("sbatch: error: Invalid partition name specified",)),
    ("slurm_layout_problems", (PARTITION, "", "train", "two", 2)),
])
def test_errors_become_filter_errors(name, args):
    with pytest.raises(AnsibleFilterError, match="megatron_ds.cluster.%s" % name):
        FILTERS[name](*args)
