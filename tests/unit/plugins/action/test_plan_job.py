# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the plan_job action plugin (plugins/action/plan_job.py)."""
from __future__ import annotations

from typing import Any, Dict

import pytest
import yaml
from ansible.errors import AnsibleActionFail

from ansible_collections.megatron_ds.cluster.plugins.action.plan_job import ActionModule
from ansible_collections.megatron_ds.cluster.tests.support.action_harness import make_action as build_action

NODES = ["gpu%02d" % i for i in range(1, 9)]
SMALL = {"num_layers": 24, "hidden_size": 2048, "num_attention_heads": 16, "seq_length": 2048,
         "max_position_embeddings": 2048, "global_batch_size": 128, "tensor_parallel": 1,
         "stack_profile": "cu130", "use_flash_attn": True}


def run_action(args: Dict[str, Any], task_vars: Dict[str, Any], check_mode: bool = False) -> Dict[str, Any]:
    action = build_action(ActionModule, args, check_mode=check_mode)
    return action.run(task_vars=task_vars)


def inventory(nodes=NODES, **spec: Any) -> Dict[str, Any]:
    task_vars: Dict[str, Any] = {"groups": {"all": list(nodes), "megatron_nodes": list(nodes)}}
    task_vars.update({"megatron_job_" + key: value for key, value in spec.items()})
    return task_vars


@pytest.mark.parametrize("nodes,gpus,dp", [(NODES[:1], 1, 1), (NODES[:1], 2, 2), (NODES[:2], 8, 16)])
def test_plans_the_inventorys_nodes(nodes, gpus, dp, tmp_path):
    dest = tmp_path / "job.yml"
    result = run_action({"gpus_per_node": gpus, "padded_vocab_size": 8192, "dest": str(dest)},
                        inventory(nodes, **SMALL))
    assert not result.get("failed"), result.get("msg")
    assert result["nodes"] == len(nodes) and result["changed"] is True
    first = result["layouts"][0]
    assert first["tp"] * first["pp"] * first["dp"] == len(nodes) * gpus
    written = yaml.safe_load(dest.read_text())
    assert written == result["chosen"]
    assert written["megatron_job_global_batch_size"] == 128
    assert all(len(line) <= 160 for line in result["table"])
    # the same plan again leaves the file alone
    again = run_action({"gpus_per_node": gpus, "padded_vocab_size": 8192, "dest": str(dest)}, inventory(nodes, **SMALL))
    assert again["changed"] is False


def test_check_mode_writes_nothing(tmp_path):
    dest = tmp_path / "job.yml"
    result = run_action({"gpus_per_node": 1, "dest": str(dest)}, inventory(NODES[:1], **SMALL), check_mode=True)
    assert "chosen" in result and not dest.exists()


@pytest.mark.parametrize("args,spec,message", [
    ({"gpus_per_node": 1, "gpu_memory_mib": 4096}, SMALL, "no layout of 1 node"),
])
def test_nothing_fits_fails_with_the_table(args, spec, message):
    result = run_action(args, inventory(NODES[:1], **spec))
    assert result["failed"] is True and message in result["msg"]


@pytest.mark.parametrize("args,task_vars,message", [
    ({"gpus_per_node": 1}, {"groups": {}}, "number of nodes is unknown"),
    ({"gpus_per_node": 1, "gpu": "V100"}, inventory(NODES[:1], **SMALL), "GPU 'V100' is not known"),
    ({"gpus_per_node": 1}, inventory(NODES[:1], micro_batch_size="x"), "Job spec invalid"),
])
def test_bad_input_fails_early(args, task_vars, message):
    with pytest.raises(AnsibleActionFail, match=message):
        run_action(args, task_vars)


def test_measured_rates_change_the_prediction():
    slow = run_action({"gpus_per_node": 1, "matmul_tflops": 395.0}, inventory(NODES[:1], **SMALL))
    fast = run_action({"gpus_per_node": 1}, inventory(NODES[:1], **SMALL))
    assert slow["hardware"]["matmul_tflops"] == 395.0
    assert slow["layouts"][0]["tokens_per_s"] < fast["layouts"][0]["tokens_per_s"]
