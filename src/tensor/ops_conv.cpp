// Convolution and pooling (ember::module_ops): validation of the sliding-window arguments
// in one place (resolve_window), the IR ops Unfold, Fold and Pool, and the composites built
// on them — conv and conv_transpose as ir::Conv where the backend has it and through
// matmul elsewhere, max pooling as Pool, average pooling
// as Pool's sum over the window size or over the count of entries inside the image.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "ember/base/checked.hpp"
#include "ember/ir/infer.hpp"
#include "ember/tensor/module_ops.hpp"
#include "tensor/op_support.hpp"

namespace ember::module_ops {
namespace {

using ops::detail::describe;
using ops::detail::run;

std::string list(const std::vector<std::size_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// The product of v; an ember::Error naming op and `what` when it exceeds 2^62.
std::size_t product(const std::vector<std::size_t>& v, const std::string& op = "window",
                    const char* what = "the product") {
  std::size_t p = 1;
  for (std::size_t e : v) p = checked_mul(p, e, op, what);
  return p;
}

// Every window quantity (extent, padded extent, span, stride, padding) is at most 2^60, so
// that the kernels' signed coordinate arithmetic (sums of three of them) cannot overflow.
// (2^60 where sizes are 64-bit, 2^28 on a 32-bit target.)
constexpr std::size_t kMaxWindow = kMaxSize / 4;

std::size_t window_bound(std::size_t v, const std::string& op, const std::string& what) {
  EMBER_CHECK(v <= kMaxWindow, op + ": " + what + " " + std::to_string(v) +
                                   " exceeds the largest window extent (2^" +
                                   std::to_string(kMaxSizeLog2 - 2) + ")");
  return v;
}

// The number of spatial dims of an image x [N, C, *spatial]; throws naming op.
std::size_t spatial_dims(const DynTensor& x, const char* op) {
  EMBER_CHECK(x.rank() >= 3 && x.rank() <= 5,
              describe(std::string(op) +
                           ": expected an image [N, C, *spatial] with 1 to 3 spatial dims, got",
                       {&x}));
  return x.rank() - 2;
}

// A window with every vector filled (defaults for empty ones) and checked: sp entries
// each, kernel / stride / dilation >= 1, and — when `image` is given — at least one
// window position along each dim of the padded image.
ir::Window resolve_window(const std::string& op, std::size_t sp,
                          const std::vector<std::size_t>& kernel, const WindowOptions& o,
                          const std::vector<std::size_t>* stride_default,
                          const std::vector<std::size_t>* image) {
  const auto fill = [&](const std::vector<std::size_t>& v, std::size_t dflt,
                        const std::vector<std::size_t>* dv, const char* what) {
    if (v.empty()) return dv ? *dv : std::vector<std::size_t>(sp, dflt);
    EMBER_CHECK(v.size() == sp, op + ": " + what + " " + list(v) + " needs " + std::to_string(sp) +
                                    " entries, one per spatial dim");
    return v;
  };
  ir::Window w;
  EMBER_CHECK(kernel.size() == sp, op + ": kernel " + list(kernel) + " needs " +
                                       std::to_string(sp) + " entries, one per spatial dim");
  w.kernel = kernel;
  w.stride = fill(o.stride, 1, stride_default, "stride");
  w.padding = fill(o.padding, 0, nullptr, "padding");
  w.dilation = fill(o.dilation, 1, nullptr, "dilation");
  for (std::size_t i = 0; i < sp; ++i) {
    EMBER_CHECK(w.kernel[i] >= 1 && w.stride[i] >= 1 && w.dilation[i] >= 1,
                op + ": kernel " + list(w.kernel) + ", stride " + list(w.stride) +
                    " and dilation " + list(w.dilation) + " must be >= 1");
    const std::string dim = " along spatial dim " + std::to_string(i);
    window_bound(w.stride[i], op, "the stride" + dim);
    window_bound(w.padding[i], op, "the padding" + dim);
    const std::size_t span =
        window_bound(checked_add(checked_mul(w.dilation[i], w.kernel[i] - 1, op, "the kernel span"),
                                 1, op, "the kernel span"),
                     op, "the kernel span dilation * (kernel - 1) + 1" + dim);
    if (image) {
      window_bound((*image)[i], op, "the extent" + dim);
      window_bound(checked_add((*image)[i], checked_mul(2, w.padding[i], op, "the padding"), op,
                               "the padded extent"),
                   op, "the padded extent" + dim);
      EMBER_CHECK((*image)[i] + 2 * w.padding[i] >= span,
                  op + ": the kernel " + list(w.kernel) + " with dilation " + list(w.dilation) +
                      " spans " + std::to_string(span) + " along spatial dim " + std::to_string(i) +
                      ", more than the padded input extent " + std::to_string((*image)[i]) +
                      " + 2 * " + std::to_string(w.padding[i]));
    }
  }
  return w;
}

std::vector<std::size_t> spatial_of(const Shape& s) { return {s.begin() + 2, s.end()}; }

// Pooling's contract (ir::Pool): every window position holds at least one image entry.
// Along each dim only the positions starting in the padding before the image can miss it
// (padding is at most half the kernel), so only those are looked at.
void check_windows_touch_image(const std::string& op, const std::vector<std::size_t>& in,
                               const ir::Window& w) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    const auto n = static_cast<std::int64_t>(in[i]), s = static_cast<std::int64_t>(w.stride[i]),
               pad = static_cast<std::int64_t>(w.padding[i]),
               d = static_cast<std::int64_t>(w.dilation[i]),
               k = static_cast<std::int64_t>(w.kernel[i]);
    const auto positions = static_cast<std::int64_t>(
        ir::window_positions(in[i], w.kernel[i], w.stride[i], w.padding[i], w.dilation[i]));
    bool ok = n > 0;
    for (std::int64_t p = 0; ok && p < positions; ++p) {
      const std::int64_t start = p * s - pad;  // the first tap's coordinate
      if (start >= 0) {
        ok = start < n;
        break;
      }
      const std::int64_t k0 = (-start + d - 1) / d;  // the first tap at a coordinate >= 0
      ok = k0 < k && start + k0 * d < n;
    }
    EMBER_CHECK(ok, op + ": a window of kernel " + list(w.kernel) + ", stride " + list(w.stride) +
                        ", padding " + list(w.padding) + " and dilation " + list(w.dilation) +
                        " lies wholly in the padding along spatial dim " + std::to_string(i) +
                        " (extent " + std::to_string(in[i]) + ")");
  }
}

// The shape [N, C, *positions] of a per-position result, checked to fit.
std::vector<std::size_t> checked_positions_shape(const std::string& op, std::size_t n,
                                                 std::size_t c, const std::vector<std::size_t>& pos,
                                                 DType dtype, const Device& device) {
  std::vector<std::size_t> dims{n, c};
  dims.insert(dims.end(), pos.begin(), pos.end());
  ops::detail::check_size(Shape(dims), dtype, op, device);
  return dims;
}

DynTensor unfold_checked(DynTensor x, ir::Window w, double pad_value) {
  const Device dev = x.device();
  return run(dev, ir::Unfold{std::move(x).handle(), std::move(w), pad_value});
}

DynTensor fold_checked(DynTensor x, std::vector<std::size_t> output, ir::Window w) {
  const Device dev = x.device();
  return run(dev, ir::Fold{std::move(x).handle(), std::move(output), std::move(w)});
}

DynTensor pool_checked(DynTensor x, ir::Window w, ir::PoolFn fn) {
  const Device dev = x.device();
  return run(dev, ir::Pool{std::move(x).handle(), std::move(w), fn});
}

// [N, C, *out] from [..., L] with N * C * L elements.
DynTensor to_image(DynTensor y, std::size_t n, std::size_t c, const std::vector<std::size_t>& out) {
  std::vector<std::size_t> dims{n, c};
  dims.insert(dims.end(), out.begin(), out.end());
  return ops::reshape(std::move(y), Shape(std::move(dims)));
}

// Checks bias [O] (before any work is done).
void check_bias(const DynTensor& x, const DynTensor& weight, const std::optional<DynTensor>& bias,
                std::size_t channels, const char* op) {
  if (!bias) return;
  ops::detail::check_same_device(x, *bias, op);
  EMBER_CHECK(bias->rank() == 1 && bias->shape()[0] == channels && bias->dtype() == x.dtype(),
              describe(std::string(op) + ": expected a bias [" + std::to_string(channels) +
                           "] of the input's dtype, got (input, weight, bias)",
                       {&x, &weight, &*bias}));
}

// y [N, O, *spatial] + bias [O], broadcast.
DynTensor add_bias(DynTensor y, std::optional<DynTensor> bias) {
  if (!bias) return y;
  std::vector<std::size_t> dims(y.rank(), 1);
  dims[1] = bias->shape()[0];
  return ops::binary(ir::BinaryFn::Add, std::move(y),
                     ops::reshape(std::move(*bias), Shape(std::move(dims))));
}

void check_weight(const DynTensor& x, const DynTensor& weight, const char* op) {
  ops::detail::check_kind(x, {Kind::Float}, op);
  ops::detail::check_same_device(x, weight, op);
  EMBER_CHECK(weight.rank() == x.rank() && weight.dtype() == x.dtype(),
              describe(std::string(op) + ": expected a weight of the input's rank and dtype, got",
                       {&x, &weight}));
}

}  // namespace

