// Compute, conversion and creation cases: matmul (batched, broadcast, transposed views,
// sizes 1..300), softmax / log_softmax, cast between all dtypes (saturating float -> int,
// wrapping int -> int, != 0 for bool, as src/base/tensor_data.cpp documents), creation
// functions (zeros ones full empty arange linspace eye random tril/triu and their masks)
// and to_device.
#include <cmath>
#include <limits>
#include <optional>

#include "conformance/harness.hpp"

namespace conformance {
namespace {

namespace ops = ember::ops;
using ember::Distribution;

std::vector<HostTensor> one(HostTensor t) { return {std::move(t)}; }

// The value cast gives: NaN -> 0 and saturation for float -> int, two's complement
// wrapping for int -> int, != 0 for bool, rounding for float targets.
double cast_ref(double v, DType from, DType to) {
  if (to == DType::Bool) return v != 0 ? 1 : 0;
  if (is_float_dtype(to)) return quantize(to, v);
  const int bits = static_cast<int>(ember::size_of(to)) * 8;
  const double lo = to == DType::U8 ? 0 : -std::ldexp(1.0, bits - 1);
  const double hi = to == DType::U8 ? 255 : std::ldexp(1.0, bits - 1) - 1;
  if (is_float_dtype(from)) {
    if (std::isnan(v)) return 0;
    return std::clamp(std::trunc(v), lo, hi);
  }
  if (bits == 64) return v;  // generated ints are exact in f64 and fit i64
  const double m = std::ldexp(1.0, bits);
  double r = std::fmod(v, m);
  if (r < 0) r += m;
  if (to != DType::U8 && r >= m / 2) r -= m;
  return r;
}

}  // namespace

void add_compute_cases(std::vector<Case>& cs) {
  // ---- matmul ----
  {
    Case c;
    c.fn = "matmul";
    c.family = "compute";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale scale) {
      Rng rng(61);
      struct M {
        Shape a, b;
        Layout la, lb;
      };
      using L = Layout;
      std::vector<M> ms;
      if (scale == Scale::Perf) {
        ms = {{Shape{512, 512}, Shape{512, 512}, L::Contiguous, L::Contiguous}};
      } else {
        ms = {{Shape{1, 1}, Shape{1, 1}, L::Contiguous, L::Contiguous},
              {Shape{3, 5}, Shape{5, 4}, L::Contiguous, L::Contiguous},
              {Shape{0, 5}, Shape{5, 4}, L::Contiguous, L::Contiguous},
              {Shape{3, 0}, Shape{0, 4}, L::Contiguous, L::Contiguous},
              {Shape{17, 33}, Shape{33, 65}, L::Permuted, L::Permuted},
              {Shape{2, 3, 7, 9}, Shape{9, 5}, L::Contiguous, L::Sliced},
              {Shape{2, 1, 6, 8}, Shape{3, 8, 2}, L::Flipped, L::Contiguous},
              {Shape{4, 16, 16}, Shape{4, 16, 16}, L::Expanded, L::Permuted},
              {Shape{129, 257}, Shape{257, 127}, L::Contiguous, L::Contiguous},
              {Shape{300, 300}, Shape{300, 1}, L::Contiguous, L::Contiguous},
              {Shape{1, 300}, Shape{300, 300}, L::Contiguous, L::Permuted}};
      }
      std::vector<Trial> ts;
      for (const M& m : ms) {
        ts.push_back(
            {m.a.to_string() + " " + name(m.la) + " @ " + m.b.to_string() + " " + name(m.lb),
             {random_host(m.a, dt, rng, Domain::Small), random_host(m.b, dt, rng, Domain::Small)},
             {m.la, m.lb}});
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params&) {
      return Tensors{ops::matmul(std::move(x[0]), std::move(x[1]))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      const HostTensor &a = in[0], &b = in[1];
      const std::size_t m = a.shape[a.rank() - 2], k = a.shape[a.rank() - 1],
                        n = b.shape[b.rank() - 1];
      const Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
      const Shape batch = broadcast(ba, bb);
      auto dims = batch.dims();
      dims.push_back(m);
      dims.push_back(n);
      HostTensor y(Shape(dims), a.dtype);
      for (std::size_t q = 0; q < batch.num_elements(); ++q) {
        const auto bi = unravel(q, batch);
        const std::size_t oa = broadcast_index(bi, ba) * m * k,
                          ob = broadcast_index(bi, bb) * k * n;
        for (std::size_t i = 0; i < m; ++i) {
          for (std::size_t j = 0; j < n; ++j) {
            double s = 0;
            for (std::size_t l = 0; l < k; ++l) s += a.v[oa + i * k + l] * b.v[ob + l * n + j];
            y.v[(q * m + i) * n + j] = s;
          }
        }
      }
      return one(y);
    };
    // Dot products of up to 300 terms of magnitude <= 4 (f16/bf16 results are rounded once).
    c.tol = [](DType dt) {
      switch (dt) {
        case DType::F64:
          return Tolerance{1e-10, 1e-10};
        case DType::F32:
          return Tolerance{1e-4, 1e-3};
        case DType::F16:
          return Tolerance{4e-3, 5e-2};
        default:
          return Tolerance{2e-2, 3e-1};
      }
    };
    cs.push_back(std::move(c));
  }

  // ---- softmax / log_softmax (composites: max, sub, exp, sum, div) ----
  for (const bool log : {false, true}) {
    Case c;
    c.fn = log ? "log_softmax" : "softmax";
    c.family = "activation";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale s) {
      Rng rng(71);
      std::vector<Trial> ts;
      const std::pair<Shape, std::int64_t> ss[] = {
          {Shape{7}, 0},        {Shape{1}, 0},     {Shape{3, 0, 4}, 2}, {Shape{2, 3, 4}, 1},
          {Shape{5, 1030}, -1}, {Shape{70001}, 0}, {Shape{64, 33}, 0}};
      const Layout ls[] = {Layout::Contiguous, Layout::Permuted, Layout::Sliced, Layout::Flipped};
      std::size_t i = 0;
      for (const auto& [sh, d] : ss) {
        Shape shape = sh;
        if (s == Scale::Perf) shape = Shape{1024, 4096};
        HostTensor x = random_host(shape, dt, rng, Domain::Any);
        for (double& v : x.v) v = quantize(dt, v * 4);  // logits up to 16
        ts.push_back({shape.to_string() + " dim " + std::to_string(d),
                      {x},
                      {ls[i++ % 4]},
                      {static_cast<double>(d)}});
        if (s == Scale::Perf) break;
      }
      return ts;
    };
    c.run = [log](Tensors&& x, const Params& p) {
      const auto d = static_cast<std::int64_t>(p[0]);
      // Through the typed facade, as users call it (ember::activation).
      return Tensors{with_typed(std::move(x[0]), [&](auto t) {
        return log ? ember::activation::log_softmax(t, d) : ember::activation::softmax(t, d);
      })};
    };
    c.ref = [log](const std::vector<HostTensor>& in, const Params& p) {
      const HostTensor& x = in[0];
      const std::size_t dim = normalize(static_cast<std::int64_t>(p[0]), x.rank());
      HostTensor y(x.shape, x.dtype);
      std::size_t outer = 1, inner = 1;
      for (std::size_t i = 0; i < dim; ++i) outer *= x.shape[i];
      for (std::size_t i = dim + 1; i < x.rank(); ++i) inner *= x.shape[i];
      const std::size_t n = x.shape[dim];
      for (std::size_t o = 0; o < outer; ++o) {
        for (std::size_t j = 0; j < inner; ++j) {
          double m = -std::numeric_limits<double>::infinity(), s = 0;
          for (std::size_t r = 0; r < n; ++r) m = std::max(m, x.v[(o * n + r) * inner + j]);
          for (std::size_t r = 0; r < n; ++r) s += std::exp(x.v[(o * n + r) * inner + j] - m);
          for (std::size_t r = 0; r < n; ++r) {
            const double z = x.v[(o * n + r) * inner + j] - m;
            y.v[(o * n + r) * inner + j] = log ? z - std::log(s) : std::exp(z) / s;
          }
        }
      }
      return one(y);
    };
    c.tol = [](DType dt) {
      switch (dt) {
        case DType::F64:
          return Tolerance{1e-10, 1e-12};
        case DType::F32:
          return Tolerance{1e-4, 1e-6};
        case DType::F16:
          return Tolerance{4e-3, 2e-3};
        default:
          return Tolerance{3e-2, 2e-2};
      }
    };
    cs.push_back(std::move(c));
  }

  // ---- layer_norm (one IR op): weight / bias present and absent, 1 to 3 normalised dims,
  // odd sizes, rows longer than a GPU block, a large mean offset, a NaN, empty rows ----
  {
    Case c;
    c.fn = "layer_norm";
    c.family = "normalization";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale s) {
      Rng rng(75);
      struct T {
        Shape shape;
        std::size_t dims;
        bool weight, bias;
        double offset;  // added to x: the statistics must not cancel
        Layout layout;
        bool nan;
      };
      const T ts_spec[] = {
          {Shape{7}, 1, true, true, 0, Layout::Contiguous, false},
          {Shape{3, 5}, 1, false, false, 0, Layout::Permuted, false},
          {Shape{2, 3, 4}, 2, true, false, 0, Layout::Sliced, false},
          {Shape{4, 3, 37}, 2, false, true, 0, Layout::Contiguous, false},
          {Shape{5, 1030}, 1, true, true, 0, Layout::Flipped, false},
          {Shape{3, 5001}, 1, true, true, 100, Layout::Contiguous, false},
          {Shape{2, 2, 3, 7}, 3, true, true, 0, Layout::Contiguous, false},
          {Shape{1, 1}, 1, true, true, 0, Layout::Contiguous, false},
          {Shape{33, 17}, 1, true, false, 1000, Layout::Contiguous, false},
          {Shape{4, 9}, 1, false, true, 0, Layout::Contiguous, true},
          {Shape{2, 0, 4}, 1, true, true, 0, Layout::Contiguous, false},
          {Shape{3, 0}, 1, false, false, 0, Layout::Contiguous, false},
      };
      std::vector<Trial> ts;
      for (const T& t : ts_spec) {
        Shape shape = t.shape;
        std::size_t dims = t.dims;
        if (s == Scale::Perf) shape = Shape{4096, 1024}, dims = 1;
        HostTensor x = random_host(shape, dt, rng, Domain::Any);
        for (double& v : x.v) v = quantize(dt, v + t.offset);
        if (t.nan && x.v.size() > 12) x.v[12] = std::numeric_limits<double>::quiet_NaN();
        const Shape ns(shape.dims().end() - static_cast<std::ptrdiff_t>(dims), shape.dims().end());
        Trial tr{shape.to_string() + " dims " + std::to_string(dims) + (t.weight ? " weight" : "") +
                     (t.bias ? " bias" : "") +
                     (t.offset != 0 ? " offset " + std::to_string(t.offset) : "") +
                     (t.nan ? " nan" : ""),
                 {x},
                 {t.layout},
                 {static_cast<double>(dims), t.weight ? 1.0 : 0.0, t.bias ? 1.0 : 0.0, 1e-5}};
        if (t.weight) tr.inputs.push_back(random_host(ns, dt, rng, Domain::Any));
        if (t.bias) tr.inputs.push_back(random_host(ns, dt, rng, Domain::Any));
        ts.push_back(std::move(tr));
        if (s == Scale::Perf) break;
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      const auto dims = static_cast<std::size_t>(p[0]);
      const Shape& xs = x[0].shape();
      const Shape ns(xs.dims().end() - static_cast<std::ptrdiff_t>(dims), xs.dims().end());
      std::size_t next = 1;
      std::optional<DynTensor> w, b;
      if (p[1] != 0) w = x[next++];
      if (p[2] != 0) b = x[next++];
      return Tensors{ops::layer_norm(std::move(x[0]), ns, std::move(w), std::move(b), p[3])};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const HostTensor& x = in[0];
      const auto dims = static_cast<std::size_t>(p[0]);
      const HostTensor* w = p[1] != 0 ? &in[1] : nullptr;
      const HostTensor* b = p[2] != 0 ? &in[p[1] != 0 ? 2 : 1] : nullptr;
      std::size_t n = 1;
      for (std::size_t d = x.rank() - dims; d < x.rank(); ++d) n *= x.shape[d];
      HostTensor y(x.shape, x.dtype);
      const std::size_t rows = n == 0 ? 0 : x.v.size() / n;
      for (std::size_t r = 0; r < rows; ++r) {
        const double* row = x.v.data() + r * n;
        double mean = 0, var = 0;
        for (std::size_t i = 0; i < n; ++i) mean += row[i];
        mean /= static_cast<double>(n);
        for (std::size_t i = 0; i < n; ++i) var += (row[i] - mean) * (row[i] - mean);
        var /= static_cast<double>(n);
        const double rstd = 1.0 / std::sqrt(var + p[3]);
        for (std::size_t i = 0; i < n; ++i) {
          double v = (row[i] - mean) * rstd;
          if (w) v *= w->v[i];
          if (b) v += b->v[i];
          y.v[r * n + i] = v;
        }
      }
      return one(y);
    };
    c.tol = [](DType dt) {
      switch (dt) {
        case DType::F64:
          return Tolerance{1e-10, 1e-10};
        case DType::F32:
          return Tolerance{1e-4, 1e-4};
        case DType::F16:
          return Tolerance{4e-3, 1e-2};
        default:
          return Tolerance{3e-2, 6e-2};
      }
    };
    cs.push_back(std::move(c));
  }

  // ---- rms_norm (ir::RmsNorm where the backend has it, a composite elsewhere): weight
  // present and absent, 1 to 3 normalised dims, one row, odd rows, rows longer than a GPU
  // block, a large offset, a NaN, empty rows, the dtype's default eps ----
  {
    Case c;
    c.fn = "rms_norm";
    c.family = "normalization";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale s) {
      Rng rng(76);
      struct T {
        Shape shape;
        std::size_t dims;
        bool weight;
        double offset;
        Layout layout;
        bool nan;
        double eps;  // < 0: absent (the dtype's epsilon)
      };
      const T ts_spec[] = {
          {Shape{7}, 1, true, 0, Layout::Contiguous, false, 1e-6},
          {Shape{1, 33}, 1, true, 0, Layout::Contiguous, false, -1},
          {Shape{3, 5}, 1, false, 0, Layout::Permuted, false, 1e-5},
          {Shape{2, 3, 4}, 2, true, 0, Layout::Sliced, false, 1e-5},
          {Shape{4, 3, 37}, 2, false, 0, Layout::Contiguous, false, -1},
          {Shape{5, 1030}, 1, true, 0, Layout::Flipped, false, 1e-6},
          {Shape{3, 5001}, 1, true, 100, Layout::Contiguous, false, 1e-6},
          {Shape{2, 2, 3, 7}, 3, true, 0, Layout::Contiguous, false, 0.5},
          {Shape{1, 1}, 1, true, 0, Layout::Contiguous, false, 1e-5},
          {Shape{33, 17}, 1, false, 0, Layout::Contiguous, false, -1},
          {Shape{4, 9}, 1, true, 0, Layout::Contiguous, true, 1e-5},
          {Shape{2, 0, 4}, 1, true, 0, Layout::Contiguous, false, 1e-5},
          {Shape{3, 0}, 1, false, 0, Layout::Contiguous, false, 1e-5},
      };
      std::vector<Trial> ts;
      for (const T& t : ts_spec) {
        Shape shape = t.shape;
        std::size_t dims = t.dims;
        if (s == Scale::Perf) shape = Shape{4096, 1024}, dims = 1;
        HostTensor x = random_host(shape, dt, rng, Domain::Any);
        for (double& v : x.v) v = quantize(dt, v + t.offset);
        if (t.nan && x.v.size() > 12) x.v[12] = std::numeric_limits<double>::quiet_NaN();
        const Shape ns(shape.dims().end() - static_cast<std::ptrdiff_t>(dims), shape.dims().end());
        Trial tr{shape.to_string() + " dims " + std::to_string(dims) + (t.weight ? " weight" : "") +
                     (t.offset != 0 ? " offset " + std::to_string(t.offset) : "") +
                     (t.nan ? " nan" : "") +
                     (t.eps < 0 ? " default eps" : " eps " + std::to_string(t.eps)),
                 {x},
                 {t.layout},
                 {static_cast<double>(dims), t.weight ? 1.0 : 0.0, t.eps}};
        if (t.weight) tr.inputs.push_back(random_host(ns, dt, rng, Domain::Any));
        ts.push_back(std::move(tr));
        if (s == Scale::Perf) break;
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      const auto dims = static_cast<std::size_t>(p[0]);
      const Shape& xs = x[0].shape();
      const Shape ns(xs.dims().end() - static_cast<std::ptrdiff_t>(dims), xs.dims().end());
      std::optional<DynTensor> w;
      if (p[1] != 0) w = x[1];
      std::optional<double> eps;
      if (p[2] >= 0) eps = p[2];
      return Tensors{ops::rms_norm(std::move(x[0]), ns, std::move(w), eps)};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const HostTensor& x = in[0];
      const auto dims = static_cast<std::size_t>(p[0]);
      const HostTensor* w = p[1] != 0 ? &in[1] : nullptr;
      // torch.finfo(dtype).eps
      const double eps = p[2] >= 0               ? p[2]
                         : x.dtype == DType::F64 ? 0x1p-52
                         : x.dtype == DType::F32 ? 0x1p-23
                         : x.dtype == DType::F16 ? 0x1p-10
                                                 : 0x1p-7;
      std::size_t n = 1;
      for (std::size_t d = x.rank() - dims; d < x.rank(); ++d) n *= x.shape[d];
      HostTensor y(x.shape, x.dtype);
      const std::size_t rows = n == 0 ? 0 : x.v.size() / n;
      for (std::size_t r = 0; r < rows; ++r) {
        const double* row = x.v.data() + r * n;
        double ms = 0;
        for (std::size_t i = 0; i < n; ++i) ms += row[i] * row[i];
        const double rstd = 1.0 / std::sqrt(ms / static_cast<double>(n) + eps);
        for (std::size_t i = 0; i < n; ++i) y.v[r * n + i] = row[i] * rstd * (w ? w->v[i] : 1.0);
      }
      return one(y);
    };
    c.tol = [](DType dt) {
      switch (dt) {
        case DType::F64:
          return Tolerance{1e-10, 1e-10};
        case DType::F32:
          return Tolerance{1e-4, 1e-4};
        case DType::F16:
          return Tolerance{4e-3, 1e-2};
        default:
          return Tolerance{3e-2, 6e-2};
      }
    };
    cs.push_back(std::move(c));
  }

  // ---- rms_norm's gradients through the Autodiff decorator (ir::RmsNormGrad where the
  // backend has it): in x and weight for the output gradient g (the last input), against
  // the closed form in f64; one row, odd rows, long rows, two normalised dims ----
  {
    Case c;
    c.fn = "rms_norm_grad";
    c.no_grad = "runs its own backward pass inside; RmsNormGrad's rule is checked by Grad.RmsNorm";
    c.family = "normalization";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale) {
      Rng rng(78);
      const std::pair<Shape, std::size_t> shapes[] = {
          {Shape{1, 8}, 1}, {Shape{7, 13}, 1}, {Shape{3, 2, 5}, 2}, {Shape{2, 2100}, 1}};
      std::vector<Trial> ts;
      for (const auto& [shape, dims] : shapes) {
        const Shape ns(shape.dims().end() - static_cast<std::ptrdiff_t>(dims), shape.dims().end());
        ts.push_back(
            {shape.to_string() + " dims " + std::to_string(dims),
             {random_host(shape, dt, rng, Domain::Any), random_host(ns, dt, rng, Domain::Any),
              random_host(shape, dt, rng, Domain::Any)},
             {Layout::Contiguous, Layout::Contiguous, Layout::Sliced},
             {static_cast<double>(dims), 1e-5}});
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      const ember::Device ad = x[0].device().autodiff();
      auto xa = ops::require_grad(ops::from_inner(x[0], ad));
      auto wa = ops::require_grad(ops::from_inner(x[1], ad));
      auto y = ops::rms_norm(xa, x[1].shape(), wa, p[1]);
      auto loss = ops::reduce_all(ember::ir::ReduceFn::Sum, ops::binary(ember::ir::BinaryFn::Mul, y,
                                                                        ops::from_inner(x[2], ad)));
      auto grads = ops::backward(loss);
      return Tensors{ops::grad(xa, grads).value(), ops::grad(wa, grads).value()};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const HostTensor &x = in[0], &w = in[1], &g = in[2];
      const std::size_t n = w.v.size(), rows = x.v.size() / n;
      HostTensor dx(x.shape, x.dtype), dw(w.shape, x.dtype);
      for (std::size_t r = 0; r < rows; ++r) {
        const std::size_t o = r * n;
        double ms = 0, c = 0;
        for (std::size_t i = 0; i < n; ++i) ms += x.v[o + i] * x.v[o + i];
        const double rstd = 1.0 / std::sqrt(ms / double(n) + p[1]);
        for (std::size_t i = 0; i < n; ++i) c += g.v[o + i] * w.v[i] * x.v[o + i] * rstd;
        for (std::size_t i = 0; i < n; ++i) {
          const double xhat = x.v[o + i] * rstd;
          dx.v[o + i] = rstd * (g.v[o + i] * w.v[i] - xhat * c / double(n));
          dw.v[i] += g.v[o + i] * xhat;
        }
      }
      return std::vector<HostTensor>{dx, dw};
    };
    c.tol = [](DType dt) {
      switch (dt) {
        case DType::F64:
          return Tolerance{1e-9, 1e-9};
        case DType::F32:
          return Tolerance{1e-3, 1e-3};
        case DType::F16:
          return Tolerance{2e-2, 3e-2};
        default:
          return Tolerance{1e-1, 1e-1};
      }
    };
    cs.push_back(std::move(c));
  }

  // ---- group_norm (ir::GroupNorm where the backend has it, batch norm's op or layer norm
  // and the affine elsewhere): groups 1, some and every channel (instance norm), ranks 2 to
  // 5, weight / bias present and absent, a large offset, strided inputs, empty inputs ----
  {
    Case c;
    c.fn = "group_norm";
    c.family = "normalization";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale s) {
      Rng rng(79);
      struct T {
        Shape shape;
        std::size_t groups;
        bool weight, bias;
        double offset;
        Layout layout;
      };
      const T ts_spec[] = {
          {Shape{4, 6}, 3, true, true, 0, Layout::Contiguous},
          {Shape{2, 6, 7}, 2, false, false, 0, Layout::Permuted},
          {Shape{3, 4, 5, 6}, 4, true, false, 0, Layout::Sliced},
          {Shape{2, 4, 37}, 1, false, true, 100, Layout::Contiguous},
          {Shape{2, 6, 2, 3, 4}, 3, true, true, 0, Layout::Flipped},
          {Shape{1, 5, 1}, 5, true, true, 0, Layout::Contiguous},
          {Shape{3, 8, 33}, 8, true, true, 1000, Layout::Contiguous},
          {Shape{2, 32, 9, 9}, 8, true, true, 0, Layout::Contiguous},
          {Shape{0, 4, 3}, 2, true, true, 0, Layout::Contiguous},
      };
      std::vector<Trial> ts;
      for (const T& t : ts_spec) {
        Shape shape = t.shape;
        std::size_t groups = t.groups;
        if (s == Scale::Perf) shape = Shape{32, 64, 32, 32}, groups = 32;
        HostTensor x = random_host(shape, dt, rng, Domain::Any);
        for (double& v : x.v) v = quantize(dt, v + t.offset);
        Trial tr{shape.to_string() + " groups " + std::to_string(groups) +
                     (t.weight ? " weight" : "") + (t.bias ? " bias" : "") +
                     (t.offset != 0 ? " offset " + std::to_string(t.offset) : ""),
                 {x},
                 {t.layout},
                 {static_cast<double>(groups), t.weight ? 1.0 : 0.0, t.bias ? 1.0 : 0.0, 1e-5}};
        if (t.weight) tr.inputs.push_back(random_host(Shape{shape[1]}, dt, rng, Domain::Any));
        if (t.bias) tr.inputs.push_back(random_host(Shape{shape[1]}, dt, rng, Domain::Any));
        ts.push_back(std::move(tr));
        if (s == Scale::Perf) break;
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      std::size_t next = 1;
      std::optional<DynTensor> w, b;
      if (p[1] != 0) w = x[next++];
      if (p[2] != 0) b = x[next++];
      return Tensors{ops::group_norm(std::move(x[0]), static_cast<std::size_t>(p[0]), std::move(w),
                                     std::move(b), p[3])};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const HostTensor& x = in[0];
      const HostTensor* w = p[1] != 0 ? &in[1] : nullptr;
      const HostTensor* b = p[2] != 0 ? &in[p[1] != 0 ? 2 : 1] : nullptr;
      const std::size_t n = x.shape[0], ch = x.shape[1], groups = static_cast<std::size_t>(p[0]);
      const std::size_t l = n * ch == 0 ? 0 : x.v.size() / (n * ch), k = ch / groups;
      HostTensor y(x.shape, x.dtype);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t gi = 0; gi < groups; ++gi) {
          const std::size_t o = (i * ch + gi * k) * l, m = k * l;
          double mean = 0, var = 0;
          for (std::size_t j = 0; j < m; ++j) mean += x.v[o + j];
          mean /= double(m);
          for (std::size_t j = 0; j < m; ++j) var += (x.v[o + j] - mean) * (x.v[o + j] - mean);
          const double rstd = 1.0 / std::sqrt(var / double(m) + p[3]);
          for (std::size_t j = 0; j < m; ++j) {
            const std::size_t c = gi * k + j / l;
            double v = (x.v[o + j] - mean) * rstd;
            if (w) v *= w->v[c];
            if (b) v += b->v[c];
            y.v[o + j] = v;
          }
        }
      return one(y);
    };
    c.tol = [](DType dt) {
      switch (dt) {
        case DType::F64:
          return Tolerance{1e-10, 1e-10};
        case DType::F32:
          return Tolerance{1e-4, 1e-4};
        case DType::F16:
          return Tolerance{4e-3, 1e-2};
        default:
          return Tolerance{3e-2, 6e-2};
      }
    };
    cs.push_back(std::move(c));
  }

