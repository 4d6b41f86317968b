#!/usr/bin/env bash
# The planner's first choice and its runner-up on one GPU, for the GPT and the llama preset,
# without and with the fused ops, in one device call (issue 42, part 1): prepares the host with
# mds_grid_setup.sh (apex built there unless SRC/apex-built.tgz is given), then runs the rendered
# rows one after another, starting none after LAST_START_S seconds from the call's start.
#   SRC: what `mds_grid.py render --dest SRC` wrote, plus SRC/{whl,mds,apex,flash_attn,data}
#   OUT=... bench/gpu/h1_picks.sh SRC [LAST_START_S] [ROWS]
set -uo pipefail
SRC=${1:?usage: h1_picks.sh SRC [LAST_START_S] [ROWS]}
LAST_START_S=${2:-470}
ROWS=${3:-h1-gpt-z1-m8,h1-gpt-z1-m8-fx,h1-llamap-z1-m8,h1-llamap-z1-m8-fx,h1-gpt-z2-m8,h1-gpt-z2-m8-fx,h1-llamap-z2-m8,h1-llamap-z2-m8-fx}
OUT=${OUT:-/tmp/h1-picks-out}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
t0=$(date +%s)
if ! OUT=$OUT bash "$HERE/mds_grid_setup.sh" "$SRC" >"$OUT/setup.log" 2>&1; then
  echo "setup failed after $(($(date +%s) - t0)) s"; tail -40 "$OUT/setup.log"; exit 1
fi
grep "^\[setup" "$OUT/setup.log"; head -3 "$OUT/env.txt"
elapsed=$(($(date +%s) - t0))
echo "setup took ${elapsed} s; rows may start until ${LAST_START_S} s"
export PYTHONUNBUFFERED=1
/opt/torch/.venv/bin/python3 "$HERE/mds_grid.py" run --jobs "$SRC/jobs" --data "$SRC/data" --out "$OUT" \
  --only "$ROWS" --budget-s $((LAST_START_S - elapsed)) --job-timeout-s 110
echo "call took $(($(date +%s) - t0)) s"
