# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job rules: every check of a job against Megatron-DeepSpeed's and DeepSpeed's own rules,
quoting the assertion the job would fail on, with its own message where it has one.

``validate`` reads the job once (``inputs.read``: a normalized spec, whose argument list is
``args.arguments`` of that spec, the very list train.sh passes, or a train.sh read by ``script``,
with its own arguments) and ``judge`` runs every rule on that one shape, with the ds_config.json
and hostfile beside it when given. The cluster, launcher, argument, parallelism, model and batch
rules live here; the DeepSpeed-feature and stack rules in ``rules_features``; the start-up
rules after validate_args (tokenizer, data, learning-rate scheduler) in ``rules_startup``; the
memory estimate in ``memory``.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Tuple

from .args import DROPPED_IS_ERROR, SPEC_ARGS, SPEC_FLAG_KEYS, PRECISION_FLAGS
from .inputs import JobInput, last_value
from .inputs import read as read_input
from .findings import finding
from .hops import hop_findings
from .memory import check_memory
from .model import default_ffn_hidden_size, is_llama
from .rules_features import (
    Recompute,
    ZeroSetup,
    check_activation_checkpointing,
    check_bias_gelu_fusion,
    check_checkpoints,
    check_flash_attn,
    check_precision,
    check_zero,
    recompute,
    zero_setup,
)
from .rules_startup import check_startup
from .rules_moe import check_moe
from .schema import PREFIX
from .script import expected_value
from .upstream_asserts import refusals as upstream_refusals
from .spec import MDS_GLOBAL_BATCH_MSG, MDS_WORLD_MSG, derive, int_or_none
from .._mds.args import HEAD, LAUNCHERS, ArgValueError, args_for, classify, coerce, split_args
from .._stack import gpu_arch as _gpu_arch
from .._stack import profiles as _stack_profiles

# DeepSpeed's messages, verbatim (deepspeed/runtime/config.py _batch_assertion,
# _set_batch_related_parameters).
DS_BATCH_MSG = (
    "Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
    "gradient_acc_step * world_size {} != {} * {} * {}"
)
DS_BATCH_MISSING_MSG = "Either train_batch_size or train_micro_batch_size_per_gpu needs to be provided"
DS_DIVISIBLE_MSG = "Train batch size must be divisible by micro-batch data parallelism"
MDS_NO_PP_MSG = "pipeline_model_parallel_size must be 1 if pipeline parallel is disabled"
# The files each tokenizer asserts before it loads (megatron/tokenizer/tokenizer.py:19-43 at 4efb479d);
# NullTokenizer's vocab_size is judged on its own below.
# GPT-2's files here; the other types' (BERT's vocabulary, the SentencePiece and HF models) are
# rules_startup's tokenizer rule, which reads train.sh's flags as well as the spec.
TOKENIZER_FILES: Dict[str, Tuple[str, ...]] = {
    "GPT2BPETokenizer": ("vocab_file", "merge_file"),
}

Add = Callable[[Dict[str, str]], None]


def _check_schedule(job: JobInput, facts: Facts, add: Add) -> None:
    """validate_args' schedule checks (4efb479d megatron/arguments.py:238-266; 9446eaac
    arguments.py:180-208, the same asserts in parse_args): a run counts iterations or samples,
    never both, and --lr-warmup-fraction replaces the warmup count of that kind, which must then be
    0 (Megatron's default; the job files render --lr-warmup-iters)."""
    flags = job.flags

    def number(flag: str) -> int:
        value = last_value(flags, flag)
        try:
            return int(float(value)) if value is not None else 0
        except ValueError:
            return 0

    train_iters, train_samples = number("--train-iters"), number("--train-samples")
    if train_iters and train_samples:
        add(finding(
            "iteration- or sample-based training", "fail", "schedule",
            "--train-iters %d and --train-samples %d" % (train_iters, train_samples), "one of them",
            "Megatron-DeepSpeed's validate_args asserts 'expected iteration-based training' (arguments.py:241 at "
            "4efb479d); keep one: megatron_job_train_iters, or --train-samples in megatron_job_extra_args with "
            "megatron_job_train_iters null"))
    if "--lr-warmup-fraction" not in flags:
        return
    other = "--lr-warmup-samples" if train_samples and not train_iters else "--lr-warmup-iters"
    if number(other):
        add(finding(
            "one learning-rate warmup", "fail", "schedule",
            "--lr-warmup-fraction %s and %s %d" % (last_value(flags, "--lr-warmup-fraction"), other, number(other)),
            "--lr-warmup-fraction with %s 0" % other,
            "Megatron-DeepSpeed's validate_args asserts 'can only specify one of lr-warmup-fraction and %s' "
            "(arguments.py:%s at 4efb479d); set megatron_job_lr_warmup_iters: 0 or drop --lr-warmup-fraction"
            % (other.lstrip("-"), "251" if other == "--lr-warmup-iters" else "266")))


def _ds_int(config: Mapping[str, Any], key: str, add: Add) -> Optional[int]:
    value = config.get(key)
    if value is None:
        return None
    number = int_or_none(value)
    if number is None or isinstance(value, float) and not value.is_integer():
        add(finding(
            "ds_config %s is an integer" % key, "fail", "ds_config", "%s: %r" % (key, value),
            "an integer", "write a number (Megatron-DeepSpeed does not resolve 'auto')",
        ))
        return None
    return number


def validate(
    spec: Mapping[str, Any],
    ds_config: Optional[Mapping[str, Any]] = None,
    cluster: Optional[Mapping[str, Any]] = None,
    resume_checkpoint: Optional[Mapping[str, Any]] = None,
    deepspeed_version: Optional[str] = None,
    script: Optional[Mapping[str, Any]] = None,
) -> List[Dict[str, str]]:
    """Every check of a job against Megatron-DeepSpeed's and DeepSpeed's own rules.

    ``spec``: normalize()'s output, or parse_train_script()['spec'].
    ``ds_config``: the ds_config.json dict; None when the templates will write it from the
    spec (then the JSON-vs-arguments checks hold by construction and are not run).
    ``cluster``: {nodes, gpus_per_node, gpu_memory_mib (optional), hosts (optional
    {host: slots} from parse_hostfile)}; gpus_per_node defaults to the spec's.
    ``resume_checkpoint``: {tp, pp, no_pipeline_parallel (optional)} of the checkpoint to load.
    ``deepspeed_version``: picks the Megatron-DeepSpeed era of the flag table (before_rebase
    below 0.16.1; default the stack profile's era), the universal-checkpoint advice and the
    ZeRO-2 estimator.
    ``script``: parse_train_script()'s result, for the launcher and --deepspeed checks and its
    parse findings.

    Returns findings {check, status: pass|fail|warn, component, found, expected, fix}.
    """
    return judge(read_input(spec, ds_config, cluster, resume_checkpoint, deepspeed_version, script))


