// CosineSimilarity, PairwiseDistance, PixelShuffle and PixelUnshuffle as composites.
#include "ember/nn/distance.hpp"

#include <cmath>
#include <limits>

#include "ember/nn/pixel_shuffle.hpp"

namespace ember::nn {

namespace detail {

namespace {
using ir::BinaryFn;
using ir::ReduceFn;
using ir::UnaryFn;

void check_float_pair(const DynTensor& a, const DynTensor& b, const char* layer) {
  EMBER_CHECK(a.kind() == Kind::Float && b.dtype() == a.dtype(),
              std::string(layer) + ": expected two float tensors of one dtype, got " +
                  name(a.dtype()) + " " + a.shape().to_string() + " and " + name(b.dtype()) + " " +
                  b.shape().to_string());
}
}  // namespace

DynTensor cosine_similarity(const DynTensor& a, const DynTensor& b, std::int64_t dim, double eps) {
  check_float_pair(a, b, "nn::CosineSimilarity");
  const Shape s = ops::broadcast_shapes(a.shape(), b.shape(), "nn::CosineSimilarity");
  const std::int64_t rank = std::int64_t(s.rank());
  EMBER_CHECK(dim >= -rank && dim < rank, "nn::CosineSimilarity: dim " + std::to_string(dim) +
                                              " out of range for shape " + s.to_string());
  const std::int64_t d = dim < 0 ? dim + rank : dim;
  const auto norm = [&](const DynTensor& x) {
    DynTensor n =
        ops::unary(UnaryFn::Sqrt, ops::reduce(ReduceFn::Sum, ops::unary(UnaryFn::Square, x), d));
    return ops::clamp(std::move(n), eps, std::nullopt);
  };
  DynTensor dot = ops::reduce(ReduceFn::Sum, ops::binary(BinaryFn::Mul, a, b), d);
  DynTensor den = ops::binary(BinaryFn::Mul, norm(ops::expand(a, s)), norm(ops::expand(b, s)));
  return ops::squeeze(ops::binary(BinaryFn::Div, std::move(dot), std::move(den)), d);
}

DynTensor pairwise_distance(const DynTensor& a, const DynTensor& b, double p, double eps,
                            bool keepdim) {
  check_float_pair(a, b, "nn::PairwiseDistance");
  EMBER_CHECK(p > 0, "nn::PairwiseDistance: p must be positive, got " + std::to_string(p));
  EMBER_CHECK(a.rank() >= 1, "nn::PairwiseDistance: expected rank >= 1 inputs");
  const std::int64_t last =
      std::int64_t(ops::broadcast_shapes(a.shape(), b.shape(), "nn::PairwiseDistance").rank()) - 1;
  DynTensor diff = ops::unary(
      UnaryFn::Abs, ops::binary_scalar(BinaryFn::Add, ops::binary(BinaryFn::Sub, a, b), eps));
  const auto norm = [&](DynTensor d) {
    if (std::isinf(p)) return ops::reduce(ReduceFn::Max, std::move(d), last);
    if (p == 1.0) return ops::reduce(ReduceFn::Sum, std::move(d), last);
    if (p == 2.0)
      return ops::unary(
          UnaryFn::Sqrt,
          ops::reduce(ReduceFn::Sum, ops::unary(UnaryFn::Square, std::move(d)), last));
    DynTensor s =
        ops::reduce(ReduceFn::Sum, ops::binary_scalar(BinaryFn::Pow, std::move(d), p), last);
    return ops::binary_scalar(BinaryFn::Pow, std::move(s), 1.0 / p);
  };
  DynTensor out = norm(std::move(diff));
  return keepdim ? out : ops::squeeze(std::move(out), last);
}

namespace {
void check_shuffle(const DynTensor& x, std::size_t r, bool up) {
  const char* layer = up ? "nn::PixelShuffle" : "nn::PixelUnshuffle";
  EMBER_CHECK(r > 0, std::string(layer) + ": the factor must be positive");
  EMBER_CHECK(x.rank() == 4,
              std::string(layer) + ": expected [N, C, H, W], got " + x.shape().to_string());
  if (up)
    EMBER_CHECK(x.shape()[1] % (r * r) == 0,
                std::string(layer) + ": channels " + std::to_string(x.shape()[1]) +
                    " must be divisible by the factor squared " + std::to_string(r * r));
  else
    EMBER_CHECK(x.shape()[2] % r == 0 && x.shape()[3] % r == 0,
                std::string(layer) + ": height and width of " + x.shape().to_string() +
                    " must be divisible by the factor " + std::to_string(r));
}
}  // namespace

DynTensor pixel_shuffle(const DynTensor& x, std::size_t r) {
  check_shuffle(x, r, true);
  const std::size_t n = x.shape()[0], c = x.shape()[1] / (r * r), h = x.shape()[2],
                    w = x.shape()[3];
  DynTensor y = ops::permute(ops::reshape(x, Shape{n, c, r, r, h, w}), {0, 1, 4, 2, 5, 3});
  return ops::reshape(std::move(y), Shape{n, c, h * r, w * r});
}

DynTensor pixel_unshuffle(const DynTensor& x, std::size_t r) {
  check_shuffle(x, r, false);
  const std::size_t n = x.shape()[0], c = x.shape()[1], h = x.shape()[2] / r, w = x.shape()[3] / r;
  DynTensor y = ops::permute(ops::reshape(x, Shape{n, c, h, r, w, r}), {0, 1, 3, 5, 2, 4});
  return ops::reshape(std::move(y), Shape{n, c * r * r, h, w});
}

}  // namespace detail

PairwiseDistance PairwiseDistanceConfig::init() const {
  EMBER_CHECK(p > 0, "nn::PairwiseDistanceConfig: p must be positive, got " + std::to_string(p));
  return PairwiseDistance{p, eps};
}

}  // namespace ember::nn
