# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_launch.logs: parsing a job's log (Megatron-DeepSpeed and burn-in lines, launches, checkpoints
saved and loaded, errors) and the per-launch losses."""
from __future__ import annotations

import json

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import logs as la_logs
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import log as _megatron_log

from .launch_fixtures import burnin_result as _result


MEGATRON_LINE = (
    " iteration       10/      15 | consumed samples:          120 | consumed tokens:        15360 |"
    " elapsed time per iteration (ms): 1527.3 | learning rate: 9.000E-05 | global batch size:    12 |"
    " lm loss: 7.800000E+00 | loss scale: 1.0 | grad norm: 2.345 | actual seqlen:   128 |"
    " number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 7.857 |"
    " tokens per gpu per second (tgs): 36326.869 | TFLOPs: 310.83 |"
)


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


def _part_lines(rank, result, size=40, prefix=""):
    """A rank's result cut as burnin_gpt.py result_lines cuts it (compact JSON, numbered chunks
    closed by "|"), small chunks so that one result spans several lines."""
    text = json.dumps(result, sort_keys=True, separators=(",", ":"))
    chunks = [text[at:at + size] for at in range(0, len(text), size)]
    return ["%sBURNIN_RESULT_PART %d %d/%d %s|" % (prefix, rank, index + 1, len(chunks), chunk)
            for index, chunk in enumerate(chunks)]


def _interleaved(*streams):
    out = []
    for row in range(max(len(stream) for stream in streams)):
        out.extend(stream[row] for stream in streams if row < len(stream))
    return out


R0 = dict(_result("node1", 0), flops_formula="6*P + 12*L*h*s (P = matmul weights)")
R1 = _result("node2", 1)


@pytest.mark.parametrize("lines, ranks, problems", [
    # In order, and with pdsh's node prefix.
    (_part_lines(0, R0), [0], []),
    (_part_lines(0, R0, prefix="node1: "), [0], []),
    # Two ranks' parts interleaved line by line (srun forwarding two tasks), and in reverse order.
    (_interleaved(_part_lines(0, R0), _part_lines(1, R1)), [0, 1], []),
    (list(reversed(_part_lines(0, R0))), [0], []),
    # A chunk ending in a space (the formula's): the closing "|" keeps it.
    (_part_lines(0, R0, size=2), [0], []),
    # A part seen twice (a repeated line) counts once.
    (_part_lines(0, R0) + _part_lines(0, R0)[:1], [0], []),
    # Two parts written into one line (the launcher merged two writes).
    (["".join(_part_lines(1, R1, size=10000)) + "".join(_part_lines(0, R0, size=10000))], [0, 1], []),
    # A part missing: that rank is reported, the other still read.
    (_part_lines(0, R0)[:1] + _part_lines(0, R0)[2:] + _part_lines(1, R1), [1],
     ["BURNIN_RESULT_PART of rank 0: part(s) 2 of %d missing from the log" % len(_part_lines(0, R0))]),
    # Parts that put together are no JSON object.
    (["BURNIN_RESULT_PART 3 1/2 {\"a\":|", "BURNIN_RESULT_PART 3 2/2 }|"], [], ["BURNIN_RESULT_PART of rank 3: its 2 part(s) do not decode"]),
    (["BURNIN_RESULT_PART 4 1/1 [1,2]|"], [], ["BURNIN_RESULT_PART of rank 4: not a JSON object"]),
    # A line cut before its closing "|" holds no part.
    (["BURNIN_RESULT_PART 5 1/1 {\"rank\":5}"], [], []),
])
def test_result_parts_are_put_together_per_rank(lines, ranks, problems):
    parts = la_logs.ResultParts()
    for line in lines:
        parts.add(line)
    found, reported = parts.results()
    assert [result["rank"] for result in found] == ranks
    assert [problem[:len(expected)] for problem, expected in zip(reported, problems)] == problems
    assert len(reported) == len(problems)
    if 0 in ranks:
        assert found[0] == R0


def test_a_burnin_log_in_parts_reads_as_its_results():
    """parse_log: the parts of every rank, whatever lines came between them, and a rank whose
    parts do not put together named among the errors."""
    lines = (["node1: BURNIN step=10 loss=4.9000 step_time=0.100s tokens_per_s_per_rank=1280.0"]
             + _interleaved(_part_lines(0, R0, prefix="node1: "), _part_lines(1, R1, prefix="node2: "),
                            ["node3: some other output"] * 5)
             + _part_lines(2, _result("node3", 2), prefix="node3: ")[1:])
    summary = la_logs.parse_log(lines)
    assert summary["kind"] == "burnin"
    assert [r["rank"] for r in summary["burnin_results"]] == [0, 1]
    assert summary["errors"][-1].startswith("BURNIN_RESULT_PART of rank 2: part(s) 1 of ")


def test_error_lines_are_kept_last_first():
    lines = ["node2: Traceback (most recent call last):", "node2: FileNotFoundError: [Errno 2] No such file",
             "pdsh@node1: node2: ssh exited with exit code 1"]
    assert la_logs.parse_log(lines, error_lines=2)["errors"] == lines[1:]


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


@pytest.mark.parametrize("line, expected", [
    # DeepSpeed 0.19.6's runner line: values in double quotes (from 0.15.2), a quote escaped inside.
    ('[INFO] [runner.py:630:main] cmd = pdsh -S -f 1024 -w n1,n2 export WANDB_API_KEY="tok-1"; '
     'export OPTS="a \\"b\\" c"; cd /opt/mds; /venv/bin/python -u -m deepspeed.launcher.launch',
     '[INFO] [runner.py:630:main] cmd = pdsh -S -f 1024 -w n1,n2 export WANDB_API_KEY=<hidden>; '
     'export OPTS=<hidden>; cd /opt/mds; /venv/bin/python -u -m deepspeed.launcher.launch'),
    # DeepSpeed 0.9.2: unquoted values.
    ("cmd = pdsh -w n1 export HF_TOKEN=hf_abc123; export PYTHONPATH=/opt/mds; cd /opt/mds;",
     "cmd = pdsh -w n1 export HF_TOKEN=<hidden>; export PYTHONPATH=<hidden>; cd /opt/mds;"),
    # An empty value, and a line with no export: unchanged but for the value.
    ("export EMPTY=; cd /x", "export EMPTY=<hidden>; cd /x"),
    ("iteration 10/ 20 | lm loss: 5.0 | exported=3", "iteration 10/ 20 | lm loss: 5.0 | exported=3"),
    ("node1: exporter started", "node1: exporter started"),
])
def test_redact_exports_hides_every_exported_value(line, expected):
    assert la_logs.redact_exports(line) == expected


def test_an_error_line_with_the_launchers_command_is_kept_without_its_values():
    """A launch that failed at once: its errors, which the playbooks print, hold the runner's
    command line with the job's token hidden."""
    lines = ["=== megatron_launch 2026-01-01T00:00:00Z: start train.sh /w/train.sh",
             'cmd = pdsh -w n1,n2 export WANDB_API_KEY="tok-secret-1"; cd /w; python -u -m deepspeed.launcher.launch'
             " ... ssh exited with exit code 255"]
    summary = la_logs.parse_log(lines)
    assert summary["errors"] and all("tok-secret-1" not in error for error in summary["errors"])
    assert "WANDB_API_KEY=<hidden>" in summary["errors"][0]
