# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/gpu/mds_grid.py: log parsing, batching, role variables, the summary, and the recorded
H200 grid (bench/gpu/h200_grid.json) against the raw results it was made from."""
import importlib.util
import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "..", "bench", "gpu")
_spec = importlib.util.spec_from_file_location("mds_grid", os.path.join(BENCH, "mds_grid.py"))
grid = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(grid)

# Lines as Megatron-DeepSpeed HEAD printed them on the H200 host (g1-m16-rc, g1-m8-nf).
VOCAB_LINE = " > padded vocab (size: 8192) with 0 dummy tokens (new size: 8192)"
PARAMS_LINE = " > number of parameters on (tensor, pipeline) model parallel rank (0, 0): 1229574144"
MEMORY_LINE = ("[Rank 0] (after 4 iterations) memory (MB) | allocated: 16480.5888671875 | max allocated: "
               "26921.619140625 | reserved: 35066.0 | max reserved: 35066.0")
ITER_LINE = (" iteration        8/       8 | consumed samples:          512 | consumed tokens:      1048576 | "
             "elapsed time per iteration (ms): 3330.2 | learning rate: 6.000E-06 | global batch size:    64 | "
             "lm loss: 7.943276E+00 | loss scale: 1.0 | actual seqlen:  2048 | number of skipped iterations:   0 | "
             "number of nan iterations:   0 | samples per second: 19.218 | tokens per gpu per second (tgs): "
             "39358.245 | TFLOPs: 449.02 |")
OOM_LINE = ("[rank0]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
            "capacity of 139.80 GiB of which 674.12 MiB is free. Including non-PyTorch memory, this process has "
            "139.13 GiB memory in use. Of the allocated memory 129.69 GiB is allocated by PyTorch, and 5.51 GiB is")


def test_parse_log_reads_megatrons_own_figures():
    parsed = grid.parse_log("\n".join([VOCAB_LINE, PARAMS_LINE, MEMORY_LINE, ITER_LINE]))
    assert parsed["padded_vocab_size"] == 8192
    assert parsed["params_per_model_parallel_rank"] == {"0,0": 1229574144}
    assert parsed["memory"] == {"0": {"after_iterations": 4, "allocated_mib": 16480.5888671875,
                                      "max_allocated_mib": 26921.619140625, "reserved_mib": 35066.0,
                                      "max_reserved_mib": 35066.0}}
    assert parsed["intervals"] == [{"iteration": 8, "of": 8, "ms_per_iteration": 3330.2, "lm_loss": 7.943276,
                                    "tokens_per_gpu_per_s": 39358.245, "tflops_per_gpu": 449.02}]
    assert parsed["errors"] == []


@pytest.mark.parametrize("text, expected", [
    ("", {"memory": {}, "intervals": [], "padded_vocab_size": None}),
    # One memory line per (TP, PP) rank with data-parallel rank 0: ranks 0 and 1 under TP 2.
    (MEMORY_LINE + "\n" + MEMORY_LINE.replace("[Rank 0]", "[Rank 1]").replace("26921.619140625", "30000.0"),
     {"memory": {"0": 26921.619140625, "1": 30000.0}}),
    # An interval line without a loss (pipeline stages other than the last print none).
    (ITER_LINE.replace("lm loss: 7.943276E+00 | ", ""), {"lm_loss": None}),
])
def test_parse_log_partial_logs(text, expected):
    parsed = grid.parse_log(text)
    if "memory" in expected:
        assert {k: v["max_allocated_mib"] for k, v in parsed["memory"].items()} == expected["memory"]
    if "intervals" in expected:
        assert parsed["intervals"] == expected["intervals"]
    if "padded_vocab_size" in expected:
        assert parsed["padded_vocab_size"] == expected["padded_vocab_size"]
    if "lm_loss" in expected:
        assert parsed["intervals"][0]["lm_loss"] is expected["lm_loss"]


@pytest.mark.parametrize("lines, expected", [
    ([OOM_LINE], {"tried_gib": 2.0, "process_gib": 139.13, "allocated_gib": 129.69}),
    ([OOM_LINE.replace("2.00 GiB.", "512.00 MiB.")], {"tried_gib": 0.5, "process_gib": 139.13, "allocated_gib": 129.69}),
    (["[rank0]: ValueError: Invalid activation recompute method."], None),
    ([], None),
])
def test_parse_oom(lines, expected):
    assert grid.parse_oom(lines) == expected


def _job(name, gpus):
    return {"config": {"name": name, "gpus": gpus}}


@pytest.mark.parametrize("gpus, ngpu, expected", [
    ([1, 1, 1, 1], 2, [["a", "b"], ["c", "d"]]),
    ([1, 1, 1], 2, [["a", "b"], ["c"]]),
    ([1, 2, 1, 1], 2, [["a"], ["b"], ["c", "d"]]),
    ([2, 2], 2, [["a"], ["b"]]),
    ([1, 1, 1], 1, [["a"], ["b"], ["c"]]),
    ([1, 1, 1], 4, [["a", "b", "c"]]),
])
def test_batches_pair_single_gpu_jobs_only(gpus, ngpu, expected):
    jobs = [_job(chr(ord("a") + i), g) for i, g in enumerate(gpus)]
    assert [[j["config"]["name"] for j in batch] for batch in grid.batches(jobs, ngpu)] == expected


@pytest.mark.parametrize("config, expected", [
    (grid.cfg("x", 2, 16), {"megatron_job_global_batch_size": 16 * 2 * grid.GRAD_ACC,
                            "megatron_job_no_pipeline_parallel": True, "megatron_job_extra_args": [],
                            "megatron_job_megatron_dir": "/r/mds"}),
    (grid.cfg("x", 2, 16, pp=2), {"megatron_job_global_batch_size": 16 * grid.GRAD_ACC,
                                  "megatron_job_no_pipeline_parallel": False, "megatron_job_pipeline_parallel": 2}),
    (grid.cfg("x", 2, 16, tp=2), {"megatron_job_global_batch_size": 16 * grid.GRAD_ACC, "megatron_job_tensor_parallel": 2}),
    (grid.cfg("x", 2, 32, zero=2, grad_acc=2), {"megatron_job_global_batch_size": 128, "megatron_job_zero_stage": 2}),
    # The job files themselves add --deepspeed-activation-checkpointing (the device rows passed it
    # as an extra argument before that fix): no extra argument is needed.
    (grid.cfg("x", 1, 16, recompute=True), {"megatron_job_activation_checkpointing": True,
                                            "megatron_job_extra_args": []}),
    (grid.cfg("x", 1, 4, flash=False), {"megatron_job_use_flash_attn": False, "megatron_job_megatron_dir": "/r/mds-noflash"}),
    (grid.cfg("x", 1, 16, model="llama", kv_heads=4),
     {"megatron_job_extra_args": grid.LLAMA_ARGS + ["--num-key-value-heads", "4"]}),
    (grid.cfg("x", 1, 16, model="gpt-nodropout"), {"megatron_job_extra_args": ["--attention-dropout", "0", "--hidden-dropout", "0"]}),
])
def test_role_vars(config, expected):
    variables = grid.role_vars(config, "/r", 29500)
    assert {k: variables[k] for k in expected} == expected
    assert variables["megatron_job_workdir"] == "/r/jobs/x"
    assert variables["megatron_job_data_path"] == "/r/jobs/x/data/corpus_text_document"


@pytest.mark.parametrize("slot, text, expected", [
    (0, "deepspeed --master_port 29500 --num_gpus 1 \\\n", "deepspeed --master_port 29500 --num_gpus 1 \\\n"),
    (1, "deepspeed --master_port 29500 --num_gpus 1 \\\n", "deepspeed --master_port 29500 --include localhost:1 \\\n"),
])
def test_prepare_places_a_single_gpu_job(tmp_path, slot, text, expected):
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.sh").write_text(text)
    data = tmp_path / "data"
    data.mkdir()
    (data / "vocab.json").write_text("{}")
    job = {"src": str(src), "workdir": str(tmp_path / "work"), "config": {"name": "x"}}
    train = grid.prepare(job, slot, str(data))
    assert open(train).read() == expected
    assert (tmp_path / "work" / "data" / "vocab.json").exists()


def test_prepare_refuses_a_launcher_line_it_does_not_know(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.sh").write_text("deepspeed --num_gpus 2 pretrain_gpt.py\n")
    data = tmp_path / "data"
    data.mkdir()
    with pytest.raises(SystemExit, match="--num_gpus 1"):
        grid.prepare({"src": str(src), "workdir": str(tmp_path / "w"), "config": {"name": "x"}}, 1, str(data))


def _row(status="ok", recompute=False, intervals=None, memory=None, errors=None):
    c = grid.cfg("g1-x", 1, 16, recompute=recompute)
    return {"name": "g1-x", "status": status, "config": c, "vars": grid.role_vars(c, "/r", 29500),
            "memory": memory if memory is not None else {"0": {"max_allocated_mib": 1024.0 * 70, "max_reserved_mib": 1024.0 * 80}},
            "intervals": intervals if intervals is not None else [
                {"iteration": 4, "tflops_per_gpu": 400.0, "tokens_per_gpu_per_s": 1.0, "ms_per_iteration": 1.0, "lm_loss": 9.0},
                {"iteration": 8, "tflops_per_gpu": 400.0, "tokens_per_gpu_per_s": 2.0, "ms_per_iteration": 1.0, "lm_loss": 8.0}],
            "errors": errors or [], "padded_vocab_size": 8192, "smi_peak_mib": {"0": 1024 * 84}}


@pytest.mark.parametrize("row, expected", [
    (_row(), {"tflops_per_gpu": 400.0, "model_tflops_per_gpu": 400.0, "iterations": "5-8", "tokens_per_gpu_per_s": 2.0,
              "max_allocated_gib": 70.0, "max_reserved_gib": 80.0, "smi_peak_gib": 84.0, "status": "ok"}),
    # Megatron's TFLOPs count the recomputed forward (4 passes instead of 3); MFU does not.
    (_row(recompute=True), {"tflops_per_gpu": 400.0, "model_tflops_per_gpu": 300.0, "mfu": round(300.0 / 989.0, 4)}),
    # Only the warm-up interval: memory is kept, speed is not reported.
    (_row(status="failed: no iteration 8 within 120s", intervals=[
        {"iteration": 4, "tflops_per_gpu": 400.0, "tokens_per_gpu_per_s": 1.0, "ms_per_iteration": 1.0, "lm_loss": 9.0}]),
     {"tflops_per_gpu": None, "max_reserved_gib": 80.0,
      "status": "stopped after iteration 4 of 8 (no iteration 8 within 120s): memory valid, no speed figure"}),
    (_row(status="failed: exit 1 before iteration 8", intervals=[], memory={}, errors=[OOM_LINE]),
     {"status": "OOM: 129.7 GiB allocated, 139.1 GiB in the process, asked 2.0 GiB more", "max_reserved_gib": None}),
    (_row(status="failed: exit 1 before iteration 8", intervals=[], memory={},
          errors=["[rank0]: Traceback (most recent call last):", "[rank0]: ValueError: Invalid activation recompute method."]),
     {"status": "failed: exit 1 before iteration 8: ValueError: Invalid activation recompute method."}),
])
def test_summarize(row, expected):
    summary = grid.summarize(row, grid.load_jobspec(), "0.19.6")
    assert {k: summary.get(k) for k in expected} == expected
    # The estimate is the collection's, with the vocabulary the run used.
    assert summary["estimate"]["vocab_used"] == 8192
    assert summary["estimate"]["params_per_gpu"] == 1229574144


RAW = [os.path.join(BENCH, "h200_grid", "results-%s.json" % call) for call in ("1-x2", "2-x1", "3-x1", "4-x1", "5-x2", "6-x2")]
MEASURED = ("status", "max_allocated_gib", "max_reserved_gib", "smi_peak_gib", "tflops_per_gpu", "model_tflops_per_gpu",
            "tokens_per_gpu_per_s", "ms_per_iteration", "iterations", "oom", "padded_vocab_size")


def test_recorded_grid_matches_its_raw_results(tmp_path, capsys):
    """The measured columns of h200_grid.json come from the committed device results (the estimate
    columns follow the code and are recomputed by `mds_grid.py report`)."""
    out = tmp_path / "grid.json"
    assert grid.main(["report"] + RAW + ["--json", str(out)]) == 0
    recorded = {r["name"]: r for r in json.load(open(os.path.join(BENCH, "h200_grid.json")))["rows"]}
    again = {r["name"]: r for r in json.load(open(str(out)))["rows"]}
    assert sorted(recorded) == sorted(again)
    for name, row in again.items():
        assert {k: row.get(k) for k in MEASURED} == {k: recorded[name].get(k) for k in MEASURED}, name
    # At least eight configurations measured to the end, as issue 18 asks.
    assert sum(1 for r in again.values() if r["status"] == "ok") >= 8
    assert "| g1-m16 |" in capsys.readouterr().out


# A chained traceback as 4efb479d's ParallelTransformerLayer.forward leaves it when the attention runs
# out of memory: the TypeError of the cpu_offloading keyword is caught, the second call raises.
CHAINED = "\n".join(
    ["[rank0]: Traceback (most recent call last):"]
    + ['[rank0]:   File "megatron/model/transformer.py", line %d, in forward' % n for n in range(1335, 1341)]
    + ["[rank0]: TypeError: ParallelAttention.forward() got an unexpected keyword argument 'cpu_offloading'",
       "[rank0]: ", "[rank0]: During handling of the above exception, another exception occurred:", "[rank0]: ",
       "[rank0]: Traceback (most recent call last):",
       '[rank0]:   File "megatron/model/transformer.py", line 1343, in forward', OOM_LINE])


@pytest.mark.parametrize("text, expected", [
    (CHAINED, OOM_LINE[len("[rank0]: "):][:300]),
    ("[rank0]: Traceback (most recent call last):\n[rank0]: ValueError: Invalid activation recompute method.",
     "ValueError: Invalid activation recompute method."),
    ("Traceback (most recent call last):\nRuntimeError: NCCL error\nKeyboardInterrupt", "RuntimeError: NCCL error"),
    ("deepspeed.runtime.zero.utils.ZeRORuntimeException: bad config", "deepspeed.runtime.zero.utils.ZeRORuntimeException: bad config"),
    ("WARNING: CUDA Error: nothing raised here\n" + ITER_LINE, None),
    ("", None),
])
def test_last_exception_is_the_one_raised(text, expected):
    assert grid.last_exception(text) == expected


def test_parse_log_finds_the_oom_behind_a_caught_exception():
    """The first error lines (the three `run` prints) are the caught TypeError's; the out-of-memory
    error comes after them."""
    parsed = grid.parse_log(CHAINED)
    assert not any("out of memory" in line for line in parsed["errors"][:3])
    assert parsed["oom"] == {"tried_gib": 2.0, "process_gib": 139.13, "allocated_gib": 129.69}
    assert parsed["exception"].startswith("torch.OutOfMemoryError: CUDA out of memory")
    row = dict(_row(status="failed: exit 1 before iteration 8", intervals=[], memory={}), **parsed)
    assert grid.summarize(row, grid.load_jobspec(), "0.19.6")["status"] == \
        "OOM: 129.7 GiB allocated, 139.1 GiB in the process, asked 2.0 GiB more"
    traced = dict(_row(status="failed: exit 1 before iteration 8", intervals=[], memory={}),
                  **grid.parse_log(CHAINED.replace(OOM_LINE, "[rank0]: RuntimeError: shapes do not match")))
    assert grid.summarize(traced, grid.load_jobspec(), "0.19.6")["status"] == \
        "failed: exit 1 before iteration 8: RuntimeError: shapes do not match"


def _meta(name, micro, **kw):
    c = grid.cfg(name, 1, micro, **kw)
    return {"config": c, "vars": grid.role_vars(c, "/r", 29500)}


@pytest.mark.parametrize("card_mib, micro, skipped", [
    (81559, 8, False),      # the H100 picks: estimated 52.8 GiB
    (81559, 16, False),     # 78.8 GiB: above the planner's 90% but within the card, so it starts
    (81559, 32, True),      # about 130 GiB on an 80 GiB card
    (143771, 32, False),    # the same row on an H200
    (None, 32, False),      # no card size: every row starts
])
def test_rows_estimated_above_the_card_are_skipped_with_the_reason(card_mib, micro, skipped):
    job = _meta("g1-x", micro)
    kept, rows = grid.over_card([job], card_mib, "0.19.6", 8192)
    assert (kept, bool(rows)) == (([], True) if skipped else ([job], False))
    if skipped:
        assert rows[0]["name"] == "g1-x" and rows[0]["estimate_gib"] > card_mib / 1024.0
        assert rows[0]["status"].startswith("skipped: estimated %.1f GiB per GPU, above the card's %.1f GiB"
                                            % (rows[0]["estimate_gib"], card_mib / 1024.0))
