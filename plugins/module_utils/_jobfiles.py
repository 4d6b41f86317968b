# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job files, computed from one job spec so they agree by construction.

A *job spec* is the ``megatron_job_*`` variables of roles/megatron_job/defaults/main.yml with
the prefix stripped, plus ``nodes`` (the number of hosts in group ``megatron_nodes``). From it
this module builds:

* the DeepSpeed config dict (``ds_config``) written as ds_config.json,
* the ``pretrain_gpt.py`` argument list (``train_arg_groups`` / ``train_args``) for train.sh,
* the deepspeed launcher arguments (``launch_args``),
* the ``.deepspeed_env`` lines (``deepspeed_env_lines``),
* the hostfile lines (``hostfile_lines``) and a parser with DeepSpeed's rules
  (``parse_hostfile``).

Batch sizes, the ZeRO stage and the activation-checkpointing switches are written into both the
JSON and the command line from the same spec value, so DeepSpeed's batch assertion
(train_batch_size == micro x grad_acc x DP) and Megatron's own checks always see the same
numbers. Flag spellings follow Megatron-DeepSpeed's argparse table (allow_abbrev=False: a
wrong spelling is a hard error at start-up), see shared FACTS.md section A.

Pure Python: no Ansible imports, so it is unit-tested without a host.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence, Union

from ansible_collections.megatron_ds.cluster.plugins.module_utils import _mds_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils import _stack_profiles
from ansible_collections.megatron_ds.cluster.plugins.module_utils import _versions

PRECISIONS = ("bf16", "fp16", "fp32")
LAUNCHERS = ("pdsh", "openmpi", "slurm")
OFFLOAD_DEVICES = ("none", "cpu")
# Launchers whose DeepSpeed runner rejects --num_nodes/--num_gpus ("backend does not support
# limiting num nodes/gpus", DS multinode_runner.py validate_args): the hostfile alone sizes them.
LAUNCHERS_WITHOUT_NUM_ARGS = ("openmpi",)

# DeepSpeed's pdsh runner puts .deepspeed_env values into `export K=V;` on the remote shell.
# DS 0.15.2 (PR #5878) began wrapping every value in double quotes, DS 0.16.5 (PR #7071) only
# values with characters outside this class. Before 0.15.2 (0.9.2 included) values go in raw.
DS_ENV_SAFE_VALUE = re.compile(r"^[\w@%+=:,./-]*$")
DS_ENV_QUOTING_SINCE = "0.15.2"
# Inside the double quotes the remote shell still expands these, so they are never written.
_DS_ENV_SHELL_ACTIVE = re.compile(r'["`$\\\n\r\x00]')
_ENV_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# DS_ENV_FILE (an absolute .deepspeed_env path) is honoured from DS 0.10.1 (PR #4006). Older
# DeepSpeed reads only ~/.deepspeed_env and ./.deepspeed_env (the launcher's cwd).
DS_ENV_FILE_SINCE = "0.10.1"

_TOKENIZERS_WITH_VOCAB_FILE = ("GPT2BPETokenizer", "BertWordPieceLowerCase", "BertWordPieceCase")
_TOKENIZERS_WITH_MODEL = ("SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HFTokenizer")

# A hostfile line as DeepSpeed's launcher reads it (runner.py _parse_hostfile).
_HOSTFILE_LINE = re.compile(r"^(\S+)\s+slots=(\d+)")
# pdsh takes the hosts as `-w a,b,c` and DeepSpeed's include/exclude syntax uses @ and :, so a
# name with one of these characters cannot be launched even though the hostfile parses.
_BAD_HOST_CHARS = re.compile(r"[\s,@:#]")

ProfileArg = Union[None, str, Mapping[str, Any]]


class JobFilesError(ValueError):
    """The job spec cannot be rendered; the message says which variable to change."""


# --------------------------------------------------------------------------------------------
# Spec access
# --------------------------------------------------------------------------------------------
def _var(key: str) -> str:
    return "megatron_job_" + key


def _get(spec: Mapping[str, Any], key: str) -> Any:
    if key not in spec:
        raise JobFilesError(
            "job spec: %s is missing; set %s (see roles/megatron_job/defaults/main.yml)"
            % (key, _var(key))
        )
    return spec[key]


