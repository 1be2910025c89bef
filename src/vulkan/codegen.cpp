#include "vulkan/codegen.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "ember/base/error.hpp"
#include "ember/ir/infer.hpp"
#include "ember/ir/scalar_table.hpp"

namespace ember::vulkan {
namespace sx = ir::sx;
namespace {

const char* dtype_tag(DType dt) { return ember::name(dt); }

// The GLSL storage type of a dtype's elements.
const char* storage(DType dt) {
  switch (dt) {
    case DType::F64:
      return "double";
    case DType::F32:
      return "float";
    case DType::F16:
      return "float16_t";
    case DType::BF16:
      return "uint16_t";
    case DType::I64:
      return "int64_t";
    case DType::I32:
      return "int";
    case DType::I16:
      return "int16_t";
    case DType::I8:
      return "int8_t";
    case DType::U8:
    case DType::Bool:
      return "uint8_t";
  }
  return "float";
}

// The compute type C.
const char* compute(DType dt) {
  switch (dt) {
    case DType::F64:
      return "double";
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return "float";
    case DType::Bool:
      return "bool";
    default:
      return storage(dt);
  }
}

// The unsigned type U that integer arithmetic wraps in.
const char* wrapping(DType dt) {
  switch (dt) {
    case DType::I64:
      return "uint64_t";
    case DType::I32:
      return "uint";
    case DType::I16:
      return "uint16_t";
    case DType::I8:
    case DType::U8:
      return "uint8_t";
    default:
      return compute(dt);
  }
}

// Storage element -> compute value.
std::string load(DType dt, const std::string& e) {
  switch (dt) {
    case DType::F16:
      return "float(" + e + ")";
    case DType::BF16:
      return "uintBitsToFloat(uint(" + e + ") << 16)";
    case DType::Bool:
      return "(" + e + " != uint8_t(0))";
    default:
      return e;
  }
}
// Compute value -> storage element.
std::string store(DType dt, const std::string& v) {
  switch (dt) {
    case DType::F16:
      return "float16_t(" + v + ")";
    case DType::BF16:
      return "em_to_bf16(" + v + ")";
    case DType::Bool:
      return "((" + v + ") ? uint8_t(1) : uint8_t(0))";
    default:
      return v;
  }
}

// A compute value from two argument words (low first) holding compute_bits().
std::string from_words(DType dt, const std::string& lo, const std::string& hi) {
  switch (dt) {
    case DType::F64:
      return "packDouble2x32(uvec2(uint(" + lo + "), uint(" + hi + ")))";
    case DType::F32:
    case DType::F16:
    case DType::BF16:
      return "uintBitsToFloat(uint(" + lo + "))";
    case DType::I64:
      return "int64_t((uint64_t(uint(" + hi + ")) << 32) | uint64_t(uint(" + lo + ")))";
    case DType::Bool:
      return "(" + lo + " != 0)";
    default:
      return std::string(compute(dt)) + "(" + lo + ")";
  }
}

const char* header() {
  return R"(#version 450
#extension GL_EXT_shader_explicit_arithmetic_types : enable
#extension GL_EXT_shader_16bit_storage : enable
#extension GL_EXT_shader_8bit_storage : enable
)";
}

// Round to nearest even into bf16 (NaN stays a quiet NaN of its sign).
const char* bf16_helpers() {
  return R"(uint16_t em_to_bf16(float f) {
  uint u = floatBitsToUint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t(((u >> 16) & 0x8000u) | 0x7fc0u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}
)";
}

// The prelude for compute type C of dtype dt: C, U, the limits and the m_<fn> / em_<fn>
// functions the GLSL dialect calls, each with the C library's values at zeros, infinities
// and NaN (GLSL leaves many of those undefined).
std::string prelude(DType dt) {
  std::string p;
  p += std::string("#define C ") + compute(dt) + "\n#define U " + wrapping(dt) + "\n";
  const Kind k = kind_of(dt);
  if (k == Kind::Bool) return p + "#define EM_LOWEST false\n#define EM_HIGHEST true\n";
  if (k == Kind::Int) {
    const bool is_signed = dt != DType::U8;
    const int bits = static_cast<int>(size_of(dt)) * 8;
    switch (dt) {
      case DType::I64:
        p += "#define EM_LOWEST int64_t(0x8000000000000000ul)\n"
             "#define EM_HIGHEST int64_t(0x7ffffffffffffffful)\n";
        break;
      case DType::I32:
        p += "#define EM_LOWEST int(0x80000000u)\n#define EM_HIGHEST int(0x7fffffff)\n";
        break;
      case DType::I16:
        p += "#define EM_LOWEST int16_t(-32768)\n#define EM_HIGHEST int16_t(32767)\n";
        break;
      case DType::I8:
        p += "#define EM_LOWEST int8_t(-128)\n#define EM_HIGHEST int8_t(127)\n";
        break;
      default:
        p += "#define EM_LOWEST uint8_t(0)\n#define EM_HIGHEST uint8_t(255)\n";
        break;
    }
    p += "#define EM_BITS " + std::to_string(bits) + "\n";
    p += is_signed ? "#define EM_SIGNED 1\n" : "#define EM_SIGNED 0\n";
    // Kernels that check divisors bind the context's error word and define this.
    p += "#ifndef EM_FLAG_DIV0\n#define EM_FLAG_DIV0()\n#endif\n";
    p += R"(C em_idiv(C a, C b) {
  if (b == C(0)) {
    EM_FLAG_DIV0();
    return C(0);
  }
#if EM_SIGNED
  if (b == C(-1)) return C(U(0) - U(a));
#endif
  return C(a / b);
}
C em_imod(C a, C b) {
  if (b == C(0)) {
    EM_FLAG_DIV0();
    return C(0);
  }
#if EM_SIGNED
  if (b == C(-1)) return C(0);
#endif
  return C(U(a) - U(C(a / b)) * U(b));
}
C em_shl(C a, C b) {
  if (b < C(0) || b >= C(EM_BITS)) return C(0);
  return C(U(a) << int(b));
}
C em_shr(C a, C b) {
  if (b < C(0) || b >= C(EM_BITS)) return a < C(0) ? C(-1) : C(0);
  return C(a >> int(b));
}
)";
    return p;
  }
  // Floats.
  if (dt == DType::F64) {
    p += "#define EM_INF packDouble2x32(uvec2(0u, 0x7ff00000u))\n"
         "#define EM_NAN packDouble2x32(uvec2(0u, 0x7ff80000u))\n";
  } else {
    p += "#define EM_INF uintBitsToFloat(0x7f800000u)\n"
         "#define EM_NAN uintBitsToFloat(0x7fc00000u)\n";
  }
  p += "#define EM_LOWEST (-EM_INF)\n#define EM_HIGHEST EM_INF\n";
  // A zero the compiler cannot fold away (x + EM_ZERO must turn -0 into +0): the last
  // argument word, which Context::dispatch appends to every kernel's arguments as 0.
  p += "#define EM_ZERO C(arg[arg.length() - 1])\n";
  // The functions GLSL has for double too.
  p += R"(bool em_isnan(C x) { return isnan(x); }
C m_fabs(C x) { return abs(x); }
C m_sqrt(C x) { return x < C(0) ? EM_NAN : sqrt(x); }
C m_floor(C x) { return floor(x); }
C m_ceil(C x) { return ceil(x); }
C m_rint(C x) { return roundEven(x); }
C m_trunc(C x) { return trunc(x); }
C m_fmod(C x, C y) {
  if (isnan(x) || isnan(y) || isinf(x) || y == C(0)) return EM_NAN;
  if (isinf(y)) return x;
  C ax = abs(x), ay = abs(y);
  C r = ax - ay * trunc(ax / ay);
  if (r >= ay) r -= ay;
  if (r < C(0)) r += ay;
  return x < C(0) ? -r : r;
}
)";
  if (dt == DType::F64) return p;
  p += R"(float m_exp(float x) {
  if (isnan(x)) return x;
  if (x > 88.8) return EM_INF;
  if (x < -104.0) return 0.0;
  return exp(x);
}
float m_log(float x) {
  if (isnan(x) || x < 0.0) return EM_NAN;
  if (x == 0.0) return -EM_INF;
  if (isinf(x)) return x;
  return log(x);
}
float m_log1p(float x) {
  if (isnan(x) || x < -1.0) return EM_NAN;
  if (x == -1.0) return -EM_INF;
  if (isinf(x)) return x;
  float u = 1.0 + x;
  if (u == 1.0) return x;
  return log(u) * (x / (u - 1.0));
}
float m_expm1(float x) {
  if (isnan(x)) return x;
  if (x > 88.8) return EM_INF;
  if (x < -30.0) return -1.0;
  if (abs(x) < 1e-5) return x + 0.5 * x * x;
  float u = exp(x);
  if (u == 1.0) return x;
  float um1 = u - 1.0;
  if (um1 == -1.0) return -1.0;
  return um1 * (x / log(u));
}
float m_sin(float x) { return isinf(x) ? EM_NAN : sin(x); }
float m_cos(float x) { return isinf(x) ? EM_NAN : cos(x); }
float m_tan(float x) { return isinf(x) ? EM_NAN : tan(x); }
float m_sinh(float x) {
  float a = abs(x);
  if (isnan(x) || a == 0.0) return x;
  float r;
  if (a < 1.0) {
    float e = m_expm1(a);
    r = 0.5 * (e + e / (e + 1.0));
  } else {
    float e = m_exp(a - 0.69314718055994531);
    r = e - 0.25 / e;
  }
  return x < 0.0 ? -r : r;
}
float m_cosh(float x) {
  float a = abs(x);
  if (isnan(x)) return x;
  float e = m_exp(a - 0.69314718055994531);
  return e + 0.25 / e;
}
float m_tanh(float x) {
  float a = abs(x);
  if (isnan(x) || a == 0.0) return x;
  float r;
  if (a > 20.0) {
    r = 1.0;
  } else {
    float e = m_expm1(2.0 * a);
    r = e / (e + 2.0);
  }
  return x < 0.0 ? -r : r;
}
// asin and acos through atan (GLSL's own may be coarse): accurate to a few ulp.
float m_asin(float x) {
  if (isnan(x) || abs(x) > 1.0) return EM_NAN;
  if (x == 0.0) return x;
  return atan(x, sqrt((1.0 - x) * (1.0 + x)));
}
float m_acos(float x) {
  if (isnan(x) || abs(x) > 1.0) return EM_NAN;
  return 2.0 * atan(sqrt(1.0 - x), sqrt(1.0 + x));
}
float m_atan(float x) {
  if (isinf(x)) return x > 0.0 ? 1.5707963267948966 : -1.5707963267948966;
  return atan(x);
}
float m_atan2(float y, float x) {
  if (isnan(x) || isnan(y)) return x + y;
  const float pi = 3.14159265358979323846;
  bool xneg = x < 0.0 || (x == 0.0 && (floatBitsToUint(x) >> 31) != 0u);
  float sy = (floatBitsToUint(y) >> 31) != 0u ? -1.0 : 1.0;
  if (y == 0.0) return xneg ? sy * pi : y;
  if (isinf(x) && isinf(y)) return sy * (xneg ? 0.75 * pi : 0.25 * pi);
  if (isinf(x)) return xneg ? sy * pi : sy * 0.0;
  if (isinf(y) || x == 0.0) return sy * 0.5 * pi;
  return atan(y, x);
}
// erfc for x >= 0 as exp(-x^2) times a rational fit in t = 1 / (1 + x / 2) (fractional
// error below 1.2e-7); erf near zero from its Taylor series.
float em_erfc_pos(float z) {
  float t = 1.0 / (1.0 + 0.5 * z);
  float poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 +
      t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 +
      t * (-0.82215223 + t * 0.17087277))))))));
  return t * m_exp(-z * z + poly);
}
float m_erf(float x) {
  if (isnan(x)) return x;
  float a = abs(x);
  float r;
  if (a < 0.5) {
    float x2 = x * x;
    float s = 1.0 + x2 * (-1.0 / 3.0 + x2 * (1.0 / 10.0 + x2 * (-1.0 / 42.0 + x2 * (1.0 / 216.0 +
        x2 * (-1.0 / 1320.0 + x2 * (1.0 / 9360.0))))));
    return x * 1.1283791670955126 * s;
  }
  r = a > 10.0 ? 1.0 : 1.0 - em_erfc_pos(a);
  return x < 0.0 ? -r : r;
}
float m_erfc(float x) {
  if (isnan(x)) return x;
  if (x < 0.5) return 1.0 - m_erf(x);
  if (x > 10.5) return 0.0;
  return em_erfc_pos(x);
}
float m_pow(float x, float y) {
  if (y == 0.0 || x == 1.0) return 1.0;
  if (isnan(x) || isnan(y)) return x + y;
  float ay = abs(y);
  bool yint = trunc(y) == y;
  bool yodd = yint && ay < 16777216.0 && mod(ay, 2.0) == 1.0;
  if (isinf(y)) {
    float ax = abs(x);
    if (ax == 1.0) return 1.0;
    return ((ax > 1.0) == (y > 0.0)) ? EM_INF : 0.0;
  }
  if (x == 0.0) {
    if (y < 0.0) return yodd ? 1.0 / x : EM_INF;
    return yodd ? x : 0.0;
  }
  if (isinf(x)) {
    float r = (x > 0.0) == (y > 0.0) || (x < 0.0 && y > 0.0) ? EM_INF : 0.0;
    if (x > 0.0) return y > 0.0 ? EM_INF : 0.0;
    r = y > 0.0 ? EM_INF : 0.0;
    return yodd ? -r : r;
  }
  if (x < 0.0) {
    if (!yint) return EM_NAN;
    float r = pow(-x, y);
    return yodd ? -r : r;
  }
  return pow(x, y);
}
)";
  return p;
}

std::string buffers_decl(const std::vector<std::pair<std::string, DType>>& bufs) {
  std::string s = "layout(std430, binding = 0) readonly buffer Args { int arg[]; };\n";
  int b = 1;
  for (const auto& [name, dt] : bufs) {
    s += "layout(std430, binding = " + std::to_string(b) + ") buffer B" + std::to_string(b) +
         " { " + storage(dt) + " " + name + "[]; };\n";
    ++b;
  }
  return s;
}

std::string local_decl(std::uint32_t n) {
  return "layout(local_size_x = " + std::to_string(n) + ") in;\n";
}

// The flat thread index over a 2-d grid of kLocal-thread groups.
const char* thread_index() {
  return "  int i = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * "
         "int(gl_WorkGroupSize.x) + int(gl_LocalInvocationID.x);\n";
}

// The body shared by every element-wise kernel: offsets of the output (o0) and of each
// input (o1..) unravelled from the output's index.
std::string map_offsets(int inputs) {
  std::string s = thread_index();
  s += "  if (i >= arg[0]) return;\n";
  for (int j = 0; j <= inputs; ++j) {
    s += "  int o" + std::to_string(j) + " = arg[" + std::to_string(kMapOperand + j * kMapStride) +
         "];\n";
  }
  s += "  int r = i;\n  for (int d = arg[1] - 1; d >= 0; --d) {\n"
       "    int e = arg[2 + d];\n    int c = r % e;\n    r /= e;\n";
  for (int j = 0; j <= inputs; ++j) {
    s += "    o" + std::to_string(j) + " += c * arg[" +
         std::to_string(kMapOperand + j * kMapStride + 1) + " + d];\n";
  }
  s += "  }\n";
  return s;
}

// An element-wise kernel's input: `type var = load(dt, buf[o<operand>])`.
struct MapLoad {
  int operand;
  std::string type, var, buf;
  DType dt;
  bool raw = false;  // the storage element itself (copies), not its compute value
};

