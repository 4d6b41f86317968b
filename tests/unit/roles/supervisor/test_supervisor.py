# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/supervisor/files/megatron_supervisor.py: one poll of the loop per fault, against a real
log file, real checkpoint tags on disk and a fake cluster (ssh answers and the commands run)."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import zipfile
from typing import Any, Dict, List, Optional

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[4] / "roles" / "supervisor" / "files" / "megatron_supervisor.py"
SPEC = importlib.util.spec_from_file_location("megatron_supervisor", str(SCRIPT))
sup = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(sup)  # type: ignore[union-attr]

NODES = ["node1", "node2", "node3"]
JOB_SPEC = {
    "megatron_job_stack_profile": "cpu", "megatron_job_gpus_per_node": 2, "megatron_job_tensor_parallel": 1,
    "megatron_job_pipeline_parallel": 1, "megatron_job_zero_stage": 1, "megatron_job_precision": "fp32",
    "megatron_job_num_layers": 2, "megatron_job_hidden_size": 64, "megatron_job_num_attention_heads": 4,
    "megatron_job_seq_length": 128, "megatron_job_max_position_embeddings": 128,
    "megatron_job_micro_batch_size": 1, "megatron_job_global_batch_size": 12,
}


class FakeShell:
    """ssh answers: node -> list of rank states, or None (unreachable)."""

    def __init__(self, ranks: Dict[str, Optional[List[str]]]) -> None:
        self.states = ranks
        self.signals: List[tuple] = []
        self.commands: List[tuple] = []

    def ranks(self, node: str, pattern: str) -> Optional[List[str]]:
        if self.signals and any(s[2] in ("TERM", "KILL") for s in self.signals) and self.states.get(node) is not None:
            return []
        return self.states.get(node)

    def signal(self, node: str, pattern: str, sig: str) -> None:
        self.signals.append((node, pattern, sig))

    def run(self, node: str, command: str) -> subprocess.CompletedProcess:
        self.commands.append((node, command))
        return subprocess.CompletedProcess([], 255 if self.states.get(node) is None else 0, "", "")


class FakeRun:
    def __init__(self, rc: int = 0) -> None:
        self.calls: List[List[str]] = []
        self.envs: List[Any] = []
        self.rc = rc

    def __call__(self, argv: List[str], **kwargs: Any) -> subprocess.CompletedProcess:
        self.calls.append(list(argv))
        self.envs.append(kwargs.get("env"))
        return subprocess.CompletedProcess(argv, self.rc, "", "")


def _pt(path: pathlib.Path, size: int = 64) -> None:
    with zipfile.ZipFile(str(path), "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", b"x" * size)


def _tag(ckpt: pathlib.Path, step: int, dp: int = 6, broken: bool = False) -> None:
    tag = ckpt / ("global_step%d" % step)
    tag.mkdir(parents=True)
    _pt(tag / "mp_rank_00_model_states.pt")
    for rank in range(dp):
        if broken and rank == dp - 1:
            (tag / ("zero_pp_rank_%d_mp_rank_00_optim_states.pt" % rank)).write_bytes(b"")
            continue
        _pt(tag / ("zero_pp_rank_%d_mp_rank_00_optim_states.pt" % rank))
    (ckpt / "latest").write_text("global_step%d" % step)


def _setup(tmp_path: pathlib.Path, steps: List[str], tags: List[tuple], history: Optional[List[dict]] = None,
           policy: Optional[dict] = None) -> Dict[str, Any]:
    log = tmp_path / "train.log"
    lines = ["=== megatron_launch 2026-12-01T06:00:00Z: start burnin_gpt.py /w/burnin.sh"]
    for index, loss in enumerate(steps, 1):
        lines.append("BURNIN step=%d loss=%s step_time=0.500s tokens_per_s_per_rank=100.0" % (index, loss))
    log.write_text("\n".join(lines) + "\n")
    record = tmp_path / "launch.json"
    record.write_text(json.dumps({"log_offset": 0}))
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    for step, broken in tags:
        _tag(ckpt, step, broken=broken)
    incidents = tmp_path / "incidents.jsonl"
    for rec in history or []:
        sup_incident().append(str(incidents), rec)
    (tmp_path / "textfile").mkdir()
    return {
        "job": "sim-gpt", "nodes": list(NODES), "spares": [], "head": "node1", "gpus_per_node": 2,
        "rank_pattern": "burnin_gpt.py", "log_file": str(log), "record_file": str(record),
        "checkpoint_dir": str(ckpt), "python": "/venv/bin/python", "incident_file": str(incidents),
        "textfile_dir": str(tmp_path / "textfile"), "spec": dict(JOB_SPEC), "policy": policy or {},
        "inventory_vars": {"megatron_job_name": "sim-gpt"}, "inventory_hosts": {n: {"ansible_host": n} for n in NODES},
        "relaunch_command": ["ansible-playbook", "-i", "{inventory}", "train.yml", "-e", "@{overrides}"],
        "stop_timeout": 10,
    }


def sup_launch():
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import shm as _launch_shm
    return _launch_shm


def sup_incident():
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import incident as _incident
    return _incident


HEALTHY = {n: ["Sl", "Sl"] for n in NODES}


def _poll(config: Dict[str, Any], shell: FakeShell, run: FakeRun, clock: float = 100.0):
    sleeps: List[float] = []
    supervisor = sup.Supervisor(config, shell=shell, run=run, sleep=sleeps.append, clock=lambda: clock)
    return supervisor, supervisor.poll(), sleeps


def _inventory(config: Dict[str, Any]) -> Dict[str, Any]:
    with open(str(pathlib.Path(config["incident_file"]).parent / "supervisor-inventory.json")) as handle:
        return json.load(handle)


