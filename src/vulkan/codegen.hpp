// GLSL compute generators of the Vulkan backend. Each kernel is described by a KernelSpec:
// its family and the few arguments the family's generator reads (function, dtypes, flags),
// never sizes. The spec's key() names the pipeline in the caches and source() prints the
// kernel, both from the same fields, so they cannot disagree. Element-wise kernels print
// the expressions of ir/scalar_table.hpp through the GLSL dialect of ir::sx::print, against
// the prelude printed here for the compute type (math functions with C's special-value
// semantics, integer helpers, limits).
//
// Every kernel reads its scalar arguments from binding 0 (`arg`, 32-bit words, one 0 word
// appended by the context) and its
// tensors from bindings 1.. (the output first); the argument layouts are below. Indices
// are 32-bit: the backend runs a kernel only on buffers within maxStorageBufferRange.
//
// Storage and compute types: f64 double; f32 float; f16 float16_t and bf16 the high half of
// a float, both computed in float; i64 int64_t, i32 int, i16 int16_t, i8 int8_t, u8
// uint8_t computed in their own type (wrapping as the expressions say); bool stored as a
// byte and computed as bool.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/base/dtype.hpp"
#include "ember/ir/ops.hpp"

namespace ember::vulkan {

// Most dims an element-wise kernel walks after collapsing (the host collapses the rest).
inline constexpr int kMaxDims = 8;
// The codes kernels write into the context's error word (0: none).
inline constexpr int kErrorDivisionByZero = 2;
// Threads per workgroup of the one-dimensional kernels.
inline constexpr std::uint32_t kLocal = 256;

// Element-wise ("map") arguments: [0] n, [1] rank, [2, 2 + kMaxDims) the output's shape,
// then for the output and each input j (j = 0: output) at kMapOperand + j * (1 + kMaxDims):
// its offset and kMaxDims strides (elements), then p0 and p1 at kMapParams as the compute
// type's 64-bit pattern (low word first).
inline constexpr int kMapOperand = 2 + kMaxDims;
inline constexpr int kMapStride = 1 + kMaxDims;
inline constexpr int kMapParams = kMapOperand + 4 * kMapStride;
inline constexpr int kMapArgs = kMapParams + 4;

enum class Family : std::uint8_t {
  Unary,      // (fn, dtype): y = f(x0)
  Binary,     // (fn, dtype): y = f(x0, x1), Bool for comparisons
  Where,      // (dtype): y = x0 ? x1 : x2
  Cast,       // (from, to)
  Copy,       // (dtype): the bits, any layout to any layout
  Fill,       // (dtype): [0] n, [1..3) the value as the compute type's bits
  Arange,     // (dtype): [0] n, [1..3) start, [3..5) step as f64 bits
  Reduce,     // (fn, dtype, group): [0] lines, [1] n, [2] inner, [3] x offset; x [outer, n, inner]
  Scan,       // (fn, dtype, group): as Reduce; y has x's shape
  Softmax,    // (dtype, log, group): as Reduce
  LayerNorm,  // (dtype, weight | bias << 1, group): [0] rows, [1] n, [2] x offset, [3..5) eps
  Matmul,     // (dtype): see gen_matmul in codegen.cpp
};

struct KernelSpec {
  Family family;
  std::uint8_t a = 0, b = 0, c = 0;
  std::string key() const;     // "binary.add.f32": names the pipeline
  std::string source() const;  // the GLSL
  int buffers() const;         // tensors bound at 1.. (the output first)
  // Whether the kernel reports errors (integer division by zero) into the context's error
  // word, bound after its tensors.
  bool reports_errors() const;
  std::uint32_t local_size() const;  // threads per workgroup
};

KernelSpec unary_spec(ir::UnaryFn fn, DType dt);
KernelSpec binary_spec(ir::BinaryFn fn, DType dt);
KernelSpec where_spec(DType dt);
KernelSpec cast_spec(DType from, DType to);
KernelSpec copy_spec(DType dt);
KernelSpec fill_spec(DType dt);
KernelSpec arange_spec(DType dt);
// Kernels over lines: `group` gives each line a workgroup (long lines), else a thread.
KernelSpec reduce_spec(ir::ReduceFn fn, DType dt, bool group);
KernelSpec scan_spec(ir::ScanFn fn, DType dt, bool group);
KernelSpec softmax_spec(DType dt, bool log, bool group);
KernelSpec layer_norm_spec(DType dt, bool weight, bool bias, bool group);
// Lines longer than this get a workgroup each.
inline constexpr std::size_t kGroupLine = 64;
KernelSpec matmul_spec(DType dt);
// Matmul's tile: each workgroup computes kMatmulTile x kMatmulTile outputs.
inline constexpr int kMatmulTile = 64;

// Whether the GLSL printer can print e for dtype dt: f64 has only GLSL's double functions
// (abs, sqrt, floor, ceil, roundEven, trunc), so an expression calling exp, sin, ... is
// not printed for f64 (the op falls back).
bool printable(ir::UnaryFn fn, DType dt);
bool printable(ir::BinaryFn fn, DType dt);

// The compute type's 64-bit pattern of v (host side of p0 / p1 / fill values).
std::uint64_t compute_bits(DType dt, double v);
std::uint64_t compute_bits_int(DType dt, std::int64_t v);

// Every kernel the generators produce for the supported (fn, dtype) combinations of the
// given dtypes: what the codegen test compiles.
std::vector<KernelSpec> all_specs(const std::vector<DType>& dtypes);

}  // namespace ember::vulkan