DynTensor unfold(DynTensor x, const std::vector<std::size_t>& kernel, const WindowOptions& o,
                 double pad_value) {
  const std::size_t sp = spatial_dims(x, "unfold");
  const auto in = spatial_of(x.shape());
  ir::Window w = resolve_window(describe("unfold", {&x}), sp, kernel, o, nullptr, &in);
  EMBER_CHECK(x.kind() == Kind::Float || !std::isnan(pad_value),
              describe("unfold: a NaN padding value needs a float tensor, got", {&x}));
  {
    const std::string op = describe("unfold", {&x});
    const std::size_t rows = checked_mul(x.shape()[1], product(w.kernel, op, "the kernel size"), op,
                                         "the rows C * prod(kernel)");
    ops::detail::check_size(
        Shape{x.shape()[0], rows, product(ir::window_positions(in, w), op, "the window positions")},
        x.dtype(), op, x.device());
  }
  return unfold_checked(std::move(x), std::move(w), pad_value);
}

DynTensor fold(DynTensor x, const std::vector<std::size_t>& output_size,
               const std::vector<std::size_t>& kernel, const WindowOptions& o) {
  ops::detail::check_kind(x, {Kind::Float}, "fold");
  const std::string op = describe("fold", {&x});
  EMBER_CHECK(x.rank() == 3, op + ": expected columns [N, C * prod(kernel), L]");
  EMBER_CHECK(output_size.size() >= 1 && output_size.size() <= 3,
              op + ": output_size " + list(output_size) + " needs 1 to 3 spatial dims");
  const std::size_t sp = output_size.size();
  ir::Window w = resolve_window(op, sp, kernel, o, nullptr, &output_size);
  const std::size_t k = product(w.kernel, op, "the kernel size");
  EMBER_CHECK(x.shape()[1] % k == 0, op + ": dim 1 (" + std::to_string(x.shape()[1]) +
                                         ") is not a multiple of the kernel size " +
                                         std::to_string(k) + " of kernel " + list(w.kernel));
  const auto pos = ir::window_positions(output_size, w);
  const std::size_t l = product(pos, op, "the window positions");
  EMBER_CHECK(x.shape()[2] == l, op + ": dim 2 must be the number of window positions " +
                                     list(pos) + " = " + std::to_string(l) + " of output_size " +
                                     list(output_size));
  {
    std::vector<std::size_t> dims{x.shape()[0], x.shape()[1] / k};
    dims.insert(dims.end(), output_size.begin(), output_size.end());
    ops::detail::check_size(Shape(std::move(dims)), x.dtype(), op, x.device());
  }
  return fold_checked(std::move(x), output_size, std::move(w));
}

