// Deterministic mutation testing of every reader: thousands of seeded mutants of valid
// .ember, safetensors and PyTorch (zip, deflated, legacy) files — bit flips, truncations,
// oversized lengths written over any field, inserted and deleted bytes, and (for .ember)
// mutants with their checksums recomputed so the metadata parser sees them — must each be
// an ember::Error or a valid load: never a crash, a hang, another exception type, or an
// allocation out of proportion to the file (checked through a counting operator new).
// GCC cannot see that the replacement operator new below pairs with its operator delete.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

#include <gtest/gtest.h>
#include <zlib.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <random>

#include <ember/ember.hpp>
#include <ember/record/ember_format.hpp>

#include "record/test_support.hpp"

// The largest single allocation since the last reset.
static std::atomic<std::size_t> g_largest_allocation{0};

void* operator new(std::size_t n) {
  std::size_t prev = g_largest_allocation.load(std::memory_order_relaxed);
  while (n > prev && !g_largest_allocation.compare_exchange_weak(prev, n)) {
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

using namespace ember;
using namespace ember::record_test;

namespace {

const std::string kTorch = std::string(EMBER_RECORD_FIXTURES_DIR) + "/torch";

std::uint32_t crc(const std::byte* p, std::size_t n) {
  return static_cast<std::uint32_t>(
      ::crc32(0, reinterpret_cast<const Bytef*>(p), static_cast<uInt>(n)));
}

// Recomputes a .ember file's metadata and preamble checksums from its (mutated) fields,
// where the fields still point inside the file.
void fix_ember_checksums(std::vector<std::byte>& b) {
  namespace ef = record::ember_format;
  if (b.size() < ef::kPreambleSize) return;
  std::uint64_t off, size;
  std::memcpy(&off, b.data() + ef::kMetaOffsetAt, 8);
  std::memcpy(&size, b.data() + ef::kMetaSizeAt, 8);
  if (off <= b.size() && size <= b.size() - off) {
    const std::uint32_t c = crc(b.data() + off, size);
    std::memcpy(b.data() + ef::kMetaCrcAt, &c, 4);
  }
  const std::uint32_t p = crc(b.data(), ef::kPreambleCrcAt);
  std::memcpy(b.data() + ef::kPreambleCrcAt, &p, 4);
}

std::vector<std::byte> mutate(const std::vector<std::byte>& in, std::mt19937_64& rng) {
  std::vector<std::byte> b = in;
  auto pick = [&](std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits && !b.empty(); ++e) {
    switch (rng() % 6) {
      case 0:
        b[pick(b.size())] ^= std::byte(1u << (rng() % 8));
        break;  // a bit flip
      case 1:
        b.resize(pick(b.size()));
        break;   // truncation
      case 2: {  // an oversized or boundary length written over 1, 2, 4 or 8 bytes
        const std::uint64_t values[] = {
            0xffffffffffffffffull, 0xffffffffull, 0x7fffffffull, 0xffffull, 0, b.size(),
            b.size() + 1,          rng()};
        const std::uint64_t v = values[rng() % 8];
        const std::size_t w = std::size_t{1} << (rng() % 4);
        const std::size_t at = pick(b.size());
        std::memcpy(b.data() + at, &v, std::min(w, b.size() - at));
        break;
      }
      case 3: {  // random bytes inserted
        const std::size_t at = pick(b.size() + 1);
        std::vector<std::byte> ins(1 + pick(16));
        for (auto& x : ins) x = std::byte(rng() & 0xff);
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
        break;
      }
      case 4: {  // a range deleted
        const std::size_t at = pick(b.size());
        const std::size_t n = std::min(b.size() - at, 1 + pick(32));
        b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
                b.begin() + static_cast<std::ptrdiff_t>(at + n));
        break;
      }
      default:
        b[pick(b.size())] = std::byte(rng() & 0xff);
        break;  // a random byte
    }
  }
  return b;
}

struct Outcome {
  std::size_t loaded = 0, refused = 0;
};

// Reads a mutant every way a user can; only ember::Error may escape.
void exercise(const std::vector<std::byte>& b, bool verify, Outcome& out) {
  const Device cpu = Device::cpu();
  const std::span<const std::byte> s(b);
  g_largest_allocation = 0;
  try {
    (void)record::inspect(s, {.verify_checksums = verify});
    (void)record::load_tensors(s, cpu, {.verify_checksums = verify});
    (void)record::load_partial(make_net(cpu, 0.0), s, cpu, {.verify_checksums = verify});
    ++out.loaded;
  } catch (const Error&) {
    ++out.refused;
  }
  // Generous: buffers and values are linear in the file's size.
  EXPECT_LE(g_largest_allocation.load(), 64 * b.size() + (1u << 20))
      << "from " << b.size() << " bytes";
}

void fuzz(const std::string& what, const std::vector<std::byte>& seed, std::uint64_t rng_seed,
          int count, bool is_ember) {
  ASSERT_FALSE(seed.empty()) << what;
  std::mt19937_64 rng(rng_seed);
  Outcome out;
  exercise(seed, true, out);
  ASSERT_EQ(out.loaded, 1u) << what << ": the unmutated seed must load";
  for (int i = 0; i < count; ++i) {
    std::vector<std::byte> b = mutate(seed, rng);
    if (is_ember && (i % 2 == 0)) fix_ember_checksums(b);
    exercise(b, /*verify=*/i % 3 != 0, out);
    if (testing::Test::HasFailure()) {
      ADD_FAILURE() << what << ": mutant " << i << " of seed " << rng_seed;
      return;
    }
  }
  // The mutants reach past the first checks: some are refused and some still load.
  EXPECT_GT(out.refused, 0u) << what;
  std::printf("%s: %zu mutants loaded, %zu refused\n", what.c_str(), out.loaded, out.refused);
}

TEST(RecordFuzz, EmberMutantsAreErrorsOrLoads) {
  const Device cpu = Device::cpu();
  record::SaveOptions o;
  o.config = nn::Json{{"a", {1, 2, {{"b", "c"}}}}};
  o.metadata = {{"k", "v"}};
  fuzz("ember", record::save_bytes(make_net(cpu, 1.0), record::Format::Ember, o), 1, 3700, true);
}

TEST(RecordFuzz, SafetensorsMutantsAreErrorsOrLoads) {
  const Device cpu = Device::cpu();
  record::SaveOptions o;
  o.metadata = {{"k", "v"}};
  fuzz("safetensors", record::save_bytes(make_net(cpu, 1.0), record::Format::Safetensors, o), 2,
       4000, false);
}

TEST(RecordFuzz, PyTorchZipMutantsAreErrorsOrLoads) {
  fuzz("net.pt", read_file(kTorch + "/net.pt"), 3, 3000, false);
  fuzz("views.pt", read_file(kTorch + "/views.pt"), 4, 2000, false);
  fuzz("net_deflated.pt", read_file(kTorch + "/net_deflated.pt"), 5, 2000, false);
}

// Each tensor's checksum in a saved .ember's metadata is zlib's crc32 of its bytes (the
// format's definition, whichever CRC code the writer runs): lengths around every loop
// boundary of the folding CRC (64-byte blocks, then 16, then a tail) and a long one.
TEST(RecordChecksum, EveryTensorsCrcIsZlibsCrc32) {
  namespace ef = record::ember_format;
  const Device cpu = Device::cpu();
  std::mt19937_64 rng(11);
  std::vector<record::NamedTensor> named;
  std::vector<std::vector<std::uint8_t>> values;
  for (std::size_t n : {1, 15, 16, 17, 63, 64, 65, 79, 80, 127, 128, 129, 143, 191, 192, 255, 256,
                        257, 1000, 65536 + 7,
                        // around the 2 MiB chunks a save and a load check (Note [Checked reads])
                        (2 << 20) - 1, 2 << 20, (2 << 20) + 1, (4 << 20) + 5}) {
    std::vector<std::uint8_t> v(n);
    for (auto& x : v) x = static_cast<std::uint8_t>(rng());
    std::string key = "t";  // (by append: "t" + std::string trips GCC 12's -Wrestrict)
    key += std::to_string(n);
    named.push_back({key, ops::from_data(TensorData::from<std::uint8_t>(v, Shape{n}), cpu)});
    values.push_back(std::move(v));
  }
  TmpDir dir;
  record::save_tensors(named, dir / "crc.ember");
  const std::vector<std::byte> b = read_file(dir / "crc.ember");
  std::uint64_t off, size;
  std::memcpy(&off, b.data() + ef::kMetaOffsetAt, 8);
  std::memcpy(&size, b.data() + ef::kMetaSizeAt, 8);
  const nn::Json meta = nn::Json::parse(reinterpret_cast<const char*>(b.data() + off),
                                        reinterpret_cast<const char*>(b.data() + off + size));
  ASSERT_EQ(meta["tensors"].size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    const auto& v = values[i];
    EXPECT_EQ(meta["tensors"][i]["crc32"].get<std::uint32_t>(),
              crc(reinterpret_cast<const std::byte*>(v.data()), v.size()))
        << v.size() << " bytes";
  }
  // And the reader's check passes on them (a plain load checks each tensor in chunks).
  const auto loaded = record::load_tensors(dir / "crc.ember", cpu);
  ASSERT_EQ(loaded.size(), values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(loaded[i].tensor.to_data().to_vector<std::uint8_t>(), values[i]) << loaded[i].key;
  }
}

TEST(RecordFuzz, PyTorchLegacyMutantsAreErrorsOrLoads) {
  fuzz("net_legacy.pt", read_file(kTorch + "/net_legacy.pt"), 6, 3000, false);
  fuzz("views_legacy.pt", read_file(kTorch + "/views_legacy.pt"), 7, 2000, false);
}

}  // namespace
