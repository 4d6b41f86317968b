# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job lookup: parts by term, the options passed on, errors as lookup errors."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.megatron_ds.cluster.plugins.lookup.job import LookupModule

INVENTORY = {"groups": {"megatron_nodes": ["n1", "n2"], "login": ["h"]}, "hostvars": {"n1": {}, "n2": {}, "h": {}},
             "megatron_job_tensor_parallel": 2}


class Templar:
    @staticmethod
    def template(value):
        return value


def lookup(monkeypatch, **options):
    # The option table comes from DOCUMENTATION through the plugin loader; here the adapter alone.
    plugin = LookupModule()
    plugin._templar = Templar()  # pylint: disable=protected-access
    values = {"nodes_group": "megatron_nodes", "head_group": "megatron_head", "extra_groups": []}
    values.update(options)
    monkeypatch.setattr(plugin, "set_options", lambda **kwargs: None)
    monkeypatch.setattr(plugin, "get_option", lambda name: values[name])
    return plugin


@pytest.mark.parametrize("terms, expected", [
    ([], [["cluster", "spec", "vars"]]),
    (["spec"], [2]),
    (["cluster", "spec"], ["n1", 2]),
])
def test_parts_by_term(monkeypatch, terms, expected):
    found = lookup(monkeypatch).run(terms, variables=INVENTORY)
    if not terms:
        assert [sorted(found[0])] == expected
    else:
        assert [part.get("head", part.get("tensor_parallel")) for part in found] == expected


def test_head_group_option(monkeypatch):
    assert lookup(monkeypatch, head_group="login").run(["cluster"], variables=INVENTORY)[0]["head"] == "h"


def test_an_invalid_spec_is_a_lookup_error_naming_the_variable(monkeypatch):
    with pytest.raises(AnsibleLookupError, match="megatron_ds.cluster.job: job spec invalid: .*tensor_parallel"):
        lookup(monkeypatch).run(["spec"], variables=dict(INVENTORY, megatron_job_tensor_parallel="x"))