def _int(spec: Mapping[str, Any], key: str, minimum: int = 1) -> int:
    value = _get(spec, key)
    number: Optional[int] = None
    if not isinstance(value, bool):
        try:
            as_float = float(str(value).strip())
            # 5e8 (YAML float) and "8" (extra-vars string) are whole numbers too.
            if as_float.is_integer():
                number = int(as_float)
        except (TypeError, ValueError):
            number = None
    if number is None or number < minimum:
        raise JobFilesError(
            "job spec: %s is %r, expected an integer >= %d; set %s" % (key, value, minimum, _var(key))
        )
    return number


def _float(spec: Mapping[str, Any], key: str) -> float:
    value = _get(spec, key)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise JobFilesError(
            "job spec: %s is %r, expected a number; set %s" % (key, value, _var(key))
        ) from None


def _bool(spec: Mapping[str, Any], key: str, default: Optional[bool] = None) -> bool:
    if key not in spec and default is not None:
        return default
    value = _get(spec, key)
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    raise JobFilesError("job spec: %s is %r, expected true or false; set %s" % (key, value, _var(key)))


def _choice(spec: Mapping[str, Any], key: str, choices: Sequence[str]) -> str:
    value = str(_get(spec, key)).strip().lower()
    if value not in choices:
        raise JobFilesError(
            "job spec: %s is %r, expected one of %s; set %s"
            % (key, spec[key], ", ".join(choices), _var(key))
        )
    return value


def _optional(spec: Mapping[str, Any], key: str) -> Any:
    value = spec.get(key)
    if value is None or (isinstance(value, str) and value.strip() in ("", "None", "null")):
        return None
    return value


def _num(value: float) -> str:
    """A float as argparse reads it back unchanged (6e-05, 0.1, 1.0)."""
    return repr(float(value))


def _profile(profile: ProfileArg) -> Dict[str, Any]:
    if isinstance(profile, Mapping):
        return dict(profile)
    return _stack_profiles.get(profile)


def _pinned_deepspeed(profile: Mapping[str, Any]) -> Optional[str]:
    """The DeepSpeed version a profile installs ('deepspeed==0.9.2' -> '0.9.2'), else None."""
    pip = str((profile.get("deepspeed") or {}).get("pip") or "")
    sep, version = pip.partition("==")[1:]
    return version.strip() if sep and version.strip() else None


def _deepspeed_at_least(profile: Mapping[str, Any], version: str) -> bool:
    """True only when the profile pins a DeepSpeed >= ``version``; unknown counts as older."""
    pinned = _pinned_deepspeed(profile)
    return pinned is not None and _versions.compare(pinned, version) >= 0


def _mds_ref(profile: Mapping[str, Any]) -> str:
    return str((profile.get("megatron_deepspeed") or {}).get("ref") or "main")


def _mds_era(profile: Mapping[str, Any]) -> str:
    """The flag table (_mds_args era) of the Megatron-DeepSpeed checkout the profile installs."""
    return _mds_args.BEFORE_REBASE if _mds_ref(profile) == "before_rebase" else _mds_args.HEAD


# --------------------------------------------------------------------------------------------
# Derived numbers
# --------------------------------------------------------------------------------------------
def _derive(spec: Mapping[str, Any]) -> Dict[str, int]:
    """world, dp and grad_acc of ``spec``, refusing shapes DeepSpeed or Megatron would refuse.

    This must agree with ``_jobspec.derive`` (the controller-side validation): world =
    nodes x gpus_per_node, dp = world / (tp x pp), grad_acc = global / (micro x dp).
    """
    nodes = _int(spec, "nodes")
    gpus = _int(spec, "gpus_per_node")
    tp = _int(spec, "tensor_parallel")
    pp = _int(spec, "pipeline_parallel")
    micro = _int(spec, "micro_batch_size")
    global_batch = _int(spec, "global_batch_size")
    world = nodes * gpus
    if world % (tp * pp):
        raise JobFilesError(
            "job spec: %d GPUs (%d nodes x %d) cannot be split into tensor_parallel %d x "
            "pipeline_parallel %d; make megatron_job_tensor_parallel x "
            "megatron_job_pipeline_parallel divide %d" % (world, nodes, gpus, tp, pp, world)
        )
    dp = world // (tp * pp)
    if global_batch % (micro * dp):
        raise JobFilesError(
            "job spec: global_batch_size %d is not divisible by micro_batch_size %d x data "
            "parallel %d (= %d GPUs / (TP %d x PP %d)); set megatron_job_global_batch_size to a "
            "multiple of %d" % (global_batch, micro, dp, world, tp, pp, micro * dp)
        )
    return {
        "nodes": nodes,
        "gpus_per_node": gpus,
        "world": world,
        "tp": tp,
        "pp": pp,
        "dp": dp,
        "micro": micro,
        "global": global_batch,
        "grad_acc": global_batch // (micro * dp),
    }


