# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin plugins/action/converge_plan.py.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: converge_plan
short_description: Decide which provisioning roles a node still needs, and why
version_added: 1.0.0
author: megatron_ds.cluster developers (@megatron-ds)
description:
  - Runs on the controller, once per node, at the start of playbooks/provision.yml. Touches no host.
  - Takes the node's answer to M(megatron_ds.cluster.gpu_stack_facts) (with
    O(megatron_ds.cluster.gpu_stack_facts#module:converge_dir), so it carries the roles' converge
    stamps) and decides, per role, whether the role runs on the node.
  - "A role runs when O(mode=full), when the node has no stamp of it, when the digest of its inputs
    differs from the stamp's (a role variable, the collection's version or the role's own files, the
    stack profile, and for roles that write about every member the members and their addresses), when
    a file or service the stamp recorded changed, or when a preflight check the role answers for fails
    on the node (driver, CUDA, cuDNN, NCCL against the profile, the venv against pip's RECORD, the
    clock, memlock, InfiniBand ports, ssh from the head node)."
  - The role inputs are each variable of the role's C(defaults/main.yml), from the host's variables
    where set there, templated as Ansible would; the stamp (M(megatron_ds.cluster.converge_stamp))
    records the same digests, so the next plan compares like with like.
  - Names the distributions whose files differ from pip's RECORD in RV(repair), for
    C(python_env_repair).
options:
  facts:
    description:
      - The registered result of the node's M(megatron_ds.cluster.gpu_stack_facts) call, or its
        C(gpu_stack_facts). A failed, skipped or missing answer runs every role, saying why.
    type: raw
  mode:
    description:
      - V(verify) skips what is verified converged; V(full) runs every role (the inventory variable
        C(megatron_converge)).
    type: str
    choices: [verify, full]
    default: verify
  roles:
    description: The provisioning roles to plan, in the order they run.
    type: list
    elements: str
    default: [os_base, nvidia_driver, cuda_toolkit, cudnn, nccl, cluster_ssh, infiniband, python_env, shared_storage, slurm]
  profile:
    description: The stack profile (C(cu117), C(cu121), C(cu130), C(cpu)); its content is one of every role's inputs.
    type: str
  checks:
    description:
      - Options of the preflight checks run on the node's facts, as M(megatron_ds.cluster.preflight)
        takes them (C(clock), C(memlock), C(max_clock_offset_ms), C(infiniband_required),
        C(gpudirect), C(megatron_checkout), C(ssh_reachable), C(ssh_memlock)).
    type: dict
    default: {}
  torch_spec:
    description: The pip requirement to reinstall a damaged torch with; by default C(torch==<the version found>).
    type: str
    default: ""
  deepspeed_spec:
    description: The pip requirement to reinstall a damaged DeepSpeed with; by default C(deepspeed==<the version found>).
    type: str
    default: ""
attributes:
  check_mode:
    description: Plans as in a normal run; it changes nothing in either mode.
    support: full
  diff_mode:
    description: No diff is shown.
    support: none
  platform:
    description: Runs on the controller only.
    platforms: posix
    support: full
notes:
  - playbooks/provision.yml puts each node in one group per role it needs (C(megatron_converge_<role>)),
    and each role's play targets that group, so a converged node costs no task beyond the facts call.
  - With C(--check) or C(--diff), provision.yml prints RV(lines) for every node.
"""

EXAMPLES = r"""
- name: Decide which roles this node needs
  megatron_ds.cluster.converge_plan:
    facts: "{{ __preflight_gathered }}"
    mode: "{{ megatron_converge | default('verify') }}"
    profile: cpu
    roles: [os_base, cluster_ssh, python_env]
  register: plan

- name: Show it
  ansible.builtin.debug:
    msg: "{{ plan.lines }}"
"""

RETURN = r"""
plan:
  description: Per role, whether it runs (C(run)) and every reason (C(reasons)); no reason when it is skipped.
  returned: always
  type: dict
  sample: {"os_base": {"run": true, "reasons": ["inputs changed: os_base_extra_packages"]}, "nccl": {"run": false, "reasons": []}}
run:
  description: The roles that run on the node, in order.
  returned: always
  type: list
  elements: str
  sample: [os_base]
invalidate:
  description: The roles that run and have a stamp on the node; provision.yml removes those stamps before the roles start.
  returned: always
  type: list
  elements: str
  sample: [os_base]
inputs:
  description: Per role, the digest of its inputs (C(digest)) and of each input (C(inputs)); the role's stamp records them.
  returned: always
  type: dict
repair:
  description: C(python_env), the distributions to reinstall in the venv as C(name==version).
  returned: always
  type: dict
  sample: {"python_env": ["numpy==1.26.4"]}
lines:
  description: The plan as text, one line per role.
  returned: always
  type: list
  elements: str
  sample: ["node2: os_base runs: inputs changed: os_base_extra_packages", "node2: nccl converged (stamp and health checks pass)"]
msg:
  description: The roles that run and why, on one line, or that every role converged.
  returned: always
  type: str
"""
