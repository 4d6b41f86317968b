# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's module_utils as one library for the nodes.

Programs that run on a node outside Ansible (the supervisor, the Slurm health check, the
checkpoint timer, the log exporter, the GPU metrics collector) import the same code the plugins
run on the controller. ``build_archive`` packs ``plugins/module_utils`` into a tar.gz laid out as the import path
``ansible_collections/megatron_ds/cluster/plugins/module_utils/`` (every level a regular
package, so a node's own ``ansible_collections`` elsewhere on ``sys.path`` cannot shadow it),
with a ``LIBRARY`` file that names the digest. The archive's bytes depend only on the sources:
the same tree gives the same digest and the same file on every controller.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import os
import tarfile
import tempfile
from typing import Dict, List, Optional

PACKAGE = ("ansible_collections", "megatron_ds", "cluster", "plugins", "module_utils")
MARKER = "LIBRARY"


def module_utils_root() -> str:
    """This collection's plugins/module_utils directory."""
    return os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "module_utils"))


def collection_root() -> str:
    """The collection's own directory (where galaxy.yml or MANIFEST.json is), on the controller."""
    return os.path.normpath(os.path.join(module_utils_root(), "..", ".."))


def source_files(root: str) -> List[str]:
    """The library's Python files under ``root``, relative and sorted (no caches, no bytecode)."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in files:
            if name.endswith(".py"):
                found.append(os.path.relpath(os.path.join(folder, name), root).replace(os.sep, "/"))
    return sorted(found)


def digest(root: str, files: List[str]) -> str:
    """sha256 over each file's relative path and bytes: changes when any file, name or the set does."""
    total = hashlib.sha256()
    for rel in files:
        with open(os.path.join(root, rel), "rb") as handle:
            data = handle.read()
        total.update(rel.encode("utf-8") + b"\0" + str(len(data)).encode("ascii") + b"\0" + data)
    return total.hexdigest()


def _member(name: str, data: bytes, mode: int = 0o644) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = mode
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def archive_bytes(root: str, files: List[str], sha: str) -> bytes:
    """The tar.gz of the library: fixed order, owner, modes and times, so it is reproducible."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        marker = ("%s\n%d files\n" % (sha, len(files))).encode("ascii")
        tar.addfile(_member(MARKER, marker), io.BytesIO(marker))
        prefix = "/".join(PACKAGE)
        dirs = set()
        for rel in files:
            parts = rel.split("/")[:-1]
            dirs.update("/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
        inits = ["/".join(PACKAGE[:depth]) + "/__init__.py" for depth in range(1, len(PACKAGE) + 1)]
        inits += ["%s/%s/__init__.py" % (prefix, d) for d in sorted(dirs) if "%s/__init__.py" % d not in files]
        for name in inits:
            tar.addfile(_member(name, b""), io.BytesIO(b""))
        for rel in files:
            with open(os.path.join(root, rel), "rb") as handle:
                data = handle.read()
            tar.addfile(_member("%s/%s" % (prefix, rel), data), io.BytesIO(data))
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0, filename="") as gz:
        gz.write(raw.getvalue())
    return packed.getvalue()


def build_archive(root: Optional[str] = None, cache_dir: Optional[str] = None) -> Dict[str, object]:
    """Pack the library once per digest into ``cache_dir``; return its path, digest and file count."""
    root = root or module_utils_root()
    files = source_files(root)
    if not files:
        raise ValueError("no Python files under %s: is this the collection's plugins/module_utils?" % root)
    sha = digest(root, files)
    cache_dir = cache_dir or tempfile.gettempdir()
    os.makedirs(cache_dir, exist_ok=True)
    path = os.path.join(cache_dir, "megatron_ds-library-%s.tar.gz" % sha[:16])
    if not os.path.exists(path):
        handle, partial = tempfile.mkstemp(dir=cache_dir, prefix=".megatron_ds-library-")
        try:
            with os.fdopen(handle, "wb") as out:
                out.write(archive_bytes(root, files, sha))
            os.replace(partial, path)  # forks building the same digest at once: the last rename wins, same bytes
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
    return {"archive": path, "digest": sha, "files": len(files), "collection": collection_root()}
