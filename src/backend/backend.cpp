#include "ember/backend/backend.hpp"

#include <algorithm>
#include <cstring>

#include "ember/backend/fused_group.hpp"
#include "ember/base/error.hpp"
#include "ember/base/hash.hpp"
#include "ember/ir/infer.hpp"

namespace ember::backend {

bool Backend::supports(const ir::Op& op) const { return ir::well_typed(op); }

std::uint64_t fill_bits(const ir::Fill& op) {
  std::uint64_t bits = 0;
  if (op.dtype == DType::F32) {  // (the common case, without the general conversion's dispatch)
    const float v = static_cast<float>(op.value);
    std::memcpy(&bits, &v, sizeof v);
  } else if (op.dtype == DType::F64) {
    std::memcpy(&bits, &op.value, sizeof op.value);
  } else if (is_int(op.dtype)) {
    convert_elements(&op.int_value, DType::I64, &bits, op.dtype, 1);
  } else if (op.dtype == DType::F16 || op.dtype == DType::BF16) {
    const float v = static_cast<float>(op.value);
    convert_elements(&v, DType::F32, &bits, op.dtype, 1);
  } else {
    convert_elements(&op.value, DType::F64, &bits, op.dtype, 1);
  }
  return bits;
}

ir::Handle Backend::adopt_host(std::byte*, const Shape&, DType, std::shared_ptr<const void>) {
  return nullptr;
}

Backend::HostTensor Backend::empty_host(const Shape&, DType) { return {}; }

const std::byte* Backend::host_data(const ir::Handle&) { return nullptr; }

namespace {
// The product's shape of operands a [..., m, k] and b [..., k, n] (batch dims equal or 1).
Shape matmul_shape(const Shape& a, const Shape& b) {
  const std::size_t r = a.rank();
  EMBER_ASSERT(r >= 2 && b.rank() == r);
  std::vector<std::size_t> d(r);
  for (std::size_t i = 0; i + 2 < r; ++i) d[i] = a[i] == 1 ? b[i] : a[i];
  d[r - 2] = a[r - 2];
  d[r - 1] = b[r - 1];
  return Shape(std::move(d));
}
}  // namespace

Shape matmul_shape(const FusedGroup& g) {
  const FusedInstr& mm = g.code.front();
  return matmul_shape(g.inputs[static_cast<std::size_t>(mm.args[0])]->shape(),
                      g.inputs[static_cast<std::size_t>(mm.args[1])]->shape());
}

RandomCounters Backend::reserve_random(std::uint64_t) {
  fail(name() + " reserves no random counters (its fused_caps().random is not set)");
}
ir::Handle Backend::draw_random(const ir::Random&, const RandomCounters&) {
  fail(name() +
       " draws no random numbers at reserved counters (its fused_caps().random is not set)");
}

std::vector<bool> row_values(const FusedGroup& g) {
  std::vector<bool> rows(g.num_values(), false);
  const std::size_t at = g.row_at(), n_in = g.inputs.size();
  if (at == g.code.size() || g.code[at].kind != FusedInstr::Kind::Reduce) return rows;
  const std::size_t dim = g.code[at].dim;
  for (std::size_t k = 0; k < n_in; ++k) {
    const Shape& s = g.inputs[k]->shape();
    rows[k] = s.rank() == g.shape.rank() && s[dim] == 1;
  }
  rows[n_in + at] = true;
  for (std::size_t i = at + 1; i < g.code.size(); ++i) {
    const FusedInstr& in = g.code[i];
    bool row = in.kind != FusedInstr::Kind::Random;  // (a Fill: one element, a row value)
    for (std::int32_t a : in.args) row = row && (a < 0 || rows[static_cast<std::size_t>(a)]);
    rows[n_in + i] = row;
  }
  return rows;
}

ir::Op fused_instr_op(const FusedGroup& g, std::size_t i, std::array<ir::Handle, 3> args) {
  const FusedInstr& in = g.code[i];
  // The result's shape: the group's, or after a Reduce its operands' broadcast (the row
  // shape for a row value, Note [Row epilogues]; the group's inputs may be moved out by now).
  // (Found before the switch moves the operands into the op.)
  Shape shape = g.shape;
  const std::size_t at = g.row_at();
  if (i > at && g.code[at].kind == FusedInstr::Kind::Reduce && args[0]) {
    shape = args[0]->shape();
    for (std::size_t k = 1; k < 3; ++k) {
      if (args[k]) shape = ir::broadcast_shapes(shape, args[k]->shape(), "fused epilogue");
    }
  }
  switch (in.kind) {
    case FusedInstr::Kind::Unary:
      return ir::Unary{in.unary, std::move(args[0]), in.out, in.p0, in.p1};
    case FusedInstr::Kind::Binary:
      return ir::Binary{in.binary, std::move(args[0]), std::move(args[1]), std::move(shape),
                        in.out};
    case FusedInstr::Kind::Where:
      return ir::Where{std::move(args[0]), std::move(args[1]), std::move(args[2]),
                       std::move(shape)};
    case FusedInstr::Kind::Cast:
      return ir::Cast{std::move(args[0]), in.out};
    case FusedInstr::Kind::Reduce:
      return ir::Reduce{in.reduce, std::move(args[0]), in.dim, in.out};
    case FusedInstr::Kind::Softmax:
      return ir::Softmax{std::move(args[0]), in.dim, in.log};
    case FusedInstr::Kind::LayerNorm:  // over the last dim (Note [Fused rows])
      return ir::LayerNorm{std::move(args[0]), std::move(args[1]), std::move(args[2]), 1, in.p0};
    case FusedInstr::Kind::Matmul: {  // (Note [Matmul groups])
      Shape product = matmul_shape(args[0]->shape(), args[1]->shape());
      return ir::Matmul{std::move(args[0]), std::move(args[1]), std::move(product)};
    }
    case FusedInstr::Kind::Conv:  // (Note [Conv groups])
      return ir::Conv{std::move(args[0]), std::move(args[1]),    g.conv_window,
                      g.conv_groups,      ir::ConvPass::Forward, {}};
    case FusedInstr::Kind::Fill: {
      // One element of the group's rank (it broadcasts as the group reads it).
      ir::Fill f{Shape(std::vector<std::size_t>(g.shape.rank(), 1)), in.out, 0.0, 0};
      double v = 0;
      std::int64_t iv = 0;
      if (is_int(in.out)) {
        convert_elements(&in.bits, in.out, &iv, DType::I64, 1);
      } else {
        convert_elements(&in.bits, in.out, &v, DType::F64, 1);
      }
      f.value = v;
      f.int_value = iv;
      return f;
    }
    case FusedInstr::Kind::Random:
      return ir::Random{g.shape, in.out, Distribution{in.dist, in.p0, in.p1}};
  }
  fail("fused_instr_op: unknown instruction kind");
}

namespace {

// Note [Groups in steps]: the default run_fused and the three runs apart (Notes [Row
// instructions apart], [Matmul apart], [Epilogues apart]) all run a group as a sequence of
// steps over its values: an instruction as its IR op, or a set of instructions as a group
// of their own through the caller's run_group. A step's operands are the values it reads
// that earlier steps computed (or g's inputs); one is handed over (moved, so the step may
// reuse its buffer: Note [In-place reuse]) when no later step reads it and g does not
// return it, and a step's values are kept only where a later step or g's caller reads
// them. A part's Fill instructions are copied into it (Note [Scalar sources]); its inputs
// come in the order its instructions first read them, its signature is g's and a tag, its
// key that signature's hash.
class GroupSteps {
 public:
  GroupSteps(Backend& b, FusedGroup& g)
      : b_(b),
        g_(g),
        n_in_(g.inputs.size()),
        value_(g.num_values()),
        reads_(g.num_values(), 0),
        is_output_(g.num_values(), false) {
    for (std::size_t k = 0; k < n_in_; ++k) value_[k] = std::move(g.inputs[k]);
    for (const FusedInstr& in : g.code) {
      for (std::int32_t a : in.args) {
        if (a >= 0) ++reads_[static_cast<std::size_t>(a)];
      }
    }
    for (std::int32_t o : g.outputs) is_output_[static_cast<std::size_t>(o)] = true;
  }

