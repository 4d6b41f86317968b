# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA redist manifests, archive names and URLs, free of Ansible imports.

NVIDIA publishes CUDA (and cuDNN >= 8.9) as per-component archives listed in a JSON manifest,
``redistrib_<version>.json``: one key per component (``cuda_nvcc``, ``libcublas``, ...), each
with ``name``, ``license``, ``version`` and one object per platform (``linux-x86_64``,
``linux-sbsa``, ...) holding ``relative_path``, ``sha256``, ``md5`` and ``size``. cuDNN
manifests add one level, the CUDA variant (``"linux-x86_64": {"cuda11": {...}}``). Top-level
strings (``release_date``, ``release_label``) are not components.

This module is the one place that knows NVIDIA's download layout: the roles cuda_toolkit,
cudnn and nccl reach it through the filters of plugins/filter/gpu_stack.py (URLs, manifest
names, archive paths, the archives a manifest offers), and the test mirror
(tests/mirror/build_mirror.py) builds its site with the same functions, so what the mirror
writes and what the roles fetch cannot drift apart.
"""
from __future__ import annotations

import base64
import hashlib
import json
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Union

from .._facts.parsers import parse_cudnn_header, parse_nccl_header
from .versions import prefix_match

NVIDIA_BASE_URL = "https://developer.download.nvidia.com"
CUDA_REDIST_PATH = "compute/cuda/redist"
CUDNN_REDIST_PATH = "compute/cudnn/redist"
NCCL_REDIST_PATH = "compute/redist/nccl"
CUDA_RUNFILE_PATH = "compute/cuda"
# What the roles download, by kind -> NVIDIA's directory for it (also the cache subdirectory).
REDIST_PATHS: Dict[str, str] = {
    "cuda": CUDA_REDIST_PATH,
    "cudnn": CUDNN_REDIST_PATH,
    "nccl": NCCL_REDIST_PATH,
    "cuda_runfile": CUDA_RUNFILE_PATH,
}

# uname -m -> NVIDIA's redist platform name. Server ARM is "sbsa"; "linux-aarch64" is Jetson.
PLATFORMS: Dict[str, str] = {
    "x86_64": "linux-x86_64",
    "amd64": "linux-x86_64",
    "aarch64": "linux-sbsa",
    "arm64": "linux-sbsa",
    "ppc64le": "linux-ppc64le",
}

_SHA256_RE = re.compile(r"^[0-9a-f]{64}$")


class RedistError(ValueError):
    """A manifest or a request that cannot be satisfied; the message says what to change."""


def is_sha256(value: Optional[str]) -> bool:
    return bool(value) and bool(_SHA256_RE.match(str(value)))


def sha256_file(path: str, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(chunk), b""):
            digest.update(block)
    return digest.hexdigest()


def platform_for(arch: str) -> str:
    """NVIDIA's platform key for a machine architecture ('x86_64' -> 'linux-x86_64')."""
    try:
        return PLATFORMS[str(arch).lower()]
    except KeyError:
        raise RedistError(
            "no NVIDIA redist platform for architecture %r; supported: %s"
            % (arch, ", ".join(sorted(PLATFORMS)))
        ) from None


def base_url(mirror_url: Optional[str] = None) -> str:
    """The download base: a mirror that copies NVIDIA's path layout, or NVIDIA itself."""
    return (mirror_url or NVIDIA_BASE_URL).rstrip("/")


def join_url(*parts: str) -> str:
    return "/".join(str(p).strip("/") for p in parts if str(p).strip("/"))


def redist_path(kind: str) -> str:
    """NVIDIA's directory for ``kind`` (cuda, cudnn, nccl, cuda_runfile): 'compute/cuda/redist'."""
    try:
        return REDIST_PATHS[str(kind)]
    except KeyError:
        raise RedistError("no NVIDIA download directory for %r; kinds: %s"
                          % (kind, ", ".join(sorted(REDIST_PATHS)))) from None


def redist_url(mirror_url: Optional[str], kind: str) -> str:
    """Where ``kind`` is downloaded from: the mirror (or NVIDIA) plus NVIDIA's directory."""
    return join_url(base_url(mirror_url), redist_path(kind))


def manifest_name(version: str) -> str:
    """redistrib_11.7.1.json (CUDA) / redistrib_9.1.0.json (cuDNN)."""
    if not str(version or "").strip():
        raise RedistError("a redist manifest needs a release version, found %r" % (version,))
    return "redistrib_%s.json" % str(version).strip()


