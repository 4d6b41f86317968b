# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tables for reading a submitted job's state from Slurm (plugins/module_utils/_slurm/job.py).
The texts are the shapes slurm-wlm 22.05 prints (the molecule clusters' version)."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._slurm import job as sj

SQUEUE_RUNNING = "17|RUNNING|None|0:42|node[1-3]|node1\n"
SQUEUE_PENDING = "18|PENDING|Resources|0:00|(null)|(null)\n17|RUNNING|None|1:02|node[1-3]|node1\n"
SQUEUE_DONE = "17|COMPLETED|None|2:13|node[1-3]|node1\n"
SACCT = ("17|COMPLETED|0:0|00:02:13|node[1-3]\n17.batch|COMPLETED|0:0|00:02:13|node1\n"
         "17.0|COMPLETED|0:0|00:02:10|node[1-3]\n")
SACCT_CANCELLED = "19|CANCELLED by 2000|0:15|00:00:09|node[1-3]\n"
SCONTROL = ("JobId=17 JobName=sim-gpt-burnin UserId=megatron(2000) GroupId=megatron(2000) Priority=1 "
            "JobState=COMPLETED Reason=None Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 ExitCode=0:0 "
            "RunTime=00:02:13 TimeLimit=UNLIMITED NodeList=node[1-3] BatchHost=node1 NumNodes=3 NumCPUs=6\n")


@pytest.mark.parametrize("text, job_id", [("42\n", "42"), ("42;molecule\n", "42"), ("warning: x\n43\n", "43")])
def test_parse_submit(text, job_id):
    assert sj.parse_submit(text) == job_id


@pytest.mark.parametrize("text", ["", None, "sbatch: error: Batch job submission failed: Invalid partition name"])
def test_parse_submit_refuses_no_id(text):
    with pytest.raises(ValueError, match="printed no job id"):
        sj.parse_submit(text)


@pytest.mark.parametrize("text, job_id, expected", [
    (SQUEUE_RUNNING, 17, {"state": "RUNNING", "reason": "", "elapsed": "0:42", "nodes": "node[1-3]",
                          "batch_host": "node1", "source": "squeue"}),
    (SQUEUE_PENDING, "18", {"state": "PENDING", "reason": "Resources", "elapsed": "0:00", "nodes": "",
                            "batch_host": "", "source": "squeue"}),
    (SQUEUE_PENDING, "99", {}),
    ("", 17, {}),
    ("slurm_load_jobs error: Invalid job id specified\n", 17, {}),
])
def test_parse_squeue(text, job_id, expected):
    assert sj.parse_squeue(text, job_id) == expected


@pytest.mark.parametrize("text, job_id, expected", [
    (SACCT, 17, {"state": "COMPLETED", "exit_code": "0:0", "elapsed": "00:02:13", "nodes": "node[1-3]",
                 "source": "sacct"}),
    (SACCT_CANCELLED, "19", {"state": "CANCELLED", "exit_code": "0:15", "elapsed": "00:00:09", "nodes": "node[1-3]",
                             "source": "sacct"}),
    (SACCT, 18, {}),
    ("", 17, {}),
])
def test_parse_sacct(text, job_id, expected):
    assert sj.parse_sacct(text, job_id) == expected


@pytest.mark.parametrize("text, expected", [
    (SCONTROL, {"state": "COMPLETED", "reason": "", "exit_code": "0:0", "elapsed": "00:02:13", "nodes": "node[1-3]",
                "batch_host": "node1", "restarts": 1, "source": "scontrol"}),
    ("slurm_load_jobs error: Invalid job id specified", {}),
    ("", {}),
])
def test_parse_scontrol_job(text, expected):
    assert sj.parse_scontrol_job(text) == expected


@pytest.mark.parametrize("sources, state, alive, extra", [
    ((SQUEUE_RUNNING, "", SCONTROL.replace("COMPLETED", "RUNNING")), "RUNNING", True,
     {"source": "squeue", "restarts": 1, "batch_host": "node1"}),
    ((SQUEUE_PENDING.replace("18|", "17|", 1).splitlines()[0], "", ""), "PENDING", True, {"reason": "Resources"}),
    # Purged from squeue, no accounting: slurmctld's memory answers.
    (("", "", SCONTROL), "COMPLETED", False, {"source": "scontrol", "exit_code": "0:0"}),
    # Accounting knows it.
    (("", SACCT_CANCELLED.replace("19|", "17|"), ""), "CANCELLED", False, {"source": "sacct", "exit_code": "0:15"}),
    (("", "", ""), "UNKNOWN", False, {"source": "none"}),
])
def test_job_state(sources, state, alive, extra):
    result = sj.job_state(17, *sources)
    assert result["job_id"] == "17" and result["state"] == state and result["alive"] is alive
    for key, value in extra.items():
        assert result[key] == value, key
