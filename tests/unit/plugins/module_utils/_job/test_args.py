# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_job_args and _job_files: the job files computed from one job spec.

DeepSpeed's own config class and hostfile parser judge the output where DeepSpeed is
importable (pip install torch deepspeed==0.19.6 into the test venv); without it those tests skip
and say so.
"""
from __future__ import annotations

import re

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import files as _job_files
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import inputs as _job_inputs
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import args as _mds_args
from ansible_collections.megatron_ds.cluster.tests.support.deepspeed_judge import judge
from ansible_collections.megatron_ds.cluster.tests.unit.job_defaults import DS_MISSING, spec

# The guide's 13B job as inventories/prod writes it: 8 x 8 GPUs, TP 8, PP 2, ZeRO-1.
PROD = dict(nodes=8, gpus_per_node=8, tensor_parallel=8, pipeline_parallel=2, no_pipeline_parallel=False,
            micro_batch_size=2, global_batch_size=256, zero_stage=1, activation_checkpointing=True)
CPU_SIM = dict(nodes=3, gpus_per_node=2, tensor_parallel=1, pipeline_parallel=1, micro_batch_size=2,
               global_batch_size=24, zero_stage=2, precision="fp32", tokenizer_type="NullTokenizer", vocab_size=1000)
ZERO3_OFFLOAD = dict(nodes=2, gpus_per_node=8, tensor_parallel=2, pipeline_parallel=1, micro_batch_size=4,
                     global_batch_size=64, zero_stage=3, zero_offload_optimizer="cpu", zero_offload_param="cpu",
                     precision="fp16", activation_checkpointing=True, partition_activations=True,
                     contiguous_memory_optimization=True, checkpoint_in_cpu=True)

# (name, overrides, profile): the table every check below runs over.
JOBS = [
    ("defaults-cu117", {}, "cu117"),
    ("defaults-cu130", {}, "cu130"),
    ("prod-13b", PROD, "cu117"),
    ("cpu-sim-zero2", CPU_SIM, "cpu"),
    ("zero3-offload-fp16", ZERO3_OFFLOAD, "cu121"),
    ("one-node-fp32-zero0", dict(nodes=1, gpus_per_node=2, tensor_parallel=1, micro_batch_size=1,
                                 global_batch_size=2, zero_stage=0, precision="fp32"), "cpu"),
]
JOB_IDS = [job[0] for job in JOBS]


# ------------------------------------------------------------------------------------ derive
@pytest.mark.parametrize(
    "overrides, expected",
    [
        (dict(nodes=8, gpus_per_node=8, tensor_parallel=8, pipeline_parallel=2, micro_batch_size=2, global_batch_size=256),
         dict(world=64, dp=4, grad_acc=32)),
        (dict(nodes=2, gpus_per_node=8, tensor_parallel=8, pipeline_parallel=1, micro_batch_size=1, global_batch_size=512),
         dict(world=16, dp=2, grad_acc=256)),
        (dict(nodes=3, gpus_per_node=2, tensor_parallel=1, pipeline_parallel=1, micro_batch_size=2, global_batch_size=12),
         dict(world=6, dp=6, grad_acc=1)),
        (dict(nodes="2", gpus_per_node="4", tensor_parallel=2, pipeline_parallel=1, micro_batch_size=1, global_batch_size=8.0),
         dict(world=8, dp=4, grad_acc=2)),
    ],
)
def test_derive(overrides, expected):
    derived = _job_spec.summary(spec(**overrides))
    assert {k: derived[k] for k in expected} == expected


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(nodes=3, gpus_per_node=2, tensor_parallel=4), "cannot be split into tensor_parallel 4"),
        (dict(nodes=2, gpus_per_node=8, tensor_parallel=8, micro_batch_size=2, global_batch_size=6),
         "global_batch_size 6 is not divisible by micro_batch_size 2 x data parallel 2"),
        # One coercion (_job_schema.coerce) now reads every spec value, for rendering and validation alike.
        (dict(gpus_per_node=0), "megatron_job_gpus_per_node: found 0, expected an integer from 1 to 64"),
        (dict(micro_batch_size="two"), "megatron_job_micro_batch_size: found 'two'"),
        (dict(global_batch_size=True), "megatron_job_global_batch_size: found True"),
    ],
)
def test_derive_refuses(overrides, message):
    with pytest.raises(_job_schema.JobError, match=re.escape(message)):
        _job_spec.summary(spec(**overrides))


# -------------------------------------------------------------------------------- ds_config
@pytest.mark.parametrize("name, overrides, profile", JOBS, ids=JOB_IDS)
def test_ds_config_matches_train_args(name, overrides, profile):
    job = spec(**overrides)
    config = _job_args.ds_config(job)
    args = _job_args.train_args(job, profile)

    def value(flag):
        return args[args.index(flag) + 1]

    derived = _job_spec.summary(job)
    assert config["train_batch_size"] == int(value("--global-batch-size")) == job["global_batch_size"]
    assert config["train_micro_batch_size_per_gpu"] == int(value("--micro-batch-size"))
    assert config["train_batch_size"] == (
        config["train_micro_batch_size_per_gpu"] * config["gradient_accumulation_steps"] * derived["dp"])
    assert config["zero_optimization"]["stage"] == int(value("--zero-stage")) == job["zero_stage"]
    assert config["gradient_clipping"] == float(value("--clip-grad"))
    assert config["bf16"]["enabled"] == ("--bf16" in args)
    assert config["fp16"]["enabled"] == ("--fp16" in args)
    assert ("activation_checkpointing" in config) == ("--checkpoint-activations" in args)
    assert value("--deepspeed_config") == job["workdir"] + "/ds_config.json"
    # Megatron builds the optimizer and scheduler itself and hands them to deepspeed.initialize.
    assert "optimizer" not in config and "scheduler" not in config
    assert config["wall_clock_breakdown"] is False


@pytest.mark.parametrize(
    "overrides, present, absent",
    [
        ({}, {"stage": 1, "overlap_comm": True, "reduce_bucket_size": 500000000},
         ["offload_optimizer", "offload_param"]),
        (dict(zero_stage=2, zero_offload_optimizer="cpu", zero_pin_memory=False, zero_allgather_bucket_size=5e8),
         {"offload_optimizer": {"device": "cpu", "pin_memory": False}, "allgather_bucket_size": 500000000},
         ["offload_param"]),
        (ZERO3_OFFLOAD, {"stage": 3, "offload_param": {"device": "cpu", "pin_memory": True},
                         "offload_optimizer": {"device": "cpu", "pin_memory": True}}, []),
    ],
)
def test_ds_config_zero_block(overrides, present, absent):
    zero = _job_args.ds_config(spec(**overrides))["zero_optimization"]
    for key, value in present.items():
        assert zero[key] == value
    for key in absent:
        assert key not in zero


@pytest.mark.parametrize(
    "precision, bf16, fp16",
    [
        ("bf16", {"enabled": True}, {"enabled": False}),
        ("fp16", {"enabled": False}, {"enabled": True, "loss_scale": 0, "initial_scale_power": 12,
                                      "loss_scale_window": 1000, "hysteresis": 2, "min_loss_scale": 1}),
        ("fp32", {"enabled": False}, {"enabled": False}),
        ("BF16", {"enabled": True}, {"enabled": False}),
    ],
)
def test_ds_config_precision(precision, bf16, fp16):
    config = _job_args.ds_config(spec(precision=precision, fp16_initial_scale_power=12))
    assert config["bf16"] == bf16 and config["fp16"] == fp16


def test_ds_config_activation_checkpointing_block():
    config = _job_args.ds_config(spec(activation_checkpointing=True, partition_activations=True, checkpoint_in_cpu=True))
    assert config["activation_checkpointing"] == {
        "partition_activations": True, "contiguous_memory_optimization": False, "cpu_checkpointing": True}
    assert "activation_checkpointing" not in _job_args.ds_config(spec())


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(zero_stage=2, pipeline_parallel=1, no_pipeline_parallel=False), "zero_stage 2 needs no_pipeline_parallel: true"),
        (dict(no_pipeline_parallel=True, pipeline_parallel=2, nodes=2, gpus_per_node=8, tensor_parallel=8,
              global_batch_size=8), "asserts PP == 1 with --no-pipeline-parallel"),
        (dict(zero_stage=1, zero_offload_param="cpu"), "zero_offload_param cpu needs zero_stage 3 (found 1)"),
        (dict(zero_stage=0, zero_offload_optimizer="cpu"), "needs zero_stage >= 1"),
        (dict(zero_stage=4), "megatron_job_zero_stage: found 4, expected one of 0, 1, 2, 3"),
        (dict(zero_offload_optimizer="nvme"), "megatron_job_zero_offload_optimizer: found 'nvme', expected one of none, cpu"),
        (dict(precision="fp8"), "megatron_job_precision: found 'fp8', expected one of bf16, fp16, fp32"),
        (dict(partition_activations=True), "partition_activations need activation_checkpointing: true"),
        (dict(zero_overlap_comm="maybe"), "megatron_job_zero_overlap_comm: found 'maybe', expected true or false"),
        (dict(clip_grad="x"), "megatron_job_clip_grad: found 'x', expected a number"),
    ],
)
def test_ds_config_refuses(overrides, message):
    with pytest.raises(_job_schema.JobError, match=re.escape(message)):
        _job_args.ds_config(spec(**overrides))


def test_missing_key_takes_the_role_default():
    """A key the spec lacks takes the role default (normalize), as validation always did; the
    renderer used to stop instead, so the two judged different specs."""
    job = spec()
    del job["zero_stage"]
    assert _job_args.ds_config(job)["zero_optimization"]["stage"] == 1


def test_extra_args_string_is_split_like_validation():
    """``-e megatron_job_extra_args='--exit-interval 100'`` arrives as a string: rendering now
    splits it like validation (shlex) instead of refusing what validation accepted."""
    groups = _job_args.train_arg_groups(spec(extra_args="--exit-interval 100"), "cu130")
    assert groups[-2:] == [["--exit-interval"], ["100"]]


# ------------------------------------------------------------------------------- train args
@pytest.mark.parametrize(
    "overrides, profile, present, absent",
    [
        # use_flash_attn: auto turns flash attention on where the profile requires it (cu130).
        ({}, "cu130", ["--no-masked-softmax-fusion", "--exit-signal-handler", "--no-gradient-accumulation-fusion",
                       "--no-pipeline-parallel", "--bf16", "--deepspeed", "--data-impl", "--use-flash-attn-v2"],
         ["--fp16", "--checkpoint-activations", "--cpu-optimizer", "--batch-size",
          "--dataset-impl", "--deepspeed-config"]),
        (dict(use_flash_attn=False), "cu130", ["--bf16"], ["--use-flash-attn-v2"]),
        # bias_gelu_fusion: auto turns the TorchScript bias-GeLU off where torch cannot fuse it (cu130).
        ({}, "cu130", [], ["--no-bias-gelu-fusion"]),   # the fused ops (cu130 opts in) serve the fusion path
        (dict(fused_ops=False), "cu130", ["--no-bias-gelu-fusion"], []),
        (dict(bias_gelu_fusion="auto"), "cu121", [], ["--no-bias-gelu-fusion"]),
        (dict(bias_gelu_fusion=True), "cu130", [], ["--no-bias-gelu-fusion"]),
        (dict(bias_gelu_fusion="false"), "cu121", ["--no-bias-gelu-fusion"], []),
        ({}, "cu117", [], ["--no-bias-gelu-fusion"]),
        ({}, "cpu", [], ["--no-bias-gelu-fusion"]),
        (dict(use_flash_attn="AUTO"), "cu130", ["--use-flash-attn-v2"], []),
        (dict(use_flash_attn="auto"), "cu121", [], ["--use-flash-attn-v2"]),
        (dict(use_flash_attn="true"), "cu121", ["--use-flash-attn-v2"], []),
        ({}, "cpu", [], ["--use-flash-attn-v2"]),
        # before_rebase has neither flag: leaving them in would stop argparse at start-up.
        ({}, "cu117", ["--bf16", "--zero-stage"], ["--exit-signal-handler", "--no-gradient-accumulation-fusion"]),
        (dict(masked_softmax_fusion=False, bias_gelu_fusion=False, bias_dropout_fusion=False), "cu121",
         ["--no-masked-softmax-fusion", "--no-bias-gelu-fusion", "--no-bias-dropout-fusion"], []),
        (dict(gradient_accumulation_fusion=True, exit_signal_handler=False, load=False, tensorboard_dir=None), "cu121",
         ["--save"], ["--no-gradient-accumulation-fusion", "--exit-signal-handler", "--load", "--tensorboard-dir"]),
        # Megatron-DeepSpeed HEAD stops at the first forward with --checkpoint-activations alone
        # ("Invalid activation recompute method.", seen on H200): the DeepSpeed path comes with it.
        (dict(activation_checkpointing=True), "cu121", ["--checkpoint-activations", "--deepspeed-activation-checkpointing"],
         ["--partition-activations"]),
        (ZERO3_OFFLOAD, "cu121", ["--checkpoint-activations", "--deepspeed-activation-checkpointing",
                                  "--partition-activations", "--contigious-checkpointing", "--checkpoint-in-cpu",
                                  "--cpu-optimizer", "--fp16"], ["--no-pipeline-parallel-size"]),
        (dict(precision="fp32", use_flash_attn=True, sequence_parallel=True, ffn_hidden_size=13824), "cu130",
         ["--use-flash-attn-v2", "--sequence-parallel", "--ffn-hidden-size"], ["--bf16", "--fp16"]),
        (PROD, "cu117", ["--checkpoint-activations", "--pipeline-model-parallel-size"], ["--no-pipeline-parallel"]),
        (dict(tokenizer_type="NullTokenizer", vocab_size=1000), "cpu", ["--vocab-size"], ["--vocab-file", "--merge-file"]),
        (dict(tokenizer_type="HFTokenizer", tokenizer_model="gpt2"), "cu130", ["--tokenizer-model"], ["--vocab-file"]),
    ],
)
def test_train_flags(overrides, profile, present, absent):
    flags = _job_args.train_flags(spec(**overrides), profile)
    for flag in present:
        assert flag in flags
    for flag in absent:
        assert flag not in flags
    assert len(flags) == len(set(flags)), "a flag is repeated"


@pytest.mark.parametrize(
    "flag, value",
    [
        ("--lr", "6e-05"), ("--min-lr", "6e-06"), ("--split", "969,30,1"), ("--data-impl", "mmap"),
        ("--tensor-model-parallel-size", "8"), ("--micro-batch-size", "1"), ("--zero-stage", "1"),
        ("--save", "/shared/checkpoints/gpt"), ("--init-method-std", "0.006"),
    ],
)
def test_train_arg_values(flag, value):
    groups = {group[0]: group[1:] for group in _job_args.train_arg_groups(spec(split="969, 30, 1"), "cu130")}
    assert groups[flag] == [value]


def test_train_args_data_path_list_and_extra_args():
    groups = _job_args.train_arg_groups(
        spec(data_path=["0.7", "/d/a_text_document", "0.3", "/d/b_text_document"],
             extra_args=["--exit-interval", "100"]), "cu130")
    assert ["--data-path", "0.7", "/d/a_text_document", "0.3", "/d/b_text_document"] in groups
    assert groups[-2:] == [["--exit-interval"], ["100"]]


@pytest.mark.parametrize(
    "overrides, profile, message",
    [
        (dict(use_flash_attn=True), "cu117", "use_flash_attn needs --use-flash-attn-v2, which Megatron-DeepSpeed "
         "before_rebase (stack profile cu117) does not have; set megatron_job_use_flash_attn: auto (or false)"),
        (dict(use_flash_attn="sometimes"), "cu130", "megatron_job_use_flash_attn: found 'sometimes', expected true or false"),
        (dict(sequence_parallel=True), "cu117", "sequence_parallel needs --sequence-parallel"),
        (dict(tokenizer_type="NullTokenizer", vocab_size=1000), "cu117", "NullTokenizer needs --vocab-size"),
        (dict(tokenizer_type="NullTokenizer"), "cpu", "NullTokenizer needs vocab_size"),
        (dict(merge_file=None), "cu130", "GPT2BPETokenizer needs merge_file"),
        (dict(tokenizer_type="SentencePieceTokenizer"), "cu130", "needs tokenizer_model"),
        ({}, "cu999", "unknown stack profile 'cu999'"),
    ],
)
def test_train_args_refuse(overrides, profile, message):
    with pytest.raises((_job_schema.JobError, KeyError), match=re.escape(message)):
        _job_args.train_args(spec(**overrides), profile)


@pytest.mark.parametrize("name, overrides, profile", JOBS, ids=JOB_IDS)
def test_every_train_flag_is_in_the_mds_table(name, overrides, profile):
    """Each flag exists under this spelling in the Megatron-DeepSpeed era the profile installs,
    and each value is one argparse accepts (type and choices)."""
    era = _mds_args.BEFORE_REBASE if profile == "cu117" else _mds_args.HEAD
    args = _job_args.train_args(spec(**overrides), profile)
    for parsed in _mds_args.split_args(args, era):
        note = _mds_args.classify(parsed.flag, era)
        assert note.status in ("known", "deprecated"), note.message
        _mds_args.coerce(parsed.flag, parsed.values, era)


# ------------------------------------------------------------------------------ launcher
@pytest.mark.parametrize(
    "overrides, expected",
    [
        ({}, ["--hostfile", "/opt/megatron/jobs/gpt/hostfile", "--launcher", "pdsh", "--master_port", "29500",
              "--num_nodes", "2", "--num_gpus", "8"]),
        (dict(launcher="slurm", master_addr="10.0.0.1", master_port=29600),
         ["--hostfile", "/opt/megatron/jobs/gpt/hostfile", "--launcher", "slurm", "--master_port", "29600",
          "--master_addr", "10.0.0.1", "--num_nodes", "2", "--num_gpus", "8"]),
        # DeepSpeed's OpenMPI runner raises on --num_nodes/--num_gpus: the hostfile sizes it.
        (dict(launcher="openmpi"), ["--hostfile", "/opt/megatron/jobs/gpt/hostfile", "--launcher", "openmpi",
                                    "--master_port", "29500"]),
        # One node launches locally. Found on the GPU host: with a hostfile, DeepSpeed's runner
        # ssh-checks the first host even when it is the only one, and that host had no ssh.
        (dict(nodes=1, gpus_per_node=2, tensor_parallel=1), ["--master_port", "29500", "--num_gpus", "2"]),
        (dict(nodes=1, launcher="openmpi", tensor_parallel=1), ["--master_port", "29500", "--num_gpus", "8"]),
    ],
)
def test_launch_args(overrides, expected):
    assert _job_args.launch_args(spec(**overrides)) == expected


def test_launch_args_refuse_unknown_launcher():
    with pytest.raises(_job_schema.JobError, match="megatron_job_launcher: found 'torchrun', expected one of pdsh, openmpi, slurm"):
        _job_args.launch_args(spec(launcher="torchrun"))


# --------------------------------------------------------------------------- .deepspeed_env
@pytest.mark.parametrize(
    "overrides, profile, expected",
    [
        ({}, "cu130", ["CUDA_HOME=/usr/local/cuda",
                       "PATH=/opt/megatron/venv/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                       "PYTHONPATH=/opt/megatron/Megatron-DeepSpeed", "MEGATRON_DS_FUSED_OPS=1", "CUDA_DEVICE_MAX_CONNECTIONS=1"]),
        (dict(env={}, nccl_env={"NCCL_DEBUG": "WARN", "NCCL_IB_DISABLE": 0}), "cpu",
         ["DS_ACCELERATOR=cpu", "MAX_JOBS=1", "PATH=/opt/megatron/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          "PYTHONPATH=/opt/megatron/Megatron-DeepSpeed", "NCCL_DEBUG=WARN", "NCCL_IB_DISABLE=0"]),
        # The job's env wins over nccl_env; null drops a variable; booleans become 1/0.
        (dict(cuda_home=None, nccl_env={"NCCL_DEBUG": "INFO", "NCCL_NVLS_ENABLE": False},
              env={"NCCL_DEBUG": "WARN", "CUDA_DEVICE_MAX_CONNECTIONS": None, "PYTHONPATH": "/x"}), "cu121",
         ["PATH=/opt/megatron/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          "NCCL_NVLS_ENABLE=0", "NCCL_DEBUG=WARN", "PYTHONPATH=/x"]),
        # The fused ops: the ranks get the variable megatron_ds_fused_ops.pth looks for; the job's env can unset it.
        (dict(fused_ops=False), "cu130", ["CUDA_HOME=/usr/local/cuda",
                                          "PATH=/opt/megatron/venv/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                          "PYTHONPATH=/opt/megatron/Megatron-DeepSpeed", "CUDA_DEVICE_MAX_CONNECTIONS=1"]),
        (dict(fused_ops=True), "cpu", ["DS_ACCELERATOR=cpu", "MAX_JOBS=1",
                                       "PATH=/opt/megatron/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                       "PYTHONPATH=/opt/megatron/Megatron-DeepSpeed", "MEGATRON_DS_FUSED_OPS=1",
                                       "CUDA_DEVICE_MAX_CONNECTIONS=1"]),
        (dict(fused_ops=True, env={"MEGATRON_DS_FUSED_OPS": None}), "cu130",
         ["CUDA_HOME=/usr/local/cuda",
          "PATH=/opt/megatron/venv/bin:/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
          "PYTHONPATH=/opt/megatron/Megatron-DeepSpeed"]),
        # DeepSpeed >= 0.15.2 quotes values itself: spaces pass.
        (dict(env={"NCCL_SOCKET_IFNAME": "=ib0", "OPTS": "a b"}), "cu130", None),
    ],
)
def test_deepspeed_env_lines(overrides, profile, expected):
    lines = _job_files.deepspeed_env_lines(spec(**overrides), profile)
    if expected is not None:
        assert lines == expected
    # What DeepSpeed's runner does with each line: split on the first '=', strip.
    for line in lines:
        assert line.strip() and not line.startswith("#") and "\n" not in line
        key, value = line.split("=", 1)
        assert key.strip() == key and value.strip() == value


@pytest.mark.parametrize(
    "env, profile, message",
    [
        ({"OPTS": "a b"}, "cu117", "DeepSpeed 0.9.2 (stack profile cu117) writes .deepspeed_env values unquoted"),
        ({"OPTS": "x;y"}, "cu117", "contains spaces or shell characters"),
        ({"LD_LIBRARY_PATH": "/a:$LD_LIBRARY_PATH"}, "cu130", "contains a newline, '\"', '`', '$' or '\\'"),
        ({"X": 'say "hi"'}, "cu130", "remote shell"),
        ({"X": "two\nlines"}, "cu130", "newline"),
        ({"X": " padded"}, "cu130", "leading or trailing whitespace"),
        ({"1BAD": "v"}, "cu130", "'1BAD' is not a valid environment variable name"),
        ({"BAD-NAME": "v"}, "cu130", "not a valid environment variable name"),
    ],
)
def test_deepspeed_env_refuses(env, profile, message):
    with pytest.raises(_job_schema.JobError, match=re.escape(message)):
        _job_files.deepspeed_env_lines(spec(env=env), profile)


def test_deepspeed_env_refuses_non_mapping():
    with pytest.raises(_job_schema.JobError, match="megatron_job_nccl_env: found .* expected a mapping"):
        _job_files.deepspeed_env_lines(spec(nccl_env=["NCCL_DEBUG=INFO"]), "cu130")


@pytest.mark.parametrize(
    "profile, expected",
    [("cu117", False), ("cu121", True), ("cu130", True), ("cpu", True),
     ({"name": "x", "deepspeed": {"pip": "deepspeed"}}, False),
     ({"name": "y", "deepspeed": {"pip": "deepspeed==0.10.1"}}, True)],
)
def test_deepspeed_env_file_supported(profile, expected):
    assert _job_files.deepspeed_env_file_supported(profile) is expected


# ------------------------------------------------------------------------------- hostfile
@pytest.mark.parametrize(
    "hosts, slots, expected",
    [
        (["gpu01", "gpu02"], 8, ["gpu01 slots=8", "gpu02 slots=8"]),
        (["node1"], "2", ["node1 slots=2"]),
        (["10.0.0.1", "node-2.example"], 4, ["10.0.0.1 slots=4", "node-2.example slots=4"]),
    ],
)
def test_hostfile_lines(hosts, slots, expected):
    lines = _job_files.hostfile_lines(hosts, slots)
    assert lines == expected
    assert list(_job_files.parse_hostfile("\n".join(lines)).items()) == [(h, int(slots)) for h in hosts]


@pytest.mark.parametrize(
    "hosts, slots, message",
    [
        (["a", "b", "a"], 8, "nodes #1 and #3 both resolve to 'a'"),
        (["a b"], 8, "node address 'a b' cannot be used"),
        (["a,b"], 8, "cannot be used"),
        (["#a"], 8, "cannot be used"),
        ([""], 8, "cannot be used"),
        ([], 8, "no hosts"),
        (["a"], 0, "slots is 0"),
        (["a"], "x", "slots is 'x'"),
    ],
)
def test_hostfile_lines_refuse(hosts, slots, message):
    with pytest.raises(_job_schema.JobError, match=re.escape(message)):
        _job_files.hostfile_lines(hosts, slots)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("# c\n\nw0 slots=8\n  w1 slots=4  \n", {"w0": 8, "w1": 4}),
        ("w0 slots=8 # trailing note\n", {"w0": 8}),
    ],
)
def test_parse_hostfile(text, expected):
    assert _job_files.parse_hostfile(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        # One hostfile reader now, with DeepSpeed's own words (runner.py _parse_hostfile).
        ("w0 slots=8\nw0 slots=8\n", "Hostfile contains multiple entries for w0"),
        ("w0 8\n", "Hostfile contains a bad entry: w0 8"),
        ("w0 slots=x\n", "Hostfile contains a bad entry: w0 slots=x"),
        ("# only a comment\n\n", "Hostfile is empty or not formatted correctly"),
    ],
)
def test_parse_hostfile_refuses(text, message):
    with pytest.raises(_job_schema.JobError, match=re.escape(message)):
        _job_files.parse_hostfile(text)


# ---------------------------------------------------------------- DeepSpeed's own judgement
def deepspeed_judge(configs, hostfiles):
    """DeepSpeed's DeepSpeedConfig and _parse_hostfile on each input, in a child interpreter."""
    verdict = judge(configs, hostfiles)
    if "missing" in verdict:
        pytest.skip("%s (%s)" % (DS_MISSING, verdict["missing"]))
    return verdict


