# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the job package: the job spec (_job_spec), its parsers (_job_script, _job_files)
and the rules (_job_rules.validate)."""
from __future__ import annotations

import json
import os
import re
from typing import Any, Dict, List, Optional, Tuple

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import files as _job_files
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import findings as _job_findings
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import memory as _job_memory
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules as _job_rules
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import script as _job_script
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import model as _job_model
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import args as _mds_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds.args import BEFORE_REBASE, HEAD, args_for

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", ".."))
GUIDE = os.path.join(ROOT, "tests", "fixtures", "guide")
CLUSTER = {"nodes": 8, "gpus_per_node": 8, "gpu_memory_mib": 81920}
HEAD_DS = "0.19.6"
OLD_DS = "0.9.2"


def spec_to_args(spec: Dict[str, Any], era: str) -> Tuple[List[str], List[Tuple[str, str]]]:
    """The argument list validate() judges for ``spec`` in ``era`` (the builder train.sh renders)."""
    groups, dropped = _job_args.arguments(spec, era=era)
    return _job_args.flatten(groups), dropped


def read(name: str) -> str:
    with open(os.path.join(GUIDE, name)) as handle:
        return handle.read()


def run(spec: Optional[Dict[str, Any]] = None, ds: Optional[Dict[str, Any]] = None,
        cluster: Optional[Dict[str, Any]] = None, resume: Optional[Dict[str, Any]] = None,
        version: Optional[str] = HEAD_DS) -> List[Dict[str, str]]:
    merged = dict(CLUSTER)
    merged.update(cluster or {})
    return _job_rules.validate(_job_spec.normalize(spec or {}), ds, merged, resume, version)


def the(findings: List[Dict[str, str]], check: str) -> Dict[str, str]:
    matches = [f for f in findings if f["check"] == check]
    assert len(matches) == 1, "%r: %s" % (check, [f["check"] for f in findings])
    return matches[0]


def statuses(findings: List[Dict[str, str]]) -> Dict[str, int]:
    out = {"pass": 0, "warn": 0, "fail": 0}
    for f in findings:
        out[f["status"]] += 1
    return out


# ---------------------------------------------------------------------------------------
# normalize
# ---------------------------------------------------------------------------------------


def test_normalize_fills_every_default():
    spec = _job_spec.normalize({})
    assert sorted(spec) == sorted(_job_schema.DEFAULTS)
    assert spec["workdir"] == "/opt/megatron/jobs/gpt"
    assert spec["log_dir"] == "/opt/megatron/jobs/gpt/logs"
    assert spec["log_file"] == "/opt/megatron/jobs/gpt/logs/train.log"
    assert spec["checkpoint_dir"] == "/shared/checkpoints/gpt"
    assert spec["group"] == "megatron"
    # Divergence fixed: the spec keeps ffn_hidden_size null, so the judged argument list, like
    # train.sh, passes no --ffn-hidden-size and Megatron computes it (4 x hidden, less with
    # --swiglu); derive() still reports the effective size.
    assert spec["ffn_hidden_size"] is None
    assert _job_spec.derive(spec, 1, 8)["ffn_hidden_size"] == 4 * 5120
    assert spec["env"] == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def test_normalize_does_not_share_mutable_defaults():
    first = _job_spec.normalize({})
    first["env"]["X"] = "1"
    first["extra_args"].append("--seed")
    assert _job_spec.normalize({})["env"] == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert _job_spec.normalize({})["extra_args"] == []


@pytest.mark.parametrize("given,key,expected", [
    ({"megatron_job_tensor_parallel": 4}, "tensor_parallel", 4),
    ({"tensor_parallel": "4"}, "tensor_parallel", 4),
    ({"megatron_job_global_batch_size": "1_024"}, "global_batch_size", 1024),
    ({"megatron_job_zero_allgather_bucket_size": "5e8"}, "zero_allgather_bucket_size", 500000000),
    ({"megatron_job_zero_reduce_bucket_size": 5e8}, "zero_reduce_bucket_size", 500000000),
    ({"megatron_job_lr": "1e-4"}, "lr", 1e-4),
    ({"megatron_job_lr": 3}, "lr", 3.0),
    ({"megatron_job_load": "no"}, "load", False),
    ({"megatron_job_no_pipeline_parallel": "True"}, "no_pipeline_parallel", True),
    ({"megatron_job_precision": "BF16"}, "precision", "bf16"),
    ({"megatron_job_launcher": "OpenMPI"}, "launcher", "openmpi"),
    ({"megatron_job_zero_offload_optimizer": ""}, "zero_offload_optimizer", "none"),
    ({"megatron_job_tokenizer_type": "nulltokenizer"}, "tokenizer_type", "NullTokenizer"),
    ({"megatron_job_hidden_size": 2048}, "ffn_hidden_size", None),
    ({"megatron_job_ffn_hidden_size": 5000}, "ffn_hidden_size", 5000),
    ({"megatron_job_name": "llm"}, "workdir", "/opt/megatron/jobs/llm"),
    ({"megatron_job_name": "llm", "megatron_job_workdir": "/w"}, "log_file", "/w/logs/train.log"),
    ({"megatron_job_user": "ops"}, "group", "ops"),
    ({"megatron_job_extra_args": "--seed 7 --data-impl mmap"}, "extra_args", ["--seed", "7", "--data-impl", "mmap"]),
    ({"megatron_job_extra_args": ["--seed", 7]}, "extra_args", ["--seed", "7"]),
    ({"megatron_job_env": {"NCCL_DEBUG": "INFO", "N": 1}}, "env", {"NCCL_DEBUG": "INFO", "N": "1"}),
    ({"megatron_job_vocab_size": None}, "vocab_size", None),
    ({"megatron_job_script": "/tmp/train.sh"}, "name", "gpt"),
])
def test_normalize_coerces(given, key, expected):
    assert _job_spec.normalize(given)[key] == expected


@pytest.mark.parametrize("given,message", [
    ({"megatron_job_tensor_parallel": "four"}, "megatron_job_tensor_parallel: found 'four', expected an integer"),
    ({"megatron_job_tensor_parallel": 0}, "megatron_job_tensor_parallel: found 0, expected an integer >= 1"),
    ({"megatron_job_tensor_parallel": True}, "megatron_job_tensor_parallel: found True, expected an integer"),
    ({"megatron_job_micro_batch_size": 1.5}, "megatron_job_micro_batch_size: found 1.5, expected an integer"),
    ({"megatron_job_save_interval": -1}, "megatron_job_save_interval: found -1, expected an integer >= 1"),
    ({"megatron_job_zero_stage": 4}, "megatron_job_zero_stage: found 4, expected one of 0, 1, 2, 3"),
    ({"megatron_job_lr": "fast"}, "megatron_job_lr: found 'fast', expected a number"),
    ({"megatron_job_load": "maybe"}, "megatron_job_load: found 'maybe', expected true or false"),
    ({"megatron_job_precision": "fp8"}, "megatron_job_precision: found 'fp8', expected one of bf16, fp16, fp32"),
    ({"megatron_job_zero_offload_param": "nvme"}, "expected one of none, cpu"),
    ({"megatron_job_num_layers": None}, "megatron_job_num_layers: found null, expected a value"),
    ({"megatron_job_env": ["A=1"]}, "megatron_job_env: found ['A=1'], expected a mapping"),
    ({"megatron_job_extra_args": {"a": 1}}, "megatron_job_extra_args: found {'a': 1}, expected a list"),
    ({"megatron_job_lr": 1e-4, "lr": 2e-4}, "sets lr twice"),
])
def test_normalize_rejects(given, message):
    with pytest.raises(_job_schema.JobError, match=re.escape(message)):
        _job_spec.normalize(given)


def test_same_value_prefixed_and_not_is_accepted():
    assert _job_spec.normalize({"megatron_job_lr": 1e-4, "lr": 1e-4})["lr"] == 1e-4


@pytest.mark.parametrize("given,unknown", [
    ({"megatron_job_micro_batch": 2}, ["megatron_job_micro_batch"]),
    ({"megatron_job_script": "x", "megatron_job_hostfile": "h", "megatron_job_ds_config_file": "d"}, []),
    ({"megatron_job_node_address": "10.0.0.1", "megatron_job_lr": 1e-4}, []),
    ({"tensor_paralel": 2, "megatron_job_zero_stage": 1}, ["tensor_paralel"]),
])
def test_unknown_keys(given, unknown):
    assert _job_schema.unknown_keys(given) == unknown


# ---------------------------------------------------------------------------------------
# derive
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("over,nodes,gpus,dp,global_batch,grad_acc", [
    ({}, 8, 8, 8, 512, 64),
    ({"pipeline_parallel": 2, "micro_batch_size": 2, "global_batch_size": 256}, 8, 8, 4, 256, 32),
    ({"tensor_parallel": 2, "micro_batch_size": 4, "global_batch_size": 32}, 1, 2, 1, 32, 8),
    ({"tensor_parallel": 1, "global_batch_size": 500}, 1, 8, 8, 500, None),
    ({"tensor_parallel": 8, "pipeline_parallel": 2}, 3, 8, None, 512, None),
    ({"tensor_parallel": 16}, 1, 8, None, 512, None),
    # DeepSpeed-Ulysses: DP = world / (TP x PP x SP) (arguments.py:101-108 at 4efb479d)
    ({"tensor_parallel": 2, "ds_sequence_parallel_size": 4, "global_batch_size": 64}, 8, 8, 8, 64, 8),
    ({"tensor_parallel": 8, "ds_sequence_parallel_size": 3}, 8, 8, None, 512, None),
])
def test_derive(over, nodes, gpus, dp, global_batch, grad_acc):
    derived = _job_spec.derive(_job_spec.normalize(over), nodes, gpus)
    assert derived["world_size"] == nodes * gpus
    assert derived["data_parallel_size"] == dp
    assert derived["global_batch_size"] == global_batch
    assert derived["gradient_accumulation_steps"] == grad_acc
    assert derived["train_batch_size"] == global_batch
    if grad_acc:
        assert derived["train_batch_size"] == derived["micro_batch_size"] * grad_acc * dp


def test_derive_reports_the_model():
    derived = _job_spec.derive(_job_spec.normalize({}), 8, 8)
    assert derived["padded_vocab_size"] == 51200  # 50257 rounded up to 128 x TP 8
    assert derived["kv_channels"] == 128
    assert derived["num_parameters"] == 40 * (12 * 5120 ** 2 + 13 * 5120) + 51200 * 5120 + 2048 * 5120 + 2 * 5120
    assert derived["ds_pipeline_engine"] is False
    assert (derived["bf16"], derived["fp16"], derived["zero_stage"]) == (True, False, 1)


def test_derive_uses_megatrons_global_default():
    spec = _job_spec.normalize({})
    spec["global_batch_size"] = None
    assert _job_spec.derive(spec, 8, 8)["global_batch_size"] == 8  # micro 1 x DP 8


@pytest.mark.parametrize("over,nodes,message", [
    ({"tensor_parallel": 8, "pipeline_parallel": 2}, 3,
     "world size 24 (3 nodes x 8 GPUs) is not divisible by TP 8 x PP 2"),
    ({"global_batch_size": 500}, 8, "global batch size (500) is not divisible by micro batch size (1) times data parallel size (8)"),
    ({"ds_sequence_parallel_size": 3}, 8,
     "not divisible by TP 8 x PP 1 x SP 3, so the GPUs cannot be split into tensor_parallel 8 x pipeline_parallel 1 "
     "x ds_sequence_parallel_size 3: make megatron_job_tensor_parallel x megatron_job_pipeline_parallel x "
     "megatron_job_ds_sequence_parallel_size divide 64"),
    # micro 1 x DP 2 (64 / (TP 8 x SP 4)) does not divide 511
    ({"ds_sequence_parallel_size": 4, "global_batch_size": 511}, 8,
     "global batch size (511) is not divisible by micro batch size (1) times data parallel size (2)"),
])
def test_derive_strict(over, nodes, message):
    with pytest.raises(_job_schema.JobError, match=re.escape(message)):
        _job_spec.derive(_job_spec.normalize(over), nodes, 8, strict=True)


# ---------------------------------------------------------------------------------------
# spec_to_args
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", [HEAD, BEFORE_REBASE])
@pytest.mark.parametrize("over", [
    {}, {"precision": "fp16"}, {"zero_offload_optimizer": "cpu", "zero_stage": 3},
    {"activation_checkpointing": True, "partition_activations": True, "checkpoint_in_cpu": True},
    {"masked_softmax_fusion": False, "bias_gelu_fusion": False, "gradient_accumulation_fusion": True},
    {"use_flash_attn": True, "sequence_parallel": True, "exit_signal_handler": True},
    {"tokenizer_type": "NullTokenizer", "vocab_size": 1000},
])
def test_spec_to_args_emits_only_flags_of_the_era(era, over):
    args, dropped = spec_to_args(_job_spec.normalize(over), era)
    table = args_for(era)
    for token in args:
        if token.startswith("--"):
            assert token in table, token
    for flag, reason in dropped:
        assert flag not in table and era in reason


@pytest.mark.parametrize("over,present,absent", [
    ({}, ["--bf16", "--no-pipeline-parallel", "--zero-stage", "--exit-signal-handler",
          "--no-gradient-accumulation-fusion", "--save", "--load"], ["--fp16", "--cpu-optimizer", "--vocab-size"]),
    ({"precision": "fp32", "load": False}, ["--save"], ["--bf16", "--fp16", "--load"]),
    ({"zero_offload_optimizer": "cpu"}, ["--cpu-optimizer"], []),
    ({"partition_activations": True, "activation_checkpointing": True},
     ["--checkpoint-activations", "--partition-activations", "--deepspeed-activation-checkpointing"], []),
    ({"activation_checkpointing": True}, ["--checkpoint-activations", "--deepspeed-activation-checkpointing"], []),
    ({"tokenizer_type": "NullTokenizer", "vocab_size": 1000}, ["--vocab-size"], []),
    ({"vocab_size": 1000}, [], ["--vocab-size"]),
    ({"masked_softmax_fusion": False}, ["--no-masked-softmax-fusion"], []),
    ({"extra_args": ["--seed", "7"]}, ["--seed"], []),
    ({"ds_sequence_parallel_size": 2}, ["--ds-sequence-parallel-size"], []),
    ({"ds_sequence_parallel_size": 1}, [], ["--ds-sequence-parallel-size"]),  # upstream's default, not passed
])
def test_spec_to_args_head(over, present, absent):
    args, dropped = spec_to_args(_job_spec.normalize(over), HEAD)
    assert dropped == []
    for flag in present:
        assert flag in args
    for flag in absent:
        assert flag not in args


def test_spec_to_args_before_rebase_drops_and_says_why():
    args, dropped = spec_to_args(_job_spec.normalize({"use_flash_attn": True}), BEFORE_REBASE)
    assert "--exit-signal-handler" not in args and "--no-gradient-accumulation-fusion" not in args
    assert [flag for flag, reason in dropped] == ["--use-flash-attn-v2", "--exit-signal-handler"]


def test_spec_to_args_values():
    args = spec_to_args(_job_spec.normalize({"data_path": "0.5 /d/a 0.5 /d/b"}), HEAD)[0]
    index = args.index("--data-path")
    assert args[index + 1:index + 5] == ["0.5", "/d/a", "0.5", "/d/b"]
    assert args[args.index("--lr") + 1] == "6e-05"
    assert args[args.index("--micro-batch-size") + 1] == "1"


# ---------------------------------------------------------------------------------------
# parse_hostfile (DeepSpeed runner._parse_hostfile rules)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("text,expected", [
    ("worker-0 slots=8\nworker-1 slots=8\n", [("worker-0", 8), ("worker-1", 8)]),
    ("# comment\n\n  node1   slots=4  \nnode2\tslots=2 # trailing\n", [("node1", 4), ("node2", 2)]),
    ("10.0.0.1 slots=8", [("10.0.0.1", 8)]),
    ("node1 slots=8 extra", [("node1", 8)]),
])
def test_parse_hostfile(text, expected):
    assert list(_job_files.parse_hostfile(text).items()) == expected


@pytest.mark.parametrize("text,message", [
    ("node1 slots=8\nnode1 slots=8\n", "Hostfile contains multiple entries for node1, unable to proceed with launching"),
    ("node1 slots=8\nnode2\n", "Hostfile contains a bad entry: node2, unable to proceed with launching"),
    ("node1 slots=eight\n", "Hostfile contains a bad entry: node1 slots=eight"),
    ("node1 slot=8\n", "bad entry"),
    ("", "Hostfile is empty or not formatted correctly, unable to proceed with launching."),
    ("# only\n\n", "Hostfile is empty"),
])
def test_parse_hostfile_rejects_like_deepspeed(text, message):
    with pytest.raises(_job_files.HostfileError, match=re.escape(message)):
        _job_files.parse_hostfile(text)


def test_guide_hostfile_fixture():
    hosts = _job_files.parse_hostfile(read("hostfile"))
    assert len(hosts) == 8 and set(hosts.values()) == {8}


# ---------------------------------------------------------------------------------------
# load_ds_config
# ---------------------------------------------------------------------------------------


def test_load_ds_config_reports_duplicates():
    config, duplicates = _job_files.load_ds_config('{"train_batch_size": 8, "train_batch_size": 16}')
    assert config == {"train_batch_size": 16} and duplicates == ["train_batch_size"]


@pytest.mark.parametrize("text,message", [
    ("{", "ds_config is not valid JSON"),
    ("[1, 2]", "ds_config must be a JSON object, found list"),
])
def test_load_ds_config_rejects(text, message):
    with pytest.raises(_job_files.DsConfigError, match=re.escape(message)):
        _job_files.load_ds_config(text)


def test_guide_ds_config_is_the_guides():
    config, duplicates = _job_files.load_ds_config(read("ds_config.json"))
    assert duplicates == []
    assert config["train_batch_size"] == 256 and config["gradient_accumulation_steps"] == 8
    assert config["zero_optimization"]["stage"] == 3
    assert config["zero_optimization"]["offload_optimizer"] == {"device": "cpu", "pin_memory": True}
    assert config["activation_checkpointing"]["partition_activations"] is True


# ---------------------------------------------------------------------------------------
# parse_train_script
# ---------------------------------------------------------------------------------------


def test_parse_the_guide_script():
    parsed = _job_script.parse_train_script(read("train.sh"))
    assert parsed["launcher"]["command"] == "deepspeed"
    assert (parsed["launcher"]["num_nodes"], parsed["launcher"]["num_gpus"]) == (8, 8)
    assert parsed["launcher"]["hostfile"] is None
    assert parsed["script"] == "pretrain_gpt.py"
    assert parsed["variables"]["CHECKPOINT_PATH"] == "/path/to/checkpoints"
    assert parsed["deepspeed"] is True and parsed["deepspeed_config"] == "ds_config.json"
    spec = parsed["spec"]
    assert sorted(spec) == sorted(_job_schema.DEFAULTS)
    assert (spec["tensor_parallel"], spec["pipeline_parallel"], spec["no_pipeline_parallel"]) == (8, 2, False)
    assert (spec["num_layers"], spec["hidden_size"], spec["num_attention_heads"]) == (40, 5120, 40)
    assert spec["micro_batch_size"] is None and spec["global_batch_size"] is None
    assert spec["precision"] == "bf16" and spec["zero_stage"] == 1  # Megatron's default 1.0
    assert spec["checkpoint_dir"] == "/path/to/checkpoints" and spec["save_interval"] == 1000
    assert spec["data_path"] == "/path/to/my-gpt_text_document"
    assert spec["gpus_per_node"] == 8
    assert spec["extra_args"] == ["--batch-size", "2"]
    assert [f["flag"] for f in parsed["obsolete_flags"]] == ["--batch-size"]
    assert "micro_batch_size" not in parsed["explicit"] and "num_layers" in parsed["explicit"]
    assert parsed["findings"] == []
    assert parsed["args"][:2] == ["--tensor-model-parallel-size", "8"]


def test_parsed_spec_uses_megatron_defaults_not_the_collections():
    spec = _job_script.parse_train_script("deepspeed pretrain_gpt.py --num-layers 2\n")["spec"]
    assert spec["lr_decay_style"] == "linear" and spec["weight_decay"] == 0.01
    assert spec["adam_beta2"] == 0.999 and spec["log_interval"] == 100
    assert spec["gradient_accumulation_fusion"] is True and spec["exit_signal_handler"] is False
    assert spec["precision"] == "fp32" and spec["tokenizer_type"] == "GPT2BPETokenizer"
    old = _job_script.parse_train_script("deepspeed pretrain_gpt.py --num-layers 2\n", era=BEFORE_REBASE)["spec"]
    assert old["gradient_accumulation_fusion"] is False and old["use_flash_attn"] is False


@pytest.mark.parametrize("script,key,expected", [
    # variables, braces, defaults, arithmetic
    ("L=24\ndeepspeed pretrain_gpt.py --num-layers $L\n", "num_layers", 24),
    ("L=24\ndeepspeed pretrain_gpt.py --num-layers ${L}\n", "num_layers", 24),
    ("deepspeed pretrain_gpt.py --num-layers ${L:-12}\n", "num_layers", 12),
    ("L=\ndeepspeed pretrain_gpt.py --num-layers ${L:-12}\n", "num_layers", 12),
    ("A=2\nB=3\ndeepspeed pretrain_gpt.py --global-batch-size $((A*B*4))\n", "global_batch_size", 24),
    ("T=3000\nS=$(( ${T} * 2 / (3 + 7) ))\ndeepspeed pretrain_gpt.py --train-iters ${S}\n", "train_iters", 600),
    ("G=$(nvidia-smi --query-gpu=name --format=csv | wc -l)\ndeepspeed pretrain_gpt.py --num-workers $G --seed 1\n",
     "extra_args", ["--seed", "1"]),
    ("CMD=\"deepspeed pretrain_gpt.py --num-layers 8 &> log.txt\"\necho ${CMD}\neval ${CMD}\n", "num_layers", 8),
    ("echo deepspeed pretrain_gpt.py --num-layers 9\ndeepspeed pretrain_gpt.py --num-layers 3\n", "num_layers", 3),
    ("export H=1024\ndeepspeed pretrain_gpt.py --hidden-size \"$H\"\n", "hidden_size", 1024),
    ("H=1024; deepspeed pretrain_gpt.py --hidden-size $H\n", "hidden_size", 1024),
    # quoting and word splitting
    ("MODEL=\"--num-layers 6 --hidden-size 256\"\ndeepspeed pretrain_gpt.py $MODEL\n", "hidden_size", 256),
    ("MODEL=\"--num-layers 6 --hidden-size 256\"\ndeepspeed pretrain_gpt.py \"$MODEL\"\n", "extra_args",
     ["--num-layers 6 --hidden-size 256"]),
    ("deepspeed pretrain_gpt.py --split '98, 1, 1'\n", "split", "98, 1, 1"),
    ("deepspeed pretrain_gpt.py --lr-decay-style 'cosine'\n", "lr_decay_style", "cosine"),
    # continuations, comments, redirections, pipes, background
    ("deepspeed \\\n  pretrain_gpt.py \\\n  --num-layers 4 # four layers\n", "num_layers", 4),
    ("# deepspeed pretrain_gpt.py --num-layers 9\ndeepspeed pretrain_gpt.py --num-layers 3\n", "num_layers", 3),
    ("deepspeed pretrain_gpt.py --num-layers 5 2>&1 | tee log.txt\n", "num_layers", 5),
    ("deepspeed pretrain_gpt.py --num-layers 5 > train.log 2>&1 &\n", "num_layers", 5),
    ("nohup deepspeed pretrain_gpt.py --num-layers 7 &> out.log &\n", "num_layers", 7),
    # flags to spec keys
    ("deepspeed pretrain_gpt.py --fp16\n", "precision", "fp16"),
    ("deepspeed pretrain_gpt.py --no-masked-softmax-fusion\n", "masked_softmax_fusion", False),
    ("deepspeed pretrain_gpt.py --checkpoint-activations\n", "activation_checkpointing", True),
    ("deepspeed pretrain_gpt.py --data-path 0.5 a 0.5 b\n", "data_path", "0.5 a 0.5 b"),
    ("deepspeed pretrain_gpt.py --save /c --load /c\n", "load", True),
    ("deepspeed pretrain_gpt.py --zero-stage 3\n", "zero_stage", 3),
    ("deepspeed pretrain_gpt.py --hidden-size 1024\n", "ffn_hidden_size", 4096),
    ("deepspeed pretrain_gpt.py --recompute-activations --seed 3\n", "extra_args", ["--recompute-activations", "--seed", "3"]),
    ("export NCCL_DEBUG=INFO\ndeepspeed pretrain_gpt.py\n", "env", {"NCCL_DEBUG": "INFO"}),
    ("CUDA_DEVICE_MAX_CONNECTIONS=1 deepspeed pretrain_gpt.py\n", "env", {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}),
    # launcher options
    ("deepspeed --num_gpus 4 --master_port=29600 --launcher OpenMPI pretrain_gpt.py\n", "gpus_per_node", 4),
    ("deepspeed --master_port=29600 pretrain_gpt.py\n", "master_port", 29600),
    ("deepspeed --launcher OpenMPI pretrain_gpt.py\n", "launcher", "openmpi"),
    ("torchrun --nnodes 2 --nproc_per_node 8 pretrain_gpt.py --num-layers 2\n", "gpus_per_node", 8),
    ("python -m torch.distributed.run --nproc-per-node=4 pretrain_gpt.py\n", "gpus_per_node", 4),
    ("python3 -m deepspeed.launcher.runner --num_gpus 2 /opt/mds/pretrain_gpt.py\n", "gpus_per_node", 2),
])
def test_parse_train_script_reads(script, key, expected):
    parsed = _job_script.parse_train_script(script)
    assert parsed["spec"][key] == expected


@pytest.mark.parametrize("script,launcher", [
    ("deepspeed --hostfile=/job/hosts -i 'n1@n2' pretrain_gpt.py\n", {"hostfile": "/job/hosts", "include": "n1@n2"}),
    ("deepspeed -H hosts --num_nodes 2 pretrain_gpt.py\n", {"hostfile": "hosts", "num_nodes": 2, "command": "deepspeed"}),
    ("torchrun --nnodes=1:4 --nproc_per_node 8 pretrain_gpt.py\n", {"num_nodes": 4, "command": "torchrun"}),
    ("python -m torch.distributed.launch --nproc_per_node 8 pretrain_gpt.py\n", {"command": "torch.distributed.launch"}),
    ("python pretrain_gpt.py --num-layers 2\n", {"command": "python", "num_nodes": None}),
])
def test_parse_train_script_launcher(script, launcher):
    parsed = _job_script.parse_train_script(script)
    for key, value in launcher.items():
        assert parsed["launcher"][key] == value


@pytest.mark.parametrize("script,check,status,words", [
    ("echo hello\n", "train.sh: training command", "fail", "no pretrain_*.py launch found"),
    ("deepspeed pretrain_gpt.py --num-layers $LAYERS\n", "train.sh: variables resolved", "warn", "$LAYERS"),
    ("deepspeed pretrain_gpt.py --num-layers $LAYERS\n", "--num-layers value", "fail", "invalid int value: '$LAYERS'"),
    ("G=$(nvidia-smi -L | wc -l)\ndeepspeed --num_gpus $G pretrain_gpt.py\n", "launcher option --num_gpus", "fail",
     "--num_gpus $(nvidia-smi-L|wc-l)"),
    ("G=$(nvidia-smi -L | wc -l)\ndeepspeed --num_gpus $G pretrain_gpt.py\n", "train.sh: variables resolved", "warn",
     "$(nvidia-smi -L | wc -l)"),
    ("deepspeed pretrain_gpt.py --num-layers 4 \"$@\"\n", "train.sh: arguments passed through", "warn", "$@"),
    ("deepspeed pretrain_gpt.py --num-layers 4 stray\n", "train.sh: stray value stray", "fail", "unrecognized arguments: stray"),
    ("deepspeed pretrain_gpt.py --num-layers 4 --num-layers 5\n", "--num-layers given once", "warn", "keeps the last"),
    ("deepspeed pretrain_gpt.py --lr-decay-style fancy\n", "--lr-decay-style value", "fail", "invalid choice: 'fancy'"),
    ("deepspeed --num_gpus eight pretrain_gpt.py\n", "launcher option --num_gpus", "fail", "set the variable"),
    ("deepspeed --bogus pretrain_gpt.py\n", "launcher option --bogus", "fail", "move it after pretrain_gpt.py"),
    ("deepspeed pretrain_gpt.py --num-layers 2\ndeepspeed pretrain_gpt.py --num-layers 3\n",
     "train.sh: one training command", "warn", "only the first one"),
])
def test_parse_train_script_findings(script, check, status, words):
    finding = the(_job_script.parse_train_script(script)["findings"], check)
    assert finding["status"] == status
    assert words in finding["found"] + " " + finding["fix"]


@pytest.mark.parametrize("flags,bucket,flag", [
    ("--batch-size 2", "obsolete_flags", "--batch-size"),
    ("--deepspeed-config x.json", "misspelt_flags", "--deepspeed-config"),
    ("--dataset-impl mmap", "misspelt_flags", "--dataset-impl"),
    ("--frobnicate", "unknown_flags", "--frobnicate"),
    ("--checkpoint-activations", "deprecated_flags", "--checkpoint-activations"),
])
def test_parse_train_script_reports_flags(flags, bucket, flag):
    parsed = _job_script.parse_train_script("deepspeed pretrain_gpt.py %s\n" % flags)
    assert [entry["flag"] for entry in parsed[bucket]] == [flag]
    if bucket != "deprecated_flags":
        assert parsed["spec"]["extra_args"][0] == flag


def test_parse_train_script_era_missing():
    parsed = _job_script.parse_train_script("deepspeed pretrain_gpt.py --exit-signal-handler\n", era=BEFORE_REBASE)
    assert [entry["flag"] for entry in parsed["era_missing_flags"]] == ["--exit-signal-handler"]
    assert parsed["spec"]["exit_signal_handler"] is False


def test_parse_train_script_with_env():
    parsed = _job_script.parse_train_script("deepspeed pretrain_gpt.py --num-layers $L\n", env={"L": "6"})
    assert parsed["spec"]["num_layers"] == 6 and parsed["findings"] == []


# ---------------------------------------------------------------------------------------
# validate: every rule, pass and fail
# ---------------------------------------------------------------------------------------


def test_default_spec_passes_cleanly():
    findings = run()
    assert statuses(findings)["fail"] == 0 and statuses(findings)["warn"] == 0


RULES = [
    # id, spec overrides, ds_config, cluster overrides, resume, deepspeed version, check, status, words in found/fix
    ("cluster unknown", {}, None, {"nodes": None}, None, HEAD_DS, "cluster shape known", "fail", "megatron_nodes"),
    ("world size", {}, None, {}, None, HEAD_DS, "world size", "pass", "8 nodes x 8 GPUs = 64"),
    ("more ranks than GPUs", {"gpus_per_node": 8}, None, {"gpus_per_node": 4}, None, HEAD_DS,
     "ranks per node <= GPUs per node", "fail", "set megatron_job_gpus_per_node (deepspeed --num_gpus) to 4"),
    ("idle GPUs", {"gpus_per_node": 4, "tensor_parallel": 4}, None, {"gpus_per_node": 8}, None, HEAD_DS,
     "ranks per node == GPUs per node", "warn", "4 GPUs per node stay idle"),
    ("TP x PP divides world: pass", {}, None, {}, None, HEAD_DS, "data parallel size", "pass", "DP = 64 / (TP 8 x PP 1) = 8"),
    ("TP x PP divides world: fail", {"pipeline_parallel": 2, "no_pipeline_parallel": False}, None, {"nodes": 3}, None,
     HEAD_DS, "TP x PP divides the world size", "fail",
     "world size (24) is not divisible by tensor parallel size (8) times pipeline parallel size (2)"),
    ("TP larger than the world", {"gpus_per_node": 4}, None, {"nodes": 1, "gpus_per_node": 4}, None, HEAD_DS,
     "TP x PP <= world size", "fail", "silently clamps"),
    ("TP inside a node: pass", {}, None, {}, None, HEAD_DS, "TP inside a node", "pass", "TP 8, 8 GPUs per node"),
    ("TP across nodes", {"tensor_parallel": 16, "num_attention_heads": 64, "hidden_size": 8192}, None, {}, None, HEAD_DS,
     "TP <= GPUs per node", "warn", "tensor parallel inside a node, pipeline across nodes"),
    ("TP straddles nodes", {"tensor_parallel": 3, "num_attention_heads": 48, "hidden_size": 6144}, None,
     {"nodes": 3}, None, HEAD_DS, "TP divides GPUs per node", "warn", "straddle"),
    ("--no-pipeline-parallel with PP 2", {"pipeline_parallel": 2, "no_pipeline_parallel": True}, None, {}, None, HEAD_DS,
     "--no-pipeline-parallel needs PP 1", "fail", "pipeline_model_parallel_size must be 1 if pipeline parallel is disabled"),
    ("sequence parallel with TP 1", {"tensor_parallel": 1, "sequence_parallel": True}, None, {}, None, HEAD_DS,
     "--sequence-parallel with TP > 1", "warn", "turns sequence parallelism off"),
    ("DP with DeepSpeed SP", {"tensor_parallel": 1, "ds_sequence_parallel_size": 4, "global_batch_size": 64}, None,
     {}, None, HEAD_DS, "data parallel size", "pass", "DP = 64 / (TP 1 x PP 1 x SP 4) = 16"),
    # megatron/core/parallel_state.py:146 at 4efb479d: SP > 1 needs TP 1 and PP 1.
    ("DeepSpeed SP with TP 2", {"tensor_parallel": 2, "ds_sequence_parallel_size": 4, "global_batch_size": 64}, None,
     {}, None, HEAD_DS, "DeepSpeed SP without TP or PP", "fail",
     "sequence parallel does not work with tensor parallel or pipeline parallel"),
    ("DeepSpeed SP with PP 2", {"tensor_parallel": 1, "pipeline_parallel": 2, "ds_sequence_parallel_size": 4,
                                "global_batch_size": 64}, None, {}, None, HEAD_DS, "DeepSpeed SP without TP or PP",
     "fail", "parallel_state.py:146"),
    ("DeepSpeed SP with TP 1 and PP 1", {"tensor_parallel": 1, "ds_sequence_parallel_size": 4, "global_batch_size": 64},
     None, {}, None, HEAD_DS, "DeepSpeed SP without TP or PP", None, ""),
    ("world not divisible with DeepSpeed SP", {"ds_sequence_parallel_size": 3}, None, {}, None, HEAD_DS,
     "TP x PP divides the world size", "fail",
     "world size (64) is not divisible by tensor parallel size (8) times pipeline parallel size (1) times seqence "
     "parallel size (3)"),
    ("global batch with DeepSpeed SP", {"tensor_parallel": 1, "ds_sequence_parallel_size": 8, "global_batch_size": 6}, None, {}, None,
     HEAD_DS, "global batch divisible by micro x DP", "fail", "global 6, micro 1, DP 8"),
    ("heads % SP: pass", {"tensor_parallel": 1, "ds_sequence_parallel_size": 4}, None, {}, None, HEAD_DS,
     "attention heads % SP == 0", "pass", "40 heads, ds_sequence_parallel_size 4"),
    ("heads % SP: fail", {"tensor_parallel": 1, "ds_sequence_parallel_size": 16, "global_batch_size": 64}, None,
     {}, None, HEAD_DS, "attention heads % SP == 0", "fail", "transformer.py:618"),
    ("seq % SP: fail", {"tensor_parallel": 1, "ds_sequence_parallel_size": 4, "seq_length": 2046}, None, {}, None,
     HEAD_DS, "sequence length % SP == 0", "fail", "pretrain_gpt.py:138"),
    ("both sequence parallelisms", {"sequence_parallel": True, "ds_sequence_parallel_size": 2}, None, {}, None, HEAD_DS,
     "one sequence parallelism", "fail", "not compatible with Megatron-LM's sequence parallel"),
    ("no SP: no SP checks", {}, None, {}, None, HEAD_DS, "attention heads % SP == 0", None, ""),
    ("heads % TP: pass", {}, None, {}, None, HEAD_DS, "attention heads % TP == 0", "pass", "40 heads, TP 8"),
    ("heads % TP: fail", {"num_attention_heads": 36, "hidden_size": 4608}, None, {}, None, HEAD_DS,
     "attention heads % TP == 0", "fail", "36 is not divisible by 8"),
    ("hidden % heads: pass", {}, None, {}, None, HEAD_DS, "hidden % heads == 0", "pass", "hidden 5120, 40 heads"),
    ("hidden % heads: fail", {"hidden_size": 5100}, None, {}, None, HEAD_DS, "hidden % heads == 0", "fail",
     "hidden_size % num_attention_heads == 0"),
    ("ffn % TP", {"ffn_hidden_size": 20484}, None, {}, None, HEAD_DS, "ffn hidden % TP == 0", "fail", "20484 is not divisible by 8"),
    ("layers % PP: pass", {"pipeline_parallel": 2, "no_pipeline_parallel": False}, None, {}, None, HEAD_DS,
     "layers % PP == 0", "pass", "40 layers, PP 2"),
    ("layers % PP: uneven", {"pipeline_parallel": 3, "no_pipeline_parallel": False}, None, {"nodes": 3}, None, HEAD_DS,
     "layers % PP == 0", "warn", "unevenly"),
    ("positions >= seq: pass", {}, None, {}, None, HEAD_DS, "max-position-embeddings >= seq-length", "pass", "2048"),
    ("positions >= seq: fail", {"seq_length": 4096}, None, {}, None, HEAD_DS, "max-position-embeddings >= seq-length",
     "fail", "raise --max-position-embeddings to 4096"),
    ("global batch: pass", {}, None, {}, None, HEAD_DS, "global batch divisible by micro x DP", "pass", "global 512, micro 1, DP 8"),
    ("global batch: fail", {"global_batch_size": 500}, None, {}, None, HEAD_DS, "global batch divisible by micro x DP", "fail",
     "global batch size (500) is not divisible by micro batch size (1) times data parallel size (8)"),
    ("DS batch, no JSON: pass", {}, None, {}, None, HEAD_DS, "train_batch_size == micro x grad_acc x DP", "pass", "512 = 1 x 64 x 8"),
    ("DS batch, no JSON: fail", {"global_batch_size": 500}, None, {}, None, HEAD_DS, "train_batch_size == micro x grad_acc x DP",
     "fail", "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
             "gradient_acc_step * world_size 500 != 1 * 62 * 8"),
    ("JSON batch: pass", {}, {"train_batch_size": 512, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 64,
                              "bf16": {"enabled": True}, "zero_optimization": {"stage": 1}}, {}, None, HEAD_DS,
     "ds_config train_batch_size == micro x grad_acc x DP", "pass", "512 == 1 * 64 * 8"),
    ("JSON batch: fail", {}, {"train_batch_size": 512, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 32},
     {}, None, HEAD_DS, "ds_config train_batch_size == micro x grad_acc x DP", "fail",
     "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * gradient_acc_step * "
     "world_size 512 != 1 * 32 * 8"),
    ("JSON batch derived by DeepSpeed", {}, {"train_batch_size": 512, "train_micro_batch_size_per_gpu": 1}, {}, None, HEAD_DS,
     "ds_config train_batch_size == micro x grad_acc x DP", "pass", "gradient_accumulation_steps = 512 // 1 // 8 = 64"),
    ("JSON micro == arg micro: fail", {},
     {"train_batch_size": 512, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 32}, {}, None, HEAD_DS,
     "ds_config micro batch == --micro-batch-size", "fail", "set train_micro_batch_size_per_gpu to 1"),
    ("JSON train == global: fail", {}, {"train_batch_size": 256, "train_micro_batch_size_per_gpu": 1}, {}, None, HEAD_DS,
     "ds_config train_batch_size == --global-batch-size", "fail", "Train batch size must be divisible by micro-batch data parallelism"),
    ("JSON without batch", {}, {"gradient_accumulation_steps": 4}, {}, None, HEAD_DS, "ds_config batch sizes", "fail",
     "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"),
    ("JSON auto", {}, {"train_batch_size": "auto", "train_micro_batch_size_per_gpu": 1}, {}, None, HEAD_DS,
     "ds_config train_batch_size is an integer", "fail", "'auto'"),
    ("ZeRO-2 with the pipeline engine at PP 1", {"zero_stage": 2, "no_pipeline_parallel": False}, None, {}, None, HEAD_DS,
     "ZeRO stage vs pipeline engine", "fail", "even with PP 1"),
    ("ZeRO-3 with PP 2", {"zero_stage": 3, "pipeline_parallel": 2, "no_pipeline_parallel": False}, None, {}, None, HEAD_DS,
     "ZeRO stage vs pipeline engine", "fail", "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"),
    ("ZeRO-3 with --no-pipeline-parallel", {"zero_stage": 3}, None, {}, None, HEAD_DS, "ZeRO stage vs pipeline engine", "pass",
     "--no-pipeline-parallel"),
    ("ZeRO-1 with PP 2", {"pipeline_parallel": 2, "no_pipeline_parallel": False}, None, {}, None, HEAD_DS,
     "ZeRO stage vs pipeline engine", "pass", "pipeline engine"),
    ("--zero-stage vs JSON: fail", {"zero_stage": 1}, {"train_batch_size": 512, "zero_optimization": {"stage": 2},
                                                       "bf16": {"enabled": True}}, {}, None, HEAD_DS,
     "--zero-stage == ds_config stage", "fail", "pass --zero-stage 2"),
    ("--zero-stage vs JSON: pass", {"zero_stage": 2}, {"train_batch_size": 512, "zero_optimization": {"stage": 2},
                                                       "bf16": {"enabled": True}}, {}, None, HEAD_DS,
     "--zero-stage == ds_config stage", "pass", "--zero-stage 2, ds_config stage 2"),
    ("JSON stage 5", {}, {"train_batch_size": 512, "zero_optimization": {"stage": 5}}, {}, None, HEAD_DS,
     "ds_config ZeRO stage", "fail", "0-3"),
    ("JSON unknown ZeRO key", {}, {"train_batch_size": 512, "zero_optimization": {"stage": 1, "overlap_com": True}},
     {}, None, HEAD_DS, "ds_config zero_optimization keys", "fail", "overlap_com"),
    ("JSON ZeRO key new in HEAD on 0.9.2", {"exit_signal_handler": False},
     {"train_batch_size": 512, "zero_optimization": {"stage": 1, "zero_hpz_partition_size": 1}},
     {}, None, OLD_DS, "ds_config zero_optimization keys", "fail", "zero_hpz_partition_size"),
    ("offload_param with ZeRO-1", {"zero_offload_param": "cpu"}, None, {}, None, HEAD_DS,
     "offload_param only with ZeRO-3", "fail", "ZeRO-1"),
    ("JSON offload without --cpu-optimizer", {}, {"train_batch_size": 512, "bf16": {"enabled": True},
                                                  "zero_optimization": {"stage": 1, "offload_optimizer": {"device": "cpu"}}},
     {}, None, HEAD_DS, "ZeRO-Offload optimizer", "fail", "pass --cpu-optimizer"),
    ("JSON optimizer section", {}, {"train_batch_size": 512, "bf16": {"enabled": True}, "zero_optimization": {"stage": 1},
                                    "optimizer": {"type": "AdamW", "params": {"lr": 1e-4, "weight_decay": 0.1}}},
     {}, None, HEAD_DS, "ds_config optimizer section", "warn", "lr 0.0001 vs --lr 6e-05"),
    ("JSON scheduler section", {}, {"train_batch_size": 512, "bf16": {"enabled": True}, "zero_optimization": {"stage": 1},
                                    "scheduler": {"type": "WarmupLR"}}, {}, None, HEAD_DS,
     "ds_config scheduler section", "warn", "own LR scheduler"),
    ("bf16 and fp16 in arguments", {"extra_args": ["--fp16"]}, None, {}, None, HEAD_DS, "--bf16 xor --fp16", "fail",
     "not (fp16 and bf16)"),
    ("bf16 and fp16 in JSON", {}, {"train_batch_size": 512, "bf16": {"enabled": True}, "fp16": {"enabled": True}},
     {}, None, HEAD_DS, "ds_config bf16 xor fp16", "fail", "bfloat16 and fp16 modes cannot be simultaneously enabled"),
    ("JSON fp16, arguments bf16", {}, {"train_batch_size": 512, "fp16": {"enabled": True}}, {}, None, HEAD_DS,
     "ds_config precision == arguments", "fail", "ds_config fp16, arguments --bf16"),
    ("JSON old bfloat16 key", {}, {"train_batch_size": 512, "bfloat16": {"enabled": True}}, {}, None, HEAD_DS,
     "ds_config precision == arguments", "pass", "ds_config bf16"),
    ("fp32 both sides", {"precision": "fp32"}, {"train_batch_size": 512}, {}, None, HEAD_DS,
     "ds_config precision == arguments", "pass", "ds_config fp32, arguments fp32"),
    ("--no-load-optim on HEAD", {"extra_args": ["--no-load-optim"]}, None, {}, None, HEAD_DS,
     "--no-load-optim honoured under DeepSpeed", "warn", "checkpointing.py 541-548, 628-629"),
    ("--no-load-optim on before_rebase", {"exit_signal_handler": False, "extra_args": ["--no-load-optim"]}, None, {},
     None, OLD_DS, "--no-load-optim honoured under DeepSpeed", "warn", "use --finetune"),
    ("resume: same shape", {}, None, {}, {"tp": 8, "pp": 1}, HEAD_DS, "checkpoint TP/PP == job TP/PP", "pass", "TP 8 PP 1"),
    ("resume: reshape on HEAD", {}, None, {}, {"tp": 4, "pp": 2}, HEAD_DS, "checkpoint TP/PP == job TP/PP", "fail",
     "python -m deepspeed.checkpoint.ds_to_universal --input_folder"),
    ("resume: reshape on 0.9.2", {"exit_signal_handler": False}, None, {}, {"tp": 4, "pp": 2}, OLD_DS,
     "checkpoint TP/PP == job TP/PP", "fail", "refuse: DeepSpeed <0.12 has no universal checkpoint"),
    ("resume: reshape on 0.12 before_rebase", {"exit_signal_handler": False}, None, {}, {"tp": 4, "pp": 2}, "0.12.0",
     "checkpoint TP/PP == job TP/PP", "fail", "has no --universal-checkpoint"),
    ("resume: unknown DeepSpeed", {}, None, {}, {"tp": 4, "pp": 1}, None, "checkpoint TP/PP == job TP/PP", "fail",
     "refuse: DeepSpeed <0.12"),
    ("resume: pipeline form", {}, None, {}, {"tp": 8, "pp": 1, "no_pipeline_parallel": False}, HEAD_DS,
     "checkpoint model form", "fail", "cannot be converted"),
    ("partition without checkpointing", {"partition_activations": True}, None, {}, None, HEAD_DS,
     "activation partitioning needs checkpointing", "fail", "add --checkpoint-activations"),
    ("partition with checkpointing", {"partition_activations": True, "activation_checkpointing": True}, None, {}, None, HEAD_DS,
     "activation partitioning needs checkpointing", "pass", "--partition-activations"),
    ("JSON partition without checkpointing", {}, {"train_batch_size": 512, "bf16": {"enabled": True},
                                                  "activation_checkpointing": {"partition_activations": True}},
     {}, None, HEAD_DS, "activation partitioning needs checkpointing", "fail", "ds_config activation_checkpointing"),
    ("JSON partition overridden by flags", {"activation_checkpointing": True},
     {"train_batch_size": 512, "bf16": {"enabled": True}, "activation_checkpointing": {"partition_activations": True}},
     {}, None, HEAD_DS, "ds_config activation_checkpointing applied", "warn", "overwrite the JSON"),
    ("selective recompute under the pipeline", {"no_pipeline_parallel": False, "extra_args": ["--recompute-activations"]},
     None, {}, None, HEAD_DS, "recompute honoured by the DeepSpeed pipeline", "warn", "recomputes nothing"),
    ("obsolete flag in extra_args", {"extra_args": ["--batch-size", "4"]}, None, {}, None, HEAD_DS,
     "--batch-size accepted by pretrain_gpt.py", "fail", "use --micro-batch-size instead (--micro-batch-size 4)"),
    ("misspelt flag in extra_args", {"extra_args": ["--deepspeed-config", "x.json"]}, None, {}, None, HEAD_DS,
     "--deepspeed-config accepted by pretrain_gpt.py", "fail", "use --deepspeed_config"),
    ("preprocess flag given to pretrain", {"extra_args": ["--dataset-impl", "mmap"]}, None, {}, None, HEAD_DS,
     "--dataset-impl accepted by pretrain_gpt.py", "fail", "tools/preprocess_data.py"),
    ("unknown flag in extra_args", {"extra_args": ["--num-layer", "4"]}, None, {}, None, HEAD_DS,
     "--num-layer accepted by pretrain_gpt.py", "fail", "did you mean --num-layers"),
    ("HEAD flag on before_rebase", {"exit_signal_handler": False, "extra_args": ["--use-flash-attn-v2"]}, None, {}, None,
     OLD_DS, "--use-flash-attn-v2 accepted by pretrain_gpt.py", "fail", "only in the head era"),
    ("spec flag in extra_args", {"extra_args": ["--micro-batch-size", "2"]}, None, {}, None, HEAD_DS,
     "--micro-batch-size set by the spec, not extra_args", "fail", "set megatron_job_micro_batch_size instead"),
    ("bad value in extra_args", {"extra_args": ["--seed", "x"]}, None, {}, None, HEAD_DS, "--seed value", "fail",
     "invalid int value: 'x'"),
    ("deprecated advice", {"no_pipeline_parallel": False, "extra_args": ["--recompute-granularity", "full",
                                                                         "--recompute-method", "uniform"]},
     None, {}, None, HEAD_DS, "recompute honoured by the DeepSpeed pipeline", None, ""),
    ("flash attention on before_rebase", {"use_flash_attn": True, "exit_signal_handler": False}, None, {}, None, OLD_DS,
     "--use-flash-attn-v2 available", "fail", "set megatron_job_use_flash_attn: auto (or false)"),
    ("DeepSpeed SP on before_rebase", {"ds_sequence_parallel_size": 2}, None, {}, None, OLD_DS,
     "--ds-sequence-parallel-size available", "fail", "set megatron_job_ds_sequence_parallel_size: 1"),
    ("SIGTERM handler on before_rebase", {}, None, {}, None, OLD_DS, "--exit-signal-handler available", "warn",
     "leaves it out"),
    ("NullTokenizer without vocab size", {"tokenizer_type": "NullTokenizer"}, None, {}, None, HEAD_DS,
     "NullTokenizer vocab size", "fail", "vocab_size is not None"),
    ("GPT-2 BPE without merges", {"merge_file": None}, None, {}, None, HEAD_DS, "GPT2BPETokenizer files given", "fail",
     "set megatron_job_merge_file to the path on the nodes"),
    ("min lr above lr", {"min_lr": 1e-3}, None, {}, None, HEAD_DS, "--min-lr <= --lr", "fail", "args.min_lr <= args.lr"),
    ("memory fits", {}, None, {}, None, HEAD_DS, "memory per GPU", "pass", "ZeRO-1: 4P + 16P/N"),
    ("memory unknown GPU", {}, None, {"gpu_memory_mib": None}, None, HEAD_DS, "memory per GPU", "warn", "pass gpu_memory_mib"),
    ("memory above 90%", {}, None, {"gpu_memory_mib": 24000}, None, HEAD_DS, "memory per GPU", "warn",
     "--checkpoint-activations: ~"),
    ("memory above 100%", {}, None, {"gpu_memory_mib": 16384}, None, HEAD_DS, "memory per GPU", "fail",
     "ZeRO-3 + CPU offload (needs PP 1 and --no-pipeline-parallel, plus --cpu-optimizer)"),
    ("memory, micro batch advice", {"micro_batch_size": 4}, None, {"gpu_memory_mib": 24000}, None, HEAD_DS,
     "memory per GPU", "fail", "--micro-batch-size 1: ~"),
    ("hostfile lists fewer hosts", {}, None, {"hosts": {"n%d" % i: 8 for i in range(7)}}, None, HEAD_DS,
     "hostfile hosts == nodes", "fail", "7 hosts"),
    ("hostfile slots too few", {}, None, {"hosts": {"n%d" % i: (4 if i == 0 else 8) for i in range(8)}}, None, HEAD_DS,
     "hostfile slots >= GPUs per node", "fail", "n0 slots=4"),
    ("hostfile slots differ", {"gpus_per_node": 4, "tensor_parallel": 4}, None,
     {"gpus_per_node": None, "hosts": {"n%d" % i: (4 if i == 0 else 8) for i in range(8)}}, None, HEAD_DS,
     "hostfile slots identical", "warn", "n0 slots=4"),
]


@pytest.mark.parametrize("spec,ds,cluster,resume,version,check,status,words", [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_rule(spec, ds, cluster, resume, version, check, status, words):
    findings = run(spec, ds, cluster, resume, version)
    if status is None:
        assert not [f for f in findings if f["check"] == check]
        return
    finding = the(findings, check)
    assert finding["status"] == status, finding
    assert words in "%s | %s | %s" % (finding["found"], finding["expected"], finding["fix"])
    for f in findings:
        assert set(f) == {"check", "status", "component", "found", "expected", "fix"}
        assert f["status"] in ("pass", "warn", "fail")
        if f["status"] == "fail":
            assert f["fix"], f


def test_every_finding_names_its_component():
    components = {f["component"] for f in run({"partition_activations": True}, None, {}, {"tp": 4, "pp": 1})}
    assert {"cluster", "parallelism", "model", "batch", "zero", "precision", "checkpoints", "resume",
            "activation checkpointing", "memory"} <= components


# ---------------------------------------------------------------------------------------
# Script-only checks (launcher, --deepspeed)
# ---------------------------------------------------------------------------------------

_BASE = ("deepspeed {launcher} pretrain_gpt.py --tensor-model-parallel-size 8 --num-layers 40 --hidden-size 5120 "
         "--num-attention-heads 40 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
         "--global-batch-size 512 --train-iters 10 --lr 1e-4 --bf16 --no-pipeline-parallel --zero-stage 1 "
         "--vocab-file v --merge-file m {extra}\n")


def script_findings(launcher: str = "--hostfile h", extra: str = "--deepspeed --deepspeed_config ds.json",
                    cluster: Optional[Dict[str, Any]] = None) -> List[Dict[str, str]]:
    parsed = _job_script.parse_train_script(_BASE.format(launcher=launcher, extra=extra))
    return _job_rules.validate(parsed["spec"], None, cluster or CLUSTER, None, HEAD_DS, script=parsed)


def test_script_base_passes():
    assert statuses(script_findings())["fail"] == 0


@pytest.mark.parametrize("launcher,extra,check,status,words", [
    ("--hostfile h --num_nodes 4", "--deepspeed --deepspeed_config d", "launcher --num_nodes == nodes", "fail",
     "would run on 4 nodes, not 8"),
    ("--hostfile h --num_gpus 4", "--deepspeed --deepspeed_config d", "ranks per node == GPUs per node", "warn",
     "4 GPUs per node stay idle"),
    ("--hostfile h --num_gpus 16", "--deepspeed --deepspeed_config d", "ranks per node <= GPUs per node", "fail",
     "16 ranks per node, 8 GPUs per node"),
    ("--hostfile h -i n1 --num_gpus 8", "--deepspeed --deepspeed_config d", "launcher include/exclude alone", "fail",
     "Cannot specify num_nodes/gpus with include/exclude"),
    ("--hostfile h --launcher condor", "--deepspeed --deepspeed_config d", "launcher backend", "fail", "Unknown launcher"),
    ("", "--deepspeed --deepspeed_config d", "launcher hostfile", "warn",
     "Num nodes is >1 but no extra nodes available via hostfile"),
    ("--hostfile h", "--deepspeed_config d", "--deepspeed given", "fail", "add --deepspeed"),
    ("--hostfile h", "--deepspeed", "--deepspeed_config given", "fail", "underscore spelling"),
    # The spec refuses save_interval 0 (schema bounds); a script can still pass --save alone.
    ("--hostfile h", "--deepspeed --deepspeed_config d --save /ckpt", "--save with --save-interval", "fail",
     "save_interval is not None"),
])
def test_script_launcher_rules(launcher, extra, check, status, words):
    finding = the(script_findings(launcher, extra), check)
    assert finding["status"] == status
    assert words in finding["found"] + finding["expected"] + finding["fix"]


@pytest.mark.parametrize("extra,status", [
    # Seen on H200 with Megatron-DeepSpeed HEAD: "Invalid activation recompute method." at the first forward.
    ("--checkpoint-activations", "fail"),
    ("--checkpoint-activations --deepspeed-activation-checkpointing", None),
    ("--checkpoint-activations --recompute-granularity full --recompute-method uniform", None),
    ("--recompute-activations", None),
    ("", None),
])
def test_script_checkpoint_activations_needs_a_recompute_path(extra, status):
    findings = script_findings(extra="--deepspeed --deepspeed_config d " + extra)
    matches = [f for f in findings if f["check"] == "activation recompute method"]
    if status is None:
        assert not matches, matches
    else:
        assert [f["status"] for f in matches] == [status]
        assert "Invalid activation recompute method." in matches[0]["fix"]


def test_checkpoint_activations_under_the_pipeline_engine_is_not_judged_by_this_rule():
    # GPTModelPipe checkpoints through DeepSpeed's PipelineModule, not ParallelTransformer.
    parsed = _job_script.parse_train_script(
        _BASE.format(launcher="--hostfile h", extra="--deepspeed --deepspeed_config d --checkpoint-activations")
        .replace("--no-pipeline-parallel ", ""))
    findings = _job_rules.validate(parsed["spec"], None, CLUSTER, None, HEAD_DS, script=parsed)
    assert not [f for f in findings if f["check"] == "activation recompute method"]


def test_torchrun_is_flagged():
    parsed = _job_script.parse_train_script(_BASE.format(launcher="", extra="--deepspeed --deepspeed_config d").replace(
        "deepspeed  pretrain_gpt.py", "torchrun --nproc_per_node 8 pretrain_gpt.py"))
    findings = _job_rules.validate(parsed["spec"], None, CLUSTER, None, HEAD_DS, script=parsed)
    assert the(findings, "launcher is deepspeed")["status"] == "warn"


def test_both_precision_flags_in_a_script():
    findings = script_findings(extra="--deepspeed --deepspeed_config d --fp16")
    assert the(findings, "--bf16 xor --fp16")["status"] == "fail"


def test_script_without_micro_batch():
    parsed = _job_script.parse_train_script(_BASE.format(launcher="--hostfile h", extra="--deepspeed --deepspeed_config d")
                                            .replace("--micro-batch-size 1 ", ""))
    findings = _job_rules.validate(parsed["spec"], None, CLUSTER, None, HEAD_DS, script=parsed)
    finding = the(findings, "--micro-batch-size given")
    assert finding["status"] == "fail" and "micro_batch_size is not None" in finding["fix"]


def test_script_missing_required_flags():
    parsed = _job_script.parse_train_script("deepspeed --hostfile h pretrain_gpt.py --deepspeed --deepspeed_config d --micro-batch-size 1\n")
    findings = _job_rules.validate(parsed["spec"], None, CLUSTER, None, HEAD_DS, script=parsed)
    for flag in ("--num-layers", "--hidden-size", "--num-attention-heads", "--max-position-embeddings", "--seq-length"):
        assert the(findings, "%s given" % flag)["status"] == "fail"
    assert the(findings, "--train-iters or --train-samples given")["status"] == "fail"


# ---------------------------------------------------------------------------------------
# The guide's example: rejected with its reasons; the corrected version passes
# ---------------------------------------------------------------------------------------


def guide_findings(script: str, ds_config: str, version: Optional[str], hosts: bool = False) -> List[Dict[str, str]]:
    era = _mds_args.era_for_deepspeed(version)
    parsed = _job_script.parse_train_script(read(script), era=era)
    config = _job_files.load_ds_config(read(ds_config))[0]
    cluster = dict(CLUSTER)
    if hosts:
        cluster["hosts"] = _job_files.parse_hostfile(read("hostfile"))
    return _job_rules.validate(parsed["spec"], config, cluster, None, version, script=parsed)


GUIDE_FAILURES = {
    "--batch-size accepted by pretrain_gpt.py": "--batch-size argument is no longer valid, use --micro-batch-size instead",
    "--micro-batch-size given": "asserts args.micro_batch_size is not None",
    "ds_config micro batch == --micro-batch-size": "ds_config 8",
    "ds_config train_batch_size == --global-batch-size": "ds_config 256, global batch 8",
    "ZeRO stage vs pipeline engine": "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism",
    "--zero-stage == ds_config stage": "--zero-stage not given (Megatron default 1), ds_config stage 3",
    "ZeRO-Offload optimizer": "ZeRO-Offload with a client provided optimizer",
    "activation partitioning needs checkpointing": "ds_config activation_checkpointing.partition_activations",
}


@pytest.mark.parametrize("version", [OLD_DS, HEAD_DS])
def test_guide_example_is_rejected_with_its_reasons(version):
    findings = guide_findings("train.sh", "ds_config.json", version)
    failing = {f["check"]: f for f in findings if f["status"] == "fail"}
    assert sorted(failing) == sorted(GUIDE_FAILURES)
    for check, words in GUIDE_FAILURES.items():
        finding = failing[check]
        assert words in finding["found"] + " " + finding["fix"], check
    # DeepSpeed's own arithmetic inside the JSON holds: 256 == 8 * 8 * 4 (micro derived).
    assert the(findings, "ds_config train_batch_size == micro x grad_acc x DP")["status"] == "pass"
    warned = {f["check"] for f in findings if f["status"] == "warn"}
    assert warned == {"launcher hostfile", "ds_config optimizer section", "ds_config activation_checkpointing applied"}
    assert "weight_decay 0.01 vs --weight-decay 0.1" in the(findings, "ds_config optimizer section")["found"]
    assert the(findings, "--save with --save-interval")["status"] == "pass"
    assert the(findings, "world size")["found"] == "8 nodes x 8 GPUs = 64"
    assert the(findings, "data parallel size")["found"] == "DP = 64 / (TP 8 x PP 2) = 4"


@pytest.mark.parametrize("version", [OLD_DS, "0.12.0", HEAD_DS, None])
def test_corrected_guide_passes(version):
    findings = guide_findings("train.corrected.sh", "ds_config.corrected.json", version, hosts=True)
    assert statuses(findings)["fail"] == 0, _job_findings.format_findings(findings)
    assert statuses(findings)["warn"] == 0, _job_findings.format_findings(findings)
    assert the(findings, "memory per GPU")["status"] == "pass"


def test_corrected_guide_script_changes_only_what_was_wrong():
    original = _job_script.parse_train_script(read("train.sh"))["spec"]
    corrected = _job_script.parse_train_script(read("train.corrected.sh"))["spec"]
    changed = sorted(k for k in _job_schema.DEFAULTS if original[k] != corrected[k])
    assert changed == sorted(["micro_batch_size", "global_batch_size", "activation_checkpointing",
                              "partition_activations", "extra_args"])
    assert corrected["extra_args"] == ["--deepspeed-activation-checkpointing"]


# ---------------------------------------------------------------------------------------
# Memory estimate: DeepSpeed's estimators on the per-GPU shard
# ---------------------------------------------------------------------------------------


def _tiny(**over: Any) -> Dict[str, Any]:
    base = {"tensor_parallel": 1, "num_layers": 2, "hidden_size": 64, "num_attention_heads": 4, "seq_length": 128,
            "max_position_embeddings": 128, "micro_batch_size": 1, "global_batch_size": 8}
    base.update(over)
    return _job_spec.normalize(base)


@pytest.mark.parametrize("zero,version,formula", [
    ({"stage": 0}, HEAD_DS, lambda p, n: 16 * p),  # DeepSpeed BF16_Optimizer, measured (g1-m16-z0)
    ({"stage": 1}, HEAD_DS, lambda p, n: 4 * p + 16 * p / n),
    ({"stage": 1, "offload_optimizer": True}, HEAD_DS, lambda p, n: 4 * p),
    ({"stage": 2}, HEAD_DS, lambda p, n: 2 * p + 18 * p / n),
    ({"stage": 2}, OLD_DS, lambda p, n: 4 * p + 16 * p / n),
    ({"stage": 2, "offload_optimizer": True}, HEAD_DS, lambda p, n: 2 * p),
])
def test_model_states_follow_deepspeeds_estimators(zero, version, formula):
    spec = _tiny()
    derived = _job_spec.derive(spec, 1, 8)
    estimate = _job_memory.estimate_memory(spec, derived, zero, version)
    params = derived["num_parameters"]
    assert estimate["params_per_gpu"] == params  # TP 1, PP 1: one GPU holds the whole model
    assert estimate["model_states"] == int(formula(params, 8))


@pytest.mark.parametrize("offload_opt,offload_param,formula", [
    (False, False, lambda p, n, big: 4 * big + 18 * p / n),
    (True, False, lambda p, n, big: 4 * big + 2 * p / n),
    (True, True, lambda p, n, big: 4 * big),
])
def test_zero3_estimator(offload_opt, offload_param, formula):
    spec = _tiny()
    derived = _job_spec.derive(spec, 1, 8)
    zero = {"stage": 3, "offload_optimizer": offload_opt, "offload_param": offload_param}
    estimate = _job_memory.estimate_memory(spec, derived, zero)
    largest = max(_job_model.layer_parameters(64, 256), derived["padded_vocab_size"] * 64)
    assert estimate["model_states"] == int(formula(derived["num_parameters"], 8, largest))


def test_activation_formula_and_its_reductions():
    spec = _job_spec.normalize({})
    derived = _job_spec.derive(spec, 8, 8)
    zero = {"stage": 1}
    plain = _job_memory.estimate_memory(spec, derived, zero)
    # Korthikanti et al.: s b h (10 + 24/t + 5 a s / (h t)) per layer, 40 layers, + fp32 logits,
    # + one layer's attention-score gradients in its backward (14 bytes per score element / t).
    sbh = 2048 * 1 * 5120
    expected = (sbh * (10 + 24 / 8 + 5 * 40 * 2048 / (5120 * 8)) * 40 + 4 * 2048 * 51200 / 8
                + sbh * 14 * 40 * 2048 / (5120 * 8))
    assert plain["activations"] == int(expected)
    assert _job_memory.estimate_memory(spec, derived, zero, checkpointing="full")["activations"] < plain["activations"] / 5
    flash = dict(spec, use_flash_attn=True)
    assert _job_memory.estimate_memory(flash, derived, zero)["activations"] < plain["activations"]
    sequence = dict(spec, sequence_parallel=True)
    assert _job_memory.estimate_memory(sequence, derived, zero)["activations"] < plain["activations"]


@pytest.mark.parametrize("stage, formula", [
    (1, lambda p, n: 4 * p + 16 * p / n),
    (2, lambda p, n: 2 * p + 18 * p / n),
])
def test_deepspeed_sequence_parallel_in_the_memory_estimate(stage, formula):
    """DeepSpeed-Ulysses SP 4: each rank holds a quarter of the sequence's activations and logits,
    the same parameters, and ZeRO shards over DP x SP (DeepSpeed's sequence-data-parallel group)."""
    base = _job_spec.normalize({"tensor_parallel": 2, "global_batch_size": 64})
    sp = dict(base, ds_sequence_parallel_size=4)
    zero = {"stage": stage}
    plain = _job_memory.estimate_memory(base, _job_spec.derive(base, 8, 8), zero)
    split = _job_memory.estimate_memory(sp, _job_spec.derive(sp, 8, 8), zero)
    assert split["params_per_gpu"] == plain["params_per_gpu"]
    assert split["activations"] == pytest.approx(plain["activations"] / 4, rel=1e-6)
    params = plain["params_per_gpu"]
    assert plain["model_states"] == int(formula(params, 32))  # DP 64 / TP 2
    assert split["model_states"] == int(formula(params, 32))  # DP 8 x SP 4: the same 32 shards


def test_pipeline_keeps_micro_batches_in_flight():
    spec = _job_spec.normalize({"pipeline_parallel": 2, "no_pipeline_parallel": False, "global_batch_size": 256})
    derived = _job_spec.derive(spec, 8, 8)
    estimate = _job_memory.estimate_memory(spec, derived, {"stage": 1})
    assert estimate["in_flight_micro_batches"] == 2
    first_stage = 20 * (12 * 5120 ** 2 + 13 * 5120) / 8 + 51200 * 5120 / 8 + 2048 * 5120  # layers, words, positions
    assert estimate["params_per_gpu"] == int(first_stage)


# ---------------------------------------------------------------------------------------
# format_findings
# ---------------------------------------------------------------------------------------


def test_format_findings_table():
    findings = [
        _job_findings.finding("world size", "pass", "cluster", "8 nodes x 8 GPUs = 64", "nodes x GPUs"),
        _job_findings.finding("a long check " * 6, "fail", "zero", "found " * 20, "expected", "do this " * 30),
        _job_findings.finding("warned", "warn", "memory", "x", "y", "lower it"),
    ]
    table = _job_findings.format_findings(findings)
    lines = table.splitlines()
    assert lines[0].split(" | ")[0].strip() == "STATUS"
    assert [h.strip() for h in lines[0].split("|")] == ["STATUS", "COMPONENT", "CHECK", "FOUND", "EXPECTED"]
    assert set(lines[1]) <= {"-", "+"}
    assert lines[-1] == "1 fail, 1 warn, 1 pass"
    assert any(line.startswith("    fix: do this") for line in lines)
    assert any(line.startswith("    fix: lower it") for line in lines)
    assert not any("fix:" in line and "world size" in line for line in lines)
    widest = max(len(line) for line in lines if not line.startswith("    fix:"))
    assert widest <= sum(_job_findings.TABLE_WIDTHS) + 3 * 4 + 2


def test_format_findings_empty():
    assert _job_findings.format_findings([]).splitlines()[-1] == "0 fail, 0 warn, 0 pass"


def test_failed():
    findings = run({"seq_length": 4096})
    assert [f["check"] for f in _job_findings.failed(findings)] == ["max-position-embeddings >= seq-length"]
    json.dumps(findings)  # plain data, ready for Ansible results


# ---------------------------------------------------------------------------------------
# Flash attention: auto per stack profile, required on cu130 (docs/upstream-facts.md §G)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    "key, value, profile, expected",
    [
        # use_flash_attn: auto is on where the profile requires flash attention.
        ("use_flash_attn", "auto", "cu130", True),     # torch 2.11 breaks the unfused path: required
        ("use_flash_attn", "AUTO ", "cu130", True),
        ("use_flash_attn", "auto", "cu121", False),
        ("use_flash_attn", "auto", "cu117", False),    # before_rebase has no --use-flash-attn* flags
        ("use_flash_attn", "auto", "cpu", False),
        ("use_flash_attn", "auto", None, False),       # the default profile, cu117
        ("use_flash_attn", True, "cu121", True),
        ("use_flash_attn", "yes", "cu121", True),
        ("use_flash_attn", False, "cu130", False),     # kept as given: validate() refuses it
        ("use_flash_attn", "false", "cu130", False),
        # bias_gelu_fusion: auto is off where the profile's torch cannot fuse the TorchScript bias-GeLU,
        # unless the fused ops serve it: cu130 opts in to them (fused_ops: auto), so on there.
        ("bias_gelu_fusion", "auto", "cu130", True),
        ("bias_gelu_fusion", " Auto", "cu130", True),
        ("fused_ops", "auto", "cu130", True),
        ("fused_ops", "auto", "cu121", False),
        ("fused_ops", "auto", "cpu", False),
        ("fused_ops", True, "cpu", True),
        ("fused_ops", "off", "cu130", False),
        ("bias_gelu_fusion", "auto", "cu121", True),
        ("bias_gelu_fusion", "auto", "cu117", True),
        ("bias_gelu_fusion", "auto", "cpu", True),
        ("bias_gelu_fusion", "auto", None, True),      # the default profile, cu117
        ("bias_gelu_fusion", True, "cu130", True),     # kept as given: validate() warns
        ("bias_gelu_fusion", "yes", "cu130", True),
        ("bias_gelu_fusion", False, "cu121", False),
        ("bias_gelu_fusion", "off", "cu117", False),
    ],
)
def test_normalize_resolves_auto_settings(key, value, profile, expected):
    spec_vars = {"megatron_job_" + key: value}
    if profile is not None:
        spec_vars["megatron_job_stack_profile"] = profile
    assert _job_spec.normalize(spec_vars)[key] is expected


