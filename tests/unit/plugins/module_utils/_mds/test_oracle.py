# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The upstream oracle (plugins/module_utils/_mds/oracle.py): its pure helpers as tables, and
upstream itself (the checkout's validate_args, DeepSpeed's config) where MEGATRON_DS_SRC and
MEGATRON_DS_PYTHON give it."""
from __future__ import annotations

import json
import struct
import subprocess

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import oracle
from ansible_collections.megatron_ds.cluster.tests.support import upstream


def test_request_round_trip():
    request = {"megatron_dir": "/m", "argv": ["--num-layers", "2", "--lr", "6e-05"], "world_size": 16,
               "env": {"A": "b c"}, "ds_config": {"train_batch_size": 8}}
    text = oracle.encode_request(request)
    assert " " not in text and "'" not in text
    assert oracle.decode_request(text) == request


@pytest.mark.parametrize("request_, missing", [
    ({"argv": [], "world_size": 1}, "megatron_dir"),
    ({"megatron_dir": "/m"}, "argv, world_size"),
])
def test_request_needs_its_keys(request_, missing):
    with pytest.raises(ValueError, match="request lacks %s" % missing):
        oracle.decode_request(oracle.encode_request(request_))


DESTS = {"tensor_model_parallel_size": "--tensor-model-parallel-size", "hidden_size": "--hidden-size",
         "num_attention_heads": "--num-attention-heads", "micro_batch_size": "--micro-batch-size"}


@pytest.mark.parametrize("line, dests, flags", [
    ("assert args.hidden_size % args.num_attention_heads == 0", DESTS, ["--hidden-size", "--num-attention-heads"]),
    # attributes validate_args derives (world size, data parallel size) name no option
    ("assert args.world_size % args.tensor_model_parallel_size == 0, 'world size'", DESTS,
     ["--tensor-model-parallel-size"]),
    ("assert args.micro_batch_size > 0 and args.micro_batch_size < 9", DESTS, ["--micro-batch-size"]),
    # an attribute no option of the parser sets
    ("assert args.made_up", DESTS, []),
    # no parser known: the attribute's own spelling
    ("assert args.seq_length", {}, ["--seq-length"]),
    ("", DESTS, []),
])
def test_flags_of_line(line, dests, flags):
    assert oracle.flags_of_line(line, dests) == flags


SOURCE = ["def validate_args(args):",
          "    if args.fp16_lm_cross_entropy:",
          "        assert args.fp16, 'lm cross entropy in fp16 only support in fp16 mode.'",
          "    assert args.global_batch_size > 0",
          "    for x in y:",
          "        # a comment",
          "",
          "        assert x"]


@pytest.mark.parametrize("index, guard", [(2, "if args.fp16_lm_cross_entropy:"), (3, ""), (7, ""), (0, ""), (99, "")])
def test_guard_line(index, guard):
    assert oracle.guard_line(SOURCE, index) == guard


@pytest.mark.parametrize("message, flags", [
    ("unrecognized arguments: --batch-size 8", ["--batch-size"]),
    ("argument --num-layers: invalid int value: 'x'", ["--num-layers"]),
    ("the following arguments are required: --foo, --bar", ["--foo", "--bar"]),
    ("world size (6) is not divisible", []),
])
def test_flags_of_message(message, flags):
    assert oracle.flags_of_message(message) == flags


ROOTS = [("/src/mds", "/src/mds"), ("/venv/lib/deepspeed", "/venv/lib")]


@pytest.mark.parametrize("frames, site", [
    ([("/x/oracle.py", 10, "validate_args(args)"), ("/src/mds/megatron/arguments.py", 75, "assert a")],
     ("megatron/arguments.py:75", "assert a")),
    # the innermost frame inside a root, even when a helper outside it raised
    ([("/src/mds/megatron/arguments.py", 120, "check(x)"), ("/usr/lib/python3/argparse.py", 9, "raise")],
     ("megatron/arguments.py:120", "check(x)")),
    ([("/x/oracle.py", 3, "DeepSpeedConfig(c)"), ("/venv/lib/deepspeed/runtime/config.py", 900, "assert b")],
     ("deepspeed/runtime/config.py:900", "assert b")),
    ([("/elsewhere/a.py", 4, "raise X")], ("/elsewhere/a.py:4", "raise X")),
    ([], ("", "")),
])
def test_raise_site(frames, site):
    assert oracle.raise_site(frames, ROOTS) == site


@pytest.mark.parametrize("text, message", [
    ("usage: pretrain_gpt.py [-h]\npretrain_gpt.py: error: unrecognized arguments: --batch-size 8\n",
     "unrecognized arguments: --batch-size 8"),
    ("something else\n", "something else"),
    ("", "the argument parser exited"),
])
def test_argparse_message(text, message):
    assert oracle.argparse_message(text) == message


@pytest.mark.parametrize("exc, line, message", [
    (AssertionError("world size (6) is not divisible"), "assert x, 'world size'", "world size (6) is not divisible"),
    (AssertionError(), "assert args.hidden_size % args.num_attention_heads == 0",
     "args.hidden_size % args.num_attention_heads == 0 does not hold"),
    (AssertionError(), "assert args.a == 1, \\", "args.a == 1 does not hold"),
    (ValueError(), "raise ValueError()", "ValueError: raise ValueError()"),
    (KeyError(), "", "KeyError"),
])
def test_exception_message(exc, line, message):
    assert oracle.exception_message(exc, line) == message


@pytest.mark.parametrize("result, lines", [
    ({"findings": []}, []),
    ({"findings": [oracle.finding("megatron", "assert", "x does not hold", "megatron/arguments.py:75", ["--a"])]},
     ["Megatron-DeepSpeed refuses the job at megatron/arguments.py:75 (--a): x does not hold"]),
    ({"findings": [oracle.finding("deepspeed", "DeepSpeedConfigError", "bad batch")]},
     ["DeepSpeed refuses the job: bad batch"]),
])
def test_finding_lines(result, lines):
    assert oracle.finding_lines(result) == lines


@pytest.mark.parametrize("stdout, verdict", [
    ("[INFO] accelerator cpu\n" + oracle.MARKER + '{"ran": true, "findings": []}\n', {"ran": True, "findings": []}),
    (oracle.MARKER + '{"ran": false}\nlater noise\n', {"ran": False}),
    ("Traceback ...\nImportError: x\n", "printed no verdict"),
])
def test_parse_output(stdout, verdict):
    if isinstance(verdict, str):
        with pytest.raises(ValueError, match=verdict):
            oracle.parse_output(stdout)
    else:
        assert oracle.parse_output(stdout) == verdict


@pytest.mark.parametrize("argv, code", [([], 2), (["oracle.py", "not base64!"], 2)])
def test_main_refuses_a_bad_call(argv, code, capsys):
    assert oracle.main(argv) == code
    assert capsys.readouterr().err


@pytest.mark.parametrize("arguments_py, reason", [
    (None, "no Megatron-DeepSpeed checkout"),  # said before torch is imported
    ("raise ImportError('broken checkout')\n", "cannot import"),
])
def test_an_unimportable_checkout_is_not_a_verdict(tmp_path, arguments_py, reason):
    """Where upstream cannot be imported, the oracle says why and judges nothing."""
    if arguments_py is not None:
        (tmp_path / "megatron").mkdir()
        (tmp_path / "megatron" / "__init__.py").write_text("")
        (tmp_path / "megatron" / "arguments.py").write_text(arguments_py)
    request = {"megatron_dir": str(tmp_path), "argv": [], "world_size": 1}
    proc = subprocess.run([oracle.sys.executable, oracle.__file__, oracle.encode_request(request)],
                          capture_output=True, text=True, check=False, timeout=300)
    verdict = oracle.parse_output(proc.stdout)
    assert verdict["ran"] is False and verdict["findings"] == []
    assert reason in verdict["reason"]


# --------------------------------------------------------------------------------------------
# Upstream itself (skips without a checkout and a venv)
# --------------------------------------------------------------------------------------------
SIM_ARGV = ["--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--seq-length", "128",
            "--max-position-embeddings", "128", "--micro-batch-size", "1", "--global-batch-size", "12",
            "--train-iters", "20", "--lr", "0.0001", "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000",
            "--tensor-model-parallel-size", "1", "--pipeline-model-parallel-size", "1", "--deepspeed",
            "--deepspeed_config", "ds_config.json", "--zero-stage", "1"]
DS_CONFIG = {"train_batch_size": 12, "train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 2,
             "zero_optimization": {"stage": 1}}


def _swap(argv, flag, value):
    out = list(argv)
    out[out.index(flag) + 1] = value
    return out


@upstream.needs_upstream
@pytest.mark.parametrize("argv, ds_config, world, found", [
    (SIM_ARGV, DS_CONFIG, 6, None),
    # validate_args: kv channels need heads to divide hidden (megatron/arguments.py:299 at 4efb479d)
    (_swap(SIM_ARGV, "--num-attention-heads", "5"), DS_CONFIG, 6,
     ("megatron", "megatron/arguments.py:", ["--hidden-size", "--num-attention-heads"])),
    # the guide's --batch-size: argparse refuses a flag Megatron-DeepSpeed does not have
    (SIM_ARGV + ["--batch-size", "8"], DS_CONFIG, 6, ("megatron", "megatron/arguments.py", ["--batch-size"])),
    # TP 4 does not divide a world of 6
    (_swap(SIM_ARGV, "--tensor-model-parallel-size", "4"), DS_CONFIG, 6,
     ("megatron", "megatron/arguments.py:", ["--tensor-model-parallel-size"])),
    # the guard names its flag too: --fp16-lm-cross-entropy needs --fp16 (megatron/arguments.py:323-324)
    (SIM_ARGV + ["--fp16-lm-cross-entropy"], DS_CONFIG, 6,
     ("megatron", "megatron/arguments.py:", ["--fp16-lm-cross-entropy"])),
    # past validate_args: the ramp-up's first global batch of 4 does not divide by micro 1 x DP 6
    # (megatron/microbatches.py, RampupBatchsizeNumMicroBatches)
    # (ramp-up needs sample-based training: validate_args refuses it with --train-iters)
    ([("--train-samples" if w == "--train-iters" else w) for w in _swap(SIM_ARGV, "--train-iters", "240")]
     + ["--rampup-batch-size", "4", "4", "100"], DS_CONFIG, 6,
     ("megatron", "megatron/microbatches.py:", ["--rampup-batch-size", "--global-batch-size", "--micro-batch-size"])),
    # the tokenizer build: NullTokenizer needs --vocab-size (megatron/tokenizer/tokenizer.py)
    ([w for i, w in enumerate(SIM_ARGV) if SIM_ARGV[i - 1 if i else 0] != "--vocab-size" and w != "--vocab-size"],
     DS_CONFIG, 6, ("megatron", "megatron/tokenizer/tokenizer.py:", ["--tokenizer-type"])),
    # the data split: all parts zero (megatron/data/dataset_utils.py get_train_valid_test_split_)
    (SIM_ARGV + ["--split", "0,0,0"], DS_CONFIG, 6, ("megatron", "megatron/data/dataset_utils.py:", ["--split"])),
    # a --data-path blend with an odd number of words
    (SIM_ARGV + ["--data-path", "0.5", "/data/a_text_document", "/data/b_text_document"], DS_CONFIG, 6,
     ("megatron", "megatron/data/dataset_utils.py:", ["--data-path"])),
    # DeepSpeed's batch arithmetic: 12 != 1 x 3 x 6
    (SIM_ARGV, dict(DS_CONFIG, gradient_accumulation_steps=3), 6, ("deepspeed", "deepspeed/runtime/config.py:", [])),
], ids=["accepted", "heads", "batch-size flag", "tp", "fp16 guard", "rampup", "tokenizer", "split", "blend",
        "ds batch"])
def test_upstream_decides(argv, ds_config, world, found):
    request = {"megatron_dir": upstream.SOURCE, "argv": argv, "world_size": world, "ds_config": ds_config, "env": {}}
    proc = subprocess.run([upstream.PYTHON, oracle.__file__, oracle.encode_request(request)],
                          capture_output=True, text=True, check=False, timeout=600)
    verdict = oracle.parse_output(proc.stdout)
    assert verdict["ran"], verdict["reason"]
    if found is None:
        assert verdict["findings"] == [] and verdict["data_parallel"] == 6
        return
    source, where, flags = found
    assert len(verdict["findings"]) == 1, json.dumps(verdict["findings"])
    item = verdict["findings"][0]
    assert item["source"] == source and item["where"].startswith(where), item
    assert item["flags"] == flags and item["message"], item


@pytest.mark.parametrize("flags, argv, passed", [
    (["--hidden-size", "--num-attention-heads", "--kv-channels"], ["--hidden-size", "64", "--num-attention-heads", "5"],
     ["--hidden-size", "--num-attention-heads"]),
    (["--vocab-size", "--tokenizer-type"], ["--tokenizer-type=NullTokenizer"], ["--tokenizer-type"]),
    # a default decided it: every option the line reads
    (["--kv-channels"], ["--hidden-size", "64"], ["--kv-channels"]),
    ([], ["--x"], []),
])
def test_flags_as_passed(flags, argv, passed):
    assert oracle.flags_as_passed(flags, argv) == passed


class _Args:
    def __init__(self, data_path):
        self.data_path = data_path


@pytest.mark.parametrize("data_path, prefixes", [
    (None, []),
    (["/d/a_text_document"], ["/d/a_text_document"]),
    (["0.7", "/d/a", "0.3", "/d/b"], ["/d/a", "/d/b"]),
])
def test_data_prefixes(data_path, prefixes):
    assert oracle._data_prefixes(_Args(data_path)) == prefixes


def _index_files(tmp_path, version=1):
    """A one-sequence mmap index as upstream's writer lays it out (indexed_dataset.py:385-410 at
    4efb479d), beside a .bin of that sequence's three uint16 tokens."""
    prefix = tmp_path / "corpus_text_document"
    header = b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", version, 8, 1, 2)
    (tmp_path / "corpus_text_document.idx").write_bytes(header + struct.pack("<i", 3) + struct.pack("<3q", 0, 0, 1))
    (tmp_path / "corpus_text_document.bin").write_bytes(struct.pack("<3H", 1, 2, 3))
    return str(prefix)


