# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The supervisor on Docker nodes, as deployed by playbooks/supervise.yml: the burn-in runs on
three nodes (one CPU rank each), faults are injected during training, and nothing else is done by
hand. The supervisor service on node1 sees each fault, stops the ranks, decides, and relaunches
burnin.yml from node1 as the training user.

0. Under the Slurm backend (the burn-in as a Slurm job): SIGKILL of the rank on node2; the
   supervisor cancels the job, and resubmits it, pinned to the same nodes, from the newest tag.
1. SIGKILL of the rank on node2: retried on the same three nodes from the newest tag.
2. node3's container stopped for good: node3 excluded, the job re-planned on two nodes (DP 3 -> 2,
   gradient accumulation 2 -> 3, global batch 6 kept), the tag converted to a universal
   checkpoint and resumed with --universal-checkpoint; the loss goes on from the checkpoint's
   value, within the noise of the three-node run at the same iterations.
3. During that recovery, once the supervisor has decided and converted and is relaunching, the
   supervisor itself is SIGKILLed: systemd restarts it, and it finishes the recovery exactly once
   (one incident, one recovery_finished line, --universal-checkpoint kept).

Figures (seconds from the fault to the first new iteration, iterations lost, the losses compared)
are printed and written to $CHAOS_REPORT when set.
"""
from __future__ import annotations

import json
import os
import re
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
    assert record["iterations_lost"] <= SAVE_INTERVAL * 2  # a damaged newest tag costs one more interval


def loss_continuity(runs: List[List[Tuple[int, float]]], step: int, window: int = 5) -> Dict[str, Any]:
    """The losses after the resume against the run before the fault: at the same iterations where
    that run logged them, and against its trend, a straight line fitted to its last 20 losses up
    to the tag and read at the resumed iterations (the burn-in's loss falls in steps, one per pass
    over its data, so a plain mean before the tag lags). The noise is the spread around that line."""
    before = dict(pair for run in runs[:-1] for pair in run)
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


def test_faults_heal_without_a_person():
    figures = FIGURES
    fresh_start()
    started = time.monotonic()
    burnin({})
    # far enough for the loss to have left its starting plateau (about 30 steps at this lr)
    wait(lambda: node("node1").file(CKPT + "/latest").exists and last_iteration() >= 40, "40 iterations of the first launch")
    figures.append({"fault": "startup", "seconds": round(time.monotonic() - started, 1)})
    try:
        # 1. SIGKILL of the rank on node2
        t0 = time.monotonic()
        assert node("node2").run("pkill -KILL -f %s", RANK_PATTERN).rc == 0
        rec = dict(wait(lambda: resumed(1), "incident 1 resumed"))
        rec["fault_to_new_iteration_s"] = round(time.monotonic() - t0, 1)
        assert (rec["fault"], rec["action"]) == ("rank_exited", "retry"), rec
        check_resume(rec)
        # the same ranks and the same data position: the losses the run had logged past the tag
        wait(lambda: len(launches()[-1]) >= 10, "ten iterations after incident 1")
        rec["loss"] = curve = loss_continuity(launches(), rec["resumed_step"])
        assert_continues(curve, same_data=True)
        figures.append(rec)

        # 2. node3 lost for good: its container stopped
        wait(lambda: len(ranks("node3")) == 1 and last_iteration() >= rec["resumed_step"] + 4 * SAVE_INTERVAL,
             "four saved intervals after incident 1")
        t0 = time.monotonic()
        subprocess.run(["docker", "stop", "--time", "0", "node3"], check=True, capture_output=True, timeout=120)
        # 3. the supervisor itself SIGKILLed in the middle of that recovery: it has decided and
        #    converted (its recovery journal is on disk) and is relaunching. systemd restarts it
        #    (Restart=on-failure), and it finishes the recovery exactly once.
        head = node("node1")
        wait(lambda: head.file(RECOVERY_JOURNAL).exists, "the recovery journal of incident 2", deadline=600.0)
        assert head.run("systemctl kill --signal=SIGKILL megatron-supervisor@chaos").rc == 0
        killed = time.monotonic()
        rec = dict(wait(lambda: resumed(2), "incident 2 resumed", deadline=900.0))
        rec["fault_to_new_iteration_s"] = round(time.monotonic() - t0, 1)
        rec["supervisor_kill_to_new_iteration_s"] = round(time.monotonic() - killed, 1)
        assert (rec["fault"], rec["action"], rec["removed"]) == ("node_unreachable", "exclude", ["node3"]), rec
        assert rec.get("recovery_finished") in ("relaunched", "adopted"), rec
        assert len(incidents()) == 2, incidents()  # the loss decided once, not again after the restart
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
