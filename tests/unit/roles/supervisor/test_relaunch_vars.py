# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the supervisor is given, and how every role writes a secret.

The supervisor's relaunch inventory takes the variables train.yml and burnin.yml read, by name
(roles/supervisor/vars/main.yml, __supervisor_relaunch_vars): the list must follow the argument
specs of the roles those playbooks run, and name no secret. Every task of the collection that
writes a credential keeps it out of the log and out of --diff, and gives the file a mode nobody
but its owner (or one named group) can read (issue 39).
"""
from __future__ import annotations

import pathlib
import re
from typing import Any, Dict, Iterator, List, Tuple

import pytest
import yaml

REPO = pathlib.Path(__file__).resolve().parents[4]
ROLE = REPO / "roles" / "supervisor"

# Read by the relaunch's roles and playbooks but declared by other roles (see the list's comment).
INHERITED = {"megatron_stack_profile", "cluster_ssh_user", "nccl_env", "python_env_megatron_source",
             "python_env_flash_attn", "python_env_fused_ops", "infiniband_facts_file", "supervisor_incident_file",
             "validate_nodes", "validate_gpus_per_node", "validate_gpu_memory_mib", "validate_resume_tp",
             "validate_resume_pp", "validate_deepspeed_version", "validate_report_dir"}
SECRET_WORDS = ("munge", "password", "token", "secret", "private_key", "receivers", "credential")
PRIVATE_MODES = {"0600", "0400", "0640", "0440", "0700"}


def _spec_names(role: str, entry_points: Tuple[str, ...]) -> set:
    specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    return {name for entry in entry_points for name in specs[entry].get("options", {})}


def test_the_relaunch_variables_follow_the_relaunch_roles():
    listed = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__supervisor_relaunch_vars"]
    assert len(listed) == len(set(listed)), "a name listed twice"
    expected = _spec_names("cluster_defaults", ("main",)) | _spec_names("megatron_launch", ("main", "burnin")) | INHERITED
    assert sorted(set(listed) - expected) == [], "listed but read by no relaunch role"
    assert sorted(expected - set(listed)) == [], "read by the relaunch, missing from __supervisor_relaunch_vars"


def test_no_relaunch_variable_is_a_secret():
    listed = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__supervisor_relaunch_vars"]
    assert [n for n in listed if any(w in n for w in SECRET_WORDS) or n.startswith(("slurm_", "monitoring_"))] == []
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    assert "supervisor_inventory_var_prefixes" not in defaults
    assert defaults["supervisor_inventory_extra_vars"] == []


def _tasks(items: List[Dict[str, Any]]) -> Iterator[Dict[str, Any]]:
    for task in items or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key) or [])


def _all_tasks() -> Iterator[Tuple[str, Dict[str, Any]]]:
    for path in sorted(REPO.glob("roles/*/tasks/*.yml")):
        for task in _tasks(yaml.safe_load(path.read_text()) or []):
            yield str(path.relative_to(REPO)), task


def _module(task: Dict[str, Any]) -> Tuple[str, Dict[str, Any]]:
    for key, value in task.items():
        if key.startswith("ansible.builtin.") or key.startswith("community."):
            return key, value if isinstance(value, dict) else {}
    return "", {}


# The tasks that write a credential to a file, by file and name. A new one belongs here.
SECRET_WRITES = [
    ("roles/cluster_ssh/tasks/keys.yml", "Cluster SSH | Install the cluster private key"),
    ("roles/slurm/tasks/munge.yml", "Munge | Write the key given in slurm_munge_key on the controller"),
    ("roles/slurm/tasks/munge.yml", "Munge | Copy the controller's key to every other host"),
    ("roles/monitoring/tasks/alertmanager.yml", "Alertmanager | Write the configuration"),
    ("roles/monitoring/tasks/web_auth.yml", "Web auth | Write the web configuration"),
    ("roles/supervisor/tasks/main.yml", "Supervisor | Generate the webhook token once"),
    ("roles/supervisor/tasks/main.yml", "Supervisor | Write the configuration"),
    # The job's environment (megatron_job_env, its tokens), and the sbatch script that exports it.
    ("roles/megatron_job/tasks/main.yml", "Job files | Render the job's environment file on the head node"),
    ("roles/megatron_launch/tasks/burnin.yml", "Burn-in | Put the job's .deepspeed_env beside the script on the head node"),
    ("roles/megatron_launch/tasks/start_slurm.yml", "Slurm | Render the sbatch script beside the pdsh one"),
]


@pytest.mark.parametrize(("path", "name"), SECRET_WRITES)
def test_a_secret_is_written_privately_and_silently(path, name):
    tasks = [t for p, t in _all_tasks() if p == path and t.get("name") == name]
    assert len(tasks) == 1, "task %r not found in %s" % (name, path)
    task = tasks[0]
    args = _module(task)[1]
    assert task.get("no_log") is True, "the log would print the secret"
    assert task.get("diff") is False, "--diff would print the secret"
    assert str(args.get("mode")) in PRIVATE_MODES, args.get("mode")
    if str(args.get("mode")).endswith("40"):
        assert args.get("group"), "0640/0440 only to a named group"


def test_every_silent_file_write_is_listed():
    """A copy or template the role already hides from the log writes a secret: it must be in
    SECRET_WRITES (and so pass the checks above)."""
    silent = [(p, t.get("name")) for p, t in _all_tasks()
              if t.get("no_log") and _module(t)[0] in ("ansible.builtin.copy", "ansible.builtin.template")]
    assert sorted(set(silent) - set(SECRET_WRITES)) == []


def test_every_task_that_reads_a_secret_variable_is_silent():
    """A task whose arguments template a secret variable (the munge key, the slurped private key,
    the receivers, a generated password) hides its result."""
    markers = re.compile(r"\bslurm_munge_key\b|__slurm_munge_key\.content|__cluster_ssh_private_key\.content"
                         r"|\bmonitoring_alertmanager_receivers\b|\b__monitoring_password_hash\b"
                         r"|ansible\.builtin\.password\b")
    loud, seen = [], []
    for path, task in _all_tasks():
        module, args = _module(task)
        if module in ("ansible.builtin.assert", "ansible.builtin.debug") or not module:
            continue
        text = yaml.safe_dump({k: v for k, v in task.items() if k not in ("name", "when")})
        if markers.search(text):
            seen.append(path)
            if not task.get("no_log"):
                loud.append((path, task.get("name")))
    assert loud == []
    assert {"roles/slurm/tasks/munge.yml", "roles/cluster_ssh/tasks/keys.yml"} <= set(seen)  # the scan finds them
