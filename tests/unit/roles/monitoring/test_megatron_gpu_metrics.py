# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's GPU textfile collector on nvidia-smi output recorded on the GPU
validation host (2 x H200, tests/fixtures/gpu-host-h200x2/, see its README.md).

``nvidia-smi-query.csv`` is a ``--query-gpu ... --format=csv`` answer (header and units);
``nvidia-smi-q.xml`` is ``nvidia-smi -q -x``. The noheader,nounits rows the collector asks for
are built from the XML's values of the same GPUs, field by field, so the two parsers are checked
against each other.

The collector reads both with the collection's nvidia-smi reader (plugins/module_utils/_facts/smi.py,
tested field by field in tests/unit/plugins/module_utils/_facts/test_smi.py), which the role
installs with os_base's library. Loaded in this process, its import resolves to the checkout; one
test runs it as the timer does, with only the unpacked library (MEGATRON_DS_LIBRARY) on the path.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from ansible_collections.megatron_ds.cluster.tests.support.library import install as install_library

ROOT = Path(__file__).resolve().parents[4]
FILES = ROOT / "roles" / "monitoring" / "files"
COLLECTOR = FILES / "megatron_gpu_metrics.py"
H200 = ROOT / "tests" / "fixtures" / "gpu-host-h200x2"
_SPEC = importlib.util.spec_from_file_location("megatron_gpu_metrics", COLLECTOR)
gm = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(gm)

MIB = 1024 * 1024
FIELDS = list(gm.QUERY_FIELDS)
# The XML's values for GPU 0 and GPU 1, in QUERY_FIELDS order, as csv,noheader,nounits prints them.
H200_NOUNITS = (
    "0, GPU-00000000-0000-0000-0000-000000000001, NVIDIA H200, 00000000:00:06.0, 0, 0, 0, 143771,"
    " 119.86, 700.00, 30, 33, 0, 0, 0, 0, [N/A], [N/A], [N/A]\n"
    "1, GPU-00000000-0000-0000-0000-000000000002, NVIDIA H200, 00000000:00:07.0, 0, 0, 0, 143771,"
    " 122.84, 700.00, 32, 35, 0, 0, 0, 0, [N/A], [N/A], [N/A]\n"
)


def fixture(name: str) -> str:
    return (H200 / name).read_text()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("143771 MiB", 143771.0), ("143771", 143771.0), ("0 %", 0.0), ("119.86 W", 119.86),
        ("30 C", 30.0), ("-8 C", -8.0), ("[N/A]", None), ("N/A", None), ("[Not Supported]", None),
        ("Yes", 1.0), ("No", 0.0), ("Enabled", 1.0), ("Default", None), (None, None),
    ],
)
def test_parse_value(text, expected):
    assert gm.parse_value(text) == expected


def test_query_csv_with_header_reads_the_recorded_fixture():
    gpus = gm.parse_query_csv(fixture("nvidia-smi-query.csv"))
    assert [gpu["index"] for gpu in gpus] == ["0", "1"]
    assert [gpu["pci_bus_id"] for gpu in gpus] == ["00000000:00:06.0", "00000000:00:07.0"]
    assert all(gpu["name"] == "NVIDIA H200" for gpu in gpus)
    assert all(gpu["memory_total_bytes"] == 143771 * MIB for gpu in gpus)
    # Fields it was not asked for are absent, not zero.
    assert "utilization_percent" not in gpus[0]


@pytest.mark.parametrize(
    "key, gpu0, gpu1",
    [
        ("utilization_percent", 0.0, 0.0),
        ("memory_used_bytes", 0.0, 0.0),
        ("memory_total_bytes", 143771.0 * MIB, 143771.0 * MIB),
        ("power_watts", 119.86, 122.84),
        ("power_limit_watts", 700.0, 700.0),
        ("temperature_celsius", 30.0, 32.0),
        ("memory_temperature_celsius", 33.0, 35.0),
        ("ecc_corrected_volatile", 0.0, 0.0),
        ("ecc_uncorrected_aggregate", 0.0, 0.0),
        # Hopper retires no pages (it remaps rows): N/A, so no series.
        ("retired_pages_single_bit", None, None),
        ("retired_pages_pending", None, None),
    ],
)
def test_xml_and_noheader_csv_agree_on_the_h200s(key, gpu0, gpu1):
    xml = gm.parse_query_xml(fixture("nvidia-smi-q.xml"))
    csv = gm.parse_query_csv(H200_NOUNITS, FIELDS)
    assert [xml[0][key], xml[1][key]] == [gpu0, gpu1]
    assert [csv[0][key], csv[1][key]] == [gpu0, gpu1]


def test_xml_reads_identity_and_remapped_rows():
    xml = gm.parse_query_xml(fixture("nvidia-smi-q.xml"))
    assert [(g["index"], g["uuid"], g["pci_bus_id"]) for g in xml] == [
        ("0", "GPU-00000000-0000-0000-0000-000000000001", "00000000:00:06.0"),
        ("1", "GPU-00000000-0000-0000-0000-000000000002", "00000000:00:07.0"),
    ]
    assert all(g["remapped_rows_uncorrectable"] == 0.0 and g["remapped_rows_failure"] == 0.0 for g in xml)


