# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Self-healing policy: what a failure of a running job is, what to do about it, the layout for
the nodes left and the checkpoint to resume from.

Four pure steps, in the order the supervisor (roles/supervisor) runs them:

1. ``classify(observation)``: a failure (rank exited, node unreachable, stall, NaN/inf loss,
   save failed) becomes a fault with a kind: ``transient`` (retry on the same nodes), ``node``
   (a named node is bad: exclude it or swap in a spare) or ``nonfinite`` (roll back).
2. ``decide(fault, history, policy, nodes, spares)``: the action (retry, replace, exclude,
   rollback, stop), bounded by the policy's retry count, backoff and rollback count.
3. ``replan(spec_vars, nodes_left, ...)``: the same TP and PP on fewer nodes, the global batch
   kept by raising gradient accumulation (Megatron: global = micro x DP x accumulation), judged
   by the one job model (``_job.spec.derive`` + ``_job.rules.validate``); a refusal names what does not
   fit. The planner (issue 18) can replace ``replan`` by ranking layouts for ``nodes_left``;
   the contract is the same: spec overrides in, a validated spec or a reason out.
4. ``resume_plan(report, ...)``: the newest complete tag (the megatron_checkpoint_info report,
   _checkpoint.analyse), and whether it must be converted with DeepSpeed's universal checkpoint
   tool first (``conversion_needed``) and the command that does it (``universal_command``).

