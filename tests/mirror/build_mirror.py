# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Build the test mirror of NVIDIA's download site from real NVIDIA binaries on PyPI.

NVIDIA's site cannot be reached from CI, but NVIDIA publishes the same binaries as PyPI
wheels. This script downloads the wheels (``pip download --no-deps``) and repackages their
files into NVIDIA's published layouts, so the roles run exactly the tasks they run in
production against a mirror (``*_mirror_url``):

  compute/cuda/redist/redistrib_11.7.1.json                       (name, license, version,
  compute/cuda/redist/cuda_cudart/linux-x86_64/cuda_cudart-linux-x86_64-11.7.99-archive.tar.xz
  compute/cuda/redist/cuda_nvcc/linux-x86_64/cuda_nvcc-linux-x86_64-11.7.99-archive.tar.xz
  compute/cudnn/redist/redistrib_8.6.0.163.json                    relative_path, sha256,
  compute/cudnn/redist/cudnn/linux-x86_64/cudnn-linux-x86_64-8.6.0.163_cuda11-archive.tar.xz
  compute/redist/nccl/v2.16.5/nccl_2.16.5-1+cuda11.8_x86_64.txz     md5, size)
  tampered/compute/cuda/redist/...   a manifest whose cuda_cudart archive was altered after
                                     its sha256 was recorded (the negative test)

The archives are SUBSETS of NVIDIA's (see README.txt written next to them): the nvcc wheel
has ptxas, nvvm and the crt headers but no ``nvcc`` driver; the cuDNN archive carries every
header but only libcudnn.so.8 and libcudnn_ops_infer.so.8 (the full set is 1.3 GB); the NCCL
archive has no static library. Every file in them is NVIDIA's, byte for byte.

Idempotent: the result is cached under ``.cache/mirror`` and rebuilt only when the wheels or
this recipe change. xz runs with ``-T0 -0`` (fast; the archives are test fixtures).
It prints, and writes to ``mirror-vars.json``, the values a test inventory needs.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from typing import Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, ".collections"))

from ansible_collections.megatron_ds.cluster.plugins.module_utils._stack import redist as _redist  # noqa: E402

RECIPE_VERSION = 4  # bump when the layout below changes

CUDA_RELEASE = "11.7.1"
CUDA_RELEASE_DATE = "2022-08-03"  # NVIDIA's redistrib_11.7.1.json
CUDA_COMPONENT_VERSION = "11.7.99"
CUDNN_VERSION = "8.6.0.163"
CUDNN_CUDA_MAJOR = 11
NCCL_VERSION = "2.16.5-1"
NCCL_CUDA_BUILD = "11.8"
PLATFORM = "linux-x86_64"

WHEELS: Dict[str, str] = {
    "runtime": "nvidia-cuda-runtime-cu11==11.7.99",
    "nvcc": "nvidia-cuda-nvcc-cu11==11.7.99",
    "cudnn": "nvidia-cudnn-cu11==8.6.0.163",
    "nccl": "nvidia-nccl-cu11==2.16.5",
}

SUBSET_NOTE = (
    "megatron_ds.cluster test mirror: NVIDIA's own files from PyPI wheels, repackaged into "
    "NVIDIA's redist layout. The archives are subsets; see README.txt."
)


def log(msg: str) -> None:
    print("build_mirror: %s" % msg, file=sys.stderr, flush=True)


def sha256_of(path: str) -> str:
    return _redist.sha256_file(path)


def download_wheels(wheel_dir: str) -> Dict[str, str]:
    """pip download each wheel (no deps) unless it is already there; return key -> path."""
    os.makedirs(wheel_dir, exist_ok=True)
    found: Dict[str, str] = {}
    for key, spec in WHEELS.items():
        name, version = spec.split("==")
        prefix = "%s-%s-" % (name.replace("-", "_"), version)
        have = [f for f in os.listdir(wheel_dir) if f.startswith(prefix) and f.endswith(".whl")]
        if not have:
            log("pip download %s" % spec)
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                 "--platform", "manylinux2014_x86_64", "--python-version", "3.11", "--dest", wheel_dir, spec],
                check=True,
            )
            have = [f for f in os.listdir(wheel_dir) if f.startswith(prefix) and f.endswith(".whl")]
        if len(have) != 1:
            raise SystemExit("build_mirror: expected one wheel for %s in %s, found %s" % (spec, wheel_dir, have))
        found[key] = os.path.join(wheel_dir, have[0])
    return found


