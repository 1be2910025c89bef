// The benchmark workloads, ember side. Each workload is named once here with its sizes
// (tiny, for the correctness smoke test; full, sized to run 10–500 ms on a 2-core CPU; gpu,
// the sizes of the issue for one large GPU, e.g. 256 MB element-wise operands), the
// bytes and FLOPs an ideal implementation must move and compute (for the roofline), and the
// ember code it times. The PyTorch side (benches/torch_workloads.py) receives the same name
// and parameters, so sizes live in one place only. Inputs come from a counter-based hash
// (input_value) that the Python side reproduces bit for bit, so both libraries see the same
// numbers without shipping tensors between processes.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ember/ember.hpp"

namespace ember::bench {

enum class SizeKind { Tiny, Full, Gpu };
const char* name(SizeKind s);

// Integer parameters of one case (shapes, repeat counts), sent verbatim to the Python side.
using Params = std::map<std::string, std::vector<std::int64_t>>;

// One runnable instance of a workload at one size.
struct Case {
  Params params;
  std::string shape;  // for the table, e.g. "[8192, 2048]"
  double bytes = 0;   // minimal bytes read + written by an ideal (fused) implementation
  double flops = 0;   // FLOPs comparable with GEMM peak (0 for transcendental-heavy ops)
  double rtol = 1e-4, atol = 1e-5;  // tolerance of the check against PyTorch
  std::string note;                 // shown beside the row (e.g. a ceiling measured for this case)
  double stream_gbs = 0;            // a bandwidth measured for this case's own access pattern, or 0
  std::function<void()> run;        // one timed repetition; returns when done
  std::function<TensorData()> output;  // result of the last run, for checking
};

struct Workload {
  std::string name;
  std::string group;
  // Empty when available; otherwise why not (shown in the table instead of numbers).
  std::string unavailable;
  // Builds the case on a plain device (Device::cpu() or Device::cuda(i)); workloads that
  // differentiate wrap it with .autodiff() themselves.
  std::function<Case(SizeKind, const Device&)> make;
};

// Every workload, in table order, including the unavailable ones.
const std::vector<Workload>& workloads();

// The i-th input value of stream `seed`, uniform in [-1, 1) on a 2^-23 grid (exact in f32).
// The Python side implements the same hash with numpy uint32 arithmetic.
inline float input_value(std::uint32_t i, std::uint32_t seed) {
  std::uint32_t h = i * 0x9E3779B1u + seed * 0x85EBCA77u;
  h ^= h >> 15;
  h *= 0x2C1B3C6Du;
  h ^= h >> 12;
  h *= 0x297A2D39u;
  h ^= h >> 15;
  return static_cast<float>(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
}
// Row-major values input_value(0..n-1, seed) * scale; `scale` is a power of two, so the
// product is exact and the Python side gets the same numbers.
TensorData input_data(const Shape& shape, std::uint32_t seed, float scale = 1.0f);

// The power of two 2^-k closest from below to 1/sqrt(fan_in) (smallest k with
// 4^k >= fan_in): the scale of a weight initialised like PyTorch's Linear, exactly
// representable so both sides build identical weights.
inline float weight_scale(std::size_t fan_in) {
  float s = 1.0f;
  for (std::size_t p = 1; p < fan_in; p *= 4) s *= 0.5f;
  return s;
}

// How far `got` (ember) is from `want` (PyTorch): empty when every element satisfies
// |got - want| <= atol + rtol * |want| and shapes match; else a description of the worst.
std::string compare(const TensorData& got, const TensorData& want, double rtol, double atol);

}  // namespace ember::bench
