// The Autodiff decorator (include/ember/autodiff/autodiff.hpp): forward execution with
// graph recording, and the reverse-mode walk.
//
// Forward: execute() unwraps operands to inner handles, runs the op on the inner backend
// and wraps the outputs. Only when some float operand is tracked and the op has a rule is
// a Node recorded, saving what the rule reads (Note [Saved tensors] in graph.hpp). An
// operand handle the op owns alone is moved to the inner backend, so in-place reuse works
// through the decorator for tensors no graph needs.
//
// Backward: collect the nodes reachable from the root, visit them by decreasing id (a
// reverse topological order), call each rule with the accumulated output gradient, keep
// the gradients of require_grad leaves, and free every visited non-leaf node's saved
// tensors as soon as it is done. The backend object holds no mutable state except the
// atomic id counter, so independent graphs run on different threads; passes over graphs
// that share nodes are kept apart by claiming them (Note [Concurrent backward]).
#include "ember/autodiff/autodiff.hpp"

#include <algorithm>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "autodiff/graph.hpp"
#include "autodiff/ir_helpers.hpp"
#include "autodiff/nan_check.hpp"
#include "ember/base/error.hpp"

namespace ember::autodiff {

using backend::Checkpointing;

std::uint64_t next_node_id() {
  static Atomic<std::uint64_t> counter{1};
  return counter.fetch_add(1, std::memory_order_relaxed);
}

namespace {

// The matrix of a product's factor f (Note [Products that stack]).
ir::Handle matrix_of(backend::Backend& b, Factor f) {
  return f.transposed ? h::transpose_last(b, std::move(f.x)) : std::move(f.x);
}

class BackwardPass final : public Engine {
 public:
  // With `nan_check`, inner is that decorator; each rule runs under its node's name.
  explicit BackwardPass(backend::Backend& inner, NanCheckingBackend* nan_check = nullptr)
      : inner_(inner), nan_check_(nan_check) {}

  ir::Handle value(Node& node) override {
    if (!node.outputs.empty()) return node.outputs[node.out_index];
    return outputs(node)[node.out_index];
  }

  const std::vector<ir::Handle>& outputs(Node& node) override {
    if (!node.outputs.empty()) return node.outputs;
    auto it = recomputed_.find(node.id);
    if (it != recomputed_.end()) return it->second;
    EMBER_ASSERT(node.recomputable);
    ir::Op op = node.op;
    for (std::size_t i = 0; i < node.parents.size(); ++i) {
      ir::Handle& h = ir::operand(op, i);
      // An absent optional operand has neither a handle nor a parent.
      if (!h && node.parents[i]) h = value(*node.parents[i]);
    }
    return recomputed_[node.id] = inner_.execute(std::move(op));
  }

  void accumulate(Node& node, ir::Handle grad) override {
    settle_slices(node.id);
    auto& slot = grads_[node.id];
    slot = slot ? h::add(inner_, std::move(slot), std::move(grad)) : std::move(grad);
  }

  // Note [Slice gradients]: the gradient of a slice is zeros with g in the slice. Built in
  // full and added to the operand's gradient, a slice of each of T steps of a sequence
  // (nn::Lstm's per-step view of the input projection) costs T full-size fills and adds:
  // quadratic in T, and most of an LSTM step's backward. So a slice's gradient is added
  // where it lands: the slot's part is read, g added to it (the same operands in the same
  // order as the full add, so the same sums) and written back, in place where the slot is
  // the pass's alone. The first gradient of an operand is the zeros with g written in, as
  // before. Only elements outside every slice differ from the full add: they keep the
  // slot's value instead of becoming value + 0, which is the same number except that a
  // -0 stays -0.
  //
  // Note [Slices that tile]: the slices of a chunk (nn::Lstm's four gates of each step) give
  // their operand one gradient each, and together they cover it: written one by one that
  // was a fill of zeros, four slice writes and three reads and adds a step, and on Fusion
  // four flushes (a slice write is no element-wise op). So an operand's first slice
  // gradients wait, in order, until something else reads or adds to its gradient
  // (settle_slices); then, where they are the pieces of the operand along one dim, in
  // order or not, with no gap or overlap and full ranges elsewhere, the gradient is their
  // concatenation — the same values, each element one slice's g (a -0 stays -0) — and
  // otherwise they are written as above, in the order they came.
  void accumulate_slice(Node& node, const Shape& shape, DType dtype,
                        const std::vector<ir::SliceRange>& ranges, ir::Handle g) override {
    auto found = grads_.find(node.id);
    if (found == grads_.end()) {
      auto& pending = slices_[node.id];
      pending.shape = shape;
      pending.dtype = dtype;
      pending.parts.emplace_back(ranges, std::move(g));
      return;
    }
    add_slice(found->second, ranges, std::move(g));
  }

