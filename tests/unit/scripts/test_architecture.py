"""scripts/architecture.py: the package table and import arrows of docs/architecture.md are the
code's, and the generator reads imports and docstrings right on small trees built in tmp_path."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Dict

import pytest

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "architecture.py"


def _load():
    spec = importlib.util.spec_from_file_location("architecture_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


architecture = _load()
ABS = "ansible_collections.megatron_ds.cluster.plugins"


def _tree(root: Path, files: Dict[str, str]) -> Path:
    """Write ``files`` (paths under plugins/) into ``root``, each starting with a docstring unless
    it gives its own text."""
    for name, text in files.items():
        path = root / "plugins" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_the_doc_holds_what_the_code_generates():
    doc = (ROOT / architecture.DOC).read_text(encoding="utf-8")
    generated = architecture.generate(ROOT)
    assert architecture.current(doc) == generated, (
        "docs/architecture.md's generated package table or import arrows differ from the code: "
        "run `%s` and commit the result" % architecture.REFRESH)


def test_every_package_and_module_is_in_the_doc():
    doc = (ROOT / architecture.DOC).read_text(encoding="utf-8")
    for module in architecture.modules(ROOT):
        if module.is_package and not module.docstring:
            continue
        assert "| `%s` | `%s` |" % (architecture.label(module), module.short) in doc


@pytest.mark.parametrize("docstring, expected", [
    (None, "(no module docstring)"),
    ("", "(no module docstring)"),
    ("One line.", "One line."),
    ("Wrapped over\ntwo lines. Then a second sentence.", "Wrapped over two lines."),
    ("Reads ``ds_config.json`` and _job.spec. More.", "Reads `ds_config.json` and _job.spec."),
    ("No full stop here\n\nSecond paragraph.", "No full stop here"),
    ("The :class:`Row` record.", "The `Row` record."),
    ("A | in a table cell.", "A \\| in a table cell."),
    ("Is it whole? Files against the record.", "Is it whole? Files against the record."),
])
def test_first_sentence(docstring, expected):
    assert architecture.first_sentence(docstring) == expected


@pytest.mark.parametrize("files, expected", [
    # a relative import two levels up reaches another package
    ({"module_utils/_a/__init__.py": "", "module_utils/_a/x.py": '"""X."""\nfrom .._b import y\n',
      "module_utils/_b/__init__.py": "", "module_utils/_b/y.py": '"""Y."""\n'},
     {"_a": {"_b": [("x", False)]}}),
    # an import inside the same package draws no arrow
    ({"module_utils/_a/__init__.py": "", "module_utils/_a/x.py": '"""X."""\nfrom . import z\nfrom .z import f\n',
      "module_utils/_a/z.py": '"""Z."""\ndef f():\n    pass\n'},
     {}),
    # absolute imports, both forms, and a late one inside a function
    ({"module_utils/_a/__init__.py": "", "module_utils/_b/__init__.py": "", "module_utils/_c/__init__.py": "",
      "module_utils/_a/x.py": '"""X."""\nfrom %s.module_utils._b import y\n'
                              'def g():\n    import %s.module_utils._c.z\n' % (ABS, ABS)},
     {"_a": {"_b": [("x", False)], "_c": [("x", True)]}}),
    # a module directly in module_utils is a package of its own; a module-level import in a try
    # block is not late, and one that is also made inside a function is not late either
    ({"module_utils/_r.py": '"""R."""\n', "module_utils/_a/__init__.py": "",
      "module_utils/_a/x.py": '"""X."""\ntry:\n    from .. import _r\nexcept ImportError:\n    _r = None\n'
                              'def h():\n    from .._r import thing\n'},
     {"_a": {"_r": [("x", False)]}}),
    # plugin_utils reaches module_utils through its parent; outside imports are ignored
    ({"plugin_utils/_p.py": '"""P."""\nimport json\nfrom ansible.errors import AnsibleError\n'
                            'from ..module_utils._a import x\nfrom ..module_utils import _r\n',
      "module_utils/_a/__init__.py": "", "module_utils/_a/x.py": '"""X."""\n', "module_utils/_r.py": '"""R."""\n'},
     {"plugin_utils": {"_a": [("_p", False)], "_r": [("_p", False)]}}),
    # a package's __init__ that imports elsewhere counts for the package
    ({"module_utils/_a/__init__.py": '"""A."""\nfrom .._b import y\n', "module_utils/_b/__init__.py": "",
      "module_utils/_b/y.py": '"""Y."""\n'},
     {"_a": {"_b": [("__init__", False)]}}),
])
def test_arrows(tmp_path, files, expected):
    assert architecture.arrows(architecture.modules(_tree(tmp_path, files))) == expected


def test_table_rows_and_labels(tmp_path):
    root = _tree(tmp_path, {
        "module_utils/_b/__init__.py": "",
        "module_utils/_b/y.py": '"""Why. Not this."""\n',
        "module_utils/_a/__init__.py": '"""The a package."""\n',
        "module_utils/_a/x.py": "",
        "module_utils/_r.py": '"""R."""\n',
        "plugin_utils/_p.py": '"""P."""\n',
    })
    assert architecture.table(architecture.modules(root))[2:] == [
        "| `_a/` | `__init__` | The a package. |",
        "| `_a/` | `x` | (no module docstring) |",
        "| `_b/` | `y` | Why. |",
        "| `_r.py` | `(module)` | R. |",
        "| `plugin_utils/` | `_p` | P. |",
    ]


def test_cycles_are_named(tmp_path):
    root = _tree(tmp_path, {
        "module_utils/_a/__init__.py": "", "module_utils/_a/x.py": '"""X."""\nfrom .._b import y\n',
        "module_utils/_b/__init__.py": "", "module_utils/_b/y.py": '"""Y."""\ndef f():\n    from .._a import x\n',
    })
    assert "Packages that import each other: `_a` and `_b`." in architecture.generate(root)


@pytest.mark.parametrize("doc_text, exit_code", [
    ("# Doc\n\n%s\nstale\n%s\n\nafter\n" % (architecture.BEGIN, architecture.END), 1),
    (None, 0),  # the freshly written doc
])
def test_check_and_write(tmp_path, capsys, doc_text, exit_code):
    root = _tree(tmp_path, {"module_utils/_r.py": '"""R."""\n'})
    doc = root / architecture.DOC
    doc.parent.mkdir(parents=True)
    doc.write_text("# Doc\n\n%s\nstale\n%s\n\nafter\n" % (architecture.BEGIN, architecture.END))
    if doc_text is None:
        assert architecture.main(["--root", str(root), "--write"]) == 0
        text = doc.read_text()
        assert text.startswith("# Doc\n\n" + architecture.BEGIN) and text.endswith(architecture.END + "\n\nafter\n")
        assert "| `_r.py` | `(module)` | R. |" in text
    assert architecture.main(["--root", str(root), "--check"]) == exit_code
    if exit_code:
        assert architecture.REFRESH in capsys.readouterr().err
