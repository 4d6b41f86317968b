# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Action plugin for megatron_ds.cluster.preflight (documentation in plugins/modules/preflight.py).

A thin adapter: it validates the arguments, collects every node's gpu_stack_facts, and hands
them to the pure checks in module_utils/_preflight/gate.py. It runs on the controller only and
touches no host.
"""
from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Optional

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import gate as _preflight
from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import cluster as _preflight_cluster
from ansible_collections.megatron_ds.cluster.plugins.module_utils import _report
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles

display = Display()
# Ansible's YAML result format prints msg as a block indented by 8 columns (the task result's
# keys by 4, the block under them by 4 more): the lines leave that much of the terminal free.
MSG_INDENT = 8

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = {
    "profile": {"type": "str", "required": True},
    "facts": {"type": "dict"},
    "slots": {"type": "dict"},
    "infiniband_required": {"type": "bool", "default": False},
    "gpudirect": {"type": "bool", "default": False},
    "memlock": {"type": "str", "default": "auto", "choices": list(_preflight_cluster.MEMLOCK_MODES)},
    "clock": {"type": "str", "default": "required", "choices": list(_preflight_cluster.CLOCK_MODES)},
    "megatron_checkout": {"type": "bool", "default": True},
    "min_free_gb": {"type": "float"},
    "disk_paths": {"type": "list", "elements": "str"},
    "max_clock_offset_ms": {"type": "float", "default": _preflight_cluster.DEFAULT_MAX_CLOCK_OFFSET_MS},
    "allowed_unowned": {"type": "list", "elements": "str", "default": []},
    "ssh_reachable": {"type": "dict"},
    "ssh_memlock": {"type": "dict"},
    "fail_on_warn": {"type": "bool", "default": False},
    "driver_lifecycle_date": {"type": "str"},
    "report_dir": {"type": "path"},
    "connections": {"type": "dict"},
}


def facts_from_hostvars(hostvars: Mapping[str, Any], hosts: Iterable[str]) -> Dict[str, Any]:
    """node -> gpu_stack_facts for ``hosts``, None where a host has none.

    The module returns its facts as ``ansible_facts.gpu_stack_facts``; Ansible exposes them
    as ``hostvars[h].gpu_stack_facts`` (INJECT_FACTS_AS_VARS) and always under
    ``hostvars[h].ansible_facts``, so read both.
    """
    collected: Dict[str, Any] = {}
    for host in hosts:
        try:
            hostvars_of = hostvars[host]
        except KeyError:
            collected[host] = None
            continue
        facts = hostvars_of.get("gpu_stack_facts")
        if not isinstance(facts, Mapping):
            ansible_facts = hostvars_of.get("ansible_facts")
            facts = ansible_facts.get("gpu_stack_facts") if isinstance(ansible_facts, Mapping) else None
        collected[host] = facts if isinstance(facts, Mapping) else None
    return collected


def connections_from_hostvars(hostvars: Mapping[str, Any], hosts: Iterable[str]) -> Dict[str, str]:
    """node -> how Ansible reaches it ('ssh ops@10.0.0.5:22', 'docker container node3'), from
    each node's ansible_connection, ansible_host, ansible_port and ansible_user."""
    described: Dict[str, str] = {}
    for host in hosts:
        try:
            variables = hostvars[host]
            names = ("ansible_connection", "ansible_host", "ansible_port", "ansible_user")
            described[host] = _preflight.describe_connection(host, dict((name, variables.get(name)) for name in names))
        except Exception:  # a variable that does not template must not hide the verdict
            described[host] = _preflight.describe_connection(host, None)
    return described


def _check_slots(slots: Optional[Mapping[str, Any]]) -> Optional[Dict[str, int]]:
    if slots is None:
        return None
    checked: Dict[str, int] = {}
    for node, value in slots.items():
        try:
            if isinstance(value, bool):
                raise ValueError
            number = int(value)
            if number < 0 or str(number) != str(value).strip():
                raise ValueError
        except (TypeError, ValueError):
            raise AnsibleActionFail(
                "preflight: slots for %s is %r; give the hostfile slots (GPUs) per node as whole "
                "numbers, for example {%s: 8}" % (node, value, node)
            )
        checked[str(node)] = number
    return checked


def _check_facts(facts: Mapping[str, Any]) -> Dict[str, Any]:
    for node, value in facts.items():
        if value is not None and not isinstance(value, Mapping):
            raise AnsibleActionFail(
                "preflight: facts for %s is a %s; pass one gpu_stack_facts dictionary (or the "
                "registered gpu_stack_facts result) per node" % (node, type(value).__name__)
            )
    return dict(facts)


