// Resampling (ember::module_ops::interpolate): torch.nn.functional.interpolate's nearest,
// nearest-exact, linear (bi-, tri-) and bicubic modes, one spatial dim at a time.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "ember/base/checked.hpp"
#include "ember/tensor/module_ops.hpp"
#include "tensor/op_support.hpp"

namespace ember::module_ops {
namespace {

using ops::detail::describe;

// Note [Interpolation, one dim at a time]
// Every mode is separable: an output entry along dim d reads at most four input entries
// of that dim, with weights that depend only on the output index. So each spatial dim is
// resampled in turn, innermost first (PyTorch's order of accumulation: bilinear blends
// along W, then along H), as a sum over taps of index_select(x, d, tap indices) times the
// taps' weights broadcast along d — no matrix, and an infinity touches only the outputs
// that read it. Indices and weights follow PyTorch's CPU kernels to the rounding: nearest
// computes its source index in f32 whatever the dtype (with PyTorch's shortcuts for equal
// and doubled sizes), the other modes in the compute type (f64 for f64, f32 otherwise).
// The gradient is the autodiff of select, multiply and add: a scatter-add of the weighted
// upstream gradient onto the taps, as PyTorch's backward kernels compute.

struct Taps {
  std::vector<std::vector<std::int64_t>> index;  // [tap][output]
  std::vector<std::vector<double>> weight;       // [tap][output]; empty: weight 1 (nearest)
};

// PyTorch's scale for source indices: scale_factor's inverse when given, else in / out.
template <class T>
T index_scale(std::size_t in, std::size_t out, double scale_factor, bool align_corners) {
  if (align_corners) return out > 1 ? T(in - 1) / T(out - 1) : T(0);
  return scale_factor > 0 ? T(1.0 / scale_factor) : T(in) / T(out);
}

Taps nearest_taps(std::size_t in, std::size_t out, double scale_factor, bool exact) {
  Taps t;
  t.index.assign(1, std::vector<std::int64_t>(out));
  const float scale = index_scale<float>(in, out, scale_factor, false);
  const auto last = std::int64_t(in) - 1;
  for (std::size_t o = 0; o < out; ++o) {
    std::int64_t i;
    if (exact) {
      i = std::min(std::int64_t(std::floor((float(o) + 0.5f) * scale)), last);
    } else if (out == in) {
      i = std::int64_t(o);
    } else if (out == 2 * in) {
      i = std::int64_t(o >> 1);
    } else {
      i = std::min(std::int64_t(std::floor(float(o) * scale)), last);
    }
    t.index[0][o] = i;
  }
  return t;
}

template <class T>
Taps linear_taps(std::size_t in, std::size_t out, double scale_factor, bool align_corners) {
  Taps t;
  t.index.assign(2, std::vector<std::int64_t>(out));
  t.weight.assign(2, std::vector<double>(out));
  const T scale = index_scale<T>(in, out, scale_factor, align_corners);
  const auto last = std::int64_t(in) - 1;
  for (std::size_t o = 0; o < out; ++o) {
    std::int64_t i0;
    T l1;
    if (out == in) {
      i0 = std::int64_t(o);
      l1 = T(0);
    } else {
      T src = align_corners ? scale * T(o) : scale * (T(o) + T(0.5)) - T(0.5);
      if (src < T(0)) src = T(0);
      i0 = std::min(std::int64_t(std::floor(src)), last);
      l1 = std::min(std::max(src - T(i0), T(0)), T(1));
    }
    t.index[0][o] = i0;
    t.index[1][o] = i0 + (i0 < last ? 1 : 0);
    t.weight[0][o] = double(T(1) - l1);
    t.weight[1][o] = double(l1);
  }
  return t;
}

// Keys' cubic convolution with A = -0.75, as PyTorch; taps i - 1 .. i + 2 clamped to the
// image.
template <class T>
Taps cubic_taps(std::size_t in, std::size_t out, double scale_factor, bool align_corners) {
  Taps t;
  t.index.assign(4, std::vector<std::int64_t>(out));
  t.weight.assign(4, std::vector<double>(out));
  const T scale = index_scale<T>(in, out, scale_factor, align_corners);
  const T a = T(-0.75);
  const auto near = [a](T x) { return ((a + T(2)) * x - (a + T(3))) * x * x + T(1); };
  const auto far = [a](T x) { return ((a * x - T(5) * a) * x + T(8) * a) * x - T(4) * a; };
  const auto last = std::int64_t(in) - 1;
  for (std::size_t o = 0; o < out; ++o) {
    const T src = align_corners ? scale * T(o) : scale * (T(o) + T(0.5)) - T(0.5);
    const std::int64_t i = std::min(std::int64_t(std::floor(src)), last);
    const T x = std::min(std::max(src - T(i), T(0)), T(1));
    const T c[4] = {far(x + T(1)), near(x), near(T(1) - x), far(T(2) - x)};
    for (int k = 0; k < 4; ++k) {
      t.index[k][o] = std::clamp<std::int64_t>(i - 1 + k, 0, last);
      t.weight[k][o] = double(c[k]);
    }
  }
  return t;
}

// x resampled along dim d by the taps.
DynTensor apply_taps(DynTensor x, std::size_t d, const Taps& taps) {
  const Device dev = x.device();
  const std::size_t out = taps.index[0].size();
  std::vector<std::size_t> wshape(x.rank(), 1);
  wshape[d] = out;
  std::optional<DynTensor> y;
  for (std::size_t k = 0; k < taps.index.size(); ++k) {
    auto idx = ops::from_data(TensorData::from<std::int64_t>(taps.index[k], Shape{out}), dev);
    DynTensor v = ops::select(x, std::int64_t(d), std::move(idx));
    if (!taps.weight.empty()) {
      auto w = ops::cast(
          ops::from_data(TensorData::from<double>(taps.weight[k], Shape(wshape)), dev), x.dtype());
      v = ops::binary(ir::BinaryFn::Mul, std::move(v), std::move(w));
    }
    y = y ? ops::binary(ir::BinaryFn::Add, std::move(*y), std::move(v)) : std::move(v);
  }
  return std::move(*y);
}

}  // namespace

InterpolateMode interpolate_mode(const std::string& name, std::size_t spatial_dims) {
  if (name == "nearest") return InterpolateMode::Nearest;
  if (name == "nearest-exact") return InterpolateMode::NearestExact;
  const char* linear[] = {"linear", "bilinear", "trilinear"};
  for (std::size_t i = 0; i < 3; ++i) {
    if (name != linear[i]) continue;
    EMBER_CHECK(spatial_dims == i + 1,
                "interpolate: mode \"" + name + "\" needs " + std::to_string(i + 1) +
                    " spatial dim(s), the input has " + std::to_string(spatial_dims));
    return InterpolateMode::Linear;
  }
  if (name == "bicubic") {
    EMBER_CHECK(spatial_dims == 2,
                "interpolate: mode \"bicubic\" needs 2 spatial dims, the input "
                "has " +
                    std::to_string(spatial_dims));
    return InterpolateMode::Bicubic;
  }
  fail("interpolate: unknown mode \"" + name +
       "\" (expected nearest, nearest-exact, linear, bilinear, trilinear or bicubic)");
}

DynTensor interpolate(DynTensor x, const InterpolateOptions& o) {
  const std::string op = describe("interpolate", {&x});
  EMBER_CHECK(x.rank() >= 3 && x.rank() <= 5,
              op + ": expected an image [N, C, *spatial] with 1 to 3 spatial dims");
  ops::detail::check_kind(x, {Kind::Float}, "interpolate");
  const std::size_t sp = x.rank() - 2;
  EMBER_CHECK(o.size.empty() != o.scale_factor.empty(),
              op + ": give exactly one of size and scale_factor");
  EMBER_CHECK(o.size.empty() || o.size.size() == sp || o.size.size() == 1,
              op + ": size needs 1 or " + std::to_string(sp) + " entries, got " +
                  std::to_string(o.size.size()));
  EMBER_CHECK(o.scale_factor.empty() || o.scale_factor.size() == sp || o.scale_factor.size() == 1,
              op + ": scale_factor needs 1 or " + std::to_string(sp) + " entries, got " +
                  std::to_string(o.scale_factor.size()));
  const bool nearest =
      o.mode == InterpolateMode::Nearest || o.mode == InterpolateMode::NearestExact;
  EMBER_CHECK(!(nearest && o.align_corners),
              op + ": align_corners applies only to the linear and bicubic modes");
  std::vector<std::size_t> out(sp);
  std::vector<double> factor(sp, 0.0);
  std::vector<std::size_t> dims(x.shape().begin(), x.shape().end());
  for (std::size_t i = 0; i < sp; ++i) {
    const std::size_t in = x.shape()[2 + i];
    EMBER_CHECK(in > 0, op + ": spatial dims must be non-empty");
    if (!o.size.empty()) {
      out[i] = o.size.size() == 1 ? o.size[0] : o.size[i];
    } else {
      const double f = o.scale_factor.size() == 1 ? o.scale_factor[0] : o.scale_factor[i];
      EMBER_CHECK(std::isfinite(f) && f > 0,
                  op + ": scale factors must be finite and positive, got " + std::to_string(f));
      const double e = std::floor(double(in) * f);
      EMBER_CHECK(e < double(std::size_t{1} << 62),
                  op + ": scale factor " + std::to_string(f) + " gives too large an output");
      out[i] = std::size_t(e);
      // PyTorch passes the factor on to the kernels unless align_corners recomputes it.
      factor[i] = f;
    }
    EMBER_CHECK(out[i] > 0, op + ": the output size must be positive along every spatial dim");
    dims[2 + i] = out[i];
  }
  ops::detail::check_size(Shape(dims), x.dtype(), op, x.device());
  const bool wide = x.dtype() == DType::F64;
  for (std::size_t j = sp; j-- > 0;) {
    const std::size_t in = x.shape()[2 + j], d = 2 + j;
    Taps taps;
    switch (o.mode) {
      case InterpolateMode::Nearest:
      case InterpolateMode::NearestExact:
        taps = nearest_taps(in, out[j], factor[j], o.mode == InterpolateMode::NearestExact);
        break;
      case InterpolateMode::Linear:
        taps = wide ? linear_taps<double>(in, out[j], factor[j], o.align_corners)
                    : linear_taps<float>(in, out[j], factor[j], o.align_corners);
        break;
      case InterpolateMode::Bicubic:
        taps = wide ? cubic_taps<double>(in, out[j], factor[j], o.align_corners)
                    : cubic_taps<float>(in, out[j], factor[j], o.align_corners);
        break;
    }
    x = apply_taps(std::move(x), d, taps);
  }
  return x;
}

}  // namespace ember::module_ops
