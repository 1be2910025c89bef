// ember::record: saving and loading a module's tensors (DESIGN §2.2). One API over three
// formats: ember's own .ember (record/ember_format.hpp), safetensors, and PyTorch's
// torch.save files (.pt/.pth, zip and legacy; read only). docs/record.md is the reference.
//
//   record::save(net, "net.ember");                       // format from the extension
//   net = record::load(std::move(net), "net.pt", dev);    // format from the first bytes
//   auto info = record::inspect("net.safetensors");       // keys, dtypes, shapes; no data
//
// Loading checks every key, shape and dtype against the module; anything missing,
// unexpected or mismatched is a record::LoadError (an ember::Error) listing the dotted
// keys, unless load_partial is used, which applies what matches and returns the report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/base/dtype.hpp"
#include "ember/base/error.hpp"
#include "ember/base/shape.hpp"
#include "ember/nn/config.hpp"
#include "ember/nn/module.hpp"
#include "ember/tensor/device.hpp"
#include "ember/tensor/dyn_tensor.hpp"

namespace ember::record {

enum class Format : std::uint8_t { Ember, Safetensors, PyTorch, PyTorchLegacy };
const char* name(Format f);  // "ember", "safetensors", "pytorch (zip)", "pytorch (legacy)"
// The format a path's extension names (.ember, .safetensors); an ember::Error otherwise.
Format format_of_extension(const std::string& path);

// One tensor of a file, as inspect lists it.
struct TensorInfo {
  std::string key;  // the dotted key as stored ("fc1.weight")
  DType dtype = DType::F32;
  Shape shape;  // [] for a scalar
  // What only .ember files store: the role, the ParamId and trainability at save time.
  std::optional<nn::TensorRole> role;
  nn::ParamId param_id = 0;
  bool trainable = false;
};

// What a file holds, read without its tensor data.
struct RecordInfo {
  Format format = Format::Ember;
  std::uint32_t format_version = 0;  // .ember's format version; 0 for the other formats
  std::string ember_version;         // the writer's ember version (.ember files)
  std::vector<TensorInfo> tensors;   // in file order
  nn::Json config;                   // the model's config when saved with one (else null)
  std::map<std::string, std::string> metadata;  // user key/values
  const TensorInfo* find(const std::string& key) const;
};

struct SaveOptions {
  // The format; by default the path's extension decides.
  std::optional<Format> format = {};
  // The model's config (NetConfig{}.to_json()), stored beside the tensors.
  nn::Json config = {};
  // User key/values (safetensors' __metadata__).
  std::map<std::string, std::string> metadata = {};
};

// What a load did: every file key applied, every module key missing from the file, every
// file key the module has no place for, and every key whose shape or dtype differs.
struct LoadReport {
  struct Mismatch {
    std::string key;
    std::string expected;  // the module's "f32 [4, 3]"
    std::string found;     // the file's
  };
  std::vector<std::string> applied, missing, unexpected;
  std::vector<Mismatch> mismatched;
  bool complete() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  std::string to_string() const;
};

// A strict load's failure: the message lists the keys; report() has them as data.
class LoadError : public Error {
 public:
  LoadError(const std::string& message, LoadReport report)
      : Error(message), report_(std::move(report)) {}
  const LoadReport& report() const { return report_; }

