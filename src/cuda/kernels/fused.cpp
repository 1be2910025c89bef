// Fused element-wise groups (backend/fused_group.hpp) as one generated kernel each
// (codegen/fused.cpp). The iteration space is the group's shape; every input is read
// through its strided view broadcast to it. When each input walks the output linearly or
// is one element, the contiguous variant runs (vector accesses when aligned), else the
// strided one over the dims collapsed across all inputs. Kernels are found by the group's
// key and variant, printed and compiled once: the key holds no sizes, strides or
// parameter values (those are arguments), so one kernel serves every size.
#include <algorithm>
#include <bit>
#include <cstring>
#include <string>

#include "cuda/kernels/kernels.hpp"

namespace ember::cuda {

using backend::FusedGroup;
using backend::FusedInstr;

namespace {
// Inputs a fused kernel takes (the fuser's limit is 16): the variant holds one bit each.
constexpr std::size_t kMaxFusedInputs = 16;
}  // namespace

namespace {

// The instructions' run-time parameters in the argument words (FusedArgs): a Fill's bits, a
// unary function's p0 and p1 (a layer norm's eps), a Random's a, b, seed and first counter.
void put_params(const FusedGroup& g, const FusedArgs& layout, std::vector<std::int64_t>& w) {
  for (std::size_t i = 0; i < g.code.size(); ++i) {
    const FusedInstr& in = g.code[i];
    const auto at = static_cast<std::size_t>(layout.param[i]);
    if (in.kind == FusedInstr::Kind::Fill) {
      w[at] = std::bit_cast<std::int64_t>(in.bits);
      continue;
    }
    w[at] = std::bit_cast<std::int64_t>(in.p0);
    w[at + 1] = std::bit_cast<std::int64_t>(in.p1);
    if (in.kind == FusedInstr::Kind::Random) {
      w[at + 2] = std::bit_cast<std::int64_t>(in.draw.seed);
      w[at + 3] = std::bit_cast<std::int64_t>(in.draw.first);
    }
  }
}

// The argument words of a kernel over `rows` contiguous rows of n elements (the row
// variants: reductions, softmax, layer norm): w[0] the elements, w[1] the rows, w[2] n, then
// the input and output pointers, the error flag and the parameters.
std::vector<std::int64_t> row_words(CudaContext& ctx, const FusedGroup& g, const FusedArgs& layout,
                                    const std::vector<ir::Handle>& outs, std::int64_t rows,
                                    std::int64_t n) {
  std::vector<std::int64_t> w(static_cast<std::size_t>(layout.words), 0);
  w[0] = rows * n;
  w[1] = rows;
  w[2] = n;
  const auto word = [](const void* p) {
    return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p));
  };
  for (std::size_t k = 0; k < g.inputs.size(); ++k) {
    w[static_cast<std::size_t>(layout.inputs) + k] = word(as_cuda(g.inputs[k]).data());
  }
  for (std::size_t j = 0; j < outs.size(); ++j) {
    w[static_cast<std::size_t>(layout.outputs) + j] = word(as_cuda(outs[j]).data());
  }
  w[static_cast<std::size_t>(layout.err)] = word(ctx.error_flag());
  put_params(g, layout, w);
  return w;
}

