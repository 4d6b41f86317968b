# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/megatron_launch/templates/job.sbatch.j2 (the slurm launch backend) rendered over a table of job specs with the
role's own recipe (roles/megatron_launch/vars/main.yml __megatron_launch_sbatch_train), then RUN
under a stand-in srun that starts every task the way Slurm does (SLURM_PROCID, SLURM_LOCALID,
SLURM_NTASKS, SLURM_NTASKS_PER_NODE): what each rank received must be exactly what train.sh
passes (train_args), with the rank variables torch.distributed's env:// reads.
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import stat
import subprocess
from typing import Any, Dict

import jinja2
import pytest
from ansible.plugins.filter.core import FilterModule as CoreFilters

from ansible_collections.megatron_ds.cluster.plugins.filter.megatron_job import FilterModule as JobFilters
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import files as _job_files
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import sbatch as _job_sbatch
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles
from ansible_collections.megatron_ds.cluster.tests.unit.job_defaults import spec

REPO = pathlib.Path(__file__).resolve().parents[4]
ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(REPO / "roles" / "megatron_launch" / "templates")), trim_blocks=True,
                         keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
ENV.filters.update(CoreFilters().filters())
ENV.filters.update({"megatron_ds.cluster." + name: f for name, f in JobFilters().filters().items()})

# Stand-in srun: its options up to the command, then every task of a block distribution, with
# the variables slurmstepd sets, one after the other.
FAKE_SRUN = r'''#!/usr/bin/env python3
import os, subprocess, sys
args = sys.argv[1:]
opts = {}
while args and args[0].startswith("--"):
    key, _, value = args.pop(0)[2:].partition("=")
    opts[key] = value
with open(os.environ["FAKE_SRUN_LOG"], "w") as log:
    log.write(" ".join(sorted(opts)) + "\n")
nodes, per_node = int(opts["nodes"]), int(opts["ntasks-per-node"])
rc = 0
for rank in range(nodes * per_node):
    env = dict(os.environ, SLURM_PROCID=str(rank), SLURM_LOCALID=str(rank % per_node),
               SLURM_NTASKS=str(nodes * per_node), SLURM_NTASKS_PER_NODE=str(per_node),
               FAKE_NODE="node%d" % (rank // per_node + 1))
    rc = max(rc, subprocess.call(args, env=env))
sys.exit(rc)
'''
FAKE_SCONTROL = "#!/bin/sh\n[ \"$1 $2\" = 'show hostnames' ] && printf 'node1\\nnode2\\nnode3\\n'\n"
# Stand-in interpreter: what a rank sees.
FAKE_PYTHON = r'''#!/usr/bin/env python3
import json, os, sys
keys = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_SIZE", "MASTER_ADDR", "MASTER_PORT", "FAKE_NODE", "PYTHONPATH")
print("RANKSEEN " + json.dumps({"env": {k: os.environ.get(k) for k in keys}, "argv": sys.argv[1:], "cwd": os.getcwd()}))
'''

JOBS = [
    ("cpu-sim-3x2", dict(nodes=3, gpus_per_node=2, tensor_parallel=1, micro_batch_size=1, global_batch_size=12,
                         zero_stage=1, precision="fp32", tokenizer_type="NullTokenizer", vocab_size=1000), "cpu", False),
    ("gpu-2x8-tp2", dict(nodes=2, gpus_per_node=8, tensor_parallel=2, micro_batch_size=2, global_batch_size=64,
                         env={"OPTS": "with spaces"}, nccl_env={"NCCL_DEBUG": "WARN"}), "cu121", True),
    ("one-node", dict(nodes=1, gpus_per_node=2, tensor_parallel=1, micro_batch_size=1, global_batch_size=2), "cu130",
     True),
]


