# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The job-file templates rendered over a table of job specs, and judged by the tools that will
read them: bash -n and shellcheck (train.sh), the Megatron-DeepSpeed flag table and the job
validator (train.sh + ds_config.json + hostfile), DeepSpeed's config class and hostfile parser,
and DeepSpeed's .deepspeed_env reading loop. The last tests run the megatron_job role itself
with ansible-playbook on localhost.
"""
from __future__ import annotations

import grp
import json
import os
import pathlib
import pwd
import shlex
import shutil
import subprocess
import sys
from typing import Any, Dict, List

import jinja2
import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import FilterModule as CoreFilters

from ansible_collections.megatron_ds.cluster.plugins.filter.megatron_job import FilterModule as JobFilters
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import files as _job_files
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import findings as _job_findings
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules as _job_rules
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import script as _job_script
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import args as _mds_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles
from ansible_collections.megatron_ds.cluster.tests.support.deepspeed_judge import judge
from ansible_collections.megatron_ds.cluster.tests.unit.job_defaults import DS_MISSING, spec

REPO = pathlib.Path(__file__).resolve().parents[4]


def hosts_for(job: Dict[str, Any]) -> List[str]:
    return ["node%d" % (i + 1) for i in range(job["nodes"])]


# Rendered as the template module does: trim_blocks on, the final newline kept.
ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(REPO / "roles" / "megatron_job" / "templates")),
    trim_blocks=True,
    keep_trailing_newline=True,
    undefined=jinja2.StrictUndefined,
)
ENV.filters.update(CoreFilters().filters())
ENV.filters.update({"megatron_ds.cluster." + name: f for name, f in JobFilters().filters().items()})


def render(template: str, job: Dict[str, Any], profile: str) -> str:
    """As the role renders: the contents computed once (the job_files filter), then laid out."""
    prof = _stack_profiles.get(profile)
    return ENV.get_template(template).render(
        __megatron_job_spec=job,
        __megatron_job_profile=prof,
        __megatron_job_contents=ENV.filters["megatron_ds.cluster.job_files"](job, prof, hosts_for(job)),
    )


JOBS = [
    ("defaults-cu117", {}, "cu117"),
    ("defaults-cu130", {}, "cu130"),
    ("prod-13b-cu117", dict(nodes=8, gpus_per_node=8, tensor_parallel=8, pipeline_parallel=2,
                            no_pipeline_parallel=False, micro_batch_size=2, global_batch_size=256,
                            activation_checkpointing=True, nccl_env={"NCCL_DEBUG": "WARN", "NCCL_IB_DISABLE": "0"}),
     "cu117"),
    ("h200x2-cu130", dict(nodes=1, gpus_per_node=2, tensor_parallel=1, num_layers=24, hidden_size=2048,
                          num_attention_heads=16, micro_batch_size=4, global_batch_size=32,
                          env={"NCCL_NVLS_ENABLE": "0", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}), "cu130"),
    ("cpu-sim-3x2", dict(nodes=3, gpus_per_node=2, tensor_parallel=1, micro_batch_size=1, global_batch_size=12,
                         zero_stage=2, precision="fp32", tokenizer_type="NullTokenizer", vocab_size=1000,
                         workdir="/opt/megatron/jobs/sim job", launcher="pdsh"), "cpu"),
    ("zero3-offload-fp16-openmpi", dict(nodes=2, gpus_per_node=8, tensor_parallel=2, micro_batch_size=4,
                                        global_batch_size=64, zero_stage=3, zero_offload_optimizer="cpu",
                                        zero_offload_param="cpu", precision="fp16", activation_checkpointing=True,
                                        partition_activations=True, launcher="openmpi",
                                        extra_args=["--exit-interval", "100"],
                                        env={"OPTS": "with spaces"}), "cu121"),
]
JOB_IDS = [job[0] for job in JOBS]


# ----------------------------------------------------------------------------------- train.sh
@pytest.mark.parametrize("name, overrides, profile", JOBS, ids=JOB_IDS)
def test_train_sh_is_valid_bash(tmp_path, name, overrides, profile):
    script = tmp_path / "train.sh"
    script.write_text(render("train.sh.j2", spec(**overrides), profile))
    assert script.read_text().startswith("#!/usr/bin/env bash\n")
    assert "set -euo pipefail\n" in script.read_text()
    result = subprocess.run(["bash", "-n", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name, overrides, profile", JOBS, ids=JOB_IDS)
def test_train_sh_passes_shellcheck(tmp_path, name, overrides, profile):
    if not shutil.which("shellcheck"):
        pytest.skip("shellcheck is not installed (Debian: apt-get install shellcheck)")
    script = tmp_path / "train.sh"
    script.write_text(render("train.sh.j2", spec(**overrides), profile))
    result = subprocess.run(["shellcheck", "--severity=style", str(script)], capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout


@pytest.mark.parametrize("name, overrides, profile", JOBS, ids=JOB_IDS)
def test_train_sh_flags_exist_in_megatron_deepspeed(name, overrides, profile):
    """Every flag after pretrain_gpt.py is in the Megatron-DeepSpeed argument table of the era
    the profile installs, under that exact spelling, with a value argparse accepts."""
    job = spec(**overrides)
    text = render("train.sh.j2", job, profile)
    parsed = _job_script.parse_train_script(text)
    era = _mds_args.BEFORE_REBASE if profile == "cu117" else _mds_args.HEAD
    assert parsed["args"] == _job_args.train_args(job, profile)
    for item in _mds_args.split_args(parsed["args"], era):
        note = _mds_args.classify(item.flag, era)
        assert note.status in ("known", "deprecated"), note.message
        _mds_args.coerce(item.flag, item.values, era)


@pytest.mark.parametrize("name, overrides, profile", JOBS, ids=JOB_IDS)
def test_rendered_files_pass_job_validation(name, overrides, profile):
    """The job validator (_job_rules.validate, what validate.yml runs) reads the rendered train.sh,
    ds_config.json and hostfile and finds nothing wrong."""
    job = spec(**overrides)
    script = _job_script.parse_train_script(render("train.sh.j2", job, profile))
    ds_config = json.loads(render("ds_config.json.j2", job, profile))
    hosts = _job_files.parse_hostfile(render("hostfile.j2", job, profile))
    pinned = _stack_profiles.get(profile)["deepspeed"]["pip"].split("==")[-1]
    findings = _job_rules.validate(script["spec"], ds_config=ds_config, cluster={"hosts": hosts},
                                   deepspeed_version=pinned, script=script)
    assert _job_findings.failed(findings) == []
    # One node launches locally, without hostfile or launcher (see _job_args.launch_args).
    single = len(hosts) == 1
    assert script["launcher"]["launcher"] == (None if single else job["launcher"])
    assert (script["launcher"]["hostfile"] is None) is single


@pytest.mark.parametrize(
    "profile, present, absent",
    [
        ("cu130", ['export DS_ENV_FILE="${WORKDIR}/.deepspeed_env"'], ["install -m 06"]),
        # DeepSpeed 0.9.2 reads only ./.deepspeed_env and ~/.deepspeed_env; the copy is as private
        # as the file.
        ("cu117", ['install -m 0600 "${WORKDIR}/.deepspeed_env" "${MEGATRON_DIR}/.deepspeed_env"',
                   "has no --exit-signal-handler: SIGTERM stops the"], ["export DS_ENV_FILE"]),
    ],
)
def test_train_sh_deepspeed_env_location(profile, present, absent):
    text = render("train.sh.j2", spec(), profile)
    for snippet in present:
        assert snippet in text
    for snippet in absent:
        assert snippet not in text


def test_train_sh_sources_nccl_env_and_quotes_values():
    text = render("train.sh.j2", spec(workdir="/opt/jobs/my job", nccl_env={"NCCL_DEBUG": "INFO"}), "cu130")
    assert "NCCL_ENV_FILE=/etc/megatron/nccl.env" in text
    assert 'for env_file in "${NCCL_ENV_FILE}" "${NCCL_ENV_DIR}"/*.env; do' in text
    assert 'NCCL_ENV_DIR=/etc/megatron/nccl.d' in text
    assert "WORKDIR='/opt/jobs/my job'" in text
    assert "--deepspeed_config '/opt/jobs/my job/ds_config.json'" in text
    assert "--hostfile '/opt/jobs/my job/hostfile'" in text
    # The values are read from .deepspeed_env, not repeated in the script.
    assert "NCCL_DEBUG" not in text
    assert 'done <"${WORKDIR}/.deepspeed_env"' in text
    assert 'cd "${MEGATRON_DIR}"' in text


ENV_READ_CASES = [
    {"WANDB_API_KEY": "SENTINEL-token-9f1"},
    # Values a later DeepSpeed quotes (spaces), and characters that mean something to a shell
    # but that .deepspeed_env allows: exported as they are, nothing run.
    {"OPTS": "a b  c", "GLOB": "*", "SEMI": "x;y", "AMP": "a&b", "PIPE": "a|b", "APOS": "bob's"},
    {"EQ": "a=b=c", "EMPTY": ""},
]


@pytest.mark.parametrize("env", ENV_READ_CASES)
def test_train_sh_exports_the_deepspeed_env_lines_as_data(tmp_path, env):
    """train.sh's own reading of .deepspeed_env, run by bash on the rendered file: each variable
    arrives with its value intact, and no value is run (a ';', '&' or '|' in it starts nothing)."""
    text = render("train.sh.j2", spec(workdir=str(tmp_path), env=env), "cu130")
    start = text.index("while IFS= read -r line")
    end = text.index('done <"${WORKDIR}/.deepspeed_env"') + len('done <"${WORKDIR}/.deepspeed_env"')
    (tmp_path / ".deepspeed_env").write_text(render("deepspeed_env.j2", spec(workdir=str(tmp_path), env=env), "cu130"))
    script = "set -euo pipefail\nWORKDIR=%s\ncd %s\n%s\nenv -0\n" % (shlex.quote(str(tmp_path)), shlex.quote(str(tmp_path)),
                                                                     text[start:end])
    run = subprocess.run(["bash", "-c", script], env={"PATH": os.environ["PATH"]}, capture_output=True, check=False)
    assert run.returncode == 0, run.stderr
    exported = dict(item.decode().split("=", 1) for item in run.stdout.split(b"\0") if b"=" in item)
    for key, value in env.items():
        assert exported[key] == value
    assert sorted(path.name for path in tmp_path.iterdir()) == [".deepspeed_env"], "a value ran as a command"


# -------------------------------------------------------------------------------- ds_config
@pytest.mark.parametrize("name, overrides, profile", JOBS, ids=JOB_IDS)
def test_ds_config_json_renders_the_spec(name, overrides, profile):
    job = spec(**overrides)
    assert json.loads(render("ds_config.json.j2", job, profile)) == _job_args.ds_config(job)


@pytest.fixture(scope="module")
def deepspeed_verdict():
    """DeepSpeed's DeepSpeedConfig and _parse_hostfile on every rendered ds_config.json and
    hostfile of the table, in one child interpreter (importing torch after ansible-core 2.19
    fails: its sys.intern patch trips torch._dynamo)."""
    configs, hostfiles = [], []
    for name, overrides, profile in JOBS:
        job = spec(**overrides)
        configs.append({"config": json.loads(render("ds_config.json.j2", job, profile)),
                        "dp": _job_spec.summary(job)["dp"]})
        hostfiles.append(render("hostfile.j2", job, profile))
    return judge(configs, hostfiles)


@pytest.mark.parametrize("index, job", list(enumerate(JOBS)), ids=JOB_IDS)
def test_deepspeed_accepts_rendered_ds_config(deepspeed_verdict, index, job):
    if "missing" in deepspeed_verdict:
        pytest.skip("%s (%s)" % (DS_MISSING, deepspeed_verdict["missing"]))
    overrides = job[1]
    job_spec = spec(**overrides)
    parsed = deepspeed_verdict["configs"][index]
    assert parsed["ok"], parsed.get("error")
    assert parsed["train_batch_size"] == job_spec["global_batch_size"]
    assert parsed["micro"] == job_spec["micro_batch_size"]
    assert parsed["grad_acc"] == _job_spec.summary(job_spec)["grad_acc"]


# --------------------------------------------------------------------------- .deepspeed_env
@pytest.mark.parametrize("name, overrides, profile", JOBS, ids=JOB_IDS)
def test_deepspeed_env_survives_deepspeeds_reader(tmp_path, name, overrides, profile):
    job = spec(**overrides)
    path = tmp_path / ".deepspeed_env"
    path.write_text(render("deepspeed_env.j2", job, profile))
    exports = {}
    # DeepSpeed's launcher, runner.py: a blank or comment line raises ValueError here.
    with open(path, "r") as fd:
        for var in fd.readlines():
            key, val = var.split("=", maxsplit=1)
            exports[key.strip()] = val.strip()
    assert exports == _job_files.deepspeed_env(job, profile)
    assert not path.read_text().endswith("\n\n")


def test_deepspeed_env_refuses_spaces_for_old_deepspeed():
    with pytest.raises(AnsibleFilterError, match="writes .deepspeed_env values unquoted"):
        render("deepspeed_env.j2", spec(env={"OPTS": "a b"}), "cu117")


# ------------------------------------------------------------------------------- hostfile
@pytest.mark.parametrize("index, job", list(enumerate(JOBS)), ids=JOB_IDS)
def test_hostfile_parses(deepspeed_verdict, index, job):
    overrides, profile = job[1], job[2]
    job_spec = spec(**overrides)
    text = render("hostfile.j2", job_spec, profile)
    expected = {host: job_spec["gpus_per_node"] for host in hosts_for(job_spec)}
    assert _job_files.parse_hostfile(text) == expected
    if "missing" in deepspeed_verdict:
        pytest.skip("%s (%s; our own parser passed)" % (DS_MISSING, deepspeed_verdict["missing"]))
    assert deepspeed_verdict["hostfiles"][index] == {"ok": True, "pool": expected}


# ------------------------------------------------------------------ the role, through Ansible
ANSIBLE_PLAYBOOK = pathlib.Path(sys.executable).with_name("ansible-playbook")

PLAYBOOK = """
- name: Render job files
  hosts: megatron_nodes
  gather_facts: false
  roles:
    - role: megatron_ds.cluster.megatron_job
