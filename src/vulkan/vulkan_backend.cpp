// VulkanBackend: dispatch of IR ops to generated compute kernels (vulkan/codegen.hpp) on
// one device's context (vulkan/context.hpp). Views (reshape where possible, permute,
// expand, slice, flip) are strided views of the same block and launch nothing; element-wise
// kernels walk any strides, so views are never copied first. Every op is recorded and
// returns at once; to_data and sync wait.
//
// Fallback: supports() says which ops run here — the IR's dtype rules, the device's
// features (f64, i64, 16- and 8-bit storage and arithmetic), what GLSL can print (f64 has no
// exp, sin, ...), the 32-bit indexing of the kernels (buffers within maxStorageBufferRange)
// and the ops that have kernels. Everything else runs on the registry's fallback (the Cpu)
// through host copies (backend::execute_on_fallback), a sync point.
#include "vulkan/vulkan_backend.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>

#include "ember/backend/registry.hpp"
#include "ember/backend/window.hpp"
#include "ember/base/error.hpp"
#include "ember/ir/infer.hpp"
#include "ember/ir/scalar_table.hpp"
#include "vulkan/context.hpp"

namespace ember::vulkan {
namespace {

// Fewest 128 x 128 output tiles for which a matmul takes the large tile (codegen.hpp).
constexpr std::size_t kMatmulLargeTiles = 128;

// Note [Preview kernels]: the kernels added after the last run on NVIDIA's driver (now
// the cached lines of softmax and layer norm) run where they have been checked: on a CPU
// implementation (lavapipe, where the conformance cases run in CI), and elsewhere with
// EMBER_VULKAN_PREVIEW=1 (=0 turns them off anywhere; preview_kernels()). Without them
// those ops take the paths that ran on NVIDIA's driver (one read of the line a pass).
// Kernels leave this set once every conformance case passed with them on the H200: the
// max-pool gradient, nonzero, 16-bit scatter_add / index_add and matmul's register
// prefetch (2026-12-01); batch norm, the direct convolution kernels, the
// cooperative-matrix matmul and the convolution op with its routes (Note [Convolution
// routes]; 2026-12-02, driver 580.159.04).

struct Operand {
  const Block* block;
  backend::StridedView v;
};

class VulkanBackend final : public backend::Backend {
 public:
  explicit VulkanBackend(int index)
      : index_(index), ctx_(index), preview_(preview_kernels(index)) {}

  std::string name() const override { return "vulkan:" + std::to_string(index_); }

  ir::Handle from_data(const TensorData& data) override {
    std::lock_guard lk(ctx_.mutex());
    auto t = ctx_.empty(data.shape(), data.dtype(), "from_data");
    ctx_.upload(*t->block, data.data(), data.bytes().size(), "from_data");
    return t;
  }

  TensorData to_data(const ir::Handle& h) override {
    std::lock_guard lk(ctx_.mutex());
    const VkTensor& x = as_vk(h, "to_data");
    const std::size_t es = size_of(x.dtype());
    const std::size_t n = x.shape().num_elements();
    std::vector<std::byte> out(n * es);
    if (x.contiguous() || n == 0) {
      ctx_.download(*x.block, out.data(), out.size(), "to_data");
    } else if (dtype_ok(x.dtype()) && fits(x)) {
      auto c = copy_of(x);
      ctx_.download(*c->block, out.data(), out.size(), "to_data");
    } else {
      // A view the kernels cannot copy (its dtype, or a buffer beyond the binding range):
      // the whole block comes back and is gathered on the host.
      std::vector<std::byte> all(x.block->mem().size);
      ctx_.download(*x.block, all.data(), all.size(), "to_data");
      const std::size_t rank = x.shape().rank();
      std::vector<std::size_t> idx(rank, 0);
      for (std::size_t i = 0; i < n; ++i) {
        std::int64_t off = x.offset;
        for (std::size_t d = 0; d < rank; ++d)
          off += static_cast<std::int64_t>(idx[d]) * x.strides[d];
        std::memcpy(out.data() + i * es, all.data() + static_cast<std::size_t>(off) * es, es);
        for (std::size_t d = rank; d-- > 0;) {
          if (++idx[d] < x.shape()[d]) break;
          idx[d] = 0;
        }
      }
    }
    return TensorData(std::move(out), x.shape(), x.dtype());
  }

  std::vector<ir::Handle> execute(ir::Op op) override {
    if (!supports(op)) return backend::execute_on_fallback(*this, std::move(op));
    std::lock_guard lk(ctx_.mutex());
    return std::visit(
        [&](auto& o) -> std::vector<ir::Handle> {
          if constexpr (std::is_same_v<decltype(run_one(o)), ir::Handle>) {
            return {run_one(o)};
          } else {
            return run_one(o);
          }
        },
        op);
  }

  bool supports(const ir::Op& op) const override {
    if (!Backend::supports(op)) return false;
    // The tensor layer asks a decorator over this backend (Autodiff, Fusion) whether its
    // convolution and batch norm ops run here, with the decorator's own handles: those are
    // judged by their views' sizes, and the buffers behind them are checked again when the
    // op reaches execute(), which falls back where they do not fit. Other ops read their
    // operands as VkTensor in supports_one.
    bool ok = true, foreign = false;
    ir::for_each_operand(op, [&](const ir::Handle& h) {
      if (!h) return;
      const auto* t = dynamic_cast<const VkTensor*>(h.get());
      if (t == nullptr) foreign = true;
      if (t != nullptr ? !fits(*t) : !out_fits(h->shape(), h->dtype())) ok = false;
    });
    if (!ok) return false;
    if (foreign && !std::holds_alternative<ir::Conv>(op) &&
        !std::holds_alternative<ir::BatchNorm>(op) &&
        !std::holds_alternative<ir::BatchNormGrad>(op))
      return false;
    return std::visit([&](const auto& o) { return supports_one(o); }, op);
  }

  void seed(std::uint64_t s) override {
    std::lock_guard lk(ctx_.mutex());
    seed_ = s;
    counter_ = 0;
  }
  backend::MemoryStats memory_stats() const override {
    auto s = const_cast<Context&>(ctx_).stats();
    return s;
  }
  void empty_cache() override {
    ctx_.sync();
    ctx_.empty_cache();
  }
  void sync() override { ctx_.sync(); }

  // A fused element-wise group as one kernel (codegen.hpp, FusedKernel); a group some
  // instruction of which cannot run here (its dtype, a function GLSL cannot print for f64,
  // buffers beyond the binding range, too many bindings) runs op by op instead, each op on
  // this backend or its fallback as unfused.
  std::vector<ir::Handle> run_fused(backend::FusedGroup g) override {
    if (!fusable(g)) return Backend::run_fused(std::move(g));
    std::lock_guard lk(ctx_.mutex());
    const Shape& shape = g.shape;
    const std::size_t n_in = g.inputs.size(), n_out = g.outputs.size();
    // Outputs: the buffer of an input the group owns alone (Note [In-place reuse]; the
    // kernel then writes through that input's binding), or a fresh tensor.
    std::vector<std::int32_t> in_place(n_out, -1);
    std::vector<bool> taken(n_in, false);
    std::vector<ir::Handle> outs;
    for (std::size_t j = 0; j < n_out; ++j) {
      const DType dt = g.dtype_of(g.outputs[j]);
      for (std::size_t k = 0; k < n_in && in_place[j] < 0; ++k) {
        if (!taken[k] && reusable(g.inputs[k], shape, dt)) {
          taken[k] = true;
          in_place[j] = static_cast<std::int32_t>(k);
        }
      }
      if (in_place[j] >= 0) {
        const auto& x =
            static_cast<const VkTensor&>(*g.inputs[static_cast<std::size_t>(in_place[j])]);
        outs.push_back(std::make_shared<VkTensor>(x.block, x.view(), dt));
      } else {
        outs.push_back(ctx_.empty(shape, dt, "fused group"));
      }
    }
    const std::size_t n = shape.num_elements();
    if (n == 0) return outs;
    KernelSpec spec = fused_spec(g, in_place);
    std::vector<backend::StridedView> views;
    std::vector<const Block*> bufs;
    for (std::size_t j = 0; j < n_out; ++j) {
      const auto& y = static_cast<const VkTensor&>(*outs[j]);
      views.push_back(y.view());
      if (in_place[j] < 0) bufs.push_back(y.block.get());
    }
    for (const ir::Handle& h : g.inputs) {
      const auto& x = static_cast<const VkTensor&>(*h);
      views.push_back(x.view());
      bufs.push_back(x.block.get());
    }
    const std::size_t params = static_cast<std::size_t>(fused_params(n_out + n_in));
    constexpr auto kWords = static_cast<std::size_t>(kFusedParamWords);
    auto args = map_args(shape, views, params + kWords * g.code.size(), &spec.lin);
    EMBER_ASSERT(args.has_value());  // fusable() checked the rank
    for (std::size_t i = 0; i < g.code.size(); ++i) {
      const backend::FusedInstr& in = g.code[i];
      const std::size_t at = params + kWords * i;
      if (in.kind == backend::FusedInstr::Kind::Fill) {
        put_bits(*args, at, in.bits);
        continue;
      }
      if (in.kind == backend::FusedInstr::Kind::Random) {
        put_bits(*args, at, compute_bits(DType::F64, in.p0));
        put_bits(*args, at + 2, compute_bits(DType::F64, in.p1));
        put_bits(*args, at + 4, in.draw.seed);
        put_bits(*args, at + 6, in.draw.first);
        continue;
      }
      if (in.kind != backend::FusedInstr::Kind::Unary) continue;
      const DType dt = g.dtype_of(in.args[0]);
      put_bits(*args, at, compute_bits(dt, in.p0));
      put_bits(*args, at + 2, compute_bits(dt, in.p1));
    }
    const auto [gx, gy] = ctx_.groups_for(threads_of(spec, n), kLocal);
    ctx_.dispatch(spec, *args, bufs, gx, gy);
    return outs;
  }
  bool runs_fused() const override { return true; }
  // Scalars are parameters of fused kernels (Fill instructions: one kernel serves every
  // value), and random draws print inside them (the Random kernel's own draw function, at
  // the counters reserved when the draw was recorded: Note [Reserved draws]).
  backend::FusedCaps fused_caps() const override { return {.fills = true, .random = true}; }
  backend::RandomCounters reserve_random(std::uint64_t n) override {
    std::lock_guard lk(ctx_.mutex());
    return take_counters(n);
  }
  ir::Handle draw_random(const ir::Random& op, const backend::RandomCounters& at) override {
    std::lock_guard lk(ctx_.mutex());
    return draw(op, at);
  }

