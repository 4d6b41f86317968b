# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark: the loss after each of the first steps at ZeRO-0, 1 and 2 with the same model,
seed, batch and data, side by side, under the DeepSpeed of the venv that runs it.

A half-precision job at ZeRO-0 gets DeepSpeed's FP16_Optimizer (fp16, and bf16 from DeepSpeed
0.17.6 on: DDP_BFLOAT16). Its constructor takes one optimizer step with zero gradients
(``deepspeed/runtime/fp16/fused_optimizer.py`` ``initialize_optimizer_states``, unchanged from
v0.9.2 to v0.19.5), so Adam starts the job at step 1 with zero moments: the first real update
uses step 2's bias corrections and is about a quarter smaller, and AdamW decays every weight
once more. The ZeRO optimizers create their state lazily at the first real step. The row
``0, state reset`` clears the optimizer's state after deepspeed.initialize, which makes ZeRO-0
follow ZeRO-1 exactly; ``fp32`` is the reference without a wrapper.

Each configuration runs in its own process (one rank, gloo; CUDA when present):

    python bench/zero0_parity.py                       # bf16, 8 steps
    python bench/zero0_parity.py --precision fp16 --steps 12
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from typing import Dict, List

# ZeRO-1 runs twice: the spread between two runs of one layout is the noise a gap is judged against
# (on a GPU, cuBLAS and the fused Adam need not repeat bit for bit).
CASES = [("fp32", 0, False), ("bf16", 0, False), ("bf16", 1, False), ("bf16", 1, False), ("bf16", 2, False),
         ("bf16", 0, True)]


def run_one(precision: str, stage: int, reset: bool, steps: int, port: int) -> Dict[str, object]:
    """One configuration, in this process: the losses and the optimizer DeepSpeed chose."""
    import torch
    import deepspeed

    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": "0", "WORLD_SIZE": "1",
                       "LOCAL_RANK": "0"})
    deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    torch.manual_seed(0)
    vocab, hidden, seq, batch = 256, 128, 32, 8
    model = torch.nn.Sequential(torch.nn.Embedding(vocab, hidden), torch.nn.Linear(hidden, 4 * hidden),
                                torch.nn.GELU(), torch.nn.Linear(4 * hidden, hidden), torch.nn.LayerNorm(hidden),
                                torch.nn.Linear(hidden, vocab))
    config = {"train_batch_size": batch, "train_micro_batch_size_per_gpu": batch, "gradient_clipping": 1.0,
              "zero_optimization": {"stage": stage}, "steps_per_print": 10 ** 6,
              "optimizer": {"type": "AdamW", "params": {"lr": 3e-3, "weight_decay": 0.1}}}
    if precision != "fp32":
        config[precision] = {"enabled": True}
    engine = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)[0]
    if reset:
        inner = engine.optimizer.optimizer
        inner.state.clear()
    data = torch.randint(0, vocab, (batch, seq + 1), generator=torch.Generator().manual_seed(1)).to(engine.device)
    losses: List[float] = []
    for _step in range(steps):
        logits = engine(data[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, vocab), data[:, 1:].reshape(-1))
        engine.backward(loss)
        engine.step()
        losses.append(round(float(loss.item()), 4))
    return {"precision": precision, "stage": stage, "reset": reset, "optimizer": type(engine.optimizer).__name__,
            "deepspeed": deepspeed.__version__, "losses": losses}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--precision", default="bf16", choices=["bf16", "fp16"])
    parser.add_argument("--one", help=argparse.SUPPRESS)  # internal: precision,stage,reset,port
    args = parser.parse_args()
    if args.one:
        precision, stage, reset, port = args.one.split(",")
        print("RESULT " + json.dumps(run_one(precision, int(stage), reset == "1", args.steps, int(port))))
        return 0
    rows = []
    for index, (precision, stage, reset) in enumerate(CASES):
        precision = "fp32" if precision == "fp32" else args.precision
        proc = subprocess.run([sys.executable, __file__, "--steps", str(args.steps), "--one",
                               "%s,%d,%d,%d" % (precision, stage, int(reset), 29700 + index)],
                              capture_output=True, text=True, check=False)
        line = [x for x in proc.stdout.splitlines() if x.startswith("RESULT ")]
        if not line:
            sys.stderr.write(proc.stderr[-2000:])
            return 1
        rows.append(json.loads(line[-1][len("RESULT "):]))
    print("DeepSpeed %s, %d steps, loss after each step (same model, seed, batch and data)" % (rows[0]["deepspeed"], args.steps))
    for row in rows:
        label = "%s ZeRO-%d%s" % (row["precision"], row["stage"], ", state reset" if row["reset"] else "")
        print("%-24s %-24s %s" % (label, row["optimizer"], " ".join("%.4f" % x for x in row["losses"])))
    zero1_rows = [r for r in rows if (r["precision"], r["stage"], r["reset"]) == (args.precision, 1, False)]
    zero1 = zero1_rows[0]["losses"][-1]
    print("last step minus %s ZeRO-1: %s" % (args.precision, ", ".join(
        "%s ZeRO-%d%s %+.4f" % (r["precision"], r["stage"], " reset" if r["reset"] else "", r["losses"][-1] - zero1)
        for r in rows if r is not zero1_rows[0])))
    print("noise (ZeRO-1 run twice, largest difference over the steps): %.4f" % max(
        abs(a - b) for a, b in zip(zero1_rows[0]["losses"], zero1_rows[1]["losses"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
