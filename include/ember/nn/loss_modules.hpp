// The losses of nn::loss as config modules (torch.nn.CrossEntropyLoss, ..., Burn's
// CrossEntropyLossConfig): `XLossConfig{}.with_...().init()` gives a module whose forward
// calls the function with the config's options. Reductions are PyTorch's names ("mean",
// "sum", "none", and "batchmean" for KL divergence); class weights are plain numbers,
// made into a tensor on the input's device at each call, so a config is JSON.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ember/nn/config.hpp"
#include "ember/nn/loss.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

namespace detail {
// "mean" | "sum" | "none" | "batchmean" (when allowed); an ember::Error naming the loss.
loss::Reduction reduction_of(const std::string& name, const char* loss, bool batchmean = false);
// weights [C] on like's device in like's dtype; nullopt when empty.
std::optional<Tensor<1>> weights_like(const std::vector<double>& w, const DynTensor& like);
}  // namespace detail

struct CrossEntropyLoss;
struct NllLoss;
struct BinaryCrossEntropyLoss;
struct MseLoss;
struct L1Loss;
struct HuberLoss;
struct SmoothL1Loss;
struct KlDivLoss;
struct CtcLoss;
struct CosineEmbeddingLoss;
struct GaussianNllLoss;
struct PoissonNllLoss;
struct MarginRankingLoss;
struct TripletMarginLoss;
struct HingeEmbeddingLoss;
struct MultiMarginLoss;
struct SoftMarginLoss;

struct CrossEntropyLossConfig {
  std::vector<double> weight = {};  // per class; empty: none
  double label_smoothing = 0.0;
  std::int64_t ignore_index = -100;
  std::string reduction = "mean";
  EMBER_CONFIG(CrossEntropyLossConfig, weight, label_smoothing, ignore_index, reduction)
  CrossEntropyLoss init() const;
};
struct CrossEntropyLoss {
  CrossEntropyLossConfig config;
  EMBER_MODULE(CrossEntropyLoss, config)
  Tensor<1> forward(const Tensor<2>& logits, const Tensor<1, Int>& labels) const {
    return loss::cross_entropy(logits, labels, options(logits));
  }
  Tensor<1> forward(const Tensor<2>& logits, const Tensor<2>& target_probs) const {
    return loss::cross_entropy(logits, target_probs, options(logits));
  }
  loss::CrossEntropyOptions options(const Tensor<2>& logits) const {
    return {detail::weights_like(config.weight, logits.dyn()), config.label_smoothing,
            config.ignore_index, detail::reduction_of(config.reduction, "nn::CrossEntropyLoss")};
  }
};

struct NllLossConfig {
  std::vector<double> weight = {};
  std::int64_t ignore_index = -100;
  std::string reduction = "mean";
  EMBER_CONFIG(NllLossConfig, weight, ignore_index, reduction)
  NllLoss init() const;
};
struct NllLoss {
  NllLossConfig config;
  EMBER_MODULE(NllLoss, config)
  Tensor<1> forward(const Tensor<2>& log_probs, const Tensor<1, Int>& labels) const {
    return loss::nll(log_probs, labels,
                     {detail::weights_like(config.weight, log_probs.dyn()), config.ignore_index,
                      detail::reduction_of(config.reduction, "nn::NllLoss")});
  }
};

// logits = true: BCEWithLogitsLoss (pos_weight per class over the last dim); else BCELoss
// on probabilities.
struct BinaryCrossEntropyLossConfig {
  bool logits = false;
  std::vector<double> pos_weight = {};
  std::string reduction = "mean";
  EMBER_CONFIG(BinaryCrossEntropyLossConfig, logits, pos_weight, reduction)
  BinaryCrossEntropyLoss init() const;
};
struct BinaryCrossEntropyLoss {
  BinaryCrossEntropyLossConfig config;
  EMBER_MODULE(BinaryCrossEntropyLoss, config)
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& input, const Tensor<D>& target) const {
    const auto r = detail::reduction_of(config.reduction, "nn::BinaryCrossEntropyLoss");
    if (!config.logits) return loss::binary_cross_entropy(input, target, r);
    return loss::binary_cross_entropy_with_logits(
        input, target, r, std::nullopt, detail::weights_like(config.pos_weight, input.dyn()));
  }
};

