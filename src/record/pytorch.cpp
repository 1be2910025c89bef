// PyTorch's torch.save files, read only.
//
// The zip format (PyTorch >= 1.6): an archive "<name>/data.pkl" (the pickled object, whose
// tensors refer to storages by persistent id), "<name>/data/<key>" (each storage's raw
// little-endian bytes), and "<name>/byteorder" in newer versions.
//
// The legacy format: five pickles back to back — a magic number, the protocol version
// (1001), a system-info dict (which must say little-endian), the object, and the list of
// storage keys — then each storage in that order as an 8-byte element count and its bytes.
//
// Both pickles are read by the restricted unpickler (record/pickle.hpp). A tensor is a
// view of a storage (offset, sizes, strides in elements); a view that is not contiguous is
// gathered into a contiguous copy.
#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "record/checked.hpp"
#include "record/pickle.hpp"
#include "record/reader.hpp"
#include "record/zip.hpp"

namespace ember::record::detail {

namespace {

namespace pk = pickle;

struct TensorView {
  std::uint32_t storage;  // index into the arena's storages
  std::uint64_t offset;
  std::vector<std::uint64_t> size, stride;
};

// The tensors of an unpickled object, flattened to dotted keys.
class StateDict {
 public:
  StateDict(const pk::Arena& a, std::uint32_t root, const std::string& top_level_key,
            const std::string& file)
      : a_(a), file_(file) {
    std::uint32_t dict = root;
    if (!top_level_key.empty()) {
      if (a.at(root).kind != pk::Kind::Dict) {
        fail("record: '" + file + "' holds " + pk::name(a.at(root).kind) +
             ", not a dict with the top_level_key '" + top_level_key + "'");
      }
      bool found = false;
      for (const auto& [k, v] : a.dicts[a.at(root).aux]) {
        if (a.at(k).kind == pk::Kind::String && a.str(k) == top_level_key) {
          dict = v;
          found = true;
        }
      }
      if (!found) {
        fail("record: '" + file + "' has no key '" + top_level_key +
             "' (its keys: " + keys_of(root) + ")");
      }
    }
    if (a.at(dict).kind != pk::Kind::Dict) {
      fail("record: '" + file + "' holds " + pk::name(a.at(dict).kind) + ", not a state_dict");
    }
    flatten(dict, "", 0);
  }
  std::vector<std::pair<std::string, TensorView>> tensors;

 private:
  std::string key_string(std::uint32_t k) const {
    const pk::Value& v = a_.at(k);
    if (v.kind == pk::Kind::String) return a_.strings[v.aux];
    if (v.kind == pk::Kind::Int) return std::to_string(v.i);
    fail("record: '" + file_ + "': a dict key is " + pk::name(v.kind) +
         " (state_dict keys are strings)");
  }
  std::string keys_of(std::uint32_t dict) const {
    std::string s;
    std::size_t n = 0;
    for (const auto& [k, v] : a_.dicts[a_.at(dict).aux]) {
      if (n++ == 20) return s + ", ...";
      s += (s.empty() ? "'" : ", '") + key_string(k) + "'";
    }
    return s;
  }
  void flatten(std::uint32_t dict, const std::string& prefix, int depth) {
    if (depth > 16) fail("record: '" + file_ + "': dicts nested deeper than 16 levels");
    for (const auto& [k, v] : a_.dicts[a_.at(dict).aux]) {
      const std::string key = prefix + key_string(k);
      const pk::Value& val = a_.at(v);
      if (val.kind == pk::Kind::Tensor) {
        const pk::TensorRef& t = a_.tensors[val.aux];
        if (!seen_.insert(key).second) {
          fail("record: '" + file_ + "': the key '" + key + "' appears twice");
        }
        tensors.push_back({key, TensorView{t.storage, t.offset, t.size, t.stride}});
      } else if (val.kind == pk::Kind::Dict) {
        flatten(v, key + ".", depth + 1);
      } else {
        fail("record: '" + file_ + "': '" + key + "' holds " + pk::name(val.kind) +
             ", not a tensor; for a checkpoint, name the dict of tensors with "
             "LoadOptions::top_level_key (this dict's keys: " +
             keys_of(dict) + ")");
      }
    }
  }
  const pk::Arena& a_;
  const std::string& file_;
  std::unordered_set<std::string> seen_;
};

// Where a storage's bytes are: a zip entry or a range of a legacy file.
struct StorageBytes {
  const ZipEntry* entry = nullptr;
  std::uint64_t offset = 0;  // legacy: absolute offset in the file
};

class PyTorchReader final : public TensorReader {
 public:
  PyTorchReader(std::shared_ptr<const ByteSource> source, Format format)
      : source_(std::move(source)) {
    info_.format = format;
  }