 private:
  // Whether group g runs here as one kernel (see run_fused).
  bool fusable(const backend::FusedGroup& g) const {
    using K = backend::FusedInstr::Kind;
    // A group all of whose values were dropped (two draws nobody reads) has no outputs: it
    // runs op by op, as on Cuda, so an integer division in it still raises its error.
    if (g.outputs.empty()) return false;
    for (std::int32_t o : g.outputs) {
      if (!out_fits(g.shape, g.dtype_of(o))) return false;
    }
    std::size_t ints = 0;
    for (const ir::Handle& h : g.inputs) {
      const auto* t = dynamic_cast<const VkTensor*>(h.get());
      if (t == nullptr || !fits(*t) || !dtype_ok(t->dtype())) return false;
    }
    for (const backend::FusedInstr& in : g.code) {
      if (in.row()) return false;  // not yet
      if (in.kind == K::Fill) {
        if (!dtype_ok(in.out)) return false;
        continue;
      }
      if (in.kind == K::Random) {
        if (!supports_one(ir::Random{g.shape, in.out, Distribution{in.dist, in.p0, in.p1}}))
          return false;
        continue;
      }
      if (in.kind == K::Matmul || in.kind == K::Conv) return false;  // (Note [Matmul apart])
      if (!dtype_ok(in.out)) return false;
      const DType dt = g.dtype_of(in.kind == K::Where ? in.args[1] : in.args[0]);
      if (in.kind == K::Unary && !printable(in.unary, dt)) return false;
      if (in.kind == K::Binary && !printable(in.binary, dt)) return false;
      ints += kind_of(dt) == Kind::Int && (in.kind == K::Binary || in.kind == K::Unary);
    }
    // Bindings: the arguments, the outputs and inputs, the error word (counted for any
    // integer arithmetic: enough whether or not it divides).
    const std::size_t bindings = 1 + g.outputs.size() + g.inputs.size() + (ints > 0);
    if (bindings > ctx_.physical().max_bindings) return false;
    // The walk's rank after collapsing (the outputs are contiguous).
    std::vector<std::int64_t> dims(g.shape.dims().begin(), g.shape.dims().end());
    std::vector<std::vector<std::int64_t>> st = {backend::contiguous_strides(g.shape)};
    for (const ir::Handle& h : g.inputs) {
      const auto& x = static_cast<const VkTensor&>(*h);
      st.push_back(backend::expand_view(x.view(), g.shape).strides);
    }
    backend::collapse_dims(dims, st);
    return dims.size() <= static_cast<std::size_t>(kMaxDims);
  }
  // Note [In-place reuse] for Vulkan tensors: the op holds the only reference to x, nothing
  // else shares x's block, and x is a contiguous view of the whole block (offset 0) with
  // the output's shape and dtype.
  static bool reusable(const ir::Handle& h, const Shape& shape, DType dt) {
    if (!h || h.use_count() != 1) return false;
    const auto& x = static_cast<const VkTensor&>(*h);
    const std::size_t bytes = shape.num_elements() * size_of(dt);
    return x.block.use_count() == 1 && x.dtype() == dt && x.shape() == shape && x.contiguous() &&
           bytes > 0 && x.block->bytes() == bytes;
  }

  // ---- what runs here ----
  bool dtype_ok(DType dt) const {
    const Features& f = ctx_.features();
    switch (dt) {
      case DType::F32:
      case DType::I32:
        return true;
      case DType::F64:
        return f.f64;
      case DType::I64:
        return f.i64;
      case DType::F16:
        return f.storage16 && f.f16;
      case DType::BF16:
      case DType::I16:
        return f.storage16 && f.i16;
      case DType::I8:
      case DType::U8:
      case DType::Bool:
        return f.storage8 && f.i8;
    }
    return false;
  }
  std::size_t limit() const {
    return std::min<std::size_t>(ctx_.max_range(), std::numeric_limits<std::int32_t>::max());
  }
  // Whether the kernels can address the tensor's buffer with 32-bit indices in one binding.
  bool fits(const VkTensor& t) const { return t.block->mem().size <= limit(); }
  bool out_fits(const Shape& s, DType dt) const {
    return s.num_elements() * size_of(dt) <= limit() && s.rank() <= kMaxDims;
  }
  bool all_ok(std::initializer_list<DType> dts) const {
    for (DType d : dts) {
      if (!dtype_ok(d)) return false;
    }
    return true;
  }

