// grid_sample as a composite: the grid's coordinates become pixel positions, each corner
// (bilinear) or the nearest pixel is read with Gather from the image flattened per channel,
// and the corners are blended with their weights. Reads outside the image are masked to 0
// (zeros padding) or never happen (border padding clamps the positions). The gradient in
// the image is Gather's (a scatter-add), the gradient in the grid flows through the weights.
#include "tensor/op_support.hpp"

namespace ember::ops {

using ir::BinaryFn;
using ir::UnaryFn;

DynTensor grid_sample(DynTensor input, DynTensor grid, GridSampleMode mode,
                      GridSamplePadding padding, bool align_corners) {
  detail::check_same_device(input, grid, "grid_sample");
  detail::check_kind(input, {Kind::Float}, "grid_sample");
  EMBER_CHECK(input.dtype() == grid.dtype(),
              detail::describe("grid_sample: input and grid dtypes differ", {&input, &grid}));
  EMBER_CHECK(
      input.rank() == 4 && grid.rank() == 4 && grid.shape()[0] == input.shape()[0] &&
          grid.shape()[3] == 2,
      detail::describe("grid_sample: expected input [N, C, H, W] and grid [N, Ho, Wo, 2], got",
                       {&input, &grid}));
  const std::size_t n = input.shape()[0], c = input.shape()[1], h = input.shape()[2],
                    w = input.shape()[3], ho = grid.shape()[1], wo = grid.shape()[2];
  const Shape out_shape{n, c, ho, wo};
  const Device dev = input.device();
  const DType dt = input.dtype();
  detail::check_size(out_shape, dt, "grid_sample", dev);
  if (out_shape.num_elements() == 0) return detail::fill(out_shape, 0.0, dt, dev);
  EMBER_CHECK(h > 0 && w > 0, detail::describe("grid_sample: the image is empty", {&input}));
  const std::size_t l = ho * wo;
  // Pixel positions [N, 1, L]: x along W, y along H.
  const auto position = [&](std::int64_t comp, std::size_t size) {
    auto g = reshape(narrow(grid, 3, comp, 1), Shape{n, 1, l});
    const double s = static_cast<double>(size);
    const double scale = align_corners ? (s - 1) / 2 : s / 2;
    auto p = binary_scalar(BinaryFn::Add, binary_scalar(BinaryFn::Mul, std::move(g), scale),
                           (s - 1) / 2);
    if (padding == GridSamplePadding::Border) p = clamp(std::move(p), 0.0, s - 1);
    return p;
  };
  const DynTensor px = position(0, w), py = position(1, h);
  const DynTensor flat = reshape(std::move(input), Shape{n, c, h * w});
  const double wd = static_cast<double>(w), hd = static_cast<double>(h);
  // The image at integral positions (xi, yi) [N, 1, L], 0 outside: [N, C, L].
  const auto read = [&](const DynTensor& xi, const DynTensor& yi) {
    auto inside = binary(BinaryFn::And,
                         binary(BinaryFn::And, binary_scalar(BinaryFn::Ge, xi, 0.0),
                                binary_scalar(BinaryFn::Le, xi, wd - 1)),
                         binary(BinaryFn::And, binary_scalar(BinaryFn::Ge, yi, 0.0),
                                binary_scalar(BinaryFn::Le, yi, hd - 1)));
    const auto zero = detail::scalar_like(xi, 0.0);
    auto lin = binary(BinaryFn::Add, binary_scalar(BinaryFn::Mul, mask_where(inside, yi, zero), wd),
                      mask_where(inside, xi, zero));
    auto index = expand(cast(std::move(lin), DType::I64), Shape{n, c, l});
    auto v = gather(flat, 2, std::move(index));
    return mask_where(std::move(inside), std::move(v), detail::scalar_like(flat, 0.0));
  };
  if (mode == GridSampleMode::Nearest) {
    return reshape(read(unary(UnaryFn::Round, px), unary(UnaryFn::Round, py)), out_shape);
  }
  {
    auto x0 = unary(UnaryFn::Floor, px), y0 = unary(UnaryFn::Floor, py);
    auto x1 = binary_scalar(BinaryFn::Add, x0, 1.0), y1 = binary_scalar(BinaryFn::Add, y0, 1.0);
    auto wx1 = binary(BinaryFn::Sub, px, x0), wy1 = binary(BinaryFn::Sub, py, y0);
    auto wx0 = rbinary_scalar(BinaryFn::Sub, 1.0, wx1),
         wy0 = rbinary_scalar(BinaryFn::Sub, 1.0, wy1);
    const auto corner = [&](const DynTensor& xi, const DynTensor& yi, const DynTensor& wx,
                            const DynTensor& wy) {
      return binary(BinaryFn::Mul, read(xi, yi), binary(BinaryFn::Mul, wx, wy));
    };
    auto out = binary(BinaryFn::Add,
                      binary(BinaryFn::Add, corner(x0, y0, wx0, wy0), corner(x1, y0, wx1, wy0)),
                      binary(BinaryFn::Add, corner(x0, y1, wx0, wy1), corner(x1, y1, wx1, wy1)));
    return reshape(std::move(out), out_shape);
  }
}

}  // namespace ember::ops
