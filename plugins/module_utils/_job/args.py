# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one builder of what a job runs: the ``pretrain_gpt.py`` argument list, the DeepSpeed
config dict and the deepspeed launcher arguments.

train.sh renders ``train_arg_groups`` and ``launch_args`` (through the megatron_job filters),
ds_config.json renders ``ds_config``, and validate_job judges ``arguments`` of the same spec:
the list the validator checks is the list train.sh passes, by construction
(tests/unit/test_job_property.py reads rendered files back to prove it).

``arguments`` is tolerant: it builds the list for any normalized spec and returns, beside it,
the flags the Megatron-DeepSpeed era cannot take, so the rules can report them. The
rendering entry points (``train_arg_groups``, ``ds_config``, ``launch_args``) first refuse,
with ``JobError``, a spec whose files would stop DeepSpeed or Megatron at start-up.

Batch sizes, the ZeRO stage and the activation-checkpointing switches go into both the JSON
and the command line from the same spec value, so DeepSpeed's batch assertion
(train_batch_size == micro x grad_acc x DP) and Megatron's own checks see the same numbers.
Flag spellings follow Megatron-DeepSpeed's argparse table (_mds_args; allow_abbrev=False: a
wrong spelling is a hard error at start-up).

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from .._mds import args as _mds_args
from .memory import version_lt
from .._stack import profiles as _stack_profiles
from .schema import JobError
from .spec import derive, normalize

ProfileArg = Union[None, str, Mapping[str, Any]]

