# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Who provides the ``flash_attn`` package in this interpreter's site-packages, without
importing it (no torch, no CUDA). Prints one JSON object:

  owners   [{name, version}] of every installed distribution with files under flash_attn/
  loose    the flash_attn directory when no distribution owns it (copied in by hand), else null
  expected the version in ADAPTER_DIR/flash_attn/__init__.py (the adapter about to be
           installed), when ADAPTER_DIR is given

Usage: python -I flash_attn_owner.py [ADAPTER_DIR]
"""
import json
import os
import re
import site
import sys

try:
    from importlib import metadata
except ImportError:  # Python < 3.8
    metadata = None


def owners():
    found = []
    if metadata is None:
        return found
    for dist in metadata.distributions():
        files = dist.files or []
        if any(str(f).replace("\\", "/").startswith("flash_attn/") for f in files):
            found.append({"name": dist.metadata["Name"], "version": dist.version})
    return sorted(found, key=lambda d: d["name"].lower())


def loose(owned):
    if owned:
        return None
    for directory in site.getsitepackages():
        candidate = os.path.join(directory, "flash_attn")
        if os.path.isdir(candidate):
            return candidate
    return None


def expected(adapter_dir):
    try:
        with open(os.path.join(adapter_dir, "flash_attn", "__init__.py")) as handle:
            match = re.search(r'^__version__ = "([^"]+)"', handle.read(), re.M)
    except (IOError, OSError):
        return None
    return match.group(1) if match else None


def main():
    owned = owners()
    print(json.dumps({
        "owners": owned,
        "loose": loose(owned),
        "expected": expected(sys.argv[1]) if len(sys.argv) > 1 else None,
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
