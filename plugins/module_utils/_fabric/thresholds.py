# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric gate's thresholds, each with its origin: the detected hardware, a site override or a published figure.

Three scopes: an HCA port (an ib_write_bw pair, Gb/s), a node (the intra-node all-reduce bus
bandwidth, GB/s) and the cross-node all-reduce (Ring, GB/s). The hardware says what a link can
carry; a fraction of it is what the gate expects, because no benchmark reaches the line rate
(protocol headers, PCIe, the NIC's own ceiling).

No Ansible imports; Python 3.8 compatible.
"""
from __future__ import annotations

import re
from typing import Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence

# Where a threshold came from; the report prints it beside the figure.
ORIGIN_SITE = "site override"
ORIGIN_DETECTED = "detected hardware"
ORIGIN_PUBLISHED = "published table"

# The share of the line rate a healthy link reaches. AzNHC passes a 200 Gb/s HDR port at
# 185 Gb/s of GPUDirect write (0.92) and a 400 Gb/s NDR port at 375 (0.94); an NVSwitch node's
# all-reduce passes at 228 of A100's 300 GB/s of NVLink (0.76) and 460 of H100's 450 (NVLS
# reduces in the switch, above the links' sum). The defaults sit below those so that a healthy
# node passes on a busy day and a link at half its rate fails.
DEFAULT_PORT_FRACTION = 0.8
DEFAULT_NODE_FRACTION = 0.7
DEFAULT_CROSS_FRACTION = 0.8


class Reference(NamedTuple):
    """A published figure a healthy cluster of that hardware reaches."""

    gpu: str
    scope: str
    value: float
    unit: str
    source: str


# Figures of the hardware anchors' own gates. The AzNHC lines are read from the files named
# (Azure/azurehpc-health-checks, the commits the search index holds); issue #41 quotes 180 and
# 380 Gb/s for the GPUDirect write, from other revisions of the same files. The oci-hpc figures
# are as issue #41 quotes them and were not re-read for this table.
PUBLISHED: Sequence[Reference] = (
    Reference("A100", "node", 228.0, "GB/s",
              "Azure AzNHC conf/nd96asr_v4.conf (120095b): check_nccl_allreduce 228.0 ... 8G"),
    Reference("A100", "port", 185.0, "Gb/s",
              "Azure AzNHC conf/nd96asr_v4.conf (120095b): check_ib_bw_gdr 185.0 (HDR 200 Gb/s ports)"),
    Reference("H100", "node", 460.0, "GB/s",
              "Azure AzNHC conf/nd96isr_h100_v5.conf (0611432): check_nccl_allreduce 460.0 ... 16G"),
    Reference("H100", "port", 375.0, "Gb/s",
              "Azure AzNHC conf/nd96isr_h100_v5.conf (0611432): check_ib_bw_gdr 375 (NDR 400 Gb/s ports)"),
    Reference("A100", "cross", 185.0, "GB/s",
              "Oracle oci-hpc two-node all-reduce, NCCL_ALGO=Ring (as quoted in issue #41)"),
    Reference("H100", "cross", 440.0, "GB/s",
              "Oracle oci-hpc two-node all-reduce, NCCL_ALGO=Ring (as quoted in issue #41)"),
    Reference("H200", "cross", 440.0, "GB/s",
              "Oracle oci-hpc two-node all-reduce, NCCL_ALGO=Ring (as quoted in issue #41)"),
)


def published(gpu_name: Optional[str], scope: str) -> Optional[Reference]:
    """The table's figure for a GPU model named in ``gpu_name`` ("NVIDIA H100 80GB HBM3") and scope."""
    name = (gpu_name or "").upper()
    for reference in PUBLISHED:
        if reference.scope == scope and re.search(r"\b%s\b" % reference.gpu, name):
            return reference
    return None


class Threshold(NamedTuple):
    """What a gate expects: ``expected`` in ``unit``, where it came from and how it was worked out."""

    scope: str
    expected: Optional[float]
    unit: str
    origin: str
    basis: str

    def as_dict(self) -> Dict[str, Any]:
        return self._asdict()


# The kernel writes a port's rate as "%d%s Gb/sec (%dX%s)" (drivers/infiniband/core/sysfs.c,
# rate_show): "200 Gb/sec (4X HDR)", "2.5 Gb/sec (1X SDR)"; soft-RoCE reports its netdev's speed.
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*Gb/sec")


def port_rate_gbps(text: Optional[str]) -> Optional[float]:
    """The Gb/s of a ``/sys/class/infiniband/<hca>/ports/<n>/rate`` text; None when unreadable."""
    found = _RATE.match(text or "")
    return float(found.group(1)) if found else None


def _override(scope: str, unit: str, value: Any) -> Optional[Threshold]:
    if value is None or value == "":
        return None
    return Threshold(scope, float(value), unit, ORIGIN_SITE, "set by the site")


def port_threshold(rate_text: Optional[str], fraction: float = DEFAULT_PORT_FRACTION,
                   override: Any = None) -> Threshold:
    """An ib_write_bw pair's minimum in Gb/s: the port's sysfs rate x ``fraction``.

    A port whose rate is unreadable gets no threshold (``expected`` None): the check then only
    requires traffic, and the report says why.
    """
    site = _override("port", "Gb/s", override)
    if site:
        return site
    rate = port_rate_gbps(rate_text)
    if rate is None:
        return Threshold("port", None, "Gb/s", ORIGIN_DETECTED,
                         "port rate unreadable (%r); only traffic is required" % (rate_text,))
    return Threshold("port", round(rate * fraction, 3), "Gb/s", ORIGIN_DETECTED,
                     "%s x %g" % (str(rate_text).strip(), fraction))


# Software RDMA (rdma_rxe's soft-RoCE devices, siw): the port's rate is its netdev's speed, while
# the CPU copies every byte, so a healthy pair measures a small share of it (0.18 Gb/s between
# the VMs of tests/unit/plugins/module_utils/_launch/fixtures). No rate-derived threshold there.
SOFTWARE_RDMA_PREFIXES = ("rxe", "siw")


def link_threshold(ends: Sequence[Mapping[str, Any]], fraction: float = DEFAULT_PORT_FRACTION,
                   override: Any = None) -> Threshold:
    """An ib_write_bw pair's minimum in Gb/s from both ends' ports (``hca``, ``rate``): the lower rate.

    A link trains to the rate both ends support, so a port that came up at a lower rate sets the
    pair's threshold; an end that is software RDMA, or whose rate is unreadable, leaves the pair
    without a derived threshold (the site may still set one).
    """
    site = _override("port", "Gb/s", override)
    if site:
        return site
    software = sorted({str(end.get("hca")) for end in ends
                       if str(end.get("hca") or "").startswith(SOFTWARE_RDMA_PREFIXES)})
    if software:
        return Threshold("port", None, "Gb/s", ORIGIN_DETECTED,
                         "software RDMA (%s): its rate is the netdev's, not what the CPU copy reaches; "
                         "only traffic is required" % ", ".join(software))
    rated = [(port_rate_gbps(end.get("rate")), str(end.get("rate") or "").strip()) for end in ends]
    if not ends or any(rate is None for rate, _text in rated):
        return port_threshold(None, fraction)
    return port_threshold(min(rated)[1], fraction)


# Usable PCIe bandwidth per lane and direction in GB/s: the transfer rate after line coding
# (8b/10b to gen 2, 128b/130b from gen 3; gen 6's FLIT mode is counted as 128b/130b here).
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.877}


