// What every workload builder shares: deterministic inputs on a device, and `timed`, which
// turns a closure into a Case. Used by benches/workloads.cpp (the op workloads) and
// benches/model_workloads.cpp (attention and the training steps).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "workloads.hpp"

namespace ember::bench {

inline constexpr double kF32 = 4.0;

// A table label from its parts, e.g. label("b", 1, " m", 1024).
template <class... A>
std::string label(const A&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

inline std::vector<std::int64_t> dims(const Shape& s) { return {s.begin(), s.end()}; }

template <std::size_t D>
Tensor<D> input(const Shape& s, std::uint32_t seed, const Device& dev) {
  return Tensor<D>::from_data(input_data(s, seed), dev);
}

// Several results checked as one: `compared` is flattened and concatenated in order (the
// PyTorch side returns the same list); `kept` holds results that are part of the timed
// work (an optimizer's updated parameters) but are not compared.
struct Outputs {
  std::vector<DynTensor> compared;
  std::vector<DynTensor> kept;
};

inline TensorData to_td(const TensorData& d) { return d; }
TensorData to_td(const Outputs& o);
template <class T>
TensorData to_td(const T& t) {
  return t.to_data();
}

// A Case whose repetition evaluates f(); the previous result is dropped before the next
// one is computed, as `r = None; r = fn()` does on the PyTorch side, so both libraries can
// recycle the same buffers. Each repetition ends with dev.sync(), so the time of an
// asynchronous device (Cuda) includes the work, not only its launch.
template <class F>
Case timed(Params p, const Shape& shape, double bytes, double flops, const Device& dev, F f) {
  using R = decltype(f());
  auto out = std::make_shared<std::optional<R>>();
  Case c;
  c.params = std::move(p);
  c.shape = shape.to_string();
  c.bytes = bytes;
  c.flops = flops;
  c.run = [f, out, dev]() mutable {
    out->reset();
    out->emplace(f());
    dev.sync();
  };
  c.output = [out] { return to_td(**out); };
  return c;
}

}  // namespace ember::bench
