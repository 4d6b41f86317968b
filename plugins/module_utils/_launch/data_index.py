# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The header of a dataset's ``.idx`` file, read on each node before the launch, and what
Megatron-DeepSpeed's dataset build asserts about it when every rank opens it.

A file that is neither an mmap index nor a legacy (TNTIDX) one fails whatever ``--data-impl`` the
job passes; an mmap index is opened by ``MMapIndexedDataset.Index`` (megatron/data/indexed_dataset.py)
under mmap and infer alike, which reads the header and then maps the sizes, pointers and document
index the header announces. Reading the header costs one 34-byte read and a stat per file.

The document index itself is not judged: pretrain_gpt.py's dataset build (gpt_dataset.py's own
get_indexed_dataset_) treats every sequence as a document and never compares the two counts, as
dataset_utils.get_indexed_dataset_ (BERT, T5) does.

No Ansible imports; Python 3.8 compatible (runs on the nodes through job_probe).
"""
from __future__ import annotations

import os
import struct
from typing import Any, Dict, List, Mapping

# MMapIndexedDataset.Index._HDR_MAGIC and IndexedDataset._HDR_MAGIC (the lazy/cached format).
MMAP_MAGIC = b"MMIDIDX\x00\x00"
LAZY_MAGIC = b"TNTIDX\x00\x00"
# The writer's layout (indexed_dataset.py:385-410 at 4efb479d): magic, <Q version 1, <B dtype code,
# <Q number of sequences, <Q number of document boundaries, then int32 sizes, int64 pointers and
# int64 document boundaries.
HEADER_BYTES = 9 + 8 + 1 + 8 + 8
DTYPE_CODES = frozenset(range(1, 9))  # indexed_dataset.py dtypes (uint8 .. uint16)

# The census names these checks (scripts/upstream_census.py, JUDGED_AT); each is one finding below.
MAGIC_CHECK = "pre-launch: .idx is a Megatron index"
VERSION_CHECK = "pre-launch: .idx format version 1"
DTYPE_CHECK = "pre-launch: .idx token dtype known"
SIZE_CHECK = "pre-launch: .idx holds what its header announces"
CHECKS = (MAGIC_CHECK, VERSION_CHECK, DTYPE_CHECK, SIZE_CHECK)

# Upstream's lines per era in indexed_dataset.py Index.__init__: the magic and version asserts, and
# the np.frombuffer of the document index, the last of the three arrays the header sizes.
LINES = {
    "4efb479d": {"magic": 427, "version": 432, "arrays": 458},
    "9446eaac": {"magic": 425, "version": 430, "arrays": 456},
}
REBUILD = "rebuild it with Megatron-DeepSpeed's tools/preprocess_data.py (playbooks/prepare_data.yml)"


def read_index_header(path: str) -> Dict[str, Any]:
    """What the header of ``path`` says: ``magic`` ('mmap', 'lazy' or the first bytes in hex),
    and for an mmap index ``version``, ``dtype_code``, ``sequences``, ``documents`` (the counts of
    the arrays that follow) and ``size``. An unreadable file gives ``error``."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as stream:
            head = stream.read(HEADER_BYTES)
            out = {"size": size}  # type: Dict[str, Any]
            if head.startswith(LAZY_MAGIC):
                out["magic"] = "lazy"
                return out
            if not head.startswith(MMAP_MAGIC):
                out["magic"] = head[:9].hex()
                return out
            out["magic"] = "mmap"
            if len(head) < HEADER_BYTES:
                out["truncated"] = True
                return out
            version, code, sequences, documents = struct.unpack("<QBQQ", head[9:])
            out.update(version=version, dtype_code=code, sequences=sequences, documents=documents)
            return out
    except OSError as exc:
        return {"error": "%s: %s" % (type(exc).__name__, exc.strerror or exc)}


def _cite(path: str, key: str, shift: int = 0) -> str:
    """The upstream line of check ``key`` at both pinned commits (the probe does not know the era)."""
    head, old = LINES["4efb479d"][key] + shift, LINES["9446eaac"][key] + shift
    return "%s:%d at 4efb479d, %d at 9446eaac" % (path, head, old)


def index_problems(path: str, header: Mapping[str, Any]) -> List[Dict[str, str]]:
    """The failures of Megatron-DeepSpeed's index reader on ``header`` (read_index_header's),
    as ``{"check", "text"}``; empty where it opens the file."""
    reader = "megatron/data/indexed_dataset.py"
    if header.get("error") or not header:
        return []  # the required-files check reports a missing or unreadable file
    magic = header.get("magic")
    if magic == "lazy":
        # Read by --data-impl infer (IndexedCachedDataset) and refused by mmap; which one the job
        # passes is not known here, so a legacy index is left to the oracle and the start-up.
        return []
    if magic != "mmap":
        return [{"check": MAGIC_CHECK, "text": (
            "%s starts with neither index magic (MMIDIDX, TNTIDX; found bytes %s): Megatron-DeepSpeed asserts "
            "'Index file doesn't match expected format' (%s); %s" % (path, magic, _cite(reader, "magic"), REBUILD))}]
    if header.get("truncated"):
        return [{"check": VERSION_CHECK, "text": "%s ends inside its header (%s bytes): struct.unpack fails in "
                 "Index.__init__ (%s); %s" % (path, header.get("size"), _cite(reader, "version"), REBUILD)}]
    if header.get("version") != 1:
        return [{"check": VERSION_CHECK, "text": "%s has format version %s: Megatron-DeepSpeed asserts (1,) == version "
                 "(%s); %s" % (path, header.get("version"), _cite(reader, "version"), REBUILD)}]
    if header.get("dtype_code") not in DTYPE_CODES:
        return [{"check": DTYPE_CHECK, "text": "%s names token dtype code %s, not one of 1-8: dtypes[dtype_code] raises "
                 "KeyError in Index.__init__ (%s); %s" % (path, header.get("dtype_code"),
                                                          _cite(reader, "version", 3), REBUILD)}]
    needed = HEADER_BYTES + int(header.get("sequences") or 0) * 12 + int(header.get("documents") or 0) * 8
    if int(header.get("size") or 0) < needed:
        return [{"check": SIZE_CHECK, "text": (
            "%s announces %s sequences and %s document boundaries (%d bytes) but holds %s bytes: np.frombuffer "
            "raises ValueError in Index.__init__ (%s); the file was cut short: copy it again or %s"
            % (path, header.get("sequences"), header.get("documents"), needed, header.get("size"),
               _cite(reader, "arrays"), REBUILD))}]
    return []