# spec key -> (flag, kind), in the order train.sh passes them. kind "value": the flag takes the
# spec's value; "true": the flag is present when the spec value is true; "false": present when
# the spec value is false (Megatron's --no-* store_false flags). The builder below, the train.sh
# reader (_job_script) and the rules (_job_rules) read this one table.
SPEC_ARGS: Tuple[Tuple[str, str, str], ...] = (
    # Parallelism
    ("tensor_parallel", "--tensor-model-parallel-size", "value"),
    ("pipeline_parallel", "--pipeline-model-parallel-size", "value"),
    ("no_pipeline_parallel", "--no-pipeline-parallel", "true"),
    ("sequence_parallel", "--sequence-parallel", "true"),
    ("ds_sequence_parallel_size", "--ds-sequence-parallel-size", "value"),
    # Model
    ("num_layers", "--num-layers", "value"),
    ("hidden_size", "--hidden-size", "value"),
    ("ffn_hidden_size", "--ffn-hidden-size", "value"),
    ("num_attention_heads", "--num-attention-heads", "value"),
    ("num_key_value_heads", "--num-key-value-heads", "value"),
    ("seq_length", "--seq-length", "value"),
    ("max_position_embeddings", "--max-position-embeddings", "value"),
    ("init_method_std", "--init-method-std", "value"),
    # Batch: the same numbers as ds_config.json's train_micro_batch_size_per_gpu/train_batch_size
    ("micro_batch_size", "--micro-batch-size", "value"),
    ("global_batch_size", "--global-batch-size", "value"),
    # Optimisation (Megatron's optimizer, handed to deepspeed.initialize)
    ("train_iters", "--train-iters", "value"),
    ("lr", "--lr", "value"),
    ("min_lr", "--min-lr", "value"),
    ("lr_decay_style", "--lr-decay-style", "value"),
    ("lr_warmup_iters", "--lr-warmup-iters", "value"),
    ("weight_decay", "--weight-decay", "value"),
    ("clip_grad", "--clip-grad", "value"),
    ("adam_beta1", "--adam-beta1", "value"),
    ("adam_beta2", "--adam-beta2", "value"),
    # DeepSpeed (--cpu-optimizer, the precision flag, --deepspeed and its config go before)
    ("zero_stage", "--zero-stage", "value"),
    ("activation_checkpointing", "--checkpoint-activations", "true"),
    ("partition_activations", "--partition-activations", "true"),
    ("contiguous_memory_optimization", "--contigious-checkpointing", "true"),  # sic: Megatron's spelling
    ("checkpoint_in_cpu", "--checkpoint-in-cpu", "true"),
    # Data (--data-impl mmap follows --data-path)
    ("data_path", "--data-path", "value"),
    ("split", "--split", "value"),
    ("num_workers", "--num-workers", "value"),
    ("tokenizer_type", "--tokenizer-type", "value"),
    ("vocab_file", "--vocab-file", "value"),
    ("merge_file", "--merge-file", "value"),
    ("vocab_size", "--vocab-size", "value"),
    ("tokenizer_model", "--tokenizer-model", "value"),
    # Fast paths
    ("use_flash_attn", "--use-flash-attn-v2", "true"),
    ("masked_softmax_fusion", "--no-masked-softmax-fusion", "false"),
    ("bias_gelu_fusion", "--no-bias-gelu-fusion", "false"),
    ("bias_dropout_fusion", "--no-bias-dropout-fusion", "false"),
    ("gradient_accumulation_fusion", "--no-gradient-accumulation-fusion", "false"),
    # Logging, evaluation, checkpoints (--save and --load from checkpoint_dir and load)
    ("log_interval", "--log-interval", "value"),
    ("eval_interval", "--eval-interval", "value"),
    ("eval_iters", "--eval-iters", "value"),
    ("save_interval", "--save-interval", "value"),
    ("tensorboard_dir", "--tensorboard-dir", "value"),
    ("exit_signal_handler", "--exit-signal-handler", "true"),
)
SPEC_FLAG_KEYS: Dict[str, str] = {flag: key for key, flag, kind in SPEC_ARGS}
# megatron_job_model_preset: the switches each preset passes after --init-method-std. Each flag
# is Megatron-DeepSpeed HEAD's (4efb479d megatron/arguments.py): --normalization {layernorm,
# rmsnorm}, --swiglu (which also sets the FFN default to int(8h/3 / 64) x 64),
# --use-rotary-position-embeddings (which turns add_position_embedding off; the explicit
# --no-position-embedding says so in train.sh), --disable-bias-linear (dest add_bias_linear,
# which also turns bias_gelu_fusion off), --untie-embeddings-and-output-weights,
# --attention-dropout and --hidden-dropout (default 0.1).
PRESET_ARGS: Dict[str, Tuple[Tuple[str, ...], ...]] = {
    "gpt": (),
    "llama": (
        ("--normalization", "rmsnorm"),
        ("--swiglu",),
        ("--use-rotary-position-embeddings",),
        ("--no-position-embedding",),
        ("--disable-bias-linear",),
        ("--untie-embeddings-and-output-weights",),
        ("--attention-dropout", "0"),
        ("--hidden-dropout", "0"),
    ),
}
PRECISION_FLAGS = {"--bf16": "bf16", "--fp16": "fp16"}
# Settings that DeepSpeed applies only through deepspeed.checkpointing.configure(), which
# Megatron-DeepSpeed calls only with --deepspeed-activation-checkpointing (initialize.py:266).
DS_CHECKPOINTING_KEYS = ("partition_activations", "contiguous_memory_optimization", "checkpoint_in_cpu")

TOKENIZERS_WITH_VOCAB_FILE = ("GPT2BPETokenizer", "BertWordPieceLowerCase", "BertWordPieceCase")
TOKENIZERS_WITH_MODEL = ("SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HFTokenizer")

# Settings the job files refuse to render on a Megatron-DeepSpeed without the flag (the user
# asked for a feature the stack lacks), with the way out; the others (--exit-signal-handler)
# are left out with a warning.
DROPPED_IS_ERROR: Dict[str, Tuple[str, str]] = {
    "--sequence-parallel": ("sequence_parallel", "set megatron_job_sequence_parallel: false"),
    "--ds-sequence-parallel-size": ("ds_sequence_parallel_size",
                                    "set megatron_job_ds_sequence_parallel_size: 1, or a stack profile with Megatron-DeepSpeed HEAD"),
    "--use-flash-attn-v2": ("use_flash_attn", "set megatron_job_use_flash_attn: auto (or false)"),
    "--vocab-size": ("tokenizer_type NullTokenizer", "use GPT2BPETokenizer"),
    "--swiglu": ("model_preset llama", "set megatron_job_model_preset: gpt, or a stack profile with Megatron-DeepSpeed HEAD"),
    "--num-key-value-heads": ("num_key_value_heads", "set megatron_job_num_key_value_heads: null"),
    "--tokenizer-model": ("tokenizer_type {tokenizer_type}", "use GPT2BPETokenizer"),
}