def _overrides(config: Dict[str, Any]) -> Dict[str, Any]:
    with open(str(pathlib.Path(config["incident_file"]).parent / "supervisor-overrides.json")) as handle:
        return json.load(handle)


@pytest.mark.parametrize("pythonpath, expected", [
    (None, None),                                    # the burn-in's checkpoints pickle nothing of the trainer
    (["/opt/mds"], "/opt/mds"),                      # pretrain_gpt.py's pickle megatron.core.enums.ModelType
])
def test_conversion_runs_with_the_trainers_code_on_the_path(tmp_path, monkeypatch, pythonpath, expected):
    """ds_to_universal unpickles Megatron-DeepSpeed's model states, which need the megatron package
    (found on 2026-12-06: a real pretrain_gpt.py tag failed with "No module named 'megatron'")."""
    monkeypatch.delenv("PYTHONPATH", raising=False)
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)])
    if pythonpath is not None:
        config["pythonpath"] = pythonpath
    shell, run = FakeShell(dict(HEALTHY, node3=None)), FakeRun()
    record = _poll(config, shell, run)[1]
    assert record["converted"] == "global_step10_universal"
    assert run.calls[0][1:3] == ["-m", "deepspeed.checkpoint.ds_to_universal"]
    assert run.envs[0].get("PYTHONPATH") == expected


def test_healthy_job_is_left_alone(tmp_path):
    config = _setup(tmp_path, ["5.0", "4.9"], [(10, False)])
    shell, run = FakeShell(HEALTHY), FakeRun()
    record = _poll(config, shell, run)[1]
    assert record is None and run.calls == [] and shell.signals == []
    assert 'megatron_supervisor_up{job="sim-gpt"} 1' in (tmp_path / "textfile" / "megatron_supervisor.prom").read_text()


def test_node_loss_excludes_replans_converts_and_relaunches(tmp_path):
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)])
    shell, run = FakeShell(dict(HEALTHY, node3=None)), FakeRun()
    supervisor, record = _poll(config, shell, run)[:2]
    assert (record["fault"], record["action"], record["removed"]) == ("node_unreachable", "exclude", ["node3"])
    assert (record["iteration"], record["resumed_step"], record["iterations_lost"]) == (14, 10, 4)
    assert "DP 4, micro 1 x accumulation 3" in record["reason"]
    # ZeRO-1 and DP 6 -> 4: DeepSpeed's universal checkpoint first, then train.yml with --universal-checkpoint
    assert run.calls[0][1:4] == ["-m", "deepspeed.checkpoint.ds_to_universal", "--input_folder"]
    assert record["converted"] == "global_step10_universal"
    assert run.calls[1][0] == "ansible-playbook"
    inventory = _inventory(config)["all"]["children"]
    assert list(inventory["megatron_nodes"]["hosts"]) == ["node1", "node2"]
    assert list(inventory["megatron_excluded"]["hosts"]) == ["node3"]
    assert _overrides(config)["megatron_job_extra_args"] == ["--universal-checkpoint"]
    # ranks were stopped on the reachable nodes only
    assert {s[0] for s in shell.signals} == {"node1", "node2"}
    # and the killed ranks' DeepSpeed buffers swept from /dev/shm there
    sweep = sup_launch().shm_sweep_command()
    assert sorted(n for n, c in shell.commands if c == sweep) == ["node1", "node2"]
    assert supervisor.nodes == ["node1", "node2"]


def test_rank_exit_without_culprit_retries_same_nodes_after_backoff(tmp_path):
    config = _setup(tmp_path, ["5.0"] * 12, [(10, False)])
    shell, run = FakeShell(dict(HEALTHY, node2=["Sl"])), FakeRun()
    record, sleeps = _poll(config, shell, run)[1:]
    assert (record["fault"], record["kind"], record["action"]) == ("rank_exited", "transient", "retry")
    assert 30.0 in sleeps
    assert len(run.calls) == 1 and run.calls[0][0] == "ansible-playbook"  # no conversion: same DP
    assert list(_inventory(config)["all"]["children"]["megatron_nodes"]["hosts"]) == NODES
    assert "megatron_job_extra_args" not in _overrides(config)


class LoggingShell(FakeShell):
    """The ranks that outlived the fault log more iterations (and save one more tag) until the
    stop's SIGTERM reaches them: what a loaded head node sees between reading the log and asking
    the nodes."""

    def __init__(self, ranks: Dict[str, Optional[List[str]]], log: pathlib.Path, ckpt: pathlib.Path,
                 more: List[int], tag: int) -> None:
        super().__init__(ranks)
        self.log, self.ckpt, self.more, self.tag = log, ckpt, more, tag

    def signal(self, node: str, pattern: str, sig: str) -> None:
        if sig == "TERM" and self.more:
            with self.log.open("a") as handle:
                for step in self.more:
                    handle.write("BURNIN step=%d loss=4.0 step_time=0.050s tokens_per_s_per_rank=100.0\n" % step)
            _tag(self.ckpt, self.tag)
            self.more = []
        super().signal(node, pattern, sig)


def test_last_iteration_is_read_after_the_ranks_stopped(tmp_path):
    # make chaos, first fault: the record said iteration 9 while the job had logged 18 and saved
    # global_step18 (its "iterations lost" undercounted). The log is read again after the stop.
    config = _setup(tmp_path, ["5.0"] * 9, [(9, False)])
    shell = LoggingShell(dict(HEALTHY, node2=["Sl"]), tmp_path / "train.log", tmp_path / "ckpt", list(range(10, 21)), 18)
    record = _poll(config, shell, FakeRun())[1]
    assert (record["fault"], record["iteration"], record["resumed_step"], record["iterations_lost"]) == (
        "rank_exited", 20, 18, 2)


