# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the GPU stack roles (cuda_toolkit, cudnn, nccl): NVIDIA's download layout.

Every URL, directory, manifest name and archive name these roles use comes from
module_utils/_stack/redist.py, the module the test mirror builds its site with, so the roles hold no
copy of the layout. Errors become AnsibleFilterError with the filter's name in front.

* ``nvidia_platform(arch)``: ``x86_64`` -> ``linux-x86_64``, ``aarch64`` -> ``linux-sbsa``.
* ``nvidia_url(mirror_url, kind)``: the download directory of ``kind`` (``cuda``, ``cudnn``,
  ``nccl``, ``cuda_runfile``) under a mirror, or under NVIDIA when the mirror is empty.
* ``nvidia_redist_path(kind)``: NVIDIA's directory of ``kind`` (the cache keeps that path).
* ``redist_manifest_name(version)``: ``redistrib_<version>.json``.
* ``redist_manifest(text)``: a manifest's JSON, checked to list components.
* ``redist_problems(manifest, components, platform, cuda_variant=None)``: why the manifest
  cannot give each component (empty list when it can).
* ``redist_archives(manifest, components, platform, cuda_variant=None)``: the archives to
  fetch: name, version, relative_path, sha256, size.
* ``redist_marker(archives, version, method)``: version, method and each component's version
  and sha256: what a role records beside an install.
* ``cuda_runfile_relpath(runfile, version)``, ``cudnn_archive_relpath(version, cuda_major,
  platform)``, ``nccl_archive_name(version, cuda_build, arch)``, ``nccl_relpath(version,
  cuda_build, arch)``: archive paths where no manifest is read.
* ``installed_match(header_results, library_results, kind, want)``: whether the node already has
  cuDNN or NCCL ``want`` that someone else installed, from one slurp loop over candidate headers
  and one stat loop over their libraries.
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Dict

from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import redist as _redist


def _filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (ValueError, TypeError, AttributeError, KeyError) as exc:
            raise AnsibleFilterError("megatron_ds.cluster.%s: %s" % (name, exc)) from exc
    return wrapper


def _runfile_relpath(runfile: str, version: str) -> str:
    return _redist.runfile_relpath(version, runfile)


def _marker(archives: Any, version: str, method: str) -> Dict[str, Any]:
    return _redist.marker(version, method, archives)


_FILTERS: Dict[str, Callable[..., Any]] = {
    "nvidia_platform": _redist.platform_for,
    "nvidia_url": _redist.redist_url,
    "nvidia_redist_path": _redist.redist_path,
    "redist_manifest_name": _redist.manifest_name,
    "redist_manifest": _redist.load_manifest,
    "redist_problems": _redist.manifest_problems,
    "redist_archives": _redist.archives,
    "redist_marker": _marker,
    "cuda_runfile_relpath": _runfile_relpath,
    "cudnn_archive_relpath": _redist.cudnn_archive_relpath,
    "nccl_archive_name": _redist.nccl_archive_name,
    "nccl_relpath": _redist.nccl_relpath,
    "installed_match": _redist.installed_match,
}


class FilterModule:
    """GPU stack filters of megatron_ds.cluster."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        return {name: _filter(name, func) for name, func in _FILTERS.items()}
