// The ONNX operators: one function per op type, each a composite of ember ops on
// DynTensor (ember/tensor/ops.hpp, module_ops.hpp). The table is filled by explicit calls
// (register_*), never by static initializers.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ember/tensor/ops.hpp"
#include "graph.hpp"

namespace ember::onnx {

// The ONNX operators that are exactly one ember op, ops::unary(UnaryFn::fn, x) and
// ops::binary(BinaryFn::fn, a, b) (broadcasting): X(onnx_op, fn). The operator table
// registers them from these lists and the code generator writes them as that call.
// (clang-format changes its layout of these lists from run to run.)
// clang-format off
#define EMBER_ONNX_UNARY_OPS(X)                                                               \
  X(Abs, Abs)                                                                                 \
  X(Neg, Neg)                                                                                 \
  X(Sign, Sign)                                                                               \
  X(Reciprocal, Recip)                                                                        \
  X(Sqrt, Sqrt)                                                                               \
  X(Exp, Exp)                                                                                 \
  X(Log, Log)                                                                                 \
  X(Sin, Sin) X(Cos, Cos) X(Tan, Tan) X(Sinh, Sinh) X(Cosh, Cosh) X(Tanh, Tanh) X(Asin, Asin) \
      X(Acos, Acos) X(Atan, Atan) X(Asinh, Asinh) X(Acosh, Acosh) X(Atanh, Atanh) X(Erf, Erf) \
          X(Floor, Floor) X(Ceil, Ceil) X(Round, Round) X(Relu, Relu) X(Sigmoid, Sigmoid)     \
              X(Softplus, Softplus) X(Mish, Mish) X(IsNaN, IsNan) X(BitwiseNot, BitNot)
#define EMBER_ONNX_BINARY_OPS(X)                                                                 \
  X(Add, Add)                                                                                    \
  X(Sub, Sub)                                                                                    \
  X(Mul, Mul)                                                                                    \
  X(Equal, Eq)                                                                                   \
  X(Greater, Gt)                                                                                 \
  X(GreaterOrEqual, Ge)                                                                          \
  X(Less, Lt)                                                                                    \
  X(LessOrEqual, Le) X(And, And) X(Or, Or) X(Xor, Xor) X(BitwiseAnd, BitAnd) X(BitwiseOr, BitOr) \
      X(BitwiseXor, BitXor)
// clang-format on

struct OpCall {
  const Node& node;
  std::int64_t opset;
  const Device& device;
  std::vector<std::optional<DynTensor>> in;  // nullopt: an omitted optional input
  std::size_t num_outputs;                   // outputs the node names (some may be "")
  const Env* env;                            // the values in scope (for subgraphs)

  std::size_t size() const { return in.size(); }
  bool has(std::size_t i) const { return i < in.size() && in[i].has_value(); }
  // Input i, or an ember::Error naming the node when it is missing.
  const DynTensor& at(std::size_t i) const;
  // Input i moved out of the call (it must not be read again): where the graph held its
  // last reference, the operator may then reuse its buffer.
  DynTensor take(std::size_t i) {
    (void)at(i);
    return std::move(*in[i]);
  }
  [[noreturn]] void error(const std::string& what) const;
  void check(bool cond, const std::string& what) const {
    if (!cond) error(what);
  }
};

using OpFn = std::vector<DynTensor> (*)(OpCall&);

struct OpInfo {
  OpFn fn;
  bool foldable;  // deterministic: may run at load time on constant inputs
};

// The table of every supported op type of the default domain.
const std::map<std::string, OpInfo>& op_table();

// Host values of a small tensor (shapes, axes, indices).
std::vector<std::int64_t> host_ints(const DynTensor& t);
std::vector<double> host_f64(const DynTensor& t);
double host_scalar(const DynTensor& t);
// The dtype of an ONNX TensorProto.DataType code (Cast's "to"), nullopt where ember has none.
std::optional<DType> dtype_of_onnx_code(std::int64_t t);

using OpMap = std::map<std::string, OpInfo>;
void register_elementwise(OpMap& m);
void register_shape(OpMap& m);
void register_reduce(OpMap& m);
void register_nn(OpMap& m);
void register_control(OpMap& m);
void register_rnn(OpMap& m);
void register_extra(OpMap& m);

}  // namespace ember::onnx
