# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the slurm role; the logic is module_utils/_slurm/conf.py.

* ``slurmd_hardware(text, node)``: ``slurmd -C`` output -> CPUs, Sockets, CoresPerSocket,
  ThreadsPerCore, RealMemory.
* ``slurm_node_line(name, address, hardware, gpus, memory_reserve_mb)``: a slurm.conf NodeName line.
* ``slurm_gpu_devices(find_files)``: the ``/dev/nvidiaN`` GPU files, in minor-number order.
* ``slurm_process_tracking(choice, virtualization_role, virtualization_type)``: cgroup or linuxproc.
* ``slurm_layout_problems(partition_text, sinfo_text, partition, nodes, ranks_per_node, gpu_ranks)``:
  why a job layout cannot start in the partition, from ``scontrol show partition -o`` and
  ``sinfo --Node`` output (``_slurm.fit``); [] when it fits.
* ``slurm_submitted_job_id(text)``: the job id ``sbatch --parsable`` printed (``_slurm.job``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List

from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.module_utils._slurm import conf as _slurm
from ansible_collections.megatron_ds.cluster.plugins.module_utils._slurm import fit as _slurm_fit
from ansible_collections.megatron_ds.cluster.plugins.module_utils._slurm import job as _slurm_job


def layout_problems(partition_text: str, sinfo_text: str, partition: str, nodes: Any, ranks_per_node: Any,
                    gpu_ranks: bool = True) -> List[str]:
    """_slurm_fit.layout_problems from the raw command outputs."""
    return _slurm_fit.layout_problems(partition, _slurm_fit.parse_partition(partition_text),
                                      _slurm_fit.parse_sinfo_nodes(sinfo_text), int(nodes), int(ranks_per_node),
                                      gpu_ranks=bool(gpu_ranks))


def _wrap(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    def filter_(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise AnsibleFilterError("megatron_ds.cluster.%s: %s" % (name, exc)) from exc
    filter_.__name__ = name
    filter_.__doc__ = func.__doc__
    return filter_


class FilterModule:
    """Slurm filters of megatron_ds.cluster."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        return {
            "slurmd_hardware": _wrap("slurmd_hardware", _slurm.parse_slurmd_hardware),
            "slurm_node_line": _wrap("slurm_node_line", _slurm.node_line),
            "slurm_gpu_devices": _wrap("slurm_gpu_devices", _slurm.gpu_device_files),
            "slurm_process_tracking": _wrap("slurm_process_tracking", _slurm.process_tracking),
            "slurm_layout_problems": _wrap("slurm_layout_problems", layout_problems),
            "slurm_submitted_job_id": _wrap("slurm_submitted_job_id", _slurm_job.parse_submit),
        }
