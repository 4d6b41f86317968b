# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's one nvidia-smi reader (_facts/smi.py), field by field.

The recorded answers are the 2 x H200 host's (tests/fixtures/gpu-host-h200x2/README.md):
``nvidia-smi -q -x`` and a ``--query-gpu ... --format=csv`` with header and units. Every field of
the table is read from the XML and from both CSV forms (header with units; noheader,nounits with
the fields given), and every field's "not available" spellings give None. The small XML trees
built below hold one field each, in the element layout the table names (older drivers' power
and ECC blocks included), so each path is exercised on its own.
"""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Dict, Optional

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import smi

FIXTURES = Path(__file__).resolve().parents[4] / "fixtures"
H200 = FIXTURES / "gpu-host-h200x2"
SMI_XML = (H200 / "nvidia-smi-q.xml").read_text()
SMI_CSV = (H200 / "nvidia-smi-query.csv").read_text()
MIB = 1024 * 1024

# GPU 0 of the H200 XML, read off the file by hand (the element each value comes from).
H200_GPU0 = {
    "index": 0,                                                    # first <gpu>
    "name": "NVIDIA H200",                                         # product_name
    "uuid": "GPU-00000000-0000-0000-0000-000000000001",            # uuid
    "pci_bus_id": "00000000:00:06.0",                              # pci/pci_bus_id
    "persistence_mode": True,                                      # Enabled
    "compute_mode": "Default",
    "architecture": "Hopper",                                      # product_architecture
    "compute_capability": "9.0",                                   # Hopper's one capability (no element)
    "memory_total_bytes": 143771.0 * MIB,                          # fb_memory_usage/total 143771 MiB
    "memory_used_bytes": 0.0,                                      # fb_memory_usage/used 0 MiB
    "utilization_percent": 0.0,                                    # utilization/gpu_util 0 %
    "memory_utilization_percent": 0.0,                             # utilization/memory_util 0 %
    "power_watts": 119.86,                                         # gpu_power_readings/instant_power_draw
    "power_limit_watts": 700.0,                                    # gpu_power_readings/current_power_limit
    "temperature_celsius": 30.0,                                   # temperature/gpu_temp 30 C
    "memory_temperature_celsius": 33.0,                            # temperature/memory_temp 33 C
    "ecc_corrected_volatile": 0.0,                                 # Hopper's sram_/dram_ counters
    "ecc_uncorrected_volatile": 0.0,
    "ecc_corrected_aggregate": 0.0,
    "ecc_uncorrected_aggregate": 0.0,
    "retired_pages_single_bit": None,                              # N/A: Hopper remaps rows instead
    "retired_pages_double_bit": None,
    "retired_pages_pending": None,
    "remapped_rows_correctable": 0.0,                              # remapped_rows/remapped_row_corr
    "remapped_rows_uncorrectable": 0.0,
    "remapped_rows_pending": 0.0,                                  # No
    "remapped_rows_failure": 0.0,                                  # No
}
H200_GPU1_CHANGES = {"index": 1, "uuid": "GPU-00000000-0000-0000-0000-000000000002", "pci_bus_id": "00000000:00:07.0",
                     "power_watts": 122.84, "temperature_celsius": 32.0, "memory_temperature_celsius": 35.0}

# Every --query-gpu field of the table: its header as --format=csv prints it, a cell with units,
# the same cell under nounits, and the value read.
CSV_CELLS = {
    "index": ("index", "0", "0", 0),
    "name": ("name", "NVIDIA H200", "NVIDIA H200", "NVIDIA H200"),
    "uuid": ("uuid", "GPU-00000000-0000-0000-0000-000000000001", "GPU-00000000-0000-0000-0000-000000000001",
             "GPU-00000000-0000-0000-0000-000000000001"),
    "pci_bus_id": ("pci.bus_id", "00000000:00:06.0", "00000000:00:06.0", "00000000:00:06.0"),
    "driver_version": ("driver_version", "580.159.04", "580.159.04", "580.159.04"),
    "persistence_mode": ("persistence_mode", "Enabled", "Enabled", True),
    "compute_mode": ("compute_mode", "Default", "Default", "Default"),
    "compute_capability": ("compute_cap", "9.0", "9.0", "9.0"),
    "memory_total_bytes": ("memory.total [MiB]", "143771 MiB", "143771", 143771.0 * MIB),
    "memory_used_bytes": ("memory.used [MiB]", "512 MiB", "512", 512.0 * MIB),
    "utilization_percent": ("utilization.gpu [%]", "97 %", "97", 97.0),
    "memory_utilization_percent": ("utilization.memory [%]", "41 %", "41", 41.0),
    "power_watts": ("power.draw [W]", "119.86 W", "119.86", 119.86),
    "power_limit_watts": ("power.limit [W]", "700.00 W", "700.00", 700.0),
    "temperature_celsius": ("temperature.gpu", "30", "30", 30.0),
    "memory_temperature_celsius": ("temperature.memory", "33", "33", 33.0),
    "ecc_corrected_volatile": ("ecc.errors.corrected.volatile.total", "3", "3", 3.0),
    "ecc_uncorrected_volatile": ("ecc.errors.uncorrected.volatile.total", "1", "1", 1.0),
    "ecc_corrected_aggregate": ("ecc.errors.corrected.aggregate.total", "12", "12", 12.0),
    "ecc_uncorrected_aggregate": ("ecc.errors.uncorrected.aggregate.total", "2", "2", 2.0),
    "retired_pages_single_bit": ("retired_pages.sbe", "4", "4", 4.0),
    "retired_pages_double_bit": ("retired_pages.dbe", "1", "1", 1.0),
    "retired_pages_pending": ("retired_pages.pending", "Yes", "Yes", 1.0),
}
CSV_KEYS = [field.key for field in smi.FIELDS if field.csv]
NOT_AVAILABLE = ["[N/A]", "N/A", "[Not Supported]", "Not Supported", "", "[Unknown Error]", "[Insufficient Permissions]"]


def _value(result: Dict, key: str):
    """A key of the reader's result: the host's (driver, CUDA) or GPU 0's."""
    return result[key] if key in smi.LOG_KEYS else result["gpus"][0][key]