@pytest.mark.parametrize("gelu, fused, profile, expected", [
    ("auto", "auto", "cu130", True),     # the compiled kernel serves the fusion path
    ("auto", False, "cu130", False),     # without it, TorchScript's unfused chain: off
    (False, "auto", "cu130", False),     # a user's false stays
    (True, False, "cu130", True),        # a user's true stays (validate() warns)
    ("auto", True, "cu121", True),       # TorchScript fuses there anyway
])
def test_normalize_bias_gelu_follows_the_fused_ops(gelu, fused, profile, expected):
    spec = _job_spec.normalize({"megatron_job_bias_gelu_fusion": gelu, "megatron_job_fused_ops": fused,
                                "megatron_job_stack_profile": profile})
    assert spec["bias_gelu_fusion"] is expected
    assert _job_spec.normalize(spec) == spec   # idempotent


@pytest.mark.parametrize("key", sorted(_job_schema.AUTO_BOOL_KEYS))
@pytest.mark.parametrize(
    "value, profile, message",
    [
        ("sometimes", "cu130", "megatron_job_{key}: found 'sometimes', expected true or false"),
        ("auto", "cu999", "megatron_job_stack_profile: unknown stack profile 'cu999'"),
        (None, "cu130", "megatron_job_{key}: found null"),
    ],
)
def test_normalize_refuses_bad_auto_settings(key, value, profile, message):
    with pytest.raises(_job_schema.JobError, match=re.escape(message.format(key=key))):
        _job_spec.normalize({key: value, "stack_profile": profile})


