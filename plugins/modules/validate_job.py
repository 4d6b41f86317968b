# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin of the same name
# (plugins/action/validate_job.py) on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
module: validate_job
author: megatron_ds.cluster developers (@megatron-ds)
version_added: 1.0.0
short_description: Check a Megatron-DeepSpeed job against Megatron-DeepSpeed's and DeepSpeed's own rules
description:
  - Runs on the controller only and touches no host. Judges either the job spec in the
    inventory (the C(megatron_job_*) variables) or a job the user already has (a C(train.sh),
    its C(ds_config.json) and a DeepSpeed hostfile).
  - "Checks: world size = nodes x GPUs; TP x PP divides it; data parallel = world / (TP x PP);
    TP within a node; heads % TP, hidden % heads, layers % PP, max-position-embeddings >=
    seq-length; C(train_batch_size == micro x grad_acc x DP) (DeepSpeed's assertion text),
    the global batch divisible by micro x DP (Megatron's), JSON micro batch and train batch
    equal to C(--micro-batch-size) and C(--global-batch-size); ZeRO-2/3 with the DeepSpeed
    pipeline engine; C(--zero-stage) equal to the JSON stage; C(offload_param) only with ZeRO-3;
    ZeRO-Offload without C(--cpu-optimizer); bf16 and fp16 together or disagreeing between
    arguments and JSON; C(--save) without C(--save-interval); activation partitioning without
    activation checkpointing; obsolete, misspelt, unknown or era-missing flags
    (C(--batch-size), C(--deepspeed-config), C(--dataset-impl) ...); launcher options against
    the cluster; a resume checkpoint whose TP/PP differs (universal checkpoint advice by
    DeepSpeed version); an estimate of memory per GPU against the GPU's memory."
  - Prints one line per failing or warning check (component, check, what was found, what is
    expected and what to change), wrapped to the terminal and at most 160 columns wide, then a
    summary line with the counts that names the report file; C(-v) adds the passing checks.
    Fails when a check fails.
  - Writes every check to two report files on the controller, under O(report_dir), named
    C(validate-<YYYYmmddTHHMMSSZ>.txt) (a table) and C(.json) (the findings as data).
  - See docs/job-validation.md for every rule and its source.
options:
  spec:
    description:
      - The job spec as a dictionary, names with or without the C(megatron_job_) prefix.
      - Default is every C(megatron_job_*) variable visible to the task, completed with the
        defaults of the C(megatron_job) role.
      - Ignored when O(script) is given.
    type: dict
  script:
    description:
      - Path on the controller to an existing C(train.sh) to validate instead of the spec.
      - Default the task variable C(megatron_job_script) when it is set (C(-e megatron_job_script=PATH)).
      - Shell variables, line continuations and the C(deepspeed [launcher options]
        pretrain_gpt.py [arguments]) command are understood (C(torchrun) and
        C(python -m torch.distributed.run) too).
      - When O(ds_config_file) or O(hostfile) are not given, the files named by the script's
        C(--deepspeed_config) and C(--hostfile) are read if they exist next to the script.
    type: path
  ds_config_file:
    description:
      - Path on the controller to the job's C(ds_config.json).
      - Default the task variable C(megatron_job_ds_config_file) when it is set.
      - Without it, the JSON is taken to be rendered from the spec, so the JSON-vs-arguments
        checks are skipped.
    type: path
  hostfile:
    description:
      - Path on the controller to a DeepSpeed hostfile (C(host slots=N) lines). It is parsed
        with DeepSpeed's own rules and gives the default node count and GPUs per node.
      - Default the task variable C(megatron_job_hostfile) when it is set.
    type: path
  nodes:
    description:
      - Number of nodes. Default, in order, the hosts of O(hostfile), the hosts in the
        inventory group C(megatron_nodes), the script's C(--num_nodes).
    type: int
  gpus_per_node:
    description:
      - GPUs in each node. Default the smallest C(slots) of O(hostfile), else the smallest GPU
        count in the nodes' C(gpu_stack_facts) when known, else the spec's C(gpus_per_node).
    type: int
  gpu_memory_mib:
    description:
      - Memory of one GPU in MiB (81920 for A100 80GB, 143771 for H200).
      - Default the smallest C(gpus.memory_mib) in the C(gpu_stack_facts) of the
        C(megatron_nodes) hosts, when those facts are known (gathered or cached).
      - Without it the memory estimate is reported as a warning and not compared.
    type: int
  resume_tp:
    description: Tensor-parallel size of the checkpoint the job will load.
    type: int
  resume_pp:
    description: Pipeline-parallel size of the checkpoint the job will load.
    type: int
  resume_no_pipeline_parallel:
    description: Whether the checkpoint was saved with C(--no-pipeline-parallel).
    type: bool
  deepspeed_version:
    description:
      - DeepSpeed version of the stack. It selects the Megatron-DeepSpeed flag table
        (C(before_rebase) below 0.16.1, HEAD from it), the universal-checkpoint advice
        (DeepSpeed >= 0.12.0) and the ZeRO-2 memory estimator.
      - Default is the version pinned by O(stack_profile).
    type: str
  stack_profile:
    description:
      - Stack profile whose DeepSpeed pin is the default of O(deepspeed_version).
      - Default is the variable C(megatron_stack_profile), else C(cu117).
    type: str
  fail_on_error:
    description: Fail the task when a check fails. With V(false) the findings are only returned.
    type: bool
    default: true
  unknown_variables:
    description:
      - What a C(megatron_job_*) variable that the schema does not know (a typo) does, with the closest
        known name in the message; validate.yml passes C(megatron_unknown_variables) (cluster_defaults).
      - V(fail) fails the check; V(warn) only reports it.
    type: str
    choices: [fail, warn]
    default: fail
  report_dir:
    description:
      - Directory on the controller for the report files; created when missing (C(~) is the
        controller user's home). C(playbooks/validate.yml) passes C(validate_report_dir).
      - When the files cannot be written, the verdict stands and the summary line says why.
      - Default C(~/.ansible/megatron_ds/reports).
    type: path
attributes:
  action:
    description: Runs as an action plugin on the controller.
    support: full
  async:
    description: Cannot run asynchronously.
    support: none
  check_mode:
    description: Reads and reports only, so it runs the same in check mode.
    support: full
  diff_mode:
    description: Changes nothing, so there is no diff.
    support: none
  platform:
    description: Controller only; no host is contacted.
    platforms: all
    support: full
notes:
  - The memory estimate is rough (about 20%); its formula is in docs/job-validation.md.
seealso:
  - name: Megatron-DeepSpeed
    description: The training code whose argument rules are checked.
    link: https://github.com/deepspeedai/Megatron-DeepSpeed
  - name: DeepSpeed configuration JSON
    description: The ds_config.json keys checked here.
    link: https://www.deepspeed.ai/docs/config-json/
"""

EXAMPLES = r"""
- name: Job | Validate the inventory's job spec
  megatron_ds.cluster.validate_job:
    gpu_memory_mib: 81920

- name: Job | Validate an existing train.sh and ds_config.json for 8 nodes x 8 GPUs
  megatron_ds.cluster.validate_job:
    script: /home/ops/job/train.sh
    ds_config_file: /home/ops/job/ds_config.json
    nodes: 8
    gpus_per_node: 8
    gpu_memory_mib: 81920

- name: Job | Check that a resume from a TP 4 / PP 1 checkpoint is possible
  megatron_ds.cluster.validate_job:
    resume_tp: 4
    resume_pp: 1
    deepspeed_version: 0.19.6
  register: job_check

- name: Job | Show the failing and warning checks and where the report is
  ansible.builtin.debug:
    msg: "{{ job_check.msg }}"
"""

RETURN = r"""
findings:
  description:
    - One entry per check, in the order run.
    - Not in a failed result (Ansible prints a failed task's whole result, so they would be shown
      twice); they are in the report's JSON file, and returned with O(fail_on_error=false).
  returned: when no check failed, or with O(fail_on_error=false)
  type: list
  elements: dict
  contains:
    check:
      description: What was checked.
      type: str
      sample: ZeRO stage vs pipeline engine
    status:
      description: V(pass), V(fail) or V(warn).
      type: str
      sample: fail
    component:
      description: The part of the job (cluster, parallelism, model, batch, zero, precision, ...).
      type: str
      sample: zero
    found:
      description: The value found.
      type: str
      sample: ZeRO-3 (ds_config zero_optimization.stage), DeepSpeed pipeline engine (PP 2)
    expected:
      description: The value expected.
      type: str
      sample: ZeRO-0/1 with the pipeline engine
    fix:
      description: What to change, quoting the upstream error where there is one.
      type: str
      sample: "DeepSpeed asserts 'ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism'; use ZeRO-1"
table:
  description: Every finding as a fixed-width text table, one line each (the report's text file holds the same).
  returned: when no check failed, or with O(fail_on_error=false)
  type: str
msg:
  description: One wrapped line per failing or warning check, then the summary line naming the report file.
  returned: always
  type: str
report:
  description: The report files on the controller.
  returned: always
  type: dict
  contains:
    text:
      description: The text table of every finding; null when it could not be written.
      type: str
    json:
      description: The findings as JSON (C(rows), C(counts), C(summary), C(created)); null when it could not be written.
      type: str
    error:
      description: Why the files could not be written, or null.
      type: str
failed_checks:
  description: Number of failing checks.
  returned: always
  type: int
  sample: 0
spec:
  description: The job spec that was validated (normalized, or read from the script).
  returned: when no check failed, or with O(fail_on_error=false)
  type: dict
derived:
  description: World size, data-parallel size, gradient accumulation, parameter count and the other derived numbers.
  returned: when the cluster shape is known and no check failed (or with O(fail_on_error=false))
  type: dict
  sample: {"world_size": 64, "data_parallel_size": 8, "gradient_accumulation_steps": 64}
source:
  description: Where the spec, ds_config, hostfile, node count and DeepSpeed version came from.
  returned: always
  type: dict
"""
