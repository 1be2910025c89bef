// Load-time rewrites for run(): the decompositions an exporter writes for operators of a
// later opset become the one node they decompose, which ember runs as one op instead of a
// pass per element-wise step (Note [Decomposed operators]). The code generator reads the
// graph as exported and does not see them.
#include <cmath>
#include <set>

#include "ops.hpp"

namespace ember::onnx {

namespace {

// Note [Decomposed operators]
// PyTorch exports nn.LayerNorm at opsets below 17 (which has LayerNormalization) as nine
// nodes and the exact GELU below opset 20 as five:
//
//   m = ReduceMean(x, axes [-1])   d = Sub(x, m)       v = ReduceMean(Pow(d, 2), axes [-1])
//   y = Add(Mul(Div(d, Sqrt(Add(v, eps))), gamma), beta)
//
//   y = Mul(Mul(x, Add(Erf(Div(x, sqrt 2)), 1)), 0.5)
//
// (commuted operands of Add and Mul are matched too). Each is replaced by its node —
// LayerNormalization(x, gamma, beta; axis -1, epsilon eps), Gelu(x) — placed where the last
// node of the pattern was, so the order stays topological. A pattern is replaced only when
// every value inside it is read by the pattern alone (not by another node, a subgraph or as
// a graph output), its scalars are constants that do not require grad, and gamma and beta
// are rank-1 constants; the fused node computes the same function up to rounding (the
// element-wise steps round after each step, ops::layer_norm and the Gelu unary do not).
class Fuser {
 public:
  explicit Fuser(Graph& g) : g_(g), dead_(g.nodes.size(), false) {
    for (std::size_t i = 0; i < g.nodes.size(); ++i) {
      const Node& n = g.nodes[i];
      for (const auto& o : n.outputs)
        if (!o.empty()) producer_[o] = i;
      for (const auto& in : n.inputs)
        if (!in.empty()) readers_[in].push_back(i);
      // A subgraph may read any outer value by name: a graph with one is left as it is.
      for (const auto& [k, a] : n.attrs)
        if (a.g) has_subgraphs_ = true;
    }
    for (const auto& o : g.outputs) shared_.insert(o.name);  // read from outside
  }

  std::size_t run() {
    if (has_subgraphs_) return 0;
    std::size_t fused = 0;
    for (std::size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_[i] || !g_.nodes[i].domain.empty()) continue;
      if (g_.nodes[i].op_type == "ReduceMean") fused += layer_norm(i);
      if (g_.nodes[i].op_type == "Erf") fused += gelu(i);
    }
    std::vector<Node> kept;
    for (std::size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dead_[i]) kept.push_back(std::move(g_.nodes[i]));
    g_.nodes = std::move(kept);
    return fused;
  }

 private:
  // The one node reading `value`, of type `op`, when nothing else reads it.
  std::optional<std::size_t> sole_reader(const std::string& value, const char* op) const {
    if (shared_.count(value)) return std::nullopt;
    auto it = readers_.find(value);
    if (it == readers_.end() || it->second.size() != 1) return std::nullopt;
    const std::size_t r = it->second[0];
    const Node& n = g_.nodes[r];
    if (dead_[r] || n.op_type != op || !n.domain.empty()) return std::nullopt;
    return r;
  }
  const DynTensor* constant(const std::string& name) const {
    auto it = g_.constants.find(name);
    if (it == g_.constants.end()) return nullptr;
    for (const auto& t : g_.trainable)
      if (t == name) return nullptr;
    return &it->second;
  }
  std::optional<double> scalar(const std::string& name) const {
    const DynTensor* c = constant(name);
    if (!c || c->num_elements() != 1 || !is_float(c->dtype())) return std::nullopt;
    return host_scalar(*c);
  }
  // The operand of binary node n other than `value` (Add and Mul commute), or nullopt
  // when neither operand is `value`.
  static std::optional<std::string> other(const Node& n, const std::string& value) {
    if (n.inputs.size() != 2) return std::nullopt;
    if (n.inputs[0] == value) return n.inputs[1];
    if (n.inputs[1] == value) return n.inputs[0];
    return std::nullopt;
  }
  static bool near(std::optional<double> v, double want) {
    return v && std::abs(*v - want) <= 1e-6 * std::abs(want);
  }
  // ReduceMean over the last axis, keeping it, with the axes as an attribute.
  static bool mean_of_last(const Node& n) {
    return n.inputs.size() == 1 && n.outputs.size() == 1 && n.i("keepdims", 1) == 1 &&
           n.ints("axes") == std::vector<std::int64_t>{-1};
  }
  bool rank1(const std::string& name) const {
    const DynTensor* c = constant(name);
    // gamma and beta may be trainable (they stay inputs of the fused node).
    if (!c) {
      auto it = g_.constants.find(name);
      if (it == g_.constants.end()) return false;
      c = &it->second;
    }
    return c->rank() == 1 && c->num_elements() > 1;
  }
  void replace(const std::vector<std::size_t>& nodes, Node fused) {
    for (std::size_t k = 0; k + 1 < nodes.size(); ++k) dead_[nodes[k]] = true;
    g_.nodes[nodes.back()] = std::move(fused);
  }

