# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""All-reduce figures in one shape: nccl-tests' text and JSON output, the burn-in's gloo JSON, the gated figure."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import allreduce

FIXTURES = os.path.join(os.path.dirname(__file__), "fixtures")
MIB = 1024 * 1024


def _fixture(name):
    with open(os.path.join(FIXTURES, name)) as handle:
        return handle.read()


def _row(size, time_us, algbw, busbw, wrong, placement, tool="nccl-tests"):
    return allreduce.AllReduceRow(size, time_us, algbw, busbw, wrong, placement, tool)


@pytest.mark.parametrize("name, count, first, last", [
    pytest.param("all_reduce_perf-2node-tree-h100-nccl-tests-232.txt", 10,
                 _row(2097152, 113.2, 18.53, 18.53, 0, "out_of_place"),
                 _row(33554432, 808.2, 41.52, 41.52, 0, "in_place"), id="root-and-wrong-columns"),
    pytest.param("sendrecv_perf-old-error-column-nccl-tests-104.txt", 2,
                 _row(37748744, 11732.0, 3.22, 3.22, None, "out_of_place"),
                 _row(37748744, 11698.0, 3.23, 3.23, None, "in_place"), id="old-error-column-is-not-a-count"),
    pytest.param("all_reduce_perf-timestamped-ring-nccl-1368.txt", 2,
                 _row(1048576, 354.9, 2.95, 5.76, 0, "out_of_place"),
                 _row(1048576, 345.7, 3.03, 5.92, 0, "in_place"), id="mpirun-timestamp-prefix"),
])
def test_parse_nccl_tests_text_published(name, count, first, last):
    rows = allreduce.parse_nccl_tests_text(_fixture(name))["rows"]
    assert (len(rows), rows[0], rows[-1]) == (count, first, last)


HEADER = ("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   "
          "algbw   busbw #wrong\n")


@pytest.mark.parametrize("text, expected", [
    # -c 0 (no data check) prints N/A where the count goes (src/util.cu:511).
    pytest.param(HEADER + "   268435456      67108864     float     sum      -1   1442.1  186.14  348.99    N/A   "
                 "1440.0  186.41  349.52    N/A\n",
                 [_row(268435456, 1442.1, 186.14, 348.99, None, "out_of_place"),
                  _row(268435456, 1440.0, 186.41, 349.52, None, "in_place")], id="unchecked-n-a"),
    # A blank out-of-place half (trace replay, src/util.cu:480-485) keeps the in-place one.
    pytest.param(HEADER + "   268435456      67108864     float     sum      -1" + " " * 32
                 + "   1440.0  186.41  349.52      0\n",
                 [_row(268435456, 1440.0, 186.41, 349.52, 0, "in_place")], id="in-place-only"),
    pytest.param("# nThread 1 nGpus 1 minBytes 8 maxBytes 8\nsegfault\n", [], id="no-header-no-rows"),
    pytest.param("", [], id="empty"),
])
def test_parse_nccl_tests_text_layouts(text, expected):
    assert allreduce.parse_nccl_tests_text(text)["rows"] == expected


@pytest.mark.parametrize("footer, avg, bounds", [
    pytest.param("# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 40.2331 \n#\n", 40.2331, 0, id="ok"),
    pytest.param("# Out of bounds values : 3 FAILED\n# Avg bus bandwidth    : 1.5 FAILED\n", 1.5, 3, id="failed"),
    pytest.param("", None, None, id="killed-before-the-footer"),
])
def test_parse_nccl_tests_text_footer(footer, avg, bounds):
    parsed = allreduce.parse_nccl_tests_text(_fixture("all_reduce_perf-2node-tree-h100-nccl-tests-232.txt") + footer)
    assert (parsed["avg_busbw_gbps"], parsed["out_of_bounds"]) == (avg, bounds)


def _json_document(results, env=("NCCL_ALGO=Ring", "PATH=/usr/bin"), errors=()):
    """A -J document as v2.19.6's writer lays it out (src/util.cu:317-378, 454-523, 771-794)."""
    return json.dumps({
        "version": 3, "start_time": "2026-12-07 14:00:00", "args": ["./all_reduce_perf", "-J", "out.json"],
        "env": list(env), "nccl_version": 22704,
        "config": {"nthreads": 1, "ngpus": 1, "blocking_collectives": "false"},
        "results": results,
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": 361.25, "okay": "unchecked"},
        "errors": list(errors),
        "end_time": "2026-12-07 14:00:09",
    })


def _json_result(size, oop, inp):
    return {"size": size, "count": size // 4, "type": "float", "redop": "sum", "root": "    -1",
            "out_of_place": oop, "in_place": inp, "actual_iterations": 20, "experiment_name": ""}


CHECKED = _json_result(
    268435456, {"time": 1442.100000, "alg_bw": 186.140000, "bus_bw": 348.990000, "nwrong": 0.000000},
    {"time": 1440.000000, "alg_bw": 186.410000, "bus_bw": 349.520000, "nwrong": 0.000000})
