# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path
from typing import Dict, Optional

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import redist as _redist

# Real headers recorded on the GPU validation host (tests/fixtures/gpu-host-h200x2).
FIXTURES = Path(__file__).resolve().parents[4] / "fixtures"

SHA_A = "a" * 64
SHA_B = "b" * 64

# The shape of NVIDIA's redistrib_11.7.1.json (values shortened), cuda_nvcc without sbsa.
CUDA_MANIFEST = {
    "release_date": "2022-08-03",
    "cuda_cudart": {
        "name": "CUDA Runtime (cudart)",
        "license": "CUDA Toolkit",
        "version": "11.7.99",
        "linux-x86_64": {
            "relative_path": "cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-11.7.99-archive.tar.xz",
            "sha256": SHA_A, "md5": "0" * 32, "size": "854756",
        },
        "linux-sbsa": {
            "relative_path": "cuda_cudart/linux-sbsa/cuda_cudart-linux-sbsa-11.7.99-archive.tar.xz",
            "sha256": SHA_B, "md5": "0" * 32, "size": "798380",
        },
    },
    "cuda_nvcc": {
        "name": "CUDA NVCC",
        "license": "CUDA Toolkit",
        "version": "11.7.99",
        "linux-x86_64": {
            "relative_path": "cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-11.7.99-archive.tar.xz",
            "sha256": SHA_B, "md5": "0" * 32, "size": "37045896",
        },
    },
    "cuda_gdb": {
        "name": "CUDA GDB",
        "license": "CUDA Toolkit",
        "version": "11.7.91",
        "linux-x86_64": {"relative_path": "cuda_gdb/linux-x86_64/x.tar.xz", "md5": "0" * 32, "size": "1"},
    },
}

# The shape of NVIDIA's cuDNN manifests (8.9+): one more level, the CUDA variant.
CUDNN_MANIFEST = {
    "release_date": "2024-03-15",
    "release_label": "8.9.7",
    "cudnn": {
        "name": "NVIDIA CUDA Deep Neural Network library",
        "license": "cudnn",
        "version": "8.9.7.29",
        "cuda_variant": ["11", "12"],
        "linux-x86_64": {
            "cuda11": {"relative_path": "cudnn/linux-x86_64/cudnn-linux-x86_64-8.9.7.29_cuda11-archive.tar.xz",
                       "sha256": SHA_A, "md5": "0" * 32, "size": "860967256"},
            "cuda12": {"relative_path": "cudnn/linux-x86_64/cudnn-linux-x86_64-8.9.7.29_cuda12-archive.tar.xz",
                       "sha256": SHA_B, "md5": "0" * 32, "size": "864984964"},
        },
    },
}


@pytest.mark.parametrize("arch, platform", [
    ("x86_64", "linux-x86_64"),
    ("amd64", "linux-x86_64"),
    ("aarch64", "linux-sbsa"),
    ("ppc64le", "linux-ppc64le"),
])
def test_platform_for(arch, platform):
    assert _redist.platform_for(arch) == platform


@pytest.mark.parametrize("arch", ["i686", "riscv64", ""])
def test_platform_for_unknown_arch_says_what_is_supported(arch):
    with pytest.raises(_redist.RedistError, match="supported: aarch64, amd64"):
        _redist.platform_for(arch)


@pytest.mark.parametrize("mirror, expected", [
    (None, "https://developer.download.nvidia.com"),
    ("", "https://developer.download.nvidia.com"),
    ("http://mirror.local:8000/", "http://mirror.local:8000"),
    ("https://repo.example/nvidia", "https://repo.example/nvidia"),
])
def test_base_url(mirror, expected):
    assert _redist.base_url(mirror) == expected


def test_components_skip_top_level_metadata():
    assert _redist.components(CUDA_MANIFEST) == ["cuda_cudart", "cuda_gdb", "cuda_nvcc"]
    assert _redist.components(CUDNN_MANIFEST) == ["cudnn"]


@pytest.mark.parametrize("source", [json.dumps(CUDA_MANIFEST), json.dumps(CUDA_MANIFEST).encode(), CUDA_MANIFEST])
def test_load_manifest_accepts_text_bytes_and_dicts(source):
    assert _redist.load_manifest(source)["cuda_nvcc"]["version"] == "11.7.99"


@pytest.mark.parametrize("source, message", [
    ("{not json", "not valid JSON"),
    ('{"release_date": "2022-08-03"}', "lists no components"),
    ("[]", "lists no components"),
])
def test_load_manifest_rejects_what_is_not_a_manifest(source, message):
    with pytest.raises(_redist.RedistError, match=message):
        _redist.load_manifest(source)


