# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the validate_job action plugin (plugins/action/validate_job.py), and one run of
playbooks/validate.yml through ansible-playbook on the guide's fixtures."""
from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Dict, Optional, Tuple
from unittest.mock import MagicMock

import pytest
from ansible.errors import AnsibleActionFail, AnsibleError

from ansible_collections.megatron_ds.cluster.plugins.action import validate_job as validate_job_action
from ansible_collections.megatron_ds.cluster.plugins.action.validate_job import ActionModule
from ansible_collections.megatron_ds.cluster.plugins.module_utils import _report
from ansible_collections.megatron_ds.cluster.tests.support import tools
from ansible_collections.megatron_ds.cluster.tests.support import upstream as upstream_support
from ansible_collections.megatron_ds.cluster.tests.support.action_harness import make_action as build_action

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
GUIDE = os.path.join(ROOT, "tests", "fixtures", "guide")
NODES = ["gpu%02d" % i for i in range(1, 9)]


@pytest.fixture(autouse=True)
def report_dir(tmp_path, monkeypatch):
    """The report files of every run go under the test's own directory, not the user's."""
    directory = str(tmp_path / "reports")
    monkeypatch.setattr(_report, "DEFAULT_DIR", directory)
    monkeypatch.setenv("COLUMNS", "200")  # wrapped as on a wide terminal, whatever runs the tests
    # The upstream oracle only where a test asks for it: a machine with MEGATRON_DS_SRC set (to run
    # the tests that need a checkout) would otherwise add its rows and notes to every other test.
    monkeypatch.delenv("MEGATRON_DS_SRC", raising=False)
    return directory


def make_action(args: Dict[str, Any], check_mode: bool = False) -> ActionModule:
    return build_action(ActionModule, args, check_mode=check_mode)


def run_action(args: Dict[str, Any], task_vars: Optional[Dict[str, Any]] = None, **kwargs: Any) -> Dict[str, Any]:
    return make_action(args, **kwargs).run(task_vars=task_vars if task_vars is not None else {})


def rejected(args: Dict[str, Any], task_vars: Optional[Dict[str, Any]] = None) -> Tuple[str, Dict[str, Any]]:
    """Run a job that fails validation: (the message with its wrapped lines joined, the result).
    The action returns the failure (Ansible prints it once) instead of raising it."""
    result = run_action(args, task_vars)
    assert result.get("failed") is True, result.get("msg")
    return " ".join(line.strip() for line in result["msg"].splitlines()), result


def inventory_vars(**spec: Any) -> Dict[str, Any]:
    task_vars: Dict[str, Any] = {"groups": {"all": NODES, "megatron_nodes": NODES}}
    task_vars.update({"megatron_job_" + key: value for key, value in spec.items()})
    return task_vars


def checks(result: Dict[str, Any], status: str) -> list:
    return [f["check"] for f in result["findings"] if f["status"] == status]


# ---------------------------------------------------------------------------------------
# The inventory's spec
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("check_mode", [False, True])
def test_inventory_spec_passes(check_mode):
    result = run_action({"gpu_memory_mib": 81920, "deepspeed_version": "0.19.6"}, inventory_vars(), check_mode=check_mode)
    assert not result.get("failed")
    assert result["changed"] is False and result["failed_checks"] == 0
    assert result["msg"].startswith("Job validation passed: 0 failed, 0 warning(s), ")
    assert result["msg"].replace("\n     ", " ").endswith("; report: %s" % result["report"]["text"])
    assert result["source"]["nodes"] == "inventory group megatron_nodes"
    assert result["source"]["megatron_deepspeed_era"] == "head"
    assert result["derived"]["world_size"] == 64 and result["derived"]["gradient_accumulation_steps"] == 64
    assert result["table"].splitlines()[0].split()[0] == "STATUS"


def test_inventory_values_reach_the_checks():
    task_vars = inventory_vars(tensor_parallel="4", pipeline_parallel=2, no_pipeline_parallel=False,
                               zero_stage=3, micro_batch_size=2, global_batch_size=256)
    message, result = rejected({"deepspeed_version": "0.19.6"}, task_vars)
    assert "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism" in message
    assert result["failed_checks"] == 1
    assert result["source"]["spec"] == "inventory variables"


