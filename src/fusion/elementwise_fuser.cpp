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

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <string>
#include <string_view>

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

std::string_view op_label(const ir::Op& op) {
  if (const auto* u = std::get_if<ir::Unary>(&op)) return ir::name(u->fn);
  if (const auto* b = std::get_if<ir::Binary>(&op)) return ir::name(b->fn);
  if (std::holds_alternative<ir::Where>(op)) return "where";
  if (std::holds_alternative<ir::Cast>(op)) return "cast";
  if (const auto* r = std::get_if<ir::Reduce>(&op)) return ir::name(r->fn);
  if (const auto* s = std::get_if<ir::Softmax>(&op)) return s->log ? "log_softmax" : "softmax";
  if (std::holds_alternative<ir::LayerNorm>(op)) return "layer_norm";
  return ir::name(ir::kind_of(op));
}

// The function an instruction applies, as the signature writes it.
std::uint64_t fn_code(const FusedInstr& in) {
  switch (in.kind) {
    case FusedInstr::Kind::Binary:
      return static_cast<std::uint64_t>(in.binary);
    case FusedInstr::Kind::Reduce:
      return static_cast<std::uint64_t>(in.reduce);
    case FusedInstr::Kind::Softmax:
      return in.log ? 1 : 0;
    default:
      return static_cast<std::uint64_t>(in.unary);
  }
}

// A one-element Fill (a scalar operand) that the flush keeps as a source instruction of the
// groups reading it.
bool is_scalar_fill(const Record& r) {
  return std::holds_alternative<ir::Fill>(r.op) && r.outs[0]->shape().num_elements() == 1;
}

// Note [Scalar sources]: a one-element Fill is not run when the flush reaches it: each group
// that reads it gets a Fill instruction (its value a run-time parameter, so plans and
// kernels serve every scalar value) and never reads it from memory. It runs alone only when
// something else needs it in memory — an op run alone reading it, a group of one op, or a
// handle to it still alive (or a reader in a later flush) when the flush ends.
class Grouper {
 public:
  explicit Grouper(Shared& shared) : shared_(shared) {
    // A group holds at most max_group_ops members, each with at most three scalar sources.
    const std::size_t ops = std::min<std::size_t>(shared.options.max_group_ops, 256);
    const std::size_t most = 4 * ops;
    members_.reserve(ops);
    code_.reserve(most);
    produced_.reserve(most);
    is_fill_.reserve(most);
  }

  void add(Record& r) {
    const ir::OpKind kind = ir::kind_of(r.op);
    if (is_elementwise(kind)) {
      if (!members_.empty()) {
        if (r.outs[0]->shape() != shape_) return close_then_open(r, CloseReason::ShapeMismatch);
        if (members_.size() >= shared_.options.max_group_ops)
          return close_then_open(r, CloseReason::MaxOps);
        std::size_t fresh = 0;
        for (const auto& v : r.args) fresh += v && !v->source && !known(*v);
        if (inputs_.size() + fresh > shared_.options.max_group_inputs)
          return close_then_open(r, CloseReason::MaxInputs);
      }
      join(r);
      return;
    }
    if ((kind == ir::OpKind::Reduce && ends_group(r)) ||
        ((kind == ir::OpKind::Softmax || kind == ir::OpKind::LayerNorm) && normalizes_group(r))) {
      join(r);
      close(CloseReason::Reduction);
      return;
    }
    if (shared_.fills && is_scalar_fill(r)) {
      r.outs[0]->source = &r;
      fills_.push_back(&r);
      return;
    }
    bool reads_group = false;  // (a fill the group reads is no value computed in it)
    for (const auto& v : r.args) reads_group = reads_group || (v && internal(*v) && !v->source);
    if (reads_group) {
      close(ir::op_class(kind) == ir::OpClass::View ? CloseReason::ViewOfInternal
                                                    : CloseReason::NonFusableOp);
    }
    materialize_fills(r);
    run_alone(shared_, r);
  }

  void close(CloseReason why);

