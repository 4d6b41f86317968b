"""Cluster access on the three nodes, checked the way the DeepSpeed launcher uses it.

Per-node tests take testinfra's ``host`` fixture (run once per node); cluster tests open the
nodes they need through the molecule inventory and run once.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import pytest
import testinfra

from ansible_collections.megatron_ds.cluster.tests.support import secret_scan

NODES = ["node1", "node2", "node3"]
HEAD = "node1"
USER = "megatron"
UID = 2000
HOME = f"/home/{USER}"
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
DATASET_SRC = Path(os.environ["MOLECULE_EPHEMERAL_DIRECTORY"]) / "dataset"
DATASET_DEST = "/data/megatron/dataset"
CACHE_SRC = "/var/tmp/megatron-index-cache"
CACHE_DEST = "/data/megatron/index-cache"
FACTS_FILE = "/etc/ansible/facts.d/megatron_infiniband.fact"
NCCL_ENV_FILE = "/etc/megatron/nccl.d/infiniband.env"
# Read before any test runs, which stops the logging: the tests' own Ansible calls (reading the
# private key back) are not the collection's output (tests/support/secret_scan.py).
secret_scan.converge_log()


def node(name: str):
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}")


def as_user(host, command: str):
    """Run a shell command as the training user, without a terminal and without PDSH_RCMD_TYPE."""
    return host.run(
        "timeout 60 runuser -u %s -- env -u PDSH_RCMD_TYPE bash -c %s </dev/null",
        USER,
        command,
    )


def sha256_tree(host, path: str) -> str:
    result = host.check_output(
        "cd %s && find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum", path
    )
    return result


# --- per node -----------------------------------------------------------------------------


def test_training_user_is_the_same_unprivileged_user(host):
    user = host.user(USER)
    assert user.exists
    assert user.uid == UID
    assert user.gid == UID
    assert user.home == HOME
    assert user.groups == [USER], "the training user must not be in sudo or any admin group"


def test_cluster_key_files_are_private(host):
    ssh_dir = host.file(f"{HOME}/.ssh")
    assert ssh_dir.is_directory
    assert ssh_dir.user == USER
    assert ssh_dir.mode == 0o700
    for name in ("id_ed25519", "authorized_keys"):
        key = host.file(f"{HOME}/.ssh/{name}")
        assert key.user == USER
        assert key.mode == 0o600, f"{name} is {oct(key.mode)}"
    assert host.file(f"{HOME}/.ssh/id_ed25519").content_string.startswith(
        "-----BEGIN OPENSSH PRIVATE KEY-----"
    )


def private_key_lines(host) -> list:
    """The base64 lines of the cluster's private key, each a piece of the secret, but the first:
    every unencrypted ed25519 key in OpenSSH's format starts with the same bytes."""
    text = host.file(f"{HOME}/.ssh/id_ed25519").content_string
    return [line for line in text.splitlines() if line and not line.startswith("-----")][1:]


def test_the_cluster_private_key_is_in_no_log_no_diff_and_no_other_file(host):
    """The head node made the key and the others received it through the controller: no line of
    it in the logged runs (their --diff included), in a node's journal, or in a file of the node
    that others may read."""
    lines = private_key_lines(host)
    assert len(lines) >= 2
    assert secret_scan.in_log(lines) == []
    assert secret_scan.journal_copies(host, lines) == []
    assert secret_scan.readable_copies(host, lines) == []


def test_known_hosts_holds_every_nodes_real_key(host):
    known = host.file("/etc/ssh/ssh_known_hosts")
    assert known.mode == 0o644
    lines = [line for line in known.content_string.splitlines() if line and not line.startswith("#")]
    for name in NODES:
        real = node(name).file("/etc/ssh/ssh_host_ed25519_key.pub").content_string.split()[:2]
        address = node(name).check_output("hostname -I").split()[0]
        entries = [line.split() for line in lines if name in line.split()[0].split(",")]
        assert len(entries) == 1, f"{name}: expected one known_hosts line, found {len(entries)}"
        names, key = entries[0][0].split(","), entries[0][1:3]
        assert key == real, f"{name}: known_hosts key differs from the node's host key"
        assert address in names, f"{name}: its address {address} is missing from known_hosts"


def test_pdsh_defaults_to_ssh_in_every_session(host):
    assert host.package("pdsh").is_installed
    assert host.file("/etc/pdsh/rcmd_default").content_string == "ssh\n"
    assert "export PDSH_RCMD_TYPE=ssh" in host.file("/etc/profile.d/megatron-pdsh.sh").content_string
    assert "PDSH_RCMD_TYPE=ssh" in host.file("/etc/environment").content_string.splitlines()


def test_launcher_workdir_and_python_exist(host):
    workdir = host.file("/opt/megatron")
    assert workdir.is_directory
    assert workdir.user == USER
    assert host.file("/usr/bin/python3").exists


def test_rdma_stack_is_installed(host):
    for package in ("rdma-core", "ibverbs-utils", "infiniband-diags", "perftest"):
        assert host.package(package).is_installed, package
    assert host.exists("ibv_devinfo")
    assert host.exists("ib_write_bw")


