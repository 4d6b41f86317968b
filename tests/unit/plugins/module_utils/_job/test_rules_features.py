# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_job.rules_features: the resume judgement resume.yml makes once, before anything is copied
(judge_resume), and the fix it gives for a layout change per stack (universal_fix). The
validation's own checkpoint rule (check_checkpoints) is tabled in test_rules.py."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules_features as rf

MP2 = ["mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt"]
PIPE = ["layer_01-model_00-model_states.pt", "mp_rank_00_model_states.pt",
        "zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"]
GRID = dict(world_size=2, tensor_parallel=1, pipeline_parallel=1)


@pytest.mark.parametrize("version, era, wanted", [
    ("0.19.6", "head", "ds_to_universal --input_folder /ck/global_step5 --output_folder /ck/global_step5_universal"),
    ("0.12.0", "head", "then resume with --universal-checkpoint"),
    ("0.14.0", "before_rebase", "before_rebase Megatron-DeepSpeed has no --universal-checkpoint; resume with TP 2 PP 1"),
    ("0.9.2", "before_rebase", "DeepSpeed <0.12 has no universal checkpoint (found 0.9.2); resume with TP 2 PP 1"),
    (None, "head", "found unknown version"),
])
def test_universal_fix_per_stack(version, era, wanted):
    assert wanted in rf.universal_fix(version, era, 2, 1, source="/ck/global_step5")


def test_universal_fix_keeps_the_placeholder_for_validation():
    assert "--input_folder <save>/global_stepN " in rf.universal_fix("0.19.6", "head", 2, 1)


@pytest.mark.parametrize("names, profile, form, wanted", [
    # TP 2 into TP 1: the fix follows the profile's stack
    (MP2, "cu130", True, ["tensor_parallel=2, expected 1: a TP/PP change needs a conversion: convert once"]),
    (MP2, "cu117", True, ["tensor_parallel=2, expected 1: a TP/PP change needs a conversion: refuse: DeepSpeed <0.12"]),
    # the same grid and form: nothing
    (["mp_rank_00_model_states.pt"], "cu130", True, []),
    # the model form: a pipeline-engine tag into a --no-pipeline-parallel job, and the reverse
    (PIPE, "cu130", True, ["saved without --no-pipeline-parallel and the job runs with it"]),
    (["mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt",
      "zero_pp_rank_1_mp_rank_00_optim_states.pt"], "cu130", False,
     ["saved with --no-pipeline-parallel and the job runs without it"]),
    # form unknown (None): not judged
    (PIPE, "cu130", None, []),
])
def test_judge_resume(names, profile, form, wanted):
    got = rf.judge_resume(names, "/ck", "global_step5", GRID, profile, form)
    assert len(got["mismatches"]) == len(wanted), got["mismatches"]
    for text, message in zip(wanted, got["mismatches"]):
        assert text in message
    assert got["layout"]["kind"] in ("pipeline", "no_pipeline")


def test_judge_resume_of_an_unreadable_tag_says_nothing_about_form():
    got = rf.judge_resume(["model_optim_rng.pt"], "/ck", "global_step5", GRID, "cu130", True)
    assert got["layout"]["kind"] == "unknown" and got["mismatches"] == []
