"""The job's token (molecule.yml megatron_job_env MOLECULE_JOB_TOKEN), checked last, after the
burn-ins, the training runs and the reconverge have written their files and logs.

It must reach the job's .deepspeed_env (a job's environment is what it is for), and be in no file
of a node that other users may read (the training user's own group at most: DeepSpeed's runner
logs its pdsh command, exports included, into the job's log), nor in the converge's output,
--diff included (issue 39)."""
from __future__ import annotations

from launch_helpers import NODES, node, secret_scan

TOKEN = "SENTINEL-JOB-TOKEN-e51f"
USER = "megatron"


def test_the_jobs_token_is_in_no_log_and_no_diff():
    assert secret_scan.in_log([TOKEN]) == []


def test_the_jobs_token_reached_the_job_files_the_ranks_read():
    head = node(NODES[0])
    env_file = head.file("/opt/megatron/jobs/sim-gpt/.deepspeed_env")
    assert env_file.mode == 0o600 and env_file.user == USER
    assert "MOLECULE_JOB_TOKEN=" + TOKEN in env_file.content_string


def test_the_jobs_token_is_in_no_file_others_read():
    for name in NODES:
        host = node(name)
        # World-readable: none. Group-readable: only the training user's own group's files.
        world = secret_scan.readable_copies(host, [TOKEN], perm="/004")
        assert world == [], (name, world)
        for path in secret_scan.readable_copies(host, [TOKEN]):
            found = host.file(path)
            assert found.group == USER and found.mode & 0o007 == 0, (name, path, oct(found.mode), found.group)
