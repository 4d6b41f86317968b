# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric check's figures: perftest's ib_write_bw output, pairs and the cluster's summary."""
from __future__ import annotations

import os

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import fabric

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")

# perftest 4.5's header lines, as Debian 12's ib_write_bw binary holds them (strings of
# perftest_4.5+0.17-1_amd64.deb's /usr/bin/ib_write_bw).
RULE = "-" * 87
GBITS = " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]"
MIBS = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]"
DUAL = (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]   "
        "BW Port1[Gb/sec]   MsgRate Port1[Mpps]   BW Port2[Gb/sec]   MsgRate Port2[Mpps]")


def _out(header, *rows):
    return "\n".join([RULE, "                    RDMA_Write BW Test", RULE, header] + list(rows) + [RULE, ""])


@pytest.mark.parametrize("stdout, expected", [
    pytest.param(_out(GBITS, " 65536      1710             0.00               0.09 \t\t   0.000171"),
                 {"message_bytes": 65536, "iterations": 1710, "peak_gbps": 0.0, "average_gbps": 0.09,
                  "msg_rate_mpps": 0.000171, "unit": "Gb/sec"}, id="report-gbits"),
    # perftest's MB/sec is MiB/s: 100 MiB/s = 0.8388608 Gb/s.
    pytest.param(_out(MIBS, " 65536      5000             120.00             100.00 \t\t   0.001600"),
                 {"message_bytes": 65536, "iterations": 5000, "peak_gbps": 1.006633, "average_gbps": 0.838861,
                  "msg_rate_mpps": 0.0016, "unit": "MB/sec"}, id="mib-per-s"),
    pytest.param(_out(GBITS, " 2          5000           0.01               0.01   \t\t   0.500000",
                      " 65536      5000           97.50              97.31  \t\t   0.185602"),
                 {"message_bytes": 65536, "iterations": 5000, "peak_gbps": 97.5, "average_gbps": 97.31,
                  "msg_rate_mpps": 0.185602, "unit": "Gb/sec"}, id="all-sizes-last-row"),
    pytest.param(_out(DUAL, " 65536      5000    190.1    189.9    0.362    95.0    0.181    94.9    0.181"),
                 {"message_bytes": 65536, "iterations": 5000, "peak_gbps": 190.1, "average_gbps": 189.9,
                  "msg_rate_mpps": 0.362, "unit": "Gb/sec"}, id="dual-port-columns"),
    pytest.param(_out(GBITS), {}, id="header-no-row"),
    pytest.param("Couldn't connect to 10.77.0.12:18515\nUnable to open file descriptor for socket connection", {},
                 id="client-failed"),
    pytest.param("", {}, id="empty"),
    pytest.param(None, {}, id="none"),
])
def test_perftest_result(stdout, expected):
    assert fabric.perftest_result(stdout) == expected


def test_perftest_result_refuses_an_unknown_unit():
    with pytest.raises(ValueError, match=r"KB/sec.*Gb/sec, MB/sec, MiB/sec"):
        fabric.perftest_result(GBITS.replace("Gb/sec", "KB/sec") + "\n 65536 10 1.0 1.0 0.1\n")


def _pair(node, peer, average, rc=0, **extra):
    pair = {"node": node, "peer": peer, "rc": rc, "command": "ib_write_bw -d rxe0 %s" % peer}
    if average is not None:
        pair["average_gbps"] = average
    pair.update(extra)
    return pair


HDR_PAIR = {"scope": "port", "expected": 160.0, "unit": "Gb/s", "origin": "detected hardware",
            "basis": "200 Gb/sec (4X HDR) x 0.8"}
SOFT_PAIR = {"scope": "port", "expected": None, "unit": "Gb/s", "origin": "detected hardware",
             "basis": "software RDMA (rxe0)"}


