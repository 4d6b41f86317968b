# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The monitoring role's training-log exporter on lines in Megatron-DeepSpeed's real format.

The exporter is loaded the way the role installs it: copied into one directory beside the
collection's log parser (plugins/module_utils/_mds/log.py, tested line by line in
tests/unit/plugins/module_utils/_mds/test_log.py). Every line below is what megatron/training.py ``training_log`` prints (HEAD and the
before_rebase branch share the format; before_rebase has no tgs field): the format strings were
run on the values shown. The NaN lines are what Python prints for a NaN through ``{:.6E}``
(``NAN``) and ``{:.3f}`` (``nan``); HEAD drops a loss whose average is not > 0, so a bf16 NaN
loss shows as a line with no loss and a NaN grad norm.
"""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from ansible_collections.megatron_ds.cluster.tests.support.library import install as install_library

ROOT = Path(__file__).resolve().parents[4]


EXPORTER = ROOT / "roles" / "monitoring" / "files" / "megatron_log_exporter.py"


def _install():
    """The exporter, loaded in this process (its parser resolves to the collection on this path)."""
    spec = importlib.util.spec_from_file_location("megatron_log_exporter", EXPORTER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_service_imports_the_parser_from_the_library(tmp_path):
    # As the service runs it: only the library os_base installs (MEGATRON_DS_LIBRARY) on the path.
    library = install_library(tmp_path)
    probe = ("import importlib.util; spec = importlib.util.spec_from_file_location('x', %r); "
             "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); print(m._megatron_log.__file__)"
             % str(EXPORTER))
    out = subprocess.run([sys.executable, "-I", "-c", probe], env=dict(os.environ, MEGATRON_DS_LIBRARY=str(library)),
                         capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    assert out.startswith(str(library) + os.sep) and out.endswith(os.path.join("_mds", "log.py")), out


lx = _install()
parse = lx._megatron_log.parse_iteration

HEALTHY = (
    " iteration       10/     100 | consumed samples:           80 | consumed tokens:       163840 |"
    " elapsed time per iteration (ms): 812.3 | learning rate: 6.000E-05 | global batch size:     8 |"
    " lm loss: 1.012345E+01 | loss scale: 1.0 | grad norm: 3.456 | actual seqlen:  2048 |"
    " number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 9.849 |"
    " tokens per gpu per second (tgs): 5042.400 | TFLOPs: 120.45 |"
)
NAN_LOSS = (
    " iteration       20/     100 | consumed samples:          160 | consumed tokens:       327680 |"
    " elapsed time per iteration (ms): 790.0 | learning rate: 5.900E-05 | global batch size:     8 |"
    " lm loss: NAN | loss scale: 1.0 | grad norm: nan | actual seqlen:  2048 |"
    " number of skipped iterations:   0 | number of nan iterations:   0 | samples per second: 10.127 |"
    " tokens per gpu per second (tgs): 5185.000 | TFLOPs: 123.80 |"
)
BF16_NAN_HEAD = (
    " iteration       30/     100 | consumed samples:          240 | consumed tokens:       491520 |"
    " elapsed time per iteration (ms): 801.0 | learning rate: 5.800E-05 | global batch size:     8 |"
    " loss scale: 1.0 | grad norm: nan | actual seqlen:  2048 | number of skipped iterations:   0 |"
    " number of nan iterations:   0 | samples per second: 9.980 | tokens per gpu per second (tgs): 5110.200 |"
    " TFLOPs: 122.00 |"
)
FP16_SKIPPED = (
    " iteration       40/     100 | consumed samples:          320 | consumed tokens:       655360 |"
    " elapsed time per iteration (ms): 640.5 | learning rate: 5.700E-05 | global batch size:     8 |"
    " lm loss: 9.500000E+00 | loss scale: 16384.0 | actual seqlen:  2048 |"
    " number of skipped iterations:   3 | number of nan iterations:   1 | samples per second: 12.490 |"
    " tokens per gpu per second (tgs): 6394.900 | TFLOPs: 150.10 |"
)
FP16_OVERFLOW_ONLY = (
    " iteration       50/     100 | consumed samples:          400 | consumed tokens:       819200 |"
    " elapsed time per iteration (ms): 600.0 | learning rate: 5.600E-05 | global batch size:     8 |"
    " lm loss: 9.400000E+00 | loss scale: 8192.0 | grad norm: 2.100 | actual seqlen:  2048 |"
    " number of skipped iterations:   2 | number of nan iterations:   0 | samples per second: 13.333 |"
    " tokens per gpu per second (tgs): 6826.700 | TFLOPs: 160.00 |"
)


def _samples(text):
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    return values


def test_render_before_any_iteration_has_only_counters():
    state = lx.TrainingState(seq_length=2048, started=100.0)
    metrics = _samples(state.render(now=200.0))
    assert metrics["megatron_train_log_lines_parsed_total"] == 0
    assert "megatron_train_iteration" not in metrics
    assert "megatron_train_seconds_since_last_iteration" not in metrics


@pytest.mark.parametrize(
    "lines, expected",
    [
        ([HEALTHY], {"megatron_train_iteration": 10, "megatron_train_iteration_time_seconds": 0.8123,
                     "megatron_train_tokens_per_second": 9.849 * 2048,
                     'megatron_train_loss{name="lm loss"}': 10.12345,
                     "megatron_train_grad_norm": 3.456, "megatron_train_loss_nonfinite": 0,
                     "megatron_train_seconds_since_last_iteration": 30.0,
                     "megatron_train_tflops": 120.45}),
        ([HEALTHY, FP16_SKIPPED, FP16_OVERFLOW_ONLY],
         {"megatron_train_skipped_iterations_total": 5, "megatron_train_nan_iterations_total": 1,
          "megatron_train_nonfinite_intervals_total": 1, "megatron_train_loss_nonfinite": 0,
          "megatron_train_loss_scale": 8192.0, "megatron_train_iteration": 50}),
        ([HEALTHY, BF16_NAN_HEAD], {"megatron_train_loss_nonfinite": 1, "megatron_train_loss_missing": 1,
                                    "megatron_train_nonfinite_intervals_total": 1,
                                    'megatron_train_loss{name="lm loss"}': 10.12345}),
    ],
    ids=["one-line", "fp16-counters-sum", "bf16-nan-keeps-last-loss"],
)
def test_render_values(lines, expected):
    state = lx.TrainingState(seq_length=1024, started=0.0)
    for line in lines:
        state.apply(parse(line), seen_at=1000.0)
    metrics = _samples(state.render(now=1030.0))
    for name, value in expected.items():
        assert metrics[name] == pytest.approx(value), name


def test_render_writes_nan_loss_as_prometheus_nan():
    state = lx.TrainingState()
    state.apply(parse(NAN_LOSS), seen_at=1.0)
    text = state.render(now=2.0)
    assert 'megatron_train_loss{name="lm loss"} NaN' in text
    assert "megatron_train_grad_norm NaN" in text
    assert "megatron_train_loss_nonfinite 1" in text


def test_tokens_per_second_falls_back_to_configured_seq_length():
    state = lx.TrainingState(seq_length=4096)
    record = parse(HEALTHY)
    del record["seq_length"]
    state.apply(record, seen_at=1.0)
    assert state.tokens_per_second() == pytest.approx(9.849 * 4096)
    assert lx.TrainingState(seq_length=0).tokens_per_second() is None


def test_follower_reads_appended_whole_lines_and_survives_rotation(tmp_path):
    log = tmp_path / "train.log"
    follower = lx.LogFollower(str(log))
    assert follower.read_lines() == ([], False)
    log.write_text(HEALTHY + "\n" + FP16_SKIPPED[:40])
    lines, present = follower.read_lines()
    assert present and lines == [HEALTHY]
    with log.open("a") as stream:
        stream.write(FP16_SKIPPED[40:] + "\n")
    assert follower.read_lines()[0] == [FP16_SKIPPED]
    rotated = tmp_path / "train.log.1"
    os.rename(log, rotated)
    log.write_text(NAN_LOSS + "\n")
    assert follower.read_lines()[0] == [NAN_LOSS]
    # Truncated in place (like `> train.log`): seen when the file is shorter than the offset
    # read so far, as with tail -F.
    log.write_text("restarted\n")
    assert follower.read_lines()[0] == ["restarted"]
    with log.open("a") as stream:
        stream.write(HEALTHY + "\n")
    assert follower.read_lines()[0] == [HEALTHY]


def test_http_server_serves_metrics(tmp_path):
    log = tmp_path / "train.log"
    log.write_text(HEALTHY + "\n")
    state = lx.TrainingState(seq_length=2048)
    follower = lx.LogFollower(str(log))
    stop = threading.Event()
    thread = threading.Thread(target=lx.follow, args=(state, follower, 0.05, stop), daemon=True)
    thread.start()
    server = lx.ThreadingHTTPServer(("127.0.0.1", 0), lx.make_handler(state))
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    try:
        url = "http://127.0.0.1:%d/metrics" % server.server_address[1]
        deadline = time.time() + 5
        body = ""
        while time.time() < deadline and "megatron_train_iteration 10" not in body:
            body = urllib.request.urlopen(url, timeout=5).read().decode()
            time.sleep(0.05)
        assert "megatron_train_iteration 10" in body
        assert "megatron_train_log_present 1" in body
        with log.open("a") as stream:
            stream.write(NAN_LOSS + "\n")
        deadline = time.time() + 5
        while time.time() < deadline and "megatron_train_loss_nonfinite 1" not in body:
            body = urllib.request.urlopen(url, timeout=5).read().decode()
            time.sleep(0.05)
        assert "megatron_train_loss_nonfinite 1" in body
        with pytest.raises(urllib.error.HTTPError):
            urllib.request.urlopen(url.replace("/metrics", "/other"), timeout=5)
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
