// Files as byte sources and sinks (pread, mmap, a temporary file renamed into place): the
// hosted half of byte_io.hpp (its CRC-32 is crc32.cpp). An embedded build has no filesystem
// and links byte_io_none.cpp instead.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "ember/base/error.hpp"
#include "record/byte_io.hpp"
#include "record/checked.hpp"

namespace ember::record::detail {

namespace {

std::string errno_text() { return std::strerror(errno); }

// RAII for a file descriptor.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  int release() {
    int f = fd_;
    fd_ = -1;
    return f;
  }

 private:
  int fd_;
};

// Note [Mapped files]: the file is mapped MAP_PRIVATE with read and write access. Reads see
// the file; a write (an optimizer updating a tensor adopted from the mapping in place, Note
// [In-place reuse]) copies that page first, so the file is never written, whatever the
// process does with the memory. Pages are read on first touch, so mapping is O(1) and a
// load that adopts the tensors (Backend::adopt_host) touches only the metadata. A file
// truncated by another process while mapped makes reads past its new end fault (SIGBUS),
// as with any mmap, and a page not yet touched or copied shows another process's writes to
// the file; files being rewritten by ember itself are never affected, since saves rename a
// new file into place and leave the mapped inode intact. The mapping lives as long as its
// ByteSource: the readers, and every tensor adopted from it, hold it.
class MappedFile final : public ByteSource {
 public:
  MappedFile(std::string name, void* base, std::uint64_t size)
      : ByteSource(std::move(name)), base_(base), size_(size) {}
  ~MappedFile() override {
    if (base_ != nullptr) ::munmap(base_, size_);
  }
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, std::span<std::byte> dst) const override {
    require_range(offset, dst.size(), "read");
    if (!dst.empty()) std::memcpy(dst.data(), bytes() + offset, dst.size());
  }
  const std::byte* view(std::uint64_t offset, std::uint64_t length) const override {
    require_range(offset, length, "view");
    return bytes() + offset;
  }
  std::byte* private_view(std::uint64_t offset, std::uint64_t length) const override {
    require_range(offset, length, "view");
    return bytes() + offset;
  }

 private:
  std::byte* bytes() const { return static_cast<std::byte*>(base_); }
  void* base_;
  std::uint64_t size_;
};

class FileSource final : public ByteSource {
 public:
  FileSource(std::string name, int fd, std::uint64_t size)
      : ByteSource(std::move(name)), fd_(fd), size_(size) {}
  std::uint64_t size() const override { return size_; }
  void read(std::uint64_t offset, std::span<std::byte> dst) const override {
    require_range(offset, dst.size(), "read");
    std::size_t done = 0;
    while (done < dst.size()) {
      std::size_t chunk = std::min<std::size_t>(dst.size() - done, std::size_t{1} << 30);
      ssize_t n = ::pread(fd_.get(), dst.data() + done, chunk, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) fail("record: reading '" + name() + "' failed: " + errno_text());
      if (n == 0) fail("record: '" + name() + "' is truncated (it shrank while being read)");
      done += static_cast<std::size_t>(n);
    }
  }
  const std::byte* view(std::uint64_t, std::uint64_t) const override { return nullptr; }
  // Note [Read ahead]: a load reads a tensor in chunks, checking each (Note [Checked reads]);
  // between two preads the disk would idle unless the kernel's own read-ahead has the next
  // pages on the way. Asking for the whole tensor and the start of the next (WILLNEED)
  // queues their reads at once, so the disk streams while the loader copies and checks.
  void will_read(std::uint64_t offset, std::uint64_t length) const override {
    if (offset >= size_) return;
    length = std::min(length, size_ - offset);
    ::posix_fadvise(fd_.get(), static_cast<off_t>(offset), static_cast<off_t>(length),
                    POSIX_FADV_WILLNEED);  // a hint only: its failure changes nothing
  }

 private:
  Fd fd_;
  std::uint64_t size_;
};

