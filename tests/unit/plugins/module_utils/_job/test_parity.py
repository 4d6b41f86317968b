# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests for _job.parity: the measured loss parity of layouts, and the planner's test on it."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import parity as _parity
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules_features as rf


@pytest.mark.parametrize("layout, expected", [
    ({"tp": 1, "pp": 1, "zero": 1, "recompute": False}, []),
    ({"tp": 2, "pp": 1, "zero": 1, "recompute": False}, ["tensor_parallel"]),
    ({"tp": 2, "pp": 4, "zero": 1, "recompute": True}, ["tensor_parallel", "pipeline_parallel", "recompute"]),
    ({"tp": 1, "pp": 1, "zero": 0, "recompute": False}, ["zero_0"]),
    ({"tp": 1, "pp": 1, "zero": 3, "recompute": False}, ["zero_3"]),
    ({}, []),
])
def test_departures(layout, expected):
    assert _parity.departures(layout) == expected


MEASURED_TP_ONLY = {"tensor_parallel": {"verdict": _parity.AGREES},
                    "zero_3": {"verdict": _parity.DIFFERS},
                    "zero_0": {"verdict": _parity.RULE, "rule": "x"}}


@pytest.mark.parametrize("layout, table, why", [
    ({"tp": 2, "zero": 1}, None, None),
    ({"tp": 2, "pp": 2, "zero": 1, "recompute": True}, None, None),
    ({"zero": 3}, None, None),                      # judged by its rule, not here
    ({"tp": 2, "zero": 1}, MEASURED_TP_ONLY, None),
    ({"pp": 2, "zero": 1}, MEASURED_TP_ONLY, "loss parity with ZeRO-1 not measured (pipeline parallel)"),
    ({"zero": 3}, MEASURED_TP_ONLY, "loss differs from ZeRO-1 (zero 3)"),
    ({"zero": 0}, MEASURED_TP_ONLY, None),
])
def test_unproven(layout, table, why):
    assert _parity.unproven(layout, table) == why


def test_every_rule_the_table_names_is_a_validation_check():
    assert _parity.rules() == sorted([rf.ZERO0_PARITY_CHECK, rf.ZERO3_WEIGHT_DECAY_CHECK])
    for row in _parity.PARITY.values():
        assert row["verdict"] in (_parity.AGREES, _parity.DIFFERS, _parity.RULE) and row["evidence"]
