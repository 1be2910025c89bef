// Kernel generators of the Cuda backend: each prints the CUDA C of one kernel for an IR op
// family (codegen/elementwise.cpp, codegen/reduce.cpp, the rest in codegen.cpp, around the
// shared vocabulary of codegen/printer.hpp). A kernel's name is structural — op, function,
// dtypes and layout class — never sizes: extents and strides are kernel arguments, so one
// compiled kernel serves every shape. Generators depend on nothing but the IR, so they are compiled
// and tested with NVRTC on machines without a GPU (tests/cuda/test_cuda_codegen.cpp).
//
// Every kernel source is prelude() + body; the prelude holds the shared device helpers
// (16-bit float conversions, the math primitives and integer semantics that the scalar
// expressions of ir/scalar_table.hpp call, tuned forms) and the EmGeo argument struct, so
// many bodies can share one program.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "ember/backend/fused_group.hpp"
#include "ember/base/dtype.hpp"
#include "ember/base/error.hpp"
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

// Elements per thread and iteration of a contiguous element-wise kernel whose widest operand
// (or output) element has `bytes` bytes: one 16-byte access per operand (Note [Vector
// loads] in codegen/printer.cpp).
constexpr int vector_width(std::size_t bytes) {
  return bytes >= 16 ? 1 : static_cast<int>(16 / bytes);
}

// The structural key of a generated kernel packed into 64 bits: the generator (family) and
// the arguments it takes (function, dtypes, element size, layout, flags). Every launcher
// looks its kernel up by key, so a launch never prints or hashes a kernel's source; the
// key stands for the source, so it holds every argument its generator reads, each in a
// field wide enough for it (checked here: a value that did not fit would give two sources
// one key). Enum arguments (DType, the IR functions) are 8-bit, so they fit any field.
enum class Family : std::uint8_t {
  Unary,           // (fn, dtype, contiguous)
  Binary,          // (fn, dtype, contiguous | scalar_mask << 1)
  Where,           // (element size, 0, contiguous | scalar_mask << 1)
  Cast,            // (from, to, contiguous)
  Copy,            // (element size, 0, contiguous)
  Reduce,          // (fn, dtype, rows)
  Softmax,         // (dtype, log, ept, vec; ept 0: the row-walking kernel)
  LayerNorm,       // (dtype, ept, vec; ept 0: the row-walking kernel)
  Fill,            // (element size)
  Scan,            // (fn, dtype)
  Arange,          // (dtype)
  Random,          // (dtype)
  Gather,          // (element size)
  Scatter,         // (dtype, add)
  IndexSelect,     // (element size)
  IndexAdd,        // (dtype)
  SortRows,        // (dtype)
  SortInit,        // ()
  SortStage,       // (dtype)
  SortWrite,       // (element size)
  NonzeroCount,    // (dtype)
  NonzeroWrite,    // (dtype)
  ScanTiles,       // ()
  AddTileOffsets,  // ()
  Unfold,          // (element size, wide)
  Fold,            // (dtype, wide)
  Pool,            // (dtype, max, wide)
  Count_
};
constexpr std::uint64_t kernel_key(Family f, unsigned a = 0, unsigned b = 0, unsigned c = 0,
                                   unsigned d = 0) {
  EMBER_ASSERT(a <= 0xffff && b <= 0xffff && c <= 0xff && d <= 0xffff);
  return std::uint64_t(f) | std::uint64_t(a) << 8 | std::uint64_t(b) << 24 |
         std::uint64_t(c) << 40 | std::uint64_t(d) << 48;
}

struct KernelSource {
  std::string name;  // the extern "C" entry point, also the structural key
  std::string body;  // CUDA C, to follow prelude()
};

const std::string& prelude();
std::string full_source(const KernelSource& k);  // prelude() + body

// Whether fn is defined for dtype (ir/scalar_table.hpp), so gen_unary / gen_binary print it.
bool unary_supported(ir::UnaryFn fn, DType dt);
bool binary_supported(ir::BinaryFn fn, DType dt);