def _zero(spec: Mapping[str, Any]) -> Dict[str, Any]:
    stage = _int(spec, "zero_stage", minimum=0)
    if stage > 3:
        raise JobFilesError("job spec: zero_stage is %d, expected 0, 1, 2 or 3; set megatron_job_zero_stage" % stage)
    pp = _int(spec, "pipeline_parallel")
    no_pipe = _bool(spec, "no_pipeline_parallel")
    if no_pipe and pp != 1:
        raise JobFilesError(
            "job spec: no_pipeline_parallel is true but pipeline_parallel is %d; Megatron "
            "asserts PP == 1 with --no-pipeline-parallel. Set megatron_job_pipeline_parallel: 1 "
            "or megatron_job_no_pipeline_parallel: false" % pp
        )
    if stage >= 2 and not no_pipe:
        raise JobFilesError(
            "job spec: zero_stage %d needs no_pipeline_parallel: true (DeepSpeed: 'ZeRO-2 and "
            "ZeRO-3 are incompatible with pipeline parallelism', and Megatron wraps the model "
            "in a PipelineModule unless --no-pipeline-parallel). Set "
            "megatron_job_no_pipeline_parallel: true with pipeline_parallel 1, or "
            "megatron_job_zero_stage: 1" % stage
        )
    offload_optimizer = _choice(spec, "zero_offload_optimizer", OFFLOAD_DEVICES)
    offload_param = _choice(spec, "zero_offload_param", OFFLOAD_DEVICES)
    if offload_optimizer != "none" and stage < 1:
        raise JobFilesError(
            "job spec: zero_offload_optimizer %s needs zero_stage >= 1 (found 0); set "
            "megatron_job_zero_stage or megatron_job_zero_offload_optimizer: none" % offload_optimizer
        )
    if offload_param != "none" and stage != 3:
        raise JobFilesError(
            "job spec: zero_offload_param %s needs zero_stage 3 (found %d); set "
            "megatron_job_zero_stage: 3 or megatron_job_zero_offload_param: none" % (offload_param, stage)
        )
    return {"stage": stage, "offload_optimizer": offload_optimizer, "offload_param": offload_param}


def _activation(spec: Mapping[str, Any]) -> Dict[str, bool]:
    enabled = _bool(spec, "activation_checkpointing")
    extras = {
        "partition_activations": _bool(spec, "partition_activations"),
        "contiguous_memory_optimization": _bool(spec, "contiguous_memory_optimization"),
        "checkpoint_in_cpu": _bool(spec, "checkpoint_in_cpu"),
    }
    wanted = [name for name, on in extras.items() if on]
    if wanted and not enabled:
        raise JobFilesError(
            "job spec: %s need activation_checkpointing: true (found false); set "
            "megatron_job_activation_checkpointing: true or turn them off"
            % ", ".join(wanted)
        )
    extras["enabled"] = enabled
    # DeepSpeed's checkpointing module (deepspeed.checkpointing.configure) is only needed for
    # what it adds over Megatron's own recompute: partitioning, contiguous buffers, CPU copies.
    extras["deepspeed"] = enabled and bool(wanted)
    return extras