DynTensor conv(DynTensor x, DynTensor weight, std::optional<DynTensor> bias, const WindowOptions& o,
               std::size_t groups) {
  const std::size_t sp = spatial_dims(x, "conv");
  check_weight(x, weight, "conv");
  const std::size_t n = x.shape()[0], c = x.shape()[1], out_c = weight.shape()[0];
  EMBER_CHECK(
      groups >= 1 && c % groups == 0 && out_c % groups == 0 && weight.shape()[1] * groups == c,
      describe("conv: expected weight [O, C / groups, *kernel] with C and O multiples "
               "of groups = " +
                   std::to_string(groups) + ", got",
               {&x, &weight}));
  check_bias(x, weight, bias, out_c, "conv");
  const auto in = spatial_of(x.shape());
  const auto kernel = spatial_of(weight.shape());
  ir::Window w = resolve_window(describe("conv", {&x, &weight}), sp, kernel, o, nullptr, &in);
  const auto out = ir::window_positions(in, w);
  const std::string cop = describe("conv", {&x, &weight});
  const std::size_t ck = checked_mul(weight.shape()[1], product(kernel, cop, "the kernel size"),
                                     cop, "the rows C / groups * prod(kernel)"),
                    l = product(out, cop, "the window positions");
  checked_positions_shape(cop, n, out_c, out, x.dtype(), x.device());
  ops::detail::check_size(Shape{n, checked_mul(groups, ck, cop, "the column rows"), l}, x.dtype(),
                          cop, x.device());
  // A backend with a convolution kernel (ir::Conv) convolves without the column matrix.
  const Device dev = x.device();
  ir::Conv direct{x.handle(), weight.handle(), w, groups, ir::ConvPass::Forward, {}};
  if (dev.backend().supports(ir::Op(direct))) {
    return add_bias(run(dev, std::move(direct)), std::move(bias));
  }
  // Elsewhere: cols [N, G, C/G * K, L]; weight [1, G, O/G, C/G * K]; their product
  // [N, G, O/G, L] is [N, O, *out] in memory.
  auto cols =
      ops::reshape(unfold_checked(std::move(x), std::move(w), 0.0), Shape{n, groups, ck, l});
  auto wm = ops::reshape(std::move(weight), Shape{1, groups, out_c / groups, ck});
  return add_bias(to_image(ops::matmul(std::move(wm), std::move(cols)), n, out_c, out),
                  std::move(bias));
}

