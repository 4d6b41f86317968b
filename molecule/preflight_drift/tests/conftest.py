"""Fixtures for the preflight drift scenario: the cluster, the gate runs, the report reader.

molecule verify runs these tests with MOLECULE_INVENTORY_FILE set (and the provisioner's
environment). The tests drive the real thing: `ansible-playbook playbooks/preflight.yml`, or
gate.yml (the same facts module and preflight action, see that file), against that inventory.
Nodes are changed and restored through testinfra hosts (docker exec for this driver).
"""
from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

import pytest
import testinfra
import yaml
from testinfra.utils.ansible_runner import AnsibleRunner

SCENARIO = Path(__file__).resolve().parents[1]
PROJECT = Path(os.environ.get("MOLECULE_PROJECT_DIRECTORY") or SCENARIO.parents[1])
TIMINGS: List[Tuple[str, float]] = []


def stack() -> Dict[str, object]:
    """vars/stack.yml as data: its literal values (paths, versions, the stand-in)."""
    return yaml.safe_load((SCENARIO / "vars" / "stack.yml").read_text())


# --------------------------------------------------------------------------- the verdict table
@dataclass(frozen=True)
class Row:
    status: str
    check: str
    node: str
    component: str
    found: str
    expected: str
    fix: str

    @property
    def key(self) -> Tuple[str, str, str, str]:
        return (self.check, self.node, self.component, self.found)


def report_rows(json_path: str) -> List[Row]:
    """Every row of a preflight report file (the action writes one per run; the task output
    shows only failures and warnings). FAIL and WARN upper case, as the output prints them."""
    data = json.loads(Path(json_path).read_text())
    rows = []
    for item in data["rows"]:
        status = item["status"].upper() if item["status"] in ("fail", "warn") else item["status"]
        rows.append(Row(status, item["check"], item["node"], item["component"], item["found"], item["expected"],
                        item["fix"]))
    assert rows, "a preflight report without rows: %s" % json_path
    return rows


def report_of(output: str) -> str:
    """The JSON report named by the summary line in ``output`` (wrapped lines joined)."""
    match = re.search(r"preflight (?:passed|FAILED) for profile .*?; report: (\S+\.txt)", " ".join(output.split()))
    assert match, "no preflight summary naming a report in the output:\n%s" % output[-4000:]
    return match.group(1)[:-len(".txt")] + ".json"


def failures(rows: Iterable[Row]) -> List[Row]:
    return [row for row in rows if row.status == "FAIL"]


def new_failures(rows: Iterable[Row], baseline: Iterable[Row]) -> List[Row]:
    """FAIL rows that the clean cluster did not have (same check, node, component and found)."""
    known = {row.key for row in failures(baseline)}
    return [row for row in failures(rows) if row.key not in known]


# --------------------------------------------------------------------------- running Ansible
@dataclass
class Run:
    rc: int
    output: str
    seconds: float
    rows: List[Row] = field(default_factory=list)


