# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one assertion the rule tables share: a check's finding is absent (status None), or present
once with the status and the words expected in its fix or found. Imported as
ansible_collections.megatron_ds.cluster.tests.support.findings."""
from __future__ import annotations

from typing import Dict, List, Optional


def expect(findings: List[Dict[str, str]], check: str, status: Optional[str], words: str = "") -> None:
    matches = [f for f in findings if f["check"] == check]
    if status is None:
        assert not matches, matches
        return
    assert len(matches) == 1, [f["check"] for f in findings]
    assert matches[0]["status"] == status, matches[0]
    assert words in matches[0]["fix"] + matches[0]["found"], matches[0]
