# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric gate's verdict: what it names with which figures, and what the health check and the supervisor read in it."""
from __future__ import annotations

import json

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import bisect, thresholds, verdict

AT = "2026-12-07T19:00:00Z"
NODES4 = ["node1", "node2", "node3", "node4"]
SITE = thresholds.Threshold("cross", 8.0, "GB/s", thresholds.ORIGIN_SITE, "set by the site")


def _measure(slow_node=None, slow_link=None):
    """A group's bus bandwidth: 10 GB/s, 4 where the slow node or both ends of the slow link take part."""
    def figure(group):
        if slow_node in group or (slow_link and set(slow_link) <= set(group)):
            return 4.0
        return 10.0
    return figure


def _walk(nodes, figure, threshold=SITE):
    """Drive the bisection as the play does: each group measured, judged, recorded with its figures."""
    results = []
    while True:
        step = bisect.next_step(nodes, results)
        if step["done"]:
            return results
        for group in step["measure"]:
            judged = thresholds.judge("all-reduce over %s" % "+".join(group), figure(group), threshold)
            results.append(dict(judged, nodes=group))


@pytest.mark.parametrize("nodes, slow_node, slow_link, named, links, healthy, ambiguous", [
    pytest.param(NODES4, None, None, [], [], True, False, id="healthy"),
    pytest.param(NODES4, "node3", None, ["node3"], [], False, False, id="slow-node-named"),
    pytest.param(NODES4[:3], "node1", None, ["node1"], [], False, False, id="slow-node-of-three"),
    # A link is reported, never acted on: draining both ends would take a healthy node out.
    pytest.param(NODES4, None, ("node2", "node3"), [], [["node2", "node3"]], False, False, id="slow-link-not-acted-on"),
    pytest.param(NODES4[:2], "node2", None, [], [["node1", "node2"]], False, True, id="two-nodes-ambiguous"),
])
def test_build_names_with_figures(nodes, slow_node, slow_link, named, links, healthy, ambiguous):
    document = verdict.build(nodes, _walk(nodes, _measure(slow_node, slow_link)), AT, 1.0)
    assert (sorted(document["named"]), document["culprit_links"], document["healthy"], document["ambiguous"]) == (
        named, links, healthy, ambiguous)
    assert document["rounds"] <= max(bisect.node_round_bound(len(nodes)), bisect.link_round_bound(len(nodes)))
    for node in named:
        finding = document["named"][node]
        # The smallest failing group that holds the node: a pair with a node known good.
        assert (len(finding["group"]), finding["measured"], finding["expected"], finding["origin"]) == (
            2, 4.0, 8.0, thresholds.ORIGIN_SITE)
        assert any(line.startswith("fabric gate names node %s: all-reduce 4 GB/s with" % node)
                   for line in document["lines"])
    json.dumps(document)  # the play writes it as it is


@pytest.mark.parametrize("slow_node, expected_rounds", [(None, 1), ("node1", 3), ("node4", 3)])
def test_rounds_are_counted_as_the_walk_took_them(slow_node, expected_rounds):
    """World, halves, then each suspect with a good node: 3 rounds for 4 nodes, as run_bisection counts."""
    results = _walk(NODES4, _measure(slow_node))
    assert verdict.build(NODES4, results, AT, 1.0)["rounds"] == expected_rounds == bisect.run_bisection(
        NODES4, lambda group: _measure(slow_node)(group) >= 8.0)[1]


def test_an_unfinished_bisection_is_no_verdict():
    with pytest.raises(ValueError, match="not finished: it still needs node1\\+node2; node3\\+node4 measured"):
        verdict.build(NODES4, [{"nodes": NODES4, "passed": False}], AT, 1.0)


SLOW3 = verdict.build(NODES4, _walk(NODES4, _measure("node3")), AT, 1.0)
HEALTHY = verdict.build(NODES4, _walk(NODES4, _measure()), AT, 1.0)
LINK = verdict.build(NODES4, _walk(NODES4, _measure(slow_link=("node2", "node3"))), AT, 1.0)


@pytest.mark.parametrize("document, node, status, found, expected", [
    (None, "node3", None, None, None),                                            # no verdict: no row
    (SLOW3, "node3", "fail", "4 GB/s with node", ">= 8 GB/s, site override"),
    (SLOW3, "node1", "pass", "not named (another node or link named)", "not named by the fabric gate"),
    (HEALTHY, "node3", "pass", "not named (world passed)", "not named by the fabric gate"),
    (LINK, "node2", "pass", "not named (another node or link named)", "not named by the fabric gate"),
    (SLOW3, "node9", "pass", "not in the verdict's nodes", "not named by the fabric gate"),
])
def test_health_fields(document, node, status, found, expected):
    fields = verdict.health_fields(document, node)
    if status is None:
        assert fields is None
        return
    assert (fields["status"], fields["expected"]) == (status, expected)
    assert fields["found"].startswith(found)
    assert ("playbooks/fabric_check.yml" in fields["fix"]) == (status == "fail")


@pytest.mark.parametrize("document, nodes, history, slow", [
    (SLOW3, NODES4, [], ["node3"]),
    (SLOW3, ["node1", "node2", "node4"], [], []),                                 # already out of the job
    (SLOW3, NODES4, [{"evidence": "x; node3: %s %s: node3: ..." % (verdict.EVIDENCE_TAG, AT)}], []),  # acted on
    (SLOW3, NODES4, [{"evidence": "%s 2026-12-01T00:00:00Z" % verdict.EVIDENCE_TAG}], ["node3"]),  # an older one
    (HEALTHY, NODES4, [], []),
    (LINK, NODES4, [], []),
    (None, NODES4, [], []),
])
def test_slow_nodes(document, nodes, history, slow):
    found = verdict.slow_nodes(document, nodes, history)
    assert sorted(found) == slow
    for node in slow:
        assert found[node].startswith("%s %s: %s: all-reduce 4 GB/s" % (verdict.EVIDENCE_TAG, AT, node))


@pytest.mark.parametrize("text, error", [
    ("{", "does not parse"),
    (json.dumps({"version": 99}), "version 99, expected 1"),
    (json.dumps([1]), "version None, expected 1"),
])
def test_read_refuses_what_it_cannot_trust(tmp_path, text, error):
    path = tmp_path / "verdict.json"
    path.write_text(text)
    with pytest.raises(ValueError, match=error):
        verdict.read(str(path))


def test_read_round_trip_and_missing(tmp_path):
    path = tmp_path / "verdict.json"
    assert verdict.read(str(path)) is None and verdict.read("") is None
    path.write_text(json.dumps(SLOW3))
    assert verdict.read(str(path)) == json.loads(json.dumps(SLOW3))


def test_the_finding_is_the_pair_with_a_good_node_not_the_slower_half():
    """Found on the namespace cluster (tests/chaos/fabric_netns.py): node3's half measured 0.054 GB/s
    with node4 and 0.058 with node1, which passed elsewhere; the verdict named it "with node4", the
    half it was only suspected in. The pair with a node known good is what shows the node slow."""
    figures = {("node1", "node2", "node3", "node4"): 0.059, ("node1", "node2"): 0.116, ("node3", "node4"): 0.054,
               ("node1", "node3"): 0.058, ("node2", "node4"): 0.12}
    document = verdict.build(NODES4, _walk(NODES4, lambda group: figures[tuple(group)],
                                           thresholds.Threshold("cross", 0.1, "GB/s", thresholds.ORIGIN_SITE, "x")), AT, 1.0)
    assert (document["named"]["node3"]["group"], document["named"]["node3"]["measured"]) == (["node1", "node3"], 0.058)
