# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job-file filters: names, delegation to the job package, and errors as AnsibleFilterError."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.filter.megatron_job import FilterModule
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import sbatch as _job_sbatch
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec

FILTERS = FilterModule().filters()

SPEC = {
    "name": "gpt", "nodes": 2, "gpus_per_node": 2, "workdir": "/w", "megatron_dir": "/m", "venv": "/v",
    "checkpoint_dir": "/c", "tensorboard_dir": None, "cuda_home": None, "launcher": "pdsh", "master_port": 29500,
    "tensor_parallel": 1, "pipeline_parallel": 1, "no_pipeline_parallel": True, "num_layers": 2, "hidden_size": 64,
    "num_attention_heads": 4, "seq_length": 128, "max_position_embeddings": 128, "ffn_hidden_size": None,
    "init_method_std": 0.02, "micro_batch_size": 1, "global_batch_size": 8, "train_iters": 10, "lr": 1e-4,
    "min_lr": 1e-5, "lr_decay_style": "cosine", "lr_warmup_iters": 1, "weight_decay": 0.1, "clip_grad": 1.0,
    "adam_beta1": 0.9, "adam_beta2": 0.95, "precision": "bf16", "fp16_initial_scale_power": 16, "zero_stage": 2,
    "zero_offload_optimizer": "none", "zero_offload_param": "none", "zero_pin_memory": True,
    "zero_overlap_comm": True, "zero_contiguous_gradients": True, "zero_allgather_partitions": True,
    "zero_allgather_bucket_size": 500000000, "zero_reduce_scatter": True, "zero_reduce_bucket_size": 500000000,
    "activation_checkpointing": False, "partition_activations": False, "contiguous_memory_optimization": False,
    "checkpoint_in_cpu": False, "use_flash_attn": False, "masked_softmax_fusion": False, "bias_gelu_fusion": True,
    "bias_dropout_fusion": True, "gradient_accumulation_fusion": False, "log_interval": 1, "eval_interval": 5,
    "eval_iters": 1, "save_interval": 5, "exit_signal_handler": True, "load": True, "data_path": "/d/x_text_document",
    "tokenizer_type": "NullTokenizer", "vocab_size": 1000, "split": "98,1,1", "num_workers": 0,
    "env": {}, "nccl_env": {}, "extra_args": [],
}


@pytest.mark.parametrize(
    "name",
    ["ds_config", "train_args", "train_arg_groups", "train_flags", "launch_args", "deepspeed_env",
     "deepspeed_env_lines", "deepspeed_env_file_supported", "hostfile_lines", "job_summary", "job_spec",
     "sbatch_options", "srun_args", "slurm_launch_summary", "slurm_rank_command"],
)
def test_filter_is_exposed(name):
    assert callable(FILTERS[name])


@pytest.mark.parametrize(
    "name, args, expected",
    [
        ("ds_config", (), _job_args.ds_config(SPEC)),
        ("train_args", ("cpu",), _job_args.train_args(SPEC, "cpu")),
        ("train_flags", ("cpu",), _job_args.train_flags(SPEC, "cpu")),
        ("launch_args", (), ["--hostfile", "/w/hostfile", "--launcher", "pdsh", "--master_port", "29500",
                             "--num_nodes", "2", "--num_gpus", "2"]),
        ("deepspeed_env_lines", ("cpu",), ["DS_ACCELERATOR=cpu", "MAX_JOBS=1",
                                           "PATH=/v/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                                           "PYTHONPATH=/m"]),
        ("job_summary", (), _job_spec.summary(SPEC)),
        ("sbatch_options", ("gpt", "/l/train-%j.log", "train", "", 300, True, [], True, []),
         ["--job-name=gpt", "--partition=train", "--nodes=2", "--ntasks-per-node=2", "--gpus-per-node=2",
          "--exclusive", "--mem=0", "--requeue", "--signal=TERM@300", "--output=/l/train-%j.log",
          "--open-mode=append"]),
        ("srun_args", (), ["--nodes=2", "--ntasks-per-node=2", "--ntasks=4", "--distribution=block",
                           "--kill-on-bad-exit=1", "--export=ALL"]),
        ("slurm_launch_summary", (), {"nodes": 2, "ranks_per_node": 2, "world_size": 4}),
    ],
)
def test_spec_filters_delegate(name, args, expected):
    assert FILTERS[name](SPEC, *args) == expected


@pytest.mark.parametrize(
    "name, value, args, expected",
    [
        ("hostfile_lines", ["n1", "n2"], (2,), ["n1 slots=2", "n2 slots=2"]),
        ("deepspeed_env_file_supported", "cu117", (), False),
        ("deepspeed_env_file_supported", "cu130", (), True),
        ("slurm_rank_command", "/v/bin/python", ("pretrain_gpt.py",),
         _job_sbatch.rank_command("/v/bin/python", "pretrain_gpt.py")),
    ],
)
def test_other_filters(name, value, args, expected):
    assert FILTERS[name](value, *args) == expected


@pytest.mark.parametrize(
    "name, value, args, message",
    [
        ("ds_config", dict(SPEC, global_batch_size=7), (),
         "megatron_ds.cluster.ds_config: job spec: global_batch_size 7 is not divisible"),
        ("train_args", SPEC, ("cu117",),
         "megatron_ds.cluster.train_args: job spec: tokenizer_type NullTokenizer needs --vocab-size, which "
         "Megatron-DeepSpeed before_rebase (stack profile cu117) does not have"),
        ("train_args", SPEC, ("nope",), "megatron_ds.cluster.train_args: megatron_job_stack_profile: unknown stack profile 'nope'"),
        ("deepspeed_env_lines", dict(SPEC, env={"A": "x y"}), ("cu117",), "writes .deepspeed_env values unquoted"),
        ("hostfile_lines", ["n1", "n1"], (8,), "megatron_ds.cluster.hostfile_lines: hostfile: nodes #1 and #2"),
        ("ds_config", "not a spec", (), "megatron_ds.cluster.ds_config: expected the job spec"),
        ("deepspeed_env_file_supported", "cu999", (), "unknown stack profile 'cu999'"),
        ("sbatch_options", SPEC, ("gpt", "/l/train.log"), "megatron_ds.cluster.sbatch_options: slurm output"),
        ("slurm_rank_command", "", ("pretrain_gpt.py",), "megatron_ds.cluster.slurm_rank_command: rank_command"),
        ("job_spec", {"megatron_job_tensor_parallel": "x"}, (),
         "megatron_ds.cluster.job_spec: megatron_job_tensor_parallel: found 'x', expected an integer"),
    ],
)
def test_filter_errors(name, value, args, message):
    with pytest.raises(AnsibleFilterError) as caught:
        FILTERS[name](value, *args)
    assert message in str(caught.value)


def test_job_spec_reads_the_role_variables():
    """The role's __megatron_job_spec: megatron_job_* variables through the one reader
    (_job_spec.normalize), the per-host address left out, auto resolved for the profile."""
    job = FILTERS["job_spec"]({"megatron_job_tensor_parallel": "2", "megatron_job_node_address": "10.0.0.1",
                               "megatron_job_stack_profile": "cu130"}, nodes=3)
    assert (job["tensor_parallel"], job["nodes"], job["use_flash_attn"], job["bias_gelu_fusion"]) == (2, 3, True, True)
    assert job["fused_ops"] is True  # cu130 opts in; its compiled bias-GeLU serves the fusion path
    assert "node_address" not in job and job["workdir"] == "/opt/megatron/jobs/gpt"
    assert FILTERS["job_spec"](job) == job  # idempotent: every builder normalizes again
