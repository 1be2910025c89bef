// The element-wise table (ir/scalar_table.hpp) against every implementation that is not
// printed from it at run time: cell by cell, each (function, dtype) of the Cpu's row
// kernels on every ISA it can run, and the f16 / bf16 cells through the Cpu backend, are
// compared with the table's expression evaluated by the f64 (floats) or exact (integers)
// interpreter over specials and random values. A cell the table defines and a kernel
// lacks, or the reverse, fails. Also: the table's own traits (names, Bool results, NaN
// propagation), the reductions' identities and combine steps, the printers' output (the
// C++ dialect compiled and run), and sign(-0) = +0.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include <ember/ember.hpp>

#include "cpu/kernels/combine.hpp"
#include "cpu/kernels/elementwise_table.hpp"
#include "ember/ir/scalar_table.hpp"
#include "ir/printed_cells.hpp"

using namespace ember;
namespace sx = ember::ir::sx;
using ir::BinaryFn;
using ir::UnaryFn;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<const cpu::ElementwiseTable*> isa_tables() {
  __builtin_cpu_init();
  std::vector<const cpu::ElementwiseTable*> t = {&cpu::isa_generic::elementwise_table()};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    t.push_back(&cpu::isa_avx2::elementwise_table());
  }
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq")) {
    t.push_back(&cpu::isa_avx512::elementwise_table());
  }
  return t;
}

// Calls f.template operator()<T>() for each element type the Cpu row kernels take.
template <class F>
void for_each_row_type(F&& f) {
  f.template operator()<double>();
  f.template operator()<float>();
  f.template operator()<std::int64_t>();
  f.template operator()<std::int32_t>();
  f.template operator()<std::int16_t>();
  f.template operator()<std::int8_t>();
  f.template operator()<std::uint8_t>();
  f.template operator()<bool>();
}

// A row of elements of T (bool included: std::vector<bool> has no data()).
template <class T>
class Values {
 public:
  using Store = std::conditional_t<std::is_same_v<T, bool>, unsigned char, T>;
  void push_back(T x) { v_.push_back(static_cast<Store>(x)); }
  T operator[](std::size_t i) const { return static_cast<T>(v_[i]); }
  std::size_t size() const { return v_.size(); }
  void resize(std::size_t n) { v_.resize(n); }
  const T* data() const { return reinterpret_cast<const T*>(v_.data()); }
  const T* at(std::size_t i) const { return data() + i; }

 private:
  std::vector<Store> v_;
};

// Float operands: signed zeros, infinities, NaN, the activations' cut-offs, tiny and huge
// magnitudes, then log-uniform random values of both signs.
std::vector<double> float_values(std::uint64_t seed, bool trig) {
  std::vector<double> v = {0.0,    -0.0,  1.0,    -1.0,  0.5,   -0.5,  2.0,    -2.0, 3.0,   kInf,
                           -kInf,  kNaN,  40.5,   -40.5, -39.5, 200.5, -200.5, 1e-6, -1e-6, 1e-30,
                           -1e-30, 0.999, -0.999, 1.001, 10.0,  -10.0, 1.5,    2.5,  -2.5,  0.25};
  if (!trig) {  // vmath's sin / cos / tan reduce accurately only for |x| <= 1e5
    for (double h : {1e30, -1e30, 1e200, -1e200, 88.0, -88.0, 710.0, -710.0}) v.push_back(h);
  }
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> mag(-6.0, 3.0), coin(0, 1);
  for (int i = 0; i < 300; ++i) {
    const double m = std::pow(10.0, mag(rng));
    v.push_back(coin(rng) < 0.5 ? -m : m);
  }
  return v;
}

template <class T>
Values<T> int_values(std::uint64_t seed) {
  Values<T> v;
  if constexpr (std::is_same_v<T, bool>) {
    v.push_back(false);
    v.push_back(true);
  } else {
    using L = std::numeric_limits<T>;
    for (T x : {T(0), T(1), T(2), T(3), T(7), T(8), L::max(), L::lowest(), T(L::max() - 1),
                T(L::lowest() + 1)})
      v.push_back(x);
    if constexpr (std::is_signed_v<T>) {
      for (T x : {T(-1), T(-2), T(-3), T(-7), T(-8)}) v.push_back(x);
    }
    std::mt19937_64 rng(seed);
    for (int i = 0; i < 60; ++i) v.push_back(static_cast<T>(rng()));  // the whole range
    for (int i = 0; i < 60; ++i) v.push_back(static_cast<T>(static_cast<int>(rng() % 41) - 20));
  }
  return v;
}

