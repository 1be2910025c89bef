// CpuBackend: dispatch of IR ops to the kernels in kernels/, and the f16 widening. Every
// op runs to completion before execute returns. An op the IR's dtype rules do not define
// (Backend::supports) never reaches a kernel: it goes to the registry's fallback, which
// for the Cpu means a clear ember::Error.
//
// 16-bit floats are stored natively but computed in f32: the ops that compute on their
// operands' values (ir::is_arithmetic) widen their 16-bit operands, run, and narrow the
// float outputs back. A bf16 matmul on a CPU with a bf16 dot product (AVX512_BF16, AMX) runs
// on its bf16 operands instead, accumulating in f32 (cpu/gemm/gemm_bf16.hpp).
#include "cpu/cpu_backend.hpp"
#include "ember/cpu/cpu.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <type_traits>

#include "cpu/context.hpp"
#include "cpu/gemm/gemm_bf16.hpp"
#include "cpu/kernels/kernels.hpp"
#include "cpu/kernels/matmul.hpp"
#include "cpu/kernels/random.hpp"
#include "ember/backend/fused_group.hpp"
#include "ember/backend/registry.hpp"

namespace ember::cpu {
namespace {

// A large host buffer is fresh memory from the OS each time: with 4 KiB pages, faulting it
// in costs more than the copy itself (64 MiB: ~3x slower than with 2 MiB pages). Ask for
// transparent huge pages over its 2 MiB-aligned interior, as numpy does for its arrays.
void advise_huge_pages([[maybe_unused]] void* p, [[maybe_unused]] std::size_t bytes) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr std::uintptr_t kHuge = std::uintptr_t(2) << 20;
  if (bytes < 2 * kHuge) return;
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t b = (a + kHuge - 1) & ~(kHuge - 1), e = (a + bytes) & ~(kHuge - 1);
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);  // a hint only
#endif
}

class CpuBackend final : public backend::Backend {
 public:
  CpuBackend() = default;
  explicit CpuBackend(std::span<std::byte> arena) : ctx_(arena) {}

  std::string name() const override { return "cpu"; }

  ir::Handle from_data(const TensorData& data) override {
    auto t = ctx_.empty(data.shape(), data.dtype());
    if (!data.bytes().empty()) std::memcpy(t->data(), data.data(), data.bytes().size());
    return t;
  }

  // Memory aligned as the allocator's (64 bytes) and holding whole elements becomes the
  // buffer itself; anything else is left to a copy.
  ir::Handle adopt_host(std::byte* data, const Shape& shape, DType dtype,
                        std::shared_ptr<const void> owner) override {
    const std::size_t bytes = checked_bytes(shape, dtype, "adopt_host");
    if (data == nullptr || bytes == 0 || reinterpret_cast<std::uintptr_t>(data) % 64 != 0) {
      return nullptr;
    }
    auto buf = std::make_shared<Buffer>(data, bytes, std::move(owner));
    return std::make_shared<CpuTensor>(std::move(buf), shape, dtype, contiguous_strides(shape), 0);
  }

  // Note [Host access] (backend.hpp): a pooled tensor, as an op's output would be.
  HostTensor empty_host(const Shape& shape, DType dtype) override {
    CpuContext::current_op = "empty_host";
    auto t = ctx_.empty(shape, dtype);
    std::byte* data = t->data();
    return {std::move(t), data};
  }
  const std::byte* host_data(const ir::Handle& x) override {
    const CpuTensor& t = as_cpu(x);
    return t.is_contiguous() ? t.data() : nullptr;
  }

  TensorData to_data(const ir::Handle& x) override {
    auto c = contiguous(ctx_, x);
    const std::size_t bytes = c->shape().num_elements() * size_of(c->dtype());
    std::vector<std::byte> out;
    out.reserve(bytes);
    advise_huge_pages(out.data(), bytes);
    // assign from the source range copies straight into the reserved storage; resize
    // would zero-fill all of it first, one more pass over the output.
    const std::byte* src = c->data();
    out.assign(src, src + bytes);
    return TensorData(std::move(out), c->shape(), c->dtype());
  }

