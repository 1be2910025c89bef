// onnx::load and Model::run: the parsed graph (proto.cpp) is finished here — constant
// folding, dead-node elimination, the declared shapes kept for checking inputs — and run
// node by node over an environment of named DynTensors.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include "ember/base/checked.hpp"
#include "ember/onnx/codegen.hpp"
#include "ops.hpp"

namespace ember::onnx {

const DynTensor& OpCall::at(std::size_t i) const {
  if (!has(i))
    error("input " + std::to_string(i) + " is required but " +
          (i < in.size() ? std::string("omitted")
                         : "the node has only " + std::to_string(in.size())));
  return *in[i];
}

void OpCall::error(const std::string& what) const {
  fail(node.describe() + " (opset " + std::to_string(opset) + "): " + what);
}

std::vector<std::int64_t> host_ints(const DynTensor& t) {
  return t.to_data().to_vector<std::int64_t>();
}
std::vector<double> host_f64(const DynTensor& t) { return t.to_data().to_vector<double>(); }
double host_scalar(const DynTensor& t) {
  EMBER_CHECK(t.num_elements() == 1,
              "expected a one-element tensor, got shape " + t.shape().to_string());
  return t.to_data().get_f64(0);
}

const std::map<std::string, OpInfo>& op_table() {
  static const OpMap table = [] {
    OpMap m;
    register_elementwise(m);
    register_shape(m);
    register_reduce(m);
    register_nn(m);
    register_control(m);
    register_rnn(m);
    register_extra(m);
    return m;
  }();
  return table;
}

// The entries of Note [Shape-keyed memo], one per step of the run plan.
struct RunMemo {
  struct Entry {
    std::uint64_t version = 0;          // 0: empty
    Shape shape;                        // Memo::Shape: the input's shape
    std::vector<std::uint64_t> inputs;  // Memo::Values: the inputs' versions (1: a constant)
    std::vector<DynTensor> out;
  };
  explicit RunMemo(std::size_t steps) : entries(steps) {}
  std::mutex mu;
  std::vector<Entry> entries;
  std::uint64_t next = 2;
};

namespace {

// Names a graph reads from outside itself (its subgraphs included).
void free_names(const Graph& g, std::set<std::string>& out) {
  std::set<std::string> defined;
  for (const auto& v : g.inputs) defined.insert(v.name);
  for (const auto& [k, v] : g.constants) defined.insert(k);
  for (const auto& n : g.nodes) {
    for (const auto& i : n.inputs)
      if (!i.empty() && !defined.count(i)) out.insert(i);
    for (const auto& [k, a] : n.attrs)
      if (a.g) {
        std::set<std::string> inner;
        free_names(*a.g, inner);
        for (const auto& x : inner)
          if (!defined.count(x)) out.insert(x);
      }
    for (const auto& o : n.outputs) defined.insert(o);
  }
}

// Every value a node reads: its inputs and what its subgraphs read from outside.
std::vector<std::string> reads_of(const Node& n) {
  std::vector<std::string> r;
  for (const auto& i : n.inputs)
    if (!i.empty()) r.push_back(i);
  for (const auto& [k, a] : n.attrs)
    if (a.g) {
      std::set<std::string> inner;
      free_names(*a.g, inner);
      r.insert(r.end(), inner.begin(), inner.end());
    }
  return r;
}

const ValueInfo* info_of(const Graph& g, const std::string& name) {
  for (const auto& v : g.inputs)
    if (v.name == name) return &v;
  auto it = g.value_info.find(name);
  return it == g.value_info.end() ? nullptr : &it->second;
}

std::optional<Shape> static_shape(const ValueInfo* v) {
  if (!v || !v->shape) return std::nullopt;
  std::vector<std::size_t> dims;
  for (const auto& d : *v->shape) {
    if (!d.value) return std::nullopt;
    dims.push_back(*d.value);
  }
  return Shape(dims);
}

[[noreturn]] void unsupported(const Graph& g, const Node& n) {
  fail(n.describe() + " (opset " + std::to_string(g.opset) + "): operator " +
       (n.domain.empty() ? "" : "of domain '" + n.domain + "' ") +
       "is not supported; expected an operator of the default domain (ai.onnx) that ember "
       "implements (docs/onnx.md lists them)");
}

// Every node that run() would execute, subgraphs included, has an implementation.
void check_supported(const Graph& g) {
  const auto& table = op_table();
  for (const auto& n : g.nodes) {
    if (!n.domain.empty() || !table.count(n.op_type)) unsupported(g, n);
    for (const auto& [k, a] : n.attrs)
      if (a.g) check_supported(*a.g);
  }
}

// Runs one node's operator on its inputs; an error names the node, its op type and opset.
// `fn` is the node's operator where the caller has it (Graph::plan), else it is looked up.
std::vector<DynTensor> call_op(const Node& n, std::int64_t opset, const Device& device,
                               std::vector<std::optional<DynTensor>> in, const Env& env,
                               OpFn fn = nullptr) {
  OpCall call{n, opset, device, std::move(in), n.outputs.size(), &env};
  if (!fn) {
    const auto& table = op_table();
    auto it = n.domain.empty() ? table.find(n.op_type) : table.end();
    if (it == table.end())
      call.error(std::string("operator ") +
                 (n.domain.empty() ? "" : "of domain '" + n.domain + "' ") +
                 "is not supported; expected an operator of the default domain (ai.onnx) that "
                 "ember implements (docs/onnx.md lists them)");
    fn = it->second.fn;
  }
  std::vector<DynTensor> out;
  try {
    out = fn(call);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.rfind("node '", 0) == 0) throw;  // already names its node
    call.error(msg);
  } catch (const std::bad_alloc&) {
    call.error("out of memory computing its outputs");
  }
  std::size_t named = 0;
  for (std::size_t i = 0; i < n.outputs.size(); ++i)
    if (!n.outputs[i].empty()) named = i + 1;
  if (out.size() < named)
    call.error("produced " + std::to_string(out.size()) + " outputs where the node names " +
               std::to_string(named));
  return out;
}

// The value `name` of the environment, or of the graph's constants.
const DynTensor* lookup(const Graph& g, const Env& env, const std::string& name) {
  auto v = env.find(name);
  if (v != env.end()) return &v->second;
  auto c = g.constants.find(name);
  return c == g.constants.end() ? nullptr : &c->second;
}

[[noreturn]] void undefined_input(const Graph& g, const Node& n, const std::string& name) {
  fail(n.describe() + " (opset " + std::to_string(g.opset) + "): input '" + name +
       "' is not defined");
}

// Runs node n over an environment by name (subgraphs, load-time folding).
std::vector<DynTensor> run_node(const Graph& g, const Node& n, const Env& env) {
  std::vector<std::optional<DynTensor>> in;
  in.reserve(n.inputs.size());
  for (const auto& name : n.inputs) {
    if (name.empty()) {
      in.emplace_back(std::nullopt);
      continue;
    }
    const DynTensor* v = lookup(g, env, name);
    if (!v) undefined_input(g, n, name);
    in.emplace_back(*v);
  }
  return call_op(n, g.opset, g.device, std::move(in), env);
}

// Note [Run plan]
// run() executes the top-level graph as steps over numbered value slots, resolved once at
// load: each node input is a run slot (a graph input or an earlier node's output) or an
// index into the constants it reads, so a run does no name lookups and holds its values in
// one vector. Walking backwards, a value is read for the last time by the first node (from
// the end) that reads it; that step releases its slot before its operator runs, so an
// element-wise operator holding the only reference writes into the buffer it reads (in-place
// reuse) instead of a fresh one. Graph outputs and constants are never released, nor a value
// a node's subgraphs read: a node with subgraphs (If, Loop) reads outer values by name, so
// for it alone the run builds an Env of its live slots and the constants. Subgraphs and
// load-time folding run node by node over an Env (run_nodes).
//
// Note [Shape-keyed memo]
// A graph exported with dynamic dims computes its reshape targets at run time: Shape,
// Gather, Unsqueeze, Concat, Cast, ... on small integer tensors (the Transformer encoder:
// about half of its nodes). Their values depend only on the shapes that reach the Shape and
// Size nodes, so run() memoizes them. A Shape or Size step is keyed by its input's shape;
// a deterministic step whose inputs are all non-trainable constants or memoized values (one
// at least) is keyed by the versions of those values. An entry gets a fresh version from a
// counter whenever it is recomputed, and a run carries the versions of the values it made,
// so a step reuses its entry only when its inputs are exactly those the entry was computed
// from — also when another thread ran the model on other shapes in between (one mutex
// guards the entries). The memo keeps a reference to its values, so an operator reading one
// never writes into it in place.
void plan_run(Graph& g) {
  const auto& table = op_table();
  std::map<std::string, std::int32_t> slot;
  const auto new_slot = [&](const std::string& name) {
    const auto k = static_cast<std::int32_t>(g.slot_names.size());
    g.slot_names.push_back(name);
    slot.insert_or_assign(name, k);
    return k;
  };
  for (const auto& v : g.inputs) g.input_slots.push_back(new_slot(v.name));
  g.plan.assign(g.nodes.size(), {});
  for (std::size_t i = 0; i < g.nodes.size(); ++i)
    for (const auto& o : g.nodes[i].outputs) g.plan[i].out.push_back(o.empty() ? -1 : new_slot(o));
  // An input nobody defines gets a slot that no step fills: run() names it.
  for (const auto& n : g.nodes)
    for (const auto& name : n.inputs)
      if (!name.empty() && !slot.count(name) && !g.constants.count(name)) new_slot(name);
  const auto num_slots = static_cast<std::int32_t>(g.slot_names.size());
  std::map<std::string, std::int32_t> constant;
  const auto value_of = [&](const std::string& name) -> std::int32_t {
    if (auto it = slot.find(name); it != slot.end()) return it->second;
    auto c = g.constants.find(name);
    if (c == g.constants.end()) return -1;
    auto [it, fresh] =
        constant.emplace(name, num_slots + static_cast<std::int32_t>(g.const_values.size()));
    if (fresh) g.const_values.push_back(c->second);
    return it->second;
  };
  for (const auto& o : g.outputs) g.output_values.push_back(value_of(o.name));

  const std::set<std::string> trainable(g.trainable.begin(), g.trainable.end());
  std::vector<bool> memoized(g.slot_names.size(), false);
  for (std::size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    Graph::Step& st = g.plan[i];
    auto it = n.domain.empty() ? table.find(n.op_type) : table.end();
    if (it != table.end()) st.fn = it->second.fn;
    for (const auto& [k, a] : n.attrs)
      if (a.g) st.has_subgraphs = true;
    bool keyed = it != table.end() && it->second.foldable && !st.has_subgraphs, any = false;
    for (const auto& name : n.inputs) {
      st.in.push_back(name.empty() ? -1 : value_of(name));
      if (name.empty()) continue;
      const std::int32_t v = st.in.back();
      if (v < num_slots)
        any = any || memoized[static_cast<std::size_t>(v)],
        keyed = keyed && memoized[static_cast<std::size_t>(v)];
      else
        keyed = keyed && !trainable.count(name);
    }
    if (it != table.end() && (n.op_type == "Shape" || n.op_type == "Size") &&
        n.inputs.size() == 1 && !n.inputs[0].empty())
      st.memo = Graph::Step::Memo::Shape;
    else if (keyed && any)
      st.memo = Graph::Step::Memo::Values;
    if (st.memo != Graph::Step::Memo::None)
      for (const auto o : st.out)
        if (o >= 0) memoized[static_cast<std::size_t>(o)] = true;
  }

  // Releases (Note [Run plan]).
  std::set<std::string> later;
  for (const auto& o : g.outputs) later.insert(o.name);
  for (std::size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    const auto reads = reads_of(n);
    const std::set<std::string> direct(n.inputs.begin(), n.inputs.end());
    for (const auto& r : reads) {
      if (later.count(r)) continue;
      later.insert(r);
      const bool by_subgraph = std::count(reads.begin(), reads.end(), r) >
                               std::count(n.inputs.begin(), n.inputs.end(), r);
      auto s = slot.find(r);
      if (direct.count(r) && !by_subgraph && s != slot.end())
        g.plan[i].release.push_back(s->second);
    }
  }
  g.memo = std::make_shared<RunMemo>(g.plan.size());
}

void fold_and_prune(Graph& g, const LoadOptions& options) {
  std::set<std::string> trainable(g.trainable.begin(), g.trainable.end());
  const auto& table = op_table();
  std::vector<Node> kept;
  if (options.fold_constants) {
    Env env(g.constants.begin(), g.constants.end());
    for (auto& n : g.nodes) {
      bool known = n.domain.empty() && table.count(n.op_type) && table.at(n.op_type).foldable;
      for (const auto& r : reads_of(n))
        if (!g.constants.count(r) || trainable.count(r)) known = false;
      // Shape and Size of a value whose shape is static are known without the value.
      std::optional<Shape> st;
      if (!known && n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size") &&
          n.inputs.size() == 1) {
        st = static_shape(info_of(g, n.inputs[0]));
        if (!st) {
          auto c = g.constants.find(n.inputs[0]);
          if (c != g.constants.end()) st = c->second.shape();
        }
      }
      if (st) {
        std::vector<std::int64_t> dims(st->dims().begin(), st->dims().end());
        if (n.op_type == "Size") {
          std::int64_t p = 1;
          for (auto d : dims) p *= d;
          g.constants.insert_or_assign(
              n.outputs[0], ops::from_data(TensorData::from<std::int64_t>({p}, Shape{}), g.device));
        } else {
          const auto r = static_cast<std::int64_t>(dims.size());
          auto clampi = [&](std::int64_t v) {
            if (v < 0) v += r;
            return std::min(std::max<std::int64_t>(v, 0), r);
          };
          const std::int64_t s = clampi(n.i("start", 0)), e = clampi(n.i("end", r));
          std::vector<std::int64_t> part;
          for (auto k = s; k < e; ++k) part.push_back(dims[static_cast<std::size_t>(k)]);
          g.constants.insert_or_assign(
              n.outputs[0], ops::from_data(TensorData::from<std::int64_t>(part), g.device));
        }
        ++g.stats.folded;
        continue;
      }
      if (!known) {
        kept.push_back(std::move(n));
        continue;
      }
      for (const auto& [k, v] : g.constants) env.insert_or_assign(k, v);
      auto out = run_node(g, n, env);
      for (std::size_t i = 0; i < n.outputs.size() && i < out.size(); ++i)
        if (!n.outputs[i].empty()) g.constants.insert_or_assign(n.outputs[i], out[i]);
      ++g.stats.folded;
    }
  } else {
    kept = std::move(g.nodes);
  }
  // Dead-node elimination: keep what the outputs need, walking backwards.
  std::set<std::string> needed;
  for (const auto& o : g.outputs) needed.insert(o.name);
  std::vector<Node> live;
  for (auto it = kept.rbegin(); it != kept.rend(); ++it) {
    bool used = false;
    for (const auto& o : it->outputs)
      if (!o.empty() && needed.count(o)) used = true;
    if (!used) {
      ++g.stats.eliminated;
      continue;
    }
    for (const auto& r : reads_of(*it)) needed.insert(r);
    live.push_back(std::move(*it));
  }
  g.nodes.assign(std::make_move_iterator(live.rbegin()), std::make_move_iterator(live.rend()));
  // Constants nobody reads any more are dropped (the trainable ones stay: initializers()).
  for (auto it = g.constants.begin(); it != g.constants.end();) {
    if (!needed.count(it->first) && !trainable.count(it->first))
      it = g.constants.erase(it);
    else
      ++it;
  }
  g.stats.kept = g.nodes.size();
}

void check_inputs(const Graph& g, const std::vector<DynTensor>& inputs) {
  EMBER_CHECK(inputs.size() == g.inputs.size(),
              "onnx::Model::run: got " + std::to_string(inputs.size()) + " inputs; the graph has " +
                  std::to_string(g.inputs.size()) + " (initializers excluded)");
  std::map<std::string, std::size_t> symbols;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto& v = g.inputs[i];
    const auto& x = inputs[i];
    const std::string what = "onnx::Model::run: input " + std::to_string(i) + " '" + v.name + "'";
    EMBER_CHECK(x.device() == g.device,
                what + " is on " + x.device().name() + "; the model is on " + g.device.name());
    EMBER_CHECK(x.dtype() == v.dtype,
                what + " has dtype " + name(x.dtype()) + "; expected " + name(v.dtype));
    if (!v.shape) continue;
    const auto& dims = *v.shape;
    std::string expected = "[";
    for (std::size_t k = 0; k < dims.size(); ++k)
      expected += (k ? ", " : "") + (dims[k].value            ? std::to_string(*dims[k].value)
                                     : dims[k].symbol.empty() ? "?"
                                                              : dims[k].symbol);
    expected += "]";
    EMBER_CHECK(x.rank() == dims.size(), what + " has shape " + x.shape().to_string() +
                                             "; expected rank " + std::to_string(dims.size()) +
                                             ", " + expected);
    for (std::size_t k = 0; k < dims.size(); ++k) {
      if (dims[k].value) {
        EMBER_CHECK(x.shape()[k] == *dims[k].value,
                    what + " has shape " + x.shape().to_string() + "; expected " + expected);
      } else if (!dims[k].symbol.empty()) {
        auto [it, fresh] = symbols.emplace(dims[k].symbol, x.shape()[k]);
        EMBER_CHECK(fresh || it->second == x.shape()[k],
                    what + " has shape " + x.shape().to_string() + "; expected " + expected +
                        " with " + dims[k].symbol + " = " + std::to_string(it->second) +
                        " as an earlier input binds it");
      }
    }
  }
}

