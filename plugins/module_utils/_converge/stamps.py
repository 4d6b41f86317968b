# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge stamps on the node: what a role records when it finishes, and what a re-run reads back.

A role that ran to its end on a node writes ``<dir>/<role>.json``: the digest of its inputs (the
controller computes it, see _converge.plan) and what must stay true for the role's work to still
stand: the signatures of the files it manages and the services it keeps running. The facts call
(gpu_stack_facts with ``converge_dir``) reads every stamp back and re-checks those files and
services in the same call, so a re-run knows per role whether the node is still as the role left it.

Runs on the managed node: standard library only, Python 3.8+.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

SCHEMA = 1
DEFAULT_DIR = "/var/lib/megatron_ds/converge"
# Files up to this size are hashed; larger ones (libraries, archives) are compared by size and
# modification time, which a re-install or a truncation changes, at no read cost.
HASH_LIMIT = 1024 * 1024
_ROLE_NAME = re.compile(r"^[a-z][a-z0-9_]*$")

Runner = Callable[[Sequence[str]], Tuple[int, str, str]]


def file_signature(path: str) -> Optional[str]:
    """``sha256:<hex>`` for a small regular file, ``size:<bytes>:mtime:<ns>`` for a large one,
    ``dir`` for a directory, None when the path does not exist."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    if os.path.isdir(path):
        return "dir"
    if info.st_size > HASH_LIMIT:
        return "size:%d:mtime:%d" % (info.st_size, info.st_mtime_ns)
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(65536), b""):
                digest.update(block)
    except OSError:
        return None
    return "sha256:" + digest.hexdigest()


def build_stamp(role: str, digest: str, files: Sequence[str] = (), services: Sequence[str] = (),
                inputs: Optional[Mapping[str, Any]] = None,
                signature: Callable[[str], Optional[str]] = file_signature) -> Dict[str, Any]:
    """The stamp ``role`` writes: its input digest, each managed file's signature now, the services."""
    if not _ROLE_NAME.match(role or ""):
        raise ValueError("role %r is not a role name (lower case letters, digits and _)" % role)
    if not digest:
        raise ValueError("role %s: empty input digest" % role)
    return {
        "schema": SCHEMA,
        "role": role,
        "digest": digest,
        "inputs": dict(inputs or {}),
        "files": dict((path, signature(path)) for path in sorted(set(files))),
        "services": sorted(set(services)),
    }


def stamp_path(directory: str, role: str) -> str:
    return os.path.join(directory, role + ".json")


def same_stamp(old: Optional[Mapping[str, Any]], new: Mapping[str, Any]) -> bool:
    return isinstance(old, Mapping) and dict(old) == dict(new)


def write_stamp(directory: str, stamp: Mapping[str, Any]) -> bool:
    """Write ``stamp`` atomically (0644, root's directory 0755); False when the same stamp is there."""
    path = stamp_path(directory, str(stamp["role"]))
    if same_stamp(read_json(path), stamp):
        return False
    os.makedirs(directory, mode=0o755, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as handle:
        json.dump(stamp, handle, sort_keys=True, indent=1)
        handle.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return True


def read_json(path: str) -> Optional[Dict[str, Any]]:
    try:
        with open(path) as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _inactive(services: Sequence[str], run: Optional[Runner]) -> Dict[str, str]:
    """``{unit: state}`` for every unit of ``services`` that systemd does not call active (one call)."""
    if not services or run is None:
        return {}
    rc, out, err = run(["systemctl", "is-active"] + list(services))
    states = out.split()
    if rc == 127 or len(states) != len(services):
        return dict((unit, "unknown (systemctl: %s)" % (err.strip() or "no answer")) for unit in services)
    return dict((unit, state) for unit, state in zip(services, states) if state != "active")


def check_stamp(stamp: Mapping[str, Any], run: Optional[Runner] = None,
                signature: Callable[[str], Optional[str]] = file_signature) -> List[str]:
    """What no longer holds of ``stamp`` on this node, one line each (empty: as the role left it)."""
    problems: List[str] = []
    for path, recorded in sorted((stamp.get("files") or {}).items()):
        now = signature(path)
        if now != recorded:
            problems.append("%s %s" % (path, "is gone" if now is None else "changed since the role wrote it"))
    for unit, state in sorted(_inactive(list(stamp.get("services") or []), run).items()):
        problems.append("service %s is %s" % (unit, state))
    return problems


def read_stamps(directory: str, run: Optional[Runner] = None,
                signature: Callable[[str], Optional[str]] = file_signature) -> Dict[str, Dict[str, Any]]:
    """Every stamp in ``directory``: ``{role: {digest, inputs, problems}}``. A stamp that cannot be
    read, or is of another schema, reports digest None (the role runs again and rewrites it)."""
    found: Dict[str, Dict[str, Any]] = {}
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return found
    for name in names:
        if not name.endswith(".json"):
            continue
        role = name[:-len(".json")]
        stamp = read_json(os.path.join(directory, name))
        if stamp is None or stamp.get("schema") != SCHEMA or stamp.get("role") != role:
            found[role] = {"digest": None, "inputs": {}, "problems": ["stamp %s is unreadable or of another schema" % name]}
            continue
        found[role] = {"digest": stamp.get("digest"), "inputs": stamp.get("inputs") or {},
                       "problems": check_stamp(stamp, run, signature)}
    return found
