// The reduction and scan generators, and the reductions' combine steps and identities,
// printed from ir::sx::reduction (ir/scalar_table.hpp) for these and every other family
// that folds values (softmax, layer norm, pooling).
#include <functional>
#include <string>
#include <vector>

#include "cuda/codegen.hpp"
#include "cuda/codegen/printer.hpp"
#include "ember/base/error.hpp"
#include "ember/ir/scalar_table.hpp"

namespace ember::cuda {

using namespace codegen;  // NOLINT: the generators are written in the printer's vocabulary
using ir::ReduceFn;
using ir::ScanFn;

namespace codegen {

// A reduction's combine step over accumulator `acc` and value `v` (both C; bool for any
// and all), and its identity: ir::sx::reduction's expressions, as the Cpu's Combine. Bools
// (argmax / argmin) order as the integers 0 < 1.
std::string combine(ReduceFn fn, DType t, const std::string& acc, const std::string& v) {
  const bool logic = fn == ReduceFn::Any || fn == ReduceFn::All;
  const DType at = logic ? DType::Bool : t;
  const auto& d = ir::sx::def(ir::sx::reduction(fn).combine);
  Kind k = kind_of(at);
  if (k == Kind::Bool && !ir::sx::defined_for(d, k)) k = Kind::Int;
  ir::sx::Names names;
  names.a = acc;
  names.b = v;
  const auto p = ir::sx::print(ir::sx::expr(d, k), ir::sx::Dialect::Cuda, at, names, "", "");
  EMBER_ASSERT(p.statements.empty());
  return p.value;
}

std::string reduce_init(ReduceFn fn, DType t) {
  const bool logic = fn == ReduceFn::Any || fn == ReduceFn::All;
  const auto p =
      ir::sx::print(ir::sx::reduction(fn).identity, ir::sx::Dialect::Cuda, logic ? DType::Bool : t);
  return p.value;
}

bool reduce_supported(ReduceFn fn, DType t) {
  if (t != DType::Bool) return true;
  return fn == ReduceFn::Any || fn == ReduceFn::All || fn == ReduceFn::ArgMax ||
         fn == ReduceFn::ArgMin;
}

}  // namespace codegen

namespace codegen {

std::string reduce_rows(ReduceFn fn, DType dt,
                        const std::function<std::string(const std::string&)>& elem,
                        const std::string& row_setup, const std::string& sink,
                        const std::string& after) {
  const bool arg = fn == ReduceFn::ArgMax || fn == ReduceFn::ArgMin;
  const bool boolean = fn == ReduceFn::Any || fn == ReduceFn::All;
  const char* mx = fn == ReduceFn::ArgMax ? "true" : "false";
  const DType out = arg ? DType::I64 : (boolean ? DType::Bool : dt);
  const char* acc_t = boolean ? "bool" : "C";
  // Element j of the row as C (bool for any and all).
  const auto value = [&](const std::string& j) {
    std::string v = load(dt, elem(j));
    if (boolean) v = std::string("(").append(v).append(" != (C)0)");
    return v;
  };
  const std::string result = arg ? "(ai < 0 ? 0 : ai)" : store(out, reduce_final(fn, dt));
  const std::string write =
      sink.empty() ? "y[row] = " + result + ";"
                   : "const " + std::string(storage_type(out)) + " em_y = " + result + "; " + sink;
  std::string step;
  if (arg) {
    step = "      const C v = " + value("j") + ";\n      if (em_arg_better(v, j, acc, ai, " + mx +
           ")) { acc = v; ai = j; }\n";
  } else {
    step = "      const " + std::string(acc_t) + " v = " + value("j") +
           ";\n      acc = " + combine(fn, dt, "acc", "v") + ";\n";
  }
  const std::string init = arg ? "C acc = (C)0; i64 ai = -1;\n"
                               : std::string(acc_t) + " acc = " + reduce_init(fn, dt) + ";\n";
  std::string s = "  __shared__ " + std::string(arg ? "C" : acc_t) + " sv[32];\n";
  if (arg) s += "  __shared__ i64 si[32];\n";
  s += "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
       "  const int nwarps = (blockDim.x + 31) >> 5;\n"
       "  for (i64 row = blockIdx.x; row < outer; row += gridDim.x) {\n" +
       row_setup + "    " + init + "    i64 j = threadIdx.x;\n";
  // Four independent loads per step keep more bytes in flight per thread.
  const auto at = [&](int u) { return value("j + " + std::to_string(u) + " * (i64)blockDim.x"); };
  if (arg) {
    // Each thread's indices increase, so a later value wins only when strictly better (or
    // the first NaN): em_arg_better's order without its branches.
    const char* cmp = fn == ReduceFn::ArgMax ? " > " : " < ";
    s += "    for (; j + 3 * (i64)blockDim.x < n; j += 4 * (i64)blockDim.x) {\n"
         "      const C v0 = " +
         at(0) + ", v1 = " + at(1) + ", v2 = " + at(2) + ", v3 = " + at(3) + ";\n";
    for (int u = 0; u < 4; ++u) {
      const std::string v = std::string("v").append(std::to_string(u));
      s += "      { const bool b = ai < 0 || " + v + cmp + "acc || (" + v + " != " + v +
           " && acc == acc);\n"
           "        acc = b ? " +
           v + " : acc; ai = b ? j + " + std::to_string(u) + " * (i64)blockDim.x : ai; }\n";
    }
    s += "    }\n";
  } else {
    s += "    for (; j + 3 * (i64)blockDim.x < n; j += 4 * (i64)blockDim.x) {\n"
         "      const " +
         std::string(acc_t) + " v0 = " + at(0) + ", v1 = " + at(1) + ", v2 = " + at(2) +
         ", v3 = " + at(3) + ";\n      const " + std::string(acc_t) +
         " v01 = " + combine(fn, dt, "v0", "v1") + ", v23 = " + combine(fn, dt, "v2", "v3") +
         ";\n      const " + std::string(acc_t) + " v03 = " + combine(fn, dt, "v01", "v23") +
         ";\n      acc = " + combine(fn, dt, "acc", "v03") + ";\n    }\n";
  }
  s += "    for (; j < n; j += blockDim.x) {\n" + step + "    }\n";
  // Warp, then block: the same combine over partial results.
  std::string merge;
  if (arg) {
    merge =
        "      { const C ov = em_shfl(acc, off); const i64 oi = em_shfl(ai, off);\n"
        "        if (em_arg_better(ov, oi, acc, ai, " +
        std::string(mx) + ")) { acc = ov; ai = oi; } }\n";
  } else {
    merge = "      { const " + std::string(acc_t) +
            " v = em_shfl(acc, off); acc = " + combine(fn, dt, "acc", "v") + "; }\n";
  }
  s += "    for (int off = 16; off > 0; off >>= 1)\n" + merge;
  s += "    if (lane == 0) { sv[warp] = acc;" + std::string(arg ? " si[warp] = ai;" : "") +
       " }\n"
       "    __syncthreads();\n"
       "    if (warp == 0) {\n"
       "      if (lane < nwarps) { acc = sv[lane];" +
       std::string(arg ? " ai = si[lane];" : "") + " } else { " +
       (arg ? std::string("acc = (C)0; ai = -1;") : "acc = " + reduce_init(fn, dt) + ";") +
       " }\n"
       "      for (int off = 16; off > 0; off >>= 1)\n" +
       merge + "      if (lane == 0) { " + write +
       " }\n"
       "    }\n"
       "    __syncthreads();\n" +
       after + "  }\n";
  return s;
}

std::string reduce_final(ReduceFn fn, DType dt) {
  if (fn != ReduceFn::Mean) return "acc";
  return kind(dt) == K::Float ? "(n == 0 ? (C)(0.0 / 0.0) : acc * ((C)1 / (C)n))"
                              // integer means divide in i64: n may not fit C
                              : "(n == 0 ? (C)0 : (C)((i64)acc / n))";
}

}  // namespace codegen

KernelSource gen_reduce(ReduceFn fn, DType dt, bool rows) {
  EMBER_CHECK(reduce_supported(fn, dt),
              std::string(ir::name(fn)) + ": not defined for " + name(dt) + " tensors");
  KernelSource k;
  k.name = "em_reduce_" + lower(ir::name(fn)) + "_" + dname(dt) + (rows ? "_rows" : "_cols");
  const bool arg = fn == ReduceFn::ArgMax || fn == ReduceFn::ArgMin;
  const bool boolean = fn == ReduceFn::Any || fn == ReduceFn::All;
  const DType out = arg ? DType::I64 : (boolean ? DType::Bool : dt);
  std::string s = "extern \"C\" __global__ void " + k.name + "(const " + storage_type(dt) +
                  "* __restrict__ x, " + storage_type(out) +
                  "* __restrict__ y, i64 outer, i64 n, i64 inner) {\n" + typedefs(dt);
  if (rows) {
    // Rows (inner == 1) index the row directly.
    s += reduce_rows(
             fn, dt, [](const std::string& j) { return "xr[" + j + "]"; },
             "    const " + std::string(storage_type(dt)) + "* xr = x + row * n;\n") +
         "}\n";
  } else {
    // Columns stride by inner: one thread per output element.
    const char* mx = fn == ReduceFn::ArgMax ? "true" : "false";
    std::string value = load(dt, "xr[j * inner]");
    if (boolean) value = std::string("(").append(value).append(" != (C)0)");
    const char* acc_t = boolean ? "bool" : "C";
    const std::string step = arg ? "      const C v = " + value +
                                       ";\n      if (em_arg_better(v, j, acc, ai, " + mx +
                                       ")) { acc = v; ai = j; }\n"
                                 : "      const " + std::string(acc_t) + " v = " + value +
                                       ";\n      acc = " + combine(fn, dt, "acc", "v") + ";\n";
    const std::string init = arg ? "C acc = (C)0; i64 ai = -1;\n"
                                 : std::string(acc_t) + " acc = " + reduce_init(fn, dt) + ";\n";
    const std::string write =
        arg ? "y[row] = ai < 0 ? 0 : ai;" : "y[row] = " + store(out, reduce_final(fn, dt)) + ";";
    s += "  for (i64 row = EM_GID; row < outer * inner; row += EM_GSTRIDE) {\n"
         "    const " +
         std::string(storage_type(dt)) +
         "* xr = x + (row / inner) * n * inner + row % inner;\n    " + init +
         "    for (i64 j = 0; j < n; ++j) {\n" + step + "    }\n    " + write + "\n  }\n}\n";
  }
  k.body = std::move(s);
  return k;
}

KernelSource gen_scan(ScanFn fn, DType dt) {
  EMBER_CHECK(dt != DType::Bool, std::string(ir::name(fn)) + ": not defined for bool tensors");
  KernelSource k;
  k.name = "em_scan_" + lower(ir::name(fn)) + "_" + dname(dt);
  const std::string st = storage_type(dt);
  k.body = "extern \"C\" __global__ void " + k.name + "(const " + st + "* __restrict__ x, " + st +
           "* __restrict__ y, i64 outer, i64 n, i64 inner) {\n" + typedefs(dt) +
           "  for (i64 line = EM_GID; line < outer * inner; line += EM_GSTRIDE) {\n"
           "    const i64 base = (line / inner) * n * inner + line % inner;\n"
           "    C acc = (C)0;\n"
           "    for (i64 j = 0; j < n; ++j) {\n"
           "      const C v = " +
           load(dt, "x[base + j * inner]") +
           ";\n"
           "      acc = j == 0 ? v : " +
           combine(ir::sx::as_reduce(fn), dt, "acc", "v") +
           ";\n"
           "      y[base + j * inner] = " +
           store(dt, "acc") +
           ";\n"
           "    }\n  }\n}\n";
  return k;
}

// ---- variants (Note [Kernel specs] in codegen.hpp) ----

template <>
std::vector<ReduceKernel> ReduceKernel::variants() {
  std::vector<ReduceKernel> out;
  for (DType dt : kAllDTypes) {
    for (std::size_t f = 0; f < static_cast<std::size_t>(ReduceFn::Count_); ++f) {
      const auto fn = static_cast<ReduceFn>(f);
      if (!reduce_supported(fn, dt)) continue;
      out.emplace_back(fn, dt, true);
      out.emplace_back(fn, dt, false);
    }
  }
  return out;
}

template <>
std::vector<ScanKernel> ScanKernel::variants() {
  std::vector<ScanKernel> out;
  for (DType dt : kAllDTypes) {
    if (dt == DType::Bool) continue;
    for (std::size_t f = 0; f < static_cast<std::size_t>(ScanFn::Count_); ++f) {
      out.emplace_back(static_cast<ScanFn>(f), dt);
    }
  }
  return out;
}

}  // namespace ember::cuda
