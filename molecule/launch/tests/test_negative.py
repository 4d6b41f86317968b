"""Launches that must be refused before any rank starts, with a message naming the cause and
the node: the rendezvous port in use, a node the head cannot reach over ssh, a missing dataset,
and a checkpoint saved with another TP/PP. Each case breaks one thing and restores it in
``finally``."""
from __future__ import annotations

import time

import pytest

from launch_helpers import (BURNIN_LOG, DATA_PREFIX, MEGATRON_DIR, NODES, REAL_MDS, TRAIN_CKPT, TRAIN_LOG,
                            node, playbook, ranks, start_markers)


def _no_rank_started(log: str, markers_before: int) -> None:
    for name in NODES:
        assert ranks(name) == [], (name, ranks(name))
    assert start_markers(log) == markers_before, "a launcher was started"


def test_port_in_use_on_the_head_node_stops_the_launch():
    node1 = node("node1")
    pid = node1.check_output("setsid nohup python3 -m http.server 29500 >/dev/null 2>&1 </dev/null & echo $!")
    try:
        for dummy in range(50):
            if node1.run("ss -Hltn 'sport = :29500'").stdout.strip():
                break
            time.sleep(0.2)
        before = start_markers(BURNIN_LOG)
        rc, output = playbook("burnin.yml")
        assert rc != 0
        assert "refused before any rank started" in output
        assert "node1: port 29500" in output and "(python3 -m http.server 29500)" in output
        assert "node2: port" not in output
        _no_rank_started(BURNIN_LOG, before)
    finally:
        node1.run("kill %s", pid)


def test_node_unreachable_over_ssh_stops_the_launch():
    node3 = node("node3")
    node3.check_output("systemctl stop ssh")
    try:
        before = start_markers(BURNIN_LOG)
        rc, output = playbook("burnin.yml")
        assert rc != 0
        assert "refused before any rank started" in output
        assert "node3: unreachable over ssh from the head node node1 as megatron" in output
        assert "node2: unreachable" not in output
        _no_rank_started(BURNIN_LOG, before)
    finally:
        node3.check_output("systemctl start ssh")


def test_missing_dataset_stops_the_launch():
    before = start_markers(TRAIN_LOG)
    rc, output = playbook("train.yml", {"megatron_job_data_path": "/shared/data/missing_text_document"})
    assert rc != 0
    assert "refused before any rank started" in output
    assert "node1, node2, node3: dataset file /shared/data/missing_text_document.bin is missing" in output
    _no_rank_started(TRAIN_LOG, before)


@pytest.mark.skipif(REAL_MDS, reason="fabricates pretrain_gpt.py and a dataset, only over the toy checkout")
def test_resume_from_another_tp_is_refused_naming_the_universal_checkpoint():
    """A checkpoint tag saved with TP 2 (two mp_rank files, no pipeline layers) against a TP 1 job."""
    fake = [MEGATRON_DIR + "/pretrain_gpt.py", DATA_PREFIX + ".bin", DATA_PREFIX + ".idx"]
    # The .idx is a valid, empty MMIDIDX header (magic, version 1, int32 tokens, 0 sequences, 0
    # documents): the launch's own index check (_launch/data_index.py) passes it, and the resume
    # check is the one that refuses.
    header = "MMIDIDX\\0\\0\\1\\0\\0\\0\\0\\0\\0\\0\\4" + "\\0" * 16
    for name in NODES:
        node(name).check_output("install -o megatron -d /shared/data && touch %s %s && printf '%s' > %s"
                                % (fake[0], fake[1], header, fake[2]))
    node("node1").check_output(
        "install -o megatron -g megatron -d %s %s/global_step5 && echo global_step5 > %s/latest && "
        "touch %s/global_step5/mp_rank_00_model_states.pt %s/global_step5/mp_rank_01_model_states.pt"
        % (TRAIN_CKPT, TRAIN_CKPT, TRAIN_CKPT, TRAIN_CKPT, TRAIN_CKPT))
    try:
        before = start_markers(TRAIN_LOG)
        rc, output = playbook("train.yml")
        assert rc != 0
        assert "Resume refused before any rank started: %s/global_step5 on node1" % TRAIN_CKPT in output
        assert "universal" in output.lower()
        _no_rank_started(TRAIN_LOG, before)
    finally:
        for name in NODES:
            node(name).run("rm -f %s %s %s" % tuple(fake))
        node("node1").run("rm -rf %s" % TRAIN_CKPT)
