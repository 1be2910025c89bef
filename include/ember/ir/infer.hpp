// Shape and dtype inference of the IR ops: for every op struct, the shape and dtype of what
// it produces (out_shape, out_dtype) and the operand dtypes it is defined for (well_typed).
// This is the one place these rules live: the tensor layer validates user input and then
// builds ops with these functions (broadcast_shapes, matmul_shape, reduce_dtype, ...), and
// every backend allocates its outputs from out_shape / out_dtype. Backend::supports starts
// from well_typed. A struct added to ir::Op without its three functions fails to compile
// (the static_assert at the end).
//
// Each function assumes an op the tensor layer has validated (shapes consistent, dims in
// range), except broadcast_shapes and matmul_shape, which are the validation: they throw
// ember::Error naming `op` and the shapes.
#pragma once

#include <cstddef>
#include <vector>

#include "ember/ir/ops.hpp"

namespace ember::ir {

// ---- building blocks ----
// The NumPy broadcast of two shapes (ranks aligned at the right); throws naming op when an
// extent pair is neither equal nor has a 1.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// [..., m, k] x [..., k, n] -> [batch..., m, n], the batch dims (all but the last two,
// ranks aligned at the right) broadcast. Needs rank >= 2 and equal k (the caller checks);
// throws naming op when the batch dims do not broadcast.
Shape matmul_shape(const Shape& a, const Shape& b, const char* op);
// The number of window positions along a dim of extent `in`; needs
// in + 2 padding >= dilation (kernel - 1) + 1, so at least one position exists.
std::size_t window_positions(std::size_t in, std::size_t kernel, std::size_t stride,
                             std::size_t padding, std::size_t dilation);
// The window positions along each spatial dim, given the image's spatial extents.
std::vector<std::size_t> window_positions(const std::vector<std::size_t>& spatial, const Window& w);
// x with dim's extent 1 (what a reduction along dim keeps).
Shape reduced_shape(const Shape& x, std::size_t dim);
// The dtype of a reduction of x: I64 for the arg reductions, Bool for any / all, else x's.
DType reduce_dtype(ReduceFn fn, DType x);
// The shapes of xs (same rank, equal but along dim) joined along dim.
Shape cat_shape(const std::vector<Handle>& xs, std::size_t dim);

// ---- per op: output shape, output dtype, dtype rules ----
Shape out_shape(const Unary& op);
DType out_dtype(const Unary& op);
bool well_typed(const Unary& op);
Shape out_shape(const Binary& op);
DType out_dtype(const Binary& op);
bool well_typed(const Binary& op);
Shape out_shape(const Where& op);
DType out_dtype(const Where& op);
bool well_typed(const Where& op);
Shape out_shape(const Cast& op);
DType out_dtype(const Cast& op);
bool well_typed(const Cast& op);
Shape out_shape(const Reduce& op);
DType out_dtype(const Reduce& op);
bool well_typed(const Reduce& op);
Shape out_shape(const Scan& op);
DType out_dtype(const Scan& op);
bool well_typed(const Scan& op);
Shape out_shape(const Softmax& op);
DType out_dtype(const Softmax& op);
bool well_typed(const Softmax& op);
Shape out_shape(const LayerNorm& op);
DType out_dtype(const LayerNorm& op);
bool well_typed(const LayerNorm& op);
Shape out_shape(const Matmul& op);
DType out_dtype(const Matmul& op);
bool well_typed(const Matmul& op);
Shape out_shape(const Reshape& op);
DType out_dtype(const Reshape& op);
bool well_typed(const Reshape& op);
Shape out_shape(const Permute& op);
DType out_dtype(const Permute& op);
bool well_typed(const Permute& op);
Shape out_shape(const Expand& op);
DType out_dtype(const Expand& op);
bool well_typed(const Expand& op);
Shape out_shape(const Slice& op);
DType out_dtype(const Slice& op);
bool well_typed(const Slice& op);
Shape out_shape(const Flip& op);
DType out_dtype(const Flip& op);
bool well_typed(const Flip& op);
Shape out_shape(const SliceAssign& op);
DType out_dtype(const SliceAssign& op);
bool well_typed(const SliceAssign& op);
Shape out_shape(const Cat& op);
DType out_dtype(const Cat& op);
bool well_typed(const Cat& op);
Shape out_shape(const Gather& op);
DType out_dtype(const Gather& op);
bool well_typed(const Gather& op);
Shape out_shape(const Scatter& op);
DType out_dtype(const Scatter& op);
bool well_typed(const Scatter& op);
Shape out_shape(const IndexSelect& op);
DType out_dtype(const IndexSelect& op);
bool well_typed(const IndexSelect& op);
Shape out_shape(const IndexAdd& op);
DType out_dtype(const IndexAdd& op);
bool well_typed(const IndexAdd& op);
// Both outputs (values, indices) have x's shape.
Shape out_shape(const Sort& op);
// output 0: the values (x's dtype); output 1: the indices (I64).
DType out_dtype(const Sort& op, std::size_t output = 0);
bool well_typed(const Sort& op);
// [count, rank]: the number of non-zero elements is known only once the op runs.
Shape out_shape(const Nonzero& op, std::size_t count);
DType out_dtype(const Nonzero& op);
bool well_typed(const Nonzero& op);
Shape out_shape(const Fill& op);
DType out_dtype(const Fill& op);
bool well_typed(const Fill& op);
Shape out_shape(const Arange& op);
DType out_dtype(const Arange& op);
bool well_typed(const Arange& op);
Shape out_shape(const Random& op);
DType out_dtype(const Random& op);
bool well_typed(const Random& op);
// [N, C * prod(kernel), L].
Shape out_shape(const Unfold& op);
DType out_dtype(const Unfold& op);
bool well_typed(const Unfold& op);
// [N, C, *output] with C = dim 1 / prod(kernel).
Shape out_shape(const Fold& op);
DType out_dtype(const Fold& op);
bool well_typed(const Fold& op);
// [N, C, *window positions].
Shape out_shape(const Pool& op);
DType out_dtype(const Pool& op);
bool well_typed(const Pool& op);
// x's shape.
Shape out_shape(const MaxPoolGrad& op);
DType out_dtype(const MaxPoolGrad& op);
bool well_typed(const MaxPoolGrad& op);
// Per pass (ir::Conv): [N, O, *positions], [N, C, *image] or [O, C / groups, *kernel].
Shape out_shape(const Conv& op);
DType out_dtype(const Conv& op);
bool well_typed(const Conv& op);
// output 0: x's shape (y, dx); output 1: [2, C] (the statistics; dweight and dbias).
Shape out_shape(const BatchNorm& op, std::size_t output = 0);
DType out_dtype(const BatchNorm& op, std::size_t output = 0);
bool well_typed(const BatchNorm& op);
Shape out_shape(const BatchNormGrad& op, std::size_t output = 0);
DType out_dtype(const BatchNormGrad& op, std::size_t output = 0);
bool well_typed(const BatchNormGrad& op);

// output 0: S [..., k]; 1: U [..., m, k]; 2: Vh [..., k, n] (k = min(m, n)).
Shape out_shape(const Svd& op, std::size_t output = 0);
DType out_dtype(const Svd& op, std::size_t output = 0);
bool well_typed(const Svd& op);

// Attention: output 0 out [B..., Lq, Ev] (q's dtype); 1 lse [B..., Lq] (f64 for f64 q, else
// f32). AttentionGrad: dq, dk, dv (q's, k's, v's shapes; q's dtype).
Shape out_shape(const Attention& op, std::size_t output = 0);
DType out_dtype(const Attention& op, std::size_t output = 0);
bool well_typed(const Attention& op);
Shape out_shape(const AttentionGrad& op, std::size_t output = 0);
DType out_dtype(const AttentionGrad& op, std::size_t output = 0);
bool well_typed(const AttentionGrad& op);
// RmsNorm: y (x's shape and dtype). RmsNormGrad: output 0 dx (x's shape), 1 dweight (x's
// trailing `dims` dims); x's dtype.
Shape out_shape(const RmsNorm& op);
DType out_dtype(const RmsNorm& op);
bool well_typed(const RmsNorm& op);
Shape out_shape(const RmsNormGrad& op, std::size_t output = 0);
DType out_dtype(const RmsNormGrad& op, std::size_t output = 0);
bool well_typed(const RmsNormGrad& op);
// GroupNorm: output 0 y (x's shape), 1 the statistics [2, N * groups]. GroupNormGrad:
// output 0 dx (x's shape), 1 [2, C] (dweight, dbias). x's dtype throughout.
Shape out_shape(const GroupNorm& op, std::size_t output = 0);
DType out_dtype(const GroupNorm& op, std::size_t output = 0);
bool well_typed(const GroupNorm& op);
Shape out_shape(const GroupNormGrad& op, std::size_t output = 0);
DType out_dtype(const GroupNormGrad& op, std::size_t output = 0);
bool well_typed(const GroupNormGrad& op);
// The dtype of any op's output `output` (0 for a single-output op); not an out_dtype
// overload, which every op struct would convert to (and so look MultiOutput).
DType output_dtype(const Op& op, std::size_t output);

// Whether op's operand dtypes are ones it is defined for (its struct's rule).
bool well_typed(const Op& op);

// An op with several outputs (Sort: values and indices) states each output's dtype by its
// index; every other op has one output.
template <class T>
concept MultiOutput = requires(const T& op, std::size_t i) {
  { out_dtype(op, i) } -> std::same_as<DType>;
};

// Every op states its outputs and its dtype rule.
template <class T>
concept Described = requires(const T& op) {
  { out_dtype(op) } -> std::same_as<DType>;
  { well_typed(op) } -> std::same_as<bool>;
}
&&(
    requires(const T& op) {
      { out_shape(op) } -> std::same_as<Shape>;
    } ||
    requires(const T& op, std::size_t n) {
      { out_shape(op, n) } -> std::same_as<Shape>;
    });
// Whether op computes on operand values (is_arithmetic) and has a 16-bit float operand:
// the ops a backend without 16-bit arithmetic runs in f32, rounding float outputs back.
bool computes_widened(const Op& op);

namespace detail {
template <class V>
struct AllDescribed;
template <class... T>
struct AllDescribed<std::variant<T...>> {
  static constexpr bool value = (Described<T> && ...);
};
}  // namespace detail
static_assert(detail::AllDescribed<Op>::value,
              "every ir::Op alternative has out_shape, out_dtype and well_typed");

}  // namespace ember::ir
