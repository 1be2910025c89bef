// Images on the host, as the data layer's transforms and batchers see them: f32 pixels in
// channel-major (CHW) order, so that a batch of them is an [N, C, H, W] tensor without a
// transpose. Transforms (transforms.hpp) run on this type in loader workers; a batcher
// turns many of them into one tensor on the device.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ember/tensor/tensor.hpp"

namespace ember::data {

struct Image {
  std::size_t channels = 0, height = 0, width = 0;
  std::vector<float> pixels;  // channels * height * width values, CHW

  Image() = default;
  // Zero-filled (or `fill`-filled) image.
  Image(std::size_t c, std::size_t h, std::size_t w, float fill = 0.0f)
      : channels(c), height(h), width(w), pixels(c * h * w, fill) {}

  float& at(std::size_t c, std::size_t y, std::size_t x) {
    return pixels[(c * height + y) * width + x];
  }
  float at(std::size_t c, std::size_t y, std::size_t x) const {
    return pixels[(c * height + y) * width + x];
  }
  // "[C, H, W]", for error messages.
  std::string shape_string() const;
};

// An image and its class.
struct LabeledImage {
  Image image;
  std::int64_t label = 0;
};

// Interleaved 8-bit pixels (HWC, as decoders and the MNIST files give them) to an Image in
// [0, 1] (PyTorch's ToTensor). Throws ember::Error when the byte count does not match.
Image image_from_bytes(const std::vector<std::uint8_t>& hwc, std::size_t height, std::size_t width,
                       std::size_t channels);
// The image as a [C, H, W] f32 tensor on `device`.
Tensor<3> to_tensor(const Image& image, const Device& device);
// Images of one size stacked to an [N, C, H, W] f32 tensor; throws ember::Error naming
// the first image whose size differs, or when there are none.
Tensor<4> stack_images(const std::vector<Image>& images, const Device& device);

// A classification batch: images [N, C, H, W] and labels [N] (i64).
struct ImageBatch {
  Tensor<4> images;
  Tensor<1, Int> labels;
};

// LabeledImage items (already transformed) to an ImageBatch. With num_classes set, a label
// outside [0, num_classes) is an ember::Error naming it.
struct ImageBatcher {
  std::optional<std::size_t> num_classes;
  ImageBatch batch(std::vector<LabeledImage> items, const Device& device) const;
};

}  // namespace ember::data
