// The op IR: the contract between the tensor API and every backend and decorator.
//
// Each core op is one plain struct: its operands (tensor handles), its scalar attributes
// and what the caller already decided about its output (dtype, shape where not obvious).
// The tensor layer validates every op before building it, so a backend may assume well-
// formed input. Element-wise function families (UnaryFn, BinaryFn) are enumerations whose
// scalar definitions live once, in ir/scalar_table.hpp; everything else in the user API is
// a composite of these ops.
//
// Each struct describes itself: its name, its class (what Fusion and Autodiff go by),
// whether it computes on its operands' values, and its operand handles (traits below,
// checked by the OpStruct concept); its output shapes, dtypes and dtype rules are in
// ir/infer.hpp. Every list over ops (OpKind, names, classes, operands) is derived from
// EMBER_IR_OPS and these traits, so none can miss an op.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "ember/base/distribution.hpp"
#include "ember/base/dtype.hpp"
#include "ember/base/shape.hpp"

namespace ember::ir {

// A tensor as an operand. Backends subclass it with their storage; the last reference
// dying is the drop event (the destructor), which lets a backend reuse or free memory and
// tells a decorator an intermediate is dead.
class TensorNode {
 public:
  TensorNode(Shape shape, DType dtype) : shape_(std::move(shape)), dtype_(dtype) {}
  TensorNode(const TensorNode&) = delete;
  TensorNode& operator=(const TensorNode&) = delete;
  virtual ~TensorNode() = default;
  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  // The decorator backend whose handle this is (its `this`), for a decorator to recognise
  // its own handles without RTTI; null for a backend's own tensors.
  virtual const void* decorator() const { return nullptr; }

