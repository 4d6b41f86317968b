# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_job.files.contents: every job file's content computed once, for the megatron_job role's
templates. Each part must equal its own builder for the same spec and profile (the templates
only lay the parts out), the profile argument must win over the spec's stack_profile, and a
spec that cannot be written fails before any part is returned."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import files as _job_files
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job.schema import JobError
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles
from ansible_collections.megatron_ds.cluster.tests.unit.job_defaults import spec

CASES = [
    # name, overrides, profile, hosts
    ("defaults-cu117", {}, "cu117", ["node1", "node2"]),
    ("defaults-cu130", {}, "cu130", ["node1", "node2"]),
    ("prod-13b", dict(nodes=8, gpus_per_node=8, tensor_parallel=8, pipeline_parallel=2, no_pipeline_parallel=False,
                      micro_batch_size=2, global_batch_size=256), "cu121", ["10.10.0.%d" % i for i in range(1, 9)]),
    ("cpu-3x2", dict(nodes=3, gpus_per_node=2, tensor_parallel=1, micro_batch_size=1, global_batch_size=12,
                     zero_stage=2, precision="fp32", tokenizer_type="NullTokenizer", vocab_size=1000), "cpu",
     ["a", "b", "c"]),
]


@pytest.mark.parametrize("name, overrides, profile, hosts", CASES, ids=[c[0] for c in CASES])
def test_each_part_is_its_own_builder(name, overrides, profile, hosts):
    job = spec(**overrides)
    prof = _stack_profiles.get(profile)
    got = _job_files.contents(job, prof, hosts)
    assert got == {
        "summary": _job_spec.summary(dict(job, stack_profile=profile)),
        "ds_config": _job_args.ds_config(job, prof),
        "launch_args": _job_args.launch_args(job),
        "train_arg_groups": _job_args.train_arg_groups(job, prof),
        "deepspeed_env_keys": sorted(_job_files.deepspeed_env(job, prof)),
        "deepspeed_env_file_supported": _job_files.deepspeed_env_file_supported(prof),
        "hostfile_lines": _job_files.hostfile_lines(hosts, job["gpus_per_node"]),
    }
    assert got["hostfile_lines"] == ["%s slots=%d" % (h, job["gpus_per_node"]) for h in hosts]


@pytest.mark.parametrize("profile, supported", [("cu117", False), ("cu130", True)])
def test_the_profile_argument_wins_over_the_spec(profile, supported):
    """The role passes the resolved profile; a spec naming another one is rendered for it."""
    job = spec(stack_profile="cu121")
    got = _job_files.contents(job, profile, ["n1", "n2"])
    assert got["deepspeed_env_file_supported"] is supported
    assert got["train_arg_groups"] == _job_args.train_arg_groups(job, profile)


@pytest.mark.parametrize("overrides, hosts, message", [
    (dict(global_batch_size=7), ["n1", "n2"], "global"),
    ({}, [], "no hosts"),
    ({}, ["n1", "n1"], "both resolve to 'n1'"),
    ({}, ["bad host", "n2"], "cannot be used"),
])
def test_a_job_that_cannot_be_written_fails(overrides, hosts, message):
    with pytest.raises(JobError, match=message):
        _job_files.contents(spec(**overrides), "cu121", hosts)
