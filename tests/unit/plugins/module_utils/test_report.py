# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Unit tables for the verdict formatter shared by preflight and validate_job (module_utils/_report.py)."""
from __future__ import annotations

import datetime
import json
import os

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils import _report as rp

# The example: an EXPECTED cell and a fix long enough to make the old table > 300 wide.
LONG_FIX = ("run the megatron_ds.cluster.python_env role on node3 so torch matches (torch==1.13.1 from "
            "https://download.pytorch.org/whl/cu117)")
TORCH = {"check": "torch.version", "status": "fail", "node": "node3", "component": "torch",
         "found": "1.13.0+cu117", "expected": "1.13.1 (+cu117)", "fix": LONG_FIX}
SAME = {"check": "same.torch", "status": "fail", "node": "node3", "component": "torch",
        "found": "1.13.0+cu117", "expected": "1.13.1+cu117 (as on the other nodes)",
        "fix": "make the torch on node3 match the other nodes: run the megatron_ds.cluster.python_env role on node3"}
MEMLOCK = {"check": "memlock.unlimited", "status": "warn", "node": "node2", "component": "memlock",
           "found": "current 8192, non-interactive ssh 8192",
           "expected": "unlimited (also in a non-interactive ssh session); advised, not required (no Active RDMA "
                       "port and infiniband_required false: NCCL uses sockets)",
           "fix": "set memlock unlimited on node2 with the megatron_ds.cluster.os_base role (limits.d and pam_limits "
                  "for sshd): NCCL over InfiniBand pins memory, and pdsh starts ranks in a non-interactive ssh session"}
PASSES = [{"check": "driver.version", "status": "pass", "node": node, "component": "driver", "found": "515.65.01",
           "expected": ">= 515.65.01", "fix": ""} for node in ("node1", "node2", "node3")]
PARTIAL = [{"check": "torch.version", "status": "pass", "node": node, "component": "torch", "found": "1.13.1+cu117",
            "expected": "1.13.1 (+cu117)", "fix": ""} for node in ("node1", "node2")]
SKIPPED = [{"check": "same.gpu_model", "status": "skip", "node": "all", "component": "gpu", "found": "",
            "expected": "", "fix": "profile cpu runs on CPU"}]
VALIDATE = {"check": "global batch divisible", "status": "fail", "component": "batch", "found": "global 100, micro 3, DP 4",
            "expected": "global batch a multiple of micro batch x DP (12)", "fix": "set megatron_job_global_batch_size to 96 or 108"}
ROWS = [PASSES[0], TORCH, MEMLOCK, PASSES[1], SAME, PASSES[2]] + PARTIAL + SKIPPED
SUMMARY = "preflight FAILED for profile cu117 on 3 node(s): 2 failed, 1 warning(s), 5 passed, 1 skipped; failing: node3"


@pytest.mark.parametrize("row, first, contains", [
    (TORCH, "FAIL node3 torch (torch.version): found 1.13.0+cu117; expected 1.13.1 (+cu117); fix: run",
     ["https://download.pytorch.org/whl/cu117)"]),
    (MEMLOCK, "WARN node2 memlock (memlock.unlimited): found current 8192, non-interactive ssh 8192; expected",
     ["non-interactive ssh session"]),
    # validate_job's findings have no node: the component and the check name it.
    (VALIDATE, "FAIL batch (global batch divisible): found global 100, micro 3, DP 4; expected", ["96 or 108"]),
    ({"status": "warn", "check": "x", "component": "c", "found": "", "expected": None}, "WARN c (x): found -; expected -", []),
])
def test_finding_is_one_wrapped_line_with_node_component_found_expected_fix(row, first, contains):
    lines = rp.finding_lines(row, width=100)
    assert lines[0].startswith(first)
    assert all(len(line) <= 100 for line in lines)
    assert all(line.startswith(" " * 5) and not line[5].isspace() for line in lines[1:])
    joined = " ".join(line.strip() for line in lines)
    assert all(text in joined for text in contains)
    assert ("fix: " in joined) is bool(row.get("fix"))


@pytest.mark.parametrize("width", [60, 80, 120, 160])
def test_lines_fit_the_width_and_a_longer_path_stays_whole(width):
    path = "/" + "r" * 200 + ".txt"
    lines = rp.render(ROWS, SUMMARY + "; report: " + path, verbosity=1, width=width).splitlines()
    for line in lines:
        # Only a word longer than the line may make it wider, alone on its line, unbroken.
        assert len(line) <= width or line.split() == [path], line
    assert "     " + path in lines


