# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build Megatron's dataset helper (megatron/data/helpers.cpp) with a compiler whose result works.

Megatron builds it at start-up with `make -C megatron/data`, which compiles with $(CXX). On the
GPU validation host the image exports CXX=/opt/gcc/bin/g++, and the helper that compiler builds
imports but crashes inside build_sample_idx, while /usr/bin/g++ builds one that works
(docs/upstream-facts.md §G). So a helper counts as built only once check_helpers.py has called it:

1. a helper that is there and passes the call is kept (nothing rebuilt: the role stays idempotent);
2. otherwise it is built with $CXX (make's own default when unset), then each other C++ compiler
   found on PATH and in /usr/bin (g++, c++, clang++; MEGATRON_DS_HELPER_CXX, colon-separated,
   replaces that list), one after the other, removing the previous attempt's helper each time,
   until one passes the call.

Prints one JSON object: {"ok", "changed", "compiler", "tried": [{compiler, make_rc, check_rc,
output}]}; exits 1 when no compiler gives a working helper.

Usage: python build_helpers.py DATA_DIR CHECK_SCRIPT [PYTHON]
"""
import glob
import json
import os
import shutil
import subprocess
import sys

FALLBACKS = ("g++", "c++", "clang++", "/usr/bin/g++", "/usr/bin/c++", "/usr/bin/clang++")


def candidates(env_cxx, which=shutil.which, fallbacks=FALLBACKS):
    """The compilers to try, in order: $CXX (None: make's default) first, then each fallback
    found, without two that resolve to the same file."""
    order = [env_cxx or None]
    seen = set()
    first = which(env_cxx) if env_cxx else which("g++")  # make's default CXX is g++
    if first:
        seen.add(os.path.realpath(first))
    for name in fallbacks:
        path = which(name)
        if not path:
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        order.append(path)
    return order


def _tail(text, limit=400):
    text = " ".join(text.split())
    return text[-limit:]


def check(python, script, data_dir):
    proc = subprocess.run([python, script, data_dir], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, check=False)
    return proc.returncode, proc.stdout


def built(data_dir):
    return glob.glob(os.path.join(data_dir, "helpers*.so"))


def build(data_dir, script, python, env_cxx, which=shutil.which, fallbacks=FALLBACKS):
    result = {"ok": False, "changed": False, "compiler": None, "tried": []}
    if built(data_dir):
        rc, out = check(python, script, data_dir)
        if rc == 0:
            result.update(ok=True, compiler="kept")
            return result
        result["tried"].append({"compiler": "the helper already there", "make_rc": None, "check_rc": rc,
                                "output": _tail(out)})
    for compiler in candidates(env_cxx, which, fallbacks):
        for old in built(data_dir):
            os.remove(old)
        argv = ["make", "-C", data_dir] + (["CXX=" + compiler] if compiler else [])
        made = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                              check=False)
        name = compiler or "make's default (g++)"
        result["changed"] = True
        if made.returncode != 0:
            result["tried"].append({"compiler": name, "make_rc": made.returncode, "check_rc": None,
                                    "output": _tail(made.stdout)})
            continue
        rc, out = check(python, script, data_dir)
        result["tried"].append({"compiler": name, "make_rc": 0, "check_rc": rc, "output": _tail(out)})
        if rc == 0:
            result.update(ok=True, compiler=name)
            return result
    return result


def main(argv):
    if len(argv) < 3:
        sys.stderr.write(__doc__)
        return 2
    data_dir, script = argv[1], argv[2]
    python = argv[3] if len(argv) > 3 else sys.executable
    # MEGATRON_DS_HELPER_CXX: the compilers to try after $CXX, colon-separated (default FALLBACKS).
    listed = os.environ.get("MEGATRON_DS_HELPER_CXX")
    fallbacks = tuple(n for n in listed.split(":") if n) if listed else FALLBACKS
    result = build(data_dir, script, python, os.environ.get("CXX"), fallbacks=fallbacks)
    print(json.dumps(result))
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
