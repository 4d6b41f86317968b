# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
name: library
author: megatron_ds.cluster developers (@megatron-ds)
version_added: 1.0.0
short_description: Pack the collection's module_utils as the library its node programs import
description:
  - Packs this collection's C(plugins/module_utils) into a reproducible tar.gz laid out as the
    import path C(ansible_collections/megatron_ds/cluster/plugins/module_utils/), once per content
    digest, in a directory of the controller.
  - The os_base role's C(library) entry point unpacks it on a node when the node's digest differs.
options:
  cache_dir:
    description: Controller directory for the archive; the system temporary directory when unset.
    type: path
"""

EXAMPLES = r"""
- name: Show the library's digest
  ansible.builtin.debug:
    msg: "{{ lookup('megatron_ds.cluster.library').digest }}"
"""

RETURN = r"""
_raw:
  description: One dictionary.
  type: list
  elements: dict
  contains:
    archive:
      description: Path of the tar.gz on the controller.
      type: str
    digest:
      description: sha256 over the library's file names and contents; also in the archive's C(LIBRARY) file.
      type: str
    files:
      description: Number of Python files in the library.
      type: int
    collection:
      description: The collection's own directory on the controller (what C(ansible-galaxy collection build) takes).
      type: str
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _library


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        try:
            return [_library.build_archive(cache_dir=self.get_option("cache_dir"))]
        except (OSError, ValueError) as exc:
            raise AnsibleLookupError("megatron_ds.cluster.library: %s" % exc) from exc
