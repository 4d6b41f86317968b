# -*- coding: utf-8 -*-
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils import _stack_profiles as sp
from ansible_collections.megatron_ds.cluster.plugins.module_utils import _versions as v


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
    assert "cpu, cu117, cu121, cu130" in str(err.value)


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
        ("12.4", "525.60.13"),
        ("9.0", None),
    ],
)
def test_min_driver_for_cuda(cuda, expected):
    assert sp.min_driver_for_cuda(cuda) == expected


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
