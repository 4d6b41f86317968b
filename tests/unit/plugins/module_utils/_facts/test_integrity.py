# -*- coding: utf-8 -*-
# Copyright: megatron_ds.cluster developers
# Apache License 2.0 (see LICENSE)
"""Unit tables for the damaged-install checks (module_utils/_facts/integrity.py) and how gpu_stack_facts
reports them: pip's RECORD of torch, DeepSpeed and apex, git's index of the Megatron-DeepSpeed
checkout. apex is covered here on a fake RECORD tree: the simulated cluster's `cpu` profile has no
apex (its CUDA extensions need a GPU toolchain), so no molecule scenario can damage a real one."""
from __future__ import annotations

import base64
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import collect as gf
from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import integrity as ig

SITE = "/venv/lib/python3.11/site-packages"


def _record_line(path: str, content: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(content).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d\n" % (path, digest, len(content))


def pip_install(root: Path, name: str, version: str, files: Dict[str, bytes]) -> str:
    """A distribution as pip leaves it in a fake venv: the files, METADATA and a RECORD listing
    every file with its sha256 and size (and itself, and byte code, without)."""
    dist = "%s-%s.dist-info" % (name, version)
    files = dict(files)
    files[dist + "/METADATA"] = ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n\n" % (name, version)).encode()
    record = "".join(_record_line(path, content) for path, content in sorted(files.items()))
    record += "%s/RECORD,,\n%s/__pycache__/__init__.cpython-311.pyc,,\n" % (dist, name)
    files[dist + "/RECORD"] = record.encode()
    for path, content in files.items():
        target = root / (SITE.lstrip("/") + "/" + path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return SITE + "/" + dist


def host(root: Path) -> gf.Host:
    return gf.Host(root=str(root), run=lambda argv, timeout: (127, "", "no process may run"), timeout=5)


def check(root: Path, meta_dir: str, ctime_slack: float = ig.CTIME_SLACK) -> Dict:
    h = host(root)
    return ig.check_record(h.read_bytes, h.path, meta_dir, ctime_slack=ctime_slack)


TORCH_FILES = {
    "torch/__init__.py": b"import torch._C\n" * 40,
    "torch/version.py": b"__version__ = '2.13.0+cpu'\ncuda: Optional[str] = None\n",
    "torch/lib/libtorch_cpu.so": b"\x7fELF" + b"\0" * 4092,
    "../../../bin/torchrun": b"#!/venv/bin/python\n",
}


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 2])


def _grow(path: Path) -> None:
    path.write_bytes(path.read_bytes() + b"\n# appended\n")


def _same_size(path: Path) -> None:
    data = path.read_bytes()
    path.write_bytes(bytes(reversed(data)))


def _same_size_old_mtime(path: Path) -> None:
    """The same edit with the file's mtime set back before the install (``touch -r``): its inode's
    ctime still moves, and no user call sets that back."""
    _same_size(path)
    os.utime(str(path), (1000000000, 1000000000))


def _chmod_only(path: Path) -> None:
    """The mode changed, the bytes did not: the ctime moves, the file is hashed and found whole."""
    path.chmod(0o600)


def _remove(path: Path) -> None:
    path.unlink()


