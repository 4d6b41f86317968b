# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side job validation: a thin adapter that gathers the job's input once
(plugin_utils/_job_inputs.validate_input: a spec, or a train.sh read into the same keys, with the
ds_config.json and hostfile beside it) and has module_utils/_job/rules judge it.

It reads files on the controller only (train.sh, ds_config.json, hostfile) and touches no
host. Documentation lives in plugins/modules/validate_job.py.
"""
from __future__ import annotations

import contextlib
import difflib
import os
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import findings as _job_findings
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import upstream as _job_upstream
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import oracle as _mds_oracle
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import args as _mds_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules as _job_rules
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils import _report
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
    "unknown_variables": {"type": "str", "choices": ["fail", "warn"], "default": "fail"},
    "report_dir": {"type": "path"},
}


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp: Optional[str] = None, task_vars: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
        result = super().run(tmp, task_vars)
        del tmp  # no remote temp files: this action never touches a host
        _validation, args = self.validate_argument_spec(
            argument_spec=ARGUMENT_SPEC, required_together=[("resume_tp", "resume_pp")])
        with _action_fail():
            job = _job_inputs.validate_input(args, task_vars or {}, self._templar.template, self._loader.path_dwim)
        findings = _job_rules.validate(job.spec, job.ds_config, job.cluster, job.resume, job.deepspeed_version,
                                       script=job.script)
        gpus = job.cluster["gpus_per_node"] or (min(job.hosts.values()) if job.hosts else None) or job.spec.get("gpus_per_node")
        upstream_findings, upstream_note = self._upstream(job, gpus)
        findings = _unknown_keys(job.spec_vars, args["unknown_variables"]) + findings + upstream_findings
        failures, summary = _summary(findings)
        report = self._write_report(args["report_dir"], findings, summary)
        summary += "; report: %s" % report["text"] if report["text"] else "; no report: %s" % report["error"]
        nodes = job.cluster["nodes"]
        result.update(
            changed=False, findings=findings, table=_report.table(findings), failed_checks=len(failures), report=report,
            spec=job.spec, derived=_job_spec.derive(job.spec, nodes, gpus) if nodes and gpus else {},
            source={
                "spec": "script %s" % job.script_path if job.script else "inventory variables" if args["spec"] is None else "spec argument",
                "ds_config_file": job.ds_config_file, "hostfile": job.hostfile, "nodes": job.nodes_from,
                "deepspeed_version": job.deepspeed_version, "megatron_deepspeed_era": job.era,
                "notes": job.notes + ([upstream_note] if upstream_note else []),
            },
            # One wrapped line per failing or warning check, passes with -v, the summary last; every
            # finding is in the report files (text table and JSON).
            msg=_report.render(findings, summary, Display().verbosity, _report.terminal_width(MSG_INDENT)),
        )
        if failures and args["fail_on_error"]:
            # Ansible prints a failed task's whole result, and a raised failure's message a second
            # time: return the failure without the findings (they are in the message and the report
            # files), so every line is printed once.
            return dict(failed=True, **dict((key, result[key]) for key in ("changed", "failed_checks", "report", "source", "msg")))
        return result

    @staticmethod
    def _upstream(job: _job_inputs.ValidateInput, gpus: Optional[int]) -> Tuple[List[Dict[str, str]], Optional[str]]:
        """Upstream as the oracle on the controller: with MEGATRON_DS_SRC (a Megatron-DeepSpeed
        checkout) and MEGATRON_DS_PYTHON (a python with torch and DeepSpeed; default this one), the
        checkout's own validate_args and DeepSpeed's own config judge the job too. (findings, note)."""
        spec, script, ds_config, nodes = job.spec, job.script, job.ds_config, job.cluster["nodes"]
        base = os.path.dirname(job.script_path) if job.script_path else None
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
        mismatch = _job_upstream.era_mismatch(job.era, source, _job_upstream.checkout_era(_read_text(
            os.path.join(source, "megatron", "arguments.py"))))
        if mismatch:
            return [], "upstream check not run: %s" % mismatch
        verdict = _job_upstream.run_oracle(request, python)
        if not verdict.get("ran"):
            return [], "upstream check not run: %s" % verdict.get("reason")
        ran_with = (verdict.get("versions") or {}).get("deepspeed")
        try:
            ds_era = _mds_args.era_for_deepspeed(ran_with) if ran_with else None
        except ValueError:
            ds_era = None
        mismatch = _job_upstream.era_mismatch(job.era, source, job.era, ran_with, ds_era)
        if mismatch:
            return [], "upstream check not run: %s" % mismatch
        return (_job_upstream.findings(verdict),
                "upstream check: %s's validate_args%s and DeepSpeed %s's config, world size %d"
                % (source, _job_upstream.stages_said(verdict), (verdict.get("versions") or {}).get("deepspeed"),
                   request["world_size"]))

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


def _read_text(path: str) -> Optional[str]:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError):
        return None


def _unknown_keys(spec_vars: Dict[str, Any], status: str = "fail") -> List[Dict[str, str]]:
    """A finding for each megatron_job_* variable the schema does not know: a typo has no effect, so
    it fails unless ``status`` is warn (megatron_unknown_variables), naming the closest variable."""
    known = [_job_schema.var(f.name) for f in _job_schema.FIELDS] + [_job_schema.var(k) for k in _job_schema.NON_SPEC_KEYS]
    findings = []
    for key in reversed(_job_schema.unknown_keys(spec_vars)):
        close = difflib.get_close_matches(key if key.startswith(_job_schema.PREFIX) else _job_schema.var(key), known, n=1,
                                          cutoff=0.7)
        findings.append(_job_findings.finding(
            "%s is a job spec variable" % key, status, "spec", "%s: %r" % (key, spec_vars[key]),
            "a megatron_job_* variable of the megatron_job role",
            "no role reads it, so it would be ignored and the default used; %s (roles/megatron_job/defaults/main.yml "
            "lists them), or set megatron_unknown_variables: warn to only warn"
            % ("did you mean %s?" % close[0] if close else "check the spelling")))
    return findings


def _summary(findings: List[Dict[str, str]]) -> Tuple[List[Dict[str, str]], str]:
    """(the failing findings, the summary line)."""
    failures = _job_findings.failed(findings)
    tally = _report.counts(findings)
    if failures:
        return failures, ("Job validation failed: %d check(s) would stop Megatron-DeepSpeed or DeepSpeed, or break "
                          "the plan; %d failed, %d warning(s), %d passed" % (len(failures), tally["fail"], tally["warn"], tally["pass"]))
    return failures, "Job validation passed: 0 failed, %d warning(s), %d passed" % (tally["warn"], tally["pass"])


@contextlib.contextmanager
def _action_fail() -> Iterator[None]:
    """The shared input readers' errors as the action's failure, their message unchanged."""
    try:
        yield
    except _job_inputs.JobInputError as exc:
        raise AnsibleActionFail(str(exc)) from None
