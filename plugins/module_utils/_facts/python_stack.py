# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The training venv's python, torch, DeepSpeed and apex for gpu_stack_facts.

Runs on the managed node: standard library only, Python 3.8+. Two ways to read the stack: from
the venv's files alone (``python_probe=files``, the default, no process) or by importing the
packages in the venv's python (``python_probe=import``, :data:`PROBE_SCRIPT`). Either way the
installed files of every distribution in the venv are checked against pip's RECORD (_integrity),
and the venv's full ``name -> version`` set is reported for the cross-node comparison.
Like every collector, nothing here raises or changes the node.
"""
from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Optional, Tuple

from . import integrity as _integrity
from . import site_code as _site_code
from .host import Host, _first_line
from .parsers import (
    _version_key,
    cudnn_version_from_int,
    library_version,
    nccl_version_from_torch,
    parse_cudnn_header,
    parse_nccl_header,
)


# Runs inside the training venv's python. One process for torch, DeepSpeed and apex: importing
# torch dominates the cost. Anything the imports print goes to stderr (fd 1 is redirected), so
# stdout carries only the JSON. Python 3.6+ syntax: old stacks run old interpreters.
PROBE_SCRIPT = r'''
import json, os, sys
out = os.fdopen(os.dup(1), "w")
os.dup2(2, 1)

def err(exc):
    return "%s: %s" % (type(exc).__name__, exc)

def dist_version(name):
    try:
        from importlib.metadata import version
        return version(name)
    except Exception:
        return None

r = {"python": {"version": "%d.%d.%d" % tuple(sys.version_info[:3]), "executable": sys.executable}}
t = {"version": dist_version("torch"), "cuda": None, "cudnn": None, "nccl": None, "error": None}
try:
    import torch
    t["version"] = str(torch.__version__)
    t["cuda"] = torch.version.cuda
    try:
        t["cudnn"] = torch.backends.cudnn.version()
    except Exception:
        pass
    if t["cuda"]:
        try:
            v = torch.cuda.nccl.version()
            t["nccl"] = list(v) if isinstance(v, tuple) else v
        except Exception:
            pass
except BaseException as exc:
    t["error"] = err(exc)
r["torch"] = t

d = {"version": dist_version("deepspeed"), "error": None}
try:
    import deepspeed
    d["version"] = str(getattr(deepspeed, "__version__", d["version"]))
except BaseException as exc:
    d["error"] = err(exc)
r["deepspeed"] = d

a = {"present": False, "cuda_ext": False, "error": None}
try:
    import importlib, importlib.util
    apex = importlib.import_module("apex")
    if importlib.util.find_spec("apex.normalization") is None and importlib.util.find_spec("apex.optimizers") is None:
        a["error"] = "the importable apex (%s) is not NVIDIA apex" % getattr(apex, "__file__", "?")
    else:
        a["present"] = True
        missing = []
        for name in ("amp_C", "fused_layer_norm_cuda"):
            try:
                importlib.import_module(name)
            except BaseException as exc:
                missing.append("%s (%s)" % (name, err(exc)))
        a["cuda_ext"] = not missing
        if missing:
            a["error"] = "apex CUDA extensions not importable: " + "; ".join(missing)
except BaseException as exc:
    a["error"] = err(exc)
r["apex"] = a

out.write(json.dumps(r, default=str))
out.flush()
'''


def _empty_python_stack(reason: Optional[str], source: Optional[str] = None) -> Dict[str, Any]:
    return {
        "python": {"version": None, "executable": None, "source": None},
        "torch": {"version": None, "cuda": None, "cudnn": None, "nccl": None, "error": reason, "source": source},
        "deepspeed": {"version": None, "error": reason, "source": source},
        "apex": {"present": False, "cuda_ext": False, "error": reason, "source": source},
    }


def parse_probe_output(stdout: str) -> Dict[str, Any]:
    """The probe's JSON -> python/torch/deepspeed/apex sections, with every version a string."""
    data = json.loads(stdout.strip().splitlines()[-1])
    facts = _empty_python_stack(None, "import")
    python = data.get("python") or {}
    facts["python"]["version"] = _str_or_none(python.get("version"))
    facts["python"]["source"] = "import"
    torch = data.get("torch") or {}
    facts["torch"].update(
        version=_str_or_none(torch.get("version")),
        cuda=_str_or_none(torch.get("cuda")),
        cudnn=cudnn_version_from_int(torch.get("cudnn")),
        nccl=nccl_version_from_torch(torch.get("nccl")),
        error=_str_or_none(torch.get("error")),
    )
    deepspeed = data.get("deepspeed") or {}
    facts["deepspeed"].update(version=_str_or_none(deepspeed.get("version")),
                              error=_str_or_none(deepspeed.get("error")))
    apex = data.get("apex") or {}
    facts["apex"].update(present=bool(apex.get("present")), cuda_ext=bool(apex.get("cuda_ext")),
                         error=_str_or_none(apex.get("error")))
    return facts