def runfile_relpath(version: str, runfile: str) -> str:
    """11.7.1/local_installers/cuda_11.7.1_515.65.01_linux.run (under compute/cuda/)."""
    if not str(version or "").strip() or not str(runfile or "").strip() or "/" in str(runfile):
        raise RedistError("a CUDA runfile needs a version and a file name, found %r and %r" % (version, runfile))
    return "%s/local_installers/%s" % (str(version).strip(), str(runfile).strip())


def load_manifest(source: Union[str, bytes, Mapping[str, Any]]) -> Dict[str, Any]:
    """Parse manifest text (or accept an already parsed dict) and check its shape."""
    if isinstance(source, (str, bytes)):
        try:
            data = json.loads(source)
        except ValueError as exc:
            raise RedistError("the redist manifest is not valid JSON: %s" % exc) from None
    else:
        data = dict(source)
    if not isinstance(data, dict) or not components(data):
        raise RedistError("the redist manifest lists no components (expected redistrib_<ver>.json)")
    return data


def components(manifest: Mapping[str, Any]) -> List[str]:
    """Component keys of a manifest, sorted; top-level strings are metadata."""
    return sorted(k for k, v in manifest.items() if isinstance(v, dict) and "version" in v)


def _entry(manifest: Mapping[str, Any], component: str, platform: str,
           cuda_variant: Optional[str]) -> Dict[str, Any]:
    if component not in manifest or not isinstance(manifest[component], dict):
        raise RedistError(
            "component %r is not in the manifest; it lists: %s"
            % (component, ", ".join(components(manifest)))
        )
    comp = manifest[component]
    if platform not in comp:
        offered = sorted(k for k, v in comp.items() if isinstance(v, dict))
        raise RedistError(
            "component %r has no %s archive; platforms: %s" % (component, platform, ", ".join(offered))
        )
    entry = comp[platform]
    if "relative_path" not in entry:
        # cuDNN-style manifests nest one level deeper, by CUDA variant ("cuda11").
        if not cuda_variant:
            raise RedistError(
                "component %r is split by CUDA variant (%s); say which one"
                % (component, ", ".join(sorted(entry)))
            )
        key = cuda_variant if str(cuda_variant).startswith("cuda") else "cuda%s" % cuda_variant
        if key not in entry:
            raise RedistError(
                "component %r has no %s build for %s; builds: %s"
                % (component, key, platform, ", ".join(sorted(entry)))
            )
        entry = entry[key]
    if not is_sha256(entry.get("sha256")):
        raise RedistError("component %r (%s) carries no valid sha256 in the manifest" % (component, platform))
    return entry


def manifest_problems(manifest: Mapping[str, Any], wanted: Iterable[str], platform: str,
                      cuda_variant: Optional[str] = None) -> List[str]:
    """Why the manifest cannot give each of ``wanted`` for ``platform`` (empty when it can)."""
    wanted = list(wanted)
    if not wanted:
        return ["no redist components requested"]
    problems = []
    for name in wanted:
        try:
            _entry(manifest, name, platform, cuda_variant)
        except RedistError as exc:
            problems.append(str(exc))
    return problems


def archives(manifest: Mapping[str, Any], wanted: Iterable[str], platform: str,
             cuda_variant: Optional[str] = None) -> List[Dict[str, Any]]:
    """The archives for ``wanted``, in the order asked, as the roles fetch them.

    Each item: name, version, relative_path (under the kind's directory), sha256, size (int or
    None). Every missing component is reported at once, so one run tells the whole story.
    """
    problems = manifest_problems(manifest, wanted, platform, cuda_variant)
    if problems:
        raise RedistError("; ".join(problems))
    out: List[Dict[str, Any]] = []
    for name in wanted:
        entry = _entry(manifest, name, platform, cuda_variant)
        size = entry.get("size")
        out.append({
            "name": name,
            "version": str(manifest[name]["version"]),
            "relative_path": entry["relative_path"],
            "sha256": entry["sha256"],
            "size": int(size) if size not in (None, "") else None,
        })
    return out


def manifest_entry(relative_path: str, path: str) -> Dict[str, str]:
    """One platform object as NVIDIA writes it (sizes are strings), for the file at ``path``."""
    sha, md5, size = hashlib.sha256(), _md5(), 0
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            sha.update(block)
            md5.update(block)
            size += len(block)
    return {"relative_path": relative_path, "sha256": sha.hexdigest(), "md5": md5.hexdigest(), "size": str(size)}


