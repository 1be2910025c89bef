// Recurrent layers with batch_first=True, as torch.nn.LSTM, GRU and RNN: input
// [batch, seq, d_input]; several layers and both directions; PyTorch's parameter names
// (weight_ih_l0 [gates * hidden, in], weight_hh_l0 [gates * hidden, hidden], bias_ih_l0,
// bias_hh_l0, "_reverse" for the backward direction) and gate orders (LSTM: input, forget,
// cell, output; GRU: reset, update, new).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ember/nn/config.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

// The tensors of one layer and direction.
struct RecurrentWeights {
  Param<Tensor<2>> weight_ih;               // [gates * hidden, in]
  Param<Tensor<2>> weight_hh;               // [gates * hidden, hidden]
  std::optional<Param<Tensor<1>>> bias_ih;  // [gates * hidden]
  std::optional<Param<Tensor<1>>> bias_hh;  // [gates * hidden]
};
using LstmWeights = RecurrentWeights;

// The layers and directions of a recurrent layer, visited under PyTorch's names.
struct RecurrentStack {
  std::vector<RecurrentWeights> weights;  // layer-major: [layer * directions + direction]
  std::size_t d_input = 0, d_hidden = 0, num_layers = 1;
  bool bidirectional = false;
  std::size_t directions() const { return bidirectional ? 2 : 1; }
  void visit(const std::string& path, const VisitFn& f) const;
  void map(const std::string& path, const MapFn& f);
  void summarize(const std::string& path, SummaryBuilder& b, std::string_view type) const;
};

// hidden and cell: [num_layers * directions, batch, d_hidden], as PyTorch's (h_n, c_n).
struct LstmState {
  Tensor<3> hidden;
  Tensor<3> cell;
};
// output: [batch, seq, directions * d_hidden], the last layer's hidden state at every step.
struct LstmOutput {
  Tensor<3> output;
  LstmState state;
};
// Gru and Rnn: the outputs and the final hidden state [num_layers * directions, batch, hidden].
struct RecurrentOutput {
  Tensor<3> output;
  Tensor<3> hidden;
};

#define EMBER_NN_RECURRENT_HOOKS(Type)                                                        \
  RecurrentStack stack;                                                                       \
  std::size_t d_hidden() const { return stack.d_hidden; }                                     \
  void ember_visit(const std::string& path, const VisitFn& f) const { stack.visit(path, f); } \
  void ember_map(const std::string& path, const MapFn& f) { stack.map(path, f); }             \
  void ember_summarize(const std::string& path, SummaryBuilder& b) const {                    \
    stack.summarize(path, b, #Type);                                                          \
  }                                                                                           \
  EMBER_MODULE_API(Type)

struct Lstm {
  EMBER_NN_RECURRENT_HOOKS(Lstm)
  // auto [out, state] = lstm.forward(x); the initial state is zeros unless given.
  LstmOutput forward(const Tensor<3>& x,
                     const std::optional<LstmState>& state = std::nullopt) const;
};

// h' = (1 - z) n + z h with r, z = sigmoid(...), n = tanh(W_in x + b_in + r (W_hn h + b_hn)).
struct Gru {
  EMBER_NN_RECURRENT_HOOKS(Gru)
  // auto [out, hidden] = gru.forward(x[, h0]).
  RecurrentOutput forward(const Tensor<3>& x,
                          const std::optional<Tensor<3>>& hidden = std::nullopt) const;
};

// h' = tanh(W_ih x + b_ih + W_hh h + b_hh), or relu.
struct Rnn {
  EMBER_NN_RECURRENT_HOOKS(Rnn)
  bool relu = false;
  RecurrentOutput forward(const Tensor<3>& x,
                          const std::optional<Tensor<3>>& hidden = std::nullopt) const;
};
#undef EMBER_NN_RECURRENT_HOOKS

// Every tensor U(-1/sqrt(d_hidden), 1/sqrt(d_hidden)), as PyTorch.
struct LstmConfig {
  std::size_t d_input;
  std::size_t d_hidden;
  bool bias = true;
  std::size_t num_layers = 1;
  bool bidirectional = false;
  EMBER_CONFIG(LstmConfig, d_input, d_hidden, bias, num_layers, bidirectional)
  Lstm init(const Device& device) const;
};
struct GruConfig {
  std::size_t d_input;
  std::size_t d_hidden;
  bool bias = true;
  std::size_t num_layers = 1;
  bool bidirectional = false;
  EMBER_CONFIG(GruConfig, d_input, d_hidden, bias, num_layers, bidirectional)
  Gru init(const Device& device) const;
};
struct RnnConfig {
  std::size_t d_input;
  std::size_t d_hidden;
  bool bias = true;
  std::size_t num_layers = 1;
  bool bidirectional = false;
  std::string nonlinearity = "tanh";  // or "relu"
  EMBER_CONFIG(RnnConfig, d_input, d_hidden, bias, num_layers, bidirectional, nonlinearity)
  Rnn init(const Device& device) const;
};

}  // namespace ember::nn
