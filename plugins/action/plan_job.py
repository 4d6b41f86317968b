# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side layout planner: a thin adapter around ``_job.plan`` (which judges each layout
with the job validation's rules and memory estimate). It touches no host. Documentation lives
in plugins/modules/plan_job.py."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_text
from ansible.plugins.action import ActionBase

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import plan as _job_plan
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import gpu_arch as _gpu_arch
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles
from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _job_inputs

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = {
    "spec": {"type": "dict"},
    "nodes": {"type": "int"},
    "gpus_per_node": {"type": "int"},
    "gpu_memory_mib": {"type": "int"},
    "gpu": {"type": "str"},
    "matmul_tflops": {"type": "float"},
    "peak_tflops": {"type": "float"},
    "nvlink_busbw_gbps": {"type": "float"},
    "internode_busbw_gbps": {"type": "float"},
    "padded_vocab_size": {"type": "int"},
    "keep": {"type": "dict"},
    "burnin_report": {"type": "path"},
    "limit": {"type": "int", "default": 15},
    "dest": {"type": "path"},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Optional[str] = None, task_vars: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp
        validation, args = self.validate_argument_spec(argument_spec=ARGUMENT_SPEC)
        del validation
        profile = _job_inputs.template_var(task_vars, self._templar.template, "megatron_stack_profile")
        try:
            spec = _job_inputs.spec_from_vars(args["spec"], task_vars, self._templar.template, profile)[1]
        except _job_inputs.JobInputError as exc:
            raise AnsibleActionFail(str(exc)) from None
        nodes, nodes_from = _job_inputs.node_count(args["nodes"], None, task_vars)
        fact_gpus, fact_memory = _job_inputs.gpu_facts(task_vars)
        gpus = args["gpus_per_node"] or fact_gpus or spec["gpus_per_node"]
        if not nodes:
            raise AnsibleActionFail("planner: the number of nodes is unknown; put the training nodes in the "
                                    "inventory group megatron_nodes, or pass nodes=")
        # Never a GPU assumed: the argument, the inventory's megatron_gpu_model, or the facts.
        gpu, gpu_from = args["gpu"], "gpu argument"
        if not gpu:
            try:
                gpu, gpu_from = _job_inputs.gpu_model(task_vars, self._templar.template)
            except _job_inputs.JobInputError as exc:
                raise AnsibleActionFail("planner: %s" % exc) from None
        if not gpu:
            raise AnsibleActionFail(
                "planner: the GPU model is unknown (%s): set megatron_gpu_model in the inventory (one of %s), run "
                "playbooks/preflight.yml once so that the facts cache names the nodes' GPUs, or pass gpu= "
                "(plan.yml: -e plan_gpu=A100-80GB)" % (gpu_from, ", ".join(sorted(_job_plan.GPUS))))
        # A layout of a stack that has no code for the GPU would be a plan for a job that cannot start.
        # Only a GPU the planner knows: its own error names the others.
        capability = _gpu_arch.capability_of(gpu) if _job_plan.gpu_key(gpu) else None
        if capability and spec["stack_profile"] in _stack_profiles.PROFILES:
            refusal = _gpu_arch.refusal(spec["stack_profile"], gpu, capability)
            if refusal:
                raise AnsibleActionFail("planner: %s (the GPU from %s)" % (refusal, gpu_from))
        rates = {k: args[k] for k in ("matmul_tflops", "peak_tflops", "nvlink_busbw_gbps", "internode_busbw_gbps")}
        calibrated = None
        if args["burnin_report"] and os.path.isfile(args["burnin_report"]):
            try:
                with open(args["burnin_report"]) as handle:
                    report = json.load(handle)
            except (OSError, ValueError) as exc:
                raise AnsibleActionFail("planner: cannot read the burn-in report %s (%s); run burnin.yml again, "
                                        "or pass burnin_report=''" % (args["burnin_report"], exc))
            measured, calibrated = _job_plan.burnin_rates(report, args["burnin_report"])
            # What the task passes explicitly wins over what the burn-in measured.
            rates = dict(measured, **{k: v for k, v in rates.items() if v is not None})
        try:
            deepspeed_version = _stack_profiles.deepspeed_pin(spec["stack_profile"])
            planned = _job_plan.plan(spec, nodes, gpus, args["gpu_memory_mib"] or fact_memory, gpu, rates,
                                     args["keep"], deepspeed_version, args["padded_vocab_size"])
        except (_job_schema.JobError, _stack_profiles.UnknownProfileError) as exc:
            raise AnsibleActionFail("planner: %s" % (exc.args[0] if exc.args else exc))
        lines = ["%s (%s), %d node(s) x %d; %s" % (gpu, gpu_from, nodes, gpus, _job_plan.uncertainty(gpu))] \
            + ([calibrated] if calibrated else []) + _job_plan.table(planned, args["limit"])
        fits = [row for row in planned["layouts"] if row["fits"]]
        chosen = fits[0] if fits else None
        result["table"] = lines
        result["hardware"] = planned["hardware"]
        result["rejected"] = planned["rejected"]
        result["refused_by"] = planned["refused_by"]
        result["layouts"] = [{k: v for k, v in row.items() if k != "spec"} for row in planned["layouts"][:args["limit"]]]
        result["nodes"] = nodes
        result["nodes_from"] = nodes_from
        result["gpus_per_node"] = gpus
        result["gpu"] = gpu
        result["gpu_from"] = gpu_from
        result["calibration"] = calibrated
        result["changed"] = False
        if chosen is None:
            result["failed"] = True
            # The first line says why: the rule that refused every layout, with its fix, before the table.
            result["msg"] = "%s:\n%s" % (_job_plan.refusal(planned, nodes, gpus), "\n".join(lines))
            return result
        chosen_vars = _job_plan.layout_vars(chosen)
        result["chosen"] = chosen_vars
        result["yaml"] = self._yaml(chosen, chosen_vars)
        result["prediction"] = _job_plan.prediction(chosen, nodes * gpus, gpu, calibrated)
        if args["dest"] and not self._task.check_mode:
            # The YAML for the inventory, and beside it what status.yml compares the running job with.
            sidecar = os.path.splitext(args["dest"])[0] + ".prediction.json"
            for path, text in ((args["dest"], result["yaml"]),
                               (sidecar, json.dumps(result["prediction"], indent=1, sort_keys=True) + "\n")):
                try:
                    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
                    previous = open(path).read() if os.path.isfile(path) else None
                    if previous != text:
                        with open(path, "w") as handle:
                            handle.write(text)
                        result["changed"] = True
                except OSError as exc:
                    raise AnsibleActionFail("planner: cannot write %s (%s); give a writable dest" % (path, exc))
            result["dest"] = args["dest"]
            result["prediction_file"] = sidecar
        result["msg"] = "\n".join(lines + ["chosen: %s (%s)" % (_job_plan.describe(chosen), ", ".join(
            "%s: %s" % (k, to_text(v)) for k, v in chosen_vars.items()))])
        return result

    @staticmethod
    def _yaml(row: Dict[str, Any], chosen_vars: Dict[str, Any]) -> str:
        lines = ["---", "# Written by playbooks/plan.yml: %s, predicted %.1f GiB per GPU (%.0f%%), %s tokens/s, "
                 "%.1f%% MFU" % (_job_plan.describe(row), row["memory_gib"], 100 * row["memory_fraction"],
                                 "{:,.0f}".format(row["tokens_per_s"]), 100 * row["mfu"])]
        for key, value in chosen_vars.items():
            lines.append("%s: %s" % (key, "true" if value is True else "false" if value is False else value))
        return "\n".join(lines) + "\n"
