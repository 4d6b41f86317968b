# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The megatron_job role's defaults as a job spec, shared by the tests that render or check
job files (imported as ansible_collections.megatron_ds.cluster.tests.unit.job_defaults).

The spec comes from _job_spec.normalize, the one reader of megatron_job_* variables (the role
and validate_job use it too); test_job_schema.py keeps its defaults equal to the role's YAML.
"""
from __future__ import annotations

from typing import Any, Dict

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec

DS_MISSING = "DeepSpeed is not importable here; CI needs `pip install torch deepspeed==0.19.6` in the test venv"


def spec(**overrides: Any) -> Dict[str, Any]:
    """The role defaults as a job spec, 2 nodes, plus overrides. The settings that take
    ``auto`` stay ``auto``, so the same spec can be built for any stack profile."""
    out = _job_spec.normalize({}, nodes=2)
    out.update({key: _job_schema.DEFAULTS[key] for key in _job_schema.AUTO_BOOL_KEYS})
    out.update(overrides)
    return out
