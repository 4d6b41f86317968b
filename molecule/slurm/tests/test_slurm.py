"""slurm on three nodes with real daemons, checked from inside the cluster.

Per-node tests take testinfra's ``host`` fixture; the cluster tests open nodes through the
molecule inventory and run Slurm's own commands (sinfo, srun, sbatch, scontrol) there. Waits
poll with deadlines: a node registers, a drain or a resume reaches slurmctld, asynchronously.
"""

from __future__ import annotations

import json
import os
import re

import pytest
import testinfra

from ansible_collections.megatron_ds.cluster.plugins.module_utils._slurm import fit  # the partition fit check run before a submit
from ansible_collections.megatron_ds.cluster.tests.support import secret_scan
from ansible_collections.megatron_ds.cluster.tests.support.polling import wait_for

NODES = ["node1", "node2", "node3"]
HEAD = "node1"
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
# Read before any test runs, which stops the logging: the tests' own Ansible calls are not the
# collection's output (tests/support/secret_scan.py).
secret_scan.converge_log()
HEALTH = "/usr/local/sbin/megatron-slurm-health"
HEALTH_CONFIG = "/etc/megatron/slurm-health.json"
# A job that checks what the ranks were given the way torch.distributed's env:// rendezvous and
# Megatron-DeepSpeed read it (MASTER_ADDR, RANK, WORLD_SIZE from Slurm's variables), then sums the
# ranks over TCP across the nodes: rank 0 collects every rank and sends the sum back to each.
ALLREDUCE = r'''
import os, socket, time
rank, world = int(os.environ["SLURM_PROCID"]), int(os.environ["SLURM_NTASKS"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
if rank == 0:
    server = socket.create_server(("", port))
    peers, total = [], 0
    while len(peers) < world - 1:
        peer, _ = server.accept()
        total += int(peer.recv(16))
        peers.append(peer)
    for peer in peers:
        peer.sendall(str(total).encode())
else:
    for _ in range(200):
        try:
            peer = socket.create_connection((addr, port))
            break
        except OSError:
            time.sleep(0.1)
    peer.sendall(str(rank).encode())
    total = int(peer.recv(16))
print("rank=%d world=%d node=%s local=%s sum=%d" % (
    rank, world, socket.gethostname(), os.environ["SLURM_LOCALID"], total), flush=True)
'''
BATCH = """#!/bin/bash
#SBATCH -N3 --ntasks-per-node=2 --job-name=molecule-ranks --output=/tmp/molecule-ranks.out
export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29512
srun python3 /tmp/allreduce.py
"""


def node(name: str):
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}")


def states(head) -> dict:
    out = head.check_output("sinfo --noheader --Node --partition=train --format='%N %T'")
    return dict(line.split() for line in out.splitlines() if line.strip())


def all_idle(head) -> bool:
    current = states(head)
    return current if current == {name: "idle" for name in NODES} else False


# --- munge -------------------------------------------------------------------------------


def test_munge_key_is_the_same_everywhere_and_private():
    sums = set()
    for name in NODES:
        key = node(name).file("/etc/munge/munge.key")
        assert key.user == "munge"
        assert key.mode == 0o400
        sums.add(key.sha256sum)
    assert len(sums) == 1


@pytest.mark.parametrize("source, target", [("node1", "node2"), ("node3", "node1"), ("node2", "node3")])
def test_munge_credentials_cross_nodes(source, target):
    cred = node(source).check_output("munge -n")
    decoded = node(target).run("echo %s | unmunge" % cred)
    assert decoded.rc == 0, decoded.stderr
    assert "STATUS:          Success (0)" in decoded.stdout


# --- configuration and daemons -----------------------------------------------------------


def test_daemons_run_where_they_belong(host):
    name = host.check_output("hostname")
    assert host.service("munge").is_running
    assert host.service("slurmd").is_running
    assert host.service("slurmctld").is_running == (name == HEAD)


