# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tables for the slurm launch backend's sbatch options (plugins/module_utils/_job/sbatch.py)."""
from __future__ import annotations

import os
import re
import subprocess

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import sbatch as sb
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import processes as _launch_processes
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job.schema import JobError
from ansible_collections.megatron_ds.cluster.tests.unit.job_defaults import spec

CPU_3X2 = spec(nodes=3, gpus_per_node=2, tensor_parallel=1, micro_batch_size=1, global_batch_size=12)
GPU_8X8 = spec(nodes=8, gpus_per_node=8, tensor_parallel=8, pipeline_parallel=2, no_pipeline_parallel=False,
               micro_batch_size=2, global_batch_size=256)
LOG = "/opt/megatron/jobs/gpt/logs/train-%j.log"


@pytest.mark.parametrize("text, seconds", [
    ("", None), (None, None), ("UNLIMITED", None), ("infinite", None),
    ("90", 5400), ("10:30", 630), ("2:00:00", 7200), ("1-0", 86400), ("1-02", 93600), ("1-02:03", 93780),
    ("1-02:03:04", 93784), ("0:45", 45),
])
def test_time_limit_seconds(text, seconds):
    assert sb.time_limit_seconds(text) == seconds


@pytest.mark.parametrize("text", ["1h", "1:2:3:4", "-5", "1-", "two"])
def test_time_limit_seconds_refuses_other_formats(text):
    with pytest.raises(JobError, match="megatron_launch_slurm_time_limit"):
        sb.time_limit_seconds(text)


@pytest.mark.parametrize("job, kwargs, expected", [
    # The molecule cluster: CPU ranks, pinned nodes, no time limit (no --time).
    (CPU_3X2, dict(partition="train", gpus=False, nodelist=["node1", "node2", "node3"]),
     ["--job-name=gpt", "--partition=train", "--nodes=3", "--ntasks-per-node=2", "--nodelist=node1,node2,node3",
      "--exclusive", "--mem=0", "--requeue", "--signal=TERM@300", "--output=" + LOG, "--open-mode=append"]),
    # 8 x 8 GPUs, default partition, a day's limit, the warning 10 minutes before, an account.
    (GPU_8X8, dict(time_limit="1-00:00:00", signal_seconds=600, extra=["--account=ml"]),
     ["--job-name=gpt", "--nodes=8", "--ntasks-per-node=8", "--gpus-per-node=8", "--exclusive", "--mem=0",
      "--time=1-00:00:00", "--requeue", "--signal=TERM@600", "--output=" + LOG, "--open-mode=append",
      "--account=ml"]),
    # No signal, no requeue.
    (CPU_3X2, dict(signal_seconds=0, requeue=False, gpus=False),
     ["--job-name=gpt", "--nodes=3", "--ntasks-per-node=2", "--exclusive", "--mem=0", "--no-requeue",
      "--output=" + LOG, "--open-mode=append"]),
    # Numbers given as strings (extra vars) are read as numbers.
    (CPU_3X2, dict(signal_seconds="120", time_limit="30", gpus=False),
     ["--job-name=gpt", "--nodes=3", "--ntasks-per-node=2", "--exclusive", "--mem=0", "--time=30", "--requeue",
      "--signal=TERM@120", "--output=" + LOG, "--open-mode=append"]),
])
def test_sbatch_options(job, kwargs, expected):
    assert sb.sbatch_options(job, "gpt", LOG, **kwargs) == expected


