# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""os_base's unattended-upgrades blacklist: the rendered apt.conf file, parsed by apt itself
(apt-config), and the role default's coverage of what breaks a node when upgraded silently."""
from __future__ import annotations

import pathlib
import re
import shutil
import subprocess

import jinja2
import pytest
import yaml

ROLE = pathlib.Path(__file__).resolve().parents[4] / "roles" / "os_base"
DEFAULTS = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["os_base_unattended_upgrades_blacklist"]
# The check of roles/os_base/tasks/unattended.yml, restated: what may go between apt.conf's quotes.
ENTRY = re.compile(r'^[^";\s{}\\]+$')


def render(patterns):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), keep_trailing_newline=True,
                             trim_blocks=True)
    return env.get_template("51megatron-unattended-upgrades.j2").render(
        os_base_unattended_upgrades_blacklist=patterns, ansible_managed="managed")


@pytest.mark.skipif(shutil.which("apt-config") is None, reason="apt-config is not installed (Debian's apt)")
@pytest.mark.parametrize("patterns", [DEFAULTS, ["nvidia-"], ["linux-image-[0-9.]+-amd64"]])
def test_apt_reads_every_entry(tmp_path, patterns):
    conf = tmp_path / "51megatron-unattended-upgrades"
    conf.write_text(render(patterns))
    dump = subprocess.run(["apt-config", "-c", str(conf), "dump", "Unattended-Upgrade::Package-Blacklist"],
                          capture_output=True, text=True, check=True).stdout
    assert re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "(.*)";$', dump, re.M) == patterns


@pytest.mark.parametrize("package, held", [
    ("nvidia-driver-535", True), ("libnvidia-compute-535", True), ("cuda-toolkit-12-1", True),
    ("libcudnn8", True), ("libnccl2", True), ("linux-image-6.1.0-28-amd64", True), ("linux-modules-nvidia-535-generic", True),
    ("mlnx-ofed-kernel-dkms", True), ("doca-ofed", True), ("rdma-core", True), ("libibverbs1", True),
    ("datacenter-gpu-manager", True), ("openssl", False), ("python3", False), ("chrony", False),
])
def test_default_blacklist_covers_the_gpu_stack(package, held):
    # unattended-upgrades matches each entry as a regular expression at the start of the name
    assert any(re.match(p, package) for p in DEFAULTS) is held


@pytest.mark.parametrize("entry, ok", [("nvidia-", True), ("linux-image-[0-9.]+", True), ('x";', False),
                                       ("a b", False), ("a;b", False), ("{", False), ("a\\b", False)])
def test_entry_check(entry, ok):
    assert bool(ENTRY.match(entry)) is ok
