// The .ember format's writer and reader; the format is specified in
// include/ember/record/ember_format.hpp.
#include "ember/record/ember_format.hpp"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "record/checked.hpp"
#include "record/reader.hpp"

namespace ember::record::detail {

namespace ef = ember_format;

namespace {

constexpr DType kAllDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                                DType::I32, DType::I16, DType::I8,  DType::U8,   DType::Bool};

std::optional<DType> dtype_named(const std::string& s) {
  for (DType d : kAllDTypes) {
    if (s == name(d)) return d;
  }
  return std::nullopt;
}

const char* version_string() { return EMBER_VERSION_STRING; }

// Note [Checked reads]: tensor data is read (and written) in chunks small enough to stay in
// the cache, each checksummed right after it arrives (before it leaves), so the check costs
// no pass over memory of its own.
constexpr std::size_t kChunk = std::size_t{1} << 21;
// How far past a tensor a load asks the file to read ahead (Note [Read ahead]).
constexpr std::uint64_t kReadAhead = std::uint64_t{16} << 20;

[[noreturn]] void bad_meta(const std::string& file, const std::string& what) {
  fail(file + ": bad metadata: " + what);
}

}  // namespace

void write_ember(const std::vector<WriteTensor>& tensors, const SaveOptions& options,
                 ByteSink& sink) {
  const std::uint64_t base = sink.position();
  sink.write_zeros(ef::kPreambleSize);  // filled in last

  nn::Json list = nn::Json::array();
  std::uint64_t offset = 0;
  for (const WriteTensor& t : tensors) {
    // One tensor on the host at a time (Note: the data section precedes the metadata so
    // that its checksum is known when the metadata is written), written chunk by chunk
    // right after each chunk's checksum, while it is in the cache (Note [Checked reads]).
    const HostBytes data = t.data();
    const std::span<const std::byte> bytes = data.bytes();
    const std::size_t n = bytes.size();
    std::uint32_t crc = 0;
    for (std::size_t done = 0; done < n; done += kChunk) {
      const std::span<const std::byte> part = bytes.subspan(done, std::min(kChunk, n - done));
      crc = crc32_update(crc, part.data(), part.size());
      sink.write(part.data(), part.size());
    }
    const std::uint64_t padded = checked_align_up(n, ef::kAlignment, "record::save");
    sink.write_zeros(padded - n);
    nn::Json shape = nn::Json::array();
    if (!t.scalar) {
      for (std::size_t d : t.shape) shape.push_back(d);
    }
    nn::Json entry = {{"path", t.key},
                      {"dtype", name(t.dtype)},
                      {"shape", shape},
                      {"offset", offset},
                      {"size", n},
                      {"crc32", crc},
                      {"role", t.role == nn::TensorRole::Param ? "param" : "buffer"}};
    if (t.role == nn::TensorRole::Param) {
      entry["param_id"] = t.id;
      entry["trainable"] = t.trainable;
    }
    list.push_back(std::move(entry));
    offset += padded;
  }

  nn::Json meta = {{"format", "ember"},
                   {"format_version", ef::kVersion},
                   {"ember_version", version_string()},
                   {"tensors", std::move(list)}};
  if (!options.config.is_null()) meta["config"] = options.config;
  if (!options.metadata.empty()) meta["metadata"] = options.metadata;
  const std::string text = meta.dump();
  sink.write(text.data(), text.size());

  std::byte pre[ef::kPreambleSize] = {};
  std::memcpy(pre, ef::kMagic, 8);
  store_u32(pre + ef::kVersionAt, ef::kVersion);
  store_u32(pre + ef::kFlagsAt, 0);
  store_u64(pre + ef::kDataOffsetAt, ef::kPreambleSize);
  store_u64(pre + ef::kDataSizeAt, offset);
  store_u64(pre + ef::kMetaOffsetAt, ef::kPreambleSize + offset);
  store_u64(pre + ef::kMetaSizeAt, text.size());
  store_u32(pre + ef::kMetaCrcAt, crc32_update(0, text.data(), text.size()));
  store_u32(pre + ef::kPreambleCrcAt, crc32_update(0, pre, ef::kPreambleCrcAt));
  sink.write_at(base, pre, sizeof pre);
}