bool trig_like(UnaryFn f) { return f == UnaryFn::Sin || f == UnaryFn::Cos || f == UnaryFn::Tan; }

// Parameter sets (p0, p1) each unary function is checked with.
std::vector<std::pair<double, double>> params(UnaryFn f, bool ints) {
  switch (f) {
    case UnaryFn::LeakyRelu:
      return {{0.1, 0}, {-2.0, 0}};
    case UnaryFn::Elu:
      return {{1.3, 0}};
    case UnaryFn::Clamp:
      if (ints) return {{-3, 5}, {0, 0}, {1, 100}};
      return {{-0.5, 0.7}, {kNaN, 0.7}, {-0.5, kNaN}, {2, 2}};
    case UnaryFn::PowScalar:
      return {{2, 0}, {0.5, 0}, {3, 0}, {-1.5, 0}, {0, 0}};
    default:
      return {{0, 0}};
  }
}

// Whether got (computed in T) matches the f64 reference: NaN for NaN, signed zeros equal,
// else within a few ulp of T relative to `scale` (the result, or for binary functions
// logaddexp the largest of result and operands: max + log1p(...) rounds at the operands'
// magnitude), and absolutely near zero and for subnormals.
template <class T>
bool close(double got, double ref, double scale = 0) {
  if (std::isnan(ref) || std::isnan(got)) return std::isnan(ref) && std::isnan(got);
  if (std::isinf(ref) || std::isinf(got)) return got == ref;
  if (got == 0 && ref == 0) return std::signbit(got) == std::signbit(ref);
  const double rel = std::is_same_v<T, float> ? 4e-6 : 1e-13;
  const double abs = std::is_same_v<T, float> ? 1e-37 : 1e-80;
  return std::fabs(got - ref) <= rel * std::max(std::fabs(ref), scale) + abs;
}

std::string show(double v) {
  char b[48];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

}  // namespace

TEST(ScalarTable, EveryFunctionIsDefinedAndNamed) {
  std::set<std::string> names;
  for (std::size_t i = 0; i < sx::kNumUnary; ++i) {
    const auto f = static_cast<UnaryFn>(i);
    ASSERT_NE(ir::name(f), nullptr);
    EXPECT_TRUE(names.insert(ir::name(f)).second) << ir::name(f);
    EXPECT_TRUE(sx::defined_for(f, DType::F32) || sx::defined_for(f, DType::I32) ||
                sx::defined_for(f, DType::Bool))
        << ir::name(f);
  }
  for (std::size_t i = 0; i < sx::kNumBinary; ++i) {
    const auto f = static_cast<BinaryFn>(i);
    EXPECT_TRUE(names.insert(ir::name(f)).second) << ir::name(f);
  }
  // Bool results: exactly the predicates and the comparisons.
  for (UnaryFn f : {UnaryFn::IsNan, UnaryFn::IsInf, UnaryFn::IsFinite}) {
    EXPECT_EQ(sx::result_dtype(f, DType::F16), DType::Bool);
  }
  EXPECT_EQ(sx::result_dtype(UnaryFn::Exp, DType::BF16), DType::BF16);
  for (BinaryFn f :
       {BinaryFn::Eq, BinaryFn::Ne, BinaryFn::Gt, BinaryFn::Ge, BinaryFn::Lt, BinaryFn::Le}) {
    EXPECT_EQ(sx::result_dtype(f, DType::I8), DType::Bool);
    EXPECT_TRUE(sx::defined_for(f, DType::Bool));
  }
  EXPECT_EQ(sx::result_dtype(BinaryFn::Hypot, DType::F64), DType::F64);
  EXPECT_FALSE(sx::defined_for(BinaryFn::Pow, DType::I32));
  EXPECT_FALSE(sx::defined_for(UnaryFn::Deg2Rad, DType::I64));
  EXPECT_TRUE(sx::defined_for(BinaryFn::Shl, DType::U8));
  EXPECT_FALSE(sx::defined_for(BinaryFn::And, DType::F32));
}