  // At the end of the flush: the fills something still needs in memory run, the rest are
  // elided (Note [Scalar sources]).
  void finish() {
    for (Record* f : fills_) {
      Value& v = *f->outs[0];
      if (v.state != State::Pending) continue;
      v.source = nullptr;
      if (!v.dropped.load(std::memory_order_acquire) ||
          v.pending_uses.load(std::memory_order_acquire) > 0) {
        run_alone(shared_, *f);
      } else {
        v.state = State::Elided;
      }
    }
    fills_.clear();
  }

 private:
  // Whether v is a value of the open group: computed in it, or a fill it reads.
  bool internal(const Value& v) const { return v.group == group_ && v.group_id >= 0; }
  bool known(const Value& v) const {
    if (internal(v)) return true;
    for (const auto& in : inputs_) {
      if (in.get() == &v) return true;
    }
    return false;
  }

  // Whether a row instruction along dim of x may end the open group (Note [Fused rows] in
  // backend/fused_group.hpp): the inner backend fuses row reductions, x is a value computed
  // in the group, the group has room, and every extent after dim is 1.
  bool ends_in_rows(const Value* x, std::size_t dim) const {
    if (!shared_.row_reduction || members_.empty() || !x || !internal(*x) || x->source ||
        members_.size() >= shared_.options.max_group_ops) {
      return false;
    }
    for (std::size_t k = dim + 1; k < shape_.rank(); ++k) {
      if (shape_[k] != 1) return false;
    }
    return true;
  }

  // Whether the Reduce r ends the open group (Note [Fused reductions] of the Cpu): it
  // reduces a value computed in the group along rows, and the inner backend takes that.
  bool ends_group(const Record& r) const {
    const auto& op = std::get<ir::Reduce>(r.op);
    return ends_in_rows(r.args[0].get(), op.dim) &&
           shared_.row_reduction(op.fn, r.args[0]->dtype());
  }

  // Whether the Softmax or LayerNorm r ends the open group: it normalises rows of a value
  // computed in the group (a softmax along a dim whose later extents are 1, a layer norm
  // over the last dim), and a layer norm's weight and bias are values computed before the
  // group (inputs, not scalar sources).
  bool normalizes_group(const Record& r) const {
    const auto* s = std::get_if<ir::Softmax>(&r.op);
    if (!s && std::get<ir::LayerNorm>(r.op).dims != 1) return false;
    if (!ends_in_rows(r.args[0].get(), s ? s->dim : shape_.rank() - 1)) return false;
    std::size_t fresh = 0;
    for (std::size_t i = 1; i < r.args.size(); ++i) {
      const Value* v = r.args[i].get();
      if (!v) continue;
      if (internal(*v) || v->source) return false;
      fresh += !known(*v);
    }
    return inputs_.size() + fresh <= shared_.options.max_group_inputs;
  }

  // The deferred fills r reads run first, so r finds them in memory.
  void materialize_fills(Record& r) {
    for (const auto& v : r.args) {
      if (v && v->source && v->state == State::Pending) {
        Record& f = *v->source;
        v->source = nullptr;
        run_alone(shared_, f);
      }
    }
  }

  void close_then_open(Record& r, CloseReason why) {
    shared_.report.decision([&] {
      return std::string(op_label(r.op)) + ": closes the group (" + backend::name(why) + ")";
    });
    close(why);
    join(r);
  }

  // Value ids while the group is open: inputs get 0, 1, ...; internal values kInternalBase
  // + instruction index (renumbered after the inputs at close).
  static constexpr std::int32_t kInternalBase = 1 << 20;