No Ansible imports: unit-tested alone, and copied to the head node next to the supervisor.
"""
from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Mapping, Optional, Sequence

# Fault names (what was observed) and kinds (how the policy treats them).
RANK_EXITED = "rank_exited"
NODE_UNREACHABLE = "node_unreachable"
STALL = "stall"
NONFINITE = "nonfinite_loss"
SAVE_FAILED = "save_failed"
RESUME_FAILED = "resume_failed"  # the checked resume (_heal.resume) refused a relaunch
FABRIC_SLOW = "fabric_slow"  # the fabric gate's verdict (_fabric.verdict) names a node of the job
FAULTS = (RANK_EXITED, NODE_UNREACHABLE, STALL, NONFINITE, SAVE_FAILED, RESUME_FAILED, FABRIC_SLOW)

TRANSIENT = "transient"
NODE = "node"
ROLLBACK = "nonfinite"
GPU_RESET = "gpu_reset"  # a GPU fault whose tier is reset (_heal.gpu_faults): reset, then retry

# Actions.
RETRY = "retry"          # same nodes, same layout, from the newest complete tag
REPLACE = "replace"      # the bad node out, a spare in: same layout, no conversion
EXCLUDE = "exclude"      # the bad node out, re-plan on the nodes left
ROLL_BACK = "rollback"   # NaN/inf: the newest complete tag saved before the first bad iteration
FALL_BACK = "fallback"   # a resume that does not continue the run: the complete tag before it
RESET = "reset"          # reset the named nodes' GPUs (supervisor_gpu_reset_command), then retry on the same nodes
STOP = "stop"            # give up and alert

DEFAULT_POLICY: Dict[str, Any] = {
    # Transient faults retried on the same nodes before the job stops.
    "max_retries": 3,
    # Backoff before retry n (1-based): min(backoff_max, backoff_base x 2^(n-1)) seconds.
    "backoff_base": 30,
    "backoff_max": 600,
    # The same node blamed for this many transient faults becomes a node fault.
    "node_fault_after": 2,
    # NaN/inf: roll back at most this many times, then stop and alert.
    "max_rollbacks": 2,
    # Stall: no new iteration for max(stall_min, stall_factor x the slowest recent iteration
    # time + save allowance) seconds; before the first iteration, startup_timeout.
    "stall_factor": 10.0,
    "stall_min": 120,
    "save_allowance": 300,
    "startup_timeout": 1800,
    # Smallest number of nodes a re-plan may shrink to (fewer: stop).
    "min_nodes": 1,
    # The checked resume (_heal.resume.judge): the first this many iterations logged after a
    # relaunch must continue the interrupted run's loss within max(resume_loss_floor,
    # resume_noise_factor x its noise); 0 turns the check off. A failed check falls back to the
    # tag before, at most max_resume_fallbacks times, then stops.
    "resume_check_points": 3,
    "resume_noise_factor": 4.0,
    "resume_loss_floor": 0.05,
    "max_resume_fallbacks": 1,
    # A GPU fault of the reset tier: reset the node's GPUs at most this many times per node, then
    # it is a node fault (exclude or replace).
    "max_gpu_resets": 1,
}


class PolicyError(ValueError):
    """A policy value that cannot be used; the message names it and the value expected."""


def policy(overrides: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """DEFAULT_POLICY with ``overrides`` applied and checked (numbers, >= 0; min_nodes >= 1)."""
    out = dict(DEFAULT_POLICY)
    for key, value in (overrides or {}).items():
        if key not in DEFAULT_POLICY:
            raise PolicyError("supervisor policy %s: unknown key; known: %s" % (key, ", ".join(sorted(DEFAULT_POLICY))))
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise PolicyError("supervisor policy %s: found %r, expected a number" % (key, value)) from None
        if isinstance(value, bool) or number < 0 or math.isnan(number):
            raise PolicyError("supervisor policy %s: found %r, expected a number >= 0" % (key, value))
        out[key] = int(number) if isinstance(DEFAULT_POLICY[key], int) and number.is_integer() else number
    if out["min_nodes"] < 1:
        raise PolicyError("supervisor policy min_nodes: found %s, expected >= 1" % out["min_nodes"])
    return out


def stall_timeout(iteration_times_s: Sequence[float], pol: Optional[Mapping[str, Any]] = None) -> float:
    """Seconds without a new iteration after which the job counts as stalled.

    From the measured iteration times (seconds, recent ones): stall_factor x the slowest, plus
    save_allowance (a save makes one iteration longer), at least stall_min. With no iteration
    measured yet: startup_timeout (loading, compiling and the first step take longest)."""
    pol = policy(pol)
    times = [float(t) for t in iteration_times_s if t is not None and float(t) > 0 and math.isfinite(float(t))]
    if not times:
        return float(pol["startup_timeout"])
    return max(float(pol["stall_min"]), float(pol["stall_factor"]) * max(times) + float(pol["save_allowance"]))


def classify(observation: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The fault an observation of the job shows, or None when the job is healthy.

    ``observation`` keys (all optional):
      unreachable: [node]         nodes that fail ssh or the facts call
      bad_nodes: {node: reason}   nodes the culprit checks (facts: Xid/ECC, burn-in probe) failed
      exited: {node: rc}          nodes where a rank exited (or the launcher reported it)
      stalled_for: seconds        since the last new iteration; stall_timeout: the limit
      stopped_ranks: {node: n}    ranks in state T (stopped) or D per node: the suspects of a stall
      nonfinite_iteration: int    the first iteration whose loss/grad norm was NaN/inf
      save_failed: str            the log line of a failed save
      finished: bool              the launcher exited 0 (the job is done, not failed)
      gpu_faults: {node: {tier, evidence}}  the GPU probe's verdict per node (_heal.gpu_faults):
                                  exclude makes a bad node, reset a gpu_reset fault, retry a
                                  suspect; record only adds to the evidence
      fabric_slow: {node: evidence}  nodes the fabric gate's verdict names (_fabric.verdict): bad
                                  nodes; alone (the job still trains, slowly) a fabric_slow fault

    Order: a finished job is no fault; NaN/inf first (a node check cannot fix it), then node
    unreachable, then the others. A node named by ``bad_nodes`` turns the fault into a node fault
    on that node; otherwise it is transient, with the nodes it points at (the nodes whose ranks
    exited first, the nodes holding stopped ranks) as suspects: decide() makes a suspect blamed
    ``node_fault_after`` times a node fault.
    """
    obs = dict(observation or {})
    if obs.get("finished"):
        return None
    bad = dict(obs.get("bad_nodes") or {})
    fabric = dict(obs.get("fabric_slow") or {})
    for node, why in fabric.items():
        bad.setdefault(node, why)
    gpu = {n: v for n, v in (obs.get("gpu_faults") or {}).items() if isinstance(v, Mapping)}
    for node, verdict in gpu.items():
        if verdict.get("tier") == "exclude":
            bad.setdefault(node, "GPU fault: %s" % verdict.get("evidence", "exclude tier"))
    to_reset = sorted(n for n, v in gpu.items() if v.get("tier") == "reset" and n not in bad)
    gpu_suspects = sorted(n for n, v in gpu.items() if v.get("tier") == "retry" and n not in bad)
    noted = "; ".join("%s GPU %s" % (n, gpu[n].get("evidence", "")) for n in sorted(gpu)
                      if gpu[n].get("tier") in ("record", "retry", "reset"))
    unreachable = sorted(obs.get("unreachable") or [])
    if obs.get("nonfinite_iteration") is not None:
        return {"fault": NONFINITE, "kind": ROLLBACK, "nodes": [],
                "iteration": int(obs["nonfinite_iteration"]),
                "evidence": "loss or grad norm NaN/inf at iteration %s" % obs["nonfinite_iteration"]}
    if unreachable:
        return {"fault": NODE_UNREACHABLE, "kind": NODE, "nodes": unreachable,
                "evidence": "no ssh / facts answer from %s" % ", ".join(unreachable)}
    fault = None
    evidence = ""
    suspects: List[str] = []
    if obs.get("save_failed"):
        fault, evidence = SAVE_FAILED, "save failed: %s" % str(obs["save_failed"])[:200]
    elif obs.get("exited"):
        exited = dict(obs["exited"])
        fault = RANK_EXITED
        evidence = "rank(s) exited on %s" % ", ".join("%s (rc %s)" % (n, exited[n]) for n in sorted(exited))
        suspects = sorted(n for n in exited if n != "*")  # "*": every node, none went first
    elif obs.get("stalled_for") is not None and obs.get("stall_timeout") is not None \
            and float(obs["stalled_for"]) >= float(obs["stall_timeout"]):
        fault = STALL
        evidence = "no new iteration for %.0f s (limit %.0f s)" % (float(obs["stalled_for"]), float(obs["stall_timeout"]))
        # Ranks stopped (T) or stuck in the kernel (D) point at their node, but a stop can be
        # a person's debugger: a suspect (node fault when blamed again), not yet a bad node.
        stopped = {n: c for n, c in (obs.get("stopped_ranks") or {}).items() if c}
        suspects = sorted(stopped)
        if stopped:
            evidence += "; stopped ranks on %s" % ", ".join(sorted(stopped))
    if fault is None:
        if fabric:
            # A slow link does not stop the job: it trains at the slowest node's pace until the
            # node is taken out, which is the same exclusion as for a node that failed outright.
            fault, evidence = FABRIC_SLOW, "the fabric gate names %s" % ", ".join(sorted(fabric))
        elif bad or to_reset:
            fault, evidence = RANK_EXITED, "node check failed"
        else:
            return None
    if noted:
        evidence += "; " + noted
    if bad:
        nodes = sorted(bad)
        return {"fault": fault, "kind": NODE, "nodes": nodes,
                "evidence": evidence + "; " + "; ".join("%s: %s" % (n, bad[n]) for n in nodes)}
    if to_reset:
        return {"fault": fault, "kind": GPU_RESET, "nodes": to_reset, "evidence": evidence}
    return {"fault": fault, "kind": TRANSIENT, "nodes": sorted(set(suspects) | set(gpu_suspects)), "evidence": evidence}


