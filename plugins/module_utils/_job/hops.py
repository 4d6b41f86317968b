# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One rule per hop: every place a job value travels through a shell or a line-based file, what
the value may hold there, and how it is quoted on the way.

A hop is a file or command line that reads values as text: train.sh, the sbatch script, the
command line DeepSpeed's pdsh runner builds for every node, nccl.env, the hostfile, the
``export K=V;`` prefix of that command line (.deepspeed_env) and the systemd units. ``HOPS`` says,
per hop, which characters a value may hold (values are data: nothing in them may become code or
a new line) and the quoting function the renderers call; ``VALUES`` says which hops each job
variable reaches. ``hop_findings`` judges a job spec with both tables (validate.yml),
``refuse_spec`` and ``refusal`` refuse the same values where files are rendered, and
``shell_quote`` and ``systemd_quote`` are the quoting the templates use.

DeepSpeed's pdsh runner quotes what it writes only in part (docs/job-files.md, "What a value may
hold"): 0.19.6 double-quotes a pretrain_gpt.py argument only when it holds a space, escaping '"'
(deepspeed/launcher/multinode_runner.py:63-72), and writes ``cd <cwd>;``, the interpreter and
``--master_addr=<value>`` raw (:99-100); 0.9.2 single-quotes every argument not starting with '-'
(multinode_runner.py:63-64 at v0.9.2) and writes the same words raw (:84-85). The rule of a pdsh
hop is what both leave literal.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import re
import shlex
from typing import Any, Callable, Dict, Iterator, List, Mapping, NamedTuple, Optional, Pattern, Tuple

from .._stack import profiles as _stack_profiles
from .findings import finding
from .schema import PREFIX, JobError

# Newline, carriage return, NUL, tab and the other C0 controls, and DEL: in a line-based file a
# newline or CR starts a new line (a new shell command in train.sh), NUL ends a C string early.
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
# What the remote shell leaves literal in a pdsh word whichever way DeepSpeed quotes it: unquoted
# (0.19.6, no space), inside "..." (0.19.6, a space) and inside '...' (0.9.2). '%' is left out
# too: pdsh replaces %n, %h and %u in the command (DeepSpeed relies on it for --node_rank=%n).
_PDSH_WORD = r"\w@+=:,./-"
# A node's name: a hostname or an IPv4 address, as pdsh -w, ssh and the hostfile take it. Not
# starting with '-' (ssh would read it as an option); ',' '@' ':' '#' and spaces are pdsh's and
# the hostfile's separators.
_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*\Z")
# .deepspeed_env values go into `export K=V;`: from DeepSpeed 0.15.2 in double quotes when they
# hold anything outside this class, raw before (0.9.2: multinode_runner.py:36-37 at v0.9.2).
DS_ENV_SAFE = re.compile(r"^[\w@%+=:,./-]*\Z")
DS_ENV_QUOTING_SINCE = "0.15.2"
_DOUBLE_QUOTE_ACTIVE = re.compile(r'["`$\\]')


def shell_quote(value: Any) -> str:
    """``value`` as one bash word (shlex.quote), refusing control characters, which no quoting
    keeps on one line. None is the empty word."""
    text = "" if value is None else str(value)
    bad = CONTROL.search(text)
    if bad:
        raise JobError("value %r holds %s, which no shell quoting keeps on one line; remove it"
                       % (text, printable(bad.group())))
    return shlex.quote(text)


_SYSTEMD_BARE = re.compile(r"^[\w@+=:,./-]+\Z")


def systemd_quote(value: Any) -> str:
    """``value`` as one word of a systemd ExecStart= line: a plain word as it is, anything else
    double-quoted with '\\' and '"' escaped, and systemd's own expansions doubled ('%'
    specifiers, '$' variables; systemd.service(5), "Command lines"). Refuses control characters."""
    text = "" if value is None else str(value)
    bad = CONTROL.search(text)
    if bad:
        raise JobError("value %r holds %s, which would end the unit's line; remove it"
                       % (text, printable(bad.group())))
    if _SYSTEMD_BARE.match(text):
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%").replace("$", "$$")
    return '"%s"' % escaped