@pytest.mark.parametrize("pairs, min_gbps, slowest, passed, problems", [
    pytest.param([_pair("n1", "n2", 0.0896), _pair("n2", "n1", 0.0817)], 0, "n2", True, [], id="soft-roce-ring"),
    pytest.param([_pair("n1", "n2", 190.0), _pair("n2", "n3", 96.0), _pair("n3", "n1", 189.0)], 150, "n2", False,
                 ["n2 -> n3: 96 Gb/s average, expected more than 150 Gb/s"], id="one-slow-link"),
    pytest.param([_pair("n1", "n2", None, rc=1), _pair("n2", "n1", 97.0)], 0, "n2", False,
                 ["n1 -> n2: ib_write_bw exited 1; run the pair's command by hand: ib_write_bw -d rxe0 n2"],
                 id="client-failed"),
    pytest.param([_pair("n1", "n2", None, rc=2, error="[Errno 2] No such file or directory: b'ib_write_bw'"),
                  _pair("n2", "n1", 97.0)], 0, "n2", False,
                 ["n1 -> n2: ib_write_bw exited 2 ([Errno 2] No such file or directory: b'ib_write_bw'); run the"],
                 id="client-missing-with-error"),
    pytest.param([_pair("n1", "n2", None), _pair("n2", "n1", None)], 0, None, False,
                 ["n1 -> n2: ib_write_bw printed no result row", "n2 -> n1: ib_write_bw printed no result row"],
                 id="no-rows"),
    pytest.param([_pair("n1", "n2", 0.0)], 0, "n1", False,
                 ["n1 -> n2: 0 Gb/s average, expected more than 0 Gb/s"], id="zero-is-not-flowing"),
    pytest.param([], 0, None, False, [], id="no-pairs"),
    # A per-pair threshold (the ports' rate x the fraction) replaces min_gbps, and names its origin.
    pytest.param([_pair("n1", "n2", 190.0, threshold=HDR_PAIR), _pair("n2", "n1", 96.0, threshold=HDR_PAIR)], 0, "n2",
                 False, ["n2 -> n1: 96 Gb/s average, expected >= 160 Gb/s (detected hardware: 200 Gb/sec (4X HDR) x 0.8)"],
                 id="below-the-port-rate-threshold"),
    pytest.param([_pair("n1", "n2", 160.0, threshold=HDR_PAIR)], 0, "n1", True, [], id="at-the-threshold-passes"),
    pytest.param([_pair("n1", "n2", 0.0, threshold=dict(HDR_PAIR, expected=0.0))], 0, "n1", False,
                 ["n1 -> n2: 0 Gb/s average, expected >= 0 Gb/s"], id="site-zero-still-needs-traffic"),
    # No derived threshold (soft-RoCE): min_gbps still applies.
    pytest.param([_pair("n1", "n2", 0.09, threshold=SOFT_PAIR)], 0, "n1", True, [], id="soft-roce-traffic-only"),
])
def test_fabric_summary(pairs, min_gbps, slowest, passed, problems):
    summary = fabric.fabric_summary(pairs, min_gbps)
    assert summary["passed"] is passed
    assert (summary["slowest"] or {}).get("node") == slowest
    assert len(summary["problems"]) == len(problems)
    for message, start in zip(summary["problems"], problems):
        assert message.startswith(start)
    assert summary["pairs"] == pairs
    assert summary["failed_nodes"] == [message.split(" -> ")[0] for message in problems]
    assert summary["min_average_gbps"] == (min(p["average_gbps"] for p in pairs if p["rc"] == 0
                                               and "average_gbps" in p) if slowest else None)


@pytest.mark.parametrize("summary, expected", [
    pytest.param({"check": "ib_write_bw", "pairs": [_pair("n1", "n2", 0.0896), _pair("n2", "n1", 0.0817)],
                  "slowest": _pair("n2", "n1", 0.0817)},
                 ["fabric (ib_write_bw, one pair at a time):", "  n1 -> n2: 0.0896 Gb/s",
                  "  n2 -> n1: 0.0817 Gb/s  <- slowest"], id="two-pairs"),
    pytest.param({"pairs": [_pair("n1", "n2", None, rc=1)], "slowest": None},
                 ["fabric (ib_write_bw, one pair at a time):", "  n1 -> n2: no result (rc 1)"], id="failed-pair"),
    pytest.param({"pairs": [_pair("n1", "n2", 96.0, threshold=HDR_PAIR), _pair("n2", "n1", 0.09, threshold=SOFT_PAIR)],
                  "slowest": _pair("n2", "n1", 0.09)},
                 ["fabric (ib_write_bw, one pair at a time):",
                  "  n1 -> n2: 96 Gb/s measured, expected >= 160 Gb/s (detected hardware: 200 Gb/sec (4X HDR) x 0.8)",
                  "  n2 -> n1: 0.09 Gb/s measured, not gated (software RDMA (rxe0))  <- slowest"],
                 id="measured-against-expected"),
    pytest.param(None, [], id="not-run"),
    pytest.param({"pairs": []}, [], id="no-pairs"),
])
def test_fabric_lines(summary, expected):
    assert fabric.fabric_lines(summary) == expected


