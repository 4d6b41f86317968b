# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""scripts/upstream_census.py: the census of Megatron-DeepSpeed's start-up checks, on small
sources as tables, and on the pinned commits where a git checkout is given (MEGATRON_DS_SRC):
docs/upstream-census.md must be what the script prints for them, and every rule it names must
be a check validate_job really makes."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("upstream_census", REPO / "scripts" / "upstream_census.py")
census = importlib.util.module_from_spec(_spec)
sys.modules["upstream_census"] = census
_spec.loader.exec_module(census)

COMMITS = ("4efb479d", "9446eaac")
SOURCE = '''
def parse_args(extra_args_provider=None):
    args = parser.parse_args()
    args.world_size = int(os.getenv("WORLD_SIZE", "1"))
    return args

def validate_args(args, defaults={}):
    assert args.world_size % args.tensor_model_parallel_size == 0, "world size"
    model_parallel_size = args.pipeline_model_parallel_size * args.tensor_model_parallel_size
    assert args.world_size % model_parallel_size == 0
    if not args.use_dataset_only:
        if args.fp16_lm_cross_entropy:
            assert args.fp16, "needs fp16"
        if args.train_iters:
            if args.lr_warmup_fraction is not None:
                assert args.lr_warmup_iters == 0, "one warmup"
        else:
            assert args.made_up_option
    if args.bad:
        raise ValueError("bad")

def helper(args):
    assert args.never_listed
'''


def test_census_of_a_source():
    rows = census.census(SOURCE)
    got = [(r["function"], r["kind"], r["flags"], r["judged"]) for r in rows]
    assert got == [
        ("validate_args", "assert", ["--tensor-model-parallel-size"], "TP x PP divides the world size"),
        # a local name is followed back to the options it is computed from
        ("validate_args", "assert", ["--pipeline-model-parallel-size", "--tensor-model-parallel-size"],
         "TP x PP divides the world size"),
        # a row of the job package's upstream_asserts
        ("validate_args", "assert", ["--fp16-lm-cross-entropy", "--fp16"], "fp16 cross entropy needs --fp16"),
        ("validate_args", "assert", ["--train-iters", "--lr-warmup-fraction", "--lr-warmup-iters"],
         "one learning-rate warmup"),
        # an else branch reads its if's options too
        ("validate_args", "assert", ["--train-iters", "--made-up-option"], ""),
        ("validate_args", "raise", ["--bad"], ""),
    ]
    assert census.coverage(rows) == (4, 6)
    text = census.markdown(rows, "x")
    assert text.startswith("### start-up checks at x: 6 checks, 4 judged (66.7%)")
    assert "| megatron/arguments.py | 6 | 4 |" in text
    assert "| megatron/arguments.py:20 | validate_args | raise | --bad | not judged |" in text


MICROBATCHES = '''
def build_num_microbatches_calculator(args):
    if args.rampup_batch_size is not None:
        assert len(args.rampup_batch_size) == 3

class RampupBatchsizeNumMicroBatches:
    def __init__(self, start_batch_size):
        assert start_batch_size > 0

    def update(self, consumed_samples):
        def inner():
            raise ValueError("x")
        inner()
'''


@pytest.mark.parametrize("functions,commit,expected", [
    # every function of the file, methods by Class.method, a nested function's raise counted once
    (None, "c0ffee", [("build_num_microbatches_calculator", 4, "assert", ["--rampup-batch-size"], ""),
                      ("RampupBatchsizeNumMicroBatches.__init__", 8, "assert", [], ""),
                      ("RampupBatchsizeNumMicroBatches.update", 12, "raise", [], "")]),
    (("RampupBatchsizeNumMicroBatches.__init__",), "c0ffee",
     [("RampupBatchsizeNumMicroBatches.__init__", 8, "assert", [], "")]),
])
def test_census_of_another_file(functions, commit, expected):
    rows = census.census(MICROBATCHES, path="megatron/microbatches.py", functions=functions, commit=commit)
    assert [(r["function"], r["line"], r["kind"], r["flags"], r["judged"]) for r in rows] == expected


def test_judged_at_is_keyed_by_commit_file_and_line():
    assert census.JUDGED_AT[("4efb479d", "megatron/microbatches.py", 104)] == "--rampup-batch-size accepted"
    assert ("9446eaac", "megatron/microbatches.py", 104) not in census.JUDGED_AT
    # an assert on line 21 of megatron/microbatches.py: a JUDGED_AT row at 4efb479d, none at 9446eaac
    text = "def f(args):\n" + "    pass\n" * 19 + "    assert len(args.rampup_batch_size) == 3\n"
    judged = [census.census(text, path="megatron/microbatches.py", functions=None, commit=c)[0]["judged"]
              for c in COMMITS]
    assert judged == ["--rampup-batch-size accepted", ""]


def test_every_scanned_file_says_why():
    assert all(s.reason and s.path.endswith(".py") for s in census.SCANNED)
    assert census.SCANNED[0].path == "megatron/arguments.py"
    assert "| megatron/data/gpt_dataset.py | all |" in census.sources_table()


def _rule_names() -> set:
    names = set()
    for path in (REPO / "plugins" / "module_utils" / "_job").glob("rules*.py"):
        names.update(re.findall(r'(?:finding|Refusal)\(\s*"([^"]+)"', path.read_text()))
    return names


def test_every_judged_rule_is_a_check_validate_job_makes():
    assert sorted(set(census.JUDGED.values()) - _rule_names()) == []


def _names_a_rule(name: str, names: set) -> bool:
    """A literal check name, or one that a "%s ..." check name produces."""
    return name in names or any("%s" in n and re.fullmatch(re.escape(n).replace("%s", ".+"), name) for n in names)


def test_every_rule_of_judged_at_is_a_check_validate_job_makes():
    names = _rule_names()
    missing = sorted({rule for rule in census.JUDGED_AT.values()
                      if not rule.startswith(("by construction:", "pre-launch:")) and not _names_a_rule(rule, names)})
    assert missing == []


def test_every_pre_launch_row_is_a_check_of_the_launch():
    """A "pre-launch:" row names a check that the launch's index probe makes (_launch.data_index)."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import data_index
    rows = {rule for rule in census.JUDGED_AT.values() if rule.startswith("pre-launch:")}
    assert rows and rows <= set(data_index.CHECKS)


SRC = os.environ.get("MEGATRON_DS_SRC", "")
HAS_GIT = bool(SRC) and subprocess.run(["git", "-C", SRC, "cat-file", "-e", "%s^{commit}" % COMMITS[0]],
                                       capture_output=True, check=False).returncode == 0


@pytest.mark.skipif(not HAS_GIT, reason="needs MEGATRON_DS_SRC, a git checkout of Megatron-DeepSpeed with %s"
                    % " and ".join(COMMITS))
def test_the_census_document_is_current():
    doc = (REPO / "docs" / "upstream-census.md").read_text()
    assert census.sources_table() in doc, "docs/upstream-census.md's table of scanned files is stale"
    for commit in COMMITS:
        table = census.markdown(census.census_of(Path(SRC), commit), commit)
        assert table in doc, "docs/upstream-census.md is stale for %s: regenerate it (see its first lines)" % commit
