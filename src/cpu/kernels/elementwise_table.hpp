// Row kernels of the element-wise ops, one table per instruction set. Each row kernel
// handles n elements whose operands are contiguous or (for binary ops) a broadcast scalar;
// the strided driver (elementwise.cpp) reduces every layout to such rows. The tables are
// built from one source (elementwise_rows.inc) compiled once per ISA, and
// elementwise_table() picks the best the CPU supports at run time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ember/base/dtype.hpp"
#include "ember/ir/ops.hpp"

namespace ember::cpu {

constexpr std::size_t kNumDTypes = 10;

// y[i] = f(x[i]); p0/p1 are the op's parameters (converted to the element type).
using UnaryRow = void (*)(const void* x, void* y, std::size_t n, double p0, double p1);
// y[i] = f(a[i], b[i]); a_scalar / b_scalar: that operand is one element for the whole row.
using BinaryRow = void (*)(const void* a, const void* b, void* y, std::size_t n, bool a_scalar,
                           bool b_scalar);

// Softmax (log = false) or log-softmax of `rows` contiguous rows of n elements each.
using SoftmaxRows = void (*)(const void* x, void* y, std::size_t n, std::size_t rows, bool log);

// One value per contiguous row: y[r] = the sum, max or min of x[r*n, r*n + n), for
// `rows` rows. NaN propagates through max and min. The order of the additions depends on
// n alone (sixteen interleaved partial sums), so every ISA's table gives the same bits.
using ReduceRows = void (*)(const void* x, void* y, std::size_t n, std::size_t rows);
enum class RowReduce : std::uint8_t { Sum, Max, Min, Count_ };

// Layer norm of `rows` contiguous rows of n elements: y = (x - mean) * rstd * w + b, with
// w and b (n elements each) optional (null). Mean and variance are accumulated in f64.
using LayerNormRows = void (*)(const void* x, const void* w, const void* b, void* y, std::size_t n,
                               std::size_t rows, double eps);

// Batch norm's per-channel rows (norm.cpp). Each adds to s[0], s[1] the f64 sums over n
// contiguous elements — BatchNormSums: of x - shift and (x - shift)^2 (the statistics);
// BatchNormGradSums: of g and g (x - shift) (the gradient's) — and BatchNormApply writes
// y = a g + b (x - shift) + c (g null: without the a g term), in the element type.
using BatchNormSums = void (*)(const void* x, std::size_t n, double shift, double* s);
using BatchNormGradSums = void (*)(const void* x, const void* g, std::size_t n, double shift,
                                   double* s);
using BatchNormApply = void (*)(const void* x, const void* g, void* y, std::size_t n, double shift,
                                double a, double b, double c);

// RMS norm's rows (norm.cpp), n contiguous elements each. RmsNormSums adds to s[0] the f64
// sum of x^2 and, with g given, to s[1] that of g w x (w null: ones). RmsNormApply writes
// y = a x w with g null, else y = a g w - b x (the gradient dx) and, with dw given, adds
// a g x to dw (f64, n elements); w null: ones.
using RmsNormSums = void (*)(const void* x, const void* w, const void* g, std::size_t n, double* s);
using RmsNormApply = void (*)(const void* x, const void* w, const void* g, void* y, double* dw,
                              std::size_t n, double a, double b);

// y[i] = x[i] converted between f32 and a 16-bit float (Note [Half rows] in
// elementwise_rows.inc: bit for bit base's f16 and bf16 conversions).
using HalfRow = void (*)(const void* x, void* y, std::size_t n);

struct ElementwiseTable {
  UnaryRow unary[static_cast<std::size_t>(ir::UnaryFn::Count_)][kNumDTypes];
  BinaryRow binary[static_cast<std::size_t>(ir::BinaryFn::Count_)][kNumDTypes];
  SoftmaxRows softmax[kNumDTypes];                     // f64 and f32 only
  LayerNormRows layer_norm[kNumDTypes];                // f64 and f32 only
  BatchNormSums batch_norm_sums[kNumDTypes];           // f64 and f32 only
  BatchNormGradSums batch_norm_grad_sums[kNumDTypes];  // f64 and f32 only
  BatchNormApply batch_norm_apply[kNumDTypes];         // f64 and f32 only
  RmsNormSums rms_norm_sums[kNumDTypes];               // f64 and f32 only
  RmsNormApply rms_norm_apply[kNumDTypes];             // f64 and f32 only
  ReduceRows reduce_rows[static_cast<std::size_t>(RowReduce::Count_)][kNumDTypes];  // f64, f32
  HalfRow half_to_f32[2];  // from f16 [0], bf16 [1]
  HalfRow f32_to_half[2];  // to f16 [0], bf16 [1]
  const char* isa;
};

namespace isa_avx512 {
const ElementwiseTable& elementwise_table();
}
namespace isa_avx2 {
const ElementwiseTable& elementwise_table();
}
namespace isa_generic {
const ElementwiseTable& elementwise_table();
}

// The table for cpu::active_isa() (cpu/isa.hpp: the best of this CPU, or EMBER_CPU_ISA).
const ElementwiseTable& elementwise_table();

}  // namespace ember::cpu