  // Fills info_ and views_ from a state dict, checking each view against its storage.
  void set_tensors(const StateDict& sd) {
    const std::string file = "record: '" + source_->name() + "'";
    for (const auto& [key, v] : sd.tensors) {
      const pk::StorageRef& s = arena_.storages[v.storage];
      std::vector<std::size_t> dims(v.size.begin(), v.size.end());
      TensorInfo info{key, s.dtype, Shape(std::move(dims)), std::nullopt, 0, false};
      (void)checked_bytes(info.shape, info.dtype, file + " '" + key + "'");  // fits
      // The last element the view reaches must lie inside the storage.
      std::uint64_t elements = 1;
      for (std::uint64_t d : v.size) elements = checked_mul(elements, d, file, "the element count");
      if (elements > 0) {
        std::uint64_t last = v.offset;
        for (std::size_t d = 0; d < v.size.size(); ++d) {
          last = checked_add(last, checked_mul(v.size[d] - 1, v.stride[d], file, "a view's extent"),
                             file, "a view's last element");
        }
        if (last >= s.numel) {
          fail(file + ": tensor '" + key + "' (" + info.shape.to_string() + ", offset " +
               std::to_string(v.offset) + ") reaches past its storage of " +
               std::to_string(s.numel) + " elements");
        }
      }
      info_.tensors.push_back(std::move(info));
      views_.push_back(v);
    }
  }

  TensorData read(std::size_t i) const override {
    const TensorInfo& info = info_.tensors.at(i);
    const TensorView& v = views_[i];
    const std::uint64_t el = size_of(info.dtype);
    const std::uint64_t n = info.shape.num_elements();
    if (n == 0) return TensorData({}, info.shape, info.dtype);
    // The storage range the view spans (checked in set_tensors).
    std::uint64_t last = v.offset;
    bool contiguous = true;
    std::uint64_t expect = 1;
    for (std::size_t d = v.size.size(); d-- > 0;) {
      last += (v.size[d] - 1) * v.stride[d];
      if (v.size[d] != 1 && v.stride[d] != expect) contiguous = false;
      expect *= v.size[d];
    }
    const std::uint64_t span_elems = last - v.offset + 1;
    std::vector<std::byte> raw = storage_range(v.storage, v.offset * el, span_elems * el);
    if (info.dtype == DType::Bool) {
      for (std::byte b : raw) {
        if (static_cast<unsigned>(b) > 1) {
          fail("record: '" + source_->name() + "': bool tensor '" + info.key +
               "' holds a byte other than 0 or 1");
        }
      }
    }
    if (contiguous) {
      raw.resize(static_cast<std::size_t>(n * el));
      return TensorData(std::move(raw), info.shape, info.dtype);
    }
    // Gather a strided view: walk the index in row-major order.
    std::vector<std::byte> out(static_cast<std::size_t>(n * el));
    const std::size_t rank = v.size.size();
    std::vector<std::uint64_t> idx(rank, 0);
    std::uint64_t src = 0;
    for (std::uint64_t k = 0; k < n; ++k) {
      std::memcpy(out.data() + k * el, raw.data() + src * el, static_cast<std::size_t>(el));
      for (std::size_t d = rank; d-- > 0;) {
        if (++idx[d] < v.size[d]) {
          src += v.stride[d];
          break;
        }
        src -= (v.size[d] - 1) * v.stride[d];
        idx[d] = 0;
      }
    }
    return TensorData(std::move(out), info.shape, info.dtype);
  }

  pk::Arena arena_;
  std::vector<StorageBytes> storage_bytes_;  // per arena storage
  std::unique_ptr<ZipArchive> zip_;
  bool verify_ = true;

 private:
  std::vector<std::byte> storage_range(std::uint32_t storage, std::uint64_t offset,
                                       std::uint64_t length) const {
    const StorageBytes& b = storage_bytes_[storage];
    if (b.entry != nullptr) return zip_->read_range(*b.entry, offset, length, verify_);
    return source_->read_vector(b.offset + offset, length);
  }

