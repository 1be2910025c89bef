// Kernel generators of the Cuda backend: each prints the CUDA C of one kernel for an IR op
// family. A kernel's name is structural — op, function, dtypes and layout class — never
// sizes: extents and strides are kernel arguments, so one compiled kernel serves every
// shape. Generators depend on nothing but the IR, so they are compiled and tested with
// NVRTC on machines without a GPU (tests/cuda/test_cuda_codegen.cpp).
//
// Every kernel source is prelude() + body; the prelude holds the shared device helpers
// (16-bit float conversions, math overloads, the scalar semantics of scalar_ops.hpp that
// need statements) and the EmGeo argument struct, so many bodies can share one program.
#pragma once

#include <cstdint>
#include <string>

#include "ember/base/dtype.hpp"
#include "ember/ir/ops.hpp"

namespace ember::cuda {

// Most dims a strided kernel takes after collapsing (EmGeo in the prelude).
inline constexpr int kMaxDims = 8;
// Most operands an element-wise kernel reads (where: cond, a, b).
inline constexpr int kMaxOperands = 3;

// Host mirror of the prelude's EmGeo: the output's shape and each input's element strides,
// passed to strided kernels by value.
struct Geo {
  std::int32_t rank = 0;
  std::int32_t pad = 0;
  std::int64_t n = 0;  // number of output elements
  std::int64_t shape[kMaxDims] = {};
  std::int64_t st[kMaxOperands][kMaxDims] = {};
};

struct KernelSource {
  std::string name;  // the extern "C" entry point, also the structural key
  std::string body;  // CUDA C, to follow prelude()
};

const std::string& prelude();
std::string full_source(const KernelSource& k);  // prelude() + body

// Whether the table defines fn for dtype (mirrors cpu::unary_defined / binary_defined).
bool unary_supported(ir::UnaryFn fn, DType dt);
bool binary_supported(ir::BinaryFn fn, DType dt);
bool unary_is_predicate(ir::UnaryFn fn);
bool binary_is_comparison(ir::BinaryFn fn);

// Element-wise. `contiguous`: every operand is contiguous with the output's shape (index
// i everywhere); else offsets are unravelled from EmGeo.
// Signature: (EmGeo g, Out* y, const In* x0, const In* x1, const In* x2, double p0,
// double p1, int* err) for every element-wise kernel, unused pointers null.
KernelSource gen_unary(ir::UnaryFn fn, DType dt, bool contiguous);
KernelSource gen_binary(ir::BinaryFn fn, DType dt, bool contiguous);
KernelSource gen_where(DType dt, bool contiguous);  // x0 = cond (bool)
KernelSource gen_cast(DType from, DType to, bool contiguous);
// copy: x0 to y at operand 1's offsets (the destination may be a strided view).
KernelSource gen_copy(std::size_t elem_size, bool contiguous);

// Reductions over [outer, n, inner]: (const In* x, Out* y, i64 outer, i64 n, i64 inner).
// `rows`: inner == 1, one block per output row with warp shuffles; else one thread per
// output element walking the reduced dim.
KernelSource gen_reduce(ir::ReduceFn fn, DType dt, bool rows);
// Softmax (or log-softmax) of contiguous rows of a float dtype.
KernelSource gen_softmax(DType dt, bool log);
// Inclusive scan over [outer, n, inner], one thread per (outer, inner) line.
KernelSource gen_scan(ir::ScanFn fn, DType dt);

// Creation. fill: (T* y, i64 n, u64 bits); arange: (T* y, i64 n, double start, double
// step); random: (T* y, i64 n, u64 key, u64 base, int kind, double a, double b).
KernelSource gen_fill(std::size_t elem_size);
KernelSource gen_arange(DType dt);
KernelSource gen_random(DType dt);

// Indexing; every kernel reports an out-of-range index through err (see prelude em_flag).
// gather: (EmGeo g /*index shape, st[0] = x strides*/, T* y, const T* x, const i64* idx,
//          int dim, i64 extent, int* err)
KernelSource gen_gather(std::size_t elem_size);
// scatter: (EmGeo g /*index shape, st[0] = out strides*/, T* y, const i64* idx, const T* src,
//           int dim, i64 extent, int* err); `add` accumulates with atomics.
KernelSource gen_scatter(DType dt, bool add);
bool scatter_add_supported(DType dt);
// index_select: (T* y, const T* x, const i64* idx, i64 outer, i64 n, i64 k, i64 inner, int* err)
KernelSource gen_index_select(std::size_t elem_size);
// index_add: (T* y /*copy of x*/, const i64* idx, const T* src, i64 outer, i64 n, i64 k,
//             i64 inner, int* err) — one thread per element of y, adding in index order.
KernelSource gen_index_add(DType dt);

// Sliding windows over the canonical 3-d window (backend/window.hpp), one thread per output
// element. Host mirror of the prelude's EmWin, passed by value.
struct Win {
  std::int64_t planes = 0, K = 0, L = 0, image = 0;
  std::int64_t in[3] = {}, k[3] = {}, s[3] = {}, p[3] = {}, d[3] = {}, out[3] = {};
};
// unfold: (EmWin w, T* y, const T* x, u64 pad_bits) — pad_bits hold the padding element.
KernelSource gen_unfold(std::size_t elem_size);
// fold: (EmWin w, T* y, const T* x) — float dtypes; each image element sums its entries.
KernelSource gen_fold(DType dt);

// The CUDA C storage type of a dtype ("float", "h16", "i64", ...).
const char* storage_type(DType dt);

// Every kernel the generators produce for the supported (fn, dtype) combinations: what the
// codegen test compiles.
std::vector<KernelSource> all_kernels();

}  // namespace ember::cuda
