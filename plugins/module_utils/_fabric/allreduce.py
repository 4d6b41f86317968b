# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""All-reduce measurements in one shape: nccl-tests' all_reduce_perf (its text table or its JSON file) and the burn-in's gloo all-reduce.

Every reader returns a list of ``AllReduceRow`` (one per message size and placement) so that the
gate (``gate_figure``) judges an NCCL run on GPUs and a gloo run on the cpu profile the same way.

No Ansible imports; Python 3.8 compatible (the burn-in's report reads it on the controller).
"""
from __future__ import annotations

import json
import math
import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence

# Below this size an all-reduce measures latency rather than bandwidth: the figures of small
# messages are mostly the fixed cost of a launch and mislead a bandwidth gate (nccl-tests#212;
# the same argument in NVIDIA/DCGM#111, whose multi-node health check moved its range to
# 1 MiB..1 GiB). 64 MiB is past the knee on every fabric of the published table.
GATE_MIN_BYTES = 64 * 1024 * 1024


class AllReduceRow(NamedTuple):
    """One measured message size: ``busbw_gbps`` is nccl-tests' bus bandwidth, in GB/s (10^9 bytes)."""

    size_bytes: int
    time_us: Optional[float]
    algbw_gbps: Optional[float]
    busbw_gbps: Optional[float]
    # Wrong elements found by the data check; None where the run did not check (nccl-tests -c 0
    # prints N/A) or printed the older relative-error column instead of a count.
    wrong: Optional[int]
    placement: str
    tool: str

    def as_dict(self) -> Dict[str, Any]:
        return self._asdict()


def _number(token: Any) -> Optional[float]:
    """A figure as nccl-tests writes it: a number, or "nan"/"N/A"/null where it has none."""
    if isinstance(token, bool) or token is None:
        return None
    try:
        value = float(token)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) else value


# mpirun --timestamp-output prefixes every line ("Thu Jul 18 15:41:05 2024<stdout>:").
_MPI_PREFIX = re.compile(r"^.*?<stdout>:")
_SUMMARY = re.compile(r"^#\s*(Out of bounds values|Avg bus bandwidth)\s*:\s*(\S+)")


def parse_nccl_tests_text(stdout: str) -> Dict[str, Any]:
    """all_reduce_perf's standard output: its rows, ``avg_busbw_gbps`` and ``out_of_bounds``.

    The column header names the columns, so the layouts of several versions parse: v2.19.6
    (a0b82b2) prints ``size count type redop root`` and ``time algbw busbw #wrong`` twice
    (out-of-place, in-place; src/util.cu:739-767, rows at src/util.cu:454-523); versions before
    the NCCL 2.13 resync (51af557, 2022) print an ``error`` column, a relative error rather than a
    count, read here as ``wrong=None``, and the oldest have no ``root``. A row whose out-of-place half is
    blank (trace replay) keeps its in-place half.
    """
    rows: List[AllReduceRow] = []
    columns: Optional[List[str]] = None
    summary: Dict[str, Any] = {"avg_busbw_gbps": None, "out_of_bounds": None}
    for raw in (stdout or "").splitlines():
        line = _MPI_PREFIX.sub("", raw).rstrip()
        stripped = line.lstrip()
        if stripped.startswith("#"):
            found = _SUMMARY.match(stripped)
            if found:
                key = "out_of_bounds" if found.group(1).startswith("Out") else "avg_busbw_gbps"
                value = _number(found.group(2))
                summary[key] = None if value is None else (int(value) if key == "out_of_bounds" else value)
            tokens = stripped.lstrip("#").split()
            if tokens[:2] == ["size", "count"]:
                columns = tokens
            continue
        tokens = stripped.split()
        if columns is None or not tokens or not tokens[0].isdigit():
            continue
        rows.extend(_text_row(columns, tokens))
    summary["rows"] = rows
    return summary


def _text_row(columns: Sequence[str], tokens: Sequence[str]) -> List[AllReduceRow]:
    starts = [index for index, name in enumerate(columns) if name in ("time", "cputime")]
    if not starts:
        return []
    # The leading columns (size .. redop/root) are one token each; a blank out-of-place half
    # leaves only the in-place one, so the halves are counted from the end of the row.
    width = starts[1] - starts[0] if len(starts) > 1 else len(columns) - starts[0]
    lead = starts[0]
    halves = (len(tokens) - lead) // width
    out: List[AllReduceRow] = []
    placements = ("out_of_place", "in_place")[-halves:] if 0 < halves <= 2 else ()
    for number, placement in enumerate(placements):
        cells = dict(zip(columns[starts[0]:starts[0] + width], tokens[lead + number * width:lead + (number + 1) * width]))
        wrong_text = cells.get("#wrong")
        wrong = _number(wrong_text) if wrong_text is not None else None
        out.append(AllReduceRow(
            size_bytes=int(tokens[0]),
            time_us=_number(cells.get("time", cells.get("cputime"))),
            algbw_gbps=_number(cells.get("algbw")),
            busbw_gbps=_number(cells.get("busbw")),
            wrong=None if wrong is None else int(wrong),
            placement=placement,
            tool="nccl-tests",
        ))
    return out