class Hop(NamedTuple):
    """Where a value goes, what it may hold there, why, and how the renderers quote it.

    ``refuse(value, quotes)`` returns the first character the hop cannot carry, or None;
    ``quotes`` says whether the profile's DeepSpeed quotes .deepspeed_env values.
    ``quote``: the function the templates call; None where DeepSpeed (not this collection)
    writes the value, so the rule alone keeps it literal."""

    where: str
    allowed: str
    why: str
    refuse: Callable[[str, bool], Optional[str]]
    quote: Optional[Callable[[Any], str]]


def _first(pattern: Pattern[str], text: str) -> Optional[str]:
    match = pattern.search(text)
    return match.group() if match else None


def _printable_only(text: str, quotes: bool) -> Optional[str]:
    return _first(CONTROL, text)


_PDSH_ARG_BAD = re.compile(r"[^ %s]" % _PDSH_WORD)
_PDSH_RAW_BAD = re.compile(r"[^%s]" % _PDSH_WORD)
_SPACE = re.compile(r"\s")


def _pdsh_arg(text: str, quotes: bool) -> Optional[str]:
    bad = _first(CONTROL, text) or _first(_PDSH_ARG_BAD, text)
    if bad is None and text.startswith("-") and " " in text:
        return " "  # 0.9.2 leaves a word starting with '-' unquoted: the space would split it
    return bad


def _pdsh_raw(text: str, quotes: bool) -> Optional[str]:
    return _first(CONTROL, text) or _first(_PDSH_RAW_BAD, text)


def _sbatch_option(text: str, quotes: bool) -> Optional[str]:
    return _first(CONTROL, text) or _first(_SPACE, text)


def _deepspeed_env(text: str, quotes: bool) -> Optional[str]:
    bad = _first(CONTROL, text) or _first(_DOUBLE_QUOTE_ACTIVE, text)
    if bad is None and not quotes and not DS_ENV_SAFE.match(text):
        bad = _first(re.compile(r"[^\w@%+=:,./-]"), text)
    return bad


def _node_name(text: str, quotes: bool) -> Optional[str]:
    if _NODE_NAME.match(text):
        return None
    if not text:
        return ""
    if not text[0].isalnum() and not CONTROL.match(text[0]):
        return text[0]
    return _first(CONTROL, text) or _first(re.compile(r"[^A-Za-z0-9._-]"), text) or text[0]


PDSH = "the pdsh command line that DeepSpeed builds for every node"
HOPS: Dict[str, Hop] = {
    "script": Hop(
        "train.sh and the sbatch script (bash scripts, their comment lines) and the hostfile's comment",
        "any printable character", "a newline or control character would end the line it is written on "
        "and start a command of its own", _printable_only, shell_quote),
    "sbatch_option": Hop(
        "an #SBATCH line of the sbatch script (--job-name, --output)", "printable characters, no whitespace",
        "sbatch reads one word per option from an #SBATCH line", _sbatch_option, None),
    "pdsh_arg": Hop(
        PDSH + " (a pretrain_gpt.py argument)", "letters, digits, space and _@+=:,./-",
        "DeepSpeed joins the arguments into one remote shell command, double-quoting only a word with a "
        "space (0.19.6, multinode_runner.py:63-72), single-quoting each word not starting with '-' (0.9.2, "
        "multinode_runner.py:63-64), and pdsh replaces %n, %h, %u in it", _pdsh_arg, None),
    "pdsh_raw": Hop(
        PDSH + " (written unquoted: cd <megatron_dir>;, the venv's python, --master_addr=)",
        "letters, digits and _@+=:,./-, no space",
        "DeepSpeed writes these words raw (0.19.6 multinode_runner.py:99-100; 0.9.2 :84-85)", _pdsh_raw, None),
    "deepspeed_env": Hop(
        PDSH + " (export K=V; from .deepspeed_env and the NCCL_* variables)",
        "no '\"', '`', '$', '\\' or control character; with DeepSpeed < %s only letters, digits and "
        "@%%+=:,./-" % DS_ENV_QUOTING_SINCE,
        "DeepSpeed >= %s double-quotes a value with other characters (multinode_runner.py:37-41), "
        "older ones write it raw (0.9.2 :36-37)" % DS_ENV_QUOTING_SINCE, _deepspeed_env, None),
    "nccl_env": Hop(
        "nccl.env, which train.sh and the sbatch script source with bash",
        "any printable character", "the nccl role writes each value shell-quoted on its own line",
        _printable_only, shell_quote),
    "hostfile": Hop(
        "the DeepSpeed hostfile, pdsh -w and ssh (a node's name)",
        "letters, digits and ._-, not starting with '.', '_' or '-'",
        "the hostfile is 'name slots=N' per line, pdsh -w splits on ',', DeepSpeed's filters on '@' and ':', "
        "and ssh reads a leading '-' as an option", _node_name, None),
    "systemd": Hop(
        "an ExecStart= or Description= line of the monitoring units", "any printable character",
        "systemd reads one directive per line; the units quote with systemd_quote", _printable_only, systemd_quote),
}

