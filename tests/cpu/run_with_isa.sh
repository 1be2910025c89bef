#!/usr/bin/env bash
# Runs a test binary with EMBER_CPU_ISA=<isa>, or reports it skipped when this CPU cannot
# run that ISA's kernels (test_cpu_backend's IsaEnvironment, built on cpu::isa_supported,
# decides: the one detection).
#
#   run_with_isa.sh <isa> <test_cpu_backend> <binary> [args...]
set -euo pipefail
isa=$1 probe=$2
shift 2
if EMBER_CPU_ISA=$isa "$probe" --gtest_filter=CpuIsa.* | grep -q "this CPU cannot run"; then
  echo "EMBER_CPU_ISA=$isa: this CPU cannot run these kernels; skipped"
  exit 0
fi
EMBER_CPU_ISA=$isa exec "$@"
