"""The real Megatron-DeepSpeed pretrain_gpt.py across the three nodes (only with MEGATRON_DS_SRC):
NullTokenizer data made by prepare_data.yml and staged to every node, train.yml until the first
iterations, stop.yml (every rank saves on SIGTERM), train.yml again (resumes from that step)."""
from __future__ import annotations

import json
import os
import re
import tempfile

import pytest

from launch_helpers import (DATA_PREFIX, NODES, REAL_MDS, TRAIN_CKPT, TRAIN_LOG, latest, node, playbook, ranks,
                            run_log, start_markers)

pytestmark = pytest.mark.skipif(not REAL_MDS, reason="needs a Megatron-DeepSpeed checkout: set MEGATRON_DS_SRC")


def test_prepare_data_tokenises_on_the_head_and_stages_to_every_node():
    with tempfile.TemporaryDirectory() as tmp:
        corpus = os.path.join(tmp, "corpus.jsonl")
        with open(corpus, "w", encoding="utf-8") as handle:
            for doc in range(400):
                tokens = [str((doc * 7 + i * 13) % 997 + 1) for i in range(60 + doc % 140)]
                handle.write(json.dumps({"text": " ".join(tokens)}) + "\n")
        rc, output = playbook("prepare_data.yml", {"megatron_data_input": corpus})
    assert rc == 0, output
    for name in NODES:
        for ext in (".bin", ".idx"):
            assert node(name).file(DATA_PREFIX + ext).size > 0, (name, ext)


def test_upstream_refuses_on_the_head_node_what_the_static_rules_let_through():
    """DeepSpeed sequence parallelism that does not divide the world passes the controller's
    rules (they do not count it yet), but the checkout's own validate_args refuses it
    (megatron/arguments.py:104 at 4efb479d); train.yml's upstream check on the head node stops the
    launch with upstream's words before any rank starts."""
    before = start_markers(TRAIN_LOG)
    rc, output = playbook("train.yml", {"megatron_job_extra_args": ["--ds-sequence-parallel-size", "5"]})
    assert rc != 0
    assert "Job validation passed" in output  # the controller's static rules let it through
    assert "(head node): launch refused before any rank started, by upstream's own checks" in output
    # upstream's own words, spelling included ("seqence")
    assert re.search(r"Megatron-DeepSpeed refuses the job at megatron/arguments\.py:\d+: world size \(\d+\) is not "
                     r"divisible by .*seqence parallel size \(5\)", output), output[-3000:]
    assert start_markers(TRAIN_LOG) == before


def test_pretrain_runs_across_the_nodes_stops_with_a_save_and_resumes():
    rc, output = playbook("train.yml", {"megatron_launch_wait": 3})
    assert rc == 0, output
    lines = run_log(TRAIN_LOG)
    for name in NODES:  # every node's launcher started its ranks (pdsh prefixes)
        assert any(line.startswith("%s: " % name) and "spawned with command" in line and "pretrain_gpt.py" in line
                   for line in lines), name

    rc, output = playbook("stop.yml")
    assert rc == 0, output
    assert "every rank saved on SIGTERM" in output
    for name in NODES:
        assert ranks(name) == []
    tag = latest("node1", TRAIN_CKPT)
    step = int(tag[len("global_step"):])
    assert any("exiting program after receiving SIGTERM" in line for line in run_log(TRAIN_LOG))

    rc, output = playbook("train.yml", {"megatron_launch_wait": 1})
    assert rc == 0, output
    assert "Resuming from %s/%s (TP 1, PP 1)" % (TRAIN_CKPT, tag) in output
    lines = run_log(TRAIN_LOG)
    assert any(re.search(r"successfully loaded checkpoint from %s .*at iteration %d\b" % (TRAIN_CKPT, step), line)
               for line in lines), lines[-40:]
    assert any(re.search(r"\biteration\s+%d/" % (step + 1), line) for line in lines)
    rc, output = playbook("stop.yml")
    assert rc == 0, output


def test_profile_runs_the_job_with_megatrons_profiler_and_leaves_the_job_alone():
    """profile.yml on the real job: rank 0 and rank 5 (node3) traced over steps 2-3, fetched."""
    tag_before = latest("node1", TRAIN_CKPT)
    with tempfile.TemporaryDirectory() as fetch_dir:
        rc, output = playbook("profile.yml", {
            "megatron_launch_profile_steps": "2,3",
            "megatron_launch_profile_ranks": [0, 5],
            "megatron_launch_profile_fetch_dir": fetch_dir,
        })
        assert rc == 0, output
        traces = sorted(os.path.relpath(os.path.join(root, name), fetch_dir).split(os.sep, 1)[1]
                        for root, dummy, names in os.walk(fetch_dir) for name in names)
    # megatron/profiler.py names a trace <hostname>_<pid>: one from node1 (rank 0), one from node3 (rank 5).
    assert [t.split("/")[0] for t in traces] == ["node1", "node3"], traces
    assert all(t.split("/")[1].startswith(t.split("/")[0] + "_") and t.endswith(".pt.trace.json.gz") for t in traces), traces
    # The profiled run is the job's own train.sh rendered with the profiler flags, in its own dir.
    script = node("node1").file("/opt/megatron/jobs/sim-gpt-profile/train.sh").content_string
    # One argument per line after the script: read it as the shell does.
    assert "--profile pt --profile_steps 2,3 --profile-ranks 0 5" in " ".join(script.replace("\\\n", " ").split())
    assert "--load" not in script
    assert latest("node1", TRAIN_CKPT) == tag_before
    assert latest("node1", "/opt/megatron/jobs/sim-gpt-profile/checkpoints") == "global_step3"