@pytest.mark.parametrize("files, request_, skipped", [
    (False, {}, "the job passes no --data-path"),
    (True, {}, ""),
    (None, {}, "its files are not on this machine"),
    # on the head node the request says the files are there to read
    (None, {"files_here": True}, ""),
])
def test_skip_data_index(tmp_path, files, request_, skipped):
    if files is False:
        args = _Args(None)
    elif files:
        args = _Args([_index_files(tmp_path)])
    else:
        args = _Args(["1", str(tmp_path / "absent")])
    reason = oracle._skip_data_index(args, request_)
    assert (skipped in reason) if skipped else reason == ""


@upstream.needs_upstream
@pytest.mark.parametrize("version, found", [(1, None), (2, "megatron/data/indexed_dataset.py:")])
def test_upstream_opens_the_index(tmp_path, version, found):
    """The data index stage: upstream's own reader on the job's files, after validate_args."""
    prefix = _index_files(tmp_path, version)
    argv = SIM_ARGV + ["--data-path", prefix]
    request = {"megatron_dir": upstream.SOURCE, "argv": argv, "world_size": 6, "ds_config": DS_CONFIG, "env": {}}
    proc = subprocess.run([upstream.PYTHON, oracle.__file__, oracle.encode_request(request)],
                          capture_output=True, text=True, check=False, timeout=600)
    verdict = oracle.parse_output(proc.stdout)
    assert verdict["ran"], verdict["reason"]
    assert {"stage": "data index", "ran": True, "reason": ""} in verdict["stages"], verdict["stages"]
    if found is None:
        assert verdict["findings"] == [], verdict["findings"]
        return
    assert len(verdict["findings"]) == 1 and verdict["findings"][0]["where"].startswith(found), verdict["findings"]
    assert verdict["findings"][0]["stage"] == "data index" and verdict["findings"][0]["flags"] == ["--data-path"]
