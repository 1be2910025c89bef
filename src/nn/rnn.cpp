// Recurrent layers: one driver unrolls any stack over the sequence — every step's input
// projection in one matmul per layer and direction, then the cell's step — and Lstm, Gru
// and Rnn differ only in their step.
#include "ember/nn/rnn.hpp"

#include <cmath>
#include <functional>

#include "ember/nn/linear.hpp"
#include "ember/tensor/activation.hpp"

namespace ember::nn {

namespace {
// PyTorch's name suffix for layer l, direction dir: "_l0", "_l1_reverse".
std::string suffix(std::size_t layer, std::size_t dir) {
  return "_l" + std::to_string(layer) + (dir == 1 ? "_reverse" : "");
}

// Calls f(path, param) for each tensor in PyTorch's order; S is RecurrentStack or const.
template <class S, class F>
void for_each_tensor(S& s, const std::string& path, F&& f) {
  for (std::size_t layer = 0; layer < s.num_layers; ++layer) {
    for (std::size_t dir = 0; dir < s.directions(); ++dir) {
      auto& w = s.weights[layer * s.directions() + dir];
      const std::string sx = suffix(layer, dir), base = path.empty() ? "" : path + ".";
      f(base + "weight_ih" + sx, w.weight_ih);
      f(base + "weight_hh" + sx, w.weight_hh);
      if (w.bias_ih) f(base + "bias_ih" + sx, *w.bias_ih);
      if (w.bias_hh) f(base + "bias_hh" + sx, *w.bias_hh);
    }
  }
}

// A cell's state for one layer and direction: the hidden state, and the LSTM's cell.
struct CellState {
  Tensor<2> h;
  std::optional<Tensor<2>> c;
};
// h @ W_hh^T + b_hh, with the transposed weight and the bias's row view made once per
// layer and direction: made per step, each step's gradient of W_hh^T came back through its
// own transpose and was added into W_hh's gradient as a strided (column-gathering) add,
// which took a fifth of an LSTM step's backward. Made once, the steps' gradients add up
// contiguous in the view's gradient and go through the transpose once.
// Note [Recurrent bias in the projection]: where the cell only adds b_hh to the rest of its
// gate's sum (Lstm, Rnn: not Gru, whose b_hn sits inside the reset gate's product), b_hh
// joins b_ih in the input projection's bias — one add over all steps instead of one a step,
// and one sum of the gates' gradient over batch and steps for both biases instead of one a
// step. Each pre-activation is the same three terms summed in another order (equal up to
// rounding).
struct Recurrent {
  Tensor<2> weight_t;             // W_hh^T [hidden, gates * hidden]
  std::optional<Tensor<2>> bias;  // b_hh as [1, gates * hidden], unless in the projection
  Recurrent(const RecurrentWeights& w, bool bias_in_projection)
      : weight_t(w.weight_hh.val().transpose()) {
    if (w.bias_hh && !bias_in_projection)
      bias = w.bias_hh->val().reshape<2>(Shape{1, w.bias_hh->shape()[0]});
  }
  Tensor<2> operator()(const Tensor<2>& h) const {
    Tensor<2> r = h.matmul(weight_t);
    if (bias) r = r + *bias;
    return r;
  }
};

// One step: the step's input projection [batch, gates * hidden] (b_ih included), the
// recurrent term and the previous state -> the next state.
using Step = std::function<CellState(const Tensor<2>&, const Recurrent&, const CellState&)>;

struct StackResult {
  Tensor<3> output;
  std::vector<CellState> last;  // per layer and direction
};

void check_state(const std::optional<Tensor<3>>& s, const Shape& want, const char* layer,
                 const char* what) {
  if (s)
    EMBER_CHECK(s->shape() == want, std::string(layer) + ": the initial " + what +
                                        " state must be " + want.to_string() + ", got " +
                                        s->shape().to_string());
}

// bias_in_projection: b_hh is added with b_ih (Note [Recurrent bias in the projection]).
StackResult run_stack(const RecurrentStack& s, const Tensor<3>& x,
                      const std::optional<Tensor<3>>& h0, const std::optional<Tensor<3>>& c0,
                      bool has_cell, bool bias_in_projection, const char* layer, const Step& step) {
  const std::size_t dirs = s.directions(), h = s.d_hidden;
  EMBER_CHECK(x.shape()[2] == s.d_input,
              std::string(layer) + ": input of shape " + x.shape().to_string() +
                  " must be [batch, seq, d_input = " + std::to_string(s.d_input) + "]");
  const std::size_t batch = x.shape()[0], seq = x.shape()[1];
  EMBER_CHECK(seq > 0,
              std::string(layer) + ": the sequence is empty (input " + x.shape().to_string() + ")");
  const Shape state_shape{s.num_layers * dirs, batch, h};
  check_state(h0, state_shape, layer, "hidden");
  check_state(c0, state_shape, layer, "cell");
  const auto initial = [&](const std::optional<Tensor<3>>& t, std::size_t k) {
    if (t) return t->narrow(0, std::int64_t(k), 1).reshape<2>(Shape{batch, h});
    return Tensor<2>(ops::zeros(Shape{batch, h}, x.dtype(), x.device()));
  };
  Tensor<3> input = x;
  std::vector<CellState> last;
  for (std::size_t layer_i = 0; layer_i < s.num_layers; ++layer_i) {
    std::vector<Tensor<3>> outs;
    for (std::size_t dir = 0; dir < dirs; ++dir) {
      const std::size_t k = layer_i * dirs + dir;
      const RecurrentWeights& w = s.weights[k];
      const std::size_t g = w.weight_ih.shape()[0];
      std::optional<DynTensor> bias = detail::dyn_of(w.bias_ih);
      if (bias_in_projection && w.bias_hh) {
        const DynTensor b_hh = w.bias_hh->val().dyn();
        bias = bias ? ops::binary(ir::BinaryFn::Add, *bias, b_hh) : b_hh;
      }
      const Tensor<3> proj(detail::linear(input.dyn(), w.weight_ih.val().dyn(), bias, layer));
      CellState st{initial(h0, k), std::nullopt};
      if (has_cell) st.c = initial(c0, k);
      std::vector<Tensor<2>> steps(seq, st.h);
      const Recurrent recurrent(w, bias_in_projection);
      for (std::size_t i = 0; i < seq; ++i) {
        const std::size_t t = dir == 0 ? i : seq - 1 - i;
        st = step(proj.narrow(1, std::int64_t(t), 1).reshape<2>(Shape{batch, g}), recurrent, st);
        steps[t] = st.h;
      }
      outs.push_back(Tensor<2>::stack<3>(steps, 1));
      last.push_back(st);
    }
    input = dirs == 1 ? outs[0] : Tensor<3>::cat(outs, 2);
  }
  return {input, std::move(last)};
}

Tensor<3> stack_of(const std::vector<CellState>& last, bool cell) {
  std::vector<Tensor<2>> v;
  for (const auto& s : last) v.push_back(cell ? *s.c : s.h);
  return Tensor<2>::stack<3>(v, 0);
}

RecurrentStack make_stack(std::size_t d_input, std::size_t d_hidden, std::size_t num_layers,
                          bool bidirectional, bool bias, std::size_t gates, const Device& device,
                          const char* layer) {
  EMBER_CHECK(d_input > 0 && d_hidden > 0 && num_layers > 0,
              std::string(layer) + ": d_input, d_hidden and num_layers must be > 0");
  const double bound = 1.0 / std::sqrt(double(d_hidden));
  const auto u = [&](const Shape& s) {
    return ops::random(s, Distribution::uniform(-bound, bound), device.default_float(), device);
  };
  const std::size_t dirs = bidirectional ? 2 : 1, g = gates * d_hidden;
  RecurrentStack st{{}, d_input, d_hidden, num_layers, bidirectional};
  for (std::size_t l = 0; l < num_layers; ++l) {
    const std::size_t in = l == 0 ? d_input : d_hidden * dirs;
    for (std::size_t dir = 0; dir < dirs; ++dir) {
      RecurrentWeights w{Param<Tensor<2>>(Tensor<2>(u(Shape{g, in}))),
                         Param<Tensor<2>>(Tensor<2>(u(Shape{g, d_hidden}))), std::nullopt,
                         std::nullopt};
      if (bias) {
        w.bias_ih.emplace(Tensor<1>(u(Shape{g})));
        w.bias_hh.emplace(Tensor<1>(u(Shape{g})));
      }
      st.weights.push_back(std::move(w));
    }
  }
  return st;
}
}  // namespace

void RecurrentStack::visit(const std::string& path, const VisitFn& f) const {
  for_each_tensor(*this, path,
                  [&](const std::string& p, const auto& param) { param.ember_visit(p, f); });
}

void RecurrentStack::map(const std::string& path, const MapFn& f) {
  for_each_tensor(*this, path, [&](const std::string& p, auto& param) { param.ember_map(p, f); });
}

void RecurrentStack::summarize(const std::string& path, SummaryBuilder& b,
                               std::string_view type) const {
  b.begin_module(path, type);
  visit(path, [&](const TensorEntry& e) { b.tensor(std::string(e.path), e); });
  b.end_module();
}

LstmOutput Lstm::forward(const Tensor<3>& x, const std::optional<LstmState>& state) const {
  return detail::at_layer(*this, [&]() -> LstmOutput {
    std::optional<Tensor<3>> h0, c0;
    if (state) h0 = state->hidden, c0 = state->cell;
    const auto r =
        run_stack(stack, x, h0, c0, true, true, "nn::Lstm",
                  [](const Tensor<2>& p, const Recurrent& recurrent, const CellState& s) {
                    auto g = (p + recurrent(s.h)).chunk(4, 1);
                    Tensor<2> c = activation::sigmoid(g[1]) * *s.c +
                                  activation::sigmoid(g[0]) * activation::tanh(g[2]);
                    Tensor<2> h = activation::sigmoid(g[3]) * activation::tanh(c);
                    return CellState{h, c};
                  });
    return {r.output, {stack_of(r.last, false), stack_of(r.last, true)}};
  });
}

RecurrentOutput Gru::forward(const Tensor<3>& x, const std::optional<Tensor<3>>& hidden) const {
  return detail::at_layer(*this, [&]() -> RecurrentOutput {
    const auto r =
        run_stack(stack, x, hidden, std::nullopt, false, false, "nn::Gru",
                  [](const Tensor<2>& p, const Recurrent& recurrent, const CellState& s) {
                    auto gi = p.chunk(3, 1), gh = recurrent(s.h).chunk(3, 1);
                    const Tensor<2> reset = activation::sigmoid(gi[0] + gh[0]);
                    const Tensor<2> update = activation::sigmoid(gi[1] + gh[1]);
                    const Tensor<2> n = activation::tanh(gi[2] + reset * gh[2]);
                    return CellState{n + update * (s.h - n), std::nullopt};
                  });
    return {r.output, stack_of(r.last, false)};
  });
}

RecurrentOutput Rnn::forward(const Tensor<3>& x, const std::optional<Tensor<3>>& hidden) const {
  return detail::at_layer(*this, [&]() -> RecurrentOutput {
    const bool use_relu = relu;
    const auto r = run_stack(
        stack, x, hidden, std::nullopt, false, true, "nn::Rnn",
        [use_relu](const Tensor<2>& p, const Recurrent& recurrent, const CellState& s) {
          const Tensor<2> a = p + recurrent(s.h);
          return CellState{use_relu ? activation::relu(a) : activation::tanh(a), std::nullopt};
        });
    return {r.output, stack_of(r.last, false)};
  });
}

Lstm LstmConfig::init(const Device& device) const {
  return Lstm{
      make_stack(d_input, d_hidden, num_layers, bidirectional, bias, 4, device, "nn::LstmConfig")};
}

Gru GruConfig::init(const Device& device) const {
  return Gru{
      make_stack(d_input, d_hidden, num_layers, bidirectional, bias, 3, device, "nn::GruConfig")};
}

Rnn RnnConfig::init(const Device& device) const {
  EMBER_CHECK(
      nonlinearity == "tanh" || nonlinearity == "relu",
      "nn::RnnConfig: nonlinearity must be \"tanh\" or \"relu\", got \"" + nonlinearity + "\"");
  return Rnn{
      make_stack(d_input, d_hidden, num_layers, bidirectional, bias, 1, device, "nn::RnnConfig"),
      nonlinearity == "relu"};
}

}  // namespace ember::nn
