// The optimizer-step workloads: one Adam (or AdamW) step over a model of `count` [rows, cols]
// f32 params whose gradients are given, as a training loop's optimizer.step() after
// backward. The model and the optimizer state persist across repetitions (each repetition
// is the next step, as in training), so the PyTorch side (benches/torch_workloads.py: the
// same params and gradients from the shared input hash, torch.optim.Adam with
// foreach=True or fused=True) runs the same sequence of steps and the params after the
// last one are compared.
//
// An ideal step reads param, gradient and both moments and writes param and moments once:
// 28 bytes per f32 param (the "about 16" counts the reads). Beside the copy
// ceiling of the whole run, the CPU case measures a stream loop over the same four arrays
// with the same access pattern (read four, write three in place) on the same threads, and
// puts its bandwidth and ember's share of it in the row's note.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "case_builder.hpp"
#include "optim_workloads.hpp"

namespace ember::bench {
namespace {

struct ParamList {
  std::vector<nn::Param<Tensor<2>>> ws;
  EMBER_MODULE(ParamList, ws)
};

constexpr double kLr = 1e-3;

// GB/s of p += g; m += g; v += g * g over n floats each (7 passes' worth of bytes: four
// read, three written), split over `threads` threads; best of 5 after a first pass.
double stream_adam_traffic_gbs(std::size_t n, int threads) {
  std::vector<float> p(n, 1.0f), g(n, 1e-3f), m(n, 0.0f), v(n, 0.0f);
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> pool;
    const std::size_t chunk = n / std::size_t(threads);
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&, t] {
        const std::size_t lo = std::size_t(t) * chunk, hi = t == threads - 1 ? n : lo + chunk;
        for (std::size_t i = lo; i < hi; ++i) {
          const float gi = g[i];
          p[i] += gi;
          m[i] += gi;
          v[i] += gi * gi;
        }
      });
    }
    for (auto& th : pool) th.join();
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (rep > 0) best = std::min(best, ms);
  }
  if (p[n / 2] < 1.0f) std::abort();  // keeps the loop observable
  return 28.0 * double(n) / (best * 1e-3) / 1e9;
}

template <class Config>
Case adam_case(SizeKind s, const Device& dev, Config config, double weight_decay) {
  // CPU: 10 x [1024, 1024] (10.5 M params); GPU: 25 x [2048, 2048] (105 M params).
  const std::size_t count = s == SizeKind::Tiny ? 3 : s == SizeKind::Full ? 10 : 25;
  const std::size_t rows = s == SizeKind::Tiny ? 17 : s == SizeKind::Full ? 1024 : 2048;
  const std::size_t cols = s == SizeKind::Tiny ? 5 : s == SizeKind::Full ? 1024 : 2048;
  const Shape shape{rows, cols};
  struct State {
    ParamList model;
    std::vector<DynTensor> grads;
    decltype(Config{}.init()) opt;
  };
  auto st = std::make_shared<State>(State{{}, {}, config.with_weight_decay(weight_decay).init()});
  for (std::size_t i = 0; i < count; ++i) {
    st->model.ws.emplace_back(input<2>(shape, std::uint32_t(10 + i), dev));
    // Gradients of a realistic size (1/16 of the params'), a power of two apart: exact.
    st->grads.push_back(
        Tensor<2>::from_data(input_data(shape, std::uint32_t(100 + i), 0.0625f), dev).dyn());
  }
  const double n = double(count * rows * cols);
  Params p{{"count", {std::int64_t(count)}},
           {"rows", {std::int64_t(rows)}},
           {"cols", {std::int64_t(cols)}}};
  Case c = timed(p, shape, 7.0 * n * kF32, 0, dev, [st] {
    optim::GradientsParams gp;
    for (std::size_t i = 0; i < st->model.ws.size(); ++i)
      gp.insert(st->model.ws[i].id(), st->grads[i]);  // shared: the caller keeps them
    st->model = st->opt.step(kLr, std::move(st->model), std::move(gp));
    Outputs out;
    out.compared.push_back(st->model.ws.front().val().dyn());
    out.compared.push_back(st->model.ws.back().val().dyn());
    return out;
  });
  c.shape = label(count, " x [", rows, ", ", cols, "] (", (count * rows * cols + 500000) / 1000000,
                  "M params)");
  c.rtol = 1e-5;
  c.atol = 1e-6;
  if (dev == Device::cpu() && s != SizeKind::Tiny) {
    const char* env = std::getenv("EMBER_NUM_THREADS");
    const int threads = std::max(1, env ? std::atoi(env) : 2);
    const double gbs = stream_adam_traffic_gbs(count * rows * cols, threads);
    c.note = "stream of the same bytes: " + std::to_string(int(gbs * 10) / 10) + "." +
             std::to_string(int(gbs * 10) % 10) + " GB/s";
    c.stream_gbs = gbs;
  }
  return c;
}

}  // namespace

Case adam_step_case(SizeKind s, const Device& dev) {
  return adam_case(s, dev, optim::AdamConfig{}, 0.0);
}
Case adamw_step_case(SizeKind s, const Device& dev) {
  return adam_case(s, dev, optim::AdamWConfig{}, 0.01);
}

}  // namespace ember::bench