@pytest.mark.parametrize("wanted, platform, expected", [
    (["cuda_nvcc", "cuda_cudart"], "linux-x86_64", [
        ("cuda_nvcc", "11.7.99", SHA_B,
         "https://mirror/compute/cuda/redist/cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-11.7.99-archive.tar.xz", 37045896),
        ("cuda_cudart", "11.7.99", SHA_A,
         "https://mirror/compute/cuda/redist/cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-11.7.99-archive.tar.xz", 854756),
    ]),
    (["cuda_cudart"], "linux-sbsa", [
        ("cuda_cudart", "11.7.99", SHA_B,
         "https://mirror/compute/cuda/redist/cuda_cudart/linux-sbsa/cuda_cudart-linux-sbsa-11.7.99-archive.tar.xz", 798380),
    ]),
])
def test_archives_keep_order_and_their_urls_follow_nvidia(wanted, platform, expected):
    got = _redist.archives(CUDA_MANIFEST, wanted, platform)
    base = _redist.redist_url("https://mirror/", "cuda")
    assert [(a["name"], a["version"], a["sha256"], _redist.join_url(base, a["relative_path"]), a["size"])
            for a in got] == expected


@pytest.mark.parametrize("wanted, platform, messages", [
    (["cuda_nvcc"], "linux-sbsa", ["'cuda_nvcc' has no linux-sbsa archive; platforms: linux-x86_64"]),
    (["libcublas"], "linux-x86_64", ["'libcublas' is not in the manifest; it lists: cuda_cudart, cuda_gdb, cuda_nvcc"]),
    (["cuda_gdb"], "linux-x86_64", ["'cuda_gdb' (linux-x86_64) carries no valid sha256"]),
    # every problem at once, not one per run
    (["libcublas", "cuda_nvcc"], "linux-sbsa", ["'libcublas' is not in the manifest", "'cuda_nvcc' has no linux-sbsa"]),
    ([], "linux-x86_64", ["no redist components requested"]),
])
def test_archives_refuse_with_every_reason(wanted, platform, messages):
    problems = _redist.manifest_problems(CUDA_MANIFEST, wanted, platform)
    assert len(problems) == len(messages)
    with pytest.raises(_redist.RedistError) as err:
        _redist.archives(CUDA_MANIFEST, wanted, platform)
    for message, problem in zip(messages, problems):
        assert message in problem and message in str(err.value)


@pytest.mark.parametrize("variant, sha", [("11", SHA_A), ("cuda12", SHA_B)])
def test_archives_cudnn_variant(variant, sha):
    (got,) = _redist.archives(CUDNN_MANIFEST, ["cudnn"], "linux-x86_64", variant)
    assert got["sha256"] == sha and got["version"] == "8.9.7.29"
    assert got["relative_path"] == _redist.cudnn_archive_relpath("8.9.7.29", variant.replace("cuda", ""))


@pytest.mark.parametrize("variant, message", [
    (None, "split by CUDA variant (cuda11, cuda12); say which one"),
    ("13", "has no cuda13 build for linux-x86_64; builds: cuda11, cuda12"),
])
def test_archives_cudnn_variant_missing(variant, message):
    assert message in _redist.manifest_problems(CUDNN_MANIFEST, ["cudnn"], "linux-x86_64", variant)[0]
    with pytest.raises(_redist.RedistError, match=message.replace("(", r"\(").replace(")", r"\)")):
        _redist.archives(CUDNN_MANIFEST, ["cudnn"], "linux-x86_64", variant)


@pytest.mark.parametrize("func, args, expected", [
    (_redist.cuda_archive_relpath, ("cuda_nvcc", "11.7.99"),
     "cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-11.7.99-archive.tar.xz"),
    (_redist.cudnn_archive_relpath, ("8.6.0.163", 11),
     "cudnn/linux-x86_64/cudnn-linux-x86_64-8.6.0.163_cuda11-archive.tar.xz"),
    (_redist.cudnn_archive_relpath, ("8.6.0.163", "11", "linux-sbsa"),
     "cudnn/linux-sbsa/cudnn-linux-sbsa-8.6.0.163_cuda11-archive.tar.xz"),
    (_redist.nccl_archive_name, ("2.16.5-1", "11.8"), "nccl_2.16.5-1+cuda11.8_x86_64.txz"),
    (_redist.nccl_relpath, ("2.16.5-1", "11.8"), "v2.16.5/nccl_2.16.5-1+cuda11.8_x86_64.txz"),
    (_redist.nccl_relpath, ("2.18.1-1", "12.1", "aarch64"), "v2.18.1/nccl_2.18.1-1+cuda12.1_aarch64.txz"),
])
def test_archive_names_follow_nvidia(func, args, expected):
    assert func(*args) == expected


