# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Megatron-DeepSpeed ``pretrain_gpt.py`` command-line flags, kept as data.

Why data: the validator, the train.sh template tests and the parser of existing train.sh
files must agree on which flags exist, what they take and which are traps. A table read by
all of them stays in one place and is diffed when Megatron-DeepSpeed moves.

Where it comes from (see docs/upstream-facts.md §A): every ``add_argument`` call reached from
``parse_args`` in ``megatron/arguments.py`` of deepspeedai/Megatron-DeepSpeed, read with
Python's ``ast`` (nothing imported), at

* HEAD ``4efb479d`` (2025-07-16), the era of DeepSpeed 0.16.1-0.19.6 ("head");
* branch ``before_rebase`` ``9446eaac`` (2023-07-11), the DeepSpeed 0.9.x era
  ("before_rebase"): ``HEAD_ONLY`` minus, ``BEFORE_REBASE_ONLY`` plus, and
  ``BEFORE_REBASE_CHANGED`` overrides,

plus DeepSpeed's own ``add_config_arguments`` (``--deepspeed``, ``--deepspeed_config`` ...)
and the launcher's parser (``deepspeed/launcher/runner.py``). Both parsers are built with
``allow_abbrev=False``: prefixes are never accepted, and ``-`` and ``_`` are not
interchangeable unless both spellings are declared.