  // g added to the part of slot (an operand's gradient so far) that `ranges` select.
  void add_slice(ir::Handle& slot, const std::vector<ir::SliceRange>& ranges, ir::Handle g) {
    ir::Handle sum = h::add(inner_, h::slice(inner_, slot, ranges), std::move(g));
    slot = h::slice_assign(inner_, std::move(slot), ranges, std::move(sum));
  }

  // Note [Products that stack]: an operand read by many matrix products — a recurrent
  // weight, multiplied by each of an LSTM's 64 steps' states — gets a gradient term
  // lhs_t · rhs_t from each (W_hh^T: h_t^T · dgates_t, [256, 32] · [32, 1024]): 64 products
  // 32 deep and 64 adds of the whole gradient, where one product over the stacked terms,
  // [lhs_1 … lhs_T] · [rhs_1; …; rhs_T], is the same sum as a GEMM 2,048 deep, at the
  // GEMM's full rate and with no adds. So the product terms of an operand that more than
  // one recorded op reads wait, beside its other gradient terms, until its gradient is
  // complete (its node is visited) and run as one product of their concatenations, added
  // to the rest once. A single waiting term is the plain product (an operand read once
  // gives its one term as before). The terms hold their factors meanwhile (a step's
  // dgates, 128 KiB): past four times the gradient's size in waiting factors, those
  // waiting are run as one product and added, and the next ones wait afresh. The sum is
  // the same terms in another order: equal up to rounding, not bit for bit. Only shallow
  // terms wait (an inner dim below kShallowProduct, 128): a deeper product runs near the
  // GEMM's rate alone, and stacking it saves only the adds for the copies it costs — the
  // encoder step's Q, K and V projections of one input, stacked, ran 2.5% slower.
  void accumulate_product(Node& node, Factor lhs, Factor rhs) override {
    settle_slices(node.id);
    PendingProducts& p = products_[node.id];
    p.factor_elements += lhs.x->shape().num_elements() + rhs.x->shape().num_elements();
    p.lhs.push_back(std::move(lhs));
    p.rhs.push_back(std::move(rhs));
    if (p.lhs.size() > 1 && p.factor_elements > 4 * node.shape.num_elements())
      settle_products(node.id);
  }

  // The factors fs side by side along the product's inner dim: `inner` 1 for left factors
  // (their columns), 0 for right ones (their rows). Factors stored transposed are stacked
  // along the other dim of what they store and the result read transposed, so a stack of
  // contiguous matrices (the steps' h_t of h_t^T) is a copy of whole blocks.
  ir::Handle stacked(std::vector<Factor> fs, std::size_t inner) {
    const bool transposed = fs[0].transposed;
    std::vector<ir::Handle> xs;
    for (auto& f : fs) {
      // A factor stored the other way: its transpose is stored as the first one's.
      xs.push_back(f.transposed == transposed ? std::move(f.x)
                                              : h::transpose_last(inner_, std::move(f.x)));
    }
    const std::size_t dim = transposed ? 1 - inner : inner;
    Shape shape = xs[0]->shape();
    shape[dim] = 0;
    for (const auto& x : xs) shape[dim] += x->shape()[dim];
    auto cat = h::run(inner_, ir::Cat{std::move(xs), dim, shape});
    return transposed ? h::transpose_last(inner_, std::move(cat)) : cat;
  }

