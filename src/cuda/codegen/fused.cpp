// The kernel of a fused element-wise group (codegen.hpp's FusedSpec). Every instruction is
// printed by the code that prints its single-op kernel (unary_code, binary_code,
// cast_value, where_value in elementwise.cpp), inside a block with its own compute types,
// and its result is held in a variable of its dtype's storage type: a 16-bit value is
// rounded after each instruction exactly as the single-op kernel rounds it when storing.
// Kernels are compiled without contraction (Note [No contraction] in compiler.cpp), so no
// multiply of one instruction fuses with an add of the next and each instruction rounds as
// its own kernel does: a fused group's outputs equal its instructions run one by one, bit
// for bit. A Fill is its element's storage bits, a parameter word (so one kernel serves
// every scalar value), copied into a variable of its storage type. A Random draws its
// element in the kernel (Note [Fused draws]).
#include <cstdio>
#include <string>

#include "cuda/codegen.hpp"
#include "cuda/codegen/printer.hpp"
#include "ember/base/error.hpp"
#include "ember/ir/scalar_table.hpp"

namespace ember::cuda {

using namespace codegen;  // NOLINT: the generators are written in the printer's vocabulary
using backend::FusedInstr;

FusedArgs fused_args(const FusedSpec& s) {
  FusedArgs a;
  int w = 2 + kMaxDims;
  if (!s.contiguous) {
    a.strides = w;
    w += kMaxDims * static_cast<int>(s.inputs.size());
  }
  a.inputs = w;
  w += static_cast<int>(s.inputs.size());
  a.outputs = w;
  w += static_cast<int>(s.outputs.size());
  a.err = w++;
  a.params = w;
  a.param.reserve(s.code.size());
  for (const FusedInstr& ins : s.code) {
    a.param.push_back(w);
    w += ins.kind == FusedInstr::Kind::Random ? 4 : 2;
  }
  a.words = w;
  return a;
}

std::string fused_name(std::uint64_t key, bool contiguous, std::uint32_t scalar_mask) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "em_fused_%016llx", static_cast<unsigned long long>(key));
  std::string n = buf;
  n += layout_suffix(contiguous);
  n += scalar_suffix(contiguous, scalar_mask);
  return n;
}

