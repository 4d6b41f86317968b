# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for plugins/module_utils/_mds/args.py: the pretrain_gpt.py flag table as data."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import args as m
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds.args import BEFORE_REBASE, HEAD, ArgValueError

# ---------------------------------------------------------------------------------------
# The table against docs/upstream-facts.md §A (flag, era, action, type, nargs, default)
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag,action,type_,nargs,default", [
    ("--tensor-model-parallel-size", "store", "int", None, 1),
    ("--pipeline-model-parallel-size", "store", "int", None, 1),
    ("--num-layers", "store", "int", None, None),
    ("--hidden-size", "store", "int", None, None),
    ("--num-attention-heads", "store", "int", None, None),
    ("--seq-length", "store", "int", None, None),
    ("--max-position-embeddings", "store", "int", None, None),
    ("--batch-size", "store", "int", None, None),
    ("--micro-batch-size", "store", "int", None, None),
    ("--global-batch-size", "store", "int", None, None),
    ("--train-iters", "store", "int", None, None),
    ("--lr", "store", "float", None, None),
    ("--min-lr", "store", "float", None, 0.0),
    ("--lr-decay-style", "store", "str", None, "linear"),
    ("--lr-warmup-iters", "store", "int", None, 0),
    ("--log-interval", "store", "int", None, 100),
    ("--save-interval", "store", "int", None, None),
    ("--eval-interval", "store", "int", None, 1000),
    ("--eval-iters", "store", "int", None, 100),
    ("--clip-grad", "store", "float", None, 1.0),
    ("--weight-decay", "store", "float", None, 0.01),
    ("--bf16", "store_true", None, None, False),
    ("--fp16", "store_true", None, None, False),
    ("--deepspeed", "store_true", None, None, False),
    ("--deepspeed_config", "store", "str", None, None),
    ("--data-path", "store", None, "*", None),
    ("--vocab-file", "store", "str", None, None),
    ("--merge-file", "store", "str", None, None),
    ("--save", "store", "str", None, None),
    ("--load", "store", "str", None, None),
    ("--checkpoint-activations", "store_true", None, None, False),
    ("--deepspeed-activation-checkpointing", "store_true", None, None, False),
    ("--partition-activations", "store_true", None, None, False),
    ("--contigious-checkpointing", "store_true", None, None, False),
    ("--data-impl", "store", "str", None, "infer"),
    ("--num-workers", "store", "int", None, 2),
    ("--no-pipeline-parallel", "store_true", None, None, False),
    ("--zero-stage", "store", "int", None, 1.0),
    ("--split", "store", "str", None, "969, 30, 1"),
    ("--no-masked-softmax-fusion", "store_false", None, None, True),
    ("--no-bias-gelu-fusion", "store_false", None, None, True),
    ("--cpu-optimizer", "store_true", None, None, False),
])
def test_flags_common_to_both_eras(flag, action, type_, nargs, default):
    for era in (HEAD, BEFORE_REBASE):
        arg = m.args_for(era)[flag]
        assert (arg.action, arg.type, arg.nargs, arg.default) == (action, type_, nargs, default)


@pytest.mark.parametrize("flag", [
    "--exit-signal-handler", "--use-flash-attn-v2", "--use-flash-attn", "--recompute-activations",
    "--recompute-granularity", "--no-gradient-accumulation-fusion", "--local-rank",
    "--universal-checkpoint", "--sequence-parallel", "--vocab-size", "--ds_fused_adam",
])
def test_head_only_flags(flag):
    assert flag in m.args_for(HEAD)
    assert flag not in m.args_for(BEFORE_REBASE)


@pytest.mark.parametrize("flag,era,present", [
    ("--local_rank", HEAD, True),
    ("--local_rank", BEFORE_REBASE, True),
    ("--deepspeed_mpi", BEFORE_REBASE, True),
    ("--deepspeed_mpi", HEAD, False),
    ("--override-lr-scheduler", BEFORE_REBASE, True),
    ("--override-lr-scheduler", HEAD, False),
    ("--override-opt_param-scheduler", HEAD, True),
    ("--deepspeed-config", HEAD, False),
    ("--deepspeed-config", BEFORE_REBASE, False),
    ("--dataset-impl", HEAD, False),
])
def test_era_membership(flag, era, present):
    assert (flag in m.args_for(era)) is present


