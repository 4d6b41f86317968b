# -*- coding: utf-8 -*-
from __future__ import annotations

import pathlib

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import args as _mds_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as sp
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import versions as v


def test_default_profile_is_the_guides():
    profile = sp.get(None)
    assert profile["name"] == "cu117"
    assert profile["cuda"]["version"] == "11.7.1"
    # The check compares what cudnn_version.h carries (no build number); the role installs the archive.
    assert profile["cudnn"]["version"] == "8.6.0"
    assert profile["cudnn"]["install"] == "8.6.0.163"
    assert profile["nccl"]["version"] == "2.16.5"
    assert profile["torch"]["pip"] == "torch==1.13.1"
    assert profile["deepspeed"]["pip"] == "deepspeed==0.9.2"
    assert "pydantic<2" in profile["pip_extra"] and "numpy<2" in profile["pip_extra"]


def test_unknown_profile_names_the_choices():
    with pytest.raises(sp.UnknownProfileError) as err:
        sp.get("cu999")
    assert "cu999" in str(err.value) and "cu117, cu121, cu130, cpu" not in str(err.value)
    assert "cpu, cpu-pypi, cu117, cu121, cu130" in str(err.value)


def test_get_returns_a_copy():
    sp.get("cu117")["cuda"]["version"] = "0"
    assert sp.get("cu117")["cuda"]["version"] == "11.7.1"


@pytest.mark.parametrize("name", sorted(sp.PROFILES))
def test_profiles_are_self_consistent(name):
    profile = sp.get(name)
    if profile["accelerator"] == "cpu":
        assert profile["cuda"] is None and profile["driver"] is None
        return
    cuda = profile["cuda"]
    # The exact install satisfies the profile's spec, and the driver floor covers the toolkit.
    assert v.satisfies(cuda["install"], cuda["version"])
    assert v.compare(profile["driver"]["min"], sp.min_driver_for_cuda(cuda["install"])) >= 0
    assert v.satisfies(profile["cudnn"]["install"], profile["cudnn"]["version"])
    assert v.satisfies(profile["nccl"]["install"], profile["nccl"]["version"])
    # torch's CUDA is the toolkit's major.minor, so apex builds (nvcc == torch.version.cuda).
    assert profile["torch"]["cuda"] == v.major_minor(cuda["install"])
    assert profile["cudnn"]["cuda_major"] == v.major(cuda["install"])
    assert v.satisfies(profile["deepspeed"]["pip"].split("==")[1], profile["deepspeed"]["version"])


@pytest.mark.parametrize(
    "cuda, expected",
    [
        ("11.7.1", "515.48.07"),
        ("11.7.0", "515.43.04"),
        ("11.7.99", "515.43.04"),
        ("11.8.0", "520.61.05"),
        ("12.1.1", "530.30.02"),
        ("13.0.88", "580.65.06"),
    ],
)
def test_min_driver_for_cuda(cuda, expected):
    assert sp.min_driver_for_cuda(cuda) == expected


# A release without a row was once judged by its major's compatibility floor (12.4 -> 525.60.13),
# silently; it is now an error that names the row to add.
@pytest.mark.parametrize("cuda, row", [("12.4", "12.4"), ("12.4.131", "12.4"), ("9.0", "9.0"), ("11.6.2", "11.6")])
def test_min_driver_for_cuda_without_a_row(cuda, row):
    with pytest.raises(sp.UnknownCudaError) as err:
        sp.min_driver_for_cuda(cuda)
    assert "no minimum driver known for CUDA %s: add a row for %s to CUDA_MIN_DRIVER" % (cuda, row) in str(err.value)


@pytest.mark.parametrize(
    "name, expected",
    [
        # before_rebase has no --use-flash-attn* flags (docs/upstream-facts.md §A).
        ("cu117", {"supported": False, "required": False, "provider": None}),
        ("cu121", {"supported": True, "required": False, "provider": None}),
        # torch 2.11's unfused attention fails (docs/upstream-facts.md §G): flash attention is required.
        ("cu130", {"supported": True, "required": True, "provider": "sdpa"}),
        ("cpu", {"supported": True, "required": False, "provider": None}),
        (None, {"supported": False, "required": False, "provider": None}),  # the default, cu117
    ],
)
def test_flash_attn_policy(name, expected):
    assert sp.flash_attn(name) == expected
    # A profile dict gives the same answer as its name.
    assert sp.flash_attn(sp.get(name)) == expected


