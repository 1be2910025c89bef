// CudaTensor and CudaContext: the Cuda backend's tensor handle (a strided view — offset and
// element strides — into a shared DeviceBuffer, views being metadata as on the Cpu) and
// the per-device state every kernel launcher uses: the stream, the allocator, the kernel
// cache, the device error flag and the random generator's key and counter.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda/codegen.hpp"
#include "cuda/compiler.hpp"
#include "cuda/runtime.hpp"
#include "ember/backend/strided_tensor.hpp"
#include "ember/backend/strided_view.hpp"
#include "ember/ir/ops.hpp"

namespace ember::cuda {

using Strides = std::vector<std::int64_t>;
using backend::contiguous_strides;

// The Cuda backend's tensor handle: a strided view into a shared device buffer,
// backend::StridedTensor (ember/backend/strided_tensor.hpp) as on the Cpu.
using CudaTensor = backend::StridedTensor<DeviceBuffer>;
using TensorPtr = std::shared_ptr<CudaTensor>;

inline const CudaTensor& as_cuda(const ir::Handle& h) { return static_cast<const CudaTensor&>(*h); }

// Note [In-place reuse] (ember/backend/strided_tensor.hpp) is the rule, the same on every
// backend. On Cuda an element-wise op that reuses an operand is safe because each output
// element is written by the thread that read the same element of that operand, after that
// read and before no other read of it.
inline bool reusable(const ir::Handle& x, const Shape& shape, DType dtype) {
  return backend::reusable<DeviceBuffer>(x, shape, dtype);
}

// Launch arguments: pointers to each argument value, as cudaLaunchKernel takes them.
using Args = std::initializer_list<void*>;

// The cuBLASLt handle and its workspace of one context (kernels/matmul.cpp): created on the
// first matmul (the context's device current), destroyed with the context. Opaque here, so
// that only matmul.cpp includes cuBLASLt's header.
class CublasLt {
 public:
  CublasLt() = default;
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;
  ~CublasLt();
  // Creates the handle and the workspace on the first call from any thread; `op` names the
  // IR op in the error if either fails (a later call tries again).
  void ensure(const char* op);
  void* handle() const { return handle_; }  // a cublasLtHandle_t
  void* workspace() const { return workspace_; }
  const std::size_t& workspace_bytes() const { return workspace_bytes_; }

 private:
  std::mutex mu_;
  void* handle_ = nullptr;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0;
};

class CudaContext {
 public:
  explicit CudaContext(int device);
  ~CudaContext();

  int device() const { return device_; }
  int arch() const { return arch_; }
  int sm_count() const { return sm_count_; }
  // Blocks of `block` threads that fit on the device at once (2048 threads per SM): the
  // grid of kernels whose blocks walk rows.
  // launch()'s max_blocks for kernels whose blocks walk rows with a grid stride (Note [Rows
  // in registers]): one wave, as many blocks as the device holds at once for that kernel
  // (its registers decide), so that no block waits for another to finish.
  static constexpr std::int64_t kOneWave = -2;
  cudaStream_t stream() const { return stream_; }
  Allocator& allocator() { return *alloc_; }

  // Makes this context's device current for the calling thread.
  void activate() const;
  // A fresh contiguous tensor (contents uninitialised).
  TensorPtr empty(const Shape& shape, DType dtype);
  // x itself when contiguous, else a contiguous copy.
  std::shared_ptr<const CudaTensor> contiguous(const ir::Handle& x);
  // Copies the strided view src into the strided view dst (same shape and dtype).
  void copy(const CudaTensor& src, const CudaTensor& dst);

  // Finds the kernel of `spec` by its structural key (Note [Kernel specs] in codegen.hpp)
  // and launches it on the stream; on the key's first use the spec prints the kernel's
  // source, which is compiled (or found in the cubin cache). `op` names the IR op in errors.
  // `checked`: the kernel may raise the device error flag.
  template <class Spec>
  void launch(const Spec& spec, std::int64_t threads_total, Args args, const char* op,
              bool checked = false, unsigned block = 256, std::int64_t max_blocks = -1) {
    if (threads_total <= 0) return;
    const std::uint64_t key = spec.key();
    cudaKernel_t k = find(key);
    if (!k) k = remember(key, kernel(spec.source()));
    enqueue(k, threads_total, args, op, checked, block, max_blocks);
  }
  // Launches the kernel of a fused group (kernels/fused.cpp), found by the group's key and
  // layout variant; `structure` (the group's signature) is kept with it on first use, when
  // gen() prints it, and a later group of the same key and another structure (a hash
  // collision) is refused: false, nothing launched.
  template <class Gen>
  bool launch_fused(std::uint64_t key, std::uint32_t variant, const std::string& structure,
                    Gen&& gen, std::int64_t threads_total, Args args, const char* op, bool checked,
                    unsigned block = 256, std::int64_t max_blocks = -1) {
    cudaKernel_t k = nullptr;
    {
      std::lock_guard lk(mu_);
      if (auto it = fused_.find({key, variant}); it != fused_.end()) {
        if (it->second.first != structure) return false;
        k = it->second.second;
      }
    }
    if (!k) {
      k = kernel(gen());
      std::lock_guard lk(mu_);
      fused_.emplace(std::make_pair(key, variant), std::make_pair(structure, k));
    }
    enqueue(k, threads_total, args, op, checked, block, max_blocks);
    return true;
  }
  // Device pointer of the error flag (int code, then an i64 value at byte 8).
  int* error_flag() const { return err_; }