# The hops each job spec value reaches. The pdsh hops count only with megatron_job_launcher:
# pdsh (the default), one node included, so that adding a node never breaks a valid job.
VALUES: Tuple[Tuple[str, Tuple[str, ...]], ...] = (
    ("name", ("script",)),
    ("workdir", ("script", "pdsh_arg")),
    ("megatron_dir", ("script", "pdsh_raw", "deepspeed_env")),
    ("venv", ("script", "pdsh_raw", "deepspeed_env")),
    ("cuda_home", ("script", "deepspeed_env")),
    ("log_dir", ("script",)),
    ("log_file", ("script", "systemd")),
    ("checkpoint_dir", ("script", "pdsh_arg")),
    ("tensorboard_dir", ("script", "pdsh_arg", "systemd")),
    ("nccl_env_file", ("script",)),
    ("nccl_env_dir", ("script",)),
    ("data_path", ("script", "pdsh_arg")),
    ("vocab_file", ("script", "pdsh_arg")),
    ("merge_file", ("script", "pdsh_arg")),
    ("tokenizer_model", ("script", "pdsh_arg")),
    ("split", ("script", "pdsh_arg")),
    ("master_addr", ("script", "pdsh_raw")),
    ("extra_args", ("script", "pdsh_arg")),
    ("env", ("script", "deepspeed_env")),
    ("nccl_env", ("script", "nccl_env", "deepspeed_env")),
)
# Defaults built from another variable: the fix names both.
_BUILT_FROM = {"workdir": "name", "checkpoint_dir": "name", "tensorboard_dir": "name", "log_dir": "workdir",
               "log_file": "log_dir"}


def printable(char: str) -> str:
    """A character as validate.yml prints it: '\\n', '$', '\\x00'."""
    return repr(char)


def refusal(hop: str, value: Any, quotes: bool = True) -> Optional[str]:
    """The first character of ``value`` that ``hop`` cannot carry, or None."""
    return HOPS[hop].refuse("" if value is None else str(value), quotes)


def _variable(key: str, sub: Optional[str]) -> str:
    base = "nccl_env" if key == "nccl_env" else PREFIX + key
    return base if sub is None else "%s.%s" % (base, sub)


