#include "ember/data/image_folder.hpp"

#include <stb_image.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "ember/base/error.hpp"

namespace ember::data {

namespace fs = std::filesystem;

namespace {
std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
// Note [Declared image sizes]: a decoder allocates what a file's header declares before it
// reads the pixels, and stb_image fills a short BMP with zeros instead of failing, so a
// 100-byte file can ask for gigabytes. Before decoding, the declared size must be one the
// bytes could hold: uncompressed formats (BMP, PNM) need at least one bit per pixel;
// compressed ones at most 8256 pixels per byte (deflate's ceiling of 1032:1 on 1-bit rows,
// beyond which no encoder reaches); and nothing above kMaxPixels.
constexpr std::uint64_t kMaxPixels = std::uint64_t(1) << 27;
constexpr std::uint64_t kMaxPixelsPerByte = 8256;

void check_declared_size(const std::vector<std::uint8_t>& bytes, const std::string& source) {
  int w = 0, h = 0, c = 0;
  if (stbi_info_from_memory(bytes.data(), int(bytes.size()), &w, &h, &c) == 0) return;
  const std::uint64_t pixels = std::uint64_t(w) * std::uint64_t(h), size = bytes.size();
  const bool uncompressed =
      size >= 2 && ((bytes[0] == 'B' && bytes[1] == 'M') ||
                    (bytes[0] == 'P' && (bytes[1] == '5' || bytes[1] == '6')));
  const std::uint64_t limit =
      std::min(kMaxPixels, uncompressed ? size * 8 : size * kMaxPixelsPerByte);
  EMBER_CHECK(pixels <= limit, "decode_image: '" + source + "' declares " + std::to_string(w) +
                                   " x " + std::to_string(h) + " pixels, more than its " +
                                   std::to_string(size) + " bytes can hold (limit " +
                                   std::to_string(limit) + " pixels)");
}

struct StbiFree {
  void operator()(stbi_uc* p) const { stbi_image_free(p); }
};
}  // namespace

Image decode_image(const std::vector<std::uint8_t>& bytes, std::size_t channels,
                   const std::string& source) {
  EMBER_CHECK(channels <= 4, "decode_image: '" + source + "': " + std::to_string(channels) +
                                 " channels requested (0 to 4 allowed)");
  EMBER_CHECK(!bytes.empty() && bytes.size() <= std::size_t(INT32_MAX),
              "decode_image: '" + source + "' is empty or too large (" +
                  std::to_string(bytes.size()) + " bytes)");
  check_declared_size(bytes, source);
  int w = 0, h = 0, stored = 0;
  std::unique_ptr<stbi_uc, StbiFree> px(
      stbi_load_from_memory(bytes.data(), int(bytes.size()), &w, &h, &stored, int(channels)));
  if (px == nullptr) {
    const char* why = stbi_failure_reason();
    fail("decode_image: '" + source + "' does not decode as an image (" +
         (why != nullptr ? why : "unknown reason") + ")");
  }
  const std::size_t c = channels != 0 ? channels : std::size_t(stored);
  const std::size_t n = std::size_t(w) * std::size_t(h) * c;
  return image_from_bytes(std::vector<std::uint8_t>(px.get(), px.get() + n), std::size_t(h),
                          std::size_t(w), c);
}

Image load_image(const std::string& path, std::size_t channels) {
  std::ifstream in(path, std::ios::binary);
  EMBER_CHECK(in.good(), "load_image: cannot open '" + path + "'");
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  EMBER_CHECK(!in.bad(), "load_image: reading '" + path + "' failed");
  return decode_image(bytes, channels, path);
}

ImageFolderDataset::ImageFolderDataset(const std::string& root, ImageFolderOptions options)
    : channels_(options.channels) {
  EMBER_CHECK(options.channels <= 4, "ImageFolderDataset: " + std::to_string(options.channels) +
                                         " channels requested (0 to 4 allowed)");
  std::error_code ec;
  EMBER_CHECK(fs::is_directory(root, ec),
              "ImageFolderDataset: '" + root + "' is not a folder (or cannot be read)");
  std::vector<std::string> exts;
  for (const auto& e : options.extensions) exts.push_back(lower(e));
  std::vector<fs::path> class_dirs;
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    if (entry.is_directory(ec)) class_dirs.push_back(entry.path());
  }
  EMBER_CHECK(!ec, "ImageFolderDataset: listing '" + root + "' failed: " + ec.message());
  std::sort(class_dirs.begin(), class_dirs.end());
  for (const auto& dir : class_dirs) {
    const auto label = std::int64_t(classes_.size());
    classes_.push_back(dir.filename().string());
    std::vector<std::string> paths;
    for (const auto& entry : fs::recursive_directory_iterator(dir, ec)) {
      if (!entry.is_regular_file(ec)) continue;
      const std::string ext = lower(entry.path().extension().string());
      if (std::find(exts.begin(), exts.end(), ext) != exts.end()) {
        paths.push_back(entry.path().string());
      }
    }
    EMBER_CHECK(!ec, "ImageFolderDataset: listing '" + dir.string() + "' failed: " + ec.message());
    std::sort(paths.begin(), paths.end());
    for (auto& p : paths) files_.push_back({std::move(p), label});
  }
  EMBER_CHECK(!files_.empty(), "ImageFolderDataset: '" + root + "' holds no images in " +
                                   std::to_string(classes_.size()) +
                                   " class folders (one sub-folder per class expected)");
}

std::optional<LabeledImage> ImageFolderDataset::get(std::size_t index) const {
  if (index >= files_.size()) return std::nullopt;
  const File& f = files_[index];
  return LabeledImage{load_image(f.path, channels_), f.label};
}

}  // namespace ember::data
