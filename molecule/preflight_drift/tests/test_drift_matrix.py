"""The preflight drift fault matrix (issue 6): one component changed on one node at a time.

For every component, the test changes it on node2 or node3, runs the gate, and checks three
things. The gate fails. Every failure that the clean cluster did not have is on that node.
Among those failures is the component's own row, as printed in the table. Then it restores the
node. The clean cluster must give no failure beyond the ones this test bed explains (see
test_clean_cluster_*). A last run checks that the restores left the cluster clean.

Two kinds of run. Both use the same module and the same action:
  * playbooks/preflight.yml end to end, as an operator runs it (profile `cpu`: the venv). This
    is used for the clean cluster, for the final check, and for the torch and Megatron commit
    drifts;
  * gate.yml (see that file). It judges the same facts against `cpu` and `cu117`, which covers
    the CUDA toolkit, cuDNN, NCCL and the driver stand-in. It re-reads only the changed node;
    the other two nodes' facts come from the clean run.
"""
from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Set, Tuple

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import driver_stack as _driver_stack
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import integrity as _integrity
from conftest import SCENARIO, Cluster, Row, expected_memlock_failures, failures, new_failures

STASH = "/var/tmp/preflight-drift"
FILES = SCENARIO / "files"

# The rows that the cu117 profile fails on a clean node of this test bed. Their cause is the
# venv's torch, a CPU build: torch 1.13.1+cu117, DeepSpeed 0.9.2 and apex with CUDA extensions
# cannot be installed or built without a GPU host and NVIDIA's servers.
CPU_VENV_UNDER_CU117 = {
    "torch.version": ("torch", "2.13.0+cpu"),
    "torch.cuda": ("torch", "None (CPU-only torch)"),
    "deepspeed.version": ("deepspeed", "0.19.6"),
    "apex.cuda_ext": ("apex", "not installed"),
}


# --------------------------------------------------------------------------- the clean cluster
@pytest.fixture(scope="module")
def clean_playbook(cluster: Cluster):
    return cluster.preflight("clean cluster")


@pytest.fixture(scope="module")
def clean_gate(cluster: Cluster):
    return cluster.gate("clean")


def _statuses(rows: Sequence[Row], check: str) -> Set[str]:
    return {row.status for row in rows if row.check == check}


def test_clean_cluster_passes_the_preflight_playbook(cluster: Cluster, clean_playbook) -> None:
    """No false positive: the clean cluster passes. The nodes have no RDMA port, so the playbook's
    `memlock: auto` only warns where the container runtime caps memlock (the gate runs it as
    `required` and fails there, see expected_memlock_failures)."""
    rows = clean_playbook.rows
    assert not failures(rows), "false positives on the clean cluster:\n%s" % "\n".join(map(str, failures(rows)))
    warned = {(row.check, row.node, row.component, row.found) for row in rows if row.status == "WARN"}
    assert warned == expected_memlock_failures(cluster), clean_playbook.output[-6000:]
    for row in rows:
        if row.status == "WARN":
            assert "advised, not required (no Active RDMA port and infiniband_required false" in row.expected, row
    assert clean_playbook.rc == 0, clean_playbook.output[-6000:]
    assert "preflight passed for profile cpu on 3 node(s)" in clean_playbook.output
    # What the clean stack is made of was really checked, not skipped.
    for check in ("facts.gathered", "python.version", "torch.version", "deepspeed.version",
                  "megatron_deepspeed.present", "same.python", "same.torch", "same.deepspeed",
                  "same.megatron_commit", "same.venv", "same.python_executable", "clock.sync", "ssh.from_head",
                  "torch.files", "deepspeed.files", "megatron_deepspeed.files", "packages.files", "same.packages"):
        assert _statuses(rows, check) == {"pass"}, "%s: %s" % (check, [r for r in rows if r.check == check])