@pytest.mark.parametrize("damage, rel, problem", [
    (_truncate, "torch/lib/libtorch_cpu.so", "torch/lib/libtorch_cpu.so: 2048 bytes, RECORD says 4096"),
    (_grow, "torch/__init__.py", "torch/__init__.py: 652 bytes, RECORD says 640"),
    (_remove, "torch/version.py", "torch/version.py: missing"),
    (_remove, "../../../bin/torchrun", "../../../bin/torchrun: missing"),  # outside site-packages, as pip records scripts
    # Other bytes of the same length, written after pip wrote RECORD: the file is hashed.
    (_same_size, "torch/lib/libtorch_cpu.so",
     "torch/lib/libtorch_cpu.so: same size, other content than RECORD's sha256 (modified after the install)"),
    # ... also when its mtime was set back to before the install: the ctime is newer than RECORD's.
    (_same_size_old_mtime, "torch/lib/libtorch_cpu.so",
     "torch/lib/libtorch_cpu.so: same size, other content than RECORD's sha256 (modified after the install)"),
    (_chmod_only, "torch/lib/libtorch_cpu.so", None),
])
def test_record_sizes_see_missing_cut_and_grown_files(tmp_path, damage, rel, problem):
    meta = pip_install(tmp_path, "torch", "2.13.0", TORCH_FILES)
    whole = check(tmp_path, meta)
    assert whole == {"source": meta + "/RECORD", "checked": 5, "bad_count": 0, "bad": [], "error": None,
                     "hashed": 0, "unhashed": 0}
    # The kernel stamps ctimes from its coarse clock (a few ms): a change in the same tick as the
    # install would carry RECORD's own ctime.
    time.sleep(0.05)
    damage(Path(os.path.normpath(str(tmp_path) + SITE + "/" + rel)))
    # No slack: the damage follows the install within milliseconds here, not minutes as on a node.
    result = check(tmp_path, meta, ctime_slack=0)
    assert result["checked"] == 5  # the four files and METADATA (RECORD and byte code carry no size)
    assert result["bad"] == ([problem] if problem else [])
    assert result["bad_count"] == (1 if problem else 0)
    assert result["hashed"] == (1 if damage in (_same_size, _same_size_old_mtime, _chmod_only) else 0)


def test_a_chown_right_after_the_install_is_not_hashed_again(tmp_path):
    """A recursive chown or chmod of the venv moves every ctime, RECORD's in the same walk: within
    the slack those files are not hashed on every later facts call."""
    meta = pip_install(tmp_path, "torch", "2.13.0", TORCH_FILES)
    for rel in TORCH_FILES:
        os.chmod(os.path.normpath(str(tmp_path) + SITE + "/" + rel), 0o640)
    assert check(tmp_path, meta)["hashed"] == 0
    assert check(tmp_path, meta, ctime_slack=-1)["hashed"] == 5  # without it: the four files and METADATA


def test_hashing_stays_within_the_budget(tmp_path):
    """A venv copied without its mtimes makes every file newer than RECORD; hashing stops at the
    budget (shared by the distributions of one facts call) and says how many files it left."""
    meta = pip_install(tmp_path, "torch", "2.13.0", TORCH_FILES)
    for rel in TORCH_FILES:
        target = Path(os.path.normpath(str(tmp_path) + SITE + "/" + rel))
        os.utime(str(target), (4000000000, 4000000000))
    h = host(tmp_path)
    budget = [4200]  # the small files fit, libtorch_cpu.so (4096) no longer does after them
    result = ig.check_record(h.read_bytes, h.path, meta, budget)
    assert result["bad"] == [] and result["hashed"] + result["unhashed"] == 4
    assert result["unhashed"] >= 1 and budget[0] >= 0
    unlimited = ig.check_record(h.read_bytes, h.path, meta)
    assert (unlimited["hashed"], unlimited["unhashed"]) == (4, 0)


def test_only_the_first_five_bad_files_are_listed(tmp_path):
    files = {"deepspeed/op_%02d.py" % i: b"x" * (i + 1) for i in range(12)}
    meta = pip_install(tmp_path, "deepspeed", "0.19.6", files)
    for name in files:
        (tmp_path / (SITE.lstrip("/") + "/" + name)).unlink()
    result = check(tmp_path, meta)
    assert result["bad_count"] == 12 and len(result["bad"]) == ig.SHOWN == 5
    assert result["bad"][0] == "deepspeed/METADATA: missing" or result["bad"][0].endswith(": missing")


@pytest.mark.parametrize("meta, record, expected_error", [
    ("apex-0.1-py3.11.egg-info", None, None),  # setup.py install: no RECORD, nothing to compare
    ("apex-0.1.dist-info", None, "no RECORD in %s/apex-0.1.dist-info: installed without pip, or damaged" % SITE),
])
def test_no_record(tmp_path, meta, record, expected_error):
    (tmp_path / SITE.lstrip("/") / meta).mkdir(parents=True)
    result = check(tmp_path, SITE + "/" + meta)
    assert result["checked"] == 0 and result["bad"] == [] and result["error"] == expected_error


