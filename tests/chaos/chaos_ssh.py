# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The chaos test's ssh: ``chaos_ssh.py STATE_DIR NODE COMMAND``. A node listed in STATE_DIR/down
answers like an unreachable host (exit 255, what ssh returns); otherwise COMMAND runs here with
the rank pattern narrowed to that node's copy of the trainer (STATE_DIR/NODE/burnin_gpt.py or
pretrain_gpt.py), so pgrep/pkill see only that node's ranks."""
from __future__ import annotations

import os
import sys


def main(state: str, node: str, command: str) -> int:
    if os.path.exists(os.path.join(state, "down", node)):
        sys.stderr.write("ssh: connect to host %s: No route to host\n" % node)
        return 255
    for script in ("burnin_gpt", "pretrain_gpt"):
        command = command.replace("%s\\.py" % script, "%s/%s\\.py" % (node, script))
    os.execv("/bin/sh", ["/bin/sh", "-c", command])
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