# Launchers whose DeepSpeed runner rejects --num_nodes/--num_gpus ("backend does not support
# limiting num nodes/gpus", DS multinode_runner.py validate_args): the hostfile alone sizes them.
LAUNCHERS_WITHOUT_NUM_ARGS = ("openmpi",)


def _prepare(spec: Mapping[str, Any], profile: ProfileArg) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The normalized spec and its stack profile; ``profile`` (a name or a profile dict), when
    given, replaces the spec's stack_profile."""
    raw = dict(spec)
    if profile is not None:
        raw["stack_profile"] = profile.get("name") if isinstance(profile, Mapping) else profile
    job = normalize(raw)
    return job, _stack_profiles.get(job["stack_profile"])


def _num(value: Any) -> str:
    """A number as argparse reads it back unchanged (6e-05, 0.1, 8)."""
    return repr(value) if isinstance(value, float) else str(value)


def _wanted(spec: Mapping[str, Any], key: str, kind: str) -> bool:
    value = spec.get(key)
    if kind == "true":
        return bool(value)
    if kind == "false":
        return value is False
    if value is None or value == "":
        return False
    if key == "ds_sequence_parallel_size":
        return int(value) > 1  # 1 is upstream's default, and the cu117 era has no such flag
    tokenizer = spec.get("tokenizer_type")
    if key == "vocab_file":
        return tokenizer in TOKENIZERS_WITH_VOCAB_FILE
    if key == "merge_file":
        return tokenizer == "GPT2BPETokenizer"
    if key == "vocab_size":
        return tokenizer == "NullTokenizer"
    if key == "tokenizer_model":
        return tokenizer in TOKENIZERS_WITH_MODEL
    return True


def arguments(spec: Mapping[str, Any], profile: ProfileArg = None,
              era: Optional[str] = None) -> Tuple[List[List[str]], List[Tuple[str, str]]]:
    """The pretrain_gpt.py arguments of ``spec``, one group (a flag and its values) per entry,
    and ``dropped``: (flag, reason) for the settings the Megatron-DeepSpeed ``era`` (default:
    the stack profile's) has no flag for; they are left out rather than crash argparse
    (before_rebase has no --exit-signal-handler, --use-flash-attn-v2, --sequence-parallel,
    --vocab-size, --tokenizer-model; its missing gradient-accumulation fusion needs no switch).

    Besides SPEC_ARGS: --cpu-optimizer when the optimizer is offloaded (ZeRO-Offload refuses a
    client optimizer that is not DeepSpeedCPUAdam, engine.py _configure_optimizer), --bf16 or
    --fp16 (ds_config.json's bf16/fp16 blocks follow the same value), --deepspeed
    --deepspeed_config <workdir>/ds_config.json, --deepspeed-activation-checkpointing when a
    DeepSpeed-only checkpointing setting is on (it is what applies them), --data-impl mmap,
    --save/--load from checkpoint_dir and load, the flags the stack profile forces (cu130:
    --no-masked-softmax-fusion), then extra_args. Never raises for a spec that normalizes.
    """
    job, prof = _prepare(spec, profile)
    era = era or _stack_profiles.mds_era(prof)
    table = _mds_args.args_for(era)
    groups: List[List[str]] = []
    dropped: List[Tuple[str, str]] = []

    def add(flag: str, *values: Any) -> None:
        if flag in table:
            groups.append([flag] + [str(v) for v in values])
        else:
            dropped.append((flag, "Megatron-DeepSpeed %s has no %s" % (era, flag)))

    for key, flag, kind in SPEC_ARGS:
        if key == "zero_stage":
            if job["zero_offload_optimizer"] != "none":
                add("--cpu-optimizer")
            if job["precision"] != "fp32":
                add("--" + job["precision"])
            add("--deepspeed")
            add("--deepspeed_config", ds_config_path(job))
        elif key == "data_path":
            add(flag, *job["data_path"].split())
            add("--data-impl", "mmap")
            continue
        elif key == "save_interval" and job["checkpoint_dir"]:
            add("--save", job["checkpoint_dir"])
        elif key == "tensorboard_dir" and job["checkpoint_dir"] and job["load"]:
            add("--load", job["checkpoint_dir"])
        if key == "gradient_accumulation_fusion" and flag not in table:
            continue  # that Megatron-DeepSpeed has no such fusion, so nothing to turn off
        if _wanted(job, key, kind):
            add(flag, *([_num(job[key])] if kind == "value" else []))
        if key == "init_method_std":
            for group in PRESET_ARGS[job["model_preset"]]:
                add(*group)
        # Always with --checkpoint-activations: without it, or a --recompute-method, Megatron-
        # DeepSpeed HEAD's ParallelTransformer._checkpointed_forward takes Megatron's own path with
        # recompute_method None and stops at the first forward ("Invalid activation recompute
        # method.", megatron/model/transformer.py); measured on H200, docs/benchmarks.md.
        if key == "activation_checkpointing" and job[key]:
            add("--deepspeed-activation-checkpointing")
    present = set(group[0] for group in groups)
    for flag in prof.get("megatron_flags") or []:
        if flag not in present:
            add(flag)
            present.add(flag)
    groups.extend([item] for item in job["extra_args"])
    return groups, dropped


