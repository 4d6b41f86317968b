# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A DeepSpeed checkpoint tag's TP, PP and DP in the short form job_probe and the resume messages
print, and the step of a tag. The reading itself is ``_checkpoint.classify``, the collection's one
reader of a tag's file names; this module only names its answer.

No Ansible imports; Python 3.8 compatible (parts run on the nodes through job_probe).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable

from .._checkpoint import classify, step_of

# step_of is _checkpoint's, offered here for job_probe and the launch filters.
__all__ = ("checkpoint_shape", "step_of")


def checkpoint_shape(files: Iterable[str]) -> Dict[str, Any]:
    """``{layout, tp, pp, dp, no_pipeline_parallel, files}`` of one tag, from its file names.

    ``layout`` is ``deepspeed`` when the names show a DeepSpeed model-parallel grid, else
    ``unknown`` (Megatron's own layout, an empty directory) with TP and PP None. DP is the number
    of ZeRO shards (None at ZeRO-0, whose names do not show it). ``no_pipeline_parallel``: no
    ``layer_*`` files, i.e. written without the DeepSpeed pipeline engine (or ZeRO-3).
    """
    names = [os.path.basename(str(f)) for f in files]
    layout = classify(names)
    known = layout["tensor_parallel"] is not None
    return {
        "layout": "deepspeed" if known else "unknown",
        "tp": layout["tensor_parallel"],
        "pp": layout["pipeline_parallel"],
        "dp": layout["data_parallel"],
        "no_pipeline_parallel": (not layout["pipeline"]) if known else None,
        "files": len(names),
    }
