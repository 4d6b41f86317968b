# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The census of Megatron-DeepSpeed's start-up checks: every ``assert`` and ``raise`` of
``megatron/arguments.py``'s ``parse_args`` and ``validate_args`` at a pinned commit, the options
each one reads, and which of the collection's static rules restates it.

Every one of them is judged before a launch by upstream itself (train.yml's upstream check runs the
checkout's own ``validate_args``, module_utils/_mds/oracle.py); this census says which ones the
controller also judges without a checkout, so a new pinned commit shows what changed.

    python scripts/upstream_census.py --source $MEGATRON_DS_SRC [--commit 4efb479d] [--markdown]

``--commit`` reads the file at that commit with ``git show`` (the checkout must be a git
repository); without it, the working tree's file. The rows are printed as a markdown table
(docs/upstream-census.md is this output for both pinned commits) or as JSON.
"""
from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Tuple

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".collections"))
# The option checks the job package restates as data, one row per upstream assert.
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import upstream_asserts  # noqa: E402

FUNCTIONS = ("parse_args", "validate_args")
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


def census(text: str, dest_to_flag: Optional[Dict[str, str]] = None) -> List[Dict[str, Any]]:
    """Every assert and raise inside FUNCTIONS of ``text`` (megatron/arguments.py)."""
    tree = ast.parse(text)
    rows: List[Dict[str, Any]] = []
    for func in tree.body:
        if not (isinstance(func, ast.FunctionDef) and func.name in FUNCTIONS):
            continue
        guards = _guards(func)
        local = _locals(func)
        for node in ast.walk(func):
            if not isinstance(node, (ast.Assert, ast.Raise)):
                continue
            names: List[str] = []
            for test in guards.get(node.lineno, []):
                names += [n for n in _reads(test, local) if n not in names]
            body = node.test if isinstance(node, ast.Assert) else (node.exc or node)
            names += [n for n in _reads(body, local) if n not in names]
            flags = [(dest_to_flag or {}).get(n, "--" + n.replace("_", "-")) for n in names if n not in DERIVED]
            flags = [f for f in flags if f not in BLOCK_GUARDS]
            rows.append({"function": func.name, "line": node.lineno,
                         "kind": "assert" if isinstance(node, ast.Assert) else "raise",
                         "flags": flags, "judged": judged_by(flags)})
    rows.sort(key=lambda r: r["line"])
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


def markdown(rows: List[Dict[str, Any]], label: str) -> str:
    judged, total = coverage(rows)
    lines = ["### megatron/arguments.py at %s: %d checks, %d restated by a static rule (%.1f%%)"
             % (label, total, judged, 100.0 * judged / total if total else 0.0), "",
             "| line | function | kind | options read | static rule |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %d | %s | %s | %s | %s |" % (
            r["line"], r["function"], r["kind"], " ".join(r["flags"]) or "-",
            r["judged"] or "not restated: the upstream oracle judges it before launch"))
    return "\n".join(lines) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, required=True, help="a Megatron-DeepSpeed checkout")
    parser.add_argument("--commit", help="read megatron/arguments.py at this commit (git show)")
    parser.add_argument("--markdown", action="store_true", help="a markdown table instead of JSON")
    args = parser.parse_args(argv)
    rows = census(read(args.source, args.commit))
    if args.markdown:
        sys.stdout.write(markdown(rows, args.commit or "the working tree"))
    else:
        judged, total = coverage(rows)
        json.dump({"rows": rows, "judged": judged, "total": total}, sys.stdout, indent=1)
        sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
