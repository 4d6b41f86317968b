# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_launch.prelaunch: the problems found before a launch (ports, files, ranks, ssh, checkpoints)."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import prelaunch as la_prelaunch


@pytest.mark.parametrize("checkpoints, lacking, files", [
    # shared storage: every node sees everything
    ({"n1": {"latest": "global_step5", "files": ["a", "b"]}, "n2": {"latest": "global_step5", "files": ["a", "b"]}},
     [], ["a", "b"]),
    # local disks after a save: n1 has `latest`, the model states and its shard; n2 only its shard
    ({"n1": {"latest": "global_step5", "files": ["m", "z0"]}, "n2": {"latest": None, "files": ["z1"]}},
     ["n1", "n2"], ["m", "z0", "z1"]),
    # n2 has every file but an older `latest`
    ({"n1": {"latest": "global_step5", "files": ["a"]}, "n2": {"latest": "global_step3", "files": ["a"]}},
     ["n2"], ["a"]),
])
def test_checkpoint_lacking(checkpoints, lacking, files):
    result = la_prelaunch.checkpoint_lacking(checkpoints, "global_step5")
    assert result == {"lacking": lacking, "files": files}


@pytest.mark.parametrize("data_path, files", [
    ("/d/x_text_document", ["/d/x_text_document.bin", "/d/x_text_document.idx"]),
    (["0.3", "/d/a", "0.7", "/d/b"], ["/d/a.bin", "/d/a.idx", "/d/b.bin", "/d/b.idx"]),
    ("0.5 /d/a 0.5 /d/b", ["/d/a.bin", "/d/a.idx", "/d/b.bin", "/d/b.idx"]),
    ("", []),
])
def test_data_files(data_path, files):
    assert la_prelaunch.data_files(data_path) == files


@pytest.mark.parametrize("paths, expected", [
    (["/d/a.bin", "/d/a.idx"], [{"path": "/d/a.bin", "what": "W", "fix": "F"}, {"path": "/d/a.idx", "what": "W", "fix": "F"}]),
    (("/d/a.bin",), [{"path": "/d/a.bin", "what": "W", "fix": "F"}]),
    ("/d/one", [{"path": "/d/one", "what": "W", "fix": "F"}]),
    ([], []),
])
def test_required_files(paths, expected):
    assert la_prelaunch.required_files(paths, "W", "F") == expected
    # What prelaunch_problems takes: a missing file is named with its what and fix.
    if expected:
        problems = la_prelaunch.prelaunch_problems({"n1": {"listeners": {}, "ranks": [], "paths": {}}}, expected)
        assert any("W" in p and "F" in p and expected[0]["path"] in p for p in problems), problems


@pytest.mark.parametrize("paths", [[""], [None], ["/d/a", 3], None])
def test_required_files_refuses_non_paths(paths):
    with pytest.raises(ValueError, match="required_files: expected paths as non-empty strings"):
        la_prelaunch.required_files(paths, "W", "F")


REQUIRED = [{"path": "/d/x.bin", "what": "dataset file", "fix": "run prepare_data.yml"}]


def _probe(**extra: Any) -> Dict[str, Any]:
    probe = {"listeners": {"29500": []}, "ranks": [], "paths": {"/d/x.bin": {"exists": True}}}
    probe.update(extra)
    return probe


@pytest.mark.parametrize("probes, ssh, expected", [
    ({"n1": _probe(), "n2": _probe()}, {"n1": {"rc": 0}, "n2": {"rc": 0}}, []),
    ({"n1": _probe(listeners={"29500": [{"pid": 42, "cmdline": "python3 -m http.server 29500"}]}), "n2": _probe()}, {},
     ["n1: port 29500 (the rendezvous port, megatron_job_master_port) is already in use by pid 42 (python3 -m http.server 29500)"]),
    ({"n1": _probe(paths={}), "n2": _probe(paths={"/d/x.bin": {"exists": False}})}, {},
     ["n1, n2: dataset file /d/x.bin is missing; run prepare_data.yml"]),
    ({"n1": _probe(), "n2": _probe()}, {"n2": {"rc": 255, "msg": "ssh: connect to host n2 port 22: Connection refused"}},
     ["n2: unreachable over ssh from the head node n1 as megatron (ssh: connect to host n2 port 22: Connection refused)"]),
    ({"n1": _probe(), "n2": {"unreachable": True, "msg": "Failed to connect"}}, {}, ["n2: unreachable by Ansible (Failed to connect)"]),
    ({"n1": _probe(ranks=[{"pid": 7, "cmdline": "/v/bin/python3 -u /j/burnin/burnin_gpt.py --local_rank=0"}]), "n2": _probe()}, {},
     ["n1: 1 rank process(es) of burnin_gpt.py already running (pids 7)"]),
])
def test_prelaunch_problems_name_the_node_and_the_cause(probes, ssh, expected):
    problems = la_prelaunch.prelaunch_problems(probes, REQUIRED, ssh, head="n1", script="pretrain_gpt.py", user="megatron")
    assert len(problems) == len(expected), problems
    for problem, start in zip(problems, expected):
        assert problem.startswith(start), problem


@pytest.mark.parametrize("lines, expected", [
    (["ok node1", "fail node2 ssh: connect to host node2 port 22: Connection refused", "noise"],
     {"n1": {"rc": 0, "msg": ""}, "n2": {"rc": 255, "msg": "ssh: connect to host node2 port 22: Connection refused"}}),
    ([], {}),
])
def test_ssh_sweep_maps_addresses_back_to_inventory_names(lines, expected):
    assert la_prelaunch.parse_ssh_sweep(lines, {"n1": "node1", "n2": "node2", "n3": "node3"}) == expected


@pytest.mark.parametrize("unwritable, expected", [
    ({"n1": "", "n2": ""}, []),
    ({"n1": "/c/gpt, owned by root mode 755", "n2": ""},
     ["n1: the checkpoint directory is not writable by megatron (/c/gpt, owned by root mode 755)"]),
])
def test_prelaunch_problems_unwritable_checkpoint_directory(unwritable, expected):
    problems = la_prelaunch.prelaunch_problems({"n1": _probe(), "n2": _probe()}, REQUIRED, {}, head="n1", user="megatron",
                                               unwritable=unwritable)
    assert [p[:len(e)] for p, e in zip(problems, expected)] == expected and len(problems) == len(expected)
