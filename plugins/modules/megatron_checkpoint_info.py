#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: megatron_checkpoint_info
author: megatron_ds.cluster developers (@megatron-ds)
version_added: 1.0.0
short_description: Check a Megatron-DeepSpeed checkpoint directory for completeness and shape
description:
  - Reads a checkpoint directory as Megatron-DeepSpeed's C(--save) writes it with C(--deepspeed)
    (DeepSpeed C(save_checkpoint)), that is the C(global_stepN) tags, the C(latest) file and Megatron's
    C(latest_checkpointed_iteration.txt).
  - For one tag (O(tag), else the one C(latest) names) it infers from the file names the layout
    (C(mp_rank_XX_model_states.pt) without the pipeline engine; C(layer_XX-model_YY-model_states.pt)
    plus C(mp_rank_XX_model_states.pt) with it; C(zero_pp_rank_D_mp_rank_XX_model_states.pt) at ZeRO-3),
    tensor, pipeline and data parallel sizes, the ZeRO stage (or the stages the names allow) and the
    precision where the names tell it (the C(bf16_zero_) prefix).
  - Problems it reports, each naming the file and the rank that writes it - a missing file of the
    data-parallel x model-parallel grid, an empty file, a C(.pt) file whose zip end record is missing
    or damaged (a cut write), a C(latest) file that is missing or names a tag that does not exist, and
    layer files that differ between tensor ranks.
  - Mismatches against O(expect). A TP or PP change, and a DP change under ZeRO-1/2/3, needs DeepSpeed's
    universal checkpoint conversion (C(ds_to_universal.py)) and C(--universal-checkpoint); the message
    says so with the command.
  - With O(load=true) it C(torch.load)s every file of the tag on CPU with the interpreter O(python) (the
    training venv's; this module's own interpreter needs no torch), always with C(weights_only=true).
    Globals outside torch's allowlist (DeepSpeed's loss scaler, Megatron's C(args)) are replaced by inert
    stand-ins, so no code from the checkpoint runs. The C(ds_config) saved in the model states file then
    gives the exact ZeRO stage, the precision and the DP size.
  - Never changes anything. O(keep) only returns which tags a clean-up would delete.