  // Waits for the stream and raises a pending device-side error (see em_flag).
  void sync();

  std::atomic<std::uint64_t> seed{0x5eed'e3be'2026ULL};
  std::atomic<std::uint64_t> counter{0};

  CublasLt& cublas_lt() { return lt_; }
  // The GEMM plans (descriptors and the algorithm the heuristic chose, per shape and
  // layout: Note [GEMM plans] in matmul.cpp).
  std::shared_ptr<void> gemm_plans;
  std::once_flag gemm_plans_once;
  // The cuDNN handle and the convolution plans (kernels/conv.cpp, Note [cuDNN plans]).
  std::shared_ptr<void> conv_plans;

  // Writes the element bits (elem_size bytes, as converted by the caller) to y[0, n).
  void fill(void* y, std::int64_t n, std::size_t elem_size, std::uint64_t bits);
  // A one-element buffer holding `bits` (a value of dtype dt), shared by every one-element
  // fill of that value, so a scalar operand (x + 1.0) costs no kernel launch after its
  // first use. The pool keeps a reference, so no op ever finds itself the sole owner of
  // such a buffer and writes into it. At most kMaxConstants are kept.
  std::shared_ptr<DeviceBuffer> constant(DType dt, std::uint64_t bits);
  static constexpr std::size_t kMaxConstants = 256;

  // Pinned staging for host transfers, grown on demand. One buffer serves every thread, so
  // a caller holds staging_mutex() from staging() until its copy through it is complete
  // (threads transferring at once would otherwise overwrite each other's data).
  void* staging(std::size_t bytes);
  std::mutex& staging_mutex() { return staging_mu_; }

 private:
  cudaKernel_t kernel(const KernelSource& k);
  cudaKernel_t find(std::uint64_t key);
  cudaKernel_t remember(std::uint64_t key, cudaKernel_t k);
  std::int64_t one_wave(cudaKernel_t k, unsigned block, const char* op);
  void enqueue(cudaKernel_t k, std::int64_t threads_total, Args args, const char* op, bool checked,
               unsigned block, std::int64_t max_blocks);

  int device_;
  int arch_ = 0;
  int sm_count_ = 1;
  cudaStream_t stream_ = nullptr;
  std::shared_ptr<Allocator> alloc_;
  CubinCache cache_;
  std::mutex mu_;
  std::map<std::string, cudaKernel_t> kernels_;
  std::unordered_map<std::uint64_t, cudaKernel_t> by_key_;
  std::map<std::pair<std::uint64_t, std::uint32_t>, std::pair<std::string, cudaKernel_t>> fused_;
  std::map<std::pair<cudaKernel_t, unsigned>, std::int64_t> one_wave_;
  std::map<std::pair<DType, std::uint64_t>, std::shared_ptr<DeviceBuffer>> constants_;
  std::vector<cudaLibrary_t> libraries_;
  CublasLt lt_;  // destroyed after the destructor's body has synchronised the stream
  int* err_ = nullptr;
  std::vector<std::string> checked_ops_;  // ops launched since the flag was last read
  std::mutex staging_mu_;
  void* pinned_ = nullptr;
  std::size_t pinned_bytes_ = 0;
};

// Geometry helper: the output shape and up to three operands' strides (broadcast dims as
// stride 0), collapsed to as few dims as possible. contiguous(): every operand walks the
// output linearly.
struct Space {
  std::vector<std::int64_t> shape;
  std::vector<Strides> strides;
  void collapse();
  bool contiguous() const;
  Geo geo(const char* op) const;
};
// x's strides viewed at out_shape (same rank): dims of extent 1 that broadcast get 0
// (backend::broadcast_strides).
inline Strides broadcast_strides(const CudaTensor& x, const Shape& out_shape) {
  return backend::broadcast_strides(x.shape(), x.strides(), out_shape);
}

}  // namespace ember::cuda
