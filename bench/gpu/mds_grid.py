# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Peak GPU memory and speed of Megatron-DeepSpeed's pretrain_gpt.py over a grid of layouts,
with the job validation's memory estimate beside each measured row.

Every run uses the job files (train.sh, ds_config.json) that the megatron_job role renders,
unchanged but for one launcher word noted below. Three steps, so that the GPU host needs no
Ansible:

  render  (controller, needs ansible-playbook and this collection): one job directory per
          configuration under DEST/jobs/NAME, rendered for fixed paths under --root on the GPU
          host, plus DEST/jobs/NAME/config.json (the configuration and its role variables).
  run     (GPU host, after bench/gpu/mds_grid_setup.sh): copies each job directory to its
          rendered path, runs train.sh, stops it once the last iteration is logged, and writes
          OUT/results.json (per-rank memory report, per-interval speed, nvidia-smi peak) and
          OUT/logs.tgz. Single-GPU jobs run side by side, one per GPU: for the job on GPU k > 0
          the launcher's `--num_gpus 1` becomes `--include localhost:k` (DeepSpeed's launcher
          otherwise pins every local job to GPU 0); nothing else in train.sh changes. A row whose
          memory estimate is above the card's memory is skipped with the reason (it would reach
          its out-of-memory error only after the start-up); a failed row reports the exception it
          ended on, the last of a chained traceback, not the first error line.
  report  (anywhere): reads results.json files, computes the memory estimate of
          plugins/module_utils/_job/memory.py for each row, prints a table and writes a JSON data
          file for calibrating the planner.

    python3 bench/gpu/mds_grid.py list
    python3 bench/gpu/mds_grid.py render --dest SRC [--only a,b]
    python3 bench/gpu/mds_grid.py run --jobs SRC/jobs --data SRC/data --out $OUT --budget-s 480
    python3 bench/gpu/mds_grid.py report results.json [more.json ...] --json bench/gpu/h200_grid.json
    python3 bench/gpu/mds_grid.py predict --gpu H100 --only a,b [--results results.json ...]

Peak memory is Megatron's own report (megatron/utils.py report_memory: torch.cuda
max_memory_allocated / max_memory_reserved, printed by every data-parallel rank 0 after the first
logged interval, so after iteration LOG_INTERVAL, optimizer state included). Speed is
Megatron-DeepSpeed's per-interval log (TFLOPs and tokens per GPU per second, the mean over the
interval); the table uses the last interval (iterations LOG_INTERVAL+1 .. TRAIN_ITERS), never the
first, which holds the warm-up.
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from typing import Any, Dict, List, Optional, Tuple

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# The shape of every row: the 1.23B GPT of docs/benchmarks.md (24 layers, hidden 2048, 16 heads,
# seq 2048, the 8192-token BPE vocabulary of bench/make_corpus.py).
MODEL = {
    "num_layers": 24,
    "hidden_size": 2048,
    "num_attention_heads": 16,
    "seq_length": 2048,
    "max_position_embeddings": 2048,
}
GRAD_ACC = 4
TRAIN_ITERS = 8
LOG_INTERVAL = 4
H200_DENSE_BF16_TFLOPS = 989.0
H200_MIB = 143771

# LLaMA-style switches of Megatron-DeepSpeed HEAD (megatron/arguments.py: --swiglu,
# --normalization, --use-rotary-position-embeddings, --no-position-embedding,
# --disable-bias-linear, --untie-embeddings-and-output-weights, --num-key-value-heads,
# --attention-dropout, --hidden-dropout). The FFN size then defaults to int(8h/3 / 64) * 64.
LLAMA_ARGS = ["--swiglu", "--normalization", "rmsnorm", "--use-rotary-position-embeddings",
              "--no-position-embedding", "--disable-bias-linear",
              "--untie-embeddings-and-output-weights", "--attention-dropout", "0", "--hidden-dropout", "0"]
GPT_NO_DROPOUT_ARGS = ["--attention-dropout", "0", "--hidden-dropout", "0"]


def cfg(name, gpus, micro, tp=1, pp=1, zero=1, recompute=False, flash=True, model="gpt", kv_heads=None,
        grad_acc=None, fused=False):
    c = {"name": name, "gpus": gpus, "tp": tp, "pp": pp, "zero": zero, "micro": micro,
         "recompute": recompute, "flash": flash, "model": model, "kv_heads": kv_heads}
    if grad_acc is not None:
        # Rows that hold the global batch of a planner question (micro x DP x accumulation).
        c["grad_acc"] = grad_acc
    if fused:
        # megatron_job_fused_ops: true (the ranks get MEGATRON_DS_FUSED_OPS=1, and the venv's
        # megatron_ds_fused_ops, installed by mds_grid_setup.sh as python_env does, patches
        # Megatron); the GPT rows then take Megatron's bias-GeLU fusion path, served compiled.
        c["fused"] = True
    return c


