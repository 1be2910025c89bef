// Convolutions, as torch.nn.Conv1d/2d/3d and ConvTranspose1d/2d/3d: weight
// [out, in / groups, *kernel] (transposed: [in, out / groups, *kernel]) and bias [out], built
// on module_ops::conv and conv_transpose. Inputs are [N, C, *spatial].
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include "ember/nn/config.hpp"
#include "ember/nn/init.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

// A convolution's padding: explicit amounts per spatial dim (Padding{1, 1}; one value
// applies to every dim), Padding::same() (output extent = input extent; stride 1; an odd
// total puts the extra row on the far side, as PyTorch) or Padding::valid() (none).
class Padding {
 public:
  enum class Kind : std::uint8_t { Explicit, Same, Valid };
  Padding() : kind_(Kind::Valid) {}
  Padding(std::initializer_list<std::size_t> amounts) : kind_(Kind::Explicit), amounts_(amounts) {}
  explicit Padding(std::vector<std::size_t> amounts)
      : kind_(Kind::Explicit), amounts_(std::move(amounts)) {}
  static Padding same() { return Padding(Kind::Same); }
  static Padding valid() { return Padding(Kind::Valid); }

  Kind kind() const { return kind_; }
  const std::vector<std::size_t>& amounts() const { return amounts_; }
  // (before, after) per spatial dim for this kernel, dilation and stride; `layer` names
  // the caller in errors.
  std::vector<std::pair<std::size_t, std::size_t>> resolve(const std::vector<std::size_t>& kernel,
                                                           const std::vector<std::size_t>& dilation,
                                                           const std::vector<std::size_t>& stride,
                                                           const char* layer) const;
  std::string to_string() const;
  friend bool operator==(const Padding&, const Padding&) = default;

  // JSON: "same", "valid" or an array of amounts.
  Json ember_to_json() const;
  static Padding ember_from_json(const Json& j, const std::string& key);

 private:
  explicit Padding(Kind k) : kind_(k) {}
  Kind kind_;
  std::vector<std::size_t> amounts_;
};

namespace detail {
struct ConvGeometry {
  std::vector<std::size_t> stride, dilation;
  std::size_t groups;
};
DynTensor conv_forward(const DynTensor& x, const DynTensor& weight,
                       const std::optional<DynTensor>& bias, const ConvGeometry& g,
                       const Padding& padding, const char* layer);
DynTensor conv_transpose_forward(const DynTensor& x, const DynTensor& weight,
                                 const std::optional<DynTensor>& bias, const ConvGeometry& g,
                                 const std::vector<std::size_t>& padding,
                                 const std::vector<std::size_t>& output_padding, const char* layer);
// Checks a conv config and makes weight and bias with PyTorch's default fans
// (weight.shape[1] * prod(kernel)).
std::pair<DynTensor, std::optional<DynTensor>> conv_init(const Shape& weight_shape,
                                                         std::size_t bias_size, bool bias,
                                                         std::size_t groups, std::size_t c_in,
                                                         std::size_t c_out, const Initializer& init,
                                                         const Device& device, const char* layer);
// "nn::Conv2d" for errors; the summary's type name is the part after "nn::".
constexpr const char* conv_qualified_name(std::size_t n, bool transposed) {
  if (transposed)
    return n == 1 ? "nn::ConvTranspose1d" : n == 2 ? "nn::ConvTranspose2d" : "nn::ConvTranspose3d";
  return n == 1 ? "nn::Conv1d" : n == 2 ? "nn::Conv2d" : "nn::Conv3d";
}
constexpr const char* conv_name(std::size_t n, bool transposed) {
  return conv_qualified_name(n, transposed) + 4;
}
inline std::optional<DynTensor> bias_dyn(const std::optional<Param<Tensor<1>>>& b) {
  if (!b) return std::nullopt;
  return b->val().dyn();
}
}  // namespace detail

template <std::size_t N>
struct Conv {
  static_assert(N >= 1 && N <= 3, "nn::Conv: 1 to 3 spatial dims");
  Param<Tensor<N + 2>> weight;           // [out, in / groups, *kernel]
  std::optional<Param<Tensor<1>>> bias;  // [out]
  std::array<std::size_t, N> stride;
  Padding padding;
  std::array<std::size_t, N> dilation;
  std::size_t groups = 1;
  EMBER_MODULE_NAMED(Conv, detail::conv_name(N, false), weight, bias, stride, padding, dilation,
                     groups)

  // [batch, in, *spatial] -> [batch, out, *spatial_out].
  Tensor<N + 2> forward(const Tensor<N + 2>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<N + 2> {
      return Tensor<N + 2>(
          detail::conv_forward(x.dyn(), weight.val().dyn(), detail::bias_dyn(bias),
                               {detail::to_vec(stride), detail::to_vec(dilation), groups}, padding,
                               detail::conv_qualified_name(N, false)));
    });
  }
};