@pytest.mark.parametrize("job, kwargs, message", [
    (CPU_3X2, dict(output="/logs/train.log"), "has no %j"),
    (CPU_3X2, dict(signal_seconds=70000), "expected 0..65535"),
    (CPU_3X2, dict(signal_seconds=-1), "expected 0..65535"),
    (CPU_3X2, dict(signal_seconds="soon"), "expected a number of seconds"),
    (CPU_3X2, dict(signal_seconds=300, time_limit="5"), "before they could run"),
    (CPU_3X2, dict(time_limit="5h"), "megatron_launch_slurm_time_limit"),
    (CPU_3X2, dict(partition="train;rm"), "megatron_launch_slurm_partition"),
    (CPU_3X2, dict(job_name="my job"), "megatron_job_name"),
    (CPU_3X2, dict(nodelist=["node1", "node2"]), "names 2 node(s), the job spec has 3"),
    (CPU_3X2, dict(nodelist=["node1", "node 2", "node3"]), "node name"),
    (CPU_3X2, dict(extra=["-A ml"]), "megatron_launch_slurm_extra_options"),
    (CPU_3X2, dict(extra=["--comment=a\n#SBATCH --x"]), "megatron_launch_slurm_extra_options"),
    # The job model's own refusal: the world does not divide by TP.
    (spec(nodes=3, gpus_per_node=2, tensor_parallel=4), {}, "not divisible by TP 4"),
])
def test_sbatch_options_refuse(job, kwargs, message):
    args = dict(job_name="gpt", output=LOG)
    args.update(kwargs)
    with pytest.raises(JobError) as info:
        sb.sbatch_options(job, **args)
    assert message in str(info.value)


@pytest.mark.parametrize("job, expected", [
    (CPU_3X2, ["--nodes=3", "--ntasks-per-node=2", "--ntasks=6", "--distribution=block", "--kill-on-bad-exit=1",
               "--export=ALL"]),
    (GPU_8X8, ["--nodes=8", "--ntasks-per-node=8", "--ntasks=64", "--distribution=block", "--kill-on-bad-exit=1",
               "--export=ALL"]),
])
def test_srun_args(job, expected):
    assert sb.srun_args(job) == expected


@pytest.mark.parametrize("job, expected", [
    (CPU_3X2, {"nodes": 3, "ranks_per_node": 2, "world_size": 6}),
    (GPU_8X8, {"nodes": 8, "ranks_per_node": 8, "world_size": 64}),
])
def test_launch_summary(job, expected):
    assert sb.launch_summary(job) == expected


@pytest.mark.parametrize("python, script, tail", [
    ("/opt/megatron/venv/bin/python", "pretrain_gpt.py", ["/opt/megatron/venv/bin/python", "pretrain_gpt.py"]),
    ("/v/bin/python", "/jobs/burnin/burnin_gpt.py", ["/v/bin/python", "/jobs/burnin/burnin_gpt.py"]),
])
def test_rank_command(python, script, tail):
    command = sb.rank_command(python, script)
    assert command[:2] == ["/bin/bash", "-c"] and command[3] == "megatron-rank"
    assert command[4:] == tail
    for variable in ("RANK=\"${SLURM_PROCID}\"", "WORLD_SIZE=\"${SLURM_NTASKS}\"", "LOCAL_RANK=\"${SLURM_LOCALID}\""):
        assert variable in command[2]


@pytest.mark.parametrize("script, args", [
    ("pretrain_gpt.py", ["--num-layers", "2"]),
    ("/opt/megatron/jobs/gpt/burnin/burnin_gpt.py", ["--steps", "20"]),
])
def test_the_rank_pattern_matches_the_ranks_and_not_srun(tmp_path, script, args):
    """status.yml and stop.yml find ranks with rank_pattern(script): srun's own command line
    (seen by them on the first node) must not count as a rank; the exec'd rank must."""
    python = "/opt/megatron/venv/bin/python"
    srun = " ".join(["srun"] + sb.srun_args(CPU_3X2) + sb.rank_command(python, script) + args)
    pattern = re.compile(_launch_processes.rank_pattern(script))
    assert not pattern.search(srun), srun
    # What the wrapper execs, run for real with a stand-in interpreter that prints its argv.
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho \"$0 $*\"\n")
    fake.chmod(0o755)
    env = dict(os.environ, SLURM_PROCID="3", SLURM_NTASKS="6", SLURM_LOCALID="1", SLURM_NTASKS_PER_NODE="2")
    out = subprocess.run(sb.rank_command(str(fake), script) + args, env=env, capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "%s -u %s %s --local_rank=1" % (fake, script, " ".join(args))
    assert pattern.search(out.replace(str(fake), python))


@pytest.mark.parametrize("python, script", [("", "pretrain_gpt.py"), ("/v/bin/python", "")])
def test_rank_command_needs_both(python, script):
    with pytest.raises(JobError, match="rank_command"):
        sb.rank_command(python, script)
