#!/usr/bin/env python3
"""The demo on the simulated cluster (`make demo`), and the Megatron-DeepSpeed source it may use.

    scripts/demo.py source   # make sim-up: pack MEGATRON_DS_SRC, or take MEGATRON_DS_ARCHIVE, into .cache/
    scripts/demo.py run [--inventory inventories/sim] [--logs logs/demo] [--train-iterations 3]
                        [--scheduler none|slurm]

`run` plays, one ansible-playbook each, every output also written to logs/demo/<time>/:

  1. site.yml: inventory check, validation, provision, the preflight gate, the job files;
  2. playbooks/burnin.yml: the collection's small GPT on every rank, report as JSON;
  3. only with a Megatron-DeepSpeed source (MEGATRON_DS_SRC or MEGATRON_DS_ARCHIVE):
     playbooks/prepare_data.yml on a generated corpus (token ids, for NullTokenizer), then
     playbooks/train.yml with megatron_launch_wait=<iterations> (the real pretrain_gpt.py on
     every node, writing TensorBoard events), then playbooks/stop.yml (every rank saves);

With --scheduler slurm (make demo DEMO_SCHEDULER=slurm) the same playbooks run with
megatron_scheduler=slurm: Slurm is installed on the nodes and the jobs are submitted to it.

Then a short summary: the nodes, the preflight verdict, tokens/s per node of the burn-in, where
the logs and TensorBoard are, and, without a source, that the checkout was skipped and how to
add it. The burn-in and the gate do not need Megatron-DeepSpeed, so a machine with no route to
GitHub runs the demo whole.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence

REPO = Path(__file__).resolve().parents[1]
CACHE = REPO / ".cache"
ARCHIVE_NAME = "megatron-ds-src.tar.gz"  # inventories/sim reads this name (python_env_megatron_archive)
# The sim job's dataset (inventories/sim: megatron_job_data_path, NullTokenizer with vocab 1000).
CORPUS_DOCS = 400
CORPUS_VOCAB = 1000
# The line the preflight action prints when it is done (plugins/action/preflight.py).
PREFLIGHT_VERDICT = re.compile(r"preflight (?:passed|failed)\b[^\n\"]*", re.I)
RECAP = re.compile(r"^(\S+)\s*:\s*ok=\d+\s+changed=\d+\s+unreachable=(\d+)\s+failed=(\d+)", re.M)
HOW_TO_ADD = ("to add it, run the demo again with MEGATRON_DS_SRC=/path/to/Megatron-DeepSpeed (a checkout) "
              "or MEGATRON_DS_ARCHIVE=/path/to/Megatron-DeepSpeed.tar.gz (an archive of the repository, "
              "one top directory)")


def say(msg: str) -> None:
    print(f"demo: {msg}", flush=True)


# ------------------------------------------------------------------------------------------------
# The Megatron-DeepSpeed source
# ------------------------------------------------------------------------------------------------
def megatron_source(env: Mapping[str, str]) -> Optional[str]:
    """'src' (MEGATRON_DS_SRC, a checkout), 'archive' (MEGATRON_DS_ARCHIVE) or None: the same
    test as inventories/sim's python_env_megatron_source, which installs it when either is set."""
    if env.get("MEGATRON_DS_SRC"):
        return "src"
    if env.get("MEGATRON_DS_ARCHIVE"):
        return "archive"
    return None


# The stack profile of the simulated nodes. The burn-in runs on the cpu profile (torch's CPU
# build, 0.7 GB a venv). The real pretrain_gpt.py imports torchvision (megatron/training.py ->
# megatron/data/vit_dataset.py), which has no build that loads beside that torch here, so with a
# Megatron-DeepSpeed source the nodes get cpu-pypi: PyPI's torch and torchvision, 5.5 GB a venv
# (plugins/module_utils/_stack/profiles.py says why; docs/stack-profiles.md).
BURNIN_PROFILE = "cpu"
TRAINER_PROFILE = "cpu-pypi"


def demo_profile(env: Mapping[str, str]) -> str:
    """The stack profile the demo's nodes get: cpu-pypi when the real trainer runs, else cpu."""
    return TRAINER_PROFILE if megatron_source(env) else BURNIN_PROFILE


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _skip_in_checkout(info: tarfile.TarInfo) -> Optional[tarfile.TarInfo]:
    """What the nodes do not need from a checkout: git history, byte code, built extensions."""
    parts = info.name.split("/")
    if ".git" in parts or "__pycache__" in parts or "build" in parts[1:2] or info.name.endswith(".so"):
        return None
    return info


