# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_facts/imports.py: the static walk of the trainer's start-up imports, its resolution against a
venv, and the preflight row that names node, module, importer and package."""
from __future__ import annotations

import ast
import os
import textwrap
from pathlib import Path
from typing import Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import collect as gf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import imports as im
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import matrix as pm
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight.rows import FAIL, PASS

from ansible_collections.megatron_ds.cluster.tests.support.upstream import SOURCE


def _read(path: str):
    try:
        return Path(path).read_text()
    except OSError:
        return None


def _tree(root: Path, files: Dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return root


@pytest.mark.parametrize("source, accelerator, expected", [
    ("import torch\nimport os.path\n", "cuda", [("torch", 1), ("os.path", 2)]),
    ("from torch import nn\n", "cuda", [("torch", 1), ("torch.nn", 1)]),
    ("from . import util\n", "cuda", [("pkg", 1), ("pkg.util", 1)]),
    ("from ..core import mpu\n", "cuda", [("core", 1), ("core.mpu", 1)]),
    ("from .x import *\n", "cuda", [("pkg.x", 1)]),
    # guarded by a handler that catches the ImportError: not a start-up failure
    ("try:\n    import apex\nexcept ImportError:\n    apex = None\n", "cuda", []),
    ("try:\n    import apex\nexcept:\n    apex = None\n", "cuda", []),
    ("try:\n    import apex\nexcept (KeyError, ModuleNotFoundError):\n    pass\n", "cuda", []),
    # a handler that does not catch it: the import still fails the start
    ("try:\n    import apex\nexcept KeyError:\n    pass\n", "cuda", [("apex", 2)]),
    ("try:\n    pass\nexcept ImportError:\n    pass\nelse:\n    import six\nfinally:\n    import re\n", "cuda",
     [("six", 6), ("re", 8)]),
    # the accelerator's branch (megatron/model/__init__.py's shape), decided per accelerator
    ("if get_accelerator().device_name() == 'cuda':\n    import apex\nelse:\n    import cpuonly\n", "cuda", [("apex", 2)]),
    ("if get_accelerator().device_name() == 'cuda':\n    import apex\nelse:\n    import cpuonly\n", "cpu", [("cpuonly", 4)]),
    ("if get_accelerator().device_name() != 'cuda':\n    import x\n", "cpu", [("x", 2)]),
    ("if get_accelerator().device_name() in ('xpu', 'cpu'):\n    import x\n", "cuda", []),
    # any other test: neither branch counts
    ("if hasattr(torch.xpu, 'IpexRmsNorm'):\n    import ipex\nelse:\n    import y\n", "cpu", []),
    # function and class bodies run later
    ("def f():\n    import late\nclass C:\n    import later\n", "cuda", []),
    ("with open('x') as f:\n    import z\n", "cuda", [("z", 2)]),
])
def test_module_imports(source, accelerator, expected):
    assert im.module_imports(source, "pkg.mod", False, accelerator) == expected


def test_relative_import_inside_a_package_init():
    assert im.module_imports("from .core import x\n", "megatron", True) == [("megatron.core", 1), ("megatron.core.x", 1)]


@pytest.mark.parametrize("test, accelerator, expected", [
    ("get_accelerator().device_name() == 'cuda'", "cuda", True),
    ("get_accelerator().device_name() == 'cuda'", "cpu", False),
    ("get_accelerator().device_name() != 'xpu'", "cpu", True),
    ("get_accelerator().device_name() not in ['cuda']", "cuda", False),
    ("get_accelerator().device_name() == name", "cuda", None),
    ("get_accelerator().name() == 'cuda'", "cuda", None),
    ("x == 'cuda'", "cuda", None),
    ("a < b < c", "cuda", None),
])
def test_accelerator_test(test, accelerator, expected):
    assert im.accelerator_test(ast.parse(test, mode="eval").body, accelerator) is expected


CHECKOUT = {
    "train.py": """\
        import os
        from lib import start
        from lib.data import ds
        """,
    "lib/__init__.py": "import numpy\n",
    "lib/start.py": """\
        from .data import vit
        def later():
            import never_checked
        """,
    "lib/data/__init__.py": "",
    "lib/data/ds.py": "import regex\n",
    "lib/data/vit.py": "import torch\nimport torchvision\nfrom torchvision import transforms\n",
    "lib/unused.py": "import not_reached\n",
}


def test_closure_walks_only_what_the_entry_reaches(tmp_path):
    root = _tree(tmp_path, CHECKOUT)
    outside, walked, error = im.closure(str(root), "train.py", _read, os.path.isfile)
    assert error is None
    assert walked == 6  # train.py, lib, lib/start, lib/data, lib/data/ds, lib/data/vit
    assert outside == {
        "os": ["train.py:1"], "numpy": ["lib/__init__.py:1"], "regex": ["lib/data/ds.py:1"],
        "torch": ["lib/data/vit.py:1"], "torchvision": ["lib/data/vit.py:2", "lib/data/vit.py:3"],
    }


@pytest.mark.parametrize("files, error", [
    ({"train.py": "import lib\n", "lib/__init__.py": "def broken(:\n"}, "lib/__init__.py"),
    ({"train.py": "import os\n"}, None),
])
def test_closure_names_a_file_it_cannot_parse(tmp_path, files, error):
    root = _tree(tmp_path, files)
    found = im.closure(str(root), "train.py", _read, os.path.isfile)[2]
    assert (found is None) if error is None else (error in found)


def test_closure_is_bounded(tmp_path):
    files = {"train.py": "import m0\n"}
    files.update({"m%d.py" % i: "import m%d\n" % (i + 1) for i in range(10)})
    root = _tree(tmp_path, files)
    error = im.closure(str(root), "train.py", _read, os.path.isfile, limit=4)[2]
    assert error == "stopped after 4 modules"


@pytest.mark.parametrize("entries, expected", [
    (["torch", "torch-2.13.0.dist-info", "six.py", "yaml", "_yaml", "regex", "x.pth", ".hidden",
      "PIL", "numpy.libs", "google", "_cffi_backend.cpython-311-x86_64-linux-gnu.so", "old.pyc"],
     {"torch", "six", "yaml", "_yaml", "regex", "PIL", "google", "_cffi_backend", "old"}),
    # a removed torchvision leaves auditwheel's torchvision.libs behind: not importable
    (["torchvision.libs", "torchvision-0.29.1.dist-info", "torchvision.data"], set()),
    ([], set()),
])
def test_site_names(entries, expected):
    assert im.site_names(["/site"], lambda folder: entries) == expected


def test_stdlib_names_reads_the_base_library():
    listing = {"/usr/lib/python3.11": ["json", "os.py", "asyncio"], "/usr/lib/python3.11/lib-dynload": ["_ssl.cpython-311.so"]}
    names = im.stdlib_names("/usr/lib/python3.11", lambda folder: listing.get(folder, []))
    assert {"json", "os", "asyncio", "_ssl", "sys"} <= names


@pytest.mark.parametrize("text, expected", [
    ("home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n", "/usr/bin"),
    ("version=3.9\n", None),
    (None, None),
])
def test_pyvenv_home(text, expected):
    assert im.pyvenv_home(text) == expected


@pytest.mark.parametrize("outside, available, expected", [
    ({"torch": ["a.py:1"], "torchvision": ["v.py:6", "v.py:7", "i.py:35", "x.py:1"]}, {"torch"},
     [{"module": "torchvision", "imported_at": ["v.py:6", "v.py:7", "i.py:35"], "package": im.PACKAGE_OF["torchvision"]}]),
    ({"yaml": ["c.py:3"], "__future__": ["b.py:1"]}, set(), [{"module": "yaml", "imported_at": ["c.py:3"], "package": "PyYAML"}]),
    ({"os": ["a.py:1"]}, {"os"}, []),
])
def test_missing(outside, available, expected):
    assert im.missing(outside, available) == expected


def _venv(root: Path, packages) -> None:
    site = root / "opt/venv/lib/python3.11/site-packages"
    site.mkdir(parents=True)
    (root / "opt/venv/pyvenv.cfg").write_text("home = /usr/bin\nversion = 3.11.2\n")
    for name in packages:
        (site / name).mkdir()
        (site / name / "__init__.py").write_text("")
    stdlib = root / "usr/lib/python3.11"
    stdlib.mkdir(parents=True)
    (stdlib / "os.py").write_text("")


@pytest.mark.parametrize("packages, missing", [
    (["numpy", "regex", "torch", "torchvision"], []),
    (["numpy", "regex", "torch"], ["torchvision"]),
    ([], ["numpy", "regex", "torch", "torchvision"]),
])
def test_collect_trainer_imports_on_a_node_tree(tmp_path, packages, missing):
    _venv(tmp_path, packages)
    _tree(tmp_path / "opt/mds", CHECKOUT)
    found = gf.collect_trainer_imports(gf.Host(root=str(tmp_path)), "/opt/venv", "/opt/mds", "train.py", "cuda")
    assert [m["module"] for m in found["missing"]] == missing
    assert (found["entry"], found["walked"], found["outside"], found["error"]) == ("train.py", 6, 5, None)


@pytest.mark.parametrize("venv, checkout, entry", [
    (None, "/opt/mds", "train.py"),
    ("/opt/venv", None, "train.py"),
    ("/opt/venv", "/opt/mds", "pretrain_bert.py"),  # no such entry in the checkout
])
def test_collect_trainer_imports_needs_venv_checkout_and_entry(tmp_path, venv, checkout, entry):
    _venv(tmp_path, [])
    _tree(tmp_path / "opt/mds", CHECKOUT)
    assert gf.collect_trainer_imports(gf.Host(root=str(tmp_path)), venv, checkout, entry, "cuda") is None


def _facts(imports):
    return {"venv": "/opt/venv", "megatron_deepspeed": {"path": "/opt/mds", "present": True, "imports": imports}}


TORCHVISION = {"module": "torchvision", "imported_at": ["megatron/data/vit_dataset.py:6"], "package": im.PACKAGE_OF["torchvision"]}


@pytest.mark.parametrize("imports, status, words", [
    ({"entry": "pretrain_gpt.py", "accelerator": "cpu", "walked": 80, "missing": []}, PASS, ["80 modules", "pretrain_gpt.py"]),
    ({"entry": "pretrain_gpt.py", "accelerator": "cpu", "walked": 80, "missing": [TORCHVISION]}, FAIL,
     ["torchvision", "megatron/data/vit_dataset.py:6", "cpu-pypi", "node7", "python_env"]),
])
def test_trainer_imports_row(imports, status, words):
    row = pm.check_trainer_imports(None, "node7", _facts(imports))
    assert row.status == status and row.node == "node7" and row.check == "megatron_deepspeed.imports"
    text = " ".join([row.found, row.expected, row.fix])
    assert all(word in text for word in words), text


@pytest.mark.parametrize("facts", [{}, _facts(None), {"megatron_deepspeed": {"imports": "text"}}])
def test_trainer_imports_row_without_a_walk(facts):
    assert pm.check_trainer_imports(None, "node7", facts) is None


@pytest.mark.skipif(not SOURCE or not os.path.isfile(os.path.join(SOURCE, "pretrain_gpt.py")),
                    reason="no Megatron-DeepSpeed checkout: set MEGATRON_DS_SRC to one")
@pytest.mark.parametrize("accelerator, present, absent", [
    # head era (4efb479d): the vision import chain reaches torchvision; apex only on CUDA
    ("cpu", ["torch", "deepspeed", "transformers"], ["apex", "amp_C", "intel_extension_for_pytorch"]),
    ("cuda", ["torch", "deepspeed", "apex", "amp_C"], ["intel_extension_for_pytorch"]),
])
def test_real_checkout(accelerator, present, absent):
    outside, walked, error = im.closure(SOURCE, "pretrain_gpt.py", _read, os.path.isfile, accelerator)
    assert error is None and walked > 20
    assert all(name in outside for name in present) and not any(name in outside for name in absent)
    if os.path.isfile(os.path.join(SOURCE, "megatron", "data", "vit_dataset.py")):
        assert "megatron/data/vit_dataset.py:6" in outside.get("torchvision", [])
