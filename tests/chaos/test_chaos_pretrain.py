# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The supervisor on the real trainer: Megatron-DeepSpeed's pretrain_gpt.py through a node loss
(``make chaos`` with MEGATRON_DS_SRC; skipped without it).

Three "nodes", each a torch launcher with one CPU rank (gloo, fp32, ZeRO-1) of the real
pretrain_gpt.py, started by chaos_launch.py with the argument list the job model renders for
train.sh, and the real supervisor program with the deployed role's settings for a
``supervisor_target: pretrain`` job (no --inject_missing_state; the checkout on the converter's
path). Faults, one after the other, with no manual step:

1. n3 lost for good: the node is excluded and the job re-planned on two nodes (DP 3 -> 2, gradient
   accumulation 2 -> 3, global batch 6 kept); the supervisor converts the real checkpoint with
   DeepSpeed's ds_to_universal and relaunches with --universal-checkpoint. The checked resume
   passes, and the resumed losses match, one to one, those the interrupted run logged at the same
   iterations (its sampler continues from the consumed samples, so the batches are the same).
2. The next relaunch loses the optimizer state silently (Adam's moments and step zeroed in the tag
   it loads, which chaos_launch.py does once, before the ranks start): the checked resume fails,
   the supervisor stops the job, keeps the tag, falls back to the tag before it, and that resume
   passes.