  bool supports_one(const ir::Unary& o) const {
    return all_ok({o.x->dtype(), o.out}) && printable(o.fn, o.x->dtype()) &&
           out_fits(o.x->shape(), o.x->dtype());
  }
  bool supports_one(const ir::Binary& o) const {
    return all_ok({o.lhs->dtype(), o.out}) && printable(o.fn, o.lhs->dtype()) &&
           out_fits(o.out_shape, o.lhs->dtype()) && out_fits(o.out_shape, o.out);
  }
  bool supports_one(const ir::Where& o) const {
    return all_ok({DType::Bool, o.a->dtype()}) && out_fits(o.out_shape, o.a->dtype());
  }
  bool supports_one(const ir::Cast& o) const {
    return all_ok({o.x->dtype(), o.to}) && out_fits(o.x->shape(), o.to) &&
           out_fits(o.x->shape(), o.x->dtype());
  }
  bool supports_one(const ir::Reduce& o) const {
    return all_ok({o.x->dtype(), o.out}) && out_fits(o.x->shape(), o.x->dtype());
  }
  bool supports_one(const ir::Scan& o) const {
    return dtype_ok(o.x->dtype()) && out_fits(o.x->shape(), o.x->dtype());
  }
  bool supports_one(const ir::Softmax& o) const {
    // GLSL has no exp for double.
    return o.x->dtype() != DType::F64 && dtype_ok(o.x->dtype()) &&
           out_fits(o.x->shape(), o.x->dtype());
  }
  bool supports_one(const ir::LayerNorm& o) const {
    return dtype_ok(o.x->dtype()) && out_fits(o.x->shape(), o.x->dtype());
  }
  bool supports_one(const ir::Matmul& o) const {
    if (!dtype_ok(o.a->dtype()) || !out_fits(o.out_shape, o.a->dtype())) return false;
    const auto& lim = ctx_.physical().props.limits;
    const std::size_t r = o.out_shape.rank();
    std::size_t batch = 1, batch_dims = 0;
    for (std::size_t d = 0; d + 2 < r; ++d) {
      batch *= o.out_shape[d];
      batch_dims += o.out_shape[d] > 1;
    }
    const std::size_t m = o.out_shape[r - 2], n = o.out_shape[r - 1];
    const std::size_t t = matmul_tile(false);  // the smaller tile needs more workgroups
    return batch_dims <= 4 && batch <= lim.maxComputeWorkGroupCount[2] &&
           (m + t - 1) / t <= lim.maxComputeWorkGroupCount[1] &&
           (n + t - 1) / t <= lim.maxComputeWorkGroupCount[0];
  }
  bool supports_one(const ir::Reshape& o) const {
    const auto& x = static_cast<const VkTensor&>(*o.x);
    return backend::reshape_view(x.view(), o.shape).has_value() ||
           (dtype_ok(x.dtype()) && out_fits(x.shape(), x.dtype()));
  }
  bool supports_one(const ir::Permute&) const { return true; }
  bool supports_one(const ir::Expand&) const { return true; }
  bool supports_one(const ir::Slice&) const { return true; }
  bool supports_one(const ir::Flip&) const { return true; }
  bool supports_one(const ir::SliceAssign& o) const {
    return dtype_ok(o.x->dtype()) && out_fits(o.x->shape(), o.x->dtype());
  }
  bool supports_one(const ir::Cat& o) const {
    return !o.xs.empty() && dtype_ok(o.xs[0]->dtype()) && out_fits(o.out_shape, o.xs[0]->dtype());
  }
  bool supports_one(const ir::Fill& o) const {
    return dtype_ok(o.dtype) && out_fits(o.shape, o.dtype);
  }
  bool supports_one(const ir::Arange& o) const {
    // start + i * step in f64, as the host.
    return ctx_.features().f64 && dtype_ok(o.dtype) && out_fits(Shape{o.n}, o.dtype);
  }
  bool supports_one(const ir::Random& o) const {
    // 64-bit integer hashing and f64 uniforms, as the Cpu's generator.
    return ctx_.features().i64 && ctx_.features().f64 && dtype_ok(o.dtype) &&
           out_fits(o.shape, o.dtype);
  }
  // Indexing reads I64 indices (shaderInt64). The adds of scatter_add and index_add run in
  // their dtype's compute type, one element at a time; 16-bit floats are added widened, as
  // on the Cpu (x and src cast to f32, repeated indices summed in f32, rounded once), so
  // they need 16-bit storage and nothing more. Loops along a line stay within lavapipe's
  // 65535 iterations.
  // Where x and src are 16-bit floats: whether their f32 copies fit the kernels.
  bool widened_fits(const ir::Handle& x, const ir::Handle& src) const {
    return !is_half(x->dtype()) ||
           (out_fits(x->shape(), DType::F32) && out_fits(src->shape(), DType::F32));
  }
  bool index_ok(const ir::Handle& x, const ir::Handle& index) const {
    return ctx_.features().i64 && dtype_ok(x->dtype()) && out_fits(x->shape(), x->dtype()) &&
           x->shape().rank() <= static_cast<std::size_t>(kMaxDims) &&
           index->shape().rank() <= static_cast<std::size_t>(kMaxDims);
  }
  bool supports_one(const ir::Gather& o) const {
    return index_ok(o.x, o.index) && out_fits(o.index->shape(), o.x->dtype());
  }
  bool supports_one(const ir::IndexSelect& o) const {
    return index_ok(o.x, o.index) && out_fits(ir::out_shape(o), o.x->dtype());
  }
  bool supports_one(const ir::Scatter& o) const {
    return index_ok(o.x, o.index) && (!o.add || widened_fits(o.x, o.src)) &&
           out_fits(o.index->shape(), DType::I64) && o.index->shape()[o.dim] <= 65535;
  }
  bool supports_one(const ir::IndexAdd& o) const {
    return index_ok(o.x, o.index) && widened_fits(o.x, o.src) &&
           o.index->shape().num_elements() <= 65535;
  }
  bool supports_one(const ir::Sort& o) const {
    // Ranks in O(n) per element: short lines only.
    return ctx_.features().i64 && dtype_ok(o.x->dtype()) && out_fits(o.x->shape(), DType::I64) &&
           o.x->shape()[o.dim] <= kSortLine;
  }
  bool supports_one(const ir::Unfold& o) const {
    return dtype_ok(o.x->dtype()) && out_fits(ir::out_shape(o), o.x->dtype());
  }
  bool supports_one(const ir::Fold& o) const {
    return kind_of(o.x->dtype()) == Kind::Float && dtype_ok(o.x->dtype()) &&
           out_fits(o.x->shape(), o.x->dtype()) && out_fits(ir::out_shape(o), o.x->dtype());
  }
  bool supports_one(const ir::Pool& o) const {
    return o.x->dtype() != DType::Bool && dtype_ok(o.x->dtype()) &&
           out_fits(o.x->shape(), o.x->dtype());
  }
  bool supports_one(const ir::Nonzero& o) const {
    const Shape& s = o.x->shape();
    return ctx_.features().i64 && dtype_ok(o.x->dtype()) && s.rank() <= kMaxDims &&
           out_fits(s, o.x->dtype()) && out_fits(Shape{s.num_elements(), s.rank()}, DType::I64);
  }
  // Direct convolution (Note [Direct convolution] in codegen.cpp): float dtypes, 1 to 3
  // spatial dims; WeightGrad's threads stride N * L within lavapipe's loop cap.
  bool supports_one(const ir::Conv& o) const {
    const DType dt = o.x->dtype();
    const std::size_t rank = o.x->shape().rank();
    if (kind_of(dt) != Kind::Float || !dtype_ok(dt) || o.w->dtype() != dt || rank < 3 || rank > 5 ||
        o.w->shape().rank() != rank || o.groups < 1)
      return false;
    const Shape out = ir::out_shape(o);
    if (!out_fits(o.x->shape(), dt) || !out_fits(o.w->shape(), dt) || !out_fits(out, dt))
      return false;
    if (o.pass == ir::ConvPass::WeightGrad) {
      const Shape& g = o.w->shape();
      return g.num_elements() / std::max<std::size_t>(g[1], 1) <= kLoopValues;  // N * L
    }
    return true;
  }
  bool supports_one(const ir::MaxPoolGrad& o) const {
    const DType dt = o.x->dtype();
    return (dt == DType::F32 || dt == DType::F64) && dtype_ok(dt) && out_fits(o.x->shape(), dt) &&
           out_fits(o.y->shape(), dt);
  }
  // Batch norm: f32 and f64 (as the Cpu), BatchNorm and BatchNormGrad under one condition
  // (its rule runs BatchNormGrad on this backend), per-channel loops within lavapipe's cap.
  bool batch_norm_ok(const ir::Handle& x) const {
    const DType dt = x->dtype();
    const Shape& s = x->shape();
    if ((dt != DType::F32 && dt != DType::F64) || !dtype_ok(dt) || s.rank() < 2 ||
        !out_fits(s, dt) || s[1] == 0)
      return false;
    const std::size_t values = s.num_elements() / s[1];  // N * S per channel
    return values >= 1 && values <= kLoopValues;
  }
  bool supports_one(const ir::BatchNorm& o) const { return batch_norm_ok(o.x); }
  bool supports_one(const ir::BatchNormGrad& o) const { return batch_norm_ok(o.x); }
  bool supports_one(const ir::Svd&) const { return false; }
  // No RMS norm kernel: the tensor layer composes it (ops::rms_norm).
  bool supports_one(const ir::RmsNorm&) const { return false; }
  bool supports_one(const ir::RmsNormGrad&) const { return false; }
  // Nor group norm's: nn::GroupNorm composes it (Note [Group norm's own op]).
  bool supports_one(const ir::GroupNorm&) const { return false; }
  bool supports_one(const ir::GroupNormGrad&) const { return false; }
  // No attention kernel: the tensor layer composes attention from Matmul and Softmax.
  bool supports_one(const ir::Attention&) const { return false; }
  bool supports_one(const ir::AttentionGrad&) const { return false; }

  // ---- helpers ----
  const VkTensor& as_vk(const ir::Handle& h, const char* what) const {
    const auto* t = dynamic_cast<const VkTensor*>(h.get());
    EMBER_CHECK(t != nullptr, name() + ": " + what + " got a tensor of another backend");
    return *t;
  }
  std::shared_ptr<VkTensor> view(const VkTensor& x, backend::StridedView v) const {
    return std::make_shared<VkTensor>(x.block, std::move(v), x.dtype());
  }
  static Operand operand(const VkTensor& t) { return {t.block.get(), t.view()}; }

