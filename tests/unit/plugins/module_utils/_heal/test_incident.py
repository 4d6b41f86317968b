# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for the supervisor's incident record (_incident).

The filters over it are tested in tests/unit/plugins/filter/test_supervisor_filters.py: ansible-test runs
module_utils tests with only ansible.module_utils importable, so a filter import here fails there.
"""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import incident as _incident

FAULT = {"fault": "node_unreachable", "kind": "node", "nodes": ["node3"], "evidence": "no ssh"}
DECISION = {"action": "exclude", "nodes": ["node1", "node2"], "removed": ["node3"], "added": [], "reason": "r"}


@pytest.mark.parametrize("last, resumed, lost", [(15, 10, 5), (10, 10, 0), (None, 10, 0), (15, None, 0), (3, 10, 0)])
def test_iterations_lost(last, resumed, lost):
    assert _incident.iterations_lost(last, resumed) == lost


def test_make_record():
    rec = _incident.make_record("2026-12-01T06:00:00Z", FAULT, DECISION, 15, 10, "global_step10_universal")
    assert rec["fault"] == "node_unreachable" and rec["action"] == "exclude"
    assert (rec["nodes"], rec["removed"], rec["job_nodes"]) == (["node3"], ["node3"], ["node1", "node2"])
    assert (rec["iterations_lost"], rec["converted"]) == (5, "global_step10_universal")


@pytest.mark.parametrize("lines, count, bad, resumed_at", [
    ([], 0, 0, None),
    (['{"fault": "stall", "action": "retry"}'], 1, 0, None),
    (['{"fault": "stall", "action": "retry"}', '{"event": "resumed", "at": "T", "iteration": 11, "seconds": 42}'],
     1, 0, "T"),
    (["not json", "[1]", "", '{"fault": "stall", "action": "retry"}'], 1, 2, None),
    (['{"event": "resumed", "at": "T"}'], 0, 0, None),  # a resume with no incident before it
])
def test_parse(lines, count, bad, resumed_at):
    records, got_bad = _incident.parse(lines)
    assert (len(records), got_bad) == (count, bad)
    if records:
        assert records[-1].get("resumed_at") == resumed_at


@pytest.mark.parametrize("lines, how", [
    # A restarted supervisor finished the recovery of the incident before it.
    (['{"fault": "node_unreachable", "action": "exclude"}', '{"event": "recovery_finished", "how": "relaunched"}'],
     "relaunched"),
    (['{"fault": "rank_exited", "action": "retry"}', '{"event": "recovery_finished", "how": "adopted"}',
      '{"event": "resumed", "at": "T", "iteration": 11}'], "adopted"),
    (['{"fault": "rank_exited", "action": "retry"}'], None),
])
def test_parse_recovery_finished(lines, how):
    records, bad = _incident.parse(lines)
    assert (len(records), bad) == (1, 0)
    assert records[0].get("recovery_finished") == how


OK_CHECK = '{"event": "resume_checked", "check": {"verdict": "ok"}}'
FAILED = {"verdict": "failed", "reason": "does not continue the run"}


@pytest.mark.parametrize("lines, resume_check, failed_check", [
    # a relaunch's own check fills its incident
    (['{"fault": "rank_exited", "action": "retry"}', OK_CHECK], {"verdict": "ok"}, None),
    # a fallback: its cause (the relaunch before) in failed_check, its own check in resume_check
    (['{"fault": "resume_failed", "action": "fallback", "failed_check": %s}' % json.dumps(FAILED), OK_CHECK],
     {"verdict": "ok"}, FAILED),
    (['{"fault": "resume_failed", "action": "fallback", "failed_check": %s}' % json.dumps(FAILED)], None, FAILED),
    # a file written before failed_check existed: the cause was in resume_check, and is kept
    (['{"fault": "resume_failed", "action": "fallback", "resume_check": %s}' % json.dumps(FAILED), OK_CHECK],
     {"verdict": "ok"}, FAILED),
    # another fault's record is never given a failed_check
    (['{"fault": "stall", "action": "retry", "resume_check": {"verdict": "ok"}}', OK_CHECK], {"verdict": "ok"}, None),
])
def test_parse_resume_checks(lines, resume_check, failed_check):
    records, bad = _incident.parse(lines)
    assert (len(records), bad) == (1, 0)
    assert records[0].get("resume_check") == resume_check
    assert records[0].get("failed_check") == failed_check


def test_append_read_and_summary(tmp_path):
    path = str(tmp_path / "sub" / "incidents.jsonl")
    assert _incident.read(path) == ([], 0)
    _incident.append(path, _incident.make_record("t1", FAULT, DECISION, 15, 10))
    _incident.append(path, {"event": "resumed", "at": "t2", "iteration": 11, "seconds": 30.5})
    _incident.append(path, _incident.make_record("t3", {"fault": "nonfinite_loss", "kind": "nonfinite"},
                                                 {"action": "stop", "nodes": ["node1"]}, 22, None))
    records, bad = _incident.read(path)
    got = _incident.summary(records, bad)
    assert got["incidents"] == 2 and got["iterations_lost"] == 5 and got["stopped"] is True
    assert got["by_fault"] == {"node_unreachable": 1, "nonfinite_loss": 1}
    assert records[0]["seconds_to_resume"] == 30.5


@pytest.mark.parametrize("records, expected", [
    ([], ['megatron_supervisor_up{job="gpt"} 1', 'megatron_supervisor_iterations_lost_total{job="gpt"} 0',
          'megatron_supervisor_stopped{job="gpt"} 0']),
    ([{"fault": "stall", "action": "retry", "iterations_lost": 3}] * 2,
     ['megatron_supervisor_incidents_total{job="gpt",fault="stall",action="retry"} 2',
      'megatron_supervisor_iterations_lost_total{job="gpt"} 6']),
    ([{"fault": 'we"ird', "action": "stop"}],
     ['megatron_supervisor_incidents_total{job="gpt",fault="we\\"ird",action="stop"} 1',
      'megatron_supervisor_stopped{job="gpt"} 1']),
])
def test_prometheus_text(records, expected):
    text = _incident.prometheus_text(records, "gpt")
    for line in expected:
        assert line in text.splitlines()
    assert text.endswith("\n")


def test_write_textfile_is_atomic_and_readable(tmp_path):
    _incident.write_textfile(str(tmp_path), "megatron_supervisor.prom", "a 1\n")
    _incident.write_textfile(str(tmp_path), "megatron_supervisor.prom", "a 2\n")
    assert os.listdir(str(tmp_path)) == ["megatron_supervisor.prom"]
    assert (tmp_path / "megatron_supervisor.prom").read_text() == "a 2\n"
    assert oct(os.stat(str(tmp_path / "megatron_supervisor.prom")).st_mode & 0o777) == "0o644"


def _rec(**over):
    rec = {"fault": "rank_exit", "action": "retry", "iterations_lost": 0}
    rec.update(over)
    return rec


@pytest.mark.parametrize("records, wall, step, expected", [
    # No incident: everything productive.
    ([], 1000.0, None, {"ettr": 1.0, "downtime_s": 0.0, "lost_work_s": 0.0, "productive_s": 1000.0}),
    # One incident: 20 s unseen, 80 s to the first new iteration, 5 iterations of 2 s trained again.
    ([_rec(seconds_to_detect=20, seconds_to_resume=80, iterations_lost=5, iteration_seconds=2.0)], 1000.0, None,
     {"ettr": 0.89, "downtime_s": 100.0, "lost_work_s": 10.0, "productive_s": 890.0,
      "mean_seconds_to_detect": 20.0, "mean_seconds_to_resume": 80.0}),
    # The job's measured iteration time wins over the record's; a stop without resume adds only detection.
    ([_rec(seconds_to_detect=10, iterations_lost=4, iteration_seconds=9.0), _rec(action="stop", seconds_to_detect=30)],
     400.0, 5.0, {"ettr": 0.85, "downtime_s": 40.0, "lost_work_s": 20.0, "iterations_lost": 4,
                  "mean_seconds_to_resume": None}),
    # Down longer than the wall time (clocks): never below zero.
    ([_rec(seconds_to_resume=500)], 100.0, None, {"ettr": 0.0, "productive_s": 0.0}),
])
def test_goodput_ledger(records, wall, step, expected):
    got = _incident.ledger(records, wall, step)
    assert {key: got[key] for key in expected} == expected


def test_goodput_needs_a_wall_time_and_the_watching_event_is_not_an_incident():
    assert _incident.ledger([], None) is None and _incident.ledger([], 0) is None
    lines = ['{"event": "watching", "at": "t0", "epoch": 1000.0}', '{"fault": "rank_exit", "action": "retry"}',
             '{"event": "resumed", "at": "t1", "seconds": 42}', '{"event": "watching", "epoch": 5.0}']
    records, bad = _incident.parse(lines)
    assert bad == 0 and len(records) == 1 and records[0]["seconds_to_resume"] == 42
    assert _incident.watching_since(lines) == 1000.0 and _incident.watching_since(["not json"]) is None


def test_goodput_metrics():
    text = _incident.prometheus_text([], "gpt", goodput=_incident.ledger([], 600.0))
    assert 'megatron_supervisor_ettr{job="gpt"} 1.0' in text
    assert 'megatron_supervisor_wall_seconds{job="gpt"} 600.0' in text
    assert "ettr" not in _incident.prometheus_text([], "gpt")