class Facts(NamedTuple):
    """What the rules derive from a job before judging it, once: the parallel layout and batch
    arithmetic (spec.derive), the micro and global batch Megatron will use (each with a note on
    where it came from), the ZeRO setup and what is recomputed."""

    derived: Dict[str, Any]
    dp: Optional[int]
    micro: Optional[int]
    micro_note: str
    global_batch: Optional[int]
    global_note: str
    zero: ZeroSetup
    recompute: Recompute


def facts_of(job: JobInput) -> Facts:
    """The Facts of a job whose cluster shape is known."""
    derived = derive(job.spec, job.nodes, job.gpus)
    dp = derived["data_parallel_size"]
    micro, micro_note = _effective_micro(job.spec, job.extra)
    global_batch, global_note = job.spec.get("global_batch_size"), ""
    if global_batch is None and micro and dp:
        global_batch = micro * dp
        global_note = " (--global-batch-size not given: Megatron uses micro x DP)"
    return Facts(derived, dp, micro, micro_note, global_batch, global_note,
                 zero_setup(job.spec, job.ds), recompute(job.spec, job.flags))


def judge(job: JobInput) -> List[Dict[str, str]]:
    """The findings for one job input (inputs.read), in the order validate.yml prints them: what
    reading a train.sh found, the cluster's shape (nothing else is judged without it), then each
    rule of RULES."""
    findings: List[Dict[str, str]] = list(job.findings)
    if not _check_cluster(job, findings.append):
        return findings
    facts = facts_of(job)
    for rule in RULES:
        rule(job, facts, findings.append)
    return findings


def _check_cluster(job: JobInput, add: Callable[[Dict[str, str]], None]) -> bool:
    """The cluster's shape, ranks per node against the node's GPUs, and the hostfile; False when
    the shape is unknown (nothing else can be judged)."""
    nodes, job_gpus, node_gpus = job.nodes, job.gpus, job.node_gpus
    if not nodes or not job_gpus:
        add(finding(
            "cluster shape known", "fail", "cluster", "nodes=%s gpus_per_node=%s" % (nodes, job_gpus),
            "nodes >= 1 and gpus_per_node >= 1",
            "put the nodes in the inventory group megatron_nodes, or pass nodes= and gpus_per_node=",
        ))
        return False
    if node_gpus is not None and job_gpus > node_gpus:
        add(finding(
            "ranks per node <= GPUs per node", "fail", "cluster",
            "%d ranks per node, %d GPUs per node" % (job_gpus, node_gpus), "<= %d" % node_gpus,
            "set megatron_job_gpus_per_node (deepspeed --num_gpus) to %d" % node_gpus,
        ))
    elif node_gpus is not None and job_gpus < node_gpus:
        add(finding(
            "ranks per node == GPUs per node", "warn", "cluster",
            "%d ranks per node, %d GPUs per node" % (job_gpus, node_gpus), str(node_gpus),
            "%d GPUs per node stay idle; set megatron_job_gpus_per_node: %d if that is not meant"
            % (node_gpus - job_gpus, node_gpus),
        ))
    add(finding("world size", "pass", "cluster", "%d nodes x %d GPUs = %d" % (nodes, job_gpus, nodes * job_gpus),
                "nodes x GPUs per node"))
    if job.hosts:
        _check_hosts(job.hosts, nodes, job_gpus, add)
    return True


MEMORY_SHAPE_KEYS = ("num_layers", "hidden_size", "num_attention_heads", "seq_length", "max_position_embeddings")


def _check_memory(job: JobInput, facts: Facts, add: Add) -> None:
    """The per-GPU memory estimate, where the model's shape and the data-parallel size are known."""
    derived, dp, micro, global_batch, zero = facts.derived, facts.dp, facts.micro, facts.global_batch, facts.zero
    if not dp or not all(job.spec.get(key) for key in MEMORY_SHAPE_KEYS):
        return
    mem_derived = dict(derived)
    mem_derived["micro_batch_size"] = micro or 1
    if micro and global_batch and global_batch % (micro * dp) == 0:
        mem_derived["gradient_accumulation_steps"] = global_batch // (micro * dp)
    setup = {"stage": zero.stage, "offload_optimizer": zero.offload_optimizer, "offload_param": zero.offload_param,
             "reduce_bucket_size": zero.reduce_bucket_size, "allgather_bucket_size": zero.allgather_bucket_size}
    check_memory(job.spec, mem_derived, setup, job.deepspeed_version, facts.recompute.kind, job.gpu_memory_mib, add)


def _check_grouped_query_attention(job: JobInput, facts: Facts, add: Add) -> None:
    """Fewer key/value heads than attention heads cannot train on Megatron-DeepSpeed 4efb479d:
    ParallelAttention.forward splits the fused QKV output into equal thirds
    (each_hidden_size = mixed_x_layer.shape[-1] // 3) unless DeepSpeed sequence parallelism is
    on, which is right only without grouping (measured on H200: 16 heads with 4 KV heads reached
    flash attention as 8 query and 32 key/value heads, docs/benchmarks.md). The finding names the
    head era, since a plan refused by it says so in its first line; the before_rebase era (9446eaac)
    has no --num-key-value-heads at all, which the check that the flag exists already fails."""
    kv_heads, heads = job.spec.get("num_key_value_heads"), job.spec.get("num_attention_heads")
    if kv_heads is None or heads is None or kv_heads == heads or job.era != HEAD:
        return
    if heads % kv_heads:
        add(finding("num_attention_heads % num_key_value_heads == 0", "fail", "model",
                    "%d heads, %d key/value heads" % (heads, kv_heads), "a divisor of %d" % heads,
                    "set megatron_job_num_key_value_heads to a divisor of the heads (Megatron asserts it)"))
        return
    add(finding("grouped-query attention", "fail", "model",
                "%d key/value heads for %d heads on the head era (Megatron-DeepSpeed 4efb479d)" % (kv_heads, heads),
                "num_key_value_heads null or %d" % heads,
                "set megatron_job_num_key_value_heads: null: that checkout's ParallelAttention.forward splits the "
                "fused QKV output into equal thirds, so grouped-query attention feeds wrong shapes to attention"))


