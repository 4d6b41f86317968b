# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_launch: rank patterns, log parsing, checkpoint shapes, burn-in report, pre-launch problems,
job status and the /proc readers (against fake /proc trees)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any, Dict, List

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import burnin as la_burnin
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import checkpoints as la_checkpoints
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import logs as la_logs
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import prelaunch as la_prelaunch
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import processes as la_processes
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import shm as la_shm
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import status as la_status
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import log as _megatron_log

MEGATRON_LINE = (
    " iteration       10/      15 | consumed samples:          120 | consumed tokens:        15360 |"
    " elapsed time per iteration (ms): 1527.3 | learning rate: 9.000E-05 | global batch size:    12 |"
    " lm loss: 7.800000E+00 | loss scale: 1.0 | grad norm: 2.345 | actual seqlen:   128 |"
    " number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 7.857 |"
    " tokens per gpu per second (tgs): 36326.869 | TFLOPs: 310.83 |"
)
RANK = "/opt/megatron/venv/bin/python3 -u pretrain_gpt.py --local_rank=1 --tensor-model-parallel-size 1"


# --------------------------------------------------------------------------- rank pattern
@pytest.mark.parametrize("script, cmdline, matches", [
    ("pretrain_gpt.py", RANK, True),
    ("pretrain_gpt.py", "/opt/megatron/venv/bin/python3.11 -u /opt/Megatron-DeepSpeed/pretrain_gpt.py --local_rank=0", True),
    ("/x/burnin_gpt.py", "/opt/venv/bin/python -u /opt/jobs/a/burnin/burnin_gpt.py --local_rank=3 --ds-config c", True),
    # the DeepSpeed runner, pdsh, launch.py and a wrapper never carry `-u <script>`
    ("pretrain_gpt.py", "/opt/megatron/venv/bin/python3 /opt/megatron/venv/bin/deepspeed --hostfile h pretrain_gpt.py --x", False),
    ("pretrain_gpt.py", "pdsh -S -f 1024 -w n1,n2 export A=1; cd /d; /v/bin/python3 -u -m deepspeed.launcher.launch "
                        "--world_info=e30= --node_rank=%n --master_port=29500 pretrain_gpt.py --x", False),
    ("pretrain_gpt.py", "/v/bin/python3 -u -m deepspeed.launcher.launch --world_info=e30= pretrain_gpt.py --x", False),
    ("pretrain_gpt.py", "/bin/bash -c \"$1\" >>\"$2\" 2>&1 megatron-launch /opt/jobs/gpt/train.sh", False),
    ("pretrain_gpt.py", "python3 -u pretrain_gpt_v2.py --local_rank=0", False),
    ("burnin_gpt.py", RANK, False),
])
def test_rank_pattern_matches_ranks_only(script, cmdline, matches):
    assert bool(re.search(la_processes.rank_pattern(script), cmdline)) is matches


def test_rank_pattern_is_a_posix_ere_that_pgrep_accepts(tmp_path):
    """pkill/pgrep use POSIX extended regexes: the pattern must work there too."""
    pattern = la_processes.rank_pattern("pretrain_gpt.py")
    if not os.path.exists("/usr/bin/pgrep"):
        pytest.skip("pgrep not installed here")
    # pgrep returns 1 (no match) for a valid pattern, 2 for an invalid one
    result = subprocess.run(["pgrep", "-f", pattern], capture_output=True, check=False)
    assert result.returncode in (0, 1), result.stderr


def test_rank_pattern_refuses_an_empty_name():
    with pytest.raises(ValueError):
        la_processes.rank_pattern("/")


# --------------------------------------------------------------------------- logs
def test_megatron_iteration_line_is_read_by_the_shared_parser():
    """parse_log's entries are _megatron_log's records: the keys the exporter uses too."""
    summary = la_logs.parse_log(["node3: " + MEGATRON_LINE])
    entry = summary["last"]
    assert summary["kind"] == "megatron" and entry == _megatron_log.parse_iteration(MEGATRON_LINE)
    assert entry["iteration"] == 10 and entry["train_iters"] == 15
    assert entry["lm_loss"] == pytest.approx(7.8)
    assert entry["tokens_per_gpu_per_second"] == pytest.approx(36326.869)
    assert entry["tflops"] == pytest.approx(310.83)
    assert entry["iteration_time_ms"] == pytest.approx(1527.3)
    assert entry["global_batch_size"] == 12