@pytest.mark.parametrize("text, expected", [
    ("a/b.py,sha256=47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU,0\n",
     [("a/b.py", bytes.fromhex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), 0)]),
    ("a/b.py,sha256=x,12\n", [("a/b.py", None, 12)]),            # not 32 bytes: no digest
    ("a/b.py,md5=1B2M2Y8AsgTpgAmY7PhCfg,0\n", [("a/b.py", None, 0)]),  # another algorithm
    ("a/RECORD,,\n", [("a/RECORD", None, None)]),
])
def test_parse_record_entries(text, expected):
    assert ig.parse_record_entries(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("a/b.py,sha256=x,12\n", [("a/b.py", 12)]),
    ("a/RECORD,,\n", [("a/RECORD", None)]),
    ('"a,b.py",sha256=x,3\n', [("a,b.py", 3)]),  # csv quoting of a comma in a name
    ("a/c.pyc,,\n\n", [("a/c.pyc", None)]),
    ("", []),
])
def test_parse_record(text, expected):
    assert ig.parse_record(text) == expected


# --------------------------------------------------------------------------- through gpu_stack_facts
APEX_FILES = {
    "apex/__init__.py": b"# NVIDIA apex\n",
    "apex/normalization/__init__.py": b"from .fused_layer_norm import *\n",
    "apex/optimizers/__init__.py": b"from .fused_adam import FusedAdam\n",
    "amp_C.cpython-311-x86_64-linux-gnu.so": b"\x7fELF" + b"\1" * 8188,
    "fused_layer_norm_cuda.cpython-311-x86_64-linux-gnu.so": b"\x7fELF" + b"\2" * 4092,
}


@pytest.mark.parametrize("probe_files", [True, False])
def test_damaged_apex_is_reported_by_the_facts(tmp_path, probe_files):
    """apex built with its CUDA extensions and installed by pip; amp_C cut short on this node."""
    (tmp_path / "venv/bin").mkdir(parents=True)
    (tmp_path / "venv/bin/python").write_text("")
    (tmp_path / "venv/bin/python").chmod(0o755)
    (tmp_path / "venv/pyvenv.cfg").write_text("version = 3.11.2\n")
    meta = pip_install(tmp_path, "apex", "0.1", APEX_FILES)
    _truncate(tmp_path / (SITE.lstrip("/") + "/amp_C.cpython-311-x86_64-linux-gnu.so"))
    errors: List[str] = []
    if probe_files:
        stack = gf.collect_python_stack(host(tmp_path), "/venv", errors, "files")
    else:
        # The import probe answers (apex imports), and the RECORD check runs all the same.
        answer = ('{"python": {"version": "3.11.2"}, "torch": {}, "deepspeed": {},'
                  ' "apex": {"present": true, "cuda_ext": true}}')
        h = gf.Host(root=str(tmp_path), run=lambda argv, timeout: (0, answer, ""), timeout=5)
        stack = gf.collect_python_stack(h, "/venv", errors, "import")
    assert stack["apex"]["present"] is True and stack["apex"]["cuda_ext"] is True
    assert stack["apex"]["files"] == {
        "source": meta + "/RECORD", "checked": 6, "bad_count": 1, "error": None, "hashed": 0, "unhashed": 0,
        "bad": ["amp_C.cpython-311-x86_64-linux-gnu.so: 4096 bytes, RECORD says 8192"]}
    assert stack["torch"]["files"] == ig.empty()  # no torch here: nothing to compare


NUMPY_FILES = {
    "numpy/__init__.py": b"from numpy._core import *\n" * 10,
    "numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so": b"\x7fELF" + b"\3" * 8188,
}


def _fake_venv(tmp_path: Path) -> None:
    (tmp_path / "venv/bin").mkdir(parents=True)
    (tmp_path / "venv/bin/python").write_text("")
    (tmp_path / "venv/bin/python").chmod(0o755)
    (tmp_path / "venv/pyvenv.cfg").write_text("version = 3.11.2\n")


