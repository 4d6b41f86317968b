# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NCCL_* environment a rank gets on this node, for gpu_stack_facts.

Runs on the managed node: standard library only, Python 3.8+, no process. NCCL reads its
settings from the environment only, so two nodes that differ in one NCCL_* variable run
different algorithms, transports or interfaces, and a collective across them hangs or slows
down without an error. The variables come from files, each read here without running it, in
the order they apply (a later one wins):

1. what the training user's non-interactive ssh session gets (pdsh starts the ranks that way):
   ``/etc/environment`` (pam_env), ``~/.ssh/environment`` (sshd, where PermitUserEnvironment is
   on), ``/etc/bash.bashrc`` and ``~/.bashrc`` (bash sources them when sshd starts it);
2. the launcher's files, as train.sh sources them: the nccl role's ``nccl.env``, then
   ``nccl.d/*.env`` in name order (the infiniband role's).

Only ``NCCL_*`` assignments are kept; anything else in these files (tokens, paths) never leaves
the node. A shell file's assignment is taken wherever it stands, also inside an ``if``.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from .host import Host

# export NCCL_X=value / NCCL_X="value" / NCCL_X='value' (shell files, /etc/environment, .env files)
_ASSIGN = re.compile(r"^\s*(?:export\s+)?(NCCL_[A-Za-z0-9_]*)=(.*)$")


def parse_assignments(text: Optional[str]) -> List[Tuple[str, str]]:
    """(key, value) of every ``NCCL_*`` assignment in ``text``, in order: quotes around the value
    removed, an unquoted value cut at a comment (`` #``) and at the end of its first word."""
    found = []
    for line in (text or "").splitlines():
        match = _ASSIGN.match(line)
        if not match:
            continue
        value = match.group(2).strip()
        if value[:1] in ("'", '"'):
            end = value.find(value[0], 1)
            value = value[1:end] if end > 0 else value[1:]
        else:
            value = re.split(r"\s+#|;|\s", value, maxsplit=1)[0]
        found.append((match.group(1), value))
    return found


def user_home(host: Host, user: str) -> Optional[str]:
    """The home directory of ``user`` from the node's /etc/passwd (read as a file, so a test tree
    can hold its own)."""
    for line in (host.read_text("/etc/passwd", limit=4 * 1024 * 1024) or "").splitlines():
        fields = line.split(":")
        if len(fields) >= 7 and fields[0] == user:
            return fields[5] or None
    return None


def sources(host: Host, user: Optional[str], env_file: Optional[str], env_dir: Optional[str]) -> List[str]:
    """The node paths read, in the order they apply."""
    paths = ["/etc/environment"]
    home = user_home(host, user) if user else None
    if home:
        paths.append(home.rstrip("/") + "/.ssh/environment")
    paths.append("/etc/bash.bashrc")
    if home:
        paths.append(home.rstrip("/") + "/.bashrc")
    if env_file:
        paths.append(env_file)
    if env_dir:
        paths += [env_dir.rstrip("/") + "/" + name for name in host.listdir(env_dir) if name.endswith(".env")]
    return paths


def collect_nccl_env(host: Host, user: Optional[str], env_file: Optional[str] = None,
                     env_dir: Optional[str] = None) -> Dict[str, Any]:
    """``{"user", "values": {key: value}, "sources": {key: node path}, "read": [node paths], "error"}``:
    the value each NCCL_* variable ends with and the file that set it last."""
    facts: Dict[str, Any] = {"user": user, "values": {}, "sources": {}, "read": [], "error": None}
    if user and user_home(host, user) is None:
        facts["error"] = "user %s is not in /etc/passwd: its shell files were not read" % user
    for path in sources(host, user, env_file, env_dir):
        text = host.read_text(path, limit=1024 * 1024)
        if text is None:
            continue
        facts["read"].append(path)
        for key, value in parse_assignments(text):
            facts["values"][key] = value
            facts["sources"][key] = path
    return facts
