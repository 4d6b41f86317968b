# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_stack filters: installed_match resolves to _gpu_facts, errors become AnsibleFilterError."""
from __future__ import annotations

import base64

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.megatron_ds.cluster.plugins.filter.gpu_stack import FilterModule

FILTERS = FilterModule().filters()
HEADER = "#define NCCL_MAJOR 2\n#define NCCL_MINOR 16\n#define NCCL_PATCH 5\n#define NCCL_SUFFIX \"\"\n"
ITEM = {"header": "/usr/local/nccl-2.16.5/include/nccl.h", "library": "/usr/local/nccl-2.16.5/lib/libnccl.so.2"}


@pytest.mark.parametrize("exists, want, matched", [(True, "2.16.5-1", True), (False, "2.16.5-1", False),
                                                   (True, "2.18.3-1", False)])
def test_installed_match(exists, want, matched):
    headers = [{"item": ITEM, "content": base64.b64encode(HEADER.encode()).decode()}]
    libraries = [{"item": ITEM, "stat": {"exists": exists}}]
    result = FILTERS["installed_match"](headers, libraries, "nccl", want)
    assert result["matched"] is matched
    assert result["found"] == [dict(ITEM, version="2.16.5", library_exists=exists)]


@pytest.mark.parametrize("args", [([], [], "cuda", "13.0"), ([], [], "nccl", ""), (["not a slurp result"], [], "nccl", "2")])
def test_errors_become_filter_errors(args):
    with pytest.raises(AnsibleFilterError, match="megatron_ds.cluster.installed_match"):
        FILTERS["installed_match"](*args)