GELU_CHECK = "bias-GeLU without TorchScript fusion on stack profile cu130"
GELU_RULES = [
    # (id, spec, check, status, words)
    ("cu130 default (auto) passes: the fused ops serve it", {"stack_profile": "cu130"}, GELU_CHECK, "pass",
     "megatron_job_fused_ops: true (a compiled bias-GeLU)"),
    ("cu130 without fused ops passes", {"stack_profile": "cu130", "fused_ops": False}, GELU_CHECK, "pass",
     "job spec: --no-bias-gelu-fusion"),
    ("cu130 explicit false passes", {"stack_profile": "cu130", "bias_gelu_fusion": False}, GELU_CHECK, "pass", ""),
    ("cu130 true with the fused ops passes", {"stack_profile": "cu130", "bias_gelu_fusion": True}, GELU_CHECK, "pass",
     "compiled bias-GeLU"),
    ("cu130 true warns", {"stack_profile": "cu130", "bias_gelu_fusion": True, "fused_ops": False}, GELU_CHECK, "warn",
     "megatron_job_bias_gelu_fusion: true"),
    ("cu130 true: the reason", {"stack_profile": "cu130", "bias_gelu_fusion": True, "fused_ops": False}, GELU_CHECK,
     "warn", "no TorchScript GPU fuser"),
    ("cu130 true: the measured cost", {"stack_profile": "cu130", "bias_gelu_fusion": True, "fused_ops": False},
     GELU_CHECK, "warn", "35.8% instead of 46.0% MFU"),
    ("cu130 true: the fix", {"stack_profile": "cu130", "bias_gelu_fusion": True, "fused_ops": False}, GELU_CHECK,
     "warn", "set megatron_job_bias_gelu_fusion: auto (or false)"),
    ("cu130 true, flag in extra_args", {"stack_profile": "cu130", "bias_gelu_fusion": True,
                                        "extra_args": ["--no-bias-gelu-fusion"]}, GELU_CHECK, "pass", ""),
    ("cu121 keeps the fusion silently", {"stack_profile": "cu121"},
     "bias-GeLU without TorchScript fusion on stack profile cu121", None, ""),
    ("cu117 keeps the fusion silently", {"stack_profile": "cu117", "bias_gelu_fusion": True},
     "bias-GeLU without TorchScript fusion on stack profile cu117", None, ""),
]


