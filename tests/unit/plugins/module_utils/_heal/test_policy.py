# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the self-healing policy (_heal): classify, decide, stall_timeout, replan,
resume_tag, conversion_needed, universal_command."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import policy as _heal
from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal.policy import (
    EXCLUDE,
    NODE,
    REPLACE,
    RETRY,
    ROLL_BACK,
    ROLLBACK,
    STOP,
    TRANSIENT,
)

POL = _heal.policy()
NODES = ["node1", "node2", "node3"]

# The simulated cluster's job (inventories/sim): 2 ranks per node, TP 1, PP 1, ZeRO-1, global 12.
SIM: Dict[str, Any] = {
    "megatron_job_stack_profile": "cpu", "megatron_job_gpus_per_node": 2, "megatron_job_tensor_parallel": 1,
    "megatron_job_pipeline_parallel": 1, "megatron_job_zero_stage": 1, "megatron_job_precision": "fp32",
    "megatron_job_num_layers": 2, "megatron_job_hidden_size": 64, "megatron_job_num_attention_heads": 4,
    "megatron_job_seq_length": 128, "megatron_job_max_position_embeddings": 128,
    "megatron_job_micro_batch_size": 1, "megatron_job_global_batch_size": 12, "nodes": 3,
}


@pytest.mark.parametrize("overrides, key, value", [
    (None, "max_retries", 3),
    ({"max_retries": "5"}, "max_retries", 5),
    ({"stall_factor": 4}, "stall_factor", 4),
    ({"backoff_base": 0}, "backoff_base", 0),
])
def test_policy(overrides, key, value):
    assert _heal.policy(overrides)[key] == value


@pytest.mark.parametrize("overrides, message", [
    ({"retries": 1}, "unknown key"),
    ({"max_retries": "many"}, "expected a number"),
    ({"max_retries": -1}, "expected a number >= 0"),
    ({"max_retries": True}, "expected a number >= 0"),
    ({"min_nodes": 0}, "min_nodes: found 0, expected >= 1"),
])
def test_policy_refuses(overrides, message):
    with pytest.raises(_heal.PolicyError, match=message):
        _heal.policy(overrides)


@pytest.mark.parametrize("times, overrides, expected", [
    ([], None, 1800.0),                                   # no iteration yet: startup timeout
    ([None, 0], None, 1800.0),                            # nothing measured
    ([1.0, 2.0], None, 320.0),                            # 10 x 2 s + 300 s save allowance
    ([0.1], {"save_allowance": 0}, 120.0),                # floor: stall_min
    ([30.0], {"stall_factor": 3, "save_allowance": 60}, 150.0),
    ([float("nan"), 5.0], {"save_allowance": 0}, 120.0),  # a NaN time is not a measurement
])
def test_stall_timeout(times, overrides, expected):
    assert _heal.stall_timeout(times, _heal.policy(overrides)) == expected


@pytest.mark.parametrize("observation, fault, kind, nodes", [
    ({}, None, None, None),
    ({"finished": True, "exited": {"node1": 0}}, None, None, None),
    ({"exited": {"node2": -9}}, "rank_exited", TRANSIENT, ["node2"]),
    ({"exited": {"node2": -9}, "bad_nodes": {"node2": "burn-in probe failed"}}, "rank_exited", NODE, ["node2"]),
    ({"unreachable": ["node3"], "exited": {"node1": 1}}, "node_unreachable", NODE, ["node3"]),
    ({"nonfinite_iteration": 12, "unreachable": ["node3"]}, "nonfinite_loss", ROLLBACK, []),
    ({"stalled_for": 100, "stall_timeout": 320}, None, None, None),
    ({"stalled_for": 400, "stall_timeout": 320}, "stall", TRANSIENT, []),
    ({"stalled_for": 400, "stall_timeout": 320, "stopped_ranks": {"node2": 1, "node1": 0}}, "stall", TRANSIENT, ["node2"]),
    ({"save_failed": "OSError: [Errno 28] No space left on device"}, "save_failed", TRANSIENT, []),
    ({"bad_nodes": {"node1": "Xid 79"}}, "rank_exited", NODE, ["node1"]),
    # The fabric gate's verdict: the job still trains (slowly), the named node is a node fault...
    ({"fabric_slow": {"node2": "fabric gate verdict of T: node2: all-reduce 2 GB/s"}}, "fabric_slow", NODE, ["node2"]),
    # ...and beside another fault it is one of its bad nodes.
    ({"stalled_for": 400, "stall_timeout": 320, "fabric_slow": {"node2": "x"}}, "stall", NODE, ["node2"]),
    ({"unreachable": ["node3"], "fabric_slow": {"node2": "x"}}, "node_unreachable", NODE, ["node3"]),
    # GPU faults (_heal.gpu_faults tiers): exclude is a bad node, reset a gpu_reset fault, retry a
    # suspect; record adds evidence only
    ({"exited": {"*": 1}, "gpu_faults": {"node2": {"tier": "exclude", "evidence": "exclude: GPU 3 Xid 79"}}},
     "rank_exited", NODE, ["node2"]),
    ({"exited": {"*": 1}, "gpu_faults": {"node1": {"tier": "reset", "evidence": "reset: GPU 0 Xid 95"}}},
     "rank_exited", _heal.GPU_RESET, ["node1"]),
    ({"exited": {"*": 1}, "gpu_faults": {"node1": {"tier": "retry", "evidence": "retry: GPU 0 Xid 13"}}},
     "rank_exited", TRANSIENT, ["node1"]),
    ({"exited": {"*": 1}, "gpu_faults": {"node1": {"tier": "record", "evidence": "record: GPU 0 Xid 63"}}},
     "rank_exited", TRANSIENT, []),
    ({"gpu_faults": {"node1": {"tier": "record", "evidence": "record: GPU 0 Xid 63"}}}, None, None, None),
])
def test_classify(observation, fault, kind, nodes):
    got = _heal.classify(observation)
    if fault is None:
        assert got is None
    else:
        assert (got["fault"], got["kind"], got["nodes"]) == (fault, kind, nodes)
        assert got["evidence"]


