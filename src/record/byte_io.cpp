// The portable half of byte_io.hpp: sources over memory, the vector sink and the checks
// every source shares. Files (POSIX) are byte_io_file.cpp and CRC-32 crc32.cpp; an embedded
// build links byte_io_none.cpp in its place.
#include "record/byte_io.hpp"

#include <algorithm>
#include <cstring>

#include "ember/base/error.hpp"
#include "record/checked.hpp"

namespace ember::record::detail {

namespace {

class MemorySource final : public ByteSource {
 public:
  MemorySource(std::string name, const std::byte* data, std::uint64_t size)
      : ByteSource(std::move(name)), data_(data), size_(size) {}
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, std::span<std::byte> dst) const override {
    require_range(offset, dst.size(), "read");
    if (!dst.empty()) std::memcpy(dst.data(), data_ + offset, dst.size());
  }
  const std::byte* view(std::uint64_t offset, std::uint64_t length) const override {
    require_range(offset, length, "view");
    return data_ + offset;
  }

 protected:
  const std::byte* data_;
  std::uint64_t size_;
};

class VectorSink final : public ByteSink {
 public:
  explicit VectorSink(std::vector<std::byte>& out) : out_(out) { out_.clear(); }
  void write(const void* data, std::size_t n) override {
    const auto* p = static_cast<const std::byte*>(data);
    out_.insert(out_.end(), p, p + n);
    position_ += n;
  }
  void write_at(std::uint64_t offset, const void* data, std::size_t n) override {
    EMBER_ASSERT(range_within(offset, n, out_.size()));
    std::memcpy(out_.data() + offset, data, n);
  }
  void commit() override {}

 private:
  std::vector<std::byte>& out_;
};

}  // namespace

std::vector<std::byte> ByteSource::read_vector(std::uint64_t offset, std::uint64_t length) const {
  require_range(offset, length, "read");
  std::vector<std::byte> out(static_cast<std::size_t>(length));
  read(offset, out);
  return out;
}
std::uint64_t ByteSource::read_u64(std::uint64_t offset) const {
  std::byte b[8];
  read(offset, b);
  return load_u64(b);
}
std::uint32_t ByteSource::read_u32(std::uint64_t offset) const {
  std::byte b[4];
  read(offset, b);
  return load_u32(b);
}
void ByteSource::require_range(std::uint64_t offset, std::uint64_t length,
                               const std::string& what) const {
  if (!range_within(offset, length, size())) {
    fail("record: '" + name() + "' is truncated or corrupt: " + what + " of " +
         std::to_string(length) + " bytes at offset " + std::to_string(offset) +
         " lies outside the file's " + std::to_string(size()) + " bytes");
  }
}

std::shared_ptr<const ByteSource> memory_source(std::span<const std::byte> bytes) {
  return std::make_shared<MemorySource>("<memory>", bytes.data(), bytes.size());
}

void ByteSink::write_zeros(std::size_t n) {
  static const std::byte zeros[256] = {};
  while (n > 0) {
    std::size_t k = std::min(n, sizeof zeros);
    write(zeros, k);
    n -= k;
  }
}

std::unique_ptr<ByteSink> vector_sink(std::vector<std::byte>& out) {
  return std::make_unique<VectorSink>(out);
}

}  // namespace ember::record::detail
