# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Version combinations that upstream documents as broken, as data, checked on every node.

Each entry of :data:`KNOWN_BAD` names the versions it concerns, what goes wrong, the source that
says so (read at the tags named), and the fix. Its ``match`` reads the node's gpu_stack_facts and
answers ``None`` (the facts cannot tell: the row skips), ``""`` (not affected: the row passes,
saying what it found) or the found text (the node has the combination). An entry is a failure
where the combination breaks the job, a warning where it only slows it.

To add one, read the upstream source at both sides of the fix, cite file:line and the release
that fixed it, and add a table test (tests/unit/plugins/module_utils/_preflight/test_known_bad.py).

Pure functions, no Ansible imports.
"""
from __future__ import annotations

from typing import Any, Callable, Mapping, NamedTuple, Optional, Sequence

from .._stack.versions import compare
from .rows import FAIL, PASS, SKIP, WARN, NodeCheck, Row, _Context, _get, _role, _row, _text
from .cluster import _rdma_active


class KnownBad(NamedTuple):
    check: str
    component: str
    what: str  # the combination, as a person says it
    effect: str
    source: str
    fix: str
    status: str  # FAIL or WARN where the node has it
    match: Callable[[_Context, Mapping[str, Any]], Optional[str]]


def _older(version: Optional[str], bound: str) -> Optional[bool]:
    try:
        return compare(str(version), bound) < 0 if version else None
    except ValueError:
        return None


def _package(facts: Mapping[str, Any], name: str) -> Optional[str]:
    installed = _get(facts, "packages", "installed")
    if not isinstance(installed, Mapping):
        return None
    value = _text(installed.get(name))
    return value.split(",")[0] if value else None


# ------------------------------------------------------------------ DeepSpeed < 0.14.4, NumPy 2
DEEPSPEED_NUMPY2_FIXED = "0.14.4"


def _deepspeed_numpy2(ctx: _Context, facts: Mapping[str, Any]) -> Optional[str]:
    deepspeed = _text(_get(facts, "deepspeed", "version")) or _package(facts, "deepspeed")
    numpy = _package(facts, "numpy")
    if not deepspeed or not numpy:
        return None
    old = _older(deepspeed, DEEPSPEED_NUMPY2_FIXED)
    numpy2 = _older(numpy, "2.0.0") is False
    if old is None:
        return None
    return "DeepSpeed %s with NumPy %s" % (deepspeed, numpy) if old and numpy2 else ""


# ------------------------------------------------------ NCCL < 2.23.4, GPUDirect via nvidia_peermem
NCCL_PEERMEM_FIXED = "2.23.4"
# What NCCL < 2.23.4 looks for to enable GPUDirect RDMA over a peer-memory module.
NV_MEM_PEERS = ("nv_mem", "nv_mem_nc")


def _nccl_in_use(facts: Mapping[str, Any]) -> Optional[str]:
    """The NCCL the ranks load: torch's own (torch.cuda.nccl, or the nvidia-nccl wheel it brings),
    else the system library."""
    for value in (_text(_get(facts, "torch", "nccl")), _package(facts, "nvidia_nccl_cu12"),
                  _package(facts, "nvidia_nccl_cu11"), _text(_get(facts, "nccl", "version"))):
        if value:
            return value
    return None


def _nccl_peermem(ctx: _Context, facts: Mapping[str, Any]) -> Optional[str]:
    if not _rdma_active(facts):
        return None  # no RDMA port: NCCL uses sockets, GPUDirect RDMA does not arise
    module = _text(_get(facts, "infiniband", "peermem_module"))
    peers = _get(facts, "infiniband", "memory_peers")
    nccl = _nccl_in_use(facts)
    if module is None and not _get(facts, "infiniband", "peermem_loaded"):
        return ""  # no peer-memory module: GPUDirect RDMA is DMA-BUF's or absent, another check's
    if module is None or not isinstance(peers, (list, tuple)) or not nccl:
        return None
    old = _older(nccl, NCCL_PEERMEM_FIXED)
    if old is None:
        return None
    seen = [peer for peer in NV_MEM_PEERS if peer in peers]
    if module == "nvidia_peermem" and old and not seen:
        return "NCCL %s, %s loaded, no /sys/kernel/mm/memory_peers/nv_mem" % (nccl, module)
    return ""


KNOWN_BAD: Sequence[KnownBad] = (
    KnownBad(
        check="known_bad.deepspeed_numpy2", component="deepspeed",
        what="DeepSpeed < %s with NumPy >= 2" % DEEPSPEED_NUMPY2_FIXED,
        effect="the deepspeed launcher cannot start: launcher/runner.py imports deepspeed.autotuning, whose "
               "scheduler.py does `from numpy import BUFSIZE`, a name NumPy 2 removed (ImportError)",
        source="DeepSpeed v0.14.3 deepspeed/launcher/runner.py:30 and deepspeed/autotuning/scheduler.py:8 "
               "(the same lines since v0.9.2); fixed in v0.14.4 by PR #5680 and #5686",
        fix="pin numpy<2 in the venv (the cu117 profile does) or use DeepSpeed >= %s; rerun %s" % (
            DEEPSPEED_NUMPY2_FIXED, _role("python_env")),
        status=FAIL, match=_deepspeed_numpy2,
    ),
    KnownBad(
        check="known_bad.nccl_peermem", component="nccl",
        what="NCCL < %s with GPUDirect RDMA through nvidia_peermem" % NCCL_PEERMEM_FIXED,
        effect="NCCL does not see the module and disables GPUDirect RDMA (\"NET/IB : GPU Direct RDMA Disabled "
               "for HCA\"): inter-node all-reduce runs through host memory, reported about 10x slower "
               "(2 nodes, 1 GB: 180 to 10 GB/s)",
        source="NCCL v2.22.3-1 src/transport/net_ib.cc:610-620 (ncclIbGdrSupport checks only "
               "/sys/kernel/mm/memory_peers/nv_mem{,_nc}/version); v2.23.4-1 net_ib.cc:691-697 also checks "
               "/sys/module/nvidia_peermem/version; NVIDIA/nccl#1676",
        fix="use NCCL >= %s (a torch that bundles it, or nvidia-nccl-cu12 >= %s in the venv), or GPUDirect "
            "RDMA over DMA-BUF (open GPU kernel modules, kernel >= 5.12, NCCL_DMABUF_ENABLE=1)" % (
                NCCL_PEERMEM_FIXED, NCCL_PEERMEM_FIXED),
        status=WARN, match=_nccl_peermem,
    ),
)


def _checker(entry: KnownBad) -> NodeCheck:
    def check(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
        found = entry.match(ctx, facts)
        if found is None:
            return _row(entry.check, SKIP, node, entry.component,
                        fix="the facts of %s do not tell (%s)" % (node, entry.what))
        if not found:
            return _row(entry.check, PASS, node, entry.component, "not affected", "not " + entry.what)
        return _row(entry.check, entry.status, node, entry.component, found, "not " + entry.what,
                    "%s on %s: %s. Fix: %s. Source: %s" % (entry.what, node, entry.effect, entry.fix, entry.source))

    check.__name__ = "check_" + entry.check.replace(".", "_")
    return check


KNOWN_BAD_CHECKS: Sequence[NodeCheck] = tuple(_checker(entry) for entry in KNOWN_BAD)
