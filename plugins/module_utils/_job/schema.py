# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job spec's schema: every ``megatron_job_*`` variable with its type, default and choices,
and the one coercion of a value to that type.

``FIELDS`` is written once. ``roles/megatron_job/defaults/main.yml`` and
``roles/megatron_job/meta/argument_specs.yml`` carry the same names, types, defaults and
choices for Ansible's sake; tests/unit/plugins/module_utils/_job/test_schema.py fails on any
difference, so the three cannot drift. Defaults that the YAML computes from other variables
are format strings over the spec here (``{name}``); defaults the YAML takes from a variable
outside the role (``megatron_stack_profile``, the nccl role's ``nccl_env``) are listed in
``INHERITED``.

No Ansible imports: the job package (``_job_*``) is unit-tested without a host.
"""
from __future__ import annotations

import ipaddress
import math
import re
import shlex
from typing import Any, Dict, FrozenSet, List, Mapping, NamedTuple, Optional, Tuple

from .._stack import profiles as _stack_profiles

PREFIX = "megatron_job_"


class JobError(ValueError):
    """The job spec cannot be used as given; the message names the variable, the value found,
    the value expected and what to change."""


class Field(NamedTuple):
    """One job spec variable.

    ``type``: the argument_specs.yml type (str, path, int, float, bool, dict, list, raw);
    ``kind``: how the value is coerced (int, float, bool, auto_bool, str, choice, dict,
    extra_args, data_path); ``minimum`` / ``maximum``: the bounds of an int or float (``open``
    names the ones the value must not reach: "min", "max"); ``nullable``: null is a valid value
    (Megatron computes it, or only some tokenizers need it); ``why``: the reason for the bounds
    (or for refusing whitespace, ``words``), quoted in the error; ``words``: the value must be
    one shell word (no whitespace)."""

    name: str
    type: str
    default: Any
    kind: str
    choices: Optional[Tuple[Any, ...]] = None
    minimum: float = 0
    nullable: bool = False
    maximum: Optional[float] = None
    open: Tuple[str, ...] = ()
    why: str = ""
    words: bool = False


def _f(name: str, type_: str, default: Any, kind: Optional[str] = None, choices: Optional[Tuple[Any, ...]] = None,
       minimum: float = 0, nullable: bool = False, maximum: Optional[float] = None, open_: Tuple[str, ...] = (),
       why: str = "", words: bool = False) -> Field:
    return Field(name, type_, default, kind or type_, choices, minimum, nullable, maximum, open_, why, words)


# Why the bounds below: each is quoted in the error the value gets.
# Intervals: Megatron-DeepSpeed divides or takes the modulo by them (megatron/training.py at
# 4efb479d: log_interval :1106 `iteration % args.log_interval`, :1193 `normalizer=`;
# eval_interval :597 and :1558 `args.train_iters // args.eval_interval`; save_interval :1343-1344
# skips saving when it is 0, so --save would write nothing).
_INTERVAL = "Megatron-DeepSpeed divides by it or takes the iteration modulo it (megatron/training.py:%s at 4efb479d)"
# Model sizes: the largest published dense models stay far below these (GPT-3 96 layers x 12288,
# MT-NLG 105 x 20480, Llama 3 405B 126 x 16384; DeepSpeed-Ulysses reports 1M-token sequences), so a
# value above them is a typo (1e10, a missing unit), and the planner's search stays bounded.
_SIZE = "no real model comes near it (the largest dense models: about 126 layers, hidden 20480, 1M-token sequences)"
# The install paths the ranks' environment carries: DeepSpeed's pdsh runner writes every
# .deepspeed_env line unquoted as `export KEY=VALUE;` and `cd <dir>;` on each node
# (deepspeed/launcher/multinode_runner.py:94 and :99 at 0.19.6), so a space splits them.
_WORDS = ("it goes into the ranks' PATH, PYTHONPATH or CUDA_HOME, which DeepSpeed's pdsh runner writes unquoted "
          "(deepspeed/launcher/multinode_runner.py:94, :99 at 0.19.6)")


TOKENIZERS = (
    "BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer",
    "SentencePieceTokenizer", "GPTSentencePieceTokenizer", "HFTokenizer", "NullTokenizer",
)
LAUNCHERS = ("pdsh", "openmpi", "slurm")
PRECISIONS = ("bf16", "fp16", "fp32")
OFFLOAD_DEVICES = ("none", "cpu")
ZERO_STAGES = (0, 1, 2, 3)
AUTO = "auto"
# gpt: the guide's GPT-2 style model; llama: Megatron-DeepSpeed's LLaMA-style switches
# (_job_args.PRESET_ARGS).
MODEL_PRESETS = ("gpt", "llama")

# In the order of roles/megatron_job/defaults/main.yml (the schema test compares the order too).
FIELDS: Tuple[Field, ...] = (
    # Identity and paths
    _f("name", "str", "gpt"),
    _f("workdir", "path", "/opt/megatron/jobs/{name}", "str"),
    _f("megatron_dir", "path", "/opt/megatron/Megatron-DeepSpeed", "str", why=_WORDS, words=True),
    _f("venv", "path", _stack_profiles.VENV, "str", why=_WORDS, words=True),
    _f("checkpoint_dir", "path", "/shared/checkpoints/{name}", "str"),
    _f("tensorboard_dir", "str", "/shared/tensorboard/{name}", nullable=True),
    _f("log_dir", "path", "{workdir}/logs", "str"),
    _f("log_file", "path", "{log_dir}/train.log", "str"),
    _f("cuda_home", "path", "/usr/local/cuda", "str", nullable=True, why=_WORDS, words=True),
    _f("nccl_env_file", "path", "/etc/megatron/nccl.env", "str"),
    _f("nccl_env_dir", "path", "/etc/megatron/nccl.d", "str"),
    _f("load", "bool", True),
    # Stack and ownership
    _f("stack_profile", "str", _stack_profiles.DEFAULT_PROFILE),
    _f("user", "str", "megatron"),
    _f("group", "str", "{user}"),
    # Cluster shape
    _f("gpus_per_node", "int", 8, minimum=1, maximum=64, why="the largest GPU servers hold 16"),
    _f("launcher", "str", "pdsh", "choice", LAUNCHERS),
    _f("master_port", "int", 29500, minimum=1, maximum=65535, why="a TCP port number"),
    _f("master_addr", "str", None, nullable=True),
    # Parallelism
    _f("tensor_parallel", "int", 8, minimum=1),
    _f("pipeline_parallel", "int", 1, minimum=1),
    _f("no_pipeline_parallel", "bool", True),
    _f("sequence_parallel", "bool", False),
    _f("ds_sequence_parallel_size", "int", 1, minimum=1),
    # Model
    _f("num_layers", "int", 40, minimum=1, maximum=1024, why=_SIZE),
    _f("hidden_size", "int", 5120, minimum=1, maximum=131072, why=_SIZE),
    _f("num_attention_heads", "int", 40, minimum=1),
    _f("seq_length", "int", 2048, minimum=1, maximum=4194304, why=_SIZE),
    _f("max_position_embeddings", "int", 2048, minimum=1, maximum=4194304, why=_SIZE),
    _f("ffn_hidden_size", "int", None, minimum=1, nullable=True, maximum=524288, why=_SIZE),
    _f("model_preset", "str", "gpt", "choice", MODEL_PRESETS),
    _f("num_key_value_heads", "int", None, minimum=1, nullable=True),
    # Batch
    _f("micro_batch_size", "int", 1, minimum=1),
    _f("global_batch_size", "int", 512, minimum=1),
    # Optimisation
    _f("train_iters", "int", 1000000, minimum=1),
    _f("lr", "float", 6.0e-5, open_=("min",), why="a learning rate of 0 trains nothing"),
    _f("min_lr", "float", 6.0e-6),
    _f("lr_decay_style", "str", "cosine", "choice", ("constant", "linear", "cosine", "inverse-square-root")),
    _f("lr_warmup_iters", "int", 2000),
    _f("weight_decay", "float", 0.1, why="a negative decay grows the weights instead of shrinking them"),
    _f("clip_grad", "float", 1.0),
    _f("adam_beta1", "float", 0.9, maximum=1, open_=("max",), why="torch.optim.Adam requires 0 <= beta < 1"),
    _f("adam_beta2", "float", 0.95, maximum=1, open_=("max",), why="torch.optim.Adam requires 0 <= beta < 1"),
    _f("init_method_std", "float", 0.006, open_=("min",), why="a standard deviation of 0 starts every weight equal"),
    # Precision
    _f("precision", "str", "bf16", "choice", PRECISIONS),
    _f("fp16_initial_scale_power", "int", 16),
    # ZeRO
    _f("zero_stage", "int", 1, choices=ZERO_STAGES),
    _f("zero_offload_optimizer", "str", "none", "choice", OFFLOAD_DEVICES),
    _f("zero_offload_param", "str", "none", "choice", OFFLOAD_DEVICES),
    _f("zero_pin_memory", "bool", True),
    _f("zero_overlap_comm", "bool", True),
    _f("zero_contiguous_gradients", "bool", True),
    _f("zero_allgather_partitions", "bool", True),
    _f("zero_allgather_bucket_size", "int", 500000000),
    _f("zero_reduce_scatter", "bool", True),
    _f("zero_reduce_bucket_size", "int", 500000000),
    # Activation checkpointing
    _f("activation_checkpointing", "bool", False),
    _f("partition_activations", "bool", False),
    _f("contiguous_memory_optimization", "bool", False),
    _f("checkpoint_in_cpu", "bool", False),
    # Fast paths: "auto" follows the stack profile (_stack_profiles.AUTO_SETTINGS)
    _f("use_flash_attn", "raw", AUTO, "auto_bool"),
    _f("masked_softmax_fusion", "bool", True),
    _f("bias_gelu_fusion", "raw", AUTO, "auto_bool"),
    _f("bias_dropout_fusion", "bool", True),
    # The collection's compiled bias-GeLU, rotary and SwiGLU (megatron_ds_fused_ops, python_env_fused_ops)
    _f("fused_ops", "raw", AUTO, "auto_bool"),
    _f("gradient_accumulation_fusion", "bool", False),
    # Logging, evaluation, checkpoints
    _f("log_interval", "int", 10, minimum=1, why=_INTERVAL % "1106, :1193"),
    _f("eval_interval", "int", 100, minimum=1, why=_INTERVAL % "597, :1558"),
    _f("eval_iters", "int", 10),
    _f("save_interval", "int", 1000, minimum=1, why=_INTERVAL % "1343-1344; 0 saves nothing"),
    _f("exit_signal_handler", "bool", True),
    # Data
    _f("data_path", "raw", "/shared/data/my-gpt_text_document", "data_path"),
    _f("tokenizer_type", "str", "GPT2BPETokenizer", "choice", TOKENIZERS),
    _f("vocab_file", "str", "/shared/data/vocab.json", nullable=True),
    _f("merge_file", "str", "/shared/data/merges.txt", nullable=True),
    _f("vocab_size", "int", None, minimum=1, nullable=True),
    _f("tokenizer_model", "str", None, nullable=True),
    _f("split", "str", "969,30,1"),
    _f("num_workers", "int", 2),
    # Environment and pass-through
    _f("env", "dict", {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}),
    _f("nccl_env", "dict", {}),
    _f("extra_args", "list", [], "extra_args"),
)

SCHEMA: Dict[str, Field] = {field.name: field for field in FIELDS}
DEFAULTS: Dict[str, Any] = {field.name: field.default for field in FIELDS}
# Keys whose default is computed from other keys, in dependency order.
TEMPLATED_DEFAULTS: Tuple[str, ...] = tuple(
    f.name for f in FIELDS if isinstance(f.default, str) and "{" in f.default
)
# Defaults the role takes from a variable outside it: the YAML expression defaults/main.yml
# writes (the schema default above is what it gives when that variable is not set). The
# fallback profile itself is named only in _stack_profiles.DEFAULT_PROFILE: the lookup returns
# it for an empty name.
INHERITED: Dict[str, str] = {
    "stack_profile": "{{ lookup('megatron_ds.cluster.stack_profile', megatron_stack_profile | default('')).name }}",
    "nccl_env": "{{ nccl_env | default({}) }}",
    # The training user is the cluster's ssh user (cluster_ssh role) unless the job names its own.
    "user": "{{ cluster_ssh_user | default('megatron') }}",
}
INT_KEYS: FrozenSet[str] = frozenset(f.name for f in FIELDS if f.kind == "int")
FLOAT_KEYS: FrozenSet[str] = frozenset(f.name for f in FIELDS if f.kind == "float")
BOOL_KEYS: FrozenSet[str] = frozenset(f.name for f in FIELDS if f.kind == "bool")
AUTO_BOOL_KEYS: FrozenSet[str] = frozenset(f.name for f in FIELDS if f.kind == "auto_bool")
NULLABLE_KEYS: FrozenSet[str] = frozenset(f.name for f in FIELDS if f.nullable)
POSITIVE_KEYS: FrozenSet[str] = frozenset(f.name for f in FIELDS if f.minimum >= 1)
CHOICES: Dict[str, Tuple[str, ...]] = {f.name: f.choices for f in FIELDS if f.kind == "choice" and f.choices}

# megatron_job_* variables that are not part of the spec: inputs of playbooks/validate.yml,
# and the per-host address the hostfile lists.
NON_SPEC_KEYS = frozenset({"script", "ds_config_file", "hostfile", "node_address"})
# Not a megatron_job_* variable but part of every spec the job files are built from: the number
# of hosts in the inventory group megatron_nodes.
NODES = "nodes"

_TRUE = {"true", "yes", "on", "1", "y"}
_FALSE = {"false", "no", "off", "0", "n"}


def var(key: str) -> str:
    """The inventory variable of spec key ``key``."""
    return PREFIX + key


def strip_prefix(spec_vars: Mapping[str, Any]) -> Dict[str, Any]:
    """``megatron_job_x`` -> ``x``; unprefixed keys pass through. A key given both ways with
    different values is an error (which one would the user expect?)."""
    out: Dict[str, Any] = {}
    given_as: Dict[str, str] = {}
    for raw_key, value in spec_vars.items():
        key = raw_key[len(PREFIX):] if raw_key.startswith(PREFIX) else raw_key
        if key in out and out[key] != value:
            raise JobError(
                "the job spec sets %s twice, as %s=%r and %s=%r: keep one (the megatron_job_ "
                "variable)" % (key, given_as[key], out[key], raw_key, value)
            )
        out[key] = value
        given_as[key] = raw_key
    return out


def unknown_keys(spec_vars: Mapping[str, Any]) -> List[str]:
    """Keys that are not job spec variables (typos such as megatron_job_micro_batch),
    prefixed as given, sorted. Inputs of validate.yml (NON_SPEC_KEYS) are not reported."""
    found = []
    for raw_key in spec_vars:
        key = raw_key[len(PREFIX):] if raw_key.startswith(PREFIX) else raw_key
        if key not in SCHEMA and key not in NON_SPEC_KEYS and key != NODES:
            found.append(raw_key)
    return sorted(found)


def to_int(key: str, value: Any) -> int:
    """``value`` as a whole number: 8, "8", "1_024", 5e8 and "5e8" are; True and 1.5 are not."""
    if isinstance(value, bool):
        raise JobError("%s: found %r, expected an integer" % (var(key), value))
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        text = value.strip().replace("_", "")
        try:
            return int(text)
        except ValueError:
            try:
                number = float(text)
            except ValueError:
                number = math.nan
            if not math.isnan(number) and number.is_integer():
                return int(number)
    raise JobError("%s: found %r, expected an integer" % (var(key), value))


# YAML 1.1's spellings of NaN and the infinities, as they arrive from -e or a quoted value: read as
# numbers so that the error says why they are refused (not finite) rather than "not a number".
_YAML_SPECIAL = {".nan": math.nan, ".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf}


def to_float(key: str, value: Any) -> float:
    if isinstance(value, bool):
        raise JobError("%s: found %r, expected a number" % (var(key), value))
    if isinstance(value, str) and value.strip().lower() in _YAML_SPECIAL:
        return _YAML_SPECIAL[value.strip().lower()]
    try:
        return float(value)
    except (TypeError, ValueError):
        raise JobError("%s: found %r, expected a number" % (var(key), value)) from None


def to_bool(key: str, value: Any) -> bool:
    """YAML's and Ansible's booleans: true/false, yes/no, on/off, 1/0 (strings too)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
        return value.strip().lower() in _TRUE
    raise JobError("%s: found %r, expected true or false" % (var(key), value))


def coerce(key: str, value: Any) -> Any:
    """``value`` of spec key ``key`` as its schema type; JobError naming the variable, the
    value found and the value expected. ``auto`` stays ``auto`` (resolved with the profile by
    _job_spec.normalize)."""
    field = SCHEMA[key]
    if value is None or field.kind == "str" and field.nullable and isinstance(value, str) and value.strip() in ("", "None", "null"):
        if field.nullable:
            return None
        raise JobError("%s: found null, expected a value (default %r)" % (var(key), field.default))
    kind = field.kind
    if kind == "int":
        number = to_int(key, value)
        _check_bounds(field, number)
        if field.choices and number not in field.choices:
            raise JobError("%s: found %d, expected one of %s"
                           % (var(key), number, ", ".join(str(c) for c in field.choices)))
        return number
    if kind == "float":
        real = to_float(key, value)
        if not math.isfinite(real):
            raise JobError("%s: found %r, expected a finite number %s; set a number, e.g. the default %r"
                           % (var(key), value, bounds_text(field), field.default))
        _check_bounds(field, real)
        return real
    if kind == "bool":
        return to_bool(key, value)
    if kind == "auto_bool":
        if isinstance(value, str) and value.strip().lower() == AUTO:
            return AUTO
        return to_bool(key, value)
    if kind == "dict":
        if not isinstance(value, Mapping):
            raise JobError("%s: found %r, expected a mapping NAME: value" % (var(key), value))
        # null stays null: the variable is then left out of the environment.
        return {str(k): None if v is None else _env_text(v) for k, v in value.items()}
    if kind == "extra_args":
        if isinstance(value, str):
            return shlex.split(value)
        if not isinstance(value, (list, tuple)):
            raise JobError("%s: found %r, expected a list of arguments" % (var(key), value))
        return [str(v) for v in value]
    if kind == "data_path":
        return _data_path(key, value)
    text = str(value)
    if field.words and any(c.isspace() for c in text):
        raise JobError("%s: found %r, expected a path without spaces: %s; move it, or point a symlink without "
                       "spaces at it and set %s to the link" % (var(key), text, field.why, var(key)))
    if kind == "choice":
        lowered = {c.lower(): c for c in field.choices or ()}
        if key in ("zero_offload_optimizer", "zero_offload_param") and text.strip() == "":
            text = "none"
        if text.strip().lower() not in lowered:
            raise JobError("%s: found %r, expected one of %s" % (var(key), text, ", ".join(field.choices or ())))
        return lowered[text.strip().lower()]
    if key == "split":
        return _split(key, text.replace(" ", ""))
    if key == "master_addr" and malformed_ipv4(text):
        raise JobError("%s: found %r, expected a host name or an IPv4 address of four numbers 0-255: every rank "
                       "dials it for the rendezvous and would time out; set it to the head node's address, or null "
                       "for the first node of megatron_nodes" % (var(key), text))
    return text


_DOTTED = re.compile(r"^[0-9.]+\Z")


def malformed_ipv4(text: str) -> bool:
    """Whether ``text`` reads as an IPv4 address (digits and dots only) but is not one: 10.0.0.300,
    10.0.0, 1.2.3.4.5. A resolver would try it as a host name and fail on every node, long after the
    inventory was read."""
    if not _DOTTED.match(text):
        return False
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return True
    return False


def split_shares(text: str) -> List[Optional[float]]:
    """--split read as Megatron-DeepSpeed reads it: cut at ',' (else at '/'), each part through
    float(); None for a part float() refuses, or that is not finite (a nan or inf share breaks
    the sums upstream divides by). rules_startup judges a train.sh's --split with the same reading."""
    shares: List[Optional[float]] = []
    for part in text.split(",") if "," in text else text.split("/"):
        try:
            number = float(part)
        except ValueError:
            number = math.nan
        shares.append(number if math.isfinite(number) else None)
    return shares


def _split(key: str, text: str) -> str:
    """--split as Megatron-DeepSpeed reads it: up to three numbers separated by ',' (else by '/'),
    the missing ones 0, their sum above 0 (megatron/data/dataset_utils.py:617-631 at 4efb479d).
    Upstream parses it only when it builds the datasets, after the job has started on every node;
    and it drops a fourth number without a word, which rules_startup warns about (a legal job)."""
    parts = text.split(",") if "," in text else text.split("/")
    numbers = []
    for part, number in zip(parts, split_shares(text)):
        if number is None or number < 0:
            raise JobError("%s: found %r, expected up to three numbers >= 0 separated by ',' or '/' (train,valid,test "
                           "shares, such as the default %r): %r is not one; Megatron-DeepSpeed's float() would stop "
                           "the job when it builds the datasets (megatron/data/dataset_utils.py:622)"
                           % (var(key), text, DEFAULTS[key], part))
        numbers.append(number)
    if sum(numbers[:3]) <= 0:
        raise JobError("%s: found %r, expected shares whose sum is above 0 (Megatron-DeepSpeed asserts splits_sum > 0.0, "
                       "megatron/data/dataset_utils.py:631); give the training set a share, such as %r"
                       % (var(key), text, DEFAULTS[key]))
    return text


def bounds_text(field: Field) -> str:
    """The bounds of a number field in words: ">= 1", "from 1 to 65535", "> 0", ">= 0 and < 1"."""
    low = "%s %s" % (">" if "min" in field.open else ">=", _number(field.minimum))
    if field.maximum is None:
        return low
    if not field.open:
        return "from %s to %s" % (_number(field.minimum), _number(field.maximum))
    return "%s and %s %s" % (low, "<" if "max" in field.open else "<=", _number(field.maximum))


def _number(value: float) -> str:
    return "%d" % value if float(value).is_integer() else "%r" % value


def _check_bounds(field: Field, number: float) -> None:
    low, high = field.minimum, field.maximum
    below = number <= low if "min" in field.open else number < low
    above = high is not None and (number >= high if "max" in field.open else number > high)
    if below or above:
        raise JobError("%s: found %s, expected %s %s%s; set it within those bounds (default %r)" % (
            var(field.name), _number(number), "an integer" if field.kind == "int" else "a number", bounds_text(field),
            ": " + field.why if field.why else "", field.default))


def _is_weight(word: str) -> bool:
    try:
        return math.isfinite(float(word))
    except ValueError:
        return False


def _blend_refusal(words: List[str]) -> Optional[str]:
    """Why weight-prefix pairs with finite weights cannot be blended, or None. Upstream normalizes the
    weights by their sum (`assert weight_sum > 0.0`, megatron/data/dataset_utils.py:60-61 at 4efb479d),
    so a negative weight passes while others outweigh it and then asks a dataset for a negative number
    of samples."""
    weights = [float(w) for w in words[::2]]
    negative = [w for w in words[::2] if float(w) < 0]
    if negative:
        return "weight %s is negative" % negative[0]
    if sum(weights) <= 0:
        return "the weights sum to 0 (Megatron-DeepSpeed asserts weight_sum > 0.0)"
    return None


def _data_path(key: str, value: Any) -> str:
    """Megatron's --data-path as the spec keeps it: one prefix, or weight-prefix pairs ("0.7 /d/a 0.3 /d/b"),
    as words joined by spaces, so that train.sh passes one word per item.

    Upstream takes either one item (a prefix) or an even number of items read as (weight, prefix)
    pairs (`assert len(data_prefix) % 2 == 0`, `float(data_prefix[2*i])`:
    megatron/data/dataset_utils.py:49, :54 at 4efb479d). A prefix that contains whitespace is split
    into two items on its way to train.sh, so it is refused here rather than found by upstream's
    assertion after provisioning."""
    if isinstance(value, (list, tuple)):
        words = [str(v) for v in value]
        spaced = [w for w in words if not w.strip() or any(c.isspace() for c in w)]
        if spaced:
            raise JobError("%s: found %r, expected dataset prefixes without whitespace: item %r would reach "
                           "pretrain_gpt.py --data-path as %d word(s); rename the dataset files, or point a symlink "
                           "without spaces at them" % (var(key), value, spaced[0], len(spaced[0].split())))
    else:
        words = str(value).split()
    if not words:
        raise JobError("%s: found %r, expected a dataset prefix (no .bin/.idx)" % (var(key), value))
    if len(words) > 1 and (len(words) % 2 or not all(_is_weight(w) for w in words[::2])):
        raise JobError(
            "%s: found %r, expected one dataset prefix or weight-prefix pairs (\"0.7 /d/a 0.3 /d/b\"): split on "
            "whitespace it is %d words, %s, which Megatron-DeepSpeed reads as %s (megatron/data/dataset_utils.py:49, "
            ":54); a prefix cannot contain whitespace: rename the dataset files or point a symlink without spaces "
            "at them" % (var(key), value, len(words), " ".join(repr(w) for w in words),
                         "an odd number of items" if len(words) % 2 else "weights that are not numbers"))
    blend = _blend_refusal(words) if len(words) > 1 else None
    if blend:
        raise JobError("%s: found %r, expected weights >= 0 with a sum above 0: %s (megatron/data/dataset_utils.py:54-61); "
                       "give each dataset its share as a number >= 0" % (var(key), value, blend))
    return " ".join(words)


def _env_text(value: Any) -> str:
    """An environment value as the shell sees it: booleans as 1/0, the rest as text."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)