def _check_hosts(hosts: Mapping[str, int], nodes: int, job_gpus: int, add: Callable[[Dict[str, str]], None]) -> None:
    if len(hosts) != nodes:
        add(finding(
            "hostfile hosts == nodes", "fail", "hostfile", "%d hosts" % len(hosts), "%d nodes" % nodes,
            "list exactly the training nodes in the hostfile (DeepSpeed uses every host listed, "
            "or the first --num_nodes of them)",
        ))
    short = {host: slots for host, slots in hosts.items() if slots < job_gpus}
    if short:
        add(finding(
            "hostfile slots >= GPUs per node", "fail", "hostfile",
            ", ".join("%s slots=%d" % item for item in short.items()), "slots=%d" % job_gpus,
            "set slots to the GPU count of each node; DeepSpeed starts one rank per slot",
        ))
    if len(set(hosts.values())) > 1:
        add(finding(
            "hostfile slots identical", "warn", "hostfile",
            ", ".join("%s slots=%d" % item for item in hosts.items()), "the same slots on every host",
            "Megatron's parallel groups assume the same GPU count per node",
        ))


def _check_launcher(job: JobInput, facts: Facts, add: Add) -> None:
    """A train.sh's launcher line and its --deepspeed switches (a spec's train.sh is rendered right)."""
    if not job.script:
        return
    script, nodes, hosts = job.script, job.nodes, job.hosts
    launcher = script.get("launcher") or {}
    if launcher.get("command") not in (None, "deepspeed"):
        add(finding(
            "launcher is deepspeed", "warn", "launcher", launcher.get("command"), "deepspeed",
            "this collection launches with the deepspeed runner (pdsh/openmpi/slurm); torchrun "
            "works per node but is not what train.yml starts",
        ))
    num_nodes = launcher.get("num_nodes")
    num_gpus = launcher.get("num_gpus")  # already the spec's gpus_per_node: judged with the cluster
    if num_nodes is not None and num_nodes > 0 and num_nodes != nodes:
        add(finding(
            "launcher --num_nodes == nodes", "fail", "launcher", "--num_nodes=%d" % num_nodes,
            "--num_nodes=%d" % nodes,
            "the job would run on %d nodes, not %d: set --num_nodes to the node count (or drop it "
            "to use every hostfile host)" % (num_nodes, nodes),
        ))
    if (launcher.get("include") or launcher.get("exclude")) and (
        (num_nodes is not None and num_nodes >= 0) or (num_gpus is not None and num_gpus >= 0)
    ):
        add(finding(
            "launcher include/exclude alone", "fail", "launcher",
            "--include/--exclude with --num_nodes/--num_gpus", "one or the other",
            "DeepSpeed raises 'Cannot specify num_nodes/gpus with include/exclude'",
        ))
    if launcher.get("launcher") and launcher["launcher"].lower() not in LAUNCHERS:
        add(finding(
            "launcher backend", "fail", "launcher", launcher["launcher"], "|".join(LAUNCHERS),
            "DeepSpeed raises NotImplementedError('Unknown launcher ...')",
        ))
    if launcher.get("command") == "deepspeed" and nodes > 1 and not launcher.get("hostfile") and not hosts:
        add(finding(
            "launcher hostfile", "warn", "launcher", "no --hostfile",
            "--hostfile listing the %d nodes" % nodes,
            "DeepSpeed then reads /job/hostfile; without it it runs on local GPUs only and raises "
            "'Num nodes is >1 but no extra nodes available via hostfile'. Pass --hostfile "
            "(train.yml renders one) or validate with hostfile=",
        ))
    if not script.get("deepspeed"):
        add(finding(
            "--deepspeed given", "fail", "arguments", "no --deepspeed", "--deepspeed",
            "without --deepspeed Megatron trains without DeepSpeed and ignores ds_config.json; add --deepspeed",
        ))
    elif not script.get("deepspeed_config"):
        add(finding(
            "--deepspeed_config given", "fail", "arguments", "no --deepspeed_config",
            "--deepspeed_config PATH",
            "Megatron-DeepSpeed opens args.deepspeed_config at start; pass --deepspeed_config "
            "ds_config.json (underscore spelling)",
        ))