  // The waiting product terms of node `id` into its gradient (Note [Products that stack]).
  void settle_products(std::uint64_t id) {
    auto it = products_.find(id);
    if (it == products_.end()) return;
    PendingProducts p = std::move(it->second);
    products_.erase(it);
    ir::Handle sum;
    if (p.lhs.size() == 1) {
      sum = h::matmul(inner_, matrix_of(inner_, std::move(p.lhs[0])),
                      matrix_of(inner_, std::move(p.rhs[0])));
    } else {
      sum = h::matmul(inner_, stacked(std::move(p.lhs), 1), stacked(std::move(p.rhs), 0));
    }
    auto& slot = grads_[id];
    slot = slot ? h::add(inner_, std::move(slot), std::move(sum)) : std::move(sum);
  }

  // The waiting slice gradients of node `id` into its gradient (Note [Slices that tile]).
  void settle_slices(std::uint64_t id) {
    auto it = slices_.find(id);
    if (it == slices_.end()) return;
    PendingSlices pending = std::move(it->second);
    slices_.erase(it);
    auto& slot = grads_[id];
    EMBER_ASSERT(!slot);
    if (auto tiled = tiling(pending)) {
      slot = h::run(inner_, ir::Cat{std::move(tiled->second), tiled->first, pending.shape});
      return;
    }
    for (auto& [ranges, g] : pending.parts) {
      if (!slot) {
        slot = h::slice_assign(inner_, h::zeros(inner_, pending.shape, pending.dtype), ranges,
                               std::move(g));
      } else {
        add_slice(slot, ranges, std::move(g));
      }
    }
  }

  struct PendingProducts {
    std::vector<Factor> lhs, rhs;
    std::size_t factor_elements = 0;
  };

  struct PendingSlices {
    Shape shape;
    DType dtype = DType::F32;
    std::vector<std::pair<std::vector<ir::SliceRange>, ir::Handle>> parts;
  };

  // The dim the parts tile and their gradients in order along it, where they tile the
  // operand exactly (Note [Slices that tile]); else nullopt.
  static std::optional<std::pair<std::size_t, std::vector<ir::Handle>>> tiling(
      const PendingSlices& p) {
    if (p.parts.size() < 2) return std::nullopt;
    const std::size_t rank = p.shape.rank();
    std::optional<std::size_t> dim;
    for (const auto& [ranges, g] : p.parts) {
      if (ranges.size() != rank || g->shape().rank() != rank || g->dtype() != p.dtype)
        return std::nullopt;
      for (std::size_t d = 0; d < rank; ++d) {
        const ir::SliceRange& r = ranges[d];
        if (r.step != 1) return std::nullopt;
        if (r.start == 0 && r.end == p.shape[d]) continue;
        if (dim && *dim != d) return std::nullopt;
        dim = d;
      }
    }
    if (!dim) return std::nullopt;  // (every part the whole operand: an overlap)
    std::vector<std::size_t> order(p.parts.size());
    for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
      return p.parts[x].first[*dim].start < p.parts[y].first[*dim].start;
    });
    std::size_t at = 0;
    std::vector<ir::Handle> xs;
    for (std::size_t i : order) {
      const ir::SliceRange& r = p.parts[i].first[*dim];
      if (r.start != at || r.end <= r.start) return std::nullopt;
      at = r.end;
      xs.push_back(p.parts[i].second);
    }
    if (at != p.shape[*dim]) return std::nullopt;
    return std::pair{*dim, std::move(xs)};
  }

