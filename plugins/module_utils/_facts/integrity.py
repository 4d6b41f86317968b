# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Is an install whole? Installed files against the record their installer left, on the node.

Runs inside gpu_stack_facts (standard library only, Python 3.8+, no process started):

* a pip distribution: every file its ``RECORD`` lists with a size (pip writes path, sha256 and
  size for each file it installs) must exist with that size, and a file modified after the
  install must still have its recorded sha256. pip writes RECORD last, so a file whose mtime is
  newer than RECORD's, or whose inode changed (ctime) more than :data:`CTIME_SLACK` after
  RECORD's, was written afterwards; only those are hashed (up to :data:`HASH_BUDGET` bytes per call), the rest is one stat each, cheap
  even for the ~45,000 files of a training venv. So a file that is missing, cut short, grown, or
  edited to other bytes of the same length is found, also when the edit set the mtime back
  (``touch -r``): no user call sets a ctime. Byte code (``.pyc``) is judged by its source
  (:func:`pyc_verdict`): pip compiles it again on install, so a ``.pyc`` a wheel shipped in its
  RECORD may legitimately differ from it.
* a git checkout: every tracked file in git's index (``.git/index``, which records each file's
  size, mtime and blob id at checkout) must exist with the recorded size and type. A file
  whose mtime differs from the index (or is too recent for the index to vouch for it, as
  git's own "racy" rule says) is hashed as git would hash it (``blob <size>\\0<content>``) and
  compared with the recorded blob id. So this finds what ``git status`` finds for tracked files,
  without running git: missing, changed (same size too) and type or executable-bit changes.
  Untracked files are not looked at.
* a tree unpacked from an archive (python_env's ``source: archive``): git has no index there, so
  python_env writes a manifest when it unpacks (:func:`write_manifest`: sha256, size and mtime of
  every regular file) and the tree is checked against it the way git checks its index: size and
  type always, the content hashed where the mtime moved.

All three return the same shape: ``{"source", "checked", "bad_count", "bad", "error"}`` (a RECORD
check adds ``hashed`` and ``unhashed``: files modified after the install that were hashed, and
that the budget left). ``bad`` holds the first :data:`SHOWN` problems, one line each
(``path: missing``).
"""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import re
import stat
import struct
from typing import Any, Callable, Dict, List, Optional, Tuple

SHOWN = 5
# Bytes a RECORD check may hash per call (all distributions of a venv together): a venv copied
# without its mtimes makes every file "newer", and hashing gigabytes would stall the facts call.
HASH_BUDGET = 512 * 1024 * 1024
# Seconds a file's ctime may pass RECORD's before the file is hashed. A recursive chown or chmod of
# the venv (python_env hands an existing tree to the training user) moves every inode's ctime,
# RECORD's within the same walk; without this slack every later facts call would hash those files
# again, up to the budget. An edit made later than that after the install is still hashed.
CTIME_SLACK = 120.0
# A RECORD or an index larger than this is not read (torch's RECORD is about 2 MB).
_MAX_READ = 64 * 1024 * 1024


def empty(source: Optional[str] = None, error: Optional[str] = None) -> Dict[str, Any]:
    return {"source": source, "checked": 0, "bad_count": 0, "bad": [], "error": error}


def _add(result: Dict[str, Any], problem: str) -> None:
    result["bad_count"] += 1
    if len(result["bad"]) < SHOWN:
        result["bad"].append(problem)


# --------------------------------------------------------------------------- pip's RECORD
def parse_record_entries(text: str) -> List[Tuple[str, Optional[bytes], Optional[int]]]:
    """(path, sha256 digest, size) for every line of a RECORD (CSV: path, ``sha256=<urlsafe
    base64, unpadded>``, size; PEP 376 and the wheel spec). A missing, malformed or other-algorithm
    hash gives None, and so does a missing size (the RECORD itself, byte code pip compiled)."""
    entries: List[Tuple[str, Optional[bytes], Optional[int]]] = []
    for row in csv.reader(io.StringIO(text)):
        if not row or not row[0]:
            continue
        size = row[2].strip() if len(row) > 2 else ""
        algorithm, _sep, encoded = (row[1].strip() if len(row) > 1 else "").partition("=")
        digest = None
        if algorithm == "sha256" and encoded:
            try:
                digest = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4))
            except (ValueError, TypeError):
                digest = None
            if digest is not None and len(digest) != 32:
                digest = None
        entries.append((row[0], digest, int(size) if size.isdigit() else None))
    return entries


def parse_record(text: str) -> List[Tuple[str, Optional[int]]]:
    """(path, size) for every line of a RECORD; see :func:`parse_record_entries`."""
    return [(path, size) for path, _digest, size in parse_record_entries(text)]


def _sha256(path: str) -> Optional[bytes]:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1024 * 1024), b""):
                digest.update(block)
    except (IOError, OSError):
        return None
    return digest.digest()


def check_record(read_bytes: Callable[[str], Optional[bytes]], real: Callable[[str], str], meta_dir: str,
                 budget: Optional[List[int]] = None, paths: Optional[List[str]] = None,
                 ctime_slack: float = CTIME_SLACK) -> Dict[str, Any]:
    """The files of the distribution whose metadata directory is ``meta_dir`` (a node path)
    against its RECORD. ``read_bytes`` reads a node path, ``real`` maps one to the path to stat
    (the node's own path on a real node, a path under the test tree in tests). ``budget``: a
    one-item list of the bytes left to hash, shared by the calls of one facts run (default
    :data:`HASH_BUDGET` for this call alone). ``paths``, when given, receives every path RECORD
    lists (what the distribution owns, for _site_code), so RECORD is read once per facts call.
    ``ctime_slack``: see :data:`CTIME_SLACK`.

    An ``.egg-info`` has no RECORD (setup.py install): nothing to check, no error. A
    ``.dist-info`` without one is an error: pip always writes it.
    """
    record = meta_dir.rstrip("/") + "/RECORD"
    if not meta_dir.rstrip("/").endswith(".dist-info"):
        return empty()
    data = read_bytes(record)
    if data is None:
        return empty(record, "no RECORD in %s: installed without pip, or damaged" % meta_dir)
    result = empty(record)
    result.update(hashed=0, unhashed=0)
    left = budget if budget is not None else [HASH_BUDGET]
    try:
        record_stat = os.stat(real(record))
        installed: Optional[Tuple[float, float]] = (record_stat.st_mtime, record_stat.st_ctime + ctime_slack)
    except OSError:
        installed = None
    # Paths in RECORD are relative to site-packages (the dist-info's parent); scripts use '../../../bin/x'.
    site = os.path.dirname(meta_dir.rstrip("/"))
    base = real(site)
    for path, digest, size in parse_record_entries(data.decode("utf-8", "replace")):
        if paths is not None:
            paths.append(path)
        if size is None:
            continue
        result["checked"] += 1
        full = real(path) if path.startswith("/") else os.path.normpath(os.path.join(base, path))
        try:
            found = os.stat(full)
        except OSError:
            _add(result, "%s: missing" % path)
            continue
        if found.st_size != size:
            if not _pyc_fine(full):
                _add(result, "%s: %d bytes, RECORD says %d" % (path, found.st_size, size))
            continue
        # An edit whose mtime was set back still moved the inode's ctime past RECORD's.
        if digest is None or installed is None or (found.st_mtime <= installed[0] and found.st_ctime <= installed[1]):
            continue
        # Written after pip wrote RECORD: only the content can say whether it changed.
        if left[0] < size:
            result["unhashed"] += 1
            continue
        left[0] -= size
        result["hashed"] += 1
        if _sha256(full) != digest and not _pyc_fine(full):
            _add(result, "%s: same size, other content than RECORD's sha256 (modified after the install)" % path)
    return result


# --------------------------------------------------------------------------- byte code
# PEP 552: magic (4 bytes), flags (4, little endian), then either the source's mtime and size
# (4 + 4, each modulo 2**32) or, with flag bit 0, an 8-byte SipHash of the source (bit 1: Python
# checks it against the source at import; without it Python trusts the .pyc as it is).
_PYC_HEADER = struct.Struct("<4sIII")
_PYC_HASHED, _PYC_CHECK_SOURCE = 1, 2


def pyc_source(path: str) -> Optional[str]:
    """The source a ``.pyc`` was compiled from: ``pkg/__pycache__/mod.cpython-311.pyc`` ->
    ``pkg/mod.py`` (PEP 3147), a legacy ``pkg/mod.pyc`` -> ``pkg/mod.py``; None for other names."""
    if not path.endswith(".pyc"):
        return None
    directory, name = os.path.split(path)
    if os.path.basename(directory) == "__pycache__":
        return os.path.join(os.path.dirname(directory), name.split(".", 1)[0] + ".py")
    return path[:-1]


def _source_hash(magic: bytes, source: bytes) -> Optional[bytes]:
    """The SipHash Python keys with the .pyc's own magic (importlib.util.source_hash uses the
    running interpreter's magic, which differs when the module runs on another Python)."""
    try:
        import _imp  # CPython's own; what importlib.util.source_hash calls
        return _imp.source_hash(int.from_bytes(magic, "little"), source)  # type: ignore[attr-defined]
    except (ImportError, AttributeError, TypeError, ValueError):
        return None


def pyc_verdict(path: str) -> str:
    """What Python does with the ``.pyc`` at ``path`` (a real path):

    * ``fresh``: its header matches the current source (mtime and size, or the source's hash);
      the byte code is what Python compiles from that source;
    * ``stale``: it does not match, and Python compiles the source again rather than run it;
    * ``runs-stale``: a hash-based .pyc Python does not check (``unchecked-hash``) whose hash is
      not the source's: Python runs it as it is;
    * ``no-source``: no source beside it (Python then runs a legacy .pyc as it is), or the header
      does not read.
    """
    source = pyc_source(path)
    try:
        with open(path, "rb") as handle:
            header = handle.read(_PYC_HEADER.size)
        info = os.stat(source) if source else None
    except OSError:
        return "no-source"
    if info is None or len(header) < _PYC_HEADER.size:
        return "no-source"
    magic, flags, first, second = _PYC_HEADER.unpack(header)
    if not flags & _PYC_HASHED:
        fresh = first == int(info.st_mtime) & 0xFFFFFFFF and second == info.st_size & 0xFFFFFFFF
        return "fresh" if fresh else "stale"
    try:
        with open(source, "rb") as handle:  # type: ignore[arg-type]
            actual = _source_hash(magic, handle.read())
    except OSError:
        return "no-source"
    if actual is None:
        return "fresh"  # this interpreter cannot compute it; the source itself is checked by RECORD
    if actual == header[8:16]:
        return "fresh"
    return "stale" if flags & _PYC_CHECK_SOURCE else "runs-stale"


def _pyc_fine(full: str) -> bool:
    """Whether a .pyc that differs from RECORD is no damage: pip compiles byte code again after
    unpacking a wheel (the header carries the source's new mtime), so a .pyc the wheel listed may
    differ after a clean install. It counts only where Python would run it without its source."""
    return full.endswith(".pyc") and pyc_verdict(full) in ("fresh", "stale")


# --------------------------------------------------------------------------- git's index
class IndexEntry(object):
    __slots__ = ("path", "mtime", "mode", "size", "oid", "stage", "skip")

    def __init__(self, path: str, mtime: int, mode: int, size: int, oid: bytes, stage: int, skip: bool) -> None:
        self.path, self.mtime, self.mode, self.size, self.oid, self.stage, self.skip = path, mtime, mode, size, oid, stage, skip


_ENTRY = struct.Struct(">10I")  # ctime s/ns, mtime s/ns, dev, ino, mode, uid, gid, size


def _varint(data: bytes, offset: int) -> Tuple[int, int]:
    """git's offset varint (read-cache.c, index v4 path compression)."""
    byte = data[offset]
    offset += 1
    value = byte & 127
    while byte & 128:
        byte = data[offset]
        offset += 1
        value = ((value + 1) << 7) | (byte & 127)
    return value, offset


def parse_index(data: bytes, hash_size: int = 20) -> List[IndexEntry]:
    """The entries of a git index file, versions 2, 3 and 4 (Documentation/gitformat-index.txt).
    Raises ValueError on anything else."""
    if len(data) < 12 or data[:4] != b"DIRC":
        raise ValueError("not a git index (no DIRC signature)")
    version, count = struct.unpack(">II", data[4:12])
    if version not in (2, 3, 4):
        raise ValueError("git index version %d is not supported" % version)
    entries: List[IndexEntry] = []
    offset = 12
    previous = b""
    for _number in range(count):
        start = offset
        fields = _ENTRY.unpack_from(data, offset)
        offset += _ENTRY.size
        oid = data[offset:offset + hash_size]
        offset += hash_size
        (flags,) = struct.unpack_from(">H", data, offset)
        offset += 2
        extended = 0
        if flags & 0x4000:
            if version < 3:
                raise ValueError("extended flags in a version 2 index")
            (extended,) = struct.unpack_from(">H", data, offset)
            offset += 2
        if version == 4:
            strip, offset = _varint(data, offset)
            end = data.index(b"\0", offset)
            name = previous[:len(previous) - strip] + data[offset:end]
            offset = end + 1
        else:
            end = data.index(b"\0", offset)
            name = data[offset:end]
            # Entries are NUL-padded to a multiple of 8 bytes (1 to 8 NULs).
            offset = start + ((end - start + 8) & ~7)
        previous = name
        entries.append(IndexEntry(
            path=name.decode("utf-8", "surrogateescape"), mtime=fields[2], mode=fields[6], size=fields[9],
            oid=oid, stage=(flags >> 12) & 3,
            # assume-valid (0x8000) and skip-worktree (extended 0x4000): git itself does not look at the file.
            skip=bool(flags & 0x8000 or extended & 0x4000),
        ))
    return entries


def _blob_id(content: bytes, hash_size: int) -> bytes:
    digest = hashlib.sha256() if hash_size == 32 else hashlib.sha1()  # nosec B324 (git's object id, not security)
    digest.update(b"blob %d\0" % len(content))
    digest.update(content)
    return digest.digest()


def _hash_file(path: str, hash_size: int) -> Optional[bytes]:
    try:
        with open(path, "rb") as handle:
            return _blob_id(handle.read(), hash_size)
    except OSError:
        return None


def check_git_index(read_bytes: Callable[[str], Optional[bytes]], real: Callable[[str], str], worktree: str,
                    gitdir: str, config_text: Optional[str] = None) -> Dict[str, Any]:
    """Tracked files of the checkout at ``worktree`` (node path) against ``gitdir``'s index."""
    index = gitdir.rstrip("/") + "/index"
    data = read_bytes(index)
    if data is None:
        return empty(index, "no git index at %s" % index)
    hash_size = 32 if re.search(r"^\s*objectformat\s*=\s*sha256\s*$", config_text or "", re.M | re.I) else 20
    try:
        entries = parse_index(data, hash_size)
    except (ValueError, struct.error, IndexError) as exc:
        return empty(index, "unreadable git index %s: %s" % (index, exc))
    try:
        index_mtime = int(os.stat(real(index)).st_mtime)
    except OSError:
        index_mtime = 0
    result = empty(index)
    base = real(worktree)
    unmerged = set()
    for entry in entries:
        if entry.stage:
            if entry.path not in unmerged:
                unmerged.add(entry.path)
                _add(result, "%s: unmerged (a merge conflict)" % entry.path)
            continue
        kind = entry.mode & 0o170000
        if entry.skip or kind == 0o160000:  # sparse or assume-unchanged entries, submodules
            continue
        result["checked"] += 1
        full = os.path.join(base, entry.path)
        try:
            info = os.lstat(full)
        except OSError:
            _add(result, "%s: missing" % entry.path)
            continue
        if kind == 0o120000:
            if not stat.S_ISLNK(info.st_mode) or info.st_size & 0xFFFFFFFF != entry.size:
                _add(result, "%s: changed (a symlink in git)" % entry.path)
            continue
        if not stat.S_ISREG(info.st_mode):
            _add(result, "%s: not a regular file" % entry.path)
            continue
        # git writes size 0 for an entry it could not vouch for ("smudged" as racily clean): only
        # the content tells then.
        if entry.size and info.st_size & 0xFFFFFFFF != entry.size:
            _add(result, "%s: changed (%d bytes, %d at checkout)" % (entry.path, info.st_size, entry.size))
            continue
        if bool(info.st_mode & 0o100) != bool(entry.mode & 0o100):
            _add(result, "%s: executable bit changed" % entry.path)
            continue
        # Same size: trust the stat data only where git would (same mtime, older than the index).
        if not entry.size or int(info.st_mtime) != entry.mtime or entry.mtime >= index_mtime:
            if _hash_file(full, hash_size) != entry.oid:
                _add(result, "%s: changed (same size)" % entry.path)
    return result


# --------------------------------------------------------------------------- archive manifest
MANIFEST_NAME = ".megatron-ds-manifest"
MANIFEST_HEADER = "# megatron_ds.cluster source manifest v1: sha256 size mtime path"
# Files of the collection's own inside an unpacked tree (the archive marker, the manifest).
_OWN_PREFIX = ".megatron-ds-"


def _sha256_file(path: str) -> Optional[str]:
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def manifest_entries(root: str) -> List[Tuple[str, str, int, int]]:
    """(relative path, sha256, size, mtime) of every regular file under ``root``, sorted, without
    the collection's own marker files; symbolic links are not followed."""
    entries = []
    for directory, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(directory, name)
            rel = os.path.relpath(full, root)
            if rel.startswith(_OWN_PREFIX):
                continue
            info = os.lstat(full)
            if not stat.S_ISREG(info.st_mode):
                continue
            entries.append((rel, _sha256_file(full) or "", info.st_size, int(info.st_mtime)))
    return sorted(entries)


def format_manifest(entries: List[Tuple[str, str, int, int]]) -> str:
    # The path last, so that it may hold spaces; a newline in a name is escaped.
    return MANIFEST_HEADER + "\n" + "".join(
        "%s %d %d %s\n" % (digest, size, mtime, path.replace("\\", "\\\\").replace("\n", "\\n"))
        for path, digest, size, mtime in entries)


def parse_manifest(text: str) -> List[Tuple[str, str, int, int]]:
    """The entries of a manifest; ValueError when it is not one."""
    lines = text.split("\n")
    if not lines or lines[0] != MANIFEST_HEADER:
        raise ValueError("not a megatron_ds.cluster source manifest (first line %r)" % lines[0][:80])
    entries = []
    for number, line in enumerate(lines[1:], 2):
        if not line:
            continue
        parts = line.split(" ", 3)
        if len(parts) != 4 or not re.match(r"^[0-9a-f]{64}$", parts[0]) or not parts[1].isdigit() \
                or not parts[2].lstrip("-").isdigit():
            raise ValueError("line %d of the manifest does not read: %r" % (number, line[:80]))
        path = re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), parts[3])
        entries.append((path, parts[0], int(parts[1]), int(parts[2])))
    return entries


def write_manifest(root: str, name: str = MANIFEST_NAME) -> int:
    """Writes the manifest of ``root`` to ``root/name`` (atomically); the number of files."""
    entries = manifest_entries(root)
    target = os.path.join(root, name)
    scratch = target + ".tmp"
    with open(scratch, "w", encoding="utf-8") as handle:
        handle.write(format_manifest(entries))
    os.chmod(scratch, 0o644)
    os.replace(scratch, target)
    return len(entries)


def check_manifest(read_bytes: Callable[[str], Optional[bytes]], real: Callable[[str], str], worktree: str,
                   name: str = MANIFEST_NAME) -> Dict[str, Any]:
    """The files of the unpacked tree at ``worktree`` (node path) against its manifest: missing,
    not a regular file, another size, or (where the mtime moved) another sha256."""
    manifest = worktree.rstrip("/") + "/" + name
    data = read_bytes(manifest)
    if data is None:
        return empty(manifest, "no manifest at %s: the tree was unpacked before manifests were written, or it "
                               "was removed; re-run provision.yml to write one" % manifest)
    try:
        entries = parse_manifest(data.decode("utf-8", "replace"))
    except ValueError as exc:
        return empty(manifest, "unreadable manifest %s: %s" % (manifest, exc))
    result = empty(manifest)
    base = real(worktree)
    for path, digest, size, mtime in entries:
        result["checked"] += 1
        full = os.path.join(base, path)
        try:
            info = os.lstat(full)
        except OSError:
            _add(result, "%s: missing" % path)
            continue
        if not stat.S_ISREG(info.st_mode):
            _add(result, "%s: not a regular file" % path)
            continue
        if info.st_size != size:
            _add(result, "%s: changed (%d bytes, %d when unpacked)" % (path, info.st_size, size))
            continue
        if int(info.st_mtime) != mtime and _sha256_file(full) != digest:
            _add(result, "%s: changed (same size)" % path)
    return result