// Propagates: a NaN operand gives NaN, by the table's own definition.
TEST(ScalarTable, NanPropagationTrait) {
  const std::vector<double> others = {0.0, -0.0, 1.0, -3.5, kInf, -kInf, 1e300};
  for (std::size_t i = 0; i < sx::kNumUnary; ++i) {
    const auto& d = sx::kUnaryDefs[i];
    if (d.flt.empty() || d.nan != sx::NanRule::Propagates) continue;
    for (const auto& [p0, p1] : params(static_cast<UnaryFn>(i), false)) {
      EXPECT_TRUE(std::isnan(sx::eval_float(d.flt, kNaN, 0, p0, p1))) << d.name;
    }
  }
  for (std::size_t i = 0; i < sx::kNumBinary; ++i) {
    const auto& d = sx::kBinaryDefs[i];
    if (d.flt.empty() || d.nan != sx::NanRule::Propagates) continue;
    for (double o : others) {
      EXPECT_TRUE(std::isnan(sx::eval_float(d.flt, kNaN, o))) << d.name << " (NaN, " << o << ")";
      EXPECT_TRUE(std::isnan(sx::eval_float(d.flt, o, kNaN))) << d.name << " (" << o << ", NaN)";
    }
  }
  // The IEEE exceptions the table declares.
  EXPECT_EQ(sx::eval_float(sx::def(BinaryFn::Hypot).flt, kInf, kNaN), kInf);
  EXPECT_EQ(sx::eval_float(sx::def(BinaryFn::Pow).flt, kNaN, 0.0), 1.0);
}

TEST(ScalarTable, SignOfNegativeZeroIsPositiveZero) {
  const double s = sx::eval_float(sx::def(UnaryFn::Sign).flt, -0.0);
  EXPECT_EQ(s, 0.0);
  EXPECT_FALSE(std::signbit(s));
  EXPECT_TRUE(std::isnan(sx::eval_float(sx::def(UnaryFn::Sign).flt, kNaN)));
  // And on the Cpu backend, every float dtype (f16 / bf16 are widened to f32).
  for (DType dt : {DType::F64, DType::F32, DType::F16, DType::BF16}) {
    auto x = Tensor<1>::from_data(TensorData::from<double>({-0.0, 0.0, -2.0, 3.0}).convert(dt),
                                  Device::cpu());
    const auto v = x.sign().to_data().convert(DType::F64).to_vector<double>();
    ASSERT_EQ(v.size(), 4u);
    EXPECT_EQ(v[0], 0.0);
    EXPECT_FALSE(std::signbit(v[0])) << name(dt);
    EXPECT_FALSE(std::signbit(v[1])) << name(dt);
    EXPECT_EQ(v[2], -1.0);
    EXPECT_EQ(v[3], 1.0);
  }
}