  // The arguments of an element-wise walk over `shape` (kernel's map layout, codegen.hpp) of
  // `ops` (the output(s) first, then the inputs, each broadcast to shape), dims collapsed
  // where every operand allows it (backend::collapse_dims), `words` long; nullopt when
  // more than kMaxDims dims remain.
  static std::optional<std::vector<std::int32_t>> map_args(
      const Shape& shape, const std::vector<backend::StridedView>& ops, std::size_t words,
      std::uint32_t* lin = nullptr) {
    std::vector<std::int64_t> dims(shape.dims().begin(), shape.dims().end());
    std::vector<std::vector<std::int64_t>> st;
    std::vector<std::int64_t> offsets;
    for (const backend::StridedView& v : ops) {
      const backend::StridedView e = v.shape == shape ? v : backend::expand_view(v, shape);
      st.push_back(e.strides);
      offsets.push_back(e.offset);
    }
    backend::collapse_dims(dims, st);
    if (dims.size() > static_cast<std::size_t>(kMaxDims)) return std::nullopt;
    if (lin != nullptr) {
      // The linear walk (Note [Linear walk]): one run, the output contiguous, each input
      // contiguous or a broadcast scalar.
      *lin = 0;
      const std::size_t n = shape.num_elements();
      const bool small = n <= static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) -
                                  kMapUnroll * kLocal;  // the kernel's indices stay in int
      if (small && !st.empty() && dims.size() <= 1 && st.size() < 31 &&
          (dims.empty() || st[0][0] == 1)) {
        std::uint32_t l = 1;
        for (std::size_t j = 1; j < st.size() && l != 0; ++j) {
          if (dims.empty() || st[j][0] == 1) continue;
          l = st[j][0] == 0 ? l | (1u << (j + 1)) : 0;
        }
        *lin = l;
      }
    }
    std::vector<std::int32_t> args(words, 0);
    args[0] = static_cast<std::int32_t>(shape.num_elements());
    args[1] = static_cast<std::int32_t>(dims.size());
    for (std::size_t d = 0; d < dims.size(); ++d) args[2 + d] = static_cast<std::int32_t>(dims[d]);
    for (std::size_t j = 0; j < st.size(); ++j) {
      const std::size_t base = kMapOperand + j * kMapStride;
      args[base] = static_cast<std::int32_t>(offsets[j]);
      for (std::size_t d = 0; d < dims.size(); ++d)
        args[base + 1 + d] = static_cast<std::int32_t>(st[j][d]);
    }
    return args;
  }
  // The threads of an element-wise kernel over n elements: kMapUnroll elements a thread on
  // the linear walk.
  static std::int64_t threads_of(const KernelSpec& spec, std::size_t n) {
    const auto e = static_cast<std::int64_t>(n);
    return spec.lin != 0 ? (e + kMapUnroll - 1) / kMapUnroll : e;
  }
  static void put_bits(std::vector<std::int32_t>& args, std::size_t at, std::uint64_t bits) {
    args[at] = static_cast<std::int32_t>(bits & 0xffffffffu);
    args[at + 1] = static_cast<std::int32_t>(bits >> 32);
  }

  // An element-wise kernel writing `out` (any view) from `ins` (broadcast to out's shape).
  void run_map(KernelSpec spec, const Operand& out, const std::vector<Operand>& ins,
               std::uint64_t p0 = 0, std::uint64_t p1 = 0) {
    const Shape& shape = out.v.shape;
    const std::size_t n = shape.num_elements();
    if (n == 0) return;
    std::vector<backend::StridedView> views = {out.v};
    for (const Operand& in : ins) views.push_back(in.v);
    auto args = map_args(shape, views, kMapArgs, &spec.lin);
    EMBER_ASSERT(args.has_value());  // supports() admits ranks up to kMaxDims
    put_bits(*args, kMapParams, p0);
    put_bits(*args, kMapParams + 2, p1);
    std::vector<const Block*> bufs = {out.block};
    for (const Operand& in : ins) bufs.push_back(in.block);
    const auto [gx, gy] = ctx_.groups_for(threads_of(spec, n), kLocal);
    ctx_.dispatch(spec, *args, bufs, gx, gy);
  }

  std::shared_ptr<VkTensor> copy_of(const VkTensor& x) {
    auto out = ctx_.empty(x.shape(), x.dtype(), "copy");
    run_map(copy_spec(x.dtype()), operand(*out), {operand(x)});
    return out;
  }
  std::shared_ptr<const VkTensor> contiguous(const ir::Handle& h) {
    const VkTensor& x = as_vk(h, "contiguous");
    if (x.contiguous()) return std::static_pointer_cast<const VkTensor>(h);
    return copy_of(x);
  }
  struct Dims3 {
    std::size_t outer = 1, n = 1, inner = 1;
  };
  static Dims3 split_at(const Shape& s, std::size_t dim) {
    Dims3 d{1, s[dim], 1};
    for (std::size_t i = 0; i < dim; ++i) d.outer *= s[i];
    for (std::size_t i = dim + 1; i < s.rank(); ++i) d.inner *= s[i];
    return d;
  }
  // A kernel over lines [outer, n, inner] of a contiguous x: args (lines, n, inner, 0);
  // make_spec(group) is the kernel, a workgroup per line (group) or a thread per line.
  template <class MakeSpec>
  ir::Handle run_lines(MakeSpec make_spec, const ir::Handle& xh, std::size_t dim,
                       const Shape& out_shape, DType out_dt) {
    auto x = contiguous(xh);
    const Dims3 d = split_at(x->shape(), dim);
    const bool group = d.n > kGroupLine;
    const KernelSpec spec = make_spec(group);
    auto out = ctx_.empty(out_shape, out_dt, spec.key());
    const std::size_t lines = d.outer * d.inner;
    if (lines == 0 || out_shape.num_elements() == 0) return out;
    const std::vector<std::int32_t> args = {static_cast<std::int32_t>(lines),
                                            static_cast<std::int32_t>(d.n),
                                            static_cast<std::int32_t>(d.inner), 0};
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(lines), group ? 1 : kLocal);
    ctx_.dispatch(spec, args, {out->block.get(), x->block.get()}, gx, gy);
    return out;
  }

