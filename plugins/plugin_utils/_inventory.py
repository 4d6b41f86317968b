# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What inventory_check.yml refuses before any host changes, as pure functions: a misspelt variable
of the collection (with the name it most likely meant), two nodes that share an address, and an
install path with whitespace.

Ansible does not know which variables a role reads, so a typo (megatron_job_micro_batch) is
silently ignored and the default is used; the roles' own meta/argument_specs.yml list every
variable they read, so a name with a role's prefix that no spec lists is a typo.
"""
from __future__ import annotations

import difflib
import functools
import os
import re
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import yaml

# The collection's roles, next to plugins/ in the repository and in an installed collection alike.
ROLES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "roles")

# Names outside any role's argument spec that the collection reads all the same: the inventory's
# cluster description (read by lookups and playbooks), the job spec's per-host and validate.yml
# inputs (schema.NON_SPEC_KEYS), and the inputs of the controller-only playbooks.
OTHER_KNOWN: Tuple[str, ...] = (
    "megatron_stack_profile", "megatron_gpu_model", "megatron_unknown_variables",
    "megatron_job_script", "megatron_job_ds_config_file", "megatron_job_hostfile", "megatron_job_node_address",
)
# Cluster-wide prefixes besides the roles' own names (cluster_defaults' settings).
OTHER_PREFIXES: Tuple[str, ...] = ("megatron_", "preflight_")

# Variables whose value ends up unquoted in a shell word or in PATH, PYTHONPATH or CUDA_HOME on the
# nodes: DeepSpeed's pdsh runner writes `export KEY=VALUE;` and `cd <dir>;` unquoted
# (deepspeed/launcher/multinode_runner.py:94, :99 at 0.19.6), and the venv and CUDA builds (apex,
# flash-attn, the fused ops) run nvcc and setup.py from these paths.
INSTALL_PATHS: Tuple[str, ...] = (
    "megatron_job_venv", "megatron_job_cuda_home", "megatron_job_megatron_dir",
    "python_env_path", "python_env_cuda_home", "python_env_megatron_dir", "python_env_apex_dir",
    "os_base_cuda_home", "megatron_launch_venv", "megatron_launch_megatron_dir",
    "megatron_data_venv", "megatron_data_megatron_dir", "supervisor_ansible_venv",
)
# The per-node addresses another node or the hostfile uses: two nodes must not share one.
ADDRESS_VARS: Tuple[str, ...] = ("ansible_host", "megatron_job_node_address", "os_base_cluster_address")


def role_variables(roles_dir: str = ROLES_DIR) -> Dict[str, List[str]]:
    """Role name -> every option of every entry point of its meta/argument_specs.yml."""
    found: Dict[str, List[str]] = {}
    for role in sorted(os.listdir(roles_dir)):
        path = os.path.join(roles_dir, role, "meta", "argument_specs.yml")
        if not os.path.isfile(path):
            continue
        with open(path) as handle:
            specs = (yaml.safe_load(handle) or {}).get("argument_specs") or {}
        found[role] = sorted({name for entry in specs.values() for name in (entry or {}).get("options") or {}})
    return found


@functools.lru_cache(maxsize=4)
def mentioned(prefixes: Tuple[str, ...], roles_dir: str = ROLES_DIR) -> FrozenSet[str]:
    """Every name with one of ``prefixes`` that the roles and playbooks mention (defaults that read
    a cluster-wide name, such as ``megatron_nvidia_mirror_url | default('')``, and facts the plays
    set): a name the collection reads somewhere is not a typo even where no argument spec lists it."""
    pattern = re.compile(r"\b(?:%s)[a-z0-9_]*" % "|".join(re.escape(p) for p in prefixes))
    found: Set[str] = set()
    top = os.path.dirname(os.path.abspath(roles_dir))
    for folder in (roles_dir, os.path.join(top, "playbooks")):
        for base, _dirs, files in os.walk(folder):
            for name in files:
                if name.endswith((".yml", ".yaml", ".j2")):
                    with open(os.path.join(base, name), errors="replace") as handle:
                        found.update(pattern.findall(handle.read()))
    return frozenset(found)


def misspelt(names: Iterable[str], roles: Optional[Mapping[str, Sequence[str]]] = None,
             also_known: Iterable[str] = ()) -> List[str]:
    """One line per name among ``names`` that carries a prefix of the collection (a role's name and
    ``_``, or ``megatron_`` / ``preflight_``) and that no argument spec lists and no role or playbook
    mentions, with the closest documented name: 'megatron_job_micro_batch (did you mean
    megatron_job_micro_batch_size?)'."""
    roles = role_variables() if roles is None else roles
    documented = set(OTHER_KNOWN).union(*[set(v) for v in roles.values()])
    prefixes = tuple(role + "_" for role in roles) + OTHER_PREFIXES
    known = documented | mentioned(prefixes) | set(also_known)
    lines = []
    for name in sorted(str(n) for n in names):
        if name in known or name.startswith("_") or not name.startswith(prefixes):
            continue
        close = difflib.get_close_matches(name, sorted(documented), n=1, cutoff=0.7)
        lines.append("%s (%s)" % (name, "did you mean %s?" % close[0] if close else "no variable of the collection is near it"))
    return lines


def duplicate_addresses(nodes: Mapping[str, Mapping[str, Any]]) -> List[str]:
    """One line per address that two or more nodes share, naming the nodes and the variable each
    takes it from. A node's addresses: its ssh address (ansible_host, else the inventory name), its
    hostfile name (megatron_job_node_address, else the inventory name) and its os_base_cluster_address
    when set; so a node named like another node's address counts too. With the local connection
    ansible_host is not used (a controller-only run, `-e ansible_connection=local`, or a test)."""
    users: Dict[str, List[str]] = {}
    for host, values in nodes.items():
        own: Dict[str, str] = {}
        for var in ADDRESS_VARS:
            value = values.get(var)
            if var == "ansible_host" and values.get("ansible_connection") == "local":
                value = None
            if value in (None, ""):
                if var == "os_base_cluster_address":
                    continue
                value, var = host, "inventory name"
            own.setdefault(str(value), var)
        for address, var in own.items():
            users.setdefault(address, []).append("%s (%s)" % (host, var))
    return ["%s is the address of %s" % (address, " and ".join(who)) for address, who in sorted(users.items())
            if len(who) > 1]


def spaced_paths(values: Mapping[str, Any]) -> List[str]:
    """One line per INSTALL_PATHS variable whose value holds whitespace: "python_env_path is '/opt/my venv'"."""
    return ["%s is %r" % (var, values[var]) for var in INSTALL_PATHS
            if isinstance(values.get(var), str) and any(c.isspace() for c in values[var])]
