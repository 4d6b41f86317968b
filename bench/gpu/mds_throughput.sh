#!/usr/bin/env bash
# Megatron-DeepSpeed pretrain_gpt.py throughput through the job files the megatron_job role
# renders, on one GPU host, as `localhost`. Needs: VENV with torch, DeepSpeed, ansible-core,
# NVIDIA apex (amp_C, fused_layer_norm_cuda, apex_C) and transformers/nltk; a Megatron-DeepSpeed
# checkout in MEGATRON_DS_SRC. Set SDPA_FLASH_ATTN=1 to install the flash-attention SDPA adapter
# (roles/python_env/files/flash_attn_sdpa: what python_env_flash_attn: sdpa installs).
#
#   MEGATRON_DS_SRC=... bench/gpu/mds_throughput.sh NAME:MICRO:FLASH:ACTCKPT:ITERS[:EXTRA] ...
#   e.g. bench/gpu/mds_throughput.sh fa16:16:auto:false:15 ng16:16:auto:false:10:bias_gelu_fusion=true
# A NAME containing "nd" also sets attention and hidden dropout to 0. EXTRA is a "+"-separated
# list of KEY=VALUE, each written as `megatron_job_KEY: VALUE` (YAML) into the variant's role
# vars; profile=STEP instead runs step STEP of rank 0 under the PyTorch profiler (Megatron's
# --profile pt) and prints bench/gpu/trace_summary.py's breakdown of the trace.
# BUDGET_S (seconds, default unlimited) skips the variants that would start after it. Each variant
# stops after JOB_TIMEOUT_S (default 120 + 20 x ITERS), or timeout=SECONDS in its EXTRA.
# shellcheck disable=SC2086  # every unquoted variable here is a path this script made under /tmp, without spaces
set -x
REPO=$(cd "$(dirname "$0")/../.." && pwd); cd "$REPO" || exit 1
VENV=${VENV:-/opt/torch/.venv}; export OUT=${OUT:-/tmp/mds-throughput}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
export PATH=$VENV/bin:$PATH ANSIBLE_CONFIG=$REPO/ansible.cfg ANSIBLE_FORCE_COLOR=0
NGPU=$(nvidia-smi -L | wc -l)
SITE=$($VENV/bin/python3 -c 'import site;print(site.getsitepackages()[0])')
[ "${SDPA_FLASH_ATTN:-0}" = 1 ] && cp -r roles/python_env/files/flash_attn_sdpa/flash_attn "$SITE/"
(cd /tmp && python3 -c "import torch, amp_C, fused_layer_norm_cuda, apex_C; import flash_attn; print('apex+adapter ok', flash_attn.__version__)")
(cd /tmp && python3 "$REPO/roles/python_env/files/check_flash_attn.py")
MDS=${MEGATRON_DS_SRC:?set MEGATRON_DS_SRC to a Megatron-DeepSpeed checkout}
(cd $MDS && python3 -c "
import numpy as np
from megatron.data import helpers
s = helpers.build_sample_idx(np.array([5,7,3,9],dtype=np.int32), np.array([0,1,2,3],dtype=np.int32), 4, 1, 24)
print('helper call ok', s.shape)")
D=/tmp/data; mkdir -p $D
printf 'all:\n  vars:\n    ansible_connection: local\n    ansible_python_interpreter: %s/bin/python3\n  children:\n    megatron_head: {hosts: {gpuhost: }}\n    megatron_nodes: {hosts: {gpuhost: }}\n' $VENV > /tmp/inv.yml
# The corpus and its BPE tokenizer (bench/make_corpus.py), tokenised by the collection's own
# prepare_data.yml (Megatron-DeepSpeed's tools/preprocess_data.py on the head node).
python3 bench/make_corpus.py --out $D --repeat 8
ansible-playbook -i /tmp/inv.yml playbooks/prepare_data.yml -e megatron_data_input=$D/corpus.jsonl \
  -e megatron_data_input_on=head -e megatron_job_data_path=$D/corpus_text_document \
  -e megatron_job_vocab_file=$D/vocab.json -e megatron_job_merge_file=$D/merges.txt \
  -e megatron_job_megatron_dir=$MDS -e megatron_job_venv=$VENV -e megatron_job_user=root -e megatron_job_group=root \
  > $OUT/prepare_data.log 2>&1
echo "prepare_data.yml rc=$?"; ls -la $D
T_START=$(date +%s)
for variant in "$@"; do
  IFS=: read -r name micro flash acg iters extra <<<"$variant"
  if [ -n "${BUDGET_S:-}" ] && [ $(( $(date +%s) - T_START )) -gt "$BUDGET_S" ]; then
    echo "skip $name: past BUDGET_S=$BUDGET_S"; continue
  fi
  work=/tmp/job-$name
  cat > /tmp/vars-$name.yml <<VARS
megatron_stack_profile: cu130
megatron_job_user: root
megatron_job_group: root
megatron_job_name: $name
megatron_job_workdir: $work
megatron_job_megatron_dir: $MDS
megatron_job_venv: $VENV
megatron_job_checkpoint_dir: $work/ckpt
megatron_job_tensorboard_dir: $work/tb
megatron_job_gpus_per_node: $NGPU
megatron_job_tensor_parallel: 1
megatron_job_pipeline_parallel: 1
megatron_job_no_pipeline_parallel: true
megatron_job_num_layers: 24
megatron_job_hidden_size: 2048
megatron_job_num_attention_heads: 16
megatron_job_seq_length: 2048
megatron_job_max_position_embeddings: 2048
megatron_job_micro_batch_size: $micro
megatron_job_global_batch_size: $((micro * NGPU * 4))
megatron_job_train_iters: ${iters:-20}
megatron_job_lr_warmup_iters: 2
megatron_job_log_interval: 5
megatron_job_eval_interval: 1000
megatron_job_eval_iters: 1
megatron_job_save_interval: 100000
megatron_job_zero_stage: 1
megatron_job_precision: bf16
megatron_job_use_flash_attn: $flash
megatron_job_activation_checkpointing: $acg
megatron_job_data_path: $D/corpus_text_document
megatron_job_vocab_file: $D/vocab.json
megatron_job_merge_file: $D/merges.txt
megatron_job_split: "98,1,1"
VARS
  args=()
  case "$name" in *nd*) args+=('"--attention-dropout"' '"0"' '"--hidden-dropout"' '"0"') ;; esac
  pstep=
  # Per variant: timeout=SECONDS in EXTRA, else JOB_TIMEOUT_S, else 120 s of start-up plus 20 s an
  # iteration (a fixed 170 s cut larger models off before their last iteration).
  limit=${JOB_TIMEOUT_S:-$((120 + 20 * ${iters:-20}))}
  IFS=+ read -r -a kvs <<<"$extra"
  for kv in "${kvs[@]}"; do
    [ -z "$kv" ] && continue
    case "$kv" in
      timeout=*) limit=${kv#timeout=} ;;
      profile=*) pstep=${kv#profile=}; args+=('"--profile"' '"pt"' '"--profile_steps"' "\"$pstep,$pstep\"" '"--profile-ranks"' '"0"') ;;
      *) printf 'megatron_job_%s: %s\n' "${kv%%=*}" "${kv#*=}" >> /tmp/vars-$name.yml ;;
    esac
  done
  if [ ${#args[@]} -gt 0 ]; then (IFS=,; printf 'megatron_job_extra_args: [%s]\n' "${args[*]}") >> /tmp/vars-$name.yml; fi
  printf -- '- name: Render\n  hosts: megatron_nodes\n  gather_facts: false\n  roles:\n    - role: megatron_ds.cluster.megatron_job\n' > /tmp/render.yml
  ansible-playbook -i /tmp/inv.yml /tmp/render.yml -e @/tmp/vars-$name.yml > $OUT/render-$name.log 2>&1; echo "render rc=$?"
  t0=$(date +%s)
  timeout "$limit" bash $work/train.sh; echo "train $name rc=$? seconds=$(( $(date +%s) - t0 )) limit=${limit}s"
  cp $work/train.sh $OUT/train-$name.sh; cp $work/ds_config.json $OUT/ds_config-$name.json
  grep -E "iteration +[0-9]+/" $work/logs/train.log | tail -3
  grep -E "Error|error|Traceback" $work/logs/train.log | head -5
  # -o before --: after it, grep would read "-o" as a file name.
  grep -oE -- "--no-bias-gelu-fusion|--use-flash-attn" $work/train.sh | sort -u | tr '\n' ' '; echo
  if [ -n "$pstep" ]; then
    trace=$(find $work/tb -name '*.pt.trace.json*' | head -1)
    if [ -n "$trace" ]; then
      python3 bench/gpu/trace_summary.py "$trace" | tee $OUT/trace-$name.txt; cp "$trace" $OUT/trace-$name.pt.trace.json.gz
    else echo "no trace in $work/tb"; fi
  fi
  cp $work/logs/train.log /tmp/train-$name.log
done
tar czf $OUT/mds-logs.tgz /tmp/train-*.log $OUT/*.sh $OUT/*.json $OUT/*.log 2>/dev/null
