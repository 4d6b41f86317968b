# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn a job spec into the job files' contents (hostfile, ds_config.json,
train.sh, .deepspeed_env). The logic lives in the job package of module_utils (``_job.spec``,
``_job.args``, ``_job.files``): the same builders validate_job judges. Each filter is a thin adapter
that turns the package's JobError into AnsibleFilterError.

* ``job_spec(vars, nodes=N)``: the megatron_job_* variables as a normalized job spec (the role
  builds __megatron_job_spec with it).
* ``ds_config``, ``train_args``, ``train_arg_groups``, ``train_flags``, ``launch_args``,
  ``deepspeed_env``, ``deepspeed_env_lines``, ``job_summary``: built from a job spec.
* ``job_files(spec, profile, hosts)``: every job file's content at once (the role renders its
  templates from it).
* ``hostfile_lines(hosts, slots)``, ``deepspeed_env_file_supported(profile)``.
* ``renamed_variables(hostvars[host])``: one line per renamed variable the host still sets
  (plugin_utils/_renamed.py), for inventory_check.yml and the roles that took the names over.
* ``shell_quote(value)``, ``systemd_quote(value)``: a value as one bash word or one systemd
  ExecStart word, refusing control characters (``_job.hops``, the one table of what each hop
  carries); ``hop_refusals(nccl_env, {host: address}, profile)``: what inventory_check.yml refuses.
* ``sbatch_options(spec, job_name, output, ...)``, ``srun_args(spec)``, ``slurm_launch_summary(spec)``,
  ``slurm_rank_command(python, script)``: the slurm launch backend's sbatch script (``_job.sbatch``).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import files as _job_files
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import hops as _job_hops
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import sbatch as _job_sbatch
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job.schema import JobError
from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _renamed

# Filters whose input is the job spec (the megatron_job_* variables with or without their
# prefix, plus `nodes`). The role builds it as __megatron_job_spec.
_SPEC_FILTERS: Dict[str, Callable[..., Any]] = {
    "job_spec": _job_spec.normalize,
    "ds_config": _job_args.ds_config,
    "train_args": _job_args.train_args,
    "train_arg_groups": _job_args.train_arg_groups,
    "train_flags": _job_args.train_flags,
    "launch_args": _job_args.launch_args,
    "deepspeed_env": _job_files.deepspeed_env,
    "deepspeed_env_lines": _job_files.deepspeed_env_lines,
    "job_summary": _job_spec.summary,
    "job_files": _job_files.contents,
    "sbatch_options": _job_sbatch.sbatch_options,
    "srun_args": _job_sbatch.srun_args,
    "slurm_launch_summary": _job_sbatch.launch_summary,
}
# Filters with another input: a host list, a stack profile.
_OTHER_FILTERS: Dict[str, Callable[..., Any]] = {
    "hostfile_lines": _job_files.hostfile_lines,
    "deepspeed_env_file_supported": _job_files.deepspeed_env_file_supported,
    "slurm_rank_command": _job_sbatch.rank_command,
    "renamed_variables": _renamed.still_set,
    "shell_quote": _job_hops.shell_quote,
    "systemd_quote": _job_hops.systemd_quote,
    "hop_refusals": _job_hops.inventory_refusals,
}


def _adapt(name: str, func: Callable[..., Any], takes_spec: bool) -> Callable[..., Any]:
    full = "megatron_ds.cluster." + name

    def wrapper(value: Any, *args: Any, **kwargs: Any) -> Any:
        if takes_spec and not isinstance(value, Mapping):
            raise AnsibleFilterError(
                "%s: expected the job spec (a mapping of the megatron_job_* variables without "
                "their prefix, plus nodes), got %s" % (full, type(value).__name__)
            )
        try:
            return func(value, *args, **kwargs)
        except (JobError, _stack_profiles.UnknownProfileError) as exc:
            raise AnsibleFilterError("%s: %s" % (full, exc.args[0] if exc.args else exc)) from exc

    wrapper.__name__ = name
    wrapper.__doc__ = func.__doc__
    return wrapper


class FilterModule:
    """Job-file filters of megatron_ds.cluster."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        result = {name: _adapt(name, func, True) for name, func in _SPEC_FILTERS.items()}
        result.update({name: _adapt(name, func, False) for name, func in _OTHER_FILTERS.items()})
        return result
