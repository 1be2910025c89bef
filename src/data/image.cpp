#include "ember/data/image.hpp"

#include <array>
#include <cstring>

#include "ember/base/error.hpp"

namespace ember::data {

std::string Image::shape_string() const {
  std::string s = "[";
  s += std::to_string(channels);
  s += ", ";
  s += std::to_string(height);
  s += ", ";
  s += std::to_string(width);
  s += "]";
  return s;
}

Image image_from_bytes(const std::vector<std::uint8_t>& hwc, std::size_t height, std::size_t width,
                       std::size_t channels) {
  EMBER_CHECK(hwc.size() == height * width * channels,
              "image_from_bytes: " + std::to_string(hwc.size()) + " bytes for a " +
                  std::to_string(height) + " x " + std::to_string(width) + " image of " +
                  std::to_string(channels) + " channels (expected " +
                  std::to_string(height * width * channels) + ")");
  // byte / 255 from a table: the same floats as the division, without 1 division a pixel.
  static const std::array<float, 256> scaled = [] {
    std::array<float, 256> t{};
    for (std::size_t k = 0; k < 256; ++k) t[k] = float(k) / 255.0f;
    return t;
  }();
  Image img(channels, height, width);
  const std::size_t plane = height * width;
  if (plane == 0) return img;
  for (std::size_t c = 0; c < channels; ++c) {
    float* dst = img.pixels.data() + c * plane;
    const std::uint8_t* src = hwc.data() + c;
    for (std::size_t i = 0; i < plane; ++i) dst[i] = scaled[src[i * channels]];
  }
  return img;
}

Tensor<3> to_tensor(const Image& image, const Device& device) {
  EMBER_CHECK(image.pixels.size() == image.channels * image.height * image.width,
              "to_tensor: image " + image.shape_string() + " holds " +
                  std::to_string(image.pixels.size()) + " pixels");
  return Tensor<3>::from_data(
      TensorData::from(image.pixels, Shape{image.channels, image.height, image.width}), device);
}

Tensor<4> stack_images(const std::vector<Image>& images, const Device& device) {
  EMBER_CHECK(!images.empty(), "stack_images: no images");
  const Image& first = images.front();
  const std::size_t per = first.channels * first.height * first.width;
  // Straight into the TensorData's bytes: one host buffer per batch, not two.
  std::vector<std::byte> bytes(per * images.size() * sizeof(float));
  for (std::size_t i = 0; i < images.size(); ++i) {
    const Image& img = images[i];
    EMBER_CHECK(img.channels == first.channels && img.height == first.height &&
                    img.width == first.width && img.pixels.size() == per,
                "stack_images: image " + std::to_string(i) + " is " + img.shape_string() +
                    " but image 0 is " + first.shape_string());
    std::memcpy(bytes.data() + i * per * sizeof(float), img.pixels.data(), per * sizeof(float));
  }
  return Tensor<4>::from_data(
      TensorData(std::move(bytes), Shape{images.size(), first.channels, first.height, first.width},
                 DType::F32),
      device);
}

ImageBatch ImageBatcher::batch(std::vector<LabeledImage> items, const Device& device) const {
  std::vector<Image> images;
  std::vector<std::int64_t> labels;
  images.reserve(items.size());
  labels.reserve(items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::int64_t label = items[i].label;
    EMBER_CHECK(!num_classes || (label >= 0 && std::uint64_t(label) < *num_classes),
                "ImageBatcher: item " + std::to_string(i) + " of the batch has label " +
                    std::to_string(label) + ", outside the " +
                    std::to_string(num_classes.value_or(0)) + " classes");
    images.push_back(std::move(items[i].image));
    labels.push_back(label);
  }
  return {stack_images(images, device),
          Tensor<1, Int>::from_data(TensorData::from(labels), device)};
}

}  // namespace ember::data
