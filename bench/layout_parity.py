# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: do the parallel layouts train the same? The loss of Megatron-DeepSpeed's real
pretrain_gpt.py after N iterations for each layout (DP with ZeRO-0..3, TP, PP, their
combinations, activation recompute), over several seeds, against DP 2 with ZeRO-1.

Issue 25 (item 7): the planner may only rank layouts whose loss after N iterations agrees with
ZeRO-1 within the noise of the same layout run across seeds. Layouts do not start from the same
weights at one seed (megatron/initialize.py:286-287 seeds pipeline stage k with seed + 100 k;
tensor-parallel weights come from the model-parallel RNG, seed + 2718 + tp_rank,
megatron/core/tensor_parallel/random.py:202-203), so the yardstick is the spread across seeds.

Every run: CPU ranks over gloo (DS_ACCELERATOR=cpu), fp32, DeepSpeed's launcher, one rank per
process and OMP_NUM_THREADS=1 in every row; a tiny GPT (4 layers, hidden 64, 4 heads, seq 128,
NullTokenizer vocab 1000, dropout 0), global batch 8 (micro 1) in every row, the same corpus
(made once with the checkout's tools/preprocess_data.py from the token-id recipe of
molecule/launch/tests/test_pretrain.py), lr 2e-3 with 5 warm-up iterations and cosine decay to
2e-4 over N = 50 iterations, log interval 1. At one seed every row reads the same samples in the same order (the GPT
dataset's shuffle is seeded by --seed alone). The pretrain_gpt.py argument list and
ds_config.json come from the megatron_job role's own builder (plugins/module_utils/_job/args.py
``train_arg_groups`` and ``ds_config``, which train.sh and ds_config.json render, stack profile
``cpu``) for a spec with the settings of molecule/launch's CPU job; --seed and the dropout flags
are megatron_job_extra_args. What differs from a rendered job: no --load (nothing to resume),
--save into a per-run scratch directory, and the launcher runs here (``deepspeed --master_port P
--num_gpus W``, as train.sh does on one node).

Rows (world 2 unless named x): dp2-z1 (the reference), dp2-z1-recompute (the role's
--checkpoint-activations --deepspeed-activation-checkpointing), dp2-z1-recompute-megatron
(Megatron's own full recompute, --recompute-granularity full --recompute-method uniform
--recompute-num-layers 1, as extra arguments: DeepSpeed's checkpointing cannot run on CPU), dp2-z2,
dp2-z3, dp2-z0, tp2, pp2, and at world 4 dp2xtp2, dp2xpp2, tp2xpp2. Every row uses ZeRO-1 unless
its name says otherwise (the pipeline engine takes ZeRO-1 at most).

Verdict, per row, on the loss at the last iteration N: with the reference's seed losses
r_1..r_k (range [r_min, r_max]) and the row's seed losses x_1..x_m (mean x, spread
s = max(x) - min(x)), the row **agrees** when r_min - s <= x <= r_max + s, else it **differs**.
The same-seed gap (row minus reference at each shared seed, largest in absolute value) is shown
too: rows that only change how ZeRO partitions the optimizer start from the same weights, so
there it should be at the level of the reference's run-to-run repeat (the reference runs twice
at the first seed).

    python bench/layout_parity.py --mds <checkout> --json bench/results/layout_parity.json
    python bench/layout_parity.py --rows dp2-z1,tp2 --seeds 1234,42 --iters 20
    python bench/layout_parity.py --report-only --json out.json   # re-read the logs already there
    python bench/layout_parity.py --out bench/results/lp_wd0 --rows dp2-z3 --seeds 1234 --no-repeat \
        --port 29810 --set weight_decay=0.0                       # a diagnostic variant in its own folder

The venv (--python) needs torch, deepspeed and what the checkout imports (transformers, regex,
six, nltk, pybind11 for the dataset helpers): --extra-site DIR puts a `pip install --target DIR`
copy of those on PYTHONPATH without touching the venv.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
RESULTS = os.path.join(REPO, "bench", "results", "layout_parity")

