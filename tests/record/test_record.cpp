// record::save / load / load_partial / inspect over .ember and safetensors: round trips
// that compare every element with what was saved, the key, shape and dtype checks and
// their report, remapping, dtype casts, bytes in memory, mmap, atomic saves and damaged
// files.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <ember/ember.hpp>
#include <ember/record/ember_format.hpp>

#include "record/test_support.hpp"

using namespace ember;
using namespace ember::record_test;

namespace {

TEST(Record, EmberRoundTripRestoresValuesAndParamIds) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  Net a = make_net(cpu, 1.0);
  record::save(a, dir / "net.ember");
  Net b = record::load(make_net(cpu, -3.0), dir / "net.ember", cpu);
  expect_same_tensors(a, b);
  EXPECT_EQ(b.fc1.weight.id(), a.fc1.weight.id());
  EXPECT_EQ(b.fc2.bias->id(), a.fc2.bias->id());
  EXPECT_EQ(b.stats.num_batches_tracked.val().to_data().to_vector<std::int64_t>(),
            std::vector<std::int64_t>{7});
}

TEST(Record, SafetensorsRoundTripKeepsTheModulesIds) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  Net a = make_net(cpu, 1.0);
  record::save(a, dir / "net.safetensors");
  Net fresh = make_net(cpu, -3.0);
  const nn::ParamId id = fresh.fc1.weight.id();
  Net b = record::load(std::move(fresh), dir / "net.safetensors", cpu);
  expect_same_tensors(a, b);
  EXPECT_EQ(b.fc1.weight.id(), id);  // safetensors stores no ids
}

TEST(Record, ScalarBuffersAreStoredWithShapeEmpty) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  for (const char* file : {"net.ember", "net.safetensors"}) {
    record::save(make_net(cpu, 1.0), dir / file);
    record::RecordInfo info = record::inspect(dir / file);
    const record::TensorInfo* t = info.find("stats.num_batches_tracked");
    ASSERT_NE(t, nullptr) << file;
    EXPECT_EQ(t->shape, Shape{}) << file;
    EXPECT_EQ(t->dtype, DType::I64) << file;
    EXPECT_EQ(info.find("fc1.weight")->shape, (Shape{4, 3})) << file;
  }
}

TEST(Record, InspectListsKeysInVisitOrderWithConfigAndMetadata) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  record::SaveOptions options;
  options.config = nn::Json{{"classes", 2}};
  options.metadata = {{"epoch", "3"}};
  Net a = make_net(cpu, 1.0);
  for (const char* file : {"net.ember", "net.safetensors"}) {
    record::save(a, dir / file, options);
    record::RecordInfo info = record::inspect(dir / file);
    std::vector<std::string> keys;
    for (const auto& t : info.tensors) keys.push_back(t.key);
    EXPECT_EQ(keys, net_keys()) << file;
    EXPECT_EQ(info.config, options.config) << file;
    EXPECT_EQ(info.metadata.at("epoch"), "3") << file;
  }
  record::RecordInfo info = record::inspect(dir / "net.ember");
  EXPECT_EQ(info.format, record::Format::Ember);
  EXPECT_EQ(info.format_version, 1u);
  EXPECT_EQ(info.find("fc1.weight")->param_id, a.fc1.weight.id());
  EXPECT_EQ(info.find("fc1.weight")->role, nn::TensorRole::Param);
  EXPECT_EQ(info.find("stats.running_mean")->role, nn::TensorRole::Buffer);
}

TEST(Record, AnEmberConfigSavesBesideTheModelAndComesBack) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  const auto config = nn::LinearConfig{3, 4}.with_bias(false);
  for (const char* file : {"net.ember", "net.safetensors"}) {
    record::save(make_net(cpu, 1.0), dir / file, {.config = config.to_json()});
    const auto back = nn::LinearConfig::from_json(record::inspect(dir / file).config);
    EXPECT_EQ(back.to_json(), config.to_json()) << file;
    EXPECT_FALSE(back.bias) << file;
  }
}

