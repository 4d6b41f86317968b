#!/usr/bin/env bash
# Run ansible-test (sanity | units) on a temporary ansible_collections/megatron_ds/cluster
# copy of the tracked and new files, because ansible-test insists on that layout.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
venv="${VENV:-$here/.venv}"
work=$(mktemp -d /tmp/mds-ansible-test.XXXXXX)
trap 'rm -rf "$work"' EXIT
dest="$work/ansible_collections/megatron_ds/cluster"
mkdir -p "$dest"
# Tracked plus untracked-but-not-ignored files: what a commit would contain.
(cd "$here" && git ls-files -co --exclude-standard -z | grep -zv '^\.collections/' \
  | xargs -0 cp --parents -t "$dest")
cd "$dest"
# ansible-test needs a git tree to know which files belong to the collection.
git init -q && git add -A >/dev/null
export PATH="$venv/bin:$PATH"
# ansible-test fetches get-pip.py from a host outside PyPI; seed its cache with our
# ensurepip-based stand-in (same interface) unless a real one is already cached.
pip_ver=$(python3 - <<'PY'
import ansible_test._internal.python_requirements as r
print(r.PIP_VERSION if hasattr(r, "PIP_VERSION") else "24.2")
PY
)
cache="$HOME/.ansible/test/cache/get_pip_${pip_ver//./_}.py"
[ -f "$cache" ] || { mkdir -p "$(dirname "$cache")"; cp "$here/scripts/get_pip_offline.py" "$cache"; }
case "${1:-sanity}" in
  sanity)
    # Runs in our venv: the sanity tools ansible-test needs are pinned in requirements.txt.
    ansible-test sanity --venv --requirements --python "$(python3 -c 'import sys;print("%d.%d"%sys.version_info[:2])')" \
      --color no "${@:2}"
    ;;
  units)
    if [ -d tests/unit ]; then
      ansible-test units --python "$(python3 -c 'import sys;print("%d.%d"%sys.version_info[:2])')" \
        --color no --requirements "${@:2}" || rc=$?
      # ansible-test returns 5 when there is nothing to test, like pytest.
      [ "${rc:-0}" = 0 ] || [ "${rc:-0}" = 5 ] || exit "$rc"
    fi
    ;;
  *) echo "usage: $0 sanity|units" >&2; exit 2 ;;
esac
