// LoRA (Hu et al. 2021): low-rank adapters on a model's Linear layers, as PEFT's
// get_peft_model with a LoraConfig over target modules, and their merge back into the
// weights.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

#include "ember/nn/linear.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

// Which Linear layers get an adapter: their path ("blocks.0.attn.q") in the model.
using PathFilter = std::function<bool(std::string_view path)>;
// Paths that fully match the ECMAScript regular expression ("blocks\\.[0-9]+\\.q").
PathFilter path_regex(const std::string& pattern);

namespace detail {
// Gives l an adapter of `rank`: a drawn as PyTorch's Linear weight (kaiming_uniform with
// a = sqrt(5)), b zeros (so the model's outputs are unchanged), scaling alpha / rank.
void add_lora(Linear& l, std::size_t rank, double alpha, std::string_view path);
// l's weight plus scaling b a, and l without its adapter.
void merge_lora(Linear& l);
}  // namespace detail

// m with an adapter on every Linear whose path the filter accepts (every Linear when none
// is given), and — as PEFT — every other parameter frozen, so only the adapters train. A
// filter that selects no layer, a rank of 0 or a non-positive alpha is an ember::Error.
// Linear layers inside an nn::Sequential are not reached.
template <Module M>
[[nodiscard]] M apply_lora(M m, std::size_t rank, double alpha, const PathFilter& filter = {}) {
  m = freeze(std::move(m));
  std::size_t n = 0;
  m = map_modules<Linear>(std::move(m), [&](std::string_view path, Linear& l) {
    if (filter && !filter(path)) return;
    detail::add_lora(l, rank, alpha, path);
    ++n;
  });
  EMBER_CHECK(n > 0, "nn::apply_lora: the path filter selects no Linear layer of the model");
  return m;
}

// m with every adapter folded into its Linear's weight (w + scaling b a) and removed:
// the same outputs with no extra cost per forward. Trainability is left as it is.
template <Module M>
[[nodiscard]] M merge_lora(M m) {
  return map_modules<Linear>(std::move(m), [](std::string_view, Linear& l) {
    if (l.lora) detail::merge_lora(l);
  });
}

}  // namespace ember::nn