TEST(Record, StrictLoadListsMissingUnexpectedAndMismatchedKeys) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  record::save(make_net(cpu, 1.0), dir / "net.ember");
  try {
    (void)record::load(make_other(cpu), dir / "net.ember", cpu);
    FAIL() << "expected a LoadError";
  } catch (const record::LoadError& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("net.ember"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'fc3.weight'"), std::string::npos) << msg;  // missing
    EXPECT_NE(msg.find("'fc2.weight'"), std::string::npos) << msg;  // unexpected
    EXPECT_NE(msg.find("'fc1.weight' (module f32 [5, 3], file f32 [4, 3])"), std::string::npos)
        << msg;
    const record::LoadReport& r = e.report();
    EXPECT_EQ(r.missing, (std::vector<std::string>{"fc3.weight", "fc3.bias"}));
    EXPECT_EQ(r.unexpected,
              (std::vector<std::string>{"fc2.weight", "fc2.bias", "stats.running_mean",
                                        "stats.num_batches_tracked"}));
    ASSERT_EQ(r.mismatched.size(), 1u);
    EXPECT_EQ(r.mismatched[0].key, "fc1.weight");
    EXPECT_EQ(r.applied, (std::vector<std::string>{"fc1.bias"}));
  }
}

TEST(Record, DtypeMismatchIsReportedUnlessCast) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  Net a = make_net(cpu, 1.0);
  record::save(a, dir / "net.ember");
  Net f64 = nn::map(make_net(cpu, 0.0), [](nn::TensorEntry& e) {
    if (e.is_param()) e.tensor = ops::cast(e.tensor, DType::F64);
  });
  try {
    (void)record::load(Net(f64), dir / "net.ember", cpu);
    FAIL() << "expected a LoadError";
  } catch (const record::LoadError& e) {
    EXPECT_NE(std::string(e.what()).find("'fc1.weight' (module f64 [4, 3], file f32 [4, 3])"),
              std::string::npos)
        << e.what();
  }
  Net b = record::load(std::move(f64), dir / "net.ember", cpu, {.cast = true});
  EXPECT_EQ(b.fc1.weight.val().dtype(), DType::F64);
  EXPECT_EQ(b.fc1.weight.val().to_data().to_vector<double>(),
            a.fc1.weight.val().to_data().to_vector<double>());
}

TEST(Record, FloatDtypeOnLoadCastsToBf16AndBack) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  Net a = make_net(cpu, 1.0);
  record::save(a, dir / "net.ember");
  Net b = record::load(make_net(cpu, 0.0), dir / "net.ember", cpu, {.float_dtype = DType::BF16});
  EXPECT_EQ(b.fc1.weight.val().dtype(), DType::BF16);
  EXPECT_EQ(b.stats.num_batches_tracked.val().dtype(), DType::I64);  // integers untouched
  // Each element is the f32 value rounded to bf16 (to nearest even), computed here directly.
  const auto saved = a.fc1.weight.val().to_data().to_vector<float>();
  const auto loaded = b.fc1.weight.val().to_data().to_vector<float>();
  ASSERT_EQ(saved.size(), loaded.size());
  for (std::size_t i = 0; i < saved.size(); ++i) {
    std::uint32_t u;
    std::memcpy(&u, &saved[i], 4);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    float expect;
    std::memcpy(&expect, &u, 4);
    EXPECT_EQ(loaded[i], expect) << i;
  }
  // bf16 back to f32 is exact.
  record::save(b, dir / "bf16.safetensors");
  EXPECT_EQ(record::inspect(dir / "bf16.safetensors").find("fc1.weight")->dtype, DType::BF16);
  Net c =
      record::load(make_net(cpu, 0.0), dir / "bf16.safetensors", cpu, {.float_dtype = DType::F32});
  EXPECT_EQ(c.fc1.weight.val().to_data().to_vector<float>(), loaded);
}

TEST(Record, PartialLoadAppliesWhatMatchesAndReports) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  Net a = make_net(cpu, 1.0);
  record::save(a, dir / "net.safetensors");
  Other o = make_other(cpu);
  const auto fc3_before = o.fc3.weight.val().to_data();
  auto [loaded, report] = record::load_partial(std::move(o), dir / "net.safetensors", cpu);
  EXPECT_EQ(report.applied, (std::vector<std::string>{"fc1.bias"}));
  EXPECT_EQ(report.missing.size(), 2u);
  EXPECT_EQ(report.unexpected.size(), 4u);
  EXPECT_EQ(report.mismatched.size(), 1u);
  EXPECT_FALSE(report.complete());
  EXPECT_EQ(loaded.fc1.bias->val().to_data(), a.fc1.bias->val().to_data());
  EXPECT_EQ(loaded.fc3.weight.val().to_data(), fc3_before);  // untouched
}

