// Neural-network ONNX operators: MatMul, Gemm, Conv, ConvTranspose, pools, normalizations,
// the Softmax family, Resize/Upsample, quantization.
#include <algorithm>
#include <cmath>

#include "ember/tensor/module_ops.hpp"
#include "ops.hpp"

namespace ember::onnx {

namespace {

using ir::BinaryFn;
using ir::ReduceFn;
using ir::UnaryFn;
using V = std::vector<DynTensor>;
using I64s = std::vector<std::int64_t>;
using Sizes = std::vector<std::size_t>;

DynTensor mul_s(DynTensor x, double s) {
  return ops::binary_scalar(BinaryFn::Mul, std::move(x), s);
}
DynTensor add(DynTensor a, DynTensor b) {
  return ops::binary(BinaryFn::Add, std::move(a), std::move(b));
}
DynTensor sub(DynTensor a, DynTensor b) {
  return ops::binary(BinaryFn::Sub, std::move(a), std::move(b));
}
DynTensor mul(DynTensor a, DynTensor b) {
  return ops::binary(BinaryFn::Mul, std::move(a), std::move(b));
}
DynTensor div(DynTensor a, DynTensor b) {
  return ops::binary(BinaryFn::Div, std::move(a), std::move(b));
}

// A per-channel vector [C] shaped to broadcast over [N, C, *spatial].
DynTensor channel(DynTensor v, std::size_t rank) {
  Sizes dims(rank, 1);
  if (rank >= 2) dims[1] = v.num_elements();
  return ops::reshape(std::move(v), Shape(dims));
}

DynTensor matmul_any(DynTensor a, DynTensor b) {
  const bool a1 = a.rank() == 1, b1 = b.rank() == 1;
  if (a1) a = ops::unsqueeze(std::move(a), 0);
  if (b1) b = ops::unsqueeze(std::move(b), 1);
  const DType dt = a.dtype();
  DynTensor y = is_float(dt) ? ops::matmul(std::move(a), std::move(b))
                             : ops::cast(ops::matmul(ops::cast(std::move(a), DType::F64),
                                                     ops::cast(std::move(b), DType::F64)),
                                         dt);
  if (a1) y = ops::squeeze(std::move(y), -2);
  if (b1) y = ops::squeeze(std::move(y), -1);
  return y;
}

V matmul(OpCall& c) { return {matmul_any(c.at(0), c.at(1))}; }

V matmul_integer(OpCall& c) {
  DynTensor a = ops::cast(c.at(0), DType::I32), b = ops::cast(c.at(1), DType::I32);
  if (c.has(2)) a = sub(std::move(a), ops::cast(c.at(2), DType::I32));
  if (c.has(3)) {
    DynTensor zb = ops::cast(c.at(3), DType::I32);
    if (zb.rank() == 1 && b.rank() >= 2) zb = ops::unsqueeze(std::move(zb), 0);
    b = sub(std::move(b), std::move(zb));
  }
  return {matmul_any(std::move(a), std::move(b))};
}

V gemm(OpCall& c) {
  DynTensor a = c.at(0), b = c.at(1);
  if (c.node.i("transA", 0)) a = ops::transpose(std::move(a));
  if (c.node.i("transB", 0)) b = ops::transpose(std::move(b));
  const double alpha = c.node.f("alpha", 1.0), beta = c.node.f("beta", 1.0);
  DynTensor y = matmul_any(std::move(a), std::move(b));
  if (alpha != 1.0) y = mul_s(std::move(y), alpha);
  if (c.has(2)) {
    DynTensor cc = c.at(2);
    if (beta != 1.0) cc = mul_s(std::move(cc), beta);
    y = add(std::move(y), std::move(cc));
  }
  return {y};
}

// The window geometry of a Conv/pool node: per spatial dim, begin and end padding.
struct Geometry {
  Sizes kernel, stride, dilation, pad_begin, pad_end;
  bool symmetric() const { return pad_begin == pad_end; }
};

Geometry geometry(const OpCall& c, const Shape& x, const Sizes& kernel, bool ceil_mode = false) {
  const std::size_t n = x.rank() - 2;
  Geometry g;
  g.kernel = kernel;
  c.check(kernel.size() == n,
          "kernel_shape has " + std::to_string(kernel.size()) + " dims for input " + x.to_string());
  const auto vec = [&](const char* a, std::int64_t dflt) {
    I64s v = c.node.ints(a);
    if (v.empty()) v.assign(n, dflt);
    Sizes out;
    for (auto e : v) {
      c.check(e >= 0, std::string(a) + " has a negative entry");
      out.push_back(static_cast<std::size_t>(e));
    }
    return out;
  };
  g.stride = vec("strides", 1);
  g.dilation = vec("dilations", 1);
  c.check(g.stride.size() == n && g.dilation.size() == n,
          "strides/dilations must have one entry per spatial dim");
  const std::string auto_pad = c.node.s("auto_pad", "NOTSET");
  g.pad_begin.assign(n, 0);
  g.pad_end.assign(n, 0);
  if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t in = x[i + 2], s = g.stride[i];
      const std::size_t out = (in + s - 1) / s;
      const std::size_t eff = g.dilation[i] * (kernel[i] - 1) + 1;
      const std::size_t need = (out - 1) * s + eff;
      const std::size_t total = need > in ? need - in : 0;
      const std::size_t small = total / 2, big = total - small;
      g.pad_begin[i] = auto_pad == "SAME_UPPER" ? small : big;
      g.pad_end[i] = auto_pad == "SAME_UPPER" ? big : small;
    }
  } else if (auto_pad == "NOTSET") {
    I64s p = c.node.ints("pads");
    if (!p.empty()) {
      c.check(p.size() == 2 * n, "pads has " + std::to_string(p.size()) + " entries; expected " +
                                     std::to_string(2 * n));
      for (std::size_t i = 0; i < n; ++i) {
        c.check(p[i] >= 0 && p[i + n] >= 0, "negative pads are not supported");
        g.pad_begin[i] = static_cast<std::size_t>(p[i]);
        g.pad_end[i] = static_cast<std::size_t>(p[i + n]);
      }
    }
  } else {
    c.check(auto_pad == "VALID",
            "auto_pad '" + auto_pad + "' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID");
  }
  if (ceil_mode) {  // extend the end so that floor division gives the ceil count
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t eff = g.dilation[i] * (kernel[i] - 1) + 1;
      const std::size_t span = x[i + 2] + g.pad_begin[i] + g.pad_end[i];
      if (span < eff) continue;
      std::size_t out = (span - eff + g.stride[i] - 1) / g.stride[i] + 1;
      // The last window must start inside the input or the begin padding.
      if ((out - 1) * g.stride[i] >= x[i + 2] + g.pad_begin[i]) --out;
      const std::size_t need = (out - 1) * g.stride[i] + eff;
      if (need > span) g.pad_end[i] += need - span;
    }
  }
  return g;
}

