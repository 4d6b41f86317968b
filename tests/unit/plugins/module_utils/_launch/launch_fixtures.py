# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What several _launch test modules share: a burn-in rank's BURNIN_RESULT record."""
from __future__ import annotations

from typing import Any, Dict


def burnin_result(host: str, rank: int, **extra: Any) -> Dict[str, Any]:
    result = {"hostname": host, "rank": rank, "local_rank": rank % 2, "world": 4, "tokens_per_s": 100.0,
              "tflops": 0.5, "probe_tokens_per_s": 200.0, "probe_tflops": 1.0, "initial_loss": 6.2,
              "final_loss": 4.1, "start_step": 0, "final_step": 20, "checkpoint": "/c/global_step20"}
    result.update(extra)
    return result
