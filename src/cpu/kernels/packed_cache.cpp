// The cache of packed operands (Note [Packed weight cache] in packed_cache.hpp).
#include "cpu/kernels/packed_cache.hpp"

#include <mutex>
#include <utility>
#include <vector>

namespace ember::cpu {

namespace {

struct Entry {
  PackedKey key;
  std::shared_ptr<const void> panels;  // null: seen once
};
using EntryList = std::vector<Entry>;  // a buffer's Buffer::derived

// Serialises the reads and writes of Buffer::derived by the packing ops.
Mutex& cache_mutex() {
  static Mutex mu;
  return mu;
}

// key's entry in buf's list, made (empty) when missing; *made says whether it was.
Entry& entry_of(Buffer& buf, const PackedKey& key, bool* made) {
  auto* list = static_cast<EntryList*>(buf.derived.get());
  if (list == nullptr) {
    buf.derived = std::make_shared<EntryList>();
    list = static_cast<EntryList*>(buf.derived.get());
  }
  for (auto& e : *list) {
    if (e.key == key) {
      *made = false;
      return e;
    }
  }
  list->push_back({key, nullptr});
  *made = true;
  return list->back();
}

}  // namespace

PackedKey packed_key(PackedUse use, const CpuTensor& w, std::array<std::int64_t, 3> params) {
  return {use, w.offset(), w.shape(), w.strides(), w.dtype(), params, detail::gemm_active_isa()};
}

namespace detail {

std::shared_ptr<const void> find_packed(Buffer& buf, const PackedKey& key, bool* first) {
  std::lock_guard<Mutex> lock(cache_mutex());
  return entry_of(buf, key, first).panels;
}

std::shared_ptr<const void> keep_packed(Buffer& buf, const PackedKey& key,
                                        std::shared_ptr<const void> panels) {
  std::lock_guard<Mutex> lock(cache_mutex());
  bool made = false;
  Entry& e = entry_of(buf, key, &made);
  if (!e.panels) e.panels = std::move(panels);
  return e.panels;
}

}  // namespace detail
}  // namespace ember::cpu