# The grid, in run order. Consecutive single-GPU rows run side by side on a host with 2 GPUs.
GRID = [
    cfg("g1-m8", 1, 8),
    cfg("g1-m16", 1, 16),
    cfg("g1-m16-rc", 1, 16, recompute=True),
    cfg("g1-m32-rc", 1, 32, recompute=True),
    cfg("g1-m4-nf", 1, 4, flash=False),
    cfg("g1-m8-nf", 1, 8, flash=False),
    cfg("g1-m4-nf-rc", 1, 4, flash=False, recompute=True),
    cfg("g1-m24", 1, 24),
    cfg("g1-m16-b", 1, 16),
    cfg("g1-llama-m16", 1, 16, model="llama"),
    cfg("g1-llamagqa-m16", 1, 16, model="llama", kv_heads=4),
    cfg("g1-m16-z2", 1, 16, zero=2),
    cfg("g1-m8-nf-rc", 1, 8, flash=False, recompute=True),
    cfg("g1-m4", 1, 4),
    cfg("g1-m48-rc", 1, 48, recompute=True),
    cfg("g1-m16-z0", 1, 16, zero=0),
    # The planner's one-GPU check: today's default micro batch (1) against the planner's first
    # choice for the 1.23B GPT and for the llama preset (megatron_job_model_preset, rendered by
    # the role, not extra_args), and rows that check the memory model away from its fit.
    cfg("g1-m1", 1, 1),
    cfg("g1-m32-z0", 1, 32, zero=0),
    cfg("g1-llamap-m16-z0", 1, 16, zero=0, model="llama-preset"),
    cfg("g1-llamap-m8", 1, 8, model="llama-preset"),
    cfg("g1-llamap-m16-rc", 1, 16, recompute=True, model="llama-preset"),
    cfg("g1-m2-nf", 1, 2, flash=False),
    cfg("g2-dp2-z1-m16", 2, 16),
    cfg("g2-dp2-z2-m16", 2, 16, zero=2),
    cfg("g2-dp2-z3-m16", 2, 16, zero=3),
    cfg("g2-tp2-m16", 2, 16, tp=2),
    cfg("g2-pp2-m16", 2, 16, pp=2),
    cfg("g2-dp2-z1-m16-rc", 2, 16, recompute=True),
    cfg("g2-dp2-z2-m32-rc", 2, 32, zero=2, recompute=True),
    cfg("g2-tp2-m16-rc", 2, 16, tp=2, recompute=True),
    cfg("g2-dp2-z1-m4-nf", 2, 4, flash=False),
    cfg("g2-gptnd-m16", 2, 16, model="gpt-nodropout"),
    cfg("g2-llama-m16", 2, 16, model="llama"),
    cfg("g2-llamagqa-m16", 2, 16, model="llama", kv_heads=4),
    # The planner on 2 x H200 at global batch 128: the planner's first choice (ZeRO-2,
    # micro 32, accumulation 2), its neighbours, and today's default micro batch (1).
    cfg("g2-dp2-z2-m32", 2, 32, zero=2, grad_acc=2),
    cfg("g2-dp2-z1-m32", 2, 32, zero=1, grad_acc=2),
    cfg("g2-dp2-z0-m32", 2, 32, zero=0, grad_acc=2),
    cfg("g2-dp2-z1-m1", 2, 1),
    cfg("g2-tp2-m32", 2, 32, tp=2),
    # The fused ops: roles/python_env/files/fused_ops's compiled elementwise kernels against the
    # same rows without them (the planner's one-GPU choices for the GPT and the llama preset).
    cfg("g1-m32-z0-fx", 1, 32, zero=0, fused=True),
    cfg("g1-llamap-m16-z0-fx", 1, 16, zero=0, model="llama-preset", fused=True),
    # ... and under activation recompute, where Megatron re-runs the patched functions.
    cfg("g1-m16-rc-fx", 1, 16, recompute=True, fused=True),
    cfg("g1-llamap-m16-rc-fx", 1, 16, recompute=True, model="llama-preset", fused=True),
]
# The rows of h200_grid.json: `report` lists those no result names as not run.
H200_GRID = list(GRID)
GRID += [
    # The planner's first choice and its runner-up on one H100 (80 GB) at global batch 64, for
    # the GPT and the llama preset, without and with the fused ops (issue 42, part 1): ZeRO-1 and
    # ZeRO-2 at micro 8 x accumulation 8, which the speed model predicts within 1.3-1.6% of each other.
    cfg("h1-gpt-z1-m8", 1, 8, zero=1, grad_acc=8),
    cfg("h1-gpt-z1-m8-fx", 1, 8, zero=1, grad_acc=8, fused=True),
    cfg("h1-llamap-z1-m8", 1, 8, zero=1, model="llama-preset", grad_acc=8),
    cfg("h1-llamap-z1-m8-fx", 1, 8, zero=1, model="llama-preset", grad_acc=8, fused=True),
    cfg("h1-gpt-z2-m8", 1, 8, zero=2, grad_acc=8),
    cfg("h1-gpt-z2-m8-fx", 1, 8, zero=2, grad_acc=8, fused=True),
    cfg("h1-llamap-z2-m8", 1, 8, zero=2, model="llama-preset", grad_acc=8),
    cfg("h1-llamap-z2-m8-fx", 1, 8, zero=2, model="llama-preset", grad_acc=8, fused=True),
]


def data_parallel(c: Dict[str, Any]) -> int:
    return c["gpus"] // (c["tp"] * c["pp"])


def role_vars(c: Dict[str, Any], root: str, port: int) -> Dict[str, Any]:
    """The megatron_job_* variables of one configuration (what a user would put in group_vars)."""
    work = "%s/jobs/%s" % (root, c["name"])
    extra: List[str] = []
    if c["model"] == "llama":
        extra = list(LLAMA_ARGS)
        if c["kv_heads"]:
            extra += ["--num-key-value-heads", str(c["kv_heads"])]
    elif c["model"] == "gpt-nodropout":
        extra = list(GPT_NO_DROPOUT_ARGS)
    v = {
        "megatron_stack_profile": "cu130",
        "megatron_job_user": "root",
        "megatron_job_group": "root",
        "megatron_job_name": c["name"],
        "megatron_job_workdir": work,
        # The unfused attention path needs the `.view` -> `.reshape` patch on torch 2.11 (see
        # mds_grid_setup.sh); that copy lives beside the pristine one.
        "megatron_job_megatron_dir": "%s/%s" % (root, "mds" if c["flash"] else "mds-noflash"),
        "megatron_job_venv": "/opt/torch/.venv",
        "megatron_job_checkpoint_dir": work + "/ckpt",
        "megatron_job_tensorboard_dir": work + "/tb",
        "megatron_job_gpus_per_node": c["gpus"],
        "megatron_job_master_port": port,
        "megatron_job_tensor_parallel": c["tp"],
        "megatron_job_pipeline_parallel": c["pp"],
        "megatron_job_no_pipeline_parallel": c["pp"] == 1,
        "megatron_job_micro_batch_size": c["micro"],
        "megatron_job_global_batch_size": c["micro"] * data_parallel(c) * c.get("grad_acc", GRAD_ACC),
        "megatron_job_train_iters": TRAIN_ITERS,
        "megatron_job_lr_warmup_iters": 2,
        "megatron_job_log_interval": LOG_INTERVAL,
        "megatron_job_eval_interval": 1000,
        "megatron_job_eval_iters": 1,
        "megatron_job_save_interval": 100000,
        "megatron_job_zero_stage": c["zero"],
        "megatron_job_precision": "bf16",
        "megatron_job_use_flash_attn": c["flash"],
        "megatron_job_activation_checkpointing": c["recompute"],
        "megatron_job_data_path": work + "/data/corpus_text_document",
        "megatron_job_vocab_file": work + "/data/vocab.json",
        "megatron_job_merge_file": work + "/data/merges.txt",
        "megatron_job_split": "98,1,1",
        "megatron_job_extra_args": extra,
    }
    if c["model"] == "llama-preset":
        v["megatron_job_model_preset"] = "llama"
    # Rows measured before the fused ops existed ran without them, which cu130 now opts in
    # to: every row says which it is, so that a re-run measures what the row's name says.
    v["megatron_job_fused_ops"] = bool(c.get("fused"))
    v.update({"megatron_job_" + k: val for k, val in MODEL.items()})
    return v


