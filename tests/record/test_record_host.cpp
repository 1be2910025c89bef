// Host access in records (Note [Host access] in ember/backend/backend.hpp, Note [Direct
// reads] in src/record/record.cpp): a plain Cpu load reads each tensor straight into a fresh
// tensor's buffer (Backend::empty_host) with no from_data copy, and a save writes each
// tensor from its own buffer (Backend::host_data) with no to_data copy; a backend that
// answers "none" (as Cuda does), a dtype cast, a strided tensor and a pending fused value
// take the copying paths and give the same values; a failure mid-load names the file and the
// key and leaves nothing behind.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <memory>

#include <ember/ember.hpp>

#include "record/test_support.hpp"

using namespace ember;
using namespace ember::record_test;

namespace {

// The Cpu backend, counting the calls that move data in and out; with host = false it
// answers "none" to the host hooks, as a backend whose tensors live in device memory does.
class CountingCpu final : public backend::Backend {
 public:
  explicit CountingCpu(bool host) : inner_(Device::cpu().backend_ptr()), host_(host) {}
  std::string name() const override { return "cpu"; }
  ir::Handle from_data(const TensorData& d) override {
    ++from_data_calls;
    return inner_->from_data(d);
  }
  HostTensor empty_host(const Shape& shape, DType dtype) override {
    ++empty_host_calls;
    return host_ ? inner_->empty_host(shape, dtype) : HostTensor{};
  }
  const std::byte* host_data(const ir::Handle& x) override {
    ++host_data_calls;
    return host_ ? inner_->host_data(x) : nullptr;
  }
  TensorData to_data(const ir::Handle& x) override {
    ++to_data_calls;
    return inner_->to_data(x);
  }
  std::vector<ir::Handle> execute(ir::Op op) override { return inner_->execute(std::move(op)); }
  bool supports(const ir::Op& op) const override { return inner_->supports(op); }
  void seed(std::uint64_t s) override { inner_->seed(s); }
  backend::MemoryStats memory_stats() const override { return inner_->memory_stats(); }
  void empty_cache() override { inner_->empty_cache(); }
  void sync() override {}

  void reset() { from_data_calls = empty_host_calls = host_data_calls = to_data_calls = 0; }
  int from_data_calls = 0, empty_host_calls = 0, host_data_calls = 0, to_data_calls = 0;