@pytest.mark.parametrize("extra, status, words", [
    ("--deepspeed --deepspeed_config d --no-bias-gelu-fusion", "pass", "train.sh: --no-bias-gelu-fusion"),
    ("--deepspeed --deepspeed_config d", "warn", "add --no-bias-gelu-fusion to the pretrain_gpt.py arguments"),
])
def test_bias_gelu_fusion_rule_on_a_script(extra, status, words):
    parsed = _job_script.parse_train_script(_BASE.format(launcher="--hostfile h", extra=extra))
    parsed["spec"]["stack_profile"] = "cu130"
    finding = the(_job_rules.validate(parsed["spec"], None, CLUSTER, None, HEAD_DS, script=parsed), GELU_CHECK)
    assert finding["status"] == status
    assert words in "%s | %s | %s" % (finding["found"], finding["expected"], finding["fix"])


FLASH_CHECK = "flash attention on stack profile cu130"
FLASH_RULES = [
    # (id, spec, check, status, words)
    ("cu130 default (auto) passes", {"stack_profile": "cu130"}, FLASH_CHECK, "pass", "--use-flash-attn-v2"),
    ("cu130 explicit true passes", {"stack_profile": "cu130", "use_flash_attn": True}, FLASH_CHECK, "pass", "job spec"),
    ("cu130 false is refused", {"stack_profile": "cu130", "use_flash_attn": False}, FLASH_CHECK, "fail",
     "megatron_job_use_flash_attn: false"),
    ("cu130 false: the reason", {"stack_profile": "cu130", "use_flash_attn": False}, FLASH_CHECK, "fail",
     "view size is not compatible"),
    ("cu130 false: the fix", {"stack_profile": "cu130", "use_flash_attn": False}, FLASH_CHECK, "fail",
     "set megatron_job_use_flash_attn: auto (or true)"),
    ("cu130 false: the provider", {"stack_profile": "cu130", "use_flash_attn": False}, FLASH_CHECK, "fail",
     "python_env_flash_attn: auto installs the sdpa provider"),
    ("cu130 triton flag with the SDPA provider", {"stack_profile": "cu130", "use_flash_attn": False,
                                                  "extra_args": ["--use-flash-attn-triton"]},
     FLASH_CHECK, "warn", "python_env_flash_attn: pip"),
    ("cu130 flash in fp32", {"stack_profile": "cu130", "precision": "fp32"}, "flash attention in half precision", "fail",
     "asserts q, k, v are fp16 or bf16"),
    ("cu130 flash in bf16", {"stack_profile": "cu130"}, "flash attention in half precision", None, ""),
    ("cu121 flash in fp32", {"stack_profile": "cu121", "use_flash_attn": True, "precision": "fp32"},
     "flash attention in half precision", "fail", "set megatron_job_precision: bf16"),
    ("cu121 does not require it", {"stack_profile": "cu121", "use_flash_attn": False},
     "flash attention on stack profile cu121", None, ""),
    ("cpu does not require it", {"stack_profile": "cpu"}, "flash attention on stack profile cpu", None, ""),
]


