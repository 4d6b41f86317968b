# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ansible.builtin.jsonfile, kept private: the fact cache of the collection's ansible.cfg."""
from __future__ import annotations

DOCUMENTATION = r"""
name: private_jsonfile
short_description: JSON fact cache files that only the controller's user can read
description:
  - C(ansible.builtin.jsonfile), except that the cache directory is made (and kept) mode 0700 and each
    file is written 0600. The builtin plugin leaves the directory to the umask and every file 0644, so
    any user of the controller could read the facts of every node.
  - The collection gathers no environment facts (C(!env) in every C(gather_subset)), so proxy
    credentials set in a node's environment do not reach the cache; this plugin guards what is left.
author: megatron_ds.cluster developers (@megatron-ds)
version_added: 1.0.0
options:
  _uri:
    required: true
    description: The cache directory (created 0700; an existing one is set to 0700).
    env:
      - name: ANSIBLE_CACHE_PLUGIN_CONNECTION
    ini:
      - key: fact_caching_connection
        section: defaults
    type: path
  _prefix:
    description: A prefix of the file names.
    env:
      - name: ANSIBLE_CACHE_PLUGIN_PREFIX
    ini:
      - key: fact_caching_prefix
        section: defaults
  _timeout:
    default: 86400
    description: Seconds before a cached entry expires.
    env:
      - name: ANSIBLE_CACHE_PLUGIN_TIMEOUT
    ini:
      - key: fact_caching_timeout
        section: defaults
    type: integer
"""

import os

from ansible.plugins.cache.jsonfile import CacheModule as JsonFileCacheModule

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


class CacheModule(JsonFileCacheModule):
    """jsonfile with a 0700 directory and 0600 files."""

    def validate_cache_connection(self) -> None:
        if self._cache_dir and not os.path.exists(self._cache_dir):
            os.makedirs(self._cache_dir, DIRECTORY_MODE)
        super().validate_cache_connection()
        os.chmod(self._cache_dir, DIRECTORY_MODE)

    def set(self, key: str, value: object) -> None:
        super().set(key, value)
        try:
            os.chmod(self._get_cache_file_name(key), FILE_MODE)
        except FileNotFoundError:  # the builtin plugin warned already
            pass
