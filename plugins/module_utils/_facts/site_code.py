# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Code in a venv's site-packages that no installer's record owns, for gpu_stack_facts.

Runs on the managed node: standard library only, Python 3.8+, no process. The RECORD checks
(_integrity) say whether what pip installed is whole; they cannot see a file pip never
installed. Python still runs or imports such a file (Lib/site.py):

* a ``.pth`` file: site.py runs every line that starts with ``import`` at each interpreter
  start, and adds every other line to ``sys.path``;
* ``sitecustomize`` and ``usercustomize``: site.py imports them at each start;
* any other top-level module or package: ``import name`` finds it.

:func:`unowned_code` lists the top-level entries of each site-packages directory that no
distribution owns: the first path component of every RECORD line (``.dist-info``), or the
``top_level.txt`` and ``installed-files.txt`` of an ``.egg-info``.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, Optional, Set

from .host import Host

# How many entries the facts list (the count is always whole).
SHOWN = 20
# site.py's rule (Lib/site.py, addpackage): a line starting with "import" followed by a space
# or a tab is executed.
_PTH_EXEC = re.compile(r"^import[ \t]")
_STARTUP = ("sitecustomize", "usercustomize")
# Extension module suffixes (importlib.machinery.EXTENSION_SUFFIXES on Linux: .so with or
# without the ABI tag) and byte code Python imports without its source at the top level.
_MODULE_RE = re.compile(r"^(?P<stem>[A-Za-z_][A-Za-z0-9_]*)(?:\.[^./]*)?\.(?:py|pyc|so)$")
_METADATA_SUFFIXES = (".dist-info", ".egg-info", ".egg-link")


def record_top_level(paths: Iterable[str]) -> Set[str]:
    """The top-level names of site-packages that RECORD paths own ('numpy/core/x.py' -> 'numpy');
    paths outside site-packages ('../../../bin/f2py') own nothing in it."""
    owned = set()
    for path in paths:
        path = path.replace("\\", "/")
        if not path or path.startswith("/") or path.startswith(".."):
            continue
        owned.add(path.split("/", 1)[0])
    return owned


def egg_info_top_level(host: Host, site: str, meta: str) -> Set[str]:
    """What a setuptools ``.egg-info`` (``setup.py install``/``develop``) owns: its
    ``installed-files.txt`` (paths relative to the egg-info) and the modules of ``top_level.txt``."""
    owned: Set[str] = set()
    base = site + "/" + meta
    listed = host.read_text(base + "/installed-files.txt") or ""
    for line in listed.splitlines():
        relative = os.path.normpath(os.path.join(meta, line.strip())) if line.strip() else ""
        owned |= record_top_level([relative])
    for name in (host.read_text(base + "/top_level.txt") or "").split():
        owned.add(name)
    return owned


def _module_stem(name: str) -> Optional[str]:
    match = _MODULE_RE.match(name)
    return match.group("stem") if match else None


def _pth_detail(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    runs = [line for line in lines if _PTH_EXEC.match(line)]
    paths = [line for line in lines if not _PTH_EXEC.match(line)]
    parts = []
    if runs:
        parts.append("%d import line(s) run at every interpreter start: %s" % (len(runs), runs[0][:120]))
    if paths:
        parts.append("%d path line(s) added to sys.path: %s" % (len(paths), paths[0][:120]))
    return "; ".join(parts) or "empty"


def _classify(host: Host, site: str, name: str) -> Optional[Dict[str, str]]:
    """What Python does with the unowned entry ``name`` of ``site``, or None when nothing."""
    path = site + "/" + name
    if name == "__pycache__" or name.endswith(_METADATA_SUFFIXES):
        return None
    if name.endswith(".pth"):
        return {"path": path, "kind": "pth", "detail": _pth_detail(host.read_text(path, limit=64 * 1024) or "")}
    if host.isdir(path):
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            return None  # not an importable name (an .egg, a data directory such as 'bin')
        entries = host.listdir(path)
        if not any(_module_stem(entry) or entry == "__init__.py" for entry in entries):
            return None
        kind = "startup" if name in _STARTUP else "package"
        what = "imported at every interpreter start" if kind == "startup" else "importable as '%s'" % name
        return {"path": path, "kind": kind, "detail": "a package, " + what}
    stem = _module_stem(name)
    if stem is None:
        return None
    if stem in _STARTUP:
        return {"path": path, "kind": "startup", "detail": "imported at every interpreter start"}
    return {"path": path, "kind": "module", "detail": "importable as '%s'" % stem}


def unowned_code(host: Host, sites: List[str], owned: Dict[str, Set[str]]) -> Dict[str, Any]:
    """``{"count", "entries": [{"path", "kind", "detail"}]}`` for the entries of each of ``sites``
    (node paths) that Python runs or imports and that no distribution owns. ``owned``: site ->
    the top-level names its distributions' records own. ``kind`` is ``pth``, ``startup``
    (sitecustomize/usercustomize), ``module`` or ``package``."""
    found: List[Dict[str, str]] = []
    for site in sites:
        names = set(owned.get(site) or ())
        for entry in host.listdir(site):
            if entry.endswith(".egg-info"):
                names |= egg_info_top_level(host, site, entry)
        for entry in host.listdir(site):
            stem = _module_stem(entry)
            if entry in names or (stem is not None and stem in names and not entry.endswith(".pth")):
                continue
            item = _classify(host, site, entry)
            if item is not None:
                found.append(item)
    return {"count": len(found), "entries": found[:SHOWN]}