def refusals(spec: Mapping[str, Any], profile: ProfileArg = None, command_line: bool = True) -> List[str]:
    """Why the job files of ``spec`` cannot be rendered, each reason naming the variable to
    change: a shape that does not divide, ZeRO with the pipeline engine, offload without the
    stage it needs, DeepSpeed checkpointing settings without checkpointing and, for the
    command line (``command_line``), a tokenizer without its files or a feature the profile's
    Megatron-DeepSpeed lacks. Empty: renderable."""
    job, prof = _prepare(spec, profile)
    reasons: List[str] = []
    try:
        derive(job, strict=True)
    except JobError as exc:
        reasons.append("job spec: %s" % exc)
    stage, pp, no_pipe = job["zero_stage"], job["pipeline_parallel"], job["no_pipeline_parallel"]
    if no_pipe and pp != 1:
        reasons.append(
            "job spec: no_pipeline_parallel is true but pipeline_parallel is %d; Megatron asserts PP == 1 "
            "with --no-pipeline-parallel. Set megatron_job_pipeline_parallel: 1 or "
            "megatron_job_no_pipeline_parallel: false" % pp)
    if stage >= 2 and not no_pipe:
        reasons.append(
            "job spec: zero_stage %d needs no_pipeline_parallel: true (DeepSpeed: 'ZeRO-2 and ZeRO-3 are "
            "incompatible with pipeline parallelism', and Megatron wraps the model in a PipelineModule unless "
            "--no-pipeline-parallel). Set megatron_job_no_pipeline_parallel: true with pipeline_parallel 1, "
            "or megatron_job_zero_stage: 1" % stage)
    if job["zero_offload_optimizer"] != "none" and stage < 1:
        reasons.append(
            "job spec: zero_offload_optimizer %s needs zero_stage >= 1 (found 0); set megatron_job_zero_stage "
            "or megatron_job_zero_offload_optimizer: none" % job["zero_offload_optimizer"])
    if job["zero_offload_param"] != "none" and stage != 3:
        reasons.append(
            "job spec: zero_offload_param %s needs zero_stage 3 (found %d); set megatron_job_zero_stage: 3 "
            "or megatron_job_zero_offload_param: none" % (job["zero_offload_param"], stage))
    wanted = [key for key in DS_CHECKPOINTING_KEYS if job[key]]
    if wanted and not job["activation_checkpointing"]:
        reasons.append(
            "job spec: %s need activation_checkpointing: true (found false); set "
            "megatron_job_activation_checkpointing: true or turn them off" % ", ".join(wanted))
    if not command_line:
        return reasons
    tokenizer = job["tokenizer_type"]
    needs = [("vocab_file", TOKENIZERS_WITH_VOCAB_FILE), ("merge_file", ("GPT2BPETokenizer",)),
             ("vocab_size", ("NullTokenizer",)), ("tokenizer_model", TOKENIZERS_WITH_MODEL)]
    for key, tokenizers in needs:
        if tokenizer in tokenizers and job[key] is None:
            reasons.append("job spec: tokenizer_type %s needs %s; set megatron_job_%s" % (tokenizer, key, key))
    for flag, reason in arguments(job, prof)[1]:
        if flag in DROPPED_IS_ERROR:
            what, fix = DROPPED_IS_ERROR[flag]
            reasons.append(
                "job spec: %s needs %s, which Megatron-DeepSpeed %s (stack profile %s) does not have; %s, or "
                "pick a stack profile with Megatron-DeepSpeed HEAD"
                % (what.format(**job), flag, prof["megatron_deepspeed"]["ref"], prof["name"], fix))
    return reasons