# The rules of the settings that take auto: flash attention (an "attention" finding, a failure
# where the profile requires it) and bias-GeLU fusion (a "performance" warning, never a failure).
AUTO_RULES = [r + ("attention",) for r in FLASH_RULES] + [r + ("performance",) for r in GELU_RULES]


@pytest.mark.parametrize("spec,check,status,words,component", [r[1:] for r in AUTO_RULES],
                         ids=["%s: %s" % (r[5], r[0]) for r in AUTO_RULES])
def test_auto_setting_rule(spec, check, status, words, component):
    findings = run(spec)
    if status is None:
        assert not [f for f in findings if f["check"] == check]
        return
    finding = the(findings, check)
    assert finding["status"] == status, finding
    assert finding["component"] == component
    assert words in "%s | %s | %s" % (finding["found"], finding["expected"], finding["fix"])


_FLASH_SCRIPT = ("deepspeed pretrain_gpt.py --tensor-model-parallel-size 8 --num-layers 40 --hidden-size 5120 "
                 "--num-attention-heads 40 --seq-length 2048 --max-position-embeddings 2048 --micro-batch-size 1 "
                 "--global-batch-size 512 --train-iters 10 --lr 1e-4 --no-pipeline-parallel --zero-stage 1 "
                 "--deepspeed --deepspeed_config ds.json --vocab-file v --merge-file m {extra}\n")


