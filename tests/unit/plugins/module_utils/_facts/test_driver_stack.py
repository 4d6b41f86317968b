# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_facts/driver_stack.py and its preflight rows: the user-space driver against the loaded module,
the next boot's kernel against the driver's modules, peermem's symbol errors."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import driver_stack as ds
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts.host import Host
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import matrix as pm
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight.rows import FAIL, PASS, WARN, _Context
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles


@pytest.mark.parametrize("names, resolved, version", [
    (["libnvidia-ml.so.1", "libnvidia-ml.so.535.129.03"], "libnvidia-ml.so.535.129.03", "535.129.03"),
    # the link wins over a leftover file of the old driver
    (["libnvidia-ml.so.535.129.03", "libnvidia-ml.so.535.161.07"], "libnvidia-ml.so.535.161.07", "535.161.07"),
    (["libnvidia-ml.so.535.129.03", "libnvidia-ml.so.535.161.07"], None, None),  # two, no link: unknown
    (["libnvidia-ml.so.580.65.06"], None, "580.65.06"),
    (["libcuda.so.1"], None, None),
])
def test_userspace_version(names, resolved, version):
    assert ds.userspace_version(names, resolved) == version


@pytest.mark.parametrize("text, version", [("535.129.03\n", "535.129.03"), ("", None), (None, None), ("garbage\n", None)])
def test_kernel_module_version(text, version):
    assert ds.kernel_module_version(text) == version


@pytest.mark.parametrize("releases, newest", [
    (["6.1.0-9-amd64", "6.1.0-28-amd64", "6.1.0-13-amd64"], "6.1.0-28-amd64"),
    (["5.15.0-91-generic", "6.8.0-45-generic"], "6.8.0-45-generic"),
    (["6.1.0-28-amd64"], "6.1.0-28-amd64"),
    ([], None),
])
def test_newest_kernel(releases, newest):
    assert ds.newest_kernel(releases) == newest


@pytest.mark.parametrize("files, found", [
    (["nvidia.ko", "nvidia-uvm.ko", "nvidia-peermem.ko"], {"nvidia": True, "nvidia_peermem": True}),
    (["nvidia.ko.zst"], {"nvidia": True, "nvidia_peermem": False}),
    (["e1000e.ko"], {"nvidia": False, "nvidia_peermem": False}),
])
def test_modules_in(files, found):
    assert ds.modules_in(files) == found


KERN_LOG = """\
Dec  7 10:01:02 gpu07 kernel: [   12.1] nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client
Dec  7 10:01:02 gpu07 kernel: [   12.1] nvidia_peermem: Unknown symbol ib_register_peer_memory_client (err -22)
Dec  7 10:05:02 gpu07 kernel: [  312.1] nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client
"""


@pytest.mark.parametrize("text, errors", [
    (KERN_LOG, ["nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client"]),
    ("kernel: eth0: link up\n", []),
    (None, []),
])
def test_symbol_errors(text, errors):
    assert ds.symbol_errors(text) == errors


def _node(root: Path, userspace="535.129.03", module="535.129.03", kernels=None, log=None):
    lib = root / "usr/lib/x86_64-linux-gnu"
    lib.mkdir(parents=True)
    if userspace:
        (lib / ("libnvidia-ml.so." + userspace)).write_text("")
        os.symlink("libnvidia-ml.so." + userspace, str(lib / "libnvidia-ml.so.1"))
    if module:
        (root / "sys/module/nvidia").mkdir(parents=True)
        (root / "sys/module/nvidia/version").write_text(module + "\n")
    for release, modules in (kernels or {}).items():
        folder = root / "lib/modules" / release / "updates/dkms"
        folder.mkdir(parents=True)
        for name in modules:
            (folder / name).write_text("")
    if log:
        (root / "var/log").mkdir(parents=True)
        (root / "var/log/kern.log").write_text(log)


def test_collect_reads_a_node_tree(tmp_path):
    _node(tmp_path, userspace="535.161.07", module="535.129.03",
          kernels={"6.1.0-13-amd64": ["nvidia.ko", "nvidia-peermem.ko"], "6.1.0-28-amd64": []}, log=KERN_LOG)
    host = Host(root=str(tmp_path))
    facts = ds.collect_driver_stack(host.path, host.read_text, "6.1.0-13-amd64")
    assert facts == {
        "userspace_version": "535.161.07", "userspace_library": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.161.07",
        "module_version": "535.129.03", "running_kernel": "6.1.0-13-amd64", "next_kernel": "6.1.0-28-amd64",
        "next_kernel_modules": {"nvidia": False, "nvidia_peermem": False},
        "running_kernel_modules": {"nvidia": True, "nvidia_peermem": True},
        "peermem_symbol_errors": ["nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client"],
    }


