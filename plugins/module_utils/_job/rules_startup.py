# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The start-up rules after validate_args: what pretrain_gpt.py's start-up refuses while it builds
the tokenizer (the files a tokenizer type needs, the vocabulary padding), the learning-rate
scheduler (warmup shorter than decay, the weight-decay ramp) and the datasets (the ``--data-path``
blend, ``--split``).

They read only the argument list (``job.flags``), so a spec's rendered arguments and a given
train.sh are judged alike. Each finding quotes the upstream line at the job's era: 4efb479d (head)
or 9446eaac (before_rebase).

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, Mapping, NamedTuple, Optional, Tuple

from .._mds.args import BEFORE_REBASE
from .._stack import profiles as _stack_profiles
from .findings import finding
from .schema import split_shares

Add = Callable[[Dict[str, str]], None]

# Lines of the upstream checks each rule restates, per era (scripts/upstream_census.py marks the
# census rows with the rule's check name).
LINES = {
    "head": {"pairs": 49, "weight": 54, "weight_sum": 60, "blend_count": 37, "split_float": 622,
             "split_sum": 631, "padding": 65},
    BEFORE_REBASE: {"pairs": 49, "weight": 54, "weight_sum": 60, "blend_count": 48, "split_float": 611,
                    "split_sum": 620, "padding": 62},
}
# The scheduler's asserts: megatron/optimizer_param_scheduler.py at 4efb479d, megatron/learning_rates.py
# (AnnealingLR, no weight-decay schedule) at 9446eaac. Built by setup_model_and_optimizer for every
# job that trains (megatron/training.py:576 at 4efb479d, before deepspeed.initialize).
SCHEDULER = {
    "head": {"file": "optimizer_param_scheduler.py", "decay": 29, "warmup": 30, "start_wd": 40, "end_wd": 41},
    BEFORE_REBASE: {"file": "learning_rates.py", "decay": 41, "warmup": 42},
}

# The files each tokenizer type asserts (megatron/tokenizer/tokenizer.py build_tokenizer: lines
# 20-43 at 4efb479d; at 9446eaac line 32 asserts --vocab-file for every type). GPT2BPETokenizer and
# NullTokenizer have their own rules in rules.py (_check_arguments).
TOKENIZER_FILES: Dict[str, Dict[str, Tuple[Tuple[str, int], ...]]] = {
    "head": {
        "BertWordPieceLowerCase": (("--vocab-file", 20),),
        "BertWordPieceCase": (("--vocab-file", 25),),
        "SentencePieceTokenizer": (("--tokenizer-model", 34),),
        "GPTSentencePieceTokenizer": (("--tokenizer-model", 37),),
        "HFTokenizer": (("--tokenizer-model", 43),),
    },
    BEFORE_REBASE: {
        "BertWordPieceLowerCase": (("--vocab-file", 32),),
        "BertWordPieceCase": (("--vocab-file", 32),),
    },
}

# BlendableDataset keeps the dataset index of each sample in a uint8 array.
MAX_BLENDED = 255


def _last(flags: Any, flag: str) -> Optional[Tuple[str, ...]]:
    values = flags.get(flag) or []
    return tuple(values[-1]) if values else None


def _where(job: Any) -> str:
    return "train.sh" if job.from_script else "megatron_job_data_path or megatron_job_extra_args"


def _commit(era: str) -> str:
    return "9446eaac" if era == BEFORE_REBASE else "4efb479d"


def _lines(era: str) -> Dict[str, int]:
    return LINES[BEFORE_REBASE if era == BEFORE_REBASE else "head"]


def _number(word: str) -> Optional[float]:
    try:
        value = float(word)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _blend_refusal(words: Tuple[str, ...], lines: Dict[str, int]) -> Optional[Tuple[str, int, str]]:
    """(upstream's reason, its line in megatron/data/, the fix) for a blend the dataset build
    refuses, else None. One word is a single prefix and is not read as a blend."""
    if len(words) < 2:
        return None
    if len(words) % 2:
        return ("assert len(data_prefix) % 2 == 0 (weight-prefix pairs)", lines["pairs"],
                "give weight-prefix pairs (0.7 /data/a 0.3 /data/b); a prefix containing a space arrives as two "
                "words: rename it or point a symlink without spaces at it")
    bad = [w for w in words[::2] if _number(w) is None]
    if bad:
        return ("float(data_prefix[2*i]) raises ValueError on %r" % bad[0], lines["weight"],
                "put a number before every prefix; a prefix containing a space arrives as two words, and its "
                "second half is then read as a weight: rename it or point a symlink without spaces at it")
    if sum(_number(w) or 0.0 for w in words[::2]) <= 0:
        return ("assert weight_sum > 0.0", lines["weight_sum"], "give at least one positive weight")
    if len(words) // 2 >= MAX_BLENDED:
        return ("assert num_datasets < 255 (blendable_dataset.py)", lines["blend_count"],
                "blend fewer than 255 datasets, or merge some of them with tools/merge_datasets.py")
    return None


