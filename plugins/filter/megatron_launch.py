# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the megatron_launch role: launch checks, burn-in report, checkpoint shape.

The logic lives in module_utils/_launch/; each filter is a thin adapter.

* ``rank_pattern(script)``: the pgrep/pkill -f regex of the script's rank processes.
* ``data_files(data_path)``: the .bin/.idx files of Megatron's --data-path.
* ``required_files(paths, what, fix)``: paths as prelaunch_problems' ``required`` entries.
* ``prelaunch_problems(probes, required, ssh, head, script, user)``: every reason not to start.
* ``burnin_report(results, nodes, ranks_per_node, threshold)`` and ``burnin_table(report)``.
* ``perftest_result(stdout)``, ``fabric_summary(pairs, min_gbps)`` and ``fabric_lines(summary)``: the
  fabric check's ib_write_bw figures (the infiniband role's fabric_check, which the burn-in runs first);
  ``fabric_check_wanted(mode, local_facts, key)``: whether the burn-in runs it;
  ``fabric_tested_port(role_facts)`` and ``fabric_link_threshold(ends, fraction, override)``: the port a
  node's check tests and a pair's minimum from both ends' rates (_fabric.thresholds, as a dict);
  ``fabric_burnin_gate(results, node_facts, fraction, override)``: the burn-in's all-reduce gate (_fabric.gate);
  ``fabric_bisect_round``, ``fabric_round_results``, ``fabric_round_limit`` and ``fabric_verdict``: the
  bisection's rounds (tasks/fabric_gate.yml) and its verdict (_fabric.gate, _fabric.verdict).
* ``checkpoint_shape(files)``: TP/PP/DP of a DeepSpeed checkpoint tag from its file names.
* ``checkpoint_step(tag)``: global_stepN -> N.
* ``checkpoint_judge(names, path, tag, expect, profile, no_pipeline_parallel)``: a resume's one
  judgement of a tag, from the union of its file names on every node (_job.rules_features.judge_resume).
* ``checkpoint_expect(job_vars, nodes)``: the checkpoint shape the inventory's job variables declare
  (_checkpoint.expect_from_job).
* ``checkpoint_lacking(checkpoints, tag)``: the nodes that lack part of a checkpoint tag.
* ``ssh_sweep(lines, addresses)``: the head node's ssh sweep, by node.
* ``upstream_request(spec, megatron_dir=, workdir=)`` and ``upstream_verdict(stdout)``: the request
  the upstream oracle (module_utils/_mds/oracle.py) runs on the head node, and its verdict
  (_job.upstream).
* ``job_status(probes, head, rank0, record)`` and ``status_lines(status)``: status.yml's report.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Dict

from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.module_utils import _checkpoint
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import burnin as _launch_burnin
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import checkpoints as _launch_checkpoints
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import fabric as _launch_fabric
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import prelaunch as _launch_prelaunch
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import processes as _launch_processes
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import status as _launch_status
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import plan as _job_plan
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules_features as _job_rules_features
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import upstream as _job_upstream
from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import gate as _fabric_gate
from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import bisect as _fabric_bisect
from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import thresholds as _fabric_thresholds
from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import verdict as _fabric_verdict


def _link_threshold(ends: Any, fraction: float = _fabric_thresholds.DEFAULT_PORT_FRACTION,
                    override: Any = None) -> Dict[str, Any]:
    """_fabric.thresholds.link_threshold as a dict: Jinja and the JSON report cannot read a tuple's names."""
    return _fabric_thresholds.link_threshold(ends, fraction, override).as_dict()


def _adapt(func: Callable[..., Any], name: str) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (ValueError, TypeError, KeyError) as exc:
            raise AnsibleFilterError("megatron_ds.cluster.%s: %s" % (name, exc)) from exc

    wrapper.__name__ = name
    wrapper.__doc__ = func.__doc__
    return wrapper


def _verdict(nodes: Any, results: Any) -> Dict[str, Any]:
    """_fabric.verdict.build, stamped now (UTC): the stamp is what the supervisor acts on once."""
    epoch = time.time()
    return _fabric_verdict.build(list(nodes), list(results),
                                 time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch)), round(epoch, 3))


class FilterModule:
    """Launch filters of megatron_ds.cluster."""

    def filters(self) -> Dict[str, Callable[..., Any]]:
        table = {
            "rank_pattern": _launch_processes.rank_pattern,
            "data_files": _launch_prelaunch.data_files,
            "required_files": _launch_prelaunch.required_files,
            "prelaunch_problems": _launch_prelaunch.prelaunch_problems,
            "burnin_report": _launch_burnin.burnin_report,
            "burnin_table": _launch_burnin.burnin_table,
            "perftest_result": _launch_fabric.perftest_result,
            "fabric_summary": _launch_fabric.fabric_summary,
            "fabric_lines": _launch_fabric.fabric_lines,
            "fabric_check_wanted": _launch_fabric.fabric_check_wanted,
            "fabric_tested_port": _launch_fabric.tested_port,
            "fabric_link_threshold": _link_threshold,
            "fabric_burnin_gate": _fabric_gate.burnin_gate,
            "fabric_bisect_round": _fabric_gate.bisect_round,
            "fabric_round_results": _fabric_gate.round_results,
            "fabric_round_limit": _fabric_bisect.link_round_bound,
            "fabric_verdict": _verdict,
            "checkpoint_shape": _launch_checkpoints.checkpoint_shape,
            "checkpoint_step": _launch_checkpoints.step_of,
            "checkpoint_judge": _job_rules_features.judge_resume,
            "checkpoint_expect": _checkpoint.expect_from_job,
            "checkpoint_lacking": _launch_prelaunch.checkpoint_lacking,
            "ssh_sweep": _launch_prelaunch.parse_ssh_sweep,
            "upstream_request": _job_upstream.encoded_request,
            "upstream_verdict": _job_upstream.verdict,
            "job_status": _launch_status.job_status,
            "status_lines": _launch_status.status_lines,
            "plan_against": _job_plan.against,
        }
        return {name: _adapt(func, name) for name, func in table.items()}
