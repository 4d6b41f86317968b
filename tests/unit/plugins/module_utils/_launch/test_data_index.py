# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_launch.data_index: the .idx header read on each node, judged as Megatron-DeepSpeed's reader
judges it. The files are written as upstream's MMapIndexedDataset.Index.writer writes them
(megatron/data/indexed_dataset.py:385-410 at 4efb479d); each refused file beside the legal one
it was made from. With MEGATRON_DS_SRC, the format constants are checked against the checkout."""
from __future__ import annotations

import os
import struct
import subprocess
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import data_index as la_index
from ansible_collections.megatron_ds.cluster.plugins.module_utils._launch import prelaunch as la_prelaunch


def mmap_index(sizes: List[int], doc_idx: List[int], magic: bytes = la_index.MMAP_MAGIC, version: int = 1,
               code: int = 8, cut: Optional[int] = None) -> bytes:
    """An index as the writer lays it out: magic, <Q version, <B dtype code, <Q len(sizes),
    <Q len(doc_idx), int32 sizes, int64 pointers (exclusive scan of sizes x 2 bytes), int64 doc_idx."""
    pointers, total = [], 0
    for size in sizes:
        pointers.append(total)
        total += size * 2
    data = (magic + struct.pack("<Q", version) + struct.pack("<B", code) + struct.pack("<Q", len(sizes))
            + struct.pack("<Q", len(doc_idx)) + struct.pack("<%di" % len(sizes), *sizes)
            + struct.pack("<%dq" % len(pointers), *pointers) + struct.pack("<%dq" % len(doc_idx), *doc_idx))
    return data if cut is None else data[:cut]


# preprocess_data.py ends a document after each of its sequences: doc_idx = [0, 1, 2, 3] for 3.
LEGAL = mmap_index([5, 7, 9], [0, 1, 2, 3])
CASES = [
    ("legal mmap index", LEGAL, None, ""),
    ("documents spanning several sequences", mmap_index([5, 7, 9, 4], [0, 2, 4]), None, ""),
    ("legacy TNTIDX index: read under --data-impl infer", b"TNTIDX\x00\x00" + struct.pack("<Q", 1) + b"\x00" * 40,
     None, ""),
    ("not an index", b"\x93NUMPY\x01\x00" + b"\x00" * 60, la_index.MAGIC_CHECK, "indexed_dataset.py:427 at 4efb479d"),
    ("empty file", b"", la_index.MAGIC_CHECK, "425 at 9446eaac"),
    ("version 2", mmap_index([5, 7, 9], [0, 1, 2, 3], version=2), la_index.VERSION_CHECK, "(1,) == version"),
    ("cut inside the header", LEGAL[:20], la_index.VERSION_CHECK, "ends inside its header (20 bytes)"),
    ("dtype code 9", mmap_index([5, 7, 9], [0, 1, 2, 3], code=9), la_index.DTYPE_CHECK,
     "indexed_dataset.py:435 at 4efb479d, 433 at 9446eaac"),
    # gpt_dataset.py never compares the document index with the sequences: legal for pretrain_gpt.py
    ("document index ends short", mmap_index([5, 7, 9], [0, 1, 2]), None, ""),
    ("empty document index", mmap_index([5, 7, 9], []), None, ""),
    ("file cut in the document index", mmap_index([5, 7, 9], [0, 1, 2, 3], cut=len(LEGAL) - 4), la_index.SIZE_CHECK,
     "indexed_dataset.py:458 at 4efb479d, 456 at 9446eaac"),
    ("file cut in the sizes", mmap_index([5, 7, 9], [0, 1, 2, 3], cut=40), la_index.SIZE_CHECK,
     "(102 bytes) but holds 40 bytes"),
]


@pytest.mark.parametrize("data, check, words", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_index_header(tmp_path: Path, data: bytes, check: Optional[str], words: str) -> None:
    path = tmp_path / "corpus_text_document.idx"
    path.write_bytes(data)
    problems = la_index.index_problems(str(path), la_index.read_index_header(str(path)))
    if check is None:
        assert problems == []
        return
    assert [p["check"] for p in problems] == [check]
    assert words in problems[0]["text"] and str(path) in problems[0]["text"]
    assert "tools/preprocess_data.py" in problems[0]["text"]


def test_unreadable_file_is_left_to_the_files_check(tmp_path: Path) -> None:
    header = la_index.read_index_header(str(tmp_path / "absent.idx"))
    assert "FileNotFoundError" in header["error"]
    assert la_index.index_problems("absent.idx", header) == []


def test_prelaunch_names_the_node_and_the_file(tmp_path: Path) -> None:
    path = tmp_path / "d.idx"
    path.write_bytes(mmap_index([5, 7, 9], [0, 1, 2, 3], version=3))
    probes: Dict[str, Any] = {
        "n1": {"paths": {str(path): {"exists": True, "index": la_index.read_index_header(str(path))}}},
        "n2": {"paths": {str(path): {"exists": True, "index": la_index.read_index_header(str(tmp_path / "none"))}}},
    }
    problems = la_prelaunch.prelaunch_problems(probes)
    assert len(problems) == 1 and problems[0].startswith("n1: %s has format version 3" % path), problems


SRC = os.environ.get("MEGATRON_DS_SRC", "")
COMMITS = ("4efb479d", "9446eaac")


def _show(commit: str, path: str) -> str:
    done = subprocess.run(["git", "-C", SRC, "show", "%s:%s" % (commit, path)], capture_output=True, text=True,
                          check=False)
    return done.stdout if done.returncode == 0 else ""


@pytest.mark.skipif(not SRC or not _show(COMMITS[0], "megatron/data/indexed_dataset.py"),
                    reason="needs MEGATRON_DS_SRC, a git checkout of Megatron-DeepSpeed with %s" % " and ".join(COMMITS))
@pytest.mark.parametrize("commit", COMMITS)
def test_lines_and_format_are_upstreams(commit: str) -> None:
    reader = _show(commit, "megatron/data/indexed_dataset.py").splitlines()
    lines = la_index.LINES[commit]
    assert "_HDR_MAGIC == magic_test" in reader[lines["magic"] - 1]
    assert "assert (1,) == version" in reader[lines["version"] - 1]
    assert "dtypes[dtype_code]" in reader[lines["version"] + 2]
    assert "_HDR_MAGIC = b'MMIDIDX\\x00\\x00'" in "\n".join(reader)
    assert "_HDR_MAGIC = b'TNTIDX\\x00\\x00'" in "\n".join(reader)
    assert "self._doc_idx = np.frombuffer(" in reader[lines["arrays"] - 1]
    # pretrain_gpt.py's dataset build reads the index with gpt_dataset.py's own get_indexed_dataset_,
    # which compares no counts: the reason the document index is not judged
    gpt = _show(commit, "megatron/data/gpt_dataset.py")
    own = gpt[gpt.index("def get_indexed_dataset_("):gpt.index("class GPTDataset")]
    assert "assert" not in own and "from megatron.data.dataset_utils import get_indexed_dataset_" not in gpt
