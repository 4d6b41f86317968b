"""The burn-in across the three nodes through pdsh, status, stop (SIGTERM saves) and resume.

The tests run in file order and build on each other: a finished burn-in, then a long one that is
stopped and resumed from the tag the stop saved.
"""
from __future__ import annotations

import gzip
import json
import re
import tempfile
import time
from pathlib import Path

from launch_helpers import (BURNIN_CKPT, BURNIN_DIR, BURNIN_LOG, NODES, RANKS_PER_NODE, assert_saved_on_sigterm,
                            burnin_results, checkpoint_files, latest, module, node, playbook, run_log, status,
                            stop_saving)

STOP_CKPT = BURNIN_DIR + "/checkpoints-stop"
STEPS = 20


def test_burnin_runs_on_every_node_through_pdsh_and_the_loss_goes_down():
    rc, output = playbook("burnin.yml")
    assert rc == 0, output
    assert "Burn-in passed on 3 node(s)" in output
    for name in NODES:  # the per-node table
        assert re.search(r"%s\s+%d\s+[0-9.]+\s+[0-9.]+" % (name, RANKS_PER_NODE), output), name

    lines = run_log(BURNIN_LOG)
    results = burnin_results(lines)
    assert len(results) == len(NODES) * RANKS_PER_NODE, lines[-30:]
    # Every rank printed through pdsh from its own node (the prefix) and reports that host.
    for name in NODES:
        here = [r for r in results if r["hostname"] == name]
        assert len(here) == RANKS_PER_NODE, (name, results)
        assert {r["pdsh_prefix"] for r in here} == {name}
        assert sorted(r["local_rank"] for r in here) == list(range(RANKS_PER_NODE))
    assert sorted(r["rank"] for r in results) == list(range(len(NODES) * RANKS_PER_NODE))
    rank0 = next(r for r in results if r["rank"] == 0)
    assert rank0["world"] == 6 and rank0["device"] == "cpu" and rank0["final_step"] == STEPS
    assert rank0["final_loss"] < rank0["initial_loss"], rank0
    # The DeepSpeed launcher went multi-node over pdsh, with the CPU accelerator (gloo).
    joined = "\n".join(lines)
    assert "pdsh -S -f 1024 -w node1,node2,node3" in joined or "cmd = pdsh" in joined, lines[:40]


def test_burnin_checkpoint_is_in_deepspeed_layout_with_shards_on_their_nodes():
    tag = "global_step%d" % STEPS
    assert latest("node1", BURNIN_CKPT) == tag
    files = {name: checkpoint_files(name, BURNIN_CKPT, tag) for name in NODES}
    # Global rank 0 (node1) writes the model states and `latest`; every rank its optimizer shard.
    assert "mp_rank_00_model_states.pt" in files["node1"], files
    for index, name in enumerate(NODES):
        shards = ["zero_pp_rank_%d_mp_rank_00_optim_states.pt" % (index * RANKS_PER_NODE + r)
                  for r in range(RANKS_PER_NODE)]
        for shard in shards:
            assert shard in files[name], (name, files)


CHECK = "megatron_ds.cluster.megatron_checkpoint_info"
EXPECT = {"world_size": len(NODES) * RANKS_PER_NODE, "tensor_parallel": 1, "pipeline_parallel": 1, "zero_stage": 1}


def test_checkpoint_module_checks_each_nodes_part_and_loads_it():
    """No shared storage: every node checks the ranks whose files it wrote, and torch.loads them."""
    for index, name in enumerate(NODES):
        own = list(range(index * RANKS_PER_NODE, (index + 1) * RANKS_PER_NODE))
        result = module(name, CHECK, {"path": BURNIN_CKPT, "tag": "global_step%d" % STEPS, "ranks": own,
                                      "expect": EXPECT, "load": True, "python": "/opt/megatron/venv/bin/python"})
        assert not result.get("failed") and result["ok"], (name, result.get("message"), result.get("problems"))
        assert result["problems"] == [] and result["mismatches"] == []
        assert result["load"]["loaded"] == len(result["files"]), (name, result["load"])


def test_checkpoint_module_catches_a_cut_shard_a_missing_rank_and_another_shape():
    """On a copy of node2's part of the real checkpoint (ranks 2 and 3), and node1's model states."""
    copy = "/tmp/ckpt-damaged"
    tag = "global_step%d" % STEPS
    shard = "zero_pp_rank_%d_mp_rank_00_optim_states.pt"
    node2 = node("node2")
    node2.check_output("rm -rf %s && cp -a %s %s" % (copy, BURNIN_CKPT, copy))
    try:
        args = {"path": copy, "tag": tag, "ranks": [2, 3], "expect": EXPECT}
        assert module("node2", CHECK, args)["ok"]
        node2.check_output("truncate -s 200 %s/%s/%s" % (copy, tag, shard % 2))
        node2.check_output("rm %s/%s/%s" % (copy, tag, shard % 3))
        result = module("node2", CHECK, args)
        assert result.get("failed") and not result["ok"], result
        assert any(shard % 2 in problem for problem in result["problems"]), result["problems"]
        assert any(shard % 3 in problem and "lacks 1 of the 2 files" in problem for problem in result["problems"]), \
            result["problems"]
        assert copy in result["message"]

    finally:
        node2.run("rm -rf %s" % copy)
    # The shape shows on the node with the model states (node1): a TP 2 job cannot load it as is.
    result = module("node1", CHECK, {"path": BURNIN_CKPT, "tag": tag, "expect": dict(EXPECT, tensor_parallel=2)})
    assert result.get("failed") and result["mismatches"], result
    assert any("tensor_parallel=1, expected 2" in m and "universal" in m.lower() for m in result["mismatches"]), \
        result["mismatches"]


