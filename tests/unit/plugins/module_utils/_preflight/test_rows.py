# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Unit tables for the preflight's rows and shared helpers (plugins/module_utils/_preflight/rows.py):
the check context (missing and wrapped facts), the nvcc-vs-torch rule and a row's serialised form."""
from __future__ import annotations

import json
from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import gate as pf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import rows as prows

from .preflight_facts import by_status, full_options, make_cluster, row_for, run


@pytest.mark.parametrize(
    "raw, reason",
    [
        (None, "no gpu_stack_facts"),
        ({}, "no gpu_stack_facts"),
        ({"failed": True, "msg": "nvidia-smi timed out"}, "gpu_stack_facts failed: nvidia-smi timed out"),
        ({"skipped": True}, "skipped"),
    ],
)
def test_missing_facts_reason(raw, reason):
    cluster: Dict[str, Any] = make_cluster()
    cluster["node3"] = raw
    row = row_for(run(cluster), "facts.gathered", "node3")
    assert row.status == pf.FAIL and reason in row.found


def test_node_named_only_in_the_hostfile_has_no_facts():
    options = full_options()
    options["slots"]["node4"] = 8
    failed = by_status(run(make_cluster(), options=options), pf.FAIL)
    assert [(row.check, row.node) for row in failed] == [("facts.gathered", "node4")]
    assert "not in the play" in failed[0].found


@pytest.mark.parametrize(
    "wrapper",
    [
        lambda facts: {"ansible_facts": {"gpu_stack_facts": facts}, "changed": False},
        lambda facts: {"gpu_stack_facts": facts, "changed": False},
    ],
    ids=["ansible_facts", "top-level"],
)
def test_module_results_are_unwrapped(wrapper):
    cluster = {node: wrapper(facts) for node, facts in make_cluster().items()}
    assert by_status(run(cluster), pf.FAIL) == []


# ---------------------------------------------------------------------------------------
# The nvcc-vs-torch rule on its own
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nvcc, torch_cuda, ok",
    [
        ("11.7.99", "11.7", True),
        ("11.8.89", "11.7", True),  # DeepSpeed lists 11.0-11.8
        ("11.7", "11.8", True),
        ("12.1.105", "12.4", True),
        ("12.7.1", "12.8", False),  # 12.7 is not in DeepSpeed's list
        ("12.8.93", "13.0", False),  # another major
        ("13.0.88", "13.0", True),
        ("13.1.80", "13.0", False),  # 13.x has no entry: must be equal
        ("10.2.89", "11.7", False),
    ],
)
def test_nvcc_torch_rule(nvcc, torch_cuda, ok):
    assert prows.nvcc_torch_compatible(nvcc, torch_cuda) is ok


def test_rows_serialise():
    row = run(make_cluster())[0]
    assert set(row.as_dict()) == {"check", "status", "node", "component", "found", "expected", "fix"}
    json.dumps([r.as_dict() for r in run(make_cluster())])
