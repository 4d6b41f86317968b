# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bisection's walk: the next groups to measure, the culprit it names, the rounds it takes."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import bisect


def _nodes(count):
    return ["node%02d" % index for index in range(1, count + 1)]


def _slow_node(culprit):
    return lambda group: culprit not in group


def _slow_link(one, other):
    return lambda group: not (one in group and other in group)


@pytest.mark.parametrize("count", [2, 3, 4, 5, 7, 8, 9, 16, 33])
def test_names_every_slow_node_within_the_bound(count):
    nodes = _nodes(count)
    for culprit in nodes:
        verdict, rounds = bisect.run_bisection(nodes, _slow_node(culprit))
        assert rounds <= bisect.node_round_bound(count), (culprit, rounds)
        if count == 2:
            # Two nodes alone: a slow node and a slow link look the same; the pair is named.
            assert (verdict["culprit_links"], verdict["ambiguous"]) == ([nodes], True)
        else:
            assert (verdict["culprit_nodes"], verdict["culprit_links"], verdict["ambiguous"]) == ([culprit], [], False)


@pytest.mark.parametrize("count", [3, 4, 6, 8, 11, 16])
def test_names_every_slow_link_within_the_bound(count):
    nodes = _nodes(count)
    for index, one in enumerate(nodes):
        for other in nodes[index + 1:]:
            verdict, rounds = bisect.run_bisection(nodes, _slow_link(one, other))
            assert rounds <= bisect.link_round_bound(count), (one, other, rounds)
            assert (verdict["culprit_nodes"], verdict["culprit_links"]) == ([], [[one, other]])


@pytest.mark.parametrize("count, node_bound, link_bound", [(1, 0, 0), (2, 3, 3), (3, 4, 5), (8, 5, 7), (64, 8, 13)])
def test_round_bounds(count, node_bound, link_bound):
    assert (bisect.node_round_bound(count), bisect.link_round_bound(count)) == (node_bound, link_bound)


@pytest.mark.parametrize("nodes, results, expected", [
    pytest.param(_nodes(4), [], {"done": False, "measure": [_nodes(4)]}, id="first-the-world"),
    pytest.param(_nodes(4), [{"nodes": _nodes(4), "passed": False}],
                 {"done": False, "measure": [["node01", "node02"], ["node03", "node04"]]}, id="then-both-halves"),
    # Verdicts are looked up by members, whatever order the driver recorded them in.
    pytest.param(_nodes(4), [{"nodes": list(reversed(_nodes(4))), "passed": False},
                             {"nodes": ["node02", "node01"], "passed": True},
                             {"nodes": ["node03", "node04"], "passed": False}],
                 {"done": False, "measure": [["node01", "node03"], ["node02", "node04"]]},
                 id="suspects-paired-with-good-nodes"),
    pytest.param(_nodes(6), [{"nodes": _nodes(6), "passed": False}, {"nodes": _nodes(3), "passed": True},
                             {"nodes": _nodes(6)[3:], "passed": False}],
                 {"done": False, "measure": [["node01", "node04"], ["node02", "node05"], ["node03", "node06"]]},
                 id="three-suspects-three-good-one-round"),
    pytest.param(_nodes(5), [{"nodes": _nodes(5), "passed": False}, {"nodes": _nodes(3), "passed": True},
                             {"nodes": _nodes(5)[3:], "passed": True}],
                 {"done": False, "measure": [["node01", "node02", "node04"], ["node03", "node05"]]},
                 id="halves-pass-so-the-link-crosses"),
])
def test_next_step(nodes, results, expected):
    assert bisect.next_step(nodes, results) == expected


@pytest.mark.parametrize("nodes, results, healthy, reason", [
    (_nodes(4), [{"nodes": _nodes(4), "passed": True}], True, "the world passes"),
    (_nodes(1), [], True, "fewer than two nodes"),
    ([], [], True, "fewer than two nodes"),
])
def test_next_step_healthy(nodes, results, healthy, reason):
    step = bisect.next_step(nodes, results)
    assert (step["done"], step["healthy"], step["reason"].startswith(reason)) == (True, healthy, True)


def test_two_faults_name_one_and_keep_the_other():
    nodes = _nodes(8)
    verdict, rounds = bisect.run_bisection(nodes, lambda group: "node02" not in group and "node07" not in group)
    assert verdict["culprit_nodes"] == ["node02"]
    assert verdict["also_failing"] == [nodes[4:]]
    assert rounds <= bisect.node_round_bound(8)


def test_fault_only_at_scale_names_the_sets():
    nodes = _nodes(8)
    verdict, _rounds = bisect.run_bisection(nodes, lambda group: len(group) < 8)
    assert (verdict["ambiguous"], verdict["culprit_sets"], verdict["culprit_nodes"]) == (
        True, [nodes[:4], nodes[4:]], [])


@pytest.mark.parametrize("passes, nodes_named, links_named, ambiguous", [
    pytest.param(lambda group: len(group) < 3, [], [], True, id="three-fail-pairs-pass"),
    pytest.param(lambda group: False, ["node01", "node02", "node03"], [], True, id="every-pair-fails"),
    pytest.param(lambda group: not ("node01" in group and "node03" in group), [], [["node01", "node03"]], False,
                 id="one-link-of-three"),
])
def test_three_nodes(passes, nodes_named, links_named, ambiguous):
    verdict, rounds = bisect.run_bisection(_nodes(3), passes)
    assert (verdict["culprit_nodes"], verdict["culprit_links"], verdict["ambiguous"]) == (
        nodes_named, links_named, ambiguous)
    assert rounds <= bisect.link_round_bound(3)


def test_run_bisection_gives_up():
    with pytest.raises(RuntimeError, match="did not end in 1 rounds"):
        bisect.run_bisection(_nodes(8), _slow_node("node05"), max_rounds=1)
