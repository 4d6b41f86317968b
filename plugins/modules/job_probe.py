#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

DOCUMENTATION = r"""
module: job_probe
author: megatron_ds.cluster developers (@megatron-ds)
version_added: 1.0.0
short_description: Read the state of a Megatron-DeepSpeed job on one node
description:
  - One read-only call per node that answers what the launch, status and stop steps of the
    C(megatron_launch) role need to know.
  - Which processes listen on given TCP ports (the rendezvous port), from C(/proc/net/tcp) and
    C(/proc/net/tcp6). The owning process is found through C(/proc/<pid>/fd), which needs root
    for other users' processes.
  - Which rank processes of a training script run here (C(<python> -u <script> --local_rank=N)),
    matched like C(pgrep -f) with O(rank_pattern).
  - Whether given paths exist (the dataset's C(.bin)/C(.idx), C(pretrain_gpt.py)), and for a C(.idx)
    file what its header says (format, version, token dtype, counts), in two small reads.
  - Whether the launcher process in O(pid_file) is alive.
  - What the job log says from a byte offset on (iterations, loss, tokens/s, TFLOP/s, saved and
    loaded checkpoints, the launcher's exit status, burn-in results, error lines).
  - The DeepSpeed checkpoint directory, its C(latest) tag and that tag's shape (TP, PP, DP)
    inferred from the file names.
  - Changes nothing, except with O(shm_sweep_user), where it removes that user's stale DeepSpeed
    CPU all-reduce buffers from O(shm_dir) (the stop step does, once the ranks are gone).
options:
  ports:
    description: TCP ports whose listeners to report.
    type: list
    elements: int
    default: []
  rank_pattern:
    description:
      - Extended regular expression matched (search) against every process's command line.
      - The role builds it from the script name so that it matches the ranks only, not the
        DeepSpeed runner, pdsh or C(deepspeed.launcher.launch).
    type: str
  paths:
    description:
      - Paths whose existence and size to report.
      - For an existing path ending in C(.idx), its index header too (C(index)).
    type: list
    elements: path
    default: []
  pid_file:
    description: A file holding the launcher's pid.
    type: path
  log_file:
    description: The job log to summarise.
    type: path
  log_offset:
    description: Byte offset where this run's part of the log starts.
    type: int
    default: 0
  log_max_bytes:
    description: Read at most this many bytes from the end of the log.
    type: int
    default: 4194304
  log_tail:
    description: Number of last log lines to return verbatim.
    type: int
    default: 15
  checkpoint_dir:
    description: A DeepSpeed checkpoint directory (C(--save)).
    type: path
  checkpoint_tag:
    description:
      - The tag whose files to list and measure. Default the tag in the directory's C(latest) file.
      - Another node's C(latest) tag is given here to find what this node lacks of it.
    type: str
  record_file:
    description: A JSON file written by the launch (what was started, where, when) to return parsed.
    type: path
  shm_sweep_user:
    description:
      - Remove this user's C(deepspeed_allreduce_buffer_<uid>_*) files from O(shm_dir) that no
        process maps.
      - DeepSpeed's CPU all-reduce (C(csrc/cpu/comm/shm.cpp)) creates one of about 66 MB per rank
        and never removes it, so every CPU job, and every killed one, leaves them in RAM.
      - A buffer that a running process maps is kept. In check mode nothing is removed; the
        files that would be are returned.
    type: str
  shm_dir:
    description: Where the shared memory files are (the tmpfs behind C(shm_open)).
    type: path
    default: /dev/shm
  slurm_job_id:
    description:
      - A Slurm job id (the slurm launch backend). The job's state is read with C(squeue),
        C(sacct) and C(scontrol show job), and C(launcher) then describes that job instead of a
        pid (C(alive) while it is pending or running).
      - Needs the Slurm client commands on the host; a host without them reports state C(UNKNOWN).
    type: str
  wait_seconds:
    description:
      - Wait up to this many seconds on the node, reading the launcher and O(log_file) every
        O(wait_interval) seconds, and answer as soon as the launcher has ended or the log holds
        O(wait_iterations) iterations. One call then stands for many polls, so a long wait prints
        one line a chunk instead of one every few seconds. V(0) answers at once.
    type: int
    default: 0
  wait_iterations:
    description:
      - With O(wait_seconds), the logged iterations that end the wait early. V(0) waits for the
        launcher to end (a burn-in).
    type: int
    default: 0
  wait_interval:
    description: Seconds between reads while waiting.
    type: int
    default: 5
attributes:
  check_mode:
    description: Reads only, and with O(shm_sweep_user) reports what it would remove.
    support: full
  diff_mode:
    description: Changes nothing, so there is no diff.
    support: none
  platform:
    description: Linux (reads C(/proc)).
    platforms: posix
    support: full
notes:
  - Run it with C(become=true) to see the owners of listening sockets and every user's processes.
seealso:
  - name: Megatron-DeepSpeed training log format
    description: The iteration line this module parses (C(megatron/training.py) training_log).
    link: https://github.com/deepspeedai/Megatron-DeepSpeed
"""

