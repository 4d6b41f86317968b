# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A provisioning role's inputs on one host, as the converge check and the role's stamp see them.

The same function runs in two places: in the converge_plan action before any role (where no role
is loaded) and, when no plan was made, in the role's own converge_stamp task (where the role's
defaults are loaded). Both must give the same digest for the same inventory, so the values are
taken the same way in both: each variable of the role's ``defaults/main.yml`` from the host's
variables when set there, else that file's default; templated against the defaults of every
provisioning role under the host's variables, under every such role's ``vars/main.yml``. Facts (``ansible_*``), role paths and play-scoped
names are left out of that environment, because they differ between the two places: a default
that needs them is kept as its unrendered text.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from ansible.errors import AnsibleError

try:  # ansible-core 2.19+: text read by a plugin is no template until it is trusted as one.
    from ansible.template import trust_as_template as _trust
except ImportError:  # pragma: no cover - older cores template every string
    def _trust(value: Any) -> Any:
        return value

from ansible_collections.megatron_ds.cluster.plugins.module_utils._converge import plan as _plan
from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _job_inputs

COLLECTION_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# Names that differ between a play with no role and a role's own tasks.
_CONTEXT_PREFIXES = ("ansible_", "role_", "omit")
_CONTEXT_NAMES = frozenset(("play_hosts", "playbook_dir", "role_names", "environment", "vars"))
# What of a role's directory is its behaviour (a change re-runs it on every node).
_ROLE_PARTS = ("defaults", "files", "handlers", "meta", "tasks", "templates", "vars")

_cache: Dict[str, Any] = {}

Loader = Callable[[str], Any]


def _files_under(folders: List[str], suffix: str = "") -> List[str]:
    """Every file under ``folders`` ending in ``suffix``, sorted (the order digests are taken in)."""
    found = []
    for base in folders:
        for folder, _dirs, files in os.walk(base):
            found.extend(os.path.join(folder, name) for name in files
                         if name.endswith(suffix) and not name.endswith(".pyc"))
    return sorted(found)


def collection_version(root: str = COLLECTION_ROOT) -> str:
    key = "version:" + root
    if key not in _cache:
        version = "unknown"
        try:
            with open(os.path.join(root, "galaxy.yml")) as handle:
                for line in handle:
                    if line.startswith("version:"):
                        version = line.split(":", 1)[1].strip().strip("'\"")
                        break
        except OSError:
            pass
        _cache[key] = version
    return _cache[key]


def role_files_digest(role: str, root: str = COLLECTION_ROOT) -> str:
    """sha256 over the role's files (path and content), read once per controller process."""
    key = "files:%s:%s" % (root, role)
    if key not in _cache:
        digest = hashlib.sha256()
        base = os.path.join(root, "roles", role)
        for path in _files_under([os.path.join(base, part) for part in _ROLE_PARTS]):
            digest.update(os.path.relpath(path, base).encode("utf-8") + b"\0")
            with open(path, "rb") as handle:
                digest.update(handle.read())
            digest.update(b"\0")
        _cache[key] = digest.hexdigest()[:16]
    return _cache[key]


def library_digest(root: str = COLLECTION_ROOT) -> str:
    """sha256 over plugins/module_utils (the library os_base installs on every node)."""
    key = "library:" + root
    if key not in _cache:
        digest = hashlib.sha256()
        base = os.path.join(root, "plugins", "module_utils")
        for path in _files_under([base], ".py"):
            digest.update(os.path.relpath(path, base).encode("utf-8") + b"\0")
            with open(path, "rb") as handle:
                digest.update(handle.read())
        _cache[key] = digest.hexdigest()[:16]
    return _cache[key]