UNCHECKED = _json_result(
    8, {"cpu_time": "nan", "alg_bw": 0.000000, "bus_bw": 0.000000, "nwrong": None},
    {"cpu_time": 30.1, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": None})
NO_OUT_OF_PLACE = _json_result(1024, None, {"time": 9.0, "alg_bw": 0.11, "bus_bw": 0.2, "nwrong": 2.0})


@pytest.mark.parametrize("document, rows, algorithm", [
    pytest.param(_json_document([CHECKED]),
                 [_row(268435456, 1442.1, 186.14, 348.99, 0, "out_of_place"),
                  _row(268435456, 1440.0, 186.41, 349.52, 0, "in_place")], "Ring", id="checked"),
    pytest.param(_json_document([UNCHECKED], env=("NCCL_ALGO=Tree",)),
                 [_row(8, None, 0.0, 0.0, None, "out_of_place"), _row(8, 30.1, 0.0, 0.0, None, "in_place")],
                 "Tree", id="cputime-nan-unchecked"),
    pytest.param(_json_document([NO_OUT_OF_PLACE], env=()),
                 [_row(1024, 9.0, 0.11, 0.2, 2, "in_place")], None, id="null-out-of-place-no-algo"),
])
def test_parse_nccl_tests_json(document, rows, algorithm):
    parsed = allreduce.parse_nccl_tests_json(document)
    assert (parsed["rows"], parsed["algorithm"], parsed["avg_busbw_gbps"], parsed["out_of_bounds"]) == (
        rows, algorithm, 361.25, 0)


@pytest.mark.parametrize("text, message", [
    pytest.param('{"version": 3, "results": [', "does not parse", id="cut-short"),
    pytest.param('{"version": 3}', "no results list", id="no-results"),
])
def test_parse_nccl_tests_json_refuses(text, message):
    with pytest.raises(ValueError, match=message):
        allreduce.parse_nccl_tests_json(text)


@pytest.mark.parametrize("document, rows", [
    pytest.param({"tool": "gloo", "ranks": 3,
                  "results": [{"size": 67108864, "time_us": 250000.0, "algbw": 0.268, "busbw": 0.358, "wrong": 0}]},
                 [_row(67108864, 250000.0, 0.268, 0.358, 0, "in_place", "gloo")], id="object"),
    pytest.param(json.dumps({"tool": "gloo", "results": [{"size": 1024, "busbw": None}]}),
                 [_row(1024, None, None, None, None, "in_place", "gloo")], id="text-and-missing-figures"),
])
def test_parse_gloo(document, rows):
    assert allreduce.parse_gloo(document)["rows"] == rows


def test_parse_gloo_refuses():
    with pytest.raises(ValueError, match="no results list"):
        allreduce.parse_gloo({"tool": "gloo"})


@pytest.mark.parametrize("ranks, factor", [(1, 0.0), (2, 1.0), (3, 4.0 / 3), (8, 1.75), (0, 0.0)])
def test_busbw_factor(ranks, factor):
    assert allreduce.busbw_factor(ranks) == pytest.approx(factor)


@pytest.mark.parametrize("rows, min_bytes, expected", [
    # nccl-tests#212: the 8-byte row's near-zero figure must not drag the gated mean down.
    pytest.param([_row(8, 30.0, 0.0, 0.0, 0, "out_of_place"), _row(64 * MIB, 400.0, 160.0, 300.0, 0, "out_of_place"),
                  _row(128 * MIB, 700.0, 180.0, 320.0, 0, "in_place")], 64 * MIB,
                 {"busbw_gbps": 310.0, "sizes": [64 * MIB, 128 * MIB], "min_bytes": 64 * MIB, "wrong": 0, "rows": 2},
                 id="small-sizes-left-out"),
    pytest.param([_row(8, 30.0, 0.0, 0.0, 0, "out_of_place")], 64 * MIB,
                 {"busbw_gbps": None, "sizes": [], "min_bytes": 64 * MIB, "wrong": 0, "rows": 0},
                 id="only-small-sizes-no-figure"),
    pytest.param([_row(64 * MIB, 400.0, 160.0, 300.0, 5, "out_of_place"), _row(8, 1.0, 0.0, 0.0, 1, "in_place")],
                 64 * MIB, {"busbw_gbps": 300.0, "sizes": [64 * MIB], "min_bytes": 64 * MIB, "wrong": 6, "rows": 1},
                 id="wrong-elements-counted-at-every-size"),
])
def test_gate_figure(rows, min_bytes, expected):
    assert allreduce.gate_figure(rows, min_bytes) == expected


def test_gate_figure_of_a_published_run():
    """The #232 excerpt stops at 32 MiB: at the default gate size it has nothing to judge."""
    rows = allreduce.parse_nccl_tests_text(_fixture("all_reduce_perf-2node-tree-h100-nccl-tests-232.txt"))["rows"]
    assert allreduce.gate_figure(rows)["busbw_gbps"] is None
    expected = (39.90 + 39.95 + 41.31 + 41.52) / 4
    assert allreduce.gate_figure(rows, 16 * MIB)["busbw_gbps"] == pytest.approx(expected, abs=1e-3)