def select(names: Optional[str]) -> List[Dict[str, Any]]:
    if not names:
        return list(GRID)
    by_name = {c["name"]: c for c in GRID}
    wanted = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in wanted if n not in by_name]
    if unknown:
        raise SystemExit("unknown configuration(s) %s; `mds_grid.py list` names them" % ", ".join(unknown))
    return [by_name[n] for n in wanted]


# ------------------------------------------------------------------------------------ render

RENDER_PLAY = """- name: Render
  hosts: megatron_nodes
  gather_facts: false
  roles:
    - role: megatron_ds.cluster.megatron_job
"""
INVENTORY = """all:
  vars:
    ansible_connection: local
    ansible_python_interpreter: %s
  children:
    megatron_head: {hosts: {gpuhost: }}
    megatron_nodes: {hosts: {gpuhost: }}
"""
JOB_FILES = ("train.sh", "ds_config.json", "hostfile", ".deepspeed_env")


def cmd_render(args: argparse.Namespace) -> int:
    scratch = os.path.join(args.dest, "render")
    os.makedirs(scratch, exist_ok=True)
    with open(os.path.join(scratch, "inventory.yml"), "w") as handle:
        handle.write(INVENTORY % sys.executable)
    with open(os.path.join(scratch, "render.yml"), "w") as handle:
        handle.write(RENDER_PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0")
    failed = 0
    for index, c in enumerate(select(args.only)):
        variables = role_vars(c, args.root, 29500 + 10 * GRID.index(c))
        # --set KEY=VALUE (VALUE read as JSON where it parses): a row with other job variables,
        # e.g. a smaller model and a save interval for bench/gpu/supervise_gpu.py.
        for item in args.set or []:
            key, _sep, value = item.partition("=")
            try:
                variables[key] = json.loads(value)
            except ValueError:
                variables[key] = value
        vars_file = os.path.join(scratch, "vars-%s.json" % c["name"])
        with open(vars_file, "w") as handle:
            json.dump(variables, handle, indent=1)
        proc = subprocess.run(
            ["ansible-playbook", "-i", os.path.join(scratch, "inventory.yml"), os.path.join(scratch, "render.yml"),
             "-e", "@" + vars_file],
            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, check=False)
        workdir = variables["megatron_job_workdir"]
        if proc.returncode != 0:
            failed += 1
            print("render %s: rc=%d\n%s" % (c["name"], proc.returncode, proc.stdout[-3000:]))
            continue
        job = os.path.join(args.dest, "jobs", c["name"])
        os.makedirs(job, exist_ok=True)
        for name in JOB_FILES:
            shutil.copy2(os.path.join(workdir, name), os.path.join(job, name))
        with open(os.path.join(job, "config.json"), "w") as handle:
            json.dump({"config": c, "vars": variables, "workdir": workdir,
                       "train_iters": TRAIN_ITERS, "log_interval": LOG_INTERVAL, "grad_acc": c.get("grad_acc", GRAD_ACC),
                       "order": GRID.index(c)}, handle, indent=1)
        print("rendered %-20s -> %s (%d GPU, TP %d PP %d DP %d, ZeRO-%d, micro %d, global %d)" % (
            c["name"], job, c["gpus"], c["tp"], c["pp"], data_parallel(c), c["zero"], c["micro"],
            variables["megatron_job_global_batch_size"]))
        if index == 0 and args.show:
            print(open(os.path.join(job, "train.sh")).read())
    return 1 if failed else 0


# ------------------------------------------------------------------------------------ parse

MEM_RE = re.compile(r"\[Rank (\d+)\] \(after (\d+) iterations\) memory \(MB\) \| allocated: ([\d.]+) \| "
                    r"max allocated: ([\d.]+) \| reserved: ([\d.]+) \| max reserved: ([\d.]+)")
ITER_RE = re.compile(r"iteration\s+(\d+)/\s*(\d+) \|.*?elapsed time per iteration \(ms\): ([\d.]+) \|"
                     r"(?:.*?lm loss: ([\d.E+-]+) \|)?.*?tokens per gpu per second \(tgs\): ([\d.]+) \| "
                     r"TFLOPs: ([\d.]+)")
PARAMS_RE = re.compile(r"number of parameters on \(tensor, pipeline\) model parallel rank \((\d+), (\d+)\): (\d+)")
VOCAB_RE = re.compile(r"padded vocab \(size: (\d+)\) with (\d+) dummy tokens \(new size: (\d+)\)")
ERROR_RE = re.compile(r"Traceback|Error|error:|CUDA out of memory|Killed")
OOM_RE = re.compile(r"CUDA out of memory\. Tried to allocate ([\d.]+) (GiB|MiB)\..*?this process has ([\d.]+) GiB memory "
                    r"in use\. Of the allocated memory ([\d.]+) GiB is allocated by PyTorch")


def parse_oom(lines: List[str]) -> Optional[Dict[str, float]]:
    """torch's OutOfMemoryError message: what the failing allocation asked for, what the process
    held (allocator plus CUDA context) and what PyTorch had allocated when it failed."""
    for line in lines:
        m = OOM_RE.search(line)
        if m:
            wanted = float(m.group(1)) / (1024.0 if m.group(2) == "MiB" else 1.0)
            return {"tried_gib": wanted, "process_gib": float(m.group(3)), "allocated_gib": float(m.group(4))}
    return None


# An exception's own line in a traceback, with torchrun's rank prefix: "[rank0]: torch.OutOfMemoryError: ...".
EXCEPTION_RE = re.compile(r"^(?:\[rank\d+\]:\s*)?((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): (.*)$")


def last_exception(text: str) -> Optional[str]:
    """The exception a log ended on: the last exception line of its traceback, which in a chained one
    ("During handling of the above exception, another exception occurred") is the one raised, not the
    one caught first. Megatron-DeepSpeed 4efb479d's ParallelTransformerLayer.forward catches a
    TypeError from its cpu_offloading keyword and calls the attention again (transformer.py:1334-1348):
    an out-of-memory error in that call follows the caught TypeError in the log."""
    found = None
    for line in text.splitlines():
        m = EXCEPTION_RE.match(line.strip())
        if m:
            found = "%s: %s" % (m.group(1), m.group(2).strip())
    return found[:300] if found else None


def parse_log(text: str) -> Dict[str, Any]:
    """Megatron-DeepSpeed's own figures from one job's train.log."""
    memory = {}
    for m in MEM_RE.finditer(text):
        memory[int(m.group(1))] = {
            "after_iterations": int(m.group(2)),
            "allocated_mib": float(m.group(3)), "max_allocated_mib": float(m.group(4)),
            "reserved_mib": float(m.group(5)), "max_reserved_mib": float(m.group(6)),
        }
    intervals = []
    for m in ITER_RE.finditer(text):
        intervals.append({
            "iteration": int(m.group(1)), "of": int(m.group(2)), "ms_per_iteration": float(m.group(3)),
            "lm_loss": float(m.group(4)) if m.group(4) else None,
            "tokens_per_gpu_per_s": float(m.group(5)), "tflops_per_gpu": float(m.group(6)),
        })
    params = {"%s,%s" % (m.group(1), m.group(2)): int(m.group(3)) for m in PARAMS_RE.finditer(text)}
    vocab = VOCAB_RE.search(text)
    errors = [line.strip()[:300] for line in text.splitlines() if ERROR_RE.search(line)
              and "UserWarning" not in line and "FutureWarning" not in line][:8]
    # The out-of-memory message and the last exception from the whole log: the first error lines kept
    # above can be those of an exception that was caught and led to another.
    return {"memory": {str(k): v for k, v in sorted(memory.items())}, "intervals": intervals,
            "params_per_model_parallel_rank": params,
            "padded_vocab_size": int(vocab.group(3)) if vocab else None, "errors": errors,
            "oom": parse_oom(text.splitlines()), "exception": last_exception(text)}


# ------------------------------------------------------------------------------------ run

def gpu_count() -> int:
    try:
        out = subprocess.run(["nvidia-smi", "-L"], stdout=subprocess.PIPE, universal_newlines=True, check=False).stdout
    except OSError:
        return 0
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def smi_used() -> Dict[int, int]:
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
                         stdout=subprocess.PIPE, universal_newlines=True, check=False).stdout
    used = {}
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit():
            used[int(parts[0])] = int(parts[1])
    return used


