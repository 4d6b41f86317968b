# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA's driver branches as data (_stack/driver_lifecycle.py)."""
from __future__ import annotations

import datetime

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import driver_lifecycle as dl
from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import profiles


@pytest.mark.parametrize("version, expected", [
    ("515.65.01", 515),
    ("580.159.04", 580),        # the H200 host's driver
    ("535.261.03", 535),        # Debian 12's nvidia-driver
    ("", None),
    (None, None),
    ("open", None),
])
def test_branch_of(version, expected):
    assert dl.branch_of(version) == expected


@pytest.mark.parametrize("branch, when, expected", [
    (535, "2026-06-30", False),  # June 2026 is its last month
    (535, "2026-07-01", True),
    (535, "2026-12-01", True),
    (515, "2024-01-01", True),
    (580, "2026-12-01", False),
    (580, "2028-07-01", True),
    (535, datetime.date(2026, 5, 1), False),
])
def test_past_eol(branch, when, expected):
    assert dl.past_eol(dl.BRANCHES[branch], when) is expected


@pytest.mark.parametrize("cuda, when, expected", [
    ("11.7.1", "2026-12-01", 580),   # cu117 today: R535 is past end of life
    ("11.7.1", "2026-05-01", 535),   # before July 2026 R535 was still supported
    ("12.1", "2026-12-01", 580),
    ("13.0", "2026-12-01", 580),
    ("13.0", "2028-07-01", 620),               # R580 and R595 gone by then
    (None, "2026-12-01", 580),
])
def test_upgrade_is_the_lowest_supported_branch_for_the_cuda(cuda, when, expected):
    assert dl.upgrade(cuda, when).branch == expected


def test_no_upgrade_when_every_branch_is_past():
    assert dl.upgrade("13.0", "2040-01-01") is None


@pytest.mark.parametrize("driver, cuda, when, status, upgrade", [
    ("515.65.01", "11.7.1", "2026-12-01", "past_eol", 580),   # the cu117 profile's own driver
    ("535.261.03", "11.7.1", "2026-12-01", "past_eol", 580),
    ("535.261.03", "11.7.1", "2026-06-15", "supported", None),
    ("580.159.04", "13.0", "2026-12-01", "supported", None),
    ("530.30.02", "12.1", "2026-12-01", "unknown", None),     # the cu121 profile's NFB: not in the table
    (None, "12.1", "2026-12-01", "unknown", None),
])
def test_verdict(driver, cuda, when, status, upgrade):
    found = dl.verdict(driver, cuda, when)
    assert found["status"] == status
    assert (found["upgrade"].branch if found["upgrade"] else None) == upgrade


def test_today_is_the_default_date():
    assert dl.as_date(None) == datetime.date.today()
    with pytest.raises(ValueError):
        dl.as_date("June 2026")


def test_every_row_is_dated_and_sourced():
    for row in dl.table():
        datetime.datetime.strptime(row["eol"], "%Y-%m")
        assert row["kind"] in (dl.LTSB, dl.PRODUCTION, dl.NEW_FEATURE)
        assert row["source"]
    # What issue 40 states: R515 long past, R535 at end of life in June 2026.
    assert dl.BRANCHES[535].eol == "2026-06" and dl.BRANCHES[515].eol < "2026"


@pytest.mark.parametrize("name", [n for n in profiles.names() if profiles.PROFILES[n]["accelerator"] == "cuda"])
def test_every_profile_has_a_supported_upgrade_today_and_its_minimum_still_holds(name):
    profile = profiles.get(name)
    row = dl.upgrade(profile["cuda"]["version"], dl.AS_OF)
    assert row is not None and row.branch >= dl.branch_of(profile["driver"]["min"])
