# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The supervisor (roles/supervisor/files/megatron_supervisor.py) watching the real pretrain_gpt.py
on one GPU host, with faults injected: what the Docker chaos scenario does with the burn-in, here
with Megatron-DeepSpeed's own log, checkpoints and data order.

    python3 bench/gpu/mds_grid.py render --dest SRC --only g1-m4 \\
        --set megatron_job_num_layers=4 --set megatron_job_hidden_size=1024 ... (docs/benchmarks.md)
    python3 bench/gpu/supervise_gpu.py --job SRC/jobs/g1-m4 --data SRC/data --out $OUT

The job files are the megatron_job role's, rendered by mds_grid.py; the launch is train.yml's in
miniature (the start and exit lines around `bash train.sh >> log`, launch.json with the pid and
the log offset), and the relaunch command the supervisor runs is this script's `launch`. The
"ssh" to the one node runs the command here. Faults, one after the other, no step by hand:

1. SIGKILL of the rank: retried from the newest tag; the iterations logged again must print the
   losses the run printed before the fault (Megatron's data order follows the consumed samples);
2. the newest tag cut short, then SIGKILL of the rank: the previous complete tag is used.

Writes OUT/supervise_gpu.json (the incident records, seconds from fault to first new iteration,
the losses compared) and OUT/train.log.
"""
import argparse
import datetime
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
SUPERVISOR = os.path.join(REPO, "roles", "supervisor", "files", "megatron_supervisor.py")
RANK_PATTERN = r"python[0-9.]* -u ([^ ]*/)?pretrain_gpt\.py( |$)"


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def launch(workdir):
    """train.yml's start in miniature: a start line, `bash train.sh` in its own session with its
    output appended to the log, the exit line, and launch.json."""
    log = os.path.join(workdir, "logs", "train.log")
    os.makedirs(os.path.dirname(log), exist_ok=True)
    offset = os.path.getsize(log) if os.path.exists(log) else 0
    with open(log, "a") as handle:
        handle.write("=== megatron_launch %s: start pretrain_gpt.py %s/train.sh\n" % (now(), workdir))
    script = ('bash %s/train.sh >>%s 2>&1; rc=$?; printf "=== megatron_launch %%s: launcher exited rc=%%s\\n" '
              '"$(date -u +%%Y-%%m-%%dT%%H:%%M:%%SZ)" "$rc" >>%s' % (workdir, log, log))
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1",
               PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(["bash", "-c", script], cwd=workdir, env=env, stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    with open(os.path.join(workdir, "launch.json"), "w") as handle:
        json.dump({"pid": proc.pid, "log_offset": offset, "log_file": log, "nodes": ["gpu"]}, handle)
    return log


def cmd_launch(args):
    with open(args.overrides) as handle:
        overrides = json.load(handle)
    if overrides:  # one node: no re-plan, no conversion
        print("supervise_gpu launch: unexpected overrides %s" % overrides, file=sys.stderr)
        return 2
    launch(args.workdir)
    return 0


def cmd_ssh(args):
    """The node is this host: run the command here."""
    os.execv("/bin/sh", ["/bin/sh", "-c", args.command])


def rank_pids():
    out = subprocess.run(["pgrep", "-f", RANK_PATTERN], capture_output=True, text=True, check=False).stdout
    return [int(p) for p in out.split()]


def runs(log):
    """(iteration, loss) per launch (one list per start line), read by the collection's log reader."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import logs as _launch_logs  # pylint: disable=import-error
    with open(log, errors="replace") as handle:
        return _launch_logs.launch_losses(handle)


def last_iteration(log):
    found = runs(log) if os.path.exists(log) else []
    return found[-1][-1][0] if found and found[-1] else 0


def tags(ckpt):
    return sorted((int(n[len("global_step"):]) for n in os.listdir(ckpt) if re.match(r"global_step\d+$", n))) \
        if os.path.isdir(ckpt) else []


def incidents(path):
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import (  # pylint: disable=import-error
        incident as _incident,
    )
    return _incident.read(path)[0]


def wait(what, predicate, timeout=300.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(1.0)
    raise SystemExit("supervise_gpu: timed out after %.0f s waiting for %s" % (timeout, what))


def compare(log, step):
    """The losses of the iterations the resumed run logged again, against the run before."""
    found = runs(log)
    before = dict(pair for run in found[:-1] for pair in run)
    after = dict(found[-1])
    same = sorted(i for i in after if i in before)
    return {"resumed_first": min(after) if after else None, "same_iterations": same,
            "before": [before[i] for i in same], "after": [after[i] for i in same],
            "max_abs_diff": max((abs(after[i] - before[i]) for i in same), default=None),
            "loss_at_tag": before.get(step)}


def _terminated(signum, frame):  # pylint: disable=unused-argument
    raise SystemExit("supervise_gpu: terminated (signal %d); writing what was measured" % signum)


def cmd_run(args):
    signal.signal(signal.SIGTERM, _terminated)
    sys.path.insert(0, HERE)
    import mds_grid  # pylint: disable=import-outside-toplevel

    os.makedirs(args.out, exist_ok=True)
    meta = json.load(open(os.path.join(args.job, "config.json")))
    meta["src"] = args.job
    mds_grid.prepare(meta, 0, args.data)
    workdir = meta["workdir"]
    ckpt = meta["vars"]["megatron_job_checkpoint_dir"]
    save_interval = int(meta["vars"]["megatron_job_save_interval"])
    state = tempfile.mkdtemp(prefix="supervise-gpu-")
    lib = os.path.join(state, "lib")
    os.makedirs(os.path.join(lib, "ansible_collections", "megatron_ds"))
    os.symlink(REPO, os.path.join(lib, "ansible_collections", "megatron_ds", "cluster"))
    sys.path.insert(0, lib)  # the collection's module_utils, for this script and the supervisor
    logs = os.path.join(state, "logs")
    os.makedirs(logs)
    config = {
        "job": meta["config"]["name"], "lib": lib, "nodes": ["gpu"], "spares": [], "head": "gpu", "gpus_per_node": 1,
        "rank_pattern": RANK_PATTERN, "log_file": os.path.join(workdir, "logs", "train.log"),
        "record_file": os.path.join(workdir, "launch.json"), "checkpoint_dir": ckpt, "python": sys.executable,
        "incident_file": os.path.join(logs, "incidents.jsonl"), "textfile_dir": logs, "listen_port": 0,
        "poll_interval": 2, "stop_timeout": 120, "ssh_timeout": 60,
        "ssh": [sys.executable, os.path.abspath(__file__), "ssh", "{node}"],
        "policy": {"backoff_base": 1, "backoff_max": 2, "stall_min": 120, "startup_timeout": 900, "max_retries": 4},
        "spec": {k: v for k, v in meta["vars"].items() if k.startswith("megatron_job_")},
        "inventory_vars": {}, "inventory_hosts": {},
        "relaunch_command": [sys.executable, os.path.abspath(__file__), "launch", workdir, "{overrides}"],
    }
    config["spec"]["megatron_job_stack_profile"] = meta["vars"].get("megatron_stack_profile", "cu130")
    with open(os.path.join(state, "supervisor.json"), "w") as handle:
        json.dump(config, handle)
    started = time.time()
    log = launch(workdir)
    supervisor = subprocess.Popen([sys.executable, SUPERVISOR, "--config", os.path.join(state, "supervisor.json")],
                                  stdout=open(os.path.join(args.out, "supervisor.out"), "w"), stderr=subprocess.STDOUT)
    figures = []
    result = {"job": meta["config"]["name"], "vars": meta["vars"], "figures": figures}
    try:
        wait("a saved tag and 5 more iterations", lambda: tags(ckpt) and last_iteration(log) >= tags(ckpt)[-1] + 5
             and last_iteration(log) >= 2 * save_interval + 5, 300)
        figures.append({"fault": "startup", "seconds": round(time.time() - started, 1)})

        # 1. SIGKILL of the rank
        t0 = time.time()
        os.kill(rank_pids()[0], signal.SIGKILL)
        rec = wait("incident 1 resumed", lambda: (incidents(config["incident_file"]) or [{}])[0].get("resumed_at") and
                   incidents(config["incident_file"])[0])
        rec = dict(rec, fault_to_new_iteration_s=round(time.time() - t0, 1))
        wait("10 iterations after the resume", lambda: len(runs(log)[-1]) >= 10)
        rec["loss"] = compare(log, rec["resumed_step"])
        figures.append(rec)
        print(json.dumps(rec, sort_keys=True), flush=True)

        # 2. the newest tag cut short, then SIGKILL
        first = rec["resumed_step"]
        wait("two new tags", lambda: len([t for t in tags(ckpt) if t > first]) >= 2 and last_iteration(log) >= tags(ckpt)[-1] + 3)
        t0 = time.time()
        pid = rank_pids()[0]
        os.kill(pid, signal.SIGSTOP)  # hold the rank while its newest tag is damaged
        newest = "global_step%d" % tags(ckpt)[-1]
        shards = sorted(n for n in os.listdir(os.path.join(ckpt, newest)) if n.endswith("optim_states.pt"))
        target = os.path.join(ckpt, newest, shards[0])
        size = os.path.getsize(target)
        with open(target, "r+b") as handle:
            handle.truncate(size // 2)
        os.kill(pid, signal.SIGKILL)
        rec = wait("incident 2 resumed", lambda: len(incidents(config["incident_file"])) >= 2 and
                   incidents(config["incident_file"])[1].get("resumed_at") and incidents(config["incident_file"])[1])
        rec = dict(rec, fault_to_new_iteration_s=round(time.time() - t0, 1), damaged=newest)
        wait("10 iterations after the resume", lambda: len(runs(log)[-1]) >= 10)
        rec["loss"] = compare(log, rec["resumed_step"])
        figures.append(rec)
        print(json.dumps(rec, sort_keys=True), flush=True)
        result["ok"] = True
    finally:
        supervisor.terminate()
        supervisor.wait(timeout=30)
        for pid in rank_pids():
            os.kill(pid, signal.SIGKILL)
        try:
            with open(os.path.join(workdir, "launch.json")) as handle:
                os.killpg(int(json.load(handle)["pid"]), signal.SIGKILL)
        except (OSError, ValueError, KeyError):
            pass
        result["incidents"] = incidents(config["incident_file"])
        result["seconds"] = round(time.time() - started, 1)
        with open(os.path.join(args.out, "supervise_gpu.json"), "w") as handle:
            json.dump(result, handle, indent=1, sort_keys=True)
        if os.path.exists(log):
            shutil.copy(log, os.path.join(args.out, "train.log"))
    return 0 if result.get("ok") else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("run")
    p.add_argument("--job", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("launch")
    p.add_argument("workdir")
    p.add_argument("overrides")
    p.set_defaults(func=cmd_launch)
    p = sub.add_parser("ssh")
    p.add_argument("node")
    p.add_argument("command")
    p.set_defaults(func=cmd_ssh)
    args = parser.parse_args()
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
