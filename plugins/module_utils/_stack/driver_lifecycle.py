# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA's data-center driver branches as data: each branch's type, end of life and the highest
CUDA major it runs without the forward-compatibility package, and the supported branch to move a
node to once its branch is past end of life.

A branch past end of life still runs the stack (a newer driver is not needed for CUDA 11.7), so
preflight warns; the profile's minimum driver (profiles.CUDA_MIN_DRIVER) stays the gate.

No Ansible imports: unit-tested alone.
"""
from __future__ import annotations

import datetime
import re
from typing import Any, Dict, List, NamedTuple, Optional, Union

from . import profiles as _profiles
from . import versions as _versions

LTSB = "long-term support"
PRODUCTION = "production"
NEW_FEATURE = "new feature"


class Branch(NamedTuple):
    """One driver branch. ``eol`` is the month NVIDIA gives ("2026-06"); ``cuda_major`` the highest
    CUDA major it runs without the forward-compatibility package; ``source`` where the row was
    read, or "not verified here"."""

    branch: int
    kind: str
    eol: str
    cuda_major: int
    source: str


# As of 2026-12-01. "NVIDIA Data Center Drivers", section "Supported Drivers and CUDA Toolkit
# Versions" (docs.nvidia.com/datacenter/tesla/drivers/): its 615 edition lists R535, R580, R595 and
# R610, its 620 edition R580, R595 and R620 (read 2026-12). R450 is from the older "NVIDIA CUDA and
# Drivers Support" note (RN-08625-001 v02, March 2021). The other rows are from memory of earlier
# editions of the same table and are NOT verified here; each says so. New-feature branches are
# short-lived and NVIDIA gives most of them no end of life: a branch missing here is reported as
# unknown, never guessed.
VERIFIED_615 = "NVIDIA Data Center Drivers 615 edition, Supported Drivers and CUDA Toolkit Versions"
VERIFIED_620 = "NVIDIA Data Center Drivers 620 edition, Supported Drivers and CUDA Toolkit Versions"
NOT_VERIFIED = "not verified here (an earlier edition of NVIDIA's table, from memory)"
BRANCHES: Dict[int, Branch] = dict((row.branch, row) for row in (
    Branch(450, LTSB, "2023-07", 11, "NVIDIA CUDA and Drivers Support, RN-08625-001 v02 (March 2021)"),
    Branch(470, LTSB, "2024-07", 11, NOT_VERIFIED),
    Branch(515, PRODUCTION, "2023-05", 11, NOT_VERIFIED + "; issue 40: long past end of life"),
    Branch(525, PRODUCTION, "2023-11", 12, NOT_VERIFIED),
    Branch(535, LTSB, "2026-06", 12, VERIFIED_615),
    Branch(550, PRODUCTION, "2025-02", 12, NOT_VERIFIED),
    Branch(570, PRODUCTION, "2026-02", 12, NOT_VERIFIED),
    Branch(580, LTSB, "2028-06", 13, VERIFIED_615 + "; " + VERIFIED_620),
    Branch(595, PRODUCTION, "2027-03", 13, VERIFIED_615 + "; " + VERIFIED_620),
    Branch(610, NEW_FEATURE, "2026-08", 13, VERIFIED_615),
    Branch(620, LTSB, "2029-09", 13, VERIFIED_620),
))
AS_OF = "2026-12-01"

DateLike = Union[datetime.date, str, None]


def branch_of(version: Optional[str]) -> Optional[int]:
    """The branch of a driver version ('515.65.01' -> 515); None when it is not one."""
    match = re.match(r"^\s*(\d{3,})\.\d+", str(version or ""))
    return int(match.group(1)) if match else None


def as_date(value: DateLike) -> datetime.date:
    """A date from a date or an ISO 'YYYY-MM-DD' string; None is today. ValueError otherwise."""
    if value is None or value == "":
        return datetime.date.today()
    if isinstance(value, datetime.date):
        return value
    return datetime.datetime.strptime(str(value).strip(), "%Y-%m-%d").date()


def past_eol(row: Branch, when: DateLike = None) -> bool:
    """True from the first day of the month after the branch's end-of-life month."""
    year, month = (int(part) for part in row.eol.split("-"))
    day = as_date(when)
    return (day.year, day.month) > (year, month)


def upgrade(cuda_version: Optional[str], when: DateLike = None) -> Optional[Branch]:
    """The lowest long-term-support or production branch still supported on ``when`` that runs
    ``cuda_version`` (its major at most the branch's, the branch at least CUDA_MIN_DRIVER's);
    None when the table has none."""
    floor = 0
    major = 0
    if cuda_version:
        major = _versions.major(cuda_version)
        try:
            floor = branch_of(_profiles.min_driver_for_cuda(cuda_version)) or 0
        except (_profiles.UnknownCudaError, ValueError):
            floor = 0
    for number in sorted(BRANCHES):
        row = BRANCHES[number]
        if row.kind in (LTSB, PRODUCTION) and number >= floor and row.cuda_major >= major and not past_eol(row, when):
            return row
    return None


def describe(row: Branch) -> str:
    return "R%d (%s, end of life %s)" % (row.branch, row.kind, row.eol)


def verdict(driver_version: Optional[str], cuda_version: Optional[str], when: DateLike = None) -> Dict[str, Any]:
    """{status: supported|past_eol|unknown, branch, row, upgrade, text} for a node's driver, the
    upgrade being the branch ``upgrade`` names for the profile's CUDA."""
    number = branch_of(driver_version)
    row = BRANCHES.get(number) if number is not None else None
    result: Dict[str, Any] = {"branch": number, "row": row, "upgrade": None}
    if row is None:
        result.update(status="unknown", text="R%s is not in the driver lifecycle table (as of %s)" % (number, AS_OF)
                      if number is not None else "no driver version")
        return result
    if not past_eol(row, when):
        result.update(status="supported", text=describe(row))
        return result
    result.update(status="past_eol", upgrade=upgrade(cuda_version, when), text=describe(row))
    return result


def table() -> List[Dict[str, Any]]:
    """The rows as dicts, lowest branch first (docs and reports)."""
    return [BRANCHES[number]._asdict() for number in sorted(BRANCHES)]
