"""monitoring on three nodes, checked from inside the cluster the way an operator would look.

Per-node tests take testinfra's ``host`` fixture; the cluster tests open node1 (the head node)
through the molecule inventory and ask Prometheus's HTTP API from there, polling with deadlines
because scrapes and rule evaluations run every 2 s in this scenario.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testinfra

NODES = ["node1", "node2", "node3"]
HEAD = "node1"
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
REPO = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
LOG = "/var/log/megatron/train.log"
STALL_SECONDS = 40
FETCH = (
    "import sys, urllib.request\n"
    "try:\n"
    "    r = urllib.request.urlopen(sys.argv[1], timeout=5)\n"
    "    print(r.status); sys.stdout.write(r.read().decode())\n"
    "except OSError as e:\n"
    "    print('ERR', e)\n"
)
HEALTHY_LINE = (
    " iteration       {it}/     100 | consumed samples:          240 | consumed tokens:       245760 |"
    " elapsed time per iteration (ms): 801.0 | learning rate: 5.800E-05 | global batch size:     8 |"
    " lm loss: 9.112345E+00 | loss scale: 1.0 | grad norm: 1.956 | actual seqlen:  1024 |"
    " number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 9.980 |"
    " tokens per gpu per second (tgs): 5110.200 | TFLOPs: 122.00 |"
)
NAN_LINE = (
    " iteration       {it}/     100 | consumed samples:          320 | consumed tokens:       327680 |"
    " elapsed time per iteration (ms): 790.0 | learning rate: 5.700E-05 | global batch size:     8 |"
    " lm loss: NAN | loss scale: 1.0 | grad norm: nan | actual seqlen:  1024 |"
    " number of skipped iterations:   0 | number of nan iterations:   1 | samples per second: 10.127 |"
    " tokens per gpu per second (tgs): 5185.000 | TFLOPs: 123.80 |"
)


def node(name: str):
    return testinfra.get_host(f"ansible://{name}?ansible_inventory={INVENTORY}")


def address(host) -> str:
    return host.check_output("hostname -I").split()[0]


def fetch(host, url: str):
    """(status or None, body) of a GET from inside the node."""
    out = host.check_output("python3 -c %s %s", FETCH, url)
    first, _newline, body = out.partition("\n")
    return (int(first) if first.isdigit() else None), body


def api(path: str):
    head = node(HEAD)
    status, body = fetch(head, f"http://{address(head)}:9090{path}")
    assert status == 200, f"Prometheus {path}: {body}"
    return json.loads(body)["data"]


def wait_for(check, timeout: float, what: str, interval: float = 2.0):
    deadline = time.time() + timeout
    last = None
    while time.time() < deadline:
        ok, last = check()
        if ok:
            return last
        time.sleep(interval)
    pytest.fail(f"{what} not seen within {timeout:.0f} s; last: {last}")


def firing(name: str):
    alerts = api("/api/v1/alerts")["alerts"]
    return [a for a in alerts if a["labels"]["alertname"] == name and a["state"] == "firing"]


def append(line: str) -> None:
    head = node(HEAD)
    head.run_expect([0], "runuser -u megatron -- bash -c %s", f"printf '%s\\n' '{line}' >> {LOG}")


# --- every node ------------------------------------------------------------------------------


def test_node_exporter_listens_on_the_cluster_address_only(host):
    assert host.service("prometheus-node-exporter").is_running
    assert host.service("prometheus-node-exporter").is_enabled
    status, body = fetch(host, f"http://{address(host)}:9100/metrics")
    assert status == 200
    assert "node_memory_MemTotal_bytes" in body
    assert fetch(host, "http://127.0.0.1:9100/metrics")[0] is None, "node_exporter answers on loopback"


def test_gpu_collector_says_there_is_no_nvidia_smi(host):
    assert host.service("megatron-gpu-metrics.timer").is_enabled
    assert host.run("systemctl is-active megatron-gpu-metrics.timer").stdout.strip() == "active"
    textfile = host.file("/var/lib/prometheus/node-exporter/megatron_gpu.prom")
    assert textfile.mode == 0o644
    assert 'megatron_gpu_collector_up{reason="nvidia_smi_missing",source=""} 0' in textfile.content_string
    # ...and node_exporter publishes it.
    _status, body = fetch(host, f"http://{address(host)}:9100/metrics")
    assert 'megatron_gpu_collector_up{reason="nvidia_smi_missing",source=""} 0' in body


# --- head node -------------------------------------------------------------------------------


def test_prometheus_scrapes_every_node_and_the_log_exporter():
    addrs = {name: address(node(name)) for name in NODES}

    def check():
        targets = api("/api/v1/targets")["activeTargets"]
        health = {(t["labels"]["job"], t["labels"].get("node")): t["health"] for t in targets}
        wanted = {("node", name) for name in NODES} | {("megatron_train", HEAD)}
        return all(health.get(key) == "up" for key in wanted), health

    health = wait_for(check, 90, "every node_exporter and the log exporter up")
    assert set(health) >= {("node", n) for n in NODES}
    targets = {t["labels"]["node"]: t["scrapeUrl"] for t in api("/api/v1/targets")["activeTargets"]
               if t["labels"]["job"] == "node"}
    for name in NODES:
        assert targets[name] == f"http://{addrs[name]}:9100/metrics"
    result = api("/api/v1/query?query=up%7Bjob%3D%22megatron_train%22%7D")["result"]
    assert [r["value"][1] for r in result] == ["1"]


def test_rules_are_valid_and_loaded_with_the_scenario_thresholds():
    head = node(HEAD)
    check = head.run("promtool check rules /etc/prometheus/rules/megatron.rules.yml")
    assert check.rc == 0, check.stdout + check.stderr
    rules = {r["name"]: r for g in api("/api/v1/rules")["groups"] for r in g["rules"]}
    assert set(rules) >= {
        "MegatronNodeDown", "MegatronGpuMemoryHigh", "MegatronGpuUtilizationImbalance",
        "MegatronCheckpointDiskFilling", "MegatronTrainingLossNonFinite",
        "MegatronTrainingLossSpike", "MegatronTrainingStalled",
    }
    assert rules["MegatronTrainingStalled"]["query"] == f"megatron_train_seconds_since_last_iteration > {STALL_SECONDS}"
    assert "> 90" in rules["MegatronGpuMemoryHigh"]["query"]
    assert 'mountpoint="/"' in rules["MegatronCheckpointDiskFilling"]["query"]


def test_prometheus_and_alertmanager_listen_on_the_head_address_only():
    head = node(HEAD)
    for port in (9090, 9093, 9701):
        assert fetch(head, f"http://{address(head)}:{port}/")[0] in (200, 302), port
        assert fetch(head, f"http://127.0.0.1:{port}/")[0] is None, f"port {port} answers on loopback"
    managers = api("/api/v1/alertmanagers")["activeAlertmanagers"]
    assert [m["url"] for m in managers] == [f"http://{address(head)}:9093/api/v2/alerts"]
    config = head.file("/etc/prometheus/alertmanager.yml")
    assert config.mode == 0o640
    assert "name: 'null'" in config.content_string or "name: null" in config.content_string


def test_stalled_log_fires_the_stall_alert_and_a_new_iteration_clears_it():
    appended = time.time()
    append(HEALTHY_LINE.format(it=30))
    wait_for(lambda: (not firing("MegatronTrainingStalled"), firing("MegatronTrainingStalled")),
             25, "the stall alert cleared after a new iteration")
    # Well inside the threshold (scrape and evaluation every 2 s): still quiet.
    time.sleep(max(0.0, appended + STALL_SECONDS - 12 - time.time()))
    assert not firing("MegatronTrainingStalled"), "fired before the stall threshold"
    alerts = wait_for(lambda: (bool(firing("MegatronTrainingStalled")), firing("MegatronTrainingStalled")),
                      60, "the stall alert firing")
    assert alerts[0]["labels"]["severity"] == "critical"


def test_nan_loss_line_fires_the_nonfinite_alert():
    assert not firing("MegatronTrainingLossNonFinite"), "fired before any NaN"
    append(NAN_LINE.format(it=40))
    wait_for(lambda: (bool(firing("MegatronTrainingLossNonFinite")), firing("MegatronTrainingLossNonFinite")),
             60, "the NaN alert firing")
    result = api("/api/v1/query?query=megatron_train_nan_iterations_total")["result"]
    assert float(result[0]["value"][1]) >= 1


def test_tensorboard_answers_on_its_address_and_not_on_loopback():
    head = node(HEAD)
    unit = head.run("systemctl show -p User -p ExecStart megatron-tensorboard").stdout
    assert "User=megatron" in unit
    assert "--logdir /shared/tensorboard/molecule" in unit and "--bind_all" not in unit
    wait_for(lambda: (fetch(head, f"http://{address(head)}:6006/")[0] == 200, None), 90,
             "TensorBoard answering on the head address")
    assert fetch(head, "http://127.0.0.1:6006/")[0] is None, "TensorBoard answers on loopback"


def test_report_playbook_prints_the_resource_table():
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_CACHE_PLUGIN="memory",
               ANSIBLE_FORCE_COLOR="0", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
    playbook = Path(sys.executable).parent / "ansible-playbook"
    proc = subprocess.run([str(playbook), "-i", INVENTORY, str(REPO / "playbooks" / "report.yml"),
                           "-e", "monitoring_report_rate_window=1m"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "GPU mem %" in proc.stdout and "disk busy %" in proc.stdout
    for name in NODES:
        # The debug output is YAML (ansible.cfg) or JSON: a list item holding one table row.
        rows = [re.match(r'^\s*-?\s*"?' + name + r"\s+(\S+)\s+(\S+)", line) for line in proc.stdout.splitlines()]
        rows = [row for row in rows if row]
        assert rows, f"no row for {name}:\n{proc.stdout[-3000:]}"
        gpu, cpu = rows[0].groups()
        assert gpu == "n/a", "a container has no GPU"
        assert 0.0 < float(cpu) < 100.0, "CPU memory percent"
