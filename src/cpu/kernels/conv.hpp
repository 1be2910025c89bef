// The Cpu's forward convolution as a function of tensors, for the Conv kernel and for fused
// groups that start with a conv (Note [Fused conv epilogues] in fused.cpp).
#pragma once

#include "cpu/context.hpp"
#include "cpu/gemm/gemm.hpp"
#include "ember/ir/ops.hpp"

namespace ember::cpu {

// out = the forward convolution op (op.pass Forward; x and w of dtype T, f32 or f64, any
// strides) into out (ir::out_shape(op) [N, O, *out], contiguous). `epilogue`, when given, is
// applied to each finished block of out as Note [GEMM epilogue] says, with the output seen
// as N matrices [O, L] (L the output positions): `batch` the image, rows [i0, i0 + rows) its
// channels, columns [j0, j0 + cols) its positions, element (i0 + i, j0 + j) at
// c[i * c_rs + j]. The GEMM path hands it the GEMM's blocks of each (image, group) product,
// the phase route (Note [Phase images] in conv.cpp) each block's output-row runs of a
// group's channels once copied out, the direct (depthwise) path each finished output
// plane; blocks are disjoint, cover out
// exactly once, hold the values the convolution without an epilogue stores, and may come from
// concurrent threads.
template <class T>
void conv_forward_into(CpuContext& ctx, const ir::Conv& op, T* out,
                       const GemmEpilogue<T>* epilogue);

namespace detail {
// Test hook: Note [Output rows as tiles] (conv.cpp) taken wherever the phase route is
// (rows 1), never (0), or where it computes fewer multiply-adds (-1, the default).
void conv_force_rows(int rows);
}  // namespace detail

}  // namespace ember::cpu