def _str_or_none(value: Any) -> Optional[str]:
    return None if value is None else str(value)


def collect_python_stack(host: Host, venv: Optional[str], errors: List[str], probe: str = "files") -> Dict[str, Any]:
    """python/torch/deepspeed/apex of ``venv``: from its files (``probe='files'``, no process) or
    by importing them in the venv's python (``probe='import'``, seconds of CPU). Each of torch,
    deepspeed and apex carries ``files``, its installed files against pip's RECORD (empty when
    there is nothing to check), and ``packages`` covers every other distribution of the venv."""
    stack = _read_python_stack(host, venv, errors, probe)
    for name in CHECKED_DISTRIBUTIONS:
        stack[name].setdefault("files", _integrity.empty())
    stack.setdefault("packages", empty_packages())
    return stack


def _read_python_stack(host: Host, venv: Optional[str], errors: List[str], probe: str) -> Dict[str, Any]:
    if not venv:
        return _empty_python_stack("no venv given")
    python = next((venv.rstrip("/") + "/bin/" + n for n in ("python", "python3")
                   if host.is_executable(venv.rstrip("/") + "/bin/" + n)), None)
    if python is None:
        reason = "no python in venv %s (looked for bin/python, bin/python3)" % venv
        errors.append("python: " + reason)
        return _empty_python_stack(reason, probe)
    if probe == "files":
        return read_python_stack_files(host, venv, python)
    if probe != "import":
        raise ValueError("python_probe is %r; expected one of %s" % (probe, ", ".join(PYTHON_PROBES)))
    # -I: the venv's own packages only; PYTHONPATH, user site and the current directory of the
    # Ansible run would otherwise change what imports.
    argv = [python, "-I", "-c", PROBE_SCRIPT]
    result = host.run(argv)
    if result[0] != 0:
        reason = "%s -I -c <probe>: exit %s: %s" % (python, result[0], _first_line(result[2][-2000:]) or "no output")
        errors.append("python: " + reason)
        return _empty_python_stack(reason, probe)
    try:
        facts = parse_probe_output(result[1])
    except (ValueError, IndexError, AttributeError) as exc:
        reason = "probe output is not JSON: %s" % exc
        errors.append("python: " + reason)
        return _empty_python_stack(reason, probe)
    facts["python"]["executable"] = python
    version = facts["python"]["version"] or ""
    add_installed_files(_Venv(host, venv, ".".join(version.split(".")[:2]) or None), facts)
    return facts


# --------------------------------------------------------------------------- the venv, from files
# The default way to read the training stack (python_probe=files): no process at all. The import
# probe costs seconds of CPU per node (importing torch); these are a few stat() and small reads.
PYTHON_PROBES = ("files", "import")

_METADATA_VERSION_RE = re.compile(r"^Version:\s*(\S+)\s*$", re.M)
_DIST_DIR_RE = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*?)-(?P<version>[^-/]+?)\.(?P<kind>dist|egg)-info$")
_PYVENV_VERSION_RE = re.compile(r"^\s*(?:version|version_info)\s*=\s*(\d+\.\d+(?:\.\d+)?)", re.M)
_LIB_PYTHON_RE = re.compile(r"^(?:python|pypy)(\d+\.\d+)$")


def _dist_key(name: str) -> str:
    """PEP 503 normalisation, with '_' (what wheel dist-info directory names use)."""
    return re.sub(r"[-_.]+", "_", name).lower()


def parse_pyvenv_cfg(text: Optional[str]) -> Optional[str]:
    """``version = 3.11.2`` (venv) or ``version_info = 3.11.2.final.0`` (virtualenv, uv) -> '3.11.2'."""
    match = _PYVENV_VERSION_RE.search(text or "")
    return match.group(1) if match else None


