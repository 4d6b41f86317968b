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
    ({"zero": 1, "fused_ops": True}, ["fused_ops"]),
    ({"zero": 2, "recompute": True, "fused_ops": True}, ["zero_2", "recompute", "fused_ops"]),
    ({"zero": 1, "fused_ops": False}, []),
    ({}, []),
])
def test_departures(layout, expected):
    assert _parity.departures(layout) == expected


GPU_AGREES = {"verdict": _parity.AGREES, "evidence": "e", "where": "one GPU"}
GPU_DIFFERS = {"verdict": _parity.DIFFERS, "evidence": "e", "where": "one GPU"}
TABLE = {"tensor_parallel": {"verdict": _parity.AGREES, "gpu": GPU_AGREES},
         "pipeline_parallel": {"verdict": _parity.AGREES},                    # CPU only: its CPU verdict decides
         "zero_3": {"verdict": _parity.RULE, "rule": "x", "gpu": GPU_DIFFERS},  # the GPU overrules the CPU
         "zero_0": {"verdict": _parity.DIFFERS, "gpu": GPU_AGREES},           # and the other way round
         "recompute": {"verdict": _parity.AGREES, "gpu": GPU_AGREES}}


@pytest.mark.parametrize("layout, table, why", [
    ({"tp": 2, "zero": 1}, TABLE, None),
    ({"tp": 2, "zero": 1, "recompute": True}, TABLE, None),
    ({"zero": 0}, TABLE, None),
    ({"pp": 2, "zero": 1}, TABLE, None),
    ({"pp": 2, "zero": 1}, {"pipeline_parallel": {"verdict": _parity.DIFFERS}}, "loss differs from ZeRO-1 (pipeline parallel)"),
    ({"recompute": True}, {"recompute": {"verdict": _parity.AGREES}}, "GPU loss parity with ZeRO-1 not measured (recompute)"),
    ({"zero": 3}, TABLE, "loss differs from ZeRO-1 on a GPU (zero 3)"),
    ({"zero": 2}, TABLE, "loss parity with ZeRO-1 not measured (zero 2)"),
    ({"fused_ops": True}, TABLE, "loss parity with ZeRO-1 not measured (fused ops)"),
    ({"fused_ops": True}, {"fused_ops": {"verdict": _parity.NOT_MEASURED}},
     "GPU loss parity with ZeRO-1 not measured (fused ops)"),
    ({"fused_ops": True}, {"fused_ops": {"verdict": _parity.NOT_MEASURED, "gpu": GPU_DIFFERS}},
     "loss differs from ZeRO-1 on a GPU (fused ops)"),
    ({"fused_ops": True}, {"fused_ops": {"verdict": _parity.NOT_MEASURED, "gpu": GPU_AGREES}}, None),
    # the repository's table: what a GPU measured
    ({"tp": 1, "pp": 1, "zero": 1}, None, None),
    ({"zero": 2, "recompute": True}, None, None),
    ({"tp": 2, "zero": 1}, None, None),
    ({"tp": 2, "pp": 2, "zero": 1, "recompute": True}, None, None),
    ({"pp": 2, "zero": 0}, None, "loss differs from ZeRO-1 on a GPU (zero 0)"),
    ({"zero": 0}, None, "loss differs from ZeRO-1 on a GPU (zero 0)"),
    ({"zero": 3}, None, "loss differs from ZeRO-1 on a GPU (zero 3)"),
    ({"zero": 1, "fused_ops": True}, None, None),
    ({"zero": 2, "recompute": True, "fused_ops": True}, None, None),
])
def test_unproven(layout, table, why):
    assert _parity.unproven(layout, table) == why


@pytest.mark.parametrize("name, verdict, figures", [
    # ZeRO-3 at weight decay 0: ZeRO-1's losses on CPU, not on the H100
    ("zero_3", _parity.DIFFERS, ["0.051", "0.019", "H100", "weight decay 0"]),
    ("zero_0", _parity.DIFFERS, ["+0.155 at iteration 5", "H100"]),
    ("zero_2", _parity.AGREES, ["7.943276", "H200"]),
    ("recompute", _parity.AGREES, ["7.943276", "H200"]),
    # not run on CPU; the H100 picks and the H200 fused runs, within the unfused run-twice spread
    ("fused_ops", _parity.AGREES, ["7.9116 / 7.9119", "0.0032", "7.941456 / 7.943276", "H100", "H200"]),
])
def test_the_gpu_verdict_is_carried_with_its_figures_and_wins(name, verdict, figures):
    row = _parity.PARITY[name]
    assert _parity.verdict(row) == (verdict, row["gpu"]["where"])
    text = row["gpu"]["evidence"] + " " + row["gpu"]["where"]
    assert all(figure in text for figure in figures), text


def test_a_departure_without_a_gpu_row_keeps_its_cpu_verdict():
    assert _parity.verdict(_parity.PARITY["tensor_parallel"]) == (_parity.AGREES, "CPU")


@pytest.mark.parametrize("name, figures", [
    ("pipeline_parallel", ["8.551", "7.943", "initialize.py:286-287"]),
    ("tensor_parallel", ["7.848", "other random streams"]),
])
def test_tp_and_pp_gpu_runs_are_observations_not_verdicts(name, figures):
    """TP and PP cannot start from ZeRO-1's weights on a GPU; what was seen is kept, and the CPU
    parity decides."""
    row = _parity.PARITY[name]
    assert name not in _parity.GPU_DECIDES and "gpu" not in row
    assert all(figure in row["gpu_observed"] for figure in figures), row["gpu_observed"]
    assert _parity.verdict(row) == (_parity.AGREES, "CPU")


def test_every_rule_the_table_names_is_a_validation_check():
    # Every CPU RULE row was measured to differ on a GPU: no rule decides a ranking today.
    assert _parity.rules() == []
    assert sorted(row["rule"] for row in _parity.PARITY.values() if row["verdict"] == _parity.RULE) == \
        sorted([rf.ZERO0_PARITY_CHECK, rf.ZERO3_WEIGHT_DECAY_CHECK])
    for row in _parity.PARITY.values():
        assert row["verdict"] in (_parity.AGREES, _parity.DIFFERS, _parity.RULE, _parity.NOT_MEASURED) and row["evidence"]
        if "gpu" in row:
            assert row["gpu"]["verdict"] in (_parity.AGREES, _parity.DIFFERS) and row["gpu"]["where"]
