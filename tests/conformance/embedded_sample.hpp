// The conformance harness's sample for the firmware tests: trials of the cases whose run is
// one IR-level call (harness.hpp's IrCall), with their f64 references and tolerances,
// written by `test_conformance --mode embedded --out FILE` on the host and replayed on the
// device by tests/embedded/firmware_cases.cpp. Header only and free of ember, so that both
// sides read one definition of the layout.
//
// The file, little-endian throughout (x86-64 and Cortex-M both are):
//   "EMBS"  u32 version (kSampleVersion)  u32 record count
//   each record:
//     u8 kind (CallKind)  u8 fn  u8 case-name length  the case's name (no NUL)
//     f64 p0  f64 p1  f64 rtol  f64 atol
//     u8 param count  f64 params...
//     u8 input count  u8 output count
//     each tensor (inputs, then the expected outputs):
//       u8 dtype (ember::DType)  u8 rank  u32 dims...  f64 values (row-major)...
// An expected float value is the reference rounded to the output's dtype; NaN matches NaN
// and infinities must match exactly, as the harness compares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace conformance::sample {

inline constexpr std::uint32_t kSampleVersion = 1;

// The call a record replays (conformance::IrCall): ops::unary(fn, x, p0, p1),
// ops::binary(fn, a, b), ops::reduce(fn, x, params[0]) or ops::reduce_all(fn, x).
enum class CallKind : std::uint8_t { Unary, Binary, Reduce, ReduceAll };
inline constexpr char kMagic[4] = {'E', 'M', 'B', 'S'};

struct Tensor {
  std::uint8_t dtype = 0;
  std::vector<std::size_t> dims;
  std::vector<double> values;
};

struct Record {
  std::uint8_t kind = 0, fn = 0;
  std::string name;
  double p0 = 0, p1 = 0, rtol = 0, atol = 0;
  std::vector<double> params;
  std::vector<Tensor> inputs, outputs;
};

// Appends to a byte buffer in the file's layout.
class Writer {
 public:
  template <class T>
  void put(T v) {
    const auto* p = reinterpret_cast<const unsigned char*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof v);
  }
  void put(const Tensor& t) {
    put<std::uint8_t>(t.dtype);
    put<std::uint8_t>(static_cast<std::uint8_t>(t.dims.size()));
    for (std::size_t d : t.dims) put<std::uint32_t>(static_cast<std::uint32_t>(d));
    for (double v : t.values) put<double>(v);
  }
  void put(const Record& r) {
    put<std::uint8_t>(r.kind);
    put<std::uint8_t>(r.fn);
    put<std::uint8_t>(static_cast<std::uint8_t>(r.name.size()));
    bytes.insert(bytes.end(), r.name.begin(), r.name.end());
    for (double v : {r.p0, r.p1, r.rtol, r.atol}) put<double>(v);
    put<std::uint8_t>(static_cast<std::uint8_t>(r.params.size()));
    for (double v : r.params) put<double>(v);
    put<std::uint8_t>(static_cast<std::uint8_t>(r.inputs.size()));
    put<std::uint8_t>(static_cast<std::uint8_t>(r.outputs.size()));
    for (const Tensor& t : r.inputs) put(t);
    for (const Tensor& t : r.outputs) put(t);
  }
  std::vector<unsigned char> bytes;
};

// Reads records back; every read is bounds-checked, and a short or malformed file makes
// ok() false (and the reads return zeros) rather than reading past the end.
class Reader {
 public:
  Reader(const unsigned char* data, std::size_t size) : p_(data), end_(data + size) {
    char magic[4] = {};
    take(magic, 4);
    ok_ = ok_ && std::memcmp(magic, kMagic, 4) == 0 && get<std::uint32_t>() == kSampleVersion;
    count_ = get<std::uint32_t>();
  }
  bool ok() const { return ok_; }
  std::uint32_t count() const { return count_; }
  bool at_end() const { return p_ == end_; }

  bool next(Record& r) {
    r = Record{};
    r.kind = get<std::uint8_t>();
    r.fn = get<std::uint8_t>();
    const std::size_t n = get<std::uint8_t>();
    r.name.resize(n);
    take(r.name.data(), n);
    r.p0 = get<double>();
    r.p1 = get<double>();
    r.rtol = get<double>();
    r.atol = get<double>();
    r.params.resize(get<std::uint8_t>());
    for (double& v : r.params) v = get<double>();
    r.inputs.resize(get<std::uint8_t>());
    r.outputs.resize(get<std::uint8_t>());
    for (Tensor& t : r.inputs) tensor(t);
    for (Tensor& t : r.outputs) tensor(t);
    return ok_;
  }

 private:
  void take(void* out, std::size_t n) {
    if (!ok_ || static_cast<std::size_t>(end_ - p_) < n) {
      ok_ = false;
      std::memset(out, 0, n);
      return;
    }
    std::memcpy(out, p_, n);
    p_ += n;
  }
  template <class T>
  T get() {
    T v{};
    take(&v, sizeof v);
    return v;
  }
  void tensor(Tensor& t) {
    t.dtype = get<std::uint8_t>();
    t.dims.resize(get<std::uint8_t>());
    std::size_t numel = 1;
    for (std::size_t& d : t.dims) {
      d = get<std::uint32_t>();
      if (d != 0 && numel > SIZE_MAX / d) ok_ = false;
      numel = ok_ ? numel * d : 0;
    }
    // No more values than the bytes left can hold.
    if (!ok_ || numel > static_cast<std::size_t>(end_ - p_) / sizeof(double)) {
      ok_ = false;
      return;
    }
    t.values.resize(numel);
    for (double& v : t.values) v = get<double>();
  }

  const unsigned char* p_;
  const unsigned char* end_;
  bool ok_ = true;
  std::uint32_t count_ = 0;
};

}  // namespace conformance::sample