@pytest.mark.parametrize(
    "text, fields, message",
    [
        ("0, GPU-1, NVIDIA H200\n", FIELDS, "returned 3 columns, expected %d" % len(FIELDS)),
        ("not,a,gpu\n", ["index"], "returned 3 columns, expected 1"),
    ],
)
def test_query_csv_rejects_rows_that_do_not_match_the_query(text, fields, message):
    with pytest.raises(ValueError, match=message):
        gm.parse_query_csv(text, fields)


def test_query_csv_empty_answer_is_no_gpus():
    assert gm.parse_query_csv("\n", FIELDS) == []


@pytest.mark.parametrize(
    "log, expected",
    [
        ("", {}),
        ("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
         "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
         "NVRM: Xid (PCI:0000:5e:00): 48, pid='<unknown>', name=<unknown>, An uncorrectable double bit error\n",
         {("0000:3b:00", "79"): 2, ("0000:5e:00", "48"): 1}),
        ("nvidia-nvswitch0: probe\n", {}),
    ],
    ids=["empty", "two-gpus", "unrelated"],
)
def test_parse_xid_events(log, expected):
    assert gm.parse_xid_events(log) == expected


def test_render_h200_exposition():
    text = gm.render(gm.parse_query_xml(fixture("nvidia-smi-q.xml")), True, "", "xml", {})
    lines = text.splitlines()
    assert 'megatron_gpu_collector_up{reason="",source="xml"} 1' in lines
    assert "megatron_gpu_count 2" in lines
    assert ('megatron_gpu_memory_total_bytes{gpu="1",uuid="GPU-00000000-0000-0000-0000-000000000002"} %d'
            % (143771 * MIB)) in lines
    assert 'megatron_gpu_power_watts{gpu="0",uuid="GPU-00000000-0000-0000-0000-000000000001"} 119.86' in lines
    assert not any(line.startswith("megatron_gpu_retired_pages") for line in lines)
    # Every sample line belongs to a declared metric family.
    declared = {line.split()[2] for line in lines if line.startswith("# TYPE")}
    assert {line.split("{")[0].split(" ")[0] for line in lines if not line.startswith("#")} <= declared


def test_render_without_nvidia_smi_says_why():
    text = gm.render([], False, "nvidia_smi_missing")
    assert 'megatron_gpu_collector_up{reason="nvidia_smi_missing",source=""} 0' in text
    assert "megatron_gpu_count 0" in text
    assert "megatron_gpu_utilization_percent" not in text


def test_locate_absent_nvidia_smi(tmp_path):
    assert gm.locate(str(tmp_path / "nvidia-smi")) is None
    assert gm.collect(None, 5)[:3] == ([], False, "nvidia_smi_missing")


