#!/usr/bin/env bash
# Runs a test binary with EMBER_CPU_ISA=<isa>, or reports it skipped when this CPU cannot
# run that ISA's kernels (test_cpu_backend's IsaEnvironment, built on cpu::isa_supported,
# decides: the one detection). With --unless-default it is also skipped when <isa> is the
# one this CPU picks without EMBER_CPU_ISA (the best it can run: cpu::active_isa), since the
# plain run of the same tests covers it.
#
#   run_with_isa.sh [--unless-default] <isa> <test_cpu_backend> <binary> [args...]
set -euo pipefail
unless_default=0
if [ "$1" = "--unless-default" ]; then
  unless_default=1
  shift
fi
isa=$1 probe=$2
shift 2
# (grep reads the probe's whole output: with -q it could exit at the match, the probe then
# die of SIGPIPE, and pipefail turn the pipeline's status into "runnable".)
runnable() { ! EMBER_CPU_ISA=$1 "$probe" --gtest_filter=CpuIsa.* | grep "this CPU cannot run" >/dev/null; }
if ! runnable "$isa"; then
  echo "EMBER_CPU_ISA=$isa: this CPU cannot run these kernels; skipped"
  exit 0
fi
if [ $unless_default = 1 ]; then
  default=scalar
  for best in amx avx512 avx2; do
    if runnable $best; then
      default=$best
      break
    fi
  done
  if [ "$isa" = "$default" ]; then
    echo "EMBER_CPU_ISA=$isa is this CPU's default, which the plain run covers; skipped"
    exit 0
  fi
fi
EMBER_CPU_ISA=$isa exec "$@"