@pytest.mark.parametrize("line", ["", "iteration 10 of 15", " validation loss at iteration 10 | lm loss value: 7.1 |"])
def test_other_lines_are_not_iterations(line):
    assert la_logs.parse_log([line])["iterations_logged"] == 0


def _result(host: str, rank: int, **extra: Any) -> Dict[str, Any]:
    result = {"hostname": host, "rank": rank, "local_rank": rank % 2, "world": 4, "tokens_per_s": 100.0,
              "tflops": 0.5, "probe_tokens_per_s": 200.0, "probe_tflops": 1.0, "initial_loss": 6.2,
              "final_loss": 4.1, "start_step": 0, "final_step": 20, "checkpoint": "/c/global_step20"}
    result.update(extra)
    return result


def test_megatron_log_summary_takes_the_last_launch():
    lines = [
        "=== megatron_launch 2026-01-01T00:00:00Z: start pretrain_gpt.py /j/train.sh",
        MEGATRON_LINE.replace("10/", " 5/"),
        "=== megatron_launch 2026-01-01T00:05:00Z: launcher exited rc=1",
        "=== megatron_launch 2026-01-01T01:00:00Z: start pretrain_gpt.py /j/train.sh",
        "node1:   successfully loaded checkpoint from /ck at iteration 5",
        "node3: " + MEGATRON_LINE,
        "node1: saving checkpoint at iteration      10 to /ck",
        "node1:   successfully saved checkpoint at iteration      10 to /ck",
        "node1: [after training is done] datetime: 2026-01-01 exiting program after receiving SIGTERM.",
        "=== megatron_launch 2026-01-01T01:10:00Z: launcher exited rc=0",
    ]
    summary = la_logs.parse_log(lines)
    assert summary["kind"] == "megatron"
    assert summary["started"]["at"] == "2026-01-01T01:00:00Z" and summary["started"]["script"] == "pretrain_gpt.py"
    assert summary["iterations_logged"] == 1 and summary["last"]["iteration"] == 10
    assert summary["loaded"] == {"path": "/ck", "iteration": 5}
    assert summary["saved"] == [{"iteration": 10, "path": "/ck", "reason": None}]
    assert summary["sigterm"] is True and summary["launcher_rc"] == 0


def test_burnin_log_with_two_results_on_one_line():
    """Two ranks of a node share stdout; print() writes text and newline separately."""
    r0, r1 = _result("node1", 0), _result("node1", 1)
    lines = [
        "node1: BURNIN resumed from /c/global_step8/mp_rank_00_model_states.pt at step 8 (client state 8)",
        "node1: BURNIN step=9 loss=5.1000 step_time=0.200s tokens_per_s_per_rank=640.0",
        "node1: BURNIN step=10 loss=4.9000 step_time=0.100s tokens_per_s_per_rank=1280.0",
        "node1: BURNIN checkpoint /c/global_step10 (SIGTERM)",
        "node1: BURNIN_RESULT %sBURNIN_RESULT %s" % (json.dumps(r0), json.dumps(r1)),
        "node1: ",
        "node2: BURNIN_RESULT %s" % json.dumps(_result("node2", 2)),
        "node2: BURNIN_RESULT {broken",
    ]
    summary = la_logs.parse_log(lines)
    assert summary["kind"] == "burnin"
    assert [r["rank"] for r in summary["burnin_results"]] == [0, 1, 2]
    assert summary["last"]["iteration"] == 10 and summary["last"]["lm_loss"] == pytest.approx(4.9)
    assert summary["loaded"]["iteration"] == 8
    assert summary["saved"] == [{"iteration": 10, "path": "/c/global_step10", "reason": "SIGTERM"}]
    assert summary["sigterm"] is True
    assert summary["errors"] == ["node2: BURNIN_RESULT {broken"]