def _tampered_batch(config):
    config["train_batch_size"] += 1


def _tampered_zero(config):
    config["zero_optimization"]["stage3_bogus_key"] = 1


TAMPERED = [(_tampered_batch, "Check batch related parameters"), (_tampered_zero, "stage3_bogus_key")]
HOSTS = [["gpu01"], ["gpu01", "gpu02", "gpu03"], ["10.0.0.1", "node-2.example"]]
BAD_HOSTFILES = ["w0 slots=8\nw0 slots=8\n", "w0 eight\n", "\n"]


@pytest.fixture(scope="module")
def verdict():
    configs = [{"config": _job_args.ds_config(spec(**overrides)), "dp": _job_spec.summary(spec(**overrides))["dp"]}
               for name, overrides, profile in JOBS]
    for mutate, message in TAMPERED:
        config = _job_args.ds_config(spec(**PROD))
        mutate(config)
        configs.append({"config": config, "dp": _job_spec.summary(spec(**PROD))["dp"]})
    hostfiles = ["# rendered\n" + "\n".join(_job_files.hostfile_lines(hosts, 8)) + "\n" for hosts in HOSTS]
    return deepspeed_judge(configs, hostfiles + BAD_HOSTFILES)


@pytest.mark.parametrize("index, job", list(enumerate(JOBS)), ids=JOB_IDS)
def test_deepspeed_accepts_ds_config(verdict, index, job):
    overrides = job[1]
    job_spec = spec(**overrides)
    derived = _job_spec.summary(job_spec)
    parsed = verdict["configs"][index]
    assert parsed["ok"], parsed.get("error")
    assert parsed["world_size"] == derived["dp"]
    assert parsed["train_batch_size"] == job_spec["global_batch_size"]
    assert parsed["micro"] == job_spec["micro_batch_size"]
    assert parsed["grad_acc"] == derived["grad_acc"]
    assert parsed["stage"] == job_spec["zero_stage"]
    assert parsed["bf16"] == (job_spec["precision"] == "bf16")
    assert parsed["fp16"] == (job_spec["precision"] == "fp16")
    assert parsed["clip"] == job_spec["clip_grad"]


