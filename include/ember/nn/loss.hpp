// Losses, as torch.nn.functional's, in ember::nn::loss. Every loss returns a Tensor<1>:
// one element for Reduction::Mean and Sum, the per-sample (or per-element, flattened)
// losses for Reduction::None. Labels must be on the logits' device; a label outside
// [0, classes) that is not the ignore index is an ember::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

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

namespace detail {
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

}  // namespace ember::nn::loss