def test_nan_rolls_back_to_the_tag_before_it(tmp_path):
    config = _setup(tmp_path, ["5.0"] * 11 + ["nan"], [(5, False), (10, False), (12, False)])
    shell, run = FakeShell(HEALTHY), FakeRun()
    record = _poll(config, shell, run)[1]
    assert (record["fault"], record["action"], record["resumed_step"]) == ("nonfinite_loss", "rollback", 10)
    assert (tmp_path / "ckpt" / "latest").read_text() == "global_step10"


def test_damaged_newest_tag_falls_back_to_the_previous_one(tmp_path):
    config = _setup(tmp_path, ["5.0"] * 12, [(5, False), (10, True)])
    shell, run = FakeShell(dict(HEALTHY, node2=None)), FakeRun()
    record = _poll(config, shell, run)[1]
    assert record["resumed_step"] == 5 and record["converted"] == "global_step5_universal"
    assert (tmp_path / "ckpt" / "latest").read_text() == "global_step5"


def test_retries_exhausted_stops_and_alerts(tmp_path):
    history = [{"fault": "stall", "kind": "transient", "nodes": [], "action": "retry"}] * 3
    config = _setup(tmp_path, ["5.0"] * 3, [(2, False)], history=history)
    shell, run = FakeShell(dict(HEALTHY, node1=["Sl"])), FakeRun()
    supervisor, record = _poll(config, shell, run)[:2]
    assert record["action"] == "stop" and run.calls == []
    assert 'megatron_supervisor_stopped{job="sim-gpt"} 1' in (tmp_path / "textfile" / "megatron_supervisor.prom").read_text()
    assert supervisor.poll() is None  # stopped: it no longer acts


def test_stall_with_a_stopped_rank_blames_its_node(tmp_path):
    # The relaunch re-reads the same log (no new launch): the checked resume is off here.
    config = _setup(tmp_path, ["5.0"] * 3, [(2, False)],
                    policy={"stall_min": 60, "save_allowance": 0, "resume_check_points": 0})
    shell, run = FakeShell(dict(HEALTHY, node2=["Sl", "Tl"])), FakeRun()
    supervisor = sup.Supervisor(config, shell=shell, run=run, sleep=lambda s: None, clock=lambda: 0.0)
    assert supervisor.poll() is None  # progress seen at t=0
    supervisor.clock = lambda: 61.0
    record = supervisor.poll()
    # first time: a suspect, retried on the same nodes; blamed again (node_fault_after 2): excluded
    assert (record["fault"], record["kind"], record["action"], record["nodes"]) == ("stall", "transient", "retry", ["node2"])
    assert ("node2", "burnin_gpt.py", "CONT") in shell.signals
    shell.signals = []
    assert supervisor.poll() is None  # the relaunched job's log: progress seen at t=61
    supervisor.clock = lambda: 130.0
    record = supervisor.poll()
    assert (record["fault"], record["action"], record["removed"]) == ("stall", "exclude", ["node2"])


def test_replan_refusal_stops(tmp_path):
    config = _setup(tmp_path, ["5.0"] * 3, [(2, False)])
    config["spec"] = dict(JOB_SPEC, megatron_job_global_batch_size=6)
    shell, run = FakeShell(dict(HEALTHY, node3=None)), FakeRun()
    record = _poll(config, shell, run)[1]
    assert record["action"] == "stop" and "re-plan refused: global batch 6" in record["reason"]
    assert run.calls == []


@pytest.mark.parametrize("payload, expected", [
    ({"alerts": [{"status": "firing", "labels": {"alertname": "MegatronNodeDown", "instance": "node3:9100"}}]},
     [{"alertname": "MegatronNodeDown", "node": "node3"}]),
    ({"alerts": [{"status": "resolved", "labels": {"alertname": "MegatronNodeDown", "instance": "node3:9100"}}]}, []),
    ({}, []),
])
def test_webhook_alerts(tmp_path, payload, expected):
    config = _setup(tmp_path, [], [])
    supervisor = sup.Supervisor(config, shell=FakeShell(HEALTHY), run=FakeRun())
    supervisor.add_alerts(payload)
    assert supervisor.alerts == expected


@pytest.mark.parametrize("argv, values, expected", [
    (["a", "{x}", "-e", "@{y}"], {"x": 1, "y": "/p"}, ["a", "1", "-e", "@/p"]),
    (["{missing}"], {}, ["{missing}"]),
])
def test_fill(argv, values, expected):
    assert sup.fill(argv, **values) == expected


def test_excluded_node_is_not_watched_and_a_restart_keeps_the_nodes(tmp_path):
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)], policy={"resume_check_points": 0})
    shell, run = FakeShell(dict(HEALTHY, node3=None)), FakeRun()
    supervisor, record = _poll(config, shell, run)[:2]
    assert record["action"] == "exclude"
    shell.signals = []
    assert supervisor.poll() is None  # node3 is still down, but no longer the job's
    restarted = sup.Supervisor(config, shell=shell, run=run)
    assert restarted.nodes == ["node1", "node2"]


@pytest.mark.parametrize("connection, addresses, hosts, expected", [
    # training_user: ssh as the training user to the watcher's address, no become, the interpreter kept
    ("training_user", {"node1": "10.0.0.1"}, {"node1": {"ansible_host": "1.2.3.4", "ansible_connection": "community.docker.docker",
                                                        "ansible_python_interpreter": "/usr/bin/python3.11"}},
     {"node1": {"ansible_connection": "ssh", "ansible_user": "trainer", "ansible_host": "10.0.0.1", "ansible_become": False,
                "ansible_python_interpreter": "/usr/bin/python3.11"}}),
    # no address: the inventory name (what cluster_ssh put in known_hosts)
    ("training_user", {}, {}, {"node1": {"ansible_connection": "ssh", "ansible_user": "trainer", "ansible_host": "node1",
                                         "ansible_become": False, "ansible_python_interpreter": "/usr/bin/python3"}}),
    # inventory: the controller's variables as copied
    ("inventory", {"node1": "10.0.0.1"}, {"node1": {"ansible_host": "1.2.3.4", "ansible_user": "ops"}},
     {"node1": {"ansible_host": "1.2.3.4", "ansible_user": "ops"}}),
])
def test_relaunch_hosts(connection, addresses, hosts, expected):
    config = {"nodes": ["node1"], "spares": [], "user": "trainer", "relaunch_connection": connection,
              "addresses": addresses, "inventory_hosts": hosts}
    assert sup.relaunch_hosts(config) == expected


