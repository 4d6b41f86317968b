# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Bad job inputs stop at the schema (issue 39, "bad input stops at the door"): each row is a value
an adversarial user tried, and the error must name the variable and the value found. The legal
neighbours of each row pass, so the bounds do not refuse real jobs."""
from __future__ import annotations

import math
from typing import Any

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec

BAD = [
    # (key, value, words the message must hold besides the variable)
    ("lr", math.nan, ["nan", "finite"]),
    ("lr", ".nan", [".nan", "finite"]),
    ("lr", "inf", ["inf", "finite"]),
    ("min_lr", "-.inf", ["-.inf", "finite"]),
    ("lr", 0, ["found 0", "> 0"]),
    ("lr", -1e-4, ["-0.0001", "> 0"]),
    ("weight_decay", -0.1, ["-0.1", ">= 0"]),
    ("adam_beta2", 1.0, ["found 1", "< 1"]),
    ("init_method_std", 0.0, ["found 0", "> 0"]),
    ("clip_grad", -1, ["-1", ">= 0"]),
    ("master_port", 70000, ["70000", "from 1 to 65535"]),
    ("master_port", 0, ["found 0", "from 1 to 65535"]),
    ("log_interval", 0, ["found 0", ">= 1", "training.py:1106"]),
    ("eval_interval", 0, ["found 0", ">= 1", "training.py:597"]),
    ("save_interval", 0, ["found 0", ">= 1", "training.py:1343"]),
    ("num_layers", "1e10", ["10000000000", "from 1 to 1024"]),
    ("num_layers", 10 ** 10, ["10000000000", "from 1 to 1024"]),
    ("hidden_size", 10 ** 6, ["1000000", "from 1 to 131072"]),
    ("seq_length", 2 ** 23, ["8388608", "from 1 to 4194304"]),
    ("max_position_embeddings", 0, ["found 0", "from 1"]),
    ("data_path", "/shared/my data/x_text_document", ["'/shared/my data/x_text_document'", "2 words", "whitespace"]),
    ("data_path", "0.5 /d/a /d/b", ["'0.5 /d/a /d/b'", "odd number"]),
    ("data_path", ["/shared/my data/x"], ["'/shared/my data/x'", "without whitespace"]),
    ("data_path", "", ["''", "dataset prefix"]),
    ("venv", "/opt/my venv", ["'/opt/my venv'", "without spaces", "multinode_runner.py"]),
    ("cuda_home", "/usr/local/cuda 12", ["'/usr/local/cuda 12'", "without spaces"]),
    ("megatron_dir", "/opt/Megatron DeepSpeed", ["'/opt/Megatron DeepSpeed'", "without spaces"]),
]


@pytest.mark.parametrize(("key", "value", "words"), BAD, ids=["%s=%r" % row[:2] for row in BAD])
def test_bad_value_is_refused_naming_variable_and_value(key: str, value: Any, words: list) -> None:
    with pytest.raises(_job_schema.JobError) as caught:
        _job_schema.coerce(key, value)
    message = str(caught.value)
    assert message.startswith("megatron_job_%s: found " % key), message
    for word in words:
        assert word in message, message
    # Through normalize too: the one door every reader (validate_job, plan_job, the job lookup) uses.
    with pytest.raises(_job_schema.JobError):
        _job_spec.normalize({"megatron_job_" + key: value})


GOOD = [
    ("lr", "6e-5", 6e-5), ("min_lr", 0, 0.0), ("weight_decay", 0, 0.0), ("adam_beta2", 0.999, 0.999),
    ("master_port", 65535, 65535), ("master_port", 1, 1), ("log_interval", 1, 1), ("save_interval", "1_000", 1000),
    ("num_layers", 1024, 1024), ("hidden_size", 20480, 20480), ("seq_length", 1048576, 1048576),
    ("data_path", "0.7 /d/a 0.3 /d/b", "0.7 /d/a 0.3 /d/b"), ("data_path", ["1", "/d/a"], "1 /d/a"),
    ("data_path", " /d/a_text_document\n", "/d/a_text_document"), ("venv", "/opt/megatron/venv", "/opt/megatron/venv"),
]


@pytest.mark.parametrize(("key", "value", "expected"), GOOD, ids=["%s=%r" % row[:2] for row in GOOD])
def test_legal_neighbour_passes(key: str, value: Any, expected: Any) -> None:
    assert _job_schema.coerce(key, value) == expected
