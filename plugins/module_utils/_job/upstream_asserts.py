# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Megatron-DeepSpeed's option checks restated as data, for the controller that has no checkout.

Each row is one ``assert`` of ``megatron/arguments.py`` (``validate_args`` at 4efb479d, the head
era; ``parse_args`` at 9446eaac, the cu117 era), keyed by the line it sits on at each pinned
commit, with the options it reads and a test of the argument list that is true when upstream
would refuse it. ``scripts/upstream_census.py`` lists every check of those functions and names
the row (or the rule elsewhere in the job package) that restates it; the tests run each row's
example through the upstream oracle where a checkout is present, so a row that disagrees with
upstream fails its test.

The rows read only the argument list (``Flags``: option -> the values of each occurrence), so
they judge a spec's rendered arguments and a given train.sh alike.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .._mds.args import BEFORE_REBASE, HEAD
from .findings import finding

Flags = Mapping[str, List[Tuple[str, ...]]]


def given(flags: Flags, flag: str) -> bool:
    return flag in flags


def value(flags: Flags, flag: str, default: Optional[str] = None) -> Optional[str]:
    values = flags.get(flag) or []
    return values[-1][0] if values and values[-1] else default


def number(flags: Flags, flag: str, default: float = 0) -> float:
    text = value(flags, flag)
    try:
        return float(text) if text is not None else default
    except ValueError:
        return default


def _gqa(flags: Flags) -> bool:
    """Fewer key/value heads than attention heads (validate_args defaults the former to the latter)."""
    heads = number(flags, "--num-attention-heads")
    return given(flags, "--num-key-value-heads") and number(flags, "--num-key-value-heads", heads) != heads


class Assert(NamedTuple):
    check: str                      # the finding's check name
    lines: Dict[str, int]           # era -> line of megatron/arguments.py at that era's commit
    options: Tuple[str, ...]        # what the assert reads (guard and condition), for the census
    refused: Callable[[Flags], bool]
    expected: str
    fix: str
    example: Tuple[str, ...]        # options that, added to a legal job, make upstream refuse it