// x padded by the geometry's begin/end padding with value.
DynTensor pad_spatial(DynTensor x, const Geometry& g, double value) {
  std::vector<std::pair<std::size_t, std::size_t>> p;
  bool any = false;
  for (std::size_t i = 0; i < g.kernel.size(); ++i) {
    p.emplace_back(g.pad_begin[i], g.pad_end[i]);
    any = any || g.pad_begin[i] || g.pad_end[i];
  }
  if (!any) return x;
  return ops::pad(std::move(x), p, ops::PadMode::Constant, value);
}

Sizes kernel_of(const OpCall& c, const DynTensor& w) {
  I64s k = c.node.ints("kernel_shape");
  Sizes out;
  if (k.empty())
    for (std::size_t i = 2; i < w.rank(); ++i) out.push_back(w.shape()[i]);
  else
    for (auto e : k) out.push_back(static_cast<std::size_t>(e));
  return out;
}

V conv(OpCall& c) {
  DynTensor x = c.at(0), w = c.at(1);
  c.check(x.rank() >= 3 && x.rank() <= 5 && w.rank() == x.rank(),
          "input " + x.shape().to_string() + " and weight " + w.shape().to_string() +
              " must be [N, C, *spatial] with 1 to 3 spatial dims");
  Geometry g = geometry(c, x.shape(), kernel_of(c, w));
  std::optional<DynTensor> b;
  if (c.has(2)) b = c.at(2);
  module_ops::WindowOptions o{g.stride, {}, g.dilation};
  if (g.symmetric()) {
    o.padding = g.pad_begin;
  } else {
    x = pad_spatial(std::move(x), g, 0.0);
  }
  return {module_ops::conv(std::move(x), std::move(w), std::move(b), o,
                           static_cast<std::size_t>(c.node.i("group", 1)))};
}

V conv_transpose(OpCall& c) {
  DynTensor x = c.at(0), w = c.at(1);
  c.check(x.rank() >= 3 && x.rank() <= 5 && w.rank() == x.rank(),
          "input " + x.shape().to_string() + " and weight " + w.shape().to_string() +
              " must be [N, C, *spatial] with 1 to 3 spatial dims");
  const std::size_t n = x.rank() - 2;
  const Sizes kernel = kernel_of(c, w);
  const auto vec = [&](const char* a, std::int64_t dflt) {
    I64s v = c.node.ints(a);
    if (v.empty()) v.assign(n, dflt);
    c.check(v.size() == n, std::string(a) + " must have one entry per spatial dim");
    Sizes out;
    for (auto e : v) out.push_back(static_cast<std::size_t>(std::max<std::int64_t>(e, 0)));
    return out;
  };
  const Sizes stride = vec("strides", 1), dil = vec("dilations", 1),
              out_pad = vec("output_padding", 0);
  const std::size_t groups = static_cast<std::size_t>(c.node.i("group", 1));
  // The full output (no padding), then cropped / extended to the requested extents.
  DynTensor y = module_ops::conv_transpose(std::move(x), std::move(w), std::nullopt,
                                           {stride, {}, dil}, {}, groups);
  const std::string auto_pad = c.node.s("auto_pad", "NOTSET");
  I64s pads = c.node.ints("pads");
  const I64s out_shape = c.node.ints("output_shape");
  c.check(out_shape.empty() || out_shape.size() == n || out_shape.size() == n + 2,
          "output_shape must have one entry per spatial dim (or the whole output's shape)");
  std::vector<std::int64_t> begin(n, 0), total(n, 0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto full = static_cast<std::int64_t>(y.shape()[i + 2]);
    const auto in = static_cast<std::int64_t>(c.at(0).shape()[i + 2]);
    std::int64_t target = 0;
    if (!out_shape.empty()) {
      target = out_shape[out_shape.size() - n + i];
      c.check(target >= 0, "output_shape must not be negative");
    } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      target = in * static_cast<std::int64_t>(stride[i]);
    }
    if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      const std::int64_t tp = full + static_cast<std::int64_t>(out_pad[i]) - target;
      begin[i] = tp < 0 ? 0 : auto_pad == "SAME_UPPER" ? tp / 2 : tp - tp / 2;
      total[i] = target;
    } else {
      std::int64_t pb = 0, pe = 0;
      if (!pads.empty()) {
        c.check(pads.size() == 2 * n, "pads must have 2 entries per spatial dim");
        pb = pads[i];
        pe = pads[i + n];
      }
      begin[i] = pb;
      total[i] = full + static_cast<std::int64_t>(out_pad[i]) - pb - pe;
    }
    c.check(total[i] >= 0,
            "the output extent of spatial dim " + std::to_string(i) + " is negative");
  }
  // Extend at the end with zeros where the crop reaches past the full output.
  std::vector<std::pair<std::size_t, std::size_t>> ext;
  bool extend = false;
  for (std::size_t i = 0; i < n; ++i) {
    const auto full = static_cast<std::int64_t>(y.shape()[i + 2]);
    const std::int64_t lo = std::min<std::int64_t>(begin[i], 0);
    const std::int64_t hi = std::max<std::int64_t>(begin[i] + total[i] - full, 0);
    ext.emplace_back(static_cast<std::size_t>(-lo), static_cast<std::size_t>(hi));
    if (lo || hi) extend = true;
  }
  if (extend) {
    y = ops::pad(std::move(y), ext);
    for (std::size_t i = 0; i < n; ++i) begin[i] += static_cast<std::int64_t>(ext[i].first);
  }
  std::vector<ops::Range> r(2, ops::Range(0, std::nullopt));
  for (std::size_t i = 0; i < n; ++i) r.emplace_back(begin[i], begin[i] + total[i]);
  y = ops::slice(std::move(y), r);
  if (c.has(2)) {
    const std::size_t yr = y.rank();
    y = add(std::move(y), channel(c.at(2), yr));
  }
  return {y};
}

