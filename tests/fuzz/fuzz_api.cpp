// ember's property-based API fuzzer: seeded random calls with adversarial arguments (huge,
// zero and negative-as-size_t sizes, dims out of range, every dtype mixed, NaN and inf
// scalars, non-contiguous views) against every public function family of
// ember/tensor/ops.hpp, activation.hpp and module_ops.hpp.
//
// Calls run in forked children (a batch each, every call under its own time limit). The
// oracle: a call either throws ember::Error, or returns a result whose shape — and, where
// a host reference is cheap, whose values — agree with the host reference; where the host
// says the arguments are invalid, only an ember::Error will do. A crash, a hang, a foreign
// exception or a disagreement fails the run and prints the reproducer: the seed, the call's
// index and the call as text. `ember_fuzz --seed S --only I` reruns one call in-process.
//
// Usage: ember_fuzz [--seed S] [--calls N] [--batch B] [--limit SECONDS] [--only I] [-v]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <typeinfo>
#include <utility>
#include <vector>

#include <ember/ember.hpp>

namespace {

using namespace ember;
using ir::BinaryFn;
using ir::ReduceFn;
using ir::ScanFn;
using ir::UnaryFn;

// An oracle disagreement (deliberately not a std::exception).
struct Mismatch {
  std::string what;
};

constexpr std::size_t kSizeMax = std::numeric_limits<std::size_t>::max();
const std::vector<DType> kDTypes{DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                                 DType::I32, DType::I16, DType::I8,  DType::U8,   DType::Bool};

std::string str(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}
std::string str(const std::vector<std::size_t>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}
std::string str(const std::vector<std::int64_t>& v) {
  std::string s = "{";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "}";
}

// ---- host reference helpers ----

struct Host {
  Shape shape;
  DType dtype;
  std::vector<double> v;
};
Host host(const DynTensor& x) {
  auto d = x.to_data();
  return {d.shape(), d.dtype(), d.to_vector<double>()};
}
std::vector<std::size_t> unravel(std::size_t p, const Shape& s) {
  std::vector<std::size_t> idx(s.rank());
  for (std::size_t d = s.rank(); d-- > 0;) {
    idx[d] = s[d] ? p % s[d] : 0;
    p = s[d] ? p / s[d] : 0;
  }
  return idx;
}
std::size_t ravel(const std::vector<std::size_t>& idx, const Shape& s) {
  std::size_t p = 0;
  for (std::size_t d = 0; d < s.rank(); ++d) p = p * s[d] + idx[d];
  return p;
}
// The element count, or nullopt when it overflows (the host's own checked product).
std::optional<std::size_t> count(const Shape& s) {
  std::size_t n = 1;
  for (std::size_t d : s) {
    if (__builtin_mul_overflow(n, d, &n)) return std::nullopt;
  }
  return n;
}
// True when a valid call could allocate between 2^24 elements and what a machine can
// hold: the generator tames such calls (makes their sizes small), so that a run never
// exhausts memory; beyond 2^44 elements every call must be an ember::Error.
bool dangerous(std::optional<std::size_t> n) {
  return n && *n > (std::size_t{1} << 24) && *n < (std::size_t{1} << 44);
}
std::optional<std::size_t> mul(std::optional<std::size_t> a, std::optional<std::size_t> b) {
  std::size_t r = 0;
  if (!a || !b || __builtin_mul_overflow(*a, *b, &r)) return std::nullopt;
  return r;
}
std::pair<double, double> range_of(DType t) {
  switch (t) {
    case DType::I64:  // an i64 clamp bound is a double: the largest below 2^63
      return {-0x1p63, 9.2233720368547748e18};
    case DType::I32:
      return {-2147483648.0, 2147483647.0};
    case DType::I16:
      return {-32768.0, 32767.0};
    case DType::I8:
      return {-128.0, 127.0};
    case DType::U8:
      return {0.0, 255.0};
    default:
      return {0.0, 1.0};
  }
}
bool same_value(double a, double b) { return (std::isnan(a) && std::isnan(b)) || a == b; }

void expect_shape(const DynTensor& y, const Shape& want, const std::string& what = "result") {
  if (y.shape() != want) {
    throw Mismatch{what + " has shape " + y.shape().to_string() + ", expected " + want.to_string()};
  }
}
void expect_values(const DynTensor& y, const std::vector<double>& want, double tol = 0) {
  const auto got = y.to_data().to_vector<double>();
  if (got.size() != want.size()) {
    throw Mismatch{"result has " + std::to_string(got.size()) + " elements, expected " +
                   std::to_string(want.size())};
  }
  for (std::size_t i = 0; i < got.size(); ++i) {
    const bool ok = same_value(got[i], want[i]) ||
                    (tol > 0 && std::fabs(got[i] - want[i]) <= tol * (1 + std::fabs(want[i])));
    if (!ok) {
      throw Mismatch{"element " + std::to_string(i) + " is " + str(got[i]) + ", expected " +
                     str(want[i])};
    }
  }
}
[[noreturn]] void accepted_invalid(const std::string& why) {
  throw Mismatch{"returned a result for invalid arguments (" + why + ")"};
}

// ---- the generator ----

class Gen {
 public:
  explicit Gen(std::uint64_t seed) : rng_(seed) {}
  std::size_t below(std::size_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng_() % n); }
  bool coin(double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  template <class T>
  T pick(std::initializer_list<T> v) {
    return *(v.begin() + below(v.size()));
  }
  DType dtype() { return kDTypes[below(kDTypes.size())]; }
  DType float_dtype() {
    return coin(0.9) ? pick({DType::F64, DType::F32, DType::F16, DType::BF16}) : dtype();
  }
  // A size: mostly small, sometimes adversarial (huge, wrapping, negative as size_t).
  std::size_t size() {
    if (coin(0.8)) return below(5);
    return pick<std::size_t>(
        {0, 1, 2, 3, 7, 64, std::size_t{1} << 31, std::size_t{1} << 32, std::size_t{1} << 40,
         std::size_t{1} << 61, (std::size_t{1} << 61) + 1, std::size_t{1} << 62,
         std::size_t{1} << 63, kSizeMax, kSizeMax - 1, kSizeMax - 2, 6148914691236517206ull});
  }
  std::vector<std::size_t> sizes(std::size_t n) {
    std::vector<std::size_t> v(n);
    for (auto& s : v) s = size();
    return v;
  }
  // A dim for a tensor of `rank`: mostly valid (either sign), sometimes wild.
  std::int64_t dim(std::size_t rank) {
    const auto r = static_cast<std::int64_t>(rank);
    if (coin(0.85) && r > 0) return static_cast<std::int64_t>(below(2 * rank)) - r;
    return pick<std::int64_t>({-r - 1, r, r + 1, 0, -100, std::numeric_limits<std::int64_t>::min(),
                               std::numeric_limits<std::int64_t>::max()});
  }
  std::int64_t integer() {
    if (coin(0.8)) return static_cast<std::int64_t>(below(9)) - 4;
    return pick<std::int64_t>({std::numeric_limits<std::int64_t>::min(),
                               std::numeric_limits<std::int64_t>::max(), -1000, 1000,
                               std::int64_t{1} << 40, -(std::int64_t{1} << 62)});
  }
  double scalar() {
    if (coin(0.5)) return static_cast<double>(static_cast<std::int64_t>(below(7)) - 3);
    const double inf = std::numeric_limits<double>::infinity();
    return pick<double>({0.5,    -2.5,   3.7,        std::nan(""), inf,     -inf,   1e300,
                         -1e300, 127,    128,        255,          256,     -129,   65504,
                         70000,  0x1p31, 0x1p53 + 2, 0x1p63,       -0x1p63, 1e-310, -0.0});
  }
  Shape shape(std::size_t rank) {
    std::vector<std::size_t> d(rank);
    for (auto& e : d) e = coin(0.1) ? 0 : 1 + below(3);
    return Shape(std::move(d));
  }
  std::size_t rank() { return 1 + below(4); }

  // A small tensor of shape s and dtype t, sometimes a non-contiguous view; `desc` gets
  // its description.
  DynTensor tensor(const Shape& s, DType t, std::string& desc) {
    const Device dev = Device::cpu();
    const std::size_t n = s.num_elements();
    std::vector<double> v(n);
    for (auto& e : v) e = value(t);
    DynTensor x = ops::from_data(TensorData::from<double>(v, s).convert(t), dev);
    desc += name(t) + s.to_string();
    if (s.rank() >= 2 && coin(0.25)) {
      // The same values through a transposed view of a transposed copy.
      x = ops::transpose(ops::from_data(ops::transpose(x).to_data(), dev));
      desc += "(strided)";
    } else if (coin(0.1)) {
      std::vector<std::size_t> ones(s.rank(), 1);
      bool expandable = true;
      for (std::size_t i = 0; i < s.rank(); ++i) expandable = expandable && s[i] > 0;
      if (expandable && n > 0) {
        // A broadcast view of element 0 (all values equal).
        auto first = ops::reshape(ops::narrow(ops::reshape(x, Shape{n}), 0, 0, 1), Shape(ones));
        x = ops::expand(first, s);
        desc += "(expanded)";
      }
    }
    return x;
  }
  DynTensor tensor(std::size_t rank, DType t, std::string& desc) {
    return tensor(shape(rank), t, desc);
  }
  DynTensor tensor(std::string& desc) { return tensor(rank(), dtype(), desc); }

 private:
  double value(DType t) {
    if (t == DType::Bool) return static_cast<double>(below(2));
    if (is_int(t)) {
      if (coin(0.9)) return static_cast<double>(static_cast<std::int64_t>(below(11)) - 5);
      return t == DType::U8 ? 255.0 : pick<double>({127, -128, 100});
    }
    if (coin(0.05))
      return pick<double>({std::nan(""), std::numeric_limits<double>::infinity(),
                           -std::numeric_limits<double>::infinity()});
    return std::round(std::uniform_real_distribution<double>(-4, 4)(rng_) * 8) / 8;
  }
  std::mt19937_64 rng_;
};

struct Call {
  std::string text;
  std::function<void()> run;
  std::size_t family = 0;
};
using Family = Call (*)(Gen&);

const Device& cpu() {
  static const Device d = Device::cpu();
  return d;
}

// ---- families ----

// Deterministic distribution from two scalars (kinds cycle on the first's sign).
Distribution g_dist(double a, double b) {
  if (a < 0) return Distribution::normal(a, b);
  if (a > 1) return Distribution::uniform(a, b);
  return Distribution::bernoulli(a);
}

Call creation(Gen& g) {
  const std::size_t rank = g.below(4);
  std::vector<std::size_t> dims = g.sizes(rank);
  if (dangerous(count(Shape(dims)))) dims.assign(rank, 2);
  const Shape s(dims);
  const DType t = g.dtype();
  const double v = g.scalar();
  const std::size_t which = g.below(13);
  static const char* const names[] = {"full",     "zeros", "ones",   "empty",     "arange",
                                      "linspace", "eye",   "random", "triu_mask", "tril_mask",
                                      "tril",     "triu",  "from"};
  double a = g.scalar(), b = g.scalar(), c = g.scalar();
  std::size_t n = g.size();
  if (dangerous(mul(n, n)) || dangerous(n)) n = 3;
  if (std::fabs((b - a) / c) > 0x1p24 && std::fabs((b - a) / c) < 0x1p44) c = b - a;
  const std::int64_t off = g.integer();
  std::string text = std::string(names[which]) + "(shape " + s.to_string() + ", " + name(t) +
                     ", v " + str(v) + ", a " + str(a) + ", b " + str(b) + ", c " + str(c) +
                     ", n " + std::to_string(n) + ", offset " + std::to_string(off) + ")";
  return {text, [=] {
            const auto small = [&](const Shape& sh) {
              const auto k = count(sh);
              return k && *k <= (std::size_t{1} << 24);
            };
            switch (which) {
              case 0: {
                auto y = ops::full(s, v, t, cpu());
                if (!small(s)) accepted_invalid("huge shape");
                expect_shape(y, s);
                break;
              }
              case 1:
              case 2:
              case 3: {
                auto y = which == 1   ? ops::zeros(s, t, cpu())
                         : which == 2 ? ops::ones(s, t, cpu())
                                      : ops::empty(s, t, cpu());
                if (!small(s)) accepted_invalid("huge shape");
                expect_shape(y, s);
                if (which != 3)
                  expect_values(y, std::vector<double>(s.num_elements(), which - 1.0));
                break;
              }
              case 4: {
                auto y = ops::arange(a, b, c, t, cpu());
                if (y.rank() != 1) throw Mismatch{"arange gave rank " + std::to_string(y.rank())};
                const double want = std::ceil((b - a) / c);
                if (std::fabs(static_cast<double>(y.shape()[0]) - std::max(want, 0.0)) > 0.5) {
                  throw Mismatch{"arange has " + std::to_string(y.shape()[0]) + " elements"};
                }
                break;
              }
              case 5: {
                auto y = ops::linspace(a, b, n, t, cpu());
                expect_shape(y, Shape{n});
                break;
              }
              case 6: {
                auto y = ops::eye(n, t, cpu());
                expect_shape(y, Shape{n, n});
                break;
              }
              case 7: {
                const Distribution d = g_dist(a, b);
                auto y = ops::random(s, d, t, cpu());
                if (!small(s)) accepted_invalid("huge shape");
                expect_shape(y, s);
                break;
              }
              case 8:
              case 9: {
                auto y = which == 8 ? ops::triu_mask(s, off, cpu()) : ops::tril_mask(s, off, cpu());
                if (s.rank() < 2) accepted_invalid("rank < 2");
                expect_shape(y, s);
                break;
              }
              case 10:
              case 11: {
                std::string d;
                Gen h(static_cast<std::uint64_t>(off) ^ n);
                auto x = h.tensor(d);
                auto y = which == 10 ? ops::tril(x, off) : ops::triu(x, off);
                if (x.rank() < 2) accepted_invalid("rank < 2");
                expect_shape(y, x.shape());
                break;
              }
              default: {
                std::vector<float> vals(std::min<std::size_t>(n, 16), 1.0f);
                auto y = ops::from_data(TensorData::from<float>(vals, s), cpu());
                if (count(s) != vals.size()) accepted_invalid("element count != values");
                expect_shape(y, s);
              }
            }
          }};
}

Call unary(Gen& g) {
  const auto fn = static_cast<UnaryFn>(g.below(static_cast<std::size_t>(UnaryFn::Count_)));
  std::string d;
  auto x = g.tensor(g.rank(), g.coin(0.7) ? g.float_dtype() : g.dtype(), d);
  const double p0 = g.scalar(), p1 = g.scalar();
  return {std::string("unary(") + ir::name(fn) + ", " + d + ", " + str(p0) + ", " + str(p1) + ")",
          [=] {
            const Host hx = host(x);
            auto y = ops::unary(fn, x, p0, p1);
            expect_shape(y, hx.shape);
            if (hx.dtype == DType::F64 && (fn == UnaryFn::Neg || fn == UnaryFn::Abs)) {
              std::vector<double> want(hx.v);
              for (auto& e : want) e = fn == UnaryFn::Neg ? -e : std::fabs(e);
              expect_values(y, want);
            }
          }};
}

// The broadcast shape, or nullopt when the shapes do not broadcast.
std::optional<Shape> broadcast(const Shape& a, const Shape& b) {
  const std::size_t r = std::max(a.rank(), b.rank());
  std::vector<std::size_t> out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t da = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
    const std::size_t db = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
    if (da != db && da != 1 && db != 1) return std::nullopt;
    out[i] = da == 1 ? db : da;
  }
  return Shape(std::move(out));
}