def _check_arguments(job: JobInput, facts: Facts, add: Add) -> None:
    spec, era, extra, dropped, script = job.spec, job.era, job.extra, job.dropped, job.from_script
    where = "train.sh" if script else "megatron_job_extra_args"
    for parsed in split_args(extra, era):
        flag, values = parsed.flag, parsed.values
        if flag == "":
            continue
        if flag in PRECISION_FLAGS:
            continue  # judged by the precision checks
        note = classify(flag, era)
        shown = " ".join((flag,) + tuple(values))
        if note.status in ("obsolete", "misspelt", "unknown", "era_missing"):
            fix = note.message
            if note.replacement and note.status == "obsolete" and values:
                fix += " (%s %s)" % (note.replacement, values[0])
            add(finding("%s accepted by pretrain_gpt.py" % flag, "fail", "arguments", shown,
                        note.replacement or "no such flag", fix))
            continue
        if note.status == "deprecated":
            add(finding("%s (deprecated upstream)" % flag, "pass", "arguments", shown,
                        note.replacement or "-", note.message))
        if not script and flag in SPEC_FLAG_KEYS:
            key = SPEC_FLAG_KEYS[flag]
            add(finding(
                "%s set by the spec, not extra_args" % flag, "fail", "arguments",
                "%s: %s" % (where, shown), "%s%s" % (PREFIX, key),
                "argparse keeps the last occurrence, so ds_config.json and train.sh would "
                "disagree; set %s%s instead" % (PREFIX, key),
            ))
            continue
        try:
            coerce(flag, list(values), era)
        except ArgValueError as exc:
            add(finding("%s value" % flag, "fail", "arguments", shown, expected_value(args_for(era)[flag]),
                        "argparse stops with: %s" % exc))
    for flag, reason in dropped:
        key = SPEC_FLAG_KEYS.get(flag, flag)
        if flag in DROPPED_IS_ERROR:
            add(finding(
                "%s available" % flag, "fail", "arguments", "%s%s asks for %s" % (PREFIX, key, flag),
                "a Megatron-DeepSpeed that has %s" % flag,
                "%s; %s" % (reason, DROPPED_IS_ERROR[flag][1]),
            ))
        else:
            add(finding(
                "%s available" % flag, "warn", "arguments", "%s%s asks for %s" % (PREFIX, key, flag), "left out",
                "%s, so train.sh leaves it out and the setting has no effect on this stack" % reason,
            ))
    # Required by validate_args / the tokenizer.
    required = (
        ("num_layers", "--num-layers"), ("hidden_size", "--hidden-size"),
        ("num_attention_heads", "--num-attention-heads"),
        ("max_position_embeddings", "--max-position-embeddings"), ("seq_length", "--seq-length"),
    )
    for key, flag in required:
        if spec.get(key) is None:
            add(finding(
                "%s given" % flag, "fail", "arguments", "missing", flag,
                "Megatron-DeepSpeed asserts '%s argument is None'; add %s" % (key, flag),
            ))
    if spec.get("train_iters") is None and "--train-samples" not in extra:
        add(finding(
            "--train-iters or --train-samples given", "fail", "arguments", "neither",
            "--train-iters N", "add --train-iters (or --train-samples)",
        ))
    lr, min_lr = spec.get("lr"), spec.get("min_lr")
    if isinstance(lr, (int, float)) and isinstance(min_lr, (int, float)) and min_lr > lr:
        add(finding("--min-lr <= --lr", "fail", "arguments", "min_lr %r > lr %r" % (min_lr, lr),
                    "min_lr <= lr", "Megatron asserts args.min_lr <= args.lr; lower --min-lr"))
    tokenizer = spec.get("tokenizer_type") or "GPT2BPETokenizer"
    needs = TOKENIZER_FILES.get(tokenizer, ())
    missing = [key for key in needs if not spec.get(key)]
    if missing:
        add(finding(
            "%s files given" % tokenizer, "fail", "data",
            " ".join("%s%s=%s" % (PREFIX, key, spec.get(key)) for key in needs),
            " and ".join("--%s" % key.replace("_", "-") for key in needs),
            "%s asserts %s is not None when it builds the tokenizer, on every rank after the job started "
            "(megatron/tokenizer/tokenizer.py:19-43 at 4efb479d); set %s to the path on the nodes"
            % (tokenizer, " and ".join("args.%s" % key for key in needs), " and ".join(PREFIX + key for key in missing)),
        ))
    if tokenizer == "NullTokenizer" and spec.get("vocab_size") is None:
        add(finding("NullTokenizer vocab size", "fail", "data", "no --vocab-size", "--vocab-size N",
                    "NullTokenizer asserts args.vocab_size is not None"))


def _check_spec_values(job: JobInput, facts: Facts, add: Add) -> None:
    """The spec's own values against the era's argparse: a choice one Megatron-DeepSpeed has and
    the other lacks (``--lr-decay-style inverse-square-root`` before the rebase) renders into a
    train.sh that stops at parse_args. A train.sh's values are judged where it is read."""
    if job.from_script:
        return
    table = args_for(job.era)
    for key, flag, kind in SPEC_ARGS:
        if kind != "value" or flag not in table or not job.flags.get(flag):
            continue
        values = job.flags[flag][0]  # the spec's occurrence: extra_args come after it
        try:
            coerce(flag, list(values), job.era)
        except ArgValueError as exc:
            add(finding(
                "%s value" % flag, "fail", "arguments", "%s%s: %s" % (PREFIX, key, " ".join(values)),
                expected_value(table[flag]),
                "the profile's Megatron-DeepSpeed (%s) stops at parse_args with: %s; set %s%s to a value it takes"
                % (job.era, exc, PREFIX, key)))


def _tp_allreduce_gib(spec: Mapping[str, Any], derived: Mapping[str, Any]) -> Optional[float]:
    """GiB each rank all-reduces for tensor parallelism per iteration: 4 all-reduces (2 forward,
    2 backward) of micro x seq x hidden activations per layer of its stage and micro-batch, 2 bytes
    each in bf16/fp16 and 4 in fp32. None where the shape is not known."""
    layers, seq, hidden = spec.get("num_layers"), spec.get("seq_length"), spec.get("hidden_size")
    micro = spec.get("micro_batch_size")
    grad_acc = derived.get("gradient_accumulation_steps")
    pp = derived.get("pipeline_parallel") or 1
    if not (layers and seq and hidden and micro and grad_acc):
        return None
    width = 4 if (spec.get("precision") or "fp32") == "fp32" else 2
    return 4.0 * (layers / pp) * micro * seq * hidden * width * grad_acc / 2 ** 30


