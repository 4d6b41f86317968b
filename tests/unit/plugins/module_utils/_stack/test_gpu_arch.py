# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU architectures against the stack profiles (_stack/gpu_arch.py)."""
from __future__ import annotations

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import gpu_arch
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles


@pytest.mark.parametrize("value, expected", [
    ("9.0", (9, 0)),
    ("8.6", (8, 6)),
    ("12.0", (12, 0)),
    ("sm_90", (9, 0)),
    ("sm_37", (3, 7)),
    ("sm_100", (10, 0)),
    ("sm_90a", (9, 0)),
    ("compute_37", (3, 7)),
    ("90", (9, 0)),
    ((9, 0), (9, 0)),
    ([8, 0], (8, 0)),          # torch.cuda.get_device_capability() as JSON
    (9.0, (9, 0)),
    ("", None),
    (None, None),
    ("Hopper", None),
    ("[N/A]", None),
])
def test_parse_capability(value, expected):
    assert gpu_arch.parse_capability(value) == expected


@pytest.mark.parametrize("name, reported, expected", [
    ("NVIDIA H200", None, (9, 0)),                   # the recorded host's product_name
    ("NVIDIA H100 80GB HBM3", None, (9, 0)),
    ("NVIDIA H100 PCIe", None, (9, 0)),
    ("NVIDIA GH200 480GB", None, (9, 0)),
    ("H100", None, (9, 0)),                          # the planner's names
    ("A100-80GB", None, (8, 0)),
    ("NVIDIA A100-SXM4-40GB", None, (8, 0)),
    ("NVIDIA A10", None, (8, 6)),
    ("NVIDIA A40", None, (8, 6)),
    ("NVIDIA L40S", None, (8, 9)),
    ("NVIDIA L4", None, (8, 9)),
    ("NVIDIA B200", None, (10, 0)),
    ("Tesla V100-SXM2-32GB", None, (7, 0)),
    ("Tesla T4", None, (7, 5)),
    ("NVIDIA H200", "9.0", (9, 0)),
    ("NVIDIA Something New", "10.3", (10, 3)),       # nvidia-smi's word wins over the table
    ("NVIDIA Something New", None, None),
    (None, None, None),
])
def test_capability_of(name, reported, expected):
    assert gpu_arch.capability_of(name, reported) == expected


@pytest.mark.parametrize("arch_list, capability, expected", [
    (["sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"], (9, 0), False),  # torch 1.13.1+cu117 on H100
    (["sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"], (8, 0), True),   # on A100
    (["sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86"], (8, 9), True),   # sm_86 code runs on 8.9
    (["sm_80"], (8, 6), True),
    (["sm_86"], (8, 0), False),                      # never a higher minor
    (["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"], (9, 0), True),
    ([], (9, 0), False),
])
def test_torch_runs_on(arch_list, capability, expected):
    assert gpu_arch.torch_runs_on(arch_list, capability) is expected


@pytest.mark.parametrize("toolkit, capability, expected", [
    (["3.5", "8.7"], (9, 0), False),                 # CUDA 11.7: no Hopper
    (["3.5", "8.7"], (8, 0), True),
    (["3.5", "8.7"], (8, 9), False),                 # Ada came with 11.8 too
    (["5.0", "9.0"], (9, 0), True),
    (["7.5", "12.0"], (7, 0), False),                # CUDA 13 dropped Volta
])
def test_toolkit_builds_for(toolkit, capability, expected):
    assert gpu_arch.toolkit_builds_for(toolkit, capability) is expected


@pytest.mark.parametrize("profile, capability, fits", [
    ("cu117", (9, 0), False),
    ("cu117", (8, 0), True),
    ("cu121", (9, 0), True),
    ("cu121", (8, 0), True),
    ("cu130", (9, 0), True),
    ("cu130", (7, 0), False),
    ("cpu", (9, 0), False),
])
def test_judge_each_profile(profile, capability, fits):
    assert gpu_arch.judge(profile, capability)["fits"] is fits


@pytest.mark.parametrize("capability, expected", [
    ((9, 0), ["cu121", "cu130"]),
    ((8, 0), ["cu117", "cu121", "cu130"]),
    ((7, 0), ["cu117", "cu121"]),
    ((3, 0), []),
])
def test_profiles_for(capability, expected):
    assert gpu_arch.profiles_for(capability) == expected


def test_refusal_names_gpu_capability_arch_list_and_the_profiles_that_fit():
    text = gpu_arch.refusal("cu117", "H100", (9, 0))
    assert text.startswith("stack profile cu117 cannot run on H100 (compute capability 9.0)")
    assert "sm_37 sm_50 sm_60 sm_70 sm_75 sm_80 sm_86" in text
    assert "3.5 to 8.7" in text
    assert text.endswith("set megatron_stack_profile to cu121 or cu130")


@pytest.mark.parametrize("profile, gpu, capability", [
    ("cu117", "A100-80GB", (8, 0)),
    ("cu130", "H200", (9, 0)),
    ("cpu", "H200", (9, 0)),                         # no GPU code: nothing to refuse here
])
def test_no_refusal_where_the_profile_fits(profile, gpu, capability):
    assert gpu_arch.refusal(profile, gpu, capability) is None


@pytest.mark.parametrize("name", [n for n in profiles.names() if profiles.PROFILES[n]["accelerator"] == "cuda"])
def test_every_gpu_profile_has_an_arch_entry_with_a_source(name):
    arch = profiles.PROFILES[name]["arch"]
    assert arch["source"] and isinstance(arch["verified"], bool)
    assert all(gpu_arch.parse_capability(a) for a in arch["torch"])
    low, high = (gpu_arch.parse_capability(c) for c in arch["toolkit"])
    assert low and high and low <= high
    # A torch wheel of a CUDA release carries no target that release's nvcc cannot build.
    assert all(gpu_arch.parse_capability(a) <= high for a in arch["torch"])