def test_clean_cluster_cuda_profile_fails_only_on_the_cpu_venv(cluster: Cluster, clean_gate) -> None:
    """Judged against cu117, the toolkit, cuDNN, NCCL and driver pass on every node, and the
    failures are those of a CPU-only venv (and the memlock ceiling), nothing else."""
    profile = cluster.stack["preflight_drift_cuda_profile"]
    rows = clean_gate["rows"][profile]
    allowed = set(expected_memlock_failures(cluster))
    for node in cluster.nodes:
        for check, (component, found) in CPU_VENV_UNDER_CU117.items():
            allowed.add((check, node, component, found))
    unexplained = [row for row in failures(rows) if row.key not in allowed]
    assert not unexplained, "false positives under %s:\n%s" % (profile, "\n".join(map(str, unexplained)))
    for check in ("gpu.present", "driver.version", "cuda.toolkit", "nccl.system", "python.version", "same.driver",
                  "same.cuda", "same.cudnn", "same.nccl", "same.gpu_model", "same.gpu_count", "clock.sync"):
        assert _statuses(rows, check) == {"pass"}, "%s: %s" % (check, [r for r in rows if r.check == check])
    # The cpu verdict of the same facts agrees with the playbook's.
    cpu_rows = clean_gate["rows"]["cpu"]
    assert {row.key for row in failures(cpu_rows)} == expected_memlock_failures(cluster)


def test_clean_cudnn_header_is_not_a_false_positive(cluster: Cluster, clean_gate) -> None:
    """cuDNN's header carries MAJOR.MINOR.PATCHLEVEL (8.6.0), never the build number: the cu117
    profile compares at that precision (version '8.6.0', install '8.6.0.163')."""
    rows = clean_gate["rows"][cluster.stack["preflight_drift_cuda_profile"]]
    assert _statuses(rows, "cudnn.system") == {"pass"}, [r for r in rows if r.check == "cudnn.system"]


# --------------------------------------------------------------------------- the drifts
@dataclass
class Drift:
    id: str
    node: int  # index into the sorted nodes: 1 = node2, 2 = node3
    component: str  # the COMPONENT the table must name
    checks: Tuple[str, ...]  # the checks that must newly fail on that node
    apply: Callable[[Cluster, str], Optional[Dict[str, str]]]  # returns host vars to override, if any
    restore: Callable[[Cluster, str], None]
    playbook: bool = False  # True: playbooks/preflight.yml; False: gate.yml
    profile: str = "cpu"  # the profile whose verdict must catch it (gate.yml runs)
    exactly: bool = False  # True: no check but ``checks`` may newly fail (no false finding beside them)
    # Text the rows of ``checks`` must show as found: the file or value that drifted (a callable gets
    # the cluster and the node).
    shows: object = ""


def _site_packages(cluster: Cluster, node: str) -> str:
    return cluster.sh(node, "ls -d %s/lib/python3*/site-packages" % cluster.venv).strip()


def _wheel(cluster: Cluster, node: str, name: str) -> str:
    return cluster.sh(node, "ls %s/wheels-*/%s" % (cluster.stack["preflight_drift_node_cache"], name)).split()[-1]


# driver (stand-in facts, the only stand-in): node3 reports an older driver.
def _driver(cluster: Cluster, node: str) -> None:
    path = cluster.stack["preflight_drift_standin_file"]
    standin = json.loads(cluster.read(node, path))
    standin["driver"]["version"] = "510.108.03"
    cluster.write(node, path, json.dumps(standin, indent=4) + "\n")


def _driver_restore(cluster: Cluster, node: str) -> None:
    cluster.write(node, cluster.stack["preflight_drift_standin_file"],
                  json.dumps(cluster.stack["preflight_drift_standin"], indent=4, sort_keys=True) + "\n")


# CUDA: a second toolkit (11.8) installed next to 11.7 and /usr/local/cuda pointed at it.
def _cuda(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "mkdir -p /usr/local/cuda-11.8")
    cluster.write(node, "/usr/local/cuda-11.8/version.json", (FILES / "cuda-11.8.0-version.json").read_text())
    cluster.sh(node, "ln -sfn /usr/local/cuda-11.8 %s" % cluster.stack["preflight_drift_cuda_link"])


def _cuda_restore(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "ln -sfn %s %s && rm -rf /usr/local/cuda-11.8"
               % (cluster.stack["preflight_drift_cuda_home"], cluster.stack["preflight_drift_cuda_link"]))


def _header(key: str, name: str) -> Callable[[Cluster, str], None]:
    def change(cluster: Cluster, node: str) -> None:
        cluster.write(node, cluster.stack[key], (FILES / name).read_text())

    return change


# torch: gone from the venv, as `pip uninstall torch` leaves it (moved aside, to restore fast).
def _torch(cluster: Cluster, node: str) -> None:
    site = _site_packages(cluster, node)
    cluster.sh(node, "mkdir -p %s && mv %s/torch %s/torch-*.dist-info %s/" % (STASH, site, site, STASH))


