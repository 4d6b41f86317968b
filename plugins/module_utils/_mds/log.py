# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one reader of Megatron-DeepSpeed's training-log iteration lines.

Two consumers share it: ``_launch.parse_log`` (job status, the launch wait, job_probe) and the
monitoring role's Prometheus exporter (``roles/monitoring/files/megatron_log_exporter.py``),
which runs on the head node as a plain script: the role copies this file next to it, so it must
stay standard library only, free of Ansible imports and runnable by Python 3.6+ (no
``from __future__ import annotations``, no type annotations).

What is read: ``training_log`` in Megatron-DeepSpeed's ``megatron/training.py`` builds one line
per log interval and prints it on the last rank::

     iteration       10/     100 | consumed samples:           80 | consumed tokens: 163840 |
     elapsed time per iteration (ms): 812.3 | learning rate: 6.000E-05 | global batch size: 8 |
     lm loss: 1.012345E+01 | loss scale: 1.0 | grad norm: 3.456 | actual seqlen:  2048 |
     number of skipped iterations:   0 | number of nan iterations:   0 |
     samples per second: 9.849 | tokens per gpu per second (tgs): 5042.400 | TFLOPs: 120.45 |

(one line; pdsh or torchrun may put ``node1: `` or ``7: `` in front). Fields come and go:
a loss is printed only when its interval average is > 0, ``loss scale``/``grad norm``/
``num zeros``/``params norm`` only when known, ``tgs`` not at all on the ``before_rebase``
branch, and the BigScience fork prints the iteration time in seconds
(``elapsed time per iteration (s)``). Any ``<name> loss: <number>`` field is a loss.
"""
import math
import re

# ' iteration {:8d}/{:8d} |' (training.py); \b lets a node or rank prefix stand before it.
_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z0-9 _()\-/]*?)\s*:\s*(\S+)\s*$")

# Megatron's field text -> the key every consumer uses. One set of names for the collection:
# job_probe's and job status' ``last`` entry, the exporter's metrics.
FIELDS = {
    "consumed samples": "consumed_samples",
    "consumed tokens": "consumed_tokens",
    "elapsed time per iteration (ms)": "iteration_time_ms",
    "learning rate": "learning_rate",
    "global batch size": "global_batch_size",
    "loss scale": "loss_scale",
    "grad norm": "grad_norm",
    "num zeros": "num_zeros",
    "params norm": "params_norm",
    "actual seqlen": "seq_length",
    "curriculum seqlen": "curriculum_seq_length",
    "random ltd reserved length": "random_ltd_reserved_length",
    "number of skipped iterations": "skipped_iterations",
    "number of nan iterations": "nan_iterations",
    "samples per second": "samples_per_second",
    "tokens per gpu per second (tgs)": "tokens_per_gpu_per_second",
    "TFLOPs": "tflops",
}
# Fields read with a unit change: (field text, key, factor).
_SCALED = {"elapsed time per iteration (s)": ("iteration_time_ms", 1000.0)}
# The language-model loss also gets a key of its own: what status lines and the launch wait show.
LM_LOSS = "lm loss"


def parse_number(text):
    """A number as Megatron prints it, or None.

    ``{:12d}``-style text becomes an int, anything else a float; Python's spellings of
    non-finite floats (``nan``, ``NAN``, ``inf``, ``-INF``) are read as such.
    """
    text = str(text).strip()
    try:
        value = float(text)
    except ValueError:
        return None
    if re.match(r"^[-+]?\d+$", text):
        return int(text)
    return value


def is_finite(value):
    return value is not None and not math.isnan(value) and not math.isinf(value)


def parse_iteration(line):
    """One ``training_log`` line as a dict, or None for any other line.

    Keys: ``iteration``, ``train_iters``, the ``FIELDS`` keys that the line carries,
    ``losses`` ({Megatron's loss name: value}, e.g. {"lm loss": 7.8}) and ``lm_loss`` when the
    line has an ``lm loss`` field. A field whose value is not a number is left out.
    """
    match = _ITERATION.search(str(line))
    if not match:
        return None
    record = {"iteration": int(match.group(1)), "train_iters": int(match.group(2)), "losses": {}}
    for part in str(line)[match.end():].split("|"):
        field = _FIELD.match(part)
        if not field:
            continue
        name, value = field.group(1).strip(), parse_number(field.group(2))
        if value is None:
            continue
        if name in FIELDS:
            record[FIELDS[name]] = value
        elif name in _SCALED:
            key, factor = _SCALED[name]
            record[key] = value * factor
        elif name.endswith("loss"):
            record["losses"][name] = value
    if LM_LOSS in record["losses"]:
        record["lm_loss"] = record["losses"][LM_LOSS]
    return record


def is_nonfinite(record):
    """True when the interval a parsed line reports went NaN/inf.

    Megatron says so three ways: a loss printed as NAN/INF (forks that print every average),
    a NaN grad norm, or nan iterations > 0 (fp16: a skipped step whose loss was inf/NaN).
    HEAD prints a loss only when its average is > 0, so a NaN loss in bf16 shows as no loss
    field at all while no iteration was skipped: that counts too.
    """
    losses = record.get("losses") or {}
    if any(not is_finite(value) for value in losses.values()):
        return True
    grad_norm = record.get("grad_norm")
    if grad_norm is not None and not is_finite(grad_norm):
        return True
    if (record.get("nan_iterations") or 0) > 0:
        return True
    return not losses and (record.get("skipped_iterations") or 0) == 0