def parse_nccl_tests_json(text: str) -> Dict[str, Any]:
    """all_reduce_perf's ``-J file.json`` document: its rows, summary, NCCL_ALGO and errors.

    The layout is nccl-tests v2.19.6's (a0b82b2) JSON_FILE_VERSION 3 (src/util.cu:52): a top
    object with ``args``, ``env`` (the environment as ``NAME=value`` strings, src/util.cu:365-377)
    and ``results``, each result holding ``size`` and ``out_of_place``/``in_place`` objects of
    ``time`` (or ``cpu_time``), ``alg_bw``, ``bus_bw`` and ``nwrong`` (null when unchecked;
    src/util.cu:454-523). Doubles that are NaN are written as the string "nan"
    (src/util.cu:290-297) and booleans as the strings "true"/"false" (src/util.cu:273-275).
    """
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ValueError("all_reduce_perf's JSON output does not parse (%s); expected the file "
                         "that -J/--output_file writes when the run finishes" % error) from None
    if not isinstance(document, Mapping) or not isinstance(document.get("results"), list):
        raise ValueError("all_reduce_perf's JSON output has no results list; expected nccl-tests "
                         "2.17 or later run with -J <file>.json")
    rows: List[AllReduceRow] = []
    for result in document["results"]:
        if not isinstance(result, Mapping):
            continue
        for placement in ("out_of_place", "in_place"):
            half = result.get(placement)
            if not isinstance(half, Mapping):
                continue
            wrong = _number(half.get("nwrong"))
            rows.append(AllReduceRow(
                size_bytes=int(result.get("size") or 0),
                time_us=_number(half.get("time", half.get("cpu_time"))),
                algbw_gbps=_number(half.get("alg_bw")),
                busbw_gbps=_number(half.get("bus_bw")),
                wrong=None if wrong is None else int(wrong),
                placement=placement,
                tool="nccl-tests",
            ))
    env = {}
    for entry in document.get("env") or []:
        name, sep, value = str(entry).partition("=")
        if sep:
            env[name] = value
    bounds = document.get("out_of_bounds") or {}
    average = document.get("average_bus_bandwidth") or {}
    return {
        "rows": rows,
        "avg_busbw_gbps": _number(average.get("bandwidth")),
        "out_of_bounds": int(bounds["count"]) if isinstance(bounds.get("count"), int) else None,
        "algorithm": env.get("NCCL_ALGO") or None,
        "errors": [str(error) for error in document.get("errors") or []],
    }


def parse_gloo(text_or_document: Any) -> Dict[str, Any]:
    """The burn-in's gloo all-reduce figures (our own JSON, written by burnin_gpt.py).

    ``{"tool": "gloo", "ranks": N, "results": [{"size": bytes, "time_us": .., "algbw": ..,
    "busbw": .., "wrong": 0}]}``; the bandwidths in GB/s and busbw = algbw x 2(N-1)/N, the factor
    nccl-tests applies to all-reduce (src/all_reduce.cu:59-64, ``AllReduceGetBw``), so the two compare.
    """
    document = json.loads(text_or_document) if isinstance(text_or_document, str) else text_or_document
    if not isinstance(document, Mapping) or not isinstance(document.get("results"), list):
        raise ValueError("the gloo all-reduce figures have no results list; expected the "
                         "burn-in's allreduce object ({'tool': 'gloo', 'results': [...]})")
    rows = []
    for result in document["results"]:
        wrong = _number(result.get("wrong"))
        rows.append(AllReduceRow(
            size_bytes=int(result.get("size") or 0),
            time_us=_number(result.get("time_us")),
            algbw_gbps=_number(result.get("algbw")),
            busbw_gbps=_number(result.get("busbw")),
            wrong=None if wrong is None else int(wrong),
            placement="in_place",
            tool=str(document.get("tool") or "gloo"),
        ))
    return {"rows": rows, "algorithm": document.get("algorithm"), "ranks": document.get("ranks")}


def busbw_factor(ranks: int) -> float:
    """nccl-tests' all-reduce bus-bandwidth factor 2(n-1)/n (src/all_reduce.cu:59-64, AllReduceGetBw)."""
    return 2.0 * (ranks - 1) / ranks if ranks > 0 else 0.0


def gate_figure(rows: Sequence[AllReduceRow], min_bytes: int = GATE_MIN_BYTES) -> Dict[str, Any]:
    """The figure a gate judges: the mean bus bandwidth of the rows of ``min_bytes`` or more.

    Small sizes are left out (nccl-tests#212). Any row with wrong elements is a failure whatever
    its speed. ``busbw_gbps`` is None when no row is large enough: the run measured nothing the
    gate may judge, which the caller reports as such rather than passing.
    """
    large = [row for row in rows if row.size_bytes >= min_bytes and row.busbw_gbps is not None]
    wrong = sum(row.wrong for row in rows if row.wrong)
    figure = sum(row.busbw_gbps for row in large) / len(large) if large else None  # type: ignore[misc]
    return {
        "busbw_gbps": None if figure is None else round(figure, 3),
        "sizes": sorted({row.size_bytes for row in large}),
        "min_bytes": int(min_bytes),
        "wrong": int(wrong),
        "rows": len(large),
    }
