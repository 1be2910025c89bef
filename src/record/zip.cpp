#include "record/zip.hpp"

#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstring>

#include "ember/base/error.hpp"
#include "record/checked.hpp"

namespace ember::record::detail {

namespace {

constexpr std::uint32_t kEocdSig = 0x06054b50, kZip64EocdSig = 0x06064b50,
                        kZip64LocatorSig = 0x07064b50, kCentralSig = 0x02014b50,
                        kLocalSig = 0x04034b50;
// Deflate cannot expand data by more than about 1032:1.
constexpr std::uint64_t kMaxDeflateRatio = 1032;

}  // namespace

ZipArchive::ZipArchive(std::shared_ptr<const ByteSource> source) : source_(std::move(source)) {
  const ByteSource& s = *source_;
  const std::string file = "record: '" + s.name() + "'";
  auto corrupt = [&](const std::string& what) -> void {
    fail(file + " is not a readable zip archive: " + what);
  };
  const std::uint64_t size = s.size();
  if (size < 22) corrupt("too short for an end-of-central-directory record");
  // The end record lies in the last 22 + 65535 bytes (a comment of at most 64 KiB).
  const std::uint64_t tail_len = std::min<std::uint64_t>(size, 22 + 65535);
  std::vector<std::byte> tail = s.read_vector(size - tail_len, tail_len);
  std::uint64_t eocd = UINT64_MAX;
  for (std::uint64_t i = tail_len - 22 + 1; i-- > 0;) {
    if (load_u32(tail.data() + i) == kEocdSig) {
      eocd = i;
      break;
    }
  }
  if (eocd == UINT64_MAX) corrupt("no end-of-central-directory record");
  const std::byte* e = tail.data() + eocd;
  std::uint64_t count = load_u16(e + 10);
  std::uint64_t cd_size = load_u32(e + 12);
  std::uint64_t cd_offset = load_u32(e + 16);
  const std::uint64_t eocd_abs = size - tail_len + eocd;
  if (count == 0xffff || cd_size == 0xffffffffu || cd_offset == 0xffffffffu) {
    if (eocd_abs < 20) corrupt("a zip64 archive without its locator");
    std::byte loc[20];
    s.read(eocd_abs - 20, loc);
    if (load_u32(loc) != kZip64LocatorSig) corrupt("a zip64 archive without its locator");
    const std::uint64_t z = load_u64(loc + 8);
    s.require_range(z, 56, "the zip64 end record");
    std::byte z64[56];
    s.read(z, z64);
    if (load_u32(z64) != kZip64EocdSig) corrupt("a bad zip64 end record");
    count = load_u64(z64 + 32);
    cd_size = load_u64(z64 + 40);
    cd_offset = load_u64(z64 + 48);
  }
  s.require_range(cd_offset, cd_size, "the zip central directory");
  if (count > cd_size / 46) corrupt("more entries than its central directory can hold");
  std::vector<std::byte> cd = s.read_vector(cd_offset, cd_size);
  std::uint64_t p = 0;
  entries_.reserve(static_cast<std::size_t>(count));
  for (std::uint64_t k = 0; k < count; ++k) {
    if (!range_within(p, 46, cd_size) || load_u32(cd.data() + p) != kCentralSig) {
      corrupt("a bad central directory entry");
    }
    const std::byte* c = cd.data() + p;
    const std::uint16_t flags = load_u16(c + 8);
    ZipEntry z{};
    z.method = load_u16(c + 10);
    z.crc = load_u32(c + 16);
    z.compressed = load_u32(c + 20);
    z.uncompressed = load_u32(c + 24);
    const std::uint64_t name_len = load_u16(c + 28), extra_len = load_u16(c + 30),
                        comment_len = load_u16(c + 32);
    std::uint64_t local = load_u32(c + 42);
    const std::uint64_t entry_len = 46 + name_len + extra_len + comment_len;
    if (!range_within(p, entry_len, cd_size)) corrupt("a central directory entry past its end");
    z.name.assign(reinterpret_cast<const char*>(c + 46), static_cast<std::size_t>(name_len));
    if (flags & 1) corrupt("entry '" + z.name + "' is encrypted");
    if (z.method != 0 && z.method != 8) {
      corrupt("entry '" + z.name + "' uses compression method " + std::to_string(z.method) +
              " (ember reads stored and deflated entries)");
    }
    // zip64 extra field: the sizes and offset that did not fit in 32 bits, in this order.
    const std::byte* x = c + 46 + name_len;
    for (std::uint64_t q = 0; q + 4 <= extra_len;) {
      const std::uint16_t id = load_u16(x + q), len = load_u16(x + q + 2);
      if (q + 4 + len > extra_len) corrupt("a bad extra field in entry '" + z.name + "'");
      if (id == 0x0001) {
        std::uint64_t r = q + 4;
        auto take64 = [&](std::uint64_t& field) {
          if (field != 0xffffffffu) return;
          if (r + 8 > q + 4 + len) corrupt("a short zip64 extra field in '" + z.name + "'");
          field = load_u64(x + r);
          r += 8;
        };
        take64(z.uncompressed);
        take64(z.compressed);
        take64(local);
      }
      q += 4 + len;
    }
    std::byte lh[30];
    s.require_range(local, 30, "the local header of '" + z.name + "'");
    s.read(local, lh);
    if (load_u32(lh) != kLocalSig) corrupt("a bad local header for '" + z.name + "'");
    z.data_offset = checked_add(local, 30 + std::uint64_t{load_u16(lh + 26)} + load_u16(lh + 28),
                                file, "a zip entry's data offset");
    s.require_range(z.data_offset, z.compressed, "the data of zip entry '" + z.name + "'");
    if (z.method == 0 && z.compressed != z.uncompressed) {
      corrupt("stored entry '" + z.name + "' has differing sizes");
    }
    if (z.method == 8 && z.uncompressed / kMaxDeflateRatio > z.compressed + 1) {
      corrupt("deflated entry '" + z.name + "' claims " + std::to_string(z.uncompressed) +
              " bytes from " + std::to_string(z.compressed) + ", more than deflate can produce");
    }
    if (!by_name_.emplace(z.name, entries_.size()).second) {
      corrupt("entry '" + z.name + "' appears twice");
    }
    entries_.push_back(std::move(z));
    p += entry_len;
  }
}

const ZipEntry* ZipArchive::find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &entries_[it->second];
}

