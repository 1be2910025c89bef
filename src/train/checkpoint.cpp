// The checkpoints folder (Note [Atomic checkpoints] in checkpoint.hpp) and atomic files.
#include "ember/train/checkpoint.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

#include "ember/base/error.hpp"

namespace fs = std::filesystem;

namespace ember::train {

namespace {

std::string sys_error() { return std::strerror(errno); }

void fsync_path(const std::string& path, bool directory) {
  const int fd = ::open(path.c_str(), directory ? (O_RDONLY | O_DIRECTORY) : O_RDONLY);
  if (fd < 0) return;  // best effort: some file systems refuse to open folders
  (void)::fsync(fd);
  ::close(fd);
}

void fsync_tree(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.is_regular_file(ec)) fsync_path(e.path().string(), false);
  }
  fsync_path(dir, true);
}

}  // namespace

void ensure_writable_dir(const std::string& dir, const char* who) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  EMBER_CHECK(!ec, std::string(who) + ": cannot create the folder '" + dir + "': " + ec.message());
  EMBER_CHECK(fs::is_directory(dir, ec),
              std::string(who) + ": '" + dir + "' exists and is not a folder");
  const std::string probe = dir + "/.write-test-" + std::to_string(::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  EMBER_CHECK(fd >= 0,
              std::string(who) + ": the folder '" + dir + "' cannot be written: " + sys_error());
  ::close(fd);
  ::unlink(probe.c_str());
}

void write_file_atomically(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  EMBER_CHECK(fd >= 0, "train::write_file_atomically: cannot create '" + tmp + "': " + sys_error());
  std::size_t done = 0;
  while (done < content.size()) {
    const ssize_t w = ::write(fd, content.data() + done, content.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      const std::string why = sys_error();
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("train::write_file_atomically: cannot write '" + tmp + "': " + why);
    }
    done += std::size_t(w);
  }
  const bool synced = ::fsync(fd) == 0;
  const std::string why = sys_error();
  ::close(fd);
  if (!synced) {
    ::unlink(tmp.c_str());
    fail("train::write_file_atomically: cannot sync '" + tmp + "': " + why);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string rwhy = sys_error();
    ::unlink(tmp.c_str());
    fail("train::write_file_atomically: cannot rename '" + tmp + "' to '" + path + "': " + rwhy);
  }
  fsync_path(fs::path(path).parent_path().string(), true);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "train::read_file: cannot open '" + path + "': " + sys_error());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

CheckpointStore::CheckpointStore(std::string dir) : dir_(std::move(dir)) {
  ensure_writable_dir(dir_, "train::CheckpointStore");
}

std::string CheckpointStore::stage(const std::string& name) const {
  const std::string path = dir_ + "/.staging-" + name;
  std::error_code ec;
  fs::remove_all(path, ec);
  fs::create_directories(path, ec);
  EMBER_CHECK(!ec, "train::CheckpointStore: cannot create '" + path + "': " + ec.message());
  return path;
}

std::string CheckpointStore::commit(const std::string& name, bool is_best,
                                    std::size_t keep_last) const {
  const std::string staged = dir_ + "/.staging-" + name, final_path = dir_ + "/" + name;
  fsync_tree(staged);
  std::error_code ec;
  // The same name again (a resumed run re-saving a step): the new one replaces it.
  if (fs::exists(final_path, ec)) fs::remove_all(final_path, ec);
  fs::rename(staged, final_path, ec);
  EMBER_CHECK(!ec, "train::CheckpointStore: cannot rename '" + staged + "' to '" + final_path +
                       "': " + ec.message());
  fsync_path(dir_, true);
  write_file_atomically(dir_ + "/latest", name + "\n");
  if (is_best) write_file_atomically(dir_ + "/best", name + "\n");

  // Leftovers of interrupted commits.
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind(".staging-", 0) == 0) fs::remove_all(e.path(), ec);
  }
  if (keep_last > 0) {
    const auto all = list();
    const auto best_path = best();
    const std::string best_name = best_path ? fs::path(*best_path).filename().string() : "";
    std::size_t kept = 0;
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      if (*it == best_name) continue;
      if (kept < keep_last) {
        ++kept;
        continue;
      }
      fs::remove_all(dir_ + "/" + *it, ec);
    }
  }
  return final_path;
}

std::optional<std::string> CheckpointStore::pointer(const char* which) const {
  std::error_code ec;
  const std::string p = dir_ + "/" + which;
  if (!fs::exists(p, ec)) return std::nullopt;
  std::string name = read_file(p);
  while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
  EMBER_CHECK(!name.empty() && name.find('/') == std::string::npos,
              "train::CheckpointStore: '" + p + "' does not name a checkpoint");
  const std::string dir = dir_ + "/" + name;
  if (!fs::is_directory(dir, ec)) return std::nullopt;
  return dir;
}
std::optional<std::string> CheckpointStore::latest() const { return pointer("latest"); }
std::optional<std::string> CheckpointStore::best() const { return pointer("best"); }

std::vector<std::string> CheckpointStore::list() const {
  // By the numbers in the names: epoch first, and within an epoch its mid-epoch stops
  // (by step) before its end ("epoch-0004-step-000931" before "epoch-0004").
  struct Entry {
    std::string name;
    std::size_t epoch, step;
    bool end;
  };
  std::vector<Entry> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (!e.is_directory(ec)) continue;
    const std::string n = e.path().filename().string();
    std::size_t epoch = 0, step = 0;
    if (std::sscanf(n.c_str(), "epoch-%zu-step-%zu", &epoch, &step) == 2) {
      out.push_back({n, epoch, step, false});
    } else if (std::sscanf(n.c_str(), "epoch-%zu", &epoch) == 1) {
      out.push_back({n, epoch, 0, true});
    }
  }
  std::sort(out.begin(), out.end(), [](const Entry& a, const Entry& b) {
    if (a.epoch != b.epoch) return a.epoch < b.epoch;
    if (a.end != b.end) return !a.end;  // the epoch's end comes after its mid-epoch stops
    return a.step < b.step;
  });
  std::vector<std::string> names;
  for (auto& e : out) names.push_back(std::move(e.name));
  return names;
}

}  // namespace ember::train
