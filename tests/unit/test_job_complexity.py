# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""No function of the job package (plugins/module_utils/_job/*.py) or of the validate_job
action has a cyclomatic complexity above MAX_COMPLEXITY (issue 37).

The complexity is counted from the standard library's ast, with radon's rules (``radon cc``
gives the same figures), so the test needs no extra package. KNOWN_ABOVE lists the functions
still above the bound: each is an expected failure, strictly, so the test fails once one of
them is brought under the bound and its entry has to go.
"""
from __future__ import annotations

import ast
import pathlib
import textwrap
from typing import Dict, Iterator, List, Tuple, Union

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
SOURCES = sorted((REPO / "plugins" / "module_utils" / "_job").glob("*.py")) + [
    REPO / "plugins" / "action" / "validate_job.py", REPO / "plugins" / "plugin_utils" / "_job_inputs.py"]
MAX_COMPLEXITY = 40
# Above the bound today: remove an entry when its function is split. Empty since issue 37's steps
# (check_zero, check_activation_checkpointing, parse_train_script and validate_job's run were split).
KNOWN_ABOVE: Dict[str, str] = {}

FunctionNode = Union[ast.FunctionDef, ast.AsyncFunctionDef]
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def complexity(function: FunctionNode) -> int:
    """McCabe's cyclomatic complexity of one function, counted as radon's ``cc`` counts it:
    1, plus 1 for each ``if`` and ``elif``, conditional expression, ``for`` / ``async for``,
    ``while`` and ``assert``; plus 1 for the ``else`` of a loop or a ``try``; plus the number
    of ``except`` handlers; plus, for a boolean operation, its operands beyond the first
    (``a and b or c``: 2); plus, for each comprehension, 1 per ``for`` and 1 per ``if``; plus
    the ``case`` clauses of a ``match`` but a bare capture (``case _``). ``with`` adds nothing.
    Nested functions and classes are counted on their own, not in the function around them;
    a lambda's body is counted in it. Decorators and default values are not counted."""
    return 1 + sum(_decisions(node) for node in _body_nodes(function))


def _body_nodes(function: FunctionNode) -> Iterator[ast.AST]:
    """The nodes of ``function``'s body, not those of functions and classes defined in it."""
    pending: List[ast.AST] = list(function.body)
    while pending:
        node = pending.pop()
        if isinstance(node, _SCOPES):
            continue
        yield node
        pending.extend(ast.iter_child_nodes(node))


def _decisions(node: ast.AST) -> int:
    if isinstance(node, (ast.If, ast.IfExp, ast.Assert)):
        return 1
    if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
        return 1 + bool(node.orelse)
    if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
        return len(node.handlers) + bool(node.orelse)  # type: ignore[attr-defined]
    if isinstance(node, ast.BoolOp):
        return len(node.values) - 1
    if isinstance(node, ast.comprehension):
        return 1 + len(node.ifs)
    if type(node).__name__ == "Match":
        cases = node.cases  # type: ignore[attr-defined]
        wildcard = any(getattr(case.pattern, "pattern", False) is None for case in cases)
        return max(0, len(cases) - wildcard)
    return 0


