// Control flow: If and Loop run their subgraphs over the enclosing scope's values.
#include "ops.hpp"

namespace ember::onnx {

namespace {

using V = std::vector<DynTensor>;

const Graph& subgraph(const OpCall& c, const char* attr) {
  auto it = c.node.attrs.find(attr);
  if (it == c.node.attrs.end() || !it->second.g)
    c.error(std::string("has no graph attribute '") + attr + "'");
  return *it->second.g;
}

// A subgraph's outputs after running it over the outer scope plus `bound` inputs.
V run_subgraph(const OpCall& c, const Graph& g, const std::vector<DynTensor>& bound) {
  Env env = *c.env;
  for (const auto& [k, v] : g.constants) env.insert_or_assign(k, v);
  c.check(bound.size() <= g.inputs.size(), "binds " + std::to_string(bound.size()) +
                                               " values to a subgraph of " +
                                               std::to_string(g.inputs.size()) + " inputs");
  for (std::size_t i = 0; i < bound.size(); ++i) env.insert_or_assign(g.inputs[i].name, bound[i]);
  run_nodes(g, env);
  V out;
  for (const auto& o : g.outputs) {
    auto it = env.find(o.name);
    c.check(it != env.end(), "subgraph output '" + o.name + "' was not computed");
    out.push_back(it->second);
  }
  return out;
}

V if_(OpCall& c) {
  const bool cond = host_scalar(c.at(0)) != 0;
  return run_subgraph(c, subgraph(c, cond ? "then_branch" : "else_branch"), {});
}

V loop(OpCall& c) {
  const Graph& body = subgraph(c, "body");
  std::optional<std::int64_t> trips;
  if (c.has(0)) trips = static_cast<std::int64_t>(host_scalar(c.at(0)));
  bool cond = c.has(1) ? host_scalar(c.at(1)) != 0 : true;
  V carried;
  for (std::size_t i = 2; i < c.size(); ++i) carried.push_back(c.at(i));
  const std::size_t nc = carried.size();
  c.check(body.outputs.size() >= 1 + nc, "the body has " + std::to_string(body.outputs.size()) +
                                             " outputs for " + std::to_string(nc) +
                                             " carried values");
  const std::size_t ns = body.outputs.size() - 1 - nc;
  std::vector<V> scans(ns);
  constexpr std::int64_t kMaxTrips = std::int64_t{1} << 31;
  for (std::int64_t i = 0; cond && (!trips || i < *trips); ++i) {
    c.check(i < kMaxTrips, "ran 2^31 iterations without stopping");
    V bound{ops::from_data(TensorData::from<std::int64_t>({i}, Shape{}), c.device),
            ops::cast(ops::full(Shape{}, cond ? 1.0 : 0.0, DType::I64, c.device), DType::Bool)};
    bound.insert(bound.end(), carried.begin(), carried.end());
    V out = run_subgraph(c, body, bound);
    cond = host_scalar(out[0]) != 0;
    for (std::size_t k = 0; k < nc; ++k) carried[k] = out[1 + k];
    for (std::size_t k = 0; k < ns; ++k) scans[k].push_back(out[1 + nc + k]);
  }
  V result = carried;
  for (std::size_t k = 0; k < ns; ++k) {
    c.check(!scans[k].empty(), "a scan output of a loop that ran no iteration has no shape");
    result.push_back(ops::stack(std::move(scans[k]), 0));
  }
  return result;
}

}  // namespace

void register_control(OpMap& m) {
  m["If"] = {if_, true};
  m["Loop"] = {loop, true};
}

}  // namespace ember::onnx
