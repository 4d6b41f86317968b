# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The source_manifest module as Ansible runs it: docs against the argument spec, and whole-module
runs on a tree in tmp_path."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import integrity as _integrity
from ansible_collections.megatron_ds.cluster.plugins.modules import source_manifest as module
from ansible_collections.megatron_ds.cluster.tests.unit import module_runner as runner


def run_module(args: Dict[str, Any], tmp_path: Path) -> Dict[str, Any]:
    return runner.run_module(module, args, tmp_path, timeout=60)


@pytest.mark.parametrize("name", ["DOCUMENTATION", "EXAMPLES", "RETURN"])
def test_docs_are_yaml(name):
    assert runner.module_docs(module)[name]


def test_documented_options_match_the_argument_spec():
    runner.assert_options_match_argument_spec(module)


def _tree(tmp_path: Path) -> Path:
    tree = tmp_path / "tree"
    (tree / "megatron").mkdir(parents=True)
    (tree / "pretrain_gpt.py").write_text("x = 1\n")
    (tree / "megatron" / "__init__.py").write_text("")
    (tree / ".megatron-ds-archive.sha256").write_text("0" * 64 + "\n")
    return tree


@pytest.mark.parametrize("existing, force, check_mode, changed, written", [
    (None, False, False, True, True),            # first run: written
    ("manifest", False, False, False, False),   # kept: idempotent
    ("manifest", True, False, True, True),      # just unpacked: written anew
    ("garbage", False, False, True, True),      # not a manifest: replaced
    (None, False, True, True, False),           # check mode writes nothing
])
def test_writes_the_manifest_once(tmp_path, existing, force, check_mode, changed, written):
    tree = _tree(tmp_path)
    target = tree / _integrity.MANIFEST_NAME
    if existing == "manifest":
        _integrity.write_manifest(str(tree))
    elif existing == "garbage":
        target.write_text("garbage\n")
    before = target.read_text() if target.exists() else None
    (tree / "added-later.py").write_text("y\n")
    result = run_module({"path": str(tree), "force": force, "_ansible_check_mode": check_mode}, tmp_path)
    assert result["_rc"] == 0, result
    assert (result["changed"], result["manifest"]) == (changed, str(target))
    after = target.read_text() if target.exists() else None
    assert (after != before) is written
    if after is not None and written:
        listed = [e[0] for e in _integrity.parse_manifest(after)]
        assert listed == ["added-later.py", "megatron/__init__.py", "pretrain_gpt.py"]
        assert result["files"] == 3


def test_a_missing_tree_fails_naming_it(tmp_path):
    result = run_module({"path": str(tmp_path / "absent")}, tmp_path)
    assert result["failed"] and "is not a directory" in result["msg"]
