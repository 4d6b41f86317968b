# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Converge by verification: which provisioning roles a node needs, and why.

A role runs on a node when any of these holds, and is skipped there otherwise:

* ``megatron_converge: full`` (every role runs, as before this existed);
* the node has no stamp of the role (never provisioned, or provisioned before stamps);
* the stamp's input digest differs from the one the controller computes now: a role variable,
  the collection (its version and the role's own files), the stack profile or, for roles that
  read the whole cluster, the members and their addresses changed;
* what the stamp recorded no longer holds: a managed file changed or is gone, a service stopped;
* a preflight check that the role answers for fails on the node: the driver, CUDA, cuDNN or NCCL
  version against the profile, a damaged venv (every distribution against pip's RECORD), the
  clock, memlock, the InfiniBand ports, ssh from the head node.

Roles that gather from every node (the cluster's ssh keys, the shared storage's head, Slurm)
run on every node when one node needs them (:data:`TOGETHER`; playbooks/provision.yml widens the
plan so).

Pure functions, no Ansible imports: the action plugin megatron_ds.cluster.converge_plan feeds
them the facts call's result and the digests it computed from the host's variables.
"""
from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .._preflight.rows import NO_GPU

FULL = "full"
VERIFY = "verify"
MODES = (VERIFY, FULL)


@dataclass(frozen=True)
class RoleSpec:
    """How the converge check treats one provisioning role."""

    name: str
    # Preflight checks (row ``check`` names, or prefixes ending in '.') whose failure on a node
    # is this role's to repair there.
    checks: Tuple[str, ...] = ()
    # The role reads other nodes (their keys, the head's exports): when one node needs it,
    # every node runs it.
    together: bool = False
    # The role writes something about every member (host entries, known_hosts, slurm.conf):
    # the members and their addresses are part of its inputs.
    cluster_inputs: bool = False
    # Variables of the role that ask for one-off work rather than describe the node (a repair
    # list, a forced reset): left out of the digest so that the next run is not a change.
    volatile: Tuple[str, ...] = ()
    # The role installs the collection's module_utils on the node (os_base's library): their
    # content is one of its inputs.
    library: bool = False


# In the order of playbooks/provision.yml.
ROLES: Tuple[RoleSpec, ...] = (
    RoleSpec("os_base", checks=("clock.sync", "memlock.unlimited"), cluster_inputs=True, library=True),
    RoleSpec("nvidia_driver", checks=("driver.version", "fabric_manager.version")),
    RoleSpec("cuda_toolkit", checks=("cuda.toolkit",)),
    RoleSpec("cudnn", checks=("cudnn.system",)),
    RoleSpec("nccl", checks=("nccl.system",)),
    RoleSpec("cluster_ssh", checks=("ssh.from_head",), together=True, cluster_inputs=True),
    RoleSpec("infiniband", checks=("infiniband.ports", "infiniband.peermem")),
    RoleSpec("python_env",
             checks=("python.", "torch.", "deepspeed.", "apex.", "packages.", "megatron_deepspeed.",
                     "cuda.nvcc_vs_torch"),
             volatile=("python_env_repair", "python_env_megatron_force")),
    RoleSpec("shared_storage", together=True, cluster_inputs=True),
    RoleSpec("slurm", together=True, cluster_inputs=True),
)
BY_NAME: Dict[str, RoleSpec] = dict((spec.name, spec) for spec in ROLES)
TOGETHER: Tuple[str, ...] = tuple(spec.name for spec in ROLES if spec.together)


def role_for_check(check: str) -> Optional[str]:
    """The role that repairs a failing preflight check, None for what no role can change (a
    missing GPU, the hostfile's slots, free disk)."""
    for spec in ROLES:
        for owned in spec.checks:
            if check == owned or (owned.endswith(".") and check.startswith(owned)):
                return spec.name
    return None


# ---------------------------------------------------------------------------------------
# Digests
# ---------------------------------------------------------------------------------------


def canonical(value: Any) -> str:
    """One text per value, whatever the order of its keys (what the digests are taken of)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)


def short_digest(value: Any) -> str:
    return hashlib.sha256(canonical(value).encode("utf-8")).hexdigest()[:16]


def role_inputs(spec: RoleSpec, variables: Mapping[str, Any], collection: Mapping[str, Any],
                cluster: Optional[Mapping[str, Any]] = None) -> "OrderedDict[str, str]":
    """``{input: digest}`` for one role on one node: each variable (volatile ones left out), the
    collection (version and the role's files), and the cluster where the role reads it."""
    inputs: "OrderedDict[str, str]" = OrderedDict()
    for name in sorted(variables):
        if name not in spec.volatile:
            inputs[name] = short_digest(variables[name])
    inputs["(collection)"] = short_digest(collection)
    if spec.cluster_inputs:
        inputs["(cluster members)"] = short_digest(cluster or {})
    return inputs


def inputs_digest(inputs: Mapping[str, str]) -> str:
    return short_digest(dict(inputs))


# ---------------------------------------------------------------------------------------
# Decisions
# ---------------------------------------------------------------------------------------


@dataclass
class Decision:
    run: bool
    reasons: List[str] = field(default_factory=list)

    def as_dict(self) -> Dict[str, Any]:
        return {"run": self.run, "reasons": list(self.reasons)}


def changed_inputs(recorded: Mapping[str, Any], now: Mapping[str, str]) -> List[str]:
    """The inputs whose digest differs between the stamp and now, added and removed ones included."""
    names = sorted(set(recorded) | set(now))
    return [name for name in names if recorded.get(name) != now.get(name)]


def decide(spec: RoleSpec, inputs: Mapping[str, str], stamp: Optional[Mapping[str, Any]],
           failing_checks: Sequence[str], mode: str = VERIFY) -> Decision:
    """Whether ``spec`` runs on a node, with every reason (none when it is skipped)."""
    if mode not in MODES:
        raise ValueError("megatron_converge is %r; expected one of %s" % (mode, ", ".join(MODES)))
    reasons: List[str] = []
    if mode == FULL:
        reasons.append("megatron_converge: full")
    if not isinstance(stamp, Mapping):
        reasons.append("no stamp: never provisioned by this collection")
    else:
        if stamp.get("digest") != inputs_digest(inputs):
            changed = changed_inputs(stamp.get("inputs") or {}, inputs)
            shown = ", ".join(changed[:6]) + (" and %d more" % (len(changed) - 6) if len(changed) > 6 else "")
            reasons.append("inputs changed: " + (shown or "the stamp predates input lists"))
        reasons.extend(str(problem) for problem in stamp.get("problems") or [])
    reasons.extend("preflight %s fails" % check for check in failing_checks)
    return Decision(bool(reasons), reasons)


def failing_checks_by_role(rows: Iterable[Mapping[str, Any]]) -> Dict[str, List[str]]:
    """The failing preflight rows of one node, grouped by the role that repairs them.

    A driver row that fails because the node's PCI bus holds no NVIDIA GPU is left out: no
    reinstall loads a driver there, so re-running the role on every converge would only cost time.
    """
    owned: Dict[str, List[str]] = {}
    for row in rows:
        if row.get("status") != "fail" or row.get("found") == NO_GPU:
            continue
        role = role_for_check(str(row.get("check")))
        if role and row["check"] not in owned.setdefault(role, []):
            owned[role].append(str(row["check"]))
    return owned


def plan_node(roles: Sequence[str], inputs_by_role: Mapping[str, Mapping[str, str]],
              stamps: Mapping[str, Any], rows: Iterable[Mapping[str, Any]],
              mode: str = VERIFY) -> "OrderedDict[str, Decision]":
    """One decision per role of ``roles`` (in that order) for one node."""
    failing = failing_checks_by_role(rows)
    plan: "OrderedDict[str, Decision]" = OrderedDict()
    for name in roles:
        spec = BY_NAME.get(name)
        if spec is None:
            raise ValueError("megatron_converge_roles names %r, which is not a provisioning role; known: %s"
                             % (name, ", ".join(BY_NAME)))
        plan[name] = decide(spec, inputs_by_role[name], (stamps or {}).get(name), failing.get(name, []), mode)
    return plan


# ---------------------------------------------------------------------------------------
# Repairs the facts call can name
# ---------------------------------------------------------------------------------------


def _version_spec(name: str, version: Optional[str]) -> Optional[str]:
    if not name or not version:
        return None
    return "%s==%s" % (name, str(version).split("+", maxsplit=1)[0] if name == "deepspeed" else version)


def venv_repairs(facts: Mapping[str, Any], torch_spec: str = "", deepspeed_spec: str = "") -> List[str]:
    """The pip requirements to reinstall (``--force-reinstall --no-deps``) into the venv: every
    distribution whose files differ from pip's RECORD, torch and DeepSpeed by their pinned specs.

    A distribution that python_env's constraints file pins (the facts' ``packages.pins``) is named
    at its pin, not at the version the facts found: the role's main install has put the pin back by
    the time the repair runs, and a reinstall of the drifted version would contradict the
    constraints pip is given (issue 40: ``numpy==2.1.3`` against a pin of 2.2.6 failed the run)."""
    specs: List[str] = []
    pinned = (facts.get("packages") or {}).get("pins") if isinstance(facts.get("packages"), Mapping) else None
    pins = pinned.get("pins") if isinstance(pinned, Mapping) and isinstance(pinned.get("pins"), Mapping) else {}

    def bad(section: str) -> bool:
        files = (facts.get(section) or {}).get("files") if isinstance(facts.get(section), Mapping) else None
        return isinstance(files, Mapping) and bool((files.get("bad_count") or 0) > 0 or files.get("bad"))

    def at_pin(name: str, version: Optional[str]) -> Optional[str]:
        return _version_spec(name, pins.get(name) or version)

    if bad("torch"):
        specs.append(torch_spec or at_pin("torch", (facts.get("torch") or {}).get("version")) or "torch")
    if bad("deepspeed"):
        specs.append(deepspeed_spec or at_pin("deepspeed", (facts.get("deepspeed") or {}).get("version")) or "deepspeed")
    packages = facts.get("packages") if isinstance(facts.get("packages"), Mapping) else {}
    files = packages.get("files") if isinstance(packages.get("files"), Mapping) else {}
    for item in files.get("bad_distributions") or []:
        name, _sep, version = str(item).partition("==")
        spec = (at_pin(name, version) or str(item)) if name in pins else str(item)
        if spec not in specs:
            specs.append(spec)
    return specs


def plan_lines(node: str, plan: Mapping[str, Decision]) -> List[str]:
    """The plan of one node as text, one line per role: what ``--check --diff`` prints."""
    lines = []
    for role, decision in plan.items():
        if decision.run:
            lines.append("%s: %s runs: %s" % (node, role, "; ".join(decision.reasons)))
        else:
            lines.append("%s: %s converged (stamp and health checks pass)" % (node, role))
    return lines
