# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tables for the Slurm health check (plugins/module_utils/_slurm/health.py)."""
from __future__ import annotations

import copy

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import gate as pf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._slurm import health as sh
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles

from .._preflight.preflight_facts import make_node


def rows_for(profile: str, facts, gpus: int = 0, with_venv: bool = True, exclude=()):
    return sh.node_rows("gpu01", facts, _stack_profiles.get(profile), gpus, with_venv, exclude)


def failed_checks(rows):
    return [row.check for row in sh.failures(rows)]


def lose_gpu(facts):
    facts = copy.deepcopy(facts)
    facts["gpus"]["count"] = 7
    return facts


def no_torch(facts):
    facts = copy.deepcopy(facts)
    facts["torch"] = {"version": None, "cuda": None, "cudnn": None, "nccl": None, "error": None}
    return facts


def old_driver(facts):
    facts = copy.deepcopy(facts)
    facts["driver"]["version"] = "470.57.02"
    return facts


@pytest.mark.parametrize("profile, change, gpus, with_venv, exclude, failing", [
    # A node that matches its profile passes, whatever the profile.
    ("cu117", None, 8, True, (), []),
    ("cu130", None, 8, True, (), []),
    ("cpu", None, 0, True, (), []),
    # A GPU fell off the bus: nvidia-smi sees 7, slurm.conf promised 8.
    ("cu117", lose_gpu, 8, True, (), ["gpu.count"]),
    # The venv lost torch: the preflight's torch check fails...
    ("cu117", no_torch, 8, True, (), ["torch.version"]),
    # ...unless the health check runs without a venv, or the check is excluded.
    ("cu117", no_torch, 8, False, (), []),
    ("cu117", no_torch, 8, True, ("torch.version",), []),
    # A driver older than the profile's minimum (the fabric manager no longer matches it either).
    ("cu117", old_driver, 8, True, (), ["driver.version", "fabric_manager.version"]),
    # A CPU node checked against a GPU profile: no GPU, no driver, no toolkit.
    ("cu117", lambda f: make_node("cpu", "gpu01"), 0, False, (),
     ["gpu.present", "driver.version", "cuda.toolkit", "cudnn.system", "nccl.system"]),
])
def test_node_rows(profile, change, gpus, with_venv, exclude, failing):
    facts = make_node(profile, "gpu01")
    if change:
        facts = change(facts)
    assert failed_checks(rows_for(profile, facts, gpus, with_venv, exclude)) == failing


def test_without_venv_the_venv_checks_are_left_out():
    checks = [row.check for row in rows_for("cu117", make_node("cu117", "gpu01"), 8, with_venv=False)]
    assert not set(checks) & set(sh.VENV_CHECKS)
    assert {"gpu.present", "driver.version", "cuda.toolkit", "gpu.count"} <= set(checks)


def test_unusable_facts_fail_the_node():
    rows = sh.node_rows("gpu01", None, _stack_profiles.get("cu117"), 8)
    assert [(row.check, row.status) for row in rows] == [("facts.gathered", pf.FAIL)]


@pytest.mark.parametrize("found, expected, status", [(8, 8, pf.PASS), (7, 8, pf.FAIL), (0, 8, pf.FAIL), (9, 8, pf.FAIL)])
def test_check_gpu_count(found, expected, status):
    row = sh.check_gpu_count("gpu01", {"gpus": {"count": found}}, expected)
    assert (row.status, row.found, row.expected) == (status, str(found), str(expected))
    if status == pf.FAIL:
        assert "nvidia-smi on gpu01 sees %d GPU(s), slurm.conf promised %d" % (found, expected) in row.fix


def test_check_gpu_count_without_gpus_is_no_row():
    assert sh.check_gpu_count("n", {"gpus": {"count": 0}}, 0) is None


ROW = pf.Row("gpu.count", pf.FAIL, "gpu01", "gpu", "7", "8", "fix it")
ROW2 = pf.Row("torch.version", pf.FAIL, "gpu01", "torch", "missing", "1.13.1", "")


@pytest.mark.parametrize("failed, expected", [
    ([ROW], "megatron-health: gpu.count found 7, expected 8"),
    ([ROW, ROW2], "megatron-health: gpu.count found 7, expected 8 (+1 more)"),
    ([pf.Row("x", pf.FAIL, "n", "c")], "megatron-health: x found nothing, expected ?"),
    ([pf.Row("x", pf.FAIL, "n", "c", "y" * 500, "z")], "megatron-health: x found " + "y" * (200 - 25)),
])
def test_drain_reason(failed, expected):
    assert sh.drain_reason(failed) == expected
    assert len(sh.drain_reason(failed)) <= sh.REASON_MAX


SHOW_IDLE = ("NodeName=node3 Arch=x86_64 CoresPerSocket=2 CPUAlloc=0 CPUTot=2 CPULoad=0.10 AvailableFeatures=(null) "
             "ActiveFeatures=(null) Gres=(null) NodeAddr=node3 NodeHostName=node3 Version=22.05.8 OS=Linux "
             "RealMemory=23081 AllocMem=0 FreeMem=1000 Sockets=1 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 "
             "Weight=1 Owner=N/A MCS_label=N/A Partitions=train,debug BootTime=2026-12-01T02:00:00 "
             "SlurmdStartTime=2026-12-01T02:20:00 LastBusyTime=2026-12-01T02:21:00 CfgTRES=cpu=2,mem=23081M,billing=2 "
             "AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s")