namespace {

struct EmberTensor {
  std::uint64_t offset;  // absolute, in the source
  std::uint64_t size;
  std::uint32_t crc;
};

class EmberReader final : public TensorReader {
 public:
  EmberReader(std::shared_ptr<const ByteSource> source, const ReaderOptions& options)
      : source_(std::move(source)), verify_(options.verify_checksums) {
    const std::string file = "record: '" + source_->name() + "'";
    const std::uint64_t size = source_->size();
    if (size < ef::kPreambleSize) {
      fail(file + " is truncated: " + std::to_string(size) +
           " bytes, less than the .ember preamble's 256");
    }
    std::byte pre[ef::kPreambleSize];
    source_->read(0, pre);
    const std::uint32_t version = load_u32(pre + ef::kVersionAt);
    if (version > ef::kNewestReadable) {
      fail(file + " is .ember format version " + std::to_string(version) +
           ", written by a newer ember; this ember reads versions 1 to " +
           std::to_string(ef::kNewestReadable) + ": upgrade ember to load it");
    }
    if (version == 0) fail(file + ": .ember format version 0 does not exist (a corrupt file)");
    if (load_u32(pre + ef::kPreambleCrcAt) != crc32_update(0, pre, ef::kPreambleCrcAt)) {
      fail(file + ": the .ember preamble's checksum does not match (a corrupt file)");
    }
    if (load_u32(pre + ef::kFlagsAt) != 0) {
      fail(file + ": unknown .ember flags " + std::to_string(load_u32(pre + ef::kFlagsAt)) +
           " for format version 1");
    }
    const std::uint64_t data_offset = load_u64(pre + ef::kDataOffsetAt);
    const std::uint64_t data_size = load_u64(pre + ef::kDataSizeAt);
    const std::uint64_t meta_offset = load_u64(pre + ef::kMetaOffsetAt);
    const std::uint64_t meta_size = load_u64(pre + ef::kMetaSizeAt);
    if (data_offset != ef::kPreambleSize || data_size % ef::kAlignment != 0 ||
        checked_add(data_offset, data_size, file, "the data section's end") != meta_offset ||
        checked_add(meta_offset, meta_size, file, "the metadata section's end") != size) {
      fail(file + " is truncated or corrupt: its sections (data " + std::to_string(data_size) +
           " bytes at " + std::to_string(data_offset) + ", metadata " + std::to_string(meta_size) +
           " bytes at " + std::to_string(meta_offset) + ") do not tile its " +
           std::to_string(size) + " bytes");
    }
    std::vector<std::byte> text = source_->read_vector(meta_offset, meta_size);
    if (crc32_update(0, text.data(), text.size()) != load_u32(pre + ef::kMetaCrcAt)) {
      fail(file + ": the metadata's checksum does not match (a corrupt file)");
    }
    parse_metadata(parse_json(text.data(), text.size(), file + " metadata"), file, data_offset,
                   data_size, version);
  }

  TensorData read(std::size_t i) const override {
    const TensorInfo& info = info_.tensors.at(i);
    const EmberTensor& t = tensors_[i];
    source_->require_range(t.offset, t.size, "read");
    std::vector<std::byte> bytes(static_cast<std::size_t>(t.size));
    read_into(i, bytes);
    return TensorData(std::move(bytes), info.shape, info.dtype);
  }

  // In chunks, each checked while cached (Note [Checked reads]).
  void read_into(std::size_t i, std::span<std::byte> dst) const override {
    const EmberTensor& t = tensors_.at(i);
    EMBER_ASSERT(dst.size() == t.size);
    source_->will_read(t.offset, t.size + kReadAhead);  // Note [Read ahead]
    std::uint32_t crc = 0;
    for (std::size_t done = 0; done < dst.size(); done += kChunk) {
      const std::span<std::byte> part = dst.subspan(done, std::min(kChunk, dst.size() - done));
      source_->read(t.offset + done, part);
      if (verify_) crc = crc32_update(crc, part.data(), part.size());
    }
    if (verify_ && crc != t.crc) {
      fail("record: '" + source_->name() + "': the data of '" + info_.tensors.at(i).key +
           "' fails its checksum (a corrupt file)");
    }
  }

  std::optional<InPlace> read_in_place(std::size_t i) const override {
    const TensorInfo& info = info_.tensors.at(i);
    const EmberTensor& t = tensors_[i];
    std::byte* p = source_->private_view(t.offset, t.size);
    if (p == nullptr) return std::nullopt;
    if (verify_ && crc32_update(0, p, t.size) != t.crc) {
      fail("record: '" + source_->name() + "': the data of '" + info.key +
           "' fails its checksum (a corrupt file)");
    }
    return InPlace{p, source_};
  }