def _torch_restore(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "mv %s/torch %s/torch-*.dist-info %s/" % (STASH, STASH, _site_packages(cluster, node)))


# DeepSpeed: `pip install -U deepspeed` on one node (0.19.7, past Megatron-DeepSpeed HEAD's range).
def _deepspeed_version(version: str) -> Callable[[Cluster, str], None]:
    def change(cluster: Cluster, node: str) -> None:
        wheel = _wheel(cluster, node, "deepspeed-%s-py3-none-any.whl" % version)
        cluster.sh(node, "%s/bin/pip install --quiet --no-deps --no-index --no-compile %s" % (cluster.venv, wheel))

    return change


# Python: the venv rebuilt at the same path with another interpreter (PyPy 3.9).
def _python(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "mv {0} {0}.drift-clean && pypy3 -m venv --without-pip {0}".format(cluster.venv))


def _python_restore(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "test -d {0}.drift-clean && rm -rf {0} && mv {0}.drift-clean {0}".format(cluster.venv))


# Python executable: the venv has no bin/python (only python3), so the launcher's path is missing.
def _executable(cluster: Cluster, node: str) -> None:
    target = cluster.sh(node, "readlink %s/bin/python" % cluster.venv).strip()
    assert target, "bin/python is not a link"
    cluster.sh(node, "mkdir -p %s && echo %s > %s/python-link && rm %s/bin/python" % (STASH, target, STASH, cluster.venv))


def _executable_restore(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "ln -s \"$(cat %s/python-link)\" %s/bin/python" % (STASH, cluster.venv))


# venv path: the node's venv lives elsewhere, and its inventory says so.
def _venv_path(cluster: Cluster, node: str) -> Dict[str, str]:
    moved = cluster.venv + "-" + node
    cluster.sh(node, "mv %s %s" % (cluster.venv, moved))
    return {"megatron_job_venv": moved}


def _venv_path_restore(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "mv %s-%s %s" % (cluster.venv, node, cluster.venv))


# Megatron-DeepSpeed: node3 checked out the previous commit.
def _megatron(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "git -c safe.directory='*' -C %s checkout -q --detach HEAD~1" % cluster.megatron_dir)


def _megatron_restore(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "git -c safe.directory='*' -C %s checkout -q main" % cluster.megatron_dir)


# memlock: a later limits.d file caps it (pam_limits applies files in order, the last one wins).
MEMLOCK_DRIFT_FILE = "/etc/security/limits.d/95-preflight-drift.conf"


def _memlock(cluster: Cluster, node: str) -> None:
    cluster.write(node, MEMLOCK_DRIFT_FILE, "".join(
        "%-10s %-6s memlock  1024\n" % (who, kind) for who in ("*", "root") for kind in ("soft", "hard")))


def _memlock_restore(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "rm -f %s" % MEMLOCK_DRIFT_FILE)


# Damaged installs (issue 17): one file of a package or of the checkout changed in place, not
# removed. pip's RECORD gives sizes, git's index sizes, mtimes and blob ids (see _integrity).
def _damage(path_of: Callable[[Cluster, str], str], how: str) -> Tuple[Callable[[Cluster, str], None],
                                                                       Callable[[Cluster, str], None]]:
    def apply(cluster: Cluster, node: str) -> None:
        path = path_of(cluster, node)
        cluster.sh(node, "mkdir -p %s && cp -p %s %s/damaged-file && %s" % (STASH, path, STASH, how.format(path=path)))

    def restore(cluster: Cluster, node: str) -> None:
        cluster.sh(node, "cp -p %s/damaged-file %s" % (STASH, path_of(cluster, node)))

    return apply, restore


def _torch_library(cluster: Cluster, node: str) -> str:
    return _site_packages(cluster, node) + "/torch/lib/libtorch_global_deps.so"


def _deepspeed_source(cluster: Cluster, node: str) -> str:
    return _site_packages(cluster, node) + "/deepspeed/launcher/runner.py"


def _checkout_file(cluster: Cluster, node: str) -> str:
    return cluster.megatron_dir + "/megatron/__init__.py"


def _deepspeed_engine(cluster: Cluster, node: str) -> str:
    return _site_packages(cluster, node) + "/deepspeed/runtime/engine.py"


