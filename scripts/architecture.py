# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The package table and import arrows of docs/architecture.md, generated from the code.

Every package under ``plugins/module_utils`` (a ``_name/`` directory, or a ``_name.py`` module
directly in it) and ``plugins/plugin_utils`` gets its modules listed with the first sentence of
each module docstring; the arrows say which package imports from which, read with ``ast`` from
relative imports (``from .._stack import profiles``) and absolute ones
(``ansible_collections.megatron_ds.cluster.plugins.module_utils._job.spec``), at module level
or inside a function (a late import).

    python scripts/architecture.py           # print the generated block
    python scripts/architecture.py --check   # exit 1 when docs/architecture.md differs
    python scripts/architecture.py --write   # refresh the block in docs/architecture.md

Standard library only; the output is sorted, so it depends on the code alone.
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

ROOT = Path(__file__).resolve().parents[1]
DOC = Path("docs") / "architecture.md"
ABSOLUTE_PREFIX = "ansible_collections.megatron_ds.cluster.plugins."
KINDS = ("module_utils", "plugin_utils")
BEGIN = "<!-- BEGIN generated: python scripts/architecture.py --write -->"
END = "<!-- END generated -->"
REFRESH = "python scripts/architecture.py --write"


def first_sentence(docstring: Optional[str]) -> str:
    """The first sentence of a docstring's first paragraph, on one line, in markdown.

    A sentence ends at a full stop followed by white space or the end of the paragraph, so
    ``ds_config.json`` or ``_job.spec`` do not end one."""
    if not docstring or not docstring.strip():
        return "(no module docstring)"
    paragraph = " ".join(docstring.strip().split("\n\n")[0].split())
    match = re.match(r"(.+?\.)(\s|$)", paragraph)
    sentence = match.group(1) if match else paragraph
    sentence = re.sub(r":[a-z]+:`([^`]+)`", r"`\1`", sentence).replace("``", "`")
    return sentence.replace("|", "\\|")


