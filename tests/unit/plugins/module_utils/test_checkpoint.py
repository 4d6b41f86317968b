# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_checkpoint: file-name tables, checkpoint trees built in tmp_path, and real DeepSpeed checkpoints
written on CPU by ds_checkpoint_writer.py (ZeRO 0-3, fp32 and bf16), then damaged on purpose."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any, Dict, Mapping, Optional

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils import _checkpoint as ck

WRITER = Path(__file__).with_name("ds_checkpoint_writer.py")


def zip_bytes(size: int = 300) -> bytes:
    """A small valid zip, like torch.save writes (stored members)."""
    import io
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("archive/data.pkl", b"x" * size)
    return buffer.getvalue()


def make_tree(root: Path, tags: Mapping[str, Any], latest: Optional[str] = "auto",
              iteration: Optional[str] = None) -> Path:
    """tags: {tag: [names] or {name: size}}; a size of 0 makes an empty file, else a valid zip."""
    root.mkdir(parents=True, exist_ok=True)
    for tag, files in tags.items():
        (root / tag).mkdir()
        items = files.items() if isinstance(files, dict) else ((name, 100) for name in files)
        for name, size in items:
            (root / tag / name).write_bytes(b"" if size == 0 else zip_bytes(size))
    if latest == "auto":
        latest = ck.sort_tags(tags)[-1] if tags else None
    if latest is not None:
        (root / "latest").write_text(latest)
    if iteration is not None:
        (root / "latest_checkpointed_iteration.txt").write_text(iteration)
    return root


def zero_grid(dp: int, mp: int, prefix: str = "", kind: str = "optim"):
    return ["%szero_pp_rank_%d_mp_rank_%02d_%s_states.pt" % (prefix, d, m, kind) for d in range(dp) for m in range(mp)]


def mp_files(mp: int):
    return ["mp_rank_%02d_model_states.pt" % m for m in range(mp)]


def layer_files(layers, tp: int):
    return ["layer_%02d-model_%02d-model_states.pt" % (layer, t) for layer in layers for t in range(tp)]


def run(root: Path, **kwargs) -> Dict[str, Any]:
    return ck.analyse(ck.scan_dir(str(root)), **kwargs)


# --------------------------------------------------------------------------------------------
# Names only
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("names, want", [
    (mp_files(1), dict(kind="no_pipeline", tensor_parallel=1, pipeline_parallel=1, data_parallel=None,
                       zero_stage=0, precision=None)),
    (mp_files(2) + zero_grid(2, 2), dict(kind="no_pipeline", tensor_parallel=2, pipeline_parallel=1, data_parallel=2,
                                         zero_stage=None, zero_stage_candidates=[1, 2], precision=None)),
    (mp_files(1) + zero_grid(2, 1, "bf16_"), dict(kind="no_pipeline", data_parallel=2, zero_stage_candidates=[1, 2],
                                                  precision="bf16", optim_prefix="bf16_")),
    (layer_files(range(1, 5), 1) + mp_files(2) + zero_grid(1, 2),
     dict(kind="pipeline", tensor_parallel=1, pipeline_parallel=2, data_parallel=1, zero_stage=1)),
    (layer_files([1, 3, 4, 6], 2) + mp_files(4), dict(kind="pipeline", tensor_parallel=2, pipeline_parallel=2,
                                                      model_parallel=4, zero_stage=0)),
    (["layer_01-model_states.pt", "layer_02-model_states.pt"] + mp_files(1),
     dict(kind="pipeline", tensor_parallel=1, pipeline_parallel=1)),
    (zero_grid(2, 1, kind="model") + zero_grid(2, 1, "bf16_"),
     dict(kind="zero3", data_parallel=2, zero_stage=3, precision="bf16")),
    (["zero_to_fp32.py", "notes.txt"], dict(kind="unknown", tensor_parallel=None, zero_stage=0)),
    (mp_files(1) + ["expert_0_mp_rank_00_model_states.pt"], dict(kind="no_pipeline", moe_files=[
        "expert_0_mp_rank_00_model_states.pt"])),
])
def test_classify_from_names(names, want):
    layout = ck.classify(names)
    for key, value in want.items():
        assert layout[key] == value, (key, layout)