def test_node_lines_match_what_slurmd_reports(host):
    conf = host.file("/etc/slurm/slurm.conf").content_string
    name = host.check_output("hostname")
    line = re.search(r"^NodeName=%s .*$" % name, conf, re.M).group(0)
    reported = dict(re.findall(r"(\w+)=(\S+)", host.check_output("slurmd -C").splitlines()[0]))
    assert "CPUs=%s " % reported["CPUs"] in line
    assert "CoresPerSocket=%s " % reported["CoresPerSocket"] in line
    memory = int(re.search(r"RealMemory=(\d+)", line).group(1))
    assert memory == int(reported["RealMemory"]) - 1024
    # CPU-only containers: no GPU device files, so no Gres and no gres.conf line.
    assert "Gres=" not in conf and "GresTypes" not in conf
    assert "Name=gpu" not in host.file("/etc/slurm/gres.conf").content_string
    # The containers get linuxproc: slurmd cannot own a cgroup hierarchy without --privileged.
    assert "ProctrackType=proctrack/linuxproc" in conf
    assert "CommunicationParameters=NoInAddrAny" in conf


def test_partitions_come_from_the_inventory():
    wait_for(lambda: all_idle(node(HEAD)), "3 idle nodes")
    out = node(HEAD).check_output("sinfo --noheader --format='%P %D %N'")
    parts = dict((line.split()[0], line.split()[1:]) for line in out.splitlines())
    assert parts["train*"][0] == "3"
    assert parts["debug"] == ["2", "node[2-3]"]


# --- jobs --------------------------------------------------------------------------------


def test_three_nodes_are_idle():
    head = node(HEAD)
    wait_for(lambda: all_idle(head), "3 idle nodes")


def test_srun_runs_on_every_node():
    head = node(HEAD)
    wait_for(lambda: all_idle(head), "3 idle nodes")
    out = head.check_output("runuser -u megatron -- srun -N3 hostname")
    assert sorted(out.split()) == NODES


