# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node library (plugins/plugin_utils/_library.py): what goes in, the digest, a reproducible
archive, and a library that imports on its own, as the node programs import it."""
from __future__ import annotations

import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _library
from ansible_collections.megatron_ds.cluster.tests.support.library import install as install_library

MU = "ansible_collections/megatron_ds/cluster/plugins/module_utils"


def tree(root: Path, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.mark.parametrize("files, expected", [
    ({"_a.py": "", "_p/__init__.py": "", "_p/b.py": ""}, ["_a.py", "_p/__init__.py", "_p/b.py"]),
    # Bytecode, caches and other files are not the library.
    ({"_a.py": "", "__pycache__/_a.cpython-311.pyc": "x", "_p/__pycache__/b.cpython-311.pyc": "x",
      "_p/b.py": "", "notes.txt": "x", ".hidden/c.py": ""}, ["_a.py", "_p/b.py"]),
])
def test_source_files(tmp_path, files, expected):
    assert _library.source_files(str(tree(tmp_path, files))) == expected


@pytest.mark.parametrize("change", [
    {"_a.py": "x = 2\n"},          # a file's bytes
    {"_c.py": ""},                 # a file more
    {"_p/a.py": "x = 1\n"},        # same bytes, other name
])
def test_digest_changes_with_any_file(tmp_path, change):
    base = {"_a.py": "x = 1\n"}
    one = tree(tmp_path / "one", base)
    other = {**base, **change} if "_p/a.py" not in change else change
    two = tree(tmp_path / "two", other)
    assert _library.digest(str(one), _library.source_files(str(one))) != _library.digest(str(two), _library.source_files(str(two)))


def test_archive_is_reproducible_and_laid_out_as_the_import_path(tmp_path):
    root = tree(tmp_path / "src", {"_a.py": "A = 1\n", "_p/b.py": "from .. import _a\nB = _a.A + 1\n"})
    first = _library.build_archive(str(root), str(tmp_path / "c1"))
    os.utime(root / "_a.py", (1, 1))  # a newer mtime changes nothing
    second = _library.build_archive(str(root), str(tmp_path / "c2"))
    assert first["digest"] == second["digest"] and first["files"] == 2
    assert Path(first["archive"]).read_bytes() == Path(second["archive"]).read_bytes()
    with tarfile.open(first["archive"]) as tar:
        names = tar.getnames()
        marker = tar.extractfile(_library.MARKER).read().decode()
    assert marker.splitlines()[0] == first["digest"]
    # Every level is a regular package, the package without its own __init__.py gets an empty one.
    for expected in ["ansible_collections/__init__.py", MU + "/__init__.py", MU + "/_p/__init__.py", MU + "/_a.py",
                     MU + "/_p/b.py"]:
        assert expected in names


def test_a_second_build_reuses_the_archive(tmp_path):
    root = tree(tmp_path / "src", {"_a.py": ""})
    first = _library.build_archive(str(root), str(tmp_path))
    Path(first["archive"]).write_bytes(b"kept")  # same digest: not rebuilt
    assert Path(_library.build_archive(str(root), str(tmp_path))["archive"]).read_bytes() == b"kept"


def test_an_empty_tree_is_refused(tmp_path):
    with pytest.raises(ValueError, match="no Python files"):
        _library.build_archive(str(tmp_path), str(tmp_path))


def test_every_module_imports_from_the_library_alone(tmp_path):
    # What a node has: the unpacked library and the standard library, nothing of this checkout.
    # A module that imports a file outside the library, or a third-party package, fails here.
    library = install_library(tmp_path)
    root = library / MU
    modules = sorted(
        ".".join(p.relative_to(library).with_suffix("").parts) for p in root.rglob("*.py") if p.name != "__init__.py")
    assert len(modules) > 40
    probe = "import importlib, sys\nfor name in sys.argv[1:]:\n    importlib.import_module(name)\nprint('ok')\n"
    done = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, %r)\n%s" % (str(library), probe)]
                          + modules, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_collection_root_is_the_collection_directory():
    """The supervisor builds the collection from here (no role_path/../..)."""
    root = Path(_library.collection_root())
    assert (root / "galaxy.yml").is_file() or (root / "MANIFEST.json").is_file()
    assert (root / "plugins" / "module_utils") == Path(_library.module_utils_root())