EXAMPLES = r"""
- name: Launch | Probe every node before starting
  megatron_ds.cluster.job_probe:
    ports: [29500]
    rank_pattern: 'python[0-9.]* -u ([^ ]*/)?pretrain_gpt\.py( |$)'
    paths:
      - /shared/data/my-gpt_text_document.bin
      - /shared/data/my-gpt_text_document.idx
  become: true
  register: probe

- name: Status | Read the log and the checkpoint on the head node
  megatron_ds.cluster.job_probe:
    log_file: /opt/megatron/jobs/gpt/logs/train.log
    checkpoint_dir: /shared/checkpoints/gpt
    pid_file: /opt/megatron/jobs/gpt/logs/launcher.pid
  become: true
"""

RETURN = r"""
waited:
  description: Seconds the probe waited on the node (O(wait_seconds)); 0 when it answered at once.
  returned: always
  type: float
  sample: 60.2
listeners:
  description: Per port (as a string), the processes listening on it; an empty list means free.
  returned: always
  type: dict
  sample: {"29500": [{"pid": 4242, "cmdline": "python3 -m http.server 29500"}]}
ranks:
  description: Rank processes matching O(rank_pattern).
  returned: always
  type: list
  elements: dict
  sample: [{"pid": 5120, "uid": 2000, "local_rank": 0, "cmdline": "/opt/megatron/venv/bin/python3 -u pretrain_gpt.py --local_rank=0 ..."}]
paths:
  description:
    - Per path, C(exists) and C(size).
    - For a C(.idx) file, C(index) with its header (C(magic), C(version), C(dtype_code), C(sequences),
      C(documents), C(size)), which the pre-launch check judges as Megatron-DeepSpeed's reader does.
  returned: always
  type: dict
launcher:
  description:
    - The launcher's pid from O(pid_file) and whether it is alive; empty without O(pid_file).
    - With O(slurm_job_id), the Slurm job instead (C(slurm_job_id), C(state), C(alive)).
  returned: always
  type: dict
  sample: {"pid": 4000, "alive": true}
slurm:
  description:
    - With O(slurm_job_id), what Slurm says about the job, from C(job_state) in
      C(module_utils/_slurm/job.py).
    - C(state) is PENDING, RUNNING, COMPLETED, CANCELLED, TIMEOUT and so on, or UNKNOWN; then
      C(alive), C(reason), C(exit_code), C(elapsed), C(nodes), C(batch_host), C(restarts), and
      C(source), the command that knew the job (squeue, sacct or scontrol).
    - Empty without O(slurm_job_id).
  returned: always
  type: dict
  sample: {"job_id": "42", "state": "RUNNING", "alive": true, "nodes": "node[1-3]", "source": "squeue"}
log:
  description:
    - The log summary (see C(module_utils/_launch/) C(parse_log)) plus C(tail) (last lines),
      C(size) (bytes) and C(exists).
    - C(last) holds the last iteration with C(iteration), C(train_iters), C(lm_loss),
      C(losses), C(iteration_time_ms), C(tokens_per_gpu_per_second), C(tflops) and the other
      fields of Megatron's line when logged (C(module_utils/_mds/log.py), the parser the
      monitoring exporter shares).
  returned: always
  type: dict
checkpoint:
  description:
    - C(exists), C(latest) (the tag in the C(latest) file), C(latest_step), C(tags) (every
      C(global_stepN) directory, ascending), C(tag) (O(checkpoint_tag), else C(latest)), C(files)
      (names in that tag), C(shape) (TP, PP, DP, C(no_pipeline_parallel) inferred from those names)
      and C(iteration) (Megatron's C(latest_checkpointed_iteration.txt)).
  returned: always
  type: dict
record:
  description: The parsed O(record_file), or null when it does not exist.
  returned: always
  type: dict
shm_removed:
  description: The stale buffers removed (or, in check mode, that would be) for O(shm_sweep_user).
  returned: always
  type: list
  elements: str
  sample: ["/dev/shm/deepspeed_allreduce_buffer_2000_10.10.0.11_29500_0"]
"""

