#include "ember/backend/backend.hpp"

#include <algorithm>

#include "ember/backend/fused_group.hpp"
#include "ember/base/error.hpp"
#include "ember/base/hash.hpp"
#include "ember/ir/infer.hpp"

namespace ember::backend {

bool Backend::supports(const ir::Op& op) const { return ir::well_typed(op); }

std::uint64_t fill_bits(const ir::Fill& op) {
  std::uint64_t bits = 0;
  if (is_int(op.dtype)) {
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

Shape matmul_shape(const FusedGroup& g) {
  const FusedInstr& mm = g.code.front();
  const Shape& a = g.inputs[static_cast<std::size_t>(mm.args[0])]->shape();
  const Shape& b = g.inputs[static_cast<std::size_t>(mm.args[1])]->shape();
  const std::size_t r = a.rank();
  EMBER_ASSERT(r >= 2 && b.rank() == r);
  std::vector<std::size_t> d(r);
  for (std::size_t i = 0; i + 2 < r; ++i) d[i] = a[i] == 1 ? b[i] : a[i];
  d[r - 2] = a[r - 2];
  d[r - 1] = b[r - 1];
  return Shape(std::move(d));
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
    case FusedInstr::Kind::Matmul:  // (Note [Matmul groups])
      return ir::Matmul{std::move(args[0]), std::move(args[1]), matmul_shape(g)};
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

std::vector<ir::Handle> run_row_apart(
    Backend& b, FusedGroup g, const std::function<std::vector<ir::Handle>(FusedGroup)>& run_group) {
  EMBER_ASSERT(g.ends_in_row() && g.code.size() >= 2);
  const std::size_t n_in = g.inputs.size(), last = g.code.size() - 1;
  const auto row_id = static_cast<std::int32_t>(n_in + last);
  const FusedInstr& row = g.code.back();
  // The row's other operands (a layer norm's weight and bias), held before the inputs move.
  std::array<ir::Handle, 3> args;
  for (std::size_t k = 1; k < 3; ++k) {
    if (row.args[k] >= 0) args[k] = g.inputs[static_cast<std::size_t>(row.args[k])];
  }
  FusedGroup p;
  p.shape = g.shape;
  std::vector<std::int32_t> input_id(n_in, -1);  // g's input k in p (-1: the prologue reads none)
  for (std::size_t i = 0; i < last; ++i) {
    for (std::int32_t a : g.code[i].args) {
      if (a >= 0 && static_cast<std::size_t>(a) < n_in) input_id[static_cast<std::size_t>(a)] = 0;
    }
  }
  for (std::size_t k = 0; k < n_in; ++k) {
    if (input_id[k] < 0) continue;
    input_id[k] = static_cast<std::int32_t>(p.inputs.size());
    p.inputs.push_back(std::move(g.inputs[k]));
  }
  const auto p_in = static_cast<std::int32_t>(p.inputs.size());
  const auto id = [&](std::int32_t v) {
    return v < static_cast<std::int32_t>(n_in) ? input_id[static_cast<std::size_t>(v)]
                                               : v - static_cast<std::int32_t>(n_in) + p_in;
  };
  p.code.assign(g.code.begin(), g.code.end() - 1);
  for (auto& in : p.code) {
    for (auto& a : in.args) {
      if (a >= 0) a = id(a);
    }
  }
  std::vector<std::int32_t> from(g.outputs.size(), -1);  // g's output j: p's output, or -1
  for (std::size_t j = 0; j < g.outputs.size(); ++j) {
    if (g.outputs[j] == row_id) continue;
    from[j] = static_cast<std::int32_t>(p.outputs.size());
    p.outputs.push_back(id(g.outputs[j]));
  }
  const std::int32_t operand = id(row.args[0]);
  const auto at = std::find(p.outputs.begin(), p.outputs.end(), operand);
  const auto operand_out = static_cast<std::size_t>(at - p.outputs.begin());
  if (at == p.outputs.end()) p.outputs.push_back(operand);
  p.signature = g.signature + "|prologue";
  p.key = g.key ^ 0x9e3779b97f4a7c15ULL;
  std::vector<ir::Handle> outs = run_group(std::move(p));
  args[0] = outs[operand_out];
  std::vector<ir::Handle> y = b.execute(fused_instr_op(g, last, std::move(args)));
  EMBER_ASSERT(y.size() == 1);
  std::vector<ir::Handle> result;
  result.reserve(g.outputs.size());
  for (std::size_t j = 0; j < g.outputs.size(); ++j) {
    result.push_back(from[j] < 0 ? y[0] : outs[static_cast<std::size_t>(from[j])]);
  }
  return result;
}

std::vector<ir::Handle> run_matmul_apart(
    Backend& b, FusedGroup g, const std::function<std::vector<ir::Handle>(FusedGroup)>& run_group) {
  EMBER_ASSERT(g.starts_with_product());
  const std::size_t n_in = g.inputs.size();
  const auto product = static_cast<std::int32_t>(n_in);
  const FusedInstr& mm = g.code.front();
  std::array<ir::Handle, 3> mm_args{g.inputs[static_cast<std::size_t>(mm.args[0])],
                                    g.inputs[static_cast<std::size_t>(mm.args[1])], nullptr};
  std::vector<ir::Handle> y = b.execute(fused_instr_op(g, 0, std::move(mm_args)));
  EMBER_ASSERT(y.size() == 1);
  // The epilogue: g's other instructions over the inputs they read and the product, which
  // comes last among the inputs.
  FusedGroup p;
  p.shape = g.shape;
  std::vector<std::int32_t> input_id(n_in, -1);  // g's input k in p (-1: the epilogue reads none)
  for (std::size_t i = 1; i < g.code.size(); ++i) {
    for (std::int32_t a : g.code[i].args) {
      if (a >= 0 && a < product) input_id[static_cast<std::size_t>(a)] = 0;
    }
  }
  for (std::size_t k = 0; k < n_in; ++k) {
    if (input_id[k] < 0) continue;
    input_id[k] = static_cast<std::int32_t>(p.inputs.size());
    p.inputs.push_back(std::move(g.inputs[k]));
  }
  const auto product_in = static_cast<std::int32_t>(p.inputs.size());
  const auto id = [&](std::int32_t v) {
    if (v < product) return input_id[static_cast<std::size_t>(v)];
    return v - product + product_in;  // the product, then the instructions after it
  };
  p.code.assign(g.code.begin() + 1, g.code.end());
  for (auto& in : p.code) {
    for (auto& a : in.args) {
      if (a >= 0) a = id(a);
    }
  }
  std::vector<std::int32_t> from(g.outputs.size(), -1);  // g's output j: p's output, or -1
  for (std::size_t j = 0; j < g.outputs.size(); ++j) {
    if (g.outputs[j] == product) continue;
    from[j] = static_cast<std::int32_t>(p.outputs.size());
    p.outputs.push_back(id(g.outputs[j]));
  }
  std::vector<ir::Handle> outs;
  if (!p.outputs.empty()) {
    // The product is the epilogue's to consume (Note [In-place reuse]) unless g keeps it.
    const bool kept = std::find(g.outputs.begin(), g.outputs.end(), product) != g.outputs.end();
    ir::Handle yin = kept ? y[0] : std::move(y[0]);
    if (yin->shape() != g.shape) {  // (a view: the product is contiguous)
      yin = std::move(b.execute(ir::Reshape{std::move(yin), g.shape})[0]);
    }
    p.inputs.push_back(std::move(yin));
    p.signature = g.signature + "|epilogue";
    p.key = g.key ^ 0x7f4a7c159e3779b9ULL;
    outs = run_group(std::move(p));
  }
  std::vector<ir::Handle> result;
  result.reserve(g.outputs.size());
  for (std::size_t j = 0; j < g.outputs.size(); ++j) {
    result.push_back(from[j] < 0 ? y[0] : outs[static_cast<std::size_t>(from[j])]);
  }
  return result;
}

std::vector<ir::Handle> run_epilogue_apart(
    FusedGroup g, const std::function<std::vector<ir::Handle>(FusedGroup)>& run_group) {
  EMBER_ASSERT(g.has_row_epilogue());
  const std::size_t n_in = g.inputs.size(), at = g.row_at(), n_code = g.code.size();
  const std::vector<bool> rows = row_values(g);
  std::vector<bool> is_output(g.num_values(), false);
  for (std::int32_t o : g.outputs) is_output[static_cast<std::size_t>(o)] = true;
  std::vector<ir::Handle> value(g.num_values());  // each value's handle, once computed
  for (std::size_t k = 0; k < n_in; ++k) value[k] = g.inputs[k];
  // The parts: the head (the prologue and the row instruction), the epilogue's row values,
  // its other values; Fills are copied into each part that reads them.
  std::vector<std::vector<std::size_t>> parts(3);
  for (std::size_t i = 0; i < n_code; ++i) {
    if (g.code[i].kind == FusedInstr::Kind::Fill) continue;
    parts[i <= at ? 0 : rows[n_in + i] ? 1 : 2].push_back(i);
  }
  Shape row_shape = g.shape;
  row_shape[g.code[at].dim] = 1;
  const char* const tags[] = {"|head", "|rows", "|full"};
  for (std::size_t part = 0; part < 3; ++part) {
    const std::vector<std::size_t>& members = parts[part];
    if (members.empty()) continue;
    const auto member = [&](std::size_t i) {
      return std::binary_search(members.begin(), members.end(), i);
    };
    FusedGroup p;
    p.shape = part == 1 ? row_shape : g.shape;
    std::vector<std::int32_t> id(g.num_values(), -1);  // g's value in p
    std::vector<std::size_t> from;                     // p's inputs: g's values
    for (std::size_t i : members) {
      for (std::int32_t a : g.code[i].args) {
        if (a < 0) continue;
        const auto v = static_cast<std::size_t>(a);
        const bool fill = v >= n_in && g.code[v - n_in].kind == FusedInstr::Kind::Fill;
        if ((v >= n_in && member(v - n_in)) || fill || id[v] >= 0) continue;
        id[v] = static_cast<std::int32_t>(from.size());
        from.push_back(v);
      }
    }
    for (std::size_t v : from) p.inputs.push_back(value[v]);
    const auto p_in = static_cast<std::int32_t>(p.inputs.size());
    std::vector<std::size_t> produced;  // g's value of each of p's instructions
    const auto add = [&](std::size_t i) {
      FusedInstr in = g.code[i];
      for (auto& a : in.args) {
        if (a >= 0) a = id[static_cast<std::size_t>(a)];
      }
      id[n_in + i] = p_in + static_cast<std::int32_t>(p.code.size());
      p.code.push_back(in);
      produced.push_back(n_in + i);
    };
    for (std::size_t i : members) {
      for (std::int32_t a : g.code[i].args) {  // the Fills it reads, copied in first
        const auto v = static_cast<std::size_t>(a);
        if (a >= 0 && v >= n_in && id[v] < 0 && g.code[v - n_in].kind == FusedInstr::Kind::Fill)
          add(v - n_in);
      }
      add(i);
    }
    for (std::size_t c = 0; c < p.code.size(); ++c) {
      const std::size_t v = produced[c];
      if (g.code[v - n_in].kind == FusedInstr::Kind::Fill) continue;
      bool needed = is_output[v];  // by g's caller, or by an instruction of another part
      for (std::size_t i = 0; i < n_code && !needed; ++i) {
        if (member(i)) continue;
        for (std::int32_t a : g.code[i].args) needed = needed || a == static_cast<std::int32_t>(v);
      }
      if (needed) p.outputs.push_back(p_in + static_cast<std::int32_t>(c));
    }
    if (p.outputs.empty()) continue;
    p.signature = g.signature + tags[part];
    p.key = hash_bytes(p.signature);
    std::vector<std::int32_t> outs_of = p.outputs;
    std::vector<ir::Handle> outs = run_group(std::move(p));
    EMBER_ASSERT(outs.size() == outs_of.size());
    for (std::size_t j = 0; j < outs.size(); ++j) {
      value[produced[static_cast<std::size_t>(outs_of[j] - p_in)]] = std::move(outs[j]);
    }
  }
  std::vector<ir::Handle> result;
  result.reserve(g.outputs.size());
  for (std::int32_t o : g.outputs) result.push_back(value[static_cast<std::size_t>(o)]);
  return result;
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
  const std::size_t n_in = group.inputs.size();
  std::vector<ir::Handle> values(group.num_values());
  std::vector<std::size_t> last_use(group.num_values(), 0);
  std::vector<bool> is_output(group.num_values(), false);
  for (std::int32_t o : group.outputs) is_output[static_cast<std::size_t>(o)] = true;
  for (std::size_t i = 0; i < group.code.size(); ++i) {
    for (std::int32_t a : group.code[i].args) {
      if (a >= 0) last_use[static_cast<std::size_t>(a)] = i + 1;
    }
  }
  for (std::size_t i = 0; i < n_in; ++i) values[i] = std::move(group.inputs[i]);
  for (std::size_t i = 0; i < group.code.size(); ++i) {
    std::array<ir::Handle, 3> args;
    for (std::size_t k = 0; k < 3; ++k) {
      const std::int32_t a = group.code[i].args[k];
      if (a < 0) continue;
      const auto v = static_cast<std::size_t>(a);
      bool later = is_output[v] || last_use[v] > i + 1;
      for (std::size_t j = k + 1; j < 3; ++j) later = later || group.code[i].args[j] == a;
      args[k] = later ? values[v] : std::move(values[v]);
    }
    const FusedInstr& in = group.code[i];
    if (in.kind == FusedInstr::Kind::Random) {  // at its counters (Note [Reserved draws])
      values[n_in + i] = draw_random(std::get<ir::Random>(fused_instr_op(group, i, {})), in.draw);
      continue;
    }
    auto outs = execute(fused_instr_op(group, i, std::move(args)));
    EMBER_ASSERT(outs.size() == 1);
    values[n_in + i] = std::move(outs[0]);
  }
  std::vector<ir::Handle> out;
  out.reserve(group.outputs.size());
  for (std::int32_t o : group.outputs) out.push_back(values[static_cast<std::size_t>(o)]);
  return out;
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