@pytest.mark.parametrize("rank, tp, pp, dp, coords", [
    (0, 1, 1, 6, (0, 0, 0)),
    (5, 1, 1, 6, (0, 5, 0)),
    (5, 2, 2, 2, (1, 0, 1)),
    (3, 2, 1, 2, (0, 1, 1)),
])
def test_rank_coordinates_follow_megatron_order(rank, tp, pp, dp, coords):
    assert ck.rank_coordinates(rank, tp, pp, dp) == coords


@pytest.mark.parametrize("expect, want", [
    ({"world_size": 8, "tensor_parallel": 2}, {"world_size": 8, "tensor_parallel": 2, "data_parallel": 4}),
    ({"tensor_parallel": None, "zero_stage": "1"}, {"zero_stage": 1}),
    ({"world_size": 6, "tensor_parallel": 4}, "not a multiple"),
    ({"world_size": 8, "data_parallel": 2}, "disagrees"),
    ({"tp": 2}, "unknown key"),
    ({"precision": "fp8"}, "bf16, fp16 or fp32"),
])
def test_normalise_expect(expect, want):
    if isinstance(want, str):
        with pytest.raises(ValueError, match=want):
            ck.normalise_expect(expect)
    else:
        assert ck.normalise_expect(expect) == want


@pytest.mark.parametrize("job_vars, nodes, want", [
    # nothing set: nothing expected (the checkpoints are judged by what they hold)
    ({}, 3, {}),
    ({"megatron_job_name": "gpt"}, 3, {}),
    ({"megatron_job_tensor_parallel": "2", "megatron_job_zero_stage": 1}, 0, {"tensor_parallel": 2, "zero_stage": 1}),
    ({"megatron_job_gpus_per_node": 8, "megatron_job_pipeline_parallel": 2}, 2, {"world_size": 16, "pipeline_parallel": 2}),
    # no nodes in the group: no world size
    ({"megatron_job_gpus_per_node": 8}, 0, {}),
    ({"megatron_job_tensor_parallel": None, "megatron_job_pipeline_parallel": ""}, 2, {}),
    ({"megatron_job_tensor_parallel": "two"}, 2, "megatron_job_tensor_parallel must be an integer"),
])
def test_expect_from_job(job_vars, nodes, want):
    if isinstance(want, str):
        with pytest.raises(ValueError, match=want):
            ck.expect_from_job(job_vars, nodes)
    else:
        assert ck.expect_from_job(job_vars, nodes) == want


# --------------------------------------------------------------------------------------------
# Trees in tmp_path
# --------------------------------------------------------------------------------------------
GOOD_DP2 = mp_files(1) + zero_grid(2, 1, "bf16_")


@pytest.mark.parametrize("tags, kwargs, latest, problem", [
    ({"global_step4": GOOD_DP2}, {}, "auto", None),
    ({"global_step4": dict.fromkeys(GOOD_DP2, 100)},
     {"expect": {"world_size": 2, "zero_stage": 2, "precision": "bf16"}}, "auto", None),
    ({"global_step4": GOOD_DP2[:1] + GOOD_DP2[2:]}, {}, "auto", "lacks 1 of the 3 files.*bf16_zero_pp_rank_0_mp_rank_00"),
    ({"global_step4": GOOD_DP2[:2]}, {"expect": {"data_parallel": 2}}, "auto", "bf16_zero_pp_rank_1_mp_rank_00"),
    ({"global_step4": dict(dict.fromkeys(GOOD_DP2, 100), **{GOOD_DP2[1]: 0})}, {}, "auto", "is empty"),
    ({"global_step4": GOOD_DP2}, {}, None, "latest is missing"),
    ({"global_step4": GOOD_DP2}, {}, "global_step9", "names global_step9, which does not exist"),
    ({"global_step4": GOOD_DP2}, {}, "", "latest is empty"),
    ({}, {}, None, "holds no checkpoint tag"),
    ({"global_step4": GOOD_DP2}, {"tag": "global_step3"}, "auto", "global_step3 does not exist"),
    ({"global_step4": mp_files(2) + zero_grid(1, 1)}, {}, "auto", "dp 0, mp 1"),
    ({"global_step4": layer_files([1, 2], 2)[:-1] + mp_files(2)}, {}, "auto", "tensor rank 1 lacks layer file"),
    ({"global_step4": mp_files(1) + zero_grid(1, 1) + zero_grid(1, 1, "bf16_")}, {}, "auto", "mixes bf16_zero_"),
    ({"global_step4": ["zero_to_fp32.py"]}, {}, "auto", "no DeepSpeed model states file"),
])
def test_problems_in_trees(tmp_path, tags, kwargs, latest, problem):
    report = run(make_tree(tmp_path / "ckpt", tags, latest=latest), **kwargs)
    text = " | ".join(report["problems"])
    if problem is None:
        assert report["ok"], report["problems"] + report["mismatches"]
        assert report["problems"] == [] and report["mismatches"] == []
    else:
        assert not report["ok"]
        assert re.search(problem, text), text


