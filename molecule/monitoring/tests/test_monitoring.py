"""monitoring on three nodes, checked from inside the cluster the way an operator would look.

Per-node tests take testinfra's ``host`` fixture; the cluster tests open node1 (the head node)
through the molecule inventory and ask Prometheus's HTTP API from there, polling with deadlines
because scrapes and rule evaluations run every 2 s in this scenario.
"""

from __future__ import annotations

import functools
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import testinfra

from ansible_collections.megatron_ds.cluster.tests.support import secret_scan

NODES = ["node1", "node2", "node3"]
HEAD = "node1"
INVENTORY = os.environ["MOLECULE_INVENTORY_FILE"]
REPO = Path(os.environ["MOLECULE_PROJECT_DIRECTORY"])
LOG = "/var/log/megatron/train.log"
STALL_SECONDS = 40
# node_exporter, Prometheus and Alertmanager speak HTTPS with the cluster CA's certificates and
# want basic auth (roles/monitoring/tasks/web_auth.yml); the log exporter and TensorBoard speak HTTP.
WEB_DIR = "/etc/megatron-monitoring"
# molecule.yml's Alertmanager receiver: its URL and its token.
RECEIVER_SECRETS = ["MOLECULE-SENTINEL-RECEIVER-URL", "MOLECULE-SENTINEL-RECEIVER-TOKEN"]
# Read before any test runs, which stops the logging: the tests' own Ansible calls (reading the
# password back) are not the collection's output (tests/support/secret_scan.py).
secret_scan.converge_log()
CA = f"{WEB_DIR}/tls/ca.crt"
USER = "monitoring"
# argv: url, method, user:password or '', CA file or '', JSON body or ''. Prints the status (an
# HTTP error's too) then the body, or ERR when no HTTP answer came (refused, TLS failure).
FETCH = (
    "import base64, ssl, sys, urllib.error, urllib.request\n"
    "url, method, auth, ca, data = sys.argv[1:6]\n"
    "ctx = ssl.create_default_context(cafile=ca) if ca else None\n"
    "req = urllib.request.Request(url, method=method, data=data.encode() if data else None)\n"
    "if data:\n"
    "    req.add_header('Content-Type', 'application/json')\n"
    "if auth:\n"
    "    req.add_header('Authorization', 'Basic ' + base64.b64encode(auth.encode()).decode())\n"
    "try:\n"
    "    r = urllib.request.urlopen(req, timeout=5, context=ctx)\n"
    "    print(r.status); sys.stdout.write(r.read().decode())\n"
    "except urllib.error.HTTPError as e:\n"
    "    print(e.code); sys.stdout.write(e.read().decode(errors='replace'))\n"
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


@functools.lru_cache(maxsize=None)
def credentials() -> str:
    """user:password, the password as the role generated it on the head node."""
    return USER + ":" + node(HEAD).check_output(f"cat {WEB_DIR}/web.password").strip()


def fetch(host, url: str, auth=True, method: str = "GET", data: str = ""):
    """(status or None, body) of a request from inside the node: with the monitoring user's
    credentials (auth=True), none (False) or the given user:password; https URLs trust the CA."""
    userpass = credentials() if auth is True else (auth or "")
    ca = CA if url.startswith("https://") else ""
    out = host.check_output("python3 -c %s %s %s %s %s %s", FETCH, url, method, userpass, ca, data)
    first, _newline, body = out.partition("\n")
    return (int(first) if first.isdigit() else None), body


def api(path: str):
    head = node(HEAD)
    status, body = fetch(head, f"https://{address(head)}:9090{path}")
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
    status, body = fetch(host, f"https://{address(host)}:9100/metrics")
    assert status == 200
    assert "node_memory_MemTotal_bytes" in body
    assert fetch(host, "https://127.0.0.1:9100/metrics")[0] is None, "node_exporter answers on loopback"
    # HTTPS only: a plain request gets Go's "HTTP request to an HTTPS server" (400), no metrics.
    status, body = fetch(host, f"http://{address(host)}:9100/metrics", auth=False)
    assert status != 200 and "node_memory_MemTotal_bytes" not in body


def test_gpu_collector_says_there_is_no_nvidia_smi(host):
    assert host.service("megatron-gpu-metrics.timer").is_enabled
    assert host.run("systemctl is-active megatron-gpu-metrics.timer").stdout.strip() == "active"
    textfile = host.file("/var/lib/prometheus/node-exporter/megatron_gpu.prom")
    assert textfile.mode == 0o644
    assert 'megatron_gpu_collector_up{reason="nvidia_smi_missing",source=""} 0' in textfile.content_string
    # ...and node_exporter publishes it.
    _status, body = fetch(host, f"https://{address(host)}:9100/metrics")
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
        assert targets[name] == f"https://{addrs[name]}:9100/metrics"
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
    for scheme, port in (("https", 9090), ("https", 9093), ("http", 9701)):
        assert fetch(head, f"{scheme}://{address(head)}:{port}/")[0] in (200, 302), port
        assert fetch(head, f"{scheme}://127.0.0.1:{port}/")[0] is None, f"port {port} answers on loopback"
    managers = api("/api/v1/alertmanagers")["activeAlertmanagers"]
    assert [m["url"] for m in managers] == [f"https://{address(head)}:9093/api/v2/alerts"]
    config = head.file("/etc/prometheus/alertmanager.yml")
    assert config.mode == 0o640
    # molecule.yml's receiver, the one Alertmanager sends to.
    assert "name: sentinel" in config.content_string and RECEIVER_SECRETS[1] in config.content_string


@pytest.mark.parametrize("port, path", [(9090, "/api/v1/query?query=up"), (9093, "/api/v2/alerts"),
                                        (9093, "/api/v2/silences"), (9100, "/metrics")])
def test_requests_without_the_password_are_refused(port, path):
    head = node(HEAD)
    url = f"https://{address(head)}:{port}{path}"
    assert fetch(head, url)[0] == 200
    assert fetch(head, url, auth=False)[0] == 401
    assert fetch(head, url, auth=USER + ":not-the-password")[0] == 401
    assert fetch(head, url, auth="admin:" + credentials().split(":", 1)[1])[0] == 401


def test_a_forged_silence_and_a_forged_alert_are_refused():
    head = node(HEAD)
    alertmanager = f"https://{address(head)}:9093/api/v2"
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    later = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    silence = json.dumps({"matchers": [{"name": "alertname", "value": "MegatronNodeDown", "isRegex": False}],
                          "startsAt": now, "endsAt": later, "createdBy": "forger", "comment": "quiet, please"})
    alert = json.dumps([{"labels": {"alertname": "MegatronNodeDown", "node": "node2", "forged": "yes"}}])
    assert fetch(head, f"{alertmanager}/silences", auth=False, method="POST", data=silence)[0] == 401
    assert fetch(head, f"{alertmanager}/alerts", auth=False, method="POST", data=alert)[0] == 401
    # Nothing of either reached Alertmanager.
    assert [s for s in json.loads(fetch(head, f"{alertmanager}/silences")[1]) if s["createdBy"] == "forger"] == []
    assert [a for a in json.loads(fetch(head, f"{alertmanager}/alerts")[1]) if a["labels"].get("forged")] == []
    # The same silence with the password is taken: the refusal was the missing password, not the body.
    status, body = fetch(head, f"{alertmanager}/silences", method="POST", data=silence)
    assert status == 200, body
    assert fetch(head, f"{alertmanager}/silence/{json.loads(body)['silenceID']}", method="DELETE")[0] == 200


def test_the_monitoring_secrets_stay_where_they_belong():
    head = node(HEAD)
    for path, mode, group in ((f"{WEB_DIR}/ca", 0o700, "root"), (f"{WEB_DIR}/ca/ca.key", 0o600, "root"),
                              (f"{WEB_DIR}/web.password", 0o640, "prometheus"),
                              (f"{WEB_DIR}/web.yml", 0o640, "prometheus"),
                              (f"{WEB_DIR}/tls/node.key", 0o640, "prometheus")):
        f = head.file(path)
        assert f.exists and f.mode == mode and f.user == "root" and f.group == group, path
    web = head.file(f"{WEB_DIR}/web.yml").content_string
    assert head.file(f"{WEB_DIR}/web.password").content_string.strip() not in web, "the password itself is in web.yml"
    for name in NODES[1:]:
        other = node(name)
        assert not other.file(f"{WEB_DIR}/ca").exists, f"{name} holds the CA"
        assert not other.file(f"{WEB_DIR}/web.password").exists, f"{name} holds the password"
        # Its own key (the https fetches of node_exporter check its certificate against the CA).
        assert other.file(f"{WEB_DIR}/tls/node.key").mode == 0o640
        assert "--web.config.file=" in other.file("/etc/default/prometheus-node-exporter").content_string


def test_no_monitoring_secret_is_in_a_log_a_diff_or_a_file_others_read():
    """The receiver's URL and token, the web password the head node generated and the CA's key:
    none in the logged runs (their --diff included); none in a file that others may read but the
    ones that must hold them for a service's group (Alertmanager's configuration, the password
    file Prometheus reads); the token, the password and the CA key in no journal either. (The
    URL may be in Alertmanager's own journal lines, when a send to port 9 fails.)"""
    head = node(HEAD)
    password = head.file(f"{WEB_DIR}/web.password").content_string.strip()
    # The CA key's first base64 line: it holds the private scalar in either PEM form of an EC key.
    # The later lines are the public point, which the key task's own result prints as the public
    # key (the first run matched one of them there: a public key, no leak).
    ca_key = [line for line in head.file(f"{WEB_DIR}/ca/ca.key").content_string.splitlines()
              if line and not line.startswith("-----")][:1]
    assert len(password) >= 32 and len(ca_key[0]) >= 60
    secrets = RECEIVER_SECRETS + [password] + ca_key
    assert secret_scan.in_log(secrets) == []
    allowed = ["/etc/prometheus/alertmanager.yml", f"{WEB_DIR}/web.password"]
    for name in NODES:
        host = node(name)
        assert secret_scan.readable_copies(host, secrets, allowed) == [], name
        assert secret_scan.journal_copies(host, secrets[1:]) == [], name


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
