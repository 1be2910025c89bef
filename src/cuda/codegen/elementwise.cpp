// The element-wise kernel generators (unary, binary, where, cast, copy): every function is
// printed from its one definition in ir/scalar_table.hpp (ir::sx::print, the CUDA dialect)
// into the shared skeleton (printer.hpp's ew_kernel), except where the prelude has a tuned
// form of it (tuned_form).
#include <string>
#include <vector>

#include "cuda/codegen.hpp"
#include "cuda/codegen/printer.hpp"
#include "ember/base/error.hpp"
#include "ember/ir/scalar_table.hpp"

namespace ember::cuda {

using namespace codegen;  // NOLINT: the generators are written in the printer's vocabulary
using ir::BinaryFn;
using ir::UnaryFn;

namespace {

// The tuned CUDA form of a function for dtype t, where the prelude has one (its expression
// stays the definition the conformance tests hold it to); nullptr elsewhere.
const char* tuned_form(UnaryFn fn, DType t) {
  const bool f32_compute = t == DType::F32 || t == DType::F16 || t == DType::BF16;
  if (fn == UnaryFn::Gelu && f32_compute) return "em_gelu(x)";
  return nullptr;
}

}  // namespace

bool unary_supported(UnaryFn fn, DType dt) { return ir::sx::defined_for(fn, dt); }
bool binary_supported(BinaryFn fn, DType dt) { return ir::sx::defined_for(fn, dt); }

namespace codegen {

std::string unary_code(UnaryFn fn, DType dt, const std::string& x, const std::string& y,
                       const std::string& p0, const std::string& p1, const std::string& temp) {
  ir::sx::Printed e;
  if (const char* tuned = tuned_form(fn, dt)) {
    e = {"", tuned};
  } else {
    ir::sx::Names names;
    names.a = "x";
    names.p0 = p0;
    names.p1 = p1;
    e = ir::sx::print(ir::sx::expr(ir::sx::def(fn), kind_of(dt)), ir::sx::Dialect::Cuda, dt, names,
                      "    ", temp);
  }
  const DType out = ir::sx::result_dtype(fn, dt);
  return "    const C x = " + load(dt, x) + ";\n" + e.statements + "    " + y + " = " +
         store(out, e.value) + ";\n";
}

std::string binary_code(BinaryFn fn, DType dt, const std::string& a, const std::string& b,
                        const std::string& y, const std::string& temp) {
  const auto e = ir::sx::print(ir::sx::expr(ir::sx::def(fn), kind_of(dt)), ir::sx::Dialect::Cuda,
                               dt, {}, "    ", temp);
  const DType out = ir::sx::result_dtype(fn, dt);
  std::string s = "    const C a = " + load(dt, a) + ";\n    const C b = " + load(dt, b) + ";\n";
  if (kind(dt) == K::Int && (fn == BinaryFn::Div || fn == BinaryFn::Rem)) {
    s += "    if (b == (C)0) em_flag(err, 2, (i64)i);\n";
  }
  return s + e.statements + "    " + y + " = " + store(out, e.value) + ";\n";
}

std::string cast_value(DType from, DType to, const std::string& x) {
  const bool int_from = kind(from) != K::Float;  // bool converts as an integer here
  if (from == to) return x;
  if (int_from && kind(to) == K::Int)
    return std::string("(") + storage_type(to) + ")" + x;  // wraps, as C++20
  if (to == DType::Bool) return "(u8)(" + to_f64(from, x) + " != 0.0 ? 1 : 0)";
  // A bool to a float type narrower than double: its 0 or 1 selected as a float, not a
  // double converted after (Note [Bernoulli in its own type] in creation.cpp).
  if (from == DType::Bool && kind(to) == K::Float && to != DType::F64)
    return store(to, "(" + x + " != 0 ? 1.0f : 0.0f)");
  return from_f64(to, to_f64(from, x));
}

// (em_keep: a where may be a min or max of integers, Note [Integer selects on sm_90].)
std::string where_value(const std::string& c, const std::string& a, const std::string& b) {
  return "em_keep(" + c + " != 0 ? " + a + " : " + b + ")";
}

}  // namespace codegen

KernelSource gen_unary(UnaryFn fn, DType dt, bool contiguous) {
  EMBER_CHECK(unary_supported(fn, dt),
              std::string("cuda: ") + ir::name(fn) + " is not defined for " + name(dt));
  const DType out = ir::sx::result_dtype(fn, dt);
  KernelSource k;
  k.name = "em_unary_" + lower(ir::name(fn)) + "_" + dname(dt) + layout_suffix(contiguous);
  k.body = ew_kernel(k.name, storage_type(out), {storage_type(dt), "u8", "u8"}, 1, contiguous,
                     typedefs(dt), unary_code(fn, dt, "$X0", "$Y"));
  return k;
}

KernelSource gen_binary(BinaryFn fn, DType dt, bool contiguous, unsigned scalar_mask) {
  EMBER_CHECK(binary_supported(fn, dt),
              std::string("cuda: ") + ir::name(fn) + " is not defined for " + name(dt));
  const DType out = ir::sx::result_dtype(fn, dt);
  KernelSource k;
  k.name = "em_binary_" + lower(ir::name(fn)) + "_" + dname(dt) + layout_suffix(contiguous) +
           scalar_suffix(contiguous, scalar_mask);
  k.body = ew_kernel(k.name, storage_type(out), {storage_type(dt), storage_type(dt), "u8"}, 2,
                     contiguous, typedefs(dt), binary_code(fn, dt, "$X0", "$X1", "$Y"), "y[i]",
                     scalar_mask);
  return k;
}

KernelSource gen_where(std::size_t elem, bool contiguous, unsigned scalar_mask) {
  KernelSource k;
  k.name = "em_where_s" + std::to_string(elem) + layout_suffix(contiguous) +
           scalar_suffix(contiguous, scalar_mask);
  const char* t = sized_type(elem);
  k.body = ew_kernel(k.name, t, {"u8", t, t}, 3, contiguous, "",
                     "    $Y = " + where_value("$X0", "$X1", "$X2") + ";\n", "y[i]", scalar_mask);
  return k;
}

KernelSource gen_cast(DType from, DType to, bool contiguous) {
  KernelSource k;
  k.name = "em_cast_" + dname(from) + "_" + dname(to) + layout_suffix(contiguous);
  k.body = ew_kernel(k.name, storage_type(to), {storage_type(from), "u8", "u8"}, 1, contiguous, "",
                     "    $Y = " + cast_value(from, to, "$X0") + ";\n");
  return k;
}

KernelSource gen_copy(std::size_t elem, bool contiguous) {
  KernelSource k;
  k.name = "em_copy_s" + std::to_string(elem) + layout_suffix(contiguous);
  const char* t = sized_type(elem);
  // Operand 1 is the destination's view: strided copies write y[o1].
  k.body = ew_kernel(k.name, t, {t, "u8", "u8"}, 1, contiguous, "", "    $Y = $X0;\n", "y[o1]");
  return k;
}

// ---- variants (Note [Kernel specs] in codegen.hpp) ----

// Contiguous kernels with each operand but the last possibly one element (scalar_mask),
// strided ones with none.
template <>
std::vector<UnaryKernel> UnaryKernel::variants() {
  std::vector<UnaryKernel> out;
  for (bool c : {true, false}) {
    for (std::size_t f = 0; f < static_cast<std::size_t>(UnaryFn::Count_); ++f) {
      for (DType dt : kAllDTypes) {
        if (unary_supported(static_cast<UnaryFn>(f), dt))
          out.emplace_back(static_cast<UnaryFn>(f), dt, c);
      }
    }
  }
  return out;
}

template <>
std::vector<BinaryKernel> BinaryKernel::variants() {
  std::vector<BinaryKernel> out;
  for (bool c : {true, false}) {
    for (std::size_t f = 0; f < static_cast<std::size_t>(BinaryFn::Count_); ++f) {
      for (DType dt : kAllDTypes) {
        if (!binary_supported(static_cast<BinaryFn>(f), dt)) continue;
        for (unsigned m : {0u, 1u, 2u}) {
          if (c || m == 0) out.emplace_back(static_cast<BinaryFn>(f), dt, c, m);
        }
      }
    }
  }
  return out;
}

template <>
std::vector<WhereKernel> WhereKernel::variants() {
  std::vector<WhereKernel> out;
  for (bool c : {true, false}) {
    for (std::size_t e : {1, 2, 4, 8}) {
      for (unsigned m = 0; m < 7; ++m) {
        if (c || m == 0) out.emplace_back(e, c, m);
      }
    }
  }
  return out;
}

template <>
std::vector<CastKernel> CastKernel::variants() {
  std::vector<CastKernel> out;
  for (bool c : {true, false}) {
    for (DType a : kAllDTypes) {
      for (DType b : kAllDTypes) out.emplace_back(a, b, c);
    }
  }
  return out;
}

template <>
std::vector<CopyKernel> CopyKernel::variants() {
  std::vector<CopyKernel> out;
  for (bool c : {true, false}) {
    for (std::size_t e : {1, 2, 4, 8}) out.emplace_back(e, c);
  }
  return out;
}

}  // namespace ember::cuda
