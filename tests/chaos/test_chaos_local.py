# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Chaos test of the supervisor on a local process cluster (``make chaos``; not part of CI).

Three "nodes", each a torch launcher with one CPU rank of the burn-in GPT (ZeRO-1, fp32, gloo),
started by chaos_launch.py (train.yml's stand-in) and reached through chaos_ssh.py (ssh's). The
real supervisor program (roles/supervisor/files/megatron_supervisor.py) runs as a process with a
1 s poll. Faults, one after the other, each with no manual step:

1. SIGKILL of a rank: a transient fault, retried on the same nodes from the newest tag;
2. SIGSTOP of a rank (a hang): a stall, retried (its node a suspect);
3. a node lost for good while the newest tag is damaged: the node is excluded, the job re-planned
   on 2 nodes (DP 3 -> 2, gradient accumulation 2 -> 3, global batch 6 kept), the previous
   complete tag converted with ds_to_universal and resumed with --universal-checkpoint;
4. a NaN loss: rolled back to the tag before it.

After each, the iteration goes on from the tag resumed from (the first new iteration is its step
+ 1), and the incident record says what happened. The figures (seconds from the fault to the
first new iteration, iterations lost) are written to $CHAOS_REPORT when set.
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
BURNIN = ROOT / "roles" / "megatron_launch" / "files" / "burnin_gpt.py"
SUPERVISOR = ROOT / "roles" / "supervisor" / "files" / "megatron_supervisor.py"
HERE = pathlib.Path(__file__).resolve().parent
NODES = ["n1", "n2", "n3"]
SAVE_INTERVAL = 3
SPEC = {
    "megatron_job_stack_profile": "cpu", "megatron_job_gpus_per_node": 1, "megatron_job_tensor_parallel": 1,
    "megatron_job_pipeline_parallel": 1, "megatron_job_zero_stage": 1, "megatron_job_precision": "fp32",
    "megatron_job_zero_pin_memory": False, "megatron_job_zero_overlap_comm": False,
    "megatron_job_num_layers": 2, "megatron_job_hidden_size": 64, "megatron_job_num_attention_heads": 4,
    "megatron_job_seq_length": 32, "megatron_job_max_position_embeddings": 32, "megatron_job_micro_batch_size": 1,
    "megatron_job_global_batch_size": 6, "megatron_job_save_interval": SAVE_INTERVAL,
}
ENV = dict(os.environ, PYTHONPATH=str(ROOT / ".collections"), DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")


def _deepspeed_error():
    probe = subprocess.run([sys.executable, "-c", "import deepspeed, torch"], capture_output=True, text=True,
                           timeout=300, check=False, env=ENV)
    return None if probe.returncode == 0 else (probe.stderr.strip().splitlines() or ["?"])[-1]


DS_ERROR = _deepspeed_error()
pytestmark = pytest.mark.skipif(DS_ERROR is not None, reason="DeepSpeed is not importable here (%s)" % DS_ERROR)


class Cluster(LocalCluster):
    def __init__(self, state: pathlib.Path) -> None:
        super().__init__(state, NODES, "burnin_gpt", timeout=240.0)

    def iterations(self) -> List[int]:
        return [int(m.group(1)) for m in (re.search(r"BURNIN step=(\d+) ", l) for l in self.lines()) if m]

    def last(self) -> int:
        """the last logged iteration"""
        found = self.iterations()
        return found[-1] if found else 0

    def resumed(self, count: int):
        """the incident number ``count`` resumed (its first new iteration logged)"""
        records = self.records()
        return records[count - 1] if len(records) >= count and records[count - 1].get("resumed_at") else None


def _damage_newest_tag(ckpt: pathlib.Path) -> str:
    """Cut short the first shard of the newest tag that has one (a tag whose save the kill
    interrupted may have none yet: nothing there to damage, and the supervisor skips it anyway)."""
    shard_name = "zero_pp_rank_0_mp_rank_00_optim_states.pt"
    tags = sorted((p for p in ckpt.iterdir() if re.match(r"global_step\d+$", p.name) and (p / shard_name).is_file()),
                  key=lambda p: int(p.name[len("global_step"):]))
    newest = tags[-1]
    shard = newest / shard_name
    data = shard.read_bytes()
    shard.write_bytes(data[: len(data) // 2])  # a write cut short
    return newest.name


def _check_resume(cluster: Cluster, record: Dict[str, Any]) -> None:
    """The job went on from the tag resumed from: its first logged step is that tag's step + 1."""
    step = record["resumed_step"]
    text = "\n".join(cluster.lines())
    assert re.search(r"BURNIN resumed from \S+global_step%d(_universal)?\S* at step %d" % (step, step), text), step
    assert record["resumed_iteration"] > step
    # a rank that saved on the SIGTERM of the stop makes a tag newer than the last logged iteration
    assert record["iterations_lost"] == max(0, (record["iteration"] or step) - step)
    if record["action"] != "rollback":  # a rollback also drops the NaN iterations run before it was seen
        assert record["iterations_lost"] <= SAVE_INTERVAL * 2


def start(state: pathlib.Path, stall_min: int = 30):
    """The three local nodes running the burn-in, and the supervisor watching them."""
    (state / "down").mkdir()
    (state / "logs").mkdir()
    (state / "spec.json").write_text(json.dumps(SPEC))
    for node in NODES:
        (state / node).mkdir()
        shutil.copy(str(BURNIN), str(state / node / "burnin_gpt.py"))
    inventory = {"all": {"children": {"megatron_nodes": {"hosts": {n: {} for n in NODES}}}}}
    (state / "inventory.json").write_text(json.dumps(inventory))
    (state / "overrides.json").write_text("{}")
    subprocess.run([sys.executable, str(HERE / "chaos_launch.py"), str(state), str(state / "inventory.json"),
                    str(state / "overrides.json")], env=ENV, check=True)
    config = {
        "job": "chaos", "lib": str(ROOT / ".collections"), "nodes": NODES, "spares": [], "head": "n1",
        "gpus_per_node": 1, "rank_pattern": r"python[0-9.]* -u ([^ ]*/)?burnin_gpt\.py( |$)",
        "log_file": str(cluster_log(state)), "record_file": str(state / "launch.json"),
        "checkpoint_dir": str(state / "ckpt"), "python": sys.executable, "inject_missing_state": True,
        "data_follows_samples": False,  # what roles/supervisor renders for supervisor_target: burnin
        "incident_file": str(state / "logs" / "incidents.jsonl"), "textfile_dir": str(state / "logs"),
        "listen_port": 0, "poll_interval": 1, "stop_timeout": 10, "ssh_timeout": 60,
        "ssh": [sys.executable, str(HERE / "chaos_ssh.py"), str(state), "{node}"],
        "policy": {"backoff_base": 1, "backoff_max": 2, "stall_min": stall_min, "save_allowance": 0,
                   "startup_timeout": 300, "max_retries": 5},
        "spec": SPEC, "inventory_vars": {}, "inventory_hosts": {},
        "relaunch_command": [sys.executable, str(HERE / "chaos_launch.py"), str(state), "{inventory}", "{overrides}"],
    }
    (state / "supervisor.json").write_text(json.dumps(config))
    supervisor = subprocess.Popen([sys.executable, str(SUPERVISOR), "--config", str(state / "supervisor.json")],
                                  env=ENV, stdout=open(str(state / "supervisor.out"), "w"), stderr=subprocess.STDOUT)
    return Cluster(state), supervisor


def stop(cluster: "Cluster", supervisor: subprocess.Popen) -> None:
    supervisor.terminate()
    supervisor.wait(timeout=30)
    cluster.kill_all()


def test_rank_kill_is_retried_from_the_newest_tag(tmp_path):
    """The cheap subset .ci/run runs (`make chaos-smoke`): one fault, a rank SIGKILLed, retried on
    the same nodes from the newest tag. The stall limit is wide: a loaded CI machine must not turn
    a slow iteration into a second fault."""
    cluster, supervisor = start(tmp_path, stall_min=180)
    try:
        cluster.wait(lambda: (tmp_path / "ckpt" / "latest").exists() and len(cluster.iterations()) >= SAVE_INTERVAL + 1)
        t0 = time.monotonic()
        os.kill(cluster.pids("n2")[0], signal.SIGKILL)
        rec = dict(cluster.wait(lambda: cluster.resumed(1)))
        assert (rec["fault"], rec["action"], rec["job_nodes"]) == ("rank_exited", "retry", NODES), rec
        _check_resume(cluster, rec)
        assert supervisor.poll() is None, "the supervisor exited"
        print(json.dumps({"fault": "rank_exited", "action": rec["action"], "resumed_step": rec["resumed_step"],
                          "iterations_lost": rec["iterations_lost"],
                          "fault_to_new_iteration_s": round(time.monotonic() - t0, 1)}))
    finally:
        stop(cluster, supervisor)


def test_chaos(tmp_path):
    state = tmp_path
    cluster, supervisor = start(state)
    figures: List[Dict[str, Any]] = []
    try:
        started = time.monotonic()
        cluster.wait(lambda: (state / "ckpt" / "latest").exists() and len(cluster.iterations()) >= SAVE_INTERVAL + 1)
        figures.append({"fault": "startup", "seconds": round(time.monotonic() - started, 1)})

        # 1. SIGKILL of the rank on n2
        t0 = time.monotonic()
        os.kill(cluster.pids("n2")[0], signal.SIGKILL)
        rec = dict(cluster.wait(lambda: cluster.resumed(1)), fault_to_new_iteration_s=0.0)
        rec["fault_to_new_iteration_s"] = round(time.monotonic() - t0, 1)
        assert (rec["fault"], rec["action"]) == ("rank_exited", "retry"), rec
        _check_resume(cluster, rec)
        figures.append(rec)

        # 2. SIGSTOP of the rank on n3: a hang
        cluster.wait(lambda: len(cluster.pids("n3")) == 1 and cluster.last() > rec["resumed_iteration"] + 3)
        t0 = time.monotonic()
        os.kill(cluster.pids("n3")[0], signal.SIGSTOP)
        rec = dict(cluster.wait(lambda: cluster.resumed(2)))
        rec["fault_to_new_iteration_s"] = round(time.monotonic() - t0, 1)
        assert (rec["fault"], rec["action"], rec["nodes"]) == ("stall", "retry", ["n3"]), rec
        _check_resume(cluster, rec)
        figures.append(rec)

        # 3. n3 lost for good, and the newest tag damaged while the job is down
        cluster.wait(lambda: len(cluster.pids("n3")) == 1 and cluster.last() > rec["resumed_iteration"] + 3)
        t0 = time.monotonic()
        (state / "down" / "n3").write_text("")
        for pid in cluster.pids("n3"):
            os.kill(pid, signal.SIGKILL)
        damaged = _damage_newest_tag(state / "ckpt")
        rec = dict(cluster.wait(lambda: cluster.resumed(3)))
        rec["fault_to_new_iteration_s"] = round(time.monotonic() - t0, 1)
        assert (rec["fault"], rec["action"], rec["removed"]) == ("node_unreachable", "exclude", ["n3"]), rec
        assert rec["resumed_step"] < int(damaged[len("global_step"):])
        assert rec["converted"] == "global_step%d_universal" % rec["resumed_step"]
        assert "DP 2, micro 1 x accumulation 3 x DP 2 = global 6" in rec["reason"]
        assert "world 2, micro 1 x grad_acc 3" in "\n".join(cluster.lines())
        _check_resume(cluster, rec)
        figures.append(dict(rec, damaged=damaged))

        # 4. NaN: the next launch's loss turns NaN 4 steps after its tag (a rank killed to relaunch it)
        cluster.wait(lambda: len(cluster.pids("n1")) == 1 and cluster.last() > rec["resumed_iteration"] + 3)
        (state / "nan_at").write_text("")
        os.kill(cluster.pids("n1")[0], signal.SIGKILL)
        t0 = time.monotonic()
        cluster.wait(lambda: cluster.resumed(4))
        figures.append(dict(cluster.records()[3], fault_to_new_iteration_s=round(time.monotonic() - t0, 1)))
        cluster.wait(lambda: any("loss=nan" in line for line in cluster.lines()), every=0.2)
        t0 = time.monotonic()  # the NaN step was logged
        rec = dict(cluster.wait(lambda: cluster.resumed(5)))
        rec["fault_to_new_iteration_s"] = round(time.monotonic() - t0, 1)
        assert (rec["fault"], rec["action"]) == ("nonfinite_loss", "rollback"), rec
        assert rec["resumed_step"] < rec["iteration"]
        _check_resume(cluster, rec)
        figures.append(rec)
        assert supervisor.poll() is None, "the supervisor exited"
        metrics = (state / "logs" / "megatron_supervisor.prom").read_text()
        assert 'megatron_supervisor_incidents_total{job="chaos",fault="node_unreachable",action="exclude"} 1' in metrics
    finally:
        stop(cluster, supervisor)
        report = os.environ.get("CHAOS_REPORT")
        if report:
            pathlib.Path(report).write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
        print(json.dumps([{k: f.get(k) for k in ("fault", "action", "iteration", "resumed_step", "iterations_lost",
                                                 "seconds_to_resume", "fault_to_new_iteration_s", "seconds")} for f in figures], indent=1))


def cluster_log(state: pathlib.Path) -> pathlib.Path:
    return state / "train.log"
