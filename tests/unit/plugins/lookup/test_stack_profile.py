# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The stack_profile lookup: named profiles, the default for an empty name, and every profile of
the table when no name is given (the list inventory_check.yml accepts)."""
from __future__ import annotations

import copy

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.megatron_ds.cluster.plugins.lookup.stack_profile import LookupModule
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as sp


@pytest.mark.parametrize("terms, names", [
    (["cu121"], ["cu121"]),
    ([""], [sp.DEFAULT_PROFILE]),
    (["cpu", "cu130"], ["cpu", "cu130"]),
    ([], sp.names()),
])
def test_lookup_names(terms, names):
    assert [p["name"] for p in LookupModule().run(terms, variables={})] == names


def test_no_name_follows_the_table(monkeypatch):
    table = dict(sp.PROFILES, cu999=copy.deepcopy(sp.PROFILES["cu121"]))
    monkeypatch.setattr(sp, "PROFILES", table)
    assert [p["name"] for p in LookupModule().run([], variables={})] == sorted(table)


def test_unknown_profile_names_the_table():
    with pytest.raises(AnsibleLookupError, match="unknown stack profile 'cu118'; expected one of cpu, cpu-pypi, cu117, cu121, cu130"):
        LookupModule().run(["cu118"], variables={})
