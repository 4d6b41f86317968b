# -*- coding: utf-8 -*-
"""meta/execution-environment.yml: valid ansible-builder v3, and what an EE build would install.

An AWX / Automation Platform user lists this collection in the dependencies.galaxy of an
execution environment definition; ansible-builder installs it in the image and reads our
meta/execution-environment.yml to add our Python and system packages. These tests do every step
of that on this machine except the image build itself, which needs a container registry for its
base image (unreachable here):

* the file validates against ansible-builder's own v3 schema, and its dependency files exist
  relative to the collection root (where ansible-builder looks for them in a collection);
* `ansible-builder create` turns a user's definition that installs the built collection into a
  build context (Containerfile, requirements.yml, the collection tarball, builder scripts);
* the context's own introspect script, the one the image build runs, reads the installed
  collection and reports exactly our meta/ee-requirements.txt and meta/ee-bindep.txt;
* every module that controller-side plugins import at load time is the standard library,
  ansible, or listed in meta/ee-requirements.txt.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.tests.support import tools

REPO = Path(__file__).resolve().parents[2]
EE_FILE = REPO / "meta" / "execution-environment.yml"
# Plugin types that run on the controller, i.e. in the execution environment.
CONTROLLER_PLUGINS = ("action", "filter", "lookup", "test", "callback", "inventory", "vars", "connection")
MODULE_UTILS_PREFIX = "ansible_collections.megatron_ds.cluster.plugins.module_utils."

ansible_builder = pytest.importorskip("ansible_builder", reason="ansible-builder is not installed (requirements-test.txt)")


def tool(name):
    """The tool beside this Python (the project's venv), else the one on PATH."""
    return tools.find(name)


def run(args, cwd, env=None):
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600,
                          check=False)


def ee():
    return yaml.safe_load(EE_FILE.read_text())


def requirement_lines(path: Path):
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_the_definition_is_ansible_builder_v3():
    from ansible_builder.ee_schema import validate_schema  # noqa: PLC0415 - skipped above when absent

    definition = ee()
    validate_schema(definition)  # raises DefinitionError on anything v3 does not allow
    assert definition["version"] == 3


@pytest.mark.parametrize("entry", ["python", "system"])
def test_dependency_files_are_relative_to_the_collection_root_and_exist(entry):
    path = ee()["dependencies"][entry]
    assert isinstance(path, str) and not os.path.isabs(path), path  # ansible-builder refuses others
    assert (REPO / path).is_file(), "%s: %s does not exist relative to the collection root" % (entry, path)


def test_ansible_core_range_is_the_one_runtime_yml_declares():
    declared = yaml.safe_load((REPO / "meta" / "runtime.yml").read_text())["requires_ansible"]
    assert ee()["dependencies"]["ansible_core"]["package_pip"] == "ansible-core" + declared.replace('"', "")


@pytest.mark.parametrize("line", requirement_lines(REPO / "meta" / "ee-bindep.txt"))
def test_bindep_lines_name_a_package_and_platforms(line):
    # bindep: <package> [<profile or platform:...> ...]
    assert re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.+_-]*( \[(!?[A-Za-z0-9:._-]+)( !?[A-Za-z0-9:._-]+)*\])?", line), line