def test_profile_picks_the_deepspeed_version():
    result = run_action({"gpu_memory_mib": 81920}, dict(inventory_vars(), megatron_stack_profile="cu117"))
    assert result["source"]["deepspeed_version"] == "0.9.2"
    assert result["source"]["megatron_deepspeed_era"] == "before_rebase"
    assert checks(result, "warn") == ["--exit-signal-handler available"]
    assert result["spec"]["stack_profile"] == "cu117"
    result = run_action({"gpu_memory_mib": 81920, "stack_profile": "cu130"}, inventory_vars())
    assert result["source"]["deepspeed_version"] == "0.19.6"


def test_unknown_profile_fails():
    with pytest.raises(AnsibleActionFail, match="unknown stack profile 'cu999'"):
        run_action({}, dict(inventory_vars(), megatron_stack_profile="cu999"))


def test_spec_typo_fails_naming_the_closest_variable():
    message, _result = rejected({"gpu_memory_mib": 81920, "deepspeed_version": "0.19.6"}, inventory_vars(micro_batch=4))
    assert "megatron_job_micro_batch is a job spec variable" in message
    assert "megatron_job_micro_batch: 4" in message and "did you mean megatron_job_micro_batch_size?" in message


def test_spec_typo_only_warns_when_asked():
    result = run_action({"gpu_memory_mib": 81920, "deepspeed_version": "0.19.6", "unknown_variables": "warn"},
                        inventory_vars(micro_batch=4))
    finding = result["findings"][0]
    assert finding["check"] == "megatron_job_micro_batch is a job spec variable"
    assert finding["status"] == "warn" and "did you mean megatron_job_micro_batch_size?" in finding["fix"]


def test_bad_spec_value_names_the_variable():
    with pytest.raises(AnsibleActionFail, match="Job spec invalid: megatron_job_tensor_parallel: found 'eight'"):
        run_action({}, inventory_vars(tensor_parallel="eight"))


def test_spec_argument_overrides_inventory():
    result = run_action({"spec": {"tensor_parallel": 4}, "nodes": 2, "gpus_per_node": 8, "gpu_memory_mib": 81920,
                         "deepspeed_version": "0.19.6"}, inventory_vars(tensor_parallel=8))
    assert result["spec"]["tensor_parallel"] == 4
    assert result["derived"]["world_size"] == 16 and result["derived"]["data_parallel_size"] == 4
    assert result["source"]["nodes"] == "nodes argument"


def test_gpu_facts_give_memory_and_gpu_count():
    task_vars = inventory_vars(gpus_per_node=8)
    task_vars["hostvars"] = {
        node: {"gpu_stack_facts": {"gpus": {"count": 8, "memory_mib": 81920 if node != "gpu03" else 40960}}}
        for node in NODES
    }
    result = run_action({"deepspeed_version": "0.19.6"}, task_vars)
    memory = [f for f in result["findings"] if f["check"] == "memory per GPU"][0]
    assert memory["status"] == "pass" and "of 40.0 GiB" in memory["expected"]
    assert "GPU memory from gpu_stack_facts: 40960 MiB (the smallest GPU)" in result["source"]["notes"]
    task_vars["hostvars"]["gpu05"]["gpu_stack_facts"]["gpus"]["count"] = 4
    assert "ranks per node <= GPUs per node" in rejected({"deepspeed_version": "0.19.6"}, task_vars)[0]


def test_no_nodes_anywhere():
    assert "cluster shape known" in rejected({"deepspeed_version": "0.19.6"}, {})[0]


def test_fail_on_error_false_returns_the_findings():
    result = run_action({"fail_on_error": False, "deepspeed_version": "0.19.6"}, inventory_vars(seq_length=4096))
    assert not result.get("failed")
    assert result["failed_checks"] == 1
    assert checks(result, "fail") == ["max-position-embeddings >= seq-length"]


def test_resume_arguments():
    assert "ds_to_universal" in rejected({"resume_tp": 4, "resume_pp": 1, "deepspeed_version": "0.19.6"}, inventory_vars())[0]
    with pytest.raises(AnsibleActionFail, match="resume_pp"):
        run_action({"resume_tp": 4}, inventory_vars())


# ---------------------------------------------------------------------------------------
# An existing job: train.sh, ds_config.json, hostfile
# ---------------------------------------------------------------------------------------


