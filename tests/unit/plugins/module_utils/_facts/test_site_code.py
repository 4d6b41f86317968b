# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Unit tables for the code in site-packages that no RECORD owns (module_utils/_facts/site_code.py),
as gpu_stack_facts reports it under packages.unowned."""
from __future__ import annotations

from pathlib import Path
from typing import Dict, List, Optional

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import collect as gf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import site_code as sc

from .test_integrity import SITE, TORCH_FILES, _fake_venv, host, pip_install


def _unowned(tmp_path: Path, extra: Dict[str, bytes], egg_info: Optional[Dict[str, bytes]] = None) -> List[Dict]:
    _fake_venv(tmp_path)
    pip_install(tmp_path, "torch", "2.13.0+cpu", TORCH_FILES)
    pip_install(tmp_path, "typing_extensions", "4.16.0", {"typing_extensions.py": b"# typing\n"})
    pip_install(tmp_path, "setuptools", "80.9.0", {"distutils-precedence.pth": b"import os; var = 'SETUPTOOLS_USE_DISTUTILS'\n",
                                                   "setuptools/__init__.py": b"\n"})
    for path, content in dict(extra, **(egg_info or {})).items():
        target = tmp_path / (SITE.lstrip("/") + "/" + path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    stack = gf.collect_python_stack(host(tmp_path), "/venv", [], "files")
    unowned = stack["packages"]["unowned"]
    assert unowned["count"] == len(unowned["entries"])
    return unowned["entries"]


@pytest.mark.parametrize("extra, egg_info, expected", [
    # pip's own files only (a .pth a RECORD lists, such as setuptools', is owned): nothing
    ({}, None, []),
    # byte code Python wrote for an owned module, and a data directory with no Python in it
    ({"__pycache__/typing_extensions.cpython-311.pyc": b"\0", "share/readme.txt": b"x"}, None, []),
    # the issue's .pth: one line that runs at every interpreter start
    ({"zz-drift.pth": b"import os; os.environ.setdefault('NCCL_ALGO', 'Tree')\n"}, None,
     [("zz-drift.pth", "pth", "1 import line(s) run at every interpreter start: import os; "
                              "os.environ.setdefault('NCCL_ALGO', 'Tree')")]),
    # a .pth of plain paths: what it adds to sys.path becomes importable
    ({"extra.pth": b"# site paths\n/opt/site/python\n"}, None,
     [("extra.pth", "pth", "1 path line(s) added to sys.path: /opt/site/python")]),
    ({"sitecustomize.py": b"import builtins\n"}, None,
     [("sitecustomize.py", "startup", "imported at every interpreter start")]),
    ({"usercustomize/__init__.py": b"\n"}, None,
     [("usercustomize", "startup", "a package, imported at every interpreter start")]),
    # a stray module, extension and package
    ({"patch_torch.py": b"import torch\n"}, None, [("patch_torch.py", "module", "importable as 'patch_torch'")]),
    ({"fast.cpython-311-x86_64-linux-gnu.so": b"\x7fELF"}, None,
     [("fast.cpython-311-x86_64-linux-gnu.so", "module", "importable as 'fast'")]),
    ({"helpers/__init__.py": b"\n"}, None, [("helpers", "package", "a package, importable as 'helpers'")]),
    # a namespace package (no __init__.py) imports too
    ({"nsdir/mod.py": b"\n"}, None, [("nsdir", "package", "a package, importable as 'nsdir'")]),
    # a setup.py install: its egg-info names what it installed
    ({"legacy/__init__.py": b"\n", "legacy_c.py": b"\n"},
     {"legacy-1.0-py3.11.egg-info/PKG-INFO": b"Metadata-Version: 1.0\nName: legacy\nVersion: 1.0\n",
      "legacy-1.0-py3.11.egg-info/installed-files.txt": b"../legacy/__init__.py\nPKG-INFO\n",
      "legacy-1.0-py3.11.egg-info/top_level.txt": b"legacy_c\n"}, []),
])
def test_code_no_record_owns_is_listed(tmp_path, extra, egg_info, expected):
    entries = _unowned(tmp_path, extra, egg_info)
    assert [(e["path"][len(SITE) + 1:], e["kind"], e["detail"]) for e in entries] == expected


def test_the_list_is_capped_the_count_is_not(tmp_path):
    entries = {"stray_%02d.py" % i: b"\n" for i in range(sc.SHOWN + 5)}
    _fake_venv(tmp_path)
    for path, content in entries.items():
        target = tmp_path / (SITE.lstrip("/") + "/" + path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    found = sc.unowned_code(host(tmp_path), [SITE], {})
    assert found["count"] == sc.SHOWN + 5 and len(found["entries"]) == sc.SHOWN


@pytest.mark.parametrize("paths, owned", [
    (["numpy/__init__.py", "numpy-2.2.6.dist-info/RECORD", "../../../bin/f2py", "six.py"],
     {"numpy", "numpy-2.2.6.dist-info", "six.py"}),
    (["/abs/path", "", "a\\b.py"], {"a"}),
])
def test_record_top_level(paths, owned):
    assert sc.record_top_level(paths) == owned