  std::int32_t id_of(const std::shared_ptr<Value>& v) {
    if (internal(*v)) return v->group_id;
    if (v->source && v->state == State::Pending) {  // a scalar source: a Fill instruction
      const auto& f = std::get<ir::Fill>(v->source->op);
      FusedInstr in;
      in.kind = FusedInstr::Kind::Fill;
      in.out = f.dtype;
      in.bits = backend::fill_bits(f);
      v->group = group_;
      v->group_id = kInternalBase + static_cast<std::int32_t>(code_.size());
      code_.push_back(in);
      produced_.push_back(v.get());
      is_fill_.push_back(true);
      return v->group_id;
    }
    for (std::size_t k = 0; k < inputs_.size(); ++k) {
      if (inputs_[k].get() == v.get()) {
        ++input_uses_[k];
        return static_cast<std::int32_t>(k);
      }
    }
    EMBER_ASSERT(v->state == State::Ready);  // earlier records ran, or are in this group
    const auto id = static_cast<std::int32_t>(inputs_.size());
    inputs_.push_back(v);
    input_uses_.push_back(1);
    return id;
  }

  void join(Record& r) {
    if (members_.empty()) {
      shape_ = r.outs[0]->shape();
      group_ = ++groups_opened_;
    }
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
          } else if constexpr (std::is_same_v<T, ir::Reduce>) {
            in.kind = FusedInstr::Kind::Reduce;
            in.reduce = o.fn;
            in.dim = static_cast<std::uint32_t>(o.dim);
          } else if constexpr (std::is_same_v<T, ir::Softmax>) {
            in.kind = FusedInstr::Kind::Softmax;
            in.dim = static_cast<std::uint32_t>(o.dim);
            in.log = o.log;
          } else if constexpr (std::is_same_v<T, ir::LayerNorm>) {
            in.kind = FusedInstr::Kind::LayerNorm;
            in.dim = static_cast<std::uint32_t>(shape_.rank() - 1);
            in.p0 = o.eps;  // a run-time parameter, as a unary function's
          }
        },
        r.op);
    for (std::size_t i = 0; i < r.args.size(); ++i) in.args[i] = r.args[i] ? id_of(r.args[i]) : -1;
    in.out = r.outs[0]->dtype();
    Value& out = *r.outs[0];
    out.group = group_;
    out.group_id = kInternalBase + static_cast<std::int32_t>(code_.size());
    code_.push_back(in);
    produced_.push_back(&out);
    is_fill_.push_back(false);
    members_.push_back(&r);
    shared_.report.decision([&] {
      return std::string(op_label(r.op)) + ": joins the group (" + std::to_string(members_.size()) +
             " ops)";
    });
  }

  void clear() {
    members_.clear();
    code_.clear();
    produced_.clear();
    is_fill_.clear();
    inputs_.clear();
    input_uses_.clear();
    group_ = 0;
  }

  Shared& shared_;
  Shape shape_;
  std::vector<Record*> members_;  // the records computed in the group
  std::vector<FusedInstr> code_;  // members' instructions and fill sources, in order
  std::vector<Value*> produced_;  // per instruction: the value it computes
  std::vector<bool> is_fill_;     // per instruction: a scalar source
  std::vector<Record*> fills_;    // the flush's deferred fills (Note [Scalar sources])
  std::vector<std::shared_ptr<Value>> inputs_;
  std::vector<std::int32_t> input_uses_;
  std::vector<char> sig_buffer_;  // where close() writes a signature
  std::uint64_t group_ = 0;       // the open group's number (0: none)
  static inline std::atomic<std::uint64_t> groups_opened_{0};
};

