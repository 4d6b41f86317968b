# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How molecule verifiers run the collection's playbooks as an operator would: this checkout's
ansible.cfg, collection and roles, no shared fact cache, no colour (the tests read the output).
Imported as ansible_collections.megatron_ds.cluster.tests.support.ansible_run (pyproject.toml
puts .collections on sys.path)."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Dict, List


def ansible_env(project_dir: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(project_dir / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(project_dir / ".collections"),
        ANSIBLE_ROLES_PATH=str(project_dir / "roles"),
        # The nodes are throwaway containers: keep their facts out of the repo's jsonfile cache.
        ANSIBLE_CACHE_PLUGIN="memory",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
        ANSIBLE_PIPELINING="True",
    )
    # Molecule's own callbacks would change the output format the tests parse.
    env.pop("ANSIBLE_CALLBACKS_ENABLED", None)
    return env


def ansible_playbook_argv(inventory: str, playbook: Path, *args: str) -> List[str]:
    """ansible-playbook from the interpreter's own venv (the one running the verifier)."""
    return [str(Path(sys.executable).parent / "ansible-playbook"), "-i", inventory, str(playbook), *args]
