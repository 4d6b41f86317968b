# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU metrics for node_exporter's textfile collector, read from nvidia-smi.

Run by a systemd timer (monitoring role):

    python3 megatron_gpu_metrics.py --output /var/lib/prometheus/node-exporter/megatron_gpu.prom

It asks ``nvidia-smi --query-gpu=<QUERY_FIELDS> --format=csv,noheader,nounits``. Drivers that
reject a field name (older ones do not know every field below) make it fall back to
``nvidia-smi -q -x``, which every driver supports. Both answers are read by the collection's
nvidia-smi reader (``_facts/smi.py`` in os_base's library); this file renders them for
Prometheus. Xid events come from the kernel log. Where there is no nvidia-smi, or it fails, or
the library is missing, the file still says so: ``megatron_gpu_collector_up 0`` with a
``reason`` label, so "no GPU metrics" is an answer and not a silence.

Standard library only; Python 3.8+ (it runs on every node, with the system interpreter).
"""
import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The collection's nvidia-smi reader (plugins/module_utils/_facts/smi.py: its field table and
# the CSV and XML parsers, the same reader as gpu_stack_facts), from os_base's library
# (tasks_from: library) on the node; the service names the role's os_base_library_dir in
# MEGATRON_DS_LIBRARY. Without the library the collector still writes its file, saying so.
sys.path.insert(0, os.environ.get("MEGATRON_DS_LIBRARY", "/usr/local/lib/megatron-ds"))
try:
    from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import smi as _smi  # noqa: E402  pylint: disable=wrong-import-position
    LIBRARY_ERROR = ""
except ImportError as exc:
    _smi = None
    LIBRARY_ERROR = str(exc)

LABEL_KEYS = ("index", "uuid", "name", "pci_bus_id")

# The reader's key -> (Prometheus name, type, help).
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

# The --query-gpu fields asked for, in query order: every label, then every metric that
# --query-gpu has (remapped rows are only in the XML).
QUERY_FIELDS = tuple(_smi.query_fields(
    LABEL_KEYS + tuple(key for key, _name, _kind, _help in METRICS if _smi.FIELD[key].csv))) if _smi else ()

_XID_RE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+)")


def parse_value(text):
    """One nvidia-smi value as a float, or None when the GPU does not report it (the reader's
    smi.parse_number: with or without units, Yes/No and Enabled/Disabled as 1/0)."""
    return _smi.parse_number(text)


def _gpu(record):
    """The reader's record of one GPU as the collector keeps it: the labels as strings."""
    gpu = dict(record)
    for key in LABEL_KEYS:
        if key in gpu:
            gpu[key] = "" if gpu[key] is None else str(gpu[key])
    return gpu


def parse_query_csv(text, fields=None):
    """GPUs from ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``.

    With a header line (``memory.total [MiB]``) the columns are read from it; without one,
    ``fields`` (nvidia-smi field names in query order, default QUERY_FIELDS) names them.
    Returns one dict per GPU: label keys as strings, metric keys as floats (None: not reported).
    """
    return [_gpu(record) for record in _smi.parse_csv(text, QUERY_FIELDS if fields is None else fields)["gpus"]]


def parse_query_xml(text):
    """GPUs from ``nvidia-smi -q -x``, with the same keys as parse_query_csv (plus remapped rows)."""
    return [_gpu(record) for record in _smi.parse_xml(text)["gpus"]]


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
    if _smi is None:
        return [], False, "library_missing", "", None
    try:
        code, out, err = run([nvidia_smi, "--query-gpu=" + ",".join(QUERY_FIELDS),
                              "--format=csv,noheader,nounits"], timeout)
        if code == 0:
            gpus, source = parse_query_csv(out, QUERY_FIELDS), "query_gpu"
        elif "not a valid field" in (out + err):
            code, out, err = run([nvidia_smi, "-q", "-x"], timeout)
            if code != 0:
                return [], False, "nvidia_smi_failed", "xml", None
            gpus, source = parse_query_xml(out), "xml"
        else:
            return [], False, "nvidia_smi_failed", "query_gpu", None
    except subprocess.TimeoutExpired:
        return [], False, "nvidia_smi_timeout", "", None
    except (OSError, ValueError):
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
    if reason == "library_missing":
        sys.stderr.write("megatron_gpu_metrics: the collection's library is not importable (%s); "
                         "run the monitoring role, which installs it (os_base tasks_from: library)\n"
                         % LIBRARY_ERROR)
    write_atomically(args.output, render(gpus, up, reason, source, xid))
    return 0


if __name__ == "__main__":
    sys.exit(main())