# name, world size, TP, PP, ZeRO stage, full activation recompute. The first row is the reference.
ROWS: List[Dict[str, Any]] = [
    {"name": "dp2-z1", "world": 2, "tp": 1, "pp": 1, "zero": 1, "recompute": False},
    {"name": "dp2-z1-recompute", "world": 2, "tp": 1, "pp": 1, "zero": 1, "recompute": True},
    # Megatron's own full recompute (random.py CheckpointFunction) instead of DeepSpeed's: the
    # role's --checkpoint-activations --deepspeed-activation-checkpointing stops on CPU (DeepSpeed's
    # checkpointing.py asks the CPU accelerator for a Stream, which it has not).
    {"name": "dp2-z1-recompute-megatron", "world": 2, "tp": 1, "pp": 1, "zero": 1, "recompute": False,
     "extra": ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]},
    {"name": "dp2-z2", "world": 2, "tp": 1, "pp": 1, "zero": 2, "recompute": False},
    {"name": "dp2-z3", "world": 2, "tp": 1, "pp": 1, "zero": 3, "recompute": False},
    {"name": "dp2-z0", "world": 2, "tp": 1, "pp": 1, "zero": 0, "recompute": False},
    {"name": "tp2", "world": 2, "tp": 2, "pp": 1, "zero": 1, "recompute": False},
    {"name": "pp2", "world": 2, "tp": 1, "pp": 2, "zero": 1, "recompute": False},
    {"name": "dp2xtp2", "world": 4, "tp": 2, "pp": 1, "zero": 1, "recompute": False},
    {"name": "dp2xpp2", "world": 4, "tp": 1, "pp": 2, "zero": 1, "recompute": False},
    {"name": "tp2xpp2", "world": 4, "tp": 2, "pp": 2, "zero": 1, "recompute": False},
]
REFERENCE = "dp2-z1"
SEEDS = [1234, 42, 7]
ITERS = 50
SHOW_AT = (1, 10, 25, 40)

# The model and job settings: molecule/launch's CPU job (fp32, fusions off, NullTokenizer,
# num_workers 0) with 4 layers, a global batch of 8 and a learning rate that moves the loss.
JOB = {
    "stack_profile": "cpu",
    "nodes": 1,
    "num_layers": 4,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "seq_length": 128,
    "max_position_embeddings": 128,
    "micro_batch_size": 1,
    "global_batch_size": 8,
    "lr": 2.0e-3,
    "min_lr": 2.0e-4,
    "lr_warmup_iters": 5,
    "log_interval": 1,
    "eval_interval": 1000,
    "eval_iters": 1,
    "save_interval": 1000,
    "precision": "fp32",
    "masked_softmax_fusion": False,
    "bias_gelu_fusion": False,
    "bias_dropout_fusion": False,
    "tokenizer_type": "NullTokenizer",
    "vocab_size": 1000,
    "num_workers": 0,
    "tensorboard_dir": None,
    "zero_pin_memory": False,
    "zero_overlap_comm": False,
    "load": False,
}
EXTRA_ARGS = ["--attention-dropout", "0", "--hidden-dropout", "0"]

ITER_RE = re.compile(r"iteration\s+(\d+)/\s*(\d+) \|.*?lm loss: ([\d.E+-]+) \|")


# ------------------------------------------------------------------------------- pure parts

def parse_losses(text: str) -> Dict[int, float]:
    """{iteration: lm loss} from a pretrain_gpt.py log (Megatron's per-interval line, printed by
    the last rank); a later line for the same iteration wins."""
    out: Dict[int, float] = {}
    for m in ITER_RE.finditer(text):
        out[int(m.group(1))] = float(m.group(3))
    return out


def spread(values: Sequence[float]) -> float:
    return max(values) - min(values) if values else 0.0


def verdict(reference: Sequence[float], row: Sequence[float]) -> Dict[str, Any]:
    """The criterion of the module docstring: the row's mean loss at N within the reference's
    seed range [r_min, r_max] widened on both sides by the row's own seed spread."""
    if not reference or not row:
        return {"verdict": "missing"}
    mean = sum(row) / len(row)
    widen = spread(row)
    low, high = min(reference) - widen, max(reference) + widen
    return {"verdict": "agrees" if low <= mean <= high else "differs", "mean": mean, "spread": widen,
            "window": [low, high],
            "distance": 0.0 if low <= mean <= high else (low - mean if mean < low else mean - high)}