template <std::size_t N>
struct ConvConfig {
  std::size_t channels_in;
  std::size_t channels_out;
  std::array<std::size_t, N> kernel_size;
  std::array<std::size_t, N> stride = filled(1);
  Padding padding = Padding::valid();
  std::array<std::size_t, N> dilation = filled(1);
  std::size_t groups = 1;
  bool bias = true;
  // PyTorch's default: kaiming_uniform(a = sqrt(5)) with fan_in = in / groups * prod(kernel);
  // the bias draws from the same initializer with the weight's fans.
  Initializer initializer = Initializer::kaiming_uniform(std::sqrt(5.0));
  EMBER_CONFIG(ConvConfig, channels_in, channels_out, kernel_size, stride, padding, dilation,
               groups, bias, initializer)

  Conv<N> init(const Device& device) const {
    Shape ws{channels_out, groups == 0 ? 0 : channels_in / groups};
    for (auto k : kernel_size) ws.dims().push_back(k);
    auto [w, b] = detail::conv_init(ws, channels_out, bias, groups, channels_in, channels_out,
                                    initializer, device, detail::conv_qualified_name(N, false));
    std::optional<Param<Tensor<1>>> bp;
    if (b) bp.emplace(Tensor<1>(std::move(*b)));
    return Conv<N>{Param<Tensor<N + 2>>(Tensor<N + 2>(std::move(w))),
                   std::move(bp),
                   stride,
                   padding,
                   dilation,
                   groups};
  }
  static constexpr std::array<std::size_t, N> filled(std::size_t v) {
    std::array<std::size_t, N> a{};
    a.fill(v);
    return a;
  }
};

template <std::size_t N>
struct ConvTranspose {
  static_assert(N >= 1 && N <= 3, "nn::ConvTranspose: 1 to 3 spatial dims");
  Param<Tensor<N + 2>> weight;           // [in, out / groups, *kernel]
  std::optional<Param<Tensor<1>>> bias;  // [out]
  std::array<std::size_t, N> stride, padding, output_padding, dilation;
  std::size_t groups = 1;
  EMBER_MODULE_NAMED(ConvTranspose, detail::conv_name(N, true), weight, bias, stride, padding,
                     output_padding, dilation, groups)

  Tensor<N + 2> forward(const Tensor<N + 2>& x) const {
    return detail::at_layer(*this, [&]() -> Tensor<N + 2> {
      return Tensor<N + 2>(detail::conv_transpose_forward(
          x.dyn(), weight.val().dyn(), detail::bias_dyn(bias),
          {detail::to_vec(stride), detail::to_vec(dilation), groups}, detail::to_vec(padding),
          detail::to_vec(output_padding), detail::conv_qualified_name(N, true)));
    });
  }
};

template <std::size_t N>
struct ConvTransposeConfig {
  std::size_t channels_in;
  std::size_t channels_out;
  std::array<std::size_t, N> kernel_size;
  std::array<std::size_t, N> stride = ConvConfig<N>::filled(1);
  std::array<std::size_t, N> padding = ConvConfig<N>::filled(0);
  std::array<std::size_t, N> output_padding = ConvConfig<N>::filled(0);
  std::array<std::size_t, N> dilation = ConvConfig<N>::filled(1);
  std::size_t groups = 1;
  bool bias = true;
  // PyTorch's default: kaiming_uniform(a = sqrt(5)) with fan_in = out / groups * prod(kernel).
  Initializer initializer = Initializer::kaiming_uniform(std::sqrt(5.0));
  EMBER_CONFIG(ConvTransposeConfig, channels_in, channels_out, kernel_size, stride, padding,
               output_padding, dilation, groups, bias, initializer)

  ConvTranspose<N> init(const Device& device) const {
    Shape ws{channels_in, groups == 0 ? 0 : channels_out / groups};
    for (auto k : kernel_size) ws.dims().push_back(k);
    auto [w, b] = detail::conv_init(ws, channels_out, bias, groups, channels_in, channels_out,
                                    initializer, device, detail::conv_qualified_name(N, true));
    for (std::size_t i = 0; i < N; ++i)
      EMBER_CHECK(output_padding[i] < std::max(stride[i], dilation[i]),
                  std::string(detail::conv_qualified_name(N, true)) +
                      ": output_padding must be smaller than the stride or the dilation");
    std::optional<Param<Tensor<1>>> bp;
    if (b) bp.emplace(Tensor<1>(std::move(*b)));
    return ConvTranspose<N>{Param<Tensor<N + 2>>(Tensor<N + 2>(std::move(w))),
                            std::move(bp),
                            stride,
                            padding,
                            output_padding,
                            dilation,
                            groups};
  }
};

using Conv1d = Conv<1>;
using Conv2d = Conv<2>;
using Conv3d = Conv<3>;
using Conv1dConfig = ConvConfig<1>;
using Conv2dConfig = ConvConfig<2>;
using Conv3dConfig = ConvConfig<3>;
using ConvTranspose1d = ConvTranspose<1>;
using ConvTranspose2d = ConvTranspose<2>;
using ConvTranspose3d = ConvTranspose<3>;
using ConvTranspose1dConfig = ConvTransposeConfig<1>;
using ConvTranspose2dConfig = ConvTransposeConfig<2>;
using ConvTranspose3dConfig = ConvTransposeConfig<3>;

}  // namespace ember::nn