import json
import os
import pwd
import re
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import checkpoints as _launch_checkpoints
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import data_index as _launch_data_index
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import logs as _launch_logs
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import processes as _launch_processes
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import shm as _launch_shm
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import status as _launch_status
from ansible_collections.megatron_ds.cluster.plugins.module_utils._slurm import job as _slurm_job


ARGUMENT_SPEC = dict(
    ports=dict(type="list", elements="int", default=[]),
    rank_pattern=dict(type="str"),
    paths=dict(type="list", elements="path", default=[]),
    pid_file=dict(type="path"),
    log_file=dict(type="path"),
    log_offset=dict(type="int", default=0),
    log_max_bytes=dict(type="int", default=4 * 1024 * 1024),
    log_tail=dict(type="int", default=15),
    checkpoint_dir=dict(type="path"),
    checkpoint_tag=dict(type="str"),
    record_file=dict(type="path"),
    shm_sweep_user=dict(type="str"),
    shm_dir=dict(type="path", default="/dev/shm"),
    slurm_job_id=dict(type="str"),
    wait_seconds=dict(type="int", default=0),
    wait_iterations=dict(type="int", default=0),
    wait_interval=dict(type="int", default=5),
)


def _read(path):
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def _checkpoint(directory, tag=None):
    info = {"dir": directory, "exists": os.path.isdir(directory), "latest": None, "latest_step": None,
            "tags": [], "tag": tag, "files": [], "shape": None, "iteration": None}
    if not info["exists"]:
        return info
    info["latest"] = _read(os.path.join(directory, "latest"))
    info["latest_step"] = _launch_checkpoints.step_of(info["latest"])
    iteration = _read(os.path.join(directory, "latest_checkpointed_iteration.txt"))
    info["iteration"] = int(iteration) if iteration and iteration.isdigit() else iteration
    tags = []
    for name in os.listdir(directory):
        step = _launch_checkpoints.step_of(name)
        if step is not None and os.path.isdir(os.path.join(directory, name)):
            tags.append((step, name))
    info["tags"] = [name for step, name in sorted(tags)]
    info["tag"] = tag or info["latest"]
    if info["tag"] and os.path.isdir(os.path.join(directory, info["tag"])):
        info["files"] = sorted(os.listdir(os.path.join(directory, info["tag"])))
        info["shape"] = _launch_checkpoints.checkpoint_shape(info["files"])
    return info


def _log(module):
    path = module.params["log_file"]
    summary = {"file": path, "exists": bool(path) and os.path.isfile(path), "size": None, "tail": []}
    if not summary["exists"]:
        return summary
    try:
        lines, size = _launch_status.tail_text(path, module.params["log_offset"], module.params["log_max_bytes"])
    except (IOError, OSError) as exc:
        summary["error"] = str(exc)
        return summary
    summary.update(_launch_logs.parse_log(lines))
    summary["size"] = size
    tail = module.params["log_tail"]
    # The launcher's command line carries the job's environment (tokens): hidden here.
    summary["tail"] = [_launch_logs.redact_exports(line)[:400] for line in lines[-tail:]] if tail > 0 else []
    return summary