def _numpy_core(cluster: Cluster, node: str) -> str:
    return cluster.sh(node, "ls %s/numpy/_core/_multiarray_umath.cpython-*.so" % _site_packages(cluster, node)).split()[0]


# numpy: `pip install numpy==<other>` on one node (a package outside torch and DeepSpeed).
# compile=True: a clean install as an operator types it, pip compiling the byte code (issue 40:
# a .pyc the wheel lists in RECORD then differs from it, and must not read as damage).
def _numpy_version(key: str, compile: bool = False) -> Callable[[Cluster, str], None]:
    def change(cluster: Cluster, node: str) -> None:
        version = cluster.stack[key] if key.startswith("preflight_drift_") else key
        wheel = _wheel(cluster, node, "numpy-%s-cp311-*.whl" % version)
        cluster.sh(node, "%s/bin/pip install --quiet --no-deps --no-index %s %s" % (
            cluster.venv, "" if compile else "--no-compile", wheel))

    return change


# Code in site-packages that no RECORD owns (issue 40): Python runs it at every start.
def _site_file(name: str, content: str) -> Tuple[Callable[[Cluster, str], None], Callable[[Cluster, str], None]]:
    def apply(cluster: Cluster, node: str) -> None:
        cluster.write(node, _site_packages(cluster, node) + "/" + name, content)

    def restore(cluster: Cluster, node: str) -> None:
        cluster.sh(node, "rm -f %s/%s" % (_site_packages(cluster, node), name))

    return apply, restore


PTH_ADDED = _site_file("zz-drift.pth", "import os; os.environ.setdefault('NCCL_ALGO', 'Tree')\n")
SITECUSTOMIZE_ADDED = _site_file("sitecustomize.py", "import os\nos.environ['NCCL_IB_DISABLE'] = '1'\n")

# NCCL settings appended to one node's nccl.env (issue 40), restored from the stash after.
NCCL_ENV = "/etc/megatron/nccl.env"


def _nccl_env_append(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "mkdir -p %s /etc/megatron && (cp -p %s %s/nccl.env 2>/dev/null || true) && "
                     "printf 'NCCL_IB_DISABLE=1\\nNCCL_ALGO=Tree\\n' >> %s" % (STASH, NCCL_ENV, STASH, NCCL_ENV))


def _nccl_env_restore(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "if [ -e %s/nccl.env ]; then mv %s/nccl.env %s; else rm -f %s; fi" % (STASH, STASH, NCCL_ENV, NCCL_ENV))


# torch: a shared library cut short (a full disk during an install, a copy stopped half way).
TORCH_CUT = _damage(_torch_library, "truncate -s 4096 {path}")
# DeepSpeed: a source file with a line appended (someone patched it in place).
DEEPSPEED_PATCHED = _damage(_deepspeed_source, "echo '# local patch' >> {path}")
# The checkout: one tracked file edited to other bytes of the same length (only the content tells).
CHECKOUT_EDITED = _damage(_checkout_file, "sed -i 's/Stand-in/Stand-ON/' {path} && touch -d '2020-01-01' {path}")
# DeepSpeed: a method renamed in place, the file's size unchanged (only its sha256 tells; issue 25).
DEEPSPEED_SAME_SIZE = _damage(_deepspeed_engine, "sed -i 's/def forward(/def forwarx(/' {path}")
# numpy's core extension cut short: a package other than torch, DeepSpeed and apex (issue 25).
NUMPY_CUT = _damage(_numpy_core, "truncate -s 4096 {path}")
# DeepSpeed: the same-size edit with its mtime restored (`touch -r`): only the inode's ctime tells (issue 40).
_MTIME_RESTORED_APPLY, MTIME_RESTORED_RESTORE = _damage(
    _deepspeed_engine, "sed -i 's/def forward(/def forwarx(/' {path} && touch -r %s/damaged-file {path}" % STASH)


def _record_age(cluster: Cluster, node: str, record: str) -> float:
    """Seconds since the inode of DeepSpeed's RECORD last changed, by the node's clock."""
    now, changed = cluster.sh(node, "date +%%s.%%N && stat -c %%Z %s" % record).split()
    return float(now) - float(changed)


