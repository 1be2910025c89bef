// Operand layouts of the GEMM tests (test_gemm.cpp, test_gemm_bf16.cpp): a logical
// rows x cols matrix as row-major, column-major or strided storage, with row strides larger
// than the width so padding is exercised.
#pragma once

#include <cstddef>

namespace ember::cpu::testing {

enum class Layout { RowMajor, ColMajor, Strided };

struct Operand {
  std::ptrdiff_t rs = 0, cs = 0;
  std::size_t elems = 0;  // storage needed for one matrix (1 when it has no element)
};

inline Operand make_layout(Layout l, std::size_t rows, std::size_t cols) {
  Operand o;
  switch (l) {
    case Layout::RowMajor:
      o.cs = 1;
      o.rs = static_cast<std::ptrdiff_t>(cols + 3);
      break;
    case Layout::ColMajor:
      o.rs = 1;
      o.cs = static_cast<std::ptrdiff_t>(rows + 5);
      break;
    case Layout::Strided:
      o.cs = 2;
      o.rs = static_cast<std::ptrdiff_t>(2 * cols + 7);
      break;
  }
  o.elems = (rows == 0 || cols == 0)
                ? 1
                : static_cast<std::size_t>((static_cast<std::ptrdiff_t>(rows) - 1) * o.rs +
                                           (static_cast<std::ptrdiff_t>(cols) - 1) * o.cs + 1);
  return o;
}

}  // namespace ember::cpu::testing
