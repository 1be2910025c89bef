// Memory-mapped loads (LoadOptions::mmap): a Cpu tensor of the file's dtype is the file's
// mapped pages (Backend::adopt_host), not a copy; its values equal a plain load's; writes
// to it (an optimizer's in-place step) go to copy-on-write pages and never to the file; the
// mapping lives as long as the tensors, after the loader and the file itself are gone.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include <ember/ember.hpp>

#include "record/test_support.hpp"

using namespace ember;
using namespace ember::record_test;

namespace {

struct Big {
  std::vector<nn::Param<Tensor<2>>> ws;
  nn::Buffer<Tensor<1, Int>> steps;
  EMBER_MODULE(Big, ws, steps)
};

constexpr std::size_t kN = 4, kRows = 256, kCols = 256;
constexpr std::size_t kParamBytes = kRows * kCols * sizeof(float), kModelBytes = kN * kParamBytes;
constexpr std::size_t kSlack = 64 * 1024;  // metadata, small tensors, the pool's rounding

Big make_big(const Device& d, double scale) {
  std::vector<nn::Param<Tensor<2>>> ws;
  for (std::size_t i = 0; i < kN; ++i)
    ws.emplace_back(
        Tensor<2>::from_data(ramp(Shape{kRows, kCols}, scale * double(i + 1) / 1000.0), d));
  return Big{std::move(ws), nn::Buffer<Tensor<1, Int>>(
                                Tensor<1, Int>::from_data(TensorData::from<std::int64_t>({3}), d),
                                /*scalar=*/true)};
}

std::size_t in_use(const Device& d) { return memory_stats(d).in_use; }

TEST(RecordMmap, AMappedLoadSharesTheFilesPagesAndEqualsAPlainLoad) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  for (const std::string file : {"big.ember", "big.safetensors"}) {
    SCOPED_TRACE(file);
    record::save(make_big(cpu, 1.0), dir / file);
    const auto plain = record::load_tensors(dir / file, cpu);

    const std::size_t before = in_use(cpu);
    const auto mapped = record::load_tensors(dir / file, cpu, {.mmap = true});
    const std::size_t after = in_use(cpu);
    ASSERT_EQ(mapped.size(), plain.size());
    for (std::size_t i = 0; i < plain.size(); ++i) {
      EXPECT_EQ(mapped[i].key, plain[i].key);
      EXPECT_EQ(mapped[i].tensor.to_data(), plain[i].tensor.to_data()) << plain[i].key;
    }
    // Every tensor of .ember is 256-byte aligned, and ember's safetensors start their data
    // at a multiple of 64 (these tensors' sizes keep it): none is copied into the allocator.
    EXPECT_LT(after, before + kSlack) << "in use " << before << " -> " << after;
  }
  // A plain load, and a mapped load that casts, copy into the allocator.
  std::size_t before = in_use(cpu);
  const auto copied = record::load_tensors(dir / "big.ember", cpu);
  EXPECT_GE(in_use(cpu), before + kModelBytes);
  before = in_use(cpu);
  const auto cast =
      record::load_tensors(dir / "big.ember", cpu, {.float_dtype = DType::F64, .mmap = true});
  EXPECT_GE(in_use(cpu), before + 2 * kModelBytes);
  EXPECT_EQ(cast[0].tensor.to_data(), copied[0].tensor.to_data().convert(DType::F64));
}

TEST(RecordMmap, InPlaceStepsOnAMappedLoadNeverWriteTheFile) {
  const Device cpu = Device::cpu(), ad = cpu.autodiff();
  TmpDir dir;
  const Big saved = make_big(cpu, 1.0);
  record::save(saved, dir / "big.ember");
  const auto bytes = read_file(dir / "big.ember");

  Big zeros = make_big(cpu, 0.0);
  const std::size_t before_load = in_use(cpu);
  Big net = record::load(std::move(zeros), dir / "big.ember", ad, {.mmap = true});
  // The module's own tensors were released and the loaded ones are the file's pages.
  EXPECT_LT(in_use(cpu) + kModelBytes, before_load + kSlack);
  expect_same_tensors(net, record::load(make_big(cpu, 0.0), dir / "big.ember", ad));
  // The caller keeps the gradients, so the step cannot take their buffers for the params:
  // it writes the params where they are, in the mapping.
  optim::GradientsParams gp;
  std::vector<DynTensor> kept;
  for (const auto& w : net.ws) {
    kept.push_back(ops::full(Shape{kRows, kCols}, 0.5, DType::F32, cpu));
    gp.insert(w.id(), kept.back());
  }
  auto opt = optim::SgdConfig{}.init();
  const std::size_t before = in_use(cpu);
  net = opt.step(0.25, std::move(net), std::move(gp));
  // So the step wrote the params in the mapping's (copy-on-write) pages.
  EXPECT_LT(in_use(cpu), before + kSlack) << "the step copied the params";
  for (std::size_t i = 0; i < kN; ++i) {
    const auto want = saved.ws[i].val().to_data().to_vector<float>();
    const auto got = net.ws[i].val().to_data().to_vector<float>();
    ASSERT_EQ(got.size(), want.size());
    for (std::size_t k = 0; k < want.size(); k += 997) EXPECT_FLOAT_EQ(got[k], want[k] - 0.125f);
  }
  // The file has its bytes, and a new load (mapped or not) its values.
  EXPECT_EQ(read_file(dir / "big.ember"), bytes);
  expect_same_tensors(record::load(make_big(cpu, 0.0), dir / "big.ember", cpu, {.mmap = true}),
                      saved);
}

TEST(RecordMmap, TheMappingLivesAsLongAsItsTensors) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  const Big saved = make_big(cpu, 1.0);
  record::save(saved, dir / "big.ember");
  std::vector<record::NamedTensor> mapped;
  {
    Big net = record::load(make_big(cpu, 0.0), dir / "big.ember", cpu, {.mmap = true});
    mapped.push_back({"w1", net.ws[1].val().dyn()});
  }  // the loader, its reader and the module are gone
  // The path now names another file, then nothing: the mapped inode stays.
  record::save(make_big(cpu, -2.0), dir / "big.ember");
  std::filesystem::remove(dir / "big.ember");
  EXPECT_EQ(mapped[0].tensor.to_data(), saved.ws[1].val().to_data());
  // A view of an adopted tensor keeps the mapping too.
  DynTensor row = ops::slice(mapped[0].tensor, {{3, 4}});
  mapped.clear();
  EXPECT_EQ(row.to_data().to_vector<float>(),
            ops::slice(saved.ws[1].val().dyn(), {{3, 4}}).to_data().to_vector<float>());
}

TEST(RecordMmap, AMappedLoadStillChecksEachTensorsChecksum) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  record::save(make_big(cpu, 1.0), dir / "big.ember");
  auto bytes = read_file(dir / "big.ember");
  bytes[256 + kParamBytes + 40] ^= std::byte{0x10};  // inside ws.1's data
  {
    std::ofstream f(dir / "bad.ember", std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  expect_error_contains(
      [&] { record::load(make_big(cpu, 0.0), dir / "bad.ember", cpu, {.mmap = true}); },
      "the data of 'ws.1' fails its checksum");
  // Without the check the flipped bit loads as it is.
  Big b = record::load(make_big(cpu, 0.0), dir / "bad.ember", cpu,
                       {.mmap = true, .verify_checksums = false});
  EXPECT_FALSE(b.ws[1].val().to_data() == make_big(cpu, 1.0).ws[1].val().to_data());
}

}  // namespace
