"""The flash-attention SDPA adapter (python_env_flash_attn: sdpa on node1; auto, i.e. none for
the cpu profile, on node2 and node3). molecule's idempotence step covers the re-converge."""
from __future__ import annotations

import json
import subprocess

import pytest

from python_env_helpers import VENV, flat, run_playbook

PY = VENV + "/bin/python"
SITE = VENV + "/lib/python3.11/site-packages"
ADAPTER_SRC = VENV + "/megatron-ds/flash_attn_sdpa"


def _as_user(host, command: str, *args: str) -> str:
    prefix = "" if host.backend.get_hostname() == "node3" else "sudo -u megatron -H "
    return host.check_output(prefix + command, *args)


def _name(host) -> str:
    return host.backend.get_hostname()


def test_adapter_is_an_installed_distribution_on_node1_only(host):
    installed = {
        row["name"].lower(): row["version"]
        for row in json.loads(host.check_output(VENV + "/bin/pip list --format=json --disable-pip-version-check"))
    }
    if _name(host) == "node1":
        assert installed.get("megatron-ds-flash-attn-sdpa") == "2.0.0+sdpa"
        assert "flash-attn" not in installed
        assert host.file(SITE + "/flash_attn/flash_attn_interface.py").user == "megatron"
        # Installed from the copy in the role's state directory, whose in-tree build is cleaned up.
        assert host.file(ADAPTER_SRC + "/pyproject.toml").is_file
        assert not host.file(ADAPTER_SRC + "/build").exists
        assert not host.file(ADAPTER_SRC + "/megatron_ds_flash_attn_sdpa.egg-info").exists
    else:
        assert "megatron-ds-flash-attn-sdpa" not in installed
        assert not host.file(SITE + "/flash_attn").exists


def test_adapter_imports_and_matches_float64_attention(host):
    if _name(host) != "node1":
        pytest.skip("the adapter is installed on node1 only")
    out = _as_user(host, "%s -I %s/megatron-ds/check_flash_attn.py 2>/dev/null", PY, VENV)
    result = json.loads(out.strip().splitlines()[-1])
    assert result["adapter"] == "torch-sdpa" and result["version"] == "2.0.0+sdpa"
    assert result["path"] == [SITE + "/flash_attn"]
    assert (result["device"], result["dtype"], result["checked"], result["ok"]) == ("cpu", "float32", True, True)
    assert result["worst_rel_err"] < 1e-5
    # Megatron-DeepSpeed's import, and a ragged batch refused rather than computed wrong.
    code = (
        "import torch; from flash_attn.flash_attn_interface import flash_attn_varlen_func as f; "
        "q = torch.randn(5, 2, 8); cu = torch.tensor([0, 2, 5], dtype=torch.int32)\n"
        "try:\n    f(q, q, q, cu, cu, 3, 3)\nexcept NotImplementedError as e:\n    print('refused', e)"
    )
    assert "refused" in _as_user(host, "%s -I -c %s", PY, code)


def _docker(node: str, *cmd: str) -> None:
    subprocess.run(["docker", "exec", node, *cmd], check=True, capture_output=True, text=True)


def test_sdpa_is_never_installed_over_a_real_flash_attn():
    # node2 pretends to have the real flash-attn (a distribution owning flash_attn/).
    fake = (
        "set -e; cd %s; mkdir -p flash_attn flash_attn-2.8.3.dist-info; "
        "echo '__version__ = \"2.8.3\"' > flash_attn/__init__.py; "
        "printf 'Metadata-Version: 2.1\\nName: flash-attn\\nVersion: 2.8.3\\n' > flash_attn-2.8.3.dist-info/METADATA; "
        "printf 'flash_attn/__init__.py,,\\nflash_attn-2.8.3.dist-info/METADATA,,\\n' > flash_attn-2.8.3.dist-info/RECORD" % SITE
    )
    _docker("node2", "bash", "-c", fake)
    try:
        result, recap = run_playbook("converge.yml", "-e", json.dumps({"python_env_flash_attn": "sdpa"}), limit="node2")
        out = flat(result)
        assert result.returncode != 0 and recap["node2"][1] == 1, out
        assert "already has flash_attn from flash-attn 2.8.3" in out, out
        assert "The role does not replace it" in out and "python_env_flash_attn: none" in out, out
        # Nothing was installed over it.
        _docker("node2", "grep", "-q", "2.8.3", SITE + "/flash_attn/__init__.py")
    finally:
        _docker("node2", "rm", "-rf", SITE + "/flash_attn", SITE + "/flash_attn-2.8.3.dist-info")