// EMBER_ONNX_PROFILE=1: every node's wall time and the process's CPU time over it (the
// device synchronized before and after it), summed per operator (convolutions per kernel,
// stride and kind), written to stderr as a table when the program exits. For finding
// where a model's time goes; on a loaded machine the CPU time is the steadier measure. The
// syncs make an asynchronous device slower than it runs otherwise.
class NodeProfile {
 public:
  struct Clock {
    std::chrono::steady_clock::time_point wall;
    double cpu_ms;
    static Clock now() {
      timespec t{};
      clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
      return {std::chrono::steady_clock::now(), double(t.tv_sec) * 1e3 + double(t.tv_nsec) / 1e6};
    }
  };
  static NodeProfile* active() {
    static NodeProfile* p = std::getenv("EMBER_ONNX_PROFILE") ? new NodeProfile : nullptr;
    return p;
  }
  // Node n ran from t0 (memoized: its memo entry served it); w is its input 1, if any.
  void add(const Node& n, const DynTensor* w, bool memoized, const Clock& t0) {
    const Clock t1 = Clock::now();
    const std::lock_guard<std::mutex> lock(mu_);
    Row& r = rows_[memoized ? n.op_type + " (memoized)" : key(n, w)];
    r.nodes += 1;
    r.wall_ms += std::chrono::duration<double, std::milli>(t1.wall - t0.wall).count();
    r.cpu_ms += t1.cpu_ms - t0.cpu_ms;
  }