def _refuse(spec: Mapping[str, Any], profile: ProfileArg = None, command_line: bool = True) -> None:
    reasons = refusals(spec, profile, command_line)
    if reasons:
        raise JobError("; ".join(reasons))


def train_arg_groups(spec: Mapping[str, Any], profile: ProfileArg = None) -> List[List[str]]:
    """``arguments`` of a spec that renders (``refusals`` raised as JobError): what train.sh
    passes to pretrain_gpt.py, one group (a flag and its values) per line."""
    _refuse(spec, profile)
    return arguments(spec, profile)[0]


def train_args(spec: Mapping[str, Any], profile: ProfileArg = None) -> List[str]:
    """``train_arg_groups`` flattened: the argv tail of pretrain_gpt.py."""
    return [token for group in train_arg_groups(spec, profile) for token in group]


def train_flags(spec: Mapping[str, Any], profile: ProfileArg = None) -> List[str]:
    """Every ``--flag`` of the pretrain_gpt.py command line, in order (values left out)."""
    return [token for token in train_args(spec, profile) if token.startswith("--")]


# DeepSpeed before 0.11.2 gives the pipeline engine (PipelineEngine, used unless
# --no-pipeline-parallel) bf16 code paths that only its BF16 optimizer has: _exec_reduce_grads
# calls optimizer.get_grads_for_reduction() and backward calls optimizer.clear_lp_grads()
# whenever bf16 is on (v0.9.2 runtime/pipe/engine.py:242-257, 725-727). Under ZeRO-1 the engine
# picks that optimizer only when gradients accumulate in fp32, and get_data_types keeps them in
# bf16 under ZeRO unless data_types.grad_accum_dtype says fp32 (v0.9.2 runtime/engine.py:825-840,
# 1106-1108), so the first step stops with an AttributeError of DeepSpeedZeroOptimizer. 0.11.2
# tests the optimizer's type instead (using_bf16_optimizer, pipe/engine.py:79-80 and 266-271 at
# v0.11.2; DeepSpeed PR #4516), and the ZeRO optimizer takes the ordinary all-reduce path.
BF16_PIPE_ZERO_OPTIMIZER_SINCE = "0.11.2"


def needs_fp32_grad_accum(zero_stage: Any, bf16: bool, pipeline_engine: bool, deepspeed_version: Optional[str]) -> bool:
    """Whether this DeepSpeed needs ``data_types.grad_accum_dtype: fp32`` to run bf16 ZeRO-1 under
    the pipeline engine (see BF16_PIPE_ZERO_OPTIMIZER_SINCE). An unknown version counts as newer:
    the key then changes which optimizer DeepSpeed picks, so it is only written where needed."""
    if not (bf16 and pipeline_engine and str(zero_stage) == "1"):
        return False
    return version_lt(deepspeed_version, BF16_PIPE_ZERO_OPTIMIZER_SINCE)


