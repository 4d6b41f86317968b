# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Launch, status and stop logic of a Megatron-DeepSpeed (or burn-in) job, as pure functions.

* ``rank_pattern``: the ``pgrep -f`` / ``pkill -f`` regular expression that matches the *rank*
  processes of a training script and nothing else on the node (not the DeepSpeed runner, not
  pdsh, not ``deepspeed.launcher.launch``: signalling those makes the launcher SIGKILL the ranks
  30 s later, possibly in the middle of a checkpoint write).
* ``parse_log``: what a job log says: Megatron's iteration lines (read by ``_megatron_log``, the
  parser the monitoring exporter shares), the burn-in's lines, saved and loaded checkpoints,
  the SIGTERM exit and the launcher's exit status.
* ``checkpoint_shape``: TP, PP and DP of a DeepSpeed checkpoint tag, from its file names.
* ``burnin_report``: per-node tokens/s and TFLOP/s of a burn-in, slow nodes, loss trend.
* ``prelaunch_problems``: every reason not to start a job, each naming the node.
* ``scan_processes`` / ``scan_listeners``: /proc readers used by the job_probe module.
* ``sweep_shm_buffers``: removes the /dev/shm buffers DeepSpeed's CPU all-reduce leaves behind.

No Ansible imports; Python 3.8 compatible (parts run on the nodes through job_probe).
"""
from __future__ import annotations

import json
import os
import re
import statistics
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from ._megatron_log import parse_iteration, parse_number

# The launcher wrapper appends this line when the DeepSpeed runner exits (start task of the
# megatron_launch role); ``parse_log`` reads the status back.
LAUNCH_MARK = "=== megatron_launch"
_LAUNCH_START = re.compile(r"^=== megatron_launch (\S+): start (\S+) (.*)$")
_LAUNCH_EXIT = re.compile(r"^=== megatron_launch (\S+): launcher exited rc=(-?\d+)")

_MEGATRON_SAVED = re.compile(r"successfully saved checkpoint at iteration\s+(\d+) to (\S+)")
_MEGATRON_LOADED = re.compile(r"successfully loaded checkpoint from (\S+) .*?at iteration (\d+)")
_MEGATRON_SIGTERM = "exiting program after receiving SIGTERM"

# The burn-in (roles/megatron_job/files/burnin_gpt.py)
_BURNIN_STEP = re.compile(r"BURNIN step=(\d+) loss=([-+0-9.eEnaif]+) step_time=([0-9.]+)s tokens_per_s_per_rank=([0-9.]+)")
_RESULT_TAG = "BURNIN_RESULT "
_BURNIN_CHECKPOINT = re.compile(r"BURNIN checkpoint (\S+) \((\w+)\)")
_BURNIN_RESUMED = re.compile(r"BURNIN resumed from (\S+) at step (\d+)")

# Lines worth showing when a run failed (the last ones are kept).
_ERROR = re.compile(r"Traceback \(most recent call last\)|\b\w*(Error|Exception)\b: |exits with return code|"
                    r"ssh exited with exit code|Killed|Segmentation fault")

# DeepSpeed checkpoint files inside global_stepN (docs/upstream-facts.md §B)
_LAYER_FILE = re.compile(r"^layer_(\d+)-model_(\d+)-model_states\.pt$")
_MP_FILE = re.compile(r"^mp_rank_(\d+)_model_states\.pt$")
_ZERO_FILE = re.compile(r"^(?:bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_(optim|model)_states\.pt$")
_STEP_TAG = re.compile(r"^global_step(\d+)$")


# --------------------------------------------------------------------------------------------
# Processes
# --------------------------------------------------------------------------------------------
def rank_pattern(script: str) -> str:
    """The extended regex matching the rank processes of ``script`` in ``pgrep -f`` / ``pkill -f``.

    DeepSpeed's launch.py starts each rank as ``<python> -u <script> --local_rank=N ...``. The
    runner (``deepspeed ... script``), pdsh, its ssh and ``python -u -m deepspeed.launcher.launch
    ... script`` also carry the script in their command lines, but never right after ``-u``.
    Only the script's file name is required (train.sh passes ``pretrain_gpt.py`` relative to the
    checkout), with any directory before it.
    """
    name = os.path.basename(str(script).rstrip("/"))
    if not name:
        raise ValueError("rank_pattern: empty script name")
    return r"python[0-9.]* -u ([^ ]*/)?%s( |$)" % re.escape(name)


def _cmdline(raw: bytes) -> str:
    return raw.replace(b"\x00", b" ").decode("utf-8", "replace").strip()


def _local_rank(cmdline: str) -> Optional[int]:
    match = re.search(r"--local[_-]rank[= ](\d+)", cmdline)
    return int(match.group(1)) if match else None


def scan_processes(pattern: str, proc: str = "/proc", exclude: Sequence[int] = ()) -> List[Dict[str, Any]]:
    """Processes whose command line matches ``pattern`` (re.search), like ``pgrep -af``."""
    regex = re.compile(pattern)
    found = []
    try:
        entries = os.listdir(proc)
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit() or int(entry) in exclude:
            continue
        try:
            with open(os.path.join(proc, entry, "cmdline"), "rb") as handle:
                cmdline = _cmdline(handle.read())
            uid = os.stat(os.path.join(proc, entry)).st_uid
        except OSError:
            continue
        if cmdline and regex.search(cmdline):
            found.append({"pid": int(entry), "uid": uid, "cmdline": cmdline[:500],
                          "local_rank": _local_rank(cmdline)})
    return sorted(found, key=lambda item: item["pid"])


def _listening_inodes(proc: str, ports: Iterable[int]) -> Dict[str, int]:
    """socket inode -> port, for TCP sockets in LISTEN (state 0A) on one of ``ports``."""
    wanted = set(int(p) for p in ports)
    inodes: Dict[str, int] = {}
    for table in ("tcp", "tcp6"):
        try:
            with open(os.path.join(proc, "net", table), "r", encoding="ascii", errors="replace") as handle:
                rows = handle.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) < 10 or fields[3] != "0A":
                continue
            try:
                port = int(fields[1].rsplit(":", 1)[1], 16)
            except (IndexError, ValueError):
                continue
            if port in wanted:
                inodes[fields[9]] = port
    return inodes


def scan_listeners(ports: Iterable[int], proc: str = "/proc") -> Dict[int, List[Dict[str, Any]]]:
    """For each port, the processes listening on it (TCP), with pid and command line.

    A listener whose process cannot be found (another network namespace, or no permission to
    read /proc/<pid>/fd) is reported with pid None.
    """
    ports = [int(p) for p in ports]
    result: Dict[int, List[Dict[str, Any]]] = {port: [] for port in ports}
    inodes = _listening_inodes(proc, ports)
    if not inodes:
        return result
    owners: Dict[str, Dict[str, Any]] = {}
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        entries = []
    for entry in entries:
        fd_dir = os.path.join(proc, entry, "fd")
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(fd_dir, fd))
            except OSError:
                continue
            match = re.match(r"socket:\[(\d+)\]$", target)
            if match and match.group(1) in inodes and match.group(1) not in owners:
                try:
                    with open(os.path.join(proc, entry, "cmdline"), "rb") as handle:
                        cmdline = _cmdline(handle.read())
                except OSError:
                    cmdline = ""
                owners[match.group(1)] = {"pid": int(entry), "cmdline": cmdline[:300]}
    for inode, port in inodes.items():
        entry = owners.get(inode, {"pid": None, "cmdline": ""})
        if entry not in result[port]:
            result[port].append(entry)
    return result


# DeepSpeed's CPU all-reduce (csrc/cpu/comm/shm.cpp, shm_initialize) gives each rank a shared
# memory buffer named deepspeed_allreduce_buffer_<uid>_<MASTER_ADDR>_<MASTER_PORT>_<rank> of about
# 66 MB and never unlinks it (shared_close is not called). Every CPU job leaves them in /dev/shm,
# which is RAM: 211 of them held 14 GB of a 24 GB machine and starved it (docs/operations.md §7).
SHM_BUFFER_PREFIX = "deepspeed_allreduce_buffer_"


def stale_shm_buffers(names: Iterable[str], uid: int, mapped: Iterable[str],
                      shm_dir: str = "/dev/shm") -> List[str]:
    """The DeepSpeed buffers of ``uid`` among ``names`` (entries of ``shm_dir``) that no process
    maps (``mapped``: the paths of /proc/*/maps); those of a running job are kept, since a rank
    that starts late opens its peers' buffers by name."""
    prefix = "%s%d_" % (SHM_BUFFER_PREFIX, int(uid))
    in_use = set(mapped)
    return sorted(os.path.join(shm_dir, name) for name in names
                  if name.startswith(prefix) and os.path.join(shm_dir, name) not in in_use)


def mapped_paths(proc: str = "/proc", under: str = "/dev/shm/") -> List[str]:
    """Paths under ``under`` that some process maps, read from /proc/<pid>/maps (the processes one
    may read: enough for one's own buffers)."""
    found = set()
    try:
        entries = [e for e in os.listdir(proc) if e.isdigit()]
    except OSError:
        return []
    for entry in entries:
        try:
            with open(os.path.join(proc, entry, "maps"), "r", encoding="utf-8", errors="replace") as handle:
                for line in handle:
                    path = line.rstrip("\n").split(None, 5)[5:]
                    if path and path[0].startswith(under):
                        found.add(path[0].replace(" (deleted)", ""))
        except OSError:
            continue
    return sorted(found)


def sweep_shm_buffers(uid: int, shm_dir: str = "/dev/shm", proc: str = "/proc", remove: bool = True) -> List[str]:
    """Remove ``uid``'s DeepSpeed CPU all-reduce buffers that no process maps; the removed paths
    (with ``remove`` false, the paths that would be: check mode)."""
    try:
        names = os.listdir(shm_dir)
    except OSError:
        return []
    stale = stale_shm_buffers(names, uid, mapped_paths(proc, shm_dir.rstrip("/") + "/"), shm_dir)
    if not remove:
        return stale
    removed = []
    for path in stale:
        try:
            os.unlink(path)
            removed.append(path)
        except OSError:
            continue
    return removed


def shm_sweep_command(shm_dir: str = "/dev/shm") -> str:
    """sweep_shm_buffers as one POSIX shell command, for the supervisor, which reaches the nodes
    over ssh as the training user (its own uid, ``id -u``) and has no module there."""
    return ('for f in %s/%s"$(id -u)"_*; do [ -f "$f" ] || continue; '
            'grep -qsF "$f" /proc/[0-9]*/maps || rm -f "$f"; done; true') % (shm_dir.rstrip("/"), SHM_BUFFER_PREFIX)


# --------------------------------------------------------------------------------------------
# Logs
# --------------------------------------------------------------------------------------------
def burnin_results_in(line: str) -> Tuple[List[Dict[str, Any]], bool]:
    """Every ``BURNIN_RESULT {json}`` in one log line, and whether one did not decode.

    The ranks of a node share the launcher's stdout, and Python's print() writes the text and
    its newline separately, so two ranks' results can land on one line (and an empty line
    after it). Each JSON object is decoded where it starts, wherever it is in the line.
    """
    decoder = json.JSONDecoder()
    found: List[Dict[str, Any]] = []
    bad = False
    start = line.find(_RESULT_TAG)
    while start >= 0:
        begin = start + len(_RESULT_TAG)
        try:
            value, end = decoder.raw_decode(line, begin)
        except ValueError:
            bad = True
            end = begin
        else:
            if isinstance(value, dict):
                found.append(value)
            else:
                bad = True
        start = line.find(_RESULT_TAG, end)
    return found, bad


def iteration_entry(line: str) -> Tuple[Optional[str], Optional[Dict[str, Any]]]:
    """("megatron" | "burnin", the iteration's record) for an iteration line of either, else
    (None, None). A burn-in record carries iteration, lm_loss, step_time_s and
    tokens_per_gpu_per_second."""
    entry = parse_iteration(line)
    if entry is not None:
        return "megatron", entry
    step = _BURNIN_STEP.search(line)
    if not step:
        return None, None
    return "burnin", {
        "iteration": int(step.group(1)),
        "lm_loss": parse_number(step.group(2)),
        "step_time_s": float(step.group(3)),
        "tokens_per_gpu_per_second": float(step.group(4)),
    }


def launch_losses(lines: Iterable[str]) -> List[List[Tuple[int, float]]]:
    """(iteration, lm loss) of every launch in a job log, one list per ``=== megatron_launch
    ...: start`` line (iterations before the first start line, and lines without a loss, are left
    out): what a resumed launch logged again can be set beside what the launch before it logged."""
    out: List[List[Tuple[int, float]]] = []
    for line in lines:
        line = str(line).rstrip("\n")
        if _LAUNCH_START.match(line):
            out.append([])
            continue
        entry = iteration_entry(line)[1]
        if entry is not None and entry.get("lm_loss") is not None and out:
            out[-1].append((entry["iteration"], entry["lm_loss"]))
    return out


def parse_log(lines: Iterable[str], error_lines: int = 8) -> Dict[str, Any]:
    """What a job log (the launcher's output, all nodes through pdsh) says.

    Only the part after the last ``=== megatron_launch ...: start`` line counts when there is one,
    so a log appended by several runs describes the latest.
    """
    lines = [str(line).rstrip("\n") for line in lines]
    for index in range(len(lines) - 1, -1, -1):
        if _LAUNCH_START.match(lines[index]):
            lines = lines[index:]
            break
    summary: Dict[str, Any] = {
        "kind": None,
        "started": None,
        "iterations_logged": 0,
        "first": None,
        "last": None,
        "saved": [],
        "loaded": None,
        "sigterm": False,
        "launcher_rc": None,
        "finished_at": None,
        "burnin_results": [],
        "errors": [],
    }
    errors: List[str] = []
    for line in lines:
        start = _LAUNCH_START.match(line)
        if start:
            summary["started"] = {"at": start.group(1), "script": start.group(2), "command": start.group(3)}
            continue
        finish = _LAUNCH_EXIT.match(line)
        if finish:
            summary["finished_at"] = finish.group(1)
            summary["launcher_rc"] = int(finish.group(2))
            continue
        kind, entry = iteration_entry(line)
        if entry is not None:
            summary["kind"] = kind
            summary["iterations_logged"] += 1
            if summary["first"] is None:
                summary["first"] = entry
            summary["last"] = entry
            continue
        if _RESULT_TAG in line:
            found, bad = burnin_results_in(line)
            summary["burnin_results"].extend(found)
            if bad:
                errors.append(line.strip()[:300])
            summary["kind"] = summary["kind"] or "burnin"
            continue
        saved = _MEGATRON_SAVED.search(line)
        if saved:
            summary["saved"].append({"iteration": int(saved.group(1)), "path": saved.group(2), "reason": None})
            continue
        saved = _BURNIN_CHECKPOINT.search(line)
        if saved:
            path = saved.group(1)
            step = _STEP_TAG.match(os.path.basename(path))
            summary["saved"].append({"iteration": int(step.group(1)) if step else None, "path": path,
                                     "reason": saved.group(2)})
            if saved.group(2) == "SIGTERM":
                summary["sigterm"] = True
            continue
        loaded = _MEGATRON_LOADED.search(line)
        if loaded:
            summary["loaded"] = {"path": loaded.group(1), "iteration": int(loaded.group(2))}
            continue
        loaded = _BURNIN_RESUMED.search(line)
        if loaded:
            summary["loaded"] = {"path": loaded.group(1), "iteration": int(loaded.group(2))}
            continue
        if _MEGATRON_SIGTERM in line:
            summary["sigterm"] = True
            continue
        if _ERROR.search(line):
            errors.append(line.strip()[:300])
    summary["errors"] = errors[-error_lines:] if error_lines else []
    return summary


# --------------------------------------------------------------------------------------------
# Checkpoints
# --------------------------------------------------------------------------------------------
def step_of(tag: Optional[str]) -> Optional[int]:
    """global_step12 -> 12; anything else -> None."""
    match = _STEP_TAG.match(str(tag or "").strip())
    return int(match.group(1)) if match else None


def checkpoint_shape(files: Iterable[str]) -> Dict[str, Any]:
    """TP, PP, DP and the model form of one DeepSpeed checkpoint tag, from its file names.

    * DeepSpeed pipeline engine (Megatron without --no-pipeline-parallel): ``layer_LL-model_TT-
      model_states.pt`` (TT = tensor rank) and ``mp_rank_MM_model_states.pt`` for MM in
      0..PP*TP-1, so TP = distinct TT, PP = mp files / TP.
    * --no-pipeline-parallel (and the burn-in): no layer files, one ``mp_rank_MM`` per tensor rank,
      PP = 1. ZeRO-3 writes ``zero_pp_rank_D_mp_rank_MM_model_states.pt`` instead.
    * DP = distinct D of the ``zero_pp_rank_D_...`` files (optimizer state shards).
    """
    names = [os.path.basename(str(f)) for f in files]
    layer_tp = set()
    mp_ranks = set()
    zero_dp = set()
    zero_mp = set()
    for name in names:
        match = _LAYER_FILE.match(name)
        if match:
            layer_tp.add(int(match.group(2)))
            continue
        match = _MP_FILE.match(name)
        if match:
            mp_ranks.add(int(match.group(1)))
            continue
        match = _ZERO_FILE.match(name)
        if match:
            zero_dp.add(int(match.group(1)))
            zero_mp.add(int(match.group(2)))
    shape: Dict[str, Any] = {"layout": "deepspeed", "tp": None, "pp": None, "dp": len(zero_dp) or None,
                             "no_pipeline_parallel": None, "files": len(names)}
    if layer_tp:
        tp = len(layer_tp)
        shape.update(tp=tp, no_pipeline_parallel=False)
        shape["pp"] = max(1, len(mp_ranks) // tp) if mp_ranks else None
    elif mp_ranks or zero_mp:
        shape.update(tp=len(mp_ranks or zero_mp), pp=1, no_pipeline_parallel=True)
    else:
        shape["layout"] = "unknown"
    return shape


# --------------------------------------------------------------------------------------------
# Burn-in
# --------------------------------------------------------------------------------------------
def _sum(values: Iterable[Any]) -> Optional[float]:
    numbers = [float(v) for v in values if isinstance(v, (int, float))]
    return sum(numbers) if numbers else None


def burnin_report(results: Sequence[Mapping[str, Any]], node_count: int = 0,
                  ranks_per_node: Optional[int] = None, threshold: float = 0.10) -> Dict[str, Any]:
    """Per-node burn-in figures from the ``BURNIN_RESULT`` lines of every rank.

    Nodes are the hosts the ranks report (``socket.gethostname()``), which need not be the
    inventory's names, so the check is on their number: ``node_count`` hosts with
    ``ranks_per_node`` ranks each.

    * tokens/s and TFLOP/s of a node = the sum over its ranks of the timed training figures.
      Data parallelism makes every rank wait for the slowest at each gradient reduction, so
      these are nearly equal across nodes and cannot single out a slow one;
    * the slow-node test therefore uses each rank's communication-free probe (forward +
      backward alone on its device): a node whose probe tokens/s per rank is more than
      ``threshold`` below the median node is slow;
    * ``problems``: missing nodes or ranks, a loss that did not go down; ``slow_messages``: one
      per slow node, naming it.
    """
    per_node: Dict[str, List[Mapping[str, Any]]] = {}
    for result in results:
        per_node.setdefault(str(result.get("hostname")), []).append(result)
    problems: List[str] = []
    table: Dict[str, Dict[str, Any]] = {}
    for node in sorted(per_node):
        ranks = per_node[node]
        table[node] = {
            "ranks": len(ranks),
            "global_ranks": sorted(int(r.get("rank", -1)) for r in ranks),
            "tokens_per_s": _sum(r.get("tokens_per_s") for r in ranks),
            "tflops": _sum(r.get("tflops") for r in ranks),
            "probe_tokens_per_s": _sum(r.get("probe_tokens_per_s") for r in ranks),
            "probe_tflops": _sum(r.get("probe_tflops") for r in ranks),
            "below_median": None,
            "slow": False,
        }
        if ranks_per_node and len(ranks) != int(ranks_per_node):
            problems.append("%s: %d rank(s) reported, expected %d (megatron_job_gpus_per_node)"
                            % (node, len(ranks), int(ranks_per_node)))
    if node_count and len(per_node) != int(node_count):
        problems.append("results from %d host(s) (%s), expected %d nodes: the ranks of the others did not "
                        "finish; read the log" % (len(per_node), ", ".join(sorted(per_node)) or "none", int(node_count)))
    probes = {n: row["probe_tokens_per_s"] / max(row["ranks"], 1)
              for n, row in table.items() if row["probe_tokens_per_s"]}
    median = statistics.median(probes.values()) if probes else None
    slow: List[str] = []
    slow_messages: List[str] = []
    for node, value in sorted(probes.items()):
        deficit = 1.0 - value / median if median else 0.0
        table[node]["below_median"] = round(deficit, 4)
        if deficit > threshold:
            table[node]["slow"] = True
            slow.append(node)
            slow_messages.append(
                "%s: %.1f%% slower than the median node (probe %.1f against %.1f tokens/s per rank; "
                "threshold %.0f%%); check its GPUs (clocks, ECC, thermal), PCIe/NVLink and CPU load"
                % (node, deficit * 100, value, median, threshold * 100))
    rank0 = next((r for r in results if int(r.get("rank", -1)) == 0), None)
    initial = rank0.get("initial_loss") if rank0 else None
    final = rank0.get("final_loss") if rank0 else None
    loss_down = isinstance(initial, (int, float)) and isinstance(final, (int, float)) and final < initial
    if rank0 is None:
        problems.append("no BURNIN_RESULT from global rank 0: the run did not finish")
    elif not loss_down:
        problems.append("loss did not go down (first step %s, last step %s over steps %s..%s): the model "
                        "does not train; check the precision settings and ds_config.json"
                        % (initial, final, rank0.get("start_step"), rank0.get("final_step")))
    return {
        "nodes": table,
        "median_probe_tokens_per_s_per_rank": median,
        "slow_nodes": slow,
        "slow_messages": slow_messages,
        "threshold": threshold,
        "initial_loss": initial,
        "final_loss": final,
        "loss_went_down": loss_down,
        "world": rank0.get("world") if rank0 else len(results),
        "start_step": rank0.get("start_step") if rank0 else None,
        "final_step": rank0.get("final_step") if rank0 else None,
        "checkpoint": rank0.get("checkpoint") if rank0 else None,
        "problems": problems,
    }


def burnin_table(report: Mapping[str, Any]) -> List[str]:
    """Fixed-width lines of a burnin_report, one per node."""
    def fmt(value: Any, spec: str) -> str:
        return format(value, spec) if isinstance(value, (int, float)) else "-"

    header = ("node", "ranks", "tokens/s", "TFLOP/s", "probe tokens/s", "vs med", "")
    lines = ["%-20s %5s %14s %10s %16s %8s  %s" % header]
    for node, row in sorted(report.get("nodes", {}).items()):
        lines.append("%-20s %5d %14s %10s %16s %8s  %s" % (
            node, row["ranks"], fmt(row["tokens_per_s"], ".1f"), fmt(row["tflops"], ".4f"),
            fmt(row["probe_tokens_per_s"], ".1f"),
            ("%+.1f%%" % (-row["below_median"] * 100 + 0.0)) if isinstance(row["below_median"], (int, float)) else "-",
            "SLOW" if row["slow"] else ""))
    return lines


# --------------------------------------------------------------------------------------------
# Before a launch
# --------------------------------------------------------------------------------------------
def data_files(data_path: Any) -> List[str]:
    """The .bin/.idx files every rank opens for Megatron's --data-path (one prefix, or
    ``weight prefix weight prefix ...``)."""
    items = data_path if isinstance(data_path, (list, tuple)) else str(data_path or "").split()
    prefixes = []
    for item in items:
        text = str(item).strip()
        if not text:
            continue
        try:
            float(text)
            continue  # a blend weight
        except ValueError:
            prefixes.append(text)
    return [p + ext for p in prefixes for ext in (".bin", ".idx")]


def required_files(paths: Any, what: str, fix: str) -> List[Dict[str, str]]:
    """``paths`` (a list, or one path) as prelaunch_problems' ``required`` entries, each with
    the same ``what`` and ``fix``: what community.general.dict_kv + combine did, without a
    collection beyond ansible-core at the launch."""
    items = paths if isinstance(paths, (list, tuple)) else [paths]
    out = []
    for path in items:
        if not isinstance(path, str) or not path:
            raise ValueError("required_files: expected paths as non-empty strings, found %r" % (path,))
        out.append({"path": path, "what": str(what), "fix": str(fix)})
    return out


def prelaunch_problems(probes: Mapping[str, Mapping[str, Any]], required: Sequence[Mapping[str, Any]] = (),
                       ssh: Optional[Mapping[str, Any]] = None, head: str = "", script: str = "",
                       user: str = "", unwritable: Optional[Mapping[str, str]] = None) -> List[str]:
    """Every reason not to start, each naming the node and what to do.

    ``probes``: node -> the job_probe result on it, or ``{"unreachable": true, "msg": ...}`` /
    ``{"failed": true, "msg": ...}`` when Ansible could not run it. ``required``: files that
    must exist on every probed node, as ``{"path", "what", "fix"}``. ``ssh``: node -> ssh's exit
    code and message from the head node as the training user (``{"rc": 255, "msg": ...}``).
    ``unwritable``: node -> the checkpoint directory (or its nearest existing parent) the
    training user cannot write there ('' or absent when it can).
    """
    problems: List[str] = []
    for node in sorted(probes):
        probe = probes[node] or {}
        if probe.get("unreachable"):
            problems.append("%s: unreachable by Ansible (%s); bring the node back or take it out of "
                            "megatron_nodes" % (node, _one_line(probe.get("msg"))))
            continue
        if probe.get("failed"):
            problems.append("%s: the pre-launch probe failed (%s)" % (node, _one_line(probe.get("msg"))))
            continue
        for port_text, owners in sorted((probe.get("listeners") or {}).items()):
            if owners:
                who = ", ".join("pid %s (%s)" % (o.get("pid") or "?", o.get("cmdline") or "process not visible")
                                for o in owners)
                problems.append(
                    "%s: port %s (the rendezvous port, megatron_job_master_port) is already in use by %s; "
                    "stop that process or choose another port" % (node, port_text, who))
        ranks = probe.get("ranks") or []
        if ranks:
            running = sorted(set(_script_of(r.get("cmdline")) for r in ranks))
            problems.append(
                "%s: %d rank process(es) of %s already running (pids %s): a job is running; check it with "
                "playbooks/status.yml or stop it with playbooks/stop.yml before starting %s"
                % (node, len(ranks), ", ".join(running), ", ".join(str(r.get("pid")) for r in ranks),
                   script or "another"))
        paths = probe.get("paths") or {}
        for item in required:
            path = str(item.get("path"))
            if not (paths.get(path) or {}).get("exists"):
                problems.append("%s: %s %s is missing; %s"
                                % (node, item.get("what") or "file", path, item.get("fix") or "create it"))
    for node in sorted(unwritable or {}):
        where = str((unwritable or {})[node] or "").strip()
        if where:
            problems.append(
                "%s: the checkpoint directory is not writable by %s (%s); the first save would kill the job: "
                "give it to that user (the shared_storage role creates it so)" % (node, user or "the training user", where))
    for node in sorted(ssh or {}):
        entry = (ssh or {})[node] or {}
        if entry.get("rc", 0) != 0:
            problems.append(
                "%s: unreachable over ssh from the head node %s as %s (%s); the launcher's pdsh needs it: "
                "start sshd there or check the node, then re-run (cluster_ssh role: tasks_from verify)"
                % (node, head, user or "the training user", _one_line(entry.get("msg")) or "rc %s" % entry.get("rc")))
    return _group_by_text(problems)


def _group_by_text(problems: Sequence[str]) -> List[str]:
    """``node1: X``, ``node2: X`` -> ``node1, node2: X`` (order of first appearance kept)."""
    order: List[str] = []
    nodes: Dict[str, List[str]] = {}
    for problem in problems:
        node, sep, text = problem.partition(": ")
        key = text if sep else problem
        if key not in nodes:
            order.append(key)
            nodes[key] = []
        if sep and node not in nodes[key]:
            nodes[key].append(node)
    return ["%s: %s" % (", ".join(nodes[key]), key) if nodes[key] else key for key in order]


def parse_ssh_sweep(lines: Iterable[str], addresses: Mapping[str, str]) -> Dict[str, Dict[str, Any]]:
    """``ok NAME`` / ``fail NAME reason`` lines of the head node's ssh sweep -> node -> {rc, msg}.

    ``addresses`` maps inventory names to the names ssh used (the hostfile's)."""
    by_address: Dict[str, Dict[str, Any]] = {}
    for line in lines:
        parts = str(line).strip().split(" ", 2)
        if len(parts) >= 2 and parts[0] in ("ok", "fail"):
            by_address[parts[1]] = {"rc": 0 if parts[0] == "ok" else 255, "msg": parts[2] if len(parts) > 2 else ""}
    return {node: by_address[address] for node, address in addresses.items() if address in by_address}


def checkpoint_lacking(checkpoints: Mapping[str, Mapping[str, Any]], tag: str) -> Dict[str, Any]:
    """Which nodes lack part of checkpoint ``tag``: its ``latest`` file, or a file another node has.

    ``checkpoints``: node -> job_probe's ``checkpoint`` result listing ``tag`` on that node.
    """
    union = sorted(set(name for ck in checkpoints.values() for name in ((ck or {}).get("files") or [])))
    lacking = []
    for node in sorted(checkpoints):
        ck = checkpoints[node] or {}
        missing = set(union) - set(ck.get("files") or [])
        if ck.get("latest") != tag or missing:
            lacking.append(node)
    return {"files": union, "lacking": lacking}


def _script_of(cmdline: Any) -> str:
    match = re.search(r" -u (\S+)", str(cmdline or ""))
    return os.path.basename(match.group(1)) if match else "a training script"


def _one_line(text: Any, limit: int = 300) -> str:
    return " ".join(str(text or "").split())[:limit]


def job_status(probes: Mapping[str, Mapping[str, Any]], head: str, rank0: str,
               record: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The state of the last launched job from every node's job_probe result.

    ``probes``: node -> job_probe result (ranks on every node; log and launcher on ``head``;
    checkpoint on ``rank0``), or ``{"unreachable": true}``. ``state`` is one of
    ``running`` (the launcher lives and ranks run), ``starting`` (the launcher lives, no rank
    yet), ``finished`` (launcher rc 0), ``stopped`` (it saved on SIGTERM and exited),
    ``failed`` (non-zero rc, or ranks gone while the launcher lives), ``not started`` (no record).
    A job of the slurm backend (job_probe's ``slurm`` on ``head``, the node holding its log) is
    ``queued`` while Slurm keeps it PENDING, and ``failed`` when Slurm ended it without the
    batch script's exit line (cancelled, timed out, node failure); ``slurm`` carries Slurm's view.
    """
    head_probe = probes.get(head) or {}
    log = head_probe.get("log") or {}
    launcher = head_probe.get("launcher") or {}
    checkpoint = (probes.get(rank0) or {}).get("checkpoint") or {}
    nodes: Dict[str, Dict[str, Any]] = {}
    unreachable = []
    for node in sorted(probes):
        probe = probes[node] or {}
        if probe.get("unreachable") or probe.get("failed"):
            unreachable.append(node)
            nodes[node] = {"reachable": False, "ranks": None, "local_ranks": [], "pids": []}
            continue
        ranks = probe.get("ranks") or []
        nodes[node] = {"reachable": True, "ranks": len(ranks),
                       "local_ranks": sorted(r.get("local_rank") for r in ranks if r.get("local_rank") is not None),
                       "pids": [r.get("pid") for r in ranks]}
    alive_ranks = sum(n["ranks"] or 0 for n in nodes.values())
    rc = log.get("launcher_rc")
    slurm = head_probe.get("slurm") or {}
    if not record:
        state = "not started"
    elif slurm.get("state") in ("PENDING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED"):
        state = "queued"
    elif launcher.get("alive"):
        state = "running" if alive_ranks else ("failed" if log.get("iterations_logged") else "starting")
    elif rc == 0 and log.get("sigterm"):
        state = "stopped"
    elif rc == 0:
        state = "finished"
    elif rc is None and not launcher.get("alive"):
        state = "failed" if not alive_ranks else "running"
    else:
        state = "failed"
    last = log.get("last") or {}
    saved = log.get("saved") or []
    return {
        "job": (record or {}).get("job"),
        "state": state,
        "backend": (record or {}).get("backend", "pdsh"),
        "slurm": slurm,
        "launcher": launcher,
        "launcher_rc": rc,
        "started": log.get("started"),
        "finished_at": log.get("finished_at"),
        "ranks_alive": alive_ranks,
        "nodes": nodes,
        "unreachable": unreachable,
        "iteration": last.get("iteration"),
        "train_iters": last.get("train_iters"),
        "loss": last.get("lm_loss"),
        "tokens_per_gpu_per_second": last.get("tokens_per_gpu_per_second"),
        "tflops": last.get("tflops"),
        "iterations_logged": log.get("iterations_logged"),
        "resumed_from": (log.get("loaded") or {}),
        "last_saved": saved[-1] if saved else None,
        "checkpoint_dir": checkpoint.get("dir"),
        "checkpoint_latest": checkpoint.get("latest"),
        "checkpoint_tags": checkpoint.get("tags") or [],
        "log_file": log.get("file"),
        "errors": log.get("errors") or [],
        "tail": log.get("tail") or [],
    }


def status_lines(status: Mapping[str, Any]) -> List[str]:
    """A job_status as lines for people."""
    def show(value: Any) -> str:
        return "-" if value is None or value == "" else str(value)

    lines = ["job %s: %s%s" % (show(status.get("job")), status.get("state"),
                               (" (launcher rc %s)" % status["launcher_rc"]) if status.get("launcher_rc") is not None else "")]
    slurm = status.get("slurm") or {}
    if slurm:
        lines.append("slurm job %s: %s%s, nodes %s, elapsed %s, restarts %s (from %s)" % (
            show(slurm.get("job_id")), show(slurm.get("state")),
            (" (%s)" % slurm["reason"]) if slurm.get("reason") else "", show(slurm.get("nodes")),
            show(slurm.get("elapsed")), show(slurm.get("restarts")), show(slurm.get("source"))))
    if status.get("iteration") is not None:
        lines.append("iteration %s/%s, loss %s, tokens/s per GPU %s, TFLOP/s %s" % (
            show(status.get("iteration")), show(status.get("train_iters")), show(status.get("loss")),
            show(status.get("tokens_per_gpu_per_second")), show(status.get("tflops"))))
    tags = ", ".join(status.get("checkpoint_tags") or []) or "none"
    lines.append("checkpoint: %s/%s (tags: %s)"
                 % (show(status.get("checkpoint_dir")), show(status.get("checkpoint_latest")), tags))
    for node, row in sorted((status.get("nodes") or {}).items()):
        if not row.get("reachable"):
            lines.append("%-20s unreachable" % node)
        else:
            lines.append("%-20s %d rank(s) alive%s" % (node, row.get("ranks") or 0,
                                                       (" (local ranks %s)" % ",".join(str(r) for r in row["local_ranks"]))
                                                       if row.get("local_ranks") else ""))
    for error in status.get("errors") or []:
        lines.append("error: %s" % error)
    return lines


def tail_text(path: str, offset: int = 0, max_bytes: int = 4 * 1024 * 1024) -> Tuple[List[str], int]:
    """Lines of ``path`` from byte ``offset`` (at most the last ``max_bytes``), and the file size."""
    size = os.path.getsize(path)
    start = max(int(offset or 0), size - int(max_bytes))
    if start > size:  # the log was truncated or replaced since the offset was taken
        start = max(0, size - int(max_bytes))
    cut = start > int(offset or 0) and start > 0
    with open(path, "rb") as handle:
        handle.seek(start - 1 if cut else start)
        data = handle.read()
    if cut:
        # Started inside the file: keep only whole lines (drop up to the first line break).
        data = data[data.find(b"\n") + 1:] if b"\n" in data else b""
    return data.decode("utf-8", "replace").splitlines(), size
