// A zip archive reader for PyTorch's .pt files: the central directory (zip64 included),
// stored and deflated entries (zlib), CRC-32 checks. Every size and offset is checked
// against the file before use; a deflated entry's declared size must be one deflate can
// reach from its compressed size, so inflating never allocates what the file cannot back.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "record/byte_io.hpp"

namespace ember::record::detail {

struct ZipEntry {
  std::string name;
  std::uint16_t method;  // 0 stored, 8 deflated
  std::uint32_t crc;
  std::uint64_t compressed, uncompressed;
  std::uint64_t data_offset;  // of the (compressed) bytes in the archive
};

class ZipArchive {
 public:
  explicit ZipArchive(std::shared_ptr<const ByteSource> source);
  const std::vector<ZipEntry>& entries() const { return entries_; }
  const ZipEntry* find(const std::string& name) const;
  // The whole entry, inflated when deflated; CRC-checked when `verify`.
  std::vector<std::byte> read(const ZipEntry& e, bool verify) const;
  // length bytes at `offset` of the entry's uncompressed contents.
  std::vector<std::byte> read_range(const ZipEntry& e, std::uint64_t offset, std::uint64_t length,
                                    bool verify) const;
  const ByteSource& source() const { return *source_; }

 private:
  std::shared_ptr<const ByteSource> source_;
  std::vector<ZipEntry> entries_;
  std::unordered_map<std::string, std::size_t> by_name_;
};

}  // namespace ember::record::detail