def test_classify_nonfinite_keeps_iteration():
    assert _heal.classify({"nonfinite_iteration": 7})["iteration"] == 7


@pytest.mark.parametrize("attempt, expected", [(1, 30.0), (2, 60.0), (3, 120.0), (6, 600.0), (10, 600.0)])
def test_backoff(attempt, expected):
    assert _heal.backoff(attempt, POL) == expected


TRANSIENT_N2 = {"fault": "rank_exited", "kind": TRANSIENT, "nodes": ["node2"]}
TRANSIENT_ANY = {"fault": "stall", "kind": TRANSIENT, "nodes": []}
NODE_N3 = {"fault": "node_unreachable", "kind": NODE, "nodes": ["node3"]}
NAN = {"fault": "nonfinite_loss", "kind": ROLLBACK, "nodes": [], "iteration": 12}
GPU_RESET_N2 = {"fault": "rank_exited", "kind": "gpu_reset", "nodes": ["node2"]}


@pytest.mark.parametrize("fault, history, spares, pol, action, nodes, wait", [
    # transient, first time: retry on the same nodes after the first backoff
    (TRANSIENT_ANY, [], [], {}, RETRY, NODES, 30.0),
    (TRANSIENT_ANY, [{"action": RETRY}], [], {}, RETRY, NODES, 60.0),
    # retries exhausted: stop
    (TRANSIENT_ANY, [{"action": RETRY}] * 3, [], {}, STOP, NODES, 0.0),
    # the same node blamed twice (node_fault_after 2): it becomes a node fault, excluded
    (TRANSIENT_N2, [{"action": RETRY, "kind": TRANSIENT, "nodes": ["node2"]}], [], {}, EXCLUDE, ["node1", "node3"], 0.0),
    # blamed once: retry
    (TRANSIENT_N2, [], [], {}, RETRY, NODES, 30.0),
    # node fault with a spare: replace, same layout
    (NODE_N3, [], ["spare1"], {}, REPLACE, ["node1", "node2", "spare1"], 0.0),
    # the spare is already in use: exclude
    (NODE_N3, [], ["node1"], {}, EXCLUDE, ["node1", "node2"], 0.0),
    # fewer nodes than min_nodes: stop
    (NODE_N3, [], [], {"min_nodes": 3}, STOP, NODES, 0.0),
    # a node that is not the job's: nothing to exclude
    ({"fault": "node_unreachable", "kind": NODE, "nodes": ["elsewhere"]}, [], [], {}, STOP, NODES, 0.0),
    # NaN: roll back up to max_rollbacks, then stop
    (NAN, [], [], {}, ROLL_BACK, NODES, 0.0),
    (NAN, [{"action": ROLL_BACK}], [], {}, ROLL_BACK, NODES, 0.0),
    (NAN, [{"action": ROLL_BACK}] * 2, [], {}, STOP, NODES, 0.0),
    ({"fault": "x", "kind": "strange", "nodes": []}, [], [], {}, STOP, NODES, 0.0),
    # a GPU to reset: reset and retry on the same nodes, once per node (max_gpu_resets), then a node fault
    (GPU_RESET_N2, [], [], {}, _heal.RESET, NODES, 0.0),
    (GPU_RESET_N2, [{"action": _heal.RESET, "nodes": ["node1"]}], [], {}, _heal.RESET, NODES, 0.0),
    (GPU_RESET_N2, [{"action": _heal.RESET, "nodes": ["node2"]}], [], {}, EXCLUDE, ["node1", "node3"], 0.0),
    (GPU_RESET_N2, [{"action": _heal.RESET, "nodes": ["node2"]}], ["spare1"], {}, REPLACE, ["node1", "spare1", "node3"], 0.0),
])
def test_decide(fault, history, spares, pol, action, nodes, wait):
    got = _heal.decide(fault, history, _heal.policy(pol), NODES, spares)
    assert (got["action"], got["nodes"], got["wait_s"]) == (action, nodes, wait)
    assert got["reason"]


