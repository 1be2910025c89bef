// EMBER_DETECT_NAN (autodiff::detect_nan in ember/autodiff/autodiff.hpp): the checks the
// Autodiff decorator runs after each op when it is on. Private to src/autodiff/.
//
// Note [Detecting NaN]: with the check on, every float output of every op the decorator
// runs — forward ops, and the ops the derivative rules run in backward — is read back
// and scanned; the first one holding a NaN (or, in NanCheck::NonFinite, an infinity)
// throws an ember::Error naming the op, whether it ran in the forward pass or in the
// backward of which op, the output's shape and the first bad element. Operands are
// scanned once, when they enter the decorator from elsewhere (from_data, from_inner):
// an operand already bad is reported as such, so the error always names the op that
// produced the value first. It costs a device-to-host copy per op: a debugging mode.
#pragma once

#include <string>
#include <vector>

#include "ember/autodiff/autodiff.hpp"
#include "ember/backend/backend.hpp"

namespace ember::autodiff {

// "Unary(log)", "Conv2d", "Reduce(sum)": the op's kind and, where it has one, its function.
std::string op_label(const ir::Op& op);

// The first element of x that the mode rejects, as "NaN at element 17" (empty when none,
// when x is not float, or when the mode is Off).
std::string find_bad_element(backend::Backend& be, const ir::Handle& x, NanCheck mode);

// Decorates a backend for a backward pass: every float output of execute() and
// run_fused() is checked, and a bad one throws naming `context()` (the op whose rule runs).
class NanCheckingBackend final : public backend::Backend {
 public:
  NanCheckingBackend(backend::Backend& inner, NanCheck mode) : inner_(inner), mode_(mode) {}
  void set_context(std::string c) { context_ = std::move(c); }

  std::string name() const override { return inner_.name(); }
  ir::Handle from_data(const TensorData& d) override { return inner_.from_data(d); }
  ir::Handle adopt_host(std::byte* data, const Shape& shape, DType dtype,
                        std::shared_ptr<const void> owner) override {
    return inner_.adopt_host(data, shape, dtype, std::move(owner));
  }
  HostTensor empty_host(const Shape& shape, DType dtype) override {
    return inner_.empty_host(shape, dtype);
  }
  const std::byte* host_data(const ir::Handle& x) override { return inner_.host_data(x); }
  TensorData to_data(const ir::Handle& x) override { return inner_.to_data(x); }
  std::vector<ir::Handle> execute(ir::Op op) override;
  bool supports(const ir::Op& op) const override { return inner_.supports(op); }
  void seed(std::uint64_t s) override { inner_.seed(s); }
  backend::MemoryStats memory_stats() const override { return inner_.memory_stats(); }
  void empty_cache() override { inner_.empty_cache(); }
  void sync() override { inner_.sync(); }
  DType default_float() const override { return inner_.default_float(); }
  DType default_int() const override { return inner_.default_int(); }

 private:
  backend::Backend& inner_;
  NanCheck mode_;
  std::string context_;
};

// Throws the error of Note [Detecting NaN] when an output of op is bad. `where` is
// "forward" or "the backward of Unary(log)"; `shapes` the operands' shapes.
void check_outputs(backend::Backend& be, const std::string& label, const std::string& where,
                   const std::vector<Shape>& shapes, const std::vector<ir::Handle>& outs,
                   NanCheck mode);

}  // namespace ember::autodiff
