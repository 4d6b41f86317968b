# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Secrets stay home: the supervisor's configuration, rendered by ansible-playbook from the role's
own defaults and vars on an inventory full of sentinel secrets, then the files the supervisor
program writes from that configuration (its relaunch inventory, extra variables and recovery
journal), under umask 000.

A secret the relaunch does not read (the munge key, Alertmanager's receivers and web password, an
unrelated token) must be in no file; the one the job itself carries (an API key in
megatron_job_env, which train.yml must pass to the ranks) may be only in files that nobody but
their owner can read. Issue 39: a prefix sweep copied slurm_* and monitoring_* into a file the
training user's group could read, and the supervisor wrote it again world-readable.
"""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import stat
import subprocess
import sys
from typing import Any, Dict

import yaml

from ansible_collections.megatron_ds.cluster.tests.support import tools

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "roles" / "supervisor" / "files" / "megatron_supervisor.py"

# Secrets the relaunch never reads: in no file at all.
FOREIGN = {
    "slurm_munge_key": "U0VOVElORUwtTVVOR0UtS0VZLTZmM2E=",  # base64, as the role takes it
    "monitoring_web_password": "SENTINEL-WEB-PASSWORD-91c2",
    "monitoring_alertmanager_receivers": [{"name": "pager", "webhook_configs": [{
        "url": "https://hooks.example/SENTINEL-RECEIVER-URL-7d1e",
        "http_config": {"authorization": {"credentials": "SENTINEL-RECEIVER-TOKEN-04ab"}}}]}],
    "site_object_store_token": "SENTINEL-SITE-TOKEN-5e88",
    "slurm_extra_password": "SENTINEL-SLURM-PASSWORD-a3b9",
}
FOREIGN_MARKS = ["U0VOVElORUwtTVVOR0UtS0VZLTZmM2E=", "SENTINEL-MUNGE-KEY", "SENTINEL-WEB-PASSWORD-91c2",
                 "SENTINEL-RECEIVER-URL-7d1e", "SENTINEL-RECEIVER-TOKEN-04ab", "SENTINEL-SITE-TOKEN-5e88",
                 "SENTINEL-SLURM-PASSWORD-a3b9"]
# A secret of the job: it goes where the job goes, readable by its owner alone.
JOB_SECRET = "SENTINEL-JOB-API-KEY-c0de"

PLAYBOOK = """
- name: Render the supervisor's configuration as the role does
  hosts: node1
  gather_facts: false
  roles:
    - role: megatron_ds.cluster.cluster_defaults
  vars_files:
    - {repo}/roles/supervisor/defaults/main.yml
    - {repo}/roles/supervisor/vars/main.yml
  tasks:
    - name: Write it
      ansible.builtin.copy:
        content: "{{{{ __supervisor_config | to_nice_json }}}}"
        dest: {out}
        mode: "0600"
"""


def _render(tmp_path: pathlib.Path, variables: Dict[str, Any]) -> Dict[str, Any]:
    playbook = tools.require("ansible-playbook")
    inventory = {"all": {
        "vars": dict({"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                      "ansible_become": False, "megatron_stack_profile": "cpu",
                      "os_base_library_dir": str(REPO / ".collections")}, **variables),
        "children": {"megatron_nodes": {"hosts": {"node1": {}, "node2": {}}}},
    }}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    out = tmp_path / "rendered.json"
    (tmp_path / "render.yml").write_text(PLAYBOOK.format(repo=REPO, out=out))
    env = tools.environ(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
                        ANSIBLE_NOCOLOR="1", ANSIBLE_CACHE_PLUGIN="memory")
    run = subprocess.run([playbook, "-i", str(tmp_path / "hosts.yml"), str(tmp_path / "render.yml")],
                         capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300, check=False)
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    return json.loads(out.read_text())


def _program():
    spec = importlib.util.spec_from_file_location("megatron_supervisor_secrets", str(SCRIPT))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _scan(root: pathlib.Path) -> Dict[str, Dict[str, Any]]:
    """Every file under root: its mode and the sentinels it holds."""
    found = {}
    for path in root.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            found[str(path.relative_to(root))] = {
                "mode": stat.S_IMODE(path.stat().st_mode),
                "foreign": [m for m in FOREIGN_MARKS if m in text],
                "job": JOB_SECRET in text,
            }
    return found


def test_the_supervisor_gets_only_what_the_relaunch_reads(tmp_path):
    config = _render(tmp_path, dict(FOREIGN, megatron_job_env={"WANDB_API_KEY": JOB_SECRET},
                                    megatron_launch_slurm_partition="gpu", megatron_scheduler="slurm",
                                    megatron_job_name="secret-job", nccl_env={"NCCL_DEBUG": "WARN"}))
    text = json.dumps(config)
    assert [m for m in FOREIGN_MARKS if m in text] == []
    variables = config["inventory_vars"]
    # what train.yml needs still rides along, by name
    assert variables["megatron_launch_slurm_partition"] == "gpu"
    assert variables["megatron_scheduler"] == "slurm"
    assert variables["megatron_stack_profile"] == "cpu"
    assert variables["megatron_job_name"] == "secret-job"
    assert variables["nccl_env"] == {"NCCL_DEBUG": "WARN"}
    assert variables["megatron_job_env"] == {"WANDB_API_KEY": JOB_SECRET}
    assert not [k for k in variables if k.startswith(("slurm_", "monitoring_", "site_"))]
    assert "os_base_library_dir" not in variables


def test_the_supervisors_own_files_are_its_users_alone(tmp_path):
    config = _render(tmp_path, dict(FOREIGN, megatron_job_env={"WANDB_API_KEY": JOB_SECRET}))
    state = tmp_path / "state"
    state.mkdir()
    config.update(incident_file=str(state / "incidents.jsonl"), textfile_dir=str(state / "textfile"))
    (state / "textfile").mkdir()
    program = _program()
    old = os.umask(0)  # the program states its modes; the umask must not matter
    try:
        program.write_inventory(config, config["nodes"], [])
        program.write_private(str(state / "supervisor-overrides.json"),
                              json.dumps({"megatron_job_env": config["spec"].get("megatron_job_env")}))
        program.write_recovery(config, {"record": {"fault": "rank_exit"}, "overrides": {}})
        # a file an older supervisor left world-readable is replaced, not reused with its mode
        stale = state / "supervisor-inventory.json"
        os.chmod(str(stale), 0o644)
        program.write_inventory(config, config["nodes"], [])
        from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import incident
        incident.append(config["incident_file"], {"event": "watching"})
        incident.write_textfile(config["textfile_dir"], "megatron_supervisor.prom", "up 1\n")
    finally:
        os.umask(old)
    found = _scan(state)
    assert set(found) >= {"supervisor-inventory.json", "supervisor-overrides.json", "supervisor-recovery.json",
                          "incidents.jsonl", "textfile/megatron_supervisor.prom"}, found
    for name, seen in found.items():
        assert seen["foreign"] == [], (name, seen)
        if seen["job"]:
            assert seen["mode"] & 0o077 == 0, (name, oct(seen["mode"]))
    for name in ("supervisor-inventory.json", "supervisor-overrides.json", "supervisor-recovery.json"):
        assert found[name]["mode"] == 0o600, (name, oct(found[name]["mode"]))
    # published on purpose (status.yml, node_exporter), and holding no secret
    assert found["incidents.jsonl"]["mode"] == 0o644
    assert found["textfile/megatron_supervisor.prom"]["mode"] == 0o644
    assert found["supervisor-inventory.json"]["job"]
