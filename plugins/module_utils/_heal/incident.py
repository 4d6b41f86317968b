# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The incident record of the supervisor: one JSON line per incident on the head node, its
summary for status.yml's report, and the Prometheus textfile the monitoring role's
node_exporter publishes (--collector.textfile.directory, monitoring_node_exporter_textfile_dir).

One line: {"at", "fault", "kind", "nodes", "evidence", "action", "reason", "job_nodes" (after),
"iteration" (the last logged before the fault), "resumed_step" (the tag resumed from),
"iterations_lost", "converted" (the universal tag, or null), "resumed_at" (first new
iteration, filled by a later line with "event": "resumed")}.

Standard library only, Python 3.6+ (no Ansible imports, no annotations): the supervisor runs it on
the head node with the system python.
"""
import json
import os
import tempfile

METRIC_PREFIX = "megatron_supervisor_"
RESUMED = "resumed"


def iterations_lost(last_iteration, resumed_step):
    """Iterations trained and then lost: the last logged iteration minus the step of the tag
    resumed from (0 when either is unknown or nothing was lost)."""
    if last_iteration is None or resumed_step is None:
        return 0
    return max(0, int(last_iteration) - int(resumed_step))


def make_record(at, fault, decision, last_iteration=None, resumed_step=None, converted=None):
    """One incident line from classify()'s fault and decide()'s decision (plugins/module_utils/_heal/policy.py)."""
    return {
        "at": at,
        "fault": fault.get("fault"),
        "kind": fault.get("kind"),
        "nodes": list(fault.get("nodes") or []),
        "evidence": fault.get("evidence", ""),
        "action": decision.get("action"),
        "reason": decision.get("reason", ""),
        "removed": list(decision.get("removed") or []),
        "added": list(decision.get("added") or []),
        "job_nodes": list(decision.get("nodes") or []),
        "iteration": last_iteration,
        "resumed_step": resumed_step,
        "iterations_lost": iterations_lost(last_iteration, resumed_step),
        "converted": converted,
    }


def append(path, record):
    """Append one JSON line (the file and its directory are created when missing)."""
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        os.makedirs(directory)
    with open(path, "a") as handle:
        handle.write(json.dumps(record, sort_keys=True) + "\n")


def parse(lines):
    """Incident records and resume events from JSON lines; returns (records, bad_line_count).
    A ``resumed`` event fills ``resumed_at`` and ``seconds_to_resume`` of the incident before it."""
    records = []
    bad = 0
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            bad += 1
            continue
        if not isinstance(entry, dict):
            bad += 1
            continue
        if entry.get("event") == RESUMED:
            if records:
                records[-1]["resumed_at"] = entry.get("at")
                records[-1]["resumed_iteration"] = entry.get("iteration")
                if entry.get("seconds") is not None:
                    records[-1]["seconds_to_resume"] = entry.get("seconds")
            continue
        records.append(entry)
    return records, bad


def read(path):
    """parse() of the file at ``path``; ([], 0) when it does not exist."""
    if not os.path.exists(path):
        return [], 0
    with open(path) as handle:
        return parse(handle)


def summary(records, bad=0, last=5):
    """What status.yml reports: counts by fault and action, iterations lost, the last incidents."""
    by_fault = {}
    by_action = {}
    for rec in records:
        by_fault[rec.get("fault")] = by_fault.get(rec.get("fault"), 0) + 1
        by_action[rec.get("action")] = by_action.get(rec.get("action"), 0) + 1
    return {
        "incidents": len(records),
        "by_fault": by_fault,
        "by_action": by_action,
        "iterations_lost": sum(int(r.get("iterations_lost") or 0) for r in records),
        "unreadable_lines": bad,
        "last": list(records[-last:]) if last else [],
        "stopped": bool(records) and records[-1].get("action") == "stop",
    }


def _label(value):
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def prometheus_text(records, job, up=True):
    """The textfile collector's content (Prometheus exposition format 0.0.4)."""
    job = _label(job)
    counts = {}
    for rec in records:
        key = (rec.get("fault") or "unknown", rec.get("action") or "unknown")
        counts[key] = counts.get(key, 0) + 1
    lines = [
        "# HELP %sup 1 while the supervisor runs its loop." % METRIC_PREFIX,
        "# TYPE %sup gauge" % METRIC_PREFIX,
        '%sup{job="%s"} %d' % (METRIC_PREFIX, job, 1 if up else 0),
        "# HELP %sincidents_total Incidents handled, by fault and action." % METRIC_PREFIX,
        "# TYPE %sincidents_total counter" % METRIC_PREFIX,
    ]
    for (fault, action), count in sorted(counts.items()):
        lines.append('%sincidents_total{job="%s",fault="%s",action="%s"} %d'
                     % (METRIC_PREFIX, job, _label(fault), _label(action), count))
    lost = sum(int(r.get("iterations_lost") or 0) for r in records)
    lines += [
        "# HELP %siterations_lost_total Iterations trained and lost to resumes from older checkpoints." % METRIC_PREFIX,
        "# TYPE %siterations_lost_total counter" % METRIC_PREFIX,
        '%siterations_lost_total{job="%s"} %d' % (METRIC_PREFIX, job, lost),
        "# HELP %sstopped 1 when the policy gave up (the last incident's action was stop)." % METRIC_PREFIX,
        "# TYPE %sstopped gauge" % METRIC_PREFIX,
        '%sstopped{job="%s"} %d' % (METRIC_PREFIX, job, 1 if records and records[-1].get("action") == "stop" else 0),
    ]
    return "\n".join(lines) + "\n"


def write_textfile(directory, name, text):
    """Write atomically (temp file + rename): node_exporter never reads half a file."""
    handle, tmp = tempfile.mkstemp(prefix=".%s." % name, dir=directory)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
        os.chmod(tmp, 0o644)
        os.rename(tmp, os.path.join(directory, name))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