Call binary(Gen& g) {
  const auto fn = static_cast<BinaryFn>(g.below(static_cast<std::size_t>(BinaryFn::Count_)));
  std::string da, db;
  const std::size_t r = g.rank();
  const Shape sa = g.shape(r);
  Shape sb = g.coin(0.6) ? sa : g.shape(g.rank());
  if (g.coin(0.3) && sb.rank() > 0) sb[g.below(sb.rank())] = 1;
  const DType ta = g.dtype(), tb = g.coin(0.7) ? ta : g.dtype();
  auto a = g.tensor(sa, ta, da);
  auto b = g.tensor(sb, tb, db);
  return {std::string("binary(") + ir::name(fn) + ", " + da + ", " + db + ")", [=] {
            const Host ha = host(a), hb = host(b);
            auto y = ops::binary(fn, a, b);
            const auto want = broadcast(ha.shape, hb.shape);
            if (!want) accepted_invalid("shapes do not broadcast");
            expect_shape(y, *want);
            if (ha.dtype == DType::F64 && hb.dtype == DType::F64 && ha.shape == hb.shape &&
                (fn == BinaryFn::Add || fn == BinaryFn::Mul || fn == BinaryFn::Sub)) {
              std::vector<double> w(ha.v.size());
              for (std::size_t i = 0; i < w.size(); ++i) {
                w[i] = fn == BinaryFn::Add   ? ha.v[i] + hb.v[i]
                       : fn == BinaryFn::Mul ? ha.v[i] * hb.v[i]
                                             : ha.v[i] - hb.v[i];
              }
              expect_values(y, w);
            }
          }};
}