@pytest.mark.parametrize("damage, torch_bad, packages_bad", [
    (None, 0, []),
    # numpy's core extension cut short: reported under packages, named with its version
    ("numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so", 0,
     ["numpy 2.2.6: numpy/_core/_multiarray_umath.cpython-311-x86_64-linux-gnu.so: 4096 bytes, RECORD says 8192"]),
    # torch's own damage stays in torch.files: one drift, one row
    ("torch/lib/libtorch_cpu.so", 1, []),
])
def test_the_whole_venv_is_checked(tmp_path, damage, torch_bad, packages_bad):
    _fake_venv(tmp_path)
    pip_install(tmp_path, "torch", "2.13.0+cpu", TORCH_FILES)
    pip_install(tmp_path, "numpy", "2.2.6", NUMPY_FILES)
    pip_install(tmp_path, "typing_extensions", "4.16.0", {"typing_extensions.py": b"# typing\n" * 30})
    if damage:
        _truncate(tmp_path / (SITE.lstrip("/") + "/" + damage))
    stack = gf.collect_python_stack(host(tmp_path), "/venv", [], "files")
    assert stack["packages"]["installed"] == {"numpy": "2.2.6", "torch": "2.13.0+cpu", "typing_extensions": "4.16.0"}
    files = stack["packages"]["files"]
    assert files["distributions"] == 2 and files["checked"] == 2 + 1 + 2  # numpy's and typing_extensions' files + METADATA
    assert files["bad"] == packages_bad and files["bad_count"] == len(packages_bad)
    assert files["bad_distributions"] == (["numpy==2.2.6"] if packages_bad else [])
    assert stack["torch"]["files"]["bad_count"] == torch_bad


def test_a_package_installed_twice_shows_both_versions(tmp_path):
    _fake_venv(tmp_path)
    pip_install(tmp_path, "numpy", "2.2.6", NUMPY_FILES)
    pip_install(tmp_path, "numpy", "2.1.3", {"numpy/version.py": b"version = '2.1.3'\n"})
    stack = gf.collect_python_stack(host(tmp_path), "/venv", [], "files")
    assert stack["packages"]["installed"] == {"numpy": "2.1.3,2.2.6"}


def test_no_venv_gives_empty_packages(tmp_path):
    stack = gf.collect_python_stack(host(tmp_path), "/venv", [], "files")
    assert stack["packages"] == {"installed": {}, "files": ig.empty(), "unowned": None, "pins": None}


@pytest.mark.parametrize("constraints, pins", [
    # python_env's constraints file (roles/python_env/templates/constraints.txt.j2, abridged)
    ("# build tools\npip==25.3\n# torch, its torchvision and DeepSpeed\ntorch==2.13.0+cpu\n"
     "# the profile's extra pins\npydantic<2\n# Megatron-DeepSpeed requirements\nnumpy==2.2.6\n",
     {"source": "/venv/megatron-ds/constraints.txt", "pins": {"pip": "25.3", "torch": "2.13.0+cpu", "numpy": "2.2.6"}}),
    # a venv the collection did not make
    (None, None),
])
def test_the_venvs_pins_come_from_python_envs_constraints(tmp_path, constraints, pins):
    _fake_venv(tmp_path)
    pip_install(tmp_path, "numpy", "2.3.5", NUMPY_FILES)
    if constraints is not None:
        (tmp_path / "venv/megatron-ds").mkdir()
        (tmp_path / "venv/megatron-ds/constraints.txt").write_text(constraints)
    stack = gf.collect_python_stack(host(tmp_path), "/venv", [], "files")
    assert stack["packages"]["pins"] == pins
    assert stack["packages"]["installed"] == {"numpy": "2.3.5"}


# --------------------------------------------------------------------------- git's index
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git to build a real index")
GIT_ENV = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid",
               GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.invalid", GIT_CONFIG_GLOBAL="/dev/null")


def git(repo: Path, *argv: str) -> str:
    return subprocess.run(["git", "-C", str(repo)] + list(argv), check=True, env=GIT_ENV, stdout=subprocess.PIPE,
                          universal_newlines=True).stdout


def checkout(tmp_path: Path, index_version: Optional[int] = None, object_format: str = "sha1") -> Path:
    """A small Megatron-DeepSpeed-like checkout under a node root, as a clone leaves it."""
    repo = tmp_path / "opt" / "Megatron-DeepSpeed"
    (repo / "megatron" / "model").mkdir(parents=True)
    (repo / "pretrain_gpt.py").write_text("from megatron import get_args\n" * 20)
    (repo / "megatron" / "__init__.py").write_text("")
    (repo / "megatron" / "model" / "gpt_model.py").write_text("class GPTModel:\n    pass\n" * 30)
    (repo / "examples.sh").write_text("#!/bin/sh\necho train\n")
    (repo / "examples.sh").chmod(0o755)
    os.symlink("pretrain_gpt.py", str(repo / "pretrain.py"))
    git(repo, "init", "-q", "--object-format=%s" % object_format)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "stand-in")
    if index_version:
        git(repo, "update-index", "--index-version", str(index_version))
    return repo


