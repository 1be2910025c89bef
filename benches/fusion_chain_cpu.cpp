// fusion_chain_cpu: the CPU time of ember-bench's element-wise chains on the plain Cpu and
// on its Fusion stack, for a machine too loaded for wall time (BENCHMARKS.md, Fusion): the
// process's CPU time (CLOCK_PROCESS_CPUTIME_ID) counts the cycles the run itself spent,
// stalls on memory included, and not the time other processes held the cores. Meant for
// EMBER_NUM_THREADS=1, where it is one core's time.
//
//   fusion_chain_cpu WORKLOAD [B] [REPS]    B x 1024 x 1024 f32 (default 16), REPS (default 5)
//
// Workloads (as benches/workloads.cpp builds them):
//   elementwise_chain  (0.5 x + 1) as [B*1024, 1024]: exp(y) * y as [B, 1024*1024]: tanh
//   cheap_chain        |(0.5 x + 1) x - 0.25|
//   custom_gelu        0.5 x (1 + erf(x / sqrt 2))
//   dropout            x * bernoulli(0.9) / 0.9 (fused: the mask drawn in the group)
//   copy               x + 0 (one op: a read and a write, the copy the chains are held to)
// Prints the median and the least CPU milliseconds per run, plain and fused.
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include <ember/ember.hpp>

#include "process_time.hpp"

using namespace ember;

namespace {

using bench::cpu_ms;

Tensor<3> run(const std::string& w, const Tensor<3>& x) {
  const Shape shape = x.shape();
  if (w == "elementwise_chain") {
    const Shape rows{shape[0] * shape[1], shape[2]}, flat{shape[0], shape[1] * shape[2]};
    auto y = x.mul_scalar(0.5).add_scalar(1.0).reshape<2>(rows);
    auto z = y.exp().mul(y).reshape<2>(flat);
    return std::move(z).tanh().reshape<3>(shape);
  }
  if (w == "cheap_chain") return x.mul_scalar(0.5).add_scalar(1.0).mul(x).add_scalar(-0.25).abs();
  if (w == "custom_gelu") {
    return x.mul_scalar(0.5).mul(x.mul_scalar(0.7071067811865476).erf().add_scalar(1.0));
  }
  if (w == "dropout") {
    Tensor<3> keep(ops::random(shape, Distribution::bernoulli(0.9), x.dtype(), x.device()));
    return x.mul(keep).mul_scalar(1.0 / 0.9);
  }
  return x.add_scalar(0.0);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string w = argc > 1 ? argv[1] : "";
  if (w != "elementwise_chain" && w != "cheap_chain" && w != "custom_gelu" && w != "dropout" &&
      w != "copy") {
    std::fprintf(stderr,
                 "usage: fusion_chain_cpu {elementwise_chain|cheap_chain|custom_gelu|dropout|copy} "
                 "[B] [REPS]\n");
    return 2;
  }
  const std::size_t b = argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 16;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  if (b == 0 || reps <= 0) {
    std::fprintf(stderr, "fusion_chain_cpu: B and REPS must be positive\n");
    return 2;
  }
  for (const bool fused : {false, true}) {
    const Device dev = fused ? Device::cpu().fusion() : Device::cpu();
    auto x = Tensor<3>::random(Shape{b, 1024, 1024}, Distribution::uniform(-1, 1), dev);
    dev.sync();
    std::vector<double> ms;
    for (int r = 0; r <= reps; ++r) {  // the first run warms the allocator and the plans
      const double t0 = cpu_ms();
      {
        auto y = run(w, x);
        dev.sync();
      }
      if (r > 0) ms.push_back(cpu_ms() - t0);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%s [%zu, 1024, 1024] %s: %.2f ms CPU (median of %d; least %.2f)\n", w.c_str(), b,
                fused ? "fused" : "plain", ms[ms.size() / 2], reps, ms.front());
  }
}