ROWS: Tuple[Assert, ...] = (
    Assert("zero-bubble pipeline needs DeepSpeed", {HEAD: 80}, ("--enable-zbh1-pipeline", "--deepspeed"),
           lambda f: given(f, "--enable-zbh1-pipeline") and not given(f, "--deepspeed"),
           "--enable-zbh1-pipeline with --deepspeed", "add --deepspeed (DeepSpeed's scheduler runs the ZB-H1 pipeline)", ()),
    Assert("zero-bubble pipeline without sequence parallelism", {HEAD: 81},
           ("--enable-zbh1-pipeline", "--sequence-parallel"),
           lambda f: given(f, "--enable-zbh1-pipeline") and given(f, "--sequence-parallel"),
           "no --sequence-parallel with --enable-zbh1-pipeline", "drop one of them",
           ("--enable-zbh1-pipeline", "--sequence-parallel")),
    Assert("zero-bubble exact semantics need the pipeline", {HEAD: 83},
           ("--enable-zbh1-exact-semantics", "--enable-zbh1-pipeline"),
           lambda f: given(f, "--enable-zbh1-exact-semantics") and not given(f, "--enable-zbh1-pipeline"),
           "--enable-zbh1-pipeline with --enable-zbh1-exact-semantics", "add --enable-zbh1-pipeline or drop the other",
           ("--enable-zbh1-exact-semantics",)),
    Assert("pipeline split rank < PP", {HEAD: 120},
           ("--pipeline-model-parallel-size", "--pipeline-model-parallel-split-rank"),
           lambda f: (number(f, "--pipeline-model-parallel-size", 1) > 1 and given(f, "--pipeline-model-parallel-split-rank")
                      and number(f, "--pipeline-model-parallel-split-rank") >= number(f, "--pipeline-model-parallel-size", 1)),
           "--pipeline-model-parallel-split-rank below the pipeline size", "lower --pipeline-model-parallel-split-rank",
           ("--pipeline-model-parallel-size", "2", "--pipeline-model-parallel-split-rank", "2")),
    Assert("interleaved pipeline needs PP > 2", {HEAD: 173, BEFORE_REBASE: 132},
           ("--num-layers-per-virtual-pipeline-stage", "--pipeline-model-parallel-size"),
           lambda f: (given(f, "--num-layers-per-virtual-pipeline-stage")
                      and number(f, "--pipeline-model-parallel-size", 1) <= 2),
           "--pipeline-model-parallel-size > 2 with --num-layers-per-virtual-pipeline-stage",
           "drop --num-layers-per-virtual-pipeline-stage, or use PP 3 or more",
           ("--num-layers-per-virtual-pipeline-stage", "1")),
    Assert("layers divisible by the virtual stage", {HEAD: 176, BEFORE_REBASE: 135},
           ("--num-layers-per-virtual-pipeline-stage", "--num-layers"),
           lambda f: (given(f, "--num-layers-per-virtual-pipeline-stage")
                      and number(f, "--num-layers-per-virtual-pipeline-stage", 1) > 0
                      and number(f, "--num-layers") % number(f, "--num-layers-per-virtual-pipeline-stage", 1) != 0),
           "--num-layers a multiple of --num-layers-per-virtual-pipeline-stage", "change either",
           ("--pipeline-model-parallel-size", "3", "--num-layers-per-virtual-pipeline-stage", "3")),
    Assert("fp32 all-reduce needs local DDP", {HEAD: 208, BEFORE_REBASE: 167},
           ("--accumulate-allreduce-grads-in-fp32", "--DDP-impl"),
           lambda f: given(f, "--accumulate-allreduce-grads-in-fp32") and value(f, "--DDP-impl", "local") != "local",
           "--DDP-impl local with --accumulate-allreduce-grads-in-fp32", "use --DDP-impl local or drop the fp32 all-reduce",
           ("--accumulate-allreduce-grads-in-fp32", "--DDP-impl", "torch")),
    Assert("fp32 all-reduce needs contiguous buffers", {HEAD: 209},
           ("--accumulate-allreduce-grads-in-fp32", "--use-contiguous-buffers-in-local-ddp"),
           lambda f: given(f, "--accumulate-allreduce-grads-in-fp32") and given(f, "--no-contiguous-buffers-in-local-ddp"),
           "no --no-contiguous-buffers-in-local-ddp with --accumulate-allreduce-grads-in-fp32",
           "drop --no-contiguous-buffers-in-local-ddp",
           ("--accumulate-allreduce-grads-in-fp32", "--no-contiguous-buffers-in-local-ddp")),
    Assert("distributed optimizer needs local DDP", {HEAD: 214},
           ("--use-distributed-optimizer", "--DDP-impl"),
           lambda f: given(f, "--use-distributed-optimizer") and value(f, "--DDP-impl", "local") != "local",
           "--DDP-impl local with --use-distributed-optimizer", "use --DDP-impl local",
           ("--use-distributed-optimizer", "--DDP-impl", "torch")),
    Assert("distributed optimizer needs contiguous buffers", {HEAD: 215},
           ("--use-distributed-optimizer", "--use-contiguous-buffers-in-local-ddp"),
           lambda f: given(f, "--use-distributed-optimizer") and given(f, "--no-contiguous-buffers-in-local-ddp"),
           "no --no-contiguous-buffers-in-local-ddp with --use-distributed-optimizer",
           "drop --no-contiguous-buffers-in-local-ddp",
           ("--use-distributed-optimizer", "--no-contiguous-buffers-in-local-ddp")),
    Assert("iteration-based decay", {HEAD: 243, BEFORE_REBASE: 185}, ("--train-iters", "--lr-decay-samples"),
           lambda f: number(f, "--train-iters") > 0 and given(f, "--lr-decay-samples"),
           "no --lr-decay-samples with --train-iters", "use --lr-decay-iters (megatron_job_lr_decay_iters)",
           ("--lr-decay-samples", "100")),
    Assert("iteration-based warmup", {HEAD: 245, BEFORE_REBASE: 187}, ("--train-iters", "--lr-warmup-samples"),
           lambda f: number(f, "--train-iters") > 0 and number(f, "--lr-warmup-samples") != 0,
           "--lr-warmup-samples 0 with --train-iters", "use --lr-warmup-iters (megatron_job_lr_warmup_iters)",
           ("--lr-warmup-samples", "10")),
    Assert("no batch-size ramp-up by iterations", {HEAD: 247, BEFORE_REBASE: 189}, ("--train-iters", "--rampup-batch-size"),
           lambda f: number(f, "--train-iters") > 0 and given(f, "--rampup-batch-size"),
           "no --rampup-batch-size with --train-iters", "drop --rampup-batch-size, or train by samples",
           ("--rampup-batch-size", "4", "4", "100")),
    Assert("sample-based decay", {HEAD: 259, BEFORE_REBASE: 201}, ("--train-samples", "--lr-decay-iters"),
           lambda f: number(f, "--train-samples") > 0 and not number(f, "--train-iters") and given(f, "--lr-decay-iters"),
           "no --lr-decay-iters with --train-samples", "use --lr-decay-samples (megatron_job_lr_decay_iters: null)", ()),
    Assert("sample-based warmup", {HEAD: 261, BEFORE_REBASE: 203}, ("--train-samples", "--lr-warmup-iters"),
           lambda f: number(f, "--train-samples") > 0 and not number(f, "--train-iters") and number(f, "--lr-warmup-iters") != 0,
           "--lr-warmup-iters 0 with --train-samples", "use --lr-warmup-samples (megatron_job_lr_warmup_iters: 0)", ()),
    Assert("one layer count", {HEAD: 269}, ("--num-layers", "--encoder-num-layers"),
           lambda f: given(f, "--num-layers") and given(f, "--encoder-num-layers"),
           "--num-layers or --encoder-num-layers, not both", "drop --encoder-num-layers (the job renders --num-layers)",
           ("--encoder-num-layers", "2")),
    Assert("a layer count", {HEAD: 274}, ("--num-layers", "--encoder-num-layers"),
           lambda f: not given(f, "--num-layers") and not given(f, "--encoder-num-layers"),
           "--num-layers", "give --num-layers", ()),
    Assert("one sequence length", {HEAD: 303, BEFORE_REBASE: 225}, ("--seq-length", "--encoder-seq-length"),
           lambda f: given(f, "--seq-length") and given(f, "--encoder-seq-length"),
           "--seq-length or --encoder-seq-length, not both", "drop --encoder-seq-length (the job renders --seq-length)",
           ("--encoder-seq-length", "128")),
    Assert("a sequence length", {HEAD: 306, BEFORE_REBASE: 228}, ("--seq-length", "--encoder-seq-length"),
           lambda f: not given(f, "--seq-length") and not given(f, "--encoder-seq-length"),
           "--seq-length", "give --seq-length", ()),
    Assert("decoder sequence within the position embeddings", {HEAD: 313, BEFORE_REBASE: 234},
           ("--decoder-seq-length", "--max-position-embeddings"),
           lambda f: (given(f, "--decoder-seq-length")
                      and number(f, "--max-position-embeddings") < number(f, "--decoder-seq-length")),
           "--max-position-embeddings >= --decoder-seq-length", "raise --max-position-embeddings",
           ("--decoder-seq-length", "100000")),
    Assert("fp16 cross entropy needs --fp16", {HEAD: 324, BEFORE_REBASE: 241}, ("--fp16-lm-cross-entropy", "--fp16"),
           lambda f: given(f, "--fp16-lm-cross-entropy") and not given(f, "--fp16"),
           "--fp16 with --fp16-lm-cross-entropy", "drop --fp16-lm-cross-entropy, or train in fp16",
           ("--fp16-lm-cross-entropy",)),
    Assert("fp32 residual needs fp16 or bf16", {HEAD: 326, BEFORE_REBASE: 243},
           ("--fp32-residual-connection", "--fp16", "--bf16"),
           lambda f: given(f, "--fp32-residual-connection") and not (given(f, "--fp16") or given(f, "--bf16")),
           "--fp16 or --bf16 with --fp32-residual-connection", "drop --fp32-residual-connection in an fp32 job",
           ("--fp32-residual-connection",)),
    Assert("constant weight decay takes no start", {HEAD: 331}, ("--weight-decay-incr-style", "--start-weight-decay"),
           lambda f: value(f, "--weight-decay-incr-style", "constant") == "constant" and given(f, "--start-weight-decay"),
           "no --start-weight-decay with constant weight decay",
           "drop it, or set --weight-decay-incr-style linear or cosine", ("--start-weight-decay", "0.01")),
    Assert("constant weight decay takes no end", {HEAD: 332}, ("--weight-decay-incr-style", "--end-weight-decay"),
           lambda f: (value(f, "--weight-decay-incr-style", "constant") == "constant" and not given(f, "--start-weight-decay")
                      and given(f, "--end-weight-decay")),
           "no --end-weight-decay with constant weight decay",
           "drop it, or set --weight-decay-incr-style linear or cosine", ("--end-weight-decay", "0.01")),
    Assert("weight decay ramp needs a start", {HEAD: 336}, ("--weight-decay-incr-style", "--start-weight-decay"),
           lambda f: value(f, "--weight-decay-incr-style", "constant") != "constant" and not given(f, "--start-weight-decay"),
           "--start-weight-decay with a linear or cosine style", "give --start-weight-decay and --end-weight-decay",
           ("--weight-decay-incr-style", "linear")),
    Assert("weight decay ramp needs an end", {HEAD: 337}, ("--weight-decay-incr-style", "--end-weight-decay"),
           lambda f: (value(f, "--weight-decay-incr-style", "constant") != "constant" and given(f, "--start-weight-decay")
                      and not given(f, "--end-weight-decay")),
           "--end-weight-decay with a linear or cosine style", "give --end-weight-decay",
           ("--weight-decay-incr-style", "linear", "--start-weight-decay", "0.01")),
    Assert("distributed checkpointed activations need checkpointing", {HEAD: 351, BEFORE_REBASE: 247},
           ("--distribute-checkpointed-activations", "--checkpoint-activations"),
           lambda f: given(f, "--distribute-checkpointed-activations") and not given(f, "--checkpoint-activations"),
           "--checkpoint-activations with --distribute-checkpointed-activations",
           "add --checkpoint-activations (megatron_job_activation_checkpointing: true)",
           ("--distribute-checkpointed-activations",)),
    Assert("distributed saved activations need TP > 1", {HEAD: 357},
           ("--distribute-saved-activations", "--tensor-model-parallel-size"),
           lambda f: given(f, "--distribute-saved-activations") and number(f, "--tensor-model-parallel-size", 1) <= 1,
           "TP > 1 with --distribute-saved-activations", "drop it at TP 1", ("--distribute-saved-activations",)),
    Assert("distributed saved activations need full recompute", {HEAD: 360},
           ("--distribute-saved-activations", "--recompute-granularity"),
           lambda f: (given(f, "--distribute-saved-activations") and number(f, "--tensor-model-parallel-size", 1) > 1
                      and value(f, "--recompute-granularity") != "full"),
           "--recompute-granularity full with --distribute-saved-activations", "add --recompute-granularity full",
           ("--tensor-model-parallel-size", "2", "--distribute-saved-activations")),
    Assert("distributed saved activations need a recompute method", {HEAD: 363},
           ("--distribute-saved-activations", "--recompute-method"),
           lambda f: (given(f, "--distribute-saved-activations") and number(f, "--tensor-model-parallel-size", 1) > 1
                      and value(f, "--recompute-granularity") == "full" and not given(f, "--recompute-method")),
           "--recompute-method with --distribute-saved-activations", "add --recompute-method uniform or block",
           ("--tensor-model-parallel-size", "2", "--distribute-saved-activations", "--recompute-granularity", "full")),
    Assert("fp8 needs Transformer Engine", {HEAD: 373}, ("--fp8-e4m3", "--fp8-hybrid", "--transformer-impl"),
           lambda f: (given(f, "--fp8-e4m3") or given(f, "--fp8-hybrid"))
           and value(f, "--transformer-impl", "local") != "transformer_engine",
           "--transformer-impl transformer_engine with fp8", "add --transformer-impl transformer_engine", ("--fp8-hybrid",)),
    Assert("one fp8 format", {HEAD: 376}, ("--fp8-e4m3", "--fp8-hybrid"),
           lambda f: given(f, "--fp8-e4m3") and given(f, "--fp8-hybrid"),
           "one of --fp8-e4m3 and --fp8-hybrid", "keep one", ()),
    Assert("grouped-query attention without MoS", {HEAD: 451}, ("--num-key-value-heads", "--num-attention-heads", "--mos"),
           lambda f: _gqa(f) and given(f, "--mos"), "no --mos with fewer key/value heads than heads",
           "drop --mos, or use as many key/value heads as heads", ("--num-key-value-heads", "2", "--mos")),
    Assert("grouped-query attention without KD", {HEAD: 452}, ("--num-key-value-heads", "--num-attention-heads", "--kd"),
           lambda f: _gqa(f) and given(f, "--kd") and not given(f, "--mos"), "no --kd with fewer key/value heads than heads",
           "drop --kd, or use as many key/value heads as heads", ("--num-key-value-heads", "2", "--kd")),
)


def refusals(flags: Flags, era: str) -> List[Dict[str, str]]:
    """A failing finding for each row upstream's ``era`` would refuse on this argument list."""
    out = []
    for row in ROWS:
        if era not in row.lines or not row.refused(flags):
            continue
        shown = " ".join(" ".join((flag,) + tuple(flags.get(flag, [()])[-1])) for flag in row.options if flag in flags)
        out.append(finding(
            row.check, "fail", "arguments", shown or "-", row.expected,
            "Megatron-DeepSpeed's %s asserts it (megatron/arguments.py:%d at %s); %s"
            % ("validate_args" if era == HEAD else "parse_args", row.lines[era],
               "4efb479d" if era == HEAD else "9446eaac", row.fix)))
    return out


def rows_for(options: Sequence[str]) -> List[Assert]:
    """The rows that read exactly these options (the census's match)."""
    wanted = frozenset(options)
    return [row for row in ROWS if frozenset(row.options) == wanted]
