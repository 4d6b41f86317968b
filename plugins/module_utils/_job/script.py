# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The train.sh reader: an existing launch script (the guide's, the user's own, or the one the
megatron_job role rendered) read into the job model, so the same rules judge it.

The shell is read by ``shell``; the arguments after the training script go through the
Megatron-DeepSpeed flag table (``_mds.args``) and the spec's flag table (``args.SPEC_ARGS``), so a
flag maps to the same spec key in both directions.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import re
import shlex
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from .args import PRECISION_FLAGS, SPEC_ARGS, SPEC_FLAG_KEYS, PRESET_ARGS
from .findings import finding
from .model import default_ffn_hidden_size
from .schema import DEFAULTS
from .shell import (
    DECLARATION,
    NAME_RE,
    WRAPPERS,
    Word,
    basename,
    is_python,
    is_shell_syntax,
    lex_words,
    split_statements,
)
from .._mds.args import (
    BEFORE_REBASE,
    HEAD,
    LAUNCHER_ARGS,
    TORCHRUN_ARGS,
    ArgValueError,
    args_for,
    classify,
    coerce,
    split_args,
)


def script_defaults(era: str = HEAD) -> Dict[str, Any]:
    """A spec with the values Megatron-DeepSpeed uses when train.sh passes no flag: argparse
    defaults (and pretrain_gpt.py's tokenizer default), not this collection's defaults.
    Keys train.sh cannot express (paths of the venv, the checkout ...) are None."""
    table = args_for(era)
    spec: Dict[str, Any] = {key: None for key in DEFAULTS}
    for key, flag, kind in SPEC_ARGS:
        if flag not in table:
            # The era has no such switch: the feature is off (flags) or unset (values).
            spec[key] = None if kind == "value" else False
            continue
        default = table[flag].default
        if kind == "true":
            spec[key] = False
        elif kind == "false":
            spec[key] = True
        else:
            spec[key] = default
    if era == BEFORE_REBASE:
        # No such fusion (and no apex requirement for it) before the rebase.
        spec["gradient_accumulation_fusion"] = False
    spec["zero_stage"] = int(spec["zero_stage"] or 0)  # argparse default is the float 1.0
    spec["tokenizer_type"] = spec["tokenizer_type"] or "GPT2BPETokenizer"  # pretrain_gpt.py args_defaults
    spec["precision"] = "fp32"
    spec["load"] = False
    spec["checkpoint_dir"] = None
    spec["gpus_per_node"] = None
    spec["launcher"] = "pdsh"
    spec["master_port"] = 29500
    spec["env"] = {}
    spec["nccl_env"] = {}
    spec["extra_args"] = []
    spec["model_preset"] = "gpt"  # Megatron's defaults are the GPT-2 style model
    return spec


