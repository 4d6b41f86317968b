# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The census of Megatron-DeepSpeed's start-up checks: every ``assert`` and ``raise`` that
``pretrain_gpt.py`` reaches before its first iteration, at a pinned commit, in the files and
functions of ``SCANNED`` (the options, the tokenizer, the data, the microbatch calculator, the
training set-up, the entry script), the options each one reads, and how the collection judges it:
a static rule of validate_job that restates it, a check the launch makes on every node before any
rank starts ("pre-launch:", the dataset's index files), or "by construction:" with the reason it
holds for every job the collection launches.

The upstream oracle (module_utils/_mds/oracle.py) runs the checkout's own ``validate_args``
before a launch; this census says which start-up checks the controller also judges without a
checkout, so a new pinned commit shows what changed.

    python scripts/upstream_census.py --source $MEGATRON_DS_SRC [--commit 4efb479d] [--markdown]

``--commit`` reads each file at that commit with ``git show`` (the checkout must be a git
repository); without it, the working tree's files. The rows are printed as markdown
(docs/upstream-census.md is this output for both pinned commits) or as JSON.
"""
from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, NamedTuple, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".collections"))
# The option checks the job package restates as data, one row per upstream assert.
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import upstream_asserts  # noqa: E402
# The .idx header checks the launch makes on every node (job_probe, then prelaunch_problems).
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import data_index  # noqa: E402

FUNCTIONS = ("parse_args", "validate_args")


class Scanned(NamedTuple):
    path: str                          # inside the checkout
    functions: Optional[Tuple[str, ...]]  # ``Class.method`` or ``function``; None: the whole file
    reason: str                        # why pretrain_gpt.py reaches it before its first iteration


# The files the census scans, in the order pretrain() reaches them (megatron/training.py pretrain at
# 4efb479d: initialize_megatron, setup_model_and_optimizer, build_train_valid_test_data_iterators,
# then train). A file absent at a commit (optimizer_param_scheduler.py is learning_rates.py before
# the rebase) is skipped there; a function absent at a commit is simply not found.
SCANNED: Tuple[Scanned, ...] = (
    Scanned("megatron/arguments.py", FUNCTIONS,
            "the options: argparse and validate_args, called by initialize_megatron"),
    Scanned("megatron/global_vars.py", ("set_global_variables", "_build_num_microbatches_calculator",
                                        "_build_tokenizer"),
            "set_global_variables builds the microbatch calculator and the tokenizer from the options"),
    Scanned("megatron/initialize.py", ("initialize_megatron", "_initialize_distributed", "_set_random_seed"),
            "the process groups and the seed, before the model is built"),
    Scanned("megatron/tokenizer/tokenizer.py", ("build_tokenizer", "_vocab_size_with_padding"),
            "the tokenizer build (the files each type needs) and the vocabulary padding; the tokenizer "
            "classes' own methods run on data, after start-up"),
    Scanned("megatron/microbatches.py", None,
            "the microbatch calculator, with the batch ramp-up: built at start-up, updated at the first "
            "iteration with its consistency check"),
    Scanned("megatron/training.py", ("pretrain", "get_model", "get_optimizer_param_scheduler",
                                     "get_learning_rate_scheduler", "setup_model_and_optimizer",
                                     "build_train_valid_test_datasets", "build_train_valid_test_data_loaders",
                                     "build_train_valid_test_data_iterators", "train_step", "train"),
            "the training set-up: the model, the optimizer and its scheduler (under DeepSpeed and ZeRO), the "
            "data loaders and the intervals they use, and the loop up to its first step"),
    Scanned("megatron/optimizer/__init__.py", ("get_param_groups", "get_megatron_optimizer"),
            "Megatron's optimizer, which setup_model_and_optimizer builds unless ds_config has its own"),
    Scanned("megatron/optimizer_param_scheduler.py", None,
            "the learning-rate and weight-decay schedule (head era), stepped once at construction"),
    Scanned("megatron/learning_rates.py", None,
            "the learning-rate schedule (before_rebase era), stepped once at construction"),
    Scanned("megatron/data/gpt_dataset.py", None,
            "the GPT dataset build: the --data-path blend, the --split, the index mappings"),
    # get_indexed_dataset_ of this file serves BERT and T5: gpt_dataset.py has its own (without the
    # count assert) and imports only these two from here.
    Scanned("megatron/data/dataset_utils.py", ("get_datasets_weights_and_num_samples", "get_train_valid_test_split_"),
            "the blend's weights and the --split string; the file's other functions serve BERT and T5"),
    Scanned("megatron/data/blendable_dataset.py", None, "the blend of several datasets, built at start-up"),
    Scanned("megatron/data/indexed_dataset.py", ("make_dataset", "infer_dataset_impl", "code", "IndexedDataset.read_index",
                                                 "IndexedDataset.check_index", "MMapIndexedDataset.Index.__init__"),
            "opening the .bin/.idx of each prefix; the builders run in preprocess_data.py, not here"),
    Scanned("megatron/data/data_samplers.py", None, "the samplers of the train, valid and test loaders"),
    Scanned("pretrain_gpt.py", None,
            "the entry script: model and dataset providers, and get_batch and forward_step of the first iteration"),
)

# Attributes set from the environment or computed by validate_args itself, not options.
DERIVED = frozenset({"rank", "world_size", "data_parallel_size", "ds_pipeline_enabled", "params_dtype",
                     "transformer_pipeline_model_parallel_size", "virtual_pipeline_model_parallel_size",
                     "consumed_train_samples", "consumed_valid_samples"})

# Guards that wrap whole blocks without being part of any one check (HEAD wraps most of
# validate_args in ``if not args.use_dataset_only``): left out of the options a check reads.
BLOCK_GUARDS = frozenset({"--use-dataset-only"})

# The static rule (its check name in validate_job's findings) that restates a check, keyed by the
# set of options the check reads (guards and condition). The upstream oracle judges all of them.
JUDGED: Dict[FrozenSet[str], str] = {
    frozenset({"--tensor-model-parallel-size"}): "TP x PP divides the world size",
    frozenset({"--pipeline-model-parallel-size", "--tensor-model-parallel-size"}): "TP x PP divides the world size",
    frozenset({"--ds-sequence-parallel-size", "--pipeline-model-parallel-size", "--tensor-model-parallel-size"}):
        "TP x PP divides the world size",
    # DeepSpeed >= 0.10.2 for --ds-sequence-parallel-size: every DeepSpeed of the head era is >= 0.16.1
    # (_mds.args.HEAD_MIN_DEEPSPEED), and the cu117 era's parser has no such option (refused as unknown).
    frozenset({"--ds-sequence-parallel-size"}): "%s accepted by pretrain_gpt.py",
    frozenset({"--no-pipeline-parallel", "--pipeline-model-parallel-size"}): "--no-pipeline-parallel needs PP 1",
    # removed flags (the guide's --batch-size): argparse accepts them, validate_args refuses them
    frozenset({"--batch-size"}): "%s accepted by pretrain_gpt.py",
    frozenset({"--warmup"}): "%s accepted by pretrain_gpt.py",
    frozenset({"--model-parallel-size"}): "%s accepted by pretrain_gpt.py",
    frozenset({"--micro-batch-size"}): "--micro-batch-size > 0",
    frozenset({"--global-batch-size"}): "global batch divisible by micro x DP",
    frozenset({"--hidden-size", "--num-attention-heads", "--kv-channels"}): "hidden % heads == 0",
    frozenset({"--num-attention-heads", "--num-key-value-heads"}): "num_attention_heads % num_key_value_heads == 0",
    frozenset({"--fp16", "--bf16"}): "precision",
    frozenset({"--recompute-granularity", "--recompute-method"}): "recompute method with selective granularity",
    frozenset({"--train-iters", "--lr-warmup-iters", "--lr-warmup-fraction"}): "one learning-rate warmup",
    frozenset({"--train-samples", "--lr-warmup-samples", "--lr-warmup-fraction"}): "one learning-rate warmup",
    frozenset({"--train-iters", "--train-samples"}): "iteration- or sample-based training",
    frozenset({"--seq-length", "--max-position-embeddings"}): "max-position-embeddings >= seq-length",
    frozenset({"--lr", "--min-lr"}): "--min-lr <= --lr",
    frozenset({"--save", "--save-interval"}): "--save with --save-interval",
}


# Checks that hold for every job the collection can launch, and why.
BY_CONSTRUCTION: Dict[FrozenSet[str], str] = {
    # torch >= 1.10 for --distribute-saved-activations: every stack profile pins torch 1.13 or later
    frozenset({"--distribute-saved-activations"}): "by construction: every stack profile's torch is 1.13 or later",
}


# Checks outside megatron/arguments.py, keyed by (commit, file, line): their conditions read
# constructor arguments and locals, not options, so the option-set match above cannot find them.
# The rules named here live in _job/rules.py, rules_startup.py and the argument table (_mds/args.py,
# whose choices make the "%s value" check refuse an unknown --tokenizer-type, --optimizer,
# --DDP-impl or --dataloader-type before the raise that would otherwise stop the job).
_TOKENIZER = "megatron/tokenizer/tokenizer.py"
_MICRO = "megatron/microbatches.py"
_UTILS = "megatron/data/dataset_utils.py"
_BLEND = "megatron/data/blendable_dataset.py"
_SAMPLERS = "megatron/data/data_samplers.py"
_OPT = "megatron/optimizer/__init__.py"
_RAMPUP = "--rampup-batch-size accepted"
_DIVISIBLE = "global batch divisible by micro x DP"
_RAMP_CAP = ("by construction: start + steps x increment stays within the global batch once the ramp-up "
             "is accepted (steps <= (global - start) / increment)")
_SPLIT_ARITHMETIC = "by construction: get_train_valid_test_split_'s own arithmetic, for every split that passes its sum"
_PAIRWISE = "by construction: the datasets and the weights come from the same --data-path pairs"
_GPT_MODEL = "by construction: pretrain_gpt.py builds an encoder-or-decoder model (GPT)"
# Reasons for checks that no job the collection launches can fail, each naming what makes it so.
_DEEPSPEED_ALWAYS = ("by construction: every job passes --deepspeed (the '--deepspeed given' check), and validate_args "
                     "then sets async_tensor_model_parallel_allreduce False (arguments.py:398-399 at 4efb479d)")
_ARGS_NOT_NONE = "by construction: set_global_variables receives the namespace parse_args has just returned"
_GRID = ("by construction: GPTModelPipe builds DeepSpeed's PipeModelDataParallelTopology from mpu's own sizes "
         "(megatron/model/gpt_model.py:454-455 at 4efb479d), so the engine's grid ranks are mpu's")
_PIPE_ENGINE = ("by construction: with --deepspeed and no --no-pipeline-parallel, model_provider builds GPTModelPipe "
                "and deepspeed.initialize returns a PipelineEngine for it")
_WD_CONSTANT = ("by construction: for the constant style validate_args sets both ends to --weight-decay "
                "(arguments.py:330-334 at 4efb479d)")
_RATIO = ("by construction: the branch is reached only between warmup and decay end (earlier returns), and warmup < "
          "decay is the scheduler's own assert, restated ('learning-rate warmup shorter than its decay')")
_WD_RATIO = "by construction: reached only while 0 <= num_steps <= wd_incr_steps (the branch above returns otherwise)"
_DOCUMENTS = ("by construction: documents is np.arange over one part of get_train_valid_test_split_(number of "
              "documents), so it lies inside the index")
_INT32 = ("by construction: _build_doc_idx casts doc_idx to np.int32, and the mmap index stores sizes as int32 "
          "(MMapIndexedDataset.Index)")
_BLEND_BOUND = ("by construction: the blend's index arrays hold exactly size entries (built by _build_indices, or "
                "loaded and checked against size just above)")
_DP_RANK = ("by construction: the data-parallel size and rank come from mpu, and DP >= 1 once 'TP x PP divides the "
            "world size' holds")
_EPOCH_MULTIPLE = ("by construction: consumed samples are sums of global batches (ramp-up ones included), each a "
                   "multiple of micro x DP ('global batch divisible by micro x DP', the ramp-up rules)")
_DEAD_ASSERT = ("by construction: the enclosing condition compares args.curriculum_seqlen with < first, so the assert "
                "that it is not None can never be the one that fails")
_TRAINING = "by construction: train() puts every model chunk in training mode before the loop (model_module.train())"
_WRITER_ONLY = ("by construction: code() is called only by the index builders (indexed_dataset.py:327 and 387 at "
                "4efb479d), which tools/preprocess_data.py runs, not the start-up")
_INFER_READ = ("by construction: --data-impl is mmap or infer at 4efb479d, so IndexedDataset reads an index only after "
               "infer_dataset_impl has read the same TNTIDX magic from it")
_IN_RANGE = ("by construction: the sample mapping indexes only documents of the split's range, which lies inside the "
             "index (get_train_valid_test_split_ of the document count)")
_IDX = "megatron/data/indexed_dataset.py"
_RANK_COUNTS = ("by construction: every rank of the data-parallel and pipeline groups adds 1 to the count, which "
                "sums to world size / TP")


def _at(commit: str, rows: Dict[Tuple[str, int], str]) -> Dict[Tuple[str, str, int], str]:
    return {(commit, path, line): rule for (path, line), rule in rows.items()}


JUDGED_AT: Dict[Tuple[str, str, int], str] = {
    **_at("4efb479d", {
        ("megatron/initialize.py", 56): "--use-checkpoint-args needs --load",
        ("megatron/initialize.py", 248): "one sequence parallelism",
        ("megatron/initialize.py", 297): "--seed > 0",
        (_TOKENIZER, 20): "BertWordPieceLowerCase files given", (_TOKENIZER, 25): "BertWordPieceCase files given",
        (_TOKENIZER, 30): "GPT2BPETokenizer files given", (_TOKENIZER, 31): "GPT2BPETokenizer files given",
        (_TOKENIZER, 34): "SentencePieceTokenizer files given", (_TOKENIZER, 37): "GPTSentencePieceTokenizer files given",
        (_TOKENIZER, 40): "NullTokenizer vocab size", (_TOKENIZER, 43): "HFTokenizer files given",
        (_TOKENIZER, 48): "--tokenizer-type value",
        (_MICRO, 21): _RAMPUP, (_MICRO, 64): _DIVISIBLE, (_MICRO, 71): _DIVISIBLE, (_MICRO, 102): "--micro-batch-size > 0",
        (_MICRO, 104): _RAMPUP, (_MICRO, 107): _RAMPUP, (_MICRO, 110): _RAMPUP, (_MICRO, 111): _RAMPUP,
        (_MICRO, 113): _RAMPUP, (_MICRO, 119): _RAMPUP, (_MICRO, 134): _RAMP_CAP,
        (_MICRO, 137): "ramp-up start batch divisible by micro x DP",
        ("megatron/training.py", 336): _GPT_MODEL, ("megatron/training.py", 357): _GPT_MODEL,
        ("megatron/training.py", 435): "--DDP-impl value", ("megatron/training.py", 470): "--train-iters or --train-samples given",
        ("megatron/training.py", 1647): "--dataloader-type value",
        (_OPT, 84): "--cpu-optimizer needs Adam", (_OPT, 112): "--optimizer value",
        ("megatron/optimizer_param_scheduler.py", 24): "--min-lr <= --lr",
        ("megatron/optimizer_param_scheduler.py", 29): "learning-rate decay > 0",
        ("megatron/optimizer_param_scheduler.py", 30): "learning-rate warmup shorter than its decay",
        ("megatron/optimizer_param_scheduler.py", 40): "weight decay >= 0",
        ("megatron/optimizer_param_scheduler.py", 41): "weight decay ramp does not fall",
        (_UTILS, 49): "--data-path blend", (_UTILS, 60): "--data-path blend", (_UTILS, 631): "--split accepted",
        (_UTILS, 640): _SPLIT_ARITHMETIC, (_UTILS, 641): _SPLIT_ARITHMETIC,
        (_BLEND, 24): _PAIRWISE, (_BLEND, 31): "--data-path blend", (_BLEND, 37): "--data-path blend",
        (_SAMPLERS, 40): "--dataloader-type value", (_SAMPLERS, 71): "--micro-batch-size > 0",
        (_SAMPLERS, 143): "--micro-batch-size > 0",
        ("pretrain_gpt.py", 138): "sequence length % SP == 0",
        ("megatron/arguments.py", 405): "sequence parallelism needs CUDA_DEVICE_MAX_CONNECTIONS=1",
        ("megatron/arguments.py", 409): _DEEPSPEED_ALWAYS,
        ("megatron/global_vars.py", 93): _ARGS_NOT_NONE,
        ("megatron/training.py", 386): "Transformer Engine needs --no-pipeline-parallel",
        ("megatron/training.py", 629): _GRID, ("megatron/training.py", 630): _GRID, ("megatron/training.py", 631): _GRID,
        ("megatron/training.py", 650): "--DDP-impl local with the pipeline",
        ("megatron/training.py", 676): _PIPE_ENGINE,
        ("megatron/training.py", 1246): "--random-ltd needs ds_config random-LTD",
        ("megatron/optimizer_param_scheduler.py", 23): "--min-lr >= 0",
        ("megatron/optimizer_param_scheduler.py", 48): "one scheduler source",
        ("megatron/optimizer_param_scheduler.py", 62): _WD_CONSTANT,
        ("megatron/optimizer_param_scheduler.py", 66): _WD_RATIO, ("megatron/optimizer_param_scheduler.py", 67): _WD_RATIO,
        ("megatron/optimizer_param_scheduler.py", 75): "--weight-decay-incr-style value",
        ("megatron/optimizer_param_scheduler.py", 131): _RATIO, ("megatron/optimizer_param_scheduler.py", 132): _RATIO,
        ("megatron/optimizer_param_scheduler.py", 140): "--lr-decay-style value",
        ("megatron/data/gpt_dataset.py", 256): _DOCUMENTS, ("megatron/data/gpt_dataset.py", 257): _DOCUMENTS,
        ("megatron/data/gpt_dataset.py", 454): _INT32, ("megatron/data/gpt_dataset.py", 455): _INT32,
        (_BLEND, 109): _BLEND_BOUND,
        (_SAMPLERS, 72): _DP_RANK, (_SAMPLERS, 73): _DP_RANK, (_SAMPLERS, 144): _DP_RANK, (_SAMPLERS, 145): _DP_RANK,
        (_SAMPLERS, 156): _EPOCH_MULTIPLE,
        (_IDX, 111): _WRITER_ONLY, (_IDX, 143): _INFER_READ, (_IDX, 163): _IN_RANGE,
        (_IDX, 432): data_index.VERSION_CHECK,
        ("pretrain_gpt.py", 244): _DEAD_ASSERT, ("pretrain_gpt.py", 282): _DEAD_ASSERT, ("pretrain_gpt.py", 299): _TRAINING,
    }),
    **_at("9446eaac", {
        ("megatron/initialize.py", 264): "--seed > 0",
        # line 32 asserts --vocab-file for every type: GPT-2 BPE's rule and the BERT types' rule
        (_TOKENIZER, 32): "GPT2BPETokenizer files given", (_TOKENIZER, 42): "GPT2BPETokenizer files given",
        (_TOKENIZER, 45): "--tokenizer-type value",
        (_MICRO, 34): _RAMPUP, (_MICRO, 77): _DIVISIBLE, (_MICRO, 84): _DIVISIBLE, (_MICRO, 115): "--micro-batch-size > 0",
        (_MICRO, 117): _RAMPUP, (_MICRO, 120): _RAMPUP, (_MICRO, 123): _RAMPUP, (_MICRO, 124): _RAMPUP,
        (_MICRO, 126): _RAMPUP, (_MICRO, 132): _RAMPUP, (_MICRO, 147): _RAMP_CAP,
        (_MICRO, 150): "ramp-up start batch divisible by micro x DP",
        ("megatron/training.py", 350): "--DDP-impl value", ("megatron/training.py", 381): "--train-iters or --train-samples given",
        ("megatron/training.py", 1322): "--dataloader-type value",
        (_OPT, 64): "--cpu-optimizer needs Adam", (_OPT, 86): "--optimizer value",
        ("megatron/learning_rates.py", 36): "--min-lr <= --lr",
        ("megatron/learning_rates.py", 41): "learning-rate decay > 0",
        ("megatron/learning_rates.py", 42): "learning-rate warmup shorter than its decay",
        (_UTILS, 49): "--data-path blend", (_UTILS, 60): "--data-path blend", (_UTILS, 620): "--split accepted",
        (_UTILS, 629): _SPLIT_ARITHMETIC, (_UTILS, 630): _SPLIT_ARITHMETIC,
        (_BLEND, 34): _PAIRWISE, (_BLEND, 43): "--data-path blend", (_BLEND, 48): "--data-path blend",
        (_SAMPLERS, 48): "--dataloader-type value", (_SAMPLERS, 76): "--micro-batch-size > 0",
        (_SAMPLERS, 124): "--micro-batch-size > 0",
        ("megatron/training.py", 529): _GRID, ("megatron/training.py", 530): _GRID, ("megatron/training.py", 531): _GRID,
        ("megatron/training.py", 554): "--DDP-impl local with the pipeline",
        ("megatron/training.py", 580): _PIPE_ENGINE,
        ("megatron/training.py", 1019): "--random-ltd needs ds_config random-LTD",
        ("megatron/learning_rates.py", 35): "--min-lr >= 0",
        ("megatron/learning_rates.py", 53): "one scheduler source",
        ("megatron/learning_rates.py", 103): _RATIO, ("megatron/learning_rates.py", 104): _RATIO,
        ("megatron/learning_rates.py", 112): "--lr-decay-style value",
        ("megatron/data/gpt_dataset.py", 148): _DOCUMENTS, ("megatron/data/gpt_dataset.py", 149): _DOCUMENTS,
        ("megatron/data/gpt_dataset.py", 290): _INT32, ("megatron/data/gpt_dataset.py", 291): _INT32,
        ("megatron/data/gpt_dataset.py", 319): _RANK_COUNTS,
        (_SAMPLERS, 77): _DP_RANK, (_SAMPLERS, 78): _DP_RANK, (_SAMPLERS, 125): _DP_RANK, (_SAMPLERS, 126): _DP_RANK,
        (_SAMPLERS, 137): _EPOCH_MULTIPLE,
        (_IDX, 111): _WRITER_ONLY, (_IDX, 163): _IN_RANGE,
        (_IDX, 430): data_index.VERSION_CHECK,
        ("pretrain_gpt.py", 214): _DEAD_ASSERT, ("pretrain_gpt.py", 252): _DEAD_ASSERT, ("pretrain_gpt.py", 269): _TRAINING,
    }),
}


def judged_by(flags: Iterable[str]) -> str:
    """The static rule that restates a check reading ``flags``: a row of the job package's
    upstream_asserts, else the tables above; '' when none does."""
    key = frozenset(flags)
    rows = upstream_asserts.rows_for(sorted(key))
    return rows[0].check if rows else JUDGED.get(key) or BY_CONSTRUCTION.get(key, "")


def attributes(node: ast.AST) -> List[str]:
    """``args.x`` names read in an expression, in order, each once."""
    out: List[str] = []
    for sub in ast.walk(node):
        if (isinstance(sub, ast.Attribute) and isinstance(sub.value, ast.Name) and sub.value.id == "args"
                and sub.attr not in out):
            out.append(sub.attr)
    return out


def _guards(func: ast.FunctionDef) -> Dict[int, List[ast.AST]]:
    """For each statement's line, the ``if`` tests that enclose it inside its function (an
    ``else`` branch is guarded by its ``if``'s test too: it reads the same options)."""
    out: Dict[int, List[ast.AST]] = {}

    def walk(statements: Iterable[ast.stmt], tests: List[ast.AST]) -> None:
        for stmt in statements:
            out.setdefault(stmt.lineno, list(tests))
            if isinstance(stmt, ast.If):
                walk(stmt.body, tests + [stmt.test])
                walk(stmt.orelse, tests + [stmt.test])
                continue
            for field in ("body", "orelse", "finalbody"):
                walk(getattr(stmt, field, None) or [], tests)
            for handler in getattr(stmt, "handlers", None) or []:
                walk(handler.body, tests)

    walk(func.body, [])
    return out


def _locals(func: ast.FunctionDef) -> Dict[str, List[str]]:
    """Local names assigned from options (``model_parallel_size = args.pipeline_model_parallel_size
    * args.tensor_model_parallel_size``), so a check on the name reads those options."""
    out: Dict[str, List[str]] = {}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    out.setdefault(target.id, [])
                    out[target.id] += [n for n in attributes(node.value) if n not in out[target.id]]
    return out


def _reads(node: ast.AST, local: Dict[str, List[str]]) -> List[str]:
    names = attributes(node)
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load):
            names += [n for n in local.get(sub.id, []) if n not in names]
    return names


