// Lstm, as torch.nn.LSTM with batch_first=True: input [batch, seq, d_input]; several layers
// and both directions; PyTorch's parameter names (weight_ih_l0 [4 hidden, in],
// weight_hh_l0 [4 hidden, hidden], bias_ih_l0, bias_hh_l0 [4 hidden], "_reverse" for the
// backward direction) and gate order (input, forget, cell, output).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "ember/nn/config.hpp"
#include "ember/nn/module.hpp"

namespace ember::nn {

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

// The tensors of one layer and direction.
struct LstmWeights {
  Param<Tensor<2>> weight_ih;               // [4 hidden, in]
  Param<Tensor<2>> weight_hh;               // [4 hidden, hidden]
  std::optional<Param<Tensor<1>>> bias_ih;  // [4 hidden]
  std::optional<Param<Tensor<1>>> bias_hh;  // [4 hidden]
};

struct Lstm {
  std::vector<LstmWeights> weights;  // layer-major: [layer * directions + direction]
  std::size_t d_input = 0, d_hidden = 0, num_layers = 1;
  bool bidirectional = false;

  // auto [out, state] = lstm.forward(x); the initial state is zeros unless given.
  LstmOutput forward(const Tensor<3>& x,
                     const std::optional<LstmState>& state = std::nullopt) const;
  std::size_t directions() const { return bidirectional ? 2 : 1; }

  // Module-system hooks: the tensors under PyTorch's names (weight_ih_l0, ...).
  void ember_visit(const std::string& path, const VisitFn& f) const;
  void ember_map(const std::string& path, const MapFn& f);
  void ember_summarize(const std::string& path, SummaryBuilder& b) const;
  EMBER_MODULE_API(Lstm)
};

struct LstmConfig {
  std::size_t d_input;
  std::size_t d_hidden;
  bool bias = true;
  std::size_t num_layers = 1;
  bool bidirectional = false;
  EMBER_CONFIG(LstmConfig, d_input, d_hidden, bias, num_layers, bidirectional)
  // Every tensor U(-1/sqrt(d_hidden), 1/sqrt(d_hidden)), as PyTorch.
  Lstm init(const Device& device) const;
};

}  // namespace ember::nn
