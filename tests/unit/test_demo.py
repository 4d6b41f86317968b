# -*- coding: utf-8 -*-
"""scripts/demo.py: the Megatron-DeepSpeed source, the plan, the run and the summary of `make demo`.

The real run needs Docker and the simulated nodes (`make demo`, CI's demo step); here the
playbooks are replaced by a stand-in ansible-playbook that records its arguments, so the path
with MEGATRON_DS_SRC (prepare_data, train, stop) is exercised without a checkout.
"""
from __future__ import annotations

import hashlib
import importlib.util
import io
import json
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("demo", REPO / "scripts" / "demo.py")
demo = importlib.util.module_from_spec(_spec)
sys.modules["demo"] = demo
_spec.loader.exec_module(demo)


# ------------------------------------------------------------------------------------------------
# Source and plan
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("env, expected", [
    ({}, None),
    ({"MEGATRON_DS_SRC": ""}, None),
    ({"MEGATRON_DS_SRC": "/src/Megatron-DeepSpeed"}, "src"),
    ({"MEGATRON_DS_ARCHIVE": "/tmp/mds.tar.gz"}, "archive"),
    ({"MEGATRON_DS_SRC": "/src/m", "MEGATRON_DS_ARCHIVE": "/tmp/mds.tar.gz"}, "src"),
    ({"MEGATRON_DS_SRC": "", "MEGATRON_DS_ARCHIVE": "/tmp/mds.tar.gz"}, "archive"),
])
def test_megatron_source(env, expected):
    assert demo.megatron_source(env) == expected


@pytest.mark.parametrize("env, steps", [
    ({}, ["site", "burnin"]),
    ({"MEGATRON_DS_SRC": "/src/m"}, ["site", "burnin", "prepare_data", "train", "stop"]),
    ({"MEGATRON_DS_ARCHIVE": "/a.tar.gz"}, ["site", "burnin", "prepare_data", "train", "stop"]),
])
def test_plan_runs_pretrain_only_with_a_source(env, steps, tmp_path):
    assert [s.name for s in demo.plan(env, tmp_path)] == steps


@pytest.mark.parametrize("iterations", [1, 3, 10])
def test_plan_waits_for_the_iterations_asked_and_writes_tensorboard(iterations, tmp_path):
    plan = {s.name: s for s in demo.plan({"MEGATRON_DS_SRC": "/src/m"}, tmp_path, iterations)}
    assert plan["train"].playbook == "playbooks/train.yml"
    assert plan["train"].extra_vars["megatron_launch_wait"] == iterations
    assert plan["train"].extra_vars["megatron_job_tensorboard_dir"] == demo.TENSORBOARD_DIR
    # with a source every playbook runs on cpu-pypi: the real trainer imports torchvision
    assert plan["burnin"].extra_vars == {"megatron_launch_burnin_dest": str(tmp_path / "burnin.json"),
                                         "megatron_stack_profile": "cpu-pypi"}
    assert plan["prepare_data"].extra_vars == {"megatron_data_input": str(tmp_path / "corpus.jsonl"),
                                               "megatron_stack_profile": "cpu-pypi"}
    assert all((REPO / s.playbook).is_file() for s in plan.values())


@pytest.mark.parametrize("env, profile", [
    ({}, "cpu"),
    ({"MEGATRON_DS_SRC": "/src/m"}, "cpu-pypi"),
    ({"MEGATRON_DS_ARCHIVE": "/a.tar.gz"}, "cpu-pypi"),
])
def test_the_nodes_profile_follows_the_source(env, profile, tmp_path):
    assert demo.demo_profile(env) == profile
    for step in demo.plan(env, tmp_path):
        assert step.extra_vars.get("megatron_stack_profile", "cpu") == profile


