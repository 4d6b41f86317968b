# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's rows and what every check shares: the statuses, :class:`Row`, the check
context (profile, options, the nodes that answered) and the helpers that read facts.

Pure functions, no Ansible imports. The checks are in ``matrix`` (per node, against
the profile) and ``cluster`` (across nodes, and the cluster); ``gate`` runs them.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import asdict, dataclass
from typing import Any, Callable, Dict, Mapping, Optional

from .._stack.profiles import DS_CUDA_MINOR_MISMATCH_OK
from .._stack.versions import major, major_minor, parse, satisfies

PASS = "pass"
FAIL = "fail"
WARN = "warn"
SKIP = "skip"
STATUSES = (PASS, FAIL, WARN, SKIP)

ALL_NODES = "all"
MISSING = "missing"
# The words of the nvidia_driver role and of the gate for a node whose PCI bus has no NVIDIA GPU.
NO_GPU = "no NVIDIA GPU on this node"

COLLECTION = "megatron_ds.cluster"


@dataclass
class Row:
    """One line of the verdict: a check on one node (or on ``all`` of them)."""

    check: str
    status: str
    node: str
    component: str
    found: str = ""
    expected: str = ""
    fix: str = ""

    def as_dict(self) -> Dict[str, str]:
        return asdict(self)


# ---------------------------------------------------------------------------------------
# Small helpers: reading facts, normalising versions
# ---------------------------------------------------------------------------------------