 private:
  NodeProfile() {
    std::atexit([] { active()->print(); });
  }
  // "Conv 3x3/s2 depthwise": the convolutions apart by their geometry.
  static std::string key(const Node& n, const DynTensor* w) {
    if (n.op_type != "Conv" || !w || w->rank() < 3) return n.op_type;
    std::string k = n.op_type + " ";
    for (std::size_t d = 2; d < w->rank(); ++d)
      k += (d > 2 ? "x" : "") + std::to_string(w->shape()[d]);
    const auto strides = n.ints("strides");
    if (!strides.empty() && strides[0] > 1) k += "/s" + std::to_string(strides[0]);
    const auto groups = static_cast<std::size_t>(n.i("group", 1));
    if (groups > 1) k += w->shape()[1] == 1 ? " depthwise" : " grouped";
    return k;
  }
  struct Row {
    std::size_t nodes = 0;
    double wall_ms = 0, cpu_ms = 0;
  };
  void print() {
    std::vector<std::pair<std::string, Row>> rows(rows_.begin(), rows_.end());
    std::sort(rows.begin(), rows.end(),
              [](const auto& a, const auto& b) { return a.second.cpu_ms > b.second.cpu_ms; });
    Row all;
    for (const auto& [k, r] : rows) {
      all.wall_ms += r.wall_ms;
      all.cpu_ms += r.cpu_ms;
    }
    std::fprintf(stderr, "EMBER_ONNX_PROFILE: %.2f ms wall, %.2f ms CPU over all runs\n",
                 all.wall_ms, all.cpu_ms);
    std::fprintf(
        stderr, "| operator | nodes run | wall ms | CPU ms | CPU share |\n|---|---|---|---|---|\n");
    for (const auto& [k, r] : rows)
      std::fprintf(stderr, "| %s | %zu | %.2f | %.2f | %.1f%% |\n", k.c_str(), r.nodes, r.wall_ms,
                   r.cpu_ms, all.cpu_ms > 0 ? 100 * r.cpu_ms / all.cpu_ms : 0.0);
  }
  std::mutex mu_;
  std::map<std::string, Row> rows_;
};

}  // namespace

