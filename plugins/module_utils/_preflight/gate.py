# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The preflight gate: every node's gpu_stack_facts against the stack profile and each other.

Pure functions, no Ansible imports: ``run_checks`` turns the facts of every node into rows
(one per check and node), ``summary_line`` says the verdict; ``_report`` prints them.
The action plugin ``megatron_ds.cluster.preflight`` is a thin adapter around them.

Three kinds of check, in this order:

* the matrix, per node: each installed version against the profile and against the rules
  that NVIDIA and DeepSpeed enforce at run time (driver minimum per CUDA release, fabric
  manager == driver, DeepSpeed's nvcc-vs-torch rule, ...);
* across nodes: every version and path identical on all nodes, clocks in sync;
* the cluster: hostfile slots == GPUs, memlock, InfiniBand, peermem, disk, ssh from the head.

A row names the node, the component, the value found, the value expected and the fix.

This file runs the checks and says the verdict (and names unreachable nodes); the rows and
shared helpers are in ``rows``, the matrix in ``matrix``, the cross-node and
cluster checks in ``cluster``.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence

from .. import _report
from .cluster import CLUSTER_CHECKS, cross_node_rows
from .known_bad import KNOWN_BAD_CHECKS
from .matrix import MATRIX_CHECKS
from .rows import ALL_NODES, FAIL, PASS, SKIP, WARN, Row, _Context, _get, _row, _text


# What a connection plugin leaves in a task result when the node is not there. The ssh plugin
# marks the result unreachable. The docker plugin does not: `docker exec` into a stopped
# container fails like a module, with the daemon's words on stderr (and Ansible then says
# "Module result deserialization failed: No start of json char found").
_CONNECTION_ERRORS = (
    "is not running", "No such container", "Cannot connect to the Docker daemon", "is paused", "is restarting",
    "Connection refused", "Connection timed out", "No route to host", "Could not resolve hostname",
    "Connection reset by peer", "Host key verification failed", "Permission denied (publickey",
)


def unreachable_error(raw: Any) -> Optional[str]:
    """The connection's last error when ``raw`` (a registered task result) says the node could
    not be reached; None when it answered (even with a failure of its own)."""
    if not isinstance(raw, Mapping):
        return None
    if raw.get("unreachable"):
        return _text(raw.get("msg")) or "no error message"
    if not raw.get("failed"):
        return None
    for key in ("module_stderr", "stderr", "msg", "module_stdout"):
        for line in str(raw.get(key) or "").splitlines():
            if any(words in line for words in _CONNECTION_ERRORS):
                return line.strip()
    return None


def describe_connection(node: str, variables: Optional[Mapping[str, Any]]) -> str:
    """How Ansible reaches ``node``, from its variables: 'ssh ops@10.0.0.5:22', 'docker container
    node3', 'local'."""
    variables = variables or {}
    plugin = _text(variables.get("ansible_connection")) or "ssh"
    short = plugin.rsplit(".", 1)[-1]
    host = _text(variables.get("ansible_host")) or node
    if short in ("docker", "docker_api", "podman"):
        return "%s container %s" % ("podman" if short == "podman" else "docker", host)
    if short == "local":
        return "local"
    if short in ("ssh", "paramiko_ssh", "paramiko", "smart"):
        user = _text(variables.get("ansible_user"))
        return "ssh %s%s:%s" % (user + "@" if user else "", host, _text(variables.get("ansible_port")) or "22")
    return "%s %s" % (plugin, host)


def _unreachable_fix(node: str, connection: str) -> str:
    if connection.startswith("docker container ") or connection.startswith("podman container "):
        engine, _word, name = connection.split(" ", 2)
        return "start the container (%s start %s), then rerun playbooks/preflight.yml" % (engine, name)
    if connection.startswith("ssh "):
        target = connection[4:]
        host, _sep, port = target.rpartition(":")
        return ("bring %s up and let Ansible in (ssh -p %s %s true must work: the machine is on, sshd listens, "
                "the key is accepted), then rerun playbooks/preflight.yml" % (node, port, host))
    return "make %s reachable over %s, then rerun playbooks/preflight.yml" % (node, connection)


# ---------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------


def run_checks(facts_by_node: Mapping[str, Any], profile: Mapping[str, Any], options: Optional[Mapping[str, Any]] = None) -> List[Row]:
    """Every preflight row for these nodes, in table order.

    ``facts_by_node`` maps node names to gpu_stack_facts (or to the module result carrying
    them, or to None for a node that gave none). ``profile`` is a ``_stack_profiles.get()``
    result. ``options``: slots, infiniband_required, gpudirect, min_free_gb, disk_paths,
    max_clock_offset_ms, ssh_reachable (see the action plugin's documentation).
    """
    ctx = _Context(facts_by_node, profile, options or {})
    rows: List[Row] = []
    for node in sorted(set(ctx.nodes) | set(ctx.missing)):
        if node in ctx.missing:
            raw = (facts_by_node or {}).get(node)
            error = unreachable_error(raw)
            if error is not None:
                connection = (ctx.options.get("connections") or {}).get(node) or describe_connection(node, None)
                rows.append(_row(
                    "facts.gathered", FAIL, node, "connection", "unreachable over %s: %s" % (connection, error),
                    "%s answers over %s" % (node, connection), _unreachable_fix(node, connection),
                ))
                continue
            rows.append(_row(
                "facts.gathered", FAIL, node, "facts", ctx.missing[node], "gpu_stack_facts from this node",
                "make %s reachable by Ansible and rerun playbooks/preflight.yml; see the gather task's "
                "error above" % node,
            ))
        else:
            errors = [str(e) for e in (_get(ctx.nodes[node], "errors") or []) if e]
            if errors:
                # The module reports what it could not read instead of failing; the affected
                # checks fail on their own, this row says why the values are missing.
                rows.append(_row(
                    "facts.gathered", WARN, node, "facts", "gathered with problems: " + "; ".join(errors),
                    "gpu_stack_facts from this node, no errors",
                    "look at the problems named on %s; the checks that depend on them say what to fix" % node,
                ))
            else:
                rows.append(_row("facts.gathered", PASS, node, "facts", "gathered", "gpu_stack_facts from this node"))
    for node_check in tuple(MATRIX_CHECKS) + tuple(KNOWN_BAD_CHECKS):
        for node, facts in ctx.nodes.items():
            row = node_check(ctx, node, facts)
            if row is not None:
                rows.append(row)
    rows.extend(cross_node_rows(ctx))
    for node_check in CLUSTER_CHECKS:
        for node, facts in ctx.nodes.items():
            row = node_check(ctx, node, facts)
            if row is not None:
                rows.append(row)
    return rows


def counts(rows: Iterable[Row]) -> Dict[str, int]:
    return _report.counts({"status": row.status} for row in rows)


def summary_line(rows: Sequence[Row], profile_name: str) -> str:
    """One line: the verdict, the counts, the nodes and the profile."""
    tally = counts(rows)
    nodes = sorted(set(row.node for row in rows if row.node != ALL_NODES))
    verdict = "FAILED" if tally[FAIL] else "passed"
    bad = sorted(set(row.node for row in rows if row.status == FAIL))
    line = "preflight %s for profile %s on %d node(s): %d failed, %d warning(s), %d passed, %d skipped" % (
        verdict, profile_name, len(nodes), tally[FAIL], tally[WARN], tally[PASS], tally[SKIP])
    if bad:
        line += "; failing: %s" % ", ".join(bad)
    lost = sorted(set(row.node for row in rows if row.check == "facts.gathered" and row.component == "connection"))
    if lost:
        line += "; unreachable: %s" % ", ".join(lost)
    return line