# --------------------------------------------------------------------------------------------
# ds_config.json
# --------------------------------------------------------------------------------------------
def ds_config(spec: Mapping[str, Any]) -> Dict[str, Any]:
    """The DeepSpeed config dict of ``spec``.

    There is deliberately no ``optimizer`` (nor ``scheduler``) block, unlike the guide's
    example: Megatron-DeepSpeed builds its own optimizer and LR scheduler from --lr, --min-lr,
    --weight-decay, --adam-beta1/2, --lr-decay-style (get_megatron_optimizer,
    get_optimizer_param_scheduler) and passes both to deepspeed.initialize(optimizer=...,
    lr_scheduler=...). A JSON optimizer would be a second, conflicting source for the same
    settings (the guide's AdamW block also disagreed with its own --weight-decay).
    """
    d = _derive(spec)
    zero = _zero(spec)
    act = _activation(spec)
    precision = _choice(spec, "precision", PRECISIONS)

    zero_block: Dict[str, Any] = {}
    zero_block["stage"] = zero["stage"]
    if zero["offload_optimizer"] != "none":
        zero_block["offload_optimizer"] = {
            "device": zero["offload_optimizer"],
            "pin_memory": _bool(spec, "zero_pin_memory"),
        }
    if zero["offload_param"] != "none":
        zero_block["offload_param"] = {
            "device": zero["offload_param"],
            "pin_memory": _bool(spec, "zero_pin_memory"),
        }
    zero_block["overlap_comm"] = _bool(spec, "zero_overlap_comm")
    zero_block["contiguous_gradients"] = _bool(spec, "zero_contiguous_gradients")
    zero_block["allgather_partitions"] = _bool(spec, "zero_allgather_partitions")
    zero_block["allgather_bucket_size"] = _int(spec, "zero_allgather_bucket_size")
    zero_block["reduce_scatter"] = _bool(spec, "zero_reduce_scatter")
    zero_block["reduce_bucket_size"] = _int(spec, "zero_reduce_bucket_size")

    config: Dict[str, Any] = {}
    # Any two of the three batch values would do; writing all three makes DeepSpeed check them
    # against the data-parallel size Megatron hands it (config.py _batch_assertion).
    config["train_batch_size"] = d["global"]
    config["train_micro_batch_size_per_gpu"] = d["micro"]
    config["gradient_accumulation_steps"] = d["grad_acc"]
    config["steps_per_print"] = _int(spec, "log_interval")
    config["gradient_clipping"] = _float(spec, "clip_grad")
    config["zero_optimization"] = zero_block
    config["bf16"] = {"enabled": precision == "bf16"}
    fp16: Dict[str, Any] = {"enabled": precision == "fp16"}
    if precision == "fp16":
        # loss_scale 0 selects dynamic loss scaling, starting at 2**initial_scale_power.
        fp16["loss_scale"] = 0
        fp16["initial_scale_power"] = _int(spec, "fp16_initial_scale_power", minimum=0)
        fp16["loss_scale_window"] = 1000
        fp16["hysteresis"] = 2
        fp16["min_loss_scale"] = 1
    config["fp16"] = fp16
    if act["enabled"]:
        config["activation_checkpointing"] = {
            "partition_activations": act["partition_activations"],
            "contiguous_memory_optimization": act["contiguous_memory_optimization"],
            "cpu_checkpointing": act["checkpoint_in_cpu"],
        }
    config["wall_clock_breakdown"] = False
    return config


# --------------------------------------------------------------------------------------------
# pretrain_gpt.py arguments (train.sh)
# --------------------------------------------------------------------------------------------
def ds_config_path(spec: Mapping[str, Any]) -> str:
    return str(_get(spec, "workdir")).rstrip("/") + "/ds_config.json"


def hostfile_path(spec: Mapping[str, Any]) -> str:
    return str(_get(spec, "workdir")).rstrip("/") + "/hostfile"


def deepspeed_env_path(spec: Mapping[str, Any]) -> str:
    return str(_get(spec, "workdir")).rstrip("/") + "/.deepspeed_env"


