// safetensors: an 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"k": "v"}, "fc.weight": {"dtype": "F32", "shape": [4, 3],
//    "data_offsets": [begin, end]}, ...}
// then the data, each tensor's bytes at [begin, end) from the end of the header. ember
// writes the header padded with spaces so that the data starts at a multiple of 64 bytes
// (a multiple of 8, as the format asks, and the Cpu's alignment, so that a mapped load
// adopts the tensors whose offsets keep it: docs/record.md) and the tensors back to back in
// visit order (the reference reader refuses holes), with the model's config (when given) in
// __metadata__ under "ember.config" as a JSON string.
#include <algorithm>
#include <cstring>

#include "record/checked.hpp"
#include "record/reader.hpp"

namespace ember::record::detail {

namespace {

constexpr std::uint64_t kMaxHeader = 100u << 20;  // as the reference implementation
const char* const kConfigKey = "ember.config";

struct DTypeName {
  DType dtype;
  const char* name;
};
constexpr DTypeName kNames[] = {{DType::F64, "F64"},   {DType::F32, "F32"}, {DType::F16, "F16"},
                                {DType::BF16, "BF16"}, {DType::I64, "I64"}, {DType::I32, "I32"},
                                {DType::I16, "I16"},   {DType::I8, "I8"},   {DType::U8, "U8"},
                                {DType::Bool, "BOOL"}};

const char* st_name(DType d) {
  for (const auto& n : kNames) {
    if (n.dtype == d) return n.name;
  }
  fail("record::save: safetensors has no dtype for " + std::string(name(d)));
}

[[noreturn]] void bad_header(const std::string& file, const std::string& what) {
  fail("record: '" + file + "': bad safetensors header: " + what);
}

struct Span {
  std::uint64_t begin, end;
};

class SafetensorsReader final : public TensorReader {
 public:
  SafetensorsReader(std::shared_ptr<const ByteSource> source) : source_(std::move(source)) {
    const std::string& file = source_->name();
    const std::uint64_t size = source_->size();
    source_->require_range(0, 8, "the safetensors header length");
    const std::uint64_t n = source_->read_u64(0);
    if (n > kMaxHeader || !range_within(8, n, size)) {
      fail("record: '" + file + "' is truncated or corrupt: its safetensors header claims " +
           std::to_string(n) + " bytes of the file's " + std::to_string(size));
    }
    data_begin_ = 8 + n;
    const std::uint64_t data_size = size - data_begin_;
    std::vector<std::byte> text = source_->read_vector(8, n);
    nn::Json header = parse_json(text.data(), text.size(), "record: '" + file + "' header");
    if (!header.is_object()) bad_header(file, "not a JSON object");
    info_.format = Format::Safetensors;
    struct Entry {
      TensorInfo info;
      Span span;
    };
    std::vector<Entry> entries;
    for (const auto& [key, v] : header.items()) {
      if (key == "__metadata__") {
        if (!v.is_object()) bad_header(file, "__metadata__ must be an object of strings");
        for (const auto& [k, s] : v.items()) {
          if (!s.is_string()) bad_header(file, "__metadata__ '" + k + "' must be a string");
          if (k == kConfigKey) {
            const std::string c = s.get<std::string>();
            info_.config = parse_json(reinterpret_cast<const std::byte*>(c.data()), c.size(),
                                      "record: '" + file + "' " + kConfigKey);
          } else {
            info_.metadata[k] = s.get<std::string>();
          }
        }
        continue;
      }
      const std::string where = "tensor '" + key + "'";
      if (!v.is_object()) bad_header(file, where + " is not an object");
      auto dt = v.find("dtype");
      if (dt == v.end() || !dt->is_string()) bad_header(file, where + " has no 'dtype' string");
      const std::string dname = dt->get<std::string>();
      const DTypeName* found = nullptr;
      for (const auto& nm : kNames) {
        if (dname == nm.name) found = &nm;
      }
      if (found == nullptr) {
        bad_header(file, where + " has dtype " + dname +
                             ", which ember does not read (F64 F32 F16 BF16 I64 I32 I16 I8 "
                             "U8 BOOL)");
      }
      auto shape = v.find("shape");
      if (shape == v.end() || !shape->is_array() || shape->size() > 16) {
        bad_header(file, where + ": 'shape' must be an array of at most 16 sizes");
      }
      std::vector<std::size_t> dims;
      for (const auto& d : *shape) {
        if (!d.is_number_unsigned()) bad_header(file, where + ": a shape entry is not a size");
        dims.push_back(d.get<std::uint64_t>());
      }
      auto offs = v.find("data_offsets");
      if (offs == v.end() || !offs->is_array() || offs->size() != 2 ||
          !(*offs)[0].is_number_unsigned() || !(*offs)[1].is_number_unsigned()) {
        bad_header(file, where + ": 'data_offsets' must be [begin, end]");
      }
      Entry e{TensorInfo{key, found->dtype, Shape(std::move(dims)), std::nullopt, 0, false},
              Span{(*offs)[0].get<std::uint64_t>(), (*offs)[1].get<std::uint64_t>()}};
      const std::uint64_t nbytes = checked_bytes(e.info.shape, e.info.dtype, file + " " + where);
      if (e.span.begin > e.span.end || e.span.end > data_size ||
          e.span.end - e.span.begin != nbytes) {
        bad_header(file, where + ": data_offsets [" + std::to_string(e.span.begin) + ", " +
                             std::to_string(e.span.end) + "] do not hold its " +
                             std::to_string(nbytes) + " bytes within the data's " +
                             std::to_string(data_size));
      }
      entries.push_back(std::move(e));
    }
    // File order is data order.
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.span.begin != b.span.begin ? a.span.begin < b.span.begin : a.info.key < b.info.key;
    });
    for (std::size_t i = 0; i < entries.size(); ++i) {
      if (i > 0 && entries[i].span.begin < entries[i - 1].span.end) {
        bad_header(file, "the data of '" + entries[i - 1].info.key + "' and '" +
                             entries[i].info.key + "' overlap");
      }
      info_.tensors.push_back(std::move(entries[i].info));
      spans_.push_back(entries[i].span);
    }
  }

