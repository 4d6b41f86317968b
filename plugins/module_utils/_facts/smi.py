# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's one reader of nvidia-smi output: a table of the fields it knows and the
two parsers that table drives.

``nvidia-smi -q -x`` (XML, every driver) and ``nvidia-smi --query-gpu=<fields> --format=csv``
(with or without ``noheader`` and ``nounits``) give the same record per GPU, keyed by the
table's keys, in the table's types and units (bytes, watts, degrees Celsius, percent, counts):

    {"driver_version": "580.159.04", "cuda_version": "13.0",
     "gpus": [{"index": 0, "name": "NVIDIA H200", "memory_total_bytes": 150754820096.0, ...}]}

A value the GPU does not report ("[N/A]", "[Not Supported]", ...) is None. An XML record has
every GPU field of the table; a CSV record only the fields of the columns it was given.

Readers: gpu_stack_facts and the preflight (_facts/collect.py, through _facts/parsers.py) and
the monitoring role's textfile collector (roles/monitoring/files/megatron_gpu_metrics.py, from
os_base's library on the node). A field either needs goes into FIELDS, once.

Runs on the managed node: standard library only, Python 3.8+, no I/O.
"""
from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

MIB = 1024 * 1024

# What nvidia-smi prints for a value it does not have, lower-cased.
NOT_AVAILABLE = frozenset((
    "", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]", "unknown error",
    "[insufficient permissions]", "none",
))
_TRUE = ("yes", "enabled", "active")
_FALSE = ("no", "disabled", "not active")
_NUMBER_RE = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*(?:%|MiB|W|C|us|bank\(s\))?\s*$")
_HEADER_UNIT_RE = re.compile(r"\s*\[.*\]$")


# --------------------------------------------------------------------------- conversions
def parse_text(value: Optional[str]) -> Optional[str]:
    """A name, UUID, bus id or mode as printed; None when not available."""
    value = (value or "").strip()
    return None if value.lower() in NOT_AVAILABLE else value


def parse_flag(value: Optional[str]) -> Optional[bool]:
    """Enabled/Yes/Active -> True, Disabled/No/Not Active -> False, anything else None."""
    value = (value or "").strip().lower()
    return True if value in _TRUE else False if value in _FALSE else None


def parse_number(value: Optional[str]) -> Optional[float]:
    """One value as a float, or None when the GPU does not report it.

    Accepts ``nounits`` values ("143771") and values with units ("143771 MiB", "0 %", "119.86 W",
    "30 C"); flags (Yes/No, Enabled/Disabled, Active/Not Active) count as 1/0.
    """
    if value is None:
        return None
    value = value.strip()
    lowered = value.lower()
    if lowered in NOT_AVAILABLE:
        return None
    if lowered in _TRUE:
        return 1.0
    if lowered in _FALSE:
        return 0.0
    match = _NUMBER_RE.match(value)
    return float(match.group(1)) if match else None


def parse_mib(value: Optional[str]) -> Optional[float]:
    """A memory size nvidia-smi prints in MiB ("143771 MiB" or "143771"), in bytes."""
    number = parse_number(value)
    return None if number is None else number * MIB


def parse_index(value: Optional[str]) -> Optional[int]:
    value = (value or "").strip()
    return int(value) if value.isdigit() else None


def _ecc_sum(scope: str, kind: str) -> Callable[[ET.Element], Optional[float]]:
    """The reader of one ECC total in the XML (``kind``: correctable or uncorrectable).

    Older GPUs report ``single_bit/total`` (corrected) and ``double_bit/total`` (uncorrected)
    blocks; Hopper splits the counters by memory (``sram_correctable``, ``dram_uncorrectable``,
    ``sram_uncorrectable_parity``, ...), which are summed.
    """
    def read(gpu: ET.Element) -> Optional[float]:
        block = gpu.find("ecc_errors/" + scope)
        if block is None:
            return None
        old = block.find("single_bit/total" if kind == "correctable" else "double_bit/total")
        if old is not None:
            return parse_number(old.text)
        total = None
        for child in block:
            wanted = child.tag.endswith("_correctable") if kind == "correctable" else "_uncorrectable" in child.tag
            value = parse_number(child.text) if wanted else None
            if value is not None:
                total = (total or 0.0) + value
        return total
    read.__name__ = "ecc_%s_%s" % (scope, kind)
    return read


# Compute capability of the architectures that have one only ("product_architecture" in the XML,
# which has no capability element; the CSV has compute_cap). Ampere (8.0, 8.6, 8.7) and Blackwell
# (10.0, 12.0) have several, so the name decides there (_stack/gpu_arch.py, on the controller).
# Source: NVIDIA's "CUDA Toolkit, Driver, and Architecture Matrix"; Hopper's 9.0 matches what torch
# reported on the H200 host (tests/fixtures/gpu-host-h200x2/gpu-host-stack.txt).
ARCHITECTURE_CAPABILITY: Dict[str, str] = {
    "hopper": "9.0",
    "ada lovelace": "8.9",
    "turing": "7.5",
    "volta": "7.0",
}


def _xml_capability(gpu: ET.Element) -> Optional[str]:
    architecture = parse_text(gpu.findtext("product_architecture"))
    return ARCHITECTURE_CAPABILITY.get((architecture or "").lower())


# --------------------------------------------------------------------------- the table
class Field(NamedTuple):
    """One thing nvidia-smi reports.

    ``csv``: its ``--query-gpu`` names, the one to ask for first, then other names a header may
    carry (empty: --query-gpu has no such field). ``xml``: paths under ``<gpu>`` tried in order
    (the first with a value wins; ``@id`` is the element's attribute, a leading ``/`` a path under
    ``<nvidia_smi_log>``), or a function of the ``<gpu>`` element; empty for ``index``, which is
    the position there. ``convert``: printed text -> value. ``scope``: ``gpu`` (in each record)
    or ``log`` (once for the host, at the top of the result).
    """
    key: str
    csv: Tuple[str, ...]
    xml: Union[Tuple[str, ...], Callable[[ET.Element], Any]]
    convert: Callable[[Optional[str]], Any]
    scope: str = "gpu"


FIELDS: Tuple[Field, ...] = (
    # identity
    Field("index", ("index",), (), parse_index),
    Field("name", ("name", "gpu_name"), ("product_name",), parse_text),
    Field("uuid", ("uuid", "gpu_uuid"), ("uuid",), parse_text),
    Field("pci_bus_id", ("pci.bus_id", "gpu_bus_id"), ("pci/pci_bus_id", "@id"), parse_text),
    Field("driver_version", ("driver_version",), ("/driver_version",), parse_text, "log"),
    Field("cuda_version", (), ("/cuda_version",), parse_text, "log"),
    Field("persistence_mode", ("persistence_mode",), ("persistence_mode",), parse_flag),
    Field("compute_mode", ("compute_mode",), ("compute_mode",), parse_text),
    Field("architecture", (), ("product_architecture",), parse_text),
    # --query-gpu's compute_cap ("9.0"); the XML's architecture where it has one capability.
    Field("compute_capability", ("compute_cap",), _xml_capability, parse_text),
    # memory, load, power, heat
    Field("memory_total_bytes", ("memory.total",), ("fb_memory_usage/total",), parse_mib),
    Field("memory_used_bytes", ("memory.used",), ("fb_memory_usage/used",), parse_mib),
    Field("utilization_percent", ("utilization.gpu",), ("utilization/gpu_util",), parse_number),
    Field("memory_utilization_percent", ("utilization.memory",), ("utilization/memory_util",), parse_number),
    # Drivers from 530 on split gpu_power_readings (instant and average draw) from power_readings.
    Field("power_watts", ("power.draw",), ("gpu_power_readings/instant_power_draw", "gpu_power_readings/power_draw",
                                           "power_readings/power_draw"), parse_number),
    Field("power_limit_watts", ("power.limit",), ("gpu_power_readings/current_power_limit",
                                                  "power_readings/power_limit"), parse_number),
    Field("temperature_celsius", ("temperature.gpu",), ("temperature/gpu_temp",), parse_number),
    Field("memory_temperature_celsius", ("temperature.memory",), ("temperature/memory_temp",), parse_number),
    # ECC counters, retired pages (before Ampere), remapped rows (Ampere on; --query-gpu has none)
    Field("ecc_corrected_volatile", ("ecc.errors.corrected.volatile.total",),
          _ecc_sum("volatile", "correctable"), parse_number),
    Field("ecc_uncorrected_volatile", ("ecc.errors.uncorrected.volatile.total",),
          _ecc_sum("volatile", "uncorrectable"), parse_number),
    Field("ecc_corrected_aggregate", ("ecc.errors.corrected.aggregate.total",),
          _ecc_sum("aggregate", "correctable"), parse_number),
    Field("ecc_uncorrected_aggregate", ("ecc.errors.uncorrected.aggregate.total",),
          _ecc_sum("aggregate", "uncorrectable"), parse_number),
    Field("retired_pages_single_bit", ("retired_pages.sbe", "retired_pages.single_bit_ecc.count"),
          ("retired_pages/multiple_single_bit_retirement/retired_count",), parse_number),
    Field("retired_pages_double_bit", ("retired_pages.dbe", "retired_pages.double_bit.count"),
          ("retired_pages/double_bit_retirement/retired_count",), parse_number),
    Field("retired_pages_pending", ("retired_pages.pending",), ("retired_pages/pending_retirement",), parse_number),
    Field("remapped_rows_correctable", (), ("remapped_rows/remapped_row_corr",), parse_number),
    Field("remapped_rows_uncorrectable", (), ("remapped_rows/remapped_row_unc",), parse_number),
    Field("remapped_rows_pending", (), ("remapped_rows/remapped_row_pending",), parse_number),
    Field("remapped_rows_failure", (), ("remapped_rows/remapped_row_failure",), parse_number),
)
FIELD: Dict[str, Field] = dict((field.key, field) for field in FIELDS)
_BY_CSV: Dict[str, Field] = dict((name, field) for field in FIELDS for name in field.csv)
LOG_KEYS: Tuple[str, ...] = tuple(field.key for field in FIELDS if field.scope == "log")
GPU_KEYS: Tuple[str, ...] = tuple(field.key for field in FIELDS if field.scope == "gpu")


def query_fields(keys: Sequence[str]) -> List[str]:
    """The ``--query-gpu`` names that ask for ``keys``, in that order (KeyError for an unknown key,
    ValueError for one that --query-gpu cannot ask for)."""
    names = []
    for key in keys:
        if not FIELD[key].csv:
            raise ValueError("nvidia-smi --query-gpu has no field for %s" % key)
        names.append(FIELD[key].csv[0])
    return names


def _result(log: Dict[str, Any], gpus: List[Dict[str, Any]]) -> Dict[str, Any]:
    result: Dict[str, Any] = dict((key, log.get(key)) for key in LOG_KEYS)
    result["gpus"] = gpus
    return result


# --------------------------------------------------------------------------- CSV
def parse_csv(text: Optional[str], fields: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`` -> the reader's result.

    With a header line (``index, name, memory.total [MiB]``) the columns are read from it, in any
    order and with any unit suffix; without one, ``fields`` (the ``--query-gpu`` names in query
    order) names them. Columns the table does not know are skipped. Raises ValueError for rows
    without a header when no ``fields`` are given, and for a row whose column count is not the
    query's (not the answer to the question asked). ``index`` is the row's position when the
    column is missing or not a number.
    """
    rows = [[cell.strip() for cell in line.split(",")] for line in (text or "").splitlines() if line.strip()]
    if not rows:
        return _result({}, [])
    names = [_HEADER_UNIT_RE.sub("", cell) for cell in rows[0]]
    if any(name in _BY_CSV for name in names) or (fields is not None and names == list(fields)):
        columns, rows = names, rows[1:]
    elif fields is None:
        raise ValueError("nvidia-smi CSV without a header line: %r" % ", ".join(rows[0]))
    else:
        columns = list(fields)
    log: Dict[str, Any] = {}
    gpus = []
    for position, row in enumerate(rows):
        if len(row) != len(columns):
            raise ValueError("nvidia-smi returned %d columns, expected %d (%s): %r"
                             % (len(row), len(columns), ",".join(columns), ",".join(row)))
        gpu: Dict[str, Any] = {}
        for name, cell in zip(columns, row):
            field = _BY_CSV.get(name)
            if field is None:
                continue
            value = field.convert(cell)
            if field.scope == "log":
                if log.get(field.key) is None:
                    log[field.key] = value  # the first GPU that says
            else:
                gpu[field.key] = value
        if gpu.get("index") is None:
            gpu["index"] = position
        gpus.append(gpu)
    return _result(log, gpus)


