#!/usr/bin/env bash
# One-time, idempotent set-up on a fresh Debian machine: system packages, a virtualenv, the package.
# Used by ./run.sh (and so by CI). Run as root, or with sudo available for apt-get.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(
  # host target: CMake exports of aidge_export_cpp
  cmake g++ make python3-venv python3-dev
  # emulated Cortex-M boards: cross toolchain, C++ runtime, QEMU
  gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib qemu-system-arm
  # physical boards: OpenOCD (pyOCD comes from PyPI with aidge-export-arm-cortexm)
  openocd
  # Linux boards over SSH / Docker and the aarch64 stand-in (test boards start their own daemons)
  openssh-server openssh-client iproute2 iptables docker.io
  g++-aarch64-linux-gnu qemu-user qemu-user-static binfmt-support procps util-linux
  # HTML report check in headless Chromium
  chromium
)

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "[setup] apt-get install ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    > /tmp/aidge-deploy-apt.log 2>&1 || { tail -30 /tmp/aidge-deploy-apt.log >&2; exit 1; }
fi

if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv"
  python3 -m venv .venv
fi
stamp=.venv/.aidge-deploy-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "[setup] pip install -e .[dev] (log: .venv/pip-install.log)"
  if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -e ".[dev]"; } \
      > .venv/pip-install.log 2>&1; then
    tail -40 .venv/pip-install.log >&2
    echo "[setup] pip install failed; full log in .venv/pip-install.log" >&2
    exit 1
  fi
  touch "$stamp"
fi
echo "[setup] ready: $(.venv/bin/aidge-deploy --help >/dev/null && echo aidge-deploy installed)"