  backend::GradientsStore run(const std::shared_ptr<Node>& root) {
    // Every node reachable from root, checked before anything is modified. Owning
    // pointers: clearing a node's parents below may drop the last other reference.
    std::vector<std::shared_ptr<Node>> order;
    std::unordered_map<std::uint64_t, bool> seen;
    std::vector<std::shared_ptr<Node>> stack{root};
    seen[root->id] = true;
    while (!stack.empty()) {
      auto n = std::move(stack.back());
      stack.pop_back();
      if (!n->leaf) claim(*n, order);  // Note [Concurrent backward]
      for (const auto& p : n->parents) {
        if (p && !seen[p->id]) {
          seen[p->id] = true;
          stack.push_back(p);
        }
      }
      order.push_back(std::move(n));
    }
    std::sort(order.begin(), order.end(),
              [](const auto& a, const auto& b) { return a->id > b->id; });

    backend::GradientsStore out;
    const auto run = [&] {
      grads_[root->id] = h::full(inner_, root->shape, 1.0, root->dtype);
      for (const auto& n : order) {
        settle_slices(n->id);
        settle_products(n->id);
        auto g = grads_.extract(n->id);
        if (n->leaf) {
          if (!g.empty()) out.insert(n->id, std::move(g.mapped()));
          continue;
        }
        if (!g.empty()) {
          if (nan_check_) nan_check_->set_context("in the backward of " + op_label(n->op));
          BackwardCtx ctx(inner_, *this, *n, std::move(g.mapped()));
          n->rule->backward(ctx);
        }
        // Free what the graph kept for this node; its children (higher ids) are all done.
        // It stays claimed: a later pass reaching it reports the freed graph.
        n->consumed.store(true, std::memory_order_release);
        n->op = ir::Op{};
        n->outputs.clear();
        recomputed_.erase(n->id);
      }
    };
#if EMBER_HAS_EXCEPTIONS
    try {
      run();
    } catch (...) {
      // A rule failed: the nodes not yet freed are given back as they were.
      for (const auto& n : order) {
        if (!n->leaf && !n->consumed.load(std::memory_order_relaxed)) {
          n->claimed.store(false, std::memory_order_release);
        }
      }
      throw;
    }
#else
    run();  // a failure reaches the fail handler, which does not return
#endif
    // Parents last: dropping them may free long chains of nodes.
    for (const auto& n : order) {
      if (!n->leaf) n->parents.clear();
    }
    return out;
  }

 private:
  // Claims n for this pass, or releases every claim taken so far (the non-leaf nodes of
  // `order`) and throws naming why n is unavailable.
  static void claim(Node& n, const std::vector<std::shared_ptr<Node>>& order) {
    bool expected = false;
    if (n.claimed.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return;
    const bool freed = n.consumed.load(std::memory_order_acquire);
    for (const auto& c : order) {
      if (!c->leaf) c->claimed.store(false, std::memory_order_release);
    }
    fail(freed ? "backward: the graph was already freed by an earlier backward (a tensor of it "
                 "was used again after backward)"
               : "backward: the graph shares nodes with a backward running on another thread; "
                 "run backward passes over shared nodes one after the other");
  }

  backend::Backend& inner_;
  NanCheckingBackend* nan_check_;
  std::unordered_map<std::uint64_t, ir::Handle> grads_;
  std::unordered_map<std::uint64_t, PendingSlices> slices_;      // (Note [Slices that tile])
  std::unordered_map<std::uint64_t, PendingProducts> products_;  // (Note [Products that stack])
  std::unordered_map<std::uint64_t, std::vector<ir::Handle>> recomputed_;
};

class AutodiffBackendImpl final : public backend::Backend, public backend::AutodiffBackend {
 public:
  AutodiffBackendImpl(std::shared_ptr<backend::Backend> inner, Checkpointing ck)
      : inner_(std::move(inner)), ck_(ck) {}

  std::string name() const override {
    // The registry's decorator names, so that Device::parse(name()) is this device.
    return inner_->name() + (ck_ == Checkpointing::Balanced ? "+autodiff_balanced" : "+autodiff");
  }

