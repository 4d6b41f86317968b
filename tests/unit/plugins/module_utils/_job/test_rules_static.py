# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The batch ramp-up and interval rules of _job.rules: each refused case with upstream's cite,
each beside a legal neighbour. The default spec: global batch 512, micro 1, DP 8 (micro x DP 8)."""
from __future__ import annotations

import shlex
from typing import Any, Dict, List

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import args as _job_args
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import inputs as _job_inputs
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import rules as _job_rules
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import schema as _job_schema
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import script as _job_script
from ansible_collections.megatron_ds.cluster.plugins.module_utils._job import spec as _job_spec
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import args as _mds_args
from ansible_collections.megatron_ds.cluster.tests.support.findings import expect

CLUSTER = {"nodes": 8, "gpus_per_node": 8, "gpu_memory_mib": 81920}
HEAD_DS = "0.19.6"
OLD_DS = "0.9.2"


def samples(*rampup: str) -> Dict[str, Any]:
    """A job with a ramp-up. Upstream takes one only with sample-based training (arguments.py:247 at
    4efb479d, its own rule, "no batch-size ramp-up by iterations"); these cases judge the ramp-up's
    own checks, which the spec's iteration count does not change."""
    return {"extra_args": ["--rampup-batch-size"] + list(rampup)}


CASES = [
    ("legal ramp-up", samples("32", "32", "10000"), HEAD_DS, "ramp-up batches divisible by micro x DP", "pass", ""),
    ("no ramp-up: no finding", {}, HEAD_DS, "--rampup-batch-size accepted", None, ""),
    ("two values", samples("32", "32"), HEAD_DS, "--rampup-batch-size accepted", "fail", "microbatches.py:21"),
    ("start 0", samples("0", "32", "10000"), HEAD_DS, "--rampup-batch-size accepted", "fail", "microbatches.py:104"),
    ("start above global", samples("1024", "32", "10000"), HEAD_DS, "--rampup-batch-size accepted", "fail",
     "microbatches.py:110"),
    ("increment 0", samples("32", "0", "10000"), HEAD_DS, "--rampup-batch-size accepted", "fail", "microbatches.py:111"),
    ("interval not a multiple", samples("32", "64", "10000"), HEAD_DS, "--rampup-batch-size accepted", "fail",
     "expected global batch size interval (480) to be divisible by global batch size increment (64)"),
    ("before_rebase line", samples("32", "64", "10000"), OLD_DS, "--rampup-batch-size accepted", "fail",
     "microbatches.py:126 at 9446eaac"),
    ("negative samples", samples("32", "32", "-1"), HEAD_DS, "--rampup-batch-size accepted", "fail", "microbatches.py:119"),
    ("start equals global", samples("512", "32", "10000"), HEAD_DS, "--rampup-batch-size accepted", "fail",
     "microbatches.py:120"),
    ("start not a multiple of micro x DP", samples("4", "4", "10000"), HEAD_DS,
     "ramp-up start batch divisible by micro x DP", "fail", "microbatches.py:137"),
    ("increment not a multiple of micro x DP", samples("16", "4", "10000"), HEAD_DS,
     "ramp-up increment divisible by micro x DP", "warn", "stops the job when the run reaches it"),
    # A spec's intervals are bounded by the schema (test_spec_intervals_stop_at_the_schema); a
    # train.sh's reach the rule.
    ("eval interval 0", {"script": ["--eval-interval", "0"]}, HEAD_DS, "--eval-interval > 0", "fail", "training.py:1558"),
    ("eval interval 1", {"script": ["--eval-interval", "1"]}, HEAD_DS, "--eval-interval > 0", None, ""),
    ("log interval 0", {"script": ["--log-interval", "0"]}, HEAD_DS, "--log-interval > 0", "fail", "--log-interval"),
    ("log interval 0 before_rebase", {"script": ["--log-interval", "0"]}, OLD_DS, "--log-interval > 0", "fail",
     "training.py:901"),
    ("save interval 0 is legal", {"extra_args": ["--save-interval", "0"]}, HEAD_DS, "--save-interval > 0", None, ""),
]