@pytest.mark.parametrize("name", sorted(n for n in os.listdir(FIXTURES) if n.startswith("ib_write_bw"))
                         if os.path.isdir(FIXTURES) else [])
def test_recorded_ib_write_bw_outputs_parse(name):
    """Outputs recorded on the VM cluster (make vm-test, soft-RoCE); the file name carries the figure."""
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        result = fabric.perftest_result(handle.read())
    expected = float(name.rsplit("-", 1)[1].replace(".txt", "").replace("gbps", ""))
    assert result["average_gbps"] == pytest.approx(expected)
    assert result["message_bytes"] == 65536


def _ib(hca):
    return {"megatron_infiniband": {"nccl_env": {"NCCL_IB_HCA": hca} if hca is not None else {}}}


@pytest.mark.parametrize("mode, local_facts, key, expected", [
    pytest.param("auto", [_ib("=rxe0:1"), _ib("=rxe0:1")], "megatron_infiniband", True, id="hca-everywhere"),
    pytest.param("auto", [_ib("mlx5_0:1,mlx5_1:1")] * 8, "megatron_infiniband", True, id="eight-ib-nodes"),
    pytest.param("auto", [_ib("=rxe0:1"), _ib(None)], "megatron_infiniband", False, id="one-node-without"),
    pytest.param("auto", [_ib("=rxe0:1"), _ib("  ")], "megatron_infiniband", False, id="blank-hca"),
    pytest.param("auto", [_ib("=rxe0:1"), {}], "megatron_infiniband", False, id="role-never-ran"),
    pytest.param("auto", [_ib("=rxe0:1"), None], "megatron_infiniband", False, id="no-local-facts"),
    pytest.param("auto", [_ib("=rxe0:1")], "megatron_infiniband", False, id="one-node-no-pair"),
    pytest.param("auto", [{"ib": _ib("x")["megatron_infiniband"]}] * 2, "ib", True, id="moved-facts-file"),
    pytest.param("auto", [_ib("x")] * 2, "ib", False, id="other-key"),
    pytest.param("always", [{}], "megatron_infiniband", True, id="always"),
    pytest.param("never", [_ib("=rxe0:1")] * 2, "megatron_infiniband", False, id="never"),
])
def test_fabric_check_wanted(mode, local_facts, key, expected):
    assert fabric.fabric_check_wanted(mode, local_facts, key) is expected


def test_fabric_check_wanted_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="'yes'; expected one of auto, always, never"):
        fabric.fabric_check_wanted("yes", [])


@pytest.mark.parametrize("facts, expected", [
    pytest.param({"nccl_env": {"NCCL_IB_HCA": "=mlx5_1:1,mlx5_0:1"},
                  "ports": [{"hca": "mlx5_0", "port": "1", "rate": "200 Gb/sec (4X HDR)"},
                            {"hca": "mlx5_1", "port": "1", "rate": "100 Gb/sec (4X EDR)"}]},
                 {"hca": "mlx5_1", "port": "1", "rate": "100 Gb/sec (4X EDR)"}, id="first-of-nccl-ib-hca"),
    pytest.param({"nccl_env": {"NCCL_IB_HCA": "rxe0"}, "ports": [{"hca": "rxe0", "port": "1", "rate": ""}]},
                 {"hca": "rxe0", "port": "1", "rate": None}, id="port-defaults-to-1-empty-rate"),
    pytest.param({"nccl_env": {}}, {"hca": None, "port": None, "rate": None}, id="no-hca"),
    pytest.param(None, {"hca": None, "port": None, "rate": None}, id="no-facts"),
])
def test_tested_port(facts, expected):
    assert fabric.tested_port(facts) == expected
