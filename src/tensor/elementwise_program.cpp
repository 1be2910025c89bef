// ElementwiseProgram (ember/tensor/elementwise_program.hpp): builds a FusedGroup from
// tensors and instructions, checked here, and hands it to the device's backend.
#include "ember/tensor/elementwise_program.hpp"

#include <string>

#include "ember/base/hash.hpp"
#include "ember/ir/scalar_table.hpp"
#include "op_support.hpp"

namespace ember::ops {

namespace {

constexpr const char* kWho = "ElementwiseProgram";

}  // namespace

ElementwiseProgram::Value ElementwiseProgram::input(DynTensor x) {
  // Value ids number the inputs first, then the instructions.
  EMBER_CHECK(group_.code.empty(), std::string(kWho) + "::input: inputs come before instructions");
  if (!device_) {
    device_ = x.device();
    group_.shape = x.shape();
  } else {
    EMBER_CHECK(x.device() == *device_, std::string(kWho) + "::input: a tensor on " +
                                            x.device().name() + ", the program runs on " +
                                            device_->name());
    EMBER_CHECK(x.dtype() == group_.dtype_of(0), std::string(kWho) + "::input: dtype " +
                                                     name(x.dtype()) + ", the program's is " +
                                                     name(group_.dtype_of(0)));
    bool fits = x.rank() == group_.shape.rank();
    for (std::size_t d = 0; fits && d < x.rank(); ++d)
      fits = x.shape()[d] == group_.shape[d] || x.shape()[d] == 1;
    EMBER_CHECK(fits, std::string(kWho) + "::input: shape " + x.shape().to_string() +
                          " does not broadcast to the program's shape " + group_.shape.to_string() +
                          " (same rank, each extent equal or 1)");
  }
  group_.signature += "in " + std::string(name(x.dtype()));
  for (std::size_t d = 0; d < x.rank(); ++d)
    group_.signature += x.shape()[d] == 1 && group_.shape[d] != 1 ? " b" : " .";
  group_.signature += ";";
  group_.inputs.push_back(std::move(x).handle());
  return Value{static_cast<std::int32_t>(group_.inputs.size() - 1)};
}

ElementwiseProgram::Value ElementwiseProgram::scalar(double v) {
  EMBER_CHECK(device_.has_value(), std::string(kWho) + "::scalar: give an input first");
  return input(detail::fill(Shape(std::vector<std::size_t>(group_.shape.rank(), 1)), v,
                            group_.dtype_of(0), *device_));
}

void ElementwiseProgram::check_value(Value v, const char* who) const {
  EMBER_CHECK(v.id >= 0 && static_cast<std::size_t>(v.id) < group_.num_values(),
              std::string(kWho) + "::" + who + ": value " + std::to_string(v.id) +
                  " is not a value of this program (it has " + std::to_string(group_.num_values()) +
                  ")");
}

ElementwiseProgram::Value ElementwiseProgram::push(backend::FusedInstr in) {
  constexpr std::size_t kMaxInstructions = 64;  // as the Fusion decorator's groups
  EMBER_CHECK(group_.code.size() < kMaxInstructions,
              std::string(kWho) + ": more than 64 instructions");
  group_.code.push_back(in);
  return Value{static_cast<std::int32_t>(group_.num_values() - 1)};
}

ElementwiseProgram::Value ElementwiseProgram::unary(ir::UnaryFn fn, Value a, double p0, double p1) {
  check_value(a, "unary");
  const DType dt = group_.dtype_of(a.id);
  EMBER_CHECK(ir::sx::defined_for(fn, dt),
              std::string(kWho) + "::unary: " + ir::name(fn) + " is not defined for " + name(dt));
  backend::FusedInstr in;
  in.kind = backend::FusedInstr::Kind::Unary;
  in.unary = fn;
  in.p0 = p0;
  in.p1 = p1;
  in.args = {a.id, -1, -1};
  in.out = ir::sx::result_dtype(fn, dt);
  group_.signature += std::string(ir::name(fn)) + " " + std::to_string(a.id) + ";";
  return push(in);
}

ElementwiseProgram::Value ElementwiseProgram::binary(ir::BinaryFn fn, Value a, Value b) {
  check_value(a, "binary");
  check_value(b, "binary");
  const DType dt = group_.dtype_of(a.id);
  EMBER_CHECK(group_.dtype_of(b.id) == dt, std::string(kWho) + "::binary: " + ir::name(fn) +
                                               " of " + name(dt) + " and " +
                                               name(group_.dtype_of(b.id)));
  EMBER_CHECK(ir::sx::defined_for(fn, dt),
              std::string(kWho) + "::binary: " + ir::name(fn) + " is not defined for " + name(dt));
  backend::FusedInstr in;
  in.kind = backend::FusedInstr::Kind::Binary;
  in.binary = fn;
  in.args = {a.id, b.id, -1};
  in.out = ir::sx::result_dtype(fn, dt);
  group_.signature +=
      std::string(ir::name(fn)) + " " + std::to_string(a.id) + " " + std::to_string(b.id) + ";";
  return push(in);
}

std::vector<DynTensor> ElementwiseProgram::run(const std::vector<Value>& outputs) && {
  EMBER_CHECK(device_.has_value() && !outputs.empty(),
              std::string(kWho) + "::run: a program needs an input and an output");
  for (Value v : outputs) {
    check_value(v, "run");
    EMBER_CHECK(static_cast<std::size_t>(v.id) >= group_.inputs.size(),
                std::string(kWho) + "::run: output " + std::to_string(v.id) +
                    " is an input; outputs are instruction results");
    group_.outputs.push_back(v.id);
    group_.signature += "out " + std::to_string(v.id) + ";";
  }
  // A prefix no group of the Fusion decorator has, so the two never share a cache entry.
  group_.signature = "ElementwiseProgram|" + group_.signature;
  group_.key = hash_bytes(group_.signature);
  const Device dev = *device_;
  std::vector<ir::Handle> outs;
  try {
    outs = dev.backend().run_fused(std::move(group_));
  } catch (const Error&) {
    throw;
  } catch (const std::bad_alloc&) {
    fail(std::string(kWho) + " on " + dev.name() + ": out of memory");
  } catch (const std::exception& e) {
    fail(std::string(kWho) + " on " + dev.name() + ": " + e.what());
  }
  EMBER_ASSERT(outs.size() == outputs.size());
  std::vector<DynTensor> r;
  r.reserve(outs.size());
  for (auto& h : outs) r.emplace_back(std::move(h), dev);
  return r;
}

}  // namespace ember::ops
