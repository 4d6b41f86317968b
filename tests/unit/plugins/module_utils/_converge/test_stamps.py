# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tables for the node side of converge stamps (plugins/module_utils/_converge/stamps.py):
file signatures, building, writing and reading stamps back, and what a re-check reports."""
from __future__ import annotations

import json
import os
from typing import List, Sequence, Tuple

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._converge import stamps as st


def _systemctl(states: Sequence[str], rc: int = 0):
    calls: List[List[str]] = []

    def run(argv: Sequence[str]) -> Tuple[int, str, str]:
        calls.append(list(argv))
        return rc, "\n".join(states) + "\n", ""
    run.calls = calls  # type: ignore[attr-defined]
    return run


@pytest.mark.parametrize("size, prefix", [
    (0, "sha256:e3b0c44298fc1c149afbf4c8996fb924"),
    (10, "sha256:"),
    (st.HASH_LIMIT, "sha256:"),
    (st.HASH_LIMIT + 1, "size:%d:mtime:" % (st.HASH_LIMIT + 1)),
])
def test_file_signature_hashes_small_files_and_stats_large_ones(tmp_path, size, prefix):
    path = tmp_path / "f"
    path.write_bytes(b"x" * size)
    assert st.file_signature(str(path)).startswith(prefix)


@pytest.mark.parametrize("make, expected", [
    (lambda p: None, None),
    (lambda p: p.mkdir(), "dir"),
])
def test_file_signature_of_missing_paths_and_directories(tmp_path, make, expected):
    path = tmp_path / "thing"
    make(path)
    assert st.file_signature(str(path)) == expected


@pytest.mark.parametrize("role, digest, error", [
    ("", "abc", "not a role name"),
    ("Os-Base", "abc", "not a role name"),
    ("os_base", "", "empty input digest"),
])
def test_build_stamp_refuses_bad_names_and_digests(role, digest, error):
    with pytest.raises(ValueError, match=error):
        st.build_stamp(role, digest)


def test_build_stamp_records_sorted_unique_files_and_services(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.write_text("1")
    stamp = st.build_stamp("os_base", "d1", [str(b), str(a), str(a)], ["ssh", "chrony", "ssh"], {"x": "1"})
    assert list(stamp["files"]) == [str(a), str(b)]
    assert stamp["files"][str(b)] is None and stamp["files"][str(a)].startswith("sha256:")
    assert stamp["services"] == ["chrony", "ssh"]
    assert stamp["schema"] == st.SCHEMA and stamp["inputs"] == {"x": "1"}


def test_write_stamp_writes_once_then_reports_no_change(tmp_path):
    directory = str(tmp_path / "converge")
    stamp = st.build_stamp("nccl", "d1")
    assert st.write_stamp(directory, stamp) is True
    assert st.write_stamp(directory, stamp) is False
    assert st.write_stamp(directory, st.build_stamp("nccl", "d2")) is True
    path = st.stamp_path(directory, "nccl")
    assert json.loads(open(path).read())["digest"] == "d2"
    assert oct(os.stat(path).st_mode & 0o777) == "0o644"
    assert not os.path.exists(path + ".tmp")


@pytest.mark.parametrize("change, states, expected", [
    (None, ["active"], []),
    ("edit", ["active"], ["{f} changed since the role wrote it"]),
    ("delete", ["active"], ["{f} is gone"]),
    (None, ["inactive"], ["service chrony is inactive"]),
    ("edit", ["failed"], ["{f} changed since the role wrote it", "service chrony is failed"]),
])
def test_check_stamp_reports_changed_files_and_stopped_services(tmp_path, change, states, expected):
    path = tmp_path / "limits.conf"
    path.write_text("* - memlock unlimited\n")
    stamp = st.build_stamp("os_base", "d", [str(path)], ["chrony"])
    if change == "edit":
        path.write_text("* - memlock 64\n")
    elif change == "delete":
        path.unlink()
    assert st.check_stamp(stamp, _systemctl(states)) == [line.format(f=path) for line in expected]


def test_check_stamp_says_unknown_when_systemctl_cannot_answer():
    stamp = st.build_stamp("os_base", "d", [], ["chrony", "ssh"])
    problems = st.check_stamp(stamp, lambda argv: (127, "", "No such file or directory"))
    assert problems == ["service chrony is unknown (systemctl: No such file or directory)",
                        "service ssh is unknown (systemctl: No such file or directory)"]


def test_check_stamp_without_services_starts_no_process():
    run = _systemctl([])
    assert st.check_stamp(st.build_stamp("cudnn", "d"), run) == []
    assert run.calls == []


def test_read_stamps_reads_every_role_and_flags_foreign_files(tmp_path):
    directory = tmp_path / "converge"
    st.write_stamp(str(directory), st.build_stamp("os_base", "d1", inputs={"v": "1"}))
    st.write_stamp(str(directory), st.build_stamp("nccl", "d2"))
    (directory / "cudnn.json").write_text("{not json")
    (directory / "python_env.json").write_text(json.dumps({"schema": 0, "role": "python_env", "digest": "x"}))
    (directory / "notes.txt").write_text("ignored")
    found = st.read_stamps(str(directory), _systemctl([]))
    assert sorted(found) == ["cudnn", "nccl", "os_base", "python_env"]
    assert found["os_base"] == {"digest": "d1", "inputs": {"v": "1"}, "problems": []}
    for role in ("cudnn", "python_env"):
        assert found[role]["digest"] is None and "unreadable or of another schema" in found[role]["problems"][0]


def test_read_stamps_of_a_missing_directory_is_empty(tmp_path):
    assert st.read_stamps(str(tmp_path / "none")) == {}
