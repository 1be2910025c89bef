// The Cpu backend's kernels, one function per IR op, grouped in files by op family. Each
// takes the op (owning its operand handles, see Note [In-place reuse]) and returns the
// output handles. Operands are well formed: the tensor layer validated them.
#pragma once

#include <optional>
#include <vector>

#include "cpu/context.hpp"
#include "ember/ir/infer.hpp"
#include "ember/ir/ops.hpp"

namespace ember::backend {
struct FusedGroup;
}

namespace ember::cpu {

using Outputs = std::vector<ir::Handle>;

// elementwise.cpp
ir::Handle unary(CpuContext& ctx, ir::Unary& op);
ir::Handle binary(CpuContext& ctx, ir::Binary& op);
ir::Handle where(CpuContext& ctx, ir::Where& op);
ir::Handle cast(CpuContext& ctx, ir::Cast& op);
// reduce.cpp
ir::Handle reduce(CpuContext& ctx, ir::Reduce& op);
ir::Handle scan(CpuContext& ctx, ir::Scan& op);
// softmax.cpp
ir::Handle softmax(CpuContext& ctx, ir::Softmax& op);
// norm.cpp
ir::Handle layer_norm(CpuContext& ctx, ir::LayerNorm& op);
// sort.cpp
Outputs sort(CpuContext& ctx, ir::Sort& op);
// matmul.cpp
ir::Handle matmul(CpuContext& ctx, ir::Matmul& op);
// layout.cpp
ir::Handle reshape(CpuContext& ctx, ir::Reshape& op);
ir::Handle permute(CpuContext& ctx, ir::Permute& op);
ir::Handle expand(CpuContext& ctx, ir::Expand& op);
ir::Handle slice(CpuContext& ctx, ir::Slice& op);
ir::Handle flip(CpuContext& ctx, ir::Flip& op);
ir::Handle slice_assign(CpuContext& ctx, ir::SliceAssign& op);
ir::Handle cat(CpuContext& ctx, ir::Cat& op);
// indexing.cpp
ir::Handle gather(CpuContext& ctx, ir::Gather& op);
ir::Handle scatter(CpuContext& ctx, ir::Scatter& op);
ir::Handle index_select(CpuContext& ctx, ir::IndexSelect& op);
ir::Handle index_add(CpuContext& ctx, ir::IndexAdd& op);
ir::Handle nonzero(CpuContext& ctx, ir::Nonzero& op);
// unfold.cpp
ir::Handle unfold(CpuContext& ctx, ir::Unfold& op);
ir::Handle fold(CpuContext& ctx, ir::Fold& op);
ir::Handle pool(CpuContext& ctx, ir::Pool& op);
// fused.cpp: a fused element-wise group as a tile program; nullopt when some instruction
// has no row kernel here (the caller runs the group op by op).
std::optional<Outputs> run_fused(CpuContext& ctx, backend::FusedGroup& group);
// creation.cpp
ir::Handle fill(CpuContext& ctx, ir::Fill& op);
ir::Handle arange(CpuContext& ctx, ir::Arange& op);
ir::Handle random(CpuContext& ctx, ir::Random& op);

}  // namespace ember::cpu