void run_nodes(const Graph& g, Env& env) {
  NodeProfile* profile = NodeProfile::active();
  for (const Node& n : g.nodes) {
    NodeProfile::Clock t0{};
    if (profile) {
      g.device.sync();
      t0 = NodeProfile::Clock::now();
    }
    auto out = run_node(g, n, env);
    if (profile) {
      g.device.sync();
      profile->add(n, n.inputs.size() > 1 ? lookup(g, env, n.inputs[1]) : nullptr, false, t0);
    }
    for (std::size_t i = 0; i < n.outputs.size() && i < out.size(); ++i)
      if (!n.outputs[i].empty()) env.insert_or_assign(n.outputs[i], std::move(out[i]));
  }
}

namespace {

// One run of the plan (Note [Run plan]) on checked inputs.
std::vector<DynTensor> run_plan(const Graph& g, const std::vector<DynTensor>& inputs) {
  using Memo = Graph::Step::Memo;
  const std::size_t num_slots = g.slot_names.size();
  std::vector<std::optional<DynTensor>> slots(num_slots);
  std::vector<std::uint64_t> versions(num_slots, 0);  // Note [Shape-keyed memo]
  for (std::size_t i = 0; i < inputs.size(); ++i)
    slots[static_cast<std::size_t>(g.input_slots[i])] = inputs[i];
  const auto value = [&](std::int32_t v) -> const DynTensor* {
    const auto k = static_cast<std::size_t>(v);
    if (k < num_slots) return slots[k] ? &*slots[k] : nullptr;
    return &g.const_values[k - num_slots];
  };
  NodeProfile* profile = NodeProfile::active();
  RunMemo& memo = *g.memo;
  const Env no_env;
  std::vector<std::uint64_t> key;  // a Values step's: its inputs' versions
  // Serves step i from its memo entry when the entry's key matches, its outputs straight
  // into their slots (no input list is built); fills `key` for a Values step.
  const auto from_memo = [&](std::size_t i, const Graph::Step& st) {
    const DynTensor* x = nullptr;
    if (st.memo == Memo::Shape) {
      x = value(st.in[0]);
      if (!x) return false;  // the step's run names the undefined input
    } else {
      key.clear();
      for (const auto v : st.in)
        key.push_back(v < 0 ? 0
                      : static_cast<std::size_t>(v) < num_slots
                          ? versions[static_cast<std::size_t>(v)]
                          : 1);
    }
    const std::lock_guard<std::mutex> lock(memo.mu);
    const RunMemo::Entry& e = memo.entries[i];
    if (e.version == 0 || !(x ? e.shape == x->shape() : e.inputs == key)) return false;
    for (std::size_t k = 0; k < st.out.size() && k < e.out.size(); ++k)
      if (st.out[k] >= 0) {
        slots[static_cast<std::size_t>(st.out[k])] = e.out[k];
        versions[static_cast<std::size_t>(st.out[k])] = e.version;
      }
    return true;
  };
  for (std::size_t i = 0; i < g.plan.size(); ++i) {
    const Graph::Step& st = g.plan[i];
    const Node& n = g.nodes[i];
    NodeProfile::Clock t0{};
    if (profile) {
      g.device.sync();
      t0 = NodeProfile::Clock::now();
    }
    if (st.memo != Memo::None && from_memo(i, st)) {
      for (const auto r : st.release) slots[static_cast<std::size_t>(r)].reset();
      if (profile) profile->add(n, nullptr, true, t0);
      continue;
    }
    std::vector<std::optional<DynTensor>> in(st.in.size());
    for (std::size_t j = 0; j < st.in.size(); ++j) {
      if (st.in[j] < 0) continue;
      const DynTensor* v = value(st.in[j]);
      if (!v) undefined_input(g, n, n.inputs[j]);
      in[j] = *v;
    }
    std::optional<DynTensor> weight;  // for the profile's key
    if (profile && in.size() > 1) weight = in[1];
    for (const auto r : st.release) slots[static_cast<std::size_t>(r)].reset();
    Env env;
    if (st.has_subgraphs) {
      env.insert(g.constants.begin(), g.constants.end());
      for (std::size_t k = 0; k < num_slots; ++k)
        if (slots[k]) env.insert_or_assign(g.slot_names[k], *slots[k]);
    }
    std::optional<Shape> shape;
    if (st.memo == Memo::Shape) shape = in[0]->shape();
    std::vector<DynTensor> out =
        call_op(n, g.opset, g.device, std::move(in), st.has_subgraphs ? env : no_env, st.fn);
    std::uint64_t version = 0;  // the memo entry's, where the step has one
    if (st.memo != Memo::None) {
      const std::lock_guard<std::mutex> lock(memo.mu);
      RunMemo::Entry& e = memo.entries[i];
      e.version = version = memo.next++;
      if (shape) e.shape = *shape;
      e.inputs = key;
      e.out = out;
    }
    if (profile) {
      g.device.sync();
      profile->add(n, weight ? &*weight : nullptr, false, t0);
    }
    for (std::size_t k = 0; k < st.out.size() && k < out.size(); ++k)
      if (st.out[k] >= 0) {
        slots[static_cast<std::size_t>(st.out[k])] = std::move(out[k]);
        versions[static_cast<std::size_t>(st.out[k])] = version;
      }
  }
  std::vector<DynTensor> result;
  for (std::size_t i = 0; i < g.outputs.size(); ++i) {
    const DynTensor* v = g.output_values[i] < 0 ? nullptr : value(g.output_values[i]);
    EMBER_CHECK(v != nullptr,
                "onnx::Model::run: graph output '" + g.outputs[i].name + "' was not computed");
    result.push_back(*v);
  }
  return result;
}

}  // namespace