namespace {

std::string num(std::size_t v) { return std::to_string(v); }
// The name of value v ("e" + v, built by append: "e" + std::string trips GCC 12's -Wrestrict).
std::string value_name(std::size_t v) {
  std::string s = "e";
  s += num(v);
  return s;
}

DType dtype_of(const FusedSpec& s, std::int32_t v) {
  const auto u = static_cast<std::size_t>(v);
  return u < s.inputs.size() ? s.inputs[u] : s.code[u - s.inputs.size()].out;
}

// The element's computation: reads input k as in[k] (a storage value), declares e<v> for
// every result v of the instructions [from, to) and assigns each output j's element with
// out(j, value) (which prints nothing for an output it leaves to another part). Fills before
// `from` that the range reads are declared first (a row epilogue's scalars may be read by
// its prologue too); any other value before `from` the range reads is the caller's e<v>.
template <class Out>
std::string element_body(const FusedSpec& s, const std::vector<std::string>& in, Out&& out,
                         std::size_t from = 0, std::size_t to = ~std::size_t(0)) {
  const std::size_t n_in = s.inputs.size();
  to = std::min(to, s.code.size());
  std::string b;
  const auto val = [&](std::int32_t v) {
    const auto u = static_cast<std::size_t>(v);
    return u < n_in ? in[u] : value_name(u);
  };
  const FusedArgs args = fused_args(s);
  std::vector<bool> print(s.code.size(), false);
  for (std::size_t i = from; i < to; ++i) {
    print[i] = true;
    for (std::int32_t a : s.code[i].args) {
      const auto u = static_cast<std::size_t>(a);
      if (a >= 0 && u >= n_in && u - n_in < from &&
          s.code[u - n_in].kind == FusedInstr::Kind::Fill) {
        print[u - n_in] = true;
      }
    }
  }
  for (std::size_t i = 0; i < to; ++i) {
    if (!print[i]) continue;
    const FusedInstr& ins = s.code[i];
    const std::string y = value_name(n_in + i);
    const std::string p = "g.w[" + num(static_cast<std::size_t>(args.param[i]));
    b += "    " + std::string(storage_type(ins.out)) + " " + y + ";\n";
    if (ins.kind == FusedInstr::Kind::Fill) {  // its bits: the instruction's parameter word
      b += "    { const u64 b_ = (u64)" + p + "]; memcpy(&" + y + ", &b_, sizeof " + y + "); }\n";
      continue;
    }
    if (ins.kind == FusedInstr::Kind::Random) {
      // Note [Fused draws]: element i of the iteration space at counter first + i, printed
      // by the Random kernel's own code; a, b, the seed and the first counter are the
      // instruction's four parameter words, its distribution's kind is in the key.
      b += random_code(ins.out, num(static_cast<std::size_t>(ins.dist)), "(u64)" + p + " + 2]",
                       "((u64)" + p + " + 3] + (u64)i)", "__longlong_as_double(" + p + "])",
                       "__longlong_as_double(" + p + " + 1])", y);
      continue;
    }
    const DType dt = dtype_of(s, ins.kind == FusedInstr::Kind::Where ? ins.args[1] : ins.args[0]);
    switch (ins.kind) {
      case FusedInstr::Kind::Fill:
      case FusedInstr::Kind::Random:
      case FusedInstr::Kind::Reduce:   // printed by gen_fused_reduction
      case FusedInstr::Kind::Softmax:  // fused_supported refuses these
      case FusedInstr::Kind::LayerNorm:
      case FusedInstr::Kind::Matmul:
      case FusedInstr::Kind::Conv:
        break;
      case FusedInstr::Kind::Unary: {
        b += "    {\n" + typedefs(dt) +
             unary_code(ins.unary, dt, val(ins.args[0]), y, "__longlong_as_double(" + p + "])",
                        "__longlong_as_double(" + p + " + 1])") +
             "    }\n";
        break;
      }
      case FusedInstr::Kind::Binary:
        b += "    {\n" + typedefs(dt) +
             binary_code(ins.binary, dt, val(ins.args[0]), val(ins.args[1]), y) + "    }\n";
        break;
      case FusedInstr::Kind::Where:
        b += "    " + y + " = " +
             where_value(val(ins.args[0]), val(ins.args[1]), val(ins.args[2])) + ";\n";
        break;
      case FusedInstr::Kind::Cast:
        b += "    " + y + " = " + cast_value(dt, ins.out, val(ins.args[0])) + ";\n";
        break;
    }
  }
  for (std::size_t j = 0; j < s.outputs.size(); ++j) b += out(j, val(s.outputs[j]));
  return b;
}

}  // namespace

FusedSpec fused_spec(const backend::FusedGroup& g) {
  FusedSpec s;
  s.inputs.reserve(g.inputs.size());
  for (const auto& h : g.inputs) s.inputs.push_back(h->dtype());
  s.code = g.code;
  s.outputs = g.outputs;
  s.row_values = backend::row_values(g);
  return s;
}

bool fused_reduces_rows(ir::ReduceFn fn, DType dt) {
  const bool fn_ok = fn == ir::ReduceFn::Sum || fn == ir::ReduceFn::Mean ||
                     fn == ir::ReduceFn::Max || fn == ir::ReduceFn::Min ||
                     fn == ir::ReduceFn::ArgMax || fn == ir::ReduceFn::ArgMin;
  const bool dt_ok = dt == DType::F32 || dt == DType::F64 || dt == DType::F16 ||
                     dt == DType::BF16 || dt == DType::I32 || dt == DType::I64;
  return fn_ok && dt_ok && reduce_supported(fn, dt);
}

bool has_row_reduction(const FusedSpec& s) {
  const std::size_t at = backend::row_index(s.code);
  return at < s.code.size() && s.code[at].kind == FusedInstr::Kind::Reduce;
}

bool has_row_norm(const FusedSpec& s) {
  const std::size_t at = backend::row_index(s.code);
  return at < s.code.size() && !has_row_reduction(s);
}

