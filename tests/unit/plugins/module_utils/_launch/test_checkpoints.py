# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_launch.checkpoints: a DeepSpeed checkpoint's shape from its file names, and a tag's step."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import checkpoints as la_checkpoints


@pytest.mark.parametrize("files, expected", [
    # the burn-in / --no-pipeline-parallel, ZeRO-1, DP 2
    (["mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"],
     {"tp": 1, "pp": 1, "dp": 2, "no_pipeline_parallel": True, "layout": "deepspeed"}),
    # bf16 ZeRO-2, TP 2 (docs/upstream-facts.md §B: bf16_ prefix)
    (["mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
      "bf16_zero_pp_rank_0_mp_rank_01_optim_states.pt"],
     {"tp": 2, "pp": 1, "dp": 1, "no_pipeline_parallel": True}),
    # DeepSpeed pipeline engine, TP 1, PP 2
    (["layer_01-model_00-model_states.pt", "layer_02-model_00-model_states.pt", "layer_03-model_00-model_states.pt",
      "mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
      "zero_pp_rank_0_mp_rank_01_optim_states.pt"],
     {"tp": 1, "pp": 2, "dp": 1, "no_pipeline_parallel": False}),
    # pipeline engine, TP 2, PP 2
    (["layer_01-model_00-model_states.pt", "layer_01-model_01-model_states.pt"] +
     ["mp_rank_%02d_model_states.pt" % i for i in range(4)],
     {"tp": 2, "pp": 2, "no_pipeline_parallel": False}),
    # ZeRO-3: model states per DP rank
    (["zero_pp_rank_0_mp_rank_00_model_states.pt", "zero_pp_rank_1_mp_rank_00_model_states.pt",
      "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"],
     {"tp": 1, "pp": 1, "dp": 2}),
    # not a DeepSpeed tag (Megatron's own layout, or empty)
    (["mp_rank_00", "model_optim_rng.pt"], {"layout": "unknown", "tp": None, "pp": None}),
    ([], {"layout": "unknown"}),
])
def test_checkpoint_shape_from_file_names(files, expected):
    shape = la_checkpoints.checkpoint_shape(files)
    for key, value in expected.items():
        assert shape[key] == value, (key, shape)


@pytest.mark.parametrize("tag, step", [("global_step12", 12), (" global_step7\n", 7), ("iter_0000012", None), (None, None)])
def test_step_of(tag, step):
    assert la_checkpoints.step_of(tag) == step