def _launcher(pid_file):
    if not pid_file:
        return {}
    text = _read(pid_file)
    if not text or not text.isdigit():
        return {"pid": None, "alive": False, "pid_file": pid_file}
    pid = int(text)
    # /proc/<pid> of a zombie still exists; its state says it is gone.
    alive = False
    stat = _read("/proc/%d/stat" % pid)
    if stat:
        alive = stat.rsplit(")", 1)[-1].split()[0:1] != ["Z"]
    return {"pid": pid, "alive": alive, "pid_file": pid_file}


def _slurm(module, job_id):
    """squeue, then sacct, then scontrol: what Slurm says about the job (empty output where a
    command is missing or fails, e.g. sacct without accounting storage)."""
    if not job_id:
        return {}
    texts = {}
    commands = {
        "squeue": ["squeue", "--noheader", "--states=all", "--jobs=%s" % job_id, "--format=%s" % _slurm_job.SQUEUE_FORMAT],
        "sacct": ["sacct", "--noheader", "--parsable2", "--jobs=%s" % job_id, "--format=%s" % _slurm_job.SACCT_FORMAT],
        "scontrol": ["scontrol", "show", "job", "-o", str(job_id)],
    }
    for name, argv in commands.items():
        binary = module.get_bin_path(argv[0])
        if not binary:
            texts[name] = ""
            continue
        rc, out, _err = module.run_command([binary] + argv[1:])
        texts[name] = out if rc == 0 else ""
    return _slurm_job.job_state(job_id, texts.get("squeue"), texts.get("sacct"), texts.get("scontrol"))


def waiting_on(launcher, log, iterations, deadline, now):
    """Whether a waiting probe reads again: time is left, the launcher runs, and the log has
    fewer than ``iterations`` iterations (0: wait for the launcher's end)."""
    if now >= deadline or not launcher.get("alive"):
        return False
    return not (iterations > 0 and (log.get("iterations_logged") or 0) >= iterations)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    params = module.params
    listeners = _launch_processes.scan_listeners(params["ports"]) if params["ports"] else {}
    ranks = []
    if params["rank_pattern"]:
        try:
            ranks = _launch_processes.scan_processes(params["rank_pattern"], exclude=[os.getpid(), os.getppid()])
        except re.error as exc:
            module.fail_json(msg="job_probe: rank_pattern %r is not a valid regular expression: %s"
                             % (params["rank_pattern"], exc))
    paths = {}
    for path in params["paths"]:
        paths[path] = {"exists": os.path.exists(path),
                       "size": os.path.getsize(path) if os.path.isfile(path) else None}
        if path.endswith(".idx") and os.path.isfile(path):
            paths[path]["index"] = _launch_data_index.read_index_header(path)
    record = None
    if params["record_file"]:
        text = _read(params["record_file"])
        if text:
            try:
                record = json.loads(text)
            except ValueError:
                record = None
    removed = []
    if params["shm_sweep_user"]:
        try:
            uid = pwd.getpwnam(params["shm_sweep_user"]).pw_uid
        except KeyError:
            module.fail_json(msg="job_probe: shm_sweep_user %r is not a user on this node; expected the training "
                             "user (megatron_launch_user)" % params["shm_sweep_user"])
        removed = _launch_shm.sweep_shm_buffers(uid, params["shm_dir"], remove=not module.check_mode)
    started = time.time()
    while True:
        slurm = _slurm(module, params["slurm_job_id"])
        launcher = _launcher(params["pid_file"])
        if slurm:
            launcher = {"slurm_job_id": slurm["job_id"], "state": slurm["state"], "alive": slurm["alive"]}
        log = _log(module)
        if not waiting_on(launcher, log, params["wait_iterations"], started + params["wait_seconds"], time.time()):
            break
        time.sleep(max(1, params["wait_interval"]))
    module.exit_json(
        waited=round(time.time() - started, 1),
        changed=bool(removed),
        shm_removed=removed,
        listeners=dict((str(port), owners) for port, owners in listeners.items()),
        ranks=ranks,
        paths=paths,
        launcher=launcher,
        slurm=slurm,
        log=log,
        checkpoint=_checkpoint(params["checkpoint_dir"], params["checkpoint_tag"]) if params["checkpoint_dir"] else {},
        record=record,
    )


if __name__ == "__main__":
    main()
