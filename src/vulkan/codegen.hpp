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
#include <memory>
#include <string>
#include <vector>

#include "ember/backend/fused_group.hpp"
#include "ember/base/dtype.hpp"
#include "ember/ir/ops.hpp"

namespace ember::vulkan {

// Measurement switches from $EMBER_VULKAN_TUNE (comma-separated words, read once), for
// comparing kernel variants in one process: "strided" (element-wise kernels always take
// the strided walk), "tile64" (matmul always takes the 64 x 64 tile), "noprefetch" (matmul
// without the register prefetch), "nocoopmat" (f16 matmul without cooperative matrices),
// "nocoopvec" (the cooperative-matrix matmul without its 16-byte loads), "nolinecache"
// (softmax and layer norm read the line once a pass),
// "lineloop1" (line kernels load one element an iteration), "nofloatcontrols"
// (kernels do not declare SignedZeroInfNanPreserve) and "noprecise" (element-wise results
// are not `precise`): with either of the last two, signed zeros, NaN and roundings may
// differ from the other backends. Unset: the defaults.
bool tuned(const char* word);

// Most dims an element-wise kernel walks after collapsing (the host collapses the rest).
inline constexpr int kMaxDims = 8;
// The codes kernels write into the context's error word (0: none); an index error also
// writes the index (words 1 and 2, low first).
inline constexpr int kErrorIndex = 1;
inline constexpr int kErrorDivisionByZero = 2;
// Threads per workgroup of the one-dimensional kernels.
inline constexpr std::uint32_t kLocal = 256;
// Elements per thread of an element-wise kernel's linear walk (kLocal apart).
inline constexpr int kMapUnroll = 4;

// Element-wise ("map") arguments: [0] n, [1] rank, [2, 2 + kMaxDims) the output's shape,
// then for the output and each input j (j = 0: output) at kMapOperand + j * (1 + kMaxDims):
// its offset and kMaxDims strides (elements), then p0 and p1 at kMapParams as the compute
// type's 64-bit pattern (low word first).
inline constexpr int kMapOperand = 2 + kMaxDims;
inline constexpr int kMapStride = 1 + kMaxDims;
inline constexpr int kMapParams = kMapOperand + 4 * kMapStride;
inline constexpr int kMapArgs = kMapParams + 4;

enum class Family : std::uint8_t {
  Unary,       // (fn, dtype): y = f(x0)
  Binary,      // (fn, dtype): y = f(x0, x1), Bool for comparisons
  Where,       // (dtype): y = x0 ? x1 : x2
  Cast,        // (from, to)
  Copy,        // (dtype): the bits, any layout to any layout
  Fill,        // (dtype): [0] n, [1..3) the value as the compute type's bits
  Arange,      // (dtype): [0] n, [1..3) start, [3..5) step as f64 bits
  Reduce,      // (fn, dtype, group): [0] lines, [1] n, [2] inner, [3] x offset; x [outer, n, inner]
  Scan,        // (fn, dtype, group): as Reduce; y has x's shape
  Softmax,     // (dtype, log, group): as Reduce
  LayerNorm,   // (dtype, weight | bias << 1, group): [0] rows, [1] n, [2] x offset, [3..5) eps
  Matmul,      // (dtype): see gen_matmul in codegen.cpp
  MatmulCoop,  // f16 on cooperative matrices: Note [Cooperative-matrix matmul] in codegen.cpp
  Fused,       // (FusedKernel): a fused element-wise group, see below
  Random,      // (dtype): [0] n, [1..3) key, [3..5) counter base, [5] kind, [6..8) a,
               // [8..10) b (f64 bits): the Cpu's counter-based generator (needs i64 and f64)
  Gather,      // (dtype, select): y (contiguous) from x at the I64 index; see gen_gather
  Scatter,     // (dtype, add): into y (a contiguous copy of x), a thread per index line
  IndexAdd,    // (dtype): y (a contiguous copy of x) += src rows at the index
  Sort,        // (dtype, descending): [0] elements, [1] n, [2] inner; y, I64 indices, x
  Unfold,      // (dtype): the window arguments below, [19..21) the padding value's bits
  Fold,        // (dtype): float dtypes, sums in the compute type in kernel order
  Pool,        // (PoolFn, dtype): max or sum over the window's entries inside the image
  MaxPoolGrad,  // (dtype, share): the max-pool gradient's shares, then its sums (f32, f64)
  Nonzero,      // (dtype, write): counts of runs, then the coordinates (see gen_nonzero)
  Conv,         // (dtype, ir::ConvPass): Note [Direct convolution] in codegen.cpp
  BatchNorm,    // (dtype, BatchNormStage, weight | bias << 1): see gen_batch_norm
};

// The kernels of ir::BatchNorm (Stats, then Apply) and ir::BatchNormGrad (GradSums, then
// GradInput), over x [N, C, S] per channel.
enum class BatchNormStage : std::uint8_t { Stats, Apply, GradSums, GradInput };

// A fused element-wise group's kernel (backend/fused_group.hpp): the group's structure —
// its inputs' dtypes, its instructions, its outputs and which output is written into which
// input's buffer — never sizes, strides or parameter values. Arguments: the map layout
// over the outputs then the inputs as operands (operand j at kMapOperand + j * kMapStride),
// then instruction i's kFusedParamWords words at fused_params(outputs + inputs) +
// kFusedParamWords * i: its p0 and p1 (compute type's bits, low word first; a Random's a and
// b in f64), then a Random's seed and first counter (Note [Reserved draws]; element i of the
// iteration space draws at counter first + i). Tensors: each output not written in place, then
// each input. Every instruction is printed from the expression table as the unfused
// kernel prints it, in a function of its own under its compute type's prelude; 16-bit
// values are rounded to their dtype after every instruction, as if stored (Note [Fused
// numerics]), so the group's outputs equal its instructions' run one by one.
struct FusedKernel {
  std::vector<DType> inputs;
  std::vector<backend::FusedInstr> code;  // p0 / p1 unused (run-time arguments)
  std::vector<std::int32_t> outputs;      // value ids, as FusedGroup::outputs
  std::vector<std::int32_t> in_place;     // per output: the input whose buffer it takes, or -1
  std::string key;                        // "fused.<structure>", set by fused_spec
  DType dtype_of(std::int32_t v) const {
    const auto i = static_cast<std::size_t>(v);
    return i < inputs.size() ? inputs[i] : code[i - inputs.size()].out;
  }
  // The operand dtype an instruction computes in (a and b of Where).
  DType operand_dtype(std::size_t i) const {
    const backend::FusedInstr& in = code[i];
    return dtype_of(in.kind == backend::FusedInstr::Kind::Where ? in.args[1] : in.args[0]);
  }
};
inline constexpr int kFusedParamWords = 8;
inline constexpr int fused_params(std::size_t operands) {
  return kMapOperand + static_cast<int>(operands) * kMapStride;
}

struct KernelSpec {
  KernelSpec(Family f, std::uint8_t a_ = 0, std::uint8_t b_ = 0, std::uint8_t c_ = 0)
      : family(f), a(a_), b(b_), c(c_) {}
  Family family;
  std::uint8_t a = 0, b = 0, c = 0;
  std::shared_ptr<const FusedKernel> fused;  // Family::Fused
  // The walk of the element-wise families (Unary, Binary, Where, Cast, Copy, Fused): 0, the
  // strided walk; else 1 | (s << 1), the linear walk (Note [Linear walk]) with bit j of s
  // set where operand j (the outputs first) is a broadcast scalar.
  std::uint32_t lin = 0;
  std::string key() const;     // "binary.add.f32": names the pipeline
  std::string source() const;  // the GLSL
  int buffers() const;         // tensors bound at 1.. (the output first)
  // Whether the kernel reports errors (integer division by zero) into the context's error
  // word, bound after its tensors.
  bool reports_errors() const;
  // The ops an error it reports is raised for: its key, or a fused kernel's checked
  // instructions as their unfused kernels' keys ("binary.div.i32").
  std::vector<std::string> checked_ops() const;
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
// cached (with group, lines of at most kLocal * kLineCache): the line is read once into
// registers (Note [Cached lines] in codegen.cpp).
KernelSpec softmax_spec(DType dt, bool log, bool group, bool cached);
KernelSpec layer_norm_spec(DType dt, bool weight, bool bias, bool group, bool cached);
inline constexpr std::size_t kLineCache = 16;
// Lines longer than this get a workgroup each.
inline constexpr std::size_t kGroupLine = 64;
// large: 128 x 128 tiles (8 x 8 outputs a thread), for products that fill the device with
// them; else 64 x 64 (4 x 4).
// prefetch: the next tile loaded into registers during the products (the default;
// EMBER_VULKAN_TUNE=noprefetch for comparisons).
KernelSpec matmul_spec(DType dt, bool large, bool prefetch);
// f16 matmul on the device's matrix units (Features::coopmat; gen_matmul's arguments,
// 128 x 128 tiles of 256 threads): Note [Cooperative-matrix matmul] in codegen.cpp.
// vec8: A and B bound again as 16-byte words (5 buffers: y, a, b, a, b), for row-major
// operands aligned to 8 elements (Note [Cooperative-matrix matmul]).
KernelSpec matmul_coop_spec(bool vec8);
// Whether a matmul of dtype dt takes it: f16 on a device with Features::coopmat, unless
// EMBER_VULKAN_TUNE has "nocoopmat".
bool takes_coopmat(DType dt, bool device_coopmat);
KernelSpec random_spec(DType dt);
// Indexing (I64 indices, so the device needs shaderInt64); out-of-range indices are
// reported as kErrorIndex under the key, which names the op as the Cpu's errors do.
KernelSpec gather_spec(DType dt, bool select);  // "gather.f32", "select.f32"
KernelSpec scatter_spec(DType dt, bool add);    // "scatter.f32", "scatter_add.f32"
KernelSpec index_add_spec(DType dt);            // "select_assign.f32"
// A stable sort along a dim by ranks: a thread per element counts the elements that sort
// before it (O(n) each), so lines are short (the backend takes n <= kSortLine).
KernelSpec sort_spec(DType dt, bool descending);
inline constexpr std::size_t kSortLine = 4096;
// Sliding windows (backend/window.hpp's Window3) over contiguous [planes, *in] images: a
// thread per output element. Arguments: [0] threads, [1..4) in, [4..7) kernel, [7..10)
// stride, [10..13) padding, [13..16) dilation, [16..19) out (positions).
KernelSpec unfold_spec(DType dt);
KernelSpec fold_spec(DType dt);
KernelSpec pool_spec(ir::PoolFn fn, DType dt);
// ir::MaxPoolGrad: share [planes, L] from (x, y, g), then the gradient [planes, *in] from
// (x, y, share); the window arguments as above (f32 and f64, as the Cpu).
KernelSpec max_pool_grad_spec(DType dt, bool share);
// ir::Conv's three passes without the column matrix (float dtypes). Arguments: the window
// arguments above (of the image [N, Cin, *in]), [21..25) N, Cin, O, groups; [0] is the
// output's elements (Forward, InputGrad) or, for WeightGrad (a workgroup an element), its
// elements as workgroups.
KernelSpec conv_spec(DType dt, ir::ConvPass pass);
// Batch norm's four kernels (f32 and f64, as the Cpu's): arguments [0]
// channels (Stats, GradSums: a workgroup a channel) or elements, [1] C, [2] S, [3] N,
// [4..6) eps (compute type's bits). Their loops stride N * S by kLocal (within lavapipe's
// 65535 iterations: N * S <= kLoopValues, as for WeightGrad's N * L).
KernelSpec batch_norm_spec(DType dt, BatchNormStage stage, bool weight, bool bias);
inline constexpr std::size_t kLoopValues = 65535 * static_cast<std::size_t>(kLocal);
// ir::Nonzero: the non-zero count of each run of kNonzeroRun elements, then (after the
// host's prefix sums, the one wait) each run's coordinates (needs I64 storage).
KernelSpec nonzero_spec(DType dt, bool write);
inline constexpr std::size_t kNonzeroRun = 256;
// The kernel of group g with outputs written into the inputs in_place names (-1: fresh).
KernelSpec fused_spec(const backend::FusedGroup& g, std::vector<std::int32_t> in_place);
// Matmul's tile: each workgroup computes matmul_tile(large)^2 outputs.
inline constexpr int matmul_tile(bool large) { return large ? 128 : 64; }

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
