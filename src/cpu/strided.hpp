// Strided iteration shared by the Cpu kernels: collapse an iteration space over several
// strided operands to as few dims as possible (backend::collapse_dims, shared with every
// backend), then visit it row by row (the innermost dim), optionally in parallel on the
// Cpu's thread pool. Every Cpu kernel that walks views goes through here.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cpu/cpu_tensor.hpp"
#include "cpu/thread_pool.hpp"
#include "ember/backend/strided_view.hpp"

namespace ember::cpu {

// An iteration space of `shape` over N operands, with each operand's element strides.
template <std::size_t N>
struct StridedSpace {
  std::vector<std::size_t> shape;
  std::array<std::vector<std::int64_t>, N> strides;

  // Dim collapse (backend::collapse_dims): merges dims every operand steps through as one
  // and drops extent-1 dims, keeping at least one dim.
  void collapse() { backend::collapse_dims(shape, strides); }

  std::size_t rows() const {
    std::size_t r = 1;
    for (std::size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
    return r;
  }
  std::size_t row_length() const { return shape.back(); }

  // Calls f(offsets, n) for each row: offsets[k] is operand k's element offset of the row's
  // first element, n the row length; the row's inner strides are strides[k].back().
  // Rows are split across threads when there are at least `min_parallel` elements.
  template <class F>
  void for_each_row(F&& f, std::size_t min_parallel = 1 << 15) const {
    const std::size_t nrows = rows();
    const std::size_t len = row_length();
    const std::size_t outer = shape.size() - 1;
    auto body = [&](std::size_t r0, std::size_t r1) {
      std::vector<std::size_t> idx(outer, 0);
      std::array<std::int64_t, N> off{};
      // Decompose r0 into a multi-index.
      std::size_t rem = r0;
      for (std::size_t d = outer; d-- > 0;) {
        idx[d] = rem % shape[d];
        rem /= shape[d];
      }
      for (std::size_t k = 0; k < N; ++k) {
        std::int64_t o = 0;
        for (std::size_t d = 0; d < outer; ++d)
          o += static_cast<std::int64_t>(idx[d]) * strides[k][d];
        off[k] = o;
      }
      for (std::size_t r = r0; r < r1; ++r) {
        f(off, len);
        // Advance the multi-index by one row.
        for (std::size_t d = outer; d-- > 0;) {
          ++idx[d];
          for (std::size_t k = 0; k < N; ++k) off[k] += strides[k][d];
          if (idx[d] < shape[d]) break;
          for (std::size_t k = 0; k < N; ++k)
            off[k] -= strides[k][d] * static_cast<std::int64_t>(shape[d]);
          idx[d] = 0;
        }
      }
    };
    const std::size_t total = nrows * len;
    if (total < min_parallel || num_threads() == 1) {
      body(0, nrows);
    } else if (nrows >= 2 * num_threads()) {
      const std::size_t grain =
          std::max<std::size_t>(1, (min_parallel / 2) / std::max<std::size_t>(len, 1));
      parallel_for(0, nrows, grain, body);
    } else {
      // Few long rows: split each row into pieces so every thread gets work.
      const std::size_t pieces =
          std::max<std::size_t>(1, (len + min_parallel / 2 - 1) / (min_parallel / 2));
      const std::size_t per = (len + pieces - 1) / pieces;
      parallel_for(0, nrows * pieces, 1, [&](std::size_t i0, std::size_t i1) {
        for (std::size_t i = i0; i < i1; ++i) {
          const std::size_t r = i / pieces, p = i % pieces;
          const std::size_t b = p * per, e = std::min(len, b + per);
          if (b >= e) continue;
          std::array<std::int64_t, N> off{};
          std::size_t rem = r;
          for (std::size_t d = outer; d-- > 0;) {
            const auto id = static_cast<std::int64_t>(rem % shape[d]);
            rem /= shape[d];
            for (std::size_t k = 0; k < N; ++k) off[k] += id * strides[k][d];
          }
          for (std::size_t k = 0; k < N; ++k)
            off[k] += static_cast<std::int64_t>(b) * strides[k].back();
          f(off, e - b);
        }
      });
    }
  }
};

}  // namespace ember::cpu