def _get(data: Any, *path: str) -> Any:
    """``data[path[0]][path[1]]...``, None as soon as a level is missing or not a mapping."""
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _text(value: Any) -> Optional[str]:
    """A fact as a stripped string; None for null, '' and empty containers."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        value = ".".join(str(part) for part in value)
    text = str(value).strip()
    return text or None


def _show(value: Any) -> str:
    text = _text(value)
    return MISSING if text is None else text


def _version(facts: Mapping[str, Any], *path: str) -> Optional[str]:
    """A version fact as text. Library versions arrive dotted: gpu_stack_facts decodes torch's
    cuDNN and NCCL codes on the node (_gpu_parsers.cudnn_version_from_int, nccl_version_from_torch),
    once, so the gate never decodes them again."""
    return _text(_get(facts, *path))


def _satisfies(version: Optional[str], spec: Optional[str]) -> Optional[bool]:
    """satisfies() that answers None instead of raising on a garbled version."""
    if version is None or spec is None:
        return None
    try:
        return satisfies(version, spec)
    except ValueError:
        return None


def _mm(version: Optional[str]) -> Optional[str]:
    if version is None:
        return None
    try:
        return major_minor(version)
    except ValueError:
        return None


def _is_plain_version(spec: str) -> bool:
    """'11.7.1' or '2.28' (a prefix), not '>=0.16.1,<=0.19.6'."""
    try:
        parse(spec)
    except ValueError:
        return False
    return not any(ch in spec for ch in "<>=!~,*")


def nvcc_torch_compatible(nvcc: str, torch_cuda: str) -> bool:
    """DeepSpeed's op_builder rule (assert_no_cuda_mismatch), docs/upstream-facts.md §D4.

    nvcc and torch.version.cuda must agree on major.minor, except that a minor mismatch is
    allowed when both minors are listed in cuda_minor_mismatch_ok for that major. CUDA 13
    has no entry there, so 13.x must match exactly; different majors never match.
    """
    have, want = major_minor(nvcc), major_minor(torch_cuda)
    if have == want:
        return True
    if major(have) != major(want):
        return False
    allowed = DS_CUDA_MINOR_MISMATCH_OK.get(major(have), [])
    return have in allowed and want in allowed


def _nvcc_version(facts: Mapping[str, Any]) -> Optional[str]:
    nvcc = _text(_get(facts, "cuda", "nvcc_version"))
    if nvcc is None and _text(_get(facts, "cuda", "source")) == "nvcc":
        nvcc = _text(_get(facts, "cuda", "version"))
    return nvcc


def _torch_unusable(facts: Mapping[str, Any]) -> Optional[str]:
    """Why torch's own values cannot be trusted on this node (torch.version says it), or None.

    A torch whose version is known but that carries an error (an import that fails, a
    half-removed install) reports no meaningful CUDA, cuDNN or NCCL: the checks that read them
    skip, and torch.version fails once for all of them.
    """
    if _text(_get(facts, "torch", "version")) is None:
        return "torch is not importable (see torch.version)"
    if _text(_get(facts, "torch", "error")) is not None:
        return "torch is broken on this node (see torch.version)"
    return None


def _broken_install(ctx: "_Context", node: str, facts: Mapping[str, Any], component: str, spec_key: str) -> str:
    """The fix for a package whose version is there but which does not import or is half removed."""
    venv = _text(_get(facts, "venv")) or "<venv>"
    return (
        "reinstall %s in the venv on %s: %s/bin/pip install --force-reinstall --no-deps '%s' (pip and %s "
        "take the recorded version as installed and skip it), then rerun %s" % (
            component, node, venv, ctx.spec(spec_key, "pip"), _role("python_env"), _role("python_env"))
    )


def _unwrap(node_facts: Any) -> Any:
    """Accept the facts themselves or the module result that carries them."""
    if isinstance(node_facts, Mapping):
        if isinstance(node_facts.get("gpu_stack_facts"), Mapping):
            return node_facts["gpu_stack_facts"]
        inner = _get(node_facts, "ansible_facts", "gpu_stack_facts")
        if isinstance(inner, Mapping):
            return inner
    return node_facts


def _usable(node_facts: Any) -> bool:
    """Facts from a node that answered: a mapping carrying at least one known section."""
    return isinstance(node_facts, Mapping) and any(
        key in node_facts for key in ("driver", "gpus", "python", "torch", "hostname")
    )


def _role(name: str) -> str:
    return "the %s.%s role" % (COLLECTION, name)


def _gb(num_bytes: float) -> str:
    return "%.1f GB" % (num_bytes / 1e9)


# ---------------------------------------------------------------------------------------
# The check context: profile, options and the nodes that answered
# ---------------------------------------------------------------------------------------


class _Context(object):
    def __init__(self, facts_by_node: Mapping[str, Any], profile: Mapping[str, Any], options: Mapping[str, Any]):
        self.profile = profile
        self.name = str(profile.get("name") or "?")
        self.options = dict(options or {})
        self.cuda = profile.get("accelerator") == "cuda"
        self.nodes: "OrderedDict[str, Mapping[str, Any]]" = OrderedDict()
        self.missing: "OrderedDict[str, str]" = OrderedDict()
        names = list(facts_by_node or {})
        for extra in (self.options.get("slots") or {}, self.options.get("ssh_reachable") or {}):
            names.extend(node for node in extra if node not in names)
        for node in sorted(names):
            raw = (facts_by_node or {}).get(node)
            facts = _unwrap(raw)
            if _usable(facts):
                self.nodes[node] = facts
            else:
                self.missing[node] = _missing_reason(raw, node in (facts_by_node or {}))

    def spec(self, *path: str) -> Any:
        return _get(self.profile, *path)

    def pip_version(self, component: str) -> str:
        """The exact version the python_env role installs ('torch==1.13.1' -> '1.13.1')."""
        pip = str(self.spec(component, "pip") or "")
        return pip.partition("==")[2] or str(self.spec(component, "version"))


def _missing_reason(raw: Any, listed: bool) -> str:
    if not listed:
        return "not in the play: no facts gathered"
    if isinstance(raw, Mapping):
        if raw.get("failed"):
            return "gpu_stack_facts failed: %s" % (_text(raw.get("msg")) or "no message")
        if raw.get("skipped"):
            return "gpu_stack_facts was skipped on this node"
    return "no gpu_stack_facts (unreachable, or the facts task did not run)"


def _row(check: str, status: str, node: str, component: str, found: Any = "", expected: Any = "", fix: str = "") -> Row:
    return Row(
        check=check,
        status=status,
        node=node,
        component=component,
        found="" if found is None else str(found),
        expected="" if expected is None else str(expected),
        fix=fix,
    )


NodeCheck = Callable[[_Context, str, Mapping[str, Any]], Optional[Row]]


def _int(value: Any) -> Optional[int]:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
