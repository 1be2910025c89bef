// The cuBLASLt GEMM behind matmul, exposed with its epilogues (bias, relu, gelu) for the
// fusion work: C[b] = epilogue(A[b] · B[b] + bias) over row-major strided matrices.
#pragma once

#include <cstdint>

#include "cuda/context.hpp"

namespace ember::cuda {

enum class Epilogue { None, Relu, Gelu, Bias, BiasRelu, BiasGelu };  // Gelu: tanh form

struct GemmArgs {
  DType dtype = DType::F32;  // F64, F32, F16 or BF16 (accumulated in f32 for 16-bit)
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
  const void* a = nullptr;  // element (r, c) of batch i at a + i * a_bs + r * a_rs + c * a_cs
  std::int64_t a_rs = 0, a_cs = 0, a_bs = 0;
  const void* b = nullptr;
  std::int64_t b_rs = 0, b_cs = 0, b_bs = 0;
  void* c = nullptr;  // row-major, row stride ldc
  std::int64_t ldc = 0, c_bs = 0;
  Epilogue epilogue = Epilogue::None;
  const void* bias = nullptr;  // n elements of dtype, added to every row
};

// Whether gemm() takes these matrices as they are (one of each operand's strides is 1 and
// the other a valid leading dimension); else the caller makes them contiguous first.
bool gemm_layout_ok(const GemmArgs& g);
// Whether f32 GEMMs and convolutions may use TF32 tensor cores (EMBER_CUDA_TF32=1).
bool tf32_enabled();
// Enqueues the GEMM on ctx's stream. f32 uses TF32 tensor cores when EMBER_CUDA_TF32=1.
void gemm(CudaContext& ctx, const GemmArgs& g, const char* op = "matmul");

}  // namespace ember::cuda
