# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the chaos tests on the local process cluster share: the "nodes" STATE_DIR/NODE, each
with its copy of the trainer (chaos_launch.py starts them, chaos_ssh.py reaches them), the
training log, the incident file, and waiting for what the supervisor does."""
from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import time
from typing import Any, Dict, List, Sequence


class LocalCluster:
    def __init__(self, state: pathlib.Path, nodes: Sequence[str], script: str, timeout: float) -> None:
        self.state = state
        self.nodes = list(nodes)
        self.script = script  # burnin_gpt or pretrain_gpt: each node runs STATE_DIR/NODE/<script>.py
        self.timeout = timeout
        self.log = state / "train.log"
        self.incidents = state / "logs" / "incidents.jsonl"

    def pids(self, node: str) -> List[int]:
        out = subprocess.run(["pgrep", "-f", r"python[0-9.]* -u ([^ ]*/)?%s/%s\.py( |$)" % (node, self.script)],
                             capture_output=True, text=True, check=False).stdout
        return [int(p) for p in out.split()]

    def lines(self) -> List[str]:
        return self.log.read_text(errors="replace").splitlines() if self.log.exists() else []

    def records(self) -> List[Dict[str, Any]]:
        from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import incident as _incident
        return _incident.read(str(self.incidents))[0]

    def wait(self, what, timeout: float = None, every: float = 0.5):
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while time.monotonic() < deadline:
            got = what()
            if got:
                return got
            time.sleep(every)
        raise AssertionError("timed out after %.0f s waiting for %s; log tail:\n%s\nincidents: %s" % (
            self.timeout if timeout is None else timeout, what.__doc__ or what, "\n".join(self.lines()[-25:]),
            self.records()))

    def kill_all(self) -> None:
        for node in self.nodes:
            for pid in self.pids(node):
                try:
                    os.kill(pid, signal.SIGCONT)
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