def parse_train_script(text: str, env: Optional[Mapping[str, str]] = None, era: str = HEAD) -> Dict[str, Any]:
    """Read an existing train.sh (like the guide's) into a spec comparable to normalize()'s.

    Understands VAR=value / export VAR=value, $VAR ${VAR} ${VAR:-default} $((arithmetic)),
    quotes, line continuations, comments, redirections, and the training command in the forms
    ``deepspeed [launcher options] pretrain_gpt.py [args]``, ``python -m
    deepspeed.launcher.runner ...``, ``torchrun ...`` and ``python -m
    torch.distributed.run|launch ...`` (wrappers such as nohup or nsys in front are skipped).

    Returns a dict with:
      spec           every DEFAULTS key; flags absent from the script get Megatron-DeepSpeed's
                     own defaults (script_defaults), not this collection's;
      explicit       spec keys the script set;
      launcher       {command, num_nodes, num_gpus, hostfile, include, exclude, master_port,
                      master_addr, launcher, options}; None values where not given;
      script         the training script path; args: the Megatron arguments as a list;
      deepspeed      --deepspeed given; deepspeed_config: its path (None when absent);
      load_dir       --load's directory (None when absent);
      variables      the shell variables at the command; exported: names exported;
      unknown_flags / obsolete_flags / misspelt_flags / era_missing_flags / deprecated_flags:
                     [{flag, message, replacement}] from the _mds_args table;
      findings       parse problems (no training command, unresolved variables, bad values,
                     repeated flags) as validate() findings.
    Every flag that maps to no spec key (unknown, obsolete, --recompute-*, --cpu-optimizer ...)
    lands in spec['extra_args'] with its values, so validate() judges it like a spec's
    extra_args.
    """
    variables: Dict[str, str] = dict(env or {})
    findings: List[Dict[str, str]] = []
    found = _find_command(text, variables, findings)
    result = _empty_result(era, variables, found.exported, findings)
    if found.words is None:
        findings.append(finding(
            "train.sh: training command", "fail", "train.sh", "no pretrain_*.py launch found",
            "deepspeed [launcher options] pretrain_gpt.py [arguments]",
            "point megatron_job_script at the script that launches pretrain_gpt.py",
        ))
        return result
    command, script_index = found.words, found.script_index
    spec = result["spec"]
    spec["env"] = {name: variables.get(name, "") for name in found.exported}
    spec["env"].update(found.env)
    _unresolved_findings(command, findings)
    launcher_words = [w.text for w in command[:script_index]]
    result["script"] = command[script_index].text
    _parse_launcher(launcher_words, result["launcher"], findings)
    launcher = result["launcher"]
    if launcher["num_gpus"] is not None:
        spec["gpus_per_node"] = launcher["num_gpus"]
    if launcher["launcher"]:
        spec["launcher"] = launcher["launcher"].lower()
    if launcher["master_port"] is not None:
        spec["master_port"] = launcher["master_port"]

    args = [w.text for w in command[script_index + 1:] if w.text not in ("$@", "$*")]
    result["args"] = args
    _read_megatron_args(args, era, result)
    return result


class _Command(NamedTuple):
    """The training command a script runs: its words (None when there is none), the index of
    the training script among them, the variables set in front of it, and the names exported."""

    words: Optional[List[Word]]
    script_index: int
    env: Dict[str, str]
    exported: List[str]


def _find_command(text: str, variables: Dict[str, str], findings: List[Dict[str, str]]) -> _Command:
    """Run through the script's statements as the shell would assign variables (``variables`` is
    updated in place) and return the first launch of a training script."""
    # Variables whose value holds something not evaluated here ($(command), unknown $VAR):
    # their uses are reported too.
    tainted: Dict[str, List[str]] = {}
    exported: List[str] = []
    command: Optional[List[Word]] = None
    command_env: Dict[str, str] = {}
    script_index = -1
    pending = split_statements(text)
    while pending:
        words = lex_words(pending.pop(0), variables, tainted)
        if not words:
            continue
        if words[0].text == "eval" and words[0].assign is None:
            # eval re-reads its expanded arguments as shell text (run_cmd="deepspeed ... &> log").
            pending[:0] = split_statements(" ".join(shlex.quote(w.text) if not is_shell_syntax(w.text) else w.text
                                                    for w in words[1:]))
            continue
        head_index, prefix_env = _assignments(words, variables, tainted)
        if head_index == len(words):
            continue
        if words[head_index].text in DECLARATION:
            _declare(words, head_index, variables, tainted, exported)
            continue
        index = _find_training_script(words, head_index)
        if index is None:
            continue
        if command is not None:
            findings.append(finding(
                "train.sh: one training command", "warn", "train.sh",
                "another training command: %s" % " ".join(w.text for w in words[:index + 1]),
                "one launch of pretrain_gpt.py", "only the first one is validated",
            ))
            continue
        command, script_index, command_env = words, index, prefix_env
    return _Command(command, script_index, command_env, exported)


