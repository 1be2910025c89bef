// Shared by the record tests: the model that mirrors tests/record/make_fixtures.py's Net,
// a model that partly differs from it, temporary directories and error checks.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <ember/ember.hpp>

namespace ember::record_test {

// torch: fc1 = Linear(3, 4), fc2 = Linear(4, 2), stats = {running_mean [4],
// num_batches_tracked (0-dim int64)}; forward(x) = fc2(relu(fc1(x)) + stats.running_mean).
struct Stats {
  nn::Buffer<Tensor<1>> running_mean;
  nn::Buffer<Tensor<1, Int>> num_batches_tracked;
  EMBER_MODULE(Stats, running_mean, num_batches_tracked)
};
struct Net {
  nn::Linear fc1, fc2;
  Stats stats;
  EMBER_MODULE(Net, fc1, fc2, stats)
  Tensor<2> forward(const Tensor<2>& x) const {
    return fc2.forward(activation::relu(fc1.forward(x)) +
                       stats.running_mean.val().reshape<2>({1, 4}));
  }
};
// fc1's weight has the wrong shape, fc2 and stats are absent, fc3 is extra.
struct Other {
  nn::Linear fc1, fc3;
  EMBER_MODULE(Other, fc1, fc3)
};

inline std::vector<std::string> net_keys() {
  return {"fc1.weight", "fc1.bias",           "fc2.weight",
          "fc2.bias",   "stats.running_mean", "stats.num_batches_tracked"};
}

// A tensor of shape s whose element k is scale * (0.1 k - 0.35).
inline TensorData ramp(const Shape& s, double scale) {
  std::vector<double> v(s.num_elements());
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = scale * (0.1 * double(k) - 0.35);
  return TensorData::from<double>(v, s).convert(DType::F32);
}
inline nn::Linear linear(const Shape& w, const Shape& b, double scale, const Device& d) {
  return nn::Linear{nn::Param<Tensor<2>>(Tensor<2>::from_data(ramp(w, scale), d)),
                    nn::Param<Tensor<1>>(Tensor<1>::from_data(ramp(b, -scale), d))};
}
inline Net make_net(const Device& d, double scale) {
  return Net{linear({4, 3}, {4}, scale, d), linear({2, 4}, {2}, 2 * scale, d),
             Stats{nn::Buffer<Tensor<1>>(Tensor<1>::from_data(ramp({4}, 3 * scale), d)),
                   nn::Buffer<Tensor<1, Int>>(
                       Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({7}), d),
                       /*scalar=*/true)}};
}
inline Other make_other(const Device& d) {
  return Other{linear({5, 3}, {4}, 1.0, d), linear({2, 2}, {2}, 1.0, d)};
}

template <class M>
void expect_same_tensors(const M& a, const M& b) {
  std::vector<std::pair<std::string, TensorData>> ta, tb;
  a.visit([&](const nn::TensorEntry& e) { ta.emplace_back(e.path, e.tensor.to_data()); });
  b.visit([&](const nn::TensorEntry& e) { tb.emplace_back(e.path, e.tensor.to_data()); });
  ASSERT_EQ(ta.size(), tb.size());
  for (std::size_t i = 0; i < ta.size(); ++i) {
    EXPECT_EQ(ta[i].first, tb[i].first);
    EXPECT_EQ(ta[i].second, tb[i].second) << ta[i].first;
  }
}

// A fresh directory under the system's temporary directory, removed afterwards.
struct TmpDir {
  std::filesystem::path path;
  TmpDir() {
    std::random_device rd;
    path = std::filesystem::temp_directory_path() /
           ("ember-record-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path);
  }
  ~TmpDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) out[i] = std::byte(static_cast<unsigned char>(c[i]));
  return out;
}

inline void expect_error_contains(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected an ember::Error containing: " << part;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << part;
  }
}

}  // namespace ember::record_test
