# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How the gates print their verdict: the preflight action and validate_job share it.

A verdict is a list of rows (mappings with ``status``, ``check``, ``node`` (optional),
``component``, ``found``, ``expected`` and ``fix``). People read it in two places:

* on the terminal (:func:`render`): one wrapped line per failing or warning row, naming the
  node, the component, what was found, what was expected and the fix; pass and skip rows
  (collapsed to one line per check) only with verbosity; then one summary line;
* in a report file on the controller (:func:`write`): every row, as a fixed-width text table
  and as JSON, under a timestamped name, so nothing is lost by the short terminal form.

Pure functions and the standard library only; no Ansible imports.
"""
from __future__ import annotations

import datetime
import json
import os
import shutil
import textwrap
from collections import OrderedDict
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

FAIL, WARN, PASS, SKIP = "fail", "warn", "pass", "skip"
COLUMNS = ("status", "check", "node", "component", "found", "expected", "fix")
# The terminal form fits this many columns whatever the terminal; a narrower terminal wraps sooner.
MAX_WIDTH = 160
MIN_WIDTH = 60
# Where the report files go unless the playbook says otherwise: the controller user's Ansible
# directory, the same for every checkout and for an installed collection.
DEFAULT_DIR = "~/.ansible/megatron_ds/reports"
ALL_NODES = "all"
# Continuation lines of a wrapped finding start under its text, past the status word.
_HANG = " " * 5


def terminal_width(indent: int = 0, maximum: int = MAX_WIDTH) -> int:
    """Columns left for text indented by ``indent``: the terminal's width (COLUMNS, else the
    tty), ``maximum`` when there is no terminal (a CI log), never more than ``maximum``."""
    columns = shutil.get_terminal_size((maximum, 24)).columns
    return max(MIN_WIDTH, min(columns, maximum) - indent)


def _cell(value: Any) -> str:
    return "" if value is None else " ".join(str(value).split())


def _subject(row: Mapping[str, Any]) -> str:
    """'node3 torch (torch.version)': node (when the row has one), component, check id."""
    parts = [_cell(row.get("node")), _cell(row.get("component"))]
    subject = " ".join(part for part in parts if part)
    check = _cell(row.get("check"))
    return "%s (%s)" % (subject, check) if subject and check else subject or check


def _wrap(text: str, width: int) -> List[str]:
    # Paths, URLs and versions stay whole, to be copied: lines break only at spaces, and a word
    # longer than the line (a long path) stands on a line of its own, wider than ``width``.
    return textwrap.wrap(text, width=width, subsequent_indent=_HANG, break_on_hyphens=False,
                         break_long_words=False) or [""]


def finding_lines(row: Mapping[str, Any], width: int = MAX_WIDTH) -> List[str]:
    """One failing or warning row as one logical line, wrapped to ``width``:
    ``FAIL node3 torch (torch.version): found X; expected Y; fix: Z``."""
    text = "%s %s: found %s; expected %s" % (
        _cell(row.get("status")).upper(), _subject(row), _cell(row.get("found")) or "-", _cell(row.get("expected")) or "-")
    fix = _cell(row.get("fix"))
    if fix:
        text += "; fix: " + fix
    return _wrap(text, width)


def _collapse(values: Iterable[str], limit: int = 3) -> str:
    unique: List[str] = []
    for value in values:
        if value and value not in unique:
            unique.append(value)
    if len(unique) > limit:
        return ", ".join(unique[:limit]) + ", ... (%d values)" % len(unique)
    return ", ".join(unique)


def _nodes(rows: Sequence[Mapping[str, Any]], every: Sequence[str]) -> str:
    nodes = [_cell(row.get("node")) for row in rows if _cell(row.get("node"))]
    if not nodes:
        return ""
    if nodes == [ALL_NODES] or (len(every) > 1 and sorted(set(nodes)) == sorted(set(every))):
        return ALL_NODES
    if len(nodes) <= 3:
        return ",".join(nodes)
    return "%d nodes" % len(nodes)


def quiet_lines(rows: Sequence[Mapping[str, Any]], width: int = MAX_WIDTH) -> List[str]:
    """pass and skip rows, one line per check and status: the nodes (``all``), what was found,
    and for a skip why."""
    groups: "OrderedDict[Tuple[str, str], List[Mapping[str, Any]]]" = OrderedDict()
    every: Dict[str, List[str]] = {}
    for row in rows:
        check = _cell(row.get("check"))
        every.setdefault(check, []).append(_cell(row.get("node")))
        if row.get("status") in (PASS, SKIP):
            groups.setdefault((check, str(row.get("status"))), []).append(row)
    lines: List[str] = []
    for (check, status), group in groups.items():
        subject = _subject({"node": _nodes(group, every[check]), "component": group[0].get("component"), "check": check})
        if status == PASS:
            detail = _collapse(_cell(row.get("found")) for row in group)
        else:
            detail = _collapse((_cell(row.get("fix")) for row in group), limit=1)
        lines.extend(_wrap("%s %s: %s" % (status, subject, detail or "-"), width))
    return lines


def render(rows: Sequence[Mapping[str, Any]], summary: str, verbosity: int = 0, width: int = MAX_WIDTH) -> str:
    """What the terminal shows: failures, then warnings (one wrapped line each), pass and skip
    lines with ``verbosity`` >= 1, then the summary line."""
    lines: List[str] = []
    for status in (FAIL, WARN):
        for row in rows:
            if row.get("status") == status:
                lines.extend(finding_lines(row, width))
    if verbosity >= 1:
        lines.extend(quiet_lines(rows, width))
    lines.extend(_wrap(summary, width))
    return "\n".join(lines)


def counts(rows: Iterable[Mapping[str, Any]]) -> Dict[str, int]:
    tally = {FAIL: 0, WARN: 0, PASS: 0, SKIP: 0}
    for row in rows:
        status = str(row.get("status"))
        tally[status] = tally.get(status, 0) + 1
    return tally


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] = COLUMNS) -> str:
    """Every row on its own line, in a fixed-width table (the report file's text form). The last
    column (the fix) is not padded; columns no row fills are left out."""
    used = [name for name in columns if name in ("status", "check") or any(_cell(row.get(name)) for row in rows)]
    cells = [[_cell(row.get(name)) for name in used] for row in rows]
    for line in cells:
        if line[0] in (FAIL, WARN):
            line[0] = line[0].upper()
    widths = [len(name) for name in used]
    for line in cells:
        for index, cell in enumerate(line):
            widths[index] = max(widths[index], len(cell))

    def render_line(values: Sequence[str]) -> str:
        return "  ".join(value.ljust(widths[i]) if i < len(values) - 1 else value
                         for i, value in enumerate(values)).rstrip()

    out = [render_line([name.upper() for name in used]), render_line(["-" * width for width in widths])]
    out.extend(render_line(line) for line in cells)
    return "\n".join(out)


def _utc(now: Optional[datetime.datetime]) -> datetime.datetime:
    if now is None:
        return datetime.datetime.now(datetime.timezone.utc)
    return now if now.tzinfo else now.replace(tzinfo=datetime.timezone.utc)


def report_paths(directory: str, kind: str, now: Optional[datetime.datetime] = None) -> Tuple[str, str]:
    """(text path, JSON path) for a new report: ``<kind>-<UTC timestamp>.txt`` / ``.json``, with a
    counter appended when a report of the same second exists."""
    stamp = _utc(now).strftime("%Y%m%dT%H%M%SZ")
    base = os.path.join(os.path.abspath(os.path.expanduser(directory)), "%s-%s" % (kind, stamp))
    candidate, number = base, 1
    while os.path.exists(candidate + ".txt") or os.path.exists(candidate + ".json"):
        candidate = "%s-%d" % (base, number)
        number += 1
    return candidate + ".txt", candidate + ".json"


def write(directory: str, kind: str, rows: Sequence[Mapping[str, Any]], summary: str,
          extra: Optional[Mapping[str, Any]] = None, now: Optional[datetime.datetime] = None) -> Tuple[str, str]:
    """Write the report files; return (text path, JSON path). Raises OSError when it cannot.

    The text file: a title with the UTC time, the summary line and :func:`table` of every row.
    The JSON file: ``kind``, ``created``, ``summary`` (the line), ``counts``, ``extra``'s keys and
    ``rows`` (every row, as given).
    """
    created = _utc(now)
    text_path, json_path = report_paths(directory, kind, created)
    os.makedirs(os.path.dirname(text_path), mode=0o755, exist_ok=True)
    data: Dict[str, Any] = {"kind": kind, "created": created.strftime("%Y-%m-%dT%H:%M:%SZ"), "summary": summary,
                            "counts": counts(rows)}
    data.update(extra or {})
    data["rows"] = [dict((name, row.get(name)) for name in COLUMNS if name in row) for row in rows]
    text = "%s report, %s\n%s\n\n%s\n" % (kind, data["created"], summary, table(rows))
    # "x": never overwrite an earlier report (report_paths picked a free name).
    with open(text_path, "x") as handle:
        handle.write(text)
    with open(json_path, "x") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
    return text_path, json_path
