// The op IR: the contract between the tensor API and every backend and decorator.
//
// Each core op is one plain struct: its operands (tensor handles), its scalar attributes
// and what the caller already decided about its output (dtype, shape where not obvious).
// The tensor layer validates every op before building it, so a backend may assume well-
// formed input. Element-wise function families (UnaryFn, BinaryFn) are enumerations whose
// scalar definitions live once, in ir/scalar_table.hpp; everything else in the user API is
// a composite of these ops. Each op reports its class (op_class), which is what Fusion
// and Autodiff need to know without a second description of the op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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

 protected:
  Shape shape_;
  DType dtype_;
};
using Handle = std::shared_ptr<TensorNode>;

enum class OpClass : std::uint8_t { ElementWise, Reduction, View, DataMovement, Compute, Creation };

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

const char* name(UnaryFn f);
const char* name(BinaryFn f);
const char* name(ReduceFn f);
const char* name(ScanFn f);

struct SliceRange {
  std::size_t start = 0, end = 0, step = 1;  // validated: start <= end <= dim, step >= 1
};

// ---- element-wise ----
struct Unary {
  UnaryFn fn;
  Handle x;
  DType out;  // x's dtype, or Bool for predicates
  double p0 = 0, p1 = 0;
};
struct Binary {
  BinaryFn fn;
  Handle lhs, rhs;  // same dtype; shapes broadcast to out_shape (same rank)
  Shape out_shape;
  DType out;  // operand dtype, or Bool for comparisons
};
struct Where {  // cond ? a : b, broadcast to out_shape (same rank)
  Handle cond, a, b;
  Shape out_shape;
};
struct Cast {
  Handle x;
  DType to;
};
// ---- reductions (the reduced dim stays, with extent 1) ----
struct Reduce {
  ReduceFn fn;
  Handle x;
  std::size_t dim;
  DType out;  // Arg*: I64; Any/All: Bool; else x's dtype
};
struct Scan {  // inclusive prefix along dim
  ScanFn fn;
  Handle x;
  std::size_t dim;
};
// Softmax (or log-softmax) along dim: one op rather than a composite, so a backend can
// make it one pass over each row.
struct Softmax {
  Handle x;
  std::size_t dim;
  bool log;
};
// Layer normalisation over the trailing `dims` dims of x, as torch.nn.functional.layer_norm:
// y = (x - mean) / sqrt(var + eps) * weight + bias with the biased variance, over each
// "row" of the trailing dims' elements. weight and bias are optional (null when absent;
// operands() still lists their slots); when present their shape is x's trailing `dims`
// dims. One op rather than a composite, so a backend can make it one or two passes over
// each row.
struct LayerNorm {
  Handle x;
  Handle weight, bias;
  std::size_t dims;
  double eps;
};
// ---- compute ----
struct Matmul {  // [..., m, k] x [..., k, n] -> out_shape [..., m, n]; batch dims broadcast
  Handle a, b;
  Shape out_shape;
};
// ---- views (no data movement where the backend supports strides) ----
struct Reshape {  // x must be contiguous-compatible or the backend copies
  Handle x;
  Shape shape;
};
struct Permute {
  Handle x;
  std::vector<std::size_t> axes;
};
struct Expand {  // same rank; dims of extent 1 grow to shape
  Handle x;
  Shape shape;
};
struct Slice {
  Handle x;
  std::vector<SliceRange> ranges;  // one per dim
};
struct Flip {
  Handle x;
  std::vector<std::size_t> axes;
};
// ---- data movement ----
struct SliceAssign {  // copy of x with x[ranges] = value (value has the slice's shape)
  Handle x;
  std::vector<SliceRange> ranges;
  Handle value;
};
struct Cat {
  std::vector<Handle> xs;
  std::size_t dim;
  Shape out_shape;
};
struct Gather {  // out[i..] = x[.., index[i..], ..] along dim; index I64 with out's shape
  Handle x;
  std::size_t dim;
  Handle index;
};
struct Scatter {  // copy of x with x[.., index[i], ..] = (or +=) src[i] along dim
  Handle x;
  std::size_t dim;
  Handle index, src;
  bool add;
};
struct IndexSelect {  // out = x with dim taken at index (rank-1 I64)
  Handle x;
  std::size_t dim;
  Handle index;
};
struct IndexAdd {  // copy of x with x.select(dim, index[i]) += src.select(dim, i)
  Handle x;
  std::size_t dim;
  Handle index, src;
};
struct Sort {  // stable; NaN sorts as largest. Outputs: values, I64 indices
  Handle x;
  std::size_t dim;
  bool descending;
};
struct Nonzero {  // -> I64 [count, rank] of the coordinates of non-zero elements
  Handle x;
};
// ---- sliding windows (convolution and pooling are composites of these) ----
// A window sliding over the spatial dims of an image [N, C, *spatial] (1 to 3 spatial
// dims): one entry per spatial dim in each vector; kernel, stride and dilation >= 1.
struct Window {
  std::vector<std::size_t> kernel, stride, padding, dilation;
};
// Number of window positions along a dim of extent `in`; the tensor layer checks that
// in + 2 padding >= dilation (kernel - 1) + 1, so at least one position exists.
std::size_t window_positions(std::size_t in, std::size_t kernel, std::size_t stride,
                             std::size_t padding, std::size_t dilation);