def _md5() -> Any:
    """md5 is one of NVIDIA's manifest fields, never a check; FIPS builds need the flag."""
    try:
        return hashlib.md5(usedforsecurity=False)  # type: ignore[call-arg]
    except TypeError:  # Python < 3.9
        return hashlib.md5()  # nosec B324


def cuda_archive_relpath(component: str, version: str, platform: str = "linux-x86_64") -> str:
    """cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-11.7.99-archive.tar.xz"""
    return "%s/%s/%s-%s-%s-archive.tar.xz" % (component, platform, component, platform, version)


def cudnn_archive_relpath(version: str, cuda_major: Union[int, str], platform: str = "linux-x86_64") -> str:
    """cudnn/linux-x86_64/cudnn-linux-x86_64-8.6.0.163_cuda11-archive.tar.xz"""
    return "cudnn/%s/cudnn-%s-%s_cuda%s-archive.tar.xz" % (platform, platform, version, cuda_major)


def nccl_archive_name(version: str, cuda_build: str, arch: str = "x86_64") -> str:
    """nccl_2.16.5-1+cuda11.8_x86_64.txz; ``version`` carries NVIDIA's package revision."""
    if "-" not in version:
        raise RedistError("NCCL version %r lacks the package revision (e.g. 2.16.5-1)" % version)
    return "nccl_%s+cuda%s_%s.txz" % (version, cuda_build, arch)


def nccl_relpath(version: str, cuda_build: str, arch: str = "x86_64") -> str:
    """v2.16.5/nccl_2.16.5-1+cuda11.8_x86_64.txz (under compute/redist/nccl/)."""
    return "v%s/%s" % (version.split("-", 1)[0], nccl_archive_name(version, cuda_build, arch))


def marker(version: str, method: str, artifacts: Iterable[Mapping[str, Any]]) -> Dict[str, Any]:
    """What a role records next to an install: enough to know a re-run has nothing to do."""
    return {
        "version": version,
        "method": method,
        "components": {a["name"]: {"version": a.get("version"), "sha256": a["sha256"]} for a in artifacts},
    }


# --------------------------------------------------------------------------------------------
# A cuDNN or NCCL installed by someone else (the roles' adoption, nvidia_artifacts tasks/adopt.yml)
# --------------------------------------------------------------------------------------------
HEADER_PARSERS = {"cudnn": parse_cudnn_header, "nccl": parse_nccl_header}


def installed_match(header_results: Sequence[Mapping[str, Any]], library_results: Sequence[Mapping[str, Any]],
                    kind: str, want: str) -> Dict[str, Any]:
    """Whether a node already has cuDNN or NCCL ``want``, installed by someone else.

    ``header_results`` are the slurp results and ``library_results`` the stat results of one
    loop over the same candidates ({header, library} dicts, in order of preference). The first
    candidate whose header states ``want`` (at the header's precision: '9.14.0' for
    '9.14.0.64', '2.28.3' for '2.28.3-1') and whose library exists is returned as
    {matched: True, header, library, version}; otherwise {matched: False}. ``found`` lists
    every header read, with its version and whether its library exists, for the role's report.
    """
    if kind not in HEADER_PARSERS:
        raise ValueError("installed_match: kind must be one of %s, found %r" % (", ".join(sorted(HEADER_PARSERS)), kind))
    if not want:
        raise ValueError("installed_match: expected the wanted version, found %r" % (want,))
    libraries = {}
    for result in library_results or []:
        item = result.get("item") or {}
        libraries[item.get("library")] = bool((result.get("stat") or {}).get("exists"))
    found = []
    match: Dict[str, Any] = {"matched": False}
    for result in header_results or []:
        item = result.get("item") or {}
        content = result.get("content")
        if not content:
            continue
        try:
            text = base64.b64decode(content).decode("utf-8", "replace")
        except (ValueError, TypeError):
            continue
        version = HEADER_PARSERS[kind](text)
        if not version:
            continue
        library = item.get("library")
        exists = libraries.get(library, False)
        found.append({"header": item.get("header"), "version": version, "library": library, "library_exists": exists})
        if not match["matched"] and exists and prefix_match(want, version):
            match = {"matched": True, "header": item.get("header"), "library": library, "version": version}
    match["found"] = found
    return match
