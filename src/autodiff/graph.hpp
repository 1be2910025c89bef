// The autodiff graph: one Node per tracked float tensor, the tensor handle that carries
// it, and the interface a derivative rule sees (BackwardCtx). Private to src/autodiff/.
//
// Note [Saved tensors]: a node keeps a copy of its forward op whose operand handles are
// inner-backend handles. An operand the rule does not read is dropped at record time
// (null), so the graph keeps only what backward needs. Under Checkpointing::Balanced an
// operand produced by a memory-bound op is dropped too and recomputed in backward from
// the producing node's own saved op (Node::recomputable). Node ids grow monotonically, so
// a parent's id is always smaller than its child's: sorting by id gives a topological
// order without a separate pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ember/backend/autodiff_interface.hpp"
#include "ember/backend/backend.hpp"
#include "ember/base/config.hpp"  // ember::Atomic

namespace ember::autodiff {

class BackwardCtx;

// A derivative rule: which forward values it reads and the function producing the
// operands' gradients from the output's.
struct Rule {
  std::uint8_t needs_inputs = 0;  // bit i: reads operand i (0xff: all)
  bool needs_output = false;      // reads the op's outputs
  void (*backward)(BackwardCtx&) = nullptr;
};

enum class RuleKind : std::uint8_t {
  Differentiable,     // has a rule
  NotDifferentiable,  // zero gradient or non-float output: records nothing
  Unsupported,        // differentiable but no rule yet: recording throws ember::Error
};
struct RuleEntry {
  RuleKind kind = RuleKind::Unsupported;
  const char* formula = "";  // the rule in words, for review and docs/autodiff.md
  Rule rule;
};

// The derivative table (derivatives.cpp).
const RuleEntry& rule_for(const ir::Op& op);
const RuleEntry& unary_rule(ir::UnaryFn fn);
const RuleEntry& binary_rule(ir::BinaryFn fn);
const RuleEntry& reduce_rule(ir::ReduceFn fn);
const RuleEntry& scan_rule(ir::ScanFn fn);
const RuleEntry& pool_rule(ir::PoolFn fn);
// The table of an op's function (every op struct with a member fn has one).
const RuleEntry& fn_rule(ir::UnaryFn fn);
const RuleEntry& fn_rule(ir::BinaryFn fn);
const RuleEntry& fn_rule(ir::ReduceFn fn);
const RuleEntry& fn_rule(ir::ScanFn fn);
const RuleEntry& fn_rule(ir::PoolFn fn);
// Entries of op kinds without a function enum (the ops with one — Unary, Binary, Reduce,
// Scan, Pool — answer with their per-function tables; this one says Differentiable for
// them).
const RuleEntry& kind_rule(ir::OpKind kind);
// Element-wise ops and views: cheap to recompute, what Balanced checkpointing drops.
bool is_memory_bound(ir::OpKind kind);

struct Node {
  std::uint64_t id = 0;
  bool leaf = false;          // made by require_grad: its gradient is kept
  bool recomputable = false;  // Balanced: value recomputed from op in backward
  // Note [Concurrent backward]: a backward pass claims every non-leaf node it will visit
  // before reading or changing it; a node claimed by another pass (running, or done and
  // so consumed) makes the pass release its claims and throw ember::Error. Leaves are
  // only read in backward and are never claimed, so graphs sharing only leaves run
  // concurrently.
  Atomic<bool> claimed{false};
  Atomic<bool> consumed{false};  // a backward pass freed it
  // How many recorded ops read this node's value (Note [Products that stack]).
  Atomic<std::uint32_t> uses{0};
  const Rule* rule = nullptr;
  std::vector<std::shared_ptr<Node>> parents;  // per operand slot; null: not tracked
  std::vector<Shape> in_shapes;
  std::vector<DType> in_dtypes;
  ir::Op op;                        // Note [Saved tensors]
  std::size_t out_index = 0;        // which output of op this node is
  std::vector<ir::Handle> outputs;  // saved outputs, when the rule reads them
  Shape shape;
  DType dtype = DType::F32;
};

std::uint64_t next_node_id();

// The tensor handle of the autodiff backend: the inner handle plus the graph node of a
// tracked tensor.
class AdTensor final : public ir::TensorNode {
 public:
  AdTensor(const void* owner, ir::Handle inner, std::shared_ptr<Node> node)
      : TensorNode(inner->shape(), inner->dtype()),
        owner_(owner),
        inner_(std::move(inner)),
        node_(std::move(node)) {}
  const void* owner() const { return owner_; }
  const void* decorator() const override { return owner_; }
  const ir::Handle& inner() const { return inner_; }
  ir::Handle take_inner() { return std::move(inner_); }
  const std::shared_ptr<Node>& node() const { return node_; }
  // Whether the NaN check has seen this value (Note [Detecting NaN]): outputs of checked
  // ops are; a tensor that entered from data or another device is scanned at first use.
  bool nan_checked = false;