def card_memory_mib() -> Optional[int]:
    """The smallest GPU's memory as nvidia-smi reports it (MiB); None without nvidia-smi."""
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.total", "--format=csv,noheader,nounits"],
                             stdout=subprocess.PIPE, universal_newlines=True, check=False).stdout
    except OSError:
        return None
    sizes = [int(line.strip()) for line in out.splitlines() if line.strip().isdigit()]
    return min(sizes) if sizes else None


def over_card(jobs: List[Dict[str, Any]], card_mib: Optional[int], deepspeed_version: str,
              padded_vocab_size: int) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """The jobs to start, and a skipped row for each whose memory estimate (the job validation's,
    with the corpus's vocabulary) is above the card's memory: such a row reached its out-of-memory
    error only after about 60 s of start-up. The estimate was within -7% to +8% of max reserved on
    the H200 grid, so a row is skipped only above the whole card, not above the 90% the planner keeps.
    Without a card size or an estimate every job starts (a row is never lost to this check)."""
    if not card_mib:
        return list(jobs), []
    try:
        jobspec = load_jobspec()
    except Exception as exc:  # noqa: BLE001 - the GPU host's Python may lack what the estimate imports
        print("no row skipped for memory: the estimate is unavailable here (%s: %s)" % (type(exc).__name__, exc), flush=True)
        return list(jobs), []
    kept, skipped = [], []
    for job in jobs:
        est = estimate(jobspec, {"config": job["config"], "vars": job["vars"], "padded_vocab_size": padded_vocab_size},
                       deepspeed_version)
        gib = est["total"] / 1024.0 ** 3
        if est["total"] > card_mib * 1024.0 ** 2:
            reason = "estimated %.1f GiB per GPU, above the card's %.1f GiB (pass --no-skip-over-card to start it anyway)" % (
                gib, card_mib / 1024.0)
            skipped.append({"name": job["config"]["name"], "estimate_gib": round(gib, 1), "status": "skipped: " + reason})
        else:
            kept.append(job)
    return kept, skipped