TEST(Record, RemapRenamesFileKeysByRegex) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  // A file whose keys carry a "model." prefix and call fc1 "encoder".
  Net a = make_net(cpu, 1.0);
  std::vector<record::NamedTensor> named;
  a.visit([&](const nn::TensorEntry& e) {
    std::string k(e.path);
    if (k.rfind("fc1.", 0) == 0) k = "encoder." + k.substr(4);
    named.push_back({"model." + k, e.tensor});
  });
  record::save_tensors(named, dir / "prefixed.safetensors");
  EXPECT_THROW((void)record::load(make_net(cpu, 0.0), dir / "prefixed.safetensors", cpu),
               record::LoadError);
  Net b = record::load(make_net(cpu, 0.0), dir / "prefixed.safetensors", cpu,
                       {.remap = {{"^model\\.", ""}, {"^encoder\\.(.*)$", "fc1.$1"}}});
  // num_batches_tracked was saved as a [1] tensor (not scalar-marked) and loads the same.
  expect_same_tensors(a, b);
  // top_level_key selects a prefix too.
  Net c = record::load(make_net(cpu, 0.0), dir / "prefixed.safetensors", cpu,
                       {.remap = {{"^encoder\\.", "fc1."}}, .top_level_key = "model"});
  expect_same_tensors(a, c);
  // Two file keys onto one module key is an error naming both.
  try {
    (void)record::load(make_net(cpu, 0.0), dir / "prefixed.safetensors", cpu,
                       {.remap = {{"^.*$", "same"}}});
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("both map to the module key 'same'"), std::string::npos);
  }
  EXPECT_THROW((void)record::load(make_net(cpu, 0.0), dir / "prefixed.safetensors", cpu,
                                  {.remap = {{"(", ""}}}),
               Error);
}

TEST(Record, LoadsFromBytesInMemoryAndFromAMapping) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  Net a = make_net(cpu, 1.0);
  for (record::Format f : {record::Format::Ember, record::Format::Safetensors}) {
    std::vector<std::byte> bytes = record::save_bytes(a, f);
    Net b = record::load(make_net(cpu, 0.0), std::span<const std::byte>(bytes), cpu);
    expect_same_tensors(a, b);
    EXPECT_EQ(record::inspect(std::span<const std::byte>(bytes)).format, f);
  }
  record::save(a, dir / "net.ember");
  Net m = record::load(make_net(cpu, 0.0), dir / "net.ember", cpu, {.mmap = true});
  expect_same_tensors(a, m);
  // The saved bytes are exactly the file's.
  EXPECT_EQ(read_file(dir / "net.ember"), record::save_bytes(a, record::Format::Ember));
}

TEST(Record, LoadOnAnAutodiffDeviceMakesTrainableParamsRequireGrad) {
  const Device cpu = Device::cpu();
  const Device ad = cpu.autodiff();
  TmpDir dir;
  record::save(make_net(cpu, 1.0), dir / "net.ember");
  Net b = record::load(make_net(cpu, 0.0), dir / "net.ember", ad);
  EXPECT_TRUE(b.fc1.weight.val().device().is_autodiff());
  EXPECT_TRUE(b.fc1.weight.val().is_require_grad());
  EXPECT_TRUE(b.fc2.bias->val().is_require_grad());
  EXPECT_TRUE(b.stats.running_mean.val().device().is_autodiff());
  // A model on an autodiff device saves as any other.
  record::save(b, dir / "ad.safetensors");
  expect_same_tensors(record::load(make_net(cpu, 0.0), dir / "ad.safetensors", cpu),
                      record::load(make_net(cpu, 0.0), dir / "net.ember", cpu));
}

TEST(Record, SaveIsAtomicAndNamesBadPaths) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  Net a = make_net(cpu, 1.0);
  record::save(a, dir / "net.ember");
  const auto before = read_file(dir / "net.ember");
  // A save that fails midway (a duplicate key is found after the temporary file exists)
  // leaves the old file intact and no temporary behind.
  std::vector<record::NamedTensor> dup = {{"w", a.fc1.weight.val().dyn()},
                                          {"w", a.fc1.bias->val().dyn()}};
  EXPECT_THROW(record::save_tensors(dup, dir / "net.ember"), Error);
  EXPECT_EQ(read_file(dir / "net.ember"), before);
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path)) ++files;
  EXPECT_EQ(files, 1u);
  // A save over an existing file keeps its permissions (not the temporary file's 0600).
  namespace fs = std::filesystem;
  const auto rw_r = fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read;
  fs::permissions(dir / "net.ember", rw_r, fs::perm_options::replace);
  record::save(a, dir / "net.ember");
  EXPECT_EQ(fs::status(dir / "net.ember").permissions() & fs::perms::mask, rw_r);
  EXPECT_THROW(record::save(a, dir / "no/such/dir/net.ember"), Error);
  expect_error_contains([&] { record::save(a, dir / "net.pt"); }, "writes .ember or .safetensors");
  expect_error_contains([&] { record::save(a, dir / "net.bin"); }, "extension");
  expect_error_contains([&] { (void)record::load(make_net(cpu, 0), dir / "absent.ember", cpu); },
                        "cannot open");
}

