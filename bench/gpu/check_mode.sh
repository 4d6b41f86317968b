#!/usr/bin/env bash
# nvidia_driver and cuda_toolkit in check mode on this GPU host, as `localhost`: both must find
# the installed driver and toolkit satisfying the stack profile and report no change.
#
#   bench/gpu/check_mode.sh [profile]        # profile defaults to cu130
#
# Needs ansible-core in VENV (default /opt/torch/.venv). Writes to $OUT (default
# /tmp/gpu-check-mode); exits 0 only when the play ran with changed=0 and failed=0.
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
printf -- '- name: Driver and CUDA toolkit in check mode\n  hosts: localhost\n  roles:\n    - role: megatron_ds.cluster.nvidia_driver\n    - role: megatron_ds.cluster.cuda_toolkit\n' \
  >"$OUT/check-mode.yml"
status=0
for adopt in true false; do
  ansible-playbook -i "$OUT/inv-check.yml" "$OUT/check-mode.yml" --check --diff -e cuda_toolkit_adopt=$adopt \
    >"$OUT/check-mode-adopt-$adopt.txt" 2>&1
  rc=$?
  recap=$(grep -E '^localhost +:' "$OUT/check-mode-adopt-$adopt.txt")
  echo "cuda_toolkit_adopt=$adopt: rc=$rc $recap"
  # Ansible wraps long messages: join the lines before looking for them.
  tr -s ' \n' ' ' <"$OUT/check-mode-adopt-$adopt.txt" | grep -oE "(localhost: driver [^']{0,200}|localhost: found CUDA [^']{0,220}|changed: \[localhost\][^*]{0,120})" | head -6
  if [ "$adopt" = true ]; then
    case "$recap" in *" changed=0 "*" failed=0 "*) ;; *) status=1 ;; esac
    [ "$rc" = 0 ] || status=1
  fi
done
echo "check mode verdict (adopt=true: changed=0, failed=0): $([ $status = 0 ] && echo PASS || echo FAIL)"
exit $status
