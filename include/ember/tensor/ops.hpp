// The op library over DynTensor: every user-level function, validated here once and then
// built from IR ops (ember/ir/ops.hpp) or as a composite of other functions. Tensor<D, K>
// is a typed facade over these. Functions take tensors by value: pass an rvalue to let the
// backend reuse its buffer. Every function throws ember::Error naming itself, the shapes
// and what it expected when its input is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
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
// Host memory adopted as a tensor on `device` with no copy (Backend::adopt_host: contiguous,
// writable memory whose writes go nowhere else, valid while `owner` lives), or nothing
// where the device's backend cannot hold it (device memory, misaligned): then copy.
std::optional<DynTensor> adopt_host(std::byte* data, const Shape& shape, DType dtype,
                                    std::shared_ptr<const void> owner, const Device& device);
// A fresh contiguous tensor on `device` and its bytes in host memory, for the caller to fill
// (uninitialised: write every byte before using the tensor), or nothing where the device's
// tensors are not host memory: then build a TensorData and use from_data
// (Backend::empty_host, Note [Host access]).
struct HostWritable {
  DynTensor tensor;
  std::span<std::byte> bytes;
};
std::optional<HostWritable> empty_host(const Shape& shape, DType dtype, const Device& device);
// t's elements in host memory, contiguous, read in place (valid while t lives and no op
// writes it), or nothing where they are elsewhere or strided: then t.to_data() copies
// (Backend::host_data, Note [Host access]). A sync point, as to_data.
std::optional<std::span<const std::byte>> host_bytes(const DynTensor& t);
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
// torch.lerp with a scalar weight: start + weight * (end - start), computed from the end
// nearer to weight (end - (end - start) * (1 - weight) for |weight| >= 0.5) so that weight 1
// gives end exactly. start and end broadcast; float dtypes, one dtype.
DynTensor lerp(DynTensor start, DynTensor end, double weight);

// ---- reductions (dim reductions keep the dim; full reductions give rank 1) ----
DynTensor reduce(ir::ReduceFn fn, DynTensor x, std::int64_t dim);
DynTensor reduce_all(ir::ReduceFn fn, DynTensor x);
DynTensor var(DynTensor x, std::int64_t dim, std::size_t correction = 1);
std::pair<DynTensor, DynTensor> var_mean(DynTensor x, std::int64_t dim, std::size_t correction = 1);
// torch.logsumexp along dim (kept): log(sum(exp(x))), shifted by the line's maximum so that
// no exp overflows; a line of -inf (or an empty one) gives -inf, one with +inf gives +inf.
// Float dtypes. Its gradient is softmax(x) (the shift is detached).
DynTensor logsumexp(DynTensor x, std::int64_t dim);
std::pair<DynTensor, DynTensor> max_dim_with_indices(DynTensor x, std::int64_t dim);
std::pair<DynTensor, DynTensor> min_dim_with_indices(DynTensor x, std::int64_t dim);
DynTensor scan(ir::ScanFn fn, DynTensor x, std::int64_t dim);
DynTensor any(DynTensor x);
DynTensor all(DynTensor x);
// Reductions over several dims at once (fn Sum, Mean, Prod, Max, Min, Any or All), each
// kept with extent 1; dims may be negative, in any order, at least one and none twice. The
// _squeeze form removes the reduced dims. Mean divides the sum by the product of the
// reduced extents.
DynTensor reduce_dims(ir::ReduceFn fn, DynTensor x, const std::vector<std::int64_t>& dims);
DynTensor reduce_dims_squeeze(ir::ReduceFn fn, DynTensor x, const std::vector<std::int64_t>& dims);
// max(|x|), over everything (rank 1) or along dim (kept), as Burn's max_abs.
DynTensor max_abs(DynTensor x);
DynTensor max_abs_dim(DynTensor x, std::int64_t dim);
// torch.cummax / torch.cummin: the running extreme along dim and, as I64, the position it
// was taken from (the last position of a tie; a NaN propagates and its position is kept).
// Differentiable: the values are gathered from x at the indices.
std::pair<DynTensor, DynTensor> cummax_with_indices(DynTensor x, std::int64_t dim);
std::pair<DynTensor, DynTensor> cummin_with_indices(DynTensor x, std::int64_t dim);

