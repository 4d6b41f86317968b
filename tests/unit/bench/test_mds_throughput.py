# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/gpu/mds_throughput.sh: its flag-summary line and its per-variant time limit, run with
bash on a stand-in train.sh (the script as a whole needs a GPU host)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "bench" / "gpu" / "mds_throughput.sh"
TEXT = SCRIPT.read_text()


def _line(marker: str) -> str:
    return next(line.strip() for line in TEXT.splitlines() if marker in line)


@pytest.mark.parametrize("train_sh, expected", [
    ("deepspeed pretrain_gpt.py --use-flash-attn --no-bias-gelu-fusion --micro-batch-size 4\n",
     "--no-bias-gelu-fusion --use-flash-attn"),
    ("deepspeed pretrain_gpt.py --micro-batch-size 4\n", ""),
])
def test_flag_summary_reads_the_train_script(tmp_path, train_sh, expected):
    """The line once ran `grep -E -- PATTERN -o FILE`, where -o after -- is a file name."""
    (tmp_path / "train.sh").write_text(train_sh)
    line = _line("--no-bias-gelu-fusion|--use-flash-attn")
    proc = subprocess.run(["bash", "-c", "work=%s; %s" % (tmp_path, line)], capture_output=True, text=True, check=False)
    assert proc.stderr == ""
    assert proc.stdout.strip() == expected


@pytest.mark.parametrize("env, iters, extra, expected", [
    ("", "10", "", "320"),
    ("", "50", "", "1120"),
    ("JOB_TIMEOUT_S=90", "50", "", "90"),
    ("", "10", "profile=3+timeout=600", "600"),
])
def test_time_limit_grows_with_the_iterations(env, iters, extra, expected):
    start = TEXT.index("  limit=${JOB_TIMEOUT_S")
    block = TEXT[start:TEXT.index("    esac", start)] + "    esac\n  done\n"
    # Only the limit's own lines: the other cases of the loop are stubbed out.
    block = re.sub(r"      profile=\*\).*\n", "      profile=*) : ;;\n", block)
    block = re.sub(r"      \*\) printf.*\n", "      *) : ;;\n", block)
    script = "%s iters=%s; extra='%s'\n%s\necho $limit" % (env and "export " + env + ";", iters, extra, block)
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == expected
