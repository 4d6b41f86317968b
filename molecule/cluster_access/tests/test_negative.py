"""Bad clusters must stop the run with a message that names the node.

Each case breaks one thing on the running containers, runs ansible-playbook with the molecule
inventory (as an operator would), asserts a non-zero exit and the message, and restores the
containers in ``finally`` so the scenario stays as converge left it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import testinfra

SCENARIO = Path(__file__).resolve().parent.parent
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
NODES = ["node1", "node2", "node3"]


def node(name: str):
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}")


def playbook(name: str, extra_vars: dict | None = None, limit: str | None = None):
    """Run a negative-case playbook; return (rc, combined output)."""
    command = ["ansible-playbook", "-i", INVENTORY, str(SCENARIO / "negative" / name)]
    if extra_vars:
        command += ["-e", json.dumps(extra_vars)]
    if limit:
        command += ["--limit", limit]
    env = dict(os.environ, ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1")
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600, check=False)
    output = result.stdout + result.stderr
    print(output[-4000:])
    return result.returncode, " ".join(output.split())


def test_changed_host_key_is_caught_by_the_ssh_check():
    """node2 is reinstalled (new host key); the pre-launch check must name it, and only it."""
    node2 = node("node2")
    node2.check_output(
        "mkdir -p /root/hostkey-backup && cp -p /etc/ssh/ssh_host_ed25519_key* /root/hostkey-backup/"
        " && rm -f /etc/ssh/ssh_host_ed25519_key*"
        " && ssh-keygen -q -t ed25519 -N '' -f /etc/ssh/ssh_host_ed25519_key"
        " && systemctl restart ssh"
    )
    try:
        rc, output = playbook("verify_ssh.yml")
        assert rc != 0
        assert "node1 (head node): cluster_ssh:" in output
        assert "ssh node2: " in output and "Host key for node2 has changed" in output
        assert "pdsh node2: " in output, "pdsh (no StrictHostKeyChecking of its own) must refuse node2 too"
        for other in ("node1", "node3"):
            assert f"ssh {other}:" not in output and f"pdsh {other}:" not in output
    finally:
        node2.check_output(
            "cp -p /root/hostkey-backup/ssh_host_ed25519_key* /etc/ssh/ && rm -rf /root/hostkey-backup"
            " && systemctl restart ssh"
        )
    rc, output = playbook("verify_ssh.yml")
    assert rc == 0, output


def test_missing_or_different_user_stops_before_any_change():
    """With cluster_ssh_create_user false the role only checks: node2 has the wrong UID, node3 no user."""
    node("node1").check_output("useradd --uid 2001 --user-group --create-home megatron2")
    node("node2").check_output("useradd --uid 2002 --user-group --create-home megatron2")
    try:
        rc, output = playbook(
            "cluster_ssh.yml",
            {
                "cluster_ssh_user": "megatron2",
                "cluster_ssh_group": "megatron2",
                "cluster_ssh_uid": 2001,
                "cluster_ssh_gid": 2001,
                "cluster_ssh_create_user": False,
            },
        )
        assert rc != 0
        assert "node2: found uid 2002, gid 2002, expected uid 2001, gid 2001" in output
        assert "node3: user not found (expected uid 2001, gid 2001)" in output
        assert "node1: found" not in output and "node1: user not found" not in output
        # It stopped before writing a key anywhere.
        assert not node("node1").file("/home/megatron2/.ssh").exists
    finally:
        for name in ("node1", "node2"):
            node(name).run("userdel --remove megatron2")


def test_infiniband_required_without_hca_fails_naming_each_node():
    rc, output = playbook("infiniband.yml", {"infiniband_required": True})
    assert rc != 0
    for name in NODES:
        assert f"{name}: infiniband: no Active InfiniBand/RoCE port under /sys/class/infiniband (found: no HCA)" in output


def _fake_sysfs(host, root: str) -> None:
    """A sysfs fixture: an InfiniBand HCA, a RoCE HCA, and an HCA whose port is down."""
    ports = {
        "mlx5_0": {"state": "4: ACTIVE", "rate": "200 Gb/sec (4X HDR)", "link_layer": "InfiniBand"},
        "mlx5_1": {"state": "4: ACTIVE", "rate": "100 Gb/sec (2X HDR)", "link_layer": "Ethernet"},
        "mlx5_2": {"state": "1: DOWN", "rate": "10 Gb/sec (4X SDR)", "link_layer": "InfiniBand"},
    }
    script = [f"rm -rf {root}"]
    for hca, attrs in ports.items():
        port = f"{root}/{hca}/ports/1"
        script.append(f"mkdir -p {port}/gid_attrs/types {port}/gids")
        script += [f"printf '%s\\n' '{value}' > {port}/{key}" for key, value in attrs.items()]
    roce = f"{root}/mlx5_1/ports/1"
    gids = {
        0: ("IB/RoCE v1", "fe80:0000:0000:0000:0a00:27ff:fe00:0001"),
        1: ("RoCE v2", "fe80:0000:0000:0000:0a00:27ff:fe00:0001"),
        2: ("IB/RoCE v1", "0000:0000:0000:0000:0000:ffff:0a00:0001"),
        3: ("RoCE v2", "0000:0000:0000:0000:0000:ffff:0a00:0001"),
    }
    for index, (kind, gid) in gids.items():
        script.append(f"printf '%s\\n' '{kind}' > {roce}/gid_attrs/types/{index}")
        script.append(f"printf '%s\\n' '{gid}' > {roce}/gids/{index}")
    host.check_output(" && ".join(script))


def test_hca_discovery_and_memlock_check_on_a_sysfs_fixture():
    """node3 with two Active ports (IB + RoCE): memlock below the minimum fails; then the env file."""
    node3 = node("node3")
    root, out = "/tmp/fake-ib", "/tmp/fake-ib-out"
    _fake_sysfs(node3, root)
    variables = {
        "infiniband_required": True,
        "infiniband_sysfs_root": root,
        "infiniband_nccl_env_file": f"{out}/infiniband.env",
        "infiniband_facts_file": f"{out}/infiniband.fact",
    }
    try:
        memlock = json.loads(node3.file("/etc/ansible/facts.d/megatron_infiniband.fact").content_string)["memlock"]
        if memlock != "unlimited":
            rc, output = playbook("infiniband.yml", variables, limit="node3")
            assert rc != 0
            assert (
                f"node3: infiniband: locked-memory limit (ulimit -l) for megatron in a non-interactive ssh session"
                f" is '{memlock}' KiB, expected unlimited" in output
            )
            assert not node3.file(out).exists, "nothing may be written before the check passes"
            variables["infiniband_memlock_min"] = int(memlock)
        rc, output = playbook("infiniband.yml", variables, limit="node3")
        assert rc == 0, output
        env = node3.file(f"{out}/infiniband.env").content_string.splitlines()
        iface = dict(line.split("=", 1) for line in env)["NCCL_SOCKET_IFNAME"]
        assert env == [
            "NCCL_IB_GID_INDEX=3",
            "NCCL_IB_HCA==mlx5_0:1,mlx5_1:1",
            f"NCCL_SOCKET_IFNAME={iface}",
        ]
        facts = json.loads(node3.file(f"{out}/infiniband.fact").content_string)
        assert facts["active_ports"] == 2
        assert [p["rate"] for p in facts["ports"]] == ["200 Gb/sec (4X HDR)", "100 Gb/sec (2X HDR)", "10 Gb/sec (4X SDR)"]
    finally:
        node3.run("rm -rf %s %s", root, out)
