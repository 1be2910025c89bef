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
// Row-major with no gaps (dims of extent 1 may have any stride).
bool is_contiguous(const Shape& shape, const std::vector<std::int64_t>& strides);

// x viewed with `shape` without a copy, when each run of new dims maps onto a run of old
// dims that is contiguous within itself; nullopt when the data must be copied first.
std::optional<StridedView> reshape_view(const StridedView& x, const Shape& shape);
StridedView permute_view(const StridedView& x, const std::vector<std::size_t>& axes);
StridedView expand_view(const StridedView& x, const Shape& shape);  // same rank
StridedView slice_view(const StridedView& x, const std::vector<ir::SliceRange>& ranges);
StridedView flip_view(const StridedView& x, const std::vector<std::size_t>& axes);

}  // namespace ember::backend