def _exe(path: pathlib.Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def sbatch_vars(job: Dict[str, Any], profile: str, gpus: bool, log_dir: str) -> Dict[str, Any]:
    """__megatron_launch_sbatch_train as roles/megatron_launch/vars/main.yml builds it."""
    prof = _stack_profiles.get(profile)
    nodelist = ["node%d" % (i + 1) for i in range(job["nodes"])]
    return {
        "kind": "train", "twin": "train.sh", "script": "pretrain_gpt.py",
        "options": _job_sbatch.sbatch_options(job, "sim-gpt", log_dir + "/train-%j.log", "train", "2:00:00", 300,
                                              gpus, nodelist, True, []),
        "shape": _job_sbatch.launch_summary(job),
        "nccl_env_file": job["nccl_env_file"], "nccl_env_dir": job["nccl_env_dir"],
        "env": _job_files.deepspeed_env(job, prof),
        "master_port": job["master_port"],
        "chdir": job["megatron_dir"],
        "arg_groups": _job_args.train_arg_groups(job, prof),
        "restart_args": [],
        "srun_args": _job_sbatch.srun_args(job),
        "rank_command": _job_sbatch.rank_command(job["venv"] + "/bin/python", "pretrain_gpt.py"),
    }


@pytest.mark.parametrize("name, overrides, profile, gpus", JOBS, ids=[j[0] for j in JOBS])
def test_sbatch_script_runs_the_ranks_with_train_sh_arguments(tmp_path, name, overrides, profile, gpus):
    venv, mds = tmp_path / "venv", tmp_path / "Megatron-DeepSpeed"
    (venv / "bin").mkdir(parents=True)
    mds.mkdir()
    job = _job_spec.normalize(spec(stack_profile=profile, venv=str(venv), megatron_dir=str(mds),
                                   nccl_env_file=str(tmp_path / "nccl.env"), nccl_env_dir=str(tmp_path / "nccl.d"),
                                   **overrides))
    (tmp_path / "nccl.env").write_text("NCCL_SOCKET_IFNAME=eth0\n")
    _exe(venv / "bin" / "srun", FAKE_SRUN)
    _exe(venv / "bin" / "scontrol", FAKE_SCONTROL)
    _exe(venv / "bin" / "python", FAKE_PYTHON)
    variables = sbatch_vars(job, profile, gpus, str(tmp_path / "logs"))
    text = ENV.get_template("job.sbatch.j2").render(__megatron_launch_sbatch=variables, megatron_launch_job_name="sim-gpt")
    script = tmp_path / "train.sbatch"
    script.write_text(text)
    assert text.startswith("#!/usr/bin/env bash\n#SBATCH --job-name=sim-gpt\n")
    directives = re.findall(r"^#SBATCH (\S+)$", text, re.M)
    assert directives == variables["options"]
    assert ("--gpus-per-node=%d" % job["gpus_per_node"] in directives) == gpus
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    if shutil.which("shellcheck"):
        check = subprocess.run(["shellcheck", "-S", "warning", str(script)], capture_output=True, text=True, check=False)
        assert check.returncode == 0, check.stdout

    env = dict(os.environ, SLURM_JOB_ID="42", SLURM_JOB_NODELIST="node[1-3]", FAKE_SRUN_LOG=str(tmp_path / "srun"))
    run = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    assert re.match(r"^=== megatron_launch \S+: start pretrain_gpt.py sbatch job 42 on node\[1-3\] restart 0$", lines[0])
    assert re.match(r"^=== megatron_launch \S+: launcher exited rc=0$", lines[-1])
    seen = [json.loads(line[len("RANKSEEN "):]) for line in lines if line.startswith("RANKSEEN ")]
    world = job["nodes"] * job["gpus_per_node"]
    assert [int(r["env"]["RANK"]) for r in seen] == list(range(world))
    expected_args = ["-u", "pretrain_gpt.py"] + _job_args.train_args(job, _stack_profiles.get(profile))
    for rank, rank_seen in enumerate(seen):
        assert rank_seen["env"]["WORLD_SIZE"] == str(world)
        assert rank_seen["env"]["LOCAL_RANK"] == str(rank % job["gpus_per_node"])
        assert rank_seen["env"]["LOCAL_SIZE"] == str(job["gpus_per_node"])
        assert rank_seen["env"]["MASTER_ADDR"] == "node1"
        assert rank_seen["env"]["MASTER_PORT"] == str(job["master_port"])
        assert rank_seen["env"]["PYTHONPATH"] == str(mds)
        # train.sh's argument list, unchanged, and --local_rank last as DeepSpeed's launch.py passes it.
        assert rank_seen["argv"] == expected_args + ["--local_rank=%d" % (rank % job["gpus_per_node"])]
        assert rank_seen["cwd"] == str(mds)
    assert (tmp_path / "srun").read_text().split() == sorted(
        ["distribution", "export", "kill-on-bad-exit", "nodes", "ntasks", "ntasks-per-node"])


def test_a_requeued_burnin_adds_the_restart_arguments(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    _exe(venv / "bin" / "srun", FAKE_SRUN)
    _exe(venv / "bin" / "scontrol", FAKE_SCONTROL)
    _exe(venv / "bin" / "python", FAKE_PYTHON)
    job = _job_spec.normalize(spec(stack_profile="cpu", venv=str(venv), nodes=1, gpus_per_node=2, tensor_parallel=1,
                                   micro_batch_size=1, global_batch_size=2))
    variables = sbatch_vars(job, "cpu", False, str(tmp_path))
    variables.update(kind="burnin", twin="burnin.sh", script=str(tmp_path / "burnin_gpt.py"), chdir=str(tmp_path),
                     arg_groups=[["--steps", "5"]], restart_args=["--load", "/ck"], nccl_env_file="",
                     rank_command=_job_sbatch.rank_command(str(venv / "bin" / "python"), str(tmp_path / "burnin_gpt.py")))
    script = tmp_path / "burnin.sbatch"
    template = ENV.get_template("job.sbatch.j2")
    script.write_text(template.render(__megatron_launch_sbatch=variables, megatron_launch_job_name="sim-gpt"))
    for restarts, tail in (("0", ["--steps", "5"]), ("2", ["--steps", "5", "--load", "/ck"])):
        env = dict(os.environ, SLURM_JOB_ID="7", SLURM_JOB_NODELIST="node1", SLURM_RESTART_COUNT=restarts,
                   FAKE_SRUN_LOG=str(tmp_path / "srun"))
        run = subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, timeout=60, check=False)
        assert run.returncode == 0, run.stderr
        seen = [json.loads(l[len("RANKSEEN "):]) for l in run.stdout.splitlines() if l.startswith("RANKSEEN ")]
        assert [r["argv"][2:-1] for r in seen] == [tail, tail]
        assert "restart %s" % restarts in run.stdout.splitlines()[0]