def train_arg_groups(spec: Mapping[str, Any], profile: ProfileArg = None) -> List[List[str]]:
    """The pretrain_gpt.py arguments, one group (a flag and its values) per entry.

    ``profile`` (a stack profile name or dict) adds the profile's forced ``megatron_flags`` and
    picks the flag table (_mds_args) of the profile's Megatron-DeepSpeed checkout: on
    ``before_rebase`` --exit-signal-handler and --no-gradient-accumulation-fusion are left out
    (the feature does not exist there), and asking for flash attention, sequence parallelism,
    NullTokenizer or a tokenizer model is an error.
    """
    prof = _profile(profile)
    supported = _mds_args.flags_in(_mds_era(prof))
    d = _derive(spec)
    zero = _zero(spec)
    act = _activation(spec)
    precision = _choice(spec, "precision", PRECISIONS)
    groups: List[List[str]] = []

    def add(flag: str, *values: Any) -> None:
        groups.append([flag] + [str(v) for v in values])

    def need_new_mds(flag: str, what: str, fix: str) -> None:
        if flag not in supported:
            raise JobFilesError(
                "job spec: %s needs %s, which Megatron-DeepSpeed %s (stack profile %s) does not "
                "have; %s, or pick a stack profile with Megatron-DeepSpeed HEAD"
                % (what, flag, _mds_ref(prof), prof.get("name"), fix)
            )

    # Parallelism
    add("--tensor-model-parallel-size", d["tp"])
    add("--pipeline-model-parallel-size", d["pp"])
    if _bool(spec, "no_pipeline_parallel"):
        add("--no-pipeline-parallel")
    if _bool(spec, "sequence_parallel", default=False):
        need_new_mds("--sequence-parallel", "sequence_parallel", "set megatron_job_sequence_parallel: false")
        add("--sequence-parallel")

    # Model
    add("--num-layers", _int(spec, "num_layers"))
    add("--hidden-size", _int(spec, "hidden_size"))
    if _optional(spec, "ffn_hidden_size") is not None:
        add("--ffn-hidden-size", _int(spec, "ffn_hidden_size"))
    add("--num-attention-heads", _int(spec, "num_attention_heads"))
    add("--seq-length", _int(spec, "seq_length"))
    add("--max-position-embeddings", _int(spec, "max_position_embeddings"))
    add("--init-method-std", _num(_float(spec, "init_method_std")))

    # Batch: the same numbers as ds_config.json's train_micro_batch_size_per_gpu/train_batch_size
    add("--micro-batch-size", d["micro"])
    add("--global-batch-size", d["global"])

    # Optimisation (Megatron's optimizer, handed to deepspeed.initialize)
    add("--train-iters", _int(spec, "train_iters"))
    add("--lr", _num(_float(spec, "lr")))
    add("--min-lr", _num(_float(spec, "min_lr")))
    add("--lr-decay-style", str(_get(spec, "lr_decay_style")))
    add("--lr-warmup-iters", _int(spec, "lr_warmup_iters", minimum=0))
    add("--weight-decay", _num(_float(spec, "weight_decay")))
    add("--clip-grad", _num(_float(spec, "clip_grad")))
    add("--adam-beta1", _num(_float(spec, "adam_beta1")))
    add("--adam-beta2", _num(_float(spec, "adam_beta2")))
    if zero["offload_optimizer"] != "none":
        # ZeRO-Offload refuses a client optimizer that is not DeepSpeedCPUAdam
        # (engine.py _configure_optimizer, zero_force_ds_cpu_optimizer); this flag makes
        # Megatron build exactly that one.
        add("--cpu-optimizer")

    # Precision: the same switch as ds_config.json's bf16/fp16 blocks
    if precision != "fp32":
        add("--" + precision)

    # DeepSpeed
    add("--deepspeed")
    add("--deepspeed_config", ds_config_path(spec))
    add("--zero-stage", zero["stage"])
    if act["enabled"]:
        add("--checkpoint-activations")
    if act["deepspeed"]:
        add("--deepspeed-activation-checkpointing")
        if act["partition_activations"]:
            add("--partition-activations")
        if act["contiguous_memory_optimization"]:
            add("--contigious-checkpointing")  # sic: Megatron's spelling
        if act["checkpoint_in_cpu"]:
            add("--checkpoint-in-cpu")

    # Data
    data_path = _get(spec, "data_path")
    paths = [str(p) for p in data_path] if isinstance(data_path, (list, tuple)) else [str(data_path)]
    add("--data-path", *paths)
    add("--data-impl", "mmap")
    add("--split", str(_get(spec, "split")).replace(" ", ""))
    add("--num-workers", _int(spec, "num_workers", minimum=0))
    tokenizer = str(_get(spec, "tokenizer_type"))
    add("--tokenizer-type", tokenizer)
    if tokenizer in _TOKENIZERS_WITH_VOCAB_FILE:
        if _optional(spec, "vocab_file") is None:
            raise JobFilesError(
                "job spec: tokenizer_type %s needs vocab_file; set megatron_job_vocab_file" % tokenizer
            )
        add("--vocab-file", spec["vocab_file"])
    if tokenizer == "GPT2BPETokenizer":
        if _optional(spec, "merge_file") is None:
            raise JobFilesError(
                "job spec: tokenizer_type GPT2BPETokenizer needs merge_file; set megatron_job_merge_file"
            )
        add("--merge-file", spec["merge_file"])
    if tokenizer == "NullTokenizer":
        if _optional(spec, "vocab_size") is None:
            raise JobFilesError("job spec: tokenizer_type NullTokenizer needs vocab_size; set megatron_job_vocab_size")
        need_new_mds("--vocab-size", "tokenizer_type NullTokenizer", "use GPT2BPETokenizer")
        add("--vocab-size", _int(spec, "vocab_size"))
    if tokenizer in _TOKENIZERS_WITH_MODEL:
        if _optional(spec, "tokenizer_model") is None:
            raise JobFilesError(
                "job spec: tokenizer_type %s needs tokenizer_model; set megatron_job_tokenizer_model" % tokenizer
            )
        need_new_mds("--tokenizer-model", "tokenizer_type %s" % tokenizer, "use GPT2BPETokenizer")
        add("--tokenizer-model", spec["tokenizer_model"])

    # Logging, evaluation, checkpoints
    add("--log-interval", _int(spec, "log_interval"))
    add("--eval-interval", _int(spec, "eval_interval"))
    add("--eval-iters", _int(spec, "eval_iters", minimum=0))
    add("--save", _get(spec, "checkpoint_dir"))
    add("--save-interval", _int(spec, "save_interval"))
    if _bool(spec, "load", default=True):
        add("--load", _get(spec, "checkpoint_dir"))
    if _optional(spec, "tensorboard_dir") is not None:
        add("--tensorboard-dir", spec["tensorboard_dir"])
    # before_rebase cannot save on SIGTERM; train.sh says so in a comment instead.
    if _bool(spec, "exit_signal_handler") and "--exit-signal-handler" in supported:
        add("--exit-signal-handler")

    # Fast paths
    if use_flash_attn(spec, prof):
        need_new_mds("--use-flash-attn-v2", "use_flash_attn", "set megatron_job_use_flash_attn: auto (or false)")
        add("--use-flash-attn-v2")
    if not _bool(spec, "masked_softmax_fusion"):
        add("--no-masked-softmax-fusion")
    # auto: off where the profile's torch cannot fuse the TorchScript bias-GeLU (cu130: 5x slower).
    if not auto_setting(spec, "bias_gelu_fusion", prof):
        add("--no-bias-gelu-fusion")
    if not _bool(spec, "bias_dropout_fusion"):
        add("--no-bias-dropout-fusion")
    if not _bool(spec, "gradient_accumulation_fusion") and "--no-gradient-accumulation-fusion" in supported:
        # before_rebase has no gradient-accumulation fusion to turn off.
        add("--no-gradient-accumulation-fusion")

    # Flags the stack profile forces (cu130: nvcc 13 cannot build the sm_70 softmax kernels)
    present = set(g[0] for g in groups)
    for flag in prof.get("megatron_flags") or []:
        if flag not in present:
            add(flag)
            present.add(flag)

    extra = _get(spec, "extra_args") if "extra_args" in spec else []
    if isinstance(extra, str):
        raise JobFilesError(
            "job spec: extra_args is a string (%r), expected a list of arguments such as "
            "['--exit-interval', '100']; set megatron_job_extra_args as a YAML list" % extra
        )
    for item in extra or []:
        groups.append([str(item)])
    return groups