// A group ending in a row reduction (Note [Fused row reductions] in codegen/fused.cpp): every
// input read linearly or as one element (else the group runs op by op, as unfused).
// Note [Fused two-pass reductions]: where the Reduce kernel would cut each row into k
// chunks (Note [Two-pass reductions]: few long rows, a full reduction among them), the
// fused kernel is launched over rows * k rows of n / k elements — element j of chunk c of
// row r is element c * (n / k) + j of row r, at the same linear index of the iteration
// space — which is the unfused first pass, prologue computed instead of loaded; the
// partials then take the unfused second pass (reduce_partials). Where the first pass would
// itself be cut again, the group runs op by op.
std::optional<std::vector<ir::Handle>> run_fused_reduction(CudaContext& ctx, FusedGroup& g,
                                                           FusedSpec& spec, const char* checked) {
  const std::size_t n_in = g.inputs.size();
  const FusedInstr& red = g.code[g.row_at()];
  const bool epilogue = g.has_row_epilogue();  // (Note [Fused row epilogues])
  const Shape& shape = g.shape;
  const std::size_t dim = red.dim;
  if (dim >= shape.rank() || shape.num_elements() == 0) return std::nullopt;
  const DType rt = g.dtype_of(red.args[0]);
  const auto n_all = static_cast<std::int64_t>(shape[dim]);
  const auto rows_all = static_cast<std::int64_t>(shape.num_elements()) / n_all;
  const std::int64_t k = reduce_chunk_count(red.reduce, rt, shape, dim);
  const auto z = [](std::int64_t v) { return static_cast<std::size_t>(v); };
  if (k > 1 && (epilogue ||
                reduce_chunk_count(red.reduce, rt, Shape{z(rows_all * k), z(n_all / k)}, 1) != 1)) {
    return std::nullopt;  // (an epilogue needs each row's result in one block: apart)
  }
  std::uint32_t scalar_mask = 0;
  for (std::size_t k = 0; k < n_in; ++k) {
    const auto& x = as_cuda(g.inputs[k]);
    const backend::Walk w = backend::walk_of(x.shape(), x.strides(), shape);
    if (w == backend::Walk::Strided) return std::nullopt;
    if (w == backend::Walk::Scalar) scalar_mask |= 1u << k;
  }
  spec.contiguous = true;
  spec.scalar_mask = scalar_mask;
  const FusedArgs layout = fused_args(spec);
  if (static_cast<std::size_t>(layout.words) * 8 > kMaxArgBytes) return std::nullopt;
  Shape out_shape = shape;
  out_shape[dim] = 1;
  const std::int64_t n = n_all / k, rows = rows_all * k;
  std::vector<ir::Handle> outs;
  if (k > 1) {
    outs.push_back(ctx.empty(Shape{z(rows)}, red.out));
  } else {  // the reduced value and row values of the row's shape, the others the group's
    for (std::int32_t o : g.outputs) {
      outs.push_back(ctx.empty(spec.row_values[z(o)] ? out_shape : shape, g.dtype_of(o)));
    }
  }
  std::vector<std::int64_t> w = row_words(ctx, g, layout, outs, rows, n);
  spec.name = fused_name(g.key, true, scalar_mask);
  void* arg = w.data();
  // One block of 256 threads a row, as the Reduce kernel (its order of combining).
  constexpr std::int64_t kBlock = 256;
  const bool ran = ctx.launch_fused(
      g.key, 1u | scalar_mask << 1, g.signature + " " + spec.name, [&] { return gen_fused(spec); },
      rows * kBlock, {arg}, checked ? checked : ir::name(red.reduce), checked != nullptr);
  if (!ran) return std::nullopt;
  if (k > 1)
    outs[0] = reduce_partials(ctx, red.reduce, std::move(outs[0]), rows_all, k, 1, out_shape);
  return outs;
}

