# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The megatron_checkpoint_info module as Ansible runs it: docs against the argument spec, and
whole-module runs on checkpoint trees in tmp_path."""
from __future__ import annotations

import sys
import zipfile
from pathlib import Path
from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.modules import megatron_checkpoint_info as module
from ansible_collections.megatron_ds.cluster.tests.unit import module_runner as runner

DOCS = runner.module_docs(module)


def run_module(args: Dict[str, Any], tmp_path: Path) -> Dict[str, Any]:
    return runner.run_module(module, args, tmp_path, timeout=120)


def tree(root: Path, files, latest: str = "global_step4") -> Path:
    (root / "global_step4").mkdir(parents=True)
    for name in files:
        with zipfile.ZipFile(str(root / "global_step4" / name), "w") as archive:
            archive.writestr("archive/data.pkl", b"x" * 100)
    (root / "latest").write_text(latest)
    return root


GOOD = ["mp_rank_00_model_states.pt", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt"]


@pytest.mark.parametrize("name", ["DOCUMENTATION", "EXAMPLES", "RETURN"])
def test_docs_are_yaml(name):
    assert DOCS[name]


def test_documented_options_match_the_argument_spec():
    runner.assert_options_match_argument_spec(module, ("type", "default", "elements", "required", "choices"))
    options = DOCS["DOCUMENTATION"]["options"]
    suboptions = options["expect"]["suboptions"]
    assert set(suboptions) == set(module.ARGUMENT_SPEC["expect"]["options"])
    for name, spec in module.ARGUMENT_SPEC["expect"]["options"].items():
        assert suboptions[name]["type"] == spec["type"] and suboptions[name].get("choices") == spec.get("choices")


def test_documented_return_covers_the_result(tmp_path):
    result = run_module({"path": str(tree(tmp_path / "ckpt", GOOD)), "keep": 1, "load": True,
                         "python": sys.executable}, tmp_path)
    # _rc is the test runner's record of the exit code, not module output.
    assert set(result) - {"changed", "invocation", "msg", "failed", "_rc"} <= set(DOCS["RETURN"])


@pytest.mark.parametrize("files, args, failed, text", [
    (GOOD, {"expect": {"world_size": 2, "zero_stage": 1, "precision": "bf16"}}, False, None),
    (GOOD, {"expect": {"tensor_parallel": 2, "world_size": 4}}, True, "ds_to_universal"),
    (GOOD[:2], {"expect": {"world_size": 2}}, True, "bf16_zero_pp_rank_1_mp_rank_00_optim_states.pt (dp 1, mp 0)"),
    (GOOD[:2], {"expect": {"world_size": 2}, "fail_on_problems": False}, False, None),
    (GOOD, {"ranks": [1]}, True, "ranks needs the job's shape"),
    (GOOD, {"load": True, "python": "/nonexistent/bin/python"}, True, "is not an executable"),
])
def test_module_runs(tmp_path, files, args, failed, text):
    root = tree(tmp_path / "ckpt", files)
    result = run_module(dict(args, path=str(root)), tmp_path)
    assert bool(result.get("failed")) is failed, result
    assert result.get("changed") is False or failed
    if failed:
        assert str(root) in result["msg"] and text in result["msg"], result["msg"]
    if "summary" in result:
        assert result["summary"][0].startswith(str(root))


def test_failure_message_says_found_expected_and_what_to_do(tmp_path):
    root = tree(tmp_path / "ckpt", GOOD, latest="global_step9")
    result = run_module({"path": str(root), "expect": {"world_size": 2}}, tmp_path)
    assert result["failed"] and result["tag"] == "global_step4" and result["tag_source"] == "newest"
    for part in ("Found tag global_step4", "expected data_parallel=2", "names global_step9", "latest"):
        assert part in result["msg"], result["msg"]
