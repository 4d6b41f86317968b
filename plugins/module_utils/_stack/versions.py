# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Version parsing and matching, free of Ansible imports so it is unit-tested alone.

NVIDIA versions are dotted integers of varying length (driver 515.65.01, cuDNN 8.6.0.163,
nvcc 11.7.99) and Python packages carry local labels (torch 1.13.1+cu117). We compare the
numeric release part only; the local label is compared separately where it matters.
"""
from __future__ import annotations

import re
from typing import List, Optional, Tuple

_RELEASE_RE = re.compile(r"^\s*v?(\d+(?:\.\d+)*)")


def parse(version: Optional[str]) -> Tuple[int, ...]:
    """Return the numeric release tuple of ``version`` ('1.13.1+cu117' -> (1, 13, 1)).

    Raises ValueError on text with no leading number, so a garbled fact is never read as 0.
    """
    if version is None:
        raise ValueError("no version")
    match = _RELEASE_RE.match(str(version))
    if not match:
        raise ValueError("not a version: %r" % (version,))
    return tuple(int(part) for part in match.group(1).split("."))


def local_label(version: str) -> str:
    """The PEP 440 local label ('1.13.1+cu117' -> 'cu117'), '' when there is none."""
    return str(version).partition("+")[2]


def compare(left: str, right: str) -> int:
    """-1, 0 or 1, comparing release tuples padded with zeros (11.7 == 11.7.0)."""
    a, b = list(parse(left)), list(parse(right))
    width = max(len(a), len(b))
    a += [0] * (width - len(a))
    b += [0] * (width - len(b))
    return (a > b) - (a < b)


def major_minor(version: str) -> str:
    parts = parse(version)
    return "%d.%d" % (parts[0], parts[1] if len(parts) > 1 else 0)


def major(version: str) -> int:
    return parse(version)[0]


def prefix_match(version: str, pattern: str) -> bool:
    """True when ``version`` starts with every component of ``pattern``.

    '13.0' matches 13.0.88; '2.28' matches 2.28.9; '8.6.0.163' matches only itself
    (or 8.6.0.163.x). A trailing '.*' in the pattern is allowed and ignored.
    """
    pattern = pattern[:-2] if pattern.endswith(".*") else pattern
    want = parse(pattern)
    have = parse(version)
    return have[: len(want)] == want


_CLAUSE_RE = re.compile(r"^\s*(==|!=|>=|<=|>|<|~=)?\s*([^\s,]+)\s*$")


def satisfies(version: str, spec: str) -> bool:
    """Does ``version`` satisfy ``spec``?

    ``spec`` is a comma-separated list of clauses: ``>=0.16.1,<=0.19.6``, ``==1.13.1``,
    ``2.28`` (prefix match), ``9.*``. Local labels in the version are ignored here.
    """
    clauses: List[str] = [c for c in str(spec).split(",") if c.strip()]
    if not clauses:
        raise ValueError("empty version spec")
    for clause in clauses:
        match = _CLAUSE_RE.match(clause)
        if not match:
            raise ValueError("bad version spec clause: %r" % (clause,))
        op, want = match.group(1) or "", match.group(2)
        if op in ("", "=="):
            ok = prefix_match(version, want)
        elif op == "!=":
            ok = not prefix_match(version, want)
        elif op == "~=":
            # PEP 440 compatible release: ~=2.1.3 means >=2.1.3,==2.1.*
            base = want.rsplit(".", 1)[0]
            ok = compare(version, want) >= 0 and prefix_match(version, base)
        else:
            # '<=3.11' includes 3.11.2 and '>3.11' starts at 3.12: for these two, the version
            # is cut to the spec's length, as a person reading the spec means it.
            cut = version
            if op in ("<=", ">"):
                cut = ".".join(str(p) for p in parse(version)[: len(parse(want))])
            cmp = compare(cut, want)
            ok = {">=": cmp >= 0, "<=": cmp <= 0, ">": cmp > 0, "<": cmp < 0}[op]
        if not ok:
            return False
    return True