  // ---- the ops ----
  ir::Handle run_one(ir::Unary& o) {
    const VkTensor& x = as_vk(o.x, "Unary");
    auto out = ctx_.empty(x.shape(), o.out, "Unary");
    run_map(unary_spec(o.fn, x.dtype()), operand(*out), {operand(x)}, compute_bits(x.dtype(), o.p0),
            compute_bits(x.dtype(), o.p1));
    return out;
  }
  ir::Handle run_one(ir::Binary& o) {
    const VkTensor& a = as_vk(o.lhs, "Binary");
    const VkTensor& b = as_vk(o.rhs, "Binary");
    auto out = ctx_.empty(o.out_shape, o.out, "Binary");
    run_map(binary_spec(o.fn, a.dtype()), operand(*out), {operand(a), operand(b)});
    return out;
  }
  ir::Handle run_one(ir::Where& o) {
    const VkTensor& c = as_vk(o.cond, "Where");
    const VkTensor& a = as_vk(o.a, "Where");
    const VkTensor& b = as_vk(o.b, "Where");
    auto out = ctx_.empty(o.out_shape, a.dtype(), "Where");
    run_map(where_spec(a.dtype()), operand(*out), {operand(c), operand(a), operand(b)});
    return out;
  }
  ir::Handle run_one(ir::Cast& o) {
    const VkTensor& x = as_vk(o.x, "Cast");
    auto out = ctx_.empty(x.shape(), o.to, "Cast");
    run_map(x.dtype() == o.to ? copy_spec(o.to) : cast_spec(x.dtype(), o.to), operand(*out),
            {operand(x)});
    return out;
  }
  // Lines read once into registers (Note [Cached lines] in codegen.cpp): a preview kernel.
  bool line_cached(std::size_t n) const {
    return preview_ && !tuned("nolinecache") && n <= kLocal * kLineCache;
  }
  ir::Handle run_one(ir::Reduce& o) {
    return run_lines([&](bool g) { return reduce_spec(o.fn, o.x->dtype(), g); }, o.x, o.dim,
                     ir::out_shape(o), o.out);
  }
  ir::Handle run_one(ir::Scan& o) {
    return run_lines([&](bool g) { return scan_spec(o.fn, o.x->dtype(), g); }, o.x, o.dim,
                     o.x->shape(), o.x->dtype());
  }
  ir::Handle run_one(ir::Softmax& o) {
    const bool cached = line_cached(o.x->shape()[o.dim]);
    return run_lines([&](bool g) { return softmax_spec(o.x->dtype(), o.log, g, cached); }, o.x,
                     o.dim, o.x->shape(), o.x->dtype());
  }
  ir::Handle run_one(ir::LayerNorm& o) {
    auto x = contiguous(o.x);
    const DType dt = x->dtype();
    auto out = ctx_.empty(x->shape(), dt, "LayerNorm");
    std::size_t n = 1;
    for (std::size_t d = x->shape().rank() - o.dims; d < x->shape().rank(); ++d) n *= x->shape()[d];
    const std::size_t rows = n == 0 ? 0 : x->shape().num_elements() / n;
    if (rows == 0 || n == 0) return out;
    std::shared_ptr<const VkTensor> w, b;
    std::vector<const Block*> bufs = {out->block.get(), x->block.get()};
    if (o.weight) {
      w = contiguous(o.weight);
      bufs.push_back(w->block.get());
    }
    if (o.bias) {
      b = contiguous(o.bias);
      bufs.push_back(b->block.get());
    }
    const std::uint64_t eps = compute_bits(dt, o.eps);
    const std::vector<std::int32_t> args = {
        static_cast<std::int32_t>(rows), static_cast<std::int32_t>(n), 0,
        static_cast<std::int32_t>(eps & 0xffffffffu), static_cast<std::int32_t>(eps >> 32)};
    const bool group = n > kGroupLine;
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(rows), group ? 1 : kLocal);
    ctx_.dispatch(
        layer_norm_spec(dt, o.weight != nullptr, o.bias != nullptr, group, line_cached(n)), args,
        bufs, gx, gy);
    return out;
  }
  ir::Handle run_one(ir::Matmul& o) {
    const VkTensor& a = as_vk(o.a, "Matmul");
    const VkTensor& b = as_vk(o.b, "Matmul");
    const DType dt = a.dtype();
    auto out = ctx_.empty(o.out_shape, dt, "Matmul");
    const std::size_t r = o.out_shape.rank(), ra = a.shape().rank(), rb = b.shape().rank();
    const std::size_t M = o.out_shape[r - 2], N = o.out_shape[r - 1], K = a.shape()[ra - 1];
    if (o.out_shape.num_elements() == 0) return out;
    std::vector<std::int32_t> args(22, 0);
    args[0] = static_cast<std::int32_t>(M);
    args[1] = static_cast<std::int32_t>(N);
    args[2] = static_cast<std::int32_t>(K);
    args[3] = static_cast<std::int32_t>(a.offset);
    args[4] = static_cast<std::int32_t>(a.strides[ra - 2]);
    args[5] = static_cast<std::int32_t>(a.strides[ra - 1]);
    args[6] = static_cast<std::int32_t>(b.offset);
    args[7] = static_cast<std::int32_t>(b.strides[rb - 2]);
    args[8] = static_cast<std::int32_t>(b.strides[rb - 1]);
    // The output's batch dims of extent > 1, with each operand's stride there (0 where it
    // broadcasts or lacks the dim).
    std::size_t nb = 0, batch = 1;
    for (std::size_t d = 0; d + 2 < r; ++d) {
      const std::size_t ext = o.out_shape[d];
      batch *= ext;
      if (ext == 1) continue;
      const auto stride_of = [&](const VkTensor& t, std::size_t rt) -> std::int64_t {
        const std::size_t back = r - d;  // position from the end
        if (back > rt) return 0;
        const std::size_t dt_ = rt - back;
        return t.shape()[dt_] == 1 ? 0 : t.strides[dt_];
      };
      args[10 + nb] = static_cast<std::int32_t>(ext);
      args[14 + nb] = static_cast<std::int32_t>(stride_of(a, ra));
      args[18 + nb] = static_cast<std::int32_t>(stride_of(b, rb));
      ++nb;
    }
    args[9] = static_cast<std::int32_t>(nb);
    // The large tile where the product gives the device enough of them: at least
    // kMatmulLargeTiles 128 x 128 tiles, neither side under 512.
    const bool coop = takes_coopmat(dt, ctx_.features().coopmat);
    const bool large = coop || (!tuned("tile64") && M >= 512 && N >= 512 &&
                                batch * ((M + 127) / 128) * ((N + 127) / 128) >= kMatmulLargeTiles);
    const std::size_t t = static_cast<std::size_t>(matmul_tile(large));
    const auto groups = [t](std::size_t v) { return static_cast<std::uint32_t>((v + t - 1) / t); };
    std::vector<const Block*> bufs = {out->block.get(), a.block.get(), b.block.get()};
    if (coop) {
      // Row-major operands whose rows are runs of 8 aligned elements load 16-byte words.
      bool vec8 = !tuned("nocoopvec") && args[5] == 1 && args[8] == 1 && K % 8 == 0 && N % 8 == 0;
      for (int w : {3, 4, 6, 7}) vec8 = vec8 && args[static_cast<std::size_t>(w)] % 8 == 0;
      for (std::size_t d = 0; d < nb; ++d)
        vec8 = vec8 && args[14 + d] % 8 == 0 && args[18 + d] % 8 == 0;
      if (vec8) bufs.insert(bufs.end(), {a.block.get(), b.block.get()});
      ctx_.dispatch(matmul_coop_spec(vec8), args, bufs, groups(N), groups(M),
                    static_cast<std::uint32_t>(batch));
      return out;
    }
    ctx_.dispatch(matmul_spec(dt, large, !tuned("noprefetch")), args, bufs, groups(N), groups(M),
                  static_cast<std::uint32_t>(batch));
    return out;
  }
  ir::Handle run_one(ir::Reshape& o) {
    const VkTensor& x = as_vk(o.x, "Reshape");
    if (auto v = backend::reshape_view(x.view(), o.shape)) return view(x, std::move(*v));
    auto c = copy_of(x);
    return view(*c, {o.shape, backend::contiguous_strides(o.shape), 0});
  }
  ir::Handle run_one(ir::Permute& o) {
    const VkTensor& x = as_vk(o.x, "Permute");
    return view(x, backend::permute_view(x.view(), o.axes));
  }
  ir::Handle run_one(ir::Expand& o) {
    const VkTensor& x = as_vk(o.x, "Expand");
    return view(x, backend::expand_view(x.view(), o.shape));
  }
  ir::Handle run_one(ir::Slice& o) {
    const VkTensor& x = as_vk(o.x, "Slice");
    return view(x, backend::slice_view(x.view(), o.ranges));
  }
  ir::Handle run_one(ir::Flip& o) {
    const VkTensor& x = as_vk(o.x, "Flip");
    return view(x, backend::flip_view(x.view(), o.axes));
  }
  ir::Handle run_one(ir::SliceAssign& o) {
    const VkTensor& x = as_vk(o.x, "SliceAssign");
    const VkTensor& v = as_vk(o.value, "SliceAssign");
    auto out = copy_of(x);
    run_map(copy_spec(x.dtype()), {out->block.get(), backend::slice_view(out->view(), o.ranges)},
            {operand(v)});
    return out;
  }
  ir::Handle run_one(ir::Cat& o) {
    const DType dt = o.xs.front()->dtype();
    auto out = ctx_.empty(o.out_shape, dt, "Cat");
    std::size_t at = 0;
    for (const ir::Handle& h : o.xs) {
      const VkTensor& x = as_vk(h, "Cat");
      std::vector<ir::SliceRange> ranges;
      for (std::size_t d = 0; d < o.out_shape.rank(); ++d) {
        ranges.push_back(d == o.dim ? ir::SliceRange{at, at + x.shape()[d], 1}
                                    : ir::SliceRange{0, o.out_shape[d], 1});
      }
      at += x.shape()[o.dim];
      run_map(copy_spec(dt), {out->block.get(), backend::slice_view(out->view(), ranges)},
              {operand(x)});
    }
    return out;
  }
  ir::Handle run_one(ir::Fill& o) {
    auto out = ctx_.empty(o.shape, o.dtype, "Fill");
    const std::size_t n = o.shape.num_elements();
    if (n == 0) return out;
    const std::uint64_t bits = kind_of(o.dtype) == Kind::Int
                                   ? compute_bits_int(o.dtype, o.int_value)
                                   : compute_bits(o.dtype, o.value);
    const std::vector<std::int32_t> args = {static_cast<std::int32_t>(n),
                                            static_cast<std::int32_t>(bits & 0xffffffffu),
                                            static_cast<std::int32_t>(bits >> 32)};
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(n), kLocal);
    ctx_.dispatch(fill_spec(o.dtype), args, {out->block.get()}, gx, gy);
    return out;
  }
  ir::Handle run_one(ir::Arange& o) {
    auto out = ctx_.empty(Shape{o.n}, o.dtype, "Arange");
    if (o.n == 0) return out;
    const std::uint64_t s = compute_bits(DType::F64, o.start),
                        st = compute_bits(DType::F64, o.step);
    const std::vector<std::int32_t> args = {
        static_cast<std::int32_t>(o.n), static_cast<std::int32_t>(s & 0xffffffffu),
        static_cast<std::int32_t>(s >> 32), static_cast<std::int32_t>(st & 0xffffffffu),
        static_cast<std::int32_t>(st >> 32)};
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(o.n), kLocal);
    ctx_.dispatch(arange_spec(o.dtype), args, {out->block.get()}, gx, gy);
    return out;
  }
  // The Cpu's generator and stream: a draw of n elements takes counters [counter, +n) of
  // the seed's key, so a seeded device draws the Cpu's bits.
  ir::Handle run_one(ir::Random& o) { return draw(o, take_counters(o.shape.num_elements())); }
  // The counters of a draw of n elements (the context's mutex held).
  backend::RandomCounters take_counters(std::uint64_t n) {
    const backend::RandomCounters at{seed_, counter_};
    counter_ += n;
    return at;
  }
  ir::Handle draw(const ir::Random& o, const backend::RandomCounters& at) {
    auto out = ctx_.empty(o.shape, o.dtype, "random");
    const std::size_t n = o.shape.num_elements();
    if (n == 0) return out;
    std::vector<std::int32_t> args(10, 0);
    args[0] = static_cast<std::int32_t>(n);
    put_bits(args, 1, at.seed);
    put_bits(args, 3, at.first);
    args[5] = static_cast<std::int32_t>(o.dist.kind);
    put_bits(args, 6, compute_bits(DType::F64, o.dist.a));
    put_bits(args, 8, compute_bits(DType::F64, o.dist.b));
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(n), kLocal);
    ctx_.dispatch(random_spec(o.dtype), args, {out->block.get()}, gx, gy);
    return out;
  }
  // ---- indexing ----
  ir::Handle gather(const ir::Handle& xh, std::size_t dim, const ir::Handle& ih, bool select,
                    const Shape& out_shape) {
    const VkTensor& x = as_vk(xh, "Gather");
    const VkTensor& idx = as_vk(ih, "Gather");
    auto out = ctx_.empty(out_shape, x.dtype(), select ? "select" : "gather");
    const std::size_t n = out_shape.num_elements();
    if (n == 0) return out;
    std::vector<std::int32_t> args(30, 0);
    args[0] = static_cast<std::int32_t>(n);
    args[1] = static_cast<std::int32_t>(out_shape.rank());
    args[10] = static_cast<std::int32_t>(x.offset);
    args[19] = static_cast<std::int32_t>(idx.offset);
    for (std::size_t d = 0; d < out_shape.rank(); ++d) {
      args[2 + d] = static_cast<std::int32_t>(out_shape[d]);
      args[11 + d] = static_cast<std::int32_t>(x.strides[d]);
    }
    for (std::size_t d = 0; d < idx.shape().rank(); ++d)
      args[20 + d] = static_cast<std::int32_t>(idx.strides[d]);
    args[28] = static_cast<std::int32_t>(dim);
    args[29] = static_cast<std::int32_t>(x.shape()[dim]);
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(n), kLocal);
    ctx_.dispatch(gather_spec(x.dtype(), select), args,
                  {out->block.get(), x.block.get(), idx.block.get()}, gx, gy);
    return out;
  }
  ir::Handle run_one(ir::Gather& o) { return gather(o.x, o.dim, o.index, false, o.index->shape()); }
  ir::Handle run_one(ir::IndexSelect& o) {
    return gather(o.x, o.dim, o.index, true, ir::out_shape(o));
  }
  // x cast to `to` (a new contiguous tensor).
  std::shared_ptr<VkTensor> cast_to(const ir::Handle& h, DType to) {
    const VkTensor& x = as_vk(h, "cast");
    auto out = ctx_.empty(x.shape(), to, "cast");
    run_map(cast_spec(x.dtype(), to), operand(*out), {operand(x)});
    return out;
  }
  // A 16-bit float add (scatter_add, index_add) as the Cpu runs it: widened to f32, added,
  // rounded once.
  template <class Op>
  ir::Handle widened(Op& o) {
    const DType dt = o.x->dtype();
    Op w = o;
    w.x = cast_to(o.x, DType::F32);
    w.src = cast_to(o.src, DType::F32);
    return cast_to(run_one(w), dt);
  }
  ir::Handle run_one(ir::Scatter& o) {
    if (o.add && is_half(o.x->dtype())) return widened(o);
    auto out = copy_of(as_vk(o.x, "Scatter"));
    auto idx = contiguous(o.index);
    auto src = contiguous(o.src);
    const Shape& is = idx->shape();
    const std::size_t k = is[o.dim];
    if (is.num_elements() == 0) return out;
    std::vector<std::int32_t> args(20, 0);
    args[0] = static_cast<std::int32_t>(is.num_elements() / k);
    args[1] = static_cast<std::int32_t>(is.rank());
    for (std::size_t d = 0; d < is.rank(); ++d) {
      args[2 + d] = static_cast<std::int32_t>(is[d]);
      args[10 + d] = static_cast<std::int32_t>(out->strides[d]);
    }
    args[18] = static_cast<std::int32_t>(o.dim);
    args[19] = static_cast<std::int32_t>(out->shape()[o.dim]);
    const auto [gx, gy] = ctx_.groups_for(args[0], kLocal);
    ctx_.dispatch(scatter_spec(out->dtype(), o.add), args,
                  {out->block.get(), idx->block.get(), src->block.get()}, gx, gy);
    return out;
  }
  ir::Handle run_one(ir::IndexAdd& o) {
    if (is_half(o.x->dtype())) return widened(o);
    auto out = copy_of(as_vk(o.x, "IndexAdd"));
    auto idx = contiguous(o.index);
    auto src = contiguous(o.src);
    const Dims3 d = split_at(out->shape(), o.dim);
    const std::size_t k = idx->shape().num_elements();
    const std::size_t threads = d.outer * d.inner;
    if (threads == 0 || k == 0) return out;
    const std::vector<std::int32_t> args = {
        static_cast<std::int32_t>(threads), static_cast<std::int32_t>(d.inner),
        static_cast<std::int32_t>(d.n), static_cast<std::int32_t>(k)};
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(threads), kLocal);
    ctx_.dispatch(index_add_spec(out->dtype()), args,
                  {out->block.get(), idx->block.get(), src->block.get()}, gx, gy);
    return out;
  }

  std::vector<ir::Handle> run_one(ir::Sort& o) {
    auto x = contiguous(o.x);
    auto values = ctx_.empty(x->shape(), x->dtype(), "sort");
    auto indices = ctx_.empty(x->shape(), DType::I64, "sort");
    const std::size_t total = x->shape().num_elements();
    if (total == 0) return {values, indices};
    const Dims3 d = split_at(x->shape(), o.dim);
    const std::vector<std::int32_t> args = {static_cast<std::int32_t>(total),
                                            static_cast<std::int32_t>(d.n),
                                            static_cast<std::int32_t>(d.inner)};
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(total), kLocal);
    ctx_.dispatch(sort_spec(x->dtype(), o.descending), args,
                  {values->block.get(), indices->block.get(), x->block.get()}, gx, gy);
    return {values, indices};
  }
  // ---- sliding windows (the Cpu's geometry, backend::window3) ----
  // The window arguments (codegen.hpp): [0] threads, the geometry, [19..21) pad_bits, then
  // `extra` words (zero).
  static std::vector<std::int32_t> window_args(const backend::Window3& g, std::size_t threads,
                                               std::uint64_t pad_bits, std::size_t extra = 0) {
    std::vector<std::int32_t> args(21 + extra, 0);
    args[0] = static_cast<std::int32_t>(threads);
    const std::array<const std::array<std::size_t, 3>*, 6> fields = {
        &g.in, &g.kernel, &g.stride, &g.padding, &g.dilation, &g.out};
    for (std::size_t f = 0; f < fields.size(); ++f) {
      for (std::size_t d = 0; d < 3; ++d)
        args[1 + 3 * f + d] = static_cast<std::int32_t>((*fields[f])[d]);
    }
    put_bits(args, 19, pad_bits);
    return args;
  }
  void run_window(const KernelSpec& spec, const backend::Window3& g, std::size_t threads,
                  const VkTensor& out, const VkTensor& x, std::uint64_t pad_bits = 0,
                  std::vector<const Block*> more = {}) {
    if (threads == 0) return;
    const std::vector<std::int32_t> args = window_args(g, threads, pad_bits);
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(threads), kLocal);
    std::vector<const Block*> bufs = {out.block.get(), x.block.get()};
    bufs.insert(bufs.end(), more.begin(), more.end());
    ctx_.dispatch(spec, args, bufs, gx, gy);
  }
  ir::Handle run_one(ir::Unfold& o) {
    auto x = contiguous(o.x);
    auto out = ctx_.empty(ir::out_shape(o), x->dtype(), "unfold");
    const backend::Window3 g = backend::window3(x->shape(), o.window);
    std::uint64_t bits = 0;
    convert_elements(&o.pad_value, DType::F64, &bits, x->dtype(), 1);
    run_window(unfold_spec(x->dtype()), g, out->shape().num_elements(), *out, *x, bits);
    return out;
  }
  ir::Handle run_one(ir::Fold& o) {
    auto x = contiguous(o.x);
    auto out = ctx_.empty(ir::out_shape(o), x->dtype(), "fold");
    const backend::Window3 g = backend::window3(out->shape(), o.window);
    run_window(fold_spec(x->dtype()), g, out->shape().num_elements(), *out, *x);
    return out;
  }
  ir::Handle run_one(ir::Pool& o) {
    auto x = contiguous(o.x);
    auto out = ctx_.empty(ir::out_shape(o), x->dtype(), "pool");
    const backend::Window3 g = backend::window3(x->shape(), o.window);
    run_window(pool_spec(o.fn, x->dtype()), g, out->shape().num_elements(), *out, *x);
    return out;
  }

  // The counts of runs of kNonzeroRun elements on the device; their offsets on the host (the
  // output's shape waits for them); then each run writes its coordinates in order.
  ir::Handle run_one(ir::Nonzero& o) {
    auto x = contiguous(o.x);
    const Shape& s = x->shape();
    const std::size_t n = s.num_elements(), rank = s.rank();
    const std::size_t runs = (n + kNonzeroRun - 1) / kNonzeroRun;
    if (n == 0) return ctx_.empty(Shape{0, rank}, DType::I64, "nonzero");
    std::vector<std::int32_t> args(3 + kMaxDims, 0);
    args[0] = static_cast<std::int32_t>(n);
    args[1] = static_cast<std::int32_t>(kNonzeroRun);
    args[2] = static_cast<std::int32_t>(rank);
    for (std::size_t d = 0; d < rank; ++d) args[3 + d] = static_cast<std::int32_t>(s[d]);
    auto counts = ctx_.empty(Shape{runs}, DType::I32, "nonzero");
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(runs), kLocal);
    ctx_.dispatch(nonzero_spec(x->dtype(), false), args, {counts->block.get(), x->block.get()}, gx,
                  gy);
    std::vector<std::int32_t> offsets(runs);
    ctx_.download(*counts->block, offsets.data(), runs * sizeof(std::int32_t), "nonzero");
    std::size_t total = 0;
    for (std::int32_t& c : offsets) {
      const std::size_t k = static_cast<std::size_t>(c);
      c = static_cast<std::int32_t>(total);
      total += k;
    }
    auto out = ctx_.empty(Shape{total, rank}, DType::I64, "nonzero");
    if (total == 0 || rank == 0) return out;
    ctx_.upload(*counts->block, offsets.data(), runs * sizeof(std::int32_t), "nonzero");
    ctx_.dispatch(nonzero_spec(x->dtype(), true), args,
                  {out->block.get(), x->block.get(), counts->block.get()}, gx, gy);
    return out;
  }
  // Note [Convolution routes]: each pass of a convolution is a product with the column
  // matrix (unfold, K = prod(kernel) rows per channel): forward y[n] = W cols[n]; the
  // weight's gradient dW = sum over n of g[n] cols[n]^T; the input's gradient
  // fold(W^T g[n]). Where the column matrix fits one binding they run so, as unfold, the
  // tiled matmul, fold and a sum over N (kernels of this backend, grouped per
  // convolution group); elsewhere the direct kernels (Note [Direct convolution] in
  // codegen.cpp) convolve without it. On the H200 the products were 2 to 11 times faster
  // than the direct kernels (2026-12-02: [64, 64, 56, 56] * [64, 64, 3, 3] forward 2.2 ms
  // against 10.5 ms, its gradients 12.3 against 139.5 ms). EMBER_VULKAN_TUNE=convdirect
  // takes the direct kernels anyway.
  std::optional<ir::Handle> conv_gemm(ir::Conv& o, const Shape& out_shape) {
    if (tuned("convdirect")) return std::nullopt;
    const bool fwd = o.pass == ir::ConvPass::Forward, in_grad = o.pass == ir::ConvPass::InputGrad;
    // The image [N, C, *in] and the output (gradient) [N, O, *positions] of the pass.
    const Shape& xs = in_grad ? out_shape : o.x->shape();
    const Shape& ys = fwd ? out_shape : in_grad ? o.x->shape() : o.w->shape();
    const DType dt = o.x->dtype();
    const std::size_t n = xs[0], c = xs[1], g = o.groups, cg = c / g, oc = ys[1], og = oc / g;
    std::size_t k = 1;
    for (std::size_t e : o.window.kernel) k *= e;
    const std::size_t l = ys.num_elements() / std::max<std::size_t>(n * oc, 1);
    const Shape cols_shape{n, c * k, l};
    const Shape prod_shape = fwd       ? Shape{n, g, og, l}
                             : in_grad ? Shape{n, g, cg * k, l}
                                       : Shape{n, g, og, cg * k};
    if (!out_fits(cols_shape, dt) || !out_fits(prod_shape, dt) || n * l == 0) return std::nullopt;
    const auto strided = [](const Shape& s, std::vector<std::int64_t> st, std::int64_t at = 0) {
      return backend::StridedView{s, std::move(st), at};
    };
    const auto ck = static_cast<std::int64_t>(cg * k), ll = static_cast<std::int64_t>(l),
               gg = static_cast<std::int64_t>(g), o64 = static_cast<std::int64_t>(og);
    if (in_grad) {
      // [1, G, cg K, O/G] (W^T) x [N, G, O/G, L] -> the columns [N, G, cg K, L], folded.
      auto w = contiguous(o.w);
      auto gy = contiguous(o.x);
      ir::Matmul mm{
          view(*w, strided(Shape{1, g, cg * k, og}, {0, o64 * ck, 1, ck}, w->offset)),
          view(*gy, strided(Shape{n, g, og, l}, {gg * o64 * ll, o64 * ll, ll, 1}, gy->offset)),
          prod_shape};
      if (!supports_one(mm)) return std::nullopt;
      const ir::Handle cols = run_one(mm);
      ir::Fold f{view(as_vk(cols, "Conv"),
                      strided(cols_shape, {static_cast<std::int64_t>(c * k) * ll, ll, 1})),
                 o.image, o.window};
      return run_one(f);
    }
    ir::Unfold u{o.x, o.window, 0.0};
    const ir::Handle cols_h = run_one(u);
    const VkTensor& cols = as_vk(cols_h, "Conv");
    if (fwd) {
      // [1, G, O/G, cg K] x [N, G, cg K, L] -> [N, G, O/G, L], which is y [N, O, *out].
      auto w = contiguous(o.w);
      ir::Matmul mm{view(*w, strided(Shape{1, g, og, cg * k}, {0, o64 * ck, ck, 1}, w->offset)),
                    view(cols, strided(Shape{n, g, cg * k, l}, {gg * ck * ll, ck * ll, ll, 1})),
                    prod_shape};
      if (!supports_one(mm)) return std::nullopt;
      const ir::Handle y = run_one(mm);
      return view(as_vk(y, "Conv"), {out_shape, backend::contiguous_strides(out_shape), 0});
    }
    // g [N, G, O/G, L] x cols^T [N, G, L, cg K] -> [N, G, O/G, cg K], summed over N.
    auto gt = contiguous(o.w);
    ir::Matmul mm{
        view(*gt, strided(Shape{n, g, og, l}, {gg * o64 * ll, o64 * ll, ll, 1}, gt->offset)),
        view(cols, strided(Shape{n, g, l, cg * k}, {gg * ck * ll, ck * ll, 1, ll})), prod_shape};
    if (!supports_one(mm)) return std::nullopt;
    const ir::Handle p = run_one(mm);
    const std::size_t per = g * og * cg * k;
    ir::Reduce r{ir::ReduceFn::Sum,
                 view(as_vk(p, "Conv"), {Shape{n, per}, {static_cast<std::int64_t>(per), 1}, 0}), 0,
                 dt};
    const ir::Handle sum = run_one(r);
    return view(as_vk(sum, "Conv"), {out_shape, backend::contiguous_strides(out_shape), 0});
  }
  // The three passes: Note [Convolution routes], or the direct kernels over the image's
  // window geometry (Note [Direct convolution]).
  ir::Handle run_one(ir::Conv& o) {
    const Shape out_shape = ir::out_shape(o);
    if (out_shape.num_elements() > 0) {
      if (auto y = conv_gemm(o, out_shape)) return *y;
    }
    auto x = contiguous(o.x);
    auto w = contiguous(o.w);
    const DType dt = x->dtype();
    auto out = ctx_.empty(out_shape, dt, "conv");
    // The image [N, Cin, *in] and the output-gradient channels O of each pass.
    Shape image = x->shape();
    std::size_t o_channels = w->shape()[0];
    if (o.pass == ir::ConvPass::InputGrad) {
      image = out_shape;
      o_channels = x->shape()[1];
    } else if (o.pass == ir::ConvPass::WeightGrad) {
      o_channels = w->shape()[1];
    }
    const std::size_t n = out_shape.num_elements();
    if (n == 0) return out;
    if (o.pass == ir::ConvPass::WeightGrad && x->shape().num_elements() == 0) {
      return fill_zero(out_shape, dt, std::move(out));
    }
    const backend::Window3 g = backend::window3(image, o.window);
    std::vector<std::int32_t> args = window_args(g, n, 0, 4);
    args[21] = static_cast<std::int32_t>(image[0]);
    args[22] = static_cast<std::int32_t>(image[1]);
    args[23] = static_cast<std::int32_t>(o_channels);
    args[24] = static_cast<std::int32_t>(o.groups);
    const bool per_group = o.pass == ir::ConvPass::WeightGrad;  // a workgroup an element
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(n), per_group ? 1 : kLocal);
    ctx_.dispatch(conv_spec(dt, o.pass), args, {out->block.get(), x->block.get(), w->block.get()},
                  gx, gy);
    return out;
  }
  // `out` (of shape s) filled with zeros.
  std::shared_ptr<VkTensor> fill_zero(const Shape& s, DType dt, std::shared_ptr<VkTensor> out) {
    const std::vector<std::int32_t> args = {static_cast<std::int32_t>(s.num_elements()), 0, 0};
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(s.num_elements()), kLocal);
    ctx_.dispatch(fill_spec(dt), args, {out->block.get()}, gx, gy);
    return out;
  }
  // The Cpu's shares and sums (max_pool_grad_spec): ties share g equally.
  ir::Handle run_one(ir::MaxPoolGrad& o) {
    auto x = contiguous(o.x);
    auto y = contiguous(o.y);
    auto g = contiguous(o.g);
    const DType dt = x->dtype();
    auto out = ctx_.empty(x->shape(), dt, "max_pool_grad");
    auto share = ctx_.empty(y->shape(), dt, "max_pool_grad");
    const backend::Window3 w = backend::window3(x->shape(), o.window);
    run_window(max_pool_grad_spec(dt, true), w, y->shape().num_elements(), *share, *x, 0,
               {y->block.get(), g->block.get()});
    run_window(max_pool_grad_spec(dt, false), w, x->shape().num_elements(), *out, *x, 0,
               {y->block.get(), share->block.get()});
    return out;
  }
  // A batch norm stage over x [N, C, S] (gen_batch_norm): a workgroup a channel (the sums)
  // or a thread an element.
  void run_batch_norm(BatchNormStage stage, const ir::Handle& weight, const ir::Handle& bias,
                      const Shape& x, DType dt, double eps, const std::vector<const Block*>& bufs) {
    const bool sums = stage == BatchNormStage::Stats || stage == BatchNormStage::GradSums;
    const std::size_t count = sums ? x[1] : x.num_elements();
    std::vector<std::int32_t> args = {static_cast<std::int32_t>(count),
                                      static_cast<std::int32_t>(x[1]),
                                      static_cast<std::int32_t>(x.num_elements() / (x[0] * x[1])),
                                      static_cast<std::int32_t>(x[0]),
                                      0,
                                      0};
    put_bits(args, 4, compute_bits(dt, eps));
    const auto [gx, gy] = ctx_.groups_for(static_cast<std::int64_t>(count), sums ? 1 : kLocal);
    ctx_.dispatch(batch_norm_spec(dt, stage, weight != nullptr, bias != nullptr), args, bufs, gx,
                  gy);
  }
  std::vector<ir::Handle> run_one(ir::BatchNorm& o) {
    auto x = contiguous(o.x);
    const DType dt = x->dtype();
    const Shape& s = x->shape();
    auto y = ctx_.empty(s, dt, "batch_norm");
    auto stats = ctx_.empty(Shape{2, s[1]}, dt, "batch_norm");
    run_batch_norm(BatchNormStage::Stats, nullptr, nullptr, s, dt, o.eps,
                   {stats->block.get(), x->block.get()});
    std::vector<const Block*> bufs = {y->block.get(), x->block.get(), stats->block.get()};
    std::shared_ptr<const VkTensor> w, b;
    if (o.weight) bufs.push_back((w = contiguous(o.weight))->block.get());
    if (o.bias) bufs.push_back((b = contiguous(o.bias))->block.get());
    run_batch_norm(BatchNormStage::Apply, o.weight, o.bias, s, dt, o.eps, bufs);
    return {y, stats};
  }
  std::vector<ir::Handle> run_one(ir::BatchNormGrad& o) {
    auto x = contiguous(o.x);
    auto g = contiguous(o.g);
    auto stats = contiguous(o.stats);
    const DType dt = x->dtype();
    const Shape& s = x->shape();
    auto dx = ctx_.empty(s, dt, "batch_norm_grad");
    auto dwb = ctx_.empty(Shape{2, s[1]}, dt, "batch_norm_grad");
    run_batch_norm(BatchNormStage::GradSums, nullptr, nullptr, s, dt, o.eps,
                   {dwb->block.get(), x->block.get(), g->block.get(), stats->block.get()});
    std::vector<const Block*> bufs = {dx->block.get(), x->block.get(), g->block.get(),
                                      stats->block.get(), dwb->block.get()};
    std::shared_ptr<const VkTensor> w;
    if (o.weight) bufs.push_back((w = contiguous(o.weight))->block.get());
    run_batch_norm(BatchNormStage::GradInput, o.weight, nullptr, s, dt, o.eps, bufs);
    return {dx, dwb};
  }
  // No SVD kernel: supports() sends it to the fallback, so this is never reached.
  [[noreturn]] std::vector<ir::Handle> run_one(ir::Svd&) {
    fail(name() + ": Svd has no Vulkan kernel (supports() should have said so)");
  }
  [[noreturn]] ir::Handle run_one(ir::RmsNorm&) {
    fail(name() + ": RmsNorm has no Vulkan kernel (supports() should have said so)");
  }
  [[noreturn]] std::vector<ir::Handle> run_one(ir::RmsNormGrad&) {
    fail(name() + ": RmsNormGrad has no Vulkan kernel (supports() should have said so)");
  }
  [[noreturn]] std::vector<ir::Handle> run_one(ir::GroupNorm&) {
    fail(name() + ": GroupNorm has no Vulkan kernel (supports() should have said so)");
  }
  [[noreturn]] std::vector<ir::Handle> run_one(ir::GroupNormGrad&) {
    fail(name() + ": GroupNormGrad has no Vulkan kernel (supports() should have said so)");
  }
  [[noreturn]] std::vector<ir::Handle> run_one(ir::Attention&) {
    fail(name() + ": Attention has no Vulkan kernel (supports() should have said so)");
  }
  [[noreturn]] std::vector<ir::Handle> run_one(ir::AttentionGrad&) {
    fail(name() + ": AttentionGrad has no Vulkan kernel (supports() should have said so)");
  }

  int index_;
  mutable Context ctx_;
  const bool preview_;
  // The random generator's key and counter, as the Cpu's (its default seed).
  std::uint64_t seed_ = 0x5eed'e3be'2026ULL, counter_ = 0;
};

}  // namespace

bool preview_kernels(int index) {
  const char* e = std::getenv("EMBER_VULKAN_PREVIEW");
  if (e != nullptr && *e != '\0') return std::string(e) == "1";  // "0": the checked paths
  const auto& devices = instance().devices;
  return index >= 0 && static_cast<std::size_t>(index) < devices.size() &&
         devices[static_cast<std::size_t>(index)].props.deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU;
}

std::shared_ptr<backend::Backend> make_vulkan_backend(int index) {
  return std::make_shared<VulkanBackend>(index);
}

int vulkan_device_count() { return static_cast<int>(instance().devices.size()); }

std::string vulkan_no_device_reason() { return instance().why_none; }

}  // namespace ember::vulkan