def _tree(paths: Dict[str, Optional[str]], gpu_id: str = "00000000:00:06.0") -> str:
    """An nvidia_smi_log with one <gpu> holding the elements at ``paths`` (None: leave it out)."""
    root = ET.Element("nvidia_smi_log")
    gpu = ET.SubElement(root, "gpu", {"id": gpu_id} if gpu_id else {})
    for path, text in paths.items():
        if text is None:
            continue
        parent = root if path.startswith("/") else gpu
        for part in path.lstrip("/").split("/"):
            child = parent.find(part)
            parent = child if child is not None else ET.SubElement(parent, part)
        parent.text = text
    return ET.tostring(root, encoding="unicode")


# --------------------------------------------------------------------------- the table
def test_every_field_has_a_row_in_these_tables():
    assert set(H200_GPU0) == set(smi.GPU_KEYS)
    assert set(CSV_CELLS) == set(CSV_KEYS)
    assert set(smi.LOG_KEYS) == {"driver_version", "cuda_version"}
    assert len({field.key for field in smi.FIELDS}) == len(smi.FIELDS)
    names = [name for field in smi.FIELDS for name in field.csv]
    assert len(set(names)) == len(names)


@pytest.mark.parametrize("keys, expected", [
    (["index", "name", "memory_total_bytes"], ["index", "name", "memory.total"]),
    (["retired_pages_single_bit", "retired_pages_double_bit"], ["retired_pages.sbe", "retired_pages.dbe"]),
    ([], []),
])
def test_query_fields_are_the_first_names(keys, expected):
    assert smi.query_fields(keys) == expected


def test_query_fields_refuses_what_query_gpu_cannot_ask():
    with pytest.raises(ValueError, match="remapped_rows_pending"):
        smi.query_fields(["index", "remapped_rows_pending"])
    with pytest.raises(KeyError):
        smi.query_fields(["clocks_sm"])


# --------------------------------------------------------------------------- the recorded XML
@pytest.mark.parametrize("key", list(H200_GPU0))
def test_xml_reads_every_field_of_the_h200s(key):
    gpus = smi.parse_xml(SMI_XML)["gpus"]
    assert gpus[0][key] == H200_GPU0[key]
    assert gpus[1][key] == H200_GPU1_CHANGES.get(key, H200_GPU0[key])


def test_xml_host_fields_and_record_shape():
    parsed = smi.parse_xml(SMI_XML)
    assert (parsed["driver_version"], parsed["cuda_version"]) == ("580.159.04", "13.0")
    assert set(parsed) == {"driver_version", "cuda_version", "gpus"}
    assert [list(gpu) for gpu in parsed["gpus"]] == [list(smi.GPU_KEYS)] * 2