bool is_comparison(BinaryFn f) {
  return f == BinaryFn::Eq || f == BinaryFn::Ne || f == BinaryFn::Gt || f == BinaryFn::Ge ||
         f == BinaryFn::Lt || f == BinaryFn::Le;
}

Call binary_scalar(Gen& g) {
  const auto fn = static_cast<BinaryFn>(g.below(static_cast<std::size_t>(BinaryFn::Count_)));
  std::string d;
  auto x = g.tensor(d);
  const double s = g.scalar();
  const bool rev = g.coin(0.3);
  return {std::string(rev ? "rbinary_scalar(" : "binary_scalar(") + ir::name(fn) + ", " + d + ", " +
              str(s) + ")",
          [=] {
            const Host hx = host(x);
            auto y = rev ? ops::rbinary_scalar(fn, s, x) : ops::binary_scalar(fn, x, s);
            expect_shape(y, hx.shape);
            // Comparisons of ints with a scalar are exact (Note [Scalar promotion]).
            if (is_comparison(fn) && hx.dtype != DType::F16 && hx.dtype != DType::BF16) {
              std::vector<double> w(hx.v.size());
              for (std::size_t i = 0; i < w.size(); ++i) {
                double l = hx.v[i], r = s;
                if (is_float(hx.dtype) && hx.dtype == DType::F32) r = static_cast<float>(s);
                if (rev) std::swap(l, r);
                bool c = false;
                switch (fn) {
                  case BinaryFn::Eq:
                    c = l == r;
                    break;
                  case BinaryFn::Ne:
                    c = l != r;
                    break;
                  case BinaryFn::Gt:
                    c = l > r;
                    break;
                  case BinaryFn::Ge:
                    c = l >= r;
                    break;
                  case BinaryFn::Lt:
                    c = l < r;
                    break;
                  default:
                    c = l <= r;
                }
                w[i] = c;
              }
              // f32 with a scalar beyond its range is compared after rounding to f32 (inf).
              if (!(hx.dtype == DType::F32 && std::fabs(s) > 3.4e38)) expect_values(y, w);
            }
          }};
}

Call cast_clamp_mask(Gen& g) {
  std::string d, dm;
  auto x = g.tensor(d);
  const DType to = g.dtype();
  const std::size_t which = g.below(5);
  const double lo = g.scalar(), hi = g.scalar();
  const bool has_lo = g.coin(0.8), has_hi = g.coin(0.8);
  auto mask = g.tensor(g.coin(0.8) ? x.shape() : g.shape(g.rank()),
                       g.coin(0.9) ? DType::Bool : g.dtype(), dm);
  const std::int64_t n = g.integer();
  std::string text;
  switch (which) {
    case 0:
      text = "cast(" + d + ", " + name(to) + ")";
      break;
    case 1:
      text = "clamp(" + d + ", " + (has_lo ? str(lo) : "none") + ", " +
             (has_hi ? str(hi) : "none") + ")";
      break;
    case 2:
      text = "mask_fill(" + d + ", " + dm + ", " + str(lo) + ")";
      break;
    case 3:
      text = "mask_where(" + dm + ", " + d + ", " + d + ")";
      break;
    default:
      text = "powi(" + d + ", " + std::to_string(n) + ")";
  }
  return {text, [=] {
            const Host hx = host(x);
            switch (which) {
              case 0: {
                auto y = ops::cast(x, to);
                expect_shape(y, hx.shape);
                if (y.dtype() != to)
                  throw Mismatch{"cast gave dtype " + std::string(name(y.dtype()))};
                break;
              }
              case 1: {
                auto y = ops::clamp(x, has_lo ? std::optional<double>(lo) : std::nullopt,
                                    has_hi ? std::optional<double>(hi) : std::nullopt);
                expect_shape(y, hx.shape);
                if (is_int(hx.dtype)) {
                  if ((has_lo && std::isnan(lo)) || (has_hi && std::isnan(hi))) {
                    accepted_invalid("NaN bound of an int clamp");
                  }
                  // The int result lies within the bounds (rounded inwards), where they
                  // lie within the dtype's range and do not cross.
                  const auto [tmin, tmax] = range_of(hx.dtype);
                  const double l = std::ceil(lo), h = std::floor(hi);
                  const bool check_lo = has_lo && l >= tmin && l <= tmax && !(has_hi && l > h);
                  const bool check_hi = has_hi && h >= tmin && h <= tmax && !(has_lo && l > h);
                  for (double e : y.to_data().to_vector<double>()) {
                    if ((check_lo && e < l) || (check_hi && e > h)) {
                      throw Mismatch{"clamp gave " + str(e)};
                    }
                  }
                }
                break;
              }
              case 2: {
                auto y = ops::mask_fill(x, mask, lo);
                const auto want = broadcast(mask.shape(), hx.shape);
                if (!want) accepted_invalid("mask does not broadcast");
                expect_shape(y, *want);
                break;
              }
              case 3: {
                auto y = ops::mask_where(mask, x, x);
                const auto want = broadcast(mask.shape(), hx.shape);
                if (!want) accepted_invalid("mask does not broadcast");
                expect_shape(y, *want);
                break;
              }
              default: {
                auto y = ops::powi(x, n);
                expect_shape(y, hx.shape);
                if (is_int(hx.dtype) && n < 0) accepted_invalid("int to a negative power");
              }
            }
          }};
}

Call reductions(Gen& g) {
  std::string d;
  auto x = g.tensor(d);
  const auto fn = static_cast<ReduceFn>(g.below(static_cast<std::size_t>(ReduceFn::Count_)));
  const auto sfn = static_cast<ScanFn>(g.below(static_cast<std::size_t>(ScanFn::Count_)));
  const std::int64_t dim = g.dim(x.rank());
  const std::size_t corr = g.coin(0.8) ? g.below(4) : g.size();
  const std::size_t k = g.coin(0.8) ? g.below(4) : g.size();
  const bool desc = g.coin();
  const std::size_t which = g.below(9);
  static const char* const names[] = {"reduce", "reduce_all", "var",  "var_mean", "max_dim",
                                      "scan",   "any_all",    "sort", "topk"};
  const std::string text = std::string(names[which]) + "(" + ir::name(fn) + "/" + ir::name(sfn) +
                           ", " + d + ", dim " + std::to_string(dim) + ", correction " +
                           std::to_string(corr) + ", k " + std::to_string(k) + ")";
  return {text, [=] {
            const Host hx = host(x);
            const auto r = static_cast<std::int64_t>(hx.shape.rank());
            const bool dim_ok = dim >= -r && dim < r;
            const std::size_t dd = dim_ok ? static_cast<std::size_t>(dim < 0 ? dim + r : dim) : 0;
            Shape kept = hx.shape;
            if (dim_ok) kept[dd] = 1;
            switch (which) {
              case 0: {
                auto y = ops::reduce(fn, x, dim);
                if (!dim_ok) accepted_invalid("dim out of range");
                expect_shape(y, kept);
                break;
              }
              case 1: {
                auto y = ops::reduce_all(fn, x);
                expect_shape(y, Shape{1});
                if (fn == ReduceFn::Sum && hx.dtype == DType::F64) {
                  double s = 0;
                  for (double e : hx.v) s += e;
                  expect_values(y, {s}, 1e-12);
                }
                break;
              }
              case 2:
              case 3: {
                auto y = which == 2 ? ops::var(x, dim, corr) : ops::var_mean(x, dim, corr).first;
                if (!dim_ok) accepted_invalid("dim out of range");
                expect_shape(y, kept);
                break;
              }
              case 4: {
                auto [v, i] = ops::max_dim_with_indices(x, dim);
                if (!dim_ok) accepted_invalid("dim out of range");
                expect_shape(v, kept);
                expect_shape(i, kept, "indices");
                break;
              }
              case 5: {
                auto y = ops::scan(sfn, x, dim);
                if (!dim_ok) accepted_invalid("dim out of range");
                expect_shape(y, hx.shape);
                break;
              }
              case 6: {
                auto y = desc ? ops::any(x) : ops::all(x);
                expect_shape(y, Shape{1});
                break;
              }
              case 7: {
                auto [v, i] = ops::sort_with_indices(x, dim, desc);
                if (!dim_ok) accepted_invalid("dim out of range");
                expect_shape(v, hx.shape);
                expect_shape(ops::argsort(x, dim, desc), hx.shape, "argsort");
                break;
              }
              default: {
                auto [v, i] = ops::topk_with_indices(x, k, dim);
                if (!dim_ok) accepted_invalid("dim out of range");
                if (k > hx.shape[dd]) accepted_invalid("k beyond the dim");
                Shape want = hx.shape;
                want[dd] = k;
                expect_shape(v, want);
              }
            }
          }};
}

