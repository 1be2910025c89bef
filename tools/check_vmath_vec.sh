#!/bin/sh
# Reports, for each probe_* function in tools/vmath_vec_probe.cpp, whether its loop vectorized
# (GCC's -fopt-info) and whether the generated body uses full-width vector registers.
set -e
cd "$(dirname "$0")/.."
check() {
  name=$1; reg=$2; shift 2
  asm=$(mktemp)
  g++ -std=c++20 -O3 -Wall -Wextra -Werror "$@" -S tools/vmath_vec_probe.cpp -o "$asm"
  echo "== $name: $*"
  for f in $(grep -o '^_Z[0-9]*probe_[A-Za-z0-9_]*' "$asm" | sort -u); do
    body=$(awk -v f="$f:" '$1 == f {p = 1; next} p && /\.cfi_endproc/ {exit} p' "$asm")
    calls=$(printf '%s\n' "$body" | grep -c 'call' || true)
    wide=$(printf '%s\n' "$body" | grep -c "%$reg" || true)
    printf '%-28s wide-register-insns=%-4s calls=%s\n' "$f" "$wide" "$calls"
  done
  rm -f "$asm"
}
check avx512 zmm -mavx512f -mavx512vl -mavx512bw -mavx512dq -mfma -mprefer-vector-width=512
check avx2 ymm -mavx2 -mfma
