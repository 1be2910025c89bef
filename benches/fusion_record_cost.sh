#!/usr/bin/env bash
# Instructions per op of the Fusion decorator's recording path against the plain Cpu,
# counted by callgrind (deterministic, unlike wall time on a shared machine): each op's
# chain at two lengths, twice each (fusion_record_cost.cpp), the difference divided by the
# extra ops. EMBER_NUM_THREADS=1, so the count is the op's own.
#
#   benches/fusion_record_cost.sh [BUILD_DIR] [OPS...]     (default: build, all three ops)
set -euo pipefail
build=${1:-build}
shift || true
ops=("$@")
[ ${#ops[@]} -gt 0 ] || ops=(add_scalar mul cumsum)
bin=$build/benches/fusion_record_cost
[ -x "$bin" ] || { echo "no $bin: build the fusion_record_cost target (EMBER_BUILD_BENCHES=ON)" >&2; exit 1; }
short=1000 long=3000
count() {  # instructions of one run
  EMBER_NUM_THREADS=1 valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" "$@" 2>&1 |
    sed -n 's/.*Collected : \([0-9]*\).*/\1/p'
}
printf '| op | plain Cpu | Fusion | Fusion / plain |\n|---|---:|---:|---:|\n'
for op in "${ops[@]}"; do
  per() { echo $(( ($(count "$op" $long "$1") - $(count "$op" $short "$1")) / (2 * (long - short)) )); }
  plain=$(per cpu)
  fused=$(per fusion)
  printf '| %s | %d | %d | %s |\n' "$op" "$plain" "$fused" "$(awk -v a="$fused" -v b="$plain" 'BEGIN { printf "%.2fx", a / b }')"
done
