#!/bin/sh
# A stand-in Megatron-DeepSpeed checkout: a real git repository with two commits, at the path
# the job uses. Megatron-DeepSpeed itself cannot be fetched here (no GitHub), and preflight only
# reads the checkout's HEAD commit and whether it looks like Megatron (a megatron/ package).
# Authors, dates and contents are fixed, so every node gets the same two commit ids, as nodes
# that cloned the same repository at the same ref would. The drift test checks out the first.
set -eu
dir=$1
git init -q -b main "$dir"
cd "$dir"
export GIT_AUTHOR_NAME="megatron_ds.cluster tests" GIT_AUTHOR_EMAIL="tests@megatron-ds.invalid"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
mkdir -p megatron
printf '"""Stand-in for the Megatron-DeepSpeed package (molecule/preflight_drift)."""\n' >megatron/__init__.py
printf 'Stand-in Megatron-DeepSpeed checkout for molecule/preflight_drift.\n' >README.md
git add -A
GIT_AUTHOR_DATE="2026-01-01T00:00:00Z" GIT_COMMITTER_DATE="2026-01-01T00:00:00Z" \
  git -c commit.gpgsign=false commit -q -m "Stand-in checkout: first commit"
printf 'Second revision.\n' >>README.md
git add -A
GIT_AUTHOR_DATE="2026-01-02T00:00:00Z" GIT_COMMITTER_DATE="2026-01-02T00:00:00Z" \
  git -c commit.gpgsign=false commit -q -m "Stand-in checkout: second commit"