  // Runs instruction i as its IR op (a Random at its reserved counters: Note [Reserved
  // draws]); the Fills it reads first, as their ops.
  void op(std::size_t i) {
    const FusedInstr& in = g_.code[i];
    for (std::int32_t a : in.args) {
      if (a >= 0 && !value_[static_cast<std::size_t>(a)] && is_fill(static_cast<std::size_t>(a))) {
        op(static_cast<std::size_t>(a) - n_in_);
      }
    }
    if (in.kind == FusedInstr::Kind::Random) {
      value_[n_in_ + i] = b_.draw_random(std::get<ir::Random>(fused_instr_op(g_, i, {})), in.draw);
      return;
    }
    std::array<ir::Handle, 3> args;
    for (std::size_t k = 0; k < 3; ++k) {
      if (in.args[k] >= 0) --reads_[static_cast<std::size_t>(in.args[k])];
    }
    for (std::size_t k = 0; k < 3; ++k) {
      if (in.args[k] < 0) continue;
      const auto v = static_cast<std::size_t>(in.args[k]);
      bool again = false;  // read again by this instruction (a * a)
      for (std::size_t j = k + 1; j < 3; ++j) again = again || in.args[j] == in.args[k];
      args[k] = again ? value_[v] : take(v);
    }
    auto outs = b_.execute(fused_instr_op(g_, i, std::move(args)));
    EMBER_ASSERT(outs.size() == 1);
    value_[n_in_ + i] = std::move(outs[0]);
  }

