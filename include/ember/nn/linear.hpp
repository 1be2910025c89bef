// Linear, Identity: y = x W^T + b over the last dim, as torch.nn.Linear.
#pragma once

#include <cmath>
#include <cstddef>
#include <optional>

#include "ember/nn/config.hpp"
#include "ember/nn/init.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

namespace detail {
// x [..., in] -> [..., out] with weight [out, in] and bias [out]; `layer` names the caller.
DynTensor linear(const DynTensor& x, const DynTensor& weight, const std::optional<DynTensor>& bias,
                 const char* layer);
inline std::optional<DynTensor> dyn_of(const std::optional<Param<Tensor<1>>>& p) {
  if (!p) return std::nullopt;
  return p->val().dyn();
}
}  // namespace detail

// A low-rank update of a Linear (LoRA, Hu et al. 2021): y += scaling * (x a^T) b^T, with
// a [rank, d_input] and b [d_output, rank]; nn::apply_lora adds one (nn/lora.hpp).
struct LoraAdapter {
  Param<Tensor<2>> a;    // [rank, d_input]
  Param<Tensor<2>> b;    // [d_output, rank]
  double scaling = 1.0;  // alpha / rank
  EMBER_MODULE(LoraAdapter, a, b)
  std::size_t rank() const { return a.shape()[0]; }
};

namespace detail {
DynTensor lora_delta(const DynTensor& x, const LoraAdapter& lora);
}

struct Linear {
  Param<Tensor<2>> weight;                         // [d_output, d_input]
  std::optional<Param<Tensor<1>>> bias;            // [d_output]
  std::optional<LoraAdapter> lora = std::nullopt;  // paths lora.a, lora.b when present
  EMBER_MODULE(Linear, weight, bias, lora)

  // Any rank: x [..., d_input] -> [..., d_output].
  template <std::size_t D>
  Tensor<D> forward(const Tensor<D>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<D> {
      DynTensor y = detail::linear(x.dyn(), weight.val().dyn(), detail::dyn_of(bias), "nn::Linear");
      if (lora)
        y = ops::binary(ir::BinaryFn::Add, std::move(y), detail::lora_delta(x.dyn(), *lora));
      return Tensor<D>(std::move(y));
    });
  }
  std::size_t d_input() const { return weight.shape()[1]; }
  std::size_t d_output() const { return weight.shape()[0]; }
};

struct LinearConfig {
  std::size_t d_input;
  std::size_t d_output;
  bool bias = true;
  // PyTorch's default: kaiming_uniform(a = sqrt(5)) for the weight, i.e. U(-1/sqrt(d_input),
  // 1/sqrt(d_input)); the bias draws from the same initializer with the weight's fans.
  Initializer initializer = Initializer::kaiming_uniform(std::sqrt(5.0));
  EMBER_CONFIG(LinearConfig, d_input, d_output, bias, initializer)

  Linear init(const Device& device) const;
};

// Passes its input through, as torch.nn.Identity.
struct Identity {
  template <std::size_t D, class K>
  Tensor<D, K> forward(const Tensor<D, K>& x) const {
    return x;
  }
  EMBER_MODULE(Identity)
};

}  // namespace ember::nn