Call views(Gen& g) {
  std::string d;
  auto x = g.tensor(g.rank(), g.coin(0.5) ? DType::F64 : g.dtype(), d);
  const std::size_t which = g.below(11);
  const std::size_t r = x.rank();
  std::vector<std::int64_t> ax(r);
  for (std::size_t i = 0; i < r; ++i) ax[i] = static_cast<std::int64_t>(i);
  std::shuffle(ax.begin(), ax.end(), std::mt19937_64(g.below(1000)));
  if (g.coin(0.1) && r > 0) ax[g.below(r)] = g.dim(r);
  std::vector<std::int64_t> flips;
  for (std::size_t i = 0; i < g.below(3); ++i) flips.push_back(g.dim(r));
  std::vector<std::size_t> times(g.coin(0.9) ? r : g.below(5));
  for (auto& t : times) t = g.below(3);
  if (!times.empty() && g.coin(0.3)) times[g.below(times.size())] = g.size();
  {
    std::optional<std::size_t> c = x.num_elements();
    for (auto t : times) c = mul(c, t);
    if (dangerous(c)) times.assign(times.size(), 2);
  }
  const std::int64_t d0 = g.dim(r), d1 = g.dim(r + 1);
  std::vector<std::size_t> target = x.shape().dims();
  if (g.coin(0.5)) target.insert(target.begin(), g.coin(0.8) ? g.below(3) : g.size());
  for (auto& e : target) {
    if (e == 1 && g.coin(0.5)) e = g.coin(0.8) ? g.below(4) : g.size();
  }
  std::vector<std::int64_t> newshape;
  const std::size_t nr = 1 + g.below(3);
  for (std::size_t i = 0; i < nr; ++i) {
    newshape.push_back(
        g.coin(0.2) ? -1 : static_cast<std::int64_t>(g.coin(0.9) ? g.below(4) : g.size()));
  }
  if (g.coin(0.3)) newshape = {static_cast<std::int64_t>(x.num_elements())};
  static const char* const names[] = {"permute",   "swap_dims", "transpose",  "flip",
                                      "expand",    "repeat",    "repeat_dim", "squeeze",
                                      "unsqueeze", "flatten",   "reshape"};
  const std::string text = std::string(names[which]) + "(" + d + ", axes " + str(ax) + ", flips " +
                           str(flips) + ", times " + str(times) + ", dims " + std::to_string(d0) +
                           " " + std::to_string(d1) + ", target " + str(target) + ", shape " +
                           str(newshape) + ")";
  return {text, [=] {
            const Host hx = host(x);
            const auto rr = static_cast<std::int64_t>(r);
            const auto norm = [&](std::int64_t v, std::int64_t rank) -> std::optional<std::size_t> {
              if (v < -rank || v >= rank) return std::nullopt;
              return static_cast<std::size_t>(v < 0 ? v + rank : v);
            };
            switch (which) {
              case 0: {
                auto y = ops::permute(x, ax);
                std::vector<std::size_t> p;
                std::vector<bool> seen(r, false);
                for (auto a : ax) {
                  auto n = norm(a, rr);
                  if (!n || seen[*n]) accepted_invalid("bad axes");
                  seen[*n] = true;
                  p.push_back(*n);
                }
                std::vector<std::size_t> ws;
                for (auto a : p) ws.push_back(hx.shape[a]);
                expect_shape(y, Shape(ws));
                // Values: y[i] = x[i permuted back].
                std::vector<double> w(hx.v.size());
                const Shape ys(ws);
                for (std::size_t q = 0; q < w.size(); ++q) {
                  auto yi = unravel(q, ys);
                  std::vector<std::size_t> xi(r);
                  for (std::size_t k = 0; k < r; ++k) xi[p[k]] = yi[k];
                  w[q] = hx.v[ravel(xi, hx.shape)];
                }
                expect_values(y, w);
                break;
              }
              case 1:
              case 2: {
                auto y = which == 1 ? ops::swap_dims(x, d0, d1) : ops::transpose(x);
                if (which == 2 && r < 2) accepted_invalid("rank < 2");
                if (y.num_elements() != hx.v.size()) throw Mismatch{"element count changed"};
                break;
              }
              case 3: {
                auto y = ops::flip(x, flips);
                std::vector<std::size_t> f;
                for (auto a : flips) {
                  auto n = norm(a, rr);
                  if (!n || std::find(f.begin(), f.end(), *n) != f.end())
                    accepted_invalid("bad axes");
                  f.push_back(*n);
                }
                expect_shape(y, hx.shape);
                std::vector<double> w(hx.v.size());
                for (std::size_t q = 0; q < w.size(); ++q) {
                  auto i = unravel(q, hx.shape);
                  for (auto a : f) i[a] = hx.shape[a] - 1 - i[a];
                  w[q] = hx.v[ravel(i, hx.shape)];
                }
                expect_values(y, w);
                break;
              }
              case 4: {
                const Shape ts(target);
                auto y = ops::expand(x, ts);
                if (ts.rank() < r) accepted_invalid("lower rank");
                for (std::size_t i = 0; i < r; ++i) {
                  const std::size_t e = hx.shape[i], t = ts[i + ts.rank() - r];
                  if (e != t && e != 1) accepted_invalid("extent mismatch");
                }
                const auto c = mul(count(ts), size_of(hx.dtype));
                if (!c || *c > (std::size_t{1} << 62)) accepted_invalid("huge");
                expect_shape(y, ts);
                break;
              }
              case 5:
              case 6: {
                std::vector<std::size_t> t = times;
                std::optional<std::size_t> dd;
                if (which == 6) {
                  dd = norm(d0, rr);
                  t.assign(r, 1);
                  if (dd) t[*dd] = times.empty() ? 1 : times[0];
                }
                auto y = which == 5 ? ops::repeat(x, times)
                                    : ops::repeat_dim(x, d0, times.empty() ? 1 : times[0]);
                if (which == 6 && !dd) accepted_invalid("bad dim");
                if (t.size() != r) accepted_invalid("counts != rank");
                std::vector<std::size_t> ws;
                for (std::size_t i = 0; i < r; ++i) {
                  std::size_t e = 0;
                  if (__builtin_mul_overflow(t[i], hx.shape[i], &e)) accepted_invalid("overflow");
                  ws.push_back(e);
                }
                const Shape ys(ws);
                const auto c = count(ys);
                if (!c || *mul(c, size_of(hx.dtype)) > (std::size_t{1} << 62)) {
                  accepted_invalid("huge");
                }
                expect_shape(y, ys);
                std::vector<double> w(*c);
                for (std::size_t q = 0; q < w.size(); ++q) {
                  auto i = unravel(q, ys);
                  for (std::size_t k = 0; k < r; ++k) i[k] %= hx.shape[k];
                  w[q] = hx.v[ravel(i, hx.shape)];
                }
                expect_values(y, w);
                break;
              }
              case 7: {
                auto y = ops::squeeze(x, d0);
                auto n = norm(d0, rr);
                if (!n || hx.shape[*n] != 1 || r == 1) accepted_invalid("not squeezable");
                auto ws = hx.shape.dims();
                ws.erase(ws.begin() + static_cast<std::ptrdiff_t>(*n));
                expect_shape(y, Shape(ws));
                expect_shape(ops::squeeze_all(x), ops::squeeze_all(x).shape());
                break;
              }
              case 8: {
                auto y = ops::unsqueeze(x, d1);
                auto n = norm(d1, rr + 1);
                if (!n) accepted_invalid("bad dim");
                auto ws = hx.shape.dims();
                ws.insert(ws.begin() + static_cast<std::ptrdiff_t>(*n), 1);
                expect_shape(y, Shape(ws));
                expect_values(y, hx.v);
                break;
              }
              case 9: {
                auto y = ops::flatten(x, d0, d1);
                auto s = norm(d0, rr), e = norm(d1, rr);
                if (!s || !e || *s > *e) accepted_invalid("bad dims");
                expect_values(y, hx.v);
                break;
              }
              default: {
                auto y = ops::reshape(x, newshape);
                if (y.num_elements() != hx.v.size()) throw Mismatch{"element count changed"};
                expect_values(y, hx.v);
              }
            }
          }};
}