def facts_of(tmp_path: Path) -> Tuple[Dict, List]:
    calls: List = []
    h = gf.Host(root=str(tmp_path), run=lambda argv, timeout: calls.append(argv) or (127, "", ""), timeout=5)
    return gf.collect_megatron(h, "/opt/Megatron-DeepSpeed"), calls


def _edit_same_size(path: Path) -> None:
    data = path.read_bytes()
    stat = path.stat()
    path.write_bytes(data.replace(b"pass", b"PASS"))
    os.utime(str(path), ns=(stat.st_atime_ns, stat.st_mtime_ns))  # even with the mtime put back


@needs_git
@pytest.mark.parametrize("damage, problem", [
    (lambda r: (r / "megatron/model/gpt_model.py").unlink(), "megatron/model/gpt_model.py: missing"),
    (lambda r: _truncate(r / "pretrain_gpt.py"), "pretrain_gpt.py: changed (300 bytes, 600 at checkout)"),
    (lambda r: _edit_same_size(r / "megatron/model/gpt_model.py"), "megatron/model/gpt_model.py: changed (same size)"),
    (lambda r: (r / "examples.sh").chmod(0o644), "examples.sh: executable bit changed"),
    (lambda r: ((r / "pretrain.py").unlink(), (r / "pretrain.py").write_text("pretrain_gpt.py")),
     "pretrain.py: changed (a symlink in git)"),
])
@pytest.mark.parametrize("index_version", [None, 3, 4])
def test_checkout_damage_is_found_without_running_git(tmp_path, damage, problem, index_version):
    repo = checkout(tmp_path, index_version)
    facts, calls = facts_of(tmp_path)
    index = "/opt/Megatron-DeepSpeed/.git/index"
    assert facts["files"] == {"source": index, "checked": 5, "bad_count": 0, "bad": [], "error": None}
    # The index stat data say when a file changed; an index older than the file makes the
    # same-size edit visible only through its content, which is what is hashed.
    os.utime(str(repo / ".git" / "index"), (1, 1))
    damage(repo)
    facts, calls = facts_of(tmp_path)
    assert facts["files"]["bad"] == [problem] and facts["files"]["bad_count"] == 1
    assert calls == []  # HEAD, the index and the files are read; no git, no process
    assert facts["commit"] == git(repo, "rev-parse", "HEAD").strip()


@needs_git
def test_untracked_files_and_build_outputs_do_not_count(tmp_path):
    repo = checkout(tmp_path)
    (repo / "megatron" / "helpers.cpython-311-x86_64-linux-gnu.so").write_bytes(b"\0" * 100)
    git(repo, "status", "--short")  # git may rewrite the index (racy entries smudged to size 0)
    assert facts_of(tmp_path)[0]["files"]["bad"] == []


@needs_git
def test_sha256_repository(tmp_path):
    try:
        repo = checkout(tmp_path, object_format="sha256")
    except subprocess.CalledProcessError:
        pytest.skip("this git cannot create sha256 repositories")
    os.utime(str(repo / ".git" / "index"), (1, 1))
    _edit_same_size(repo / "megatron/model/gpt_model.py")
    assert facts_of(tmp_path)[0]["files"]["bad"] == ["megatron/model/gpt_model.py: changed (same size)"]


@pytest.mark.parametrize("data, message", [
    (b"", "not a git index"),
    (b"DIRC\0\0\0\x05\0\0\0\0", "version 5 is not supported"),
])
def test_unreadable_index(data, message):
    with pytest.raises(ValueError, match=message):
        ig.parse_index(data)


