# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Write real DeepSpeed checkpoints on CPU (one process, gloo, world size 1) for test_checkpoint.py.

    python ds_checkpoint_writer.py OUT_DIR 0:fp32 1:bf16 ...

Each STAGE:PRECISION goes through ``deepspeed.initialize`` and two training steps, then
``save_checkpoint(OUT_DIR/zSTAGE_PRECISION)`` with no tag, as Megatron-DeepSpeed calls it.
Prints one JSON line: {"written": {name: [files]}} or {"skip": reason}. Run in a subprocess so that
torch.distributed and DeepSpeed's globals stay out of pytest.
"""
from __future__ import annotations

import json
import os
import socket
import sys


def main(out_dir: str, specs: list) -> dict:
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    for key, value in (("MASTER_ADDR", "127.0.0.1"), ("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        os.environ.setdefault(key, value)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        os.environ.setdefault("MASTER_PORT", str(sock.getsockname()[1]))
    try:
        import torch
        import deepspeed
    except Exception as exc:  # noqa: BLE001 - any import failure means: skip, and say why
        return {"skip": "cannot import torch/deepspeed: %s: %s" % (type(exc).__name__, exc)}
    written = {}
    for spec in specs:
        stage, precision = spec.split(":")
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
        config = {"train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1, "steps_per_print": 1000,
                  "zero_optimization": {"stage": int(stage)}, "zero_allow_untested_optimizer": True}
        if precision == "bf16":
            config["bf16"] = {"enabled": True}
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.01)
        try:
            engine = deepspeed.initialize(model=model, optimizer=optimizer, config=config)[0]
        except Exception as exc:  # noqa: BLE001
            return {"skip": "deepspeed.initialize failed on CPU for ZeRO-%s %s: %s: %s"
                    % (stage, precision, type(exc).__name__, exc)}
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        for _step in range(2):
            loss = engine(torch.randn(2, 8, dtype=dtype)).float().pow(2).mean()
            engine.backward(loss)
            engine.step()
        name = "z%s_%s" % (stage, precision)
        save = os.path.join(out_dir, name)
        engine.save_checkpoint(save, client_state={"iteration": 2})
        with open(os.path.join(save, "latest_checkpointed_iteration.txt"), "w") as handle:
            handle.write("2")  # Megatron writes this next to DeepSpeed's files
        written[name] = sorted(os.listdir(os.path.join(save, "global_step2")))
    return {"written": written}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2:])))