@pytest.mark.parametrize("scheduler, expected", [("none", {}), ("slurm", {"megatron_scheduler": "slurm"})])
def test_plan_passes_the_scheduler_to_every_playbook(scheduler, expected, tmp_path):
    steps = demo.plan({"MEGATRON_DS_SRC": "/src/m"}, tmp_path, 3, scheduler)
    assert len(steps) == 5
    for step in steps:
        assert {k: v for k, v in step.extra_vars.items() if k == "megatron_scheduler"} == expected


def test_plan_refuses_an_unknown_scheduler(tmp_path):
    with pytest.raises(ValueError, match="expected one of none, slurm"):
        demo.plan({}, tmp_path, 3, "pbs")


@pytest.mark.parametrize("scheduler, line", [
    ("none", "launch:       pdsh from the head node"),
    ("slurm", "launch:       Slurm: sbatch, srun starts the ranks"),
])
def test_summary_names_the_launch_backend(scheduler, line, tmp_path):
    steps = demo.plan({}, tmp_path, 3, scheduler)
    results = [demo.Result(s, 0, 10.0, tmp_path / (s.name + ".log"), "") for s in steps]
    assert line in "\n".join(demo.summary(results, None, None, tmp_path))


def test_the_corpus_is_token_ids_below_the_vocabulary(tmp_path):
    demo.write_corpus(tmp_path / "c.jsonl", docs=50, vocab=100)
    docs = [json.loads(line)["text"].split() for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert len(docs) == 50
    assert all(0 < int(t) < 100 for doc in docs for t in doc)


def _checkout(root: Path) -> Path:
    src = root / "Megatron-DeepSpeed"
    for name, body in {"pretrain_gpt.py": "print('gpt')\n", "megatron/__init__.py": "", ".git/HEAD": "ref\n",
                       "megatron/__pycache__/x.pyc": "", "megatron/data/helpers.cpython-311.so": "",
                       "build/lib/x.py": "", "megatron/build/keep.py": "kept\n"}.items():
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        (src / name).write_text(body)
    return src


def test_prepare_source_packs_a_checkout_without_git_bytecode_or_builds(tmp_path):
    src = _checkout(tmp_path)
    cache = tmp_path / "cache"
    line = demo.prepare_source({"MEGATRON_DS_SRC": str(src)}, cache)
    archive = cache / demo.ARCHIVE_NAME
    with tarfile.open(archive) as tar:
        names = sorted(m.name for m in tar.getmembers() if m.isfile())
    assert names == ["Megatron-DeepSpeed/megatron/__init__.py", "Megatron-DeepSpeed/megatron/build/keep.py",
                     "Megatron-DeepSpeed/pretrain_gpt.py"]
    assert (cache / (demo.ARCHIVE_NAME + ".sha256")).read_text().strip() == hashlib.sha256(archive.read_bytes()).hexdigest()
    assert "packed from %s" % src in line


def _tar(path: Path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name in members:
            info = tarfile.TarInfo(name)
            info.size = 3
            tar.addfile(info, io.BytesIO(b"x\n\n"))
    return path


def test_prepare_source_copies_an_archive_with_one_top_directory(tmp_path):
    given = _tar(tmp_path / "mds.tar.gz", ["Megatron-DeepSpeed-main/pretrain_gpt.py", "Megatron-DeepSpeed-main/megatron/a.py"])
    cache = tmp_path / "cache"
    demo.prepare_source({"MEGATRON_DS_ARCHIVE": str(given)}, cache)
    assert (cache / demo.ARCHIVE_NAME).read_bytes() == given.read_bytes()
    assert (cache / (demo.ARCHIVE_NAME + ".sha256")).read_text().strip() == hashlib.sha256(given.read_bytes()).hexdigest()


@pytest.mark.parametrize("members, message", [
    (["a/pretrain_gpt.py", "b/x.py"], "holds ['a', 'b'] at its top"),
    (["pretrain_gpt.py"], "without <top>/pretrain_gpt.py"),
    (["Megatron-DeepSpeed/megatron/a.py"], "without <top>/pretrain_gpt.py"),
])
def test_prepare_source_refuses_an_archive_python_env_cannot_use(members, message, tmp_path):
    given = _tar(tmp_path / "bad.tar.gz", members)
    with pytest.raises(SystemExit, match="MEGATRON_DS_ARCHIVE .*" + __import__("re").escape(message)):
        demo.prepare_source({"MEGATRON_DS_ARCHIVE": str(given)}, tmp_path / "cache")
    assert not (tmp_path / "cache" / demo.ARCHIVE_NAME).exists()


@pytest.mark.parametrize("env_key, make, message", [
    ("MEGATRON_DS_SRC", lambda p: p.mkdir() or p, "has no pretrain_gpt.py"),
    ("MEGATRON_DS_ARCHIVE", lambda p: p.write_text("not a tar") and p, "not a readable tar archive"),
])
def test_prepare_source_names_the_variable_the_value_and_the_fix(env_key, make, message, tmp_path):
    bad = make(tmp_path / "bad")
    with pytest.raises(SystemExit) as err:
        demo.prepare_source({env_key: str(bad)}, tmp_path / "cache")
    assert env_key in str(err.value) and str(bad) in str(err.value) and message in str(err.value)
    assert "expected" in str(err.value)


def test_prepare_source_without_a_source_removes_a_stale_archive(tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    for name in (demo.ARCHIVE_NAME, demo.ARCHIVE_NAME + ".sha256"):
        (cache / name).write_text("old")
    line = demo.prepare_source({}, cache)
    assert list(cache.iterdir()) == []
    assert "skipped" in line


# ------------------------------------------------------------------------------------------------
# Reading the playbooks' output
# ------------------------------------------------------------------------------------------------
RECAP = """PLAY RECAP *********************************************************************
localhost                  : ok=5    changed=0    unreachable=0    failed=0    skipped=0    rescued=0    ignored=0
sim-node1                  : ok=201  changed=0    unreachable=0    failed=0    skipped=90   rescued=0    ignored=0
sim-node2                  : ok=180  changed=0    unreachable=0    failed=0    skipped=95   rescued=0    ignored=0
sim-node3                  : ok=180  changed=1    unreachable=0    failed=0    skipped=95   rescued=0    ignored=0
"""


@pytest.mark.parametrize("output, expected", [
    (RECAP, ["sim-node1", "sim-node2", "sim-node3"]),
    ("PLAY RECAP\nnode8 : ok=1 changed=0 unreachable=1 failed=0\n" + RECAP, ["node8", "sim-node1", "sim-node2", "sim-node3"]),
    ("no recap", []),
])
def test_recap_hosts(output, expected):
    assert demo.recap_hosts(output) == expected


@pytest.mark.parametrize("output, expected", [
    ('ok: [sim-node1] => {"msg": "preflight passed for profile cpu on 3 node(s): 0 failed, 6 warning(s)"}',
     "preflight passed for profile cpu on 3 node(s): 0 failed, 6 warning(s)"),
    ("fatal: [sim-node1]: FAILED! => preflight FAILED for profile cpu on 3 node(s): 1 failed, 0 warning(s).\n",
     "preflight FAILED for profile cpu on 3 node(s): 1 failed, 0 warning(s)"),
    ("Preflight passed on 8 nodes, report: /x/preflight-1.txt\nlater: preflight failed on node3",
     "preflight failed on node3"),
    ("TASK [Preflight | Compare every node] ***", None),
    # The action wraps its message to the terminal: the report path went on the next line, and
    # the summary showed "...; report:" without it.
    ("    msg: |-\n        WARN node1 memlock ...\n"
     "        preflight passed for profile cpu on 3 node(s): 0 failed, 3 warning(s), 40 passed; report:\n"
     "             /root/.ansible/megatron_ds/reports/preflight-20261201T053350Z.txt\n    profile: cpu\n",
     "preflight passed for profile cpu on 3 node(s): 0 failed, 3 warning(s), 40 passed; report: "
     "/root/.ansible/megatron_ds/reports/preflight-20261201T053350Z.txt"),
    ("        preflight FAILED for profile cpu on 8 node(s): 2 failed, 0 warning(s); failing: node1,\n"
     "             node2; report: /r/preflight-1.txt\n\nPLAY RECAP ***\n",
     "preflight FAILED for profile cpu on 8 node(s): 2 failed, 0 warning(s); failing: node1, node2; report: /r/preflight-1.txt"),
    # a line at the same depth is the next key, not part of the verdict
    ("        preflight passed for profile cpu on 1 node(s): 0 failed; report:\n        next: line\n",
     "preflight passed for profile cpu on 1 node(s): 0 failed; report:"),
])
def test_preflight_verdict(output, expected):
    assert demo.preflight_verdict(output) == expected


# ------------------------------------------------------------------------------------------------
# The summary
# ------------------------------------------------------------------------------------------------
BURNIN = {
    "world": 6, "initial_loss": 6.25, "final_loss": 4.36, "passed": True, "problems": [],
    "head": "sim-node1", "inventory_nodes": ["sim-node1", "sim-node2", "sim-node3"],
    "log_file": "/opt/megatron/jobs/sim-gpt/logs/burnin.log",
    "nodes": {"sim-node1": {"ranks": 2, "tokens_per_s": 2594.04}, "sim-node2": {"ranks": 2, "tokens_per_s": 2593.0},
              "sim-node3": {"ranks": 2, "tokens_per_s": 2439.4}},
}
VERDICT = 'ok: [sim-node1] => {"msg": "preflight passed for profile cpu on 3 node(s): 0 failed, 6 warning(s)"}\n'


def _results(tmp_path, names, rcs=None, output=VERDICT + RECAP):
    steps = {s.name: s for s in demo.plan({"MEGATRON_DS_SRC": "/m"}, tmp_path)}
    rcs = rcs or {}
    return [demo.Result(steps[n], rcs.get(n, 0), 65.0, tmp_path / ("%s.log" % n), output) for n in names]


def test_summary_without_a_source_says_once_that_the_checkout_was_skipped_and_how_to_add_it(tmp_path):
    text = "\n".join(demo.summary(_results(tmp_path, ["site", "burnin"]), BURNIN, None, tmp_path))
    assert text.count("Megatron-DeepSpeed: skipped") == 1
    assert text.count("MEGATRON_DS_SRC=") == 1 and text.count("MEGATRON_DS_ARCHIVE=") == 1
    assert "nodes:        3 (sim-node1 head, sim-node2, sim-node3)" in text
    assert "preflight:    preflight passed for profile cpu on 3 node(s): 0 failed, 6 warning(s)" in text
    assert "6 ranks, loss 6.250 -> 4.360" in text
    for node, figure in (("sim-node1", "2594.0"), ("sim-node2", "2593.0"), ("sim-node3", "2439.4")):
        assert any(line.split()[:2] == [node, figure] for line in text.splitlines()), (node, text)
    assert "burn-in log /opt/megatron/jobs/sim-gpt/logs/burnin.log on sim-node1" in text
    assert "TensorBoard:  none written" in text
    assert "site 1 min 05 s, burnin 1 min 05 s; total 2 min 10 s" in text
    assert "FAILED" not in text


def test_summary_with_a_source_names_the_training_run_and_tensorboard(tmp_path):
    text = "\n".join(demo.summary(_results(tmp_path, ["site", "burnin", "prepare_data", "train", "stop"]), BURNIN, "src",
                                  tmp_path))
    assert "skipped" not in text
    assert "pretrain_gpt.py ran its first iterations on every node" in text
    assert "TensorBoard:  %s on sim-node3" % demo.TENSORBOARD_DIR in text


def test_summary_of_a_failed_site_run_names_the_step_and_its_log(tmp_path):
    results = _results(tmp_path, ["site"], {"site": 2}, output="fatal: preflight FAILED for profile cpu on 3 node(s): "
                       "1 failed, 0 warning(s)\n" + RECAP)
    text = "\n".join(demo.summary(results, None, None, tmp_path, failed=results[0]))
    assert "preflight:    preflight FAILED for profile cpu on 3 node(s): 1 failed, 0 warning(s)" in text
    assert "FAILED at site.yml (exit 2): read %s" % results[0].log in text
    assert "nodes:        3 (sim-node1 head, sim-node2, sim-node3)" in text


def test_summary_of_a_failed_burnin_shows_its_problems(tmp_path):
    report = dict(BURNIN, passed=False, problems=["loss did not go down"])
    text = "\n".join(demo.summary(_results(tmp_path, ["site", "burnin"], {"burnin": 2}), report, None, tmp_path))
    assert "FAILED: loss did not go down" in text


# ------------------------------------------------------------------------------------------------
# The run, with a stand-in ansible-playbook
# ------------------------------------------------------------------------------------------------
FAKE = """#!{python}
import json, sys
args = sys.argv[1:]
with open({calls!r}, "a") as h:
    h.write(json.dumps(args) + "\\n")
extra = json.loads(args[args.index("-e") + 1]) if "-e" in args else {{}}
if "megatron_launch_burnin_dest" in extra:
    with open(extra["megatron_launch_burnin_dest"], "w") as h:
        json.dump({burnin}, h)
if args[2].endswith("prepare_data.yml"):
    assert open(extra["megatron_data_input"]).readline().startswith('{{"text": ')
print('ok: [sim-node1] => {{"msg": "preflight passed for profile cpu on 3 node(s): 0 failed, 0 warning(s)"}}')
print({recap!r})
sys.exit({fail!r} if args[2].endswith({fail_at!r}) else 0)
"""


@pytest.mark.parametrize("env, fail_at, playbooks, rc", [
    ({}, "none", ["site.yml", "playbooks/burnin.yml"], 0),
    ({"MEGATRON_DS_SRC": "/src/m"}, "none",
     ["site.yml", "playbooks/burnin.yml", "playbooks/prepare_data.yml", "playbooks/train.yml", "playbooks/stop.yml"], 0),
    ({"MEGATRON_DS_SRC": "/src/m"}, "train.yml",
     ["site.yml", "playbooks/burnin.yml", "playbooks/prepare_data.yml", "playbooks/train.yml"], 2),
    ({}, "site.yml", ["site.yml"], 2),
])
def test_run_plays_the_plan_in_order_and_stops_at_a_failure(env, fail_at, playbooks, rc, tmp_path, monkeypatch, capsys):
    calls = tmp_path / "calls.jsonl"
    fake = tmp_path / "ansible-playbook"
    fake.write_text(FAKE.format(python=sys.executable, calls=str(calls), burnin=repr(BURNIN), recap=RECAP,
                                fail=2, fail_at=fail_at))
    fake.chmod(0o755)
    monkeypatch.setattr(demo, "ansible_playbook", lambda: str(fake))
    for key in ("MEGATRON_DS_SRC", "MEGATRON_DS_ARCHIVE"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert demo.main(["run", "--inventory", "inv", "--logs", str(tmp_path / "logs"), "--train-iterations", "2"]) == rc
    args = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [a[2] for a in args] == playbooks
    assert all(a[:2] == ["-i", "inv"] for a in args)
    train = [json.loads(a[4]) for a in args if a[2] == "playbooks/train.yml"]
    assert not train or train[0]["megatron_launch_wait"] == 2
    (run_dir,) = (tmp_path / "logs").iterdir()
    assert sorted(p.name for p in run_dir.glob("*.log")) == sorted(
        "%d-%s.log" % (i, Path(p).stem) for i, p in enumerate(playbooks, 1))
    out = capsys.readouterr().out
    summary = (run_dir / "summary.txt").read_text()
    assert summary.strip() in out
    assert ("Megatron-DeepSpeed: skipped" in summary) == (not env)
    assert ("FAILED at" in summary) == (rc != 0)