def _assignments(words: Sequence[Word], variables: Dict[str, str],
                 tainted: Dict[str, List[str]]) -> Tuple[int, Dict[str, str]]:
    """(index of the first word that is not NAME=value, those assignments). A statement of
    assignments alone sets shell variables; in front of a command they are its environment only."""
    head_index = 0
    prefix_env: Dict[str, str] = {}
    prefix_taint: Dict[str, List[str]] = {}
    while head_index < len(words) and words[head_index].assign is not None:
        name, value = words[head_index].assign  # type: ignore[misc]
        prefix_env[name] = value
        prefix_taint[name] = list(words[head_index].unresolved)
        head_index += 1
    if head_index == len(words):
        variables.update(prefix_env)
        for name, constructs in prefix_taint.items():
            if constructs:
                tainted[name] = constructs
            else:
                tainted.pop(name, None)
    return head_index, prefix_env


def _declare(words: Sequence[Word], head_index: int, variables: Dict[str, str],
             tainted: Dict[str, List[str]], exported: List[str]) -> None:
    """export / declare / local / readonly: their assignments, and the names they export."""
    first = words[head_index].text
    exports = first == "export" or first == "declare" and "-x" in [w.text for w in words]
    for word in words[head_index + 1:]:
        if word.assign is not None:
            name = word.assign[0]
            variables[name] = word.assign[1]
            if word.unresolved:
                tainted[name] = list(word.unresolved)
            else:
                tainted.pop(name, None)
        elif NAME_RE.fullmatch(word.text):
            name = word.text
        else:
            continue
        if exports and name not in exported:
            exported.append(name)


def _empty_result(era: str, variables: Dict[str, str], exported: List[str],
                  findings: List[Dict[str, str]]) -> Dict[str, Any]:
    """parse_train_script's result before the command is read: Megatron's defaults, nothing given."""
    return {
        "spec": script_defaults(era),
        "explicit": [],
        "launcher": {
            "command": None, "num_nodes": None, "num_gpus": None, "hostfile": None,
            "include": None, "exclude": None, "master_port": None, "master_addr": None,
            "launcher": None, "options": [],
        },
        "script": None,
        "args": [],
        "deepspeed": False,
        "deepspeed_config": None,
        "load_dir": None,
        "variables": variables,
        "exported": exported,
        "unknown_flags": [],
        "obsolete_flags": [],
        "misspelt_flags": [],
        "era_missing_flags": [],
        "deprecated_flags": [],
        "findings": findings,
        "era": era,
    }


def _unresolved_findings(command: Sequence[Word], findings: List[Dict[str, str]]) -> None:
    """Warnings for what the command's words take from outside the script."""
    unresolved = sorted({u for w in command for u in w.unresolved})
    positional = [u for u in unresolved if u in ("$@", "$*")]
    others = [u for u in unresolved if u not in positional]
    if others:
        findings.append(finding(
            "train.sh: variables resolved", "warn", "train.sh", ", ".join(others),
            "every variable set in the script",
            "these come from the caller's environment and are not checked; set them in the "
            "script or pass env to the parser",
        ))
    if positional:
        findings.append(finding(
            "train.sh: arguments passed through", "warn", "train.sh", ", ".join(positional),
            "no pass-through arguments",
            "arguments given to train.sh at run time are not validated",
        ))


def _is_launcher(word: str) -> bool:
    return basename(word) in ("deepspeed", "torchrun") or is_python(word)


def _find_training_script(words: Sequence[Word], start: int = 0) -> Optional[int]:
    """Index of the training script word (pretrain_*.py preferred) when the command at
    ``words[start]`` is a launcher (deepspeed, torchrun, python), possibly behind wrappers
    such as nohup or nsys; None otherwise (echo "deepspeed ... pretrain_gpt.py" is not a launch)."""
    texts = [w.text for w in words]
    command = texts[start] if start < len(texts) else ""
    if not _is_launcher(command) and basename(command) not in WRAPPERS:
        return None
    candidates = [i for i, t in enumerate(texts) if i > start and re.search(r"(^|/)pretrain_\w+\.py$", t)]
    if not candidates:
        candidates = [
            i for i, t in enumerate(texts)
            if i > start and t.endswith(".py") and any(_is_launcher(x) for x in texts[start:i])
        ]
    if not candidates:
        return None
    index = candidates[0]
    return index if any(_is_launcher(t) for t in texts[start:index]) else None