// Element-wise. `contiguous`: every operand is contiguous with the output's shape (index
// i everywhere); else offsets are unravelled from EmGeo.
// Signature: (EmGeo g, Out* y, const In* x0, const In* x1, const In* x2, double p0,
// double p1, int* err) for every element-wise kernel, unused pointers null.
KernelSource gen_unary(ir::UnaryFn fn, DType dt, bool contiguous);
// scalar_mask (contiguous kernels only): bit k set when operand k is one element broadcast
// over the output, as in x + 2.0; not every operand.
KernelSource gen_binary(ir::BinaryFn fn, DType dt, bool contiguous, unsigned scalar_mask = 0);
KernelSource gen_where(DType dt, bool contiguous, unsigned scalar_mask = 0);  // x0 = cond
KernelSource gen_cast(DType from, DType to, bool contiguous);
// copy: x0 to y at operand 1's offsets (the destination may be a strided view).
KernelSource gen_copy(std::size_t elem_size, bool contiguous);

// A fused element-wise group (backend/fused_group.hpp) as one kernel (codegen/fused.cpp):
// each instruction printed by the same code as its single-op kernel (printer.hpp's
// unary_code, binary_code, cast_value, where_value), its result held in its dtype's storage
// type — so a 16-bit value is rounded after each instruction, as if stored — and only the
// outputs written, each at the element index (outputs are contiguous; one may be an input's
// buffer: every thread reads its element of every input before writing that element).
// Variants: `contiguous`, every input walks the output linearly or is one element
// (scalar_mask, bit k: input k), with 16-byte vector accesses when aligned (Note [Vector
// loads]); else strided, offsets unravelled from at most kMaxDims collapsed dims.
struct FusedSpec {
  std::vector<DType> inputs;  // each input's dtype
  std::vector<backend::FusedInstr> code;
  std::vector<std::int32_t> outputs;  // value ids, as FusedGroup::outputs
  bool contiguous = false;
  std::uint32_t scalar_mask = 0;
  std::string name;  // the entry point: structural, from the group's key and the variant
};
// The kernel's one argument: EmWords<words> (64-bit words) by value — n, rank, the
// collapsed shape (8 words), then, from `strides` (strided kernels only), each input's
// strides (8 words an input), the input pointers, the output pointers, the error flag,
// and two words of parameters (double bits) per instruction from `params`.
struct FusedArgs {
  int strides = -1, inputs = 0, outputs = 0, err = 0, params = 0, words = 0;
};
FusedArgs fused_args(const FusedSpec& s);
// The bytes CUDA allows a kernel's arguments: a group whose words do not fit runs op by op.
inline constexpr std::size_t kMaxArgBytes = 4096;
std::string fused_name(std::uint64_t key, bool contiguous, std::uint32_t scalar_mask);
// The spec of group g's program (its inputs' dtypes, code, outputs; the variant and name
// still to be set), and whether every instruction is defined for its dtypes.
FusedSpec fused_spec(const backend::FusedGroup& g);
bool fused_supported(const FusedSpec& s);
KernelSource gen_fused(const FusedSpec& s);

// Reductions over [outer, n, inner]: (const In* x, Out* y, i64 outer, i64 n, i64 inner).
// `rows`: inner == 1, one block per output row with warp shuffles; else one thread per
// output element walking the reduced dim.
KernelSource gen_reduce(ir::ReduceFn fn, DType dt, bool rows);
// Softmax (or log-softmax) of contiguous rows of a float dtype.
KernelSource gen_softmax(DType dt, bool log);
// Rows held in registers (Note [Rows in registers] in codegen.cpp): `ept` (a power of two)
// elements per thread in chunks of `vec` consecutive ones, blockDim * ept >= n; one block
// walks rows.
// softmax: (const T* x, T* y, i64 rows, i64 n)
// layer norm: (const T* x, const T* w, const T* b, double eps, T* y, i64 rows, i64 n)
// At most 8 per thread (4 for f64), so that two blocks of 512 threads fit an SM.
inline int rows_max_ept(DType dt) { return size_of(dt) > 4 ? 4 : 8; }
KernelSource gen_softmax_regs(DType dt, bool log, int ept, int vec);
KernelSource gen_layer_norm_regs(DType dt, int ept, int vec);
// (block, ept, vec) for rows of n elements of dtype dt: about 8 per thread, at most 512
// threads; block 0 when the row is too long to hold in registers. `aligned`: every row
// pointer the kernel reads or writes is 16-byte aligned, so chunks may be vector accesses.
struct RowsInRegisters {
  unsigned block;
  int ept;
  int vec;
};
RowsInRegisters rows_in_registers(std::int64_t n, DType dt, bool aligned);
// Whether every pointer is aligned to 16 bytes (null pointers count as aligned).
bool aligned16(std::initializer_list<const void*> ptrs);
// Layer norm of contiguous rows of a float dtype: (const T* x, const T* w, const T* b, T* y,
// i64 rows, i64 n, double eps); w and b (n elements) may be null.
KernelSource gen_layer_norm(DType dt);
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
//             i64 inner, int* err). `rows` false: one thread per (outer, inner) column,
// adding src rows in index order; true: one thread per element of y (outer, row, inner)
// scanning the index for its row, in index order too (the same sums, bit for bit), for
// small outputs (Note [Index add by rows] in kernels/indexing.cpp).
KernelSource gen_index_add(DType dt, bool rows = false);

