// Small builders of IR ops run on the inner backend: what derivative rules are written
// with. The autodiff layer sits below tensor/ and cannot call ember::ops, so these do the
// little shape bookkeeping the rules need (equal-rank NumPy broadcasting, reductions that
// undo a broadcast) and nothing else; operands are assumed well formed.
#pragma once

#include <cstddef>
#include <vector>

#include "ember/backend/backend.hpp"

namespace ember::autodiff::h {

using backend::Backend;
using ir::Handle;

Handle run(Backend& b, ir::Op op);

Handle unary(Backend& b, ir::UnaryFn fn, Handle x, double p0 = 0, double p1 = 0);
// Operands of equal rank, broadcast against each other; comparisons give Bool.
Handle binary(Backend& b, ir::BinaryFn fn, Handle x, Handle y);
Handle add(Backend& b, Handle x, Handle y);
Handle sub(Backend& b, Handle x, Handle y);
Handle mul(Backend& b, Handle x, Handle y);
Handle div(Backend& b, Handle x, Handle y);
Handle neg(Backend& b, Handle x);
// x op s, with s a one-element tensor of x's rank and dtype.
Handle add_scalar(Backend& b, Handle x, double s);
Handle mul_scalar(Backend& b, Handle x, double s);
Handle rsub_scalar(Backend& b, double s, Handle x);  // s - x
Handle compare_scalar(Backend& b, ir::BinaryFn fn, Handle x, double s);
Handle scalar(Backend& b, double v, DType dtype, std::size_t rank);
Handle full(Backend& b, const Shape& shape, double v, DType dtype);
Handle zeros(Backend& b, const Shape& shape, DType dtype);
Handle where(Backend& b, Handle cond, Handle x, Handle y);
// cond ? x : 0
Handle mask(Backend& b, Handle cond, Handle x);
Handle cast(Backend& b, Handle x, DType to);

Handle reduce(Backend& b, ir::ReduceFn fn, Handle x, std::size_t dim);
// Sums x over the dims where shape has extent 1 and x does not; x and shape share a rank.
Handle sum_to(Backend& b, Handle x, const Shape& shape);
Handle scan(Backend& b, ir::ScanFn fn, Handle x, std::size_t dim);
Handle reverse_cumsum(Backend& b, Handle x, std::size_t dim);

Handle reshape(Backend& b, Handle x, const Shape& shape);
Handle permute(Backend& b, Handle x, std::vector<std::size_t> axes);
Handle transpose_last(Backend& b, Handle x);  // swaps the last two dims (a view)
Handle expand(Backend& b, Handle x, const Shape& shape);
Handle flip(Backend& b, Handle x, std::vector<std::size_t> axes);
Handle slice(Backend& b, Handle x, std::vector<ir::SliceRange> ranges);
Handle slice_assign(Backend& b, Handle x, std::vector<ir::SliceRange> ranges, Handle value);
Handle matmul(Backend& b, Handle x, Handle y);  // equal ranks, batch dims broadcast
Handle gather(Backend& b, Handle x, std::size_t dim, Handle index);
Handle scatter(Backend& b, Handle x, std::size_t dim, Handle index, Handle src, bool add);
Handle index_select(Backend& b, Handle x, std::size_t dim, Handle index);
Handle index_add(Backend& b, Handle x, std::size_t dim, Handle index, Handle src);

}  // namespace ember::autodiff::h
