# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Session hooks shared by tests/unit, tests/integration and tests/chaos.

The burn-in and chaos tests run DeepSpeed CPU ranks on this machine. DeepSpeed's CPU all-reduce
leaves a ~66 MB buffer per rank in /dev/shm (RAM) and never removes it; a killed rank leaves its
too. Left alone they pile up across runs until the machine swaps (_launch_shm.SHM_BUFFER_PREFIX), so
the session removes the ones no process maps any more when it ends.
"""
from __future__ import annotations

import os

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import shm as _launch_shm


def pytest_sessionfinish(session, exitstatus):  # pylint: disable=unused-argument
    # Under xdist, only the controller sweeps, once every worker is done: a worker that finishes
    # early would otherwise race another's job that is still starting (its buffers not yet mapped).
    if hasattr(session.config, "workerinput"):
        return
    removed = _launch_shm.sweep_shm_buffers(os.getuid())
    if removed and session.config.getoption("verbose") > 0:
        print("\nconftest: removed %d stale DeepSpeed buffers from /dev/shm" % len(removed))
