# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The burn-in's all-reduce gate: the world all-reduce at large sizes, judged against the threshold for its scope, and the bisection's rounds.

Across nodes the threshold is the slowest node's HCA ports x rate (thresholds.cross_threshold);
on one node, the node threshold, which without link facts is only the site's figure. Where
nothing sets a threshold the figure is printed and not gated.

No Ansible imports; Python 3.8 compatible.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Sequence

from . import allreduce, bisect, thresholds


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
                min_bytes: int = allreduce.GATE_MIN_BYTES, scope: Optional[str] = None) -> Dict[str, Any]:
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
        scope = scope or "world all-reduce over %d nodes" % nodes
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


# --------------------------------------------------------------------------------------------
# The bisection's rounds, as the play (roles/megatron_launch/tasks/fabric_gate.yml) runs them
# --------------------------------------------------------------------------------------------
def bisect_round(nodes: Sequence[str], results: Sequence[Mapping[str, Any]], addresses: Mapping[str, Any],
                 base_port: int) -> Dict[str, Any]:
    """The next round: bisect.next_step's groups and, for every node measured, its rank's arguments.

    ``ranks`` maps each node of a group to ``{"rank", "world", "master", "port", "group"}``: one
    rank per node, rank 0 on the group's first node (its cluster address from ``addresses``, else
    its name), and a port per group so that the groups of one round run at once.
    """
    step = bisect.next_step(list(nodes), list(results))
    ranks: Dict[str, Dict[str, Any]] = {}
    for index, group in enumerate(step["measure"]):
        master = str(addresses.get(group[0]) or group[0])
        for rank, node in enumerate(group):
            ranks[node] = {"rank": rank, "world": len(group), "master": master, "port": int(base_port) + index,
                           "group": list(group)}
    return dict(step, ranks=ranks)


def group_result(group: Sequence[str], document: Optional[Mapping[str, Any]], node_facts: Mapping[str, Any],
                 fraction: float = thresholds.DEFAULT_CROSS_FRACTION, override: Any = None,
                 min_bytes: int = allreduce.GATE_MIN_BYTES) -> Dict[str, Any]:
    """One measured group's verdict, as the bisection records it: ``nodes``, ``passed``, ``measured``, ``threshold``, ``line``.

    ``document`` is rank 0's FABRIC_ALLREDUCE JSON (roles/megatron_launch/files/fabric_allreduce.py).
    The probe runs one rank per node, which drives one HCA port of each node, so the detected
    threshold counts one port per node (the slowest node's first Active port x rate x fraction)
    and not every port as the burn-in's world all-reduce does.
    """
    if not isinstance(document, Mapping):
        raise ValueError("the all-reduce over %s printed no FABRIC_ALLREDUCE line on %s; expected rank 0's figures: "
                         "read the task's output for the error of each rank" % ("+".join(group), group[0]))
    one_port = {}
    for node in group:
        rates = active_rates(node_facts.get(node) if isinstance(node_facts.get(node), Mapping) else {})
        one_port[node] = {"ports": [{"state": "ACTIVE", "rate": rate} for rate in rates[:1]]}
    verdict = burnin_gate([{"allreduce_gate": document}], one_port, fraction, override, min_bytes,
                          scope="all-reduce over %s, one rank per node" % "+".join(group))
    return dict(verdict, nodes=list(group))


PROBE_MARK = "FABRIC_ALLREDUCE"


def probe_document(stdout: Optional[str]) -> Optional[Dict[str, Any]]:
    """Rank 0's ``FABRIC_ALLREDUCE {...}`` line (fabric_allreduce.py) as a dict; None when it printed none."""
    for line in reversed((stdout or "").splitlines()):
        text = line.strip()
        if text.startswith(PROBE_MARK + " "):
            document = json.loads(text[len(PROBE_MARK) + 1:])
            return document if isinstance(document, dict) else None
    return None


def round_results(groups: Sequence[Sequence[str]], outputs: Mapping[str, Any], node_facts: Mapping[str, Any],
                  fraction: float = thresholds.DEFAULT_CROSS_FRACTION, override: Any = None,
                  min_bytes: int = allreduce.GATE_MIN_BYTES) -> List[Dict[str, Any]]:
    """Every group of a round judged from its rank 0's output (``outputs``: node -> the rank's ``stdout``, ``stderr``, ``rc``).

    A group whose rank 0 printed no figures did not measure the fabric (a rank could not start,
    a port was taken): that stops the bisection with each rank's error, rather than counting as
    slow and naming a node for it.
    """
    out = []
    for group in groups:
        first = outputs.get(group[0]) if isinstance(outputs.get(group[0]), Mapping) else {}
        document = probe_document(first.get("stdout"))
        if document is None:
            errors = []
            for node in group:
                ran = outputs.get(node) if isinstance(outputs.get(node), Mapping) else {}
                text = (str(ran.get("stderr") or "") + " " + str(ran.get("msg") or "")).strip()
                errors.append("%s: rc %s: %s" % (node, ran.get("rc"), text[-300:] or "no output"))
            raise ValueError("the fabric gate's all-reduce over %s gave no figures (%s); expected rank 0 on %s to print "
                             "a %s line: check that the venv's torch imports on every node and that the gate's ports "
                             "are free between them" % ("+".join(group), "; ".join(errors), group[0], PROBE_MARK))
        out.append(group_result(group, document, node_facts, fraction, override, min_bytes))
    return out