def functions(tree: ast.AST, prefix: str) -> Iterator[Tuple[str, FunctionNode]]:
    """Every function in ``tree`` with its dotted name (module.Class.method, module.outer.inner)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield prefix + node.name, node
            yield from functions(node, prefix + node.name + ".")
        elif isinstance(node, ast.ClassDef):
            yield from functions(node, prefix + node.name + ".")
        else:
            yield from functions(node, prefix)


def _measured() -> Dict[str, int]:
    out: Dict[str, int] = {}
    for path in SOURCES:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for name, node in functions(tree, path.stem + "."):
            out[name] = complexity(node)
    return out


MEASURED = _measured()


def _case(name: str) -> object:
    if name in KNOWN_ABOVE:
        return pytest.param(name, marks=pytest.mark.xfail(strict=True, reason=KNOWN_ABOVE[name]), id=name)
    return pytest.param(name, id=name)


@pytest.mark.parametrize("name", [_case(name) for name in sorted(MEASURED)])
def test_no_function_above_the_bound(name: str) -> None:
    assert MEASURED[name] <= MAX_COMPLEXITY, (
        "%s has a cyclomatic complexity of %d, above %d: split it into named steps or a table "
        "(issue 37)" % (name, MEASURED[name], MAX_COMPLEXITY))


def test_known_entries_name_functions_that_exist():
    assert sorted(set(KNOWN_ABOVE) - set(MEASURED)) == [], "KNOWN_ABOVE names functions that are gone: remove them"


def test_the_sources_are_found():
    assert len(SOURCES) >= 10 and all(path.is_file() for path in SOURCES)
    assert {"shell.lex_words", "memory.estimate_memory", "validate_job.ActionModule.run"} <= set(MEASURED)


# Each snippet's figure is radon 6's `radon cc -s` for the same code.
SNIPPETS = [
    ("straight", "def f():\n    return 1\n", 1),
    ("if", "def f(a):\n    if a:\n        return 1\n    return 2\n", 2),
    ("if elif else", "def f(a):\n    if a == 1:\n        return 1\n    elif a == 2:\n        return 2\n    else:\n        return 3\n", 3),
    ("conditional expression", "def f(a):\n    return 1 if a else 2\n", 2),
    ("for", "def f(xs):\n    for x in xs:\n        pass\n", 2),
    ("for else", "def f(xs):\n    for x in xs:\n        pass\n    else:\n        pass\n", 3),
    ("async for", "async def f(xs):\n    async for x in xs:\n        pass\n", 2),
    ("while", "def f(a):\n    while a:\n        a -= 1\n", 2),
    ("try two handlers else", "def f():\n    try:\n        g()\n    except ValueError:\n        pass\n"
     "    except KeyError:\n        pass\n    else:\n        pass\n    finally:\n        pass\n", 4),
    ("with adds nothing", "def f():\n    with open('x') as h:\n        return h\n", 1),
    ("and or", "def f(a, b, c):\n    return a and b or c\n", 3),
    ("three ands", "def f(a, b, c, d):\n    return a and b and c and d\n", 4),
    ("comprehension for if", "def f(xs):\n    return [x for x in xs if x if x > 1]\n", 4),
    ("two fors", "def f(xs):\n    return {x: y for x in xs for y in x}\n", 3),
    ("generator", "def f(xs):\n    return sum(x for x in xs)\n", 2),
    ("assert", "def f(a):\n    assert a\n", 2),
    ("lambda body counted", "def f():\n    return lambda a: 1 if a else 2\n", 2),
    ("nested function apart", "def f(a):\n    def g(b):\n        if b:\n            return 1\n    return g(a)\n", 1),
    ("nested class apart", "def f(a):\n    class C:\n        def m(self):\n            if a:\n                pass\n    return C\n", 1),
    ("default values not counted", "def f(a=1 if X else 2):\n    return a\n", 1),
    ("match", "def f(a):\n    match a:\n        case 1:\n            pass\n        case [x]:\n            pass\n"
     "        case _:\n            pass\n", 3),
]


@pytest.mark.parametrize("source, expected", [(snippet[1], snippet[2]) for snippet in SNIPPETS], ids=[snippet[0] for snippet in SNIPPETS])
def test_complexity_counter(source: str, expected: int) -> None:
    tree = ast.parse(textwrap.dedent(source))
    (name, function), = list(functions(tree, ""))[:1]
    assert name == "f"
    assert complexity(function) == expected


def test_nested_functions_and_methods_are_named():
    tree = ast.parse("class A:\n    def m(self):\n        def inner():\n            pass\n\ndef f():\n    pass\n")
    assert [pair[0] for pair in functions(tree, "mod.")] == ["mod.A.m", "mod.A.m.inner", "mod.f"]