// Note [Linear walk]: the strided walk unravels each element's index into every operand's
// offset, a division and a remainder per dim per element, and each thread has one load in
// flight per input. Where, after collapsing, every operand is one contiguous run from its
// offset (or a broadcast scalar) and the output is contiguous, the linear walk drops the
// index math and gives each thread kMapUnroll elements kLocal apart (each warp's accesses
// stay contiguous), loading all of them before computing any, so a bandwidth-bound kernel
// keeps kMapUnroll times the bytes in flight. Each element is computed by the same printed
// expression, so both walks give the same bits.
//
// main() of an element-wise kernel over `operands` operands (outputs first; their offsets
// o<j>), loading `loads` and then running `body` (which stores through the output offsets),
// after `prologue` (the parameters). lin == 0: the strided walk (map_offsets). Otherwise
// (Note [Linear walk]) every operand is contiguous from its offset or, where bit j of
// lin >> 1 is set, a broadcast scalar (stride 0): each thread takes kMapUnroll elements
// kLocal apart, all loads issued before any arithmetic on a full block, no index math.
std::string map_main(int operands, const std::vector<MapLoad>& loads, const std::string& prologue,
                     const std::string& body, std::uint32_t lin) {
  std::string s = "void main() {\n";
  const auto ld = [](const MapLoad& l, const std::string& suffix, const std::string& off) {
    const std::string e = l.buf + "[" + off + "]";
    return "  " + l.type + " " + l.var + suffix + " = " + (l.raw ? e : load(l.dt, e)) + ";\n";
  };
  if (lin == 0) {
    s += map_offsets(operands - 1) + prologue;
    for (const MapLoad& l : loads) s += ld(l, "", "o" + std::to_string(l.operand));
    return s + body + "}\n";
  }
  const std::string L = std::to_string(kLocal), U = std::to_string(kMapUnroll);
  s += "  int n = arg[0];\n"
       "  int i0 = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x) * " +
       std::to_string(kLocal * kMapUnroll) + " + int(gl_LocalInvocationID.x);\n";
  const auto scalar = [&](int j) { return j < 31 && ((lin >> (j + 1)) & 1u) != 0; };
  for (int j = 0; j < operands; ++j) {
    s += "  int b" + std::to_string(j) + " = arg[" + std::to_string(kMapOperand + j * kMapStride) +
         "];\n";
  }
  s += prologue;
  const auto off = [&](int j, const std::string& i) {
    std::string o = "b";
    o.append(std::to_string(j));
    if (!scalar(j)) o.append(" + ").append(i);
    return o;
  };
  const auto offsets = [&](const std::string& i) {
    std::string o;
    for (int j = 0; j < operands; ++j)
      o += "    int o" + std::to_string(j) + " = " + off(j, i) + ";\n";
    return o;
  };
  // A full block: every load first, then the arithmetic and the stores.
  s += "  if (i0 + " + std::to_string(kLocal * (kMapUnroll - 1)) + " < n) {\n";
  const auto at = [](int u) {
    std::string i = "i0 + ";
    return i.append(std::to_string(u * static_cast<int>(kLocal)));
  };
  const auto tag = [](int u) {
    std::string t = "_";
    return t.append(std::to_string(u));
  };
  for (int u = 0; u < kMapUnroll; ++u) {
    for (const MapLoad& l : loads) s += "  " + ld(l, tag(u), off(l.operand, at(u)));
  }
  for (int u = 0; u < kMapUnroll; ++u) {
    s += "   {\n    int i = " + at(u) + ";\n" + offsets(at(u));
    for (const MapLoad& l : loads)
      s += "    " + l.type + " " + l.var + " = " + l.var + tag(u) + ";\n";
    s += body + "   }\n";
  }
  // The last block: element by element, within n.
  s += "  } else {\n   for (int u = 0; u < " + U + "; ++u) {\n    int i = i0 + u * " + L +
       ";\n    if (i >= n) break;\n" + offsets("i");
  for (const MapLoad& l : loads) s += "  " + ld(l, "", "o" + std::to_string(l.operand));
  s += body + "   }\n  }\n}\n";
  return s;
}

// The key suffix of a walk (map_main's lin).
std::string lin_tag(std::uint32_t lin) {
  if (lin == 0) return "";
  return ".lin" + ((lin >> 1) != 0 ? ".s" + std::to_string(lin >> 1) : std::string());
}

std::string params(DType dt) {
  return "  C p0 = " +
         from_words(dt, "arg[" + std::to_string(kMapParams) + "]",
                    "arg[" + std::to_string(kMapParams + 1) + "]") +
         ";\n  C p1 = " +
         from_words(dt, "arg[" + std::to_string(kMapParams + 2) + "]",
                    "arg[" + std::to_string(kMapParams + 3) + "]") +
         ";\n";
}

// Whether e divides integers: its kernel reports a zero divisor (kErrorDivisionByZero).
bool divides_ints(const sx::Expr& e, DType dt) {
  if (kind_of(dt) != Kind::Int) return false;
  for (int i = 0; i < e.size; ++i) {
    if (e[i].op == sx::Op::Div || e[i].op == sx::Op::Mod) return true;
  }
  return false;
}

std::string gen_fn(const sx::Expr& e, DType dt, DType out, int inputs, std::uint32_t lin) {
  std::vector<std::pair<std::string, DType>> bufs = {{"y", out}, {"x0", dt}};
  if (inputs == 2) bufs.push_back({"x1", dt});
  std::string s = header() + local_decl(kLocal) + buffers_decl(bufs);
  if (divides_ints(e, dt)) {
    s += "layout(std430, binding = " + std::to_string(bufs.size() + 1) +
         ") buffer Err { int em_err[]; };\n#define EM_FLAG_DIV0() em_err[0] = " +
         std::to_string(kErrorDivisionByZero) + "\n";
  }
  s += prelude(dt) + bf16_helpers();
  std::vector<MapLoad> loads = {{1, "C", "a", "x0", dt}};
  if (inputs == 2) loads.push_back({2, "C", "b", "x1", dt});
  const sx::Printed pr = sx::print(e, sx::Dialect::Glsl, dt, {}, "  ");
  std::string body = pr.statements;
  if (kind_of(out) == Kind::Float) {
    // `precise`: no reassociation or algebraic folding (x + 0 stays, so -0 becomes +0; no
    // contraction into fma), as the expressions are defined.
    body += std::string(tuned("noprecise") ? "  " : "  precise ") + "C res = " + pr.value +
            ";\n  y[o0] = " + store(out, "res") + ";\n";
  } else {
    body += "  y[o0] = " + store(out, pr.value) + ";\n";
  }
  return s + map_main(inputs + 1, loads, params(dt), body, lin);
}

std::string gen_where(DType dt, std::uint32_t lin) {
  const std::string s_ = header() + local_decl(kLocal) +
                         buffers_decl({{"y", dt}, {"x0", DType::Bool}, {"x1", dt}, {"x2", dt}}) +
                         prelude(dt) + bf16_helpers();
  return s_ + map_main(4,
                       {{1, "bool", "c", "x0", DType::Bool},
                        {2, storage(dt), "va", "x1", dt, true},
                        {3, storage(dt), "vb", "x2", dt, true}},
                       "", "  y[o0] = c ? va : vb;\n", lin);
}

std::string gen_copy(DType dt, std::uint32_t lin) {
  return header() + local_decl(kLocal) + buffers_decl({{"y", dt}, {"x0", dt}}) +
         map_main(2, {{1, storage(dt), "v", "x0", dt, true}}, "", "  y[o0] = v;\n", lin);
}

// The value v (of `from`'s compute type) converted to `to`'s compute type, as
// convert_elements on the host: integers wrap, floats to integers saturate (NaN: 0),
// anything to bool is v != 0.
std::string convert(DType from, DType to, const std::string& v) {
  const Kind kf = kind_of(from), kt = kind_of(to);
  const std::string tc = compute(to);
  if (kt == Kind::Bool) {
    if (kf == Kind::Bool) return v;
    return "(" + v + " != " + compute(from) + "(0))";
  }
  if (kf == Kind::Bool) return "(" + v + " ? " + tc + "(1) : " + tc + "(0))";
  if (kf == Kind::Float && kt == Kind::Int) {
    double lo = 0, hi = 0;
    switch (to) {
      case DType::I64:
        lo = -9223372036854775808.0, hi = 9223372036854775807.0;
        break;
      case DType::I32:
        lo = -2147483648.0, hi = 2147483647.0;
        break;
      case DType::I16:
        lo = -32768, hi = 32767;
        break;
      case DType::I8:
        lo = -128, hi = 127;
        break;
      default:
        lo = 0, hi = 255;
        break;
    }
    const std::string fc = compute(from);
    const std::string suffix = from == DType::F64 ? "lf" : "";
    char los[64], his[64];
    std::snprintf(los, sizeof los, "%.1f%s", lo, suffix.c_str());
    std::snprintf(his, sizeof his, "%.1f%s", hi, suffix.c_str());
    return "(isnan(" + v + ") ? " + tc + "(0) : " + v + " <= " + fc + "(" + los +
           ") ? EMT_LOWEST : " + v + " >= " + fc + "(" + his + ") ? EMT_HIGHEST : " + tc + "(" + v +
           "))";
  }
  return tc + "(" + v + ")";
}

std::string target_limits(DType to) {
  // The target's limits for saturating conversions (EMT_: the prelude's C is the source).
  switch (to) {
    case DType::I64:
      return "#define EMT_LOWEST int64_t(0x8000000000000000ul)\n"
             "#define EMT_HIGHEST int64_t(0x7ffffffffffffffful)\n";
    case DType::I32:
      return "#define EMT_LOWEST int(0x80000000u)\n#define EMT_HIGHEST int(0x7fffffff)\n";
    case DType::I16:
      return "#define EMT_LOWEST int16_t(-32768)\n#define EMT_HIGHEST int16_t(32767)\n";
    case DType::I8:
      return "#define EMT_LOWEST int8_t(-128)\n#define EMT_HIGHEST int8_t(127)\n";
    case DType::U8:
      return "#define EMT_LOWEST uint8_t(0)\n#define EMT_HIGHEST uint8_t(255)\n";
    default:
      return "";
  }
}

std::string gen_cast(DType from, DType to, std::uint32_t lin) {
  std::string s = header() + local_decl(kLocal) + buffers_decl({{"y", to}, {"x0", from}}) +
                  target_limits(to) + bf16_helpers();
  return s + map_main(2, {{1, compute(from), "v", "x0", from}}, "",
                      "  y[o0] = " + store(to, convert(from, to, "v")) + ";\n", lin);
}

std::string gen_fill(DType dt) {
  std::string s =
      header() + local_decl(kLocal) + buffers_decl({{"y", dt}}) + prelude(dt) + bf16_helpers();
  s += "void main() {\n" + std::string(thread_index()) + "  if (i >= arg[0]) return;\n";
  s += "  C v = " + from_words(dt, "arg[1]", "arg[2]") + ";\n";
  s += "  y[i] = " + store(dt, "v") + ";\n}\n";
  return s;
}

// start + i * step in f64, converted as the host converts a double.
std::string gen_arange(DType dt) {
  std::string s = header() + local_decl(kLocal) + buffers_decl({{"y", dt}}) + target_limits(dt) +
                  bf16_helpers();
  s += "void main() {\n" + std::string(thread_index()) + "  if (i >= arg[0]) return;\n";
  s += "  double start = " + from_words(DType::F64, "arg[1]", "arg[2]") + ";\n";
  s += "  double step = " + from_words(DType::F64, "arg[3]", "arg[4]") + ";\n";
  s += "  double v = start + double(i) * step;\n";
  s += "  y[i] = " + store(dt, convert(DType::F64, dt, "v")) + ";\n}\n";
  return s;
}

// Kernels over lines of x ([outer, n, inner], contiguous, at offset arg[3]; arg[0] lines,
// arg[1] n, arg[2] inner). `group` false: one thread walks each line (short lines); true: a
// workgroup of kLocal threads shares each line, each thread folding a strided part and the
// parts meeting in a tree in shared memory (long lines: every thread's loop stays short,
// which lavapipe needs, as it caps a loop at 65535 iterations).
std::string line_head(bool group) {
  std::string s;
  if (group) {
    s += "  int line = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);\n"
         "  if (line >= arg[0]) return;\n  int t = int(gl_LocalInvocationID.x);\n";
  } else {
    s += std::string(thread_index()) + "  int line = i;\n  if (line >= arg[0]) return;\n";
  }
  s += "  int n = arg[1], inner = arg[2];\n"
       "  int base = (line / inner) * n * inner + (line % inner);\n  int xo = arg[3] + base;\n";
  return s;
}
// The loop over a thread's elements k of the line, running `body` with `type v` = ld(k).
// A workgroup's thread walks k = t, t + kLocal, ...: kMapUnroll elements an iteration,
// loaded before the body runs for each in order (the same order and values as one at a
// time, with kMapUnroll loads in flight), then the rest one by one.
std::string each(bool group, const std::string& type,
                 const std::function<std::string(const std::string&)>& ld,
                 const std::string& body) {
  if (!group)
    return "  for (int k = 0; k < n; ++k) {\n    " + type + " v = " + ld("k") + ";\n" + body +
           "  }\n";
  if (tuned("lineloop1")) {
    return "  for (int k = t; k < n; k += " + std::to_string(kLocal) + ") {\n    " + type +
           " v = " + ld("k") + ";\n" + body + "  }\n";
  }
  const int L = static_cast<int>(kLocal);
  const auto at = [&](int u) {
    std::string k = "k0 + ";
    return k.append(std::to_string(u * L));
  };
  const auto var = [](int u) {
    std::string v = "v_";
    return v.append(std::to_string(u));
  };
  std::string s = "  {\n  int k0 = t;\n  for (; k0 + " + std::to_string(L * (kMapUnroll - 1)) +
                  " < n; k0 += " + std::to_string(L * kMapUnroll) + ") {\n";
  for (int u = 0; u < kMapUnroll; ++u)
    s += "    " + type + " " + var(u) + " = " + ld(at(u)) + ";\n";
  for (int u = 0; u < kMapUnroll; ++u) {
    s += "   {\n    int k = " + at(u) + ";\n    " + type + " v = " + var(u) + ";\n" + body +
         "   }\n";
  }
  s += "  }\n  for (; k0 < n; k0 += " + std::to_string(L) + ") {\n    int k = k0;\n    " + type +
       " v = " + ld("k") + ";\n" + body + "  }\n  }\n";
  return s;
}
// Note [Cached lines]: a line of at most kLocal * kLineCache elements is loaded once into
// each thread's registers (xv[u] = element t + u * kLocal), and every later pass over it
// (softmax's max, sum and outputs; layer norm's three sums and outputs) reads them there,
// so the kernel reads x once instead of three or four times. Each thread visits its
// elements in the same order as each()'s group walk, so the results are the same bits.
std::string cache_line(const std::string& type,
                       const std::function<std::string(const std::string&)>& ld) {
  const std::string L = std::to_string(kLocal), R = std::to_string(kLineCache);
  return "  " + type + " xv[" + R + "];\n  for (int u = 0; u < " + R +
         "; ++u) {\n    int k = t + u * " + L + ";\n    xv[u] = k < n ? " + ld("k") + " : " + type +
         "(0);\n  }\n";
}
// each() over the cached line (cache_line): body with `int k` and `type v`.
std::string each_cached(const std::string& type, const std::string& body) {
  const std::string L = std::to_string(kLocal), R = std::to_string(kLineCache);
  return "  for (int u = 0; u < " + R + "; ++u) {\n    int k = t + u * " + L +
         ";\n    if (k >= n) break;\n    " + type + " v = xv[u];\n" + body + "  }\n";
}