def test_garbled_index_is_an_error_not_an_exception(tmp_path):
    (tmp_path / "opt/Megatron-DeepSpeed/.git").mkdir(parents=True)
    (tmp_path / "opt/Megatron-DeepSpeed/.git/HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / "opt/Megatron-DeepSpeed/.git/index").write_bytes(b"DIRC\0\0\0\x02\0\0\0\x09garbage")
    files = facts_of(tmp_path)[0]["files"]
    assert files["error"].startswith("unreadable git index /opt/Megatron-DeepSpeed/.git/index")
    assert files["checked"] == 0


@pytest.mark.parametrize("data, value, offset", [
    (b"\x05", 5, 1),
    (b"\x80\x00", 128, 2),  # git's offset varint: (0 + 1) << 7 | 0
    (b"\x81\x01", 257, 2),
])
def test_index_v4_varint(data, value, offset):
    assert ig._varint(data, 0) == (value, offset)


@needs_git
def test_linked_worktree_is_checked_against_its_own_index(tmp_path):
    """A checkout made with `git worktree add`: .git is a file; its index is under the main
    repository's .git/worktrees/<name>, its config (object format) in the common directory."""
    repo = checkout(tmp_path)
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "opt" / "mds-linked"))
    linked = tmp_path / "opt" / "mds-linked"
    # git writes the host's absolute path; on the node root of this test it is /opt/...
    (linked / ".git").write_text("gitdir: /opt/Megatron-DeepSpeed/.git/worktrees/mds-linked\n")
    h = gf.Host(root=str(tmp_path), run=lambda argv, timeout: (127, "", ""), timeout=5)
    os.utime(str(repo / ".git" / "worktrees" / "mds-linked" / "index"), (1, 1))
    _edit_same_size(linked / "megatron/model/gpt_model.py")
    files = gf.collect_megatron(h, "/opt/mds-linked")["files"]
    assert files["source"] == "/opt/Megatron-DeepSpeed/.git/worktrees/mds-linked/index"
    assert files["bad"] == ["megatron/model/gpt_model.py: changed (same size)"] and files["checked"] == 5


# --------------------------------------------------------------------------- archive manifest
def archive_tree(tmp_path: Path) -> Path:
    """A Megatron-DeepSpeed tree as python_env leaves it from an archive: the files, its marker
    and the manifest written right after unpacking."""
    tree = tmp_path / "opt" / "Megatron-DeepSpeed"
    (tree / "megatron" / "model").mkdir(parents=True)
    (tree / "pretrain_gpt.py").write_text("from megatron import get_args\n" * 20)
    (tree / "megatron" / "model" / "gpt_model.py").write_text("class GPTModel:\n    pass\n" * 30)
    (tree / "tools with space.py").write_text("print(1)\n")
    (tree / gf.ARCHIVE_MARKER).write_text("ab" * 32 + "\n")
    old = 1_700_000_000
    for path in tree.rglob("*"):
        os.utime(str(path), (old, old))
    assert ig.write_manifest(str(tree)) == 3
    return tree


def _same_size_edit(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"pass", b"PASS"))  # the mtime moves, as any write's does


@pytest.mark.parametrize("damage, problem", [
    (lambda t: None, None),
    (lambda t: (t / "megatron/model/gpt_model.py").unlink(), "megatron/model/gpt_model.py: missing"),
    (lambda t: _truncate(t / "pretrain_gpt.py"), "pretrain_gpt.py: changed (300 bytes, 600 when unpacked)"),
    (lambda t: _same_size_edit(t / "megatron/model/gpt_model.py"), "megatron/model/gpt_model.py: changed (same size)"),
    (lambda t: ((t / "tools with space.py").unlink(), os.symlink("pretrain_gpt.py", str(t / "tools with space.py"))),
     "tools with space.py: not a regular file"),
    # touched but the same bytes: hashed, and whole
    (lambda t: os.utime(str(t / "pretrain_gpt.py")), None),
    # files added after unpacking are not the install's: not looked at
    (lambda t: (t / "new.py").write_text("x"), None),
])
def test_archive_tree_is_checked_against_its_manifest(tmp_path, damage, problem):
    tree = archive_tree(tmp_path)
    damage(tree)
    files = facts_of(tmp_path)[0]["files"]
    assert files["error"] is None and files["checked"] == 3
    assert files["bad"] == ([problem] if problem else [])
    assert files["source"] == "/opt/Megatron-DeepSpeed/" + ig.MANIFEST_NAME


