// The format-independent half of records: format detection, matching a file's keys to a
// module's (remapping, shape and dtype checks, the report), loading tensors onto a device,
// and dispatching saves to a format's writer.
#include "ember/record/record.hpp"

#include <algorithm>
#include <cstdio>
#include <regex>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "ember/record/ember_format.hpp"
#include "ember/tensor/ops.hpp"
#include "record/checked.hpp"
#include "record/reader.hpp"

namespace ember::record {

const char* name(Format f) {
  switch (f) {
    case Format::Ember:
      return "ember";
    case Format::Safetensors:
      return "safetensors";
    case Format::PyTorch:
      return "pytorch (zip)";
    case Format::PyTorchLegacy:
      return "pytorch (legacy)";
  }
  return "?";
}

Format format_of_extension(const std::string& path) {
  auto ends_with = [&](const std::string& ext) {
    return path.size() >= ext.size() &&
           path.compare(path.size() - ext.size(), ext.size(), ext) == 0;
  };
  if (ends_with(".ember")) return Format::Ember;
  if (ends_with(".safetensors")) return Format::Safetensors;
  if (ends_with(".pt") || ends_with(".pth")) {
    fail("record::save: '" + path +
         "': ember reads PyTorch files but writes .ember or .safetensors (PyTorch loads "
         "safetensors with safetensors.torch.load_file)");
  }
  fail("record::save: cannot tell the format of '" + path +
       "' from its extension: expected .ember or .safetensors (or SaveOptions::format)");
}

const TensorInfo* RecordInfo::find(const std::string& key) const {
  for (const auto& t : tensors) {
    if (t.key == key) return &t;
  }
  return nullptr;
}

namespace {

std::string describe(DType dtype, const Shape& shape) {
  return std::string(name(dtype)) + " " + shape.to_string();
}

std::string join(const std::vector<std::string>& v, std::size_t limit = 20) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < limit; ++i) s += (i ? ", '" : "'") + v[i] + "'";
  if (v.size() > limit) s += ", ... (" + std::to_string(v.size() - limit) + " more)";
  return s;
}

}  // namespace

std::string LoadReport::to_string() const {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : "; ") + part; };
  if (!missing.empty()) add("missing from the file: " + join(missing));
  if (!unexpected.empty()) add("in the file but not in the module: " + join(unexpected));
  if (!mismatched.empty()) {
    std::string m = "mismatched: ";
    for (std::size_t i = 0; i < mismatched.size() && i < 20; ++i) {
      m += (i ? ", '" : "'") + mismatched[i].key + "' (module " + mismatched[i].expected +
           ", file " + mismatched[i].found + ")";
    }
    if (mismatched.size() > 20) m += ", ...";
    add(m);
  }
  if (s.empty()) s = "all " + std::to_string(applied.size()) + " keys applied";
  return s;
}