@pytest.mark.parametrize("text", [
    "",
    None,
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "<?xml version=\"1.0\" ?><other_log/>",
    SMI_XML[: len(SMI_XML) // 2],
])
def test_xml_refuses_what_is_not_nvidia_smi_xml(text):
    with pytest.raises(ValueError, match="^not nvidia-smi XML"):
        smi.parse_xml(text)


def test_xml_without_gpus_is_the_host_alone():
    assert smi.parse_xml(_tree({"/driver_version": "580.159.04"}).replace("<gpu id=\"00000000:00:06.0\" />", "")) == {
        "driver_version": "580.159.04", "cuda_version": None, "gpus": []}


# --------------------------------------------------------------------------- the recorded CSV
def test_csv_fixture_agrees_with_the_xml_on_every_column():
    from_csv = smi.parse_csv(SMI_CSV)
    from_xml = smi.parse_xml(SMI_XML)
    assert from_csv["driver_version"] == from_xml["driver_version"] == "580.159.04"
    assert from_csv["cuda_version"] is None  # --query-gpu has no CUDA version
    assert [sorted(gpu) for gpu in from_csv["gpus"]] == [sorted(["index", "name", "uuid", "memory_total_bytes",
                                                                 "pci_bus_id", "persistence_mode", "compute_mode"])] * 2
    for csv_gpu, xml_gpu in zip(from_csv["gpus"], from_xml["gpus"]):
        assert csv_gpu == {key: xml_gpu[key] for key in csv_gpu}


def test_noheader_nounits_rows_built_from_the_xml_agree_with_it():
    # What the monitoring collector asks for: every --query-gpu field of the table, without header or
    # units, with the XML's values of the same GPUs.
    from_xml = smi.parse_xml(SMI_XML)
    keys = [key for key in CSV_KEYS if key not in smi.LOG_KEYS]

    def cell(value):
        if value is None:
            return "[N/A]"
        if value is True:
            return "Enabled"
        if isinstance(value, float):
            return "%g" % (value / MIB if value >= MIB else value)
        return str(value)

    rows = "".join(", ".join(cell(gpu[key]) for key in keys) + "\n" for gpu in from_xml["gpus"])
    from_csv = smi.parse_csv(rows, smi.query_fields(keys))
    assert from_csv["gpus"] == [{key: gpu[key] for key in keys} for gpu in from_xml["gpus"]]


# --------------------------------------------------------------------------- field by field, CSV
@pytest.mark.parametrize("key", CSV_KEYS)
def test_csv_with_header_and_units_reads_the_field(key):
    header, cell, _nounits, expected = CSV_CELLS[key]
    assert _value(smi.parse_csv("%s\n%s\n" % (header, cell)), key) == expected


@pytest.mark.parametrize("key", CSV_KEYS)
def test_csv_noheader_nounits_reads_the_field(key):
    _header, _cell, nounits, expected = CSV_CELLS[key]
    assert _value(smi.parse_csv(nounits + "\n", smi.query_fields([key])), key) == expected


@pytest.mark.parametrize("key", [key for key in CSV_KEYS if key != "index"])
@pytest.mark.parametrize("cell", NOT_AVAILABLE)
def test_csv_not_available_is_none(key, cell):
    result = smi.parse_csv("index, %s\n0, %s\n" % (CSV_CELLS[key][0], cell))
    assert _value(result, key) is None


@pytest.mark.parametrize("cell", NOT_AVAILABLE)
def test_csv_index_not_available_is_the_position(cell):
    assert [gpu["index"] for gpu in smi.parse_csv("index, name\n%s, A\n%s, B\n" % (cell, cell))["gpus"]] == [0, 1]


@pytest.mark.parametrize("header, key", [
    ("gpu_name", "name"), ("gpu_uuid", "uuid"), ("gpu_bus_id", "pci_bus_id"),
    ("retired_pages.single_bit_ecc.count", "retired_pages_single_bit"),
    ("retired_pages.double_bit.count", "retired_pages_double_bit"),
])
def test_csv_header_may_carry_the_other_name(header, key):
    assert smi.parse_csv("%s\n7\n" % header)["gpus"][0][key] in ("7", 7.0)


def test_csv_columns_the_table_does_not_know_are_skipped():
    result = smi.parse_csv("index, clocks.sm [MHz], name\n0, 1980 MHz, NVIDIA H200\n")
    assert result["gpus"] == [{"index": 0, "name": "NVIDIA H200"}]


def test_csv_header_equal_to_the_fields_given_is_a_header():
    assert smi.parse_csv("clocks.sm [MHz]\n1980 MHz\n", ["clocks.sm"])["gpus"] == [{"index": 0}]


def test_csv_driver_version_is_the_first_gpu_that_says():
    text = "index, driver_version\n0, [N/A]\n1, 580.159.04\n"
    assert smi.parse_csv(text)["driver_version"] == "580.159.04"


@pytest.mark.parametrize("text, fields, message", [
    ("0, NVIDIA H200\n", None, "without a header line"),
    ("\n".join(SMI_CSV.splitlines()[1:]), None, "without a header line"),
    ("index, name\n0, NVIDIA H200, extra\n", None, "returned 3 columns, expected 2"),
    ("0, GPU-1\n", ["index"], "returned 2 columns, expected 1 \\(index\\)"),
])
def test_csv_refuses_rows_that_are_not_the_answer(text, fields, message):
    with pytest.raises(ValueError, match=message):
        smi.parse_csv(text, fields)


@pytest.mark.parametrize("text", ["", "\n\n", None])
def test_csv_empty_is_no_gpus(text):
    assert smi.parse_csv(text, ["index"]) == {"driver_version": None, "cuda_version": None, "gpus": []}


# --------------------------------------------------------------------------- field by field, XML
XML_FIELDS = [field for field in smi.FIELDS if not callable(field.xml) and field.xml]


@pytest.mark.parametrize("field", XML_FIELDS, ids=[field.key for field in XML_FIELDS])
@pytest.mark.parametrize("text", NOT_AVAILABLE + [None])
def test_xml_not_available_or_missing_is_none(field, text):
    # Every path of the field holds the value (or is absent), the GPU's id attribute included.
    paths = {path: text for path in field.xml if not path.startswith("@")}
    gpu_id = text if "@id" in field.xml else "00000000:00:06.0"
    result = smi.parse_xml(_tree(paths, gpu_id=gpu_id or ""))
    assert _value(result, field.key) is None


@pytest.mark.parametrize("field", XML_FIELDS, ids=[field.key for field in XML_FIELDS])
def test_xml_each_path_is_read(field):
    # Each path alone gives the value: the H200's own text for the field where it has one.
    sample = {"persistence_mode": ("Disabled", False), "pci_bus_id": ("00000000:00:07.0", "00000000:00:07.0"),
              "memory_total_bytes": ("81920 MiB", 81920.0 * MIB), "memory_used_bytes": ("1 MiB", 1.0 * MIB),
              "remapped_rows_pending": ("Yes", 1.0), "remapped_rows_failure": ("No", 0.0),
              "retired_pages_pending": ("No", 0.0)}
    text, expected = sample.get(field.key, ("42", 42.0))
    if field.convert is smi.parse_text:
        text, expected = sample.get(field.key, ("X-42", "X-42"))
    for path in field.xml:
        if path == "@id":
            result = smi.parse_xml(_tree({}, gpu_id=text))
        else:
            result = smi.parse_xml(_tree({path: text}, gpu_id=""))
        assert _value(result, field.key) == expected, path


@pytest.mark.parametrize("paths, expected", [
    ({"gpu_power_readings/instant_power_draw": "119.86 W", "gpu_power_readings/power_draw": "118.00 W"}, 119.86),
    ({"gpu_power_readings/instant_power_draw": "N/A", "gpu_power_readings/power_draw": "118.00 W"}, 118.0),
    ({"power_readings/power_draw": "61.25 W"}, 61.25),  # drivers before the gpu_power_readings split
    ({"gpu_power_readings/instant_power_draw": "[Not Supported]", "power_readings/power_draw": "N/A"}, None),
])
def test_xml_power_draw_takes_the_first_path_with_a_value(paths, expected):
    assert smi.parse_xml(_tree(paths))["gpus"][0]["power_watts"] == expected


def test_xml_bus_id_falls_back_to_the_gpu_attribute():
    assert smi.parse_xml(_tree({}))["gpus"][0]["pci_bus_id"] == "00000000:00:06.0"
    assert smi.parse_xml(_tree({"pci/pci_bus_id": "00000000:00:07.0"}))["gpus"][0]["pci_bus_id"] == "00000000:00:07.0"


HOPPER_ECC = {"ecc_errors/volatile/sram_correctable": "2", "ecc_errors/volatile/sram_uncorrectable_parity": "1",
              "ecc_errors/volatile/sram_uncorrectable_secded": "N/A", "ecc_errors/volatile/dram_correctable": "5",
              "ecc_errors/volatile/dram_uncorrectable": "3"}
OLD_ECC = {"ecc_errors/aggregate/single_bit/total": "7", "ecc_errors/aggregate/double_bit/total": "1",
           "ecc_errors/aggregate/single_bit/device_memory": "7"}


@pytest.mark.parametrize("paths, key, expected", [
    (HOPPER_ECC, "ecc_corrected_volatile", 7.0),        # sram 2 + dram 5
    (HOPPER_ECC, "ecc_uncorrected_volatile", 4.0),      # parity 1 + secded N/A + dram 3
    (HOPPER_ECC, "ecc_corrected_aggregate", None),      # no aggregate block
    (OLD_ECC, "ecc_corrected_aggregate", 7.0),          # single_bit/total, not summed with its parts
    (OLD_ECC, "ecc_uncorrected_aggregate", 1.0),
    ({"ecc_errors/volatile/sram_correctable": "N/A", "ecc_errors/volatile/dram_correctable": "N/A"},
     "ecc_corrected_volatile", None),
    ({"ecc_errors/volatile/single_bit/total": "[N/A]"}, "ecc_corrected_volatile", None),
])
def test_xml_ecc_totals(paths, key, expected):
    assert smi.parse_xml(_tree(paths))["gpus"][0][key] == expected


# --------------------------------------------------------------------------- conversions
@pytest.mark.parametrize("text, expected", [
    ("143771 MiB", 143771.0), ("143771", 143771.0), ("0 %", 0.0), ("119.86 W", 119.86), ("30 C", 30.0),
    ("-8 C", -8.0), ("3072 bank(s)", 3072.0), ("250 us", 250.0), ("Yes", 1.0), ("No", 0.0), ("Enabled", 1.0),
    ("Disabled", 0.0), ("Active", 1.0), ("Not Active", 0.0), ("Default", None), ("P0", None), (None, None),
] + [(text, None) for text in NOT_AVAILABLE + ["None"]])
def test_parse_number(text, expected):
    assert smi.parse_number(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("Enabled", True), ("Disabled", False), ("Yes", True), ("No", False), (" enabled ", True),
    ("[N/A]", None), ("Default", None), (None, None),
])
def test_parse_flag(text, expected):
    assert smi.parse_flag(text) is expected