@pytest.mark.parametrize(
    "profile, extra, status, words",
    [
        ("cu130", "--bf16", "fail", "train.sh has no --use-flash-attn* flag"),
        ("cu130", "--bf16", "fail", "add --use-flash-attn-v2 to the pretrain_gpt.py arguments of train.sh"),
        ("cu130", "--bf16 --use-flash-attn-v2", "pass", "train.sh: --use-flash-attn-v2"),
        ("cu130", "--bf16 --use-flash-attn", "warn", "serves only flash_attn_varlen_func"),
        ("cu130", "--bf16 --use-flash-attn-builder", "warn", "--use-flash-attn-builder need the real flash-attn"),
        ("cu121", "--bf16", None, ""),
    ],
)
def test_flash_attn_rule_on_an_existing_train_sh(profile, extra, status, words):
    script = _job_script.parse_train_script(_FLASH_SCRIPT.format(extra=extra))
    spec = dict(script["spec"], stack_profile=profile)
    findings = _job_rules.validate(spec, None, CLUSTER, None, HEAD_DS, script=script)
    check = "flash attention on stack profile %s" % profile
    if status is None:
        assert not [f for f in findings if f["check"] == check]
        return
    finding = the(findings, check)
    assert finding["status"] == status, finding
    assert words in "%s | %s | %s" % (finding["found"], finding["expected"], finding["fix"])


