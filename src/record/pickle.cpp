#include "record/pickle.hpp"

#include <cstdio>
#include <cstring>

#include "ember/base/error.hpp"
#include "record/checked.hpp"

namespace ember::record::detail::pickle {

const char* name(Kind k) {
  switch (k) {
    case Kind::None:
      return "None";
    case Kind::Bool:
      return "a bool";
    case Kind::Int:
      return "an int";
    case Kind::BigInt:
      return "an int wider than 64 bits";
    case Kind::Float:
      return "a float";
    case Kind::String:
      return "a string";
    case Kind::Bytes:
      return "bytes";
    case Kind::Tuple:
      return "a tuple";
    case Kind::List:
      return "a list";
    case Kind::Dict:
      return "a dict";
    case Kind::Global:
      return "a global";
    case Kind::Storage:
      return "a storage";
    case Kind::Tensor:
      return "a tensor";
  }
  return "?";
}

namespace {

struct StorageType {
  const char* name;
  DType dtype;
};
constexpr StorageType kStorages[] = {
    {"torch.FloatStorage", DType::F32}, {"torch.DoubleStorage", DType::F64},
    {"torch.HalfStorage", DType::F16},  {"torch.BFloat16Storage", DType::BF16},
    {"torch.LongStorage", DType::I64},  {"torch.IntStorage", DType::I32},
    {"torch.ShortStorage", DType::I16}, {"torch.CharStorage", DType::I8},
    {"torch.ByteStorage", DType::U8},   {"torch.BoolStorage", DType::Bool}};

const char* const kOrderedDict = "collections.OrderedDict";
const char* const kRebuildTensor = "torch._utils._rebuild_tensor_v2";
const char* const kRebuildParameter = "torch._utils._rebuild_parameter";
const char* const kRebuildParameterWithState = "torch._utils._rebuild_parameter_with_state";

bool allowed_global(const std::string& g) {
  if (g == kOrderedDict || g == kRebuildTensor || g == kRebuildParameter ||
      g == kRebuildParameterWithState) {
    return true;
  }
  for (const auto& s : kStorages) {
    if (g == s.name) return true;
  }
  return false;
}

class Machine {
 public:
  Machine(std::span<const std::byte> data, std::size_t pos, Arena& a, const std::string& file)
      : data_(data), pos_(pos), a_(a), file_(file) {}