@pytest.mark.parametrize("text, expected", [
    (" NVIDIA H200 ", "NVIDIA H200"), ("Default", "Default"), (None, None),
] + [(text, None) for text in NOT_AVAILABLE])
def test_parse_text(text, expected):
    assert smi.parse_text(text) == expected


@pytest.mark.parametrize("text, expected", [("143771 MiB", 143771.0 * MIB), ("0", 0.0), ("[N/A]", None)])
def test_parse_mib_is_bytes(text, expected):
    assert smi.parse_mib(text) == expected


# --------------------------------------------------------------------------- compute capability
@pytest.mark.parametrize("architecture, expected", [
    ("Hopper", "9.0"),          # the recorded H200's element
    ("Ada Lovelace", "8.9"),
    ("Turing", "7.5"),
    ("Volta", "7.0"),
    ("Ampere", None),           # 8.0, 8.6 or 8.7: the name decides (_stack/gpu_arch.py)
    ("Blackwell", None),        # 10.0 or 12.0
    ("N/A", None),
    (None, None),               # no element (drivers before product_architecture)
])
def test_xml_capability_comes_from_an_architecture_of_one_capability(architecture, expected):
    gpu = smi.parse_xml(_tree({"product_name": "NVIDIA X", "product_architecture": architecture}))["gpus"][0]
    assert gpu["compute_capability"] == expected
    assert gpu["architecture"] == (None if architecture in (None, "N/A") else architecture)


def test_csv_compute_cap_is_read_as_printed():
    parsed = smi.parse_csv("index, name, compute_cap\n0, NVIDIA A100-SXM4-80GB, 8.0\n1, NVIDIA A100-SXM4-80GB, [N/A]\n")
    assert [gpu["compute_capability"] for gpu in parsed["gpus"]] == ["8.0", None]
    assert "architecture" not in parsed["gpus"][0]  # --query-gpu has no such field
