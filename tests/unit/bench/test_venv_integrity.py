# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/venv_integrity.py on a small fake venv: both measured checks count the files they
compare, and the edit case hashes one file and puts its mtime back."""
import importlib.util
import os
import sys
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("venv_integrity", os.path.join(HERE, "..", "..", "..", "bench", "venv_integrity.py"))
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def _dist(site: Path, name: str, version: str, files: dict) -> None:
    meta = site / ("%s-%s.dist-info" % (name, version))
    meta.mkdir(parents=True)
    lines = []
    for rel, content in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(content)
        lines.append("%s,,%d" % (rel, len(content)))
    (meta / "METADATA").write_text("Name: %s\nVersion: %s\n" % (name, version))
    (meta / "RECORD").write_text("\n".join(lines + ["%s/RECORD,," % meta.name]) + "\n")


def test_both_checks_count_their_files(tmp_path):
    site = tmp_path / "lib" / ("python%d.%d" % sys.version_info[:2]) / "site-packages"
    _dist(site, "torch", "2.13.0", {"torch/__init__.py": b"x" * 10, "torch/lib/a.so": b"y" * 100})
    _dist(site, "numpy", "2.2.6", {"numpy/__init__.py": b"z" * 5})
    assert bench.stack_only(str(tmp_path)) == 2
    assert bench.whole(str(tmp_path)) == 3
    biggest = site / "torch/lib/a.so"
    stamp = os.stat(str(biggest))
    assert bench.files_after_edit(str(tmp_path), str(biggest), stamp) == 3
    assert os.stat(str(biggest)).st_mtime_ns == stamp.st_mtime_ns
    assert bench.files_after_edit(str(tmp_path), None, None) == 0
