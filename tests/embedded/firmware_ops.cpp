// A sample of ember's tensor ops on the embedded Cpu backend (Cortex-M4 under QEMU), each
// compared with an f64 reference computed here from the definition (plain loops and the C
// library's double functions), not by ember, and gradients through the autodiff decorator
// against closed forms. Runs on the registry's Cpu device and on a device over a fixed
// arena. The exit code is the number of failed cases.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "board.hpp"
#include "check.hpp"
#include "ember/cpu/cpu.hpp"
#include "ember/tensor/activation.hpp"
#include "ember/tensor/module_ops.hpp"
#include "ember/tensor/tensor.hpp"

using namespace ember;
using firmware::check_close;
using firmware::check_equal;

namespace {

// Deterministic inputs: v(i) = sin(1.3 i + phase) * scale, as f32 and as the f64 of that f32.
std::vector<float> values(std::size_t n, double phase, double scale = 1.0) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(1.3 * i + phase) * scale);
  return v;
}
std::vector<double> widen(const std::vector<float>& v) { return {v.begin(), v.end()}; }

template <std::size_t D>
Tensor<D> tensor(const std::vector<float>& v, Shape shape, const Device& dev) {
  return Tensor<D>::from_data(TensorData::from<float>(v, std::move(shape)), dev);
}
template <std::size_t D, class K>
std::vector<float> out(const Tensor<D, K>& t) {
  return t.to_data().template to_vector<float>();
}

void elementwise(const Device& dev) {
  const auto a = values(12, 0.1), b = values(4, 0.7);
  const auto x = tensor<2>(a, Shape{3, 4}, dev);
  const auto y = tensor<1>(b, Shape{4}, dev);
  std::vector<double> want(12);
  for (std::size_t i = 0; i < 12; ++i) want[i] = (double(a[i]) + b[i % 4]) * double(a[i]) - 0.5;
  check_close("add_mul_broadcast", out((x + y.unsqueeze<2>()) * x - 0.5f), want, 1e-6);

  for (std::size_t i = 0; i < 12; ++i) want[i] = std::exp(double(a[i]));
  check_close("exp", out(x.exp()), want, 0, 1e-6);
  for (std::size_t i = 0; i < 12; ++i) want[i] = std::tanh(double(a[i]));
  check_close("tanh", out(x.tanh()), want, 1e-6);
  for (std::size_t i = 0; i < 12; ++i) want[i] = 1.0 / (1.0 + std::exp(-double(a[i])));
  check_close("sigmoid", out(activation::sigmoid(x)), want, 1e-6);
  for (std::size_t i = 0; i < 12; ++i)
    want[i] = 0.5 * a[i] * (1.0 + std::erf(a[i] / std::sqrt(2.0)));
  check_close("gelu", out(activation::gelu(x)), want, 1e-6);
  for (std::size_t i = 0; i < 12; ++i) want[i] = std::sqrt(std::fabs(double(a[i])));
  check_close("abs_sqrt", out(x.abs().sqrt()), want, 0, 1e-6);
}

void reductions(const Device& dev) {
  const auto a = values(15, 0.3);
  const auto x = tensor<2>(a, Shape{3, 5}, dev);
  std::vector<double> sum(3, 0.0), mx(3, -1e300);
  std::vector<std::int64_t> arg(3, 0);
  for (std::size_t r = 0; r < 3; ++r) {
    for (std::size_t c = 0; c < 5; ++c) {
      const double v = a[r * 5 + c];
      sum[r] += v;
      if (v > mx[r]) mx[r] = v, arg[r] = static_cast<std::int64_t>(c);
    }
  }
  check_close("sum_dim", out(x.sum_dim(1)), sum, 1e-6);
  check_close("max_dim", out(x.max_dim(1)), mx, 0);
  check_equal("argmax_dim", x.argmax_dim(1).to_data().to_vector<std::int64_t>(), arg);
  double total = 0;
  for (float v : a) total += v;
  check_close("mean", out(x.mean()), {total / 15.0}, 1e-6);

  std::vector<double> soft(15);
  for (std::size_t r = 0; r < 3; ++r) {
    double z = 0;
    for (std::size_t c = 0; c < 5; ++c) z += std::exp(a[r * 5 + c] - mx[r]);
    for (std::size_t c = 0; c < 5; ++c) soft[r * 5 + c] = std::exp(a[r * 5 + c] - mx[r]) / z;
  }
  check_close("softmax", out(activation::softmax(x, 1)), soft, 1e-6);
}