 private:
  std::shared_ptr<backend::Backend> inner_;
  bool host_;
};

struct Model {
  std::vector<nn::Param<Tensor<2>>> ws;
  nn::Buffer<Tensor<1, Int>> steps;
  EMBER_MODULE(Model, ws, steps)
};

constexpr std::size_t kN = 3, kRows = 300, kCols = 1000;  // 1.2 MB each: several read chunks

// Element k of ws[i] is (i + 1) * scale * (0.1 k - 0.35) (ramp); steps is [41].
Model make_model(const Device& d, double scale) {
  std::vector<nn::Param<Tensor<2>>> ws;
  for (std::size_t i = 0; i < kN; ++i)
    ws.emplace_back(Tensor<2>::from_data(ramp(Shape{kRows, kCols}, scale * double(i + 1)), d));
  return Model{std::move(ws), nn::Buffer<Tensor<1, Int>>(Tensor<1, Int>::from_data(
                                  TensorData::from<std::int64_t>({41}), d))};
}

// Checks m against make_model(_, scale)'s closed form, each element computed in f64.
void expect_model(const Model& m, double scale) {
  ASSERT_EQ(m.ws.size(), kN);
  for (std::size_t i = 0; i < kN; ++i) {
    const auto got = m.ws[i].val().to_data().convert(DType::F64).to_vector<double>();
    ASSERT_EQ(got.size(), kRows * kCols);
    for (std::size_t k = 0; k < got.size(); ++k) {
      const auto want = static_cast<float>(scale * double(i + 1) * (0.1 * double(k) - 0.35));
      ASSERT_EQ(got[k], double(want)) << "ws." << i << " element " << k;
    }
  }
  EXPECT_EQ(m.steps.val().to_data().to_vector<std::int64_t>(), std::vector<std::int64_t>{41});
}

TEST(RecordHost, APlainCpuLoadReadsEachTensorIntoItsOwnBufferWithNoCopy) {
  TmpDir dir;
  for (const std::string file : {"m.ember", "m.safetensors"}) {
    SCOPED_TRACE(file);
    record::save(make_model(Device::cpu(), 1.0), dir / file);
    auto be = std::make_shared<CountingCpu>(/*host=*/true);
    const Device dev(be);
    Model zeros = make_model(dev, 0.0);
    be->reset();
    const Model m = record::load(std::move(zeros), dir / file, dev);
    EXPECT_EQ(be->empty_host_calls, int(kN) + 1);
    EXPECT_EQ(be->from_data_calls, 0);
    expect_model(m, 1.0);
  }
}

TEST(RecordHost, ABackendWithoutHostMemoryLoadsThroughACopy) {
  TmpDir dir;
  record::save(make_model(Device::cpu(), 1.0), dir / "m.ember");
  auto be = std::make_shared<CountingCpu>(/*host=*/false);
  const Device dev(be);
  Model zeros = make_model(dev, 0.0);
  be->reset();
  const Model m = record::load(std::move(zeros), dir / "m.ember", dev);
  EXPECT_EQ(be->empty_host_calls, int(kN) + 1);  // asked, answered "none"
  EXPECT_EQ(be->from_data_calls, int(kN) + 1);
  expect_model(m, 1.0);
}

TEST(RecordHost, ACastOnLoadCopiesAndConverts) {
  TmpDir dir;
  record::save(make_model(Device::cpu(), 1.0), dir / "m.ember");
  auto be = std::make_shared<CountingCpu>(/*host=*/true);
  const Device dev(be);
  Model zeros = make_model(dev, 0.0);
  be->reset();
  const auto t = record::load_tensors(dir / "m.ember", dev, {.float_dtype = DType::BF16});
  // The f32 tensors go through the host conversion, the i64 one is read in place.
  EXPECT_EQ(be->from_data_calls, int(kN));
  EXPECT_EQ(be->empty_host_calls, 1);
  ASSERT_EQ(t.size(), kN + 1);
  EXPECT_EQ(t[0].tensor.dtype(), DType::BF16);
  EXPECT_EQ(t[1].tensor.to_data(),
            make_model(Device::cpu(), 1.0).ws[1].val().to_data().convert(DType::BF16));
  EXPECT_EQ(t[kN].tensor.to_data().to_vector<std::int64_t>(), std::vector<std::int64_t>{41});
}

TEST(RecordHost, ASaveWritesEachTensorFromItsOwnBuffer) {
  TmpDir dir;
  for (const bool host : {true, false}) {
    SCOPED_TRACE(host ? "host access" : "no host access");
    auto be = std::make_shared<CountingCpu>(host);
    const Device dev(be);
    const Model m = make_model(dev, -2.0);
    for (const std::string file : {"m.ember", "m.safetensors"}) {
      be->reset();
      record::save(m, dir / file);
      EXPECT_EQ(be->host_data_calls, int(kN) + 1);
      EXPECT_EQ(be->to_data_calls, host ? 0 : int(kN) + 1);
      // Loaded with every checksum checked, on the plain Cpu.
      expect_model(record::load(make_model(Device::cpu(), 0.0), dir / file, Device::cpu()), -2.0);
    }
  }
}

TEST(RecordHost, AStridedTensorSavesThroughACopy) {
  const Device cpu = Device::cpu();
  const DynTensor x = ops::from_data(ramp(Shape{kRows, kCols}, 1.0), cpu);
  const DynTensor xt = ops::permute(x, {1, 0});  // a strided view of x's buffer
  EXPECT_FALSE(ops::host_bytes(xt).has_value());
  ASSERT_TRUE(ops::host_bytes(x).has_value());
  EXPECT_EQ(ops::host_bytes(x)->size(), kRows * kCols * sizeof(float));
  TmpDir dir;
  record::save_tensors({{"x", x}, {"xt", xt}}, dir / "t.ember");
  const auto back = record::load_tensors(dir / "t.ember", cpu);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].tensor.to_data(), x.to_data());
  const auto v = back[1].tensor.to_data().to_vector<float>();
  const auto src = x.to_data().to_vector<float>();
  ASSERT_EQ(back[1].tensor.shape(), (Shape{kCols, kRows}));
  for (std::size_t c = 0; c < kCols; c += 7) {
    for (std::size_t r = 0; r < kRows; r += 5) ASSERT_EQ(v[c * kRows + r], src[r * kCols + c]);
  }
}

