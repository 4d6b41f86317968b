# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side job validation: a thin adapter around the job package of module_utils
(``_job.spec`` reads the spec, ``_job.script`` an existing train.sh, ``_job.files`` a hostfile
and a ds_config.json, ``_job.rules`` judges them).

It reads files on the controller only (train.sh, ds_config.json, hostfile) and touches no
host. Documentation lives in plugins/modules/validate_job.py.
"""
from __future__ import annotations

import contextlib
import os
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import files as _job_files
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import findings as _job_findings
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import upstream as _job_upstream
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import oracle as _mds_oracle
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import plan as _job_plan
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules as _job_rules
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import script as _job_script
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import args as _mds_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils import _report
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles
from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _job_inputs

# Ansible prints msg as a block indented by 8 columns (see the preflight action).
MSG_INDENT = 8

ARGUMENT_SPEC: Dict[str, Dict[str, Any]] = {
    "spec": {"type": "dict"},
    "script": {"type": "path"},
    "ds_config_file": {"type": "path"},
    "hostfile": {"type": "path"},
    "nodes": {"type": "int"},
    "gpus_per_node": {"type": "int"},
    "gpu_memory_mib": {"type": "int"},
    "resume_tp": {"type": "int"},
    "resume_pp": {"type": "int"},
    "resume_no_pipeline_parallel": {"type": "bool"},
    "deepspeed_version": {"type": "str"},
    "stack_profile": {"type": "str"},
    "fail_on_error": {"type": "bool", "default": True},
    "report_dir": {"type": "path"},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Optional[str] = None, task_vars: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        task_vars = task_vars or {}
        result = super().run(tmp, task_vars)
        del tmp  # no remote temp files: this action never touches a host

        validation, args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC,
            required_together=[("resume_tp", "resume_pp")],
        )
        del validation

        profile_name = args["stack_profile"] or self._var(task_vars, "megatron_stack_profile")
        deepspeed_version = args["deepspeed_version"] or self._profile_deepspeed(profile_name)
        try:
            era = _mds_args.era_for_deepspeed(deepspeed_version)
        except ValueError as exc:
            raise AnsibleActionFail(
                "deepspeed_version: found %r, expected a version such as 0.9.2 or 0.19.6 (%s)"
                % (deepspeed_version, exc)
            )

        notes: List[str] = []
        script = None
        ds_config: Optional[Dict[str, Any]] = None
        # The job files to judge instead of the spec: the options, else the inventory's (or -e)
        # megatron_job_script / _ds_config_file / _hostfile, as validate.yml documents them.
        given_script = args["script"] or self._var(task_vars, "megatron_job_script")
        ds_config_file = args["ds_config_file"] or self._var(task_vars, "megatron_job_ds_config_file")
        hostfile = args["hostfile"] or self._var(task_vars, "megatron_job_hostfile")
        spec_vars: Dict[str, Any] = {}

        if given_script:
            script_path = self._resolve(given_script, "script")
            script = _job_script.parse_train_script(self._read(script_path, "script"), era=era)
            spec = script["spec"]
            # train.sh does not name its stack profile: the profile's rules (flash attention
            # required on cu130) come from stack_profile / megatron_stack_profile.
            spec["stack_profile"] = profile_name or _stack_profiles.DEFAULT_PROFILE
            base = os.path.dirname(script_path)
            if not ds_config_file and script.get("deepspeed_config"):
                candidate = os.path.join(base, script["deepspeed_config"])
                if os.path.isfile(candidate):
                    ds_config_file = candidate
                    notes.append("ds_config from the script's --deepspeed_config: %s" % candidate)
            launcher_hostfile = (script.get("launcher") or {}).get("hostfile")
            if not hostfile and launcher_hostfile:
                candidate = os.path.join(base, launcher_hostfile)
                if os.path.isfile(candidate):
                    hostfile = candidate
                    notes.append("hostfile from the script's --hostfile: %s" % candidate)
        else:
            spec_vars, spec = self._spec_from_vars(args["spec"], task_vars, profile_name)
            if not args["deepspeed_version"] and spec["stack_profile"] != profile_name:
                # The spec names its own profile (megatron_job_stack_profile): its pin and its
                # Megatron-DeepSpeed era are what the job files are rendered for.
                deepspeed_version = self._profile_deepspeed(spec["stack_profile"])
                era = _mds_args.era_for_deepspeed(deepspeed_version)

        if ds_config_file:
            path = self._resolve(ds_config_file, "ds_config_file")
            try:
                ds_config, duplicates = _job_files.load_ds_config(self._read(path, "ds_config_file"))
            except _job_files.DsConfigError as exc:
                raise AnsibleActionFail("ds_config_file %s: %s; fix the JSON" % (path, exc))
            if duplicates:
                notes.append(
                    "ds_config %s repeats %s: Megatron-DeepSpeed keeps the last value"
                    % (path, ", ".join(sorted(set(duplicates))))
                )
            ds_config_file = path

        hosts = None
        if hostfile:
            path = self._resolve(hostfile, "hostfile")
            try:
                hosts = _job_files.parse_hostfile(self._read(path, "hostfile"))
            except _job_files.HostfileError as exc:
                raise AnsibleActionFail("hostfile %s: DeepSpeed would refuse it: %s" % (path, exc))
            hostfile = path

        nodes, nodes_from = _job_inputs.node_count(args["nodes"], hosts, task_vars, script)
        fact_gpus, fact_memory = _job_inputs.gpu_facts(task_vars)
        if args["gpu_memory_mib"] is None and fact_memory:
            notes.append("GPU memory from gpu_stack_facts: %s MiB (the smallest GPU)" % fact_memory)
        elif args["gpu_memory_mib"] is None:
            # The inventory's megatron_gpu_model, the same source the planner uses.
            try:
                model, model_from = _job_inputs.gpu_model(task_vars, self._templar.template)
            except _job_inputs.JobInputError as exc:
                raise AnsibleActionFail(str(exc)) from None
            if model:
                fact_memory = int(_job_plan.GPUS[model]["memory_mib"])
                notes.append("GPU memory from %s %s: %s MiB" % (model_from, model, fact_memory))
        if args["gpus_per_node"] is None and not hosts and fact_gpus:
            notes.append("GPUs per node from gpu_stack_facts: %s (the smallest node)" % fact_gpus)
        cluster = {
            "nodes": nodes,
            "gpus_per_node": args["gpus_per_node"] or (None if hosts else fact_gpus),
            "gpu_memory_mib": args["gpu_memory_mib"] or fact_memory,
            "hosts": dict(hosts) if hosts else None,
        }
        resume = None
        if args["resume_tp"] is not None:
            resume = {"tp": args["resume_tp"], "pp": args["resume_pp"]}
            if args["resume_no_pipeline_parallel"] is not None:
                resume["no_pipeline_parallel"] = args["resume_no_pipeline_parallel"]

        findings = _job_rules.validate(spec, ds_config, cluster, resume, deepspeed_version, script=script)
        gpus = cluster["gpus_per_node"] or (min(hosts.values()) if hosts else None) or spec.get("gpus_per_node")
        upstream_findings, upstream_note = self._upstream(spec, script, ds_config, nodes, gpus,
                                                          os.path.dirname(script_path) if script else None)
        findings.extend(upstream_findings)
        if upstream_note:
            notes.append(upstream_note)
        for key in _job_schema.unknown_keys(spec_vars):
            findings.insert(0, _job_findings.finding(
                "%s is a job spec variable" % key, "warn", "spec", key, "a megatron_job_* variable of the megatron_job role",
                "not a job spec variable, so it has no effect; check the spelling against "
                "roles/megatron_job/defaults/main.yml",
            ))
        failures = _job_findings.failed(findings)
        tally = _report.counts(findings)
        if failures:
            summary = ("Job validation failed: %d check(s) would stop Megatron-DeepSpeed or DeepSpeed, or break "
                       "the plan; %d failed, %d warning(s), %d passed" % (len(failures), tally["fail"], tally["warn"], tally["pass"]))
        else:
            summary = "Job validation passed: 0 failed, %d warning(s), %d passed" % (tally["warn"], tally["pass"])
        report = self._write_report(args["report_dir"], findings, summary)
        summary += "; report: %s" % report["text"] if report["text"] else "; no report: %s" % report["error"]
        # One wrapped line per failing or warning check, passes with -v, the summary last; every
        # finding is in the report files (text table and JSON).
        message = _report.render(findings, summary, Display().verbosity, _report.terminal_width(MSG_INDENT))

        result.update(
            changed=False,
            findings=findings,
            table=_report.table(findings),
            failed_checks=len(failures),
            report=report,
            spec=spec,
            derived=_job_spec.derive(spec, nodes, gpus) if nodes and gpus else {},
            source={
                "spec": "script %s" % args["script"] if script else "inventory variables" if args["spec"] is None else "spec argument",
                "ds_config_file": ds_config_file,
                "hostfile": hostfile,
                "nodes": nodes_from,
                "deepspeed_version": deepspeed_version,
                "megatron_deepspeed_era": era,
                "notes": notes,
            },
        )
        if failures and args["fail_on_error"]:
            # Ansible prints a failed task's whole result, and a raised failure's message a
            # second time: return the failure, without the findings (they are in the message and
            # in the report files), so every line is printed once.
            failed = dict((key, result[key]) for key in ("changed", "failed_checks", "report", "source"))
            failed.update(failed=True, msg=message)
            return failed
        result["msg"] = message
        return result

    @staticmethod
    def _upstream(spec: Dict[str, Any], script: Optional[Dict[str, Any]], ds_config: Optional[Dict[str, Any]],
                  nodes: Optional[int], gpus: Optional[int], base: Optional[str]) -> Tuple[List[Dict[str, str]], Optional[str]]:
        """Upstream as the oracle on the controller: with MEGATRON_DS_SRC (a Megatron-DeepSpeed
        checkout) and MEGATRON_DS_PYTHON (a python with torch and DeepSpeed; default this one), the
        checkout's own validate_args and DeepSpeed's own config judge the job too. (findings, note)."""
        source = os.environ.get("MEGATRON_DS_SRC")
        if not source:
            return [], None
        python = os.environ.get("MEGATRON_DS_PYTHON") or sys.executable
        if not nodes or not gpus:
            return [], "upstream check not run: the node count or the GPUs per node is unknown"
        try:
            if script:
                request = {"megatron_dir": source, "workdir": base, "argv": script["args"], "ds_config": ds_config,
                           "env": {}, "world_size": int(nodes) * int(gpus),
                           "args_defaults": dict(_mds_oracle.PRETRAIN_GPT_DEFAULTS)}
            else:
                request = _job_upstream.request(spec, megatron_dir=source, nodes=nodes)
                request["workdir"] = None
                if ds_config is not None:
                    request["ds_config"] = ds_config
        except _job_schema.JobError as exc:
            return [], "upstream check not run: %s" % exc
        verdict = _job_upstream.run_oracle(request, python)
        if not verdict.get("ran"):
            return [], "upstream check not run: %s" % verdict.get("reason")
        return (_job_upstream.findings(verdict),
                "upstream check: %s's validate_args and DeepSpeed %s's config, world size %d"
                % (source, (verdict.get("versions") or {}).get("deepspeed"), request["world_size"]))

    @staticmethod
    def _write_report(directory: Optional[str], findings: List[Dict[str, str]], summary: str) -> Dict[str, Optional[str]]:
        """{text, json} paths of the report files on the controller, or {error} when they cannot be written."""
        directory = directory or _report.DEFAULT_DIR
        try:
            text, data = _report.write(directory, "validate", findings, summary)
        except OSError as exc:
            return {"text": None, "json": None,
                    "error": "cannot write to %s (%s); set validate_report_dir to a writable directory" % (directory, exc)}
        return {"text": text, "json": data, "error": None}

    # ------------------------------------------------------------------ helpers

    def _var(self, task_vars: Dict[str, Any], name: str) -> Any:
        return _job_inputs.template_var(task_vars, self._templar.template, name)

    def _spec_from_vars(self, given: Optional[Dict[str, Any]], task_vars: Dict[str, Any],
                        profile_name: Optional[str]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
        with _action_fail():
            return _job_inputs.spec_from_vars(given, task_vars, self._templar.template, profile_name)

    @staticmethod
    def _profile_deepspeed(name: Optional[str]) -> Optional[str]:
        with _action_fail():
            return _job_inputs.profile_deepspeed(name)

    def _resolve(self, path: str, option: str) -> str:
        with _action_fail():
            return _job_inputs.resolve_path(path, option, self._loader.path_dwim)

    @staticmethod
    def _read(path: str, option: str) -> str:
        with _action_fail():
            return _job_inputs.read_text(path, option)


@contextlib.contextmanager
def _action_fail() -> Iterator[None]:
    """The shared input readers' errors as the action's failure, their message unchanged."""
    try:
        yield
    except _job_inputs.JobInputError as exc:
        raise AnsibleActionFail(str(exc)) from None
