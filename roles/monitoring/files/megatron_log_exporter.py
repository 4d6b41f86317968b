# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prometheus exporter for a Megatron-DeepSpeed training log.

Run by systemd on the head node (monitoring role), as the training user:

    python3 megatron_log_exporter.py --log-file /opt/megatron/jobs/gpt/logs/train.log \
        --listen-address 10.0.0.1 --port 9701 --seq-length 2048

It follows the log the way ``tail -F`` does (it reopens a rotated or truncated file) and parses
the lines megatron/training.py ``training_log`` prints on the last rank every log interval
(read by the collection's Megatron log parser, from the library os_base installs):

     iteration       10/     100 | consumed samples: 80 | consumed tokens: 163840 |
     elapsed time per iteration (ms): 812.3 | learning rate: 6.000E-05 | global batch size: 8 |
     lm loss: 1.012345E+01 | loss scale: 65536.0 | grad norm: 3.456 | actual seqlen: 2048 |
     number of skipped iterations: 0 | number of nan iterations: 0 | samples per second: 9.849 |
     tokens per gpu per second (tgs): 5042.4 | TFLOPs: 120.45 |

(one line; the launcher may prefix it with the node name). Standard library only, Python 3.6+.
"""
import argparse
import math
import os
import sys
import threading
import time

try:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
except ImportError:  # Python < 3.7
    from http.server import BaseHTTPRequestHandler, HTTPServer as ThreadingHTTPServer

# The collection's log parser (plugins/module_utils/_mds/log.py: the same reader as the job
# status and the launch wait), from os_base's library (tasks_from: library) on the node; the
# service names the role's os_base_library_dir in MEGATRON_DS_LIBRARY.
sys.path.insert(0, os.environ.get("MEGATRON_DS_LIBRARY", "/usr/local/lib/megatron-ds"))
from ansible_collections.megatron_ds.cluster.plugins.module_utils._mds import log as _megatron_log  # noqa: E402  pylint: disable=wrong-import-position


class TrainingState(object):
    """What the exporter knows, updated line by line; render() is the /metrics body."""

    def __init__(self, seq_length=0, started=None):
        self.seq_length = seq_length
        self.started = time.time() if started is None else started
        self.lock = threading.Lock()
        self.last = None
        self.last_time = None
        self.lines = 0
        self.skipped_total = 0.0
        self.nan_total = 0.0
        self.nonfinite_total = 0
        self.loss_missing = 0
        self.log_present = 0

    def apply(self, record, seen_at):
        with self.lock:
            self.lines += 1
            self.skipped_total += record.get("skipped_iterations", 0.0)
            self.nan_total += record.get("nan_iterations", 0.0)
            nonfinite = _megatron_log.is_nonfinite(record)
            if nonfinite:
                self.nonfinite_total += 1
            self.loss_missing = 0 if record["losses"] else 1
            # A line without a loss keeps the last loss values readable (as NaN if it was NaN).
            losses = dict(self.last["losses"]) if self.last and not record["losses"] else {}
            losses.update(record["losses"])
            self.last = dict(record, losses=losses, nonfinite=nonfinite)
            self.last_time = seen_at

    def tokens_per_second(self):
        if not self.last or self.last.get("samples_per_second") is None:
            return None
        seq = self.last.get("seq_length") or self.seq_length
        if not seq:
            return None
        return self.last["samples_per_second"] * seq

    def render(self, now=None):
        now = time.time() if now is None else now
        with self.lock:
            out = []

            def metric(name, kind, help_text, value, labels=""):
                if value is None:
                    return
                out.append("# HELP %s %s" % (name, help_text))
                out.append("# TYPE %s %s" % (name, kind))
                out.append("%s%s %s" % (name, labels, _fmt(value)))

            metric("megatron_train_log_present", "gauge",
                   "1 when the training log exists and is readable.", self.log_present)
            metric("megatron_train_log_lines_parsed_total", "counter",
                   "training_log lines parsed since the exporter started.", self.lines)
            metric("megatron_train_exporter_start_time_seconds", "gauge",
                   "When the exporter started (Unix time).", self.started)
            metric("megatron_train_skipped_iterations_total", "counter",
                   "Skipped iterations (fp16 loss-scale overflows) summed over the log.",
                   self.skipped_total)
            metric("megatron_train_nan_iterations_total", "counter",
                   "NaN/inf iterations Megatron counted, summed over the log.", self.nan_total)
            metric("megatron_train_nonfinite_intervals_total", "counter",
                   "Log intervals whose loss or grad norm was NaN/inf.", self.nonfinite_total)
            last = self.last
            if last is not None:
                metric("megatron_train_iteration", "gauge", "Last logged iteration.",
                       last["iteration"])
                metric("megatron_train_iterations_planned", "gauge", "--train-iters.",
                       last["train_iters"])
                metric("megatron_train_last_iteration_timestamp_seconds", "gauge",
                       "When the last iteration line was seen (Unix time).", self.last_time)
                metric("megatron_train_seconds_since_last_iteration", "gauge",
                       "Seconds since the last iteration line.", max(0.0, now - self.last_time))
                ms = last.get("iteration_time_ms")
                metric("megatron_train_iteration_time_seconds", "gauge",
                       "Elapsed time per iteration.", None if ms is None else ms / 1000.0)
                metric("megatron_train_samples_per_second", "gauge", "Samples per second.",
                       last.get("samples_per_second"))
                metric("megatron_train_tokens_per_second", "gauge",
                       "Samples per second x sequence length.", self.tokens_per_second())
                metric("megatron_train_tokens_per_gpu_per_second", "gauge",
                       "Megatron's tgs.", last.get("tokens_per_gpu_per_second"))
                metric("megatron_train_tflops", "gauge", "Megatron's TFLOPs per GPU.",
                       last.get("tflops"))
                metric("megatron_train_learning_rate", "gauge", "Learning rate.",
                       last.get("learning_rate"))
                metric("megatron_train_global_batch_size", "gauge", "Global batch size.",
                       last.get("global_batch_size"))
                metric("megatron_train_consumed_samples", "gauge", "Consumed samples.",
                       last.get("consumed_samples"))
                metric("megatron_train_consumed_tokens", "gauge", "Consumed tokens.",
                       last.get("consumed_tokens"))
                metric("megatron_train_grad_norm", "gauge", "Gradient norm.",
                       last.get("grad_norm"))
                metric("megatron_train_loss_scale", "gauge", "fp16 loss scale.",
                       last.get("loss_scale"))
                metric("megatron_train_loss_nonfinite", "gauge",
                       "1 when the last interval's loss or grad norm was NaN/inf.",
                       1 if last["nonfinite"] else 0)
                metric("megatron_train_loss_missing", "gauge",
                       "1 when the last line printed no loss (NaN average, or every step skipped).",
                       self.loss_missing)
                if last["losses"]:
                    out.append("# HELP megatron_train_loss Average loss over the log interval.")
                    out.append("# TYPE megatron_train_loss gauge")
                    for name, value in sorted(last["losses"].items()):
                        out.append('megatron_train_loss{name="%s"} %s' % (name, _fmt(value)))
            return "\n".join(out) + "\n"


def _fmt(value):
    if isinstance(value, int):
        return str(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class LogFollower(object):
    """tail -F: read whole lines appended to path; reopen when it is replaced or truncated."""

    def __init__(self, path):
        self.path = path
        self.stream = None
        self.inode = None
        self.partial = ""

    def _open(self):
        try:
            self.stream = open(self.path, "r", errors="replace")
            self.inode = os.fstat(self.stream.fileno()).st_ino
            self.partial = ""
        except OSError:
            self.stream = None

    def read_lines(self):
        """New complete lines, and whether the file is readable now."""
        if self.stream is None:
            self._open()
            if self.stream is None:
                return [], False
        try:
            current = os.stat(self.path)
            if current.st_ino != self.inode or current.st_size < self.stream.tell():
                lines = self._drain()
                self.stream.close()
                self._open()
                return lines + (self._drain() if self.stream else []), self.stream is not None
        except OSError:
            lines = self._drain()
            self.stream.close()
            self.stream = None
            return lines, False
        return self._drain(), True

    def _drain(self):
        data = self.partial + self.stream.read()
        lines = data.split("\n")
        self.partial = lines.pop()
        return lines


def follow(state, follower, poll_interval, stop):
    while not stop.is_set():
        lines, present = follower.read_lines()
        now = time.time()
        for line in lines:
            record = _megatron_log.parse_iteration(line)
            if record is not None:
                state.apply(record, now)
        state.log_present = 1 if present else 0
        stop.wait(poll_interval)


def make_handler(state):
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path.split("?")[0] not in ("/metrics", "/"):
                self.send_error(404)
                return
            body = state.render().encode("utf-8")
            if self.path == "/":
                body = b"megatron_log_exporter: see /metrics\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # scrapes every few seconds: keep the journal quiet
            pass

    return Handler


def main(argv=None):
    parser = argparse.ArgumentParser(description="Prometheus exporter for a Megatron training log")
    parser.add_argument("--log-file", required=True)
    parser.add_argument("--listen-address", required=True)
    parser.add_argument("--port", type=int, default=9701)
    parser.add_argument("--seq-length", type=int, default=0,
                        help="tokens per sample when the log has no 'actual seqlen' field")
    parser.add_argument("--poll-interval", type=float, default=1.0)
    args = parser.parse_args(argv)
    state = TrainingState(args.seq_length)
    follower = LogFollower(args.log_file)
    stop = threading.Event()
    # Read what is already there first: the last iteration and the counters start from the log.
    for line in follower.read_lines()[0]:
        record = _megatron_log.parse_iteration(line)
        if record is not None:
            state.apply(record, _mtime(args.log_file))
    thread = threading.Thread(target=follow, args=(state, follower, args.poll_interval, stop))
    thread.daemon = True
    thread.start()
    server = ThreadingHTTPServer((args.listen_address, args.port), make_handler(state))
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        server.server_close()
    return 0


def _mtime(path):
    """Lines already in the log at start-up were written no later than the file's mtime."""
    try:
        return os.stat(path).st_mtime
    except OSError:
        return time.time()


if __name__ == "__main__":
    sys.exit(main())