def _count(history: Sequence[Mapping[str, Any]], **match: Any) -> int:
    return sum(1 for h in history if all(h.get(k) == v for k, v in match.items()))


def backoff(attempt: int, pol: Mapping[str, Any]) -> float:
    """Seconds to wait before retry ``attempt`` (1-based)."""
    return float(min(float(pol["backoff_max"]), float(pol["backoff_base"]) * 2 ** max(0, attempt - 1)))


def decide(fault: Mapping[str, Any], history: Sequence[Mapping[str, Any]], pol: Mapping[str, Any],
           nodes: Sequence[str], spares: Sequence[str] = ()) -> Dict[str, Any]:
    """The action for ``fault`` (classify's answer) given the incidents of this job so far.

    ``history``: earlier incident records (at least their ``action`` and ``nodes``), oldest
    first. ``nodes``: the job's nodes now; ``spares``: nodes of megatron_spares not in use.
    Returns {action, nodes (the job's nodes for the relaunch), removed, added, wait_s, reason}.
    """
    nodes = list(nodes)
    out: Dict[str, Any] = {"action": STOP, "nodes": nodes, "removed": [], "added": [], "wait_s": 0.0, "reason": ""}
    kind = fault.get("kind")
    if kind == ROLLBACK:
        done = _count(history, action=ROLL_BACK)
        if done >= int(pol["max_rollbacks"]):
            out["reason"] = ("loss went NaN/inf again after %d rollback(s) (max_rollbacks %s): stop and alert; "
                             "lower the learning rate or check the data around iteration %s"
                             % (done, pol["max_rollbacks"], fault.get("iteration")))
            return out
        out.update(action=ROLL_BACK, reason="NaN/inf at iteration %s: resume from the newest complete tag saved "
                   "before it (rollback %d of %s)" % (fault.get("iteration"), done + 1, pol["max_rollbacks"]))
        return out
    suspects = [n for n in fault.get("nodes") or [] if n in nodes]
    if kind == GPU_RESET:
        # Reset, then retry on the same nodes; a node reset max_gpu_resets times is a node fault.
        again = [n for n in suspects
                 if sum(1 for h in history if h.get("action") == RESET and n in (h.get("nodes") or []))
                 >= int(pol["max_gpu_resets"])]
        if not again:
            out.update(action=RESET, reason="%s: GPU reset needed on %s, then a retry on the same nodes (reset %s per node)"
                       % (fault.get("fault"), ", ".join(suspects), pol["max_gpu_resets"]))
            return out
        suspects = again
        kind = NODE
    if kind == TRANSIENT:
        # A node blamed again and again is a node fault even when every check passes.
        repeat = [n for n in suspects
                  if sum(1 for h in history if h.get("kind") == TRANSIENT and n in (h.get("nodes") or []))
                  + 1 >= int(pol["node_fault_after"])]
        if not repeat:
            attempt = sum(1 for h in history if h.get("action") == RETRY) + 1
            if attempt > int(pol["max_retries"]):
                out["reason"] = ("%s: %d retries on the same nodes did not hold (max_retries %s): stop and alert"
                                 % (fault.get("fault"), attempt - 1, pol["max_retries"]))
                return out
            blame = ("suspect %s, blamed fewer than node_fault_after %s times" % (", ".join(suspects), pol["node_fault_after"])
                     if suspects else "no node to blame")
            out.update(action=RETRY, wait_s=backoff(attempt, pol),
                       reason="%s, %s: retry %d of %s on the same nodes" % (
                           fault.get("fault"), blame, attempt, pol["max_retries"]))
            return out
        suspects = repeat
    elif kind != NODE:
        out["reason"] = "unknown fault kind %r" % kind
        return out
    if not suspects:
        out["reason"] = "%s names no node of the job (%s)" % (fault.get("fault"), ", ".join(fault.get("nodes") or []))
        return out
    free = [s for s in spares if s not in nodes]
    if len(free) >= len(suspects):
        added = free[:len(suspects)]
        swap = dict(zip(suspects, added))
        out.update(action=REPLACE, nodes=[swap.get(n, n) for n in nodes], removed=suspects, added=added,
                   reason="%s on %s: replaced by spare(s) %s, same layout" % (
                       fault.get("fault"), ", ".join(suspects), ", ".join(added)))
        return out
    left = [n for n in nodes if n not in suspects]
    if len(left) < max(1, int(pol["min_nodes"])):
        out.update(removed=suspects, reason="%s on %s leaves %d node(s), fewer than min_nodes %s and no spare: stop"
                   % (fault.get("fault"), ", ".join(suspects), len(left), pol["min_nodes"]))
        return out
    out.update(action=EXCLUDE, nodes=left, removed=suspects,
               reason="%s on %s: excluded, re-plan on %d node(s)" % (fault.get("fault"), ", ".join(suspects), len(left)))
    return out


