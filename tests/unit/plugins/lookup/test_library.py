# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The library lookup: the collection's own module_utils, packed, and its errors."""
from __future__ import annotations

import tarfile

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.megatron_ds.cluster.plugins.lookup.library import LookupModule
from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _library


def lookup(monkeypatch, cache_dir):
    # The option table comes from DOCUMENTATION through the plugin loader; here the adapter alone.
    plugin = LookupModule()
    monkeypatch.setattr(plugin, "set_options", lambda **kwargs: None)
    monkeypatch.setattr(plugin, "get_option", lambda name: {"cache_dir": cache_dir}[name])
    return plugin


def test_packs_this_collections_module_utils(tmp_path, monkeypatch):
    result = lookup(monkeypatch, str(tmp_path)).run([], variables={})
    assert len(result) == 1
    built = result[0]
    root = _library.module_utils_root()
    assert built["digest"] == _library.digest(root, _library.source_files(root))
    with tarfile.open(built["archive"]) as tar:
        names = tar.getnames()
    assert "ansible_collections/megatron_ds/cluster/plugins/module_utils/_job/spec.py" in names


def test_an_unwritable_cache_is_a_lookup_error(tmp_path, monkeypatch):
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    with pytest.raises(AnsibleLookupError, match="megatron_ds.cluster.library"):
        lookup(monkeypatch, str(blocked / "cache")).run([], variables={})
