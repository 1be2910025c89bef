// MNIST-format datasets: items against the bytes of the files read directly (zlib and the
// IDX layout spelled out here), the batcher's normalisation against f64, a whole loader
// epoch over Fashion-MNIST, and clear errors for bad files.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include <ember/data/data.hpp>
#include <ember/ember.hpp>

#include "data/expect_error.hpp"

using namespace ember;
using ember::data::testing::expect_error;
using namespace ember::data;

namespace {

// The decompressed bytes of a gzip file.
std::vector<std::uint8_t> gunzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr) << path;
  std::vector<std::uint8_t> out;
  std::uint8_t buf[1 << 16];
  int got;
  while ((got = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + got);
  gzclose(f);
  return out;
}
std::uint32_t be32(const std::vector<std::uint8_t>& b, std::size_t at) {
  return std::uint32_t(b[at]) << 24 | std::uint32_t(b[at + 1]) << 16 |
         std::uint32_t(b[at + 2]) << 8 | b[at + 3];
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ember_test_mnist_" + name)).string();
}

bool have_fashion_mnist() {
  return std::filesystem::exists(FashionMnist::default_dir() + "/train-images-idx3-ubyte.gz");
}

}  // namespace

TEST(Mnist, FashionMnistItemsAreTheFilesBytes) {
  if (!have_fashion_mnist()) {
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed in "
                 << FashionMnist::default_dir();
  }
  const std::string dir = FashionMnist::default_dir();
  for (const std::string prefix : {"train", "t10k"}) {
    const auto images = gunzip(dir + "/" + prefix + "-images-idx3-ubyte.gz");
    const auto labels = gunzip(dir + "/" + prefix + "-labels-idx1-ubyte.gz");
    // IDX headers: magic 0x00000803 / 0x00000801, then the dims, big-endian.
    ASSERT_EQ(be32(images, 0), 0x803u);
    ASSERT_EQ(be32(labels, 0), 0x801u);
    const std::size_t n = be32(images, 4), h = be32(images, 8), w = be32(images, 12);
    const auto ds = prefix == "train" ? FashionMnist::train() : FashionMnist::test();
    EXPECT_EQ(ds->len(), prefix == "train" ? 60000u : 10000u);
    ASSERT_EQ(ds->len(), n);
    EXPECT_EQ(ds->height(), 28u);
    EXPECT_EQ(ds->width(), 28u);
    for (std::size_t i : {std::size_t(0), std::size_t(1), std::size_t(4321), n - 1}) {
      const MnistItem item = ds->get(i).value();
      ASSERT_EQ(item.pixels.size(), h * w);
      EXPECT_TRUE(std::equal(item.pixels.begin(), item.pixels.end(),
                             images.begin() + std::ptrdiff_t(16 + i * h * w)))
          << prefix << " item " << i;
      EXPECT_EQ(item.label, labels[8 + i]) << prefix << " item " << i;
    }
    EXPECT_FALSE(ds->get(n).has_value());
  }
  EXPECT_STREQ(FashionMnist::class_names()[9], "Ankle boot");
}

TEST(Mnist, BatcherNormalisesAgainstF64) {
  MnistItem a{std::vector<std::uint8_t>{0, 255, 17, 128, 3, 99}, 2, 3, 7};
  MnistItem b{std::vector<std::uint8_t>{1, 2, 3, 4, 5, 6}, 2, 3, 0};
  const MnistBatcher batcher{0.25f, 0.5f};
  const auto batch = batcher.batch({a, b}, Device::cpu());
  EXPECT_EQ(batch.images.shape(), (Shape{2, 1, 2, 3}));
  const auto v = batch.images.to_data().to_vector<float>();
  for (std::size_t k = 0; k < 6; ++k) {
    EXPECT_NEAR(v[k], (a.pixels[k] / 255.0 - 0.25) / 0.5, 1e-6);
    EXPECT_NEAR(v[6 + k], (b.pixels[k] / 255.0 - 0.25) / 0.5, 1e-6);
  }
  EXPECT_EQ(batch.labels.to_data().to_vector<std::int64_t>(), (std::vector<std::int64_t>{7, 0}));
  b.width = 2;
  b.pixels.resize(4);
  expect_error(
      [&] {
        batcher.batch({a, b}, Device::cpu());
      },
      "item 1 is 2 x 2 but item 0 is 2 x 3");
  // mnist_image gives the [0, 1] pixels as one channel.
  const Image img = mnist_image(a);
  EXPECT_EQ(img.shape_string(), "[1, 2, 3]");
  EXPECT_EQ(img.at(0, 0, 1), 1.0f);
}

TEST(Mnist, ALoaderEpochOverFashionMnist) {
  if (!have_fashion_mnist()) {
    GTEST_SKIP() << "Debian's dataset-fashion-mnist is not installed in "
                 << FashionMnist::default_dir();
  }
  auto test = FashionMnist::test();
  // Augmented as a training pipeline would be: pad-and-crop, flip, then the batcher.
  auto augmented = std::make_shared<RandomMapperDataset<MnistItem, LabeledImage>>(
      test, 3, [](MnistItem m, Rng& rng) {
        Image img = random_crop(mnist_image(m), 28, 28, 2, rng);
        img = random_horizontal_flip(std::move(img), 0.5, rng);
        return LabeledImage{normalize(std::move(img), {FashionMnist::mean}, {FashionMnist::std}),
                            m.label};
      });
  auto loader = DataLoaderBuilder(ImageBatcher{10})
                    .batch_size(1000)
                    .shuffle(1)
                    .num_workers(2)
                    .build(augmented);
  std::vector<std::int64_t> counts(10, 0);
  std::size_t seen = 0;
  for (auto& b : loader) {
    EXPECT_EQ(b.images.shape(), (Shape{1000, 1, 28, 28}));
    for (auto l : b.labels.to_data().to_vector<std::int64_t>()) ++counts[std::size_t(l)];
    seen += b.labels.shape()[0];
  }
  EXPECT_EQ(seen, 10000u);
  for (auto c : counts) EXPECT_EQ(c, 1000);  // the test split is balanced
}

TEST(Mnist, BadFiles) {
  const std::string img = temp_path("img.gz"), lab = temp_path("lab.gz");
  data::save_idx(
      img, TensorData::from<std::uint8_t>(std::vector<std::uint8_t>(2 * 3 * 3, 9), Shape{2, 3, 3}));
  data::save_idx(lab, TensorData::from<std::uint8_t>({4, 1}, Shape{2}));
  MnistDataset ok(img, lab);
  EXPECT_EQ(ok.len(), 2u);
  EXPECT_EQ(ok.get(0)->label, 4);
  expect_error([&] { MnistDataset(img, lab, 4); }, "label 4 of item 0 is outside the 4 classes");
  data::save_idx(lab, TensorData::from<std::uint8_t>({1, 2, 3}, Shape{3}));
  expect_error([&] { MnistDataset(img, lab); }, "holds 2 images but '" + lab + "' holds 3 labels");
  data::save_idx(lab, TensorData::from<float>({1, 2}, Shape{2}));
  expect_error([&] { MnistDataset(img, lab); }, "expected u8 labels [N]");
  expect_error([&] { MnistDataset(img, temp_path("missing.gz")); }, "cannot open");
  expect_error([&] { FashionMnist::train(temp_path("nowhere")); }, "nowhere");
  std::remove(img.c_str());
  std::remove(lab.c_str());
}
