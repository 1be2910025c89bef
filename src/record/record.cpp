// The format-independent half of records: matching a file's keys to a module's (remapping, shape
// and dtype checks, the report), loading tensors onto a device, and dispatching saves to a format's
// writer.
#include "ember/record/record.hpp"

#include "ember/base/config.hpp"

#include <algorithm>
#if EMBER_HAS_EXCEPTIONS
#include <regex>
#endif
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

namespace {

ReaderOptions reader_options(const LoadOptions& o) {
  return ReaderOptions{o.verify_checksums, o.top_level_key};
}

std::unique_ptr<TensorReader> open_path(const std::string& path, const LoadOptions& o) {
  return open_reader(open_file(path, o.mmap), reader_options(o));
}

// Tensor i of the file as a tensor of `shape` (its own, or [1] for a scalar) and `dtype` on
// dev. In the file's dtype, in order of preference:
//  - adopted in place from a private mapping where the device's backend can hold it
//    (zero-copy: Note [Mapped files]);
//  - read straight into a fresh tensor's host memory where the device has it (Note [Direct
//    reads]);
//  - read into `staging` and copied to the device (Note [Staged reads]).
// A cast reads the file's dtype and converts on the host.
//
// Note [Direct reads]: on the Cpu (and through its decorators) a plain load asks the backend
// for a fresh tensor and its bytes (ops::empty_host, Note [Host access] in
// backend/backend.hpp) and the reader fills them, each chunk checked while it is in the
// cache (Note [Checked reads]): the file's bytes are copied once, by the kernel, into the
// tensor they end in. The Cpu's pool hands back the buffer of the tensor the load just
// replaced (same size: same bucket), whose pages are already there, so no page is faulted
// in and zeroed either. A read or checksum failure throws with the file and the key; the
// fresh tensor is dropped and the module is not returned.
//
// Note [Staged reads]: where the device's tensors are not host memory (Cuda, Vulkan), the
// tensor goes through `staging`, one buffer per load that every tensor reuses: the read
// lands in pages already there (fresh memory for each tensor costs the kernel a fault and a
// zeroed page per 4 KiB, which on a busy machine took longer than the read itself), and the
// backend copies it to the device.
DynTensor load_tensor(const TensorReader& reader, std::size_t i, const Shape& shape, DType dtype,
                      const Device& dev, std::vector<std::byte>& staging) {
  if (reader.info().tensors[i].dtype == dtype) {
    if (auto in_place = reader.read_in_place(i)) {
      if (auto t = ops::adopt_host(in_place->data, shape, dtype, std::move(in_place->owner), dev))
        return std::move(*t);
    }
    if (auto fresh = ops::empty_host(shape, dtype, dev)) {
      reader.read_into(i, fresh->bytes);
      return std::move(fresh->tensor);
    }
    // The size was checked against the file when it was opened.
    staging.resize(checked_bytes(shape, dtype, "record::load"));
    reader.read_into(i, staging);
    TensorData data(std::move(staging), shape, dtype);
    DynTensor t = ops::from_data(data, dev);
    staging = std::move(data.bytes());
    return t;
  }
  TensorData data = reader.read(i);
  if (data.dtype() != dtype) data = data.convert(dtype);
  if (!(data.shape() == shape)) data = TensorData(std::move(data.bytes()), shape, data.dtype());
  return ops::from_data(data, dev);
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
  std::vector<std::byte> staging;  // Note [Staged reads]

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
#if EMBER_HAS_EXCEPTIONS
  std::vector<std::pair<std::regex, std::string>> remap;
  for (const auto& [pattern, replacement] : o.remap) {
    try {
      remap.emplace_back(std::regex(pattern, std::regex::ECMAScript), replacement);
    } catch (const std::regex_error& e) {
      fail("record::load: LoadOptions::remap pattern '" + pattern +
           "' is not a valid regex: " + e.what());
    }
  }
#else
  // std::regex reports a bad pattern only by throwing: not in an embedded build.
  EMBER_CHECK(o.remap.empty(),
              "record::load: LoadOptions::remap is not part of an embedded "
              "build (std::regex needs exceptions); rename the keys on the host");
#endif
  std::unordered_map<std::string, std::size_t> by_key;
  std::vector<std::string> keys(info.tensors.size());
  for (std::size_t i = 0; i < info.tensors.size(); ++i) {
    std::string key = info.tensors[i].key;
#if EMBER_HAS_EXCEPTIONS
    for (const auto& [re, replacement] : remap) key = std::regex_replace(key, re, replacement);
#endif
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
    const bool dtype_ok = t.dtype == target || (kind_of(t.dtype) == kind_of(target) &&
                                                (o.cast || (o.float_dtype && is_float(target))));
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
#if !EMBER_HAS_EXCEPTIONS
    fail("record::load: '" + impl_->file() + "' (" + name(info.format) +
         ") does not match the module: " + report.to_string());
#else
    throw LoadError("record::load: '" + impl_->file() + "' (" + name(info.format) +
                        ") does not match the module: " + report.to_string(),
                    report);
#endif
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
  e.tensor = load_tensor(*impl_->reader, index, e.shape(), dtype, dev,
                         impl_->staging);  // [] loads as [1]
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
  std::vector<WriteTensor> list;
  list.reserve(tensors.size());
  for (const SaveTensor& t : tensors) {
    list.push_back(
        {t.key, t.role, t.id, t.trainable, t.scalar, t.tensor.shape(), t.tensor.dtype(), [&t] {
           if (auto bytes = ops::host_bytes(t.tensor)) return HostBytes{*bytes, {}};
           return HostBytes{{}, t.tensor.to_data()};
         }});
  }
  switch (format) {
    case Format::Ember:
      write_ember(list, options, sink);
      return;
    case Format::Safetensors:
      write_safetensors(list, options, sink);
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

namespace {

std::vector<NamedTensor> read_all(const detail::TensorReader& r, const Device& dev,
                                  const LoadOptions& options) {
  const detail::TensorReader* reader = &r;
  std::vector<NamedTensor> out;
  const auto& tensors = reader->info().tensors;
  std::vector<std::byte> staging;  // Note [Staged reads]
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorInfo& t = tensors[i];
    const DType dtype = options.float_dtype && is_float(t.dtype) ? *options.float_dtype : t.dtype;
    const Shape shape = t.shape.rank() == 0 ? Shape{1} : t.shape;
    out.push_back({t.key, detail::load_tensor(*reader, i, shape, dtype, dev, staging)});
  }
  return out;
}

}  // namespace

std::vector<NamedTensor> load_tensors(const std::string& path, const Device& dev,
                                      const LoadOptions& options) {
  return read_all(*detail::open_path(path, options), dev, options);
}

std::vector<NamedTensor> load_tensors(std::span<const std::byte> bytes, const Device& dev,
                                      const LoadOptions& options) {
  return read_all(
      *detail::open_reader(detail::memory_source(bytes), detail::reader_options(options)), dev,
      options);
}

}  // namespace ember::record
