#!/usr/bin/env bash
# The GPU stack roles in check mode on this GPU host, as `localhost`: nvidia_driver, cuda_toolkit,
# cudnn and nccl must find the installed driver, toolkit, cuDNN and NCCL satisfying the stack
# profile and report no change to any of them (only nccl's environment file, which is this
# collection's configuration rather than software, may be new).
#
#   bench/gpu/check_mode.sh [profile]        # profile defaults to cu130
#
# Needs ansible-core in VENV (default /opt/torch/.venv). Writes to $OUT (default
# /tmp/gpu-check-mode); exits 0 only when the play ran with failed=0 and no other change.
set -uo pipefail
PROFILE=${1:-cu130}
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/gpu-check-mode}
VENV=${VENV:-/opt/torch/.venv}
mkdir -p "$OUT"
export ANSIBLE_CONFIG="$REPO/ansible.cfg" ANSIBLE_FORCE_COLOR=0 PATH="$VENV/bin:$PATH"
cd "$REPO" || exit 1
printf 'all:\n  vars:\n    megatron_stack_profile: %s\n    ansible_connection: local\n    ansible_python_interpreter: %s/bin/python3\n  hosts:\n    localhost:\n' \
  "$PROFILE" "$VENV" >"$OUT/inv-check.yml"
printf -- '- name: GPU stack roles in check mode\n  hosts: localhost\n  roles:\n    - role: megatron_ds.cluster.nvidia_driver\n    - role: megatron_ds.cluster.cuda_toolkit\n    - role: megatron_ds.cluster.cudnn\n    - role: megatron_ds.cluster.nccl\n' \
  >"$OUT/check-mode.yml"
status=0
for adopt in true false; do
  log="$OUT/check-mode-adopt-$adopt.txt"
  ansible-playbook -i "$OUT/inv-check.yml" "$OUT/check-mode.yml" --check --diff \
    -e cuda_toolkit_adopt=$adopt -e cudnn_adopt=$adopt -e nccl_adopt=$adopt >"$log" 2>&1
  rc=$?
  echo "adopt=$adopt: rc=$rc $(grep -E '^localhost +:' "$log")"
  # Ansible wraps long messages: join the lines before looking for them.
  tr -s ' \n' ' ' <"$log" | grep -oE "localhost: (driver|found CUDA|found cuDNN|found NCCL) [^']{0,200}" | head -6
  changed=$(awk '/^TASK \[/{task=$0} /^changed: /{print task}' "$log" | sort -u)
  [ -n "$changed" ] && printf 'changed tasks:\n%s\n' "$changed"
  if [ "$adopt" = true ]; then
    [ "$rc" = 0 ] || status=1
    if printf '%s\n' "$changed" | grep -v '^$' | grep -vq 'NCCL | Write\|NCCL | Create the directory of'; then status=1; fi
  fi
done
echo "check mode verdict (adopt=true: failed=0, no software changed): $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
