// Where the record readers read from and the writers write to. A ByteSource is a file (read
// with pread, one range at a time, so loading never holds more than one tensor in memory),
// a memory-mapped file, or a caller's span; a ByteSink is a file written atomically (a
// temporary in the same directory, fsync'd and renamed into place) or a byte vector.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace ember::record::detail {

static_assert(std::endian::native == std::endian::little,
              "ember's record formats are little-endian; a big-endian host needs byte swaps");

class ByteSource {
 public:
  virtual ~ByteSource() = default;
  virtual std::uint64_t size() const = 0;
  // Copies [offset, offset + dst.size()) into dst; an ember::Error naming the file when the
  // range lies outside the source.
  virtual void read(std::uint64_t offset, std::span<std::byte> dst) const = 0;
  // The range in memory when the source is memory (a span or a mapping), else nullptr.
  virtual const std::byte* view(std::uint64_t offset, std::uint64_t length) const = 0;
  // The range, writable, when the source is a private mapping whose writes go to
  // copy-on-write pages and never to the file (Note [Mapped files]), else nullptr. Tensors
  // over it keep the source alive as their owner.
  virtual std::byte* private_view(std::uint64_t, std::uint64_t) const { return nullptr; }
  // A hint that [offset, offset + length) will be read soon: a file asks the kernel to start
  // reading it (Note [Read ahead] in byte_io_file.cpp); memory ignores it.
  virtual void will_read(std::uint64_t, std::uint64_t) const {}
  // The file's name, or "<memory>", for messages.
  const std::string& name() const { return name_; }

  // Reads a range into a new vector (the range is checked against size() first, so the
  // allocation is never larger than the source).
  std::vector<std::byte> read_vector(std::uint64_t offset, std::uint64_t length) const;
  std::uint64_t read_u64(std::uint64_t offset) const;
  std::uint32_t read_u32(std::uint64_t offset) const;
  // Throws an ember::Error naming the file and `what` unless the range lies inside.
  void require_range(std::uint64_t offset, std::uint64_t length, const std::string& what) const;

 protected:
  explicit ByteSource(std::string name) : name_(std::move(name)) {}

 private:
  std::string name_;
};

// Opens a file read with pread, or memory-mapped when `mmap` (privately, copy-on-write).
std::shared_ptr<const ByteSource> open_file(const std::string& path, bool mmap);
// A caller's bytes (not copied: they must outlive the source).
std::shared_ptr<const ByteSource> memory_source(std::span<const std::byte> bytes);

class ByteSink {
 public:
  virtual ~ByteSink() = default;
  virtual void write(const void* data, std::size_t n) = 0;
  // Overwrites bytes already written at `offset` (the writers fill in a preamble last).
  virtual void write_at(std::uint64_t offset, const void* data, std::size_t n) = 0;
  // Makes the output final: the file is fsync'd and renamed into place.
  virtual void commit() = 0;
  std::uint64_t position() const { return position_; }
  void write_zeros(std::size_t n);

 protected:
  std::uint64_t position_ = 0;
};

// Writes to a temporary file next to `path`; commit() fsyncs it and renames it over `path`
// (then fsyncs the directory). Destroyed without commit(), it removes the temporary, so a
// failed save never leaves a broken file at `path`.
std::unique_ptr<ByteSink> atomic_file_sink(const std::string& path);
std::unique_ptr<ByteSink> vector_sink(std::vector<std::byte>& out);

// CRC-32 (IEEE, zlib's crc32), continuing from `crc` (0 to start).
std::uint32_t crc32_update(std::uint32_t crc, const void* data, std::size_t n);

inline std::uint64_t load_u64(const std::byte* p) {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
inline std::uint32_t load_u32(const std::byte* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline std::uint16_t load_u16(const std::byte* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline void store_u64(std::byte* p, std::uint64_t v) { std::memcpy(p, &v, 8); }
inline void store_u32(std::byte* p, std::uint32_t v) { std::memcpy(p, &v, 4); }

}  // namespace ember::record::detail
