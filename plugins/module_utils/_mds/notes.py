# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the Megatron-DeepSpeed flag table (``_mds.args``) says about the traps among the flags:
obsolete flags (asserted away), deprecated ones (advice) and common misspellings, each with a
message that says what to do. Kept apart from the generated table, which is regenerated from
``megatron/arguments.py``; these notes are written by hand. Eras are named as in ``_mds.args``
(``head``, ``before_rebase``).
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional


class Note(NamedTuple):
    """What the table says about one flag: a ``status`` and a message that says what to do."""

    status: str  # known | obsolete | deprecated | misspelt | unknown | era_missing
    message: str
    replacement: Optional[str] = None


# Flags the parser still declares but validate_args() rejects with an assertion; the messages
# are Megatron's own (arguments.py "Deprecated arguments", same text in both eras).
OBSOLETE: Dict[str, Note] = {
    "--batch-size": Note(
        "obsolete",
        "--batch-size argument is no longer valid, use --micro-batch-size instead",
        "--micro-batch-size",
    ),
    "--warmup": Note(
        "obsolete",
        "--warmup argument is no longer valid, use --lr-warmup-fraction instead",
        "--lr-warmup-fraction",
    ),
    "--model-parallel-size": Note(
        "obsolete",
        "--model-parallel-size is no longer valid, use --tensor-model-parallel-size instead",
        "--tensor-model-parallel-size",
    ),
}

# Declared, accepted, but marked deprecated upstream: advice, not an error.
DEPRECATED: Dict[str, Dict[str, Note]] = {
    "head": {
        "--checkpoint-activations": Note(
            "deprecated",
            "--checkpoint-activations is marked deprecated in Megatron-DeepSpeed but kept because "
            "DeepSpeed still relies on it: the DeepSpeed pipeline engine checkpoints every "
            "--checkpoint-num-layers layers with it. Its newer equivalent is "
            "--recompute-granularity full --recompute-method uniform (also honoured by the "
            "pipeline); --recompute-activations (selective) is ignored by the DeepSpeed pipeline.",
            "--recompute-granularity full --recompute-method uniform",
        ),
    },
    "before_rebase": {},
}

# Spellings that argparse rejects ("unrecognized arguments") with the flag to use instead.
# None as replacement: the setting is not a pretrain_gpt.py flag at all.
MISSPELT: Dict[str, Note] = {
    "--deepspeed-config": Note(
        "misspelt",
        "--deepspeed-config is not accepted (DeepSpeed declares only the underscore spelling and "
        "the parser has allow_abbrev=False): use --deepspeed_config",
        "--deepspeed_config",
    ),
    "--dataset-impl": Note(
        "misspelt",
        "--dataset-impl is a tools/preprocess_data.py flag; pretrain_gpt.py takes --data-impl "
        "(mmap or infer; the default infer reads the .idx header)",
        "--data-impl",
    ),
    "--zero-contiguous-gradients": Note(
        "misspelt", "Megatron-DeepSpeed spells it --zero-contigious-gradients (sic)",
        "--zero-contigious-gradients",
    ),
    "--contiguous-checkpointing": Note(
        "misspelt", "Megatron-DeepSpeed spells it --contigious-checkpointing (sic)",
        "--contigious-checkpointing",
    ),
    "--use-flash-attn-2": Note("misspelt", "the flag is --use-flash-attn-v2", "--use-flash-attn-v2"),
    "--overlap-comm": Note(
        "misspelt",
        "--overlap-comm is not a pretrain_gpt.py flag: set zero_optimization.overlap_comm in "
        "ds_config.json",
    ),
    "--contiguous-gradients": Note(
        "misspelt",
        "--contiguous-gradients is not a pretrain_gpt.py flag: set "
        "zero_optimization.contiguous_gradients in ds_config.json",
    ),
    "--allgather-bucket-size": Note(
        "misspelt",
        "--allgather-bucket-size is not a pretrain_gpt.py flag: set "
        "zero_optimization.allgather_bucket_size in ds_config.json",
    ),
    "--reduce-scatter-bucket-size": Note(
        "misspelt",
        "--reduce-scatter-bucket-size is not a pretrain_gpt.py flag: set "
        "zero_optimization.reduce_bucket_size (and reduce_scatter) in ds_config.json",
    ),
    "--reduce-bucket-size": Note(
        "misspelt",
        "--reduce-bucket-size is not a pretrain_gpt.py flag: set "
        "zero_optimization.reduce_bucket_size in ds_config.json",
    ),
    "--gradient-accumulation-steps": Note(
        "misspelt",
        "--gradient-accumulation-steps is not a pretrain_gpt.py flag: gradient accumulation is "
        "--global-batch-size / (--micro-batch-size x data parallel size)",
        "--global-batch-size",
    ),
    "--cpu-offload": Note(
        "misspelt",
        "--cpu-offload is not a pretrain_gpt.py flag: set zero_optimization.offload_optimizer "
        "{device: cpu} in ds_config.json and pass --cpu-optimizer",
    ),
    "--cpu_offload": Note(
        "misspelt",
        "--cpu_offload is not a pretrain_gpt.py flag: set zero_optimization.offload_optimizer "
        "{device: cpu} in ds_config.json and pass --cpu-optimizer",
    ),
}
