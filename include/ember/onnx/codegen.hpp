// ONNX import as C++ source: onnx::generate writes, from a model file, a header and a source
// defining an EMBER_MODULE struct that mirrors the graph — nn layers where a node is one
// (Conv -> nn::Conv1d/2d/3d, Gemm and MatMul + Add on constant weights -> nn::Linear,
// BatchNormalization -> nn::BatchNorm, LayerNormalization -> nn::LayerNorm), ember ops for
// the element-wise operators that are exactly one (ops::unary / ops::binary), and
// onnx::apply for every other operator — plus its tensors as a record file (.ember or
// .safetensors) that the struct's load() reads. `ember-onnx model.onnx --out dir/` is the
// command-line form; CMake's ember_onnx_generate(target model.onnx) runs it at build time.
//
//   auto net = generated::SmallCnn::load("small_cnn.ember", Device::cpu());
//   DynTensor y = net.forward(x);          // the graph's inputs -> its output
//
// apply runs one operator of the run-time loader's table on tensors: the generated code
// calls it for the operators that are no layer and no single ember op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/base/tensor_data.hpp"
#include "ember/onnx/onnx.hpp"

namespace ember::onnx {

// A node attribute's value, as the generated code writes it for apply().
struct AttrValue {
  enum class Type : std::uint8_t { Int, Float, String, Ints, Floats, Strings, Tensor };
  Type type = Type::Int;
  std::int64_t i = 0;
  double f = 0;
  std::string s;
  std::vector<std::int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::optional<TensorData> t;

  static AttrValue of_int(std::int64_t v) {
    return with(Type::Int, [&](AttrValue& a) { a.i = v; });
  }
  static AttrValue of_float(double v) {
    return with(Type::Float, [&](AttrValue& a) { a.f = v; });
  }
  static AttrValue of_string(std::string v) {
    return with(Type::String, [&](AttrValue& a) { a.s = std::move(v); });
  }
  static AttrValue of_ints(std::vector<std::int64_t> v) {
    return with(Type::Ints, [&](AttrValue& a) { a.ints = std::move(v); });
  }
  static AttrValue of_floats(std::vector<double> v) {
    return with(Type::Floats, [&](AttrValue& a) { a.floats = std::move(v); });
  }
  static AttrValue of_strings(std::vector<std::string> v) {
    return with(Type::Strings, [&](AttrValue& a) { a.strings = std::move(v); });
  }
  static AttrValue of_tensor(TensorData v) {
    return with(Type::Tensor, [&](AttrValue& a) { a.t = std::move(v); });
  }

 private:
  template <class F>
  static AttrValue with(Type t, F&& set) {
    AttrValue a;
    a.type = t;
    set(a);
    return a;
  }
};
using Attrs = std::vector<std::pair<std::string, AttrValue>>;

// Runs the operator op_type of the default domain at `opset` on the inputs (nullopt: an
// omitted optional input) and returns its first num_outputs outputs. Tensors it creates
// are on `device`. Errors are those of the run-time loader, naming the operator and opset.
std::vector<DynTensor> apply(const std::string& op_type, std::int64_t opset, const Device& device,
                             const std::vector<std::optional<DynTensor>>& inputs,
                             const Attrs& attrs = {}, std::size_t num_outputs = 1);

struct GenerateOptions {
  std::string struct_name;               // default: the file's stem in CamelCase
  std::string ns = "generated";          // the namespace of the struct
  std::string file_stem;                 // default: the file's stem; NAME.hpp, NAME.cpp
  std::string weights_format = "ember";  // "ember" or "safetensors"
};

// What generate wrote and how the graph mapped onto the struct.
struct Generated {
  std::string struct_name;
  std::string header_path, source_path, weights_path;
  std::size_t layers = 0;       // nodes (or MatMul + Add pairs) that became nn layers
  std::size_t direct_ops = 0;   // nodes written as one ember op
  std::size_t applied_ops = 0;  // nodes written as onnx::apply
  std::size_t tensors = 0;      // tensors in the weights file
};

// Loads the model as onnx::load does on the cpu (checks, folding, elimination), then writes
// out_dir/NAME.hpp, NAME.cpp and the weights file. A graph with subgraphs (If, Loop, Scan)
// is refused, naming the node; use onnx::load for those.
Generated generate(const std::string& model_path, const std::string& out_dir,
                   const GenerateOptions& options = {});

}  // namespace ember::onnx