def extract(wheel: str, members: List[Tuple[str, str, int]], root: str) -> None:
    """Copy ``members`` (wheel path, archive path, mode) out of ``wheel`` under ``root``."""
    with zipfile.ZipFile(wheel) as zf:
        for src, dest, mode in members:
            target = os.path.join(root, dest)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with zf.open(src) as fin, open(target, "wb") as fout:
                shutil.copyfileobj(fin, fout, 1 << 20)
            os.chmod(target, mode)


def wheel_members(wheel: str, prefix: str) -> List[str]:
    with zipfile.ZipFile(wheel) as zf:
        return [n for n in zf.namelist() if n.startswith(prefix) and not n.endswith("/")
                and not n.endswith("__init__.py")]


def license_member(wheel: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        return next(n for n in zf.namelist() if n.endswith(".dist-info/License.txt"))


def so_chain(lib_dir: str, real: str, links: List[Tuple[str, str]]) -> None:
    """NVIDIA's soname chain, e.g. libcudart.so -> libcudart.so.11.0 -> libcudart.so.11.7.99."""
    for link, target in links:
        os.symlink(target, os.path.join(lib_dir, link))
    assert os.path.isfile(os.path.join(lib_dir, real))


def make_tar_xz(src_parent: str, top: str, dest: str) -> None:
    """tar|xz -T0 -0 with fixed owner, order and mtime, so a rebuild gives the same bytes."""
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = dest + ".part"
    with open(tmp, "wb") as out:
        tar = subprocess.Popen(
            ["tar", "-C", src_parent, "--sort=name", "--owner=0", "--group=0", "--numeric-owner",
             "--mtime=@1659484800", "-cf", "-", top],
            stdout=subprocess.PIPE,
        )
        xz = subprocess.run(["xz", "-T0", "-0", "-c"], stdin=tar.stdout, stdout=out, check=True)
        tar.stdout.close()
        if tar.wait() != 0 or xz.returncode != 0:
            raise SystemExit("build_mirror: packing %s failed" % dest)
    os.replace(tmp, dest)


def build_cudart(wheel: str, work: str, site: str) -> str:
    top = "cuda_cudart-%s-%s-archive" % (PLATFORM, CUDA_COMPONENT_VERSION)
    root = os.path.join(work, top)
    members = [(m, "include/" + m.split("/include/", 1)[1], 0o644)
               for m in wheel_members(wheel, "nvidia/cuda_runtime/include/")]
    members.append(("nvidia/cuda_runtime/lib/libcudart.so.11.0", "lib/libcudart.so.%s" % CUDA_COMPONENT_VERSION, 0o755))
    members.append((license_member(wheel), "LICENSE", 0o644))
    extract(wheel, members, root)
    so_chain(os.path.join(root, "lib"), "libcudart.so.%s" % CUDA_COMPONENT_VERSION,
             [("libcudart.so.11.0", "libcudart.so.%s" % CUDA_COMPONENT_VERSION), ("libcudart.so", "libcudart.so.11.0")])
    rel = _redist.cuda_archive_relpath("cuda_cudart", CUDA_COMPONENT_VERSION, PLATFORM)
    make_tar_xz(work, top, os.path.join(site, _redist.CUDA_REDIST_PATH, rel))
    return rel


def build_nvcc(wheel: str, work: str, site: str) -> str:
    top = "cuda_nvcc-%s-%s-archive" % (PLATFORM, CUDA_COMPONENT_VERSION)
    root = os.path.join(work, top)
    members = []
    for m in wheel_members(wheel, "nvidia/cuda_nvcc/"):
        rel = m[len("nvidia/cuda_nvcc/"):]
        members.append((m, rel, 0o755 if rel.startswith("bin/") or rel.endswith(".so") else 0o644))
    members.append((license_member(wheel), "LICENSE", 0o644))
    extract(wheel, members, root)
    rel = _redist.cuda_archive_relpath("cuda_nvcc", CUDA_COMPONENT_VERSION, PLATFORM)
    make_tar_xz(work, top, os.path.join(site, _redist.CUDA_REDIST_PATH, rel))
    return rel


def build_cudnn(wheel: str, work: str, site: str) -> str:
    top = "cudnn-%s-%s_cuda%d-archive" % (PLATFORM, CUDNN_VERSION, CUDNN_CUDA_MAJOR)
    root = os.path.join(work, top)
    short = ".".join(CUDNN_VERSION.split(".")[:3])  # libcudnn.so.8.6.0
    members = [(m, "include/" + m.split("/include/", 1)[1], 0o644)
               for m in wheel_members(wheel, "nvidia/cudnn/include/")]
    # Subset: the dispatcher library and the sublibrary every other one depends on.
    for lib in ("libcudnn", "libcudnn_ops_infer"):
        members.append(("nvidia/cudnn/lib/%s.so.8" % lib, "lib/%s.so.%s" % (lib, short), 0o755))
    members.append((license_member(wheel), "LICENSE", 0o644))
    extract(wheel, members, root)
    for lib in ("libcudnn", "libcudnn_ops_infer"):
        so_chain(os.path.join(root, "lib"), "%s.so.%s" % (lib, short),
                 [("%s.so.8" % lib, "%s.so.%s" % (lib, short)), ("%s.so" % lib, "%s.so.8" % lib)])
    rel = _redist.cudnn_archive_relpath(CUDNN_VERSION, CUDNN_CUDA_MAJOR, PLATFORM)
    make_tar_xz(work, top, os.path.join(site, _redist.CUDNN_REDIST_PATH, rel))
    return rel


def build_nccl(wheel: str, work: str, site: str) -> str:
    name = _redist.nccl_archive_name(NCCL_VERSION, NCCL_CUDA_BUILD)
    top = name[: -len(".txz")]
    root = os.path.join(work, top)
    short = NCCL_VERSION.split("-", maxsplit=1)[0]
    members = [(m, "include/" + m.split("/include/", 1)[1], 0o644)
               for m in wheel_members(wheel, "nvidia/nccl/include/")]
    members.append(("nvidia/nccl/lib/libnccl.so.2", "lib/libnccl.so.%s" % short, 0o755))
    members.append((license_member(wheel), "LICENSE.txt", 0o644))
    extract(wheel, members, root)
    so_chain(os.path.join(root, "lib"), "libnccl.so.%s" % short,
             [("libnccl.so.2", "libnccl.so.%s" % short), ("libnccl.so", "libnccl.so.2")])
    rel = _redist.nccl_relpath(NCCL_VERSION, NCCL_CUDA_BUILD)
    make_tar_xz(work, top, os.path.join(site, _redist.NCCL_REDIST_PATH, rel))
    return rel


def write_json(path: str, data: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        json.dump(data, handle, indent=4)
        handle.write("\n")


def cuda_manifest(site_root: str, rels: Dict[str, str]) -> dict:
    names = {"cuda_cudart": "CUDA Runtime (cudart)", "cuda_nvcc": "CUDA NVCC"}
    manifest: dict = {"release_date": CUDA_RELEASE_DATE, "megatron_ds_test_mirror": SUBSET_NOTE}
    for comp, rel in sorted(rels.items()):
        path = os.path.join(site_root, _redist.CUDA_REDIST_PATH, rel)
        manifest[comp] = {
            "name": names[comp],
            "license": "CUDA Toolkit",
            "version": CUDA_COMPONENT_VERSION,
            PLATFORM: _redist.manifest_entry(rel, path),
        }
    return manifest


def build(cache: str, force: bool = False) -> dict:
    wheel_dir = os.path.join(cache, "wheels")
    site = os.path.join(cache, "site")
    wheels = download_wheels(wheel_dir)
    stamp = {"recipe": RECIPE_VERSION, "wheels": {k: os.path.basename(v) for k, v in wheels.items()}}
    stamp_path = os.path.join(cache, "build-stamp.json")
    vars_path = os.path.join(cache, "mirror-vars.json")
    if not force and os.path.exists(stamp_path) and os.path.exists(vars_path):
        with open(stamp_path) as handle:
            if json.load(handle) == stamp:
                with open(vars_path) as handle:
                    result = json.load(handle)
                if all(os.path.exists(os.path.join(site, p)) for p in result["files"]):
                    log("up to date: %s" % site)
                    return result

    log("repackaging the wheels into NVIDIA's layouts under %s" % site)
    if os.path.isdir(site):
        shutil.rmtree(site)
    os.makedirs(site)
    work = tempfile.mkdtemp(prefix="mirror-", dir=cache)
    try:
        rels = {
            "cuda_cudart": build_cudart(wheels["runtime"], work, site),
            "cuda_nvcc": build_nvcc(wheels["nvcc"], work, site),
        }
        cudnn_rel = build_cudnn(wheels["cudnn"], work, site)
        nccl_rel = build_nccl(wheels["nccl"], work, site)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    cuda_manifest_rel = "%s/redistrib_%s.json" % (_redist.CUDA_REDIST_PATH, CUDA_RELEASE)
    write_json(os.path.join(site, cuda_manifest_rel), cuda_manifest(site, rels))

    cudnn_path = os.path.join(site, _redist.CUDNN_REDIST_PATH, cudnn_rel)
    cudnn_manifest_rel = "%s/redistrib_%s.json" % (_redist.CUDNN_REDIST_PATH, CUDNN_VERSION)
    write_json(os.path.join(site, cudnn_manifest_rel), {
        "release_label": CUDNN_VERSION,
        "release_product": "cudnn",
        "megatron_ds_test_mirror": SUBSET_NOTE,
        "cudnn": {
            "name": "NVIDIA CUDA Deep Neural Network library",
            "license": "cudnn",
            "version": CUDNN_VERSION,
            "cuda_variant": [str(CUDNN_CUDA_MAJOR)],
            PLATFORM: {"cuda%d" % CUDNN_CUDA_MAJOR: _redist.manifest_entry(cudnn_rel, cudnn_path)},
        },
    })

    # The negative test: the manifest records the true sha256, the served archive differs.
    tampered_rel = "tampered/%s/%s" % (_redist.CUDA_REDIST_PATH, rels["cuda_cudart"])
    good = os.path.join(site, _redist.CUDA_REDIST_PATH, rels["cuda_cudart"])
    os.makedirs(os.path.dirname(os.path.join(site, tampered_rel)), exist_ok=True)
    with open(good, "rb") as src, open(os.path.join(site, tampered_rel), "wb") as dst:
        data = bytearray(src.read())
        data[len(data) // 2] ^= 0xFF
        dst.write(bytes(data))
    tampered_manifest_rel = "tampered/%s/redistrib_%s.json" % (_redist.CUDA_REDIST_PATH, CUDA_RELEASE)
    write_json(os.path.join(site, tampered_manifest_rel), cuda_manifest(site, {"cuda_cudart": rels["cuda_cudart"]}))

    nccl_path = os.path.join(site, _redist.NCCL_REDIST_PATH, nccl_rel)
    files = [cuda_manifest_rel, cudnn_manifest_rel, tampered_manifest_rel, tampered_rel,
             os.path.join(_redist.CUDA_REDIST_PATH, rels["cuda_cudart"]),
             os.path.join(_redist.CUDA_REDIST_PATH, rels["cuda_nvcc"]),
             os.path.join(_redist.CUDNN_REDIST_PATH, cudnn_rel),
             os.path.join(_redist.NCCL_REDIST_PATH, nccl_rel)]
    with open(os.path.join(site, "SHA256SUMS"), "w") as handle:
        for rel in sorted(files):
            handle.write("%s  %s\n" % (sha256_of(os.path.join(site, rel)), rel))
    with open(os.path.join(site, "README.txt"), "w") as handle:
        handle.write(README)

    result = {
        "site": site,
        "files": files,
        "cuda_release": CUDA_RELEASE,
        "cuda_manifest_sha256": sha256_of(os.path.join(site, cuda_manifest_rel)),
        "cudnn_manifest_sha256": sha256_of(os.path.join(site, cudnn_manifest_rel)),
        "nccl_sha256": sha256_of(nccl_path),
        "nccl_file": nccl_rel,
        "tampered_prefix": "tampered",
    }
    write_json(vars_path, result)
    write_json(stamp_path, stamp)
    return result


README = """megatron_ds.cluster test mirror (built by tests/mirror/build_mirror.py)

Layout: NVIDIA's download site (https://developer.download.nvidia.com/...), so a role's
*_mirror_url pointing here behaves as in production.

Every binary here is NVIDIA's own, taken unmodified from the PyPI wheels
nvidia-cuda-runtime-cu11 11.7.99, nvidia-cuda-nvcc-cu11 11.7.99, nvidia-cudnn-cu11 8.6.0.163
and nvidia-nccl-cu11 2.16.5. The archives are SUBSETS of what NVIDIA publishes:
  * cuda_nvcc: ptxas, nvvm (libnvvm, libdevice), the crt headers. No nvcc driver binary
    (the wheel does not carry it).
  * cuda_cudart: headers and libcudart.so.11.7.99 with its soname links; no static libs.
  * cudnn 8.6.0.163 (cuda11): every header, but only libcudnn.so.8 and
    libcudnn_ops_infer.so.8 of the seven libraries (the full set is 1.3 GB).
  * nccl 2.16.5-1+cuda11.8: headers and libnccl.so.2.16.5; no libnccl_static.a.
The manifests are written in NVIDIA's format (name, license, version, platform objects with
relative_path, sha256, md5, size); their sha256 values are those of these subset archives.
tampered/ serves a cuda_cudart archive altered after its sha256 was recorded.
"""


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--cache", default=os.path.join(REPO, ".cache", "mirror"),
                        help="cache directory (default: .cache/mirror in the repo)")
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    result = build(os.path.abspath(args.cache), force=args.force)
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