class SlurmRun(FakeRun):
    """squeue answers in turn (the last one repeats); scancel, ds_to_universal and the relaunch succeed."""

    def __init__(self, squeue: List[subprocess.CompletedProcess]) -> None:
        super().__init__()
        self.squeue = list(squeue)

    def __call__(self, argv: List[str], **kwargs: Any) -> subprocess.CompletedProcess:
        self.calls.append(list(argv))
        if argv[0] == "squeue":
            return self.squeue.pop(0) if len(self.squeue) > 1 else self.squeue[0]
        return subprocess.CompletedProcess(argv, 0, "", "")


def _queue(stdout: str = "", rc: int = 0, stderr: str = "") -> subprocess.CompletedProcess:
    return subprocess.CompletedProcess(["squeue"], rc, stdout, stderr)


@pytest.mark.parametrize("answer, alive", [
    (_queue("RUNNING\n"), True),
    (_queue("COMPLETING\n"), True),
    (_queue(""), False),  # left the queue
    (_queue(rc=1, stderr="slurm_load_jobs error: Invalid job id specified"), False),
    (_queue(rc=1, stderr="slurm_load_jobs error: Unable to contact slurm controller"), True),  # no verdict
])
def test_slurm_launcher_alive(tmp_path, answer, alive):
    record = tmp_path / "launch.json"
    record.write_text(json.dumps({"backend": "slurm", "slurm_job_id": "42", "pid": None}))
    run = SlurmRun([answer])
    assert sup.launcher_alive({"record_file": str(record)}, run) is alive
    assert run.calls == [["squeue", "--noheader", "--jobs", "42", "--format=%T"]]


def test_slurm_backend_rank_exit_cancels_the_job_and_pins_the_relaunch(tmp_path):
    config = _setup(tmp_path, [], [(10, False)])
    # The Slurm backend logs per job id: the record names the log, the configured one stays empty.
    job_log = tmp_path / "burnin-42.log"
    job_log.write_text("=== megatron_launch 2026-12-01T06:00:00Z: start burnin_gpt.py /w/burnin.sbatch\n" + "".join(
        "BURNIN step=%d loss=5.0 step_time=0.500s tokens_per_s_per_rank=100.0\n" % i for i in range(1, 13)))
    (tmp_path / "launch.json").write_text(json.dumps({"backend": "slurm", "slurm_job_id": "42", "pid": None,
                                                      "log_file": str(job_log), "log_offset": 0}))
    run = SlurmRun([_queue("RUNNING\n"), _queue("RUNNING\n"), _queue("")])
    shell = FakeShell(dict(HEALTHY, node2=["Sl"]))
    supervisor, record, sleeps = _poll(config, shell, run)
    assert (record["fault"], record["action"], record["iteration"]) == ("rank_exited", "retry", 12)
    # the job cancelled once its ranks were told to stop, and waited for until it left the queue
    assert ["scancel", "42"] in run.calls
    assert [c[0] for c in run.calls].count("squeue") == 3
    assert 2.0 in sleeps
    assert _overrides(config) == {"megatron_launch_backend": "slurm", "megatron_launch_slurm_pin_nodes": True}
    assert run.calls[-1][0] == "ansible-playbook"


@pytest.mark.parametrize("line, failed", [
    ("node1: OSError: [Errno 28] No space left on device", True),
    # torch.save into a full disk (/dev/full in molecule/chaos): its zip writer's own words
    ("node1: RuntimeError: [enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598", True),
    ("node1: RuntimeError: PytorchStreamWriter failed writing file data/0: file write failed", True),
    ("node1: BURNIN checkpoint /shared/chaos/checkpoints/global_step5 (interval)", False),
    # a load, not a save
    ("node1: RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory", False),
])
def test_a_failed_save_is_seen_in_the_log(line, failed):
    progress = sup.Progress()
    progress.update({}, [line], 1.0)
    assert (progress.save_failed is not None) is failed, progress.save_failed


# ------------------------------------------------------------------------------------------------
# The checked resume (_heal.resume): after a relaunch, the first iterations must continue the run
# ------------------------------------------------------------------------------------------------
def _losses(steps, start=6.0, slope=-0.05):
    return ["%.4f" % (start + slope * i + (0.01 if i % 2 else -0.01)) for i in steps]


class RelaunchRun(FakeRun):
    """train.yml as the supervisor sees it: each relaunch records a new log offset and its job logs
    the next entry of ``logs`` ((steps, losses)) there."""

    def __init__(self, config: Dict[str, Any], logs: List[tuple]) -> None:
        super().__init__()
        self.config, self.logs = config, list(logs)

    def __call__(self, argv: List[str], **kwargs: Any) -> subprocess.CompletedProcess:
        if argv and argv[0] == "ansible-playbook" and self.logs:
            steps, losses = self.logs.pop(0)
            log = pathlib.Path(self.config["log_file"])
            offset = log.stat().st_size
            with log.open("a") as handle:
                handle.write("=== megatron_launch 2026-12-01T06:10:00Z: start burnin_gpt.py /w/burnin.sh\n")
                for step, loss in zip(steps, losses):
                    handle.write("BURNIN step=%d loss=%s step_time=0.500s tokens_per_s_per_rank=100.0\n" % (step, loss))
            pathlib.Path(self.config["record_file"]).write_text(json.dumps({"log_offset": offset}))
        return super().__call__(argv, **kwargs)


