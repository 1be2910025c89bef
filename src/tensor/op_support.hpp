// Shared checks and plumbing of the op library (src/tensor/ops_*.cpp): running an IR op on
// a device and the validation every function repeats (devices, kinds, dims).
#pragma once

#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "ember/ir/infer.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::ops::detail {

// Executes op on device (the op is moved into the backend, never copied) and wraps its
// first output. A foreign exception from the backend
// (std::bad_alloc, std::length_error, ...) becomes an ember::Error naming the IR op.
DynTensor run(const Device& device, ir::Op&& op);
std::vector<DynTensor> run_all(const Device& device, ir::Op&& op);

// "op: " + what, with the shapes and dtypes of xs appended.
std::string describe(const std::string& op, std::initializer_list<const DynTensor*> xs);

// The byte count of a tensor of shape and dtype that `op` is about to make: an ember::Error
// naming op and the shape when it exceeds 2^62 bytes (ember/base/checked.hpp).
std::size_t check_size(const Shape& shape, DType dtype, const std::string& op);
// As check_size, and also within what device can ever allocate (MemoryStats::capacity).
std::size_t check_size(const Shape& shape, DType dtype, const std::string& op,
                       const Device& device);

void check_same_device(const DynTensor& a, const DynTensor& b, const char* op);
void check_kind(const DynTensor& x, std::initializer_list<Kind> allowed, const char* op);
// The range of an int (or bool) dtype as doubles; +-inf for float dtypes. For i64 the upper
// end is 2^63, one past the max.
std::pair<double, double> int_range(DType dtype);
// The value `op` fills a dtype with, as PyTorch's full: an ember::Error when the dtype
// cannot hold it (an int dtype: NaN, the infinities and values outside its range; a float
// dtype: finite values beyond its largest); ints truncate towards zero, and u8 takes a
// negative integer down to -255 modulo 256, as PyTorch does.
double fill_value(double value, DType dtype, const std::string& op);
// Fill without the checks: int values saturate into the dtype's range (NaN gives 0).
DynTensor fill(Shape shape, double value, DType dtype, const Device& device);
// A tensor of x's rank, dtype and device holding one element v (broadcasts against x); an
// int value outside the dtype's range saturates.
DynTensor scalar_like(const DynTensor& x, double v);
// x reshaped to `rank` dims by adding leading dims of extent 1.
DynTensor left_pad_rank(DynTensor x, std::size_t rank);
// Whether x is part of an autodiff graph (false on a plain device): a function composes a
// differentiable path only where it is.
bool is_tracked(const DynTensor& x);
// A rank-1 I64 tensor of the given values on device.
DynTensor index_tensor(const std::vector<std::int64_t>& values, const Device& device);

}  // namespace ember::ops::detail
