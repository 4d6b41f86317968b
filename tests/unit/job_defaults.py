# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The megatron_job role's defaults as a job spec, shared by the tests that render or check
job files (imported as ansible_collections.megatron_ds.cluster.tests.unit.job_defaults)."""
from __future__ import annotations

import pathlib
from typing import Any, Dict

import yaml
from jinja2.nativetypes import NativeEnvironment

DEFAULTS = pathlib.Path(__file__).resolve().parents[2] / "roles" / "megatron_job" / "defaults" / "main.yml"
DS_MISSING = "DeepSpeed is not importable here; CI needs `pip install torch deepspeed==0.19.6` in the test venv"


def spec(**overrides: Any) -> Dict[str, Any]:
    """The role defaults as a job spec (templated defaults resolved), 2 nodes, plus overrides."""
    variables = yaml.safe_load(DEFAULTS.read_text())
    env = NativeEnvironment()
    for dummy in range(4):  # pylint: disable=unused-variable
        for key, value in list(variables.items()):
            if isinstance(value, str) and "{{" in value:
                variables[key] = env.from_string(value).render(**variables)
    out = {key[len("megatron_job_"):]: value for key, value in variables.items()}
    out["nodes"] = 2
    out.update(overrides)
    return out
