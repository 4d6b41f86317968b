# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the self-healing supervisor (roles/supervisor); thin adapters over
module_utils/_heal/incident.py and module_utils/_heal/policy.py.

* ``incident_summary(text)``: the supervisor's incident file (JSON lines) as status.yml reports it.
* ``heal_replan(spec_vars, nodes_left, gpus_per_node)``: the same TP/PP on fewer nodes, the
  global batch kept (_heal.replan).
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional

from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import policy as _heal
from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import incident as _incident


def incident_summary(text: Any, last: int = 5, now: Optional[Any] = None) -> Dict[str, Any]:
    lines = str(text or "").splitlines()
    records, bad = _incident.parse(lines)
    since = _incident.watching_since(lines)
    wall = (float(now) if now is not None else time.time()) - since if since is not None else None
    return _incident.summary(records, bad, int(last), _incident.ledger(records, wall))


def heal_replan(spec_vars: Any, nodes_left: Any, gpus_per_node: Optional[Any] = None,
                gpu_memory_mib: Optional[Any] = None) -> Dict[str, Any]:
    if not isinstance(spec_vars, dict):
        raise AnsibleFilterError("megatron_ds.cluster.heal_replan: expected the megatron_job_* variables as a dict, "
                                 "found %s" % type(spec_vars).__name__)
    return _heal.replan(spec_vars, int(nodes_left), int(gpus_per_node) if gpus_per_node else None,
                        gpu_memory_mib=int(gpu_memory_mib) if gpu_memory_mib else None)


class FilterModule:
    """Supervisor filters of megatron_ds.cluster."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        return {"incident_summary": incident_summary, "heal_replan": heal_replan}