  std::uint32_t run(std::size_t& end) {
    for (;;) {
      const std::size_t at = pos_;
      const auto op = static_cast<unsigned char>(take(1)[0]);
      op_at_ = at;
      switch (op) {
        case 0x80:
          take(1);
          break;  // PROTO
        case 0x95:
          take(8);
          break;     // FRAME: a framing hint only
        case '.': {  // STOP
          if (stack_.size() != 1 || !marks_.empty()) bad("STOP with a malformed stack");
          end = pos_;
          return stack_.back();
        }
        case '(':
          marks_.push_back(stack_.size());
          break;  // MARK
        case '0':
          pop();
          break;  // POP
        case '1':
          pop_mark();
          break;  // POP_MARK
        case '2':
          push(top());
          break;  // DUP
        case 'N':
          push(make(Kind::None));
          break;
        case 0x88:
          push(make_int(Kind::Bool, 1));
          break;  // NEWTRUE
        case 0x89:
          push(make_int(Kind::Bool, 0));
          break;     // NEWFALSE
        case 'J': {  // BININT
          std::int32_t v;
          std::memcpy(&v, take(4), 4);
          push(make_int(Kind::Int, v));
          break;
        }
        case 'K':
          push(make_int(Kind::Int, static_cast<unsigned char>(take(1)[0])));
          break;
        case 'M': {  // BININT2
          std::uint16_t v;
          std::memcpy(&v, take(2), 2);
          push(make_int(Kind::Int, v));
          break;
        }
        case 0x8a:
          long_int(static_cast<unsigned char>(take(1)[0]));
          break;  // LONG1
        case 0x8b:
          long_int(length(4));
          break;     // LONG4
        case 'G': {  // BINFLOAT, big-endian
          const std::byte* p = take(8);
          std::uint64_t u = 0;
          for (int k = 0; k < 8; ++k) u = (u << 8) | static_cast<unsigned char>(p[k]);
          Value v{Kind::Float};
          std::memcpy(&v.f, &u, 8);
          push(add(v));
          break;
        }
        case 'X':
          push(make_string(Kind::String, length(4)));
          break;  // BINUNICODE
        case 0x8c:
          push(make_string(Kind::String, length(1)));
          break;  // SHORT_BINUNICODE
        case 0x8d:
          push(make_string(Kind::String, length(8)));
          break;  // BINUNICODE8
        case 'T':
          push(make_string(Kind::String, length(4)));
          break;  // BINSTRING
        case 'U':
          push(make_string(Kind::String, length(1)));
          break;  // SHORT_BINSTRING
        case 'B':
          push(make_string(Kind::Bytes, length(4)));
          break;  // BINBYTES
        case 'C':
          push(make_string(Kind::Bytes, length(1)));
          break;  // SHORT_BINBYTES
        case 0x8e:
          push(make_string(Kind::Bytes, length(8)));
          break;  // BINBYTES8
        case ')':
          push(make_list(Kind::Tuple, {}));
          break;  // EMPTY_TUPLE
        case 't':
          push(make_list(Kind::Tuple, pop_mark()));
          break;  // TUPLE
        case 0x85:
          push(make_list(Kind::Tuple, pop_n(1)));
          break;  // TUPLE1
        case 0x86:
          push(make_list(Kind::Tuple, pop_n(2)));
          break;  // TUPLE2
        case 0x87:
          push(make_list(Kind::Tuple, pop_n(3)));
          break;  // TUPLE3
        case ']':
          push(make_list(Kind::List, {}));
          break;  // EMPTY_LIST
        case 'l':
          push(make_list(Kind::List, pop_mark()));
          break;     // LIST
        case 'a': {  // APPEND
          std::uint32_t v = pop();
          list_of(top()).push_back(v);
          break;
        }
        case 'e': {  // APPENDS
          std::vector<std::uint32_t> items = pop_mark();
          auto& l = list_of(top());
          l.insert(l.end(), items.begin(), items.end());
          break;
        }
        case '}':
          push(make_dict());
          break;     // EMPTY_DICT
        case 'd': {  // DICT
          std::vector<std::uint32_t> items = pop_mark();
          std::uint32_t d = make_dict();
          set_items(d, items);
          push(d);
          break;
        }
        case 's': {  // SETITEM
          std::vector<std::uint32_t> kv = pop_n(2);
          set_items(top(), kv);
          break;
        }
        case 'u': {  // SETITEMS
          std::vector<std::uint32_t> kv = pop_mark();
          set_items(top(), kv);
          break;
        }
        case 'q':
          memo_[static_cast<unsigned char>(take(1)[0])] = top();
          break;  // BINPUT
        case 'r':
          memo_[static_cast<std::uint32_t>(length(4))] = top();
          break;      // LONG_BINPUT
        case 0x94: {  // MEMOIZE
          auto n = static_cast<std::uint32_t>(memo_.size());
          memo_[n] = top();
          break;
        }
        case 'h':
          push(memo(static_cast<unsigned char>(take(1)[0])));
          break;  // BINGET
        case 'j':
          push(memo(static_cast<std::uint32_t>(length(4))));
          break;     // LONG_BINGET
        case 'c': {  // GLOBAL
          std::string module = line();
          std::string nm = line();
          push(make_global(module + "." + nm));
          break;
        }
        case 0x93: {  // STACK_GLOBAL
          std::vector<std::uint32_t> mn = pop_n(2);
          if (a_.at(mn[0]).kind != Kind::String || a_.at(mn[1]).kind != Kind::String) {
            bad("STACK_GLOBAL needs two strings");
          }
          push(make_global(a_.str(mn[0]) + "." + a_.str(mn[1])));
          break;
        }
        case 'R': {  // REDUCE
          std::vector<std::uint32_t> fa = pop_n(2);
          push(reduce(fa[0], fa[1]));
          break;
        }
        case 'b': {  // BUILD: the state of an OrderedDict (its _metadata) or a tensor
          std::uint32_t state = pop();
          (void)state;
          Kind k = a_.at(top()).kind;
          if (k != Kind::Dict && k != Kind::Tensor) {
            bad(std::string("BUILD on ") + name(k) + ", which a state_dict never has");
          }
          break;
        }
        case 'Q':
          push(persistent(pop()));
          break;  // BINPERSID
        default: {
          char hex[8];
          std::snprintf(hex, sizeof hex, "0x%02x", op);
          bad(std::string("opcode ") + hex +
              " is not one a state_dict uses (ember runs no code from files)");
        }
      }
    }
  }