// A tree over sh[0, kLocal) combining sh[t] with sh[t + s] by `combine` (statements over
// `a`, `b` that set `r`).
std::string tree(const std::string& var, const std::string& combine) {
  return "  " + var + "[t] = part;\n  barrier();\n  for (int s = " + std::to_string(kLocal / 2) +
         "; s > 0; s >>= 1) {\n    if (t < s) {\n      C a = " + var + "[t], b = " + var +
         "[t + s];\n" + combine + "      " + var + "[t] = r;\n    }\n    barrier();\n  }\n";
}

std::string gen_reduce(ir::ReduceFn fn, DType dt, bool group) {
  using ir::ReduceFn;
  const DType out = ir::reduce_dtype(fn, dt);
  std::string s = header() + local_decl(kLocal) + buffers_decl({{"y", out}, {"x0", dt}});
  const bool logical = fn == ReduceFn::Any || fn == ReduceFn::All;
  const bool arg = fn == ReduceFn::ArgMax || fn == ReduceFn::ArgMin;
  const DType acc_t = logical ? DType::Bool : dt;
  s += prelude(acc_t) + bf16_helpers();
  if (arg) {
    const bool max = fn == ReduceFn::ArgMax;
    const bool flt = kind_of(dt) == Kind::Float;
    const std::string vt = dt == DType::Bool ? "int" : compute(dt);
    // Whether (v, i) replaces (best, at): the first NaN wins, then strictly better values,
    // then the lower index among equals; at < 0: nothing yet.
    s += "bool em_take(" + vt + " v, int i, " + vt +
         " best, int at) {\n"
         "  if (i < 0) return false;\n  if (at < 0) return true;\n";
    if (flt) s += "  if (isnan(best)) return isnan(v) && i < at;\n  if (isnan(v)) return true;\n";
    s += "  if (v == best) return i < at;\n  return v " + std::string(max ? ">" : "<") +
         " best;\n}\n";
    if (group)
      s += "shared " + vt + " shv[" + std::to_string(kLocal) + "];\nshared int shi[" +
           std::to_string(kLocal) + "];\n";
    s += "void main() {\n" + line_head(group);
    const auto ld = [&](const std::string& k) {
      const std::string e = "x0[xo + " + k + " * inner]";
      return dt == DType::Bool ? "int(" + e + ")" : load(dt, e);
    };
    s += "  " + vt + " best = " + vt + "(0);\n  int at = -1;\n";
    s += each(group, vt, ld, "    if (em_take(v, k, best, at)) { best = v; at = k; }\n");
    if (group) {
      s += "  shv[t] = best;\n  shi[t] = at;\n  barrier();\n  for (int s = " +
           std::to_string(kLocal / 2) +
           "; s > 0; s >>= 1) {\n    if (t < s && em_take(shv[t + s], shi[t + s], shv[t], shi[t])) "
           "{\n"
           "      shv[t] = shv[t + s];\n      shi[t] = shi[t + s];\n    }\n    barrier();\n  }\n"
           "  if (t == 0) y[line] = int64_t(max(shi[0], 0));\n}\n";
    } else {
      s += "  y[line] = int64_t(max(at, 0));\n}\n";
    }
    return s;
  }
  const sx::ReduceDef def = sx::reduction(fn);
  const sx::Expr& combine = sx::expr(sx::def(def.combine), kind_of(acc_t));
  const sx::Printed id = sx::print(def.identity, sx::Dialect::Glsl, acc_t, {}, "  ");
  const sx::Printed step = sx::print(combine, sx::Dialect::Glsl, acc_t, {"part", "v"}, "    ");
  const sx::Printed ab = sx::print(combine, sx::Dialect::Glsl, acc_t, {"a", "b"}, "      ", "u");
  const auto ld = [&](const std::string& k) {
    const std::string e = load(dt, "x0[xo + " + k + " * inner]");
    return logical ? convert(dt, DType::Bool, e) : e;
  };
  if (group) s += "shared C sh[" + std::to_string(kLocal) + "];\n";
  s += "void main() {\n" + line_head(group);
  s += id.statements + "  C part = " + id.value + ";\n";
  s += each(group, "C", ld, step.statements + "    part = " + step.value + ";\n");
  std::string result = "part";
  if (group) {
    s += tree("sh", ab.statements + "      C r = " + ab.value + ";\n");
    s += "  if (t != 0) return;\n";
    result = "sh[0]";
  }
  if (fn == ReduceFn::Mean) result = "(" + result + " / C(n))";
  s += "  y[line] = " + store(out, result) + ";\n}\n";
  return s;
}

// Inclusive scans. group: each thread takes a contiguous chunk of the line; the chunks'
// totals are scanned by thread 0, then each thread rescans its chunk from its prefix.
std::string gen_scan(ir::ScanFn fn, DType dt, bool group) {
  const sx::ReduceDef def = sx::reduction(sx::as_reduce(fn));
  const sx::Expr& combine = sx::expr(sx::def(def.combine), kind_of(dt));
  std::string s = header() + local_decl(kLocal) + buffers_decl({{"y", dt}, {"x0", dt}}) +
                  prelude(dt) + bf16_helpers();
  if (group) s += "shared C sh[" + std::to_string(kLocal) + "];\n";
  s += "void main() {\n" + line_head(group);
  const sx::Printed id = sx::print(def.identity, sx::Dialect::Glsl, dt, {}, "  ");
  const sx::Printed st = sx::print(combine, sx::Dialect::Glsl, dt, {"acc", "v"}, "    ");
  const sx::Printed pre = sx::print(combine, sx::Dialect::Glsl, dt, {"acc", "p"}, "      ", "u");
  const std::string x = load(dt, "x0[xo + k * inner]");
  const std::string fold =
      "    C v = " + x + ";\n" + st.statements + "    acc = " + st.value + ";\n";
  s += id.statements;
  if (!group) {
    s += "  C acc = " + id.value + ";\n  for (int k = 0; k < n; ++k) {\n" + fold +
         "    y[base + k * inner] = " + store(dt, "acc") + ";\n  }\n}\n";
    return s;
  }
  const std::string L = std::to_string(kLocal);
  s += "  int chunk = (n + " + L + " - 1) / " + L +
       ";\n"
       "  int k0 = t * chunk, k1 = min(n, k0 + chunk);\n";
  s += "  C acc = " + id.value + ";\n  for (int k = k0; k < k1; ++k) {\n" + fold + "  }\n";
  s += "  sh[t] = acc;\n  barrier();\n  if (t == 0) {\n    C acc = " + id.value +
       ";\n    for (int j = 0; j < " + L + "; ++j) {\n      C p = sh[j];\n      sh[j] = acc;\n" +
       pre.statements + "      acc = " + pre.value + ";\n    }\n  }\n  barrier();\n";
  s += "  acc = sh[t];\n  for (int k = k0; k < k1; ++k) {\n" + fold +
       "    y[base + k * inner] = " + store(dt, "acc") + ";\n  }\n}\n";
  return s;
}

// Softmax: the max, the sum of exponentials, then the outputs.
std::string gen_softmax(DType dt, bool log, bool group, bool cached) {
  std::string s = header() + local_decl(kLocal) + buffers_decl({{"y", dt}, {"x0", dt}}) +
                  prelude(dt) + bf16_helpers();
  if (group) s += "shared C sh[" + std::to_string(kLocal) + "];\n";
  s += "void main() {\n" + line_head(group);
  const auto ld = [&](const std::string& k) { return load(dt, "x0[xo + " + k + " * inner]"); };
  if (cached) s += cache_line("C", ld);
  const auto each = [&](bool g, const std::string& type,
                        const std::function<std::string(const std::string&)>& l,
                        const std::string& body) {
    return cached ? each_cached(type, body) : vulkan::each(g, type, l, body);
  };
  const auto& x = ld;
  s += "  C part = -EM_INF;\n" +
       each(group, "C", x, "    part = (isnan(v) || v > part) ? v : part;\n");
  if (group) {
    s += tree("sh", "      C r = (isnan(b) || b > a) ? b : a;\n") +
         "  part = sh[0];\n  barrier();\n";
  }
  s += "  C m = part;\n  part = C(0);\n" + each(group, "C", x, "    part += m_exp(v - m);\n");
  if (group) s += tree("sh", "      C r = a + b;\n") + "  part = sh[0];\n";
  s += "  C sum = part;\n";
  if (log) {
    s += "  C ls = m_log(sum);\n" +
         each(group, "C", x, "    y[base + k * inner] = " + store(dt, "v - m - ls") + ";\n") +
         "}\n";
  } else {
    s += each(group, "C", x,
              "    y[base + k * inner] = " + store(dt, "m_exp(v - m) / sum") + ";\n") +
         "}\n";
  }
  return s;
}

// Layer norm over rows of n (arg[0] rows, arg[1] n, arg[2] x offset, arg[3..5) eps): the
// mean, the biased variance (two passes), then the outputs.
std::string gen_layer_norm(DType dt, bool weight, bool bias, bool group, bool cached) {
  std::vector<std::pair<std::string, DType>> bufs = {{"y", dt}, {"x0", dt}};
  if (weight) bufs.push_back({"w", dt});
  if (bias) bufs.push_back({"bb", dt});
  std::string s = header() + local_decl(kLocal) + buffers_decl(bufs) + prelude(dt) + bf16_helpers();
  if (group) s += "shared C sh[" + std::to_string(kLocal) + "];\n";
  s += "void main() {\n";
  if (group) {
    s += "  int line = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);\n"
         "  if (line >= arg[0]) return;\n  int t = int(gl_LocalInvocationID.x);\n";
  } else {
    s += std::string(thread_index()) + "  int line = i;\n  if (line >= arg[0]) return;\n";
  }
  s += "  int n = arg[1];\n  int xo = arg[2] + line * n;\n";
  s += "  C eps = " + from_words(dt, "arg[3]", "arg[4]") + ";\n";
  const auto x = [&](const std::string& k) { return load(dt, "x0[xo + " + k + "]"); };
  if (cached) s += cache_line("C", x);
  const auto each = [&](bool g, const std::string& type,
                        const std::function<std::string(const std::string&)>& l,
                        const std::string& body) {
    return cached ? each_cached(type, body) : vulkan::each(g, type, l, body);
  };
  s += "  C part = C(0);\n" + each(group, "C", x, "    part += v;\n");
  if (group) s += tree("sh", "      C r = a + b;\n") + "  part = sh[0];\n  barrier();\n";
  // A second pass corrects the mean by the mean of x - mean (the first sum's rounding).
  s += "  C mean = part / C(n);\n  part = C(0);\n" + each(group, "C", x, "    part += v - mean;\n");
  if (group) s += tree("sh", "      C r = a + b;\n") + "  part = sh[0];\n  barrier();\n";
  s += "  mean += part / C(n);\n  part = C(0);\n" +
       each(group, "C", x, "    C d = v - mean;\n    part += d * d;\n");
  if (group) s += tree("sh", "      C r = a + b;\n") + "  part = sh[0];\n";
  s += "  C rstd = C(1) / sqrt(part / C(n) + eps);\n";
  std::string v = "(v - mean) * rstd";
  if (weight) v = "(" + v + ") * " + load(dt, "w[k]");
  if (bias) v = "(" + v + ") + " + load(dt, "bb[k]");
  s += each(group, "C", x, "    y[line * n + k] = " + store(dt, v) + ";\n") + "}\n";
  return s;
}

// Both matmul kernels' start: a's and b's offsets for this workgroup's batch entry
// (arguments [3], [6], [9..22) as gen_matmul describes) and their row and column strides.
constexpr const char* kMatmulOperands = R"(  int batch = int(gl_WorkGroupID.z);
  int ao = arg[3], bo = arg[6];
  int rem = batch;
  for (int d = arg[9] - 1; d >= 0; --d) {
    int e = arg[10 + d];
    int c = rem % e;
    rem /= e;
    ao += c * arg[14 + d];
    bo += c * arg[18 + d];
  }
  int ars = arg[4], acs = arg[5], brs = arg[7], bcs = arg[8];
)";

// Matmul: y [batch, M, N] (contiguous) = a [.., M, K] x b [.., K, N], a and b strided.
// Arguments: [0] M, [1] N, [2] K, [3] a offset, [4] a row stride, [5] a column stride,
// [6] b offset, [7] b row stride, [8] b column stride, [9] batch rank R (<= 4),
// [10..14) the output's batch shape, [14..18) a's batch strides, [18..22) b's.
// Each workgroup of 16 x 16 threads computes a T x T tile (T = matmul_tile(large)), R x R
// outputs a thread (R = T / 16, rows ty + 16 i and columns tx + 16 j: a warp reads 16
// consecutive words of Bs and broadcasts two of As), through shared-memory tiles of depth
// 16 (As padded by a word a row so that its transposing stores do not share banks); with
// `prefetch`, the next tile's elements are loaded into registers while the current one is
// multiplied. Every output sums its products in k order, whichever variant.
std::string gen_matmul(DType dt, bool large, bool prefetch) {
  const int T = matmul_tile(large), R = T / 16;
  std::string s = std::string(header()) + "layout(local_size_x = 16, local_size_y = 16) in;\n" +
                  buffers_decl({{"y", dt}, {"x0", dt}, {"x1", dt}}) + prelude(dt) + bf16_helpers();
  s += "#define T " + std::to_string(T) + "\n#define R " + std::to_string(R) + "\n";
  s +=
      R"(shared C As[16][T + 1];
shared C Bs[16][T];
void main() {
  int M = arg[0], N = arg[1], K = arg[2];
  int tx = int(gl_LocalInvocationID.x), ty = int(gl_LocalInvocationID.y);
  int lid = ty * 16 + tx;
  int m0 = int(gl_WorkGroupID.y) * T, n0 = int(gl_WorkGroupID.x) * T;
)" + std::string(kMatmulOperands) +
      R"(  C acc[R][R];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < R; ++j) acc[i][j] = C(0);
)" +
      (prefetch
           ? R"(  // The next tile's elements are loaded into registers while this one is multiplied.
  C pa[R], pb[R];
  for (int l = 0; l < R; ++l) {
    int idx = lid + l * 256;
    int gr = m0 + (idx >> 4), gc = idx & 15;
    pa[l] = (gr < M && gc < K) ? )" +
                 load(dt, "x0[ao + gr * ars + gc * acs]") + R"( : C(0);
    int gk = idx / T, gn = n0 + idx % T;
    pb[l] = (gk < K && gn < N) ? )" +
                 load(dt, "x1[bo + gk * brs + gn * bcs]") + R"( : C(0);
  }
  for (int kt = 0; kt < K; kt += 16) {
    for (int l = 0; l < R; ++l) {
      int idx = lid + l * 256;
      As[idx & 15][idx >> 4] = pa[l];
      Bs[idx / T][idx % T] = pb[l];
    }
    barrier();
    if (kt + 16 < K) {
      for (int l = 0; l < R; ++l) {
        int idx = lid + l * 256;
        int gr = m0 + (idx >> 4), gc = kt + 16 + (idx & 15);
        pa[l] = (gr < M && gc < K) ? )" +
                 load(dt, "x0[ao + gr * ars + gc * acs]") + R"( : C(0);
        int gk = kt + 16 + idx / T, gn = n0 + idx % T;
        pb[l] = (gk < K && gn < N) ? )" +
                 load(dt, "x1[bo + gk * brs + gn * bcs]") + R"( : C(0);
      }
    }
)"
           : R"(  for (int kt = 0; kt < K; kt += 16) {
    for (int l = 0; l < R; ++l) {
      int idx = lid + l * 256;
      int r = idx >> 4, c = idx & 15;
      int gr = m0 + r, gc = kt + c;
      As[c][r] = (gr < M && gc < K) ? )" +
                 load(dt, "x0[ao + gr * ars + gc * acs]") + R"( : C(0);
      int br = idx / T, bc = idx % T;
      int gk = kt + br, gn = n0 + bc;
      Bs[br][bc] = (gk < K && gn < N) ? )" +
                 load(dt, "x1[bo + gk * brs + gn * bcs]") + R"( : C(0);
    }
    barrier();
)") + R"(    for (int k = 0; k < 16; ++k) {
      C av[R], bv[R];
      for (int i = 0; i < R; ++i) av[i] = As[k][ty + 16 * i];
      for (int j = 0; j < R; ++j) bv[j] = Bs[k][tx + 16 * j];
      for (int i = 0; i < R; ++i)
        for (int j = 0; j < R; ++j) acc[i][j] += av[i] * bv[j];
    }
    barrier();
  }
  int yo = batch * M * N;
  for (int i = 0; i < R; ++i) {
    int r = m0 + ty + 16 * i;
    if (r >= M) continue;
    for (int j = 0; j < R; ++j) {
      int c = n0 + tx + 16 * j;
      if (c < N) y[yo + r * N + c] = )" +
      store(dt, "acc[i][j]") + R"(;
    }
  }
}
)";
  return s;
}