DynTensor conv_transpose(DynTensor x, DynTensor weight, std::optional<DynTensor> bias,
                         const WindowOptions& o, const std::vector<std::size_t>& output_padding,
                         std::size_t groups) {
  const std::size_t sp = spatial_dims(x, "conv_transpose");
  check_weight(x, weight, "conv_transpose");
  const std::size_t n = x.shape()[0], c = x.shape()[1];
  EMBER_CHECK(groups >= 1 && c % groups == 0 && weight.shape()[0] == c,
              describe("conv_transpose: expected weight [C, O / groups, *kernel] with C a "
                       "multiple of groups = " +
                           std::to_string(groups) + ", got",
                       {&x, &weight}));
  const std::size_t out_c = weight.shape()[1] * groups;
  check_bias(x, weight, bias, out_c, "conv_transpose");
  const auto in = spatial_of(x.shape());
  const auto kernel = spatial_of(weight.shape());
  const std::string op = describe("conv_transpose", {&x, &weight});
  ir::Window w = resolve_window(op, sp, kernel, o, nullptr, nullptr);
  std::vector<std::size_t> opad =
      output_padding.empty() ? std::vector<std::size_t>(sp, 0) : output_padding;
  EMBER_CHECK(opad.size() == sp, op + ": output_padding " + list(opad) + " needs " +
                                     std::to_string(sp) + " entries, one per spatial dim");
  std::vector<std::size_t> out(sp);
  for (std::size_t i = 0; i < sp; ++i) {
    EMBER_CHECK(opad[i] < w.stride[i], op + ": output_padding " + list(opad) +
                                           " must be smaller than the stride " + list(w.stride));
    EMBER_CHECK(in[i] >= 1, op + ": spatial dim " + std::to_string(i) + " is empty");
    const std::size_t full =
        checked_add(checked_add(checked_mul(in[i] - 1, w.stride[i], op, "the output extent"),
                                checked_mul(w.dilation[i], kernel[i] - 1, op, "the kernel span"),
                                op, "the output extent"),
                    opad[i] + 1, op, "the output extent");
    window_bound(full, op, "the output extent along spatial dim " + std::to_string(i));
    EMBER_CHECK(full > 2 * w.padding[i], op + ": padding " + list(w.padding) +
                                             " leaves no output along spatial dim " +
                                             std::to_string(i));
    out[i] = full - 2 * w.padding[i];
  }
  checked_positions_shape(op, n, out_c, out, x.dtype(), x.device());
  // The window over the output image, checked as Fold will slide it.
  w = resolve_window(op, sp, kernel, o, nullptr, &out);
  const std::size_t cg = c / groups,
                    ok = checked_mul(weight.shape()[1], product(kernel, op, "the kernel size"), op,
                                     "the rows O / groups * prod(kernel)"),
                    l = product(in, op, "the input positions");
  ops::detail::check_size(Shape{n, checked_mul(groups, ok, op, "the column rows"), l}, x.dtype(),
                          op, x.device());
  // A backend with a convolution kernel runs it as the adjoint of a convolution in its
  // image: ir::Conv's InputGrad with x as the output gradient and weight [C, O/G, *kernel].
  const Device dev = x.device();
  ir::Conv direct{x.handle(), weight.handle(), w, groups, ir::ConvPass::InputGrad, out};
  if (dev.backend().supports(ir::Op(direct))) {
    return add_bias(run(dev, std::move(direct)), std::move(bias));
  }
  // Elsewhere: weight^T [1, G, O/G * K, C/G] times x [N, G, C/G, L]: columns [N, O * K, L]
  // to fold.
  auto wt = ops::transpose(ops::reshape(std::move(weight), Shape{1, groups, cg, ok}));
  auto xs = ops::reshape(std::move(x), Shape{n, groups, cg, l});
  auto cols = ops::reshape(ops::matmul(std::move(wt), std::move(xs)), Shape{n, groups * ok, l});
  return add_bias(fold_checked(std::move(cols), out, std::move(w)), std::move(bias));
}