def _mtime_restored(cluster: Cluster, node: str) -> None:
    """Waits out the ctime slack of DeepSpeed's last install on the node first. An edit within
    integrity.CTIME_SLACK of RECORD's ctime is not hashed, by design (a chown of the fresh venv
    moves every ctime): its first run here missed it, right after another case reinstalled
    DeepSpeed on that node (7a16d65). On node2, whose DeepSpeed is converge's, the wait is nil."""
    record = cluster.sh(node, "ls %s/deepspeed-*.dist-info/RECORD" % _site_packages(cluster, node)).split()[0]
    wait = _integrity.CTIME_SLACK + 2 - _record_age(cluster, node, record)
    if wait > 0:
        time.sleep(wait)
    _MTIME_RESTORED_APPLY(cluster, node)
    assert _record_age(cluster, node, record) > _integrity.CTIME_SLACK


def _deepspeed_engine_relative(cluster: Cluster, node: str) -> str:
    return "deepspeed/runtime/engine.py"


# driver.userspace (issue 40): an unattended upgrade replaced the user-space driver under the loaded
# module. The loaded module is the stand-in's (515.65.01, gate.yml lays it into driver_stack); the
# user-space side is read from the node's files: libnvidia-ml.so.1 pointing at the library of the
# release the GPU validation host runs (580.159.04, /work/shared fixtures gpu-host-h200x2,
# /proc/driver/nvidia/version). These are recorded facts: the check reads the link's target name
# only, and no container could load the library, so the link is placed without a target.
NVML_DIR = "/usr/lib/x86_64-linux-gnu"
USERSPACE_RECORDED = "580.159.04"


def _userspace(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "test ! -e %s/libnvidia-ml.so.1 && ln -s libnvidia-ml.so.%s %s/libnvidia-ml.so.1"
               % (NVML_DIR, USERSPACE_RECORDED, NVML_DIR))


def _userspace_restore(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "rm -f %s/libnvidia-ml.so.1" % NVML_DIR)


# driver.next_boot (issue 40): a newer kernel installed without the driver's DKMS build. The running
# kernel is the host's (the containers share it); its module tree gets nvidia.ko where DKMS puts it
# (updates/dkms), the newer kernel's tree none. Recorded layout, file names only: the check lists
# the trees and never opens a module, and no container loads one.
def _next_kernel(running: str) -> str:
    """A release newer than ``running``: its third number raised ('6.1.0-28-amd64' -> '6.1.1-28-amd64')."""
    head, sep, tail = running.partition("-")
    parts = head.split(".")
    parts[-1] = str(int(re.match(r"\d+", parts[-1]).group(0)) + 1)
    newer = ".".join(parts) + sep + tail
    assert _driver_stack.newest_kernel([running, newer]) == newer, (running, newer)
    return newer


def _next_boot(cluster: Cluster, node: str) -> None:
    running = cluster.sh(node, "uname -r").strip()
    cluster.sh(node, "test ! -e /lib/modules && mkdir -p /lib/modules/%s/updates/dkms /lib/modules/%s/kernel && "
                     ": > /lib/modules/%s/updates/dkms/nvidia.ko" % (running, _next_kernel(running), running))


def _next_boot_restore(cluster: Cluster, node: str) -> None:
    cluster.sh(node, "rm -rf /lib/modules")


def _next_boot_shows(cluster: Cluster, node: str) -> str:
    running = cluster.sh(node, "uname -r").strip()
    return "running %s; next boot %s has nvidia no" % (running, _next_kernel(running))