// Every unary cell of every Cpu ISA table against the table's expression.
TEST(ScalarTable, CpuUnaryKernelsMatchTheTable) {
  const auto tables = isa_tables();
  std::size_t cells = 0;
  for (std::size_t fi = 0; fi < sx::kNumUnary; ++fi) {
    const auto fn = static_cast<UnaryFn>(fi);
    const sx::FnDef& d = sx::def(fn);
    for_each_row_type([&]<class T>() {
      const DType dt = dtype_of<T>();
      const std::size_t di = static_cast<std::size_t>(dt);
      const bool defined = sx::defined_for(fn, dt);
      for (const auto* table : tables) {
        const auto row = table->unary[fi][di];
        ASSERT_EQ(row != nullptr, defined)
            << d.name << " for " << name(dt) << " on " << table->isa
            << (defined ? ": the table defines it, the Cpu has no kernel"
                        : ": the Cpu has a kernel the table does not define");
        if (!defined) continue;
        ++cells;
        const sx::Expr& e = sx::expr(d, kind_of(dt));
        const bool pred = sx::gives_bool(fn);
        for (const auto& [p0, p1] : params(fn, !std::is_floating_point_v<T>)) {
          Values<T> x;
          if constexpr (std::is_floating_point_v<T>) {
            for (double v : float_values(fi * 31 + di, trig_like(fn))) x.push_back(T(v));
          } else {
            x = int_values<T>(fi * 31 + di);
          }
          std::vector<unsigned char> y(x.size() * sizeof(T));
          row(x.data(), y.data(), x.size(), p0, p1);
          for (std::size_t i = 0; i < x.size(); ++i) {
            if constexpr (std::is_floating_point_v<T>) {
              const double ref = sx::eval_float(e, double(x[i]), 0, double(T(p0)), double(T(p1)));
              double got;
              if (pred) {
                got = reinterpret_cast<const bool*>(y.data())[i] ? 1.0 : 0.0;
              } else {
                got = double(reinterpret_cast<const T*>(y.data())[i]);
              }
              // The reference is rounded to T once, as the kernel's result is.
              const double want = pred ? ref : double(T(ref));
              // gelu_tanh's f32 tail amplifies the rounding of its argument (vmath.hpp's
              // known limits): there its contract is an absolute error below 1e-9.
              const double scale = fn == UnaryFn::GeluTanh && std::is_same_v<T, float> ? 2.5e-4 : 0;
              ASSERT_TRUE(close<T>(got, want, scale))
                  << d.name << "(" << show(double(x[i])) << ", p0 = " << p0 << ") in " << name(dt)
                  << " on " << table->isa << ": got " << show(got) << ", table " << show(want);
            } else {
              const auto p0i = static_cast<std::int64_t>(static_cast<T>(p0));
              const auto p1i = static_cast<std::int64_t>(static_cast<T>(p1));
              const std::int64_t ref =
                  sx::eval_int(e, dt, static_cast<std::int64_t>(x[i]), 0, p0i, p1i);
              std::int64_t got;
              if (pred) {
                got = reinterpret_cast<const bool*>(y.data())[i];
              } else {
                got = static_cast<std::int64_t>(reinterpret_cast<const T*>(y.data())[i]);
              }
              ASSERT_EQ(got, ref) << d.name << "(" << static_cast<std::int64_t>(x[i]) << ") in "
                                  << name(dt) << " on " << table->isa;
            }
          }
        }
      }
    });
  }
  EXPECT_GT(cells, 100u);
}