def test_decide_records_removed_and_added():
    got = _heal.decide(NODE_N3, [], POL, NODES, ["spare1", "spare2"])
    assert (got["removed"], got["added"]) == (["node3"], ["spare1"])


def _sim(**changes: Any) -> Dict[str, Any]:
    spec = dict(SIM)
    spec.update({("megatron_job_" + k if k != "nodes" else k): v for k, v in changes.items()})
    return spec


@pytest.mark.parametrize("spec, nodes_left, ok, dp, micro, grad_acc, overrides, reason", [
    # the chaos test's node loss: 3 -> 2 nodes, DP 6 -> 4, accumulation 2 -> 3, global 12 kept
    (_sim(), 2, True, 4, 1, 3, {}, "DP 4, micro 1 x accumulation 3"),
    (_sim(), 1, True, 2, 1, 6, {}, "global 12 on 1 node"),
    # micro 4 does not fit DP 4 into 12: the largest divisor that does (1) is taken
    (_sim(micro_batch_size=4), 2, True, 4, 1, 3, {"megatron_job_micro_batch_size": 1}, "micro 1"),
    (_sim(micro_batch_size=2), 3, True, 6, 2, 1, {}, "DP 6, micro 2"),
    # the global batch cannot be kept
    (_sim(global_batch_size=6), 4, False, None, None, None, {}, "global batch 6 is not divisible by micro x DP 8"),
    # TP x PP does not divide the GPUs left
    (_sim(tensor_parallel=4, hidden_size=64), 1, False, None, None, None, {}, "TP 4 x PP 1 = 4 does not divide the 2 GPUs"),
    # the job model's rules still judge the new spec
    (_sim(num_attention_heads=3), 2, False, None, None, None, {}, "hidden divisible by heads"),
    (_sim(), 0, False, None, None, None, {}, "no node left"),
    (_sim(precision="fp8"), 2, False, None, None, None, {}, "the job spec does not read"),
])
def test_replan(spec, nodes_left, ok, dp, micro, grad_acc, overrides, reason):
    got = _heal.replan(spec, nodes_left)
    assert got["ok"] is ok, got["reason"]
    assert reason in got["reason"]
    assert got["overrides"] == overrides
    if ok:
        derived = got["derived"]
        assert (derived["data_parallel_size"], derived["micro_batch_size"], derived["gradient_accumulation_steps"]) \
            == (dp, micro, grad_acc)
        # Megatron: global batch = micro x DP x accumulation, the same as before
        assert derived["global_batch_size"] == micro * dp * grad_acc == got["before"]["global_batch_size"]


GPT_123B_2X2 = {
    "megatron_job_stack_profile": "cu130", "megatron_job_gpus_per_node": 2, "megatron_job_tensor_parallel": 1,
    "megatron_job_pipeline_parallel": 1, "megatron_job_zero_stage": 1, "megatron_job_precision": "bf16",
    "megatron_job_num_layers": 24, "megatron_job_hidden_size": 2048, "megatron_job_num_attention_heads": 16,
    "megatron_job_seq_length": 2048, "megatron_job_max_position_embeddings": 2048, "megatron_job_use_flash_attn": True,
    "megatron_job_micro_batch_size": 32, "megatron_job_global_batch_size": 256, "nodes": 2,
}


