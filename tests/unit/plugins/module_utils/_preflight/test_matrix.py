# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Unit tables for the preflight matrix (plugins/module_utils/_preflight/matrix.py): per node, each
installed version against the profile and the run-time rules, and damaged installs."""
from __future__ import annotations

import json

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import python_stack as _gpu_python
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import gate as pf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import rows as prows

from .preflight_facts import NODES, by_status, full_options, make_cluster, row_for, run


@pytest.mark.parametrize("component, check, version", [
    ("torch", "torch.version", "1.13.1+cu117"),
    ("deepspeed", "deepspeed.version", "0.9.2"),
])
def test_a_version_with_an_error_fails_and_says_how_to_reinstall(component, check, version):
    cluster = make_cluster("cu117")
    error = "%s's dist-info says %s but site-packages/%s is missing: a half-removed install" % (
        component, version.split("+")[0], component)
    cluster["node2"][component]["error"] = error
    rows = run(cluster, "cu117")
    row = row_for(rows, check, "node2")
    assert row.status == pf.FAIL
    assert row.found == "%s, broken: %s" % (version, error)
    assert "node2" in row.fix and "python_env" in row.fix and "--force-reinstall" in row.fix
    assert "/opt/megatron/venv/bin/pip" in row.fix
    if component == "torch":
        # Reported once: what depends on torch's own values skips on that node.
        for dependent in ("cuda.nvcc_vs_torch", "cudnn.torch", "nccl.torch", "torch.cuda"):
            dep = row_for(rows, dependent, "node2")
            assert dep.status == pf.SKIP and "torch is broken" in dep.fix, dep
        assert not [r for r in rows if r.check.startswith("same.torch_") and r.node == "node2"]


@pytest.mark.parametrize("header, status", [
    ("8.6.0", pf.PASS),         # what cudnn_version.h of 8.6.0.163 carries (the known bug: it failed)
    ("8.6.0.163", pf.PASS),
    ("8.6.1", pf.FAIL),
    ("8.5.0", pf.FAIL),
])
def test_cu117_system_cudnn_is_compared_at_the_headers_precision(header, status):
    cluster = make_cluster("cu117")
    for facts in cluster.values():
        facts["cudnn"]["version"] = header
    rows = run(cluster, "cu117")
    assert {row_for(rows, "cudnn.system", node).status for node in NODES} == {status}


@pytest.mark.parametrize("what, check", [("cudnn", "cudnn.torch"), ("nccl", "nccl.torch")])
@pytest.mark.parametrize("source, status", [("files", pf.WARN), ("import", pf.FAIL), (None, pf.FAIL)])
def test_torch_library_unreadable_from_files_warns(what, check, source, status):
    # A torch that bundles cuDNN/NCCL in torch/lib names no version there: the files probe
    # cannot tell, so it is a warning that says how to read it, not a false failure.
    cluster = make_cluster("cu130")
    cluster["node2"]["torch"][what] = None
    if source:
        cluster["node2"]["torch"]["source"] = source
    row = row_for(run(cluster, "cu130"), check, "node2")
    assert row.status == status
    if status == pf.WARN:
        assert row.found == "not readable from the venv's files" and "preflight_python_probe=import" in row.fix
        assert "node2" in row.fix


def test_nvcc_11_8_against_torch_11_7_is_allowed_in_the_matrix_row():
    cluster = make_cluster()
    cluster["node2"]["cuda"].update(version="11.8.0", nvcc_version="11.8.89")
    assert row_for(run(cluster), "cuda.nvcc_vs_torch", "node2").status == pf.PASS


@pytest.mark.parametrize(
    "toolkit, torch_cuda, driver, status, expected_floor",
    [
        ("11.7.1", "11.7", "515.65.01", pf.PASS, "515.65.01"),  # the profile's own minimum binds
        ("11.8.0", "11.7", "515.65.01", pf.FAIL, "520.61.05"),  # the toolkit raises the floor
        ("11.7.1", "11.8", "515.65.01", pf.FAIL, "520.61.05"),  # so does torch's CUDA
        ("11.7.1", "11.7", "515.48.07", pf.FAIL, "515.65.01"),
        ("11.7.1", "11.7", "580.159.04", pf.PASS, "515.65.01"),
        # CUDA 11.6 has no row in CUDA_MIN_DRIVER: the row warns and names the row to add (it was
        # once judged by the major's floor, 450.80.02, and passed silently).
        ("11.6.2", "11.7", "515.65.01", pf.WARN, "515.65.01"),
        ("11.6.2", "11.7", "515.48.07", pf.FAIL, "515.65.01"),
    ],
)
def test_driver_floor(toolkit, torch_cuda, driver, status, expected_floor):
    cluster = make_cluster()
    for facts in cluster.values():
        facts["cuda"]["version"] = toolkit
        facts["torch"]["cuda"] = torch_cuda
        facts["driver"]["version"] = facts["fabric_manager"]["version"] = driver
    row = row_for(run(cluster), "driver.version", "node1")
    assert row.status == status
    assert row.expected.startswith(">= " + expected_floor)
    assert ("add a row for 11.6 to CUDA_MIN_DRIVER" in row.fix) == (status == pf.WARN)


def test_driver_missing():
    cluster = make_cluster()
    cluster["node2"]["driver"]["version"] = None
    row = row_for(run(cluster), "driver.version", "node2")
    assert row.status == pf.FAIL and row.found == prows.MISSING and "nvidia_driver" in row.fix


# A node without a driver says why when its PCI bus was read: no GPU at all is not a driver to
# install (the simvm VMs: DKMS-built driver, no GPU). Unread (None, older facts) keeps "missing".
@pytest.mark.parametrize(
    "pci_devices, driver_found, gpu_found",
    [
        ([], prows.NO_GPU, prows.NO_GPU),
        (None, prows.MISSING, "no GPU"),
        (["0000:18:00.0"], prows.MISSING, "no GPU"),
    ],
)
def test_a_node_without_driver_or_gpus_says_whether_the_bus_has_a_gpu(pci_devices, driver_found, gpu_found):
    cluster = make_cluster()
    cluster["node2"]["driver"]["version"] = None
    cluster["node2"]["gpus"] = {"count": 0, "model": None, "pci_devices": pci_devices}
    rows = run(cluster)
    driver, gpu = row_for(rows, "driver.version", "node2"), row_for(rows, "gpu.present", "node2")
    assert (driver.status, driver.found) == (pf.FAIL, driver_found)
    assert (gpu.status, gpu.found) == (pf.FAIL, gpu_found)
    if pci_devices == []:
        assert driver.fix.startswith("no NVIDIA GPU on this node: ") and "node2" in driver.fix and "lspci" in driver.fix


@pytest.mark.parametrize(
    "facts, expected",
    [
        ({"gpus": {"pci_devices": []}}, True),
        ({"gpus": {"pci_devices": ["0000:18:00.0"]}}, False),
        ({"gpus": {"pci_devices": None}}, False),
        ({"gpus": {"count": 0}}, False),
        ({}, False),
    ],
)
def test_no_gpu_on_bus_needs_a_read_and_empty_bus(facts, expected):
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import matrix
    assert matrix.no_gpu_on_bus(facts) is expected


@pytest.mark.parametrize(
    "version, source, status",
    [
        ("11.7.1", "version.json", pf.PASS),
        ("11.7.0", "version.json", pf.FAIL),
        ("11.7.99", "nvcc", pf.PASS),  # nvcc cannot tell 11.7.0 from 11.7.1: judged at 11.7
        ("11.7", "ptxas", pf.PASS),
        ("11.7.99", "library", pf.PASS),  # libcudart.so.11.7.99
        ("11.7", "version.json", pf.PASS),  # a dated version.json reported as major.minor
        ("11.8.89", "nvcc", pf.FAIL),
        ("garbage", "nvcc", pf.FAIL),
    ],
)
def test_toolkit_precision_follows_the_source(version, source, status):
    cluster = make_cluster()
    cluster["node1"]["cuda"].update(version=version, source=source)
    assert row_for(run(cluster), "cuda.toolkit", "node1").status == status


def test_fabric_manager_skipped_without_nvswitch():
    cluster = make_cluster()
    for facts in cluster.values():
        facts["nvswitch"] = {"present": False, "count": 0}
        facts["fabric_manager"] = {"installed": False, "version": None, "active": False}
    row = row_for(run(cluster), "fabric_manager.version", "node1")
    assert row.status == pf.SKIP and "NVSwitch" in row.fix


@pytest.mark.parametrize(
    "cudnn_code, nccl_raw, cudnn, nccl",
    [
        (91900, [2, 28, 9], "9.19.0", "2.28.9"),  # the H200 host: torch 2.11 returns a tuple (a list in JSON)
        (90000, 22809, "9.0.0", "2.28.9"),  # cuDNN 9 and NCCL >= 2.9 codes: X*10000 + Y*100 + Z
        (8907, 2804, "8.9.7", "2.8.4"),  # cuDNN 8 and NCCL <= 2.8 codes: X*1000 + Y*100 + Z
    ],
)
def test_library_codes_are_decoded_once_on_the_node(cudnn_code, nccl_raw, cudnn, nccl):
    """The import probe's raw codes are decoded by gpu_stack_facts on the node
    (_gpu_python.parse_probe_output); the gate reads the dotted value it gets, unchanged."""
    probe = {"python": {"version": "3.12.3"},
             "torch": {"version": "2.11.0+cu130", "cuda": "13.0", "cudnn": cudnn_code, "nccl": nccl_raw},
             "deepspeed": {"version": "0.18.2"}, "apex": {}}
    decoded = _gpu_python.parse_probe_output(json.dumps(probe))["torch"]
    assert (decoded["cudnn"], decoded["nccl"]) == (cudnn, nccl)
    cluster = make_cluster("cu130")
    for facts in cluster.values():
        facts["torch"].update(cudnn=decoded["cudnn"], nccl=decoded["nccl"])
    rows = run(cluster, "cu130")
    assert row_for(rows, "nccl.torch", "node1").found == nccl
    assert row_for(rows, "same.torch_cudnn", "node1").found == cudnn


def test_torch_label_on_cpu_profile_is_only_a_warning():
    cluster = make_cluster("cpu")
    for facts in cluster.values():
        facts["torch"].update(version="2.13.0+cu128", cuda="12.8")
    rows = run(cluster, "cpu")
    assert by_status(rows, pf.FAIL) == []
    assert {row.check for row in by_status(rows, pf.WARN)} == {"torch.version"}


def test_megatron_checkout_missing_is_a_warning():
    cluster = make_cluster()
    for facts in cluster.values():
        facts["megatron_deepspeed"] = {"path": "/opt/megatron/Megatron-DeepSpeed", "commit": None, "present": False}
    rows = run(cluster)
    assert by_status(rows, pf.FAIL) == []
    assert {row.check for row in by_status(rows, pf.WARN)} == {"megatron_deepspeed.present"}


@pytest.mark.parametrize("present, status", [(False, pf.SKIP), (True, pf.PASS)])
def test_no_checkout_is_skipped_where_the_inventory_installs_none(present, status):
    """python_env_megatron_source: none (the demo without a source): nothing to warn about; a
    checkout that is there anyway still passes with its commit."""
    cluster = make_cluster()
    for facts in cluster.values():
        facts["megatron_deepspeed"]["present"] = present
    options = dict(full_options("cu117"), megatron_checkout=False)
    row = row_for(run(cluster, options=options), "megatron_deepspeed.present", "node2")
    assert row.status == status, row
    if not present:
        assert "python_env_megatron_source: none" in row.fix


def test_megatron_checkout_without_git_says_so():
    cluster = make_cluster()
    for facts in cluster.values():
        facts["megatron_deepspeed"]["commit"] = None
    row = row_for(run(cluster), "megatron_deepspeed.present", "node1")
    assert row.status == pf.PASS and row.found.startswith("no git commit (not a git checkout")


# ---------------------------------------------------------------------------------------
# Damaged installs (gpu_stack_facts' files sections)
# ---------------------------------------------------------------------------------------


DAMAGE = {"source": "x/RECORD", "checked": 20817, "bad_count": 7, "error": None,
          "bad": ["torch/lib/libtorch_cpu.so: 1048576 bytes, RECORD says 452984832", "torch/version.py: missing",
                  "torch/a.py: missing", "torch/b.py: missing", "torch/c.py: missing"]}


@pytest.mark.parametrize("profile_name, section, check, status, fix_words", [
    ("cu117", "torch", "torch.files", pf.FAIL,
     ["pip install --force-reinstall --no-deps 'torch==1.13.1' --index-url https://download.pytorch.org/whl/cu117",
      "playbooks/provision.yml alone keeps it"]),
    ("cpu", "deepspeed", "deepspeed.files", pf.FAIL, ["--force-reinstall --no-deps 'deepspeed==0.19.6'"]),
    ("cu117", "apex", "apex.files", pf.FAIL, ["pip uninstall -y apex", "playbooks/provision.yml"]),
    ("cpu", "apex", "apex.files", pf.WARN, ["pip uninstall -y apex"]),  # on CPU Megatron-DeepSpeed does not import apex
    ("cpu", "megatron_deepspeed", "megatron_deepspeed.files", pf.FAIL,
     ["git -C /opt/megatron/Megatron-DeepSpeed checkout -- .", "python_env_megatron_force=true"]),
])
def test_damaged_install_fails_naming_node_package_files_and_fix(profile_name, section, check, status, fix_words):
    cluster = make_cluster(profile_name)
    cluster["node2"][section]["files"] = dict(DAMAGE)
    rows = run(cluster, profile_name)
    row = row_for(rows, check, "node2")
    assert (row.status, row.component) == (status, section)
    assert row.found.startswith("7 of 20817 files differ from ")
    assert "torch/lib/libtorch_cpu.so: 1048576 bytes, RECORD says 452984832" in row.found and "(2 more)" in row.found
    assert "node2" in row.fix and all(words in row.fix for words in fix_words), row.fix
    # Only that node and that check: a damaged file changes no version.
    assert [(r.check, r.node) for r in rows if r.status in (pf.FAIL, pf.WARN)] == [(check, "node2")]


@pytest.mark.parametrize("bad, distributions, fix_words", [
    # numpy's core extension cut short (issue 25: torch then cannot import)
    (["numpy 2.2.6: numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so: 4096 bytes, RECORD says 10578456"],
     ["numpy==2.2.6"], ["pip install --force-reinstall --no-deps 'numpy==2.2.6'"]),
    # a same-size edit in one package and a missing file in another: both named in the fix
    (["pydantic 2.14.4: pydantic/main.py: same size, other content than RECORD's sha256 (modified after the install)",
      "ninja 1.13.2: ../../../bin/ninja: missing"],
     ["pydantic==2.14.4", "ninja==1.13.2"], ["'pydantic==2.14.4' 'ninja==1.13.2'", "playbooks/preflight.yml"]),
])
def test_damaged_package_fails_naming_node_package_file_and_fix(bad, distributions, fix_words):
    cluster = make_cluster("cpu")
    cluster["node3"]["packages"]["files"] = dict(cluster["node3"]["packages"]["files"], bad=bad, bad_count=len(bad),
                                                 bad_distributions=distributions)
    rows = run(cluster, "cpu")
    row = row_for(rows, "packages.files", "node3")
    assert (row.status, row.component) == (pf.FAIL, "packages")
    assert row.found.startswith("%d of 6154 files differ from pip's RECORD: " % len(bad)) and bad[0] in row.found
    assert "node3" in row.fix and all(words in row.fix for words in fix_words), row.fix
    assert [(r.check, r.node) for r in rows if r.status in (pf.FAIL, pf.WARN)] == [("packages.files", "node3")]


def test_clean_packages_pass_and_older_facts_skip():
    cluster = make_cluster("cpu")
    del cluster["node2"]["packages"]
    rows = run(cluster, "cpu")
    assert row_for(rows, "packages.files", "node1").status == pf.PASS
    assert row_for(rows, "packages.files", "node1").found == "6154 files as recorded"
    assert row_for(rows, "packages.files", "node2").status == pf.SKIP


@pytest.mark.parametrize("source, against, fix_words", [
    ("/opt/megatron/Megatron-DeepSpeed/.git/index", "git's index", ["checkout -- ."]),
    ("/opt/megatron/Megatron-DeepSpeed/.megatron-ds-manifest", "the archive's manifest",
     ["remove /opt/megatron/Megatron-DeepSpeed/.megatron-ds-archive.sha256", "playbooks/provision.yml"]),
])
def test_damaged_checkout_fix_follows_how_it_was_installed(source, against, fix_words):
    cluster = make_cluster("cpu")
    cluster["node3"]["megatron_deepspeed"]["files"] = dict(DAMAGE, source=source)
    row = row_for(run(cluster, "cpu"), "megatron_deepspeed.files", "node3")
    assert row.status == pf.FAIL and ("differ from %s:" % against) in row.found
    assert all(words in row.fix for words in fix_words), row.fix


@pytest.mark.parametrize("files, status, found", [
    ({"source": "x/RECORD", "checked": 1190, "bad_count": 0, "bad": [], "error": None}, pf.PASS, "1190 files as recorded"),
    ({"source": "x/RECORD", "checked": 0, "bad_count": 0, "bad": [], "error": "no RECORD in x: installed without pip, or damaged"},
     pf.WARN, "no RECORD in x: installed without pip, or damaged"),
    ({"source": None, "checked": 0, "bad_count": 0, "bad": [], "error": None}, pf.SKIP, ""),
    (None, pf.SKIP, ""),  # facts of an older gpu_stack_facts: nothing compared
])
def test_files_row_states(files, status, found):
    cluster = make_cluster("cpu")
    if files is None:
        del cluster["node1"]["deepspeed"]["files"]
    else:
        cluster["node1"]["deepspeed"]["files"] = files
    row = row_for(run(cluster, "cpu"), "deepspeed.files", "node1")
    assert (row.status, row.found) == (status, found)


# ---------------------------------------------------------------------------------------
# GPU architecture against the profile (gpu.arch) and the driver's lifecycle (driver.lifecycle)
# ---------------------------------------------------------------------------------------
def _gpus(cluster, name, capability=None, model=True):
    for facts in cluster.values():
        for gpu in facts["gpus"]["list"]:
            gpu["name"] = name
            gpu["compute_capability"] = capability
        facts["gpus"]["model"] = name if model else None
        facts["gpus"]["compute_capability"] = capability


@pytest.mark.parametrize("profile_name, name, capability, status, fix_words", [
    ("cu117", "NVIDIA H100 80GB HBM3", "9.0", pf.FAIL, ["node1: stack profile cu117 cannot run on NVIDIA H100 80GB HBM3",
                                                        "compute capability 9.0", "cu121 or cu130"]),
    ("cu117", "NVIDIA H200", None, pf.FAIL, ["sm_86", "3.5 to 8.7", "cu121 or cu130"]),  # capability from the name
    ("cu117", "NVIDIA A100-SXM4-80GB", None, pf.PASS, []),
    ("cu117", "NVIDIA A100-SXM4-80GB", "8.0", pf.PASS, []),
    ("cu121", "NVIDIA H100 80GB HBM3", "9.0", pf.PASS, []),
    ("cu130", "NVIDIA H200", "9.0", pf.PASS, []),
    ("cu130", "Tesla V100-SXM2-32GB", None, pf.FAIL, ["CUDA toolkit builds", "7.5 to 12.0", "cu117 or cu121"]),
    ("cu117", "NVIDIA Future GPU", None, pf.WARN, ["GPU_CAPABILITY"]),
    ("cpu", "NVIDIA H200", "9.0", pf.SKIP, []),
])
def test_gpu_arch_row(profile_name, name, capability, status, fix_words):
    cluster = make_cluster(profile_name)
    if profile_name != "cpu":
        _gpus(cluster, name, capability)
    row = row_for(run(cluster, profile_name), "gpu.arch", "node1")
    assert row.status == status, row
    for word in fix_words:
        assert word in row.fix, (word, row.fix)
    if status in (pf.FAIL, pf.PASS):
        assert name in row.found and row.expected.startswith("torch sm_")


def test_gpu_arch_row_judges_each_capability_of_a_mixed_node():
    cluster = make_cluster("cu117")
    facts = cluster["node1"]
    facts["gpus"]["list"][0].update(name="NVIDIA H100 80GB HBM3", compute_capability="9.0")
    facts["gpus"]["model"] = None
    row = row_for(run(cluster), "gpu.arch", "node1")
    assert row.status == pf.FAIL
    assert row.found == "NVIDIA A100-SXM4-80GB 8.0, NVIDIA H100 80GB HBM3 9.0"
    assert "cannot run on NVIDIA H100 80GB HBM3" in row.fix and "A100" not in row.fix


@pytest.mark.parametrize("profile_name, driver, today, status, words", [
    # The guide's driver: R515, long past end of life; the upgrade meets CUDA 11.7's minimum.
    ("cu117", "515.65.01", "2026-12-01", pf.WARN, ["R580 (long-term support, end of life 2028-06)", "515.65.01, still holds"]),
    ("cu117", "535.261.03", "2026-07-01", pf.WARN, ["R580"]),      # R535 reached end of life in June 2026
    ("cu117", "535.261.03", "2026-06-30", pf.PASS, []),
    ("cu117", "535.261.03", "2025-01-01", pf.PASS, []),
    ("cu130", "580.159.04", "2026-12-01", pf.PASS, []),             # the H200 host's driver
    ("cu130", "580.159.04", "2028-07-01", pf.WARN, ["R620"]),
    ("cu121", "530.30.02", "2026-12-01", pf.SKIP, ["not in the driver lifecycle table"]),  # a new-feature branch
    ("cu117", "515.65.01", "1 June 2026", pf.WARN, ["not YYYY-MM-DD"]),
    ("cpu", None, "2026-12-01", pf.SKIP, []),
])
def test_driver_lifecycle_row_warns_never_fails(profile_name, driver, today, status, words):
    cluster = make_cluster(profile_name)
    if driver:
        for facts in cluster.values():
            facts["driver"]["version"] = driver
            facts["fabric_manager"]["version"] = driver
    options = dict(full_options(profile_name), today=today)
    row = row_for(run(cluster, profile_name, options), "driver.lifecycle", "node1")
    assert row.status == status, row
    for word in words:
        assert word in row.fix, (word, row.fix)
    # Only the lifecycle row speaks of it: the minimum-driver gate is unchanged.
    assert row_for(run(cluster, profile_name, options), "driver.version", "node1").status in (pf.PASS, pf.SKIP)


def test_driver_lifecycle_defaults_to_today():
    options = full_options()
    del options["today"]
    cluster = make_cluster()
    for facts in cluster.values():
        facts["driver"]["version"] = facts["fabric_manager"]["version"] = "515.65.01"
    row = row_for(run(cluster, "cu117", options), "driver.lifecycle", "node1")
    assert row.status == pf.WARN and row.expected.startswith("a branch NVIDIA still supports on ")


SITE = "/opt/megatron/venv/lib/python3/site-packages"


@pytest.mark.parametrize("entries, count, allowed, status, found_words", [
    # python_env's own hook only: passes, saying which allowed files are there
    ([("megatron_ds_fused_ops.pth", "pth")], None, [], pf.PASS, ["but the allowed megatron_ds_fused_ops.pth"]),
    ([], None, [], pf.PASS, ["nothing outside a RECORD"]),
    # the drift: a .pth and a sitecustomize.py, each named with its path and what Python does with it
    ([("zz-drift.pth", "pth"), ("sitecustomize.py", "startup")], None, [], pf.FAIL,
     ["2 file(s)", SITE + "/zz-drift.pth (pth: ", SITE + "/sitecustomize.py (startup: "]),
    ([("patch_torch.py", "module")], None, [], pf.FAIL, [SITE + "/patch_torch.py (module: "]),
    # a site's own .pth, allowed by name
    ([("site-paths.pth", "pth")], None, ["site-paths.pth"], pf.PASS, ["but the allowed site-paths.pth"]),
    # ... but only that name
    ([("site-paths.pth", "pth"), ("evil.pth", "pth")], None, ["site-paths.pth"], pf.FAIL, ["1 file(s)", "/evil.pth"]),
    # more than the facts list: counted, not allowed
    ([("site-paths.pth", "pth")], 30, ["site-paths.pth"], pf.FAIL, ["29 file(s)", "... (29 more)"]),
])
def test_code_no_record_owns_fails_naming_node_and_file(entries, count, allowed, status, found_words):
    cluster = make_cluster("cpu")
    cluster["node2"]["packages"]["unowned"] = {
        "count": len(entries) if count is None else count,
        "entries": [{"path": SITE + "/" + name, "kind": kind, "detail": "what Python does"} for name, kind in entries]}
    options = dict(full_options("cpu"), allowed_unowned=allowed)
    rows = run(cluster, "cpu", options)
    row = row_for(rows, "venv.unowned_code", "node2")
    assert (row.status, row.component) == (status, "venv")
    assert all(words in row.found for words in found_words), row.found
    if status == pf.FAIL:
        assert "node2" in row.fix and "preflight_allowed_unowned" in row.fix and "rm -r " in row.fix
        assert ("rm -r '%s/" % SITE in row.fix) is (count is None)
    assert row_for(rows, "venv.unowned_code", "node1").status == pf.PASS


def test_unowned_code_skips_facts_without_the_list():
    cluster = make_cluster("cpu")
    del cluster["node2"]["packages"]["unowned"]
    assert row_for(run(cluster, "cpu"), "venv.unowned_code", "node2").status == pf.SKIP


CONSTRAINTS = "/opt/megatron/venv/megatron-ds/constraints.txt"


@pytest.mark.parametrize("installed, pins, status, found_words, fix_words", [
    # issue 40: `pip install numpy==2.3.5` by hand on one node; every RECORD check passes
    ({"numpy": "2.3.5", "six": "1.17.0"}, {"numpy": "2.2.6", "six": "1.17.0"}, pf.FAIL,
     ["1 distribution(s) off their pin: numpy 2.3.5 (pinned 2.2.6)"],
     ["playbooks/provision.yml", "python_env", "node2", "--constraint %s 'numpy==2.2.6'" % CONSTRAINTS]),
    # pip's == reads 2.2 as 2.2.0; local labels must agree
    ({"numpy": "2.2", "torchvision": "0.28.0+cpu"}, {"numpy": "2.2.0", "torchvision": "0.28.0+cpu"}, pf.PASS,
     ["2 pinned distribution(s) at their pins"], []),
    ({"torchvision": "0.28.0"}, {"torchvision": "0.28.0+cpu"}, pf.FAIL, ["torchvision 0.28.0 (pinned 0.28.0+cpu)"], []),
    # torch and DeepSpeed have their own rows against the profile: not reported twice
    ({"torch": "2.1.0", "deepspeed": "0.19.7"}, {"torch": "2.13.0+cpu", "deepspeed": "0.19.6"}, pf.PASS,
     ["0 pinned distribution(s)"], []),
    # a pin of something not installed is a constraint, not a requirement
    ({"six": "1.17.0"}, {"six": "1.17.0", "sentencepiece": "0.2.1"}, pf.PASS, ["1 pinned"], []),
    # a name installed twice (an interrupted upgrade): each version must be the pin
    ({"numpy": "2.2.6,2.3.5"}, {"numpy": "2.2.6"}, pf.FAIL, ["numpy 2.2.6,2.3.5 (pinned 2.2.6)"], []),
    # many off their pins: eight shown, the rest counted
    (dict(("p%d" % i, "2") for i in range(10)), dict(("p%d" % i, "1") for i in range(10)), pf.FAIL,
     ["10 distribution(s)", "... (2 more)"], []),
])
def test_a_distribution_off_its_pin_fails_naming_node_package_and_pin(installed, pins, status, found_words, fix_words):
    cluster = make_cluster("cpu")
    cluster["node2"]["packages"] = dict(cluster["node2"]["packages"], installed=installed,
                                        pins={"source": CONSTRAINTS, "pins": pins})
    row = row_for(run(cluster, "cpu"), "packages.pinned", "node2")
    assert (row.status, row.component) == (status, "packages"), row
    assert all(words in row.found for words in found_words), row.found
    assert all(words in row.fix for words in fix_words), row.fix
    if status == pf.FAIL:
        assert row.expected == "every installed distribution at its pin in %s" % CONSTRAINTS


def test_pins_row_skips_a_venv_without_python_envs_constraints():
    cluster = make_cluster("cpu")
    cluster["node2"]["packages"]["pins"] = None
    row = row_for(run(cluster, "cpu"), "packages.pinned", "node2")
    assert row.status == pf.SKIP and "no constraints file of python_env" in row.fix and "node2" in row.fix


@pytest.mark.parametrize("text, expected", [
    ("# build tools\npip==25.3\nsetuptools==80.9.0\n", {"pip": "25.3", "setuptools": "80.9.0"}),
    # bounds, markers and extras pin no version; names are normalized as dist-info directories are
    ("pydantic<2\nnumpy==1.26.4 ; python_version < '3.12'\ntyping-extensions==4.12.2\ntorch==2.13.0+cpu\n",
     {"typing_extensions": "4.12.2", "torch": "2.13.0+cpu"}),
    ("Sentence.Piece == 0.2.1  # the HEAD tokenizer\n", {"sentence_piece": "0.2.1"}),
    # one name pinned twice at two versions: no pin can be trusted
    ("numpy==2.2.6\nnumpy==2.3.5\nsix==1.17.0\n", {"six": "1.17.0"}),
    ("", {}),
    (None, {}),
])
def test_parse_pins_keeps_exact_pins_only(text, expected):
    assert _gpu_python.parse_pins(text) == expected