CUDA = "cu117"
DRIFTS = [
    Drift("driver-standin", 2, "driver", ("driver.version", "same.driver"), _driver, _driver_restore, profile=CUDA),
    Drift("cuda", 1, "cuda", ("cuda.toolkit", "same.cuda"), _cuda, _cuda_restore, profile=CUDA),
    Drift("cudnn", 2, "cudnn", ("cudnn.system", "same.cudnn"),
          _header("preflight_drift_cudnn_header", "cudnn_version-8.9.7.h"),
          _header("preflight_drift_cudnn_header", "cudnn_version-8.6.0.h"), profile=CUDA),
    Drift("nccl", 1, "nccl", ("nccl.system", "same.nccl"),
          _header("preflight_drift_nccl_header", "nccl-2.18.3.h"),
          _header("preflight_drift_nccl_header", "nccl-2.16.5.h"), profile=CUDA),
    Drift("torch", 1, "torch", ("torch.version", "same.torch"), _torch, _torch_restore, playbook=True),
    Drift("deepspeed", 2, "deepspeed", ("deepspeed.version", "same.deepspeed"),
          _deepspeed_version("0.19.7"), _deepspeed_version("0.19.6")),
    Drift("python-version", 2, "python", ("python.version", "same.python"), _python, _python_restore),
    Drift("python-executable", 1, "venv", ("same.python_executable",), _executable, _executable_restore),
    Drift("megatron-commit", 2, "megatron_deepspeed", ("same.megatron_commit",), _megatron, _megatron_restore,
          playbook=True),
    Drift("venv-path", 1, "venv", ("same.venv", "same.python_executable"), _venv_path, _venv_path_restore),
    Drift("memlock", 1, "memlock", ("memlock.unlimited",), _memlock, _memlock_restore),
    Drift("torch-library-cut-short", 1, "torch", ("torch.files",), *TORCH_CUT),
    Drift("deepspeed-file-patched", 2, "deepspeed", ("deepspeed.files",), *DEEPSPEED_PATCHED),
    Drift("checkout-file-edited", 1, "megatron_deepspeed", ("megatron_deepspeed.files",), *CHECKOUT_EDITED),
    Drift("deepspeed-same-size-edit", 1, "deepspeed", ("deepspeed.files",), *DEEPSPEED_SAME_SIZE),
    Drift("numpy-core-cut-short", 2, "packages", ("packages.files",), *NUMPY_CUT),
    Drift("numpy-version", 1, "packages", ("same.packages",),
          _numpy_version("preflight_drift_numpy_drift"), _numpy_version("2.4.6")),
    # issue 40: the venv as Python loads it
    Drift("numpy-clean-install", 1, "packages", ("same.packages",),
          _numpy_version("preflight_drift_numpy_drift", compile=True), _numpy_version("2.4.6", compile=True),
          exactly=True),
    # On node2: its DeepSpeed is converge's. On node3 the "deepspeed" case has just reinstalled it, and an
    # edit within integrity.CTIME_SLACK (120 s) of RECORD's ctime is not hashed, by design; the apply
    # waits out what is left of the slack anyway (7a16d65: its first run, on node3, missed the edit).
    Drift("deepspeed-edit-mtime-restored", 1, "deepspeed", ("deepspeed.files",), _mtime_restored,
          MTIME_RESTORED_RESTORE, shows=_deepspeed_engine_relative),
    Drift("pth-added", 1, "venv", ("venv.unowned_code",), *PTH_ADDED),
    Drift("sitecustomize-added", 2, "venv", ("venv.unowned_code",), *SITECUSTOMIZE_ADDED),
    Drift("nccl-env-one-node", 2, "nccl", ("same.nccl_env",), _nccl_env_append, _nccl_env_restore),
    # issue 40: silent updates, from recorded facts (see _userspace and _next_boot)
    Drift("driver-userspace-replaced", 2, "driver", ("driver.userspace",), _userspace, _userspace_restore,
          profile=CUDA, exactly=True, shows="kernel module 515.65.01 loaded, user-space %s" % USERSPACE_RECORDED),
    Drift("next-boot-kernel-without-module", 1, "driver", ("driver.next_boot",), _next_boot, _next_boot_restore,
          profile=CUDA, exactly=True, shows=_next_boot_shows),
]


