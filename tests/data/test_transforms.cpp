// Image transforms against references: crops, pads and flips against direct f64 index
// arithmetic, resize against PyTorch's bilinear interpolation (golden values made by
// make_transform_golden.py), and the conversions to tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include <ember/data/data.hpp>
#include <ember/ember.hpp>

#include "data/expect_error.hpp"

using namespace ember;
using ember::data::testing::expect_error;
using namespace ember::data;

namespace {

// The pattern the golden script uses: ((c * 37 + y * 11 + x * 5) % 17) / 16.
double pattern(std::size_t c, std::size_t y, std::size_t x) {
  return double((c * 37 + y * 11 + x * 5) % 17) / 16.0;
}
Image pattern_image(std::size_t c, std::size_t h, std::size_t w) {
  Image img(c, h, w);
  for (std::size_t k = 0; k < c; ++k)
    for (std::size_t y = 0; y < h; ++y)
      for (std::size_t x = 0; x < w; ++x) img.at(k, y, x) = float(pattern(k, y, x));
  return img;
}

}  // namespace

TEST(Transforms, ImageFromBytesIsToTensor) {
  // 2 x 3 pixels, 2 channels, interleaved: byte (y, x, c) = 10 * (y * 3 + x) + c.
  std::vector<std::uint8_t> hwc;
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x)
      for (int c = 0; c < 2; ++c) hwc.push_back(std::uint8_t(10 * (y * 3 + x) + c));
  const Image img = image_from_bytes(hwc, 2, 3, 2);
  ASSERT_EQ(img.shape_string(), "[2, 2, 3]");
  for (int c = 0; c < 2; ++c)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 3; ++x)
        EXPECT_EQ(img.at(std::size_t(c), std::size_t(y), std::size_t(x)),
                  float(10 * (y * 3 + x) + c) / 255.0f);
  const auto t = to_tensor(img, Device::cpu());
  EXPECT_EQ(t.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(t.to_data().to_vector<float>(), img.pixels);
  expect_error([&] { image_from_bytes(hwc, 3, 3, 2); }, "12 bytes for a 3 x 3 image");
}

TEST(Transforms, Normalize) {
  const Image img = pattern_image(2, 3, 4);
  const Image n = normalize(img, {0.5f, 0.25f}, {2.0f, 0.5f});
  for (std::size_t y = 0; y < 3; ++y)
    for (std::size_t x = 0; x < 4; ++x) {
      EXPECT_NEAR(n.at(0, y, x), (pattern(0, y, x) - 0.5) / 2.0, 1e-7);
      EXPECT_NEAR(n.at(1, y, x), (pattern(1, y, x) - 0.25) / 0.5, 1e-7);
    }
  expect_error([&] { normalize(img, {0.1f, 0.2f, 0.3f}, {1.0f}); }, "3 means");
  expect_error([&] { normalize(img, {0.1f}, {0.0f}); }, "must be positive");
}

TEST(Transforms, PadAndCropAgainstIndexArithmetic) {
  const Image img = pattern_image(2, 5, 6);
  const Image p = pad(img, 2, -1.0f);
  ASSERT_EQ(p.shape_string(), "[2, 9, 10]");
  for (std::size_t c = 0; c < 2; ++c)
    for (std::size_t y = 0; y < 9; ++y)
      for (std::size_t x = 0; x < 10; ++x) {
        const bool inside = y >= 2 && y < 7 && x >= 2 && x < 8;
        EXPECT_EQ(double(p.at(c, y, x)), inside ? double(img.at(c, y - 2, x - 2)) : -1.0);
      }
  const Image cr = crop(img, 1, 2, 3, 4);
  ASSERT_EQ(cr.shape_string(), "[2, 3, 4]");
  for (std::size_t c = 0; c < 2; ++c)
    for (std::size_t y = 0; y < 3; ++y)
      for (std::size_t x = 0; x < 4; ++x)
        EXPECT_EQ(double(cr.at(c, y, x)), pattern(c, y + 1, x + 2));
  expect_error([&] { crop(img, 3, 0, 3, 6); }, "a 3 x 6 window at (3, 0) does not lie inside");
  // torchvision's centre: top = round((5 - 2) / 2) = 2 (ties to even), left = (6 - 2) / 2.
  const Image cc = center_crop(img, 2, 2);
  EXPECT_EQ(double(cc.at(1, 0, 0)), pattern(1, 2, 2));
  expect_error([&] { center_crop(img, 6, 2); }, "cannot take 6 x 2");
}