def test_flash_attn_in_fp32_from_train_sh_names_the_flag():
    script = _job_script.parse_train_script(_FLASH_SCRIPT.format(extra="--use-flash-attn-v2"))
    findings = _job_rules.validate(dict(script["spec"], stack_profile="cu130"), None, CLUSTER, None, HEAD_DS, script=script)
    finding = the(findings, "flash attention in half precision")
    assert finding["status"] == "fail" and "add --bf16" in finding["fix"]


@pytest.mark.parametrize("precision, pp, gib", [
    # 4 all-reduces x 48 layers x micro 1 x seq 2048 x hidden 8192 x 2 bytes x grad-acc 16 = 96 GiB
    ("bf16", 1, 96.0),
    ("fp32", 1, 192.0),      # 4 bytes per value
    ("bf16", 2, 48.0),       # each rank holds half the layers
])
def test_tp_across_nodes_warns_with_its_traffic(precision, pp, gib):
    """Upstream accepts TP larger than a node (megatron/arguments.py asserts only that TP x PP
    divides the world): a warning with the cost, never a failure."""
    spec = {"tensor_parallel": 16, "pipeline_parallel": pp, "no_pipeline_parallel": pp == 1,
            "num_layers": 48, "hidden_size": 8192, "num_attention_heads": 64, "seq_length": 2048,
            "max_position_embeddings": 2048, "micro_batch_size": 1, "global_batch_size": 16 * 64 // (16 * pp),
            "precision": precision}
    findings = run(spec, cluster={"nodes": 8, "gpus_per_node": 8})
    row = the(findings, "TP <= GPUs per node")
    assert row["status"] == "warn"
    assert "spans 2 nodes" in row["found"]
    assert "about %.1f GiB per rank per iteration" % gib in row["fix"]
    assert not [f for f in findings if f["component"] == "parallelism" and f["status"] == "fail"]


