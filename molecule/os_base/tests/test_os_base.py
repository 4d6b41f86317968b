"""Verify the os_base role on the converged nodes (testinfra, run by molecule verify)."""
from __future__ import annotations

import re
import time

import pytest

PACKAGES = [
    # the guide's system dependencies
    "build-essential",
    "cmake",
    "git",
    "wget",
    # what later roles build with
    "python3-venv",
    "python3-dev",
    "ninja-build",
    "pybind11-dev",
    "python3-pybind11",
    "python3-distutils",  # Debian 12 (Python 3.11)
    "g++",
    "make",
    "chrony",
]
NODES = ["node1", "node2", "node3"]
CUDA_PROFILE = "/etc/profile.d/megatron-cuda.sh"
LIMITS_FILE = "/etc/security/limits.d/90-megatron-memlock.conf"
LOGIN_USERS = ["root", "mdsuser"]  # mdsuser comes from prepare.yml


def test_packages_installed(host):
    # One dpkg-query for the whole list: a call per package costs a docker exec each.
    query = "dpkg-query -W -f '${Package} ${db:Status-Status}\\n' " + " ".join(["%s"] * len(PACKAGES))
    out = host.run(query, *PACKAGES).stdout
    installed = {line.split()[0] for line in out.splitlines() if line.endswith(" installed")}
    assert sorted(set(PACKAGES) - installed) == []


def test_toolchain_builds_a_pybind11_extension(host):
    """What Megatron's dataset helpers do: g++ + pybind11 + python3-dev -> an importable module."""
    src = (
        "#include <pybind11/pybind11.h>\n"
        "int add(int a, int b) { return a + b; }\n"
        "PYBIND11_MODULE(osbase_probe, m) { m.def(\"add\", &add); }\n"
    )
    script = (
        "set -eu; d=$(mktemp -d); trap 'rm -rf \"$d\"' EXIT; cd \"$d\"; "
        f"printf '%s' '{src}' > probe.cpp; "
        "g++ -O0 -shared -fPIC -std=c++17 $(python3 -m pybind11 --includes) probe.cpp "
        "-o osbase_probe$(python3-config --extension-suffix); "
        "python3 -c 'import osbase_probe; print(osbase_probe.add(2, 3))'"
    )
    assert host.check_output("bash -c %s", script).strip() == "5"


def test_python_venv_works(host):
    out = host.check_output(
        "d=$(mktemp -d) && python3 -m venv \"$d/v\" && \"$d/v/bin/python\" -c 'import sys; print(sys.prefix)'"
        " && rm -rf \"$d\""
    )
    assert out.strip().endswith("/v")


def test_no_kernel_headers_in_a_container(host):
    """auto: the kernel belongs to the Docker host, so no linux-headers-* package here."""
    out = host.run("dpkg-query -W -f '${Package} ${Status}\\n' 'linux-headers-*'")
    installed = [line for line in out.stdout.splitlines() if line.endswith("install ok installed")]
    assert installed == []


def test_memlock_limits_file(host):
    f = host.file(LIMITS_FILE)
    assert f.is_file and f.user == "root" and f.mode == 0o644
    rows = {tuple(line.split()) for line in f.content_string.splitlines() if line and not line.startswith("#")}
    assert rows == {
        ("*", "soft", "memlock", "unlimited"),
        ("*", "hard", "memlock", "unlimited"),
        ("root", "soft", "memlock", "unlimited"),
        ("root", "hard", "memlock", "unlimited"),
    }


def test_pam_limits_in_common_session(host):
    content = host.file("/etc/pam.d/common-session").content_string
    assert re.search(r"(?m)^session\s+required\s+pam_limits\.so", content)
    # Written by pam-auth-update, not by hand, so later package upgrades still manage the file.
    assert "megatron-limits" in host.file("/var/lib/pam/seen").content_string