#define EMBER_NN_PAIR_LOSS_(Name, fn, label)                                         \
  struct Name##Config {                                                              \
    std::string reduction = "mean";                                                  \
    EMBER_CONFIG(Name##Config, reduction)                                            \
    Name init() const;                                                               \
  };                                                                                 \
  struct Name {                                                                      \
    Name##Config config;                                                             \
    EMBER_MODULE(Name, config)                                                       \
    template <std::size_t D>                                                         \
    Tensor<1> forward(const Tensor<D>& input, const Tensor<D>& target) const {       \
      return loss::fn(input, target, detail::reduction_of(config.reduction, label)); \
    }                                                                                \
  };
EMBER_NN_PAIR_LOSS_(MseLoss, mse, "nn::MseLoss")
EMBER_NN_PAIR_LOSS_(L1Loss, l1, "nn::L1Loss")
// target holds 1 or -1.
EMBER_NN_PAIR_LOSS_(SoftMarginLoss, soft_margin, "nn::SoftMarginLoss")
#undef EMBER_NN_PAIR_LOSS_

// The same with one number before the reduction (Huber's delta, smooth L1's beta).
#define EMBER_NN_PAIR_LOSS_WITH_(Name, fn, label, param, value)                                    \
  struct Name##Config {                                                                            \
    double param = value;                                                                          \
    std::string reduction = "mean";                                                                \
    EMBER_CONFIG(Name##Config, param, reduction)                                                   \
    Name init() const;                                                                             \
  };                                                                                               \
  struct Name {                                                                                    \
    Name##Config config;                                                                           \
    EMBER_MODULE(Name, config)                                                                     \
    template <std::size_t D>                                                                       \
    Tensor<1> forward(const Tensor<D>& input, const Tensor<D>& target) const {                     \
      return loss::fn(input, target, config.param, detail::reduction_of(config.reduction, label)); \
    }                                                                                              \
  };
EMBER_NN_PAIR_LOSS_WITH_(HuberLoss, huber, "nn::HuberLoss", delta, 1.0)
EMBER_NN_PAIR_LOSS_WITH_(SmoothL1Loss, smooth_l1, "nn::SmoothL1Loss", beta, 1.0)
// target holds 1 or -1.
EMBER_NN_PAIR_LOSS_WITH_(HingeEmbeddingLoss, hinge_embedding, "nn::HingeEmbeddingLoss", margin, 1.0)
#undef EMBER_NN_PAIR_LOSS_WITH_

struct KlDivLossConfig {
  bool log_target = false;
  std::string reduction = "mean";  // PyTorch's default; "batchmean" is the true KL per sample
  EMBER_CONFIG(KlDivLossConfig, log_target, reduction)
  KlDivLoss init() const;
};
struct KlDivLoss {
  KlDivLossConfig config;
  EMBER_MODULE(KlDivLoss, config)
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& log_probs, const Tensor<D>& target) const {
    return loss::kl_div(log_probs, target,
                        detail::reduction_of(config.reduction, "nn::KlDivLoss", true),
                        config.log_target);
  }
};

struct CtcLossConfig {
  std::size_t blank = 0;
  std::string reduction = "mean";
  bool zero_infinity = false;
  EMBER_CONFIG(CtcLossConfig, blank, reduction, zero_infinity)
  CtcLoss init() const;
};
struct CtcLoss {
  CtcLossConfig config;
  EMBER_MODULE(CtcLoss, config)
  Tensor<1> forward(const Tensor<3>& log_probs, const Tensor<2, Int>& targets,
                    const std::vector<std::size_t>& input_lengths,
                    const std::vector<std::size_t>& target_lengths) const {
    return loss::ctc(log_probs, targets, input_lengths, target_lengths,
                     {config.blank, detail::reduction_of(config.reduction, "nn::CtcLoss"),
                      config.zero_infinity});
  }
};

