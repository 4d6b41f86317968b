# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin of the same name
# (plugins/action/plan_job.py) on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
module: plan_job
author: megatron_ds.cluster developers (@megatron-ds)
version_added: 1.1.0
short_description: Rank the parallel layouts of a Megatron-DeepSpeed job by predicted speed, within the GPU's memory
description:
  - Runs on the controller only and touches no host.
  - Enumerates the layouts of the job spec on the cluster (TP inside a node and dividing the
    attention heads, PP dividing the layers, DP the rest of the world, every ZeRO stage, micro
    batches dividing global / DP, activation recompute off and on), keeping the model, the global
    batch, precision and flash attention of the spec.
  - Judges each layout with the rules of C(validate_job) (the same code); a layout with a failing
    check is not offered. Predicts its memory per GPU with the job validation's estimate and its
    step time with a model calibrated on H200 measurements (docs/planning.md), then ranks the
    layouts within 90% of the GPU memory by tokens per second.
  - Returns the ranked table (at most 160 columns) and the chosen layout as C(megatron_job_*)
    variables; with O(dest), writes them as YAML for C(group_vars).
options:
  spec:
    description:
      - The job spec as a dictionary, names with or without the C(megatron_job_) prefix.
      - Default is every C(megatron_job_*) variable visible to the task.
    type: dict
  nodes:
    description: Number of training nodes. Default is the size of the inventory group C(megatron_nodes).
    type: int
  gpus_per_node:
    description: GPUs per node. Default is the smallest count in gathered C(gpu_stack_facts), else the spec's.
    type: int
  gpu_memory_mib:
    description: Memory of one GPU in MiB. Default is gathered C(gpu_stack_facts), else the O(gpu)'s listed memory.
    type: int
  gpu:
    description:
      - The GPU model (H200, H100, A100-80GB or A100-40GB), for its listed peak, matmul rate and memory.
      - When not given, the inventory's C(megatron_gpu_model), else the GPU name every node's gpu_stack_facts
        reports (gathered in the play or cached by the last preflight). With none of them the task fails and
        says what to set; the planner never assumes a GPU.
    type: str
  matmul_tflops:
    description: The measured dense bf16 matmul rate of one GPU (bench/gpu/matmul.py), replacing the listed one.
    type: float
  peak_tflops:
    description: The datasheet dense bf16 peak used for MFU, replacing the listed one.
    type: float
  nvlink_busbw_gbps:
    description: The measured intra-node all-reduce bus bandwidth in GB/s (bench/gpu/allreduce.py).
    type: float
  internode_busbw_gbps:
    description: The measured inter-node all-reduce bus bandwidth per GPU in GB/s; default 20 (InfiniBand HDR).
    type: float
  padded_vocab_size:
    description: The vocabulary Megatron will pad to, when the spec's tokenizer does not say it (a vocab file).
    type: int
  keep:
    description: Layout keys to pin (tp, pp, zero, micro, recompute), for instance to re-plan with the checkpoint's TP and PP.
    type: dict
  burnin_report:
    description:
      - A burn-in report (what burnin.yml writes to C(megatron_launch_burnin_dest)). When the file
        exists, its C(calibration) (the slowest rank's matmul TFLOP/s, the slowest node's all-reduce
        bus bandwidth, the world's across nodes) replaces the GPU's listed rates; the options
        I(matmul_tflops), I(nvlink_busbw_gbps) and I(internode_busbw_gbps) still win. The table's
        header says which report was used. A missing file is not an error; a burn-in on CPU ranks
        is not used.
    type: path
  limit:
    description: Rows of the table.
    type: int
    default: 15
  dest:
    description:
      - Write the chosen layout's C(megatron_job_*) variables to this YAML file on the controller, and
        beside it C(<dest without its suffix>.prediction.json), the prediction status.yml compares a
        running job with (C(megatron_launch_status_plan)).
    type: path
notes:
  - The time model is fitted on measured H200 runs and, for the A100, on published runs (bench/published/megatron_runs.json);
    other GPUs scale its compute by their matmul rate and its memory-bound parts by their HBM bandwidth.
    Every plan states the model's measured error on its GPU (docs/planning.md).
seealso:
  - module: megatron_ds.cluster.validate_job
"""

EXAMPLES = r"""
- name: Plan | Rank the layouts of the inventory's job
  megatron_ds.cluster.plan_job:
    gpu: A100-80GB
    dest: "{{ playbook_dir }}/../plan/megatron_job.yml"
  register: plan

- name: Plan | Rank them with the rates the last burn-in measured
  megatron_ds.cluster.plan_job:
    burnin_report: "{{ lookup('ansible.builtin.env', 'HOME') }}/.ansible/megatron_ds/burnin/gpt.json"

- name: Plan | Re-plan for 6 nodes, keeping TP and PP
  megatron_ds.cluster.plan_job:
    nodes: 6
    keep: {tp: 8, pp: 2}
"""

RETURN = r"""
calibration:
  description: The header line naming the burn-in report whose rates were used, or why it was not; null without one.
  returned: always
  type: str
prediction:
  description: The chosen layout's predicted tokens/s per GPU, step, memory and MFU, the GPU and the model's measured error on it.
  returned: when a layout fits
  type: dict
prediction_file:
  description: Where the prediction was written (with dest).
  returned: with dest
  type: str
table:
  description: The ranked layouts as text lines, at most 160 columns each.
  returned: always
  type: list
  elements: str
layouts:
  description: The first O(limit) ranked layouts with tp, pp, dp, zero, micro, recompute, grad_acc, memory_gib,
    memory_fraction, fits, step_s, tokens_per_s, mfu and parts (seconds per step by cause).
  returned: always
  type: list
  elements: dict
chosen:
  description: The C(megatron_job_*) variables of the first layout that fits within 90% of the GPU memory.
  returned: when a layout fits
  type: dict
  sample: {megatron_job_tensor_parallel: 8, megatron_job_pipeline_parallel: 1, megatron_job_micro_batch_size: 2}
yaml:
  description: RV(chosen) as a YAML document for group_vars.
  returned: when a layout fits
  type: str
rejected:
  description: Layouts the job rules refused, counted by the first failing check.
  returned: always
  type: dict
refused_by:
  description:
    - The checks that refused every layout the job rules judged, each a finding (check, status, found,
      expected, fix) with the count of layouts; the failure message names them on its first line.
  returned: always
  type: list
  elements: dict
hardware:
  description: The figures the model used (peak_tflops, matmul_tflops, memory_mib, nvlink_busbw_gbps, internode_busbw_gbps).
  returned: always
  type: dict
nodes:
  description: The node count planned for.
  returned: always
  type: int
gpu:
  description: The GPU model planned for.
  returned: always
  type: str
  sample: A100-80GB
gpu_from:
  description: Where the GPU model came from (the gpu argument, the inventory's megatron_gpu_model, or the nodes' facts).
  returned: always
  type: str
  sample: inventory megatron_gpu_model
"""
