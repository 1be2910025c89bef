// The IDX loader: round trips through files the test writes itself, and clear errors for
// missing, truncated and malformed files.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <ember/ember.hpp>

using namespace ember;

namespace {
std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("ember_test_idx_" + name)).string();
}
void write_raw(const std::string& path, const std::vector<unsigned char>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}
void expect_error_naming(const std::string& path, const std::string& what) {
  try {
    data::load_idx(path);
    ADD_FAILURE() << "no error for " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}
}  // namespace

TEST(Idx, RawU8File) {
  // Magic 0x00000803: u8, rank 3; dims 2 x 2 x 3.
  const std::string path = temp_path("raw.idx");
  std::vector<unsigned char> b{0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3};
  for (unsigned char i = 0; i < 12; ++i) b.push_back(static_cast<unsigned char>(i * 20));
  write_raw(path, b);
  auto d = data::load_idx(path);
  EXPECT_EQ(d.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(d.dtype(), DType::U8);
  EXPECT_EQ(d.to_vector<int>()[11], 220);
  std::remove(path.c_str());
}

TEST(Idx, GzipRoundTripBigEndian) {
  const std::string path = temp_path("rt.idx.gz");
  auto f = TensorData::from<float>({1.5f, -2.25f, 3e7f, 0.f, 7.f, -1e-3f}, Shape{3, 2});
  data::save_idx(path, f);
  EXPECT_TRUE(data::load_idx(path) == f);
  auto i = TensorData::from<std::int32_t>({1, -2, 70000}, Shape{3});
  data::save_idx(path, i);
  EXPECT_TRUE(data::load_idx(path) == i);
  std::remove(path.c_str());
}

TEST(Idx, Errors) {
  expect_error_naming(temp_path("does_not_exist.gz"), "cannot open");
  const std::string path = temp_path("bad.idx");
  write_raw(path, {0, 0, 8, 1, 0, 0, 0, 5, 1, 2});
  expect_error_naming(path, "truncated");
  write_raw(path, {1, 2, 3, 4, 5, 6, 7, 8});
  expect_error_naming(path, "bad magic");
  write_raw(path, {0, 0, 8, 1, 0, 0, 0, 1, 9, 9});
  expect_error_naming(path, "trailing");
  std::remove(path.c_str());
}
