# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/megatron_launch/files/burnin_gpt.py run for real: one CPU rank through deepspeed.initialize
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

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch.logs import ResultParts

SCRIPT = pathlib.Path(__file__).resolve().parents[4] / "roles" / "megatron_launch" / "files" / "burnin_gpt.py"


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


def _results(output: str) -> List[dict]:
    """Every rank's result, put together from its BURNIN_RESULT_PART lines as the collection
    does; a rank whose parts do not decode fails the test. Every part line fits one of srun's
    1024-byte output messages, so no other task's output can land inside it."""
    parts = ResultParts()
    for line in output.splitlines():
        if parts.add(line):
            assert len(line.encode()) + 1 <= 1024, line
    assert "BURNIN_RESULT " not in output
    found, problems = parts.results()
    assert not problems, problems
    return found


def _result(output: str) -> dict:
    (result,) = _results(output)
    return result


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


def _losses(output: str) -> Dict[int, str]:
    return {int(m.split("step=")[1].split()[0]): m.split("loss=")[1].split()[0]
            for m in output.splitlines() if m.startswith("BURNIN step=")}


def test_resume_continues_the_data_where_the_run_stopped(tmp_path):
    # make chaos on Docker nodes: every resume restarted the synthetic data at the pool's start,
    # and the loss dipped by 2-5 times its noise. Resumed, steps 4-6 must see what an
    # uninterrupted run sees: the same weights and the same samples give the same losses.
    for name in ("whole", "cut"):
        (tmp_path / name).mkdir()
    whole = _run(tmp_path / "whole", ["--steps", "6"])
    assert whole.returncode == 0, whole.stdout[-2000:] + whole.stderr[-2000:]
    first = _run(tmp_path / "cut", ["--steps", "3"])
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-2000:]
    second = _run(tmp_path / "cut", ["--steps", "6", "--load", str(tmp_path / "cut" / "ckpt")])
    assert second.returncode == 0, second.stdout[-2000:] + second.stderr[-2000:]
    assert "resumed from" in second.stdout and "at step 3" in second.stdout
    expected = _losses(whole.stdout)
    resumed = _losses(second.stdout)
    assert sorted(resumed) == [4, 5, 6]
    assert [float(resumed[s]) for s in (4, 5, 6)] == pytest.approx([float(expected[s]) for s in (4, 5, 6)], rel=1e-4)


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
            elif line.startswith("BURNIN_RESULT_PART "):
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


def _torchrun(tmp_path: pathlib.Path, ranks: int, extra: List[str], env_extra: Optional[Dict[str, str]] = None
              ) -> subprocess.CompletedProcess:
    """The burn-in on ``ranks`` CPU ranks under torch's launcher (what DeepSpeed's launcher runs per node)."""
    argv, env = _command(tmp_path, extra)
    for key in ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_SIZE", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    env.update(env_extra or {})
    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(ranks),
            "--master_addr", "127.0.0.1", "--master_port", str(_free_port())] + argv[2:]
    return subprocess.run(argv, env=env, cwd=tmp_path, text=True, capture_output=True, timeout=300, check=False)


