# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# Documentation only: the work is done by the action plugin plugins/action/preflight.py.
from __future__ import annotations

DOCUMENTATION = r"""
---
module: preflight
short_description: Refuse a cluster whose GPU software stack does not match
version_added: 1.0.0
author: megatron_ds.cluster developers (@megatron-ds)
description:
  - Runs on the controller, once. Takes every node's C(gpu_stack_facts) (from
    M(megatron_ds.cluster.gpu_stack_facts)) and the stack profile, and checks them against the
    collection's compatibility matrix, against each other, and against the cluster's needs.
  - "Matrix, per node: NVIDIA driver at least the profile minimum and the minimum of the installed
    CUDA toolkit and of C(torch.version.cuda); fabric manager equal to the driver and active where
    NVSwitches are present; CUDA toolkit, system cuDNN, system NCCL, torch (version and CUDA build),
    torch's bundled cuDNN and NCCL, DeepSpeed and Python as the profile says; nvcc against
    C(torch.version.cuda) with DeepSpeed's own rule (a minor mismatch only inside its 11.x/12.x
    lists, 13.x exactly); apex with CUDA extensions where Megatron-DeepSpeed needs it; GPUs present."
  - "Across nodes: every version above identical on all nodes, the same GPU model and count, the same
    Megatron-DeepSpeed commit and path, venv and Python executable; clocks synchronised within
    O(max_clock_offset_ms). A differing node is named against the value most nodes have; on a tie
    every node is named."
  - "Cluster: hostfile slots equal to the GPUs found, memlock unlimited (also in a non-interactive ssh
    session), InfiniBand ports Active, nvidia-peermem loaded, free disk, and ssh from the head node."
  - The C(cpu) profile skips the GPU and CUDA checks, saying why.
  - "Prints one line per failing or warning check (node, component, check, the value found, the value
    expected and the fix), wrapped to the terminal and at most 160 columns wide, then one summary
    line with the counts that names the report file; with C(-v) also one line per passing or
    skipped check. Fails when any check fails."
  - Writes every row to two report files on the controller, under O(report_dir) with a UTC
    timestamp in their names, C(preflight-<YYYYmmddTHHMMSSZ>.txt) (a fixed-width table) and
    C(.json) (the rows as data). They are never overwritten.
options:
  profile:
    description:
      - Name of the stack profile to check against (C(cu117), C(cu121), C(cu130), C(cpu)); see the
        M(megatron_ds.cluster.stack_profile) lookup. An unknown name fails with the list of profiles.
    type: str
    required: true
  facts:
    description:
      - Node name to that node's C(gpu_stack_facts). The registered result of the facts task is
        accepted too, and a failed or unreachable result becomes a failing row for that node.
      - Default is C(hostvars[host].gpu_stack_facts) for every host in C(ansible_play_hosts_all).
        With a fact cache, pass the registered results instead, so a node that did not answer
        this run is not checked on stale cached facts.
    type: dict
  slots:
    description:
      - Node name to the number of slots (ranks) the hostfile gives it. Each must equal the GPUs the
        node reports. Nodes with facts but no slots are reported as a warning. Omit to skip.
    type: dict
  infiniband_required:
    description:
      - Require InfiniBand on every node. A node with no HCA or no Active port fails; a node with some
        ports down warns.
    type: bool
    default: false
  gpudirect:
    description:
      - Require the nvidia-peermem kernel module (GPUDirect RDMA) on every node.
    type: bool
    default: false
  memlock:
    description:
      - When an unlimited memlock limit (current and in a non-interactive ssh session) is required.
      - C(auto) requires it on a node when O(infiniband_required) or O(gpudirect) is true or the node
        reports an Active InfiniBand/RoCE port, because NCCL's RDMA transport registers its buffers
        against RLIMIT_MEMLOCK. Elsewhere NCCL uses sockets (or NVLink within a node), CUDA's pinned
        host memory does not count against the limit, and a small limit is a warning.
      - C(required) fails a limited node everywhere; C(advisory) only warns.
    type: str
    choices: [auto, required, advisory]
    default: auto
  clock:
    description:
      - C(required) fails a node whose clock is not synchronised or is off by more than
        O(max_clock_offset_ms); C(advisory) only warns. Containers on one machine share its kernel
        clock, so there the machine's own time sync decides (the simulated cluster uses C(advisory)).
    type: str
    choices: [required, advisory]
    default: required
  megatron_checkout:
    description:
      - Whether the inventory installs a Megatron-DeepSpeed checkout (false where
        C(python_env_megatron_source) is C(none), as in the demo without a source). A node without
        one is then skipped instead of warned about; with true (the default) it is a warning.
    type: bool
    default: true
  min_free_gb:
    description:
      - Free space required on every path of O(disk_paths), in gigabytes (10^9 bytes). Omit to skip.
    type: float
  disk_paths:
    description:
      - Paths whose free space is checked. They must have been measured by gpu_stack_facts.
        Default is every path the facts report.
    type: list
    elements: str
  max_clock_offset_ms:
    description:
      - Largest clock offset accepted on a node, in milliseconds.
    type: float
    default: 100
  allowed_unowned:
    description:
      - Names in a venv's site-packages that no pip RECORD owns but the site put there on purpose (a
        C(.pth) of its own). C(packages.unowned) fails on every other C(.pth), C(sitecustomize),
        C(usercustomize), module or package there that no RECORD owns, naming the node and the file.
    type: list
    elements: str
    default: []
  ssh_reachable:
    description:
      - Node name to whether the head node reached it by ssh as the training user, either a boolean or
        the exit code of C(ssh -o BatchMode=yes node true) (0 means reached). Omit to skip.
    type: dict
  fail_on_warn:
    description:
      - Fail on warnings too (an unknown clock state, a missing Megatron-DeepSpeed checkout, an
        InfiniBand port down, a node missing from the hostfile).
    type: bool
    default: false
  driver_lifecycle_date:
    description:
      - The date (C(YYYY-MM-DD)) on which C(driver.lifecycle) judges each node's driver branch against
        NVIDIA's end-of-life table (plugins/module_utils/_stack/driver_lifecycle.py). Omit for today.
    type: str
  ssh_memlock:
    description:
      - Node name to C(ulimit -l) in a non-interactive ssh session on that node, as the head node's
        ssh sweep read it (C(-) where ssh failed). Used where the node's facts carry no
        C(memlock.noninteractive_ssh). C(playbooks/preflight.yml) passes it, so that the facts
        call on each node starts no ssh of its own.
    type: dict
  connections:
    description:
      - Node name to how Ansible reaches it, named in the row of a node that could not be reached
        (C(ssh ops@10.0.0.5:22), C(docker container node3)).
      - Default is built from each node's C(ansible_connection), C(ansible_host), C(ansible_port)
        and C(ansible_user).
      - A node whose registered facts result says it was unreachable (the ssh plugin), or whose
        connection failed under it (C(docker exec) into a stopped container, which Ansible reports
        as C(Module result deserialization failed)), fails C(facts.gathered) with component
        C(connection), the connection and its last error.
    type: dict
  report_dir:
    description:
      - Directory on the controller for the report files; created when missing. A leading C(~) is
        the controller user's home.
      - C(playbooks/preflight.yml) passes C(preflight_report_dir).
      - When the files cannot be written the verdict still stands, and the summary line says why
        there is no report.
      - Default C(~/.ansible/megatron_ds/reports).
    type: path
extends_documentation_fragment:
  - action_common_attributes
  - action_common_attributes.conn
  - action_common_attributes.flow
attributes:
  action:
    support: full
  async:
    support: none
  become:
    support: none
  bypass_host_loop:
    support: none
  check_mode:
    support: full
    details: It only reads facts, so it runs the same in check mode.
  connection:
    support: none
  delegation:
    support: none
  diff_mode:
    support: none
  platform:
    platforms: all
notes:
  - Run it with C(run_once) and C(any_errors_fatal) so that nothing launches on a cluster that fails.
  - torch loads its own bundled cuDNN and NCCL, not the system ones; both are reported and checked.
    The system cuDNN matters for what is compiled against it (apex, other extensions).
  - Where the CUDA version comes from nvcc, ptxas or library names rather than C(version.json), the
    toolkit update (11.7.0 against 11.7.1) is not visible and the toolkit is judged at major.minor.
seealso:
  - module: megatron_ds.cluster.gpu_stack_facts
  - plugin: megatron_ds.cluster.stack_profile
    plugin_type: lookup
"""

