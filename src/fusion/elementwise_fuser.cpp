// The element-wise fuser. Records are taken in order; one group is open at a time:
//  - an element-wise op (Unary, Binary, Where, Cast) joins the open group when its result
//    has the group's shape and the group has room; its operands are values computed in the
//    group or inputs (values already computed; a broadcast input is read through stride-0
//    dims by the executor). Otherwise the group closes and the op opens the next one.
//  - any other op runs alone, at once, when it reads nothing the open group computes (it
//    cannot see the group's values, so the order does not matter); otherwise the group
//    closes first (a view of a group value: ViewOfInternal). Views of inputs thus run
//    before the group and reach it as strided inputs: index transforms, not copies.
// When a group closes, a value it computes is an output when a handle to it still exists
// or a later record reads it; every other value is elided (never written). The group's
// signature holds the functions, dtypes, dim classes (distinct extents numbered in order
// of first appearance, extent 1 as class 0), the inputs' layout classes (fresh or the view
// op that made them) and liveness (outputs, inputs the group may consume): never sizes,
// strides or parameter values.
#include "fusion/elementwise_fuser.hpp"

#include <charconv>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>

#include "ember/base/error.hpp"

namespace ember::fusion {

using backend::CloseReason;
using backend::FusedGroup;
using backend::FusedInstr;

namespace {

std::uint64_t fnv1a(const std::string& s) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

bool is_elementwise(ir::OpKind k) {
  return k == ir::OpKind::Unary || k == ir::OpKind::Binary || k == ir::OpKind::Where ||
         k == ir::OpKind::Cast;
}

std::string op_label(const ir::Op& op) {
  if (const auto* u = std::get_if<ir::Unary>(&op)) return ir::name(u->fn);
  if (const auto* b = std::get_if<ir::Binary>(&op)) return ir::name(b->fn);
  if (std::holds_alternative<ir::Where>(op)) return "where";
  if (std::holds_alternative<ir::Cast>(op)) return "cast";
  return ir::name(ir::kind_of(op));
}

class Grouper {
 public:
  explicit Grouper(Shared& shared) : shared_(shared) {}

  void add(Record& r) {
    const ir::OpKind kind = ir::kind_of(r.op);
    if (is_elementwise(kind)) {
      if (!members_.empty()) {
        if (r.outs[0]->shape != shape_) return close_then_open(r, CloseReason::ShapeMismatch);
        if (members_.size() >= shared_.options.max_group_ops)
          return close_then_open(r, CloseReason::MaxOps);
        std::size_t fresh = 0;
        for (const auto& v : r.args) fresh += v && !ids_.count(v.get());
        if (inputs_.size() + fresh > shared_.options.max_group_inputs)
          return close_then_open(r, CloseReason::MaxInputs);
      }
      join(r);
      return;
    }
    bool reads_group = false;
    for (const auto& v : r.args) reads_group = reads_group || (v && internal(*v));
    if (reads_group) {
      close(ir::op_class(kind) == ir::OpClass::View ? CloseReason::ViewOfInternal
                                                    : CloseReason::NonFusableOp);
    }
    run_alone(shared_, r);
  }

  void close(CloseReason why);

 private:
  bool internal(const Value& v) const {
    auto it = ids_.find(&v);
    return it != ids_.end() && it->second >= kInternalBase;
  }

  void close_then_open(Record& r, CloseReason why) {
    shared_.report.decision(op_label(r.op) + ": closes the group (" + backend::name(why) + ")");
    close(why);
    join(r);
  }

  // Value ids while the group is open: inputs get 0, 1, ...; internal values kInternalBase
  // + instruction index (renumbered after the inputs at close).
  static constexpr std::int32_t kInternalBase = 1 << 20;

  std::int32_t id_of(const std::shared_ptr<Value>& v) {
    auto it = ids_.find(v.get());
    if (it != ids_.end()) {
      if (it->second < kInternalBase) ++input_uses_[static_cast<std::size_t>(it->second)];
      return it->second;
    }
    EMBER_ASSERT(v->state == State::Ready);  // earlier records ran, or are in this group
    const auto id = static_cast<std::int32_t>(inputs_.size());
    inputs_.push_back(v);
    input_uses_.push_back(1);
    ids_[v.get()] = id;
    return id;
  }

  void join(Record& r) {
    if (members_.empty()) shape_ = r.outs[0]->shape;
    FusedInstr in;
    std::visit(
        [&](auto& o) {
          using T = std::decay_t<decltype(o)>;
          if constexpr (std::is_same_v<T, ir::Unary>) {
            in.kind = FusedInstr::Kind::Unary;
            in.unary = o.fn;
            in.p0 = o.p0;
            in.p1 = o.p1;
          } else if constexpr (std::is_same_v<T, ir::Binary>) {
            in.kind = FusedInstr::Kind::Binary;
            in.binary = o.fn;
          } else if constexpr (std::is_same_v<T, ir::Where>) {
            in.kind = FusedInstr::Kind::Where;
          } else if constexpr (std::is_same_v<T, ir::Cast>) {
            in.kind = FusedInstr::Kind::Cast;
          }
        },
        r.op);
    for (std::size_t i = 0; i < r.args.size(); ++i) in.args[i] = id_of(r.args[i]);
    in.out = r.outs[0]->dtype;
    ids_[r.outs[0].get()] = kInternalBase + static_cast<std::int32_t>(members_.size());
    code_.push_back(in);
    members_.push_back(&r);
    shared_.report.decision(op_label(r.op) + ": joins the group (" +
                            std::to_string(members_.size()) + " ops)");
  }

