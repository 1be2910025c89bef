#!/usr/bin/env bash
# Installs what the embedded build and its firmware tests need (docs/embedded.md): the
# bare-metal Arm toolchain with newlib and its libstdc++, and QEMU for Arm, from Debian's
# packages, skipping what is already present. Idempotent; `make embedded-test` calls it.
set -euo pipefail

packages=(
  gcc-arm-none-eabi libnewlib-arm-none-eabi libstdc++-arm-none-eabi-newlib  # Cortex-M
  qemu-system-arm            # mps2-an386 (Cortex-M4) with semihosting runs the firmware tests
  cmake ninja-build ccache
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

echo "install-embedded-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