@pytest.mark.parametrize("flag,head_choices,old_choices", [
    ("--lr-decay-style", ("constant", "linear", "cosine", "inverse-square-root"), ("constant", "linear", "cosine")),
    ("--data-impl", ("mmap", "infer"), ("lazy", "cached", "mmap", "infer")),
    ("--tokenizer-type", ("BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer", "SentencePieceTokenizer",
                          "GPTSentencePieceTokenizer", "HFTokenizer", "NullTokenizer"),
     ("BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer")),
])
def test_choices_differ_by_era(flag, head_choices, old_choices):
    assert m.args_for(HEAD)[flag].choices == head_choices
    assert m.args_for(BEFORE_REBASE)[flag].choices == old_choices


def test_unknown_era_is_refused():
    with pytest.raises(ValueError, match="unknown Megatron-DeepSpeed era 'mainline'"):
        m.args_for("mainline")


@pytest.mark.parametrize("flag,dest", [
    ("--no-masked-softmax-fusion", "masked_softmax_fusion"),
    ("--use-flash-attn", "use_flash_attn_v1"),
    ("--num-layers", "num_layers"),
    ("--deepspeed_config", "deepspeed_config"),
    ("-H", "hostfile"),
])
def test_dest_of(flag, dest):
    assert m.dest_of(flag) == dest


# ---------------------------------------------------------------------------------------
# era_for_deepspeed
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version,era", [
    (None, HEAD), ("", HEAD), ("0.9.2", BEFORE_REBASE), ("0.16.0", BEFORE_REBASE),
    ("0.16.1", HEAD), ("0.19.6", HEAD), ("v0.17.5", HEAD), ("1.0", HEAD), ("0.12", BEFORE_REBASE),
])
def test_era_for_deepspeed(version, era):
    assert m.era_for_deepspeed(version) == era


def test_era_for_deepspeed_refuses_garbage():
    with pytest.raises(ValueError, match="not a DeepSpeed version"):
        m.era_for_deepspeed("latest")


# ---------------------------------------------------------------------------------------
# classify: obsolete, deprecated, misspelt, era-missing, unknown
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("flag,era,status,replacement,words", [
    ("--num-layers", HEAD, "known", None, ""),
    ("--deepspeed_config", HEAD, "known", None, ""),
    ("--batch-size", HEAD, "obsolete", "--micro-batch-size",
     "--batch-size argument is no longer valid, use --micro-batch-size instead"),
    ("--batch-size", BEFORE_REBASE, "obsolete", "--micro-batch-size", "no longer valid"),
    ("--warmup", HEAD, "obsolete", "--lr-warmup-fraction", "--warmup argument is no longer valid"),
    ("--model-parallel-size", HEAD, "obsolete", "--tensor-model-parallel-size", "no longer valid"),
    ("--checkpoint-activations", HEAD, "deprecated", "--recompute-granularity full --recompute-method uniform",
     "DeepSpeed still relies on it"),
    ("--checkpoint-activations", BEFORE_REBASE, "known", None, ""),
    ("--deepspeed-config", HEAD, "misspelt", "--deepspeed_config", "underscore"),
    ("--dataset-impl", HEAD, "misspelt", "--data-impl", "tools/preprocess_data.py"),
    ("--zero-contiguous-gradients", HEAD, "misspelt", "--zero-contigious-gradients", "(sic)"),
    ("--overlap-comm", HEAD, "misspelt", None, "zero_optimization.overlap_comm"),
    ("--gradient-accumulation-steps", HEAD, "misspelt", "--global-batch-size", "--global-batch-size"),
    ("--zero_stage", HEAD, "misspelt", "--zero-stage", "- and _"),
    ("--micro_batch_size", HEAD, "misspelt", "--micro-batch-size", "- and _"),
    ("--local-rank", BEFORE_REBASE, "misspelt", "--local_rank", "- and _"),
    ("--exit-signal-handler", BEFORE_REBASE, "era_missing", None, "only in the head era"),
    ("--override-lr-scheduler", HEAD, "era_missing", None, "only in the before_rebase era"),
    ("--num_gpus", HEAD, "misspelt", None, "launcher option"),
    ("--num-layer", HEAD, "unknown", "--num-layers", "did you mean --num-layers"),
    ("--frobnicate", HEAD, "unknown", None, "unrecognized arguments"),
])
def test_classify(flag, era, status, replacement, words):
    note = m.classify(flag, era)
    assert note.status == status
    assert note.replacement == replacement
    assert words in note.message


