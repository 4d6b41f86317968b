# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Values are data, never code (issue 39): hostile values in every job value that reaches a shell
or a line-based file, each either refused by validation (naming the variable, the character and
the hop) or carried intact through every hop.

For a value validation lets through, the real templates are rendered (train.sh, hostfile,
.deepspeed_env, nccl.env, as the template module does) and the remote command is built by the
installed DeepSpeed's own PDSHRunner.get_cmd, as its runner.main does. Nothing hostile is
executed: the texts are read with shlex (posix), their words compared with the argv intended,
and a small checker looks for what bash would still expand or split on.
"""
from __future__ import annotations

import ast
import json
import os
import pathlib
import shlex
import subprocess
import sys
from typing import Any, Dict, List, Tuple

import jinja2
import pytest

from ansible.plugins.filter.core import FilterModule as CoreFilters

from ansible_collections.megatron_ds.cluster.plugins.filter.megatron_job import FilterModule as JobFilters
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import files as _job_files
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import findings as _job_findings
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import hops as _job_hops
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules as _job_rules
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job.schema import JobError
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles
from ansible_collections.megatron_ds.cluster.tests.unit.job_defaults import DS_MISSING, spec

REPO = pathlib.Path(__file__).resolve().parents[4]
HOSTS = ["node1", "node2"]


def _env(role: str) -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(str(REPO / "roles" / role / "templates")),
                             trim_blocks=True, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters.update(CoreFilters().filters())
    env.filters.update({"megatron_ds.cluster." + name: f for name, f in JobFilters().filters().items()})
    return env


JOB_ENV, NCCL_ENV = _env("megatron_job"), _env("nccl")

HOSTILE = ["$(id)", "`id`", ";touch x", "a\nb", "a\rb", "a\x00b", "a\x1bb", "bob's-run", "a b", 'a"b', "a\\b"]
HOSTILE_IDS = ["subst", "backtick", "semicolon", "newline", "cr", "nul", "esc", "apostrophe", "space", "dquote",
               "backslash"]


def _path(value: str) -> str:
    return "/shared/data/x" + value


# field -> (spec overrides for the hostile value, the variables a refusal may name)
FIELDS = {
    "name": (lambda v: dict(name=v), ("megatron_job_name",)),
    "workdir": (lambda v: dict(workdir="/opt/jobs/" + v), ("megatron_job_workdir",)),
    "data_path": (lambda v: dict(data_path=_path(v)), ("megatron_job_data_path",)),
    "vocab_file": (lambda v: dict(vocab_file=_path(v)), ("megatron_job_vocab_file",)),
    "merge_file": (lambda v: dict(merge_file=_path(v)), ("megatron_job_merge_file",)),
    "tokenizer_model": (lambda v: dict(tokenizer_type="HFTokenizer", vocab_file=None, merge_file=None,
                                       tokenizer_model=_path(v)), ("megatron_job_tokenizer_model",)),
    "split": (lambda v: dict(split="969,30,1" + v), ("megatron_job_split",)),
    "master_addr": (lambda v: dict(master_addr="10.0.0.1" + v), ("megatron_job_master_addr",)),
    "nccl_env": (lambda v: dict(nccl_env={"NCCL_SOCKET_IFNAME": "eth0" + v}), ("nccl_env.NCCL_SOCKET_IFNAME",)),
}
PROFILES = ("cu130", "cu117")  # DeepSpeed 0.19.x quotes .deepspeed_env values, 0.9.2 does not


def _deepspeed_pin(profile: str) -> str:
    return _stack_profiles.get(profile)["deepspeed"]["pip"].split("==")[-1]


def _hop_failures(job: Dict[str, Any], profile: str) -> List[Dict[str, str]]:
    """The hop findings validate.yml prints for the job (rules.validate, the judge's one line)."""
    findings = _job_rules.validate(job, cluster={"nodes": len(HOSTS)}, deepspeed_version=_deepspeed_pin(profile))
    return [f for f in _job_findings.failed(findings) if f["check"].startswith("value fits its hop")]


# ------------------------------------------------------------------ what bash would still act on
_ALLOWED_UNQUOTED = set("\\w@%+=:,./-")


def shell_active(command: str) -> List[str]:
    """What bash would expand or split on in ``command``, read left to right with its quoting:
    '$' or '`' outside single quotes, '\\' outside single quotes, and unquoted ';|&<>()*?[]{}~#!'
    or a control character. Each hit as 'char@index'."""
    hits = []
    state = None  # None, "'" or '"'
    for index, char in enumerate(command):
        if state == "'":
            if char == "'":
                state = None
            continue
        if char in "$`\\":
            hits.append("%r@%d" % (char, index))
            continue
        if state == '"':
            if char == '"':
                state = None
            continue
        if char in "'\"":
            state = char
        elif char in ";|&<>()*?[]{}~#!" or ord(char) < 32 or ord(char) == 127:
            hits.append("%r@%d" % (char, index))
    if state is not None:
        hits.append("unclosed %s" % state)
    return hits


def test_the_checker_sees_what_bash_expands():
    assert shell_active("a '$(id)' \"b c\"") == []
    assert shell_active('"$(id)"') and shell_active("`id`") and shell_active("a;b") and shell_active("bob's")
    assert shell_active("a\nb") and shell_active('"a\\"b"')


# ----------------------------------------------------------------------- the hops, as built
def _train_sh_argv(text: str) -> List[str]:
    """The deepspeed launcher's argv after pretrain_gpt.py, as bash passes it from train.sh."""
    exec_line = text[text.index('exec "${VENV}/bin/deepspeed"'):].replace(" \\\n", " ")
    exec_line = exec_line.split("\n", 1)[0]
    words = shlex.split(exec_line)
    args = words[words.index("pretrain_gpt.py") + 1:]
    return args[:next(i for i, w in enumerate(args) if w.startswith(">>"))]


# DeepSpeed runs in a child interpreter (tests/support/deepspeed_judge.py says why): one per test
# process, answering one JSON request per line with the command PDSHRunner.get_cmd returns.
PDSH_CHILD = r"""
import argparse, json, os, sys, types
os.environ.setdefault("DS_ACCELERATOR", "cpu")
try:
    from deepspeed.launcher import multinode_runner
except Exception as exc:
    print(json.dumps({"missing": "%s: %s" % (type(exc).__name__, exc)}), flush=True)
    sys.exit(0)
print(json.dumps({"ready": True}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    # The runner writes `cd <its cwd>;` and its own interpreter: the job's megatron_dir and venv.
    multinode_runner.os.path.abspath = lambda path, cwd=req["cwd"]: cwd
    multinode_runner.sys = types.SimpleNamespace(executable=req["python"])
    args = argparse.Namespace(
        user_args=req["user_args"], user_script="pretrain_gpt.py", launcher_args="", master_addr=req["master"],
        master_port=req["port"], ssh_port=None, venv_script=None, no_python=False, module=False,
        no_local_rank=False, save_pid=False, enable_each_rank_log=None, elastic_training=False)
    runner = multinode_runner.PDSHRunner(args, "e30=")
    for env_line in req["env_lines"]:  # runner.py main: each .deepspeed_env line split on the first '='
        key, value = env_line.split("=", 1)
        runner.add_export(key, value)
    cmd, _kill, _env = runner.get_cmd({}, {host: [0] for host in req["hosts"]})
    print(json.dumps({"cmd": cmd}), flush=True)
"""


@pytest.fixture(scope="module")
def pdsh():
    child = subprocess.Popen([sys.executable, "-c", PDSH_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             text=True, env=dict(os.environ, DS_ACCELERATOR="cpu"))
    hello = json.loads(child.stdout.readline() or '{"missing": "no answer"}')
    if "missing" in hello:
        child.kill()
        pytest.skip(DS_MISSING + " (%s)" % hello["missing"])

    def get_cmd(**request: Any) -> List[str]:
        child.stdin.write(json.dumps(request) + "\n")
        child.stdin.flush()
        return json.loads(child.stdout.readline())["cmd"]

    yield get_cmd
    child.stdin.close()
    child.wait(timeout=30)


def _pdsh_remote(job: Dict[str, Any], user_args: List[str], env_lines: List[str], pdsh: Any) -> Tuple[str, List[str]]:
    """The remote command DeepSpeed's PDSHRunner builds (runner.py main: the runner, add_export
    per .deepspeed_env line, get_cmd), pdsh's own options cut off; and the words it should hold."""
    python = job["venv"].rstrip("/") + "/bin/python"
    master = job["master_addr"] or "node1"
    cmd = pdsh(user_args=list(user_args), env_lines=env_lines, cwd=job["megatron_dir"], python=python,
               master=master, port=job["master_port"], hosts=HOSTS)
    assert cmd[:6] == ["pdsh", "-S", "-f", "1024", "-w", ",".join(HOSTS)]
    remote = " ".join(cmd[6:])  # pdsh hands the rest to the remote shell as one command line
    intended = []
    for line in env_lines:
        intended += ["export", line + ";"]
    intended += ["cd", job["megatron_dir"] + ";", python, "-u", "-m", "deepspeed.launcher.launch", "--world_info=e30=",
                 "--node_rank=%n", "--master_addr=%s" % master, "--master_port=%s" % job["master_port"],
                 "pretrain_gpt.py"] + list(user_args)
    return remote, intended


def _carried_intact(job: Dict[str, Any], profile: str, pdsh: Any) -> None:
    prof = _stack_profiles.get(profile)
    contents = JOB_ENV.filters["megatron_ds.cluster.job_files"](job, prof, HOSTS)
    render = dict(__megatron_job_spec=job, __megatron_job_profile=prof, __megatron_job_contents=contents)
    train_sh = JOB_ENV.get_template("train.sh.j2").render(**render)
    intended = _job_args.train_args(job, prof)
    assert _train_sh_argv(train_sh) == intended
    hostfile = JOB_ENV.get_template("hostfile.j2").render(**render)
    assert list(_job_files.parse_hostfile(hostfile)) == HOSTS
    assert len(hostfile.splitlines()) == 2 + len(HOSTS)
    env_lines = JOB_ENV.get_template("deepspeed_env.j2").render(**render).splitlines()
    assert env_lines == _job_files.deepspeed_env_lines(job, prof)
    assert sorted(line.split("=", 1)[0] for line in env_lines) == contents["deepspeed_env_keys"]
    remote, words = _pdsh_remote(job, intended, env_lines, pdsh)
    assert shlex.split(remote) == words
    active = shell_active(remote.replace("--node_rank=%n", "--node_rank=0"))
    # The only unquoted ';' are the separators after each export and after cd.
    assert [hit for hit in active if not hit.startswith("';'")] == [], remote
    assert len([hit for hit in active if hit.startswith("';'")]) == len(env_lines) + 1, remote
    assert "%" not in remote.replace("--node_rank=%n", ""), remote
    nccl = NCCL_ENV.get_template("nccl.env.j2").render(nccl_env=job["nccl_env"], ansible_managed="managed",
                                                       inventory_hostname="node1")
    values = [line for line in nccl.splitlines() if not line.startswith("#")]
    assert len(values) == len(job["nccl_env"])
    for line in values:
        key, word = line.split("=", 1)
        assert shlex.split(word) == [str(job["nccl_env"][key])] and shell_active(word) == []


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("value", HOSTILE, ids=HOSTILE_IDS)
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_a_hostile_value_is_refused_or_carried_intact(field, value, profile, pdsh):
    if field == "tokenizer_model" and profile == "cu117":
        pytest.skip("Megatron-DeepSpeed before_rebase (cu117) has no --tokenizer-model")
    overrides, variables = FIELDS[field]
    job = spec(stack_profile=profile, **overrides(value))
    try:
        failures = _hop_failures(job, profile)
    except JobError as exc:
        # Refused earlier still, when the spec is read (the schema: a dataset prefix cannot hold
        # whitespace, as upstream reads --data-path as weight-prefix words), naming the variable.
        # --split is read as the numbers upstream parses (schema._split): a hostile character is no number.
        assert any(v in str(exc) for v in variables) and ("whitespace" in str(exc) or field == "split"), exc
        return
    if failures:
        for failed in failures:
            named = [v for v in variables if v in failed["found"] or v in failed["fix"]]
            assert named or field == "name" and "megatron_job_name" in failed["fix"], failed
            char = ast.literal_eval(failed["found"].rsplit(" holds ", 1)[1])  # printed as repr: '\n', '$'
            assert len(char) == 1 and char in value, failed
            assert any(hop.where in failed["expected"] for hop in _job_hops.HOPS.values()), failed
            assert failed["fix"]
        # The renderers refuse what validation refuses (one rule, two gates).
        with pytest.raises(Exception):
            JOB_ENV.filters["megatron_ds.cluster.job_files"](job, _stack_profiles.get(profile), HOSTS)
        return
    _carried_intact(job, profile, pdsh)


@pytest.mark.parametrize("field, value, variable, char, hop", [
    ("master_addr", "$(id)", "megatron_job_master_addr", "'$'", "the pdsh command line that DeepSpeed builds"),
    ("name", "gpt\n", "megatron_job_name", "'\\n'", "train.sh and the sbatch script"),
    ("workdir", "bob's-run", "megatron_job_workdir", "\"'\"", "a pretrain_gpt.py argument"),
    ("vocab_file", "/v/;touch x", "megatron_job_vocab_file", "';'", "a pretrain_gpt.py argument"),
    ("data_path", "`id`", "megatron_job_data_path", "'`'", "a pretrain_gpt.py argument"),
])
def test_a_refusal_names_variable_character_and_hop(field, value, variable, char, hop):
    job = spec(**{field: value})
    text = "\n".join(f["found"] + " | " + f["expected"] for f in _hop_failures(job, "cu130"))
    assert "%s = " % variable in text and "holds %s" % char in text and hop in text, text


@pytest.mark.parametrize("overrides, profile", [
    # A dataset prefix with a space is refused by the schema (upstream reads --data-path as words).
    (dict(workdir="/opt/megatron/jobs/sim job", data_path="0.7 /shared/data/my_corpus 0.3 /shared/b"), "cu130"),
    (dict(name="bob's-run", workdir="/opt/jobs/bob", checkpoint_dir="/shared/ckpt/bob",
          tensorboard_dir="/shared/tb/bob", vocab_file="/shared/my data/vocab.json"), "cu130"),
    (dict(nccl_env={"NCCL_SOCKET_IFNAME": "^lo,docker0", "NCCL_TOPO_FILE": "/etc/nccl/bob's topo.xml"}), "cu130"),
    (dict(nccl_env={"NCCL_SOCKET_IFNAME": "^lo,docker0"}), "cu121"),
], ids=["spaces in paths", "apostrophe in the name", "nccl_env apostrophe and space", "nccl_env caret"])
def test_legal_values_survive_every_hop(overrides, profile, pdsh):
    job = spec(stack_profile=profile, **overrides)
    assert _hop_failures(job, profile) == []
    _carried_intact(job, profile, pdsh)


@pytest.mark.parametrize("value", HOSTILE + ["-oProxyCommand=x", "node1:22", "a,b", ""],
                         ids=HOSTILE_IDS + ["ssh-option", "colon", "comma", "empty"])
def test_node_names_are_refused_by_inventory_check_and_the_hostfile(value):
    refused = _job_hops.inventory_refusals({}, {"node9": "node" + value if value and value[0] != "-" else value},
                                           "cu130")
    assert refused and "node node9: megatron_job_node_address" in refused[0]
    with pytest.raises(JobError, match="cannot be used"):
        _job_files.hostfile_lines(["node" + value if value and value[0] != "-" else value, "node2"], 8)


@pytest.mark.parametrize("name", ["node-1.example.org", "10.10.0.7", "gpu_07"])
def test_plain_node_names_pass(name):
    assert _job_hops.inventory_refusals({}, {"node9": name}, "cu117") == []
    assert _job_files.hostfile_lines([name, "node2"], 8)[0] == "%s slots=8" % name


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("value", HOSTILE, ids=HOSTILE_IDS)
def test_inventory_check_and_validation_agree_on_nccl_env(value, profile):
    nccl_env = {"NCCL_SOCKET_IFNAME": "eth0" + value}
    by_inventory = _job_hops.inventory_refusals(nccl_env, {}, profile)
    by_validation = _hop_failures(spec(stack_profile=profile, nccl_env=nccl_env), profile)
    assert bool(by_inventory) == bool(by_validation)


@pytest.mark.parametrize("value, quoted", [
    ("/shared/tb/run1", "/shared/tb/run1"),
    ("/shared/tb/my run", '"/shared/tb/my run"'),
    ("/shared/50%/$HOME", '"/shared/50%%/$$HOME"'),
    ('/a"b\\c', '"/a\\"b\\\\c"'),
])
def test_systemd_quote(value, quoted):
    assert _job_hops.systemd_quote(value) == quoted


@pytest.mark.parametrize("quote", [_job_hops.shell_quote, _job_hops.systemd_quote])
@pytest.mark.parametrize("value", ["a\nb", "a\rb", "a\x00b"])
def test_no_quoting_keeps_a_control_character(quote, value):
    with pytest.raises(JobError, match="holds"):
        quote(value)