def test_megatron_layout_is_named(tmp_path):
    root = tmp_path / "ckpt"
    (root / "iter_0000100" / "mp_rank_00").mkdir(parents=True)
    (root / "latest_checkpointed_iteration.txt").write_text("100")
    report = run(root)
    assert not report["ok"] and any("Megatron's own layout (iter_0000100" in p for p in report["problems"])


def test_missing_directory(tmp_path):
    report = run(tmp_path / "nope")
    assert not report["ok"] and "does not exist" in report["problems"][0]


@pytest.mark.parametrize("files, expect, mismatch", [
    (mp_files(1) + zero_grid(2, 1), {"tensor_parallel": 2}, r"tensor_parallel=1, expected 2.*ds_to_universal.*--universal-checkpoint"),
    (layer_files([1, 2], 1) + mp_files(2) + zero_grid(1, 2), {"pipeline_parallel": 1},
     r"pipeline_parallel=2, expected 1.*ds_to_universal"),
    (mp_files(1) + zero_grid(2, 1), {"data_parallel": 4}, r"data_parallel=2 .*expected 4.*ZeRO-1/2 shards"),
    (mp_files(1) + zero_grid(2, 1), {"zero_stage": 3}, r"ZeRO stage 1/2, expected 3"),
    (mp_files(1) + zero_grid(2, 1, "bf16_"), {"precision": "fp16"}, r"saved in bf16 .*expected fp16"),
    (mp_files(1), {"data_parallel": 4}, None),  # ZeRO-0 loads at any DP
    (mp_files(2) + zero_grid(2, 2), {"tensor_parallel": 2, "world_size": 4, "zero_stage": 2}, None),
])
def test_expect_mismatches(tmp_path, files, expect, mismatch):
    report = run(make_tree(tmp_path / "ckpt", {"global_step10": files}), expect=expect)
    if mismatch is None:
        assert report["mismatches"] == [], report["mismatches"]
    else:
        assert any(re.search(mismatch, m) for m in report["mismatches"]), report["mismatches"]
        assert not report["ok"]
        assert "ckpt" in ck.failure_message(report, "node1")


def test_tags_are_sorted_by_step_and_latest_and_iteration_read(tmp_path):
    root = make_tree(tmp_path / "ckpt", {"global_step100": mp_files(1), "global_step20": mp_files(1),
                                         "global_step3": [], "global_step3_universal": mp_files(1)},
                     latest="global_step20", iteration="100")
    report = run(root)
    assert [t["tag"] for t in report["tags"]] == ["global_step3", "global_step20", "global_step100"]
    assert [t["ok"] for t in report["tags"]] == [False, True, True]
    assert report["tag"] == "global_step20" and report["tag_source"] == "latest" and report["step"] == 20
    assert report["iteration"] == 100 and report["universal_tags"] == ["global_step3_universal"]
    assert any("iteration 100 but latest names global_step20" in w for w in report["notes"])
    assert report["ok"]  # global_step3 is broken, but it is not the tag checked


# Scattered ZeRO-1 checkpoint: 3 nodes x 2 ranks, no shared storage (world 6, TP=PP=1).
EXPECT6 = {"world_size": 6, "tensor_parallel": 1, "pipeline_parallel": 1, "zero_stage": 1}


@pytest.mark.parametrize("files, latest, ranks, problem", [
    (mp_files(1) + ["zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"],
     "global_step4", [0, 1], None),
    (["zero_pp_rank_2_mp_rank_00_optim_states.pt", "zero_pp_rank_3_mp_rank_00_optim_states.pt"], None, [2, 3], None),
    (["zero_pp_rank_4_mp_rank_00_optim_states.pt"], None, [4, 5], r"zero_pp_rank_5_mp_rank_00_optim_states.pt \(rank 5\)"),
    (["zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"], "global_step4", [0, 1],
     r"mp_rank_00_model_states.pt \(rank 0\)"),
    (mp_files(1) + ["zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_1_mp_rank_00_optim_states.pt"],
     None, [0, 1], "latest is missing"),
    ([], None, [2, 3], r"lacks 2 of the 2 files"),
])
def test_scattered_checkpoint_checked_per_node(tmp_path, files, latest, ranks, problem):
    root = make_tree(tmp_path / "ckpt", {"global_step4": files}, latest=latest)
    report = run(root, ranks=ranks, expect=EXPECT6, tag="global_step4" if latest is None else None)
    if problem is None:
        assert report["ok"], report["problems"] + report["mismatches"]
    else:
        assert any(re.search(problem, p) for p in report["problems"]), report["problems"]