// Note [Cooperative-matrix matmul]: f16 products on the device's matrix units through
// GL_NV_cooperative_matrix (Features::coopmat): a workgroup of 8 subgroups of 32 computes a
// 128 x 128 tile of y, subgroup s the 32 x 64 block at rows 32 (s / 2), columns 64 (s % 2),
// as 2 x 4 fragments of 16 x 16 with f32 accumulators. A and B pass through shared memory
// 32 deep (f16, zero outside the matrices, so edge tiles need no masked loads; rows padded
// by 8 elements, 16 bytes, against bank conflicts), each fragment's k steps in order; each
// fragment is stored through a subgroup's shared scratch and written, rounded once to f16,
// where it lies inside y. The arguments are gen_matmul's, so either kernel serves a matmul.
// vec8 (A and B row-major, rows, offsets and batch strides multiples of 8 elements, K and
// N too: the host checks) loads the tiles as 16-byte words, 2 a thread each, where the
// general kernel loads 16 single elements.
std::string gen_matmul_coop(bool vec8) {
  const DType dt = DType::F16;
  std::string s = std::string(header()) +
                  "#extension GL_NV_cooperative_matrix : require\n"
                  "#extension GL_KHR_memory_scope_semantics : require\n"
                  "#extension GL_KHR_shader_subgroup_basic : require\n"
                  "layout(local_size_x = 256) in;\n" +
                  buffers_decl({{"y", dt}, {"x0", dt}, {"x1", dt}});
  // vec8: A and B again as 16-byte words (bindings 4 and 5: the same buffers), and the
  // shared tiles as 16-byte words (AS, BS and the fragments' offsets in those units).
  if (vec8) {
    s += "layout(std430, binding = 4) readonly buffer B4 { uvec4 a4[]; };\n"
         "layout(std430, binding = 5) readonly buffer B5 { uvec4 b4[]; };\n"
         "#define AS 5\n#define BS 17\n#define U 8\n"
         "shared uvec4 As[128 * AS];\nshared uvec4 Bs[32 * BS];\n";
  } else {
    s += "#define AS 40\n#define BS 136\n#define U 1\n"
         "shared float16_t As[128 * AS];\nshared float16_t Bs[32 * BS];\n";
  }
  s += R"(#define FRAG fcoopmatNV<16, gl_ScopeSubgroup, 16, 16>
#define ACC fcoopmatNV<32, gl_ScopeSubgroup, 16, 16>
shared float Cs[8 * 256];
void main() {
  int M = arg[0], N = arg[1], K = arg[2];
  int lid = int(gl_LocalInvocationID.x);
  int sg = lid >> 5, lane = lid & 31;
  int m0 = int(gl_WorkGroupID.y) * 128, n0 = int(gl_WorkGroupID.x) * 128;
)" + std::string(kMatmulOperands) +
       R"(  int wm = (sg >> 1) * 32, wn = (sg & 1) * 64;
  ACC c00 = ACC(0.0), c01 = ACC(0.0), c02 = ACC(0.0), c03 = ACC(0.0);
  ACC c10 = ACC(0.0), c11 = ACC(0.0), c12 = ACC(0.0), c13 = ACC(0.0);
  for (int kt = 0; kt < K; kt += 32) {
)";
  if (vec8) {
    // Rows of A and B are runs of 8 aligned elements (the host checks it): one 16-byte
    // word a load; K and N are multiples of 8, so a word is wholly inside or outside.
    s += R"(    for (int l = 0; l < 2; ++l) {
      int idx = lid + l * 256;
      int r = idx >> 2, q = idx & 3;
      int gr = m0 + r, gc = kt + q * 8;
      As[r * AS + q] = (gr < M && gc < K) ? a4[(ao + gr * ars + gc) >> 3] : uvec4(0u);
      int br = idx >> 4, bq = idx & 15;
      int gk = kt + br, gn = n0 + bq * 8;
      Bs[br * BS + bq] = (gk < K && gn < N) ? b4[(bo + gk * brs + gn) >> 3] : uvec4(0u);
    }
)";
  } else {
    s += R"(    for (int l = 0; l < 16; ++l) {
      int idx = lid + l * 256;
      int r = idx >> 5, c = idx & 31;
      int gr = m0 + r, gc = kt + c;
      As[r * AS + c] = (gr < M && gc < K) ? x0[ao + gr * ars + gc * acs] : float16_t(0.0);
      int br = idx >> 7, bc = idx & 127;
      int gk = kt + br, gn = n0 + bc;
      Bs[br * BS + bc] = (gk < K && gn < N) ? x1[bo + gk * brs + gn * bcs] : float16_t(0.0);
    }
)";
  }
  s += R"(    barrier();
    for (int kk = 0; kk < 32; kk += 16) {
      FRAG a0, a1, b0, b1, b2, b3;
      coopMatLoadNV(a0, As, uint(wm * AS + kk / U), uint(AS), false);
      coopMatLoadNV(a1, As, uint((wm + 16) * AS + kk / U), uint(AS), false);
      coopMatLoadNV(b0, Bs, uint(kk * BS + wn / U), uint(BS), false);
      coopMatLoadNV(b1, Bs, uint(kk * BS + (wn + 16) / U), uint(BS), false);
      coopMatLoadNV(b2, Bs, uint(kk * BS + (wn + 32) / U), uint(BS), false);
      coopMatLoadNV(b3, Bs, uint(kk * BS + (wn + 48) / U), uint(BS), false);
      c00 = coopMatMulAddNV(a0, b0, c00);
      c01 = coopMatMulAddNV(a0, b1, c01);
      c02 = coopMatMulAddNV(a0, b2, c02);
      c03 = coopMatMulAddNV(a0, b3, c03);
      c10 = coopMatMulAddNV(a1, b0, c10);
      c11 = coopMatMulAddNV(a1, b1, c11);
      c12 = coopMatMulAddNV(a1, b2, c12);
      c13 = coopMatMulAddNV(a1, b3, c13);
    }
    barrier();
  }
  int yo = batch * M * N;
  uint cs = uint(sg * 256);
)";
  for (int i = 0; i < 2; ++i) {
    for (int j = 0; j < 4; ++j) {
      const char frag[] = {'c', static_cast<char>('0' + i), static_cast<char>('0' + j), '\0'};
      const std::string row = std::to_string(16 * i), col = std::to_string(16 * j);
      s.append("  coopMatStoreNV(").append(frag).append(", Cs, cs, 16u, false);\n");
      s.append("  subgroupMemoryBarrierShared();\n  subgroupBarrier();\n");
      s.append("  for (int e = lane; e < 256; e += 32) {\n    int r = m0 + wm + ").append(row);
      s.append(" + (e >> 4), c = n0 + wn + ").append(col).append(" + (e & 15);\n");
      s.append("    if (r < M && c < N) y[yo + r * N + c] = float16_t(Cs[cs + uint(e)]);\n  }\n");
      s.append("  subgroupBarrier();\n");
    }
  }
  s += "}\n";
  return s;
}

// Random draws: element i hashes (key, base + i) as the Cpu's generator does
// (cpu/kernels/creation.cpp), into a uniform double of 53 bits; uniform, default and
// Bernoulli draws are computed in f64 as there, so they equal the Cpu's bit for bit; normal
// draws take log and cos in f32 (GLSL has them for float only), so they agree with the
// Cpu's to f32 rounding. Floats keep [a, b) as the Cpu (a value rounded up to b steps
// down); 16-bit floats are drawn in f32 and rounded, integers take floor(v), saturated.
// The compute value of a Fill's element from its storage bits (backend::fill_bits) in two
// words, lo and hi (uint expressions): what loading the stored element gives.
std::string fill_value(DType dt, const std::string& lo, const std::string& hi) {
  switch (dt) {
    case DType::F64:
      return "packDouble2x32(uvec2(" + lo + ", " + hi + "))";
    case DType::F32:
      return "uintBitsToFloat(" + lo + ")";
    case DType::F16:
      return "unpackHalf2x16(" + lo + ").x";
    case DType::BF16:
      return "uintBitsToFloat(" + lo + " << 16)";
    case DType::I64:
      return "int64_t((uint64_t(" + hi + ") << 32) | uint64_t(" + lo + "))";
    case DType::I32:
      return "int(" + lo + ")";
    case DType::I16:
      return "int16_t(int(" + lo + "))";
    case DType::I8:
      return "int8_t(int(" + lo + "))";
    case DType::U8:
      return "uint8_t(" + lo + ")";
    case DType::Bool:
      return "((" + lo + " & 0xffu) != 0u)";
  }
  return "0";
}

// The generator's functions: the hash, a uniform double of 53 bits, a 64-bit word from two
// argument words and the float one step below h (for [a, b) draws).
const char* random_helpers() {
  return R"(uint64_t em_mix(uint64_t key, uint64_t ctr) {
  uint64_t z = key ^ (ctr * 0x9e3779b97f4a7c15ul);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ul;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebul;
  z ^= z >> 31;
  z = (z ^ (z >> 29)) * 0xbf58476d1ce4e5b9ul;
  return z ^ (z >> 32);
}
double em_u01(uint64_t r) { return double(r >> 11) * packDouble2x32(uvec2(0u, 0x3ca00000u)); }
uint64_t em_word64(int lo, int hi) { return (uint64_t(uint(hi)) << 32) | uint64_t(uint(lo)); }
float em_down(float h) {
  if (h == 0.0) return uintBitsToFloat(0x80000001u);
  uint u = floatBitsToUint(h);
  return uintBitsToFloat(h > 0.0 ? u - 1u : u + 1u);
}
double em_down(double h) {
  if (h == 0.0lf) return packDouble2x32(uvec2(1u, 0x80000000u));
  uvec2 w = unpackDouble2x32(h);
  if (h > 0.0lf) {
    if (w.x == 0u) w.y -= 1u;
    w.x -= 1u;
  } else {
    if (w.x == 0xffffffffu) w.y += 1u;
    w.x += 1u;
  }
  return packDouble2x32(w);
}
)";
}

// em_draw_<tag>(key, ctr, kind, a, b): the draw at counter ctr of distribution kind with
// its a and b, in dt's compute type (16-bit floats: the f32 value, rounded when stored).
// Normal draws take m_log1p, m_log and m_cos: printed after float's prelude.
std::string random_draw(DType dt) {
  std::string s = "#undef EMT_LOWEST\n#undef EMT_HIGHEST\n" + target_limits(dt) + compute(dt) +
                  " em_draw_" + dtype_tag(dt) +
                  "(uint64_t key, uint64_t ctr, int kind, double a, double b) {\n";
  // precise: the same operations in the Random kernel and in a fused one (no contraction).
  s += R"(  uint64_t r = em_mix(key, ctr);
  precise double v;
  if (kind == 2) {
    double u = em_u01(r);  // log(u1), u1 = 1 - u exactly: from whichever is not near 1
    double u2 = em_u01(em_mix(key ^ 0x6a09e667f3bcc909ul, ctr));
    precise float l = u < 0.5lf ? m_log1p(float(-u)) : m_log(float(1.0lf - u));
    precise float c = m_cos(float(6.283185307179586lf * u2));
    v = a + b * sqrt(double(-2.0 * l)) * double(c);
  } else if (kind == 3) {
    v = em_u01(r) < a ? 1.0lf : 0.0lf;
  } else if (kind == 1) {
    v = a + (b - a) * em_u01(r);
  } else {
    v = em_u01(r);
  }
)";
  if (kind_of(dt) == Kind::Float) {
    const std::string t = dt == DType::F64 ? "double" : "float";
    s += "  " + t + " t = " + t + "(v);\n  if (kind != 2 && kind != 3) {\n    " + t + " hi = " + t +
         "(kind == 1 ? b : 1.0lf), lo = " + t +
         "(kind == 1 ? a : 0.0lf);\n    if (t >= hi && hi > lo) t = em_down(hi);\n  }\n";
    s += "  return t;\n}\n";
  } else {
    s += "  double fv = floor(v);\n  return " + convert(DType::F64, dt, "fv") + ";\n}\n";
  }
  return s;
}

std::string gen_random(DType dt) {
  std::string s = header() + local_decl(kLocal) + buffers_decl({{"y", dt}}) + prelude(DType::F32) +
                  bf16_helpers() + random_helpers() + random_draw(dt);
  s += "void main() {\n" + std::string(thread_index()) + "  if (i >= arg[0]) return;\n";
  s += "  uint64_t key = em_word64(arg[1], arg[2]);\n"
       "  uint64_t ctr = em_word64(arg[3], arg[4]) + uint64_t(uint(i));\n"
       "  double a = packDouble2x32(uvec2(uint(arg[6]), uint(arg[7])));\n"
       "  double b = packDouble2x32(uvec2(uint(arg[8]), uint(arg[9])));\n"
       "  y[i] = " +
       store(dt, "em_draw_" + std::string(dtype_tag(dt)) + "(key, ctr, arg[5], a, b)") + ";\n}\n";
  return s;
}

// ---- indexing ----

std::string err_decl(int binding) {
  return "layout(std430, binding = " + std::to_string(binding) +
         ") buffer Err { int em_err[]; };\n"
         "void em_bad_index(int64_t v) {\n  em_err[0] = " +
         std::to_string(kErrorIndex) +
         ";\n  em_err[1] = int(uint(uint64_t(v) & 0xfffffffful));\n"
         "  em_err[2] = int(uint(uint64_t(v) >> 32));\n}\n";
}

// a + b as the Cpu's add_values: bool is or, integers wrap, floats add in their compute type.
std::string add_values(DType dt, const std::string& a, const std::string& b) {
  if (dt == DType::Bool) return "(" + a + " || " + b + ")";
  if (kind_of(dt) == Kind::Int)
    return std::string(compute(dt)) + "(" + wrapping(dt) + "(" + a + ") + " + wrapping(dt) + "(" +
           b + "))";
  return "(" + a + " + " + b + ")";
}