# --------------------------------------------------------------------------------------------
# Re-plan: same TP/PP on fewer nodes, the global batch kept
# --------------------------------------------------------------------------------------------
def _divisors_desc(number: int) -> List[int]:
    return [d for d in range(number, 0, -1) if number % d == 0]


def replan(spec_vars: Mapping[str, Any], nodes_left: int, gpus_per_node: Optional[int] = None,
           deepspeed_version: Optional[str] = None, gpu_memory_mib: Optional[int] = None) -> Dict[str, Any]:
    """The job on ``nodes_left`` nodes with the same TP and PP and the same global batch.

    DP = nodes x GPUs / (TP x PP) must be whole; gradient accumulation = global / (micro x DP)
    must be whole. ZeRO stage and recompute stay (the saved optimizer state is laid out by
    them). The micro batch is kept when it fits, else the largest divisor of it that does. Each
    candidate is judged by _job_rules.validate, the rules train.yml's gate applies, memory
    included when ``gpu_memory_mib`` is known: with fewer DP ranks each GPU holds a larger share
    of a ZeRO-partitioned optimizer, so a layout that fitted on more nodes may not on fewer.

    Returns {ok, reason, overrides (megatron_job_* variables that change), derived (the new
    shape), before (the old shape), memory (the memory finding of the layout taken, when judged)}.
    ``ok`` false: ``reason`` names what does not fit.
    """
    from .._job.rules import validate
    from .._job.spec import JobError, derive, normalize

    out: Dict[str, Any] = {"ok": False, "reason": "", "overrides": {}, "derived": None, "before": None,
                           "memory": None}
    try:
        spec = normalize(spec_vars)
    except JobError as exc:
        out["reason"] = "the job spec does not read: %s" % exc
        return out
    gpus = int(gpus_per_node or spec["gpus_per_node"])
    old_nodes = spec.get("nodes")
    if old_nodes:
        out["before"] = derive(spec, old_nodes, gpus)
    nodes_left = int(nodes_left)
    tp, pp = int(spec["tensor_parallel"]), int(spec["pipeline_parallel"])
    sp = int(spec["ds_sequence_parallel_size"])
    world = nodes_left * gpus
    if nodes_left < 1:
        out["reason"] = "no node left to run on"
        return out
    if world % (tp * pp * sp):
        kept = "TP %d x PP %d" % (tp, pp) + (" x SP %d" % sp if sp > 1 else "")
        out["reason"] = ("%s = %d does not divide the %d GPUs of %d node(s) x %d: keeping TP and PP "
                         "needs a multiple of %d GPUs; the planner may find another layout"
                         % (kept, tp * pp * sp, world, nodes_left, gpus, tp * pp * sp))
        return out
    dp = world // (tp * pp * sp)
    global_batch = spec["global_batch_size"]
    micro_old = int(spec["micro_batch_size"])
    candidates = [m for m in _divisors_desc(micro_old) if global_batch % (m * dp) == 0]
    if not candidates:
        out["reason"] = ("global batch %d is not divisible by micro x DP %d for any micro batch <= %d: the global "
                         "batch cannot be kept on %d node(s); set megatron_job_global_batch_size to a multiple "
                         "of %d or add a node" % (global_batch, dp, micro_old, nodes_left, dp))
        return out
    cluster = {"nodes": nodes_left, "gpus_per_node": gpus, "gpu_memory_mib": gpu_memory_mib}
    too_big = []
    for micro in candidates:
        new_vars = dict(spec, micro_batch_size=micro, nodes=nodes_left)
        try:
            derived = derive(new_vars, nodes_left, gpus, strict=True)
        except JobError as exc:
            out["reason"] = str(exc)
            return out
        findings = validate(new_vars, cluster=cluster, deepspeed_version=deepspeed_version)
        failed = [f for f in findings if f.get("status") == "fail"]
        memory = next((f for f in findings if f.get("check") == "memory per GPU"), None)
        if failed and all(f.get("check") == "memory per GPU" for f in failed):
            # Too big for the GPU at this micro batch: a smaller one needs less activation memory.
            too_big.append("micro %d: %s" % (micro, memory["found"]))
            continue
        if failed:
            out["reason"] = "; ".join("%s: found %s, expected %s" % (f["check"], f["found"], f["expected"])
                                      for f in failed)
            out["derived"] = derived
            return out
        if micro != micro_old:
            out["overrides"]["megatron_job_micro_batch_size"] = micro
        out.update(ok=True, derived=derived, memory=memory,
                   reason="TP %d, PP %d, DP %d, micro %d x accumulation %d x DP %d = global %d on %d node(s)%s" % (
                       tp, pp, dp, micro, derived["gradient_accumulation_steps"], dp, global_batch, nodes_left,
                       "; memory per GPU %s" % memory["found"] if memory and gpu_memory_mib else ""))
        return out
    out["reason"] = ("no micro batch fits the GPU's %d MiB on %d node(s) with TP %d, PP %d, ZeRO-%s (%s): add a "
                     "node or a spare, or re-plan the layout with playbooks/plan.yml"
                     % (int(gpu_memory_mib or 0), nodes_left, tp, pp, spec.get("zero_stage"), "; ".join(too_big)))
    return out