def batches(jobs: List[Dict[str, Any]], ngpu: int) -> List[List[Dict[str, Any]]]:
    """Consecutive single-GPU jobs share a batch, one per GPU; a multi-GPU job runs alone."""
    out: List[List[Dict[str, Any]]] = []
    for job in jobs:
        if job["config"]["gpus"] == 1 and out and len(out[-1]) < ngpu and all(j["config"]["gpus"] == 1 for j in out[-1]):
            out[-1].append(job)
        else:
            out.append([job])
    return out


def prepare(job: Dict[str, Any], slot: int, data: str) -> str:
    """Copies the rendered job and the data to the rendered paths; returns the train.sh path."""
    work = job["workdir"]
    if os.path.exists(work):
        shutil.rmtree(work)
    shutil.copytree(job["src"], work)
    os.makedirs(os.path.join(work, "data"))
    for name in os.listdir(data):
        shutil.copy2(os.path.join(data, name), os.path.join(work, "data", name))
    train = os.path.join(work, "train.sh")
    if slot:
        text = open(train).read()
        word = "--num_gpus 1"
        if text.count(word) != 1:
            raise SystemExit("%s: expected one '%s' in train.sh to place the job on GPU %d" % (job["config"]["name"], word, slot))
        with open(train, "w") as handle:
            handle.write(text.replace(word, "--include localhost:%d" % slot))
        job["launcher_change"] = "%s -> --include localhost:%d" % (word, slot)
    return train