# ---------------------------------------------------------------------------------------
# split_args and coerce: argparse's reading
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("tokens,expected", [
    (["--num-layers", "40", "--bf16"], [("--num-layers", ("40",)), ("--bf16", ())]),
    (["--lr=6e-5"], [("--lr", ("6e-5",))]),
    (["--data-path", "0.3", "a", "0.7", "b", "--split", "98,1,1"],
     [("--data-path", ("0.3", "a", "0.7", "b")), ("--split", ("98,1,1",))]),
    (["--seed", "-1"], [("--seed", ("-1",))]),
    (["--unknown-thing", "x", "y", "--bf16"], [("--unknown-thing", ("x", "y")), ("--bf16", ())]),
    (["stray", "--bf16"], [("", ("stray",)), ("--bf16", ())]),
    (["--num-layers", "--bf16"], [("--num-layers", ()), ("--bf16", ())]),
    (["--bf16", "extra"], [("--bf16", ()), ("", ("extra",))]),
])
def test_split_args(tokens, expected):
    assert [(p.flag, p.values) for p in m.split_args(tokens)] == expected


@pytest.mark.parametrize("flag,values,expected", [
    ("--num-layers", ["40"], 40),
    ("--lr", ["6.0e-5"], 6.0e-5),
    ("--bf16", [], True),
    ("--no-masked-softmax-fusion", [], False),
    ("--data-path", ["a", "b"], ["a", "b"]),
    ("--lr-decay-style", ["cosine"], "cosine"),
    ("--zero-stage", ["3"], 3),
])
def test_coerce_accepts(flag, values, expected):
    assert m.coerce(flag, values) == expected


@pytest.mark.parametrize("flag,values,era,message", [
    ("--num-layers", ["forty"], HEAD, "argument --num-layers: invalid int value: 'forty'"),
    ("--lr", ["fast"], HEAD, "argument --lr: invalid float value: 'fast'"),
    ("--num-layers", [], HEAD, "argument --num-layers: expected one argument"),
    ("--num-layers", ["1", "2"], HEAD, "expected one argument"),
    ("--lr-decay-style", ["inverse-square-root"], BEFORE_REBASE, "invalid choice: 'inverse-square-root'"),
    ("--data-impl", ["lazy"], HEAD, "invalid choice: 'lazy'"),
    ("--bf16", ["yes"], HEAD, "ignored explicit argument 'yes'"),
    ("--frob", ["1"], HEAD, "not a pretrain_gpt.py flag"),
])
def test_coerce_rejects_like_argparse(flag, values, era, message):
    with pytest.raises(ArgValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        m.coerce(flag, values, era)


def test_default_of_uses_the_era():
    assert m.default_of("--lr-decay-style") == "linear"
    assert "--exit-signal-handler" in m.flags_in(HEAD)
    assert "--exit-signal-handler" not in m.flags_in(BEFORE_REBASE)


@pytest.mark.parametrize("flag", sorted(m.LAUNCHER_ARGS))
def test_launcher_flags_are_not_pretrain_flags(flag):
    # The runner's options and Megatron's never share a spelling, so a launcher option after
    # pretrain_gpt.py is always reported as misplaced.
    assert flag not in m.args_for(HEAD)