def _retry_then(tmp_path, *logs, tags=((5, False), (10, False))):
    """A rank exit at iteration 14 (tag 10), retried; each relaunched job logs the next of ``logs``."""
    config = _setup(tmp_path, _losses(range(1, 15)), list(tags))
    shell, run = FakeShell(dict(HEALTHY, node2=["Sl"])), RelaunchRun(config, list(logs))
    supervisor = sup.Supervisor(config, shell=shell, run=run, sleep=lambda s: None, clock=lambda: 100.0)
    first = supervisor.poll()
    assert (first["action"], first["resumed_step"]) == ("retry", 10)
    supervisor.shell = FakeShell(HEALTHY)
    return config, supervisor, run


def test_a_resume_that_continues_the_run_is_checked_and_recorded(tmp_path):
    config, supervisor, run = _retry_then(tmp_path, ([11, 12, 13], _losses([11, 12, 13])))
    assert supervisor.poll() is None
    records = sup_incident().read(config["incident_file"])[0]
    assert records[-1]["resumed_iteration"] == 13
    check = records[-1]["resume_check"]
    assert check["verdict"] == "ok" and [r["source"] for r in check["compared"]] == ["same_iteration"] * 3
    assert supervisor.pending_resume is None and len(run.calls) == 1


def test_a_resume_still_short_of_points_waits(tmp_path):
    config, supervisor, run = _retry_then(tmp_path, ([11], _losses([11])))
    assert supervisor.poll() is None and supervisor.pending_resume is not None
    assert "resume_check" not in sup_incident().read(config["incident_file"])[0][-1]


@pytest.mark.parametrize("steps, losses, words", [
    ([1, 2, 3], ["10.8000", "10.7000", "10.6000"], "did not load it"),          # from scratch
    ([11, 12, 13], _losses([11, 12, 13], start=6.6), "does not continue the run"),  # optimizer state dropped
])
def test_a_resume_that_does_not_continue_falls_back_once_then_stops(tmp_path, steps, losses, words):
    scratch = ([1, 2, 3], ["10.8000", "10.7000", "10.6000"])
    config, supervisor, run = _retry_then(tmp_path, (steps, losses), scratch)
    record = supervisor.poll()
    assert (record["fault"], record["kind"], record["action"], record["resumed_step"]) == (
        "resume_failed", "resume", "fallback", 5)
    assert words in record["evidence"] and record["failed_check"]["verdict"] == "failed"
    assert "resume_check" not in record  # that one is the fallback's own, once it is judged
    assert "global_step10 kept" in record["reason"]
    assert (tmp_path / "ckpt" / "latest").read_text() == "global_step5"
    assert (tmp_path / "ckpt" / "global_step10").is_dir()  # both tags kept
    assert [c[0] for c in run.calls] == ["ansible-playbook", "ansible-playbook"]
    # the fallback's relaunch is checked against the same interrupted run: it fails again
    again = supervisor.poll()
    assert (again["fault"], again["action"]) == ("resume_failed", "stop")
    assert "fallbacks used up" in again["reason"]
    assert supervisor.stopped and len(run.calls) == 2
    assert 'megatron_supervisor_stopped{job="sim-gpt"} 1' in (tmp_path / "textfile" / "megatron_supervisor.prom").read_text()


# A second fault before the relaunched job saves again: the resume from the same tag is still
# judged by the losses logged before that tag, by the launch the first fault interrupted.
@pytest.mark.parametrize("second_run, third_run, action, sources", [
    ([11], _losses([11, 12, 13]), None, ["same_iteration"] * 3),
    ([11, 12], _losses([11, 12, 13]), None, ["same_iteration"] * 3),
    ([11], _losses([11, 12, 13], start=6.6), "fallback", None),  # optimizer state dropped: still caught
])
def test_two_faults_within_one_save_interval_keep_the_resume_checked(tmp_path, second_run, third_run, action, sources):
    config, supervisor, run = _retry_then(tmp_path, (second_run, _losses(second_run)), ([11, 12, 13], third_run))
    supervisor.shell = FakeShell(dict(HEALTHY, node3=["Sl"]))  # the relaunch's first iteration, then node3's rank dies
    second = supervisor.poll()
    assert (second["fault"], second["action"], second["resumed_step"]) == ("rank_exited", "retry", 10)
    assert second["iterations_lost"] == len(second_run)
    assert sorted(supervisor.pending_resume["before"])[:10] == list(range(1, 11))
    supervisor.shell = FakeShell(HEALTHY)
    third = supervisor.poll()
    records = sup_incident().read(config["incident_file"])[0]
    if action is None:
        check = records[-1]["resume_check"]
        assert third is None and check["verdict"] == "ok", check
        assert [r["source"] for r in check["compared"]] == sources and check["noise"] is not None, check
    else:
        assert (third["fault"], third["action"], third["resumed_step"]) == ("resume_failed", action, 5), third
        assert len(run.calls) == 3


def test_a_failed_resume_with_no_older_tag_stops(tmp_path):
    config, supervisor, run = _retry_then(tmp_path, ([1, 2, 3], ["10.8", "10.7", "10.6"]), tags=((10, False),))
    record = supervisor.poll()
    assert (record["fault"], record["action"]) == ("resume_failed", "stop")
    assert "no complete tag before it" in record["reason"] and len(run.calls) == 1


