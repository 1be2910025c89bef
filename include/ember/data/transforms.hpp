// Image transforms on host Images (image.hpp), for loader workers. Each takes its image by
// value and returns the result, so a chain moves one buffer along; the random ones take
// the generator a RandomMapperDataset seeds per item, which makes an augmentation a
// function of (seed, epoch, index) alone:
//
//   auto train = std::make_shared<data::RandomMapperDataset<MnistItem, LabeledImage>>(
//       mnist, seed, [](MnistItem m, data::Rng& rng) {
//         auto img = data::random_crop(mnist_image(m), 28, 28, 2, rng);
//         return LabeledImage{data::random_horizontal_flip(std::move(img), 0.5, rng), m.label};
//       });
//
// Geometry follows torchvision: padding adds `padding` pixels on every side; crops are
// [top, top + h) x [left, left + w); resize is bilinear with half-pixel centres
// (align_corners = false, no antialiasing), as torch.nn.functional.interpolate.
// Bad sizes are an ember::Error naming the transform, the image's shape and the request.
#pragma once

#include <cstddef>
#include <vector>

#include "ember/data/image.hpp"
#include "ember/data/random.hpp"

namespace ember::data {

// (x - mean[c]) / std[c] per channel; mean and std hold one value or one per channel.
Image normalize(Image image, const std::vector<float>& mean, const std::vector<float>& std);
// `padding` pixels of `fill` on every side.
Image pad(Image image, std::size_t padding, float fill = 0.0f);
// The h x w window whose top-left corner is (top, left); it must lie inside the image.
Image crop(const Image& image, std::size_t top, std::size_t left, std::size_t h, std::size_t w);
// The centred h x w window (torchvision's rounding: top = round((H - h) / 2)).
Image center_crop(const Image& image, std::size_t h, std::size_t w);
// Pads by `padding` (with `fill`), then crops h x w at a uniformly random corner: top is
// drawn first, in [0, H + 2 padding - h], then left.
Image random_crop(Image image, std::size_t h, std::size_t w, std::size_t padding, Rng& rng,
                  float fill = 0.0f);
// Mirrors the columns.
Image horizontal_flip(Image image);
// Mirrors the columns with probability p (one draw from rng, always made).
Image random_horizontal_flip(Image image, double p, Rng& rng);
// Bilinear resampling to h x w.
Image resize_bilinear(const Image& image, std::size_t h, std::size_t w);

}  // namespace ember::data
