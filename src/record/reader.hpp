// The interface every format's reader implements: what a file holds (RecordInfo, read
// without tensor data) and each tensor's data on demand, one at a time.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ember/base/tensor_data.hpp"
#include "ember/record/record.hpp"
#include "record/byte_io.hpp"

namespace ember::record::detail {

struct ReaderOptions {
  bool verify_checksums = true;
  std::string top_level_key;  // PyTorch checkpoints: the dict to read
};

class TensorReader {
 public:
  virtual ~TensorReader() = default;
  const RecordInfo& info() const { return info_; }
  // Tensor i of info().tensors: its elements, contiguous, in the file's dtype and shape.
  virtual TensorData read(std::size_t i) const = 0;
  // The same elements, checked as read() checks them, into dst, which holds exactly their
  // bytes (checked_bytes of the tensor's shape and dtype): a load reads straight into the
  // memory its tensor adopts, with no staging copy. The default copies from read().
  virtual void read_into(std::size_t i, std::span<std::byte> dst) const;
  // Tensor i's elements in place, in a private mapping (ByteSource::private_view), checked
  // as read() checks them, with the mapping as the owner that keeps them valid; nothing
  // when the source is not a private mapping or the format stores the tensor otherwise.
  struct InPlace {
    std::byte* data;
    std::shared_ptr<const void> owner;
  };
  virtual std::optional<InPlace> read_in_place(std::size_t) const { return std::nullopt; }

 protected:
  RecordInfo info_;
};

// The format of a source, from its first bytes; an ember::Error naming the file otherwise.
Format detect_format(const ByteSource& source);
std::unique_ptr<TensorReader> open_reader(std::shared_ptr<const ByteSource> source,
                                          const ReaderOptions& options);

// Each format's reader and writer.
std::unique_ptr<TensorReader> open_ember(std::shared_ptr<const ByteSource> source,
                                         const ReaderOptions& options);
std::unique_ptr<TensorReader> open_safetensors(std::shared_ptr<const ByteSource> source,
                                               const ReaderOptions& options);
std::unique_ptr<TensorReader> open_pytorch(std::shared_ptr<const ByteSource> source,
                                           const ReaderOptions& options);
std::unique_ptr<TensorReader> open_pytorch_legacy(std::shared_ptr<const ByteSource> source,
                                                  const ReaderOptions& options);
// A tensor's elements on the host, for a writer: its own buffer read in place where its
// backend keeps it in host memory (ops::host_bytes, Note [Host access]), so a Cpu save
// writes with no copy; else a copy (to_data) held here.
struct HostBytes {
  std::span<const std::byte> view;
  std::optional<TensorData> copy;
  std::span<const std::byte> bytes() const {
    return copy ? std::span<const std::byte>(copy->bytes()) : view;
  }
};
// What a writer is given per tensor: its description, and its elements on the host when
// asked (one tensor at a time, so a save never holds more than one copy in host memory).
// The writers know nothing of devices.
struct WriteTensor {
  std::string key;
  nn::TensorRole role;
  nn::ParamId id;
  bool trainable;
  bool scalar;  // stored with shape []
  Shape shape;
  DType dtype;
  std::function<HostBytes()> data;
};
void write_ember(const std::vector<WriteTensor>& tensors, const SaveOptions& options,
                 ByteSink& sink);
void write_safetensors(const std::vector<WriteTensor>& tensors, const SaveOptions& options,
                       ByteSink& sink);

// Shared by the readers: a dtype from its .ember name ("f32"), a JSON text's nesting depth
// checked before parsing. (A shape's byte count read from a file: checked_bytes,
// ember/base/checked.hpp.)
void check_json_depth(const std::byte* text, std::size_t n, std::size_t max_depth,
                      const std::string& what);
// Parses JSON from a file; an ember::Error naming `what` on bad syntax or too deep nesting.
nn::Json parse_json(const std::byte* text, std::size_t n, const std::string& what);

}  // namespace ember::record::detail
