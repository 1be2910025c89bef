// byte_io.hpp's file half for an embedded build, which has no filesystem: opening or saving
// a file fails naming the path (records are read from a std::span<const std::byte>, e.g. a
// model linked into flash), and CRC-32 is computed from a table instead of by zlib.
#include <array>
#include <cstdint>

#include "ember/base/error.hpp"
#include "record/byte_io.hpp"

namespace ember::record::detail {

namespace {

// The reflected CRC-32 of IEEE 802.3 (polynomial 0xEDB88320), one byte a step.
constexpr std::array<std::uint32_t, 256> make_crc_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) != 0 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<std::uint32_t, 256> kCrcTable = make_crc_table();

}  // namespace

std::shared_ptr<const ByteSource> open_file(const std::string& path, bool) {
  fail("record::load: '" + path +
       "': an embedded build has no filesystem; load the record from its bytes "
       "(record::load(module, std::span<const std::byte>, device))");
}

std::unique_ptr<ByteSink> atomic_file_sink(const std::string& path) {
  fail("record::save: '" + path +
       "': an embedded build has no filesystem; record::save_bytes writes to memory");
}

std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t n) {
  const auto* p = static_cast<const unsigned char*>(data);
  crc = ~crc;
  for (std::size_t i = 0; i < n; ++i) crc = kCrcTable[(crc ^ p[i]) & 0xffu] ^ (crc >> 8);
  return ~crc;
}

}  // namespace ember::record::detail
