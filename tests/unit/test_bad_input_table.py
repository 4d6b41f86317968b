# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bad-input table of issue 39 ("bad input stops at the door"): every class of bad inventory
and bad job spec an adversarial user tried, each refused by the early gate, with a message that
names the variable, the value and the fix.

The early gate is what site.yml runs before provisioning: playbooks/inventory_check.yml (its
filters are plugin_utils/_inventory.py and _job.hops.inventory_refusals, driven here directly) and
playbooks/validate.yml (the validate_job action, driven here through the action harness with the
inventory's megatron_job_* variables, as validate.yml calls it). Checks that live only in the
playbooks' Jinja (groups, head membership, profiles, the YAML parse) run through ansible-playbook
on an inventory in tmp_path whose nodes cannot be reached: the run must stop in the localhost play.
A row that was not caught before this table was written says so (NEW) and carries the fix's test.

plan.yml must answer any input within 10 s (the issue's Done-when): the planner rows print the
time measured (no timing assertion, CONTRIBUTING.md) and assert the refusal.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import tempfile
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional

import pytest
import yaml
from ansible.errors import AnsibleActionFail

from ansible_collections.megatron_ds.cluster.plugins.action.plan_job import ActionModule as PlanAction
from ansible_collections.megatron_ds.cluster.plugins.action.validate_job import ActionModule as ValidateAction
from ansible_collections.megatron_ds.cluster.plugins.module_utils import _report
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import hops as _job_hops
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import plan as _job_plan
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.plugin_utils import _inventory
from ansible_collections.megatron_ds.cluster.tests.support import tools
from ansible_collections.megatron_ds.cluster.tests.support.action_harness import make_action

REPO = pathlib.Path(__file__).resolve().parents[2]
NODES = ["gpu%02d" % i for i in range(1, 9)]
# The shape the job rows are judged on: 8 nodes of 8 GPUs with 80 GiB each, where the default
# job spec passes (test_the_default_job_passes), so that each row's refusal is its own.
VALIDATE_ARGS = {"gpu_memory_mib": 81920}


@pytest.fixture(autouse=True)
def report_dir(tmp_path, monkeypatch):
    """validate_job writes its report files under the test's own directory, not the user's."""
    monkeypatch.setattr(_report, "DEFAULT_DIR", str(tmp_path / "reports"))
    monkeypatch.setenv("COLUMNS", "400")  # the findings on one line each, whatever runs the tests
    monkeypatch.delenv("MEGATRON_DS_SRC", raising=False)


def validate(spec: Dict[str, Any]) -> Optional[str]:
    """validate.yml's verdict on an inventory whose job spec is ``spec`` (megatron_job_* names,
    or a bare key that gets the prefix): its failure message, or None when the job passes."""
    task_vars: Dict[str, Any] = {"groups": {"all": NODES, "megatron_nodes": NODES}}
    for key, value in spec.items():
        # The inventory's own names as they are (nccl_env: the nccl role's, which the job inherits).
        task_vars[key if key.startswith("megatron_job_") or key in ("nccl_env", "megatron_stack_profile")
                  else "megatron_job_" + key] = value
    try:
        result = make_action(ValidateAction, dict(VALIDATE_ARGS)).run(task_vars=task_vars)
    except AnsibleActionFail as exc:
        return str(exc)
    if not result.get("failed"):
        return None
    return " ".join(line.strip() for line in result["msg"].splitlines())


def inventory(values: Dict[str, Dict[str, Any]]) -> Optional[str]:
    """What inventory_check.yml's per-node filters say about ``values`` (host -> its variables):
    every refusal line, or None."""
    lines = list(_inventory.duplicate_addresses(values))
    for host, own in values.items():
        lines += ["%s: %s" % (host, line) for line in _inventory.misspelt(list(own))]
        lines += ["%s: %s" % (host, line) for line in _inventory.spaced_paths(own)]
        lines += ["%s: %s" % (host, line) for line in _inventory.address_refusals(own)]
        lines += ["%s: %s" % (host, line) for line in _inventory.port_refusals(own)]
        lines += _job_hops.inventory_refusals(own.get("nccl_env"), {host: own.get("megatron_job_node_address") or host},
                                              own.get("megatron_stack_profile"))
    return "\n".join(lines) or None


def inventory_file(text: str) -> Optional[str]:
    """What inventory_check.yml says about a hosts.yml of ``text`` before Ansible's parser keeps the
    last of two equal keys."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "hosts.yml")
        with open(path, "w") as handle:
            handle.write(text)
        return "\n".join(_inventory.duplicate_keys([directory])) or None


GATES: Dict[str, Callable[[Any], Optional[str]]] = {"validate": validate, "inventory": inventory,
                                                    "inventory_file": inventory_file}


class Row(NamedTuple):
    name: str
    gate: str
    given: Any
    words: List[str]


def job(name: str, spec: Dict[str, Any], *words: str) -> Row:
    return Row(name, "validate", spec, list(words))


def nodes(name: str, values: Dict[str, Dict[str, Any]], *words: str) -> Row:
    return Row(name, "inventory", values, list(words))


def node(name: str, values: Dict[str, Any], *words: str) -> Row:
    """One node among two fine ones: its variables are ``values``."""
    return nodes(name, {"node1": dict(values, ansible_host=values.get("ansible_host", "192.0.2.1")),
                        "node2": {"ansible_host": "192.0.2.2"}}, *words)


# Each hostile value, and the character the refusal names (as repr() shows it).
HOSTILE = {"$(id)": "'$'", "`id`": "'`'", "a\nb": "'\\n'", "a;id": "';'", "bob's": '"\'"'}
ROWS: List[Row] = [
    # --- job spec: numbers (schema.py bounds) ---
    job("lr NaN", {"lr": float("nan")}, "megatron_job_lr: found nan", "finite number", "set a number"),
    job("lr .nan as text", {"lr": ".nan"}, "megatron_job_lr: found '.nan'", "finite number"),
    job("lr +inf", {"lr": float("inf")}, "megatron_job_lr: found inf", "finite number"),
    job("lr -inf", {"lr": "-.inf"}, "megatron_job_lr: found '-.inf'", "finite number"),
    job("lr negative", {"lr": -0.001}, "megatron_job_lr: found -0.001", "> 0", "set it within those bounds"),
    job("lr zero", {"lr": 0}, "megatron_job_lr: found 0", "a learning rate of 0 trains nothing"),
    job("lr not a number", {"lr": "fast"}, "megatron_job_lr: found 'fast', expected a number"),
    job("min_lr NaN", {"min_lr": "nan"}, "megatron_job_min_lr: found 'nan'", "finite number"),
    job("min_lr above lr", {"lr": 1e-5, "min_lr": 1e-4}, "min_lr 0.0001 > lr 1e-05", "lower --min-lr"),
    job("weight decay negative", {"weight_decay": -0.1}, "megatron_job_weight_decay: found -0.1",
        "a negative decay grows the weights"),
    job("weight decay NaN", {"weight_decay": float("nan")}, "megatron_job_weight_decay: found nan", "finite number"),
    job("clip_grad inf", {"clip_grad": float("inf")}, "megatron_job_clip_grad: found inf", "finite number"),
    job("adam_beta1 1", {"adam_beta1": 1.0}, "megatron_job_adam_beta1: found 1", "torch.optim.Adam requires 0 <= beta < 1"),
    job("adam_beta2 negative", {"adam_beta2": -0.5}, "megatron_job_adam_beta2: found -0.5", ">= 0 and < 1"),
    job("init_method_std 0", {"init_method_std": 0}, "megatron_job_init_method_std: found 0", "> 0"),
    job("log_interval 0", {"log_interval": 0}, "megatron_job_log_interval: found 0", "expected an integer >= 1",
        "megatron/training.py:1106"),
    job("eval_interval 0", {"eval_interval": 0}, "megatron_job_eval_interval: found 0", "expected an integer >= 1"),
    job("save_interval 0", {"save_interval": 0}, "megatron_job_save_interval: found 0", "0 saves nothing"),
    job("eval_iters negative", {"eval_iters": -1}, "megatron_job_eval_iters: found -1", "expected an integer >= 0"),
    job("warmup negative", {"lr_warmup_iters": -5}, "megatron_job_lr_warmup_iters: found -5", ">= 0"),
    job("num_workers negative", {"num_workers": -2}, "megatron_job_num_workers: found -2", ">= 0"),
    job("master_port 70000", {"master_port": 70000}, "megatron_job_master_port: found 70000",
        "from 1 to 65535: a TCP port number"),
    job("master_port 0", {"master_port": 0}, "megatron_job_master_port: found 0", "from 1 to 65535"),
    job("master_port not a number", {"master_port": "http"}, "megatron_job_master_port: found 'http', expected an integer"),
    job("micro batch 0", {"micro_batch_size": 0}, "megatron_job_micro_batch_size: found 0", ">= 1"),
    job("global batch 0", {"global_batch_size": 0}, "megatron_job_global_batch_size: found 0", ">= 1"),
    job("global batch not a multiple of micro x DP", {"global_batch_size": 500, "micro_batch_size": 3},
        "global batch size (500) is not divisible by micro batch size (3)"),
    job("train_iters 0", {"train_iters": 0}, "megatron_job_train_iters: found 0", ">= 1"),
    job("num_layers 1e10", {"num_layers": 1e10}, "megatron_job_num_layers: found 10000000000", "from 1 to 1024",
        "no real model comes near it"),
    job("hidden_size 1e10", {"hidden_size": "1e10"}, "megatron_job_hidden_size: found 10000000000", "from 1 to 131072"),
    job("seq_length 0", {"seq_length": 0}, "megatron_job_seq_length: found 0", "from 1 to 4194304"),
    job("seq length above max positions", {"seq_length": 4096}, "max_position_embeddings 2048, seq_length 4096",
        "Megatron asserts args.max_position_embeddings >= args.seq_length"),
    job("heads do not divide hidden", {"num_attention_heads": 48}, "found hidden 5120, 48 heads",
        "change --hidden-size or --num-attention-heads (megatron_job_hidden_size, megatron_job_num_attention_heads)"),
    job("TP does not divide heads", {"num_attention_heads": 36, "hidden_size": 5184}, "found 36 heads, TP 8",
        "pick TP (megatron_job_tensor_parallel) among the divisors of 36"),
    job("TP does not divide the world", {"tensor_parallel": 3}, "found world 64, TP 3 x PP 1 = 3",
        "among the divisors of 64 (megatron_job_tensor_parallel x megatron_job_pipeline_parallel)"),
    job("tensor_parallel 0", {"tensor_parallel": 0}, "megatron_job_tensor_parallel: found 0", ">= 1"),
    job("PP without the pipeline engine", {"pipeline_parallel": 2, "tensor_parallel": 4},
        "pipeline_model_parallel_size must be 1 if pipeline parallel is disabled"),
    job("gpus per node not a number", {"gpus_per_node": "eight"}, "megatron_job_gpus_per_node: found 'eight', expected an integer"),
    job("gpus per node a fraction", {"gpus_per_node": 1.5}, "megatron_job_gpus_per_node: found 1.5, expected an integer"),
    job("gpus per node 0", {"gpus_per_node": 0}, "megatron_job_gpus_per_node: found 0", "from 1 to 64"),
    job("gpus per node 100", {"gpus_per_node": 100}, "megatron_job_gpus_per_node: found 100", "the largest GPU servers hold 16"),
    job("ffn_hidden_size 0", {"ffn_hidden_size": 0}, "megatron_job_ffn_hidden_size: found 0", "from 1 to 524288"),
    job("vocab_size 0", {"vocab_size": 0}, "megatron_job_vocab_size: found 0", ">= 1"),
    job("ZeRO stage 4", {"zero_stage": 4}, "megatron_job_zero_stage: found 4, expected one of 0, 1, 2, 3"),
    job("precision fp8", {"precision": "fp8"}, "megatron_job_precision: found 'fp8', expected one of bf16, fp16, fp32"),
    job("launcher unknown", {"launcher": "mpi"}, "megatron_job_launcher: found 'mpi', expected one of pdsh, openmpi, slurm"),
    job("lr decay style misspelt", {"lr_decay_style": "cosin"}, "megatron_job_lr_decay_style: found 'cosin'", "cosine"),
    job("model preset unknown", {"model_preset": "bert"}, "megatron_job_model_preset: found 'bert', expected one of gpt, llama"),
    job("boolean neither", {"sequence_parallel": "maybe"}, "megatron_job_sequence_parallel: found 'maybe', expected true or false"),
    job("auto boolean neither", {"use_flash_attn": "sometimes"}, "megatron_job_use_flash_attn: found 'sometimes'",
        "expected true or false"),
    job("stack profile unknown", {"stack_profile": "cu999"}, "megatron_job_stack_profile", "cu999", "cu130"),
    job("tokenizer type unknown", {"tokenizer_type": "gpt2"}, "megatron_job_tokenizer_type: found 'gpt2'", "GPT2BPETokenizer"),
    # --- job spec: data, split and tokenizer files ---
    job("data path with a space", {"data_path": "/shared/my data/gpt_text_document"},
        "megatron_job_data_path: found '/shared/my data/gpt_text_document'", "a prefix cannot contain whitespace",
        "point a symlink without spaces"),
    job("data path empty", {"data_path": ""}, "megatron_job_data_path: found ''", "expected a dataset prefix"),
    job("data path odd weight-prefix list", {"data_path": "0.7 /d/a 0.3"}, "megatron_job_data_path: found '0.7 /d/a 0.3'",
        "an odd number of items"),
    job("data path weights not numbers", {"data_path": "a /d/x b /d/y"}, "megatron_job_data_path", "weights that are not numbers"),
    job("data path weight NaN", {"data_path": "nan /d/a 1 /d/b"}, "megatron_job_data_path", "weights that are not numbers"),
    # NEW: a negative weight passed while the others outweighed it.
    job("data path weight negative", {"data_path": "-0.5 /d/a 1.5 /d/b"}, "megatron_job_data_path: found '-0.5 /d/a 1.5 /d/b'",
        "weight -0.5 is negative", "give each dataset its share"),
    # NEW: upstream's assert weight_sum > 0.0, on every rank after the start.
    job("data path weights sum to 0", {"data_path": "0 /d/a 0 /d/b"}, "megatron_job_data_path", "the weights sum to 0"),
    job("data path list item with a space", {"data_path": ["/d/a b"]}, "megatron_job_data_path", "item '/d/a b'",
        "rename the dataset files"),
    # NEW: --split was passed as given and parsed by upstream only when it built the datasets.
    job("split not numbers", {"split": "train,valid,test"}, "megatron_job_split: found 'train,valid,test'",
        "'train' is not one", "969,30,1"),
    # A fourth share is dropped by upstream without a word: a legal job, which rules_startup warns
    # about (tests/unit/plugins/module_utils/_job/test_rules_static.py "split four parts").
    job("split all zero", {"split": "0,0,0"}, "megatron_job_split: found '0,0,0'", "sum is above 0"),
    job("split negative share", {"split": "-1,2,3"}, "megatron_job_split: found '-1,2,3'", "'-1' is not one"),
    job("split empty share", {"split": "969,,1"}, "megatron_job_split: found '969,,1'", "'' is not one"),
    # The tokenizer's files: GPT-2 BPE was judged; the others (NEW) failed on every rank after the start.
    job("vocab path missing (GPT-2 BPE)", {"vocab_file": None}, "megatron_job_vocab_file=None",
        "set megatron_job_vocab_file to the path on the nodes"),
    job("merge path missing (GPT-2 BPE)", {"merge_file": ""}, "megatron_job_merge_file=None",
        "set megatron_job_merge_file"),
    job("vocab path missing (BERT word piece)", {"tokenizer_type": "BertWordPieceCase", "vocab_file": None},
        "BertWordPieceCase files given", "without --vocab-file", "give --vocab-file (megatron_job_vocab_file)"),
    # The SentencePiece and HF types exist at the head era only (cu117's before_rebase refuses the type).
    job("tokenizer model missing (SentencePiece)", {"tokenizer_type": "SentencePieceTokenizer", "stack_profile": "cu121"},
        "SentencePieceTokenizer files given", "without --tokenizer-model", "megatron_job_tokenizer_model"),
    job("tokenizer model missing (HF)", {"tokenizer_type": "HFTokenizer", "tokenizer_model": "null", "stack_profile": "cu121"},
        "HFTokenizer files given", "megatron_job_tokenizer_model"),
    job("NullTokenizer without vocab size", {"tokenizer_type": "NullTokenizer"}, "NullTokenizer asserts args.vocab_size",
        "--vocab-size"),
    # --- job spec: names, paths and pass-through ---
    job("megatron_dir with a space", {"megatron_dir": "/opt/Megatron DeepSpeed"},
        "megatron_job_megatron_dir: found '/opt/Megatron DeepSpeed', expected a path without spaces", "point a symlink"),
    job("venv with a space", {"venv": "/opt/my venv"}, "megatron_job_venv: found '/opt/my venv'", "without spaces"),
    job("cuda_home with a space", {"cuda_home": "/usr/local/cuda 12"}, "megatron_job_cuda_home: found '/usr/local/cuda 12'"),
    job("misspelt job variable", {"megatron_job_micro_batch": 4}, "megatron_job_micro_batch: 4",
        "did you mean megatron_job_micro_batch_size?"),
    job("extra arg misspelt", {"extra_args": ["--lr-decay-styel", "cosine"]}, "--lr-decay-styel", "--lr-decay-style"),
    job("extra arg that the spec owns", {"extra_args": ["--micro-batch-size", "4"]}, "--micro-batch-size 4",
        "set megatron_job_micro_batch_size instead"),
    job("extra args not a list", {"extra_args": {"lr": 1}}, "megatron_job_extra_args: found {'lr': 1}", "expected a list"),
    job("env not a mapping", {"env": "FOO=1"}, "megatron_job_env: found 'FOO=1', expected a mapping"),
    # NEW: a dotted number that is no IPv4 address timed out every rank's rendezvous.
    job("master address not an IPv4 address", {"master_addr": "10.0.0.300"}, "megatron_job_master_addr: found '10.0.0.300'",
        "IPv4 address of four numbers 0-255", "head node's address"),
    job("master address three numbers", {"master_addr": "10.0.0"}, "megatron_job_master_addr: found '10.0.0'"),
]

# --- job spec: hostile characters, per variable and hop (_job.hops) ---
for _char, _shown in HOSTILE.items():
    ROWS += [
        job("job name %r" % _char, {"name": "run" + _char},
            # Unquoted, the name reaches a pdsh word through the default workdir; a newline ends train.sh's comment.
            "megatron_job_", "holds %s" % _shown, "megatron_job_name"),
        job("workdir %r" % _char, {"workdir": "/jobs/" + _char}, "megatron_job_workdir = ", "holds %s" % _shown,
            "write megatron_job_workdir without"),
        job("vocab path %r" % _char, {"vocab_file": "/v/" + _char}, "megatron_job_vocab_file = ", "holds %s" % _shown),
        job("master address %r" % _char, {"master_addr": "h" + _char}, "megatron_job_master_addr = ", "holds %s" % _shown,
            "launch with megatron_job_launcher: openmpi"),
        job("nccl_env value %r" % _char, {"nccl_env": {"NCCL_DEBUG": "INFO" + _char}}, "nccl_env.NCCL_DEBUG = ",
            "holds"),
        job("checkpoint dir %r" % _char, {"checkpoint_dir": "/ck/" + _char}, "megatron_job_checkpoint_dir = ", "holds %s" % _shown),
        job("extra arg %r" % _char, {"extra_args": ["--data-cache-path", "/c/" + _char]}, "megatron_job_extra_args = ",
            "holds %s" % _shown),
    ]
    if _char != "a\nb":  # a newline splits the data path into two prefixes: refused as such below
        ROWS.append(job("data path %r" % _char, {"data_path": "/d/" + _char}, "megatron_job_data_path = ",
                        "holds %s" % _shown))
    # --split is judged by its syntax first (NEW): every hostile character is no number.
    ROWS.append(job("split %r" % _char, {"split": "969,30," + _char}, "megatron_job_split: found ",
                    "is not one" if _char != "a\nb" else "'a\\nb' is not one"))
ROWS += [
    job("data path with a newline", {"data_path": "/d/a\n/d/b"}, "megatron_job_data_path", "weights that are not numbers"),
    job("tokenizer model $(id)", {"tokenizer_type": "SentencePieceTokenizer", "tokenizer_model": "/t/$(id)"},
        "megatron_job_tokenizer_model = '/t/$(id)' holds '$'"),
    job("merge file backtick", {"merge_file": "/m/`id`"}, "megatron_job_merge_file = '/m/`id`' holds '`'"),
    job("tensorboard dir newline", {"tensorboard_dir": "/tb/a\nb"}, "megatron_job_tensorboard_dir = '/tb/a\\nb' holds '\\n'"),
    job("log file control character", {"log_file": "/l/\x1b[2Jx.log"}, "megatron_job_log_file", "holds '\\x1b'"),
    job("env value backtick", {"env": {"FOO": "`id`"}}, "megatron_job_env.FOO = '`id`' holds '`'"),
    job("megatron_dir $(id)", {"megatron_dir": "/opt/$(id)"}, "megatron_job_megatron_dir = '/opt/$(id)' holds '$'"),
    job("venv semicolon", {"venv": "/opt/v;id"}, "megatron_job_venv = '/opt/v;id' holds ';'"),
    job("nccl_env semicolon on DeepSpeed 0.9.2", {"stack_profile": "cu117", "nccl_env": {"NCCL_SOCKET_IFNAME": "eth0;touch x"}},
        "nccl_env.NCCL_SOCKET_IFNAME = 'eth0;touch x' holds ';'"),

    # --- inventory: addresses ---
    nodes("duplicate ansible_host", {"node1": {"ansible_host": "192.0.2.1"}, "node2": {"ansible_host": "192.0.2.1"}},
          "192.0.2.1 is the address of node1 (ansible_host) and node2 (ansible_host)"),
    nodes("duplicate node name as an address", {"192.0.2.2": {}, "node1": {"ansible_host": "192.0.2.2"}},
          "192.0.2.2 is the address of 192.0.2.2 (inventory name) and node1 (ansible_host)"),
    nodes("duplicate megatron_job_node_address", {
        "node1": {"ansible_host": "192.0.2.1", "megatron_job_node_address": "gpu1"},
        "node2": {"ansible_host": "192.0.2.2", "megatron_job_node_address": "gpu1"}},
        "gpu1 is the address of node1 (megatron_job_node_address) and node2 (megatron_job_node_address)"),
    nodes("duplicate os_base_cluster_address", {
        "node1": {"ansible_host": "192.0.2.1", "os_base_cluster_address": "10.9.0.1"},
        "node2": {"ansible_host": "192.0.2.2", "os_base_cluster_address": "10.9.0.1"}},
        "10.9.0.1 is the address of node1 (os_base_cluster_address) and node2 (os_base_cluster_address)"),
    # NEW: addresses that are no address were accepted until ssh or the hostfile met them.
    node("ansible_host octet above 255", {"ansible_host": "192.168.1.300"},
         "node1: ansible_host is '192.168.1.300', which is no IPv4 address"),
    node("ansible_host three numbers", {"ansible_host": "10.0.0"}, "node1: ansible_host is '10.0.0', which is no IPv4 address"),
    node("ansible_host five numbers", {"ansible_host": "1.2.3.4.5"}, "ansible_host is '1.2.3.4.5'"),
    node("ansible_host an ssh option", {"ansible_host": "-oProxyCommand=touch x"},
         "ansible_host is '-oProxyCommand=touch x', which holds '-'"),
    node("ansible_host with a space", {"ansible_host": "gpu 1"}, "ansible_host is 'gpu 1', which holds ' '"),
    node("ansible_host $(id)", {"ansible_host": "$(id)"}, "ansible_host is '$(id)', which holds '$'"),
    node("megatron_job_node_address octet above 255", {"megatron_job_node_address": "10.0.0.256"},
         "megatron_job_node_address is '10.0.0.256', which is no IPv4 address"),
    node("os_base_cluster_address three numbers", {"os_base_cluster_address": "10.1.0"},
         "os_base_cluster_address is '10.1.0', which is no IPv4 address"),
    node("os_base_cluster_address IPv6", {"os_base_cluster_address": "fd00::1"},
         "os_base_cluster_address is 'fd00::1', which holds ':'"),
    # --- inventory: ports (NEW: only the type was checked, by each role on the node) ---
    node("port above 65535", {"monitoring_prometheus_port": 70000},
         "monitoring_prometheus_port is 70000, expected a TCP port from 1 to 65535"),
    node("port 0", {"slurm_slurmctld_port": 0}, "slurm_slurmctld_port is 0, expected a TCP port"),
    node("port negative", {"supervisor_listen_port": "-1"}, "supervisor_listen_port is '-1'"),
    node("ansible_port not a number", {"ansible_port": "ssh"}, "ansible_port is 'ssh', expected a whole number"),
    # --- inventory: names of variables ---
    node("misspelt job variable in the inventory", {"megatron_job_micro_batch": 4}, "megatron_job_micro_batch (did you mean megatron_job_micro_batch_size?)"),
    node("misspelt cluster setting", {"preflight_clok": "advisory"}, "preflight_clok (did you mean preflight_clock?)"),
    node("misspelt role variable", {"monitoring_prometheus_prot": 9090},
         "monitoring_prometheus_prot (did you mean monitoring_prometheus_port?)"),
    # --- inventory: install paths ---
    node("install path with a space", {"python_env_path": "/opt/my venv"}, "python_env_path is '/opt/my venv'"),
    node("install path with a newline", {"megatron_job_cuda_home": "/usr/local/cuda\nx"},
         "megatron_job_cuda_home is '/usr/local/cuda\\nx'"),
    node("install path with a tab", {"os_base_cuda_home": "/usr/local/\tcuda"}, "os_base_cuda_home is '/usr/local/\\tcuda'"),
    # NEW: control characters that are not whitespace.
    node("install path with ESC", {"python_env_megatron_dir": "/opt/m\x1b[2J"}, "python_env_megatron_dir is '/opt/m\\x1b[2J'"),
    node("install path with NUL", {"megatron_launch_venv": "/opt/v\x00x"}, "megatron_launch_venv is '/opt/v\\x00x'"),
    # --- inventory: values that reach a shell (nccl_env, node names) ---
    node("nccl_env $(id)", {"nccl_env": {"NCCL_DEBUG": "$(id)"}}, "nccl_env.NCCL_DEBUG = '$(id)' holds '$'"),
    node("nccl_env backtick", {"nccl_env": {"NCCL_DEBUG": "`id`"}}, "nccl_env.NCCL_DEBUG = '`id`' holds '`'"),
    node("nccl_env newline", {"nccl_env": {"NCCL_DEBUG": "INFO\nid"}}, "nccl_env.NCCL_DEBUG = 'INFO\\nid' holds '\\n'"),
    node("nccl_env double quote", {"nccl_env": {"NCCL_DEBUG": 'a"b'}}, "nccl_env.NCCL_DEBUG = 'a\"b' holds '\"'"),
    node("inventory nccl_env semicolon on DeepSpeed 0.9.2",
         {"megatron_stack_profile": "cu117", "nccl_env": {"NCCL_SOCKET_IFNAME": "eth0;touch x"}},
         "nccl_env.NCCL_SOCKET_IFNAME = 'eth0;touch x' holds ';'"),
    nodes("node name with a space", {"gpu 1": {"ansible_host": "192.0.2.1"}}, "node gpu 1:", "holds ' '",
          "set megatron_job_node_address for gpu 1"),
    nodes("node name an ssh option", {"-oProxyCommand=x": {"ansible_host": "192.0.2.1"}}, "'-oProxyCommand=x' holds '-'"),
    nodes("node name with a newline", {"gpu1\nid": {"ansible_host": "192.0.2.1"}}, "'gpu1\\nid' holds '\\n'"),
    nodes("node name $(id)", {"gpu$(id)": {"ansible_host": "192.0.2.1"}}, "'gpu$(id)' holds '$'"),
    nodes("node name semicolon", {"gpu1;id": {"ansible_host": "192.0.2.1"}}, "'gpu1;id' holds ';'"),
    nodes("node name quote", {"gpu1'": {"ansible_host": "192.0.2.1"}}, "\"gpu1'\" holds \"'\""),
    node("node address backtick", {"megatron_job_node_address": "g`id`"}, "'g`id`' holds '`'"),
    # NEW: Ansible warned and kept the last of two equal keys, dropping the first entry's variables.
    Row("node listed twice in hosts.yml", "inventory_file",
        "all:\n  children:\n    megatron_nodes:\n      hosts:\n        node1: {ansible_host: 192.0.2.1}\n"
        "        node2: {ansible_host: 192.0.2.2}\n        node1: {ansible_host: 192.0.2.3}\n",
        ["hosts.yml:7: 'node1' given twice"]),
    Row("variable set twice in hosts.yml", "inventory_file",
        "all:\n  vars:\n    megatron_job_lr: 1.0e-4\n    megatron_job_lr: 3.0e-4\n", ["hosts.yml:4: 'megatron_job_lr' given twice"]),
]


def test_the_default_job_passes():
    """The baseline the job rows change one thing of: validate.yml accepts it as it stands."""
    assert validate({}) is None


@pytest.mark.parametrize("row", ROWS, ids=[row.name for row in ROWS])
def test_bad_input_is_refused_at_the_gate(row: Row):
    message = GATES[row.gate](row.given)
    assert message is not None, "accepted: %r" % (row.given,)
    for word in row.words:
        assert word in message, message


def test_the_table_covers_the_issues_83_classes():
    """Issue 39 tried 83 bad inputs; the table holds at least that many distinct classes (the
    playbook rows below come on top)."""
    names = [row.name for row in ROWS]
    assert len(set(names)) == len(names)
    assert len(names) + len(PLAYBOOK_ROWS) >= 83


def test_the_gate_runs_before_provisioning():
    """Both gates come first in site.yml: a refusal there is a refusal before any host changes."""
    plays = [list(play.values())[-1] for play in yaml.safe_load((REPO / "playbooks" / "site.yml").read_text())
             if "ansible.builtin.import_playbook" in play]
    assert plays.index("inventory_check.yml") < plays.index("validate.yml") < plays.index("provision.yml"), plays


# ---------------------------------------------------------------------------------------
# Through the playbooks: the checks that live in inventory_check.yml's Jinja
# ---------------------------------------------------------------------------------------

def _hosts(nodes_: Dict[str, Dict[str, Any]], head: Optional[List[str]] = None, group_vars: Optional[Dict[str, Any]] = None) -> str:
    # ssh to unroutable test addresses: the localhost play must stop first, or the run is unreachable.
    all_vars = {"ansible_connection": "ssh", "ansible_python_interpreter": sys.executable}
    all_vars.update(group_vars or {})
    return yaml.safe_dump({"all": {"vars": all_vars, "children": {
        "megatron_head": {"hosts": {name: {} for name in (head or ["node1"])}},
        "megatron_nodes": {"hosts": nodes_},
    }}})


TWO = {"node1": {"ansible_host": "192.0.2.1"}, "node2": {"ansible_host": "192.0.2.2"}}
PLAYBOOK_ROWS = [
    ("hosts.yml YAML syntax error",
     "all:\n  children:\n    megatron_nodes:\n      hosts:\n        node1: {ansible_host: 192.0.2.1\n        node2:\n",
     ["hosts.yml", "YAML parsing failed"]),
    # NEW: Ansible warned and kept the second node1, dropping the first one's variables.
    ("node listed twice in hosts.yml (playbook)",
     "all:\n  children:\n    megatron_nodes:\n      hosts:\n        node1: {ansible_host: 192.0.2.1}\n"
     "        node1: {ansible_host: 192.0.2.2}\n",
     ["hosts.yml:6: 'node1' given twice", "Ansible would keep only the last one"]),
    ("head node outside megatron_nodes", _hosts(TWO, head=["node9"]),
     ["megatron_head holds node9, which is not in megatron_nodes (node1, node2)"]),
    ("empty megatron_nodes", yaml.safe_dump({"all": {"children": {"megatron_nodes": {"hosts": {}}}}}),
     ["The inventory has no hosts in group 'megatron_nodes'"]),
    ("unknown stack profile", _hosts(TWO, group_vars={"megatron_stack_profile": "cu999"}),
     ["megatron_stack_profile is 'cu999', expected one of"]),
    ("nodes disagree on the profile", _hosts({"node1": {"ansible_host": "192.0.2.1", "megatron_stack_profile": "cpu"},
                                              "node2": {"ansible_host": "192.0.2.2", "megatron_stack_profile": "cu130"}}),
     ["Nodes disagree on megatron_stack_profile"]),
    ("unknown scheduler", _hosts(TWO, group_vars={"megatron_scheduler": "pbs"}),
     ["value of megatron_scheduler must be one of: none, slurm, got: pbs"]),
    ("typo switch neither fail nor warn", _hosts(TWO, group_vars={"megatron_unknown_variables": "fial"}),
     ["megatron_unknown_variables", "fial"]),
    ("bad address through the playbook", _hosts({"node1": {"ansible_host": "192.0.2.1"}, "node2": {"ansible_host": "192.0.2.300"}}),
     ["Node node2: ansible_host is '192.0.2.300', which is no IPv4 address"]),
    ("bad port through the playbook", _hosts(TWO, group_vars={"monitoring_prometheus_port": 70000}),
     ["monitoring_prometheus_port is 70000, expected a TCP port from 1 to 65535"]),
]


def _playbook(tmp_path: pathlib.Path, playbook: str, inventory_text: str, *extra: str) -> subprocess.CompletedProcess:
    binary = tools.require("ansible-playbook")
    (tmp_path / "hosts.yml").write_text(inventory_text)
    env = tools.environ(ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1",
                        ANSIBLE_CACHE_PLUGIN="memory", COLUMNS="400")
    return subprocess.run([binary, "-i", str(tmp_path / "hosts.yml"), str(REPO / "playbooks" / playbook)] + list(extra),
                          capture_output=True, text=True, env=env, cwd=str(REPO), timeout=300, check=False)


@pytest.mark.parametrize(("inventory_text", "words"), [row[1:] for row in PLAYBOOK_ROWS], ids=[row[0] for row in PLAYBOOK_ROWS])
def test_inventory_check_stops_before_any_node(tmp_path: pathlib.Path, inventory_text: str, words: List[str]) -> None:
    result = _playbook(tmp_path, "inventory_check.yml", inventory_text)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "UNREACHABLE" not in output and "Gathering Facts" not in output, output
    for word in words:
        assert word in " ".join(output.split()), output


# ---------------------------------------------------------------------------------------
# plan.yml answers any input at once (issue 39: it ran for over 5 minutes on num_layers: 1e10)
# ---------------------------------------------------------------------------------------

def _timed(func: Callable[[], Any]) -> tuple:
    started = time.monotonic()
    try:
        func()
    except Exception as exc:  # the refusal is the answer being timed  # pylint: disable=broad-except
        return exc, time.monotonic() - started
    return None, time.monotonic() - started


@pytest.mark.parametrize(("given", "nodes_", "words"), [
    ({"num_layers": 1e10}, 2, "megatron_job_num_layers: found 10000000000, expected an integer from 1 to 1024"),
    ({"num_layers": 720, "num_attention_heads": 64, "hidden_size": 8192, "global_batch_size": 184320}, 720,
     "candidates, more than the 2000 judged"),
], ids=["num_layers 1e10", "search too large"])
def test_the_planner_answers_at_once(given, nodes_, words, capsys):
    def run() -> Any:
        return _job_plan.plan(_job_spec.normalize(given), nodes_, 8, gpu="H100")
    error, seconds = _timed(run)
    assert isinstance(error, _job_spec.JobError) and words in str(error), error
    with capsys.disabled():
        print("\nplanner function, %s: refused in %.3f s" % (", ".join("%s=%s" % kv for kv in given.items()), seconds))


def test_plan_job_action_answers_num_layers_1e10_at_once(capsys):
    task_vars = {"groups": {"all": NODES[:2], "megatron_nodes": NODES[:2]}, "megatron_gpu_model": "H100",
                 "megatron_job_num_layers": 1e10}
    error, seconds = _timed(lambda: make_action(PlanAction, {"gpus_per_node": 8}).run(task_vars=task_vars))
    assert isinstance(error, AnsibleActionFail) and "megatron_job_num_layers: found 10000000000" in str(error), error
    with capsys.disabled():
        print("\nplan_job action, num_layers=1e10: refused in %.3f s" % seconds)


def test_plan_playbook_answers_num_layers_1e10_at_once(tmp_path: pathlib.Path, capsys) -> None:
    inventory_text = _hosts(TWO, group_vars={"megatron_gpu_model": "H100", "megatron_job_num_layers": 1e10})
    started = time.monotonic()
    result = _playbook(tmp_path, "plan.yml", inventory_text, "-e", "plan_dest=%s" % (tmp_path / "plan.yml"))
    seconds = time.monotonic() - started
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "megatron_job_num_layers: found 10000000000, expected an integer from 1 to 1024" in output, output
    assert not (tmp_path / "plan.yml").exists()
    with capsys.disabled():
        print("\nplan.yml (ansible-playbook, 2 nodes), num_layers=1e10: refused in %.1f s" % seconds)