# --------------------------------------------------------------------------------------------
# Checkpoint: the tag to resume from, and whether it must be converted
# --------------------------------------------------------------------------------------------
def resume_tag(report: Mapping[str, Any], before_iteration: Optional[int] = None) -> Dict[str, Any]:
    """The newest complete tag of a megatron_checkpoint_info report (its ``tags`` list, each
    judged with the shape it was saved with), at a step below ``before_iteration`` when given
    (a NaN rollback). Returns {tag, step, skipped: [newer tags not usable, with why]}."""
    skipped = []
    for row in sorted(report.get("tags") or [], key=lambda r: (r.get("step") is None, r.get("step") or 0), reverse=True):
        if row.get("step") is None:
            continue
        if before_iteration is not None and row["step"] >= int(before_iteration):
            skipped.append({"tag": row["tag"], "why": "saved at step %d, not before iteration %s"
                            % (row["step"], before_iteration)})
            continue
        if not row.get("ok"):
            skipped.append({"tag": row["tag"], "why": "incomplete or damaged (%s problem(s))" % row.get("problems")})
            continue
        return {"tag": row["tag"], "step": row["step"], "skipped": skipped}
    return {"tag": None, "step": None, "skipped": skipped}


def conversion_needed(saved: Mapping[str, Any], new: Mapping[str, Any]) -> Optional[str]:
    """Why the checkpoint saved with shape ``saved`` must go through DeepSpeed's universal
    checkpoint before shape ``new`` loads it, or None when it loads as it is.

    Shapes: {tensor_parallel, pipeline_parallel, data_parallel, zero_stage, bf16}. TP or PP
    changed: always. DP changed: when the optimizer state is partitioned over DP, i.e. ZeRO
    stage >= 1, or bf16 (DeepSpeed's BF16_Optimizer also saves per-DP-rank files); DeepSpeed's
    engine then raises "The checkpoint being loaded used a DP world size of N but the current
    world size is M" (runtime/engine.py _load_zero_checkpoint). ZeRO-0 fp32/fp16 keeps the
    whole optimizer in mp_rank_XX_model_states.pt, which any DP loads."""
    for key, name in (("tensor_parallel", "TP"), ("pipeline_parallel", "PP")):
        if int(saved.get(key) or 1) != int(new.get(key) or 1):
            return "%s changes from %s to %s" % (name, saved.get(key) or 1, new.get(key) or 1)
    if int(saved.get("data_parallel") or 0) != int(new.get("data_parallel") or 0):
        if int(saved.get("zero_stage") or 0) >= 1 or saved.get("bf16"):
            return ("DP changes from %s to %s and the optimizer state is partitioned over DP (ZeRO %s%s)"
                    % (saved.get("data_parallel"), new.get("data_parallel"), saved.get("zero_stage") or 0,
                       ", bf16" if saved.get("bf16") else ""))
    return None


