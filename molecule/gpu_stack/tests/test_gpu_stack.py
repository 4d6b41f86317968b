# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""What the GPU stack roles left on every node, read from the installed files themselves:
binaries are run, headers and manifests parsed, libraries loaded."""
from __future__ import annotations

import json
import os
import re

import pytest

CUDA_HOME = "/usr/local/cuda-11.7"
NCCL_HOME = "/usr/local/nccl-2.16.5"
MIRROR_SITE = os.path.join(os.environ.get("MOLECULE_PROJECT_DIRECTORY", "."), ".cache", "mirror", "site")


def _define(text: str, name: str) -> int:
    match = re.search(r"^#define\s+%s\s+(\d+)" % name, text, re.M)
    assert match, "%s not defined" % name
    return int(match.group(1))


def _mirror_manifest(rel: str) -> dict:
    with open(os.path.join(MIRROR_SITE, rel)) as handle:
        return json.load(handle)


# --- CUDA toolkit (redist) ---------------------------------------------------------------------

def test_ptxas_reports_cuda_11_7_99(host):
    out = host.check_output("/usr/local/cuda/bin/ptxas --version")
    assert "Cuda compilation tools, release 11.7, V11.7.99" in out


def test_default_cuda_link_points_at_11_7(host):
    link = host.file("/usr/local/cuda")
    assert link.is_symlink
    assert link.linked_to == CUDA_HOME


def test_cuda_runtime_header_is_11_7(host):
    header = host.file(CUDA_HOME + "/include/cuda_runtime_api.h").content_string
    assert _define(header, "CUDART_VERSION") == 11070


def test_redist_lib_dir_became_lib64_with_soname_chain(host):
    lib64 = CUDA_HOME + "/lib64"
    assert host.file(lib64 + "/libcudart.so.11.0").is_symlink
    assert host.file(lib64 + "/libcudart.so.11.0").linked_to == lib64 + "/libcudart.so.11.7.99"
    assert host.file(lib64 + "/libcudart.so.11.7.99").is_file
    assert not host.file(CUDA_HOME + "/lib").exists
    # nvcc's own lib64 stays where NVIDIA put it
    assert host.file(CUDA_HOME + "/nvvm/lib64/libnvvm.so").is_file
    assert host.file(CUDA_HOME + "/share/licenses/cuda_nvcc-linux-x86_64-11.7.99-archive/LICENSE").is_file


def test_dynamic_linker_finds_cudart_through_the_default_link(host):
    out = host.check_output("ldconfig -p")
    assert re.search(r"libcudart\.so\.11\.0 .*=> /usr/local/cuda/lib64/libcudart\.so\.11\.0", out)


def test_cudart_loads_and_reports_missing_driver(host):
    # The real runtime, loaded and called: without a GPU driver it must answer
    # cudaErrorInsufficientDriver (35), which only NVIDIA's library knows to say.
    code = (
        "import ctypes; rt = ctypes.CDLL('libcudart.so.11.0'); v = ctypes.c_int(); "
        "print(rt.cudaRuntimeGetVersion(ctypes.byref(v)))"
    )
    assert host.check_output("python3 -c \"%s\"" % code).strip() == "35"


def test_cuda_marker_matches_the_mirror_manifest(host):
    marker = json.loads(host.file(CUDA_HOME + "/.megatron_ds-cuda_toolkit.json").content_string)
    manifest = _mirror_manifest("compute/cuda/redist/redistrib_11.7.1.json")
    assert marker["version"] == "11.7.1"
    assert marker["method"] == "redist"
    assert sorted(marker["components"]) == ["cuda_cudart", "cuda_nvcc"]
    for name, entry in marker["components"].items():
        assert entry["version"] == manifest[name]["version"] == "11.7.99"
        assert entry["sha256"] == manifest[name]["linux-x86_64"]["sha256"]


def test_no_archive_left_staged(host):
    staged = host.file("/var/cache/megatron_ds/nvidia")
    assert staged.is_directory
    assert staged.listdir() == []


# --- cuDNN ---------------------------------------------------------------------------------------

def test_cudnn_header_is_8_6_0(host):
    header = host.file(CUDA_HOME + "/include/cudnn_version.h").content_string
    version = (_define(header, "CUDNN_MAJOR"), _define(header, "CUDNN_MINOR"), _define(header, "CUDNN_PATCHLEVEL"))
    assert version == (8, 6, 0)


def test_cudnn_libraries_in_lib64_and_loadable(host):
    lib64 = CUDA_HOME + "/lib64"
    assert host.file(lib64 + "/libcudnn.so.8").linked_to == lib64 + "/libcudnn.so.8.6.0"
    assert host.file(lib64 + "/libcudnn_ops_infer.so.8.6.0").is_file
    host.check_output("python3 -c \"import ctypes; ctypes.CDLL('%s/libcudnn.so.8')\"" % lib64)


def test_cudnn_marker_records_the_cuda11_build(host):
    marker = json.loads(host.file(CUDA_HOME + "/.megatron_ds-cudnn.json").content_string)
    manifest = _mirror_manifest("compute/cudnn/redist/redistrib_8.6.0.163.json")
    assert marker["version"] == "8.6.0.163"
    assert marker["cuda_major"] == 11
    assert marker["archive"] == "cudnn-linux-x86_64-8.6.0.163_cuda11-archive.tar.xz"
    assert marker["sha256"] == manifest["cudnn"]["linux-x86_64"]["cuda11"]["sha256"]


# --- NCCL ----------------------------------------------------------------------------------------

def test_nccl_header_is_2_16_5(host):
    header = host.file(NCCL_HOME + "/include/nccl.h").content_string
    assert (_define(header, "NCCL_MAJOR"), _define(header, "NCCL_MINOR"), _define(header, "NCCL_PATCH")) == (2, 16, 5)


def test_nccl_library_reports_2_16_5(host):
    code = (
        "import ctypes; n = ctypes.CDLL('libnccl.so.2'); v = ctypes.c_int(); "
        "assert n.ncclGetVersion(ctypes.byref(v)) == 0; print(v.value)"
    )
    assert host.check_output("python3 -c \"%s\"" % code).strip() == "21605"


def test_nccl_default_link_and_linker_entry(host):
    assert host.file("/usr/local/nccl").linked_to == NCCL_HOME
    conf = host.file("/etc/ld.so.conf.d/010-megatron-nccl.conf")
    assert "/usr/local/nccl/lib" in conf.content_string.splitlines()
    assert re.search(r"libnccl\.so\.2 .*=> /usr/local/nccl/lib/libnccl\.so\.2", host.check_output("ldconfig -p"))


def test_nccl_env_file(host):
    env = host.file("/etc/megatron/nccl.env")
    assert env.mode == 0o644
    assert env.user == "root"
    pairs = dict(
        line.split("=", 1) for line in env.content_string.splitlines() if line and not line.startswith("#")
    )
    assert pairs == {
        "NCCL_DEBUG": "INFO",
        "NCCL_IB_HCA": "mlx5_0,mlx5_1",
        "NCCL_NVLS_ENABLE": "0",
        "NCCL_SOCKET_IFNAME": "eth0",
    }


# --- NVIDIA driver: detection, decisions, pins, holds (no kernel driver in a container) ---------

def _report(host) -> dict:
    return json.loads(host.file("/etc/megatron/nvidia_driver.json").content_string)


def test_driver_role_touched_no_kernel_in_a_container(host):
    report = _report(host)
    assert report["detected"]["in_container"] is True
    assert report["plan"]["gpu_tasks"] is False
    assert not host.file("/etc/modprobe.d/blacklist-nouveau.conf").exists
    assert not host.package("nvidia-kernel-dkms").is_installed
    assert not host.file("/etc/apt/sources.list.d/nvidia-cuda.sources").exists


@pytest.mark.parametrize("name, action, target, reason", [
    ("node1", "keep", "515.65.01", ">= minimum 515.65.01: left alone"),
    ("node2", "install", "515.65.01", "found 510.47.03, below the profile's minimum 515.65.01"),
    ("node3", "keep", "535.261.03", ">= minimum 515.65.01: left alone"),
])
def test_driver_decision(host, name, action, target, reason):
    if host.backend.get_hostname() != name:
        pytest.skip("decision for %s" % name)
    plan = _report(host)["plan"]
    assert (plan["action"], plan["target"]) == (action, target)
    assert reason in plan["reason"]


def test_fabric_manager_pinned_to_the_exact_driver(host):
    pref = host.file("/etc/apt/preferences.d/megatron-nvidia-fabricmanager.pref")
    if host.backend.get_hostname() != "node1":
        assert not pref.exists
        return
    lines = [line for line in pref.content_string.splitlines() if not line.startswith("#")]
    assert lines == [
        "Package: nvidia-fabricmanager-515 libnvidia-nscq-515",
        "Pin: version 515.65.01-*",
        "Pin-Priority: 1001",
    ]
    fm = _report(host)["plan"]["fabricmanager"]
    assert fm["enabled"] is True and fm["version"] == "515.65.01"
    # apt parses it: a malformed preferences file makes every apt command fail.
    policy = host.run("apt-cache policy")
    assert policy.rc == 0 and "preferences" not in policy.stderr


def test_driver_install_pin_only_where_an_install_is_due(host):
    pref = host.file("/etc/apt/preferences.d/megatron-nvidia-driver.pref")
    if host.backend.get_hostname() != "node2":
        assert not pref.exists
        return
    assert "Pin: version 515.65.01-*" in pref.content_string.splitlines()
    assert "Package: *nvidia* cuda-drivers* libcuda1 libnvcuvid1 libnvoptix1" in pref.content_string


def test_debian_driver_userspace_detected_and_held(host):
    if host.backend.get_hostname() != "node3":
        pytest.skip("node3 carries Debian's nvidia-smi")
    report = _report(host)
    # The real nvidia-smi runs, and fails: NVML finds no driver in a container.
    assert "Failed to initialize NVML" in report["detected"]["nvidia_smi"]
    held = set(report["plan"]["hold_packages"])
    assert {"nvidia-smi", "libnvidia-ml1", "nvidia-alternative"} <= held
    # Named like the driver but not at its version: stays upgradable.
    assert "nvidia-installer-cleanup" not in held
    # Multi-arch packages are listed as name:arch.
    selections = {
        name.split(":")[0]: state
        for name, state in (line.split() for line in host.check_output("dpkg --get-selections").splitlines())
    }
    assert all(selections[pkg] == "hold" for pkg in held)
    assert selections["nvidia-installer-cleanup"] == "install"
