// The Cpu's batched, broadcasting matmul as a function of tensors, for the Matmul kernel and
// for fused groups that start with a matmul (Note [Fused matmul epilogues] in fused.cpp).
#pragma once

#include "cpu/context.hpp"
#include "cpu/cpu_tensor.hpp"
#include "cpu/gemm/gemm.hpp"

namespace ember::cpu {

// out = a · b for ir::Matmul's operands a and b (of out_shape's rank, matrix dims [m, k]
// and [k, n], batch dims out_shape's or 1; any strides) into out (out_shape [..., m, n],
// contiguous; T is f32 or f64, the operands' dtype). `epilogue` (Note [GEMM epilogue]), when
// given, is applied to each finished block of out, its `batch` the flat index over
// out_shape's batch dims.
template <class T>
void matmul_into(CpuContext& ctx, const CpuTensor& a, const CpuTensor& b, const Shape& out_shape,
                 T* out, const GemmEpilogue<T>* epilogue);

// ir::Matmul of bf16 operands by the bf16 GEMM (cpu/gemm/gemm_bf16.hpp), for CPUs with a
// bf16 dot product (gemm_bf16_native()): the product accumulated in f32, then rounded to bf16
// once, as the widened product is.
ir::Handle matmul_bf16(CpuContext& ctx, const ir::Matmul& op);

}  // namespace ember::cpu