def _env() -> Dict[str, str]:
    env = dict(os.environ)
    # ansible-playbook of the Python that runs these tests (the project's venv), first.
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
    env.setdefault("ANSIBLE_CONFIG", str(PROJECT / "ansible.cfg"))
    env.setdefault("ANSIBLE_COLLECTIONS_PATH", str(PROJECT / ".collections"))
    env.setdefault("ANSIBLE_CACHE_PLUGIN", "memory")
    env.update(ANSIBLE_FORCE_COLOR="0", ANSIBLE_NOCOLOR="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    return env


def ansible_playbook(playbook: Path, inventories: Sequence[str], extra_vars: Optional[Dict[str, str]] = None) -> Run:
    argv = ["ansible-playbook", str(playbook)]
    for inventory in inventories:
        argv += ["-i", inventory]
    for key, value in (extra_vars or {}).items():
        argv += ["-e", "%s=%s" % (key, value)]
    started = time.monotonic()
    proc = subprocess.run(argv, cwd=str(PROJECT), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, timeout=900, check=False)
    return Run(proc.returncode, proc.stdout, time.monotonic() - started)


# --------------------------------------------------------------------------- the cluster
class Cluster:
    """The molecule nodes, their testinfra hosts, and the two ways to run the gate."""

    def __init__(self, inventory: str, tmp: Path) -> None:
        self.inventory = inventory
        self.tmp = tmp
        runner = AnsibleRunner.get_runner(inventory)
        self.nodes = sorted(runner.get_hosts("megatron_nodes"))
        assert len(self.nodes) == 3, "the drift matrix needs three nodes, got %s" % self.nodes
        self._hosts: Dict[str, testinfra.host.Host] = {}
        self.stack = stack()
        # The job settings every node shares (molecule.yml group_vars).
        self.vars = runner.get_variables(self.nodes[0])
        self.venv = str(self.vars["megatron_job_venv"])
        self.megatron_dir = str(self.vars["megatron_job_megatron_dir"])

    def host(self, node: str):
        if node not in self._hosts:
            self._hosts[node] = testinfra.get_host("ansible://%s?ansible_inventory=%s" % (node, self.inventory))
        return self._hosts[node]

    def sh(self, node: str, command: str, *args: str) -> str:
        """Run a command as root on the node; fail the test with its output if it fails."""
        result = self.host(node).run(command, *args)
        assert result.rc == 0, "%s on %s: exit %s\n%s%s" % (command, node, result.rc, result.stdout, result.stderr)
        return result.stdout

    def write(self, node: str, path: str, content: str) -> None:
        encoded = base64.b64encode(content.encode()).decode()
        self.sh(node, "echo %s | base64 -d > %s", encoded, path)

    def read(self, node: str, path: str) -> str:
        return self.host(node).file(path).content_string

    def memlock_ceiling(self, node: str) -> str:
        """The container runtime's hard memlock limit (PID 1), as `ulimit -l` prints it."""
        for line in self.read(node, "/proc/1/limits").splitlines():
            if line.startswith("Max locked memory"):
                hard = line.split()[4]
                return "unlimited" if hard == "unlimited" else str(int(hard) // 1024)
        raise AssertionError("no 'Max locked memory' in /proc/1/limits on %s" % node)

    def extra_inventory(self, name: str, host_vars: Dict[str, Dict[str, str]]) -> str:
        """A second inventory source that only sets host variables (later sources win)."""
        path = self.tmp / ("%s.yml" % name)
        path.write_text(yaml.safe_dump({"all": {"hosts": host_vars}}))
        return str(path)

    def preflight(self, label: str, extra_inventories: Sequence[str] = ()) -> Run:
        """playbooks/preflight.yml end to end, as an operator runs it."""
        run = ansible_playbook(PROJECT / "playbooks" / "preflight.yml", [self.inventory, *extra_inventories])
        TIMINGS.append(("playbooks/preflight.yml: " + label, run.seconds))
        run.rows = report_rows(report_of(run.output))
        return run

    def gate(self, label: str, gather: Optional[str] = None, baseline: Optional[Path] = None,
             extra_inventories: Sequence[str] = ()) -> Dict[str, object]:
        """gate.yml: facts of ``gather`` (default every node) plus the baseline's, two profiles."""
        out = self.tmp / ("gate-%s.json" % label)
        extra = {"preflight_drift_gate_out": str(out)}
        if gather:
            extra["preflight_drift_gate_gather"] = gather
        if baseline:
            extra["preflight_drift_gate_baseline"] = str(baseline)
        run = ansible_playbook(SCENARIO / "gate.yml", [self.inventory, *extra_inventories], extra)
        TIMINGS.append(("gate.yml: " + label, run.seconds))
        assert run.rc == 0, "gate.yml failed:\n%s" % run.output[-6000:]
        data = json.loads(out.read_text())
        data["path"] = out
        data["rows"] = {profile: report_rows(result["report"]["json"]) for profile, result in data["results"].items()}
        return data


@pytest.fixture(scope="session")
def cluster(tmp_path_factory) -> Cluster:
    inventory = os.environ.get("MOLECULE_INVENTORY_FILE")
    if not inventory:
        pytest.skip("MOLECULE_INVENTORY_FILE is not set: run through `molecule verify -s preflight_drift`")
    return Cluster(inventory, tmp_path_factory.mktemp("preflight_drift"))


def pytest_terminal_summary(terminalreporter) -> None:
    """Say what each gate run cost: the scenario's wall time is mostly these."""
    if TIMINGS:
        terminalreporter.section("preflight_drift: gate runs")
        for label, seconds in TIMINGS:
            terminalreporter.write_line("%6.1f s  %s" % (seconds, label))
        terminalreporter.write_line("%6.1f s  in all" % sum(seconds for _label, seconds in TIMINGS))


def expected_memlock_failures(cluster: Cluster) -> Set[Tuple[str, str, str, str]]:
    """The memlock rows a clean node cannot avoid: where the container runtime caps memlock.

    Raising a limit past its hard ceiling needs CAP_SYS_RESOURCE. Where the Docker engine itself
    lacks it (`docker run --ulimit memlock=-1:-1` fails with "error setting rlimit type 8:
    operation not permitted"), no process in the containers can get unlimited memlock, and
    pam_limits leaves sessions at the ceiling. On such machines the clean cluster fails
    memlock.unlimited, on every node, with exactly the ceiling; elsewhere it must pass.
    """
    expected = set()
    for node in cluster.nodes:
        ceiling = cluster.memlock_ceiling(node)
        if ceiling != "unlimited":
            expected.add(("memlock.unlimited", node, "memlock", "current %s, non-interactive ssh %s" % (ceiling, ceiling)))
    return expected
