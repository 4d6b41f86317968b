# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU faults in the culprit decision: an Xid in the kernel log, uncorrectable ECC, a pending or
failed row remapping, each put in a tier the supervisor acts on.

Tiers, worst first:
  exclude  the node cannot train until a person acts (reboot, RMA): a node fault
  reset    the GPU must be reset (nvidia-smi -r) before it trains again, then the job retries
  retry    the application should restart; the same nodes may retry
  record   nothing to do now; the evidence goes into the incident

The Xid rows are NVIDIA's Xid catalogue for Ampere and later ("Analyzing Xid Errors with the Xid
Catalog", https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, its Resolution
Bucket (Immediate Action) column). The mnemonics and buckets were cross-checked against
NVIDIA/NVSentinel's distros/kubernetes/nvsentinel/charts/gpu-health-monitor/xiderrorsmapping.csv at
6f8b0fcfa8e502bdda78fabf96facef729a9285b (line = code), which agrees on every code below but 61
(UNEXPECTED_ERR_REPORT_ISSUE, its own value for unused codes) and 154 (free text); for those two
the catalogue's value is kept (leptonai/gpud components/accelerator/nvidia/xid/catalog_generated.go
at 4a8de33a, generated from the catalogue's spreadsheet).

The counters are nvidia-smi's (-q -x, read by the facts' _facts.smi): NVIDIA's A100 memory error
management guide (docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt) says a pending row remapping
takes effect at the next GPU reset, and a remapping failure means the GPU has run out of spare
rows. The kernel log line is the driver's (NVIDIA/open-gpu-kernel-modules
src/nvidia/src/kernel/gpu/rc/kernel_rc.c:388-416 at df1c9a3d, 595.45.04):
``NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python, GPU has fallen off the bus.``, with
``, pid=..., name=...`` only when the process is known and `` GPU-I:nn GPU-CI:nn`` inside the
brackets on MIG.