def node_threshold(nvlink_gbps: Sequence[float] = (), pcie_gen: Optional[int] = None,
                   pcie_width: Optional[int] = None, gpus: int = 1, gpu_name: Optional[str] = None,
                   fraction: float = DEFAULT_NODE_FRACTION, override: Any = None) -> Threshold:
    """The intra-node all-reduce bus bandwidth a node should reach, in GB/s.

    ``nvlink_gbps`` are one GPU's link speeds as ``nvidia-smi nvlink -s`` prints them (GB/s per
    direction); with NVLink the ring moves at their sum, otherwise at the GPU's PCIe link
    (``pcie_gen``, ``pcie_width``). A node of one GPU has no intra-node all-reduce. When nothing
    is detected the published table's figure for ``gpu_name`` is used.
    """
    site = _override("node", "GB/s", override)
    if site:
        return site
    if gpus < 2:
        return Threshold("node", None, "GB/s", ORIGIN_DETECTED, "one GPU: no intra-node all-reduce")
    links = [float(speed) for speed in nvlink_gbps if speed]
    if links:
        total = sum(links)
        return Threshold("node", round(total * fraction, 3), "GB/s", ORIGIN_DETECTED,
                         "NVLink %d x %g GB/s = %g GB/s x %g" % (len(links), links[0], round(total, 3), fraction))
    if pcie_gen in PCIE_LANE_GBPS and pcie_width:
        total = PCIE_LANE_GBPS[pcie_gen] * int(pcie_width)
        return Threshold("node", round(total * fraction, 3), "GB/s", ORIGIN_DETECTED,
                         "PCIe gen%d x%d = %g GB/s x %g" % (pcie_gen, int(pcie_width), round(total, 3), fraction))
    reference = published(gpu_name, "node")
    if reference:
        return Threshold("node", reference.value, reference.unit, ORIGIN_PUBLISHED, reference.source)
    return Threshold("node", None, "GB/s", ORIGIN_DETECTED, "no NVLink or PCIe link detected")