def trusted(value: Any) -> Any:
    """``value`` with every string in it trusted as a template, as Ansible trusts a role's files."""
    if isinstance(value, str):
        return _trust(value)
    if isinstance(value, Mapping):
        return dict((key, trusted(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return [trusted(item) for item in value]
    return value


def role_file(role: str, kind: str, load: Loader, root: str = COLLECTION_ROOT) -> Dict[str, Any]:
    """The role's ``<kind>/main.yml`` (defaults or vars), its strings templates as in the role."""
    key = "%s:%s:%s" % (kind, root, role)
    if key not in _cache:
        path = os.path.join(root, "roles", role, kind, "main.yml")
        data = load(path) if os.path.isfile(path) else {}
        _cache[key] = trusted(dict(data or {}))
    return _cache[key]


def role_defaults(role: str, load: Loader, root: str = COLLECTION_ROOT) -> Dict[str, Any]:
    return role_file(role, "defaults", load, root)


def _environment(task_vars: Mapping[str, Any], load: Loader, root: str) -> Dict[str, Any]:
    env: Dict[str, Any] = {}
    for spec in _plan.ROLES:
        env.update(role_defaults(spec.name, load, root))
    for name in task_vars:
        if name.startswith(_CONTEXT_PREFIXES) or name in _CONTEXT_NAMES:
            continue
        env[name] = task_vars[name]
    # A role's vars/main.yml outranks the inventory (its names are the role's own __ ones).
    for spec in _plan.ROLES:
        env.update(role_file(spec.name, "vars", load, root))
    return env


def _cluster(task_vars: Mapping[str, Any], render: Callable[[Any], Any]) -> Dict[str, Any]:
    """The members and every address they are known by: what os_base, cluster_ssh, shared_storage
    and slurm write about each of them."""
    cluster = _job_inputs.cluster(task_vars, render)
    hostvars = task_vars.get("hostvars") or {}
    for member in cluster["nodes"]:
        try:
            given = hostvars[member]
            cluster.setdefault("ansible_host", {})[member] = str(render(given.get("ansible_host", member)))
            address = given.get("os_base_cluster_address")
            cluster.setdefault("os_base_cluster_address", {})[member] = str(render(address)) if address is not None else None
        except (KeyError, AttributeError, AnsibleError):
            continue
    return cluster


def host_inputs(roles: Sequence[str], task_vars: Mapping[str, Any], templar: Any, load: Loader,
                profile: Optional[Mapping[str, Any]] = None,
                root: str = COLLECTION_ROOT) -> Dict[str, Tuple[str, Dict[str, str]]]:
    """``{role: (digest, {input: digest})}`` for each of ``roles`` on the host whose variables are
    ``task_vars``; the templating environment and the cluster are built once for all of them."""
    unknown = [role for role in roles if role not in _plan.BY_NAME]
    if unknown:
        raise AnsibleError("converge: %s is not a provisioning role with a converge stamp; expected one of %s"
                           % (", ".join(repr(role) for role in unknown), ", ".join(_plan.BY_NAME)))
    env = _environment(task_vars, load, root)
    renderer = templar.copy_with_new_env(available_variables=env)
    cluster = None
    result: Dict[str, Tuple[str, Dict[str, str]]] = {}
    for role in roles:
        spec = _plan.BY_NAME[role]
        defaults = role_defaults(role, load, root)
        values: Dict[str, Any] = {}
        for name in defaults:
            raw = env.get(name, defaults[name])
            try:
                values[name] = renderer.template(raw)
            except AnsibleError:
                # Kept as written: the same text in both places, so the digest still agrees.
                values[name] = "(unrendered) %s" % (raw,)
        collection = {"version": collection_version(root), "role_files": role_files_digest(role, root),
                      "profile": _plan.short_digest(profile or {})}
        if spec.library:
            collection["library"] = library_digest(root)
        if spec.cluster_inputs and cluster is None:
            cluster = _cluster(task_vars, renderer.template)
        inputs = _plan.role_inputs(spec, values, collection, cluster if spec.cluster_inputs else None)
        result[role] = (_plan.inputs_digest(inputs), dict(inputs))
    return result


def role_inputs(role: str, task_vars: Mapping[str, Any], templar: Any, load: Loader,
                profile: Optional[Mapping[str, Any]] = None, root: str = COLLECTION_ROOT) -> Tuple[str, Dict[str, str]]:
    """``(digest, {input: digest})`` of ``role`` on the host whose variables are ``task_vars``."""
    return host_inputs([role], task_vars, templar, load, profile, root)[role]