// Gather (select false): y[i] = x[.., idx[i], ..] over the index's shape; index_select
// (select true): y[i] = x[.., idx[c], ..] with c the coordinate of i along dim, the output x's
// shape with dim's extent the index's. Arguments: [0] n, [1] rank, [2, 10) the output's
// shape, [10] x offset, [11, 19) x strides, [19] index offset, [20, 28) index strides
// (select: [20] its one stride), [28] dim, [29] x's extent along dim.
std::string gen_gather(DType dt, bool select) {
  std::string s = header() + local_decl(kLocal) +
                  buffers_decl({{"y", dt}, {"x0", dt}, {"idx", DType::I64}}) + err_decl(4);
  s += "void main() {\n" + std::string(thread_index()) + "  if (i >= arg[0]) return;\n";
  s += "  int dim = arg[28];\n  int r = i, xo = arg[10], io = arg[19], cd = 0;\n"
       "  for (int d = arg[1] - 1; d >= 0; --d) {\n    int e = arg[2 + d];\n"
       "    int c = r % e;\n    r /= e;\n";
  s += select
           ? "    if (d == dim) cd = c; else xo += c * arg[11 + d];\n  }\n  io += cd * arg[20];\n"
           : "    io += c * arg[20 + d];\n    if (d != dim) xo += c * arg[11 + d];\n  }\n";
  s += "  int64_t v = idx[io];\n  if (v < 0l || v >= int64_t(arg[29])) {\n    em_bad_index(v);\n"
       "    v = 0l;\n  }\n  y[i] = x0[xo + int(v) * arg[11 + dim]];\n}\n";
  return s;
}

// Scatter into y (a contiguous copy of x): a thread per line of the index along dim writes
// the line's elements in index order (the Cpu's order; distinct lines never meet), so
// repeated indices resolve as there. index and src contiguous, of one shape. Arguments:
// [0] lines, [1] rank, [2, 10) the index's shape, [10, 18) y's strides, [18] dim, [19] y's
// extent along dim.
std::string gen_scatter(DType dt, bool add) {
  std::string s = header() + local_decl(kLocal) +
                  buffers_decl({{"y", dt}, {"idx", DType::I64}, {"src", dt}}) + err_decl(4) +
                  bf16_helpers();
  s += "void main() {\n" + std::string(thread_index()) + "  if (i >= arg[0]) return;\n";
  s += "  int dim = arg[18], rank = arg[1];\n  int r = i, yo = 0, io = 0, ist = 1, step = 1;\n"
       "  for (int d = rank - 1; d >= 0; --d) {\n    int e = arg[2 + d];\n"
       "    if (d == dim) {\n      step = ist;\n    } else {\n      int c = r % e;\n      r /= e;\n"
       "      io += c * ist;\n      yo += c * arg[10 + d];\n    }\n    ist *= e;\n  }\n";
  s += "  int k = arg[2 + dim];\n  for (int j = 0; j < k; ++j) {\n    int p = io + j * step;\n"
       "    int64_t v = idx[p];\n    if (v < 0l || v >= int64_t(arg[19])) {\n"
       "      em_bad_index(v);\n      continue;\n    }\n    int o = yo + int(v) * arg[10 + dim];\n";
  if (add) {
    s += "    y[o] = " + store(dt, add_values(dt, load(dt, "y[o]"), load(dt, "src[p]"))) + ";\n";
  } else {
    s += "    y[o] = src[p];\n";
  }
  s += "  }\n}\n";
  return s;
}

// y (a contiguous copy of x [outer, n, inner]) += src [outer, k, inner] rows at idx (k
// entries): a thread per (outer, inner) position adds the rows in index order, as the Cpu.
// Arguments: [0] outer * inner, [1] inner, [2] n, [3] k.
std::string gen_index_add(DType dt) {
  std::string s = header() + local_decl(kLocal) +
                  buffers_decl({{"y", dt}, {"idx", DType::I64}, {"src", dt}}) + err_decl(4) +
                  bf16_helpers();
  s += "void main() {\n" + std::string(thread_index()) + "  if (i >= arg[0]) return;\n";
  s += "  int inner = arg[1], n = arg[2], k = arg[3];\n  int o = i / inner, c = i % inner;\n"
       "  for (int j = 0; j < k; ++j) {\n    int64_t v = idx[j];\n"
       "    if (v < 0l || v >= int64_t(n)) {\n      em_bad_index(v);\n      continue;\n    }\n"
       "    int d = (o * n + int(v)) * inner + c;\n    int q = (o * k + j) * inner + c;\n";
  s += "    y[d] = " + store(dt, add_values(dt, load(dt, "y[d]"), load(dt, "src[q]"))) +
       ";\n  }\n}\n";
  return s;
}

// Stable sort of lines [outer, n, inner] of a contiguous x (NaN largest, as the Cpu): the
// element at k of its line goes to the rank it has in the line — the elements ordered
// before it, and the equal ones before it in the line — with its index k.
std::string gen_sort(DType dt, bool descending) {
  std::string s = header() + local_decl(kLocal) +
                  buffers_decl({{"y", dt}, {"ind", DType::I64}, {"x0", dt}}) + bf16_helpers();
  const bool flt = kind_of(dt) == Kind::Float;
  const std::string kt = dt == DType::Bool ? "int" : compute(dt);
  s += "bool em_less(" + kt + " a, " + kt + " b) {\n";
  s += flt ? "  if (isnan(b)) return !isnan(a);\n  if (isnan(a)) return false;\n" : "";
  s += "  return a < b;\n}\n";
  const std::string key = dt == DType::Bool ? "int(x0[q])" : load(dt, "x0[q]");
  s += "void main() {\n" + std::string(thread_index()) + "  if (i >= arg[0]) return;\n";
  s += "  int n = arg[1], inner = arg[2];\n  int line = i / n, k = i % n;\n"
       "  int base = (line / inner) * n * inner + (line % inner);\n"
       "  int q = base + k * inner;\n  " +
       kt + " v = " + key +
       ";\n  int pos = 0;\n  for (int j = 0; j < n; ++j) {\n    q = base + j * inner;\n    " + kt +
       " w = " + key + ";\n";
  s += descending ? "    if (em_less(v, w) || (j < k && !em_less(w, v))) ++pos;\n"
                  : "    if (em_less(w, v) || (j < k && !em_less(v, w))) ++pos;\n";
  s += "  }\n  int at = base + pos * inner;\n  y[at] = x0[base + k * inner];\n"
       "  ind[at] = int64_t(k);\n}\n";
  return s;
}

// ---- sliding windows ----

// The window's geometry as locals: in0..2, k0..2 (kernel), st0..2, pd0..2, dl0..2, out0..2,
// K (kernel size), L (positions), image (in0 * in1 * in2).
std::string window_geometry() {
  std::string s;
  const char* names[] = {"in", "k", "st", "pd", "dl", "out"};
  for (int f = 0; f < 6; ++f) {
    s += "  int " + std::string(names[f]) + "0 = arg[" + std::to_string(1 + 3 * f) + "], " +
         names[f] + "1 = arg[" + std::to_string(2 + 3 * f) + "], " + names[f] + "2 = arg[" +
         std::to_string(3 + 3 * f) + "];\n";
  }
  s += "  int K = k0 * k1 * k2, L = out0 * out1 * out2, image = in0 * in1 * in2;\n";
  return s;
}
// A thread per element i < arg[0], with the window's geometry.
std::string window_head() {
  return thread_index() + std::string("  if (i >= arg[0]) return;\n") + window_geometry();
}

// The storage element whose bits are the words lo, hi (as convert_elements wrote them).
std::string from_storage_bits(DType dt, const std::string& lo, const std::string& hi) {
  switch (dt) {
    case DType::F64:
      return "packDouble2x32(uvec2(uint(" + lo + "), uint(" + hi + ")))";
    case DType::F32:
      return "uintBitsToFloat(uint(" + lo + "))";
    case DType::F16:
      return "uint16BitsToFloat16(uint16_t(uint(" + lo + ")))";
    case DType::I64:
      return "int64_t((uint64_t(uint(" + hi + ")) << 32) | uint64_t(uint(" + lo + ")))";
    default:
      return std::string(storage(dt)) + "(uint(" + lo + "))";
  }
}

// im2col: y [planes, K, L] from x [planes, *in]; entries in the padding are the pad value.
std::string gen_unfold(DType dt) {
  std::string s = header() + local_decl(kLocal) + buffers_decl({{"y", dt}, {"x0", dt}});
  s += "void main() {\n" + window_head();
  s += "  int p = i / (K * L), k = (i / L) % K, l = i % L;\n"
       "  int kz = k / (k1 * k2), ky = (k / k2) % k1, kx = k % k2;\n"
       "  int oz = l / (out1 * out2), oy = (l / out2) % out1, ox = l % out2;\n"
       "  int iz = oz * st0 - pd0 + kz * dl0, iy = oy * st1 - pd1 + ky * dl1, "
       "ix = ox * st2 - pd2 + kx * dl2;\n"
       "  bool inside = iz >= 0 && iz < in0 && iy >= 0 && iy < in1 && ix >= 0 && ix < in2;\n"
       "  y[i] = inside ? x0[p * image + (iz * in1 + iy) * in2 + ix] : " +
       from_storage_bits(dt, "arg[19]", "arg[20]") + ";\n}\n";
  return s;
}

// col2im: y [planes, *in] sums the entries of x [planes, K, L] that unfold reads from each
// element, in kernel order from zero, in the compute type (16-bit floats rounded once).
std::string gen_fold(DType dt) {
  std::string s = header() + local_decl(kLocal) + buffers_decl({{"y", dt}, {"x0", dt}}) +
                  prelude(dt) + bf16_helpers();
  s += "void main() {\n" + window_head();
  s += "  int p = i / image, e = i % image;\n"
       "  int iz = e / (in1 * in2), iy = (e / in2) % in1, ix = e % in2;\n"
       "  C acc = EM_ZERO;\n  int k = 0;\n"
       "  for (int kz = 0; kz < k0; ++kz)\n    for (int ky = 0; ky < k1; ++ky)\n"
       "      for (int kx = 0; kx < k2; ++kx, ++k) {\n"
       "        int tz = iz + pd0 - kz * dl0, ty = iy + pd1 - ky * dl1, tx = ix + pd2 - kx * dl2;\n"
       "        if (tz < 0 || ty < 0 || tx < 0 || tz % st0 != 0 || ty % st1 != 0 || tx % st2 != 0)"
       " continue;\n"
       "        int oz = tz / st0, oy = ty / st1, ox = tx / st2;\n"
       "        if (oz >= out0 || oy >= out1 || ox >= out2) continue;\n"
       "        acc += " +
       load(dt, "x0[(p * K + k) * L + (oz * out1 + oy) * out2 + ox]") +
       ";\n      }\n  y[i] = " + store(dt, "acc") + ";\n}\n";
  return s;
}

// Pooling: the reduction's identity, then its combine step over the window's entries inside
// the image in kernel order (the Cpu's order; max propagates NaN as the binary op).
std::string gen_pool(ir::PoolFn fn, DType dt) {
  const ir::ReduceFn rf = fn == ir::PoolFn::Max ? ir::ReduceFn::Max : ir::ReduceFn::Sum;
  const sx::ReduceDef def = sx::reduction(rf);
  const sx::Expr& combine = sx::expr(sx::def(def.combine), kind_of(dt));
  const sx::Printed id = sx::print(def.identity, sx::Dialect::Glsl, dt, {}, "  ");
  const sx::Printed step = sx::print(combine, sx::Dialect::Glsl, dt, {"part", "v"}, "        ");
  std::string s = header() + local_decl(kLocal) + buffers_decl({{"y", dt}, {"x0", dt}}) +
                  prelude(dt) + bf16_helpers();
  s += "void main() {\n" + window_head();
  s += "  int p = i / L, l = i % L;\n"
       "  int oz = l / (out1 * out2), oy = (l / out2) % out1, ox = l % out2;\n";
  s += id.statements + "  C part = " + id.value + ";\n";
  s += "  for (int kz = 0; kz < k0; ++kz)\n    for (int ky = 0; ky < k1; ++ky)\n"
       "      for (int kx = 0; kx < k2; ++kx) {\n"
       "        int iz = oz * st0 - pd0 + kz * dl0, iy = oy * st1 - pd1 + ky * dl1, "
       "ix = ox * st2 - pd2 + kx * dl2;\n"
       "        if (iz < 0 || iz >= in0 || iy < 0 || iy >= in1 || ix < 0 || ix >= in2) continue;\n"
       "        C v = " +
       load(dt, "x0[p * image + (iz * in1 + iy) * in2 + ix]") + ";\n" + step.statements +
       "        part = " + step.value + ";\n      }\n";
  s += "  y[i] = " + store(dt, "part") + ";\n}\n";
  return s;
}

// The max-pool gradient (ir::MaxPoolGrad) as the Cpu computes it, in two kernels over the
// window geometry. Shares: share [planes, L] = g / n per window position, n the entries of
// its window (inside the image) equal to y, plus the padding's where y is -inf (an unfold
// padded with -inf would count those). Gradient: y [planes, *in] sums share over the
// windows whose entry at the element equals y, in kernel order from zero.
std::string gen_max_pool_share(DType dt) {
  std::string s = header() + local_decl(kLocal) +
                  buffers_decl({{"y", dt}, {"x0", dt}, {"x1", dt}, {"x2", dt}}) + prelude(dt);
  s += "void main() {\n" + window_head();
  s += "  int p = i / L, l = i % L;\n"
       "  int oz = l / (out1 * out2), oy = (l / out2) % out1, ox = l % out2;\n"
       "  C m = x1[i];\n  int hits = 0, inside = 0;\n"
       "  for (int kz = 0; kz < k0; ++kz)\n    for (int ky = 0; ky < k1; ++ky)\n"
       "      for (int kx = 0; kx < k2; ++kx) {\n"
       "        int iz = oz * st0 - pd0 + kz * dl0, iy = oy * st1 - pd1 + ky * dl1, "
       "ix = ox * st2 - pd2 + kx * dl2;\n"
       "        if (iz < 0 || iz >= in0 || iy < 0 || iy >= in1 || ix < 0 || ix >= in2) continue;\n"
       "        inside += 1;\n"
       "        if (x0[p * image + (iz * in1 + iy) * in2 + ix] == m) hits += 1;\n      }\n"
       "  if (m == -EM_INF) hits += K - inside;\n"
       "  precise C share = x2[i] / C(hits);\n  y[i] = share;\n}\n";
  return s;
}
std::string gen_max_pool_grad(DType dt) {
  std::string s = header() + local_decl(kLocal) +
                  buffers_decl({{"y", dt}, {"x0", dt}, {"x1", dt}, {"x2", dt}}) + prelude(dt);
  s += "void main() {\n" + window_head();
  s += "  int p = i / image, e = i % image;\n"
       "  int iz = e / (in1 * in2), iy = (e / in2) % in1, ix = e % in2;\n"
       "  C v = x0[i];\n  precise C acc = EM_ZERO;\n"
       "  for (int kz = 0; kz < k0; ++kz)\n    for (int ky = 0; ky < k1; ++ky)\n"
       "      for (int kx = 0; kx < k2; ++kx) {\n"
       "        int tz = iz + pd0 - kz * dl0, ty = iy + pd1 - ky * dl1, tx = ix + pd2 - kx * dl2;\n"
       "        if (tz < 0 || ty < 0 || tx < 0 || tz % st0 != 0 || ty % st1 != 0 || tx % st2 != 0)"
       " continue;\n"
       "        int oz = tz / st0, oy = ty / st1, ox = tx / st2;\n"
       "        if (oz >= out0 || oy >= out1 || ox >= out2) continue;\n"
       "        int l = p * L + (oz * out1 + oy) * out2 + ox;\n"
       "        if (x1[l] == v) acc += x2[l];\n      }\n"
       "  y[i] = acc;\n}\n";
  return s;
}

// ---- convolution (ir::Conv) ----

