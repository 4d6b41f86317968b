# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a module file the way AnsiballZ does, and read its documentation, for the module tests
(imported as ansible_collections.megatron_ds.cluster.tests.unit.module_runner)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, Sequence

import yaml


def module_docs(module: ModuleType) -> Dict[str, Any]:
    """DOCUMENTATION, EXAMPLES and RETURN, each parsed as YAML."""
    return {name: yaml.safe_load(getattr(module, name)) for name in ("DOCUMENTATION", "EXAMPLES", "RETURN")}


def run_module(module: ModuleType, args: Dict[str, Any], tmp_path: Path, timeout: int = 120) -> Dict[str, Any]:
    """A fresh Python runs the module file with its arguments in a file; the result JSON, with the
    process's exit code as ``_rc``."""
    module_file = Path(module.__file__)
    # .../ansible_collections/megatron_ds/cluster/plugins/modules/<name>.py
    import_root = module_file.parents[5]
    args_file = tmp_path / "args.json"
    args_file.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=str(import_root))
    proc = subprocess.run([sys.executable, str(module_file), str(args_file)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env, timeout=timeout, universal_newlines=True, check=False)
    assert proc.stdout.strip(), proc.stderr
    result = json.loads(proc.stdout)
    result["_rc"] = proc.returncode
    return result


def assert_options_match_argument_spec(module: ModuleType,
                                       keys: Sequence[str] = ("type", "default", "elements")) -> None:
    """DOCUMENTATION's options are the module's ARGUMENT_SPEC: the same names, and per option the
    same value of every key in ``keys``."""
    options = module_docs(module)["DOCUMENTATION"]["options"]
    assert set(options) == set(module.ARGUMENT_SPEC)
    for name, spec in module.ARGUMENT_SPEC.items():
        for key in keys:
            assert options[name].get(key) == spec.get(key), (name, key)