V max_pool(OpCall& c) {
  DynTensor x = c.at(0);
  c.check(x.rank() >= 3 && x.rank() <= 5,
          "input must be [N, C, *spatial] with 1 to 3 spatial dims, got " + x.shape().to_string());
  I64s k = c.node.ints("kernel_shape");
  Sizes kernel(k.begin(), k.end());
  Geometry g = geometry(c, x.shape(), kernel, c.node.i("ceil_mode", 0) != 0);
  const double low = is_float(x.dtype()) ? -INFINITY : (x.dtype() == DType::U8 ? 0.0 : -128.0);
  const Shape in_shape = x.shape();
  const bool want_indices = c.num_outputs >= 2 && !c.node.outputs[1].empty();
  // Without indices, padding of at most half the window on both sides is the pool's own
  // (windows never count it), so the input is not copied; other padding is made of `low`
  // entries (the indices below unfold the padded input).
  bool own_padding = g.symmetric() && !want_indices;
  for (std::size_t i = 0; i < g.kernel.size(); ++i)
    own_padding = own_padding && 2 * g.pad_begin[i] <= g.kernel[i];
  module_ops::WindowOptions po{g.stride, {}, g.dilation};
  if (own_padding)
    po.padding = g.pad_begin;
  else
    x = pad_spatial(std::move(x), g, low);
  DynTensor y = module_ops::max_pool(x, g.kernel, po);
  if (!want_indices) return {y};
  // Indices: the flat index (over the whole input, row-major or, with storage_order 1,
  // column-major spatial dims) of each window's first maximum, found by unfolding the
  // input and an index map the same way.
  const std::size_t n = in_shape[0], ch = in_shape[1], rank = in_shape.rank();
  const bool col = c.node.i("storage_order", 0) != 0;
  std::vector<double> idx(in_shape.num_elements());
  const std::size_t plane = in_shape.num_elements() / std::max<std::size_t>(n * ch, 1);
  Sizes sp(in_shape.dims().begin() + 2, in_shape.dims().end());
  for (std::size_t i = 0; i < idx.size(); ++i) {
    std::size_t rest = i % plane, flat = 0, stride = 1;
    Sizes coord(sp.size());
    for (std::size_t d = sp.size(); d-- > 0;) {
      coord[d] = rest % sp[d];
      rest /= sp[d];
    }
    if (col) {
      for (std::size_t d = 0; d < sp.size(); ++d) {
        flat += coord[d] * stride;
        stride *= sp[d];
      }
    } else {
      for (std::size_t d = sp.size(); d-- > 0;) {
        flat += coord[d] * stride;
        stride *= sp[d];
      }
    }
    idx[i] = static_cast<double>((i / plane) * plane + flat);
  }
  DynTensor imap =
      pad_spatial(ops::from_data(TensorData::from<double>(idx, in_shape), c.device), g, -1.0);
  std::size_t kn = 1;
  for (auto e : g.kernel) kn *= e;
  const module_ops::WindowOptions o{g.stride, {}, g.dilation};
  DynTensor ux = module_ops::unfold(x, g.kernel, o, low);
  const std::size_t l = ux.shape()[2];
  ux = ops::reshape(std::move(ux), Shape{n, ch, kn, l});
  DynTensor ui =
      ops::reshape(module_ops::unfold(std::move(imap), g.kernel, o, -1.0), Shape{n, ch, kn, l});
  DynTensor arg = ops::cast(ops::reduce(ReduceFn::ArgMax, std::move(ux), 2), DType::I64);
  DynTensor picked = ops::cast(ops::gather(std::move(ui), 2, std::move(arg)), DType::I64);
  (void)rank;
  return {y, ops::reshape(std::move(picked), y.shape())};
}

// Sum over windows divided by the count of positions that count: the padding when
// count_include_pad, never the ceil-mode extension.
V average_pool(OpCall& c) {
  DynTensor x = c.at(0);
  c.check(x.rank() >= 3 && x.rank() <= 5,
          "input must be [N, C, *spatial] with 1 to 3 spatial dims, got " + x.shape().to_string());
  I64s k = c.node.ints("kernel_shape");
  Sizes kernel(k.begin(), k.end());
  Geometry plain = geometry(c, x.shape(), kernel, false);
  Geometry g = geometry(c, x.shape(), kernel, c.node.i("ceil_mode", 0) != 0);
  for (auto d : g.dilation) c.check(d == 1, "dilations are not supported for AveragePool");
  const bool include_pad = c.node.i("count_include_pad", 0) != 0;
  Sizes sp(x.shape().dims().begin() + 2, x.shape().dims().end());
  DynTensor xp = pad_spatial(std::move(x), g, 0.0);
  DynTensor s = module_ops::avg_pool(std::move(xp), g.kernel, {g.stride, {}, {}}, true);
  bool padded = false;
  for (std::size_t i = 0; i < g.kernel.size(); ++i)
    padded = padded || g.pad_begin[i] || g.pad_end[i];
  if (!padded) return {s};
  // The count map: ones over the input (and over the plain padding when it counts).
  Sizes ones_shape{1, 1};
  ones_shape.insert(ones_shape.end(), sp.begin(), sp.end());
  DynTensor ones = ops::ones(Shape(ones_shape), s.dtype(), c.device);
  if (include_pad) ones = pad_spatial(std::move(ones), plain, 1.0);
  Geometry rest = g;
  for (std::size_t i = 0; i < g.kernel.size(); ++i) {
    if (include_pad) {
      rest.pad_begin[i] = 0;
      rest.pad_end[i] = g.pad_end[i] - plain.pad_end[i];
    }
  }
  ones = pad_spatial(std::move(ones), rest, 0.0);
  DynTensor cnt = module_ops::avg_pool(std::move(ones), g.kernel, {g.stride, {}, {}}, true);
  return {div(std::move(s), std::move(cnt))};
}

