# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job_probe module as Ansible runs it: docs against the argument spec, and whole-module runs
on this machine (a listening socket, a fake rank process, a log and a checkpoint in tmp_path)."""
from __future__ import annotations

import json
import os
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.modules import job_probe as module
from ansible_collections.megatron_ds.cluster.tests.unit import module_runner as runner

DOCS = runner.module_docs(module)


def run_module(args: Dict[str, Any], tmp_path: Path) -> Dict[str, Any]:
    return runner.run_module(module, args, tmp_path, timeout=60)


@pytest.mark.parametrize("name", ["DOCUMENTATION", "EXAMPLES", "RETURN"])
def test_docs_are_yaml(name):
    assert DOCS[name]


def test_documented_options_match_the_argument_spec():
    runner.assert_options_match_argument_spec(module)


def test_a_port_in_use_and_a_free_port(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    busy = server.getsockname()[1]
    try:
        result = run_module({"ports": [busy]}, tmp_path)
        assert result["listeners"][str(busy)], result
        assert result["listeners"][str(busy)][0]["pid"] in (os.getpid(), None)
    finally:
        server.close()
    result = run_module({"ports": [busy]}, tmp_path)
    assert result["listeners"][str(busy)] == []


def test_rank_processes_paths_log_and_checkpoint(tmp_path):
    script = tmp_path / "burnin_gpt.py"
    script.write_text("import time\ntime.sleep(30)\n")
    rank = subprocess.Popen([sys.executable, "-u", str(script), "--local_rank=1"])
    log = tmp_path / "burnin.log"
    log.write_text("\n".join([
        "earlier run",
        "=== megatron_launch 2026-01-01T00:00:00Z: start burnin_gpt.py /j/burnin.sh",
        # DeepSpeed's runner line: the job's token in its exports.
        'cmd = pdsh -S -w n1,n2 export WANDB_API_KEY="tok-probe-7"; cd /j; python -u -m deepspeed.launcher.launch',
        "node1: BURNIN step=1 loss=6.0000 step_time=0.100s tokens_per_s_per_rank=100.0",
        "node1: BURNIN step=2 loss=5.0000 step_time=0.100s tokens_per_s_per_rank=110.0",
    ]) + "\n")
    ckpt = tmp_path / "ckpt"
    (ckpt / "global_step2").mkdir(parents=True)
    (ckpt / "global_step1").mkdir()
    (ckpt / "latest").write_text("global_step2")
    for name in ("mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                 "zero_pp_rank_1_mp_rank_00_optim_states.pt"):
        (ckpt / "global_step2" / name).write_bytes(b"")
    pid_file = tmp_path / "launcher.pid"
    pid_file.write_text("%d\n" % rank.pid)
    # an index of two sequences and two document boundaries
    index = tmp_path / "corpus.idx"
    index.write_bytes(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, 2, 2) + struct.pack("<2i2q2q", 3, 4, 0, 6, 0, 1))
    record = tmp_path / "launch.json"
    record.write_text(json.dumps({"job": "burnin"}))
    try:
        time.sleep(0.2)
        result = run_module({
            # This test's own script path: burn-ins of molecule containers on the same machine
            # show in the host's process list too.
            "rank_pattern": r"python[0-9.]* -u %s/burnin_gpt\.py( |$)" % str(tmp_path).replace(".", r"\."),
            "paths": [str(script), str(tmp_path / "missing.bin"), str(index)],
            "pid_file": str(pid_file), "log_file": str(log), "log_offset": len("earlier run\n"),
            "checkpoint_dir": str(ckpt), "record_file": str(record),
        }, tmp_path)
    finally:
        rank.kill()
        rank.wait()
    assert [(r["pid"], r["local_rank"]) for r in result["ranks"]] == [(rank.pid, 1)]
    assert result["paths"][str(script)]["exists"] and not result["paths"][str(tmp_path / "missing.bin")]["exists"]
    assert "index" not in result["paths"][str(script)]
    assert result["paths"][str(index)]["index"] == {"size": len(index.read_bytes()), "magic": "mmap", "version": 1,
                                                    "dtype_code": 8, "sequences": 2, "documents": 2}
    assert result["launcher"] == {"pid": rank.pid, "alive": True, "pid_file": str(pid_file)}
    assert result["log"]["kind"] == "burnin" and result["log"]["last"]["iteration"] == 2
    assert result["log"]["tail"][0].startswith("=== megatron_launch")
    assert "export WANDB_API_KEY=<hidden>;" in result["log"]["tail"][1]
    assert "tok-probe-7" not in json.dumps(result)
    checkpoint = result["checkpoint"]
    assert checkpoint["latest"] == "global_step2" and checkpoint["latest_step"] == 2
    assert checkpoint["tags"] == ["global_step1", "global_step2"]
    assert checkpoint["shape"]["tp"] == 1 and checkpoint["shape"]["dp"] == 2
    assert result["record"] == {"job": "burnin"}
    assert result["changed"] is False


def test_another_tag_is_listed_when_asked(tmp_path):
    ckpt = tmp_path / "ckpt"
    (ckpt / "global_step4").mkdir(parents=True)
    (ckpt / "global_step4" / "zero_pp_rank_3_mp_rank_00_optim_states.pt").write_bytes(b"")
    result = run_module({"checkpoint_dir": str(ckpt), "checkpoint_tag": "global_step4"}, tmp_path)
    assert result["checkpoint"]["latest"] is None
    assert result["checkpoint"]["files"] == ["zero_pp_rank_3_mp_rank_00_optim_states.pt"]


def test_a_bad_pattern_fails_saying_so(tmp_path):
    result = run_module({"rank_pattern": "python(["}, tmp_path)
    assert result["failed"] and "not a valid regular expression" in result["msg"]


@pytest.mark.parametrize("check_mode", [False, True])
def test_shm_sweep_removes_the_users_stale_buffers(tmp_path, check_mode):
    import pwd
    user = pwd.getpwuid(os.getuid()).pw_name
    shm = tmp_path / "shm"
    shm.mkdir()
    stale = shm / ("deepspeed_allreduce_buffer_%d_10.0.0.1_29500_0" % os.getuid())
    other = shm / ("deepspeed_allreduce_buffer_%d_10.0.0.1_29500_0" % (os.getuid() + 1))
    stale.write_bytes(b"\0")
    other.write_bytes(b"\0")
    result = run_module({"shm_sweep_user": user, "shm_dir": str(shm), "_ansible_check_mode": check_mode}, tmp_path)
    assert (result["changed"], result["shm_removed"]) == (True, [str(stale)])
    assert stale.exists() is check_mode and other.exists()
    again = run_module({"shm_sweep_user": user, "shm_dir": str(shm)}, tmp_path)
    assert (again["changed"], again["shm_removed"]) == (check_mode, [str(stale)] if check_mode else [])


def test_shm_sweep_names_an_unknown_user(tmp_path):
    result = run_module({"shm_sweep_user": "no-such-user-x"}, tmp_path)
    assert result["failed"] and "'no-such-user-x' is not a user on this node" in result["msg"]


# Stand-ins for Slurm's client commands: what slurm-wlm 22.05 prints for a job, and sacct as it
# answers without accounting storage (the slurm role's setup).
FAKE_SLURM = {
    "squeue": "#!/bin/sh\nprintf '%s'\n",
    "sacct": "#!/bin/sh\necho 'Slurm accounting storage is disabled' >&2\nexit 1\n",
    "scontrol": "#!/bin/sh\nprintf '%s'\n",
}


@pytest.mark.parametrize("squeue, scontrol, state, alive, source", [
    ("17|RUNNING|None|0:42|node[1-3]|node1\n", "JobId=17 JobState=RUNNING Restarts=0 NodeList=node[1-3]\n",
     "RUNNING", True, "squeue"),
    ("17|PENDING|Resources|0:00|(null)|(null)\n", "", "PENDING", True, "squeue"),
    # Gone from squeue: slurmctld still remembers it (MinJobAge).
    ("", "JobId=17 JobState=COMPLETED Reason=None Restarts=1 ExitCode=0:0 NodeList=node[1-3] BatchHost=node1\n",
     "COMPLETED", False, "scontrol"),
    ("", "", "UNKNOWN", False, "none"),
])
def test_slurm_job_state_replaces_the_pid(tmp_path, monkeypatch, squeue, scontrol, state, alive, source):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in FAKE_SLURM.items():
        path = bin_dir / name
        path.write_text(text % {"squeue": squeue, "scontrol": scontrol}.get(name, "") if "%s" in text else text)
        path.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:%s" % (bin_dir, os.environ.get("PATH", "")))
    result = run_module({"slurm_job_id": "17"}, tmp_path)
    assert result["_rc"] == 0, result
    assert result["slurm"]["state"] == state and result["slurm"]["source"] == source, result["slurm"]
    assert result["launcher"] == {"slurm_job_id": "17", "state": state, "alive": alive}


def test_without_a_slurm_job_id_there_is_no_slurm_answer(tmp_path):
    result = run_module({}, tmp_path)
    assert result["slurm"] == {} and result["launcher"] == {}


@pytest.mark.parametrize("launcher, logged, iterations, deadline, now, waits", [
    ({"alive": True}, 1, 3, 100.0, 10.0, True),     # running, 1 of 3 logged, time left
    ({"alive": True}, 3, 3, 100.0, 10.0, False),    # the iterations are there
    ({"alive": False}, 0, 3, 100.0, 10.0, False),   # the launcher ended (the play then says how)
    ({"alive": True}, 0, 0, 100.0, 10.0, True),     # a burn-in: wait for the launcher's end
    ({"alive": True}, 0, 3, 100.0, 100.0, False),   # the chunk is over
    ({}, 0, 0, 100.0, 10.0, False),                 # no launcher to wait on
])
def test_waiting_on(launcher, logged, iterations, deadline, now, waits):
    assert module.waiting_on(launcher, {"iterations_logged": logged}, iterations, deadline, now) is waits


def test_a_wait_ends_when_the_launcher_ends(tmp_path):
    """A launcher that lives 2 s: a probe asked to wait 30 s answers when it exits, with the log."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2)"])
    pid_file = tmp_path / "launcher.pid"
    pid_file.write_text("%d\n" % proc.pid)
    log = tmp_path / "train.log"
    log.write_text("")
    try:
        started = time.time()
        result = run_module({"pid_file": str(pid_file), "log_file": str(log), "wait_seconds": 30,
                             "wait_interval": 1}, tmp_path)
    finally:
        proc.wait()
    assert result["launcher"]["alive"] is False and 1.0 <= result["waited"] < 25
    assert time.time() - started < 28
