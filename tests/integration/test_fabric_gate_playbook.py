# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/fabric_check.yml --tags allreduce with ansible-playbook on this machine: three
inventory nodes, local connections, each running its rank of files/fabric_allreduce.py (a real
gloo all-reduce of this venv's torch over 127.0.0.1) as the bisection's rounds ask, then the
verdict written to every node's megatron_fabric_verdict_file and to the controller.

No link here can be slowed for one node only (docs/benchmarks.md: the shaped Docker cluster does
that); the site's figure decides instead: one below what loopback carries passes in one round,
one above it fails every group, which names no node (all pairs fail: ambiguous) and acts on none.
"""
import json
import os
import socket
import subprocess
import sys

import pytest

from ansible_collections.megatron_ds.cluster.tests.support import tools

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAYBOOK = tools.find("ansible-playbook")
NODES = ["node1", "node2", "node3"]

pytest.importorskip("torch", reason="the fabric gate's ranks run this venv's torch (gloo)")
needs_ansible = pytest.mark.skipif(PLAYBOOK is None, reason=tools.missing("ansible-playbook"))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run(tmp_path, min_gbps):
    hosts = {}
    for node in NODES:
        facts = tmp_path / ("facts-%s" % node)
        facts.mkdir()
        hosts[node] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "ansible_host": "127.0.0.1", "megatron_job_node_address": "127.0.0.1", "ansible_become": False,
                       "megatron_fabric_verdict_file": str(tmp_path / ("verdict-%s.json" % node))}
    group_vars = {
        "megatron_launch_venv": os.path.dirname(os.path.dirname(sys.executable)),
        "megatron_launch_user": os.environ.get("USER") or "root",
        "megatron_launch_burnin_dir": str(tmp_path / "burnin"),
        "megatron_launch_fabric_gate_dest": str(tmp_path / "verdict.json"),
        "megatron_launch_fabric_gate_min_gbps": min_gbps,
        "megatron_launch_fabric_gate_port": _free_port(),
        "megatron_launch_fabric_gate_timeout": 60,
        "megatron_stack_profile": "cpu",
        "infiniband_facts_file": str(tmp_path / "facts-none" / "megatron_infiniband.fact"),
    }
    (tmp_path / "hosts.json").write_text(json.dumps({"megatron_nodes": {"hosts": hosts, "vars": group_vars}}))
    env = tools.environ(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
                        ANSIBLE_CACHE_PLUGIN="memory")
    proc = subprocess.run([PLAYBOOK, "-i", str(tmp_path / "hosts.json"), os.path.join(REPO, "playbooks", "fabric_check.yml"),
                           "--tags", "allreduce"],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False, timeout=900)
    verdict = tmp_path / "verdict.json"
    return proc, (json.loads(verdict.read_text()) if verdict.exists() else None)


@needs_ansible
def test_a_healthy_fabric_passes_in_one_round_and_every_node_gets_the_verdict(tmp_path):
    proc, verdict = run(tmp_path, 0.001)
    assert proc.returncode == 0, proc.stdout[-4000:]
    assert (verdict["healthy"], verdict["rounds"], verdict["named"]) == (True, 1, {})
    world = verdict["world"]
    assert world["nodes"] == NODES and world["passed"] and world["measured"] > 0.001
    assert world["threshold"]["origin"] == "site override"
    assert "all-reduce over node1+node2+node3, one rank per node (gloo, 3 ranks, 64 MiB)" in world["line"]
    for node in NODES:
        assert json.loads((tmp_path / ("verdict-%s.json" % node)).read_text()) == verdict
    assert "Fabric gate passed on 3 node(s)" in proc.stdout


@needs_ansible
def test_every_group_below_the_figure_fails_and_names_no_node_to_act_on(tmp_path):
    proc, verdict = run(tmp_path, 10000.0)
    assert proc.returncode != 0
    assert (verdict["healthy"], verdict["ambiguous"], verdict["named"]) == (False, True, {})
    # The world, then each of the three pairs (they overlap: one a round), within the walk's bound.
    assert [len(result["nodes"]) for result in verdict["results"]] == [3, 2, 2, 2]
    assert verdict["rounds"] == 4
    assert all(not result["passed"] and "expected >= 1e+04 GB/s (site override" in result["line"]
               for result in verdict["results"])
    assert "Fabric gate failed:" in proc.stdout and "every pair fails" in proc.stdout, proc.stdout[-4000:]