def cmd_run(args: argparse.Namespace) -> int:
    os.makedirs(args.out, exist_ok=True)
    ngpu = gpu_count()
    jobs = []
    names = [n for n in (args.only or "").split(",") if n] or sorted(
        os.listdir(args.jobs), key=lambda n: json.load(open(os.path.join(args.jobs, n, "config.json")))["order"])
    for name in names:
        meta = json.load(open(os.path.join(args.jobs, name, "config.json")))
        meta["src"] = os.path.join(args.jobs, name)
        jobs.append(meta)
    env = dict(os.environ, NCCL_NVLS_ENABLE="0", TORCH_SYMM_MEM_DISABLE_MULTICAST="1", NVSHMEM_DISABLE_NVLS="1",
               PYTHONUNBUFFERED="1")
    results = []
    if args.skip_over_card:
        jobs, skipped = over_card(jobs, card_memory_mib(), args.deepspeed_version, args.padded_vocab_size)
        for row in skipped:
            print("skip %s: %s" % (row["name"], row["status"][len("skipped: "):]), flush=True)
        results += skipped
    start = time.time()
    results_path = os.path.join(args.out, "results.json")
    for batch in batches(jobs, max(ngpu, 1)):
        if batch[0]["config"]["gpus"] > ngpu:
            for job in batch:
                results.append({"name": job["config"]["name"], "status": "skipped: needs %d GPUs, host has %d" % (job["config"]["gpus"], ngpu)})
            continue
        if time.time() - start > args.budget_s:
            for job in batch:
                results.append({"name": job["config"]["name"], "status": "skipped: past budget %ds" % args.budget_s})
                print("skip %s: past BUDGET_S=%d" % (job["config"]["name"], args.budget_s), flush=True)
            continue
        running = []
        for slot, job in enumerate(batch):
            train = prepare(job, slot, args.data)
            log = open(os.path.join(job["workdir"], "launcher.out"), "w")
            proc = subprocess.Popen(["bash", train], cwd=job["workdir"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)
            gpus = [slot] if job["config"]["gpus"] == 1 else list(range(job["config"]["gpus"]))
            running.append({"job": job, "proc": proc, "t0": time.time(), "gpus": gpus, "smi_peak": {g: 0 for g in gpus},
                            "status": None})
            print("start %s on GPU %s" % (job["config"]["name"], ",".join(map(str, gpus))), flush=True)
        while any(r["status"] is None for r in running):
            time.sleep(1.0)
            used = smi_used()
            for r in running:
                if r["status"] is not None:
                    continue
                for g in r["gpus"]:
                    r["smi_peak"][g] = max(r["smi_peak"][g], used.get(g, 0))
                log_file = os.path.join(r["job"]["workdir"], "logs", "train.log")
                text = open(log_file, errors="replace").read() if os.path.exists(log_file) else ""
                done = any(i["iteration"] >= r["job"]["train_iters"] for i in parse_log(text)["intervals"])
                if done:
                    r["status"] = "ok"
                elif r["proc"].poll() is not None:
                    r["status"] = "failed: exit %s before iteration %d" % (r["proc"].returncode, r["job"]["train_iters"])
                elif time.time() - r["t0"] > args.job_timeout_s:
                    r["status"] = "failed: no iteration %d within %ds" % (r["job"]["train_iters"], args.job_timeout_s)
                if r["status"] is not None:
                    r["seconds"] = round(time.time() - r["t0"], 1)
                    time.sleep(0.5)  # let the other ranks' memory lines reach the log
                    try:
                        os.killpg(r["proc"].pid, signal.SIGKILL)  # no checkpoint save, no end-of-run eval
                    except ProcessLookupError:
                        pass
                    r["proc"].wait()
        for r in running:
            job = r["job"]
            log_file = os.path.join(job["workdir"], "logs", "train.log")
            text = open(log_file, errors="replace").read() if os.path.exists(log_file) else ""
            parsed = parse_log(text)
            row = {"name": job["config"]["name"], "status": r["status"], "seconds": r["seconds"],
                   "config": job["config"], "vars": job["vars"], "gpus_used": r["gpus"],
                   "side_by_side": [x["job"]["config"]["name"] for x in running if x is not r],
                   "launcher_change": job.get("launcher_change"),
                   "smi_peak_mib": {str(g): v for g, v in r["smi_peak"].items()}}
            row.update(parsed)
            results.append(row)
            last = parsed["intervals"][-1] if parsed["intervals"] else {}
            mem = list(parsed["memory"].values())
            print("done %-20s %-40s %5.0fs  max alloc %s MiB  max reserved %s MiB  TFLOP/s %s  tgs %s" % (
                row["name"], r["status"][:40], r["seconds"],
                "/".join("%.0f" % m["max_allocated_mib"] for m in mem) or "-",
                "/".join("%.0f" % m["max_reserved_mib"] for m in mem) or "-",
                last.get("tflops_per_gpu", "-"), last.get("tokens_per_gpu_per_s", "-")), flush=True)
            if r["status"] != "ok" and (parsed["oom"] or parsed["exception"]):
                oom = parsed["oom"]
                print("    raised: %s" % ("out of memory: %.1f GiB allocated, %.1f GiB in the process, asked %.1f GiB more"
                                          % (oom["allocated_gib"], oom["process_gib"], oom["tried_gib"]) if oom
                                          else parsed["exception"]), flush=True)
            for line in parsed["errors"][:3]:
                print("    " + line, flush=True)
        # The next batch starts on emptied GPUs.
        deadline = time.time() + 30
        while time.time() < deadline and any(v > 2048 for v in smi_used().values()):
            time.sleep(1.0)
        with open(results_path, "w") as handle:
            json.dump(results, handle, indent=1)
    with open(results_path, "w") as handle:
        json.dump(results, handle, indent=1)
    with tarfile.open(os.path.join(args.out, "logs.tgz"), "w:gz") as tar:
        for job in jobs:
            for name in ("logs/train.log", "launcher.out", "train.sh", "ds_config.json"):
                path = os.path.join(job["workdir"], name)
                if os.path.exists(path):
                    tar.add(path, arcname="%s/%s" % (job["config"]["name"], name))
    return 0


# ------------------------------------------------------------------------------------ report

def load_jobspec():
    """The collection's own module (through .collections/, which links back to the repo), so
    that the figures are those of the code in this checkout, not of a copy."""
    sys.path.insert(0, os.path.join(REPO, ".collections"))
    from types import SimpleNamespace
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import memory as _job_memory
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
    return SimpleNamespace(normalize=_job_spec.normalize, derive=_job_spec.derive,
                           estimate_memory=_job_memory.estimate_memory)


def estimate(jobspec, row: Dict[str, Any], deepspeed_version: str) -> Dict[str, Any]:
    """The memory estimate the job validation computes for this row's role variables, with the
    vocabulary Megatron actually used (the spec alone cannot know a vocab file's size: it assumes
    GPT-2's 50257 for GPT2BPETokenizer)."""
    c = row["config"]
    variables = dict(row["vars"])
    # The role takes its stack profile from megatron_stack_profile (the cu130 profile's
    # --no-masked-softmax-fusion is part of the memory model).
    if "megatron_stack_profile" in variables:
        variables.setdefault("megatron_job_stack_profile", variables.pop("megatron_stack_profile"))
    if c.get("model") == "llama":
        # The earlier llama rows passed the preset's switches as extra_args; estimate it as the preset.
        variables["megatron_job_model_preset"] = "llama"
    spec = jobspec.normalize(variables)
    derived = dict(jobspec.derive(spec, 1, c["gpus"]))
    spec_vocab = derived["padded_vocab_size"]
    if row.get("padded_vocab_size"):
        derived["padded_vocab_size"] = row["padded_vocab_size"]
    zero = {"stage": spec["zero_stage"],
            "offload_optimizer": spec["zero_offload_optimizer"] != "none",
            "offload_param": spec["zero_offload_param"] != "none",
            "reduce_bucket_size": spec["zero_reduce_bucket_size"],
            "allgather_bucket_size": spec["zero_allgather_bucket_size"]}
    checkpointing = "full" if spec["activation_checkpointing"] else None
    est = jobspec.estimate_memory(spec, derived, zero, deepspeed_version, checkpointing)
    spec_derived = dict(derived, padded_vocab_size=spec_vocab)
    est["total_with_spec_vocab"] = jobspec.estimate_memory(spec, spec_derived, zero, deepspeed_version, checkpointing)["total"]
    est["vocab_used"] = derived["padded_vocab_size"]
    est["vocab_in_spec"] = spec_vocab
    return est


def describe(c: Dict[str, Any]) -> str:
    parts = ["%d GPU" % c["gpus"], "TP%d" % c["tp"], "PP%d" % c["pp"], "DP%d" % data_parallel(c),
             "Z%d" % c["zero"], "mb%d" % c["micro"], "rc" if c["recompute"] else "", "flash" if c["flash"] else "no-flash",
             {"gpt": "", "gpt-nodropout": "gpt dropout 0", "llama": "llama", "llama-preset": "llama preset"}[c["model"]] +
             (" GQA %d kv" % c["kv_heads"] if c.get("kv_heads") else "")]
    return " ".join(p for p in parts if p)


def summarize(row: Dict[str, Any], jobspec, deepspeed_version: str) -> Dict[str, Any]:
    c = row["config"]
    mem = list(row.get("memory", {}).values())
    last = row["intervals"][-1] if row.get("intervals") else None
    status = row["status"]
    oom = row["oom"] if "oom" in row else parse_oom(row.get("errors", []))
    last_iteration = row["intervals"][-1]["iteration"] if row.get("intervals") else 0
    if oom:
        status = "OOM: %.1f GiB allocated, %.1f GiB in the process, asked %.1f GiB more" % (
            oom["allocated_gib"], oom["process_gib"], oom["tried_gib"])
    elif status != "ok" and row.get("memory") and last_iteration:
        status = "stopped after iteration %d of %d (%s): memory valid, no speed figure" % (
            last_iteration, row["vars"]["megatron_job_train_iters"], status.split(": ", 1)[-1])
    elif status != "ok" and row.get("exception"):
        status += ": " + row["exception"]
    elif status != "ok":
        raised = [e for e in row.get("errors", []) if re.search(r"\w+Error: ", e)]
        if raised:
            status += ": " + re.sub(r"^\[rank\d+\]:\s*", "", raised[-1])
    out: Dict[str, Any] = {"name": row["name"], "status": status, "layout": describe(c), "config": c, "oom": oom,
                           "global_batch": row["vars"]["megatron_job_global_batch_size"],
                           "side_by_side": row.get("side_by_side", []), "launcher_change": row.get("launcher_change"),
                           "params_per_model_parallel_rank": row.get("params_per_model_parallel_rank"),
                           "padded_vocab_size": row.get("padded_vocab_size")}
    if mem:
        out["max_allocated_gib"] = max(m["max_allocated_mib"] for m in mem) / 1024.0
        out["max_reserved_gib"] = max(m["max_reserved_mib"] for m in mem) / 1024.0
        out["per_rank_mib"] = row["memory"]
    if row.get("smi_peak_mib"):
        out["smi_peak_gib"] = max(row["smi_peak_mib"].values()) / 1024.0
    if last and last["iteration"] > row["vars"]["megatron_job_log_interval"]:
        # Megatron's TFLOPs count the recomputed forward; the model FLOPs (MFU) do not.
        model_tflops = last["tflops_per_gpu"] * (0.75 if c["recompute"] else 1.0)
        out.update({"iterations": "%d-%d" % (last["iteration"] - row["vars"]["megatron_job_log_interval"] + 1, last["iteration"]),
                    "tflops_per_gpu": last["tflops_per_gpu"], "model_tflops_per_gpu": round(model_tflops, 1),
                    "mfu": round(model_tflops / H200_DENSE_BF16_TFLOPS, 4),
                    "tokens_per_gpu_per_s": last["tokens_per_gpu_per_s"], "ms_per_iteration": last["ms_per_iteration"],
                    "lm_loss": last["lm_loss"]})
    try:
        est = estimate(jobspec, row, deepspeed_version)
    except Exception as exc:  # noqa: BLE001 - a changed estimate API must not lose the measurements
        out["estimate_error"] = "%s: %s" % (type(exc).__name__, exc)
    else:
        keys = ("total", "model_states", "activations", "buffers", "reserved", "formula", "params_per_gpu",
                "total_with_spec_vocab", "vocab_used", "vocab_in_spec")
        out["estimate"] = {k: est[k] for k in keys}
        out["estimate_gib"] = est["total"] / 1024.0 ** 3
        if out.get("max_reserved_gib"):
            out["estimate_error_vs_reserved"] = round(out["estimate_gib"] / out["max_reserved_gib"] - 1.0, 4)
        if out.get("smi_peak_gib"):
            out["estimate_error_vs_smi"] = round(out["estimate_gib"] / out["smi_peak_gib"] - 1.0, 4)
    return out


def fmt(value: Any, spec: str = "%.1f") -> str:
    return "-" if value is None else spec % value


def pct(ratio: Optional[float]) -> str:
    return "-" if ratio is None else "%+.0f%%" % (100 * ratio)


def cmd_report(args: argparse.Namespace) -> int:
    jobspec = load_jobspec()
    rows: Dict[str, Dict[str, Any]] = {}
    order: List[str] = []
    for path in args.results:
        for row in json.load(open(path)):
            if "config" not in row:  # skipped before it ran
                if row["name"] not in rows:
                    rows[row["name"]] = row
                    order.append(row["name"])
                continue
            if row["name"] not in rows:
                order.append(row["name"])
            rows[row["name"]] = row
    grid = {c["name"]: c for c in GRID}
    order += [c["name"] for c in H200_GRID if c["name"] not in rows]
    order.sort(key=lambda name: GRID.index(grid[name]) if name in grid else len(GRID))
    summary = []
    for name in order:
        row = rows.get(name, {"name": name, "status": "not run"})
        if "config" in row:
            summary.append(summarize(row, jobspec, args.deepspeed_version))
        else:
            c = grid.get(name)
            summary.append({"name": name, "status": row["status"], "config": c, "layout": describe(c) if c else ""})
    header = ("| config | layout | status | max alloc GiB | max reserved GiB | nvidia-smi GiB | TFLOP/s | MFU | "
              "tokens/s/GPU | estimate GiB | error vs reserved |")
    print(header)
    print("|" + "|".join(["---"] * (header.count("|") - 1)) + "|")
    for s in summary:
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            s["name"], s.get("layout", ""), s["status"], fmt(s.get("max_allocated_gib")),
            fmt(s.get("max_reserved_gib")), fmt(s.get("smi_peak_gib")), fmt(s.get("tflops_per_gpu")),
            fmt(100 * s["mfu"] if s.get("mfu") is not None else None, "%.1f%%"), fmt(s.get("tokens_per_gpu_per_s"), "%.0f"),
            fmt(s.get("estimate_gib")), pct(s.get("estimate_error_vs_reserved"))))
    if args.json:
        meta = {}
        if args.meta:
            meta = json.load(open(args.meta))
        with open(args.json, "w") as handle:
            json.dump({"meta": meta, "model": MODEL, "grad_acc": GRAD_ACC, "train_iters": TRAIN_ITERS,
                       "log_interval": LOG_INTERVAL, "peak_tflops": H200_DENSE_BF16_TFLOPS,
                       "gpu_memory_mib": H200_MIB, "rows": summary}, handle, indent=1, sort_keys=True)
            handle.write("\n")
        print("wrote %s" % args.json)
    return 0