def _imports(path: Path):
    """Top-level names imported at module load time (not inside functions)."""
    tree = ast.parse(path.read_text(), str(path))
    names = []

    def visit(nodes):
        for node in nodes:
            if isinstance(node, ast.Import):
                names.extend(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.extend([node.module] + ["%s.%s" % (node.module, a.name) for a in node.names])
            elif isinstance(node, (ast.If, ast.Try)):
                visit(node.body)
                visit(getattr(node, "orelse", []))
                for handler in getattr(node, "handlers", []):
                    visit(handler.body)
                visit(getattr(node, "finalbody", []))
    visit(tree.body)
    return names


def controller_imports():
    """Third-party top-level modules imported by controller-side plugins and the module_utils they load."""
    todo = [p for kind in CONTROLLER_PLUGINS for p in sorted((REPO / "plugins" / kind).glob("*.py"))]
    seen, found = set(), {}
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for name in _imports(path):
            if name.startswith(MODULE_UTILS_PREFIX):
                util = REPO / "plugins" / "module_utils" / (name[len(MODULE_UTILS_PREFIX):].split(".")[0] + ".py")
                if util.is_file():
                    todo.append(util)
                continue
            top = name.split(".")[0]
            if top in ("ansible", "ansible_collections", "__future__") or top in sys.stdlib_module_names:
                continue
            found.setdefault(top, path.relative_to(REPO).as_posix())
    return found, seen


def test_controller_side_imports_are_stdlib_ansible_or_listed():
    listed = {re.split(r"[<>=!~\[; ]", line)[0].lower().replace("-", "_")
              for line in requirement_lines(REPO / "meta" / "ee-requirements.txt")}
    found, scanned = controller_imports()
    assert len(scanned) > 5  # the scan saw the plugins, not an empty directory
    missing = {top: where for top, where in found.items() if top.lower() not in listed}
    assert not missing, "imported on the controller but not in meta/ee-requirements.txt: %s" % missing


@pytest.fixture(scope="module")
def context(tmp_path_factory):
    for name in ("ansible-galaxy", "ansible-builder"):
        if not tool(name):
            pytest.skip(tools.missing(name))
    tmp = tmp_path_factory.mktemp("ee")
    # Build the collection from the files git would ship.
    src = tmp / "src"
    for name in run(["git", "ls-files", "-co", "--exclude-standard"], REPO).stdout.split():
        if not name.startswith(".collections/") and (REPO / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO / name, src / name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    built = run([tool("ansible-galaxy"), "collection", "build", "--output-path", tmp], src, env)
    assert built.returncode == 0, built.stdout + built.stderr
    tarball = next(tmp.glob("megatron_ds-cluster-*.tar.gz"))
    # A user's definition: our image requirements, and this collection from its tarball.
    user = tmp / "user"
    user.mkdir()
    shutil.copy2(tarball, user / tarball.name)
    ours = ee()["dependencies"]
    definition = {
        "version": 3,
        "images": {"base_image": {"name": "registry.invalid/ee-base:latest"}},
        "dependencies": {
            "ansible_core": ours["ansible_core"],
            "ansible_runner": ours["ansible_runner"],
            "galaxy": {"collections": [{"name": "/build/%s" % tarball.name, "type": "file"}]},
        },
        "additional_build_files": [{"src": tarball.name, "dest": "collections"}],
        "additional_build_steps": {"prepend_galaxy": ["COPY _build/collections/%s /build/" % tarball.name]},
    }
    (user / "execution-environment.yml").write_text(yaml.safe_dump(definition, sort_keys=False))
    out = tmp / "context"
    created = run([tool("ansible-builder"), "create", "-f", user / "execution-environment.yml", "--context", out,
                   "--output-filename", "Containerfile", "-v", "2"], user, env)
    assert created.returncode == 0, created.stdout + created.stderr
    cols = tmp / "cols"
    done = run([tool("ansible-galaxy"), "collection", "install", "--no-deps", "-p", cols, tarball], tmp, env)
    assert done.returncode == 0, done.stdout + done.stderr
    return {"out": out, "cols": cols, "tarball": tarball, "env": env, "tmp": tmp}


def test_create_writes_a_build_context_that_installs_the_collection(context):
    out, tarball = context["out"], context["tarball"]
    containerfile = (out / "Containerfile").read_text()
    assert 'ARG EE_BASE_IMAGE="registry.invalid/ee-base:latest"' in containerfile
    # ansible-core and ansible-runner as our definition asks.
    assert 'ARG ANSIBLE_INSTALL_REFS="ansible-core>=2.16.0,<2.21.0 ansible-runner"' in containerfile
    # The galaxy stage copies the tarball in before it installs; the builder stage introspects.
    galaxy = containerfile.split("FROM base AS galaxy", 1)[1].split("FROM base AS builder", 1)[0]
    assert "COPY _build/collections/%s /build/" % tarball.name in galaxy
    assert "ansible-galaxy collection install" in galaxy
    assert "introspect.py introspect" in containerfile.split("FROM base AS builder", 1)[1]
    # The galaxy stage installs from _build/requirements.yml, which names our tarball.
    requirements = yaml.safe_load((out / "_build" / "requirements.yml").read_text())
    assert requirements["collections"] == [{"name": "/build/%s" % tarball.name, "type": "file"}]
    assert (out / "_build" / "collections" / tarball.name).read_bytes() == tarball.read_bytes()
    assert (out / "_build" / "scripts" / "introspect.py").is_file()


def test_the_contexts_introspection_reads_our_dependencies(context):
    """The same script, on the installed collection, as the image build's builder stage runs."""
    pip_out, bindep_out = context["tmp"] / "pip.txt", context["tmp"] / "bindep.txt"
    result = run([sys.executable, context["out"] / "_build" / "scripts" / "introspect.py", "introspect", context["cols"],
                  "--write-pip", pip_out, "--write-bindep", bindep_out], context["tmp"], context["env"])
    assert result.returncode == 0, result.stdout + result.stderr
    report = yaml.safe_load(result.stdout.split("---", 1)[1])
    expected_pip = requirement_lines(REPO / "meta" / "ee-requirements.txt")
    expected_sys = requirement_lines(REPO / "meta" / "ee-bindep.txt")
    assert [line.split("  #")[0].strip() for line in report["system"]] == expected_sys
    assert expected_sys and all(line.endswith("# from collection megatron_ds.cluster") for line in report["system"])
    assert [line.split("  #")[0].strip() for line in report.get("python") or []] == expected_pip
    # The files the builder stage installs from: bindep's always (we list packages), pip's only
    # when there is something to install.
    assert requirement_lines(bindep_out) == report["system"]
    assert pip_out.is_file() == bool(expected_pip)
