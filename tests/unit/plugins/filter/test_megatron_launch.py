# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The megatron_launch filters: every name resolves to its _launch function, errors become
AnsibleFilterError."""
from __future__ import annotations

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.filter.megatron_launch import FilterModule

FILTERS = FilterModule().filters()
NDR_PORT = {"hca": "mlx5_0", "port": "1", "rate": "400 Gb/sec (4X NDR)"}


@pytest.mark.parametrize("name, args, expected", [
    ("rank_pattern", ("pretrain_gpt.py",), r"python[0-9.]* -u ([^ ]*/)?pretrain_gpt\.py( |$)"),
    ("data_files", ("/d/x",), ["/d/x.bin", "/d/x.idx"]),
    ("required_files", (["/d/x.bin", "/d/x.idx"], "dataset file", "run prepare_data.yml"),
     [{"path": "/d/x.bin", "what": "dataset file", "fix": "run prepare_data.yml"},
      {"path": "/d/x.idx", "what": "dataset file", "fix": "run prepare_data.yml"}]),
    ("required_files", ("/d/one", "w", "f"), [{"path": "/d/one", "what": "w", "fix": "f"}]),
    ("required_files", ([], "w", "f"), []),
    ("checkpoint_step", ("global_step3",), 3),
    ("checkpoint_expect", ({"megatron_job_gpus_per_node": 2, "megatron_job_tensor_parallel": 2}, 2),
     {"tensor_parallel": 2, "world_size": 4}),
    ("ssh_sweep", (["ok a"], {"n": "a"}), {"n": {"rc": 0, "msg": ""}}),
    ("checkpoint_shape", (["mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt"],),
     {"layout": "deepspeed", "tp": 2, "pp": 1, "dp": None, "no_pipeline_parallel": True, "files": 2}),
    ("perftest_result", ("no result",), {}),
    ("fabric_lines", (None,), []),
    ("fabric_tested_port", ({"nccl_env": {"NCCL_IB_HCA": "mlx5_0:1"}, "ports": [NDR_PORT]},),
     {"hca": "mlx5_0", "port": "1", "rate": "400 Gb/sec (4X NDR)"}),
    ("fabric_link_threshold", ([{"hca": "mlx5_0", "rate": "400 Gb/sec (4X NDR)"}], 0.9),
     {"scope": "port", "expected": 360.0, "unit": "Gb/s", "origin": "detected hardware",
      "basis": "400 Gb/sec (4X NDR) x 0.9"}),
])
def test_filters(name, args, expected):
    assert FILTERS[name](*args) == expected


@pytest.mark.parametrize("name, args", [("rank_pattern", ("",)), ("checkpoint_shape", (None,)),
                                        ("checkpoint_expect", ({"megatron_job_zero_stage": "x"}, 1)),
                                        ("required_files", (["/d/x", ""], "w", "f")),
                                        ("required_files", ([None], "w", "f")),
                                        ("perftest_result", ("#bytes #iterations BW peak[kb/sec] BW average[kb/sec]",)),
                                        ("fabric_summary", ([{"node": "n1", "rc": "x"}],)),
                                        # an expect key megatron_checkpoint_info does not know
                                        ("checkpoint_judge", ([], "/ck", "global_step1", {"tp": 1}, "cu130"))])
def test_errors_become_filter_errors(name, args):
    with pytest.raises(AnsibleFilterError, match="megatron_ds.cluster.%s" % name):
        FILTERS[name](*args)


def test_checkpoint_judge_is_the_resume_judgement():
    got = FILTERS["checkpoint_judge"](["mp_rank_00_model_states.pt", "mp_rank_01_model_states.pt"], "/ck", "global_step5",
                                      {"world_size": 2, "tensor_parallel": 1, "pipeline_parallel": 1}, "cu130", True)
    assert got["layout"]["tensor_parallel"] == 2
    assert len(got["mismatches"]) == 1 and "ds_to_universal --input_folder /ck/global_step5" in got["mismatches"][0]


def test_upstream_filters_build_the_request_and_read_the_verdict():
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import oracle
    spec = {"stack_profile": "cpu", "gpus_per_node": 2, "nodes": 3, "tensor_parallel": 1, "pipeline_parallel": 1,
            "global_batch_size": 12, "micro_batch_size": 1, "num_layers": 2, "hidden_size": 64,
            "num_attention_heads": 4}
    request = oracle.decode_request(FILTERS["upstream_request"](spec, megatron_dir="/m", workdir="/w"))
    assert request["world_size"] == 6 and request["megatron_dir"] == "/m" and request["workdir"] == "/w"
    verdict = FILTERS["upstream_verdict"](oracle.MARKER + '{"ran": false, "reason": "r", "findings": []}')
    assert verdict["lines"] == [] and verdict["reason"] == "r"
    with pytest.raises(AnsibleFilterError, match="megatron_ds.cluster.upstream_verdict"):
        FILTERS["upstream_verdict"]("no verdict here")