@pytest.mark.parametrize("kind, mirror, expected", [
    ("cuda", None, "https://developer.download.nvidia.com/compute/cuda/redist"),
    ("cuda", "", "https://developer.download.nvidia.com/compute/cuda/redist"),
    ("cudnn", "http://10.0.0.5:8080/", "http://10.0.0.5:8080/compute/cudnn/redist"),
    ("nccl", "file:///srv/nvidia//", "file:///srv/nvidia/compute/redist/nccl"),
    ("cuda_runfile", "https://m", "https://m/compute/cuda"),
])
def test_redist_url_keeps_nvidia_paths_under_a_mirror(kind, mirror, expected):
    assert _redist.redist_url(mirror, kind) == expected
    assert expected.endswith("/" + _redist.redist_path(kind))


@pytest.mark.parametrize("func, args, message", [
    (_redist.redist_path, ("cublas",), "kinds: cuda, cuda_runfile, cudnn, nccl"),
    (_redist.manifest_name, ("",), "needs a release version"),
    (_redist.runfile_relpath, ("11.7.1", ""), "needs a version and a file name"),
    (_redist.runfile_relpath, ("11.7.1", "../x.run"), "needs a version and a file name"),
])
def test_layout_refuses_bad_input(func, args, message):
    with pytest.raises(_redist.RedistError, match=message):
        func(*args)


@pytest.mark.parametrize("func, args, expected", [
    (_redist.manifest_name, ("11.7.1",), "redistrib_11.7.1.json"),
    (_redist.manifest_name, ("8.9.7.29",), "redistrib_8.9.7.29.json"),
    (_redist.runfile_relpath, ("11.7.1", "cuda_11.7.1_515.65.01_linux.run"),
     "11.7.1/local_installers/cuda_11.7.1_515.65.01_linux.run"),
])
def test_manifest_and_runfile_names(func, args, expected):
    assert func(*args) == expected


def test_nccl_name_needs_the_package_revision():
    with pytest.raises(_redist.RedistError, match="lacks the package revision"):
        _redist.nccl_archive_name("2.16.5", "11.8")


@pytest.mark.parametrize("value, ok", [
    (SHA_A, True),
    ("A" * 64, False),
    ("a" * 63, False),
    ("", False),
    (None, False),
    ("g" * 64, False),
])
def test_is_sha256(value, ok):
    assert _redist.is_sha256(value) is ok


def test_manifest_entry_hashes_the_file(tmp_path):
    path = tmp_path / "x.tar.xz"
    path.write_bytes(b"nvidia")
    assert _redist.manifest_entry("c/linux-x86_64/x.tar.xz", str(path)) == {
        "relative_path": "c/linux-x86_64/x.tar.xz",
        "sha256": hashlib.sha256(b"nvidia").hexdigest(),
        "md5": hashlib.md5(b"nvidia").hexdigest(),  # nosec: NVIDIA's field, compared not trusted
        "size": "6",  # NVIDIA writes sizes as strings
    }


def test_marker_records_versions_and_sha256():
    artifacts = _redist.archives(CUDA_MANIFEST, ["cuda_cudart", "cuda_nvcc"], "linux-x86_64")
    assert _redist.marker("11.7.1", "redist", artifacts) == {
        "version": "11.7.1",
        "method": "redist",
        "components": {
            "cuda_cudart": {"version": "11.7.99", "sha256": SHA_A},
            "cuda_nvcc": {"version": "11.7.99", "sha256": SHA_B},
        },
    }


# ------------------------------------------------------------------ installed_match (adoption)
def _slurp(header: str, library: str, fixture: Optional[str]) -> Dict[str, object]:
    """A slurp loop result for one candidate: content when the header exists (a real header)."""
    result: Dict[str, object] = {"item": {"header": header, "library": library}}
    if fixture is None:
        result.update(failed=True, msg="file not found: %s" % header)
    else:
        result["content"] = base64.b64encode((FIXTURES / fixture).read_bytes()).decode()
    return result


