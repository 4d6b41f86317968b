#!/usr/bin/env bash
# GPU validation of the collection on one host, as `localhost` (issue: real-GPU validation).
#
#   bench/gpu/validate_host.sh [profile]        # profile defaults to cu130
#
# Needs, on that host: a Python venv with torch, DeepSpeed and ansible-core (VENV, default
# /opt/torch/.venv), and optionally a Megatron-DeepSpeed checkout (MEGATRON_DS_SRC). Runs:
#   1. gpu_stack_facts on the real hardware;
#   2. nvidia_driver, cuda_toolkit, cudnn and nccl in check mode (bench/gpu/check_mode.sh: no change);
#      preflight for the matching profile (must pass), for cu117 (must fail, saying why), and
#      on two inventory "nodes" of this host whose Megatron-DeepSpeed checkouts differ (must
#      fail naming that node) when MEGATRON_DS_PREV points at a second checkout;
#   3. the bare bf16 matmul rate per GPU and the all-reduce bus bandwidth across all GPUs;
#   4. the burn-in GPT through the DeepSpeed launcher on 1 GPU and on all GPUs, from job files
#      rendered by the megatron_job role.
# Results go to $OUT (default /tmp/gpu-validation) and a summary to stdout.
set -uo pipefail
PROFILE=${1:-cu130}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/gpu-validation}
VENV=${VENV:-/opt/torch/.venv}
MEGATRON_DS_SRC=${MEGATRON_DS_SRC:-}
MEGATRON_DS_PREV=${MEGATRON_DS_PREV:-}
mkdir -p "$OUT"
# NVLink multicast stays off on shared hosts (it can take the GPUs out of service).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export PYTHONUNBUFFERED=1 ANSIBLE_CONFIG="$REPO/ansible.cfg" ANSIBLE_FORCE_COLOR=0
export PATH="$VENV/bin:$PATH"
NGPU=$(nvidia-smi -L | wc -l)
cd "$REPO" || exit 1

inventory() {  # inventory NAME... : local-connection "nodes" of this host
  printf 'all:\n  vars:\n    megatron_stack_profile: %s\n    megatron_job_venv: %s\n' "$PROFILE" "$VENV"
  printf '    megatron_job_gpus_per_node: %s\n    megatron_job_user: root\n    megatron_job_group: root\n' "$NGPU"
  printf '    ansible_connection: local\n    ansible_python_interpreter: %s/bin/python3\n' "$VENV"
  printf '  children:\n    megatron_head:\n      hosts:\n        %s:\n    megatron_nodes:\n      hosts:\n' "$1"
  for node in "$@"; do
    dir=$MEGATRON_DS_SRC
    [ "$node" = gpu-b ] && dir=$MEGATRON_DS_PREV
    printf '        %s:\n' "$node"
    [ -n "$dir" ] && printf '          megatron_job_megatron_dir: %s\n' "$dir"
  done
  return 0
}
step() { printf '\n=== %s\n' "$*"; }

step "facts: gpu_stack_facts on $(hostname)"
inventory localhost >"$OUT/inv-one.yml"
ansible -i "$OUT/inv-one.yml" localhost -m megatron_ds.cluster.gpu_stack_facts \
  -a "venv=$VENV megatron_dir=${MEGATRON_DS_SRC:-/nonexistent}" -o >"$OUT/facts.txt" 2>&1
python3 - "$OUT/facts.txt" >"$OUT/facts.json" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
print(json.dumps(json.loads(text[text.index("{"):])["ansible_facts"]["gpu_stack_facts"], indent=1))
PY
python3 - "$OUT/facts.json" <<'PY'
import json, sys
f = json.load(open(sys.argv[1]))
print("driver %s (%s) | %d x %s %s MiB | CUDA %s via %s | cuDNN %s | NCCL %s | torch %s cuda %s cudnn %s nccl %s | DeepSpeed %s | apex %s/%s | memlock %s"
      % (f["driver"]["version"], f["driver"]["kernel_module"], f["gpus"]["count"], f["gpus"]["model"],
         f["gpus"]["memory_mib"], f["cuda"]["version"], f["cuda"]["source"], f["cudnn"]["version"],
         f["nccl"]["version"], f["torch"]["version"], f["torch"]["cuda"], f["torch"]["cudnn"],
         f["torch"]["nccl"], f["deepspeed"]["version"], f["apex"]["present"], f["apex"]["cuda_ext"],
         f["memlock"]["current"]))
