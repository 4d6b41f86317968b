"""megatron_ds_fused_ops (python_env_fused_ops: true on node1; auto, i.e. off for the cpu profile,
on node2 and node3): installed offline with its .pth, and the .pth patches a Megatron module only
in a process started with MEGATRON_DS_FUSED_OPS=1, as the job's ranks are. molecule's idempotence
step covers the re-converge."""
from __future__ import annotations

import json

import pytest

from python_env_helpers import VENV

PY = VENV + "/bin/python"
SITE = VENV + "/lib/python3.11/site-packages"
SRC = VENV + "/megatron-ds/fused_ops"

# A stand-in megatron/model/transformer.py with the names the package replaces.
STAND_IN = (
    "def bias_gelu_impl(y, b): return 'original'\n"
    "def apply_rotary_pos_emb(t, f): return 'original'\n"
    "class ParallelMLP:\n"
    "    def __init__(self, swiglu):\n"
    "        self.swiglu, self.activation_func = swiglu, 'original'\n"
)
PROBE = (
    "import json, sys; from megatron.model import transformer as t; "
    "print(json.dumps({'loaded': 'megatron_ds_fused_ops' in sys.modules, "
    "'gelu': t.bias_gelu_impl.__module__, 'rotary': t.apply_rotary_pos_emb.__module__, "
    "'swiglu': getattr(t.ParallelMLP(True).activation_func, '__module__', 'original')}))"
)


def _name(host) -> str:
    return host.backend.get_hostname()


def _installed(host):
    return {row["name"].lower(): row["version"]
            for row in json.loads(host.check_output(VENV + "/bin/pip list --format=json --disable-pip-version-check"))}


def test_package_and_pth_on_node1_only(host):
    installed = _installed(host)
    pth = host.file(SITE + "/megatron_ds_fused_ops.pth")
    if _name(host) == "node1":
        assert installed.get("megatron-ds-fused-ops") == "1.0.0"
        assert pth.is_file and pth.user == "megatron" and pth.mode == 0o644
        assert pth.content_string.startswith("import os; ")
        assert host.file(SRC + "/pyproject.toml").is_file
        assert not host.file(SRC + "/build").exists
        assert not host.file(SRC + "/megatron_ds_fused_ops.egg-info").exists
    else:
        assert "megatron-ds-fused-ops" not in installed
        assert not pth.exists


@pytest.mark.parametrize("env, patched", [("MEGATRON_DS_FUSED_OPS=1", True), ("MEGATRON_DS_FUSED_OPS=0", False), ("", False)])
def test_only_the_jobs_variable_patches_megatron(host, env, patched):
    if _name(host) != "node1":
        pytest.skip("the package is installed on node1 only")
    work = host.check_output("sudo -u megatron mktemp -d")
    try:
        host.check_output("sudo -u megatron mkdir -p %s/megatron/model" % work)
        for path, text in (("megatron/__init__.py", ""), ("megatron/model/__init__.py", ""),
                           ("megatron/model/transformer.py", STAND_IN)):
            host.check_output("printf '%%s' %s | sudo -u megatron tee %s/%s >/dev/null" % (_quote(text), work, path))
        # As a rank starts: the venv's python, the checkout on PYTHONPATH, the job's environment.
        cmd = host.run("cd %s && sudo -u megatron env %s PYTHONPATH=%s %s -c %s" % (work, env, work, PY, _quote(PROBE)))
        assert cmd.rc == 0, cmd.stderr
        got = json.loads(cmd.stdout.strip().splitlines()[-1])
    finally:
        host.run("rm -rf " + work)
    want = "megatron_ds_fused_ops" if patched else "megatron.model.transformer"
    assert got["loaded"] is patched
    assert (got["gelu"], got["rotary"]) == (want, want)
    assert got["swiglu"] == ("megatron_ds_fused_ops" if patched else "original")
    if patched:  # the one line of the training log; eager functions on a CPU node
        assert "megatron_ds fused ops: bias_gelu_impl, apply_rotary_pos_emb, ParallelMLP.swiglu (compiled: False" in cmd.stderr


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\"'\"'") + "'"