def prepare_source(env: Mapping[str, str], cache: Path = CACHE) -> str:
    """Put the Megatron-DeepSpeed archive and its sha256 where inventories/sim looks, or remove a
    stale one. Returns one line that says what was done. Bad input raises SystemExit naming the
    variable, the value and the fix."""
    archive, digest_file = cache / ARCHIVE_NAME, cache / (ARCHIVE_NAME + ".sha256")
    kind = megatron_source(env)
    if kind is None:
        for stale in (archive, digest_file):
            stale.unlink(missing_ok=True)
        return "Megatron-DeepSpeed: no source given (MEGATRON_DS_SRC, MEGATRON_DS_ARCHIVE): the checkout is skipped"
    cache.mkdir(parents=True, exist_ok=True)
    if kind == "src":
        src = Path(env["MEGATRON_DS_SRC"]).expanduser().resolve()
        if not (src / "pretrain_gpt.py").is_file():
            raise SystemExit(f"demo: MEGATRON_DS_SRC is {env['MEGATRON_DS_SRC']!r}, which has no pretrain_gpt.py; "
                             "expected a Megatron-DeepSpeed checkout. Point it at one, or unset it.")
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(src, arcname=src.name, filter=_skip_in_checkout)
        origin = f"packed from {src}"
    else:
        given = Path(env["MEGATRON_DS_ARCHIVE"]).expanduser()
        if not tarfile.is_tarfile(given):
            raise SystemExit(f"demo: MEGATRON_DS_ARCHIVE is {env['MEGATRON_DS_ARCHIVE']!r}, which is not a readable "
                             "tar archive; expected a .tar.gz of Megatron-DeepSpeed with one top directory "
                             "(GitHub's source archive). Fix the path, or use MEGATRON_DS_SRC with a checkout.")
        with tarfile.open(given) as tar:
            tops = {m.name.split("/")[0] for m in tar.getmembers() if m.name.strip("/")}
            has_pretrain = any(m.name.count("/") == 1 and m.name.endswith("/pretrain_gpt.py") for m in tar.getmembers())
        if len(tops) != 1 or not has_pretrain:
            raise SystemExit(f"demo: MEGATRON_DS_ARCHIVE {given} holds {sorted(tops)[:5]} at its top, "
                             f"{'with' if has_pretrain else 'without'} <top>/pretrain_gpt.py; expected one top "
                             "directory holding Megatron-DeepSpeed (python_env unpacks it with one level stripped).")
        shutil.copyfile(given, archive)
        origin = f"copied from {given}"
    digest_file.write_text(_sha256(archive) + "\n")
    return f"Megatron-DeepSpeed: {archive.relative_to(cache.parent) if cache.parent in archive.parents else archive} " \
           f"({origin}); the nodes install it from there"


# ------------------------------------------------------------------------------------------------
# The plan
# ------------------------------------------------------------------------------------------------
@dataclass
class Step:
    name: str
    playbook: str
    extra_vars: Dict[str, Any] = field(default_factory=dict)


SCHEDULERS = ("none", "slurm")


def plan(env: Mapping[str, str], logs: Path, train_iterations: int = 3, scheduler: str = "none") -> List[Step]:
    """The playbooks of the demo, in order, with their extra vars. With ``scheduler`` slurm every
    playbook gets megatron_scheduler=slurm: provision.yml then installs Slurm on the nodes, and the
    launch backend follows it (megatron_launch_backend's default), so the burn-in and the training
    run are submitted as Slurm jobs."""
    if scheduler not in SCHEDULERS:
        raise ValueError("scheduler %r; expected one of %s" % (scheduler, ", ".join(SCHEDULERS)))
    common: Dict[str, Any] = {"megatron_scheduler": "slurm"} if scheduler == "slurm" else {}
    if demo_profile(env) != BURNIN_PROFILE:  # inventories/sim's own is the burn-in's
        common["megatron_stack_profile"] = demo_profile(env)
    steps = [
        Step("site", "site.yml", dict(common)),
        Step("burnin", "playbooks/burnin.yml", dict(common, megatron_launch_burnin_dest=str(logs / "burnin.json"))),
    ]
    if megatron_source(env):
        steps += [
            Step("prepare_data", "playbooks/prepare_data.yml",
                 dict(common, megatron_data_input=str(logs / "corpus.jsonl"))),
            Step("train", "playbooks/train.yml", dict(common, megatron_launch_wait=train_iterations,
                                                      megatron_job_tensorboard_dir=TENSORBOARD_DIR)),
            Step("stop", "playbooks/stop.yml", dict(common)),
        ]
    return steps


