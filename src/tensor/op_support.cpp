#include "tensor/op_support.hpp"

#include <new>
#include <stdexcept>

#include "ember/base/checked.hpp"

namespace ember::ops::detail {

namespace {
// Only ember::Error leaves a public function: what a backend's containers or the system
// throw is translated here, the one boundary every op crosses.
std::vector<ir::Handle> execute(const Device& device, ir::Op&& op) {
  const ir::OpKind kind = ir::kind_of(op);
  return ember::detail::catch_std([&] { return device.backend().execute(std::move(op)); },
                                  [&](const char* what, bool out_of_memory) {
                                    fail(std::string(ir::name(kind)) + " on " + device.name() +
                                         ": " + (out_of_memory ? "out of memory" : what));
                                  });
}
}  // namespace

DynTensor run(const Device& device, ir::Op&& op) {
  auto outs = execute(device, std::move(op));
  EMBER_ASSERT(!outs.empty());
  return DynTensor(std::move(outs[0]), device);
}

std::vector<DynTensor> run_all(const Device& device, ir::Op&& op) {
  auto outs = execute(device, std::move(op));
  std::vector<DynTensor> r;
  r.reserve(outs.size());
  for (auto& h : outs) r.emplace_back(std::move(h), device);
  return r;
}

std::string describe(const std::string& op, std::initializer_list<const DynTensor*> xs) {
  std::string s = op;
  s += " (";
  bool first = true;
  for (const DynTensor* x : xs) {
    if (!first) s += ", ";
    first = false;
    s += x->shape().to_string() + " " + name(x->dtype());
  }
  return s + ")";
}

std::size_t check_size(const Shape& shape, DType dtype, const std::string& op) {
  return checked_bytes(shape, dtype, op);
}

std::size_t check_size(const Shape& shape, DType dtype, const std::string& op,
                       const Device& device) {
  const std::size_t bytes = checked_bytes(shape, dtype, op);
  if (bytes < (std::size_t{1} << 30)) return bytes;  // small: no need to ask the device
  const std::size_t cap = device.backend().memory_stats().capacity;
  EMBER_CHECK(bytes <= cap, op + ": a tensor of shape " + shape.to_string() + " and dtype " +
                                name(dtype) + " needs " + std::to_string(bytes) +
                                " bytes, more than " + device.name() + " can ever allocate (" +
                                std::to_string(cap) + " bytes)");
  return bytes;
}

void check_same_device(const DynTensor& a, const DynTensor& b, const char* op) {
  EMBER_CHECK(a.device() == b.device(), std::string(op) + ": tensors are on different devices (" +
                                            a.device().name() + " and " + b.device().name() + ")");
}

void check_kind(const DynTensor& x, std::initializer_list<Kind> allowed, const char* op) {
  for (Kind k : allowed) {
    if (x.kind() == k) return;
  }
  std::string want;
  for (Kind k : allowed) want += std::string(want.empty() ? "" : " or ") + name(k);
  fail(std::string(op) + ": expected a " + want + " tensor, got dtype " + name(x.dtype()) +
       " with shape " + x.shape().to_string());
}

DynTensor scalar_like(const DynTensor& x, double v) {
  return fill(Shape(std::vector<std::size_t>(x.rank(), 1)), v, x.dtype(), x.device());
}

DynTensor left_pad_rank(DynTensor x, std::size_t rank) {
  if (x.rank() >= rank) return x;
  std::vector<std::size_t> dims(rank - x.rank(), 1);
  for (std::size_t d : x.shape()) dims.push_back(d);
  return reshape(std::move(x), Shape(std::move(dims)));
}

DynTensor index_tensor(const std::vector<std::int64_t>& values, const Device& device) {
  return from_data(TensorData::from(values), device);
}

}  // namespace ember::ops::detail
