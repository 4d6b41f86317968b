# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Unit tables for the NCCL_* environment a rank gets on a node (module_utils/_facts/nccl_env.py),
read from a fake node tree as gpu_stack_facts reads it."""
from __future__ import annotations

from pathlib import Path
from typing import Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import collect as gf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import nccl_env as ne

PASSWD = "root:x:0:0:root:/root:/bin/bash\nmegatron:x:1001:1001::/home/megatron:/bin/bash\n"
# What the nccl and infiniband roles write (roles/nccl, roles/infiniband/templates/infiniband.env.j2)
ROLE_FILES = {
    "/etc/megatron/nccl.env": "NCCL_DEBUG=WARN\n",
    "/etc/megatron/nccl.d/infiniband.env": "NCCL_IB_HCA==mlx5_0:1\nNCCL_SOCKET_IFNAME=eth1\n",
}


def _node(tmp_path: Path, files: Dict[str, str]) -> gf.Host:
    for path, text in dict({"/etc/passwd": PASSWD}, **files).items():
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return gf.Host(root=str(tmp_path), run=lambda argv, timeout: (127, "", "no process may run"), timeout=5)


@pytest.mark.parametrize("text, expected", [
    ("NCCL_ALGO=Tree\n", [("NCCL_ALGO", "Tree")]),
    ("export NCCL_IB_DISABLE=1  # appended by hand\n", [("NCCL_IB_DISABLE", "1")]),
    ("NCCL_SOCKET_IFNAME=\"^lo,docker0\"\nNCCL_DEBUG='INFO'\n",
     [("NCCL_SOCKET_IFNAME", "^lo,docker0"), ("NCCL_DEBUG", "INFO")]),
    ("  if true; then\n    export NCCL_P2P_LEVEL=NVL; fi\n", [("NCCL_P2P_LEVEL", "NVL")]),
    # everything else stays on the node
    ("HF_TOKEN=secret\nPATH=/usr/bin\n# NCCL_ALGO=Ring\nMY_NCCL_X=1\n", []),
    ("NCCL_EMPTY=\n", [("NCCL_EMPTY", "")]),
])
def test_parse_assignments(text, expected):
    assert ne.parse_assignments(text) == expected


@pytest.mark.parametrize("files, values, sources", [
    # the roles' files alone
    ({}, {"NCCL_DEBUG": "WARN", "NCCL_IB_HCA": "=mlx5_0:1", "NCCL_SOCKET_IFNAME": "eth1"},
     {"NCCL_DEBUG": "/etc/megatron/nccl.env"}),
    # the drift: two settings appended to this node's nccl.env
    ({"/etc/megatron/nccl.env": "NCCL_DEBUG=WARN\nNCCL_IB_DISABLE=1\nNCCL_ALGO=Tree\n"},
     {"NCCL_IB_DISABLE": "1", "NCCL_ALGO": "Tree"}, {"NCCL_ALGO": "/etc/megatron/nccl.env"}),
    # the training user's ~/.bashrc and /etc/environment count too
    ({"/home/megatron/.bashrc": "export NCCL_NET_GDR_LEVEL=PHB\n", "/etc/environment": "NCCL_P2P_DISABLE=1\n"},
     {"NCCL_NET_GDR_LEVEL": "PHB", "NCCL_P2P_DISABLE": "1"},
     {"NCCL_NET_GDR_LEVEL": "/home/megatron/.bashrc", "NCCL_P2P_DISABLE": "/etc/environment"}),
    # the launcher's files apply last: they win over the shell's value
    ({"/home/megatron/.bashrc": "export NCCL_DEBUG=INFO\n"}, {"NCCL_DEBUG": "WARN"}, {"NCCL_DEBUG": "/etc/megatron/nccl.env"}),
    # another user's files are not read
    ({"/root/.bashrc": "export NCCL_ALGO=Ring\n"}, {"NCCL_DEBUG": "WARN"}, {}),
])
def test_the_environment_a_rank_gets(tmp_path, files, values, sources):
    host = _node(tmp_path, dict(ROLE_FILES, **files))
    env = ne.collect_nccl_env(host, "megatron", "/etc/megatron/nccl.env", "/etc/megatron/nccl.d")
    assert {k: env["values"][k] for k in values} == values
    assert {k: env["sources"][k] for k in sources} == sources
    assert env["error"] is None and "NCCL_ALGO" not in env["values"] or "NCCL_ALGO" in values
    assert env["read"][-2:] == ["/etc/megatron/nccl.env", "/etc/megatron/nccl.d/infiniband.env"]


def test_an_unknown_user_says_so(tmp_path):
    env = ne.collect_nccl_env(_node(tmp_path, ROLE_FILES), "nobody-here", "/etc/megatron/nccl.env", None)
    assert env["error"] == "user nobody-here is not in /etc/passwd: its shell files were not read"
    assert env["values"] == {"NCCL_DEBUG": "WARN"}


def test_the_facts_call_reports_it(tmp_path):
    host = _node(tmp_path, ROLE_FILES)
    facts = gf.collect(host, training_user="megatron", nccl_env_file="/etc/megatron/nccl.env",
                       nccl_env_dir="/etc/megatron/nccl.d")
    assert facts["nccl_env"]["user"] == "megatron"
    assert facts["nccl_env"]["values"]["NCCL_SOCKET_IFNAME"] == "eth1"
    assert not [e for e in facts["errors"] if e.startswith("nccl_env")]
