"""os_base refuses an unsupported OS before changing anything (and accepts the supported ones).

The converged nodes are Debian 12, so this test starts its own throwaway container from the same
node image, rewrites its /etc/os-release (which is what Ansible's distribution facts read), and
runs molecule/os_base/unsupported.yml against it with ansible-playbook. It needs no network and
no systemd: the role must stop at its first checks. It does not use testinfra's `host` fixture,
so it runs once per verify, not once per node.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

SCENARIO_DIR = Path(__file__).resolve().parents[1]
PROJECT_DIR = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", SCENARIO_DIR.parents[1]))
IMAGE = os.environ.get("MEGATRON_DS_NODE_IMAGE", "megatron-ds-node:bookworm")
SUPPORTED = "Debian 12, Ubuntu 20.04, Ubuntu 22.04, Ubuntu 24.04"


def _os_release(distro_id: str, name: str, version_id: str, pretty: str) -> str:
    return (
        f'PRETTY_NAME="{pretty}"\nNAME="{name}"\nVERSION_ID="{version_id}"\n'
        f"ID={distro_id}\nID_LIKE=debian\n"
    )


# (row id, files to write, entry point, expected outcome, text the failure must contain)
CASES = [
    (
        "debian-11",
        {"/etc/os-release": _os_release("debian", "Debian GNU/Linux", "11", "Debian GNU/Linux 11 (bullseye)"),
         "/etc/debian_version": "11.11\n"},
        "main", "fail", "runs Debian 11.11 (os_family Debian)",
    ),
    (
        "ubuntu-18.04",
        {"/etc/os-release": _os_release("ubuntu", "Ubuntu", "18.04", "Ubuntu 18.04.6 LTS"),
         "/etc/debian_version": "buster/sid\n"},
        "main", "fail", "runs Ubuntu 18.04 (os_family Debian)",
    ),
    (
        "ubuntu-23.10-not-lts",
        {"/etc/os-release": _os_release("ubuntu", "Ubuntu", "23.10", "Ubuntu 23.10"),
         "/etc/debian_version": "trixie/sid\n"},
        "main", "fail", "runs Ubuntu 23.10 (os_family Debian)",
    ),
    (
        "rocky-9",
        {"/etc/os-release": 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'
                            'VERSION_ID="9.3"\nPRETTY_NAME="Rocky Linux 9.3 (Blue Onyx)"\n',
         "/etc/redhat-release": "Rocky Linux release 9.3 (Blue Onyx)\n"},
        "main", "fail", "runs Rocky 9.3 (os_family RedHat)",
    ),
    (
        "ubuntu-20.04",
        {"/etc/os-release": _os_release("ubuntu", "Ubuntu", "20.04", "Ubuntu 20.04.6 LTS"),
         "/etc/debian_version": "bullseye/sid\n"},
        "assert", "pass", "",
    ),
    (
        "ubuntu-24.04",
        {"/etc/os-release": _os_release("ubuntu", "Ubuntu", "24.04", "Ubuntu 24.04.3 LTS"),
         "/etc/debian_version": "trixie/sid\n"},
        "assert", "pass", "",
    ),
    (
        "debian-12",
        {"/etc/os-release": _os_release("debian", "Debian GNU/Linux", "12", "Debian GNU/Linux 12 (bookworm)"),
         "/etc/debian_version": "12.15\n"},
        "assert", "pass", "",
    ),
]
RELEASE_FILES = ["/etc/os-release", "/etc/debian_version", "/etc/redhat-release", "/etc/lsb-release"]


def _docker(*args: str, stdin: str | None = None) -> str:
    return subprocess.run(["docker", *args], input=stdin, text=True, capture_output=True, check=True).stdout


@pytest.fixture(scope="module")
def fake_node(tmp_path_factory):
    name = f"os-base-unsupported-{uuid.uuid4().hex[:8]}"
    # No systemd, no network: the role must stop at its checks.
    _docker("run", "-d", "--name", name, "--hostname", name, "--network", "none", IMAGE, "sleep", "infinity")
    inventory = tmp_path_factory.mktemp("inventory") / "hosts.yml"
    inventory.write_text(
        "all:\n"
        "  children:\n"
        "    megatron_nodes:\n"
        f"      hosts:\n        {name}:\n"
        "          ansible_connection: community.docker.docker\n"
        "          ansible_python_interpreter: /usr/bin/python3\n"
        # no default route (--network none): give the node its address explicitly
        "          os_base_cluster_address: 192.0.2.10\n"
    )
    try:
        yield name, inventory
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True, check=False)


def _run_playbook(inventory: Path, entry: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.update(
        ANSIBLE_CONFIG=str(PROJECT_DIR / "ansible.cfg"),
        ANSIBLE_COLLECTIONS_PATH=str(PROJECT_DIR / ".collections"),
        # The faked facts must never reach the shared on-disk fact cache.
        ANSIBLE_CACHE_PLUGIN="memory",
        ANSIBLE_FORCE_COLOR="0",
        ANSIBLE_NOCOLOR="1",
    )
    playbook = Path(sys.executable).parent / "ansible-playbook"
    return subprocess.run(
        [str(playbook), "-i", str(inventory), str(SCENARIO_DIR / "unsupported.yml"),
         "-e", f"unsupported_os_entry={entry}"],
        env=env, cwd=PROJECT_DIR, text=True, capture_output=True, check=False,
    )


@pytest.mark.parametrize(
    ("files", "entry", "outcome", "message"),
    [pytest.param(files, entry, outcome, message, id=row) for row, files, entry, outcome, message in CASES],
)
def test_os_check(fake_node, files, entry, outcome, message):
    name, inventory = fake_node
    script = "rm -f " + " ".join(RELEASE_FILES) + "; " + "; ".join(
        f"printf '%s' '{content}' > {path}" for path, content in files.items()
    )
    _docker("exec", name, "sh", "-c", script)

    result = _run_playbook(inventory, entry)
    output = result.stdout + result.stderr
    recap = re.search(rf"^{re.escape(name)}\s*:\s*ok=\d+\s+changed=(\d+)\s.*failed=(\d+)", output, re.M)
    assert recap, f"no PLAY RECAP for {name}:\n{output}"
    changed, failed = int(recap.group(1)), int(recap.group(2))

    if outcome == "pass":
        assert result.returncode == 0, output
        assert (changed, failed) == (0, 0), output
        return
    assert result.returncode == 2, output
    assert failed == 1 and changed == 0, output
    # The message names the host, what it runs and what is supported.
    flat = " ".join(output.split())
    assert f"os_base: host {name} {message}" in flat, output
    assert f"supported: {SUPPORTED}." in flat, output
    # Nothing was written on the way to the failure.
    leftovers = subprocess.run(
        ["docker", "exec", name, "ls", "/etc/security/limits.d/90-megatron-memlock.conf",
         "/etc/profile.d/megatron-cuda.sh", "/usr/share/pam-configs/megatron-limits"],
        capture_output=True, text=True, check=False,
    )
    assert leftovers.stdout == "", leftovers.stdout
