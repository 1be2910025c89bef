// GPU workloads on Device::cuda(0), printed one per line as "name bytes flops ms" for
// benches/cuda_compare.py, which runs the same workloads in PyTorch on the same GPU and
// prints ratios and shares of the measured ceilings. Ceilings measured here: the
// device-to-device copy bandwidth (cudaMemcpyAsync of 256 MB, reads plus writes).
//
//   bench_cuda [--quick]
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <ember/ember.hpp>

using namespace ember;
using Clock = std::chrono::steady_clock;

namespace {

// Median milliseconds per call of f (each call followed by a device sync).
template <class F>
double time_ms(const Device& dev, F&& f, int iters = 20) {
  for (int i = 0; i < 3; ++i) f();
  dev.sync();
  std::vector<double> t;
  for (int i = 0; i < iters; ++i) {
    const auto t0 = Clock::now();
    f();
    dev.sync();
    t.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void report(const char* name, double bytes, double flops, double ms) {
  std::printf("%s %.0f %.0f %.4f\n", name, bytes, flops, ms);
  std::fflush(stdout);
}

}  // namespace

int main() {
  try {
    const Device dev = Device::cuda(0);
    // Ceiling: device-to-device copy.
    {
      const std::size_t bytes = 256u << 20;
      void *a = nullptr, *b = nullptr;
      cudaMalloc(&a, bytes);
      cudaMalloc(&b, bytes);
      cudaEvent_t e0, e1;
      cudaEventCreate(&e0);
      cudaEventCreate(&e1);
      for (int i = 0; i < 3; ++i) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
      cudaEventRecord(e0);
      const int n = 20;
      for (int i = 0; i < n; ++i) cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice);
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      report("ceiling_copy", 2.0 * double(bytes), 0, ms / n);
      cudaFree(a);
      cudaFree(b);
    }
    const std::size_t n = 64u << 20;  // 256 MB of f32
    auto x = Tensor<1>::random(Shape{n}, Distribution::default_(), dev);
    auto y = Tensor<1>::random(Shape{n}, Distribution::default_(), dev);
    const double nb = double(n) * 4;
    report("exp_f32_64M", 2 * nb, double(n), time_ms(dev, [&] { auto z = x.exp(); }));
    report("gelu_f32_64M", 2 * nb, double(n), time_ms(dev, [&] { auto z = activation::gelu(x); }));
    report("add_f32_64M", 3 * nb, double(n), time_ms(dev, [&] { auto z = x + y; }));
    report("mul_scalar_f32_64M", 2 * nb, double(n), time_ms(dev, [&] { auto z = x * 2.0; }));
    report("sum_f32_64M", nb, double(n), time_ms(dev, [&] { auto z = x.sum(); }));
    auto m = x.reshape<2>(Shape{16384, 4096});
    report("sum_dim1_16384x4096", nb, double(n), time_ms(dev, [&] { auto z = m.sum_dim(1); }));
    report("softmax_16384x4096", 2 * nb, 5.0 * double(n),
           time_ms(dev, [&] { auto z = activation::softmax(m, 1); }));
    report("layernorm_16384x4096", 2 * nb, 8.0 * double(n),
           time_ms(dev, [&] { auto z = module_ops::layer_norm(m, Shape{4096}, 1e-5); }));
    report("argmax_dim1_16384x4096", nb, double(n),
           time_ms(dev, [&] { auto z = m.argmax_dim(1); }));
    for (std::size_t s : {4096, 8192}) {
      auto a = Tensor<2>::random(Shape{s, s}, Distribution::default_(), dev).cast(DType::BF16);
      auto b = Tensor<2>::random(Shape{s, s}, Distribution::default_(), dev).cast(DType::BF16);
      const std::string name = "matmul_bf16_" + std::to_string(s);
      report(name.c_str(), 3.0 * double(s * s) * 2, 2.0 * double(s) * double(s) * double(s),
             time_ms(
                 dev, [&] { auto c = a.matmul(b); }, 10));
    }
    {
      auto a = Tensor<2>::random(Shape{4096, 4096}, Distribution::default_(), dev);
      auto b = Tensor<2>::random(Shape{4096, 4096}, Distribution::default_(), dev);
      report("matmul_f32_4096", 3.0 * 4096 * 4096 * 4, 2.0 * 4096.0 * 4096 * 4096,
             time_ms(
                 dev, [&] { auto c = a.matmul(b); }, 10));
    }
    // Launch overhead: the host cost of one tiny op, averaged over 2000 queued ops.
    {
      auto t = Tensor<1>::ones(Shape{16}, dev);
      const int k = 2000;
      const double ms = time_ms(
          dev,
          [&] {
            auto u = t;
            for (int i = 0; i < k; ++i) u = std::move(u) + 1.0;
          },
          5);
      report("launch_tiny_add_per_op", 0, 0, ms / k);
      // The host's share: the same loop timed until the last op is queued, not run.
      std::vector<double> host;
      for (int r = 0; r < 7; ++r) {
        auto u = t;
        dev.sync();
        const auto t0 = Clock::now();
        for (int i = 0; i < k; ++i) u = std::move(u) + 1.0;
        host.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
        dev.sync();
      }
      std::sort(host.begin(), host.end());
      report("launch_tiny_add_host_per_op", 0, 0, host[host.size() / 2] / k);
    }
    // Kernel compile: kernels no earlier op of this process has used, each timed from the
    // call to the end of its run. With an empty cache folder (XDG_CACHE_HOME) this is the
    // first-use compile; run again with the same folder, the load from the disk cache.
    // minimum is plain arithmetic; atan2 links CUDA's math library into the kernel.
    {
      auto t = Tensor<1>::ones(Shape{1024}, dev);
      const auto first_use = [&](const char* name, auto&& op) {
        const auto t0 = Clock::now();
        auto u = op();
        dev.sync();
        report(name, 0, 0, std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      };
      first_use("first_use_minimum", [&] { return t.minimum(t); });
      first_use("first_use_atan2", [&] { return t.atan2(t); });
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_cuda: %s\n", e.what());
    return 1;
  }
  return 0;
}