@pytest.mark.parametrize("verbosity, present, absent", [
    (0, ["FAIL node3 torch (torch.version)", "FAIL node3 torch (same.torch)", "WARN node2 memlock"],
     ["pass ", "skip "]),
    (1, ["FAIL node3", "pass all driver (driver.version): 515.65.01",
         "pass node1,node2 torch (torch.version): 1.13.1+cu117", "skip all gpu (same.gpu_model): profile cpu runs on CPU"],
     []),
])
def test_render_shows_pass_and_skip_only_with_verbosity(verbosity, present, absent):
    text = rp.render(ROWS, SUMMARY, verbosity=verbosity, width=160)
    lines = text.splitlines()
    assert lines[-1] == SUMMARY
    for item in present:
        assert any(line.startswith(item) for line in lines), (item, text)
    for item in absent:
        assert not any(line.startswith(item) for line in lines), (item, text)
    # Failures first, then warnings, in the order found.
    starts = [line.split()[0] for line in lines if line.split()[0] in ("FAIL", "WARN")]
    assert starts == ["FAIL", "FAIL", "WARN"]


def test_clean_verdict_is_the_summary_line_alone():
    assert rp.render(PASSES, "preflight passed", verbosity=0) == "preflight passed"


@pytest.mark.parametrize("rows, expected", [
    (ROWS, {"fail": 2, "warn": 1, "pass": 5, "skip": 1}),
    ([], {"fail": 0, "warn": 0, "pass": 0, "skip": 0}),
])
def test_counts(rows, expected):
    assert rp.counts(rows) == expected


def test_table_has_every_row_in_fixed_columns():
    text = rp.table(ROWS)
    lines = text.splitlines()
    header = lines[0]
    assert header.split() == ["STATUS", "CHECK", "NODE", "COMPONENT", "FOUND", "EXPECTED", "FIX"]
    assert len(lines) == 2 + len(ROWS)  # header, rule, one line per row: nothing collapsed
    starts = [header.index(name) for name in ("CHECK", "NODE", "COMPONENT", "FOUND", "EXPECTED", "FIX")]
    for line in lines[2:]:
        for start in starts[:-1]:
            assert line[start - 2:start] == "  ", line
    assert [line.split()[0] for line in lines[2:]] == ["pass", "FAIL", "WARN", "pass", "FAIL", "pass", "pass", "pass", "skip"]
    assert LONG_FIX in text


def test_table_leaves_out_a_column_no_row_fills():
    assert rp.table([VALIDATE]).splitlines()[0].split() == ["STATUS", "CHECK", "COMPONENT", "FOUND", "EXPECTED", "FIX"]


@pytest.mark.parametrize("env_columns, indent, expected", [
    ("300", 0, 160),  # a wide terminal: still 160
    ("120", 0, 120),
    ("120", 8, 112),
    ("20", 0, rp.MIN_WIDTH),
])
def test_terminal_width(monkeypatch, env_columns, indent, expected):
    monkeypatch.setenv("COLUMNS", env_columns)
    assert rp.terminal_width(indent) == expected


NOW = datetime.datetime(2026, 12, 1, 2, 30, 11, tzinfo=datetime.timezone.utc)


def test_write_puts_every_row_in_both_files(tmp_path):
    directory = tmp_path / "reports" / "deeper"
    text_path, json_path = rp.write(str(directory), "preflight", ROWS, SUMMARY, {"profile": "cu117"}, now=NOW)
    assert text_path == str(directory / "preflight-20261201T023011Z.txt")
    assert json_path == str(directory / "preflight-20261201T023011Z.json")
    text = open(text_path).read()
    assert text.startswith("preflight report, 2026-12-01T02:30:11Z\n%s\n\n" % SUMMARY)
    assert rp.table(ROWS) in text
    data = json.load(open(json_path))
    assert data["rows"] == ROWS
    assert data["profile"] == "cu117" and data["summary"] == SUMMARY
    assert data["counts"] == rp.counts(ROWS) and data["created"] == "2026-12-01T02:30:11Z"


def test_write_never_overwrites_a_report_of_the_same_second(tmp_path):
    first = rp.write(str(tmp_path), "validate", [VALIDATE], "one", now=NOW)
    second = rp.write(str(tmp_path), "validate", [VALIDATE], "two", now=NOW)
    assert first[0] != second[0] and second[0].endswith("validate-20261201T023011Z-1.txt")
    assert json.load(open(first[1]))["summary"] == "one"


def test_write_expands_the_home_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    text_path, _json_path = rp.write("~/r", "preflight", PASSES, "ok", now=NOW)
    assert text_path.startswith(os.path.join(str(tmp_path), "r") + os.sep)


def test_write_raises_where_it_cannot_write(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(OSError):
        rp.write(str(blocker / "sub"), "preflight", PASSES, "ok", now=NOW)
