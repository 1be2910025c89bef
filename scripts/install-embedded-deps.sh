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

exec bash "$(dirname "$0")/apt-install-missing.sh" install-embedded-deps "${packages[@]}"
