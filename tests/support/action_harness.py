# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""An action plugin of plugins/action/ built for a unit test, the way ansible-core's own action
tests build theirs: a mocked task carrying the args, a mocked connection and play context, and a
real DataLoader and Templar where the plugin reads files (loader=None and templar=None where it
does not). run(task_vars=...) is then called on it. Imported as
ansible_collections.megatron_ds.cluster.tests.support.action_harness."""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Type
from unittest.mock import MagicMock

from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAYBOOKS = os.path.join(ROOT, "playbooks")


def make_action(action_class: Type[Any], args: Dict[str, Any], check_mode: bool = False,
                basedir: Optional[str] = PLAYBOOKS) -> Any:
    """``action_class`` (a plugins/action module's ActionModule) with a task of ``args``.

    The task's action is the plugin's collection name (megatron_ds.cluster.<module>). ``basedir``
    is the loader's base directory (relative paths in the args resolve there, as from a playbook in
    playbooks/); None gives the plugin no loader and no templar.
    """
    task = MagicMock()
    task.args = args
    task.async_val = 0
    task.check_mode = check_mode
    task.action = "megatron_ds.cluster." + action_class.__module__.rsplit(".", 1)[-1]
    connection = MagicMock()
    connection._shell.tmpdir = "/tmp/unused"
    loader: Optional[DataLoader] = None
    templar: Optional[Templar] = None
    if basedir is not None:
        loader = DataLoader()
        loader.set_basedir(basedir)
        templar = Templar(loader=loader)
    return action_class(task, connection, MagicMock(), loader=loader, templar=templar, shared_loader_obj=None)