bool fused_supported(const FusedSpec& s) {
  const std::size_t at = backend::row_index(s.code);
  const auto row_id = static_cast<std::int32_t>(s.inputs.size() + at);
  for (const FusedInstr& ins : s.code) {
    if (ins.kind == FusedInstr::Kind::Fill || ins.kind == FusedInstr::Kind::Random) continue;
    const bool is_row = static_cast<std::size_t>(&ins - s.code.data()) == at;
    // Softmax and layer norm once, of a float dtype (Note [Fused rows in registers]), an
    // epilogue after them (Note [Fused row epilogues]).
    if (ins.kind == FusedInstr::Kind::Softmax || ins.kind == FusedInstr::Kind::LayerNorm) {
      if (!is_row || !is_float(ins.out)) return false;
      continue;
    }
    // A matmul runs as cuBLASLt's GEMM, a conv as the Conv kernel, the epilogue as a kernel
    // (Note [Matmul apart]).
    if (ins.kind == FusedInstr::Kind::Matmul || ins.kind == FusedInstr::Kind::Conv) return false;
    const DType dt = dtype_of(s, ins.kind == FusedInstr::Kind::Where ? ins.args[1] : ins.args[0]);
    if (ins.kind == FusedInstr::Kind::Reduce) {
      // Once, its outputs its result and its epilogue's values, never a prologue value (Note
      // [Fused row reductions], [Fused row epilogues]).
      if (!is_row || !fused_reduces_rows(ins.reduce, dt)) return false;
      for (std::int32_t o : s.outputs) {
        if (o < row_id) return false;
      }
    }
    if (ins.kind == FusedInstr::Kind::Unary && !unary_supported(ins.unary, dt)) return false;
    if (ins.kind == FusedInstr::Kind::Binary && !binary_supported(ins.binary, dt)) return false;
  }
  return true;
}

