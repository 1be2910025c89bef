// Note [Detecting NaN] (nan_check.hpp).
#include "autodiff/nan_check.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <variant>

#include "ember/base/config.hpp"
#include "ember/base/error.hpp"

namespace ember::autodiff {

namespace {

NanCheck mode_from_env() {
  const char* v = std::getenv("EMBER_DETECT_NAN");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "0") == 0) return NanCheck::Off;
  if (std::strcmp(v, "inf") == 0 || std::strcmp(v, "2") == 0) return NanCheck::NonFinite;
  return NanCheck::Nan;
}

Atomic<NanCheck>& mode_slot() {
  static Atomic<NanCheck> slot{mode_from_env()};
  return slot;
}

}  // namespace

NanCheck detect_nan() { return mode_slot().load(std::memory_order_relaxed); }
void set_detect_nan(NanCheck mode) { mode_slot().store(mode, std::memory_order_relaxed); }

std::string op_label(const ir::Op& op) {
  return std::visit(
      [](const auto& o) -> std::string {
        std::string s = ir::name(ir::kind_of(ir::Op(o)));
        if constexpr (requires { ir::name(o.fn); }) s += std::string("(") + ir::name(o.fn) + ")";
        return s;
      },
      op);
}

std::string find_bad_element(backend::Backend& be, const ir::Handle& x, NanCheck mode) {
  if (mode == NanCheck::Off || !x || !is_float(x->dtype())) return {};
  const std::vector<double> v = be.to_data(x).to_vector<double>();
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return "NaN at element " + std::to_string(i);
    if (mode == NanCheck::NonFinite && std::isinf(v[i]))
      return std::string(v[i] > 0 ? "+Inf" : "-Inf") + " at element " + std::to_string(i);
  }
  return {};
}

void check_outputs(backend::Backend& be, const std::string& label, const std::string& where,
                   const std::vector<Shape>& shapes, const std::vector<ir::Handle>& outs,
                   NanCheck mode) {
  for (std::size_t k = 0; k < outs.size(); ++k) {
    const std::string bad = find_bad_element(be, outs[k], mode);
    if (bad.empty()) continue;
    std::string operands;
    for (const Shape& s : shapes) operands += (operands.empty() ? "" : ", ") + s.to_string();
    fail("EMBER_DETECT_NAN: " + label + " (" + where + ") produced " + bad + " of its output " +
         std::to_string(k) + " (" + ember::name(outs[k]->dtype()) + " " +
         outs[k]->shape().to_string() + ") from operands " +
         (operands.empty() ? std::string("(none)") : operands) + " that held none");
  }
}

std::vector<ir::Handle> NanCheckingBackend::execute(ir::Op op) {
  const std::string label = op_label(op);
  std::vector<Shape> shapes;
  ir::for_each_operand(op, [&](ir::Handle& h) {
    if (h) shapes.push_back(h->shape());
  });
  auto outs = inner_.execute(std::move(op));
  check_outputs(inner_, label, context_, shapes, outs, mode_);
  return outs;
}

}  // namespace ember::autodiff