# Without ZeRO, DeepSpeed's engine wraps a half-precision model's optimizer by
# _do_optimizer_sanity_check (runtime/engine.py): fp16 gets FP16 in every release; bf16 with
# gradients accumulated in bf16 gets BFLOAT16 under the pipeline engine and otherwise DDP_BFLOAT16
# (0.17.6 and later; earlier it was refused), with fp32 accumulation BFLOAT16. Until 0.17.5,
# bf16 without ZeRO accumulated in fp32 by default (get_data_types, v0.17.5 engine.py:1092-1096);
# 0.17.6 (PR #7515, "Enable non-ZeRO mode") accumulates in the model's dtype, and 0.18.5
# (PR #7790) removed the fp32 path without ZeRO ("unsupported mix", v0.19.5 engine.py:1976-1977).
# FP16 and DDP_BFLOAT16 both build FP16_Optimizer, whose __init__ takes one Adam step on zero
# gradients (runtime/fp16/fused_optimizer.py:121-133 at v0.19.5): the job's first real update
# is Adam's second, 0.74 of the first (docs/upstream-facts.md D7, bench/zero0_parity.py).
BF16_ZERO0_ACCUMULATES_IN_BF16_SINCE = "0.17.6"
BF16_ZERO0_FP32_ACCUMULATION_REFUSED_SINCE = "0.18.5"
LATE_ADAM_WRAPPERS = ("FP16", "DDP_BFLOAT16")


def zero0_optimizer(precision: str, pipeline_engine: bool, deepspeed_version: Optional[str],
                    grad_accum_dtype: Optional[str] = None) -> str:
    """The wrapper DeepSpeed puts on the optimizer of a job without ZeRO: "FP16" or "DDP_BFLOAT16"
    (FP16_Optimizer, see LATE_ADAM_WRAPPERS), "BFLOAT16" (BF16_Optimizer), "refused" (DeepSpeed
    raises NotImplementedError at deepspeed.initialize), or "" (fp32: none). ``grad_accum_dtype``:
    ds_config's data_types.grad_accum_dtype (None: DeepSpeed's default). An unknown version
    counts as the newest."""
    model = {"bf16": "bf16", "fp16": "fp16"}.get(str(precision).lower(), "fp32")
    if model == "fp32":
        return ""
    bf16_default_new = not version_lt(deepspeed_version, BF16_ZERO0_ACCUMULATES_IN_BF16_SINCE)
    accum = {"fp32": "fp32", "float32": "fp32", "bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16",
             "float16": "fp16"}.get(str(grad_accum_dtype).lower()) if grad_accum_dtype else None
    if accum is None:
        accum = "fp32" if model == "bf16" and not bf16_default_new else model
    if model == "fp16":
        return "FP16" if accum == "fp16" else "refused"
    if accum == "bf16":
        if pipeline_engine:
            return "BFLOAT16"
        return "DDP_BFLOAT16" if bf16_default_new else "refused"
    if accum == "fp32" and version_lt(deepspeed_version, BF16_ZERO0_FP32_ACCUMULATION_REFUSED_SINCE):
        return "BFLOAT16"
    return "refused"


def ds_config_path(spec: Mapping[str, Any]) -> str:
    return str(spec["workdir"]).rstrip("/") + "/ds_config.json"


def hostfile_path(spec: Mapping[str, Any]) -> str:
    return str(spec["workdir"]).rstrip("/") + "/hostfile"


