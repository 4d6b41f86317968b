"""The slurm launch backend (megatron_launch_backend: slurm) on the same three nodes, with the real
slurmctld/slurmd that converge installed: the burn-in as one Slurm job of 3 nodes x 2 ranks started
by srun, `scancel --signal=TERM` through stop.yml (every rank saves), the resubmitted job resuming
from the saved tag, and a node drained by the health check refused before the submit.

Runs after test_launch.py (file order), on the nodes that the pdsh tests left idle.
"""
from __future__ import annotations

import json
import os
import re
import time

import pytest

from ansible_collections.megatron_ds.cluster.tests.support import polling as _polling
from launch_helpers import (BURNIN_DIR, LOG_DIR, NODES, PROJECT_DIR, RANKS_PER_NODE, REAL_MDS, TRAIN_CKPT, WORKDIR,
                            assert_saved_on_sigterm, burnin_results, latest, node, playbook, ranks, status,
                            stop_saving)

SLURM = {"megatron_launch_backend": "slurm"}
STOP_CKPT = BURNIN_DIR + "/checkpoints-slurm"
HEALTH = "/usr/local/sbin/megatron-slurm-health"
HEALTH_CONFIG = "/etc/megatron/slurm-health.json"


def wait_for(predicate, what: str, deadline: float = 120.0, step: float = 1.0):
    """tests/support/polling.wait_for with the longer deadline a launch through Slurm needs."""
    return _polling.wait_for(predicate, what, deadline, step)


def node_states() -> dict:
    out = node("node1").check_output("sinfo --noheader --Node --format='%N %T'")
    return dict(line.split() for line in out.splitlines() if line.strip())


def all_idle():
    states = node_states()
    return states if states == {name: "idle" for name in NODES} else False


def record() -> dict:
    return json.loads(node("node1").file(WORKDIR + "/launch.json").content_string)


def job_log(rec: dict) -> list:
    target = node(rec["log_host"]).file(rec["log_file"])
    return target.content_string.splitlines() if target.exists else []


def test_burnin_as_a_slurm_job_stops_with_scancel_and_the_resubmitted_job_resumes():
    wait_for(all_idle, "3 idle Slurm nodes")
    rc, output = playbook("burnin.yml", dict(SLURM, megatron_launch_burnin_wait=False,
                                             megatron_launch_burnin_steps=100000,
                                             megatron_launch_burnin_checkpoint_dir=STOP_CKPT))
    assert rc == 0, output
    assert "partition train can run 3 node(s) x 2 rank(s)" in output
    first = record()
    job_id = first["slurm_job_id"]
    assert first["backend"] == "slurm" and job_id.isdigit(), first
    assert first["log_file"] == "%s/burnin-%s.log" % (LOG_DIR, job_id)
    # The sbatch script lies beside burnin.sh, its layout from the job spec.
    script = node("node1").file(BURNIN_DIR + "/burnin.sbatch").content_string
    for option in ("--nodes=3", "--ntasks-per-node=2", "--nodelist=node1,node2,node3", "--requeue",
                   "--signal=TERM@300", "--output=%s/burnin-%%j.log" % LOG_DIR):
        assert "#SBATCH %s\n" % option in script, option
    assert "--gpus-per-node" not in script  # CPU ranks: no Gres asked

    report = {}
    end = time.monotonic() + 600
    while time.monotonic() < end:
        report = status()
        if report["state"] == "running" and (report["iteration"] or 0) >= 3:
            break
        assert report["state"] in ("queued", "starting", "running"), report
        time.sleep(3)
    assert report["state"] == "running", report
    assert report["backend"] == "slurm"
    assert report["slurm"]["state"] == "RUNNING" and report["slurm"]["nodes"] == "node[1-3]", report["slurm"]
    assert report["ranks_alive"] == len(NODES) * RANKS_PER_NODE
    for name in NODES:
        # srun placed two tasks per node; the wrapper passed --local_rank like DeepSpeed's launch.py.
        assert report["nodes"][name]["local_ranks"] == list(range(RANKS_PER_NODE)), report["nodes"]
    assert re.search(r"^%s RUNNING$" % job_id, node("node1").check_output("squeue --noheader --format='%%i %%T'"), re.M)

    step, tag, output = stop_saving(STOP_CKPT)
    assert_saved_on_sigterm(job_log(first), STOP_CKPT, tag)
    stopped = status()
    assert stopped["state"] == "stopped" and stopped["slurm"]["state"] == "COMPLETED", stopped

    wait_for(all_idle, "3 idle Slurm nodes after the stop")
    rc, output = playbook("burnin.yml", dict(SLURM, megatron_launch_burnin_resume=True,
                                             megatron_launch_burnin_steps=step + 5,
                                             megatron_launch_burnin_checkpoint_dir=STOP_CKPT))
    assert rc == 0, output
    assert "Resuming from %s/%s" % (STOP_CKPT, tag) in output
    assert "Burn-in passed on 3 node(s)" in output
    second = record()
    assert second["slurm_job_id"] != job_id
    lines = job_log(second)
    assert any(re.search(r"BURNIN resumed from %s/%s\S* at step %d\b" % (re.escape(STOP_CKPT), tag, step), line)
               for line in lines), lines[:60]
    results = burnin_results(lines)
    assert sorted(r["rank"] for r in results) == list(range(len(NODES) * RANKS_PER_NODE)), results
    for name in NODES:  # block placement: ranks 2i, 2i+1 on node i+1
        here = sorted(r["rank"] for r in results if r["hostname"] == name)
        assert here == [2 * NODES.index(name), 2 * NODES.index(name) + 1], (name, results)
    rank0 = next(r for r in results if r["rank"] == 0)
    assert rank0["world"] == 6 and rank0["start_step"] == step and rank0["final_step"] == step + 5, rank0
    assert latest("node1", STOP_CKPT) == "global_step%d" % (step + 5)