def test_scattered_node_without_latest_falls_back_to_newest_tag(tmp_path):
    root = make_tree(tmp_path / "ckpt", {"global_step2": zero_grid(4, 1)[2:], "global_step4": zero_grid(4, 1)[2:]},
                     latest=None)
    report = run(root, ranks=[2, 3], expect={"world_size": 4, "zero_stage": 1})
    assert report["tag"] == "global_step4" and report["tag_source"] == "newest" and report["ok"]


@pytest.mark.parametrize("kwargs, message", [
    ({"ranks": [0, 1]}, "ranks needs the job's shape"),
    ({"ranks": [6], "expect": EXPECT6}, "outside the world of 6"),
])
def test_ranks_need_the_shape(tmp_path, kwargs, message):
    with pytest.raises(ValueError, match=message):
        run(make_tree(tmp_path / "ckpt", {"global_step1": mp_files(1)}), **kwargs)


@pytest.mark.parametrize("tags, latest, keep, delete, spared", [
    ([("global_step10", True), ("global_step20", True), ("global_step30", True)], "global_step30", 2,
     ["global_step10"], []),
    ([("global_step10", True), ("global_step20", False), ("global_step30", True)], "global_step30", 2,
     ["global_step20"], []),
    # latest names an older tag: never deleted; a newer failed save is spared too
    ([("global_step10", True), ("global_step20", True), ("global_step30", False)], "global_step10", 1,
     [], ["global_step10", "global_step30"]),
    ([("global_step10", False), ("global_step20", False)], "global_step20", 1, [], ["global_step10", "global_step20"]),
    ([("global_step10", True), ("custom", True), ("global_step20", True)], "global_step20", 1,
     ["global_step10"], ["custom"]),
])
def test_prune_plan(tags, latest, keep, delete, spared):
    entries = [{"tag": t, "step": ck.step_of(t), "ok": ok} for t, ok in tags]
    plan = ck.prune_plan(entries, latest, keep)
    assert plan["delete"] == delete and plan["spared"] == spared
    assert latest not in plan["delete"]


def test_prune_plan_refuses_keep_0():
    with pytest.raises(ValueError, match="at least 1"):
        ck.prune_plan([], None, 0)


def test_analyse_returns_a_prune_plan(tmp_path):
    root = make_tree(tmp_path / "ckpt", {"global_step1": mp_files(1), "global_step2": [],
                                         "global_step3": mp_files(1), "global_step4": mp_files(1)})
    plan = run(root, keep=2)["prune"]
    assert plan["kept"] == ["global_step3", "global_step4"] and plan["delete"] == ["global_step1", "global_step2"]


@pytest.mark.parametrize("content, problem", [
    (zip_bytes(), None),
    (zip_bytes()[:-10], "end record"),
    (zip_bytes(5000)[:2000], "no zip end record"),
    (b"not a zip at all, just some text that is long enough", "no zip end record"),
    (b"PK", "shorter than"),
])
def test_zip_problem(tmp_path, content, problem):
    path = tmp_path / "f.pt"
    path.write_bytes(content)
    found = ck.zip_problem(str(path), len(content))
    assert (found is None) if problem is None else (problem in found), found


def test_summary_lines(tmp_path):
    report = run(make_tree(tmp_path / "ckpt", {"global_step4": GOOD_DP2}), keep=1)
    lines = ck.summary(report)
    assert lines[0].endswith("OK") and "TP=1 PP=1 DP=2" in lines[2] and "precision=bf16" in lines[2]
    assert lines[-1].startswith("keep 1")


# --------------------------------------------------------------------------------------------
# Real DeepSpeed checkpoints (CPU, world size 1)
# --------------------------------------------------------------------------------------------
SPECS = ["0:fp32", "0:bf16", "1:fp32", "1:bf16", "2:fp32", "2:bf16", "3:fp32", "3:bf16"]