V lp_pool(OpCall& c) {
  DynTensor x = c.at(0);
  const double p = static_cast<double>(c.node.i("p", 2));
  I64s k = c.node.ints("kernel_shape");
  Sizes kernel(k.begin(), k.end());
  Geometry g = geometry(c, x.shape(), kernel);
  std::size_t kn = 1;
  for (auto e : kernel) kn *= e;
  DynTensor a = ops::unary(UnaryFn::PowScalar, ops::unary(UnaryFn::Abs, std::move(x)), p);
  a = pad_spatial(std::move(a), g, 0.0);
  DynTensor s = mul_s(
      module_ops::avg_pool(std::move(a), g.kernel, {g.stride, {}, g.dilation}, true), double(kn));
  return {ops::unary(UnaryFn::PowScalar, std::move(s), 1.0 / p)};
}

template <ReduceFn F>
V global_pool(OpCall& c) {
  DynTensor x = c.at(0);
  c.check(x.rank() >= 3, "input must be [N, C, *spatial], got " + x.shape().to_string());
  for (std::size_t d = 2; d < x.rank(); ++d)
    x = ops::reduce(F, std::move(x), static_cast<std::int64_t>(d));
  return {x};
}

V global_lp_pool(OpCall& c) {
  DynTensor x = c.at(0);
  const double p = static_cast<double>(c.node.i("p", 2));
  x = ops::unary(UnaryFn::PowScalar, ops::unary(UnaryFn::Abs, std::move(x)), p);
  for (std::size_t d = 2; d < x.rank(); ++d)
    x = ops::reduce(ReduceFn::Sum, std::move(x), static_cast<std::int64_t>(d));
  return {ops::unary(UnaryFn::PowScalar, std::move(x), 1.0 / p)};
}

V batch_norm(OpCall& c) {
  DynTensor x = c.at(0);
  const double eps = c.node.f("epsilon", 1e-5);
  const std::size_t r = x.rank();
  c.check(r >= 2, "input must be [N, C, ...], got " + x.shape().to_string());
  const bool training = c.node.i("training_mode", 0) != 0;
  DynTensor mean = c.at(3), var = c.at(4);
  V extra;
  if (training) {
    const double momentum = c.node.f("momentum", 0.9);
    DynTensor m = x;
    for (std::size_t d = 0; d < r; ++d)
      if (d != 1) m = ops::reduce(ReduceFn::Mean, std::move(m), static_cast<std::int64_t>(d));
    DynTensor centered = sub(x, m);
    DynTensor v = mul(centered, centered);
    for (std::size_t d = 0; d < r; ++d)
      if (d != 1) v = ops::reduce(ReduceFn::Mean, std::move(v), static_cast<std::int64_t>(d));
    DynTensor bm = ops::reshape(m, Shape{x.shape()[1]}), bv = ops::reshape(v, Shape{x.shape()[1]});
    extra.push_back(add(mul_s(mean, momentum), mul_s(bm, 1 - momentum)));
    extra.push_back(add(mul_s(var, momentum), mul_s(bv, 1 - momentum)));
    mean = bm;
    var = bv;
  }
  DynTensor inv =
      ops::unary(UnaryFn::Rsqrt, ops::binary_scalar(BinaryFn::Add, std::move(var), eps));
  DynTensor scale = mul(c.at(1), std::move(inv));
  DynTensor shift = sub(c.at(2), mul(mean, scale));
  V out{add(mul(std::move(x), channel(std::move(scale), r)), channel(std::move(shift), r))};
  for (auto& e : extra) out.push_back(std::move(e));
  return out;
}

V instance_norm(OpCall& c) {
  DynTensor x = c.at(0);
  const double eps = c.node.f("epsilon", 1e-5);
  const std::size_t r = x.rank();
  c.check(r >= 3, "input must be [N, C, *spatial], got " + x.shape().to_string());
  DynTensor m = x;
  for (std::size_t d = 2; d < r; ++d)
    m = ops::reduce(ReduceFn::Mean, std::move(m), static_cast<std::int64_t>(d));
  DynTensor centered = sub(std::move(x), m);
  DynTensor v = mul(centered, centered);
  for (std::size_t d = 2; d < r; ++d)
    v = ops::reduce(ReduceFn::Mean, std::move(v), static_cast<std::int64_t>(d));
  DynTensor y =
      mul(std::move(centered),
          ops::unary(UnaryFn::Rsqrt, ops::binary_scalar(BinaryFn::Add, std::move(v), eps)));
  return {add(mul(std::move(y), channel(c.at(1), r)), channel(c.at(2), r))};
}