# ---------------------------------------------------------------------------------------
# validate_args' schedule and recompute asserts (found by the upstream oracle at 4efb479d)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("extra, version, check, status, words", [
    # --lr-warmup-fraction replaces --lr-warmup-iters, which the job files always render
    (["--lr-warmup-fraction", "0.1"], HEAD_DS, "one learning-rate warmup", "fail",
     "can only specify one of lr-warmup-fraction and lr-warmup-iters"),
    (["--lr-warmup-fraction", "0.1"], OLD_DS, "one learning-rate warmup", "fail", "megatron_job_lr_warmup_iters: 0"),
    (["--train-samples", "1000"], HEAD_DS, "iteration- or sample-based training", "fail",
     "expected iteration-based training"),
    (["--recompute-granularity", "selective", "--recompute-method", "uniform"], HEAD_DS,
     "recompute method with selective granularity", "fail", "not yet supported for selective"),
])
def test_upstream_asserts_restated(extra, version, check, status, words):
    finding = the(run({"extra_args": extra, "num_layers": 24, "pipeline_parallel": 1, "tensor_parallel": 8},
                      version=version), check)
    assert finding["status"] == status and words in finding["fix"]


@pytest.mark.parametrize("spec, check", [
    ({"extra_args": ["--lr-warmup-fraction", "0.1"], "lr_warmup_iters": 0}, "one learning-rate warmup"),
    ({"extra_args": ["--recompute-granularity", "selective"]}, "recompute method with selective granularity"),
    ({}, "iteration- or sample-based training"),
])
def test_legal_schedules_and_recompute_pass_these_checks(spec, check):
    assert [f for f in run(spec) if f["check"] == check] == []


@pytest.mark.parametrize("profile, style, status", [
    ("cu117", "inverse-square-root", "fail"),  # before_rebase's argparse has no such choice
    ("cu117", "cosine", None),
    ("cu121", "inverse-square-root", None),
    ("cu130", "inverse-square-root", None),
])
def test_spec_value_the_era_refuses(profile: str, style: str, status: Optional[str]) -> None:
    """A spec value that renders but that the profile's Megatron-DeepSpeed refuses at parse_args
    fails validation, naming the variable (found by the property test on a cu117 draw)."""
    found = [f for f in run({"stack_profile": profile, "lr_decay_style": style}, version=None)
             if f["check"] == "--lr-decay-style value"]
    assert [f["status"] for f in found] == ([status] if status else [])
    if status:
        assert found[0]["found"] == "megatron_job_lr_decay_style: %s" % style
        assert "before_rebase" in found[0]["fix"] and found[0]["expected"] == "{constant,linear,cosine}"


# ---------------------------------------------------------------------------------------
# The cluster's GPU against the stack profile's architectures (_check_gpu_arch)
# ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("profile, gpu_model, status, words", [
    ("cu117", "H100", "fail", ["cannot run on H100 (compute capability 9.0)", "sm_86", "cu121 or cu130"]),
    ("cu117", "H200", "fail", ["cu121 or cu130"]),
    ("cu117", "A100-80GB", "pass", []),
    ("cu121", "H100", "pass", []),
    ("cu130", "H200", "pass", []),
    ("cu117", None, None, []),           # GPU unknown: not judged
    ("cpu", "H200", None, []),           # no GPU code in the profile
])
def test_gpu_arch_rule(profile, gpu_model, status, words):
    findings = _job_rules.validate(_tiny(stack_profile=profile), cluster={"nodes": 1, "gpus_per_node": 8, "gpu_model": gpu_model})
    found = [f for f in findings if f["check"].startswith("GPU architecture")]
    if status is None:
        assert found == []
        return
    assert [f["status"] for f in found] == [status]
    assert found[0]["check"] == "GPU architecture on stack profile %s" % profile
    assert found[0]["expected"].startswith("torch sm_")
    for word in words:
        assert word in found[0]["fix"], (word, found[0]["fix"])