// Sort (kernels/sort.cpp, see Note [Device sort] there) and nonzero (kernels/indexing.cpp).
// A row of the sort is the n elements at base + p * inner (base = (r / inner) * n * inner +
// r % inner). Every kernel takes `desc` (0/1): ties keep the original order either way.
// Rows of at most kSortSharedMax elements, one block per row, bitonic in shared memory:
//   (const T* x, T* values, i64* indices, i64 rows, i64 n, i64 inner, i64 np2, int desc)
inline constexpr std::int64_t kSortSharedMax = 2048;
KernelSource gen_sort_rows(DType dt);
// Longer rows: a bitonic network over ord, [rows, np2] i64 original positions (>= n pads):
//   init:  (i64* ord, i64 rows, i64 np2)
//   stage: (const T* x, i64* ord, i64 rows, i64 n, i64 inner, i64 np2, i64 k, i64 j, int desc)
//   write: (const T* x, const i64* ord, T* values, i64* indices, i64 rows, i64 n, i64 inner,
//           i64 np2)
KernelSource gen_sort_init();
KernelSource gen_sort_stage(DType dt);
KernelSource gen_sort_write(std::size_t elem_size);
// Nonzero, in tiles of kScanTile elements (one block of kScanBlock threads per tile):
//   count: (const T* x, i64 n, i64* counts, i64 tiles) — non-zeros of each tile
//   write: (EmGeo g /*shape*/, const T* x, const i64* offsets, i64* y) — coordinates
// and the multi-pass exclusive scan of an i64 array they use:
//   scan_tiles: (i64* a, i64 n, i64* sums) — each tile scanned in place, its total in sums
//   add_offsets: (i64* a, i64 n, const i64* offsets) — a[i] += offsets[i / kScanTile]
inline constexpr int kScanBlock = 256;
inline constexpr std::int64_t kScanTile = 1024;  // kScanBlock threads x 4 elements
KernelSource gen_nonzero_count(DType dt);
KernelSource gen_nonzero_write(DType dt);
KernelSource gen_scan_tiles();
KernelSource gen_add_tile_offsets();
// Sliding windows over the canonical 3-d window (backend/window.hpp), one thread per output
// element. Host mirror of the prelude's EmWin, passed by value.
struct Win {
  std::int64_t planes = 0, K = 0, L = 0, image = 0;
  std::int64_t in[3] = {}, k[3] = {}, s[3] = {}, p[3] = {}, d[3] = {}, out[3] = {};
};
// unfold: (EmWin w, T* y, const T* x, u64 pad_bits) — pad_bits hold the padding element.
// `wide`: 64-bit index arithmetic, needed when an index of the image or the columns
// reaches 2^31 (window_index_wide in kernels/unfold.cpp).
KernelSource gen_unfold(std::size_t elem_size, bool wide);
// fold: (EmWin w, T* y, const T* x) — float dtypes; each image element sums its entries.
KernelSource gen_fold(DType dt, bool wide);
// pool: (EmWin w, T* y, const T* x) — the max (max) or the sum of each window position's
// entries inside the image; every dtype but bool.
KernelSource gen_pool(DType dt, bool max, bool wide);

// The CUDA C storage type of a dtype ("float", "h16", "i64", ...).
const char* storage_type(DType dt);

// Every kernel of one family that its launchers can ask for (each supported function,
// dtype and layout variant). A switch over every Family with no default: a family added
// without its variants does not compile, so the NVRTC compile test never misses one.
std::vector<KernelSource> variants(Family family);
// variants() of every family: what the codegen test compiles.
std::vector<KernelSource> all_kernels();

}  // namespace ember::cuda
