# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The burn-in's fabric check with ansible-playbook on this machine: megatron_launch's
fabric.yml decides from the infiniband role's local facts whether to run the role's
fabric_check, and burnin_report.yml carries its figures in the report. Two inventory hosts,
both local connections, each with its own facts directory."""
import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from ansible_collections.megatron_ds.cluster.tests.support import tools

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import fabric

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAYBOOK = tools.find("ansible-playbook")
FIXTURES = os.path.join(REPO, "tests", "unit", "plugins", "module_utils", "_launch", "fixtures")

PLAY = """
- name: Burn-in fabric test
  hosts: nodes
  gather_facts: false
  any_errors_fatal: true
  tasks:
    - name: The burn-in's fabric step
      ansible.builtin.include_role:
        name: megatron_ds.cluster.megatron_launch
        tasks_from: fabric
    - name: The burn-in's report
      ansible.builtin.include_role:
        name: megatron_ds.cluster.megatron_launch
        tasks_from: burnin_report
      vars:
        __megatron_launch_head: node1
        __megatron_launch_nodes: [node1, node2]
        __megatron_launch_waited:
          log:
            burnin_results:
              - {hostname: node1, rank: 0, world: 2, tokens_per_s: 100.0, probe_tokens_per_s: 50.0,
                 initial_loss: 10.5, final_loss: 6.2, start_step: 0, final_step: 30}
              - {hostname: node2, rank: 1, world: 2, tokens_per_s: 100.0, probe_tokens_per_s: 49.0}
        megatron_launch_gpus_per_node: 1
        megatron_launch_burnin_log_file: /var/log/megatron/burnin.log
"""


def run(tmp_path, hcas, *extra):
    """Run the play with node1/node2's infiniband facts naming ``hcas`` (None: no facts file)."""
    hosts = {}
    for index, hca in enumerate(hcas, start=1):
        facts = tmp_path / ("facts%d" % index)
        facts.mkdir()
        if hca is not None:
            (facts / "megatron_infiniband.fact").write_text(json.dumps({"nccl_env": {"NCCL_IB_HCA": hca}}))
        hosts["node%d" % index] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                   "infiniband_facts_file": str(facts / "megatron_infiniband.fact")}
    (tmp_path / "hosts.json").write_text(json.dumps({"nodes": {"hosts": hosts}}))
    (tmp_path / "play.yml").write_text(PLAY)
    report = tmp_path / "report.json"
    env = tools.environ(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
                        ANSIBLE_CACHE_PLUGIN="memory")
    proc = subprocess.run([PLAYBOOK, "-i", str(tmp_path / "hosts.json"), str(tmp_path / "play.yml"),
                           "-e", "megatron_launch_burnin_dest=%s" % report] + list(extra),
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False, timeout=300)
    return proc, (json.loads(report.read_text()) if report.exists() else None)


needs_ansible = pytest.mark.skipif(PLAYBOOK is None, reason=tools.missing("ansible-playbook"))


@needs_ansible
@pytest.mark.parametrize("hcas, mode", [
    pytest.param(["=rxe0:1", None], "auto", id="auto-one-node-without-hca"),
    pytest.param([None, None], "auto", id="auto-socket-only-cluster"),
    pytest.param(["mlx5_0:1", "mlx5_0:1"], "never", id="never"),
])
def test_the_burnin_goes_on_without_a_fabric_check(tmp_path, hcas, mode):
    proc, report = run(tmp_path, hcas, "-e", "megatron_launch_burnin_fabric_check=%s" % mode)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert "Fabric check |" not in proc.stdout  # none of the infiniband role's fabric_check tasks ran
    assert report["passed"] is True and report["fabric"] is None


@needs_ansible
def test_always_requires_an_hca_on_every_node_before_any_rank_starts(tmp_path):
    proc, report = run(tmp_path, ["=rxe0:1", None], "-e", "megatron_launch_burnin_fabric_check=always")
    assert proc.returncode != 0
    assert "node2: infiniband fabric check: NCCL_IB_HCA=unset" in proc.stdout, proc.stdout[-3000:]
    assert report is None  # stopped before the burn-in's report


@needs_ansible
def test_the_report_carries_the_fabric_figures(tmp_path):
    pairs = []
    for name in sorted(n for n in os.listdir(FIXTURES) if n.startswith("ib_write_bw-softroce-")):
        node, peer = name.split("-softroce-")[1].split("-to-")
        peer = peer.rsplit("-", 1)[0]
        with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
            pairs.append(dict(fabric.perftest_result(handle.read()), node=node, peer=peer, rc=0))
    summary = fabric.fabric_summary(pairs)
    (tmp_path / "summary.json").write_text(json.dumps({"infiniband_fabric_summary": summary}))
    proc, report = run(tmp_path, [None, None], "-e", "@%s" % (tmp_path / "summary.json"))
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report["fabric"]["min_average_gbps"] == pytest.approx(0.18)
    assert [p["node"] for p in report["fabric"]["pairs"]] == ["simvm-node1", "simvm-node2"]
    assert "fabric (ib_write_bw, one pair at a time):" in proc.stdout
    assert "simvm-node1 -> simvm-node2: 0.18 Gb/s" in proc.stdout
    # The recorded results carry no all-reduce gate figures: the gate says so and does not fail.
    assert (report["fabric_gate"]["ran"], report["fabric_gate"]["passed"]) == (False, True)


@needs_ansible
@pytest.mark.skipif(shutil.which("ss") is None, reason="no ss (iproute2) here: the check waits for the peer's server with it")
def test_a_pair_without_traffic_stops_the_burnin_and_leaves_the_fabric_report(tmp_path):
    """Both nodes have an HCA, so the check runs: a socket of this test stands in for the peer's
    listening perftest server (the nodes are this machine), and the client, which has no RDMA
    device or no perftest here, carries no traffic. The pair is named, its command addresses the
    peer by inventory name (it has neither os_base_cluster_address nor ansible_host), and the
    fabric report is written before the failure."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    fabric_report = tmp_path / "fabric.json"
    try:
        proc, report = run(tmp_path, ["=rxe0:1", "=rxe0:1"], "-e", "infiniband_fabric_check_seconds=1",
                           "-e", "infiniband_fabric_check_port=%d" % listener.getsockname()[1],
                           "-e", "infiniband_fabric_report_file=%s" % fabric_report)
    finally:
        listener.close()
    assert proc.returncode != 0
    assert report is None  # stopped before the burn-in's report
    assert "node1: infiniband fabric check to node2: rc" in proc.stdout, proc.stdout[-3000:]
    summary = json.loads(fabric_report.read_text())
    assert summary["passed"] is False and summary["slowest"] is None
    assert [p["command"].split()[-1] for p in summary["pairs"]] == ["node2", "node1"]
    assert summary["problems"][0].startswith("node1 -> node2: ib_write_bw exited ")
    assert summary["failed_nodes"] == ["node1", "node2"]
