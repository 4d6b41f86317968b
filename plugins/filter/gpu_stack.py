# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the GPU stack roles (cudnn, nccl).

* ``installed_match(header_results, library_results, kind, want)``: whether the node already has
  cuDNN or NCCL ``want`` that someone else installed, from one slurp loop over candidate headers
  and one stat loop over their libraries (module_utils/_redist.installed_match).
"""
from __future__ import annotations

from typing import Any, Callable, Dict

from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.module_utils import _redist


def installed_match(header_results: Any, library_results: Any, kind: str, want: str) -> Dict[str, Any]:
    """See module_utils/_redist.installed_match; errors become AnsibleFilterError."""
    try:
        return _redist.installed_match(header_results, library_results, kind, want)
    except (ValueError, TypeError, AttributeError) as exc:
        raise AnsibleFilterError("megatron_ds.cluster.installed_match: %s" % exc) from exc


class FilterModule:
    """GPU stack filters of megatron_ds.cluster."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        return {"installed_match": installed_match}
