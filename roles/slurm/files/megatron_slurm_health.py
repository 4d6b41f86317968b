# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm HealthCheckProgram of megatron_ds.cluster (installed by the slurm role).

Gathers this node's facts with the collection's gpu_stack_facts collector, judges them with the
preflight's per-node checks against the stack profile and reads the fabric gate's verdict (the
file playbooks/fabric_check.yml writes: a node it named fails with its all-reduce measured
against expected), and drains the node with the first failure as the reason (resumes it once healthy, if it drained it). The logic lives in the
collection's module_utils (_slurm/health.py), which os_base's library entry point installs. slurm.conf's HealthCheckProgram is a
/bin/sh wrapper, megatron-slurm-health, that runs this file with /usr/bin/python3.

  megatron-slurm-health [--config FILE] [--library DIR] [--dry-run]

Exit status: 0 healthy, 1 a check failed, 2 the health check itself could not run.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

# os_base's library (tasks_from: library): the collection's module_utils, unpacked on the node.
LIBRARY = "/usr/local/lib/megatron-ds"
CONFIG = "/etc/megatron/slurm-health.json"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=CONFIG)
    parser.add_argument("--library", default=LIBRARY)
    parser.add_argument("--dry-run", action="store_true", help="judge and print, change no node state")
    args = parser.parse_args()
    sys.path.insert(0, args.library)
    # pylint: disable=import-outside-toplevel
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import collect as _gpu_facts
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import verdict as _fabric_verdict
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._slurm import health as _slurm_health
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles

    with open(args.config, encoding="utf-8") as handle:
        config = json.load(handle)
    node = config["node"]
    venv = config.get("venv") or None
    facts = _gpu_facts.collect(_gpu_facts.Host(timeout=float(config.get("timeout", 30))), venv=venv,
                               megatron_dir=config.get("megatron_dir") or None)
    try:
        fabric = _fabric_verdict.read(config.get("fabric_verdict") or "")
    except (OSError, ValueError) as error:
        # A verdict that cannot be read drains nothing (it names nobody) and changes no state.
        print("%s: %s" % (_slurm_health.REASON_PREFIX, error))
        return 2
    rows = _slurm_health.node_rows(node, facts, _stack_profiles.get(config["profile"]), int(config.get("gpus", 0)),
                                   with_venv=bool(venv), exclude=config.get("exclude", []), fabric=fabric)
    failed = _slurm_health.failures(rows)
    shown = subprocess.run(["scontrol", "show", "node", "-o", node], capture_output=True, text=True, timeout=30,
                           check=False)
    if shown.returncode != 0:
        print("%s: `scontrol show node %s` failed: %s" % (_slurm_health.REASON_PREFIX, node, shown.stderr.strip()))
        return 2
    flags, reason = _slurm_health.parse_node_state(shown.stdout)
    action, new_reason = _slurm_health.decide(flags, reason, failed)
    print(_slurm_health.summary(node, rows, action + (" (dry run)" if args.dry_run else "")))
    argv = _slurm_health.scontrol_argv(action, node, new_reason)
    if argv and not args.dry_run:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        if done.returncode != 0:
            print("%s: %s failed: %s" % (_slurm_health.REASON_PREFIX, " ".join(argv), done.stderr.strip()))
            return 2
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
