# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where the upstream oracle's tests find upstream: MEGATRON_DS_SRC (a Megatron-DeepSpeed
checkout) and MEGATRON_DS_PYTHON (a python with torch and DeepSpeed). Without both, the tests
that run upstream skip with the reason."""
from __future__ import annotations

import os
import subprocess

import pytest

SOURCE = os.environ.get("MEGATRON_DS_SRC", "")
PYTHON = os.environ.get("MEGATRON_DS_PYTHON", "")


def _importable() -> str:
    """Why upstream cannot run here, or '' when it can."""
    if not SOURCE or not os.path.isfile(os.path.join(SOURCE, "megatron", "arguments.py")):
        return "no Megatron-DeepSpeed checkout: set MEGATRON_DS_SRC to one"
    if not PYTHON or not os.access(PYTHON, os.X_OK):
        return "no python with torch and DeepSpeed: set MEGATRON_DS_PYTHON to one"
    probe = subprocess.run([PYTHON, "-c", "import torch, deepspeed"], capture_output=True, text=True, check=False)
    if probe.returncode:
        return "%s cannot import torch and deepspeed: %s" % (PYTHON, probe.stderr.strip()[-200:])
    return ""


REASON = _importable()
needs_upstream = pytest.mark.skipif(bool(REASON), reason=REASON or "upstream present")
