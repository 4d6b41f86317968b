# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bisection of a slow all-reduce: which sets of nodes to measure next, until one node or one link is named.

``next_step(nodes, results)`` is a pure function of the world and every verdict so far, so an
Ansible loop (register the verdicts, call the filter again) or a script drives it the same way:

    results = []
    while True:
        step = next_step(nodes, results)
        if step["done"]:
            break
        for group in step["measure"]:          # disjoint: one round, may run at once
            results.append({"nodes": group, "passed": measure(group)})

The walk: measure the world; when it fails, split the suspects in halves and measure both; follow
the failing half; when both halves pass, the fault needs a node of each (a link), so the two sides
are split and paired until one node of each is left. Two or three suspects are each measured with
a node already known good, which tells a slow node from a slow link between suspects. A slow node
is named in at most ceil(log2 N) + 2 rounds; a slow link in at most 2 ceil(log2 N) + 1.

It assumes what a bandwidth fault does to a ring: a set that holds the slow node (or both ends of
the slow link) fails, every other set passes. A set of one node has no cross-node all-reduce and
is never asked for.

No Ansible imports; Python 3.8 compatible.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple

Group = Tuple[str, ...]


class _Need(Exception):
    """Raised inside the walk when a verdict is missing: the groups to measure in the next round."""

    def __init__(self, groups: List[Group]) -> None:
        super().__init__(groups)
        self.groups = groups


def node_round_bound(count: int) -> int:
    """The most rounds the walk takes to name a slow node among ``count`` nodes."""
    return int(math.ceil(math.log2(count))) + 2 if count > 1 else 0


def link_round_bound(count: int) -> int:
    """The most rounds the walk takes to name a slow link among ``count`` nodes."""
    return 2 * int(math.ceil(math.log2(count))) + 1 if count > 1 else 0


def _halves(group: Group) -> Tuple[Group, Group]:
    middle = (len(group) + 1) // 2
    return group[:middle], group[middle:]


