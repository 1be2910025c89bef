// ONNX import at run time: onnx::load parses a model with the ONNX project's own protobuf
// definitions, checks it with its checker, infers its shapes, and turns its graph into
// ember ops on DynTensor, on any device and decorator stack (on an autodiff device the
// imported model is differentiable). At load time constants are folded (Constant nodes,
// shape computations on static shapes, anything whose inputs are all known), nodes that no
// output needs are dropped, and the declared shapes are propagated so that run() checks
// its inputs against them.
//
//   onnx::Model m = onnx::load("model.onnx", Device::cpu());
//   std::vector<DynTensor> out = m.run({x});   // graph inputs in order, initializers excluded
//
// Every failure is an ember::Error: a malformed or truncated file, an unsupported opset or
// operator (naming the node, its op type and the opset), a missing external-data file, an
// input of the wrong shape or dtype.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/tensor/dyn_tensor.hpp"

namespace ember::onnx {

// A dim of a declared shape: a fixed extent, a named symbol ("batch") or unknown.
struct Dim {
  std::optional<std::size_t> value;
  std::string symbol;  // empty when value is set or the dim is anonymous
};

// A graph input or output as the model declares it.
struct ValueInfo {
  std::string name;
  DType dtype = DType::F32;
  std::optional<std::vector<Dim>> shape;  // nullopt: rank unknown
};

// What load() did to the graph: node counts before and after folding and elimination.
struct LoadStats {
  std::size_t nodes = 0;       // nodes in the file's graph
  std::size_t folded = 0;      // nodes evaluated at load time (constant folding)
  std::size_t eliminated = 0;  // nodes no output depends on
  std::size_t fused = 0;       // decompositions run as their one node (LayerNormalization, Gelu)
  std::size_t kept = 0;        // nodes run() executes
};

struct Graph;  // the loaded graph (src/onnx)

class Model {
 public:
  // Runs the graph on the inputs (graph inputs in order, initializers excluded); returns
  // the graph outputs in order. Inputs must be on the model's device and match the
  // declared dtypes, ranks and fixed extents; a symbolic dim must have the same extent
  // everywhere it appears.
  std::vector<DynTensor> run(const std::vector<DynTensor>& inputs) const;

  const std::vector<ValueInfo>& inputs() const;
  const std::vector<ValueInfo>& outputs() const;
  const Device& device() const;
  std::int64_t opset() const;  // of the default ("ai.onnx") domain
  const LoadStats& stats() const;
  // The initializers (weights) that run() reads, by name; on an autodiff device they
  // require grad, so the gradients of a loss reach them (fine-tuning).
  std::vector<std::pair<std::string, DynTensor>> initializers() const;

  explicit Model(std::shared_ptr<const Graph> graph);

 private:
  std::shared_ptr<const Graph> graph_;
};

struct LoadOptions {
  // Fold nodes whose inputs are all known at load time.
  bool fold_constants = true;
  // On an autodiff device, make the float initializers require grad (and so never fold
  // through them); otherwise they are constants.
  bool trainable = true;
  // Run the decompositions that exporters write for LayerNormalization and Gelu (PyTorch
  // below opsets 17 and 20) as those nodes: one op each instead of nine and five passes,
  // equal up to rounding (docs/onnx.md, "What load does").
  bool fuse_decomposed = true;
};

// Loads a model file (external data is read relative to the file's folder).
Model load(const std::string& path, const Device& device, const LoadOptions& options = {});
// Loads a model from its serialized bytes; external data is read relative to base_dir
// (none allowed when base_dir is empty).
Model load_bytes(const void* data, std::size_t size, const Device& device,
                 const LoadOptions& options = {}, const std::string& base_dir = "");

// The highest default-domain opset this build's ONNX library knows, and the lowest ember
// reads in full (an older model loads when each of its operators is unchanged by opset 7).
std::int64_t max_opset();
constexpr std::int64_t kMinOpset = 7;

// Reads a serialized onnx.TensorProto file (the node tests' input_*.pb / output_*.pb).
TensorData read_tensor_file(const std::string& path);

}  // namespace ember::onnx
