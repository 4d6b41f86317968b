# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric check's figures: perftest's ib_write_bw output, per pair and for the cluster.

The infiniband role's fabric check (tasks_from: fabric_check) runs ib_write_bw from each node to
the next; the burn-in runs the same check first and carries its summary in its report.

No Ansible imports; Python 3.8 compatible.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

# perftest's result table: a header naming the columns and their unit, then one row of numbers
# per message size ("#bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]").
# Dual-port runs add per-port columns after MsgRate. --report_gbits gives Gb/sec (10^9 bits);
# without it the header says MB/sec, which perftest means as MiB/sec: ib_write_bw --help of
# perftest 4.5 (Debian 12's perftest 4.5+0.17-1) says "Report Max/Average BW of test in Gbit/sec
# (instead of MiB/sec)" and "MiB=2^20 byte".
_HEADER = re.compile(r"#bytes\s+#iterations\s+BW peak\[(?P<unit>[A-Za-z]+/sec)\]\s+BW average\[(?P=unit)\]")
_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)(?:\s+[\d.]+)*\s*$")
_TO_GBPS = {
    "Gb/sec": 1.0,
    "MB/sec": 8 * 2 ** 20 / 1e9,
    "MiB/sec": 8 * 2 ** 20 / 1e9,
}


def perftest_result(stdout: str) -> Dict[str, Any]:
    """The last result row of an ib_write_bw (or ib_read_bw, ib_send_bw) client's output.

    Returns ``message_bytes``, ``iterations``, ``peak_gbps``, ``average_gbps``, ``msg_rate_mpps``
    and ``unit`` (as printed), with the bandwidths in Gb/s whatever unit perftest printed; an
    empty dict when the output holds no result row (the client failed before measuring).
    """
    text = stdout or ""
    header = _HEADER.search(text)
    if not header:
        return {}
    unit = header.group("unit")
    if unit not in _TO_GBPS:
        raise ValueError("perftest printed bandwidth in %s, which this parser does not know "
                         "(expected one of %s)" % (unit, ", ".join(sorted(_TO_GBPS))))
    rows = [_ROW.match(line) for line in text[header.end():].splitlines()]
    rows = [row for row in rows if row]
    if not rows:
        return {}
    size, iterations, peak, average, rate = rows[-1].groups()
    scale = _TO_GBPS[unit]
    return {
        "message_bytes": int(size),
        "iterations": int(iterations),
        "peak_gbps": round(float(peak) * scale, 6),
        "average_gbps": round(float(average) * scale, 6),
        "msg_rate_mpps": float(rate),
        "unit": unit,
    }


def fabric_summary(pairs: Sequence[Mapping[str, Any]], min_gbps: float = 0.0) -> Dict[str, Any]:
    """The cluster's fabric check from its pairs (``node``, ``peer``, ``rc``, ``average_gbps``).

    A pair whose client failed or measured nothing is a problem, named with both nodes, and its
    writing node is in ``failed_nodes``. So is a pair below its own ``threshold`` (a
    _fabric.thresholds.Threshold as a dict: the link's rate x a fraction, or the site's figure,
    with its origin), or, where the pair has no threshold, at or below ``min_gbps``. ``slowest``
    is the pair with the lowest average, the link a ring all-reduce waits for.
    """
    problems: List[str] = []
    failed_nodes: List[str] = []
    measured: List[Mapping[str, Any]] = []
    for pair in pairs:
        node, peer = pair.get("node"), pair.get("peer")
        rc = int(pair.get("rc", -1))
        average = pair.get("average_gbps")
        if rc != 0:
            error = str(pair.get("error") or "").strip()
            problems.append("%s -> %s: ib_write_bw exited %d%s; run the pair's command by hand: %s"
                            % (node, peer, rc, " (%s)" % error if error else "", pair.get("command") or "(not recorded)"))
            failed_nodes.append(str(node))
            continue
        if not isinstance(average, (int, float)):
            problems.append("%s -> %s: ib_write_bw printed no result row" % (node, peer))
            failed_nodes.append(str(node))
            continue
        measured.append(pair)
        threshold = pair.get("threshold") if isinstance(pair.get("threshold"), Mapping) else {}
        expected = threshold.get("expected")
        if isinstance(expected, (int, float)) and not isinstance(expected, bool) and (
                float(average) < float(expected) or float(average) <= 0):
            problems.append("%s -> %s: %.4g Gb/s average, expected >= %.4g Gb/s (%s: %s); check the port "
                            "state and rate (ibv_devinfo, /sys/class/infiniband/*/ports/*/rate), the cable "
                            "and NCCL_IB_GID_INDEX"
                            % (node, peer, float(average), float(expected), threshold.get("origin"),
                               threshold.get("basis")))
            failed_nodes.append(str(node))
        elif not isinstance(expected, (int, float)) and float(average) <= float(min_gbps):
            problems.append("%s -> %s: %.4g Gb/s average, expected more than %s Gb/s; check the port "
                            "state (ibv_devinfo), the link speed and NCCL_IB_GID_INDEX"
                            % (node, peer, float(average), min_gbps))
            failed_nodes.append(str(node))
    slowest: Optional[Mapping[str, Any]] = min(measured, key=lambda p: float(p["average_gbps"])) if measured else None
    return {
        "check": "ib_write_bw",
        "pairs": [dict(p) for p in pairs],
        "min_gbps": float(min_gbps),
        "slowest": dict(slowest) if slowest else None,
        "min_average_gbps": float(slowest["average_gbps"]) if slowest else None,
        "problems": problems,
        # The nodes whose write to their peer failed: the role's per-node check reads this verdict.
        "failed_nodes": failed_nodes,
        "passed": bool(pairs) and not problems,
    }


