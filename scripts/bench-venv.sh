#!/usr/bin/env bash
# Creates .venv/ with the current PyTorch from PyPI, for comparing ember with recent eager
# PyTorch and with torch.compile. Optional and for benchmarks only: the build, the tests
# and CI use Debian's python3-torch and never this.
#
#   scripts/bench-venv.sh                 # create or update .venv/
#   EMBER_BENCH_PYTHON=.venv/bin/python build/benches/ember-bench              # eager
#   EMBER_BENCH_PYTHON=.venv/bin/python build/benches/ember-bench --torch-compile
#
# Only plain PyPI is reachable here (not download.pytorch.org's CPU index), and PyPI's
# Linux x86-64 torch wheel is the CUDA build: torch itself plus several GB of nvidia-*
# wheels. Current torch (2.15) does not import without them (libcufile.so.0), so they are
# installed by default; EMBER_VENV_FULL=0 installs torch without its nvidia-* dependencies
# (enough for older 2.x wheels on the CPU).
# torch.compile additionally needs a C++ compiler (g++ is already required by the build).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="$root/.venv"
python="${PYTHON:-/usr/bin/python3}"

if [ ! -x "$venv/bin/python" ]; then
  echo "bench-venv: creating $venv with $python"
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --upgrade --disable-pip-version-check)
"${pip[@]}" pip

if [ "${EMBER_VENV_FULL:-1}" = "1" ]; then
  "${pip[@]}" torch numpy safetensors
else
  "${pip[@]}" --no-deps torch
  # torch's pure-Python dependencies (what `pip show torch` lists, minus nvidia-* and triton).
  "${pip[@]}" numpy filelock typing-extensions sympy networkx jinja2 fsspec setuptools
  "${pip[@]}" safetensors  # the record benchmark's reference loader
fi

# onnxruntime (CPU): the ONNX import's reference in tests/onnx and benches.
"${pip[@]}" onnxruntime

"$venv/bin/python" - <<'PY'
import torch
x = torch.randn(64, 64)
print("bench-venv: torch", torch.__version__, "works on the CPU:", float((x @ x).sum()) == float((x @ x).sum()))
import safetensors
print("bench-venv: safetensors", safetensors.__version__)
PY
echo "bench-venv: run EMBER_BENCH_PYTHON=$venv/bin/python build/benches/ember-bench [--torch-compile]"