  TensorData read(std::size_t i) const override {
    const TensorInfo& t = info_.tensors.at(i);
    const Span& s = spans_[i];
    source_->require_range(data_begin_ + s.begin, s.end - s.begin, "read");
    std::vector<std::byte> bytes(static_cast<std::size_t>(s.end - s.begin));
    read_into(i, bytes);
    return TensorData(std::move(bytes), t.shape, t.dtype);
  }

  void read_into(std::size_t i, std::span<std::byte> dst) const override {
    const TensorInfo& t = info_.tensors.at(i);
    const Span& s = spans_.at(i);
    EMBER_ASSERT(dst.size() == s.end - s.begin);
    source_->read(data_begin_ + s.begin, dst);
    if (t.dtype == DType::Bool) {
      for (const std::byte b : dst) {
        if (static_cast<unsigned>(b) > 1) {
          fail("record: '" + source_->name() + "': bool tensor '" + t.key +
               "' holds a byte other than 0 or 1");
        }
      }
    }
  }

  // Bool tensors are read (each byte is checked to be 0 or 1).
  std::optional<InPlace> read_in_place(std::size_t i) const override {
    const TensorInfo& t = info_.tensors.at(i);
    if (t.dtype == DType::Bool) return std::nullopt;
    const Span& s = spans_[i];
    std::byte* p = source_->private_view(data_begin_ + s.begin, s.end - s.begin);
    if (p == nullptr) return std::nullopt;
    return InPlace{p, source_};
  }

 private:
  std::shared_ptr<const ByteSource> source_;
  std::uint64_t data_begin_ = 0;
  std::vector<Span> spans_;
};

}  // namespace

std::unique_ptr<TensorReader> open_safetensors(std::shared_ptr<const ByteSource> source,
                                               const ReaderOptions&) {
  return std::make_unique<SafetensorsReader>(std::move(source));
}

void write_safetensors(const std::vector<WriteTensor>& tensors, const SaveOptions& options,
                       ByteSink& sink) {
  nn::Json header = nn::Json::object();
  nn::Json meta = nn::Json::object();
  for (const auto& [k, v] : options.metadata) meta[k] = v;
  if (!options.config.is_null()) meta[kConfigKey] = options.config.dump();
  if (!meta.empty()) header["__metadata__"] = meta;
  std::uint64_t offset = 0;
  for (const WriteTensor& t : tensors) {
    nn::Json shape = nn::Json::array();
    if (!t.scalar) {
      for (std::size_t d : t.shape) shape.push_back(d);
    }
    const std::uint64_t n = checked_bytes(t.shape, t.dtype, "record::save");
    header[t.key] = {
        {"dtype", st_name(t.dtype)}, {"shape", shape}, {"data_offsets", {offset, offset + n}}};
    offset = checked_add(offset, n, "record::save", "the data offset");
  }
  std::string text = header.dump();
  text.append((64 - (8 + text.size()) % 64) % 64, ' ');  // the data at a multiple of 64
  std::byte len[8];
  store_u64(len, text.size());
  sink.write(len, 8);
  sink.write(text.data(), text.size());
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const HostBytes data = tensors[i].data();  // one tensor on the host at a time
    sink.write(data.bytes().data(), data.bytes().size());
  }
}

}  // namespace ember::record::detail
