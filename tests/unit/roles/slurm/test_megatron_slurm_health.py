# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The slurm role's HealthCheckProgram, run as slurmd runs it, on this machine.

The library directory is laid out as os_base's ``library`` entry point lays it out on a node
(tests/support/library.py). ``scontrol`` is a stand-in on PATH that answers
``show node`` from a file and records ``update`` calls, since no slurmctld runs here; the facts
are this machine's own (no GPU, no driver), judged against a real profile.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ansible_collections.megatron_ds.cluster.tests.support.library import install as install_library

ROOT = Path(__file__).resolve().parents[4]
PROGRAM = ROOT / "roles" / "slurm" / "files" / "megatron_slurm_health.py"
IDLE = "NodeName=n1 Arch=x86_64 State=IDLE ThreadsPerCore=1 Partitions=train"
# What the facts say of this GPU-less machine: with a PCI bus in sysfs they know there is no
# NVIDIA GPU on it; without one (some containers) only that nvidia-smi saw none.
NO_GPU = "no NVIDIA GPU on this node" if Path("/sys/bus/pci/devices").is_dir() else "no GPU"
OURS = IDLE.replace("State=IDLE", "State=IDLE+DRAIN") + " Reason=megatron-health: gpu.present found no GPU, expected >= 1 GPU [root@2026-12-01T02:22:00]"
ADMIN = IDLE.replace("State=IDLE", "State=IDLE+DRAIN") + " Reason=bad fan [root@2026-12-01T02:22:00]"
SCONTROL = """#!/bin/sh
if [ "$1" = show ]; then cat "$(dirname "$0")/state"; exit 0; fi
printf '%s\\n' "$*" >> "$(dirname "$0")/calls"
"""


@pytest.fixture()
def node(tmp_path):
    install_library(tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    return tmp_path


def run(node: Path, profile: str, state: str, *extra: str, fabric: str = "") -> subprocess.CompletedProcess:
    (node / "bin" / "state").write_text(state)
    config = node / "health.json"
    config.write_text(json.dumps({"node": "n1", "profile": profile, "venv": "", "megatron_dir": "", "gpus": 0,
                                  "exclude": [], "timeout": 10, "fabric_verdict": fabric}))
    env = dict(os.environ, PATH="%s:%s" % (node / "bin", os.environ.get("PATH", "")))
    return subprocess.run([sys.executable, str(PROGRAM), "--config", str(config), "--library", str(node / "lib")]
                          + list(extra), capture_output=True, text=True, env=env, timeout=120, check=False)


def calls(node: Path) -> list:
    path = node / "bin" / "calls"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("profile, state, rc, action, expected_calls", [
    # A CPU machine meets the cpu profile (without a venv only the system checks run).
    ("cpu", IDLE, 0, "nothing", []),
    # Against a GPU profile it has no GPU and no driver: drained, the first failure as the reason.
    ("cu117", IDLE, 1, "drain",
     ["update NodeName=n1 State=DRAIN Reason=megatron-health: gpu.present found %s, expected >= 1 GPU (+4 more)" % NO_GPU]),
    # Healthy again after our own drain: resumed.
    ("cpu", OURS, 0, "resume", ["update NodeName=n1 State=RESUME"]),
    # An administrator's drain is left as it is, healthy or not.
    ("cpu", ADMIN, 0, "nothing", []),
    ("cu117", ADMIN, 1, "nothing", []),
])
def test_program(node, profile, state, rc, action, expected_calls):
    result = run(node, profile, state)
    assert result.returncode == rc, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].endswith("action: %s" % action)
    assert calls(node) == expected_calls


def test_dry_run_changes_nothing(node):
    result = run(node, "cu117", IDLE, "--dry-run")
    assert result.returncode == 1
    assert "action: drain (dry run)" in result.stdout
    assert "FAIL n1 gpu.present: found %s" % NO_GPU in result.stdout
    assert calls(node) == []


def test_scontrol_failure_is_its_own_exit_status(node):
    (node / "bin" / "scontrol").write_text("#!/bin/sh\necho 'slurm_load_node error: Unable to contact slurm controller' >&2\nexit 1\n")
    result = run(node, "cpu", IDLE)
    assert result.returncode == 2
    assert "Unable to contact slurm controller" in result.stdout


def _verdict(slow):
    """The fabric gate's verdict over n1..n4 with ``slow`` at 3 GB/s against a site figure of 6 (None: healthy)."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import bisect, thresholds, verdict

    nodes = ["n1", "n2", "n3", "n4"]
    site = thresholds.Threshold("cross", 6.0, "GB/s", thresholds.ORIGIN_SITE, "set by the site")
    results = []
    step = bisect.next_step(nodes, results)
    while not step["done"]:
        results.extend(dict(thresholds.judge("g", 3.0 if slow in group else 9.0, site), nodes=group)
                       for group in step["measure"])
        step = bisect.next_step(nodes, results)
    return json.dumps(verdict.build(nodes, results, "2026-12-07T19:00:00Z", 1.0))


FABRIC_DRAIN = "update NodeName=n1 State=DRAIN Reason=megatron-health: fabric.allreduce found 3 GB/s with n3, expected >= 6 GB/s, site override"
OURS_FABRIC = IDLE.replace("State=IDLE", "State=IDLE+DRAIN") + " Reason=megatron-health: fabric.allreduce found 3 GB/s [root@2026-12-07T19:00:00]"


@pytest.mark.parametrize("slow, state, rc, action, expected_calls", [
    # The gate named n1: drained with its figures as the reason.
    ("n1", IDLE, 1, "drain", [FABRIC_DRAIN]),
    # A later verdict names another node, or none: the drain of ours is resumed.
    ("n2", OURS_FABRIC, 0, "resume", ["update NodeName=n1 State=RESUME"]),
    (None, OURS_FABRIC, 0, "resume", ["update NodeName=n1 State=RESUME"]),
    # A person's drain stays, whatever the verdict.
    ("n1", ADMIN, 1, "nothing", []),
])
def test_the_fabric_verdict_drains_and_resumes(node, slow, state, rc, action, expected_calls):
    verdict_file = node / "fabric-verdict.json"
    verdict_file.write_text(_verdict(slow))
    result = run(node, "cpu", state, fabric=str(verdict_file))
    assert result.returncode == rc, result.stdout + result.stderr
    assert result.stdout.splitlines()[-1].endswith("action: %s" % action)
    assert calls(node) == expected_calls


@pytest.mark.parametrize("text", ["{", json.dumps({"version": 7})])
def test_an_unreadable_fabric_verdict_changes_nothing(node, text):
    verdict_file = node / "fabric-verdict.json"
    verdict_file.write_text(text)
    result = run(node, "cpu", OURS_FABRIC, fabric=str(verdict_file))
    assert result.returncode == 2 and "playbooks/fabric_check.yml" in result.stdout
    assert calls(node) == []