// im2col: [N, C, *spatial] -> [N, C * prod(kernel), L], L = prod(window positions). Row
// c * prod(kernel) + k holds channel c at kernel offset k (row-major over the kernel dims)
// for every window position l (row-major); positions in the padding read pad_value
// (-inf for max pooling). torch.nn.functional.unfold's layout for 2 spatial dims.
struct Unfold {
  Handle x;
  Window window;
  double pad_value = 0;
};
// col2im, the adjoint of Unfold (pad_value 0): [N, C * prod(kernel), L] -> [N, C, *output],
// each output element the sum of every column entry that Unfold would have read from it.
struct Fold {
  Handle x;
  std::vector<std::size_t> output;  // the spatial extents; L must match their positions
  Window window;
};
// Pooling without the im2col matrix: the max (fn Max) or the sum (fn Sum) of each window
// position's entries, [N, C, *spatial] -> [N, C, *positions]. Entries in the padding are
// left out (as -inf for max and 0 for sum would be); the tensor layer keeps padding at most
// half the kernel, so every window holds an image entry. Every dtype but bool.
struct Pool {
  Handle x;
  Window window;
  ReduceFn fn;  // Max or Sum
};
// ---- creation ----
struct Fill {
  Shape shape;
  DType dtype;
  double value;            // float and bool dtypes
  std::int64_t int_value;  // int dtypes
};
struct Arange {  // start + i * step for i < n
  double start, step;
  std::size_t n;
  DType dtype;
};
struct Random {
  Shape shape;
  DType dtype;
  Distribution dist;
};

using Op = std::variant<Unary, Binary, Where, Cast, Reduce, Scan, Matmul, Reshape, Permute, Expand,
                        Slice, Flip, SliceAssign, Cat, Gather, Scatter, IndexSelect, IndexAdd, Sort,
                        Nonzero, Fill, Arange, Random, Softmax, LayerNorm, Unfold, Fold, Pool>;

// The variant index of each op, for support queries and tables.
enum class OpKind : std::uint8_t {
  Unary,
  Binary,
  Where,
  Cast,
  Reduce,
  Scan,
  Matmul,
  Reshape,
  Permute,
  Expand,
  Slice,
  Flip,
  SliceAssign,
  Cat,
  Gather,
  Scatter,
  IndexSelect,
  IndexAdd,
  Sort,
  Nonzero,
  Fill,
  Arange,
  Random,
  Softmax,
  LayerNorm,
  Unfold,
  Fold,
  Pool,
  Count_
};
inline OpKind kind_of(const Op& op) { return static_cast<OpKind>(op.index()); }
const char* name(OpKind k);
OpClass op_class(OpKind k);

// All tensor operands of an op, in declaration order. Optional operands (LayerNorm's weight
// and bias) keep their slot and are null when absent.
std::vector<const Handle*> operands(const Op& op);

}  // namespace ember::ir
