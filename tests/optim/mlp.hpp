// The small model of the optimizer tests: fc1 Linear(4, 6), tanh, fc2 Linear(6, 3), as in
// tests/optim/make_golden.py, built from given weights in a given dtype.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <ember/ember.hpp>

namespace ember::optim_test {

struct Mlp {
  nn::Linear fc1, fc2;
  EMBER_MODULE(Mlp, fc1, fc2)
  Tensor<2> forward(const Tensor<2>& x) const { return fc2.forward(fc1.forward(x).tanh()); }
};

inline DynTensor tensor_of(const std::vector<double>& v, const Shape& s, DType dt,
                           const Device& d) {
  return ops::cast(ops::from_data(TensorData::from<double>(v, s), d), dt);
}

// Flat values keyed by path ("fc1.weight").
using Weights = std::map<std::string, std::vector<double>>;

inline Mlp make_mlp(const Weights& w, DType dt, const Device& d) {
  auto mat = [&](const std::string& p, std::size_t r, std::size_t c) {
    return nn::Param<Tensor<2>>(Tensor<2>(tensor_of(w.at(p), Shape{r, c}, dt, d)));
  };
  auto vec = [&](const std::string& p, std::size_t n) {
    return nn::Param<Tensor<1>>(Tensor<1>(tensor_of(w.at(p), Shape{n}, dt, d)));
  };
  return Mlp{nn::Linear{mat("fc1.weight", 6, 4), vec("fc1.bias", 6)},
             nn::Linear{mat("fc2.weight", 3, 6), vec("fc2.bias", 3)}};
}

inline Weights weights_of(const Mlp& m) {
  Weights w;
  m.visit([&](const nn::TensorEntry& e) {
    w[std::string(e.path)] = ops::cast(e.tensor, DType::F64).to_data().to_vector<double>();
  });
  return w;
}

// mean((mlp(x) - t)^2) and its gradients.
inline optim::GradientsParams mse_grads(const Mlp& m, const Tensor<2>& x, const Tensor<2>& t) {
  auto loss = m.forward(x).sub(t).square().mean();
  return optim::GradientsParams::from_grads(loss.backward(), m);
}

}  // namespace ember::optim_test
