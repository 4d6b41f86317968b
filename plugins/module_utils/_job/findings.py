# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Findings: the one record every job rule returns, and the table validate_job prints.

A finding is ``{check, status: pass|fail|warn, component, found, expected, fix}``.
"""
from __future__ import annotations

import collections
import textwrap
from typing import Any, Dict, Iterable, List, Mapping, Sequence


def finding(check: str, status: str, component: str, found: Any, expected: Any, fix: str = "") -> Dict[str, str]:
    return {
        "check": check,
        "status": status,
        "component": component,
        "found": text(found),
        "expected": text(expected),
        "fix": fix,
    }


def text(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return " ".join(str(v) for v in value)
    return str(value)


def failed(findings: Iterable[Mapping[str, str]]) -> List[Mapping[str, str]]:
    return [f for f in findings if f.get("status") == "fail"]


# Column caps of the table (STATUS, COMPONENT, CHECK, FOUND, EXPECTED); longer cells wrap.
TABLE_WIDTHS = (6, 24, 40, 52, 36)


def format_findings(findings: Sequence[Mapping[str, str]], widths: Sequence[int] = TABLE_WIDTHS) -> str:
    """A plain-text table, one row per finding in the order given (STATUS, COMPONENT, CHECK,
    FOUND, EXPECTED), long cells wrapped at ``widths``, each failing or warning row followed
    by its fix, and a closing count line."""
    headers = ("STATUS", "COMPONENT", "CHECK", "FOUND", "EXPECTED")
    keys = ("status", "component", "check", "found", "expected")
    caps = list(widths)
    rows = [[str(f.get(k, "")) for k in keys] for f in findings]
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = min(max(widths[i], len(cell)), max(caps[i], len(headers[i])))
    rule = "-+-".join("-" * w for w in widths)
    lines = [" | ".join(h.ljust(widths[i]) for i, h in enumerate(headers)), rule]
    for item, row in zip(findings, rows):
        wrapped = [textwrap.wrap(cell, widths[i]) or [""] for i, cell in enumerate(row)]
        for line_no in range(max(len(w) for w in wrapped)):
            lines.append(" | ".join(
                (wrapped[i][line_no] if line_no < len(wrapped[i]) else "").ljust(widths[i])
                for i in range(len(headers))
            ).rstrip())
        if item.get("status") in ("fail", "warn") and item.get("fix"):
            for fix_line in textwrap.wrap("fix: " + item["fix"], sum(widths) + 3 * len(widths),
                                          initial_indent="    ", subsequent_indent="         "):
                lines.append(fix_line)
    counts = collections.Counter(f.get("status") for f in findings)
    lines.append(rule)
    lines.append("%d fail, %d warn, %d pass" % (counts.get("fail", 0), counts.get("warn", 0), counts.get("pass", 0)))
    return "\n".join(lines)