V layer_norm(OpCall& c) {
  DynTensor x = c.at(0);
  const std::size_t r = x.rank();
  const auto ri = static_cast<std::int64_t>(r);
  std::int64_t axis = c.node.i("axis", -1);
  c.check(axis >= -ri && axis < ri,
          "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += ri;
  const double eps = c.node.f("epsilon", 1e-5);
  Shape norm(x.shape().dims().begin() + axis, x.shape().dims().end());
  const bool simple = c.num_outputs == 1 && c.at(1).shape() == norm &&
                      (!c.has(2) || c.at(2).shape() == norm) && c.at(1).dtype() == x.dtype();
  if (simple) {
    std::optional<DynTensor> b;
    if (c.has(2)) b = c.at(2);
    return {ops::layer_norm(std::move(x), norm, c.at(1), std::move(b), eps)};
  }
  const DType dt = x.dtype();
  DynTensor xf =
      ops::cast(std::move(x), DType::F32 == dt ? dt : (dt == DType::F64 ? dt : DType::F32));
  DynTensor m = xf;
  for (std::size_t d = static_cast<std::size_t>(axis); d < r; ++d)
    m = ops::reduce(ReduceFn::Mean, std::move(m), static_cast<std::int64_t>(d));
  DynTensor centered = sub(std::move(xf), m);
  DynTensor v = mul(centered, centered);
  for (std::size_t d = static_cast<std::size_t>(axis); d < r; ++d)
    v = ops::reduce(ReduceFn::Mean, std::move(v), static_cast<std::int64_t>(d));
  DynTensor inv = ops::unary(UnaryFn::Rsqrt, ops::binary_scalar(BinaryFn::Add, std::move(v), eps));
  DynTensor y = ops::cast(mul(std::move(centered), inv), dt);
  y = mul(std::move(y), c.at(1));
  if (c.has(2)) y = add(std::move(y), c.at(2));
  return {y, m, inv};
}

V lp_norm(OpCall& c) {
  DynTensor x = c.at(0);
  const std::int64_t p = c.node.i("p", 2);
  const std::int64_t axis = c.node.i("axis", -1);
  c.check(p == 1 || p == 2, "p must be 1 or 2, got " + std::to_string(p));
  DynTensor n = p == 1 ? ops::unary(UnaryFn::Abs, x) : mul(x, x);
  n = ops::reduce(ReduceFn::Sum, std::move(n), axis);
  if (p == 2) n = ops::unary(UnaryFn::Sqrt, std::move(n));
  return {div(std::move(x), std::move(n))};
}

V mvn(OpCall& c) {
  DynTensor x = c.at(0);
  I64s axes = c.node.ints("axes", {0, 2, 3});
  DynTensor m = x;
  for (auto a : axes) m = ops::reduce(ReduceFn::Mean, std::move(m), a);
  DynTensor centered = sub(std::move(x), m);
  DynTensor v = mul(centered, centered);
  for (auto a : axes) v = ops::reduce(ReduceFn::Mean, std::move(v), a);
  DynTensor sd = ops::binary_scalar(BinaryFn::Add, ops::unary(UnaryFn::Sqrt, std::move(v)), 1e-9);
  return {div(std::move(centered), std::move(sd))};
}

// Softmax-like ops: before opset 13 over the input coerced to 2-D at axis (default 1);
// from 13 along axis (default -1).
template <int Kind>  // 0 softmax, 1 log_softmax, 2 hardmax
V softmax_family(OpCall& c) {
  DynTensor x = c.at(0);
  const auto r = static_cast<std::int64_t>(x.rank());
  std::int64_t axis = c.node.i("axis", c.opset >= 13 ? -1 : 1);
  c.check(axis >= -r && axis < std::max<std::int64_t>(r, 1),
          "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  const Shape orig = x.shape();
  std::int64_t dim = axis;
  if (c.opset < 13) {
    std::size_t outer = 1, inner = 1;
    for (std::int64_t i = 0; i < r; ++i)
      (i < axis ? outer : inner) *= orig[static_cast<std::size_t>(i)];
    x = ops::reshape(std::move(x), Shape{outer, inner});
    dim = 1;
  }
  std::optional<DynTensor> y;
  if (Kind == 0) y = ops::softmax(std::move(x), dim);
  if (Kind == 1) y = ops::log_softmax(std::move(x), dim);
  if (Kind == 2) {
    const std::size_t n = x.shape()[static_cast<std::size_t>(dim)];
    DynTensor i = ops::reduce(ReduceFn::ArgMax, x, dim);
    DynTensor classes = ops::arange(0, double(n), 1, DType::I64, c.device);
    Sizes cs(x.rank(), 1);
    cs[static_cast<std::size_t>(dim)] = n;
    classes = ops::reshape(std::move(classes), Shape(cs));
    y = ops::cast(
        ops::binary(BinaryFn::Eq, ops::cast(std::move(i), DType::I64), std::move(classes)),
        x.dtype());
  }
  if (c.opset < 13) y = ops::reshape(std::move(*y), orig);
  return {*y};
}

// ---- Resize / Upsample: separable 1-D interpolation, one spatial axis at a time ----
struct ResizeSpec {
  std::string mode = "nearest", coord = "half_pixel", nearest = "round_prefer_floor";
  double cubic_a = -0.75, extrapolation = 0.0;
  bool exclude_outside = false;
};

double source_coord(const ResizeSpec& s, double x, double scale, std::size_t in, std::size_t out,
                    double roi_lo, double roi_hi) {
  // The resized length is scale * in, unrounded (the ONNX reference's rule).
  (void)out;
  const auto fin = static_cast<double>(in), fout = scale * fin;
  if (s.coord == "half_pixel") return (x + 0.5) / scale - 0.5;
  if (s.coord == "pytorch_half_pixel") return fout > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
  if (s.coord == "align_corners") return fout > 1 ? x * (fin - 1) / (fout - 1) : 0.0;
  if (s.coord == "asymmetric") return x / scale;
  if (s.coord == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
  // tf_crop_and_resize
  return fout > 1 ? roi_lo * (fin - 1) + x * (roi_hi - roi_lo) * (fin - 1) / (fout - 1)
                  : 0.5 * (roi_lo + roi_hi) * (fin - 1);
}

DynTensor resize_axis(const OpCall& c, DynTensor x, std::size_t d, std::size_t out, double scale,
                      const ResizeSpec& s, double roi_lo, double roi_hi) {
  const std::size_t in = x.shape()[d];
  if (out == in && scale == 1.0 && s.coord != "tf_crop_and_resize") return x;
  c.check(in > 0, "cannot resize an empty dim");
  const auto di = static_cast<std::int64_t>(d);
  if (out == 0) return ops::narrow(std::move(x), di, 0, 0);
  const auto clampi = [&](std::int64_t i) {
    return std::clamp<std::int64_t>(i, 0, static_cast<std::int64_t>(in) - 1);
  };
  std::vector<std::vector<std::int64_t>> taps;
  std::vector<std::vector<double>> weights;
  std::vector<bool> outside(out, false);
  for (std::size_t o = 0; o < out; ++o) {
    const double xs = source_coord(s, static_cast<double>(o), scale, in, out, roi_lo, roi_hi);
    if (s.coord == "tf_crop_and_resize" && (xs < 0 || xs > static_cast<double>(in) - 1))
      outside[o] = true;
    std::vector<std::int64_t> t;
    std::vector<double> w;
    if (s.mode == "nearest") {
      double r = 0;
      if (s.nearest == "round_prefer_ceil")
        r = std::floor(xs + 0.5);
      else if (s.nearest == "floor")
        r = std::floor(xs);
      else if (s.nearest == "ceil")
        r = std::ceil(xs);
      else
        r = (xs - std::floor(xs) == 0.5) ? std::floor(xs) : std::round(xs);
      t.push_back(clampi(static_cast<std::int64_t>(r)));
      w.push_back(1.0);
    } else if (s.mode == "linear") {
      const double f = std::floor(xs);
      const double frac = xs - f;
      const auto i0 = static_cast<std::int64_t>(f);
      t = {clampi(i0), clampi(i0 + 1)};
      w = {1 - frac, frac};
    } else {  // cubic
      const double f = std::floor(xs), ratio = xs - f, a = s.cubic_a;
      const auto i0 = static_cast<std::int64_t>(f);
      const auto k = [&](double z) {
        z = std::abs(z);
        if (z <= 1) return ((a + 2) * z - (a + 3)) * z * z + 1;
        if (z < 2) return ((a * z - 5 * a) * z + 8 * a) * z - 4 * a;
        return 0.0;
      };
      double sum = 0;
      for (int j = -1; j <= 2; ++j) {
        const std::int64_t idx = i0 + j;
        double wj = k(ratio - j);
        if (s.exclude_outside && (idx < 0 || idx >= static_cast<std::int64_t>(in))) wj = 0;
        t.push_back(clampi(idx));
        w.push_back(wj);
        sum += wj;
      }
      if (s.exclude_outside && sum != 0)
        for (auto& e : w) e /= sum;
    }
    taps.push_back(t);
    weights.push_back(w);
  }
  const std::size_t nt = taps[0].size();
  Sizes wshape(x.rank(), 1);
  wshape[d] = out;
  std::optional<DynTensor> acc;
  for (std::size_t j = 0; j < nt; ++j) {
    std::vector<std::int64_t> idx(out);
    std::vector<double> wv(out);
    for (std::size_t o = 0; o < out; ++o) {
      idx[o] = taps[o][j];
      wv[o] = weights[o][j];
    }
    DynTensor g = ops::select(x, di, ops::from_data(TensorData::from<std::int64_t>(idx), c.device));
    if (nt > 1) {
      DynTensor wt = ops::cast(
          ops::from_data(TensorData::from<double>(wv, Shape(wshape)), c.device), x.dtype());
      g = mul(std::move(g), std::move(wt));
      acc = j == 0 ? g : add(std::move(*acc), std::move(g));
    } else {
      acc = g;
    }
  }
  DynTensor y = std::move(*acc);
  if (s.coord == "tf_crop_and_resize") {
    std::vector<std::int64_t> mi(outside.begin(), outside.end());
    DynTensor mask = ops::cast(
        ops::from_data(TensorData::from<std::int64_t>(mi, Shape(wshape)), c.device), DType::Bool);
    DynTensor fillv = ops::full(Shape{}, s.extrapolation, y.dtype(), c.device);
    y = ops::mask_where(std::move(mask), std::move(fillv), std::move(y));
  }
  return y;
}

V resize_impl(OpCall& c, DynTensor x, std::vector<double> scales, Sizes sizes,
              std::vector<double> roi, const ResizeSpec& s) {
  const std::size_t r = x.rank();
  c.check(s.mode == "nearest" || s.mode == "linear" || s.mode == "cubic",
          "mode '" + s.mode + "' is not one of nearest, linear, cubic");
  if (!sizes.empty()) {
    c.check(sizes.size() == r,
            "sizes has " + std::to_string(sizes.size()) + " entries for rank " + std::to_string(r));
    scales.clear();
    for (std::size_t d = 0; d < r; ++d)
      scales.push_back(static_cast<double>(sizes[d]) / static_cast<double>(x.shape()[d]));
  } else {
    c.check(scales.size() == r, "scales has " + std::to_string(scales.size()) +
                                    " entries for rank " + std::to_string(r));
    for (std::size_t d = 0; d < r; ++d) {
      c.check(scales[d] > 0, "scales must be positive");
      sizes.push_back(
          static_cast<std::size_t>(std::floor(static_cast<double>(x.shape()[d]) * scales[d])));
    }
  }
  for (std::size_t d = 0; d < r; ++d) {
    const double lo = roi.size() == 2 * r ? roi[d] : 0.0,
                 hi = roi.size() == 2 * r ? roi[d + r] : 1.0;
    x = resize_axis(c, std::move(x), d, sizes[d], scales[d], s, lo, hi);
  }
  return {x};
}

V resize(OpCall& c) {
  ResizeSpec s;
  s.mode = c.node.s("mode", "nearest");
  s.coord = c.node.s("coordinate_transformation_mode", "half_pixel");
  s.nearest = c.node.s("nearest_mode", "round_prefer_floor");
  s.cubic_a = c.node.f("cubic_coeff_a", -0.75);
  s.exclude_outside = c.node.i("exclude_outside", 0) != 0;
  s.extrapolation = c.node.f("extrapolation_value", 0.0);
  std::vector<double> scales, roi;
  Sizes sizes;
  if (c.opset < 11) {
    s.coord = "asymmetric";
    s.nearest = "floor";  // opset 10: nearest takes the floor of x / scale
    scales = host_f64(c.at(1));
  } else {
    if (c.has(1)) roi = host_f64(c.at(1));
    if (c.has(2) && c.at(2).num_elements() > 0) scales = host_f64(c.at(2));
    if (c.has(3) && c.at(3).num_elements() > 0)
      for (auto v : host_ints(c.at(3)))
        sizes.push_back(static_cast<std::size_t>(std::max<std::int64_t>(v, 0)));
  }
  return resize_impl(c, c.at(0), scales, sizes, roi, s);
}

V upsample(OpCall& c) {
  ResizeSpec s;
  s.mode = c.node.s("mode", "nearest");
  s.coord = "asymmetric";
  s.nearest = "floor";
  std::vector<double> scales = c.opset < 9 ? c.node.floats("scales") : host_f64(c.at(1));
  return resize_impl(c, c.at(0), scales, {}, {}, s);
}

// ---- quantization ----
DynTensor per_axis(const OpCall& c, DynTensor v, std::size_t rank) {
  if (v.rank() == 0 || v.num_elements() == 1)
    return v.rank() == 0 ? v : ops::reshape(std::move(v), Shape{});
  const auto r = static_cast<std::int64_t>(rank);
  std::int64_t a = c.node.i("axis", 1);
  if (a < 0) a += r;
  c.check(a >= 0 && a < r, "axis out of range");
  Sizes dims(rank, 1);
  dims[static_cast<std::size_t>(a)] = v.num_elements();
  return ops::reshape(std::move(v), Shape(dims));
}

V quantize_linear(OpCall& c) {
  DynTensor x = c.at(0);
  const std::size_t r = x.rank();
  DynTensor scale = per_axis(c, c.at(1), r);
  const DType to = c.has(2) ? c.at(2).dtype() : DType::U8;
  c.check(to == DType::U8 || to == DType::I8,
          std::string("zero point dtype ") + name(to) + " is not uint8 or int8");
  DynTensor q = ops::unary(UnaryFn::Round, div(ops::cast(std::move(x), DType::F32),
                                               ops::cast(std::move(scale), DType::F32)));
  if (c.has(2)) q = add(std::move(q), ops::cast(per_axis(c, c.at(2), r), DType::F32));
  q = ops::clamp(std::move(q), to == DType::U8 ? 0.0 : -128.0, to == DType::U8 ? 255.0 : 127.0);
  return {ops::cast(std::move(q), to)};
}

V dequantize_linear(OpCall& c) {
  DynTensor x = c.at(0);
  const std::size_t r = x.rank();
  DynTensor scale = per_axis(c, c.at(1), r);
  DynTensor xf = ops::cast(std::move(x), DType::F32);
  if (c.has(2)) xf = sub(std::move(xf), ops::cast(per_axis(c, c.at(2), r), DType::F32));
  return {mul(std::move(xf), ops::cast(std::move(scale), DType::F32))};
}

V lrn(OpCall& c) {
  DynTensor x = c.at(0);
  const double alpha = c.node.f("alpha", 1e-4), beta = c.node.f("beta", 0.75),
               bias = c.node.f("bias", 1.0);
  const auto size = static_cast<std::size_t>(c.node.i("size", 1));
  c.check(x.rank() >= 3, "input must be [N, C, ...]");
  const Shape s = x.shape();
  // Sum of squares over a window of channels: pad C and pool over [C] as a 1-D window.
  const std::size_t n = s[0], ch = s[1], rest = x.num_elements() / std::max<std::size_t>(n * ch, 1);
  DynTensor sq = mul(x, x);
  sq = ops::permute(ops::reshape(std::move(sq), Shape{n, ch, rest}), {0, 2, 1});  // [n, rest, ch]
  sq = ops::reshape(std::move(sq), Shape{n * rest, 1, ch});
  const std::size_t lo = (size - 1) / 2, hi = size - 1 - lo;
  sq = ops::pad(std::move(sq), {{lo, hi}});
  DynTensor win =
      mul_s(module_ops::avg_pool(std::move(sq), {size}, {{1}, {}, {}}, true), double(size));
  win = ops::permute(ops::reshape(std::move(win), Shape{n, rest, ch}), {0, 2, 1});
  win = ops::reshape(std::move(win), s);
  DynTensor d =
      ops::binary_scalar(BinaryFn::Add, mul_s(std::move(win), alpha / double(size)), bias);
  return {div(std::move(x), ops::unary(UnaryFn::PowScalar, std::move(d), beta))};
}

// ---- integer and quantized linear algebra, computed exactly in f64 ----
DynTensor zero_point(const OpCall& c, std::size_t i, std::size_t rank, std::size_t axis) {
  if (!c.has(i)) return ops::zeros(Shape{}, DType::F64, c.device);
  DynTensor z = ops::cast(c.at(i), DType::F64);
  if (z.num_elements() == 1) return ops::reshape(std::move(z), Shape{});
  Sizes dims(rank, 1);
  dims[axis] = z.num_elements();
  return ops::reshape(std::move(z), Shape(dims));
}

V conv_integer(OpCall& c) {
  const std::size_t r = c.at(0).rank();
  DynTensor x = sub(ops::cast(c.at(0), DType::F64), zero_point(c, 2, r, 1));
  DynTensor w = sub(ops::cast(c.at(1), DType::F64), zero_point(c, 3, r, 0));
  OpCall inner{c.node, c.opset, c.device, {x, w}, 1, c.env};
  return {ops::cast(conv(inner)[0], DType::I32)};
}

DynTensor requantize(const OpCall& c, DynTensor real, std::size_t ys, std::size_t yz) {
  DynTensor q = ops::unary(UnaryFn::Round, div(std::move(real), ops::cast(c.at(ys), DType::F64)));
  const DType to = c.has(yz) ? c.at(yz).dtype() : DType::U8;
  if (c.has(yz)) q = add(std::move(q), ops::cast(c.at(yz), DType::F64));
  q = ops::clamp(std::move(q), to == DType::U8 ? 0.0 : -128.0, to == DType::U8 ? 255.0 : 127.0);
  return ops::cast(std::move(q), to);
}

V qlinear_matmul(OpCall& c) {
  DynTensor a = sub(ops::cast(c.at(0), DType::F64), ops::cast(c.at(2), DType::F64));
  DynTensor b = sub(ops::cast(c.at(3), DType::F64), ops::cast(c.at(5), DType::F64));
  DynTensor s = mul(ops::cast(c.at(1), DType::F64), ops::cast(c.at(4), DType::F64));
  return {requantize(c, mul(matmul_any(std::move(a), std::move(b)), std::move(s)), 6, 7)};
}

V qlinear_conv(OpCall& c) {
  const std::size_t r = c.at(0).rank();
  const auto at = [&](std::size_t i) -> std::optional<DynTensor> {
    if (c.has(i)) return c.at(i);
    return std::nullopt;
  };
  OpCall zc{c.node, c.opset, c.device, {at(0), at(1), at(2), at(3), at(4), at(5)}, 1, c.env};
  DynTensor x = sub(ops::cast(c.at(0), DType::F64), zero_point(zc, 2, r, 1));
  DynTensor w = sub(ops::cast(c.at(3), DType::F64), zero_point(zc, 5, r, 0));
  OpCall inner{c.node, c.opset, c.device, {x, w}, 1, c.env};
  DynTensor acc = conv(inner)[0];
  if (c.has(8)) acc = add(std::move(acc), channel(ops::cast(c.at(8), DType::F64), r));
  DynTensor ws = ops::cast(c.at(4), DType::F64);
  ws = ws.num_elements() == 1 ? ops::reshape(std::move(ws), Shape{}) : channel(std::move(ws), r);
  DynTensor real = mul(mul(std::move(acc), std::move(ws)), ops::cast(c.at(1), DType::F64));
  return {requantize(c, std::move(real), 6, 7)};
}

// ---- losses ----
// NegativeLogLikelihoodLoss over input [N, C, d...] and target [N, d...]: -input[n, t, d]
// * weight[t], zero where t is ignore_index; mean divides by the sum of the weights used.
DynTensor nll(const OpCall& c, DynTensor input, DynTensor target, std::optional<DynTensor> weight) {
  c.check(input.rank() >= 2 && target.rank() + 1 == input.rank(),
          "input " + input.shape().to_string() + " must be [N, C, d...] and target " +
              target.shape().to_string() + " [N, d...]");
  const std::size_t classes = input.shape()[1];
  DynTensor t = ops::cast(std::move(target), DType::I64);
  std::optional<DynTensor> ignored;
  if (c.node.has("ignore_index"))
    ignored = ops::binary_scalar(BinaryFn::Eq, t, double(c.node.i("ignore_index", 0)));
  DynTensor safe =
      ignored ? ops::mask_where(*ignored, ops::zeros(Shape{}, DType::I64, c.device), t) : t;
  if (safe.num_elements() > 0) {
    const auto v = host_ints(safe);
    for (auto e : v)
      c.check(e >= 0 && static_cast<std::size_t>(e) < classes,
              "target " + std::to_string(e) + " is out of range for " + std::to_string(classes) +
                  " classes");
  }
  DynTensor picked = ops::squeeze(ops::gather(std::move(input), 1, ops::unsqueeze(safe, 1)), 1);
  const DType dt = picked.dtype();
  const Shape ts = safe.shape();
  DynTensor w =
      weight ? ops::reshape(ops::select(*weight, 0, ops::reshape(safe, Shape{safe.num_elements()})),
                            ts)
             : ops::ones(ts, dt, c.device);
  if (ignored) w = ops::mask_where(*ignored, ops::zeros(Shape{}, dt, c.device), std::move(w));
  DynTensor loss = ops::unary(UnaryFn::Neg, mul(std::move(picked), w));
  const std::string red = c.node.s("reduction", "mean");
  if (red == "none") return loss;
  DynTensor total = ops::reshape(ops::reduce_all(ReduceFn::Sum, std::move(loss)), Shape{});
  if (red == "sum") return total;
  c.check(red == "mean", "reduction '" + red + "' is not one of none, sum, mean");
  return div(std::move(total), ops::reshape(ops::reduce_all(ReduceFn::Sum, std::move(w)), Shape{}));
}

V nll_loss(OpCall& c) {
  std::optional<DynTensor> w;
  if (c.has(2)) w = c.at(2);
  return {nll(c, c.at(0), c.at(1), std::move(w))};
}

V softmax_cross_entropy(OpCall& c) {
  DynTensor scores = c.at(0);
  c.check(scores.rank() >= 2, "scores must be [N, C, d...], got " + scores.shape().to_string());
  DynTensor logp = ops::log_softmax(std::move(scores), 1);
  std::optional<DynTensor> w;
  if (c.has(2)) w = c.at(2);
  return {nll(c, logp, c.at(1), std::move(w)), logp};
}

}  // namespace

void register_nn(OpMap& m) {
  const auto reg = [&](const char* name, OpFn fn) { m[name] = {fn, true}; };
  reg("MatMul", matmul);
  reg("MatMulInteger", matmul_integer);
  reg("Gemm", gemm);
  reg("Conv", conv);
  reg("ConvTranspose", conv_transpose);
  reg("MaxPool", max_pool);
  reg("AveragePool", average_pool);
  reg("LpPool", lp_pool);
  reg("GlobalAveragePool", global_pool<ReduceFn::Mean>);
  reg("GlobalMaxPool", global_pool<ReduceFn::Max>);
  reg("GlobalLpPool", global_lp_pool);
  reg("BatchNormalization", batch_norm);
  reg("InstanceNormalization", instance_norm);
  reg("LayerNormalization", layer_norm);
  reg("LpNormalization", lp_norm);
  reg("MeanVarianceNormalization", mvn);
  reg("Softmax", softmax_family<0>);
  reg("LogSoftmax", softmax_family<1>);
  reg("Hardmax", softmax_family<2>);
  reg("Resize", resize);
  reg("Upsample", upsample);
  reg("QuantizeLinear", quantize_linear);
  reg("DequantizeLinear", dequantize_linear);
  reg("LRN", lrn);
  reg("ConvInteger", conv_integer);
  reg("QLinearMatMul", qlinear_matmul);
  reg("QLinearConv", qlinear_conv);
  reg("NegativeLogLikelihoodLoss", nll_loss);
  reg("SoftmaxCrossEntropyLoss", softmax_cross_entropy);
}

}  // namespace ember::onnx