# --------------------------------------------------------------------------- XML
def _xml_text(root: ET.Element, gpu: ET.Element, path: str) -> Optional[str]:
    if path.startswith("@"):
        return gpu.get(path[1:])
    return root.findtext(path[1:]) if path.startswith("/") else gpu.findtext(path)


def _xml_value(root: ET.Element, gpu: ET.Element, field: Field) -> Any:
    if callable(field.xml):
        return field.xml(gpu)
    for path in field.xml:
        value = field.convert(_xml_text(root, gpu, path))
        if value is not None:
            return value
    return None


def parse_xml(text: Optional[str]) -> Dict[str, Any]:
    """``nvidia-smi -q -x`` -> the reader's result, every GPU field of the table in each record.

    The XML has no index: a GPU's is its position, which is nvidia-smi's index order. Raises
    ValueError when the text is not the nvidia_smi_log XML.
    """
    try:
        root = ET.fromstring((text or "").strip())
    except ET.ParseError as exc:
        raise ValueError("not nvidia-smi XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise ValueError("not nvidia-smi XML: root element is <%s>" % root.tag)
    log = dict((field.key, _xml_value(root, root, field)) for field in FIELDS if field.scope == "log")
    gpus = []
    for position, element in enumerate(root.findall("gpu")):
        gpu: Dict[str, Any] = {}
        for field in FIELDS:
            if field.scope == "gpu":
                gpu[field.key] = position if field.key == "index" else _xml_value(root, element, field)
        gpus.append(gpu)
    return _result(log, gpus)
