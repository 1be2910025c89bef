// Convolution layers: padding resolution, input checks and default init.
#include "ember/nn/conv.hpp"

#include "ember/tensor/module_ops.hpp"

namespace ember::nn {

std::vector<std::pair<std::size_t, std::size_t>> Padding::resolve(
    const std::vector<std::size_t>& kernel, const std::vector<std::size_t>& dilation,
    const std::vector<std::size_t>& stride, const char* layer) const {
  const std::size_t n = kernel.size();
  std::vector<std::pair<std::size_t, std::size_t>> out(n, {0, 0});
  switch (kind_) {
    case Kind::Valid:
      break;
    case Kind::Explicit:
      EMBER_CHECK(amounts_.size() == 1 || amounts_.size() == n, std::string(layer) + ": padding " +
                                                                    to_string() + " needs 1 or " +
                                                                    std::to_string(n) + " amounts");
      for (std::size_t i = 0; i < n; ++i) {
        const std::size_t p = amounts_.size() == 1 ? amounts_[0] : amounts_[i];
        out[i] = {p, p};
      }
      break;
    case Kind::Same:
      for (std::size_t i = 0; i < n; ++i) {
        EMBER_CHECK(stride[i] == 1,
                    std::string(layer) +
                        ": Padding::same() needs stride 1 (as PyTorch), got stride " +
                        std::to_string(stride[i]));
        const std::size_t total = dilation[i] * (kernel[i] - 1);
        out[i] = {total / 2, total - total / 2};
      }
      break;
  }
  return out;
}

std::string Padding::to_string() const {
  if (kind_ == Kind::Same) return "same";
  if (kind_ == Kind::Valid) return "valid";
  std::string s = "{";
  for (std::size_t i = 0; i < amounts_.size(); ++i)
    s += (i ? ", " : "") + std::to_string(amounts_[i]);
  return s + "}";
}

Json Padding::ember_to_json() const {
  if (kind_ == Kind::Same) return "same";
  if (kind_ == Kind::Valid) return "valid";
  return Json(amounts_);
}

Padding Padding::ember_from_json(const Json& j, const std::string& key) {
  if (j.is_string()) {
    if (j.get<std::string>() == "same") return same();
    if (j.get<std::string>() == "valid") return valid();
  }
  if (!j.is_array()) detail::bad_config_value(key, "\"same\", \"valid\" or an array of amounts", j);
  std::vector<std::size_t> v;
  detail::read_value(j, v, key);
  return Padding(std::move(v));
}

namespace detail {

namespace {
void check_input(const DynTensor& x, const DynTensor& weight, std::size_t channels,
                 const char* layer, const char* what) {
  const std::size_t n = weight.rank() - 2;
  EMBER_CHECK(x.rank() == n + 2, std::string(layer) + ": expected a rank-" + std::to_string(n + 2) +
                                     " input [batch, channels, " + std::to_string(n) +
                                     " spatial dims], got shape " + x.shape().to_string());
  EMBER_CHECK(x.shape()[1] == channels,
              std::string(layer) + ": input of shape " + x.shape().to_string() + " has " +
                  std::to_string(x.shape()[1]) + " channels, " + what + " " +
                  std::to_string(channels) + " (weight " + weight.shape().to_string() + ")");
}
}  // namespace

DynTensor conv_forward(const DynTensor& x, const DynTensor& weight,
                       const std::optional<DynTensor>& bias, const ConvGeometry& g,
                       const Padding& padding, const char* layer) {
  const std::size_t n = weight.rank() - 2;
  check_input(x, weight, weight.shape()[1] * g.groups, layer, "expected");
  std::vector<std::size_t> kernel(weight.shape().begin() + 2, weight.shape().end());
  const auto pads = padding.resolve(kernel, g.dilation, g.stride, layer);
  bool symmetric = true;
  for (const auto& [a, b] : pads) symmetric = symmetric && a == b;
  DynTensor in = x;
  std::vector<std::size_t> sym(n, 0);
  if (symmetric) {
    for (std::size_t i = 0; i < n; ++i) sym[i] = pads[i].first;
  } else {
    in = ops::pad(std::move(in), pads);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t extent = in.shape()[2 + i] + 2 * sym[i];
    const std::size_t span = g.dilation[i] * (kernel[i] - 1) + 1;
    EMBER_CHECK(span <= extent, std::string(layer) + ": the kernel " + Shape(kernel).to_string() +
                                    " (dilated span " + std::to_string(span) +
                                    ") is larger than the padded input " + x.shape().to_string());
  }
  return module_ops::conv(std::move(in), weight, bias, {g.stride, sym, g.dilation}, g.groups);
}

DynTensor conv_transpose_forward(const DynTensor& x, const DynTensor& weight,
                                 const std::optional<DynTensor>& bias, const ConvGeometry& g,
                                 const std::vector<std::size_t>& padding,
                                 const std::vector<std::size_t>& output_padding,
                                 const char* layer) {
  check_input(x, weight, weight.shape()[0], layer, "expected");
  return module_ops::conv_transpose(x, weight, bias, {g.stride, padding, g.dilation},
                                    output_padding, g.groups);
}

std::pair<DynTensor, std::optional<DynTensor>> conv_init(const Shape& weight_shape,
                                                         std::size_t bias_size, bool bias,
                                                         std::size_t groups, std::size_t c_in,
                                                         std::size_t c_out, const Initializer& init,
                                                         const Device& device, const char* layer) {
  EMBER_CHECK(c_in > 0 && c_out > 0 && groups > 0,
              std::string(layer) + ": channels and groups must be > 0 (in " + std::to_string(c_in) +
                  ", out " + std::to_string(c_out) + ", groups " + std::to_string(groups) + ")");
  EMBER_CHECK(c_in % groups == 0 && c_out % groups == 0,
              std::string(layer) + ": groups " + std::to_string(groups) +
                  " must divide the channels (in " + std::to_string(c_in) + ", out " +
                  std::to_string(c_out) + ")");
  for (std::size_t i = 2; i < weight_shape.rank(); ++i)
    EMBER_CHECK(weight_shape[i] > 0, std::string(layer) + ": kernel sizes must be > 0, weight " +
                                         weight_shape.to_string());
  const Fans fans = fans_of(weight_shape);
  DynTensor w = init.init(weight_shape, device, fans);
  std::optional<DynTensor> b;
  if (bias) b = init.init(Shape{bias_size}, device, fans);
  return {std::move(w), std::move(b)};
}

}  // namespace detail
}  // namespace ember::nn
