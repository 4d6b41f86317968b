# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The checkpoints role's timer check (files/checkpoint_check.py), installed beside the collection's
library as the roles install them (os_base tasks_from: library), run as the service runs it."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from ansible_collections.megatron_ds.cluster.tests.support.library import install as install_library

ROOT = Path(__file__).resolve().parents[4]
CHECKER = ROOT / "roles" / "checkpoints" / "files" / "checkpoint_check.py"


@pytest.fixture
def installed(tmp_path, monkeypatch):
    # The service's environment: MEGATRON_DS_LIBRARY names the unpacked library.
    monkeypatch.setenv("MEGATRON_DS_LIBRARY", str(install_library(tmp_path / "node")))
    target = tmp_path / "bin"
    target.mkdir()
    shutil.copy(str(CHECKER), str(target / "checkpoint_check.py"))
    return target / "checkpoint_check.py"


def checkpoint(root: Path, dp: int) -> Path:
    tag = root / "global_step8"
    tag.mkdir(parents=True)
    names = ["mp_rank_00_model_states.pt"] + ["zero_pp_rank_%d_mp_rank_00_optim_states.pt" % d for d in range(dp)]
    for name in names:
        with zipfile.ZipFile(str(tag / name), "w") as archive:
            archive.writestr("archive/data.pkl", b"x" * 64)
    (root / "latest").write_text("global_step8")
    return root


@pytest.mark.parametrize("dp, expect, rc, problem", [
    (2, {"world_size": 2, "zero_stage": 1}, 0, None),
    (1, {"world_size": 2, "zero_stage": 1}, 1, "zero_pp_rank_1_mp_rank_00_optim_states.pt"),
    (2, {"tensor_parallel": 2, "world_size": 4}, 1, "ds_to_universal"),
])
def test_timer_check_writes_the_result(tmp_path, installed, dp, expect, rc, problem):
    root = checkpoint(tmp_path / "ckpt", dp)
    result = tmp_path / "out" / "check.json"
    result.parent.mkdir()
    config = tmp_path / "check.json"
    config.write_text(json.dumps({"path": str(root), "tag": None, "expect": expect, "load": False,
                                  "python": sys.executable, "result": str(result)}))
    proc = subprocess.run([sys.executable, str(installed), "--config", str(config)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == rc, proc.stdout + proc.stderr
    report = json.loads(result.read_text())
    assert report["ok"] is (rc == 0) and report["tag"] == "global_step8" and report["checked_at"]
    assert proc.stdout.splitlines()[0].startswith(str(root))
    if problem:
        assert problem in report["message"] and str(root) in report["message"]
    assert not list(result.parent.glob(".checkpoint-check.*")), "temporary file left behind"


@pytest.mark.parametrize("content", ["{not json", json.dumps({"expect": {}}), json.dumps({"path": "/x", "expect": {"tp": 1}})])
def test_timer_check_refuses_a_bad_config(tmp_path, installed, content):
    config = tmp_path / "check.json"
    config.write_text(content)
    proc = subprocess.run([sys.executable, str(installed), "--config", str(config)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert proc.returncode == 2 and "checkpoint_check: config" in proc.stderr