// Through the decorators: a pending fused value is computed before its bytes are read, and a
// load onto an autodiff or fusion device gets the wrapped fresh tensors.
TEST(RecordHost, DecoratorsForwardHostAccess) {
  TmpDir dir;
  for (const Device& dev :
       {Device::cpu().fusion(), Device::cpu().autodiff(), Device::cpu().fusion().autodiff()}) {
    SCOPED_TRACE(dev.name());
    const Model base = make_model(dev, 1.0);
    // 3 * w, pending in the fusion stream until something reads it.
    std::vector<nn::Param<Tensor<2>>> ws;
    for (const auto& w : base.ws) ws.emplace_back(w.val() * 3.0);
    const Model tripled{std::move(ws), base.steps};
    record::save(tripled, dir / "m.ember");
    ASSERT_TRUE(ops::host_bytes(tripled.ws[0].val().dyn()).has_value());
    const Model m = record::load(make_model(dev, 0.0), dir / "m.ember", dev);
    ASSERT_EQ(m.ws.size(), kN);
    for (std::size_t i = 0; i < kN; ++i) {
      const auto got = m.ws[i].val().to_data().to_vector<float>();
      const auto want = base.ws[i].val().to_data().to_vector<float>();
      ASSERT_EQ(got.size(), want.size());
      for (std::size_t k = 0; k < got.size(); k += 13)
        ASSERT_EQ(got[k], 3.0f * want[k]) << "ws." << i << " element " << k;
      if (dev.is_autodiff()) {
        EXPECT_TRUE(m.ws[i].val().is_require_grad());
      }
    }
    // The fresh tensors are ordinary tensors of the device: ops run on them.
    const double sum =
        ops::reduce_dims(ir::ReduceFn::Sum, ops::cast(m.ws[0].val().dyn(), DType::F64), {0, 1})
            .to_data()
            .to_vector<double>()[0];
    double want = 0;
    for (float v : tripled.ws[0].val().to_data().to_vector<float>()) want += double(v);
    EXPECT_NEAR(sum, want, 1e-9 * std::abs(want));
  }
}

TEST(RecordHost, AFailureMidLoadNamesTheFileAndTheKeyAndLeavesNothing) {
  TmpDir dir;
  record::save(make_model(Device::cpu(), 1.0), dir / "m.ember");
  auto bytes = read_file(dir / "m.ember");
  // Inside ws.1's data: the second of four tensors, after ws.0 was loaded.
  const std::size_t ws1 = 256 + (kRows * kCols * sizeof(float) + 255) / 256 * 256;
  bytes[ws1 + 12345] ^= std::byte{0x04};
  {
    std::ofstream f(dir / "bad.ember", std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  }
  for (const Device& dev :
       {Device::cpu(), Device::cpu().autodiff(), Device::cpu().fusion().autodiff()}) {
    SCOPED_TRACE(dev.name());
    const std::size_t before = memory_stats(dev).in_use;
    std::string message = "'";  // (by append: "'" + std::string trips GCC 12's -Wrestrict)
    message += dir / "bad.ember";
    message += "': the data of 'ws.1' fails its checksum";
    expect_error_contains([&] { record::load(make_model(dev, 0.0), dir / "bad.ember", dev); },
                          message);
    expect_error_contains(
        [&] { record::load_partial(make_model(dev, 0.0), dir / "bad.ember", dev); },
        "the data of 'ws.1' fails its checksum");
    // The module given and the tensors read before the failure are gone.
    EXPECT_EQ(memory_stats(dev).in_use, before);
  }
}

}  // namespace