def _parse_launcher(words: List[str], launcher: Dict[str, Any], findings: List[Dict[str, str]]) -> None:
    """Fill ``launcher`` from the words before the training script."""
    start = None
    kind = None
    for i, word in enumerate(words):
        base = basename(word)
        if base == "deepspeed":
            kind, start = "deepspeed", i + 1
            break
        if base == "torchrun":
            kind, start = "torchrun", i + 1
            break
        if is_python(word) and i + 2 <= len(words) and words[i + 1:i + 2] == ["-m"] and i + 2 < len(words):
            module = words[i + 2]
            if module in ("torch.distributed.run", "torch.distributed.launch"):
                kind, start = module, i + 3
                break
            if module in ("deepspeed.launcher.runner", "deepspeed"):
                kind, start = "deepspeed", i + 3
                break
        if is_python(word):
            kind, start = "python", i + 1
    launcher["command"] = kind
    if start is None:
        return
    options = words[start:]
    launcher["options"] = options
    if kind == "deepspeed":
        table = {flag: (arg.dest or flag.lstrip("-").replace("-", "_"), arg) for flag, arg in LAUNCHER_ARGS.items()}
        i = 0
        while i < len(options):
            word = options[i]
            flag, eq, inline = word.partition("=")
            entry = table.get(flag)
            if entry is None:
                findings.append(finding(
                    "launcher option %s" % word, "fail", "launcher", word,
                    "a deepspeed launcher option (%s ...)" % ", ".join(sorted(f for f in LAUNCHER_ARGS if f.startswith("--"))[:6]),
                    "remove it or move it after pretrain_gpt.py if it is a Megatron flag",
                ))
                i += 1
                continue
            dest, arg = entry
            if arg.action != "store":
                launcher[dest] = True
                i += 1
                continue
            if eq:
                value = inline
                i += 1
            elif i + 1 < len(options):
                value = options[i + 1]
                i += 2
            else:
                findings.append(finding(
                    "launcher option %s" % flag, "fail", "launcher", flag, "%s VALUE" % flag,
                    "give %s a value" % flag,
                ))
                break
            if arg.type == "int":
                _set_int(launcher, dest, flag, value, value, findings)
            else:
                launcher[dest] = value
    elif kind in ("torchrun", "torch.distributed.run", "torch.distributed.launch"):
        i = 0
        while i < len(options):
            flag, eq, inline = options[i].partition("=")
            dest = TORCHRUN_ARGS.get(flag)
            if dest is None:
                i += 1
                continue
            if eq:
                value, i = inline, i + 1
            elif i + 1 < len(options) and not options[i + 1].startswith("-"):
                value, i = options[i + 1], i + 2
            else:
                i += 1
                continue
            if dest in ("num_nodes", "num_gpus", "master_port", "node_rank"):
                # --nnodes MIN:MAX: the maximum is the node count the job asks for.
                _set_int(launcher, dest, flag, value, value.split(":")[-1], findings)
            else:
                launcher[dest] = value


def _set_int(launcher: Dict[str, Any], dest: str, flag: str, value: str, number: str,
             findings: List[Dict[str, str]]) -> None:
    """launcher[dest] = int(number), else a finding naming the option and its value."""
    try:
        launcher[dest] = int(number)
    except ValueError:
        findings.append(finding(
            "launcher option %s" % flag, "fail", "launcher", "%s %s" % (flag, value),
            "an integer", "set the variable it comes from in the script",
        ))


