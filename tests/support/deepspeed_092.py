# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which optimizer wrapper DeepSpeed 0.9.2 picks for a ds_config, and whether its pipeline engine
can step with it: the decision of ``DeepSpeedEngine.get_data_types`` and
``_do_optimizer_sanity_check`` (v0.9.2 deepspeed/runtime/engine.py:825-840 and 1089-1140),
restated over the JSON with dtype names instead of torch dtypes, so that tests can run it where
DeepSpeed 0.9.2 cannot be installed (it needs torch < 2 and NumPy 1).

The pipeline engine of that release calls ``optimizer.get_grads_for_reduction()`` and
``optimizer.clear_lp_grads()`` whenever bf16 is on (v0.9.2 runtime/pipe/engine.py:242-257,
725-727); only the BF16 optimizer defines them.
"""
from __future__ import annotations

from typing import Any, Mapping, Tuple

ZERO = "zero_optimization"
BFLOAT16 = "bf16"
FP16 = "fp16"
NONE = None


def data_types(ds_config: Mapping[str, Any]) -> Tuple[str, str]:
    """(model dtype, gradient accumulation dtype): engine.py:825-840."""
    model = "fp32"
    if (ds_config.get("fp16") or {}).get("enabled"):
        model = "fp16"
    elif (ds_config.get("bf16") or ds_config.get("bfloat16") or {}).get("enabled"):
        model = "bf16"
    zero_enabled = int((ds_config.get("zero_optimization") or {}).get("stage", 0)) > 0
    accum = (ds_config.get("data_types") or {}).get("grad_accum_dtype")
    if accum is None:
        accum = "fp32" if model == "bf16" and not zero_enabled else model
    return model, str(accum)


def optimizer_wrapper(ds_config: Mapping[str, Any]) -> Any:
    """The wrapper _do_optimizer_sanity_check returns (engine.py:1089-1140), amp aside; raises
    NotImplementedError with DeepSpeed's message where it does."""
    model, accum = data_types(ds_config)
    stage = int((ds_config.get("zero_optimization") or {}).get("stage", 0))
    if stage > 0:
        if model == "bf16" and accum == "fp32" and stage == 1:
            return BFLOAT16
        if model != accum:
            raise NotImplementedError("Model data type and gradient accumulation data type must be equal to use ZeRO")
        return ZERO
    if model == accum:
        if model == "bf16":
            raise NotImplementedError("Bfloat16 wrapper must use a gradient accumulation type of fp32, enable ZeRO "
                                      "to use Bfloat16 gradient accumulation")
        return FP16 if model == "fp16" else NONE
    if model == "bf16" and accum == "fp32":
        return BFLOAT16
    raise NotImplementedError("unsupported mix of model dtype and gradient accummulation type")


def pipeline_engine_steps(ds_config: Mapping[str, Any]) -> bool:
    """Whether the 0.9.2 pipeline engine gets through a step: with bf16 it needs the BF16 optimizer."""
    model = data_types(ds_config)[0]
    return model != "bf16" or optimizer_wrapper(ds_config) == BFLOAT16
