# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The batch ramp-up and interval rules of _job.rules: each refused case with upstream's cite,
each beside a legal neighbour. The default spec: global batch 512, micro 1, DP 8 (micro x DP 8)."""
from __future__ import annotations

import shlex
from typing import Any, Dict, List

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import inputs as _job_inputs
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules as _job_rules
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import script as _job_script
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import args as _mds_args
from ansible_collections.megatron_ds.cluster.tests.support.findings import expect

CLUSTER = {"nodes": 8, "gpus_per_node": 8, "gpu_memory_mib": 81920}
HEAD_DS = "0.19.6"
OLD_DS = "0.9.2"


def samples(*rampup: str) -> Dict[str, Any]:
    """A job with a ramp-up. Upstream takes one only with sample-based training (arguments.py:247 at
    4efb479d, its own rule, "no batch-size ramp-up by iterations"); these cases judge the ramp-up's
    own checks, which the spec's iteration count does not change."""
    return {"extra_args": ["--rampup-batch-size"] + list(rampup)}


CASES = [
    ("legal ramp-up", samples("32", "32", "10000"), HEAD_DS, "ramp-up batches divisible by micro x DP", "pass", ""),
    ("no ramp-up: no finding", {}, HEAD_DS, "--rampup-batch-size accepted", None, ""),
    ("two values", samples("32", "32"), HEAD_DS, "--rampup-batch-size accepted", "fail", "microbatches.py:21"),
    ("start 0", samples("0", "32", "10000"), HEAD_DS, "--rampup-batch-size accepted", "fail", "microbatches.py:104"),
    ("start above global", samples("1024", "32", "10000"), HEAD_DS, "--rampup-batch-size accepted", "fail",
     "microbatches.py:110"),
    ("increment 0", samples("32", "0", "10000"), HEAD_DS, "--rampup-batch-size accepted", "fail", "microbatches.py:111"),
    ("interval not a multiple", samples("32", "64", "10000"), HEAD_DS, "--rampup-batch-size accepted", "fail",
     "expected global batch size interval (480) to be divisible by global batch size increment (64)"),
    ("before_rebase line", samples("32", "64", "10000"), OLD_DS, "--rampup-batch-size accepted", "fail",
     "microbatches.py:126 at 9446eaac"),
    ("negative samples", samples("32", "32", "-1"), HEAD_DS, "--rampup-batch-size accepted", "fail", "microbatches.py:119"),
    ("start equals global", samples("512", "32", "10000"), HEAD_DS, "--rampup-batch-size accepted", "fail",
     "microbatches.py:120"),
    ("start not a multiple of micro x DP", samples("4", "4", "10000"), HEAD_DS,
     "ramp-up start batch divisible by micro x DP", "fail", "microbatches.py:137"),
    ("increment not a multiple of micro x DP", samples("16", "4", "10000"), HEAD_DS,
     "ramp-up increment divisible by micro x DP", "warn", "stops the job when the run reaches it"),
    # A spec's intervals are bounded by the schema (test_spec_intervals_stop_at_the_schema); a
    # train.sh's reach the rule.
    ("eval interval 0", {"script": ["--eval-interval", "0"]}, HEAD_DS, "--eval-interval > 0", "fail", "training.py:1558"),
    ("eval interval 1", {"script": ["--eval-interval", "1"]}, HEAD_DS, "--eval-interval > 0", None, ""),
    ("log interval 0", {"script": ["--log-interval", "0"]}, HEAD_DS, "--log-interval > 0", "fail", "--log-interval"),
    ("log interval 0 before_rebase", {"script": ["--log-interval", "0"]}, OLD_DS, "--log-interval > 0", "fail",
     "training.py:901"),
    ("save interval 0 is legal", {"extra_args": ["--save-interval", "0"]}, HEAD_DS, "--save-interval > 0", None, ""),
]


def _script_findings(flags: List[str], version: str) -> List[Dict[str, str]]:
    """The findings for a train.sh that passes the default job's arguments, then ``flags``
    (argparse keeps the last occurrence)."""
    era = _mds_args.era_for_deepspeed(version)
    args, _dropped = _job_inputs.judged_arguments(_job_spec.normalize({}), version)
    text = " ".join(shlex.quote(word) for word in ["deepspeed", "--num_gpus", "8", "pretrain_gpt.py"] + args + flags)
    parsed = _job_script.parse_train_script(text, era=era)
    return _job_rules.validate(parsed["spec"], None, dict(CLUSTER), None, version, script=parsed)


@pytest.mark.parametrize("key", ["eval_interval", "log_interval", "save_interval"])
def test_spec_intervals_stop_at_the_schema(key: str) -> None:
    """A spec's interval of 0 is refused when the spec is read, naming the variable."""
    with pytest.raises(_job_schema.JobError, match="megatron_job_%s: found 0" % key):
        _job_spec.normalize({key: 0})


@pytest.mark.parametrize("over,version,check,status,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_static_rule(over, version, check, status, words):
    if "script" in over:
        findings = _script_findings(over["script"], version)
    else:
        findings = _job_rules.validate(_job_spec.normalize(over), None, dict(CLUSTER), None, version)
    expect(findings, check, status, words)
