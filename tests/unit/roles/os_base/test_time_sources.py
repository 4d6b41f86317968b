# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""os_base's chrony sources file (os_base_time_servers): the rendered lines, and chronyd's own
parse of them (the role's template task validates with ``chronyd -p -f``)."""
from __future__ import annotations

import os
import pathlib
import shutil
import subprocess

import jinja2
import pytest

ROLE = pathlib.Path(__file__).resolve().parents[4] / "roles" / "os_base"
# chronyd from Debian's package: the node's, or the copy scripts/sim-vm unpacks for its time server.
CHRONYD = shutil.which("chronyd") or next(
    (str(p) for p in (ROLE.parents[1] / ".cache" / "simvm" / "chrony" / "root" / "usr" / "sbin").glob("chronyd")),
    None)


def render(servers):
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(ROLE / "templates")), keep_trailing_newline=True,
                             trim_blocks=True)
    return env.get_template("megatron.sources.j2").render(os_base_time_servers=servers)


TABLE = [
    pytest.param(["10.0.2.2 port 12300 iburst"], True, id="harness-server"),
    pytest.param(["ntp1.example.com iburst", "ntp2.example.com iburst maxpoll 8"], True, id="two-site-servers"),
    pytest.param(["10.0.2.2 port"], False, id="port-without-number"),
    pytest.param(["ntp1.example.com iburts"], False, id="misspelt-option"),
]


@pytest.mark.parametrize("servers, valid", TABLE)
def test_one_server_line_per_entry(servers, valid):
    lines = render(servers).splitlines()
    assert lines[0].startswith("# Managed by megatron_ds.cluster.os_base")
    assert lines[1:] == ["server %s" % s for s in servers]


@pytest.mark.skipif(CHRONYD is None, reason="no chronyd here (Debian's chrony package, or make vm-test's copy)")
@pytest.mark.parametrize("servers, valid", TABLE)
def test_chronyd_parses_the_file(tmp_path, servers, valid):
    path = tmp_path / "megatron.sources"
    path.write_text(render(servers), encoding="utf-8")
    proc = subprocess.run([CHRONYD, "-p", "-f", str(path)], capture_output=True, text=True, check=False,
                          env=dict(os.environ, TZ="UTC"))
    assert (proc.returncode == 0) is valid, proc.stderr
    if not valid:
        assert "Could not parse server directive" in proc.stderr
