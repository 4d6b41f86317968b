# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fill a host-side wheelhouse once, for the python_env role's offline installs.

Molecule (molecule/python_env), the simulated cluster and air-gapped sites give this directory
to the role as ``python_env_wheelhouse``; the nodes then install with ``pip --no-index
--find-links`` and nothing is downloaded per container.

What goes in is exactly what the role installs for a stack profile, read from the same data:
the profile (plugins/module_utils/_stack/profiles.py) and the role's pins
(roles/python_env/vars/main.yml). Wheels are fetched for CPython ``--python`` on linux x86_64
(``pip download --only-binary=:all: --platform ...``), so the host's own Python does not
matter; DeepSpeed is an sdist and goes in as one (the role builds it on the node against the
venv's torch), with its requirements as wheels.

torch comes from pip's own configuration plus ``--torch-index-url``. For a CPU profile the
requirement carries the ``+cpu`` local label, so a CUDA torch from PyPI (several GB of NVIDIA
wheels) is never taken by mistake.

For a CPU profile, when this interpreter is the nodes' CPython and has the profile's torch, the
sdist is also built once here into a wheel with DeepSpeed's shared-memory all-reduce op compiled
ahead of time (``DS_BUILD_SHM_COMM=1``, DeepSpeed's own switch). Otherwise every fresh node
JIT-compiles that op at its first launch (``deepspeed/comm/torch.py`` ``build_shm_op``): about
90 s on three simulated nodes sharing two cores, per scenario. pip on the nodes prefers the wheel.

A stamp file records what was fetched; a second run with the same request does nothing.

    python tests/wheelhouse/fill.py --profile cpu --python 3.11        # molecule's wheelhouse
    python tests/wheelhouse/fill.py --profile cu117 --python 3.11      # ~2.4 GB (torch 1.13.1 + NVIDIA wheels)
    python tests/wheelhouse/fill.py --profile cpu-pypi --python 3.11   # ~2.8 GB (the demo's real trainer)
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any, Dict, List, Optional

REPO = Path(__file__).resolve().parents[2]
PROFILES_PY = REPO / "plugins" / "module_utils" / "_stack" / "profiles.py"
ROLE_VARS = REPO / "roles" / "python_env" / "vars" / "main.yml"
STAMP = ".fill-stamp.json"
# Debian 12 has glibc 2.36; Ubuntu 20.04 2.31. Wheels for any manylinux up to the node's glibc run.
GLIBC_MAX = 31
PLATFORMS = (
    ["manylinux_2_%d_x86_64" % minor for minor in range(GLIBC_MAX, 16, -1)]
    + ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]
)


def load_profile(name: str) -> Dict[str, Any]:
    spec = importlib.util.spec_from_file_location("_stack_profiles", PROFILES_PY)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get(name)


def load_role_vars() -> Dict[str, Any]:
    import yaml  # PyYAML comes with ansible-core in the project's .venv

    return yaml.safe_load(ROLE_VARS.read_text(encoding="utf-8"))


def era_of(profile: Dict[str, Any]) -> str:
    """The role's default python_env_megatron_era: the profile's (_stack_profiles.mds_era)."""
    return profile["megatron_deepspeed"]["era"]


def plan(profile_name: str, extra: Optional[List[str]] = None) -> Dict[str, Any]:
    """What the python_env role installs for a profile with its defaults, step by step."""
    profile = load_profile(profile_name)
    role = load_role_vars()
    era = role["__python_env_eras"][era_of(profile)]
    pins = dict(era["requirements"])
    pins["numpy"] = profile["numpy"]  # the profile's pin (_stack_profiles.numpy_pin)
    build = ["%s==%s" % item for item in era["build"].items()]
    requirements = ["%s==%s" % item for item in sorted(pins.items())]
    torch_spec = profile["torch"]["pip"]
    deepspeed_spec = profile["deepspeed"]["pip"]
    # The profile's torchvision, when it has one (python_env_torchvision_spec's default).
    vision = [profile["torch"]["torchvision"]] if profile["torch"].get("torchvision") else []
    constraints = build + [torch_spec] + vision + [deepspeed_spec] + list(profile["pip_extra"]) + requirements
    return {
        "profile": profile,
        "build": build,
        "torch": torch_spec,
        "torchvision": vision,
        "requirements": requirements,
        "pip_extra": list(profile["pip_extra"]),
        "deepspeed": deepspeed_spec,
        "extra": list(extra or []),
        "constraints": constraints,
    }


def _pip(*args: str, env: Optional[Dict[str, str]] = None, python: str = sys.executable) -> None:
    """pip of ``python`` (this interpreter by default), the command echoed first (with the
    variables ``env`` adds)."""
    cmd = [python, "-m", "pip", "--disable-pip-version-check", *args]
    added = " ".join("%s=%s" % item for item in sorted((env or {}).items()))
    print("+ " + (added + " " if added else "") + " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, env=dict(os.environ, **env) if env else None)


def _sdist_requirements(sdist: Path) -> List[str]:
    """install_requires of a DeepSpeed sdist (requirements/requirements.txt)."""
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/requirements/requirements.txt")
                      and m.name.count("/") == 2)
        text = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
    return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]