Call slicing(Gen& g) {
  std::string d, dv;
  auto x = g.tensor(g.rank(), g.coin(0.5) ? DType::F64 : g.dtype(), d);
  const std::size_t r = x.rank();
  const std::size_t which = g.below(8);
  const std::int64_t dim = g.dim(r), start = g.integer();
  const std::size_t len = g.coin(0.7) ? g.below(4) : g.size();
  std::vector<ops::Range> ranges;
  std::string rtext = "{";
  const std::size_t nr = g.below(r + 2);
  for (std::size_t i = 0; i < nr; ++i) {
    const std::int64_t s = g.integer(), e = g.integer(),
                       st = g.coin(0.8) ? 1 + g.below(2) : g.integer();
    const bool open = g.coin(0.3);
    ranges.emplace_back(s, open ? std::nullopt : std::optional<std::int64_t>(e), st);
    rtext += '(';
    rtext += std::to_string(s);
    rtext += ", ";
    rtext += open ? std::string("end") : std::to_string(e);
    rtext += ", ";
    rtext += std::to_string(st);
    rtext += ')';
  }
  rtext += "}";
  auto value = g.tensor(g.shape(g.below(3) + 1), g.dtype(), dv);
  const double fillv = g.scalar();
  const std::size_t split_size = g.coin(0.8) ? g.below(4) : g.size();
  std::vector<std::size_t> sizes = g.sizes(g.below(4));
  static const char* const names[] = {"narrow", "slice",       "slice_assign", "slice_fill",
                                      "split",  "split_sizes", "chunk",        "select"};
  const std::string text = std::string(names[which]) + "(" + d + ", dim " + std::to_string(dim) +
                           ", start " + std::to_string(start) + ", length " + std::to_string(len) +
                           ", ranges " + rtext + ", value " + dv + " / " + str(fillv) + ", split " +
                           std::to_string(split_size) + ", sizes " + str(sizes) + ")";
  return {text, [=] {
            const Host hx = host(x);
            const auto rr = static_cast<std::int64_t>(r);
            const bool dim_ok = dim >= -rr && dim < rr;
            const std::size_t dd = dim_ok ? static_cast<std::size_t>(dim < 0 ? dim + rr : dim) : 0;
            switch (which) {
              case 0: {
                auto y = ops::narrow(x, dim, start, len);
                if (!dim_ok) accepted_invalid("bad dim");
                const auto n = static_cast<std::int64_t>(hx.shape[dd]);
                const std::int64_t s = start < 0 ? start + n : start;
                if (s < 0 || s > n || len > static_cast<std::size_t>(n - s)) {
                  accepted_invalid("out of bounds");
                }
                Shape ws = hx.shape;
                ws[dd] = len;
                expect_shape(y, ws);
                std::vector<double> w(ws.num_elements());
                for (std::size_t q = 0; q < w.size(); ++q) {
                  auto i = unravel(q, ws);
                  i[dd] += static_cast<std::size_t>(s);
                  w[q] = hx.v[ravel(i, hx.shape)];
                }
                expect_values(y, w);
                break;
              }
              case 1: {
                auto y = ops::slice(x, ranges);
                if (ranges.size() > r) accepted_invalid("too many ranges");
                std::vector<std::size_t> ws = hx.shape.dims();
                for (std::size_t i = 0; i < ranges.size(); ++i) {
                  const auto n = static_cast<std::int64_t>(hx.shape[i]);
                  const ops::Range& q = ranges[i];
                  const std::int64_t b = q.start < 0 ? q.start + n : q.start;
                  const std::int64_t e = q.end ? (*q.end < 0 ? *q.end + n : *q.end) : n;
                  if (q.step < 1 || b < 0 || e > n || b > e) accepted_invalid("bad range");
                  ws[i] = b == e ? 0 : static_cast<std::size_t>((e - b - 1) / q.step + 1);
                }
                expect_shape(y, Shape(ws));
                break;
              }
              case 2: {
                auto y = ops::slice_assign(x, ranges, value);
                expect_shape(y, hx.shape);
                break;
              }
              case 3: {
                auto y = ops::slice_fill(x, ranges, fillv);
                expect_shape(y, hx.shape);
                break;
              }
              case 4:
              case 5:
              case 6: {
                auto parts = which == 4   ? ops::split(x, split_size, dim)
                             : which == 5 ? ops::split_sizes(x, sizes, dim)
                                          : ops::chunk(x, split_size, dim);
                if (!dim_ok) accepted_invalid("bad dim");
                std::size_t total = 0;
                for (const auto& p : parts) total += p.shape()[dd];
                if (total != hx.shape[dd]) throw Mismatch{"parts cover " + std::to_string(total)};
                break;
              }
              default: {
                std::string di;
                Gen h(static_cast<std::uint64_t>(start) ^ len);
                auto idx =
                    h.tensor(Shape{1 + h.below(3)}, h.coin(0.8) ? DType::I64 : h.dtype(), di);
                auto y = ops::select(x, dim, idx);
                if (!dim_ok) accepted_invalid("bad dim");
                Shape ws = hx.shape;
                ws[dd] = idx.shape()[0];
                expect_shape(y, ws);
              }
            }
          }};
}

Call joins(Gen& g) {
  const std::size_t n = 1 + g.below(3);
  std::vector<DynTensor> xs;
  std::string text;
  const std::size_t r = g.rank();
  const Shape base = g.shape(r);
  const DType t = g.coin(0.5) ? DType::F64 : g.dtype();
  for (std::size_t i = 0; i < n; ++i) {
    Shape s = base;
    if (g.coin(0.5)) s[0] = g.below(3);
    if (g.coin(0.1)) s = g.shape(g.rank());
    std::string d;
    xs.push_back(g.tensor(s, g.coin(0.9) ? t : g.dtype(), d));
    text += (i ? ", " : "") + d;
  }
  const std::int64_t dim = g.coin(0.5) ? 0 : g.dim(r + 1);
  const bool stack = g.coin(0.4);
  return {std::string(stack ? "stack({" : "cat({") + text + "}, dim " + std::to_string(dim) + ")",
          [=] {
            std::vector<Host> hs;
            for (const auto& x : xs) hs.push_back(host(x));
            auto y = stack ? ops::stack(xs, dim) : ops::cat(xs, dim);
            bool same = true;
            for (const auto& h : hs) same = same && h.dtype == hs[0].dtype;
            if (!same) accepted_invalid("dtypes differ");
            if (!stack && dim == 0 && y.dtype() == DType::F64) {
              std::vector<double> w;
              std::size_t rows = 0;
              for (const auto& h : hs) {
                if (h.shape.rank() != hs[0].shape.rank()) accepted_invalid("ranks differ");
                for (std::size_t i = 1; i < h.shape.rank(); ++i) {
                  if (h.shape[i] != hs[0].shape[i]) accepted_invalid("extents differ");
                }
                w.insert(w.end(), h.v.begin(), h.v.end());
                rows += h.shape[0];
              }
              Shape ws = hs[0].shape;
              ws[0] = rows;
              expect_shape(y, ws);
              expect_values(y, w);
            }
          }};
}