def same_seed_gap(reference: Mapping[int, float], row: Mapping[int, float]) -> Optional[float]:
    """The largest |row - reference| at the last iteration over the seeds both ran (signed)."""
    gaps = [row[s] - reference[s] for s in row if s in reference]
    return max(gaps, key=abs) if gaps else None


def summarize(losses: Mapping[str, Mapping[int, Mapping[int, float]]], iters: int,
              reference: str = REFERENCE, show_at: Sequence[int] = SHOW_AT,
              repeat: Optional[Mapping[int, float]] = None, repeat_seed: Optional[int] = None) -> Dict[str, Any]:
    """losses[row][seed][iteration] -> per-row statistics and verdicts. ``repeat``: the
    reference's second run ({iteration: loss}) at ``repeat_seed``, for the run-to-run difference."""
    def at(row: str, it: int) -> Dict[int, float]:
        return {seed: runs[it] for seed, runs in losses.get(row, {}).items() if it in runs}

    ref_last = at(reference, iters)
    rows = []
    for name, by_seed in losses.items():
        last = at(name, iters)
        values = list(last.values())
        row: Dict[str, Any] = {"name": name, "seeds": sorted(last), "loss_at": {}, "last": last}
        for it in list(show_at) + [iters]:
            vals = list(at(name, it).values())
            if vals:
                row["loss_at"][it] = {"mean": sum(vals) / len(vals), "min": min(vals), "max": max(vals)}
        row.update(verdict(list(ref_last.values()), values))
        row["same_seed_gap"] = same_seed_gap(ref_last, last)
        rows.append(row)
    out: Dict[str, Any] = {"reference": reference, "iters": iters, "rows": rows,
                           "reference_spread": spread(list(ref_last.values()))}
    if repeat:
        first = losses.get(reference, {}).get(repeat_seed, {})
        diffs = [abs(repeat[it] - first[it]) for it in repeat if it in first]
        out["repeat"] = {"seed": repeat_seed, "max_abs_diff": max(diffs) if diffs else None, "iterations": len(diffs)}
    return out


def table(summary: Mapping[str, Any], show_at: Sequence[int] = SHOW_AT) -> List[str]:
    iters = summary["iters"]
    cols = list(show_at) + [iters]
    head = "%-26s %-6s " % ("layout", "seeds") + " ".join("%-22s" % ("iter %d mean [min,max]" % c) for c in cols[:-1])
    head += " %-26s %-9s %-10s %s" % ("iter %d mean [min,max]" % iters, "spread", "same-seed", "verdict")
    lines = [head]
    for row in summary["rows"]:
        cells = []
        for c in cols:
            s = row["loss_at"].get(c) or row["loss_at"].get(str(c))  # str: read back from JSON
            cells.append("%.4f [%.4f,%.4f]" % (s["mean"], s["min"], s["max"]) if s else "-")
        gap = row.get("same_seed_gap")
        lines.append("%-26s %-6d " % (row["name"], len(row["seeds"])) + " ".join("%-22s" % c for c in cells[:-1])
                     + " %-26s %-9s %-10s %s" % (cells[-1], "%.4f" % row["spread"] if "spread" in row else "-",
                                                 "%+.2e" % gap if gap is not None else "-", row["verdict"]))
    lines.append("reference %s: seed spread at iteration %d %.4f" % (summary["reference"], iters,
                                                                     summary["reference_spread"]))
    if summary.get("repeat"):
        r = summary["repeat"]
        lines.append("reference run twice at seed %s: largest |difference| over %s iterations %s" % (
            r["seed"], r["iterations"], r["max_abs_diff"]))
    return lines


# ------------------------------------------------------------------------------- running

def load_builder():
    """The role's argument builder (through .collections/, which links back to this repo)."""
    sys.path.insert(0, os.path.join(REPO, ".collections"))
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
    return _job_args