# ------------------------------------------------------------------------------------------------
# GPU faults in the culprit check: the library's probe over ssh (_heal.gpu_faults)
# ------------------------------------------------------------------------------------------------
class GpuShell(FakeShell):
    """ssh answers, and the GPU probe's JSON line per node."""

    def __init__(self, ranks: Dict[str, Optional[List[str]]], probe: Dict[str, dict]) -> None:
        super().__init__(ranks)
        self.probe = probe

    def run(self, node: str, command: str) -> subprocess.CompletedProcess:
        if sup.GPU_PROBE_MODULE in command:
            self.commands.append((node, command))
            verdict = self.probe.get(node, {"tier": "none", "reasons": []})
            return subprocess.CompletedProcess([], 0, json.dumps(verdict) + "\n", "")
        return super().run(node, command)


XID79 = {"tier": "exclude", "reasons": [
    {"gpu": "GPU 1", "what": "Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS (RESTART_BM)", "tier": "exclude",
     "found": "1 time(s) in the kernel log"}]}
XID95 = {"tier": "reset", "reasons": [
    {"gpu": "GPU 0", "what": "Xid 95 ROBUST_CHANNEL_UNCONTAINED_ERROR (RESET_GPU)", "tier": "reset",
     "found": "1 time(s) in the kernel log"}]}


def test_a_gpu_fallen_off_the_bus_excludes_its_node(tmp_path):
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)])
    shell, run = GpuShell(dict(HEALTHY, node2=["Sl"]), {"node3": XID79}), FakeRun()
    record = _poll(config, shell, run)[1]
    assert (record["fault"], record["kind"], record["action"], record["removed"]) == (
        "rank_exited", "node", "exclude", ["node3"])
    assert "node3: GPU fault: exclude: GPU 1 Xid 79" in record["evidence"]
    probe = [c for n, c in shell.commands if sup.GPU_PROBE_MODULE in c]
    assert len(probe) == 3 and probe[0].startswith("PYTHONPATH=")


class ResetRun(FakeRun):
    """rc for the GPU reset command, 0 for everything else (conversion, relaunch)."""

    def __init__(self, reset_rc: int) -> None:
        super().__init__()
        self.reset_rc = reset_rc

    def __call__(self, argv: List[str], **kwargs: Any) -> subprocess.CompletedProcess:
        self.calls.append(list(argv))
        return subprocess.CompletedProcess(argv, self.reset_rc if "nvidia-smi" in argv else 0, "", "")


@pytest.mark.parametrize("reset_command, rc, action, removed", [
    (["ssh", "root@{node}", "nvidia-smi", "-r"], 0, "reset", []),   # reset, then the same nodes
    (["ssh", "root@{node}", "nvidia-smi", "-r"], 3, "exclude", ["node1"]),  # the reset failed
    ([], 0, "exclude", ["node1"]),                                   # no way to reset: a node fault
])
def test_a_gpu_to_reset_is_reset_then_retried(tmp_path, reset_command, rc, action, removed):
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)])
    config["gpu_reset_command"] = reset_command
    shell, run = GpuShell(dict(HEALTHY, node2=["Sl"]), {"node1": XID95}), ResetRun(rc)
    record = _poll(config, shell, run)[1]
    assert (record["action"], record["removed"]) == (action, removed)
    if reset_command:
        assert run.calls[0] == ["ssh", "root@node1", "nvidia-smi", "-r"]
    if action == "reset":
        assert list(_inventory(config)["all"]["children"]["megatron_nodes"]["hosts"]) == NODES


def test_the_gpu_probe_can_be_turned_off(tmp_path):
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)])
    config["gpu_probe"] = False
    shell, run = GpuShell(dict(HEALTHY, node2=["Sl"]), {"node3": XID79}), FakeRun()
    record = _poll(config, shell, run)[1]
    assert (record["kind"], record["action"]) == ("transient", "retry")
    assert not [c for n, c in shell.commands if sup.GPU_PROBE_MODULE in c]


FIRING = {"alerts": [{"status": "firing", "labels": {"alertname": "MegatronNodeDown", "instance": "node3:9100"}}]}


@pytest.mark.parametrize("token, header, status, acted", [
    ("s3cret", None, 401, False),                    # no token: refused, nothing acted on
    ("s3cret", "Bearer wrong", 401, False),          # a forged one
    ("s3cret", "s3cret", 401, False),                # the token without the scheme
    ("s3cret", "Bearer s3cret", 200, True),          # Alertmanager with its credentials_file
    (None, None, 200, True),                         # no token configured (supervisor_webhook_token_file: "")
])
def test_webhook_requires_the_shared_token(tmp_path, token, header, status, acted):
    import threading
    import urllib.error
    import urllib.request

    config = _setup(tmp_path, [], [])
    supervisor = sup.Supervisor(config, shell=FakeShell(HEALTHY), run=FakeRun())
    wake = threading.Event()
    server = sup.serve_webhook(supervisor, "127.0.0.1", 0, wake, token)
    try:
        request = urllib.request.Request("http://127.0.0.1:%d/alerts" % server.server_address[1],
                                         data=json.dumps(FIRING).encode(), method="POST")
        if header:
            request.add_header("Authorization", header)
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                got = response.status
        except urllib.error.HTTPError as error:
            got = error.code
    finally:
        server.shutdown()
        server.server_close()
    assert got == status
    assert bool(supervisor.alerts) is acted and wake.is_set() is acted


@pytest.mark.parametrize("content, error", [("abc\n", None), ("\n", "is empty")])
def test_read_token(tmp_path, content, error):
    path = tmp_path / "token"
    path.write_text(content)
    if error:
        with pytest.raises(SystemExit, match=error):
            sup.read_token(str(path))
    else:
        assert sup.read_token(str(path)) == "abc"
    assert sup.read_token(None) is None