Model::Model(std::shared_ptr<const Graph> graph) : graph_(std::move(graph)) {
  EMBER_CHECK(graph_ && graph_->memo,
              "onnx::Model: the graph has no run plan (onnx::load makes it)");
}

std::vector<DynTensor> Model::run(const std::vector<DynTensor>& inputs) const {
  check_inputs(*graph_, inputs);
  return run_plan(*graph_, inputs);
}

const std::vector<ValueInfo>& Model::inputs() const { return graph_->inputs; }
const std::vector<ValueInfo>& Model::outputs() const { return graph_->outputs; }
const Device& Model::device() const { return graph_->device; }
std::int64_t Model::opset() const { return graph_->opset; }
const LoadStats& Model::stats() const { return graph_->stats; }
std::vector<std::pair<std::string, DynTensor>> Model::initializers() const {
  std::vector<std::pair<std::string, DynTensor>> out;
  for (const auto& k : graph_->initializer_names) {
    auto it = graph_->constants.find(k);
    if (it != graph_->constants.end()) out.emplace_back(k, it->second);
  }
  return out;
}

std::shared_ptr<Graph> load_graph_bytes(const void* data, std::size_t size, const Device& device,
                                        const LoadOptions& options, const std::string& base_dir) {
  auto g = parse_model(data, size, device, base_dir, options.trainable);
  check_supported(*g);
  fold_and_prune(*g, options);
  return g;
}

