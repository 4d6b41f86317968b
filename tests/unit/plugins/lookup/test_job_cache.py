# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job lookup's cache: the same inputs are read once; other inputs, or inputs that are
templates, are read again; an answer handed out is a copy."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.lookup import job as job_lookup


class _Templar:
    def template(self, value):
        return value


@pytest.fixture
def lookup(monkeypatch):
    calls = []
    real = job_lookup._job_inputs.job

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(job_lookup._job_inputs, "job", counted)
    monkeypatch.setattr(job_lookup, "_CACHE", {})
    plugin = job_lookup.LookupModule()
    plugin._templar = _Templar()  # pylint: disable=protected-access
    # The option table comes from DOCUMENTATION through the plugin loader; here the adapter alone.
    values = {"nodes_group": "megatron_nodes", "head_group": "megatron_head", "extra_groups": []}
    monkeypatch.setattr(plugin, "set_options", lambda **kwargs: None)
    monkeypatch.setattr(plugin, "get_option", lambda name: values[name])
    return plugin, calls


VARS = {"groups": {"megatron_nodes": ["n1", "n2"]}, "hostvars": {"n1": {}, "n2": {}},
        "megatron_stack_profile": "cpu", "megatron_job_gpus_per_node": 2}


@pytest.mark.parametrize("second, computed", [
    (VARS, 1),
    (dict(VARS, megatron_job_gpus_per_node=4), 2),
    (dict(VARS, groups={"megatron_nodes": ["n1"]}), 2),
    (dict(VARS, hostvars={"n1": {"megatron_job_node_address": "10.0.0.1"}, "n2": {}}), 2),
])
def test_same_inputs_are_read_once(lookup, second, computed):
    plugin, calls = lookup
    first = plugin.run(["spec", "cluster"], variables=dict(VARS))
    again = plugin.run(["spec", "cluster"], variables=dict(second))
    assert len(calls) == computed
    if computed == 1:
        assert again == first


def test_templated_inputs_are_not_cached(lookup):
    plugin, calls = lookup
    variables = dict(VARS, megatron_job_name="{{ inventory_hostname }}")
    plugin.run(["vars"], variables=variables)
    plugin.run(["vars"], variables=variables)
    assert len(calls) == 2


def test_an_answer_is_a_copy(lookup):
    plugin, _calls = lookup
    spec = plugin.run(["spec"], variables=dict(VARS))[0]
    spec["workdir"] = "/changed"
    assert plugin.run(["spec"], variables=dict(VARS))[0]["workdir"] != "/changed"