  ir::Handle from_data(const TensorData& data) override { return wrap(inner_->from_data(data)); }
  ir::Handle adopt_host(std::byte* data, const Shape& shape, DType dtype,
                        std::shared_ptr<const void> owner) override {
    ir::Handle h = inner_->adopt_host(data, shape, dtype, std::move(owner));
    return h ? wrap(std::move(h)) : nullptr;
  }
  HostTensor empty_host(const Shape& shape, DType dtype) override {
    HostTensor t = inner_->empty_host(shape, dtype);
    if (t.handle) t.handle = wrap(std::move(t.handle));
    return t;
  }
  const std::byte* host_data(const ir::Handle& x) override {
    return inner_->host_data(unwrap(x).inner());
  }
  TensorData to_data(const ir::Handle& x) override { return inner_->to_data(unwrap(x).inner()); }

  std::vector<ir::Handle> execute(ir::Op op) override {
    const std::size_t n = ir::operand_count(op);
    std::vector<std::shared_ptr<Node>> parents(n);
    std::vector<Shape> shapes(n);
    std::vector<DType> dtypes(n);
    bool tracked = false;
    const NanCheck nan_mode = detect_nan();
    const std::string label = nan_mode != NanCheck::Off ? op_label(op) : std::string();
    std::size_t i = 0;
    ir::for_each_operand(op, [&](ir::Handle& h) {
      const std::size_t slot = i++;
      if (!h) return;  // an absent optional operand: no gradient, no parent
      AdTensor& t = unwrap(h);
      if (nan_mode != NanCheck::Off && !t.nan_checked) {
        const std::string bad = find_bad_element(*inner_, t.inner(), nan_mode);
        EMBER_CHECK(bad.empty(),
                    "EMBER_DETECT_NAN: operand " + std::to_string(slot) + " of " + label + " (" +
                        t.shape().to_string() + ") holds " + bad +
                        " already (it came from data or another device, not from an op of " +
                        name() + ")");
        t.nan_checked = true;
      }
      shapes[slot] = t.shape();
      dtypes[slot] = t.dtype();
      if (t.node()) {
        parents[slot] = t.node();
        tracked = true;
      }
      // A handle the op alone owns can go to the inner backend by move (in-place reuse).
      h = h.use_count() == 1 ? t.take_inner() : t.inner();
    });
    std::vector<Shape> checked_shapes;  // the operands' shapes, for the NaN check's message
    if (nan_mode != NanCheck::Off) checked_shapes = shapes;
    const RuleEntry* entry = tracked ? &rule_for(op) : nullptr;
    if (entry && entry->kind == RuleKind::NotDifferentiable) entry = nullptr;
    std::shared_ptr<Node> proto;
    if (entry) {
      EMBER_CHECK(entry->kind == RuleKind::Differentiable,
                  std::string("autodiff: ") + ir::name(ir::kind_of(op)) + ": " + entry->formula);
      proto = record(op, *entry, std::move(parents), std::move(shapes), std::move(dtypes));
    }
    auto outs = inner_->execute(std::move(op));
    if (nan_mode != NanCheck::Off)
      check_outputs(*inner_, label, "forward", checked_shapes, outs, nan_mode);
    std::vector<ir::Handle> wrapped;
    wrapped.reserve(outs.size());
    bool recorded = false;
    for (std::size_t k = 0; k < outs.size(); ++k) {
      std::shared_ptr<Node> node;
      if (proto && is_float(outs[k]->dtype()) && !recorded) {
        // The node stands for the op's first float output (Sort: the values; BatchNorm:
        // y); a later float output (BatchNorm's statistics) is recorded as detached.
        recorded = true;
        node = proto;
        node->out_index = k;
        node->shape = outs[k]->shape();
        node->dtype = outs[k]->dtype();
        if (node->rule->needs_output && !node->recomputable) node->outputs = outs;
      }
      auto t = std::make_shared<AdTensor>(this, std::move(outs[k]), std::move(node));
      t->nan_checked = nan_mode != NanCheck::Off;
      wrapped.push_back(std::move(t));
    }
    return wrapped;
  }

