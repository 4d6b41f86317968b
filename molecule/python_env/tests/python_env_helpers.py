"""Helpers shared by the python_env verifier tests: where things are, and ansible-playbook runs
against the scenario's own inventory (for the checks that must fail, and for a second converge)."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path
from typing import Dict, Tuple

from ansible_collections.megatron_ds.cluster.tests.support.ansible_run import ansible_env, ansible_playbook_argv

SCENARIO_DIR = Path(__file__).resolve().parents[1]
PROJECT_DIR = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", SCENARIO_DIR.parents[1]))
VENV = "/opt/megatron/venv"
MEGATRON_DIR = "/opt/megatron/Megatron-DeepSpeed"
# With MEGATRON_DS_SRC the scenario installs that real checkout (archive); without, a toy repo.
REAL_MDS = bool(os.environ.get("MEGATRON_DS_SRC"))


def run_playbook(playbook: str, *args: str, limit: str = "node1") -> Tuple[subprocess.CompletedProcess, Dict[str, Tuple[int, int]]]:
    """ansible-playbook on the molecule inventory; returns the run and {host: (changed, failed)}."""
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    env = ansible_env(PROJECT_DIR)
    cmd = ansible_playbook_argv(inventory, SCENARIO_DIR / playbook, "--limit", limit, *args)
    result = subprocess.run(cmd, env=env, cwd=PROJECT_DIR, text=True, capture_output=True, check=False)
    recap = {
        m.group(1): (int(m.group(2)), int(m.group(3)))
        for m in re.finditer(r"^(\S+)\s*:\s*ok=\d+\s+changed=(\d+)\s.*?failed=(\d+)", result.stdout, re.M)
    }
    return result, recap


def flat(result: subprocess.CompletedProcess) -> str:
    """The run's output on one line: failure messages are folded by the YAML callback."""
    return " ".join((result.stdout + result.stderr).replace("\\n", " ").split())
