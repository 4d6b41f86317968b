# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One job model, checked as a property: for job specs drawn across the stack profiles, the
parallel layouts (TP/PP/DP, ZeRO stages, micro and global batch) and the optional features,
what validation judges is what the rendered files run.

For each spec the real templates (roles/megatron_job/templates: train.sh.j2, ds_config.json.j2, hostfile.j2) are
rendered with the collection's filters, as the template module does, and read back:

* train.sh by the train.sh reader (_job_script.parse_train_script): its pretrain_gpt.py
  arguments equal the list validate_job judges (_job_inputs.judged_arguments), and its launcher
  options equal _job_args.launch_args;
* ds_config.json (json.loads) equals the dict the model builds (_job_args.ds_config), which
  validation takes as the JSON the job reads;
* the hostfile, read with DeepSpeed's rules (_job_files.parse_hostfile), lists every node with
  its GPUs as slots.

Deterministic (derandomize, no example database) and 300 examples.
"""
from __future__ import annotations

import json
import pathlib
from typing import Any, Dict, List

import jinja2
import pytest

from ansible.plugins.filter.core import FilterModule as CoreFilters

from ansible_collections.megatron_ds.cluster.plugins.filter.megatron_job import FilterModule as JobFilters
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import files as _job_files
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import inputs as _job_inputs
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import script as _job_script
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles as _stack_profiles

hypothesis = pytest.importorskip(
    "hypothesis", reason="hypothesis is not installed; `pip install -r requirements-test.txt` (hypothesis==6.170.17)")
st = hypothesis.strategies

REPO = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = 300

# The template module's environment: trim_blocks, the final newline kept, Ansible's core filters.
ENV = jinja2.Environment(loader=jinja2.FileSystemLoader(str(REPO / "roles" / "megatron_job" / "templates")), trim_blocks=True,
                         keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
ENV.filters.update(CoreFilters().filters())
ENV.filters.update({"megatron_ds.cluster." + name: f for name, f in JobFilters().filters().items()})

HEAD_PROFILES = ("cu121", "cu130", "cpu")


@st.composite
def job_specs(draw: Any) -> Dict[str, Any]:
    """A job spec the job files render for: valid by construction, never filtered."""
    profile = draw(st.sampled_from(("cu117",) + HEAD_PROFILES))
    head = profile in HEAD_PROFILES
    nodes = draw(st.integers(1, 4))
    gpus = draw(st.sampled_from((1, 2, 4, 8)))
    tp = draw(st.sampled_from([d for d in (1, 2, 4, 8) if gpus % d == 0]))
    world = nodes * gpus
    pp = draw(st.sampled_from([p for p in (1, 2, 4) if (world // tp) % p == 0]))
    dp = world // (tp * pp)
    no_pipe = pp == 1 and draw(st.booleans())
    stage = draw(st.sampled_from((0, 1, 2, 3) if no_pipe else (0, 1)))
    micro = draw(st.integers(1, 4))
    heads = tp * draw(st.integers(1, 4))
    seq = draw(st.sampled_from((128, 512, 2048)))
    spec: Dict[str, Any] = {
        "stack_profile": profile,
        "nodes": nodes,
        "gpus_per_node": gpus,
        "tensor_parallel": tp,
        "pipeline_parallel": pp,
        "no_pipeline_parallel": no_pipe,
        "sequence_parallel": head and tp > 1 and draw(st.booleans()),
        "zero_stage": stage,
        "zero_offload_optimizer": "cpu" if stage >= 1 and draw(st.booleans()) else "none",
        "zero_offload_param": "cpu" if stage == 3 and draw(st.booleans()) else "none",
        "micro_batch_size": micro,
        "global_batch_size": micro * dp * draw(st.integers(1, 8)),
        "num_layers": pp * draw(st.integers(1, 6)),
        "num_attention_heads": heads,
        "hidden_size": heads * draw(st.sampled_from((16, 64, 128))),
        "seq_length": seq,
        "max_position_embeddings": seq * draw(st.sampled_from((1, 2))),
        "precision": draw(st.sampled_from(("bf16", "fp16", "fp32"))),
        "lr": draw(st.sampled_from((6.0e-5, 1.5e-4, 3e-4, 0.001))),
        "min_lr": draw(st.sampled_from((0.0, 6.0e-6, 1e-5))),
        # inverse-square-root is a choice of HEAD's --lr-decay-style only (before_rebase refuses it).
        "lr_decay_style": draw(st.sampled_from(("constant", "linear", "cosine") + (("inverse-square-root",) if head else ()))),
        "launcher": draw(st.sampled_from(("pdsh", "openmpi", "slurm"))),
        "master_port": draw(st.integers(20000, 40000)),
        "master_addr": draw(st.sampled_from((None, "10.0.0.1"))),
        "load": draw(st.booleans()),
        "exit_signal_handler": draw(st.booleans()),
        "masked_softmax_fusion": draw(st.booleans()),
        "bias_gelu_fusion": draw(st.sampled_from(("auto", True, False))),
        "bias_dropout_fusion": draw(st.booleans()),
        "gradient_accumulation_fusion": draw(st.booleans()),
        "use_flash_attn": draw(st.sampled_from(("auto", True, False))) if head else "auto",
        "tensorboard_dir": draw(st.sampled_from((None, "/shared/tb/{name}", "/shared/tensor board"))),
        "workdir": draw(st.sampled_from(("/opt/megatron/jobs/gpt", "/opt/megatron/jobs/sim job"))),
        "data_path": draw(st.sampled_from(("/shared/data/a_text_document",
                                           ["0.7", "/shared/data/a_text_document", "0.3", "/shared/data/b_text_document"]))),
        "extra_args": draw(st.sampled_from(([], ["--seed", "1234"], ["--exit-interval", "100", "--seed", "7"]))),
        "env": draw(st.sampled_from(({"CUDA_DEVICE_MAX_CONNECTIONS": "1"}, {"NCCL_DEBUG": "WARN", "OMP_NUM_THREADS": "4"},
                                     {"CUDA_DEVICE_MAX_CONNECTIONS": "1", "DROPPED": None}))),
    }
    if spec["tensorboard_dir"] == "/shared/tb/{name}":
        spec["tensorboard_dir"] = "/shared/tb/gpt"
    if spec["use_flash_attn"] is True and spec["precision"] == "fp32":
        spec["precision"] = "bf16"  # Megatron's FlashSelfAttention asserts fp16/bf16
    checkpointing = draw(st.booleans())
    spec["activation_checkpointing"] = checkpointing
    for key in ("partition_activations", "contiguous_memory_optimization", "checkpoint_in_cpu"):
        spec[key] = checkpointing and draw(st.booleans())
    tokenizer = draw(st.sampled_from(("GPT2BPETokenizer", "BertWordPieceCase", "NullTokenizer", "HFTokenizer")
                                     if head else ("GPT2BPETokenizer", "BertWordPieceLowerCase")))
    spec["tokenizer_type"] = tokenizer
    if tokenizer == "NullTokenizer":
        spec["vocab_size"] = draw(st.sampled_from((1000, 50257)))
    if tokenizer == "HFTokenizer":
        spec["tokenizer_model"] = "gpt2"
    if draw(st.booleans()):
        spec["ffn_hidden_size"] = tp * draw(st.integers(1, 64)) * 16
    return spec


def render(template: str, job: Dict[str, Any], hosts: List[str]) -> str:
    profile = _stack_profiles.get(job["stack_profile"])
    return ENV.get_template(template).render(
        __megatron_job_spec=job,
        __megatron_job_profile=profile,
        __megatron_job_contents=ENV.filters["megatron_ds.cluster.job_files"](job, profile, hosts),
    )


@hypothesis.settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                     suppress_health_check=[hypothesis.HealthCheck.too_slow])
@hypothesis.given(job_specs())
def test_validation_judges_what_the_rendered_files_run(given: Dict[str, Any]) -> None:
    job = _job_spec.normalize(given)  # what the role's job_spec filter hands the templates
    assert _job_args.refusals(job) == [], "the strategy drew a spec the job files refuse"
    hosts = ["node%d" % (index + 1) for index in range(job["nodes"])]
    era = _stack_profiles.mds_era(job["stack_profile"])

    judged, dropped = _job_inputs.judged_arguments(job)
    script = _job_script.parse_train_script(render("train.sh.j2", job, hosts), era=era)
    assert [f for f in script["findings"] if f["status"] == "fail"] == []
    assert script["args"] == judged
    assert script["launcher"]["options"] == _job_args.launch_args(job)
    assert script["deepspeed"] and script["deepspeed_config"] == _job_args.ds_config_path(job)
    # Only --exit-signal-handler may be left out (before_rebase cannot save on SIGTERM).
    assert [flag for flag, reason in dropped] in ([], ["--exit-signal-handler"])

    assert json.loads(render("ds_config.json.j2", job, hosts)) == _job_args.ds_config(job)

    pool = _job_files.parse_hostfile(render("hostfile.j2", job, hosts))
    assert pool == {host: job["gpus_per_node"] for host in hosts}