  // Operands and outputs are the inner backend's: what it supports, this runs.
  bool supports(const ir::Op& op) const override { return inner_->supports(op); }
  void seed(std::uint64_t s) override { inner_->seed(s); }
  backend::MemoryStats memory_stats() const override { return inner_->memory_stats(); }
  void empty_cache() override { inner_->empty_cache(); }
  void sync() override { inner_->sync(); }
  DType default_float() const override { return inner_->default_float(); }
  DType default_int() const override { return inner_->default_int(); }
  std::shared_ptr<backend::Backend> inner() const override { return inner_; }
  backend::AutodiffBackend* autodiff() override { return this; }

  // ---- AutodiffBackend ----
  ir::Handle require_grad(const ir::Handle& x) override {
    AdTensor& t = unwrap(x);
    EMBER_CHECK(is_float(t.dtype()), std::string("require_grad: only float tensors have "
                                                 "gradients, got dtype ") +
                                         ember::name(t.dtype()));
    if (t.node() && t.node()->leaf) return x;
    auto node = std::make_shared<Node>();
    node->id = next_node_id();
    node->leaf = true;
    node->shape = t.shape();
    node->dtype = t.dtype();
    return std::make_shared<AdTensor>(this, t.inner(), std::move(node));
  }
  bool is_require_grad(const ir::Handle& x) const override {
    const auto& n = unwrap(x).node();
    return n && n->leaf;
  }
  bool is_tracked(const ir::Handle& x) const override { return unwrap(x).node() != nullptr; }
  ir::Handle detach(const ir::Handle& x) override {
    AdTensor& t = unwrap(x);
    if (!t.node()) return x;
    return wrap(t.inner());
  }
  backend::GradientsStore backward(const ir::Handle& x) override {
    AdTensor& t = unwrap(x);
    EMBER_CHECK(t.node() != nullptr,
                "backward: the tensor (shape " + t.shape().to_string() +
                    ") is not part of a graph: no operand required a gradient");
    EMBER_CHECK(t.shape().num_elements() == 1,
                "backward: expected a tensor with one element (a loss), got shape " +
                    t.shape().to_string());
    const NanCheck nan_mode = detect_nan();
    if (nan_mode == NanCheck::Off) {
      BackwardPass pass(*inner_);
      return pass.run(t.node());
    }
    NanCheckingBackend checked(*inner_, nan_mode);
    BackwardPass pass(checked, &checked);
    return pass.run(t.node());
  }
  std::optional<std::uint64_t> grad_key(const ir::Handle& x) const override {
    const auto& n = unwrap(x).node();
    if (n && n->leaf) return n->id;
    return std::nullopt;
  }
  ir::Handle to_inner(const ir::Handle& x) const override { return unwrap(x).inner(); }
  ir::Handle from_inner(ir::Handle inner) override { return wrap(std::move(inner)); }
  Checkpointing checkpointing() const override { return ck_; }

 private:
  ir::Handle wrap(ir::Handle inner) {
    return std::make_shared<AdTensor>(this, std::move(inner), nullptr);
  }
  AdTensor& unwrap(const ir::Handle& h) const {
    // Only this decorator's tensors name it as theirs (no RTTI needed: embedded builds).
    EMBER_CHECK(h != nullptr && h->decorator() == this,
                "autodiff: a tensor of another device was given to " + name() +
                    " (move it with to_device, or use inner()/from_inner())");
    return static_cast<AdTensor&>(*h);
  }

