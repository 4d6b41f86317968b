# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Call Megatron's compiled dataset helper once, the way gpt_dataset.py does at start-up.

Importing the helper is not enough: on the GPU validation host a helper built by another
compiler crashed inside build_sample_idx (docs/upstream-facts.md §G). This loads megatron/data/helpers<ext>
by path (no megatron import, so no torch), calls build_sample_idx on tiny int32 arrays and
compares the result with the pure-Python _build_sample_idx of gpt_dataset.py, copied below.
A crash ends the process by signal, which the role reports.

Usage: python check_helpers.py MEGATRON_DIR/megatron/data
"""
import importlib.machinery
import importlib.util
import os
import sys
import sysconfig

import numpy as np


def reference_sample_idx(sizes, doc_idx, seq_length, num_epochs, tokens_per_epoch):
    """megatron/data/gpt_dataset.py:_build_sample_idx (same in before_rebase and HEAD)."""
    num_samples = (num_epochs * tokens_per_epoch - 1) // seq_length
    sample_idx = np.zeros([num_samples + 1, 2], dtype=np.int32)
    sample_index, doc_idx_index, doc_offset = 1, 0, 0
    while sample_index <= num_samples:
        remaining = seq_length + 1
        while remaining != 0:
            doc_length = sizes[doc_idx[doc_idx_index]] - doc_offset
            remaining -= doc_length
            if remaining <= 0:
                doc_offset += remaining + doc_length - 1
                remaining = 0
            else:
                doc_idx_index += 1
                doc_offset = 0
        sample_idx[sample_index] = (doc_idx_index, doc_offset)
        sample_index += 1
    return sample_idx


def main(data_dir):
    path = os.path.join(data_dir, "helpers" + sysconfig.get_config_var("EXT_SUFFIX"))
    if not os.path.exists(path):
        print("no compiled helper at %s (make -C %s did not produce it)" % (path, data_dir))
        return 2
    loader = importlib.machinery.ExtensionFileLoader("helpers", path)
    spec = importlib.util.spec_from_file_location("helpers", path, loader=loader)
    helpers = importlib.util.module_from_spec(spec)
    loader.exec_module(helpers)

    sizes = np.array([5, 3, 4, 7], dtype=np.int32)
    doc_idx = np.array([0, 1, 2, 3, 3, 2, 1, 0], dtype=np.int32)  # two epochs
    args = (sizes, doc_idx, 4, 2, int(sizes.sum()))
    got = np.asarray(helpers.build_sample_idx(*args))
    expected = reference_sample_idx(*args)
    if got.shape != expected.shape or not (got == expected).all():
        print("build_sample_idx returned %s, expected %s" % (got.tolist(), expected.tolist()))
        return 1
    print("build_sample_idx ok: %s" % got.tolist())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