@pytest.mark.parametrize("memory_mib, ok, micro, overrides, reason", [
    # GPU memory unknown (the cpu profile, no facts): judged by the other rules only
    (None, True, 32, {}, "DP 2, micro 32 x accumulation 4"),
    # an H200: micro 32 at DP 2 is about 121 GiB (measured 120.6 GiB reserved, docs/benchmarks.md)
    (143771, True, 32, {}, "memory per GPU"),
    # a 100 GB card: micro 32 no longer fits at DP 2, micro 16 does; the global batch stays
    (100000, True, 16, {"megatron_job_micro_batch_size": 16}, "micro 16 x accumulation 8"),
    # nothing fits: refused, naming each micro batch tried
    (20000, False, None, {}, "no micro batch fits the GPU's 20000 MiB on 1 node(s) with TP 1, PP 1, ZeRO-1"),
])
def test_replan_judges_memory_on_the_nodes_left(memory_mib, ok, micro, overrides, reason):
    got = _heal.replan(GPT_123B_2X2, 1, gpu_memory_mib=memory_mib)
    assert got["ok"] is ok, got["reason"]
    assert reason in got["reason"]
    assert got["overrides"] == overrides
    if ok:
        assert got["derived"]["micro_batch_size"] == micro
        assert got["derived"]["global_batch_size"] == 256
    else:
        assert "micro 32:" in got["reason"] and "micro 1:" in got["reason"]


def _report(*rows):
    return {"tags": [{"tag": "global_step%d" % step, "step": step, "ok": ok, "problems": 0 if ok else 2}
                     for step, ok in rows]}


@pytest.mark.parametrize("report, before, tag, skipped", [
    (_report((10, True), (20, True)), None, "global_step20", []),
    # the newest is damaged: fall back to the previous complete tag
    (_report((10, True), (20, False)), None, "global_step10", ["global_step20"]),
    # NaN at iteration 20: the tag saved at 20 may already hold it
    (_report((10, True), (20, True)), 20, "global_step10", ["global_step20"]),
    (_report((10, False), (20, False)), None, None, ["global_step20", "global_step10"]),
    ({"tags": []}, None, None, []),
    ({"tags": [{"tag": "odd", "step": None, "ok": True}]}, None, None, []),
])
def test_resume_tag(report, before, tag, skipped):
    got = _heal.resume_tag(report, before)
    assert got["tag"] == tag
    assert [s["tag"] for s in got["skipped"]] == skipped


def _shape(tp=1, pp=1, dp=6, zero=1, bf16=False):
    return {"tensor_parallel": tp, "pipeline_parallel": pp, "data_parallel": dp, "zero_stage": zero, "bf16": bf16}


@pytest.mark.parametrize("saved, new, why", [
    (_shape(), _shape(), None),
    (_shape(dp=6), _shape(dp=4), "DP changes from 6 to 4"),        # ZeRO-1: partitioned optimizer
    (_shape(zero=0), _shape(zero=0, dp=4), None),                   # ZeRO-0 fp32: any DP loads
    (_shape(zero=0, bf16=True), _shape(zero=0, dp=4, bf16=True), "bf16"),
    (_shape(tp=2), _shape(tp=1), "TP changes from 2 to 1"),
    (_shape(pp=2, zero=0), _shape(pp=1, zero=0), "PP changes"),
])
def test_conversion_needed(saved, new, why):
    got = _heal.conversion_needed(saved, new)
    if why is None:
        assert got is None
    else:
        assert why in got


@pytest.mark.parametrize("inject, tail", [
    (False, ["--output_folder", "/ck/global_step10_universal"]),
    (True, ["--output_folder", "/ck/global_step10_universal", "--inject_missing_state"]),
])
def test_universal_command(inject, tail):
    argv = _heal.universal_command("/venv/bin/python", "/ck/", "global_step10", inject)
    assert argv[:5] == ["/venv/bin/python", "-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder",
                        "/ck/global_step10"]
    assert argv[5:] == tail


@pytest.mark.parametrize("environ, pythonpath, expected", [
    # the burn-in: nothing to add, the environment as it was
    ({"PATH": "/bin"}, None, None),
    ({"PATH": "/bin"}, [], None),
    ({"PATH": "/bin", "PYTHONPATH": "/x"}, [""], "/x"),
    # pretrain_gpt.py: the checkout first, what was there after it
    ({"PATH": "/bin"}, ["/opt/megatron/Megatron-DeepSpeed"], "/opt/megatron/Megatron-DeepSpeed"),
    ({"PYTHONPATH": "/site"}, ["/mds"], "/mds:/site"),
    ({"PYTHONPATH": ""}, ["/mds", "/more"], "/mds:/more"),
])
def test_universal_env(environ, pythonpath, expected):
    env = _heal.universal_env(environ, pythonpath)
    assert env.get("PYTHONPATH") == expected
    assert {k: v for k, v in env.items() if k != "PYTHONPATH"} == {k: v for k, v in environ.items() if k != "PYTHONPATH"}
    assert environ == dict(environ)  # the caller's mapping is left alone