def test_status_reports_the_finished_burnin():
    report = status()
    assert report["job"] == "burnin" and report["state"] == "finished", report
    assert report["launcher_rc"] == 0
    assert report["iteration"] == STEPS and report["ranks_alive"] == 0
    assert report["checkpoint_latest"] == "global_step%d" % STEPS
    assert set(report["nodes"]) == set(NODES)


def test_profile_traces_the_chosen_ranks_on_their_nodes_and_fetches_them():
    """profile.yml on the burn-in: ranks 0 (node1) and 3 (node2) under the PyTorch profiler."""
    with tempfile.TemporaryDirectory() as fetch_dir:
        rc, output = playbook("profile.yml", {
            "megatron_launch_profile_target": "burnin",
            "megatron_launch_profile_steps": "2,3",
            "megatron_launch_profile_ranks": [0, 3],
            "megatron_launch_profile_fetch_dir": fetch_dir,
        })
        assert rc == 0, output
        assert "2 trace(s) of steps 2,3 fetched to %s/" % fetch_dir in output
        traces = sorted(Path(fetch_dir).glob("*/*/*.pt.trace.json.gz"))
        # Each trace came from the node that ran the rank, and is a real profiler trace.
        assert [(t.parent.name, t.name.split(".")[0]) for t in traces] == [
            ("node1", "node1_rank0"), ("node2", "node2_rank3")], traces
        for trace in traces:
            with gzip.open(trace, "rt") as handle:
                events = json.load(handle)["traceEvents"]
            assert any(e.get("name", "").startswith("ProfilerStep#") for e in events), trace
    # The profiled burn-in wrote its checkpoint beside the traces, not into the burn-in's own.
    assert latest("node1", BURNIN_CKPT) == "global_step%d" % STEPS
    assert status()["state"] == "finished"


def test_stop_saves_a_checkpoint_and_resume_continues_from_its_step():
    rc, output = playbook("burnin.yml", {
        "megatron_launch_burnin_wait": False,
        "megatron_launch_burnin_steps": 100000,
        "megatron_launch_burnin_checkpoint_dir": STOP_CKPT,
    })
    assert rc == 0, output
    deadline = time.monotonic() + 300
    report = {}
    while time.monotonic() < deadline:
        report = status()
        if report["state"] == "running" and (report["iteration"] or 0) >= 3:
            break
        assert report["state"] in ("starting", "running"), report
        time.sleep(3)
    assert report["state"] == "running", report
    assert report["ranks_alive"] == len(NODES) * RANKS_PER_NODE
    for name in NODES:
        assert report["nodes"][name]["ranks"] == RANKS_PER_NODE
        assert report["nodes"][name]["local_ranks"] == list(range(RANKS_PER_NODE))

    step, tag, output = stop_saving(STOP_CKPT)
    assert "latest checkpoint: %s/%s" % (STOP_CKPT, tag) in output
    assert_saved_on_sigterm(run_log(BURNIN_LOG), STOP_CKPT, tag)
    # Without shared storage node2 and node3 hold only their own shards, and no `latest`.
    assert latest("node2", STOP_CKPT) is None and latest("node3", STOP_CKPT) is None
    assert "mp_rank_00_model_states.pt" not in checkpoint_files("node2", STOP_CKPT, tag)
    assert status()["state"] == "stopped"

    rc, output = playbook("burnin.yml", {
        "megatron_launch_burnin_resume": True,
        "megatron_launch_burnin_steps": step + 5,
        "megatron_launch_burnin_checkpoint_dir": STOP_CKPT,
    })
    assert rc == 0, output
    assert "Resuming from %s/%s" % (STOP_CKPT, tag) in output
    # node1 gathers node2's and node3's shards; node2 and node3 get the model states and `latest`.
    assert "%s (" % tag in output and "copied to node1, node2, node3" in output
    lines = run_log(BURNIN_LOG)
    assert any(re.search(r"BURNIN resumed from %s/%s\S* at step %d\b" % (re.escape(STOP_CKPT), tag, step), line)
               for line in lines), lines[:60]
    rank0 = next(r for r in burnin_results(lines) if r["rank"] == 0)
    assert rank0["start_step"] == step and rank0["final_step"] == step + 5, rank0
    assert latest("node1", STOP_CKPT) == "global_step%d" % (step + 5)
    # The resumed tag was copied to every node before any rank started.
    for name in ("node2", "node3"):
        assert latest(name, STOP_CKPT) == tag
        assert "mp_rank_00_model_states.pt" in checkpoint_files(name, STOP_CKPT, tag)