def _stat(header: str, library: str, exists: bool) -> Dict[str, object]:
    return {"item": {"header": header, "library": library}, "stat": {"exists": exists}}


SYS_CUDNN = ("/usr/include/x86_64-linux-gnu/cudnn_version.h", "/usr/lib/x86_64-linux-gnu/libcudnn.so.9")
TREE_CUDNN = ("/usr/local/cuda-13.0/include/cudnn_version.h", "/usr/local/cuda-13.0/lib64/libcudnn.so.9")
SYS_NCCL = ("/usr/include/nccl.h", "/usr/lib/x86_64-linux-gnu/libnccl.so.2")
TREE_NCCL = ("/usr/local/nccl-2.28.3/include/nccl.h", "/usr/local/nccl-2.28.3/lib/libnccl.so.2")
CUDNN_914 = "gpu-host-h200x2/system-usr-include-cudnn_version.h"      # 9.14.0, the H200 host's apt cuDNN
CUDNN_919 = "gpu-host-h200x2/torch-venv-nvidia-cudnn_version.h"       # 9.19.0
NCCL_2283 = "gpu-host-h200x2/system-usr-include-nccl.h"               # 2.28.3, the host's apt NCCL


@pytest.mark.parametrize("kind, want, candidates, expected", [
    # (header, library, header fixture or None, library exists) per candidate, in order.
    ("cudnn", "9.14.0.64", [TREE_CUDNN + (None, False), SYS_CUDNN + (CUDNN_914, True)],
     {"matched": True, "header": SYS_CUDNN[0], "library": SYS_CUDNN[1], "version": "9.14.0"}),
    ("cudnn", "9.14.0.64", [TREE_CUDNN + (CUDNN_919, True), SYS_CUDNN + (CUDNN_914, True)],
     {"matched": True, "header": SYS_CUDNN[0], "library": SYS_CUDNN[1], "version": "9.14.0"}),
    # The first matching candidate wins.
    ("cudnn", "9.14.0", [TREE_CUDNN + (CUDNN_914, True), SYS_CUDNN + (CUDNN_914, True)],
     {"matched": True, "header": TREE_CUDNN[0], "library": TREE_CUDNN[1], "version": "9.14.0"}),
    # A header without its library is not an install.
    ("cudnn", "9.14.0.64", [SYS_CUDNN + (CUDNN_914, False)], {"matched": False}),
    ("cudnn", "9.19.0.56", [SYS_CUDNN + (CUDNN_914, True)], {"matched": False}),
    ("cudnn", "9.14.0.64", [TREE_CUDNN + (None, False), SYS_CUDNN + (None, False)], {"matched": False}),
    ("nccl", "2.28.3-1", [TREE_NCCL + (None, False), SYS_NCCL + (NCCL_2283, True)],
     {"matched": True, "header": SYS_NCCL[0], "library": SYS_NCCL[1], "version": "2.28.3"}),
    ("nccl", "2.28.9-1", [SYS_NCCL + (NCCL_2283, True)], {"matched": False}),
    # A cuDNN header is no NCCL header.
    ("nccl", "9.14.0", [SYS_NCCL + (CUDNN_914, True)], {"matched": False}),
])
def test_installed_match(kind, want, candidates, expected):
    headers = [_slurp(h, lib, fixture) for h, lib, fixture, _exists in candidates]
    libraries = [_stat(h, lib, exists) for h, lib, _fixture, exists in candidates]
    result = _redist.installed_match(headers, libraries, kind, want)
    found = result.pop("found")
    assert result == expected
    # Every header read is reported with its version, matched or not.
    parse = _redist.HEADER_PARSERS[kind]
    assert [f["header"] for f in found] == [
        h for h, _lib, fixture, _e in candidates if fixture and parse((FIXTURES / fixture).read_text())]


@pytest.mark.parametrize("kind, want, message", [
    ("cuda", "13.0", "kind must be one of cudnn, nccl"),
    ("nccl", "", "expected the wanted version"),
])
def test_installed_match_refuses(kind, want, message):
    with pytest.raises(ValueError, match=message):
        _redist.installed_match([], [], kind, want)


@pytest.mark.parametrize("results", [None, [], [{"item": {"header": "/h"}, "content": "!!not base64"}],
                                     [{"item": {"header": "/h", "library": "/l"}, "failed": True}]])
def test_installed_match_without_readable_headers(results):
    assert _redist.installed_match(results, [], "cudnn", "9.14.0") == {"matched": False, "found": []}