std::vector<std::byte> ZipArchive::read(const ZipEntry& e, bool verify) const {
  const std::string file = "record: '" + source_->name() + "'";
  std::vector<std::byte> out;
  if (e.method == 0) {
    out = source_->read_vector(e.data_offset, e.compressed);
  } else {
    std::vector<std::byte> in = source_->read_vector(e.data_offset, e.compressed);
    out.resize(static_cast<std::size_t>(e.uncompressed));
    z_stream zs{};
    if (inflateInit2(&zs, -MAX_WBITS) != Z_OK) fail(file + ": zlib inflateInit failed");
    std::uint64_t in_done = 0, out_done = 0;
    int rc = Z_OK;
    while (rc == Z_OK) {
      const auto in_chunk =
          static_cast<uInt>(std::min<std::uint64_t>(in.size() - in_done, UINT_MAX));
      const auto out_chunk =
          static_cast<uInt>(std::min<std::uint64_t>(out.size() - out_done, UINT_MAX));
      zs.next_in = reinterpret_cast<Bytef*>(in.data() + in_done);
      zs.avail_in = in_chunk;
      zs.next_out = reinterpret_cast<Bytef*>(out.data() + out_done);
      zs.avail_out = out_chunk;
      rc = inflate(&zs, Z_NO_FLUSH);
      in_done += in_chunk - zs.avail_in;
      out_done += out_chunk - zs.avail_out;
      if (rc == Z_OK && in_chunk == zs.avail_in && out_chunk == zs.avail_out) rc = Z_BUF_ERROR;
    }
    inflateEnd(&zs);
    if (rc != Z_STREAM_END || out_done != e.uncompressed) {
      fail(file + ": zip entry '" + e.name + "' does not inflate to its declared " +
           std::to_string(e.uncompressed) + " bytes (a corrupt file)");
    }
  }
  if (verify && crc32_update(0, out.data(), out.size()) != e.crc) {
    fail(file + ": zip entry '" + e.name + "' fails its CRC-32 (a corrupt file)");
  }
  return out;
}

std::vector<std::byte> ZipArchive::read_range(const ZipEntry& e, std::uint64_t offset,
                                              std::uint64_t length, bool verify) const {
  if (!range_within(offset, length, e.uncompressed)) {
    fail("record: '" + source_->name() + "': " + std::to_string(length) + " bytes at " +
         std::to_string(offset) + " lie outside zip entry '" + e.name + "' of " +
         std::to_string(e.uncompressed) + " bytes");
  }
  if (e.method == 0 && !verify) return source_->read_vector(e.data_offset + offset, length);
  std::vector<std::byte> all = read(e, verify);
  if (offset == 0 && length == all.size()) return all;
  return std::vector<std::byte>(all.begin() + static_cast<std::ptrdiff_t>(offset),
                                all.begin() + static_cast<std::ptrdiff_t>(offset + length));
}

}  // namespace ember::record::detail