def job_spec(row: Mapping[str, Any], seed: int, iters: int, data: str, workdir: str, port: int) -> Dict[str, Any]:
    spec = dict(JOB)
    spec.update({
        "name": "parity-%s" % row["name"],
        "gpus_per_node": row["world"],
        "tensor_parallel": row["tp"],
        "pipeline_parallel": row["pp"],
        "no_pipeline_parallel": row["pp"] == 1,
        "zero_stage": row["zero"],
        "activation_checkpointing": row["recompute"],
        "train_iters": iters,
        "data_path": data,
        "workdir": workdir,
        "checkpoint_dir": os.path.join(workdir, "ckpt"),
        "master_port": port,
        "extra_args": EXTRA_ARGS + list(row.get("extra", [])) + ["--seed", str(seed)],
    })
    return spec


def run_one(args: argparse.Namespace, builder, row: Mapping[str, Any], seed: int, tag: str, port: int) -> str:
    """One run; returns the log path. Skips a run whose log already reached the last iteration."""
    log = os.path.join(args.out, "logs", "%s-s%d%s.log" % (row["name"], seed, tag))
    if os.path.exists(log) and args.iters in parse_losses(open(log, errors="replace").read()):
        return log
    workdir = os.path.join(args.out, "work", "%s-s%d%s" % (row["name"], seed, tag))
    shutil.rmtree(workdir, ignore_errors=True)
    os.makedirs(workdir)
    os.makedirs(os.path.dirname(log), exist_ok=True)
    spec = job_spec(row, seed, args.iters, args.data, workdir, port)
    train = builder.train_args(spec)
    with open(os.path.join(workdir, "ds_config.json"), "w") as handle:
        json.dump(builder.ds_config(spec), handle, indent=1)
    venv_bin = os.path.dirname(args.python)
    cmd = [os.path.join(venv_bin, "deepspeed")] + builder.launch_args(spec) + ["pretrain_gpt.py"] + train
    env = dict(os.environ, DS_ACCELERATOR="cpu", MAX_JOBS="1", CUDA_DEVICE_MAX_CONNECTIONS="1",
               OMP_NUM_THREADS="1", PATH=venv_bin + os.pathsep + os.environ.get("PATH", ""),
               PYTHONPATH=os.pathsep.join([args.mds] + ([args.extra_site] if args.extra_site else [])))
    with open(os.path.join(workdir, "command.json"), "w") as handle:
        json.dump({"cmd": cmd, "env": {k: env[k] for k in ("DS_ACCELERATOR", "MAX_JOBS", "CUDA_DEVICE_MAX_CONNECTIONS",
                                                           "OMP_NUM_THREADS", "PYTHONPATH")}}, handle, indent=1)
    start = time.time()
    with open(log, "w") as handle:
        proc = subprocess.run(cmd, cwd=args.mds, env=env, stdout=handle, stderr=subprocess.STDOUT,
                              timeout=args.timeout, check=False)
    got = parse_losses(open(log, errors="replace").read())
    print("  %-18s seed %-5d%s rc=%d %4.0fs iterations %d, last loss %s" % (
        row["name"], seed, tag, proc.returncode, time.time() - start, len(got),
        got.get(args.iters, "-")), flush=True)
    shutil.rmtree(os.path.join(workdir, "ckpt"), ignore_errors=True)
    remove_shm_buffers(port)
    return log


def shm_buffer_names(names: Sequence[str], port: int) -> List[str]:
    """This run's DeepSpeed CPU all-reduce buffers among the /dev/shm ``names``: DeepSpeed leaves
    one per rank, named ..._<master addr>_<master port>_<rank>, and never removes it (tests/conftest.py)."""
    pattern = re.compile(r"^deepspeed_allreduce_buffer_\d+_127\.0\.0\.1_%d_\d+$" % port)
    return [n for n in names if pattern.match(n)]


def remove_shm_buffers(port: int, shm_dir: str = "/dev/shm") -> None:
    try:
        names = os.listdir(shm_dir)
    except OSError:
        return
    for name in shm_buffer_names(names, port):
        try:
            os.unlink(os.path.join(shm_dir, name))
        except OSError:
            pass


def scratch_checkout(source: str, out: str) -> str:
    """An unchanged copy of the checkout (without .git) under OUT/mds, where the dataset's C++
    helpers get built, so the checkout stays as it was. Reused when already there. The python
    that runs the rows needs torchvision (megatron/training.py imports the vision code): a venv of
    the cpu-pypi profile, or a CUDA torch's."""
    dest = os.path.join(out, "mds")
    if not os.path.exists(os.path.join(dest, "pretrain_gpt.py")):
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", "*.so", "build"))
    return dest


