# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every role that installs Debian packages refreshes the indexes through os_base's
``apt_cache`` entry point first, and no install task judges the cache's age by itself.

The bug this guards against (issue 17): ``cache_valid_time`` on an install task trusts the mtime
of /var/lib/apt/lists, which is brand new in an image built with its lists deleted, so the
install found no package at all on a freshly built node. molecule/monitoring's prepare recreates
such a node; this table test keeps a new role from reintroducing the pattern.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterator, List, Tuple

import jinja2
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
ROLES = ROOT / "roles"
ENTRY = ROLES / "os_base" / "tasks" / "apt_cache.yml"


def _tasks(node: Any) -> Iterator[Dict[str, Any]]:
    """Every task in a task list, blocks, rescues and always sections included."""
    if isinstance(node, list):
        for item in node:
            yield from _tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in ("block", "rescue", "always"):
            yield from _tasks(node.get(key, []))


def _role_task_files() -> List[Tuple[str, Path]]:
    return sorted((path.parts[-3], path) for path in ROLES.glob("*/tasks/*.yml"))


def _installs(task: Dict[str, Any]) -> bool:
    """An apt task that installs packages by name (a local .deb or a cache refresh does not)."""
    args = task.get("ansible.builtin.apt")
    return isinstance(args, dict) and "name" in args


def _includes_apt_cache(task: Dict[str, Any]) -> bool:
    args = task.get("ansible.builtin.include_role") or {}
    return args.get("name") == "megatron_ds.cluster.os_base" and args.get("tasks_from") == "apt_cache"


INSTALL_TASKS = [
    (role, path.name, task.get("name", "?"), task)
    for role, path in _role_task_files()
    for task in _tasks(yaml.safe_load(path.read_text()) or [])
    if _installs(task)
]
ROLES_WITH_INSTALLS = sorted({role for role, _file, _name, _task in INSTALL_TASKS})


def test_the_table_sees_the_roles_that_install_packages() -> None:
    # The tests below would pass vacuously if the walk found nothing.
    assert {"os_base", "monitoring", "python_env", "cluster_ssh", "nvidia_driver"} <= set(ROLES_WITH_INSTALLS)


@pytest.mark.parametrize(("role", "file", "name", "task"), INSTALL_TASKS,
                         ids=[f"{r}/{f}:{n}" for r, f, n, _t in INSTALL_TASKS])
def test_install_tasks_do_not_judge_the_cache_age(role: str, file: str, name: str, task: Dict[str, Any]) -> None:
    assert "cache_valid_time" not in task["ansible.builtin.apt"], (
        f"{role}/tasks/{file} '{name}': cache_valid_time trusts the index directory's mtime; "
        "include os_base tasks_from apt_cache before the install instead"
    )


@pytest.mark.parametrize("role", ROLES_WITH_INSTALLS)
def test_roles_that_install_packages_refresh_through_os_base(role: str) -> None:
    files = [path for r, path in _role_task_files() if r == role]
    found = any(
        _includes_apt_cache(task)
        or (role == "os_base" and task.get("ansible.builtin.include_tasks") == "apt_cache.yml")
        for path in files
        for task in _tasks(yaml.safe_load(path.read_text()) or [])
    )
    assert found, f"role {role} installs packages but never includes os_base's apt_cache entry point"


@pytest.mark.parametrize(("indexes_on_disk", "valid_time", "expected"), [
    (0, 3600, 0),        # a fresh image: nothing on disk, refresh whatever the mtime says
    (0, 86400, 0),
    (12, 3600, 3600),    # indexes present: trust them for the configured time
    (1, 60, 60),
])
def test_the_entry_point_refreshes_when_no_index_is_on_disk(indexes_on_disk: int, valid_time: int, expected: int) -> None:
    tasks = list(_tasks(yaml.safe_load(ENTRY.read_text())))
    refresh = next(task["ansible.builtin.apt"] for task in tasks if "ansible.builtin.apt" in task)
    assert refresh["update_cache"] is True
    rendered = jinja2.Environment().from_string(refresh["cache_valid_time"]).render(
        os_base_apt_cache_valid_time=valid_time, __os_base_apt_lists={"matched": indexes_on_disk})
    assert int(rendered) == expected