@pytest.mark.parametrize("index, message", [(i, m) for i, (f, m) in enumerate(TAMPERED)], ids=["batch", "zero-key"])
def test_deepspeed_rejects_a_tampered_config(verdict, index, message):
    """The check above has teeth: DeepSpeed refuses a config that breaks the batch identity or
    carries a key its ZeRO model does not know."""
    parsed = verdict["configs"][len(JOBS) + index]
    assert not parsed["ok"]
    assert message in parsed["error"]


@pytest.mark.parametrize("index, hosts", list(enumerate(HOSTS)))
def test_deepspeed_parses_hostfile(verdict, index, hosts):
    text = "# rendered\n" + "\n".join(_job_files.hostfile_lines(hosts, 8)) + "\n"
    parsed = verdict["hostfiles"][index]
    assert parsed["ok"], parsed.get("error")
    assert parsed["pool"] == _job_files.parse_hostfile(text) == {h: 8 for h in hosts}


@pytest.mark.parametrize("index, text", list(enumerate(BAD_HOSTFILES)))
def test_deepspeed_and_our_parser_refuse_alike(verdict, index, text):
    assert not verdict["hostfiles"][len(HOSTS) + index]["ok"]
    with pytest.raises(_job_schema.JobError):
        _job_files.parse_hostfile(text)


