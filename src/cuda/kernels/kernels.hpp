// The Cuda backend's op launchers, one `run` overload per IR op, grouped in files by op family
// as on the Cpu. Each enqueues generated kernels on the context's stream and returns
// without waiting. Operands are well formed: the tensor layer validated them.
#pragma once

#include <optional>
#include <vector>

#include "cuda/context.hpp"
#include "ember/backend/fused_group.hpp"
#include "ember/backend/kernel_dispatch.hpp"
#include "ember/ir/infer.hpp"
#include "ember/ir/ops.hpp"

namespace ember::cuda {

// One launcher per IR op, declared from the op list (backend/kernel_dispatch.hpp): a new
// op needs its `run` defined in the file of its family — elementwise.cpp (Unary, Binary,
// Where, Cast), reduce.cpp (Reduce, Softmax, Scan), norm.cpp (LayerNorm), attention.cpp,
// matmul.cpp, layout.cpp (views, SliceAssign, Cat), indexing.cpp (Gather, Scatter, IndexSelect,
// IndexAdd, Nonzero), sort.cpp, unfold.cpp (Unfold, Fold, Pool), creation.cpp (Fill,
// Arange, Random) — or no program that links libember_cuda.so links.
#define EMBER_CUDA_KERNEL(T) backend::KernelResult<ir::T> run(CudaContext& ctx, ir::T& op);
EMBER_IR_OPS(EMBER_CUDA_KERNEL)
#undef EMBER_CUDA_KERNEL

// A fused element-wise group as one generated kernel (fused.cpp; codegen.hpp's FusedSpec):
// its outputs, or nullopt where the group does not fit one kernel (more than kMaxDims
// collapsed dims, arguments over kMaxArgBytes, a function not defined for its dtype, a
// key seen with another structure), which then runs op by op.
std::optional<std::vector<ir::Handle>> run_fused_group(CudaContext& ctx,
                                                       backend::FusedGroup& group);

// Note [Reserved draws] (backend/fused_group.hpp), creation.cpp: the counters of a draw of n
// elements made now, and op drawn at counters so reserved (what run(ctx, op) draws when it
// takes them).
backend::RandomCounters reserve_counters(CudaContext& ctx, std::uint64_t n);
ir::Handle draw(CudaContext& ctx, const ir::Random& op, const backend::RandomCounters& at);

// The chunk count k with which run(ctx, Reduce) reduces a contiguous x of this shape along
// dim (reduce.cpp, Note [Two-pass reductions]): 1 for one pass of the rows or columns
// kernel; else the dim is cut into k chunks, reduced each, and the partials reduced over k.
std::int64_t reduce_chunk_count(ir::ReduceFn fn, DType dt, const Shape& shape, std::size_t dim);
// The second pass of Note [Two-pass reductions]: `first` holds the first pass's results,
// outer * k * inner of them ([outer, k, inner] in order); they are reduced over k and
// returned with out_shape, exactly as run(ctx, Reduce) finishes a two-pass reduction.
ir::Handle reduce_partials(CudaContext& ctx, ir::ReduceFn fn, ir::Handle first, std::int64_t outer,
                           std::int64_t k, std::int64_t inner, const Shape& out_shape);

// Whether run(ctx, Conv) takes op (conv.cpp): cuDNN loaded, a float dtype it has (bf16 from
// sm_80), 1 to 3 spatial dims, extents that fit its int dims.
bool conv_supported(const ir::Conv& op, int arch);

// Whether run(ctx, Attention) and run(ctx, AttentionGrad) take attention over q and v
// (attention.cpp): batch dims at most kMaxDims, head dims E and Ev at most 128 (64 for
// f64: the bound of the kernels' shared-memory tiles, codegen/attention.cpp). Every float
// dtype and mask kind.
bool attention_supported(const ir::Handle& q, const ir::Handle& v);

}  // namespace ember::cuda
