// Adaptive pooling, embedding and dropout (ember::module_ops): composites of matmul, select,
// max and a Bernoulli draw, so every backend runs them and their gradients come from those
// ops' rules. The nn layers (nn::AdaptiveAvgPool*, nn::AdaptiveMaxPool*, nn::Embedding,
// nn::Dropout) call the named forms.
#include <algorithm>
#include <cstdint>
#include <string>

#include "ember/tensor/module_ops.hpp"

namespace ember::module_ops {
namespace {

void check_pool(const DynTensor& x, const std::vector<std::size_t>& output, bool floats_only,
                const char* who) {
  const std::size_t n = output.size();
  EMBER_CHECK(n >= 1 && n <= 3,
              std::string(who) + ": expected 1 to 3 output sizes, got " + std::to_string(n));
  EMBER_CHECK(x.rank() == n + 2, std::string(who) + ": expected a rank-" + std::to_string(n + 2) +
                                     " input [batch, channels, " + std::to_string(n) +
                                     " spatial dims], got shape " + x.shape().to_string());
  EMBER_CHECK(!floats_only || x.kind() == Kind::Float,
              std::string(who) + ": expected a float input, got " + name(x.dtype()));
  for (std::size_t d = 0; d < n; ++d) {
    EMBER_CHECK(output[d] > 0 && x.shape()[2 + d] > 0,
                std::string(who) + ": output size " + Shape(output).to_string() + " and input " +
                    x.shape().to_string() + " must be non-empty");
  }
}

// Output i of a dim of `in` entries pooled to `out`: input [start, end).
std::size_t window_start(std::size_t i, std::size_t in, std::size_t out) { return i * in / out; }
std::size_t window_end(std::size_t i, std::size_t in, std::size_t out) {
  return ((i + 1) * in + out - 1) / out;
}

}  // namespace

namespace detail {

// Note [Adaptive average pooling]
// Output i of a dim averages input [floor(i in / out), ceil((i + 1) in / out)). A mean over a
// box is the product of per-dim means, so each dim is one matmul with an [out, in] matrix of
// 1 / window-length entries — exact windows for any in/out ratio, differentiable through
// matmul, and one op per dim whatever the sizes.
DynTensor adaptive_avg_pool(DynTensor x, const std::vector<std::size_t>& output, const char* who) {
  check_pool(x, output, true, who);
  const std::size_t n = output.size(), rank = x.rank();
  for (std::size_t d = 0; d < n; ++d) {
    const std::size_t in = x.shape()[2 + d], out = output[d];
    std::vector<double> p(out * in, 0.0);
    for (std::size_t i = 0; i < out; ++i) {
      const std::size_t start = window_start(i, in, out), end = window_end(i, in, out);
      for (std::size_t j = start; j < end; ++j) p[i * in + j] = 1.0 / double(end - start);
    }
    // Pool dim 2 + d: move it last, multiply by P^T [in, out], move it back.
    const std::int64_t axis = std::int64_t(2 + d), last = std::int64_t(rank - 1);
    DynTensor pt = ops::cast(
        ops::from_data(TensorData::from<double>(p, Shape{out, in}), x.device()), x.dtype());
    x = ops::swap_dims(ops::matmul(ops::swap_dims(std::move(x), axis, last), ops::transpose(pt)),
                       axis, last);
  }
  return x;
}

// Note [Adaptive max pooling]
// Max over a box is the max over each dim in turn, so each dim is pooled alone: its
// windows (the adaptive average's) are at most `width` long; every window is read as
// `width` indices, a short one repeating its last entry (which leaves the max unchanged),
// by one index_select, and a max over the window axis. A repeated entry shares the
// window's gradient with its copies (ember's max rule: g / count), and the select's
// adjoint adds the shares back up, so it receives g once.
DynTensor adaptive_max_pool(DynTensor x, const std::vector<std::size_t>& output, const char* who) {
  check_pool(x, output, false, who);
  const std::size_t n = output.size();
  for (std::size_t d = 0; d < n; ++d) {
    const std::size_t in = x.shape()[2 + d], out = output[d];
    std::size_t width = 0;
    for (std::size_t i = 0; i < out; ++i)
      width = std::max(width, window_end(i, in, out) - window_start(i, in, out));
    std::vector<std::int64_t> idx;
    idx.reserve(out * width);
    for (std::size_t i = 0; i < out; ++i) {
      const std::size_t start = window_start(i, in, out), end = window_end(i, in, out);
      for (std::size_t j = 0; j < width; ++j)
        idx.push_back(std::int64_t(std::min(start + j, end - 1)));
    }
    const auto axis = std::int64_t(2 + d);
    const Device dev = x.device();
    DynTensor taps =
        ops::select(std::move(x), axis,
                    ops::from_data(TensorData::from<std::int64_t>(idx, Shape{out * width}), dev));
    std::vector<std::size_t> dims(taps.shape().begin(), taps.shape().end());
    dims[2 + d] = out;
    dims.insert(dims.begin() + std::ptrdiff_t(3 + d), width);
    auto windows = ops::reshape(std::move(taps), Shape(dims));
    dims.erase(dims.begin() + std::ptrdiff_t(3 + d));
    x = ops::reshape(ops::reduce(ir::ReduceFn::Max, std::move(windows), std::int64_t(3 + d)),
                     Shape(dims));
  }
  return x;
}

DynTensor embedding(DynTensor weight, DynTensor ids, std::optional<std::int64_t> padding_idx,
                    const char* who) {
  EMBER_CHECK(weight.rank() == 2, std::string(who) +
                                      ": the weight must be [num_embeddings, "
                                      "embedding_dim], got shape " +
                                      weight.shape().to_string());
  EMBER_CHECK(ids.kind() == Kind::Int,
              std::string(who) + ": indices must be Int, got " + name(ids.dtype()));
  const std::size_t n = weight.shape()[0], d = weight.shape()[1];
  if (padding_idx) {
    const auto sn = std::int64_t(n);
    EMBER_CHECK(*padding_idx >= -sn && *padding_idx < sn,
                std::string(who) + ": padding_idx " + std::to_string(*padding_idx) + " outside [-" +
                    std::to_string(n) + ", " + std::to_string(n) + ")");
    if (*padding_idx < 0) *padding_idx += sn;
  }
  DynTensor flat = ops::reshape(ids, Shape{ids.num_elements()});
  if (flat.num_elements() > 0) {
    // One flag read back per call; the range is computed only to report a failure.
    const DynTensor ok =
        ops::binary(ir::BinaryFn::And, ops::binary_scalar(ir::BinaryFn::Ge, flat, 0.0),
                    ops::binary_scalar(ir::BinaryFn::Lt, flat, double(n)));
    if (ops::all(ok).to_data().get_f64(0) == 0.0) {
      const auto lo = ops::reduce_all(ir::ReduceFn::Min, flat).to_data().get_f64(0);
      const auto hi = ops::reduce_all(ir::ReduceFn::Max, flat).to_data().get_f64(0);
      fail(std::string(who) + ": indices of shape " + ids.shape().to_string() + " range over [" +
           std::to_string(std::int64_t(lo)) + ", " + std::to_string(std::int64_t(hi)) +
           "], outside [0, " + std::to_string(n) + ") for weight " + weight.shape().to_string());
    }
  }
  DynTensor rows = ops::select(std::move(weight), 0, flat);
  if (padding_idx) {
    DynTensor pad = ops::reshape(ops::binary_scalar(ir::BinaryFn::Eq, flat, double(*padding_idx)),
                                 Shape{flat.num_elements(), 1});
    rows = ops::mask_where(std::move(pad), ops::detach(rows), rows);
  }
  std::vector<std::size_t> out(ids.shape().begin(), ids.shape().end());
  out.push_back(d);
  return ops::reshape(std::move(rows), Shape(std::move(out)));
}

DynTensor dropout(DynTensor x, double p, bool training, const char* who) {
  EMBER_CHECK(p >= 0.0 && p <= 1.0,
              std::string(who) + ": the probability must be in [0, 1], got " + std::to_string(p));
  EMBER_CHECK(x.kind() == Kind::Float,
              std::string(who) + ": expected a float input, got " + name(x.dtype()));
  if (!training || p == 0.0) return x;
  if (p == 1.0) return ops::binary_scalar(ir::BinaryFn::Mul, std::move(x), 0.0);
  DynTensor keep = ops::random(x.shape(), Distribution::bernoulli(1.0 - p), x.dtype(), x.device());
  return ops::binary_scalar(ir::BinaryFn::Mul,
                            ops::binary(ir::BinaryFn::Mul, std::move(x), std::move(keep)),
                            1.0 / (1.0 - p));
}

}  // namespace detail

DynTensor dropout(DynTensor x, double p, bool training) {
  return detail::dropout(std::move(x), p, training, "dropout");
}
DynTensor adaptive_avg_pool(DynTensor x, const std::vector<std::size_t>& output) {
  return detail::adaptive_avg_pool(std::move(x), output, "adaptive_avg_pool");
}
DynTensor adaptive_max_pool(DynTensor x, const std::vector<std::size_t>& output) {
  return detail::adaptive_max_pool(std::move(x), output, "adaptive_max_pool");
}
DynTensor embedding(DynTensor weight, DynTensor ids, std::optional<std::int64_t> padding_idx) {
  return detail::embedding(std::move(weight), std::move(ids), padding_idx, "embedding");
}

}  // namespace ember::module_ops