def prebuild_reason(profile: Dict[str, Any], python: str, torch_spec: str, venv_ok: bool = False) -> Optional[str]:
    """Why DeepSpeed cannot be prebuilt here for these nodes, or None: a CUDA profile (its ops
    build on the node against its CUDA), another CPython, or another torch than the profile's
    (unless ``venv_ok``: then a build venv gets the profile's torch from the wheelhouse)."""
    if profile.get("accelerator") != "cpu":
        return "a %s profile builds its ops on the node" % profile.get("accelerator")
    here = "%d.%d" % sys.version_info[:2]
    if here != python:
        return "this interpreter is CPython %s, the nodes' %s" % (here, python)
    if venv_ok:
        return None
    try:
        from importlib.metadata import version
        torch_here = version("torch")
    except Exception:  # pylint: disable=broad-except
        return "this interpreter has no torch"
    wanted = torch_spec.split("==", 1)[1] if "==" in torch_spec else None
    if wanted is None or torch_here != wanted:
        return "this interpreter's torch is %s, the profile's %s" % (torch_here, wanted or torch_spec)
    return None


def prebuild_deepspeed(sdist: Path, dest: Path, python: str = sys.executable) -> Path:
    """pip wheel of the DeepSpeed sdist against ``python``'s torch, with the shared-memory
    op compiled in (DS_ACCELERATOR=cpu, DS_BUILD_SHM_COMM=1)."""
    _pip("wheel", "--no-deps", "--no-build-isolation", "--wheel-dir", str(dest), str(sdist),
         env={"DS_ACCELERATOR": "cpu", "DS_BUILD_OPS": "0", "DS_BUILD_SHM_COMM": "1",
              "MAX_JOBS": os.environ.get("MAX_JOBS", "2")}, python=python)
    return next(dest.glob(sdist.name.replace(".tar.gz", "") + "-*.whl"))


def build_venv(dest: Path, torch_spec: str, sdist: Path, build: List[str]) -> Path:
    """A throwaway venv with the profile's torch and DeepSpeed's build requirements, all from
    the wheelhouse just filled (no index): the profile's torch is not this interpreter's (the
    cpu-pypi profile's PyPI torch, say). The caller removes it: it is as large as a node's venv."""
    import venv

    where = dest.parent / (dest.name + ".build-venv")
    shutil.rmtree(where, ignore_errors=True)
    venv.EnvBuilder(with_pip=True).create(str(where))
    python = str(where / "bin" / "python")
    _pip("install", "--no-index", "--find-links", str(dest), torch_spec, *build, *_sdist_requirements(sdist),
         python=python)
    return where