// Note [Direct convolution]: the three passes of ir::Conv without the column matrix, over
// the window geometry of the image [N, Cin, *in] (window_geometry: positions L, kernel
// size K, image size) and arg[21..25): N, Cin, O, groups (cg = Cin / groups channels and
// og = O / groups outputs a group). Each output sums its products in the compute type, in
// channel-then-kernel order:
//   Forward (x0 image, x1 weight [O, cg, K]): a thread per y [N, O, L] element;
//   InputGrad (x0 g [N, O, L], x1 weight): a thread per y [N, Cin, *in] element, over the
//     (output channel, kernel entry) pairs whose window position reads the element;
//   WeightGrad (x0 image, x1 g): a workgroup per y [O, cg, K] element, its kLocal threads
//     striding over the N * L (sample, position) pairs and meeting in a tree, so every
//     thread's loop stays short (lavapipe caps a loop at 65535 iterations).
std::string gen_conv(DType dt, ir::ConvPass pass) {
  std::string s = header() + local_decl(kLocal) +
                  buffers_decl({{"y", dt}, {"x0", dt}, {"x1", dt}}) + prelude(dt) + bf16_helpers();
  const std::string conv_args =
      "  int N = arg[21], Cin = arg[22], O = arg[23], G = arg[24];\n"
      "  int cg = Cin / G, og = O / G;\n";
  const std::string inside = "iz >= 0 && iz < in0 && iy >= 0 && iy < in1 && ix >= 0 && ix < in2";
  switch (pass) {
    case ir::ConvPass::Forward:
      s += "void main() {\n" + window_head() + conv_args +
           "  int n = i / (O * L), o = (i / L) % O, l = i % L;\n"
           "  int c0 = (o / og) * cg;\n"
           "  int oz = l / (out1 * out2), oy = (l / out2) % out1, ox = l % out2;\n"
           "  C acc = EM_ZERO;\n"
           "  for (int c = 0; c < cg; ++c) {\n"
           "    int xb = (n * Cin + c0 + c) * image, wb = (o * cg + c) * K;\n"
           "    for (int kz = 0; kz < k0; ++kz)\n"
           "      for (int ky = 0; ky < k1; ++ky)\n"
           "        for (int kx = 0; kx < k2; ++kx) {\n"
           "          int iz = oz * st0 - pd0 + kz * dl0, iy = oy * st1 - pd1 + ky * dl1, "
           "ix = ox * st2 - pd2 + kx * dl2;\n"
           "          if (!(" +
           inside +
           ")) continue;\n          acc += " + load(dt, "x1[wb + (kz * k1 + ky) * k2 + kx]") +
           " * " + load(dt, "x0[xb + (iz * in1 + iy) * in2 + ix]") +
           ";\n        }\n  }\n  y[i] = " + store(dt, "acc") + ";\n}\n";
      return s;
    case ir::ConvPass::InputGrad:
      s += "void main() {\n" + window_head() + conv_args +
           "  int n = i / (Cin * image), c = (i / image) % Cin, e = i % image;\n"
           "  int grp = c / cg, cc = c - grp * cg;\n"
           "  int iz = e / (in1 * in2), iy = (e / in2) % in1, ix = e % in2;\n"
           "  C acc = EM_ZERO;\n"
           "  for (int q = 0; q < og; ++q) {\n"
           "    int o = grp * og + q;\n"
           "    int gb = (n * O + o) * L, wb = (o * cg + cc) * K;\n"
           "    for (int kz = 0; kz < k0; ++kz)\n"
           "      for (int ky = 0; ky < k1; ++ky)\n"
           "        for (int kx = 0; kx < k2; ++kx) {\n"
           "          int tz = iz + pd0 - kz * dl0, ty = iy + pd1 - ky * dl1, "
           "tx = ix + pd2 - kx * dl2;\n"
           "          if (tz < 0 || ty < 0 || tx < 0 || tz % st0 != 0 || ty % st1 != 0 || "
           "tx % st2 != 0) continue;\n"
           "          int oz = tz / st0, oy = ty / st1, ox = tx / st2;\n"
           "          if (oz >= out0 || oy >= out1 || ox >= out2) continue;\n"
           "          acc += " +
           load(dt, "x0[gb + (oz * out1 + oy) * out2 + ox]") + " * " +
           load(dt, "x1[wb + (kz * k1 + ky) * k2 + kx]") +
           ";\n        }\n  }\n  y[i] = " + store(dt, "acc") + ";\n}\n";
      return s;
    case ir::ConvPass::WeightGrad:
    case ir::ConvPass::Count_:
      break;
  }
  s += "shared C sh[" + std::to_string(kLocal) + "];\n";
  s += "void main() {\n"
       "  int line = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);\n"
       "  if (line >= arg[0]) return;\n  int t = int(gl_LocalInvocationID.x);\n" +
       window_geometry() + conv_args +
       "  int o = line / (cg * K), cc = (line / K) % cg, k = line % K;\n"
       "  int c = (o / og) * cg + cc;\n"
       "  int kz = k / (k1 * k2), ky = (k / k2) % k1, kx = k % k2;\n"
       "  C part = EM_ZERO;\n"
       "  for (int j = t; j < N * L; j += " +
       std::to_string(kLocal) +
       ") {\n"
       "    int n = j / L, l = j % L;\n"
       "    int oz = l / (out1 * out2), oy = (l / out2) % out1, ox = l % out2;\n"
       "    int iz = oz * st0 - pd0 + kz * dl0, iy = oy * st1 - pd1 + ky * dl1, "
       "ix = ox * st2 - pd2 + kx * dl2;\n"
       "    if (!(" +
       inside + ")) continue;\n    part += " + load(dt, "x1[(n * O + o) * L + l]") + " * " +
       load(dt, "x0[(n * Cin + c) * image + (iz * in1 + iy) * in2 + ix]") + ";\n  }\n" +
       tree("sh", "      C r = a + b;\n") + "  if (t == 0) y[line] = " + store(dt, "sh[0]") +
       ";\n}\n";
  return s;
}

// ---- batch norm (ir::BatchNorm, ir::BatchNormGrad) ----

// Over x [N, Cn, S] (contiguous; S the spatial extent) per channel ch: its M = N * S values
// x0[((j / S) * Cn + ch) * S + j % S], j < M. Arguments: [0] channels (the sums) or elements
// (the element-wise stages), [1] Cn, [2] S, [3] N, [4..6) eps (compute type's bits). Stages:
//   Stats (y [2, Cn] from x0): a workgroup a channel: the mean, corrected by the mean of
//     x - mean (the first sum's rounding), then the biased variance (as layer norm);
//   Apply (y from x0, x1 the statistics, x2 weight, x3 bias where present): a thread an
//     element, y = (x - mean) * weight / sqrt(var + eps) + bias;
//   GradSums (y [2, Cn] from x0, x1 g, x2 the statistics): a workgroup a channel,
//     y = [sum(g (x - mean)) rstd, sum(g)] (dweight, dbias);
//   GradInput (y dx from x0, x1 g, x2 the statistics, x3 the sums, x4 weight where
//     present): a thread an element, dx = a g + b (x - mean) + k with a = weight rstd,
//     b = -a rstd dweight / M, k = -a dbias / M (ir::BatchNormGrad's closed form).
std::string gen_batch_norm(DType dt, BatchNormStage stage, bool weight, bool bias) {
  std::vector<std::pair<std::string, DType>> bufs = {{"y", dt}, {"x0", dt}};
  const int extra = stage == BatchNormStage::Stats      ? 0
                    : stage == BatchNormStage::Apply    ? 1 + weight + bias
                    : stage == BatchNormStage::GradSums ? 2
                                                        : 3 + weight;
  for (int j = 1; j <= extra; ++j) bufs.push_back({"x" + std::to_string(j), dt});
  std::string s = header() + local_decl(kLocal) + buffers_decl(bufs) + prelude(dt) + bf16_helpers();
  const bool sums = stage == BatchNormStage::Stats || stage == BatchNormStage::GradSums;
  if (sums) s += "shared C sh[" + std::to_string(kLocal) + "];\n";
  s += "void main() {\n";
  if (sums) {
    s += "  int ch = int(gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x);\n"
         "  if (ch >= arg[0]) return;\n  int t = int(gl_LocalInvocationID.x);\n";
  } else {
    s += std::string(thread_index()) + "  if (i >= arg[0]) return;\n";
  }
  s += "  int Cn = arg[1], S = arg[2], M = arg[3] * S;\n";
  s += "  C eps = " + from_words(dt, "arg[4]", "arg[5]") + ";\n";
  if (!sums) {
    const std::string st = stage == BatchNormStage::Apply ? "x1" : "x2";  // the statistics
    s += "  int ch = (i / S) % Cn;\n  C v = " + load(dt, "x0[i]") +
         ";\n  C mean = " + load(dt, st + "[ch]") + ";\n  C rstd = C(1) / sqrt(" +
         load(dt, st + "[Cn + ch]") + " + eps);\n";
  }
  const std::string loop =
      "  for (int j = t; j < M; j += " + std::to_string(kLocal) +
      ") {\n    int at = ((j / S) * Cn + ch) * S + j % S;\n    C v = " + load(dt, "x0[at]") + ";\n";
  const std::string sum = tree("sh", "      C r = a + b;\n");
  switch (stage) {
    case BatchNormStage::Stats:
      s += "  C part = EM_ZERO;\n" + loop + "    part += v;\n  }\n" + sum +
           "  C mean = sh[0] / C(M);\n  barrier();\n  part = EM_ZERO;\n" + loop +
           "    part += v - mean;\n  }\n" + sum +
           "  mean += sh[0] / C(M);\n  barrier();\n  part = EM_ZERO;\n" + loop +
           "    C d = v - mean;\n    part += d * d;\n  }\n" + sum +
           "  if (t == 0) {\n    y[ch] = " + store(dt, "mean") +
           ";\n    y[Cn + ch] = " + store(dt, "sh[0] / C(M)") + ";\n  }\n}\n";
      return s;
    case BatchNormStage::Apply: {
      std::string v = "(v - mean) * rstd";
      if (weight) v = "(" + v + ") * " + load(dt, "x2[ch]");
      if (bias) v = "(" + v + ") + " + load(dt, std::string(weight ? "x3" : "x2") + "[ch]");
      s += "  y[i] = " + store(dt, v) + ";\n}\n";
      return s;
    }
    case BatchNormStage::GradSums:
      s += "  C mean = " + load(dt, "x2[ch]") + ";\n  C rstd = C(1) / sqrt(" +
           load(dt, "x2[Cn + ch]") + " + eps);\n";
      s += "  C sg = EM_ZERO, sgx = EM_ZERO;\n" + loop + "    C g = " + load(dt, "x1[at]") +
           ";\n    sg += g;\n    sgx += g * (v - mean);\n  }\n";
      s += "  C part = sg;\n" + sum + "  sg = sh[0];\n  barrier();\n  part = sgx;\n" + sum +
           "  if (t == 0) {\n    y[ch] = " + store(dt, "sh[0] * rstd") +
           ";\n    y[Cn + ch] = " + store(dt, "sg") + ";\n  }\n}\n";
      return s;
    case BatchNormStage::GradInput:
      s += "  C a = " + (weight ? load(dt, "x4[ch]") + " * rstd" : std::string("rstd")) + ";\n";
      s += "  C b = -a * rstd * " + load(dt, "x3[ch]") + " / C(M);\n  C k = -a * " +
           load(dt, "x3[Cn + ch]") + " / C(M);\n";
      s += "  y[i] = " + store(dt, "a * " + load(dt, "x1[i]") + " + b * (v - mean) + k") + ";\n}\n";
      return s;
  }
  EMBER_ASSERT(false);
}

// nonzero in two kernels over runs of arg[1] elements of x (contiguous; arg[0] elements), a
// thread a run: the count of each run's non-zero elements into y (int), then, from each
// run's offset (x1, the counts' exclusive prefix sums), the coordinates of its non-zero
// elements in order into y (I64 [count, rank]); arg[2] rank, arg[3..3 + kMaxDims) shape.
std::string gen_nonzero(DType dt, bool write) {
  std::vector<std::pair<std::string, DType>> bufs = {{"y", write ? DType::I64 : DType::I32},
                                                     {"x0", dt}};
  if (write) bufs.push_back({"x1", DType::I32});
  std::string s = header() + local_decl(kLocal) + buffers_decl(bufs) + prelude(dt) + bf16_helpers();
  s += "void main() {\n" + std::string(thread_index()) +
       "  int n = arg[0], run = arg[1];\n"
       "  if (i * run >= n) return;\n  int e = min(n, (i + 1) * run);\n";
  const std::string nz = convert(dt, DType::Bool, load(dt, "x0[k]"));
  if (!write) {
    s += "  int c = 0;\n  for (int k = i * run; k < e; ++k) {\n    if (" + nz +
         ") c += 1;\n  }\n  y[i] = c;\n}\n";
    return s;
  }
  s += "  int rank = arg[2];\n  int at = x1[i];\n"
       "  for (int k = i * run; k < e; ++k) {\n    if (!(" +
       nz +
       ")) continue;\n"
       "    int r = k;\n"
       "    for (int d = rank - 1; d >= 0; --d) {\n"
       "      int ext = arg[3 + d];\n"
       "      y[at * rank + d] = int64_t(r % ext);\n"
       "      r /= ext;\n    }\n    at += 1;\n  }\n}\n";
  return s;
}

// ---- fused element-wise groups ----

// A compute value of dt rounded as if stored and loaded again (16-bit floats; the rest
// hold their dtype's values already).
std::string round_stored(DType dt, const std::string& v) {
  switch (dt) {
    case DType::F16:
      return "em_round_f16(" + v + ")";
    case DType::BF16:
      return "uintBitsToFloat(uint(em_to_bf16(" + v + ")) << 16)";
    default:
      return v;
  }
}

// f32 rounded to the nearest f16 (ties to even) and back, as storing a float16_t and
// loading it does, in integer and exact float steps: NVIDIA's compiler folds
// float(float16_t(x)) to x.
const char* round_f16_helper() {
  return R"(float em_round_f16(float f) {
  uint u = floatBitsToUint(f);
  uint a = u & 0x7fffffffu, sign = u & 0x80000000u;
  if (a > 0x7f800000u) return uintBitsToFloat((u & 0xffffe000u) | 0x00400000u);
  if (a >= 0x477ff000u) return uintBitsToFloat(sign | 0x7f800000u);
  if (a >= 0x38800000u) {
    uint r = (a + 0xfffu + ((a >> 13) & 1u)) & 0xffffe000u;
    return uintBitsToFloat(sign | r);
  }
  precise float q = uintBitsToFloat(a) * 16777216.0;
  precise float r = roundEven(q) * 5.9604644775390625e-8;
  return uintBitsToFloat(sign | floatBitsToUint(r));
}
)";
}

// Undefines the macros of prelude() (and the casts' target limits), so that another
// compute type's prelude may follow in the same kernel.
const char* prelude_reset() {
  return "#undef C\n#undef U\n#undef EM_LOWEST\n#undef EM_HIGHEST\n#undef EM_BITS\n"
         "#undef EM_SIGNED\n#undef EM_INF\n#undef EM_NAN\n#undef EM_ZERO\n";
}

const sx::Expr& instr_expr(const backend::FusedInstr& in, DType dt) {
  return in.kind == backend::FusedInstr::Kind::Unary ? sx::expr(sx::def(in.unary), kind_of(dt))
                                                     : sx::expr(sx::def(in.binary), kind_of(dt));
}

bool instr_divides(const FusedKernel& f, std::size_t i) {
  const backend::FusedInstr& in = f.code[i];
  if (in.kind != backend::FusedInstr::Kind::Unary && in.kind != backend::FusedInstr::Kind::Binary)
    return false;
  const DType dt = f.operand_dtype(i);
  return divides_ints(instr_expr(in, dt), dt);
}

bool fused_reports_errors(const FusedKernel& f) {
  for (std::size_t i = 0; i < f.code.size(); ++i) {
    if (instr_divides(f, i)) return true;
  }
  return false;
}

