# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Unit tables for the preflight's cross-node and cluster checks (plugins/module_utils/_preflight/cluster.py):
majority rules, hostfile slots, ssh, clock, InfiniBand, peermem, disk and memlock."""
from __future__ import annotations

from typing import Any, Dict

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._preflight import gate as pf

from .preflight_facts import NODES, by_status, full_options, make_cluster, make_node, row_for, run


@pytest.mark.parametrize(
    "path, value, check, components",
    [
        ("ssh", False, "ssh.from_head", {"ssh"}),
        ("ssh", 255, "ssh.from_head", {"ssh"}),
        ("slots", 4, "hostfile.slots", {"hostfile"}),
    ],
)
def test_cluster_options_on_one_node(path, value, check, components):
    options = full_options()
    options["ssh_reachable" if path == "ssh" else "slots"]["node2"] = value
    rows = run(make_cluster(), options=options)
    failed = by_status(rows, pf.FAIL)
    assert [(row.check, row.node) for row in failed] == [(check, "node2")]
    assert {row.component for row in failed} == components


def test_ssh_exit_code_zero_counts_as_reachable():
    options = full_options()
    options["ssh_reachable"] = {node: 0 for node in NODES}
    assert by_status(run(make_cluster(), options=options), pf.FAIL) == []


# ---------------------------------------------------------------------------------------
# Cross-node majority rules
# ---------------------------------------------------------------------------------------


def test_majority_value_is_expected_and_minority_is_named():
    cluster = make_cluster()
    cluster["node1"]["megatron_deepspeed"]["commit"] = "4efb479d"
    row = row_for(run(cluster), "same.megatron_commit", "node1")
    assert row.status == pf.FAIL
    assert row.found == "4efb479d"
    assert row.expected.startswith("9446eaac")


def test_tie_names_every_node():
    cluster = {node: make_node("cu117", node) for node in ("node1", "node2")}
    cluster["node2"]["megatron_deepspeed"]["commit"] = "4efb479d"
    options = full_options()
    options["slots"] = {"node1": 8, "node2": 8}
    options["ssh_reachable"] = {"node1": True, "node2": True}
    rows = run(cluster, options=options)
    failed = by_status(rows, pf.FAIL)
    assert {(row.check, row.node) for row in failed} == {("same.megatron_commit", "node1"), ("same.megatron_commit", "node2")}
    assert "no majority" in failed[0].expected


def test_one_node_is_always_consistent_with_itself():
    rows = run({"node1": make_node("cu117", "node1")}, options={})
    assert [row for row in rows if row.check.startswith("same.") and row.status != pf.PASS] == []


@pytest.mark.parametrize(
    "clock, status",
    [
        ({"synchronized": True, "offset_ms": 99.0, "source": "chrony"}, pf.PASS),
        ({"synchronized": True, "offset_ms": -101.0, "source": "chrony"}, pf.FAIL),
        ({"synchronized": False, "offset_ms": 0.1, "source": "timedatectl"}, pf.FAIL),
        ({"synchronized": None, "offset_ms": None, "source": None}, pf.WARN),
        ({"synchronized": None, "offset_ms": 3.0, "source": "ntpq"}, pf.PASS),
    ],
)
def test_clock(clock, status):
    cluster = make_cluster()
    cluster["node1"]["clock"] = clock
    assert row_for(run(cluster), "clock.sync", "node1").status == status


@pytest.mark.parametrize("container, words, absent", [
    # a container cannot set the clock it shares with its host: the fix is the host's
    ("docker", ["node1 is a container (docker)", "host's kernel clock", "on the host"], ["os_base"]),
    (None, ["enable time sync", "megatron_ds.cluster.os_base"], ["container"]),
])
def test_clock_fix_names_who_can_fix_it(container, words, absent):
    cluster = make_cluster()
    cluster["node1"]["clock"] = {"synchronized": False, "offset_ms": None, "source": "timedatectl"}
    cluster["node1"]["memlock"]["container"] = container
    fix = row_for(run(cluster), "clock.sync", "node1").fix
    assert all(w in fix for w in words) and not any(w in fix for w in absent), fix


def test_clock_limit_is_an_option():
    cluster = make_cluster()
    cluster["node1"]["clock"]["offset_ms"] = 40.0
    options = full_options()
    options["max_clock_offset_ms"] = 20
    assert row_for(run(cluster, options=options), "clock.sync", "node1").status == pf.FAIL


def test_one_ib_port_down_is_a_warning():
    cluster = make_cluster()
    cluster["node2"]["infiniband"]["hcas"][3]["ports"][0]["state"] = "Down"
    rows = run(cluster)
    assert by_status(rows, pf.FAIL) == []
    row = row_for(rows, "infiniband.ports", "node2")
    assert row.status == pf.WARN and "mlx5_3/1 Down" in row.found


def test_ib_and_peermem_are_skipped_unless_asked():
    cluster = make_cluster()
    for facts in cluster.values():
        facts["infiniband"] = {"hcas": [], "peermem_loaded": False}
    options = full_options()
    options.update(infiniband_required=False, gpudirect=False)
    rows = run(cluster, options=options)
    assert by_status(rows, pf.FAIL) == []
    assert row_for(rows, "infiniband.ports", "node1").status == pf.SKIP
    assert row_for(rows, "infiniband.peermem", "node1").status == pf.SKIP


@pytest.mark.parametrize(
    "disk_paths, status, words",
    [
        (None, pf.PASS, "/shared"),
        (["/shared"], pf.PASS, "/shared"),
        (["/shared", "/data"], pf.FAIL, "/data: not measured"),
    ],
)
def test_disk_paths(disk_paths, status, words):
    options = full_options()
    options["disk_paths"] = disk_paths
    row = row_for(run(make_cluster(), options=options), "disk.free", "node1")
    assert row.status == status and words in (row.found + row.expected)


def test_memlock_not_reported_over_ssh_is_judged_on_current_only():
    cluster = make_cluster()
    cluster["node1"]["memlock"]["noninteractive_ssh"] = None
    assert row_for(run(cluster), "memlock.unlimited", "node1").status == pf.PASS


def test_memlock_ssh_session_that_could_not_be_read_warns():
    cluster = make_cluster()
    cluster["node1"]["memlock"].update(noninteractive_ssh=None,
                                       noninteractive_ssh_error="ssh megatron@localhost 'ulimit -l': exit 255")
    row = row_for(run(cluster), "memlock.unlimited", "node1")
    assert row.status == pf.WARN and "exit 255" in row.found


def test_node_in_facts_but_not_in_hostfile_is_a_warning():
    options = full_options()
    del options["slots"]["node3"]
    row = row_for(run(make_cluster(), options=options), "hostfile.slots", "node3")
    assert row.status == pf.WARN and "slots=8" in row.fix


def _no_rdma(facts: Dict[str, Any]) -> None:
    facts["infiniband"]["hcas"] = []


def _rdma_down(facts: Dict[str, Any]) -> None:
    for hca in facts["infiniband"]["hcas"]:
        for port in hca["ports"]:
            port.update(state="Down", phys_state="Polling")


# (id, mode, infiniband_required, gpudirect, node facts, status of a node capped at 8192 kB, words)
MEMLOCK_POLICY = [
    ("auto-ib-required", "auto", True, False, _no_rdma, pf.FAIL, ""),
    ("auto-gpudirect", "auto", False, True, _no_rdma, pf.FAIL, ""),
    ("auto-active-port-seen", "auto", False, False, lambda f: None, pf.FAIL, ""),
    ("auto-no-rdma", "auto", False, False, _no_rdma, pf.WARN, "NCCL uses sockets"),
    ("auto-rdma-ports-down", "auto", False, False, _rdma_down, pf.WARN, "advised, not required"),
    ("required-without-rdma", "required", False, False, _no_rdma, pf.FAIL, ""),
    ("advisory-with-ib", "advisory", True, True, lambda f: None, pf.WARN, "memlock: advisory"),
]


@pytest.mark.parametrize("mode, ib_required, gpudirect, shape, status, words",
                         [case[1:] for case in MEMLOCK_POLICY], ids=[case[0] for case in MEMLOCK_POLICY])
def test_memlock_is_required_where_nccl_uses_rdma(mode, ib_required, gpudirect, shape, status, words):
    cluster = make_cluster()
    for facts in cluster.values():
        shape(facts)
    cluster["node2"]["memlock"].update(current="8192", noninteractive_ssh="8192")
    options = dict(full_options(), infiniband_required=ib_required, gpudirect=gpudirect, memlock=mode)
    rows = run(cluster, options=options)
    row = row_for(rows, "memlock.unlimited", "node2")
    assert row.status == status, row
    assert words in row.expected and row.found == "current 8192, non-interactive ssh 8192"
    assert "os_base" in row.fix and "node2" in row.fix
    # A node with unlimited memlock passes whatever the mode.
    assert row_for(rows, "memlock.unlimited", "node1").status == pf.PASS


@pytest.mark.parametrize("mode, synced, offset, status", [
    ("required", False, None, pf.FAIL),
    ("advisory", False, None, pf.WARN),
    ("advisory", True, 500.0, pf.WARN),
    ("advisory", True, 3.0, pf.PASS),
    (None, False, None, pf.FAIL),  # the default is required
])
def test_clock_mode(mode, synced, offset, status):
    cluster = make_cluster()
    cluster["node2"]["clock"].update(synchronized=synced, offset_ms=offset)
    options = dict(full_options())
    if mode:
        options["clock"] = mode
    row = row_for(run(cluster, options=options), "clock.sync", "node2")
    assert row.status == status, row
    assert row.status == pf.PASS or "node2" in row.fix


@pytest.mark.parametrize("swept, status, found", [
    ("1024", pf.FAIL, "current unlimited, non-interactive ssh 1024"),
    ("unlimited", pf.PASS, "current unlimited, non-interactive ssh unlimited"),
    ("-", pf.PASS, "current unlimited"),  # ssh failed there (ssh.from_head says so): only the current limit
])
def test_memlock_of_the_ssh_session_from_the_head_nodes_sweep(swept, status, found):
    """playbooks/preflight.yml reads `ulimit -l` in each node's ssh session from the head node's
    sweep (ssh_memlock) instead of an ssh per node inside the facts call."""
    cluster = make_cluster()
    for facts in cluster.values():
        facts["memlock"] = {"current": "unlimited", "noninteractive_ssh": None, "noninteractive_ssh_error": None}
    options = dict(full_options(), ssh_memlock={"node1": "unlimited", "node2": swept, "node3": "unlimited"})
    row = row_for(run(cluster, options=options), "memlock.unlimited", "node2")
    assert (row.status, row.found) == (status, found)


# --------------------------------------------------------------------------- same.packages
def _packages(cluster: Dict[str, Any], node: str, **changes: Any) -> None:
    installed = cluster[node]["packages"]["installed"]
    for name, version in changes.items():
        if version is None:
            installed.pop(name, None)
        else:
            installed[name] = version


@pytest.mark.parametrize("changes, found, fix", [
    # numpy 2.1.3 on one node, 2.2.6 on the others (issue 25's case)
    ({"node2": {"numpy": "2.1.3"}}, ["numpy 2.1.3 (the others: 2.2.6)"], "pip install --no-deps 'numpy==2.2.6'"),
    # a package the other nodes lack, and one it lacks
    ({"node2": {"einops": "0.8.2"}}, ["einops 0.8.2 (the others: (not installed))"], "pip uninstall"),
    ({"node2": {"ninja": None}}, ["ninja (not installed) (the others: 1.13.2)"], "'ninja==1.13.2'"),
    # two differences on one node, both named
    ({"node2": {"numpy": "2.1.3", "pydantic": "2.9.0"}},
     ["numpy 2.1.3 (the others: 2.2.6)", "pydantic 2.9.0 (the others: 2.14.4)"], "'numpy==2.2.6' 'pydantic==2.14.4'"),
])
def test_same_packages_names_the_node_and_each_package(changes, found, fix):
    cluster = make_cluster("cu121")
    for node, change in changes.items():
        _packages(cluster, node, **change)
    rows = [row for row in run(cluster, "cu121") if row.check == "same.packages"]
    failed = by_status(rows, pf.FAIL)
    assert [row.node for row in failed] == ["node2"]
    assert {row.status for row in rows if row.node != "node2"} == {pf.PASS}
    for text in found:
        assert text in failed[0].found
    assert failed[0].found.startswith("%d package(s) differ" % len(found))
    assert fix in failed[0].fix and "node2" in failed[0].fix and failed[0].component == "packages"


def test_same_packages_leaves_torch_and_deepspeed_to_their_own_rows():
    cluster = make_cluster("cu121")
    _packages(cluster, "node3", deepspeed="0.19.7")
    cluster["node3"]["deepspeed"]["version"] = "0.19.7"
    rows = run(cluster, "cu121")
    assert row_for(rows, "same.packages", "node3").status == pf.PASS
    assert row_for(rows, "same.deepspeed", "node3").status == pf.FAIL


def test_same_packages_without_a_majority_names_every_node():
    cluster = {node: make_node("cu121", node) for node in ("node1", "node2")}
    _packages(cluster, "node2", numpy="2.1.3")
    rows = by_status([row for row in run(cluster, "cu121") if row.check == "same.packages"], pf.FAIL)
    assert sorted(row.node for row in rows) == ["node1", "node2"]
    assert "no majority: 2.1.3 on node2" in row_for(rows, "same.packages", "node1").found


def test_same_packages_skips_when_no_node_reports_them():
    cluster = make_cluster("cu121")
    for facts in cluster.values():
        del facts["packages"]
    rows = [row for row in run(cluster, "cu121") if row.check == "same.packages"]
    assert [(row.status, row.node) for row in rows] == [(pf.SKIP, pf.ALL_NODES)]


@pytest.mark.parametrize("container, hard, container_fix", [
    # a Docker node whose runtime caps memlock (the simulated cluster on these machines)
    ("/.dockerenv", "8192", True),
    # a container whose runtime allows unlimited: os_base's limits.d is the fix again
    ("/.dockerenv", "unlimited", False),
    # a host (no evidence), or facts of an older collection (no field)
    (None, "8192", False),
])
def test_memlock_fix_in_a_container_names_the_runtime(container, hard, container_fix):
    cluster = make_cluster()
    cluster["node2"]["memlock"].update(current="8192", noninteractive_ssh="8192", hard=hard, container=container)
    options = full_options()
    options["memlock"] = "required"
    row = row_for(run(cluster, options=options), "memlock.unlimited", "node2")
    assert row.status == pf.FAIL and row.found == "current 8192, non-interactive ssh 8192"
    if container_fix:
        assert "node2 is a container (/.dockerenv)" in row.fix and "hard limit of 8192 KiB" in row.fix
        assert "--ulimit memlock=-1:-1" in row.fix and "os_base" not in row.fix
    else:
        assert "megatron_ds.cluster.os_base" in row.fix and "container" not in row.fix


NCCL_ENV = "/etc/megatron/nccl.env"


def _set_nccl(cluster, node, key, value, source=NCCL_ENV):
    env = cluster[node]["nccl_env"]
    if value is None:
        del env["values"][key], env["sources"][key]
    else:
        env["values"][key], env["sources"][key] = value, source


@pytest.mark.parametrize("changes, failing, words", [
    # the same variables everywhere: every node passes
    ([], set(), []),
    # the drift: two settings appended to one node's nccl.env
    ([("node3", "NCCL_IB_DISABLE", "1"), ("node3", "NCCL_ALGO", "Tree")], {"node3"},
     ["2 NCCL_* variable(s) differ", "NCCL_ALGO=Tree (/etc/megatron/nccl.env); the others: unset on node1, node2",
      "NCCL_IB_DISABLE=1 (/etc/megatron/nccl.env); the others: unset on node1, node2"]),
    # a value that differs, set in the training user's ~/.bashrc
    ([("node2", "NCCL_DEBUG", "INFO", "/home/megatron/.bashrc")], {"node2"},
     ["NCCL_DEBUG=INFO (/home/megatron/.bashrc); the others: WARN on node1, node3"]),
    # a key missing on one node: that node is named, with the value on the others
    ([("node1", "NCCL_IB_HCA", None)], {"node1"}, ["NCCL_IB_HCA unset; the others: =mlx5_0:1 on node2, node3"]),
])
def test_nccl_environment_is_the_same_on_every_node(changes, failing, words):
    cluster = make_cluster("cu117")
    for change in changes:
        _set_nccl(cluster, *change)
    rows = [row for row in run(cluster) if row.check == "same.nccl_env"]
    assert {row.node for row in rows if row.status == pf.FAIL} == failing
    assert {row.node for row in rows if row.status == pf.PASS} == set(NODES) - failing
    for row in rows:
        if row.status == pf.FAIL:
            assert row.component == "nccl" and all(w in row.found for w in words), row.found
            assert row.node in row.fix and "nccl_env" in row.fix and NCCL_ENV in row.fix


def test_nccl_environment_without_a_majority_names_every_node():
    cluster = make_cluster("cu117")
    for node, value in zip(NODES, ("Ring", "Tree", "CollnetDirect")):
        _set_nccl(cluster, node, "NCCL_ALGO", value)
    rows = [row for row in run(cluster) if row.check == "same.nccl_env"]
    assert [row.status for row in rows] == [pf.FAIL] * 3
    assert "NCCL_ALGO=Ring (/etc/megatron/nccl.env); the others: Tree on node2; CollnetDirect on node3" in rows[0].found


def test_nccl_environment_of_older_facts_is_skipped():
    cluster = make_cluster("cu117")
    for node in NODES:
        del cluster[node]["nccl_env"]
    rows = [row for row in run(cluster) if row.check == "same.nccl_env"]
    assert [(row.status, row.node) for row in rows] == [(pf.SKIP, pf.ALL_NODES)]