``Arg.action`` is ``store`` (takes values), ``store_true`` or ``store_false``; ``type`` is the
argparse type name (``None`` keeps the string; ``bool`` is argparse's trap: any non-empty
string is True); ``nargs`` is ``None`` (exactly one value), ``*`` or ``+``; ``default`` is
what Megatron sees when the flag is absent (``--zero-stage`` really defaults to the float
1.0); ``dest`` is set only where it differs from the flag's own name.
"""
from __future__ import annotations

import difflib
import re
from typing import Any, Dict, FrozenSet, List, NamedTuple, Optional, Sequence, Tuple

# The notes on obsolete, deprecated and misspelt flags are written by hand (_mds_notes).
from .notes import DEPRECATED, MISSPELT, OBSOLETE, Note

HEAD = "head"
BEFORE_REBASE = "before_rebase"
ERAS = (HEAD, BEFORE_REBASE)

# Megatron-DeepSpeed HEAD imports deepspeed.sequence.fpdt_layer (DeepSpeed >= 0.16.1);
# anything older runs the before_rebase era code (docs/upstream-facts.md §E, "version coupling").
HEAD_MIN_DEEPSPEED = (0, 16, 1)


class Arg(NamedTuple):
    action: str
    type: Optional[str]
    default: Any = None
    choices: Optional[Tuple[str, ...]] = None
    nargs: Optional[str] = None
    dest: Optional[str] = None


def _V(type_: Optional[str], default: Any = None, choices: Optional[Tuple[str, ...]] = None,
       nargs: Optional[str] = None, dest: Optional[str] = None) -> Arg:
    return Arg("store", type_, default, choices, nargs, dest)


def _T(dest: Optional[str] = None, default: Any = False) -> Arg:
    return Arg("store_true", None, default, None, None, dest)


def _F(dest: Optional[str] = None, default: Any = True) -> Arg:
    return Arg("store_false", None, default, None, None, dest)


# ---- generated from megatron/arguments.py (see the module docstring); edit by regenerating ----
HEAD_ARGS: Dict[str, Arg] = {
    # megatron/arguments.py at 4efb479d, in parser order
    # --- network size (_add_network_size_args) ---
    '--num-layers': _V('int'),
    '--encoder-num-layers': _V('int'),
    '--decoder-num-layers': _V('int'),
    '--num-experts': _V('int', default=[1], nargs='+'),
    '--mlp-type': _V('str', default='standard'),
    '--topk': _V('int', default=1),
    '--expert-interval': _V('int', default=2),
    '--hidden-size': _V('int'),
    '--ffn-hidden-size': _V('int'),
    '--num-attention-heads': _V('int'),
    '--num-key-value-heads': _V('int'),
    '--kv-channels': _V('int'),
    '--max-position-embeddings': _V('int'),
    '--use-rotary-position-embeddings': _T(),
    '--rotary-position-embeddings-theta': _V('int', default=10000, dest='rope_theta'),
    '--rotary-percent': _V('float', default=1.0),
    '--no-position-embedding': _F(dest='add_position_embedding'),
    '--make-vocab-size-divisible-by': _V('int', default=128),
    '--normalization': _V('str', default='layernorm', choices=('layernorm', 'rmsnorm')),
    '--layernorm-epsilon': _V('float', default=1e-05),
    '--apply-layernorm-1p': _T(),
    '--disable-mem-efficient-ln': _F(dest='mem_efficient_ln'),
    '--apply-residual-connection-post-layernorm': _T(),
    '--openai-gelu': _T(),
    '--squared-relu': _T(),
    '--swiglu': _T(),
    '--onnx-safe': _V('bool'),
    '--bert-no-binary-head': _F(dest='bert_binary_head'),
    '--num-experts-switch': _V('int'),
    '--kill-switch-file': _V('str'),
    '--untie-embeddings-and-output-weights': _T(),
    '--embedding-weights-in-fp32': _T(),
    # --- regularization (_add_regularization_args) ---
    '--attention-dropout': _V('float', default=0.1),
    '--hidden-dropout': _V('float', default=0.1),
    '--weight-decay': _V('float', default=0.01),
    '--start-weight-decay': _V('float'),
    '--end-weight-decay': _V('float'),
    '--weight-decay-incr-style': (
        _V('str', default='constant', choices=('constant', 'linear', 'cosine'))
    ),
    '--clip-grad': _V('float', default=1.0),
    '--adam-beta1': _V('float', default=0.9),
    '--adam-beta2': _V('float', default=0.999),
    '--adam-eps': _V('float', default=1e-08),
    '--sgd-momentum': _V('float', default=0.9),
    # --- training (_add_training_args) ---
    '--micro-batch-size': _V('int'),
    '--batch-size': _V('int'),
    '--global-batch-size': _V('int'),
    '--rampup-batch-size': _V(None, nargs='*'),
    '--recompute-activations': _T(),
    '--recompute-granularity': _V('str', choices=('full', 'selective')),
    '--distribute-saved-activations': _T(),
    '--recompute-method': _V('str', choices=('uniform', 'block')),
    '--recompute-num-layers': _V('int', default=1),
    '--enable-zbh1-pipeline': _T(),
    '--enable-zbh1-exact-semantics': _T(),
    '--checkpoint-activations': _T(),
    '--distribute-checkpointed-activations': _T(),
    '--checkpoint-num-layers': _V('int', default=1),
    '--train-iters': _V('int'),
    '--train-samples': _V('int'),
    '--train-tokens': _V('int'),
    '--random-ltd': _T(),
    '--log-interval': _V('int', default=100),
    '--exit-interval': _V('int'),
    '--exit-duration-in-mins': _V('int'),
    '--exit-signal-handler': _T(),
    '--tensorboard-dir': _V('str'),
    '--no-masked-softmax-fusion': _F(dest='masked_softmax_fusion'),
    '--no-bias-gelu-fusion': _F(dest='bias_gelu_fusion'),
    '--no-bias-dropout-fusion': _F(dest='bias_dropout_fusion'),
    '--disable-moe-token-dropping': _F(dest='moe_token_dropping'),
    '--moe-train-capacity-factor': _V('float', default=1.0),
    '--moe-eval-capacity-factor': _V('float', default=1.0),
    '--moe-min-capacity': _V('int', default=4),
    '--moe-loss-coeff': _V('float', default=0.1),
    '--create-moe-param-group': _T(),
    '--disable-moe-top2-2nd-expert-sampling': _F(dest='moe_top2_2nd_expert_sampling'),
    '--use-flash-attn': _T(dest='use_flash_attn_v1'),
    '--use-flash-attn-v1': _T(dest='use_flash_attn_v1'),
    '--use-flash-attn-v2': _T(),
    '--use-flash-attn-triton': _T(),
    '--use-flash-attn-builder': _T(),
    '--disable-bias-linear': _F(dest='add_bias_linear'),
    '--optimizer': _V('str', default='adam', choices=('adam', 'sgd')),
    '--dataloader-type': _V('str', choices=('single', 'cyclic')),
    '--ds-inference': _T(),
    '--cpu-optimizer': _T(),
    '--cpu_torch_adam': _T(),
    '--ds_fused_adam': _T(),
    '--no-pipeline-parallel': _T(),
    '--use-tutel': _T(),
    '--inference': _T(),
    '--no-async-tensor-model-parallel-allreduce': _F(dest='async_tensor_model_parallel_allreduce'),
    '--no-persist-layer-norm': _T(),
    '--sequence-parallel': _T(),
    '--ds-sequence-parallel-size': _V('int', default=1),
    '--force-ds-sequence-parallel': _T(),
    '--ds-sequence-parallel-fpdt': _T(),
    '--ds-sequence-parallel-fpdt-chunk-size': _V('int', default=65536),
    '--ds-sequence-parallel-fpdt-offloading': _T(),
    '--no-gradient-accumulation-fusion': _F(dest='gradient_accumulation_fusion'),
    '--use-dataset-only': _V('bool', default=False),
    # --- initialization (_add_initialization_args) ---
    '--seed': _V('int', default=1234),
    '--data-parallel-random-init': _T(),
    '--init-method-std': _V('float', default=0.02),
    '--init-method-xavier-uniform': _T(),
    # --- learning rate (_add_learning_rate_args) ---
    '--lr': _V('float'),
    '--lr-decay-style': (
        _V('str', default='linear', choices=('constant', 'linear', 'cosine', 'inverse-square-root'))
    ),
    '--lr-decay-iters': _V('int'),
    '--lr-decay-samples': _V('int'),
    '--lr-decay-tokens': _V('int'),
    '--lr-warmup-fraction': _V('float'),
    '--lr-warmup-iters': _V('int', default=0),
    '--lr-warmup-samples': _V('int', default=0),
    '--lr-warmup-tokens': _V('int'),
    '--warmup': _V('int'),
    '--min-lr': _V('float', default=0.0),
    '--override-opt_param-scheduler': _T(),
    '--use-checkpoint-opt_param-scheduler': _T(),
    # --- checkpointing (_add_checkpointing_args) ---
    '--save': _V('str'),
    '--save-interval': _V('int'),
    '--no-save-optim': _T(default=None),
    '--no-save-rng': _T(default=None),
    '--load': _V('str'),
    '--load-tag': _V('str'),
    '--no-load-optim': _T(default=None),
    '--no-load-rng': _T(default=None),
    '--no-load-lr-state': _T(),
    '--finetune': _T(),
    '--no-initialization': _F(dest='perform_initialization'),
    '--use-checkpoint-args': _T(),
    '--exit-on-missing-checkpoint': _T(),
    '--universal-checkpoint': _T(),
    # --- mixed precision (_add_mixed_precision_args) ---
    '--fp16': _T(),
    '--bf16': _T(),
    '--loss-scale': _V('float'),
    '--initial-loss-scale': _V('float', default='2 ** 32'),
    '--min-loss-scale': _V('float', default=1.0),
    '--loss-scale-window': _V('float', default=1000),
    '--hysteresis': _V('int', default=2),
    '--fp32-residual-connection': _T(),
    '--no-query-key-layer-scaling': _F(dest='apply_query_key_layer_scaling'),
    '--attention-softmax-in-fp32': _T(),
    '--accumulate-allreduce-grads-in-fp32': _T(),
    '--fp16-lm-cross-entropy': _T(),
    # --- distributed (_add_distributed_args) ---
    '--tensor-model-parallel-size': _V('int', default=1),
    '--enable-expert-tensor-parallelism': _T(),
    '--pipeline-model-parallel-size': _V('int', default=1),
    '--pipeline-model-parallel-split-rank': _V('int'),
    '--moe-expert-parallel-size': _V('int', default=1),
    '--model-parallel-size': _V('int'),
    '--num-layers-per-virtual-pipeline-stage': _V('int'),
    '--overlap-p2p-communication': _T(dest='overlap_p2p_comm'),
    '--distributed-backend': _V(None, default='nccl', choices=('nccl', 'gloo', 'ccl', 'hccl')),
    '--distributed-timeout-minutes': _V('int', default=10),
    '--DDP-impl': _V(None, default='local', choices=('local', 'torch', 'FSDP')),
    '--no-contiguous-buffers-in-local-ddp': _F(dest='use_contiguous_buffers_in_local_ddp'),
    '--no-scatter-gather-tensors-in-pipeline': _F(dest='scatter_gather_tensors_in_pipeline'),
    '--use-ring-exchange-p2p': _T(),
    '--local-rank': _V('int'),
    '--local_rank': _V('int'),
    '--lazy-mpu-init': _V('bool'),
    '--use-cpu-initialization': _T(default=None),
    '--empty-unused-memory-level': _V('int', default=0, choices=(0, 1, 2)),
    '--standalone-embedding-stage': _T(),
    '--use-distributed-optimizer': _T(),
    # --- validation (_add_validation_args) ---
    '--eval-iters': _V('int', default=100),
    '--eval-interval': _V('int', default=1000),
    '--skip-train': _T(),
    # --- data and dataloader (_add_data_args) ---
    '--aml-data-download-path': _V('str'),
    '--data-path': _V(None, nargs='*'),
    '--split': _V('str', default='969, 30, 1'),
    '--train-data-path': _V(None, nargs='*'),
    '--valid-data-path': _V(None, nargs='*'),
    '--test-data-path': _V(None, nargs='*'),
    '--data-cache-path': _V(None),
    '--vocab-size': _V('int'),
    '--vocab-file': _V('str'),
    '--merge-file': _V('str'),
    '--vocab-extra-ids': _V('int', default=0),
    '--seq-length': _V('int'),
    '--encoder-seq-length': _V('int'),
    '--decoder-seq-length': _V('int'),
    '--retriever-seq-length': _V('int', default=256),
    '--sample-rate': _V('float', default=1.0),
    '--mask-prob': _V('float', default=0.15),
    '--short-seq-prob': _V('float', default=0.1),
    '--mmap-warmup': _T(),
    '--num-workers': _V('int', default=2),
    '--tokenizer-type': (
        _V('str', choices=('BertWordPieceLowerCase', 'BertWordPieceCase', 'GPT2BPETokenizer',
                           'SentencePieceTokenizer', 'GPTSentencePieceTokenizer', 'HFTokenizer',
                           'NullTokenizer'))
    ),
    '--tokenizer-model': _V('str'),
    '--trust-remote-code': _T(),
    '--data-impl': _V('str', default='infer', choices=('mmap', 'infer')),
    '--reset-position-ids': _T(),
    '--reset-attention-mask': _T(),
    '--eod-mask-loss': _T(),
    '--train-data-exact-num-epochs': _V('int'),
    '--return-data-index': _T(),
    '--data-efficiency-curriculum-learning': _T(),
    '--train-idx-path': _V('str'),
    '--train-desc-path': _V('str'),
    '--train-doc-idx-path': _V('str'),
    '--train-sample-idx-path': _V('str'),
    '--train-shuffle-idx-path': _V('str'),
    '--repeated-dataloader': _T(),
    # --- autoresume (_add_autoresume_args) ---
    '--adlr-autoresume': _T(),
    '--adlr-autoresume-interval': _V('int', default=1000),
    # --- biencoder (_add_biencoder_args) ---
    '--ict-head-size': _V('int'),
    '--biencoder-projection-dim': _V('int', default=0),
    '--biencoder-shared-query-context-model': _T(),
    '--ict-load': _V('str'),
    '--bert-load': _V('str'),
    '--titles-data-path': _V('str'),
    '--query-in-block-prob': _V('float', default=0.1),
    '--use-one-sent-docs': _T(),
    '--evidence-data-path': _V('str'),
    '--retriever-report-topk-accuracies': _V('int', default=[], nargs='+'),
    '--retriever-score-scaling': _T(),
    '--block-data-path': _V('str'),
    '--embedding-path': _V('str'),
    '--indexer-batch-size': _V('int', default=128),
    '--indexer-log-interval': _V('int', default=1000),
    # --- vision (_add_vision_args) ---
    '--num-classes': _V('int', default=1000),
    '--img-h': _V('int', default=224),
    '--img-w': _V('int', default=224),
    '--num-channels': _V('int', default=3),
    '--patch-dim': _V('int', default=16),
    '--classes-fraction': _V('float', default=1.0),
    '--data-per-class-fraction': _V('float', default=1.0),
    '--no-data-sharding': _F(dest='data_sharding'),
    '--head-lr-mult': _V('float', default=1.0),
    '--vision-pretraining': _T(),
    '--vision-pretraining-type': (
        _V('str', default='classify', choices=('classify', 'inpaint', 'dino'))
    ),
    '--vision-backbone-type': _V('str', default='vit', choices=('vit', 'mit', 'swin')),
    '--swin-backbone-type': _V('str', default='tiny', choices=('tiny', 'base', 'h3')),
    '--mask-type': _V('str', default='random', choices=('random', 'row')),
    '--mask-factor': _V('float', default=1.0),
    '--iter-per-epoch': _V('int', default=1250),
    '--dino-local-img-size': _V('int', default=96),
    '--dino-local-crops-number': _V('int', default=10),
    '--dino-head-hidden-size': _V('int', default=2048),
    '--dino-bottleneck-size': _V('int', default=256),
    '--dino-freeze-last-layer': _V('float', default=1),
    '--dino-norm-last-layer': _T(),
    '--dino-warmup-teacher-temp': _V('float', default=0.04),
    '--dino-teacher-temp': _V('float', default=0.07),
    '--dino-warmup-teacher-temp-epochs': _V('int', default=30),
    # --- logging (_add_logging_args) ---
    '--log-params-norm': _T(),
    '--log-num-zeros-in-grad': _T(),
    '--timing-log-level': (
        _V('int', default=0, choices=('r', 'a', 'n', 'g', 'e', '(', '0', ',', ' ', '3', ')'))
    ),
    '--no-barrier-with-level-1-timing': _F(dest='barrier_with_L1_time'),
    '--timing-log-option': _V('str', default='minmax', choices=('max', 'minmax', 'all')),
    '--tensorboard-log-interval': _V('int', default=1),
    '--tensorboard-queue-size': _V('int', default=1000),
    '--log-timers-to-tensorboard': _T(),
    '--log-batch-size-to-tensorboard': _T(),
    '--no-log-learnig-rate-to-tensorboard': _F(dest='log_learning_rate_to_tensorboard'),
    '--no-log-loss-scale-to-tensorboard': _F(dest='log_loss_scale_to_tensorboard'),
    '--log-validation-ppl-to-tensorboard': _T(),
    '--log-optimizer-states-to-tensorboard': _T(),
    '--log-memory-to-tensorboard': _T(),
    '--log-world-size-to-tensorboard': _T(),
    '--wandb-project': _V('str', default=''),
    '--wandb-exp-name': _V('str', default=''),
    '--wandb-save-dir': _V('str', default=''),
    # --- ZeRO configurations (_add_zero_args) ---
    '--zero-stage': _V('int', default=1.0),
    '--zero-reduce-scatter': _T(),
    '--zero-contigious-gradients': _T(),
    '--zero-reduce-bucket-size': _V('int', default=0.0),
    '--zero-allgather-bucket-size': _V('int', default=0.0),
    '--remote-device': _V('str', default='none', choices=('none', 'cpu', 'nvme')),
    '--use-pin-memory': _T(),
    # --- Memory optimizations (_add_memoryopt_args) ---
    '--scattered-embeddings': _T(),
    '--split-transformers': _T(),
    '--memory-centric-tiled-linear': _T(),
    '--tile-factor': _V('int', default=1),
    # --- Activation Checkpointing (_add_activation_checkpoint_args) ---
    '--deepspeed-activation-checkpointing': _T(),
    '--partition-activations': _T(),
    '--contigious-checkpointing': _T(),
    '--checkpoint-in-cpu': _T(),
    '--synchronize-each-layer': _T(),
    '--profile-backward': _T(),
    # --- Knowledge distillation (_add_distillation_args) ---
    '--num-layers-teacher': _V('int'),
    '--num-experts-teacher': _V('int', default=[1], nargs='+'),
    '--hidden-size-teacher': _V('int'),
    '--num-attention-heads-teacher': _V('int'),
    '--mos': _T(),
    '--kd': _T(),
    '--kd-alpha-ce': _V('float', default=1),
    '--kd-beta-ce': _V('float', default=1),
    '--kd-temp': _V('float', default=1.0),
    '--reset-iteration': _T(),
    '--load-teacher': _V('str'),
    # --- inference (_add_inference_args) ---
    '--inference-batch-times-seqlen-threshold': _V('int', default=512),
    '--max-tokens-to-oom': _V('int', default=12000),
    '--output-bert-embeddings': _T(),
    '--bert-embedder-type': _V(None, default='megatron', choices=('megatron', 'huggingface')),
    # --- Transformer-Engine (_add_transformer_engine_args) ---
    '--fp8-e4m3': _T(),
    '--fp8-hybrid': _T(),
    '--no-fp8-wgrad': _F(dest='fp8_wgrad'),
    '--fp8-margin': _V('int', default=0),
    '--fp8-interval': _V('int', default=1),
    '--transformer-impl': _V(None, default='local', choices=('local', 'transformer_engine')),
    '--fp8-amax-history-len': _V('int', default=1),
    '--fp8-amax-compute-algo': _V(None, default='most_recent', choices=('most_recent', 'max')),
    # --- retro (_add_retro_args) ---
    '--retro-workdir': _V(None),
    '--retro-add-retriever': _T(),
    '--retro-cyclic-train-iters': _V('int'),
    '--retro-encoder-layers': _V('int', default=2),
    '--retro-encoder-hidden-dropout': _V('float', default=0.1),
    '--retro-encoder-attention-dropout': _V('float', default=0.1),
    '--retro-num-neighbors': _V('int', default=2),
    '--retro-num-retrieved-chunks': _V('int', default=2),
    '--retro-return-doc-ids': _T(),
    # --- profiling configuration (_add_profiler_args) ---
    '--profile': _V('str', choices=('pt', 'pt-full')),
    '--profile_steps': _V('str', default='2,3'),
    '--profile-ranks': _V('int', nargs='+'),
}

# Flags that the before_rebase parser (9446eaac) lacks.
HEAD_ONLY: FrozenSet[str] = frozenset({
    '--apply-layernorm-1p',
    '--bert-embedder-type',
    '--classes-fraction',
    '--data-cache-path',
    '--data-parallel-random-init',
    '--data-per-class-fraction',
    '--decoder-num-layers',
    '--dino-bottleneck-size',
    '--dino-freeze-last-layer',
    '--dino-head-hidden-size',
    '--dino-local-crops-number',
    '--dino-local-img-size',
    '--dino-norm-last-layer',
    '--dino-teacher-temp',
    '--dino-warmup-teacher-temp',
    '--dino-warmup-teacher-temp-epochs',
    '--disable-bias-linear',
    '--disable-mem-efficient-ln',
    '--disable-moe-top2-2nd-expert-sampling',
    '--distribute-saved-activations',
    '--distributed-timeout-minutes',
    '--ds-sequence-parallel-fpdt',
    '--ds-sequence-parallel-fpdt-chunk-size',
    '--ds-sequence-parallel-fpdt-offloading',
    '--ds-sequence-parallel-size',
    '--ds_fused_adam',
    '--embedding-weights-in-fp32',
    '--empty-unused-memory-level',
    '--enable-zbh1-exact-semantics',
    '--enable-zbh1-pipeline',
    '--encoder-num-layers',
    '--end-weight-decay',
    '--exit-on-missing-checkpoint',
    '--exit-signal-handler',
    '--force-ds-sequence-parallel',
    '--fp8-amax-compute-algo',
    '--fp8-amax-history-len',
    '--fp8-e4m3',
    '--fp8-hybrid',
    '--fp8-interval',
    '--fp8-margin',
    '--head-lr-mult',
    '--img-h',
    '--img-w',
    '--inference-batch-times-seqlen-threshold',
    '--iter-per-epoch',
    '--kill-switch-file',
    '--load-tag',
    '--local-rank',
    '--log-memory-to-tensorboard',
    '--log-world-size-to-tensorboard',
    '--mask-factor',
    '--mask-type',
    '--max-tokens-to-oom',
    '--no-async-tensor-model-parallel-allreduce',
    '--no-barrier-with-level-1-timing',
    '--no-contiguous-buffers-in-local-ddp',
    '--no-data-sharding',
    '--no-fp8-wgrad',
    '--no-gradient-accumulation-fusion',
    '--no-initialization',
    '--no-persist-layer-norm',
    '--no-position-embedding',
    '--normalization',
    '--num-experts-switch',
    '--num-key-value-heads',
    '--output-bert-embeddings',
    '--overlap-p2p-communication',
    '--override-opt_param-scheduler',
    '--pipeline-model-parallel-split-rank',
    '--profile',
    '--profile-ranks',
    '--profile_steps',
    '--recompute-activations',
    '--recompute-granularity',
    '--recompute-method',
    '--recompute-num-layers',
    '--repeated-dataloader',
    '--retro-add-retriever',
    '--retro-cyclic-train-iters',
    '--retro-encoder-attention-dropout',
    '--retro-encoder-hidden-dropout',
    '--retro-encoder-layers',
    '--retro-num-neighbors',
    '--retro-num-retrieved-chunks',
    '--retro-return-doc-ids',
    '--retro-workdir',
    '--rotary-percent',
    '--rotary-position-embeddings-theta',
    '--sequence-parallel',
    '--skip-train',
    '--squared-relu',
    '--standalone-embedding-stage',
    '--start-weight-decay',
    '--swiglu',
    '--swin-backbone-type',
    '--test-data-path',
    '--timing-log-level',
    '--timing-log-option',
    '--tokenizer-model',
    '--train-data-path',
    '--train-desc-path',
    '--transformer-impl',
    '--trust-remote-code',
    '--universal-checkpoint',
    '--untie-embeddings-and-output-weights',
    '--use-checkpoint-args',
    '--use-checkpoint-opt_param-scheduler',
    '--use-dataset-only',
    '--use-distributed-optimizer',
    '--use-flash-attn',
    '--use-flash-attn-builder',
    '--use-flash-attn-triton',
    '--use-flash-attn-v1',
    '--use-flash-attn-v2',
    '--use-ring-exchange-p2p',
    '--use-rotary-position-embeddings',
    '--valid-data-path',
    '--vision-backbone-type',
    '--vision-pretraining',
    '--vision-pretraining-type',
    '--vocab-size',
    '--wandb-exp-name',
    '--wandb-project',
    '--wandb-save-dir',
    '--weight-decay-incr-style',
})

BEFORE_REBASE_ONLY: Dict[str, Arg] = {
    # flags of 9446eaac that HEAD removed or renamed
    # --- learning rate (_add_learning_rate_args) ---
    '--override-lr-scheduler': _T(),
    '--use-checkpoint-lr-scheduler': _T(),
    # --- distributed (_add_distributed_args) ---
    '--use-contiguous-buffers-in-ddp': _T(),
    # --- vit (_add_vit_args) ---
    '--img-dim': _V('int', default=224),
}

BEFORE_REBASE_CHANGED: Dict[str, Arg] = {
    # same flag, different choices in 9446eaac
    # --- learning rate (_add_learning_rate_args) ---
    '--lr-decay-style': _V('str', default='linear', choices=('constant', 'linear', 'cosine')),
    # --- distributed (_add_distributed_args) ---
    '--distributed-backend': _V(None, default='nccl', choices=('nccl', 'gloo', 'ccl')),
    '--DDP-impl': _V(None, default='local', choices=('local', 'torch')),
    # --- data and dataloader (_add_data_args) ---
    '--tokenizer-type': (
        _V('str', choices=('BertWordPieceLowerCase', 'BertWordPieceCase', 'GPT2BPETokenizer'))
    ),
    '--data-impl': _V('str', default='infer', choices=('lazy', 'cached', 'mmap', 'infer')),
}


# DeepSpeed's deepspeed.add_config_arguments(parser), called last by parse_args
# (deepspeed/__init__.py:_add_core_arguments). Only the underscore spelling of
# --deepspeed_config exists; --deepscale* are its deprecated aliases.
DEEPSPEED_ARGS: Dict[str, Arg] = {
    "--deepspeed": _T(),
    "--deepspeed_config": _V("str"),
    "--deepscale": _T(),
    "--deepscale_config": _V("str"),
}
# DeepSpeed 0.9.2 also declares --deepspeed_mpi; HEAD removed it.
DEEPSPEED_092_ONLY: Dict[str, Arg] = {"--deepspeed_mpi": _T()}

# The deepspeed launcher's own options (deepspeed/launcher/runner.py parse_args), which come
# before the user script. HEAD adds --num_accelerators (alias of --num_gpus), --node_rank,
# --no_ssh, --ssh_port, --venv_script, --log_level and -q; v0.9.2 has the rest.
LAUNCHER_ARGS: Dict[str, Arg] = {
    "-H": _V("str", default="/job/hostfile", dest="hostfile"),
    "--hostfile": _V("str", default="/job/hostfile"),
    "-i": _V("str", default="", dest="include"),
    "--include": _V("str", default=""),
    "-e": _V("str", default="", dest="exclude"),
    "--exclude": _V("str", default=""),
    "--num_nodes": _V("int", default=-1),
    "--min_elastic_nodes": _V("int", default=-1),
    "--max_elastic_nodes": _V("int", default=-1),
    "--num_gpus": _V("int", default=-1),
    "--num_accelerators": _V("int", default=-1, dest="num_gpus"),
    "--master_port": _V("int", default=29500),
    "--master_addr": _V("str", default=""),
    "--node_rank": _V("int", default=-1),
    "--launcher": _V("str", default="pdsh"),
    "--launcher_args": _V("str", default=""),
    "--module": _T(),
    "--no_python": _T(),
    "--no_local_rank": _T(),
    "--no_ssh": _T(),
    "--no_ssh_check": _T(),
    "--force_multi": _T(),
    "--save_pid": _T(),
    "--enable_each_rank_log": _V("str", default="None"),
    "--autotuning": _V("str", default="", choices=("tune", "run")),
    "--elastic_training": _T(),
    "--bind_cores_to_rank": _T(),
    "--bind_core_list": _V("str"),
    "--ssh_port": _V("int"),
    "--venv_script": _V("str"),
    "--log_level": _V("str", default="info", choices=("debug", "info", "warning", "error", "critical")),
    "-q": _T(dest="quiet"),
    "--quiet": _T(),
}
# Launcher values of --launcher (lower-cased by DeepSpeed); impi is not in 0.9.2.
LAUNCHERS = ("pdsh", "openmpi", "mvapich", "slurm", "mpich", "impi")

# torchrun / python -m torch.distributed.run|launch options mapped onto the launcher's names.
TORCHRUN_ARGS: Dict[str, str] = {
    "--nnodes": "num_nodes",
    "--nproc_per_node": "num_gpus",
    "--nproc-per-node": "num_gpus",
    "--master_port": "master_port",
    "--master-port": "master_port",
    "--master_addr": "master_addr",
    "--master-addr": "master_addr",
    "--node_rank": "node_rank",
    "--node-rank": "node_rank",
    "--rdzv_endpoint": "rdzv_endpoint",
    "--rdzv-endpoint": "rdzv_endpoint",
    "--rdzv_backend": "rdzv_backend",
    "--rdzv-backend": "rdzv_backend",
    "--rdzv_id": "rdzv_id",
    "--rdzv-id": "rdzv_id",
    "--max_restarts": "max_restarts",
    "--max-restarts": "max_restarts",
    "--standalone": None,
    "--use_env": None,
    "--use-env": None,
}


_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+(?:[eE][-+]?\d+)?$")


def era_for_deepspeed(deepspeed_version: Optional[str]) -> str:
    """``head`` for DeepSpeed >= 0.16.1 or unknown, ``before_rebase`` for older releases."""
    if not deepspeed_version:
        return HEAD
    match = re.match(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?", str(deepspeed_version))
    if not match:
        raise ValueError("not a DeepSpeed version: %r" % (deepspeed_version,))
    release = tuple(int(part or 0) for part in match.groups())
    return HEAD if release >= HEAD_MIN_DEEPSPEED else BEFORE_REBASE


_CACHE: Dict[str, Dict[str, Arg]] = {}


def args_for(era: str = HEAD) -> Dict[str, Arg]:
    """Every flag pretrain_gpt.py accepts in ``era``, DeepSpeed's own flags included."""
    if era not in ERAS:
        raise ValueError("unknown Megatron-DeepSpeed era %r; expected one of %s" % (era, ", ".join(ERAS)))
    if era not in _CACHE:
        if era == HEAD:
            table = dict(HEAD_ARGS)
            table.update(DEEPSPEED_ARGS)
        else:
            table = {flag: arg for flag, arg in HEAD_ARGS.items() if flag not in HEAD_ONLY}
            table.update(BEFORE_REBASE_ONLY)
            table.update(BEFORE_REBASE_CHANGED)
            table.update(DEEPSPEED_ARGS)
            table.update(DEEPSPEED_092_ONLY)
        _CACHE[era] = table
    return _CACHE[era]


