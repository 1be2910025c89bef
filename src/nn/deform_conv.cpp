// Deformable convolution as a composite (Note [Deformable convolution as gather + matmul]).
#include "ember/nn/deform_conv.hpp"

#include <string>
#include <vector>

#include "ember/nn/conv.hpp"

namespace ember::nn {

// Note [Deformable convolution as gather + matmul]
// For output position l = (oh, ow) and kernel tap k = (i, j) of offset group g, the sample
// point is y = oh sh - ph + i dh + dy[g, k, l], x = ow sw - pw + j dw + dx[g, k, l]. The
// regular part is a constant [K, L] table; the offsets are added to it. Each of the four
// bilinear corners is read with one Gather from the image flattened per channel
// ([N, G, C/G, H W], the index broadcast over a group's channels); a corner outside the
// image reads 0 (torchvision's bilinear_interpolate). The blended values, scaled by the
// mask, are the im2col columns [N, groups, (C / groups) K, L], and the weight
// [groups, O / groups, (C / groups) K] multiplies them in one batched matmul. Gradients:
// Gather's scatter-add into the input, the corner weights into the offsets, the columns
// into the mask and the weight.
DynTensor deform_conv2d(const DynTensor& input, const DynTensor& offset, const DynTensor& weight,
                        const std::optional<DynTensor>& bias, const std::optional<DynTensor>& mask,
                        const DeformConv2dGeometry& geo, const char* layer) {
  using ir::BinaryFn;
  using ir::UnaryFn;
  const std::string who(layer);
  const auto shapes = [&] {
    std::string s = "input " + input.shape().to_string() + ", offset " +
                    offset.shape().to_string() + ", weight " + weight.shape().to_string();
    if (mask) s += ", mask " + mask->shape().to_string();
    return s;
  };
  EMBER_CHECK(
      input.rank() == 4 && offset.rank() == 4 && weight.rank() == 4 && (!mask || mask->rank() == 4),
      who +
          ": expected input [N, C, H, W], offset [N, 2 G kh kw, Ho, Wo], weight [O, "
          "C / groups, kh, kw] and mask [N, G kh kw, Ho, Wo], got " +
          shapes());
  std::vector<const DynTensor*> all{&offset, &weight};
  if (bias) all.push_back(&*bias);
  if (mask) all.push_back(&*mask);
  for (const DynTensor* t : all) {
    EMBER_CHECK(t->dtype() == input.dtype() && t->device() == input.device(),
                who + ": every tensor must have the input's dtype and device (" +
                    std::string(name(input.dtype())) + "), got " + shapes());
  }
  EMBER_CHECK(is_float(input.dtype()), who + ": expected a float input, got " + shapes());
  const std::size_t n = input.shape()[0], c = input.shape()[1], h = input.shape()[2],
                    w = input.shape()[3];
  const std::size_t o = weight.shape()[0], cw = weight.shape()[1], kh = weight.shape()[2],
                    kw = weight.shape()[3];
  EMBER_CHECK(cw > 0 && kh > 0 && kw > 0 && c % cw == 0 && o % (c / cw) == 0,
              who +
                  ": the weight's in-channels must divide the input's channels, and the "
                  "groups the output channels, got " +
                  shapes());
  const std::size_t groups = c / cw;
  EMBER_CHECK(!bias || (bias->rank() == 1 && bias->shape()[0] == o),
              who + ": bias must be [" + std::to_string(o) + "], got " + bias->shape().to_string());
  std::size_t out_hw[2] = {0, 0};
  const std::size_t in_hw[2] = {h, w}, k_hw[2] = {kh, kw};
  for (int d = 0; d < 2; ++d) {
    EMBER_CHECK(geo.stride[d] > 0 && geo.dilation[d] > 0,
                who + ": stride and dilation must be > 0");
    const std::size_t span = geo.dilation[d] * (k_hw[d] - 1) + 1;
    const std::size_t extent = in_hw[d] + 2 * geo.padding[d];
    EMBER_CHECK(span <= extent, who + ": the kernel [" + std::to_string(kh) + ", " +
                                    std::to_string(kw) + "] (dilated span " + std::to_string(span) +
                                    ") is larger than the padded input " +
                                    input.shape().to_string());
    out_hw[d] = (extent - span) / geo.stride[d] + 1;
  }
  const std::size_t ho = out_hw[0], wo = out_hw[1], k = kh * kw, l = ho * wo;
  EMBER_CHECK(offset.shape()[0] == n && offset.shape()[1] % (2 * k) == 0 && offset.shape()[1] > 0 &&
                  offset.shape()[2] == ho && offset.shape()[3] == wo,
              who + ": offset must be [" + std::to_string(n) + ", 2 G " + std::to_string(k) + ", " +
                  std::to_string(ho) + ", " + std::to_string(wo) + "], got " + shapes());
  const std::size_t g = offset.shape()[1] / (2 * k);
  EMBER_CHECK(c % g == 0, who + ": the " + std::to_string(g) +
                              " offset groups must divide the input's " + std::to_string(c) +
                              " channels, got " + shapes());
  const Shape mask_shape{n, g * k, ho, wo};
  EMBER_CHECK(!mask || mask->shape() == mask_shape,
              who + ": mask must be " + mask_shape.to_string() + ", got " + shapes());
  const Device dev = input.device();
  const DType dt = input.dtype();
  const Shape out_shape{n, o, ho, wo};
  if (out_shape.num_elements() == 0 || c == 0) {
    DynTensor z = ops::zeros(out_shape, dt, dev);
    return bias ? ops::binary(BinaryFn::Add, z, ops::reshape(*bias, Shape{1, o, 1, 1})) : z;
  }
  const std::size_t cg = c / g;
  // The regular sample grid, [1, 1, K, L].
  std::vector<double> base_y(k * l), base_x(k * l);
  for (std::size_t t = 0; t < k; ++t) {
    for (std::size_t p = 0; p < l; ++p) {
      base_y[t * l + p] =
          static_cast<double>((p / wo) * geo.stride[0] + (t / kw) * geo.dilation[0]) -
          static_cast<double>(geo.padding[0]);
      base_x[t * l + p] =
          static_cast<double>((p % wo) * geo.stride[1] + (t % kw) * geo.dilation[1]) -
          static_cast<double>(geo.padding[1]);
    }
  }
  const auto table = [&](const std::vector<double>& v) {
    return ops::from_data(TensorData::from(v, Shape{1, 1, k, l}).convert(dt), dev);
  };
  const DynTensor off = ops::reshape(offset, Shape{n, g, k, 2, l});
  const auto coordinate = [&](std::int64_t comp, const std::vector<double>& base) {
    return ops::binary(BinaryFn::Add, ops::reshape(ops::narrow(off, 3, comp, 1), Shape{n, g, k, l}),
                       table(base));
  };
  const DynTensor py = coordinate(0, base_y), px = coordinate(1, base_x);
  const DynTensor flat = ops::reshape(input, Shape{n, g, cg, h * w});
  const double wd = static_cast<double>(w), hd = static_cast<double>(h);
  const Shape idx_shape{n, g, 1, k * l}, col_shape{n, g, cg, k * l};
  // The image at integral (xi, yi) [N, G, K, L], 0 outside: [N, G, C/G, K L].
  const auto read = [&](const DynTensor& xi, const DynTensor& yi) {
    auto inside = ops::binary(BinaryFn::And,
                              ops::binary(BinaryFn::And, ops::binary_scalar(BinaryFn::Ge, xi, 0.0),
                                          ops::binary_scalar(BinaryFn::Le, xi, wd - 1)),
                              ops::binary(BinaryFn::And, ops::binary_scalar(BinaryFn::Ge, yi, 0.0),
                                          ops::binary_scalar(BinaryFn::Le, yi, hd - 1)));
    const DynTensor zero = ops::zeros(Shape{1}, dt, dev);
    auto lin = ops::binary(BinaryFn::Add,
                           ops::binary_scalar(BinaryFn::Mul, ops::mask_where(inside, yi, zero), wd),
                           ops::mask_where(inside, xi, zero));
    auto index =
        ops::expand(ops::reshape(ops::cast(std::move(lin), DType::I64), idx_shape), col_shape);
    auto v = ops::gather(flat, 3, std::move(index));
    return ops::mask_where(ops::reshape(std::move(inside), idx_shape), std::move(v), zero);
  };
  const DynTensor x0 = ops::unary(UnaryFn::Floor, px), y0 = ops::unary(UnaryFn::Floor, py);
  const DynTensor x1 = ops::binary_scalar(BinaryFn::Add, x0, 1.0),
                  y1 = ops::binary_scalar(BinaryFn::Add, y0, 1.0);
  const DynTensor wx1 = ops::binary(BinaryFn::Sub, px, x0),
                  wy1 = ops::binary(BinaryFn::Sub, py, y0);
  const DynTensor wx0 = ops::rbinary_scalar(BinaryFn::Sub, 1.0, wx1),
                  wy0 = ops::rbinary_scalar(BinaryFn::Sub, 1.0, wy1);
  const auto corner = [&](const DynTensor& xi, const DynTensor& yi, const DynTensor& wx,
                          const DynTensor& wy) {
    return ops::binary(BinaryFn::Mul, read(xi, yi),
                       ops::reshape(ops::binary(BinaryFn::Mul, wx, wy), idx_shape));
  };
  DynTensor cols = ops::binary(
      BinaryFn::Add, ops::binary(BinaryFn::Add, corner(x0, y0, wx0, wy0), corner(x1, y0, wx1, wy0)),
      ops::binary(BinaryFn::Add, corner(x0, y1, wx0, wy1), corner(x1, y1, wx1, wy1)));
  if (mask) cols = ops::binary(BinaryFn::Mul, std::move(cols), ops::reshape(*mask, idx_shape));
  // [N, G, C/G, K, L] is [N, C, K, L]: channel-major columns, split by the weight's groups.
  cols = ops::reshape(std::move(cols), Shape{n, groups, cw * k, l});
  const DynTensor wm = ops::expand(ops::reshape(weight, Shape{1, groups, o / groups, cw * k}),
                                   Shape{n, groups, o / groups, cw * k});
  DynTensor out = ops::reshape(ops::matmul(wm, std::move(cols)), out_shape);
  if (bias)
    out = ops::binary(BinaryFn::Add, std::move(out), ops::reshape(*bias, Shape{1, o, 1, 1}));
  return out;
}

namespace {
void check_channels(const Tensor<4>& x, const DynTensor& weight, std::size_t groups) {
  const std::size_t want = weight.shape()[1] * groups;
  EMBER_CHECK(x.shape()[1] == want, "nn::DeformConv2d: input of shape " + x.shape().to_string() +
                                        " has " + std::to_string(x.shape()[1]) +
                                        " channels, expected " + std::to_string(want) +
                                        " (weight " + weight.shape().to_string() + ")");
}
}  // namespace

Tensor<4> DeformConv2d::forward(const Tensor<4>& x, const Tensor<4>& offset) const {
  return detail::at_layer(*this, [&]() -> Tensor<4> {
    check_channels(x, weight.val().dyn(), groups);
    return Tensor<4>(deform_conv2d(x.dyn(), offset.dyn(), weight.val().dyn(),
                                   detail::bias_dyn(bias), std::nullopt,
                                   {stride, padding, dilation}, "nn::DeformConv2d"));
  });
}

Tensor<4> DeformConv2d::forward(const Tensor<4>& x, const Tensor<4>& offset,
                                const Tensor<4>& mask) const {
  return detail::at_layer(*this, [&]() -> Tensor<4> {
    check_channels(x, weight.val().dyn(), groups);
    return Tensor<4>(deform_conv2d(x.dyn(), offset.dyn(), weight.val().dyn(),
                                   detail::bias_dyn(bias), mask.dyn(), {stride, padding, dilation},
                                   "nn::DeformConv2d"));
  });
}

DeformConv2d DeformConv2dConfig::init(const Device& device) const {
  const Shape ws{channels_out, groups == 0 ? 0 : channels_in / groups, kernel_size[0],
                 kernel_size[1]};
  auto [w, b] = detail::conv_init(ws, channels_out, bias, groups, channels_in, channels_out,
                                  initializer, device, "nn::DeformConv2d");
  for (int d = 0; d < 2; ++d)
    EMBER_CHECK(stride[d] > 0 && dilation[d] > 0,
                "nn::DeformConv2d: stride and dilation must be > 0");
  std::optional<Param<Tensor<1>>> bp;
  if (b) bp.emplace(Tensor<1>(std::move(*b)));
  return DeformConv2d{
      Param<Tensor<4>>(Tensor<4>(std::move(w))), std::move(bp), stride, padding, dilation, groups};
}

}  // namespace ember::nn