// The permissions a saved file gets: an existing file's (a save replaces it), else what
// open(2) would give a new file (0666 less the umask, read from /proc since umask(2) can
// only be read by changing it), else 0644. mkstemp's 0600 would make every save private.
mode_t new_file_mode(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return st.st_mode & 07777;
  std::FILE* f = std::fopen("/proc/self/status", "r");
  mode_t mode = 0644;
  if (f != nullptr) {
    char line[256];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      unsigned mask = 0;
      if (std::sscanf(line, "Umask: %o", &mask) == 1) {
        mode = 0666 & ~static_cast<mode_t>(mask);
        break;
      }
    }
    std::fclose(f);
  }
  return mode;
}

class AtomicFileSink final : public ByteSink {
 public:
  explicit AtomicFileSink(std::string path) : path_(std::move(path)), fd_(-1) {
    std::filesystem::path p(path_);
    std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
    std::string leaf = ".";
    leaf.append(p.filename().string()).append(".tmp.XXXXXX");
    tmp_ = (std::filesystem::path(dir) / leaf).string();
    std::vector<char> name(tmp_.begin(), tmp_.end());
    name.push_back('\0');
    int fd = ::mkstemp(name.data());
    if (fd < 0) {
      fail("record::save: cannot create a temporary file in '" + dir + "' for '" + path_ +
           "': " + errno_text());
    }
    tmp_.assign(name.data());
    fd_ = fd;
    ::fchmod(fd_, new_file_mode(path_));
  }
  ~AtomicFileSink() override {
    if (fd_ >= 0) ::close(fd_);
    if (!committed_) ::unlink(tmp_.c_str());
  }
  void write(const void* data, std::size_t n) override {
    write_all_at(position_, data, n);
    position_ += n;
  }
  void write_at(std::uint64_t offset, const void* data, std::size_t n) override {
    write_all_at(offset, data, n);
  }
  void commit() override {
    if (::fsync(fd_) != 0) fail("record::save: fsync of '" + tmp_ + "' failed: " + errno_text());
    if (::close(fd_) != 0) {
      fd_ = -1;
      fail("record::save: closing '" + tmp_ + "' failed: " + errno_text());
    }
    fd_ = -1;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      fail("record::save: renaming the temporary file to '" + path_ + "' failed: " + errno_text());
    }
    committed_ = true;
    // The rename is durable once the directory is synced.
    std::filesystem::path p(path_);
    std::string dir = p.has_parent_path() ? p.parent_path().string() : std::string(".");
    int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      ::fsync(dfd);
      ::close(dfd);
    }
  }

 private:
  void write_all_at(std::uint64_t offset, const void* data, std::size_t n) {
    const auto* p = static_cast<const char*>(data);
    std::size_t done = 0;
    while (done < n) {
      std::size_t chunk = std::min<std::size_t>(n - done, std::size_t{1} << 30);
      ssize_t w = ::pwrite(fd_, p + done, chunk, static_cast<off_t>(offset + done));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("record::save: writing '" + path_ + "' failed: " + errno_text());
      done += static_cast<std::size_t>(w);
    }
  }
  std::string path_, tmp_;
  int fd_;
  bool committed_ = false;
};

}  // namespace

std::shared_ptr<const ByteSource> open_file(const std::string& path, bool mmap) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail("record::load: cannot open '" + path + "': " + errno_text());
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    fail("record::load: cannot stat '" + path + "': " + errno_text());
  if (!S_ISREG(st.st_mode)) fail("record::load: '" + path + "' is not a regular file");
  auto size = static_cast<std::uint64_t>(st.st_size);
  if (mmap && size > 0) {
    void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd.get(), 0);
    if (base == MAP_FAILED) fail("record::load: cannot map '" + path + "': " + errno_text());
    return std::make_shared<MappedFile>(path, base, size);
  }
  return std::make_shared<FileSource>(path, fd.release(), size);
}

std::unique_ptr<ByteSink> atomic_file_sink(const std::string& path) {
  return std::make_unique<AtomicFileSink>(path);
}

}  // namespace ember::record::detail