def test_guide_job_is_rejected_listing_every_failure():
    args = {"script": os.path.join(GUIDE, "train.sh"), "ds_config_file": os.path.join(GUIDE, "ds_config.json"),
            "gpu_memory_mib": 81920}
    result = run_action(args, {})
    assert result["failed"] is True
    lines = result["msg"].splitlines()
    heads = [line for line in lines if not line.startswith(" ")]
    # One wrapped line per failing or warning check (8 + 3), the summary last, within 160 columns.
    assert [line.split()[0] for line in heads[:-1]] == ["FAIL"] * 8 + ["WARN"] * 3
    assert heads[-1].startswith("Job validation failed: 8 check(s)")
    assert max(len(line) for line in lines) <= 160
    message = " ".join(line.strip() for line in lines)
    for words in ("--batch-size argument is no longer valid, use --micro-batch-size instead",
                  "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism",
                  "ds_config 256, global batch 8",
                  "--zero-stage not given (Megatron default 1), ds_config stage 3",
                  "ZeRO-Offload with a client provided optimizer",
                  "asserts args.micro_batch_size is not None",
                  "ds_config activation_checkpointing.partition_activations"):
        assert words in message
    assert "8 failed, 3 warning(s)" in message
    # The findings are not in the failed result (Ansible would print them a second time): every
    # one of them is in the report files.
    assert result["failed_checks"] == 8 and "findings" not in result
    with open(result["report"]["json"]) as handle:
        report = json.load(handle)
    assert len(report["rows"]) > 8 and report["counts"]["fail"] == 8
    assert message.endswith("report: %s" % result["report"]["text"])
    assert result["source"]["nodes"] == "the script's --num_nodes"
    assert result["source"]["deepspeed_version"] == "0.9.2"


def test_corrected_job_passes_and_finds_its_files():
    result = run_action({"script": os.path.join(GUIDE, "train.corrected.sh"), "gpu_memory_mib": 81920}, {})
    assert not result.get("failed") and result["failed_checks"] == 0
    assert result["source"]["ds_config_file"] == os.path.join(GUIDE, "ds_config.corrected.json")
    assert result["source"]["hostfile"] == os.path.join(GUIDE, "hostfile")
    assert result["source"]["nodes"] == "hostfile"
    assert len(result["source"]["notes"]) == 2
    assert checks(result, "warn") == []


@pytest.mark.parametrize("task_vars", [
    {"megatron_job_script": os.path.join(GUIDE, "train.corrected.sh")},
    {"megatron_job_script": os.path.join(GUIDE, "train.corrected.sh"),
     "megatron_job_ds_config_file": os.path.join(GUIDE, "ds_config.corrected.json"),
     "megatron_job_hostfile": os.path.join(GUIDE, "hostfile")},
])
def test_job_files_from_the_task_variables(task_vars):
    """validate.yml passes no file options: -e megatron_job_script=PATH reaches the action as a variable."""
    result = run_action({"gpu_memory_mib": 81920}, task_vars)
    assert not result.get("failed") and result["failed_checks"] == 0
    assert result["source"]["ds_config_file"] == os.path.join(GUIDE, "ds_config.corrected.json")
    assert result["source"]["hostfile"] == os.path.join(GUIDE, "hostfile")
    assert len(result["source"]["notes"]) == (2 if len(task_vars) == 1 else 0)


def test_the_option_wins_over_the_task_variable():
    message = rejected({"script": os.path.join(GUIDE, "train.sh"), "gpu_memory_mib": 81920},
                       {"megatron_job_script": os.path.join(GUIDE, "train.corrected.sh")})[0]
    assert "batch" in message or "ZeRO" in message


def test_relative_paths_resolve_against_the_playbook_dir():
    result = run_action({"script": "../tests/fixtures/guide/train.corrected.sh", "gpu_memory_mib": 81920}, {})
    assert result["failed_checks"] == 0


@pytest.mark.parametrize("args,message", [
    ({"script": "/nonexistent/train.sh"}, "script: /nonexistent/train.sh not found on the controller"),
    ({"script": os.path.join(GUIDE, "train.sh"), "ds_config_file": os.path.join(GUIDE, "train.sh")},
     "ds_config is not valid JSON"),
    ({"script": os.path.join(GUIDE, "train.sh"), "hostfile": os.path.join(GUIDE, "ds_config.json")},
     "DeepSpeed would refuse it: Hostfile contains a bad entry"),
    ({"deepspeed_version": "latest"}, "deepspeed_version: found 'latest'"),
    ({"nodes": "many"}, "nodes"),
])
def test_bad_inputs(args, message):
    with pytest.raises(AnsibleActionFail, match=message):
        run_action(args, inventory_vars())