  std::vector<ir::Handle> execute(ir::Op op) override {
    CpuContext::current_op = ir::name(ir::kind_of(op));
    if (!supports(op)) return backend::execute_on_fallback(*this, std::move(op));
    if (const auto* mm = std::get_if<ir::Matmul>(&op);
        mm != nullptr && mm->a->dtype() == DType::BF16 && gemm_bf16_native()) {
      return {matmul_bf16(ctx_, *mm)};
    }
    if (ir::computes_widened(op)) return execute_widened(std::move(op));
    return dispatch(op);
  }

  std::vector<ir::Handle> run_fused(backend::FusedGroup group) override {
    CpuContext::current_op = "fused group";
    if (auto outs = cpu::run_fused(ctx_, group)) return std::move(*outs);
    return Backend::run_fused(std::move(group));
  }
  bool runs_fused() const override { return true; }
  backend::FusedCaps fused_caps() const override {
    // (Row epilogues: Note [Row epilogues] in backend/fused_group.hpp; EMBER_CPU_ROW_EPILOGUE=0
    // ends every group at its row instruction instead.)
    static const bool epilogue = [] {
      const char* env = std::getenv("EMBER_CPU_ROW_EPILOGUE");
      return !env || std::string_view(env) != "0";
    }();
    return {.fills = true,
            .random = true,
            .row_reduction = &cpu::reduces_rows,
            .row_epilogue = epilogue};
  }
  // Note [Reserved draws] (backend/fused_group.hpp): the counters run(Random) would take.
  backend::RandomCounters reserve_random(std::uint64_t n) override {
    return cpu::reserve_counters(ctx_, n);
  }
  ir::Handle draw_random(const ir::Random& op, const backend::RandomCounters& at) override {
    CpuContext::current_op = "random";
    return cpu::draw(ctx_, op, at);
  }

  void seed(std::uint64_t s) override {
    ctx_.seed = s;
    ctx_.counter = 0;
  }
  backend::MemoryStats memory_stats() const override { return ctx_.allocator.stats(); }
  void empty_cache() override { ctx_.allocator.empty_cache(); }
  void sync() override {}

 private:
  // One kernel per op (kernels.hpp, declared from the IR's op list).
  std::vector<ir::Handle> dispatch(ir::Op& op) { return backend::dispatch(ctx_, op); }

  std::vector<ir::Handle> execute_widened(ir::Op op) {
    // The op as given, for its own output dtypes: an F32 output of the widened op is
    // rounded back to the 16-bit dtype only where the op states that dtype (Attention's lse
    // stays F32).
    const ir::Op given = op;
    DType half = DType::F32;
    ir::for_each_operand(op, [&](ir::Handle& h) {
      if (!h || !is_half(h->dtype())) return;
      half = h->dtype();
      ir::Cast c{std::move(h), DType::F32};
      h = run(ctx_, c);
    });
    std::visit(
        [&](auto& o) {
          if constexpr (requires { o.out; }) {
            if (o.out == half) o.out = DType::F32;
          }
        },
        op);
    auto outs = dispatch(op);
    for (std::size_t i = 0; i < outs.size(); ++i) {
      ir::Handle& h = outs[i];
      if (h->dtype() == DType::F32 && ir::output_dtype(given, i) == half) {
        ir::Cast c{std::move(h), half};
        h = run(ctx_, c);
      }
    }
    return outs;
  }

  CpuContext ctx_;
};

}  // namespace

std::shared_ptr<backend::Backend> make_cpu_backend() { return std::make_shared<CpuBackend>(); }

std::shared_ptr<backend::Backend> make_cpu_backend(std::span<std::byte> arena) {
  return std::make_shared<CpuBackend>(arena);
}

}  // namespace ember::cpu