TEST(Transforms, RandomCropIsAPaddedWindowAtTheDrawnCorner) {
  const Image img = pattern_image(1, 6, 6);
  std::set<std::pair<std::size_t, std::size_t>> corners;
  for (std::uint64_t seed = 0; seed < 400; ++seed) {
    Rng rng(seed), replay(seed);
    const Image out = random_crop(img, 6, 6, 2, rng);
    // The corner is drawn top first, each uniform over the 6 + 4 - 6 + 1 = 5 offsets.
    const auto top = std::size_t(replay.below(5)), left = std::size_t(replay.below(5));
    corners.insert({top, left});
    for (std::size_t y = 0; y < 6; ++y)
      for (std::size_t x = 0; x < 6; ++x) {
        // Padded coordinate (top + y, left + x) maps to the source at offset -2.
        const long sy = long(top + y) - 2, sx = long(left + x) - 2;
        const bool inside = sy >= 0 && sy < 6 && sx >= 0 && sx < 6;
        ASSERT_EQ(double(out.at(0, y, x)),
                  inside ? pattern(0, std::size_t(sy), std::size_t(sx)) : 0.0);
      }
  }
  EXPECT_EQ(corners.size(), 25u);  // every corner is reachable
  // Padding wider than the image: windows may lie wholly in the fill; each equals the
  // window of the explicitly padded image.
  const Image small = pattern_image(2, 2, 3);
  for (std::uint64_t seed = 0; seed < 200; ++seed) {
    Rng rng(seed), replay(seed);
    const Image out = random_crop(small, 3, 2, 4, rng, -5.0f);
    const auto top = std::size_t(replay.below(2 + 8 - 3 + 1));
    const auto left = std::size_t(replay.below(3 + 8 - 2 + 1));
    ASSERT_EQ(out.pixels, crop(pad(small, 4, -5.0f), top, left, 3, 2).pixels) << seed;
  }
  Rng rng(0);
  expect_error([&] { random_crop(img, 11, 6, 2, rng); }, "cannot take 11 x 6");
}

TEST(Transforms, HorizontalFlip) {
  const Image img = pattern_image(3, 4, 5);
  const Image f = horizontal_flip(img);
  for (std::size_t c = 0; c < 3; ++c)
    for (std::size_t y = 0; y < 4; ++y)
      for (std::size_t x = 0; x < 5; ++x) EXPECT_EQ(double(f.at(c, y, x)), pattern(c, y, 4 - x));
  // p = 0 and p = 1 are certain; p = 0.5 flips about half.
  Rng rng(4);
  EXPECT_EQ(random_horizontal_flip(img, 0.0, rng).pixels, img.pixels);
  EXPECT_EQ(random_horizontal_flip(img, 1.0, rng).pixels, f.pixels);
  int flips = 0;
  for (int i = 0; i < 2000; ++i) flips += random_horizontal_flip(img, 0.5, rng).pixels == f.pixels;
  EXPECT_NEAR(flips, 1000, 5 * 22.4);  // Binomial(2000, 1/2)
  expect_error([&] { random_horizontal_flip(img, 1.5, rng); }, "not in [0, 1]");
}

TEST(Transforms, ResizeBilinearMatchesPyTorch) {
  std::ifstream f(EMBER_TEST_DATA_DIR "/resize_bilinear_torch.txt");
  ASSERT_TRUE(f) << "missing " EMBER_TEST_DATA_DIR "/resize_bilinear_torch.txt";
  std::string line;
  int cases = 0;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::size_t c, h, w, oh, ow;
    in >> c >> h >> w >> oh >> ow;
    const Image out = resize_bilinear(pattern_image(c, h, w), oh, ow);
    ASSERT_EQ(out.shape_string(), Image(c, oh, ow).shape_string());
    for (std::size_t i = 0; i < c * oh * ow; ++i) {
      double expect;
      in >> expect;
      ASSERT_NEAR(out.pixels[i], expect, 2e-6) << line.substr(0, 20) << " element " << i;
    }
    ++cases;
  }
  EXPECT_EQ(cases, 6);
  // Same size is the identity.
  const Image img = pattern_image(2, 5, 3);
  EXPECT_EQ(resize_bilinear(img, 5, 3).pixels, img.pixels);
  expect_error([&] { resize_bilinear(img, 0, 3); }, "cannot resize an image [2, 5, 3] to 0 x 3");
}

TEST(Transforms, StackImagesAndImageBatcher) {
  std::vector<LabeledImage> items{{pattern_image(1, 2, 2), 3}, {pattern_image(1, 2, 2), 0}};
  items[1].image.at(0, 1, 1) = 7.0f;
  const auto b = ImageBatcher{10}.batch(items, Device::cpu());
  EXPECT_EQ(b.images.shape(), (Shape{2, 1, 2, 2}));
  const auto v = b.images.to_data().to_vector<float>();
  EXPECT_EQ(std::vector<float>(v.begin(), v.begin() + 4), items[0].image.pixels);
  EXPECT_EQ(v[7], 7.0f);
  EXPECT_EQ(b.labels.to_data().to_vector<std::int64_t>(), (std::vector<std::int64_t>{3, 0}));
  items[1].label = 10;
  expect_error([&] { ImageBatcher{10}.batch(items, Device::cpu()); },
               "item 1 of the batch has label 10, outside the 10 classes");
  items[1] = {pattern_image(1, 3, 2), 1};
  expect_error([&] { ImageBatcher{}.batch(items, Device::cpu()); },
               "image 1 is [1, 3, 2] but image 0 is [1, 2, 2]");
}