 private:
  const void* owner_;
  ir::Handle inner_;
  std::shared_ptr<Node> node_;
};

// A factor of a gradient's matrix product: the matrix x, or its transpose.
struct Factor {
  ir::Handle x;
  bool transposed = false;
};

// What backward provides to a rule: forward values (saved or recomputed) and a sink for
// the operands' gradients.
class Engine {
 public:
  virtual ~Engine() = default;
  virtual ir::Handle value(Node& node) = 0;
  virtual const std::vector<ir::Handle>& outputs(Node& node) = 0;
  virtual void accumulate(Node& node, ir::Handle grad) = 0;
  // Adds g to the part `ranges` of node's gradient, of the given shape and dtype (Note
  // [Slice gradients]).
  virtual void accumulate_slice(Node& node, const Shape& shape, DType dtype,
                                const std::vector<ir::SliceRange>& ranges, ir::Handle g) = 0;
  // Adds the product lhs · rhs (matrices, of node's shape and dtype) to node's gradient
  // (Note [Products that stack]).
  virtual void accumulate_product(Node& node, Factor lhs, Factor rhs) = 0;
};

class BackwardCtx {
 public:
  BackwardCtx(backend::Backend& inner, Engine& engine, Node& node, ir::Handle grad)
      : be(inner), engine_(engine), node_(node), grad_(std::move(grad)) {}

  backend::Backend& be;  // the inner backend every rule runs its ops on

  template <class T>
  const T& op() const {
    return std::get<T>(node_.op);
  }
  const ir::Handle& grad() const { return grad_; }
  // Operand i's forward value: saved, or recomputed (Balanced).
  ir::Handle input(std::size_t i);
  // The forward output this node stands for (or output k of a multi-output op).
  ir::Handle output() { return engine_.outputs(node_)[node_.out_index]; }
  ir::Handle output(std::size_t k) { return engine_.outputs(node_)[k]; }
  const Shape& in_shape(std::size_t i) const { return node_.in_shapes[i]; }
  DType in_dtype(std::size_t i) const { return node_.in_dtypes[i]; }
  std::size_t num_inputs() const { return node_.parents.size(); }
  // Whether operand i needs a gradient (skip work for the others).
  bool wants(std::size_t i) const { return node_.parents[i] != nullptr; }
  // Adds g to operand i's gradient, first summing broadcast dims down to its shape.
  void give(std::size_t i, ir::Handle g);
  // Adds g, of the shape of operand i's part `ranges`, to that part of its gradient.
  void give_slice(std::size_t i, const std::vector<ir::SliceRange>& ranges, ir::Handle g);
  // Adds the matrix product lhs · rhs to operand i's gradient (Note [Products that stack]).
  void give_product(std::size_t i, Factor lhs, Factor rhs);

 private:
  Engine& engine_;
  Node& node_;
  ir::Handle grad_;
};

}  // namespace ember::autodiff
