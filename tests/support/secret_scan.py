# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Where a scenario's secrets went: the log of its Ansible runs and the files of its nodes.

Every scenario runs prepare, converge and the idempotence run with ``--diff`` always on and the
output logged to ``$MOLECULE_EPHEMERAL_DIRECTORY/ansible.log`` (.config/molecule/config.yml). A
verifier reads that log with ``converge_log()`` when its module is imported, before any test
runs, and stops logging there: testinfra's ansible backend and the playbooks the tests start
inherit the environment, and their output (a key a test reads back on purpose) is not what the
collection printed. Issue 39: no secret in ``--diff`` output or logs, and none in a file
readable beyond its owner.

Imported as ansible_collections.megatron_ds.cluster.tests.support.secret_scan.
"""
from __future__ import annotations

import os
import pathlib
import shlex
from typing import Any, Iterable, List, Optional

_LOG: Optional[str] = None


def converge_log() -> str:
    """The text the scenario's own Ansible runs logged, read once; later calls return the same
    text. AssertionError when the scenario logged nothing (the setting is missing)."""
    global _LOG  # pylint: disable=global-statement
    if _LOG is None:
        path = os.environ.pop("ANSIBLE_LOG_PATH", "")
        os.environ.pop("ANSIBLE_DIFF_ALWAYS", None)
        assert path, "ANSIBLE_LOG_PATH is not set: .config/molecule/config.yml logs every scenario's runs"
        log = pathlib.Path(path)
        assert log.is_file(), "%s does not exist: the converge logged nothing" % log
        _LOG = log.read_text(errors="replace")
    return _LOG


def in_log(secrets: Iterable[str]) -> List[str]:
    """The secrets that the scenario's logged runs printed, after checking the log covers a
    converge with --diff (a log without either proves nothing)."""
    text = converge_log()
    assert "PLAY RECAP" in text, "the log holds no finished play"
    assert "--- before" in text and "+++ after" in text, "the log holds no diff: ANSIBLE_DIFF_ALWAYS is off"
    return [secret for secret in secrets if secret and secret in text]


def readable_copies(host: Any, secrets: Iterable[str], allowed: Iterable[str] = (), perm: str = "/044") -> List[str]:
    """Files of ``host``'s own filesystem (``find -xdev``: /proc and /sys stay out) that hold any
    of ``secrets`` and that their group or other users may read (``perm``, find's -perm: "/004"
    for other users alone), except the paths ``allowed`` (a file whose group is the one named
    user's, as munge's key or Prometheus's password)."""
    patterns = " ".join("-e %s" % shlex.quote(secret) for secret in secrets if secret)
    found = host.run("find / -xdev -type f -perm %s -size -8M -print0 2>/dev/null"
                     " | xargs -0 -r grep -lsF %s -- || true" % (perm, patterns))
    skip = set(allowed)
    return sorted(path for path in found.stdout.split() if path not in skip)


def journal_copies(host: Any, secrets: Iterable[str]) -> List[str]:
    """The secrets that ``host``'s journal holds (a module's "Invoked with" line of a task that
    was not no_log), or [] where the node keeps no journal."""
    journal = host.run("journalctl --no-pager -o cat 2>/dev/null")
    if journal.rc != 0:
        return []
    return [secret for secret in secrets if secret and secret in journal.stdout]