def check_data_path(job: Any, facts: Any, add: Add) -> None:
    """--data-path: one prefix, or weight-prefix pairs (megatron/data/dataset_utils.py
    get_datasets_weights_and_num_samples, called by gpt_dataset.build_train_valid_test_datasets
    when more than one word is given)."""
    del facts
    words = _last(job.flags, "--data-path")
    if not words:
        return
    refusal = _blend_refusal(words, _lines(job.era))
    shown = "--data-path %s" % " ".join(words)
    if refusal is None:
        if len(words) > 1:
            add(finding("--data-path blend", "pass", "data", shown, "weight-prefix pairs"))
        return
    reason, line, fix = refusal
    where = "blendable_dataset.py" if "blendable" in reason else "dataset_utils.py"
    add(finding("--data-path blend", "fail", "data", shown, "one prefix, or weight-prefix pairs with a positive sum",
                "Megatron-DeepSpeed's dataset build stops: %s (megatron/data/%s:%d at %s); %s, in %s"
                % (reason.replace(" (blendable_dataset.py)", ""), where, line, _commit(job.era), fix, _where(job))))


def check_split(job: Any, facts: Any, add: Add) -> None:
    """--split "train,valid,test": megatron/data/dataset_utils.py get_train_valid_test_split_ reads
    each part with float(), pads to three with 0, keeps the first three, and asserts their sum is
    positive. Judged only where --data-path is given (the split is read only for it)."""
    del facts
    values = _last(job.flags, "--split")
    if not values or not _last(job.flags, "--data-path"):
        return
    text = values[0]
    numbers = split_shares(text)
    lines = _lines(job.era)
    shown = "--split %s" % text
    cite = "(megatron/data/dataset_utils.py:%%d at %s)" % _commit(job.era)
    expected = "up to three numbers, comma- or slash-separated, with a positive sum"
    if any(n is None for n in numbers):
        add(finding("--split accepted", "fail", "data", shown, expected,
                    "Megatron-DeepSpeed's dataset build stops: float() raises ValueError on a part of %r %s; write "
                    "it as 969,30,1 in %s" % (text, cite % lines["split_float"], _where(job))))
        return
    kept = [n or 0.0 for n in numbers[:3]]
    if sum(kept) <= 0:
        add(finding("--split accepted", "fail", "data", shown, expected,
                    "Megatron-DeepSpeed asserts splits_sum > 0.0 %s; give the train split a positive share in %s"
                    % (cite % lines["split_sum"], _where(job))))
        return
    if len(numbers) > 3:
        add(finding("--split accepted", "warn", "data", shown, expected,
                    "upstream keeps the first three parts and drops the rest without a word %s; give three "
                    "(train, valid, test)" % (cite % (lines["split_sum"] - 2))))
        return
    if any(n < 0 for n in kept):
        add(finding("--split accepted", "warn", "data", shown, expected,
                    "upstream divides each part by their sum %s, so a negative part gives a split of negative "
                    "size; use parts >= 0" % (cite % lines["split_sum"])))
        return
    add(finding("--split accepted", "pass", "data", shown, expected))


def check_tokenizer_files(job: Any, facts: Any, add: Add) -> None:
    """The file a tokenizer type asserts beyond GPT-2 BPE's and NullTokenizer's (rules.py judges
    those): --vocab-file for the BERT word-piece types, --tokenizer-model for SentencePiece and
    Hugging Face (megatron/tokenizer/tokenizer.py build_tokenizer, at the era's commit)."""
    del facts
    typed = _last(job.flags, "--tokenizer-type")
    kind = typed[0] if typed else "GPT2BPETokenizer"
    table = TOKENIZER_FILES[BEFORE_REBASE if job.era == BEFORE_REBASE else "head"]
    for flag, line in table.get(kind, ()):
        if _last(job.flags, flag):
            add(finding("%s files given" % kind, "pass", "data", "%s %s" % (flag, " ".join(_last(job.flags, flag) or ())),
                        flag))
            continue
        key = "megatron_job_" + flag[2:].replace("-", "_")
        add(finding("%s files given" % kind, "fail", "data", "--tokenizer-type %s without %s" % (kind, flag), flag,
                    "Megatron-DeepSpeed's build_tokenizer asserts args.%s is not None (megatron/tokenizer/tokenizer.py:"
                    "%d at %s); give %s (%s)" % (flag[2:].replace("-", "_"), line, _commit(job.era), flag,
                                                 flag if job.from_script else key)))


