// Image files: decoding PNG, JPEG and BMP (with Debian's stb_image) into host Images, and
// ImageFolderDataset, the classic layout of one folder per class:
//
//   root/cat/001.png  root/cat/002.jpg  root/dog/a.bmp ...   -> labels cat = 0, dog = 1
//
// Classes are the sub-folders of root in sorted order; each class's images are the files
// below its folder (recursively) with a known extension, in sorted path order. Images are
// decoded when read, so a loader's workers decode in parallel.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ember/data/dataset.hpp"
#include "ember/data/image.hpp"

namespace ember::data {

// Decodes an encoded image (PNG, JPEG, BMP, ...) to an Image in [0, 1] with `channels`
// channels (1 grey, 2 grey + alpha, 3 RGB, 4 RGBA) or, with 0, as many as it has. Throws
// ember::Error naming `source` and the decoder's reason when the bytes do not decode, or
// when they declare more pixels than they could hold (Note [Declared image sizes]).
Image decode_image(const std::vector<std::uint8_t>& bytes, std::size_t channels,
                   const std::string& source);
// Reads and decodes a file; throws ember::Error naming it when it cannot be read or decoded.
Image load_image(const std::string& path, std::size_t channels = 0);

struct ImageFolderOptions {
  std::size_t channels = 0;  // as in decode_image; set it when files mix grey and colour
  std::vector<std::string> extensions{".png", ".jpg", ".jpeg", ".bmp"};  // any case
};

class ImageFolderDataset : public Dataset<LabeledImage> {
 public:
  // Scans root. Throws ember::Error when root is not a folder or holds no images.
  explicit ImageFolderDataset(const std::string& root, ImageFolderOptions options = {});

  // Decodes item i; a file that does not decode is an ember::Error naming it.
  std::optional<LabeledImage> get(std::size_t index) const override;
  std::size_t len() const override { return files_.size(); }
  const std::vector<std::string>& classes() const { return classes_; }
  const std::string& path(std::size_t index) const { return files_.at(index).path; }
  std::int64_t label(std::size_t index) const { return files_.at(index).label; }

 private:
  struct File {
    std::string path;
    std::int64_t label;
  };
  std::vector<std::string> classes_;
  std::vector<File> files_;
  std::size_t channels_;
};

}  // namespace ember::data
