#include "ember/ir/infer.hpp"

#include <algorithm>
#include <string>

#include "ember/base/error.hpp"

namespace ember::ir {

// ---- building blocks ----

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t r = std::max(a.rank(), b.rank());
  std::vector<std::size_t> out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t da = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
    const std::size_t db = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
    EMBER_CHECK(da == db || da == 1 || db == 1, std::string(op) + ": shapes " + a.to_string() +
                                                    " and " + b.to_string() +
                                                    " cannot be broadcast together");
    out[i] = da == 1 ? db : da;
  }
  return Shape(std::move(out));
}

Shape matmul_shape(const Shape& a, const Shape& b, const char* op) {
  EMBER_ASSERT(a.rank() >= 2 && b.rank() >= 2);
  const Shape ba(a.begin(), a.end() - 2), bb(b.begin(), b.end() - 2);
  std::vector<std::size_t> out = broadcast_shapes(ba, bb, op).dims();
  out.push_back(a[a.rank() - 2]);
  out.push_back(b[b.rank() - 1]);
  return Shape(std::move(out));
}

std::size_t window_positions(std::size_t in, std::size_t kernel, std::size_t stride,
                             std::size_t padding, std::size_t dilation) {
  return (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

std::vector<std::size_t> window_positions(const std::vector<std::size_t>& spatial,
                                          const Window& w) {
  EMBER_ASSERT(spatial.size() == w.kernel.size());
  std::vector<std::size_t> out(spatial.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = window_positions(spatial[i], w.kernel[i], w.stride[i], w.padding[i], w.dilation[i]);
  }
  return out;
}

Shape reduced_shape(const Shape& x, std::size_t dim) {
  Shape s = x;
  s[dim] = 1;
  return s;
}

DType reduce_dtype(ReduceFn fn, DType x) {
  switch (fn) {
    case ReduceFn::ArgMax:
    case ReduceFn::ArgMin:
      return DType::I64;
    case ReduceFn::Any:
    case ReduceFn::All:
      return DType::Bool;
    case ReduceFn::Sum:
    case ReduceFn::Prod:
    case ReduceFn::Mean:
    case ReduceFn::Max:
    case ReduceFn::Min:
    case ReduceFn::Count_:
      break;
  }
  return x;
}

Shape cat_shape(const std::vector<Handle>& xs, std::size_t dim) {
  EMBER_ASSERT(!xs.empty());
  Shape s = xs[0]->shape();
  for (std::size_t i = 1; i < xs.size(); ++i) s[dim] += xs[i]->shape()[dim];
  return s;
}

namespace {

std::size_t product(const std::vector<std::size_t>& v) {
  std::size_t p = 1;
  for (std::size_t e : v) p *= e;
  return p;
}
bool is_index(const Handle& h) { return is_int(h->dtype()); }
std::vector<std::size_t> spatial_of(const Shape& image) { return {image.begin() + 2, image.end()}; }

}  // namespace

// ---- element-wise ----
// The functions each dtype is defined for are the element-wise table's; here: the output
// dtype is the operands' or bool (predicates, comparisons).
Shape out_shape(const Unary& op) { return op.x->shape(); }
DType out_dtype(const Unary& op) { return op.out; }
bool well_typed(const Unary& op) { return op.out == op.x->dtype() || op.out == DType::Bool; }

Shape out_shape(const Binary& op) { return op.out_shape; }
DType out_dtype(const Binary& op) { return op.out; }
bool well_typed(const Binary& op) {
  const DType dt = op.lhs->dtype();
  return op.rhs->dtype() == dt && (op.out == dt || op.out == DType::Bool);
}

Shape out_shape(const Where& op) { return op.out_shape; }
DType out_dtype(const Where& op) { return op.a->dtype(); }
bool well_typed(const Where& op) {
  return op.cond->dtype() == DType::Bool && op.a->dtype() == op.b->dtype();
}

Shape out_shape(const Cast& op) { return op.x->shape(); }
DType out_dtype(const Cast& op) { return op.to; }
bool well_typed(const Cast&) { return true; }

// ---- reductions ----
Shape out_shape(const Reduce& op) { return reduced_shape(op.x->shape(), op.dim); }
DType out_dtype(const Reduce& op) { return op.out; }
bool well_typed(const Reduce& op) {
  // Bool takes the logical reductions and the arg reductions (false < true); the tensor
  // layer offers only the logical ones on bool, as PyTorch.
  const bool on_bool = op.fn == ReduceFn::Any || op.fn == ReduceFn::All ||
                       op.fn == ReduceFn::ArgMax || op.fn == ReduceFn::ArgMin;
  return (on_bool || op.x->dtype() != DType::Bool) && op.out == reduce_dtype(op.fn, op.x->dtype());
}

Shape out_shape(const Scan& op) { return op.x->shape(); }
DType out_dtype(const Scan& op) { return op.x->dtype(); }
bool well_typed(const Scan& op) { return op.x->dtype() != DType::Bool; }

Shape out_shape(const Softmax& op) { return op.x->shape(); }
DType out_dtype(const Softmax& op) { return op.x->dtype(); }
bool well_typed(const Softmax& op) { return is_float(op.x->dtype()); }

Shape out_shape(const LayerNorm& op) { return op.x->shape(); }
DType out_dtype(const LayerNorm& op) { return op.x->dtype(); }
bool well_typed(const LayerNorm& op) {
  const DType dt = op.x->dtype();
  return is_float(dt) && (!op.weight || op.weight->dtype() == dt) &&
         (!op.bias || op.bias->dtype() == dt);
}

namespace {
Shape batch_norm_shape(const Handle& x, std::size_t output) {
  return output == 0 ? x->shape() : Shape{2, x->shape()[1]};
}
bool channel_vector(const Handle& v, const Handle& x) {
  return !v || (v->dtype() == x->dtype() && v->shape() == Shape{x->shape()[1]});
}
}  // namespace

Shape out_shape(const BatchNorm& op, std::size_t output) { return batch_norm_shape(op.x, output); }
DType out_dtype(const BatchNorm& op, std::size_t) { return op.x->dtype(); }
bool well_typed(const BatchNorm& op) {
  return is_float(op.x->dtype()) && op.x->shape().rank() >= 2 && channel_vector(op.weight, op.x) &&
         channel_vector(op.bias, op.x);
}
Shape out_shape(const BatchNormGrad& op, std::size_t output) {
  return batch_norm_shape(op.x, output);
}
DType out_dtype(const BatchNormGrad& op, std::size_t) { return op.x->dtype(); }
bool well_typed(const BatchNormGrad& op) {
  const DType dt = op.x->dtype();
  return is_float(dt) && op.x->shape().rank() >= 2 && channel_vector(op.weight, op.x) &&
         op.stats->dtype() == dt && op.stats->shape() == Shape{2, op.x->shape()[1]} &&
         op.g->dtype() == dt && op.g->shape() == op.x->shape();
}

Shape out_shape(const Svd& op, std::size_t output) {
  std::vector<std::size_t> dims = op.x->shape().dims();
  const std::size_t r = dims.size(), m = dims[r - 2], n = dims[r - 1], k = std::min(m, n);
  if (output == 0) {
    dims.pop_back();
    dims.back() = k;
  } else if (output == 1) {
    dims.back() = k;
  } else {
    dims[r - 2] = k;
  }
  return Shape(std::move(dims));
}
DType out_dtype(const Svd& op, std::size_t) { return op.x->dtype(); }
bool well_typed(const Svd& op) { return is_float(op.x->dtype()) && op.x->shape().rank() >= 2; }

namespace {
// Attention's operands: q [B..., Lq, E], k [B..., Lk, E], v [B..., Lk, Ev] of one float
// dtype and batch dims; the mask (when present) q's rank, each extent [B..., Lq, Lk]'s or 1.
bool attention_operands(const Handle& q, const Handle& k, const Handle& v, const Handle& mask) {
  const DType dt = q->dtype();
  const Shape &qs = q->shape(), &ks = k->shape(), &vs = v->shape();
  const std::size_t r = qs.rank();
  if (!is_float(dt) || k->dtype() != dt || v->dtype() != dt || r < 2 || ks.rank() != r ||
      vs.rank() != r || qs[r - 1] != ks[r - 1] || ks[r - 2] != vs[r - 2])
    return false;
  for (std::size_t d = 0; d + 2 < r; ++d)
    if (ks[d] != qs[d] || vs[d] != qs[d]) return false;
  if (!mask) return true;
  if ((mask->dtype() != DType::Bool && mask->dtype() != dt) || mask->shape().rank() != r)
    return false;
  for (std::size_t d = 0; d < r; ++d) {
    const std::size_t want = d + 1 == r ? ks[r - 2] : qs[d];
    if (mask->shape()[d] != want && mask->shape()[d] != 1) return false;
  }
  return true;
}
}  // namespace

Shape out_shape(const Attention& op, std::size_t output) {
  std::vector<std::size_t> dims = op.q->shape().dims();
  if (output == 0) {
    dims.back() = op.v->shape().dims().back();
  } else {
    dims.pop_back();
  }
  return Shape(std::move(dims));
}
DType out_dtype(const Attention& op, std::size_t output) {
  const DType dt = op.q->dtype();
  return output == 0 || dt == DType::F64 ? dt : DType::F32;
}
bool well_typed(const Attention& op) { return attention_operands(op.q, op.k, op.v, op.mask); }
Shape out_shape(const AttentionGrad& op, std::size_t output) {
  return (output == 0 ? op.q : output == 1 ? op.k : op.v)->shape();
}
DType out_dtype(const AttentionGrad& op, std::size_t) { return op.q->dtype(); }
bool well_typed(const AttentionGrad& op) {
  if (!attention_operands(op.q, op.k, op.v, op.mask)) return false;
  const Attention fwd{op.q, op.k, op.v, op.mask, op.causal, op.scale};
  return op.y->dtype() == out_dtype(fwd, 0) && op.y->shape() == out_shape(fwd, 0) &&
         op.g->dtype() == out_dtype(fwd, 0) && op.g->shape() == out_shape(fwd, 0) &&
         op.lse->dtype() == out_dtype(fwd, 1) && op.lse->shape() == out_shape(fwd, 1);
}

namespace {
// x (a float dtype, at least `dims` dims, dims >= 1) and, when present, v of x's dtype and
// trailing `dims` dims.
bool rms_norm_operands(const Handle& x, const Handle& v, std::size_t dims) {
  const Shape& s = x->shape();
  if (!is_float(x->dtype()) || dims < 1 || dims > s.rank()) return false;
  if (!v) return true;
  const auto& d = s.dims();
  return v->dtype() == x->dtype() &&
         v->shape() == Shape(std::vector<std::size_t>(d.end() - std::ptrdiff_t(dims), d.end()));
}
}  // namespace

Shape out_shape(const RmsNorm& op) { return op.x->shape(); }
DType out_dtype(const RmsNorm& op) { return op.x->dtype(); }
bool well_typed(const RmsNorm& op) { return rms_norm_operands(op.x, op.weight, op.dims); }
Shape out_shape(const RmsNormGrad& op, std::size_t output) {
  if (output == 0) return op.x->shape();
  const auto& d = op.x->shape().dims();
  return Shape(std::vector<std::size_t>(d.end() - std::ptrdiff_t(op.dims), d.end()));
}
DType out_dtype(const RmsNormGrad& op, std::size_t) { return op.x->dtype(); }
bool well_typed(const RmsNormGrad& op) {
  return rms_norm_operands(op.x, op.weight, op.dims) && op.g->dtype() == op.x->dtype() &&
         op.g->shape() == op.x->shape();
}

namespace {
// x [N, C, *] of a float dtype, groups > 0 dividing C.
bool group_norm_x(const Handle& x, std::size_t groups) {
  return is_float(x->dtype()) && x->shape().rank() >= 2 && groups > 0 &&
         x->shape()[1] % groups == 0;
}
}  // namespace

Shape out_shape(const GroupNorm& op, std::size_t output) {
  return output == 0 ? op.x->shape() : Shape{2, op.x->shape()[0] * op.groups};
}
DType out_dtype(const GroupNorm& op, std::size_t) { return op.x->dtype(); }
bool well_typed(const GroupNorm& op) {
  return group_norm_x(op.x, op.groups) && channel_vector(op.weight, op.x) &&
         channel_vector(op.bias, op.x);
}
Shape out_shape(const GroupNormGrad& op, std::size_t output) {
  return batch_norm_shape(op.x, output);
}
DType out_dtype(const GroupNormGrad& op, std::size_t) { return op.x->dtype(); }
bool well_typed(const GroupNormGrad& op) {
  const DType dt = op.x->dtype();
  return group_norm_x(op.x, op.groups) && channel_vector(op.weight, op.x) &&
         op.stats->dtype() == dt && op.stats->shape() == Shape{2, op.x->shape()[0] * op.groups} &&
         op.g->dtype() == dt && op.g->shape() == op.x->shape();
}

Shape out_shape(const Pool& op) {
  const Shape& x = op.x->shape();
  std::vector<std::size_t> dims{x[0], x[1]};
  for (std::size_t p : window_positions(spatial_of(x), op.window)) dims.push_back(p);
  return Shape(std::move(dims));
}
DType out_dtype(const Pool& op) { return op.x->dtype(); }
bool well_typed(const Pool& op) { return op.x->dtype() != DType::Bool; }

Shape out_shape(const MaxPoolGrad& op) { return op.x->shape(); }
DType out_dtype(const MaxPoolGrad& op) { return op.x->dtype(); }
bool well_typed(const MaxPoolGrad& op) {
  const DType dt = op.x->dtype();
  return is_float(dt) && op.y->dtype() == dt && op.g->dtype() == dt;
}

// ---- compute ----
Shape out_shape(const Conv& op) {
  const Shape& x = op.x->shape();
  const Shape& w = op.w->shape();
  std::vector<std::size_t> dims;
  switch (op.pass) {
    case ConvPass::Forward:
      dims = {x[0], w[0]};
      for (std::size_t p : window_positions(spatial_of(x), op.window)) dims.push_back(p);
      break;
    case ConvPass::InputGrad:
      dims = {x[0], w[1] * op.groups};
      dims.insert(dims.end(), op.image.begin(), op.image.end());
      break;
    case ConvPass::WeightGrad:
    case ConvPass::Count_:
      dims = {w[1], x[1] / std::max<std::size_t>(op.groups, 1)};
      dims.insert(dims.end(), op.window.kernel.begin(), op.window.kernel.end());
      break;
  }
  return Shape(std::move(dims));
}
DType out_dtype(const Conv& op) { return op.x->dtype(); }
bool well_typed(const Conv& op) {
  return is_float(op.x->dtype()) && op.w->dtype() == op.x->dtype();
}

Shape out_shape(const Matmul& op) { return op.out_shape; }
DType out_dtype(const Matmul& op) { return op.a->dtype(); }
bool well_typed(const Matmul& op) {
  return is_float(op.a->dtype()) && op.b->dtype() == op.a->dtype();
}

Shape out_shape(const Sort& op) { return op.x->shape(); }
DType out_dtype(const Sort& op, std::size_t output) {
  EMBER_ASSERT(output < 2);
  return output == 0 ? op.x->dtype() : DType::I64;
}
bool well_typed(const Sort&) { return true; }

// ---- views ----
Shape out_shape(const Reshape& op) { return op.shape; }
DType out_dtype(const Reshape& op) { return op.x->dtype(); }
bool well_typed(const Reshape&) { return true; }

Shape out_shape(const Permute& op) {
  Shape s = op.x->shape();
  for (std::size_t i = 0; i < op.axes.size(); ++i) s[i] = op.x->shape()[op.axes[i]];
  return s;
}
DType out_dtype(const Permute& op) { return op.x->dtype(); }
bool well_typed(const Permute&) { return true; }

Shape out_shape(const Expand& op) { return op.shape; }
DType out_dtype(const Expand& op) { return op.x->dtype(); }
bool well_typed(const Expand&) { return true; }

Shape out_shape(const Slice& op) {
  std::vector<std::size_t> dims(op.ranges.size());
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const SliceRange& r = op.ranges[i];
    dims[i] = (r.end - r.start + r.step - 1) / r.step;
  }
  return Shape(std::move(dims));
}
DType out_dtype(const Slice& op) { return op.x->dtype(); }
bool well_typed(const Slice&) { return true; }

Shape out_shape(const Flip& op) { return op.x->shape(); }
DType out_dtype(const Flip& op) { return op.x->dtype(); }
bool well_typed(const Flip&) { return true; }

// ---- data movement ----
Shape out_shape(const SliceAssign& op) { return op.x->shape(); }
DType out_dtype(const SliceAssign& op) { return op.x->dtype(); }
bool well_typed(const SliceAssign& op) { return op.value->dtype() == op.x->dtype(); }

Shape out_shape(const Cat& op) { return op.out_shape; }
DType out_dtype(const Cat& op) { return op.xs[0]->dtype(); }
bool well_typed(const Cat& op) {
  return std::all_of(op.xs.begin(), op.xs.end(),
                     [&](const Handle& h) { return h->dtype() == op.xs[0]->dtype(); });
}

Shape out_shape(const Gather& op) { return op.index->shape(); }
DType out_dtype(const Gather& op) { return op.x->dtype(); }
bool well_typed(const Gather& op) { return is_index(op.index); }

Shape out_shape(const Scatter& op) { return op.x->shape(); }
DType out_dtype(const Scatter& op) { return op.x->dtype(); }
bool well_typed(const Scatter& op) {
  return is_index(op.index) && op.src->dtype() == op.x->dtype();
}

Shape out_shape(const IndexSelect& op) {
  Shape s = op.x->shape();
  s[op.dim] = op.index->shape().num_elements();
  return s;
}
DType out_dtype(const IndexSelect& op) { return op.x->dtype(); }
bool well_typed(const IndexSelect& op) { return is_index(op.index); }

Shape out_shape(const IndexAdd& op) { return op.x->shape(); }
DType out_dtype(const IndexAdd& op) { return op.x->dtype(); }
bool well_typed(const IndexAdd& op) {
  return is_index(op.index) && op.src->dtype() == op.x->dtype();  // bool adds as or
}

Shape out_shape(const Nonzero& op, std::size_t count) { return Shape{count, op.x->shape().rank()}; }
DType out_dtype(const Nonzero&) { return DType::I64; }
bool well_typed(const Nonzero&) { return true; }

Shape out_shape(const Unfold& op) {
  const Shape& x = op.x->shape();
  return Shape{x[0], x[1] * product(op.window.kernel),
               product(window_positions(spatial_of(x), op.window))};
}
DType out_dtype(const Unfold& op) { return op.x->dtype(); }
bool well_typed(const Unfold&) { return true; }

Shape out_shape(const Fold& op) {
  const Shape& x = op.x->shape();
  std::vector<std::size_t> dims{x[0], x[1] / product(op.window.kernel)};
  dims.insert(dims.end(), op.output.begin(), op.output.end());
  return Shape(std::move(dims));
}
DType out_dtype(const Fold& op) { return op.x->dtype(); }
bool well_typed(const Fold& op) { return is_float(op.x->dtype()); }

// ---- creation ----
Shape out_shape(const Fill& op) { return op.shape; }
DType out_dtype(const Fill& op) { return op.dtype; }
bool well_typed(const Fill&) { return true; }

Shape out_shape(const Arange& op) { return Shape{op.n}; }
DType out_dtype(const Arange& op) { return op.dtype; }
bool well_typed(const Arange&) { return true; }

Shape out_shape(const Random& op) { return op.shape; }
DType out_dtype(const Random& op) { return op.dtype; }
bool well_typed(const Random&) { return true; }

bool well_typed(const Op& op) {
  return std::visit([](const auto& o) { return well_typed(o); }, op);
}

DType output_dtype(const Op& op, std::size_t output) {
  return std::visit(
      [&](const auto& o) {
        if constexpr (MultiOutput<std::decay_t<decltype(o)>>) {
          return out_dtype(o, output);
        } else {
          return out_dtype(o);
        }
      },
      op);
}

bool computes_widened(const Op& op) {
  if (!is_arithmetic(kind_of(op))) return false;
  bool half = false;
  for_each_operand(op, [&](const Handle& h) { half = half || (h && is_half(h->dtype())); });
  return half;
}

}  // namespace ember::ir
