# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Slurm health check of one node: the preflight's per-node checks, run by slurmd.

The slurm role installs the collection's library on every node (os_base's ``library`` entry
point: all of module_utils, so no list of files to keep), and slurm.conf names the small runner
(``roles/slurm/files/megatron-slurm-health``) as ``HealthCheckProgram``. slurmd runs it as root
when it starts and every ``HealthCheckInterval`` seconds. The runner gathers the node's facts
with the same collector as the ``gpu_stack_facts`` module, judges them here with the same
``MATRIX_CHECKS`` as the preflight gate, plus the GPU count that slurm.conf promised, and
drains the node with the first failure as the reason. It resumes only a node that it drained
itself, so an administrator's drain is never undone by it.

Standard library and the collection's own module_utils only: the nodes have no Ansible.
"""
from __future__ import annotations

import re
from typing import Any, List, Mapping, Optional, Sequence, Tuple

from .._fabric import verdict as _fabric_verdict
from .._preflight import gate as _preflight

REASON_PREFIX = "megatron-health"
# Slurm keeps a node's Reason in a fixed buffer; a long one is cut by slurmctld anyway.
REASON_MAX = 200
# The checks that read the training venv or the Megatron-DeepSpeed checkout: left out when the
# health check is given no venv (a node that runs no Python job, or before python_env ran).
VENV_CHECKS = ("python.version", "torch.version", "torch.cuda", "cudnn.torch", "nccl.torch",
               "cuda.nvcc_vs_torch", "deepspeed.version", "apex.cuda_ext", "megatron_deepspeed.present")
DRAIN, RESUME, UPDATE, NOTHING = "drain", "resume", "update", "nothing"


def check_gpu_count(node: str, facts: Mapping[str, Any], expected: int) -> Optional[_preflight.Row]:
    """The GPUs slurm.conf promised (Gres=gpu:N) against what nvidia-smi sees now.

    slurmd compares the two only when it registers; a GPU that falls off the bus while it runs
    (Xid 79) would keep getting jobs without this row.
    """
    if expected <= 0:
        return None
    gpus = facts.get("gpus") if isinstance(facts.get("gpus"), Mapping) else {}
    found = int(gpus.get("count") or 0)
    status = _preflight.PASS if found == expected else _preflight.FAIL
    fix = "" if found == expected else (
        "nvidia-smi on %s sees %d GPU(s), slurm.conf promised %d: look for Xid errors in `dmesg`, reseat or "
        "replace the GPU, then `scontrol update NodeName=%s State=RESUME` (or rerun the slurm role if the node "
        "really has %d now)" % (node, found, expected, node, found))
    return _preflight.Row("gpu.count", status, node, "gpu", str(found), str(expected), fix)


def check_fabric(node: str, fabric: Optional[Mapping[str, Any]]) -> Optional[_preflight.Row]:
    """The fabric gate's verdict on this node (_fabric.verdict, the file the fabric check play writes).

    A node the gate named (its all-reduce below the threshold, the node and not a link) fails with
    the figures; a verdict that names it no more passes, so that the node this check drained is
    resumed. No verdict file: no row.
    """
    fields = _fabric_verdict.health_fields(fabric, node)
    if fields is None:
        return None
    status = _preflight.FAIL if fields["status"] == "fail" else _preflight.PASS
    return _preflight.Row(_fabric_verdict.CHECK, status, node, "fabric", fields["found"], fields["expected"],
                          fields["fix"])


def node_rows(node: str, facts: Mapping[str, Any], profile: Mapping[str, Any], gpus: int = 0,
              with_venv: bool = True, exclude: Sequence[str] = (),
              fabric: Optional[Mapping[str, Any]] = None) -> List[_preflight.Row]:
    """Every per-node row for this node: the preflight's matrix checks, the GPU count and the fabric gate's verdict."""
    ctx = _preflight._Context({node: facts}, profile, {})
    if node not in ctx.nodes:
        return [_preflight.Row("facts.gathered", _preflight.FAIL, node, "facts", ctx.missing.get(node, "no facts"),
                               "gpu_stack_facts from this node", "run the health check by hand to see why")]
    left_out = set(exclude) | (set() if with_venv else set(VENV_CHECKS))
    rows = []
    for node_check in _preflight.MATRIX_CHECKS:
        row = node_check(ctx, node, facts)
        if row is not None and row.check not in left_out:
            rows.append(row)
    for extra in (check_gpu_count(node, facts, int(gpus)), check_fabric(node, fabric)):
        if extra is not None and extra.check not in left_out:
            rows.append(extra)
    return rows


def failures(rows: Sequence[_preflight.Row]) -> List[_preflight.Row]:
    return [row for row in rows if row.status == _preflight.FAIL]


def drain_reason(failed: Sequence[_preflight.Row]) -> str:
    """One line for `scontrol update Reason=`: the first failure, found against expected."""
    first = failed[0]
    text = "%s: %s found %s, expected %s" % (REASON_PREFIX, first.check, first.found or "nothing", first.expected or "?")
    if len(failed) > 1:
        text += " (+%d more)" % (len(failed) - 1)
    # scontrol splits on '=' in unquoted words; the runner passes argv, so only the length matters.
    return text[:REASON_MAX]


_STATE_RE = re.compile(r"(?:^|\s)State=(\S+)")
_REASON_RE = re.compile(r"(?:^|\s)Reason=(.*?)(?:\s+\[[^\]]*\])?(?=\s+[A-Za-z]+=|$)")


def parse_node_state(text: str) -> Tuple[List[str], str]:
    """`scontrol show node -o NAME` -> (state flags, e.g. ['IDLE', 'DRAIN'], reason or '')."""
    state = _STATE_RE.search(text or "")
    reason = _REASON_RE.search(text or "")
    flags = [flag for flag in re.split(r"[+*]", state.group(1)) if flag] if state else []
    return flags, (reason.group(1).strip() if reason else "")


def decide(flags: Sequence[str], current_reason: str, failed: Sequence[_preflight.Row]) -> Tuple[str, str]:
    """What to do with the node: (drain|update|resume|nothing, reason)."""
    drained = any(flag in ("DRAIN", "DRAINED", "DRAINING") for flag in flags)
    ours = current_reason.startswith(REASON_PREFIX)
    if failed:
        reason = drain_reason(failed)
        if not drained:
            return DRAIN, reason
        if ours and current_reason != reason:
            return UPDATE, reason
        return NOTHING, current_reason
    if drained and ours:
        return RESUME, ""
    return NOTHING, current_reason


def scontrol_argv(action: str, node: str, reason: str) -> Optional[List[str]]:
    """The scontrol command for ``decide``'s answer (None: nothing to run)."""
    if action in (DRAIN, UPDATE):
        return ["scontrol", "update", "NodeName=%s" % node, "State=DRAIN", "Reason=%s" % reason]
    if action == RESUME:
        return ["scontrol", "update", "NodeName=%s" % node, "State=RESUME"]
    return None


def summary(node: str, rows: Sequence[_preflight.Row], action: str) -> str:
    """What the runner prints: one line per non-passing row, then the verdict."""
    lines = ["%s %s %s: found %s, expected %s%s" % (row.status.upper(), node, row.check, row.found or "-",
                                                    row.expected or "-", ("; fix: " + row.fix) if row.fix else "")
             for row in rows if row.status in (_preflight.FAIL, _preflight.WARN)]
    tally = _preflight.counts(rows)
    lines.append("%s on %s: %d failed, %d warning(s), %d passed, %d skipped; action: %s" % (
        REASON_PREFIX, node, tally[_preflight.FAIL], tally[_preflight.WARN], tally[_preflight.PASS],
        tally[_preflight.SKIP], action))
    return "\n".join(lines)