# ----------------------------------------------------------------------------------- predict

def load_planner():
    sys.path.insert(0, os.path.join(REPO, ".collections"))
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import plan as _job_plan
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
    return _job_plan, _job_spec


def planner_spec(c: Dict[str, Any], normalize) -> Dict[str, Any]:
    """The job spec of a configuration as plan.yml would read it from the role variables (the
    stack profile as megatron_job_stack_profile; the earlier llama rows, run with the preset's
    switches, as the preset)."""
    variables = role_vars(c, "/tmp/mdsgrid", 29500)
    variables["megatron_job_stack_profile"] = variables.pop("megatron_stack_profile")
    if c["model"] in ("llama", "llama-preset"):
        variables["megatron_job_extra_args"] = []
        variables["megatron_job_model_preset"] = "llama"
    return normalize(variables)


def prediction(c: Dict[str, Any], gpu: str, deepspeed_version: str, padded_vocab_size: int) -> Dict[str, Any]:
    """The planner's ranking of the configuration's job on its GPUs (what plan.yml prints for
    it): the configuration's rank among the layouts it offers and that layout's predicted step
    time, tokens/s per GPU, MFU and memory; rank None and the reason when it is not ranked."""
    _job_plan, _job_spec = load_planner()
    spec = planner_spec(c, _job_spec.normalize)
    result = _job_plan.plan(spec, 1, c["gpus"], gpu=gpu, deepspeed_version=deepspeed_version,
                            padded_vocab_size=padded_vocab_size)
    want = (c["tp"], c["pp"], c["zero"], c["micro"], c["recompute"])
    out: Dict[str, Any] = {"name": c["name"], "gpu": gpu, "rank": None, "first": None}
    for rank, row in enumerate(result["layouts"], 1):
        if rank == 1:
            out["first"] = _job_plan.describe(row)
        if (row["tp"], row["pp"], row["zero"], row["micro"], row["recompute"]) == want:
            out.update(rank=rank, layout=_job_plan.describe(row), step_s=row["step_s"],
                       tokens_per_gpu_per_s=row["tokens_per_s"] / c["gpus"], mfu=row["mfu"],
                       memory_gib=row["memory_gib"], fits=row["fits"])
            break
    else:
        out["why"] = "not among the %d layouts the planner ranks (rejected: %s)" % (
            len(result["layouts"]), ", ".join("%s %d" % kv for kv in sorted(result["rejected"].items())) or "none")
    return out


