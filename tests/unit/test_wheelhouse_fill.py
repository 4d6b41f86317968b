# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""tests/wheelhouse/fill.py: what goes in a profile's wheelhouse (torch with its torchvision) and
when DeepSpeed is prebuilt, here or in a build venv."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("wheelhouse_fill_t", REPO / "tests" / "wheelhouse" / "fill.py")
fill = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fill)  # type: ignore[union-attr]
HERE = "%d.%d" % sys.version_info[:2]


@pytest.mark.parametrize("profile, torch, vision", [
    ("cpu", "torch==2.13.0", []),
    ("cpu-pypi", "torch==2.14.1", ["torchvision==0.29.1"]),
    ("cu117", "torch==1.13.1", ["torchvision==0.14.1"]),
    ("cu130", "torch==2.11.0", ["torchvision==0.26.0"]),
])
def test_plan_pairs_torch_with_its_torchvision(profile, torch, vision):
    planned = fill.plan(profile)
    assert (planned["torch"], planned["torchvision"]) == (torch, vision)
    assert all(spec in planned["constraints"] for spec in [torch] + vision)


@pytest.mark.parametrize("profile, python, torch, venv_ok, says", [
    ("cu130", HERE, "torch==2.11.0", True, "a cuda profile builds its ops on the node"),
    ("cpu", "3.99", "torch==2.13.0+cpu", True, "the nodes' 3.99"),
    ("cpu-pypi", HERE, "torch==0.0.1", False, "the profile's 0.0.1"),  # not this interpreter's torch
    ("cpu-pypi", HERE, "torch==0.0.1", True, None),  # a build venv gets it from the wheelhouse
])
def test_prebuild_reason(profile, python, torch, venv_ok, says):
    reason = fill.prebuild_reason(fill.load_profile(profile), python, torch, venv_ok=venv_ok)
    assert (reason is None) if says is None else (says in reason), reason
