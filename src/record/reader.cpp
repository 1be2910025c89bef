// Opening a source as a record: the format from its first bytes, the format's reader, and
// the helpers the readers share. Independent of tensors and devices, so the readers can be
// fuzzed on their own (tests/record/fuzz_record.cpp).
#include <cstdio>
#include <cstring>

#include "ember/record/ember_format.hpp"
#include "record/checked.hpp"
#include "record/reader.hpp"

namespace ember::record::detail {

void TensorReader::read_into(std::size_t i, std::span<std::byte> dst) const {
  const TensorData data = read(i);
  EMBER_ASSERT(data.bytes().size() == dst.size());
  if (!dst.empty()) std::memcpy(dst.data(), data.data(), dst.size());
}

void check_json_depth(const std::byte* text, std::size_t n, std::size_t max_depth,
                      const std::string& what) {
  std::size_t depth = 0;
  bool in_string = false;
  for (std::size_t i = 0; i < n; ++i) {
    auto c = static_cast<char>(text[i]);
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) {
        fail(what + ": JSON nested deeper than " + std::to_string(max_depth) + " levels");
      }
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
}

nn::Json parse_json(const std::byte* text, std::size_t n, const std::string& what) {
  check_json_depth(text, n, 32, what);
  const auto* p = reinterpret_cast<const char*>(text);
  nn::Json j = nn::Json::parse(p, p + n, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) fail(what + ": the JSON does not parse");
  return j;
}

Format detect_format(const ByteSource& source) {
  const std::uint64_t size = source.size();
  if (size < 8) {
    fail("record::load: '" + source.name() + "' is " + std::to_string(size) +
         " bytes: too short for .ember, safetensors or PyTorch");
  }
  std::byte head[9] = {};
  source.read(0, std::span<std::byte>(head, size >= 9 ? 9 : 8));
  if (std::memcmp(head, ember_format::kMagic, 8) == 0) return Format::Ember;
  if (std::memcmp(head, "PK\x03\x04", 4) == 0) return Format::PyTorch;
  // safetensors before pickles: a header length such as 0x180 also starts with 0x80.
  const std::uint64_t n = load_u64(head);
  if (size >= 9 && head[8] == std::byte{'{'} && n <= size - 8) return Format::Safetensors;
  if (head[0] == std::byte{0x80} && static_cast<unsigned>(head[1]) <= 5) {
    return Format::PyTorchLegacy;  // a pickle's PROTO opcode
  }
  char hex[3 * 8 + 1] = {};
  for (int i = 0; i < 8; ++i) {
    std::snprintf(hex + 3 * i, 4, "%02x ", static_cast<unsigned>(head[i]));
  }
  fail("record::load: '" + source.name() +
       "' is not a .ember, safetensors or PyTorch file (it starts with " + std::string(hex, 23) +
       ")");
}

namespace {

// The tensors of another reader whose keys start with "<prefix>.", with the prefix removed
// (LoadOptions::top_level_key for .ember and safetensors files).
class PrefixReader final : public TensorReader {
 public:
  PrefixReader(std::unique_ptr<TensorReader> inner, const std::string& prefix)
      : inner_(std::move(inner)) {
    info_ = inner_->info();
    info_.tensors.clear();
    const std::string p = prefix + ".";
    std::vector<std::string> seen;
    for (std::size_t i = 0; i < inner_->info().tensors.size(); ++i) {
      TensorInfo t = inner_->info().tensors[i];
      if (t.key.compare(0, p.size(), p) == 0) {
        t.key = t.key.substr(p.size());
        info_.tensors.push_back(std::move(t));
        index_.push_back(i);
      }
    }
    if (index_.empty()) {
      fail("record::load: no key of the file starts with '" + p + "' (top_level_key '" + prefix +
           "')");
    }
  }
  TensorData read(std::size_t i) const override { return inner_->read(index_.at(i)); }
  void read_into(std::size_t i, std::span<std::byte> dst) const override {
    inner_->read_into(index_.at(i), dst);
  }
  std::optional<InPlace> read_in_place(std::size_t i) const override {
    return inner_->read_in_place(index_.at(i));
  }

 private:
  std::unique_ptr<TensorReader> inner_;
  std::vector<std::size_t> index_;
};

}  // namespace

std::unique_ptr<TensorReader> open_reader(std::shared_ptr<const ByteSource> source,
                                          const ReaderOptions& options) {
  std::unique_ptr<TensorReader> r;
  switch (detect_format(*source)) {
    case Format::Ember:
      r = open_ember(std::move(source), options);
      break;
    case Format::Safetensors:
      r = open_safetensors(std::move(source), options);
      break;
    case Format::PyTorch:
      return open_pytorch(std::move(source), options);
    case Format::PyTorchLegacy:
      return open_pytorch_legacy(std::move(source), options);
  }
  if (!options.top_level_key.empty()) {
    r = std::make_unique<PrefixReader>(std::move(r), options.top_level_key);
  }
  return r;
}

}  // namespace ember::record::detail