def test_duplicate_json_keys_are_noted(tmp_path):
    config = tmp_path / "ds.json"
    config.write_text('{"train_batch_size": 512, "train_batch_size": 512, "train_micro_batch_size_per_gpu": 1,'
                      ' "bf16": {"enabled": true},'
                      ' "zero_optimization": {"stage": 1}}')
    result = run_action({"ds_config_file": str(config), "deepspeed_version": "0.19.6", "gpu_memory_mib": 81920},
                        inventory_vars())
    assert "repeats train_batch_size" in result["source"]["notes"][0]


# ---------------------------------------------------------------------------------------
# playbooks/validate.yml, end to end
# ---------------------------------------------------------------------------------------


def _collections_path() -> str:
    """The directory holding ansible_collections/megatron_ds/cluster, as this test imported it
    (the repo's .collections link, or ansible-test's temporary tree)."""
    path = os.path.abspath(validate_job_action.__file__)
    for _level in range(6):
        path = os.path.dirname(path)
    return path


def _playbook(*extra: str) -> subprocess.CompletedProcess:
    binary = tools.require("ansible-playbook")
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=_collections_path())
    command = [binary, "playbooks/validate.yml", "-i", "localhost,", "-e", "validate_report_dir=%s" % _report.DEFAULT_DIR] + list(extra)
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_playbook_rejects_the_guide():
    proc = _playbook("-e", "megatron_job_script=tests/fixtures/guide/train.sh",
                     "-e", "megatron_job_ds_config_file=tests/fixtures/guide/ds_config.json")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    output = proc.stdout + proc.stderr
    assert "Job validation failed: 8 check(s)" in output
    assert "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism" in output


def test_playbook_passes_the_corrected_guide():
    proc = _playbook("-e", "megatron_job_script=tests/fixtures/guide/train.corrected.sh",
                     "-e", "validate_gpu_memory_mib=81920")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # 20: the 18 checks of the corrected guide, "values fit every hop" (_job.hops) and the scheduler's
    # "learning-rate warmup shorter than its decay" (_job.rules_startup).
    assert "Job validation passed: 0 failed, 0 warning(s), 20 passed; report: %s" % _report.DEFAULT_DIR in " ".join(proc.stdout.split())


def test_untemplatable_spec_variable_names_it():
    task_vars = inventory_vars()
    action = make_action({"deepspeed_version": "0.19.6"})
    action._templar = MagicMock()
    action._templar.template.side_effect = AnsibleError("'undefined_thing' is undefined")
    with pytest.raises(AnsibleActionFail, match="Job spec variable megatron_job_.* cannot be templated"):
        action.run(task_vars=dict(task_vars, megatron_job_name="{{ undefined_thing }}"))


SIM_JOB = dict(gpus_per_node=2, tensor_parallel=1, pipeline_parallel=1, zero_stage=1, num_layers=2, hidden_size=64,
               num_attention_heads=4, seq_length=128, max_position_embeddings=128, micro_batch_size=1,
               global_batch_size=16, precision="fp32", tokenizer_type="NullTokenizer", vocab_size=1000,
               stack_profile="cpu")


def _upstream_rows(result):
    return [f for f in result.get("findings") or [] if f["check"].startswith("upstream: ")]


def test_no_checkout_no_upstream_check(monkeypatch):
    monkeypatch.delenv("MEGATRON_DS_SRC", raising=False)
    result = run_action({"gpu_memory_mib": 81920}, inventory_vars(**SIM_JOB))
    assert _upstream_rows(result) == [] and not any("upstream" in n for n in result["source"]["notes"])


HEAD_ARGUMENTS = "def parse_args(extra_args_provider=None, ignore_unknown_args=False):\n    pass\n"
BEFORE_REBASE_ARGUMENTS = "def parse_args(extra_args_provider=None, defaults={},\n               ignore_unknown_args=False):\n"


def _checkout(root, arguments_py):
    (root / "megatron").mkdir()
    (root / "megatron" / "arguments.py").write_text(arguments_py)
    return str(root)


def test_an_unusable_checkout_is_a_note_not_a_verdict(monkeypatch, tmp_path):
    monkeypatch.setenv("MEGATRON_DS_SRC", _checkout(tmp_path, HEAD_ARGUMENTS))
    monkeypatch.setenv("MEGATRON_DS_PYTHON", "/nonexistent/python")
    result = run_action({"gpu_memory_mib": 81920}, inventory_vars(**SIM_JOB))
    assert not result.get("failed") and _upstream_rows(result) == []
    assert any(n.startswith("upstream check not run: cannot run /nonexistent/python") for n in result["source"]["notes"])