"""


def _run_role(tmp_path: pathlib.Path, extra: Dict[str, Any], options: List[str] = ()) -> subprocess.CompletedProcess:
    if not ANSIBLE_PLAYBOOK.exists():
        pytest.skip("ansible-playbook is not installed beside %s" % sys.executable)
    inventory = {
        "all": {
            "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable},
            "children": {
                "megatron_nodes": {"hosts": {"node1": {}, "node2": {"megatron_job_node_address": "10.0.0.2"}}},
            },
        }
    }
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(PLAYBOOK)
    variables = {
        "megatron_stack_profile": "cpu",
        "megatron_job_workdir": str(tmp_path / "job"),
        "megatron_job_user": pwd.getpwuid(os.getuid()).pw_name,
        "megatron_job_group": grp.getgrgid(os.getgid()).gr_name,
        "megatron_job_gpus_per_node": 2,
        "megatron_job_tensor_parallel": 1,
        "megatron_job_global_batch_size": 8,
    }
    variables.update(extra)
    (tmp_path / "vars.yml").write_text(yaml.safe_dump(variables))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_NOCOLOR="1", ANSIBLE_CACHE_PLUGIN="memory")
    return subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(tmp_path / "hosts.yml"), "-e", "@" + str(tmp_path / "vars.yml"),
         str(tmp_path / "play.yml")] + list(options),
        cwd=str(REPO), env=env, capture_output=True, text=True, timeout=300, check=False,
    )


def test_role_renders_the_job_files(tmp_path):
    result = _run_role(tmp_path, {})
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    # A fresh head node (no job directory yet): no warning either (a find over a missing path
    # warned in every first `make demo`).
    assert "WARNING" not in result.stdout + result.stderr, result.stderr[-2000:]
    job = tmp_path / "job"
    modes = {name: (job / name).stat().st_mode & 0o777 for name in ("hostfile", "ds_config.json", ".deepspeed_env", "train.sh")}
    assert modes == {"hostfile": 0o644, "ds_config.json": 0o644, ".deepspeed_env": 0o600, "train.sh": 0o755}
    assert (job / "logs").is_dir()
    assert _job_files.parse_hostfile((job / "hostfile").read_text()) == {"node1": 2, "10.0.0.2": 2}
    config = json.loads((job / "ds_config.json").read_text())
    assert (config["train_batch_size"], config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"]) == (8, 1, 2)
    env_text = (job / ".deepspeed_env").read_text()
    assert env_text.splitlines()[0] == "DS_ACCELERATOR=cpu"
    assert "\n\n" not in env_text and not env_text.startswith("\n") and "#" not in env_text
    train = (job / "train.sh").read_text()
    assert "--num_nodes 2 --num_gpus 2" in train
    assert subprocess.run(["bash", "-n", str(job / "train.sh")], check=False).returncode == 0

    again = _run_role(tmp_path, {})
    assert again.returncode == 0
    assert "changed=0" in again.stdout, again.stdout[-3000:]


def test_the_jobs_tokens_are_in_its_private_env_file_alone(tmp_path):
    """A token in megatron_job_env: --diff and -v print it nowhere, on the first write or on a
    change, and of the job files only .deepspeed_env (0600) holds it (issue 39)."""
    token = "SENTINEL-JOB-TOKEN-4b7e"
    first = _run_role(tmp_path, {"megatron_job_env": {"WANDB_API_KEY": token}}, ["--diff", "-v"])
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    changed = _run_role(tmp_path, {"megatron_job_env": {"WANDB_API_KEY": token + "-new"}}, ["--diff", "-v"])
    assert changed.returncode == 0, changed.stdout[-4000:] + changed.stderr[-2000:]
    for run in (first, changed):
        assert token not in run.stdout + run.stderr
    assert "--- before" in first.stdout, "no diff was printed at all: the test proves nothing"
    job = tmp_path / "job"
    holders = sorted(path.name for path in job.iterdir() if path.is_file() and token in path.read_text())
    assert holders == [".deepspeed_env"]
    assert (job / ".deepspeed_env").stat().st_mode & 0o777 == 0o600


def test_role_refuses_an_inconsistent_batch_before_writing(tmp_path):
    result = _run_role(tmp_path, {"megatron_job_global_batch_size": 7})
    assert result.returncode != 0
    assert "global_batch_size 7 is not divisible by micro_batch_size 1 x data parallel 4" in result.stdout
    assert not (tmp_path / "job").exists()