@pytest.mark.parametrize("damage, error", [
    (lambda t: (t / ig.MANIFEST_NAME).unlink(), "no manifest at /opt/Megatron-DeepSpeed/.megatron-ds-manifest"),
    (lambda t: (t / ig.MANIFEST_NAME).write_text("hello\n"), "not a megatron_ds.cluster source manifest"),
    (lambda t: (t / ig.MANIFEST_NAME).write_text(ig.MANIFEST_HEADER + "\nnot-a-hash 1 2 x\n"),
     "line 2 of the manifest does not read"),
])
def test_archive_tree_without_a_usable_manifest_says_so(tmp_path, damage, error):
    tree = archive_tree(tmp_path)
    damage(tree)
    files = facts_of(tmp_path)[0]["files"]
    assert error in files["error"] and files["checked"] == 0


def test_a_tree_with_neither_git_nor_a_marker_is_not_checked(tmp_path):
    tree = archive_tree(tmp_path)
    (tree / ig.MANIFEST_NAME).unlink()
    (tree / gf.ARCHIVE_MARKER).unlink()
    assert facts_of(tmp_path)[0]["files"] == ig.empty()


@pytest.mark.parametrize("entries", [
    [],
    [("a.py", "0" * 64, 0, 0)],
    [("dir/with space.py", "a" * 64, 10, 1700000000), ("odd\\name\nline.py", "b" * 64, 3, -1)],
])
def test_manifest_round_trip(entries):
    assert ig.parse_manifest(ig.format_manifest(entries)) == entries


# --------------------------------------------------------------------------- byte code by its source
def _pyc_for(source: Path, pyc: Path, mode: str, compiled_as: Optional[str] = None) -> None:
    """Byte code of ``source`` written to ``pyc`` the way py_compile writes it; ``compiled_as``: the
    source path baked into the code object (a wheel built elsewhere names its build tree)."""
    import py_compile
    kinds = {"timestamp": py_compile.PycInvalidationMode.TIMESTAMP,
             "checked-hash": py_compile.PycInvalidationMode.CHECKED_HASH,
             "unchecked-hash": py_compile.PycInvalidationMode.UNCHECKED_HASH}
    pyc.parent.mkdir(parents=True, exist_ok=True)
    py_compile.compile(str(source), cfile=str(pyc), dfile=compiled_as, doraise=True, invalidation_mode=kinds[mode])


def _edit_source_after(site: Path) -> None:
    """The source changes after its byte code was written: same size, new mtime."""
    source = site / "pkg/mod.py"
    source.write_bytes(source.read_bytes().replace(b"1", b"2"))
    os.utime(str(source), (4000000000, 4000000000))


PYC = "pkg/__pycache__/mod.cpython-311.pyc"


@pytest.mark.parametrize("mode, after, verdict, reported", [
    # pip compiled the source again on install: the header matches the .py, so no damage.
    ("timestamp", None, "fresh", False),
    ("checked-hash", None, "fresh", False),
    ("unchecked-hash", None, "fresh", False),
    # the source changed since: Python compiles it again rather than run this byte code
    ("timestamp", _edit_source_after, "stale", False),
    ("checked-hash", _edit_source_after, "stale", False),
    # ... except byte code Python never checks: it runs as it is, so it is reported
    ("unchecked-hash", _edit_source_after, "runs-stale", True),
    # no source beside it: a legacy sourceless .pyc runs as it is
    ("timestamp", lambda site: (site / "pkg/mod.py").unlink(), "no-source", True),
])
def test_byte_code_is_judged_by_its_source(tmp_path, mode, after, verdict, reported):
    """The RECORD of a wheel that ships its byte code (built elsewhere, so the code object names
    another path and the size differs) after pip compiled the source again on install."""
    site = tmp_path / SITE.lstrip("/")
    build = tmp_path / "build"
    (build / "pkg").mkdir(parents=True)
    (build / "pkg/mod.py").write_bytes(b"VALUE = 1\n")
    _pyc_for(build / "pkg/mod.py", build / PYC, mode, compiled_as="/home/builder/src/a/long/build/path/pkg/mod.py")
    meta = pip_install(tmp_path, "pkg", "1.0", {"pkg/mod.py": b"VALUE = 1\n", PYC: (build / PYC).read_bytes()})
    _pyc_for(site / "pkg/mod.py", site / PYC, mode)  # what pip's compile step writes over it
    assert (site / PYC).stat().st_size != (build / PYC).stat().st_size
    if after:
        after(site)
    assert ig.pyc_verdict(str(site / PYC)) == verdict
    result = check(tmp_path, meta)
    pyc_lines = [line for line in result["bad"] if line.startswith(PYC)]
    assert bool(pyc_lines) is reported
    if reported:
        assert pyc_lines == ["%s: %d bytes, RECORD says %d" % (PYC, (site / PYC).stat().st_size,
                                                               (build / PYC).stat().st_size)]


