# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_stack_facts' parsers on recorded real outputs, and its collectors on fake node trees.

Fixtures and their origin: tests/fixtures/README.md. No test runs a program that stands in for
an NVIDIA tool: tool paths in fake trees are empty placeholders, and ``Runner`` answers each
command with the output recorded from the real tool.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import collect as gf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import parsers as gp
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import python_stack as gpy

FIXTURES = Path(__file__).resolve().parents[4] / "fixtures"
H200 = FIXTURES / "gpu-host-h200x2"


def fixture(rel: str) -> str:
    return (FIXTURES / rel).read_text()


def stack_section(title: str) -> str:
    """One '### title' section of the H200 host's gpu-host-stack.txt."""
    text = (H200 / "gpu-host-stack.txt").read_text()
    match = re.search(r"^### " + re.escape(title) + r"\n(.*?)(?=^### |\Z)", text, re.M | re.S)
    assert match, title
    return match.group(1)


# The proprietary module's line, as NVIDIA's closed kernel module prints it (issue brief).
PROPRIETARY_NVRM = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.129.03  "
                    "Thu Oct 19 18:56:32 UTC 2023\nGCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
# version.json of CUDA 11.7.1 (X.Y.U form, see published-excerpts/cuda-11.5.2-version.json).
CUDA_1171_VERSION_JSON = '{"cuda": {"name": "CUDA SDK", "version": "11.7.1"}, "cuda_nvcc": {"name": "CUDA NVCC", "version": "11.7.99"}}'


# --------------------------------------------------------------------------- test doubles
class Runner:
    """Answers commands with recorded outputs, keyed by (program basename, *args); records calls."""

    def __init__(self, answers: Optional[Dict[Tuple[str, ...], Tuple[int, str, str]]] = None) -> None:
        self.answers = dict(answers or {})
        self.calls: List[Tuple[str, ...]] = []

    def __call__(self, argv: Sequence[str], timeout: float) -> Tuple[int, str, str]:
        key = (os.path.basename(argv[0]),) + tuple(argv[1:])
        self.calls.append(key)
        for known, answer in self.answers.items():
            if key[: len(known)] == known:
                return answer
        return 127, "", "%s: not recorded" % key[0]

    def count(self, program: str) -> int:
        return sum(1 for c in self.calls if c[0] == program)


def put(root: Path, node_path: str, text: str = "", mode: int = 0o644) -> Path:
    path = root / node_path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)
    return path


def link(root: Path, node_path: str, target: str) -> None:
    path = root / node_path.lstrip("/")
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, str(path))


def tool(root: Path, node_path: str) -> None:
    """An executable placeholder; the Runner answers for it, nothing ever executes it."""
    put(root, node_path, "", 0o755)


SMI_XML = (H200 / "nvidia-smi-q.xml").read_text()
SMI_CSV = (H200 / "nvidia-smi-query.csv").read_text()
NVCC_13 = stack_section("nvcc --version")
PTXAS_13 = stack_section("ptxas")


def h200_root(tmp: Path) -> Tuple[Path, Runner]:
    """The GPU validation host's layout (gpu-host-stack.txt) with its recorded outputs."""
    put(tmp, "/proc/driver/nvidia/version", stack_section("/proc/driver/nvidia/version"))
    put(tmp, "/etc/os-release", stack_section("os-release"))
    tool(tmp, "/usr/bin/nvidia-smi")
    for sub in ("bin/nvcc", "bin/ptxas"):
        tool(tmp, "/usr/local/cuda-13.0/" + sub)
    put(tmp, "/usr/local/cuda-13.0/targets/x86_64-linux/lib/libcudart.so.13")
    link(tmp, "/usr/local/cuda-13.0/lib64", "targets/x86_64-linux/lib")
    link(tmp, "/etc/alternatives/cuda", "/usr/local/cuda-13.0")
    link(tmp, "/etc/alternatives/cuda-13", "/usr/local/cuda-13.0")
    link(tmp, "/usr/local/cuda", "/etc/alternatives/cuda")
    link(tmp, "/usr/local/cuda-13", "/etc/alternatives/cuda-13")
    put(tmp, "/usr/include/x86_64-linux-gnu/cudnn_version.h", (H200 / "system-usr-include-cudnn_version.h").read_text())
    put(tmp, "/usr/include/nccl.h", (H200 / "system-usr-include-nccl.h").read_text())
    # libnccl2's layout: the versioned file plus its soname link (the host's ldconfig shows the link).
    put(tmp, "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3")
    link(tmp, "/usr/lib/x86_64-linux-gnu/libnccl.so.2", "libnccl.so.2.28.3")
    runner = Runner({
        ("nvidia-smi", "-q", "-x"): (0, SMI_XML, ""),
        ("nvidia-smi", "--query-gpu=" + gf.SMI_QUERY_FIELDS, "--format=csv"): (0, SMI_CSV, ""),
        ("nvcc", "--version"): (0, NVCC_13, ""),
        ("ptxas", "--version"): (0, PTXAS_13, ""),
    })
    return tmp, runner


def host_for(root: Path, runner: Optional[Runner] = None) -> gf.Host:
    return gf.Host(root=str(root), run=runner or Runner(), timeout=5)


# --------------------------------------------------------------------------- nvidia-smi
def test_xml_fixture_gives_the_h200_host():
    parsed = gf.parse_nvidia_smi_xml(SMI_XML)
    gpus = gf.summarize_gpus(parsed["gpus"])
    assert parsed["driver_version"] == "580.159.04"
    assert parsed["cuda_version"] == "13.0"
    assert gpus["count"] == 2
    assert gpus["model"] == "NVIDIA H200"
    assert gpus["models"] == ["NVIDIA H200"]
    assert gpus["memory_mib"] == 143771
    assert gpus["uuids"] == ["GPU-00000000-0000-0000-0000-000000000001", "GPU-00000000-0000-0000-0000-000000000002"]
    assert gpus["list"][1] == {
        "index": 1, "name": "NVIDIA H200", "uuid": "GPU-00000000-0000-0000-0000-000000000002",
        "memory_mib": 143771, "pci_bus_id": "00000000:00:07.0", "persistence_mode": True,
        "architecture": "Hopper", "compute_capability": "9.0",
    }
    # The capability torch reported on the same host (gpu-host-stack.txt: "capability": [9, 0]).
    assert gpus["compute_capability"] == "9.0"


def test_csv_fixture_gives_the_same_gpus_as_the_xml():
    from_csv = gf.parse_nvidia_smi_csv(SMI_CSV)
    assert from_csv["driver_version"] == "580.159.04"
    # The recorded query asked for neither compute_cap nor (no such field) the architecture.
    extra = ("architecture", "compute_capability")
    assert all(gpu["compute_capability"] is None and gpu["architecture"] is None for gpu in from_csv["gpus"])
    assert [dict((k, v) for k, v in gpu.items() if k not in extra) for gpu in from_csv["gpus"]] == [
        dict((k, v) for k, v in gpu.items() if k not in extra) for gpu in gf.parse_nvidia_smi_xml(SMI_XML)["gpus"]]


@pytest.mark.parametrize("capabilities, expected", [
    (["9.0", "9.0"], "9.0"),
    (["8.0", "9.0"], None),     # mixed GPUs: no one capability
    (["9.0", None], None),      # one unknown
    ([], None),                 # no GPU
])
def test_summary_capability_is_the_one_every_gpu_shares(capabilities, expected):
    gpus = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "memory_mib": 81559, "compute_capability": cap}
            for i, cap in enumerate(capabilities)]
    assert gf.summarize_gpus(gpus)["compute_capability"] == expected


