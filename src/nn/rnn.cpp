// Lstm: the recurrence, unrolled over the sequence with one matmul for every step's input
// projection and one per step for the recurrent one.
#include "ember/nn/rnn.hpp"

#include <cmath>

#include "ember/nn/linear.hpp"
#include "ember/tensor/activation.hpp"

namespace ember::nn {

namespace {
// PyTorch's name suffix for layer l, direction dir: "_l0", "_l1_reverse".
std::string suffix(std::size_t layer, std::size_t dir) {
  return "_l" + std::to_string(layer) + (dir == 1 ? "_reverse" : "");
}

// Calls f(path, param) for each tensor in PyTorch's order; L is Lstm or const Lstm.
template <class L, class F>
void for_each_tensor(L& l, const std::string& path, F&& f) {
  for (std::size_t layer = 0; layer < l.num_layers; ++layer) {
    for (std::size_t dir = 0; dir < l.directions(); ++dir) {
      auto& w = l.weights[layer * l.directions() + dir];
      const std::string s = suffix(layer, dir), base = path.empty() ? "" : path + ".";
      f(base + "weight_ih" + s, w.weight_ih);
      f(base + "weight_hh" + s, w.weight_hh);
      if (w.bias_ih) f(base + "bias_ih" + s, *w.bias_ih);
      if (w.bias_hh) f(base + "bias_hh" + s, *w.bias_hh);
    }
  }
}
}  // namespace

void Lstm::ember_visit(const std::string& path, const VisitFn& f) const {
  for_each_tensor(*this, path,
                  [&](const std::string& p, const auto& param) { param.ember_visit(p, f); });
}

void Lstm::ember_map(const std::string& path, const MapFn& f) {
  for_each_tensor(*this, path, [&](const std::string& p, auto& param) { param.ember_map(p, f); });
}

void Lstm::ember_summarize(const std::string& path, SummaryBuilder& b) const {
  b.begin_module(path, "Lstm");
  ember_visit(path, [&](const TensorEntry& e) { b.tensor(std::string(e.path), e); });
  b.end_module();
}

LstmOutput Lstm::forward(const Tensor<3>& x, const std::optional<LstmState>& state) const {
  const std::size_t dirs = directions();
  EMBER_CHECK(x.shape()[2] == d_input,
              "nn::Lstm: input of shape " + x.shape().to_string() +
                  " must be [batch, seq, d_input = " + std::to_string(d_input) + "]");
  const std::size_t batch = x.shape()[0], seq = x.shape()[1], h = d_hidden;
  EMBER_CHECK(seq > 0, "nn::Lstm: the sequence is empty (input " + x.shape().to_string() + ")");
  const Shape state_shape{num_layers * dirs, batch, h};
  if (state) {
    EMBER_CHECK(state->hidden.shape() == state_shape && state->cell.shape() == state_shape,
                "nn::Lstm: the initial state must be " + state_shape.to_string() + ", got hidden " +
                    state->hidden.shape().to_string() + " and cell " +
                    state->cell.shape().to_string());
  }
  const auto zeros = [&] { return Tensor<2>(ops::zeros(Shape{batch, h}, x.dtype(), x.device())); };
  Tensor<3> input = x;
  std::vector<Tensor<2>> h_n, c_n;
  for (std::size_t layer = 0; layer < num_layers; ++layer) {
    std::vector<Tensor<3>> outs;
    for (std::size_t dir = 0; dir < dirs; ++dir) {
      const std::size_t k = layer * dirs + dir;
      const LstmWeights& w = weights[k];
      // Every step's input projection at once: [batch, seq, 4h], both biases folded in.
      Tensor<3> proj(detail::linear(input.dyn(), w.weight_ih.val().dyn(), detail::dyn_of(w.bias_ih),
                                    "nn::Lstm"));
      if (w.bias_hh) proj = proj + w.bias_hh->val().reshape<3>(Shape{1, 1, 4 * h});
      const Tensor<2> w_hh_t = w.weight_hh.val().transpose();
      Tensor<2> hid =
          state ? state->hidden.narrow(0, std::int64_t(k), 1).reshape<2>(Shape{batch, h}) : zeros();
      Tensor<2> cell =
          state ? state->cell.narrow(0, std::int64_t(k), 1).reshape<2>(Shape{batch, h}) : zeros();
      std::vector<Tensor<2>> steps(seq, hid);
      for (std::size_t i = 0; i < seq; ++i) {
        const std::size_t t = dir == 0 ? i : seq - 1 - i;
        Tensor<2> gates =
            proj.narrow(1, std::int64_t(t), 1).reshape<2>(Shape{batch, 4 * h}) + hid.matmul(w_hh_t);
        auto g = gates.chunk(4, 1);
        cell =
            activation::sigmoid(g[1]) * cell + activation::sigmoid(g[0]) * activation::tanh(g[2]);
        hid = activation::sigmoid(g[3]) * activation::tanh(cell);
        steps[t] = hid;
      }
      outs.push_back(Tensor<2>::stack<3>(steps, 1));
      h_n.push_back(hid);
      c_n.push_back(cell);
    }
    input = dirs == 1 ? outs[0] : Tensor<3>::cat(outs, 2);
  }
  return {input, {Tensor<2>::stack<3>(h_n, 0), Tensor<2>::stack<3>(c_n, 0)}};
}

Lstm LstmConfig::init(const Device& device) const {
  EMBER_CHECK(d_input > 0 && d_hidden > 0 && num_layers > 0,
              "nn::LstmConfig: d_input, d_hidden and num_layers must be > 0");
  const double bound = 1.0 / std::sqrt(double(d_hidden));
  const auto u = [&](const Shape& s) {
    return ops::random(s, Distribution::uniform(-bound, bound), device.default_float(), device);
  };
  const std::size_t dirs = bidirectional ? 2 : 1, h4 = 4 * d_hidden;
  Lstm l{{}, d_input, d_hidden, num_layers, bidirectional};
  for (std::size_t layer = 0; layer < num_layers; ++layer) {
    const std::size_t in = layer == 0 ? d_input : d_hidden * dirs;
    for (std::size_t dir = 0; dir < dirs; ++dir) {
      LstmWeights w{Param<Tensor<2>>(Tensor<2>(u(Shape{h4, in}))),
                    Param<Tensor<2>>(Tensor<2>(u(Shape{h4, d_hidden}))), std::nullopt,
                    std::nullopt};
      if (bias) {
        w.bias_ih.emplace(Tensor<1>(u(Shape{h4})));
        w.bias_hh.emplace(Tensor<1>(u(Shape{h4})));
      }
      l.weights.push_back(std::move(w));
    }
  }
  return l;
}

}  // namespace ember::nn