def cross_threshold(nodes: Sequence[Mapping[str, Any]], fraction: float = DEFAULT_CROSS_FRACTION,
                    override: Any = None, gpu_name: Optional[str] = None) -> Threshold:
    """The cross-node Ring all-reduce bus bandwidth, in GB/s: the slowest node's HCA ports x rate.

    ``nodes`` are ``{"name": ..., "rates": [sysfs rate texts of its active ports]}``. A Ring
    all-reduce across nodes sends every byte through each node's network once in each direction,
    so its bus bandwidth tops out at one node's network bandwidth, and the slowest node sets it.
    """
    site = _override("cross", "GB/s", override)
    if site:
        return site
    totals = []
    for node in nodes:
        rates = [port_rate_gbps(text) for text in node.get("rates") or []]
        rates = [rate for rate in rates if rate]
        totals.append((sum(rates), len(rates), rates[0] if rates else 0.0, str(node.get("name"))))
    measured = [total for total in totals if total[1]]
    if measured and len(measured) == len(totals):
        total, count, rate, name = min(measured)
        return Threshold("cross", round(total / 8.0 * fraction, 3), "GB/s", ORIGIN_DETECTED,
                         "slowest node %s: %d port(s) x %g Gb/s = %g GB/s x %g"
                         % (name, count, rate, total / 8.0, fraction))
    reference = published(gpu_name, "cross")
    if reference:
        return Threshold("cross", reference.value, reference.unit, ORIGIN_PUBLISHED, reference.source)
    missing = [total[3] for total in totals if not total[1]]
    return Threshold("cross", None, "GB/s", ORIGIN_DETECTED,
                     "no active HCA port rate on %s" % (", ".join(missing) or "any node"))


def cross_algorithm_problem(algorithm: Optional[str], node_count: int, tool: str = "nccl-tests") -> Optional[str]:
    """Why a cross-node figure may not be gated, or None.

    NCCL's Tree (and NVLSTree) all-reduce on two nodes reduces inside each node first, so its
    bus bandwidth can exceed what the network carries (nccl-tests#196, sjeaugey: "force
    NCCL_ALGO=RING" to benchmark the network); the gate therefore requires Ring on every
    cross-node NCCL run (nccl-tests, or torch's nccl backend). gloo has no NCCL_ALGO and is not
    held to it.
    """
    if node_count < 2 or tool == "gloo":
        return None
    if (algorithm or "").strip().lower() != "ring":
        return ("cross-node all-reduce ran with NCCL_ALGO=%s; expected Ring: Tree on %d nodes can report "
                "more than the network carries (nccl-tests#196). Run all_reduce_perf with NCCL_ALGO=Ring"
                % (algorithm or "unset", node_count))
    return None


def judge(name: str, measured: Optional[float], threshold: Threshold, problem: Optional[str] = None) -> Dict[str, Any]:
    """One gate's verdict and its report line: measured against expected, with the origin.

    No threshold (nothing detected, nothing set) passes with the reason printed: a gate that
    cannot know the hardware must not fail a node for it. No figure fails: nothing was measured.
    """
    unit = threshold.unit
    if problem:
        passed, verdict = False, "FAIL: %s" % problem
    elif measured is None:
        passed, verdict = False, "FAIL: nothing measured at the gated sizes"
    elif threshold.expected is None:
        passed, verdict = True, "not gated (%s)" % threshold.basis
    else:
        passed = float(measured) >= threshold.expected
        verdict = "PASS" if passed else "FAIL"
    figure = "%.4g %s" % (float(measured), unit) if measured is not None else "no figure"
    expected = (">= %.4g %s (%s: %s)" % (threshold.expected, unit, threshold.origin, threshold.basis)
                if threshold.expected is not None else "no threshold")
    return {
        "name": name,
        "measured": None if measured is None else float(measured),
        "threshold": threshold.as_dict(),
        "passed": passed,
        "line": "%s: %s measured, expected %s: %s" % (name, figure, expected, verdict),
    }


def failed(verdicts: Iterable[Mapping[str, Any]]) -> List[str]:
    """The names of the verdicts that failed."""
    return [str(verdict["name"]) for verdict in verdicts if not verdict.get("passed")]