@pytest.mark.parametrize("text", [
    "",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "<?xml version=\"1.0\" ?><other_log/>",
    SMI_XML[: len(SMI_XML) // 2],  # cut off mid-way
])
def test_xml_parser_rejects_what_is_not_nvidia_smi_xml(text):
    with pytest.raises(ValueError):
        gf.parse_nvidia_smi_xml(text)


SMI_CSV_SUBSET = "uuid, name, memory.total [MiB]\n" + "".join(
    "%s, %s, %s\n" % (row[2], row[1], row[4]) for row in (line.split(", ") for line in SMI_CSV.splitlines()[1:]))


@pytest.mark.parametrize("text, expected_count", [
    ("", 0),
    ("index, name, uuid, driver_version, memory.total [MiB], pci.bus_id, persistence_mode, compute_mode\n", 0),
    # fewer columns, another order: the recorded rows cut down to name, uuid, memory
    (SMI_CSV_SUBSET, 2),
])
def test_csv_parser_counts_rows_under_a_header(text, expected_count):
    parsed = gf.parse_nvidia_smi_csv(text)
    assert len(parsed["gpus"]) == expected_count
    assert all(g["memory_mib"] == 143771 for g in parsed["gpus"])


def test_csv_without_header_is_rejected():
    with pytest.raises(ValueError):
        gf.parse_nvidia_smi_csv("\n".join(SMI_CSV.splitlines()[1:]))


@pytest.mark.parametrize("names, memories, model, models, memory", [
    (["NVIDIA H200", "NVIDIA H200"], [143771, 143771], "NVIDIA H200", ["NVIDIA H200"], 143771),
    (["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-40GB"], [81920, 40960], None,
     ["NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB"], 40960),
    ([], [], None, [], None),
    (["NVIDIA H200", None], [143771, None], None, ["NVIDIA H200"], 143771),
])
def test_summary_names_one_model_only_when_all_gpus_share_it(names, memories, model, models, memory):
    gpus = [{"index": i, "name": n, "uuid": None, "memory_mib": m, "pci_bus_id": None, "persistence_mode": None}
            for i, (n, m) in enumerate(zip(names, memories))]
    summary = gf.summarize_gpus(gpus)
    assert (summary["count"], summary["model"], summary["models"], summary["memory_mib"]) == (
        len(names), model, models, memory)


# --------------------------------------------------------------------------- /proc driver
@pytest.mark.parametrize("text, version, flavour", [
    (stack_section("/proc/driver/nvidia/version"), "580.159.04", "open"),
    (PROPRIETARY_NVRM, "535.129.03", "proprietary"),
    ("", None, None),
    ("GCC version:  gcc version 15.3.0 (GCC)\n", None, None),
])
def test_proc_driver_version_gives_version_and_module_flavour(text, version, flavour):
    assert gf.parse_proc_driver_version(text) == {"version": version, "kernel_module": flavour}


# --------------------------------------------------------------------------- CUDA versions
@pytest.mark.parametrize("text, expected", [
    (NVCC_13, "13.0.88"),
    (PTXAS_13, "13.0.88"),
    (fixture("cuda-nvcc-11.7.99-wheel/ptxas-version.txt"), "11.7.99"),
    (fixture("published-excerpts/cuda-11.8.0-nvcc-version.txt"), "11.8.89"),
    ("Cuda compilation tools, release 11.7, V11.7.99", "11.7.99"),
    ("Cuda compilation tools, release 12.1", "12.1"),
    ("", None),
    ("sh: 1: nvcc: not found", None),
])
def test_nvcc_and_ptxas_versions(text, expected):
    assert gf.parse_cuda_tool_version(text) == expected


@pytest.mark.parametrize("text, expected", [
    (CUDA_1171_VERSION_JSON, "11.7.1"),
    (fixture("published-excerpts/cuda-11.5.2-version.json"), "11.5.2"),
    # 11.8+ stamps a date where the update level was: report what it really says, 11.8
    (fixture("published-excerpts/cuda-11.8.0-version.json"), "11.8"),
    ('{"cuda": {"name": "CUDA SDK", "version": "12.1.20230222"}}', "12.1"),
    ('{"cuda_nvcc": {"version": "11.7.99"}}', None),
    ('{"cuda": {"version": "unknown"}}', None),
    ("", None),
    ("not json", None),
])
def test_version_json(text, expected):
    assert gf.parse_cuda_version_json(text) == expected


@pytest.mark.parametrize("name, stem, expected", [
    ("libcudart.so.11.7.99", "libcudart.so", "11.7.99"),
    ("libcudart.so.13", "libcudart.so", "13"),
    ("libcudart.so", "libcudart.so", None),
    ("libcudart_static.a", "libcudart.so", None),
    ("libnccl.so.2.28.3", "libnccl.so", "2.28.3"),
    ("libnccl-net.so", "libnccl.so", None),
])
def test_library_file_names(name, stem, expected):
    assert gf.library_version(name, stem) == expected


# --------------------------------------------------------------------------- headers
@pytest.mark.parametrize("rel, expected", [
    ("cudnn-8.6.0.163-cuda11-wheel/cudnn_version.h", "8.6.0"),
    ("gpu-host-h200x2/system-usr-include-cudnn_version.h", "9.14.0"),
    ("gpu-host-h200x2/torch-venv-nvidia-cudnn_version.h", "9.19.0"),
    ("gpu-host-h200x2/system-usr-include-nccl.h", None),
])
def test_cudnn_header(rel, expected):
    assert gf.parse_cudnn_header(fixture(rel)) == expected


@pytest.mark.parametrize("rel, expected", [
    ("gpu-host-h200x2/system-usr-include-nccl.h", "2.28.3"),
    ("gpu-host-h200x2/torch-venv-nvidia-nccl.h", "2.28.9"),
    ("gpu-host-h200x2/system-usr-include-cudnn_version.h", None),
])
def test_nccl_header(rel, expected):
    assert gf.parse_nccl_header(fixture(rel)) == expected


# --------------------------------------------------------------------------- torch's numbers
@pytest.mark.parametrize("value, expected", [
    (8500, "8.5.0"),      # torch 1.13.1+cu117 (docs/upstream-facts.md §H)
    (91900, "9.19.0"),    # torch 2.11.0+cu130 on the H200 host
    (8907, "8.9.7"),
    (90000, "9.0.0"),     # the first cuDNN 9 code: MAJOR*10000 from here on (cudnn_version.h)
    (89999, "89.9.99"),   # no cuDNN 8 code reaches this; it would read as MAJOR*1000
    (None, None),
    (0, None),
    (True, None),
    ("8500", None),
])
def test_torch_cudnn_int_to_version(value, expected):
    assert gp.cudnn_version_from_int(value) == expected


@pytest.mark.parametrize("value, expected", [
    ([2, 28, 9], "2.28.9"),   # the H200 host (JSON turns the tuple into a list)
    ((2, 14, 3, ""), "2.14.3"),
    (2708, "2.7.8"),          # old torch: NCCL_VERSION code up to 2.8
    (21403, "2.14.3"),
    (20900, "2.9.0"),     # NCCL 2.9 switched to X*10000 + Y*100 + Z (nccl.h NCCL_VERSION)
    (2804, "2.8.4"),      # the last of the X*1000 codes
    ([2, 28], None),
    (True, None),
    (None, None),
])
def test_torch_nccl_to_version(value, expected):
    assert gp.nccl_version_from_torch(value) == expected


def test_probe_output_of_the_h200_host():
    recorded = json.loads(stack_section("python/torch"))
    probe = {
        "python": {"version": recorded["python"], "executable": recorded["executable"]},
        "torch": {"version": recorded["torch"], "cuda": recorded["torch_cuda"], "cudnn": recorded["cudnn"],
                  "nccl": recorded["nccl"], "error": None},
        "deepspeed": {"version": "0.17.5", "error": None},
        "apex": {"present": True, "cuda_ext": True, "error": None},
    }
    facts = gpy.parse_probe_output("some import noise\n" + json.dumps(probe))
    assert facts["python"]["version"] == "3.12.3"
    assert facts["torch"] == {"version": "2.11.0+cu130", "cuda": "13.0", "cudnn": "9.19.0", "nccl": "2.28.9",
                              "error": None, "source": "import"}
    assert facts["deepspeed"] == {"version": "0.17.5", "error": None, "source": "import"}
    assert facts["apex"] == {"present": True, "cuda_ext": True, "error": None, "source": "import"}


@pytest.mark.parametrize("stdout", ["", "Traceback (most recent call last):", "{not json"])
def test_probe_output_that_is_not_json_raises(stdout):
    with pytest.raises((ValueError, IndexError)):
        gpy.parse_probe_output(stdout)


# --------------------------------------------------------------------------- clock
@pytest.mark.parametrize("rel, synchronized, offset_ms", [
    ("chrony-4.3/tracking-synchronised.txt", True, 0.001619),
    ("chrony-4.3/tracking-manpage-example.txt", True, -0.006523),
    ("chrony-4.3/tracking-not-synchronised.txt", False, None),
])
def test_chronyc_tracking(rel, synchronized, offset_ms):
    parsed = gf.parse_chronyc_tracking(fixture(rel))
    assert parsed["synchronized"] is synchronized
    if offset_ms is None:
        assert parsed["offset_ms"] is None
    else:
        assert parsed["offset_ms"] == pytest.approx(offset_ms)


@pytest.mark.parametrize("text", ["", "506 Cannot talk to daemon"])
def test_chronyc_without_tracking_data_says_nothing(text):
    assert gf.parse_chronyc_tracking(text) == {"synchronized": None, "offset_ms": None}


@pytest.mark.parametrize("text, expected", [
    (fixture("debian12-systemd-container/timedatectl-show.txt"), False),
    ("Timezone=Etc/UTC\nNTP=yes\nNTPSynchronized=yes\n", True),
    ("System has not been booted with systemd as init system (PID 1). Can't operate.", None),
])
def test_timedatectl_show(text, expected):
    assert gf.parse_timedatectl_show(text) == {"synchronized": expected, "offset_ms": None}


# --------------------------------------------------------------------------- small ones
@pytest.mark.parametrize("text, expected", [
    (fixture("published-excerpts/nv-fabricmanager-version.txt"), "450.102.04"),
    ("\n\n\tFabric Manager version is : 535.161.08\n\n", "535.161.08"),
    ("nv-fabricmanager: command not found", None),
])
def test_fabric_manager_version(text, expected):
    assert gf.parse_fabricmanager_version(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("nvidia-fabricmanager-535 535.129.03-1 ii \n", "535.129.03"),
    ("nvidia-fabricmanager 1:580.65.06-1 ii \n", "580.65.06"),
    ("nvidia-fabricmanager-dev-535 535.129.03-1 ii \n", None),
    ("nvidia-fabricmanager-535 535.129.03-1 rc \n", None),   # removed, only config left
    ("nvidia-fabricmanager-535  un \n", None),               # known to dpkg, never installed
    ("", None),
])
def test_fabric_manager_from_dpkg(text, expected):
    assert gf.parse_dpkg_fabricmanager(text) == expected


@pytest.mark.parametrize("text, expected", [
    (stack_section("os-release"), {"id": "ubuntu", "version_id": "24.04"}),
    ('ID=debian\nVERSION_ID="12"\n', {"id": "debian", "version_id": "12"}),
    ("", {"id": None, "version_id": None}),
])
def test_os_release(text, expected):
    assert gf.parse_os_release(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("4: ACTIVE\n", "ACTIVE"),
    ("1: DOWN\n", "DOWN"),
    ("5: LinkUp\n", "LinkUp"),
    ("7: Phy Test\n", "Phy Test"),
    ("", None),
])
def test_sysfs_state_words(text, expected):
    assert gf.parse_sysfs_state(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("ref: refs/heads/main\n", ("ref", "refs/heads/main")),
    ("4efb479d" * 5 + "\n", ("sha", "4efb479d" * 5)),
    ("garbage", (None, None)),
])
def test_git_head(text, expected):
    assert gf.parse_git_head(text) == expected


# --------------------------------------------------------------------------- Host
def test_absolute_links_stay_inside_the_root(tmp_path):
    root, _runner = h200_root(tmp_path)
    host = host_for(root)
    assert host.path("/usr/local/cuda/bin/nvcc") == str(root / "usr/local/cuda-13.0/bin/nvcc")
    assert host.path("/usr/local/cuda/../../../../etc") == str(root / "etc")
    assert host.read_text("/usr/local/cuda/version.json") is None


