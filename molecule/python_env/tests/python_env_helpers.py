"""Helpers shared by the python_env verifier tests: where things are, and ansible-playbook runs
against the scenario's own inventory (for the checks that must fail, and for a second converge)."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Tuple

SCENARIO_DIR = Path(__file__).resolve().parents[1]
PROJECT_DIR = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", SCENARIO_DIR.parents[1]))
VENV = "/opt/megatron/venv"
MEGATRON_DIR = "/opt/megatron/Megatron-DeepSpeed"
# With MEGATRON_DS_SRC the scenario installs that real checkout (archive); without, a toy repo.
REAL_MDS = bool(os.environ.get("MEGATRON_DS_SRC"))


def run_playbook(playbook: str, *args: str, limit: str = "node1") -> Tuple[subprocess.CompletedProcess, Dict[str, Tuple[int, int]]]:
    """ansible-playbook on the molecule inventory; returns the run and {host: (changed, failed)}."""
    inventory = os.environ["MOLECULE_INVENTORY_FILE"]
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(PROJECT_DIR / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(PROJECT_DIR / ".collections"),
        ANSIBLE_ROLES_PATH=str(PROJECT_DIR / "roles"),
        ANSIBLE_CACHE_PLUGIN="memory",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
    )
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    cmd: List[str] = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", inventory,
                      str(SCENARIO_DIR / playbook), "--limit", limit, *args]
    result = subprocess.run(cmd, env=env, cwd=PROJECT_DIR, text=True, capture_output=True, check=False)
    recap = {
        m.group(1): (int(m.group(2)), int(m.group(3)))
        for m in re.finditer(r"^(\S+)\s*:\s*ok=\d+\s+changed=(\d+)\s.*?failed=(\d+)", result.stdout, re.M)
    }
    return result, recap


def flat(result: subprocess.CompletedProcess) -> str:
    """The run's output on one line: failure messages are folded by the YAML callback."""
    return " ".join((result.stdout + result.stderr).replace("\\n", " ").split())