@pytest.mark.parametrize("path, source", [
    ("pkg/__pycache__/mod.cpython-311.pyc", "pkg/mod.py"),
    ("pkg/__pycache__/mod.cpython-311.opt-1.pyc", "pkg/mod.py"),
    ("pkg/mod.pyc", "pkg/mod.py"),
    ("pkg/mod.py", None),
])
def test_pyc_source(path, source):
    assert ig.pyc_source(path) == source


def _wheel(directory: Path, version: str) -> Path:
    """A real wheel of 'tinypkg' that ships byte code compiled in another tree, as some published
    wheels do: its RECORD lists the .pyc with the build's size and sha256."""
    import py_compile
    import sys
    import zipfile
    tag = "cpython-%d%d" % sys.version_info[:2]
    source = ("VERSION = %r\n" % version).encode()
    build = directory / ("build-" + version)
    (build / "tinypkg").mkdir(parents=True)
    (build / "tinypkg/__init__.py").write_bytes(source)
    pyc = "tinypkg/__pycache__/__init__.%s.pyc" % tag
    py_compile.compile(str(build / "tinypkg/__init__.py"), cfile=str(build / pyc), doraise=True,
                       dfile="/opt/wheel-builder/a/much/longer/path/than/a/venv/tinypkg/__init__.py")
    dist = "tinypkg-%s.dist-info" % version
    files = {
        "tinypkg/__init__.py": source,
        pyc: (build / pyc).read_bytes(),
        dist + "/METADATA": ("Metadata-Version: 2.1\nName: tinypkg\nVersion: %s\n" % version).encode(),
        dist + "/WHEEL": b"Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(_record_line(path, content) for path, content in files.items()) + dist + "/RECORD,,\n"
    wheel = directory / ("tinypkg-%s-py3-none-any.whl" % version)
    with zipfile.ZipFile(str(wheel), "w") as archive:
        for path, content in files.items():
            archive.writestr(path, content)
        archive.writestr(dist + "/RECORD", record)
    return wheel


def test_a_clean_pip_install_of_another_version_is_not_damage(tmp_path):
    """Issue #40's false failure, reproduced with pip itself: install 2.2.6, then a clean
    `pip install` of 2.1.3. pip compiles the byte code again over the wheel's own .pyc and keeps
    the wheel's size and sha256 for it in RECORD; the .pyc matches its source, so it is no damage."""
    import sys
    pip = [sys.executable, "-m", "pip"]
    if subprocess.run(pip + ["--version"], capture_output=True, check=False).returncode != 0:
        pytest.skip("needs pip")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv/bin/python"
    for version in ("2.2.6", "2.1.3"):
        done = subprocess.run(pip + ["--python", str(python), "install", "--no-index", "--no-deps",
                                     "--disable-pip-version-check", "-q", str(_wheel(tmp_path, version))],
                              capture_output=True, text=True, check=False)
        if done.returncode and "no such option: --python" in done.stderr:
            pytest.skip("pip older than 22.3 has no --python")
        assert done.returncode == 0, done.stderr
    series = "python%d.%d" % sys.version_info[:2]
    meta = "/venv/lib/%s/site-packages/tinypkg-2.1.3.dist-info" % series
    record = (tmp_path / meta.lstrip("/") / "RECORD").read_text()
    pyc = [line for line in record.splitlines() if ".pyc," in line and not line.endswith(",,")]
    assert pyc, "pip kept the wheel's own line for its .pyc: %s" % record  # the case of the issue
    assert not (tmp_path / ("venv/lib/%s/site-packages/tinypkg-2.2.6.dist-info" % series)).exists()
    h = host(tmp_path)
    result = ig.check_record(h.read_bytes, h.path, meta)
    assert result["bad"] == [] and result["error"] is None and result["checked"] >= 3