def _read_megatron_args(args: List[str], era: str, result: Dict[str, Any]) -> None:
    spec = result["spec"]
    findings = result["findings"]
    explicit: List[str] = result["explicit"]
    table = args_for(era)
    seen: Dict[str, int] = {}
    precision_flags: List[str] = []
    for parsed in split_args(args, era):
        flag, values = parsed.flag, list(parsed.values)
        if flag == "":
            findings.append(finding(
                "train.sh: stray value %s" % values[0], "fail", "arguments", values[0],
                "every value after a flag that takes one",
                "argparse stops with 'unrecognized arguments: %s'; remove it or add its flag" % values[0],
            ))
            continue
        seen[flag] = seen.get(flag, 0) + 1
        if seen[flag] == 2:
            findings.append(finding(
                "%s given once" % flag, "warn", "arguments", "%s repeated" % flag, "once",
                "argparse keeps the last value; remove the other occurrences",
            ))
        note = classify(flag, era)
        if note.status != "known":
            bucket = {
                "obsolete": "obsolete_flags", "misspelt": "misspelt_flags", "unknown": "unknown_flags",
                "era_missing": "era_missing_flags", "deprecated": "deprecated_flags",
            }[note.status]
            result[bucket].append({"flag": flag, "message": note.message, "replacement": note.replacement})
        if note.status not in ("known", "deprecated"):
            spec["extra_args"].extend([flag] + values)
            continue
        key = SPEC_FLAG_KEYS.get(flag)
        try:
            value = coerce(flag, values, era)
        except ArgValueError as exc:
            findings.append(finding(
                "%s value" % flag, "fail", "arguments", " ".join([flag] + values),
                "%s %s" % (flag, expected_value(table[flag])),
                "argparse stops with: %s; fix the value (or the variable it comes from)" % exc,
            ))
            continue
        if flag in PRECISION_FLAGS:
            precision_flags.append(flag)
            if len(precision_flags) == 1:
                spec["precision"] = PRECISION_FLAGS[flag]
                explicit.append("precision")
            else:
                spec["extra_args"].append(flag)
            continue
        if flag == "--deepspeed":
            result["deepspeed"] = True
            continue
        if flag == "--deepspeed_config":
            result["deepspeed_config"] = value
            continue
        if flag == "--save":
            spec["checkpoint_dir"] = value
            explicit.append("checkpoint_dir")
            continue
        if flag == "--load":
            result["load_dir"] = value
            spec["load"] = True
            explicit.append("load")
            continue
        if key is None:
            spec["extra_args"].extend([flag] + values)
            continue
        if key == "data_path":
            value = " ".join(value)
        elif key == "zero_stage":
            value = int(value)
        spec[key] = value
        if key not in explicit:
            explicit.append(key)
    _read_preset(spec, explicit)
    if spec.get("ffn_hidden_size") is None and isinstance(spec.get("hidden_size"), int):
        spec["ffn_hidden_size"] = default_ffn_hidden_size(spec, spec["hidden_size"])


def _read_preset(spec: Dict[str, Any], explicit: List[str]) -> None:
    """A train.sh that passes every switch of a model preset (``args.PRESET_ARGS``) is that
    preset: the switches leave extra_args and model_preset says it, as the job files wrote it."""
    extra = list(spec.get("extra_args") or [])
    for preset, groups in PRESET_ARGS.items():
        if not groups:
            continue
        positions = []
        for group in groups:
            found = [i for i in range(len(extra) - len(group) + 1) if tuple(extra[i:i + len(group)]) == group]
            if not found:
                break
            positions.append((found[0], len(group)))
        else:
            drop = set()
            for start, size in positions:
                drop.update(range(start, start + size))
            spec["extra_args"] = [word for i, word in enumerate(extra) if i not in drop]
            spec["model_preset"] = preset
            if "model_preset" not in explicit:
                explicit.append("model_preset")
            return


def expected_value(arg: Any) -> str:
    if arg.choices:
        return "{%s}" % ",".join(str(c) for c in arg.choices)
    if arg.nargs in ("*", "+"):
        return "VALUE [VALUE ...]"
    return {"int": "INT", "float": "FLOAT"}.get(arg.type or "", "VALUE")