  // Runs instructions `members` (ascending, no Fills) as one group over `shape` through
  // run_group; nothing runs where no value of theirs is needed.
  void part(const std::vector<std::size_t>& members, const Shape& shape, std::string_view tag,
            const std::function<std::vector<ir::Handle>(FusedGroup)>& run_group) {
    const auto member = [&](std::size_t v) {
      return v >= n_in_ && std::binary_search(members.begin(), members.end(), v - n_in_);
    };
    std::vector<std::int32_t> id(g_.num_values(), -1);  // g's value in p
    std::vector<std::size_t> from;                      // p's inputs: g's values
    for (std::size_t i : members) {
      for (std::int32_t a : g_.code[i].args) {
        const auto v = static_cast<std::size_t>(a);
        if (a < 0 || member(v) || is_fill(v) || id[v] >= 0) continue;
        id[v] = static_cast<std::int32_t>(from.size());
        from.push_back(v);
      }
    }
    const auto p_in = static_cast<std::int32_t>(from.size());
    FusedGroup p;
    p.shape = shape;
    std::vector<std::size_t> produced;  // g's value of each of p's instructions
    const auto add = [&](std::size_t i) {
      FusedInstr in = g_.code[i];
      for (auto& a : in.args) {
        if (a >= 0) a = id[static_cast<std::size_t>(a)];
      }
      id[n_in_ + i] = p_in + static_cast<std::int32_t>(p.code.size());
      p.code.push_back(in);
      produced.push_back(n_in_ + i);
    };
    for (std::size_t i : members) {
      for (std::int32_t a : g_.code[i].args) {  // the Fills it reads, copied in first
        const auto v = static_cast<std::size_t>(a);
        if (a >= 0 && is_fill(v) && id[v] < 0) add(v - n_in_);
      }
      add(i);
      for (std::int32_t a : g_.code[i].args) {
        if (a >= 0) --reads_[static_cast<std::size_t>(a)];
      }
    }
    for (std::size_t c = 0; c < p.code.size(); ++c) {
      const std::size_t v = produced[c];
      if (!is_fill(v) && (is_output_[v] || reads_[v] > 0)) {
        p.outputs.push_back(p_in + static_cast<std::int32_t>(c));
      }
    }
    if (p.outputs.empty()) return;
    for (std::size_t v : from) {
      ir::Handle h = take(v);
      // A product of another shape than the part's (a matmul's [B*T, n] read as [B, T, n]:
      // Note [Matmul groups]) is read through a reshape.
      if (v >= n_in_ && h->shape() != shape &&
          (g_.code[v - n_in_].kind == FusedInstr::Kind::Matmul ||
           g_.code[v - n_in_].kind == FusedInstr::Kind::Conv)) {
        h = std::move(b_.execute(ir::Reshape{std::move(h), shape})[0]);
      }
      p.inputs.push_back(std::move(h));
    }
    p.signature = g_.signature;
    p.signature += tag;
    p.key = hash_bytes(p.signature);
    const std::vector<std::int32_t> outs_of = p.outputs;
    std::vector<ir::Handle> outs = run_group(std::move(p));
    EMBER_ASSERT(outs.size() == outs_of.size());
    for (std::size_t j = 0; j < outs.size(); ++j) {
      value_[produced[static_cast<std::size_t>(outs_of[j] - p_in)]] = std::move(outs[j]);
    }
  }

  // g's outputs, in order.
  std::vector<ir::Handle> outputs() const {
    std::vector<ir::Handle> out;
    out.reserve(g_.outputs.size());
    for (std::int32_t o : g_.outputs) out.push_back(value_[static_cast<std::size_t>(o)]);
    return out;
  }

 private:
  bool is_fill(std::size_t v) const {
    return v >= n_in_ && g_.code[v - n_in_].kind == FusedInstr::Kind::Fill;
  }
  // Value v for a step that reads it (its reads already counted off): handed over where
  // nothing after the step reads it.
  ir::Handle take(std::size_t v) {
    EMBER_ASSERT(value_[v]);
    return reads_[v] == 0 && !is_output_[v] ? std::move(value_[v]) : value_[v];
  }

