#!/usr/bin/env bash
# Installs what ember's build, tests and demo need, from Debian's packages, skipping what
# is already present. Idempotent; every Makefile entry point calls it.
set -euo pipefail

packages=(
  g++ cmake ninja-build ccache pkg-config clang-format
  clang                      # libFuzzer for `make fuzz` (record readers)
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev            # the reference BLAS the benchmarks compare with
  zlib1g-dev                 # gzip IDX files (data layer)
  libsqlite3-dev             # SqliteDataset and SqliteWriter (data layer)
  libstb-dev                 # PNG/JPEG/BMP decoding for ImageFolderDataset (data layer)
  libcairo2-dev              # training curves and confusion matrices as PNG (train layer)
  libexpat1-dev              # the train tests parse the SVG pictures
  nlohmann-json3-dev         # nn configs as JSON (EMBER_CONFIG)
  libfmt-dev                 # the train layer's dashboard and logs
  dataset-fashion-mnist      # the demo's data
  fortunes-min               # the char_lm example's corpus (fortunes has more text)
  python3 python3-numpy python3-torch  # independent reference values for tests
  # The Vulkan backend: the loader, shaderc with the static glslang / SPIRV-Tools it links,
  # and Mesa's lavapipe (a CPU Vulkan driver) that its tests run on.
  libvulkan-dev libshaderc-dev glslang-dev spirv-tools mesa-vulkan-drivers
  libonnx-dev libprotobuf-dev libonnx-testdata  # ONNX import (ember::onnx) and its node tests
  python3-torchvision  # ResNet-18 and MobileNetV2 for the ONNX real-model tests
  libtorch-dev               # the LibTorch backend (libember_libtorch.so): ATen 1.13, CPU
)

exec bash "$(dirname "$0")/apt-install-missing.sh" install-deps "${packages[@]}"
