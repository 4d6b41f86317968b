"""CONTRIBUTING.md's layout table names what the repository holds: every role under roles/ and
every package under plugins/module_utils, no more and no fewer."""
from __future__ import annotations

import re
from pathlib import Path
from typing import List, Set

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _row(first_cell: str) -> str:
    """The layout table's row whose first cell is ``first_cell``."""
    for line in (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| %s |" % first_cell):
            return line
    raise AssertionError("CONTRIBUTING.md has no layout row %s" % first_cell)


def _named(row: str, pattern: str) -> Set[str]:
    return set(re.findall(pattern, row))


def _roles() -> List[str]:
    # Every role has an argument spec; cluster_defaults has no tasks (defaults only).
    return sorted(p.name for p in (ROOT / "roles").iterdir() if (p / "meta" / "argument_specs.yml").is_file())


def _packages() -> List[str]:
    base = ROOT / "plugins" / "module_utils"
    return sorted([p.name for p in base.iterdir() if p.is_dir() and (p / "__init__.py").exists()]
                  + [p.name for p in base.glob("_*.py")])


@pytest.mark.parametrize("first_cell, pattern, actual", [
    ("`roles/<name>/`", r"`([a-z][a-z0-9_]*)`", _roles),
    ("`plugins/module_utils/_<package>/`", r"`(_[a-z]+(?:\.py)?)`", _packages),
])
def test_the_layout_names_everything_there_is(first_cell, pattern, actual):
    named = _named(_row(first_cell), pattern)
    there = set(actual())
    assert named >= there, "CONTRIBUTING.md's %s row lacks %s" % (first_cell, sorted(there - named))
    assert named <= there, "CONTRIBUTING.md's %s row names what is not there: %s" % (first_cell, sorted(named - there))