namespace {

// Note [Pooling in ceil mode]
// PyTorch's ceil_mode counts positions as ceil((L + 2p - span) / s) + 1, less one when
// the last window would start past the image and the padding before it. The last window
// then hangs over the padded image's end by `extra` entries; the pool runs over the image
// padded on the right by that much explicitly (with the value that never wins: -inf for
// max, 0 for sums), so ir::Pool keeps its one symmetric padding and every backend's kernel
// serves both modes.
std::vector<std::size_t> ceil_overhang(const std::vector<std::size_t>& in, const ir::Window& w) {
  std::vector<std::size_t> extra(in.size(), 0);
  for (std::size_t i = 0; i < in.size(); ++i) {
    const std::size_t padded = in[i] + 2 * w.padding[i];
    const std::size_t span = w.dilation[i] * (w.kernel[i] - 1) + 1;
    std::size_t out = (padded - span + w.stride[i] - 1) / w.stride[i] + 1;
    if ((out - 1) * w.stride[i] >= in[i] + w.padding[i]) --out;
    const std::size_t end = (out - 1) * w.stride[i] + span;
    extra[i] = end > padded ? end - padded : 0;
  }
  return extra;
}

// x padded on the right of each spatial dim by extra (value `fill`); x itself when none.
DynTensor pad_overhang(DynTensor x, const std::vector<std::size_t>& extra, double fill) {
  if (std::all_of(extra.begin(), extra.end(), [](std::size_t e) { return e == 0; })) return x;
  std::vector<std::pair<std::size_t, std::size_t>> pads;
  for (std::size_t e : extra) pads.emplace_back(0, e);
  return ops::pad(std::move(x), pads, ops::PadMode::Constant, fill);
}

// The lowest value of x's dtype: the padding a max never picks.
double lowest_of(DType dt) {
  if (kind_of(dt) == Kind::Float) return -std::numeric_limits<double>::infinity();
  switch (dt) {
    case DType::I64:
      return double(std::numeric_limits<std::int64_t>::lowest());
    case DType::I32:
      return double(std::numeric_limits<std::int32_t>::lowest());
    case DType::I16:
      return double(std::numeric_limits<std::int16_t>::lowest());
    case DType::I8:
      return double(std::numeric_limits<std::int8_t>::lowest());
    default:
      return 0.0;  // unsigned
  }
}

// The checks both pools share; returns the window.
ir::Window pool_window(const std::string& op, const DynTensor& x,
                       const std::vector<std::size_t>& kernel, const WindowOptions& o,
                       bool ceil_mode) {
  const std::size_t sp = x.rank() - 2;
  const auto in = spatial_of(x.shape());
  ir::Window w = resolve_window(op, sp, kernel, o, &kernel, &in);
  for (std::size_t i = 0; i < sp; ++i) {
    EMBER_CHECK(
        2 * w.padding[i] <= w.kernel[i],
        op + ": padding " + list(w.padding) + " must be at most half the kernel " + list(w.kernel));
  }
  check_windows_touch_image(op, in, w);
  auto positions = ir::window_positions(in, w);
  if (ceil_mode) {
    const auto extra = ceil_overhang(in, w);
    for (std::size_t i = 0; i < sp; ++i) positions[i] += extra[i] > 0 ? 1 : 0;
  }
  checked_positions_shape(op, x.shape()[0], x.shape()[1], positions, x.dtype(), x.device());
  return w;
}

}  // namespace