def make_data(args: argparse.Namespace) -> None:
    """The corpus of molecule/launch/tests/test_pretrain.py (token ids in arithmetic runs), made
    once with the checkout's tools/preprocess_data.py."""
    if os.path.exists(args.data + ".bin") and os.path.exists(args.data + ".idx"):
        return
    folder = os.path.dirname(args.data)
    os.makedirs(folder, exist_ok=True)
    corpus = os.path.join(folder, "corpus.jsonl")
    with open(corpus, "w", encoding="utf-8") as handle:
        for doc in range(400):
            tokens = [str((doc * 7 + i * 13) % 997 + 1) for i in range(60 + doc % 140)]
            handle.write(json.dumps({"text": " ".join(tokens)}) + "\n")
    prefix = args.data[:-len("_text_document")]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([args.mds] + ([args.extra_site] if args.extra_site else [])))
    subprocess.run([args.python, "tools/preprocess_data.py", "--input", corpus, "--output-prefix", prefix,
                    "--tokenizer-type", "NullTokenizer", "--vocab-size", "1000", "--dataset-impl", "mmap",
                    "--append-eod", "--workers", "1"], cwd=args.mds, env=env, check=True)


ERROR_RE = re.compile(r"^(?:\[rank\d+\]: )?(\w+(?:Error|Exception)\b.*)$", re.M)


def first_error(text: str) -> Optional[str]:
    """The first exception line of a log ("TypeError: ..."), rank prefix removed."""
    m = ERROR_RE.search(text)
    return m.group(1).strip() if m else None


def collect(args: argparse.Namespace, rows: Sequence[Mapping[str, Any]], seeds: Sequence[int]):
    losses: Dict[str, Dict[int, Dict[int, float]]] = {}
    failures: Dict[str, Dict[int, str]] = {}
    repeat = None
    for row in rows:
        for seed in seeds:
            log = os.path.join(args.out, "logs", "%s-s%d.log" % (row["name"], seed))
            if os.path.exists(log):
                text = open(log, errors="replace").read()
                got = parse_losses(text)
                if args.iters in got:
                    losses.setdefault(row["name"], {})[seed] = got
                else:
                    failures.setdefault(row["name"], {})[seed] = first_error(text) or "stopped after %d iterations" % len(got)
    log = os.path.join(args.out, "logs", "%s-s%d-repeat.log" % (REFERENCE, seeds[0]))
    if os.path.exists(log):
        got = parse_losses(open(log, errors="replace").read())
        repeat = got if args.iters in got else None
    return losses, repeat, failures