def test_collect_on_a_node_without_a_driver(tmp_path):
    host = Host(root=str(tmp_path))
    facts = ds.collect_driver_stack(host.path, host.read_text, None)
    assert facts["userspace_version"] is None and facts["module_version"] is None and facts["next_kernel"] is None


def _ctx(profile="cu121", **options):
    return _Context({}, profiles.get(profile), options)


def _facts(**stack):
    base = {"userspace_version": "535.129.03", "userspace_library": "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.535.129.03",
            "module_version": "535.129.03", "running_kernel": "6.1.0-13-amd64", "next_kernel": "6.1.0-13-amd64",
            "next_kernel_modules": {"nvidia": True, "nvidia_peermem": True},
            "running_kernel_modules": {"nvidia": True, "nvidia_peermem": True}, "peermem_symbol_errors": []}
    base.update(stack)
    return {"driver_stack": base}


@pytest.mark.parametrize("stack, status, words", [
    ({}, PASS, ["kernel module 535.129.03 loaded, user-space 535.129.03"]),
    # unattended-upgrades replaced the libraries under the loaded module
    ({"userspace_version": "535.161.07"}, FAIL, ["user-space 535.161.07", "reboot node3", "nvidia_driver_hold"]),
    ({"module_version": None}, None, []),  # no module loaded: driver.version reports it
])
def test_driver_userspace_row(stack, status, words):
    row = pm.check_driver_userspace(_ctx(), "node3", _facts(**stack))
    if status is None:
        assert row is None
        return
    text = " ".join([row.found, row.expected, row.fix])
    assert row.status == status and row.check == "driver.userspace" and all(w in text for w in words), text


@pytest.mark.parametrize("stack, options, status, words", [
    ({}, {}, PASS, ["runs its newest kernel"]),
    ({"next_kernel": "6.1.0-28-amd64"}, {}, PASS, ["next boot 6.1.0-28-amd64 has nvidia yes"]),
    ({"next_kernel": "6.1.0-28-amd64", "next_kernel_modules": {"nvidia": False, "nvidia_peermem": False}}, {}, FAIL,
     ["would boot without nvidia and nvidia_peermem", "dkms autoinstall -k 6.1.0-28-amd64"]),
    # peermem alone: a failure only where InfiniBand is required
    ({"next_kernel": "6.1.0-28-amd64", "next_kernel_modules": {"nvidia": True, "nvidia_peermem": False}}, {}, WARN,
     ["without nvidia_peermem"]),
    ({"next_kernel": "6.1.0-28-amd64", "next_kernel_modules": {"nvidia": True, "nvidia_peermem": False}},
     {"infiniband_required": True}, FAIL, ["without nvidia_peermem"]),
    ({"running_kernel": None}, {}, None, []),
])
def test_next_boot_row(stack, options, status, words):
    row = pm.check_next_boot(_ctx(**options), "node3", _facts(**stack))
    if status is None:
        assert row is None
        return
    text = " ".join([row.found, row.expected, row.fix])
    assert row.status == status and row.check == "driver.next_boot" and all(w in text for w in words), text


@pytest.mark.parametrize("errors, options, status", [
    (["nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client"], {}, WARN),
    (["nvidia_peermem: disagrees about version of symbol ib_register_peer_memory_client"], {"infiniband_required": True}, FAIL),
    ([], {}, None),
])
def test_peermem_symbols_row(errors, options, status):
    row = pm.check_peermem_symbols(_ctx(**options), "node3", _facts(peermem_symbol_errors=errors))
    assert (row is None) if status is None else (row.status == status and "OFED/DOCA" in row.fix)


@pytest.mark.parametrize("check", [pm.check_driver_userspace, pm.check_next_boot, pm.check_peermem_symbols])
def test_cpu_profile_has_no_driver_rows(check):
    assert check(_ctx("cpu"), "node3", _facts(userspace_version="1.0", peermem_symbol_errors=["x"])) is None
