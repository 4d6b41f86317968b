#!/usr/bin/env bash
# Build the Debian 12 node image used by molecule and the simulated cluster, offline:
# debootstrap a minbase root from the host's own Debian mirror, then `docker import` it.
# No container registry is needed. The image is tagged with a hash of this recipe and is
# rebuilt only when the recipe (this file) changes, or always with
# MEGATRON_DS_NODE_IMAGE_REBUILD=1 (CI sets it: an image kept from an earlier run can hide a
# step that only a new node needs, such as refreshing its empty package indexes).
set -euo pipefail

IMAGE_REPO="${MEGATRON_DS_NODE_IMAGE_REPO:-megatron-ds-node}"
IMAGE_TAG="${MEGATRON_DS_NODE_IMAGE_TAG:-bookworm}"
SUITE=bookworm
PACKAGES=python3,python3-apt,systemd,systemd-sysv,dbus,sudo,ca-certificates,openssh-server,iproute2,procps,gnupg

log() { printf 'build-node-image: %s\n' "$*" >&2; }

# One build at a time (the same lock as ensure-docker.sh): a second call waits for the first and
# then finds the image up to date.
exec 9>"${MEGATRON_DS_SETUP_LOCK:-/tmp/megatron-ds-setup.lock}"
flock 9

recipe_hash=$(sha256sum "$0" | cut -c1-16)
current=$(docker image inspect --format '{{ index .Config.Labels "megatron_ds.recipe" }}' \
  "${IMAGE_REPO}:${IMAGE_TAG}" 2>/dev/null || true)
if [ "$current" = "$recipe_hash" ] && [ "${MEGATRON_DS_NODE_IMAGE_REBUILD:-0}" != 1 ]; then
  log "${IMAGE_REPO}:${IMAGE_TAG} is up to date (recipe ${recipe_hash})"
  exit 0
fi

# Reuse the mirror this host already trusts, so the image builds wherever apt works.
mirror="${MEGATRON_DS_DEBIAN_MIRROR:-}"
if [ -z "$mirror" ]; then
  mirror=$( (grep -rhoE '^(URIs:|deb) +https?://[^ ]+/debian/?( |$)' /etc/apt/sources.list \
    /etc/apt/sources.list.d/ 2>/dev/null || true) | head -n1 | awk '{print $2}')
  mirror="${mirror:-http://deb.debian.org/debian}"
fi

if ! command -v debootstrap >/dev/null 2>&1; then
  if [ "$(id -u)" -eq 0 ]; then
    log "installing debootstrap"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
  else
    log "debootstrap is missing; install it (apt-get install debootstrap) and re-run"
    exit 1
  fi
fi

root=$(mktemp -d /var/tmp/megatron-ds-node.XXXXXX)
trap 'rm -rf "$root"' EXIT
log "debootstrap ${SUITE} from ${mirror} (about a minute)"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$root" "$mirror" >/dev/null

# Containers use the same mirror with the main, non-free and non-free-firmware components
# (Debian's NVIDIA packages live in non-free).
cat >"$root/etc/apt/sources.list" <<SOURCES
deb ${mirror} ${SUITE} main contrib non-free non-free-firmware
deb ${mirror} ${SUITE}-updates main contrib non-free non-free-firmware
SOURCES
# Units that cannot work in a container and only slow boot or fail.
for unit in getty.target systemd-remount-fs.service systemd-udevd.service \
  systemd-udev-trigger.service sys-kernel-debug.mount; do
  ln -sf /dev/null "$root/etc/systemd/system/$unit"
done
rm -f "$root"/etc/ssh/ssh_host_*_key*  # every container generates its own host keys
mkdir -p "$root/etc/systemd/system/ssh.service.d"
# The stock unit tests the config (sshd -t) first, which fails without host keys.
printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' \
  >"$root/etc/systemd/system/ssh.service.d/hostkeys.conf"
rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*

log "importing ${IMAGE_REPO}:${IMAGE_TAG}"
tar -C "$root" -c . | docker import \
  --change "LABEL megatron_ds.recipe=${recipe_hash}" \
  --change 'CMD ["/sbin/init"]' \
  --change 'ENV container=docker' \
  - "${IMAGE_REPO}:${IMAGE_TAG}" >/dev/null
log "built ${IMAGE_REPO}:${IMAGE_TAG} (recipe ${recipe_hash})"
