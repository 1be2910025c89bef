// fusion_matmul_cpu: the CPU time of a matmul with an element-wise epilogue on the plain Cpu
// and on its Fusion stack (BENCHMARKS.md, Fusion: matmul epilogues), for a machine too
// loaded for wall time: the process's CPU time (CLOCK_PROCESS_CPUTIME_ID) counts the cycles
// the run spent, stalls included, not the time other processes held the cores. Meant for
// EMBER_NUM_THREADS=1, where it is one core's time. Plain and fused runs alternate, so a
// change in the machine's load reaches both alike.
//
//   fusion_matmul_cpu WORKLOAD [M K N] [REPS]    defaults 1024 1024 4096, 7
//
// Workloads (f32):
//   matmul             x · W                     (the bare GEMM the others are held to)
//   matmul_scale       (x · W) * 0.125            (an epilogue that reads no other input)
//   matmul_bias_gelu   gelu(x · W + b), b [1, n]  (ember-bench's matmul_bias_gelu)
//   linear_gelu        gelu(x · Wᵀ + b), b [n], W stored [n, k] (nn::Linear then gelu)
//   linear_residual    x · Wᵀ + b + r, r [m, n]
// Prints the median and the least CPU milliseconds per run, plain and fused.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <ember/ember.hpp>

#include "process_time.hpp"

using namespace ember;

namespace {

using bench::cpu_ms;

struct Inputs {
  Tensor<2> x, w, wt, b2, r;
  Tensor<1> b1;
};

Inputs make(const Device& d, std::size_t m, std::size_t k, std::size_t n) {
  const auto u = Distribution::uniform(-1, 1);
  return {Tensor<2>::random(Shape{m, k}, u, d), Tensor<2>::random(Shape{k, n}, u, d),
          Tensor<2>::random(Shape{n, k}, u, d), Tensor<2>::random(Shape{1, n}, u, d),
          Tensor<2>::random(Shape{m, n}, u, d), Tensor<1>::random(Shape{n}, u, d)};
}

DynTensor run(const std::string& w, const Inputs& in) {
  if (w == "matmul") return in.x.matmul(in.w).dyn();
  if (w == "matmul_scale") return (in.x.matmul(in.w) * 0.125f).dyn();
  if (w == "matmul_bias_gelu") return activation::gelu(in.x.matmul(in.w) + in.b2).dyn();
  DynTensor y = nn::detail::linear(in.x.dyn(), in.wt.dyn(), in.b1.dyn(), "linear");
  if (w == "linear_gelu") return ops::unary(ir::UnaryFn::Gelu, std::move(y));
  return ops::binary(ir::BinaryFn::Add, std::move(y), in.r.dyn());
}

}  // namespace

int main(int argc, char** argv) {
  const std::string w = argc > 1 ? argv[1] : "";
  if (w != "matmul" && w != "matmul_scale" && w != "matmul_bias_gelu" && w != "linear_gelu" &&
      w != "linear_residual") {
    std::fprintf(stderr,
                 "usage: fusion_matmul_cpu "
                 "{matmul|matmul_scale|matmul_bias_gelu|linear_gelu|linear_residual} [M K N] "
                 "[REPS]\n");
    return 2;
  }
  const auto arg = [&](int i, std::size_t def) {
    return argc > i ? std::strtoul(argv[i], nullptr, 10) : def;
  };
  const std::size_t m = arg(2, 1024), k = arg(3, 1024), n = arg(4, 4096);
  const int reps = static_cast<int>(arg(5, 7));
  if (m == 0 || k == 0 || n == 0 || reps <= 0) {
    std::fprintf(stderr, "fusion_matmul_cpu: M, K, N and REPS must be positive\n");
    return 2;
  }
  const Device plain = Device::cpu(), fused = Device::cpu().fusion();
  const Inputs pin = make(plain, m, k, n), fin = make(fused, m, k, n);
  fused.sync();
  std::vector<double> ms[2];
  for (int r = 0; r <= reps; ++r) {  // the first round warms the allocator and the plans
    for (const bool f : {false, true}) {
      const Device& dev = f ? fused : plain;
      const double t0 = cpu_ms();
      {
        auto y = run(w, f ? fin : pin);
        dev.sync();
      }
      if (r > 0) ms[f].push_back(cpu_ms() - t0);
    }
  }
  for (const bool f : {false, true}) {
    std::sort(ms[f].begin(), ms[f].end());
    std::printf("%-17s %s m%zu k%zu n%zu: median %.2f ms, least %.2f ms (CPU time, %d runs)\n",
                w.c_str(), f ? "fused" : "plain", m, k, n, ms[f][ms[f].size() / 2], ms[f].front(),
                reps);
  }
  return 0;
}