  Shared& shared_;
  Shape shape_;
  std::vector<Record*> members_;
  std::vector<FusedInstr> code_;
  std::vector<std::shared_ptr<Value>> inputs_;
  std::vector<std::int32_t> input_uses_;
  std::unordered_map<const Value*, std::int32_t> ids_;
};

void Grouper::close(CloseReason why) {
  if (members_.empty()) return;
  if (members_.size() == 1) {  // nothing to fuse
    Record& r = *members_.front();
    members_.clear();
    code_.clear();
    inputs_.clear();
    input_uses_.clear();
    ids_.clear();
    run_alone(shared_, r);
    return;
  }
  const auto n_in = static_cast<std::int32_t>(inputs_.size());
  const auto renumber = [&](std::int32_t id) {
    return id >= kInternalBase ? id - kInternalBase + n_in : id;
  };
  for (auto& in : code_) {
    for (auto& a : in.args) {
      if (a >= 0) a = renumber(a);
    }
  }
  // Liveness: uses of each internal value inside the group.
  std::vector<std::int32_t> uses(code_.size(), 0);
  for (const auto& in : code_) {
    for (std::int32_t a : in.args) {
      if (a >= n_in) ++uses[static_cast<std::size_t>(a - n_in)];
    }
  }
  FusedGroup g;
  g.shape = shape_;
  backend::FusionGroupInfo info;
  std::vector<Value*> out_values;
  for (std::size_t i = 0; i < members_.size(); ++i) {
    Value& v = *members_[i]->outs[0];
    const std::int32_t later =
        v.pending_uses.fetch_sub(uses[i], std::memory_order_acq_rel) - uses[i];
    const bool needed = later > 0 || !v.dropped.load(std::memory_order_acquire);
    if (needed) {
      g.outputs.push_back(n_in + static_cast<std::int32_t>(i));
      out_values.push_back(&v);
    } else {
      ++info.elided;
      info.bytes_saved += v.bytes() * static_cast<std::size_t>(1 + uses[i]);
    }
    info.ops.push_back(op_label(members_[i]->op));
  }
  // The signature (see the top of this file), appended number by number (no formatting
  // calls: this runs once per group, on the recording path's budget).
  std::string sig = "ew[";
  sig.reserve(64 + 24 * (inputs_.size() + code_.size()));
  const auto num = [&sig](long long x) {
    char buf[24];
    const auto r = std::to_chars(buf, buf + sizeof buf, x);
    sig.append(buf, r.ptr);
  };
  std::map<std::size_t, int> dim_class{{1, 0}};
  const auto cls = [&](std::size_t e) {
    auto it = dim_class.find(e);
    if (it == dim_class.end()) it = dim_class.emplace(e, static_cast<int>(dim_class.size())).first;
    num(it->second);
    sig += ',';
  };
  for (std::size_t d = 0; d < shape_.rank(); ++d) cls(shape_[d]);
  sig += "]";
  for (std::size_t k = 0; k < inputs_.size(); ++k) {
    Value& v = *inputs_[k];
    const bool last = v.dropped.load(std::memory_order_acquire) &&
                      v.pending_uses.load(std::memory_order_acquire) == input_uses_[k];
    sig += " in:";
    sig += ember::name(v.dtype);
    sig += '[';
    for (std::size_t d = 0; d < v.shape.rank(); ++d) cls(v.shape[d]);
    sig += "]L";
    num(v.layout);
    sig += last ? 'c' : 'k';
    g.inputs.push_back(take_input(v, input_uses_[k]));
  }
  for (const auto& in : code_) {
    sig += ' ';
    num(static_cast<int>(in.kind));
    sig += ':';
    num(in.kind == FusedInstr::Kind::Binary ? static_cast<int>(in.binary)
                                            : static_cast<int>(in.unary));
    sig += ':';
    sig += ember::name(in.out);
    sig += '(';
    num(in.args[0]);
    sig += ',';
    num(in.args[1]);
    sig += ',';
    num(in.args[2]);
    sig += ')';
  }
  sig += " out:";
  for (std::int32_t o : g.outputs) {
    num(o);
    sig += ',';
  }
  g.signature = std::move(sig);
  g.key = fnv1a(g.signature);
  g.code = std::move(code_);
  info.inputs = g.inputs.size();
  info.outputs = g.outputs.size();
  info.key = g.key;
  info.fused = shared_.inner->runs_fused();
  info.closed = why;
  std::vector<Record*> members = std::move(members_);
  members_.clear();
  code_.clear();
  inputs_.clear();
  input_uses_.clear();
  ids_.clear();
  auto outs = shared_.inner->run_fused(std::move(g));
  EMBER_ASSERT(outs.size() == out_values.size());
  for (std::size_t k = 0; k < outs.size(); ++k) {
    out_values[k]->inner = std::move(outs[k]);
    out_values[k]->state = State::Ready;
  }
  for (Record* r : members) {
    if (r->outs[0]->state == State::Pending) r->outs[0]->state = State::Elided;
    r->op = ir::Op{};
  }
  shared_.report.group(std::move(info));
}

}  // namespace

void run_records(Shared& shared, std::vector<Record>& records, CloseReason why) {
  Grouper g(shared);
  for (Record& r : records) g.add(r);
  g.close(why);
}

}  // namespace ember::fusion