class ActionModule(ActionBase):
    """Check every node's software against the stack profile and against each other."""

    TRANSFERS_FILES = False
    _requires_connection = False

    def run(self, tmp: Optional[str] = None, task_vars: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        task_vars = task_vars or {}
        result = super(ActionModule, self).run(tmp, task_vars)
        del tmp  # tmp no longer has any effect

        dummy, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)

        if not args["profile"].strip():
            # _stack_profiles.get() would fall back to the default profile; a gate must not guess.
            raise AnsibleActionFail(
                "preflight: profile is empty; set megatron_stack_profile to one of %s" % ", ".join(_stack_profiles.names())
            )
        try:
            profile = _stack_profiles.get(args["profile"])
        except _stack_profiles.UnknownProfileError as exc:
            raise AnsibleActionFail("preflight: %s" % exc.args[0])

        if args["facts"] is not None:
            facts = _check_facts(args["facts"])
        else:
            hosts = task_vars.get("ansible_play_hosts_all") or []
            facts = facts_from_hostvars(task_vars.get("hostvars") or {}, hosts)
        if not facts:
            raise AnsibleActionFail(
                "preflight: no nodes to check; run it in a play over megatron_nodes after "
                "megatron_ds.cluster.gpu_stack_facts, or pass facts: {node: gpu_stack_facts}"
            )
        if args["min_free_gb"] is not None and args["min_free_gb"] < 0:
            raise AnsibleActionFail("preflight: min_free_gb is %s; give a number of gigabytes >= 0" % args["min_free_gb"])
        if args["max_clock_offset_ms"] <= 0:
            raise AnsibleActionFail(
                "preflight: max_clock_offset_ms is %s; give a positive number of milliseconds (default %g)"
                % (args["max_clock_offset_ms"], _preflight_cluster.DEFAULT_MAX_CLOCK_OFFSET_MS)
            )

        options = {
            "slots": _check_slots(args["slots"]),
            "infiniband_required": args["infiniband_required"],
            "gpudirect": args["gpudirect"],
            "memlock": args["memlock"],
            "clock": args["clock"],
            "megatron_checkout": args["megatron_checkout"],
            "min_free_gb": args["min_free_gb"],
            "disk_paths": args["disk_paths"],
            "max_clock_offset_ms": args["max_clock_offset_ms"],
            "allowed_unowned": list(args["allowed_unowned"] or []),
            "today": args["driver_lifecycle_date"],
            "ssh_reachable": dict(args["ssh_reachable"]) if args["ssh_reachable"] is not None else None,
            "ssh_memlock": dict(args["ssh_memlock"]) if args["ssh_memlock"] is not None else None,
            # Named in the row of a node that could not be reached.
            "connections": args["connections"] if args["connections"] is not None else connections_from_hostvars(
                task_vars.get("hostvars") or {}, list(facts)),
        }
        rows = _preflight.run_checks(facts, profile, options)
        tally = _preflight.counts(rows)
        failing = bool(tally[_preflight.FAIL] or (args["fail_on_warn"] and tally[_preflight.WARN]))
        summary = _preflight.summary_line(rows, profile["name"])
        if failing and not tally[_preflight.FAIL]:
            summary += " (fail_on_warn is true)"
        report = write_report(args["report_dir"] or _report.DEFAULT_DIR, [row.as_dict() for row in rows], summary, profile["name"])
        summary += "; report: %s" % report["text"] if report.get("text") else "; no report: %s" % report["error"]

        result.update(
            changed=False,
            profile=profile["name"],
            summary=tally,
            failures=tally[_preflight.FAIL],
            report=report,
            # One wrapped line per failure and warning, pass and skip lines with -v, the verdict
            # last. Every row is in the report files, not in the result: Ansible prints a failed
            # task's whole result, and the rows would be printed a second time.
            msg=_report.render([row.as_dict() for row in rows], summary, display.verbosity,
                               _report.terminal_width(MSG_INDENT)),
        )
        # The verdict is the point of the task: show it on success too, as assert does.
        result["_ansible_verbose_always"] = True
        if failing:
            result["failed"] = True
        return result


def write_report(directory: str, rows: List[Dict[str, str]], summary: str, profile: str) -> Dict[str, Optional[str]]:
    """The report files on the controller: {text, json} paths, or {error} when they cannot be
    written (the verdict still stands; the summary line says why there is no file)."""
    try:
        text, data = _report.write(directory, "preflight", rows, summary, {"profile": profile})
    except OSError as exc:
        return {"text": None, "json": None,
                "error": "cannot write to %s (%s); set preflight_report_dir to a writable directory" % (directory, exc)}
    return {"text": text, "json": data, "error": None}