def _functions(tree: ast.Module) -> Iterable[Tuple[str, ast.FunctionDef]]:
    """(qualified name, node) of every function and method, nested classes included."""
    def walk(node: ast.AST, prefix: str) -> Iterable[Tuple[str, ast.FunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef):
                yield prefix + child.name, child
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, prefix + child.name + ".")
    return walk(tree, "")


def census(text: str, dest_to_flag: Optional[Dict[str, str]] = None, path: str = "megatron/arguments.py",
           functions: Optional[Tuple[str, ...]] = FUNCTIONS, commit: str = "") -> List[Dict[str, Any]]:
    """Every assert and raise inside ``functions`` of ``text`` (the file at ``path``; None: every
    function of it, each check counted once, in its outermost scanned function)."""
    with warnings.catch_warnings():
        # upstream's files carry invalid escape sequences in strings; not ours to report
        warnings.simplefilter("ignore", (DeprecationWarning, SyntaxWarning))
        tree = ast.parse(text)
    rows: List[Dict[str, Any]] = []
    seen = set()
    for name, func in _functions(tree):
        if functions is not None and name not in functions:
            continue
        guards = _guards(func)
        local = _locals(func)
        for node in ast.walk(func):
            if not isinstance(node, (ast.Assert, ast.Raise)) or node.lineno in seen:
                continue
            seen.add(node.lineno)
            names: List[str] = []
            for test in guards.get(node.lineno, []):
                names += [n for n in _reads(test, local) if n not in names]
            body = node.test if isinstance(node, ast.Assert) else (node.exc or node)
            names += [n for n in _reads(body, local) if n not in names]
            flags = [(dest_to_flag or {}).get(n, "--" + n.replace("_", "-")) for n in names if n not in DERIVED]
            flags = [f for f in flags if f not in BLOCK_GUARDS]
            judged = JUDGED_AT.get((commit, path, node.lineno), "")
            if not judged and path == "megatron/arguments.py":
                judged = judged_by(flags)
            rows.append({"path": path, "function": name, "line": node.lineno,
                         "kind": "assert" if isinstance(node, ast.Assert) else "raise",
                         "flags": flags, "judged": judged})
    rows.sort(key=lambda r: r["line"])
    return rows


