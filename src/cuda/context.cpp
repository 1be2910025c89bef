// CudaContext: device setup, kernel loading through the runtime's library API
// (cudaLibraryLoadData / cudaLibraryGetKernel / cudaLaunchKernel: no driver API, so no
// libcuda link), launches, the device error flag, and strided-geometry helpers.
#include "cuda/context.hpp"

#include <algorithm>
#include <cstring>

#include "cuda/profile.hpp"
#include "ember/backend/strided_view.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {

namespace {
int driver_version() {
  int v = 0;
  if (cudaDriverGetVersion(&v) != cudaSuccess) cudaGetLastError();
  return v;
}
}  // namespace

CudaContext::CudaContext(int device)
    : device_(device), alloc_(std::make_shared<Allocator>(device)), cache_(driver_version()) {
  check(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device_), "cudaGetDeviceProperties");
  arch_ = prop.major * 10 + prop.minor;
  sm_count_ = std::max(1, prop.multiProcessorCount);
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  check(cudaMalloc(reinterpret_cast<void**>(&err_), 16), "cudaMalloc(error flag)");
  // On the stream, so ordered before every kernel (see sync()).
  check(cudaMemsetAsync(err_, 0, 16, stream_), "cudaMemset(error flag)");
}

CudaContext::~CudaContext() {
  activate();
  cudaStreamSynchronize(stream_);
  for (auto lib : libraries_) cudaLibraryUnload(lib);
  if (err_) cudaFree(err_);
  if (pinned_) cudaFreeHost(pinned_);
  cudaStreamDestroy(stream_);
  cudaGetLastError();
}

void CudaContext::activate() const {
  int cur = -1;
  if (cudaGetDevice(&cur) != cudaSuccess || cur != device_) {
    check(cudaSetDevice(device_), "cudaSetDevice(" + std::to_string(device_) + ")");
  }
}

TensorPtr CudaContext::empty(const Shape& shape, DType dtype) {
  const std::size_t bytes = shape.num_elements() * size_of(dtype);
  auto buf = std::make_shared<DeviceBuffer>(alloc_, bytes);
  return std::make_shared<CudaTensor>(std::move(buf), shape, dtype, contiguous_strides(shape), 0);
}

std::shared_ptr<const CudaTensor> CudaContext::contiguous(const ir::Handle& x) {
  const auto& t = as_cuda(x);
  if (t.is_contiguous()) return std::static_pointer_cast<const CudaTensor>(x);
  if (profile::enabled()) profile::count(profile::Counter::Copy);
  auto out = empty(t.shape(), t.dtype());
  copy(t, *out);
  return out;
}

void CudaContext::copy(const CudaTensor& src, const CudaTensor& dst) {
  Space sp;
  for (std::size_t d : src.shape()) sp.shape.push_back(static_cast<std::int64_t>(d));
  sp.strides = {src.strides(), dst.strides()};
  sp.collapse();
  Geo g = sp.geo("copy");
  if (g.n == 0) return;
  const std::size_t elem = size_of(src.dtype());
  const bool contiguous = sp.contiguous();
  void* y = dst.data();
  const void* x0 = src.data();
  const void* none = nullptr;
  double p = 0;
  int* err = err_;
  const std::int64_t threads =
      contiguous ? (g.n + vector_width(elem) - 1) / vector_width(elem) : g.n;
  launch(CopyKernel(elem, contiguous), threads, {&g, &y, &x0, &none, &none, &p, &p, &err}, "copy");
}

cudaKernel_t CudaContext::kernel(const KernelSource& k) {
  std::lock_guard lk(mu_);
  if (auto it = kernels_.find(k.name); it != kernels_.end()) return it->second;
  const std::vector<char>& cubin = cache_.get(full_source(k), arch_, k.name);
  cudaLibrary_t lib = nullptr;
  check(cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0),
        "loading kernel " + k.name);
  libraries_.push_back(lib);
  cudaKernel_t kern = nullptr;
  check(cudaLibraryGetKernel(&kern, lib, k.name.c_str()), "finding kernel " + k.name);
  kernels_.emplace(k.name, kern);
  return kern;
}

cudaKernel_t CudaContext::find(std::uint64_t key) {
  std::lock_guard lk(mu_);
  const auto it = by_key_.find(key);
  return it == by_key_.end() ? nullptr : it->second;
}

cudaKernel_t CudaContext::remember(std::uint64_t key, cudaKernel_t k) {
  std::lock_guard lk(mu_);
  by_key_.emplace(key, k);
  return k;
}

std::int64_t CudaContext::one_wave(cudaKernel_t k, unsigned block, const char* op) {
  {
    std::lock_guard lk(mu_);
    if (auto it = one_wave_.find({k, block}); it != one_wave_.end()) return it->second;
  }
  int per_sm = 0;
  check(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, reinterpret_cast<const void*>(k),
                                                      static_cast<int>(block), 0),
        std::string(op) + " (occupancy query)");
  const std::int64_t blocks = std::int64_t(sm_count_) * std::max(per_sm, 1);
  std::lock_guard lk(mu_);
  one_wave_.emplace(std::make_pair(k, block), blocks);
  return blocks;
}