 private:
  LoadReport report_;
};

struct LoadOptions {
  // (regex, replacement) pairs (ECMAScript std::regex, $1-style groups) applied in order to
  // every file key before matching it to the module: {{"^model\\.", ""}} strips a prefix.
  std::vector<std::pair<std::string, std::string>> remap = {};
  // Every float tensor loads as this dtype (f32 -> bf16 on load, and back); the module's
  // float dtype is not checked.
  std::optional<DType> float_dtype = {};
  // A file dtype that differs from the module's is converted to the module's (within a
  // kind: float to float, integer to integer); without it a difference is a mismatch.
  bool cast = false;
  // Map the file (privately: writes never reach it) instead of reading it. A Cpu tensor of
  // the file's dtype whose data is 64-byte aligned (every .ember tensor: the format aligns
  // to 256) is then the mapped pages themselves, no copy (Note [Mapped files]); others copy.
  bool mmap = false;
  // Load the dict under this key of a PyTorch checkpoint ({"model_state_dict": ...}); for
  // .ember and safetensors files, the tensors whose keys start with "<key>." (prefix removed).
  std::string top_level_key = {};
  // Check the per-tensor checksums of .ember files and the CRC-32s of zip entries.
  bool verify_checksums = true;
};

template <class M>
struct Loaded {
  M module;
  LoadReport report;
};

// A named tensor outside a module (optimizer state, free-standing weights).
struct NamedTensor {
  std::string key;
  DynTensor tensor;
};

namespace detail {

// A module's tensor as the loader sees it.
struct ModuleTensor {
  std::string path;
  nn::TensorRole role;
  DType dtype;
  Shape shape;
  bool scalar;
};
// A tensor to save.
struct SaveTensor {
  std::string key;
  nn::TensorRole role;
  nn::ParamId id;
  bool trainable;
  bool scalar;  // stored with shape []
  DynTensor tensor;
};

// Opens a file or bytes, matches its keys to a module's and loads tensors one at a time
// (each read, converted and placed on the device when the module's map asks for it).
class Loader {
 public:
  Loader(const std::string& path, const LoadOptions& options);
  Loader(std::span<const std::byte> bytes, const LoadOptions& options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // Matches the file against the module; strict: throws a LoadError unless complete.
  LoadReport plan(const std::vector<ModuleTensor>& module, bool strict);
  // Fills e from the file (tensor on dev, and the saved ParamId for .ember params); an
  // entry not in the file is moved to dev.
  void apply(nn::TensorEntry& e, const Device& dev) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

void save_tensors(const std::vector<SaveTensor>& tensors, const std::string& path,
                  const SaveOptions& options);
std::vector<std::byte> save_tensors_bytes(const std::vector<SaveTensor>& tensors, Format format,
                                          const SaveOptions& options);

template <class M>
std::vector<SaveTensor> save_list(const M& m) {
  std::vector<SaveTensor> out;
  nn::visit(m, [&](const nn::TensorEntry& e) {
    out.push_back({std::string(e.path), e.role, e.id, e.trainable, e.scalar, e.tensor});
  });
  return out;
}
template <class M>
std::vector<ModuleTensor> load_list(const M& m) {
  std::vector<ModuleTensor> out;
  nn::visit(m, [&](const nn::TensorEntry& e) {
    out.push_back({std::string(e.path), e.role, e.dtype(), e.shape(), e.scalar});
  });
  return out;
}
template <class M>
Loaded<M> load_with(Loader& loader, M&& m, const Device& dev, bool strict) {
  LoadReport report = loader.plan(load_list(m), strict);
  M out = nn::map(std::move(m), [&](nn::TensorEntry& e) { loader.apply(e, dev); });
  return {std::move(out), std::move(report)};
}

}  // namespace detail

// Saves every param and buffer of m (format from the extension unless options.format).
// The file appears at path complete or not at all.
template <nn::Module M>
void save(const M& m, const std::string& path, const SaveOptions& options = {}) {
  detail::save_tensors(detail::save_list(m), path, options);
}
// The bytes of a saved file, in memory.
template <nn::Module M>
std::vector<std::byte> save_bytes(const M& m, Format format, const SaveOptions& options = {}) {
  return detail::save_tensors_bytes(detail::save_list(m), format, options);
}

// m with every param and buffer loaded from path onto dev (on an autodiff device params
// require grad). Throws a LoadError listing missing, unexpected and mismatched keys.
template <class M>
requires(!std::is_reference_v<M> && nn::Module<M>) M
    load(M&& m, const std::string& path, const Device& dev, const LoadOptions& options = {}) {
  detail::Loader loader(path, options);
  return detail::load_with(loader, std::move(m), dev, /*strict=*/true).module;
}
// The same from bytes in memory (an embedded file).
template <class M>
requires(!std::is_reference_v<M> && nn::Module<M>) M
    load(M&& m, std::span<const std::byte> bytes, const Device& dev,
         const LoadOptions& options = {}) {
  detail::Loader loader(bytes, options);
  return detail::load_with(loader, std::move(m), dev, /*strict=*/true).module;
}
// Applies every key that matches and reports the rest (never throws for keys; still throws
// for a corrupt file).
template <class M>
requires(!std::is_reference_v<M> &&
         nn::Module<M>) Loaded<M> load_partial(M&& m, const std::string& path, const Device& dev,
                                               const LoadOptions& options = {}) {
  detail::Loader loader(path, options);
  return detail::load_with(loader, std::move(m), dev, /*strict=*/false);
}
template <class M>
requires(!std::is_reference_v<M> &&
         nn::Module<M>) Loaded<M> load_partial(M&& m, std::span<const std::byte> bytes,
                                               const Device& dev, const LoadOptions& options = {}) {
  detail::Loader loader(bytes, options);
  return detail::load_with(loader, std::move(m), dev, /*strict=*/false);
}

// The keys, dtypes and shapes of a file (and its config and metadata), without its data.
RecordInfo inspect(const std::string& path, const LoadOptions& options = {});
RecordInfo inspect(std::span<const std::byte> bytes, const LoadOptions& options = {});

// Free-standing tensors: what optimizer state records build on (docs/record.md).
void save_tensors(const std::vector<NamedTensor>& tensors, const std::string& path,
                  const SaveOptions& options = {});
// Every tensor of a file, in file order (a scalar as a one-element tensor); the options'
// remap does not apply, float_dtype does.
std::vector<NamedTensor> load_tensors(const std::string& path, const Device& dev,
                                      const LoadOptions& options = {});
std::vector<NamedTensor> load_tensors(std::span<const std::byte> bytes, const Device& dev,
                                      const LoadOptions& options = {});

}  // namespace ember::record