def test_error_lines_are_kept_last_first():
    lines = ["node2: Traceback (most recent call last):", "node2: FileNotFoundError: [Errno 2] No such file",
             "pdsh@node1: node2: ssh exited with exit code 1"]
    assert la_logs.parse_log(lines, error_lines=2)["errors"] == lines[1:]


def test_tail_text_reads_from_the_offset_and_caps_the_size(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("old line\n" + "x" * 50 + "\nnew line 1\nnew line 2\n")
    offset = len("old line\n")
    lines, size = la_status.tail_text(str(log), offset)
    assert lines[0] == "x" * 50 and size == log.stat().st_size
    lines, size = la_status.tail_text(str(log), 0, max_bytes=22)
    assert lines == ["new line 1", "new line 2"]  # the cut first line is dropped


# --------------------------------------------------------------------------- checkpoints
@pytest.mark.parametrize("files, expected", [
    # the burn-in / --no-pipeline-parallel, ZeRO-1, DP 2
    (["mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"],
     {"tp": 1, "pp": 1, "dp": 2, "no_pipeline_parallel": True, "layout": "deepspeed"}),
    # bf16 ZeRO-2, TP 2 (docs/upstream-facts.md §B: bf16_ prefix)
    (["mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
      "bf16_zero_pp_rank_0_mp_rank_01_optim_states.pt"],
     {"tp": 2, "pp": 1, "dp": 1, "no_pipeline_parallel": True}),
    # DeepSpeed pipeline engine, TP 1, PP 2
    (["layer_01-model_00-model_states.pt", "layer_02-model_00-model_states.pt", "layer_03-model_00-model_states.pt",
      "mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
      "zero_pp_rank_0_mp_rank_01_optim_states.pt"],
     {"tp": 1, "pp": 2, "dp": 1, "no_pipeline_parallel": False}),
    # pipeline engine, TP 2, PP 2
    (["layer_01-model_00-model_states.pt", "layer_01-model_01-model_states.pt"] +
     ["mp_rank_%02d_model_states.pt" % i for i in range(4)],
     {"tp": 2, "pp": 2, "no_pipeline_parallel": False}),
    # ZeRO-3: model states per DP rank
    (["zero_pp_rank_0_mp_rank_00_model_states.pt", "zero_pp_rank_1_mp_rank_00_model_states.pt",
      "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"],
     {"tp": 1, "pp": 1, "dp": 2}),
    # not a DeepSpeed tag (Megatron's own layout, or empty)
    (["mp_rank_00", "model_optim_rng.pt"], {"layout": "unknown", "tp": None, "pp": None}),
    ([], {"layout": "unknown"}),
])
def test_checkpoint_shape_from_file_names(files, expected):
    shape = la_checkpoints.checkpoint_shape(files)
    for key, value in expected.items():
        assert shape[key] == value, (key, shape)


@pytest.mark.parametrize("tag, step", [("global_step12", 12), (" global_step7\n", 7), ("iter_0000012", None), (None, None)])
def test_step_of(tag, step):
    assert la_checkpoints.step_of(tag) == step


@pytest.mark.parametrize("checkpoints, lacking, files", [
    # shared storage: every node sees everything
    ({"n1": {"latest": "global_step5", "files": ["a", "b"]}, "n2": {"latest": "global_step5", "files": ["a", "b"]}},
     [], ["a", "b"]),
    # local disks after a save: n1 has `latest`, the model states and its shard; n2 only its shard
    ({"n1": {"latest": "global_step5", "files": ["m", "z0"]}, "n2": {"latest": None, "files": ["z1"]}},
     ["n1", "n2"], ["m", "z0", "z1"]),
    # n2 has every file but an older `latest`
    ({"n1": {"latest": "global_step5", "files": ["a"]}, "n2": {"latest": "global_step3", "files": ["a"]}},
     ["n2"], ["a"]),
])
def test_checkpoint_lacking(checkpoints, lacking, files):
    result = la_prelaunch.checkpoint_lacking(checkpoints, "global_step5")
    assert result == {"lacking": lacking, "files": files}


# --------------------------------------------------------------------------- burn-in report
def test_burnin_report_passes_a_healthy_run():
    results = [_result(h, r) for r, h in enumerate(["n1", "n1", "n2", "n2"])]
    report = la_burnin.burnin_report(results, node_count=2, ranks_per_node=2)
    assert report["problems"] == [] and report["slow_nodes"] == []
    assert report["nodes"]["n1"]["tokens_per_s"] == 200.0 and report["nodes"]["n1"]["tflops"] == 1.0
    assert report["loss_went_down"] is True and report["world"] == 4
    assert la_burnin.burnin_table(report)[1].split()[:3] == ["n1", "2", "200.0"]


@pytest.mark.parametrize("results, expected", [
    # n3 is 20% below the median probe figure
    ([_result("n1", 0), _result("n2", 1), _result("n3", 2, probe_tokens_per_s=160.0)], ["n3: 20.0% slower"]),
    # 9% below: within the threshold
    ([_result("n1", 0), _result("n2", 1), _result("n3", 2, probe_tokens_per_s=182.0)], []),
])
def test_burnin_report_flags_a_node_slower_than_the_median(results, expected):
    report = la_burnin.burnin_report(results, node_count=3, ranks_per_node=1, threshold=0.10)
    assert [m[:len(e)] for m, e in zip(report["slow_messages"], expected)] == expected
    assert report["slow_nodes"] == [e.split(":")[0] for e in expected]
    assert report["problems"] == []


@pytest.mark.parametrize("results, node_count, ranks, problem", [
    ([_result("n1", 0, final_loss=6.3)], 1, 1, "loss did not go down"),
    ([_result("n1", 0, initial_loss=None)], 1, 1, "loss did not go down"),
    ([_result("n1", 0), _result("n2", 1)], 3, 1, "results from 2 host(s) (n1, n2), expected 3 nodes"),
    ([_result("n1", 0), _result("n2", 1)], 2, 2, "n1: 1 rank(s) reported, expected 2"),
    ([_result("n2", 1)], 1, 1, "no BURNIN_RESULT from global rank 0"),
])
def test_burnin_report_problems(results, node_count, ranks, problem):
    report = la_burnin.burnin_report(results, node_count=node_count, ranks_per_node=ranks)
    assert any(p.startswith(problem) for p in report["problems"]), report["problems"]


# --------------------------------------------------------------------------- before a launch
@pytest.mark.parametrize("data_path, files", [
    ("/d/x_text_document", ["/d/x_text_document.bin", "/d/x_text_document.idx"]),
    (["0.3", "/d/a", "0.7", "/d/b"], ["/d/a.bin", "/d/a.idx", "/d/b.bin", "/d/b.idx"]),
    ("0.5 /d/a 0.5 /d/b", ["/d/a.bin", "/d/a.idx", "/d/b.bin", "/d/b.idx"]),
    ("", []),
])
def test_data_files(data_path, files):
    assert la_prelaunch.data_files(data_path) == files


@pytest.mark.parametrize("paths, expected", [
    (["/d/a.bin", "/d/a.idx"], [{"path": "/d/a.bin", "what": "W", "fix": "F"}, {"path": "/d/a.idx", "what": "W", "fix": "F"}]),
    (("/d/a.bin",), [{"path": "/d/a.bin", "what": "W", "fix": "F"}]),
    ("/d/one", [{"path": "/d/one", "what": "W", "fix": "F"}]),
    ([], []),
])
def test_required_files(paths, expected):
    assert la_prelaunch.required_files(paths, "W", "F") == expected
    # What prelaunch_problems takes: a missing file is named with its what and fix.
    if expected:
        problems = la_prelaunch.prelaunch_problems({"n1": {"listeners": {}, "ranks": [], "paths": {}}}, expected)
        assert any("W" in p and "F" in p and expected[0]["path"] in p for p in problems), problems


@pytest.mark.parametrize("paths", [[""], [None], ["/d/a", 3], None])
def test_required_files_refuses_non_paths(paths):
    with pytest.raises(ValueError, match="required_files: expected paths as non-empty strings"):
        la_prelaunch.required_files(paths, "W", "F")


REQUIRED = [{"path": "/d/x.bin", "what": "dataset file", "fix": "run prepare_data.yml"}]


def _probe(**extra: Any) -> Dict[str, Any]:
    probe = {"listeners": {"29500": []}, "ranks": [], "paths": {"/d/x.bin": {"exists": True}}}
    probe.update(extra)
    return probe


@pytest.mark.parametrize("probes, ssh, expected", [
    ({"n1": _probe(), "n2": _probe()}, {"n1": {"rc": 0}, "n2": {"rc": 0}}, []),
    ({"n1": _probe(listeners={"29500": [{"pid": 42, "cmdline": "python3 -m http.server 29500"}]}), "n2": _probe()}, {},
     ["n1: port 29500 (the rendezvous port, megatron_job_master_port) is already in use by pid 42 (python3 -m http.server 29500)"]),
    ({"n1": _probe(paths={}), "n2": _probe(paths={"/d/x.bin": {"exists": False}})}, {},
     ["n1, n2: dataset file /d/x.bin is missing; run prepare_data.yml"]),
    ({"n1": _probe(), "n2": _probe()}, {"n2": {"rc": 255, "msg": "ssh: connect to host n2 port 22: Connection refused"}},
     ["n2: unreachable over ssh from the head node n1 as megatron (ssh: connect to host n2 port 22: Connection refused)"]),
    ({"n1": _probe(), "n2": {"unreachable": True, "msg": "Failed to connect"}}, {}, ["n2: unreachable by Ansible (Failed to connect)"]),
    ({"n1": _probe(ranks=[{"pid": 7, "cmdline": "/v/bin/python3 -u /j/burnin/burnin_gpt.py --local_rank=0"}]), "n2": _probe()}, {},
     ["n1: 1 rank process(es) of burnin_gpt.py already running (pids 7)"]),
])
def test_prelaunch_problems_name_the_node_and_the_cause(probes, ssh, expected):
    problems = la_prelaunch.prelaunch_problems(probes, REQUIRED, ssh, head="n1", script="pretrain_gpt.py", user="megatron")
    assert len(problems) == len(expected), problems
    for problem, start in zip(problems, expected):
        assert problem.startswith(start), problem


@pytest.mark.parametrize("lines, expected", [
    (["ok node1", "fail node2 ssh: connect to host node2 port 22: Connection refused", "noise"],
     {"n1": {"rc": 0, "msg": ""}, "n2": {"rc": 255, "msg": "ssh: connect to host node2 port 22: Connection refused"}}),
    ([], {}),
])
def test_ssh_sweep_maps_addresses_back_to_inventory_names(lines, expected):
    assert la_prelaunch.parse_ssh_sweep(lines, {"n1": "node1", "n2": "node2", "n3": "node3"}) == expected


# --------------------------------------------------------------------------- status
def _status_probe(ranks: int, **extra: Any) -> Dict[str, Any]:
    probe = {"ranks": [{"pid": 100 + i, "local_rank": i} for i in range(ranks)]}
    probe.update(extra)
    return probe


@pytest.mark.parametrize("alive, ranks, log, state", [
    (True, 2, {"iterations_logged": 3}, "running"),
    (True, 0, {"iterations_logged": 0}, "starting"),
    (True, 0, {"iterations_logged": 5}, "failed"),
    (False, 0, {"launcher_rc": 0}, "finished"),
    (False, 0, {"launcher_rc": 0, "sigterm": True}, "stopped"),
    (False, 0, {"launcher_rc": 1}, "failed"),
])
def test_job_status_states(alive, ranks, log, state):
    probes = {"n1": _status_probe(ranks, launcher={"alive": alive}, log=dict(log, last={"iteration": 3}),
                                  checkpoint={"dir": "/c", "latest": "global_step2", "tags": ["global_step2"]}),
              "n2": _status_probe(ranks)}
    status = la_status.job_status(probes, "n1", "n1", {"job": "train"})
    assert status["state"] == state
    assert status["ranks_alive"] == 2 * ranks and status["checkpoint_latest"] == "global_step2"
    assert status["nodes"]["n2"]["local_ranks"] == list(range(ranks))
    assert la_status.status_lines(status)[0].startswith("job train: %s" % state)


@pytest.mark.parametrize("slurm, alive, ranks, log, state", [
    ({"job_id": "7", "state": "PENDING", "alive": True, "reason": "Resources"}, True, 0, {}, "queued"),
    ({"job_id": "7", "state": "RUNNING", "alive": True}, True, 2, {"iterations_logged": 1}, "running"),
    ({"job_id": "7", "state": "RUNNING", "alive": True}, True, 0, {}, "starting"),
    ({"job_id": "7", "state": "COMPLETED", "alive": False}, False, 0, {"launcher_rc": 0, "sigterm": True}, "stopped"),
    # Cancelled or timed out before the batch script wrote its exit line.
    ({"job_id": "7", "state": "CANCELLED", "alive": False}, False, 0, {}, "failed"),
])
def test_job_status_of_a_slurm_job(slurm, alive, ranks, log, state):
    probes = {"n1": _status_probe(ranks, launcher={"slurm_job_id": "7", "state": slurm["state"], "alive": alive},
                                  slurm=slurm, log=log),
              "n2": _status_probe(ranks)}
    status = la_status.job_status(probes, "n1", "n1", {"job": "burnin", "backend": "slurm", "slurm_job_id": "7"})
    assert status["state"] == state and status["backend"] == "slurm" and status["slurm"] == slurm
    lines = la_status.status_lines(status)
    assert lines[0].startswith("job burnin: %s" % state)
    assert lines[1].startswith("slurm job 7: %s" % slurm["state"])


def test_job_status_without_record_or_with_an_unreachable_node():
    status = la_status.job_status({"n1": _status_probe(0), "n2": {"unreachable": True}}, "n1", "n1", None)
    assert status["state"] == "not started" and status["unreachable"] == ["n2"]
    assert "n2                   unreachable" in la_status.status_lines(status)


# --------------------------------------------------------------------------- /proc readers
def _fake_proc(tmp_path: Path, processes: Dict[int, List[str]], sockets: Dict[int, str], listen: List[tuple]) -> Path:
    proc = tmp_path / "proc"
    (proc / "net").mkdir(parents=True)
    header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
    rows = []
    for index, (port, state, inode) in enumerate(listen):
        rows.append("   %d: 00000000:%04X 00000000:0000 %s 00000000:00000000 00:00000000 00000000  1000        0 %s 1\n"
                    % (index, port, state, inode))
    (proc / "net" / "tcp").write_text(header + "".join(rows))
    (proc / "net" / "tcp6").write_text(header)
    for pid, argv in processes.items():
        (proc / str(pid) / "fd").mkdir(parents=True)
        (proc / str(pid) / "cmdline").write_bytes(b"\x00".join(a.encode() for a in argv) + b"\x00")
    for pid, inode in sockets.items():
        os.symlink("socket:[%s]" % inode, str(proc / str(pid) / "fd" / "3"))
    return proc


def test_scan_listeners_finds_the_process_on_the_port(tmp_path):
    proc = _fake_proc(tmp_path, {4242: ["python3", "-m", "http.server", "29500"], 7: ["sshd"]},
                      {4242: "555", 7: "556"}, [(29500, "0A", "555"), (22, "0A", "556"), (29501, "01", "557")])
    found = la_processes.scan_listeners([29500, 29501, 8080], proc=str(proc))
    assert found[29500] == [{"pid": 4242, "cmdline": "python3 -m http.server 29500"}]
    assert found[29501] == [] and found[8080] == []  # 29501 is ESTABLISHED, not LISTEN


def test_scan_listeners_reports_an_invisible_owner(tmp_path):
    proc = _fake_proc(tmp_path, {}, {}, [(29500, "0A", "999")])
    assert la_processes.scan_listeners([29500], proc=str(proc))[29500] == [{"pid": None, "cmdline": ""}]


def test_scan_processes_finds_ranks_with_their_local_rank(tmp_path):
    proc = _fake_proc(tmp_path, {
        10: ["/v/bin/python3", "-u", "pretrain_gpt.py", "--local_rank=0", "--x"],
        11: ["/v/bin/python3", "-u", "pretrain_gpt.py", "--local_rank=1", "--x"],
        12: ["/v/bin/python3", "-u", "-m", "deepspeed.launcher.launch", "pretrain_gpt.py"],
    }, {}, [])
    found = la_processes.scan_processes(la_processes.rank_pattern("pretrain_gpt.py"), proc=str(proc), exclude=[11])
    assert [(p["pid"], p["local_rank"]) for p in found] == [(10, 0)]


@pytest.mark.parametrize("unwritable, expected", [
    ({"n1": "", "n2": ""}, []),
    ({"n1": "/c/gpt, owned by root mode 755", "n2": ""},
     ["n1: the checkpoint directory is not writable by megatron (/c/gpt, owned by root mode 755)"]),
])
def test_prelaunch_problems_unwritable_checkpoint_directory(unwritable, expected):
    problems = la_prelaunch.prelaunch_problems({"n1": _probe(), "n2": _probe()}, REQUIRED, {}, head="n1", user="megatron",
                                               unwritable=unwritable)
    assert [p[:len(e)] for p, e in zip(problems, expected)] == expected and len(problems) == len(expected)


# --------------------------------------------------------------------------------------------
# DeepSpeed's CPU all-reduce buffers in /dev/shm
# --------------------------------------------------------------------------------------------
BUF = la_shm.SHM_BUFFER_PREFIX


@pytest.mark.parametrize("names, uid, mapped, expected", [
    ([], 1000, [], []),
    ([BUF + "1000_node1_29500_0", BUF + "1000_node1_29500_1"], 1000, [],
     ["/dev/shm/" + BUF + "1000_node1_29500_0", "/dev/shm/" + BUF + "1000_node1_29500_1"]),
    # A running job's buffer is kept: a late rank opens its peers' buffers by name.
    ([BUF + "1000_node1_29500_0", BUF + "1000_node1_29501_0"], 1000, ["/dev/shm/" + BUF + "1000_node1_29500_0"],
     ["/dev/shm/" + BUF + "1000_node1_29501_0"]),
    # Another user's buffers, uid 10000 (prefix of 1000 as text) and other files are left.
    ([BUF + "0_a_1_0", BUF + "10000_a_1_0", "sem.mp-1", "torch_123"], 1000, [], []),
    ([BUF + "0_a_1_0"], 0, [], ["/dev/shm/" + BUF + "0_a_1_0"]),
])
def test_stale_shm_buffers(names, uid, mapped, expected):
    assert la_shm.stale_shm_buffers(names, uid, mapped) == expected


def _fake_maps(proc: Path, pid: int, paths: List[str]) -> None:
    (proc / str(pid)).mkdir(parents=True)
    lines = ["7f00-7f01 rw-s 00000000 00:1a %d %s" % (i, path) for i, path in enumerate(paths)]
    lines.append("7f02-7f03 r-xp 00000000 08:01 1 /usr/lib/libc.so.6")
    lines.append("7ffd-7ffe rw-p 00000000 00:00 0")
    (proc / str(pid) / "maps").write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("per_pid, expected", [
    ({}, []),
    ({10: ["/dev/shm/a"], 11: ["/dev/shm/a", "/dev/shm/b c"]}, ["/dev/shm/a", "/dev/shm/b c"]),
    ({12: ["/dev/shm/gone (deleted)", "/tmp/x"]}, ["/dev/shm/gone"]),
])
def test_mapped_paths(tmp_path, per_pid, expected):
    for pid, paths in per_pid.items():
        _fake_maps(tmp_path, pid, paths)
    (tmp_path / "self").mkdir()  # not a pid: skipped
    assert la_shm.mapped_paths(str(tmp_path)) == expected


def test_sweep_shm_buffers_keeps_a_mapped_buffer(tmp_path):
    """Against this process's real /proc: the buffer it maps stays, the stale one goes."""
    import mmap
    shm = tmp_path / "shm"
    shm.mkdir()
    uid = os.getuid()
    live, stale, other = (shm / (BUF + "%d_h_1_0" % uid), shm / (BUF + "%d_h_1_1" % uid), shm / "other")
    for path in (live, stale, other):
        path.write_bytes(b"\0" * 4096)
    with open(live, "r+b") as handle, mmap.mmap(handle.fileno(), 4096) as mapping:
        assert la_shm.sweep_shm_buffers(uid, str(shm)) == [str(stale)]
        assert mapping[0] == 0
    assert sorted(os.listdir(shm)) == sorted([live.name, other.name])
    assert la_shm.sweep_shm_buffers(uid, str(shm)) == [str(live)]
    assert la_shm.sweep_shm_buffers(uid, str(tmp_path / "absent")) == []


def test_shm_sweep_command_matches_sweep_shm_buffers(tmp_path):
    """The supervisor's shell form removes what sweep_shm_buffers would, and keeps a mapped buffer."""
    import mmap
    uid = os.getuid()
    names = [BUF + "%d_h_1_0" % uid, BUF + "%d_h_1_1" % uid, BUF + "%d_h_1_0" % (uid + 1), "other"]
    for name in names:
        (tmp_path / name).write_bytes(b"\0" * 4096)
    with open(tmp_path / names[0], "r+b") as handle, mmap.mmap(handle.fileno(), 4096):
        expected = la_shm.stale_shm_buffers(os.listdir(tmp_path), uid, la_shm.mapped_paths(under=str(tmp_path) + "/"),
                                            str(tmp_path))
        proc = subprocess.run(["sh", "-c", la_shm.shm_sweep_command(str(tmp_path) + "/")], check=False)
        assert proc.returncode == 0
        assert expected == [str(tmp_path / names[1])]
        assert sorted(os.listdir(tmp_path)) == sorted([names[0], names[2], "other"])


_START = "=== megatron_launch 2026-12-01T17:00:00Z: start burnin_gpt.py /w/burnin.sh"
_MEGATRON = (" iteration        %d/  100000 | consumed samples:           16 | elapsed time per iteration (ms): 109.2 |"
             " learning rate: 6.000E-05 | global batch size:    16 | lm loss: %s | loss scale: 1.0 |")


@pytest.mark.parametrize("line, kind, iteration, loss", [
    ("node1: BURNIN step=7 loss=5.4110 step_time=0.050s tokens_per_s_per_rank=640.0", "burnin", 7, 5.411),
    (_MEGATRON % (51, "6.356577E+00"), "megatron", 51, 6.356577),
    ("node1: BURNIN resumed from /c/global_step5 at step 5 (client state 5)", None, None, None),
    (_START, None, None, None),
])
def test_iteration_entry(line, kind, iteration, loss):
    got_kind, entry = la_logs.iteration_entry(line)
    assert got_kind == kind
    if kind is None:
        assert entry is None
    else:
        assert (entry["iteration"], entry["lm_loss"]) == (iteration, pytest.approx(loss))


@pytest.mark.parametrize("lines, expected", [
    # two launches: the second, resumed from the tag at 1, logs iteration 2 again
    ([_START, "BURNIN step=1 loss=5.5 step_time=0.1s tokens_per_s_per_rank=1.0",
      "BURNIN step=2 loss=5.4 step_time=0.1s tokens_per_s_per_rank=1.0",
      "=== megatron_launch 2026-12-01T17:01:00Z: launcher exited rc=137", _START,
      "BURNIN step=2 loss=5.4 step_time=0.1s tokens_per_s_per_rank=1.0"],
     [[(1, 5.5), (2, 5.4)], [(2, 5.4)]]),
    # iterations before the first start line belong to no launch; a Megatron line without a loss is left out
    (["BURNIN step=9 loss=1.0 step_time=0.1s tokens_per_s_per_rank=1.0", _START, _MEGATRON % (3, "7.5E+00"),
      " iteration        4/  100000 | consumed samples:           64 | elapsed time per iteration (ms): 1.0 |"],
     [[(3, 7.5)]]),
    ([], []),
])
def test_launch_losses(lines, expected):
    assert la_logs.launch_losses(lines) == expected