  // Builds the node of op (whose operands are inner handles) keeping what the rule and
  // the checkpointing strategy need.
  std::shared_ptr<Node> record(const ir::Op& op, const RuleEntry& entry,
                               std::vector<std::shared_ptr<Node>> parents,
                               std::vector<Shape> shapes, std::vector<DType> dtypes) {
    auto node = std::make_shared<Node>();
    node->id = next_node_id();
    node->rule = &entry.rule;
    const bool balanced = ck_ == Checkpointing::Balanced;
    node->recomputable = balanced && is_memory_bound(ir::kind_of(op));
    node->op = op;
    for (std::size_t i = 0; i < parents.size(); ++i) {
      ir::Handle& h = ir::operand(node->op, i);
      const bool from_recomputable = parents[i] && parents[i]->recomputable;
      const bool needed = (entry.rule.needs_inputs >> i & 1) || node->recomputable;
      if (from_recomputable || !needed) h.reset();
    }
    for (const auto& p : parents)
      if (p) p->uses.fetch_add(1, std::memory_order_relaxed);
    node->parents = std::move(parents);
    node->in_shapes = std::move(shapes);
    node->in_dtypes = std::move(dtypes);
    return node;
  }

  std::shared_ptr<backend::Backend> inner_;
  Checkpointing ck_;
};

}  // namespace

ir::Handle BackwardCtx::input(std::size_t i) {
  ir::Handle h = ir::operand(node_.op, i);
  if (h) return h;
  EMBER_ASSERT(node_.parents[i] != nullptr);
  return engine_.value(*node_.parents[i]);
}

void BackwardCtx::give(std::size_t i, ir::Handle g) {
  if (!wants(i)) return;
  if (g->shape() != in_shape(i)) g = h::sum_to(be, std::move(g), in_shape(i));
  if (g->dtype() != in_dtype(i)) g = h::cast(be, std::move(g), in_dtype(i));
  engine_.accumulate(*node_.parents[i], std::move(g));
}

void BackwardCtx::give_slice(std::size_t i, const std::vector<ir::SliceRange>& ranges,
                             ir::Handle g) {
  if (!wants(i)) return;
  if (g->dtype() != in_dtype(i)) g = h::cast(be, std::move(g), in_dtype(i));
  engine_.accumulate_slice(*node_.parents[i], in_shape(i), in_dtype(i), ranges, std::move(g));
}

// The inner dim below which a product runs short of a GEMM's rate and its term waits to be
// stacked (Note [Products that stack]): a deeper one gains little from stacking and pays
// for the concatenations (a Transformer's Q, K and V projections of one input).
constexpr std::size_t kShallowProduct = 128;

void BackwardCtx::give_product(std::size_t i, Factor lhs, Factor rhs) {
  if (!wants(i)) return;
  Node& parent = *node_.parents[i];
  const Shape& ls = lhs.x->shape();
  const Shape& rs = rhs.x->shape();
  // Matrices whose product is the operand's gradient as it is, shallow, of an operand more
  // than one op reads: the term may wait (Note [Products that stack]); else the product now.
  const bool stacks =
      ls.rank() == 2 && rs.rank() == 2 &&
      in_shape(i) == Shape{ls[lhs.transposed ? 1 : 0], rs[rhs.transposed ? 0 : 1]} &&
      ls[lhs.transposed ? 0 : 1] < kShallowProduct && lhs.x->dtype() == in_dtype(i) &&
      rhs.x->dtype() == in_dtype(i) && parent.uses.load(std::memory_order_relaxed) > 1;
  if (stacks) return engine_.accumulate_product(parent, std::move(lhs), std::move(rhs));
  give(i, h::matmul(be, matrix_of(be, std::move(lhs)), matrix_of(be, std::move(rhs))));
}

std::shared_ptr<backend::Backend> make_autodiff_backend(std::shared_ptr<backend::Backend> inner,
                                                        Checkpointing checkpointing) {
  EMBER_CHECK(inner != nullptr, "autodiff: no backend to wrap");
  return std::make_shared<AutodiffBackendImpl>(std::move(inner), checkpointing);
}

}  // namespace ember::autodiff
