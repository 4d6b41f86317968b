# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""_heal.gpu_faults: Xid lines, NVIDIA's catalogue tiers, and a node's verdict from the facts' GPU
rows (the recorded H200 host's nvidia-smi -q -x, with counters changed where a row needs them)."""
from __future__ import annotations

import pathlib
import subprocess

import pytest

from ansible_collections.megatron_ds.cluster.plugins.module_utils._facts import smi
from ansible_collections.megatron_ds.cluster.plugins.module_utils._heal import gpu_faults as gf

XML = (pathlib.Path(__file__).resolve().parents[4] / "fixtures" / "gpu-host-h200x2" / "nvidia-smi-q.xml").read_text()


def _xml(first_gpu_edits=()):
    """The recorded XML with (old, new) replacements inside the first <gpu> block only."""
    head, first, rest = XML.partition('<gpu id="00000000:00:06.0">')
    block, end, tail = rest.partition("</gpu>")
    for old, new in first_gpu_edits:
        assert old in block, old
        block = block.replace(old, new, 1)
    return head + first + block + end + tail


@pytest.mark.parametrize("line, event", [
    ("[ 1936.5] NVRM: Xid (PCI:0000:18:00): 79, pid=1234, name=python3, GPU has fallen off the bus.",
     {"pci": "0000:18:00", "xid": 79, "pid": "1234", "process": "python3", "message": "GPU has fallen off the bus.",
      "gpu_instance": None}),
    ("kernel: NVRM: Xid (PCI:0000:3b:00): 48, An uncorrectable double bit error (DBE) has been detected on GPU",
     {"pci": "0000:3b:00", "xid": 48, "pid": None, "process": None,
      "message": "An uncorrectable double bit error (DBE) has been detected on GPU", "gpu_instance": None}),
    ("NVRM: Xid (PCI:0000:07:00 GPU-I:01 GPU-CI:00): 13, pid=9, name=a.out, Graphics Exception",
     {"pci": "0000:07:00", "xid": 13, "pid": "9", "process": "a.out", "message": "Graphics Exception", "gpu_instance": 1}),
    ("NVRM: GPU at PCI:0000:18:00: GPU-0b11d014", None),
    ("", None),
])
def test_parse_xid_lines(line, event):
    assert gf.parse_xid_lines(line) == ([event] if event else [])


@pytest.mark.parametrize("code, others, tier", [
    (79, (), gf.EXCLUDE),            # RESTART_BM
    (48, (), gf.RESET),              # WORKFLOW_XID_48, solo: RESET_GPU
    (48, (63,), gf.EXCLUDE),         # with 63/64: drain and reset
    (95, (), gf.RESET),              # uncontained memory error
    (119, (), gf.RESET),             # GSP RPC timeout
    (13, (), gf.RETRY),              # RESTART_APP
    (94, (), gf.RETRY),              # contained memory error
    (74, (), gf.RETRY),              # NVLink: registers not decoded, a repeat blames the node
    (63, (), gf.RECORD),             # IGNORE
    (45, (), gf.RECORD),             # follow the other Xid
    (999, (), gf.RECORD),            # not in the catalogue
])
def test_xid_tier(code, others, tier):
    assert gf.xid_tier(code, (code,) + others) == tier


def test_every_catalogue_bucket_has_a_tier():
    assert {bucket for _mnemonic, bucket in gf.XID_CATALOGUE.values()} <= set(gf.BUCKET_TIERS)


@pytest.mark.parametrize("edits, events, tier, words", [
    ((), [], gf.NONE, ""),
    ((("<remapped_row_failure>No</remapped_row_failure>", "<remapped_row_failure>Yes</remapped_row_failure>"),), [],
     gf.EXCLUDE, "no spare rows left"),
    ((("<remapped_row_pending>No</remapped_row_pending>", "<remapped_row_pending>Yes</remapped_row_pending>"),), [],
     gf.RESET, "takes effect at the next GPU reset"),
    ((("<dram_uncorrectable>0</dram_uncorrectable>", "<dram_uncorrectable>2</dram_uncorrectable>"),), [],
     gf.RESET, "uncorrectable ECC"),
    ((), [{"pci": "0000:00:06", "xid": 79}], gf.EXCLUDE, "GPU 0 Xid 79 ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS"),
    ((), [{"pci": "0000:00:07", "xid": 13}, {"pci": "0000:00:07", "xid": 13}], gf.RETRY, "GPU 1 Xid 13"),
    ((("<remapped_row_pending>No</remapped_row_pending>", "<remapped_row_pending>Yes</remapped_row_pending>"),),
     [{"pci": "0000:00:07", "xid": 63}], gf.RESET, "GPU 0"),  # the worst tier wins; 63 alone is recorded
])
def test_judge_on_the_recorded_host(edits, events, tier, words):
    gpus = smi.parse_xml(_xml(edits))["gpus"]
    pci = {g["index"]: gf._short_pci(g["pci_bus_id"]) for g in gpus}
    got = gf.judge(gpus, events, pci)
    assert got["tier"] == tier, got
    assert words in gf.summary(got)


class FakeRun:
    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def __call__(self, argv, **kwargs):
        self.calls.append(argv[0])
        rc, out, err = self.answers[argv[0]]
        return subprocess.CompletedProcess(argv, rc, out, err)


@pytest.mark.parametrize("answers, tier, kernel_log, error", [
    ({"nvidia-smi": (0, XML, ""), "dmesg": (0, "NVRM: Xid (PCI:0000:00:06): 79, GPU has fallen off the bus.\n", "")},
     gf.EXCLUDE, True, None),
    # kernel.dmesg_restrict for a non-root user: journalctl -k next
    ({"nvidia-smi": (0, XML, ""), "dmesg": (1, "", "dmesg: read kernel buffer failed: Operation not permitted"),
      "journalctl": (0, "NVRM: Xid (PCI:0000:00:07): 13, Graphics Exception\n", "")}, gf.RETRY, True, "dmesg: rc 1"),
    ({"nvidia-smi": (0, XML, ""), "dmesg": (1, "", "denied"), "journalctl": (1, "", "no journal")},
     gf.NONE, False, "journalctl: rc 1"),
    ({"nvidia-smi": (9, "", "NVIDIA-SMI has failed"), "dmesg": (0, "", "")}, gf.NONE, True, "nvidia-smi -q -x: rc 9"),
])
def test_probe(answers, tier, kernel_log, error):
    got = gf.probe(run=FakeRun(answers))
    assert (got["tier"], got["kernel_log"]) == (tier, kernel_log)
    if error:
        assert any(error in e for e in got["errors"]), got["errors"]
    else:
        assert got["errors"] == []
