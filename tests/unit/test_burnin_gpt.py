# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/megatron_job/files/burnin_gpt.py run for real: one CPU rank through deepspeed.initialize
(gloo), a few steps, its checkpoint and its PyTorch-profiler traces (the profile.yml path)."""
from __future__ import annotations

import gzip
import json
import os
import pathlib
import socket
import subprocess
import sys
from typing import Dict, List, Optional, Tuple

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "roles" / "megatron_job" / "files" / "burnin_gpt.py"


def _deepspeed_error() -> Optional[str]:
    """Why DeepSpeed cannot be imported by a fresh interpreter, or None. Asked in a subprocess,
    as the tests run the burn-in: in this process ansible-core's sys.intern patch (imported by
    the plugin tests collected before this module) makes torch._dynamo's import fail."""
    probe = subprocess.run([sys.executable, "-c", "import deepspeed"], capture_output=True, text=True,
                           timeout=300, check=False, env=dict(os.environ, DS_ACCELERATOR="cpu"))
    if probe.returncode == 0:
        return None
    return (probe.stderr.strip().splitlines() or ["exit %d" % probe.returncode])[-1]


DS_ERROR = _deepspeed_error()

pytestmark = pytest.mark.skipif(DS_ERROR is not None, reason="DeepSpeed is not importable here (%s); CI installs "
                                "torch and deepspeed into the test venv" % DS_ERROR)

CONFIG = {"train_batch_size": 2, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
          "zero_optimization": {"stage": 1}, "optimizer": {"type": "Adam", "params": {"lr": 1e-3}}}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _command(tmp_path: pathlib.Path, extra: List[str]) -> Tuple[List[str], Dict[str, str]]:
    """argv and environment of a one-rank burn-in of a tiny GPT on the CPU, saving into tmp_path/ckpt."""
    config = tmp_path / "ds_config.json"
    config.write_text(json.dumps(CONFIG))
    env = dict(os.environ, RANK="0", LOCAL_RANK="0", WORLD_SIZE="1", LOCAL_SIZE="1", MASTER_ADDR="127.0.0.1",
               MASTER_PORT=str(_free_port()), DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    argv = [sys.executable, "-u", str(SCRIPT), "--ds-config", str(config), "--layers", "1", "--hidden", "32",
            "--heads", "2", "--seq", "16", "--vocab", "64", "--pool", "4", "--probe-steps", "1",
            "--save", str(tmp_path / "ckpt")] + extra
    return argv, env


def _run(tmp_path: pathlib.Path, extra: List[str]) -> subprocess.CompletedProcess:
    argv, env = _command(tmp_path, extra)
    return subprocess.run(argv, env=env, cwd=tmp_path, text=True, capture_output=True, timeout=300, check=False)


def _result(output: str) -> dict:
    line = next(line for line in output.splitlines() if line.startswith("BURNIN_RESULT "))
    return json.loads(line[len("BURNIN_RESULT "):])


@pytest.mark.parametrize("profile, steps, ranks, traced", [
    (None, None, None, False),                      # no profiler unless asked
    ("pt", "2,3", None, True),                      # every rank when no ranks are given
    ("pt", "1,1", ["0"], True),                     # rank 0 chosen
    ("pt", "2,3", ["1"], False),                    # rank 0 not chosen: no trace from it
])
def test_burnin_trains_saves_and_profiles_the_chosen_ranks(tmp_path, profile, steps, ranks, traced):
    extra = ["--steps", "4"]
    if profile:
        extra += ["--profile", profile, "--profile-steps", steps, "--profile-dir", str(tmp_path / "prof")]
        if ranks:
            extra += ["--profile-ranks"] + ranks
    run = _run(tmp_path, extra)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    result = _result(run.stdout)
    assert result["final_step"] == 4 and result["world"] == 1
    assert (tmp_path / "ckpt" / "latest").read_text().strip() == "global_step4"
    traces = sorted((tmp_path / "prof").glob("*.pt.trace.json.gz")) if (tmp_path / "prof").exists() else []
    if not traced:
        assert traces == []
        assert "BURNIN profile" not in run.stdout
        return
    assert len(traces) == 1 and traces[0].name.startswith("%s_rank0" % socket.gethostname()), traces
    with gzip.open(traces[0], "rt") as handle:
        trace = json.load(handle)
    names = {event.get("name", "") for event in trace["traceEvents"]}
    assert any("ProfilerStep#" in name for name in names), sorted(names)[:20]
    assert "BURNIN profile rank 0 steps %s-%s written to %s" % (steps.split(",")[0], steps.split(",")[1], tmp_path / "prof") in run.stdout


def test_burnin_refuses_bad_profile_steps(tmp_path):
    run = _run(tmp_path, ["--steps", "2", "--profile", "pt", "--profile-steps", "3,2"])
    assert run.returncode != 0
    assert "--profile-steps 3,2: want START,END with 1 <= START <= END" in run.stdout + run.stderr


def test_sigterm_saves_and_exits_zero_even_when_signalled_again(tmp_path):
    """stop.yml's contract: SIGTERM -> the rank saves a tag and exits 0, and a second, late SIGTERM
    (ranks of other nodes can make this rank stop before its own signal comes) does not kill it.
    The late signal's timing is not deterministic here: the molecule launch scenario, where the
    race really happened, is the test of StopFlag.settle()."""
    argv, env = _command(tmp_path, ["--steps", "100000"])
    proc = subprocess.Popen(argv, env=env, cwd=tmp_path, text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen: List[str] = []
    try:
        for line in proc.stdout:
            seen.append(line)
            if line.startswith("BURNIN step=3 "):
                proc.send_signal(15)
            elif line.startswith("BURNIN_RESULT "):
                proc.send_signal(15)  # the late one, while the rank finishes
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    output = "".join(seen)
    assert rc == 0, output[-3000:]
    result = _result(output)
    assert result["stopped_by_sigterm"] is True and result["final_step"] >= 3
    tag = (tmp_path / "ckpt" / "latest").read_text().strip()
    assert tag == "global_step%d" % result["final_step"]
    assert "BURNIN checkpoint %s/%s (SIGTERM)" % (tmp_path / "ckpt", tag) in output
