// The arithmetic of strided views, shared by every backend whose tensors are (buffer,
// offset, strides): the layouts that reshape, permute, expand, slice and flip produce
// without moving data. Strides and offsets are in elements; strides may be 0 (broadcast)
// or negative (flip).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ember/base/shape.hpp"
#include "ember/ir/ops.hpp"

namespace ember::backend {

struct StridedView {
  Shape shape;
  std::vector<std::int64_t> strides;
  std::int64_t offset = 0;
};

std::vector<std::int64_t> contiguous_strides(const Shape& shape);
// The same into `out` (its storage reused: a caller building one per call, as the Cpu's fused
// groups do, makes no allocation once it has grown).
void contiguous_strides(const Shape& shape, std::vector<std::int64_t>& out);
// Row-major with no gaps (dims of extent 1 may have any stride).
bool is_contiguous(const Shape& shape, const std::vector<std::int64_t>& strides);

// x viewed with `shape` without a copy, when each run of new dims maps onto a run of old
// dims that is contiguous within itself; nullopt when the data must be copied first.
std::optional<StridedView> reshape_view(const StridedView& x, const Shape& shape);
StridedView permute_view(const StridedView& x, const std::vector<std::size_t>& axes);
StridedView expand_view(const StridedView& x, const Shape& shape);  // same rank
StridedView slice_view(const StridedView& x, const std::vector<ir::SliceRange>& ranges);
StridedView flip_view(const StridedView& x, const std::vector<std::size_t>& axes);

// ---- iteration over strided operands ----

// x's strides viewed at out_shape (same rank): a dim of extent 1 that broadcasts to a larger
// extent gets stride 0. The layout an element-wise operand has in its output's space.
std::vector<std::int64_t> broadcast_strides(const Shape& x_shape,
                                            const std::vector<std::int64_t>& x_strides,
                                            const Shape& out_shape);
void broadcast_strides(const Shape& x_shape, const std::vector<std::int64_t>& x_strides,
                       const Shape& out_shape, std::vector<std::int64_t>& out);

// How an element-wise operand (x: its shape, of the output's rank, and strides) walks the
// output's elements in row-major order, decided without building an iteration space:
// Linear — element i of the output reads element i of x (x is contiguous with the
// output's shape); Scalar — every output element reads x's one element; Strided — any
// other layout (collapse_dims then finds the rows).
enum class Walk : std::uint8_t { Linear, Scalar, Strided };
Walk walk_of(const Shape& x_shape, const std::vector<std::int64_t>& x_strides,
             const Shape& out_shape);

// A shape around one dim: the product of the extents before it, its extent, and the
// product of those after it (what a reduction, scan, sort or index op along dim iterates).
// Int is std::size_t for host loops, std::int64_t for device kernel arguments.
template <class Int = std::size_t>
struct DimSplit {
  Int outer = 1, n = 1, inner = 1;
};
template <class Int = std::size_t>
DimSplit<Int> split_at(const Shape& shape, std::size_t dim) {
  DimSplit<Int> d;
  d.n = static_cast<Int>(shape[dim]);
  for (std::size_t i = 0; i < dim; ++i) d.outer *= static_cast<Int>(shape[i]);
  for (std::size_t i = dim + 1; i < shape.rank(); ++i) d.inner *= static_cast<Int>(shape[i]);
  return d;
}

// Dim collapse: the iteration space `extents` over operands whose element strides are
// strides[k] (each as long as extents), rewritten in place to as few dims as possible —
// dims i and i+1 merge wherever every operand steps through them as one dim, and
// extent-1 dims are dropped. At least one dim is kept: a single element becomes one dim of
// extent 1 with unit strides, so a contiguous output keeps inner stride 1. Allocates
// nothing. Extents may be any integer type; StrideSets is any range of stride vectors
// (std::array or std::vector of them).
template <class Extents, class StrideSets>
void collapse_dims(Extents& extents, StrideSets& strides) {
  std::size_t w = 0;  // dims kept so far: [0, w)
  for (std::size_t i = 0; i < extents.size(); ++i) {
    if (extents[i] == 1) continue;
    if (w > 0) {
      bool mergeable = true;
      for (const auto& st : strides) {
        mergeable = mergeable && st[w - 1] == st[i] * static_cast<std::int64_t>(extents[i]);
      }
      if (mergeable) {
        extents[w - 1] *= extents[i];
        for (auto& st : strides) st[w - 1] = st[i];
        continue;
      }
    }
    extents[w] = extents[i];
    for (auto& st : strides) st[w] = st[i];
    ++w;
  }
  if (w == 0) {
    extents.resize(1);
    extents[0] = 1;
    for (auto& st : strides) st.assign(1, 1);
    return;
  }
  extents.resize(w);
  for (auto& st : strides) st.resize(w);
}

}  // namespace ember::backend