def check_vocab_padding(job: Any, facts: Any, add: Add) -> None:
    """--make-vocab-size-divisible-by: the tokenizer build pads the vocabulary to a multiple of it
    times TP with ``while (after % multiple) != 0`` (megatron/tokenizer/tokenizer.py
    _vocab_size_with_padding); 0 divides by zero there. A negative value terminates (Python's modulo)
    and is left alone."""
    del facts
    values = _last(job.flags, "--make-vocab-size-divisible-by")
    if not values:
        return
    try:
        divisor = int(values[0])
    except ValueError:
        return  # argparse refuses it first (the "--make-vocab-size-divisible-by value" check)
    if divisor != 0:
        return
    add(finding("--make-vocab-size-divisible-by > 0", "fail", "data", "--make-vocab-size-divisible-by 0", ">= 1",
                "Megatron-DeepSpeed pads the vocabulary with after %% (0 x TP) (megatron/tokenizer/tokenizer.py:%d at "
                "%s) and stops with ZeroDivisionError; drop the option (default 128) or set it to 1 or more"
                % (_lines(job.era)["padding"], _commit(job.era))))


def _show(number: float) -> str:
    """A count as the job wrote it: 1000000, not 1e+06."""
    return "%d" % number if float(number).is_integer() else "%g" % number


def _float(flags: Any, flag: str) -> Optional[float]:
    values = _last(flags, flag)
    return _number(values[0]) if values else None


def _warmup_and_decay(flags: Any, global_batch: int) -> Optional[Tuple[float, float, str, str]]:
    """(warmup steps, decay steps, what the warmup was given as, what the decay was) as
    get_optimizer_param_scheduler computes them (megatron/training.py:446-467 at 4efb479d), in
    samples; None for a job that counts neither iterations nor samples (judged elsewhere)."""
    fraction = _float(flags, "--lr-warmup-fraction")
    train_iters = _float(flags, "--train-iters") or 0
    if train_iters > 0:
        decay_iters = _float(flags, "--lr-decay-iters")
        decay_iters = train_iters if decay_iters is None else decay_iters
        decay = decay_iters * global_batch
        decay_text = ("--lr-decay-iters %s" % _show(decay_iters) if _last(flags, "--lr-decay-iters")
                      else "--train-iters %s (no --lr-decay-iters)" % _show(train_iters))
        if fraction is not None:
            return fraction * decay, decay, "--lr-warmup-fraction %g" % fraction, decay_text
        warmup_iters = _float(flags, "--lr-warmup-iters") or 0
        return warmup_iters * global_batch, decay, "--lr-warmup-iters %s" % _show(warmup_iters), decay_text
    train_samples = _float(flags, "--train-samples") or 0
    if train_samples <= 0:
        return None
    decay_samples = _float(flags, "--lr-decay-samples")
    decay = train_samples if decay_samples is None else decay_samples
    decay_text = ("--lr-decay-samples %s" % _show(decay) if _last(flags, "--lr-decay-samples")
                  else "--train-samples %s (no --lr-decay-samples)" % _show(train_samples))
    if fraction is not None:
        return fraction * decay, decay, "--lr-warmup-fraction %g" % fraction, decay_text
    warmup = _float(flags, "--lr-warmup-samples") or 0
    return warmup, decay, "--lr-warmup-samples %s" % _show(warmup), decay_text