@pytest.mark.parametrize("name", sorted(sp.PROFILES))
def test_flash_attn_field_is_well_formed(name):
    policy = sp.PROFILES[name]["flash_attn"]
    if policy is None:
        # Only a Megatron-DeepSpeed without the flags may leave it out.
        assert sp.PROFILES[name]["megatron_deepspeed"]["ref"] == "before_rebase"
        return
    assert set(policy) == {"required", "provider"}
    assert policy["provider"] in sp.FLASH_ATTN_PROVIDERS + (None,)
    # A required flash path must come with something python_env can install by default.
    assert not policy["required"] or policy["provider"] in sp.FLASH_ATTN_PROVIDERS


def test_flash_attn_unknown_profile_raises():
    with pytest.raises(sp.UnknownProfileError):
        sp.flash_attn("cu999")


@pytest.mark.parametrize("name, expected", [
    ("cu130", False),   # torch 2.11: set_jit_fusion_options asks for nvfuser, a no-op since torch 2.2
    ("cu121", True),
    ("cu117", True),
    ("cpu", True),
    (None, True),       # the default profile
])
def test_torchscript_fusion(name, expected):
    assert sp.torchscript_fusion(name) is expected
    assert sp.torchscript_fusion(sp.get(name)) is expected


@pytest.mark.parametrize("key, name, expected", [
    ("use_flash_attn", "cu130", True),
    ("use_flash_attn", "cu121", False),
    ("use_flash_attn", "cu117", False),
    ("use_flash_attn", "cpu", False),
    ("bias_gelu_fusion", "cu130", False),
    ("bias_gelu_fusion", "cu121", True),
    ("bias_gelu_fusion", "cu117", True),
    ("bias_gelu_fusion", "cpu", True),
    ("bias_gelu_fusion", None, True),
    ("fused_ops", "cu130", True),       # the profile opts in to megatron_ds_fused_ops
    ("fused_ops", "cu121", False),
    ("fused_ops", "cpu", False),
    ("fused_ops", None, False),
])
def test_auto_setting(key, name, expected):
    assert sp.auto_setting(key, name) is expected
    assert sp.auto_setting(key, sp.get(name)) is expected


@pytest.mark.parametrize("key, name, error", [
    ("masked_softmax_fusion", "cu130", KeyError),      # not a setting that takes auto
    ("use_flash_attn", "cu999", sp.UnknownProfileError),
])
def test_auto_setting_refuses(key, name, error):
    with pytest.raises(error):
        sp.auto_setting(key, name)


# ------------------------------------------------------------------ one accessor per fact
@pytest.mark.parametrize("name, era, pin, numpy, apex", [
    ("cu117", "before_rebase", "0.9.2", "1.24.4", "0da3ffb92ee6fbe5336602f0e3989db1cd16f880"),
    ("cu121", "head", "0.19.6", "1.26.4", "4138d31ff0acf4071d1dc001ccb7cd6e00800324"),
    ("cu130", "head", "0.19.6", "2.2.6", "6424da3b4faa6c8f062da4a48c424fff3f02d42d"),
    ("cpu", "head", "0.19.6", "2.2.6", ""),
])
def test_profile_accessors(name, era, pin, numpy, apex):
    profile = _stack_profiles.get(name)
    assert _stack_profiles.mds_era(name) == _stack_profiles.mds_era(profile) == era
    assert _stack_profiles.deepspeed_pin(name) == profile["deepspeed"]["pinned"] == pin
    assert _stack_profiles.numpy_pin(name) == numpy
    assert _stack_profiles.apex_ref(name) == apex
    # The era the profile installs is the era its own DeepSpeed pin imports: the flag table
    # validate_job picks from a DeepSpeed version and the one train.sh is rendered for agree.
    assert _mds_args.era_for_deepspeed(pin) == era


@pytest.mark.parametrize("profile, version, expected", [
    ("cu117", "0.9.2", True), ("cu117", "0.10.1", False), ("cu130", "0.15.2", True), ({"deepspeed": {}}, "0.1", False),
])
def test_deepspeed_at_least(profile, version, expected):
    assert _stack_profiles.deepspeed_at_least(profile, version) is expected


def test_fallback_profile_and_venv_are_named_once():
    """The lookup answers an empty name with the default profile, and every profile carries the
    venv path, so roles read both from it instead of repeating them."""
    assert _stack_profiles.get("")["name"] == _stack_profiles.get(None)["name"] == _stack_profiles.DEFAULT_PROFILE
    assert {_stack_profiles.get(n)["venv"] for n in _stack_profiles.names()} == {_stack_profiles.VENV}
    roles = pathlib.Path(__file__).resolve().parents[5] / "roles"
    for role, variable in (("python_env", "python_env_path"), ("megatron_job", "megatron_job_venv")):
        assert yaml.safe_load((roles / role / "defaults" / "main.yml").read_text())[variable] == _stack_profiles.VENV
