"""scripts/ensure-docker.sh: the setup lock it takes is free again once it returns.

.ci/run builds the node image in the background while make test runs, and both steps take the
same setup lock (flock on a file descriptor). The dockerd that ensure-docker.sh starts in the
background once inherited that descriptor, so on a machine without a running engine the lock
stayed held for as long as dockerd ran, and the image build waited for ever. Here `docker` and
`dockerd` are stand-ins on PATH (this tests the script's locking, not Docker): `docker info`
fails until the stand-in daemon has started, which then sleeps as a daemon would.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Dict, Tuple

import pytest

SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "ensure-docker.sh"


def _stand_ins(tmp_path: Path, **extra_env: str) -> Tuple[Dict[str, str], Path]:
    """``docker``, ``dockerd`` and ``systemctl`` stand-ins on PATH, and the environment that runs
    the script with them: ``docker info`` fails until the stand-in daemon has started, which writes
    its pid to the returned file and sleeps as a daemon would."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    up, pid_file = tmp_path / "up", tmp_path / "dockerd.pid"
    scripts = {
        "docker": f'#!/bin/sh\n[ -e "{up}" ]\n',
        "dockerd": f'#!/bin/sh\necho $$ > "{pid_file}"\ntouch "{up}"\nexec sleep 60\n',
        # Not PID 1 systemd: the script takes its nohup path, as on the CI machines.
        "systemctl": "#!/bin/sh\nexit 1\n",
    }
    for name, text in scripts.items():
        (stubs / name).write_text(text)
        (stubs / name).chmod(0o755)
    env = dict(os.environ, PATH=f"{stubs}:{os.environ['PATH']}", MEGATRON_DS_SETUP_LOCK=str(tmp_path / "setup.lock"),
               MEGATRON_DS_DOCKERD_LOG=str(tmp_path / "dockerd.log"), **extra_env)
    return env, pid_file


def _stop(pid_file: Path) -> None:
    if pid_file.exists():
        try:
            os.kill(int(pid_file.read_text()), signal.SIGTERM)
        except ProcessLookupError:
            pass


@pytest.mark.skipif(os.geteuid() != 0, reason="ensure-docker.sh starts dockerd only as root")
@pytest.mark.skipif(shutil.which("flock") is None, reason="flock (util-linux) is not installed")
def test_the_setup_lock_is_free_while_the_started_dockerd_runs(tmp_path):
    env, pid_file = _stand_ins(tmp_path)
    lock = Path(env["MEGATRON_DS_SETUP_LOCK"])
    try:
        run = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=90, check=False)
        assert run.returncode == 0, run.stderr
        assert "starting dockerd in the background" in run.stderr
        daemon = int(pid_file.read_text())
        os.kill(daemon, 0)  # still running
        held = subprocess.run(["flock", "--nonblock", str(lock), "true"], check=False)
        assert held.returncode == 0, "the started dockerd holds the setup lock"
    finally:
        _stop(pid_file)


@pytest.mark.skipif(os.geteuid() != 0, reason="ensure-docker.sh starts dockerd only as root")
@pytest.mark.skipif(shutil.which("flock") is None, reason="flock (util-linux) is not installed")
@pytest.mark.parametrize("owner_alive, removed", [(False, True), (True, False)])
def test_a_pid_file_left_by_a_dead_dockerd_is_removed_before_the_start(tmp_path, owner_alive, removed):
    """A dockerd that died leaves /var/run/docker.pid, and the next one refused to start beside it
    ("pid file found"): .ci/run's image build then failed. A pid file whose process lives stays."""
    docker_pid = tmp_path / "docker.pid"
    owner = subprocess.Popen(["sleep", "60"]) if owner_alive else None
    if owner is None:
        finished = subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
        docker_pid.write_text(finished.stdout)
    else:
        docker_pid.write_text("%d\n" % owner.pid)
    env, started = _stand_ins(tmp_path, MEGATRON_DS_DOCKERD_PIDFILE=str(docker_pid))
    try:
        run = subprocess.run(["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=90, check=False)
        assert run.returncode == 0, run.stderr
        assert docker_pid.exists() is not removed
        assert ("is gone" in run.stderr) is removed
    finally:
        _stop(started)
        if owner is not None:
            owner.kill()
