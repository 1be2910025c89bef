// Image files: a BMP written byte by byte here (its layout spelled out) and PNGs written by
// stb_image_write decode to their pixels; ImageFolderDataset's classes, order and labels;
// files that do not decode are errors naming them.
#include <gtest/gtest.h>
#include <stb_image_write.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <ember/data/data.hpp>
#include <ember/data/image_folder.hpp>

#include "data/expect_error.hpp"

using namespace ember;
using ember::data::testing::expect_error;
using namespace ember::data;
namespace fs = std::filesystem;

namespace {

fs::path fresh_dir(const std::string& name) {
  const auto p = fs::temp_directory_path() / ("ember_test_images_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

void put_u32(std::vector<std::uint8_t>& b, std::uint32_t v) {
  for (int s = 0; s < 32; s += 8) b.push_back(std::uint8_t(v >> s));
}

// A 24-bit uncompressed BMP: 14-byte file header, 40-byte info header, then rows bottom-up,
// each pixel B, G, R, each row padded to a multiple of 4 bytes. rgb is HWC, top row first.
std::vector<std::uint8_t> bmp(const std::vector<std::uint8_t>& rgb, std::uint32_t w,
                              std::uint32_t h) {
  const std::uint32_t stride = (3 * w + 3) / 4 * 4;
  std::vector<std::uint8_t> b{'B', 'M'};
  put_u32(b, 54 + stride * h);
  put_u32(b, 0);
  put_u32(b, 54);
  put_u32(b, 40);
  put_u32(b, w);
  put_u32(b, h);
  b.insert(b.end(), {1, 0, 24, 0});           // planes, bits per pixel
  for (int i = 0; i < 6; ++i) put_u32(b, 0);  // no compression, sizes, palette
  for (std::uint32_t y = h; y-- > 0;) {
    for (std::uint32_t x = 0; x < w; ++x) {
      const std::uint8_t* p = &rgb[(y * w + x) * 3];
      b.insert(b.end(), {p[2], p[1], p[0]});
    }
    for (std::uint32_t k = 3 * w; k < stride; ++k) b.push_back(0);
  }
  return b;
}

void write_bytes(const fs::path& p, const std::vector<std::uint8_t>& bytes) {
  std::ofstream(p, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

std::vector<std::uint8_t> pattern(std::size_t n, int salt) {
  std::vector<std::uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::uint8_t((i * 37 + std::size_t(salt) * 11) % 256);
  return v;
}

// The HWC bytes as CHW floats / 255: what decoding must give.
void expect_pixels(const Image& img, const std::vector<std::uint8_t>& hwc, std::size_t h,
                   std::size_t w, std::size_t c) {
  ASSERT_EQ(img.shape_string(), Image(c, h, w).shape_string());
  for (std::size_t y = 0; y < h; ++y)
    for (std::size_t x = 0; x < w; ++x)
      for (std::size_t k = 0; k < c; ++k)
        ASSERT_EQ(img.at(k, y, x), float(hwc[(y * w + x) * c + k]) / 255.0f)
            << "pixel " << y << "," << x << "," << k;
}

}  // namespace

TEST(ImageFiles, BmpAndPngDecodeToTheirPixels) {
  const auto dir = fresh_dir("decode");
  const auto rgb = pattern(5 * 3 * 3, 1);  // 3 rows of 5 pixels: rows need padding
  write_bytes(dir / "a.bmp", bmp(rgb, 5, 3));
  expect_pixels(load_image((dir / "a.bmp").string()), rgb, 3, 5, 3);

  const auto gray = pattern(4 * 6, 2);
  ASSERT_NE(stbi_write_png((dir / "g.png").c_str(), 6, 4, 1, gray.data(), 6), 0);
  expect_pixels(load_image((dir / "g.png").string()), gray, 4, 6, 1);
  // Asked for 3 channels, a grey image repeats its value.
  const Image g3 = load_image((dir / "g.png").string(), 3);
  ASSERT_EQ(g3.shape_string(), "[3, 4, 6]");
  EXPECT_EQ(g3.at(2, 3, 5), float(gray[3 * 6 + 5]) / 255.0f);

  // JPEG is lossy: a flat colour comes back within a few levels.
  std::vector<std::uint8_t> flat(8 * 8 * 3);
  for (std::size_t i = 0; i < flat.size(); ++i) flat[i] = i % 3 == 0 ? 200 : i % 3 == 1 ? 40 : 90;
  ASSERT_NE(stbi_write_jpg((dir / "f.jpg").c_str(), 8, 8, 3, flat.data(), 95), 0);
  const Image j = load_image((dir / "f.jpg").string());
  ASSERT_EQ(j.shape_string(), "[3, 8, 8]");
  EXPECT_NEAR(j.at(0, 4, 4) * 255, 200, 4);
  EXPECT_NEAR(j.at(1, 4, 4) * 255, 40, 4);
  EXPECT_NEAR(j.at(2, 4, 4) * 255, 90, 4);
  fs::remove_all(dir);
}

TEST(ImageFiles, FolderClassesOrderAndLoader) {
  const auto root = fresh_dir("folder");
  fs::create_directories(root / "dog" / "nested");
  fs::create_directories(root / "cat");
  fs::create_directories(root / "empty");
  const auto a = pattern(4 * 4 * 3, 3), b = pattern(4 * 4 * 3, 4), c = pattern(4 * 4 * 3, 5);
  write_bytes(root / "dog" / "z.BMP", bmp(a, 4, 4));
  ASSERT_NE(stbi_write_png((root / "dog" / "nested" / "b.png").c_str(), 4, 4, 3, b.data(), 12), 0);
  ASSERT_NE(stbi_write_png((root / "cat" / "1.png").c_str(), 4, 4, 3, c.data(), 12), 0);
  write_bytes(root / "cat" / "notes.txt", {'h', 'i'});  // not an image extension: skipped

  ImageFolderDataset d(root.string());
  EXPECT_EQ(d.classes(), (std::vector<std::string>{"cat", "dog", "empty"}));
  ASSERT_EQ(d.len(), 3u);
  // cat/1.png, then dog's files in sorted path order: dog/nested/b.png < dog/z.BMP.
  EXPECT_EQ(d.label(0), 0);
  EXPECT_EQ(d.label(1), 1);
  EXPECT_EQ(d.label(2), 1);
  EXPECT_EQ(fs::path(d.path(1)).filename(), "b.png");
  expect_pixels(d.get(0)->image, c, 4, 4, 3);
  expect_pixels(d.get(1)->image, b, 4, 4, 3);
  expect_pixels(d.get(2)->image, a, 4, 4, 3);
  EXPECT_FALSE(d.get(3).has_value());

  auto ds = std::make_shared<ImageFolderDataset>(root.string());
  auto loader = DataLoaderBuilder(ImageBatcher{3}).batch_size(2).num_workers(2).build(ds);
  std::vector<std::int64_t> labels;
  for (auto& batch : loader) {
    EXPECT_EQ(batch.images.shape()[1], 3u);
    for (auto l : batch.labels.to_data().to_vector<std::int64_t>()) labels.push_back(l);
  }
  EXPECT_EQ(labels, (std::vector<std::int64_t>{0, 1, 1}));
  fs::remove_all(root);
}

TEST(ImageFiles, Errors) {
  const auto root = fresh_dir("errors");
  expect_error([&] { ImageFolderDataset((root / "missing").string()); }, "is not a folder");
  fs::create_directories(root / "a");
  expect_error([&] { ImageFolderDataset(root.string()); }, "holds no images in 1 class folders");
  // A truncated PNG and text named .jpg: listed, and an error naming the file when read.
  const auto good = pattern(4 * 4, 6);
  ASSERT_NE(stbi_write_png((root / "a" / "t.png").c_str(), 4, 4, 1, good.data(), 4), 0);
  fs::resize_file(root / "a" / "t.png", 30);
  write_bytes(root / "a" / "u.jpg", {'n', 'o', 't', ' ', 'a', ' ', 'j', 'p', 'g'});
  ImageFolderDataset d(root.string());
  ASSERT_EQ(d.len(), 2u);
  expect_error([&] { d.get(0); }, (root / "a" / "t.png").string() + "' does not decode");
  expect_error([&] { d.get(1); }, (root / "a" / "u.jpg").string() + "' does not decode");
  // The error also surfaces through a loader's workers.
  auto loader = DataLoaderBuilder(ImageBatcher{})
                    .num_workers(2)
                    .build(std::make_shared<ImageFolderDataset>(root.string()));
  expect_error(
      [&] {
        for (auto& b : loader) (void)b;
      },
      "does not decode");
  expect_error([&] { load_image((root / "nothing.png").string()); }, "cannot open");
  expect_error([&] { decode_image({}, 0, "blob 7"); }, "'blob 7' is empty");
  expect_error([&] { decode_image({1, 2}, 5, "x"); }, "5 channels requested");
  // A BMP whose header declares 7 x 5000000 pixels in 54 + 5 * 24 = 174 bytes (the
  // height is at offset 22).
  auto big = bmp(pattern(7 * 5 * 3, 1), 7, 5);
  const std::uint32_t h = 5000000;
  for (int k = 0; k < 4; ++k) big[std::size_t(22 + k)] = std::uint8_t(h >> (8 * k));
  expect_error([&] { decode_image(big, 0, "huge.bmp"); },
               "'huge.bmp' declares 7 x 5000000 pixels, more than its 174 bytes can hold");
  fs::remove_all(root);
}

TEST(ImageFiles, CorruptedFilesDecodeOrFailCleanly) {
  // Valid PNG and BMP files with random bytes overwritten or cut short: each decodes to an
  // image of the declared size or is an ember::Error naming the source.
  const auto dir = fresh_dir("corrupt");
  const auto rgb = pattern(7 * 5 * 3, 9);
  ASSERT_NE(stbi_write_png((dir / "p.png").c_str(), 7, 5, 3, rgb.data(), 21), 0);
  std::ifstream in(dir / "p.png", std::ios::binary);
  const std::vector<std::uint8_t> png((std::istreambuf_iterator<char>(in)),
                                      std::istreambuf_iterator<char>());
  Rng rng(5);
  int ok = 0, failed = 0;
  for (const auto& original : {png, bmp(rgb, 7, 5)}) {
    for (int round = 0; round < 300; ++round) {
      auto bytes = original;
      if (round % 3 == 0) bytes.resize(std::size_t(rng.below(bytes.size())) + 1);
      for (int k = 0; k < 4; ++k) bytes[rng.below(bytes.size())] = std::uint8_t(rng.below(256));
      try {
        const Image img = decode_image(bytes, 3, "mutant");
        EXPECT_EQ(img.pixels.size(), img.channels * img.height * img.width);
        ++ok;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("'mutant'"), std::string::npos) << e.what();
        ++failed;
      }
    }
  }
  EXPECT_GT(failed, 0);
  EXPECT_GT(ok + failed, 0);
  fs::remove_all(dir);
}
