// A restricted unpickler: the Python pickle opcodes and the few globals a PyTorch
// state_dict is made of, and nothing else. It builds values (None, bools, ints, floats,
// strings, tuples, lists, dicts, storages and tensor views) and never executes anything:
// a global outside the allow-list (collections.OrderedDict, torch._utils._rebuild_tensor_v2,
// _rebuild_parameter[_with_state], the torch.*Storage types) is an ember::Error naming it.
//
// Note [Pickle values in an arena]
// Values live in one vector and refer to each other by index, so a hostile pickle cannot
// build a chain of owning pointers whose destruction recurses off the stack, and cycles
// (a list appended to itself) cost nothing. Every opcode adds at most one value and a few
// indices, so memory stays linear in the pickle's size.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "ember/base/dtype.hpp"

namespace ember::record::detail::pickle {

enum class Kind : std::uint8_t {
  None,
  Bool,
  Int,
  BigInt,
  Float,
  String,
  Bytes,
  Tuple,
  List,
  Dict,
  Global,
  Storage,
  Tensor
};
const char* name(Kind k);

struct Value {
  Kind kind = Kind::None;
  std::uint32_t aux = 0;  // index into the arena's strings, lists, dicts, storages or tensors
  std::int64_t i = 0;     // Bool, Int
  double f = 0;           // Float
};

// A persistent storage reference: ('storage', torch.FloatStorage, key, location, numel).
struct StorageRef {
  std::string key;
  DType dtype;
  std::uint64_t numel;
};
// torch._utils._rebuild_tensor_v2(storage, offset, size, stride, ...).
struct TensorRef {
  std::uint32_t storage;  // index into storages
  std::uint64_t offset;   // in elements
  std::vector<std::uint64_t> size, stride;
};

struct Arena {
  std::vector<Value> values;
  // String, Bytes, Global as "module.name", BigInt as its little-endian two's complement
  std::vector<std::string> strings;
  std::vector<std::vector<std::uint32_t>> lists;  // Tuple, List
  std::vector<std::vector<std::pair<std::uint32_t, std::uint32_t>>> dicts;
  std::vector<StorageRef> storages;
  std::vector<TensorRef> tensors;

  const Value& at(std::uint32_t v) const { return values.at(v); }
  const std::string& str(std::uint32_t v) const { return strings.at(at(v).aux); }
};

// Runs one pickle from data[pos], leaving pos just past its STOP; returns the root value.
// `file` names the source in errors. Persistent ids are storages: ('storage', type, key,
// location, numel), with a sixth element (view metadata, which must be None) in the legacy
// format.
std::uint32_t unpickle(std::span<const std::byte> data, std::size_t& pos, Arena& arena,
                       const std::string& file);

}  // namespace ember::record::detail::pickle
