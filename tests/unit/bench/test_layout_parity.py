# -*- coding: utf-8 -*-
# Copyright: (c) 2026, megatron_ds.cluster developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""bench/layout_parity.py: log parsing, the verdict criterion, the summary, the scratch
checkout, the /dev/shm clean-up, and the role-built command line of each row."""
import importlib.util
import json
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "..", "bench")
_spec = importlib.util.spec_from_file_location("layout_parity", os.path.join(BENCH, "layout_parity.py"))
lp = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lp)

# A line as Megatron-DeepSpeed HEAD (4efb479d) printed it on CPU in this benchmark.
ITER_LINE = (" iteration        1/      50 | consumed samples:            8 | consumed tokens:         1024 | "
             "elapsed time per iteration (ms): 100.2 | learning rate: 4.000E-04 | global batch size:     8 | "
             "lm loss: 6.932658E+00 | loss scale: 1.0 | actual seqlen:   128 | number of skipped iterations:   0 | "
             "number of nan iterations:   0 | samples per second: 79.828 | tokens per gpu per second (tgs): "
             "5109.006 | TFLOPs: 0.01 |")


def line(iteration, loss, of=50):
    return ITER_LINE.replace("1/      50", "%d/      %d" % (iteration, of)).replace("6.932658E+00", loss)


@pytest.mark.parametrize("text, expected", [
    (ITER_LINE, {1: 6.932658}),
    (line(50, "6.557583E+00"), {50: 6.557583}),
    ("\n".join([line(1, "6.9E+00"), "noise", line(2, "6.8E+00")]), {1: 6.9, 2: 6.8}),
    # a later line for the same iteration wins (a resumed run logs it again)
    ("\n".join([line(3, "6.0E+00"), line(3, "5.5E+00")]), {3: 5.5}),
    # the launcher's own lines and a line without lm loss (an evaluation) are not iterations
    ("[INFO] [launch.py:162:main] WORLD INFO DICT: {'localhost': [0, 1]}", {}),
    (" validation loss at iteration 50 | lm loss value: 6.5E+00 | lm loss PPL: 700 |", {}),
    ("iteration 7/ 50 | elapsed time per iteration (ms): 1.0 | number of skipped iterations: 1 |", {}),
    ("", {}),
])
def test_parse_losses(text, expected):
    assert lp.parse_losses(text) == expected


@pytest.mark.parametrize("reference, row, verdict", [
    # identical runs agree
    ([6.50, 6.52, 6.54], [6.50, 6.52, 6.54], "agrees"),
    # mean inside the reference range, whatever the row's spread
    ([6.50, 6.54], [6.53, 6.53], "agrees"),
    # mean outside the range, but within the row's own spread of it
    ([6.50, 6.52], [6.53, 6.56], "agrees"),        # mean 6.545 <= 6.52 + 0.03
    ([6.50, 6.52], [6.46, 6.49], "agrees"),        # mean 6.475 >= 6.50 - 0.03
    # mean beyond the range widened by the row's spread
    ([6.50, 6.52], [6.55, 6.56], "differs"),       # 6.555 > 6.52 + 0.01
    ([6.50, 6.52], [6.40, 6.41], "differs"),
    # a row without spread must land inside the reference's range
    ([6.50, 6.52], [6.53], "differs"),
    ([6.50, 6.52], [6.52], "agrees"),
    # a reference of one seed: the row's spread alone is the window
    ([6.50], [6.49, 6.51], "agrees"),
    ([6.50], [6.60, 6.61], "differs"),
    ([], [6.5], "missing"),
    ([6.5], [], "missing"),
])
def test_verdict(reference, row, verdict):
    assert lp.verdict(reference, row)["verdict"] == verdict


def test_verdict_reports_window_and_distance():
    got = lp.verdict([6.50, 6.52], [6.55, 6.56])
    assert got["mean"] == pytest.approx(6.555)
    assert got["spread"] == pytest.approx(0.01)
    assert got["window"] == pytest.approx([6.49, 6.53])
    assert got["distance"] == pytest.approx(0.025)
    assert lp.verdict([6.50, 6.52], [6.51])["distance"] == 0.0


@pytest.mark.parametrize("reference, row, gap", [
    ({1: 6.5, 2: 6.6}, {1: 6.5, 2: 6.6}, 0.0),
    ({1: 6.5, 2: 6.6}, {1: 6.4, 2: 6.65}, -0.1),   # the largest in absolute value, with its sign
    ({1: 6.5}, {2: 6.6}, None),                    # no shared seed
    ({1: 6.5, 2: 6.6}, {2: 6.7}, 0.1),
])
def test_same_seed_gap(reference, row, gap):
    got = lp.same_seed_gap(reference, row)
    assert got == (None if gap is None else pytest.approx(gap))


def test_summarize_and_table():
    losses = {
        "dp2-z1": {1: {1: 6.9, 10: 6.8, 50: 6.50}, 2: {1: 6.9, 10: 6.8, 50: 6.52}},
        "tp2": {1: {1: 6.9, 10: 6.8, 50: 6.51}, 2: {1: 6.9, 10: 6.8, 50: 6.53}},
        "pp2": {1: {1: 6.9, 50: 6.70}, 2: {1: 6.9, 50: 6.71}},
        "short": {1: {1: 6.9}},
    }
    summary = lp.summarize(losses, 50, show_at=(1, 10), repeat={1: 6.9, 10: 6.8, 50: 6.5200001}, repeat_seed=2)
    rows = {r["name"]: r for r in summary["rows"]}
    assert summary["reference_spread"] == pytest.approx(0.02)
    assert rows["dp2-z1"]["verdict"] == "agrees" and rows["dp2-z1"]["same_seed_gap"] == 0.0
    assert rows["tp2"]["verdict"] == "agrees"
    assert rows["tp2"]["loss_at"][50] == pytest.approx({"mean": 6.52, "min": 6.51, "max": 6.53})
    assert rows["pp2"]["verdict"] == "differs"
    assert rows["short"]["verdict"] == "missing"
    # compared with the run at the repeat's own seed, not with the lowest seed
    assert summary["repeat"]["seed"] == 2 and summary["repeat"]["max_abs_diff"] == pytest.approx(1e-7)
    text = "\n".join(lp.table(summary, show_at=(1, 10)))
    assert "pp2" in text and "differs" in text and "reference dp2-z1: seed spread at iteration 50 0.0200" in text
    # the JSON form (string keys) prints the same table
    again = json.loads(json.dumps(summary))
    assert lp.table(again, show_at=(1, 10)) == lp.table(summary, show_at=(1, 10))


@pytest.mark.parametrize("names, port, expected", [
    (["deepspeed_allreduce_buffer_0_127.0.0.1_29611_0", "deepspeed_allreduce_buffer_0_127.0.0.1_29611_1"], 29611,
     ["deepspeed_allreduce_buffer_0_127.0.0.1_29611_0", "deepspeed_allreduce_buffer_0_127.0.0.1_29611_1"]),
    # another job's port, another prefix, a longer port: left alone
    (["deepspeed_allreduce_buffer_0_127.0.0.1_29500_0", "other_29611_0",
      "deepspeed_allreduce_buffer_0_127.0.0.1_296110_0"], 29611, []),
])
def test_shm_buffer_names(names, port, expected):
    assert lp.shm_buffer_names(names, port) == expected


@pytest.mark.parametrize("name, present, absent", [
    ("dp2-z1", ["--no-pipeline-parallel", "--zero-stage 1", "--tensor-model-parallel-size 1"],
     ["--checkpoint-activations", "--load", "--bf16", "--fp16"]),
    ("dp2-z1-recompute", ["--checkpoint-activations", "--deepspeed-activation-checkpointing"], []),
    ("dp2-z3", ["--zero-stage 3", "--no-pipeline-parallel"], []),
    ("dp2-z0", ["--zero-stage 0"], []),
    ("tp2", ["--tensor-model-parallel-size 2", "--no-pipeline-parallel"], []),
    ("pp2", ["--pipeline-model-parallel-size 2"], ["--no-pipeline-parallel"]),
    ("tp2xpp2", ["--tensor-model-parallel-size 2", "--pipeline-model-parallel-size 2"], ["--no-pipeline-parallel"]),
])
def test_rows_render_through_the_roles_builder(name, present, absent):
    builder = lp.load_builder()
    row = [r for r in lp.ROWS if r["name"] == name][0]
    spec = lp.job_spec(row, 42, 50, "/d/sim_text_document", "/w/x", 29700)
    argv = " ".join(builder.train_args(spec)) + " "
    for flag in present + ["--seed 42", "--attention-dropout 0", "--hidden-dropout 0", "--global-batch-size 8",
                           "--micro-batch-size 1", "--no-masked-softmax-fusion", "--tokenizer-type NullTokenizer",
                           "--save /w/x/ckpt", "--train-iters 50"]:
        assert flag + " " in argv, flag
    for flag in absent:
        assert flag + " " not in argv, flag
    config = builder.ds_config(spec)
    dp = row["world"] // (row["tp"] * row["pp"])
    assert config["train_batch_size"] == 8 and config["gradient_accumulation_steps"] * dp == 8
    assert config["zero_optimization"]["stage"] == row["zero"]
    assert not config["bf16"]["enabled"] and not config["fp16"]["enabled"]
    assert builder.launch_args(spec) == ["--master_port", "29700", "--num_gpus", str(row["world"])]


def test_every_row_has_a_unique_name_and_the_reference_is_first():
    names = [r["name"] for r in lp.ROWS]
    assert len(names) == len(set(names)) and names[0] == lp.REFERENCE


@pytest.mark.parametrize("text, expected", [
    ("[rank0]:     transport_stream = get_accelerator().Stream(device=cuda_device)\n"
     "[rank0]: TypeError: 'NoneType' object is not callable\n[rank1]: TypeError: other\n",
     "TypeError: 'NoneType' object is not callable"),
    ("Traceback (most recent call last):\nModuleNotFoundError: No module named 'torchvision'\n",
     "ModuleNotFoundError: No module named 'torchvision'"),
    ("AssertionError\n", "AssertionError"),
    (ITER_LINE, None),
])
def test_first_error(text, expected):
    assert lp.first_error(text) == expected


def test_megatron_recompute_row_passes_megatrons_own_flags():
    builder = lp.load_builder()
    row = [r for r in lp.ROWS if r["name"] == "dp2-z1-recompute-megatron"][0]
    argv = " ".join(builder.train_args(lp.job_spec(row, 1, 50, "/d/x_text_document", "/w", 29700))) + " "
    assert "--recompute-granularity full --recompute-method uniform --recompute-num-layers 1 --seed 1 " in argv
    assert "--checkpoint-activations " not in argv and "--deepspeed-activation-checkpointing " not in argv
