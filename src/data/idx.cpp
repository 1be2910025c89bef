// IDX reading and writing through zlib's gz* stream functions, which also read
// uncompressed files unchanged.
#include "ember/data/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <memory>

#include "ember/base/error.hpp"

namespace ember::data {

namespace {

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using Gz = std::unique_ptr<gzFile_s, GzCloser>;

bool dtype_of_code(std::uint8_t code, DType& out) {
  switch (code) {
    case 0x08:
      out = DType::U8;
      return true;
    case 0x09:
      out = DType::I8;
      return true;
    case 0x0B:
      out = DType::I16;
      return true;
    case 0x0C:
      out = DType::I32;
      return true;
    case 0x0D:
      out = DType::F32;
      return true;
    case 0x0E:
      out = DType::F64;
      return true;
    default:
      return false;
  }
}
std::uint8_t code_of_dtype(DType t, const std::string& path) {
  switch (t) {
    case DType::U8:
      return 0x08;
    case DType::I8:
      return 0x09;
    case DType::I16:
      return 0x0B;
    case DType::I32:
      return 0x0C;
    case DType::F32:
      return 0x0D;
    case DType::F64:
      return 0x0E;
    default:
      fail("save_idx: " + path + ": IDX has no element type for dtype " + name(t));
  }
}

// Reads exactly n bytes; false on a short read.
bool read_exact(gzFile f, void* dst, std::size_t n) {
  auto* p = static_cast<unsigned char*>(dst);
  while (n > 0) {
    const unsigned chunk = n > (1u << 30) ? (1u << 30) : static_cast<unsigned>(n);
    const int got = gzread(f, p, chunk);
    if (got <= 0) return false;
    p += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

void swap_bytes(std::byte* data, std::size_t count, std::size_t width) {
  if (width == 1) return;
  for (std::size_t i = 0; i < count; ++i) {
    std::byte* e = data + i * width;
    for (std::size_t a = 0, b = width - 1; a < b; ++a, --b) std::swap(e[a], e[b]);
  }
}

bool host_is_little_endian() {
  const std::uint16_t one = 1;
  return *reinterpret_cast<const std::uint8_t*>(&one) == 1;
}

}  // namespace

TensorData load_idx(const std::string& path) {
  Gz f(gzopen(path.c_str(), "rb"));
  EMBER_CHECK(f != nullptr, "load_idx: cannot open '" + path + "' (missing or unreadable)");
  std::array<std::uint8_t, 4> magic{};
  EMBER_CHECK(read_exact(f.get(), magic.data(), 4),
              "load_idx: '" + path + "' is truncated or not a valid IDX/gzip file (no header)");
  DType dt{};
  EMBER_CHECK(magic[0] == 0 && magic[1] == 0 && dtype_of_code(magic[2], dt) && magic[3] >= 1,
              "load_idx: '" + path + "' is not an IDX file (bad magic number)");
  std::vector<std::size_t> dims(magic[3]);
  std::size_t count = 1;
  for (auto& d : dims) {
    std::array<std::uint8_t, 4> b{};
    EMBER_CHECK(read_exact(f.get(), b.data(), 4),
                "load_idx: '" + path + "' is truncated in its header");
    d = (std::size_t(b[0]) << 24) | (std::size_t(b[1]) << 16) | (std::size_t(b[2]) << 8) | b[3];
    EMBER_CHECK(!__builtin_mul_overflow(count, d, &count),
                "load_idx: '" + path + "' declares a shape whose element count overflows");
  }
  const std::size_t width = size_of(dt);
  EMBER_CHECK(
      count <= (std::size_t(1) << 40) / width,
      "load_idx: '" + path + "' declares an implausibly large tensor " + Shape(dims).to_string());
  // The header is not trusted with the allocation: the buffer grows with the data actually
  // read, a chunk at a time, so a short file costs at most one chunk beyond its contents.
  const std::size_t total = count * width;
  constexpr std::size_t kChunk = std::size_t{64} << 20;
  std::vector<std::byte> bytes;
  for (std::size_t have = 0; have < total;) {
    const std::size_t step = std::min(total - have, kChunk);
    if (bytes.capacity() < have + step) {
      bytes.reserve(std::min(total, std::max(2 * bytes.capacity(), have + step)));
    }
    bytes.resize(have + step);
    EMBER_CHECK(read_exact(f.get(), bytes.data() + have, step),
                "load_idx: '" + path + "' is truncated: expected " + std::to_string(count) +
                    " elements of " + Shape(dims).to_string());
    have += step;
  }
  unsigned char extra;
  EMBER_CHECK(gzread(f.get(), &extra, 1) == 0,
              "load_idx: '" + path + "' has trailing bytes after " + Shape(dims).to_string());
  if (host_is_little_endian()) swap_bytes(bytes.data(), count, width);
  return TensorData(std::move(bytes), Shape(std::move(dims)), dt);
}

void save_idx(const std::string& path, const TensorData& data) {
  const std::uint8_t code = code_of_dtype(data.dtype(), path);
  EMBER_CHECK(data.shape().rank() >= 1 && data.shape().rank() <= 255,
              "save_idx: " + path + ": rank must be in [1, 255]");
  Gz f(gzopen(path.c_str(), "wb"));
  EMBER_CHECK(f != nullptr, "save_idx: cannot create '" + path + "'");
  std::vector<std::uint8_t> header{0, 0, code, static_cast<std::uint8_t>(data.shape().rank())};
  for (std::size_t d : data.shape()) {
    EMBER_CHECK(d <= 0xffffffffu, "save_idx: " + path + ": dim too large for IDX");
    for (int s = 24; s >= 0; s -= 8) header.push_back(static_cast<std::uint8_t>(d >> s));
  }
  std::vector<std::byte> body = data.bytes();
  if (host_is_little_endian()) swap_bytes(body.data(), data.num_elements(), size_of(data.dtype()));
  bool ok = gzwrite(f.get(), header.data(), static_cast<unsigned>(header.size())) ==
            static_cast<int>(header.size());
  if (!body.empty()) {
    ok = ok && gzwrite(f.get(), body.data(), static_cast<unsigned>(body.size())) ==
                   static_cast<int>(body.size());
  }
  EMBER_CHECK(ok && gzclose(f.release()) == Z_OK, "save_idx: writing '" + path + "' failed");
}

}  // namespace ember::data
