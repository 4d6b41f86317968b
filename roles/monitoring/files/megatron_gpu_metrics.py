# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU metrics for node_exporter's textfile collector, read from nvidia-smi.

Run by a systemd timer (monitoring role):

    python3 megatron_gpu_metrics.py --output /var/lib/prometheus/node-exporter/megatron_gpu.prom

It asks ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits``. Drivers that
reject a field name (older ones do not know every field below) make it fall back to
``nvidia-smi -q -x``, which every driver supports. Xid events come from the kernel log. Where
there is no nvidia-smi, or it fails, the file still says so: ``megatron_gpu_collector_up 0``
with a ``reason`` label, so "no GPU metrics" is an answer and not a silence.

Standard library only; Python 3.6+ (it runs on every node, with the system interpreter).
"""
import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

# nvidia-smi field -> (metric key, multiplier). Keys without a multiplier are labels.
QUERY_FIELDS = (
    ("index", "index", None),
    ("uuid", "uuid", None),
    ("name", "name", None),
    ("pci.bus_id", "pci_bus_id", None),
    ("utilization.gpu", "utilization_percent", 1.0),
    ("utilization.memory", "memory_utilization_percent", 1.0),
    ("memory.used", "memory_used_bytes", 1024.0 * 1024.0),
    ("memory.total", "memory_total_bytes", 1024.0 * 1024.0),
    ("power.draw", "power_watts", 1.0),
    ("power.limit", "power_limit_watts", 1.0),
    ("temperature.gpu", "temperature_celsius", 1.0),
    ("temperature.memory", "memory_temperature_celsius", 1.0),
    ("ecc.errors.corrected.volatile.total", "ecc_corrected_volatile", 1.0),
    ("ecc.errors.uncorrected.volatile.total", "ecc_uncorrected_volatile", 1.0),
    ("ecc.errors.corrected.aggregate.total", "ecc_corrected_aggregate", 1.0),
    ("ecc.errors.uncorrected.aggregate.total", "ecc_uncorrected_aggregate", 1.0),
    ("retired_pages.sbe", "retired_pages_single_bit", 1.0),
    ("retired_pages.dbe", "retired_pages_double_bit", 1.0),
    ("retired_pages.pending", "retired_pages_pending", 1.0),
)
LABEL_KEYS = ("index", "uuid", "name", "pci_bus_id")

# metric key -> (Prometheus name, type, help)
METRICS = (
    ("utilization_percent", "megatron_gpu_utilization_percent", "gauge",
     "GPU utilization (percent of time a kernel ran)."),
    ("memory_utilization_percent", "megatron_gpu_memory_utilization_percent", "gauge",
     "Memory controller utilization (percent)."),
    ("memory_used_bytes", "megatron_gpu_memory_used_bytes", "gauge", "Framebuffer memory used."),
    ("memory_total_bytes", "megatron_gpu_memory_total_bytes", "gauge", "Framebuffer memory total."),
    ("power_watts", "megatron_gpu_power_watts", "gauge", "Power draw."),
    ("power_limit_watts", "megatron_gpu_power_limit_watts", "gauge", "Enforced power limit."),
    ("temperature_celsius", "megatron_gpu_temperature_celsius", "gauge", "GPU core temperature."),
    ("memory_temperature_celsius", "megatron_gpu_memory_temperature_celsius", "gauge",
     "HBM temperature."),
    ("ecc_corrected_volatile", "megatron_gpu_ecc_corrected_volatile", "gauge",
     "Corrected ECC errors since the driver loaded."),
    ("ecc_uncorrected_volatile", "megatron_gpu_ecc_uncorrected_volatile", "gauge",
     "Uncorrected ECC errors since the driver loaded."),
    ("ecc_corrected_aggregate", "megatron_gpu_ecc_corrected_aggregate", "gauge",
     "Corrected ECC errors over the GPU's life."),
    ("ecc_uncorrected_aggregate", "megatron_gpu_ecc_uncorrected_aggregate", "gauge",
     "Uncorrected ECC errors over the GPU's life."),
    ("retired_pages_single_bit", "megatron_gpu_retired_pages_single_bit", "gauge",
     "Pages retired for multiple single-bit errors (pre-Ampere GPUs)."),
    ("retired_pages_double_bit", "megatron_gpu_retired_pages_double_bit", "gauge",
     "Pages retired for double-bit errors (pre-Ampere GPUs)."),
    ("retired_pages_pending", "megatron_gpu_retired_pages_pending", "gauge",
     "1 when a page retirement waits for a driver reload."),
    ("remapped_rows_correctable", "megatron_gpu_remapped_rows_correctable", "gauge",
     "Rows remapped for correctable errors (Ampere and later)."),
    ("remapped_rows_uncorrectable", "megatron_gpu_remapped_rows_uncorrectable", "gauge",
     "Rows remapped for uncorrectable errors (Ampere and later)."),
    ("remapped_rows_pending", "megatron_gpu_remapped_rows_pending", "gauge",
     "1 when a row remapping waits for a GPU reset."),
    ("remapped_rows_failure", "megatron_gpu_remapped_rows_failure", "gauge",
     "1 when row remapping failed (the GPU needs service)."),
)

NOT_AVAILABLE = ("", "n/a", "[n/a]", "[not supported]", "not supported", "[unknown error]",
                 "unknown error", "[insufficient permissions]", "none")
_UNIT_RE = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*(?:%|MiB|W|C|us|bank\(s\))?\s*$")
_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+)")


def parse_value(text):
    """One nvidia-smi value as a float, or None when the GPU does not report it.

    Accepts both ``nounits`` values ("143771") and values with units ("143771 MiB", "0 %"),
    and Yes/No/Enabled/Disabled flags as 1/0.
    """
    if text is None:
        return None
    value = text.strip()
    if value.lower() in NOT_AVAILABLE:
        return None
    if value.lower() in ("yes", "enabled", "active"):
        return 1.0
    if value.lower() in ("no", "disabled", "not active"):
        return 0.0
    match = _UNIT_RE.match(value)
    if not match:
        return None
    return float(match.group(1))


def _csv_rows(text):
    return [[cell.strip() for cell in line.split(",")] for line in text.splitlines() if line.strip()]


def parse_query_csv(text, fields=None):
    """GPUs from ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``.

    With a header line (``memory.total [MiB]``) the columns are read from it; without one,
    ``fields`` (nvidia-smi field names in query order, default QUERY_FIELDS) names them.
    Returns one dict per GPU: label keys as strings, metric keys as floats (None: not reported).
    """
    rows = _csv_rows(text)
    if not rows:
        return []
    if fields is None:
        fields = [field for field, _key, _mult in QUERY_FIELDS]
    if "index" in [cell.split(" ")[0] for cell in rows[0]] and not rows[0][0].isdigit():
        fields = [cell.split(" [")[0].strip() for cell in rows[0]]
        rows = rows[1:]
    by_field = dict((field, (key, mult)) for field, key, mult in QUERY_FIELDS)
    gpus = []
    for row in rows:
        if len(row) != len(fields):
            raise ValueError(
                "nvidia-smi returned %d columns, expected %d (%s): %r"
                % (len(row), len(fields), ",".join(fields), ",".join(row)))
        gpu = {}
        for field, cell in zip(fields, row):
            if field not in by_field:
                continue
            key, mult = by_field[field]
            if mult is None:
                gpu[key] = cell
            else:
                value = parse_value(cell)
                gpu[key] = None if value is None else value * mult
        gpus.append(gpu)
    return gpus


def _xml_value(gpu, path, mult=1.0):
    node = gpu.find(path)
    if node is None:
        return None
    value = parse_value(node.text)
    return None if value is None else value * mult


def parse_query_xml(text):
    """GPUs from ``nvidia-smi -q -x``, with the same keys as parse_query_csv (plus remapped rows)."""
    root = ET.fromstring(text)
    gpus = []
    mib = 1024.0 * 1024.0
    for index, gpu in enumerate(root.findall("gpu")):
        power = _xml_value(gpu, "gpu_power_readings/instant_power_draw")
        if power is None:
            power = _xml_value(gpu, "gpu_power_readings/power_draw")
        if power is None:  # drivers before the gpu_power_readings split
            power = _xml_value(gpu, "power_readings/power_draw")
        limit = _xml_value(gpu, "gpu_power_readings/current_power_limit")
        if limit is None:
            limit = _xml_value(gpu, "power_readings/power_limit")
        gpus.append({
            # The XML has no index; its order is nvidia-smi's index order.
            "index": str(index),
            "uuid": (gpu.findtext("uuid") or "").strip(),
            "name": (gpu.findtext("product_name") or "").strip(),
            "pci_bus_id": gpu.get("id", ""),
            "utilization_percent": _xml_value(gpu, "utilization/gpu_util"),
            "memory_utilization_percent": _xml_value(gpu, "utilization/memory_util"),
            "memory_used_bytes": _xml_value(gpu, "fb_memory_usage/used", mib),
            "memory_total_bytes": _xml_value(gpu, "fb_memory_usage/total", mib),
            "power_watts": power,
            "power_limit_watts": limit,
            "temperature_celsius": _xml_value(gpu, "temperature/gpu_temp"),
            "memory_temperature_celsius": _xml_value(gpu, "temperature/memory_temp"),
            "ecc_corrected_volatile": _ecc_sum(gpu, "volatile", "correctable"),
            "ecc_uncorrected_volatile": _ecc_sum(gpu, "volatile", "uncorrectable"),
            "ecc_corrected_aggregate": _ecc_sum(gpu, "aggregate", "correctable"),
            "ecc_uncorrected_aggregate": _ecc_sum(gpu, "aggregate", "uncorrectable"),
            "retired_pages_single_bit": _xml_value(
                gpu, "retired_pages/multiple_single_bit_retirement/retired_count"),
            "retired_pages_double_bit": _xml_value(
                gpu, "retired_pages/double_bit_retirement/retired_count"),
            "retired_pages_pending": _xml_value(gpu, "retired_pages/pending_retirement"),
            "remapped_rows_correctable": _xml_value(gpu, "remapped_rows/remapped_row_corr"),
            "remapped_rows_uncorrectable": _xml_value(gpu, "remapped_rows/remapped_row_unc"),
            "remapped_rows_pending": _xml_value(gpu, "remapped_rows/remapped_row_pending"),
            "remapped_rows_failure": _xml_value(gpu, "remapped_rows/remapped_row_failure"),
        })
    return gpus


def _ecc_sum(gpu, scope, kind):
    """Sum the ECC counters of one scope: Hopper splits them (sram_correctable, dram_...),
    older GPUs report total/single_bit/double_bit blocks."""
    block = gpu.find("ecc_errors/" + scope)
    if block is None:
        return None
    total = None
    if kind == "correctable":
        old = block.find("single_bit/total")
    else:
        old = block.find("double_bit/total")
    if old is not None:
        return parse_value(old.text)
    for child in block:
        tag = child.tag
        wanted = tag.endswith("_correctable") if kind == "correctable" else "_uncorrectable" in tag
        if not wanted:
            continue
        value = parse_value(child.text)
        if value is not None:
            total = (total or 0.0) + value
    return total


def parse_xid_events(text):
    """Count Xid events in kernel log text: {(pci_bus_id, xid): count}.

    The driver writes ``NVRM: Xid (PCI:0000:3b:00): 79, pid=..., GPU has fallen off the bus.``
    """
    counts = {}
    for match in _XID_RE.finditer(text):
        key = (match.group(1), match.group(2))
        counts[key] = counts.get(key, 0) + 1
    return counts


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(pairs):
    return "{" + ",".join('%s="%s"' % (key, _escape(value)) for key, value in pairs) + "}"


def _number(value):
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def render(gpus, up, reason="", source="", xid_events=None):
    """Prometheus text exposition of the collector's state and every GPU's metrics."""
    lines = [
        "# HELP megatron_gpu_collector_up 1 when nvidia-smi answered; 0 with a reason otherwise.",
        "# TYPE megatron_gpu_collector_up gauge",
        "megatron_gpu_collector_up%s %d" % (_labels([("reason", reason), ("source", source)]),
                                            1 if up else 0),
        "# HELP megatron_gpu_count GPUs nvidia-smi listed.",
        "# TYPE megatron_gpu_count gauge",
        "megatron_gpu_count %d" % len(gpus),
    ]
    if gpus:
        lines.append("# HELP megatron_gpu_info One series per GPU, its identity in the labels.")
        lines.append("# TYPE megatron_gpu_info gauge")
        for gpu in gpus:
            lines.append("megatron_gpu_info%s 1" % _labels([(k, gpu.get(k, "")) for k in LABEL_KEYS]))
    for key, name, kind, help_text in METRICS:
        samples = [(gpu, gpu.get(key)) for gpu in gpus if gpu.get(key) is not None]
        if not samples:
            continue
        lines.append("# HELP %s %s" % (name, help_text))
        lines.append("# TYPE %s %s" % (name, kind))
        for gpu, value in samples:
            labels = _labels([("gpu", gpu.get("index", "")), ("uuid", gpu.get("uuid", ""))])
            lines.append("%s%s %s" % (name, labels, _number(value)))
    if xid_events is not None:
        lines.append("# HELP megatron_gpu_xid_events Xid events in the kernel log since boot.")
        lines.append("# TYPE megatron_gpu_xid_events gauge")
        for (pci, xid), count in sorted(xid_events.items()):
            lines.append("megatron_gpu_xid_events%s %d" % (_labels([("pci_bus_id", pci), ("xid", xid)]),
                                                           count))
    return "\n".join(lines) + "\n"


def _run(argv, timeout):
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, timeout=timeout, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def locate(nvidia_smi):
    """The nvidia-smi executable to run (a name is looked up on PATH), or None."""
    path = shutil.which(nvidia_smi) if os.path.basename(nvidia_smi) == nvidia_smi else nvidia_smi
    return path if path and os.access(path, os.X_OK) else None


def collect(nvidia_smi, timeout, journalctl=None, run=_run):
    """(gpus, up, reason, source, xid_events) from the live host.

    ``run(argv, timeout) -> (returncode, stdout, stderr)`` runs a command (tests pass recorded
    answers); ``nvidia_smi`` is a path from locate(), or None when there is none.
    """
    if not nvidia_smi:
        return [], False, "nvidia_smi_missing", "", None
    fields = [field for field, _key, _mult in QUERY_FIELDS]
    try:
        code, out, err = run([nvidia_smi, "--query-gpu=" + ",".join(fields),
                              "--format=csv,noheader,nounits"], timeout)
        if code == 0:
            gpus, source = parse_query_csv(out, fields), "query_gpu"
        elif "not a valid field" in (out + err):
            code, out, err = run([nvidia_smi, "-q", "-x"], timeout)
            if code != 0:
                return [], False, "nvidia_smi_failed", "xml", None
            gpus, source = parse_query_xml(out), "xml"
        else:
            return [], False, "nvidia_smi_failed", "query_gpu", None
    except subprocess.TimeoutExpired:
        return [], False, "nvidia_smi_timeout", "", None
    except (OSError, ValueError, ET.ParseError):
        return [], False, "nvidia_smi_unparsable", "", None
    xid = None
    if journalctl:
        try:
            code, out, _err = run([journalctl, "-k", "-b", "--no-pager", "-o", "cat",
                                   "--grep", "NVRM: Xid"], timeout)
            # journalctl --grep exits 1 when nothing matched: zero events, not an error.
            xid = parse_xid_events(out) if code in (0, 1) else None
        except (OSError, subprocess.TimeoutExpired):
            xid = None
    return gpus, True, "", source, xid


def write_atomically(path, text):
    """node_exporter must never read a half-written file: write beside it, then rename."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, tmp = tempfile.mkstemp(prefix=".megatron_gpu.", dir=directory)
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
        os.chmod(tmp, 0o644)
        os.rename(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", required=True, help="the .prom file in the textfile directory")
    parser.add_argument("--nvidia-smi", default="nvidia-smi")
    parser.add_argument("--journalctl", default="journalctl",
                        help="read Xid events with it; empty: do not")
    parser.add_argument("--timeout", type=float, default=20.0)
    args = parser.parse_args(argv)
    journalctl = shutil.which(args.journalctl) if args.journalctl else None
    gpus, up, reason, source, xid = collect(locate(args.nvidia_smi), args.timeout, journalctl)
    write_atomically(args.output, render(gpus, up, reason, source, xid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
