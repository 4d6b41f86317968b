"""Verify the python_env role on the converged nodes (testinfra, run by molecule verify).

node1 and node2 have the training user (prepare.yml); node3 does not, so there the venv and the
checkout belong to root until test_update.py creates the user and runs the role again.
"""
from __future__ import annotations

import json

import pytest

from python_env_helpers import MEGATRON_DIR, REAL_MDS, VENV

PY = VENV + "/bin/python"
CONSTRAINTS = VENV + "/megatron-ds/constraints.txt"
# The cpu profile with its defaults: profile pins and the role's `head` era pins.
EXPECTED_PINS = {
    "torch": "2.13.0",
    "deepspeed": "0.19.6",
    "pip": "25.3",
    "setuptools": "80.9.0",
    "wheel": "0.45.1",
    "einops": "0.8.1",
    "nltk": "3.9.2",
    "numpy": "2.2.6",
    "packaging": "25.0",
    "pybind11": "2.13.6",
    "regex": "2025.11.3",
    "sentencepiece": "0.2.1",
    "six": "1.17.0",
    "tensorboard": "2.20.0",
    "transformers": "4.57.6",
}


def _owner(host) -> str:
    return "root" if host.backend.get_hostname() == "node3" else "megatron"


def _as_owner(host, command: str, *args: str) -> str:
    user = _owner(host)
    prefix = "" if user == "root" else "sudo -u megatron -H "
    return host.check_output(prefix + command, *args)


def test_venv_is_python_311_owned_by_the_training_user(host):
    venv = host.file(VENV)
    assert venv.is_directory and venv.user == _owner(host) and venv.mode == 0o755
    cfg = host.file(VENV + "/pyvenv.cfg").content_string
    assert "version = 3.11." in cfg, cfg
    # Files pip wrote belong to the same user (pip ran as that user, not as root).
    assert host.file(VENV + "/lib/python3.11/site-packages/torch/__init__.py").user == _owner(host)
    assert host.check_output("readlink %s", VENV + "/bin/python3-config") == "/usr/bin/python3.11-config"


def test_constraints_pin_every_package(host):
    lines = [line for line in host.file(CONSTRAINTS).content_string.splitlines() if line and not line.startswith("#")]
    pins = dict(line.split("==", 1) for line in lines)
    assert pins == EXPECTED_PINS


def test_installed_versions_match_the_pins(host):
    installed = {
        row["name"].lower(): row["version"]
        for row in json.loads(host.check_output(VENV + "/bin/pip list --format=json --disable-pip-version-check"))
    }
    wrong = {name: installed.get(name) for name, version in EXPECTED_PINS.items()
             if (installed.get(name) or "").split("+")[0] != version}
    assert wrong == {}
    assert installed["torch"] == "2.13.0+cpu"  # the CPU build, not PyPI's CUDA one
    assert not any(name.startswith("nvidia-") for name in installed)


def test_pip_check_finds_no_broken_requirement(host):
    out = host.run(VENV + "/bin/pip check --disable-pip-version-check")
    assert out.rc == 0, out.stdout + out.stderr


def test_torch_and_deepspeed_import_as_the_user(host):
    code = (
        "import json, torch, deepspeed, numpy; "
        "print(json.dumps([torch.__version__, torch.version.cuda, deepspeed.__version__, numpy.__version__]))"
    )
    out = _as_owner(host, "%s -I -c %s 2>/dev/null", PY, code)
    assert json.loads(out.strip().splitlines()[-1]) == ["2.13.0+cpu", None, "0.19.6", "2.2.6"]


def test_installed_offline_from_the_wheelhouse_copy(host):
    wheelhouse = host.file("/opt/megatron/cache/wheelhouse")
    assert wheelhouse.is_directory
    assert host.file("/opt/megatron/cache/wheelhouse/.wheelhouse-digest").is_file
    names = host.check_output("ls /opt/megatron/cache/wheelhouse")
    assert "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl" in names
    assert "deepspeed-0.19.6.tar.gz" in names


def test_megatron_checkout_imports(host):
    checkout = host.file(MEGATRON_DIR)
    assert checkout.is_directory and checkout.user == _owner(host)
    code = "import sys; sys.path.insert(0, %r); import megatron; print(getattr(megatron, 'TOY_REVISION', 'real'))" % MEGATRON_DIR
    out = _as_owner(host, "%s -I -c %s 2>/dev/null", PY, code).strip().splitlines()[-1]
    assert out == ("real" if REAL_MDS else "v1")


@pytest.mark.skipif(REAL_MDS, reason="git mechanics: only with the toy repository (MEGATRON_DS_SRC unset)")
def test_git_checkout_is_at_the_pinned_tag(host):
    # As the checkout's owner: git refuses a repository someone else owns.
    head = _as_owner(host, "git -C %s rev-parse HEAD", MEGATRON_DIR)
    tag = host.check_output("git -C /srv/git/toy-megatron.git rev-parse v1^{commit}")
    assert head == tag
    assert _as_owner(host, "git -C %s status --porcelain --untracked-files=no", MEGATRON_DIR) == ""


@pytest.mark.skipif(not REAL_MDS, reason="the dataset helpers need a real Megatron-DeepSpeed checkout: set MEGATRON_DS_SRC")
def test_dataset_helper_is_built_and_answers(host):
    so = host.file(MEGATRON_DIR + "/megatron/data/helpers.cpython-311-x86_64-linux-gnu.so")
    assert so.is_file and so.user == _owner(host)
    out = _as_owner(host, "%s %s/megatron-ds/check_helpers.py %s/megatron/data", PY, VENV, MEGATRON_DIR)
    assert "build_sample_idx ok" in out
    # The archive's checksum is what the checkout records.
    assert len(host.file(MEGATRON_DIR + "/.megatron-ds-archive.sha256").content_string.strip()) == 64


@pytest.mark.skipif(not REAL_MDS, reason="an archive tree needs MEGATRON_DS_SRC (without it the checkout is git's)")
def test_archive_tree_has_a_manifest_and_the_facts_find_a_damaged_file(host):
    """python_env writes the manifest after unpacking; gpu_stack_facts checks the tree against it
    and names a file cut short (put back afterwards)."""
    manifest = host.file(MEGATRON_DIR + "/.megatron-ds-manifest")
    assert manifest.is_file and manifest.mode == 0o644
    listed = manifest.content_string.splitlines()
    assert listed[0].startswith("# megatron_ds.cluster source manifest v1")
    assert any(line.endswith(" pretrain_gpt.py") for line in listed)
    target = MEGATRON_DIR + "/pretrain_gpt.py"
    with host.sudo():
        host.check_output("cp -p %s /tmp/pretrain_gpt.py.keep && truncate -s 10 %s", target, target)
        try:
            facts = host.ansible("megatron_ds.cluster.gpu_stack_facts", "megatron_dir=%s venv=%s" % (MEGATRON_DIR, VENV),
                                 become=True, check=False)
        finally:
            host.check_output("cp -p /tmp/pretrain_gpt.py.keep %s", target)
    files = facts["ansible_facts"]["gpu_stack_facts"]["megatron_deepspeed"]["files"]
    assert files["error"] is None and files["checked"] == len(listed) - 1
    assert files["bad"] == ["pretrain_gpt.py: changed (10 bytes, %d when unpacked)" % host.file(target).size]


def test_no_apex_on_the_cpu_profile(host):
    assert not host.file("/opt/megatron/apex").exists
