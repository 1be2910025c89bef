// nn::Sequential's non-template parts.
#include "ember/nn/sequential.hpp"

namespace ember::nn {

namespace detail {
void no_forward_for(std::string_view layer, std::size_t index, const DynTensor& x) {
  fail("nn::Sequential: layer " + std::to_string(index) + " (" + std::string(layer) +
       ") has no forward for a rank-" + std::to_string(x.rank()) + " " + ember::name(x.kind()) +
       " tensor of shape " + x.shape().to_string());
}
}  // namespace detail

DynTensor Sequential::forward_dyn(DynTensor x) const {
#if EMBER_HAS_EXCEPTIONS
  try {
#endif
    for (std::size_t i = 0; i < layers_.size(); ++i) x = layers_[i]->forward(std::move(x), i);
    return x;
#if EMBER_HAS_EXCEPTIONS
  } catch (const LayerError& e) {
    detail::rethrow_located(*this, e);
  }
#endif
}

bool Sequential::ember_find(std::string& path, const detail::NodeRef& target,
                            std::string& out) const {
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    detail::PathScope scope(path, std::to_string(i));
    if (layers_[i]->find(path, target, out)) return true;
  }
  return false;
}

void Sequential::ember_visit(const std::string& path, const VisitFn& f) const {
  std::string p = path;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    detail::PathScope scope(p, std::to_string(i));
    layers_[i]->visit(p, f);
  }
}

void Sequential::ember_map(const std::string& path, const MapFn& f) {
  std::string p = path;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    detail::PathScope scope(p, std::to_string(i));
    layers_[i]->map(p, f);
  }
}

void Sequential::ember_summarize(const std::string& path, SummaryBuilder& b) const {
  b.begin_module(path, "Sequential");
  std::string p = path;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    detail::PathScope scope(p, std::to_string(i));
    layers_[i]->summarize(p, b);
  }
  b.end_module();
}

void Sequential::copy_from(const Sequential& o) {
  layers_.reserve(o.layers_.size());
  for (const auto& l : o.layers_) layers_.push_back(l->clone());
}

}  // namespace ember::nn