def auto_setting(spec: Mapping[str, Any], key: str, profile: ProfileArg = None) -> bool:
    """A job setting that takes ``auto`` (the default) as a bool: ``auto`` follows the stack
    profile (_stack_profiles.AUTO_SETTINGS); anything else is read as a bool."""
    value = spec.get(key, "auto")
    if isinstance(value, str) and value.strip().lower() == "auto":
        return _stack_profiles.auto_setting(key, _profile(profile))
    return _bool(spec, key)


def use_flash_attn(spec: Mapping[str, Any], profile: ProfileArg = None) -> bool:
    """The spec's use_flash_attn as a bool: ``auto`` (the default) is true where the stack
    profile requires flash attention (cu130: torch 2.11 breaks the unfused path, FACTS.md G)."""
    return auto_setting(spec, "use_flash_attn", profile)


def train_args(spec: Mapping[str, Any], profile: ProfileArg = None) -> List[str]:
    """``train_arg_groups`` flattened: the argv tail of pretrain_gpt.py."""
    return [token for group in train_arg_groups(spec, profile) for token in group]


def train_flags(spec: Mapping[str, Any], profile: ProfileArg = None) -> List[str]:
    """Every ``--flag`` of the pretrain_gpt.py command line, in order (values left out)."""
    return [token for token in train_args(spec, profile) if token.startswith("--")]