// ---- searching and counting ----
// torch.searchsorted: for each value, the number of entries of sorted (ascending along its
// last dim) that are smaller (right: not greater), as I64 with values' shape. sorted is rank
// 1 (any values) or shares values' leading dims. A NaN value lies past every entry.
// Compares every value with every entry of its row (O(values * entries) work).
DynTensor searchsorted(DynTensor sorted, DynTensor values, bool right = false);
// torch.bucketize: searchsorted(boundaries, x, right), boundaries rank 1.
DynTensor bucketize(DynTensor x, DynTensor boundaries, bool right = false);
// torch.histc: counts of x's elements in `bins` equal bins over [min, max] (x's dtype,
// rank 1); elements outside and NaNs are left out, max falls in the last bin. min == max
// takes the data's range (widened by 1 each way when it is a single value). Float dtypes.
DynTensor histc(DynTensor x, std::size_t bins = 100, double min = 0, double max = 0);

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
// torch.movedim: the dims `source` moved to positions `destination` (same length, no
// repeats), the others keeping their order.
DynTensor movedim(DynTensor x, const std::vector<std::int64_t>& source,
                  const std::vector<std::int64_t>& destination);
// torch.roll: x shifted by shifts[i] (either sign) along dims[i], wrapping around; with no
// dims, x flattened is rolled by the one shift and keeps its shape.
DynTensor roll(DynTensor x, const std::vector<std::int64_t>& shifts,
               const std::vector<std::int64_t>& dims);

// ---- indexing ----
DynTensor select(DynTensor x, std::int64_t dim, DynTensor indices);  // index_select
DynTensor select_assign(DynTensor x, std::int64_t dim, DynTensor indices, DynTensor values);
DynTensor gather(DynTensor x, std::int64_t dim, DynTensor indices);
DynTensor scatter(DynTensor x, std::int64_t dim, DynTensor indices, DynTensor values);
DynTensor scatter_add(DynTensor x, std::int64_t dim, DynTensor indices, DynTensor values);
DynTensor one_hot(DynTensor indices, std::size_t num_classes, DType dtype);
// Burn's one_hot_fill: a new dim of num_classes at `axis` (in [-rank - 1, rank]), on_value
// at each index and off_value elsewhere, in dtype. Indices (int or float kind, truncated)
// lie in [-num_classes, num_classes); negative ones count from the end.
DynTensor one_hot_fill(DynTensor indices, std::size_t num_classes, double on_value,
                       double off_value, std::int64_t axis, DType dtype);
// torch.take: x read as if flattened, at indices (any shape, an int kind; negative ones
// count from the end), with indices' shape.
DynTensor take(DynTensor x, DynTensor indices);
DynTensor nonzero(DynTensor x);

// ---- compute ----
DynTensor matmul(DynTensor a, DynTensor b);
DynTensor softmax(DynTensor x, std::int64_t dim);
DynTensor log_softmax(DynTensor x, std::int64_t dim);

// softmax(-x) (torch.nn.functional.softmin).
DynTensor softmin(DynTensor x, std::int64_t dim);
// Burn's quiet_softmax (softmax1): exp(x_i) / (1 + sum_j exp(x_j)), computed shifted by
// max(0, max_j x_j) so that nothing overflows.
DynTensor quiet_softmax(DynTensor x, std::int64_t dim);

// ---- linear algebra (ops_linalg.cpp) ----
// torch.linalg.cross: the cross product along dim (extent 3 in both), broadcasting.
DynTensor cross(DynTensor a, DynTensor b, std::int64_t dim = -1);
// torch.diag: a rank-1 x becomes the square matrix with x on its `diagonal`-th diagonal
// (0 main, > 0 above, < 0 below); a rank-2 x gives that diagonal as rank 1.
DynTensor diag(DynTensor x, std::int64_t diagonal = 0);
// torch.diag_embed with its default dims: [..., n] -> [..., m, m], m = n + |offset|, the
// last dim of x on the offset-th diagonal of the last two.
DynTensor diag_embed(DynTensor x, std::int64_t offset = 0);
// torch.trace: the sum of a rank-2 tensor's main diagonal, rank 1 with one element.
DynTensor trace(DynTensor x);
// torch.linalg.vector_norm: ord inf: max |x|, -inf: min |x|, 0: the count of non-zeros,
// else (sum |x|^ord)^(1/ord); over every element (rank 1) or over dims (kept). Float
// dtypes. The gradient of the 2-norm of a zero vector is NaN (no subgradient is chosen).
DynTensor vector_norm(DynTensor x, double ord = 2.0);
DynTensor vector_norm(DynTensor x, double ord, const std::vector<std::int64_t>& dims);
// torch.linalg.svd(x, full_matrices=False) of each matrix of x [..., m, n] (float, rank
// >= 2): with k = min(m, n), U [..., m, k], S [..., k] (descending, >= 0), Vh [..., k, n],
// x = U diag(S) Vh (ir::Svd). The singular vectors are unique only up to sign, so only S
// carries a gradient (U diag(g) Vh); U and Vh are detached.
struct SvdResult {
  DynTensor u, s, vh;
};
SvdResult svd(DynTensor x);
// torch.linalg.svdvals: S alone.
DynTensor svdvals(DynTensor x);
// torch.linalg.matrix_norm over the last two dims (kept): Frobenius; One / NegOne: the
// largest / smallest column sum of |x|; Inf / NegInf: the largest / smallest row sum; Two /
// NegTwo: the largest / smallest singular value; Nuclear: their sum. Float dtypes, rank
// >= 2 (Two, NegTwo and Nuclear need at least one element per matrix).
enum class MatrixNorm { Frobenius, One, NegOne, Inf, NegInf, Two, NegTwo, Nuclear };
DynTensor matrix_norm(DynTensor x, MatrixNorm ord = MatrixNorm::Frobenius);