namespace detail {

std::uint64_t checked_num_bytes(const Shape& shape, DType dtype, const std::string& what) {
  std::uint64_t n = 1;
  for (std::size_t d : shape) n = checked_mul(n, d, what);
  return checked_mul(n, size_of(dtype), what);
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
  if (head[0] == std::byte{0x80} && static_cast<unsigned>(head[1]) <= 5) {
    return Format::PyTorchLegacy;
  }
  std::uint64_t n = load_u64(head);
  if (size >= 9 && head[8] == std::byte{'{'} && n <= size - 8) return Format::Safetensors;
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

namespace {

ReaderOptions reader_options(const LoadOptions& o) {
  return ReaderOptions{o.verify_checksums, o.top_level_key};
}

std::unique_ptr<TensorReader> open_path(const std::string& path, const LoadOptions& o) {
  return open_reader(open_file(path, o.mmap), reader_options(o));
}

}  // namespace

struct Loader::Impl {
  LoadOptions options;
  std::unique_ptr<TensorReader> reader;
  struct Planned {
    std::size_t file_index;
    DType dtype;  // the dtype the tensor loads as
  };
  std::unordered_map<std::string, Planned> plan;

  std::string file() const { return reader_name; }
  std::string reader_name;
};

Loader::Loader(const std::string& path, const LoadOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->reader = open_path(path, options);
  impl_->reader_name = path;
}

Loader::Loader(std::span<const std::byte> bytes, const LoadOptions& options)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
  impl_->reader = open_reader(memory_source(bytes), reader_options(options));
  impl_->reader_name = "<memory>";
}

Loader::~Loader() = default;

LoadReport Loader::plan(const std::vector<ModuleTensor>& module, bool strict) {
  const RecordInfo& info = impl_->reader->info();
  const LoadOptions& o = impl_->options;

  // File keys, remapped, to their index.
  std::vector<std::pair<std::regex, std::string>> remap;
  for (const auto& [pattern, replacement] : o.remap) {
    try {
      remap.emplace_back(std::regex(pattern, std::regex::ECMAScript), replacement);
    } catch (const std::regex_error& e) {
      fail("record::load: LoadOptions::remap pattern '" + pattern +
           "' is not a valid regex: " + e.what());
    }
  }
  std::unordered_map<std::string, std::size_t> by_key;
  std::vector<std::string> keys(info.tensors.size());
  for (std::size_t i = 0; i < info.tensors.size(); ++i) {
    std::string key = info.tensors[i].key;
    for (const auto& [re, replacement] : remap) key = std::regex_replace(key, re, replacement);
    auto [it, fresh] = by_key.emplace(key, i);
    if (!fresh) {
      fail("record::load: '" + impl_->file() + "': file keys '" + info.tensors[it->second].key +
           "' and '" + info.tensors[i].key + "' both map to the module key '" + key + "'");
    }
    keys[i] = std::move(key);
  }

  LoadReport report;
  std::vector<bool> used(info.tensors.size(), false);
  for (const ModuleTensor& m : module) {
    auto it = by_key.find(m.path);
    if (it == by_key.end()) {
      report.missing.push_back(m.path);
      continue;
    }
    used[it->second] = true;
    const TensorInfo& t = info.tensors[it->second];
    const bool shape_ok =
        t.shape == m.shape || (t.shape.rank() == 0 && m.shape.num_elements() == 1);
    DType target = m.dtype;
    if (o.float_dtype && is_float(m.dtype) && is_float(t.dtype)) target = *o.float_dtype;
    const bool dtype_ok =
        t.dtype == target || (kind_of(t.dtype) == kind_of(target) && (o.cast || o.float_dtype));
    if (!shape_ok || !dtype_ok) {
      report.mismatched.push_back({m.path, describe(m.dtype, m.shape), describe(t.dtype, t.shape)});
      continue;
    }
    impl_->plan[m.path] = {it->second, target};
    report.applied.push_back(m.path);
  }
  for (std::size_t i = 0; i < keys.size(); ++i) {
    if (!used[i]) report.unexpected.push_back(keys[i]);
  }
  if (strict && !report.complete()) {
    throw LoadError("record::load: '" + impl_->file() + "' (" + name(info.format) +
                        ") does not match the module: " + report.to_string(),
                    report);
  }
  return report;
}

void Loader::apply(nn::TensorEntry& e, const Device& dev) const {
  auto it = impl_->plan.find(std::string(e.path));
  if (it == impl_->plan.end()) {
    if (!(e.tensor.device() == dev)) e.tensor = ops::to_device(ops::detach(e.tensor), dev);
    return;
  }
  const auto& [index, dtype] = it->second;
  TensorData data = impl_->reader->read(index);
  if (data.dtype() != dtype) data = data.convert(dtype);
  if (!(data.shape() == e.shape())) {
    data = TensorData(std::move(data.bytes()), e.shape(), data.dtype());  // [] -> [1]
  }
  e.tensor = ops::from_data(data, dev);
  const TensorInfo& t = impl_->reader->info().tensors[index];
  if (e.is_param() && t.role == nn::TensorRole::Param && t.param_id != 0) e.id = t.param_id;
}

namespace {

void check_save_list(const std::vector<SaveTensor>& tensors) {
  std::unordered_set<std::string> seen;
  for (const auto& t : tensors) {
    EMBER_CHECK(!t.key.empty(), "record::save: a tensor has an empty key");
    EMBER_CHECK(seen.insert(t.key).second, "record::save: the key '" + t.key + "' appears twice");
    EMBER_CHECK(!t.scalar || t.tensor.num_elements() == 1, "record::save: '" + t.key +
                                                               "' is marked scalar but has shape " +
                                                               t.tensor.shape().to_string());
  }
}

void write_format(const std::vector<SaveTensor>& tensors, Format format, const SaveOptions& options,
                  ByteSink& sink) {
  check_save_list(tensors);
  switch (format) {
    case Format::Ember:
      write_ember(tensors, options, sink);
      return;
    case Format::Safetensors:
      write_safetensors(tensors, options, sink);
      return;
    case Format::PyTorch:
    case Format::PyTorchLegacy:
      fail("record::save: ember writes .ember and safetensors, not PyTorch's pickle format");
  }
}

}  // namespace

void save_tensors(const std::vector<SaveTensor>& tensors, const std::string& path,
                  const SaveOptions& options) {
  const Format format = options.format ? *options.format : format_of_extension(path);
  auto sink = atomic_file_sink(path);
  write_format(tensors, format, options, *sink);
  sink->commit();
}

std::vector<std::byte> save_tensors_bytes(const std::vector<SaveTensor>& tensors, Format format,
                                          const SaveOptions& options) {
  std::vector<std::byte> out;
  auto sink = vector_sink(out);
  write_format(tensors, format, options, *sink);
  return out;
}

}  // namespace detail

RecordInfo inspect(const std::string& path, const LoadOptions& options) {
  return detail::open_path(path, options)->info();
}

RecordInfo inspect(std::span<const std::byte> bytes, const LoadOptions& options) {
  return detail::open_reader(detail::memory_source(bytes), detail::reader_options(options))->info();
}

void save_tensors(const std::vector<NamedTensor>& tensors, const std::string& path,
                  const SaveOptions& options) {
  std::vector<detail::SaveTensor> list;
  list.reserve(tensors.size());
  for (const auto& t : tensors) {
    list.push_back({t.key, nn::TensorRole::Buffer, 0, false, false, t.tensor});
  }
  detail::save_tensors(list, path, options);
}

std::vector<NamedTensor> load_tensors(const std::string& path, const Device& dev,
                                      const LoadOptions& options) {
  auto reader = detail::open_path(path, options);
  std::vector<NamedTensor> out;
  const auto& tensors = reader->info().tensors;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    TensorData data = reader->read(i);
    if (options.float_dtype && is_float(data.dtype())) data = data.convert(*options.float_dtype);
    if (data.shape().rank() == 0)
      data = TensorData(std::move(data.bytes()), Shape{1}, data.dtype());
    out.push_back({tensors[i].key, ops::from_data(data, dev)});
  }
  return out;
}

}  // namespace ember::record