def parse_metadata_version(text: Optional[str]) -> Optional[str]:
    """``Version:`` of a METADATA / PKG-INFO header (the body after the first blank line is ignored)."""
    header = re.split(r"\n\s*\n", text or "", maxsplit=1)[0]
    match = _METADATA_VERSION_RE.search(header)
    return match.group(1) if match else None


def _assigned_string(text: Optional[str], name: str) -> Tuple[bool, Optional[str]]:
    """``name = 'x'`` / ``name: Optional[str] = 'x'`` / ``name = None`` in a generated module.

    (found, value): torch 1.13 writes ``cuda = '11.7'``, torch 2.x ``cuda: Optional[str] = '12.1'``,
    CPU builds ``None``; DeepSpeed's git_version_info_installed.py ``version='0.9.2'``.
    """
    match = re.search(r"^%s\s*(?::[^=\n]*)?=\s*(?:'([^'\n]*)'|\"([^\"\n]*)\"|(None))\s*$" % re.escape(name),
                      text or "", re.M)
    if not match:
        return False, None
    if match.group(3):
        return True, None
    return True, match.group(1) if match.group(1) is not None else match.group(2)


def parse_torch_version_py(text: Optional[str]) -> Dict[str, Any]:
    """torch/version.py -> {'version': '2.1.0+cu121', 'cuda': '12.1' or None, 'readable': bool}."""
    has_version, version = _assigned_string(text, "__version__")
    _has_cuda, cuda = _assigned_string(text, "cuda")
    return {"version": version or None, "cuda": cuda or None, "readable": has_version and bool(version)}


def _first3(version: Optional[str]) -> Optional[str]:
    """'8.5.0.96' -> '8.5.0' (the form torch reports, see cudnn_version_from_int); '2.21.5' stays."""
    numbers = re.findall(r"\d+", (version or "").split("+", 1)[0])
    return ".".join(str(int(n)) for n in numbers[:3]) if len(numbers) >= 3 else None


class _Venv:
    """The site-packages directories of one venv and the distributions installed in them."""

    def __init__(self, host: Host, venv: str, python_mm: Optional[str]) -> None:
        self.host = host
        self.venv = venv.rstrip("/")
        self.sites: List[str] = []
        seen = set()
        for lib in ("lib", "lib64"):
            names = [n for n in host.listdir("%s/%s" % (self.venv, lib)) if _LIB_PYTHON_RE.match(n)]
            # The interpreter's own series first, should an old venv leave another one behind.
            names.sort(key=lambda n: (_LIB_PYTHON_RE.match(n).group(1) != python_mm, n))  # type: ignore[union-attr]
            for name in names:
                site = "%s/%s/%s/site-packages" % (self.venv, lib, name)
                real = host.path(site)
                if real not in seen and host.isdir(site):
                    seen.add(real)
                    self.sites.append(site)
        self.dists: Dict[str, List[Tuple[str, str]]] = {}  # key -> [(metadata dir, version)]
        for site in self.sites:
            for entry in host.listdir(site):
                match = _DIST_DIR_RE.match(entry)
                if not match:
                    continue
                path = site + "/" + entry
                meta = path + ("/METADATA" if match.group("kind") == "dist" else "/PKG-INFO")
                if match.group("kind") == "egg" and host.isfile(path):
                    meta = path  # an egg-info file, not a directory
                version = parse_metadata_version(self.host.read_text(meta, limit=64 * 1024)) or match.group("version")
                self.dists.setdefault(_dist_key(match.group("name")), []).append((path, version))

    def lib_series(self) -> Optional[str]:
        """'3.11' from lib/python3.11 (the fallback when pyvenv.cfg has no version)."""
        for site in self.sites:
            match = _LIB_PYTHON_RE.match(site.split("/")[-2])
            if match:
                return match.group(1)
        return None

    def find(self, relative: str) -> Optional[str]:
        """The node path of ``relative`` in the first site-packages that has it."""
        for site in self.sites:
            if self.host.exists(site + "/" + relative):
                return site + "/" + relative
        return None

    def dist(self, name: str) -> Tuple[Optional[str], Optional[str], List[str]]:
        """(version, metadata dir, every version found) of distribution ``name``."""
        found = self.dists.get(_dist_key(name)) or []
        if not found:
            return None, None, []
        return found[0][1], found[0][0], [version for _path, version in found]

    def editable_source(self, meta_dir: Optional[str]) -> Optional[str]:
        """Where an editable install (pip install -e) keeps its code: direct_url.json's file:// URL."""
        if not meta_dir:
            return None
        try:
            data = json.loads(self.host.read_text(meta_dir + "/direct_url.json") or "")
        except ValueError:
            return None
        url = str(data.get("url") or "") if isinstance(data, dict) else ""
        editable = isinstance(data, dict) and isinstance(data.get("dir_info"), dict) and data["dir_info"].get("editable")
        if editable and url.startswith("file://"):
            return url[len("file://"):].rstrip("/") or "/"
        return None

    def package_file(self, meta_dir: Optional[str], relative: str) -> Optional[str]:
        """``relative`` (e.g. 'torch/version.py') in site-packages, else in the editable source tree."""
        found = self.find(relative)
        if found:
            return found
        source = self.editable_source(meta_dir)
        if source and self.host.exists(source + "/" + relative):
            return source + "/" + relative
        return None