  std::size_t layer_norm(std::size_t i) {
    const Node& m = g_.nodes[i];
    if (!mean_of_last(m)) return 0;
    const std::string& x = m.inputs[0];
    auto s = sole_reader(m.outputs[0], "Sub");
    if (!s || g_.nodes[*s].inputs != std::vector<std::string>{x, m.outputs[0]}) return 0;
    const std::string& d = g_.nodes[*s].outputs[0];
    auto rd = readers_.find(d);
    if (shared_.count(d) || rd == readers_.end() || rd->second.size() != 2) return 0;
    std::size_t p = rd->second[0], dv = rd->second[1];
    if (g_.nodes[p].op_type != "Pow") std::swap(p, dv);
    const Node& pow = g_.nodes[p];
    const Node& div = g_.nodes[dv];
    if (pow.op_type != "Pow" || div.op_type != "Div" || pow.inputs.size() != 2 ||
        pow.inputs[0] != d || !near(scalar(pow.inputs[1]), 2.0) || div.inputs.size() != 2 ||
        div.inputs[0] != d)
      return 0;
    auto m2 = sole_reader(pow.outputs[0], "ReduceMean");
    if (!m2 || !mean_of_last(g_.nodes[*m2])) return 0;
    auto a = sole_reader(g_.nodes[*m2].outputs[0], "Add");
    if (!a) return 0;
    auto eps_name = other(g_.nodes[*a], g_.nodes[*m2].outputs[0]);
    const auto eps = eps_name ? scalar(*eps_name) : std::nullopt;
    if (!eps || *eps < 0) return 0;
    auto q = sole_reader(g_.nodes[*a].outputs[0], "Sqrt");
    if (!q || div.inputs[1] != g_.nodes[*q].outputs[0] ||
        sole_reader(g_.nodes[*q].outputs[0], "Div") != dv)
      return 0;
    auto mu = sole_reader(div.outputs[0], "Mul");
    if (!mu) return 0;
    auto gamma = other(g_.nodes[*mu], div.outputs[0]);
    auto b = sole_reader(g_.nodes[*mu].outputs[0], "Add");
    if (!gamma || !b || !rank1(*gamma)) return 0;
    auto beta = other(g_.nodes[*b], g_.nodes[*mu].outputs[0]);
    if (!beta || !rank1(*beta)) return 0;
    Node ln;
    ln.name = m.name;
    ln.op_type = "LayerNormalization";
    ln.inputs = {x, *gamma, *beta};
    ln.outputs = {g_.nodes[*b].outputs[0]};
    ln.attrs["axis"].type = Attr::Type::Int;
    ln.attrs["axis"].i = -1;
    ln.attrs["epsilon"].type = Attr::Type::Float;
    ln.attrs["epsilon"].f = *eps;
    replace({i, *s, p, *m2, *a, *q, dv, *mu, *b}, std::move(ln));
    return 1;
  }

  std::size_t gelu(std::size_t i) {
    const Node& erf = g_.nodes[i];
    if (erf.inputs.size() != 1 || erf.outputs.size() != 1) return 0;
    auto pd = producer_.find(erf.inputs[0]);
    if (pd == producer_.end() || dead_[pd->second]) return 0;
    const std::size_t dv = pd->second;
    const Node& div = g_.nodes[dv];
    if (!div.domain.empty() || div.inputs.size() != 2 || sole_reader(div.outputs[0], "Erf") != i)
      return 0;
    const std::string x = div.inputs[0];
    if (!(div.op_type == "Div" && near(scalar(div.inputs[1]), std::sqrt(2.0))) &&
        !(div.op_type == "Mul" && near(scalar(div.inputs[1]), std::sqrt(0.5))))
      return 0;
    auto a = sole_reader(erf.outputs[0], "Add");
    if (!a || !near(scalar(other(g_.nodes[*a], erf.outputs[0]).value_or("")), 1.0)) return 0;
    auto m1 = sole_reader(g_.nodes[*a].outputs[0], "Mul");
    if (!m1 || other(g_.nodes[*m1], g_.nodes[*a].outputs[0]) != x) return 0;
    auto m2 = sole_reader(g_.nodes[*m1].outputs[0], "Mul");
    if (!m2 || !near(scalar(other(g_.nodes[*m2], g_.nodes[*m1].outputs[0]).value_or("")), 0.5))
      return 0;
    Node gl;
    gl.name = erf.name;
    gl.op_type = "Gelu";
    gl.inputs = {x};
    gl.outputs = {g_.nodes[*m2].outputs[0]};
    replace({dv, i, *a, *m1, *m2}, std::move(gl));
    return 1;
  }

  Graph& g_;
  std::vector<bool> dead_;
  std::map<std::string, std::size_t> producer_;
  std::map<std::string, std::vector<std::size_t>> readers_;
  std::set<std::string> shared_;
  bool has_subgraphs_ = false;
};

}  // namespace

std::size_t fuse_decomposed(Graph& g) { return Fuser(g).run(); }

}  // namespace ember::onnx