def dest_of(flag: str, era: str = HEAD) -> str:
    """The attribute name argparse stores ``flag`` under (``--no-masked-softmax-fusion`` ->
    ``masked_softmax_fusion``)."""
    arg = args_for(era).get(flag) or LAUNCHER_ARGS.get(flag)
    if arg is not None and arg.dest:
        return arg.dest
    return flag.lstrip("-").replace("-", "_")


def is_option(token: str) -> bool:
    """argparse's view: '-x' / '--x' is an option, '-1' / '-0.5' is a value (the parser declares
    no option that looks like a negative number)."""
    return token.startswith("-") and len(token) > 1 and not _NEGATIVE_NUMBER.match(token)


def classify(flag: str, era: str = HEAD) -> Note:
    """What ``flag`` is in ``era``: known, obsolete (asserted away), deprecated (advice),
    misspelt (rejected, with the right spelling), era_missing (exists in the other era only)
    or unknown (rejected, with the nearest known flags)."""
    table = args_for(era)
    if flag in OBSOLETE and flag in table:
        return OBSOLETE[flag]
    if flag in table:
        note = DEPRECATED.get(era, {}).get(flag)
        return note or Note("known", "")
    if flag in MISSPELT:
        return MISSPELT[flag]
    other = BEFORE_REBASE if era == HEAD else HEAD
    swapped = _swap_separators(flag)
    if swapped in table:
        return Note(
            "misspelt",
            "%s is not declared (argparse does not treat - and _ alike): use %s" % (flag, swapped),
            swapped,
        )
    if flag in args_for(other):
        return Note(
            "era_missing",
            "%s exists only in the %s era of Megatron-DeepSpeed, not in the %s era this job runs"
            % (flag, other, era),
        )
    if flag in LAUNCHER_ARGS:
        return Note(
            "misspelt",
            "%s is a deepspeed launcher option: put it before pretrain_gpt.py, not after" % flag,
        )
    close = difflib.get_close_matches(flag, list(table), n=3, cutoff=0.8)
    hint = " (did you mean %s?)" % " or ".join(close) if close else ""
    return Note(
        "unknown",
        "%s is not a pretrain_gpt.py flag in the %s era: argparse stops with "
        "'unrecognized arguments'%s" % (flag, era, hint),
        close[0] if close else None,
    )