def cmd_predict(args: argparse.Namespace) -> int:
    measured: Dict[str, List[Dict[str, Any]]] = {}
    for path in args.results or []:
        for row in json.load(open(path)):
            if row.get("intervals"):
                last = row["intervals"][-1]
                mem = list(row.get("memory", {}).values())
                measured.setdefault(row["name"], []).append({
                    "tokens": last["tokens_per_gpu_per_s"], "mfu": last["tflops_per_gpu"] / H200_DENSE_BF16_TFLOPS,
                    "gib": max(m["max_reserved_mib"] for m in mem) / 1024.0 if mem else None})
    print("| row | planner rank | layout | predicted step s | predicted tokens/s | predicted MFU | predicted GiB |"
          " measured tokens/s | measured MFU | measured GiB | prediction error |")
    print("|" + "---|" * 11)
    for c in select(args.only):
        p = prediction(c, args.gpu, args.deepspeed_version, args.padded_vocab_size)
        if p["rank"] is None:
            print("| %s | - | %s |" % (c["name"], p["why"]))
            continue
        runs = measured.get(c["name"]) or [{}]
        for run in runs:
            error = p["tokens_per_gpu_per_s"] / run["tokens"] - 1.0 if run.get("tokens") else None
            print("| %s | %s%s | %s | %.3f | %s | %.1f%% | %.1f | %s | %s | %s | %s |" % (
                c["name"], p["rank"], "" if p["fits"] else " (above 90%)", p["layout"], p["step_s"],
                "{:,.0f}".format(p["tokens_per_gpu_per_s"]), 100 * p["mfu"], p["memory_gib"],
                "{:,.0f}".format(run["tokens"]) if run.get("tokens") else "-",
                "%.1f%%" % (100 * run["mfu"]) if run.get("mfu") else "-", fmt(run.get("gib")),
                "%+.1f%%" % (100 * error) if error is not None else "-"))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    for c in GRID:
        print("%-20s %s" % (c["name"], describe(c)))
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("list")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("render")
    p.add_argument("--dest", required=True, help="writes DEST/jobs/NAME/")
    p.add_argument("--root", default="/tmp/mdsgrid", help="where the jobs, Megatron-DeepSpeed and data live on the GPU host")
    p.add_argument("--only", help="comma-separated configuration names")
    p.add_argument("--show", action="store_true", help="print the first train.sh")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", help="override a job variable (VALUE as JSON)")
    p.set_defaults(func=cmd_render)
    p = sub.add_parser("run")
    p.add_argument("--jobs", required=True)
    p.add_argument("--data", required=True, help="corpus_text_document.{bin,idx}, vocab.json, merges.txt")
    p.add_argument("--out", required=True)
    p.add_argument("--only", help="comma-separated configuration names, in run order")
    p.add_argument("--budget-s", type=int, default=10 ** 9, help="start no batch after this many seconds")
    p.add_argument("--job-timeout-s", type=int, default=240)
    p.add_argument("--no-skip-over-card", dest="skip_over_card", action="store_false",
                   help="start rows whose memory estimate is above the card's memory too")
    p.add_argument("--deepspeed-version", default="0.19.6", help="for the memory estimate")
    p.add_argument("--padded-vocab-size", type=int, default=8192, help="for the memory estimate (bench/make_corpus.py's)")
    p.set_defaults(func=cmd_run)
    p = sub.add_parser("report")
    p.add_argument("results", nargs="+", help="results.json files; a later file's row replaces an earlier one")
    p.add_argument("--json", help="write the data file here")
    p.add_argument("--meta", help="a JSON file of host facts to embed")
    p.add_argument("--deepspeed-version", default="0.19.6")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("predict", help="the planner's rank and prediction for each row, beside what results.json measured")
    p.add_argument("--only", help="comma-separated configuration names")
    p.add_argument("--gpu", default="H200", help="the planner's GPU (H200, H100, A100-80GB, A100-40GB)")
    p.add_argument("--results", nargs="*", help="results.json files whose rows are printed beside the prediction")
    p.add_argument("--deepspeed-version", default="0.19.6")
    p.add_argument("--padded-vocab-size", type=int, default=8192, help="bench/make_corpus.py's vocabulary, padded")
    p.set_defaults(func=cmd_predict)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