int fused_buffers(const FusedKernel& f) {
  int n = static_cast<int>(f.inputs.size());
  for (std::int32_t k : f.in_place) n += k < 0;
  return n + (fused_reports_errors(f) ? 1 : 0);
}

// One kernel for the group: each instruction is a function em_f<i> printed from its
// expression as gen_fn prints it (under the prelude of its operands' compute type, `precise`
// for float results); main() loads the inputs, calls the functions in order, rounds each
// 16-bit result as if stored and stores the outputs.
std::string gen_fused(const FusedKernel& f, std::uint32_t lin) {
  using Kind_ = backend::FusedInstr::Kind;
  const std::size_t n_in = f.inputs.size(), n_out = f.outputs.size();
  std::vector<std::pair<std::string, DType>> bufs;
  std::vector<std::string> out_buf(n_out);
  for (std::size_t j = 0; j < n_out; ++j) {
    if (f.in_place[j] >= 0) {
      out_buf[j] = "x" + std::to_string(f.in_place[j]);
    } else {
      out_buf[j] = "y" + std::to_string(j);
      bufs.push_back({out_buf[j], f.dtype_of(f.outputs[j])});
    }
  }
  for (std::size_t k = 0; k < n_in; ++k) bufs.push_back({"x" + std::to_string(k), f.inputs[k]});
  std::string s = header() + local_decl(kLocal) + buffers_decl(bufs);
  if (fused_reports_errors(f)) {
    s += "layout(std430, binding = " + std::to_string(bufs.size() + 1) +
         ") buffer Err { int em_err[]; };\n#define EM_FLAG_DIV0() em_err[0] = " +
         std::to_string(kErrorDivisionByZero) + "\n";
  }
  s += bf16_helpers();
  s += round_f16_helper();
  // The functions, grouped by compute type (f32, f16 and bf16 share float's prelude).
  std::vector<std::string> types;
  for (std::size_t i = 0; i < f.code.size(); ++i) {
    const Kind_ k = f.code[i].kind;
    if (k != Kind_::Unary && k != Kind_::Binary) continue;
    const std::string ct = compute(f.operand_dtype(i));
    if (std::find(types.begin(), types.end(), ct) == types.end()) types.push_back(ct);
  }
  for (const std::string& ct : types) {
    bool first = true;
    for (std::size_t i = 0; i < f.code.size(); ++i) {
      const backend::FusedInstr& in = f.code[i];
      if (in.kind != Kind_::Unary && in.kind != Kind_::Binary) continue;
      const DType dt = f.operand_dtype(i);
      if (compute(dt) != ct) continue;
      if (first) s += prelude_reset() + prelude(dt);
      first = false;
      const sx::Printed pr = sx::print(instr_expr(in, dt), sx::Dialect::Glsl, dt, {}, "  ");
      const std::string ret = compute(in.out);
      s += ret + " em_f" + std::to_string(i) +
           (in.kind == Kind_::Unary ? "(C a, C p0, C p1) {\n" : "(C a, C b) {\n") + pr.statements;
      if (kind_of(in.out) == Kind::Float) {
        s += std::string(tuned("noprecise") ? "  " : "  precise ") + ret + " res = " + pr.value +
             ";\n  return res;\n}\n";
      } else {
        s += "  return " + pr.value + ";\n}\n";
      }
    }
  }
  // Random draws (after float's prelude, whose log and cos normal draws take), one function
  // per dtype drawn.
  std::vector<DType> drawn;
  for (const backend::FusedInstr& in : f.code) {
    if (in.kind == Kind_::Random && std::find(drawn.begin(), drawn.end(), in.out) == drawn.end())
      drawn.push_back(in.out);
  }
  if (!drawn.empty()) {
    if (std::find(types.begin(), types.end(), std::string("float")) == types.end())
      s += std::string(prelude_reset()) + prelude(DType::F32);
    s += random_helpers();
    for (DType dt : drawn) s += random_draw(dt);
  }
  for (std::size_t i = 0; i < f.code.size(); ++i) {
    const backend::FusedInstr& in = f.code[i];
    if (in.kind != Kind_::Cast) continue;
    const DType from = f.operand_dtype(i);
    s += "#undef EMT_LOWEST\n#undef EMT_HIGHEST\n" + target_limits(in.out);
    s += std::string(compute(in.out)) + " em_f" + std::to_string(i) + "(" + compute(from) +
         " v) {\n  return " + convert(from, in.out, "v") + ";\n}\n";
  }
  const auto v = [](std::size_t id) {
    std::string name = "v";
    return name.append(std::to_string(id));
  };
  std::vector<MapLoad> loads;
  for (std::size_t k = 0; k < n_in; ++k) {
    loads.push_back({static_cast<int>(n_out + k), compute(f.inputs[k]), v(k),
                     "x" + std::to_string(k), f.inputs[k]});
  }
  std::string body;
  const int params = fused_params(n_out + n_in);
  for (std::size_t i = 0; i < f.code.size(); ++i) {
    const backend::FusedInstr& in = f.code[i];
    const auto arg = [&](int k) { return v(static_cast<std::size_t>(in.args[k])); };
    const std::string fn = "em_f" + std::to_string(i);
    std::string e;
    switch (in.kind) {
      case Kind_::Unary: {
        const DType dt = f.operand_dtype(i);
        const auto word = [&](int w) {
          return "arg[" + std::to_string(params + kFusedParamWords * static_cast<int>(i) + w) + "]";
        };
        e = fn + "(" + arg(0) + ", " + from_words(dt, word(0), word(1)) + ", " +
            from_words(dt, word(2), word(3)) + ")";
        break;
      }
      case Kind_::Binary:
        e = fn + "(" + arg(0) + ", " + arg(1) + ")";
        break;
      case Kind_::Where:
        e = "(" + arg(0) + " ? " + arg(1) + " : " + arg(2) + ")";
        break;
      case Kind_::Cast:
        e = fn + "(" + arg(0) + ")";
        break;
      case Kind_::Random: {  // element i of the iteration space at counter first + i
        const auto word = [&](int w) {
          return "arg[" + std::to_string(params + kFusedParamWords * static_cast<int>(i) + w) + "]";
        };
        const auto f64 = [&](int w) {
          return "packDouble2x32(uvec2(uint(" + word(w) + "), uint(" + word(w + 1) + ")))";
        };
        e = "em_draw_" + std::string(dtype_tag(in.out)) + "(em_word64(" + word(4) + ", " + word(5) +
            "), em_word64(" + word(6) + ", " + word(7) + ") + uint64_t(uint(i)), " +
            std::to_string(static_cast<int>(in.dist)) + ", " + f64(0) + ", " + f64(2) + ")";
        break;
      }
      case Kind_::Fill: {  // its storage bits, two argument words, as its dtype's value
        const std::string w = std::to_string(params + kFusedParamWords * static_cast<int>(i));
        const std::string lo = "uint(arg[" + w + "])", hi = "uint(arg[" + w + " + 1])";
        e = fill_value(in.out, lo, hi);
        break;
      }
      case Kind_::Matmul:  // VulkanBackend::fusable refuses groups with these
      case Kind_::Conv:
      case Kind_::Reduce:
      case Kind_::Softmax:
      case Kind_::LayerNorm:
        break;
    }
    body += std::string("  ") + compute(in.out) + " " + v(n_in + i) + " = " +
            round_stored(in.out, e) + ";\n";
  }
  for (std::size_t j = 0; j < n_out; ++j) {
    const DType dt = f.dtype_of(f.outputs[j]);
    body += "  " + out_buf[j] + "[o" + std::to_string(j) +
            "] = " + store(dt, v(static_cast<std::size_t>(f.outputs[j]))) + ";\n";
  }
  return s + map_main(static_cast<int>(n_out + n_in), loads, "", body, lin);
}

// Whether e calls only math functions GLSL has for double.
bool f64_printable(const sx::Expr& e) {
  for (int i = 0; i < e.size; ++i) {
    const sx::Node& n = e[i];
    if (n.op != sx::Op::Call) continue;
    switch (n.fn) {
      case sx::Math::Fabs:
      case sx::Math::Sqrt:
      case sx::Math::Floor:
      case sx::Math::Ceil:
      case sx::Math::Rint:
      case sx::Math::Trunc:
        break;
      default:
        return false;
    }
  }
  return true;
}

}  // namespace

bool printable(ir::UnaryFn fn, DType dt) {
  const sx::Expr& e = sx::expr(sx::def(fn), kind_of(dt));
  return !e.empty() && (dt != DType::F64 || f64_printable(e));
}
bool printable(ir::BinaryFn fn, DType dt) {
  const sx::Expr& e = sx::expr(sx::def(fn), kind_of(dt));
  return !e.empty() && (dt != DType::F64 || f64_printable(e));
}

KernelSpec unary_spec(ir::UnaryFn fn, DType dt) {
  return {Family::Unary, static_cast<std::uint8_t>(fn), static_cast<std::uint8_t>(dt)};
}
KernelSpec binary_spec(ir::BinaryFn fn, DType dt) {
  return {Family::Binary, static_cast<std::uint8_t>(fn), static_cast<std::uint8_t>(dt)};
}
KernelSpec where_spec(DType dt) { return {Family::Where, static_cast<std::uint8_t>(dt)}; }
KernelSpec cast_spec(DType from, DType to) {
  return {Family::Cast, static_cast<std::uint8_t>(from), static_cast<std::uint8_t>(to)};
}
KernelSpec copy_spec(DType dt) { return {Family::Copy, static_cast<std::uint8_t>(dt)}; }
KernelSpec fill_spec(DType dt) { return {Family::Fill, static_cast<std::uint8_t>(dt)}; }
KernelSpec arange_spec(DType dt) { return {Family::Arange, static_cast<std::uint8_t>(dt)}; }
KernelSpec reduce_spec(ir::ReduceFn fn, DType dt, bool group) {
  return {Family::Reduce, static_cast<std::uint8_t>(fn), static_cast<std::uint8_t>(dt), group};
}
KernelSpec scan_spec(ir::ScanFn fn, DType dt, bool group) {
  return {Family::Scan, static_cast<std::uint8_t>(fn), static_cast<std::uint8_t>(dt), group};
}
KernelSpec softmax_spec(DType dt, bool log, bool group, bool cached) {
  return {Family::Softmax, static_cast<std::uint8_t>(dt), static_cast<std::uint8_t>(log),
          static_cast<std::uint8_t>(group | (group && cached) << 1)};
}
KernelSpec layer_norm_spec(DType dt, bool weight, bool bias, bool group, bool cached) {
  return {Family::LayerNorm, static_cast<std::uint8_t>(dt),
          static_cast<std::uint8_t>(weight | (bias << 1)),
          static_cast<std::uint8_t>(group | (group && cached) << 1)};
}
KernelSpec matmul_spec(DType dt, bool large, bool prefetch) {
  return {Family::Matmul, static_cast<std::uint8_t>(dt), large, prefetch};
}
KernelSpec matmul_coop_spec(bool vec8) { return {Family::MatmulCoop, vec8}; }
bool takes_coopmat(DType dt, bool device_coopmat) {
  return dt == DType::F16 && device_coopmat && !tuned("nocoopmat");
}
KernelSpec random_spec(DType dt) { return {Family::Random, static_cast<std::uint8_t>(dt)}; }
KernelSpec gather_spec(DType dt, bool select) {
  return {Family::Gather, static_cast<std::uint8_t>(dt), select};
}
KernelSpec scatter_spec(DType dt, bool add) {
  return {Family::Scatter, static_cast<std::uint8_t>(dt), add};
}
KernelSpec index_add_spec(DType dt) { return {Family::IndexAdd, static_cast<std::uint8_t>(dt)}; }
KernelSpec sort_spec(DType dt, bool descending) {
  return {Family::Sort, static_cast<std::uint8_t>(dt), descending};
}
KernelSpec unfold_spec(DType dt) { return {Family::Unfold, static_cast<std::uint8_t>(dt)}; }
KernelSpec fold_spec(DType dt) { return {Family::Fold, static_cast<std::uint8_t>(dt)}; }
KernelSpec nonzero_spec(DType dt, bool write) {
  return {Family::Nonzero, static_cast<std::uint8_t>(dt), write};
}
KernelSpec max_pool_grad_spec(DType dt, bool share) {
  return {Family::MaxPoolGrad, static_cast<std::uint8_t>(dt), share};
}
KernelSpec conv_spec(DType dt, ir::ConvPass pass) {
  return {Family::Conv, static_cast<std::uint8_t>(dt), static_cast<std::uint8_t>(pass)};
}
KernelSpec batch_norm_spec(DType dt, BatchNormStage stage, bool weight, bool bias) {
  return {Family::BatchNorm, static_cast<std::uint8_t>(dt), static_cast<std::uint8_t>(stage),
          static_cast<std::uint8_t>(weight | (bias << 1))};
}
KernelSpec pool_spec(ir::PoolFn fn, DType dt) {
  return {Family::Pool, static_cast<std::uint8_t>(fn), static_cast<std::uint8_t>(dt)};
}

KernelSpec fused_spec(const backend::FusedGroup& g, std::vector<std::int32_t> in_place) {
  using Kind_ = backend::FusedInstr::Kind;
  auto f = std::make_shared<FusedKernel>();
  for (const ir::Handle& h : g.inputs) f->inputs.push_back(h->dtype());
  f->code = g.code;
  for (auto& in : f->code) {  // (run-time arguments, not the kernel's)
    in.p0 = in.p1 = 0;
    in.bits = 0;
    in.draw = {};
  }
  f->outputs = g.outputs;
  f->in_place = std::move(in_place);
  std::string k = "fused.";
  for (std::size_t i = 0; i < f->inputs.size(); ++i)
    k += std::string(i ? "," : "") + dtype_tag(f->inputs[i]);
  k += ".";
  const auto id = [](std::int32_t a) { return std::to_string(a); };
  for (std::size_t i = 0; i < f->code.size(); ++i) {
    const backend::FusedInstr& in = f->code[i];
    if (i) k += ";";
    switch (in.kind) {
      case Kind_::Unary:
        k += std::string(ir::name(in.unary)) + "(" + id(in.args[0]) + ")";
        break;
      case Kind_::Binary:
        k += std::string(ir::name(in.binary)) + "(" + id(in.args[0]) + "," + id(in.args[1]) + ")";
        break;
      case Kind_::Where:
        k += "where(" + id(in.args[0]) + "," + id(in.args[1]) + "," + id(in.args[2]) + ")";
        break;
      case Kind_::Cast:
        k += "cast(" + id(in.args[0]) + ")";
        break;
      case Kind_::Random:
        k += "random" + std::to_string(static_cast<int>(in.dist)) + "()";
        break;
      case Kind_::Fill:
        k += "fill()";
        break;
      case Kind_::Matmul:  // VulkanBackend::fusable refuses groups with these
      case Kind_::Conv:
      case Kind_::Reduce:
      case Kind_::Softmax:
      case Kind_::LayerNorm:
        break;
    }
    k += std::string(":") + dtype_tag(in.out);
  }
  k += ".out(";
  for (std::size_t j = 0; j < f->outputs.size(); ++j) {
    if (j) k += ",";
    k += id(f->outputs[j]);
    if (f->in_place[j] >= 0) k.append("@").append(id(f->in_place[j]));
  }
  f->key = k + ")";
  KernelSpec spec{Family::Fused};
  spec.fused = std::move(f);
  return spec;
}

