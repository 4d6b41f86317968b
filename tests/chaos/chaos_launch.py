# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The chaos test's stand-in for train.yml: start the burn-in on the nodes of the supervisor's
inventory, each "node" a torch launcher (torchrun) on this machine, one CPU rank per node.

    chaos_launch.py STATE_DIR INVENTORY_JSON OVERRIDES_JSON

What it shares with train.yml is what the test is about: the nodes come from the inventory the
supervisor wrote, the ds_config from the job model (_job_args.ds_config of the spec and the
overrides), the log gets train.yml's start and exit lines, launch.json its pid and offset, and
--universal-checkpoint comes from megatron_job_extra_args. Test-only fault injection: a file
STATE_DIR/nan_at makes this launch's loss NaN 4 steps after the tag it resumes from (the file is
used once).
"""
from __future__ import annotations

import datetime
import json
import os
import shlex
import socket
import subprocess
import sys

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job.args import ds_config


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
    with open(os.path.join(state, "ds_config.json"), "w") as handle:
        json.dump(ds_config(spec), handle)
    ckpt = os.path.join(state, "ckpt")
    env = dict(os.environ, DS_ACCELERATOR="cpu", OMP_NUM_THREADS="1")
    nan_file = os.path.join(state, "nan_at")
    if os.path.exists(nan_file):
        with open(os.path.join(ckpt, "latest")) as handle:
            step = int(handle.read().strip().replace("global_step", ""))
        env["MEGATRON_DS_BURNIN_NAN_AT_STEP"] = str(step + 4)
        os.unlink(nan_file)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    burnin = ["--ds-config", os.path.join(state, "ds_config.json"), "--layers", "2", "--hidden", "64", "--heads", "4",
              "--seq", "32", "--vocab", "256", "--pool", "8", "--probe-steps", "1", "--steps", "100000",
              "--save", ckpt, "--save-interval", str(spec["megatron_job_save_interval"]), "--load", ckpt]
    if "--universal-checkpoint" in extra_args:
        burnin.append("--universal-checkpoint")
    commands = []
    for index, node in enumerate(nodes):
        argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(len(nodes)), "--node_rank", str(index),
                "--nproc_per_node", "1", "--master_addr", "127.0.0.1", "--master_port", str(port),
                os.path.join(state, node, "burnin_gpt.py")] + burnin
        commands.append(" ".join(shlex.quote(a) for a in argv))
    log = os.path.join(state, "train.log")
    offset = os.path.getsize(log) if os.path.exists(log) else 0
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    with open(log, "a") as handle:
        handle.write("=== megatron_launch %s: start burnin_gpt.py chaos nodes=%s\n" % (now, ",".join(nodes)))
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