def test_symlink_loop_ends(tmp_path):
    link(tmp_path, "/a", "/b")
    link(tmp_path, "/b", "/a")
    assert not host_for(tmp_path).exists("/a/x")


def test_which_under_a_fake_root_ignores_the_machines_path(tmp_path):
    host = host_for(tmp_path)
    assert host.which("sh") is None
    tool(tmp_path, "/usr/sbin/chronyc")
    assert host.which("chronyc") == "/usr/sbin/chronyc"


def test_nvidia_smi_in_usr_local_nvidia_bin_is_found_without_path(tmp_path):
    # the GPU validation host has it there, and Ansible's PATH does not always include it
    tool(tmp_path, "/usr/local/nvidia/bin/nvidia-smi")
    assert gf.Host(root=str(tmp_path), search_path="/usr/bin").which("nvidia-smi") == "/usr/local/nvidia/bin/nvidia-smi"


# --------------------------------------------------------------------------- collectors
def test_h200_tree_gives_the_recorded_host(tmp_path):
    root, runner = h200_root(tmp_path)
    facts = gf.collect(host_for(root, runner))
    assert facts["driver"] == {"version": "580.159.04", "kernel_module": "open",
                               "source": "/proc/driver/nvidia/version"}
    assert (facts["gpus"]["count"], facts["gpus"]["model"], facts["gpus"]["memory_mib"]) == (2, "NVIDIA H200", 143771)
    assert facts["os"] == {"id": "ubuntu", "version_id": "24.04"}
    assert facts["cuda"]["version"] == "13.0.88"
    assert facts["cuda"]["source"] == "nvcc"
    assert facts["cuda"]["home"] == "/usr/local/cuda"
    assert facts["cuda"]["nvcc_version"] == "13.0.88"
    assert facts["cuda"]["installed"] == [
        {"path": "/usr/local/cuda", "version": "13.0.88", "source": "nvcc"},
        {"path": "/usr/local/cuda-13", "version": "13.0.88", "source": "nvcc"},
        {"path": "/usr/local/cuda-13.0", "version": "13.0.88", "source": "nvcc"},
    ]
    assert facts["cudnn"] == {"version": "9.14.0", "source": "/usr/include/x86_64-linux-gnu/cudnn_version.h"}
    assert facts["nccl"] == {"version": "2.28.3", "source": "/usr/include/nccl.h",
                             "library": "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3"}
    assert facts["nvswitch"] == {"present": False, "count": 0}
    assert facts["fabric_manager"] == {"installed": False, "version": None, "active": None}
    assert facts["infiniband"] == {"hcas": [], "peermem_loaded": False, "peermem_module": None, "memory_peers": []}
    assert facts["errors"] == []
    # ONE nvidia-smi call; one nvcc run for three names of the same toolkit.
    assert runner.count("nvidia-smi") == 1
    assert runner.count("nvcc") == 1
    assert runner.count("ptxas") == 0


def test_xml_failure_falls_back_to_csv_and_says_why(tmp_path):
    root, runner = h200_root(tmp_path)
    runner.answers[("nvidia-smi", "-q", "-x")] = (0, "<nvidia_smi_log><gpu>", "")
    errors: List[str] = []
    driver, gpus = gf.collect_nvidia(host_for(root, runner), errors)
    assert gpus["count"] == 2 and gpus["model"] == "NVIDIA H200"
    assert driver["version"] == "580.159.04"
    assert len(errors) == 1 and errors[0].startswith("gpus: nvidia-smi -q -x: not nvidia-smi XML")


def test_broken_driver_leaves_gpus_empty_and_reports_nvidia_smi(tmp_path):
    root, runner = h200_root(tmp_path)
    failure = (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "")
    runner.answers[("nvidia-smi", "-q", "-x")] = failure
    runner.answers[("nvidia-smi", "--query-gpu=" + gf.SMI_QUERY_FIELDS, "--format=csv")] = failure
    errors: List[str] = []
    driver, gpus = gf.collect_nvidia(host_for(root, runner), errors)
    assert gpus == gf.summarize_gpus([])
    assert driver["source"] == "/proc/driver/nvidia/version"
    message = "exit 9: NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver."
    assert errors == ["gpus: nvidia-smi -q -x: " + message,
                      "gpus: nvidia-smi --query-gpu=%s --format=csv: %s" % (gf.SMI_QUERY_FIELDS, message)]


def test_driver_from_nvidia_smi_when_proc_is_absent(tmp_path):
    root, runner = h200_root(tmp_path)
    (root / "proc/driver/nvidia/version").unlink()
    driver, _gpus = gf.collect_nvidia(host_for(root, runner), [])
    assert driver == {"version": "580.159.04", "kernel_module": None, "source": "nvidia-smi"}


@pytest.mark.parametrize("files, tools, answers, expected", [
    # version.json wins; nvcc still runs because nvcc_version is its own fact
    ({"version.json": CUDA_1171_VERSION_JSON}, ["bin/nvcc"],
     {("nvcc", "--version"): (0, "Cuda compilation tools, release 11.7, V11.7.99", "")},
     {"version": "11.7.1", "source": "version.json", "nvcc_version": "11.7.99"}),
    # no version.json: nvcc
    ({}, ["bin/nvcc", "bin/ptxas"], {("nvcc", "--version"): (0, NVCC_13, ""), ("ptxas", "--version"): (0, PTXAS_13, "")},
     {"version": "13.0.88", "source": "nvcc", "nvcc_version": "13.0.88"}),
    # nvcc broken: ptxas
    ({}, ["bin/nvcc", "bin/ptxas"],
     {("nvcc", "--version"): (1, "", "error while loading shared libraries"),
      ("ptxas", "--version"): (0, fixture("cuda-nvcc-11.7.99-wheel/ptxas-version.txt"), "")},
     {"version": "11.7.99", "source": "ptxas", "nvcc_version": None}),
    # runtime only: the library's file name
    ({"targets/x86_64-linux/lib/libcudart.so.11.7.99": "", "targets/x86_64-linux/lib/libcudart.so.11.0": ""}, [], {},
     {"version": "11.7.99", "source": "library", "nvcc_version": None}),
    ({"lib64/libcudart.so.12.1.105": ""}, [], {}, {"version": "12.1.105", "source": "library", "nvcc_version": None}),
    # 11.8's dated version.json
    ({"version.json": fixture("published-excerpts/cuda-11.8.0-version.json")}, [], {},
     {"version": "11.8", "source": "version.json", "nvcc_version": None}),
    ({}, [], {}, {"version": None, "source": None, "nvcc_version": None}),
])
def test_cuda_version_sources_in_order(tmp_path, files, tools, answers, expected):
    put(tmp_path, "/usr/local/cuda-x/include/cuda.h")
    for rel, text in files.items():
        put(tmp_path, "/usr/local/cuda-x/" + rel, text)
    for rel in tools:
        tool(tmp_path, "/usr/local/cuda-x/" + rel)
    assert gf.detect_cuda(host_for(tmp_path, Runner(answers)), "/usr/local/cuda-x", {}) == expected


def test_without_usr_local_cuda_the_newest_toolkit_is_home(tmp_path):
    put(tmp_path, "/usr/local/cuda-11.7/version.json", CUDA_1171_VERSION_JSON)
    put(tmp_path, "/usr/local/cuda-12.1/version.json", '{"cuda": {"name": "CUDA SDK", "version": "12.1.1"}}')
    cuda = gf.collect_cuda(host_for(tmp_path))
    assert (cuda["home"], cuda["version"], cuda["source"]) == ("/usr/local/cuda-12.1", "12.1.1", "version.json")
    assert [i["path"] for i in cuda["installed"]] == ["/usr/local/cuda-11.7", "/usr/local/cuda-12.1"]


def test_distribution_toolkit_in_usr_is_home_but_a_wrapper_in_usr_local_bin_is_not(tmp_path):
    tool(tmp_path, "/usr/local/bin/nvcc")   # like `exec /usr/local/cuda-13.0/bin/nvcc "$@"`
    assert gf.collect_cuda(host_for(tmp_path))["home"] is None
    tool(tmp_path, "/usr/bin/nvcc")
    put(tmp_path, "/usr/include/cuda_runtime_api.h")
    runner = Runner({("nvcc", "--version"): (0, fixture("published-excerpts/cuda-11.8.0-nvcc-version.txt"), "")})
    cuda = gf.collect_cuda(host_for(tmp_path, runner))
    assert (cuda["home"], cuda["version"], cuda["source"]) == ("/usr", "11.8.89", "nvcc")
    assert cuda["installed"] == [{"path": "/usr", "version": "11.8.89", "source": "nvcc"}]


@pytest.mark.parametrize("layout, expected", [
    ({"/usr/local/cuda/include/cudnn_version.h": "cudnn-8.6.0.163-cuda11-wheel/cudnn_version.h"},
     {"version": "8.6.0", "source": "/usr/local/cuda/include/cudnn_version.h"}),
    ({"/usr/include/x86_64-linux-gnu/cudnn_version_v9.h": "gpu-host-h200x2/system-usr-include-cudnn_version.h"},
     {"version": "9.14.0", "source": "/usr/include/x86_64-linux-gnu/cudnn_version_v9.h"}),
    # /usr/include is read before the toolkit's include directory
    ({"/usr/include/cudnn_version.h": "gpu-host-h200x2/system-usr-include-cudnn_version.h",
      "/usr/local/cuda/include/cudnn_version.h": "cudnn-8.6.0.163-cuda11-wheel/cudnn_version.h"},
     {"version": "9.14.0", "source": "/usr/include/cudnn_version.h"}),
    ({}, {"version": None, "source": None}),
])
def test_system_cudnn_from_headers(tmp_path, layout, expected):
    for node_path, rel in layout.items():
        put(tmp_path, node_path, fixture(rel))
    assert gf.collect_cudnn(host_for(tmp_path), "/usr/local/cuda") == expected