def _public(version: str) -> str:
    return version.split("+", 1)[0].strip().lower()


def _consistency_error(name: str, venv: str, versions: List[str], package: Optional[str], relative: str,
                       pkg_version: Optional[str]) -> Optional[str]:
    """Why what pip recorded and what Python would import disagree, or None."""
    if len(versions) > 1:
        return ("%s has %d distributions in %s (%s): an interrupted upgrade; import would mix them"
                % (name, len(versions), venv, ", ".join(versions)))
    if versions and package is None:
        return ("%s's dist-info says %s but site-packages/%s is missing: a half-removed install"
                % (name, versions[0], relative))
    if not versions and package is not None:
        return ("%s has a package (%s) but no dist-info: installed outside pip, or a half-removed install"
                % (name, package))
    # PyPI's torch wheels drop the local label from the metadata only (METADATA 2.1.2,
    # torch.__version__ 2.1.2+cu121): compare the public versions.
    if versions and pkg_version and _public(pkg_version) != _public(versions[0]):
        return ("%s's dist-info says %s but %s says %s: a mixed install" % (name, versions[0], package, pkg_version))
    return None


def _nvidia_dist_version(venv: _Venv, component: str, cuda_major: Optional[str]) -> Optional[str]:
    """Version of nvidia-<component>-cu<N> (the wheel torch loads its cuDNN/NCCL from), the one
    for torch's CUDA major first."""
    pattern = re.compile(r"^nvidia_%s_cu(\d+)$" % component)
    found = []
    for key, dists in venv.dists.items():
        match = pattern.match(key)
        if match:
            found.append((match.group(1) == cuda_major, dists[0][1]))
    if not found:
        return None
    found.sort(key=lambda item: (item[0], _version_key(item[1])), reverse=True)
    return found[0][1]


def _torch_lib_version(venv: _Venv, stem: str) -> Optional[str]:
    """A library torch bundles in torch/lib with a full version in its name (libcudnn.so.8.x.y)."""
    lib = venv.find("torch/lib")
    versions = [library_version(n, stem) for n in venv.host.listdir(lib)] if lib else []
    versions = [v for v in versions if v and len(v.split(".")) >= 3]
    return max(versions, key=_version_key) if versions else None


def read_torch_files(venv: _Venv) -> Dict[str, Any]:
    facts: Dict[str, Any] = {"version": None, "cuda": None, "cudnn": None, "nccl": None, "error": None,
                             "source": "files"}
    dist_version, meta_dir, versions = venv.dist("torch")
    version_py = venv.package_file(meta_dir, "torch/version.py")
    parsed = parse_torch_version_py(venv.host.read_text(version_py)) if version_py else None
    if version_py and parsed and not parsed["readable"]:
        facts["error"] = "%s does not assign __version__: a damaged install" % version_py
    facts["version"] = (parsed or {}).get("version") or dist_version
    if facts["version"] is None:
        facts["error"] = facts["error"] or "torch is not installed in %s" % venv.venv
        return facts
    facts["error"] = facts["error"] or _consistency_error(
        "torch", venv.venv, versions, version_py, "torch/version.py", (parsed or {}).get("version"))
    facts["cuda"] = (parsed or {}).get("cuda")
    if facts["cuda"]:
        cuda_major = facts["cuda"].split(".", 1)[0]
        # pip wheels of torch >= 1.13 load cuDNN and NCCL from NVIDIA's own wheels; a torch that
        # bundles them in torch/lib rarely names the full version there (then null: see the docs).
        cudnn = _nvidia_dist_version(venv, "cudnn", cuda_major)
        if cudnn is None:
            header = venv.find("nvidia/cudnn/include/cudnn_version.h")
            cudnn = parse_cudnn_header(venv.host.read_text(header)) if header else None
        facts["cudnn"] = _first3(cudnn or _torch_lib_version(venv, "libcudnn.so"))
        nccl = _nvidia_dist_version(venv, "nccl", cuda_major)
        if nccl is None:
            header = venv.find("nvidia/nccl/include/nccl.h")
            nccl = parse_nccl_header(venv.host.read_text(header)) if header else None
        facts["nccl"] = _first3(nccl or _torch_lib_version(venv, "libnccl.so"))
    return facts