# ------------------------------------------------------------- divergences of the two old pipelines
@pytest.mark.parametrize("profile", ["cu117", "cu121", "cu130", "cpu"])
def test_validation_judges_the_rendered_arguments_on_the_role_defaults(profile):
    """Issue 14: on the role defaults with profile cu130, train.sh passed --data-impl,
    --deepspeed, --deepspeed_config, --no-bias-gelu-fusion, --no-masked-softmax-fusion and
    --use-flash-attn-v2, which the validated list lacked, and validation judged an
    --ffn-hidden-size that train.sh did not pass. Now both are one list."""
    job = _job_spec.normalize(dict(spec(), stack_profile=profile))
    judged, dropped = _job_inputs.judged_arguments(job)
    assert judged == _job_args.train_args(job)
    assert "--ffn-hidden-size" not in judged
    for flag in ["--data-impl", "--deepspeed", "--deepspeed_config"] + (
            ["--no-masked-softmax-fusion", "--use-flash-attn-v2"] if profile == "cu130" else []):
        assert flag in judged, flag
    if profile == "cu130":  # the profile's fused ops serve the bias-GeLU fusion path
        assert "--no-bias-gelu-fusion" not in judged
        assert "--no-bias-gelu-fusion" in _job_inputs.judged_arguments(dict(job, fused_ops=False, bias_gelu_fusion=False))[0]


