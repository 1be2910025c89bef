// The Cuda backend's op launchers, one function per IR op, grouped in files by op family
// as on the Cpu. Each enqueues generated kernels on the context's stream and returns
// without waiting. Operands are well formed: the tensor layer validated them.
#pragma once

#include <vector>

#include "cuda/context.hpp"
#include "ember/ir/infer.hpp"
#include "ember/ir/ops.hpp"

namespace ember::cuda {

// elementwise.cpp
ir::Handle unary(CudaContext& ctx, ir::Unary& op);
ir::Handle binary(CudaContext& ctx, ir::Binary& op);
ir::Handle where(CudaContext& ctx, ir::Where& op);
ir::Handle cast(CudaContext& ctx, ir::Cast& op);
// reduce.cpp
ir::Handle reduce(CudaContext& ctx, ir::Reduce& op);
ir::Handle softmax(CudaContext& ctx, ir::Softmax& op);
ir::Handle scan(CudaContext& ctx, ir::Scan& op);
// norm.cpp
ir::Handle layer_norm(CudaContext& ctx, ir::LayerNorm& op);
// matmul.cpp
ir::Handle matmul(CudaContext& ctx, ir::Matmul& op);
// layout.cpp
ir::Handle reshape(CudaContext& ctx, ir::Reshape& op);
ir::Handle permute(CudaContext& ctx, ir::Permute& op);
ir::Handle expand(CudaContext& ctx, ir::Expand& op);
ir::Handle slice(CudaContext& ctx, ir::Slice& op);
ir::Handle flip(CudaContext& ctx, ir::Flip& op);
ir::Handle slice_assign(CudaContext& ctx, ir::SliceAssign& op);
ir::Handle cat(CudaContext& ctx, ir::Cat& op);
// indexing.cpp
ir::Handle gather(CudaContext& ctx, ir::Gather& op);
ir::Handle scatter(CudaContext& ctx, ir::Scatter& op);
ir::Handle index_select(CudaContext& ctx, ir::IndexSelect& op);
ir::Handle index_add(CudaContext& ctx, ir::IndexAdd& op);
ir::Handle nonzero(CudaContext& ctx, ir::Nonzero& op);
// sort.cpp: values, indices
std::vector<ir::Handle> sort(CudaContext& ctx, ir::Sort& op);
// unfold.cpp
ir::Handle unfold(CudaContext& ctx, ir::Unfold& op);
ir::Handle fold(CudaContext& ctx, ir::Fold& op);
ir::Handle pool(CudaContext& ctx, ir::Pool& op);
// creation.cpp
ir::Handle fill(CudaContext& ctx, ir::Fill& op);
ir::Handle arange(CudaContext& ctx, ir::Arange& op);
ir::Handle random(CudaContext& ctx, ir::Random& op);

}  // namespace ember::cuda
