# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""playbooks/plan.yml against inventories/prod, controller only (-e ansible_host=127.0.0.1):
it prints the ranked table and writes group_vars YAML that validate.yml accepts."""
import os
import subprocess

import pytest

from ansible_collections.megatron_ds.cluster.tests.support import tools

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAYBOOK = tools.find("ansible-playbook")


@pytest.mark.skipif(PLAYBOOK is None, reason=tools.missing("ansible-playbook"))
def test_plan_playbook_on_prod_inventory_writes_valid_group_vars(tmp_path):
    dest = tmp_path / "megatron_job.yml"
    env = tools.environ(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    base = [PLAYBOOK, "-i", os.path.join(REPO, "inventories", "prod"), "-e", "ansible_host=127.0.0.1"]
    # No plan_gpu: the inventory's megatron_gpu_model (A100-80GB) says what to plan for.
    plan = subprocess.run(base + [os.path.join(REPO, "playbooks", "plan.yml"), "-e", "plan_dest=%s" % dest],
                          cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert plan.returncode == 0, plan.stdout[-3000:]
    assert "rank layout" in plan.stdout and "chosen: TP" in plan.stdout
    assert "A100-80GB (inventory megatron_gpu_model), 8 node(s) x 8" in plan.stdout
    text = dest.read_text()
    assert "megatron_job_tensor_parallel:" in text and "megatron_job_global_batch_size: 256" in text
    check = subprocess.run(base + [os.path.join(REPO, "playbooks", "validate.yml"), "-e", "@%s" % dest,
                                   "-e", "validate_gpu_memory_mib=81920", "-e", "validate_report_dir=%s" % tmp_path],
                           cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert check.returncode == 0, check.stdout[-3000:]


@pytest.mark.skipif(PLAYBOOK is None, reason=tools.missing("ansible-playbook"))
@pytest.mark.parametrize("playbook", ["plan.yml", "validate.yml"])
def test_h100_inventory_on_cu117_is_refused(tmp_path, playbook):
    """The prod inventory (cu117, the guide's stack) said to hold H100s: both controller playbooks
    refuse it and name the profiles that carry Hopper code."""
    env = tools.environ(ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    run = subprocess.run([PLAYBOOK, "-i", os.path.join(REPO, "inventories", "prod"), "-e", "ansible_host=127.0.0.1",
                          "-e", "megatron_gpu_model=H100", "-e", "megatron_stack_profile=cu117",
                          "-e", "validate_report_dir=%s" % tmp_path, "-e", "plan_dest=%s" % (tmp_path / "plan.yml"),
                          os.path.join(REPO, "playbooks", playbook)],
                         cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
    assert run.returncode != 0, run.stdout[-3000:]
    words = " ".join(run.stdout.split())  # validate.yml wraps its lines to the terminal
    assert "stack profile cu117 cannot run on H100 (compute capability 9.0)" in words, run.stdout[-3000:]
    assert "set megatron_stack_profile to cu121 or cu130" in words
    assert not (tmp_path / "plan.yml").exists()