def _check_parallelism(job: JobInput, facts: Facts, add: Add) -> None:
    spec, derived, gpus = job.spec, facts.derived, job.gpus
    tp, pp, world = derived["tensor_parallel"], derived["pipeline_parallel"], derived["world_size"]
    sp = derived.get("sequence_parallel_size") or 1
    grid = "TP %d x PP %d" % (tp, pp) + (" x SP %d" % sp if sp > 1 else "")
    if tp > world or pp > max(1, world // tp):
        add(finding(
            "TP x PP <= world size", "fail", "parallelism", "TP %d x PP %d on %d GPUs" % (tp, pp, world),
            "TP <= %d, PP <= world / TP" % world,
            "Megatron silently clamps TP to min(TP, world) and PP to min(PP, world // TP), so the "
            "job would not run the plan you wrote; lower them",
        ))
    if derived["data_parallel_size"] is None:
        add(finding(
            "TP x PP divides the world size", "fail", "parallelism",
            "world %d, %s = %d" % (world, grid, tp * pp * sp), "a divisor of %d" % world,
            "Megatron asserts: " + MDS_WORLD_MSG.format(world, tp, pp, sp)
            + "; choose %s among the divisors of %d (%s)" % (
                "TP x PP x SP" if sp > 1 else "TP x PP", world,
                " x ".join(PREFIX + key for key in ("tensor_parallel", "pipeline_parallel", "ds_sequence_parallel_size")[:3 if sp > 1 else 2])),
        ))
    else:
        add(finding("data parallel size", "pass", "parallelism",
                    "DP = %d / (%s) = %d" % (world, grid, derived["data_parallel_size"]),
                    "world / (TP x PP x SP)" if sp > 1 else "world / (TP x PP)"))
    if tp > gpus:
        # Legal: Megatron-DeepSpeed only asserts that TP x PP divides the world size
        # (megatron/arguments.py:75 and 104, megatron/core/parallel_state.py:138 at 4efb479d), so
        # this is a cost, not an error: each tensor-parallel group's all-reduces leave the node.
        traffic = _tp_allreduce_gib(spec, derived)
        add(finding(
            "TP <= GPUs per node", "warn", "parallelism",
            "TP %d, %d GPUs per node: each tensor-parallel group spans %d nodes" % (tp, gpus, -(-tp // gpus)),
            "TP <= %d" % gpus,
            "Megatron-DeepSpeed runs it, but slowly: tensor parallelism all-reduces the activations of every "
            "layer twice forward and twice backward%s over the inter-node fabric instead of NVLink (the guide: "
            "tensor parallel inside a node, pipeline across nodes); set TP <= %d and raise PP, which sends one "
            "activation per stage boundary" % (
                " (about %.1f GiB per rank per iteration)" % traffic if traffic else "", gpus),
        ))
    elif gpus % tp:
        add(finding(
            "TP divides GPUs per node", "warn", "parallelism", "TP %d, %d GPUs per node" % (tp, gpus),
            "a divisor of %d" % gpus, "some tensor-parallel groups straddle two nodes; pick a divisor of %d" % gpus,
        ))
    else:
        add(finding("TP inside a node", "pass", "parallelism", "TP %d, %d GPUs per node" % (tp, gpus),
                    "TP <= GPUs per node"))
    if spec.get("no_pipeline_parallel") and pp > 1:
        add(finding(
            "--no-pipeline-parallel needs PP 1", "fail", "parallelism",
            "--no-pipeline-parallel with PP %d" % pp, "PP 1",
            "Megatron-DeepSpeed asserts '%s': drop --no-pipeline-parallel (and use ZeRO-0/1) or set PP 1" % MDS_NO_PP_MSG,
        ))
    if sp > 1:
        _check_ds_sequence_parallel(spec, sp, tp, pp, add)
    if spec.get("sequence_parallel") and tp == 1:
        add(finding(
            "--sequence-parallel with TP > 1", "warn", "parallelism", "--sequence-parallel with TP 1",
            "TP > 1", "Megatron turns sequence parallelism off when TP is 1; drop the flag",
        ))


def _check_ds_sequence_parallel(spec: Mapping[str, Any], sp: int, tp: int, pp: int,
                                add: Callable[[Dict[str, str]], None]) -> None:
    """DeepSpeed-Ulysses (--ds-sequence-parallel-size) as Megatron-DeepSpeed HEAD builds it
    (4efb479d): each rank keeps seq / SP tokens (pretrain_gpt.py:138 asserts the division) and
    the attention all-to-all hands each rank heads / SP heads (megatron/model/transformer.py:618
    asserts the division when it builds the layer); Megatron's own sequence parallelism cannot
    run beside it (megatron/initialize.py:247-252 raises); and it runs only without tensor and
    pipeline parallelism: initialize_model_parallel asserts TP == 1 and PP == 1 whenever SP > 1
    (megatron/core/parallel_state.py:145-147), which _initialize_distributed calls on every rank
    that sees a GPU (megatron/initialize.py:240-256). validate_args itself lets TP x PP x SP
    through (arguments.py:101-108 only asserts that it divides the world), so the job dies after
    the argument check, at the first parallel-group setup. All of these stop the job at start-up."""
    if tp > 1 or pp > 1:
        add(finding(
            "DeepSpeed SP without TP or PP", "fail", "parallelism",
            "ds_sequence_parallel_size %d with TP %d, PP %d" % (sp, tp, pp), "TP 1 and PP 1 with SP > 1",
            "Megatron-DeepSpeed asserts 'DeepSpeed's sequence parallel does not work with tensor parallel or "
            "pipeline parallel' when it builds the parallel groups (megatron/core/parallel_state.py:146 at "
            "4efb479d): set megatron_job_tensor_parallel: 1 and megatron_job_pipeline_parallel: 1, or "
            "megatron_job_ds_sequence_parallel_size: 1 (in a train.sh: --tensor-model-parallel-size 1 "
            "--pipeline-model-parallel-size 1, or drop --ds-sequence-parallel-size)",
        ))
    heads, seq = spec.get("num_attention_heads"), spec.get("seq_length")
    if heads:
        ok = heads % sp == 0
        add(finding(
            "attention heads % SP == 0", "pass" if ok else "fail", "parallelism",
            "%d heads, ds_sequence_parallel_size %d" % (heads, sp), "heads divisible by SP",
            "" if ok else "Megatron-DeepSpeed asserts num_attention_heads %% sequence parallel size == 0 "
            "when it builds the attention (megatron/model/transformer.py:618): set "
            "megatron_job_ds_sequence_parallel_size to a divisor of %d" % heads,
        ))
    if seq:
        ok = seq % sp == 0
        add(finding(
            "sequence length % SP == 0", "pass" if ok else "fail", "parallelism",
            "seq_length %d, ds_sequence_parallel_size %d" % (seq, sp), "seq_length divisible by SP",
            "" if ok else "pretrain_gpt.py's get_batch asserts seq_length %% sequence parallel size == 0 at the "
            "first batch (pretrain_gpt.py:138): set megatron_job_ds_sequence_parallel_size to a divisor of %d "
            "or change megatron_job_seq_length" % seq,
        ))
    if spec.get("sequence_parallel"):
        add(finding(
            "one sequence parallelism", "fail", "parallelism",
            "--sequence-parallel with ds_sequence_parallel_size %d" % sp, "one of them",
            "Megatron-DeepSpeed raises 'sequence_parallel_size > 1 enables DeepSpeed's sequence parallel, which "
            "is not compatible with Megatron-LM's sequence parallel' (megatron/initialize.py:247-252): set "
            "megatron_job_sequence_parallel: false, or megatron_job_ds_sequence_parallel_size: 1",
        ))


def _check_model(job: JobInput, facts: Facts, add: Add) -> None:
    spec, tp, pp = job.spec, job.tp, job.pp
    heads, hidden, layers = spec.get("num_attention_heads"), spec.get("hidden_size"), spec.get("num_layers")
    seq, positions = spec.get("seq_length"), spec.get("max_position_embeddings")
    # Megatron-DeepSpeed's own default when the job sets none: 4h, or for the llama preset
    # (--swiglu) int(8h/3 / 64) x 64 (megatron/arguments.py 287-296 at 4efb479d).
    ffn = spec.get("ffn_hidden_size") or default_ffn_hidden_size(spec, hidden)
    if heads:
        ok = heads % tp == 0
        add(finding(
            "attention heads % TP == 0", "pass" if ok else "fail", "model", "%d heads, TP %d" % (heads, tp),
            "heads divisible by TP",
            "" if ok else "Megatron asserts '%d is not divisible by %d' (heads per TP rank); pick TP "
            "(%stensor_parallel) among the divisors of %d or change the head count (%snum_attention_heads)"
            % (heads, tp, PREFIX, heads, PREFIX),
        ))
    if hidden and heads:
        ok = hidden % heads == 0
        add(finding(
            "hidden % heads == 0", "pass" if ok else "fail", "model", "hidden %d, %d heads" % (hidden, heads),
            "hidden divisible by heads",
            "" if ok else "Megatron asserts hidden_size %% num_attention_heads == 0 (without "
            "--kv-channels); change --hidden-size or --num-attention-heads (%shidden_size, %snum_attention_heads)"
            % (PREFIX, PREFIX),
        ))
    if ffn and ffn % tp:
        # ParallelMLP (megatron/model/transformer.py 112-127 at 4efb479d) builds fc1 2f wide under
        # --swiglu (gated), then fc2 f wide; divide() asserts on the first that TP does not divide.
        fc1 = 2 * ffn if is_llama(spec) else ffn
        layer, width = ("ColumnParallelLinear", fc1) if fc1 % tp else ("RowParallelLinear", ffn)
        add(finding(
            "ffn hidden % TP == 0", "fail", "model", "ffn %d, TP %d" % (ffn, tp), "ffn divisible by TP",
            "%s asserts '%d is not divisible by %d'; change --ffn-hidden-size" % (layer, width, tp),
        ))
    if layers:
        ok = layers % pp == 0
        add(finding(
            "layers % PP == 0", "pass" if ok else "warn", "model", "%d layers, PP %d" % (layers, pp),
            "layers divisible by PP",
            "" if ok else "DeepSpeed's pipeline partitions the layers unevenly (partition_method "
            "type:transformer); the largest stage sets memory and step time. Pick PP among the "
            "divisors of %d" % layers,
        ))
    if seq and positions:
        ok = positions >= seq
        add(finding(
            "max-position-embeddings >= seq-length", "pass" if ok else "fail", "model",
            "max_position_embeddings %d, seq_length %d" % (positions, seq), ">= seq_length",
            "" if ok else "Megatron asserts args.max_position_embeddings >= args.seq_length; raise "
            "--max-position-embeddings to %d" % seq,
        ))


def _effective_micro(spec: Mapping[str, Any], extra: List[str]) -> Tuple[Optional[int], str]:
    """(the micro batch the batch rules use, a note when it is not --micro-batch-size): a job
    without one is judged with the obsolete --batch-size it may still pass."""
    micro = spec.get("micro_batch_size")
    if micro is not None:
        return micro, ""
    obsolete = [p for p in split_args(extra) if p.flag == "--batch-size" and p.values]
    if obsolete and int_or_none(obsolete[-1].values[0]):  # a value of the user's own argument list
        intended = int(obsolete[-1].values[0])
        return intended, "--micro-batch-size missing; the obsolete --batch-size %d taken as the intended micro batch below" % intended
    return None, "--micro-batch-size missing"


def _check_micro(job: JobInput, facts: Facts, add: Add) -> None:
    """Megatron-DeepSpeed needs --micro-batch-size."""
    if job.spec.get("micro_batch_size") is not None:
        return
    intended = facts.micro
    add(finding(
        "--micro-batch-size given", "fail", "batch", "missing" if intended is None else
        "missing (only the obsolete --batch-size %d)" % intended, "--micro-batch-size N (> 0)",
        "Megatron-DeepSpeed asserts args.micro_batch_size is not None; add --micro-batch-size%s"
        % (" %d" % intended if intended else ""),
    ))


def _ds_batch(ds: Dict[str, Any], dp: int, add: Add) -> Tuple[Optional[int], Optional[int], Optional[int], str]:
    """DeepSpeed's _set_batch_related_parameters: fill the missing one of train_batch_size,
    train_micro_batch_size_per_gpu, gradient_accumulation_steps from the other two (world_size
    there is the data-parallel size)."""
    train = _ds_int(ds, "train_batch_size", add)
    micro = _ds_int(ds, "train_micro_batch_size_per_gpu", add)
    acc = _ds_int(ds, "gradient_accumulation_steps", add)
    derived = ""
    if train is not None and micro is not None and acc is not None:
        pass
    elif train is not None and micro is not None:
        acc = train // micro // dp
        derived = "gradient_accumulation_steps = %d // %d // %d = %d" % (train, micro, dp, acc)
    elif train is not None and acc is not None:
        micro = train // dp // acc
        derived = "train_micro_batch_size_per_gpu = %d // %d // %d = %d" % (train, dp, acc, micro)
    elif micro is not None and acc is not None:
        train = micro * acc * dp
        derived = "train_batch_size = %d * %d * %d = %d" % (micro, acc, dp, train)
    elif train is not None:
        acc, micro = 1, train // dp
        derived = "gradient_accumulation_steps = 1, train_micro_batch_size_per_gpu = %d // %d = %d" % (train, dp, micro)
    elif micro is not None:
        train, acc = micro * dp, 1
        derived = "gradient_accumulation_steps = 1, train_batch_size = %d * %d = %d" % (micro, dp, train)
    return train, micro, acc, derived


def _check_batch(job: JobInput, facts: Facts, add: Add) -> None:
    ds, from_script, dp = job.ds, job.from_script, facts.dp
    micro, micro_note, global_batch, global_note = facts.micro, facts.micro_note, facts.global_batch, facts.global_note
    if dp is None:
        return
    if micro is not None and micro < 1:
        add(finding("--micro-batch-size > 0", "fail", "batch", micro, "> 0", "Megatron asserts micro_batch_size > 0"))
        return
    if micro and global_batch:
        ok = global_batch % (micro * dp) == 0
        add(finding(
            "global batch divisible by micro x DP", "pass" if ok else "fail", "batch",
            "global %d, micro %d, DP %d%s" % (global_batch, micro, dp, global_note),
            "a multiple of %d" % (micro * dp),
            "" if ok else "Megatron asserts: %s; set --global-batch-size to a multiple of %d (e.g. %d)"
            % (MDS_GLOBAL_BATCH_MSG.format(global_batch, micro, dp), micro * dp,
               max(1, global_batch // (micro * dp)) * micro * dp),
        ))
    if ds is None:
        if micro and global_batch:
            acc = global_batch // (micro * dp)
            ok = global_batch == micro * acc * dp
            add(finding(
                "train_batch_size == micro x grad_acc x DP", "pass" if ok else "fail", "batch",
                "%d = %d x %d x %d" % (global_batch, micro, acc, dp) if ok else
                DS_BATCH_MSG.format(global_batch, micro, acc, dp),
                "equal (no ds_config.json given)" if from_script else "equal (ds_config.json is written from the spec)",
                "" if ok else "DeepSpeed asserts it; make megatron_job_global_batch_size a multiple of %d" % (micro * dp),
            ))
        return
    train, ds_micro, acc, how = _ds_batch(ds, dp, add)
    if train is None and ds_micro is None:
        add(finding("ds_config batch sizes", "fail", "ds_config", "neither given", "train_batch_size and "
                    "train_micro_batch_size_per_gpu", "DeepSpeed asserts: " + DS_BATCH_MISSING_MSG))
        return
    via = " (DeepSpeed derives %s)" % how if how else ""
    if train is not None and ds_micro is not None and acc is not None:
        ok = train == ds_micro * acc * dp
        add(finding(
            "ds_config train_batch_size == micro x grad_acc x DP", "pass" if ok else "fail", "ds_config",
            ("%d == %d * %d * %d" % (train, ds_micro, acc, dp) if ok else DS_BATCH_MSG.format(train, ds_micro, acc, dp)) + via,
            "train_batch_size == train_micro_batch_size_per_gpu * gradient_accumulation_steps * DP",
            "" if ok else "DeepSpeed asserts this at deepspeed.initialize (world_size there is the "
            "data-parallel size %d); make the three agree, or give two and let DeepSpeed compute the third" % dp,
        ))
    if micro is not None and ds_micro is not None:
        ok = ds_micro == micro
        micro_via = " (DeepSpeed derives it: %s)" % how if "train_micro_batch_size_per_gpu =" in how else ""
        add(finding(
            "ds_config micro batch == --micro-batch-size", "pass" if ok else "fail", "batch",
            "ds_config %d%s, --micro-batch-size %s" % (
                ds_micro, micro_via, micro if not micro_note else "%d (%s)" % (micro, micro_note)),
            "equal", "" if ok else "set train_micro_batch_size_per_gpu to %d (Megatron's data loader and "
            "DeepSpeed must agree on the micro batch)" % micro,
        ))
    if global_batch is not None and train is not None:
        ok = train == global_batch
        add(finding(
            "ds_config train_batch_size == --global-batch-size", "pass" if ok else "fail", "batch",
            "ds_config %d, global batch %d%s" % (train, global_batch, global_note), "equal",
            "" if ok else "Megatron-DeepSpeed resets DeepSpeed's batch to its global batch every step "
            "(DeepSpeed then raises '%s' when it does not divide); set train_batch_size to %d or "
            "--global-batch-size to %d" % (DS_DIVISIBLE_MSG, global_batch, train),
        ))


def _check_upstream_asserts(job: JobInput, facts: Facts, add: Add) -> None:
    """validate_args' option checks, restated as data (upstream_asserts)."""
    for refusal in upstream_refusals(job.flags, job.era):
        add(refusal)


# Lines of megatron/microbatches.py's RampupBatchsizeNumMicroBatches and of megatron/training.py's
# uses of the intervals, per era: 4efb479d (HEAD) and 9446eaac (before_rebase).
RAMPUP_LINES = {"head": {"format": 21, "start": 104, "diff": 110, "increment": 111, "divisible": 113,
                         "increments": 120, "consistency": 137},
                "before_rebase": {"format": 34, "start": 117, "diff": 123, "increment": 124, "divisible": 126,
                                  "increments": 133, "consistency": 150}}
INTERVAL_LINES = {"head": {"eval": 1558, "log": 1106}, "before_rebase": {"eval": 1279, "log": 901}}


def _rampup_refusal(values: Tuple[str, ...], global_batch: int, lines: Mapping[str, int]) -> Optional[Tuple[str, str]]:
    """(what upstream asserts, at which line) for a --rampup-batch-size its microbatch calculator
    refuses when it is built (build_num_microbatches_calculator, at start-up), else None."""
    if len(values) != 3:
        return ("expected the following format: --rampup-batch-size <start batch size> <batch size incerement> "
                "<ramp-up samples>", "microbatches.py:%d" % lines["format"])
    try:
        start, increment, samples = (int(v) for v in values)
    except ValueError:
        return ("int() of each value", "microbatches.py:%d" % (lines["format"] + 3))
    if start <= 0:
        return ("start_batch_size > 0", "microbatches.py:%d" % lines["start"])
    if global_batch - start < 0:
        return ("global batch size - start batch size >= 0", "microbatches.py:%d" % lines["diff"])
    if increment <= 0:
        return ("batch_size_increment > 0", "microbatches.py:%d" % lines["increment"])
    if (global_batch - start) % increment:
        return ("expected global batch size interval (%d) to be divisible by global batch size increment (%d)"
                % (global_batch - start, increment), "microbatches.py:%d" % lines["divisible"])
    if samples < 0:
        return ("ramp-up samples >= 0", "microbatches.py:%d" % (lines["increments"] - 1))
    if global_batch == start:
        return ("ramp-up samples / number of increments with no increment (ZeroDivisionError)",
                "microbatches.py:%d" % lines["increments"])
    return None


def _check_rampup(job: JobInput, facts: Facts, add: Add) -> None:
    """--rampup-batch-size <start> <increment> <samples>: Megatron's RampupBatchsizeNumMicroBatches
    asserts its shape when it is built at start-up, and the train loop's first
    update_num_microbatches (megatron/training.py:1252 at 4efb479d, consistency check on) asserts
    that the current batch, the start batch on a fresh run, divides by micro x DP. Later ramp
    steps are start + k x increment; one that does not divide stops the job when it is reached."""
    values = (job.flags.get("--rampup-batch-size") or [None])[-1]
    if values is None or not facts.global_batch:
        return
    lines = RAMPUP_LINES["before_rebase" if job.era == "before_rebase" else "head"]
    where = "train.sh" if job.from_script else "megatron_job_extra_args"
    shown = "--rampup-batch-size %s, global batch %d" % (" ".join(values), facts.global_batch)
    refusal = _rampup_refusal(values, facts.global_batch, lines)
    if refusal:
        add(finding("--rampup-batch-size accepted", "fail", "batch", shown, "start > 0, increment > 0, start < "
                    "global, (global - start) a multiple of increment",
                    "Megatron-DeepSpeed's microbatch calculator asserts %s (megatron/%s at %s); fix "
                    "--rampup-batch-size in %s" % (
                        refusal[0], refusal[1], "9446eaac" if job.era == "before_rebase" else "4efb479d", where)))
        return
    unit = (facts.micro or 0) * (facts.dp or 0)
    if not unit:
        return
    start, increment = int(values[0]), int(values[1])
    if start % unit:
        add(finding("ramp-up start batch divisible by micro x DP", "fail", "batch", shown, "a multiple of %d" % unit,
                    "Megatron asserts 'current global batch size (%d) is not divisible by micro-batch-size (%d) "
                    "times data parallel size (%d)' at the first iteration (megatron/microbatches.py:%d); start the "
                    "ramp-up at a multiple of %d" % (start, facts.micro, facts.dp, lines["consistency"], unit)))
    elif increment % unit:
        add(finding("ramp-up increment divisible by micro x DP", "warn", "batch", shown, "a multiple of %d" % unit,
                    "a ramp step start + k x %d that is not a multiple of %d stops the job when the run reaches it "
                    "(megatron/microbatches.py:%d); use an increment that is a multiple of %d"
                    % (increment, unit, lines["consistency"], unit)))
    else:
        add(finding("ramp-up batches divisible by micro x DP", "pass", "batch", shown, "multiples of %d" % unit))


def _check_intervals(job: JobInput, facts: Facts, add: Add) -> None:
    """--eval-interval 0 and --log-interval 0 divide by zero in the training loop: the eval sample
    count (train_iters // eval_interval, megatron/training.py:1558 at 4efb479d, when the data
    iterators are built) and the first iteration's log check (iteration % log_interval,
    training.py:1106). --save-interval 0 is legal: the loop tests it before dividing (1343)."""
    lines = INTERVAL_LINES["before_rebase" if job.era == "before_rebase" else "head"]
    for flag, key, kind in (("--eval-interval", "eval_interval", "eval"), ("--log-interval", "log_interval", "log")):
        value = last_value(job.flags, flag)
        if value is None or int_or_none(value) != 0:
            continue
        add(finding(
            "%s > 0" % flag, "fail", "schedule", "%s 0" % flag, ">= 1",
            "Megatron-DeepSpeed divides by it (megatron/training.py:%d at %s) and stops with ZeroDivisionError; set "
            "%s to 1 or more" % (lines[kind], "9446eaac" if job.era == "before_rebase" else "4efb479d",
                                 flag if job.from_script else PREFIX + key)))


def _check_hops(job: JobInput, facts: Facts, add: Add) -> None:
    """What each value may hold where it travels: train.sh, the sbatch script, the pdsh command
    line DeepSpeed builds for every node, .deepspeed_env, the hostfile (hops.HOPS)."""
    del facts
    for item in hop_findings(job.spec, job.deepspeed_version):
        add(item)


def _check_gpu_arch(job: JobInput, facts: Facts, add: Add) -> None:
    """The cluster's GPU against the architectures the stack profile's torch and toolkit carry
    (_stack/gpu_arch): the guide's cu117 has no Hopper code. Judged only where the GPU is known."""
    del facts
    profile = job.spec.get("stack_profile") or _stack_profiles.DEFAULT_PROFILE
    capability = _gpu_arch.capability_of(job.gpu_model) if job.gpu_model else None
    arch = _gpu_arch.arch_of(profile) if capability is not None else None
    if not arch:
        return
    check = "GPU architecture on stack profile %s" % profile
    found = "%s (compute capability %s)" % (job.gpu_model, _gpu_arch.show(capability))
    expected = "torch %s; toolkit builds %s to %s" % (" ".join(arch["torch"]), arch["toolkit"][0], arch["toolkit"][1])
    text = _gpu_arch.refusal(profile, job.gpu_model, capability)
    add(finding(check, "fail" if text else "pass", "stack", found, expected, text or ""))


# Every rule after the cluster's shape, in the order validate.yml prints their findings. Each takes
# (JobInput, Facts, add) and adds findings; a new rule is a function and a row here.
RULES: Tuple[Callable[[JobInput, Facts, Add], None], ...] = (
    _check_launcher,
    _check_arguments,
    _check_spec_values,
    _check_parallelism,
    _check_model,
    _check_grouped_query_attention,
    _check_micro,
    _check_batch,
    check_zero,
    check_precision,
    check_checkpoints,
    check_activation_checkpointing,
    _check_schedule,
    _check_upstream_asserts,
    check_flash_attn,
    check_bias_gelu_fusion,
    _check_memory,
    check_moe,
    check_startup,
    _check_rampup,
    _check_intervals,
    _check_gpu_arch,
    _check_hops,
)