def fill(profile_name: str, python: str, dest: Path, torch_index_url: str = "",
         extra: Optional[List[str]] = None, force: bool = False) -> Path:
    p = plan(profile_name, extra)
    profile = p["profile"]
    torch_spec = p["torch"]
    if profile["torch"].get("local") == "cpu" and "==" in torch_spec and "+" not in torch_spec:
        torch_spec += "+cpu"  # never a CUDA build for a CPU profile
    vision = list(p["torchvision"])
    if vision and profile["torch"].get("local") == "cpu" and "+" not in vision[0]:
        vision = [vision[0] + "+cpu"]
    wanted = p["pip_extra"] + p["requirements"] + p["build"] + [torch_spec] + vision + p["extra"]
    if profile["accelerator"] == "cuda":
        wanted.append("nvidia-ml-py")  # DeepSpeed's setup.py adds it when it sees CUDA
    # A torch other than this interpreter's is installed into a build venv for the prebuild.
    in_venv = prebuild_reason(profile, python, torch_spec) is not None and \
        prebuild_reason(profile, python, torch_spec, venv_ok=True) is None
    no_prebuild = prebuild_reason(profile, python, torch_spec, venv_ok=True)
    request = {"profile": profile["name"], "python": python, "wanted": wanted,
               "deepspeed": p["deepspeed"], "constraints": p["constraints"], "platforms": PLATFORMS,
               "prebuilt_ops": [] if no_prebuild else ["SHM_COMM"]}
    digest = hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()
    dest.mkdir(parents=True, exist_ok=True)
    stamp = dest / STAMP
    if not force and stamp.exists() and json.loads(stamp.read_text()).get("digest") == digest:
        print("wheelhouse %s is up to date (%s)" % (dest, digest[:12]))
        return dest

    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text("\n".join(p["constraints"]) + "\n")
        # DeepSpeed: the sdist (no wheels on PyPI), then its requirements as wheels.
        _pip("download", "--no-deps", "--no-binary", ":all:", "--dest", str(dest), p["deepspeed"])
        name, version = p["deepspeed"].split("==", 1)
        sdist = next(dest.glob("%s-%s.tar.gz" % (name, version)))
        wanted += _sdist_requirements(sdist)
        args = ["download", "--only-binary", ":all:", "--python-version", python,
                "--implementation", "cp", "--dest", str(dest), "--constraint", str(constraints)]
        for platform in PLATFORMS:
            args += ["--platform", platform]
        if torch_index_url:
            args += ["--extra-index-url", torch_index_url]
        _pip(*args, *wanted)
        if no_prebuild:
            print("DeepSpeed stays an sdist (built on each node): %s" % no_prebuild)
        elif in_venv:
            where = build_venv(dest, torch_spec, sdist, p["build"])
            try:
                print("prebuilt %s" % prebuild_deepspeed(sdist, dest, str(where / "bin" / "python")).name)
            finally:
                shutil.rmtree(where, ignore_errors=True)
        else:
            print("prebuilt %s" % prebuild_deepspeed(sdist, dest).name)

    stamp.write_text(json.dumps({"digest": digest, "request": request}, indent=1, sort_keys=True) + "\n")
    size = sum(f.stat().st_size for f in dest.iterdir() if f.is_file())
    print("wheelhouse %s: %d files, %.0f MB" % (dest, len(list(dest.iterdir())) - 1, size / 1e6))
    return dest


def default_dest(profile: str, python: str) -> Path:
    return REPO / ".cache" / "wheelhouse" / ("%s-cp%s" % (profile, python.replace(".", "")))


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--profile", default="cpu", help="stack profile (default: cpu)")
    parser.add_argument("--python", default="3.11", help="CPython major.minor of the nodes (default: 3.11)")
    parser.add_argument("--dest", type=Path, help="default: .cache/wheelhouse/<profile>-cp<python>")
    parser.add_argument("--torch-index-url", default=os.environ.get("MEGATRON_DS_TORCH_INDEX_URL", ""),
                        help="extra index for torch, e.g. https://download.pytorch.org/whl/cpu")
    parser.add_argument("--extra", action="append", default=[], help="more requirements (repeatable)")
    parser.add_argument("--force", action="store_true", help="download again even when up to date")
    parser.add_argument("--print-dest", action="store_true", help="print the default destination and exit")
    args = parser.parse_args(argv)
    dest = args.dest or default_dest(args.profile, args.python)
    if args.print_dest:
        print(dest)
        return 0
    try:
        fill(args.profile, args.python, dest, args.torch_index_url, args.extra, args.force)
    except subprocess.CalledProcessError as exc:
        print("fill.py: pip failed (%s). A missing torch build: pass --torch-index-url or put the wheel "
              "in a pip --find-links directory." % exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
