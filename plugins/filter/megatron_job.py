# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters that turn a job spec into the job files' contents (hostfile, ds_config.json,
train.sh, .deepspeed_env). The logic lives in module_utils/_jobfiles.py; each filter is a thin
adapter that turns its errors into AnsibleFilterError. Each filter is documented in the YAML
file of the same name beside this one."""
from __future__ import annotations

from typing import Any, Callable, Dict, Mapping

from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.module_utils import _jobfiles

# Filters whose input is the job spec: the megatron_job_* variables without the prefix, plus
# `nodes`. The role builds it as __megatron_job_spec.
_SPEC_FILTERS = (
    _jobfiles.ds_config,
    _jobfiles.train_args,
    _jobfiles.train_arg_groups,
    _jobfiles.train_flags,
    _jobfiles.launch_args,
    _jobfiles.deepspeed_env,
    _jobfiles.deepspeed_env_lines,
    _jobfiles.job_summary,
)
# Filters with another input: a host list, a stack profile.
_OTHER_FILTERS = (
    _jobfiles.hostfile_lines,
    _jobfiles.deepspeed_env_file_supported,
)


def _adapt(func: Callable[..., Any], takes_spec: bool) -> Callable[..., Any]:
    name = "megatron_ds.cluster." + func.__name__

    def wrapper(value: Any, *args: Any, **kwargs: Any) -> Any:
        if takes_spec and not isinstance(value, Mapping):
            raise AnsibleFilterError(
                "%s: expected the job spec (a mapping of the megatron_job_* variables without "
                "their prefix, plus nodes), got %s" % (name, type(value).__name__)
            )
        try:
            return func(value, *args, **kwargs)
        except _jobfiles.JobFilesError as exc:
            raise AnsibleFilterError("%s: %s" % (name, exc)) from exc
        except KeyError as exc:  # an unknown stack profile name
            raise AnsibleFilterError("%s: %s" % (name, exc.args[0] if exc.args else exc)) from exc

    wrapper.__name__ = func.__name__
    wrapper.__doc__ = func.__doc__
    return wrapper


class FilterModule:
    """Job-file filters of megatron_ds.cluster."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        result = {func.__name__: _adapt(func, True) for func in _SPEC_FILTERS}
        result.update({func.__name__: _adapt(func, False) for func in _OTHER_FILTERS})
        return result