Needs MEGATRON_DS_SRC (a checkout, used as it is: a copy only so that the dataset's C++ helpers
build outside it) and a python that imports torch, torchvision (megatron/training.py imports the
vision code), DeepSpeed, the checkout's tokenizer module (transformers, nltk), and pybind11 for
the dataset's C++ helpers: MEGATRON_DS_PYTHON, else this one. A venv of the cpu-pypi profile has
all of them (`pip install torch==2.14.1 torchvision==0.29.1`; docs/stack-profiles.md).
"""
from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import time
from typing import Any, Dict, List

import pytest
from chaos_cluster import LocalCluster  # tests/chaos, beside this file

ROOT = pathlib.Path(__file__).resolve().parents[2]
SUPERVISOR = ROOT / "roles" / "supervisor" / "files" / "megatron_supervisor.py"
HERE = pathlib.Path(__file__).resolve().parent
NODES = ["n1", "n2", "n3"]
SAVE_INTERVAL = 10
SOURCE = os.environ.get("MEGATRON_DS_SRC", "")
PYTHON = os.environ.get("MEGATRON_DS_PYTHON", "") or sys.executable
ENV = dict(os.environ, PYTHONPATH=str(ROOT / ".collections"), DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
# The relaunch must match the run it continues to this much, iteration for iteration: a DP change
# reorders the gradient reduction (measured: at most 0.007 in this job; the noise between
# iterations is ~0.04, and a dropped optimizer state is 0.09-0.29 off in its 2nd-5th iteration).
SAME_RUN = 0.02
SPEC = {
    "megatron_job_stack_profile": "cpu", "megatron_job_gpus_per_node": 1, "megatron_job_tensor_parallel": 1,
    "megatron_job_pipeline_parallel": 1, "megatron_job_zero_stage": 1, "megatron_job_precision": "fp32",
    "megatron_job_zero_pin_memory": False, "megatron_job_zero_overlap_comm": False,
    "megatron_job_num_layers": 2, "megatron_job_hidden_size": 64, "megatron_job_num_attention_heads": 4,
    "megatron_job_seq_length": 128, "megatron_job_max_position_embeddings": 128,
    "megatron_job_micro_batch_size": 1, "megatron_job_global_batch_size": 6, "megatron_job_train_iters": 2000,
    # A constant, high learning rate: Adam's state matters at every step, so losing it shows.
    "megatron_job_lr": 3.0e-3, "megatron_job_min_lr": 3.0e-3, "megatron_job_lr_decay_style": "constant",
    "megatron_job_lr_warmup_iters": 2, "megatron_job_log_interval": 1, "megatron_job_eval_interval": 1000,
    "megatron_job_eval_iters": 1, "megatron_job_save_interval": SAVE_INTERVAL,
    "megatron_job_masked_softmax_fusion": False, "megatron_job_bias_gelu_fusion": False,
    "megatron_job_bias_dropout_fusion": False, "megatron_job_tokenizer_type": "NullTokenizer",
    "megatron_job_vocab_size": 1000, "megatron_job_split": "98,1,1", "megatron_job_num_workers": 0,
    "megatron_job_tensorboard_dir": None,
}
ITERATION = re.compile(r"iteration\s+(\d+)/\s*\d+ \|.*?lm loss: ([0-9.Ee+-]+|nan|inf)")


def _why_not() -> str:
    if not SOURCE or not (pathlib.Path(SOURCE) / "pretrain_gpt.py").is_file():
        return "needs a Megatron-DeepSpeed checkout: set MEGATRON_DS_SRC (and MEGATRON_DS_PYTHON)"
    probe = subprocess.run([PYTHON, "-c", "import torch, torchvision, deepspeed, transformers, nltk, pybind11"], capture_output=True,
                           text=True, timeout=300, check=False, env=ENV)
    if probe.returncode:
        return "%s cannot import torch, torchvision, deepspeed, transformers, nltk and pybind11 (a cpu-pypi venv can): %s" % (
            PYTHON, (probe.stderr.strip().splitlines() or ["?"])[-1])
    return ""


WHY_NOT = _why_not()
pytestmark = pytest.mark.skipif(bool(WHY_NOT), reason=WHY_NOT or "upstream present")


def scratch_checkout(dest: pathlib.Path) -> pathlib.Path:
    """An unchanged copy of MEGATRON_DS_SRC, so that the helpers built in it leave the checkout as
    it was."""
    copy = dest / "Megatron-DeepSpeed"
    shutil.copytree(SOURCE, str(copy), ignore=shutil.ignore_patterns(".git", "__pycache__", "*.so", "build"))
    # The dataset's C++ helpers, built once here as megatron/data/Makefile does on the first rank
    # (its `python3 -m pybind11 --includes` must find pybind11: this test's python answers as python3).
    bin_dir = dest / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(PYTHON)
    subprocess.run(["make", "-C", str(copy / "megatron" / "data")], check=True, capture_output=True, timeout=600,
                   env=dict(ENV, PATH="%s%s%s" % (bin_dir, os.pathsep, os.environ.get("PATH", ""))))
    return copy


def make_data(mds: pathlib.Path, dest: pathlib.Path) -> str:
    """A NullTokenizer corpus (space-separated token ids) through the checkout's own preprocess_data.py."""
    dest.mkdir(parents=True, exist_ok=True)
    corpus = dest / "corpus.jsonl"
    with corpus.open("w") as handle:
        for doc in range(600):
            tokens = [str((doc * 7 + i * 13) % 997 + 1) for i in range(60 + doc % 140)]
            handle.write(json.dumps({"text": " ".join(tokens)}) + "\n")
    subprocess.run([PYTHON, "tools/preprocess_data.py", "--input", str(corpus), "--output-prefix", str(dest / "chaos"),
                    "--json-keys", "text", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000",
                    "--dataset-impl", "mmap", "--workers", "1", "--append-eod"],
                   cwd=str(mds), env=dict(ENV, PYTHONPATH=str(mds)), check=True, capture_output=True, timeout=600)
    return str(dest / "chaos_text_document")


class Cluster(LocalCluster):
    def __init__(self, state: pathlib.Path) -> None:
        super().__init__(state, NODES, "pretrain_gpt", timeout=600.0)

    def launches(self) -> List[Dict[int, float]]:
        """{iteration: lm loss} of each launch, in order (train.log's start lines divide them)."""
        out: List[Dict[int, float]] = []
        for line in self.lines():
            if line.startswith("=== megatron_launch") and ": start " in line:
                out.append({})
                continue
            m = ITERATION.search(line)
            if m and out:
                out[-1][int(m.group(1))] = float(m.group(2))
        return out

    def last(self) -> int:
        launches = self.launches()
        return max(launches[-1]) if launches and launches[-1] else 0

    def checked(self, count: int):
        """the incident number ``count`` relaunched and its resume judged good"""
        records = self.records()
        if len(records) >= count and records[count - 1].get("resume_check"):
            return records[count - 1]
        return None


