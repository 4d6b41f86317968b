# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The incident record of the supervisor: one JSON line per incident on the head node, its
summary for status.yml's report, and the Prometheus textfile the monitoring role's
node_exporter publishes (--collector.textfile.directory, monitoring_node_exporter_textfile_dir).

One line: {"at", "fault", "kind", "nodes", "evidence", "action", "reason", "job_nodes" (after),
"iteration" (the last logged before the fault), "resumed_step" (the tag resumed from),
"iterations_lost", "seconds_to_detect" (the last iteration to the detection), "iteration_seconds"
(the job's recent iteration time), "converted" (the universal tag, or null), "resumed_at" (first new
iteration, filled by a later line with "event": "resumed"), "resume_check" (the checked
verdict, _heal.resume.judge, on this incident's relaunch, filled by a later line with "event":
"resume_checked"), and on a resume_failed incident "failed_check" (the verdict on the relaunch
before it, which caused it)}.

Standard library only, Python 3.6+ (no Ansible imports, no annotations): the supervisor runs it on
the head node with the system python.
"""
import json
import os
import tempfile

METRIC_PREFIX = "megatron_supervisor_"
RESUMED = "resumed"
RESUME_CHECKED = "resume_checked"
# The fault of an incident caused by a failed checked resume (policy.RESUME_FAILED; not imported:
# this module stands alone).
RESUME_FAILED_FAULT = "resume_failed"
# A supervisor restarted in the middle of a recovery (killed after it decided, before the relaunch
# was done) finished it: ``how`` is "relaunched" (it launched the job itself) or "adopted" (the
# killed one had launched it already).
RECOVERY_FINISHED = "recovery_finished"
# The first line a supervisor writes for a job: when it began watching (the goodput ledger's
# wall time counts from there, across restarts of the supervisor).
WATCHING = "watching"


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


# The incident file holds decisions and evidence, no credential; status.yml and the operators read
# it. Its mode is stated, not left to the umask of whoever runs the supervisor.
INCIDENT_FILE_MODE = 0o644


def append(path, record):
    """Append one JSON line (the file and its directory are created when missing, with
    INCIDENT_FILE_MODE and 0755)."""
    directory = os.path.dirname(path)
    if directory and not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    handle = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, INCIDENT_FILE_MODE)
    with os.fdopen(handle, "a") as out:
        out.write(json.dumps(record, sort_keys=True) + "\n")


def parse(lines):
    """Incident records and resume events from JSON lines; returns (records, bad_line_count).
    A ``resumed`` event fills ``resumed_at`` and ``seconds_to_resume`` of the incident before it,
    ``resume_checked`` its ``resume_check``, ``recovery_finished`` its ``recovery_finished``."""
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
        if entry.get("event") == RESUME_CHECKED:
            if records:
                last = records[-1]
                # Files written before "failed_check" kept a fallback's cause in "resume_check".
                if last.get("fault") == RESUME_FAILED_FAULT and "failed_check" not in last and last.get("resume_check"):
                    last["failed_check"] = last["resume_check"]
                last["resume_check"] = entry.get("check")
            continue
        if entry.get("event") == RECOVERY_FINISHED:
            if records:
                records[-1]["recovery_finished"] = entry.get("how")
            continue
        if entry.get("event"):
            continue  # WATCHING and events of later versions: not incidents
        records.append(entry)
    return records, bad


def watching_since(lines):
    """The epoch seconds of the first WATCHING event, or None."""
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == WATCHING and entry.get("epoch") is not None:
            return float(entry["epoch"])
    return None


def ledger(records, wall_seconds, iteration_seconds=None):
    """The goodput ledger: of the wall time since the supervisor began watching, what was lost to
    each incident (from the last iteration before it to its detection, then to the first new
    iteration after the relaunch) and to iterations trained again (iterations_lost x the
    iteration time), and the rest as productive time; ETTR = productive / wall (ByteDance's
    ByteRobust reports 97%, Meta above 90% for Llama 3 on 16K GPUs). None without a wall time."""
    if not wall_seconds or wall_seconds <= 0:
        return None
    detect = [float(r["seconds_to_detect"]) for r in records if r.get("seconds_to_detect") is not None]
    resume = [float(r["seconds_to_resume"]) for r in records if r.get("seconds_to_resume") is not None]
    lost_iterations = sum(int(r.get("iterations_lost") or 0) for r in records)
    step = iteration_seconds
    if step is None:
        steps = [float(r["iteration_seconds"]) for r in records if r.get("iteration_seconds")]
        step = steps[-1] if steps else None
    lost_work = lost_iterations * step if step else 0.0
    downtime = sum(detect) + sum(resume)
    productive = max(0.0, float(wall_seconds) - downtime - lost_work)
    return {
        "wall_s": round(float(wall_seconds), 1),
        "downtime_s": round(downtime, 1),
        "lost_work_s": round(lost_work, 1),
        "productive_s": round(productive, 1),
        "ettr": round(productive / float(wall_seconds), 4),
        "incidents": len(records),
        "iterations_lost": lost_iterations,
        "mean_seconds_to_detect": round(sum(detect) / len(detect), 1) if detect else None,
        "mean_seconds_to_resume": round(sum(resume) / len(resume), 1) if resume else None,
    }


def read(path):
    """parse() of the file at ``path``; ([], 0) when it does not exist."""
    if not os.path.exists(path):
        return [], 0
    with open(path) as handle:
        return parse(handle)


def summary(records, bad=0, last=5, goodput=None):
    """What status.yml reports: counts by fault and action, iterations lost, the last incidents,
    and the goodput ledger when given."""
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
        "goodput": goodput,
    }


def _label(value):
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ")


def prometheus_text(records, job, up=True, goodput=None):
    """The textfile collector's content (Prometheus exposition format 0.0.4); ``goodput`` is a
    ledger() result."""
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
    if goodput:
        for key, name, help_text in (
                ("ettr", "ettr", "Effective training time ratio: productive time over wall time since watching."),
                ("wall_s", "wall_seconds", "Seconds since the supervisor began watching the job."),
                ("downtime_s", "downtime_seconds", "Seconds from the last iteration before each incident to the first after it."),
                ("lost_work_s", "lost_work_seconds", "Seconds of iterations trained again after resumes from older tags.")):
            lines += ["# HELP %s%s %s" % (METRIC_PREFIX, name, help_text), "# TYPE %s%s gauge" % (METRIC_PREFIX, name),
                      '%s%s{job="%s"} %s' % (METRIC_PREFIX, name, job, goodput[key])]
    return "\n".join(lines) + "\n"


def write_textfile(directory, name, text, mode=0o644):
    """Write atomically (temp file + rename): node_exporter never reads half a file, and the
    supervisor's recovery journal is whole after a kill; synced first, so a crash of the host
    cannot leave the new name on an empty file. ``mode``: 0644 for node_exporter's textfiles,
    0600 for the supervisor's own files; the file is never readable wider than that, even for
    the moment before the rename (mkstemp makes it 0600)."""
    handle, tmp = tempfile.mkstemp(prefix=".%s." % name, dir=directory)
    try:
        with os.fdopen(handle, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.rename(tmp, os.path.join(directory, name))
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
