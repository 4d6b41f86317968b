# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the trainer's entry script imports, and whether the training venv resolves it.

Runs on the managed node: standard library only, Python 3.8+. Static, like the files probe:
the entry script (``pretrain_gpt.py``) and every module of the checkout it reaches are parsed
with :mod:`ast`, never imported, so torch is not loaded and nothing runs. Only the imports that
run when the script starts count: those at module level (inside ``if`` and ``with`` blocks too),
not those inside functions (they run later, and only on some paths) and not those guarded by a
``try`` whose handler catches the ImportError. A top-level name outside the checkout resolves
when the venv's site-packages, the interpreter's standard library or the checkout holds it.

Head-era ``megatron/training.py`` imports ``megatron.model.vision.knn_monitor``, which reaches
``megatron/data/vit_dataset.py`` and its ``import torchvision``: this is how a venv without
torchvision is named before every rank dies at start-up.
"""
from __future__ import annotations

import ast
import os
import sys
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

# Top-level import name -> the distribution to install, where they differ or where the
# collection installs it by another means. The fix names these.
PACKAGE_OF = {
    "torchvision": "torchvision (python_env_torchvision_spec: the stack profile's; on CPU nodes the cpu-pypi profile)",
    "apex": "NVIDIA apex (python_env builds it: python_env_apex_enabled)",
    "amp_C": "NVIDIA apex with --cuda_ext (python_env_apex_enabled)",
    "fused_layer_norm_cuda": "NVIDIA apex with --cuda_ext (python_env_apex_enabled)",
    "flash_attn": "flash-attn (python_env_flash_attn)",
    "yaml": "PyYAML",
    "PIL": "pillow",
    "sklearn": "scikit-learn",
    "cv2": "opencv-python",
    "google": "protobuf",
    "deepspeed": "deepspeed (python_env_deepspeed_spec)",
    "torch": "torch (python_env_torch_spec)",
}
# Handlers that catch a failed import.
_CATCHES_IMPORT = {"ImportError", "ModuleNotFoundError", "Exception", "BaseException"}
# The most modules one closure walks: Megatron-DeepSpeed's head checkout reaches about 150 from
# pretrain_gpt.py; a bound keeps a strange tree from costing more than a files probe.
MAX_MODULES = 2000

Reader = Callable[[str], Optional[str]]
Exists = Callable[[str], bool]


def package_of(name: str) -> str:
    """The distribution that provides top-level module ``name``, for the fix text."""
    return PACKAGE_OF.get(name, name)


def _guarded(handlers: Iterable[ast.excepthandler]) -> bool:
    for handler in handlers:
        kind = handler.type
        names = kind.elts if isinstance(kind, ast.Tuple) else [kind]
        if kind is None or any(isinstance(n, ast.Name) and n.id in _CATCHES_IMPORT for n in names):
            return True
    return False


def _constants(node: ast.expr) -> Optional[List[str]]:
    items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
    values = [item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)]
    return values if len(values) == len(items) else None


def accelerator_test(test: ast.expr, accelerator: str) -> Optional[bool]:
    """The value of ``get_accelerator().device_name() == 'cuda'`` (``!=``, ``in``, ``not in``)
    on a node whose DeepSpeed accelerator is ``accelerator``; None for any other test.

    Megatron-DeepSpeed chooses its CUDA-only imports (apex, amp_C) and Intel's this way
    (megatron/model/__init__.py:6-10, megatron/utils.py:13-15 at 4efb479d)."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.left, ast.Call)):
        return None
    func = test.left.func
    if not (isinstance(func, ast.Attribute) and func.attr == "device_name"):
        return None
    values = _constants(test.comparators[0])
    op = test.ops[0]
    if values is None:
        return None
    if isinstance(op, (ast.Eq, ast.In)):
        return accelerator in values
    if isinstance(op, (ast.NotEq, ast.NotIn)):
        return accelerator not in values
    return None