class Recorded:
    """Answers each command with a recorded output, keyed by its first option (no stand-in tool)."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv, timeout):
        self.calls.append(argv)
        key = argv[1].split("=")[0]
        answer = self.answers[key]
        if isinstance(answer, Exception):
            raise answer
        return answer


XML = (0, (H200 / "nvidia-smi-q.xml").read_text(), "")
OLD_DRIVER = (2, 'Field "retired_pages.sbe" is not a valid field to query.\n', "")
NO_DRIVER = (9, "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n", "")
NO_XID = (1, "", "")
XID = (0, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n", "")


@pytest.mark.parametrize(
    "answers, journalctl, expected",
    [
        ({"--query-gpu": (0, H200_NOUNITS, ""), "-k": NO_XID}, "journalctl", (True, "", "query_gpu", 2, {})),
        ({"--query-gpu": (0, H200_NOUNITS, ""), "-k": XID}, "journalctl",
         (True, "", "query_gpu", 2, {("0000:3b:00", "79"): 1})),
        ({"--query-gpu": OLD_DRIVER, "-q": XML}, None, (True, "", "xml", 2, None)),
        ({"--query-gpu": OLD_DRIVER, "-q": NO_DRIVER}, None, (False, "nvidia_smi_failed", "xml", 0, None)),
        ({"--query-gpu": NO_DRIVER}, "journalctl", (False, "nvidia_smi_failed", "query_gpu", 0, None)),
        ({"--query-gpu": (0, "0, short\n", "")}, None, (False, "nvidia_smi_unparsable", "", 0, None)),
        ({"--query-gpu": subprocess.TimeoutExpired("nvidia-smi", 5)}, None,
         (False, "nvidia_smi_timeout", "", 0, None)),
    ],
    ids=["query-gpu", "query-gpu-xid", "old-driver-xml-fallback", "xml-fails", "driver-down",
         "garbage", "hung"],
)
def test_collect_outcomes(answers, journalctl, expected):
    gpus, up, reason, source, xid = gm.collect("/usr/bin/nvidia-smi", 10, journalctl, run=Recorded(answers))
    assert (up, reason, source, len(gpus), xid) == expected


def test_main_writes_the_textfile_atomically(tmp_path):
    out = tmp_path / "megatron_gpu.prom"
    rc = gm.main(["--output", str(out), "--nvidia-smi", str(tmp_path / "absent"), "--journalctl", ""])
    assert rc == 0
    assert 'reason="nvidia_smi_missing"' in out.read_text()
    assert oct(out.stat().st_mode & 0o777) == "0o644"
    assert os.listdir(tmp_path) == ["megatron_gpu.prom"]


def test_script_runs_standalone_with_the_system_python(tmp_path):
    out = tmp_path / "gpu.prom"
    subprocess.run(["python3", str(FILES / "megatron_gpu_metrics.py"), "--output", str(out),
                    "--nvidia-smi", str(tmp_path / "absent")], check=True)
    assert "megatron_gpu_collector_up" in out.read_text()


# --------------------------------------------------------------------------- the library on the node
def test_the_query_asks_what_it_always_asked():
    # The fields come from the reader's table now; nvidia-smi must still be asked the same question.
    assert gm.QUERY_FIELDS == (
        "index", "uuid", "name", "pci.bus_id", "utilization.gpu", "utilization.memory", "memory.used",
        "memory.total", "power.draw", "power.limit", "temperature.gpu", "temperature.memory",
        "ecc.errors.corrected.volatile.total", "ecc.errors.uncorrected.volatile.total",
        "ecc.errors.corrected.aggregate.total", "ecc.errors.uncorrected.aggregate.total",
        "retired_pages.sbe", "retired_pages.dbe", "retired_pages.pending",
    )


def test_in_process_the_reader_is_the_checkouts():
    assert Path(gm._smi.__file__).resolve() == (ROOT / "plugins" / "module_utils" / "_facts" / "smi.py").resolve()


def test_the_timer_runs_the_collector_on_the_library(tmp_path):
    # As the service runs it: only the library os_base installs (MEGATRON_DS_LIBRARY) on the path.
    library = install_library(tmp_path)
    out = tmp_path / "gpu.prom"
    probe = ("import importlib.util, sys; spec = importlib.util.spec_from_file_location('x', %r); "
             "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); print(m._smi.__file__); "
             "print(len(m.parse_query_xml(open(%r).read()))); "
             "sys.exit(m.main(['--output', %r, '--nvidia-smi', %r, '--journalctl', '']))"
             % (str(COLLECTOR), str(H200 / "nvidia-smi-q.xml"), str(out), str(tmp_path / "absent")))
    done = subprocess.run([sys.executable, "-I", "-c", probe], env=dict(os.environ, MEGATRON_DS_LIBRARY=str(library)),
                          capture_output=True, text=True, timeout=60, check=True)
    reader, count = done.stdout.split()
    assert reader.startswith(str(library) + os.sep) and reader.endswith(os.path.join("_facts", "smi.py")), reader
    assert count == "2"
    assert 'megatron_gpu_collector_up{reason="nvidia_smi_missing",source=""} 0' in out.read_text().splitlines()


def test_without_the_library_the_file_says_so(tmp_path):
    # An nvidia-smi is there (a placeholder, never run) but the reader is not: up 0, and why.
    smi = tmp_path / "nvidia-smi"
    smi.write_text("")
    smi.chmod(0o755)
    (tmp_path / "empty").mkdir()
    out = tmp_path / "gpu.prom"
    done = subprocess.run([sys.executable, "-I", str(COLLECTOR), "--output", str(out), "--nvidia-smi", str(smi),
                           "--journalctl", ""], env=dict(os.environ, MEGATRON_DS_LIBRARY=str(tmp_path / "empty")),
                          capture_output=True, text=True, timeout=60, check=True)
    lines = out.read_text().splitlines()
    assert 'megatron_gpu_collector_up{reason="library_missing",source=""} 0' in lines
    assert "megatron_gpu_count 0" in lines
    assert "library is not importable" in done.stderr


def _tasks(name):
    return yaml.safe_load((ROOT / "roles" / "monitoring" / "tasks" / name).read_text())


def test_the_role_installs_the_library_before_the_collector():
    tasks = _tasks("gpu_nvidia_smi.yml")
    library = next(i for i, t in enumerate(tasks) if (t.get("ansible.builtin.include_role") or {}).get("tasks_from") == "library")
    collector = next(i for i, t in enumerate(tasks)
                     if (t.get("ansible.builtin.copy") or {}).get("src") == "megatron_gpu_metrics.py")
    assert library < collector
    assert tasks[library]["ansible.builtin.include_role"] == {
        "name": "megatron_ds.cluster.os_base", "tasks_from": "library", "public": True}
    unit = (ROOT / "roles" / "monitoring" / "templates" / "megatron-gpu-metrics.service.j2").read_text()
    assert "Environment=MEGATRON_DS_LIBRARY={{ os_base_library_dir }}" in unit.splitlines()
