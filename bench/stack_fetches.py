# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Benchmark the GPU stack roles: upstream fetches per artifact, and cold vs re-run time.

For N nodes (default 1 and 3) it starts N fresh test nodes (the platform of
.config/molecule/config.yml) and the NVIDIA test mirror (tests/mirror/build_mirror.py) on a
private Docker network, runs the gpu_stack scenario's converge playbook (nvidia_driver,
cuda_toolkit, cudnn, nccl) twice with an empty artifact cache, and prints:

  * how many times the mirror served each artifact (HTTP 200 lines of its access log): the
    roles fetch once per cluster, so this stays 1 whatever N is;
  * the cold run's and the re-run's wall time, their ratio, and the re-run's changed count.

Results also go to bench/results/stack_fetches.json. Needs Docker and the node image
(make image). Run from the repository root: .venv/bin/python bench/stack_fetches.py
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIO = os.path.join(REPO, "molecule", "gpu_stack")
PREFIX = "mds-bench-stack"
NETWORK = PREFIX + "-net"
MIRROR = PREFIX + "-mirror"


def log(msg: str) -> None:
    print("stack_fetches: %s" % msg, file=sys.stderr, flush=True)


def docker(*args: str, check: bool = True) -> str:
    return subprocess.run(["docker", *args], check=check, capture_output=True, text=True).stdout.strip()


def node_platform() -> dict:
    """The one definition of a test node, shared with molecule and the simulated cluster."""
    with open(os.path.join(REPO, ".config", "molecule", "config.yml")) as handle:
        return yaml.safe_load(handle)["platforms"][0]


def scenario_vars(ephemeral: str) -> dict:
    with open(os.path.join(SCENARIO, "molecule.yml")) as handle:
        text = handle.read().replace("${MOLECULE_EPHEMERAL_DIRECTORY}", ephemeral)
    return yaml.safe_load(text)["provisioner"]["inventory"]


def image_of(platform: dict) -> str:
    image = platform["image"]
    match = re.match(r"\$\{(\w+):-([^}]+)\}", image)
    return os.environ.get(match.group(1), match.group(2)) if match else image


def cleanup(names: List[str]) -> None:
    for name in names + [MIRROR]:
        docker("rm", "-f", name, check=False)
    docker("network", "rm", NETWORK, check=False)


def start(nodes: int, work: str, site: str) -> List[str]:
    platform = node_platform()
    image = image_of(platform)
    names = ["node%d" % (i + 1) for i in range(nodes)]
    containers = ["%s-%s" % (PREFIX, n) for n in names]
    cleanup(containers)
    docker("network", "create", NETWORK)
    for name, container in zip(names, containers):
        args = ["run", "-d", "--name", container, "--hostname", name, "--network", NETWORK]
        for cap in platform.get("capabilities", []):
            args += ["--cap-add", cap]
        if platform.get("cgroupns_mode"):
            args += ["--cgroupns", platform["cgroupns_mode"]]
        for vol in platform.get("volumes", []):
            args += ["-v", vol]
        for tmpfs in platform.get("tmpfs", []):
            args += ["--tmpfs", tmpfs]
        docker(*args, image, *platform.get("command", "/sbin/init").split())
    os.makedirs(os.path.join(work, "mirror-log"), exist_ok=True)
    docker("run", "-d", "--name", MIRROR, "--network", NETWORK,
           "-v", "%s:/srv/mirror:ro" % site, "-v", "%s:/var/log/mirror" % os.path.join(work, "mirror-log"),
           image, "sh", "-c", "exec python3 -u -m http.server 8000 --directory /srv/mirror 2>>/var/log/mirror/access.log")
    ip = docker("inspect", "-f", "{{ (index .NetworkSettings.Networks \"%s\").IPAddress }}" % NETWORK, MIRROR)
    with open(os.path.join(REPO, ".cache", "mirror", "mirror-vars.json")) as handle:
        mirror = json.load(handle)
    mirror.update(url="http://%s:8000" % ip, access_log=os.path.join(work, "mirror-log", "access.log"))
    with open(os.path.join(work, "mirror.json"), "w") as handle:
        json.dump(mirror, handle)
    inv = scenario_vars(work)
    inventory = {"all": {"vars": inv["group_vars"]["all"], "children": {"megatron_nodes": {"hosts": {}}}}}
    for name, container in zip(names, containers):
        host = dict(inv.get("host_vars", {}).get(name, {}))
        host.update(ansible_connection="community.docker.docker", ansible_host=container)
        inventory["all"]["children"]["megatron_nodes"]["hosts"][name] = host
    with open(os.path.join(work, "inventory.yml"), "w") as handle:
        yaml.safe_dump(inventory, handle)
    for _attempt in range(60):  # systemd up and the mirror answering
        if all(docker("exec", c, "systemctl", "is-system-running", check=False) in ("running", "degraded")
               for c in containers) and os.path.exists(os.path.join(work, "mirror-log", "access.log")):
            break
        time.sleep(1)
    return containers