def _swap_separators(flag: str) -> str:
    body = flag.lstrip("-")
    dashes = flag[: len(flag) - len(body)]
    if "_" in body:
        return dashes + body.replace("_", "-")
    return dashes + body.replace("-", "_")


class ParsedArg(NamedTuple):
    flag: str
    values: Tuple[str, ...]


def split_args(tokens: Sequence[str], era: str = HEAD) -> List[ParsedArg]:
    """Group ``tokens`` (what follows pretrain_gpt.py) into flags and their values, the way
    argparse would: ``--flag=value``, store_true flags take nothing, nargs None takes one
    value, ``*``/``+`` take every following non-option. An unknown flag takes the following
    non-options, which is how a reader would read it. A stray value is kept under flag ''."""
    table = args_for(era)
    out: List[ParsedArg] = []
    i = 0
    tokens = list(tokens)
    while i < len(tokens):
        token = tokens[i]
        if not is_option(token):
            out.append(ParsedArg("", (token,)))
            i += 1
            continue
        flag, eq, inline = token.partition("=")
        i += 1
        if eq:
            out.append(ParsedArg(flag, (inline,)))
            continue
        arg = table.get(flag)
        if arg is not None and arg.action != "store":
            out.append(ParsedArg(flag, ()))
            continue
        values: List[str] = []
        if arg is not None and arg.nargs is None:
            if i < len(tokens) and not is_option(tokens[i]):
                values.append(tokens[i])
                i += 1
        else:
            while i < len(tokens) and not is_option(tokens[i]):
                values.append(tokens[i])
                i += 1
        out.append(ParsedArg(flag, tuple(values)))
    return out