def test_nccl_from_library_name_when_no_header(tmp_path):
    put(tmp_path, "/usr/local/cuda/lib64/libnccl.so.2.16.5")
    link(tmp_path, "/usr/local/cuda/lib64/libnccl.so.2", "libnccl.so.2.16.5")
    assert gf.collect_nccl(host_for(tmp_path), "/usr/local/cuda") == {
        "version": "2.16.5", "source": "/usr/local/cuda/lib64/libnccl.so.2.16.5",
        "library": "/usr/local/cuda/lib64/libnccl.so.2.16.5"}


def test_no_nccl_at_all(tmp_path):
    assert gf.collect_nccl(host_for(tmp_path), None) == {"version": None, "source": None, "library": None}


@pytest.mark.parametrize("proc_devices, dev_nodes, expected", [
    (["0000:05:00.0", "0000:06:00.0", "0000:07:00.0", "0000:08:00.0"], [], {"present": True, "count": 4}),
    ([], ["nvidia-nvswitchctl", "nvidia-nvswitch0", "nvidia-nvswitch1"], {"present": True, "count": 2}),
    ([], ["nvidia-nvswitchctl", "nvidia0", "nvidiactl"], {"present": False, "count": 0}),
])
def test_nvswitch_detection(tmp_path, proc_devices, dev_nodes, expected):
    for device in proc_devices:
        put(tmp_path, "/proc/driver/nvidia-nvswitch/devices/%s/information" % device)
    for node in dev_nodes:
        put(tmp_path, "/dev/" + node)
    assert gf.collect_nvswitch(host_for(tmp_path)) == expected


@pytest.mark.parametrize("tools, answers, expected", [
    (["/usr/bin/nv-fabricmanager", "/usr/bin/systemctl"],
     {("nv-fabricmanager", "--version"): (0, fixture("published-excerpts/nv-fabricmanager-version.txt"), ""),
      ("systemctl", "is-active"): (0, "active\n", "")},
     {"installed": True, "version": "450.102.04", "active": True}),
    (["/usr/bin/dpkg-query", "/usr/bin/systemctl"],
     {("dpkg-query",): (0, "nvidia-fabricmanager-535 535.129.03-1 ii \n", ""),
      ("systemctl", "is-active"): (3, "failed\n", "")},
     {"installed": True, "version": "535.129.03", "active": False}),
    # the recorded Debian 12 container: no package listed by dpkg, so neither dpkg-query nor
    # systemctl runs (their answers, recorded there, are not asked for)
    (["/usr/bin/dpkg-query", "/usr/bin/systemctl"],
     {("dpkg-query",): (1, "", fixture("debian12-systemd-container/dpkg-query-nvidia-fabricmanager.stderr.txt")),
      ("systemctl", "is-active"): (3, fixture("debian12-systemd-container/systemctl-is-active-nvidia-fabricmanager.txt"),
                                   "")},
     {"installed": False, "version": None, "active": None}),
    # systemctl present but no systemd running (this CI machine, the H200 host's containers)
    (["/usr/bin/systemctl"],
     {("systemctl", "is-active"): (1, "", "System has not been booted with systemd as init system (PID 1). Can't operate.\n")},
     {"installed": False, "version": None, "active": None}),
    ([], {}, {"installed": False, "version": None, "active": None}),
])
def test_fabric_manager(tmp_path, tools, answers, expected):
    for path in tools:
        tool(tmp_path, path)
    for (program, *_args), (_rc, out, _err) in answers.items():
        if program == "dpkg-query" and "nvidia-fabricmanager" in out:
            put(tmp_path, "/var/lib/dpkg/info/%s.list" % out.split()[0])  # what dpkg keeps per installed package
    runner = Runner(answers)
    assert gf.collect_fabric_manager(host_for(tmp_path, runner)) == expected
    if not expected["installed"]:
        assert runner.calls == []  # a node without fabric manager costs no process


# --------------------------------------------------------------------------- InfiniBand sysfs
def ib_port(root: Path, hca: str, port: int, state: str, phys: str, rate: str, link_layer: str) -> None:
    base = "/sys/class/infiniband/%s/ports/%d/" % (hca, port)
    for name, text in (("state", state), ("phys_state", phys), ("rate", rate), ("link_layer", link_layer)):
        put(root, base + name, text + "\n")


def test_infiniband_ports_from_sysfs(tmp_path):
    ib_port(tmp_path, "mlx5_0", 1, "4: ACTIVE", "5: LinkUp", "200 Gb/sec (4X HDR)", "InfiniBand")
    ib_port(tmp_path, "mlx5_1", 1, "1: DOWN", "2: Polling", "10 Gb/sec (4X)", "InfiniBand")
    ib_port(tmp_path, "mlx5_2", 1, "4: ACTIVE", "5: LinkUp", "100 Gb/sec (4X EDR)", "Ethernet")
    put(tmp_path, "/proc/modules",
        "nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\n"
        "ib_core 450560 9 rdma_cm,ib_ipoib,nvidia_peermem,ib_uverbs,mlx5_ib, Live 0x0000000000000000\n")
    facts = gf.collect_infiniband(host_for(tmp_path))
    assert facts["peermem_loaded"] is True
    assert [h["name"] for h in facts["hcas"]] == ["mlx5_0", "mlx5_1", "mlx5_2"]
    assert facts["hcas"][0]["ports"] == [{"port": 1, "state": "ACTIVE", "phys_state": "LinkUp",
                                          "rate": "200 Gb/sec (4X HDR)", "link_layer": "InfiniBand"}]
    assert facts["hcas"][1]["ports"][0]["state"] == "DOWN"
    assert facts["hcas"][2]["ports"][0]["link_layer"] == "Ethernet"


def test_infiniband_ports_are_numbered_in_order_and_multi_port_hcas_kept(tmp_path):
    for port in (2, 1, 10):
        ib_port(tmp_path, "mlx4_0", port, "4: ACTIVE", "5: LinkUp", "56 Gb/sec (4X FDR)", "InfiniBand")
    ports = gf.collect_infiniband(host_for(tmp_path))["hcas"][0]["ports"]
    assert [p["port"] for p in ports] == [1, 2, 10]


@pytest.mark.parametrize("modules, peers, module", [
    ("nv_peer_mem 20480 0 - Live 0x0000000000000000 (OE)\n", ["nv_mem"], "nv_peer_mem"),
    ("nvidia_peermem 16384 0 - Live 0x0000000000000000 (OE)\n", [], "nvidia_peermem"),
    ("nvidia_peermem 16384 0 - Live 0x0 (OE)\n", ["nv_mem", "nv_mem_nc"], "nvidia_peermem"),
    ("nvidia_uvm 1466368 0 - Live 0x0000000000000000 (POE)\nnvidia 56717312 1 nvidia_uvm, Live 0x0 (POE)\n", [], None),
    (None, [], None),
])
def test_peermem(tmp_path, modules, peers, module):
    if modules is not None:
        put(tmp_path, "/proc/modules", modules)
    for peer in peers:
        put(tmp_path, "/sys/kernel/mm/memory_peers/%s/version" % peer, "1.0\n")
    assert gf.collect_infiniband(host_for(tmp_path)) == {
        "hcas": [], "peermem_loaded": module is not None, "peermem_module": module, "memory_peers": peers}


# --------------------------------------------------------------------------- Megatron commit
NO_FILES = {"source": None, "checked": 0, "bad_count": 0, "bad": [], "error": None}
SHA_A = "4efb479d" * 5
SHA_B = "9446eaac" * 5


@pytest.mark.parametrize("files, expected", [
    ({".git/HEAD": "ref: refs/heads/main\n", ".git/refs/heads/main": SHA_A + "\n"}, SHA_A),
    ({".git/HEAD": "ref: refs/heads/before_rebase\n",
      ".git/packed-refs": "# pack-refs with: peeled fully-peeled sorted\n%s refs/heads/before_rebase\n^%s\n"
                          % (SHA_B, SHA_A)}, SHA_B),
    ({".git/HEAD": SHA_A + "\n"}, SHA_A),
    # a linked worktree: .git is a file, HEAD is per worktree, refs live in the common dir
    ({".git": "gitdir: /srv/main/.git/worktrees/mds\n",
      "/srv/main/.git/worktrees/mds/HEAD": "ref: refs/heads/main\n",
      "/srv/main/.git/worktrees/mds/commondir": "../..\n",
      "/srv/main/.git/refs/heads/main": SHA_B + "\n"}, SHA_B),
    ({".git/HEAD": "ref: refs/heads/gone\n"}, None),
    ({}, None),
])
def test_commit_from_git_files(tmp_path, files, expected):
    put(tmp_path, "/opt/mds/pretrain_gpt.py")
    for rel, text in files.items():
        put(tmp_path, rel if rel.startswith("/") else "/opt/mds/" + rel, text)
    facts = gf.collect_megatron(host_for(tmp_path), "/opt/mds")
    files = facts.pop("files")
    assert facts == {"path": "/opt/mds", "commit": expected, "present": True}
    # These trees have a git directory but no index: nothing to compare, and it says so.
    assert files == (dict(NO_FILES) if not files["source"] else dict(
        NO_FILES, source=files["source"], error="no git index at %s" % files["source"]))
    assert files["source"] in (None, "/opt/mds/.git/index", "/srv/main/.git/worktrees/mds/index")


@pytest.mark.parametrize("make, present", [(False, False), (True, False)])
def test_megatron_absent_or_not_a_checkout(tmp_path, make, present):
    if make:
        put(tmp_path, "/opt/mds/README.md")
    facts = gf.collect_megatron(host_for(tmp_path), "/opt/mds")
    assert facts == {"path": "/opt/mds", "commit": None, "present": present, "files": NO_FILES}


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_commit_from_git_rev_parse_matches_a_real_repository(tmp_path):
    repo = tmp_path / "Megatron-DeepSpeed"
    (repo / "megatron").mkdir(parents=True)
    (repo / "megatron" / "__init__.py").write_text("")
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid")
    for argv in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "x"], ["pack-refs", "--all"]):
        subprocess.run(["git", "-C", str(repo)] + argv, check=True, env=env)
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout.strip()
    host = gf.Host(root="/", timeout=10)
    facts = gf.collect_megatron(host, str(repo))
    files = facts.pop("files")
    assert facts == {"path": str(repo), "commit": head, "present": True}
    assert files == dict(NO_FILES, source=str(repo / ".git" / "index"), checked=1)
    # the same answer without git: packed-refs only, since pack-refs removed the loose ref
    assert gf.read_git_commit(host, str(repo)) == head


