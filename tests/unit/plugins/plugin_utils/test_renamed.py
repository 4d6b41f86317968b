# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The table of renamed inventory variables (plugins/plugin_utils/_renamed.py) and its filter."""
from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.plugins.filter.megatron_job import FilterModule
from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _renamed

ROOT = pathlib.Path(__file__).resolve().parents[4]


@pytest.mark.parametrize("names, lines", [
    ([], []),
    (["megatron_job_name", "megatron_data_input"], []),
    (["megatron_launch_data_input"], ["megatron_launch_data_input is now megatron_data_input"]),
    # table order, whatever order the host gives
    (["megatron_launch_data_workers", "megatron_launch_data_json_keys"],
     ["megatron_launch_data_json_keys is now megatron_data_json_keys",
      "megatron_launch_data_workers is now megatron_data_workers"]),
    ({"megatron_launch_data_tokenizer_type": "NullTokenizer"},
     ["megatron_launch_data_tokenizer_type is now megatron_data_tokenizer_type"]),
])
def test_still_set(names, lines):
    assert _renamed.still_set(names) == lines
    assert FilterModule().filters()["renamed_variables"](names) == lines


def test_every_new_name_is_a_role_default():
    """A rename points at a variable a role really reads, so the fix the message gives works."""
    defaults = {}
    for path in (ROOT / "roles").glob("*/defaults/main.yml"):
        defaults.update(yaml.safe_load(path.read_text()) or {})
    assert [new for new in _renamed.RENAMED.values() if new not in defaults] == []
    assert [old for old in _renamed.RENAMED if old in defaults] == []