def test_the_ledger_starts_once_and_survives_a_restart(tmp_path):
    config = _setup(tmp_path, [], [])
    first = sup.Supervisor(config, shell=FakeShell(HEALTHY), run=FakeRun())
    again = sup.Supervisor(config, shell=FakeShell(HEALTHY), run=FakeRun())
    lines = pathlib.Path(config["incident_file"]).read_text().splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["watching"]
    assert again.watching_since == first.watching_since
    assert first.goodput()["ettr"] == 1.0 and first.goodput()["incidents"] == 0


class Killed(BaseException):
    """SIGKILL in the middle of a recovery: nothing after it runs, no except clause sees it."""


class KilledAtRelaunch(FakeRun):
    """Runs the conversion, then dies at train.yml: before it launched anything, or (launched)
    after train.yml had started the job and written its launch record."""

    def __init__(self, record_file: str, launched: bool) -> None:
        super().__init__()
        self.record_file, self.launched = record_file, launched

    def __call__(self, argv: List[str], **kwargs: Any) -> subprocess.CompletedProcess:
        if argv[0] == "ansible-playbook":
            self.calls.append(list(argv))
            if self.launched:
                # A launcher that lives (this process), and the log offset of the new launch.
                pathlib.Path(self.record_file).write_text(json.dumps({"pid": os.getpid(), "log_offset": 999}))
            raise Killed()
        return super().__call__(argv, **kwargs)


class LaunchingRun(FakeRun):
    """train.yml as it ends: a new launch record, its log offset at the end of the log so far."""

    def __init__(self, config: Dict[str, Any]) -> None:
        super().__init__()
        self.config = config

    def __call__(self, argv: List[str], **kwargs: Any) -> subprocess.CompletedProcess:
        if argv[0] == "ansible-playbook":
            offset = pathlib.Path(self.config["log_file"]).stat().st_size
            pathlib.Path(self.config["record_file"]).write_text(json.dumps({"pid": os.getpid(), "log_offset": offset}))
        return super().__call__(argv, **kwargs)


def _journal(config: Dict[str, Any]) -> pathlib.Path:
    return pathlib.Path(config["incident_file"]).parent / "supervisor-recovery.json"


@pytest.mark.parametrize("launched, how, relaunches", [
    (False, "relaunched", 1),  # killed before train.yml launched: the restarted supervisor launches
    (True, "adopted", 0),      # killed after it launched: the running job is adopted, not launched twice
])
def test_a_supervisor_killed_mid_recovery_finishes_it_exactly_once(tmp_path, launched, how, relaunches):
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)])
    shell = FakeShell(dict(HEALTHY, node3=None))
    first = KilledAtRelaunch(config["record_file"], launched)
    with pytest.raises(Killed):
        _poll(config, shell, first)
    assert first.calls[0][1] == "-m" and len(first.calls) == 2  # converted, then killed at train.yml
    assert _journal(config).exists()
    # systemd restarts it: the first poll finishes the recovery instead of deciding again.
    run = LaunchingRun(config)
    restarted, record, _sleeps = _poll(config, FakeShell(dict(HEALTHY, node3=None)), run)
    assert (record["fault"], record["action"], record["recovery_finished"]) == ("node_unreachable", "exclude", how)
    assert [c[0] for c in run.calls] == ["ansible-playbook"] * relaunches  # no second conversion either
    if relaunches:
        assert _overrides(config)["megatron_job_extra_args"] == ["--universal-checkpoint"]
        assert list(_inventory(config)["all"]["children"]["megatron_nodes"]["hosts"]) == ["node1", "node2"]
    records = sup_incident().read(config["incident_file"])[0]
    assert [(r["fault"], r.get("recovery_finished")) for r in records] == [("node_unreachable", how)]
    assert not _journal(config).exists()
    assert restarted.nodes == ["node1", "node2"]
    assert restarted.pending_resume["step"] == 10 and restarted.pending_resume["before"][14] == 5.0
    # Nothing is left to do: with the job's ranks up again, the next poll finds no fault.
    restarted.shell = FakeShell(dict(HEALTHY, node3=None))
    assert restarted.poll() is None
    assert len(sup_incident().read(config["incident_file"])[0]) == 1


def test_a_journal_without_its_incident_records_it_once_and_relaunches(tmp_path):
    # Killed between the journal and the incident line: the restarted supervisor writes the line.
    config = _setup(tmp_path, ["5.0"] * 12, [(10, False)])
    record = {"at": "2026-12-06T10:00:00Z", "fault": "rank_exited", "kind": "transient", "action": "retry",
              "nodes": ["node2"], "job_nodes": list(NODES), "iteration": 12, "resumed_step": 10, "iterations_lost": 2}
    sup.write_recovery(config, {"record": record, "nodes": list(NODES), "universal": False,
                                "launch_before": sup.launch_fingerprint(config), "relaunch_after": 0,
                                "relaunch": {"overrides": {}, "resumed_step": 10, "clock": 50.0,
                                             "before_losses": {"12": 5.0}, "saved_shape": None}})
    run = FakeRun()
    supervisor, got, sleeps = _poll(config, FakeShell(HEALTHY), run)
    assert got["recovery_finished"] == "relaunched" and sleeps == []
    assert [c[0] for c in run.calls] == ["ansible-playbook"]
    assert [r["fault"] for r in sup_incident().read(config["incident_file"])[0]] == ["rank_exited"]
    assert supervisor.pending_resume["clock"] == 50.0 and supervisor.pending_resume["before"] == {12: 5.0}
    # A second restart finds no journal and records nothing more.
    again = sup.Supervisor(config, shell=FakeShell(HEALTHY), run=FakeRun())
    assert again.recovery is None
    assert len(sup_incident().read(config["incident_file"])[0]) == 1


@pytest.mark.parametrize("text", ['{"record": {"fault": "x"', "[]", '{"nodes": []}'])
def test_a_journal_cut_short_or_foreign_is_ignored(tmp_path, text):
    config = _setup(tmp_path, ["5.0"] * 3, [(1, False)])
    _journal(config).write_text(text)
    assert sup.read_recovery(config) is None
    assert _poll(config, FakeShell(HEALTHY), FakeRun())[1] is None


