# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""TP, PP and DP of a DeepSpeed checkpoint tag, from its file names, and the step of a tag.

No Ansible imports; Python 3.8 compatible (parts run on the nodes through job_probe).
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, Optional


# DeepSpeed checkpoint files inside global_stepN (docs/upstream-facts.md §B)
_LAYER_FILE = re.compile(r"^layer_(\d+)-model_(\d+)-model_states\.pt$")
_MP_FILE = re.compile(r"^mp_rank_(\d+)_model_states\.pt$")
_ZERO_FILE = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_(optim|model)_states\.pt$")
_STEP_TAG = re.compile(r"^global_step(\d+)$")


def step_of(tag: Optional[str]) -> Optional[int]:
    """global_step12 -> 12; anything else -> None."""
    match = _STEP_TAG.match(str(tag or "").strip())
    return int(match.group(1)) if match else None


def checkpoint_shape(files: Iterable[str]) -> Dict[str, Any]:
    """TP, PP, DP and the model form of one DeepSpeed checkpoint tag, from its file names.

    * DeepSpeed pipeline engine (Megatron without --no-pipeline-parallel): ``layer_LL-model_TT-
      model_states.pt`` (TT = tensor rank) and ``mp_rank_MM_model_states.pt`` for MM in
      0..PP*TP-1, so TP = distinct TT, PP = mp files / TP.
    * --no-pipeline-parallel (and the burn-in): no layer files, one ``mp_rank_MM`` per tensor rank,
      PP = 1. ZeRO-3 writes ``zero_pp_rank_D_mp_rank_MM_model_states.pt`` instead.
    * DP = distinct D of the ``zero_pp_rank_D_...`` files (optimizer state shards).
    """
    names = [os.path.basename(str(f)) for f in files]
    layer_tp = set()
    mp_ranks = set()
    zero_dp = set()
    zero_mp = set()
    for name in names:
        match = _LAYER_FILE.match(name)
        if match:
            layer_tp.add(int(match.group(2)))
            continue
        match = _MP_FILE.match(name)
        if match:
            mp_ranks.add(int(match.group(1)))
            continue
        match = _ZERO_FILE.match(name)
        if match:
            zero_dp.add(int(match.group(1)))
            zero_mp.add(int(match.group(2)))
    shape: Dict[str, Any] = {"layout": "deepspeed", "tp": None, "pp": None, "dp": len(zero_dp) or None,
                             "no_pipeline_parallel": None, "files": len(names)}
    if layer_tp:
        tp = len(layer_tp)
        shape.update(tp=tp, no_pipeline_parallel=False)
        shape["pp"] = max(1, len(mp_ranks) // tp) if mp_ranks else None
    elif mp_ranks or zero_mp:
        shape.update(tp=len(mp_ranks or zero_mp), pp=1, no_pipeline_parallel=True)
    else:
        shape["layout"] = "unknown"
    return shape