namespace {

// The input pointers of a kernel whose inputs walk the iteration space linearly or are one
// element (scalar_mask), declared into src; returns how the element body reads each (at i).
std::vector<std::string> linear_inputs(const FusedSpec& s, const FusedArgs& a, std::string& src) {
  std::vector<std::string> in(s.inputs.size());
  for (std::size_t k = 0; k < s.inputs.size(); ++k) {
    const std::string t = storage_type(s.inputs[k]);
    const std::string ks = num(k);
    src += "  const " + t + "* px" + ks + " = (const " + t + "*)g.w[" +
           num(static_cast<std::size_t>(a.inputs) + k) + "];\n";
    if (s.scalar_mask >> k & 1u) {
      src += "  const " + t + " s" + ks + " = px" + ks + "[0];\n";
      in[k] = "s" + ks;
    } else {
      in[k] = "px" + ks + "[i]";
    }
  }
  return in;
}

// The input pointers of the strided rows variant (Note [Fused rows over strided inputs]),
// with each input's row offset ro<k> and stride along the row cs<k>, and em_row(R), which
// sets the offsets at row R; returns how the element body reads each (at row R, column j).
std::vector<std::string> row_strided_inputs(const FusedSpec& s, const FusedArgs& a,
                                            std::string& src) {
  std::vector<std::string> in(s.inputs.size());
  std::string reset, step;
  for (std::size_t k = 0; k < s.inputs.size(); ++k) {
    const std::string t = storage_type(s.inputs[k]);
    const std::string ks = num(k);
    const std::string st = num(static_cast<std::size_t>(a.strides) + k * kMaxDims);
    src += "  const " + t + "* px" + ks + " = (const " + t + "*)g.w[" +
           num(static_cast<std::size_t>(a.inputs) + k) + "];\n  const i64 cs" + ks + " = g.w[" +
           st + " + " + num(kMaxDims - 1) + "];\n  i64 ro" + ks + " = 0;\n";
    in[k] = "px" + ks + "[ro" + ks + " + j * cs" + ks + "]";
    reset += " ro" + ks + " = 0;";
    step += "      ro" + ks + " += c * g.w[" + st + " + d];\n";
  }
  src +=
      "  const int orank = (int)g.w[3];\n"
      "  const auto em_row = [&](i64 R) {\n   " +
      reset +
      "\n    for (int d = orank - 1; d >= 0; --d) {\n"
      "      const i64 e = g.w[4 + d];\n"
      "      const i64 c = R % e;\n"
      "      R /= e;\n" +
      step + "    }\n  };\n";
  return in;
}

// Note [Fused row reductions]: a group ending in a Reduce along rows (every later extent 1)
// is the rows variant of the Reduce kernel (codegen::reduce_rows, one block of 256 threads a
// row) whose element j of row r is computed, not loaded: em_pro(r * n + j) evaluates the
// group's other instructions at that element of its (contiguous) iteration space and returns
// the reduction's operand in its storage type, the value the unfused group would have
// stored and the Reduce kernel loaded. The same threads combine the same elements in the
// same order as the Reduce kernel, so the result is bit for bit the unfused one. Arguments:
// w[1] the rows (outer), w[2] their length (n); the reduced value is the one output.
//
// Note [Fused row epilogues]: a Reduce followed by an epilogue (Note [Row epilogues] in
// backend/fused_group.hpp) hands its row's result, as stored, through shared memory to every
// thread of the block once it is reduced; em_epi(R, j, y) then evaluates the epilogue at
// element j of row R from it and stores the epilogue's outputs there: a row value's once a
// row (at j = 0, in its row-shaped output), the others at R * n + j. With values of the
// group's shape the block walks the row (j = thread, thread + 256, ...); with row values
// alone one thread does. A Softmax or LayerNorm's epilogue goes the same way element by
// element as the row result is stored (Note [Fused rows in registers]). Each epilogue
// instruction is printed as the element-wise kernels print it, on the stored result, so the
// outputs are the unfused ones bit for bit.
//
// The epilogue's element body: the row result as e<row_id> (of its storage type, from the
// parameter y), the instructions after it, and out(j, v) for each output j they compute.
template <class Out>
std::string epilogue_body(const FusedSpec& s, const std::vector<std::string>& in, Out&& out) {
  const std::size_t at = backend::row_index(s.code), n_in = s.inputs.size();
  const auto row_id = static_cast<std::int32_t>(n_in + at);
  const std::string rt = storage_type(s.code[at].out);
  return "    const " + rt + " " + value_name(n_in + at) + " = y;\n" +
         element_body(
             s, in,
             [&](std::size_t j, const std::string& v) {
               return s.outputs[j] > row_id ? out(j, v) : std::string();
             },
             at + 1);
}

KernelSource gen_fused_reduction(const FusedSpec& s) {
  const FusedArgs a = fused_args(s);
  const std::size_t at = backend::row_index(s.code), n_in = s.inputs.size();
  const FusedInstr& red = s.code[at];
  const auto row_id = static_cast<std::int32_t>(n_in + at);
  const bool epilogue = at + 1 < s.code.size();
  const DType dt = dtype_of(s, red.args[0]);
  std::string src = "extern \"C\" __global__ void " + s.name + "(EmWords<" + num(a.words) +
                    "> g) {\n  const i64 outer = g.w[1], n = g.w[2];\n";
  const std::vector<std::string> in = linear_inputs(s, a, src);
  const std::string yt = storage_type(red.out);
  std::size_t jr = s.outputs.size();  // the reduced value's output, if kept
  bool full = false;                  // the epilogue has values of the group's shape
  for (std::size_t j = 0; j < s.outputs.size(); ++j) {
    const std::string t = storage_type(dtype_of(s, s.outputs[j]));
    src += "  " + t + "* __restrict__ py" + num(j) + " = (" + t + "*)g.w[" +
           num(static_cast<std::size_t>(a.outputs) + j) + "];\n";
    if (s.outputs[j] == row_id) jr = j;
  }
  for (std::size_t i = at + 1; i < s.code.size(); ++i) full = full || !s.row_values[n_in + i];
  src += "  int* err = (int*)g.w[" + num(static_cast<std::size_t>(a.err)) +
         "]; (void)err;\n  const auto em_pro = [&](i64 i) {\n" +
         element_body(
             s, in, [](std::size_t, const std::string&) { return std::string(); }, 0, at) +
         "    return " +
         (red.args[0] < static_cast<std::int32_t>(n_in)
              ? in[static_cast<std::size_t>(red.args[0])]
              : value_name(static_cast<std::size_t>(red.args[0]))) +
         ";\n  };\n";
  std::string sink, after;
  if (epilogue) {
    src += "  __shared__ " + yt + " em_res;\n  const auto em_epi = [&](i64 R, i64 j, " + yt +
           " y) {\n    const i64 i = R * n + j; (void)i;\n" +
           epilogue_body(s, in,
                         [&](std::size_t j, const std::string& v) {
                           const auto o = static_cast<std::size_t>(s.outputs[j]);
                           return s.row_values[o]
                                      ? "    if (j == 0) py" + num(j) + "[R] = " + v + ";\n"
                                      : "    py" + num(j) + "[i] = " + v + ";\n";
                         }) +
           "  };\n";
    sink = "em_res = em_y;" + (jr < s.outputs.size() ? " py" + num(jr) + "[row] = em_y;" : "");
    after =
        full ? "    { const " + yt +
                   " y = em_res;\n"
                   "      for (i64 j = threadIdx.x; j < n; j += blockDim.x) em_epi(row, j, y); }\n"
             : "    if (threadIdx.x == 0) em_epi(row, 0, em_res);\n";
  } else {
    src += "  " + yt + "* y = py" + num(jr) + ";\n";
  }
  src += typedefs(dt) +
         reduce_rows(
             red.reduce, dt, [](const std::string& j) { return "em_pro(row * n + " + j + ")"; }, "",
             sink, after) +
         "}\n";
  KernelSource k;
  k.name = s.name;
  k.body = std::move(src);
  return k;
}

}  // namespace