def test_a_stop_decision_leaves_no_journal(tmp_path):
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)], policy={"max_retries": 0})
    record = _poll(config, FakeShell(dict(HEALTHY, node2=["Sl"])), FakeRun())[1]
    assert record["action"] == "stop"
    assert not _journal(config).exists()


@pytest.mark.parametrize("follows, saved_dp, same", [
    (True, 99, True),     # pretrain_gpt.py: the sampler continues from the consumed samples
    (False, None, True),  # nothing known of the saved shape
    (False, "now", True),  # the burn-in at the DP it saved with: the same batches
    (False, 99, False),   # the burn-in after a DP change: other batches, judged by the trend
])
def test_same_data_follows_the_trainer_and_the_data_parallel_size(tmp_path, follows, saved_dp, same):
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)])
    config["data_follows_samples"] = follows
    supervisor = sup.Supervisor(config, shell=FakeShell(HEALTHY), run=FakeRun(), sleep=lambda s: None,
                                clock=lambda: 100.0)
    now = supervisor.saved_shape()["data_parallel"]
    shape = {} if saved_dp is None else {"data_parallel": now if saved_dp == "now" else saved_dp}
    assert supervisor.same_data({"saved_shape": shape}) is same


def _fabric_verdict(slow_node=None, slow_link=None, at="2026-12-07T19:00:00Z"):
    """The fabric gate's verdict over the job's nodes: the slow node's groups at 2 GB/s against a site figure of 5."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import bisect, thresholds, verdict

    site = thresholds.Threshold("cross", 5.0, "GB/s", thresholds.ORIGIN_SITE, "set by the site")
    results: List[Dict[str, Any]] = []
    step = bisect.next_step(NODES, results)
    while not step["done"]:
        for group in step["measure"]:
            slow = slow_node in group or (slow_link is not None and set(slow_link) <= set(group))
            results.append(dict(thresholds.judge("g", 2.0 if slow else 8.0, site), nodes=group))
        step = bisect.next_step(NODES, results)
    return verdict.build(NODES, results, at, 1.0)


@pytest.mark.parametrize("document, spares, action, removed, job_nodes", [
    # The gate named node3 while the job trains (slowly, no other fault): excluded, re-planned on two.
    (_fabric_verdict("node3"), [], "exclude", ["node3"], ["node1", "node2"]),
    # With a spare: swapped in, same layout.
    (_fabric_verdict("node2"), ["node4"], "replace", ["node2"], ["node1", "node4", "node3"]),
    # A link or a healthy world names no node to take out: the job is left alone.
    (_fabric_verdict(slow_link=("node1", "node3")), [], None, None, None),
    (_fabric_verdict(), [], None, None, None),
])
def test_a_node_the_fabric_gate_names_is_taken_out(tmp_path, document, spares, action, removed, job_nodes):
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)], policy={"resume_check_points": 0})
    config["spares"] = spares
    config["inventory_hosts"].update({n: {"ansible_host": n} for n in spares})
    config["fabric_verdict_file"] = str(tmp_path / "fabric-verdict.json")
    (tmp_path / "fabric-verdict.json").write_text(json.dumps(document))
    shell, run = FakeShell(dict(HEALTHY, node4=["Sl", "Sl"])), FakeRun()
    supervisor, record = _poll(config, shell, run)[:2]
    if action is None:
        assert record is None and shell.signals == [] and run.calls == []
        return
    assert (record["fault"], record["kind"], record["action"], record["removed"], record["job_nodes"]) == (
        "fabric_slow", "node", action, removed, job_nodes)
    # The incident carries the figures that named the node, and the verdict's time.
    assert "fabric gate verdict of 2026-12-07T19:00:00Z: %s: all-reduce 2 GB/s with" % removed[0] in record["evidence"]
    assert ">= 5 GB/s (site override: set by the site)" in record["evidence"]
    assert run.calls[-1][0] == "ansible-playbook"
    shell.signals = []
    assert supervisor.poll() is None
    # One verdict acts once: even watching the named node again (a person put it back), the
    # incident that carries this verdict keeps it from being taken out a second time.
    again = sup.Supervisor(config, shell=shell, run=run, sleep=lambda s: None, clock=lambda: 100.0)
    again.nodes = list(NODES)
    assert again.poll() is None and shell.signals == []


def test_a_later_verdict_naming_the_node_again_acts_again(tmp_path):
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)], policy={"resume_check_points": 0},
                    history=[{"at": "2026-12-07T18:00:00Z", "fault": "fabric_slow", "kind": "node", "nodes": ["node3"],
                              "evidence": "fabric gate verdict of 2026-12-07T17:00:00Z: node3: ...", "action": "exclude",
                              "job_nodes": list(NODES)}])
    config["fabric_verdict_file"] = str(tmp_path / "fabric-verdict.json")
    (tmp_path / "fabric-verdict.json").write_text(json.dumps(_fabric_verdict("node3")))
    record = _poll(config, FakeShell(HEALTHY), FakeRun())[1]
    assert (record["fault"], record["removed"]) == ("fabric_slow", ["node3"])


@pytest.mark.parametrize("text", ["{", json.dumps({"version": 0})])
def test_an_unreadable_fabric_verdict_excludes_nobody(tmp_path, capsys, text):
    config = _setup(tmp_path, ["5.0"] * 14, [(10, False)])
    config["fabric_verdict_file"] = str(tmp_path / "fabric-verdict.json")
    (tmp_path / "fabric-verdict.json").write_text(text)
    assert _poll(config, FakeShell(HEALTHY), FakeRun())[1] is None
    assert "fabric_check.yml" in capsys.readouterr().err
