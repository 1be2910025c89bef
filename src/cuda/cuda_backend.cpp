// CudaBackend: dispatch of IR ops to the launchers in kernels/, transfers through pinned
// staging, and the host fallback. Every op is enqueued on the device's stream and returns
// at once; to_data and sync wait, and raise device-side errors (bad indices, integer
// division by zero) that kernels flagged since the last wait.
//
// Fallback: an op this backend does not support (supports() below: the IR's dtype rules
// and the Cuda kernels' own limits) runs on the registry's fallback backend for it
// (backend::execute_on_fallback): the operands are copied to the host, the op runs there,
// and the results are copied back. It is a sync point; it keeps every op available on
// Cuda while a device kernel for it is written.
#include "cuda/cuda_backend.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "cuda/codegen.hpp"
#include "cuda/context.hpp"
#include "cuda/kernels/kernels.hpp"
#include "cuda/profile.hpp"
#include "ember/backend/registry.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {
namespace {

// Whether the environment variable `name` is set to `value` (a switch).
bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v != nullptr && std::string(v) == value;
}

class CudaBackend final : public backend::Backend {
 public:
  explicit CudaBackend(int index) : ctx_(index) {}

  std::string name() const override { return "cuda:" + std::to_string(ctx_.device()); }

  ir::Handle from_data(const TensorData& data) override {
    const std::uint64_t t0 = profile::enabled() ? profile::now_ns() : 0;
    ctx_.activate();
    auto t = ctx_.empty(data.shape(), data.dtype());
    const std::size_t bytes = data.bytes().size();
    if (bytes) {
      // Staged through pinned memory; the copy must finish before the buffer is reused.
      std::lock_guard lk(ctx_.staging_mutex());
      void* pinned = ctx_.staging(bytes);
      std::memcpy(pinned, data.data(), bytes);
      check(cudaMemcpyAsync(t->data(), pinned, bytes, cudaMemcpyHostToDevice, ctx_.stream()),
            "from_data");
      check(cudaStreamSynchronize(ctx_.stream()), "from_data");
      if (t0) profile::count(profile::Counter::Sync);
    }
    if (t0) profile::transfer(false, profile::now_ns() - t0);
    return t;
  }

  TensorData to_data(const ir::Handle& x) override {
    const std::uint64_t t0 = profile::enabled() ? profile::now_ns() : 0;
    ctx_.activate();
    auto c = ctx_.contiguous(x);
    const std::size_t bytes = c->shape().num_elements() * size_of(c->dtype());
    std::vector<std::byte> out(bytes);
    if (bytes) {
      std::lock_guard lk(ctx_.staging_mutex());
      void* pinned = ctx_.staging(bytes);
      check(cudaMemcpyAsync(pinned, c->data(), bytes, cudaMemcpyDeviceToHost, ctx_.stream()),
            "to_data");
      ctx_.sync();
      std::memcpy(out.data(), pinned, bytes);
    } else {
      ctx_.sync();
    }
    if (t0) profile::transfer(true, profile::now_ns() - t0);
    return TensorData(std::move(out), c->shape(), c->dtype());
  }

  std::vector<ir::Handle> execute(ir::Op op) override {
    if (!profile::enabled()) return run(std::move(op));
    const ir::OpKind kind = ir::kind_of(op);
    const bool fallback = !supports(op);
    const std::uint64_t t0 = profile::now_ns();
    auto out = run(std::move(op));
    profile::op(kind, profile::now_ns() - t0, fallback);
    return out;
  }