DynTensor max_pool(DynTensor x, const std::vector<std::size_t>& kernel, const WindowOptions& o,
                   bool ceil_mode) {
  spatial_dims(x, "max_pool");
  ops::detail::check_kind(x, {Kind::Float, Kind::Int}, "max_pool");
  const std::string op = describe("max_pool", {&x});
  ir::Window w = pool_window(op, x, kernel, o, ceil_mode);
  if (ceil_mode) {
    const auto extra = ceil_overhang(spatial_of(x.shape()), w);
    const double fill = lowest_of(x.dtype());
    x = pad_overhang(std::move(x), extra, fill);
  }
  return pool_checked(std::move(x), std::move(w), ir::PoolFn::Max);
}

// Note [Average pooling's divisor]
// Each position divides its window's sum by a product over the spatial dims of one count
// per dim (PyTorch's rule): the window's extent clipped to the padded image when
// count_include_pad (the kernel itself except for a ceil-mode overhang), else clipped to
// the image. The counts are known from the geometry alone, so the divisor is made on the
// host as a [1, 1, *positions] tensor broadcast over N and C (a scalar where it is one
// number for every position).
DynTensor avg_pool(DynTensor x, const std::vector<std::size_t>& kernel, const WindowOptions& o,
                   bool count_include_pad, bool ceil_mode, std::optional<double> divisor_override) {
  spatial_dims(x, "avg_pool");
  ops::detail::check_kind(x, {Kind::Float}, "avg_pool");
  const std::string op = describe("avg_pool", {&x});
  EMBER_CHECK(
      std::all_of(o.dilation.begin(), o.dilation.end(), [](std::size_t d) { return d == 1; }),
      op + ": avg_pool takes no dilation, got " + list(o.dilation));
  EMBER_CHECK(!divisor_override || (std::isfinite(*divisor_override) && *divisor_override != 0),
              op + ": divisor_override must be a finite non-zero number, got " +
                  std::to_string(divisor_override.value_or(0)));
  ir::Window w = pool_window(op, x, kernel, o, ceil_mode);
  const auto in = spatial_of(x.shape());
  const std::size_t sp = in.size();
  const auto extra = ceil_mode ? ceil_overhang(in, w) : std::vector<std::size_t>(sp, 0);
  const DType dt = x.dtype();
  const Device dev = x.device();
  auto sums = pool_checked(pad_overhang(std::move(x), extra, 0.0), w, ir::PoolFn::Sum);
  if (divisor_override) {
    return ops::binary_scalar(ir::BinaryFn::Div, std::move(sums), *divisor_override);
  }
  const bool overhang =
      std::any_of(extra.begin(), extra.end(), [](std::size_t e) { return e > 0; });
  if (count_include_pad && !overhang) {
    return ops::binary_scalar(ir::BinaryFn::Div, std::move(sums),
                              double(product(w.kernel, op, "the kernel size")));
  }
  // Per dim, the count of each position; then their outer product.
  std::vector<std::size_t> shape{1, 1};
  std::vector<std::vector<double>> counts(sp);
  for (std::size_t i = 0; i < sp; ++i) {
    const auto n = std::int64_t(in[i]), p = std::int64_t(w.padding[i]),
               k = std::int64_t(w.kernel[i]), s = std::int64_t(w.stride[i]);
    const std::size_t positions = sums.shape()[2 + i];
    for (std::size_t j = 0; j < positions; ++j) {
      const std::int64_t start = std::int64_t(j) * s - p;
      const std::int64_t end = std::min(start + k, n + p);
      counts[i].push_back(count_include_pad
                              ? double(end - start)
                              : double(std::min(end, n) - std::max<std::int64_t>(start, 0)));
    }
    shape.push_back(positions);
  }
  std::vector<double> divisor{1.0};
  for (const auto& c : counts) {
    std::vector<double> next;
    next.reserve(divisor.size() * c.size());
    for (double a : divisor)
      for (double b : c) next.push_back(a * b);
    divisor = std::move(next);
  }
  auto d = ops::cast(ops::from_data(TensorData::from<double>(divisor, Shape(shape)), dev), dt);
  return ops::binary(ir::BinaryFn::Div, std::move(sums), std::move(d));
}

}  // namespace ember::module_ops