// A group ending in a softmax or layer norm (Note [Fused rows in registers] in
// codegen/fused.cpp): its rows contiguous in the iteration space, every input but a layer
// norm's weight and bias read linearly, as one element or through strides (Note [Fused
// rows over strided inputs]), those two contiguous, and rows
// short enough for the unfused op's rows-in-registers kernel, whose block, elements per
// thread and chunk width it takes — the pointers that kernel would check for alignment are
// fresh buffers but for the weight and bias — so it combines as the unfused op does. Else
// the group runs apart (Note [Row instructions apart]).
std::optional<std::vector<ir::Handle>> run_fused_rows(CudaContext& ctx, FusedGroup& g,
                                                      FusedSpec& spec, const char* checked) {
  const std::size_t n_in = g.inputs.size();
  const FusedInstr& row = g.code[g.row_at()];
  const Shape& shape = g.shape;
  if (row.dim >= shape.rank() || shape.num_elements() == 0) return std::nullopt;
  for (std::size_t d = row.dim + 1; d < shape.rank(); ++d) {
    if (shape[d] != 1) return std::nullopt;
  }
  // (A row result nobody reads: the prologue's outputs alone, apart.)
  const auto row_id = static_cast<std::int32_t>(n_in + g.row_at());
  if (!g.has_row_epilogue() &&
      std::find(g.outputs.begin(), g.outputs.end(), row_id) == g.outputs.end())
    return std::nullopt;
  const auto n = static_cast<std::int64_t>(shape[row.dim]);
  const auto rows = static_cast<std::int64_t>(shape.num_elements()) / n;
  std::uint32_t scalar_mask = 0;
  std::vector<const void*> params;        // pointers the unfused op would check for alignment
  std::vector<bool> by_row(n_in, false);  // read by the prologue (not a weight or bias alone)
  std::vector<backend::Walk> walks(n_in, backend::Walk::Linear);
  bool strided = false;
  for (std::size_t k = 0; k < n_in; ++k) {
    const auto& x = as_cuda(g.inputs[k]);
    const bool param =
        row.kind == FusedInstr::Kind::LayerNorm && (row.args[1] == static_cast<std::int32_t>(k) ||
                                                    row.args[2] == static_cast<std::int32_t>(k));
    if (param) {
      if (!x.is_contiguous() || x.shape().num_elements() != static_cast<std::size_t>(n)) {
        return std::nullopt;
      }
      params.push_back(x.data());
      if (shape.rank() > 1) continue;  // read by the row op alone
    }
    by_row[k] = true;
    walks[k] = backend::walk_of(x.shape(), x.strides(), shape);
    strided = strided || walks[k] == backend::Walk::Strided;
    if (walks[k] == backend::Walk::Scalar) scalar_mask |= 1u << k;
  }
  const DType dt = row.out;
  // An operand that is an input read linearly is the unfused op's x itself; one read
  // through strides would be a copy first: apart.
  if (row.args[0] < static_cast<std::int32_t>(n_in)) {
    const auto k = static_cast<std::size_t>(row.args[0]);
    if (walks[k] == backend::Walk::Strided) return std::nullopt;
    if (walks[k] == backend::Walk::Linear) params.push_back(as_cuda(g.inputs[k]).data());
  }
  bool aligned = true;
  for (const void* p : params) aligned = aligned && aligned16({p});
  const auto [block, ept, vec] = rows_in_registers(n, dt, aligned);
  if (block == 0) return std::nullopt;
  // The strided variant (Note [Fused rows over strided inputs]): the outer dims collapsed
  // across the inputs read by the prologue, each input's stride along the row.
  Space outer;
  if (strided) {
    scalar_mask = 0;
    outer.shape.assign(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(row.dim));
    for (std::size_t k = 0; k < n_in; ++k) {
      Strides st(row.dim, 0);
      if (by_row[k]) {
        const Strides b = broadcast_strides(as_cuda(g.inputs[k]), shape);
        st.assign(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(row.dim));
      }
      outer.strides.push_back(std::move(st));
    }
    outer.collapse();
    if (outer.shape.size() > static_cast<std::size_t>(kMaxDims) - 2) return std::nullopt;
  }
  spec.contiguous = !strided;
  spec.scalar_mask = scalar_mask;
  const FusedArgs layout = fused_args(spec);
  if (static_cast<std::size_t>(layout.words) * 8 > kMaxArgBytes) return std::nullopt;
  std::vector<ir::Handle> outs;
  outs.reserve(g.outputs.size());
  for (std::int32_t o : g.outputs) outs.push_back(ctx.empty(shape, g.dtype_of(o)));
  std::vector<std::int64_t> w = row_words(ctx, g, layout, outs, rows, n);
  if (strided) {
    const auto z = [](auto v) { return static_cast<std::size_t>(v); };
    w[3] = static_cast<std::int64_t>(outer.shape.size());
    for (std::size_t d = 0; d < outer.shape.size(); ++d) w[4 + d] = outer.shape[d];
    for (std::size_t k = 0; k < n_in; ++k) {
      const std::size_t at = z(layout.strides) + k * z(kMaxDims);
      for (std::size_t d = 0; d < outer.shape.size(); ++d) w[at + d] = outer.strides[k][d];
      if (by_row[k]) {
        w[at + z(kMaxDims) - 1] = broadcast_strides(as_cuda(g.inputs[k]), shape)[row.dim];
      }
    }
  }
  const auto log2 = [](int v) { return static_cast<std::uint32_t>(std::countr_zero(unsigned(v))); };
  spec.name = fused_name(g.key, !strided, scalar_mask) + "_r" + std::to_string(ept) + "v" +
              std::to_string(vec);
  void* arg = w.data();
  const std::uint32_t variant =
      (strided ? 0u : 1u) | scalar_mask << 1 | log2(ept) << 24 | log2(vec) << 28;
  const char* name = row.kind == FusedInstr::Kind::LayerNorm ? "layer_norm"
                     : row.log                               ? "log_softmax"
                                                             : "softmax";
  const bool ran = ctx.launch_fused(
      g.key, variant, g.signature + " " + spec.name, [&] { return gen_fused_rows(spec, ept, vec); },
      rows * block, {arg}, checked ? checked : name, checked != nullptr, block,
      CudaContext::kOneWave);
  if (!ran) return std::nullopt;
  return outs;
}

}  // namespace

