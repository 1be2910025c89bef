// The autodiff capability of a backend, as the tensor layer sees it. The Autodiff
// decorator (src/autodiff/) implements it; tensor/ finds it through Backend::autodiff() on
// a device's backend, so neither layer includes the other (DESIGN §1). Gradients travel as
// a GradientsStore: handles of the inner backend keyed by the id of the graph leaf they
// belong to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "ember/ir/ops.hpp"

namespace ember::backend {

// What the graph keeps between forward and backward.
//  None:     every tensor a derivative rule needs is kept from the forward pass.
//  Balanced: outputs of memory-bound ops (element-wise, views) are not kept; backward
//            recomputes them from their inputs when a rule asks. Compute-bound results
//            (matmul, reductions, data movement) are kept. Gradients are identical.
enum class Checkpointing : std::uint8_t { None, Balanced };

// Gradients of the leaves of one backward pass, as inner-backend handles.
class GradientsStore {
 public:
  GradientsStore() = default;
  GradientsStore(GradientsStore&&) noexcept = default;
  GradientsStore& operator=(GradientsStore&&) noexcept = default;
  GradientsStore(const GradientsStore&) = delete;
  GradientsStore& operator=(const GradientsStore&) = delete;

  const ir::Handle* find(std::uint64_t id) const {
    auto it = map_.find(id);
    return it == map_.end() ? nullptr : &it->second;
  }
  std::optional<ir::Handle> remove(std::uint64_t id) {
    auto it = map_.find(id);
    if (it == map_.end()) return std::nullopt;
    ir::Handle h = std::move(it->second);
    map_.erase(it);
    return h;
  }
  void insert(std::uint64_t id, ir::Handle h) { map_[id] = std::move(h); }
  std::size_t size() const { return map_.size(); }
  bool empty() const { return map_.empty(); }

 private:
  std::unordered_map<std::uint64_t, ir::Handle> map_;
};

class AutodiffBackend {
 public:
  virtual ~AutodiffBackend() = default;
  // A float tensor that is a graph leaf whose gradient backward keeps. Idempotent.
  virtual ir::Handle require_grad(const ir::Handle& x) = 0;
  // True when x is a leaf made by require_grad.
  virtual bool is_require_grad(const ir::Handle& x) const = 0;
  // True when x is part of a graph (a leaf or computed from one).
  virtual bool is_tracked(const ir::Handle& x) const = 0;
  // Same values, outside any graph.
  virtual ir::Handle detach(const ir::Handle& x) = 0;
  // Runs reverse mode from a one-element tracked tensor and frees the graph behind it.
  // Throws ember::Error when x is not tracked or its graph was already freed.
  virtual GradientsStore backward(const ir::Handle& x) = 0;
  // The key of x's gradient in a GradientsStore: set for require_grad leaves.
  virtual std::optional<std::uint64_t> grad_key(const ir::Handle& x) const = 0;
  // Conversions between this backend's handles and the inner backend's.
  virtual ir::Handle to_inner(const ir::Handle& x) const = 0;
  virtual ir::Handle from_inner(ir::Handle inner) = 0;
  virtual Checkpointing checkpointing() const = 0;
};

}  // namespace ember::backend
