# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Upstream as the oracle: the checkout's own argument parser and ``validate_args``, and
DeepSpeed's own config object, run on the exact job before any rank starts.

The static rules (``_job.rules``) restate upstream so that the controller can judge a job without
a checkout. Where the checkout and the training venv are at hand (the head node in train.yml,
the controller with MEGATRON_DS_SRC), this file runs upstream itself and its answer is the final
word: what ``pretrain_gpt.py`` would refuse at start-up is refused here, in upstream's words.

What it runs, as ``pretrain_gpt.py`` does (Megatron-DeepSpeed 4efb479d ``pretrain_gpt.py:360-365``
-> ``megatron/training.py`` ``pretrain`` -> ``megatron/initialize.py:49,59``), without a GPU and
without a process group:

* ``megatron.arguments.parse_args(None, False)`` on the exact argument list, with ``WORLD_SIZE``
  and ``RANK`` as the launch sets them (``arguments.py:65-67`` reads them), then
  ``validate_args(args, {'tokenizer_type': 'GPT2BPETokenizer'})`` (pretrain_gpt.py's
  ``args_defaults``). Before 2023 (9446eaac) ``parse_args(extra_args_provider, defaults,
  ignore_unknown_args)`` validated inside itself; both signatures are handled.
* ``deepspeed.runtime.config.DeepSpeedConfig(ds_config, mpu)`` with an mpu that answers the data
  parallel size ``validate_args`` computed, so DeepSpeed's batch arithmetic and config checks
  (``_configure_train_batch_size``, ``_do_sanity_check``) see the job's real world. Its
  ``dist.get_rank()`` is answered 0 (no process group exists here).

Each upstream exception becomes a finding: the message as upstream wrote it, where it was raised
(file:line in the checkout or in DeepSpeed), and the flags that line reads (``args.x`` -> the
option that sets ``x``).

