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


def inventory(nodes=NODES, gpu_model: Any = "H200", **spec: Any) -> Dict[str, Any]:
    task_vars: Dict[str, Any] = {"groups": {"all": list(nodes), "megatron_nodes": list(nodes)}}
    if gpu_model is not None:
        task_vars["megatron_gpu_model"] = gpu_model
    task_vars.update({"megatron_job_" + key: value for key, value in spec.items()})
    return task_vars


def with_facts(task_vars: Dict[str, Any], models: Dict[str, tuple]) -> Dict[str, Any]:
    """gpu_stack_facts per node: {node: (model name as nvidia-smi reports it, memory_mib)}."""
    task_vars = dict(task_vars, hostvars={
        node: {"gpu_stack_facts": {"gpus": {"count": 1, "model": name, "memory_mib": memory}}}
        for node, (name, memory) in models.items()})
    return task_vars


@pytest.mark.parametrize("gpu_model, facts, gpu, source", [
    ("A100-80GB", {}, "A100-80GB", "inventory megatron_gpu_model"),
    ("a100-80gb", {}, "A100-80GB", "inventory megatron_gpu_model"),
    (None, {"gpu01": ("NVIDIA A100-SXM4-80GB", 81920)}, "A100-80GB", "gpu_stack_facts of 1 node(s)"),
    (None, {"gpu01": ("NVIDIA H100 80GB HBM3", 81559)}, "H100", "gpu_stack_facts"),
    ("H200", {"gpu01": ("NVIDIA A100-SXM4-80GB", 81920)}, "H200", "inventory"),  # the inventory says it
])
def test_the_gpu_comes_from_the_inventory_or_the_facts(gpu_model, facts, gpu, source):
    task_vars = with_facts(inventory(NODES[:1], gpu_model=gpu_model, **SMALL), facts)
    result = run_action({"gpus_per_node": 1}, task_vars)
    assert result["gpu"] == gpu and source in result["gpu_from"]
    assert result["table"][0].startswith(gpu)


@pytest.mark.parametrize("gpu_model, facts, message", [
    (None, {}, "the GPU model is unknown .*set megatron_gpu_model"),
    (None, {"gpu01": ("NVIDIA A100-SXM4-80GB", 81920), "gpu02": ("NVIDIA H100 80GB HBM3", 81559)},
     "name different GPUs"),
    (None, {"gpu01": ("Tesla V100-SXM2-32GB", 32768)}, "does not know"),
    ("V100", {}, "megatron_gpu_model is 'V100'; expected one of"),
])
def test_the_planner_never_assumes_a_gpu(gpu_model, facts, message):
    with pytest.raises(AnsibleActionFail, match=message):
        run_action({"gpus_per_node": 1}, with_facts(inventory(NODES[:2], gpu_model=gpu_model, **SMALL), facts))


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


@pytest.mark.parametrize("args,spec,first,fix", [
    ({"gpus_per_node": 1, "gpu_memory_mib": 4096}, SMALL, "no layout of 1 node(s) x 1 GPUs fits within 90% of the GPU",
     ""),
    # grouped-query attention on the head era: the rule and its fix on the first line, not the memory
    ({"gpus_per_node": 1}, dict(SMALL, model_preset="llama", num_key_value_heads=4),
     "no layout of 1 node(s) x 1 GPUs passes the job rules: 'grouped-query attention' refused all",
     "found 4 key/value heads for 16 heads on the head era (Megatron-DeepSpeed 4efb479d)"),
    ({"gpus_per_node": 1}, dict(SMALL, model_preset="llama", num_key_value_heads=4),
     "no layout of 1 node(s) x 1 GPUs passes the job rules: 'grouped-query attention' refused all",
     "set megatron_job_num_key_value_heads: null"),
])
def test_nothing_fits_fails_with_the_reason_first_and_the_table(args, spec, first, fix):
    result = run_action(args, inventory(NODES[:1], **spec))
    assert result["failed"] is True and result["msg"].split("\n")[0].startswith(first), result["msg"]
    assert fix in result["msg"].split("\n")[0]
    assert result["table"][-1] in result["msg"]


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