options:
  path:
    description: The checkpoint directory (Megatron's C(--save)).
    type: path
    required: true
  tag:
    description:
      - The tag to check in depth. Default the tag C(latest) names, else (when O(ranks) leaves out rank 0,
        whose node holds C(latest)) the newest tag.
    type: str
  expect:
    description: The shape the next run will use; every key is optional.
    type: dict
    suboptions:
      tensor_parallel:
        description: Tensor model parallel size (C(--tensor-model-parallel-size)).
        type: int
      pipeline_parallel:
        description: Pipeline parallel size (C(--pipeline-model-parallel-size)).
        type: int
      data_parallel:
        description: Data parallel size.
        type: int
      world_size:
        description: Number of ranks; gives O(expect.data_parallel) as world_size / (TP x PP).
        type: int
      zero_stage:
        description: ZeRO stage of the DeepSpeed config.
        type: int
        choices: [0, 1, 2, 3]
      precision:
        description: C(bf16), C(fp16) or C(fp32). Checked where the names or the loaded C(ds_config) tell it.
        type: str
        choices: [bf16, fp16, fp32]
  ranks:
    description:
      - Only check the files the given global ranks write, for a checkpoint scattered over nodes without
        shared storage. Each node passes the ranks it runs.
      - Needs O(expect.world_size) (or O(expect.data_parallel)), plus O(expect.tensor_parallel) and
        O(expect.pipeline_parallel) when they are not 1. Rank r sits at pipeline stage r // (DP x TP),
        data-parallel rank (r // TP) % DP, tensor rank r % TP.
      - C(latest) is required only when rank 0 is among them. Layer files are checked for consistency only.
    type: list
    elements: int
  load:
    description: C(torch.load) every file of the tag with O(python) (slow on big checkpoints; reads every byte).
    type: bool
    default: false
  python:
    description: The interpreter with torch used by O(load), e.g. the training venv's C(bin/python).
    type: str
    default: python3
  zip_check:
    description: Check that every C(.pt) file ends with a whole zip end record (reads only its last 64 KiB).
    type: bool
    default: true
  keep:
    description:
      - Return in RV(prune) which tags to delete so that the last O(keep) good tags stay. Never deletes.
      - The tag C(latest) names, tags newer than it and tags without a C(global_stepN) step are never listed
        for deletion; tags with problems are never counted as good; with no good tag nothing is listed.
    type: int
  fail_on_problems:
    description: Fail when the checked tag has problems or mismatches. Otherwise only report them.
    type: bool
    default: true
attributes:
  check_mode:
    description: Reads only; runs the same in check mode (O(load) included).
    support: full
  diff_mode:
    description: Changes nothing, so there is no diff.
    support: none
  platform:
    description: Any POSIX host holding the checkpoint.
    platforms: posix
    support: full
notes:
  - Run it as the training user (C(become_user)) so that it reads what the job wrote.
  - On a checkpoint scattered over nodes, C(latest), C(latest_checkpointed_iteration.txt) and
    C(zero_to_fp32.py) are only on the node of global rank 0.
seealso:
  - name: DeepSpeed universal checkpointing
    description: Converting a checkpoint to another TP/PP/DP shape.
    link: https://www.deepspeed.ai/tutorials/universal-checkpointing/
"""

EXAMPLES = r"""
- name: Checkpoints | Check the latest tag against the next run's shape
  megatron_ds.cluster.megatron_checkpoint_info:
    path: /shared/checkpoints/gpt
    expect:
      tensor_parallel: 2
      pipeline_parallel: 2
      world_size: 16
      zero_stage: 1
  become: true
  become_user: megatron

- name: Checkpoints | Load every file with the training venv's torch, report only
  megatron_ds.cluster.megatron_checkpoint_info:
    path: /shared/checkpoints/gpt
    load: true
    python: /opt/megatron/venv/bin/python
    fail_on_problems: false
  register: ckpt

# ckpt_node1: this module's result on the first node (ranks [0, 1]), which holds `latest`
- name: Checkpoints | Each node checks its own shards of a scattered ZeRO-1 checkpoint (3 nodes x 2 ranks)
  megatron_ds.cluster.megatron_checkpoint_info:
    path: /var/lib/megatron/checkpoints/gpt
    tag: "{{ hostvars[groups['megatron_nodes'][0]].ckpt_node1.tag }}"
    ranks: "{{ range(groups['megatron_nodes'].index(inventory_hostname) * 2,
                     groups['megatron_nodes'].index(inventory_hostname) * 2 + 2) | list }}"
    expect:
      world_size: 6
      tensor_parallel: 1
      pipeline_parallel: 1
      zero_stage: 1

- name: Checkpoints | Which tags a clean-up keeping the last 3 good ones would delete
  megatron_ds.cluster.megatron_checkpoint_info:
    path: /shared/checkpoints/gpt
    keep: 3
    fail_on_problems: false
  register: ckpt_plan
"""

RETURN = r"""
dir:
  description: The checked directory (O(path)).
  returned: always
  type: str
exists:
  description: Whether O(path) is a directory.
  returned: always
  type: bool
ok:
  description: No problems and no mismatches in the checked tag (and in C(latest)).
  returned: always
  type: bool
tags:
  description: Every tag, ascending by step, with C(step), C(files), C(bytes), C(ok) and C(problems) (a count).
  returned: always
  type: list
  elements: dict
  sample: [{"tag": "global_step4", "step": 4, "files": 3, "bytes": 12345, "ok": true, "problems": 0}]
latest:
  description: The tag the C(latest) file names (null when there is none).
  returned: always
  type: str
  sample: global_step4
iteration:
  description: The number in Megatron's C(latest_checkpointed_iteration.txt) (null when absent).
  returned: always
  type: int
  sample: 4
tag:
  description: The tag checked in depth.
  returned: always
  type: str
tag_source:
  description: C(tag) (given), C(latest) or C(newest).
  returned: always
  type: str
step:
  description: The step of RV(tag).
  returned: always
  type: int
layout:
  description:
    - What the names (and with O(load) the saved C(ds_config)) say. C(kind) is C(no_pipeline), C(pipeline),
      C(zero3) or C(unknown); C(tensor_parallel), C(pipeline_parallel), C(model_parallel) (PP x TP),
      C(data_parallel) (null at ZeRO-0 without O(load)), C(zero_stage) (null when the names allow several,
      see C(zero_stage_candidates)), C(precision) (null when unknown) and C(precision_source) saying why.
  returned: always
  type: dict
  sample: {"kind": "no_pipeline", "tensor_parallel": 1, "pipeline_parallel": 1, "data_parallel": 2,
           "zero_stage": null, "zero_stage_candidates": [1, 2], "precision": "bf16"}