def converge(work: str) -> Dict[str, object]:
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), MOLECULE_EPHEMERAL_DIRECTORY=work,
               ANSIBLE_COLLECTIONS_PATH=os.path.join(REPO, ".collections"), ANSIBLE_FORCE_COLOR="0")
    bindir = os.path.dirname(sys.executable)
    began = time.monotonic()
    proc = subprocess.run([os.path.join(bindir, "ansible-playbook"), "-i", os.path.join(work, "inventory.yml"),
                           os.path.join(SCENARIO, "converge.yml")], env=env, capture_output=True, text=True, check=False)
    seconds = time.monotonic() - began
    if proc.returncode != 0:
        log(proc.stdout[-4000:] + proc.stderr[-2000:])
        raise SystemExit("stack_fetches: ansible-playbook failed (rc %d)" % proc.returncode)
    changed = sum(int(n) for n in re.findall(r"\bchanged=(\d+)", proc.stdout))
    return {"seconds": round(seconds, 1), "changed": changed}


def fetches(work: str, files: List[str]) -> Dict[str, int]:
    with open(os.path.join(work, "mirror-log", "access.log")) as handle:
        served = re.findall(r'"GET (/\S+) HTTP/1\.[01]" 200 ', handle.read())
    return {rel: served.count("/" + rel) for rel in files if not rel.startswith("tampered/")}


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--keep", action="store_true", help="leave the containers running")
    args = parser.parse_args(argv)

    subprocess.run([sys.executable, os.path.join(REPO, "tests", "mirror", "build_mirror.py")], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(REPO, ".cache", "mirror", "mirror-vars.json")) as handle:
        mirror = json.load(handle)

    results = []
    for nodes in args.nodes:
        work = tempfile.mkdtemp(prefix="stack-bench-", dir=os.path.join(REPO, ".cache"))
        containers: List[str] = []
        try:
            log("%d node(s): starting containers" % nodes)
            containers = start(nodes, work, mirror["site"])
            log("%d node(s): cold run" % nodes)
            cold = converge(work)
            log("%d node(s): re-run" % nodes)
            rerun = converge(work)
            results.append({"nodes": nodes, "cold": cold, "rerun": rerun,
                            "ratio": round(rerun["seconds"] / cold["seconds"], 3),
                            "fetches": fetches(work, mirror["files"])})
        finally:
            if not args.keep:
                cleanup(containers)
                shutil.rmtree(work, ignore_errors=True)

    print("%-5s %9s %9s %7s %9s" % ("nodes", "cold s", "re-run s", "ratio", "changed"))
    for r in results:
        print("%-5d %9.1f %9.1f %7.3f %9d" % (r["nodes"], r["cold"]["seconds"], r["rerun"]["seconds"], r["ratio"],
                                              r["rerun"]["changed"]))
    print("\nupstream fetches per artifact (mirror access log, HTTP 200):")
    names = sorted(results[0]["fetches"]) if results else []
    print("  %-100s %s" % ("artifact", "  ".join("N=%d" % r["nodes"] for r in results)))
    for name in names:
        print("  %-100s %s" % (name, "  ".join("%3d" % r["fetches"][name] for r in results)))
    os.makedirs(os.path.join(REPO, "bench", "results"), exist_ok=True)
    with open(os.path.join(REPO, "bench", "results", "stack_fetches.json"), "w") as handle:
        json.dump(results, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
