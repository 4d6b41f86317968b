#!/usr/bin/env bash
# Run every molecule scenario given as arguments, one after another (they share the node names
# node1..node3), and make a failure readable from the last lines of the output: CI keeps only
# the tail of a long log, where molecule prints its recap but not which test failed.
#
# Each scenario's full output goes to the terminal and to .cache/molecule-logs/<scenario>.log.
# A scenario that fails is run once more from scratch: three containers on two shared cores
# time out now and then. Every failure, retried or not, is summarised at the very end (the
# failed step, pytest's short summary and the first assertion lines), so a flaky scenario shows
# in a green run's tail too.
#
#   scripts/molecule-all.sh os_base launch ...
set -uo pipefail

LOGS=.cache/molecule-logs
RETRIES=${MOLECULE_RETRIES:-1}
mkdir -p "$LOGS"
summary=()
failed=()

summarise() {  # scenario attempt log
  local text
  text=$(sed 's/\x1b\[[0-9;]*m//g' "$3" | sed 's/^ *│ *//' | grep -E \
    '^(FAILED|ERROR) |AssertionError|^E +|Executed: Failed|fatal: \[|FAILED! =>|TASK \[' \
    | grep -vE 'FAILED - RETRYING' | grep -B1 -E '^(FAILED|ERROR) |AssertionError|^E +|Executed: Failed|fatal: \[|FAILED! =>' \
    | head -n 14 | cut -c1-400)
  summary+=("--- $1 (attempt $2) failed; full log: $3" "$text")
}

for scenario in "$@"; do
  attempt=0
  while :; do
    attempt=$((attempt + 1))
    log="$LOGS/$scenario.$attempt.log"
    echo "=== molecule scenario $scenario (attempt $attempt) ==="
    molecule test -s "$scenario" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    [ "$rc" -eq 0 ] && break
    summarise "$scenario" "$attempt" "$log"
    if [ "$attempt" -gt "$RETRIES" ]; then
      failed+=("$scenario")
      break
    fi
    echo "=== $scenario failed (rc $rc); running it once more from scratch ==="
  done
done

if [ "${#summary[@]}" -gt 0 ]; then
  echo "=== molecule failures (${#summary[@]} entries; scenarios that still failed: ${failed[*]:-none}) ==="
  printf '%s\n' "${summary[@]}"
fi
if [ "${#failed[@]}" -gt 0 ]; then
  echo "molecule: FAILED: ${failed[*]}"
  exit 1
fi
echo "molecule: every scenario passed ($*)"