def module_imports(source: str, package: str, is_package: bool, accelerator: str = "cuda") -> List[Tuple[str, int]]:
    """(absolute module name, line) of the imports that run when ``source`` is imported.

    ``package`` is the module's dotted name; relative imports resolve against it. The names
    imported by ``from X import a`` are listed as ``X.a`` as well as ``X`` (``a`` may be a
    submodule); the caller keeps only those that exist. An ``if`` on the accelerator's name is
    decided for ``accelerator``; the branches of any other ``if`` are left out (which one runs
    is not known without running it, and a gate must not fail on an import that may not run)."""
    tree = ast.parse(source)
    base = package.split(".") if is_package else package.split(".")[:-1]
    found: List[Tuple[str, int]] = []

    def visit(body: Iterable[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.extend((alias.name, node.lineno) for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parent = base[:len(base) - node.level + 1] if node.level > 1 else base
                    mod = ".".join(parent + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if mod:
                    found.append((mod, node.lineno))
                found.extend(("%s.%s" % (mod, alias.name) if mod else alias.name, node.lineno)
                             for alias in node.names if alias.name != "*")
            elif isinstance(node, ast.Try):
                if not _guarded(node.handlers):
                    visit(node.body)
                visit(node.orelse)
                visit(node.finalbody)
            elif isinstance(node, ast.If):
                taken = accelerator_test(node.test, accelerator)
                if taken is not None:
                    visit(node.body if taken else node.orelse)
            elif isinstance(node, ast.With):
                visit(node.body)
            # def/class bodies run later (or never): not start-up imports.

    visit(tree.body)
    return found


def _module_file(root: str, dotted: str, isfile: Exists) -> Optional[Tuple[str, bool]]:
    """(path, is_package) of ``dotted`` inside the checkout ``root``, else None."""
    stem = os.path.join(root, *dotted.split("."))
    if isfile(os.path.join(stem, "__init__.py")):
        return os.path.join(stem, "__init__.py"), True
    if isfile(stem + ".py"):
        return stem + ".py", False
    return None


def closure(root: str, entry: str, read_text: Reader, isfile: Exists, accelerator: str = "cuda",
            limit: int = MAX_MODULES) -> Tuple[Dict[str, List[str]], int, Optional[str]]:
    """Walk the start-up imports of ``entry`` (a file of the checkout ``root``).

    Returns (outside, walked, error): ``outside`` maps each top-level name imported from outside
    the checkout to where it is imported (``file:line``, relative to ``root``, first ones first);
    ``walked`` counts the checkout's modules parsed; ``error`` names a file that could not be
    read or parsed (the walk goes on without it)."""
    outside: Dict[str, List[str]] = {}
    seen: Set[str] = set()
    error: Optional[str] = None
    queue: List[Tuple[str, str, bool]] = [(os.path.join(root, entry), "__main__", False)]
    walked = 0
    while queue and walked < limit:
        path, dotted, is_pkg = queue.pop(0)
        text = read_text(path)
        walked += 1
        rel = os.path.relpath(path, root)
        try:
            imports = module_imports(text, dotted, is_pkg, accelerator) if text is not None else None
        except (SyntaxError, ValueError) as exc:
            imports, error = None, error or "%s: %s" % (rel, exc)
        if imports is None:
            error = error or "%s: not readable" % rel
            continue
        for name, line in imports:
            parts = name.split(".")
            # A package's __init__ runs before its submodule: walk every prefix.
            inside = False
            for depth in range(1, len(parts) + 1):
                prefix = ".".join(parts[:depth])
                hit = _module_file(root, prefix, isfile)
                if hit is None:
                    break
                inside = True
                if prefix not in seen:
                    seen.add(prefix)
                    queue.append((hit[0], prefix, hit[1]))
            if not inside and parts[0]:
                where = outside.setdefault(parts[0], [])
                mark = "%s:%d" % (rel, line)
                if mark not in where:
                    where.append(mark)
    if queue:
        error = error or "stopped after %d modules" % limit
    return outside, walked, error


def pyvenv_home(text: Optional[str]) -> Optional[str]:
    """The ``home`` line of a venv's pyvenv.cfg (the base interpreter's directory), else None."""
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key.strip() == "home" and value.strip():
            return value.strip()
    return None


def stdlib_names(python_lib: Optional[str], listdir: Callable[[str], List[str]]) -> Set[str]:
    """Top-level module names of the standard library: this interpreter's own list where it has
    one (3.10+), the builtins, and the files of the venv's base library ``python_lib``
    (``/usr/lib/python3.11``: ``*.py``, packages, ``lib-dynload/*.so``)."""
    names = set(sys.builtin_module_names) | set(getattr(sys, "stdlib_module_names", ()))
    for folder in filter(None, [python_lib, python_lib and os.path.join(python_lib, "lib-dynload")]):
        for entry in listdir(folder):
            names.add(entry.split(".", 1)[0])
    return names


def site_names(site_dirs: Iterable[str], listdir: Callable[[str], List[str]]) -> Set[str]:
    """Top-level names importable from site-packages: packages (regular or namespace),
    modules, extension modules. Names a ``.pth`` adds by path are not followed."""
    names: Set[str] = set()
    for folder in site_dirs:
        for entry in listdir(folder):
            stem, dot, rest = entry.partition(".")
            # A package directory has no dot; a module is name.py, name.pyc or an extension
            # (name.so, name.cpython-311-x86_64-linux-gnu.so). auditwheel's name.libs,
            # name.dist-info and name.data hold no importable name.
            importable = not dot or rest in ("py", "pyc") or rest.endswith((".so", ".pyd")) or rest == "so"
            if importable and stem.isidentifier():
                names.add(stem)
    return names


def missing(outside: Dict[str, List[str]], available: Set[str]) -> List[Dict[str, object]]:
    """The imported names that nothing resolves, with who imports them and what to install."""
    return [{"module": name, "imported_at": where[:3], "package": package_of(name)}
            for name, where in sorted(outside.items()) if name not in available and name != "__future__"]
