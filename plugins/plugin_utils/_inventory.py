# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What inventory_check.yml refuses before any host changes, as pure functions: a misspelt variable
of the collection (with the name it most likely meant), two nodes that share an address, an
address that is no address, a port out of range, and an install path with whitespace or a control
character.

Ansible does not know which variables a role reads, so a typo (megatron_job_micro_batch) is
silently ignored and the default is used; the roles' own meta/argument_specs.yml list every
variable they read, so a name with a role's prefix that no spec lists is a typo.
"""
from __future__ import annotations

import difflib
import functools
import ipaddress
import os
import re
from typing import Any, Dict, FrozenSet, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

import yaml

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import hops as _job_hops
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema

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
    """One line per INSTALL_PATHS variable whose value holds whitespace or a control character:
    "python_env_path is '/opt/my venv'". A control character that is not whitespace (ESC, NUL)
    splits nothing but ends a C string or garbles the env and unit files these paths are written to."""
    return ["%s is %r" % (var, values[var]) for var in INSTALL_PATHS
            if isinstance(values.get(var), str) and any(c.isspace() or _job_hops.CONTROL.match(c) for c in values[var])]


def address_refusals(values: Mapping[str, Any]) -> List[str]:
    """One line per ADDRESS_VARS value of one node that is no address: a dotted number that is not
    an IPv4 address (10.0.0.300: resolved as a host name, it fails on every node only once provisioning
    runs), or a name the hostfile hop cannot carry (an ssh option such as -oProxyCommand=..., a space,
    a shell character). ansible_host may also be an IPv6 address (ssh takes one); the cluster's own
    addresses go into the hostfile and pdsh -w, which split on ':'."""
    lines = []
    for var in ADDRESS_VARS:
        value = values.get(var)
        if value in (None, ""):
            continue
        text = str(value)
        if _job_schema.malformed_ipv4(text):
            lines.append("%s is %r, which is no IPv4 address (four numbers 0-255)" % (var, text))
            continue
        if var == "ansible_host" and _is_ipv6(text):
            continue
        bad = _job_hops.refusal("hostfile", text)
        if bad is not None:
            lines.append("%s is %r, which holds %s: %s take letters, digits and ._-, not starting with '-'"
                         % (var, text, _job_hops.printable(bad) if bad else "nothing", _job_hops.HOPS["hostfile"].where))
    return lines


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


@functools.lru_cache(maxsize=1)
def _prefixes() -> Tuple[str, ...]:
    # Read once per process: every node of the inventory asks.
    return tuple(role + "_" for role in role_variables()) + OTHER_PREFIXES


def port_variables(names: Iterable[str]) -> List[str]:
    """The names among ``names`` that hold a TCP port the collection uses: ansible_port and every
    variable with a prefix of the collection ending in _port (monitoring_prometheus_port, ...)."""
    prefixes = _prefixes()
    return sorted(str(n) for n in names if str(n) == "ansible_port" or (str(n).startswith(prefixes) and str(n).endswith("_port")))


def port_refusals(values: Mapping[str, Any]) -> List[str]:
    """One line per port variable in ``values`` (port_variables) that is not a whole number from 1 to
    65535. The roles' argument specs check only the type, and only when the role starts on a node,
    after the roles before it changed it; a port out of range then fails a service's start."""
    lines = []
    for var in port_variables(values):
        value = values[var]
        if value is None:
            continue
        try:
            port = _job_schema.to_int(var, value)
        except _job_schema.JobError:
            lines.append("%s is %r, expected a whole number" % (var, value))
            continue
        if not 1 <= port <= 65535:
            lines.append("%s is %r, expected a TCP port from 1 to 65535" % (var, value))
    return lines


class _DuplicateKeyLoader(yaml.SafeLoader):  # pylint: disable=too-many-ancestors
    """A SafeLoader that records each mapping key given twice (a merge key's values excepted: YAML
    lets a mapping override what it merged)."""

    def __init__(self, stream: Any) -> None:
        super().__init__(stream)
        self.duplicates: List[Tuple[str, int]] = []

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: Set[Any] = set()
        for key_node, _value in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            if isinstance(key, (str, int, float, bool)) and key in seen:
                self.duplicates.append((str(key), key_node.start_mark.line + 1))
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _yaml_files(source: str) -> List[str]:
    if os.path.isfile(source):
        return [source] if source.endswith((".yml", ".yaml")) else []
    found = []
    for base, _dirs, files in os.walk(source):
        found += [os.path.join(base, name) for name in sorted(files) if name.endswith((".yml", ".yaml"))]
    return sorted(found)


def duplicate_keys(sources: Iterable[str]) -> List[str]:
    """One line per key given twice in one mapping of the inventory's YAML files (``sources``: files
    or directories, as ansible_inventory_sources lists them; their group_vars and host_vars too): a
    node listed twice under hosts:, a variable set twice. Ansible only warns and keeps the last one,
    so the first node's variables silently disappear. A file that does not parse is left to the
    inventory parser, which names it."""
    lines = []
    for source in sources:
        for path in _yaml_files(str(source)):
            with open(path, errors="replace") as handle:
                loader = _DuplicateKeyLoader(handle)
                try:
                    loader.get_single_data()
                except yaml.YAMLError:
                    continue
                finally:
                    loader.dispose()
            lines += ["%s:%d: %r given twice" % (path, line, key) for key, line in loader.duplicates]
    return lines
