# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric gate's thresholds: port rates from sysfs, the node's links, the slowest node's HCAs, the verdict line."""
from __future__ import annotations

import os

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import thresholds as th

GPU_HOST = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "fixtures", "gpu-host-h200x2")


# Rates as the kernel writes them ("%d%s Gb/sec (%dX%s)", tests/fixtures/README.md).
@pytest.mark.parametrize("text, rate", [
    ("200 Gb/sec (4X HDR)\n", 200.0),
    ("400 Gb/sec (4X NDR)", 400.0),
    ("2.5 Gb/sec (1X SDR)", 2.5),
    ("100 Gb/sec (4X EDR)", 100.0),
    ("invalid", None),
    ("", None),
    (None, None),
])
def test_port_rate_gbps(text, rate):
    assert th.port_rate_gbps(text) == rate


@pytest.mark.parametrize("rate_text, fraction, override, expected, origin", [
    ("200 Gb/sec (4X HDR)", 0.8, None, 160.0, th.ORIGIN_DETECTED),
    ("400 Gb/sec (4X NDR)", 0.9, None, 360.0, th.ORIGIN_DETECTED),
    ("200 Gb/sec (4X HDR)", 0.8, 185, 185.0, th.ORIGIN_SITE),
    ("200 Gb/sec (4X HDR)", 0.8, "", 160.0, th.ORIGIN_DETECTED),
    (None, 0.8, None, None, th.ORIGIN_DETECTED),
    (None, 0.8, "12.5", 12.5, th.ORIGIN_SITE),
])
def test_port_threshold(rate_text, fraction, override, expected, origin):
    threshold = th.port_threshold(rate_text, fraction, override)
    assert (threshold.expected, threshold.origin, threshold.unit) == (expected, origin, "Gb/s")


def _nvlink_speeds():
    """GPU 0's link speeds of the H200 host's `nvidia-smi nvlink -s` (18 x 26.562 GB/s)."""
    speeds, gpu = [], None
    with open(os.path.join(GPU_HOST, "nvidia-smi-topo.txt")) as handle:
        for line in handle:
            if line.startswith("GPU "):
                gpu = line.split(":", 1)[0]
            elif gpu == "GPU 0" and line.strip().startswith("Link "):
                speeds.append(float(line.split(":", 1)[1].strip().split(" ", 1)[0]))
    return speeds


@pytest.mark.parametrize("kwargs, expected, origin, basis", [
    pytest.param({"nvlink_gbps": "fixture", "gpus": 2, "fraction": 0.7}, round(18 * 26.562 * 0.7, 3),
                 th.ORIGIN_DETECTED, "NVLink 18 x 26.562 GB/s", id="h200-nvlink-from-the-host"),
    pytest.param({"pcie_gen": 4, "pcie_width": 16, "gpus": 4, "fraction": 0.5}, round(1.969 * 16 * 0.5, 3),
                 th.ORIGIN_DETECTED, "PCIe gen4 x16", id="pcie-only"),
    pytest.param({"nvlink_gbps": [0.0, 0.0], "pcie_gen": 5, "pcie_width": 8, "gpus": 2, "fraction": 1.0},
                 round(3.938 * 8, 3), th.ORIGIN_DETECTED, "PCIe gen5 x8", id="links-down-falls-to-pcie"),
    pytest.param({"gpus": 8, "gpu_name": "NVIDIA A100-SXM4-80GB"}, 228.0, th.ORIGIN_PUBLISHED, "nd96asr_v4",
                 id="nothing-detected-published-a100"),
    pytest.param({"gpus": 8, "gpu_name": "NVIDIA H100 80GB HBM3"}, 460.0, th.ORIGIN_PUBLISHED, "nd96isr_h100_v5",
                 id="nothing-detected-published-h100"),
    pytest.param({"gpus": 8, "gpu_name": "Tesla V100"}, None, th.ORIGIN_DETECTED, "no NVLink", id="unknown-gpu"),
    pytest.param({"gpus": 1, "nvlink_gbps": [25.0]}, None, th.ORIGIN_DETECTED, "one GPU", id="one-gpu"),
    pytest.param({"gpus": 8, "nvlink_gbps": [25.0], "override": 300}, 300.0, th.ORIGIN_SITE, "set by the site",
                 id="site-override-wins"),
])
def test_node_threshold(kwargs, expected, origin, basis):
    if kwargs.get("nvlink_gbps") == "fixture":
        kwargs = dict(kwargs, nvlink_gbps=_nvlink_speeds())
    threshold = th.node_threshold(**kwargs)
    assert (threshold.expected, threshold.origin) == (expected, origin)
    assert basis in threshold.basis


HDR = "200 Gb/sec (4X HDR)"


@pytest.mark.parametrize("nodes, kwargs, expected, origin, basis", [
    pytest.param([{"name": "a", "rates": [HDR] * 8}, {"name": "b", "rates": [HDR] * 8}], {}, 160.0,
                 th.ORIGIN_DETECTED, "8 port(s) x 200 Gb/s", id="two-dgx-a100"),
    # A node that lost a port sets the figure for all: the ring waits for it.
    pytest.param([{"name": "a", "rates": [HDR] * 8}, {"name": "b", "rates": [HDR] * 7}], {"fraction": 1.0}, 175.0,
                 th.ORIGIN_DETECTED, "slowest node b: 7 port(s)", id="slowest-node-sets-it"),
    pytest.param([{"name": "a", "rates": [HDR] * 2}, {"name": "b", "rates": [HDR, "100 Gb/sec (4X EDR)"]}],
                 {"fraction": 1.0}, 37.5, th.ORIGIN_DETECTED, "slowest node b", id="port-at-lower-rate"),
    pytest.param([{"name": "a", "rates": [HDR]}, {"name": "b", "rates": []}], {"gpu_name": "NVIDIA H200"}, 440.0,
                 th.ORIGIN_PUBLISHED, "oci-hpc", id="a-node-without-rates-published-h200"),
    pytest.param([{"name": "a", "rates": []}, {"name": "b"}], {}, None, th.ORIGIN_DETECTED, "a, b",
                 id="socket-only-cluster"),
    pytest.param([{"name": "a", "rates": [HDR]}], {"override": "0.5"}, 0.5, th.ORIGIN_SITE, "site", id="override"),
])
def test_cross_threshold(nodes, kwargs, expected, origin, basis):
    threshold = th.cross_threshold(nodes, **kwargs)
    assert (threshold.expected, threshold.origin) == (expected, origin)
    assert basis in threshold.basis