def read_deepspeed_files(venv: _Venv) -> Dict[str, Any]:
    facts: Dict[str, Any] = {"version": None, "error": None, "source": "files"}
    dist_version, meta_dir, versions = venv.dist("deepspeed")
    init = venv.package_file(meta_dir, "deepspeed/__init__.py")
    pkg_version = None
    if init:
        info = venv.host.read_text(init.rsplit("/", 1)[0] + "/git_version_info_installed.py")
        pkg_version = _assigned_string(info, "version")[1]
    facts["version"] = dist_version or pkg_version
    if facts["version"] is None and init is None:
        facts["error"] = "deepspeed is not installed in %s" % venv.venv
        return facts
    facts["error"] = _consistency_error("deepspeed", venv.venv, versions, init, "deepspeed/__init__.py", pkg_version)
    return facts


_APEX_EXTENSIONS = ("amp_C", "fused_layer_norm_cuda")


def read_apex_files(venv: _Venv) -> Dict[str, Any]:
    facts: Dict[str, Any] = {"present": False, "cuda_ext": False, "error": None, "source": "files"}
    # `python setup.py install` (older apex instructions) leaves an egg directory in site-packages.
    roots = list(venv.sites)
    for site in venv.sites:
        roots += [site + "/" + n for n in venv.host.listdir(site) if n.endswith(".egg") and venv.host.isdir(site + "/" + n)]
    apex = next((r + "/apex" for r in roots if venv.host.isdir(r + "/apex")), None)
    if apex is None:
        facts["error"] = "apex is not installed in %s" % venv.venv
        return facts
    if not (venv.host.isdir(apex + "/normalization") or venv.host.isdir(apex + "/optimizers")):
        facts["error"] = "%s is not NVIDIA apex (no apex/normalization, no apex/optimizers)" % apex
        return facts
    facts["present"] = True
    names = [n for r in roots for n in venv.host.listdir(r)]
    missing = [e for e in _APEX_EXTENSIONS if not any(re.match(re.escape(e) + r"(\..*)?\.so$", n) for n in names)]
    facts["cuda_ext"] = not missing
    if missing:
        facts["error"] = "apex CUDA extensions not built: no %s in site-packages" % ", ".join(e + "*.so" for e in missing)
    return facts


def read_python_stack_files(host: Host, venv: str, python: str) -> Dict[str, Any]:
    """The python/torch/deepspeed/apex sections from the venv's files alone (no process)."""
    venv = venv.rstrip("/")
    facts = _empty_python_stack(None)
    version = parse_pyvenv_cfg(host.read_text(venv + "/pyvenv.cfg"))
    source = "pyvenv.cfg" if version else None
    stack = _Venv(host, venv, ".".join(version.split(".")[:2]) if version else None)
    if version is None:
        version = stack.lib_series()
        source = "lib directory" if version else None
    facts["python"].update(version=version, executable=python, source=source)
    if not stack.sites:
        reason = "no site-packages in %s (looked for lib/python3*/site-packages, lib64)" % venv
        facts["torch"].update(error=reason, source="files")
        facts["deepspeed"].update(error=reason, source="files")
        facts["apex"].update(error=reason, source="files")
        return facts
    facts["torch"] = read_torch_files(stack)
    facts["deepspeed"] = read_deepspeed_files(stack)
    facts["apex"] = read_apex_files(stack)
    add_installed_files(stack, facts)
    return facts


# The training stack's distributions: each keeps its own ``files`` in its section (its own
# preflight row and fix); every other distribution of the venv is reported under ``packages``.
CHECKED_DISTRIBUTIONS = ("torch", "deepspeed", "apex")


def empty_packages(error: Optional[str] = None) -> Dict[str, Any]:
    return {"installed": {}, "files": _integrity.empty(error=error), "unowned": None, "pins": None}


