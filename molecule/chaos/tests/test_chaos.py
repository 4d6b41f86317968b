# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The supervisor on Docker nodes, as deployed by playbooks/supervise.yml: the burn-in runs on
three nodes (one CPU rank each), faults are injected during training, and nothing else is done by
hand. The supervisor service on node1 sees each fault, stops the ranks, decides, and relaunches
burnin.yml from node1 as the training user.

0. Under the Slurm backend (the burn-in as a Slurm job): SIGKILL of the rank on node2; the
   supervisor cancels the job, and resubmits it, pinned to the same nodes, from the newest tag.

Then one job under pdsh, the faults one after the other:

1. A NaN loss: the first launch carries the burn-in's test-only injection
   (MEGATRON_DS_BURNIN_NAN_AT_STEP, through megatron_job_env), its loss turns NaN at step 43, and
   the job is rolled back to global_step40; the relaunch (the supervisor's own job variables) runs
   past step 43 with finite losses.
2. SIGKILL of the rank on node2: retried on the same three nodes from the newest tag.
3. A hang, SIGSTOP of the rank on node3: no rank exits and the log stops; after the stall limit
   (the scenario's policy: stall_min 30 s, no save allowance) the stall is retried, node3 a
   suspect.
4. The newest tag cut short while the job is down: rank 0 SIGKILLed one or two iterations after a
   save and that save's first optimizer shard halved at once; the supervisor skips the damaged tag
   and resumes from the complete one before it.
5. The disk full during a save: rank 0's two files of a tag three saves ahead made links to
   /dev/full, so that its save there fails with ENOSPC; the supervisor resumes from the complete
   tag before it, not the partial one. Once it has decided, the space comes back (the links are
   removed) and the relaunch saves that tag again.
6. Two faults within one save interval: the rank on node3 SIGKILLed, then rank 0 as soon as the
   relaunch logs its first iteration; both retried from the same tag (seven incidents so far), the
   second losing less than a save interval, its resume still checked against the losses logged
   before that tag.
7. node3's container stopped for good: node3 excluded, the job re-planned on two nodes (DP 3 -> 2,
   gradient accumulation 2 -> 3, global batch 6 kept), the tag converted to a universal
   checkpoint and resumed with --universal-checkpoint; the loss goes on from the checkpoint's
   value, within the noise of the three-node run at the same iterations.
8. During that recovery, once the supervisor has decided and converted and is relaunching, the
   supervisor itself is SIGKILLed: systemd restarts it, and it finishes the recovery exactly once
   (one incident, one recovery_finished line, --universal-checkpoint kept).

The scenario's policy lets one job take all of these: the retries are counted over the whole job
(max_retries 8), and a node blamed up to five times stays a suspect (node_fault_after 6): when a
rank dies, its CPU peers (gloo) exit within milliseconds, and a poll that finds one of their nodes
short as well blames it too (seen here: the second kill of the pair blamed node1 and node3).

Figures (seconds from the fault to the first new iteration, iterations lost, the checked
resume's verdict, the losses compared) are printed and written to $CHAOS_REPORT when set.
"""
from __future__ import annotations

import json
import math
import os
import re
import shlex
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any, Dict, List, Tuple

import testinfra

from ansible_collections.megatron_ds.cluster.tests.support.ansible_run import ansible_env, ansible_playbook_argv
from ansible_collections.megatron_ds.cluster.tests.support.polling import wait_for

PROJECT_DIR = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", Path(__file__).resolve().parents[3]))
INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE", "")
LOG_DIR = "/opt/megatron/jobs/chaos/logs"
BURNIN_LOG = LOG_DIR + "/burnin.log"
INCIDENTS = LOG_DIR + "/incidents.jsonl"
RECOVERY_JOURNAL = LOG_DIR + "/supervisor-recovery.json"
METRICS = LOG_DIR + "/megatron_supervisor.prom"
CKPT = "/shared/chaos/checkpoints"
SAVE_INTERVAL = 5
RANK_PATTERN = r"python[0-9.]* -u ([^ ]*/)?burnin_gpt\.py( |$)"
# The burn-in's .deepspeed_env, as the launch copies it beside the script (burnin.sh reads it).
BURNIN_DIR = "/opt/megatron/jobs/chaos/burnin"
# The burn-in's test-only fault injection (roles/megatron_launch/files/burnin_gpt.py): the loss of
# that step is NaN. Not on a save step: the rollback then goes back one whole interval.
NAN_ENV = "MEGATRON_DS_BURNIN_NAN_AT_STEP"
NAN_STEP = 43
# Each fault's record and figures, written to $CHAOS_REPORT by the last test.
FIGURES: List[Dict[str, Any]] = []


def node(name: str):
    return testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY))


def head_text(path: str) -> str:
    host = node("node1")
    return host.file(path).content_string if host.file(path).exists else ""


def launches(log: str = BURNIN_LOG) -> List[List[Tuple[int, float]]]:
    """(iteration, loss) of every launch in a burn-in log, one list per start line."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import logs as _launch_logs
    return _launch_logs.launch_losses(head_text(log).splitlines())


def last_iteration(log: str = BURNIN_LOG) -> int:
    runs = launches(log)
    return runs[-1][-1][0] if runs and runs[-1] else 0


def incidents() -> List[Dict[str, Any]]:
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import incident as _incident
    return _incident.parse(head_text(INCIDENTS).splitlines())[0]


def resumed(count: int):
    records = incidents()
    return records[count - 1] if len(records) >= count and records[count - 1].get("resumed_at") else None


def ranks(name: str) -> List[str]:
    return [l for l in node(name).run("pgrep -f %s", RANK_PATTERN).stdout.split() if l.strip()]


def diagnostics() -> str:
    journal = node("node1").run("journalctl -u megatron-supervisor@chaos --no-pager -n 60").stdout
    return "incidents: %s\nlog tail:\n%s\njournal:\n%s" % (
        incidents(), "\n".join(head_text(BURNIN_LOG).splitlines()[-30:]), journal)


def wait(predicate, what: str, deadline: float = 600.0):
    try:
        return wait_for(predicate, what, deadline=deadline, step=2.0)
    except AssertionError as err:
        raise AssertionError("%s\n%s" % (err, diagnostics())) from None


def check_resume(record: Dict[str, Any], log: str = BURNIN_LOG) -> None:
    """The launch after the incident started from the tag the supervisor chose, and lost at most
    what the policy allows."""
    step = record["resumed_step"]
    assert re.search(r"BURNIN resumed from \S+global_step%d(_universal)?\S* at step %d" % (step, step),
                     head_text(log)), (step, diagnostics())
    assert launches(log)[-1][0][0] == step + 1
    assert record["iterations_lost"] == max(0, (record["iteration"] or step) - step)
    if record["action"] != "rollback":  # a rollback also drops the NaN iterations run before it was seen
        assert record["iterations_lost"] <= SAVE_INTERVAL * 2  # a damaged newest tag costs one more interval


def loss_continuity(runs: List[List[Tuple[int, float]]], step: int, window: int = 5) -> Dict[str, Any]:
    """The losses after the resume against the run before the fault: at the same iterations where
    that run logged them, and against its trend, a straight line fitted to its last 20 losses up
    to the tag and read at the resumed iterations (the burn-in's loss falls in steps, one per pass
    over its data, so a plain mean before the tag lags). The noise is the spread around that line."""
    # a NaN logged by a run rolled back is no loss of the job's curve
    before = {i: loss for run in runs[:-1] for i, loss in run if math.isfinite(loss)}
    after = dict(runs[-1])
    recent = [(i, before[i]) for i in sorted(before) if i <= step][-20:]
    iterations, losses = [float(i) for i, _loss in recent], [loss for _i, loss in recent]
    fit = statistics.linear_regression(iterations, losses)
    noise = statistics.pstdev([loss - (fit.slope * i + fit.intercept) for i, loss in recent])
    resumed = sorted(after)[:window]
    same = [i for i in sorted(after) if i in before][:window]
    return {
        "first_loss_of_job": runs[0][0][1], "noise": round(noise, 4),
        "mean_before_tag": round(statistics.mean(losses[-window:]), 4),
        "trend_at_resume": round(statistics.mean(fit.slope * i + fit.intercept for i in resumed), 4),
        "mean_after_resume": round(statistics.mean(after[i] for i in resumed), 4),
        "same_iterations": same,
        "mean_same_before": round(statistics.mean(before[i] for i in same), 4) if same else None,
        "mean_same_after": round(statistics.mean(after[i] for i in same), 4) if same else None,
        "max_same_diff": round(max(abs(after[i] - before[i]) for i in same), 4) if same else None,
    }


def assert_continues(curve: Dict[str, Any], same_data: bool) -> None:
    """The loss went on from the checkpoint's value, within the noise of the run before the fault
    (its trend, and the iterations both logged), and not from scratch. ``same_data``: the same
    ranks resumed, so the iterations both runs logged must match to print precision."""
    tolerance = max(4 * curve["noise"], 0.02 * curve["trend_at_resume"])
    assert abs(curve["mean_after_resume"] - curve["trend_at_resume"]) <= tolerance, curve
    if curve["same_iterations"]:
        assert abs(curve["mean_same_after"] - curve["mean_same_before"]) <= tolerance, curve
        if same_data:
            assert curve["max_same_diff"] <= 2e-3, curve
    moved = curve["first_loss_of_job"] - curve["mean_before_tag"]
    assert moved > 5 * curve["noise"], ("the loss had not fallen before the fault: nothing to tell a resume from a "
                                        "fresh start", curve)
    assert curve["first_loss_of_job"] - curve["mean_after_resume"] > moved / 2, curve


def test_supervisor_service_runs():
    service = node("node1").service("megatron-supervisor@chaos")
    assert service.is_enabled
    fresh_start()  # a verify run before this one stopped it at its end
    assert service.is_running
    # as the training user, with the collection it relaunches from
    assert node("node1").run("ps -o user= -C python3").stdout.split().count("megatron") >= 1
    assert node("node1").file("/opt/megatron/ansible/collections/ansible_collections/megatron_ds/cluster/playbooks/burnin.yml").exists


# molecule.yml's sentinel secrets, as they would appear in a file: the munge key raw and as the
# inventory gives it (base64), the receiver's URL and credential.
SECRETS = ["MOLECULE-SENTINEL-MUNGE-KEY", "TU9MRUNVTEUtU0VOVElORUwtTVVOR0UtS0VZ",
           "MOLECULE-SENTINEL-RECEIVER-URL", "MOLECULE-SENTINEL-RECEIVER-TOKEN"]
PRIVATE_FILES = [LOG_DIR + "/supervisor-inventory.json", LOG_DIR + "/supervisor-overrides.json", RECOVERY_JOURNAL]


def test_no_secret_is_readable_beyond_its_owner():
    """Every file on each node's own filesystem that others can read, scanned for the sentinels
    (find -xdev keeps out /proc, /sys and the shared volume); the munge key must be where munge
    reads it, 0400, and nowhere else readable; the supervisor's configuration holds none of them."""
    for name in ("node1", "node2", "node3"):
        _no_secret_readable(node(name), name)


def _no_secret_readable(host, name: str) -> None:
    patterns = " ".join("-e %s" % shlex.quote(s) for s in SECRETS)
    found = host.run("find / -xdev -type f -perm -o=r -size -8M -print0 2>/dev/null"
                     " | xargs -0 -r grep -lsF %s -- || true" % patterns)
    assert found.stdout.split() == [], found.stdout
    key = host.file("/etc/munge/munge.key")
    assert key.mode == 0o400 and key.user == "munge"
    assert "MOLECULE-SENTINEL-MUNGE-KEY" in host.run("head -c 64 /etc/munge/munge.key").stdout
    if name == "node1":
        config = host.file("/opt/megatron/supervisor/chaos.json")
        assert config.mode == 0o640 and config.user == "root"
        text = host.run("cat /opt/megatron/supervisor/chaos.json").stdout
        assert [s for s in SECRETS if s in text] == []
        assert "slurm_munge_key" not in text and "monitoring_alertmanager_receivers" not in text
        for path in PRIVATE_FILES:
            if host.file(path).exists:
                assert host.file(path).mode == 0o600, path


WEBHOOK = "http://127.0.0.1:9466/alerts"
TOKEN_FILE = "/opt/megatron/supervisor/chaos.webhook-token"
# A firing node-down alert for node3 in Alertmanager's webhook format: what a forger would post.
FORGED = json.dumps({"status": "firing", "alerts": [{"status": "firing", "labels": {
    "alertname": "MegatronNodeDown", "instance": "node3:9100"}}]})
POST = ("import sys, urllib.request, urllib.error\n"
        "headers = {'Content-Type': 'application/json'}\n"
        "if sys.argv[2]: headers['Authorization'] = sys.argv[2]\n"
        "req = urllib.request.Request(sys.argv[1], data=sys.argv[3].encode(), headers=headers, method='POST')\n"
        "try:\n    print(urllib.request.urlopen(req, timeout=10).status)\n"
        "except urllib.error.HTTPError as exc:\n    print(exc.code)\n")


def post_alert(header: str, body: str, user: str = "root") -> int:
    """The HTTP status the supervisor's webhook gives a POST made on node1 as ``user``."""
    host = node("node1")
    command = "python3 -c %s %s %s %s" % tuple(shlex.quote(a) for a in (POST, WEBHOOK, header, body))
    if user != "root":
        command = "runuser -u %s -- %s" % (user, command)
    out = host.run(command)
    assert out.rc == 0, out.stderr
    return int(out.stdout.strip())


def test_the_webhook_refuses_a_request_without_the_token():
    """Item 6 on the deployed supervisor: any local user reaches 127.0.0.1, so the webhook wants
    the role's token. Without it, or with a forged one, a firing MegatronNodeDown for node3 gets
    401 and nothing is acted on; the token file is the supervisor's alone (0600)."""
    head = node("node1")
    token_file = head.file(TOKEN_FILE)
    assert token_file.exists and token_file.mode == 0o600 and token_file.user == "megatron"
    wait(lambda: head.run("python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 9466), 2)'").rc == 0,
         "the webhook listening", 60)
    before = head_text(INCIDENTS)
    assert post_alert("", FORGED) == 401
    assert post_alert("Bearer forged-token", FORGED) == 401
    assert post_alert("", FORGED, user="nobody") == 401
    # the right token is taken (a resolved alert: accepted, nothing to act on)
    token = head.run("cat %s" % TOKEN_FILE).stdout.strip()
    resolved = json.dumps({"status": "resolved", "alerts": [{"status": "resolved", "labels": {
        "alertname": "MegatronNodeDown", "instance": "node3:9100"}}]})
    assert post_alert("Bearer " + token, resolved) == 200
    time.sleep(5)  # two polls
    assert head_text(INCIDENTS) == before, "a refused alert was acted on"
    assert head.service("megatron-supervisor@chaos").is_running


def running(name: str) -> bool:
    out = subprocess.run(["docker", "inspect", "--format", "{{.State.Running}}", name], capture_output=True, text=True,
                         check=False)
    return out.stdout.strip() == "true"


def stop_everything() -> None:
    """The supervisor first (so that it does not relaunch), then the job: a Slurm job cancelled,
    every launcher (deepspeed, pdsh) and rank of the training user killed on every node still up,
    twice 10 s apart (a relaunch in flight when the supervisor stopped starts its ranks late), and
    the job's state removed, so that a supervisor restarted later (converge's handler) finds no
    job to heal. A launcher left behind would write its exit line into the next launch's log."""
    head = node("node1")
    head.run("systemctl stop megatron-supervisor@chaos")
    head.run("scancel --user megatron")
    # a SECOND_KILL watcher left by a failed test would kill a rank of the next one
    subprocess.run(["docker", "exec", "node1", "pkill", "-f", "chaos-second-kill[.]json"], capture_output=True,
                   check=False, timeout=60)
    for _round in range(2):
        live = [n for n in ("node1", "node2", "node3") if running(n)]
        for name in live:
            node(name).run("pkill -KILL -u megatron -f 'deepspeed|pdsh|burnin_gpt'")
        wait(lambda: not any(ranks(n) for n in live) and head.run("pgrep -u megatron -f 'deepspeed|pdsh'").rc == 1
             and head.run("squeue --noheader --user megatron").stdout.strip() == "",
             "no rank, launcher or Slurm job left", 180)
        time.sleep(10)
    # the evidence first: the logs and incidents go to the scenario's ephemeral directory
    keep = Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/tmp")) / ("chaos-logs-%d" % time.time())
    subprocess.run(["docker", "cp", "node1:" + LOG_DIR, str(keep)], capture_output=True, check=False, timeout=120)
    head.run("rm -rf %s/* %s/burnin*.log %s %s/supervisor-*.json %s /opt/megatron/jobs/chaos/launch.json",
             CKPT, LOG_DIR, INCIDENTS, LOG_DIR, METRICS)


def fresh_start() -> None:
    """No job, no checkpoint, no incident, the supervisor started: each test from the start
    (molecule verify may also be run again on the same nodes)."""
    stop_everything()
    assert node("node1").run("systemctl start megatron-supervisor@chaos").rc == 0


def launch_record() -> Dict[str, Any]:
    return json.loads(head_text("/opt/megatron/jobs/chaos/launch.json") or "{}")


def burnin(extra: Dict[str, Any]) -> None:
    argv = ansible_playbook_argv(INVENTORY, PROJECT_DIR / "playbooks" / "burnin.yml", "-e", json.dumps(extra))
    rc = subprocess.run(argv, env=ansible_env(PROJECT_DIR), cwd=PROJECT_DIR, capture_output=True, text=True,
                        timeout=900, check=False)
    assert rc.returncode == 0, rc.stdout[-4000:] + rc.stderr[-2000:]


def test_slurm_backend_rank_kill_is_cancelled_and_resubmitted():
    fresh_start()
    burnin({"megatron_launch_backend": "slurm"})
    first = launch_record()
    assert first["backend"] == "slurm", first
    log = first["log_file"]
    wait(lambda: node("node1").file(CKPT + "/latest").exists and last_iteration(log) >= 2 * SAVE_INTERVAL,
         "two saved intervals of the Slurm job")
    t0 = time.monotonic()
    try:
        assert node("node2").run("pkill -KILL -f %s", RANK_PATTERN).rc == 0
        rec = dict(wait(lambda: resumed(1), "incident 1 under Slurm resumed"))
        rec["fault_to_new_iteration_s"] = round(time.monotonic() - t0, 1)
        second = launch_record()
        assert (rec["fault"], rec["action"], rec["job_nodes"]) == ("rank_exited", "retry", ["node1", "node2", "node3"]), rec
        # a new Slurm job, the first one gone from the queue, pinned to the same nodes
        assert second["backend"] == "slurm" and second["slurm_job_id"] != first["slurm_job_id"], second
        assert node("node1").run("squeue --noheader --jobs %s", first["slurm_job_id"]).stdout.strip() == ""
        overrides = json.loads(head_text(LOG_DIR + "/supervisor-overrides.json"))
        assert overrides == {"megatron_launch_backend": "slurm", "megatron_launch_slurm_pin_nodes": True}, overrides
        check_resume(rec, second["log_file"])
        FIGURES.append(dict(rec, backend="slurm"))
    finally:
        stop_everything()


def docker_exec(name: str, *argv: str, detach: bool = False) -> subprocess.CompletedProcess:
    """A command in a node's container as root, without Ansible's seconds per call: what injects
    a fault must land between two of the job's iterations."""
    return subprocess.run(["docker", "exec"] + (["-d"] if detach else []) + [name] + list(argv),
                          capture_output=True, text=True, timeout=900, check=False)


def latest_step() -> int:
    match = re.fullmatch(r"global_step(\d+)", head_text(CKPT + "/latest").strip())
    return int(match.group(1)) if match else 0


def new_iteration(count: int, launched: int) -> bool:
    """Incident ``count`` decided, and a launch after the first ``launched`` of the log has logged
    an iteration. The supervisor's own "resumed" line can come much later: it is written at its
    first poll after burnin.yml returns, and the playbook goes on for a while after the ranks start."""
    runs = launches()
    return len(incidents()) >= count and len(runs) > launched and bool(runs[-1])


def healed(count: int, what: str, t0: float, launched: int) -> Dict[str, Any]:
    """Incident ``count`` once the job logged its first new iteration, timed from ``t0`` (the
    injection, wall clock: a node's container shares this machine's), then once its checked resume
    has a verdict (three iterations later: the time is taken before waiting for it)."""
    wait(lambda: new_iteration(count, launched), "a new iteration after incident %d" % count, deadline=900.0)
    seconds = round(time.time() - t0, 1)
    rec = dict(wait(lambda: checked(count), "incident %d's resume checked" % count))
    rec.update(injected=what, fault_to_new_iteration_s=seconds, verdict=(rec.get("resume_check") or {}).get("verdict"))
    return rec


def checked(count: int):
    """Incident ``count`` once its checked resume has a verdict other than pending, or once a later
    incident came instead (a failed check is a record of its own)."""
    records = incidents()
    found = records[count - 1] if len(records) >= count else {}
    if len(records) > count or (found.get("resume_check") or {}).get("verdict") not in (None, "pending"):
        return found
    return None


# On node1, where rank 0 runs and its lines reach the log: once the newest tag is at least MIN
# and the log shows one or two iterations past it (the next save is three or more away, a few
# tenths of a second at this model's speed: the log is followed every 5 ms and the rank's pid is
# known beforehand), SIGKILL rank 0 and cut the tag's first optimizer shard to half, as a write
# that never finished. With rank 0 dead the others fail in their next collective, so nothing saves
# on the supervisor's SIGTERM and the damaged tag stays the newest while the job is down. Prints
# the tag's step and the last iteration seen.
DAMAGE_NEWEST_TAG = r"""
import os, re, signal, subprocess, sys, time
ckpt, log, pattern, minimum = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
pids = [int(p) for p in subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()]
assert pids, "no rank on this node"
with open(log, "rb") as handle:
    handle.seek(0, 2)
    tail, deadline = b"", time.time() + 600
    while time.time() < deadline:
        tail = (tail + handle.read())[-4096:]
        steps = re.findall(rb"BURNIN step=(\d+) ", tail)
        try:
            with open(os.path.join(ckpt, "latest")) as latest:
                tag = latest.read().strip()
        except OSError:
            tag = ""
        match = re.fullmatch(r"global_step(\d+)", tag)
        if steps and match and int(match.group(1)) >= minimum and 0 < int(steps[-1]) - int(match.group(1)) <= 2:
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            shard = os.path.join(ckpt, tag, "zero_pp_rank_0_mp_rank_00_optim_states.pt")
            os.truncate(shard, os.path.getsize(shard) // 2)
            print(match.group(1), int(steps[-1]))
            sys.exit(0)
        time.sleep(0.005)
sys.exit("no moment one or two iterations after a tag >= %d" % minimum)
"""

# As the training user on node1: the tag AHEAD steps past the newest one made in advance, its two
# files that rank 0 writes links to /dev/full, so that rank 0's save there fails as on a full
# disk (ENOSPC) while the ranks of the other nodes write theirs. Fails when the job got there
# first. Prints the tag's step.
FULL_AT_A_SAVE = r"""
import os, re, sys
ckpt, ahead = sys.argv[1], int(sys.argv[2])
with open(os.path.join(ckpt, "latest")) as handle:
    step = int(re.fullmatch(r"global_step(\d+)", handle.read().strip()).group(1))
tag = os.path.join(ckpt, "global_step%d" % (step + ahead))
os.mkdir(tag)
for name in ("mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"):
    os.symlink("/dev/full", os.path.join(tag, name))
print(step + ahead)
"""

# On node1, started before the first of two rank kills: once the supervisor has relaunched (the
# launch record's pid changes) and the new launch has logged its first iteration, SIGKILL rank 0,
# long before the next save (the rank's pid is found while it starts, the log followed every
# 5 ms). Writes {"at", "step"} (the last iteration seen) to its last argument.
SECOND_KILL = r"""
import json, os, re, signal, subprocess, sys, time
record, default_log, pattern, out = sys.argv[1:5]
def launch():
    try:
        with open(record) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return {}
first, deadline = launch().get("pid"), time.time() + 900
now = {}
while time.time() < deadline and not (now.get("pid") and now.get("pid") != first):
    time.sleep(0.05)
    now = launch()
pids, looked, tail = [], 0.0, b""
with open(now.get("log_file") or default_log, "rb") as handle:
    handle.seek(int(now.get("log_offset") or 0))
    while time.time() < deadline:
        tail = (tail + handle.read())[-4096:]
        steps = re.findall(rb"BURNIN step=(\d+) ", tail)
        if steps and pids:
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
            with open(out, "w") as handle_out:
                json.dump({"at": time.time(), "step": int(steps[-1])}, handle_out)
            break
        if not pids and time.time() - looked > 0.2:
            looked = time.time()
            pids = [int(p) for p in subprocess.run(["pgrep", "-f", pattern], capture_output=True,
                                                   text=True).stdout.split()]
        time.sleep(0.005)
"""


def test_faults_heal_without_a_person():
    figures = FIGURES
    fresh_start()
    head = node("node1")
    started = time.monotonic()
    # The first launch carries the burn-in's test-only NaN injection (tests/chaos passes the same
    # variable through chaos_launch.py): its loss turns NaN at NAN_STEP. That launch only: the
    # supervisor relaunches with the job variables it was deployed with, whose .deepspeed_env
    # lacks it.
    burnin({"megatron_job_env": {"CUDA_DEVICE_MAX_CONNECTIONS": "1", NAN_ENV: str(NAN_STEP)}})
    # far enough for the loss to have left its starting plateau (about 30 steps at this lr)
    wait(lambda: head.file(CKPT + "/latest").exists and last_iteration() >= 40, "40 iterations of the first launch")
    figures.append({"fault": "startup", "seconds": round(time.monotonic() - started, 1)})
    try:
        # 1. the loss NaN at NAN_STEP: rolled back to the newest tag saved before it (the save the
        #    NaN run makes on the supervisor's SIGTERM comes after the NaN and is skipped)
        wait(lambda: re.search(r"BURNIN step=%d loss=nan" % NAN_STEP, head_text(BURNIN_LOG)), "the NaN loss logged")
        rec = healed(1, "loss NaN at step %d (%s)" % (NAN_STEP, NAN_ENV), time.time(), len(launches()))
        assert (rec["fault"], rec["action"]) == ("nonfinite_loss", "rollback"), rec
        assert "NaN/inf at iteration %d" % NAN_STEP in rec["reason"], rec
        assert rec["resumed_step"] == (NAN_STEP - 1) // SAVE_INTERVAL * SAVE_INTERVAL, rec
        check_resume(rec)
        assert rec["verdict"] == "ok", rec
        figures.append(rec)
        # the relaunch goes past the NaN step with finite losses: the injection was used once
        wait(lambda: last_iteration() >= NAN_STEP + 2, "the relaunch past the NaN step")
        assert all(math.isfinite(loss) for _i, loss in launches()[-1]), launches()[-1]
        rendered = head_text(BURNIN_DIR + "/.deepspeed_env")
        assert "CUDA_DEVICE_MAX_CONNECTIONS=1" in rendered and NAN_ENV not in rendered, rendered

        # 2. SIGKILL of the rank on node2
        t0, launched = time.time(), len(launches())
        assert node("node2").run("pkill -KILL -f %s", RANK_PATTERN).rc == 0
        rec = healed(2, "SIGKILL of the rank on node2", t0, launched)
        assert (rec["fault"], rec["action"]) == ("rank_exited", "retry"), rec
        assert rec["verdict"] == "ok", rec
        check_resume(rec)
        # the same ranks and the same data position: the losses the run had logged past the tag
        wait(lambda: len(launches()[-1]) >= 10, "ten iterations after incident 2")
        rec["loss"] = curve = loss_continuity(launches(), rec["resumed_step"])
        assert_continues(curve, same_data=True)
        figures.append(rec)

        # 3. a hang: the rank on node3 SIGSTOPped. No rank exits and the log stops; the stall
        #    limit (stall_min, the scenario's policy) names node3, whose rank is in state T.
        t0, launched = time.time(), len(launches())
        assert docker_exec("node3", "pkill", "-STOP", "-f", RANK_PATTERN).returncode == 0
        rec = healed(3, "SIGSTOP of the rank on node3 (hang)", t0, launched)
        assert (rec["fault"], rec["action"], rec["nodes"]) == ("stall", "retry", ["node3"]), rec
        assert "stopped ranks on node3" in rec["evidence"], rec
        assert rec["verdict"] == "ok", rec
        check_resume(rec)
        figures.append(rec)

        # 4. the newest tag cut short while the job is down: rank 0 killed one or two iterations
        #    after a save, and that save's first optimizer shard halved at once. The supervisor
        #    must skip it and resume from the complete tag before it.
        launched = len(launches())
        proc = docker_exec("node1", "python3", "-c", DAMAGE_NEWEST_TAG, CKPT, BURNIN_LOG, RANK_PATTERN,
                           str(rec["resumed_step"] + 1))
        t0 = time.time()
        assert proc.returncode == 0, proc.stdout + proc.stderr
        damaged, seen = (int(x) for x in proc.stdout.split())
        rec = healed(4, "SIGKILL of rank 0 on node1 at step %d, global_step%d cut short" % (seen, damaged), t0,
                     launched)
        assert (rec["fault"], rec["action"]) == ("rank_exited", "retry"), rec
        assert damaged - SAVE_INTERVAL <= rec["resumed_step"] < damaged, (damaged, rec)
        assert rec["verdict"] == "ok", rec
        check_resume(rec)
        figures.append(dict(rec, damaged="global_step%d" % damaged))

        # 5. the disk full during a save: rank 0's files of a coming tag lead to /dev/full, and its
        #    save there fails with ENOSPC. The supervisor must resume from the complete tag before
        #    it, not from the partial one; the space comes back (the links go) once it has decided,
        #    and the relaunch saves that tag again.
        wait(lambda: latest_step() > rec["resumed_step"], "a tag saved after incident 4")
        proc = docker_exec("node1", "runuser", "-u", "megatron", "--", "python3", "-c", FULL_AT_A_SAVE, CKPT,
                           str(3 * SAVE_INTERVAL))
        assert proc.returncode == 0, proc.stdout + proc.stderr
        full = int(proc.stdout)
        launched = len(launches())
        wait(lambda: last_iteration() >= full, "the job at global_step%d" % full)
        t0 = time.time()
        wait(lambda: len(incidents()) >= 5, "incident 5 (the failed save) decided")
        assert docker_exec("node1", "rm", "-rf", "%s/global_step%d" % (CKPT, full)).returncode == 0
        rec = healed(5, "rank 0's save of global_step%d failing with ENOSPC (/dev/full)" % full, t0, launched)
        assert rec["fault"] in ("save_failed", "rank_exited") and rec["action"] == "retry", rec
        assert rec["resumed_step"] == full - SAVE_INTERVAL and rec["iteration"] == full, (full, rec)
        assert rec["verdict"] == "ok", rec
        check_resume(rec)
        wait(lambda: latest_step() >= full, "global_step%d saved by the relaunch" % full)
        figures.append(dict(rec, save_failed_at="global_step%d" % full))

        # 6. two faults within one save interval: the rank on node3 SIGKILLed, and rank 0 on node1
        #    SIGKILLed as soon as the relaunch logs its first iteration (SECOND_KILL, on node1).
        #    Both are retried from the same tag: the second fault costs no iteration beyond it.
        wait(lambda: latest_step() > rec["resumed_step"], "a tag saved after incident 5")
        marker = "/tmp/chaos-second-kill.json"
        docker_exec("node1", "rm", "-f", marker)
        assert docker_exec("node1", "python3", "-c", SECOND_KILL, "/opt/megatron/jobs/chaos/launch.json", BURNIN_LOG,
                           RANK_PATTERN, marker, detach=True).returncode == 0
        t0, launched = time.time(), len(launches())
        assert docker_exec("node3", "pkill", "-KILL", "-f", RANK_PATTERN).returncode == 0
        wait(lambda: new_iteration(6, launched), "a new iteration after incident 6", deadline=900.0)
        seconds = round(time.time() - t0, 1)
        first = dict(wait(lambda: resumed(6), "incident 6 resumed", deadline=900.0))
        first.update(injected="SIGKILL of the rank on node3", fault_to_new_iteration_s=seconds)
        second_kill = json.loads(wait(lambda: head_text(marker), "the second kill, after the relaunch"))
        assert second_kill["step"] < first["resumed_step"] + SAVE_INTERVAL, (second_kill, first)
        rec = healed(7, "SIGKILL of rank 0 on node1 at step %d, %d iteration(s) after the relaunch"
                     % (second_kill["step"], second_kill["step"] - first["resumed_step"]), second_kill["at"], launched + 1)
        first["verdict"] = (incidents()[5].get("resume_check") or {}).get("verdict")
        assert len(incidents()) == 7, incidents()
        for one in (first, rec):
            assert (one["fault"], one["action"]) == ("rank_exited", "retry"), one
        assert rec["resumed_step"] == first["resumed_step"], (first, rec)
        assert rec["iterations_lost"] < SAVE_INTERVAL, rec
        check_resume(rec)
        # The second resume is judged against the loss the job logged before the tag (the run the
        #    first fault interrupted), not only by its first iteration.
        assert rec["verdict"] == "ok" and rec["resume_check"]["noise"] is not None, rec["resume_check"]
        assert any(row["source"] == "same_iteration" for row in rec["resume_check"]["compared"]), rec["resume_check"]
        figures.extend([first, rec])
        metrics = head_text(METRICS)
        for fault, action, total in (("nonfinite_loss", "rollback", 1), ("stall", "retry", 1)):
            assert 'megatron_supervisor_incidents_total{job="chaos",fault="%s",action="%s"} %d' % (
                fault, action, total) in metrics, metrics
        # the failed save is a save_failed or a rank_exited, after which of its lines the poll saw first
        retried = sum(int(m) for m in re.findall(r'job="chaos",fault="(?:rank_exited|save_failed)",action="retry"} (\d+)',
                                                 metrics))
        assert retried == 5, metrics

        # 7. node3 lost for good: its container stopped
        wait(lambda: len(ranks("node3")) == 1 and last_iteration() >= rec["resumed_step"] + 2 * SAVE_INTERVAL,
             "two saved intervals after incident 7")
        t0, launched = time.monotonic(), len(launches())
        subprocess.run(["docker", "stop", "--time", "0", "node3"], check=True, capture_output=True, timeout=120)
        # 8. the supervisor itself SIGKILLed in the middle of that recovery: it has decided and
        #    converted (its recovery journal is on disk) and is relaunching. systemd restarts it
        #    (Restart=on-failure), and it finishes the recovery exactly once.
        wait(lambda: head.file(RECOVERY_JOURNAL).exists, "the recovery journal of incident 8", deadline=600.0)
        assert head.run("systemctl kill --signal=SIGKILL megatron-supervisor@chaos").rc == 0
        killed = time.monotonic()
        wait(lambda: new_iteration(8, launched), "a new iteration after incident 8", deadline=900.0)
        seconds = {"fault_to_new_iteration_s": round(time.monotonic() - t0, 1),
                   "supervisor_kill_to_new_iteration_s": round(time.monotonic() - killed, 1)}
        rec = dict(wait(lambda: resumed(8), "incident 8 resumed", deadline=900.0), **seconds)
        rec["injected"] = "node3's container stopped, then the supervisor SIGKILLed while it relaunched"
        assert (rec["fault"], rec["action"], rec["removed"]) == ("node_unreachable", "exclude", ["node3"]), rec
        assert rec.get("recovery_finished") in ("relaunched", "adopted"), rec
        assert len(incidents()) == 8, incidents()  # the loss decided once, not again after the restart
        assert head_text(INCIDENTS).count('"recovery_finished"') == 1
        assert not head.file(RECOVERY_JOURNAL).exists
        assert int(head.run("systemctl show -p NRestarts --value megatron-supervisor@chaos").stdout.strip() or 0) >= 1
        assert rec["converted"] == "global_step%d_universal" % rec["resumed_step"], rec
        assert "DP 2, micro 1 x accumulation 3 x DP 2 = global 6" in rec["reason"], rec
        check_resume(rec)
        # let the two-node job log a few iterations, then judge the loss curve
        wait(lambda: len(launches()[-1]) >= 10, "ten iterations on two nodes")
        log = head_text(BURNIN_LOG)
        assert "world 2, micro 1 x grad_acc 3" in log.split("=== megatron_launch")[-1], diagnostics()
        rec["loss"] = curve = loss_continuity(launches(), rec["resumed_step"])
        rec["verdict"] = (incidents()[7].get("resume_check") or {}).get("verdict")
        figures.append(rec)
        assert_continues(curve, same_data=False)
        metrics = head_text(METRICS)
        assert 'megatron_supervisor_incidents_total{job="chaos",fault="node_unreachable",action="exclude"} 1' in metrics
        inventory = json.loads(head_text(LOG_DIR + "/supervisor-inventory.json"))["all"]["children"]
        assert list(inventory["megatron_nodes"]["hosts"]) == ["node1", "node2"]
        assert list(inventory["megatron_excluded"]["hosts"]) == ["node3"]
    finally:
        stop_everything()
        report = os.environ.get("CHAOS_REPORT")
        if report:
            Path(report).write_text(json.dumps(figures, indent=1, sort_keys=True) + "\n")
        print(json.dumps(figures, indent=1, sort_keys=True))
