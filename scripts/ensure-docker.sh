#!/usr/bin/env bash
# Make sure a Docker engine answers, because molecule and the simulated cluster need one.
# Uses a running engine when there is one. Otherwise, as root on Debian/Ubuntu, installs
# docker.io from the distro and starts dockerd in the background, saying so. Otherwise it
# explains what is missing and exits non-zero.
set -euo pipefail

log() { printf 'ensure-docker: %s\n' "$*" >&2; }
dockerd_log="${MEGATRON_DS_DOCKERD_LOG:-/var/log/dockerd.log}"

# One setup at a time: .ci/run builds the node image in the background while the unit tests run,
# and make test's own `image` step then waits here instead of installing or building twice.
exec 9>"${MEGATRON_DS_SETUP_LOCK:-/tmp/megatron-ds-setup.lock}"
flock 9

if docker info >/dev/null 2>&1; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  log "no Docker engine answers and this is not root. Start Docker, or add this user to the"
  log "'docker' group (then log in again), and re-run."
  exit 1
fi

if ! command -v dockerd >/dev/null 2>&1; then
  if [ -r /etc/os-release ] && grep -Eq '^ID(_LIKE)?=.*(debian|ubuntu)' /etc/os-release; then
    log "installing docker.io from the distribution's packages"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq docker.io >/dev/null
  else
    log "no dockerd and this is not Debian/Ubuntu: install a Docker engine and re-run."
    exit 1
  fi
fi

if command -v systemctl >/dev/null 2>&1 && systemctl is-system-running >/dev/null 2>&1; then
  log "starting docker.service"
  systemctl start docker
else
  # Build machines and CI runners here have no systemd as PID 1.
  # A dockerd that died (killed, out of memory) leaves its pid file, and a new one refuses to
  # start beside it ("pid file found"): remove it when no process has that pid any more.
  pidfile="${MEGATRON_DS_DOCKERD_PIDFILE:-/var/run/docker.pid}"
  if [ -s "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
    log "removing $pidfile: the dockerd it names ($(cat "$pidfile")) is gone"
    rm -f "$pidfile"
  fi
  log "starting dockerd in the background (log: $dockerd_log)"
  # 9>&-: the daemon must not inherit the setup lock's descriptor, or the lock stays held for
  # as long as dockerd runs and the next setup step (the node image build) waits forever.
  nohup dockerd >"$dockerd_log" 2>&1 9>&- &
fi

for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then
    log "Docker engine is up"
    exit 0
  fi
  sleep 1
done
log "dockerd did not answer within 60 s; see $dockerd_log"
exit 1