# The constraints file python_env writes into the venv and passes to every pip call
# (roles/python_env/vars/main.yml, __python_env_constraints): the versions the role installed.
PINS_FILE = "megatron-ds/constraints.txt"
_PIN_RE = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(?P<version>[^\s;#,]+)\s*(?:#.*)?$")


def parse_pins(text: Optional[str]) -> Dict[str, str]:
    """Normalized name -> version of every ``name==version`` line of a pip constraints file. Lines
    that bound a version without fixing it (``numpy<2``), carry markers or extras, or repeat a name
    with another version pin nothing: only an exact pin says which version must be installed."""
    pins: Dict[str, str] = {}
    conflicting = set()
    for line in (text or "").splitlines():
        match = _PIN_RE.match(line)
        if not match:
            continue
        key, version = _dist_key(match.group("name")), match.group("version")
        if pins.get(key, version) != version:
            conflicting.add(key)
        pins[key] = version
    return dict((key, version) for key, version in pins.items() if key not in conflicting)


def read_pins(venv: "_Venv") -> Optional[Dict[str, Any]]:
    """``{"source": path, "pins": {name: version}}`` from python_env's constraints file in the venv;
    None where there is none (a venv the collection did not make)."""
    path = "%s/%s" % (venv.venv, PINS_FILE)
    text = venv.host.read_text(path, limit=256 * 1024)
    if text is None:
        return None
    return {"source": path, "pins": parse_pins(text)}


def add_installed_files(venv: "_Venv", facts: Dict[str, Any]) -> None:
    """The whole venv against pip's RECORDs (sizes, and the sha256 of files written after the
    install; see _integrity), sharing one hashing budget; no process.

    * ``files`` of the torch, deepspeed and apex sections: their own distribution;
    * ``packages``: ``installed`` (every distribution's normalized name -> version, the set the
      preflight compares across nodes; a name installed twice gives both versions, comma
      separated) and ``files``, every other distribution's check in one, each problem prefixed
      with ``name version:``; ``unowned``, the code in site-packages that no distribution's
      record owns (_site_code), from the RECORDs read here; ``pins``, the exact pins of
      python_env's constraints file in the venv (:func:`read_pins`), or None.
    """
    budget = [_integrity.HASH_BUDGET]
    installed: Dict[str, str] = {}
    others = _integrity.empty("every pip RECORD of the venv but torch, deepspeed and apex")
    others.update(hashed=0, unhashed=0, distributions=0, bad_distributions=[])
    own = dict((_dist_key(name), name) for name in CHECKED_DISTRIBUTIONS)
    owned: Dict[str, set] = {}
    for key in sorted(venv.dists):
        found = venv.dists[key]
        versions = sorted(set(version for _path, version in found))
        installed[key] = ",".join(versions)
        meta_dir, version = found[0]
        paths: List[str] = []
        result = _integrity.check_record(venv.host.read_bytes, venv.host.path, meta_dir, budget, paths)
        site, meta_name = meta_dir.rsplit("/", 1)
        owned.setdefault(site, set()).update(_site_code.record_top_level(paths) | {meta_name})
        for other_meta, _other_version in found[1:]:
            # A second install of one name (an interrupted upgrade) owns its files too.
            other_site, other_name = other_meta.rsplit("/", 1)
            text = (venv.host.read_text(other_meta + "/RECORD") or "") if other_name.endswith(".dist-info") else ""
            owned.setdefault(other_site, set()).update(
                _site_code.record_top_level(p for p, _size in _integrity.parse_record(text)) | {other_name})
        if key in own:
            facts[own[key]]["files"] = result
            continue
        if result["source"] is None and result["error"] is None:
            continue  # an .egg-info: nothing recorded to compare
        others["distributions"] += 1
        for count in ("checked", "hashed", "unhashed"):
            others[count] += result.get(count) or 0
        if result["error"] and not others["error"]:
            others["error"] = "%s %s: %s" % (key, version, result["error"])
        others["bad_count"] += result["bad_count"]
        if result["bad_count"]:
            others["bad_distributions"].append("%s==%s" % (key, version))
        for line in result["bad"]:
            if len(others["bad"]) < _integrity.SHOWN:
                others["bad"].append("%s %s: %s" % (key, version, line))
    for name in CHECKED_DISTRIBUTIONS:
        facts[name].setdefault("files", _integrity.empty())
    facts["packages"] = {"installed": installed, "files": others,
                         "unowned": _site_code.unowned_code(venv.host, venv.sites, owned),
                         "pins": read_pins(venv)}
