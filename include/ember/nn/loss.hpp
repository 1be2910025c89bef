// Losses, as torch.nn.functional's, in ember::nn::loss. Every loss returns a Tensor<1>:
// one element for Reduction::Mean and Sum, the per-sample (or per-element, flattened)
// losses for Reduction::None. Labels must be on the logits' device; a label outside
// [0, classes) that is not the ignore index is an ember::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "ember/tensor/tensor.hpp"

namespace ember::nn::loss {

// BatchMean (kl_div's "batchmean"): the sum divided by the first dim's extent.
enum class Reduction : std::uint8_t { Mean, Sum, None, BatchMean };

struct CrossEntropyOptions {
  std::optional<Tensor<1>> weight;  // per class [C]
  double label_smoothing = 0.0;
  std::int64_t ignore_index = -100;  // PyTorch's default
  Reduction reduction = Reduction::Mean;
};
struct NllOptions {
  std::optional<Tensor<1>> weight;  // per class [C]
  std::int64_t ignore_index = -100;
  Reduction reduction = Reduction::Mean;
};

struct CtcOptions {
  std::size_t blank = 0;
  Reduction reduction = Reduction::Mean;  // Mean: each loss over its target length, averaged
  bool zero_infinity = false;             // an impossible alignment costs 0 (and no gradient)
};

namespace detail {
DynTensor ctc(const DynTensor& log_probs, const DynTensor& targets,
              const std::vector<std::size_t>& input_lengths,
              const std::vector<std::size_t>& target_lengths, const CtcOptions& o);
DynTensor cross_entropy(const DynTensor& logits, const DynTensor& labels,
                        const CrossEntropyOptions& o);
DynTensor cross_entropy_probs(const DynTensor& logits, const DynTensor& target,
                              const CrossEntropyOptions& o);
DynTensor nll(const DynTensor& log_probs, const DynTensor& labels, const NllOptions& o);
DynTensor binary_cross_entropy(const DynTensor& probs, const DynTensor& target,
                               const std::optional<DynTensor>& weight, Reduction r);
DynTensor binary_cross_entropy_with_logits(const DynTensor& logits, const DynTensor& target,
                                           const std::optional<DynTensor>& weight,
                                           const std::optional<DynTensor>& pos_weight, Reduction r);
DynTensor mse(const DynTensor& a, const DynTensor& b, Reduction r);
DynTensor l1(const DynTensor& a, const DynTensor& b, Reduction r);
DynTensor huber(const DynTensor& a, const DynTensor& b, double delta, Reduction r);
DynTensor smooth_l1(const DynTensor& a, const DynTensor& b, double beta, Reduction r);
DynTensor kl_div(const DynTensor& input, const DynTensor& target, bool log_target, Reduction r);
DynTensor cosine_embedding(const DynTensor& x1, const DynTensor& x2, const DynTensor& y,
                           double margin, Reduction r);
DynTensor gaussian_nll(const DynTensor& input, const DynTensor& target, const DynTensor& var,
                       bool full, double eps, Reduction r);
DynTensor poisson_nll(const DynTensor& input, const DynTensor& target, bool log_input, bool full,
                      double eps, Reduction r);
DynTensor margin_ranking(const DynTensor& x1, const DynTensor& x2, const DynTensor& y,
                         double margin, Reduction r);
DynTensor triplet_margin(const DynTensor& anchor, const DynTensor& positive,
                         const DynTensor& negative, double margin, double p, double eps, bool swap,
                         Reduction r);
DynTensor hinge_embedding(const DynTensor& x, const DynTensor& y, double margin, Reduction r);
DynTensor multi_margin(const DynTensor& x, const DynTensor& labels, int p, double margin,
                       const std::optional<DynTensor>& weight, Reduction r);
DynTensor soft_margin(const DynTensor& x, const DynTensor& y, Reduction r);
inline std::optional<DynTensor> dyn_of(const auto& t) {
  if (!t) return std::nullopt;
  return t->dyn();
}
}  // namespace detail

// logits [N, C], labels Int [N]: -log softmax(logits)[label], with class weights (the mean
// divides by the summed weights of the counted samples), label smoothing and an ignore
// index, as torch.nn.functional.cross_entropy.
inline Tensor<1> cross_entropy(const Tensor<2>& logits, const Tensor<1, Int>& labels,
                               const CrossEntropyOptions& o = {}) {
  return Tensor<1>(detail::cross_entropy(logits.dyn(), labels.dyn(), o));
}
// Class probabilities as targets [N, C] (ignore_index does not apply).
inline Tensor<1> cross_entropy(const Tensor<2>& logits, const Tensor<2>& target_probs,
                               const CrossEntropyOptions& o = {}) {
  return Tensor<1>(detail::cross_entropy_probs(logits.dyn(), target_probs.dyn(), o));
}
// log_probs [N, C], labels Int [N], as torch.nn.functional.nll_loss.
inline Tensor<1> nll(const Tensor<2>& log_probs, const Tensor<1, Int>& labels,
                     const NllOptions& o = {}) {
  return Tensor<1>(detail::nll(log_probs.dyn(), labels.dyn(), o));
}
// probs in [0, 1]; logs clamped at -100, as PyTorch. weight broadcasts to the input.
template <std::size_t D>
Tensor<1> binary_cross_entropy(const Tensor<D>& probs, const Tensor<D>& target,
                               Reduction r = Reduction::Mean,
                               const std::optional<Tensor<D>>& weight = std::nullopt) {
  return Tensor<1>(
      detail::binary_cross_entropy(probs.dyn(), target.dyn(), detail::dyn_of(weight), r));
}
// pos_weight [C] broadcasts over the last dim.
template <std::size_t D>
Tensor<1> binary_cross_entropy_with_logits(
    const Tensor<D>& logits, const Tensor<D>& target, Reduction r = Reduction::Mean,
    const std::optional<Tensor<D>>& weight = std::nullopt,
    const std::optional<Tensor<1>>& pos_weight = std::nullopt) {
  return Tensor<1>(detail::binary_cross_entropy_with_logits(
      logits.dyn(), target.dyn(), detail::dyn_of(weight), detail::dyn_of(pos_weight), r));
}
template <std::size_t D>
Tensor<1> mse(const Tensor<D>& input, const Tensor<D>& target, Reduction r = Reduction::Mean) {
  return Tensor<1>(detail::mse(input.dyn(), target.dyn(), r));
}
template <std::size_t D>
Tensor<1> l1(const Tensor<D>& input, const Tensor<D>& target, Reduction r = Reduction::Mean) {
  return Tensor<1>(detail::l1(input.dyn(), target.dyn(), r));
}
// 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta).
template <std::size_t D>
Tensor<1> huber(const Tensor<D>& input, const Tensor<D>& target, double delta = 1.0,
                Reduction r = Reduction::Mean) {
  return Tensor<1>(detail::huber(input.dyn(), target.dyn(), delta, r));
}
// 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta.
template <std::size_t D>
Tensor<1> smooth_l1(const Tensor<D>& input, const Tensor<D>& target, double beta = 1.0,
                    Reduction r = Reduction::Mean) {
  return Tensor<1>(detail::smooth_l1(input.dyn(), target.dyn(), beta, r));
}
// input: log-probabilities; target: probabilities (or log-probabilities with log_target).
// target (log target - input), 0 where target = 0; Mean averages every element, as PyTorch
// (use BatchMean for the true KL divergence per sample).
template <std::size_t D>
Tensor<1> kl_div(const Tensor<D>& input, const Tensor<D>& target, Reduction r = Reduction::Mean,
                 bool log_target = false) {
  return Tensor<1>(detail::kl_div(input.dyn(), target.dyn(), log_target, r));
}

// y = 1: 1 - cos(x1, x2); y = -1: max(0, cos - margin); cos over dim 1 of [N, d] (or the
// one dim of [d]) with PyTorch's 1e-12 added to each squared norm. y holds 1 or -1 (any kind).
template <std::size_t D, class K>
Tensor<1> cosine_embedding(const Tensor<D>& x1, const Tensor<D>& x2, const Tensor<D - 1, K>& y,
                           double margin = 0.0, Reduction r = Reduction::Mean) {
  return Tensor<1>(detail::cosine_embedding(x1.dyn(), x2.dyn(), y.dyn(), margin, r));
}
// 0.5 (log max(var, eps) + (input - target)^2 / max(var, eps)) [+ 0.5 log 2 pi when full];
// var broadcasts against input (the clamp passes gradients through, as PyTorch's).
template <std::size_t D, std::size_t DV>
Tensor<1> gaussian_nll(const Tensor<D>& input, const Tensor<D>& target, const Tensor<DV>& var,
                       bool full = false, double eps = 1e-6, Reduction r = Reduction::Mean) {
  return Tensor<1>(detail::gaussian_nll(input.dyn(), target.dyn(), var.dyn(), full, eps, r));
}
// log_input: exp(input) - target input; else input - target log(input + eps); full adds
// Stirling's term target log target - target + 0.5 log(2 pi target) where target > 1.
template <std::size_t D>
Tensor<1> poisson_nll(const Tensor<D>& input, const Tensor<D>& target, bool log_input = true,
                      bool full = false, double eps = 1e-8, Reduction r = Reduction::Mean) {
  return Tensor<1>(detail::poisson_nll(input.dyn(), target.dyn(), log_input, full, eps, r));
}
// max(0, -y (x1 - x2) + margin), y holding 1 or -1.
template <class K>
Tensor<1> margin_ranking(const Tensor<1>& x1, const Tensor<1>& x2, const Tensor<1, K>& y,
                         double margin = 0.0, Reduction r = Reduction::Mean) {
  return Tensor<1>(detail::margin_ranking(x1.dyn(), x2.dyn(), y.dyn(), margin, r));
}
// max(d(a, p) - d(a, n) + margin, 0) with d the pairwise p-norm distance (eps added to the
// difference); swap uses min(d(a, n), d(p, n)). anchor, positive, negative [N, d].
inline Tensor<1> triplet_margin(const Tensor<2>& anchor, const Tensor<2>& positive,
                                const Tensor<2>& negative, double margin = 1.0, double p = 2.0,
                                double eps = 1e-6, bool swap = false,
                                Reduction r = Reduction::Mean) {
  return Tensor<1>(detail::triplet_margin(anchor.dyn(), positive.dyn(), negative.dyn(), margin, p,
                                          eps, swap, r));
}
// y = 1: x; y = -1: max(0, margin - x).
template <std::size_t D, class K>
Tensor<1> hinge_embedding(const Tensor<D>& x, const Tensor<D, K>& y, double margin = 1.0,
                          Reduction r = Reduction::Mean) {
  return Tensor<1>(detail::hinge_embedding(x.dyn(), y.dyn(), margin, r));
}
// x [N, C], labels Int [N]: sum over i != y of w[y] max(0, margin - x[y] + x[i])^p / C, p 1
// or 2, as torch.nn.functional.multi_margin_loss.
inline Tensor<1> multi_margin(const Tensor<2>& x, const Tensor<1, Int>& labels, int p = 1,
                              double margin = 1.0, const std::optional<Tensor<1>>& weight = {},
                              Reduction r = Reduction::Mean) {
  return Tensor<1>(
      detail::multi_margin(x.dyn(), labels.dyn(), p, margin, detail::dyn_of(weight), r));
}
// Connectionist temporal classification, as torch.nn.functional.ctc_loss: log_probs
// [T, N, C] (log-softmax over the classes), targets Int [N, S] (row n's first
// target_lengths[n] entries count; labels in [0, C) and not the blank), input_lengths[n] in
// [1, T]. An alignment the input is too short for costs infinity (0 with zero_infinity).
inline Tensor<1> ctc(const Tensor<3>& log_probs, const Tensor<2, Int>& targets,
                     const std::vector<std::size_t>& input_lengths,
                     const std::vector<std::size_t>& target_lengths, const CtcOptions& o = {}) {
  return Tensor<1>(detail::ctc(log_probs.dyn(), targets.dyn(), input_lengths, target_lengths, o));
}
// log(1 + exp(-y x)), y holding 1 or -1.
template <std::size_t D, class K>
Tensor<1> soft_margin(const Tensor<D>& x, const Tensor<D, K>& y, Reduction r = Reduction::Mean) {
  return Tensor<1>(detail::soft_margin(x.dyn(), y.dyn(), r));
}

}  // namespace ember::nn::loss