 private:
  [[noreturn]] void bad(const std::string& what) const {
    fail("record: '" + file_ + "': pickle at offset " + std::to_string(op_at_) + ": " + what);
  }
  const std::byte* take(std::uint64_t n) {
    if (!range_within(pos_, n, data_.size())) bad("truncated (the pickle ends mid-opcode)");
    const std::byte* p = data_.data() + pos_;
    pos_ += n;
    return p;
  }
  std::uint64_t length(int bytes) {
    const std::byte* p = take(static_cast<std::uint64_t>(bytes));
    std::uint64_t v = 0;
    std::memcpy(&v, p, static_cast<std::size_t>(bytes));
    return v;
  }
  std::string line() {
    std::string s;
    for (;;) {
      char c = static_cast<char>(take(1)[0]);
      if (c == '\n') return s;
      if (s.size() > 256) bad("a GLOBAL name longer than 256 characters");
      s += c;
    }
  }
  std::uint32_t add(const Value& v) {
    if (a_.values.size() >= 0xffffffffu) bad("too many values");
    a_.values.push_back(v);
    return static_cast<std::uint32_t>(a_.values.size() - 1);
  }
  std::uint32_t make(Kind k) { return add(Value{k}); }
  std::uint32_t make_int(Kind k, std::int64_t i) { return add(Value{k, 0, i, 0}); }
  std::uint32_t make_string(Kind k, std::uint64_t n) {
    const std::byte* p = take(n);
    a_.strings.emplace_back(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
    return add(Value{k, static_cast<std::uint32_t>(a_.strings.size() - 1)});
  }
  std::uint32_t make_list(Kind k, std::vector<std::uint32_t> items) {
    a_.lists.push_back(std::move(items));
    return add(Value{k, static_cast<std::uint32_t>(a_.lists.size() - 1)});
  }
  std::uint32_t make_dict() {
    a_.dicts.emplace_back();
    return add(Value{Kind::Dict, static_cast<std::uint32_t>(a_.dicts.size() - 1)});
  }
  std::uint32_t make_global(const std::string& g) {
    if (!allowed_global(g)) {
      bad("the global '" + g +
          "' is not allowed: a state_dict needs only tensors, storages and dicts, and ember "
          "never runs code from a file");
    }
    a_.strings.push_back(g);
    return add(Value{Kind::Global, static_cast<std::uint32_t>(a_.strings.size() - 1)});
  }
  void long_int(std::uint64_t n) {
    const std::byte* p = take(n);
    if (n > 8) {
      a_.strings.emplace_back(reinterpret_cast<const char*>(p), static_cast<std::size_t>(n));
      push(add(Value{Kind::BigInt, static_cast<std::uint32_t>(a_.strings.size() - 1)}));
      return;
    }
    std::uint64_t u = 0;
    std::memcpy(&u, p, static_cast<std::size_t>(n));
    if (n > 0 && n < 8 && (static_cast<unsigned char>(p[n - 1]) & 0x80)) {
      u |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    }
    push(make_int(Kind::Int, static_cast<std::int64_t>(u)));
  }
  void push(std::uint32_t v) { stack_.push_back(v); }
  std::uint32_t top() const {
    if (stack_.size() <= (marks_.empty() ? 0 : marks_.back())) bad("an empty stack");
    return stack_.back();
  }
  std::uint32_t pop() {
    std::uint32_t v = top();
    stack_.pop_back();
    return v;
  }
  std::vector<std::uint32_t> pop_n(std::size_t n) {
    const std::size_t floor = marks_.empty() ? 0 : marks_.back();
    if (stack_.size() < floor + n) bad("too few values on the stack");
    std::vector<std::uint32_t> out(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
    stack_.resize(stack_.size() - n);
    return out;
  }
  std::vector<std::uint32_t> pop_mark() {
    if (marks_.empty()) bad("no MARK to pop to");
    const std::size_t m = marks_.back();
    marks_.pop_back();
    std::vector<std::uint32_t> out(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return out;
  }
  std::uint32_t memo(std::uint32_t key) const {
    auto it = memo_.find(key);
    if (it == memo_.end()) bad("a memo GET of an unset slot " + std::to_string(key));
    return it->second;
  }
  std::vector<std::uint32_t>& list_of(std::uint32_t v) {
    const Value& x = a_.at(v);
    if (x.kind != Kind::List) bad(std::string("APPEND to ") + name(x.kind));
    return a_.lists[x.aux];
  }
  void set_items(std::uint32_t d, const std::vector<std::uint32_t>& kv) {
    const Value& x = a_.at(d);
    if (x.kind != Kind::Dict) bad(std::string("SETITEM on ") + name(x.kind));
    if (kv.size() % 2 != 0) bad("SETITEMS with an odd number of values");
    auto& dict = a_.dicts[x.aux];
    for (std::size_t k = 0; k < kv.size(); k += 2) dict.emplace_back(kv[k], kv[k + 1]);
  }
  const std::vector<std::uint32_t>& tuple(std::uint32_t v, const char* what) const {
    const Value& x = a_.at(v);
    if (x.kind != Kind::Tuple) bad(std::string(what) + " must be a tuple, got " + name(x.kind));
    return a_.lists[x.aux];
  }
  std::uint64_t non_negative(std::uint32_t v, const char* what) const {
    const Value& x = a_.at(v);
    if (x.kind != Kind::Int || x.i < 0) bad(std::string(what) + " must be a non-negative int");
    return static_cast<std::uint64_t>(x.i);
  }
  std::vector<std::uint64_t> ints(std::uint32_t v, const char* what) const {
    std::vector<std::uint64_t> out;
    for (std::uint32_t e : tuple(v, what)) out.push_back(non_negative(e, what));
    return out;
  }

  std::uint32_t reduce(std::uint32_t f, std::uint32_t args) {
    const Value& fv = a_.at(f);
    if (fv.kind != Kind::Global) bad(std::string("REDUCE calls ") + name(fv.kind));
    const std::string g = a_.strings[fv.aux];
    const std::vector<std::uint32_t> av = tuple(args, "REDUCE's arguments");
    if (g == kOrderedDict) {
      if (!av.empty()) bad("OrderedDict with arguments");
      return make_dict();
    }
    if (g == kRebuildTensor) {
      if (av.size() != 6 && av.size() != 7) bad("_rebuild_tensor_v2 takes 6 or 7 arguments");
      const Value& s = a_.at(av[0]);
      if (s.kind != Kind::Storage) bad("_rebuild_tensor_v2's first argument is not a storage");
      TensorRef t{s.aux, non_negative(av[1], "a tensor's storage offset"),
                  ints(av[2], "a tensor's size"), ints(av[3], "a tensor's stride")};
      if (t.size.size() != t.stride.size()) bad("a tensor's size and stride differ in length");
      if (t.size.size() > 16) bad("a tensor of rank above 16");
      a_.tensors.push_back(std::move(t));
      return add(Value{Kind::Tensor, static_cast<std::uint32_t>(a_.tensors.size() - 1)});
    }
    if (g == kRebuildParameter || g == kRebuildParameterWithState) {
      if (av.empty() || a_.at(av[0]).kind != Kind::Tensor) bad(g + " without a tensor");
      return av[0];
    }
    bad("REDUCE calls '" + g + "', which only names a type here");
  }

  std::uint32_t persistent(std::uint32_t pid) {
    const std::vector<std::uint32_t>& t = tuple(pid, "a persistent id");
    if (t.size() != 5 && t.size() != 6) bad("a persistent id is not a 5- or 6-tuple");
    if (a_.at(t[0]).kind != Kind::String || a_.str(t[0]) != "storage") {
      bad("a persistent id that is not a storage");
    }
    const Value& type = a_.at(t[1]);
    if (type.kind != Kind::Global) bad("a storage whose type is not a global");
    const std::string& tn = a_.strings[type.aux];
    const StorageType* st = nullptr;
    for (const auto& s : kStorages) {
      if (tn == s.name) st = &s;
    }
    if (st == nullptr) bad("a storage of type '" + tn + "'");
    if (a_.at(t[2]).kind != Kind::String) bad("a storage key that is not a string");
    if (t.size() == 6 && a_.at(t[5]).kind != Kind::None) {
      bad("a storage view (PyTorch before 0.4), which ember does not read");
    }
    a_.storages.push_back({a_.str(t[2]), st->dtype, non_negative(t[4], "a storage's size")});
    return add(Value{Kind::Storage, static_cast<std::uint32_t>(a_.storages.size() - 1)});
  }

  std::span<const std::byte> data_;
  std::size_t pos_;
  std::size_t op_at_ = 0;
  Arena& a_;
  const std::string& file_;
  std::vector<std::uint32_t> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint32_t, std::uint32_t> memo_;
};

}  // namespace

std::uint32_t unpickle(std::span<const std::byte> data, std::size_t& pos, Arena& arena,
                       const std::string& file) {
  Machine m(data, pos, arena, file);
  return m.run(pos);
}

}  // namespace ember::record::detail::pickle