def check_lr_schedule(job: Any, facts: Any, add: Add) -> None:
    """The learning-rate scheduler's asserts: decay steps > 0 and warmup steps < decay steps
    (OptimizerParamScheduler.__init__; AnnealingLR.__init__ before the rebase), and at head the
    weight-decay ramp: start >= 0 and end >= start."""
    lines = SCHEDULER[BEFORE_REBASE if job.era == BEFORE_REBASE else "head"]
    cite = "megatron/%s:%%d at %s" % (lines["file"], _commit(job.era))
    steps = _warmup_and_decay(job.flags, getattr(facts, "global_batch", None) or 0)
    if steps is not None and getattr(facts, "global_batch", None):
        warmup, decay, warmup_text, decay_text = steps
        shown = "%s, %s" % (warmup_text, decay_text)
        if decay <= 0:
            add(finding("learning-rate decay > 0", "fail", "schedule", shown, "a positive decay length",
                        "Megatron-DeepSpeed's scheduler asserts lr_decay_steps > 0 (%s); give --lr-decay-iters "
                        "(in megatron_job_extra_args) of 1 or more" % (cite % lines["decay"])))
        elif warmup >= decay:
            add(finding("learning-rate warmup shorter than its decay", "fail", "schedule", shown,
                        "warmup < decay", "Megatron-DeepSpeed's scheduler asserts lr_warmup_steps < lr_decay_steps "
                        "(%s); shorten the warmup (megatron_job_lr_warmup_iters) below the decay length, or "
                        "lengthen the decay (--lr-decay-iters, or megatron_job_train_iters)" % (cite % lines["warmup"])))
        else:
            add(finding("learning-rate warmup shorter than its decay", "pass", "schedule", shown, "warmup < decay"))
    if "start_wd" not in lines:
        return
    style = (_last(job.flags, "--weight-decay-incr-style") or ("constant",))[0]
    weight_decay = _float(job.flags, "--weight-decay")
    # validate_args sets both ends to --weight-decay for the constant style (arguments.py:333-334).
    start = weight_decay if style == "constant" else _float(job.flags, "--start-weight-decay")
    end = weight_decay if style == "constant" else _float(job.flags, "--end-weight-decay")
    if start is None or end is None:
        return  # absent: validate_args' own asserts (upstream_asserts rows) or the default 0.01
    if style == "constant":
        shown = "--weight-decay %s" % _show(start)
    else:
        shown = "--start-weight-decay %s --end-weight-decay %s" % (_show(start), _show(end))
    if start < 0:
        add(finding("weight decay >= 0", "fail", "schedule", shown, ">= 0",
                    "Megatron-DeepSpeed's scheduler asserts start_wd >= 0.0 (%s); use a weight decay of 0 or more"
                    % (cite % lines["start_wd"])))
    elif end < start:
        add(finding("weight decay ramp does not fall", "fail", "schedule", shown, "end >= start",
                    "Megatron-DeepSpeed's scheduler asserts end_wd >= start_wd (%s); give --end-weight-decay at "
                    "least --start-weight-decay" % (cite % lines["end_wd"])))


class Refusal(NamedTuple):
    check: str
    lines: Dict[str, Tuple[str, int]]   # era -> (file under the checkout, line) at the era's commit
    refused: Callable[[Any], bool]      # of job.flags
    shown: Tuple[str, ...]              # the options the finding quotes, as the job passed them
    reason: str                         # upstream's condition or message
    fix: str


def _seed(flags: Any) -> Optional[float]:
    return _float(flags, "--seed")


