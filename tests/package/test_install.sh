#!/usr/bin/env bash
# Installs the build into a temporary prefix, builds a Cpu-only program against the
# installed package twice (find_package and pkg-config), and runs it with the CUDA
# libraries hidden: libember.so must need no CUDA library, the program must start, list
# the Cpu in Device::available() and say why Cuda cannot run; and, where the package has
# the ONNX importer, builds a program from a model with ember_onnx_generate.
#
#   test_install.sh <build dir> <source dir> <c++ compiler> <cuda: 1|0> [extra compile flags]
#
# The CUDA libraries are hidden by running the program through the dynamic loader with
# --inhibit-cache and no LD_LIBRARY_PATH: the loader then searches only RUNPATHs and its
# built-in system directories, not the directories /etc/ld.so.conf adds (where the CUDA
# toolkit's libraries are registered). The test checks that they really are hidden.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd) cxx=$3 cuda=$4 flags=${5:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_install: FAILED: $*" >&2; exit 1; }
unset LD_LIBRARY_PATH EMBER_BACKEND_PATH

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
lib=$(find "$prefix" -name libember.so.0 -printf '%h\n' | head -n 1)
[ -n "$lib" ] || fail "no libember.so.0 installed under $prefix"
for f in include/ember/ember.hpp include/ember/tensor/device.hpp; do
  [ -f "$prefix/$f" ] || fail "$f not installed"
done
[ -f "$lib/cmake/ember/emberConfig.cmake" ] || fail "emberConfig.cmake not installed"
[ -f "$lib/pkgconfig/ember.pc" ] || fail "ember.pc not installed"

cuda_libs='libcuda\.|libcudart|libnvrtc|libcublas'
echo "libember.so.0 needs: $(readelf -d "$lib/libember.so.0" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')"
if readelf -d "$lib/libember.so.0" | grep NEEDED | grep -Eq "$cuda_libs"; then
  fail "libember.so needs a CUDA library"
fi
if ldd "$lib/libember.so.0" | grep -Eq "$cuda_libs"; then fail "ldd libember.so shows a CUDA library"; fi

components=""
if [ "$cuda" = 1 ]; then
  [ -f "$lib/libember_cuda.so" ] || fail "libember_cuda.so not installed"
  [ -f "$lib/pkgconfig/ember-cuda.pc" ] || fail "ember-cuda.pc not installed"
  needs=$(readelf -d "$lib/libember_cuda.so" | sed -n 's/.*NEEDED.*\[\(.*\)\]/\1/p' | tr '\n' ' ')
  echo "libember_cuda.so needs: $needs"
  for l in libember.so.0 libcudart libnvrtc libcublasLt; do
    [[ " $needs" == *" $l"* ]] || fail "libember_cuda.so does not link $l"
  done
  [[ " $needs" != *" libcuda.so"* ]] || fail "libember_cuda.so links the driver library libcuda"
  components=cuda
else
  [ ! -e "$lib/libember_cuda.so" ] || fail "libember_cuda.so installed by a build without Cuda"
fi

# 1. find_package(ember [COMPONENTS cuda]).
cmake -S "$src/tests/package/consumer" -B "$tmp/cmake" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_PREFIX_PATH="$prefix" \
  -DEMBER_COMPONENTS="$components" > "$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "find_package(ember)"; }
cmake --build "$tmp/cmake" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "building against find_package(ember)"; }
# A component the package lacks is refused with a message.
if cmake -S "$src/tests/package/consumer" -B "$tmp/cmake-bad" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" \
     -DCMAKE_CXX_COMPILER="$cxx" -DEMBER_COMPONENTS=warp > "$tmp/bad.log" 2>&1; then
  fail "find_package(ember COMPONENTS warp) succeeded"
fi
grep -q "no component 'warp'" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "no message for an unknown component"; }

# 2. pkg-config.
export PKG_CONFIG_PATH=$lib/pkgconfig
pc_flags=$(pkg-config --cflags --libs ember) || fail "pkg-config ember"
echo "pkg-config ember: $pc_flags"
# shellcheck disable=SC2086
"$cxx" $flags "$src/tests/package/consumer/main.cpp" $pc_flags -o "$tmp/consumer-pc" || fail "building against pkg-config ember"
if [ "$cuda" = 1 ]; then
  pkg-config --exists ember-cuda || fail "pkg-config ember-cuda"
  [ "$(pkg-config --modversion ember-cuda)" = "$(pkg-config --modversion ember)" ] || fail "ember-cuda.pc's version"
fi