 protected:
  Shape shape_;
  DType dtype_;
};
using Handle = std::shared_ptr<TensorNode>;

namespace detail {
// The operand slots of an op struct (its handles()): pointers to its Handle members,
// const when the op is.
template <class... H>
constexpr auto refs(H&... h) {
  return std::array<std::common_type_t<H*...>, sizeof...(H)>{&h...};
}
template <class Self>
constexpr auto no_refs(Self&) {
  return std::array<std::conditional_t<std::is_const_v<Self>, const Handle, Handle>*, 0>{};
}
}  // namespace detail

enum class OpClass : std::uint8_t { ElementWise, Reduction, View, DataMovement, Compute, Creation };
const char* name(OpClass c);  // "element-wise", "reduction", ...

// Element-wise functions of one operand. p0/p1 of Unary carry parameters where noted.
enum class UnaryFn : std::uint8_t {
  Neg,
  Abs,
  Sign,
  Recip,
  Square,
  Sqrt,
  Rsqrt,
  Exp,
  Log,
  Log1p,
  Expm1,
  Sin,
  Cos,
  Tan,
  Sinh,
  Cosh,
  Tanh,
  Asin,
  Acos,
  Atan,
  Asinh,
  Acosh,
  Atanh,
  Erf,
  Erfc,  // 1 - erf(x), without the cancellation for large x
  Floor,
  Ceil,
  Round,
  Trunc,
  Deg2Rad,
  Rad2Deg,
  Relu,
  Sigmoid,
  Gelu,
  GeluTanh,
  Silu,
  Softplus,
  Mish,
  LeakyRelu,  // p0 = negative slope
  Elu,        // p0 = alpha
  Clamp,      // p0 = min, p1 = max (floats: NaN = no bound; ints: within the dtype's range)
  PowScalar,  // x ^ p0
  IsNan,
  IsInf,
  IsFinite,    // -> Bool
  LogicalNot,  // Bool -> Bool
  BitNot,      // ints
  Count_
};
// Element-wise functions of two operands, broadcasting as NumPy.
enum class BinaryFn : std::uint8_t {
  Add,
  Sub,
  Mul,
  Div,
  Rem,
  Pow,
  Atan2,
  Hypot,
  LogAddExp,
  XLogY,  // x * log(y), 0 where x = 0 (unless y is NaN)
  Max,
  Min,
  Eq,
  Ne,
  Gt,
  Ge,
  Lt,
  Le,  // -> Bool
  And,
  Or,
  Xor,  // Bool
  BitAnd,
  BitOr,
  BitXor,
  Shl,
  Shr,  // ints
  Count_
};
enum class ReduceFn : std::uint8_t { Sum, Prod, Mean, Max, Min, ArgMax, ArgMin, Any, All, Count_ };
enum class ScanFn : std::uint8_t { Sum, Prod, Max, Min, Count_ };
enum class PoolFn : std::uint8_t { Max, Sum, Count_ };
// The three products of a convolution (ir::Conv).
enum class ConvPass : std::uint8_t { Forward, InputGrad, WeightGrad, Count_ };

const char* name(UnaryFn f);
const char* name(BinaryFn f);
const char* name(ReduceFn f);
const char* name(ScanFn f);
const char* name(PoolFn f);
const char* name(ConvPass p);

struct SliceRange {
  std::size_t start = 0, end = 0, step = 1;  // validated: start <= end <= dim, step >= 1
};

// ---- element-wise ----
struct Unary {
  static constexpr const char* kName = "Unary";
  static constexpr OpClass kClass = OpClass::ElementWise;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x); }
  UnaryFn fn;
  Handle x;
  DType out;  // x's dtype, or Bool for predicates
  double p0 = 0, p1 = 0;
};
struct Binary {
  static constexpr const char* kName = "Binary";
  static constexpr OpClass kClass = OpClass::ElementWise;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.lhs, self.rhs); }
  BinaryFn fn;
  Handle lhs, rhs;  // same dtype; shapes broadcast to out_shape (same rank)
  Shape out_shape;
  DType out;  // operand dtype, or Bool for comparisons
};
struct Where {  // cond ? a : b, broadcast to out_shape (same rank)
  static constexpr const char* kName = "Where";
  static constexpr OpClass kClass = OpClass::ElementWise;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.cond, self.a, self.b); }
  Handle cond, a, b;
  Shape out_shape;
};
struct Cast {
  static constexpr const char* kName = "Cast";
  static constexpr OpClass kClass = OpClass::ElementWise;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
  DType to;
};
// ---- reductions (the reduced dim stays, with extent 1) ----
struct Reduce {
  static constexpr const char* kName = "Reduce";
  static constexpr OpClass kClass = OpClass::Reduction;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x); }
  ReduceFn fn;
  Handle x;
  std::size_t dim;
  DType out;  // Arg*: I64; Any/All: Bool; else x's dtype
};
struct Scan {  // inclusive prefix along dim
  static constexpr const char* kName = "Scan";
  static constexpr OpClass kClass = OpClass::Reduction;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x); }
  ScanFn fn;
  Handle x;
  std::size_t dim;
};
// Softmax (or log-softmax) along dim: one op rather than a composite, so a backend can
// make it one pass over each row.
struct Softmax {
  static constexpr const char* kName = "Softmax";
  static constexpr OpClass kClass = OpClass::Reduction;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
  std::size_t dim;
  bool log;
};
// Layer normalisation over the trailing `dims` dims of x, as torch.nn.functional.layer_norm:
// y = (x - mean) / sqrt(var + eps) * weight + bias with the biased variance, over each
// "row" of the trailing dims' elements. weight and bias are optional (null when absent;
// handles() keeps their slots); when present their shape is x's trailing `dims`
// dims. One op rather than a composite, so a backend can make it one or two passes over
// each row.
struct LayerNorm {
  static constexpr const char* kName = "LayerNorm";
  static constexpr OpClass kClass = OpClass::Reduction;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x, self.weight, self.bias); }
  Handle x;
  Handle weight, bias;
  std::size_t dims;
  double eps;
};
// ---- compute ----
// [..., m, k] x [..., k, n] -> out_shape [..., m, n] (ir::matmul_shape); batch dims
// broadcast; float dtypes.
struct Matmul {
  static constexpr const char* kName = "Matmul";
  static constexpr OpClass kClass = OpClass::Compute;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.a, self.b); }
  Handle a, b;
  Shape out_shape;
};
// ---- views (no data movement where the backend supports strides) ----
struct Reshape {  // x must be contiguous-compatible or the backend copies
  static constexpr const char* kName = "Reshape";
  static constexpr OpClass kClass = OpClass::View;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
  Shape shape;
};
struct Permute {
  static constexpr const char* kName = "Permute";
  static constexpr OpClass kClass = OpClass::View;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
  std::vector<std::size_t> axes;
};
struct Expand {  // same rank; dims of extent 1 grow to shape
  static constexpr const char* kName = "Expand";
  static constexpr OpClass kClass = OpClass::View;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
  Shape shape;
};
struct Slice {
  static constexpr const char* kName = "Slice";
  static constexpr OpClass kClass = OpClass::View;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
  std::vector<SliceRange> ranges;  // one per dim
};
struct Flip {
  static constexpr const char* kName = "Flip";
  static constexpr OpClass kClass = OpClass::View;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
  std::vector<std::size_t> axes;
};
// ---- data movement ----
struct SliceAssign {  // copy of x with x[ranges] = value (value has the slice's shape)
  static constexpr const char* kName = "SliceAssign";
  static constexpr OpClass kClass = OpClass::DataMovement;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::refs(self.x, self.value); }
  Handle x;
  std::vector<SliceRange> ranges;
  Handle value;
};
struct Cat {
  static constexpr const char* kName = "Cat";
  static constexpr OpClass kClass = OpClass::DataMovement;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return std::span(self.xs); }
  std::vector<Handle> xs;
  std::size_t dim;
  Shape out_shape;
};
struct Gather {  // out[i..] = x[.., index[i..], ..] along dim; index I64 with out's shape
  static constexpr const char* kName = "Gather";
  static constexpr OpClass kClass = OpClass::DataMovement;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::refs(self.x, self.index); }
  Handle x;
  std::size_t dim;
  Handle index;
};
struct Scatter {  // copy of x with x[.., index[i], ..] = (or +=) src[i] along dim
  static constexpr const char* kName = "Scatter";
  static constexpr OpClass kClass = OpClass::DataMovement;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x, self.index, self.src); }
  Handle x;
  std::size_t dim;
  Handle index, src;
  bool add;
};
struct IndexSelect {  // out = x with dim taken at index (rank-1 I64)
  static constexpr const char* kName = "IndexSelect";
  static constexpr OpClass kClass = OpClass::DataMovement;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::refs(self.x, self.index); }
  Handle x;
  std::size_t dim;
  Handle index;
};
struct IndexAdd {  // copy of x with x.select(dim, index[i]) += src.select(dim, i)
  static constexpr const char* kName = "IndexAdd";
  static constexpr OpClass kClass = OpClass::DataMovement;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x, self.index, self.src); }
  Handle x;
  std::size_t dim;
  Handle index, src;
};
struct Sort {  // stable; NaN sorts as largest. Outputs: values, I64 indices
  static constexpr const char* kName = "Sort";
  static constexpr OpClass kClass = OpClass::Compute;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
  std::size_t dim;
  bool descending;
};
struct Nonzero {  // -> I64 [count, rank] of the coordinates of non-zero elements
  static constexpr const char* kName = "Nonzero";
  static constexpr OpClass kClass = OpClass::DataMovement;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
};
// ---- sliding windows (convolution and pooling are composites of these) ----
// A window sliding over the spatial dims of an image [N, C, *spatial] (1 to 3 spatial
// dims): one entry per spatial dim in each vector; kernel, stride and dilation >= 1.
struct Window {
  std::vector<std::size_t> kernel, stride, padding, dilation;
};
// im2col: [N, C, *spatial] -> [N, C * prod(kernel), L], L = prod(window positions). Row
// c * prod(kernel) + k holds channel c at kernel offset k (row-major over the kernel dims)
// for every window position l (row-major); positions in the padding read pad_value
// (-inf for max pooling). torch.nn.functional.unfold's layout for 2 spatial dims.
struct Unfold {
  static constexpr const char* kName = "Unfold";
  static constexpr OpClass kClass = OpClass::DataMovement;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
  Window window;
  double pad_value = 0;
};
// col2im, the adjoint of Unfold (pad_value 0): [N, C * prod(kernel), L] -> [N, C, *output],
// each output element the sum of every column entry that Unfold would have read from it.
struct Fold {
  static constexpr const char* kName = "Fold";
  static constexpr OpClass kClass = OpClass::DataMovement;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
  std::vector<std::size_t> output;  // the spatial extents; L must match their positions
  Window window;
};
// Pooling without the im2col matrix: the max (fn Max) or the sum (fn Sum) of each window
// position's entries, [N, C, *spatial] -> [N, C, *positions]. Entries in the padding are
// left out (as -inf for max and 0 for sum would be); the tensor layer keeps padding at most
// half the kernel, so every window holds an image entry. Every dtype but bool.
struct Pool {
  static constexpr const char* kName = "Pool";
  static constexpr OpClass kClass = OpClass::Reduction;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
  Window window;
  PoolFn fn;
};
// The gradient of max pooling (Pool Max) in its input: each window position's g shared
// equally by the window's entries equal to y, the pooled output (as Unfold padded with -inf
// and a max reduction would share it), summed onto the image: x [N, C, *spatial], y and g
// [N, C, *positions] -> [N, C, *spatial]. Float dtypes. The autodiff rule of Pool Max runs
// it where the backend supports it, and the composite of Unfold, Eq and Fold elsewhere.
struct MaxPoolGrad {
  static constexpr const char* kName = "MaxPoolGrad";
  static constexpr OpClass kClass = OpClass::DataMovement;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x, self.y, self.g); }
  Handle x, y, g;
  Window window;
};
// Convolution without the column matrix, and its two adjoints, all over the window of
// Unfold (stride, padding, dilation) and `groups` (C and O multiples of it; weight
// [O, C / groups, *kernel], window.kernel its spatial extents):
//   Forward:    x = image [N, C, *in], w = weight      -> [N, O, *positions]
//               y[n, o, l] = sum over c of group(o), k: w[o, c, k] * unfold(x)[n, c k, l];
//   InputGrad:  x = g [N, O, *positions], w = weight  -> [N, C, *image] (x's gradient,
//               the adjoint of Forward in x; `image` holds the input's spatial extents);
//   WeightGrad: x = image [N, C, *in], w = g [N, O, *positions] -> [O, C / groups, *kernel]
//               (the weight's gradient, summed over N: the adjoint of Forward in w).
// Float dtypes, both operands of one dtype. The tensor layer builds it only where the
// device's backend supports it, and convolves by Unfold and Matmul elsewhere.
struct Conv {
  static constexpr const char* kName = "Conv";
  static constexpr OpClass kClass = OpClass::Compute;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x, self.w); }
  Handle x, w;
  Window window;
  std::size_t groups = 1;
  ConvPass pass = ConvPass::Forward;
  std::vector<std::size_t> image;  // InputGrad: the input's spatial extents
};
// Batch normalisation in training mode, as torch.nn.functional.batch_norm with
// training=True: over x [N, C, *] (rank >= 2), per channel c the batch mean and biased
// variance of x[:, c] (N * prod(*) >= 1 values), y = (x - mean) / sqrt(var + eps) * weight
// + bias with weight and bias [C] optional (null when absent; handles() keeps their slots).
// Two outputs: y (x's shape and dtype) and the statistics [2, C] (row 0 the means, row 1
// the biased variances; x's dtype), from which the caller updates running statistics.
// The statistics output is not differentiated (the Autodiff decorator records it as
// detached); y's gradient in x goes through the statistics. One op rather than a
// composite, so a backend can read each channel once for the statistics and once to write.
struct BatchNorm {
  static constexpr const char* kName = "BatchNorm";
  static constexpr OpClass kClass = OpClass::Reduction;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x, self.weight, self.bias); }
  Handle x;
  Handle weight, bias;
  double eps;
};
// The gradient of BatchNorm's y in its operands, in closed form: with xhat = (x - mean)
// rstd, rstd = 1 / sqrt(var + eps) and M = N * prod(*) values per channel,
//   dx = weight rstd (g - sum(g) / M - xhat sum(g xhat) / M),
//   dweight = sum(g xhat), dbias = sum(g)   (sums over N and *, per channel).
// x [N, C, *], weight [C] (optional: taken as ones), stats [2, C] (BatchNorm's second
// output for this x and eps), g of x's shape. Two outputs: dx (x's shape) and [2, C]
// (row 0 dweight, row 1 dbias); x's dtype throughout. BatchNorm's derivative rule runs it
// where the backend supports it, and a composite of element-wise ops and reductions
// elsewhere.
struct BatchNormGrad {
  static constexpr const char* kName = "BatchNormGrad";
  static constexpr OpClass kClass = OpClass::Reduction;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x, self.weight, self.stats, self.g); }
  Handle x, weight, stats, g;
  double eps;
};
// RMS normalisation over the trailing `dims` dims of x, as torch.nn.functional.rms_norm:
// y = x / sqrt(mean(x^2) + eps) * weight over each "row" of the trailing dims' elements
// (f32 sums for 16-bit x, f64 for f64). weight is optional (null when absent; handles()
// keeps its slot); when present its shape is x's trailing `dims` dims. One op rather than a
// composite (square, mean, rsqrt, two multiplies), so a backend reads each row once for its
// sum and once to write.
struct RmsNorm {
  static constexpr const char* kName = "RmsNorm";
  static constexpr OpClass kClass = OpClass::Reduction;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x, self.weight); }
  Handle x;
  Handle weight;
  std::size_t dims;
  double eps;
};
// The gradient of RmsNorm's y in x and weight, in closed form: per row of n elements,
// with rstd = 1 / sqrt(mean(x^2) + eps), xhat = x rstd and gw = g weight,
//   dx = rstd (gw - xhat mean(gw xhat)),   dweight = sum over rows of g xhat.
// rstd is recomputed from x (Note [RMS norm recomputes rstd] in src/cpu/kernels/norm.cpp).
// Two outputs: dx (x's shape) and dweight (the trailing `dims` dims; computed whether or
// not weight is given); x's dtype, g of x's shape and dtype.
struct RmsNormGrad {
  static constexpr const char* kName = "RmsNormGrad";
  static constexpr OpClass kClass = OpClass::Reduction;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x, self.weight, self.g); }
  Handle x, weight, g;
  std::size_t dims;
  double eps;
};
// Group normalisation, as torch.nn.functional.group_norm: x [N, C, *] (rank >= 2, C a
// multiple of groups), per sample and group of C / groups channels the mean and biased
// variance over those channels and *, y = (x - mean) / sqrt(var + eps) * weight[c] +
// bias[c] with weight and bias [C] optional (null when absent). Two outputs: y and the
// statistics [2, N * groups] (row 0 the means, row 1 the biased variances, sample-major;
// x's dtype; not differentiated, as BatchNorm's). One op (Note [Group norm's own op] in
// src/nn/norm.cpp): the per-channel affine inside the writing pass.
struct GroupNorm {
  static constexpr const char* kName = "GroupNorm";
  static constexpr OpClass kClass = OpClass::Reduction;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x, self.weight, self.bias); }
  Handle x;
  Handle weight, bias;
  std::size_t groups;
  double eps;
};
// The gradient of GroupNorm's y, in closed form: per sample and group of M values, with
// gw = g weight[c], dx = rstd (gw - sum(gw) / M - xhat sum(gw xhat) / M); per channel,
// dweight = sum(g xhat), dbias = sum(g) over N and *. stats is GroupNorm's second output
// for this x and eps. Two outputs: dx (x's shape) and [2, C] (row 0 dweight, row 1 dbias).
struct GroupNormGrad {
  static constexpr const char* kName = "GroupNormGrad";
  static constexpr OpClass kClass = OpClass::Reduction;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x, self.weight, self.stats, self.g); }
  Handle x, weight, stats, g;
  std::size_t groups;
  double eps;
};
// The reduced singular value decomposition of each matrix of x [..., m, n] (a float dtype):
// with k = min(m, n), three outputs S [..., k] (descending, >= 0), U [..., m, k] and
// Vh [..., k, n], x = U diag(S) Vh. Singular vectors are unique only up to sign (and within
// repeated values), so S is the differentiable output; U and Vh are recorded as detached.
struct Svd {
  static constexpr const char* kName = "Svd";
  static constexpr OpClass kClass = OpClass::Compute;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.x); }
  Handle x;
};
// Scaled dot-product attention, as torch.nn.functional.scaled_dot_product_attention with
// dropout_p = 0, over batch dims B... that q, k and v share (rank >= 2, one float dtype):
//   q [B..., Lq, E], k [B..., Lk, E], v [B..., Lk, Ev];
//   S = scale q k^T, plus the mask where it is a float tensor; key j takes part in query
//   i's row only where a Bool mask is true and, when causal, j <= i (top-left aligned);
//   out = softmax(S over the keys that take part) v.
// The mask is optional (null when absent; handles() keeps its slot): rank q's, each extent
// [B..., Lq, Lk]'s or 1 (broadcast), Bool or q's dtype. Two outputs: out [B..., Lq, Ev]
// (q's dtype) and lse [B..., Lq], the log-sum-exp of each row of S over the keys that take
// part (f64 for f64 q, else f32), from which AttentionGrad recomputes the softmax. A row
// with no key taking part has lse -inf and out NaN (Note [Rows with every key masked] in
// tensor/ops_attention.cpp). One op rather than a composite, so that a backend can stream
// blocks of keys past blocks of queries and never hold S.
struct Attention {
  static constexpr const char* kName = "Attention";
  static constexpr OpClass kClass = OpClass::Compute;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) { return detail::refs(self.q, self.k, self.v, self.mask); }
  Handle q, k, v;
  Handle mask;
  bool causal = false;
  double scale = 1.0;
};
// The gradient of Attention's out in q, k and v, recomputing the softmax from lse (the
// backward of FlashAttention-2): with P = exp(S - lse) over the keys that take part (0
// elsewhere), D = rowsum(g o y), dP = g v^T and dS = P o (dP - D),
//   dq = scale dS k,   dk = scale dS^T q,   dv = P^T g.
// q, k, v, mask, causal and scale as the forward's; y (its out) and lse its outputs; g of
// out's shape and dtype. Three outputs dq, dk, dv (q's, k's and v's shapes; q's dtype). A float
// mask is not differentiated (the tensor layer records it as detached).
struct AttentionGrad {
  static constexpr const char* kName = "AttentionGrad";
  static constexpr OpClass kClass = OpClass::Compute;
  static constexpr bool kArithmetic = true;
  static auto handles(auto& self) {
    return detail::refs(self.q, self.k, self.v, self.mask, self.y, self.lse, self.g);
  }
  Handle q, k, v;
  Handle mask;
  Handle y, lse, g;  // the forward's out and lse; out's gradient
  bool causal = false;
  double scale = 1.0;
};
// ---- creation ----
struct Fill {
  static constexpr const char* kName = "Fill";
  static constexpr OpClass kClass = OpClass::Creation;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::no_refs(self); }
  Shape shape;
  DType dtype;
  double value;            // float and bool dtypes
  std::int64_t int_value;  // int dtypes
};
struct Arange {  // start + i * step for i < n
  static constexpr const char* kName = "Arange";
  static constexpr OpClass kClass = OpClass::Creation;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::no_refs(self); }
  double start, step;
  std::size_t n;
  DType dtype;
};
struct Random {
  static constexpr const char* kName = "Random";
  static constexpr OpClass kClass = OpClass::Creation;
  static constexpr bool kArithmetic = false;
  static auto handles(auto& self) { return detail::no_refs(self); }
  Shape shape;
  DType dtype;
  Distribution dist;
};

