// ElementwiseProgram: a straight-line element-wise program over tensors of one shape, with
// several outputs, run as one fused group (backend/fused_group.hpp) on the tensors' own
// device. Where the backend has a fused executor (the Cpu's tile programs) the whole program
// is one pass over memory: every input read once, every output written once, and an output
// takes the buffer of an input handed over by value that nobody else holds (Note [Fused
// in-place] of the Cpu). Elsewhere it runs instruction by instruction, as the same ops
// would. Either way the results equal, bit for bit, those of the same ops run one by one
// (Note [Fused numerics]).
//
// It serves code that knows its whole element-wise update in advance — an optimizer's step
// (optim/adam.cpp) reads the param, its gradient and two moments and writes three tensors
// in one pass instead of a dozen — without a Fusion decorator on the device.
//
//   ops::ElementwiseProgram prog;
//   auto p = prog.input(std::move(param)), g = prog.input(std::move(grad));
//   auto out = prog.sub(p, prog.mul(g, prog.scalar(lr)));
//   DynTensor updated = std::move(prog).run({out})[0];
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "ember/backend/fused_group.hpp"
#include "ember/tensor/dyn_tensor.hpp"

namespace ember::ops {

class ElementwiseProgram {
 public:
  // A value of the program: an input or an instruction's result.
  struct Value {
    std::int32_t id = -1;
  };

  // An input. The first input fixes the program's shape, dtype and device; every other input
  // has the same rank, dtype and device, and each of its extents is the shape's or 1 (read
  // through a broadcast). Hand it over by value (std::move) so an output may reuse it.
  Value input(DynTensor x);
  // A one-element input holding v in the program's dtype (after the first input). Inputs and
  // scalars all come before the first instruction.
  Value scalar(double v);
  // fn(a) and a fn b. Functions whose result has the operands' dtype only (arithmetic,
  // min/max, ...): predicates and comparisons are refused.
  Value unary(ir::UnaryFn fn, Value a, double p0 = 0, double p1 = 0);
  Value binary(ir::BinaryFn fn, Value a, Value b);

  Value add(Value a, Value b) { return binary(ir::BinaryFn::Add, a, b); }
  Value sub(Value a, Value b) { return binary(ir::BinaryFn::Sub, a, b); }
  Value mul(Value a, Value b) { return binary(ir::BinaryFn::Mul, a, b); }
  Value div(Value a, Value b) { return binary(ir::BinaryFn::Div, a, b); }
  Value maximum(Value a, Value b) { return binary(ir::BinaryFn::Max, a, b); }
  Value sqrt(Value a) { return unary(ir::UnaryFn::Sqrt, a); }
  Value square(Value a) { return unary(ir::UnaryFn::Square, a); }

  // Runs the program and returns `outputs` (instruction results), in order, each of the
  // program's shape. The program is consumed.
  std::vector<DynTensor> run(const std::vector<Value>& outputs) &&;

  std::size_t num_inputs() const { return group_.inputs.size(); }
  std::size_t num_instructions() const { return group_.code.size(); }

 private:
  void check_value(Value v, const char* who) const;
  Value push(backend::FusedInstr in);

  backend::FusedGroup group_;
  std::optional<Device> device_;  // the first input's
};

}  // namespace ember::ops
