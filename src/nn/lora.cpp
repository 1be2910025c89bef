// LoRA adapters (lora.hpp): the adapter's update, its initialisation and its merge.
#include "ember/nn/lora.hpp"

#include <cmath>

#include "ember/base/config.hpp"
#include "ember/nn/init.hpp"

#if EMBER_HAS_EXCEPTIONS
#include <regex>
#endif

namespace ember::nn {

PathFilter path_regex(const std::string& pattern) {
#if !EMBER_HAS_EXCEPTIONS
  // std::regex reports a bad pattern only by throwing.
  fail("nn::path_regex(\"" + pattern +
       "\"): not part of an embedded build (std::regex needs exceptions); select the layers "
       "with a PathFilter function instead");
#else
  std::regex re;
  try {
    re = std::regex(pattern, std::regex::ECMAScript);
  } catch (const std::regex_error& e) {
    fail("nn::path_regex: \"" + pattern + "\" is not a regular expression: " + e.what());
  }
  return [re](std::string_view path) { return std::regex_match(path.begin(), path.end(), re); };
#endif
}

namespace detail {

DynTensor lora_delta(const DynTensor& x, const LoraAdapter& lora) {
  // (x a^T) b^T: two thin products, never the full [d_output, d_input] update.
  DynTensor h = linear(x, lora.a.val().dyn(), std::nullopt, "nn::Linear (LoRA a)");
  DynTensor y = linear(h, lora.b.val().dyn(), std::nullopt, "nn::Linear (LoRA b)");
  return ops::binary_scalar(ir::BinaryFn::Mul, std::move(y), lora.scaling);
}

void add_lora(Linear& l, std::size_t rank, double alpha, std::string_view path) {
  const std::string where = "nn::apply_lora ('" + std::string(path) + "')";
  EMBER_CHECK(rank > 0, where + ": rank must be > 0");
  EMBER_CHECK(std::isfinite(alpha) && alpha > 0,
              where + ": alpha must be positive, got " + std::to_string(alpha));
  EMBER_CHECK(!l.lora, where + ": the layer already has an adapter");
  const std::size_t in = l.d_input(), out = l.d_output();
  const Device dev = l.weight.val().device();
  const DType dt = l.weight.val().dtype();
  const Device base = dev.is_autodiff() ? dev.inner() : dev;
  DynTensor a =
      Initializer::kaiming_uniform(std::sqrt(5.0)).init(Shape{rank, in}, base, Fans{in, rank}, dt);
  DynTensor b = ops::zeros(Shape{out, rank}, dt, base);
  if (dev.is_autodiff()) {
    a = ops::to_device(std::move(a), dev);
    b = ops::to_device(std::move(b), dev);
  }
  l.lora = LoraAdapter{Param<Tensor<2>>(Tensor<2>(std::move(a))),
                       Param<Tensor<2>>(Tensor<2>(std::move(b))), alpha / double(rank)};
}

void merge_lora(Linear& l) {
  const LoraAdapter& lo = *l.lora;
  DynTensor w = ops::detach(l.weight.val().dyn());
  DynTensor update = ops::binary_scalar(
      ir::BinaryFn::Mul, ops::matmul(ops::detach(lo.b.val().dyn()), ops::detach(lo.a.val().dyn())),
      lo.scaling);
  l.weight = l.weight.with_value(Tensor<2>(ops::binary(ir::BinaryFn::Add, std::move(w), update)));
  l.lora.reset();
}

}  // namespace detail

}  // namespace ember::nn