std::optional<std::vector<ir::Handle>> run_fused_group(CudaContext& ctx, FusedGroup& g) {
  const std::size_t n_in = g.inputs.size();
  if (n_in > kMaxFusedInputs || g.code.empty() || g.outputs.empty()) return std::nullopt;
  FusedSpec spec = fused_spec(g);
  if (!fused_supported(spec)) return std::nullopt;
  const char* checked = nullptr;  // the first integer div / rem: it may flag a zero divisor
  for (const FusedInstr& in : g.code) {
    if (in.kind == FusedInstr::Kind::Binary && !checked && is_int(g.dtype_of(in.args[0])) &&
        (in.binary == ir::BinaryFn::Div || in.binary == ir::BinaryFn::Rem)) {
      checked = ir::name(in.binary);
    }
  }
  // A row op of an input (Note [Rows of an input] in fusion/elementwise_fuser.cpp: no
  // prologue) is not printed as one kernel yet: it runs as its op, its epilogue as the next
  // kernel (Note [Epilogues apart]).
  const std::size_t at = g.row_at();
  if (at < g.code.size() && g.code[at].args[0] < static_cast<std::int32_t>(n_in)) {
    return std::nullopt;
  }
  if (has_row_reduction(spec)) return run_fused_reduction(ctx, g, spec, checked);
  if (has_row_norm(spec)) return run_fused_rows(ctx, g, spec, checked);
  const Shape& shape = g.shape;

  // The layout variant: linear or one-element inputs, else strided over collapsed dims.
  bool contiguous = true;
  std::uint32_t scalar_mask = 0;
  for (std::size_t k = 0; k < n_in; ++k) {
    const auto& x = as_cuda(g.inputs[k]);
    const backend::Walk w = backend::walk_of(x.shape(), x.strides(), shape);
    contiguous = contiguous && w != backend::Walk::Strided;
    if (w == backend::Walk::Scalar) scalar_mask |= 1u << k;
  }
  Space sp;
  if (!contiguous) {
    scalar_mask = 0;
    for (std::size_t d : shape) sp.shape.push_back(static_cast<std::int64_t>(d));
    for (const auto& h : g.inputs) sp.strides.push_back(broadcast_strides(as_cuda(h), shape));
    sp.collapse();
    if (sp.shape.empty()) {
      sp.shape.push_back(1);
      for (auto& st : sp.strides) st.push_back(0);
    }
    if (sp.shape.size() > static_cast<std::size_t>(kMaxDims)) return std::nullopt;
  }
  spec.contiguous = contiguous;
  spec.scalar_mask = scalar_mask;
  const FusedArgs layout = fused_args(spec);
  if (static_cast<std::size_t>(layout.words) * 8 > kMaxArgBytes) return std::nullopt;

  // Outputs: a sole-owned input of the group's shape and dtype (Note [In-place reuse]),
  // else a fresh tensor.
  std::vector<ir::Handle> outs;
  outs.reserve(g.outputs.size());
  std::vector<bool> taken(n_in, false);
  for (std::int32_t o : g.outputs) {
    const DType dt = g.dtype_of(o);
    ir::Handle t;
    for (std::size_t k = 0; k < n_in && !t; ++k) {
      if (!taken[k] && reusable(g.inputs[k], shape, dt)) {
        taken[k] = true;
        t = g.inputs[k];
      }
    }
    outs.push_back(t ? std::move(t) : ir::Handle(ctx.empty(shape, dt)));
  }
  const auto n = static_cast<std::int64_t>(shape.num_elements());
  if (n == 0) return outs;

  std::vector<std::int64_t> w(static_cast<std::size_t>(layout.words), 0);
  w[0] = n;
  if (contiguous) {
    w[1] = 1;
    w[2] = n;
  } else {
    w[1] = static_cast<std::int64_t>(sp.shape.size());
    for (std::size_t d = 0; d < sp.shape.size(); ++d) {
      w[2 + d] = sp.shape[d];
      for (std::size_t k = 0; k < n_in; ++k) {
        w[static_cast<std::size_t>(layout.strides) + k * kMaxDims + d] = sp.strides[k][d];
      }
    }
  }
  const auto word = [](const void* p) {
    return static_cast<std::int64_t>(reinterpret_cast<std::uintptr_t>(p));
  };
  std::size_t widest = 1;
  for (std::size_t k = 0; k < n_in; ++k) {
    w[static_cast<std::size_t>(layout.inputs) + k] = word(as_cuda(g.inputs[k]).data());
    if (!(scalar_mask >> k & 1u)) widest = std::max(widest, size_of(spec.inputs[k]));
  }
  for (std::size_t j = 0; j < outs.size(); ++j) {
    w[static_cast<std::size_t>(layout.outputs) + j] = word(as_cuda(outs[j]).data());
    widest = std::max(widest, size_of(outs[j]->dtype()));
  }
  w[static_cast<std::size_t>(layout.err)] = word(ctx.error_flag());
  put_params(g, layout, w);
  const std::int64_t threads =
      contiguous ? (n + vector_width(widest) - 1) / vector_width(widest) : n;
  const std::uint32_t variant = (contiguous ? 1u : 0u) | scalar_mask << 1;
  spec.name = fused_name(g.key, contiguous, scalar_mask);
  void* arg = w.data();
  const bool ran = ctx.launch_fused(
      g.key, variant, g.signature + " " + spec.name, [&] { return gen_fused(spec); }, threads,
      {arg}, checked ? checked : "fused group", checked != nullptr);
  if (!ran) return std::nullopt;
  return outs;
}

}  // namespace ember::cuda