// Every binary cell, with both operands as rows and each one broadcast.
TEST(ScalarTable, CpuBinaryKernelsMatchTheTable) {
  const auto tables = isa_tables();
  std::size_t cells = 0;
  for (std::size_t fi = 0; fi < sx::kNumBinary; ++fi) {
    const auto fn = static_cast<BinaryFn>(fi);
    const sx::FnDef& d = sx::def(fn);
    for_each_row_type([&]<class T>() {
      const DType dt = dtype_of<T>();
      const std::size_t di = static_cast<std::size_t>(dt);
      const bool defined = sx::defined_for(fn, dt);
      for (const auto* table : tables) {
        const auto row = table->binary[fi][di];
        ASSERT_EQ(row != nullptr, defined)
            << d.name << " for " << name(dt) << " on " << table->isa
            << (defined ? ": the table defines it, the Cpu has no kernel"
                        : ": the Cpu has a kernel the table does not define");
        if (!defined) continue;
        ++cells;
        const sx::Expr& e = sx::expr(d, kind_of(dt));
        Values<T> v;
        if constexpr (std::is_floating_point_v<T>) {
          for (double x : float_values(fi * 17 + di, false)) v.push_back(T(x));
          v.resize(std::min<std::size_t>(v.size(), 90));
        } else {
          v = int_values<T>(fi * 17 + di);
          if constexpr (!std::is_same_v<T, bool>) {
            if (fn == BinaryFn::Shl || fn == BinaryFn::Shr) {  // shifts around the width
              for (int s = -2; s <= int(sizeof(T) * 8) + 1; ++s) v.push_back(static_cast<T>(s));
            }
          }
        }
        // All pairs (a, b): a as rows, b as rows, or b broadcast.
        Values<T> a, b;
        for (std::size_t i = 0; i < v.size(); ++i) {
          for (std::size_t j = 0; j < v.size(); ++j) {
            a.push_back(v[i]);
            b.push_back(v[j]);
          }
        }
        const bool pred = sx::gives_bool(fn);
        std::vector<unsigned char> out(a.size() * sizeof(T));
        const auto check = [&](std::size_t i, T x, T y, const char* how) {
          if constexpr (std::is_floating_point_v<T>) {
            const double ref = sx::eval_float(e, double(x), double(y));
            const double got = pred ? double(reinterpret_cast<const bool*>(out.data())[i])
                                    : double(reinterpret_cast<const T*>(out.data())[i]);
            const double want = pred ? ref : double(T(ref));
            const double m = std::max(std::fabs(double(x)), std::fabs(double(y)));
            const double scale = fn == BinaryFn::LogAddExp && std::isfinite(m) ? m : 0;
            ASSERT_TRUE(close<T>(got, want, scale))
                << d.name << "(" << show(double(x)) << ", " << show(double(y)) << ") in "
                << name(dt) << " on " << table->isa << " " << how << ": got " << show(got)
                << ", table " << show(want);
          } else {
            const std::int64_t ref =
                sx::eval_int(e, dt, static_cast<std::int64_t>(x), static_cast<std::int64_t>(y));
            const std::int64_t got =
                pred ? std::int64_t(reinterpret_cast<const bool*>(out.data())[i])
                     : static_cast<std::int64_t>(reinterpret_cast<const T*>(out.data())[i]);
            ASSERT_EQ(got, ref) << d.name << "(" << static_cast<std::int64_t>(x) << ", "
                                << static_cast<std::int64_t>(y) << ") in " << name(dt) << " on "
                                << table->isa << " " << how;
          }
        };
        row(a.data(), b.data(), out.data(), a.size(), false, false);
        for (std::size_t i = 0; i < a.size(); ++i) check(i, a[i], b[i], "(rows)");
        for (std::size_t k = 0; k < v.size(); k += 7) {  // b broadcast, then a broadcast
          row(v.data(), v.at(k), out.data(), v.size(), false, true);
          for (std::size_t i = 0; i < v.size(); ++i) check(i, v[i], v[k], "(b scalar)");
          row(v.at(k), v.data(), out.data(), v.size(), true, false);
          for (std::size_t i = 0; i < v.size(); ++i) check(i, v[k], v[i], "(a scalar)");
        }
      }
    });
  }
  EXPECT_GT(cells, 80u);
}

// f16 and bf16 have no Cpu row kernels of their own: the backend computes them in f32.
// Each cell the table defines runs, and matches the table on the 16-bit inputs.
TEST(ScalarTable, CpuSixteenBitCellsMatchTheTable) {
  const Device dev = Device::cpu();
  for (DType dt : {DType::F16, DType::BF16}) {
    std::vector<double> xs;
    for (double v : float_values(7, true)) xs.push_back(v);
    TensorData xd = TensorData::from<double>(xs).convert(dt);
    const std::vector<double> xr = xd.convert(DType::F64).to_vector<double>();  // rounded
    const double eps = dt == DType::F16 ? 0x1p-10 : 0x1p-7;
    for (std::size_t fi = 0; fi < sx::kNumUnary; ++fi) {
      const auto fn = static_cast<UnaryFn>(fi);
      if (!sx::defined_for(fn, dt)) continue;
      const sx::FnDef& d = sx::def(fn);
      for (const auto& [p0, p1] : params(fn, false)) {
        auto x = DynTensor::from_data(xd, dev);
        const auto y = ops::unary(fn, x, p0, p1).to_data();
        ASSERT_EQ(y.dtype(), sx::result_dtype(fn, dt)) << d.name;
        const auto got = y.convert(DType::F64).to_vector<double>();
        for (std::size_t i = 0; i < xr.size(); ++i) {
          // f32 arguments (the parameters too), one rounding of the result to dt.
          const double ref = sx::eval_float(d.flt, xr[i], 0, double(float(p0)), double(float(p1)));
          const double want = sx::gives_bool(fn) ? ref
                                                 : TensorData::from<double>({ref})
                                                       .convert(dt)
                                                       .convert(DType::F64)
                                                       .to_vector<double>()[0];
          const bool ok = (std::isnan(got[i]) && std::isnan(want)) || got[i] == want ||
                          std::fabs(got[i] - want) <= 2 * eps * std::fabs(want) + 1e-7;
          ASSERT_TRUE(ok) << d.name << "(" << show(xr[i]) << ") in " << name(dt) << ": got "
                          << show(got[i]) << ", table " << show(want);
        }
      }
    }
  }
}