  std::shared_ptr<const ByteSource> source_;
  std::vector<TensorView> views_;
};

std::uint64_t storage_bytes(const pk::StorageRef& s, const std::string& file) {
  return checked_mul(s.numel, size_of(s.dtype), file + " storage '" + s.key + "'",
                     "the byte count");
}

}  // namespace

std::unique_ptr<TensorReader> open_pytorch(std::shared_ptr<const ByteSource> source,
                                           const ReaderOptions& options) {
  const std::string file = source->name();
  auto r = std::make_unique<PyTorchReader>(source, Format::PyTorch);
  r->verify_ = options.verify_checksums;
  r->zip_ = std::make_unique<ZipArchive>(source);
  // The pickle is "<prefix>/data.pkl" for a one-component prefix (the saved file's stem, or
  // "archive").
  const ZipEntry* pkl = nullptr;
  std::string prefix;
  for (const ZipEntry& e : r->zip_->entries()) {
    const std::size_t slash = e.name.find('/');
    if (slash != std::string::npos && e.name.compare(slash, std::string::npos, "/data.pkl") == 0) {
      pkl = &e;
      prefix = e.name.substr(0, slash + 1);
      break;
    }
  }
  if (pkl == nullptr) {
    fail("record: '" + file +
         "' is a zip archive without a '<name>/data.pkl': not a torch.save file");
  }
  if (const ZipEntry* bo = r->zip_->find(prefix + "byteorder")) {
    std::vector<std::byte> b = r->zip_->read(*bo, true);
    if (std::string(reinterpret_cast<const char*>(b.data()), b.size()) != "little") {
      fail("record: '" + file + "' was saved on a big-endian machine, which ember does not read");
    }
  }
  std::vector<std::byte> bytes = r->zip_->read(*pkl, options.verify_checksums);
  std::size_t pos = 0;
  const std::uint32_t root = pk::unpickle(bytes, pos, r->arena_, file);
  for (const pk::StorageRef& s : r->arena_.storages) {
    const ZipEntry* e = r->zip_->find(prefix + "data/" + s.key);
    if (e == nullptr)
      fail("record: '" + file + "' lacks the storage '" + prefix + "data/" + s.key + "'");
    if (e->uncompressed < storage_bytes(s, file)) {
      fail("record: '" + file + "': storage '" + s.key + "' holds " +
           std::to_string(e->uncompressed) + " bytes, less than its " + std::to_string(s.numel) +
           " elements of " + name(s.dtype));
    }
    r->storage_bytes_.push_back({e, 0});
  }
  r->set_tensors(StateDict(r->arena_, root, options.top_level_key, file));
  return r;
}

std::unique_ptr<TensorReader> open_pytorch_legacy(std::shared_ptr<const ByteSource> source,
                                                  const ReaderOptions& options) {
  const std::string file = source->name();
  auto r = std::make_unique<PyTorchReader>(source, Format::PyTorchLegacy);
  // The pickles are read from a prefix of the file; the storages follow them. The pickles'
  // own size is unknown up front, so the whole file is read once (bounded by its size).
  std::vector<std::byte> bytes = source->read_vector(0, source->size());
  std::size_t pos = 0;
  pk::Arena& a = r->arena_;
  auto next = [&]() { return pk::unpickle(bytes, pos, a, file); };
  const auto not_legacy = [&](const std::string& what) {
    fail("record: '" + file + "' is not a legacy torch.save file: " + what);
  };
  // 0x1950a86a20f9469cfc6c, little-endian.
  const unsigned char kMagic[10] = {0x6c, 0xfc, 0x9c, 0x46, 0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19};
  const std::uint32_t magic = next();
  if (a.at(magic).kind != pk::Kind::BigInt || a.str(magic).size() != 10 ||
      std::memcmp(a.str(magic).data(), kMagic, 10) != 0) {
    not_legacy("bad magic number");
  }
  const std::uint32_t protocol = next();
  if (a.at(protocol).kind != pk::Kind::Int || a.at(protocol).i != 1001) {
    not_legacy("protocol version is not 1001");
  }
  const std::uint32_t sys_info = next();
  if (a.at(sys_info).kind != pk::Kind::Dict) not_legacy("no system-info dict");
  for (const auto& [k, v] : a.dicts[a.at(sys_info).aux]) {
    if (a.at(k).kind == pk::Kind::String && a.str(k) == "little_endian" &&
        !(a.at(v).kind == pk::Kind::Bool && a.at(v).i == 1)) {
      fail("record: '" + file + "' was saved on a big-endian machine, which ember does not read");
    }
  }
  const std::uint32_t root = next();
  const std::uint32_t keys = next();
  if (a.at(keys).kind != pk::Kind::List) not_legacy("no list of storage keys");
  // The storages follow, in the order of the key list.
  std::unordered_map<std::string, std::uint64_t> offset_of;  // key -> its bytes' offset
  std::unordered_map<std::string, std::uint64_t> numel_of;
  std::uint64_t at = pos;
  for (std::uint32_t k : a.lists[a.at(keys).aux]) {
    if (a.at(k).kind != pk::Kind::String) not_legacy("a storage key is not a string");
    const std::string& key = a.str(k);
    source->require_range(at, 8, "the size of storage '" + key + "'");
    const std::uint64_t numel = source->read_u64(at);
    at += 8;
    // The element size is the storage type's; find any reference to this key.
    const pk::StorageRef* ref = nullptr;
    for (const pk::StorageRef& s : a.storages) {
      if (s.key == key) ref = &s;
    }
    const std::uint64_t nbytes =
        ref == nullptr
            ? 0
            : checked_mul(numel, size_of(ref->dtype), "record: '" + file + "'", "the byte count");
    if (ref == nullptr) not_legacy("storage '" + key + "' is listed but never used");
    source->require_range(at, nbytes, "the data of storage '" + key + "'");
    if (!offset_of.emplace(key, at).second) not_legacy("storage '" + key + "' is listed twice");
    numel_of[key] = numel;
    at += nbytes;
  }
  for (const pk::StorageRef& s : a.storages) {
    auto it = offset_of.find(s.key);
    if (it == offset_of.end())
      fail("record: '" + file + "' lacks the data of storage '" + s.key + "'");
    if (numel_of[s.key] < s.numel) {
      fail("record: '" + file + "': storage '" + s.key + "' holds " +
           std::to_string(numel_of[s.key]) + " elements, less than its " + std::to_string(s.numel));
    }
    r->storage_bytes_.push_back({nullptr, it->second});
  }
  r->set_tensors(StateDict(a, root, options.top_level_key, file));
  return r;
}

}  // namespace ember::record::detail
