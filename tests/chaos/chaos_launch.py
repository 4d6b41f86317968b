# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The chaos test's stand-in for train.yml: start the trainer on the nodes of the supervisor's
inventory, each "node" a torch launcher (torchrun) on this machine, one CPU rank per node. The
trainer is the burn-in, or, where STATE_DIR/trainer.json names a Megatron-DeepSpeed copy, the real
pretrain_gpt.py with the argument list the job model renders for train.sh (_job.args.train_args).

    chaos_launch.py STATE_DIR INVENTORY_JSON OVERRIDES_JSON

What it shares with train.yml is what the test is about: the nodes come from the inventory the
supervisor wrote, the ds_config from the job model (``_job.args.ds_config`` of the spec and the
overrides), the log gets train.yml's start and exit lines, launch.json its pid and offset, and
--universal-checkpoint comes from megatron_job_extra_args. Test-only fault injection: a file
STATE_DIR/nan_at makes this launch's loss NaN 4 steps after the tag it resumes from (the file is
used once). STATE_DIR/drop_optimizer_state zeroes Adam's moments and step count in the tag this
launch resumes from before the ranks start (used once): the optimizer state that a faulty
conversion or copy loses silently, which only the checked resume can notice.
"""
from __future__ import annotations

import datetime
import json
import os
import shlex
import socket
import subprocess
import sys

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job.args import ds_config, train_args

# What "dropping the optimizer state" zeroes, in ZeRO shards and universal checkpoints alike.
OPTIMIZER_STATE_KEYS = ("exp_avg", "exp_avg_sq", "step")


def _zero_state(obj, key=None):
    """``obj`` with every tensor under an OPTIMIZER_STATE_KEYS key zeroed (dicts, lists walked)."""
    import torch  # only this fault needs it

    if isinstance(obj, dict):
        # A universal checkpoint's exp_avg.pt is {"param": tensor, "cat_dim": ..., ...}.
        return {k: _zero_state(v, k if k in OPTIMIZER_STATE_KEYS else key) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_zero_state(v, key) for v in obj)
    if key in OPTIMIZER_STATE_KEYS and torch.is_tensor(obj):
        return torch.zeros_like(obj)
    return obj


def drop_optimizer_state(ckpt: str, universal: bool) -> str:
    """Zero the optimizer state of the tag ``latest`` (or ``latest_universal``) names; returns the tag."""
    import torch

    with open(os.path.join(ckpt, "latest_universal" if universal else "latest")) as handle:
        tag = handle.read().strip()
    for root, _dirs, files in os.walk(os.path.join(ckpt, tag)):
        for name in files:
            path = os.path.join(root, name)
            if universal and name in ("exp_avg.pt", "exp_avg_sq.pt", "step.pt"):
                state = torch.load(path, weights_only=False)
                torch.save(_zero_state(state, name[:-3]), path)
            elif not universal and name.endswith("optim_states.pt"):
                torch.save(_zero_state(torch.load(path, weights_only=False)), path)
    return tag


def trainer_commands(state: str, spec: dict, nodes: list, extra_args: list, port: int) -> tuple:
    """The trainer's script name, one torchrun command line per node, and its environment additions."""
    ckpt = os.path.join(state, "ckpt")
    trainer_file = os.path.join(state, "trainer.json")
    trainer = {}
    env = {}
    if os.path.exists(trainer_file):
        with open(trainer_file) as handle:
            trainer = json.load(handle)
    if trainer.get("megatron_dir"):
        # The real trainer: each node's copy of pretrain_gpt.py (STATE_DIR/NODE/pretrain_gpt.py, so
        # that pgrep tells the nodes apart) with train.sh's own argument list.
        job = dict(spec, megatron_job_checkpoint_dir=ckpt, megatron_job_workdir=state,
                   megatron_job_extra_args=extra_args, megatron_job_gpus_per_node=1)
        script, args = "pretrain_gpt.py", train_args(job)
        # The checkout first; what this launcher was given after it (a MEGATRON_DS_PYTHON wrapper's
        # tokenizer packages).
        env["PYTHONPATH"] = os.pathsep.join([trainer["megatron_dir"]] + [p for p in os.environ.get("PYTHONPATH", "").split(
            os.pathsep) if p])
    else:
        script = "burnin_gpt.py"
        args = ["--ds-config", os.path.join(state, "ds_config.json"), "--layers", "2", "--hidden", "64", "--heads",
                "4", "--seq", "32", "--vocab", "256", "--pool", "8", "--probe-steps", "1", "--steps", "100000",
                "--save", ckpt, "--save-interval", str(spec["megatron_job_save_interval"]), "--load", ckpt]
        if "--universal-checkpoint" in extra_args:
            args.append("--universal-checkpoint")
    commands = []
    for index, node in enumerate(nodes):
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(len(nodes)), "--node_rank", str(index),
                "--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--master_port", str(port),
                os.path.join(state, node, script)] + args
        commands.append(" ".join(shlex.quote(a) for a in argv))
    return script, commands, env


def main(state: str, inventory_path: str, overrides_path: str) -> int:
    with open(os.path.join(state, "spec.json")) as handle:
        spec = json.load(handle)
    with open(inventory_path) as handle:
        nodes = list(json.load(handle)["all"]["children"]["megatron_nodes"]["hosts"])
    with open(overrides_path) as handle:
        overrides = json.load(handle)
    extra_args = overrides.pop("megatron_job_extra_args", [])
    spec.update(overrides)
    spec["nodes"] = len(nodes)
    # STATE_DIR is the job's workdir: both trainers read STATE_DIR/ds_config.json.
    with open(os.path.join(state, "ds_config.json"), "w") as handle:
        json.dump(ds_config(dict(spec, megatron_job_gpus_per_node=1)), handle)
    ckpt = os.path.join(state, "ckpt")
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    nan_file = os.path.join(state, "nan_at")
    if os.path.exists(nan_file):
        with open(os.path.join(ckpt, "latest")) as handle:
            step = int(handle.read().strip().replace("global_step", ""))
        env["MEGATRON_DS_BURNIN_NAN_AT_STEP"] = str(step + 4)
        os.unlink(nan_file)
    drop_file = os.path.join(state, "drop_optimizer_state")
    if os.path.exists(drop_file):
        tag = drop_optimizer_state(ckpt, "--universal-checkpoint" in extra_args)
        with open(drop_file + ".done", "w") as handle:
            handle.write(tag + "\n")
        os.unlink(drop_file)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    script, commands, trainer_env = trainer_commands(state, spec, nodes, extra_args, port)
    env.update(trainer_env)
    log = os.path.join(state, "train.log")
    offset = os.path.getsize(log) if os.path.exists(log) else 0
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with open(log, "a") as handle:
        handle.write("=== megatron_launch %s: start %s chaos nodes=%s\n" % (now, script, ",".join(nodes)))
    # One wrapper, like train.yml's: every node's launcher, then the exit line with the worst status.
    script = "rc=0; " + " ".join("( %s ) & " % c for c in commands) + \
        'for p in $(jobs -p); do wait $p || rc=$?; done; ' \
        'printf "=== megatron_launch %s: launcher exited rc=%s\\n" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$rc"'
    with open(log, "a") as out:
        proc = subprocess.Popen(["/bin/bash", "-c", script], stdout=out, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL, start_new_session=True, cwd=state)
    with open(os.path.join(state, "launch.json"), "w") as handle:
        json.dump({"pid": proc.pid, "log_offset": offset, "nodes": nodes}, handle)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