def test_batch_job_places_six_ranks_and_they_meet():
    head = node(HEAD)
    wait_for(lambda: all_idle(head), "3 idle nodes")
    for name in NODES:
        node(name).run("cat > /tmp/allreduce.py <<'PYEOF'\n%sPYEOF" % ALLREDUCE)
    head.run("cat > /tmp/ranks.sbatch <<'EOF'\n%sEOF\nchmod 0755 /tmp/ranks.sbatch; rm -f /tmp/molecule-ranks.out" % BATCH)
    done = head.run("cd /tmp && runuser -u megatron -- sbatch --wait /tmp/ranks.sbatch")
    assert done.rc == 0, done.stdout + done.stderr
    lines = [l for l in head.file("/tmp/molecule-ranks.out").content_string.splitlines() if l.startswith("rank=")]
    ranks = dict((int(re.search(r"rank=(\d+)", l).group(1)), l) for l in lines)
    assert sorted(ranks) == list(range(6))
    # Block distribution: ranks 0-1 on node1, 2-3 on node2, 4-5 on node3, local ids 0 and 1.
    for rank, line in ranks.items():
        assert "world=6" in line
        assert "node=%s" % NODES[rank // 2] in line
        assert "local=%d" % (rank % 2) in line
        assert "sum=15" in line


def fit_problems(head, nodes: int, ranks: int) -> list:
    partition = fit.parse_partition(head.check_output("scontrol show partition -o train"))
    sinfo = fit.parse_sinfo_nodes(head.check_output("sinfo --noheader --Node --partition=train --format='%s'"
                                                    % fit.SINFO_FORMAT))
    return fit.layout_problems("train", partition, sinfo, nodes, ranks, gpu_ranks=False)


def test_fit_check_reads_the_live_partition():
    head = node(HEAD)
    wait_for(lambda: all_idle(head), "3 idle nodes")
    assert fit_problems(head, 3, 2) == []
    assert fit_problems(head, 4, 2) == [
        "slurm partition train has 3 node(s), the job needs 4: add nodes to the partition or plan for 3"]
    assert "0 node(s) can take 3 CPU rank(s) each" in " ".join(fit_problems(head, 3, 3))


def test_finished_jobs_are_logged():
    log = node(HEAD).file("/var/log/slurm/job_completions.log")
    assert log.exists
    assert re.search(r"Name=molecule-ranks JobState=COMPLETED .*NodeCnt=3 ProcCnt=6", log.content_string)


# --- drains and the health check ---------------------------------------------------------


def test_health_check_passes_on_a_healthy_node(host):
    result = host.run(HEALTH + " --dry-run")
    assert result.rc == 0, result.stdout + result.stderr
    assert "0 failed" in result.stdout
    assert "action: nothing" in result.stdout


def test_health_check_drains_a_failing_node_and_resumes_it():
    head, bad = node(HEAD), node("node3")
    wait_for(lambda: all_idle(head), "3 idle nodes")
    original = bad.file(HEALTH_CONFIG).content_string
    # node3 now is expected to meet the cu117 profile: it has no GPU and no driver, so the
    # collection's checks fail on it as they would on a GPU node whose GPUs fell off the bus.
    config = json.loads(original)
    config["profile"] = "cu117"
    try:
        bad.run("cat > %s <<'EOF'\n%s\nEOF" % (HEALTH_CONFIG, json.dumps(config)))
        result = bad.run(HEALTH)
        assert result.rc == 1, result.stdout + result.stderr
        assert "action: drain" in result.stdout
        reason = wait_for(lambda: head.check_output("sinfo --noheader -R --format='%N|%E'").strip(), "a drained node")
        # The facts read the containers' PCI bus (the host's, without an NVIDIA GPU), so the row
        # says so; where sysfs shows no bus, only that nvidia-smi saw none.
        assert reason.startswith(("node3|megatron-health: gpu.present found no NVIDIA GPU on this node",
                                  "node3|megatron-health: gpu.present found no GPU")), reason
        assert states(head)["node3"] in ("drained", "draining")
        # The fit check before a submit names the drained node.
        assert "not available: node3 (drained)" in " ".join(fit_problems(head, 3, 2))
        # Not given the next job: one that needs node3 cannot start, the others still run.
        refused = head.run("runuser -u megatron -- srun -w node3 --immediate=2 hostname")
        assert refused.rc != 0
        assert sorted(head.check_output("runuser -u megatron -- srun -N2 hostname").split()) == ["node1", "node2"]
    finally:
        bad.run("cat > %s <<'EOF'\n%sEOF" % (HEALTH_CONFIG, original))
    healthy = bad.run(HEALTH)
    assert healthy.rc == 0, healthy.stdout + healthy.stderr
    assert "action: resume" in healthy.stdout
    wait_for(lambda: all_idle(head), "node3 back to idle")
    assert sorted(head.check_output("runuser -u megatron -- srun -N3 hostname").split()) == NODES


def test_health_check_leaves_an_administrators_drain_alone():
    head, other = node(HEAD), node("node2")
    wait_for(lambda: all_idle(head), "3 idle nodes")
    head.check_output("scontrol update NodeName=node2 State=DRAIN Reason='bad fan'")
    try:
        assert wait_for(lambda: states(head)["node2"] in ("drained", "draining"), "node2 drained")
        result = other.run(HEALTH)
        assert result.rc == 0
        assert "action: nothing" in result.stdout
        assert "node2|bad fan" in head.check_output("sinfo --noheader -R --format='%N|%E'")
    finally:
        head.run("scontrol update NodeName=node2 State=RESUME")
    wait_for(lambda: all_idle(head), "node2 back to idle")


# molecule.yml's sentinel munge key, raw and as the inventory gives it (base64).
MUNGE_SENTINELS = ["MOLECULE-SENTINEL-MUNGE-KEY", "TU9MRUNVTEUtU0VOVElORUwtTVVOR0UtS0VZ"]


def test_the_munge_key_is_readable_by_munge_alone(host):
    """The key slurm_munge_key gave is the one munge reads, 0400 to munge, and no file that others
    can read on the node's own filesystem holds it (find -xdev keeps /proc and /sys out)."""
    key = host.file("/etc/munge/munge.key")
    assert key.mode == 0o400 and key.user == "munge"
    assert MUNGE_SENTINELS[0] in host.run("head -c 64 /etc/munge/munge.key").stdout
    assert secret_scan.readable_copies(host, MUNGE_SENTINELS) == []


def test_the_munge_key_is_in_no_log_and_no_diff(host):
    """Prepare, converge and the idempotence run printed their diffs into the scenario's log:
    the key is in none of it, nor in the node's journal (a module logs its arguments there
    unless its task is no_log)."""
    assert secret_scan.in_log(MUNGE_SENTINELS) == []
    assert secret_scan.journal_copies(host, MUNGE_SENTINELS) == []