class ArgValueError(ValueError):
    """A value argparse would reject; the message mirrors argparse's."""


def coerce(flag: str, values: Sequence[str], era: str = HEAD) -> Any:
    """The Python value argparse would store for ``flag`` given ``values``.

    Raises ArgValueError with argparse's wording ('expected one argument', 'invalid int
    value', 'invalid choice') so the finding reads like the error the job would print."""
    arg = args_for(era).get(flag)
    if arg is None:
        raise ArgValueError("%s: not a pretrain_gpt.py flag" % flag)
    if arg.action == "store_true":
        if values:
            raise ArgValueError("argument %s: ignored explicit argument %r" % (flag, values[0]))
        return True
    if arg.action == "store_false":
        if values:
            raise ArgValueError("argument %s: ignored explicit argument %r" % (flag, values[0]))
        return False
    if arg.nargs is None and len(values) != 1:
        raise ArgValueError("argument %s: expected one argument" % flag)
    if arg.nargs == "+" and not values:
        raise ArgValueError("argument %s: expected at least one argument" % flag)
    converted = [_convert(flag, arg, value) for value in values]
    return converted[0] if arg.nargs is None else converted


def _convert(flag: str, arg: Arg, value: str) -> Any:
    kind = arg.type
    try:
        if kind == "int":
            result: Any = int(value)
        elif kind == "float":
            result = float(value)
        elif kind == "bool":
            result = bool(value)
        else:
            result = value
    except ValueError:
        raise ArgValueError("argument %s: invalid %s value: %r" % (flag, kind, value))
    if arg.choices is not None and result not in arg.choices:
        raise ArgValueError(
            "argument %s: invalid choice: %r (choose from %s)"
            % (flag, result, ", ".join(repr(c) for c in arg.choices))
        )
    return result


def default_of(flag: str, era: str = HEAD) -> Any:
    """What Megatron-DeepSpeed uses when ``flag`` is absent."""
    return args_for(era)[flag].default


def flags_in(era: str = HEAD) -> FrozenSet[str]:
    return frozenset(args_for(era))