// The one list of IR ops. The variant Op, the enumeration OpKind (its index) and every
// table over ops (names, classes, operands) are built from it and from the structs' own
// traits, so an op is added by writing its struct and naming it here (at the end: the
// order is OpKind's); a struct without its traits (kName, kClass, kArithmetic, handles)
// fails to compile (OpStruct below).
// clang-format off
#define EMBER_IR_OPS(X)                                                        \
  X(Unary) X(Binary) X(Where) X(Cast) X(Reduce) X(Scan) X(Matmul)              \
  X(Reshape) X(Permute) X(Expand) X(Slice) X(Flip)                             \
  X(SliceAssign) X(Cat) X(Gather) X(Scatter) X(IndexSelect) X(IndexAdd)        \
  X(Sort) X(Nonzero) X(Fill) X(Arange) X(Random)                               \
  X(Softmax) X(LayerNorm) X(Unfold) X(Fold) X(Pool) X(Conv)    \
  X(MaxPoolGrad) X(BatchNorm) X(BatchNormGrad) X(Svd)                      \
  X(Attention) X(AttentionGrad) X(RmsNorm) X(RmsNormGrad)    \
  X(GroupNorm) X(GroupNormGrad)
// clang-format on

namespace detail {
template <class First, class... Ops>
struct VariantOfRest {
  using type = std::variant<Ops...>;
};
}  // namespace detail