void Grouper::close(CloseReason why) {
  if (members_.empty()) return;
  if (members_.size() == 1) {  // nothing to fuse
    Record& r = *members_.front();
    for (Value* v : produced_) v->group_id = -1;
    clear();
    materialize_fills(r);
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
  info.ops.reserve(code_.size());
  std::vector<Value*> out_values;
  for (std::size_t i = 0, m = 0; i < code_.size(); ++i) {
    Value& v = *produced_[i];
    v.group_id = -1;
    const std::int32_t later =
        v.pending_uses.fetch_sub(uses[i], std::memory_order_acq_rel) - uses[i];
    if (is_fill_[i]) {  // a source: never an output (finish() runs it when it is needed)
      ++info.sources;
      continue;
    }
    const bool needed = later > 0 || !v.dropped.load(std::memory_order_acquire);
    if (needed) {
      g.outputs.push_back(n_in + static_cast<std::int32_t>(i));
      out_values.push_back(&v);
    } else {
      ++info.elided;
      info.bytes_saved += v.bytes() * static_cast<std::size_t>(1 + uses[i]);
    }
    info.ops.push_back(op_label(members_[m++]->op));
  }
  // The signature (see the top of this file), in bytes: each number a varint (7 bits a
  // byte, the high bit set while more follow) in a fixed order, every list preceded by its
  // length, so two structures never share one — built with no formatting, as it is on the
  // recording path's budget (once per group).
  // The bytes are written through a pointer into the Grouper's buffer, sized for the most
  // they can take (10 bytes a number), and copied out once.
  std::size_t numbers = 4 + shape_.rank() + g.outputs.size() + 7 * code_.size();
  for (const auto& v : inputs_) numbers += 4 + v->shape().rank();
  if (sig_buffer_.size() < 2 + 10 * numbers) sig_buffer_.resize(2 + 10 * numbers);
  char* at = sig_buffer_.data();
  *at++ = 'e';
  *at++ = 'w';
  const auto put = [&at](std::uint64_t x) {
    while (x >= 0x80) {
      *at++ = static_cast<char>((x & 0x7f) | 0x80);
      x >>= 7;
    }
    *at++ = static_cast<char>(x);
  };
  std::vector<std::size_t> extents{1};  // dim classes: extents[c] is class c's extent
  extents.reserve(8);
  const auto cls = [&](std::size_t e) {
    std::size_t c = 0;
    while (c < extents.size() && extents[c] != e) ++c;
    if (c == extents.size()) extents.push_back(e);
    put(c);
  };
  put(shape_.rank());
  for (std::size_t d = 0; d < shape_.rank(); ++d) cls(shape_[d]);
  put(inputs_.size());
  for (std::size_t k = 0; k < inputs_.size(); ++k) {
    Value& v = *inputs_[k];
    const bool last = v.dropped.load(std::memory_order_acquire) &&
                      v.pending_uses.load(std::memory_order_acquire) == input_uses_[k];
    put(static_cast<std::uint64_t>(v.dtype()));
    put(v.shape().rank());
    for (std::size_t d = 0; d < v.shape().rank(); ++d) cls(v.shape()[d]);
    put(v.layout);
    put(last ? 1 : 0);
    g.inputs.push_back(take_input(v, input_uses_[k]));
  }
  put(code_.size());
  for (const auto& in : code_) {
    put(static_cast<std::uint64_t>(in.kind));
    put(fn_code(in));
    put(in.dim);
    put(static_cast<std::uint64_t>(in.out));
    for (std::int32_t a : in.args) put(static_cast<std::uint64_t>(a + 1));
  }
  put(g.outputs.size());
  for (std::int32_t o : g.outputs) put(static_cast<std::uint64_t>(o));
  g.signature.assign(sig_buffer_.data(), at);
  g.key = fnv1a(g.signature);
  g.code = code_;  // (a copy: code_ keeps its storage for the next group)
  info.inputs = g.inputs.size();
  info.outputs = g.outputs.size();
  info.key = g.key;
  info.fused = shared_.inner->runs_fused();
  info.closed = why;
  std::vector<Record*> members = std::move(members_);
  clear();
  auto outs = shared_.inner->run_fused(std::move(g));
  EMBER_ASSERT(outs.size() == out_values.size());
  for (std::size_t k = 0; k < outs.size(); ++k) {
    out_values[k]->inner = std::move(outs[k]);
    out_values[k]->state = State::Ready;
  }
  for (Record* r : members) {
    if (r->outs[0]->state == State::Pending) r->outs[0]->state = State::Elided;
  }
  shared_.report.group(std::move(info));
}

}  // namespace

void run_records(Shared& shared, std::vector<Record>& records, CloseReason why) {
  Grouper g(shared);
  for (Record& r : records) g.add(r);
  g.close(why);
  g.finish();
}

}  // namespace ember::fusion
