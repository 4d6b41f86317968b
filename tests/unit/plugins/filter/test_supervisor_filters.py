# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the supervisor filters (plugins/filter/supervisor.py)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.megatron_ds.cluster.plugins.filter.supervisor import heal_replan, incident_summary
from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import incident as _incident

FAULT = {"fault": "node_unreachable", "kind": "node", "nodes": ["node3"], "evidence": "no ssh"}
DECISION = {"action": "exclude", "nodes": ["node1", "node2"], "removed": ["node3"], "added": [], "reason": "r"}
SPEC = {"megatron_job_stack_profile": "cpu", "megatron_job_gpus_per_node": 2, "megatron_job_tensor_parallel": 1,
        "megatron_job_pipeline_parallel": 1, "megatron_job_precision": "fp32", "megatron_job_num_layers": 2,
        "megatron_job_hidden_size": 64, "megatron_job_num_attention_heads": 4, "megatron_job_seq_length": 128,
        "megatron_job_max_position_embeddings": 128, "megatron_job_global_batch_size": 12, "nodes": 3}


@pytest.mark.parametrize("lines, by_action", [
    ([], {}),
    ([_incident.make_record("t1", FAULT, DECISION, 15, 10)], {"exclude": 1}),
    ([_incident.make_record("t1", FAULT, DECISION, 15, 10),
      {"event": "resumed", "at": "t2", "iteration": 11, "seconds": 30.5},
      _incident.make_record("t3", {"fault": "nonfinite_loss", "kind": "nonfinite"},
                            {"action": "stop", "nodes": ["node1"]}, 22, None)], {"exclude": 1, "stop": 1}),
])
def test_incident_summary(lines, by_action):
    text = "".join(json.dumps(line) + "\n" for line in lines) + "not json\n"
    got = incident_summary(text)
    assert got["by_action"] == by_action
    assert got["incidents"] == sum(by_action.values())


@pytest.mark.parametrize("nodes, accumulation", [(3, 2), (2, 3), (1, 6)])
def test_heal_replan_keeps_global_batch(nodes, accumulation):
    assert heal_replan(SPEC, nodes)["derived"]["gradient_accumulation_steps"] == accumulation


def test_heal_replan_refuses_a_string():
    with pytest.raises(Exception, match="expected the megatron_job_"):
        heal_replan(json.dumps(SPEC), 2)


@pytest.mark.parametrize("memory_mib, ok", [(None, True), ("143771", True), (1000, False)])
def test_heal_replan_passes_the_gpu_memory(memory_mib, ok):
    spec = dict(SPEC, megatron_job_stack_profile="cu130", megatron_job_precision="bf16", megatron_job_num_layers=24,
                megatron_job_hidden_size=2048, megatron_job_num_attention_heads=16, megatron_job_seq_length=2048,
                megatron_job_max_position_embeddings=2048, megatron_job_use_flash_attn=True)
    got = heal_replan(spec, 2, 2, memory_mib)
    assert got["ok"] is ok, got["reason"]
    assert ("memory per GPU" in got["reason"]) is (memory_mib is not None and ok)


def test_incident_summary_carries_the_goodput_ledger():
    text = "\n".join(['{"event": "watching", "epoch": 1000.0}',
                      '{"fault": "rank_exit", "action": "retry", "seconds_to_detect": 5, "iterations_lost": 0}',
                      '{"event": "resumed", "seconds": 45}'])
    got = incident_summary(text, now=1500.0)
    assert got["incidents"] == 1 and got["goodput"]["ettr"] == 0.9 and got["goodput"]["wall_s"] == 500.0
    assert incident_summary('{"fault": "x", "action": "retry"}')["goodput"] is None  # an older file
