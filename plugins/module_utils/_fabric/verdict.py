# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric gate's verdict as one JSON document, and what the Slurm health check and the supervisor read in it.

The bisection (bisect.next_step) names a slow node or link from pass/fail answers; the verdict
keeps, beside each named node, the measurement that named it (the smallest failing group that
holds it: measured against expected, with the threshold's origin), so that a drain reason or an
incident says the figures and not only the name.

Only a node named without ambiguity is acted on (drained, excluded). A link, a pair of two
nodes that cannot be told apart, or a fault that shows only at scale is reported and left to a
person: draining both ends of a cable would take a healthy node out with the bad one.

No Ansible imports; Python 3.8 compatible (the nodes' health check and the supervisor import it
from the library os_base installs).
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import bisect

VERSION = 1
# The preflight row's name (the health check's drain reason starts with it).
CHECK = "fabric.allreduce"
# What an incident's evidence carries, so that one verdict is acted on once (_already_acted).
EVIDENCE_TAG = "fabric gate verdict of"


def _evidence(members: Sequence[str], results: Sequence[Mapping[str, Any]]) -> Optional[Dict[str, Any]]:
    """The failing measurement that best shows ``members`` slow: the smallest failing group holding them all."""
    wanted = set(members)
    failing = [result for result in results
               if not result.get("passed") and wanted <= set(str(node) for node in result.get("nodes") or [])]
    if not failing:
        return None

    passed = set(str(node) for result in results if result.get("passed") for node in result.get("nodes") or [])

    def order(result: Mapping[str, Any]) -> Any:
        # The smallest group, then the one whose other members passed elsewhere (a pair with a
        # node known good says more than the failing half it came from).
        others = [str(node) for node in result.get("nodes") or [] if str(node) not in wanted]
        return (len(result.get("nodes") or []), -sum(1 for node in others if node in passed))

    # Later measurements first on a tie: the walk narrows down, so its last failing group is the
    # most telling (the suspect with a good node, after the failing half it came from).
    best = min(reversed(failing), key=order)
    threshold = best.get("threshold") if isinstance(best.get("threshold"), Mapping) else {}
    return {
        "group": [str(node) for node in best.get("nodes") or []],
        "measured": best.get("measured"),
        "expected": threshold.get("expected"),
        "unit": threshold.get("unit") or "GB/s",
        "origin": threshold.get("origin") or "",
        "basis": threshold.get("basis") or "",
        "line": str(best.get("line") or ""),
    }


def _figure(value: Any, unit: str) -> str:
    return "%.4g %s" % (float(value), unit) if value is not None else "no figure"


def finding_line(node: str, finding: Mapping[str, Any]) -> str:
    """One node's finding: its all-reduce measured against expected, with whom and the threshold's origin."""
    others = [member for member in finding.get("group") or [] if member != node]
    expected = (">= %s (%s: %s)" % (_figure(finding.get("expected"), finding.get("unit") or "GB/s"),
                                    finding.get("origin"), finding.get("basis"))
                if finding.get("expected") is not None else "no threshold")
    return "%s: all-reduce %s%s, expected %s" % (
        node, _figure(finding.get("measured"), finding.get("unit") or "GB/s"),
        " with %s" % ", ".join(others) if others else "", expected)


def build(nodes: Sequence[str], results: Sequence[Mapping[str, Any]], at: str, epoch: float) -> Dict[str, Any]:
    """The verdict from the world's nodes and every measurement the bisection made.

    ``results`` are ``{"nodes", "passed", "measured", "threshold", "line"}`` (thresholds.judge's
    verdict plus the group). Raises ValueError when the bisection is not finished: a verdict
    built half-way would name nobody and read as healthy.
    """
    step = bisect.next_step(nodes, results)
    if not step["done"]:
        raise ValueError("the fabric bisection of %s is not finished: it still needs %s measured"
                         % (", ".join(nodes), "; ".join("+".join(group) for group in step["measure"])))
    acted = [] if step["ambiguous"] else list(step["culprit_nodes"])
    named = {}
    for node in acted:
        found = _evidence([node], results)
        if found:
            named[node] = found
    links = [{"nodes": list(link), "finding": _evidence(link, results)} for link in step["culprit_links"]]
    world = next((result for result in results if set(result.get("nodes") or []) == set(nodes)), None)
    lines = [str(result.get("line") or "") for result in results]
    if step["healthy"]:
        lines.append("fabric gate: the world passes; no node named")
    else:
        lines.extend("fabric gate names node %s" % finding_line(node, named[node]) for node in sorted(named))
        lines.extend("fabric gate names the link %s: %s" % (
            " - ".join(link["nodes"]), finding_line(link["nodes"][0], link["finding"]) if link["finding"] else "")
            for link in links)
        lines.append("fabric gate: %s%s" % (step["reason"], " (ambiguous: no node is drained or excluded; "
                                            "run playbooks/fabric_check.yml between the nodes named)"
                                            if step["ambiguous"] or not acted else ""))
    return {
        "version": VERSION,
        "at": at,
        "epoch": float(epoch),
        "nodes": list(nodes),
        "healthy": bool(step["healthy"]),
        "rounds": _rounds(nodes, results),
        "round_bound": bisect.node_round_bound(len(nodes)),
        "culprit_nodes": list(step["culprit_nodes"]),
        "culprit_links": [list(link) for link in step["culprit_links"]],
        "culprit_sets": [list(group) for group in step["culprit_sets"]],
        "ambiguous": bool(step["ambiguous"]),
        "reason": step["reason"],
        "also_failing": step["also_failing"],
        "named": named,
        "links": links,
        "world": dict(world) if world else None,
        "results": [dict(result) for result in results],
        "lines": lines,
    }


def _rounds(nodes: Sequence[str], results: Sequence[Mapping[str, Any]]) -> int:
    """The rounds the walk took to reach its verdict with these results (replayed: each round's groups)."""
    known: List[Mapping[str, Any]] = []
    by_members = {frozenset(result.get("nodes") or []): result for result in results}
    for rounds in range(len(results) + 2):
        step = bisect.next_step(nodes, known)
        if step["done"]:
            return rounds
        known = known + [by_members[frozenset(group)] for group in step["measure"] if frozenset(group) in by_members]
    return len(results)


def read(path: str) -> Optional[Dict[str, Any]]:
    """The verdict written at ``path``; None when there is none. A file that does not parse raises ValueError."""
    if not path or not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    try:
        document = json.loads(text)
    except ValueError as error:
        raise ValueError("fabric verdict %s does not parse (%s); expected the JSON that "
                         "playbooks/fabric_check.yml writes; run it again or remove the file" % (path, error)) from None
    if not isinstance(document, Mapping) or document.get("version") != VERSION:
        raise ValueError("fabric verdict %s: version %r, expected %d; run playbooks/fabric_check.yml again"
                         % (path, document.get("version") if isinstance(document, Mapping) else None, VERSION))
    return dict(document)


def node_finding(document: Optional[Mapping[str, Any]], node: str) -> Optional[Dict[str, Any]]:
    """The finding that names ``node`` for action (drain, exclude), or None."""
    if not document:
        return None
    named = document.get("named") if isinstance(document.get("named"), Mapping) else {}
    finding = named.get(node)
    return dict(finding) if isinstance(finding, Mapping) else None


def health_fields(document: Optional[Mapping[str, Any]], node: str) -> Optional[Dict[str, str]]:
    """The Slurm health check's row for ``node``: status (pass/fail), found, expected, fix; None without a verdict."""
    if not document:
        return None
    finding = node_finding(document, node)
    if finding is None:
        if node in (document.get("nodes") or []):
            found = "not named (%s)" % ("world passed" if document.get("healthy") else "another node or link named")
        else:
            found = "not in the verdict's nodes"
        return {"status": "pass", "found": "%s, verdict of %s" % (found, document.get("at")),
                "expected": "not named by the fabric gate", "fix": ""}
    unit = finding.get("unit") or "GB/s"
    others = [member for member in finding.get("group") or [] if member != node]
    expected = ">= %s, %s" % (_figure(finding.get("expected"), unit), finding.get("origin")) \
        if finding.get("expected") is not None else "a passing all-reduce"
    return {
        "status": "fail",
        "found": _figure(finding.get("measured"), unit) + (" with %s" % "+".join(others) if others else ""),
        "expected": expected,
        "fix": ("the fabric gate of %s named %s (%s); check its HCA ports (ibstat: rate, state), cables and PCIe "
                "link, then run playbooks/fabric_check.yml again, which rewrites the verdict and resumes the node"
                % (document.get("at"), node, finding_line(node, finding))),
    }


def acted_on(document: Mapping[str, Any], history: Sequence[Mapping[str, Any]]) -> bool:
    """Whether an incident already carries this verdict: one verdict excludes its node once."""
    stamp = "%s %s" % (EVIDENCE_TAG, document.get("at"))
    return any(stamp in str(record.get("evidence") or "") for record in history)


def slow_nodes(document: Optional[Mapping[str, Any]], nodes: Sequence[str],
               history: Sequence[Mapping[str, Any]] = ()) -> Dict[str, str]:
    """{node: evidence} for the job's ``nodes`` that the verdict names and no incident has acted on yet."""
    if not document or acted_on(document, history):
        return {}
    out = {}
    for node in nodes:
        finding = node_finding(document, node)
        if finding is not None:
            out[node] = "%s %s: %s" % (EVIDENCE_TAG, document.get("at"), finding_line(node, finding))
    return out