# Single-condition refusals of the set-up, each beside its upstream line per era.
REFUSALS: Tuple[Refusal, ...] = (
    Refusal("--use-checkpoint-args needs --load", {"head": ("megatron/initialize.py", 56)},
            lambda f: bool(f.get("--use-checkpoint-args")) and not f.get("--load"),
            ("--use-checkpoint-args",), "'--use-checkpoints-args requires --load argument'",
            "add --load <checkpoint dir> (megatron_job_checkpoint_dir with resume), or drop --use-checkpoint-args"),
    Refusal("--seed > 0", {"head": ("megatron/initialize.py", 297), BEFORE_REBASE: ("megatron/initialize.py", 264)},
            lambda f: _seed(f) is not None and (_seed(f) or 0) <= 0, ("--seed",),
            "'Seed ({}) should be a positive integer.' (the first pipeline stage's seed is --seed itself)",
            "set --seed to 1 or more (default 1234)"),
    Refusal("--cpu-optimizer needs Adam",
            {"head": ("megatron/optimizer/__init__.py", 84), BEFORE_REBASE: ("megatron/optimizer/__init__.py", 64)},
            lambda f: bool(f.get("--cpu-optimizer")) and (_last(f, "--optimizer") or ("adam",))[0] != "adam",
            ("--cpu-optimizer", "--optimizer"), "'CPU offloading is for Adam'",
            "use --optimizer adam with --cpu-optimizer, or drop --cpu-optimizer"),
    Refusal("--min-lr >= 0",
            {"head": ("megatron/optimizer_param_scheduler.py", 23), BEFORE_REBASE: ("megatron/learning_rates.py", 35)},
            lambda f: (_float(f, "--min-lr") or 0.0) < 0, ("--min-lr",),
            "assert self.min_lr >= 0.0 (the scheduler, built by setup_model_and_optimizer)",
            "set --min-lr to 0 or more (default 0.0)"),
    # The two flags are spelled per era: opt_param at head, lr before the rebase; argparse refuses
    # the other era's spelling on its own ("%s accepted by pretrain_gpt.py").
    Refusal("one scheduler source",
            {"head": ("megatron/optimizer_param_scheduler.py", 48), BEFORE_REBASE: ("megatron/learning_rates.py", 53)},
            lambda f: (bool(f.get("--override-opt_param-scheduler")) and bool(f.get("--use-checkpoint-opt_param-scheduler"))
                       or bool(f.get("--override-lr-scheduler")) and bool(f.get("--use-checkpoint-lr-scheduler"))),
            ("--override-opt_param-scheduler", "--use-checkpoint-opt_param-scheduler", "--override-lr-scheduler",
             "--use-checkpoint-lr-scheduler"),
            "'both override and use-checkpoint are set.'",
            "keep one: --override-... takes the schedule from the arguments, --use-checkpoint-... from the checkpoint"),
    # Pipeline stages (PP > 1, or the model chunks of an interleaved schedule, which needs PP > 2)
    # run with Megatron's local DDP only; the check follows deepspeed.initialize, so it holds under
    # DeepSpeed too.
    Refusal("--DDP-impl local with the pipeline",
            {"head": ("megatron/training.py", 650), BEFORE_REBASE: ("megatron/training.py", 554)},
            lambda f: ((_float(f, "--pipeline-model-parallel-size") or 1) > 1
                       and (_last(f, "--DDP-impl") or ("local",))[0] != "local"),
            ("--pipeline-model-parallel-size", "--DDP-impl"),
            "assert args.DDP_impl == 'local' (setup_model_and_optimizer, for more than one pipeline stage)",
            "drop --DDP-impl (default local), or run with --pipeline-model-parallel-size 1"),
    # Under --deepspeed without --no-pipeline-parallel, pretrain_gpt.py's model_provider builds
    # GPTModelPipe (pretrain_gpt.py:51 at 4efb479d), which is not a GPTModel, so get_model sets
    # allow_transformer_engine False and asserts the local implementation.
    Refusal("Transformer Engine needs --no-pipeline-parallel",
            {"head": ("megatron/training.py", 386)},
            lambda f: ((_last(f, "--transformer-impl") or ("local",))[0] == "transformer_engine"
                       and bool(f.get("--deepspeed")) and not f.get("--no-pipeline-parallel")),
            ("--transformer-impl", "--deepspeed"),
            "'Transformer Engine is only approved for GPT models' (DeepSpeed's pipeline engine builds GPTModelPipe)",
            "add --no-pipeline-parallel (with --pipeline-model-parallel-size 1), or drop --transformer-impl "
            "transformer_engine"),
)


def check_refusals(job: Any, facts: Any, add: Add) -> None:
    """REFUSALS, at the job's era (a row without a line for the era does not apply to it)."""
    del facts
    era = BEFORE_REBASE if job.era == BEFORE_REBASE else "head"
    for row in REFUSALS:
        if era not in row.lines or not row.refused(job.flags):
            continue
        path, line = row.lines[era]
        shown = " ".join(" ".join((flag,) + (_last(job.flags, flag) or ())) for flag in row.shown
                         if flag in job.flags)
        add(finding(row.check, "fail", "arguments", shown or "-", row.check,
                    "Megatron-DeepSpeed stops at start-up: %s (%s:%d at %s); %s"
                    % (row.reason, path, line, _commit(job.era), row.fix)))


# train() asserts the engine's random-LTD before the first step when --random-ltd is given
# (megatron/training.py:1246 at 4efb479d, 1019 at 9446eaac); DeepSpeed answers it from ds_config alone
# (deepspeed/runtime/engine.py:1161-1162 at 0.19.6: data_efficiency.data_routing.random_ltd.enabled).
RANDOM_LTD_LINES = {"head": 1246, BEFORE_REBASE: 1019}
RANDOM_LTD_PATH = ("data_efficiency", "data_routing", "random_ltd", "enabled")


