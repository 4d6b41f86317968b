# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running things on the node for gpu_stack_facts: the command runner and :class:`Host`.

Runs on the managed node: standard library only, Python 3.8+. Every path a collector touches
is a *node path* ("/usr/local/cuda"). :class:`Host` maps it under ``root`` (a fake tree in
tests) and follows symlinks inside that root; ``run_command`` never raises. The collectors
are in _gpu_facts and _gpu_python, the parsers of what they read in _gpu_parsers.
"""
from __future__ import annotations

import os
import subprocess
from typing import Callable, List, Optional, Sequence, Tuple

RunResult = Tuple[int, str, str]
Runner = Callable[[Sequence[str], float], RunResult]

# /usr/local/nvidia/bin: where GPU container images and some clouds put nvidia-smi (it is
# there on the GPU validation host); a non-login Ansible PATH rarely has it.
_STANDARD_BIN_DIRS = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
                      "/usr/local/nvidia/bin")
# Tools write for humans; the C locale keeps the words the parsers look for.
_C_LOCALE = {"LC_ALL": "C", "LANG": "C"}


# --------------------------------------------------------------------------- running things
def run_command(argv: Sequence[str], timeout: float) -> RunResult:
    """Run ``argv`` (no shell) with a timeout. Never raises: rc 127 = not runnable, 124 = timed out."""
    env = dict(os.environ)
    env.update(_C_LOCALE)
    try:
        proc = subprocess.run(
            list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            timeout=timeout, env=env, check=False,
        )
    except subprocess.TimeoutExpired:
        return 124, "", "timed out after %ss" % timeout
    except OSError as exc:
        return 127, "", str(exc)
    return (
        proc.returncode,
        proc.stdout.decode("utf-8", "replace"),
        proc.stderr.decode("utf-8", "replace"),
    )


def resolve_in_root(root: str, path: str) -> str:
    """The real path of node path ``path`` inside ``root``, following symlinks as a chroot would.

    With ``root`` '/' this is ``os.path.realpath``. Otherwise an absolute link target restarts
    at ``root``, and '..' never climbs above it. Loops stop after 40 links (like the kernel).
    """
    if root in ("", "/"):
        return os.path.realpath(path)
    pending = [p for p in path.split("/") if p not in ("", ".")]
    done: List[str] = []
    links = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if done:
                done.pop()
            continue
        candidate = os.path.join(root, *(done + [part]))
        if os.path.islink(candidate) and links < 40:
            links += 1
            target = os.readlink(candidate)
            if target.startswith("/"):
                done = []
            pending = [p for p in target.split("/") if p not in ("", ".")] + pending
            continue
        done.append(part)
    return os.path.join(root, *done)


class Host:
    """The node as the collectors see it: files under ``root`` and a command runner."""

    def __init__(self, root: str = "/", run: Optional[Runner] = None, timeout: float = 120.0,
                 search_path: Optional[str] = None) -> None:
        self.root = root or "/"
        self.timeout = timeout
        self._run = run or run_command
        # The module's own PATH only means something on the real root.
        if search_path is None:
            search_path = os.environ.get("PATH", "") if self.root == "/" else ""
        self._search_dirs = [d for d in search_path.split(os.pathsep) if d.startswith("/")]

    def path(self, node_path: str) -> str:
        return resolve_in_root(self.root, node_path)

    def exists(self, node_path: str) -> bool:
        return os.path.exists(self.path(node_path))

    def isdir(self, node_path: str) -> bool:
        return os.path.isdir(self.path(node_path))

    def isfile(self, node_path: str) -> bool:
        return os.path.isfile(self.path(node_path))

    def exec_path(self, node_path: str) -> str:
        """Where to exec ``node_path``: its directory resolved inside root, its last component
        left alone. A venv's bin/python is a symlink to the base interpreter, and Python finds
        its venv (pyvenv.cfg) only when started through the link itself."""
        directory, name = os.path.split(node_path.rstrip("/"))
        return os.path.join(self.path(directory or "/"), name)

    def is_executable(self, node_path: str) -> bool:
        real = self.exec_path(node_path)
        return os.path.isfile(real) and os.access(real, os.X_OK)

    def read_text(self, node_path: str, limit: int = 4 * 1024 * 1024) -> Optional[str]:
        data = self.read_bytes(node_path, limit)
        return None if data is None else data.decode("utf-8", "replace")

    def read_bytes(self, node_path: str, limit: int = 64 * 1024 * 1024) -> Optional[bytes]:
        try:
            with open(self.path(node_path), "rb") as handle:
                return handle.read(limit)
        except (OSError, ValueError):
            return None

    def listdir(self, node_path: str) -> List[str]:
        try:
            return sorted(os.listdir(self.path(node_path)))
        except OSError:
            return []

    def which_all(self, name: str) -> List[str]:
        """Node paths of executable ``name``: PATH first (real root only), then the standard dirs."""
        found = []
        for directory in self._search_dirs + list(_STANDARD_BIN_DIRS):
            candidate = directory.rstrip("/") + "/" + name
            if candidate not in found and self.is_executable(candidate):
                found.append(candidate)
        return found

    def which(self, name: str) -> Optional[str]:
        found = self.which_all(name)
        return found[0] if found else None

    def run(self, argv: Sequence[str], timeout: Optional[float] = None) -> RunResult:
        """Run a command whose argv[0] is a node path (mapped under root)."""
        argv = list(argv)
        if argv and argv[0].startswith("/"):
            argv[0] = self.exec_path(argv[0])
        try:
            return self._run(argv, timeout or self.timeout)
        except Exception as exc:  # a runner must not take the facts down with it
            return 127, "", "%s: %s" % (type(exc).__name__, exc)


def _first_line(text: str) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def _cmd_error(argv: Sequence[str], result: RunResult) -> str:
    rc, out, err = result
    detail = _first_line(err) or _first_line(out) or "no output"
    return "%s: exit %s: %s" % (" ".join(os.path.basename(a) if i == 0 else a for i, a in enumerate(argv)), rc, detail)