No Ansible imports: besides the supervisor, ``python3 -m`` runs it on a node from the library
os_base installs (PYTHONPATH=/usr/local/lib/megatron-ds) as the culprit probe: nvidia-smi read by
the facts' parser, and the kernel log, which may be closed to a non-root user (kernel.dmesg_restrict)
and then says so.
"""
import json
import re
import subprocess
import sys

EXCLUDE = "exclude"
RESET = "reset"
RETRY = "retry"
RECORD = "record"
NONE = "none"
TIERS = (EXCLUDE, RESET, RETRY, RECORD, NONE)  # worst first

# Resolution Bucket (Immediate Action) -> tier.
BUCKET_TIERS = {
    "RESTART_BM": EXCLUDE,          # "Restart bare metal": the node must be rebooted
    "RESET_GPU": RESET,
    "WORKFLOW_XID_48": RESET,       # solo: RESET_GPU; with Xid 63/64: drain and reset (judge())
    "RESTART_APP": RETRY,
    "WORKFLOW_NVLINK_ERR": RETRY,   # needs its registers decoded; a repeat blames the node (node_fault_after)
    "WORKFLOW_NVLINK5_ERR": RETRY,
    "IGNORE": RECORD,
    "WORKFLOW_XID_45": RECORD,      # preemptive cleanup: follow the other Xid
    "XID_154": RECORD,              # recovery action changed: follow the other Xid
    "CONTACT_SUPPORT": RECORD,
}

# code: (mnemonic, immediate bucket). The codes a training cluster of A100/H100/H200 meets, and the
# NVLink5 ones (B100/GB200).
XID_CATALOGUE = {
    8: ("ROBUST_CHANNEL_FIFO_ERROR_IDLE_TIMEOUT", "RESTART_APP"),
    13: ("ROBUST_CHANNEL_GR_EXCEPTION", "RESTART_APP"),
    31: ("ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP"),
    32: ("ROBUST_CHANNEL_PBDMA_ERROR", "RESTART_APP"),
    43: ("ROBUST_CHANNEL_RESETCHANNEL_VERIF_ERROR", "IGNORE"),
    45: ("ROBUST_CHANNEL_PREEMPTIVE_REMOVAL", "WORKFLOW_XID_45"),
    48: ("ROBUST_CHANNEL_GPU_ECC_DBE", "WORKFLOW_XID_48"),
    61: ("PMU_BREAKPOINT", "CONTACT_SUPPORT"),
    62: ("PMU_HALT_ERROR", "RESET_GPU"),
    63: ("INFOROM_DRAM_RETIREMENT_EVENT", "IGNORE"),
    64: ("INFOROM_DRAM_RETIREMENT_FAILURE", "RESET_GPU"),
    68: ("ROBUST_CHANNEL_NVDEC0_ERROR", "RESTART_APP"),
    69: ("ROBUST_CHANNEL_GR_CLASS_ERROR", "RESTART_APP"),
    74: ("NVLINK_ERROR", "WORKFLOW_NVLINK_ERR"),
    79: ("ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM"),
    92: ("EXCESSIVE_SBE_INTERRUPTS", "IGNORE"),
    94: ("ROBUST_CHANNEL_CONTAINED_ERROR", "RESTART_APP"),
    95: ("ROBUST_CHANNEL_UNCONTAINED_ERROR", "RESET_GPU"),
    109: ("ROBUST_CHANNEL_CTXSW_TIMEOUT_ERROR", "RESET_GPU"),
    119: ("GSP_RPC_TIMEOUT", "RESET_GPU"),
    120: ("GSP_ERROR", "RESET_GPU"),
    121: ("C2C_ERROR", "IGNORE"),
    136: ("ALI_TRAINING_FAIL", "RESET_GPU"),
    140: ("UNRECOVERABLE_ECC_ERROR_ESCAPE", "RESET_GPU"),
    143: ("GPU_INIT_ERROR", "RESET_GPU"),
    144: ("NVLINK_SAW_ERROR", "WORKFLOW_NVLINK5_ERR"),
    145: ("NVLINK_RLW_ERROR", "WORKFLOW_NVLINK5_ERR"),
    146: ("NVLINK_TLW_ERROR", "WORKFLOW_NVLINK5_ERR"),
    147: ("NVLINK_TREX_ERROR", "WORKFLOW_NVLINK5_ERR"),
    148: ("NVLINK_NVLPW_CTRL_ERROR", "WORKFLOW_NVLINK5_ERR"),
    149: ("NVLINK_NETIR_ERROR", "WORKFLOW_NVLINK5_ERR"),
    150: ("NVLINK_MSE_ERROR", "WORKFLOW_NVLINK5_ERR"),
    154: ("GPU_RECOVERY_ACTION_CHANGED", "XID_154"),
}

XID_RE = re.compile(
    r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9A-Fa-f]{4}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}(?:\.[0-9A-Fa-f])?)"
    r"(?: GPU-I:(?P<gi>\d+))?(?: GPU-CI:(?P<ci>\d+))?\): (?P<xid>\d+), (?P<rest>.*)$")
_PROCESS_RE = re.compile(r"^pid=(?P<pid>[^,]*), name=(?P<name>[^,]*), (?P<message>.*)$")


def parse_xid_lines(text):
    """Xid events from kernel log text: [{pci, xid, pid, process, message, gpu_instance}]."""
    events = []
    for line in (text or "").splitlines():
        match = XID_RE.search(line)
        if not match:
            continue
        rest = match.group("rest").strip()
        event = {"pci": match.group("pci").lower(), "xid": int(match.group("xid")), "pid": None, "process": None,
                 "message": rest, "gpu_instance": int(match.group("gi")) if match.group("gi") else None}
        process = _PROCESS_RE.match(rest)
        if process:
            event.update(pid=process.group("pid"), process=process.group("name"), message=process.group("message"))
        events.append(event)
    return events


def xid_tier(code, codes_seen=()):
    """The tier of Xid ``code`` (codes_seen: the other Xids of the same GPU): an unknown code is
    recorded; Xid 48 with 63 or 64 beside it drains the node (the catalogue's WORKFLOW_XID_48)."""
    row = XID_CATALOGUE.get(int(code))
    if row is None:
        return RECORD
    if row[1] == "WORKFLOW_XID_48" and {63, 64} & set(codes_seen):
        return EXCLUDE
    return BUCKET_TIERS.get(row[1], RECORD)


def _count(value):
    """A counter from the facts (an int, a float, 'Yes'/'No', 'N/A' or None) as a number."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    text = str(value or "").strip().lower()
    if text in ("yes", "true"):
        return 1
    try:
        return float(text)
    except ValueError:
        return 0


# (facts key, tier, what it means and what to do)
COUNTER_RULES = (
    ("remapped_rows_failure", EXCLUDE, "row remapping failed: the GPU has no spare rows left; drain the node and "
                                       "have the GPU replaced"),
    ("remapped_rows_pending", RESET, "a row remapping is pending: it takes effect at the next GPU reset "
                                     "(nvidia-smi -r, or a reboot)"),
    ("retired_pages_pending", RESET, "a page retirement is pending: it takes effect at the next GPU reset or driver reload"),
    ("ecc_uncorrected_volatile", RESET, "uncorrectable ECC errors since the last reset: reset the GPU before it trains again"),
)


def _worst(tiers):
    seen = set(tiers)
    ranked = [t for t in TIERS if t in seen]
    return ranked[0] if ranked else NONE


def judge(gpus, xid_events=(), pci_of_index=None):
    """The tier of one node from its GPUs (the rows of the facts' nvidia-smi reader, _facts.smi.parse_xml,
    which carry the ECC, retirement and remapping counters) and its kernel log's Xid events.
    Returns {tier, reasons: [{gpu, what, tier, found}]}; ``pci_of_index`` maps a GPU's index to its
    PCI bus id so that an Xid names its GPU."""
    reasons = []
    for gpu in gpus or []:
        name = "GPU %s" % gpu.get("index", "?")
        for key, tier, text in COUNTER_RULES:
            count = _count(gpu.get(key))
            if count:
                reasons.append({"gpu": name, "what": text, "tier": tier, "found": "%s %s" % (key, gpu.get(key))})
    by_pci = {}
    for event in xid_events or []:
        by_pci.setdefault(event.get("pci"), []).append(int(event["xid"]))
    names = {str(v).lower(): "GPU %s" % k for k, v in (pci_of_index or {}).items()}
    for pci, codes in sorted(by_pci.items(), key=lambda kv: str(kv[0])):
        for code in sorted(set(codes)):
            row = XID_CATALOGUE.get(code)
            tier = xid_tier(code, codes)
            reasons.append({
                "gpu": names.get(_short_pci(pci), "PCI %s" % pci),
                "what": "Xid %d %s (%s)" % (code, row[0] if row else "(not in the catalogue)", row[1] if row else "record"),
                "tier": tier, "found": "%d time(s) in the kernel log" % codes.count(code)})
    return {"tier": _worst(r["tier"] for r in reasons), "reasons": reasons}


def _short_pci(pci):
    """nvidia-smi's 00000000:18:00.0 and the kernel log's 0000:18:00 as one key: 18:00."""
    text = str(pci or "").lower()
    parts = text.split(":")
    return ":".join(parts[-2:]).split(".", maxsplit=1)[0] if len(parts) >= 2 else text


def summary(judged):
    """One line for an incident's evidence."""
    worst = [r for r in judged["reasons"] if r["tier"] == judged["tier"]]
    return "%s: %s" % (judged["tier"], "; ".join("%s %s (%s)" % (r["gpu"], r["what"], r["found"]) for r in worst))


# ------------------------------------------------------------------------------------------------
# The probe on a node: python3 -m ...module_utils._heal.gpu_faults
# ------------------------------------------------------------------------------------------------
def probe(run=subprocess.run):
    """nvidia-smi -q -x and the kernel log (dmesg, else journalctl -k) of this node, judged."""
    from .._facts import smi as _smi  # the facts' own reader of the XML, every counter of it

    out = {"tier": NONE, "reasons": [], "errors": []}
    gpus = []
    try:
        smi = run(["nvidia-smi", "-q", "-x"], capture_output=True, text=True, timeout=60, check=False)
        if smi.returncode == 0:
            gpus = _smi.parse_xml(smi.stdout)["gpus"]
        else:
            out["errors"].append("nvidia-smi -q -x: rc %d: %s" % (smi.returncode, (smi.stderr or "").strip()[-200:]))
    except (OSError, subprocess.SubprocessError, ValueError) as exc:
        out["errors"].append("nvidia-smi -q -x: %s" % exc)
    events = None
    for argv in (["dmesg"], ["journalctl", "-k", "-b", "-o", "cat", "--no-pager"]):
        try:
            proc = run(argv, capture_output=True, text=True, timeout=60, check=False)
        except (OSError, subprocess.SubprocessError) as exc:
            out["errors"].append("%s: %s" % (argv[0], exc))
            continue
        if proc.returncode == 0:
            events = parse_xid_lines(proc.stdout)
            break
        out["errors"].append("%s: rc %d: %s" % (argv[0], proc.returncode, (proc.stderr or "").strip()[-200:]))
    judged = judge(gpus, events or [], {g.get("index"): _short_pci(g.get("pci_bus_id")) for g in gpus})
    out.update(judged, gpus=len(gpus), kernel_log=events is not None)
    return out


def main():
    sys.stdout.write(json.dumps(probe(), sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
