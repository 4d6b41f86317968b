# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""roles/python_env/files/build_helpers.py: the compiler fallback for Megatron's dataset helper,
run for real with make and stand-in compilers. Each stand-in "compiles" by writing its own name
into the helper; the stand-in check fails (or crashes) on the helper of a compiler marked bad,
the way the GPU host's /opt/gcc g++ built a helper that crashed in build_sample_idx."""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[4] / "roles" / "python_env" / "files" / "build_helpers.py"
SPEC = importlib.util.spec_from_file_location("build_helpers", str(SCRIPT))
bh = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(bh)

MAKEFILE = "default: helpers.so\n%.so: %.cpp\n\t$(CXX) $< -o $@\n"
# The stand-in check: exit 0 for a good compiler's helper, 3 for a "bad" one, SIGSEGV for a "crash" one.
CHECK = """import glob, os, signal, sys
text = open(glob.glob(os.path.join(sys.argv[1], 'helpers*.so'))[0]).read()
if 'crash' in text:
    os.kill(os.getpid(), signal.SIGSEGV)
sys.exit(3 if 'bad' in text else 0)
"""

needs_make = pytest.mark.skipif(shutil.which("make") is None, reason="needs make (Debian: apt-get install make)")


def _compiler(bin_dir: Path, name: str, kind: str) -> str:
    path = bin_dir / name
    path.write_text("#!/bin/sh\necho '%s %s' > \"$3\"\n" % (kind, name))
    path.chmod(0o755)
    return str(path)


def _setup(tmp_path: Path, compilers):
    data = tmp_path / "megatron" / "data"
    data.mkdir(parents=True)
    (data / "Makefile").write_text(MAKEFILE)
    (data / "helpers.cpp").write_text("// stand-in\n")
    (tmp_path / "check.py").write_text(CHECK)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    paths = {name: _compiler(bin_dir, name, kind) for name, kind in compilers.items()}
    return data, bin_dir, paths


def _run(tmp_path, data, bin_dir, cxx):
    # Only the stand-ins and make: this machine's own compilers stay out of the test.
    if not (bin_dir / "make").exists():
        os.symlink(shutil.which("make"), str(bin_dir / "make"))
    env = dict(os.environ, PATH=str(bin_dir), MEGATRON_DS_HELPER_CXX="g++:c++:clang++")
    env.pop("CXX", None)
    if cxx:
        env["CXX"] = cxx
    proc = subprocess.run([sys.executable, str(SCRIPT), str(data), str(tmp_path / "check.py"), sys.executable],
                          env=env, capture_output=True, text=True, check=False)
    return proc.returncode, json.loads(proc.stdout)


@needs_make
@pytest.mark.parametrize("compilers, cxx, rc, compiler, tried", [
    # $CXX builds a working helper: used, nothing else tried
    ({"g++": "good"}, "g++", 0, "g++", ["g++"]),
    # the image's CXX builds a crashing helper: the next compiler found is tried and kept
    ({"opt-g++": "crash", "g++": "good"}, "opt-g++", 0, "g++", ["opt-g++", "g++"]),
    ({"opt-g++": "bad", "g++": "bad", "clang++": "good"}, "opt-g++", 0, "clang++", ["opt-g++", "g++", "clang++"]),
    # no CXX: make's default first (g++ on PATH)
    ({"g++": "good"}, None, 0, "make's default (g++)", ["make's default (g++)"]),
    # nothing works: every one named, exit 1
    ({"opt-g++": "crash", "g++": "bad"}, "opt-g++", 1, None, ["opt-g++", "g++"]),
])
def test_fallback_keeps_the_first_compiler_whose_helper_passes(tmp_path, compilers, cxx, rc, compiler, tried):
    data, bin_dir, paths = _setup(tmp_path, compilers)
    got_rc, result = _run(tmp_path, data, bin_dir, paths.get(cxx) if cxx else None)
    assert got_rc == rc and result["ok"] is (rc == 0)
    names = [os.path.basename(t["compiler"]) if t["compiler"].startswith("/") else t["compiler"] for t in result["tried"]]
    assert names[:len(tried)] == tried
    if compiler:
        assert os.path.basename(result["compiler"]) == compiler or result["compiler"] == compiler
        assert (data / "helpers.so").read_text().split()[0] == "good"
    crashed = [t for t in result["tried"] if t["check_rc"] is not None and t["check_rc"] < 0]
    assert all(t["check_rc"] == -11 for t in crashed)


@needs_make
def test_a_working_helper_is_kept_and_nothing_is_rebuilt(tmp_path):
    data, bin_dir, paths = _setup(tmp_path, {"opt-g++": "crash", "g++": "good"})
    assert _run(tmp_path, data, bin_dir, paths["opt-g++"])[1]["changed"] is True
    rc, again = _run(tmp_path, data, bin_dir, paths["opt-g++"])
    assert (rc, again["changed"], again["compiler"], again["tried"]) == (0, False, "kept", [])


@needs_make
def test_a_failing_build_is_reported_and_the_next_compiler_tried(tmp_path):
    data, bin_dir, paths = _setup(tmp_path, {"g++": "good"})
    broken = bin_dir / "broken++"
    broken.write_text("#!/bin/sh\necho 'internal compiler error' >&2\nexit 4\n")
    broken.chmod(0o755)
    rc, result = _run(tmp_path, data, bin_dir, str(broken))
    assert rc == 0 and result["tried"][0]["make_rc"] != 0 and "internal compiler error" in result["tried"][0]["output"]


@pytest.mark.parametrize("env_cxx, found, expected", [
    (None, {"g++": "/usr/bin/g++", "c++": "/usr/bin/c++"}, [None, "/usr/bin/c++"]),
    ("/opt/gcc/bin/g++", {"/opt/gcc/bin/g++": "/opt/gcc/bin/g++", "g++": "/usr/bin/g++"}, ["/opt/gcc/bin/g++", "/usr/bin/g++"]),
    # the same file under two names is tried once
    ("g++", {"g++": "/usr/bin/g++", "/usr/bin/g++": "/usr/bin/g++"}, ["g++"]),
    (None, {}, [None]),
])
def test_candidates(env_cxx, found, expected, monkeypatch):
    monkeypatch.setattr(os.path, "realpath", lambda p: p)
    assert bh.candidates(env_cxx, which=found.get) == expected
