# -*- coding: utf-8 -*-
"""The python_env pins, checked two ways.

1. Data (always, milliseconds): for every stack profile, the pins the role renders into its
   constraints file (profile + roles/python_env/vars/main.yml, read by tests/wheelhouse/fill.py
   exactly as the role composes them) agree with each other: the era's exact pins satisfy the
   profile's extra constraints (cu117: pydantic<2, numpy<2), the torch pin satisfies the
   profile's torch version, and the preferred Python has a torch wheel.
2. Install (only where a cu117 wheel cache exists): a fresh CPython 3.11 venv gets the cu117 set
   offline, the way the role installs it (build tools, torch, requirements, then DeepSpeed
   without build isolation, every call with the constraints), and then imports torch 1.13.1
   (CUDA 11.7, its bundled cuDNN 8.5) and DeepSpeed 0.9.2 with pydantic 1 and NumPy 1.
   Fill the cache once (about 2.4 GB: torch 1.13.1 and its NVIDIA wheels) with
       python tests/wheelhouse/fill.py --profile cu117 --python 3.11
   The install takes a few minutes; without the cache the test is skipped and says so.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("wheelhouse_fill", REPO / "tests" / "wheelhouse" / "fill.py")
fill = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fill)  # type: ignore[union-attr]

PROFILES = ["cu117", "cu121", "cu130", "cpu"]


def _pins(plan):
    return {Requirement(spec).name: Version(str(Requirement(spec).specifier).lstrip("=")) for spec in plan["requirements"]}


@pytest.mark.parametrize("profile", PROFILES)
def test_era_pins_satisfy_the_profiles_extra_constraints(profile):
    plan = fill.plan(profile)
    pins = _pins(plan)
    for extra in plan["pip_extra"]:
        req = Requirement(extra)
        if req.name in pins:
            assert req.specifier.contains(pins[req.name]), (profile, extra, pins[req.name])


@pytest.mark.parametrize("profile", PROFILES)
def test_torch_pin_and_preferred_python(profile):
    plan = fill.plan(profile)
    torch = plan["profile"]["torch"]
    pinned = Version(plan["torch"].split("==")[1])
    assert str(pinned).startswith(torch["version"])
    assert plan["profile"]["python"]["preferred"] in torch["wheel_pythons"]


@pytest.mark.parametrize(
    ("profile", "name", "bad"),
    [
        # DeepSpeed 0.9.2 breaks on these (docs/upstream-facts.md §H): the cu117 set must exclude them.
        ("cu117", "numpy", "2.0.0"),
        ("cu117", "pydantic", "2.0.0"),
        # torch 2.1 cannot exchange arrays with NumPy 2.
        ("cu121", "numpy", "2.0.0"),
    ],
)
def test_breaking_versions_are_excluded(profile, name, bad):
    plan = fill.plan(profile)
    allowed = [Requirement(spec) for spec in plan["constraints"] if Requirement(spec).name == name]
    assert allowed, "no constraint on %s for %s" % (name, profile)
    assert not all(req.specifier.contains(bad) for req in allowed)


def test_cu117_constraints_are_the_guides():
    constraints = fill.plan("cu117")["constraints"]
    for spec in ("torch==1.13.1", "deepspeed==0.9.2", "pydantic<2", "numpy<2"):
        assert spec in constraints


CU117_CACHE = Path(os.environ.get("MEGATRON_DS_CU117_WHEELHOUSE", str(fill.default_dest("cu117", "3.11"))))


def _python311():
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    return shutil.which("python3.11")


@pytest.mark.skipif(not (CU117_CACHE / fill.STAMP).is_file(),
                    reason="no cu117 wheel cache at %s: run `python tests/wheelhouse/fill.py --profile cu117 "
                           "--python 3.11` once (about 2.4 GB) to run this install test" % CU117_CACHE)
@pytest.mark.skipif(_python311() is None, reason="needs a CPython 3.11 interpreter (python3.11)")
def test_cu117_pins_install_and_import_on_python311(tmp_path):
    plan = fill.plan("cu117")
    constraints = tmp_path / "constraints.txt"
    constraints.write_text("\n".join(plan["constraints"]) + "\n")
    venv = tmp_path / "venv"
    subprocess.run([_python311(), "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", "--no-cache-dir",
           "--no-compile", "--no-index", "--find-links", str(CU117_CACHE), "--constraint", str(constraints)]
    env = dict(os.environ, DS_BUILD_OPS="0")
    for key in ("PIP_FIND_LINKS", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CONSTRAINT"):
        env.pop(key, None)
    env["PIP_CONFIG_FILE"] = os.devnull  # only the cache, not this machine's pip configuration
    for step in (plan["build"], [plan["torch"]], plan["requirements"]):
        subprocess.run(pip + step, check=True, env=env, capture_output=True, text=True)
    subprocess.run(pip + ["--no-build-isolation", plan["deepspeed"]], check=True, env=env, capture_output=True, text=True)

    probe = (
        "import json, torch, deepspeed, pydantic, numpy;"
        "print(json.dumps([torch.__version__, torch.version.cuda, torch.backends.cudnn.version(),"
        " deepspeed.__version__, pydantic.VERSION, numpy.__version__]))"
    )
    out = subprocess.run([str(venv / "bin" / "python"), "-c", probe], check=True, capture_output=True, text=True,
                         env=env).stdout
    torch_version, cuda, cudnn, ds, pydantic_version, numpy_version = json.loads(out.strip().splitlines()[-1])
    assert torch_version == "1.13.1+cu117" and cuda == "11.7"  # PyPI's 1.13.1 wheel is the cu117 build
    assert cudnn == 8500  # torch's bundled nvidia-cudnn-cu11 8.5, not the system cuDNN 8.6 (docs/upstream-facts.md §H)
    assert ds == "0.9.2"
    assert Version(str(pydantic_version)).major == 1 and Version(numpy_version).major == 1
    check = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "check"], capture_output=True, text=True,
                           check=False)
    assert check.returncode == 0, check.stdout


@pytest.mark.parametrize("profile, python, torch_spec, reason", [
    ({"accelerator": "cuda"}, "3.11", "torch==1.13.1", "a cuda profile builds its ops on the node"),
    ({"accelerator": "cpu"}, "3.9", "torch==2.13.0+cpu", "this interpreter is CPython"),
    ({"accelerator": "cpu"}, "%d.%d" % sys.version_info[:2], "torch==0.0.1+cpu", "the profile's 0.0.1+cpu"),
])
def test_deepspeed_is_prebuilt_only_for_the_nodes_interpreter_and_torch(profile, python, torch_spec, reason):
    assert reason in fill.prebuild_reason(profile, python, torch_spec)


def test_deepspeed_is_prebuilt_where_interpreter_and_torch_match():
    from importlib.metadata import version
    here = "%d.%d" % sys.version_info[:2]
    assert fill.prebuild_reason({"accelerator": "cpu"}, here, "torch==" + version("torch")) is None