  // A fused element-wise group as one generated kernel (kernels/fused.cpp); a group with a
  // row epilogue no kernel prints as its parts' kernels (Note [Epilogues apart]); a group
  // ending in a softmax or layer norm that no kernel prints (rows too long for registers,
  // strided inputs: Note [Fused rows in registers]) as its prologue's kernel and the row op
  // (Note [Row instructions apart]); a group that does not fit one kernel op by op (the
  // default).
  std::vector<ir::Handle> run_fused(backend::FusedGroup group) override {
    const std::uint64_t t0 = profile::enabled() ? profile::now_ns() : 0;
    ctx_.activate();
    auto outs = run_fused_group(ctx_, group);
    if (t0) profile::fused(profile::now_ns() - t0);
    if (outs) return std::move(*outs);
    if (group.has_row_epilogue()) {  // (Note [Epilogues apart])
      return backend::run_epilogue_apart(*this, std::move(group), [this](backend::FusedGroup p) {
        return run_fused(std::move(p));
      });
    }
    if (group.ends_in_row() && !group.reduces() && group.code.size() > 1) {
      return backend::run_row_apart(*this, std::move(group), [this](backend::FusedGroup p) {
        return run_fused(std::move(p));
      });
    }
    return Backend::run_fused(std::move(group));
  }
  bool runs_fused() const override { return true; }
  // Scalars are parameters of fused kernels (Fill instructions, codegen/fused.cpp), and
  // groups may end in a row reduction (Note [Fused row reductions] in codegen/fused.cpp):
  // both run on the H200 (test_fusion, every conformance case on cuda:0+fusion, the
  // differential). EMBER_CUDA_FUSED_FILLS=0 makes a scalar an input of the group instead;
  // EMBER_CUDA_FUSED_REDUCE=0 runs the reduction alone after the group. Random draws are
  // sources too (Note [Fused draws] in codegen/fused.cpp); EMBER_CUDA_FUSED_RANDOM=0 runs
  // them alone, at the counters reserved when they were recorded. A row op's element-wise
  // consumers are its epilogue in the row kernels (Note [Fused row epilogues]);
  // EMBER_CUDA_ROW_EPILOGUE=0 ends the group at the row op instead.
  backend::FusedCaps fused_caps() const override {
    static const bool fills = !env_is("EMBER_CUDA_FUSED_FILLS", "0");
    static const bool reduce = !env_is("EMBER_CUDA_FUSED_REDUCE", "0");
    static const bool random = !env_is("EMBER_CUDA_FUSED_RANDOM", "0");
    static const bool epilogue = !env_is("EMBER_CUDA_ROW_EPILOGUE", "0");
    return {.fills = fills,
            .random = random,
            .row_reduction = reduce ? &fused_reduces_rows : nullptr,
            .row_epilogue = epilogue};
  }
  // Note [Reserved draws] (backend/fused_group.hpp): the counters run(Random) would take, and
  // the Random kernel at them.
  backend::RandomCounters reserve_random(std::uint64_t n) override {
    return reserve_counters(ctx_, n);
  }
  ir::Handle draw_random(const ir::Random& op, const backend::RandomCounters& at) override {
    ctx_.activate();
    return draw(ctx_, op, at);
  }

  // The IR's dtype rules, less what the kernels cannot index: gather, scatter and nonzero
  // address their operands by coordinates of at most kMaxDims dims, uncollapsed.
  bool supports(const ir::Op& op) const override {
    if (!Backend::supports(op)) return false;
    // Convolution through cuDNN where it is found (kernels/conv.cpp); elsewhere the tensor
    // layer convolves by Unfold and Matmul.
    if (const auto* c = std::get_if<ir::Conv>(&op)) return conv_supported(*c, ctx_.arch());
    // Nor a max-pooling gradient kernel: Pool's rule then builds it from Unfold and Fold.
    if (std::holds_alternative<ir::MaxPoolGrad>(op)) return false;
    // Batch norm's kernels (kernels/norm.cpp), checked on the H200 against the Cpu kernels
    // and the conformance cases; EMBER_CUDA_BATCH_NORM=0 turns them off, and the tensor
    // layer and BatchNorm's rule then compose batch norm from reductions and element-wise
    // ops.
    if (std::holds_alternative<ir::BatchNorm>(op) || std::holds_alternative<ir::BatchNormGrad>(op))
      return batch_norm_kernels();
    // RMS norm's kernels (kernels/norm.cpp), checked on the H200 against the Cpu kernels and
    // the rms_norm* conformance cases; EMBER_CUDA_RMS_NORM=0 turns them off, and the tensor
    // layer then composes RMS norm from reductions and element-wise ops.
    if (std::holds_alternative<ir::RmsNorm>(op) || std::holds_alternative<ir::RmsNormGrad>(op))
      return rms_norm_kernels();
    // Group norm's kernels (kernels/norm.cpp, Note [Group splits]), checked on the H200
    // against the Cpu kernels and the group_norm* conformance cases; EMBER_CUDA_GROUP_NORM=0
    // turns them off, and nn::GroupNorm then runs batch norm's kernels over its groups and
    // the affine after them (Note [Group norm's own op]).
    if (std::holds_alternative<ir::GroupNorm>(op) || std::holds_alternative<ir::GroupNormGrad>(op))
      return group_norm_kernels();
    // No SVD kernel: the registry's fallback (the Cpu) runs it through host copies.
    if (std::holds_alternative<ir::Svd>(op)) return false;
    // The flash-style attention kernels (kernels/attention.cpp) up to head dim 128 (64 in
    // f64), 16-bit by default (Note [Attention kernels by default]); elsewhere the tensor
    // layer composes attention from Matmul and Softmax.
    if (const auto* a = std::get_if<ir::Attention>(&op))
      return attention_kernels(a->q->dtype()) && attention_supported(a->q, a->v);
    if (const auto* a = std::get_if<ir::AttentionGrad>(&op))
      return attention_kernels(a->q->dtype()) && attention_supported(a->q, a->v);
    const auto rank_ok = [](const ir::Handle& h) {
      return h->shape().rank() <= static_cast<std::size_t>(kMaxDims);
    };
    if (const auto* g = std::get_if<ir::Gather>(&op)) return rank_ok(g->index);
    if (const auto* s = std::get_if<ir::Scatter>(&op)) return rank_ok(s->index);
    if (const auto* n = std::get_if<ir::Nonzero>(&op)) return rank_ok(n->x);
    return true;
  }