# 3. The programs need no CUDA library either.
for p in "$tmp/cmake/consumer" "$tmp/consumer-pc"; do
  if LD_LIBRARY_PATH=$lib ldd "$p" | grep -Eq "$cuda_libs"; then fail "ldd $p shows a CUDA library"; fi
done

# 4. Run them with the CUDA libraries hidden.
loader=$(readelf -l "$tmp/cmake/consumer" | sed -n 's/.*interpreter: \(.*\)\]/\1/p')
[ -x "$loader" ] || fail "no dynamic loader found for the program"
if [ "$cuda" = 1 ]; then
  for l in libcudart.so libnvrtc.so libcublasLt.so; do
    if LD_LIBRARY_PATH= "$loader" --inhibit-cache --list "$lib/libember_cuda.so" 2>/dev/null |
         grep -q "$l.* => /"; then
      fail "$l is still found with the loader's cache inhibited; it cannot be hidden this way"
    fi
  done
fi
for p in "$tmp/cmake/consumer" "$tmp/consumer-pc"; do
  out=$("$loader" --inhibit-cache --library-path "$lib" "$p" 2>&1) || { echo "$out"; fail "$p with CUDA hidden"; }
  echo "--- $(basename "$p"), CUDA libraries hidden:"
  echo "$out"
  grep -qx "available: cpu" <<< "$out" || fail "Device::available() does not list cpu"
  grep -qx "consumer: ok" <<< "$out" || fail "the Cpu computation"
  if [ "$cuda" = 1 ]; then
    grep -Eq "^unavailable: cuda: .*libember_cuda.so cannot be loaded: lib(cudart|nvrtc|cublasLt)[^:]*: cannot open shared object file" <<< "$out" ||
      fail "Device::unavailable() does not give dlopen's reason for Cuda"
    grep -Eq "^cuda\(0\): Device::cuda: .*libember_cuda.so cannot be loaded" <<< "$out" ||
      fail "Device::cuda(0)'s error does not say why"
  else
    grep -q "^unavailable: cuda: the Cuda backend is not part of this build" <<< "$out" ||
      fail "Device::unavailable() does not explain Cuda"
  fi
done

# 5. Without libember_cuda.so next to libember (a Cpu-only copy of the package).
cp -a "$prefix" "$tmp/cpu-only"
rm -f "$tmp/cpu-only/${lib#"$prefix"/}/libember_cuda.so"
# consumer-pc has no RUNPATH: it finds libember through LD_LIBRARY_PATH alone.
LD_LIBRARY_PATH=$tmp/cpu-only/${lib#"$prefix"/} "$tmp/consumer-pc" > "$tmp/cpu-only.log" 2>&1 ||
  { cat "$tmp/cpu-only.log"; fail "Cpu-only copy"; }
echo "--- consumer-pc, Cpu-only copy of the package:"
cat "$tmp/cpu-only.log"
if [ "$cuda" = 1 ]; then
  grep -q "^unavailable: cuda: libember_cuda.so was not found (looked in $tmp/cpu-only" "$tmp/cpu-only.log" ||
    fail "a missing libember_cuda.so is not explained"
fi

# 6. With the libraries visible the program still runs (Cuda runs or says why).
out=$("$tmp/cmake/consumer" 2>&1) || { echo "$out"; fail "consumer with CUDA visible"; }
echo "--- consumer, CUDA libraries visible:"
echo "$out"
# 7. Where the package has the ONNX importer: a program whose module ember_onnx_generate
# writes from a model at build time (with the installed ember-onnx), compiled against the
# installed headers and libraries, agrees with the installed run-time loader.
if [ -f "$lib/cmake/ember/EmberOnnx.cmake" ]; then
  cmake -S "$src/tests/package/onnx_consumer" -B "$tmp/onnx" -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_PREFIX_PATH="$prefix" \
    -DEMBER_ONNX_MODEL="$src/tests/onnx/models/small_cnn.onnx" > "$tmp/onnx-configure.log" 2>&1 ||
    { cat "$tmp/onnx-configure.log"; fail "find_package(ember) for the ONNX consumer"; }
  cmake --build "$tmp/onnx" > "$tmp/onnx-build.log" 2>&1 ||
    { cat "$tmp/onnx-build.log"; fail "building the ONNX consumer (ember_onnx_generate)"; }
  out=$("$tmp/onnx/onnx_consumer" 2>&1) || { echo "$out"; fail "the ONNX consumer"; }
  echo "--- onnx_consumer:"
  echo "$out"
  grep -q "^onnx consumer: SmallCnn, .*: ok$" <<< "$out" || fail "the generated module and the loader disagree"
else
  echo "--- the package has no ONNX importer (libonnx-dev absent at build time): step 7 skipped"
fi
echo "test_install: ok"