#define EMBER_IR_COMMA_TYPE(T) , T
using Op = detail::VariantOfRest<void EMBER_IR_OPS(EMBER_IR_COMMA_TYPE)>::type;
#undef EMBER_IR_COMMA_TYPE

// The variant index of each op, for support queries and tables.
enum class OpKind : std::uint8_t {
#define EMBER_IR_ENUMERATOR(T) T,
  EMBER_IR_OPS(EMBER_IR_ENUMERATOR)
#undef EMBER_IR_ENUMERATOR
      Count_
};
inline constexpr std::size_t kNumOps = std::variant_size_v<Op>;
static_assert(kNumOps == static_cast<std::size_t>(OpKind::Count_));

// What every op struct states about itself.
template <class T>
concept OpStruct = requires(T& op, const T& cop) {
  { T::kName } -> std::convertible_to<const char*>;  // the op's name, as in docs/ir.md
  { T::kClass } -> std::convertible_to<OpClass>;     // what Fusion and Autodiff go by
  // Whether the op computes on its operands' values (arithmetic, comparisons, sums), as
  // opposed to moving or creating them: a backend storing 16-bit floats natively but
  // computing in f32 widens the operands of exactly these ops.
  { T::kArithmetic } -> std::convertible_to<bool>;
  // Its tensor operands in declaration order: a range of Handle (or pointers to them),
  // const when the op is. Optional operands (LayerNorm's weight and bias) keep their slot
  // and are null when absent.
  T::handles(op);
  T::handles(cop);
};

