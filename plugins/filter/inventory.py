# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of playbooks/inventory_check.yml; the logic is plugin_utils/_inventory.py.

* ``misspelt_variables(hostvars[host])``: one line per variable with a prefix of the collection
  that no role reads, with the closest name it knows ("did you mean ...").
* ``duplicate_addresses(hostvars, hosts)``: one line per address two of ``hosts`` share.
* ``spaced_install_paths(hostvars[host])``: one line per install path holding whitespace or a
  control character.
* ``address_refusals(hostvars[host])``: one line per address of the node that is no address.
* ``port_refusals(hostvars[host])``: one line per port variable outside 1-65535.
* ``duplicate_yaml_keys(ansible_inventory_sources)``: one line per key given twice in one mapping of
  the inventory's YAML files.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Sequence

from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _inventory


def misspelt_variables(host_vars: Mapping[str, Any]) -> List[str]:
    return _inventory.misspelt(list(host_vars))


def duplicate_addresses(hostvars: Mapping[str, Any], hosts: Sequence[str]) -> List[str]:
    # Read only the address variables: templating every variable of every node would be slow and
    # would judge values that this check does not need.
    nodes = {}
    for host in hosts:
        node = hostvars[host]
        nodes[str(host)] = {var: node[var] for var in _inventory.ADDRESS_VARS + ("ansible_connection",) if var in node}
    return _inventory.duplicate_addresses(nodes)


def spaced_install_paths(host_vars: Mapping[str, Any]) -> List[str]:
    return _inventory.spaced_paths({var: host_vars[var] for var in _inventory.INSTALL_PATHS if var in host_vars})


def address_refusals(host_vars: Mapping[str, Any]) -> List[str]:
    return _inventory.address_refusals({var: host_vars[var] for var in _inventory.ADDRESS_VARS if var in host_vars})


def port_refusals(host_vars: Mapping[str, Any]) -> List[str]:
    # Template only the port variables (see duplicate_addresses).
    return _inventory.port_refusals({var: host_vars[var] for var in _inventory.port_variables(list(host_vars))})


def duplicate_yaml_keys(sources: Sequence[str]) -> List[str]:
    return _inventory.duplicate_keys(sources)


class FilterModule:
    """Inventory-check filters of megatron_ds.cluster."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        return {"misspelt_variables": misspelt_variables, "duplicate_addresses": duplicate_addresses,
                "spaced_install_paths": spaced_install_paths, "address_refusals": address_refusals,
                "port_refusals": port_refusals, "duplicate_yaml_keys": duplicate_yaml_keys}