Call padding(Gen& g) {
  std::string d;
  auto x = g.tensor(g.rank(), g.coin(0.5) ? DType::F64 : g.dtype(), d);
  std::vector<std::pair<std::size_t, std::size_t>> pads(g.below(x.rank() + 2));
  std::string pt = "{";
  for (auto& p : pads) {
    p = {g.coin(0.8) ? g.below(3) : g.size(), g.coin(0.8) ? g.below(3) : g.size()};
    pt += '(';
    pt += std::to_string(p.first);
    pt += ", ";
    pt += std::to_string(p.second);
    pt += ')';
  }
  {
    std::vector<std::size_t> ws = x.shape().dims();
    bool over = false;
    for (std::size_t i = 0; i < pads.size() && i < ws.size(); ++i) {
      std::size_t& e =
          ws[ws.size() - pads.size() + i < ws.size() ? ws.size() - pads.size() + i : 0];
      over = over || __builtin_add_overflow(e, pads[i].first, &e) ||
             __builtin_add_overflow(e, pads[i].second, &e);
    }
    if (!over && dangerous(count(Shape(ws)))) {
      for (auto& p : pads) p = {1, 1};
      pt = "{tamed to (1, 1) each}";
    }
  }
  pt += "}";
  const auto mode = static_cast<ops::PadMode>(g.below(3));
  const double v = g.coin(0.7) ? 0.0 : g.scalar();
  return {"pad(" + d + ", " + pt + ", mode " + std::to_string(static_cast<int>(mode)) + ", " +
              str(v) + ")",
          [=] {
            const Host hx = host(x);
            auto y = ops::pad(x, pads, mode, v);
            if (pads.size() > hx.shape.rank()) accepted_invalid("too many pads");
            const std::size_t first = hx.shape.rank() - pads.size();
            std::vector<std::size_t> ws = hx.shape.dims();
            for (std::size_t i = 0; i < pads.size(); ++i) {
              const std::size_t n = ws[first + i];
              if (mode == ops::PadMode::Reflect && (pads[i].first >= n || pads[i].second >= n) &&
                  (pads[i].first || pads[i].second)) {
                accepted_invalid("reflect padding >= extent");
              }
              if (__builtin_add_overflow(n, pads[i].first, &ws[first + i]) ||
                  __builtin_add_overflow(ws[first + i], pads[i].second, &ws[first + i])) {
                accepted_invalid("overflow");
              }
            }
            const Shape ys(ws);
            expect_shape(y, ys);
            if (hx.dtype == DType::F64) {
              std::vector<double> w(ys.num_elements());
              for (std::size_t q = 0; q < w.size(); ++q) {
                auto i = unravel(q, ys);
                bool inside = true;
                for (std::size_t k = 0; k < pads.size(); ++k) {
                  const std::size_t dd = first + k, n = hx.shape[dd];
                  auto j =
                      static_cast<std::int64_t>(i[dd]) - static_cast<std::int64_t>(pads[k].first);
                  const auto ni = static_cast<std::int64_t>(n);
                  if (mode == ops::PadMode::Constant) {
                    inside = inside && j >= 0 && j < ni;
                  } else if (mode == ops::PadMode::Edge) {
                    j = std::clamp<std::int64_t>(j, 0, ni - 1);
                  } else {
                    if (j < 0) j = -j;
                    if (j >= ni) j = 2 * (ni - 1) - j;
                  }
                  if (inside) i[dd] = static_cast<std::size_t>(j);
                }
                w[q] = inside ? hx.v[ravel(i, hx.shape)] : v;
              }
              expect_values(y, w);
            }
          }};
}

Call indexing(Gen& g) {
  std::string d, di, dv;
  auto x = g.tensor(g.rank(), g.dtype(), d);
  const std::size_t r = x.rank();
  Shape is = g.coin(0.7) ? x.shape() : g.shape(g.rank());
  auto idx = g.tensor(is, g.coin(0.85) ? DType::I64 : g.dtype(), di);
  auto values =
      g.tensor(g.coin(0.8) ? is : g.shape(g.rank()), g.coin(0.8) ? x.dtype() : g.dtype(), dv);
  const std::int64_t dim = g.dim(r);
  std::size_t classes = g.coin(0.8) ? 1 + g.below(8) : g.size();
  if (dangerous(mul(idx.num_elements(), classes))) classes = 5;
  const DType t = g.dtype();
  const std::size_t which = g.below(6);
  static const char* const names[] = {"gather",        "scatter", "scatter_add",
                                      "select_assign", "one_hot", "nonzero"};
  const std::string text = std::string(names[which]) + "(" + d + ", dim " + std::to_string(dim) +
                           ", indices " + di + ", values " + dv + ", classes " +
                           std::to_string(classes) + ", " + name(t) + ")";
  return {text, [=] {
            const Host hx = host(x), hi = host(idx);
            switch (which) {
              case 0: {
                auto y = ops::gather(x, dim, idx);
                expect_shape(y, hi.shape);
                break;
              }
              case 1:
              case 2: {
                auto y = which == 1 ? ops::scatter(x, dim, idx, values)
                                    : ops::scatter_add(x, dim, idx, values);
                expect_shape(y, hx.shape);
                break;
              }
              case 3: {
                auto i1 = ops::reshape(idx, Shape{idx.num_elements()});
                auto y = ops::select_assign(x, dim, i1, values);
                expect_shape(y, hx.shape);
                break;
              }
              case 4: {
                auto y = ops::one_hot(idx, classes, t);
                auto ws = hi.shape.dims();
                ws.push_back(classes);
                expect_shape(y, Shape(ws));
                // One 1 per index, at its class.
                const auto got = y.to_data().to_vector<double>();
                for (std::size_t p = 0; p < hi.v.size(); ++p) {
                  for (std::size_t c = 0; c < classes; ++c) {
                    const double want = static_cast<double>(c) == hi.v[p] ? 1 : 0;
                    if (got[p * classes + c] != (t == DType::Bool ? want != 0 : want)) {
                      throw Mismatch{"one_hot row " + std::to_string(p) + " class " +
                                     std::to_string(c)};
                    }
                  }
                }
                break;
              }
              default: {
                auto y = ops::nonzero(x);
                std::size_t nz = 0;
                for (double e : hx.v) nz += e != 0;
                expect_shape(y, Shape{nz, hx.shape.rank()});
              }
            }
          }};
}

Call compute(Gen& g) {
  std::string da, db, dw, dbias;
  const DType t = g.coin(0.8) ? g.float_dtype() : g.dtype();
  const std::size_t m = g.below(4), k = g.below(4), n = g.below(4);
  Shape sa{m, k}, sb{g.coin(0.9) ? k : g.below(4), n};
  if (g.coin(0.3)) sa = Shape{g.below(3), m, k};
  if (g.coin(0.2)) sb = g.shape(g.rank());
  auto a = g.tensor(sa, t, da);
  auto b = g.tensor(sb, g.coin(0.9) ? t : g.dtype(), db);
  const std::int64_t dim = g.dim(a.rank());
  const Shape ns = g.coin(0.8) ? Shape{sa[sa.rank() - 1]} : g.shape(g.below(3) + 1);
  auto w = g.tensor(ns, g.coin(0.9) ? t : g.dtype(), dw);
  auto bias = g.tensor(ns, g.coin(0.9) ? t : g.dtype(), dbias);
  const double eps = g.coin(0.8) ? 1e-5 : g.scalar();
  const bool use_w = g.coin(), use_b = g.coin();
  const std::size_t which = g.below(4);
  static const char* const names[] = {"matmul", "softmax", "log_softmax", "layer_norm"};
  const std::string text = std::string(names[which]) + "(" + da + ", " + db + ", dim " +
                           std::to_string(dim) + ", normalized " + ns.to_string() + ", weight " +
                           (use_w ? dw : "none") + ", bias " + (use_b ? dbias : "none") + ", eps " +
                           str(eps) + ")";
  return {text, [=] {
            const Host ha = host(a);
            switch (which) {
              case 0: {
                auto y = ops::matmul(a, b);
                if (b.rank() < 2 || ha.shape[ha.shape.rank() - 1] != b.shape()[b.rank() - 2]) {
                  accepted_invalid("inner dims differ");
                }
                if (y.shape()[y.rank() - 2] != ha.shape[ha.shape.rank() - 2] ||
                    y.shape()[y.rank() - 1] != b.shape()[b.rank() - 1]) {
                  throw Mismatch{"matmul shape " + y.shape().to_string()};
                }
                break;
              }
              case 1:
              case 2: {
                auto y = which == 1 ? ops::softmax(a, dim) : ops::log_softmax(a, dim);
                expect_shape(y, ha.shape);
                break;
              }
              default: {
                auto y =
                    ops::layer_norm(a, ns, use_w ? std::optional<DynTensor>(w) : std::nullopt,
                                    use_b ? std::optional<DynTensor>(bias) : std::nullopt, eps);
                expect_shape(y, ha.shape);
              }
            }
          }};
}

