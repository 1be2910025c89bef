// The values of the committed .ember fixtures (tests/record/fixtures/v<N>/): element k of
// the file's tensor number t. The generator (make_ember_fixtures.cpp) writes them and the
// fixture test recomputes them, so a reader that decodes a fixture wrongly fails.
#pragma once

#include <cstddef>

#include <ember/ember.hpp>

namespace ember::record_fixtures {

inline double value(DType dtype, std::size_t t, std::size_t k) {
  switch (kind_of(dtype)) {
    case Kind::Float:
      return static_cast<double>(k % 7) * 0.5 - 1.5 + static_cast<double>(t);
    case Kind::Int:
      return dtype == DType::U8 ? static_cast<double>(k % 11 + t)
                                : static_cast<double>(k % 11) - 5.0 + static_cast<double>(t);
    case Kind::Bool:
      return (k + t) % 3 == 0 ? 1.0 : 0.0;
  }
  return 0;
}

// A tensor of shape s and dtype d holding value(d, t, k) at flat index k.
inline TensorData tensor(DType d, const Shape& s, std::size_t t) {
  std::vector<double> v(s.num_elements());
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = value(d, t, k);
  return TensorData::from<double>(v, s).convert(d);
}

// The model of fixtures/v*/model.ember.
struct Stats {
  nn::Buffer<Tensor<1>> running_mean;
  nn::Buffer<Tensor<1, Int>> num_batches_tracked;  // a scalar in files
  EMBER_MODULE(Stats, running_mean, num_batches_tracked)
};
struct FixtureNet {
  nn::Linear fc;  // 3 -> 2
  nn::Param<Tensor<1>> scale;
  Stats stats;
  EMBER_MODULE(FixtureNet, fc, scale, stats)
};

inline FixtureNet fixture_net(const Device& d, bool with_values) {
  auto f = [&](DType dt, const Shape& s, std::size_t t) {
    return with_values ? tensor(dt, s, t)
                       : TensorData::from<double>(std::vector<double>(s.num_elements(), 0.0), s)
                             .convert(dt);
  };
  return FixtureNet{
      nn::Linear{nn::Param<Tensor<2>>(Tensor<2>::from_data(f(DType::F32, {2, 3}, 0), d)),
                 nn::Param<Tensor<1>>(Tensor<1>::from_data(f(DType::F32, {2}, 1), d))},
      nn::Param<Tensor<1>>(Tensor<1>::from_data(f(DType::F32, {4}, 2), d)),
      Stats{nn::Buffer<Tensor<1>>(Tensor<1>::from_data(f(DType::F32, {4}, 3), d)),
            nn::Buffer<Tensor<1, Int>>(Tensor<1, Int>::from_data(f(DType::I64, {1}, 4), d),
                                       /*scalar=*/true)}};
}

// The tensors of fixtures/v*/dtypes.ember: one of every dtype, an empty one, a rank-4 one.
inline std::vector<std::pair<std::string, TensorData>> dtype_tensors() {
  const DType all[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                       DType::I32, DType::I16, DType::I8,  DType::U8,   DType::Bool};
  std::vector<std::pair<std::string, TensorData>> out;
  std::size_t t = 0;
  for (DType d : all) {
    out.emplace_back(std::string("t.") + name(d), tensor(d, {3, 5}, t++));
  }
  out.emplace_back("empty", tensor(DType::F32, {0, 3}, t++));
  out.emplace_back("rank4", tensor(DType::F32, {2, 1, 3, 2}, t++));
  return out;
}

}  // namespace ember::record_fixtures
