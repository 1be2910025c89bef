// GradientsParams: the gradients of a module's parameters, keyed by nn::ParamId, each on
// its parameter's (inner) device — what an optimizer step consumes. GradientsAccumulator
// sums them over micro-batches. docs/optim.md is the reference; the contract is DESIGN §2.2.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ember/nn/module.hpp"
#include "ember/tensor/gradients.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::optim {

class GradientsParams {
 public:
  GradientsParams() = default;
  GradientsParams(GradientsParams&&) noexcept = default;
  GradientsParams& operator=(GradientsParams&&) noexcept = default;
  GradientsParams(const GradientsParams&) = delete;
  GradientsParams& operator=(const GradientsParams&) = delete;

  // The gradients of every trainable param of `module` (frozen params have none).
  template <nn::Module M>
  static GradientsParams from_grads(Gradients&& grads, const M& module) {
    GradientsParams gp;
    gp.take_from(grads, module);
    return gp;
  }
  // The gradients of `module`'s params only, taken out of `grads` (the rest stay there):
  // for a part of a model that has its own optimizer.
  template <nn::Module M>
  static GradientsParams from_module(Gradients& grads, const M& module) {
    GradientsParams gp;
    gp.take_from(grads, module);
    return gp;
  }

  // Sets (or replaces) the gradient of param `id`.
  void insert(nn::ParamId id, DynTensor grad);
  template <std::size_t D>
  void insert(const nn::Param<Tensor<D>>& p, Tensor<D> grad) {
    insert(p.id(), std::move(grad).dyn());
  }
  // The gradient of param `id` (sharing its buffer), or nothing.
  std::optional<DynTensor> get(nn::ParamId id) const;
  template <std::size_t D>
  std::optional<Tensor<D>> get(const nn::Param<Tensor<D>>& p) const {
    auto g = get(p.id());
    if (!g) return std::nullopt;
    return Tensor<D>(std::move(*g));
  }
  // Takes the gradient of param `id` out.
  std::optional<DynTensor> remove(nn::ParamId id);
  bool contains(nn::ParamId id) const { return index_.count(id) != 0; }
  std::size_t size() const { return entries_.size(); }
  bool empty() const { return entries_.empty(); }
  // The ids, in insertion order (the module's field order for from_grads).
  std::vector<nn::ParamId> ids() const;

  void for_each(const std::function<void(nn::ParamId, const DynTensor&)>& f) const;
  // Replaces every gradient by f(id, gradient); the gradient is handed over, so f can
  // update it in place.
  void transform(const std::function<DynTensor(nn::ParamId, DynTensor)>& f);

 private:
  template <nn::Module M>
  void take_from(Gradients& grads, const M& module) {
    nn::visit(module, [&](const nn::TensorEntry& e) { take_entry(e, grads); });
  }
  void take_entry(const nn::TensorEntry& e, Gradients& grads);

  std::vector<std::pair<nn::ParamId, DynTensor>> entries_;
  std::unordered_map<nn::ParamId, std::size_t> index_;
};

// Sums gradients over micro-batches: accumulate() after each backward, grads() before the
// step (the sum; divide the loss by the number of micro-batches for their mean).
class GradientsAccumulator {
 public:
  void accumulate(GradientsParams&& grads);
  // Burn's spelling: the module is not needed, the ids say which param each gradient is.
  template <nn::Module M>
  void accumulate(const M& /*module*/, GradientsParams&& grads) {
    accumulate(std::move(grads));
  }
  // The sum so far; the accumulator starts again empty.
  GradientsParams grads();
  // Micro-batches accumulated since the last grads().
  std::size_t count() const { return count_; }

 private:
  GradientsParams sum_;
  std::size_t count_ = 0;
};

}  // namespace ember::optim