void matmul(const Device& dev) {
  constexpr std::size_t M = 5, K = 7, N = 6;
  const auto a = values(M * K, 0.2), b = values(K * N, 1.1);
  std::vector<double> want(M * N, 0.0);
  for (std::size_t i = 0; i < M; ++i) {
    for (std::size_t j = 0; j < N; ++j) {
      for (std::size_t k = 0; k < K; ++k) want[i * N + j] += double(a[i * K + k]) * b[k * N + j];
    }
  }
  const auto x = tensor<2>(a, Shape{M, K}, dev), y = tensor<2>(b, Shape{K, N}, dev);
  check_close("matmul", out(x.matmul(y)), want, 1e-5);
  // The transpose of a product, through views: (x y)^T = y^T x^T.
  std::vector<double> want_t(N * M);
  for (std::size_t i = 0; i < M; ++i) {
    for (std::size_t j = 0; j < N; ++j) want_t[j * M + i] = want[i * N + j];
  }
  check_close("matmul_transposed", out(y.transpose().matmul(x.transpose())), want_t, 1e-5);
}

void layout(const Device& dev) {
  const auto a = values(24, 0.5);
  const auto x = tensor<3>(a, Shape{2, 3, 4}, dev);
  // x[:, 1:3, 0:2] after a reshape to [2, 12] and back.
  const auto s =
      x.reshape<2>(Shape{2, 12}).reshape<3>(Shape{2, 3, 4}).slice({{0, 2}, {1, 3}, {0, 2}});
  std::vector<double> want;
  for (std::size_t i = 0; i < 2; ++i) {
    for (std::size_t j = 1; j < 3; ++j) {
      for (std::size_t k = 0; k < 2; ++k) want.push_back(a[i * 12 + j * 4 + k]);
    }
  }
  check_close("reshape_slice", out(s), want, 0);
  std::vector<double> cat(widen(a));
  cat.insert(cat.end(), a.begin(), a.end());
  check_close("cat", out(Tensor<3>::cat({x, x}, 0)), cat, 0);

  std::vector<std::int64_t> gt;
  for (float v : a) gt.push_back(v > 0.25f ? 1 : 0);
  check_equal("greater_elem_int", x.greater_elem(0.25f).int_().to_data().to_vector<std::int64_t>(),
              gt);
}

void convolution(const Device& dev) {
  // conv2d: x [1, 2, 6, 5], w [3, 2, 3, 3], bias [3], padding 1, stride 1; then relu and a
  // 2x2 max pool.
  constexpr std::size_t C = 2, H = 6, W = 5, O = 3, KH = 3, KW = 3;
  const auto xv = values(C * H * W, 0.4), wv = values(O * C * KH * KW, 2.0, 0.5),
             bv = values(O, 0.9);
  std::vector<double> conv(O * H * W, 0.0);
  for (std::size_t o = 0; o < O; ++o) {
    for (std::size_t i = 0; i < H; ++i) {
      for (std::size_t j = 0; j < W; ++j) {
        double acc = bv[o];
        for (std::size_t c = 0; c < C; ++c) {
          for (std::size_t p = 0; p < KH; ++p) {
            for (std::size_t q = 0; q < KW; ++q) {
              const long ii = long(i) + long(p) - 1, jj = long(j) + long(q) - 1;
              if (ii < 0 || jj < 0 || ii >= long(H) || jj >= long(W)) continue;
              acc += double(wv[((o * C + c) * KH + p) * KW + q]) * xv[(c * H + ii) * W + jj];
            }
          }
        }
        conv[(o * H + i) * W + j] = acc;
      }
    }
  }
  const auto x = tensor<4>(xv, Shape{1, C, H, W}, dev), w = tensor<4>(wv, Shape{O, C, KH, KW}, dev);
  const auto b = tensor<1>(bv, Shape{O}, dev);
  module_ops::Conv2dOptions o;
  o.padding = {1, 1};
  const auto y = module_ops::conv2d(x, w, b, o);
  check_close("conv2d", out(y), conv, 1e-5);

  std::vector<double> pooled;
  for (std::size_t c = 0; c < O; ++c) {
    for (std::size_t i = 0; i + 1 < H; i += 2) {
      for (std::size_t j = 0; j + 1 < W; j += 2) {
        double m = 0.0;  // relu first: the max of non-negative values
        for (std::size_t p = 0; p < 2; ++p) {
          for (std::size_t q = 0; q < 2; ++q) m = std::fmax(m, conv[(c * H + i + p) * W + j + q]);
        }
        pooled.push_back(m);
      }
    }
  }
  module_ops::MaxPool2dOptions po;
  po.kernel = {2, 2};
  check_close("relu_max_pool2d", out(module_ops::max_pool2d(activation::relu(y), po)), pooled,
              1e-5);
}