RECORDED_BURNIN = __import__("pathlib").Path(__file__).resolve().parents[3] / "fixtures" / "burnin" / "h200-1gpu-report.json"


def test_a_recorded_burnin_report_calibrates_the_plan(tmp_path):
    """tests/fixtures/burnin: burnin_gpt.py on one H200 (its log beside the report): the plan takes
    the matmul rate it measured (784 TFLOP/s, KINDS.md's 790) and says so in its header."""
    base = run_action({"gpus_per_node": 1, "padded_vocab_size": 8192}, inventory(NODES[:1], **SMALL))
    result = run_action({"gpus_per_node": 1, "padded_vocab_size": 8192, "burnin_report": str(RECORDED_BURNIN)},
                        inventory(NODES[:1], **SMALL))
    assert result["hardware"]["matmul_tflops"] == pytest.approx(784.4862)
    assert result["table"][1] == result["calibration"]
    assert result["calibration"].startswith("calibrated by the burn-in report %s (1 rank(s) on 1 host(s)): "
                                            "matmul 784 TFLOP/s" % RECORDED_BURNIN)
    # 784 against the listed 790: the same layout, a step 0.7% longer at most.
    assert result["layouts"][0]["step_s"] == pytest.approx(base["layouts"][0]["step_s"], rel=0.008)
    assert result["layouts"][0]["step_s"] > base["layouts"][0]["step_s"]


@pytest.mark.parametrize("report, args, matmul, header", [
    # An explicit option wins over the report.
    (None, {"matmul_tflops": 700.0}, 700.0, "matmul 784 TFLOP/s"),
    # A burn-in of CPU ranks (the simulated cluster) is not used.
    ({"calibration": {"matmul_tflops": 0.05, "ranks": 6, "hosts": 3, "devices": ["cpu"]}}, {}, 790.0,
     "not used: it ran on CPU ranks"),
    # A report from before the calibration existed.
    ({"nodes": {}, "passed": True}, {}, 790.0, "not used: it has no calibration"),
])
def test_burnin_report_options(tmp_path, report, args, matmul, header):
    path = RECORDED_BURNIN
    if report is not None:
        path = tmp_path / "burnin.json"
        path.write_text(__import__("json").dumps(report))
    result = run_action(dict({"gpus_per_node": 1, "padded_vocab_size": 8192, "burnin_report": str(path)}, **args),
                        inventory(NODES[:1], **SMALL))
    assert result["hardware"]["matmul_tflops"] == pytest.approx(matmul)
    assert header in result["calibration"]


def test_a_missing_burnin_report_is_no_error_and_a_broken_one_is(tmp_path):
    result = run_action({"gpus_per_node": 1, "padded_vocab_size": 8192, "burnin_report": str(tmp_path / "none.json")},
                        inventory(NODES[:1], **SMALL))
    assert result["calibration"] is None and result["hardware"]["matmul_tflops"] == 790.0
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(AnsibleActionFail, match="cannot read the burn-in report .*run burnin.yml again"):
        run_action({"gpus_per_node": 1, "burnin_report": str(broken)}, inventory(NODES[:1], **SMALL))


@pytest.mark.parametrize("profile, gpu_model, refused", [
    ("cu117", "H100", True),
    ("cu117", "H200", True),
    ("cu117", "A100-80GB", False),
    ("cu130", "H200", False),
])
def test_the_planner_refuses_a_stack_without_code_for_the_gpu(profile, gpu_model, refused, tmp_path):
    spec = dict(SMALL)
    spec.update(stack_profile=profile, use_flash_attn=profile == "cu130")
    task_vars = inventory(gpu_model=gpu_model, **spec)
    if not refused:
        assert run_action({"limit": 3}, task_vars)["layouts"]
        return
    with pytest.raises(AnsibleActionFail) as error:
        run_action({"limit": 3}, task_vars)
    first = str(error.value).splitlines()[0]
    assert first.startswith("planner: stack profile cu117 cannot run on %s (compute capability 9.0)" % gpu_model)
    assert "set megatron_stack_profile to cu121 or cu130" in first and "inventory megatron_gpu_model" in first