std::shared_ptr<Graph> load_graph(const std::string& path, const Device& device,
                                  const LoadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "onnx::load: cannot open '" + path + "'");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string bytes = ss.str();
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  return load_graph_bytes(bytes.data(), bytes.size(), device, options, dir);
}

namespace {

// What run() needs beyond the loaded graph (which the code generator reads as it is).
std::shared_ptr<const Graph> for_run(std::shared_ptr<Graph> g, const LoadOptions& options) {
  if (options.fuse_decomposed) {
    g->stats.fused = fuse_decomposed(*g);
    g->stats.kept = g->nodes.size();
  }
  plan_run(*g);
  return g;
}

}  // namespace

Model load_bytes(const void* data, std::size_t size, const Device& device,
                 const LoadOptions& options, const std::string& base_dir) {
  return Model(for_run(load_graph_bytes(data, size, device, options, base_dir), options));
}

Model load(const std::string& path, const Device& device, const LoadOptions& options) {
  return Model(for_run(load_graph(path, device, options), options));
}

std::vector<DynTensor> apply(const std::string& op_type, std::int64_t opset, const Device& device,
                             const std::vector<std::optional<DynTensor>>& inputs,
                             const Attrs& attrs, std::size_t num_outputs) {
  Node n;
  n.name = op_type;
  n.op_type = op_type;
  for (std::size_t i = 0; i < inputs.size(); ++i)
    n.inputs.push_back(inputs[i] ? "input" + std::to_string(i) : "");
  for (std::size_t i = 0; i < num_outputs; ++i) n.outputs.push_back("output" + std::to_string(i));
  for (const auto& [key, v] : attrs) {
    Attr a;
    using T = AttrValue::Type;
    switch (v.type) {
      case T::Int:
        a.type = Attr::Type::Int;
        a.i = v.i;
        break;
      case T::Float:
        a.type = Attr::Type::Float;
        a.f = v.f;
        break;
      case T::String:
        a.type = Attr::Type::String;
        a.s = v.s;
        break;
      case T::Ints:
        a.type = Attr::Type::Ints;
        a.ints = v.ints;
        break;
      case T::Floats:
        a.type = Attr::Type::Floats;
        a.floats = v.floats;
        break;
      case T::Strings:
        a.type = Attr::Type::Strings;
        a.strings = v.strings;
        break;
      case T::Tensor:
        a.type = Attr::Type::Tensor;
        a.t = v.t;
        break;
    }
    n.attrs.insert_or_assign(key, std::move(a));
  }
  const Env env;
  auto out = call_op(n, opset, device, inputs, env);
  EMBER_CHECK(out.size() >= num_outputs, "onnx::apply: " + op_type + " produced " +
                                             std::to_string(out.size()) + " outputs; " +
                                             std::to_string(num_outputs) + " were asked for");
  out.erase(out.begin() + static_cast<std::ptrdiff_t>(num_outputs), out.end());
  return out;
}

}  // namespace ember::onnx
