# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""No role reads another role's internal variables (``__<role>_*``): those exist only after the
owner ran in the same play. A role reads another one's public outputs instead (the job lookup,
a registered fact it documents). megatron_launch once read megatron_job's __megatron_job_spec."""
from __future__ import annotations

import pathlib
import re

import pytest

ROLES = pathlib.Path(__file__).resolve().parents[2] / "roles"
NAMES = sorted(p.name for p in ROLES.iterdir() if (p / "meta" / "main.yml").exists())
# The shared helper nvidia_artifacts answers the role that include_role'd it, in the task right
# before the read, so its answer always exists there (its tasks/adopt.yml says so).
ALLOWED = {"__nvidia_artifacts_adopt"}


def _foreign(role: str):
    others = [name for name in NAMES if name != role]
    pattern = re.compile(r"(?<![A-Za-z0-9_])__(%s)_[a-z0-9_]+" % "|".join(map(re.escape, others)))
    for path in sorted((ROLES / role).rglob("*")):
        if path.is_file() and path.suffix in (".yml", ".yaml", ".j2"):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                for match in pattern.finditer(line):
                    # A role named like the start of another (megatron_job_x) is its own, not foreign.
                    if not match.group(0).startswith("__%s_" % role) and match.group(0) not in ALLOWED:
                        yield "%s:%d: %s" % (path.relative_to(ROLES), number, match.group(0))


@pytest.mark.parametrize("role", NAMES)
def test_a_role_reads_no_other_roles_internal_variables(role):
    assert list(_foreign(role)) == []
