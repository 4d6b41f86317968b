# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inventory variables the collection renamed, and which of them an inventory still sets.

A renamed variable that is still set would be ignored without a word (Ansible does not know
which names a role reads), so inventory_check.yml and the role that took the name over refuse it,
naming the new one (kubespray's validate_inventory does the same for its renames).
"""
from __future__ import annotations

from typing import Dict, Iterable, List

# old name -> new name
RENAMED: Dict[str, str] = dict(
    # Data preparation left megatron_launch for its own role, megatron_data.
    ("megatron_launch_data_" + key, "megatron_data_" + key)
    for key in ("input", "input_on", "json_keys", "tokenizer_type", "vocab_file", "merge_file", "vocab_size",
                "tokenizer_model", "append_eod", "workers", "stage")
)


def still_set(names: Iterable[str]) -> List[str]:
    """One line per renamed variable among ``names`` (a host's variable names), in table order:
    'megatron_launch_data_input is now megatron_data_input'."""
    present = set(str(n) for n in names)
    return ["%s is now %s" % (old, new) for old, new in RENAMED.items() if old in present]