// ---- sampling (ops_sampling.cpp) ----
enum class GridSampleMode { Bilinear, Nearest };
enum class GridSamplePadding { Zeros, Border };
// torch.nn.functional.grid_sample over 2 spatial dims: input [N, C, H, W], grid
// [N, Ho, Wo, 2] of (x, y) in [-1, 1] (x along W) -> [N, C, Ho, Wo]. align_corners: -1 and 1
// are the centres of the corner pixels (else their outer edges). Zeros padding reads 0
// outside the image; border padding clamps the coordinates into it. Nearest rounds half to
// even. Float dtypes, input and grid of one dtype.
DynTensor grid_sample(DynTensor input, DynTensor grid,
                      GridSampleMode mode = GridSampleMode::Bilinear,
                      GridSamplePadding padding = GridSamplePadding::Zeros,
                      bool align_corners = false);

// ---- normalisation (module_ops::layer_norm is the typed front) ----
// torch.nn.functional.layer_norm: normalises x over its trailing dims, which must equal
// normalized_shape (at least one dim); weight and bias, when given, have exactly that
// shape and x's dtype and device. eps >= 0.
DynTensor layer_norm(DynTensor x, const Shape& normalized_shape, std::optional<DynTensor> weight,
                     std::optional<DynTensor> bias, double eps = 1e-5);
// torch.nn.functional.rms_norm: y = x / sqrt(mean(x^2) + eps) * weight over x's trailing
// dims, which must equal normalized_shape (at least one dim); weight, when given, has exactly
// that shape and x's dtype and device. eps >= 0; absent, the epsilon of x's dtype (as
// PyTorch's eps=None). One IR op (ir::RmsNorm) where the device's backend supports it, a
// composite elsewhere (16-bit floats computed in f32 there).
DynTensor rms_norm(DynTensor x, const Shape& normalized_shape, std::optional<DynTensor> weight,
                   std::optional<double> eps = std::nullopt);
// torch.nn.functional.group_norm: x [N, C, *] (rank >= 2, C a multiple of groups)
// normalised per sample over each group of C / groups channels and *; weight and bias,
// when given, [C] of x's dtype and device. One IR op (ir::GroupNorm, the affine inside)
// where the backend supports it, else batch norm's op over the groups and the affine after
// it, else layer norm over the groups (Note [Group norm's own op] in ops_norm.cpp).
DynTensor group_norm(DynTensor x, std::size_t groups, std::optional<DynTensor> weight,
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

// ---- attention (ops_attention.cpp; module_ops::scaled_dot_product_attention is the typed
// front) ----
// torch.nn.functional.scaled_dot_product_attention with dropout_p = 0: q [..., Lq, E],
// k [..., Lk, E], v [..., Lk, Ev] (one float dtype, batch dims broadcast) -> [..., Lq, Ev],
// softmax(scale q k^T + mask) v with scale 1 / sqrt(E) by default. attn_mask broadcasts to
// [..., Lq, Lk]: Bool (true: the key takes part) or q's dtype (added to the scores; not
// differentiated: it is recorded as detached). is_causal: key j takes part in query i only
// where j <= i (top-left aligned); not together with attn_mask. A row with no key taking
// part gives 0 (Note [Rows with every key masked] in ops_attention.cpp). One IR op
// (ir::Attention) where the device's backend supports it, a composite elsewhere.
DynTensor scaled_dot_product_attention(DynTensor q, DynTensor k, DynTensor v,
                                       std::optional<DynTensor> attn_mask = std::nullopt,
                                       bool is_causal = false,
                                       std::optional<double> scale = std::nullopt);

// ---- devices ----
DynTensor to_device(DynTensor x, const Device& device);

// Broadcast shape of two shapes (NumPy rules); throws naming `op` when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Normalises a possibly negative dim for a tensor of `rank`; throws naming `op`.
std::size_t normalize_dim(std::int64_t dim, std::size_t rank, const char* op);

}  // namespace ember::ops