def _script_findings(flags: List[str], version: str) -> List[Dict[str, str]]:
    """The findings for a train.sh that passes the default job's arguments, then ``flags``
    (argparse keeps the last occurrence)."""
    era = _mds_args.era_for_deepspeed(version)
    args, _dropped = _job_inputs.judged_arguments(_job_spec.normalize({}), version)
    text = " ".join(shlex.quote(word) for word in ["deepspeed", "--num_gpus", "8", "pretrain_gpt.py"] + args + flags)
    parsed = _job_script.parse_train_script(text, era=era)
    return _job_rules.validate(parsed["spec"], None, dict(CLUSTER), None, version, script=parsed)


@pytest.mark.parametrize("key", ["eval_interval", "log_interval", "save_interval"])
def test_spec_intervals_stop_at_the_schema(key: str) -> None:
    """A spec's interval of 0 is refused when the spec is read, naming the variable."""
    with pytest.raises(_job_schema.JobError, match="megatron_job_%s: found 0" % key):
        _job_spec.normalize({key: 0})


@pytest.mark.parametrize("over,version,check,status,words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_static_rule(over, version, check, status, words):
    if "script" in over:
        findings = _script_findings(over["script"], version)
    else:
        findings = _job_rules.validate(_job_spec.normalize(over), None, dict(CLUSTER), None, version)
    expect(findings, check, status, words)


def data(*words: str) -> Dict[str, Any]:
    """A train.sh whose --data-path is ``words`` (a spec's data_path is judged by the schema first)."""
    return {"script": ["--data-path"] + list(words)}


# The data and tokenizer rules (_job.rules_data), each refused case beside a legal neighbour.
DATA_CASES = [
    ("one prefix", data("/d/a_text_document"), HEAD_DS, "--data-path blend", None, ""),
    ("two pairs", data("0.7", "/d/a", "0.3", "/d/b"), HEAD_DS, "--data-path blend", "pass", ""),
    ("odd number of words", data("0.7", "/d/a", "0.3"), HEAD_DS, "--data-path blend", "fail",
     "dataset_utils.py:49 at 4efb479d"),
    # '/d/my data' unquoted in train.sh: two words, the second read as a weight
    ("prefix with a space", data("/d/my", "data"), HEAD_DS, "--data-path blend", "fail",
     "float(data_prefix[2*i]) raises ValueError on '/d/my'"),
    ("weight not a number", data("0.7", "/d/a", "heavy", "/d/b"), HEAD_DS, "--data-path blend", "fail",
     "dataset_utils.py:54"),
    ("weights sum to 0", data("0", "/d/a", "0", "/d/b"), OLD_DS, "--data-path blend", "fail",
     "dataset_utils.py:60 at 9446eaac"),
    ("255 datasets", data(*[w for i in range(255) for w in ("1", "/d/p%d" % i)]), HEAD_DS, "--data-path blend",
     "fail", "blendable_dataset.py:37"),
    ("254 datasets", data(*[w for i in range(254) for w in ("1", "/d/p%d" % i)]), HEAD_DS, "--data-path blend",
     "pass", ""),
    ("default split", {}, HEAD_DS, "--split accepted", "pass", ""),
    ("split not a number", {"script": ["--split", "969,3O,1"]}, HEAD_DS, "--split accepted", "fail", "dataset_utils.py:622"),
    ("split empty part", {"script": ["--split", "969,,1"]}, OLD_DS, "--split accepted", "fail", "dataset_utils.py:611"),
    ("split all zero", {"script": ["--split", "0,0,0"]}, HEAD_DS, "--split accepted", "fail", "splits_sum > 0.0"),
    ("split slash", {"script": ["--split", "98/2"]}, HEAD_DS, "--split accepted", "pass", ""),
    ("split one number", {"script": ["--split", "100"]}, HEAD_DS, "--split accepted", "pass", ""),
    ("split four parts", {"script": ["--split", "90,5,4,1"]}, HEAD_DS, "--split accepted", "warn", "dataset_utils.py:629"),
    ("split negative part", {"script": ["--split", "100,-1,1"]}, HEAD_DS, "--split accepted", "warn", "negative"),
    ("split zero train, positive valid", {"script": ["--split", "0,1,0"]}, HEAD_DS, "--split accepted", "pass", ""),
    ("SentencePiece without a model", {"script": ["--tokenizer-type", "SentencePieceTokenizer"]}, HEAD_DS,
     "SentencePieceTokenizer files given", "fail", "tokenizer.py:34 at 4efb479d"),
    ("HF tokenizer with a model", {"script": ["--tokenizer-type", "HFTokenizer", "--tokenizer-model", "/m"]}, HEAD_DS,
     "HFTokenizer files given", "pass", ""),
    ("HF tokenizer without a model", {"script": ["--tokenizer-type", "HFTokenizer"]}, HEAD_DS,
     "HFTokenizer files given", "fail", "args.tokenizer_model is not None"),
    ("GPT SentencePiece without a model", {"script": ["--tokenizer-type", "GPTSentencePieceTokenizer"]}, HEAD_DS,
     "GPTSentencePieceTokenizer files given", "fail", "tokenizer.py:37"),
    ("GPT-2 BPE: judged by rules.py, only when a file is missing", {}, HEAD_DS, "GPT2BPETokenizer files given", None, ""),
    ("vocab padding 0", {"script": ["--make-vocab-size-divisible-by", "0"]}, HEAD_DS,
     "--make-vocab-size-divisible-by > 0", "fail", "tokenizer.py:65 at 4efb479d"),
    ("vocab padding 0 before_rebase", {"script": ["--make-vocab-size-divisible-by", "0"]}, OLD_DS,
     "--make-vocab-size-divisible-by > 0", "fail", "tokenizer.py:62 at 9446eaac"),
    ("vocab padding 64", {"extra_args": ["--make-vocab-size-divisible-by", "64"]}, HEAD_DS,
     "--make-vocab-size-divisible-by > 0", None, ""),
    # the learning-rate scheduler (optimizer_param_scheduler.py; learning_rates.py before the rebase)
    ("warmup below decay", {}, HEAD_DS, "learning-rate warmup shorter than its decay", "pass", ""),
    ("warmup as long as training", {"train_iters": 2000, "lr_warmup_iters": 2000}, HEAD_DS,
     "learning-rate warmup shorter than its decay", "fail", "optimizer_param_scheduler.py:30 at 4efb479d"),
    ("warmup past the decay iterations",
     {"train_iters": 5000, "lr_warmup_iters": 2000, "extra_args": ["--lr-decay-iters", "1000"]},
     OLD_DS, "learning-rate warmup shorter than its decay", "fail", "learning_rates.py:42 at 9446eaac"),
    ("warmup one short of training", {"train_iters": 2001, "lr_warmup_iters": 2000}, HEAD_DS,
     "learning-rate warmup shorter than its decay", "pass", ""),
    ("warmup fraction 1", {"script": ["--lr-warmup-iters", "0", "--lr-warmup-fraction", "1.0"]}, HEAD_DS,
     "learning-rate warmup shorter than its decay", "fail", "lr_warmup_steps < lr_decay_steps"),
    ("decay iterations 0", {"script": ["--lr-decay-iters", "0"]}, HEAD_DS, "learning-rate decay > 0", "fail",
     "optimizer_param_scheduler.py:29"),
    ("weight decay negative", {"script": ["--weight-decay", "-0.1"]}, HEAD_DS, "weight decay >= 0", "fail",
     "optimizer_param_scheduler.py:40"),
    ("weight decay falling", {"script": ["--weight-decay-incr-style", "linear", "--start-weight-decay", "0.1",
                                         "--end-weight-decay", "0.01"]}, HEAD_DS,
     "weight decay ramp does not fall", "fail", "optimizer_param_scheduler.py:41"),
    ("weight decay rising", {"script": ["--weight-decay-incr-style", "linear", "--start-weight-decay", "0.01",
                                        "--end-weight-decay", "0.1"]}, HEAD_DS, "weight decay ramp does not fall", None, ""),
    # single-condition refusals of the set-up (rules_startup.REFUSALS)
    ("checkpoint args without --load", {"load": False, "extra_args": ["--use-checkpoint-args"]}, HEAD_DS,
     "--use-checkpoint-args needs --load", "fail", "initialize.py:56 at 4efb479d"),
    ("checkpoint args with --load", {"script": ["--use-checkpoint-args", "--load", "/ckpt"]}, HEAD_DS,
     "--use-checkpoint-args needs --load", None, ""),
    ("seed 0", {"script": ["--seed", "0"]}, HEAD_DS, "--seed > 0", "fail", "initialize.py:297"),
    ("seed 0 before_rebase", {"script": ["--seed", "0"]}, OLD_DS, "--seed > 0", "fail", "initialize.py:264 at 9446eaac"),
    ("seed 1", {"script": ["--seed", "1"]}, HEAD_DS, "--seed > 0", None, ""),
    ("cpu optimizer with sgd", {"script": ["--cpu-optimizer", "--optimizer", "sgd"]}, HEAD_DS,
     "--cpu-optimizer needs Adam", "fail", "'CPU offloading is for Adam'"),
    ("cpu optimizer with adam", {"script": ["--cpu-optimizer"]}, HEAD_DS, "--cpu-optimizer needs Adam", None, ""),
    # an unknown choice stops argparse before the raise that names it (the census marks those rows)
    ("unknown tokenizer type", {"script": ["--tokenizer-type", "WordTokenizer"]}, HEAD_DS, "--tokenizer-type value",
     "fail", "argparse"),
    ("unknown tokenizer type before_rebase", {"script": ["--tokenizer-type", "SentencePieceTokenizer"]}, OLD_DS,
     "--tokenizer-type value", "fail", "argparse"),
    ("unknown optimizer", {"script": ["--optimizer", "lamb"]}, HEAD_DS, "--optimizer value", "fail", "argparse"),
    ("unknown DDP implementation", {"script": ["--DDP-impl", "fsdp"]}, OLD_DS, "--DDP-impl value", "fail", "argparse"),
    ("unknown dataloader type", {"script": ["--dataloader-type", "random"]}, HEAD_DS, "--dataloader-type value",
     "fail", "argparse"),
    ("no weight-decay schedule before the rebase", {"script": ["--weight-decay", "-0.1"]}, OLD_DS,
     "weight decay >= 0", None, ""),
    ("negative min lr", {"script": ["--min-lr", "-0.1"]}, HEAD_DS, "--min-lr >= 0", "fail",
     "optimizer_param_scheduler.py:23 at 4efb479d"),
    ("negative min lr before_rebase", {"script": ["--min-lr", "-0.1"]}, OLD_DS, "--min-lr >= 0", "fail",
     "learning_rates.py:35 at 9446eaac"),
    ("min lr 0", {"script": ["--min-lr", "0"]}, HEAD_DS, "--min-lr >= 0", None, ""),
    ("override and use-checkpoint scheduler", {"script": ["--override-opt_param-scheduler",
                                                          "--use-checkpoint-opt_param-scheduler"]}, HEAD_DS,
     "one scheduler source", "fail", "optimizer_param_scheduler.py:48"),
    ("override and use-checkpoint before_rebase", {"script": ["--override-lr-scheduler",
                                                              "--use-checkpoint-lr-scheduler"]}, OLD_DS,
     "one scheduler source", "fail", "learning_rates.py:53 at 9446eaac"),
    ("override the scheduler alone", {"script": ["--override-opt_param-scheduler"]}, HEAD_DS, "one scheduler source",
     None, ""),
    ("torch DDP with pipeline stages", {"pipeline_parallel": 2, "no_pipeline_parallel": False, "extra_args": ["--DDP-impl", "torch"]}, HEAD_DS,
     "--DDP-impl local with the pipeline", "fail", "training.py:650 at 4efb479d"),
    ("torch DDP with pipeline stages before_rebase", {"pipeline_parallel": 2, "no_pipeline_parallel": False, "extra_args": ["--DDP-impl", "torch"]}, OLD_DS,
     "--DDP-impl local with the pipeline", "fail", "training.py:554 at 9446eaac"),
    ("torch DDP without a pipeline", {"extra_args": ["--DDP-impl", "torch"]}, HEAD_DS,
     "--DDP-impl local with the pipeline", None, ""),
    ("local DDP with pipeline stages", {"pipeline_parallel": 2, "no_pipeline_parallel": False}, HEAD_DS, "--DDP-impl local with the pipeline", None, ""),
    ("Transformer Engine under the pipeline engine",
     {"no_pipeline_parallel": False, "extra_args": ["--transformer-impl", "transformer_engine"]},
     HEAD_DS, "Transformer Engine needs --no-pipeline-parallel", "fail", "training.py:386 at 4efb479d"),
    ("Transformer Engine without the pipeline engine", {"extra_args": ["--transformer-impl", "transformer_engine"]},
     HEAD_DS, "Transformer Engine needs --no-pipeline-parallel", None, ""),
]


@pytest.mark.parametrize("over,version,check,status,words", [c[1:] for c in DATA_CASES], ids=[c[0] for c in DATA_CASES])
def test_data_rule(over, version, check, status, words):
    test_static_rule(over, version, check, status, words)


def _random_ltd(enabled: Any) -> Dict[str, Any]:
    return {"data_efficiency": {"enabled": True, "data_routing": {"enabled": True, "random_ltd": {"enabled": enabled}}}}


# DeepSpeed-feature and environment rules of _job.rules_startup that read the ds_config or the
# job's environment: (spec, ds_config section merged into the rendered one, version, check, status, words).
FEATURE_CASES = [
    ("random-LTD without its ds_config section", {"extra_args": ["--random-ltd"]}, None, HEAD_DS,
     "--random-ltd needs ds_config random-LTD", "fail", "megatron/training.py:1246 at 4efb479d"),
    ("random-LTD disabled in ds_config before_rebase", {"extra_args": ["--random-ltd"]}, _random_ltd(False), OLD_DS,
     "--random-ltd needs ds_config random-LTD", "fail", "megatron/training.py:1019 at 9446eaac"),
    ("random-LTD enabled in ds_config", {"extra_args": ["--random-ltd"]}, _random_ltd(True), HEAD_DS,
     "--random-ltd needs ds_config random-LTD", "pass", ""),
    ("no random-LTD", {}, None, HEAD_DS, "--random-ltd needs ds_config random-LTD", None, ""),
    ("sequence parallelism with the variable unset", {"tensor_parallel": 2, "env": {},
                                                      "extra_args": ["--sequence-parallel"]}, None, HEAD_DS,
     "sequence parallelism needs CUDA_DEVICE_MAX_CONNECTIONS=1", "fail", "megatron/arguments.py:405 at 4efb479d"),
    ("sequence parallelism with the default environment", {"tensor_parallel": 2, "extra_args": ["--sequence-parallel"]},
     None, HEAD_DS, "sequence parallelism needs CUDA_DEVICE_MAX_CONNECTIONS=1", None, ""),
    ("no such check before the rebase", {"tensor_parallel": 2, "env": {}, "extra_args": ["--sequence-parallel"]}, None,
     OLD_DS, "sequence parallelism needs CUDA_DEVICE_MAX_CONNECTIONS=1", None, ""),
]


@pytest.mark.parametrize("over,section,version,check,status,words", [c[1:] for c in FEATURE_CASES],
                         ids=[c[0] for c in FEATURE_CASES])
def test_feature_rule(over, section, version, check, status, words):
    spec = _job_spec.normalize(over)
    ds = None
    if section is not None:
        # the rendered config of this spec on CLUSTER's nodes, plus the section under test
        ds = dict(_job_args.ds_config(dict(spec, nodes=CLUSTER["nodes"], gpus_per_node=CLUSTER["gpus_per_node"])), **section)
    expect(_job_rules.validate(spec, ds, dict(CLUSTER), None, version), check, status, words)