def read_file(source: Path, commit: Optional[str], path: str) -> Optional[str]:
    """The file's text at ``commit`` (the working tree's without one); None where it is absent."""
    if commit:
        done = subprocess.run(["git", "-C", str(source), "show", "%s:%s" % (commit, path)], check=False,
                              capture_output=True, text=True)
        return done.stdout if done.returncode == 0 else None
    file = source / path
    return file.read_text(encoding="utf-8") if file.is_file() else None


def census_of(source: Path, commit: Optional[str]) -> List[Dict[str, Any]]:
    """The rows of every file of SCANNED at ``commit``, in SCANNED's order."""
    rows: List[Dict[str, Any]] = []
    for scanned in SCANNED:
        text = read_file(source, commit, scanned.path)
        if text is not None:
            rows += census(text, path=scanned.path, functions=scanned.functions, commit=commit or "")
    return rows


def read(source: Path, commit: Optional[str]) -> str:
    path = "megatron/arguments.py"
    if commit:
        return subprocess.run(["git", "-C", str(source), "show", "%s:%s" % (commit, path)], check=True,
                              capture_output=True, text=True).stdout
    return (source / path).read_text(encoding="utf-8")


def coverage(rows: Iterable[Dict[str, Any]]) -> Tuple[int, int]:
    rows = list(rows)
    return sum(1 for r in rows if r["judged"]), len(rows)