# --------------------------------------------------------------------------- memlock / ssh
@pytest.mark.parametrize("euid, current, expect_prefix, problem", [
    (1000, "train", ["/usr/bin/ssh"], None),
    (0, "root", ["/usr/bin/su", "-s", "/bin/sh", "train", "-c"], None),
    (1001, "other", None, "checking as train needs root on the node (become: true)"),
])
def test_ssh_memlock_command(tmp_path, euid, current, expect_prefix, problem):
    tool(tmp_path, "/usr/bin/ssh")
    tool(tmp_path, "/usr/bin/su")
    argv, why = gf.ssh_memlock_argv(host_for(tmp_path), "train", 20, euid, current)
    assert why == problem
    if expect_prefix is None:
        assert argv is None
        return
    assert argv[: len(expect_prefix)] == expect_prefix
    remote = argv if argv[0].endswith("ssh") else shlex.split(argv[-1])
    assert remote[0] == "/usr/bin/ssh"
    assert {"BatchMode=yes", "StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null"} <= set(remote)
    assert remote[-2:] == ["train@localhost", "ulimit -l"]


def test_ssh_memlock_without_ssh_client(tmp_path):
    assert gf.ssh_memlock_argv(host_for(tmp_path), "train", 20, 0, "root") == (None, "ssh client not found")


@pytest.mark.parametrize("answer, value, error_part", [
    ((0, "unlimited\n", ""), "unlimited", None),
    ((0, "Welcome to node1\n65536\n", ""), "65536", None),
    ((255, "", "train@localhost: Permission denied (publickey).\n"), None, "Permission denied (publickey)"),
    ((124, "", "timed out after 5s"), None, "timed out"),
])
def test_memlock_via_ssh(tmp_path, monkeypatch, answer, value, error_part):
    tool(tmp_path, "/usr/bin/ssh")
    tool(tmp_path, "/usr/bin/su")
    errors: List[str] = []
    facts = gf.collect_memlock(host_for(tmp_path, Runner({("su",): answer, ("ssh",): answer})), "train", errors)
    assert facts["current"] == "unlimited" or facts["current"].isdigit()
    assert facts["noninteractive_ssh"] == value
    if error_part is None:
        assert facts["noninteractive_ssh_error"] is None and errors == []
    else:
        assert error_part in facts["noninteractive_ssh_error"] and errors[0].startswith("memlock: ")


def test_memlock_without_ssh_user_checks_nothing(tmp_path):
    runner = Runner()
    facts = gf.collect_memlock(host_for(tmp_path, runner), None, [])
    assert facts["noninteractive_ssh"] is None and runner.calls == []


# --------------------------------------------------------------------------- the head node's ssh sweep
@pytest.mark.parametrize("euid, current, expect_prefix, problem", [
    (1000, "train", ["/bin/sh", "-c"], None),
    (0, "root", ["/usr/bin/su", "-s", "/bin/sh", "train", "-c"], None),
    (1001, "other", None, "sweeping as train needs root on the node (become: true)"),
])
def test_ssh_sweep_command(tmp_path, euid, current, expect_prefix, problem):
    tool(tmp_path, "/usr/bin/ssh")
    tool(tmp_path, "/usr/bin/su")
    argv, why = gf.ssh_sweep_argv(host_for(tmp_path), "train", ["n1", "n2"], euid, current)
    assert why == problem
    if expect_prefix is None:
        assert argv is None
        return
    assert argv[: len(expect_prefix)] == expect_prefix
    # the script, its $0, then the addresses as its arguments (never spliced into the script)
    assert argv[len(expect_prefix):] == [gf.SSH_SWEEP_SCRIPT, "preflight-ssh-sweep", "n1", "n2"]


@pytest.mark.parametrize("tools, problem", [
    ((), "ssh client not found"),
    (("/usr/bin/ssh",), "su not found"),
])
def test_ssh_sweep_without_tools(tmp_path, tools, problem):
    for path in tools:
        tool(tmp_path, path)
    assert gf.ssh_sweep_argv(host_for(tmp_path), "train", ["n1"], 0, "root") == (None, problem)


@pytest.mark.parametrize("output, expected", [
    ("n1 0 unlimited\nn2 255 -\n", [("n1", 0, "unlimited"), ("n2", 255, "-")]),
    ("Welcome\nn1 0 65536\nn2 0 unlimited\n", [("n1", 0, "65536"), ("n2", 0, "unlimited")]),
    ("n1 0 unlimited\n", [("n1", 0, "unlimited")]),  # the sweep died after the first node
    ("n2 0 unlimited\nn1 0 unlimited\n", []),  # out of step with the targets: trust nothing
    ("", []),
])
def test_parse_ssh_sweep(output, expected):
    nodes = gf.parse_ssh_sweep(output, ["n1", "n2"])
    assert [(n["address"], n["rc"], n["memlock"]) for n in nodes] == expected


@pytest.mark.parametrize("answer, nodes, error_part", [
    ((0, "n1 0 unlimited\nn2 255 -\n", ""), [("n1", 0), ("n2", 255)], None),
    ((1, "n1 0 unlimited\n", "mktemp: failed"), [("n1", 0)], "exit 1, 1 of 2 nodes answered: mktemp: failed"),
    ((1, "", "su: user train does not exist"), [], "su: user train does not exist"),
])
def test_collect_runs_the_sweep_only_when_asked(tmp_path, monkeypatch, answer, nodes, error_part):
    tool(tmp_path, "/usr/bin/ssh")
    tool(tmp_path, "/usr/bin/su")
    monkeypatch.setattr(gf.os, "geteuid", lambda: 0)
    runner = Runner({("su",): answer})
    facts = gf.collect(host_for(tmp_path, runner), ssh_sweep_user="train", ssh_sweep_targets=["n1", "n2"])
    sweep = facts["ssh_sweep"]
    assert sweep["user"] == "train"
    assert [(n["address"], n["rc"]) for n in sweep["nodes"]] == nodes
    assert runner.count("su") == 1
    if error_part is None:
        assert sweep["error"] is None and not any(e.startswith("ssh_sweep") for e in facts["errors"])
    else:
        assert error_part in sweep["error"] and "ssh_sweep: " + sweep["error"] in facts["errors"]
    # the other nodes' facts calls carry no sweep and start no ssh
    runner = Runner({("su",): answer})
    assert "ssh_sweep" not in gf.collect(host_for(tmp_path, runner))
    assert runner.count("su") == 0 and runner.count("ssh") == 0


@pytest.mark.skipif(not os.path.exists("/bin/sh"), reason="needs /bin/sh")
@pytest.mark.parametrize("answers, expected", [
    ({"n1": (0, "unlimited"), "n2": (0, "65536")}, ["n1 0 unlimited", "n2 0 65536"]),
    ({"n1": (255, ""), "n2": (0, "unlimited")}, ["n1 255 -", "n2 0 unlimited"]),
    ({"n1": (0, "motd line\n  8192  "), "n2": (130, "")}, ["n1 0 8192", "n2 130 -"]),
])
def test_ssh_sweep_script_runs_every_node_and_keeps_the_order(tmp_path, answers, expected):
    """The sweep's shell script itself, with an ``ssh`` on PATH that answers per address."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    cases = "".join("  %s) printf '%%s\\n' %s; exit %d;;\n" % (node, shlex.quote(out), rc)
                    for node, (rc, out) in answers.items())
    fake = bin_dir / "ssh"
    # the node is the argument before the remote command; the second node answers first
    fake.write_text("#!/bin/sh\nfor a; do last=$node; node=$a; done\n[ \"$last\" = n1 ] && sleep 0.2\n"
                    "case \"$last\" in\n%s  *) exit 99;;\nesac\n" % cases)
    fake.chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (bin_dir, os.environ.get("PATH", "/usr/bin:/bin")))
    proc = subprocess.run(["/bin/sh", "-c", gf.SSH_SWEEP_SCRIPT, "preflight-ssh-sweep"] + list(answers),
                          stdout=subprocess.PIPE, universal_newlines=True, env=env, check=True)
    assert proc.stdout.splitlines() == expected
    parsed = gf.parse_ssh_sweep(proc.stdout, list(answers))
    assert [n["address"] for n in parsed] == list(answers)


# --------------------------------------------------------------------------- disk / clock
def test_disk_paths_exist_or_not(tmp_path):
    (tmp_path / "data").mkdir()
    facts = gf.collect_disk(host_for(tmp_path), ["/data", "/checkpoints/run1"])
    assert facts["/data"]["exists"] is True
    assert facts["/checkpoints/run1"]["exists"] is False
    assert all(isinstance(v["free_bytes"], int) and v["free_bytes"] >= 0 for v in facts.values())


@pytest.mark.parametrize("tools, answers, expected", [
    (["/usr/bin/chronyc"], {("chronyc", "-n", "tracking"): (0, fixture("chrony-4.3/tracking-manpage-example.txt"), "")},
     {"synchronized": True, "offset_ms": pytest.approx(-0.006523), "source": "chronyc"}),
    (["/usr/bin/chronyc", "/usr/bin/timedatectl"],
     {("chronyc",): (1, "", "506 Cannot talk to daemon\n"),
      ("timedatectl", "show"): (0, fixture("debian12-systemd-container/timedatectl-show.txt"), "")},
     {"synchronized": False, "offset_ms": None, "source": "timedatectl"}),
    (["/usr/bin/timedatectl"],
     {("timedatectl", "show"): (1, "", "System has not been booted with systemd as init system (PID 1). Can't operate.")},
     {"synchronized": None, "offset_ms": None, "source": None}),
    ([], {}, {"synchronized": None, "offset_ms": None, "source": None}),
])
def test_clock(tmp_path, tools, answers, expected):
    for path in tools:
        tool(tmp_path, path)
    assert gf.collect_clock(host_for(tmp_path, Runner(answers))) == expected


# --------------------------------------------------------------------------- the venv probe
def make_venv(path: Path) -> Path:
    """A real venv of the interpreter running the tests (no pip: nothing is installed)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    return path


