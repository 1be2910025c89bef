// The loss config modules (loss_modules.hpp): reductions by name, class weights as
// tensors, and each config's checks at init.
#include "ember/nn/loss_modules.hpp"

#include <cmath>

namespace ember::nn {

namespace detail {

loss::Reduction reduction_of(const std::string& name, const char* loss, bool batchmean) {
  if (name == "mean") return loss::Reduction::Mean;
  if (name == "sum") return loss::Reduction::Sum;
  if (name == "none") return loss::Reduction::None;
  if (batchmean && name == "batchmean") return loss::Reduction::BatchMean;
  fail(std::string(loss) + ": unknown reduction \"" + name + "\" (expected \"mean\", \"sum\"" +
       (batchmean ? ", \"none\" or \"batchmean\")" : " or \"none\")"));
}

std::optional<Tensor<1>> weights_like(const std::vector<double>& w, const DynTensor& like) {
  if (w.empty()) return std::nullopt;
  return Tensor<1>(ops::cast(
      ops::from_data(TensorData::from<double>(w, Shape{w.size()}), like.device()), like.dtype()));
}

namespace {
void check_weights(const std::vector<double>& w, const char* loss, const char* what) {
  for (std::size_t i = 0; i < w.size(); ++i) {
    EMBER_CHECK(std::isfinite(w[i]) && w[i] >= 0,
                std::string(loss) + ": " + what + "[" + std::to_string(i) +
                    "] = " + std::to_string(w[i]) + " must be finite and non-negative");
  }
}
void check_finite(double v, const char* loss, const char* what) {
  EMBER_CHECK(std::isfinite(v),
              std::string(loss) + ": " + what + " must be finite, got " + std::to_string(v));
}
// v finite and above 0 (or at least 0 where zero_ok).
void check_positive(double v, bool zero_ok, const char* loss, const char* what) {
  EMBER_CHECK(std::isfinite(v) && (v > 0 || (zero_ok && v == 0)),
              std::string(loss) + ": " + what + " must be " +
                  (zero_ok ? "non-negative" : "positive") + ", got " + std::to_string(v));
}
}  // namespace

}  // namespace detail

CrossEntropyLoss CrossEntropyLossConfig::init() const {
  const char* n = "nn::CrossEntropyLoss";
  detail::reduction_of(reduction, n);
  detail::check_weights(weight, n, "weight");
  EMBER_CHECK(label_smoothing >= 0 && label_smoothing <= 1,
              std::string(n) + ": label_smoothing must be in [0, 1], got " +
                  std::to_string(label_smoothing));
  return {*this};
}

NllLoss NllLossConfig::init() const {
  detail::reduction_of(reduction, "nn::NllLoss");
  detail::check_weights(weight, "nn::NllLoss", "weight");
  return {*this};
}

BinaryCrossEntropyLoss BinaryCrossEntropyLossConfig::init() const {
  const char* n = "nn::BinaryCrossEntropyLoss";
  detail::reduction_of(reduction, n);
  detail::check_weights(pos_weight, n, "pos_weight");
  EMBER_CHECK(logits || pos_weight.empty(),
              std::string(n) + ": pos_weight needs logits = true (BCEWithLogitsLoss)");
  return {*this};
}

MseLoss MseLossConfig::init() const {
  detail::reduction_of(reduction, "nn::MseLoss");
  return {*this};
}

L1Loss L1LossConfig::init() const {
  detail::reduction_of(reduction, "nn::L1Loss");
  return {*this};
}

HuberLoss HuberLossConfig::init() const {
  detail::reduction_of(reduction, "nn::HuberLoss");
  EMBER_CHECK(delta > 0 && std::isfinite(delta),
              "nn::HuberLoss: delta must be positive, got " + std::to_string(delta));
  return {*this};
}

SmoothL1Loss SmoothL1LossConfig::init() const {
  detail::reduction_of(reduction, "nn::SmoothL1Loss");
  EMBER_CHECK(beta >= 0 && std::isfinite(beta),
              "nn::SmoothL1Loss: beta must be non-negative, got " + std::to_string(beta));
  return {*this};
}

KlDivLoss KlDivLossConfig::init() const {
  detail::reduction_of(reduction, "nn::KlDivLoss", true);
  return {*this};
}

CtcLoss CtcLossConfig::init() const {
  detail::reduction_of(reduction, "nn::CtcLoss");
  return {*this};
}

SoftMarginLoss SoftMarginLossConfig::init() const {
  detail::reduction_of(reduction, "nn::SoftMarginLoss");
  return {*this};
}

HingeEmbeddingLoss HingeEmbeddingLossConfig::init() const {
  detail::reduction_of(reduction, "nn::HingeEmbeddingLoss");
  detail::check_finite(margin, "nn::HingeEmbeddingLoss", "margin");
  return {*this};
}

CosineEmbeddingLoss CosineEmbeddingLossConfig::init() const {
  detail::reduction_of(reduction, "nn::CosineEmbeddingLoss");
  detail::check_finite(margin, "nn::CosineEmbeddingLoss", "margin");
  return {*this};
}

GaussianNllLoss GaussianNllLossConfig::init() const {
  detail::reduction_of(reduction, "nn::GaussianNllLoss");
  detail::check_positive(eps, false, "nn::GaussianNllLoss", "eps");
  return {*this};
}

PoissonNllLoss PoissonNllLossConfig::init() const {
  detail::reduction_of(reduction, "nn::PoissonNllLoss");
  detail::check_positive(eps, true, "nn::PoissonNllLoss", "eps");
  return {*this};
}

MarginRankingLoss MarginRankingLossConfig::init() const {
  detail::reduction_of(reduction, "nn::MarginRankingLoss");
  detail::check_finite(margin, "nn::MarginRankingLoss", "margin");
  return {*this};
}

TripletMarginLoss TripletMarginLossConfig::init() const {
  const char* n = "nn::TripletMarginLoss";
  detail::reduction_of(reduction, n);
  detail::check_finite(margin, n, "margin");
  detail::check_positive(p, false, n, "p");
  detail::check_positive(eps, true, n, "eps");
  return {*this};
}

MultiMarginLoss MultiMarginLossConfig::init() const {
  const char* n = "nn::MultiMarginLoss";
  detail::reduction_of(reduction, n);
  detail::check_finite(margin, n, "margin");
  detail::check_weights(weight, n, "weight");
  EMBER_CHECK(p == 1 || p == 2, std::string(n) + ": p must be 1 or 2, got " + std::to_string(p));
  return {*this};
}

}  // namespace ember::nn