  // ---- group_norm's gradients through the Autodiff decorator (ir::GroupNormGrad where the
  // backend has it): in x, weight and bias for the output gradient g (the last input),
  // against the closed form in f64; some groups, instance norm, one group. Groups of at
  // least six values: the statistics are x's dtype (as batch norm's), and with two values a
  // group dx is 0 up to eps, a cancellation of terms of rstd's size that a bf16 mean misses
  // by far more than bf16's own rounding ----
  {
    Case c;
    c.fn = "group_norm_grad";
    c.no_grad =
        "runs its own backward pass inside; GroupNormGrad's rule is checked by Grad.GroupNorm";
    c.family = "normalization";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale) {
      Rng rng(80);
      const std::pair<Shape, std::size_t> shapes[] = {{Shape{4, 6, 5}, 3},
                                                      {Shape{3, 4, 5, 4}, 2},
                                                      {Shape{2, 3, 37}, 3},
                                                      {Shape{2, 4, 9}, 1},
                                                      {Shape{2, 16, 300}, 4}};
      std::vector<Trial> ts;
      for (const auto& [shape, groups] : shapes) {
        ts.push_back({shape.to_string() + " groups " + std::to_string(groups),
                      {random_host(shape, dt, rng, Domain::Any),
                       random_host(Shape{shape[1]}, dt, rng, Domain::Any),
                       random_host(Shape{shape[1]}, dt, rng, Domain::Any),
                       random_host(shape, dt, rng, Domain::Any)},
                      {Layout::Contiguous, Layout::Contiguous, Layout::Contiguous, Layout::Sliced},
                      {static_cast<double>(groups), 1e-5}});
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      const ember::Device ad = x[0].device().autodiff();
      auto xa = ops::require_grad(ops::from_inner(x[0], ad));
      auto wa = ops::require_grad(ops::from_inner(x[1], ad));
      auto ba = ops::require_grad(ops::from_inner(x[2], ad));
      auto y = ops::group_norm(xa, static_cast<std::size_t>(p[0]), wa, ba, p[1]);
      auto loss = ops::reduce_all(ember::ir::ReduceFn::Sum, ops::binary(ember::ir::BinaryFn::Mul, y,
                                                                        ops::from_inner(x[3], ad)));
      auto grads = ops::backward(loss);
      return Tensors{ops::grad(xa, grads).value(), ops::grad(wa, grads).value(),
                     ops::grad(ba, grads).value()};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const HostTensor &x = in[0], &w = in[1], &g = in[3];
      const std::size_t n = x.shape[0], ch = x.shape[1], groups = static_cast<std::size_t>(p[0]);
      const std::size_t l = x.v.size() / (n * ch), k = ch / groups, m = k * l;
      HostTensor dx(x.shape, x.dtype), dw(Shape{ch}, x.dtype), db(Shape{ch}, x.dtype);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t gi = 0; gi < groups; ++gi) {
          const std::size_t o = (i * ch + gi * k) * l;
          double mean = 0, var = 0, sgw = 0, sgwx = 0;
          for (std::size_t j = 0; j < m; ++j) mean += x.v[o + j];
          mean /= double(m);
          for (std::size_t j = 0; j < m; ++j) var += (x.v[o + j] - mean) * (x.v[o + j] - mean);
          const double rstd = 1.0 / std::sqrt(var / double(m) + p[1]);
          for (std::size_t j = 0; j < m; ++j) {
            const std::size_t c = gi * k + j / l;
            const double xhat = (x.v[o + j] - mean) * rstd, gv = g.v[o + j];
            sgw += gv * w.v[c];
            sgwx += gv * w.v[c] * xhat;
            dw.v[c] += gv * xhat;
            db.v[c] += gv;
          }
          for (std::size_t j = 0; j < m; ++j) {
            const std::size_t c = gi * k + j / l;
            const double xhat = (x.v[o + j] - mean) * rstd;
            dx.v[o + j] = rstd * (g.v[o + j] * w.v[c] - sgw / double(m) - xhat * sgwx / double(m));
          }
        }
      return std::vector<HostTensor>{dx, dw, db};
    };
    c.tol = [](DType dt) {
      switch (dt) {
        case DType::F64:
          return Tolerance{1e-9, 1e-9};
        case DType::F32:
          return Tolerance{1e-3, 1e-3};
        case DType::F16:
          return Tolerance{2e-2, 3e-2};
        default:
          return Tolerance{1e-1, 1e-1};
      }
    };
    cs.push_back(std::move(c));
  }

  // ---- batch_norm_training (ir::BatchNorm where the backend has it): ranks 2 to 5,
  // weight / bias present and absent, a large mean offset, a single value per channel,
  // strided inputs, no channels. Outputs y, the batch mean and the biased variance. ----
  {
    Case c;
    c.fn = "batch_norm_training";
    c.no_grad =
        "its batch statistics are detached outputs (as PyTorch's running statistics); y's "
        "gradients are checked by batch_norm_training_grad and Grad.BatchNorm";
    c.family = "normalization";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale s) {
      Rng rng(76);
      struct T {
        Shape shape;
        bool weight, bias;
        double offset;
        Layout layout;
      };
      const T ts_spec[] = {
          {Shape{4, 3}, true, true, 0, Layout::Contiguous},
          {Shape{5, 3, 7}, false, false, 0, Layout::Permuted},
          {Shape{2, 4, 5, 6}, true, false, 0, Layout::Sliced},
          {Shape{3, 2, 37}, false, true, 100, Layout::Contiguous},
          {Shape{2, 3, 2, 3, 4}, true, true, 0, Layout::Flipped},
          {Shape{1, 5, 1}, true, true, 0, Layout::Contiguous},
          {Shape{8, 2, 33}, true, true, 1000, Layout::Contiguous},
          {Shape{3, 0, 4}, true, true, 0, Layout::Contiguous},
      };
      std::vector<Trial> ts;
      for (const T& t : ts_spec) {
        Shape shape = t.shape;
        if (s == Scale::Perf) shape = Shape{64, 32, 28, 28};
        HostTensor x = random_host(shape, dt, rng, Domain::Any);
        for (double& v : x.v) v = quantize(dt, v + t.offset);
        Trial tr{shape.to_string() + (t.weight ? " weight" : "") + (t.bias ? " bias" : "") +
                     (t.offset != 0 ? " offset " + std::to_string(t.offset) : ""),
                 {x},
                 {t.layout},
                 {t.weight ? 1.0 : 0.0, t.bias ? 1.0 : 0.0, 1e-5}};
        if (t.weight) tr.inputs.push_back(random_host(Shape{shape[1]}, dt, rng, Domain::Any));
        if (t.bias) tr.inputs.push_back(random_host(Shape{shape[1]}, dt, rng, Domain::Any));
        ts.push_back(std::move(tr));
        if (s == Scale::Perf) break;
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      std::size_t next = 1;
      std::optional<DynTensor> w, b;
      if (p[0] != 0) w = x[next++];
      if (p[1] != 0) b = x[next++];
      auto r = ops::batch_norm_training(std::move(x[0]), std::move(w), std::move(b), p[2]);
      return Tensors{std::move(r.y), std::move(r.mean), std::move(r.var)};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const HostTensor& x = in[0];
      const HostTensor* w = p[0] != 0 ? &in[1] : nullptr;
      const HostTensor* b = p[1] != 0 ? &in[p[0] != 0 ? 2 : 1] : nullptr;
      const std::size_t n = x.shape[0], ch = x.shape[1];
      const std::size_t l = n * ch == 0 ? 0 : x.v.size() / (n * ch);
      HostTensor y(x.shape, x.dtype), mean(Shape{ch}, x.dtype), var(Shape{ch}, x.dtype);
      for (std::size_t c = 0; c < ch; ++c) {
        double m = 0, v = 0;
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < l; ++j) m += x.v[(i * ch + c) * l + j];
        m /= double(n * l);
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < l; ++j) {
            const double d = x.v[(i * ch + c) * l + j] - m;
            v += d * d;
          }
        v /= double(n * l);
        const double rstd = 1.0 / std::sqrt(v + p[2]);
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < l; ++j) {
            const std::size_t k = (i * ch + c) * l + j;
            double o = (x.v[k] - m) * rstd;
            if (w) o *= w->v[c];
            if (b) o += b->v[c];
            y.v[k] = o;
          }
        mean.v[c] = m;
        var.v[c] = v;
      }
      return std::vector<HostTensor>{y, mean, var};
    };
    c.tol = [](DType dt) {
      switch (dt) {
        case DType::F64:
          return Tolerance{1e-10, 1e-10};
        case DType::F32:
          return Tolerance{1e-4, 1e-4};
        case DType::F16:
          return Tolerance{4e-3, 1e-2};
        default:
          return Tolerance{3e-2, 6e-2};
      }
    };
    cs.push_back(std::move(c));
  }

  // ---- batch_norm_training's gradients through the Autodiff decorator (ir::BatchNormGrad
  // where the backend has it): in x, weight and bias for the output gradient g (the last
  // input), against the closed form in f64 ----
  {
    Case c;
    c.fn = "batch_norm_training_grad";
    c.no_grad =
        "runs its own backward pass inside; BatchNormGrad's rule is checked by Grad.BatchNorm";
    c.family = "normalization";
    c.dtypes = {DType::F32, DType::F64};
    c.trials = [](DType dt, Scale) {
      Rng rng(77);
      const Shape shapes[] = {Shape{4, 3}, Shape{3, 2, 5, 4}, Shape{2, 3, 37}, Shape{6, 2, 1}};
      std::vector<Trial> ts;
      for (const Shape& shape : shapes) {
        ts.push_back({shape.to_string(),
                      {random_host(shape, dt, rng, Domain::Any),
                       random_host(Shape{shape[1]}, dt, rng, Domain::Any),
                       random_host(Shape{shape[1]}, dt, rng, Domain::Any),
                       random_host(shape, dt, rng, Domain::Any)},
                      {Layout::Contiguous, Layout::Contiguous, Layout::Contiguous, Layout::Sliced},
                      {1e-5}});
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      const ember::Device ad = x[0].device().autodiff();
      auto xa = ops::require_grad(ops::from_inner(x[0], ad));
      auto wa = ops::require_grad(ops::from_inner(x[1], ad));
      auto ba = ops::require_grad(ops::from_inner(x[2], ad));
      auto y = ops::batch_norm_training(xa, wa, ba, p[0]).y;
      auto loss = ops::reduce_all(ember::ir::ReduceFn::Sum, ops::binary(ember::ir::BinaryFn::Mul, y,
                                                                        ops::from_inner(x[3], ad)));
      auto grads = ops::backward(loss);
      return Tensors{ops::grad(xa, grads).value(), ops::grad(wa, grads).value(),
                     ops::grad(ba, grads).value()};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const HostTensor &x = in[0], &w = in[1], &g = in[3];
      const std::size_t n = x.shape[0], ch = x.shape[1], l = x.v.size() / (n * ch);
      const double m = double(n * l);
      HostTensor dx(x.shape, x.dtype), dw(Shape{ch}, x.dtype), db(Shape{ch}, x.dtype);
      const auto at = [&](std::size_t i, std::size_t c, std::size_t j) {
        return (i * ch + c) * l + j;
      };
      for (std::size_t c = 0; c < ch; ++c) {
        double mean = 0, var = 0, sg = 0, sgx = 0;
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < l; ++j) mean += x.v[at(i, c, j)];
        mean /= m;
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < l; ++j) var += std::pow(x.v[at(i, c, j)] - mean, 2);
        const double rstd = 1.0 / std::sqrt(var / m + p[0]);
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < l; ++j) {
            const std::size_t k = at(i, c, j);
            sg += g.v[k];
            sgx += g.v[k] * (x.v[k] - mean) * rstd;
          }
        for (std::size_t i = 0; i < n; ++i)
          for (std::size_t j = 0; j < l; ++j) {
            const std::size_t k = at(i, c, j);
            const double xhat = (x.v[k] - mean) * rstd;
            dx.v[k] = w.v[c] * rstd * (g.v[k] - sg / m - xhat * sgx / m);
          }
        dw.v[c] = sgx;
        db.v[c] = sg;
      }
      return std::vector<HostTensor>{dx, dw, db};
    };
    c.tol = [](DType dt) {
      return dt == DType::F64 ? Tolerance{1e-9, 1e-9} : Tolerance{1e-3, 1e-3};
    };
    cs.push_back(std::move(c));
  }

  // ---- cast from every dtype (the case's) to every dtype ----
  {
    Case c;
    c.fn = "cast";
    c.also = {"float_", "int_", "bool_"};  // casts to the device's default of a kind
    c.family = "conversion";
    c.dtypes = kAllDtypes;
    c.trials = [](DType dt, Scale s) {
      Rng rng(81);
      std::vector<Trial> ts;
      for (DType to : kAllDtypes) {
        HostTensor x =
            random_host(s == Scale::Perf ? Shape{1u << 20} : Shape{1031}, dt, rng, Domain::Any);
        if (is_float_dtype(dt)) {
          // Out-of-range values saturate; NaN gives 0; infinities saturate too.
          for (std::size_t i = 0; i + 8 < x.numel(); i += 97) {
            x.v[i] = quantize(dt, 300.5);
            x.v[i + 1] = quantize(dt, -70000.0);
            x.v[i + 2] = quantize(dt, 3e9);
          }
          add_specials(x, rng);
          if (!is_float_dtype(to) && to != DType::Bool) {
            // f16 / bf16 targets aside, every float value is exactly representable after
            // quantize; keep large magnitudes for int targets only.
          } else if (to == DType::F16 || to == DType::BF16) {
            for (double& v : x.v)
              v = std::isfinite(v)
                      ? quantize(DType::BF16, quantize(DType::F16, std::fmod(v, 100.0)))
                      : v;
          }
        } else if (dt != DType::Bool) {
          for (std::size_t i = 0; i + 4 < x.numel(); i += 61)
            x.v[i] = dt == DType::U8 ? 200 : (dt == DType::I8 ? -100 : 1000);
        }
        ts.push_back({std::string("to ") + ember::name(to),
                      {x},
                      {ts.size() % 2 ? Layout::Sliced : Layout::Contiguous},
                      {static_cast<double>(static_cast<int>(to))}});
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      return Tensors{ops::cast(std::move(x[0]), static_cast<DType>(static_cast<int>(p[0])))};
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params& p) {
      const auto to = static_cast<DType>(static_cast<int>(p[0]));
      HostTensor y(in[0].shape, to);
      for (std::size_t i = 0; i < y.numel(); ++i) y.v[i] = cast_ref(in[0].v[i], in[0].dtype, to);
      return one(y);
    };
    cs.push_back(std::move(c));
  }

  // ---- to_device: onto every available device and back ----
  {
    Case c;
    c.fn = "to_device";
    c.family = "conversion";
    c.dtypes = kAllDtypes;
    // A tensor moved to another device leaves its graph (autodiff tracks within one device).
    c.no_grad = "to_device leaves the autodiff graph";
    c.trials = [](DType dt, Scale s) { return unary_trials(dt, s, Domain::Any, true, 91); };
    c.run = [](Tensors&& x, const Params&) {
      const Device home = x[0].device();
      Tensors out;
      for (const Device& d : conformance_devices()) {
        out.push_back(ops::to_device(ops::to_device(x[0], d), home));
      }
      return out;
    };
    c.ref = [](const std::vector<HostTensor>& in, const Params&) {
      return std::vector<HostTensor>(conformance_devices().size(), in[0]);
    };
    cs.push_back(std::move(c));
  }

  // ---- creation ----
  using CreateFn = std::function<DynTensor(const Device&, DType, const Params&)>;
  using CreateRef = std::function<HostTensor(DType, const Params&)>;
  auto creation = [&](const std::string& fn, std::vector<DType> dts, std::vector<Params> params,
                      CreateFn f, CreateRef r) {
    Case c;
    c.fn = fn;
    c.family = "creation";
    c.dtypes = std::move(dts);
    // The case's dtype travels as the last parameter; one input carries the device.
    c.trials = [params](DType dt, Scale) {
      std::vector<Trial> ts;
      for (Params p : params) {
        std::string label;
        for (double v : p) label += std::to_string(v) + " ";
        p.push_back(static_cast<double>(static_cast<int>(dt)));
        ts.push_back({label, {HostTensor(Shape{1}, DType::F32)}, {}, p});
      }
      return ts;
    };
    c.run = [f](Tensors&& x, const Params& p) {
      const auto dt = static_cast<DType>(static_cast<int>(p.back()));
      return Tensors{f(x[0].device(), dt, p)};
    };
    c.ref = [r](const std::vector<HostTensor>&, const Params& p) {
      return one(r(static_cast<DType>(static_cast<int>(p.back())), p));
    };
    cs.push_back(std::move(c));
  };
  auto shape_of = [](const Params& p, std::size_t n) {
    std::vector<std::size_t> d;
    for (std::size_t i = 0; i < n; ++i) d.push_back(static_cast<std::size_t>(p[i]));
    return Shape(d);
  };
  const std::vector<Params> shapes3 = {{2, 3, 4}, {0, 5, 1}, {1, 1, 70001}};
  for (const auto& [fn, value] : {std::pair{"zeros", 0.0}, std::pair{"ones", 1.0},
                                  std::pair{"full", -3.0}, std::pair{"empty", 0.0}}) {
    const std::string name_ = fn;
    const double val = value;
    creation(
        fn, kAllDtypes, shapes3,
        [=](const Device& d, DType dt, const Params& p) {
          const Shape s = shape_of(p, 3);
          if (name_ == "zeros") return ops::zeros(s, dt, d);
          if (name_ == "ones") return ops::ones(s, dt, d);
          if (name_ == "full") return ops::full(s, val, dt, d);
          return ops::empty(s, dt, d);
        },
        [=](DType dt, const Params& p) {
          HostTensor y(shape_of(p, 3), dt);
          // full(-3) in u8 wraps to 253 (the fill value is an i64 narrowed as C++ does, as
          // PyTorch's full); in bool it is true.
          const double v = dt == DType::Bool            ? (val != 0)
                           : dt == DType::U8 && val < 0 ? val + 256
                                                        : val;
          std::fill(y.v.begin(), y.v.end(), v);
          return y;
        });
  }
  // zeros, ones, full with a tensor's own shape, dtype and device.
  for (auto& c : cs) {
    if (c.fn == "zeros" || c.fn == "ones" || c.fn == "full") c.also = {c.fn + "_like"};
  }
  // empty() is documented as zero-filled today; only its shape and dtype are the contract.
  cs.back().ref = nullptr;
  cs.back().verify = [](const std::vector<HostTensor>&, const std::vector<HostTensor>& out,
                        const Params&) {
    return out.size() == 1 ? std::string() : std::string("expected one output");
  };
  creation(
      "arange", concat(kFloats, kSignedInts), {{0, 10, 1}, {5, -3, -2}, {0, 70000, 3}, {3, 3, 1}},
      [](const Device& d, DType dt, const Params& p) {
        return ops::arange(p[0], p[1], p[2], dt, d);
      },
      [](DType dt, const Params& p) {
        const double n = std::max(0.0, std::ceil((p[1] - p[0]) / p[2]));
        HostTensor y(Shape{static_cast<std::size_t>(n)}, dt);
        for (std::size_t i = 0; i < y.numel(); ++i) y.v[i] = p[0] + static_cast<double>(i) * p[2];
        return y;
      });
  for (auto& c : cs) {
    if (c.fn == "arange") {
      c.also = {"arange_step"};  // the Tensor method with a step (steps 1, -2, 3 here)
      // i8 / i16 cannot hold 70000: those dtypes use the small parameter sets only.
      auto inner = c.trials;
      c.trials = [inner](DType dt, Scale s) {
        auto ts = inner(dt, s);
        if (dt == DType::I8 || dt == DType::I16) {
          std::erase_if(ts, [](const Trial& t) { return t.params[1] > 1000; });
        }
        return ts;
      };
    }
  }
  creation(
      "linspace", kFloats, {{0, 1, 11}, {-2, 2, 1}, {5, -5, 0}, {0, 1, 100001}},
      [](const Device& d, DType dt, const Params& p) {
        return ops::linspace(p[0], p[1], static_cast<std::size_t>(p[2]), dt, d);
      },
      [](DType dt, const Params& p) {
        const auto n = static_cast<std::size_t>(p[2]);
        HostTensor y(Shape{n}, dt);
        const double step = n > 1 ? (p[1] - p[0]) / static_cast<double>(n - 1) : 0.0;
        for (std::size_t i = 0; i < n; ++i) y.v[i] = p[0] + static_cast<double>(i) * step;
        return y;
      });
  creation(
      "eye", kAllDtypes, {{1}, {5}, {0}, {130}},
      [](const Device& d, DType dt, const Params& p) {
        return ops::eye(static_cast<std::size_t>(p[0]), dt, d);
      },
      [](DType dt, const Params& p) {
        const auto n = static_cast<std::size_t>(p[0]);
        HostTensor y(Shape{n, n}, dt);
        for (std::size_t i = 0; i < n; ++i) y.v[i * n + i] = 1;
        return y;
      });
  for (const std::string fn : {"triu_mask", "tril_mask"}) {
    const bool upper = fn == "triu_mask";
    creation(
        fn, {DType::Bool}, {{4, 6, 0}, {2, 3, 5, 1}, {5, 5, -2}},
        [upper](const Device& d, DType, const Params& p) {
          std::vector<std::size_t> dims;
          for (std::size_t i = 0; i + 2 < p.size(); ++i)
            dims.push_back(static_cast<std::size_t>(p[i]));
          const auto off = static_cast<std::int64_t>(p[p.size() - 2]);
          return upper ? ops::triu_mask(Shape(dims), off, d) : ops::tril_mask(Shape(dims), off, d);
        },
        [upper](DType, const Params& p) {
          std::vector<std::size_t> dims;
          for (std::size_t i = 0; i + 2 < p.size(); ++i)
            dims.push_back(static_cast<std::size_t>(p[i]));
          const double off = p[p.size() - 2];
          HostTensor y(Shape(dims), DType::Bool);
          for (std::size_t q = 0; q < y.numel(); ++q) {
            const auto i = unravel(q, y.shape);
            const double diff =
                static_cast<double>(i[i.size() - 1]) - static_cast<double>(i[i.size() - 2]);
            y.v[q] = (upper ? diff > off : diff < off) ? 1 : 0;
          }
          return y;
        });
  }
  // tril / triu of a tensor.
  for (const std::string fn : {"tril", "triu"}) {
    Case c;
    c.fn = fn;
    c.family = "creation";
    c.dtypes = concat(kAllFloats, kInts);
    c.trials = [](DType dt, Scale s) {
      Rng rng(101);
      std::vector<Trial> ts;
      const Shape shapes[] = {Shape{4, 6}, Shape{2, 5, 3}, Shape{0, 3}, Shape{70, 1030}};
      const Layout ls[] = {Layout::Contiguous, Layout::Permuted, Layout::Sliced, Layout::Flipped};
      std::size_t i = 0;
      for (const Shape& sh : shapes) {
        for (double diag : {0.0, 1.0, -2.0}) {
          ts.push_back({sh.to_string(),
                        {random_host(s == Scale::Perf ? Shape{2048, 2048} : sh, dt, rng)},
                        {ls[i++ % 4]},
                        {diag}});
        }
      }
      return ts;
    };
    const bool lower = fn == "tril";
    c.run = [lower](Tensors&& x, const Params& p) {
      const auto d = static_cast<std::int64_t>(p[0]);
      return Tensors{lower ? ops::tril(std::move(x[0]), d) : ops::triu(std::move(x[0]), d)};
    };
    c.ref = [lower](const std::vector<HostTensor>& in, const Params& p) {
      HostTensor y = in[0];
      for (std::size_t q = 0; q < y.numel(); ++q) {
        const auto i = unravel(q, y.shape);
        const double diff =
            static_cast<double>(i[i.size() - 1]) - static_cast<double>(i[i.size() - 2]);
        if (lower ? diff > p[0] : diff < p[0]) y.v[q] = 0;
      }
      return one(y);
    };
    cs.push_back(std::move(c));
  }

  // random: statistics of a large draw within tolerance (mean, std, range).
  {
    Case c;
    c.fn = "random";
    c.also = {"random_like"};  // random with a tensor's own shape, dtype and device
    c.family = "creation";
    c.dtypes = kAllFloats;
    c.trials = [](DType dt, Scale) {
      std::vector<Trial> ts;
      // params: kind (0 default, 1 uniform, 2 normal, 3 bernoulli), a, b, dtype.
      for (Params p : std::vector<Params>{{0, 0, 1}, {1, -2, 6}, {2, 3, 0.5}, {3, 0.25, 0}}) {
        p.push_back(static_cast<double>(static_cast<int>(dt)));
        ts.push_back({"kind " + std::to_string(static_cast<int>(p[0])),
                      {HostTensor(Shape{1}, DType::F32)},
                      {},
                      p});
      }
      return ts;
    };
    c.run = [](Tensors&& x, const Params& p) {
      Distribution dist;
      switch (static_cast<int>(p[0])) {
        case 1:
          dist = Distribution::uniform(p[1], p[2]);
          break;
        case 2:
          dist = Distribution::normal(p[1], p[2]);
          break;
        case 3:
          dist = Distribution::bernoulli(p[1]);
          break;
        default:
          dist = Distribution::default_();
      }
      const auto dt = static_cast<DType>(static_cast<int>(p[3]));
      auto r = ops::random(Shape{100, 1000}, dist, dt, x[0].device());
      return Tensors{std::move(r), std::move(x[0])};
    };
    c.verify = [](const std::vector<HostTensor>&, const std::vector<HostTensor>& out,
                  const Params& p) -> std::string {
      const HostTensor& r = out[0];
      if (r.shape != Shape{100, 1000}) return "shape " + r.shape.to_string();
      double sum = 0, sq = 0, lo = 1e300, hi = -1e300;
      for (double v : r.v) {
        if (!std::isfinite(v)) return "non-finite value drawn";
        sum += v;
        sq += v * v;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      const double n = static_cast<double>(r.numel()), mean = sum / n;
      const double sd = std::sqrt(std::max(0.0, sq / n - mean * mean));
      auto near = [](double a, double b, double t) { return std::fabs(a - b) <= t; };
      // 100000 draws: the sample mean is within ~5 standard errors of the true one.
      bool binary = true;
      for (double v : r.v) binary = binary && (v == 0 || v == 1);
      bool ok = false;
      switch (static_cast<int>(p[0])) {
        case 0:
          ok = lo >= 0 && hi <= 1 && near(mean, 0.5, 0.005) && near(sd, std::sqrt(1.0 / 12), 0.005);
          break;
        case 1:
          ok = lo >= -2 && hi <= 6 && near(mean, 2, 0.04) && near(sd, 8 / std::sqrt(12.0), 0.04);
          break;
        case 2:
          ok = near(mean, 3, 0.01) && near(sd, 0.5, 0.01);
          break;
        case 3:
          ok = binary && near(mean, 0.25, 0.01);
          break;
        default:
          break;
      }
      if (ok) return "";
      return "draw does not match the distribution: mean " + std::to_string(mean) + ", std " +
             std::to_string(sd) + ", range [" + std::to_string(lo) + ", " + std::to_string(hi) +
             "]";
    };
    cs.push_back(std::move(c));
  }
}

}  // namespace conformance