// Note [Fused rows in registers]: a group ending in a Softmax or LayerNorm whose rows fit in
// registers is the unfused op's rows-in-registers kernel (Note [Rows in registers] in
// codegen/rows.cpp) with the same block, elements per thread and chunk width, whose chunks
// are computed rather than loaded: em_pro(R, j, st) evaluates the prologue at element j of
// row R (element i = R * n + j of the iteration space) and returns the row operand in its
// storage type — the value the unfused prologue would have stored and the row kernel
// loaded — storing the group's other outputs at i when st is set (each element is computed
// once with st, in the loads' order; the row's first element again without). The same
// threads reduce the same elements in the same order, so the result is bit for bit the
// unfused one. Every output is a fresh buffer: another thread of the block reads element 0
// of its row for `first`, so no output may overwrite an input. A layer norm's weight and
// bias are contiguous inputs read only by it (w, b). Arguments: w[1] the rows, w[2] their
// length.
//
// Note [Fused rows over strided inputs]: in the strided variant (!s.contiguous: an input
// broadcast along rows, as an attention mask [L, L] under [B, H, L, L] scores, or a
// position table under a batch, or a transposed view), input k is read at ro_k + j * cs_k:
// cs_k its stride along the row (w[strides + 8k + 7]), ro_k its offset at row R, set by
// em_row(R) from R's coordinates over the outer dims (collapsed across the inputs: w[3] of
// them, extents from w[4], input k's strides from w[strides + 8k]). The row macros call
// em_row(R) before each row's em_pro calls, so the division by the outer extents happens
// once a row, not once an element. The contiguous variant's em_row does nothing.
KernelSource gen_fused_rows(const FusedSpec& s, int ept, int vec) {
  EMBER_CHECK(has_row_norm(s), "cuda: " + s.name + " has no softmax or layer norm");
  const std::size_t n_in = s.inputs.size();
  const FusedArgs a = fused_args(s);
  const std::size_t at = backend::row_index(s.code);
  const FusedInstr& row = s.code[at];
  const auto row_id = static_cast<std::int32_t>(n_in + at);
  const bool epilogue = at + 1 < s.code.size();
  const DType dt = row.out;
  const std::string T = storage_type(dt);
  std::size_t jr = s.outputs.size();  // the row result's output, if kept
  for (std::size_t j = 0; j < s.outputs.size(); ++j) {
    if (s.outputs[j] == row_id) jr = j;
  }
  EMBER_CHECK(jr < s.outputs.size() || epilogue,
              "cuda: " + s.name + " neither outputs nor reads its row result");
  std::string setup = "  const i64 rows = g.w[1], n = g.w[2];\n";
  const std::vector<std::string> in =
      s.contiguous ? linear_inputs(s, a, setup) : row_strided_inputs(s, a, setup);
  if (s.contiguous) setup += "  const auto em_row = [](i64) {};\n";
  for (std::size_t j = 0; j < s.outputs.size(); ++j) {
    const std::string t = storage_type(dtype_of(s, s.outputs[j]));
    setup += "  " + t + "* __restrict__ py" + num(j) + " = (" + t + "*)g.w[" +
             num(static_cast<std::size_t>(a.outputs) + j) + "];\n";
  }
  if (jr < s.outputs.size()) setup += "  " + T + "* __restrict__ y = py" + num(jr) + ";\n";
  setup += "  int* err = (int*)g.w[" + num(static_cast<std::size_t>(a.err)) + "]; (void)err;\n";
  if (row.kind == FusedInstr::Kind::LayerNorm) {
    const auto ptr = [&](std::int32_t v) {
      return v < 0
                 ? std::string("nullptr")
                 : "(const " + T + "*)g.w[" +
                       num(static_cast<std::size_t>(a.inputs) + static_cast<std::size_t>(v)) + "]";
    };
    setup += "  const " + T + "* __restrict__ w = " + ptr(row.args[1]) + ";\n  const " + T +
             "* __restrict__ b = " + ptr(row.args[2]) +
             ";\n  const double eps = __longlong_as_double(g.w[" +
             num(static_cast<std::size_t>(a.param[at])) + "]);\n";
  }
  const std::string operand = row.args[0] < static_cast<std::int32_t>(n_in)
                                  ? in[static_cast<std::size_t>(row.args[0])]
                                  : value_name(static_cast<std::size_t>(row.args[0]));
  setup += "  const auto em_pro = [&](i64 R, i64 j, bool st) -> " + T +
           " {\n    const i64 i = R * n + j;\n    (void)i; (void)j; (void)st;\n" +
           element_body(
               s, in,
               [&](std::size_t j, const std::string& v) {
                 return s.outputs[j] < row_id ? "    if (st) py" + num(j) + "[i] = " + v + ";\n"
                                              : std::string();
               },
               0, at) +
           "    return " + operand + ";\n  };\n";
  if (epilogue) {  // (Note [Fused row epilogues])
    setup += "  const auto em_epi = [&](i64 R, i64 j, " + T +
             " y) {\n    const i64 i = R * n + j; (void)i;\n" +
             epilogue_body(s, in,
                           [](std::size_t j, const std::string& v) {
                             return "    py" + num(j) + "[i] = " + v + ";\n";
                           }) +
             "  };\n";
  }
  RowSource src{s.name, "EmWords<" + num(a.words) + "> g", setup};
  src.store_y = jr < s.outputs.size();
  src.epilogue = epilogue;
  return row.kind == FusedInstr::Kind::Softmax ? gen_softmax_regs_from(src, dt, row.log, ept, vec)
                                               : gen_layer_norm_regs_from(src, dt, ept, vec);
}