@pytest.mark.parametrize("profile, arguments_py, words", [
    # the guide's cu117 job judged with head-era code would say nothing about the code that runs
    ("cu117", HEAD_ARGUMENTS, ["cannot judge", "before_rebase era", "is the head era", "9446eaac"]),
    ("cu121", BEFORE_REBASE_ARGUMENTS, ["cannot judge", "head era", "is the before_rebase era", "4efb479d"]),
    ("cu121", "def something_else():\n    pass\n", ["cannot judge", "like neither era"]),
])
def test_a_checkout_of_another_era_cannot_judge(monkeypatch, tmp_path, profile, arguments_py, words):
    monkeypatch.setenv("MEGATRON_DS_SRC", _checkout(tmp_path, arguments_py))
    monkeypatch.setenv("MEGATRON_DS_PYTHON", "/nonexistent/python")  # never reached
    job = {**SIM_JOB, "stack_profile": profile}
    if profile == "cu117":  # before_rebase has no NullTokenizer
        job.update(tokenizer_type="GPT2BPETokenizer", vocab_file="/data/gpt2-vocab.json", merge_file="/data/gpt2-merges.txt")
        job.pop("vocab_size")
    task_vars = inventory_vars(**job)
    result = run_action({"gpu_memory_mib": 81920, "fail_on_error": False}, task_vars)
    assert _upstream_rows(result) == []
    notes = [n for n in result["source"]["notes"] if n.startswith("upstream check not run: ")]
    assert len(notes) == 1 and all(word in notes[0] for word in words), notes


@upstream_support.needs_upstream
@pytest.mark.parametrize("change, status", [({}, "pass"), ({"num_attention_heads": 5}, "fail")])
def test_upstream_judges_the_job_on_the_controller(monkeypatch, change, status):
    """MEGATRON_DS_SRC: the checkout's own validate_args and DeepSpeed's config add their rows."""
    monkeypatch.setenv("MEGATRON_DS_SRC", upstream_support.SOURCE)
    monkeypatch.setenv("MEGATRON_DS_PYTHON", upstream_support.PYTHON)
    job = dict(SIM_JOB, **change)
    task_vars = inventory_vars(**job)
    task_vars["groups"]["megatron_nodes"] = NODES[:4]
    result = run_action({"gpu_memory_mib": 81920, "fail_on_error": False}, task_vars)
    rows = _upstream_rows(result)
    assert [r["status"] for r in rows] == [status], rows
    if status == "fail":
        assert rows[0]["check"].startswith("upstream: Megatron-DeepSpeed validate_args (megatron/arguments.py:")
        # megatron/arguments.py:298-299 at 4efb479d: the assert runs under `if args.kv_channels is None`
        assert rows[0]["found"] == "--hidden-size --num-attention-heads --kv-channels"


@pytest.mark.parametrize("profile, gpu_model, failed", [
    ("cu117", "H100", True),         # the guide's stack has no Hopper code
    ("cu117", "A100-80GB", False),
    ("cu121", "H100", False),
])
def test_hopper_on_cu117_is_refused_naming_the_profile_that_fits(profile, gpu_model, failed):
    task_vars = inventory_vars(gpus_per_node=8, stack_profile=profile)
    task_vars["megatron_gpu_model"] = gpu_model
    result = run_action({"fail_on_error": False}, task_vars)
    arch = [f for f in result["findings"] if f["check"] == "GPU architecture on stack profile %s" % profile]
    assert [f["status"] for f in arch] == ["fail" if failed else "pass"]
    if failed:
        assert "set megatron_stack_profile to cu121 or cu130" in arch[0]["fix"]
        assert "GPU architecture on stack profile cu117" in rejected({}, task_vars)[0]


def test_the_gpu_of_the_nodes_facts_is_judged_too():
    task_vars = inventory_vars(gpus_per_node=8)
    task_vars["hostvars"] = {node: {"gpu_stack_facts": {"gpus": {"count": 8, "memory_mib": 81559,
                                                                 "model": "NVIDIA H100 80GB HBM3"}}} for node in NODES}
    result = run_action({"fail_on_error": False}, task_vars)
    arch = [f for f in result["findings"] if f["check"].startswith("GPU architecture")]
    assert [(f["status"], f["found"]) for f in arch] == [("fail", "H100 (compute capability 9.0)")]
