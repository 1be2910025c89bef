// The Cuda generators' shared printing vocabulary and the device prelude (printer.hpp).
#include "cuda/codegen/printer.hpp"

#include <string>

#include "cuda/codegen.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {
namespace {

// The shared device code, src/cuda/codegen/prelude.cuh, embedded by the build as a raw
// string (cmake/embed_text.cmake). No headers: NVRTC on the GPU machine has no toolkit
// includes, so 16-bit conversions use PTX and integer types are typedefs.
const char* const kPrelude =
#include "prelude.cuh.inc"
    ;

}  // namespace

const char* storage_type(DType t) {
  switch (t) {
    case DType::F64:
      return "double";
    case DType::F32:
      return "float";
    case DType::F16:
    case DType::BF16:
      return "h16";
    case DType::I64:
      return "i64";
    case DType::I32:
      return "i32";
    case DType::I16:
      return "i16";
    case DType::I8:
      return "i8";
    case DType::U8:
    case DType::Bool:
      return "u8";
  }
  return "u8";
}

const std::string& prelude() {
  static const std::string p = kPrelude;
  return p;
}

std::string full_source(const KernelSource& k) { return prelude() + k.body; }

namespace codegen {

K kind(DType t) {
  if (t == DType::Bool) return K::Bool;
  return is_float(t) ? K::Float : K::Int;
}

const char* compute_type(DType t) {
  switch (t) {
    case DType::F64:
      return "double";
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return "float";
    case DType::Bool:
      return "bool";
    default:
      return storage_type(t);
  }
}
const char* unsigned_type(DType t) { return t == DType::I64 ? "u64" : "unsigned int"; }

std::string load(DType t, const std::string& e) {
  switch (t) {
    case DType::F16:
      return "em_h2f(" + e + ")";
    case DType::BF16:
      return "em_b2f(" + e + ")";
    case DType::Bool:
      return "(" + e + " != 0)";
    default:
      return e;
  }
}
std::string store(DType t, const std::string& v) {
  switch (t) {
    case DType::F16:
      return "em_f2h(" + v + ")";
    case DType::BF16:
      return "em_f2b(" + v + ")";
    case DType::Bool:
      return "(u8)((" + v + ") ? 1 : 0)";
    default:
      return std::string("(") + storage_type(t) + ")(" + v + ")";
  }
}

std::string sat(const char* ty, const char* lo, const char* hi, const char* tlo, const char* thi,
                const std::string& v) {
  return std::string("em_sat<") + ty + ">(" + v + ", " + lo + ", " + hi + ", (" + ty + ")(" + tlo +
         "), (" + ty + ")(" + thi + "))";
}
// The storage value of double v for dtype t, as convert_elements' from_f64.
std::string from_f64(DType t, const std::string& v) {
  switch (t) {
    case DType::F64:
      return v;
    case DType::F32:
      return "(float)(" + v + ")";
    case DType::F16:
      return "em_f2h((float)(" + v + "))";
    case DType::BF16:
      return "em_f2b((float)(" + v + "))";
    case DType::Bool:
      return "(u8)((" + v + ") != 0.0 ? 1 : 0)";
    case DType::I64:
      return sat("i64", "-9223372036854775808.0", "9223372036854775807.0",
                 "-9223372036854775807LL - 1", "9223372036854775807LL", v);
    case DType::I32:
      return sat("i32", "-2147483648.0", "2147483647.0", "-2147483647 - 1", "2147483647", v);
    case DType::I16:
      return sat("i16", "-32768.0", "32767.0", "-32768", "32767", v);
    case DType::I8:
      return sat("i8", "-128.0", "127.0", "-128", "127", v);
    case DType::U8:
      return sat("u8", "0.0", "255.0", "0", "255", v);
  }
  return v;
}
// Storage value s of dtype t as double (to_f64).
std::string to_f64(DType t, const std::string& s) {
  switch (t) {
    case DType::F16:
      return "(double)em_h2f(" + s + ")";
    case DType::BF16:
      return "(double)em_b2f(" + s + ")";
    default:
      return "(double)(" + s + ")";
  }
}

std::string lower(const char* s) { return s; }
std::string dname(DType t) { return name(t); }

std::string typedefs(DType t) {
  return std::string("  typedef ") + compute_type(t) + " C;\n  typedef " + unsigned_type(t) +
         " U;\n  (void)sizeof(C); (void)sizeof(U);\n";
}

// Bytes of a storage type name as printed by storage_type / sized_type.
std::size_t sized_bytes(const std::string& t) {
  if (t == "double" || t == "i64" || t == "u64") return 8;
  if (t == "float" || t == "i32" || t == "unsigned int") return 4;
  if (t == "h16" || t == "i16") return 2;
  return 1;
}

// Replaces every occurrence of token in s with by.
std::string subst(std::string s, const std::string& token, const std::string& by) {
  for (std::size_t at = s.find(token); at != std::string::npos; at = s.find(token, at + by.size()))
    s.replace(at, token.size(), by);
  return s;
}

// The shared element-wise skeleton: a grid-stride loop computing operand offsets o0..o2
// (contiguous: all i) and running `body`, which reads operand k as $Xk and writes $Y.
// Strided kernels read x<k>[o<k>] and write `y_strided`. Note [Vector loads]: contiguous
// kernels move vector_width(...) elements per thread and iteration with one 16-byte (or
// narrower) load per operand when every pointer is aligned to it, and finish the tail (or
// misaligned views) one element at a time.
// Contiguous kernels may take operands in scalar_mask (bit k: operand k) as one element
// broadcast over the output (x + 2.0): read once, never vector-loaded.
std::string ew_kernel(const std::string& name, const char* out_t,
                      const std::array<const char*, 3>& in_t, int n_in, bool contiguous,
                      const std::string& pre, const std::string& body, const std::string& y_strided,
                      unsigned scalar_mask) {
  std::string s = "extern \"C\" __global__ void " + name + "(EmGeo g, " + out_t +
                  "* __restrict__ y, const " + in_t[0] + "* __restrict__ x0, const " + in_t[1] +
                  "* __restrict__ x1, const " + in_t[2] +
                  "* __restrict__ x2, double p0, double p1, int* err) {\n" + pre +
                  "  (void)x0; (void)x1; (void)x2; (void)p0; (void)p1; (void)err;\n";
  std::string scalar = body;
  std::string vec = body;
  for (int k = 0; k < n_in; ++k) {
    if (!contiguous || !(scalar_mask >> k & 1u)) continue;
    const std::string ks = std::to_string(k);
    s += "  const " + std::string(in_t[k]) + " s" + ks + " = x" + ks + "[0];\n";
    scalar = subst(scalar, "$X" + ks, "s" + ks);
    vec = subst(vec, "$X" + ks, "s" + ks);
  }
  for (int k = 0; k < 3; ++k) {
    const std::string ks = std::to_string(k);
    scalar = subst(scalar, "$X" + ks, "x" + ks + "[o" + ks + "]");
  }
  scalar = subst(scalar, "$Y", contiguous ? "y[i]" : y_strided);
  if (contiguous) {
    std::size_t widest = 1;
    for (int k = 0; k < n_in; ++k) widest = std::max(widest, sized_bytes(in_t[k]));
    widest = std::max(widest, sized_bytes(out_t));
    const std::string V = std::to_string(vector_width(widest));
    std::string aligned = "((u64)y % (sizeof(" + std::string(out_t) + ") * " + V + ") == 0)";
    std::string loads;
    for (int k = 0; k < n_in; ++k) {
      if (scalar_mask >> k & 1u) continue;
      const std::string ks = std::to_string(k);
      const std::string vt = "em_vec<" + std::string(in_t[k]) + ", " + V + ">";
      aligned += " && ((u64)x" + ks + " % sizeof(" + vt + ") == 0)";
      loads += "    const " + vt + " v" + ks + " = ((const " + vt + "*)x" + ks + ")[q];\n";
      vec = subst(vec, "$X" + ks, "v" + ks + ".v[u]");
    }
    vec = subst(vec, "$Y", "r.v[u]");
    const std::string yt = "em_vec<" + std::string(out_t) + ", " + V + ">";
    s += "  const i64 nv = (" + aligned + ") ? g.n / " + V +
         " : 0;\n"
         "  for (i64 q = EM_GID; q < nv; q += EM_GSTRIDE) {\n" +
         loads + "    " + yt +
         " r;\n"
         "#pragma unroll\n"
         "    for (int u = 0; u < " +
         V + "; ++u) {\n      const i64 i = q * " + V +
         " + u; (void)i;\n"
         "      const i64 o0 = i, o1 = i, o2 = i; (void)o0; (void)o1; (void)o2;\n" +
         vec + "    }\n    ((" + yt + "*)y)[q] = r;\n  }\n" + "  for (i64 i = nv * " + V +
         " + EM_GID; i < g.n; i += EM_GSTRIDE) {\n"
         "    const i64 o0 = i, o1 = i, o2 = i;\n";
  } else {
    s += "  for (i64 i = EM_GID; i < g.n; i += EM_GSTRIDE) {\n"
         "    i64 o0, o1, o2;\n    em_offsets(g, i, o0, o1, o2);\n";
  }
  s += "    (void)o0; (void)o1; (void)o2;\n" + scalar + "  }\n}\n";
  return s;
}

const char* layout_suffix(bool contiguous) { return contiguous ? "_c" : "_s"; }
std::string scalar_suffix(bool contiguous, unsigned scalar_mask) {
  if (!contiguous || scalar_mask == 0) return "";
  std::string s = "k";  // (built by append: "k" + std::string trips GCC 12's -Wrestrict)
  s += std::to_string(scalar_mask);
  return s;
}

const char* sized_type(std::size_t elem) {
  switch (elem) {
    case 1:
      return "u8";
    case 2:
      return "h16";
    case 4:
      return "unsigned int";
    default:
      return "u64";
  }
}

// Reduces each thread's `v` (type C) across the block with `op` over v and o (identity
// `ident`): warp shuffles, then one warp over the per-warp results in sv[32]. Every thread
// ends with the result in v. Needs lane, warp, nwarps and __shared__ C sv[32] in scope.
std::string block_reduce(const std::string& op, const std::string& ident) {
  return "    { const C ident = " + ident + ";\n" +
         "    for (int off = 16; off > 0; off >>= 1) { const C o = em_shfl(v, off); v = " + op +
         "; }\n"
         "    if (lane == 0) sv[warp] = v;\n"
         "    __syncthreads();\n"
         "    if (warp == 0) {\n"
         "      v = lane < nwarps ? sv[lane] : ident;\n"
         "      for (int off = 16; off > 0; off >>= 1) { const C o = em_shfl(v, off); v = " +
         op +
         "; }\n"
         "      if (lane == 0) sv[0] = v;\n"
         "    }\n"
         "    __syncthreads();\n"
         "    v = sv[0];\n"
         "    __syncthreads(); }\n";
}

}  // namespace codegen
}  // namespace ember::cuda
