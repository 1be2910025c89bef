// Throughput of the Cpu GEMM (ember::cpu::gemm_f32 / gemm_f64, and the int8 gemm_u8s8) on square
// row-major products, next to OpenBLAS's cblas_sgemm / cblas_dgemm on the same data and thread
// count, so the two can be read side by side. Both use ember::cpu::num_threads() threads
// (set EMBER_NUM_THREADS to change it). Run with OPENBLAS_CORETYPE=SkylakeX on AVX-512
// machines so OpenBLAS uses its AVX-512 kernels (on CPUs without AVX-512 leave it unset,
// or set Haswell/Zen: a SkylakeX core type there would fault).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cpu/gemm/gemm.hpp"
#include "cpu/gemm/gemm_i8.hpp"
#include "cpu/thread_pool.hpp"

namespace {

template <class T>
struct Operands {
  std::vector<T> a, b, c;
  explicit Operands(std::size_t n) : a(n * n), b(n * n), c(n * n) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<T> dist(-1, 1);
    for (auto& v : a) v = dist(rng);
    for (auto& v : b) v = dist(rng);
  }
};

void set_flops(benchmark::State& state, std::size_t n) {
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops * 1e-9 * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

template <class T>
void BM_ember(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  Operands<T> op(n);
  const auto s = static_cast<std::ptrdiff_t>(n);
  for (auto _ : state) {
    if constexpr (sizeof(T) == 4) {
      ember::cpu::gemm_f32(1, n, n, n, op.a.data(), 0, s, 1, op.b.data(), 0, s, 1, op.c.data(), 0,
                           s, false);
    } else {
      ember::cpu::gemm_f64(1, n, n, n, op.a.data(), 0, s, 1, op.b.data(), 0, s, 1, op.c.data(), 0,
                           s, false);
    }
    benchmark::DoNotOptimize(op.c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}

template <class T>
void BM_openblas(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  Operands<T> op(n);
  const int s = static_cast<int>(n);
  for (auto _ : state) {
    if constexpr (sizeof(T) == 4) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, s, s, 1.0f, op.a.data(), s,
                  op.b.data(), s, 0.0f, op.c.data(), s);
    } else {
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, s, s, s, 1.0, op.a.data(), s,
                  op.b.data(), s, 0.0, op.c.data(), s);
    }
    benchmark::DoNotOptimize(op.c.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, n);
}

BENCHMARK(BM_ember<float>)
    ->Name("ember_sgemm")
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->UseRealTime();
BENCHMARK(BM_openblas<float>)
    ->Name("openblas_sgemm")
    ->Arg(256)
    ->Arg(512)
    ->Arg(1024)
    ->Arg(2048)
    ->UseRealTime();
BENCHMARK(BM_ember<double>)->Name("ember_dgemm")->Arg(1024)->UseRealTime();

// The int8 GEMM (u8 x s8 -> s32, ember::cpu::gemm_u8s8) on the kernel gemm_u8s8 picks here
// (AMX-INT8, AVX512_VNNI or portable), in operations (a multiply and an add each) a second.
void BM_ember_u8s8(benchmark::State& state) {
  const std::size_t n = static_cast<std::size_t>(state.range(0));
  std::vector<std::uint8_t> a(n * n);
  std::vector<std::int8_t> b(n * n);
  std::vector<std::int32_t> c(n * n);
  std::mt19937 rng(7);
  for (auto& v : a) v = static_cast<std::uint8_t>(rng());
  for (auto& v : b) v = static_cast<std::int8_t>(rng());
  const auto s = static_cast<std::ptrdiff_t>(n);
  for (auto _ : state) {
    ember::cpu::gemm_u8s8(1, n, n, n, a.data(), 0, s, 1, b.data(), 0, s, 1, c.data(), 0, s);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double ops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  state.counters["GOP/s"] = benchmark::Counter(ops * 1e-9 * static_cast<double>(state.iterations()),
                                               benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ember_u8s8)->Name("ember_u8s8")->Arg(256)->Arg(1024)->Arg(2048)->UseRealTime();
BENCHMARK(BM_openblas<double>)->Name("openblas_dgemm")->Arg(1024)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  // Same thread count for both libraries, so the comparison is like for like.
  const int threads = static_cast<int>(ember::cpu::num_threads());
  openblas_set_num_threads(threads);
  benchmark::AddCustomContext("threads", std::to_string(threads));
  benchmark::AddCustomContext("openblas_core", openblas_get_corename());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