def universal_env(environ: Mapping[str, str], pythonpath: Optional[Sequence[str]]) -> Dict[str, str]:
    """The environment ds_to_universal runs in: ``environ`` with ``pythonpath`` (the trainer's
    source directories) put first on PYTHONPATH. The converter unpickles the tag's model states
    (deepspeed/checkpoint/deepspeed_checkpoint.py:136 at DeepSpeed 0.19.6), and Megatron-DeepSpeed
    saves its run arguments there (megatron/checkpointing.py:255 at 4efb479d), among them
    ``args.model_type``, a ``megatron.core.enums.ModelType`` (megatron/training.py:331): without the
    checkout on the path the conversion stops with "No module named 'megatron'"."""
    env = dict(environ)
    paths = [str(p) for p in (pythonpath or []) if p]
    if paths:
        env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    return env


def universal_command(python: str, checkpoint_dir: str, tag: str, inject_missing_state: bool = False) -> List[str]:
    """DeepSpeed's converter for one tag: writes <dir>/<tag>_universal and <dir>/latest_universal
    (deepspeed/checkpoint/ds_to_universal.py, DeepSpeed >= 0.12). ``inject_missing_state``
    (DeepSpeed >= 0.16): for checkpoints whose client state lacks universal_checkpoint_info,
    which Megatron-DeepSpeed writes and plain deepspeed.initialize models (the burn-in) do not."""
    base = checkpoint_dir.rstrip("/")
    argv = [python, "-m", "deepspeed.checkpoint.ds_to_universal",
            "--input_folder", "%s/%s" % (base, tag), "--output_folder", "%s/%s_universal" % (base, tag)]
    if inject_missing_state:
        argv.append("--inject_missing_state")
    return argv