# Where pretrain_gpt.py writes its events in the demo: the job directory's own, because the
# containers share no storage; Megatron writes them from the last rank (megatron/global_vars.py,
# _set_tensorboard_writer), which is on the last node.
TENSORBOARD_DIR = "/opt/megatron/jobs/sim-gpt/tensorboard"


def write_corpus(path: Path, docs: int = CORPUS_DOCS, vocab: int = CORPUS_VOCAB) -> None:
    """JSON lines of space-separated token ids below `vocab`: what NullTokenizer reads."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as handle:
        for doc in range(docs):
            tokens = [str((doc * 7 + i * 13) % (vocab - 3) + 1) for i in range(60 + doc % 140)]
            handle.write(json.dumps({"text": " ".join(tokens)}) + "\n")


# ------------------------------------------------------------------------------------------------
# Running and reading the results
# ------------------------------------------------------------------------------------------------
@dataclass
class Result:
    step: Step
    returncode: int
    seconds: float
    log: Path
    output: str


def ansible_playbook() -> str:
    local = Path(sys.executable).parent / "ansible-playbook"
    return str(local) if local.exists() else "ansible-playbook"


def run_step(step: Step, inventory: str, logs: Path, index: int) -> Result:
    """One ansible-playbook, its output shown as it comes and kept in logs/<n>-<name>.log."""
    argv = [ansible_playbook(), "-i", inventory, step.playbook]
    if step.extra_vars:
        argv += ["-e", json.dumps(step.extra_vars)]
    log = logs / f"{index}-{step.name}.log"
    env = dict(os.environ, ANSIBLE_CONFIG=os.environ.get("ANSIBLE_CONFIG", str(REPO / "ansible.cfg")))
    say(f"step {index}: {' '.join(argv)}")
    started = time.monotonic()
    lines: List[str] = []
    with log.open("w", encoding="utf-8") as handle, subprocess.Popen(
            argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            sys.stdout.write(line)
            handle.write(line)
            lines.append(line)
    return Result(step, proc.returncode, time.monotonic() - started, log, "".join(lines))


def recap_hosts(output: str) -> List[str]:
    """Host names of the PLAY RECAP, in its order, without the controller (validate.yml's play)."""
    seen: List[str] = []
    for match in RECAP.finditer(output):
        if match.group(1) not in seen and match.group(1) != "localhost":
            seen.append(match.group(1))
    return seen


def preflight_verdict(output: str) -> Optional[str]:
    """The preflight action's last verdict line in a playbook's output, or None.

    The action wraps its message to the terminal, so the verdict can go on over the next lines
    ("...; report:" then the path): those are indented deeper than the verdict's own line, and
    they belong to it."""
    found = None
    lines = output.splitlines()
    for index, line in enumerate(lines):
        match = PREFLIGHT_VERDICT.search(line)
        if not match:
            continue
        text, indent = match.group(0), len(line) - len(line.lstrip())
        if match.end() == len(line.rstrip()):  # it runs to the end of its line: it may go on
            for following in lines[index + 1:]:
                words = following.strip()
                if not words or len(following) - len(following.lstrip()) <= indent:
                    break
                text = text.rstrip() + " " + re.split(r"[\"\n]", words)[0]
        found = text
    return found.strip().rstrip(".,") if found else None


def _duration(seconds: float) -> str:
    return "%d min %02d s" % divmod(int(round(seconds)), 60)


def summary(results: Sequence[Result], burnin: Optional[Mapping[str, Any]], source: Optional[str],
            logs: Path, failed: Optional[Result] = None) -> List[str]:
    """The demo's last words: short, and each line names where to look next."""
    by_name = {r.step.name: r for r in results}
    site = by_name.get("site")
    nodes = (burnin or {}).get("inventory_nodes") or (recap_hosts(site.output) if site else [])
    head = (burnin or {}).get("head") or (nodes[0] if nodes else None)
    lines = ["", "=" * 30 + " demo summary " + "=" * 30]
    slurm = bool(results) and results[0].step.extra_vars.get("megatron_scheduler") == "slurm"
    lines.append("nodes:        %d (%s)" % (len(nodes), ", ".join(
        n + (" head" if n == head else "") for n in nodes)) if nodes else "nodes:        unknown (site.yml did not finish)")
    if site:
        verdict = preflight_verdict(site.output)
        if site.returncode == 0:
            lines.append("preflight:    " + (verdict or "passed (site.yml ran its gate to the end)"))
        else:
            lines.append("preflight:    " + (verdict or "not reached: site.yml stopped before or at the gate"))
    lines.append("launch:       " + ("Slurm: sbatch, srun starts the ranks (make demo DEMO_SCHEDULER=slurm)" if slurm
                                     else "pdsh from the head node (make demo DEMO_SCHEDULER=slurm submits to Slurm)"))
    if burnin:
        lines.append("burn-in:      %s ranks, loss %s -> %s%s" % (
            burnin.get("world"), _num(burnin.get("initial_loss")), _num(burnin.get("final_loss")),
            "" if burnin.get("passed", True) else ", FAILED: " + " | ".join(burnin.get("problems", []))))
        for node, row in sorted((burnin.get("nodes") or {}).items()):
            lines.append("  %-20s %10s tokens/s  (%d ranks)" % (node, _num(row.get("tokens_per_s"), ".1f"),
                                                                row.get("ranks", 0)))
    elif "burnin" in by_name:
        lines.append("burn-in:      no report (the burn-in stopped before it)")
    if source:
        train = by_name.get("train")
        if train is None:
            lines.append("training:     not reached")
        elif train.returncode == 0:
            lines.append("training:     Megatron-DeepSpeed pretrain_gpt.py ran its first iterations on every node, "
                         "then stopped with a save (stop.yml)")
        lines.append("TensorBoard:  %s on %s (the last rank writes it); serve it with playbooks/monitoring.yml"
                     % (TENSORBOARD_DIR, nodes[-1] if nodes else "the last node"))
    else:
        lines.append("Megatron-DeepSpeed: skipped -- the nodes have no checkout, so pretrain_gpt.py did not run; "
                     + HOW_TO_ADD + ".")
        lines.append("TensorBoard:  none written (the burn-in writes no events; the training run does)")
    node_log = (burnin or {}).get("log_file")
    lines.append("logs:         %s/ (one per playbook)%s" % (
        _shown(logs), "; burn-in log %s on %s" % (node_log, head) if node_log else ""))
    lines.append("time:         " + ", ".join("%s %s" % (r.step.name, _duration(r.seconds)) for r in results)
                 + ("; total %s" % _duration(sum(r.seconds for r in results)) if results else ""))
    if failed:
        lines.append("FAILED at %s (exit %d): read %s" % (failed.step.playbook, failed.returncode, _shown(failed.log)))
    return lines


def _num(value: Any, spec: str = ".3f") -> str:
    return format(value, spec) if isinstance(value, (int, float)) else "-"


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


def run(args: argparse.Namespace) -> int:
    logs = Path(args.logs).resolve() / time.strftime("%Y%m%d-%H%M%S")
    logs.mkdir(parents=True, exist_ok=True)
    source = megatron_source(os.environ)
    steps = plan(os.environ, logs, args.train_iterations, args.scheduler)
    results: List[Result] = []
    failed = None
    for index, step in enumerate(steps, 1):
        if step.name == "prepare_data":
            write_corpus(Path(step.extra_vars["megatron_data_input"]))
        result = run_step(step, args.inventory, logs, index)
        results.append(result)
        if result.returncode != 0:
            failed = result
            break
    report = logs / "burnin.json"
    burnin = json.loads(report.read_text()) if report.is_file() else None
    text = "\n".join(summary(results, burnin, source, logs, failed))
    print(text, flush=True)
    (logs / "summary.txt").write_text(text.lstrip("\n") + "\n")
    return failed.returncode if failed else 0


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("source", help="pack MEGATRON_DS_SRC or copy MEGATRON_DS_ARCHIVE into .cache/ (or remove a stale one)")
    sub.add_parser("profile", help="print the nodes' stack profile (cpu-pypi with a Megatron-DeepSpeed source, else cpu)")
    p_run = sub.add_parser("run", help="site.yml, the burn-in, the training run when a source is given, the summary")
    p_run.add_argument("--inventory", default="inventories/sim")
    p_run.add_argument("--logs", default=str(REPO / "logs" / "demo"), help="a run's logs go to <logs>/<time>/")
    p_run.add_argument("--train-iterations", type=int, default=3,
                       help="iterations of pretrain_gpt.py to wait for (with a Megatron-DeepSpeed source)")
    p_run.add_argument("--scheduler", choices=SCHEDULERS, default="none",
                       help="slurm: install Slurm on the nodes and run the jobs through it (default none: pdsh)")
    args = parser.parse_args(argv)
    if args.command == "source":
        done = prepare_source(os.environ)
        if megatron_source(os.environ):  # without one, the summary says it once, at the end
            say(done)
        return 0
    if args.command == "profile":
        print(demo_profile(os.environ))
        return 0
    if args.train_iterations < 1:
        parser.error(f"--train-iterations is {args.train_iterations}; expected 1 or more")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