def check_random_ltd(job: Any, facts: Any, add: Add) -> None:
    """--random-ltd converts the transformer layers for DeepSpeed's random-LTD, and train() then
    asserts that the engine has it enabled in ds_config. A spec without a ds_config of its own gets
    the one _job.args.ds_config writes, which has no data_efficiency section; a train.sh whose
    ds_config is not at hand is not judged."""
    del facts
    ds = job.ds if job.ds is not None or job.from_script else {}
    if not job.flags.get("--random-ltd") or ds is None:
        return
    node: Any = ds
    for key in RANDOM_LTD_PATH:
        node = node.get(key) if isinstance(node, Mapping) else None
    where = "the ds_config the job passes" if job.from_script else "megatron_job_ds_config"
    shown = "--random-ltd, ds_config %s: %s" % (".".join(RANDOM_LTD_PATH), "absent" if node is None else node)
    # get_scalar_param returns the JSON value as it is, and the assert takes its truth.
    if node:
        add(finding("--random-ltd needs ds_config random-LTD", "pass", "deepspeed", shown, "true"))
        return
    era = BEFORE_REBASE if job.era == BEFORE_REBASE else "head"
    add(finding("--random-ltd needs ds_config random-LTD", "fail", "deepspeed", shown, "true",
                "Megatron-DeepSpeed stops before its first step: assert model[0].random_ltd_enabled() "
                "(megatron/training.py:%d at %s), which DeepSpeed reads from ds_config "
                "data_efficiency.data_routing.random_ltd.enabled; enable it (with its random_ltd settings) in %s, "
                "or drop --random-ltd" % (RANDOM_LTD_LINES[era], _commit(job.era), where)))


CUDA_CONNECTIONS_LINE = 405  # megatron/arguments.py at 4efb479d; 9446eaac has no such check


def _accelerator(spec: Any) -> Optional[str]:
    try:
        return _stack_profiles.get(spec.get("stack_profile")).get("accelerator")
    except _stack_profiles.UnknownProfileError:
        return None


def check_cuda_connections(job: Any, facts: Any, add: Add) -> None:
    """--sequence-parallel on a CUDA accelerator needs CUDA_DEVICE_MAX_CONNECTIONS=1 in the ranks'
    environment (validate_args raises otherwise, head era). A spec's environment is exactly what
    train.sh exports, so it is refused there; a train.sh may inherit the variable from the shell
    that runs it, so there it is a warning."""
    del facts
    if job.era == BEFORE_REBASE or not job.flags.get("--sequence-parallel") or _accelerator(job.spec) == "cpu":
        return
    value = (job.spec.get("env") or {}).get("CUDA_DEVICE_MAX_CONNECTIONS")
    if str(value) == "1":
        return
    shown = "--sequence-parallel with CUDA_DEVICE_MAX_CONNECTIONS=%s" % ("unset" if value is None else value)
    where = ("export CUDA_DEVICE_MAX_CONNECTIONS=1 in train.sh (unless the launching shell sets it)" if job.from_script
             else "add CUDA_DEVICE_MAX_CONNECTIONS: \"1\" to megatron_job_env (its default carries it)")
    add(finding("sequence parallelism needs CUDA_DEVICE_MAX_CONNECTIONS=1", "warn" if job.from_script else "fail",
                "environment", shown, "CUDA_DEVICE_MAX_CONNECTIONS=1",
                "Megatron-DeepSpeed's validate_args raises 'Using sequence parallelism requires setting the environment "
                "variable CUDA_DEVICE_MAX_CONNECTIONS to 1' on a CUDA accelerator (megatron/arguments.py:%d at "
                "4efb479d); %s, or drop --sequence-parallel" % (CUDA_CONNECTIONS_LINE, where)))


def check_startup(job: Any, facts: Any, add: Add) -> None:
    """Every rule of this module, in the order the start-up reaches them: initialize_megatron and
    the tokenizer (set_global_variables), the optimizer and its scheduler
    (setup_model_and_optimizer), then the data."""
    for rule in (check_cuda_connections, check_refusals, check_tokenizer_files, check_vocab_padding, check_lr_schedule,
                 check_random_ltd, check_data_path, check_split):
        rule(job, facts, add)