KernelSource gen_fused(const FusedSpec& s) {
  const std::size_t n_in = s.inputs.size();
  const FusedArgs a = fused_args(s);
  EMBER_CHECK(!s.code.empty() && !s.outputs.empty(), "cuda: a fused kernel needs code and outputs");
  EMBER_CHECK(fused_supported(s),
              "cuda: " + s.name + " applies a function not defined for its dtype");
  EMBER_CHECK(!has_row_norm(s), "cuda: " + s.name + " has a softmax or layer norm: gen_fused_rows");
  if (has_row_reduction(s)) {
    EMBER_CHECK(s.contiguous, "cuda: " + s.name + ": a fused reduction reads its inputs linearly");
    return gen_fused_reduction(s);
  }
  KernelSource k;
  k.name = s.name;
  std::string src = "extern \"C\" __global__ void " + s.name + "(EmWords<" + num(a.words) +
                    "> g) {\n  const i64 n = g.w[0];\n";
  for (std::size_t k2 = 0; k2 < n_in; ++k2) {
    const std::string t = storage_type(s.inputs[k2]);
    src += "  const " + t + "* px" + num(k2) + " = (const " + t + "*)g.w[" +
           num(static_cast<std::size_t>(a.inputs) + k2) + "];\n";
  }
  std::size_t widest = 1;
  for (std::size_t j = 0; j < s.outputs.size(); ++j) {
    const DType dt = dtype_of(s, s.outputs[j]);
    const std::string t = storage_type(dt);
    widest = std::max(widest, size_of(dt));
    src += "  " + t + "* py" + num(j) + " = (" + t + "*)g.w[" +
           num(static_cast<std::size_t>(a.outputs) + j) + "];\n";
  }
  src += "  int* err = (int*)g.w[" + num(static_cast<std::size_t>(a.err)) + "]; (void)err;\n";
  const auto store_at = [&](const std::string& idx) {
    return [&s, idx](std::size_t j, const std::string& v) {
      (void)s;
      return "    py" + num(j) + "[" + idx + "] = " + v + ";\n";
    };
  };
  if (s.contiguous) {
    std::vector<std::string> scalar_in(n_in), elem_in(n_in), vec_in(n_in);
    for (std::size_t k2 = 0; k2 < n_in; ++k2) {
      const std::string ks = num(k2);
      if (s.scalar_mask >> k2 & 1u) {
        src += "  const " + std::string(storage_type(s.inputs[k2])) + " s" + ks + " = px" + ks +
               "[0];\n";
        scalar_in[k2] = elem_in[k2] = vec_in[k2] = "s" + ks;
      } else {
        widest = std::max(widest, size_of(s.inputs[k2]));
        elem_in[k2] = "px" + ks + "[i]";
        vec_in[k2] = "w" + ks + ".v[u]";
      }
    }
    const std::string V = num(static_cast<std::size_t>(vector_width(widest)));
    std::string aligned = "true", loads, stores, outs;
    for (std::size_t k2 = 0; k2 < n_in; ++k2) {
      if (s.scalar_mask >> k2 & 1u) continue;
      const std::string ks = num(k2);
      const std::string vt = "em_vec<" + std::string(storage_type(s.inputs[k2])) + ", " + V + ">";
      aligned += " && ((u64)px" + ks + " % sizeof(" + vt + ") == 0)";
      loads += "    const " + vt + " w" + ks + " = ((const " + vt + "*)px" + ks + ")[q];\n";
    }
    for (std::size_t j = 0; j < s.outputs.size(); ++j) {
      const std::string js = num(j);
      const std::string vt =
          "em_vec<" + std::string(storage_type(dtype_of(s, s.outputs[j]))) + ", " + V + ">";
      aligned += " && ((u64)py" + js + " % sizeof(" + vt + ") == 0)";
      outs += "    " + vt + " r" + js + ";\n";
      stores += "    ((" + vt + "*)py" + js + ")[q] = r" + js + ";\n";
    }
    const std::string vec_body = element_body(s, vec_in, [](std::size_t j, const std::string& v) {
      return "    r" + num(j) + ".v[u] = " + v + ";\n";
    });
    src += "  const i64 nv = (" + aligned + ") ? n / " + V +
           " : 0;\n"
           "  for (i64 q = EM_GID; q < nv; q += EM_GSTRIDE) {\n" +
           loads + outs +
           "#pragma unroll\n"
           "    for (int u = 0; u < " +
           V + "; ++u) {\n    const i64 i = q * " + V + " + u; (void)i;\n" + vec_body + "    }\n" +
           stores + "  }\n  for (i64 i = nv * " + V + " + EM_GID; i < n; i += EM_GSTRIDE) {\n" +
           element_body(s, elem_in, store_at("i")) + "  }\n}\n";
  } else {
    std::vector<std::string> in(n_in);
    std::string decl = "    i64 r = i;\n", rank1, step;
    for (std::size_t k2 = 0; k2 < n_in; ++k2) {
      const std::string ks = num(k2);
      const std::string st = num(static_cast<std::size_t>(a.strides) + k2 * kMaxDims);
      in[k2] = "px" + ks + "[o" + ks + "]";
      decl += "    i64 o" + ks + " = 0;\n";
      rank1 += "      o" + ks + " = i * g.w[" + st + "];\n";
      step += "        o" + ks + " += c * g.w[" + st + " + d];\n";
    }
    src +=
        "  const int rank = (int)g.w[1];\n"
        "  for (i64 i = EM_GID; i < n; i += EM_GSTRIDE) {\n" +
        decl + "    if (rank == 1) {\n" + rank1 +
        "    } else {\n"
        "      for (int d = rank - 1; d >= 0; --d) {\n"
        "        const i64 e = g.w[2 + d];\n"
        "        const i64 c = r % e;\n"
        "        r /= e;\n" +
        step + "      }\n    }\n    (void)r;\n" + element_body(s, in, store_at("i")) + "  }\n}\n";
  }
  k.body = std::move(src);
  return k;
}

}  // namespace ember::cuda
