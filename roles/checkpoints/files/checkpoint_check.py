# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The megatron_checkpoint_info check outside Ansible, for the checkpoints role's systemd timer.

    checkpoint_check.py --config /etc/megatron/megatron-checkpoint-check.json

The config holds path, tag, expect, load, python and result (see the role's README). Writes the
module's result as JSON to ``result`` (atomically) and prints the summary. Exit status: 0 good,
1 problems or mismatches, 2 a bad config.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time

# The collection's module_utils, from os_base's library (tasks_from: library) on the node; the
# service names the role's os_base_library_dir in MEGATRON_DS_LIBRARY.
sys.path.insert(0, os.environ.get("MEGATRON_DS_LIBRARY", "/usr/local/lib/megatron-ds"))
from ansible_collections.megatron_ds.cluster.plugins.module_utils import _checkpoint  # noqa: E402  pylint: disable=wrong-import-position


def check(config: dict) -> dict:
    path = str(config["path"]).rstrip("/") or "/"
    report = _checkpoint.analyse(_checkpoint.scan_dir(path), tag=config.get("tag") or None,
                                 expect=config.get("expect") or {}, ranks=config.get("ranks"))
    if config.get("load") and report["tag"]:
        files = [os.path.join(path, report["tag"], entry["name"]) for entry in report["files"]
                 if entry["name"].endswith(".pt") and entry["size"] > 0]
        python = config.get("python") or "python3"
        try:
            proc = subprocess.run([python, "-c", _checkpoint.LOADER], input=json.dumps({"files": files}),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True, check=False)
            load = _checkpoint.parse_loader_output(proc.stdout)
            if proc.returncode != 0 and not load.get("files"):
                load = {"error": "%s exited %d: %s" % (python, proc.returncode, proc.stderr.strip()[-500:])}
        except OSError as exc:
            load = {"error": "cannot run %s: %s" % (python, exc)}
        _checkpoint.apply_load(report, load)
    report["summary"] = _checkpoint.summary(report)
    report["message"] = "" if report["ok"] else _checkpoint.failure_message(report, socket.gethostname())
    report["host"] = socket.gethostname()
    report["checked_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    return report


def write_atomically(path: str, data: dict) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    handle, tmp = tempfile.mkstemp(prefix=".checkpoint-check.", dir=directory)
    try:
        with os.fdopen(handle, "w") as out:
            json.dump(data, out, indent=2, sort_keys=True)
            out.write("\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--config", required=True, help="JSON file: path, tag, expect, load, python, result")
    args = parser.parse_args(argv)
    try:
        with open(args.config) as handle:
            config = json.load(handle)
        report = check(config)
    except (OSError, ValueError, KeyError) as exc:
        print("checkpoint_check: config %s: %s" % (args.config, exc), file=sys.stderr)
        return 2
    if config.get("result"):
        write_atomically(config["result"], report)
    print("\n".join(report["summary"]))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