  Backend& b_;
  FusedGroup& g_;
  std::size_t n_in_;
  std::vector<ir::Handle> value_;   // each value's handle, once computed (inputs first)
  std::vector<std::size_t> reads_;  // reads of each value by instructions not yet run
  std::vector<bool> is_output_;
};

// Instructions [from, to) of g but its Fills.
std::vector<std::size_t> span_of(const FusedGroup& g, std::size_t from, std::size_t to) {
  std::vector<std::size_t> members;
  for (std::size_t i = from; i < to; ++i) {
    if (g.code[i].kind != FusedInstr::Kind::Fill) members.push_back(i);
  }
  return members;
}

}  // namespace

std::vector<ir::Handle> run_row_apart(
    Backend& b, FusedGroup g, const std::function<std::vector<ir::Handle>(FusedGroup)>& run_group) {
  EMBER_ASSERT(g.ends_in_row() && g.code.size() >= 2);
  GroupSteps steps(b, g);
  const std::size_t last = g.code.size() - 1;
  steps.part(span_of(g, 0, last), g.shape, "|prologue", run_group);
  steps.op(last);
  return steps.outputs();
}

std::vector<ir::Handle> run_matmul_apart(
    Backend& b, FusedGroup g, const std::function<std::vector<ir::Handle>(FusedGroup)>& run_group) {
  EMBER_ASSERT(g.starts_with_product());
  GroupSteps steps(b, g);
  steps.op(0);
  steps.part(span_of(g, 1, g.code.size()), g.shape, "|epilogue", run_group);
  return steps.outputs();
}

std::vector<ir::Handle> run_epilogue_apart(
    Backend& b, FusedGroup g, const std::function<std::vector<ir::Handle>(FusedGroup)>& run_group) {
  EMBER_ASSERT(g.has_row_epilogue());
  const std::size_t n_in = g.inputs.size(), at = g.row_at();
  const std::vector<bool> rows = row_values(g);
  std::vector<std::size_t> rows_part, full_part;
  for (std::size_t i : span_of(g, at + 1, g.code.size())) {
    (rows[n_in + i] ? rows_part : full_part).push_back(i);
  }
  Shape row_shape = g.shape;
  row_shape[g.code[at].dim] = 1;
  GroupSteps steps(b, g);
  steps.part(span_of(g, 0, at + 1), g.shape, "|head", run_group);
  steps.part(rows_part, row_shape, "|rows", run_group);
  steps.part(full_part, g.shape, "|full", run_group);
  return steps.outputs();
}

// One by one: each value is released after its last use, so an instruction may reuse the
// buffer of a value nobody reads later (Note [In-place reuse]), as the ops would unfused.
// A group starting with a Matmul or a Conv runs it alone and its epilogue as one group
// (Note [Matmul apart]), through this backend's run_fused.
std::vector<ir::Handle> Backend::run_fused(FusedGroup group) {
  if (group.starts_with_product() && group.code.size() > 1) {
    return run_matmul_apart(*this, std::move(group),
                            [this](FusedGroup p) { return run_fused(std::move(p)); });
  }
  GroupSteps steps(*this, group);
  for (std::size_t i = 0; i < group.code.size(); ++i) steps.op(i);
  return steps.outputs();
}

const char* name(CloseReason r) {
  switch (r) {
    case CloseReason::Read:
      return "read";
    case CloseReason::Sync:
      return "sync";
    case CloseReason::Seed:
      return "seed";
    case CloseReason::CrossThread:
      return "cross-thread use";
    case CloseReason::NonFusableOp:
      return "non-fusable op";
    case CloseReason::DataDependent:
      return "data-dependent op";
    case CloseReason::ShapeMismatch:
      return "shape mismatch";
    case CloseReason::ViewOfInternal:
      return "view of an internal value";
    case CloseReason::MaxInputs:
      return "input limit";
    case CloseReason::MaxOps:
      return "instruction limit";
    case CloseReason::StreamCap:
      return "stream length cap";
    case CloseReason::MemoryBudget:
      return "pending memory cap";
    case CloseReason::ThreadExit:
      return "thread exit";
    case CloseReason::Reduction:
      return "ends in a reduction";
    case CloseReason::Matmul:
      return "a matmul or conv opens the next group";
    case CloseReason::RowOp:
      return "a reduction, softmax or layer norm opens the next group";
    case CloseReason::Count_:
      break;
  }
  return "?";
}

}  // namespace ember::backend
