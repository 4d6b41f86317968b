# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The command-line tools of the Python the tests run under (ansible-playbook, ansible-galaxy,
ansible-builder): a venv's tools sit beside its python, so `.venv/bin/pytest` finds them without
`.venv/bin` on PATH. A tool that is nowhere skips the test with a reason that names it.
Imported as ansible_collections.megatron_ds.cluster.tests.support.tools."""
from __future__ import annotations

import os
import shutil
import sys
from typing import Dict, Optional

import pytest

# Not resolved: a venv's bin/python is a link to the base interpreter, whose directory has no
# ansible-playbook.
BIN = os.path.dirname(os.path.abspath(sys.executable))


def find(name: str) -> Optional[str]:
    """The tool beside this Python, else the one on PATH, else None."""
    local = os.path.join(BIN, name)
    if os.path.isfile(local) and os.access(local, os.X_OK):
        return local
    return shutil.which(name)


def missing(name: str) -> str:
    """The skip reason for a tool that is nowhere."""
    return "%s is not installed (neither beside %s nor on PATH)" % (name, sys.executable)


def require(name: str) -> str:
    """The tool's path; skips the calling test when it is nowhere."""
    path = find(name)
    if path is None:
        pytest.skip(missing(name))
    return path


def environ(**extra: str) -> Dict[str, str]:
    """This process's environment with BIN first on PATH, so what a tool starts in turn (an
    ansible-galaxy, a python) is the venv's too, plus ``extra``."""
    path = os.environ.get("PATH", "")
    parts = [BIN] + [part for part in path.split(os.pathsep) if part and part != BIN]
    return dict(os.environ, PATH=os.pathsep.join(parts), **extra)