// The reductions' identities and combine steps: the Cpu's Combine is the table's.
TEST(ScalarTable, ReductionIdentitiesAndSteps) {
  EXPECT_EQ((cpu::Combine<ir::ReduceFn::Sum, float>::init()), 0.0f);
  EXPECT_EQ((cpu::Combine<ir::ReduceFn::Prod, std::int32_t>::init()), 1);
  EXPECT_EQ((cpu::Combine<ir::ReduceFn::Max, double>::init()), -kInf);
  EXPECT_EQ((cpu::Combine<ir::ReduceFn::Min, float>::init()),
            std::numeric_limits<float>::infinity());
  EXPECT_EQ((cpu::Combine<ir::ReduceFn::Max, std::int8_t>::init()), -128);
  EXPECT_EQ((cpu::Combine<ir::ReduceFn::Min, std::uint8_t>::init()), 255);
  EXPECT_EQ(sx::eval_int(sx::reduction(ir::ReduceFn::Max).identity, DType::I16, 0), -32768);
  EXPECT_EQ(sx::eval_float(sx::reduction(ir::ReduceFn::Min).identity, 0), kInf);
  EXPECT_TRUE(std::isnan((cpu::Combine<ir::ReduceFn::Max, float>::apply(std::nanf(""), 1.0f))));
  EXPECT_TRUE(std::isnan((cpu::Combine<ir::ReduceFn::Max, float>::apply(1.0f, std::nanf("")))));
  EXPECT_TRUE(std::isnan((cpu::Combine<ir::ReduceFn::Min, double>::apply(kNaN, -kInf))));
  EXPECT_EQ((cpu::Combine<ir::ReduceFn::Sum, std::int8_t>::apply(127, 1)), -128);  // wraps
  EXPECT_EQ((cpu::Combine<ir::ReduceFn::Max, bool>::apply(false, true)), true);
  for (ir::ReduceFn f : {ir::ReduceFn::Sum, ir::ReduceFn::Prod, ir::ReduceFn::Max,
                         ir::ReduceFn::Min, ir::ReduceFn::Any, ir::ReduceFn::All}) {
    EXPECT_FALSE(sx::reduction(f).identity.empty()) << ir::name(f);
  }
}

// The printers: every cell prints in every dialect; spot checks of the forms.
TEST(ScalarTable, PrintersCoverEveryCell) {
  const DType dts[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                       DType::I32, DType::I16, DType::I8,  DType::U8,   DType::Bool};
  for (auto dialect : {sx::Dialect::Cuda, sx::Dialect::Cpp}) {
    for (DType dt : dts) {
      for (const auto& d : sx::kUnaryDefs) {
        const sx::Expr& e = sx::expr(d, kind_of(dt));
        if (!e.empty()) {
          EXPECT_FALSE(sx::print(e, dialect, dt).value.empty()) << d.name;
        }
      }
      for (const auto& d : sx::kBinaryDefs) {
        const sx::Expr& e = sx::expr(d, kind_of(dt));
        if (!e.empty()) {
          EXPECT_FALSE(sx::print(e, dialect, dt).value.empty()) << d.name;
        }
      }
    }
  }
  // Integer arithmetic wraps through U; a repeated subtree is computed once.
  EXPECT_EQ(sx::print(sx::def(BinaryFn::Add).integer, sx::Dialect::Cuda, DType::I32).value,
            "(C)((U)a + (U)b)");
  sx::Names x_names;
  x_names.a = "x";
  const auto sig =
      sx::print(sx::def(UnaryFn::Sigmoid).flt, sx::Dialect::Cuda, DType::F32, x_names, "  ");
  EXPECT_EQ(sig.statements, "  const C t0 = m_exp((-m_fabs(x)));\n");
  EXPECT_EQ(sig.value, "(((x >= (C)0) ? (C)1 : t0) / ((C)1 + t0))");
  EXPECT_EQ(sx::print(sx::def(BinaryFn::Max).flt, sx::Dialect::Cpp, DType::F64).value,
            "(((a != a) || (a > b)) ? a : b)");
  EXPECT_EQ(sx::print(sx::def(UnaryFn::Exp).flt, sx::Dialect::Cpp, DType::F64).value,
            "std::exp(a)");
}

