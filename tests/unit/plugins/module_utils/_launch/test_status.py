# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_launch.status: a job's state from its nodes' probes, its status lines, and reading a log's tail."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import status as la_status


def test_tail_text_reads_from_the_offset_and_caps_the_size(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("old line\n" + "x" * 50 + "\nnew line 1\nnew line 2\n")
    offset = len("old line\n")
    lines, size = la_status.tail_text(str(log), offset)
    assert lines[0] == "x" * 50 and size == log.stat().st_size
    lines, size = la_status.tail_text(str(log), 0, max_bytes=22)
    assert lines == ["new line 1", "new line 2"]  # the cut first line is dropped


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
