# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the RECORD check of a whole venv against the one of torch, DeepSpeed and apex only.

The preflight's facts call checks every distribution of the training venv against pip's RECORD
(sizes for every file, the sha256 of files written after the install; see
plugins/module_utils/_facts/integrity.py). Before, it checked the three training packages only.
This script times both on one venv, alternating them in each round so that a noisy machine
slows both alike, and prints the medians side by side with their ratio:

* ``stack``: check_record of torch, deepspeed and apex (what the facts call did before);
* ``whole``: python_stack.add_installed_files, every distribution, as the facts call does now;
* ``whole+edit``: the same with the largest file of torch given a new mtime (its content
  untouched, its mtime put back afterwards), so that the hashing path runs too.

The page cache is warm after the first round (the preflight's facts call meets a warm cache on
a node that just ran training or provisioning, and a cold one after a reboot); the cold first
round is printed apart.

    .venv/bin/python bench/venv_integrity.py                 # the project's own venv
    .venv/bin/python bench/venv_integrity.py --venv /opt/megatron/venv --repeat 9
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".collections"))

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import host as _host  # noqa: E402
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import integrity as _integrity  # noqa: E402
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import python_stack as _python_stack  # noqa: E402


def _venv(path: str) -> "_python_stack._Venv":
    host = _host.Host(root="/", run=lambda argv, timeout: (127, "", "no process"), timeout=5)
    series = "%d.%d" % sys.version_info[:2]
    return _python_stack._Venv(host, path, series)


def stack_only(path: str) -> int:
    venv = _venv(path)
    checked = 0
    for name in _python_stack.CHECKED_DISTRIBUTIONS:
        _version, meta_dir, _versions = venv.dist(name)
        if meta_dir:
            checked += _integrity.check_record(venv.host.read_bytes, venv.host.path, meta_dir)["checked"]
    return checked


def whole(path: str) -> int:
    venv = _venv(path)
    facts = {name: {} for name in _python_stack.CHECKED_DISTRIBUTIONS}
    _python_stack.add_installed_files(venv, facts)
    own = sum(facts[name]["files"]["checked"] for name in _python_stack.CHECKED_DISTRIBUTIONS)
    return own + facts["packages"]["files"]["checked"]


def files_after_edit(path: str, biggest, stamp) -> int:
    """Files compared, and hashed, with the edit case's newer mtime in place."""
    if not biggest:
        return 0
    os.utime(biggest)
    try:
        return whole(path)
    finally:
        os.utime(biggest, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))


def timed(func, path: str) -> float:
    start = time.perf_counter()
    func(path)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--venv", default=str(REPO / ".venv"))
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    venv = _venv(args.venv)
    if not venv.sites:
        print("no site-packages under %s" % args.venv)
        return 2
    # The hashing path: the largest file torch's RECORD lists gets a new mtime (its content is
    # untouched, so the check still passes), and its old mtime is put back afterwards.
    _version, meta_dir, _versions = venv.dist("torch")
    biggest, size, stamp = None, 0, None
    if meta_dir:
        site = os.path.dirname(meta_dir)
        entries = _integrity.parse_record_entries(Path(meta_dir, "RECORD").read_text())
        sized = [(size, rel) for rel, _digest, size in entries if size and not rel.startswith("..")]
        if sized:
            size, rel = max(sized)
            biggest = os.path.join(site, rel)
            stamp = os.stat(biggest)
    cold = {"stack": timed(stack_only, args.venv), "whole": timed(whole, args.venv)}
    rounds = {"stack": [], "whole": [], "whole+edit": []}
    files = {}
    try:
        for _round in range(args.repeat):
            rounds["stack"].append(timed(stack_only, args.venv))
            rounds["whole"].append(timed(whole, args.venv))
            if biggest:
                os.utime(biggest)
                rounds["whole+edit"].append(timed(whole, args.venv))
                os.utime(biggest, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        files = {"stack": stack_only(args.venv), "whole": whole(args.venv), "whole+edit": files_after_edit(args.venv, biggest, stamp)}
    finally:
        if biggest:
            os.utime(biggest, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
    print("venv %s: %d distributions; newer mtime for the edit case: %s (%d bytes)" % (
        args.venv, len(venv.dists), biggest or "none", size))
    print("first (cold) round: stack %.3f s, whole %.3f s" % (cold["stack"], cold["whole"]))
    base = statistics.median(rounds["stack"])
    print("%-11s %8s %10s %12s %8s" % ("check", "files", "median s", "min-max", "x stack"))
    for name, times in rounds.items():
        if not times:
            continue
        med = statistics.median(times)
        spread = "%.3f-%.3f" % (min(times), max(times))
        print("%-11s %8d %10.3f %12s %8.2f" % (name, files.get(name, 0), med, spread, med / base if base else float("nan")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
