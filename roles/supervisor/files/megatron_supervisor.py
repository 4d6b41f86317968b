# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""megatron_ds.cluster supervisor: watch a job started by train.yml, and on a failure stop every
rank, find the culprit, re-plan, pick (and convert) the checkpoint and relaunch through train.yml.

    megatron_supervisor.py --config /etc/megatron-supervisor/<job>.json [--once]

Inputs, each turned into one observation per poll (plugins/module_utils/_heal/policy.py classify):
* the training log, read from the launch record's offset with the collection's one log reader
  (_launch_logs.parse_log over _megatron_log.parse_iteration): iteration progress and its time (the
  stall timeout is derived from it), NaN/inf, failed saves, the launcher's exit status;
* rank liveness: over ssh on every node, the rank processes (the launch record's rank_pattern)
  and their states (T = stopped, D = stuck in the kernel); ssh failing = node unreachable;
* Alertmanager's webhook (POST /alerts on the chosen address): a firing alert triggers a poll at
  once; MegatronNodeDown names the node to check;
* the fabric gate's verdict (fabric_verdict_file, which playbooks/fabric_check.yml writes): a node
  of the job it names is a node fault (fabric_slow), acted on once per verdict.

Actions (what _heal.decide says), in this order: SIGTERM to every rank (they save on SIGTERM),
SIGKILL after stop_timeout (a hung rank cannot save); the culprit checks (ssh, and the optional
probe command per node: the preflight facts call or the burn-in probe); the re-plan
(_heal.replan: same TP/PP, fewer nodes, same global batch) or a spare; the newest complete tag
(megatron_checkpoint_info's checks, _checkpoint.analyse) written to `latest`; DeepSpeed's
universal checkpoint conversion when the DP size changes under ZeRO >= 1 (_heal.conversion_needed);
then the relaunch command (train.yml: validation and preflight gate, job files, launch) with the
nodes and overrides as extra variables. Each incident is one JSON line (_incident) and the
Prometheus textfile is rewritten.

Standard library plus the collection's module_utils (deployed beside it by roles/supervisor).
"""
from __future__ import annotations

import argparse
import datetime
import hmac
import json
import math
import os
import re
import shlex
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

# torch.save's zip writer does not name the errno of a write that failed (a full disk gives
# "unexpected pos 704 vs 598" or "PytorchStreamWriter failed writing file ...").
_SAVE_FAILED = re.compile(r"No space left on device|(?:saving|save_checkpoint|save checkpoint).*(?:Error|error|failed)"
                          r"|PytorchStreamWriter failed writing|inline_container\.cc:\d+\] \. unexpected pos")
_NODE_DOWN = "MegatronNodeDown"
# The supervisor's own files, the training user's alone (write_private).
PRIVATE_MODE = 0o600


def now_iso() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _lib(config: Mapping[str, Any]) -> None:
    """Make the collection's module_utils importable (the library os_base installs, os_base_library_dir)."""
    lib = config.get("lib")
    if lib and lib not in sys.path:
        sys.path.insert(0, lib)


def fill(argv: Sequence[str], **values: Any) -> List[str]:
    """A command template: each {name} in an argument is replaced by its value."""
    out = []
    for arg in argv:
        for key, value in values.items():
            arg = arg.replace("{%s}" % key, str(value))
        out.append(arg)
    return out


# ------------------------------------------------------------------------------------------------
# Observing the job
# ------------------------------------------------------------------------------------------------
class Progress:
    """Iteration progress from successive log reads: when the last new iteration came, the
    measured iteration times, the first NaN/inf iteration, the last failed save."""

    def __init__(self) -> None:
        self.iteration: Optional[int] = None
        self.at: Optional[float] = None
        self.times: List[float] = []
        self.nonfinite: Optional[int] = None
        self.save_failed: Optional[str] = None
        # {iteration: loss} as logged (the lm loss, or the burn-in's loss): the checked resume
        # compares a relaunch's first iterations with the run before it (_heal.resume).
        self.losses: Dict[int, float] = {}

    def update(self, summary: Mapping[str, Any], lines: Sequence[str], clock: float) -> None:
        from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds.log import (
            is_finite,
            is_nonfinite,
            parse_iteration,
        )

        if self.at is None:
            self.at = clock
        last = summary.get("last") or {}
        iteration = last.get("iteration")
        if iteration is not None and (self.iteration is None or iteration > self.iteration):
            self.iteration, self.at = iteration, clock
            seconds = last.get("step_time_s")
            if seconds is None and last.get("iteration_time_ms") is not None:
                seconds = last["iteration_time_ms"] / 1000.0
            if seconds is not None:
                self.times = (self.times + [float(seconds)])[-20:]
        for line in lines:
            record = parse_iteration(line)
            if record is not None and is_nonfinite(record) and self.nonfinite is None:
                self.nonfinite = record["iteration"]
            elif record is not None and is_finite(record.get("lm_loss")):
                self._loss(record["iteration"], record["lm_loss"])
            elif record is None and "BURNIN step=" in line:
                match = re.search(r"BURNIN step=(\d+) loss=(\S+)", line)
                loss = _float(match.group(2)) if match else None
                if match and not is_finite(loss) and self.nonfinite is None:
                    self.nonfinite = int(match.group(1))
                elif match:
                    self._loss(int(match.group(1)), loss)
            if _SAVE_FAILED.search(line):
                self.save_failed = line.strip()[:300]

    # The newest losses kept: the check needs the last ones before a tag.
    KEEP = 400

    def iteration_seconds(self) -> Optional[float]:
        """The median of the recent iteration times (what an iteration lost costs), or None."""
        return sorted(self.times)[len(self.times) // 2] if self.times else None

    def _loss(self, iteration: int, loss: Any) -> None:
        self.losses[int(iteration)] = float(loss)
        if len(self.losses) > self.KEEP:
            del self.losses[min(self.losses)]


def _float(text: str) -> Optional[float]:
    try:
        return float(text)
    except ValueError:
        return None


class Shell:
    """Commands on the nodes over ssh (the cluster_ssh role's keys, as the training user)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.ssh = list(config.get("ssh") or ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10"])
        self.addresses = dict(config.get("addresses") or {})
        self.timeout = int(config.get("ssh_timeout", 30))

    def run(self, node: str, command: str) -> subprocess.CompletedProcess:
        address = self.addresses.get(node, node)
        # A transport with {node} in it (e.g. docker exec {node} sh -c) takes the command last.
        argv = fill(self.ssh, node=address) + [command] if any("{node}" in a for a in self.ssh) \
            else self.ssh + [address, command]
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=self.timeout, check=False)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(argv, 255, "", "ssh timed out after %d s" % self.timeout)

    def ranks(self, node: str, pattern: str) -> Optional[List[str]]:
        """Process states (ps STAT) of the node's rank processes; None when the node does not answer."""
        proc = self.run(node, "for p in $(pgrep -f %s); do ps -o stat= -p $p; done; true" % shlex.quote(pattern))
        if proc.returncode == 255:
            return None
        return [line.strip() for line in proc.stdout.splitlines() if line.strip()]

    def signal(self, node: str, pattern: str, sig: str) -> None:
        self.run(node, "pkill -%s -f %s; true" % (sig, shlex.quote(pattern)))


def launch_record(config: Mapping[str, Any]) -> Dict[str, Any]:
    """The launch record train.yml wrote (launch.json: pid or Slurm job id, log file, nodes); {}
    when there is none yet."""
    try:
        with open(config["record_file"]) as handle:
            record = json.load(handle)
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def _record_pid(config: Mapping[str, Any]) -> int:
    try:
        return int(launch_record(config).get("pid") or 0)
    except (ValueError, TypeError):
        return 0


def slurm_job(config: Mapping[str, Any]) -> Optional[str]:
    """The Slurm job id of the launch (megatron_launch_backend: slurm), else None."""
    record = launch_record(config)
    if record.get("backend") == "slurm" and record.get("slurm_job_id"):
        return str(record["slurm_job_id"])
    return None


def slurm_job_state(job_id: str, run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> Optional[str]:
    """The job's state in squeue (PENDING, RUNNING, COMPLETING ...); None once it has left the
    queue. squeue failing (slurmctld away) counts as still there: no verdict without an answer."""
    try:
        proc = run(["squeue", "--noheader", "--jobs", job_id, "--format=%T"], capture_output=True, text=True,
                   timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "UNKNOWN"
    if proc.returncode != 0:
        # "Invalid job id specified": slurmctld has already forgotten a finished job.
        return None if "Invalid job id" in (proc.stderr or "") else "UNKNOWN"
    states = [line.strip() for line in proc.stdout.splitlines() if line.strip()]
    return states[0] if states else None


def log_file(config: Mapping[str, Any]) -> str:
    """The log of the current launch: the record's (the Slurm backend logs per job id), else the
    configured one."""
    return str(launch_record(config).get("log_file") or config["log_file"])


def launcher_alive(config: Mapping[str, Any], run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> bool:
    """Whether the launcher of the launch record lives: train.yml's wrapper shell on this head
    node (a zombie counts as gone), or under Slurm the job in the queue. True when the record names
    neither (then only its exit line in the log counts)."""
    job = slurm_job(config)
    if job:
        return slurm_job_state(job, run) is not None
    pid = _record_pid(config)
    if pid <= 0:
        return True
    try:
        with open("/proc/%d/stat" % pid) as handle:
            if handle.read().rsplit(")", 1)[-1].split()[0] == "Z":
                return False
    except (OSError, IndexError):
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def read_log(config: Mapping[str, Any], progress: Progress, log_offset: int, clock: float) -> Dict[str, Any]:
    """Read the job's log from the launch's offset into ``progress``; its summary (_launch_logs.parse_log)."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import logs as _launch_logs
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import status as _launch_status

    lines: List[str] = []
    path = log_file(config)
    if os.path.exists(path):
        lines = _launch_status.tail_text(path, log_offset)[0]
    summary = _launch_logs.parse_log(lines)
    progress.update(summary, lines, clock)
    return summary


def fabric_slow(config: Mapping[str, Any], nodes: Sequence[str], history: Sequence[Mapping[str, Any]]) -> Dict[str, str]:
    """{node: evidence} for the job's nodes that the fabric gate's verdict names and no incident has
    acted on (_fabric.verdict.slow_nodes). A verdict that cannot be read names nobody: it is printed
    and the job left as it is, since excluding on a broken file would take a healthy node out."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._fabric import verdict as _fabric_verdict

    try:
        document = _fabric_verdict.read(str(config.get("fabric_verdict_file") or ""))
    except (OSError, ValueError) as error:
        print("supervisor: %s" % error, file=sys.stderr)
        return {}
    return _fabric_verdict.slow_nodes(document, nodes, history)


def observe(config: Mapping[str, Any], shell: Shell, progress: Progress, alerts: Sequence[Mapping[str, Any]],
            clock: float, log_offset: int, nodes: Optional[Sequence[str]] = None,
            run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
            history: Sequence[Mapping[str, Any]] = ()) -> Dict[str, Any]:
    """One observation of the job on ``nodes`` (the job's nodes now; default the configured ones)
    for _heal.classify; ``history``, the incidents so far, tells a fabric verdict already acted on."""
    nodes = list(nodes if nodes is not None else config["nodes"])
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import policy as _heal

    summary = read_log(config, progress, log_offset, clock)
    obs: Dict[str, Any] = {"unreachable": [], "exited": {}, "stopped_ranks": {}}
    if summary.get("launcher_rc") == 0:
        obs["finished"] = True
        return obs
    expected = int(config["gpus_per_node"])
    down_alerts = {a.get("node") for a in alerts if a.get("alertname") == _NODE_DOWN}
    counts = {}
    for node in nodes:
        states = shell.ranks(node, config["rank_pattern"])
        if states is None:
            # Asked twice: one ssh that times out on a loaded node must not cost the node its place.
            states = shell.ranks(node, config["rank_pattern"])
        if states is None:
            obs["unreachable"].append(node)
            continue
        counts[node] = len(states)
        stuck = sum(1 for s in states if s[:1] in ("T", "D"))
        if stuck:
            obs["stopped_ranks"][node] = stuck
    for node in down_alerts - set(obs["unreachable"]) - {None}:
        if node in nodes and shell.run(node, "true").returncode == 255:
            obs["unreachable"].append(node)
    if summary.get("started"):
        # Nodes short of ranks. When some nodes still run theirs, the short ones are where the
        # failure started (the others follow once their collectives fail): they are the suspects.
        # When every node is short, nothing says which went first: no suspect.
        short = [n for n, c in counts.items() if c < expected]
        # Before this launch's first iteration, ranks come up at different times: no verdict
        # from the counts then (a launcher that fails, or the startup timeout, still counts).
        if short and len(short) < len(counts) and progress.iteration is not None:
            obs["exited"] = {n: summary.get("launcher_rc") for n in short}
        elif short and (summary.get("launcher_rc") not in (None, 0)
                        or (summary.get("launcher_rc") is None and not launcher_alive(config, run))):
            # Every rank gone and the launcher failed (or died before it could say): no suspect.
            obs["exited"] = {"*": summary.get("launcher_rc")}
    if progress.iteration is not None or summary.get("started"):
        obs["stalled_for"] = clock - (progress.at if progress.at is not None else clock)
        obs["stall_timeout"] = _heal.stall_timeout(progress.times, config.get("policy"))
    if progress.nonfinite is not None:
        obs["nonfinite_iteration"] = progress.nonfinite
    if progress.save_failed:
        obs["save_failed"] = progress.save_failed
    slow = fabric_slow(config, nodes, history)
    if slow:
        obs["fabric_slow"] = slow
    return obs


# ------------------------------------------------------------------------------------------------
# Acting on a decision
# ------------------------------------------------------------------------------------------------
def stop_ranks(config: Mapping[str, Any], shell: Shell, nodes: Sequence[str], sleep: Callable[[float], None],
               run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> None:
    """SIGTERM (the ranks save and exit), then SIGKILL what is left after stop_timeout; SIGCONT
    first so that a stopped (SIGSTOP) rank can act on the signals."""
    pattern = config["rank_pattern"]
    for node in nodes:
        shell.signal(node, pattern, "CONT")
        shell.signal(node, pattern, "TERM")
    deadline = float(config.get("stop_timeout", 120))
    waited = 0.0
    while waited < deadline and any(shell.ranks(n, pattern) for n in nodes):
        sleep(5.0)
        waited += 5.0
    for node in nodes:
        shell.signal(node, pattern, "KILL")
    # CPU ranks (the cpu profile, the sim cluster) leave DeepSpeed's /dev/shm buffers behind when
    # they are killed; each relaunch would add a set, in RAM (_launch_shm.SHM_BUFFER_PREFIX).
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import shm as _launch_shm
    for node in nodes:
        shell.run(node, _launch_shm.shm_sweep_command())
    # Under Slurm the job itself: its allocation must be free before the relaunch asks for the
    # nodes again, and a batch script that outlives the stop would log into the next job's time.
    job = slurm_job(config)
    if job:
        run(["scancel", job], capture_output=True, text=True, timeout=60, check=False)
        for _wait in range(int(deadline // 2) + 1):  # pylint: disable=unused-variable
            if slurm_job_state(job, run) is None:
                break
            sleep(2.0)
        return
    # The launcher too (train.yml starts it with setsid: its pid is its process group), and wait
    # for it: a launcher that outlives the stop would append its exit line to the next launch's log.
    pid = _record_pid(config)
    for sig in (15, 9):
        if not pid or not launcher_alive(config):
            break
        try:
            os.killpg(pid, sig)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                break
        for _wait in range(20):  # pylint: disable=unused-variable
            if not launcher_alive(config):
                break
            sleep(0.5)


def culprits(config: Mapping[str, Any], shell: Shell, nodes: Sequence[str]) -> Dict[str, str]:
    """Nodes whose checks fail: unreachable over ssh, or the probe command (rc != 0)."""
    bad = {}
    probe = config.get("probe_command") or []
    for node in nodes:
        if shell.run(node, "true").returncode == 255:
            bad[node] = "unreachable over ssh"
            continue
        if probe:
            proc = subprocess.run(fill(probe, node=node), capture_output=True, text=True,
                                  timeout=int(config.get("probe_timeout", 900)), check=False)
            if proc.returncode != 0:
                bad[node] = "probe failed (rc %d): %s" % (proc.returncode, (proc.stdout + proc.stderr).strip()[-200:])
    return bad


GPU_PROBE_MODULE = "ansible_collections.megatron_ds.cluster.plugins.module_utils._heal.gpu_faults"


def gpu_faults(config: Mapping[str, Any], shell: Shell, nodes: Sequence[str]) -> Dict[str, Dict[str, str]]:
    """The GPU probe (_heal.gpu_faults, from the library os_base installs) on each node over ssh:
    {node: {tier, evidence}} for the nodes whose GPUs show a fault. A probe that cannot run is no
    verdict (the ssh check and probe_command judge the node)."""
    if not config.get("gpu_probe", True):
        return {}
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import gpu_faults as _gpu

    library = shlex.quote(str(config.get("lib") or "/usr/local/lib/megatron-ds"))
    command = "PYTHONPATH=%s python3 -m %s" % (library, GPU_PROBE_MODULE)
    out = {}
    for node in nodes:
        proc = shell.run(node, command)
        lines = (proc.stdout or "").strip().splitlines()
        if proc.returncode != 0 or not lines:
            continue
        try:
            verdict = json.loads(lines[-1])
        except ValueError:
            continue
        if isinstance(verdict, dict) and verdict.get("tier") in (_gpu.EXCLUDE, _gpu.RESET, _gpu.RETRY, _gpu.RECORD):
            out[node] = {"tier": verdict["tier"], "evidence": _gpu.summary(verdict)}
    return out


def reset_gpus(config: Mapping[str, Any], nodes: Sequence[str],
               run: Callable[..., subprocess.CompletedProcess]) -> Dict[str, str]:
    """gpu_reset_command for each node (the ranks are stopped by then); {node: why} where it could
    not be done, which makes the node a node fault."""
    command = list(config.get("gpu_reset_command") or [])
    if not command:
        return {n: "GPU reset needed, and no supervisor_gpu_reset_command to do it" for n in nodes}
    failed = {}
    for node in nodes:
        proc = run(fill(command, node=node), capture_output=True, text=True, check=False,
                   timeout=int(config.get("probe_timeout", 900)))
        if proc.returncode != 0:
            failed[node] = "GPU reset failed (rc %d): %s" % (proc.returncode, (proc.stdout + proc.stderr).strip()[-200:])
    return failed


def choose_checkpoint(config: Mapping[str, Any], saved_shape: Mapping[str, Any],
                      before_iteration: Optional[int]) -> Dict[str, Any]:
    """The newest complete tag (below ``before_iteration`` for a NaN rollback) on the head node,
    judged by megatron_checkpoint_info's checks with the shape it was saved with; `latest` is
    rewritten to it when it is not the newest."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils import _checkpoint
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import policy as _heal

    path = config["checkpoint_dir"]
    expect = {"tensor_parallel": saved_shape.get("tensor_parallel"), "pipeline_parallel": saved_shape.get("pipeline_parallel"),
              "data_parallel": saved_shape.get("data_parallel"), "zero_stage": saved_shape.get("zero_stage")}
    report = _checkpoint.analyse(_checkpoint.scan_dir(path), expect={k: v for k, v in expect.items() if v is not None})
    choice = _heal.resume_tag(report, before_iteration)
    if choice["tag"] and report.get("latest") != choice["tag"]:
        # DeepSpeed's own file, read by every rank: the mode DeepSpeed gives it, stated.
        handle = os.open(os.path.join(path, "latest"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        with os.fdopen(handle, "w") as out:
            out.write(choice["tag"])
    return choice


def relaunch_hosts(config: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """Each node's connection variables in the relaunch inventory. relaunch_connection
    ``training_user`` (the default): ssh as the training user to the address the rank watcher uses,
    without become (the job's files, ranks and checkpoints are that user's; the supervisor needs no
    root). ``inventory``: the controller's connection variables as the role copied them."""
    hosts = {n: dict(v or {}) for n, v in (config.get("inventory_hosts") or {}).items()}
    if config.get("relaunch_connection", "training_user") != "training_user":
        return hosts
    addresses = dict(config.get("addresses") or {})
    out = {}
    for node in list(dict.fromkeys(list(config["nodes"]) + list(config.get("spares") or []) + list(hosts))):
        out[node] = {"ansible_connection": "ssh", "ansible_user": config.get("user") or "megatron",
                     "ansible_host": addresses.get(node) or node, "ansible_become": False,
                     "ansible_python_interpreter": hosts.get(node, {}).get("ansible_python_interpreter") or "/usr/bin/python3"}
    return out


def write_inventory(config: Mapping[str, Any], nodes: Sequence[str], spares: Sequence[str]) -> str:
    """The inventory train.yml relaunches with (Ansible's yaml inventory plugin reads .json):
    the job's variables as the controller had them, megatron_nodes = the nodes kept (in their
    order: the first hosts global rank 0), megatron_head, megatron_spares, and the excluded nodes
    in megatron_excluded so that they stay visible."""
    hosts = relaunch_hosts(config)
    excluded = [n for n in config["nodes"] if n not in nodes and n not in spares]
    head = config.get("head") or nodes[0]
    inventory = {"all": {
        "vars": dict(config.get("inventory_vars") or {}),
        "hosts": {n: hosts.get(n, {}) for n in list(dict.fromkeys(list(config["nodes"]) + list(spares) + [head]))},
        "children": {
            "megatron_nodes": {"hosts": {n: {} for n in nodes}},
            "megatron_head": {"hosts": {head: {}}},
            "megatron_spares": {"hosts": {n: {} for n in spares if n not in nodes}},
            "megatron_excluded": {"hosts": {n: {} for n in excluded}},
        },
    }}
    path = os.path.join(os.path.dirname(config["incident_file"]), "supervisor-inventory.json")
    write_private(path, json.dumps(inventory, indent=1, sort_keys=True))
    return path


def write_private(path: str, text: str) -> None:
    """A file of the supervisor's own (the relaunch inventory, its extra variables, the recovery
    journal), 0600 whatever the umask, replaced atomically: they carry the job's variables, which
    may hold a credential (megatron_job_env), and only the supervisor's user reads them."""
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import incident as _incident

    _incident.write_textfile(os.path.dirname(path) or ".", os.path.basename(path), text, mode=PRIVATE_MODE)


def recovery_file(config: Mapping[str, Any]) -> str:
    """The recovery journal: what a decided recovery still has to do, beside the incident file."""
    return str(config.get("recovery_file")
               or os.path.join(os.path.dirname(config["incident_file"]), "supervisor-recovery.json"))


def read_recovery(config: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The journal a supervisor left when it was killed in the middle of a recovery, or None."""
    try:
        with open(recovery_file(config)) as handle:
            journal = json.load(handle)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        # A journal cut short can only come from a kill while it was written, before the
        # incident was recorded: the fault is still there and is decided again.
        sys.stderr.write("supervisor: recovery journal unreadable, ignored: %s\n" % exc)
        return None
    return journal if isinstance(journal, dict) and isinstance(journal.get("record"), dict) else None


def write_recovery(config: Mapping[str, Any], journal: Optional[Mapping[str, Any]]) -> None:
    """Write the journal atomically (write_private: a synced temporary file renamed over the old
    one), or remove it."""
    path = recovery_file(config)
    if journal is None:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        return
    write_private(path, json.dumps(journal, sort_keys=True))


def launch_fingerprint(config: Mapping[str, Any]) -> List[Any]:
    """What changes when train.yml launches: the launcher's pid (or Slurm job) and its log offset."""
    record = launch_record(config)
    return [record.get("pid"), record.get("slurm_job_id"), record.get("log_offset")]


class Supervisor:
    """The loop: observe, classify, decide, act, record. Hooks make it testable without a cluster."""

    def __init__(self, config: Mapping[str, Any], shell: Optional[Shell] = None,
                 run: Callable[..., subprocess.CompletedProcess] = subprocess.run,
                 sleep: Callable[[float], None] = time.sleep, clock: Callable[[], float] = time.monotonic) -> None:
        from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import policy as _heal
        from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import incident as _incident
        from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import resume as _resume

        self.heal, self.incident, self.resume = _heal, _incident, _resume
        self.config = dict(config)
        self.policy = _heal.policy(config.get("policy"))
        self.shell = shell or Shell(config)
        self.run, self.sleep, self.clock = run, sleep, clock
        self.nodes = list(config["nodes"])
        self.spares = list(config.get("spares") or [])
        self.history = _incident.read(config["incident_file"])[0]
        # A restarted supervisor goes on with the nodes its last relaunch used.
        for record in reversed(self.history):
            if record.get("action") in (_heal.RETRY, _heal.RESET, _heal.REPLACE, _heal.EXCLUDE, _heal.ROLL_BACK,
                                        _heal.FALL_BACK) and record.get("job_nodes"):
                self.nodes = list(record["job_nodes"])
                break
        self.progress = Progress()
        self.alerts: List[Dict[str, Any]] = []
        self.lock = threading.Lock()
        self.log_offset = self._record_offset()
        self.stopped = bool(self.history) and self.history[-1].get("action") == _heal.STOP
        self.pending_resume: Optional[Dict[str, Any]] = None
        # The losses the launches before the running one logged: a fault soon after a relaunch
        # (before the next save) is resumed from that same tag, and its checked resume needs the
        # losses logged before and after that tag, which the running launch has few or none of.
        self.earlier_losses: Dict[int, float] = {}
        self.universal = False
        self.watching_since = self._watching_since()
        # Killed between a decision and the end of its relaunch (systemd restarts the service):
        # the first poll finishes that recovery instead of seeing the stopped job as a new fault.
        self.recovery = None if self.stopped else read_recovery(config)

    def convert(self, tag: str) -> subprocess.CompletedProcess:
        """DeepSpeed's ds_to_universal on one tag, with the trainer's own code importable: a
        Megatron-DeepSpeed checkpoint pickles objects of the megatron package (config pythonpath)."""
        return self.run(self.heal.universal_command(self.config["python"], self.config["checkpoint_dir"], tag,
                                                    bool(self.config.get("inject_missing_state", True))),
                        capture_output=True, text=True, check=False,
                        env=self.heal.universal_env(os.environ, self.config.get("pythonpath")))

    def _watching_since(self) -> float:
        """The goodput ledger's start: the incident file's first WATCHING event, written once by
        the first supervisor that watched this job, so that a restart keeps the wall time."""
        path = self.config["incident_file"]
        if os.path.exists(path):
            with open(path) as handle:
                since = self.incident.watching_since(handle)
            if since is not None:
                return since
        # Rounded down, never up: a start in the future would make the first wall time negative.
        since = math.floor(time.time() * 1000) / 1000
        self.incident.append(path, {"event": self.incident.WATCHING, "at": now_iso(), "epoch": since})
        return since

    def goodput(self) -> Optional[Dict[str, Any]]:
        return self.incident.ledger(self.history, time.time() - self.watching_since,
                                    self.progress.iteration_seconds())

    def _record_offset(self) -> int:
        try:
            return int(launch_record(self.config).get("log_offset") or 0)
        except (ValueError, TypeError):
            return 0

    def add_alerts(self, payload: Mapping[str, Any]) -> int:
        """Alertmanager's webhook body: firing alerts, with the node from the instance label."""
        got = 0
        for alert in payload.get("alerts") or []:
            if alert.get("status") != "firing":
                continue
            labels = alert.get("labels") or {}
            instance = str(labels.get("instance") or labels.get("node") or "")
            node = instance.rsplit(":", 1)[0] if instance else None
            with self.lock:
                self.alerts.append({"alertname": labels.get("alertname"), "node": node})
            got += 1
        return got

    def write_metrics(self) -> None:
        directory = self.config.get("textfile_dir")
        if directory and os.path.isdir(directory):
            self.incident.write_textfile(directory, "megatron_supervisor.prom",
                                         self.incident.prometheus_text(self.history, self.config["job"], up=True,
                                                                       goodput=self.goodput()))

    def saved_shape(self) -> Dict[str, Any]:
        spec = dict(self.config["spec"])
        spec["nodes"] = len(self.nodes)
        from ansible_collections.megatron_ds.cluster.plugins.module_utils._job.spec import derive, normalize

        derived = derive(normalize(spec), len(self.nodes), int(self.config["gpus_per_node"]))
        return {"tensor_parallel": derived["tensor_parallel"], "pipeline_parallel": derived["pipeline_parallel"],
                "data_parallel": derived["data_parallel_size"], "zero_stage": derived["zero_stage"],
                "bf16": derived["bf16"]}

    def poll(self) -> Optional[Dict[str, Any]]:
        """One round; returns the incident record when it acted."""
        if self.stopped:
            return None
        if self.recovery is not None:
            return self.finish_recovery()
        with self.lock:
            alerts, self.alerts = self.alerts, []
        clock = self.clock()
        obs = observe(self.config, self.shell, self.progress, alerts, clock, self.log_offset, self.nodes, self.run,
                      self.history)
        pending = self.pending_resume
        if pending and not pending.get("resumed") and self.progress.iteration is not None:
            # Any iteration counts as the job coming back; whether it is the right one is the check's.
            self.incident.append(self.config["incident_file"], {
                "event": self.incident.RESUMED, "at": now_iso(), "iteration": self.progress.iteration,
                "seconds": round(clock - pending["clock"], 1)})
            self.history = self.incident.read(self.config["incident_file"])[0]
            pending["resumed"] = True
        if pending and pending.get("resumed"):
            verdict = self.resume.judge(pending["before"], self.progress.losses, pending["step"], self.policy,
                                        self.same_data(pending))
            if verdict["verdict"] == self.resume.FAILED:
                return self.resume_failed(verdict, clock)
            if verdict["verdict"] == self.resume.OK:
                self.incident.append(self.config["incident_file"], {
                    "event": self.incident.RESUME_CHECKED, "at": now_iso(), "check": verdict})
                self.history = self.incident.read(self.config["incident_file"])[0]
                self.pending_resume = None
        fault = self.heal.classify(obs)
        self.write_metrics()
        if fault is None:
            return None
        return self.handle(fault, obs, clock)

    def handle(self, fault: Dict[str, Any], obs: Mapping[str, Any], clock: float) -> Dict[str, Any]:
        heal = self.heal
        before = self.saved_shape()
        reachable = [n for n in self.nodes if n not in (obs.get("unreachable") or [])]
        stop_ranks(self.config, self.shell, reachable, self.sleep, self.run)
        # The last iteration the job logged, read again once its ranks are gone: the observation
        # read the log before it asked the nodes (seconds on a loaded head node), and the ranks
        # that outlived the fault went on logging until they stopped.
        read_log(self.config, self.progress, self.log_offset, clock)
        last_iteration = self.progress.iteration
        if fault["kind"] == heal.TRANSIENT:
            bad = culprits(self.config, self.shell, reachable)
            gpu = gpu_faults(self.config, self.shell, [n for n in reachable if n not in bad])
            if bad or gpu:
                fault = heal.classify(dict(obs, bad_nodes=bad, gpu_faults=gpu)) or fault
        decision = heal.decide(fault, self.history, self.policy, self.nodes, self.spares)
        if decision["action"] == heal.RESET:
            failed = reset_gpus(self.config, fault["nodes"], self.run)
            if failed:
                fault = dict(fault, kind=heal.NODE, nodes=sorted(failed), evidence=fault["evidence"] + "; " + "; ".join(
                    "%s: %s" % kv for kv in sorted(failed.items())))
                decision = heal.decide(fault, self.history, self.policy, self.nodes, self.spares)
        converted = None
        resumed_step = None
        overrides: Dict[str, Any] = {}
        if decision["action"] == heal.EXCLUDE:
            plan = heal.replan(dict(self.config["spec"], nodes=len(self.nodes)), len(decision["nodes"]),
                               int(self.config["gpus_per_node"]),
                               gpu_memory_mib=int(self.config["gpu_memory_mib"]) if self.config.get("gpu_memory_mib") else None)
            if not plan["ok"]:
                decision = dict(decision, action=heal.STOP, reason="%s; re-plan refused: %s" % (decision["reason"], plan["reason"]))
            else:
                overrides.update(plan["overrides"])
                decision = dict(decision, reason="%s; %s" % (decision["reason"], plan["reason"]))
        if decision["action"] != heal.STOP:
            choice = choose_checkpoint(self.config, before, fault.get("iteration") if decision["action"] == heal.ROLL_BACK else None)
            resumed_step = choice["step"]
            if decision["action"] == heal.ROLL_BACK and choice["tag"] is None:
                decision = dict(decision, action=heal.STOP, reason=decision["reason"] + "; no complete tag before it: stop")
        if decision["action"] != heal.STOP and resumed_step is not None:
            self.nodes = list(decision["nodes"])
            after = self.saved_shape()
            why = heal.conversion_needed(before, after)
            if why:
                tag = "global_step%d" % resumed_step
                proc = self.convert(tag)
                if proc.returncode != 0:
                    decision = dict(decision, action=heal.STOP, reason="%s; %s, and ds_to_universal failed: %s"
                                    % (decision["reason"], why, (proc.stdout + proc.stderr).strip()[-300:]))
                else:
                    converted = tag + "_universal"
                    self.universal = True
        elif decision["action"] != heal.STOP:
            self.nodes = list(decision["nodes"])
        record = self.incident.make_record(now_iso(), fault, decision, last_iteration, resumed_step, converted)
        return self.carry_out(record, decision, {
            "overrides": overrides, "resumed_step": resumed_step, "clock": clock,
            "before_losses": self.loss_history(), "saved_shape": before})

    def loss_history(self) -> Dict[int, float]:
        """The losses the job logged: the earlier launches', where the running launch logged the
        same iteration its value (the newest Progress.KEEP iterations)."""
        merged = dict(self.earlier_losses)
        merged.update(self.progress.losses)
        return {i: merged[i] for i in sorted(merged)[-Progress.KEEP:]}

    def _keep_earlier(self, before_losses: Optional[Mapping[Any, float]]) -> None:
        """The losses a relaunch is checked against become the history before the new launch (a
        fallback passes those of the launch before the failed resume: the failed one's are left out)."""
        self.earlier_losses = {int(i): float(loss) for i, loss in (before_losses or {}).items()}

    def carry_out(self, record: Dict[str, Any], decision: Mapping[str, Any], relaunch: Dict[str, Any]) -> Dict[str, Any]:
        """Record the decision and relaunch, exactly once even if the supervisor is killed half-way:
        the recovery journal (what to relaunch, with the incident record itself) is written before
        the record and removed once the relaunch is done; a restarted supervisor finishes what it
        finds there (finish_recovery)."""
        if decision["action"] == self.heal.STOP:
            self.record_decision(record, decision)
            return record
        self._ledger_fields(record)
        wait = float(decision.get("wait_s") or 0)
        write_recovery(self.config, {
            "record": record, "relaunch": relaunch, "nodes": list(self.nodes), "universal": self.universal,
            "launch_before": launch_fingerprint(self.config), "relaunch_after": time.time() + wait})
        self.record_decision(record, decision)
        if wait:
            self.sleep(wait)
        self.relaunch(**relaunch)
        write_recovery(self.config, None)
        self.write_metrics()
        return record

    def finish_recovery(self) -> Dict[str, Any]:
        """The recovery a killed supervisor left in its journal: its incident recorded once (the kill
        may have come before the record), then either the job it had launched already is adopted
        (the launch record changed since the decision), or whatever a half-done launch started is
        stopped and the job relaunched as decided (--universal-checkpoint and overrides kept)."""
        journal, self.recovery = self.recovery or {}, None
        record = journal["record"]
        if not any(h.get("at") == record.get("at") and h.get("fault") == record.get("fault") for h in self.history):
            self.incident.append(self.config["incident_file"], record)
            self.history.append(record)
        self.nodes = list(journal.get("nodes") or self.nodes)
        relaunch = dict(journal.get("relaunch") or {})
        relaunch["before_losses"] = {int(k): v for k, v in (relaunch.get("before_losses") or {}).items()}
        now = self.clock()
        if relaunch.get("clock") is None or float(relaunch["clock"]) > now:
            relaunch["clock"] = now  # another boot: the monotonic clock started again
        if launch_fingerprint(self.config) != list(journal.get("launch_before") or []):
            how = "adopted"
            self.log_offset = self._record_offset()
            self.progress = Progress()
            self.pending_resume = self._expected_resume(relaunch)
            self._keep_earlier(relaunch["before_losses"])
        else:
            how = "relaunched"
            stop_ranks(self.config, self.shell, list(self.nodes), self.sleep, self.run)
            remaining = float(journal.get("relaunch_after") or 0) - time.time()
            if remaining > 0:
                self.sleep(remaining)
            self.universal = bool(journal.get("universal"))
            self.relaunch(**relaunch)
        self.incident.append(self.config["incident_file"], {
            "event": self.incident.RECOVERY_FINISHED, "at": now_iso(), "incident_at": record.get("at"), "how": how})
        self.history = self.incident.read(self.config["incident_file"])[0]
        write_recovery(self.config, None)
        self.write_metrics()
        return dict(record, recovery_finished=how)

    def _ledger_fields(self, record: Dict[str, Any]) -> None:
        """The ledger's figures: how long the fault went unseen, and what an iteration costs."""
        if self.progress.at is not None and "seconds_to_detect" not in record:
            record["seconds_to_detect"] = round(max(0.0, self.clock() - self.progress.at), 1)
        step = self.progress.iteration_seconds()
        if step is not None and "iteration_seconds" not in record:
            record["iteration_seconds"] = round(step, 3)

    def record_decision(self, record: Dict[str, Any], decision: Mapping[str, Any]) -> bool:
        """Append the incident record and keep it; True when the decision stops the supervisor
        (then the metrics are written for the last time and nothing is relaunched)."""
        self._ledger_fields(record)
        self.incident.append(self.config["incident_file"], record)
        self.history.append(record)
        if decision["action"] != self.heal.STOP:
            return False
        self.stopped = True
        self.write_metrics()
        return True

    def resume_failed(self, verdict: Mapping[str, Any], clock: float) -> Dict[str, Any]:
        """A relaunch whose first iterations do not continue the run: stop it, keep every tag (the
        one that resumed wrongly too, for a post-mortem), and fall back once to the complete tag
        before it; a second failure stops the job."""
        heal = self.heal
        pending = dict(self.pending_resume or {})
        self.pending_resume = None
        stop_ranks(self.config, self.shell, list(self.nodes), self.sleep, self.run)
        read_log(self.config, self.progress, self.log_offset, clock)
        step = pending.get("step")
        fault = {"fault": heal.RESUME_FAILED, "kind": "resume", "nodes": [], "evidence": verdict["reason"]}
        done = sum(1 for h in self.history if h.get("fault") == heal.RESUME_FAILED and h.get("action") == heal.FALL_BACK)
        decision: Dict[str, Any] = {"action": heal.STOP, "nodes": list(self.nodes), "reason": ""}
        choice: Dict[str, Any] = {"tag": None, "step": None}
        if done < int(self.policy["max_resume_fallbacks"]) and step is not None:
            saved = pending.get("saved_shape") or self.saved_shape()
            choice = choose_checkpoint(self.config, saved, step)
        converted = None
        if choice.get("tag") is None:
            decision["reason"] = (
                "the resume from global_step%s failed its check %s; %s: stop and alert, every tag kept" % (
                    step, "again" if done else "",
                    "fallbacks used up (max_resume_fallbacks %s)" % self.policy["max_resume_fallbacks"] if done
                    else "no complete tag before it"))
        else:
            decision.update(action=heal.FALL_BACK, reason=(
                "the resume from global_step%s failed its check: fall back to %s (global_step%s kept for inspection; "
                "fallback %d of %s)" % (step, choice["tag"], step, done + 1, self.policy["max_resume_fallbacks"])))
            saved = pending.get("saved_shape")
            why = heal.conversion_needed(saved, self.saved_shape()) if saved else None
            if why:
                proc = self.convert(choice["tag"])
                if proc.returncode != 0:
                    decision.update(action=heal.STOP, reason="%s; %s, and ds_to_universal failed: %s" % (
                        decision["reason"], why, (proc.stdout + proc.stderr).strip()[-300:]))
                else:
                    converted = choice["tag"] + "_universal"
                    self.universal = True
        record = self.incident.make_record(now_iso(), fault, decision, self.progress.iteration, choice.get("step"),
                                           converted)
        # The check that failed is this incident's cause; "resume_check" stays for the check of the
        # relaunch this record makes (a resume_checked event fills it).
        record["failed_check"] = dict(verdict)
        return self.carry_out(record, decision, {
            "overrides": dict(pending.get("overrides") or {}), "resumed_step": choice["step"], "clock": clock,
            "before_losses": dict(pending.get("before") or {}), "saved_shape": pending.get("saved_shape")})

    def relaunch(self, overrides: Dict[str, Any], resumed_step: Optional[int], clock: float,
                 before_losses: Optional[Mapping[int, float]] = None,
                 saved_shape: Optional[Mapping[str, Any]] = None) -> None:
        """train.yml again, on the nodes kept: the validation and preflight gate, the job files,
        the launch. --universal-checkpoint rides along only for the first launch after a conversion
        (later saves are ordinary tags again, read through `latest`)."""
        inventory = write_inventory(self.config, self.nodes, self.spares)
        extra = dict(overrides)
        if self.universal:
            extra["megatron_job_extra_args"] = list(self.config["spec"].get("megatron_job_extra_args") or []) + [
                "--universal-checkpoint"]
            self.universal = False
        if slurm_job(self.config):
            # The backend the job was launched with (an operator's -e is not in the inventory the
            # supervisor copied), and on the nodes kept, not on any N of the partition (the lost
            # node may not be marked DOWN yet).
            extra.update(megatron_launch_backend="slurm", megatron_launch_slurm_pin_nodes=True)
        path = os.path.join(os.path.dirname(self.config["incident_file"]), "supervisor-overrides.json")
        write_private(path, json.dumps(extra, sort_keys=True))
        proc = self.run(fill(self.config["relaunch_command"], overrides=path, inventory=inventory,
                             nodes=",".join(self.nodes)),
                        capture_output=True, text=True, check=False)
        self.log_offset = self._record_offset()
        self.progress = Progress()
        self.pending_resume = self._expected_resume({
            "overrides": overrides, "resumed_step": resumed_step, "clock": clock, "before_losses": before_losses,
            "saved_shape": saved_shape})
        self._keep_earlier(before_losses)
        if proc.returncode != 0:
            record = {"at": now_iso(), "fault": "relaunch_failed", "kind": "node", "nodes": [], "action": self.heal.STOP,
                      "reason": "the relaunch command failed (rc %d): %s" % (proc.returncode, (proc.stdout + proc.stderr)[-400:]),
                      "iterations_lost": 0}
            self.incident.append(self.config["incident_file"], record)
            self.history.append(record)
            self.stopped = True

    def same_data(self, pending: Mapping[str, Any]) -> bool:
        """Whether the relaunch reads, iteration for iteration, the batches the interrupted run
        read: always for pretrain_gpt.py (its sampler continues from the consumed samples), and
        for a trainer whose data follows the ranks (config data_follows_samples false: the
        burn-in) only while the data-parallel size is the one the tags were saved with."""
        if self.config.get("data_follows_samples", True):
            return True
        saved = (pending.get("saved_shape") or {}).get("data_parallel")
        return saved is None or saved == self.saved_shape().get("data_parallel")

    @staticmethod
    def _expected_resume(relaunch: Mapping[str, Any]) -> Dict[str, Any]:
        """What the checked resume compares with after a relaunch: the losses the interrupted run
        logged, and what a fallback needs (the shape the tags were saved with, the overrides)."""
        return {"step": relaunch.get("resumed_step"), "clock": relaunch.get("clock"),
                "before": dict(relaunch.get("before_losses") or {}), "saved_shape": dict(relaunch.get("saved_shape") or {}),
                "overrides": dict(relaunch.get("overrides") or {})}


# ------------------------------------------------------------------------------------------------
# Alertmanager webhook
# ------------------------------------------------------------------------------------------------
def read_token(path: Optional[str]) -> Optional[str]:
    """The webhook's shared token (the role writes it once, mode 0600); None without a path."""
    if not path:
        return None
    with open(path) as handle:
        token = handle.read().strip()
    if not token:
        raise SystemExit("megatron-supervisor: the webhook token file %s is empty; re-run supervise.yml" % path)
    return token


def serve_webhook(supervisor: Supervisor, host: str, port: int, wake: threading.Event,
                  token: Optional[str] = None) -> HTTPServer:
    """Alertmanager's webhook on host:port. With ``token`` a request must carry
    ``Authorization: Bearer <token>`` (Alertmanager's http_config.authorization), even on
    loopback, where any local user could otherwise post a forged alert; one without it gets 401
    and nothing is acted on."""
    expected = ("Bearer " + token).encode() if token else None

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            if self.path.rstrip("/") != "/alerts":
                self.send_error(404, "POST Alertmanager's webhook to /alerts")
                return
            if expected is not None and not hmac.compare_digest(
                    (self.headers.get("Authorization") or "").encode(), expected):
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Bearer realm="megatron-supervisor"')
                self.end_headers()
                self.wfile.write(b"a bearer token is required\n")
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                payload = json.loads(self.rfile.read(min(length, 1 << 20)) or b"{}")
            except ValueError:
                self.send_error(400, "not JSON")
                return
            got = supervisor.add_alerts(payload if isinstance(payload, dict) else {})
            if got:
                wake.set()
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok\n")

        def log_message(self, *args: Any) -> None:  # keep the journal for incidents
            return

    server = HTTPServer((host, port), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--once", action="store_true", help="one poll, print the observation's outcome, exit")
    args = parser.parse_args(argv)
    with open(args.config) as handle:
        config = json.load(handle)
    _lib(config)
    supervisor = Supervisor(config)
    wake = threading.Event()
    if config.get("listen_port") and not args.once:
        serve_webhook(supervisor, config.get("listen_address", "127.0.0.1"), int(config["listen_port"]), wake,
                      read_token(config.get("webhook_token_file")))
    while True:
        record = supervisor.poll()
        if record is not None:
            print(json.dumps(record, sort_keys=True), flush=True)
        if args.once:
            return 0
        wake.wait(float(config.get("poll_interval", 15)))
        wake.clear()


if __name__ == "__main__":
    sys.exit(main())
