// GradientsParams and GradientsAccumulator.
#include "ember/optim/gradients_params.hpp"

#include "tensor_math.hpp"

namespace ember::optim {

void GradientsParams::insert(nn::ParamId id, DynTensor grad) {
  EMBER_CHECK(grad.kind() == Kind::Float,
              std::string("optim::GradientsParams::insert: a gradient is a float tensor, got "
                          "dtype ") +
                  name(grad.dtype()));
  auto it = index_.find(id);
  if (it != index_.end()) {
    entries_[it->second].second = std::move(grad);
    return;
  }
  index_.emplace(id, entries_.size());
  entries_.emplace_back(id, std::move(grad));
}

std::optional<DynTensor> GradientsParams::get(nn::ParamId id) const {
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  return entries_[it->second].second;
}

std::optional<DynTensor> GradientsParams::remove(nn::ParamId id) {
  auto it = index_.find(id);
  if (it == index_.end()) return std::nullopt;
  const std::size_t pos = it->second;
  DynTensor g = std::move(entries_[pos].second);
  index_.erase(it);
  if (pos + 1 != entries_.size()) {
    entries_[pos] = std::move(entries_.back());
    index_[entries_[pos].first] = pos;
  }
  entries_.pop_back();
  return g;
}

std::vector<nn::ParamId> GradientsParams::ids() const {
  std::vector<nn::ParamId> v;
  v.reserve(entries_.size());
  for (const auto& [id, g] : entries_) v.push_back(id);
  return v;
}

void GradientsParams::for_each(const std::function<void(nn::ParamId, const DynTensor&)>& f) const {
  for (const auto& [id, g] : entries_) f(id, g);
}

void GradientsParams::transform(const std::function<DynTensor(nn::ParamId, DynTensor)>& f) {
  for (auto& [id, g] : entries_) g = f(id, std::move(g));
}

void GradientsParams::take_entry(const nn::TensorEntry& e, Gradients& grads) {
  if (!e.is_param() || !e.trainable || !e.tensor.device().is_autodiff()) return;
  auto g = ops::grad_remove(e.tensor, grads);
  if (!g) return;
  const Device inner = e.tensor.device().inner();
  insert(e.id, g->device() == inner ? std::move(*g) : ops::to_device(std::move(*g), inner));
}

void GradientsAccumulator::accumulate(GradientsParams&& grads) {
  for (nn::ParamId id : grads.ids()) {
    DynTensor g = *grads.remove(id);
    auto sum = sum_.remove(id);
    if (!sum) {
      sum_.insert(id, std::move(g));
      continue;
    }
    EMBER_CHECK(sum->shape() == g.shape(), "optim::GradientsAccumulator::accumulate: param " +
                                               std::to_string(id) + " had gradients of shape " +
                                               sum->shape().to_string() + ", now " +
                                               g.shape().to_string());
    sum_.insert(id, math::add(std::move(*sum), std::move(g)));
  }
  ++count_;
}

GradientsParams GradientsAccumulator::grads() {
  count_ = 0;
  return std::exchange(sum_, GradientsParams{});
}

}  // namespace ember::optim
