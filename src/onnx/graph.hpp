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
struct OpCall;   // ops.hpp
struct RunMemo;  // model.cpp

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
  // The run plan (Note [Run plan] in model.cpp), made once at load for the top-level
  // graph (empty for subgraphs): the nodes as steps over numbered value slots.
  struct Step {
    std::vector<DynTensor> (*fn)(OpCall&) = nullptr;
    std::vector<std::int32_t> in;       // per input: a value index, -1 = omitted
    std::vector<std::int32_t> out;      // per output: a run slot, -1 = unnamed
    std::vector<std::int32_t> release;  // run slots read for the last time by this step
    // Note [Shape-keyed memo]: Shape/Size keyed by their input's shape; Values keyed by
    // the memo versions of inputs that are all constants or memoized values.
    enum class Memo : std::uint8_t { None, Shape, Values } memo = Memo::None;
    bool has_subgraphs = false;  // reads named outer values (If, Loop): run with an Env
  };
  std::vector<Step> plan;
  // Value indices: [0, slot_names.size()) are a run's slots (graph inputs and node
  // outputs), the rest index const_values (the constants the steps read).
  std::vector<std::string> slot_names;
  std::vector<DynTensor> const_values;
  std::vector<std::int32_t> input_slots;    // per graph input
  std::vector<std::int32_t> output_values;  // per graph output: a value index, -1 = never made
  // The memo's entries, filled by runs (model.cpp; shared, so a const Graph can fill it).
  std::shared_ptr<RunMemo> memo;
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

// Replaces the decompositions exporters write for LayerNormalization and Gelu by those
// nodes (fuse.cpp, Note [Decomposed operators]); returns how many it replaced.
std::size_t fuse_decomposed(Graph& g);

// Runs a graph's nodes over an environment of values (name -> tensor): the control-flow
// operators' subgraphs (Model::run runs the top-level graph's plan, Note [Run plan]).
using Env = std::map<std::string, DynTensor>;
void run_nodes(const Graph& g, Env& env);

}  // namespace ember::onnx