// Activations (typed: ranks 1 to 4 through Tensor<D>).
template <std::size_t D>
void activation(std::size_t which, const DynTensor& x, double p0, double p1, std::int64_t dim) {
  Tensor<D> t(x);
  Tensor<D> y = [&] {
    switch (which) {
      case 0:
        return activation::relu(t);
      case 1:
        return activation::sigmoid(t);
      case 2:
        return activation::gelu(t);
      case 3:
        return activation::gelu_tanh(t);
      case 4:
        return activation::silu(t);
      case 5:
        return activation::mish(t);
      case 6:
        return activation::tanh(t);
      case 7:
        return activation::softplus(t, p0);
      case 8:
        return activation::leaky_relu(t, p0);
      case 9:
        return activation::elu(t, p0);
      case 10:
        return activation::hard_sigmoid(t, p0, p1);
      case 11:
        return activation::softmax(t, dim);
      default:
        return activation::log_softmax(t, dim);
    }
  }();
  expect_shape(y.dyn(), x.shape());
}

Call activations(Gen& g) {
  std::string d;
  auto x = g.tensor(g.rank(), g.coin(0.85) ? g.float_dtype() : g.dtype(), d);
  const std::size_t which = g.below(13);
  const double p0 = g.scalar(), p1 = g.scalar();
  const std::int64_t dim = g.dim(x.rank());
  return {"activation #" + std::to_string(which) + "(" + d + ", " + str(p0) + ", " + str(p1) +
              ", dim " + std::to_string(dim) + ")",
          [=] {
            switch (x.rank()) {
              case 1:
                return activation<1>(which, x, p0, p1, dim);
              case 2:
                return activation<2>(which, x, p0, p1, dim);
              case 3:
                return activation<3>(which, x, p0, p1, dim);
              default:
                return activation<4>(which, x, p0, p1, dim);
            }
          }};
}

// Host window positions: nullopt when no position exists or the arithmetic overflows.
std::optional<std::size_t> host_positions(std::size_t in, std::size_t k, std::size_t s,
                                          std::size_t p, std::size_t d) {
  if (k == 0 || s == 0 || d == 0) return std::nullopt;
  std::size_t padded = 0, span = 0, twop = 0;
  if (__builtin_mul_overflow(p, 2, &twop) || __builtin_add_overflow(in, twop, &padded)) return {};
  if (__builtin_mul_overflow(d, k - 1, &span) || __builtin_add_overflow(span, 1, &span)) return {};
  if (padded < span) return std::nullopt;
  return (padded - span) / s + 1;
}

Call windows(Gen& g) {
  std::string dx, dw;
  const std::size_t sp = g.coin(0.95) ? 1 + g.below(3) : g.below(5);
  std::vector<std::size_t> dims{g.below(3), g.coin(0.9) ? 1 + g.below(3) : g.below(4)};
  for (std::size_t i = 0; i < sp; ++i) dims.push_back(g.coin(0.9) ? 1 + g.below(6) : g.below(2));
  const Shape xs(dims);
  const DType t = g.coin(0.85) ? g.float_dtype() : g.dtype();
  auto x = g.tensor(xs, t, dx);
  const auto small = [&] { return g.coin(0.85) ? 1 + g.below(3) : g.size(); };
  const auto small0 = [&] { return g.coin(0.85) ? g.below(2) : g.size(); };
  std::vector<std::size_t> kernel(g.coin(0.95) ? sp : g.below(4));
  for (auto& k : kernel) k = small();
  module_ops::WindowOptions o;
  if (g.coin(0.6)) o.stride.resize(sp), std::generate(o.stride.begin(), o.stride.end(), small);
  if (g.coin(0.5)) o.padding.resize(sp), std::generate(o.padding.begin(), o.padding.end(), small0);
  if (g.coin(0.3))
    o.dilation.resize(sp), std::generate(o.dilation.begin(), o.dilation.end(), small);
  const std::size_t groups = g.coin(0.85) ? 1 : g.size();
  const std::size_t out_c = 1 + g.below(3);
  std::vector<std::size_t> wdims{out_c, dims.size() > 1 ? dims[1] : 1};
  // The weight is made on the host: its kernel extents stay small (conv takes its kernel
  // from the weight; the adversarial kernel goes to unfold, fold and the pools).
  for (std::size_t k : kernel) wdims.push_back(std::min<std::size_t>(k, 4));
  const std::vector<std::size_t> wkernel(wdims.begin() + 2, wdims.end());
  if (g.coin(0.1)) wdims[1] = g.below(4);
  auto w = g.tensor(Shape(wdims), g.coin(0.9) ? t : g.dtype(), dw);
  std::vector<std::size_t> opad;
  if (g.coin(0.3)) opad.assign(sp, g.below(2));
  {
    // The largest output any of the window functions could make: tame it when large.
    std::optional<std::size_t> c = mul(dims[0], dims.size() > 1 ? dims[1] : 1);
    c = mul(c, out_c);
    for (std::size_t i = 0; i < sp && i < kernel.size(); ++i) {
      const std::size_t in = dims[2 + i];
      const std::size_t p = i < o.padding.size() ? o.padding[i] : 0;
      const std::size_t st = i < o.stride.size() ? o.stride[i] : 1;
      const std::size_t d = i < o.dilation.size() ? o.dilation[i] : 1;
      std::size_t span = 0, ext = 0;
      const bool over = __builtin_mul_overflow(d, kernel[i] ? kernel[i] - 1 : 0, &span) ||
                        __builtin_mul_overflow(p, 2, &ext) || __builtin_add_overflow(ext, in, &ext);
      c = over ? std::nullopt : mul(c, std::max(ext, (in ? in - 1 : 0) * st + span + 1));
      c = mul(c, kernel[i]);
    }
    if (dangerous(c)) {
      for (auto& k : kernel) k = std::min<std::size_t>(k, 2);
      o = {};
    }
  }
  const bool cip = g.coin();
  const std::size_t which = g.below(6);
  static const char* const names[] = {"unfold",         "fold",     "conv",
                                      "conv_transpose", "max_pool", "avg_pool"};
  const std::string text = std::string(names[which]) + "(" + dx + ", weight " + dw + ", kernel " +
                           str(kernel) + ", stride " + str(o.stride) + ", padding " +
                           str(o.padding) + ", dilation " + str(o.dilation) + ", groups " +
                           std::to_string(groups) + ", output_padding " + str(opad) + ")";
  return {
      text, [=] {
        const Host hx = host(x);
        const auto pos_shape = [&](std::vector<std::size_t> lead, bool pool,
                                   const std::vector<std::size_t>& kernel) -> std::optional<Shape> {
          if (hx.shape.rank() < 3 || hx.shape.rank() > 5 || kernel.size() != sp) return {};
          for (std::size_t i = 0; i < sp; ++i) {
            const std::size_t s = o.stride.empty() ? (pool ? kernel[i] : 1) : o.stride[i];
            const std::size_t p = o.padding.empty() ? 0 : o.padding[i];
            const std::size_t d = o.dilation.empty() ? 1 : o.dilation[i];
            auto q = host_positions(hx.shape[2 + i], kernel[i], s, p, d);
            if (!q) return {};
            lead.push_back(*q);
          }
          return Shape(lead);
        };
        switch (which) {
          case 0: {
            auto y = module_ops::unfold(x, kernel, o);
            auto ps = pos_shape({}, false, kernel);
            if (!ps) accepted_invalid("no window position");
            std::size_t kk = 1, l = 1;
            for (auto k : kernel) kk *= k;
            for (auto e : ps->dims()) l *= e;
            expect_shape(y, Shape{hx.shape[0], hx.shape[1] * kk, l});
            break;
          }
          case 1: {
            std::vector<std::size_t> outsz(hx.shape.begin() + 2, hx.shape.end());
            auto cols = module_ops::unfold(x, kernel, o);
            auto y = module_ops::fold(cols, outsz, kernel, o);
            expect_shape(y, hx.shape);
            break;
          }
          case 2: {
            auto y = module_ops::conv(x, w, std::nullopt, o, groups);
            auto ps = pos_shape({hx.shape[0], out_c}, false, wkernel);
            if (!ps) accepted_invalid("no window position");
            expect_shape(y, *ps);
            break;
          }
          case 3: {
            auto y = module_ops::conv_transpose(x, w, std::nullopt, o, opad, groups);
            if (y.rank() != hx.shape.rank()) throw Mismatch{"rank changed"};
            break;
          }
          default: {
            auto y = which == 4 ? module_ops::max_pool(x, kernel, o)
                                : module_ops::avg_pool(x, kernel, o, cip);
            auto ps = pos_shape({hx.shape[0], hx.shape[1]}, true, kernel);
            if (!ps) accepted_invalid("no window position");
            expect_shape(y, *ps);
            // Every window holds an image entry: no -inf from the padding.
            for (double e : y.to_data().to_vector<double>()) {
              if (std::isinf(e) && e < 0 && which == 4 && is_float(hx.dtype)) {
                bool input_has_neg_inf = false;
                for (double v : hx.v)
                  input_has_neg_inf = input_has_neg_inf || (std::isinf(v) && v < 0);
                if (!input_has_neg_inf) throw Mismatch{"-inf from a window in the padding"};
              }
            }
          }
        }
      }};
}