def same_iterations(before: Dict[int, float], after: Dict[int, float]) -> Dict[int, float]:
    """after - before at every iteration both logged."""
    return {i: round(after[i] - before[i], 6) for i in sorted(set(before) & set(after))}


def test_real_trainer_node_loss_and_a_dropped_optimizer_state(tmp_path):
    state = tmp_path
    for sub in ("down", "logs"):
        (state / sub).mkdir()
    mds = scratch_checkout(state)
    spec = dict(SPEC, megatron_job_data_path=make_data(mds, state / "data"), megatron_job_megatron_dir=str(mds))
    (state / "spec.json").write_text(json.dumps(spec))
    (state / "trainer.json").write_text(json.dumps({"megatron_dir": str(mds)}))
    for node in NODES:
        (state / node).mkdir()
        shutil.copy(str(mds / "pretrain_gpt.py"), str(state / node / "pretrain_gpt.py"))
    inventory = {"all": {"children": {"megatron_nodes": {"hosts": {n: {} for n in NODES}}}}}
    (state / "inventory.json").write_text(json.dumps(inventory))
    (state / "overrides.json").write_text("{}")
    launch = [PYTHON, str(HERE / "chaos_launch.py"), str(state)]
    subprocess.run(launch + [str(state / "inventory.json"), str(state / "overrides.json")], env=ENV, check=True)
    config = {
        "job": "chaos-pretrain", "lib": str(ROOT / ".collections"), "nodes": NODES, "spares": [], "head": "n1",
        "gpus_per_node": 1, "rank_pattern": r"python[0-9.]* -u ([^ ]*/)?pretrain_gpt\.py( |$)",
        "log_file": str(state / "train.log"), "record_file": str(state / "launch.json"),
        "checkpoint_dir": str(state / "ckpt"), "python": PYTHON,
        # what roles/supervisor renders for supervisor_target: pretrain
        "inject_missing_state": False, "pythonpath": [str(mds)],
        "incident_file": str(state / "logs" / "incidents.jsonl"), "textfile_dir": str(state / "logs"),
        "listen_port": 0, "poll_interval": 1, "stop_timeout": 20, "ssh_timeout": 60,
        "ssh": [sys.executable, str(HERE / "chaos_ssh.py"), str(state), "{node}"],
        # resume_check_points 5: in this small, noisy job a lost optimizer state is 0.09 off at the
        # 2nd iteration, 0.12 at the 3rd and 0.2-0.29 at the 4th-5th (the defaults judge 3).
        "policy": {"backoff_base": 1, "backoff_max": 2, "stall_min": 120, "save_allowance": 0, "startup_timeout": 900,
                   "max_retries": 5, "resume_check_points": 5},
        "spec": spec, "inventory_vars": {}, "inventory_hosts": {},
        "relaunch_command": launch + ["{inventory}", "{overrides}"],
    }
    (state / "supervisor.json").write_text(json.dumps(config))
    cluster = Cluster(state)
    supervisor = subprocess.Popen([sys.executable, str(SUPERVISOR), "--config", str(state / "supervisor.json")],
                                  env=ENV, stdout=open(str(state / "supervisor.out"), "w"), stderr=subprocess.STDOUT)
    figures: List[Dict[str, Any]] = []
    try:
        started = time.monotonic()
        # The loss a few iterations past a tag, so that the resume is compared with iterations the
        # interrupted run logged (a fault right at a tag leaves only the trend, which this short,
        # noisy run's first 20 iterations make a poor yardstick: see the closing note of issue 26).
        cluster.wait(lambda: (state / "ckpt" / "latest").exists() and cluster.last() >= SAVE_INTERVAL + 3
                     and 3 <= cluster.last() % SAVE_INTERVAL <= 7, every=0.05)
        figures.append({"fault": "startup", "seconds": round(time.monotonic() - started, 1)})

        # 1. n3 lost for good
        t0 = time.monotonic()
        (state / "down" / "n3").write_text("")
        for pid in cluster.pids("n3"):
            os.kill(pid, signal.SIGKILL)
        rec = dict(cluster.wait(lambda: cluster.checked(1)))
        rec["fault_to_checked_s"] = round(time.monotonic() - t0, 1)
        assert (rec["fault"], rec["action"], rec["removed"]) == ("node_unreachable", "exclude", ["n3"]), rec
        assert rec["converted"] == "global_step%d_universal" % rec["resumed_step"], rec
        assert "DP 2, micro 1 x accumulation 3 x DP 2 = global 6" in rec["reason"]
        assert rec["resume_check"]["verdict"] == "ok", rec["resume_check"]
        launches = cluster.launches()
        assert min(launches[-1]) == rec["resumed_step"] + 1  # it went on from the converted tag
        diffs = same_iterations(launches[-2], launches[-1])
        assert diffs and max(abs(d) for d in diffs.values()) <= SAME_RUN, diffs
        text = (state / "supervisor.out").read_text()
        assert "--inject_missing_state" not in text
        figures.append(dict(rec, same_iterations=diffs))

        # 2. the next relaunch loses the optimizer state: a rank killed with the fault armed
        cluster.wait(lambda: cluster.last() >= rec["resumed_step"] + 2 * SAVE_INTERVAL + 2)
        (state / "drop_optimizer_state").write_text("")
        t0 = time.monotonic()
        os.kill(cluster.pids("n1")[0], signal.SIGKILL)
        fallback = dict(cluster.wait(lambda: cluster.checked(3)))
        fallback["fault_to_checked_s"] = round(time.monotonic() - t0, 1)
        retry = cluster.records()[1]
        assert (retry["fault"], retry["action"]) == ("rank_exited", "retry"), retry
        assert "resume_check" not in retry  # its check failed: the fallback's record holds it
        dropped = (state / "drop_optimizer_state.done").read_text().strip()
        assert dropped == "global_step%d" % retry["resumed_step"]
        assert (fallback["fault"], fallback["action"]) == ("resume_failed", "fallback"), fallback
        assert fallback["failed_check"]["verdict"] == "failed", fallback["failed_check"]
        assert "does not continue the run" in fallback["failed_check"]["reason"]
        assert fallback["resumed_step"] < retry["resumed_step"], fallback
        assert (state / "ckpt" / dropped).is_dir(), "the tag that failed its check is kept"
        assert fallback["resume_check"]["verdict"] == "ok", fallback["resume_check"]
        launches = cluster.launches()
        assert min(launches[-1]) == fallback["resumed_step"] + 1
        diffs = same_iterations(launches[-3], launches[-1])  # the run before the dropped state
        assert diffs and max(abs(d) for d in diffs.values()) <= SAME_RUN, diffs
        figures.append(retry)
        figures.append(dict(fallback, same_iterations=diffs))
        assert supervisor.poll() is None, "the supervisor exited"
    finally:
        supervisor.terminate()
        supervisor.wait(timeout=30)
        cluster.kill_all()
        report = os.environ.get("CHAOS_REPORT_PRETRAIN")
        if report:
            pathlib.Path(report).write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
        print(json.dumps([{k: f.get(k) for k in ("fault", "action", "iteration", "resumed_step", "iterations_lost",
                                                 "converted", "seconds_to_resume", "fault_to_checked_s", "seconds",
                                                 "same_iterations")} for f in figures], indent=1))
        for f in figures:
            for key in ("failed_check", "resume_check"):
                if f.get(key):
                    print(key, json.dumps(f[key], indent=1))
