# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Polling for molecule verifiers that wait on a cluster's state (Slurm node states, a job's
log). Imported as ansible_collections.megatron_ds.cluster.tests.support.polling."""
from __future__ import annotations

import time
from typing import Any, Callable


def wait_for(predicate: Callable[[], Any], what: str, deadline: float = 60.0, step: float = 1.0) -> Any:
    """The first truthy value of ``predicate()``, asked every ``step`` seconds; AssertionError
    naming ``what`` and the last value after ``deadline`` seconds."""
    end = time.monotonic() + deadline
    value = None
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError("timed out waiting for %s; last: %r" % (what, value))