@pytest.mark.parametrize("algorithm, nodes, tool, problem", [
    ("Ring", 2, "nccl-tests", None),
    ("ring", 4, "nccl-tests", None),
    # nccl-tests#196: Tree on two nodes reports more than the network carries.
    ("Tree", 2, "nccl-tests", "nccl-tests#196"),
    (None, 2, "nccl-tests", "NCCL_ALGO=unset"),
    ("NVLSTree", 8, "nccl-tests", "expected Ring"),
    ("Tree", 1, "nccl-tests", None),
    (None, 3, "gloo", None),
    ("Tree", 2, "nccl", "nccl-tests#196"),
])
def test_cross_algorithm_problem(algorithm, nodes, tool, problem):
    found = th.cross_algorithm_problem(algorithm, nodes, tool)
    assert found is None if problem is None else problem in found


DETECTED = th.Threshold("cross", 160.0, "GB/s", th.ORIGIN_DETECTED, "slowest node b: 8 port(s) x 200 Gb/s")
NONE = th.Threshold("cross", None, "GB/s", th.ORIGIN_DETECTED, "no active HCA port rate on a, b")


@pytest.mark.parametrize("measured, threshold, problem, passed, line", [
    (181.2, DETECTED, None, True, "world: 181.2 GB/s measured, expected >= 160 GB/s (detected hardware: slowest "
                                  "node b: 8 port(s) x 200 Gb/s): PASS"),
    (90.0, DETECTED, None, False, "world: 90 GB/s measured, expected >= 160 GB/s (detected hardware: slowest "
                                  "node b: 8 port(s) x 200 Gb/s): FAIL"),
    (160.0, DETECTED, None, True, "PASS"),
    (None, DETECTED, None, False, "world: no figure measured, expected >= 160 GB/s"),
    (3.0, NONE, None, True, "world: 3 GB/s measured, expected no threshold: not gated (no active HCA port rate"),
    (300.0, DETECTED, "NCCL_ALGO=Tree", False, "FAIL: NCCL_ALGO=Tree"),
])
def test_judge(measured, threshold, problem, passed, line):
    verdict = th.judge("world", measured, threshold, problem)
    assert verdict["passed"] is passed
    assert line in verdict["line"]
    assert verdict["threshold"]["origin"] == threshold.origin


def test_failed():
    verdicts = [th.judge("node", 1.0, DETECTED), th.judge("world", 200.0, DETECTED)]
    assert th.failed(verdicts) == ["node"]


@pytest.mark.parametrize("gpu, scope, value", [
    ("NVIDIA A100-SXM4-80GB", "port", 185.0),
    ("NVIDIA H100 80GB HBM3", "cross", 440.0),
    ("NVIDIA H200", "node", None),
    ("", "node", None),
])
def test_published(gpu, scope, value):
    reference = th.published(gpu, scope)
    assert (reference.value if reference else None) == value


@pytest.mark.parametrize("ends, kwargs, expected, origin, basis", [
    pytest.param([{"hca": "mlx5_0", "rate": HDR}, {"hca": "mlx5_0", "rate": HDR}], {}, 160.0, th.ORIGIN_DETECTED,
                 "200 Gb/sec (4X HDR) x 0.8", id="hdr-both-ends"),
    # A cable that trained at a lower rate on one end sets the pair's figure.
    pytest.param([{"hca": "mlx5_0", "rate": HDR}, {"hca": "mlx5_2", "rate": "100 Gb/sec (4X EDR)"}], {}, 80.0,
                 th.ORIGIN_DETECTED, "100 Gb/sec (4X EDR)", id="lower-end-sets-it"),
    pytest.param([{"hca": "rxe0", "rate": "10 Gb/sec (1X QDR)"}, {"hca": "rxe0", "rate": "10 Gb/sec (1X QDR)"}], {},
                 None, th.ORIGIN_DETECTED, "software RDMA (rxe0)", id="soft-roce-only-traffic"),
    pytest.param([{"hca": "mlx5_0", "rate": HDR}, {"hca": "mlx5_0", "rate": None}], {}, None, th.ORIGIN_DETECTED,
                 "unreadable", id="peer-rate-unknown"),
    pytest.param([], {}, None, th.ORIGIN_DETECTED, "unreadable", id="no-ends"),
    pytest.param([{"hca": "rxe0", "rate": None}], {"override": 0.05}, 0.05, th.ORIGIN_SITE, "site", id="site-wins"),
    pytest.param([{"hca": "mlx5_0", "rate": HDR}], {"override": 0}, 0.0, th.ORIGIN_SITE, "site", id="site-zero"),
])
def test_link_threshold(ends, kwargs, expected, origin, basis):
    threshold = th.link_threshold(ends, **kwargs)
    assert (threshold.expected, threshold.origin) == (expected, origin)
    assert basis in threshold.basis