std::string KernelSpec::key() const {
  const auto dt = [](std::uint8_t v) { return dtype_tag(static_cast<DType>(v)); };
  switch (family) {
    case Family::Unary:
      return std::string("unary.") + ir::name(static_cast<ir::UnaryFn>(a)) + "." + dt(b) +
             lin_tag(lin);
    case Family::Binary:
      return std::string("binary.") + ir::name(static_cast<ir::BinaryFn>(a)) + "." + dt(b) +
             lin_tag(lin);
    case Family::Where:
      return std::string("where.") + dt(a) + lin_tag(lin);
    case Family::Cast:
      return std::string("cast.") + dt(a) + "." + dt(b) + lin_tag(lin);
    case Family::Copy:
      return std::string("copy.") + dt(a) + lin_tag(lin);
    case Family::Fill:
      return std::string("fill.") + dt(a);
    case Family::Arange:
      return std::string("arange.") + dt(a);
    case Family::Reduce:
      return std::string("reduce.") + ir::name(static_cast<ir::ReduceFn>(a)) + "." + dt(b) +
             (c ? ".group" : "");
    case Family::Scan:
      return std::string("scan.") + ir::name(static_cast<ir::ScanFn>(a)) + "." + dt(b) +
             (c ? ".group" : "");
    case Family::Softmax:
      return std::string(b ? "log_softmax." : "softmax.") + dt(a) + (c & 1 ? ".group" : "") +
             (c & 2 ? ".cached" : "");
    case Family::LayerNorm:
      return std::string("layer_norm.") + dt(a) + (b & 1 ? ".w" : "") + (b & 2 ? ".b" : "") +
             (c & 1 ? ".group" : "") + (c & 2 ? ".cached" : "");
    case Family::Matmul:
      return std::string("matmul.") + dt(a) + (b ? ".t128" : "") + (c ? ".prefetch" : "");
    case Family::MatmulCoop:
      return a ? "matmul.f16.coopmat.vec8" : "matmul.f16.coopmat";
    case Family::Fused:
      return fused->key + lin_tag(lin);
    case Family::Random:
      return std::string("random.") + dt(a);
    case Family::Gather:
      return std::string(b ? "select." : "gather.") + dt(a);
    case Family::Scatter:
      return std::string(b ? "scatter_add." : "scatter.") + dt(a);
    case Family::IndexAdd:
      return std::string("select_assign.") + dt(a);
    case Family::Sort:
      return std::string("sort.") + dt(a) + (b ? ".descending" : "");
    case Family::Unfold:
      return std::string("unfold.") + dt(a);
    case Family::Fold:
      return std::string("fold.") + dt(a);
    case Family::Pool:
      return std::string("pool.") + ir::name(static_cast<ir::PoolFn>(a)) + "." + dt(b);
    case Family::MaxPoolGrad:
      return std::string(b ? "max_pool_share." : "max_pool_grad.") + dt(a);
    case Family::Nonzero:
      return std::string(b ? "nonzero." : "nonzero_count.") + dt(a);
    case Family::Conv: {
      static constexpr const char* kPass[] = {"conv.", "conv_input_grad.", "conv_weight_grad."};
      return std::string(kPass[std::min<int>(b, 2)]) + dt(a);
    }
    case Family::BatchNorm: {
      static constexpr const char* kStage[] = {"batch_norm_stats.", "batch_norm.",
                                               "batch_norm_grad_sums.", "batch_norm_grad."};
      return std::string(kStage[std::min<int>(b, 3)]) + dt(a) + (c & 1 ? ".w" : "") +
             (c & 2 ? ".b" : "");
    }
  }
  return "?";
}

std::string KernelSpec::source() const {
  const auto dt = [](std::uint8_t v) { return static_cast<DType>(v); };
  switch (family) {
    case Family::Unary: {
      const auto fn = static_cast<ir::UnaryFn>(a);
      return gen_fn(sx::expr(sx::def(fn), kind_of(dt(b))), dt(b), sx::result_dtype(fn, dt(b)), 1,
                    lin);
    }
    case Family::Binary: {
      const auto fn = static_cast<ir::BinaryFn>(a);
      return gen_fn(sx::expr(sx::def(fn), kind_of(dt(b))), dt(b), sx::result_dtype(fn, dt(b)), 2,
                    lin);
    }
    case Family::Where:
      return gen_where(dt(a), lin);
    case Family::Cast:
      return gen_cast(dt(a), dt(b), lin);
    case Family::Copy:
      return gen_copy(dt(a), lin);
    case Family::Fill:
      return gen_fill(dt(a));
    case Family::Arange:
      return gen_arange(dt(a));
    case Family::Reduce:
      return gen_reduce(static_cast<ir::ReduceFn>(a), dt(b), c != 0);
    case Family::Scan:
      return gen_scan(static_cast<ir::ScanFn>(a), dt(b), c != 0);
    case Family::Softmax:
      return gen_softmax(dt(a), b != 0, (c & 1) != 0, (c & 2) != 0);
    case Family::LayerNorm:
      return gen_layer_norm(dt(a), (b & 1) != 0, (b & 2) != 0, (c & 1) != 0, (c & 2) != 0);
    case Family::Matmul:
      return gen_matmul(dt(a), b != 0, c != 0);
    case Family::MatmulCoop:
      return gen_matmul_coop(a != 0);
    case Family::Fused:
      return gen_fused(*fused, lin);
    case Family::Random:
      return gen_random(dt(a));
    case Family::Gather:
      return gen_gather(dt(a), b != 0);
    case Family::Scatter:
      return gen_scatter(dt(a), b != 0);
    case Family::IndexAdd:
      return gen_index_add(dt(a));
    case Family::Sort:
      return gen_sort(dt(a), b != 0);
    case Family::Unfold:
      return gen_unfold(dt(a));
    case Family::Fold:
      return gen_fold(dt(a));
    case Family::Pool:
      return gen_pool(static_cast<ir::PoolFn>(a), dt(b));
    case Family::MaxPoolGrad:
      return b ? gen_max_pool_share(dt(a)) : gen_max_pool_grad(dt(a));
    case Family::Nonzero:
      return gen_nonzero(dt(a), b != 0);
    case Family::Conv:
      return gen_conv(dt(a), static_cast<ir::ConvPass>(b));
    case Family::BatchNorm:
      return gen_batch_norm(dt(a), static_cast<BatchNormStage>(b), (c & 1) != 0, (c & 2) != 0);
  }
  EMBER_ASSERT(false);
}

bool KernelSpec::reports_errors() const {
  if (family == Family::Unary) {
    const auto dt = static_cast<DType>(b);
    return divides_ints(sx::expr(sx::def(static_cast<ir::UnaryFn>(a)), kind_of(dt)), dt);
  }
  if (family == Family::Binary) {
    const auto dt = static_cast<DType>(b);
    return divides_ints(sx::expr(sx::def(static_cast<ir::BinaryFn>(a)), kind_of(dt)), dt);
  }
  if (family == Family::Fused) return fused_reports_errors(*fused);
  return family == Family::Gather || family == Family::Scatter || family == Family::IndexAdd;
}

std::vector<std::string> KernelSpec::checked_ops() const {
  if (family != Family::Fused) {
    KernelSpec op = *this;  // the op's name, whichever walk ran it
    op.lin = 0;
    return {op.key()};
  }
  std::vector<std::string> out;
  for (std::size_t i = 0; i < fused->code.size(); ++i) {
    if (!instr_divides(*fused, i)) continue;
    const backend::FusedInstr& in = fused->code[i];
    const DType dt = fused->operand_dtype(i);
    out.push_back(in.kind == backend::FusedInstr::Kind::Unary ? unary_spec(in.unary, dt).key()
                                                              : binary_spec(in.binary, dt).key());
  }
  return out;
}

int KernelSpec::buffers() const {
  if (family == Family::Fused) return fused_buffers(*fused);
  if (family == Family::Gather || family == Family::Scatter || family == Family::IndexAdd) return 4;
  if (reports_errors()) return (family == Family::Binary ? 3 : 2) + 1;
  switch (family) {
    case Family::Fill:
    case Family::Arange:
    case Family::Random:
      return 1;
    case Family::MatmulCoop:
      return a ? 5 : 3;
    case Family::Binary:
    case Family::Matmul:
    case Family::Sort:
      return 3;
    case Family::Where:
    case Family::MaxPoolGrad:
      return 4;
    case Family::Nonzero:
      return b ? 3 : 2;
    case Family::Conv:
      return 3;
    case Family::BatchNorm: {
      const bool w = (c & 1) != 0, bb = (c & 2) != 0;
      switch (static_cast<BatchNormStage>(b)) {
        case BatchNormStage::Stats:
          return 2;
        case BatchNormStage::Apply:
          return 3 + w + bb;
        case BatchNormStage::GradSums:
          return 4;
        case BatchNormStage::GradInput:
          return 5 + w;
      }
      return 2;
    }
    case Family::LayerNorm:
      return 2 + (b & 1) + ((b >> 1) & 1);
    default:
      return 2;
  }
}

std::uint32_t KernelSpec::local_size() const { return family == Family::Matmul ? 256 : kLocal; }

std::uint64_t compute_bits(DType dt, double v) {
  switch (kind_of(dt)) {
    case Kind::Float:
      if (dt == DType::F64) return std::bit_cast<std::uint64_t>(v);
      return std::bit_cast<std::uint32_t>(static_cast<float>(v));
    case Kind::Bool:
      return v != 0;
    case Kind::Int:
      break;
  }
  // Saturating, NaN -> 0, as the host's conversions.
  if (std::isnan(v)) return 0;
  double lo = -9223372036854775808.0, hi = 9223372036854775807.0;
  if (dt == DType::I32) lo = -2147483648.0, hi = 2147483647.0;
  if (dt == DType::I16) lo = -32768, hi = 32767;
  if (dt == DType::I8) lo = -128, hi = 127;
  if (dt == DType::U8) lo = 0, hi = 255;
  if (v <= lo)
    return compute_bits_int(dt, dt == DType::I64 ? std::numeric_limits<std::int64_t>::min()
                                                 : static_cast<std::int64_t>(lo));
  if (v >= hi)
    return compute_bits_int(dt, dt == DType::I64 ? std::numeric_limits<std::int64_t>::max()
                                                 : static_cast<std::int64_t>(hi));
  return compute_bits_int(dt, static_cast<std::int64_t>(v));
}

std::uint64_t compute_bits_int(DType dt, std::int64_t v) {
  if (dt == DType::I64) return static_cast<std::uint64_t>(v);
  // Narrower types read one word: the value's low 32 bits, sign-extended by the constructor.
  return static_cast<std::uint32_t>(static_cast<std::int32_t>(v));
}

bool tuned(const char* word) {
  static const std::string words = [] {
    const char* e = std::getenv("EMBER_VULKAN_TUNE");
    std::string w = ",";
    return w.append(e != nullptr ? e : "").append(",");
  }();
  std::string w = ",";
  return words.find(w.append(word).append(",")) != std::string::npos;
}

std::vector<KernelSpec> all_specs(const std::vector<DType>& dtypes) {
  std::vector<KernelSpec> out;
  for (DType dt : dtypes) {
    for (std::size_t f = 0; f < sx::kNumUnary; ++f) {
      if (printable(static_cast<ir::UnaryFn>(f), dt))
        out.push_back(unary_spec(static_cast<ir::UnaryFn>(f), dt));
    }
    for (std::size_t f = 0; f < sx::kNumBinary; ++f) {
      if (printable(static_cast<ir::BinaryFn>(f), dt))
        out.push_back(binary_spec(static_cast<ir::BinaryFn>(f), dt));
    }
    out.push_back(where_spec(dt));
    out.push_back(copy_spec(dt));
    // The linear walks (a scalar second operand for the binary ones).
    std::vector<KernelSpec> lin = {where_spec(dt), copy_spec(dt)};
    if (printable(ir::UnaryFn::Abs, dt)) lin.push_back(unary_spec(ir::UnaryFn::Abs, dt));
    if (printable(ir::BinaryFn::Add, dt)) lin.push_back(binary_spec(ir::BinaryFn::Add, dt));
    for (KernelSpec k : lin) {
      k.lin = k.family == Family::Unary || k.family == Family::Copy ? 1u : 1u | (1u << 3);
      out.push_back(k);
    }
    out.push_back(fill_spec(dt));
    out.push_back(arange_spec(dt));
    out.push_back(random_spec(dt));
    for (bool f : {false, true}) {
      out.push_back(gather_spec(dt, f));
      out.push_back(scatter_spec(dt, f));
    }
    out.push_back(index_add_spec(dt));
    for (bool f : {false, true}) out.push_back(sort_spec(dt, f));
    out.push_back(unfold_spec(dt));
    if (kind_of(dt) == Kind::Float) out.push_back(fold_spec(dt));
    if (dt == DType::F32 || dt == DType::F64) {
      for (bool share : {false, true}) out.push_back(max_pool_grad_spec(dt, share));
    }
    for (bool write : {false, true}) out.push_back(nonzero_spec(dt, write));
    if (kind_of(dt) == Kind::Float) {
      for (auto pass : {ir::ConvPass::Forward, ir::ConvPass::InputGrad, ir::ConvPass::WeightGrad})
        out.push_back(conv_spec(dt, pass));
    }
    if (dt == DType::F32 || dt == DType::F64) {  // batch norm's dtypes (as the Cpu's)
      using S = BatchNormStage;
      out.push_back(batch_norm_spec(dt, S::Stats, false, false));
      out.push_back(batch_norm_spec(dt, S::GradSums, false, false));
      for (bool w : {false, true}) {
        out.push_back(batch_norm_spec(dt, S::GradInput, w, false));
        for (bool b : {false, true}) out.push_back(batch_norm_spec(dt, S::Apply, w, b));
      }
    }
    if (dt != DType::Bool) {
      out.push_back(pool_spec(ir::PoolFn::Max, dt));
      out.push_back(pool_spec(ir::PoolFn::Sum, dt));
    }
    for (DType to : dtypes) out.push_back(cast_spec(dt, to));
    for (int r = 0; r < static_cast<int>(ir::ReduceFn::Count_); ++r) {
      const auto fn = static_cast<ir::ReduceFn>(r);
      const bool logical = fn == ir::ReduceFn::Any || fn == ir::ReduceFn::All;
      const bool arg = fn == ir::ReduceFn::ArgMax || fn == ir::ReduceFn::ArgMin;
      if (dt == DType::Bool && !logical && !arg) continue;
      if (fn == ir::ReduceFn::Mean && kind_of(dt) != Kind::Float) continue;
      for (bool g : {false, true}) out.push_back(reduce_spec(fn, dt, g));
    }
    if (dt != DType::Bool) {
      for (int s = 0; s < static_cast<int>(ir::ScanFn::Count_); ++s) {
        for (bool g : {false, true}) out.push_back(scan_spec(static_cast<ir::ScanFn>(s), dt, g));
      }
    }
    if (kind_of(dt) == Kind::Float && dt != DType::F64) {
      out.push_back(softmax_spec(dt, false, true, true));
      out.push_back(softmax_spec(dt, true, true, true));
      for (bool g : {false, true}) {
        out.push_back(softmax_spec(dt, false, g, false));
        out.push_back(softmax_spec(dt, true, g, false));
      }
    }
    if (kind_of(dt) == Kind::Float) {
      out.push_back(layer_norm_spec(dt, true, false, true, true));
      for (bool g : {false, true}) {
        out.push_back(layer_norm_spec(dt, true, true, g, false));
        out.push_back(layer_norm_spec(dt, false, false, g, false));
      }
    }
    if (dt == DType::F16) {
      for (bool vec8 : {false, true}) out.push_back(matmul_coop_spec(vec8));
    }
    if (kind_of(dt) == Kind::Float) {
      for (bool large : {false, true}) {
        for (bool prefetch : {false, true}) out.push_back(matmul_spec(dt, large, prefetch));
      }
    }
  }
  return out;
}

}  // namespace ember::vulkan