def dotted_name(kind_dir: Path, path: Path) -> str:
    """``module_utils._job.args`` for ``plugins/module_utils/_job/args.py`` (an ``__init__.py``
    is its package's name)."""
    parts = [kind_dir.name] + list(path.relative_to(kind_dir).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def node_of(dotted: str) -> Optional[str]:
    """The package a dotted name under ``plugins`` belongs to: ``_job`` for
    ``module_utils._job.args``, ``_report`` for ``module_utils._report``, ``plugin_utils`` for
    anything in plugin_utils; None outside both, or for ``module_utils`` itself."""
    parts = dotted.split(".")
    if parts[0] == "plugin_utils":
        return "plugin_utils"
    if parts[0] == "module_utils" and len(parts) > 1:
        return parts[1]
    return None


def resolve(module: str, is_package: bool, node: ast.AST) -> List[str]:
    """The dotted names (under ``plugins``) an import statement of ``module`` reaches; names
    outside the collection's plugins are left out."""
    if isinstance(node, ast.Import):
        return [alias.name[len(ABSOLUTE_PREFIX):] for alias in node.names
                if alias.name.startswith(ABSOLUTE_PREFIX)]
    assert isinstance(node, ast.ImportFrom)
    if node.level == 0:
        name = node.module or ""
        if not name.startswith(ABSOLUTE_PREFIX) and name + "." != ABSOLUTE_PREFIX:
            return []
        base = name[len(ABSOLUTE_PREFIX):] if name.startswith(ABSOLUTE_PREFIX) else ""
    else:
        package = module.split(".") if is_package else module.split(".")[:-1]
        if node.level - 1 > len(package):
            return []
        package = package[:len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    # `from ..module_utils import _report` names a package in the imported names.
    if node_of(base) is None:
        return [(base + "." if base else "") + alias.name for alias in node.names]
    return [base]


def imports(tree: ast.Module) -> Iterator[Tuple[ast.AST, bool]]:
    """Every import statement of a module, and whether it sits inside a function (late)."""
    def walk(node: ast.AST, late: bool) -> Iterator[Tuple[ast.AST, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child, late
            inner = late or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            yield from walk(child, inner)
    return walk(tree, False)


class Module:
    """One Python file of module_utils or plugin_utils: its names, docstring and imports."""

    def __init__(self, kind_dir: Path, path: Path):
        self.path = path
        self.dotted = dotted_name(kind_dir, path)
        self.package = node_of(self.dotted) or self.dotted
        self.is_package = path.name == "__init__.py"
        # the module's short name within its package: `args` in _job, `_library` in plugin_utils
        parts = self.dotted.split(".")
        if self.is_package:
            self.short = "__init__"
        elif self.package == parts[-1]:
            self.short = "(module)"  # a module directly in module_utils: its own package
        else:
            self.short = parts[-1]
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        self.docstring = ast.get_docstring(tree)
        self.targets: Dict[str, bool] = {}  # package -> True when every import of it is late
        for node, late in imports(tree):
            for target in resolve(self.dotted, self.is_package, node):
                package = node_of(target)
                if package is None or package == self.package:
                    continue
                self.targets[package] = self.targets.get(package, True) and late


def modules(root: Path) -> List[Module]:
    """Every module of module_utils and plugin_utils under ``root``, sorted by path."""
    found = []
    for kind in KINDS:
        kind_dir = root / "plugins" / kind
        if kind_dir.is_dir():
            found.extend(Module(kind_dir, path) for path in sorted(kind_dir.rglob("*.py")))
    return sorted(found, key=lambda m: m.dotted)


def label(module: Module) -> str:
    """A package's name in the table and the arrows: ``_job/``, ``_report.py``, ``plugin_utils/``."""
    if module.package == "plugin_utils":
        return "plugin_utils/"
    return module.package + ("/" if module.path.parent.name == module.package else ".py")


def table(found: List[Module]) -> List[str]:
    """One row per module with a docstring (an empty ``__init__.py`` has no row)."""
    lines = ["| package | module | what it holds (the first sentence of its docstring) |", "|---|---|---|"]
    for module in sorted(found, key=lambda m: (m.package, m.short != "__init__", m.short)):
        if module.is_package and not module.docstring:
            continue
        lines.append("| `%s` | `%s` | %s |" % (label(module), module.short, first_sentence(module.docstring)))
    return lines


def arrows(found: List[Module]) -> Dict[str, Dict[str, List[Tuple[str, bool]]]]:
    """package -> imported package -> [(importing module, late)], every level sorted."""
    graph: Dict[str, Dict[str, List[Tuple[str, bool]]]] = {}
    for module in found:
        for target, late in module.targets.items():
            graph.setdefault(module.package, {}).setdefault(target, []).append((module.short, late))
    return {source: {target: sorted(users) for target, users in sorted(edges.items())}
            for source, edges in sorted(graph.items())}


def arrow_lines(found: List[Module]) -> List[str]:
    """``_heal ──► _job: policy (late); _launch: resume`` per importing package."""
    graph = arrows(found)
    width = max((len(source) for source in graph), default=0)
    lines = []
    for source, edges in graph.items():
        parts = ["%s: %s" % (target, ", ".join(user + (" (late)" if late else "") for user, late in users))
                 for target, users in edges.items()]
        lines.append("%s ──► %s" % (source.ljust(width), "; ".join(parts)))
    return lines


def cycles(found: List[Module]) -> Set[Tuple[str, str]]:
    """Pairs of packages that import each other (directly), for the text above the arrows."""
    graph = arrows(found)
    return {(a, b) for a, edges in graph.items() for b in edges if a < b and a in graph.get(b, {})}


def generate(root: Path) -> str:
    """The whole generated block, markers included."""
    found = modules(root)
    packages = sorted({label(m) for m in found})
    lines = [BEGIN, "", "Packages: %s." % ", ".join("`%s`" % p for p in packages), ""]
    lines += table(found)
    lines += ["", "Imports between packages (`A ──► B: m` means module `m` of A imports from B; "
              "(late): only inside a function):", "", "```"]
    lines += arrow_lines(found)
    lines += ["```"]
    both = sorted(cycles(found))
    lines += ["", "Packages that import each other: %s." % (
        ", ".join("`%s` and `%s`" % pair for pair in both) if both else "none")]
    lines += ["", END]
    return "\n".join(lines) + "\n"


def splice(text: str, block: str) -> str:
    """``text`` with the part from BEGIN to END (markers included) replaced by ``block``."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError("%s has no %r ... %r block" % (DOC, BEGIN, END))
    rest = text[end + len(END):]
    return text[:start] + block + (rest[1:] if rest.startswith("\n") else rest)


def current(text: str) -> str:
    """The generated block as the document holds it now (markers included)."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        return ""
    return text[start:end + len(END)] + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--root", type=Path, default=ROOT, help="the collection root")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="refresh the block in %s" % DOC)
    mode.add_argument("--check", action="store_true", help="exit 1 when %s differs" % DOC)
    args = parser.parse_args(argv)
    block = generate(args.root)
    doc = args.root / DOC
    if args.write:
        doc.write_text(splice(doc.read_text(encoding="utf-8"), block), encoding="utf-8")
        return 0
    if args.check:
        if current(doc.read_text(encoding="utf-8")) != block:
            print("%s is out of date: run %s" % (DOC, REFRESH), file=sys.stderr)
            return 1
        return 0
    sys.stdout.write(block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