// y holds 1 or -1.
struct CosineEmbeddingLossConfig {
  double margin = 0.0;
  std::string reduction = "mean";
  EMBER_CONFIG(CosineEmbeddingLossConfig, margin, reduction)
  CosineEmbeddingLoss init() const;
};
struct CosineEmbeddingLoss {
  CosineEmbeddingLossConfig config;
  EMBER_MODULE(CosineEmbeddingLoss, config)
  template <std::size_t D, class K>
  Tensor<1> forward(const Tensor<D>& x1, const Tensor<D>& x2, const Tensor<D - 1, K>& y) const {
    return loss::cosine_embedding(
        x1, x2, y, config.margin,
        detail::reduction_of(config.reduction, "nn::CosineEmbeddingLoss"));
  }
};

// var broadcasts against input.
struct GaussianNllLossConfig {
  bool full = false;
  double eps = 1e-6;
  std::string reduction = "mean";
  EMBER_CONFIG(GaussianNllLossConfig, full, eps, reduction)
  GaussianNllLoss init() const;
};
struct GaussianNllLoss {
  GaussianNllLossConfig config;
  EMBER_MODULE(GaussianNllLoss, config)
  template <std::size_t D, std::size_t DV>
  Tensor<1> forward(const Tensor<D>& input, const Tensor<D>& target, const Tensor<DV>& var) const {
    return loss::gaussian_nll(input, target, var, config.full, config.eps,
                              detail::reduction_of(config.reduction, "nn::GaussianNllLoss"));
  }
};

struct PoissonNllLossConfig {
  bool log_input = true;
  bool full = false;
  double eps = 1e-8;
  std::string reduction = "mean";
  EMBER_CONFIG(PoissonNllLossConfig, log_input, full, eps, reduction)
  PoissonNllLoss init() const;
};
struct PoissonNllLoss {
  PoissonNllLossConfig config;
  EMBER_MODULE(PoissonNllLoss, config)
  template <std::size_t D>
  Tensor<1> forward(const Tensor<D>& input, const Tensor<D>& target) const {
    return loss::poisson_nll(input, target, config.log_input, config.full, config.eps,
                             detail::reduction_of(config.reduction, "nn::PoissonNllLoss"));
  }
};

// y holds 1 or -1.
struct MarginRankingLossConfig {
  double margin = 0.0;
  std::string reduction = "mean";
  EMBER_CONFIG(MarginRankingLossConfig, margin, reduction)
  MarginRankingLoss init() const;
};
struct MarginRankingLoss {
  MarginRankingLossConfig config;
  EMBER_MODULE(MarginRankingLoss, config)
  template <class K>
  Tensor<1> forward(const Tensor<1>& x1, const Tensor<1>& x2, const Tensor<1, K>& y) const {
    return loss::margin_ranking(x1, x2, y, config.margin,
                                detail::reduction_of(config.reduction, "nn::MarginRankingLoss"));
  }
};

struct TripletMarginLossConfig {
  double margin = 1.0;
  double p = 2.0;
  double eps = 1e-6;
  bool swap = false;
  std::string reduction = "mean";
  EMBER_CONFIG(TripletMarginLossConfig, margin, p, eps, swap, reduction)
  TripletMarginLoss init() const;
};
struct TripletMarginLoss {
  TripletMarginLossConfig config;
  EMBER_MODULE(TripletMarginLoss, config)
  Tensor<1> forward(const Tensor<2>& anchor, const Tensor<2>& positive,
                    const Tensor<2>& negative) const {
    return loss::triplet_margin(anchor, positive, negative, config.margin, config.p, config.eps,
                                config.swap,
                                detail::reduction_of(config.reduction, "nn::TripletMarginLoss"));
  }
};

// p is 1 or 2; weight per class (empty: none).
struct MultiMarginLossConfig {
  int p = 1;
  double margin = 1.0;
  std::vector<double> weight = {};
  std::string reduction = "mean";
  EMBER_CONFIG(MultiMarginLossConfig, p, margin, weight, reduction)
  MultiMarginLoss init() const;
};
struct MultiMarginLoss {
  MultiMarginLossConfig config;
  EMBER_MODULE(MultiMarginLoss, config)
  Tensor<1> forward(const Tensor<2>& x, const Tensor<1, Int>& labels) const {
    return loss::multi_margin(x, labels, config.p, config.margin,
                              detail::weights_like(config.weight, x.dyn()),
                              detail::reduction_of(config.reduction, "nn::MultiMarginLoss"));
  }
};

}  // namespace ember::nn
