// Shared checks and plumbing of the op library (src/tensor/ops_*.cpp): running an IR op on
// a device and the validation every function repeats (devices, kinds, dims).
#pragma once

#include <initializer_list>
#include <string>
#include <vector>

#include "ember/ir/infer.hpp"
#include "ember/tensor/ops.hpp"

namespace ember::ops::detail {

// Executes op on device and wraps its first output.
DynTensor run(const Device& device, ir::Op op);
std::vector<DynTensor> run_all(const Device& device, ir::Op op);

// "op: " + what, with the shapes and dtypes of xs appended.
std::string describe(const std::string& op, std::initializer_list<const DynTensor*> xs);

void check_same_device(const DynTensor& a, const DynTensor& b, const char* op);
void check_kind(const DynTensor& x, std::initializer_list<Kind> allowed, const char* op);
// A tensor of x's rank, dtype and device holding one element v (broadcasts against x).
DynTensor scalar_like(const DynTensor& x, double v);
// x reshaped to `rank` dims by adding leading dims of extent 1.
DynTensor left_pad_rank(DynTensor x, std::size_t rank);
// A rank-1 I64 tensor of the given values on device.
DynTensor index_tensor(const std::vector<std::int64_t>& values, const Device& device);

}  // namespace ember::ops::detail