def launch_args(spec: Mapping[str, Any]) -> List[str]:
    """The deepspeed launcher arguments that precede the user script."""
    d = _derive(spec)
    launcher = _choice(spec, "launcher", LAUNCHERS)
    if d["nodes"] == 1:
        # With any hostfile DeepSpeed's runner goes multi-node and ssh-checks the first host
        # (runner.py: `ssh <host> hostname`), which fails on a node with no sshd. One node
        # launches locally: no hostfile, no launcher, master 127.0.0.1.
        return ["--master_port", str(_int(spec, "master_port")), "--num_gpus", str(d["gpus_per_node"])]
    args = ["--hostfile", hostfile_path(spec), "--launcher", launcher]
    args += ["--master_port", str(_int(spec, "master_port"))]
    if _optional(spec, "master_addr") is not None:
        args += ["--master_addr", str(spec["master_addr"])]
    if launcher not in LAUNCHERS_WITHOUT_NUM_ARGS:
        args += ["--num_nodes", str(d["nodes"]), "--num_gpus", str(d["gpus_per_node"])]
    return args


# --------------------------------------------------------------------------------------------
# .deepspeed_env
# --------------------------------------------------------------------------------------------
def _env_value(value: Any) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def deepspeed_env(spec: Mapping[str, Any], profile: ProfileArg = None) -> Dict[str, str]:
    """The variables every rank on every node must see, later sources winning.

    Order: the venv's PATH and the Megatron checkout on PYTHONPATH, the accelerator's needs
    (CUDA_HOME or DS_ACCELERATOR=cpu), the nccl role's ``nccl_env``, then the job's ``env``.
    A variable set to null in ``env`` or ``nccl_env`` is left out.
    """
    prof = _profile(profile)
    venv = str(_get(spec, "venv")).rstrip("/")
    env: Dict[str, Optional[str]] = {}
    path = [venv + "/bin"]
    cuda_home = _optional(spec, "cuda_home")
    if prof.get("accelerator") == "cpu":
        # CPU ranks use DeepSpeed's CPU accelerator (gloo); auto-detection would also get
        # there, but only after a warning and a failed CUDA probe on every rank.
        env["DS_ACCELERATOR"] = "cpu"
    elif cuda_home is not None:
        env["CUDA_HOME"] = str(cuda_home).rstrip("/")
        path.append(env["CUDA_HOME"] + "/bin")
    path += ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"]
    env["PATH"] = ":".join(path)
    env["PYTHONPATH"] = str(_get(spec, "megatron_dir")).rstrip("/")
    for source in ("nccl_env", "env"):
        extra = spec.get(source) or {}
        if not isinstance(extra, Mapping):
            raise JobFilesError(
                "job spec: %s is %r, expected a mapping of variable names to values; set %s"
                % (source, extra, _var(source))
            )
        for key, value in extra.items():
            env.pop(str(key), None)  # re-inserted last: a later source overrides
            env[str(key)] = _env_value(value)
    return {k: v for k, v in env.items() if v is not None}


