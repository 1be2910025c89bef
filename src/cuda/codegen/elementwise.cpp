// The element-wise kernel generators (unary, binary, where, cast, copy): every function is
// printed from its one definition in ir/scalar_table.hpp (ir::sx::print, the CUDA dialect)
// into the shared skeleton (printer.hpp's ew_kernel), except where the prelude has a tuned
// form of it (tuned_form).
#include <string>

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

// The statements and value of fn over x (unary) or a, b (binary) in the compute type C.
ir::sx::Printed unary_expr(UnaryFn fn, DType t) {
  if (const char* tuned = tuned_form(fn, t)) return {"", tuned};
  ir::sx::Names names;
  names.a = "x";
  return ir::sx::print(ir::sx::expr(ir::sx::def(fn), kind_of(t)), ir::sx::Dialect::Cuda, t, names);
}
ir::sx::Printed binary_expr(BinaryFn fn, DType t) {
  return ir::sx::print(ir::sx::expr(ir::sx::def(fn), kind_of(t)), ir::sx::Dialect::Cuda, t);
}

}  // namespace

bool unary_supported(UnaryFn fn, DType dt) { return ir::sx::defined_for(fn, dt); }
bool binary_supported(BinaryFn fn, DType dt) { return ir::sx::defined_for(fn, dt); }

KernelSource gen_unary(UnaryFn fn, DType dt, bool contiguous) {
  EMBER_CHECK(unary_supported(fn, dt),
              std::string("cuda: ") + ir::name(fn) + " is not defined for " + name(dt));
  const auto e = unary_expr(fn, dt);
  const DType out = ir::sx::result_dtype(fn, dt);
  KernelSource k;
  k.name = "em_unary_" + lower(ir::name(fn)) + "_" + dname(dt) + layout_suffix(contiguous);
  const std::string body = "    const C x = " + load(dt, "$X0") + ";\n" + e.statements +
                           "    $Y = " + store(out, e.value) + ";\n";
  k.body = ew_kernel(k.name, storage_type(out), {storage_type(dt), "u8", "u8"}, 1, contiguous,
                     typedefs(dt), body);
  return k;
}

KernelSource gen_binary(BinaryFn fn, DType dt, bool contiguous, unsigned scalar_mask) {
  EMBER_CHECK(binary_supported(fn, dt),
              std::string("cuda: ") + ir::name(fn) + " is not defined for " + name(dt));
  const auto e = binary_expr(fn, dt);
  const DType out = ir::sx::result_dtype(fn, dt);
  KernelSource k;
  k.name = "em_binary_" + lower(ir::name(fn)) + "_" + dname(dt) + layout_suffix(contiguous) +
           scalar_suffix(contiguous, scalar_mask);
  std::string body =
      "    const C a = " + load(dt, "$X0") + ";\n    const C b = " + load(dt, "$X1") + ";\n";
  if (kind(dt) == K::Int && (fn == BinaryFn::Div || fn == BinaryFn::Rem)) {
    body += "    if (b == (C)0) em_flag(err, 2, (i64)i);\n";
  }
  body += e.statements + "    $Y = " + store(out, e.value) + ";\n";
  k.body = ew_kernel(k.name, storage_type(out), {storage_type(dt), storage_type(dt), "u8"}, 2,
                     contiguous, typedefs(dt), body, "y[i]", scalar_mask);
  return k;
}

KernelSource gen_where(DType dt, bool contiguous, unsigned scalar_mask) {
  KernelSource k;
  const std::size_t elem = size_of(dt);
  k.name = "em_where_s" + std::to_string(elem) + layout_suffix(contiguous) +
           scalar_suffix(contiguous, scalar_mask);
  const char* t = sized_type(elem);
  k.body = ew_kernel(k.name, t, {"u8", t, t}, 3, contiguous, "", "    $Y = $X0 != 0 ? $X1 : $X2;\n",
                     "y[i]", scalar_mask);
  return k;
}

KernelSource gen_cast(DType from, DType to, bool contiguous) {
  KernelSource k;
  k.name = "em_cast_" + dname(from) + "_" + dname(to) + layout_suffix(contiguous);
  const bool int_from = kind(from) != K::Float;  // bool converts as an integer here
  std::string v;
  if (from == to) {
    v = "$X0";
  } else if (int_from && kind(to) == K::Int) {
    v = std::string("(") + storage_type(to) + ")$X0";  // wraps, as C++20
  } else if (to == DType::Bool) {
    v = "(u8)(" + to_f64(from, "$X0") + " != 0.0 ? 1 : 0)";
  } else {
    v = from_f64(to, to_f64(from, "$X0"));
  }
  k.body = ew_kernel(k.name, storage_type(to), {storage_type(from), "u8", "u8"}, 1, contiguous, "",
                     "    $Y = " + v + ";\n");
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

}  // namespace ember::cuda
