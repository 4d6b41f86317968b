# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""estimate_memory against a frozen table (memory_estimates.json).

The table was recorded from estimate_memory as one function, before it was split into its
named terms (parameters per GPU, model states per ZeRO stage, activations, buffers): every
ZeRO stage with and without optimizer/parameter offload and custom bucket sizes, bf16 / fp16 /
fp32, no / full / selective recompute, DeepSpeed before and after 0.14.3 (and unknown or
unreadable versions), TP / PP / DeepSpeed-Ulysses SP layouts, GPT and the llama preset, flash
attention, unfused softmax (also through the cu130 profile), unknown profiles and derived
numbers left None. The spec and derived dicts hold only the keys the estimate reads. A change
of the memory model changes this table on purpose; a refactor must leave it as it is.
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import memory as _job_memory

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "memory_estimates.json")) as _handle:
    CASES = json.load(_handle)["cases"]


def test_the_table_covers_every_model_state_formula():
    formulas = {case["expected"]["formula"] for case in CASES}
    assert len(CASES) >= 300
    assert {"no ZeRO: 16P", "ZeRO-1: 4P + 16P/N", "ZeRO-1 fp32: 8P + 8P/N", "ZeRO-1 offload: 4 P", "ZeRO-1 offload: 8 P",
            "ZeRO-2: 2P + 18P/N", "ZeRO-2 (DeepSpeed < 0.14.3): 4P + 16P/N", "ZeRO-2 fp32: 4P + 12P/N",
            "ZeRO-2 offload: 2 P", "ZeRO-2 offload: 4 P", "ZeRO-3: 4 x largest layer + 18 P/N",
            "ZeRO-3: 4 x largest layer + 16 P/N", "ZeRO-3: 4 x largest layer + 2 P/N", "ZeRO-3: 4 x largest layer + 0"} <= formulas
    assert {case["checkpointing"] for case in CASES} == {None, "full", "selective"}
    assert {case["expected"]["in_flight_micro_batches"] for case in CASES} >= {1, 2, 4}


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_estimate_memory_matches_the_recorded_table(case: Dict[str, Any]) -> None:
    estimate = _job_memory.estimate_memory(case["spec"], case["derived"], case["zero"], case["deepspeed_version"],
                                           case["checkpointing"])
    assert estimate == case["expected"]