def test_nccl_env_file_is_deepspeed_env_safe(host):
    env = host.file(NCCL_ENV_FILE)
    assert env.mode == 0o644
    lines = env.content_string.splitlines()
    # .deepspeed_env crashes on blank lines and comments (docs/upstream-facts.md §D3).
    assert all(re.fullmatch(r"NCCL_[A-Z_]+=\S+", line) for line in lines), lines
    values = dict(line.split("=", 1) for line in lines)
    default_iface = host.check_output("ip -o -4 route show default").split(" dev ")[1].split()[0]
    assert values["NCCL_SOCKET_IFNAME"] == default_iface
    # No HCA in a container: nothing IB-specific may be claimed.
    assert "NCCL_IB_HCA" not in values
    assert "NCCL_IB_GID_INDEX" not in values


def test_infiniband_facts_report_no_hca(host):
    facts = json.loads(host.file(FACTS_FILE).content_string)
    assert facts["ports"] == []
    assert facts["active_ports"] == 0
    assert facts["required"] is False
    assert facts["peermem_loaded"] is False
    assert facts["memlock_via"] == "ssh"
    assert re.fullmatch(r"unlimited|[0-9]+", facts["memlock"])


def test_nfs_client_is_configured(host):
    assert host.package("nfs-common").is_installed
    fstab = [line.split() for line in host.file("/etc/fstab").content_string.splitlines()]
    entry = [fields for fields in fstab if len(fields) > 2 and fields[1] == "/shared"]
    assert entry == [["node1:/export/megatron", "/shared", "nfs", "rw,hard,noatime,nfsvers=4.1,_netdev", "0", "0"]]


def test_data_and_checkpoint_dirs_belong_to_the_user(host):
    for path in ("/shared/data", "/shared/checkpoints", DATASET_DEST, CACHE_DEST):
        directory = host.file(path)
        assert directory.is_directory, path
        assert directory.user == USER, path


def test_staged_dataset_matches_the_controller_copy(host):
    expected = {
        "./" + str(path.relative_to(DATASET_SRC)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in DATASET_SRC.rglob("*")
        if path.is_file()
    }
    found = dict(
        reversed(line.split(None, 1)) for line in sha256_tree(host, DATASET_DEST).splitlines()
    )
    assert found == expected


# --- across the cluster, from the head node -----------------------------------------------


def test_pdsh_as_training_user_reaches_every_node():
    result = as_user(node(HEAD), "pdsh -w node1,node2,node3 hostname | sort")
    assert result.rc == 0, result.stderr
    assert result.stdout.splitlines() == [f"{name}: {name}" for name in NODES]


def test_pdsh_started_over_non_interactive_ssh_reaches_every_node():
    # What an operator's `ssh head pdsh ...` does: no login shell, no exported variable.
    result = as_user(node(HEAD), "ssh -o BatchMode=yes node2 'pdsh -w node1,node2,node3 hostname' | sort")
    assert result.rc == 0, result.stderr
    assert result.stdout.splitlines() == [f"{name}: {name}" for name in NODES]


@pytest.mark.parametrize("target", NODES)
def test_ssh_without_prompt_by_name_and_address(target):
    head = node(HEAD)
    address = node(target).check_output("hostname -I").split()[0]
    for name in (target, address):
        result = as_user(
            head, f"ssh -o BatchMode=yes -o StrictHostKeyChecking=yes {name} hostname"
        )
        assert result.rc == 0, f"ssh {name}: {result.stderr}"
        assert result.stdout.strip() == target


def test_deepspeed_runner_ssh_check_passes():
    # deepspeed/launcher/runner.py: `ssh -o PasswordAuthentication=no <first_host> hostname`,
    # then `ssh <first_host> hostname -I` for the master address.
    head = node(HEAD)
    check = as_user(head, f"ssh -o PasswordAuthentication=no {NODES[0]} hostname")
    assert check.rc == 0, check.stderr
    assert check.stdout.strip() == NODES[0]
    master = as_user(head, f"ssh {NODES[0]} hostname -I")
    assert master.rc == 0, master.stderr
    assert re.match(r"\d+\.\d+\.\d+\.\d+", master.stdout.strip())


def test_one_cluster_key_and_one_uid_everywhere():
    keys = {name: node(name).file(f"{HOME}/.ssh/id_ed25519.pub").content_string for name in NODES}
    assert len(set(keys.values())) == 1, keys
    uids = {name: node(name).check_output("id -u %s", USER) for name in NODES}
    assert set(uids.values()) == {str(UID)}, uids


@pytest.mark.parametrize("target", NODES)
def test_memlock_in_ssh_session_is_what_the_role_reported(target):
    # pdsh starts ranks through a non-interactive ssh session; that is where the limit counts.
    # os_base (not applied here) makes it unlimited; the container default is reported as is.
    seen = as_user(node(HEAD), f"ssh -o BatchMode=yes {target} 'ulimit -l'")
    assert seen.rc == 0, seen.stderr
    facts = json.loads(node(target).file(FACTS_FILE).content_string)
    print(f"{target}: ulimit -l in a non-interactive ssh session = {seen.stdout.strip()}")
    assert facts["memlock"] == seen.stdout.strip()


def test_staged_index_cache_is_identical_on_every_node():
    reference = sha256_tree(node(HEAD), CACHE_SRC)
    assert len(reference.splitlines()) == 3
    for name in NODES:
        assert sha256_tree(node(name), CACHE_DEST) == reference, name