@pytest.mark.parametrize("overrides, present, absent", [
    # --vocab-file / --merge-file / --tokenizer-model only for the tokenizers that read them.
    (dict(tokenizer_type="HFTokenizer", tokenizer_model="gpt2"), ["--tokenizer-model"], ["--vocab-file", "--merge-file"]),
    (dict(tokenizer_type="BertWordPieceCase"), ["--vocab-file"], ["--merge-file", "--tokenizer-model"]),
    # null tensorboard_dir turns TensorBoard off (validation used to put the default path back).
    (dict(tensorboard_dir=None), [], ["--tensorboard-dir"]),
])
def test_judged_and_rendered_arguments_agree(overrides, present, absent):
    job = _job_spec.normalize(dict(spec(**overrides), stack_profile="cu130"))
    judged = _job_inputs.judged_arguments(job)[0]
    assert judged == _job_args.train_args(job)
    for flag in present:
        assert flag in judged
    for flag in absent:
        assert flag not in judged


def test_env_null_leaves_the_variable_out_everywhere():
    """A null in megatron_job_env: validation kept it as "" while .deepspeed_env left it out."""
    job = _job_spec.normalize(dict(spec(env={"KEEP": "1", "DROP": None}), stack_profile="cpu"))
    assert job["env"] == {"KEEP": "1", "DROP": None}
    assert [line for line in _job_files.deepspeed_env_lines(job) if line.startswith(("KEEP", "DROP"))] == ["KEEP=1"]
