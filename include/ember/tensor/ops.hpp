// The op library over DynTensor: every user-level function, validated here once and then
// built from IR ops (ember/ir/ops.hpp) or as a composite of other functions. Tensor<D, K>
// is a typed facade over these. Functions take tensors by value: pass an rvalue to let the
// backend reuse its buffer. Every function throws ember::Error naming itself, the shapes
// and what it expected when its input is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "ember/base/distribution.hpp"
#include "ember/tensor/dyn_tensor.hpp"

namespace ember::ops {

// A [start, end) range of a dim; negative values count from the end, as Python's.
// end = nullopt means the dim's end.
struct Range {
  std::int64_t start = 0;
  std::optional<std::int64_t> end;
  std::int64_t step = 1;
  Range() = default;
  Range(std::int64_t s, std::optional<std::int64_t> e, std::int64_t st = 1)
      : start(s), end(e), step(st) {}
  Range(std::initializer_list<std::int64_t> se);  // {start, end}
};

enum class PadMode { Constant, Reflect, Edge };

// ---- creation ----
DynTensor from_data(const TensorData& data, const Device& device);
DynTensor full(const Shape& shape, double value, DType dtype, const Device& device);
DynTensor zeros(const Shape& shape, DType dtype, const Device& device);
DynTensor ones(const Shape& shape, DType dtype, const Device& device);
DynTensor empty(const Shape& shape, DType dtype, const Device& device);
DynTensor arange(double start, double end, double step, DType dtype, const Device& device);
DynTensor linspace(double start, double end, std::size_t n, DType dtype, const Device& device);
DynTensor eye(std::size_t n, DType dtype, const Device& device);
DynTensor random(const Shape& shape, const Distribution& dist, DType dtype, const Device& device);
// Bool masks of a [rows, cols] matrix: true where j - i > offset (triu_mask) or
// j - i < offset (tril_mask) — the entries to mask out, as Burn.
DynTensor triu_mask(const Shape& shape, std::int64_t offset, const Device& device);
DynTensor tril_mask(const Shape& shape, std::int64_t offset, const Device& device);
DynTensor tril(DynTensor x, std::int64_t diagonal = 0);
DynTensor triu(DynTensor x, std::int64_t diagonal = 0);

// ---- element-wise ----
DynTensor unary(ir::UnaryFn fn, DynTensor x, double p0 = 0, double p1 = 0);
DynTensor binary(ir::BinaryFn fn, DynTensor a, DynTensor b);
DynTensor binary_scalar(ir::BinaryFn fn, DynTensor a, double s);   // a op s
DynTensor rbinary_scalar(ir::BinaryFn fn, double s, DynTensor a);  // s op a
DynTensor cast(DynTensor x, DType to);
DynTensor clamp(DynTensor x, std::optional<double> min, std::optional<double> max);
DynTensor mask_where(DynTensor mask, DynTensor value, DynTensor x);  // mask ? value : x
DynTensor mask_fill(DynTensor x, DynTensor mask, double value);      // mask ? value : x
DynTensor powi(DynTensor x, std::int64_t n);

// ---- reductions (dim reductions keep the dim; full reductions give rank 1) ----
DynTensor reduce(ir::ReduceFn fn, DynTensor x, std::int64_t dim);
DynTensor reduce_all(ir::ReduceFn fn, DynTensor x);
DynTensor var(DynTensor x, std::int64_t dim, std::size_t correction = 1);
std::pair<DynTensor, DynTensor> var_mean(DynTensor x, std::int64_t dim, std::size_t correction = 1);
std::pair<DynTensor, DynTensor> max_dim_with_indices(DynTensor x, std::int64_t dim);
std::pair<DynTensor, DynTensor> min_dim_with_indices(DynTensor x, std::int64_t dim);
DynTensor scan(ir::ScanFn fn, DynTensor x, std::int64_t dim);
DynTensor any(DynTensor x);
DynTensor all(DynTensor x);

// ---- sorting ----
std::pair<DynTensor, DynTensor> sort_with_indices(DynTensor x, std::int64_t dim,
                                                  bool descending = false);
DynTensor sort(DynTensor x, std::int64_t dim, bool descending = false);
DynTensor argsort(DynTensor x, std::int64_t dim, bool descending = false);
std::pair<DynTensor, DynTensor> topk_with_indices(DynTensor x, std::size_t k, std::int64_t dim);
DynTensor topk(DynTensor x, std::size_t k, std::int64_t dim);

// ---- layout ----
DynTensor reshape(DynTensor x, const std::vector<std::int64_t>& shape);  // one -1 allowed
DynTensor reshape(DynTensor x, const Shape& shape);
DynTensor permute(DynTensor x, const std::vector<std::int64_t>& axes);
DynTensor swap_dims(DynTensor x, std::int64_t d0, std::int64_t d1);
DynTensor transpose(DynTensor x);  // swaps the last two dims
DynTensor flip(DynTensor x, const std::vector<std::int64_t>& axes);
DynTensor expand(DynTensor x, const Shape& shape);  // NumPy broadcast to shape
DynTensor repeat(DynTensor x, const std::vector<std::size_t>& times);
DynTensor repeat_dim(DynTensor x, std::int64_t dim, std::size_t times);
DynTensor squeeze(DynTensor x, std::int64_t dim);  // dim must have extent 1
DynTensor squeeze_all(DynTensor x);
DynTensor unsqueeze(DynTensor x, std::int64_t dim);
DynTensor flatten(DynTensor x, std::int64_t start_dim, std::int64_t end_dim);
DynTensor narrow(DynTensor x, std::int64_t dim, std::int64_t start, std::size_t length);
DynTensor slice(DynTensor x, const std::vector<Range>& ranges);  // leading dims; rest whole
DynTensor slice_assign(DynTensor x, const std::vector<Range>& ranges, DynTensor value);
DynTensor slice_fill(DynTensor x, const std::vector<Range>& ranges, double value);
DynTensor cat(std::vector<DynTensor> xs, std::int64_t dim);
DynTensor stack(std::vector<DynTensor> xs, std::int64_t dim);
std::vector<DynTensor> split(DynTensor x, std::size_t split_size, std::int64_t dim);
std::vector<DynTensor> split_sizes(DynTensor x, const std::vector<std::size_t>& sizes,
                                   std::int64_t dim);
std::vector<DynTensor> chunk(DynTensor x, std::size_t chunks, std::int64_t dim);
// pads[i] = (before, after) for the LAST pads.size() dims, innermost last.
DynTensor pad(DynTensor x, const std::vector<std::pair<std::size_t, std::size_t>>& pads,
              PadMode mode = PadMode::Constant, double value = 0.0);

// ---- indexing ----
DynTensor select(DynTensor x, std::int64_t dim, DynTensor indices);  // index_select
DynTensor select_assign(DynTensor x, std::int64_t dim, DynTensor indices, DynTensor values);
DynTensor gather(DynTensor x, std::int64_t dim, DynTensor indices);
DynTensor scatter(DynTensor x, std::int64_t dim, DynTensor indices, DynTensor values);
DynTensor scatter_add(DynTensor x, std::int64_t dim, DynTensor indices, DynTensor values);
DynTensor one_hot(DynTensor indices, std::size_t num_classes, DType dtype);
DynTensor nonzero(DynTensor x);

// ---- compute ----
DynTensor matmul(DynTensor a, DynTensor b);
DynTensor softmax(DynTensor x, std::int64_t dim);
DynTensor log_softmax(DynTensor x, std::int64_t dim);

// ---- normalisation (module_ops::layer_norm is the typed front) ----
// torch.nn.functional.layer_norm: normalises x over its trailing dims, which must equal
// normalized_shape (at least one dim); weight and bias, when given, have exactly that
// shape and x's dtype and device. eps >= 0.
DynTensor layer_norm(DynTensor x, const Shape& normalized_shape, std::optional<DynTensor> weight,
                     std::optional<DynTensor> bias, double eps = 1e-5);
// torch.nn.functional.batch_norm with training=True, less the running statistics: x
// [N, C, *] (rank >= 2, at least one value per channel) normalised per channel by its
// batch mean and biased variance; weight and bias, when given, [C] of x's dtype and
// device. Also returns those statistics ([C] each, detached: no gradient flows through
// them), from which nn::BatchNorm updates its running statistics. One IR op
// (ir::BatchNorm) where the device's backend supports it, a composite elsewhere.
struct BatchNormResult {
  DynTensor y, mean, var;
};
BatchNormResult batch_norm_training(DynTensor x, std::optional<DynTensor> weight,
                                    std::optional<DynTensor> bias, double eps = 1e-5);

// ---- devices ----
DynTensor to_device(DynTensor x, const Device& device);

// Broadcast shape of two shapes (NumPy rules); throws naming `op` when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Normalises a possibly negative dim for a tensor of `rank`; throws naming `op`.
std::size_t normalize_dim(std::int64_t dim, std::size_t rank, const char* op);

}  // namespace ember::ops