 private:
  void parse_metadata(const nn::Json& meta, const std::string& file, std::uint64_t data_offset,
                      std::uint64_t data_size, std::uint32_t version) {
    if (!meta.is_object()) bad_meta(file, "not a JSON object");
    auto u64_of = [&](const nn::Json& o, const char* key, const std::string& where) {
      auto it = o.find(key);
      if (it == o.end() || !it->is_number_unsigned()) {
        bad_meta(file, where + ": '" + key + "' must be a non-negative integer");
      }
      return it->get<std::uint64_t>();
    };
    if (u64_of(meta, "format_version", "the file") != version) {
      bad_meta(file, "format_version differs from the preamble's");
    }
    info_.format = Format::Ember;
    info_.format_version = version;
    if (auto it = meta.find("ember_version"); it != meta.end() && it->is_string()) {
      info_.ember_version = it->get<std::string>();
    }
    if (auto it = meta.find("config"); it != meta.end()) info_.config = *it;
    if (auto it = meta.find("metadata"); it != meta.end()) {
      if (!it->is_object()) bad_meta(file, "'metadata' must be an object of strings");
      for (const auto& [k, v] : it->items()) {
        if (!v.is_string()) bad_meta(file, "metadata '" + k + "' must be a string");
        info_.metadata[k] = v.get<std::string>();
      }
    }
    auto list = meta.find("tensors");
    if (list == meta.end() || !list->is_array()) bad_meta(file, "'tensors' must be an array");
    std::unordered_set<std::string> keys;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    for (const nn::Json& e : *list) {
      if (!e.is_object()) bad_meta(file, "a tensor entry is not an object");
      auto path = e.find("path");
      if (path == e.end() || !path->is_string() || path->get<std::string>().empty()) {
        bad_meta(file, "a tensor entry has no 'path' string");
      }
      TensorInfo info;
      info.key = path->get<std::string>();
      const std::string where = "tensor '" + info.key + "'";
      if (!keys.insert(info.key).second) bad_meta(file, where + " appears twice");
      auto dt = e.find("dtype");
      std::optional<DType> dtype;
      if (dt != e.end() && dt->is_string()) dtype = dtype_named(dt->get<std::string>());
      if (!dtype)
        bad_meta(file, where + ": 'dtype' must be one of f64 f32 f16 bf16 i64 i32 i16 i8 u8 bool");
      info.dtype = *dtype;
      auto shape = e.find("shape");
      if (shape == e.end() || !shape->is_array() || shape->size() > 16) {
        bad_meta(file, where + ": 'shape' must be an array of at most 16 sizes");
      }
      std::vector<std::size_t> dims;
      for (const auto& d : *shape) {
        if (!d.is_number_unsigned())
          bad_meta(file, where + ": a shape entry is not a non-negative integer");
        dims.push_back(d.get<std::uint64_t>());
      }
      info.shape = Shape(std::move(dims));
      const std::uint64_t nbytes = checked_bytes(info.shape, info.dtype, file + " " + where);
      const std::uint64_t offset = u64_of(e, "offset", where);
      const std::uint64_t size = u64_of(e, "size", where);
      if (size != nbytes) {
        bad_meta(file, where + ": 'size' " + std::to_string(size) + " differs from its " +
                           std::to_string(nbytes) + " bytes of " + name(info.dtype) + " " +
                           info.shape.to_string());
      }
      if (offset % ef::kAlignment != 0 || !range_within(offset, size, data_size)) {
        bad_meta(file, where + ": its data (" + std::to_string(size) + " bytes at " +
                           std::to_string(offset) + ") is unaligned or outside the data section");
      }
      const std::uint64_t crc = u64_of(e, "crc32", where);
      if (crc > 0xffffffffu) bad_meta(file, where + ": 'crc32' exceeds 32 bits");
      auto role = e.find("role");
      if (role == e.end() || !role->is_string() || (*role != "param" && *role != "buffer")) {
        bad_meta(file, where + ": 'role' must be \"param\" or \"buffer\"");
      }
      info.role = *role == "param" ? nn::TensorRole::Param : nn::TensorRole::Buffer;
      if (info.role == nn::TensorRole::Param) {
        info.param_id = u64_of(e, "param_id", where);
        auto tr = e.find("trainable");
        if (tr == e.end() || !tr->is_boolean())
          bad_meta(file, where + ": 'trainable' must be a boolean");
        info.trainable = tr->get<bool>();
      }
      if (size > 0) ranges.emplace_back(offset, size);
      tensors_.push_back({data_offset + offset, size, static_cast<std::uint32_t>(crc)});
      info_.tensors.push_back(std::move(info));
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i) {
      if (ranges[i].first < ranges[i - 1].first + ranges[i - 1].second) {
        bad_meta(file, "two tensors' data overlap");
      }
    }
  }

  std::shared_ptr<const ByteSource> source_;
  bool verify_;
  std::vector<EmberTensor> tensors_;
};

}  // namespace

std::unique_ptr<TensorReader> open_ember(std::shared_ptr<const ByteSource> source,
                                         const ReaderOptions& options) {
  return std::make_unique<EmberReader>(std::move(source), options);
}

}  // namespace ember::record::detail
