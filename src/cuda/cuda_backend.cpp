// CudaBackend: dispatch of IR ops to the launchers in kernels/, transfers through pinned
// staging, and the host fallback. Every op is enqueued on the device's stream and returns
// at once; to_data and sync wait, and raise device-side errors (bad indices, integer
// division by zero) that kernels flagged since the last wait.
//
// Host fallback: matmul of non-float dtypes runs through the registry's "cpu" backend —
// the operands are copied to the host, the op runs there, and the results are copied
// back. It is a sync point; it keeps every op available on Cuda while a device kernel for
// it is written.
#include "cuda/cuda_backend.hpp"

#include <cstring>
#include <type_traits>

#include "cuda/context.hpp"
#include "cuda/kernels/kernels.hpp"
#include "ember/backend/registry.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {
namespace {

class CudaBackend final : public backend::Backend {
 public:
  explicit CudaBackend(int index) : ctx_(index) {}

  std::string name() const override { return "cuda:" + std::to_string(ctx_.device()); }

  ir::Handle from_data(const TensorData& data) override {
    ctx_.activate();
    auto t = ctx_.empty(data.shape(), data.dtype());
    const std::size_t bytes = data.bytes().size();
    if (bytes) {
      // Staged through pinned memory; the copy must finish before the buffer is reused.
      void* pinned = ctx_.staging(bytes);
      std::memcpy(pinned, data.data(), bytes);
      check(cudaMemcpyAsync(t->data(), pinned, bytes, cudaMemcpyHostToDevice, ctx_.stream()),
            "from_data");
      check(cudaStreamSynchronize(ctx_.stream()), "from_data");
    }
    return t;
  }

  TensorData to_data(const ir::Handle& x) override {
    ctx_.activate();
    auto c = ctx_.contiguous(x);
    const std::size_t bytes = c->shape().num_elements() * size_of(c->dtype());
    std::vector<std::byte> out(bytes);
    if (bytes) {
      void* pinned = ctx_.staging(bytes);
      check(cudaMemcpyAsync(pinned, c->data(), bytes, cudaMemcpyDeviceToHost, ctx_.stream()),
            "to_data");
      ctx_.sync();
      std::memcpy(out.data(), pinned, bytes);
    } else {
      ctx_.sync();
    }
    return TensorData(std::move(out), c->shape(), c->dtype());
  }

  std::vector<ir::Handle> execute(ir::Op op) override {
    ctx_.activate();
    return std::visit(
        [&](auto& o) -> std::vector<ir::Handle> {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, ir::Sort>) {
            return sort(ctx_, o);
          } else if constexpr (std::is_same_v<T, ir::Matmul>) {
            if (!is_float(o.a->dtype())) return host_fallback(std::move(op));
            return {matmul(ctx_, o)};
          } else {
            return {run_one(o)};
          }
        },
        op);
  }

  // Fold sums: float dtypes only (the tensor layer never builds another); pooling: every
  // dtype but bool.
  bool supports(ir::OpKind k, DType dt) const override {
    if (k == ir::OpKind::Fold) return is_float(dt);
    if (k == ir::OpKind::Pool) return dt != DType::Bool;
    return true;
  }

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
  ir::Handle run_one(ir::Unary& o) { return unary(ctx_, o); }
  ir::Handle run_one(ir::Binary& o) { return binary(ctx_, o); }
  ir::Handle run_one(ir::Where& o) { return where(ctx_, o); }
  ir::Handle run_one(ir::Cast& o) { return cast(ctx_, o); }
  ir::Handle run_one(ir::Reduce& o) { return reduce(ctx_, o); }
  ir::Handle run_one(ir::Scan& o) { return scan(ctx_, o); }
  ir::Handle run_one(ir::Reshape& o) { return reshape(ctx_, o); }
  ir::Handle run_one(ir::Permute& o) { return permute(ctx_, o); }
  ir::Handle run_one(ir::Expand& o) { return expand(ctx_, o); }
  ir::Handle run_one(ir::Slice& o) { return slice(ctx_, o); }
  ir::Handle run_one(ir::Flip& o) { return flip(ctx_, o); }
  ir::Handle run_one(ir::SliceAssign& o) { return slice_assign(ctx_, o); }
  ir::Handle run_one(ir::Cat& o) { return cat(ctx_, o); }
  ir::Handle run_one(ir::Gather& o) { return gather(ctx_, o); }
  ir::Handle run_one(ir::Scatter& o) { return scatter(ctx_, o); }
  ir::Handle run_one(ir::IndexSelect& o) { return index_select(ctx_, o); }
  ir::Handle run_one(ir::IndexAdd& o) { return index_add(ctx_, o); }
  ir::Handle run_one(ir::Nonzero& o) { return nonzero(ctx_, o); }
  ir::Handle run_one(ir::Fill& o) { return fill(ctx_, o); }
  ir::Handle run_one(ir::Arange& o) { return arange(ctx_, o); }
  ir::Handle run_one(ir::Random& o) { return random(ctx_, o); }
  ir::Handle run_one(ir::Softmax& o) { return softmax(ctx_, o); }
  ir::Handle run_one(ir::LayerNorm& o) { return layer_norm(ctx_, o); }
  ir::Handle run_one(ir::Unfold& o) { return unfold(ctx_, o); }
  ir::Handle run_one(ir::Fold& o) { return fold(ctx_, o); }
  ir::Handle run_one(ir::Pool& o) { return pool(ctx_, o); }

  // Runs op on the registry's cpu backend (see the file comment).
  std::vector<ir::Handle> host_fallback(ir::Op op) {
    if (!cpu_) cpu_ = backend::Registry::global().backend("cpu", 0);
    for (const ir::Handle* h : ir::operands(op)) {
      if (*h) const_cast<ir::Handle&>(*h) = cpu_->from_data(to_data(*h));
    }
    auto outs = cpu_->execute(std::move(op));
    for (auto& h : outs) h = from_data(cpu_->to_data(h));
    return outs;
  }

  CudaContext ctx_;
  std::shared_ptr<backend::Backend> cpu_;
};

}  // namespace

std::shared_ptr<backend::Backend> make_cuda_backend(int index) {
  return std::make_shared<CudaBackend>(index);
}

int cuda_device_count() { return device_count(); }
std::string cuda_no_device_reason() { return no_device_reason(); }

}  // namespace ember::cuda