It is run as a file by the venv's python (``python oracle.py <request>``, the request a base64
JSON document), so it imports nothing of the collection and runs on Python 3.8.
"""
from __future__ import annotations

import argparse
import base64
import contextlib
import io
import json
import os
import re
import sys
import traceback
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

# pretrain_gpt.py's args_defaults (4efb479d pretrain_gpt.py:364; 9446eaac passes the same).
PRETRAIN_GPT_DEFAULTS = {"tokenizer_type": "GPT2BPETokenizer"}
MARKER = "MEGATRON_DS_ORACLE "
_ARG_ATTR = re.compile(r"\bargs\.([a-z_][a-z0-9_]*)")
_OPTION = re.compile(r"(?<![\w-])(--[a-zA-Z][\w-]*)")
# Attributes validate_args sets from the environment or from other flags, not options.
_NOT_FLAGS = frozenset({"rank", "world_size", "data_parallel_size", "ds_pipeline_enabled",
                        "transformer_pipeline_model_parallel_size", "params_dtype", "consumed_train_samples",
                        "consumed_valid_samples", "virtual_pipeline_model_parallel_size"})


# --------------------------------------------------------------------------------------------
# Pure helpers (unit-tested without torch)
# --------------------------------------------------------------------------------------------
def encode_request(request: Mapping[str, Any]) -> str:
    """The request as one shell-safe argument."""
    return base64.b64encode(json.dumps(request, sort_keys=True).encode("utf-8")).decode("ascii")


def decode_request(text: str) -> Dict[str, Any]:
    request = json.loads(base64.b64decode(text.encode("ascii")).decode("utf-8"))
    missing = [key for key in ("megatron_dir", "argv", "world_size") if key not in request]
    if missing:
        raise ValueError("request lacks %s" % ", ".join(missing))
    return request


def flags_of_line(line: str, dest_to_flag: Mapping[str, str]) -> List[str]:
    """The options whose values a source line reads (``args.tensor_model_parallel_size`` ->
    ``--tensor-model-parallel-size``), in order, each once; attributes no option sets are left out."""
    out: List[str] = []
    for name in _ARG_ATTR.findall(line or ""):
        if name in _NOT_FLAGS:
            continue
        flag = dest_to_flag.get(name) or ("--" + name.replace("_", "-") if not dest_to_flag else None)
        if flag and flag not in out:
            out.append(flag)
    return out


def guard_line(lines: Sequence[str], index: int) -> str:
    """The ``if``/``elif`` line that guards line ``index`` (0-based) of a source file: the nearest
    line above with less indentation, when it is a condition (``if args.fp16_lm_cross_entropy:``
    guards ``assert args.fp16``, so both flags are named); '' otherwise."""
    if not 0 <= index < len(lines):
        return ""
    text = lines[index]
    indent = len(text) - len(text.lstrip())
    for above in reversed(lines[:index]):
        stripped = above.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if len(above) - len(above.lstrip()) < indent:
            return stripped if stripped.startswith(("if ", "elif ")) else ""
    return ""


def flags_of_message(message: str) -> List[str]:
    """Options named in a message (argparse's 'argument --foo: invalid int value')."""
    out: List[str] = []
    for flag in _OPTION.findall(message or ""):
        if flag not in out:
            out.append(flag)
    return out


def raise_site(frames: Sequence[Tuple[str, int, str]], roots: Sequence[Tuple[str, str]]) -> Tuple[str, str]:
    """(``path:line``, the source line) of the innermost frame inside one of ``roots``, each a
    (directory, what its paths are made relative to): the checkout (``megatron/arguments.py:75``)
    or DeepSpeed's package (``deepspeed/runtime/config.py:...``). The innermost frame when none
    is. ``frames`` are (filename, line number, source line), outermost first."""
    frames = list(frames)
    for filename, lineno, text in reversed(frames):
        path = os.path.abspath(filename)
        for root, base in roots:
            if path.startswith(os.path.abspath(root).rstrip(os.sep) + os.sep):
                return "%s:%d" % (os.path.relpath(path, base), lineno), text or ""
    if frames:
        filename, lineno, text = frames[-1]
        return "%s:%d" % (filename, lineno), text or ""
    return "", ""


def argparse_message(stderr: str) -> str:
    """argparse's own error line ('pretrain_gpt.py: error: ...') from what it printed."""
    lines = [line for line in (stderr or "").splitlines() if ": error: " in line]
    if lines:
        return lines[-1].split(": error: ", 1)[1].strip()
    return (stderr or "").strip().splitlines()[-1] if (stderr or "").strip() else "the argument parser exited"


def exception_message(exc: BaseException, line: str) -> str:
    """Upstream's message; for a bare ``assert`` (Megatron has many), the condition it asserts."""
    text = str(exc).strip()
    if text:
        return text
    code = (line or "").strip()
    if code.startswith("assert "):
        return "%s does not hold" % code[len("assert "):].rstrip(", \\").strip()
    return type(exc).__name__ + ((": " + code) if code else "")


def finding(source: str, kind: str, message: str, where: str = "", flags: Iterable[str] = (),
            line: str = "") -> Dict[str, Any]:
    return {"source": source, "kind": kind, "message": message, "where": where, "flags": list(flags),
            "line": line.strip()}


def flags_as_passed(flags: Sequence[str], argv: Sequence[str]) -> List[str]:
    """Of the options an upstream line reads, those the job passed (as it passed them); all of
    them when it passed none (a default decided it)."""
    given = {str(word).split("=", 1)[0] for word in argv if str(word).startswith("--")}
    passed = [flag for flag in flags if flag in given]
    return passed or list(flags)


def finding_lines(result: Mapping[str, Any]) -> List[str]:
    """One line per finding, as the user reads it: who refused, where, which flags, upstream's words."""
    out = []
    for item in result.get("findings") or ():
        who = "Megatron-DeepSpeed" if item["source"] == "megatron" else "DeepSpeed"
        flags = (" (%s)" % ", ".join(item["flags"])) if item.get("flags") else ""
        where = (" at %s" % item["where"]) if item.get("where") else ""
        out.append("%s refuses the job%s%s: %s" % (who, where, flags, item["message"]))
    return out


class _DataParallelMpu:
    """The one question DeepSpeedConfig asks an mpu: the data parallel size."""

    def __init__(self, data_parallel: int) -> None:
        self._dp = int(data_parallel)

    def get_data_parallel_world_size(self) -> int:
        return self._dp


# --------------------------------------------------------------------------------------------
# Running upstream
# --------------------------------------------------------------------------------------------
def _frames(exc: BaseException) -> List[Tuple[str, int, str]]:
    return [(f.filename, f.lineno or 0, f.line or "") for f in traceback.extract_tb(exc.__traceback__)]


def _exception_finding(source: str, exc: BaseException, roots: Sequence[Tuple[str, str]],
                       dest_to_flag: Mapping[str, str]) -> Dict[str, Any]:
    where, line = raise_site(_frames(exc), roots)
    message = exception_message(exc, line)
    kind = "assert" if isinstance(exc, AssertionError) else type(exc).__name__
    flags = flags_of_line(line, dest_to_flag)
    path, number = where.rpartition(":")[0::2]
    for root, base in roots:
        candidate = os.path.join(base, path)
        if path and number.isdigit() and candidate.startswith(os.path.abspath(root)) and os.path.isfile(candidate):
            with open(candidate, encoding="utf-8", errors="replace") as handle:
                guard = guard_line(handle.read().splitlines(), int(number) - 1)
            flags += [f for f in flags_of_line(guard, dest_to_flag) if f not in flags]
            break
    flags = flags or flags_of_message(message)
    return finding(source, kind, message, where, flags, line)


def _dest_to_flag(parser: Optional[argparse.ArgumentParser]) -> Dict[str, str]:
    out: Dict[str, str] = {}
    for action in getattr(parser, "_actions", []) if parser is not None else []:
        longs = [s for s in action.option_strings if s.startswith("--")]
        if longs and action.dest not in out:
            out[action.dest] = longs[0]
    return out


# --------------------------------------------------------------------------------------------
# The start-up after validate_args, as far as it goes without a GPU or a process group
# --------------------------------------------------------------------------------------------
def _microbatches(args: Any) -> None:
    """megatron/microbatches.py, as initialize_megatron builds it (global_vars.py
    _build_num_microbatches_calculator), then stepped over the batch ramp-up as the training loop
    does (training.py update_num_microbatches(consumed, consistency_check=True)): each global
    batch of the ramp must divide by micro batch x data parallel."""
    from megatron.microbatches import build_num_microbatches_calculator

    calculator = build_num_microbatches_calculator(args)
    if getattr(args, "rampup_batch_size", None) is None:
        return
    consumed, steps = 0, 0
    ramp_samples = int(args.rampup_batch_size[2])
    while consumed <= ramp_samples and steps < 1000000:
        calculator.update(consumed, True)
        consumed += calculator.get_current_global_batch_size()
        steps += 1


def _split(args: Any) -> None:
    """--split as the dataset build parses it (dataset_utils.get_train_valid_test_split_),
    and a --data-path blend as it weighs it (get_datasets_weights_and_num_samples)."""
    from megatron.data import dataset_utils

    if getattr(args, "split", None):
        dataset_utils.get_train_valid_test_split_(args.split, 1000)
    prefixes = list(getattr(args, "data_path", None) or [])
    if len(prefixes) > 1:
        dataset_utils.get_datasets_weights_and_num_samples(prefixes, [1000, 100, 10])


def _tokenizer_files(args: Any) -> List[str]:
    names = ("vocab_file", "merge_file", "tokenizer_model")
    return [str(getattr(args, n)) for n in names if getattr(args, n, None)]


def _skip_tokenizer(args: Any, request: Mapping[str, Any]) -> str:
    """The tokenizer reads its files: judged where they are (the head node), or when every file
    the job names is readable here."""
    if request.get("files_here"):
        return ""
    absent = [f for f in _tokenizer_files(args) if not os.path.isfile(f)]
    if absent:
        return "its files are not on this machine (%s); the head node's check reads them" % ", ".join(absent)
    return ""


def _tokenizer(args: Any) -> None:
    """megatron/tokenizer/tokenizer.py build_tokenizer: the type's required files and the
    padded vocabulary (make_vocab_size_divisible_by x TP)."""
    from megatron.tokenizer import build_tokenizer

    build_tokenizer(args)


def _data_prefixes(args: Any) -> List[str]:
    """The --data-path prefixes (a blend's weights left out), as gpt_dataset.py opens them."""
    prefixes = []
    for word in getattr(args, "data_path", None) or []:
        try:
            float(word)
        except ValueError:
            prefixes.append(str(word))
    return prefixes


def _skip_data_index(args: Any, request: Mapping[str, Any]) -> str:
    """The index files are judged where they are (shared storage on the head node), or when
    every prefix's .idx and .bin are readable here."""
    prefixes = _data_prefixes(args)
    if not prefixes:
        return "the job passes no --data-path"
    if request.get("files_here"):
        return ""
    absent = [p + ext for p in prefixes for ext in (".idx", ".bin") if not os.path.isfile(p + ext)]
    if absent:
        return "its files are not on this machine (%s); the head node's check reads them" % ", ".join(absent[:3])
    return ""


def _data_index(args: Any) -> None:
    """Each prefix opened by gpt_dataset.py's own get_indexed_dataset_ (indexed_dataset.make_dataset
    with the job's --data-impl): the index's magic, version and token dtype, and the arrays its
    header announces. Without the warm-up read of the whole file (skip_warmup), which checks nothing."""
    from megatron.data import gpt_dataset

    for prefix in _data_prefixes(args):
        gpt_dataset.get_indexed_dataset_(prefix, args.data_impl, True)


class _Stage:
    def __init__(self, name: str, run_stage: Any, flags: Sequence[str], skip: Any = None) -> None:
        self.name = name
        self.run = run_stage
        self.flags = tuple(flags)
        self.skip = skip or (lambda args, request: "")


# In the order pretrain() meets them: initialize_megatron builds the microbatch calculator and
# the tokenizer (global_vars.set_global_variables), the data provider then parses the split.
_STAGES = (
    _Stage("microbatches", _microbatches, ("--rampup-batch-size", "--global-batch-size", "--micro-batch-size")),
    _Stage("tokenizer", _tokenizer, ("--tokenizer-type",), _skip_tokenizer),
    _Stage("data split", _split, ("--split", "--data-path")),
    _Stage("data index", _data_index, ("--data-path", "--data-impl"), _skip_data_index),
)


def run(request: Mapping[str, Any]) -> Dict[str, Any]:
    """Upstream's verdict on the job: ``ran`` (false with ``reason`` when upstream cannot be
    imported here), ``findings`` (each naming the options the job passed that the refusing line
    reads), ``data_parallel``, the ``stages`` after validate_args that ran or were skipped and
    why, and the versions it ran."""
    result = _run(request)
    argv = [str(a) for a in request.get("argv") or ()]
    for item in result["findings"]:
        item["reads"] = list(item.get("flags") or [])
        item["flags"] = flags_as_passed(item["reads"], argv)
    return result


def _run(request: Mapping[str, Any]) -> Dict[str, Any]:
    megatron_dir = os.path.abspath(request["megatron_dir"])
    result: Dict[str, Any] = {"ran": False, "reason": "", "findings": [], "data_parallel": None, "versions": {},
                              "stages": []}
    os.environ.update({str(k): str(v) for k, v in (request.get("env") or {}).items()})
    os.environ["WORLD_SIZE"] = str(int(request["world_size"]))
    os.environ["RANK"] = "0"
    os.environ["LOCAL_RANK"] = "0"
    if request.get("workdir") and os.path.isdir(request["workdir"]):
        os.chdir(request["workdir"])
    if not os.path.isfile(os.path.join(megatron_dir, "megatron", "arguments.py")):
        # Checked before importing DeepSpeed (and so torch), which alone takes seconds.
        result["reason"] = "no Megatron-DeepSpeed checkout at %s (megatron/arguments.py)" % megatron_dir
        return result
    sys.path.insert(0, megatron_dir)
    try:
        import deepspeed  # noqa: F401 (the version, and DeepSpeedConfig below)
        from megatron import arguments as mds_arguments
    except Exception as exc:  # an import failure is "cannot judge here", not a refusal
        result["reason"] = "cannot import Megatron-DeepSpeed from %s with %s: %s: %s" % (
            megatron_dir, sys.executable, type(exc).__name__, exc)
        return result
    result["ran"] = True
    result["versions"] = {"deepspeed": getattr(deepspeed, "__version__", ""), "python": sys.version.split()[0]}
    ds_root = os.path.dirname(os.path.abspath(deepspeed.__file__))
    roots = [(megatron_dir, megatron_dir), (ds_root, os.path.dirname(ds_root))]

    # The parser pretrain_gpt.py builds, kept so a finding can name the option of an attribute.
    seen: Dict[str, argparse.ArgumentParser] = {}
    original = argparse.ArgumentParser.parse_known_args

    def remember(self, *args: Any, **kwargs: Any) -> Any:
        seen.setdefault("parser", self)
        return original(self, *args, **kwargs)

    argv = [str(a) for a in request["argv"]]
    defaults = dict(request.get("args_defaults") or PRETRAIN_GPT_DEFAULTS)
    sys.argv = ["pretrain_gpt.py"] + argv
    stderr = io.StringIO()
    args = None
    argparse.ArgumentParser.parse_known_args = remember  # type: ignore[method-assign]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(stderr):
            try:
                import inspect
                takes_defaults = "defaults" in inspect.signature(mds_arguments.parse_args).parameters
                if takes_defaults:  # 9446eaac: parse_args validates too
                    args = mds_arguments.parse_args(None, defaults, False)
                else:
                    args = mds_arguments.parse_args(None, False)
                    mds_arguments.validate_args(args, defaults)
            except SystemExit as exc:
                message = argparse_message(stderr.getvalue())
                result["findings"].append(finding("megatron", "argparse", message, "megatron/arguments.py",
                                                  flags_of_message(message)))
                args = None
                del exc
            except Exception as exc:  # upstream's own refusal, whatever it raised
                result["findings"].append(_exception_finding("megatron", exc, roots,
                                                             _dest_to_flag(seen.get("parser"))))
                args = None
    finally:
        argparse.ArgumentParser.parse_known_args = original  # type: ignore[method-assign]

    if args is None:
        return result
    result["data_parallel"] = getattr(args, "data_parallel_size", None)
    dest_to_flag = _dest_to_flag(seen.get("parser"))
    for stage in _STAGES:
        skipped = stage.skip(args, request)
        if skipped:
            result["stages"].append({"stage": stage.name, "ran": False, "reason": skipped})
            continue
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                stage.run(args)
        except Exception as exc:  # upstream's refusal at this stage of the start-up
            item = _exception_finding("megatron", exc, roots, dest_to_flag)
            item["stage"] = stage.name
            # A line that reads locals (the split's parts) names no option: the stage's own do.
            item["flags"] = item["flags"] or list(stage.flags)
            result["findings"].append(item)
            result["stages"].append({"stage": stage.name, "ran": True, "reason": ""})
            return result  # the start-up stops at its first refusal; so does the oracle
        result["stages"].append({"stage": stage.name, "ran": True, "reason": ""})
    ds_config = request.get("ds_config")
    if ds_config is None or not getattr(args, "deepspeed", False):
        return result
    try:
        import deepspeed.comm as ds_comm
        from deepspeed.runtime.config import DeepSpeedConfig
    except Exception as exc:
        result["reason"] = "cannot import DeepSpeed's config: %s: %s" % (type(exc).__name__, exc)
        return result
    real_get_rank = ds_comm.get_rank
    ds_comm.get_rank = lambda *a, **k: 0  # no process group: DeepSpeedConfig only asks the rank
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            DeepSpeedConfig(dict(ds_config), mpu=_DataParallelMpu(result["data_parallel"] or 1))
    except Exception as exc:
        result["findings"].append(_exception_finding("deepspeed", exc, roots, {}))
    finally:
        ds_comm.get_rank = real_get_rank
    return result


def main(argv: Sequence[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: python oracle.py <base64 JSON request>\n")
        return 2
    try:
        request = decode_request(argv[1])
    except (ValueError, TypeError) as exc:
        sys.stderr.write("oracle: bad request: %s\n" % exc)
        return 2
    result = run(request)
    # DeepSpeed and Megatron log to stdout on import: the verdict is the last line, marked.
    sys.stdout.write("\n" + MARKER + json.dumps(result, sort_keys=True) + "\n")
    return 0


def parse_output(stdout: str) -> Dict[str, Any]:
    """The verdict from the oracle's stdout (its last marked line)."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER):])
    raise ValueError("the oracle printed no verdict; its output ends: %s" % (stdout or "").strip()[-400:])


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