NOT_JUDGED = "not judged"


def markdown(rows: List[Dict[str, Any]], label: str) -> str:
    """The figure over the whole denominator, one line per file, then one row per check."""
    judged, total = coverage(rows)
    lines = ["### start-up checks at %s: %d checks, %d judged (%.1f%%): by a static rule, a pre-launch check or "
             "by construction" % (label, total, judged, 100.0 * judged / total if total else 0.0), "",
             "| file | checks | judged |", "|---|---|---|"]
    for path in dict.fromkeys(r["path"] for r in rows):
        mine = [r for r in rows if r["path"] == path]
        lines.append("| %s | %d | %d |" % (path, len(mine), coverage(mine)[0]))
    lines += ["", "| file:line | function | kind | options read | judged by |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s:%d | %s | %s | %s | %s |" % (
            r["path"], r["line"], r["function"], r["kind"], " ".join(r["flags"]) or "-", r["judged"] or NOT_JUDGED))
    return "\n".join(lines) + "\n"


def sources_table() -> str:
    """SCANNED as markdown, for the document's preamble."""
    lines = ["| file | functions | why pretrain_gpt.py reaches it |", "|---|---|---|"]
    for scanned in SCANNED:
        lines.append("| %s | %s | %s |" % (scanned.path, ", ".join(scanned.functions or ()) or "all", scanned.reason))
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="a Megatron-DeepSpeed checkout")
    parser.add_argument("--commit", help="read the files at this commit (git show)")
    parser.add_argument("--markdown", action="store_true", help="markdown tables instead of JSON")
    parser.add_argument("--sources", action="store_true", help="print the table of scanned files and stop")
    args = parser.parse_args(argv)
    if args.sources:
        sys.stdout.write(sources_table())
        return 0
    rows = census_of(args.source, args.commit)
    if args.markdown:
        sys.stdout.write(markdown(rows, args.commit or "the working tree"))
    else:
        judged, total = coverage(rows)
        json.dump({"rows": rows, "judged": judged, "total": total}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