def site_packages(venv: Path) -> Path:
    return next(venv.glob("lib/python3*/site-packages"))


@pytest.mark.parametrize("probe", ["files", "import"])
def test_no_venv_means_no_probe(tmp_path, probe):
    runner = Runner()
    stack = gf.collect_python_stack(host_for(tmp_path, runner), None, [], probe)
    assert runner.calls == []
    assert stack["python"] == {"version": None, "executable": None, "source": None}
    assert stack["torch"]["version"] is None and stack["torch"]["error"] == "no venv given"


@pytest.mark.parametrize("probe", ["files", "import"])
def test_venv_without_python(tmp_path, probe):
    errors: List[str] = []
    (tmp_path / "venv" / "bin").mkdir(parents=True)
    stack = gf.collect_python_stack(host_for(tmp_path), "/venv", errors, probe)
    assert stack["torch"]["error"].startswith("no python in venv /venv")
    assert stack["torch"]["source"] == probe
    assert errors and errors[0].startswith("python: no python in venv")


@pytest.mark.parametrize("answer, error_part", [
    ((1, "", "Traceback (most recent call last):\n  File ...\n"), "exit 1: Traceback"),
    ((0, "not json at all", ""), "probe output is not JSON"),
    ((124, "", "timed out after 5s"), "exit 124: timed out"),
])
def test_probe_failures_are_reported_not_raised(tmp_path, answer, error_part):
    tool(tmp_path, "/venv/bin/python")
    errors: List[str] = []
    stack = gf.collect_python_stack(host_for(tmp_path, Runner({("python",): answer})), "/venv", errors, "import")
    assert error_part in stack["torch"]["error"] and error_part in stack["deepspeed"]["error"]
    assert stack["apex"] == {"present": False, "cuda_ext": False, "error": stack["torch"]["error"], "source": "import",
                             "files": NO_FILES}
    assert errors and error_part in errors[0]


def test_probe_in_a_real_venv_without_torch(tmp_path):
    venv = make_venv(tmp_path / "venv")
    errors: List[str] = []
    stack = gf.collect_python_stack(gf.Host(root="/", timeout=60), str(venv), errors, "import")
    assert errors == []
    assert stack["python"] == {"version": "%d.%d.%d" % sys.version_info[:3], "executable": str(venv / "bin/python"),
                               "source": "import"}
    assert stack["torch"] == {"version": None, "cuda": None, "cudnn": None, "nccl": None,
                              "error": "ModuleNotFoundError: No module named 'torch'", "source": "import",
                              "files": NO_FILES}
    assert stack["deepspeed"] == {"version": None, "error": "ModuleNotFoundError: No module named 'deepspeed'",
                                  "source": "import", "files": NO_FILES}
    assert stack["apex"] == {"present": False, "cuda_ext": False, "error": "ModuleNotFoundError: No module named 'apex'",
                             "source": "import", "files": NO_FILES}


def test_probe_keeps_stdout_clean_and_tells_pypi_apex_from_nvidia_apex(tmp_path):
    # Stand-ins for two behaviours of real packages that this machine cannot install: DeepSpeed
    # prints while importing, and PyPI's 'apex' (a Pyramid toolkit, docs/upstream-facts.md §F) has no
    # apex.normalization. Both are plain Python packages, not NVIDIA tools.
    venv = make_venv(tmp_path / "venv")
    site = site_packages(venv)
    (site / "deepspeed").mkdir()
    (site / "deepspeed" / "__init__.py").write_text(
        "import os\nprint('[INFO] Setting ds_accelerator to cuda (auto detect)')\n"
        "os.write(1, b'C-level noise\\n')\n__version__ = '0.9.2'\n")
    (site / "apex").mkdir()
    (site / "apex" / "__init__.py").write_text("")
    errors: List[str] = []
    stack = gf.collect_python_stack(gf.Host(root="/", timeout=60), str(venv), errors, "import")
    assert errors == []
    files = stack["deepspeed"].pop("files")
    assert stack["deepspeed"] == {"version": "0.9.2", "error": None, "source": "import"}
    assert files == NO_FILES  # a package without a dist-info: no RECORD to compare
    assert stack["apex"]["present"] is False
    assert "is not NVIDIA apex" in stack["apex"]["error"]


def test_probe_script_is_python36_syntax():
    compile(gpy.PROBE_SCRIPT, "<probe>", "exec")
    assert "f\"" not in gpy.PROBE_SCRIPT and "f'" not in gpy.PROBE_SCRIPT


# --------------------------------------------------------------------------- the venv, from files
# python_probe=files: the same sections from the venv's files, with no process. The trees below
# hold the files pip writes (dist-info METADATA, torch/version.py in its two formats, ...).
TORCH_113_VERSION_PY = ("__version__ = '1.13.1+cu117'\ndebug = False\ncuda = '11.7'\n"
                        "git_version = '49444c3e546bf240bed24a101e747422d1f8a0ee'\nhip = None\n")
TORCH_2_VERSION_PY = ("from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip']\n"
                      "__version__ = '{version}'\ndebug = False\ncuda: Optional[str] = {cuda}\n"
                      "git_version = 'cf30153c4c131c8164ee7798e5022d810682e2cb'\nhip: Optional[str] = None\n")
SITE = "/venv/lib/python3.11/site-packages"


def torch2(version: str, cuda: Optional[str]) -> str:
    return TORCH_2_VERSION_PY.format(version=version, cuda="None" if cuda is None else "'%s'" % cuda)


def dist(name: str, version: str, extra: str = "") -> Dict[str, str]:
    """A dist-info directory as pip leaves it (METADATA's header, then a body that is ignored)."""
    key = re.sub(r"[-_.]+", "_", name)
    return {"%s-%s.dist-info/METADATA" % (key, version):
            "Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: x\n\nVersion: 0.0.0 in the body\n%s"
            % (name, version, extra)}


def fake_venv(root: Path, site_files: Dict[str, str], pyvenv: Optional[str] = "home = /usr/bin\nversion = 3.11.2\n",
              lib: str = "python3.11") -> str:
    tool(root, "/venv/bin/python")
    if pyvenv is not None:
        put(root, "/venv/pyvenv.cfg", pyvenv)
    (root / "venv" / "lib" / lib / "site-packages").mkdir(parents=True, exist_ok=True)
    for rel, text in site_files.items():
        put(root, "/venv/lib/%s/site-packages/%s" % (lib, rel), text)
    return "/venv"


def files_stack(root: Path, site_files: Dict[str, str], **kwargs) -> Tuple[Dict, List[str], Runner]:
    runner = Runner()
    errors: List[str] = []
    venv = fake_venv(root, site_files, **kwargs)
    stack = gf.collect_python_stack(host_for(root, runner), venv, errors, "files")
    return stack, errors, runner


TORCH_CASES = [
    # id, site-packages files, expected torch (error: a part of it, or None)
    ("torch-1.13-pypi-cu117", {**dist("torch", "1.13.1"), "torch/version.py": TORCH_113_VERSION_PY,
                               **dist("nvidia-cudnn-cu11", "8.5.0.96")},
     # torch 1.13.1 links NCCL statically: no wheel names it.
     {"version": "1.13.1+cu117", "cuda": "11.7", "cudnn": "8.5.0", "nccl": None, "error": None}),
    ("torch-2.1-cu121", {**dist("torch", "2.1.2+cu121"), "torch/version.py": torch2("2.1.2+cu121", "12.1"),
                         **dist("nvidia-cudnn-cu12", "8.9.2.26"), **dist("nvidia-nccl-cu12", "2.18.1")},
     {"version": "2.1.2+cu121", "cuda": "12.1", "cudnn": "8.9.2", "nccl": "2.18.1", "error": None}),
    ("torch-2.11-cu130-h200", {**dist("torch", "2.11.0+cu130"), "torch/version.py": torch2("2.11.0+cu130", "13.0"),
                               **dist("nvidia-cudnn-cu13", "9.19.0.56"), **dist("nvidia-nccl-cu13", "2.28.9")},
     {"version": "2.11.0+cu130", "cuda": "13.0", "cudnn": "9.19.0", "nccl": "2.28.9", "error": None}),
    ("cu11-and-cu12-wheels-left-over", {**dist("torch", "2.1.2+cu121"), "torch/version.py": torch2("2.1.2+cu121", "12.1"),
                                        **dist("nvidia-cudnn-cu11", "8.5.0.96"), **dist("nvidia-cudnn-cu12", "8.9.2.26"),
                                        **dist("nvidia-nccl-cu11", "2.21.5"), **dist("nvidia-nccl-cu12", "2.18.1")},
     {"version": "2.1.2+cu121", "cuda": "12.1", "cudnn": "8.9.2", "nccl": "2.18.1", "error": None}),
    ("cpu-build", {**dist("torch", "2.13.0+cpu"), "torch/version.py": torch2("2.13.0+cpu", None),
                   **dist("nvidia-cudnn-cu12", "9.1.0.70"), **dist("nvidia-nccl-cu12", "2.21.5")},
     {"version": "2.13.0+cpu", "cuda": None, "cudnn": None, "nccl": None, "error": None}),
    ("bundled-in-torch-lib", {**dist("torch", "1.13.1+cu117"), "torch/version.py": TORCH_113_VERSION_PY,
                              "torch/lib/libcudnn.so.8": "", "torch/lib/libnccl.so.2.14.3": ""},
     {"version": "1.13.1+cu117", "cuda": "11.7", "cudnn": None, "nccl": "2.14.3", "error": None}),
    ("half-removed", {**dist("torch", "2.13.0+cpu"), "torch/lib/libc10.so": ""},
     {"version": "2.13.0+cpu", "cuda": None, "cudnn": None, "nccl": None,
      "error": "torch's dist-info says 2.13.0+cpu but site-packages/torch/version.py is missing: a half-removed install"}),
    ("package-without-dist-info", {"torch/version.py": torch2("2.13.0+cpu", None)},
     {"version": "2.13.0+cpu", "cuda": None, "cudnn": None, "nccl": None, "error": "but no dist-info"}),
    ("two-distributions", {**dist("torch", "2.1.0"), **dist("torch", "2.1.2"), "torch/version.py": torch2("2.1.2", None)},
     {"version": "2.1.2", "cuda": None, "cudnn": None, "nccl": None, "error": "torch has 2 distributions"}),
    ("pypi-wheel-label-only-in-version-py", {**dist("torch", "2.1.2"), "torch/version.py": torch2("2.1.2+cu121", None)},
     {"version": "2.1.2+cu121", "cuda": None, "cudnn": None, "nccl": None, "error": None}),
    ("metadata-and-package-disagree", {**dist("torch", "2.1.0"), "torch/version.py": torch2("2.1.2", None)},
     {"version": "2.1.2", "cuda": None, "cudnn": None, "nccl": None, "error": "a mixed install"}),
    ("version-py-damaged", {**dist("torch", "2.1.0"), "torch/version.py": "garbage\n"},
     {"version": "2.1.0", "cuda": None, "cudnn": None, "nccl": None, "error": "does not assign __version__"}),
    ("not-installed", {},
     {"version": None, "cuda": None, "cudnn": None, "nccl": None, "error": "torch is not installed in /venv"}),
]


