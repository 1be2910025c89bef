// The Backend interface: what every backend (Cpu, Cuda, ...) and every decorator
// (Autodiff, Fusion) implements. A backend turns TensorData into handles, executes IR ops
// on handles and reads handles back. Ops arrive by value: a handle the caller moved into
// the op and that nobody else references may be reused in place (Note [In-place reuse]
// in ember/backend/strided_tensor.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ember/base/checked.hpp"
#include "ember/base/tensor_data.hpp"
#include "ember/ir/ops.hpp"

namespace ember::backend {

struct FusedGroup;      // backend/fused_group.hpp
class AutodiffBackend;  // backend/autodiff_interface.hpp
class FusionInspector;  // backend/fused_group.hpp
struct RandomCounters;  // backend/fused_group.hpp

// What a backend's run_fused takes beyond element-wise instructions over inputs
// (Backend::fused_caps); the Fusion decorator builds only groups its inner backend takes.
struct FusedCaps {
  bool fills = false;  // FusedInstr::Kind::Fill sources (one element, a run-time value)
  // FusedInstr::Kind::Random sources, reserve_random and draw_random (Note [Reserved draws]
  // in backend/fused_group.hpp).
  bool random = false;
  // Whether a group may end in a Reduce of fn over values of dtype along a dim whose later
  // extents are all 1 (a reduction along rows); null: never.
  bool (*row_reduction)(ir::ReduceFn fn, DType dtype) = nullptr;
  // Whether a group's row instruction may be followed by an element-wise epilogue (Note
  // [Row epilogues] in backend/fused_group.hpp); without it a row instruction ends its group.
  bool row_epilogue = false;
};

struct MemoryStats {
  std::size_t in_use = 0;    // bytes held by live tensors
  std::size_t reserved = 0;  // bytes held by the backend, cached or in use
  std::size_t peak = 0;      // largest in_use seen
  // The most one tensor can ever get (a Cpu machine's memory and swap); a request beyond
  // it is an ember::Error at once. kMaxSize (2^62) where the backend does not know.
  std::size_t capacity = kMaxSize;
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;  // "cpu", "cuda:0", "cpu+autodiff": Device::parse's syntax

  virtual ir::Handle from_data(const TensorData& data) = 0;
  // Adopts host memory as a tensor without copying it (a memory-mapped file's tensor):
  // `data` holds shape's elements of dtype, contiguous, writable, and stays valid while
  // `owner` lives; the handle's buffer keeps `owner` alive. Ops may write the memory in
  // place (Note [In-place reuse]), so the caller hands over memory whose writes go nowhere
  // else (a private mapping). Returns null where this backend's tensors cannot live there
  // (device memory, an alignment it needs); the caller then copies with from_data. The
  // default returns null.
  virtual ir::Handle adopt_host(std::byte* data, const Shape& shape, DType dtype,
                                std::shared_ptr<const void> owner);
  // Note [Host access]: a fresh tensor whose bytes the caller writes in host memory, and a
  // tensor's bytes read in place, so that a record load reads a file straight into the
  // tensor it makes and a save writes a tensor's own buffer, with no from_data / to_data
  // copy. Both answer null where this backend's tensors are not host memory (the default):
  // the caller then copies through from_data / to_data.
  //
  // empty_host: a new contiguous tensor of shape and dtype and its bytes (shape's elements
  // of dtype, uninitialised, 64-byte aligned); the caller writes every byte before the
  // handle is used or shared.
  struct HostTensor {
    ir::Handle handle;
    std::byte* data = nullptr;
  };
  virtual HostTensor empty_host(const Shape& shape, DType dtype);
  // x's elements, contiguous, in host memory, after any pending work on x: valid while x
  // lives and no op writes it. Null when they are elsewhere or strided (then to_data).
  virtual const std::byte* host_data(const ir::Handle& x);
  // Waits for pending work on x and copies it out.
  virtual TensorData to_data(const ir::Handle& x) = 0;
  // Executes op; returns its outputs (one for most ops; Sort returns values and indices).
  // An op this backend does not support goes to a fallback backend of the registry
  // (execute_on_fallback in registry.hpp), or raises ember::Error when none can run it.
  virtual std::vector<ir::Handle> execute(ir::Op op) = 0;
  // Whether this backend runs op with its own kernels. The default is the IR's dtype rule
  // (ir::well_typed): a backend overrides it only for its own exceptions, and the
  // fallback, the conformance harness and docs/ops.md all read this answer.
  virtual bool supports(const ir::Op& op) const;

  virtual void seed(std::uint64_t seed) = 0;
  virtual MemoryStats memory_stats() const = 0;
  virtual void empty_cache() = 0;
  virtual void sync() = 0;

  virtual DType default_float() const { return DType::F32; }
  virtual DType default_int() const { return DType::I64; }
  // Runs a fused element-wise group (backend/fused_group.hpp) and returns the handles of
  // group.outputs, in order. The default runs its instructions one by one through execute();
  // a backend with a fused executor overrides it and says so in runs_fused.
  virtual std::vector<ir::Handle> run_fused(FusedGroup group);
  virtual bool runs_fused() const { return false; }
  // What this backend's run_fused takes beyond element-wise instructions over inputs.
  virtual FusedCaps fused_caps() const { return {}; }
  // Note [Reserved draws] (backend/fused_group.hpp), for a backend whose fused_caps().random:
  // reserve_random takes the generator's counters for a draw of n elements now, as
  // execute(Random) would; draw_random draws op at counters so reserved. The defaults raise
  // ember::Error.
  virtual RandomCounters reserve_random(std::uint64_t n);
  virtual ir::Handle draw_random(const ir::Random& op, const RandomCounters& at);

  // A decorator returns the backend it wraps; a plain backend returns null.
  virtual std::shared_ptr<Backend> inner() const { return nullptr; }

  // The decorator capabilities the tensor layer reaches, found without run-time type
  // information (an embedded build has none): the Autodiff decorator returns itself as its
  // AutodiffBackend, the Fusion decorator itself as its FusionInspector; others null.
  virtual AutodiffBackend* autodiff() { return nullptr; }
  virtual FusionInspector* fusion_inspector() { return nullptr; }
};

}  // namespace ember::backend