def test_a_node_drained_by_the_health_check_is_not_given_the_next_job():
    head, bad = node("node1"), node("node3")
    wait_for(all_idle, "3 idle Slurm nodes")
    before = record()
    original = bad.file(HEALTH_CONFIG).content_string
    config = json.loads(original)
    config["profile"] = "cu117"  # a GPU profile: the CPU container fails it as a node whose GPUs fell off
    try:
        bad.run("cat > %s <<'EOF'\n%s\nEOF" % (HEALTH_CONFIG, json.dumps(config)))
        assert "action: drain" in bad.run(HEALTH).stdout
        wait_for(lambda: node_states()["node3"] in ("drained", "draining"), "node3 drained")
        rc, output = playbook("burnin.yml", SLURM)
        assert rc != 0, output
        assert "Submit of burnin refused before any rank started" in output
        assert "not available: node3 (drained)" in output
        # Nothing was submitted: no new record, no job in the queue, no rank anywhere.
        assert record()["slurm_job_id"] == before["slurm_job_id"]
        assert head.check_output("squeue --noheader --format=%i").strip() == ""
        for name in NODES:
            assert ranks(name) == [], name
    finally:
        bad.run("cat > %s <<'EOF'\n%sEOF" % (HEALTH_CONFIG, original))
        bad.run(HEALTH)
    wait_for(all_idle, "node3 resumed by the health check")


@pytest.mark.skipif(not REAL_MDS, reason="needs a Megatron-DeepSpeed checkout: set MEGATRON_DS_SRC")
def test_pretrain_gpt_as_a_slurm_job_saves_on_scancel_and_resumes():
    """The real pretrain_gpt.py (data from test_pretrain.py's prepare_data run) through train.sbatch."""
    wait_for(all_idle, "3 idle Slurm nodes")
    rc, output = playbook("train.yml", dict(SLURM, megatron_launch_wait=2))
    assert rc == 0, output
    first = record()
    assert first["backend"] == "slurm" and first["command"] == WORKDIR + "/train.sbatch", first
    rc, output = playbook("stop.yml")
    assert rc == 0, output
    assert "every rank saved on SIGTERM" in output
    assert any("exiting program after receiving SIGTERM" in line for line in job_log(first))
    tag = latest("node1", TRAIN_CKPT)
    step = int(tag[len("global_step"):])
    wait_for(all_idle, "3 idle Slurm nodes after the stop")
    rc, output = playbook("train.yml", dict(SLURM, megatron_launch_wait=1))
    assert rc == 0, output
    assert "Resuming from %s/%s (TP 1, PP 1)" % (TRAIN_CKPT, tag) in output
    lines = job_log(record())
    assert any(re.search(r"successfully loaded checkpoint from %s .*at iteration %d\b" % (TRAIN_CKPT, step), line)
               for line in lines), lines[-40:]
    rc, output = playbook("stop.yml")
    assert rc == 0, output