EXAMPLES = r"""
- name: Preflight | Compare every node against the stack profile and each other
  megatron_ds.cluster.preflight:
    profile: "{{ megatron_stack_profile }}"
    slots: "{{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, 'megatron_job_gpus_per_node'))) }}"
    infiniband_required: true
    gpudirect: true
    min_free_gb: 200
    disk_paths:
      - /shared/checkpoints
  run_once: true

- name: Preflight | Check two nodes' facts gathered elsewhere
  megatron_ds.cluster.preflight:
    profile: cu130
    facts:
      node1: "{{ hostvars['node1'].gpu_stack_facts }}"
      node2: "{{ hostvars['node2'].gpu_stack_facts }}"
    fail_on_warn: true
  run_once: true
"""

RETURN = r"""
report:
  description:
    - The report files on the controller. Every check on every node is there, with C(check),
      C(status) (C(pass), C(fail), C(warn), C(skip)), C(node) (or C(all)), C(component), C(found),
      C(expected) and C(fix) (for a skipped check, why).
    - The rows are not in the task result. Ansible prints a failed task's whole result, so they
      would be shown a second time. Read them from the JSON file, for example with
      C(lookup('ansible.builtin.file', result.report.json) | from_json).
  returned: always
  type: dict
  contains:
    text:
      description: The text file, a fixed-width table of every row; null when it could not be written.
      type: str
      sample: /home/ops/.ansible/megatron_ds/reports/preflight-20261201T023011Z.txt
    json:
      description: The JSON file, with C(rows), C(counts), C(summary), C(profile) and C(created); null when it could not be written.
      type: str
      sample: /home/ops/.ansible/megatron_ds/reports/preflight-20261201T023011Z.json
    error:
      description: Why the files could not be written, or null.
      type: str
summary:
  description: How many rows have each status.
  returned: always
  type: dict
  sample: {pass: 115, fail: 2, warn: 0, skip: 0}
failures:
  description: The number of failing rows.
  returned: always
  type: int
  sample: 2
profile:
  description: The profile checked against.
  returned: always
  type: str
  sample: cu117
msg:
  description:
    - One wrapped line per failing or warning row, then the verdict, which names the failing
      nodes and the report file (with C(-v), pass and skip lines before the verdict).
  returned: always
  type: str
  sample: |-
    FAIL node3 torch (torch.version): found 1.13.0+cu117; expected 1.13.1 (+cu117); fix: run the megatron_ds.cluster.python_env role
         on node3 so torch matches (torch==1.13.1 from https://download.pytorch.org/whl/cu117)
    preflight FAILED for profile cu117 on 3 node(s): 1 failed, 0 warning(s), 116 passed, 0 skipped; failing: node3; report:
         /home/ops/.ansible/megatron_ds/reports/preflight-20261201T023011Z.txt
"""