  // Note [Attention kernels by default]: on the H100 the flash-style kernels beat the
  // composite (cuBLASLt, softmax) in f16 and bf16 (tensor cores: [4, 16, 2048, 128] bf16
  // forward 1.76 ms against 4.81, forward and backward 12.4 against 17.7) but not in f32,
  // where they run on CUDA cores (19.5 against 8.1 ms, 72.9 against 21.7): by default only
  // 16-bit attention takes them. EMBER_CUDA_ATTENTION=0 turns them off, =all on for every
  // dtype (read at each call, so a test can set it).
  static bool attention_kernels(DType dt) {
    const char* v = std::getenv("EMBER_CUDA_ATTENTION");
    if (v != nullptr && std::string(v) == "0") return false;
    if (v != nullptr && std::string(v) == "all") return true;
    return is_half(dt);
  }

  // A kernel family's switch, read at each call (so a test can set it): "1" on, "0" off,
  // unset or anything else `otherwise`.
  static bool env_switch(const char* name, bool otherwise) {
    const char* v = std::getenv(name);
    if (v != nullptr && std::string(v) == "1") return true;
    if (v != nullptr && std::string(v) == "0") return false;
    return otherwise;
  }
  static bool rms_norm_kernels() { return env_switch("EMBER_CUDA_RMS_NORM", true); }
  static bool batch_norm_kernels() { return env_switch("EMBER_CUDA_BATCH_NORM", true); }
  static bool group_norm_kernels() { return env_switch("EMBER_CUDA_GROUP_NORM", true); }

  void seed(std::uint64_t s) override {
    ctx_.seed = s;
    ctx_.counter = 0;
  }
  backend::MemoryStats memory_stats() const override {
    return const_cast<CudaContext&>(ctx_).allocator().stats();
  }
  void empty_cache() override {
    ctx_.activate();
    check(cudaStreamSynchronize(ctx_.stream()), "empty_cache");
    ctx_.allocator().empty_cache();
  }
  void sync() override { ctx_.sync(); }

 private:
  std::vector<ir::Handle> run(ir::Op op) {
    if (!supports(op)) return backend::execute_on_fallback(*this, std::move(op));
    ctx_.activate();
    // One launcher per op (kernels.hpp, declared from the IR's op list).
    return backend::dispatch(ctx_, op);
  }

  CudaContext ctx_;
};

}  // namespace

std::shared_ptr<backend::Backend> make_cuda_backend(int index) {
  return std::make_shared<CudaBackend>(index);
}

int cuda_device_count() { return device_count(); }
std::string cuda_no_device_reason() { return no_device_reason(); }

}  // namespace ember::cuda