BENCH = r'''
set -uo pipefail
steps=2
first_step() {  # seconds from $1 (epoch.ns) to the first BURNIN step line in $2, or "none (...)"
  local start=$1 log=$2 deadline=$((SECONDS + 300))
  while (( SECONDS < deadline )); do
    if grep -q 'BURNIN step=' "$log" 2>/dev/null; then
      awk -v now="$(date +%s.%N)" -v start="$start" 'BEGIN { printf "%.1f\n", now - start }'; return 0
    fi
    if [[ -n "${3:-}" ]] && ! squeue --noheader --jobs="$3" 2>/dev/null | grep -q .; then
      echo "none ($(grep -m1 -E 'Error|error:' "$log" | cut -c1-160))"; return 0
    fi
    sleep 0.2
  done
  echo "none (timeout)"
}
d=/tmp/bench-startup; rm -rf "$d"; mkdir -p "$d"
sed -e "s|--steps [0-9]*|--steps $steps|" -e "s|--save [^ ]*|--save $d/ck-pdsh|" -e "s|--load [^ ]*||" \
  BURNIN_DIR/burnin.sh > "$d/pdsh.sh"
sed -e "s|'--steps' '[0-9]*'|--steps $steps|;s|--steps [0-9]*|--steps $steps|" -e "s|--save [^ ]*|--save $d/ck-srun|" \
  -e "s|--load [^ )]*||" -e "s|^#SBATCH --output=.*|#SBATCH --output=$d/srun-%j.log|" BURNIN_DIR/burnin.sbatch > "$d/srun.sbatch"
sed -e "s|--launcher pdsh|--launcher slurm|" -e "s|--save [^ ]*|--save $d/ck-ds|" "$d/pdsh.sh" > "$d/ds-slurm.sh"
chmod +x "$d"/*.sh "$d/srun.sbatch"
t=$(date +%s.%N); bash "$d/pdsh.sh" > "$d/pdsh.log" 2>&1 &
echo "pdsh $(first_step "$t" "$d/pdsh.log")"; wait
t=$(date +%s.%N); id=$(sbatch --parsable "$d/srun.sbatch")
echo "srun $(first_step "$t" "$d/srun-$id.log" "$id")"
while squeue --noheader --jobs="$id" 2>/dev/null | grep -q .; do sleep 0.5; done
t=$(date +%s.%N); id=$(sbatch --parsable -N3 --ntasks-per-node=2 --exclusive --mem=0 --output="$d/ds-%j.log" \
  --wrap "bash $d/ds-slurm.sh")
echo "deepspeed-slurm $(first_step "$t" "$d/ds-$id.log" "$id")"
while squeue --noheader --jobs="$id" 2>/dev/null | grep -q .; do sleep 0.5; done
tail -n 5 "$d/ds-$id.log" | sed 's/^/ds-log: /'
'''


@pytest.mark.skipif(not os.environ.get("MEGATRON_BENCH_STARTUP"),
                    reason="start-up benchmark: set MEGATRON_BENCH_STARTUP=1 (docs/benchmarks.md)")
def test_start_up_time_pdsh_srun_and_deepspeed_slurm_launcher():
    """Seconds from the launch command to the first burn-in step, same nodes, same script: printed
    for docs/benchmarks.md, never asserted (a timed assertion would fail on a busy machine)."""
    wait_for(all_idle, "3 idle Slurm nodes")
    result = node("node1").run("runuser -u megatron -- bash -c %s", BENCH.replace("BURNIN_DIR", BURNIN_DIR))
    print("START-UP BENCH\n" + result.stdout + result.stderr)
    # pytest keeps a passing test's output to itself: the figures also go to a file.
    out = PROJECT_DIR / "logs" / "startup-bench.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ ", time.gmtime()) + "\n" + result.stdout + result.stderr)
    figures = dict(line.split(" ", 1) for line in result.stdout.splitlines() if line.split(" ", 1)[0]
                   in ("pdsh", "srun", "deepspeed-slurm"))
    assert set(figures) == {"pdsh", "srun", "deepspeed-slurm"}, result.stdout + result.stderr
    assert not figures["srun"].startswith("none"), figures