files:
  description: The files of RV(tag) with C(size) (bytes), and C(load) (C(ok), C(method), C(error)) with O(load).
  returned: always
  type: list
  elements: dict
bytes:
  description: Total size of RV(tag).
  returned: always
  type: int
problems:
  description: Missing, empty or damaged files, a bad C(latest), files torch cannot load; each names the file.
  returned: always
  type: list
  elements: str
mismatches:
  description: Differences from O(expect), each with what to do.
  returned: always
  type: list
  elements: str
notes:
  description: Things worth knowing that do not make the checkpoint unusable (also shown as warnings).
  returned: always
  type: list
  elements: str
load:
  description: With O(load), C(python), C(torch), C(files), C(loaded) and C(metadata) (ds_version, ds_config, dp_world_size...).
  returned: when O(load=true) and a tag was found
  type: dict
prune:
  description: With O(keep), C(kept), C(delete) (tags to remove) and C(spared) (never deleted).
  returned: when O(keep) is set
  type: dict
  sample: {"keep": 2, "kept": ["global_step20", "global_step30"], "delete": ["global_step10"], "spared": []}
expect:
  description: O(expect) as checked, with C(data_parallel) derived from C(world_size).
  returned: always
  type: dict
ranks:
  description: O(ranks), or null when the whole grid was checked.
  returned: always
  type: list
  elements: int
universal_tags:
  description: Directories ending in C(_universal) (output of C(ds_to_universal.py)); listed, not checked.
  returned: always
  type: list
  elements: str
message:
  description: What is wrong and what to do, the message the module fails with; empty when RV(ok).
  returned: always
  type: str
summary:
  description: A few readable lines.
  returned: always
  type: list
  elements: str
"""

import json
import os
import platform

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.megatron_ds.cluster.plugins.module_utils import _checkpoint


ARGUMENT_SPEC = dict(
    path=dict(type="path", required=True),
    tag=dict(type="str"),
    expect=dict(type="dict", options=dict(
        tensor_parallel=dict(type="int"),
        pipeline_parallel=dict(type="int"),
        data_parallel=dict(type="int"),
        world_size=dict(type="int"),
        zero_stage=dict(type="int", choices=[0, 1, 2, 3]),
        precision=dict(type="str", choices=["bf16", "fp16", "fp32"]),
    )),
    ranks=dict(type="list", elements="int"),
    load=dict(type="bool", default=False),
    python=dict(type="str", default="python3"),
    zip_check=dict(type="bool", default=True),
    keep=dict(type="int"),
    fail_on_problems=dict(type="bool", default=True),
)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    path = params["path"].rstrip("/") or "/"
    scan = _checkpoint.scan_dir(path, zip_check=params["zip_check"])
    try:
        report = _checkpoint.analyse(scan, tag=params["tag"], expect=params["expect"], ranks=params["ranks"],
                                     keep=params["keep"])
    except ValueError as exc:
        module.fail_json(msg="megatron_checkpoint_info: checkpoint %s: %s" % (path, exc))
    if params["load"] and report["tag"]:
        files = [os.path.join(path, report["tag"], entry["name"]) for entry in report["files"]
                 if entry["name"].endswith(".pt") and entry["size"] > 0]
        python = params["python"]
        if os.sep not in python:
            python = module.get_bin_path(python) or python
        if not os.access(python, os.X_OK):
            load = {"error": "python %s is not an executable here; set python to the training venv's "
                             "bin/python" % params["python"]}
        else:
            rc, out, err = module.run_command([python, "-c", _checkpoint.LOADER],
                                              data=json.dumps({"files": files}), binary_data=True)
            load = _checkpoint.parse_loader_output(out)
            if rc != 0 and not load.get("files"):
                load = {"error": "%s exited %d: %s" % (python, rc, (err or out or "").strip()[-500:])}
        _checkpoint.apply_load(report, load)
    report["summary"] = _checkpoint.summary(report)
    # A result key named path makes Ansible add that file's owner and mode: return it as dir.
    result = dict(report)
    result["dir"] = result.pop("path")
    result["message"] = "" if report["ok"] else _checkpoint.failure_message(report, platform.node())
    for note in report["notes"]:
        module.warn(note)
    if params["fail_on_problems"] and not report["ok"]:
        module.fail_json(msg=result["message"], **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
