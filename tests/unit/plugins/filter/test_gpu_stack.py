# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_stack filters: NVIDIA's download layout and installed_match from _redist, errors as
AnsibleFilterError naming the filter; and the roles keep no Jinja copy of that layout."""
from __future__ import annotations

import base64
import json
import re
from pathlib import Path

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


# --------------------------------------------------------------------------- NVIDIA's layout
SHA = "c" * 64
CUDA_MANIFEST = {
    "release_date": "2022-08-03",
    "cuda_cudart": {"name": "CUDA Runtime (cudart)", "license": "CUDA Toolkit", "version": "11.7.99",
                    "linux-x86_64": {"relative_path": "cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-11.7.99-archive.tar.xz",
                                     "sha256": SHA, "md5": "0" * 32, "size": "854756"}},
}
CUDNN_MANIFEST = {
    "cudnn": {"name": "cuDNN", "license": "cudnn", "version": "8.9.7.29",
              "linux-x86_64": {"cuda12": {"relative_path": "cudnn/linux-x86_64/cudnn-linux-x86_64-8.9.7.29_cuda12-archive.tar.xz",
                                          "sha256": SHA, "md5": "0" * 32, "size": "1"}}},
}
CUDART = {"name": "cuda_cudart", "version": "11.7.99", "sha256": SHA, "size": 854756,
          "relative_path": "cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-11.7.99-archive.tar.xz"}


@pytest.mark.parametrize("name, args, expected", [
    ("nvidia_platform", ("x86_64",), "linux-x86_64"),
    ("nvidia_platform", ("aarch64",), "linux-sbsa"),
    ("nvidia_url", ("", "cuda"), "https://developer.download.nvidia.com/compute/cuda/redist"),
    ("nvidia_url", (None, "cuda_runfile"), "https://developer.download.nvidia.com/compute/cuda"),
    ("nvidia_url", ("http://mirror:8080/", "cudnn"), "http://mirror:8080/compute/cudnn/redist"),
    ("nvidia_url", ("http://mirror:8080", "nccl"), "http://mirror:8080/compute/redist/nccl"),
    ("nvidia_redist_path", ("cuda",), "compute/cuda/redist"),
    ("nvidia_redist_path", ("cuda_runfile",), "compute/cuda"),
    ("redist_manifest_name", ("11.7.1",), "redistrib_11.7.1.json"),
    ("redist_manifest", (json.dumps(CUDA_MANIFEST),), CUDA_MANIFEST),
    ("redist_problems", (CUDA_MANIFEST, ["cuda_cudart"], "linux-x86_64"), []),
    ("redist_problems", (CUDA_MANIFEST, ["cuda_nvcc"], "linux-x86_64"),
     ["component 'cuda_nvcc' is not in the manifest; it lists: cuda_cudart"]),
    ("redist_problems", (CUDNN_MANIFEST, ["cudnn"], "linux-x86_64", "11"),
     ["component 'cudnn' has no cuda11 build for linux-x86_64; builds: cuda12"]),
    ("redist_archives", (CUDA_MANIFEST, ["cuda_cudart"], "linux-x86_64"), [CUDART]),
    ("redist_archives", (CUDNN_MANIFEST, ["cudnn"], "linux-x86_64", "12"),
     [{"name": "cudnn", "version": "8.9.7.29", "sha256": SHA, "size": 1,
       "relative_path": "cudnn/linux-x86_64/cudnn-linux-x86_64-8.9.7.29_cuda12-archive.tar.xz"}]),
    # The marker the cuda_toolkit role writes (with role, prefix and platform combined in).
    ("redist_marker", ([CUDART], "11.7.1", "redist"),
     {"version": "11.7.1", "method": "redist", "components": {"cuda_cudart": {"version": "11.7.99", "sha256": SHA}}}),
    ("cuda_runfile_relpath", ("cuda_11.7.1_515.65.01_linux.run", "11.7.1"),
     "11.7.1/local_installers/cuda_11.7.1_515.65.01_linux.run"),
    ("cudnn_archive_relpath", ("8.6.0.163", 11, "linux-x86_64"),
     "cudnn/linux-x86_64/cudnn-linux-x86_64-8.6.0.163_cuda11-archive.tar.xz"),
    ("nccl_archive_name", ("2.16.5-1", "11.8", "x86_64"), "nccl_2.16.5-1+cuda11.8_x86_64.txz"),
    ("nccl_relpath", ("2.16.5-1", "11.8", "x86_64"), "v2.16.5/nccl_2.16.5-1+cuda11.8_x86_64.txz"),
])
def test_layout_filters(name, args, expected):
    assert FILTERS[name](*args) == expected


@pytest.mark.parametrize("name, args, message", [
    ("nvidia_platform", ("riscv64",), "no NVIDIA redist platform for architecture 'riscv64'"),
    ("nvidia_url", ("", "cublas"), "no NVIDIA download directory for 'cublas'"),
    ("redist_manifest_name", ("",), "needs a release version"),
    ("redist_manifest", ("{not json",), "not valid JSON"),
    ("redist_manifest", ("{}",), "lists no components"),
    ("redist_archives", (CUDA_MANIFEST, ["cuda_nvcc"], "linux-x86_64"), "'cuda_nvcc' is not in the manifest"),
    ("cuda_runfile_relpath", ("", "11.7.1"), "needs a version and a file name"),
    ("nccl_archive_name", ("2.16.5", "11.8", "x86_64"), "lacks the package revision"),
    ("nccl_relpath", ("2.16.5", "11.8", "x86_64"), "lacks the package revision"),
])
def test_layout_filters_name_themselves_in_errors(name, args, message):
    with pytest.raises(AnsibleFilterError, match="megatron_ds.cluster.%s: .*%s" % (name, re.escape(message))):
        FILTERS[name](*args)


ROLES = Path(__file__).resolve().parents[4] / "roles"
# NVIDIA's layout, as the roles used to spell it in Jinja before the filters.
LAYOUT = re.compile(r"compute/(cuda|cudnn|redist)\b(?!/repos)|redistrib_\{\{|-archive\.tar\.xz|\+cuda\{\{|local_installers/\{\{")


@pytest.mark.parametrize("role", ["cuda_toolkit", "cudnn", "nccl", "nvidia_artifacts", "nvidia_driver"])
def test_roles_take_nvidia_layout_from_the_filters(role):
    """Tasks, vars and templates hold no copy of the layout (comments and docs may name it)."""
    found = []
    for path in sorted((ROLES / role).rglob("*")):
        if path.suffix not in (".yml", ".j2") or "meta" in path.parts:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split(" #", 1)[0]
            if not code.lstrip().startswith("#") and LAYOUT.search(code):
                found.append("%s:%d: %s" % (path.relative_to(ROLES), number, line.strip()))
    assert not found, "\n".join(found)