PY

step "check mode: nvidia_driver, cuda_toolkit, cudnn, nccl for profile $PROFILE (expect no software change)"
OUT="$OUT/check-mode" VENV="$VENV" bash "$REPO/bench/gpu/check_mode.sh" "$PROFILE"

for prof in "$PROFILE" cu117; do
  step "preflight: profile $prof on this host (expect $([ "$prof" = "$PROFILE" ] && echo pass || echo fail))"
  ansible-playbook -i "$OUT/inv-one.yml" playbooks/preflight.yml -e megatron_stack_profile="$prof" \
    >"$OUT/preflight-$prof.txt" 2>&1
  echo "rc=$?"
  grep -E 'FAIL|WARN|pass|fail' "$OUT/preflight-$prof.txt" | grep -v '^ok:' | cut -c1-220 | head -30
done

if [ -n "$MEGATRON_DS_PREV" ]; then
  step "preflight: injected mismatch, node gpu-b has another Megatron-DeepSpeed commit (expect fail naming gpu-b)"
  inventory gpu-a gpu-b >"$OUT/inv-two.yml"
  ansible-playbook -i "$OUT/inv-two.yml" playbooks/preflight.yml >"$OUT/preflight-mismatch.txt" 2>&1
  echo "rc=$?"
  grep -E 'gpu-b' "$OUT/preflight-mismatch.txt" | grep -iE 'fail|megatron' | head -5
fi

step "matmul: bare bf16 rate per GPU"
python3 bench/gpu/matmul.py | tee "$OUT/matmul.jsonl"

step "all-reduce: bus bandwidth across $NGPU GPUs"
python3 -m torch.distributed.run --standalone --nproc_per_node "$NGPU" bench/gpu/allreduce.py \
  --sizes-mb 16,256,1024,4096 2>&1 | grep '^{' | tee "$OUT/allreduce.jsonl"

for ngpu in 1 "$NGPU"; do
  step "burn-in: DeepSpeed launcher, $ngpu GPU(s), job files from the megatron_job role"
  work=/tmp/burnin-$ngpu
  cat >"$OUT/burnin-vars-$ngpu.yml" <<VARS
megatron_job_name: burnin$ngpu
megatron_job_workdir: $work
megatron_job_megatron_dir: $REPO/roles/megatron_launch/files
megatron_job_checkpoint_dir: $work/ckpt
megatron_job_tensorboard_dir: $work/tb
megatron_job_gpus_per_node: $ngpu
megatron_job_tensor_parallel: 1
megatron_job_pipeline_parallel: 1
megatron_job_micro_batch_size: 8
megatron_job_global_batch_size: $((8 * ngpu))
megatron_job_zero_stage: 1
megatron_job_precision: bf16
VARS
  ansible-playbook -i "$OUT/inv-one.yml" /dev/stdin -e @"$OUT/burnin-vars-$ngpu.yml" >"$OUT/render-$ngpu.txt" 2>&1 <<'PLAY'
- name: Render the burn-in job files
  hosts: megatron_nodes
  gather_facts: false
  roles:
    - role: megatron_ds.cluster.megatron_job
PLAY
  echo "render rc=$?"
  (cd "$work" && deepspeed --num_gpus "$ngpu" --master_port $((29500 + ngpu)) \
    "$REPO/roles/megatron_launch/files/burnin_gpt.py" --ds-config "$work/ds_config.json" \
    --layers 24 --hidden 2048 --heads 16 --seq 2048 --vocab 50304 --steps 30 \
) >"$OUT/burnin-$ngpu.log" 2>&1
  echo "burn-in rc=$?"
  grep BURNIN_RESULT "$OUT/burnin-$ngpu.log" | head -2 | cut -c1-600
done
step "validation finished"