def ds_config(spec: Mapping[str, Any], profile: ProfileArg = None) -> Dict[str, Any]:
    """The DeepSpeed config dict of ``spec`` (ds_config.json).

    There is deliberately no ``optimizer`` (nor ``scheduler``) block, unlike the guide's
    example: Megatron-DeepSpeed builds its own optimizer and LR scheduler from --lr, --min-lr,
    --weight-decay, --adam-beta1/2, --lr-decay-style (get_megatron_optimizer,
    get_optimizer_param_scheduler) and passes both to deepspeed.initialize(optimizer=...,
    lr_scheduler=...). A JSON optimizer would be a second, conflicting source for the same
    settings (the guide's AdamW block also disagreed with its own --weight-decay).
    """
    _refuse(spec, profile, command_line=False)
    job, prof = _prepare(spec, profile)
    d = derive(job, strict=True)
    zero: Dict[str, Any] = {"stage": job["zero_stage"]}
    for part in ("offload_optimizer", "offload_param"):
        if job["zero_" + part] != "none":
            zero[part] = {"device": job["zero_" + part], "pin_memory": job["zero_pin_memory"]}
    for key in ("overlap_comm", "contiguous_gradients", "allgather_partitions", "allgather_bucket_size",
                "reduce_scatter", "reduce_bucket_size"):
        zero[key] = job["zero_" + key]
    config: Dict[str, Any] = {}
    # Any two of the three batch values would do; writing all three makes DeepSpeed check them
    # against the data-parallel size Megatron hands it (config.py _batch_assertion).
    config["train_batch_size"] = d["global_batch_size"]
    config["train_micro_batch_size_per_gpu"] = d["micro_batch_size"]
    config["gradient_accumulation_steps"] = d["gradient_accumulation_steps"]
    config["steps_per_print"] = job["log_interval"]
    config["gradient_clipping"] = job["clip_grad"]
    config["zero_optimization"] = zero
    config["bf16"] = {"enabled": job["precision"] == "bf16"}
    fp16: Dict[str, Any] = {"enabled": job["precision"] == "fp16"}
    if job["precision"] == "fp16":
        # loss_scale 0 selects dynamic loss scaling, starting at 2**initial_scale_power.
        fp16.update(loss_scale=0, initial_scale_power=job["fp16_initial_scale_power"],
                    loss_scale_window=1000, hysteresis=2, min_loss_scale=1)
    config["fp16"] = fp16
    if needs_fp32_grad_accum(job["zero_stage"], job["precision"] == "bf16", not job["no_pipeline_parallel"],
                             _stack_profiles.deepspeed_pin(prof)):
        # Selects DeepSpeed's BF16 optimizer, the one its pipeline engine expects under bf16
        # before 0.11.2 (BF16_PIPE_ZERO_OPTIMIZER_SINCE); master weights and gradients in fp32.
        config["data_types"] = {"grad_accum_dtype": "fp32"}
    if job["activation_checkpointing"]:
        config["activation_checkpointing"] = {
            "partition_activations": job["partition_activations"],
            "contiguous_memory_optimization": job["contiguous_memory_optimization"],
            "cpu_checkpointing": job["checkpoint_in_cpu"],
        }
    config["wall_clock_breakdown"] = False
    return config


def launch_args(spec: Mapping[str, Any]) -> List[str]:
    """The deepspeed launcher arguments that precede the user script (train.sh, burnin.sh)."""
    job = normalize(spec)
    d = derive(job, strict=True)
    if d["nodes"] == 1:
        # With any hostfile DeepSpeed's runner goes multi-node and ssh-checks the first host
        # (runner.py: `ssh <host> hostname`), which fails on a node with no sshd. One node
        # launches locally: no hostfile, no launcher, master 127.0.0.1.
        return ["--master_port", str(job["master_port"]), "--num_gpus", str(d["gpus_per_node"])]
    args = ["--hostfile", hostfile_path(job), "--launcher", job["launcher"], "--master_port", str(job["master_port"])]
    if job["master_addr"] is not None:
        args += ["--master_addr", job["master_addr"]]
    if job["launcher"] not in LAUNCHERS_WITHOUT_NUM_ARGS:
        args += ["--num_nodes", str(d["nodes"]), "--num_gpus", str(d["gpus_per_node"])]
    return args


def flatten(groups: Sequence[Sequence[str]]) -> List[str]:
    return [token for group in groups for token in group]