def _shared_dir(tmp_path_factory) -> Path:
    """A directory every xdist worker of this session sees (the parent of the workers' base temps)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def real_checkpoints(tmp_path_factory):
    """Written once per session under a lock, whatever the number of xdist workers."""
    import fcntl
    out = _shared_dir(tmp_path_factory) / "ds_checkpoints"
    with open(str(out) + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = out / "result.json"
        if not done.exists():
            out.mkdir(exist_ok=True)
            done.write_text(json.dumps(_write(out)))
        result = json.loads(done.read_text())
    if "skip" in result:
        pytest.skip(result["skip"])
    return out


def _write(out: Path) -> Dict[str, Any]:
    env = dict(os.environ, DS_ACCELERATOR="cpu", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(key, None)
    try:
        proc = subprocess.run([sys.executable, str(WRITER), str(out)] + SPECS, capture_output=True, text=True,
                              env=env, timeout=300, check=False)
    except subprocess.TimeoutExpired:
        return {"skip": "writing DeepSpeed checkpoints on CPU took over 300 s"}
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if not lines:
        return {"skip": "DeepSpeed could not write a CPU checkpoint (rc %d): %s" % (proc.returncode, proc.stderr[-800:])}
    return json.loads(lines[-1])


def copy_of(real_checkpoints: Path, name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(str(real_checkpoints / name), str(tmp_path / name)))


def run_loader(files) -> Dict[str, Any]:
    proc = subprocess.run([sys.executable, "-c", ck.LOADER], input=json.dumps({"files": [str(f) for f in files]}),
                          capture_output=True, text=True, timeout=120, check=False)
    return ck.parse_loader_output(proc.stdout)


def load_with_torch(report: Dict[str, Any], loaded: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """apply_load with the LOADER's answer for this tag's files (from ``loaded`` when given: one
    torch import for many tests)."""
    files = [os.path.join(report["path"], report["tag"], f["name"]) for f in report["files"]
             if f["name"].endswith(".pt") and f["size"] > 0]
    if loaded is None:
        answer = run_loader(files)
    else:
        answer = dict(loaded, files=dict((f, loaded["files"][f]) for f in files))
    return ck.apply_load(report, answer)


@pytest.fixture(scope="session")
def real_loaded(real_checkpoints):
    """One LOADER run (one torch import) over every real checkpoint, shared like real_checkpoints."""
    import fcntl
    with open(str(real_checkpoints / "loaded.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = real_checkpoints / "loaded.json"
        if not done.exists():
            done.write_text(json.dumps(run_loader(sorted(real_checkpoints.glob("*/global_step2/*.pt")))))
        answer = json.loads(done.read_text())
    assert not answer.get("error"), answer
    return answer


# (names only) -> stage candidates, precision; (loaded) -> exact stage, precision
REAL = [
    ("0:fp32", "no_pipeline", [0], None, 0, "fp32", ["mp_rank_00_model_states.pt"]),
    ("0:bf16", "no_pipeline", [0], None, 0, "bf16", ["mp_rank_00_model_states.pt"]),
    ("1:fp32", "no_pipeline", [1, 2], None, 1, "fp32",
     ["mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"]),
    ("1:bf16", "no_pipeline", [1, 2], "bf16", 1, "bf16",
     ["bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", "mp_rank_00_model_states.pt"]),
    ("2:fp32", "no_pipeline", [1, 2], None, 2, "fp32",
     ["mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"]),
    ("2:bf16", "no_pipeline", [1, 2], "bf16", 2, "bf16",
     ["bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", "mp_rank_00_model_states.pt"]),
    ("3:fp32", "zero3", [3], None, 3, "fp32",
     ["zero_pp_rank_0_mp_rank_00_model_states.pt", "zero_pp_rank_0_mp_rank_00_optim_states.pt"]),
    ("3:bf16", "zero3", [3], "bf16", 3, "bf16",
     ["bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", "zero_pp_rank_0_mp_rank_00_model_states.pt"]),
]


@pytest.mark.parametrize("spec, kind, candidates, name_precision, stage, precision, files", REAL)
def test_real_checkpoint_is_read_right(real_checkpoints, real_loaded, spec, kind, candidates, name_precision, stage,
                                       precision, files):
    name = "z%s_%s" % tuple(spec.split(":"))
    report = run(real_checkpoints / name, expect={"world_size": 1, "tensor_parallel": 1, "pipeline_parallel": 1})
    assert report["ok"], report["problems"] + report["mismatches"]
    assert [f["name"] for f in report["files"]] == files  # what DeepSpeed 0.19 really writes
    assert report["latest"] == report["tag"] == "global_step2" and report["iteration"] == 2
    layout = report["layout"]
    assert (layout["kind"], layout["tensor_parallel"], layout["pipeline_parallel"]) == (kind, 1, 1)
    assert layout["zero_stage_candidates"] == candidates and layout["precision"] == name_precision
    assert layout["data_parallel"] == (None if stage == 0 else 1)
    report = load_with_torch(report, real_loaded)
    assert report["ok"], report["problems"]
    assert report["load"]["loaded"] == len(files) and report["load"]["metadata"]["ds_version"]
    layout = report["layout"]
    assert (layout["zero_stage"], layout["precision"], layout["data_parallel"]) == (stage, precision, 1)


@pytest.mark.parametrize("spec, damage, kwargs, problem", [
    ("1:bf16", ("size0", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"), {}, "is empty"),
    ("2:fp32", ("cut", "zero_pp_rank_0_mp_rank_00_optim_states.pt"), {}, "is damaged: no zip end record"),
    ("3:fp32", ("cut", "zero_pp_rank_0_mp_rank_00_model_states.pt"), {}, "is damaged"),
    ("0:fp32", ("delete", "mp_rank_00_model_states.pt"), {}, "holds no files"),
    ("3:bf16", ("delete", "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"), {"expect": {"zero_stage": 3}},
     "[bf16_]zero_pp_rank_0_mp_rank_00_optim_states.pt (dp 0, mp 0)"),
    ("1:fp32", ("delete", "zero_pp_rank_0_mp_rank_00_optim_states.pt"), {"expect": {"zero_stage": 1}},
     "lacks 1 of the 2 files"),
    ("1:fp32", ("delete", "latest"), {}, "latest is missing"),
    ("2:bf16", ("latest", "global_step7"), {}, "names global_step7"),
])
def test_real_checkpoint_damage_is_found(real_checkpoints, tmp_path, spec, damage, kwargs, problem):
    root = copy_of(real_checkpoints, "z%s_%s" % tuple(spec.split(":")), tmp_path)
    action, target = damage
    path = root / "global_step2" / target if action != "latest" and target != "latest" else root / "latest"
    if action == "size0":
        path.write_bytes(b"")
    elif action == "cut":
        data = path.read_bytes()
        path.write_bytes(data[:len(data) // 2])
    elif action == "delete":
        path.unlink()
    else:
        path.write_text(target)
    report = run(root, **kwargs)
    assert not report["ok"]
    assert any(problem in p for p in report["problems"]), report["problems"]


@pytest.mark.parametrize("expect, mismatch", [
    ({"tensor_parallel": 2}, "tensor_parallel=1, expected 2"),
    ({"pipeline_parallel": 4}, "pipeline_parallel=1, expected 4"),
    ({"world_size": 2}, "data_parallel=1 "),
])
def test_real_checkpoint_shape_change_points_to_universal_checkpoint(real_checkpoints, expect, mismatch):
    report = run(real_checkpoints / "z1_bf16", expect=expect)
    found = [m for m in report["mismatches"] if mismatch in m]
    assert found and "ds_to_universal" in found[0] and "--universal-checkpoint" in found[0], report["mismatches"]
    assert "ds_to_universal" in ck.failure_message(report)


def test_real_checkpoint_cut_file_does_not_load(real_checkpoints, tmp_path):
    root = copy_of(real_checkpoints, "z2_bf16", tmp_path)
    shard = root / "global_step2" / "bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"
    data = shard.read_bytes()
    shard.write_bytes(data[:len(data) * 2 // 3])
    report = ck.analyse(ck.scan_dir(str(root), zip_check=False))
    assert report["ok"], "without zip_check and load, a cut file is only seen by size"
    report = load_with_torch(report)
    assert not report["ok"]
    assert any("bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt does not load" in p for p in report["problems"])
    assert report["load"]["loaded"] == 1


def test_real_checkpoint_lost_shard_found_by_loaded_ds_config(real_checkpoints, tmp_path):
    # Names alone take a ZeRO-1 tag without its only optimizer shard for ZeRO-0; ds_config says otherwise.
    root = copy_of(real_checkpoints, "z1_fp32", tmp_path)
    (root / "global_step2" / "zero_pp_rank_0_mp_rank_00_optim_states.pt").unlink()
    report = run(root)
    assert report["ok"] and report["layout"]["zero_stage"] == 0
    report = load_with_torch(report)
    assert not report["ok"] and report["layout"]["zero_stage"] == 1
    assert any("zero_pp_rank_0_mp_rank_00_optim_states.pt" in p for p in report["problems"]), report["problems"]


# ---------------------------------------------------------------- a resume's judgement of a listing
def _mp(n):
    return ["mp_rank_%02d_model_states.pt" % i for i in range(n)]


def _optim(dp, mp=1, prefix=""):
    return ["%szero_pp_rank_%d_mp_rank_%02d_optim_states.pt" % (prefix, d, m) for d in range(dp) for m in range(mp)]


def _layers(tp, layers=(1, 2, 3)):
    return ["layer_%02d-model_%02d-model_states.pt" % (layer, t) for layer in layers for t in range(tp)]


@pytest.mark.parametrize("names, expect, wanted", [
    # the same grid: nothing to say
    (_mp(1) + _optim(6), dict(world_size=6, tensor_parallel=1, pipeline_parallel=1, zero_stage=1), []),
    # two nodes' shares together make the whole tag (what resume.yml passes: the union)
    (_mp(1) + _optim(3) + _optim(6)[3:], dict(world_size=6, tensor_parallel=1, pipeline_parallel=1, zero_stage=1), []),
    # TP 2 saved, TP 1 job (the molecule negative case)
    (_mp(2), dict(world_size=6, tensor_parallel=1, pipeline_parallel=1, zero_stage=0),
     ["tensor_parallel=2, expected 1"]),
    # PP 2 saved with the pipeline engine, PP 1 job
    (_layers(1) + _mp(2) + _optim(2, 2), dict(world_size=4, tensor_parallel=1, pipeline_parallel=1, zero_stage=1),
     ["pipeline_parallel=2, expected 1", "data_parallel=2"]),
    # ZeRO-1 shards of DP 3 into DP 2
    (_mp(1) + _optim(3), dict(world_size=2, tensor_parallel=1, pipeline_parallel=1, zero_stage=1),
     ["data_parallel=3 (ZeRO optimizer shards per rank), expected 2"]),
    # ZeRO-0 loads at any DP, but not into a ZeRO-1 job
    (_mp(1), dict(world_size=2, tensor_parallel=1, pipeline_parallel=1, zero_stage=0), []),
    (_mp(1), dict(world_size=2, tensor_parallel=1, pipeline_parallel=1, zero_stage=1), ["ZeRO stage 0, expected 1"]),
])
def test_judge_listing_names_each_mismatch(names, expect, wanted):
    got = ck.judge_listing(names, "/ck/", "global_step5", expect)
    assert len(got["mismatches"]) == len(wanted), got["mismatches"]
    for text, message in zip(wanted, got["mismatches"]):
        assert text in message and message.startswith("/ck/global_step5 was saved with")
    assert "_layers" not in got["layout"]


def test_judge_listing_takes_the_callers_fix_and_paths():
    got = ck.judge_listing(["/abs/ck/global_step5/" + n for n in _mp(2)], "/ck", "global_step5",
                           dict(world_size=2, tensor_parallel=1, pipeline_parallel=1),
                           fix=lambda layout: "resume with TP %d" % layout["tensor_parallel"])
    assert got["layout"]["tensor_parallel"] == 2
    assert got["mismatches"] == ["/ck/global_step5 was saved with tensor_parallel=2, expected 1: a TP/PP change needs "
                                 "a conversion: resume with TP 2"]


@pytest.mark.parametrize("ranks, tp_judged", [(None, True), ([0, 1], False)])
def test_shape_mismatches_judges_tp_only_on_a_whole_tag(ranks, tp_judged):
    layout = ck.classify(_mp(2))
    out = ck.shape_mismatches("/ck", "global_step5", layout, dict(tensor_parallel=1, zero_stage=0),
                              whole=ranks is None)
    assert any("tensor_parallel=2" in m for m in out) is tp_judged


@pytest.mark.parametrize("tag, step", [("global_step7", 7), (" global_step7\n", 7), ("iter_0000007", None), (None, None)])
def test_step_of_reads_latest_as_written(tag, step):
    assert ck.step_of(tag) == step
