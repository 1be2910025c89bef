#include "tensor/op_support.hpp"

namespace ember::ops::detail {

DynTensor run(const Device& device, ir::Op op) {
  auto outs = device.backend().execute(std::move(op));
  EMBER_ASSERT(!outs.empty());
  return DynTensor(std::move(outs[0]), device);
}

std::vector<DynTensor> run_all(const Device& device, ir::Op op) {
  auto outs = device.backend().execute(std::move(op));
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
  Shape s(std::vector<std::size_t>(x.rank(), 1));
  return full(s, v, x.dtype(), x.device());
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
