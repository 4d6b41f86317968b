# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's library laid out as os_base's ``library`` entry point lays it out on a node:
the archive that the ``megatron_ds.cluster.library`` lookup builds, unpacked into a directory."""
from __future__ import annotations

import tarfile
from pathlib import Path

from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _library


def install(dest: Path) -> Path:
    """Unpack the library under ``dest``/lib (what a node's os_base_library_dir holds); return that directory."""
    built = _library.build_archive(cache_dir=str(dest))
    lib = dest / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    with tarfile.open(str(built["archive"])) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(str(lib), filter="data")
        else:  # Python before 3.11.4: the archive is our own, built above
            tar.extractall(str(lib))  # noqa: S202
    return lib