// The C++ dialect, compiled: every cell printed by print_scalar_cpp (tests/CMakeLists.txt)
// gives the interpreters' values.
TEST(ScalarTable, PrintedCppMatchesTheInterpreters) {
  std::set<std::tuple<bool, std::size_t, DType>> printed;
  for (const PrintedCell& c : printed_cells()) printed.insert({c.binary, c.fn, c.dtype});
  std::size_t expected = 0;
  for_each_row_type([&]<class T>() {
    const DType dt = dtype_of<T>();
    for (std::size_t i = 0; i < sx::kNumUnary; ++i) {
      if (!sx::defined_for(sx::kUnaryDefs[i], kind_of(dt))) continue;
      ++expected;
      EXPECT_EQ(printed.count({false, i, dt}), 1u) << sx::kUnaryDefs[i].name << " " << name(dt);
    }
    for (std::size_t i = 0; i < sx::kNumBinary; ++i) {
      if (!sx::defined_for(sx::kBinaryDefs[i], kind_of(dt))) continue;
      ++expected;
      EXPECT_EQ(printed.count({true, i, dt}), 1u) << sx::kBinaryDefs[i].name << " " << name(dt);
    }
  });
  EXPECT_EQ(printed_cells().size(), expected);
  for (const PrintedCell& c : printed_cells()) {
    const sx::FnDef& d = c.binary ? sx::kBinaryDefs[c.fn] : sx::kUnaryDefs[c.fn];
    const sx::Expr& e = sx::expr(d, kind_of(c.dtype));
    const auto ps = c.binary ? std::vector<std::pair<double, double>>{{0, 0}}
                             : params(static_cast<UnaryFn>(c.fn), kind_of(c.dtype) != Kind::Float);
    for_each_row_type([&]<class T>() {
      if (dtype_of<T>() != c.dtype) return;
      Values<T> v;
      if constexpr (std::is_floating_point_v<T>) {
        for (double x : float_values(c.fn, false)) v.push_back(T(x));
        v.resize(std::min<std::size_t>(v.size(), 60));
      } else {
        // The cells take doubles: i64 values stay within 2^53, where doubles are exact.
        const Values<T> all = int_values<T>(c.fn);
        for (std::size_t i = 0; i < all.size(); ++i) {
          if (std::fabs(double(all[i])) <= 9007199254740992.0) v.push_back(all[i]);
        }
      }
      for (const auto& [p0, p1] : ps) {
        for (std::size_t i = 0; i < v.size(); ++i) {
          for (std::size_t j = 0; j < (c.binary ? v.size() : 1); ++j) {
            const double a = double(v[i]), b = c.binary ? double(v[j]) : 0.0;
            const double got = c.f(a, b, p0, p1);
            if constexpr (std::is_floating_point_v<T>) {
              const double ref = sx::eval_float(e, a, b, double(T(p0)), double(T(p1)));
              const double want = d.result == sx::Result::Bool ? ref : double(T(ref));
              const double m = std::max(std::fabs(a), std::fabs(b));
              const double scale = c.binary && std::isfinite(m) ? m : 0;
              ASSERT_TRUE(close<T>(got, want, scale))
                  << d.name << "(" << show(a) << ", " << show(b) << ") in " << name(c.dtype)
                  << ": printed C++ " << show(got) << ", interpreter " << show(want);
            } else {
              const std::int64_t ref = sx::eval_int(e, c.dtype, static_cast<std::int64_t>(v[i]),
                                                    c.binary ? static_cast<std::int64_t>(v[j]) : 0,
                                                    static_cast<std::int64_t>(static_cast<T>(p0)),
                                                    static_cast<std::int64_t>(static_cast<T>(p1)));
              ASSERT_EQ(static_cast<std::int64_t>(got), ref)
                  << d.name << "(" << a << ", " << b << ") in " << name(c.dtype);
            }
          }
        }
      }
    });
  }
}
