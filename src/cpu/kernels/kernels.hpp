// The Cpu backend's kernels, one `run` overload per IR op, grouped in files by op family. Each
// takes the op (owning its operand handles, see Note [In-place reuse]) and returns the
// output handles. Operands are well formed: the tensor layer validated them.
#pragma once

#include <optional>
#include <vector>

#include "cpu/context.hpp"
#include "ember/backend/kernel_dispatch.hpp"
#include "ember/ir/infer.hpp"
#include "ember/ir/ops.hpp"

namespace ember::backend {
struct FusedGroup;
}

namespace ember::cpu {

using Outputs = std::vector<ir::Handle>;

// One kernel per IR op, declared from the op list (backend/kernel_dispatch.hpp): a new
// op needs its `run` defined in the file of its family — elementwise.cpp (Unary, Binary,
// Where, Cast), reduce.cpp (Reduce, Scan), softmax.cpp, norm.cpp (LayerNorm), sort.cpp,
// matmul.cpp, layout.cpp (views, SliceAssign, Cat), indexing.cpp (Gather, Scatter,
// IndexSelect, IndexAdd, Nonzero), unfold.cpp (Unfold, Fold, Pool), creation.cpp (Fill,
// Arange, Random) — or no program that links libember links.
#define EMBER_CPU_KERNEL(T) backend::KernelResult<ir::T> run(CpuContext& ctx, ir::T& op);
EMBER_IR_OPS(EMBER_CPU_KERNEL)
#undef EMBER_CPU_KERNEL
// fused.cpp: a fused element-wise group as a tile program; nullopt when some instruction
// has no row kernel here (the caller runs the group op by op).
std::optional<Outputs> run_fused(CpuContext& ctx, backend::FusedGroup& group);
// reduce.cpp, for fused groups that end in a reduction along rows (fused.cpp): whether
// reduce_row takes fn over dt (16-bit floats: reduced in f32, as the widened op), and one
// contiguous row of n values of dt (f32, f64, i32, i64) reduced into *y (dt; i64 for
// ArgMax / ArgMin) exactly as the Reduce kernel reduces each row of n elements (the same
// code, so the same order and the same bits). ArgMax / ArgMin need n > 0.
bool reduces_rows(ir::ReduceFn fn, DType dt);
void reduce_row(ir::ReduceFn fn, DType dt, const void* row, std::size_t n, void* y);
// The same reduction of a long row as chunks (Note [Chunked rows] in reduce.cpp), so that
// the chunks of one row may run on several threads: the chunk length of rows of n elements
// (0 where such rows are not chunked), one chunk's part (reduce_part_bytes: a value of dt,
// or for ArgMax / ArgMin the chunk's extreme and its index), and the row's result from its
// parts in order (of dt; i64 for ArgMax / ArgMin) — together the bits reduce_row gives.
std::size_t reduce_row_chunk(ir::ReduceFn fn, std::size_t n);
std::size_t reduce_part_bytes(ir::ReduceFn fn, DType dt);
void reduce_chunk(ir::ReduceFn fn, DType dt, const void* x, std::size_t len, void* part);
void reduce_chunks(ir::ReduceFn fn, DType dt, const void* parts, std::size_t chunks, std::size_t n,
                   void* y);
// elementwise.cpp: y[i] = c[i * cs] ? a[i * as] : b[i * bs] for i < n, elements of elem bytes
// selected by their bits without a branch (Note [Branch-free select]); strides in elements.
void select_row(const unsigned char* c, std::int64_t cs, const std::byte* a, std::int64_t as,
                const std::byte* b, std::int64_t bs, std::byte* y, std::size_t n, std::size_t elem);
// elementwise.cpp: n contiguous elements converted as base's convert_elements converts them,
// bit for bit; between f32 and f16 or bf16 by the active ISA's rows (Note [Half rows]).
void convert_row(const void* src, DType from, void* dst, DType to, std::size_t n);

}  // namespace ember::cpu
