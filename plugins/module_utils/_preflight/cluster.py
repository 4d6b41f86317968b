# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight's checks across nodes (every version and path identical on all nodes, clocks
in sync) and of the cluster (hostfile slots, memlock, InfiniBand, peermem, disk, ssh from the head).

Pure functions, no Ansible imports; _preflight runs :func:`cross_node_rows` and
:data:`CLUSTER_CHECKS`.
"""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from .rows import (
    ALL_NODES,
    FAIL,
    PASS,
    SKIP,
    WARN,
    NodeCheck,
    Row,
    _Context,
    _gb,
    _get,
    _int,
    _nvcc_version,
    _role,
    _row,
    _show,
    _text,
    _torch_unusable,
    _version,
)

DEFAULT_MAX_CLOCK_OFFSET_MS = 100.0
UNLIMITED = ("unlimited", "infinity", "-1")


# ---------------------------------------------------------------------------------------
# Cross-node checks: every value identical on all nodes
# ---------------------------------------------------------------------------------------


def _torch_dependent(path: Tuple[str, ...]) -> Callable[[Mapping[str, Any]], Optional[str]]:
    def read(facts: Mapping[str, Any]) -> Optional[str]:
        return _version(facts, *path)

    return read


# (check id, component, what, reader, needs a GPU profile, role that fixes it)
SAME: Sequence[Tuple[str, str, str, Callable[[Mapping[str, Any]], Any], bool, str]] = (
    ("same.driver", "driver", "NVIDIA driver", lambda f: _text(_get(f, "driver", "version")), True, "nvidia_driver"),
    ("same.cuda", "cuda", "CUDA toolkit", lambda f: _text(_get(f, "cuda", "version")), True, "cuda_toolkit"),
    ("same.nvcc", "nvcc", "nvcc", _nvcc_version, True, "cuda_toolkit"),
    ("same.cudnn", "cudnn", "system cuDNN", lambda f: _version(f, "cudnn", "version"), True, "cudnn"),
    ("same.nccl", "nccl", "system NCCL", lambda f: _version(f, "nccl", "version"), True, "nccl"),
    ("same.python", "python", "Python", lambda f: _text(_get(f, "python", "version")), False, "python_env"),
    ("same.torch", "torch", "torch", lambda f: _text(_get(f, "torch", "version")), False, "python_env"),
    ("same.torch_cuda", "torch", "torch.version.cuda", lambda f: _text(_get(f, "torch", "cuda")), True, "python_env"),
    ("same.torch_cudnn", "torch.cudnn", "torch's bundled cuDNN", _torch_dependent(("torch", "cudnn")), True, "python_env"),
    ("same.torch_nccl", "torch.nccl", "torch's bundled NCCL", _torch_dependent(("torch", "nccl")), True, "python_env"),
    ("same.deepspeed", "deepspeed", "DeepSpeed", lambda f: _text(_get(f, "deepspeed", "version")), False, "python_env"),
    ("same.gpu_model", "gpu", "GPU model", lambda f: _text(_get(f, "gpus", "model")), True, ""),
    ("same.gpu_count", "gpu", "GPU count", lambda f: _text(_get(f, "gpus", "count")), True, ""),
    ("same.megatron_commit", "megatron_deepspeed", "Megatron-DeepSpeed commit",
     lambda f: _text(_get(f, "megatron_deepspeed", "commit")), False, "python_env"),
    ("same.megatron_path", "megatron_deepspeed", "Megatron-DeepSpeed path",
     lambda f: _text(_get(f, "megatron_deepspeed", "path")), False, "python_env"),
    ("same.venv", "venv", "venv path", lambda f: _text(_get(f, "venv")), False, "python_env"),
    ("same.python_executable", "venv", "Python executable path",
     lambda f: _text(_get(f, "python", "executable")), False, "python_env"),
)

# Values that only exist when torch imports (and, for its libraries, is a CUDA build): a
# node without them fails torch.version / torch.cuda and is left out of these comparisons,
# so one broken venv is reported once, not four times.
_NEEDS_TORCH = ("same.torch_cuda", "same.torch_cudnn", "same.torch_nccl")
_NEEDS_TORCH_CUDA = ("same.torch_cudnn", "same.torch_nccl")


def _left_out(check: str, facts: Mapping[str, Any]) -> bool:
    if check in _NEEDS_TORCH and _torch_unusable(facts):
        return True
    return check in _NEEDS_TORCH_CUDA and _text(_get(facts, "torch", "cuda")) is None


def _majority(values: "OrderedDict[str, str]") -> Tuple[Optional[str], List[str]]:
    """The value most nodes share (None on a tie) and the nodes that differ from it."""
    counts: Dict[str, int] = {}
    for value in values.values():
        counts[value] = counts.get(value, 0) + 1
    best = max(counts.values())
    leaders = [value for value, count in counts.items() if count == best]
    if len(leaders) > 1:
        return None, list(values)
    return leaders[0], [node for node, value in values.items() if value != leaders[0]]


def cross_node_rows(ctx: _Context) -> List[Row]:
    rows: List[Row] = []
    for check, comp, what, read, gpu_only, role in SAME:
        if gpu_only and not ctx.cuda:
            rows.append(_row(check, SKIP, ALL_NODES, comp, fix="profile %s runs on CPU" % ctx.name))
            continue
        values: "OrderedDict[str, str]" = OrderedDict()
        for node, facts in ctx.nodes.items():
            if _left_out(check, facts):
                continue
            values[node] = _show(read(facts))
        if not values:
            rows.append(_row(check, SKIP, ALL_NODES, comp, fix="no node reported it"))
            continue
        expected, odd = _majority(values)
        for node, value in values.items():
            if node not in odd:
                rows.append(_row(check, PASS, node, comp, value, "same on all nodes"))
                continue
            if expected is None:
                seen = "; ".join("%s on %s" % (v, n) for n, v in values.items())
                want = "one %s on all nodes (no majority: %s)" % (what, seen)
            else:
                want = "%s (as on the other nodes)" % expected
            if role:
                fix = "make the %s on %s match the other nodes: run %s on %s" % (what, node, _role(role), node)
            else:
                fix = "the %s on %s differs from the other nodes: replace the node or fix its hardware" % (what, node)
            if expected is None:
                fix += " (decide which value is right and apply it everywhere)"
            rows.append(_row(check, FAIL, node, comp, value, want, fix))
    rows.extend(package_rows(ctx))
    rows.extend(nccl_env_rows(ctx))
    return rows


# Distributions the SAME table already compares (same.torch, same.deepspeed): left out of
# same.packages so that one drift is reported once.
_PACKAGES_COMPARED_ELSEWHERE = ("torch", "deepspeed")
_NOT_INSTALLED = "(not installed)"
# How many differing packages a same.packages row spells out.
_PACKAGES_SHOWN = 8


def package_rows(ctx: _Context) -> List[Row]:
    """same.packages: every node's venv holds the same ``name==version`` set. Per distribution the
    version most nodes have is the expected one; a node is named with each package it has at
    another version, lacks, or has in addition."""
    check, comp = "same.packages", "packages"
    sets: "OrderedDict[str, Mapping[str, Any]]" = OrderedDict()
    for node, facts in ctx.nodes.items():
        installed = _get(facts, "packages", "installed")
        if isinstance(installed, Mapping) and installed:
            sets[node] = installed
    if not sets:
        return [_row(check, SKIP, ALL_NODES, comp, fix="no node reported its venv's packages")]
    names = sorted(set(name for installed in sets.values() for name in installed)
                   - set(_PACKAGES_COMPARED_ELSEWHERE))
    differ: Dict[str, List[str]] = dict((node, []) for node in sets)
    wanted: Dict[str, List[str]] = dict((node, []) for node in sets)
    for name in names:
        values: "OrderedDict[str, str]" = OrderedDict(
            (node, _text(installed.get(name)) or _NOT_INSTALLED) for node, installed in sets.items())
        expected, odd = _majority(values)
        if expected is None and len(set(values.values())) == 1:
            continue
        for node in odd:
            found = values[node]
            if expected is None:
                others = "; ".join("%s on %s" % (v, n) for n, v in values.items() if n != node)
                differ[node].append("%s %s (no majority: %s)" % (name, found, others))
                continue
            differ[node].append("%s %s (the others: %s)" % (name, found, expected))
            if expected != _NOT_INSTALLED:
                wanted[node].append("'%s==%s'" % (name, expected))
    rows: List[Row] = []
    for node, installed in sets.items():
        items = differ[node]
        if not items:
            rows.append(_row(check, PASS, node, comp, "%d packages" % len(installed), "the same name==version set on all nodes"))
            continue
        shown = "; ".join(items[:_PACKAGES_SHOWN])
        if len(items) > _PACKAGES_SHOWN:
            shown += "; ... (%d more)" % (len(items) - _PACKAGES_SHOWN)
        venv = _text(_get(ctx.nodes[node], "venv")) or "<venv>"
        fix = "make the venv on %s match the other nodes: %s" % (node, (
            "%s/bin/pip install --no-deps %s" % (venv, " ".join(wanted[node])) if wanted[node]
            else "%s/bin/pip uninstall the packages the other nodes lack" % venv))
        fix += ", or run %s on %s, which installs the pinned set" % (_role("python_env"), node)
        rows.append(_row(check, FAIL, node, comp, "%d package(s) differ: %s" % (len(items), shown),
                         "the same name==version set on all nodes", fix))
    return rows


_UNSET = "unset"
# How many differing variables a same.nccl_env row spells out.
_NCCL_SHOWN = 6


def _others(values: "OrderedDict[str, str]", node: str) -> str:
    """'unset on node1, node2; Tree on node4': the other nodes grouped by value."""
    grouped: "OrderedDict[str, List[str]]" = OrderedDict()
    for other, value in values.items():
        if other != node:
            grouped.setdefault(value, []).append(other)
    return "; ".join("%s on %s" % (value, ", ".join(nodes)) for value, nodes in grouped.items())


def nccl_env_rows(ctx: _Context) -> List[Row]:
    """same.nccl_env: every node gives its ranks the same NCCL_* variables (gpu_stack_facts'
    nccl_env: the training user's shell files and the launcher's files). NCCL reads its settings
    from the environment alone, so a variable set on one node only (NCCL_IB_DISABLE=1,
    NCCL_ALGO=Tree) makes that node's ranks pick another transport or algorithm, and collectives
    across the nodes hang or slow down without an error. Each differing node is named with the
    key, its value there and where it was set, and the value on the others."""
    check, comp = "same.nccl_env", "nccl"
    envs: "OrderedDict[str, Mapping[str, Any]]" = OrderedDict()
    for node, facts in ctx.nodes.items():
        env = _get(facts, "nccl_env")
        if isinstance(env, Mapping) and isinstance(env.get("values"), Mapping):
            envs[node] = env
    if not envs:
        return [_row(check, SKIP, ALL_NODES, comp, fix="no node reported its NCCL environment (an older collection)")]
    keys = sorted(set(str(key) for env in envs.values() for key in env["values"]))
    differ: Dict[str, List[str]] = dict((node, []) for node in envs)
    for key in keys:
        values: "OrderedDict[str, str]" = OrderedDict(
            (node, _text(env["values"].get(key)) if key in env["values"] else _UNSET) for node, env in envs.items())
        if len(set(values.values())) == 1:
            continue
        _expected, odd = _majority(values)
        for node in odd:
            where = _text((envs[node].get("sources") or {}).get(key)) if values[node] != _UNSET else None
            there = "%s=%s (%s)" % (key, values[node], where) if where else "%s %s" % (key, values[node])
            differ[node].append("%s; the others: %s" % (there, _others(values, node)))
    rows: List[Row] = []
    expected = "the same NCCL_* variables on all nodes"
    for node, env in envs.items():
        items = differ[node]
        if not items:
            rows.append(_row(check, PASS, node, comp, "%d NCCL_* variable(s)" % len(env["values"]), expected))
            continue
        shown = " | ".join(items[:_NCCL_SHOWN])
        if len(items) > _NCCL_SHOWN:
            shown += " | ... (%d more)" % (len(items) - _NCCL_SHOWN)
        fix = ("make the NCCL_* variables on %s match the other nodes: set a cluster-wide value in nccl_env (the nccl "
               "role writes it to every node's nccl.env) and remove node-local ones from the file named; files read: %s"
               % (node, ", ".join(str(p) for p in (env.get("read") or [])) or "none"))
        rows.append(_row(check, FAIL, node, comp, "%d NCCL_* variable(s) differ: %s" % (len(items), shown), expected, fix))
    return rows


def check_clock(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "clock.sync", "clock"
    limit = float(ctx.options.get("max_clock_offset_ms") or DEFAULT_MAX_CLOCK_OFFSET_MS)
    synced = _get(facts, "clock", "synchronized")
    offset = _get(facts, "clock", "offset_ms")
    source = _text(_get(facts, "clock", "source"))
    expected = "synchronized, |offset| <= %g ms" % limit
    try:
        offset_ms: Optional[float] = None if offset is None else float(offset)
    except (TypeError, ValueError):
        offset_ms = None
    found = "%s, offset %s" % (
        {True: "synchronized", False: "not synchronized"}.get(synced, "sync unknown"),
        "unknown" if offset_ms is None else "%g ms" % offset_ms,
    )
    if source:
        found += " (%s)" % source
    fix = "enable time sync (chrony/NTP) on %s with %s; skewed clocks break NCCL timeouts and log order" % (node, _role("os_base"))
    container = _text(_get(facts, "memlock", "container"))
    if container:
        # A container reads its host's kernel clock and may not set it (no CAP_SYS_TIME): os_base's
        # chrony cannot start there, so the fix is the host's, not a role's.
        fix = ("%s is a container (%s): its clock is the host's kernel clock, which only the host can "
               "synchronize; enable chrony/NTP on the host (skewed clocks break NCCL timeouts and log order)"
               % (node, container))
    if synced is False or (offset_ms is not None and abs(offset_ms) > limit):
        if str(ctx.options.get("clock") or "required") == "advisory":
            return _row(check, WARN, node, comp, found, expected + " (clock: advisory)", fix)
        return _row(check, FAIL, node, comp, found, expected, fix)
    if synced is None and offset_ms is None:
        return _row(check, WARN, node, comp, found, expected, "could not read the clock state on %s: %s" % (node, fix))
    return _row(check, PASS, node, comp, found, expected)


# ---------------------------------------------------------------------------------------
# Cluster checks
# ---------------------------------------------------------------------------------------


def check_slots(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Optional[Row]:
    check, comp = "hostfile.slots", "hostfile"
    slots = ctx.options.get("slots")
    if slots is None:
        return _row(check, SKIP, node, comp, fix="no hostfile slots given")
    if not ctx.cuda:
        return _row(check, SKIP, node, comp, fix="profile %s: slots are CPU ranks, not GPUs" % ctx.name)
    gpus = _int(_get(facts, "gpus", "count")) or 0
    if node not in slots:
        return _row(
            check, WARN, node, comp, "not in the hostfile", "%d slots" % gpus,
            "add '%s slots=%d' to the hostfile, or take %s out of megatron_nodes" % (node, gpus, node),
        )
    want = _int(slots[node])
    ok = want == gpus
    fix = (
        "the hostfile gives %s slots=%s but nvidia-smi shows %d GPUs: set megatron_job_gpus_per_node "
        "to %d, or bring the missing GPUs back (%s)" % (node, _show(slots[node]), gpus, gpus, _role("nvidia_driver"))
    )
    return _row(check, PASS if ok else FAIL, node, comp, "%d GPUs" % gpus, "%s slots" % _show(slots[node]), "" if ok else fix)


def _limit_unlimited(value: Any) -> bool:
    return _text(value) is not None and str(_text(value)).lower() in UNLIMITED


MEMLOCK_MODES = ("auto", "required", "advisory")
CLOCK_MODES = ("required", "advisory")


def _rdma_active(facts: Mapping[str, Any]) -> bool:
    """Whether the node reports an Active InfiniBand/RoCE port: NCCL then uses it by default."""
    for hca in _get(facts, "infiniband", "hcas") or []:
        for port in _get(hca, "ports") or []:
            if "active" in _show(_get(port, "state")).lower():
                return True
    return False


def memlock_required(ctx: _Context, facts: Mapping[str, Any]) -> Tuple[bool, str]:
    """Whether this node needs unlimited memlock, and why. RDMA registers (pins) NCCL's buffers
    against RLIMIT_MEMLOCK; CUDA's pinned host memory does not count against it, so a node whose
    NCCL runs over sockets or NVLink only trains with a small limit."""
    mode = str(ctx.options.get("memlock") or "auto")
    if mode == "required":
        return True, "memlock: required"
    if mode == "advisory":
        return False, "memlock: advisory"
    if ctx.options.get("infiniband_required"):
        return True, "infiniband_required is true"
    if ctx.options.get("gpudirect"):
        return True, "gpudirect is true"
    if _rdma_active(facts):
        return True, "the node has an Active RDMA port, which NCCL uses"
    return False, "no Active RDMA port and infiniband_required false: NCCL uses sockets"


def check_memlock(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "memlock.unlimited", "memlock"
    current = _get(facts, "memlock", "current")
    ssh = _get(facts, "memlock", "noninteractive_ssh")
    if _text(ssh) is None:
        # playbooks/preflight.yml reads it in the head node's ssh sweep (the session pdsh opens).
        swept = _text((ctx.options.get("ssh_memlock") or {}).get(node))
        ssh = swept if swept not in (None, "-") else None
    found = "current %s" % _show(current)
    if _text(ssh) is not None:
        found += ", non-interactive ssh %s" % _show(ssh)
    required, why = memlock_required(ctx, facts)
    expected = "unlimited (also in a non-interactive ssh session)"
    if not required:
        expected += "; advised, not required (%s)" % why
    fix = (
        "set memlock unlimited on %s with %s (limits.d and pam_limits for sshd): NCCL over "
        "InfiniBand pins memory, and pdsh starts ranks in a non-interactive ssh session" % (node, _role("os_base"))
    )
    container = _text(_get(facts, "memlock", "container"))
    hard = _text(_get(facts, "memlock", "hard"))
    if container and hard is not None and not _limit_unlimited(hard):
        # No file inside a container lifts its runtime's ceiling: os_base's limits.d is moot there.
        fix = (
            "%s is a container (%s): its memlock ceiling, a hard limit of %s KiB, is the container "
            "runtime's, and no limits.d file inside can raise it. Start the container with an unlimited "
            "memlock limit (Docker: --ulimit memlock=-1:-1, which the runtime must itself be allowed), or "
            "train on the host" % (node, container, hard)
        )
    if _text(current) is None:
        return _row(check, WARN, node, comp, found, expected, "memlock was not reported: " + fix)
    ok = _limit_unlimited(current) and (_text(ssh) is None or _limit_unlimited(ssh))
    if not ok:
        return _row(check, FAIL if required else WARN, node, comp, found, expected, fix)
    ssh_error = _text(_get(facts, "memlock", "noninteractive_ssh_error"))
    if _text(ssh) is None and ssh_error:
        return _row(
            check, WARN, node, comp, found + "; ssh session not read: " + ssh_error, expected,
            "let the facts read it (ssh as the training user to localhost, %s), then rerun" % _role("cluster_ssh"),
        )
    return _row(check, PASS, node, comp, found, expected)


def check_infiniband(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "infiniband.ports", "infiniband"
    if not ctx.options.get("infiniband_required"):
        return _row(check, SKIP, node, comp, fix="infiniband_required is false")
    hcas = _get(facts, "infiniband", "hcas") or []
    ports: List[Tuple[str, str]] = []
    for hca in hcas:
        for port in (_get(hca, "ports") or []):
            state = _show(_get(port, "state"))
            ports.append(("%s/%s" % (_show(_get(hca, "name")), _show(_get(port, "port"))), state))
    expected = "every port Active"
    fix = (
        "bring the InfiniBand links up on %s: check cables and the subnet manager (ibstat), and "
        "install the RDMA stack with %s" % (node, _role("infiniband"))
    )
    if not ports:
        return _row(check, FAIL, node, comp, "no InfiniBand HCA", expected, fix)
    down = ["%s %s" % (name, state) for name, state in ports if "active" not in state.lower()]
    found = "%d/%d ports Active" % (len(ports) - len(down), len(ports))
    if down:
        found += " (%s)" % ", ".join(down)
    if len(down) == len(ports):
        return _row(check, FAIL, node, comp, found, expected, fix)
    if down:
        # NCCL runs on the Active ports; a missing cable on one rail costs bandwidth, not correctness.
        return _row(check, WARN, node, comp, found, expected, fix)
    return _row(check, PASS, node, comp, found, expected)


def check_peermem(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "infiniband.peermem", "peermem"
    if not ctx.options.get("gpudirect"):
        return _row(check, SKIP, node, comp, fix="gpudirect is false")
    loaded = bool(_get(facts, "infiniband", "peermem_loaded"))
    fix = "load nvidia-peermem on %s (modprobe nvidia-peermem, persisted) with %s" % (node, _role("infiniband"))
    return _row(check, PASS if loaded else FAIL, node, comp, "loaded" if loaded else "not loaded", "loaded (GPUDirect RDMA)", "" if loaded else fix)


def check_disk(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "disk.free", "disk"
    min_gb = ctx.options.get("min_free_gb")
    if min_gb is None:
        return _row(check, SKIP, node, comp, fix="min_free_gb not given")
    disk = _get(facts, "disk") or {}
    paths = list(ctx.options.get("disk_paths") or sorted(disk))
    expected = ">= %g GB free on %s" % (float(min_gb), ", ".join(paths) or "the data and checkpoint paths")
    if not paths:
        return _row(check, WARN, node, comp, "no path measured", expected, "pass disk_paths to gpu_stack_facts and preflight")
    need = float(min_gb) * 1e9
    problems: List[str] = []
    report: List[str] = []
    for path in paths:
        entry = _get(disk, path)
        if not isinstance(entry, Mapping):
            problems.append("%s: not measured" % path)
        elif entry.get("exists") is False:
            problems.append("%s: does not exist" % path)
        else:
            free = entry.get("free_bytes")
            try:
                free_b = float(free)
            except (TypeError, ValueError):
                problems.append("%s: free space unknown" % path)
                continue
            report.append("%s: %s" % (path, _gb(free_b)))
            if free_b < need:
                problems.append("%s: %s free" % (path, _gb(free_b)))
    if problems:
        return _row(
            check, FAIL, node, comp, "; ".join(problems), expected,
            "free space or mount the storage on %s (missing paths: create them, or mount the shared "
            "storage there); a checkpoint write that runs out of space loses the step" % node,
        )
    return _row(check, PASS, node, comp, "; ".join(report), expected)


def check_ssh(ctx: _Context, node: str, facts: Mapping[str, Any]) -> Row:
    check, comp = "ssh.from_head", "ssh"
    reach = ctx.options.get("ssh_reachable")
    if reach is None:
        return _row(check, SKIP, node, comp, fix="ssh reachability not tested (single node, or not asked)")
    if node not in reach:
        return _row(check, WARN, node, comp, "not tried", "reachable", "the ssh test from the head node did not cover %s" % node)
    ok = reachable(reach[node])
    fix = (
        "the head node cannot ssh to %s as the training user without a prompt: run %s (keys, "
        "known_hosts, pdsh); the DeepSpeed launcher needs it" % (node, _role("cluster_ssh"))
    )
    return _row(check, PASS if ok else FAIL, node, comp, "reachable" if ok else "not reachable", "reachable", "" if ok else fix)


def reachable(value: Any) -> bool:
    """True for True and for an ssh exit code of 0 (the playbook passes ``rc``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value == 0
    return str(value).strip().lower() in ("true", "yes", "0")


CLUSTER_CHECKS: Sequence[NodeCheck] = (check_clock, check_slots, check_memlock, check_infiniband, check_peermem, check_disk, check_ssh)