@pytest.mark.parametrize("files, expected", [c[1:] for c in TORCH_CASES], ids=[c[0] for c in TORCH_CASES])
def test_torch_from_files(tmp_path, files, expected):
    stack, errors, runner = files_stack(tmp_path, files)
    torch = stack["torch"]
    assert runner.calls == [] and errors == []
    assert torch["source"] == "files"
    assert {k: torch[k] for k in ("version", "cuda", "cudnn", "nccl")} == {
        k: expected[k] for k in ("version", "cuda", "cudnn", "nccl")}
    if expected["error"] is None:
        assert torch["error"] is None
    else:
        assert torch["error"] and expected["error"] in torch["error"], torch["error"]


@pytest.mark.parametrize("dist_version, torch_code", [
    ("8.5.0.96", 8500),     # cuDNN 8: MAJOR*1000 + MINOR*100 + PATCH
    ("8.9.2.26", 8902),
    ("9.19.0.56", 91900),   # cuDNN 9: MAJOR*10000 + MINOR*100 + PATCH (the H200 host)
])
def test_cudnn_from_files_is_written_as_torch_reports_it(tmp_path, dist_version, torch_code):
    files = {**dist("torch", "2.1.2+cu121"), "torch/version.py": torch2("2.1.2+cu121", "12.1"),
             **dist("nvidia-cudnn-cu12", dist_version)}
    stack, _errors, _runner = files_stack(tmp_path, files)
    assert stack["torch"]["cudnn"] == gp.cudnn_version_from_int(torch_code)


@pytest.mark.parametrize("text, found, value", [
    ("cuda = '11.7'\n", True, "11.7"),
    ("cuda: Optional[str] = '12.1'\n", True, "12.1"),
    ('cuda: Optional[str] = "13.0"\n', True, "13.0"),
    ("cuda: Optional[str] = None\n", True, None),
    ("cuda = None\n", True, None),
    ("cudaversion = '11.7'\n", False, None),
    ("# cuda = '11.7'\n", False, None),
    ("", False, None),
])
def test_assigned_string(text, found, value):
    assert gpy._assigned_string(text, "cuda") == (found, value)


DEEPSPEED_CASES = [
    ("wheel", {**dist("deepspeed", "0.19.6"), "deepspeed/__init__.py": ""}, "0.19.6", None),
    ("with-build-info", {**dist("deepspeed", "0.9.2"), "deepspeed/__init__.py": "",
                         "deepspeed/git_version_info_installed.py": "version='0.9.2'\ngit_hash='unknown'\n"}, "0.9.2", None),
    ("dist-info-without-package", dist("deepspeed", "0.19.6"), "0.19.6",
     "deepspeed's dist-info says 0.19.6 but site-packages/deepspeed/__init__.py is missing"),
    ("package-without-dist-info", {"deepspeed/__init__.py": "",
                                   "deepspeed/git_version_info_installed.py": "version='0.9.2'\n"}, "0.9.2",
     "but no dist-info"),
    ("package-without-anything", {"deepspeed/__init__.py": ""}, None, "but no dist-info"),
    ("build-info-disagrees", {**dist("deepspeed", "0.19.7"), "deepspeed/__init__.py": "",
                              "deepspeed/git_version_info_installed.py": "version='0.19.6'\n"}, "0.19.7", "a mixed install"),
    ("not-installed", {}, None, "deepspeed is not installed in /venv"),
]


@pytest.mark.parametrize("files, version, error", [c[1:] for c in DEEPSPEED_CASES], ids=[c[0] for c in DEEPSPEED_CASES])
def test_deepspeed_from_files(tmp_path, files, version, error):
    stack, errors, runner = files_stack(tmp_path, files)
    assert runner.calls == [] and errors == []
    assert stack["deepspeed"]["version"] == version and stack["deepspeed"]["source"] == "files"
    if error is None:
        assert stack["deepspeed"]["error"] is None
    else:
        assert error in (stack["deepspeed"]["error"] or ""), stack["deepspeed"]["error"]


def test_editable_deepspeed_is_found_in_its_source_tree(tmp_path):
    # pip install -e: the dist-info is in site-packages, the code in the checkout it names.
    put(tmp_path, "/src/DeepSpeed/deepspeed/__init__.py", "")
    files = {**dist("deepspeed", "0.16.1"),
             "deepspeed-0.16.1.dist-info/direct_url.json":
                 json.dumps({"url": "file:///src/DeepSpeed", "dir_info": {"editable": True}}),
             "__editable__.deepspeed-0.16.1.pth": "/src/DeepSpeed\n"}
    stack, _errors, _runner = files_stack(tmp_path, files)
    record = stack["deepspeed"].pop("files")
    assert stack["deepspeed"] == {"version": "0.16.1", "error": None, "source": "files"}
    assert record["error"].startswith("no RECORD in ")  # this test tree has no RECORD; pip always writes one
    # The same dist-info whose checkout is gone is a broken install.
    shutil.rmtree(str(tmp_path / "src"))
    stack = gf.collect_python_stack(host_for(tmp_path), "/venv", [], "files")
    assert "is missing" in stack["deepspeed"]["error"]


SO = ".cpython-311-x86_64-linux-gnu.so"
APEX_CASES = [
    ("not-installed", {}, False, False, "apex is not installed in /venv"),
    ("pypi-apex", {"apex/__init__.py": "", "apex/pyramid.py": ""}, False, False, "is not NVIDIA apex"),
    ("python-only", {"apex/__init__.py": "", "apex/normalization/__init__.py": "", "apex/optimizers/__init__.py": ""},
     True, False, "no amp_C*.so, fused_layer_norm_cuda*.so"),
    ("one-extension", {"apex/normalization/__init__.py": "", "amp_C" + SO: ""}, True, False,
     "no fused_layer_norm_cuda*.so"),
    ("cuda-ext", {"apex/optimizers/__init__.py": "", "amp_C" + SO: "", "fused_layer_norm_cuda" + SO: ""},
     True, True, None),
    ("similar-names-do-not-count", {"apex/optimizers/__init__.py": "", "amp_C_other" + SO: "",
                                    "fused_layer_norm_cuda.py": ""}, True, False, "no amp_C*.so"),
    ("setup-py-install-egg", {"apex-0.1-py3.11-linux-x86_64.egg/apex/normalization/__init__.py": "",
                              "apex-0.1-py3.11-linux-x86_64.egg/amp_C" + SO: "",
                              "apex-0.1-py3.11-linux-x86_64.egg/fused_layer_norm_cuda" + SO: ""}, True, True, None),
]


@pytest.mark.parametrize("files, present, cuda_ext, error", [c[1:] for c in APEX_CASES], ids=[c[0] for c in APEX_CASES])
def test_apex_from_files(tmp_path, files, present, cuda_ext, error):
    stack, errors, runner = files_stack(tmp_path, files)
    apex = stack["apex"]
    assert runner.calls == [] and errors == []
    assert (apex["present"], apex["cuda_ext"], apex["source"]) == (present, cuda_ext, "files")
    if error is None:
        assert apex["error"] is None
    else:
        assert error in (apex["error"] or ""), apex["error"]


@pytest.mark.parametrize("pyvenv, lib, version, source", [
    ("home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n", "python3.11", "3.11.2", "pyvenv.cfg"),
    # virtualenv and uv write version_info
    ("home = /usr/bin\nimplementation = CPython\nversion_info = 3.12.3.final.0\n", "python3.12", "3.12.3", "pyvenv.cfg"),
    ("home = /usr/bin\nversion = 3.9.16\n", "pypy3.9", "3.9.16", "pyvenv.cfg"),
    ("home = /usr/bin\n", "python3.10", "3.10", "lib directory"),
    (None, "python3.11", "3.11", "lib directory"),
    (None, "pypy3.9", "3.9", "lib directory"),
])
def test_python_version_from_files(tmp_path, pyvenv, lib, version, source):
    stack, _errors, runner = files_stack(tmp_path, {}, pyvenv=pyvenv, lib=lib)
    assert runner.calls == []
    assert stack["python"] == {"version": version, "executable": "/venv/bin/python", "source": source}


