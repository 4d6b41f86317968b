# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DeepSpeed's own judgement of job files: its DeepSpeedConfig on each ds_config and its runner's
_parse_hostfile on each hostfile, in a child interpreter. Imported as
ansible_collections.megatron_ds.cluster.tests.support.deepspeed_judge.

DeepSpeed runs in a child interpreter: once ansible-core 2.19 is imported (other tests do), its
sys.intern patch makes `import torch` fail (torch._dynamo substitute_in_graph TypeError).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any, Dict, List

JUDGE = r"""
import json, os, sys
os.environ.setdefault("DS_ACCELERATOR", "cpu")
try:
    import deepspeed
    from deepspeed.runtime import config as dsc
    from deepspeed.launcher.runner import _parse_hostfile
except Exception as exc:
    print("JUDGE " + json.dumps({"missing": "%s: %s" % (type(exc).__name__, exc)}))
    sys.exit(0)
# DeepSpeedConfig asks torch.distributed for the rank first and, when it is not initialised,
# takes world size 1 and never asks the mpu; rank 0 makes it use the mpu's data-parallel size.
dsc.dist.get_rank = lambda *a, **k: 0
class Mpu:
    def __init__(self, dp):
        self.dp = dp
    def get_data_parallel_world_size(self):
        return self.dp
req = json.load(sys.stdin)
out = {"version": deepspeed.__version__, "configs": [], "hostfiles": []}
for item in req.get("configs", []):
    try:
        c = dsc.DeepSpeedConfig(item["config"], mpu=Mpu(item["dp"]))
        out["configs"].append({"ok": True, "world_size": c.world_size, "train_batch_size": c.train_batch_size,
                               "micro": c.train_micro_batch_size_per_gpu, "grad_acc": c.gradient_accumulation_steps,
                               "stage": int(c.zero_optimization_stage), "bf16": bool(c.bfloat16_config.enabled),
                               "fp16": bool(c.float16_config.enabled), "clip": c.gradient_clipping})
    except Exception as exc:
        out["configs"].append({"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)})
for text in req.get("hostfiles", []):
    try:
        out["hostfiles"].append({"ok": True, "pool": dict(_parse_hostfile(text.splitlines(keepends=True)))})
    except Exception as exc:
        out["hostfiles"].append({"ok": False, "error": "%s: %s" % (type(exc).__name__, exc)})
print("JUDGE " + json.dumps(out))
"""


def judge(configs: List[Dict[str, Any]], hostfiles: List[str]) -> Dict[str, Any]:
    """DeepSpeed's verdict on each input, in order.

    ``configs``: {"config": a ds_config dict, "dp": the data-parallel size}; ``hostfiles``: texts.
    Returns {"version", "configs": [{"ok", "world_size", "train_batch_size", "micro", "grad_acc",
    "stage", "bf16", "fp16", "clip"} or {"ok": False, "error"}], "hostfiles": [{"ok", "pool"} or
    {"ok": False, "error"}]}, or {"missing": why} where DeepSpeed does not import (the caller skips).
    """
    request = json.dumps({"configs": configs, "hostfiles": hostfiles})
    env = dict(os.environ, DS_ACCELERATOR="cpu")
    result = subprocess.run([sys.executable, "-c", JUDGE], input=request, capture_output=True, text=True,
                            env=env, timeout=300, check=False)
    lines = [line for line in result.stdout.splitlines() if line.startswith("JUDGE ")]
    assert lines, "the DeepSpeed judge printed nothing: %s" % result.stderr[-3000:]
    return json.loads(lines[-1][len("JUDGE "):])
