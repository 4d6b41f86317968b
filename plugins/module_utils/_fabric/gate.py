# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The burn-in's all-reduce gate: the world all-reduce at large sizes, judged against the threshold for its scope.

Across nodes the threshold is the slowest node's HCA ports x rate (thresholds.cross_threshold);
on one node, the node threshold, which without link facts is only the site's figure. Where
nothing sets a threshold the figure is printed and not gated.

No Ansible imports; Python 3.8 compatible.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import allreduce, thresholds


def active_rates(role_facts: Optional[Mapping[str, Any]]) -> List[str]:
    """The sysfs rate texts of a node's Active ports, from the infiniband role's facts (``ports``)."""
    facts = role_facts if isinstance(role_facts, Mapping) else {}
    rates = []
    for port in facts.get("ports") or []:
        if isinstance(port, Mapping) and "ACTIVE" in str(port.get("state") or "").upper() and port.get("rate"):
            rates.append(str(port["rate"]))
    return rates


def burnin_gate(results: Sequence[Mapping[str, Any]], node_facts: Mapping[str, Any],
                fraction: float = thresholds.DEFAULT_CROSS_FRACTION, override: Any = None,
                min_bytes: int = allreduce.GATE_MIN_BYTES) -> Dict[str, Any]:
    """The gate's verdict from every rank's BURNIN_RESULT and each inventory node's infiniband facts.

    ``node_facts`` maps each node to its ``ansible_local`` infiniband facts (empty where the role
    did not run). Returns ``ran`` (False when the burn-in measured nothing for the gate: one rank,
    or --gate-mib 0), ``passed``, the verdict's ``line`` and figures. A measurement that cannot be
    judged (no large size, Tree across nodes, wrong elements) fails.
    """
    document = next((result.get("allreduce_gate") for result in results
                     if isinstance(result.get("allreduce_gate"), Mapping)), None)
    if document is None:
        return {"ran": False, "passed": True, "line": "all-reduce gate: not measured (one rank, or --gate-mib 0)"}
    parsed = allreduce.parse_gloo(document)
    figure = allreduce.gate_figure(parsed["rows"], min_bytes)
    nodes = len(node_facts)
    tool = str(document.get("tool") or "gloo")
    if nodes > 1:
        threshold = thresholds.cross_threshold(
            [{"name": name, "rates": active_rates(facts)} for name, facts in sorted(node_facts.items())],
            fraction, override)
        scope = "world all-reduce over %d nodes" % nodes
        problem = thresholds.cross_algorithm_problem(parsed.get("algorithm"), nodes, tool)
    else:
        threshold = thresholds.node_threshold(gpus=int(document.get("ranks") or 0), override=override)
        scope = "all-reduce within the node"
        problem = None
    if figure["wrong"]:
        problem = "%d wrong element(s) in the all-reduce's data check: a rank computed a wrong sum" % figure["wrong"]
    sizes = ",".join(str(size // (1 << 20)) for size in figure["sizes"])
    name = "%s (%s, %d ranks, %s)" % (scope, tool, int(document.get("ranks") or 0),
                                      "%s MiB" % sizes if sizes else "no size of %d MiB or more" % (min_bytes >> 20))
    verdict = thresholds.judge(name, figure["busbw_gbps"], threshold, problem)
    return dict(verdict, ran=True, figure=figure, tool=tool, algorithm=parsed.get("algorithm"))