const std::vector<std::pair<const char*, Family>>& families() {
  static const std::vector<std::pair<const char*, Family>> f{{"creation", creation},
                                                             {"unary", unary},
                                                             {"binary", binary},
                                                             {"binary_scalar", binary_scalar},
                                                             {"cast_clamp_mask", cast_clamp_mask},
                                                             {"reductions", reductions},
                                                             {"views", views},
                                                             {"slicing", slicing},
                                                             {"joins", joins},
                                                             {"padding", padding},
                                                             {"indexing", indexing},
                                                             {"compute", compute},
                                                             {"activations", activations},
                                                             {"windows", windows}};
  return f;
}

std::uint64_t mix(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Call make_call(std::uint64_t seed, std::uint64_t i) {
  Gen g(mix(seed, i));
  const std::size_t k = g.below(families().size());
  const auto& f = families()[k];
  Call c = f.second(g);
  c.text = std::string(f.first) + ": " + c.text;
  c.family = k;
  return c;
}

// Runs one call; "" when it held, else what went wrong. `errored`: it gave an ember::Error.
std::string run_one(const Call& c, bool& errored) {
  errored = false;
  try {
    c.run();
  } catch (const Error&) {
    errored = true;
  } catch (const Mismatch& m) {
    return "wrong result: " + m.what;
  } catch (const std::exception& e) {
    return std::string("foreign exception ") + typeid(e).name() + ": " + e.what();
  }
  return "";
}

struct Batch {
  std::vector<std::pair<std::uint64_t, std::string>> failures;  // call index, what
  std::vector<std::pair<std::size_t, bool>> held;  // family and whether it errored, per call
  std::optional<std::uint64_t> died_in;            // the call running at a crash
  std::string death;
};

// Runs calls [begin, end) in one forked child, each under `limit` seconds.
Batch run_batch(std::uint64_t seed, std::uint64_t begin, std::uint64_t end, unsigned limit) {
  Batch b;
  int fds[2];
  if (pipe(fds) != 0) {
    b.death = "pipe failed";
    return b;
  }
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    FILE* out = fdopen(fds[1], "w");
    for (std::uint64_t i = begin; i < end; ++i) {
      std::fprintf(out, "B %llu\n", static_cast<unsigned long long>(i));
      std::fflush(out);
      alarm(limit);
      std::string r;
      bool errored = false;
      std::size_t family = 0;
      try {
        const Call c = make_call(seed, i);
        family = c.family;
        r = run_one(c, errored);
      } catch (const std::exception& e) {
        r = std::string("generator failed: ") + e.what();
      }
      alarm(0);
      for (char& ch : r) ch = ch == '\n' ? ' ' : ch;
      if (!r.empty())
        std::fprintf(out, "F %llu %s\n", static_cast<unsigned long long>(i), r.c_str());
      std::fprintf(out, "E %llu %zu %d\n", static_cast<unsigned long long>(i), family,
                   errored ? 1 : 0);
      std::fflush(out);
    }
    std::fclose(out);
    _exit(0);
  }
  close(fds[1]);
  FILE* in = fdopen(fds[0], "r");
  char line[8192];
  std::optional<std::uint64_t> running;
  while (std::fgets(line, sizeof line, in)) {
    unsigned long long i = 0;
    if (std::sscanf(line, "B %llu", &i) == 1) running = i;
    std::size_t fam = 0;
    int err = 0;
    if (std::sscanf(line, "E %llu %zu %d", &i, &fam, &err) == 3) {
      running.reset();
      b.held.emplace_back(fam, err != 0);
    }
    if (line[0] == 'F' && std::sscanf(line, "F %llu", &i) == 1) {
      std::string what = line;
      what = what.substr(what.find(' ', 2) + 1);
      if (!what.empty() && what.back() == '\n') what.pop_back();
      b.failures.emplace_back(i, what);
    }
  }
  std::fclose(in);
  int status = 0;
  waitpid(pid, &status, 0);
  if (WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) != 0) || running) {
    b.died_in = running;
    if (WIFSIGNALED(status)) {
      const int sig = WTERMSIG(status);
      b.death = sig == SIGALRM ? "hang (no answer within " + std::to_string(limit) + " s)"
                               : std::string("crash (signal ") + std::to_string(sig) + ", " +
                                     strsignal(sig) + ")";
    } else {
      b.death = "exit status " + std::to_string(WEXITSTATUS(status));
    }
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t seed = 1, calls = 20000, batch = 100;
  unsigned limit = 20;
  std::optional<std::uint64_t> only;
  bool verbose = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::uint64_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::strtoull(argv[++i], nullptr, 0);
    };
    if (a == "--seed") {
      seed = next();
    } else if (a == "--calls") {
      calls = next();
    } else if (a == "--batch") {
      batch = std::max<std::uint64_t>(1, next());
    } else if (a == "--limit") {
      limit = static_cast<unsigned>(next());
    } else if (a == "--only") {
      only = next();
    } else if (a == "-v") {
      verbose = true;
    } else {
      std::fprintf(stderr,
                   "usage: ember_fuzz [--seed S] [--calls N] [--batch B] [--limit SECONDS] "
                   "[--only I] [-v]\n");
      return 2;
    }
  }
  if (only) {  // in-process, for a debugger
    const Call c = make_call(seed, *only);
    std::printf("seed %llu call %llu: %s\n", static_cast<unsigned long long>(seed),
                static_cast<unsigned long long>(*only), c.text.c_str());
    bool errored = false;
    const std::string r = run_one(c, errored);
    if (r.empty() && errored) std::printf("an ember::Error (held)\n");
    std::printf("%s\n", r.empty() ? "held" : r.c_str());
    return r.empty() ? 0 : 1;
  }
  std::size_t failed = 0;
  std::vector<std::pair<std::size_t, std::size_t>> tally(families().size());  // results, errors
  const auto report = [&](std::uint64_t i, const std::string& what) {
    ++failed;
    std::string text;
    try {
      text = make_call(seed, i).text;
    } catch (const std::exception& e) {
      text = std::string("(the generator failed: ") + e.what() + ")";
    }
    std::printf(
        "FAIL seed %llu call %llu: %s\n  call: %s\n  rerun: ember_fuzz --seed %llu --only %llu\n",
        static_cast<unsigned long long>(seed), static_cast<unsigned long long>(i), what.c_str(),
        text.c_str(), static_cast<unsigned long long>(seed), static_cast<unsigned long long>(i));
  };
  for (std::uint64_t b = 0; b < calls;) {
    const std::uint64_t e = std::min(calls, b + batch);
    const Batch r = run_batch(seed, b, e, limit);
    for (const auto& [i, what] : r.failures) report(i, what);
    for (const auto& [fam, err] : r.held) (err ? tally[fam].second : tally[fam].first)++;
    if (!r.death.empty()) {
      if (r.died_in) {
        // Confirm alone: a crash caused by an earlier call of the batch says so.
        const Batch alone = run_batch(seed, *r.died_in, *r.died_in + 1, limit);
        report(*r.died_in, r.death + (alone.death.empty() ? " (in a batch; not alone)" : ""));
        b = *r.died_in + 1;  // go on after the culprit
        continue;
      }
      report(b, r.death + " outside any call");
    }
    if (verbose) {
      std::printf("calls %llu..%llu done\n", static_cast<unsigned long long>(b),
                  static_cast<unsigned long long>(e));
    }
    b = e;
  }
  for (std::size_t k = 0; k < families().size(); ++k) {
    std::printf("  %-16s %6zu results, %6zu ember::Errors\n", families()[k].first, tally[k].first,
                tally[k].second);
  }
  std::printf("%llu calls (seed %llu, %zu families): %zu failure%s\n",
              static_cast<unsigned long long>(calls), static_cast<unsigned long long>(seed),
              families().size(), failed, failed == 1 ? "" : "s");
  return failed == 0 ? 0 : 1;
}
