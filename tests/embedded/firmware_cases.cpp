// The conformance harness's cases on the device: the f32 trials of every case whose run is
// one IR-level call (element-wise functions, comparisons, reductions), exported on the host
// with their f64 references and tolerances by `test_conformance --mode embedded`
// (conformance/embedded_sample.hpp) and linked into flash, replayed here on the embedded
// Cpu backend and compared as the harness compares (the reference rounded to the output
// dtype, NaN equal to NaN, infinities exact). One line per case; the exit code is the
// number of failed cases.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "board.hpp"
#include "check.hpp"
#include "conformance/embedded_sample.hpp"
#include "ember/tensor/ops.hpp"

extern "C" const unsigned char ember_cases_start[];
extern "C" const unsigned char ember_cases_end[];

using namespace ember;
namespace sample = conformance::sample;

namespace {

DynTensor on_device(const sample::Tensor& t, const Device& dev) {
  std::vector<float> v(t.values.begin(), t.values.end());  // f32 inputs, exact
  return ops::from_data(TensorData::from<float>(v, Shape(t.dims)), dev);
}

// The record's call on dev; an empty result for a record this build cannot replay.
std::vector<DynTensor> replay(const sample::Record& r, const Device& dev) {
  std::vector<DynTensor> in;
  for (const sample::Tensor& t : r.inputs) in.push_back(on_device(t, dev));
  switch (static_cast<sample::CallKind>(r.kind)) {
    case sample::CallKind::Unary:
      if (r.fn >= static_cast<std::uint8_t>(ir::UnaryFn::Count_) || in.size() != 1) break;
      return {ops::unary(static_cast<ir::UnaryFn>(r.fn), std::move(in[0]), r.p0, r.p1)};
    case sample::CallKind::Binary:
      if (r.fn >= static_cast<std::uint8_t>(ir::BinaryFn::Count_) || in.size() != 2) break;
      return {ops::binary(static_cast<ir::BinaryFn>(r.fn), std::move(in[0]), std::move(in[1]))};
    case sample::CallKind::Reduce:
      if (r.fn >= static_cast<std::uint8_t>(ir::ReduceFn::Count_) || in.size() != 1 ||
          r.params.empty()) {
        break;
      }
      return {ops::reduce(static_cast<ir::ReduceFn>(r.fn), std::move(in[0]),
                          static_cast<std::int64_t>(r.params[0]))};
    case sample::CallKind::ReduceAll:
      if (r.fn >= static_cast<std::uint8_t>(ir::ReduceFn::Count_) || in.size() != 1) break;
      return {ops::reduce_all(static_cast<ir::ReduceFn>(r.fn), std::move(in[0]))};
  }
  return {};
}

// "" when got matches want, else what differs.
std::string compare(const DynTensor& got, const sample::Tensor& want, double rtol, double atol) {
  char why[200];
  const TensorData d = got.to_data();
  if (static_cast<std::uint8_t>(d.dtype()) != want.dtype || d.shape().dims() != want.dims) {
    std::snprintf(why, sizeof why, "output %s %s, expected dtype %u rank %u", name(d.dtype()),
                  d.shape().to_string().c_str(), want.dtype,
                  static_cast<unsigned>(want.dims.size()));
    return why;
  }
  const bool fl = kind_of(d.dtype()) == Kind::Float;
  const std::vector<double> v = d.to_vector<double>();
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double a = v[i], b = want.values[i];
    const bool exact = !fl || std::isnan(a) || std::isinf(a) || std::isnan(b) || std::isinf(b);
    const bool ok = exact ? ((std::isnan(a) && std::isnan(b)) || a == b)
                          : std::fabs(a - b) <= atol + rtol * std::fabs(b);
    if (!ok) {
      std::snprintf(why, sizeof why, "element %u of %s: got %.9g, expected %.9g",
                    static_cast<unsigned>(i), d.shape().to_string().c_str(), a, b);
      return why;
    }
  }
  return "";
}

}  // namespace

int main() {
  const auto size = static_cast<std::size_t>(ember_cases_end - ember_cases_start);
  sample::Reader reader(ember_cases_start, size);
  if (!reader.ok()) {
    firmware::report("sample_file", false, "not a conformance sample of this version");
    return firmware::summary();
  }
  const Device dev = Device::cpu();
  std::printf("# %u trials of the conformance harness (%u bytes in flash)\n",
              static_cast<unsigned>(reader.count()), static_cast<unsigned>(size));
  const unsigned long long t0 = board::ticks();
  std::string current, failure;
  std::size_t trials = 0;
  const auto finish = [&] {
    if (!current.empty()) firmware::report(current.c_str(), failure.empty(), failure.c_str());
    failure.clear();
  };
  sample::Record r;
  for (std::uint32_t i = 0; i < reader.count(); ++i) {
    if (!reader.next(r)) {
      firmware::report("sample_file", false, "truncated");
      break;
    }
    if (r.name != current) {
      finish();
      current = r.name;
    }
    ++trials;
    const std::vector<DynTensor> outs = replay(r, dev);
    if (outs.size() != r.outputs.size()) {
      if (failure.empty()) failure = "cannot replay this call (kind or function unknown)";
      continue;
    }
    for (std::size_t k = 0; k < outs.size() && failure.empty(); ++k) {
      failure = compare(outs[k], r.outputs[k], r.rtol, r.atol);
    }
  }
  finish();
  firmware::report("sample_complete", trials == reader.count() && reader.at_end(),
                   "the file holds more or fewer records than it says");
  std::printf("# %u trials in %llu instructions\n", static_cast<unsigned>(trials),
              board::ticks() - t0);
  return firmware::summary();
}
