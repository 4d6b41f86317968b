# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The burn-in's report: per-node tokens/s and TFLOP/s, slow nodes, the loss trend.

No Ansible imports; Python 3.8 compatible (parts run on the nodes through job_probe).
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence


def _sum(values: Iterable[Any]) -> Optional[float]:
    numbers = [float(v) for v in values if isinstance(v, (int, float))]
    return sum(numbers) if numbers else None


def burnin_report(results: Sequence[Mapping[str, Any]], node_count: int = 0,
                  ranks_per_node: Optional[int] = None, threshold: float = 0.10) -> Dict[str, Any]:
    """Per-node burn-in figures from the ``BURNIN_RESULT`` lines of every rank.

    Nodes are the hosts the ranks report (``socket.gethostname()``), which need not be the
    inventory's names, so the check is on their number: ``node_count`` hosts with
    ``ranks_per_node`` ranks each.

    * tokens/s and TFLOP/s of a node = the sum over its ranks of the timed training figures.
      Data parallelism makes every rank wait for the slowest at each gradient reduction, so
      these are nearly equal across nodes and cannot single out a slow one;
    * the slow-node test therefore uses each rank's communication-free probe (forward +
      backward alone on its device): a node whose probe tokens/s per rank is more than
      ``threshold`` below the median node is slow;
    * ``problems``: missing nodes or ranks, a loss that did not go down; ``slow_messages``: one
      per slow node, naming it.
    """
    per_node: Dict[str, List[Mapping[str, Any]]] = {}
    for result in results:
        per_node.setdefault(str(result.get("hostname")), []).append(result)
    problems: List[str] = []
    table: Dict[str, Dict[str, Any]] = {}
    for node in sorted(per_node):
        ranks = per_node[node]
        table[node] = {
            "ranks": len(ranks),
            "global_ranks": sorted(int(r.get("rank", -1)) for r in ranks),
            "tokens_per_s": _sum(r.get("tokens_per_s") for r in ranks),
            "tflops": _sum(r.get("tflops") for r in ranks),
            "probe_tokens_per_s": _sum(r.get("probe_tokens_per_s") for r in ranks),
            "probe_tflops": _sum(r.get("probe_tflops") for r in ranks),
            "below_median": None,
            "slow": False,
        }
        if ranks_per_node and len(ranks) != int(ranks_per_node):
            problems.append("%s: %d rank(s) reported, expected %d (megatron_job_gpus_per_node)"
                            % (node, len(ranks), int(ranks_per_node)))
    if node_count and len(per_node) != int(node_count):
        problems.append("results from %d host(s) (%s), expected %d nodes: the ranks of the others did not "
                        "finish; read the log" % (len(per_node), ", ".join(sorted(per_node)) or "none", int(node_count)))
    probes = {n: row["probe_tokens_per_s"] / max(row["ranks"], 1)
              for n, row in table.items() if row["probe_tokens_per_s"]}
    median = statistics.median(probes.values()) if probes else None
    slow: List[str] = []
    slow_messages: List[str] = []
    boots = {str(r.get("boot_id")) for r in results if r.get("boot_id")}
    # Several hosts on one kernel are containers on one machine: their probes share its CPUs, so
    # a node's deficit says where the launcher ran, not that its hardware is slow.
    shared = len(per_node) > 1 and len(boots) == 1 and all(r.get("boot_id") for r in results)
    slow_note = ("slow nodes not judged: the %d nodes share one kernel (boot id %s), containers on one "
                 "machine whose probes compete for its CPUs" % (len(per_node), sorted(boots)[0][:8])) if shared else None
    for node, value in sorted(probes.items()):
        deficit = 1.0 - value / median if median else 0.0
        table[node]["below_median"] = round(deficit, 4)
        if deficit > threshold and not shared:
            table[node]["slow"] = True
            slow.append(node)
            slow_messages.append(
                "%s: %.1f%% slower than the median node (probe %.1f against %.1f tokens/s per rank; "
                "threshold %.0f%%); check its GPUs (clocks, ECC, thermal), PCIe/NVLink and CPU load"
                % (node, deficit * 100, value, median, threshold * 100))
    rank0 = next((r for r in results if int(r.get("rank", -1)) == 0), None)
    initial = rank0.get("initial_loss") if rank0 else None
    final = rank0.get("final_loss") if rank0 else None
    loss_down = isinstance(initial, (int, float)) and isinstance(final, (int, float)) and final < initial
    if rank0 is None:
        problems.append("no BURNIN_RESULT from global rank 0: the run did not finish")
    elif not loss_down:
        problems.append("loss did not go down (first step %s, last step %s over steps %s..%s): the model "
                        "does not train; check the precision settings and ds_config.json"
                        % (initial, final, rank0.get("start_step"), rank0.get("final_step")))
    return {
        "nodes": table,
        "median_probe_tokens_per_s_per_rank": median,
        "slow_nodes": slow,
        "slow_messages": slow_messages,
        "slow_note": slow_note,
        "threshold": threshold,
        "initial_loss": initial,
        "final_loss": final,
        "loss_went_down": loss_down,
        "world": rank0.get("world") if rank0 else len(results),
        "start_step": rank0.get("start_step") if rank0 else None,
        "final_step": rank0.get("final_step") if rank0 else None,
        "checkpoint": rank0.get("checkpoint") if rank0 else None,
        "calibration": calibration(results, len(per_node)),
        "problems": problems,
    }


def _least(values: Iterable[Any]) -> Optional[float]:
    numbers = [float(v) for v in values if isinstance(v, (int, float)) and v > 0]
    return min(numbers) if numbers else None


def calibration(results: Sequence[Mapping[str, Any]], hosts: int) -> Dict[str, Any]:
    """The rates plan.yml takes from a burn-in (the names of plan_job's options): the slowest
    rank's matmul TFLOP/s, the slowest node's all-reduce bus bandwidth within it (NVLink), and,
    across several hosts, the world's (the ring crosses the fabric, so its slowest link sets
    it). The slowest, because a synchronous step waits for it."""
    rates = [r.get("calibration") or {} for r in results]
    out: Dict[str, Any] = {
        "matmul_tflops": _least(r.get("matmul_tflops") for r in rates),
        "nvlink_busbw_gbps": _least(r.get("node_busbw_gbps") for r in rates),
        "internode_busbw_gbps": _least(r.get("world_busbw_gbps") for r in rates) if hosts > 1 else None,
        "ranks": len(rates),
        "hosts": hosts,
    }
    devices = sorted({str(r.get("device")) for r in results if r.get("device")})
    out["devices"] = devices
    return out


def burnin_table(report: Mapping[str, Any]) -> List[str]:
    """Fixed-width lines of a burnin_report, one per node."""
    def fmt(value: Any, spec: str) -> str:
        return format(value, spec) if isinstance(value, (int, float)) else "-"

    header = ("node", "ranks", "tokens/s", "TFLOP/s", "probe tokens/s", "vs med", "")
    lines = ["%-20s %5s %14s %10s %16s %8s  %s" % header]
    for node, row in sorted(report.get("nodes", {}).items()):
        lines.append("%-20s %5d %14s %10s %16s %8s  %s" % (
            node, row["ranks"], fmt(row["tokens_per_s"], ".1f"), fmt(row["tflops"], ".4f"),
            fmt(row["probe_tokens_per_s"], ".1f"),
            ("%+.1f%%" % (-row["below_median"] * 100 + 0.0)) if isinstance(row["below_median"], (int, float)) else "-",
            "SLOW" if row["slow"] else ""))
    if report.get("slow_note"):
        lines.append(report["slow_note"])
    return lines