TEST(Record, DamagedEmberFilesAreErrorsThatSayWhy) {
  const Device cpu = Device::cpu();
  const std::vector<std::byte> good = record::save_bytes(make_net(cpu, 1.0), record::Format::Ember);
  auto load = [&](const std::vector<std::byte>& b, record::LoadOptions o = {}) {
    return record::load(make_net(cpu, 0.0), std::span<const std::byte>(b), cpu, o);
  };
  // A newer format version (with a valid preamble checksum) says so.
  std::vector<std::byte> newer = good;
  std::uint32_t v = 2;
  std::memcpy(newer.data() + record::ember_format::kVersionAt, &v, 4);
  expect_error_contains([&] { (void)load(newer); }, "format version 2, written by a newer ember");
  // A flipped data byte fails that tensor's checksum, naming it; unchecked it loads.
  std::vector<std::byte> flipped = good;
  flipped[record::ember_format::kPreambleSize] ^= std::byte{0x40};
  expect_error_contains([&] { (void)load(flipped); }, "'fc1.weight' fails its checksum");
  EXPECT_NO_THROW((void)load(flipped, {.verify_checksums = false}));
  // A flipped metadata byte, a flipped preamble byte, a truncation.
  std::vector<std::byte> meta = good;
  meta[meta.size() - 5] ^= std::byte{1};
  expect_error_contains([&] { (void)load(meta); }, "metadata's checksum");
  std::vector<std::byte> pre = good;
  pre[20] ^= std::byte{1};
  expect_error_contains([&] { (void)load(pre); }, "preamble's checksum");
  std::vector<std::byte> cut(good.begin(), good.end() - 1);
  expect_error_contains([&] { (void)load(cut); }, "truncated");
  std::vector<std::byte> text(64, std::byte{'a'});
  expect_error_contains([&] { (void)load(text); }, "not a .ember, safetensors or PyTorch file");
}

TEST(Record, DamagedSafetensorsFilesAreErrors) {
  const Device cpu = Device::cpu();
  auto load = [&](const std::string& header, std::size_t data_bytes) {
    std::vector<std::byte> b(8 + header.size() + data_bytes);
    const std::uint64_t n = header.size();
    std::memcpy(b.data(), &n, 8);
    std::memcpy(b.data() + 8, header.data(), header.size());
    return record::inspect(std::span<const std::byte>(b));
  };
  EXPECT_EQ(load(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8).tensors.size(),
            1u);
  // A header of 0x180 bytes starts the file with 0x80, as a pickle does: still safetensors.
  std::string padded = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  padded.resize(0x180, ' ');
  EXPECT_EQ(load(padded, 8).format, record::Format::Safetensors);
  expect_error_contains(
      [&] { load(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 7); },
      "do not hold its 8 bytes");
  expect_error_contains(
      [&] { load(R"({"a":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[0,2]}})", 2); }, "F8_E4M3");
  expect_error_contains(
      [&] {
        load(R"({"a":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,8]}})", 8);
      },
      "tensor 'a': the element count of shape [4611686018427387904, 8] exceeds");
  expect_error_contains(
      [&] {
        load(
            R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},"b":{"dtype":"U8","shape":[4],"data_offsets":[2,6]}})",
            6);
      },
      "overlap");
  expect_error_contains(
      [&] { load("{\"a\":" + std::string(40, '[') + std::string(40, ']') + "}", 0); },
      "nested deeper");
  expect_error_contains([&] { load("{\"a\": ", 0); }, "does not parse");
}

TEST(Record, LoadTensorsReadsEveryTensorOfAFile) {
  const Device cpu = Device::cpu();
  TmpDir dir;
  Net a = make_net(cpu, 1.0);
  record::save(a, dir / "net.ember");
  std::vector<record::NamedTensor> t = record::load_tensors(dir / "net.ember", cpu);
  ASSERT_EQ(t.size(), net_keys().size());
  EXPECT_EQ(t[0].key, "fc1.weight");
  EXPECT_EQ(t[0].tensor.to_data(), a.fc1.weight.val().to_data());
  EXPECT_EQ(t.back().tensor.shape(), Shape{1});  // the scalar, as a one-element tensor
}

}  // namespace