def _words(key: str, value: Any) -> Iterator[Tuple[Optional[str], str]]:
    """(sub-name, text) of each word of a spec value the hops see."""
    if value is None:
        return
    if isinstance(value, Mapping):
        for sub, item in value.items():
            if item is not None:
                yield str(sub), "%s" % (("1" if item else "0") if isinstance(item, bool) else item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield None, str(item)
    elif key == "data_path":
        # Whitespace separates Megatron's prefixes (and weights); normalize splits on it too.
        for word in str(value).split():
            yield None, word
    else:
        yield None, str(value)


def quotes_env(spec: Mapping[str, Any], deepspeed_version: Optional[str] = None) -> bool:
    """Whether the DeepSpeed that launches quotes .deepspeed_env values: the version given, else
    the spec's stack profile's pin (unknown: no, the stricter rule)."""
    if deepspeed_version:
        from .._stack.versions import compare  # as _stack.profiles.deepspeed_at_least does
        return compare(str(deepspeed_version), DS_ENV_QUOTING_SINCE) >= 0
    try:
        return _stack_profiles.deepspeed_at_least(spec.get("stack_profile"), DS_ENV_QUOTING_SINCE)
    except _stack_profiles.UnknownProfileError:
        return False


def refusals(spec: Mapping[str, Any], deepspeed_version: Optional[str] = None) -> List[Tuple[str, str, str, str]]:
    """(variable, value, character, hop) for every value of ``spec`` that a hop it reaches cannot
    carry, in VALUES order, one per variable and hop."""
    quotes = quotes_env(spec, deepspeed_version)
    pdsh = str(spec.get("launcher") or "pdsh") == "pdsh"
    out = []
    for key, hops in VALUES:
        for sub, text in _words(key, spec.get(key)):
            if key in ("env", "nccl_env") and sub is not None:
                variable = _variable(key, sub)
            else:
                variable = _variable(key, None)
            for hop in hops:
                if hop.startswith("pdsh") and not pdsh:
                    continue
                bad = HOPS[hop].refuse(text, quotes)
                if bad is not None and (variable, hop) not in {(r[0], r[3]) for r in out}:
                    out.append((variable, text, bad, hop))
    return out


def _fix(variable: str, char: str, hop: str) -> str:
    key = variable[len(PREFIX):] if variable.startswith(PREFIX) else variable
    fix = "write %s without %s (%s may hold %s)" % (
        variable, printable(char) if char else "an empty value", HOPS[hop].where, HOPS[hop].allowed)
    if key in _BUILT_FROM:
        fix += "; where it is not set, its default is built from %s%s, so change that" % (PREFIX, _BUILT_FROM[key])
    if hop in ("pdsh_arg", "pdsh_raw", "deepspeed_env"):
        fix += ", or launch with megatron_job_launcher: openmpi or the Slurm backend, which pass arguments as a list"
    return fix


def hop_findings(spec: Mapping[str, Any], deepspeed_version: Optional[str] = None) -> List[Dict[str, str]]:
    """One failing finding per value and hop that cannot carry it (naming the variable, the
    character and the hop, with the fix), or one passing finding. ``deepspeed_version``: the
    DeepSpeed that launches, when known (else the spec's stack profile's pin)."""
    found = refusals(spec, deepspeed_version)
    if not found:
        return [finding("values fit every hop", "pass", "job values", "no value holds a character its hops refuse",
                        "values are data, never code")]
    return [finding(
        "value fits its hop: %s" % hop, "fail", "job values",
        "%s = %r holds %s" % (variable, value, printable(char) if char else "nothing"),
        "%s: %s" % (HOPS[hop].where, HOPS[hop].allowed),
        _fix(variable, char, hop) + ". Why: " + HOPS[hop].why,
    ) for variable, value, char, hop in found]


def refuse_spec(spec: Mapping[str, Any]) -> None:
    """JobError on the first value of ``spec`` a hop cannot carry: the renderers' gate, the same
    rule validate.yml reports with hop_findings."""
    found = refusals(spec)
    if found:
        variable, value, char, hop = found[0]
        raise JobError("%s: %r holds %s, which %s cannot carry (%s); %s" % (
            variable, value, printable(char), HOPS[hop].where, HOPS[hop].allowed, _fix(variable, char, hop)))


def inventory_refusals(nccl_env: Any, nodes: Mapping[str, Any], profile: Any = None) -> List[str]:
    """Messages for inventory-wide values outside the job spec: each ``nccl_env`` value (nccl.env,
    and the NCCL_* exports of the pdsh command line) and each node's name (``nodes``: inventory
    host -> its megatron_job_node_address or ssh name). Empty when all are fine."""
    try:
        quotes = _stack_profiles.deepspeed_at_least(profile, DS_ENV_QUOTING_SINCE)
    except _stack_profiles.UnknownProfileError:
        quotes = False
    out = []
    for key, value in (nccl_env or {}).items() if isinstance(nccl_env, Mapping) else ():
        if value is None:
            continue
        text = ("1" if value else "0") if isinstance(value, bool) else str(value)
        for hop in ("nccl_env", "deepspeed_env"):
            bad = HOPS[hop].refuse(text, quotes)
            if bad is not None:
                out.append("nccl_env.%s = %r holds %s, which %s cannot carry (%s); %s" % (
                    key, text, printable(bad), HOPS[hop].where, HOPS[hop].allowed, _fix("nccl_env." + str(key), bad, hop)))
                break
    for host, name in nodes.items():
        text = "" if name is None else str(name)
        bad = HOPS["hostfile"].refuse(text, quotes)
        if bad is not None:
            out.append("node %s: megatron_job_node_address (or its ssh name) %r holds %s, which %s cannot carry "
                       "(%s); set megatron_job_node_address for %s to its plain host name or IPv4 address"
                       % (host, text, printable(bad) if bad else "nothing", HOPS["hostfile"].where,
                          HOPS["hostfile"].allowed, host))
    return out
