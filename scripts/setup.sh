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
  # llvm-mca: the independent cross-check of the Cortex-M7/M33 timing models (tests/test_llvm_mca.py)
  llvm
  # the farm service on a real PostgreSQL server (the tests start their own, on loopback)
  postgresql
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

# Python >= 3.12: the Joulescope driver and pyjls releases we use need it (README, "Python").
pick_python() {
  local cands=(python3.12 python3.13 python3)
  # pyenv installs that are not the global version (their shims refuse to run)
  local root="${PYENV_ROOT:-$HOME/.pyenv}"
  for d in "$root"/versions/3.12* "$root"/versions/3.13*; do
    [ -x "$d/bin/python3" ] && cands+=("$d/bin/python3")
  done
  for cand in "${cands[@]}"; do
    if command -v "$cand" >/dev/null 2>&1 &&
        "$cand" -c 'import sys, venv; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      command -v "$cand"
      return 0
    fi
  done
  return 1
}
if [ -x .venv/bin/python ] && ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 12))'; then
  echo "[setup] .venv has Python < 3.12: recreating it"
  rm -rf .venv
fi
if [ ! -x .venv/bin/python ]; then
  PY=$(pick_python) || {
    echo "[setup] no Python >= 3.12 found (tried python3.12, python3.13, python3)." >&2
    echo "        Install one (e.g. 'pyenv install 3.12', or Debian 13's python3) and rerun." >&2
    exit 1
  }
  echo "[setup] creating .venv with $PY ($("$PY" --version))"
  "$PY" -m venv .venv
fi
stamp=.venv/.aidge-deploy-installed
if [ ! -f "$stamp" ] || [ pyproject.toml -nt "$stamp" ]; then
  echo "[setup] pip install -e .[dev,farm] (log: .venv/pip-install.log)"
  # labgrid #1245: pyserial and pyserial-labgrid both install `serial`; reinstall labgrid's
  # fork last (same API, RFC2217 fixes) so whichever pip unpacked last does not matter
  if ! { .venv/bin/python -m pip install --upgrade pip && .venv/bin/python -m pip install -e ".[dev,farm]" &&
         .venv/bin/python -m pip install --force-reinstall --no-deps "pyserial-labgrid==3.5.0.2" &&
         .venv/bin/python -c 'import serial, serial.rfc2217, serial.tools.list_ports; assert serial.VERSION == "3.5.0.2", serial.VERSION'; } \
      > .venv/pip-install.log 2>&1; then
    tail -40 .venv/pip-install.log >&2
    echo "[setup] pip install failed; full log in .venv/pip-install.log" >&2
    exit 1
  fi
  touch "$stamp"
fi
echo "[setup] ready: $(.venv/bin/aidge-deploy --help >/dev/null && echo aidge-deploy installed)"