def versions(python: str) -> Dict[str, str]:
    proc = subprocess.run([python, "-c", "import sys, torch, deepspeed; print(sys.version.split()[0], torch.__version__, "
                           "deepspeed.__version__)"], capture_output=True, text=True, check=False,
                          env=dict(os.environ, DS_ACCELERATOR="cpu"))
    parts = (proc.stdout.strip().splitlines() or [""])[-1].split()
    return dict(zip(("python", "torch", "deepspeed"), parts))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mds", default=os.environ.get("MEGATRON_DS_SRC"),
                        help="Megatron-DeepSpeed checkout (default $MEGATRON_DS_SRC)")
    parser.add_argument("--python", default=os.path.join(REPO, ".venv", "bin", "python"))
    parser.add_argument("--extra-site", default=None, help="a pip --target folder put on PYTHONPATH")
    parser.add_argument("--out", default=RESULTS, help="logs, scratch and data (default bench/results/layout_parity)")
    parser.add_argument("--data", default=None, help="data prefix (default OUT/data/sim_text_document, made once)")
    parser.add_argument("--rows", default=None, help="comma-separated row names (default: all; the reference always)")
    parser.add_argument("--seeds", default=",".join(str(s) for s in SEEDS))
    parser.add_argument("--iters", type=int, default=ITERS)
    parser.add_argument("--timeout", type=int, default=900, help="seconds per run")
    parser.add_argument("--no-repeat", action="store_true", help="skip the reference's second run at the first seed")
    parser.add_argument("--report-only", action="store_true", help="run nothing, read the logs under --out")
    parser.add_argument("--json", default=None, help="write the results here")
    parser.add_argument("--port", type=int, default=29610, help="first master port (one more per run)")
    parser.add_argument("--set", action="append", metavar="KEY=VALUE",
                        help="override a job setting of JOB (VALUE read as JSON where it parses), e.g. "
                             "weight_decay=0.0, for a diagnostic run in its own --out")
    args = parser.parse_args()
    if not args.mds or not os.path.exists(os.path.join(args.mds, "pretrain_gpt.py")):
        sys.stderr.write("layout_parity: needs a Megatron-DeepSpeed checkout with pretrain_gpt.py: pass --mds DIR "
                         "or set MEGATRON_DS_SRC (found %r)\n" % args.mds)
        return 2
    args.mds = os.path.abspath(args.mds)
    args.out = os.path.abspath(args.out)
    args.data = os.path.abspath(args.data or os.path.join(args.out, "data", "sim_text_document"))
    if args.extra_site:
        args.extra_site = os.path.abspath(args.extra_site)
    seeds = [int(s) for s in args.seeds.split(",")]
    wanted = args.rows.split(",") if args.rows else [r["name"] for r in ROWS]
    unknown = set(wanted) - set(r["name"] for r in ROWS)
    if unknown:
        sys.stderr.write("layout_parity: unknown rows %s; known: %s\n" % (
            ", ".join(sorted(unknown)), ", ".join(r["name"] for r in ROWS)))
        return 2
    rows = [r for r in ROWS if r["name"] == REFERENCE or r["name"] in wanted]
    started = time.time()
    if not args.report_only:
        args.source = args.mds
        args.mds = scratch_checkout(args.mds, args.out)
        make_data(args)
        builder = load_builder()
        port = args.port
        for item in args.set or []:
            key, _sep, value = item.partition("=")
            try:
                JOB[key] = json.loads(value)
            except ValueError:
                JOB[key] = value
        plan = [(row, seed, "") for row in rows for seed in seeds]
        if not args.no_repeat:
            plan.insert(len(seeds), (rows[0], seeds[0], "-repeat"))
        print("%d runs; logs under %s" % (len(plan), os.path.join(args.out, "logs")), flush=True)
        for row, seed, tag in plan:
            port += 1
            run_one(args, builder, row, seed, tag, port)
    losses, repeat, failures = collect(args, rows, seeds)
    if REFERENCE not in losses:
        sys.stderr.write("layout_parity: the reference %s has no complete run; see the logs\n" % REFERENCE)
        return 1
    summary = summarize(losses, args.iters, repeat=repeat, repeat_seed=seeds[0])
    for name, by in failures.items():
        if name not in losses:  # no seed finished: the layout cannot be ranked at all
            summary["rows"].append({"name": name, "seeds": [], "loss_at": {}, "last": {}, "verdict": "failed",
                                    "error": sorted(set(by.values()))})
    commit = subprocess.run(["git", "-C", getattr(args, "source", args.mds), "rev-parse", "--short=8", "HEAD"],
                            capture_output=True, text=True, check=False).stdout.strip()
    summary.update({"versions": dict(versions(args.python), megatron_deepspeed=commit or None), "seeds": seeds, "job": JOB, "extra_args": EXTRA_ARGS,
                    "layouts": {r["name"]: r for r in rows}, "wall_s": None if args.report_only else round(time.time() - started, 1),
                    "failures": {name: {str(s): e for s, e in by.items()} for name, by in failures.items()},
                    "criterion": "agrees when min(ref) - spread(row) <= mean(row) <= max(ref) + spread(row), at "
                                 "the last iteration; spread = max - min over seeds",
                    "losses": {name: {str(s): {str(i): v for i, v in sorted(runs.items())} for s, runs in by.items()}
                               for name, by in losses.items()}})
    print("Megatron-DeepSpeed %s, %s; %d iterations, seeds %s" % (
        getattr(args, "source", args.mds), " ".join("%s %s" % kv for kv in summary["versions"].items()), args.iters, seeds))
    for line in table(summary):
        print(line)
    for name, by in failures.items():
        for seed, error in sorted(by.items()):
            print("%s seed %d did not finish: %s" % (name, seed, error))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(summary, handle, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
