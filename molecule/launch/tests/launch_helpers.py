"""Helpers of the launch scenario's verifier: run the collection's playbooks against the
scenario's inventory as an operator would, read files and processes on the nodes."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import testinfra

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch.logs import ResultParts
from ansible_collections.megatron_ds.cluster.tests.support import secret_scan
from ansible_collections.megatron_ds.cluster.tests.support.ansible_run import ansible_env, ansible_playbook_argv

SCENARIO_DIR = Path(__file__).resolve().parents[1]
PROJECT_DIR = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY", SCENARIO_DIR.parents[1]))
INVENTORY = os.environ.get("MOLECULE_INVENTORY_FILE", "")
# Read before any test runs, which stops the logging: the tests' own Ansible runs are not the
# converge's output (tests/support/secret_scan.py, test_zz_secrets.py).
secret_scan.converge_log()
NODES = ["node1", "node2", "node3"]
RANKS_PER_NODE = 2
WORKDIR = "/opt/megatron/jobs/sim-gpt"
LOG_DIR = WORKDIR + "/logs"
BURNIN_DIR = WORKDIR + "/burnin"
BURNIN_LOG = LOG_DIR + "/burnin.log"
BURNIN_CKPT = BURNIN_DIR + "/checkpoints"
TRAIN_LOG = LOG_DIR + "/train.log"
TRAIN_CKPT = "/shared/checkpoints/sim-gpt"
DATA_PREFIX = "/shared/data/sim_text_document"
MEGATRON_DIR = "/opt/megatron/Megatron-DeepSpeed"
# With MEGATRON_DS_SRC the scenario installs that real checkout; without, a toy repository.
REAL_MDS = bool(os.environ.get("MEGATRON_DS_SRC"))
START_MARK = "=== megatron_launch "
RANK_PATTERN = r"python[0-9.]* -u ([^ ]*/)?(burnin_gpt|pretrain_gpt)\.py( |$)"


def node(name: str):
    return testinfra.get_host("ansible://%s?ansible_inventory=%s" % (name, INVENTORY))


def playbook(name: str, extra_vars: Optional[Dict[str, Any]] = None, timeout: int = 900) -> Tuple[int, str]:
    """ansible-playbook playbooks/<name> on the scenario inventory; (rc, output on one line)."""
    argv = [] if not extra_vars else ["-e", json.dumps(extra_vars)]
    command = ansible_playbook_argv(INVENTORY, PROJECT_DIR / "playbooks" / name, *argv)
    started = time.monotonic()
    result = subprocess.run(command, env=ansible_env(PROJECT_DIR), cwd=PROJECT_DIR, text=True, capture_output=True,
                            timeout=timeout, check=False)
    output = result.stdout + result.stderr
    elapsed = time.monotonic() - started
    print("--- %s %s: rc %d in %.0f s\n%s" % (name, extra_vars or "", result.returncode, elapsed, output[-6000:]))
    return result.returncode, " ".join(output.replace("\\n", " ").split())


def status() -> Dict[str, Any]:
    """status.yml's JSON report."""
    with tempfile.TemporaryDirectory() as tmp:
        dest = os.path.join(tmp, "status.json")
        rc, output = playbook("status.yml", {"megatron_launch_status_dest": dest})
        assert rc == 0, output
        with open(dest, encoding="utf-8") as handle:
            return json.load(handle)


def ranks(name: str) -> List[str]:
    """Command lines of the burn-in / pretrain rank processes on a node."""
    out = node(name).run("pgrep -af %s", RANK_PATTERN)
    return [line for line in out.stdout.splitlines() if line.strip()]


def run_log(path: str, host: str = "node1") -> List[str]:
    """The lines of the last launch in a log (from its last start marker on)."""
    text = node(host).file(path).content_string if node(host).file(path).exists else ""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith(START_MARK) and ": start " in line]
    return lines[starts[-1]:] if starts else []


def start_markers(path: str, host: str = "node1") -> int:
    target = node(host).file(path)
    if not target.exists:
        return 0
    return sum(1 for line in target.content_string.splitlines()
               if line.startswith(START_MARK) and ": start " in line)


def burnin_results(lines: List[str]) -> List[Dict[str, Any]]:
    """Every rank's burn-in result, read from its BURNIN_RESULT_PART lines as the collection reads
    them (_launch/logs.py ResultParts), with the pdsh prefix (the node that printed it) added.

    The parts are gathered per prefix: a rank whose parts came from two nodes is incomplete on
    both, and fails the test that expects it."""
    by_prefix: Dict[Optional[str], ResultParts] = {}
    for line in lines:
        prefix = re.match(r"^(\S+): ", line)
        by_prefix.setdefault(prefix.group(1) if prefix else None, ResultParts()).add(line)
    results = []
    for prefix, parts in by_prefix.items():
        found, problems = parts.results()
        assert not problems, problems
        for value in found:
            value["pdsh_prefix"] = prefix
            results.append(value)
    return results


def checkpoint_files(host: str, directory: str, tag: str) -> List[str]:
    out = node(host).run("ls -1 %s", "%s/%s" % (directory, tag))
    return sorted(out.stdout.split()) if out.rc == 0 else []


def latest(host: str, directory: str) -> Optional[str]:
    target = node(host).file(directory + "/latest")
    return target.content_string.strip() if target.exists else None


def module(host: str, name: str, args: Dict[str, Any]) -> Dict[str, Any]:
    """One module call on a node, as `ansible HOST -m NAME -a JSON` (become); its result."""
    env = ansible_env(PROJECT_DIR)
    env.update(ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json")
    command = [str(Path(sys.executable).parent / "ansible"), host, "-i", INVENTORY, "--become",
               "-m", name, "-a", json.dumps(args)]
    result = subprocess.run(command, env=env, cwd=PROJECT_DIR, text=True, capture_output=True, timeout=300, check=False)
    try:
        plays = json.loads(result.stdout)["plays"]
        return plays[0]["tasks"][0]["hosts"][host]
    except (ValueError, KeyError, IndexError) as exc:
        raise AssertionError("ansible %s -m %s: %s\n%s%s" % (host, name, exc, result.stdout[-3000:], result.stderr[-3000:]))


def stop_saving(ckpt: str) -> Tuple[int, str, str]:
    """stop.yml as an operator runs it, whatever the backend: every rank saves on SIGTERM and is
    gone afterwards, and node1 holds the new tag under ``ckpt``. Returns (step, tag, output)."""
    rc, output = playbook("stop.yml")
    assert rc == 0, output
    assert "every rank saved on SIGTERM" in output
    for name in NODES:
        assert ranks(name) == [], (name, ranks(name))
    tag = latest("node1", ckpt)
    assert tag and tag.startswith("global_step"), tag
    step = int(tag[len("global_step"):])
    assert step >= 3
    return step, tag, output


def assert_saved_on_sigterm(lines: List[str], ckpt: str, tag: str) -> None:
    """The job's log has the SIGTERM save of ``tag`` and the launcher's clean exit."""
    assert any("BURNIN checkpoint %s/%s (SIGTERM)" % (ckpt, tag) in line for line in lines), lines[-20:]
    assert any("launcher exited rc=0" in line for line in lines), lines[-10:]
