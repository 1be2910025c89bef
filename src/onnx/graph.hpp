// The loaded ONNX graph: nodes over named values, with their attributes converted from
// protobuf into plain structs, so nothing past the parser (proto.cpp) sees protobuf.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ember/base/tensor_data.hpp"
#include "ember/onnx/onnx.hpp"

namespace ember::onnx {

struct Graph;
struct OpCall;  // ops.hpp

struct Attr {
  enum class Type { Float, Int, String, Tensor, Graph, Floats, Ints, Strings, Other };
  Type type = Type::Other;
  double f = 0;
  std::int64_t i = 0;
  std::string s;
  std::optional<TensorData> t;
  std::shared_ptr<Graph> g;
  std::vector<double> floats;
  std::vector<std::int64_t> ints;
  std::vector<std::string> strings;
};

struct Node {
  std::string name, op_type, domain;
  std::vector<std::string> inputs;   // "" = an omitted optional input
  std::vector<std::string> outputs;  // "" = an omitted optional output
  std::map<std::string, Attr> attrs;

  // "node 'name' (Op)" for messages.
  std::string describe() const;
  bool has(const std::string& a) const { return attrs.count(a) != 0; }
  std::int64_t i(const std::string& a, std::int64_t dflt) const;
  double f(const std::string& a, double dflt) const;
  std::string s(const std::string& a, const std::string& dflt) const;
  std::vector<std::int64_t> ints(const std::string& a,
                                 const std::vector<std::int64_t>& dflt = {}) const;
  std::vector<double> floats(const std::string& a, const std::vector<double>& dflt = {}) const;
};

struct Graph {
  std::string name;
  std::int64_t opset = 0;
  Device device = Device::cpu();
  std::vector<ValueInfo> inputs, outputs;       // inputs exclude initializers
  std::vector<Node> nodes;                      // topological order, after folding and elimination
  std::map<std::string, DynTensor> constants;   // initializers and folded values
  std::vector<std::string> initializer_names;   // in file order
  std::vector<std::string> trainable;           // initializers that require grad
  std::map<std::string, ValueInfo> value_info;  // inferred types of intermediates
  // Names visible from an enclosing graph (a subgraph of If/Loop/Scan reads them).
  std::vector<std::string> outer_names;
  // The run plan, made once at load for the top-level graph (empty for subgraphs): per
  // node its operator (no table lookup per run) and the values it reads for the last time,
  // which run_nodes drops from the environment before the node runs, so an operator
  // holding the only reference may write its result into that buffer (Note [In-place
  // reuse]).
  struct NodePlan {
    std::vector<DynTensor> (*fn)(OpCall&) = nullptr;
    std::vector<std::string> last_reads;
  };
  std::vector<NodePlan> plan;
  // Whether run() puts the constants into the environment: only a graph with subgraphs
  // needs them there (a subgraph reads outer values from it); otherwise nodes find them
  // in `constants` directly and no per-run copy is made.
  bool constants_in_env = true;
  LoadStats stats;
};

// Parses, checks and shape-infers a serialized model; converts it to a Graph with the
// initializers on `device`, before folding (model.cpp finishes it).
std::shared_ptr<Graph> parse_model(const void* data, std::size_t size, const Device& device,
                                   const std::string& base_dir, bool trainable);

// parse_model, then the checks, constant folding and dead-node elimination of onnx::load.
std::shared_ptr<Graph> load_graph(const std::string& path, const Device& device,
                                  const LoadOptions& options);
std::shared_ptr<Graph> load_graph_bytes(const void* data, std::size_t size, const Device& device,
                                        const LoadOptions& options, const std::string& base_dir);

// Runs a graph's nodes over an environment of values (name -> tensor); used by Model::run
// and by the control-flow operators for their subgraphs.
using Env = std::map<std::string, DynTensor>;
void run_nodes(const Graph& g, Env& env);

}  // namespace ember::onnx
