#!/usr/bin/env bash
# Install the host tools the sandbox image build needs (debootstrap), idempotently.
# Only needed where a Docker daemon is reachable: without one the sandbox tests skip.
set -euo pipefail
if command -v debootstrap >/dev/null 2>&1; then
  echo "[sandbox-prereqs] debootstrap is installed"
  exit 0
fi
if [ -z "${DOCKER_HOST:-}" ] && [ ! -S /var/run/docker.sock ]; then
  echo "[sandbox-prereqs] no Docker daemon socket: skipping host tools (sandbox tests will skip)"
  exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
  if sudo -n true 2>/dev/null; then
    SUDO="sudo -n"
  else
    echo "[sandbox-prereqs] debootstrap is missing and installing it needs root:" >&2
    echo "    sudo apt-get install -y debootstrap debian-archive-keyring" >&2
    exit 1
  fi
fi
if ! command -v apt-get >/dev/null 2>&1; then
  echo "[sandbox-prereqs] debootstrap is missing and there is no apt-get: install debootstrap with your package manager" >&2
  exit 1
fi
echo "[sandbox-prereqs] installing debootstrap with apt-get"
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends debootstrap debian-archive-keyring
echo "[sandbox-prereqs] debootstrap installed"