SHOW_OURS = SHOW_IDLE.replace("State=IDLE", "State=IDLE+DRAIN") + (
    " Reason=megatron-health: gpu.count found 7, expected 8 [root@2026-12-01T02:22:00]")
SHOW_ADMIN = SHOW_IDLE.replace("State=IDLE", "State=MIXED+DRAIN") + " Reason=bad fan [root@2026-12-01T02:22:00]"
SHOW_DOWN = SHOW_IDLE.replace("State=IDLE", "State=DOWN*+DRAIN") + " Reason=Not responding [slurm@2026-12-01T02:22:00]"


@pytest.mark.parametrize("text, flags, reason", [
    (SHOW_IDLE, ["IDLE"], ""),
    (SHOW_OURS, ["IDLE", "DRAIN"], "megatron-health: gpu.count found 7, expected 8"),
    (SHOW_ADMIN, ["MIXED", "DRAIN"], "bad fan"),
    (SHOW_DOWN, ["DOWN", "DRAIN"], "Not responding"),
    ("", [], ""),
])
def test_parse_node_state(text, flags, reason):
    assert sh.parse_node_state(text) == (flags, reason)


@pytest.mark.parametrize("text, failed, action, reason", [
    (SHOW_IDLE, [], sh.NOTHING, ""),
    (SHOW_IDLE, [ROW], sh.DRAIN, "megatron-health: gpu.count found 7, expected 8"),
    # Already drained by us for the same reason: nothing to do.
    (SHOW_OURS, [ROW], sh.NOTHING, "megatron-health: gpu.count found 7, expected 8"),
    # Drained by us, now failing for another reason: the reason is brought up to date.
    (SHOW_OURS, [ROW2], sh.UPDATE, "megatron-health: torch.version found missing, expected 1.13.1"),
    # Healthy again: resumed, since we drained it.
    (SHOW_OURS, [], sh.RESUME, ""),
    # An administrator's drain is never undone or overwritten.
    (SHOW_ADMIN, [], sh.NOTHING, "bad fan"),
    (SHOW_ADMIN, [ROW], sh.NOTHING, "bad fan"),
])
def test_decide(text, failed, action, reason):
    flags, current = sh.parse_node_state(text)
    assert sh.decide(flags, current, failed) == (action, reason)


@pytest.mark.parametrize("action, reason, argv", [
    (sh.DRAIN, "r x", ["scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=r x"]),
    (sh.UPDATE, "r", ["scontrol", "update", "NodeName=n1", "State=DRAIN", "Reason=r"]),
    (sh.RESUME, "", ["scontrol", "update", "NodeName=n1", "State=RESUME"]),
    (sh.NOTHING, "", None),
])
def test_scontrol_argv(action, reason, argv):
    assert sh.scontrol_argv(action, "n1", reason) == argv


def test_summary_lists_problems_and_the_verdict():
    rows = [ROW, pf.Row("driver.version", pf.PASS, "gpu01", "driver", "535", ">= 515")]
    text = sh.summary("gpu01", rows, sh.DRAIN)
    assert text.splitlines() == [
        "FAIL gpu01 gpu.count: found 7, expected 8; fix: fix it",
        "megatron-health on gpu01: 1 failed, 0 warning(s), 1 passed, 0 skipped; action: drain",
    ]


def _fabric_verdict(slow):
    """A finished bisection over gpu01..gpu04 where ``slow`` (or nobody) runs at 4 GB/s against a site figure of 8."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import bisect, thresholds, verdict

    nodes = ["gpu01", "gpu02", "gpu03", "gpu04"]
    site = thresholds.Threshold("cross", 8.0, "GB/s", thresholds.ORIGIN_SITE, "set by the site")
    results = []
    step = bisect.next_step(nodes, results)
    while not step["done"]:
        for group in step["measure"]:
            results.append(dict(thresholds.judge("g", 4.0 if slow in group else 10.0, site), nodes=group))
        step = bisect.next_step(nodes, results)
    return verdict.build(nodes, results, "2026-12-07T19:00:00Z", 1.0)


@pytest.mark.parametrize("slow, status, reason", [
    # Named by the fabric gate: drained with the pair it failed in, measured against expected and the origin.
    ("gpu01", pf.FAIL, "megatron-health: fabric.allreduce found 4 GB/s with gpu03, expected >= 8 GB/s, site override"),
    # Another node named, or the world healthy: the row passes, so a drain of ours is resumed.
    ("gpu02", pf.PASS, None),
    (None, pf.PASS, None),
])
def test_the_fabric_verdict_drains_the_node_it_names(slow, status, reason):
    rows = sh.node_rows("gpu01", make_node("cpu", "gpu01"), _stack_profiles.get("cpu"), 0, False,
                        fabric=_fabric_verdict(slow))
    fabric = [row for row in rows if row.check == "fabric.allreduce"]
    assert [row.status for row in fabric] == [status]
    if reason:
        assert sh.drain_reason(sh.failures(rows)) == reason
        assert "ibstat" in fabric[0].fix
    else:
        assert not sh.failures(rows)


def test_without_a_fabric_verdict_there_is_no_fabric_row():
    rows = sh.node_rows("gpu01", make_node("cpu", "gpu01"), _stack_profiles.get("cpu"), 0, False)
    assert "fabric.allreduce" not in [row.check for row in rows]


def test_the_fabric_row_can_be_excluded():
    rows = sh.node_rows("gpu01", make_node("cpu", "gpu01"), _stack_profiles.get("cpu"), 0, False,
                        exclude=("fabric.allreduce",), fabric=_fabric_verdict("gpu01"))
    assert not sh.failures(rows)