def fabric_lines(summary: Optional[Mapping[str, Any]]) -> List[str]:
    """Lines of a fabric_summary for the burn-in's output: one per pair, the slowest marked."""
    if not summary or not summary.get("pairs"):
        return []
    slowest = summary.get("slowest") or {}
    lines = ["fabric (%s, one pair at a time):" % summary.get("check", "ib_write_bw")]
    for pair in summary["pairs"]:
        average = pair.get("average_gbps")
        figure = "%.4g Gb/s" % float(average) if isinstance(average, (int, float)) else "no result (rc %s)" % pair.get("rc")
        mark = "  <- slowest" if len(summary["pairs"]) > 1 and pair.get("node") == slowest.get("node") else ""
        threshold = pair.get("threshold") if isinstance(pair.get("threshold"), Mapping) else {}
        if isinstance(threshold.get("expected"), (int, float)):
            figure += " measured, expected >= %.4g Gb/s (%s: %s)" % (
                float(threshold["expected"]), threshold.get("origin"), threshold.get("basis"))
        elif threshold:
            figure += " measured, not gated (%s)" % threshold.get("basis")
        lines.append("  %s -> %s: %s%s" % (pair.get("node"), pair.get("peer"), figure, mark))
    return lines


FABRIC_CHECK_MODES = ("auto", "always", "never")


def fabric_check_wanted(mode: str, local_facts: Sequence[Any], facts_key: str = "megatron_infiniband") -> bool:
    """Whether the burn-in runs the fabric check, from each node's local facts (``ansible_local``).

    ``always`` and ``never`` decide alone. ``auto`` runs it when there are two nodes or more and the
    infiniband role's facts (``ansible_local[facts_key].nccl_env.NCCL_IB_HCA``) name an HCA on every
    one of them: a node without one (a socket-only cluster, a container) has nothing to test.
    """
    if mode not in FABRIC_CHECK_MODES:
        raise ValueError("megatron_launch_burnin_fabric_check is %r; expected one of %s"
                         % (mode, ", ".join(FABRIC_CHECK_MODES)))
    if mode != "auto":
        return mode == "always"
    if len(local_facts) < 2:
        return False
    for facts in local_facts:
        role = (facts or {}).get(facts_key) if isinstance(facts, Mapping) else None
        env = role.get("nccl_env") if isinstance(role, Mapping) else None
        if not (isinstance(env, Mapping) and str(env.get("NCCL_IB_HCA") or "").strip()):
            return False
    return True


def tested_port(role_facts: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """The HCA port the fabric check tests on a node, with its sysfs rate, from the infiniband role's facts.

    The check uses the first ``HCA:port`` of ``nccl_env.NCCL_IB_HCA`` ("=mlx5_0:1,mlx5_1:1"; a
    leading "=" or "^" is NCCL's exact-match or exclude mark); its rate comes from the role's
    ``ports`` (what discover.yml read from /sys/class/infiniband). Empty values when the facts
    do not name it.
    """
    facts = role_facts if isinstance(role_facts, Mapping) else {}
    env = facts.get("nccl_env") if isinstance(facts.get("nccl_env"), Mapping) else {}
    first = str(env.get("NCCL_IB_HCA") or "").lstrip("=^").split(",", 1)[0]
    hca, _sep, port = first.partition(":")
    port = port or "1"
    rate = None
    for entry in facts.get("ports") or []:
        if isinstance(entry, Mapping) and str(entry.get("hca")) == hca and str(entry.get("port")) == port:
            rate = entry.get("rate") or None
    return {"hca": hca or None, "port": port if hca else None, "rate": rate}