def test_lib64_and_a_stale_series_are_read_in_the_right_order(tmp_path):
    # lib64 -> lib (RHEL venvs) counts once; the series pyvenv.cfg names is read first.
    fake_venv(tmp_path, {}, pyvenv="version = 3.11.2\n")
    link(tmp_path, "/venv/lib64", "lib")
    for rel, text in {**dist("torch", "2.1.0"), "torch/version.py": torch2("2.1.0", None)}.items():
        put(tmp_path, "/venv/lib/python3.10/site-packages/" + rel, text)
    for rel, text in {**dist("torch", "2.1.2"), "torch/version.py": torch2("2.1.2", None)}.items():
        put(tmp_path, "/venv/lib/python3.11/site-packages/" + rel, text)
    stack = gf.collect_python_stack(host_for(tmp_path), "/venv", [], "files")
    assert stack["torch"]["version"] == "2.1.2"


def test_venv_without_site_packages(tmp_path):
    tool(tmp_path, "/venv/bin/python3")
    put(tmp_path, "/venv/pyvenv.cfg", "version = 3.11.2\n")
    stack = gf.collect_python_stack(host_for(tmp_path), "/venv", [], "files")
    assert stack["python"] == {"version": "3.11.2", "executable": "/venv/bin/python3", "source": "pyvenv.cfg"}
    for section in ("torch", "deepspeed", "apex"):
        assert stack[section]["error"].startswith("no site-packages in /venv"), section


def test_missing_venv_in_files_mode(tmp_path):
    errors: List[str] = []
    stack = gf.collect_python_stack(host_for(tmp_path), "/opt/nowhere", errors, "files")
    assert stack["torch"]["version"] is None and stack["torch"]["error"].startswith("no python in venv /opt/nowhere")
    assert errors == ["python: " + stack["torch"]["error"]]


def test_unknown_probe_is_refused(tmp_path):
    with pytest.raises(ValueError, match="python_probe is 'guess'"):
        gf.collect(host_for(tmp_path), venv="/venv", python_probe="guess")


@pytest.mark.skipif(not list(Path(sys.prefix).glob("lib/python3*/site-packages/torch/version.py")),
                    reason="the test runner's venv has no torch")
def test_files_and_import_agree_on_the_test_runners_venv():
    # The project's venv carries real torch and DeepSpeed wheels: both probes must tell the same.
    host = gf.Host(root="/", timeout=120)
    by_files = gf.collect_python_stack(host, sys.prefix, [], "files")
    by_import = gf.collect_python_stack(host, sys.prefix, [], "import")
    for section, keys in (("python", ("version", "executable")), ("torch", ("version", "cuda", "cudnn", "nccl", "error")),
                          ("deepspeed", ("version", "error")), ("apex", ("present", "cuda_ext"))):
        assert {k: by_files[section][k] for k in keys} == {k: by_import[section][k] for k in keys}, section


# --------------------------------------------------------------------------- whole collect()
def test_empty_root_gives_empty_facts_and_no_exception(tmp_path):
    facts = gf.collect(host_for(tmp_path), venv="/opt/venv", megatron_dir="/opt/mds", disk_paths=["/data"],
                       ssh_user="train")
    assert facts["driver"] == {"version": None, "kernel_module": None, "source": None}
    assert facts["gpus"] == {"count": 0, "model": None, "models": [], "memory_mib": None, "uuids": [], "list": [],
                             "pci_devices": None, "compute_capability": None}
    assert facts["cuda"] == {"version": None, "source": None, "home": None, "nvcc_version": None, "installed": []}
    assert facts["cudnn"] == {"version": None, "source": None}
    assert facts["nccl"] == {"version": None, "source": None, "library": None}
    assert facts["torch"]["version"] is None and facts["deepspeed"]["version"] is None
    assert facts["megatron_deepspeed"] == {"path": "/opt/mds", "commit": None, "present": False, "files": NO_FILES, "imports": None}
    assert facts["apex"]["present"] is False
    assert facts["infiniband"] == {"hcas": [], "peermem_loaded": False, "peermem_module": None, "memory_peers": []}
    assert facts["nvswitch"] == {"present": False, "count": 0}
    assert facts["fabric_manager"] == {"installed": False, "version": None, "active": None}
    assert facts["clock"] == {"synchronized": None, "offset_ms": None, "source": None}
    assert facts["disk"]["/data"]["exists"] is False
    assert facts["os"] == {"id": None, "version_id": None}
    assert facts["venv"] == "/opt/venv"
    # what could not be checked is said, once per component
    assert [e.split(":")[0] for e in facts["errors"]] == ["python", "memlock"]


def test_a_collector_bug_costs_one_section_not_the_call(tmp_path, monkeypatch):
    def broken(host):
        raise RuntimeError("sysfs changed under us")
    monkeypatch.setattr(gf, "collect_infiniband", broken)
    facts = gf.collect(host_for(tmp_path))
    assert facts["infiniband"] == {"hcas": [], "peermem_loaded": False, "peermem_module": None, "memory_peers": []}
    assert facts["errors"] == ["infiniband: RuntimeError: sysfs changed under us"]


def test_every_version_is_a_string(tmp_path):
    root, runner = h200_root(tmp_path)
    facts = gf.collect(host_for(root, runner))

    def walk(node, key=""):
        if isinstance(node, dict):
            for k, v in node.items():
                yield from walk(v, k)
        elif isinstance(node, list):
            for v in node:
                yield from walk(v, key)
        else:
            yield key, node
    versions = [(k, v) for k, v in walk(facts) if "version" in k and v is not None]
    assert versions and all(isinstance(v, str) for _k, v in versions)


@pytest.mark.parametrize("files, evidence", [
    ({".dockerenv": b""}, "/.dockerenv"),
    ({"run/.containerenv": b""}, "/run/.containerenv"),
    ({"proc/1/environ": b"PATH=/usr/bin\0container=lxc\0HOME=/"}, "PID 1 has container=lxc"),
    ({"proc/1/cgroup": b"0::/system.slice/docker-3f2a.scope\n"}, "PID 1's cgroup names docker"),
    ({"proc/1/cgroup": b"12:pids:/kubepods/burstable/pod1\n"}, "PID 1's cgroup names kubepods"),
    # a host: systemd's own cgroup, no container variable
    ({"proc/1/cgroup": b"0::/init.scope\n", "proc/1/environ": b"HOME=/\0TERM=linux"}, None),
    ({}, None),
])
def test_container_evidence(tmp_path, files, evidence):
    for rel, content in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_bytes(content)
    assert gf.container_evidence(host_for(tmp_path)) == evidence


def test_memlock_reports_the_hard_limit_and_the_container(tmp_path):
    (tmp_path / ".dockerenv").write_bytes(b"")
    facts = gf.collect_memlock(host_for(tmp_path), None, [])
    assert facts["container"] == "/.dockerenv"
    assert facts["hard"] == gf.memlock_limit(1) and facts["current"] == gf.memlock_limit()


# --------------------------------------------------------------------------- PCI GPUs
# sysfs values as the kernel prints them: vendor and class with 0x and a newline.
@pytest.mark.parametrize(
    "vendor, pci_class, expected",
    [
        ("0x10de\n", "0x030200\n", True),   # 3D controller (A100, H100, H200)
        ("0x10de\n", "0x030000\n", True),   # VGA controller
        ("0x10de\n", "0x068000\n", False),  # NVSwitch bridge
        ("0x10de\n", "0x040300\n", False),  # the GPU's HDMI audio function
        ("0x1af4\n", "0x030000\n", False),  # virtio GPU
        ("0x8086\n", "0x020000\n", False),
        (None, None, False),
        ("0x10DE", "0x0302", False),          # a truncated class is not read as a GPU
    ],
)
def test_is_nvidia_gpu(vendor, pci_class, expected):
    assert gp.is_nvidia_gpu(vendor, pci_class) is expected


@pytest.mark.parametrize(
    "devices, expected",
    [
        ({}, []),
        ({"0000:00:02.0": ("0x1af4", "0x020000"), "0000:00:01.0": ("0x1234", "0x030000")}, []),
        ({"0000:2a:00.0": ("0x10de", "0x030200"), "0000:18:00.0": ("0x10de", "0x030200"),
          "0000:05:00.0": ("0x10de", "0x068000")}, ["0000:18:00.0", "0000:2a:00.0"]),
        (None, None),
    ],
)
def test_collect_pci_gpus(tmp_path, devices, expected):
    if devices is not None:
        (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
        for address, (vendor, pci_class) in devices.items():
            put(tmp_path, "/sys/bus/pci/devices/%s/vendor" % address, vendor + "\n")
            put(tmp_path, "/sys/bus/pci/devices/%s/class" % address, pci_class + "\n")
    assert gf.collect_pci_gpus(host_for(tmp_path)) == expected


# The VMs of make vm-test: Debian's nvidia-smi installed, no GPU on the bus. nvidia-smi exits 9
# there; it is not asked, and nothing is reported as a problem. With a GPU on the bus, or no bus
# read, it is asked as before.
@pytest.mark.parametrize(
    "devices, smi_calls",
    [
        ({}, 0),
        ({"0000:00:02.0": ("0x1af4", "0x020000")}, 0),
        ({"0000:18:00.0": ("0x10de", "0x030200")}, 2),
        (None, 2),
    ],
)
def test_nvidia_smi_is_not_asked_without_a_gpu_on_the_bus(tmp_path, devices, smi_calls):
    tool(tmp_path, "/usr/bin/nvidia-smi")
    if devices is not None:
        (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
        for address, (vendor, pci_class) in devices.items():
            put(tmp_path, "/sys/bus/pci/devices/%s/vendor" % address, vendor + "\n")
            put(tmp_path, "/sys/bus/pci/devices/%s/class" % address, pci_class + "\n")
    runner = Runner({("nvidia-smi",): (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "")})
    errors: List[str] = []
    driver, gpus = gf.collect_nvidia(host_for(tmp_path, runner), errors)
    assert runner.count("nvidia-smi") == smi_calls
    assert bool(errors) is (smi_calls > 0)
    assert driver["version"] is None and gpus["count"] == 0
