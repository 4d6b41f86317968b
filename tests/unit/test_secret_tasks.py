# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets stay out of logs and --diff: every task that passes a secret variable to a module, a
loop, a message or a fact runs with ``no_log`` (Ansible then hides its result, the diff
included). The secrets are the role options whose argument spec says ``no_log: true``; a new
option named like a credential must say it too."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
# Keys of a task that do not reach its output: a condition is evaluated, not printed.
QUIET_KEYS = {"name", "when", "tags", "no_log", "become", "become_user", "delegate_to", "run_once", "changed_when",
              "failed_when", "notify", "listen", "register", "check_mode", "diff", "ignore_errors", "environment"}
BLOCK_KEYS = ("block", "rescue", "always")
CREDENTIAL = re.compile(r"(password|passwd|token(?!izer)|secret|credential|munge_key|private_key)(?!_file|_dir|_path)", re.I)
# Options whose name looks like a credential but hold none (a path or a switch), with why.
NOT_SECRET = {
    "supervisor_webhook_token_file": "the path of a file the supervisor reads, not the token",
}


def _specs() -> Dict[str, Dict[str, Any]]:
    out: Dict[str, Dict[str, Any]] = {}
    for spec in sorted(ROOT.glob("roles/*/meta/argument_specs.yml")):
        for entry in (yaml.safe_load(spec.read_text()) or {}).get("argument_specs", {}).values():
            out.update(entry.get("options") or {})
    return out


SPECS = _specs()
SECRETS = sorted(name for name, option in SPECS.items() if option.get("no_log"))


def _tasks(items: Any, inherited: bool = False) -> Iterator[Tuple[Dict[str, Any], bool]]:
    for task in items or []:
        if not isinstance(task, dict):
            continue
        hidden = bool(task.get("no_log", inherited)) if not isinstance(task.get("no_log"), str) else True
        if any(key in task for key in BLOCK_KEYS):
            for key in BLOCK_KEYS:
                yield from _tasks(task.get(key), hidden)
            continue
        yield task, hidden


def _task_files() -> List[Path]:
    return sorted(list(ROOT.glob("roles/*/tasks/*.yml")) + list(ROOT.glob("roles/*/handlers/*.yml"))
                  + list(ROOT.glob("playbooks/*.yml")) + list(ROOT.glob("playbooks/tasks/*.yml")) + [ROOT / "site.yml"])


def _all_tasks() -> Iterator[Tuple[str, Dict[str, Any], bool]]:
    for path in _task_files():
        data = yaml.safe_load(path.read_text()) or []
        plays = [p for p in data if isinstance(p, dict) and ("hosts" in p or "import_playbook" in p)]
        if plays:
            for play in plays:
                for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
                    for task, hidden in _tasks(play.get(section), bool(play.get("no_log"))):
                        yield str(path.relative_to(ROOT)), task, hidden
        else:
            for task, hidden in _tasks(data):
                yield str(path.relative_to(ROOT)), task, hidden


def test_there_are_secrets_to_guard():
    assert "slurm_munge_key" in SECRETS and "monitoring_alertmanager_receivers" in SECRETS


@pytest.mark.parametrize("name", sorted(n for n in SPECS if CREDENTIAL.search(n)))
def test_every_credential_option_is_no_log(name):
    assert SPECS[name].get("no_log") or name in NOT_SECRET, (
        "%s looks like a credential: add `no_log: true` to its argument spec, or list it in NOT_SECRET with why" % name)


JINJA = re.compile(r"{{.*?}}|{%.*?%}", re.S)
LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")


def used_names(text: str) -> str:
    """The code of the Jinja expressions in ``text`` without their string literals: a variable
    named in a message's prose is not its value."""
    return " ".join(LITERAL.sub("''", block) for block in JINJA.findall(text))


@pytest.mark.parametrize("text, used", [
    ("{{ slurm_munge_key | b64decode }}", True),
    ("{% if slurm_munge_key %}x{% endif %}", True),
    ("{{ 'set (gone: it copied secrets such as slurm_munge_key)' }}", False),
    ("plain slurm_munge_key prose", False),
])
def test_used_names(text, used):
    assert ("slurm_munge_key" in used_names(text)) is used


def _template_code(path: str, task: Dict[str, Any]) -> str:
    """The Jinja of the file a template task renders (its diff shows the rendered file)."""
    args = task.get("ansible.builtin.template") or task.get("template")
    src = args.get("src") if isinstance(args, dict) else None
    if not src or "{{" in str(src) or not path.startswith("roles/"):
        return ""
    template = ROOT / "roles" / path.split("/")[1] / "templates" / str(src)
    return used_names(template.read_text()) if template.is_file() else ""


def test_every_task_that_passes_a_secret_hides_its_output():
    pattern = re.compile(r"\b(%s)\b" % "|".join(map(re.escape, SECRETS)))
    leaks = []
    for path, task, hidden in _all_tasks():
        loud = {k: v for k, v in task.items() if k not in QUIET_KEYS}
        # json.dumps escapes quotes inside values; decode them back before reading the Jinja.
        text = used_names(json.dumps(loud, default=str).replace('\\"', '"')) + " " + _template_code(path, task)
        found = pattern.findall(text)
        if found and not hidden:
            leaks.append("%s: %r passes %s without no_log" % (path, task.get("name"), ", ".join(sorted(set(found)))))
    assert leaks == []
