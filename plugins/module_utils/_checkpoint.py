# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a Megatron-DeepSpeed (``--deepspeed``) checkpoint directory holds, and what it lacks.

The names below are the ones DeepSpeed 0.19 writes (``runtime/engine.py`` ``_get_ckpt_name``,
``_get_rank_zero_ckpt_name``, ``_get_zero_ckpt_prefix``; ``runtime/pipe/module.py``
``ckpt_layer_path``), checked against real checkpoints written on CPU for ZeRO 0-3, fp32 and bf16:

* ``{save}/latest`` names the tag (``global_stepN``); Megatron adds
  ``latest_checkpointed_iteration.txt``. Global rank 0 writes both.
* Without the DeepSpeed pipeline engine (``--no-pipeline-parallel``, the burn-in): one
  ``mp_rank_MM_model_states.pt`` per tensor rank, written by data-parallel rank 0.
* With the pipeline engine (Megatron's default, any PP): ``layer_LL-model_TT-model_states.pt``
  (LL the global layer index, TT the tensor rank; ``layer_LL-model_states.pt`` without a model
  axis) plus ``mp_rank_MM_model_states.pt`` for MM in 0..PP*TP-1 (MM = stage * TP + tensor rank).
* ZeRO-1/2: ``zero_pp_rank_D_mp_rank_MM_optim_states.pt`` per data-parallel rank D; the prefix is
  ``bf16_zero_`` whenever bf16 is enabled. ZeRO-0 writes no such file (the optimizer state is in
  the ``mp_rank`` file), bf16 or not, in DeepSpeed 0.19.
* ZeRO-3: ``zero_pp_rank_D_mp_rank_MM_model_states.pt`` (never with the bf16 prefix) replace the
  ``mp_rank`` files, plus the optimizer files above.

Global rank r of a Megatron job sits at (pp, dp, tp) with r = pp*DP*TP + dp*TP + tp (Megatron's
mpu and DeepSpeed's PipeModelDataParallelTopology agree), which is what ``ranks`` relies on.

``LOADER`` is a small script run with the training venv's python (torch is not needed here): it
``torch.load``s each file on CPU with ``weights_only=True``; globals outside torch's allowlist
(DeepSpeed's ``LossScaler``, Megatron's ``args``) are replaced by inert stand-ins, so no code
from a checkpoint ever runs.

No Ansible imports; Python 3.8 compatible (runs on the nodes through megatron_checkpoint_info).
"""
from __future__ import annotations

import json
import os
import re
import struct
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

STEP_TAG = re.compile(r"^global_step(\d+)$")
MEGATRON_ITER = re.compile(r"^iter_\d{7}$")
LAYER_FILE = re.compile(r"^layer_(\d+)(?:-model_(\d+))?-model_states\.pt$")
MP_FILE = re.compile(r"^mp_rank_(\d+)_model_states\.pt$")
ZERO_FILE = re.compile(r"^(bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_(optim|model)_states\.pt$")
MOE_FILE = re.compile(r"^(?:layer_\d+_)?expert_\d+_mp_rank_\d+_model_states\.pt$|^expp_rank_\d+_mp_rank_\d+_optim_states\.pt$")
LATEST = "latest"
ITERATION_FILE = "latest_checkpointed_iteration.txt"
UNIVERSAL_HINT = ("convert it with DeepSpeed's universal checkpoint tool (python -m deepspeed.checkpoint.ds_to_universal "
                  "--input_folder {path}/{tag} --output_folder {path}/{tag}_universal, DeepSpeed >= 0.12) and resume with "
                  "--universal-checkpoint, or train with the shape the checkpoint was saved with")
EXPECT_KEYS = ("tensor_parallel", "pipeline_parallel", "data_parallel", "world_size", "zero_stage", "precision")
_ZIP_EOCD = b"PK\x05\x06"


# --------------------------------------------------------------------------------------------
# Reading the directory
# --------------------------------------------------------------------------------------------
def step_of(tag: Optional[str]) -> Optional[int]:
    """global_step12 -> 12 (as `latest` holds it, surrounding whitespace included); else None."""
    match = STEP_TAG.match(str(tag or "").strip())
    return int(match.group(1)) if match else None


def _read_text(path: str) -> Optional[str]:
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except (IOError, OSError):
        return None


def zip_problem(path: str, size: int) -> Optional[str]:
    """Why ``path`` is not a whole torch zip archive, from its end record only (cheap on big files).

    torch.save writes a zip (stored, not compressed); a file cut short loses the end-of-central-
    directory record, and a record pointing past the end of the file means the middle is gone.
    Returns None when the archive's end looks whole (contents are checked by ``load``).
    """
    if size < 22:
        return "shorter than a zip end record (%d bytes)" % size
    try:
        with open(path, "rb") as handle:
            tail_len = min(size, 65536 + 22)
            handle.seek(size - tail_len)
            tail = handle.read(tail_len)
    except (IOError, OSError) as exc:
        return "unreadable: %s" % exc
    pos = tail.rfind(_ZIP_EOCD)
    if pos < 0:
        return "no zip end record: the file was cut short or is not a torch.save archive"
    record = tail[pos:pos + 22]
    if len(record) < 22:
        return "zip end record cut short"
    cd_size, cd_offset = struct.unpack("<II", record[12:20])
    if cd_offset == 0xFFFFFFFF or cd_size == 0xFFFFFFFF:
        # zip64 (archives over 4 GiB): the zip64 locator sits just before the end record.
        locator = tail[pos - 20:pos] if pos >= 20 else b""
        if locator[:4] != b"PK\x06\x07":
            return "zip64 end locator missing"
        zip64_offset = struct.unpack("<Q", locator[8:16])[0]
        if zip64_offset + 56 > size:
            return "zip64 end record points past the end of the file (%d > %d bytes)" % (zip64_offset, size)
        return None
    end_offset = size - tail_len + pos
    if cd_offset + cd_size > end_offset:
        return "central directory points past its end record (%d + %d > %d): the file is damaged" % (
            cd_offset, cd_size, end_offset)
    return None


def scan_tag(tag_dir: str, zip_check: bool = True) -> Dict[str, Dict[str, Any]]:
    """name -> {size, zip_problem} of the files of one tag directory (sub-directories skipped)."""
    files: Dict[str, Dict[str, Any]] = {}
    try:
        names = sorted(os.listdir(tag_dir))
    except (IOError, OSError):
        return files
    for name in names:
        full = os.path.join(tag_dir, name)
        if not os.path.isfile(full):
            continue
        size = os.path.getsize(full)
        entry: Dict[str, Any] = {"size": size, "zip_problem": None}
        if zip_check and name.endswith(".pt") and size > 0:
            entry["zip_problem"] = zip_problem(full, size)
        files[name] = entry
    return files


def _is_tag_dir(path: str, name: str) -> bool:
    if STEP_TAG.match(name):
        return True
    if name.endswith("_universal"):
        return False
    try:
        return any(entry.endswith("model_states.pt") for entry in os.listdir(path))
    except (IOError, OSError):
        return False


def scan_dir(path: str, zip_check: bool = True) -> Dict[str, Any]:
    """The checkpoint directory as data: tags with their files, ``latest``, the iteration file."""
    info: Dict[str, Any] = {"path": path, "exists": os.path.isdir(path), "latest": None, "latest_file": False,
                            "iteration": None, "iteration_file": False, "tags": {}, "universal_tags": [],
                            "latest_universal": None, "megatron_dirs": []}
    if not info["exists"]:
        return info
    latest = _read_text(os.path.join(path, LATEST))
    info["latest_file"] = latest is not None
    info["latest"] = latest or None
    iteration = _read_text(os.path.join(path, ITERATION_FILE))
    info["iteration_file"] = iteration is not None
    if iteration is not None:
        info["iteration"] = int(iteration) if iteration.isdigit() else iteration
    info["latest_universal"] = _read_text(os.path.join(path, "latest_universal")) or None
    for name in sorted(os.listdir(path)):
        full = os.path.join(path, name)
        if not os.path.isdir(full):
            continue
        if name.endswith("_universal"):
            info["universal_tags"].append(name)
        elif MEGATRON_ITER.match(name) or name == "release":
            info["megatron_dirs"].append(name)
        elif _is_tag_dir(full, name):
            info["tags"][name] = scan_tag(full, zip_check)
    return info


def sort_tags(tags: Iterable[str]) -> List[str]:
    """Tags by step (``global_stepN``), then the ones without a step by name."""
    def key(tag: str) -> Tuple[int, int, str]:
        step = step_of(tag)
        return (1, 0, tag) if step is None else (0, step, tag)
    return sorted(tags, key=key)


# --------------------------------------------------------------------------------------------
# What the file names say
# --------------------------------------------------------------------------------------------
def classify(names: Iterable[str]) -> Dict[str, Any]:
    """Layout, TP, PP, DP, ZeRO stage candidates and precision of one tag, from file names only."""
    layers: Dict[Optional[int], set] = {}
    mp_ranks = set()
    optim: Dict[Tuple[int, int], str] = {}
    zero_model = set()
    prefixes = set()
    moe = []
    other = []
    for name in names:
        match = LAYER_FILE.match(name)
        if match:
            tp = int(match.group(2)) if match.group(2) is not None else None
            layers.setdefault(tp, set()).add(int(match.group(1)))
            continue
        match = MP_FILE.match(name)
        if match:
            mp_ranks.add(int(match.group(1)))
            continue
        match = ZERO_FILE.match(name)
        if match:
            dp, mp = int(match.group(2)), int(match.group(3))
            if match.group(4) == "optim":
                optim[(dp, mp)] = match.group(1) or ""
                prefixes.add(match.group(1) or "")
            else:
                zero_model.add((dp, mp))
            continue
        if MOE_FILE.match(name):
            moe.append(name)
            continue
        other.append(name)

    pipeline = bool(layers)
    mp_indices = mp_ranks | set(cell[1] for cell in optim) | set(cell[1] for cell in zero_model)
    model_parallel = max(mp_indices) + 1 if mp_indices else None
    tensor_parallel = pipeline_parallel = None
    if pipeline:
        tp_ranks = [tp for tp in layers if tp is not None]
        tensor_parallel = max(tp_ranks) + 1 if tp_ranks else 1
        if model_parallel:
            pipeline_parallel = max(1, model_parallel // tensor_parallel)
    elif model_parallel:
        tensor_parallel, pipeline_parallel = model_parallel, 1
    dp_indices = set(cell[0] for cell in optim) | set(cell[0] for cell in zero_model)
    data_parallel = max(dp_indices) + 1 if dp_indices else None

    if zero_model:
        candidates = [3]
        kind = "zero3"
    else:
        kind = "pipeline" if pipeline else ("no_pipeline" if mp_ranks or optim else "unknown")
        candidates = [1, 2] if optim else [0]
        if pipeline:
            # DS runtime/pipe/engine.py refuses ZeRO-2/3 with the pipeline engine.
            candidates = [stage for stage in candidates if stage < 2]
    if "bf16_" in prefixes:
        precision, precision_source = "bf16", "the bf16_ prefix of the optimizer files"
    elif optim:
        precision, precision_source = None, "fp16 or fp32: zero_ optimizer files without the bf16_ prefix do not say which"
    else:
        precision, precision_source = None, "no optimizer shard files: the names do not say (load=true reads ds_config)"
    return {
        "kind": kind,
        "pipeline": pipeline,
        "tensor_parallel": tensor_parallel,
        "pipeline_parallel": pipeline_parallel,
        "model_parallel": model_parallel,
        "data_parallel": data_parallel,
        "data_parallel_source": "optimizer/ZeRO-3 shard files" if dp_indices else None,
        "zero_stage": candidates[0] if len(candidates) == 1 else None,
        "zero_stage_candidates": candidates,
        "precision": precision,
        "precision_source": precision_source,
        "optim_prefix": sorted(prefixes)[-1] if prefixes else None,
        "layers": dict((("all" if tp is None else str(tp)), sorted(idx)) for tp, idx in layers.items()),
        "_layers": layers,
        "_mp_ranks": mp_ranks,
        "_optim": optim,
        "_prefixes": prefixes,
        "_zero_model": zero_model,
        "moe_files": sorted(moe),
        "other_files": sorted(other),
    }


def refine(layout: Dict[str, Any], metadata: Mapping[str, Any]) -> Dict[str, Any]:
    """Fill what names cannot tell (precision, exact ZeRO stage, DP at ZeRO-0) from loaded ds_config."""
    config = metadata.get("ds_config") or {}
    if isinstance(config, dict) and config:
        if (config.get("bf16") or {}).get("enabled"):
            precision = "bf16"
        elif (config.get("fp16") or {}).get("enabled"):
            precision = "fp16"
        else:
            precision = "fp32"
        if layout.get("precision") not in (None, precision):
            layout["precision_conflict"] = "file names say %s, ds_config says %s" % (layout["precision"], precision)
        layout.update(precision=precision, precision_source="ds_config saved in the checkpoint")
        stage = (config.get("zero_optimization") or {}).get("stage")
        if isinstance(stage, int):
            layout.update(zero_stage=stage, zero_stage_candidates=[stage])
    if layout.get("data_parallel") is None and isinstance(metadata.get("dp_world_size"), int):
        layout["data_parallel"] = metadata["dp_world_size"]
        layout["data_parallel_source"] = "dp_world_size saved in the model states file"
    return layout


def rank_coordinates(rank: int, tp: int, pp: int, dp: int) -> Tuple[int, int, int]:
    """(pp, dp, tp) of a global rank, Megatron's ordering (tensor fastest, then data, then pipe)."""
    del pp
    return rank // (dp * tp), (rank // tp) % dp, rank % tp


def expected_files(layout: Mapping[str, Any], tp: int, pp: int, dp: int,
                   ranks: Optional[Sequence[int]] = None, stage: Optional[int] = None) -> Dict[str, str]:
    """name -> the rank(s) that write it, for the whole grid or only for ``ranks``.

    ``stage`` (the expected ZeRO stage) decides which files must be there when the names found
    do not, e.g. on a node that holds nothing yet.
    """
    wanted: Dict[str, str] = {}
    if stage is None:
        stage = layout.get("zero_stage")
    stage3 = layout.get("kind") == "zero3" or stage == 3
    optim = bool(layout.get("_optim")) or (stage or 0) >= 1
    prefix = layout.get("optim_prefix")
    if prefix is None:
        # No optimizer file to copy the prefix from: bf16 adds bf16_, and the names do not say.
        prefix = {"bf16": "bf16_", "fp16": "", "fp32": ""}.get(layout.get("precision") or "", "[bf16_]")
    cells = []
    if ranks is None:
        cells = [(p, d, t, None) for p in range(pp) for d in range(dp) for t in range(tp)]
    else:
        for rank in ranks:
            p, d, t = rank_coordinates(rank, tp, pp, dp)
            cells.append((p, d, t, rank))
    for p, d, t, rank in cells:
        mp = p * tp + t
        who = ("rank %d" % rank) if rank is not None else ("dp %d, mp %d" % (d, mp))
        if stage3:
            wanted["zero_pp_rank_%d_mp_rank_%02d_model_states.pt" % (d, mp)] = who
        elif d == 0:
            wanted["mp_rank_%02d_model_states.pt" % mp] = who
        if optim:
            wanted["%szero_pp_rank_%d_mp_rank_%02d_optim_states.pt" % (prefix, d, mp)] = who
    return wanted


# --------------------------------------------------------------------------------------------
# Checks
# --------------------------------------------------------------------------------------------
def normalise_expect(expect: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``expect`` with data_parallel derived from world_size (and the other way round)."""
    out = dict((k, v) for k, v in (expect or {}).items() if v is not None)
    unknown = sorted(set(out) - set(EXPECT_KEYS))
    if unknown:
        raise ValueError("expect: unknown key(s) %s; known: %s" % (", ".join(unknown), ", ".join(EXPECT_KEYS)))
    for key in EXPECT_KEYS:
        if key in out and key != "precision":
            try:
                out[key] = int(out[key])
            except (TypeError, ValueError):
                raise ValueError("expect.%s must be an integer, got %r" % (key, out[key]))
    if "precision" in out and out["precision"] not in ("bf16", "fp16", "fp32"):
        raise ValueError("expect.precision must be bf16, fp16 or fp32, got %r" % out["precision"])
    if "world_size" in out:
        model = out.get("tensor_parallel", 1) * out.get("pipeline_parallel", 1)
        if out["world_size"] % model:
            raise ValueError("expect.world_size %d is not a multiple of tensor_parallel x pipeline_parallel = %d"
                             % (out["world_size"], model))
        dp = out["world_size"] // model
        if "data_parallel" in out and out["data_parallel"] != dp:
            raise ValueError("expect.data_parallel %d disagrees with world_size %d / (TP x PP %d) = %d"
                             % (out["data_parallel"], out["world_size"], model, dp))
        out["data_parallel"] = dp
    return out


# The job variables (megatron_job_<key>) a checkpoint's shape is expected from.
JOB_EXPECT_KEYS = ("tensor_parallel", "pipeline_parallel", "zero_stage")


def expect_from_job(job_vars: Mapping[str, Any], nodes: int) -> Dict[str, Any]:
    """The shape a job's own variables declare for its checkpoints (the job lookup's ``vars``:
    the ``megatron_job_*`` names the inventory sets), for ``normalise_expect``. Only what the
    inventory sets: a cluster that leaves the job at the schema's defaults is judged by what its
    checkpoints hold, not by a TP 8 it never asked for. ``world_size`` is ``nodes`` x
    ``megatron_job_gpus_per_node`` when both are known."""
    out: Dict[str, Any] = {}
    for key in JOB_EXPECT_KEYS + ("gpus_per_node",):
        value = job_vars.get("megatron_job_" + key)
        if value is None or value == "":
            continue
        try:
            out[key] = int(value)
        except (TypeError, ValueError):
            raise ValueError("megatron_job_%s must be an integer, got %r" % (key, value))
    gpus = out.pop("gpus_per_node", None)
    if gpus is not None and int(nodes or 0) > 0:
        out["world_size"] = int(nodes) * gpus
    return out


def shape_mismatches(path: str, tag: str, layout: Mapping[str, Any], expect: Mapping[str, Any],
                     whole: bool = True, fix: Optional[str] = None) -> List[str]:
    """How tag ``tag`` (``classify``'s ``layout``) differs from the job ``expect`` describes, each with
    what to do. ``whole``: the files are the whole tag, so TP, PP and DP can be judged; a node's
    share of a scattered tag shows only its ZeRO stage and precision. ``fix``: what to do about a
    layout change, where the caller knows the stack (default: DeepSpeed's universal checkpoint)."""
    where = "%s/%s" % (path.rstrip("/"), tag)
    out: List[str] = []
    if whole:
        hint = fix or UNIVERSAL_HINT.format(path=path.rstrip("/"), tag=tag)
        for key, found in (("tensor_parallel", layout.get("tensor_parallel")),
                           ("pipeline_parallel", layout.get("pipeline_parallel"))):
            if key in expect and found is not None and found != expect[key]:
                out.append("%s was saved with %s=%d, expected %d: a TP/PP change needs a conversion: %s" % (
                    where, key, found, expect[key], hint))
        stage = layout.get("zero_stage")
        found_dp = layout.get("data_parallel")
        if "data_parallel" in expect and found_dp is not None and found_dp != expect["data_parallel"]:
            if stage == 0:
                pass  # ZeRO-0 keeps whole optimizer state per model rank: any DP loads it.
            else:
                out.append("%s was saved with data_parallel=%d (ZeRO optimizer shards per rank), expected %d: "
                           "ZeRO-%s shards do not load at another DP size; %s" % (
                               where, found_dp, expect["data_parallel"],
                               stage if stage is not None else "/".join(str(s) for s in layout["zero_stage_candidates"]),
                               hint))
    if "zero_stage" in expect and expect["zero_stage"] not in layout["zero_stage_candidates"]:
        out.append("%s was saved with ZeRO stage %s, expected %d: resume with the stage it was saved with, "
                   "or %s" % (where, "/".join(str(s) for s in layout["zero_stage_candidates"]), expect["zero_stage"],
                              UNIVERSAL_HINT.format(path=path.rstrip("/"), tag=tag)))
    if "precision" in expect and layout.get("precision") and layout["precision"] != expect["precision"]:
        out.append("%s was saved in %s (%s), expected %s" % (
            where, layout["precision"], layout.get("precision_source"), expect["precision"]))
    return out


def judge_listing(names: Iterable[str], path: str, tag: str, expect: Optional[Mapping[str, Any]],
                  fix: Optional[Callable[[Mapping[str, Any]], str]] = None) -> Dict[str, Any]:
    """The layout of tag ``tag`` of checkpoint directory ``path``, from the union of its file names
    on every node, and how it differs from ``expect`` (``normalise_expect``'s keys): the one
    judgement a resume makes before anything is copied (``_job.rules_features.judge_resume`` adds
    the stack's fix and the model form). ``fix``: the text for a layout change, from the layout
    found. ``{layout, mismatches}``."""
    layout = classify(sorted(set(os.path.basename(str(name)) for name in names)))
    public = public_layout(layout)
    return {"layout": public,
            "mismatches": shape_mismatches(path, tag, layout, normalise_expect(expect),
                                           fix=fix(public) if fix else None)}


def tag_problems(path: str, tag: str, files: Mapping[str, Mapping[str, Any]], layout: Mapping[str, Any],
                 expect: Mapping[str, Any], ranks: Optional[Sequence[int]] = None) -> Tuple[List[str], List[str]]:
    """(problems, mismatches) of one tag: missing, empty, damaged files; shape against ``expect``."""
    where = "%s/%s" % (path.rstrip("/"), tag)
    problems: List[str] = []
    mismatches: List[str] = []
    if not files:
        problems.append("%s holds no files" % where)
    elif layout["kind"] == "unknown":
        problems.append("%s holds no DeepSpeed model states file (mp_rank_XX_model_states.pt or "
                        "zero_pp_rank_D_mp_rank_XX_model_states.pt); found: %s" % (where, ", ".join(sorted(files))[:400]))
    if len(layout["_prefixes"]) > 1:
        problems.append("%s mixes bf16_zero_ and zero_ optimizer files: two runs with different precision saved into "
                        "the same tag" % where)
    for name, entry in sorted(files.items()):
        if entry.get("size") == 0:
            problems.append("%s/%s is empty (0 bytes)" % (where, name))
        elif entry.get("zip_problem"):
            problems.append("%s/%s is damaged: %s" % (where, name, entry["zip_problem"]))

    # The grid: the model-parallel shape the files show (a TP/PP change is a mismatch below, not
    # missing files); a node's partial files (ranks) show no shape, so expect gives it. DP comes
    # from expect when given, so that the last ranks' shards are missed too.
    found_tp = layout.get("tensor_parallel") if ranks is None else None
    found_pp = layout.get("pipeline_parallel") if ranks is None else None
    tp = found_tp or expect.get("tensor_parallel") or 1
    pp = found_pp or expect.get("pipeline_parallel") or 1
    dp = expect.get("data_parallel") or layout.get("data_parallel") or 1
    if layout["kind"] != "unknown" or ranks is not None or expect:
        grid_layout = dict(layout)
        if not grid_layout.get("precision") and expect.get("precision"):
            grid_layout["precision"] = expect["precision"]
        wanted = expected_files(grid_layout, tp, pp, dp, ranks, expect.get("zero_stage"))
        missing = [name for name in sorted(wanted) if name not in files]
        if missing:
            shown = ", ".join("%s (%s)" % (name, wanted[name]) for name in missing[:12])
            more = " and %d more" % (len(missing) - 12) if len(missing) > 12 else ""
            problems.append("%s lacks %d of the %d files of a TP=%d PP=%d DP=%d%s checkpoint: %s%s" % (
                where, len(missing), len(wanted), tp, pp, dp,
                (" (ranks %s)" % ",".join(str(r) for r in ranks)) if ranks is not None else "", shown, more))
    layers = layout["_layers"]
    if layers and len(layers) > 1:
        reference = max(layers.values(), key=len)
        for rank, indices in sorted(layers.items(), key=lambda item: str(item[0])):
            lacking = sorted(reference - indices)
            if lacking:
                problems.append("%s: tensor rank %s lacks layer file(s) %s that the other tensor ranks have" % (
                    where, rank, ", ".join("layer_%02d" % i for i in lacking)))
    if layout["pipeline"] and ranks is None:
        tp_found = [rank for rank in layers if rank is not None]
        for rank in range(tp):
            if tp_found and rank not in layers:
                problems.append("%s has no layer_XX-model_%02d-model_states.pt files for tensor rank %d" % (where, rank, rank))

    mismatches.extend(shape_mismatches(path, tag, layout, expect, whole=ranks is None))
    return problems, mismatches


def prune_plan(tags: Sequence[Mapping[str, Any]], latest: Optional[str], keep: int) -> Dict[str, Any]:
    """Which tags to delete to keep the last ``keep`` good ones.

    Never deleted: the tag ``latest`` names, tags newer than it (a save in progress, or one that
    failed and may be looked at), tags without a ``global_stepN`` step, and anything at all when
    no tag is good. Bad tags older than the kept ones are deleted; they are not counted as kept.
    """
    if keep < 1:
        raise ValueError("keep must be at least 1, got %d" % keep)
    ordered = [t for t in tags if t.get("step") is not None]
    ordered.sort(key=lambda t: t["step"])
    good = [t["tag"] for t in ordered if t.get("ok")]
    kept = good[-keep:]
    latest_step = step_of(latest)
    plan: Dict[str, Any] = {"keep": keep, "kept": kept, "delete": [], "spared": []}
    if not kept:
        plan["spared"] = [t["tag"] for t in tags]
        plan["reason"] = "no good tag: nothing is deleted"
        return plan
    for entry in tags:
        tag = entry["tag"]
        if tag in kept:
            continue
        step = entry.get("step")
        if tag == latest:
            plan["spared"].append(tag)
        elif step is None or (latest_step is not None and step > latest_step):
            plan["spared"].append(tag)
        else:
            plan["delete"].append(tag)
    return plan


# --------------------------------------------------------------------------------------------
# Loading with torch (run with the training venv's python)
# --------------------------------------------------------------------------------------------
LOADER = r'''
import json, sys, zipfile
request = json.load(sys.stdin)
out = {"python": sys.version.split()[0], "torch": None, "files": {}}
try:
    import torch
    out["torch"] = torch.__version__
except Exception as exc:  # noqa: BLE001 - reported, not raised
    out["error"] = "cannot import torch: %s: %s" % (type(exc).__name__, exc)
    print(json.dumps(out))
    sys.exit(0)
ser = torch.serialization
META = ("ds_version", "dp_world_size", "mp_world_size", "global_steps", "global_samples", "iteration")

def stub(name):
    class Stub(object):
        def __new__(cls, *args, **kwargs):
            return object.__new__(cls)
        def __init__(self, *args, **kwargs):
            self.args = args
        def __setstate__(self, state):
            self.state = state
    Stub.__name__ = Stub.__qualname__ = name.rsplit(".", 1)[-1]
    return Stub

def plain(value):
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, dict):
        return dict((str(k), plain(v)) for k, v in value.items() if not hasattr(v, "shape"))
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value][:64]
    return repr(value)[:200]

def tensors(value, depth=0):
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return 1
    if depth > 6:
        return 0
    if isinstance(value, dict):
        return sum(tensors(v, depth + 1) for v in value.values())
    if isinstance(value, (list, tuple)):
        return sum(tensors(v, depth + 1) for v in value)
    return 0

for path in request["files"]:
    result = {"ok": False, "method": None}
    stubbed = []
    try:
        try:
            data = torch.load(path, map_location="cpu", weights_only=True)
            result["method"] = "weights_only"
        except Exception as exc:  # noqa: BLE001
            if "eights only" not in str(exc) and "weights_only" not in str(exc):
                raise
            if hasattr(ser, "get_unsafe_globals_in_checkpoint") and hasattr(ser, "safe_globals"):
                stubbed = ser.get_unsafe_globals_in_checkpoint(path)
                with ser.safe_globals([(stub(n), n) for n in stubbed]):
                    data = torch.load(path, map_location="cpu", weights_only=True)
                result["method"] = "weights_only with inert stand-ins"
            else:
                bad = zipfile.ZipFile(path).testzip()
                if bad:
                    raise ValueError("CRC error in archive member %s" % bad)
                data = None
                result["method"] = "zip CRC check (this torch cannot stub globals for weights_only)"
        result["ok"] = True
        if stubbed:
            result["stubbed_globals"] = stubbed
        if isinstance(data, dict):
            result["keys"] = sorted(str(k) for k in data)[:40]
            result["tensors"] = tensors(data)
            meta = dict((k, plain(data[k])) for k in META if k in data)
            if isinstance(data.get("ds_config"), dict):
                meta["ds_config"] = plain(data["ds_config"])
            result["metadata"] = meta
    except Exception as exc:  # noqa: BLE001
        result["error"] = ("%s: %s" % (type(exc).__name__, exc))[:500]
    out["files"][path] = result
print(json.dumps(out))
'''


def load_problems(where: str, load: Mapping[str, Any]) -> List[str]:
    """Problems from the LOADER's answer (files torch could not load)."""
    if load.get("error"):
        return ["load: %s (python %s)" % (load["error"], load.get("python"))]
    problems = []
    for path, result in sorted((load.get("files") or {}).items()):
        if not result.get("ok"):
            problems.append("%s/%s does not load with torch %s: %s" % (
                where, os.path.basename(path), load.get("torch"), result.get("error")))
    return problems


def load_metadata(load: Mapping[str, Any]) -> Dict[str, Any]:
    """The metadata of the first model states file that loaded (ds_config, dp_world_size, ...)."""
    files = load.get("files") or {}
    for path in sorted(files, key=lambda p: (not os.path.basename(p).startswith("mp_rank_"), p)):
        meta = files[path].get("metadata") or {}
        if meta.get("ds_config") or "dp_world_size" in meta:
            return dict(meta)
    return {}


def parse_loader_output(stdout: str) -> Dict[str, Any]:
    for line in reversed((stdout or "").strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                break
    return {"error": "the loader printed no JSON result: %s" % (stdout or "")[-300:]}


# --------------------------------------------------------------------------------------------
# The whole report
# --------------------------------------------------------------------------------------------
def public_layout(layout: Mapping[str, Any]) -> Dict[str, Any]:
    return dict((k, v) for k, v in layout.items() if not k.startswith("_"))


def analyse(scan: Mapping[str, Any], tag: Optional[str] = None, expect: Optional[Mapping[str, Any]] = None,
            ranks: Optional[Sequence[int]] = None, keep: Optional[int] = None) -> Dict[str, Any]:
    """Everything the module returns except load results; pure over ``scan_dir``'s answer."""
    path = scan["path"]
    exp = normalise_expect(expect)
    if ranks is not None and "data_parallel" not in exp:
        raise ValueError("ranks needs the job's shape: give expect.world_size (or expect.data_parallel), and "
                         "expect.tensor_parallel / pipeline_parallel when they are not 1")
    if ranks is not None:
        world = exp["data_parallel"] * exp.get("tensor_parallel", 1) * exp.get("pipeline_parallel", 1)
        outside = [r for r in ranks if r < 0 or r >= world]
        if outside:
            raise ValueError("ranks %s are outside the world of %d ranks" % (outside, world))
    report: Dict[str, Any] = {
        "path": path, "exists": scan["exists"], "latest": scan.get("latest"), "iteration": scan.get("iteration"),
        "tags": [], "tag": None, "tag_source": None, "step": None, "layout": {}, "files": [], "bytes": 0,
        "problems": [], "mismatches": [], "notes": [], "universal_tags": scan.get("universal_tags", []),
        "ranks": list(ranks) if ranks is not None else None, "expect": exp,
    }
    problems = report["problems"]
    if not scan["exists"]:
        problems.append("%s does not exist or is not a directory: nothing was saved there (is it --save of the "
                        "job, on this node?)" % path)
        report["ok"] = False
        return report
    needs_latest = ranks is None or 0 in ranks
    tag_names = sort_tags(scan["tags"])
    if not tag_names and scan.get("megatron_dirs"):
        problems.append("%s holds Megatron's own layout (%s: iter_NNNNNNN/mp_rank_XX/model_optim_rng.pt), written "
                        "without --deepspeed; this check reads DeepSpeed checkpoints (global_stepN), and a "
                        "--deepspeed run does not load that layout" % (path, ", ".join(scan["megatron_dirs"][:3])))
    elif not tag_names:
        problems.append("%s holds no checkpoint tag (global_stepN directory)" % path)
    latest = scan.get("latest")
    if needs_latest:
        if not scan.get("latest_file"):
            problems.append("%s/latest is missing: DeepSpeed's load_checkpoint will start from scratch; write the tag "
                            "to resume from into it (echo global_stepN > %s/latest)" % (path, path))
        elif not latest:
            problems.append("%s/latest is empty" % path)
        elif latest not in scan["tags"]:
            problems.append("%s/latest names %s, which does not exist (found: %s)" % (
                path, latest, ", ".join(tag_names) or "none"))
    iteration = scan.get("iteration")
    if latest and iteration is not None and step_of(latest) is not None and iteration != step_of(latest):
        report["notes"].append("%s/%s says iteration %s but latest names %s (Megatron resumes from latest with "
                               "--deepspeed)" % (path, ITERATION_FILE, iteration, latest))

    for name in tag_names:
        files = scan["tags"][name]
        layout = classify(files)
        tag_probs, tag_mism = tag_problems(path, name, files, layout, exp, ranks)
        report["tags"].append({"tag": name, "step": step_of(name), "files": len(files),
                               "bytes": sum(f["size"] for f in files.values()),
                               "ok": not tag_probs and not tag_mism, "problems": len(tag_probs) + len(tag_mism)})

    chosen = tag
    report["tag_source"] = "tag"
    if not chosen:
        if latest and latest in scan["tags"]:
            chosen, report["tag_source"] = latest, "latest"
        elif tag_names:
            chosen, report["tag_source"] = tag_names[-1], "newest"
            if not needs_latest:
                report["notes"].append("%s/latest is not on this node (rank 0 writes it); checked the newest tag %s"
                                       % (path, chosen))
    if tag and tag not in scan["tags"]:
        problems.append("%s/%s does not exist (tags found: %s)" % (path, tag, ", ".join(tag_names) or "none"))
        chosen = None
    report["tag"] = chosen
    if chosen:
        files = scan["tags"][chosen]
        layout = classify(files)
        tag_probs, tag_mism = tag_problems(path, chosen, files, layout, exp, ranks)
        problems.extend(tag_probs)
        report["mismatches"].extend(tag_mism)
        report["layout"] = public_layout(layout)
        report["step"] = step_of(chosen)
        report["files"] = [{"name": n, "size": f["size"]} for n, f in sorted(files.items())]
        report["bytes"] = sum(f["size"] for f in files.values())
        if layout["moe_files"]:
            report["notes"].append("%s/%s holds MoE expert files; they are listed, not checked" % (path, chosen))
        if report["tag_source"] == "tag" and latest and chosen != latest:
            report["notes"].append("checked %s, but latest names %s (the tag a resume loads)" % (chosen, latest))
    if keep is not None:
        report["prune"] = prune_plan(report["tags"], latest, keep)
    report["ok"] = not problems and not report["mismatches"]
    return report


def apply_load(report: Dict[str, Any], load: Mapping[str, Any]) -> Dict[str, Any]:
    """Merge the LOADER's answer: per-file results, failures as problems, ds_config into the layout."""
    where = "%s/%s" % (report["path"].rstrip("/"), report["tag"])
    by_name = dict((os.path.basename(p), r) for p, r in (load.get("files") or {}).items())
    for entry in report["files"]:
        if entry["name"] in by_name:
            result = by_name[entry["name"]]
            entry["load"] = dict((k, v) for k, v in result.items() if k != "metadata")
    report["problems"].extend(load_problems(where, load))
    meta = load_metadata(load)
    report["load"] = {"python": load.get("python"), "torch": load.get("torch"), "error": load.get("error"),
                      "files": len(load.get("files") or {}),
                      "loaded": sum(1 for r in (load.get("files") or {}).values() if r.get("ok")),
                      "metadata": meta}
    if meta and report.get("layout"):
        layout = dict(report["layout"])
        before = (layout.get("zero_stage_candidates"), layout.get("precision"))
        refine(layout, meta)
        report["layout"] = layout
        exp = report.get("expect") or {}
        if (layout.get("zero_stage_candidates"), layout.get("precision")) != before:
            # ds_config settled what names could not: redo the stage/precision comparisons.
            report["mismatches"] = [m for m in report["mismatches"] if "ZeRO stage" not in m and " saved in " not in m]
            if "zero_stage" in exp and exp["zero_stage"] not in layout["zero_stage_candidates"]:
                report["mismatches"].append("%s was saved with ZeRO stage %s (ds_config), expected %d: resume with the "
                                            "stage it was saved with, or %s" % (
                                                where, layout["zero_stage"], exp["zero_stage"],
                                                UNIVERSAL_HINT.format(path=report["path"].rstrip("/"), tag=report["tag"])))
            if "precision" in exp and layout.get("precision") != exp["precision"]:
                report["mismatches"].append("%s was saved in %s (ds_config), expected %s" % (
                    where, layout.get("precision"), exp["precision"]))
        if report.get("ranks") is None:
            report["problems"].extend(metadata_problems(where, report, meta))
    report["ok"] = not report["problems"] and not report["mismatches"]
    return report


def metadata_problems(where: str, report: Mapping[str, Any], meta: Mapping[str, Any]) -> List[str]:
    """The grid again, with the stage and sizes the checkpoint itself saved: finds the last DP rank's
    shard, or every optimizer shard, gone, which file names alone cannot tell."""
    names = set(entry["name"] for entry in report.get("files", []))
    layout = classify(names)
    public = report.get("layout") or {}
    problems = []
    mp_world = meta.get("mp_world_size")
    if isinstance(mp_world, int) and layout.get("model_parallel") and mp_world > layout["model_parallel"]:
        problems.append("%s: the model states say mp_world_size=%d, but files exist for %d model-parallel rank(s)" % (
            where, mp_world, layout["model_parallel"]))
    dp = meta.get("dp_world_size") if isinstance(meta.get("dp_world_size"), int) else public.get("data_parallel")
    stage = public.get("zero_stage")
    if layout["kind"] == "unknown" or not dp:
        return problems
    layout["precision"] = public.get("precision")
    tp = layout.get("tensor_parallel") or 1
    pp = layout.get("pipeline_parallel") or 1
    wanted = expected_files(layout, tp, pp, dp, None, stage)
    reported = " ".join(report.get("problems", []))
    missing = [name for name in sorted(wanted) if name not in names and name not in reported]
    if missing:
        problems.append("%s: the checkpoint's own ds_config/dp_world_size say ZeRO-%s DP=%d, but %d file(s) are "
                        "missing: %s" % (where, stage, dp, len(missing), ", ".join(missing[:12])))
    return problems


def summary(report: Mapping[str, Any]) -> List[str]:
    """A few lines for a playbook's debug output."""
    layout = report.get("layout") or {}
    lines = ["%s: %s" % (report["path"], "OK" if report.get("ok") else "PROBLEMS")]
    lines.append("tags: %s; latest: %s; iteration file: %s" % (
        ", ".join(t["tag"] + ("" if t["ok"] else "(!)") for t in report.get("tags", [])) or "none",
        report.get("latest"), report.get("iteration")))
    if report.get("tag"):
        lines.append("%s (%s): %s, TP=%s PP=%s DP=%s ZeRO=%s precision=%s, %d files, %.1f MiB" % (
            report["tag"], report.get("tag_source"), layout.get("kind"), layout.get("tensor_parallel"),
            layout.get("pipeline_parallel"), layout.get("data_parallel"),
            layout.get("zero_stage") if layout.get("zero_stage") is not None
            else "/".join(str(s) for s in layout.get("zero_stage_candidates") or []) or None,
            layout.get("precision") or "?", len(report.get("files", [])), report.get("bytes", 0) / 1048576.0))
    if report.get("load"):
        load = report["load"]
        lines.append("loaded %d/%d files with torch %s" % (load["loaded"], load["files"], load.get("torch")))
    for text in list(report.get("problems", [])) + list(report.get("mismatches", [])):
        lines.append("problem: " + text)
    for text in report.get("notes", []):
        lines.append("note: " + text)
    if report.get("prune"):
        plan = report["prune"]
        lines.append("keep %d: keeping %s, deleting %s" % (
            plan["keep"], ", ".join(plan["kept"]) or "none", ", ".join(plan["delete"]) or "none"))
    return lines


def failure_message(report: Mapping[str, Any], node: str = "") -> str:
    layout = report.get("layout") or {}
    stage = layout.get("zero_stage")
    if stage is None and layout.get("zero_stage_candidates"):
        stage = "/".join(str(s) for s in layout["zero_stage_candidates"])
    found = "tag %s: %s TP=%s PP=%s DP=%s ZeRO=%s" % (
        report.get("tag"), layout.get("kind"), layout.get("tensor_parallel"), layout.get("pipeline_parallel"),
        layout.get("data_parallel"), stage) if report.get("tag") else "no usable tag"
    expected = ", ".join("%s=%s" % (k, v) for k, v in sorted((report.get("expect") or {}).items())) or "a complete checkpoint"
    items = list(report.get("problems", [])) + list(report.get("mismatches", []))
    return ("megatron_checkpoint_info%s: checkpoint %s is not usable. Found %s; expected %s. %d problem(s): %s. "
            "Fix or remove the damaged tag (point latest at a good tag), or convert as said; set "
            "fail_on_problems=false to only report." % (
                (" on " + node) if node else "", report.get("path"), found, expected, len(items), " | ".join(items)))