@pytest.mark.parametrize("drift", DRIFTS, ids=[drift.id for drift in DRIFTS])
def test_drift_fails_naming_the_node_and_the_component(cluster: Cluster, clean_playbook, clean_gate,
                                                       drift: Drift) -> None:
    node = cluster.nodes[drift.node]
    other_plane: List[Row] = []
    try:
        host_vars = drift.apply(cluster, node) or {}
        extra = [cluster.extra_inventory(drift.id, {node: host_vars})] if host_vars else []
        if drift.playbook:
            run = cluster.preflight("drift " + drift.id, extra)
            assert run.rc != 0, run.output[-6000:]
            assert "preflight FAILED" in run.output
            new = new_failures(run.rows, clean_playbook.rows)
            output = run.output
        else:
            gate = cluster.gate(drift.id, gather=node, baseline=clean_gate["path"], extra_inventories=extra)
            verdict = gate["results"][drift.profile]
            assert verdict["failures"] and "preflight FAILED" in verdict["msg"], verdict["msg"]
            new = new_failures(gate["rows"][drift.profile], clean_gate["rows"][drift.profile])
            output = verdict["msg"]
            if drift.profile != "cpu":
                other_plane = new_failures(gate["rows"]["cpu"], clean_gate["rows"]["cpu"])
    finally:
        drift.restore(cluster, node)

    shown = "\n".join(map(str, new))
    assert new, "preflight did not notice the %s drift on %s:\n%s" % (drift.id, node, output[-6000:])
    if drift.shows:
        value = drift.shows(cluster, node) if callable(drift.shows) else drift.shows
        assert all(value in row.found for row in new if row.check in drift.checks), "no %r in:\n%s" % (value, shown)
    assert {row.node for row in new} == {node}, "failures on nodes that did not change:\n" + shown
    assert drift.component in {row.component for row in new}, shown
    assert set(drift.checks) <= {row.check for row in new}, shown
    if drift.exactly:
        assert {row.check for row in new} == set(drift.checks), "a finding beside the expected ones:\n" + shown
    # The output a person reads names them too, one FAIL line per check with node and component.
    shown_lines = [line.strip() for line in output.splitlines()]
    for row in new:
        if row.check in drift.checks:
            assert row.fix and node in row.fix, row
            assert any(line.startswith("FAIL %s %s (%s)" % (node, row.component, row.check)) for line in shown_lines), output
    # A CUDA component does not matter to the cpu profile: the same facts pass there.
    assert not other_plane, "the cpu profile failed on a CUDA-only drift:\n" + "\n".join(map(str, other_plane))


def test_torch_that_cannot_import_fails(cluster: Cluster, clean_gate) -> None:
    """torch's package gone, its dist-info kept (a half-removed or corrupted install): the facts
    keep the recorded version and set torch.error; torch.version must fail on that version."""
    node = cluster.nodes[1]
    site = _site_packages(cluster, node)
    try:
        cluster.sh(node, "mkdir -p %s && mv %s/torch %s/torch-broken" % (STASH, site, STASH))
        gate = cluster.gate("torch-not-importable", gather=node, baseline=clean_gate["path"])
    finally:
        cluster.sh(node, "mv %s/torch-broken %s/torch" % (STASH, site))
    if not gate["facts"][node]["torch"]["error"]:
        pytest.fail("the drift did not break `import torch` on %s" % node)  # not the known bug: fail
    new = new_failures(gate["rows"]["cpu"], clean_gate["rows"]["cpu"])
    assert any(row.check == "torch.version" and row.node == node for row in new), gate["results"]["cpu"]["msg"]
    row = next(row for row in new if row.check == "torch.version" and row.node == node)
    assert gate["facts"][node]["torch"]["version"] in row.found and "broken" in row.found, row
    assert node in row.fix and "python_env" in row.fix, row
    assert {r.node for r in new} == {node}, "\n".join(map(str, new))


def test_cluster_is_clean_again_after_the_matrix(cluster: Cluster, clean_playbook) -> None:
    """Every restore worked: the end-to-end verdict is the clean cluster's again."""
    run = cluster.preflight("clean again")
    assert {row.key for row in failures(run.rows)} == {row.key for row in failures(clean_playbook.rows)}, run.output[-6000:]
    assert run.rc == clean_playbook.rc


def test_stopped_node_is_called_unreachable(cluster: Cluster) -> None:
    """Issue 17: a node whose container is stopped fails preflight as unreachable, naming the
    node, its connection (docker container ...) and the connection's last error, not Ansible's
    "Module result deserialization failed". Last in the file: the node is started again, but its
    clock and services are not waited for."""
    node = cluster.nodes[2]
    subprocess.run(["docker", "kill", node], check=True, stdout=subprocess.DEVNULL)
    try:
        run = cluster.preflight("node stopped")
    finally:
        subprocess.run(["docker", "start", node], check=True, stdout=subprocess.DEVNULL)
    assert run.rc != 0, run.output[-6000:]
    row = next(row for row in run.rows if row.check == "facts.gathered" and row.node == node)
    assert (row.status, row.component) == ("FAIL", "connection"), row
    assert row.found.startswith("unreachable over docker container "), row
    assert node in row.found and "deserialization" not in row.found, row
    assert "docker start" in row.fix, row
    lines = [line.strip() for line in run.output.splitlines()]
    assert any(line.startswith("FAIL %s connection (facts.gathered): found unreachable over docker container" % node)
               for line in lines), run.output[-6000:]
    assert "unreachable: %s" % node in " ".join(run.output.split())