class _Walk:
    def __init__(self, nodes: Sequence[str], results: Sequence[Mapping[str, Any]]) -> None:
        self.nodes: Group = tuple(str(node) for node in nodes)
        self.known: Dict[FrozenSet[str], bool] = {}
        for result in results:
            self.known[frozenset(str(node) for node in result.get("nodes") or [])] = bool(result.get("passed"))
        self.also_failing: List[Group] = []

    def verdict(self, group: Group) -> Optional[bool]:
        return self.known.get(frozenset(group))

    def need(self, *groups: Group) -> None:
        """Stop the walk when any of ``groups`` (disjoint) lacks a verdict."""
        missing = [group for group in groups if self.verdict(group) is None]
        if missing:
            raise _Need(missing)

    def within(self, suspects: Group, good: Group) -> Dict[str, Any]:
        """``suspects`` fails together; name what in it is slow."""
        while len(suspects) >= 4:
            left, right = _halves(suspects)
            self.need(left, right)
            if not self.verdict(left):
                if not self.verdict(right):
                    # A second fault: named after the first is fixed and the gate runs again.
                    self.also_failing.append(right)
                else:
                    good = good + right
                suspects = left
            elif not self.verdict(right):
                good, suspects = good + left, right
            else:
                return self.across(left, right)
        if good:
            return self.against_good(suspects, good)
        return self.among(suspects)

    def against_good(self, suspects: Group, good: Group) -> Dict[str, Any]:
        """Two or three suspects, each measured with a known-good node: a slow node fails its pair."""
        pairs = [(suspect, good[index % len(good)]) for index, suspect in enumerate(suspects)]
        # One round holds the pairs that share no node; a shared good node waits a round.
        missing = [pair for pair in pairs if self.verdict(pair) is None]
        if missing:
            batch: List[Group] = []
            used: set = set()
            for pair in missing:
                if not used.intersection(pair):
                    batch.append(pair)
                    used.update(pair)
            raise _Need(batch)
        slow = [suspect for suspect, partner in pairs if not self.verdict((suspect, partner))]
        if slow:
            return self.named(nodes=slow, reason="fails its all-reduce with a node that passes elsewhere")
        # Every suspect is fine with a good node: what is slow runs between the suspects.
        if len(suspects) == 2:
            return self.named(links=[suspects], reason="both nodes pass with others and fail together")
        return self.among(suspects, nodes_known_good=True)

    def among(self, suspects: Group, nodes_known_good: bool = False) -> Dict[str, Any]:
        """Two or three suspects and no good node to measure them against."""
        if len(suspects) < 3:
            return self.named(links=[suspects], ambiguous=True,
                              reason="two nodes alone cannot tell a slow node from a slow link; "
                                     "run the ib_write_bw pair check between them")
        pairs = [(suspects[0], suspects[1]), (suspects[0], suspects[2]), (suspects[1], suspects[2])]
        for pair in pairs:
            self.need(pair)  # pairs of three overlap: one per round
        failing = [pair for pair in pairs if not self.verdict(pair)]
        if len(failing) == 2 and not nodes_known_good:
            common = sorted(set(failing[0]) & set(failing[1]))
            return self.named(nodes=common, reason="fails with each of the other two, which pass together")
        if len(failing) in (1, 2):
            return self.named(links=failing, reason="these pairs fail, the other passes")
        return self.named(nodes=list(suspects) if failing else [], links=[], ambiguous=True,
                          reason="every pair fails" if failing else
                          "the three fail together and every pair passes: a fault that shows only at scale")

    def across(self, left: Group, right: Group) -> Dict[str, Any]:
        """``left`` and ``right`` pass alone and fail together: find the one pair that is slow."""
        while len(left) > 1 or len(right) > 1:
            lefts = _halves(left) if len(left) > 1 else (left,)
            rights = _halves(right) if len(right) > 1 else (right,)
            # Round by round: combos that share no half run together (a1+b1 with a2+b2).
            if len(lefts) == 2 and len(rights) == 2:
                rounds = [[(lefts[0], rights[0]), (lefts[1], rights[1])],
                          [(lefts[0], rights[1]), (lefts[1], rights[0])]]
            else:
                rounds = [[(half, other)] for half in lefts for other in rights]
            found = None
            for batch in rounds:
                self.need(*[half + other for half, other in batch])
                found = next(((half, other) for half, other in batch if not self.verdict(half + other)), None)
                if found:
                    break
            if not found:
                return self.named(ambiguous=True, sets=[left, right],
                                  reason="the two sets fail together and no part of one fails with a part "
                                         "of the other: a fault that shows only at scale (a shared uplink)")
            left, right = found
        return self.named(links=[left + right], reason="both nodes pass with others and fail together")

    def named(self, nodes: Sequence[str] = (), links: Sequence[Group] = (), ambiguous: bool = False,
              reason: str = "", sets: Sequence[Group] = ()) -> Dict[str, Any]:
        return {
            "done": True,
            "measure": [],
            "healthy": False,
            "culprit_nodes": sorted(nodes),
            "culprit_links": [sorted(link) for link in links],
            "culprit_sets": [list(group) for group in sets],
            "ambiguous": ambiguous,
            "reason": reason,
            "also_failing": [list(group) for group in self.also_failing],
        }

    def run(self) -> Dict[str, Any]:
        if len(self.nodes) < 2:
            return dict(self.named(reason="fewer than two nodes: no cross-node all-reduce"), healthy=True)
        self.need(self.nodes)
        if self.verdict(self.nodes):
            return dict(self.named(reason="the world passes"), healthy=True)
        return self.within(self.nodes, ())


def next_step(nodes: Sequence[str], results: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """The groups to measure in the next round, or the verdict once the walk has named the culprit.

    ``results`` are ``{"nodes": [...], "passed": bool}`` in any order (a group's verdict is looked
    up by its members). Returns ``done``; ``measure`` (disjoint groups, in ``nodes``' order);
    when done, ``healthy``, ``culprit_nodes``, ``culprit_links`` (pairs), ``culprit_sets``,
    ``ambiguous``, ``reason`` and ``also_failing`` (a failing half left for a second run).
    """
    walk = _Walk(nodes, results)
    try:
        return walk.run()
    except _Need as need:
        order = {node: index for index, node in enumerate(walk.nodes)}
        groups = [sorted(group, key=lambda node: order.get(node, len(order))) for group in need.groups]
        return {"done": False, "measure": groups}


def run_bisection(nodes: Sequence[str], passes: Callable[[Sequence[str]], bool],
                  max_rounds: int = 64) -> Tuple[Dict[str, Any], int]:
    """Drive ``next_step`` with ``passes(group)`` as the measurement; the verdict and the rounds taken."""
    results: List[Dict[str, Any]] = []
    for rounds in range(max_rounds + 1):
        step = next_step(nodes, results)
        if step["done"]:
            return step, rounds
        results.extend({"nodes": group, "passed": bool(passes(group))} for group in step["measure"])
    raise RuntimeError("the bisection of %d nodes did not end in %d rounds" % (len(nodes), max_rounds))