void CudaContext::enqueue(cudaKernel_t kern, std::int64_t threads_total, Args args, const char* op,
                          bool checked, unsigned block, std::int64_t max_blocks) {
  // Kernels loop with a grid stride, so a grid of a few waves covers any size.
  const std::int64_t cap = max_blocks > 0           ? max_blocks
                           : max_blocks == kOneWave ? one_wave(kern, block, op)
                                                    : std::int64_t(sm_count_) * 32;
  const std::int64_t blocks = std::min<std::int64_t>((threads_total + block - 1) / block, cap);
  const cudaError_t e =
      cudaLaunchKernel(reinterpret_cast<const void*>(kern), dim3(static_cast<unsigned>(blocks)),
                       dim3(block), const_cast<void**>(args.begin()), 0, stream_);
  if (e != cudaSuccess) check(e, std::string(op) + " (kernel launch)");
  if (profile::enabled()) profile::count(profile::Counter::Launch);
  if (checked) {
    std::lock_guard lk(mu_);  // (threads may launch on one device at once)
    checked_ops_.push_back(op);
  }
}

void CudaContext::fill(void* y, std::int64_t n, std::size_t elem_size, std::uint64_t bits) {
  launch(FillKernel(elem_size), n, {&y, &n, &bits}, "fill");
}

std::shared_ptr<DeviceBuffer> CudaContext::constant(DType dt, std::uint64_t bits) {
  const std::pair<DType, std::uint64_t> key{dt, bits};
  {
    std::lock_guard lk(mu_);
    if (auto it = constants_.find(key); it != constants_.end()) return it->second;
  }
  auto buf = std::make_shared<DeviceBuffer>(alloc_, size_of(dt));
  fill(buf->data(), 1, size_of(dt), bits);
  std::lock_guard lk(mu_);
  if (constants_.size() >= kMaxConstants) constants_.clear();
  constants_.emplace(key, buf);
  return buf;
}

void* CudaContext::staging(std::size_t bytes) {
  if (bytes > pinned_bytes_) {
    if (pinned_) {
      check(cudaStreamSynchronize(stream_), "sync");
      cudaFreeHost(pinned_);
      pinned_ = nullptr;
      pinned_bytes_ = 0;
    }
    const std::size_t want = std::max<std::size_t>(bytes, std::size_t(1) << 20);
    check(cudaMallocHost(&pinned_, want), "cudaMallocHost(" + std::to_string(want) + " bytes)");
    pinned_bytes_ = want;
  }
  return pinned_;
}

void CudaContext::sync() {
  activate();
  const std::uint64_t t0 = profile::enabled() ? profile::now_ns() : 0;
  check(cudaStreamSynchronize(stream_), "a queued kernel failed");
  if (t0) {
    profile::count(profile::Counter::Sync);
    profile::sync_wait(profile::now_ns() - t0);
  }
  std::vector<std::string> ops;
  {
    std::lock_guard lk(mu_);
    if (checked_ops_.empty()) return;
    ops.swap(checked_ops_);
  }
  struct {
    int code;
    int pad;
    std::int64_t value;
  } flag{};
  // On the stream, as the kernels that raise the flag: cudaMemcpy and cudaMemset run on the
  // legacy default stream, which a non-blocking stream is not ordered with, so a reset
  // there could land after another thread's next kernel raised the flag, and lose it.
  check(cudaMemcpyAsync(&flag, err_, sizeof flag, cudaMemcpyDeviceToHost, stream_),
        "reading the error flag");
  check(cudaStreamSynchronize(stream_), "reading the error flag");
  if (flag.code == 0) return;
  check(cudaMemsetAsync(err_, 0, 16, stream_), "resetting the error flag");
  std::string names;
  for (const auto& o : ops) {
    if (names.find(o) == std::string::npos) names += (names.empty() ? "" : ", ") + o;
  }
  // Device-side checks are reported at the sync point after the op ran.
  if (flag.code == 2) {
    fail(names + ": integer division by zero (detected on the Cuda device)");
  }
  fail(names + ": index " + std::to_string(flag.value) +
       " is out of range for the indexed dim (detected on the Cuda device)");
}

// ---- geometry ----

void Space::collapse() { backend::collapse_dims(shape, strides); }

bool Space::contiguous() const {
  if (shape.size() != 1) return false;
  for (const auto& s : strides) {
    if (s[0] != 1 && shape[0] != 1) return false;
  }
  return true;
}

Geo Space::geo(const char* op) const {
  Geo g;
  EMBER_CHECK(shape.size() <= static_cast<std::size_t>(kMaxDims),
              std::string(op) + ": the Cuda backend handles at most " + std::to_string(kMaxDims) +
                  " non-collapsible dims, got " + std::to_string(shape.size()));
  EMBER_ASSERT(strides.size() <= static_cast<std::size_t>(kMaxOperands));
  g.rank = static_cast<std::int32_t>(shape.size());
  g.n = 1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    g.shape[i] = shape[i];
    g.n *= shape[i];
    for (std::size_t k = 0; k < strides.size(); ++k) g.st[k][i] = strides[k][i];
  }
  return g;
}

}  // namespace ember::cuda