def test_dp_change_under_zero1_needs_the_universal_checkpoint(tmp_path):
    """The supervisor's node-loss path (plugins/module_utils/_heal/policy.py conversion_needed and
    universal_command): a ZeRO-1 tag saved at DP 2 does not load at DP 1 as it is (DeepSpeed's
    engine refuses), and loads after ds_to_universal with --universal-checkpoint, continuing
    from the saved step."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal.policy import universal_command

    saved = _torchrun(tmp_path, 2, ["--steps", "2"])
    assert saved.returncode == 0, saved.stdout[-2000:] + saved.stderr[-2000:]
    direct = _run(tmp_path, ["--steps", "3", "--load", str(tmp_path / "ckpt")])
    assert direct.returncode != 0
    assert "used a DP world size of 2 but the current world size is 1" in direct.stdout + direct.stderr
    convert = subprocess.run(universal_command(sys.executable, str(tmp_path / "ckpt"), "global_step2", True),
                             env=dict(os.environ, DS_ACCELERATOR="cpu"), text=True, capture_output=True,
                             timeout=300, check=False)
    assert convert.returncode == 0, convert.stdout[-2000:] + convert.stderr[-2000:]
    assert (tmp_path / "ckpt" / "latest_universal").read_text().strip() == "global_step2_universal"
    resumed = _run(tmp_path, ["--steps", "3", "--load", str(tmp_path / "ckpt"), "--universal-checkpoint"])
    assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-2000:]
    assert "BURNIN resumed from %s/global_step2_universal" % (tmp_path / "ckpt") in resumed.stdout
    assert "BURNIN step=3 " in resumed.stdout


def test_nan_fault_injection_turns_the_loss_nan_at_the_chosen_step(tmp_path):
    proc = _torchrun(tmp_path, 1, ["--steps", "3"], {"MEGATRON_DS_BURNIN_NAN_AT_STEP": "2"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    losses = {line.split()[1]: line.split()[2] for line in proc.stdout.splitlines() if line.startswith("BURNIN step=")}
    assert losses["step=1"] != "loss=nan"
    assert losses["step=2"] == "loss=nan"


def test_calibration_measures_matmul_and_allreduce_for_the_planner(tmp_path):
    """Two ranks of one host: the world and the node group are the same two ranks; both time an
    all-reduce, and each rank its matmul."""
    proc = _torchrun(tmp_path, 2, ["--steps", "2", "--calibrate-matmul", "64", "--calibrate-mib", "1"])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # Each result wherever it starts: torch's launcher merges the two ranks' output streams.
    results = _results(proc.stdout)
    assert len(results) == 2
    for result in results:
        calibration = result["calibration"]
        assert set(calibration) == {"matmul_tflops", "matmul_size", "allreduce_mib", "world_busbw_gbps", "node_busbw_gbps"}
        assert calibration["matmul_tflops"] > 0 and calibration["matmul_size"] == 64
        assert calibration["world_busbw_gbps"] > 0 and calibration["node_busbw_gbps"] > 0


def test_calibration_can_be_turned_off_and_a_single_rank_times_no_all_reduce(tmp_path):
    """One rank without a launcher: a matmul rate, no all-reduce (a group of one); with both
    sizes 0 nothing is timed."""
    timed = _run(tmp_path, ["--steps", "1", "--calibrate-matmul", "64", "--calibrate-mib", "1"])
    assert timed.returncode == 0, timed.stdout[-2000:] + timed.stderr[-2000:]
    calibration = _result(timed.stdout)["calibration"]
    assert calibration["matmul_tflops"] > 0
    assert calibration["world_busbw_gbps"] is None and calibration["node_busbw_gbps"] is None
    (tmp_path / "off").mkdir()
    off = _run(tmp_path / "off", ["--steps", "1", "--calibrate-matmul", "0", "--calibrate-mib", "0"])
    assert off.returncode == 0, off.stdout[-2000:] + off.stderr[-2000:]
    assert _result(off.stdout)["calibration"] == {}


@pytest.mark.parametrize("gate_mib, sizes", [("1,2", [1 << 20, 2 << 20]), ("0", None)])
def test_the_fabric_gate_times_the_world_all_reduce_at_its_sizes(tmp_path, gate_mib, sizes):
    """Two gloo ranks: each size timed, busbw = algbw x 2(n-1)/n (1 for two ranks), the data
    check finds no wrong element; "0" measures nothing."""
    proc = _torchrun(tmp_path, 2, ["--steps", "2", "--calibrate-matmul", "0", "--calibrate-mib", "0",
                                   "--gate-mib", gate_mib])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    results = _results(proc.stdout)
    assert len(results) == 2
    for result in results:
        gate = result["allreduce_gate"]
        if sizes is None:
            assert gate is None
            continue
        assert (gate["tool"], gate["ranks"], gate["algorithm"]) == ("gloo", 2, None)
        assert [row["size"] for row in gate["results"]] == sizes
        for row in gate["results"]:
            assert row["wrong"] == 0 and row["time_us"] > 0
            assert row["busbw"] == pytest.approx(row["algbw"], rel=1e-3)


def test_a_single_rank_has_no_fabric_gate_figures(tmp_path):
    proc = _run(tmp_path, ["--steps", "1", "--calibrate-matmul", "0", "--calibrate-mib", "0", "--gate-mib", "1"])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert _result(proc.stdout)["allreduce_gate"] is None
