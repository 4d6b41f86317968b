# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_stack_facts module as Ansible runs it: docs, argument spec, and whole-module runs
against fake node roots in tmp_path (this machine has no GPU, so they are the no-GPU case)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import collect as gf
from ansible_collections.megatron_ds.cluster.plugins.modules import gpu_stack_facts as module
from ansible_collections.megatron_ds.cluster.tests.unit import module_runner as runner

H200 = Path(__file__).resolve().parents[3] / "fixtures" / "gpu-host-h200x2"

DOCS = runner.module_docs(module)


def run_module(args: Dict[str, Any], tmp_path: Path) -> Dict[str, Any]:
    return runner.run_module(module, args, tmp_path, timeout=120)


# --------------------------------------------------------------------------- documentation
@pytest.mark.parametrize("name", ["DOCUMENTATION", "EXAMPLES", "RETURN"])
def test_docs_are_yaml(name):
    assert DOCS[name]


def test_documented_options_match_the_argument_spec():
    runner.assert_options_match_argument_spec(module)
    options = DOCS["DOCUMENTATION"]["options"]
    for name, spec in module.ARGUMENT_SPEC.items():
        assert options[name].get("required", False) == spec.get("required", False), name


def test_attributes_say_check_mode_and_facts():
    attributes = DOCS["DOCUMENTATION"]["attributes"]
    assert attributes["check_mode"]["support"] == "full"
    assert attributes["facts"]["support"] == "full"
    assert attributes["diff_mode"]["support"] == "none"


def test_examples_call_the_module_by_fqcn():
    assert DOCS["EXAMPLES"][0]["megatron_ds.cluster.gpu_stack_facts"]["venv"]


def _return_tree():
    return DOCS["RETURN"]["ansible_facts"]["contains"]["gpu_stack_facts"]["contains"]


def test_return_documents_every_fact_returned(tmp_path):
    documented = _return_tree()
    # ssh_sweep only where ssh_sweep_targets is given (the head node of playbooks/preflight.yml)
    # converge only where converge_dir is given (playbooks/provision.yml's converge check)
    assert set(gf.collect(gf.Host(root=str(tmp_path), timeout=5))) == set(documented) - {"ssh_sweep", "converge"}
    facts = gf.collect(gf.Host(root=str(tmp_path), timeout=5), ssh_sweep_targets=["n1"])
    assert set(facts) == set(documented) - {"converge"}
    for key, value in facts.items():
        if isinstance(value, dict) and "contains" in documented[key]:
            assert set(value) == set(documented[key]["contains"]), key


@pytest.mark.parametrize("section, keys", [
    ("driver", {"version", "kernel_module", "source"}),
    ("gpus", {"count", "model", "models", "memory_mib", "uuids", "list"}),
    ("cuda", {"version", "source", "home", "nvcc_version", "installed"}),
    ("torch", {"version", "cuda", "cudnn", "nccl", "error"}),
    ("clock", {"synchronized", "offset_ms", "source"}),
])
def test_return_keeps_the_contract_preflight_reads(section, keys):
    assert keys <= set(_return_tree()[section]["contains"])


# --------------------------------------------------------------------------- whole module
def test_empty_node_gives_null_facts_and_changes_nothing(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    result = run_module({"root": str(root), "venv": "/opt/venv", "megatron_dir": "/opt/mds",
                         "disk_paths": ["/data", "/checkpoints"]}, tmp_path)
    assert result["_rc"] == 0 and not result.get("failed"), result
    assert result["changed"] is False
    facts = result["ansible_facts"]["gpu_stack_facts"]
    assert facts["gpus"]["count"] == 0 and facts["gpus"]["model"] is None
    assert facts["driver"]["version"] is None
    assert facts["cuda"]["version"] is None and facts["cuda"]["installed"] == []
    assert facts["torch"]["version"] is None and facts["torch"]["error"].startswith("no python in venv /opt/venv")
    assert facts["megatron_deepspeed"] == {"path": "/opt/mds", "commit": None, "present": False,
                                           "files": {"source": None, "checked": 0, "bad_count": 0, "bad": [], "error": None},
                                           "imports": None}
    assert facts["disk"]["/data"]["exists"] is False and isinstance(facts["disk"]["/data"]["free_bytes"], int)
    assert facts["infiniband"] == {"hcas": [], "peermem_loaded": False, "peermem_module": None, "memory_peers": []}
    assert facts["clock"]["synchronized"] is None
    assert list(root.iterdir()) == []


def test_check_mode_gives_the_same_facts(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    normal = run_module({"root": str(root)}, tmp_path)["ansible_facts"]["gpu_stack_facts"]
    checked = run_module({"root": str(root), "_ansible_check_mode": True}, tmp_path)
    assert checked["changed"] is False
    facts = checked["ansible_facts"]["gpu_stack_facts"]
    for volatile in ("disk", "memlock"):
        facts.pop(volatile), normal.pop(volatile)
    assert facts == normal


def test_node_files_without_tools(tmp_path):
    """The H200 host's files (driver version, headers) with no program to run: the file facts
    still come through, the tool facts stay empty."""
    root = tmp_path / "root"
    (root / "proc/driver/nvidia").mkdir(parents=True)
    (root / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n")
    (root / "usr/include/x86_64-linux-gnu").mkdir(parents=True)
    (root / "usr/include/x86_64-linux-gnu/cudnn_version.h").write_text(
        (H200 / "system-usr-include-cudnn_version.h").read_text())
    (root / "usr/include/nccl.h").write_text((H200 / "system-usr-include-nccl.h").read_text())
    (root / "usr/local/cuda-13.0/bin").mkdir(parents=True)
    os.symlink("/usr/local/cuda-13.0", str(root / "usr/local/cuda"))
    result = run_module({"root": str(root)}, tmp_path)
    facts = result["ansible_facts"]["gpu_stack_facts"]
    assert facts["driver"] == {"version": "580.159.04", "kernel_module": "open", "source": "/proc/driver/nvidia/version"}
    assert facts["cudnn"]["version"] == "9.14.0"
    assert facts["nccl"]["version"] == "2.28.3"
    assert facts["cuda"]["home"] == "/usr/local/cuda" and facts["cuda"]["version"] is None
    assert facts["gpus"]["count"] == 0


@pytest.mark.parametrize("args, message", [
    ({"timeout": 0}, "give a positive number of seconds"),
    ({"no_such_option": 1}, "no_such_option"),
    ({"disk_paths": "/data", "timeout": "soon"}, "timeout"),
])
def test_bad_arguments_fail_with_a_message(tmp_path, args, message):
    result = run_module(dict(args, root=str(tmp_path)), tmp_path)
    assert result.get("failed") is True
    assert message in result["msg"]