def deepspeed_env_lines(spec: Mapping[str, Any], profile: ProfileArg = None) -> List[str]:
    """``KEY=VALUE`` lines for .deepspeed_env, refusing what DeepSpeed's parser would break on.

    DeepSpeed splits every line on the first '=' (a blank or comment line crashes it), strips
    the value, and writes ``export KEY=VALUE;`` into the pdsh command. It double-quotes the value
    only from 0.15.2 on, so with an older pinned DeepSpeed (the cu117 profile's 0.9.2) a value
    with spaces or other shell characters is rejected here rather than broken on the nodes.
    """
    prof = _profile(profile)
    quotes = _deepspeed_at_least(prof, DS_ENV_QUOTING_SINCE)
    lines = []
    for key, value in deepspeed_env(spec, prof).items():
        where = "megatron_job_env / nccl_env variable %s" % key
        if not _ENV_KEY.match(key):
            raise JobFilesError(
                "%s: %r is not a valid environment variable name (expected letters, digits and "
                "'_', not starting with a digit); rename it" % (where, key)
            )
        if value != value.strip():
            raise JobFilesError(
                "%s: value %r has leading or trailing whitespace, which DeepSpeed strips; "
                "remove it" % (where, value)
            )
        if _DS_ENV_SHELL_ACTIVE.search(value):
            raise JobFilesError(
                "%s: value %r contains a newline, '\"', '`', '$' or '\\'; the DeepSpeed launcher "
                "hands the value to a remote shell, which would expand or break on it. Write "
                "the final value literally" % (where, value)
            )
        if not quotes and not DS_ENV_SAFE_VALUE.match(value):
            raise JobFilesError(
                "%s: value %r contains spaces or shell characters. DeepSpeed %s (stack profile "
                "%s) writes .deepspeed_env values unquoted into the pdsh 'export' line "
                "(quoting arrived in DeepSpeed %s), so the remote shell would split it. Use "
                "only letters, digits and @%%+=:,./- in the value, or a stack profile with "
                "DeepSpeed >= %s"
                % (where, value, _pinned_deepspeed(prof) or "(unpinned)", prof.get("name"),
                   DS_ENV_QUOTING_SINCE, DS_ENV_QUOTING_SINCE)
            )
        lines.append("%s=%s" % (key, value))
    return lines


def deepspeed_env_file_supported(profile: ProfileArg = None) -> bool:
    """Whether the profile's DeepSpeed reads .deepspeed_env from the DS_ENV_FILE path."""
    return _deepspeed_at_least(_profile(profile), DS_ENV_FILE_SINCE)


# --------------------------------------------------------------------------------------------
# hostfile
# --------------------------------------------------------------------------------------------
def hostfile_lines(hosts: Sequence[str], slots: Any) -> List[str]:
    """``host slots=N`` per host, refusing what DeepSpeed or pdsh would refuse."""
    try:
        count = int(slots)
    except (TypeError, ValueError):
        count = 0
    if count < 1:
        raise JobFilesError(
            "hostfile: slots is %r, expected a positive integer; set megatron_job_gpus_per_node" % (slots,)
        )
    if not hosts:
        raise JobFilesError(
            "hostfile: no hosts; put the training nodes in inventory group megatron_nodes"
        )
    seen: Dict[str, int] = {}
    lines = []
    for index, host in enumerate(hosts):
        name = str(host).strip()
        if not name or _BAD_HOST_CHARS.search(name):
            raise JobFilesError(
                "hostfile: node address %r cannot be used (empty, or contains whitespace, ',', "
                "'@', ':' or '#', which DeepSpeed's hostfile or pdsh -w cannot carry); set "
                "megatron_job_node_address for that host to its ssh name" % (host,)
            )
        if name in seen:
            raise JobFilesError(
                "hostfile: nodes #%d and #%d both resolve to %r; DeepSpeed refuses duplicate "
                "hostfile entries. Give each inventory host its own megatron_job_node_address"
                % (seen[name] + 1, index + 1, name)
            )
        seen[name] = index
        lines.append("%s slots=%d" % (name, count))
    return lines


def parse_hostfile(text: Union[str, Sequence[str]]) -> Dict[str, int]:
    """Read a hostfile with DeepSpeed's rules: comments and blank lines skipped, one
    ``host slots=N`` per line, no duplicates, at least one host."""
    lines = text.splitlines() if isinstance(text, str) else list(text)
    pool: Dict[str, int] = {}
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _HOSTFILE_LINE.search(line)
        if not match:
            raise JobFilesError("hostfile line %d: %r is not 'host slots=N'" % (number, line))
        host, slots = match.group(1), int(match.group(2))
        if host in pool:
            raise JobFilesError("hostfile line %d: host %s is listed twice" % (number, host))
        pool[host] = slots
    if not pool:
        raise JobFilesError("hostfile is empty: no 'host slots=N' line")
    return pool


def job_summary(spec: Mapping[str, Any]) -> Dict[str, int]:
    """The derived shape (world, tp, pp, dp, micro, global, grad_acc) for comments and docs."""
    return _derive(spec)