// The autodiff decorator over this device, against closed forms:
//   d/dx sum(tanh(x) * x) = tanh(x) + x (1 - tanh(x)^2)
//   d/da sum(a b) = ones b^T, d/db sum(a b) = a^T ones.
void gradients(const Device& dev) {
  const Device ad = dev.autodiff();
  const auto a = values(6, 0.3, 2.0), b = values(12, 1.1);
  const auto x = tensor<2>(a, Shape{2, 3}, ad).require_grad();
  const Gradients g = (x.tanh() * x).sum().backward();
  std::vector<double> want(6);
  for (std::size_t i = 0; i < 6; ++i) {
    const double t = std::tanh(double(a[i]));
    want[i] = t + double(a[i]) * (1.0 - t * t);
  }
  check_close("grad_tanh_mul", out(x.grad(g).value()), want, 1e-5);

  const auto m = tensor<2>(a, Shape{2, 3}, ad).require_grad();
  const auto n = tensor<2>(b, Shape{3, 4}, ad).require_grad();
  const Gradients gm = m.matmul(n).sum().backward();
  std::vector<double> want_m(6), want_n(12);
  for (std::size_t i = 0; i < 2; ++i)
    for (std::size_t k = 0; k < 3; ++k) {
      double s = 0;
      for (std::size_t j = 0; j < 4; ++j) s += b[k * 4 + j];
      want_m[i * 3 + k] = s;
    }
  for (std::size_t k = 0; k < 3; ++k)
    for (std::size_t j = 0; j < 4; ++j) want_n[k * 4 + j] = double(a[k]) + double(a[3 + k]);
  check_close("grad_matmul_a", out(m.grad(gm).value()), want_m, 1e-5);
  check_close("grad_matmul_b", out(n.grad(gm).value()), want_n, 1e-5);
}

void run_all(const char* which, const Device& dev) {
  std::printf("# %s\n", which);
  elementwise(dev);
  reductions(dev);
  matmul(dev);
  layout(dev);
  convolution(dev);
#if EMBER_EMBEDDED_AUTODIFF
  gradients(dev);
#else
  std::printf("# gradients: skipped (EMBER_EMBEDDED_AUTODIFF=OFF: no autodiff decorator)\n");
#endif
}

alignas(64) std::byte g_arena[64 * 1024];

}  // namespace

int main() {
  const unsigned long long t0 = board::ticks();
  run_all("Device::cpu()", Device::cpu());
  Device arena(cpu::make_cpu_backend(g_arena));
  run_all("a Cpu device over a 64 KiB arena", arena);
  const MemoryStats s = memory_stats(arena);
  std::printf("# arena: %u bytes, peak %u in use, %u in use at the end\n",
              static_cast<unsigned>(s.capacity), static_cast<unsigned>(s.peak),
              static_cast<unsigned>(s.in_use));
  firmware::report("arena_released", s.in_use == 0 && s.peak > 0 && s.capacity == sizeof g_arena);
  std::printf("# %llu ticks\n", board::ticks() - t0);
  return firmware::summary();
}