def _memlock_ceiling_kib(host) -> str:
    """The container runtime's hard memlock limit (of PID 1), as `ulimit -l` prints it."""
    for line in host.file("/proc/1/limits").content_string.splitlines():
        if line.startswith("Max locked memory"):
            hard = line.split()[4]
            return "unlimited" if hard == "unlimited" else str(int(hard) // 1024)
    raise AssertionError("no 'Max locked memory' row in /proc/1/limits")


@pytest.mark.parametrize("user", LOGIN_USERS)
def test_memlock_in_login_session(host, user):
    """`ulimit -l` in a login session (su -, through PAM) is unlimited.

    `docker exec bash -lc` passes through no PAM session, so the login goes through `su -`, as
    ssh/pdsh logins go through sshd's PAM stack. A container can only be raised to the ceiling
    its runtime set (`--ulimit memlock`), and raising past it needs CAP_SYS_RESOURCE, which
    these test containers (and this Docker host) lack. Where the ceiling is below unlimited, the
    test checks the next best thing: pam_limits asked this very session for unlimited (soft=-1,
    hard=-1) and the kernel refused it, so on a node or a container started with
    `--ulimit memlock=-1:-1` the session gets unlimited.
    """
    ceiling = _memlock_ceiling_kib(host)
    # $PPID in the login shell is the su process, which opened the PAM session.
    out = host.check_output(f"su - {user} -c 'echo $PPID; ulimit -Sl; ulimit -Hl; bash -lc \"ulimit -l\"'")
    su_pid, soft, hard, login_shell = out.split()
    if ceiling == "unlimited":
        assert (soft, hard, login_shell) == ("unlimited",) * 3
        return
    assert (soft, hard, login_shell) == (ceiling,) * 3
    wanted = "Could not set limit for 'memlock' to soft=-1, hard=-1"
    journal = ""
    for _attempt in range(20):  # journald takes the syslog datagram asynchronously
        journal = host.run(f"journalctl --no-pager -o cat _PID={su_pid}").stdout
        if wanted in journal:
            break
        time.sleep(0.5)
    assert wanted in journal, f"pam_limits did not ask for unlimited memlock in su session {su_pid}: {journal!r}"


@pytest.mark.parametrize("shell", ["sh", "bash"])
def test_cuda_profile_is_idempotent_when_sourced_twice(host, shell):
    script = (
        f". {CUDA_PROFILE}; . {CUDA_PROFILE}; "
        'printf "%s\\n%s\\n" "$PATH" "$LD_LIBRARY_PATH"'
    )
    out = host.check_output(f"env -u LD_LIBRARY_PATH PATH=/usr/bin:/bin {shell} -c '{script}'")
    path, ld_path = out.splitlines()
    assert path.split(":") == ["/usr/local/cuda/bin", "/usr/bin", "/bin"]
    # No empty element (a trailing ':' would put the current directory on the search path).
    assert ld_path == "/usr/local/cuda/lib64"


def test_cuda_profile_reaches_login_shells(host):
    out = host.check_output("su - mdsuser -c 'printf \"%s\\n\" \"$PATH\"'")
    assert out.strip().split(":").count("/usr/local/cuda/bin") == 1
    f = host.file(CUDA_PROFILE)
    assert f.user == "root" and f.mode == 0o644


def test_cuda_profile_keeps_existing_ld_library_path(host):
    out = host.check_output(
        f"env LD_LIBRARY_PATH=/opt/x/lib sh -c '. {CUDA_PROFILE}; . {CUDA_PROFILE}; echo \"$LD_LIBRARY_PATH\"'"
    )
    assert out.strip() == "/usr/local/cuda/lib64:/opt/x/lib"


def _hosts_block(host) -> dict[str, str]:
    content = host.file("/etc/hosts").content_string
    m = re.search(
        r"# BEGIN megatron_ds.cluster os_base: megatron_nodes\n(.*?)# END megatron_ds.cluster os_base: megatron_nodes",
        content,
        re.S,
    )
    assert m, f"no os_base block in /etc/hosts:\n{content}"
    entries = {}
    for line in m.group(1).splitlines():
        address, *names = line.split()
        for name in names:
            entries[name] = address
    return entries


def test_hosts_names_every_node(host):
    entries = _hosts_block(host)
    assert sorted(entries) == NODES
    assert len(set(entries.values())) == len(NODES), f"nodes share an address: {entries}"


def test_hosts_entry_of_this_node_is_its_own_address(host):
    me = host.check_output("hostname")
    addresses = host.interface.default().addresses
    assert _hosts_block(host)[me] in addresses


def test_hosts_names_resolve_to_the_block(host):
    entries = _hosts_block(host)
    for node in NODES:
        resolved = host.check_output(f"getent ahostsv4 {node}").split()[0]
        assert resolved == entries[node]


def test_no_loopback_alias_for_own_name(host):
    assert not re.search(r"(?m)^127\.0\.1\.1\s", host.file("/etc/hosts").content_string)


def test_chrony_enabled(host):
    svc = host.service("chrony")
    assert svc.is_enabled
    virt = host.check_output("systemd-detect-virt --container || true").strip()
    if virt not in ("", "none"):
        # systemd skips it in a container: the host owns the clock (CAP_SYS_TIME).
        assert host.check_output("systemctl show -P ConditionResult chrony") == "no"
    else:
        assert svc.is_running


LIBRARY = "/usr/local/lib/megatron-ds"


def test_the_collections_library_is_installed_and_imports_with_the_nodes_python(host):
    # os_base's library entry point: the controller's module_utils, as the node programs import it.
    marker = host.file(LIBRARY + "/LIBRARY")
    assert marker.is_file and marker.user == "root"
    digest = marker.content_string.splitlines()[0]
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    utils = LIBRARY + "/ansible_collections/megatron_ds/cluster/plugins/module_utils"
    assert host.file(utils + "/_preflight/gate.py").is_file
    assert host.file(utils + "/_preflight/gate.py").mode == 0o644
    probe = host.run(
        "/usr/bin/python3 -I -c 'import sys; sys.path.insert(0, \"%s\"); "
        "from ansible_collections.megatron_ds.cluster.plugins.module_utils._slurm import health; "
        "from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import collect; "
        "print(health.__file__)'" % LIBRARY)
    assert probe.rc == 0, probe.stderr
    assert probe.stdout.strip() == utils + "/_slurm/health.py"


def test_unattended_upgrades_leave_the_gpu_stack_alone(host):
    """apt itself reads the blacklist os_base wrote (roles/os_base/tasks/unattended.yml)."""
    conf = host.file("/etc/apt/apt.conf.d/51megatron-unattended-upgrades")
    assert conf.exists and conf.mode == 0o644 and conf.user == "root"
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    entries = re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "(.*)";$', dump, re.M)
    assert {"nvidia-", "libnvidia-", "cuda-", "libnccl", "linux-image-", "rdma-core"} <= set(entries), dump