namespace detail {
template <class T>
struct Alternatives;
template <class... T>
struct Alternatives<std::variant<T...>> {
  static constexpr bool all_ops = (OpStruct<T> && ...);
};
}  // namespace detail
static_assert(detail::Alternatives<Op>::all_ops, "every ir::Op alternative states its traits");

namespace detail {
template <class T, class V>
struct IndexIn;
template <class T, class... U>
struct IndexIn<T, std::variant<U...>> {
  static constexpr std::size_t value = [] {
    constexpr bool same[] = {std::is_same_v<T, U>...};
    std::size_t i = 0;
    while (i < sizeof...(U) && !same[i]) ++i;
    return i;
  }();
};
}  // namespace detail
// The OpKind of an op struct type.
template <class T>
inline constexpr OpKind kind_v = static_cast<OpKind>(detail::IndexIn<T, Op>::value);

inline OpKind kind_of(const Op& op) { return static_cast<OpKind>(op.index()); }
const char* name(OpKind k);
OpClass op_class(OpKind k);
// Whether ops of kind k compute on their operands' values (OpStruct::kArithmetic).
bool is_arithmetic(OpKind k);

// ---- the operands of any op (from each struct's handles) ----
namespace detail {
template <class R>
constexpr decltype(auto) deref(R&& r) {
  if constexpr (std::is_pointer_v<std::remove_cvref_t<R>>) {
    return *r;
  } else {
    return std::forward<R>(r);
  }
}
}  // namespace detail

// Calls f(Handle&) (f(const Handle&) for a const op) on every operand slot, in order,
// absent optional operands included (null).
template <class O, class F>
requires std::is_same_v<std::remove_const_t<O>, Op>
void for_each_operand(O& op, F&& f) {
  std::visit(
      [&](auto& o) {
        for (auto&& h : std::remove_cvref_t<decltype(o)>::handles(o)) f(detail::deref(h));
      },
      op);
}
std::size_t operand_count(const Op& op);
Handle& operand(Op& op, std::size_t i);
const Handle& operand(const Op& op, std::size_t i);

}  // namespace ember::ir
