// The harness's fusion mode: a differential tester of the Fusion decorator. A seeded
// generator builds random element-wise programs (unary and binary functions, scalars,
// where over comparisons, casts through another float type, broadcasts, expands and
// transposed views, reductions — sum, mean, max, min, argmax, argmin, mostly along the
// last dim, which a fused group ends with or goes on past with an epilogue —, softmax,
// log-softmax (mostly along the last dim) and layer norm over the last dim with or without
// a weight and a bias, likewise (half the steps after one read its result), reshapes of any value
// (flattened, two dims merged, dims reversed, a 1 inserted, back to the base shape: some a
// relabelling of a group's row-major order, some not, some of inputs that are not contiguous),
// matmuls by a square weight (plain or stored transposed; a matmul opens a group whose element-wise
// consumers are its epilogue), convolutions of rank-3 to 5 values that keep their shape (a 3-wide
// window padded by one along every spatial dim, dense or depthwise; a conv opens a group as a
// matmul does) and reads in the middle of the stream) over inputs laid out contiguous, transposed,
// sliced with a step, flipped or broadcast, random draws of any distribution as sources (Note
// [Random steps]), in f32, f64, f16, bf16 or i32, keeping or dropping each intermediate and moving
// operands at their last use. Each program runs on the plain device and on its fusion stack: every
// value read must agree bit for bit, and with an f64 reference (host loops, rounded to the
// dtype after each op) within a tolerance. A failing program is shrunk (steps removed while
// it still fails) and printed as a reproducer with its seed. A fifth of the programs run on
// two threads on the fused device (run_on_two_threads): one hands its pending values to
// the other mid-program, and runs the program again concurrently.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

#include "conformance/harness.hpp"

namespace conformance {

using ember::ir::BinaryFn;
using ember::ir::UnaryFn;

namespace {

enum class StepKind : std::uint8_t {
  Unary,
  Binary,
  Scalar,
  Where,
  CastRound,
  Expand,
  Transpose2,
  ReduceBack,  // a reduction along one dim, kept with extent 1 (Arg*: cast back to the dtype)
  Reshape,     // to the shape ReshapeRule(fn) makes of the operand's (reshaped())
  RowNorm,     // fn: RowFn along dim (a layer norm: the last); float dtypes only
  Read,
  Matmul,  // a · W, W [n, n] made from n alone (matmul_weight; fn 1: stored transposed)
  Random,  // random_like(a): a draw of kRandom[fn] of a's shape (a is not read)
  Conv     // conv(a, W): a [N, C, *], W [C, C / G, 3, ...] from C alone (conv_weight), padding
           // 1, stride 1 (a's shape); fn 0 dense (G = 1), fn 1 depthwise (G = C)
};

// How a Reshape step finds its shape from its operand's, so that the program replayed at
// the second size set reshapes alike.
enum class ReshapeRule : int {
  Flatten,    // [n]
  Merge,      // dims dim and dim + 1 merged (dim taken modulo rank - 1)
  Reverse,    // the extents in reverse order: rarely a relabelling of the same dims
  Unsqueeze,  // a 1 inserted at dim (modulo rank + 1)
  ToBase,     // the program's shape (when the element counts agree; else Flatten)
  Count_
};

struct Step {
  StepKind kind = StepKind::Unary;
  int a = -1, b = -1, c = -1;  // value ids
  int fn = 0;
  double s = 0;
  std::size_t dim = 0;
  bool keep = false;  // the result stays referenced to the end
};

struct Input {
  Shape shape;
  Layout layout = Layout::Contiguous;
  std::vector<double> v;  // logical values, row-major
};

struct Program {
  std::uint64_t seed = 0;
  DType dt = DType::F32;
  Shape shape;  // the full iteration space
  std::vector<Input> inputs;
  std::vector<Step> steps;
};

const UnaryFn kFloatUnary[] = {UnaryFn::Neg, UnaryFn::Abs,     UnaryFn::Tanh, UnaryFn::Sin,
                               UnaryFn::Cos, UnaryFn::Sigmoid, UnaryFn::Relu, UnaryFn::Sign};
const UnaryFn kIntUnary[] = {UnaryFn::Neg, UnaryFn::Abs, UnaryFn::Sign};
const BinaryFn kBinary[] = {BinaryFn::Add, BinaryFn::Sub, BinaryFn::Mul, BinaryFn::Max,
                            BinaryFn::Min};
using ember::ir::ReduceFn;
const ReduceFn kReduce[] = {ReduceFn::Sum, ReduceFn::Sum,    ReduceFn::Mean,  ReduceFn::Max,
                            ReduceFn::Min, ReduceFn::ArgMax, ReduceFn::ArgMin};
bool is_arg(ReduceFn f) { return f == ReduceFn::ArgMax || f == ReduceFn::ArgMin; }
// A Random step's distribution (Note [Random steps]).
const ember::Distribution kRandom[] = {
    ember::Distribution::default_(), ember::Distribution::uniform(-2, 2),
    ember::Distribution::normal(0, 1.5), ember::Distribution::bernoulli(0.4)};
// A RowNorm step's function. A layer norm's eps is large enough that a row of nearly equal
// values is not magnified past what the tolerance judges; its weight and bias are made
// from the row's extent (row_param).
enum RowFn : int { kSoftmax, kLogSoftmax, kLayerNorm, kLayerNormAffine };
constexpr double kNormEps = 1e-2;
// Element j of a layer norm's weight (which = 0) or bias (1), before rounding to the dtype.
double row_param(int which, std::size_t j) {
  return which == 0 ? 1.0 + 0.125 * double(j % 5) : 0.25 * double(j % 3) - 0.25;
}

double ref_unary(UnaryFn f, double x) {
  switch (f) {
    case UnaryFn::Neg:
      return -x;
    case UnaryFn::Abs:
      return std::fabs(x);
    case UnaryFn::Tanh:
      return std::tanh(x);
    case UnaryFn::Sin:
      return std::sin(x);
    case UnaryFn::Cos:
      return std::cos(x);
    case UnaryFn::Sigmoid:
      return 1.0 / (1.0 + std::exp(-x));
    case UnaryFn::Relu:
      return x > 0 ? x : 0.0;
    case UnaryFn::Sign:
      return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0);
    default:
      break;
  }
  return NAN;
}
double ref_binary(BinaryFn f, double a, double b) {
  switch (f) {
    case BinaryFn::Add:
      return a + b;
    case BinaryFn::Sub:
      return a - b;
    case BinaryFn::Mul:
      return a * b;
    case BinaryFn::Max:
      return a > b ? a : b;
    case BinaryFn::Min:
      return a < b ? a : b;
    default:
      break;
  }
  return NAN;
}

// Storage rounding of dt (i32 wraps).
double store(DType dt, double v) {
  if (dt == DType::I32) {
    return static_cast<double>(static_cast<std::int32_t>(
        static_cast<std::uint32_t>(static_cast<std::int64_t>(v) & 0xffffffffLL)));
  }
  return quantize(dt, v);
}

// Element (i, j) of a Matmul step's weight [n, n] for an operand whose last extent is n,
// before rounding to the dtype: small multiples of 1 / (2n), so products stay near the
// operand's magnitude.
double matmul_weight(std::size_t n, std::size_t i, std::size_t j) {
  return (double((i * 7 + j * 3) % 11) - 5.0) / double(2 * n);
}

// Element (oc, cc, t) of a Conv step's weight [C, C / G, 3, ...] (t the window offset,
// row-major, of K = 3^spatial): small multiples of 1 / (2 K C / G), so sums stay near the
// operand's magnitude.
double conv_weight(std::size_t cg, std::size_t k, std::size_t oc, std::size_t cc, std::size_t t) {
  return (double((oc * 5 + cc * 3 + t * 7) % 13) - 6.0) / double(2 * cg * k);
}

DType round_trip_type(DType dt) {
  return dt == DType::F32 || dt == DType::F64 ? DType::F16 : DType::F32;
}

Shape reshaped(const Shape& a, ReshapeRule rule, std::size_t dim, const Shape& base) {
  std::vector<std::size_t> d = a.dims();
  switch (rule) {
    case ReshapeRule::Merge:
      if (d.size() >= 2) {
        const std::size_t k = dim % (d.size() - 1);
        d[k] *= d[k + 1];
        d.erase(d.begin() + static_cast<std::ptrdiff_t>(k) + 1);
        return Shape(d);
      }
      [[fallthrough]];
    case ReshapeRule::Unsqueeze:
      d.insert(d.begin() + static_cast<std::ptrdiff_t>(dim % (d.size() + 1)), 1);
      return Shape(d);
    case ReshapeRule::Reverse:
      std::reverse(d.begin(), d.end());
      return Shape(d);
    case ReshapeRule::ToBase:
      if (base.num_elements() == a.num_elements()) return base;
      [[fallthrough]];
    default:
      return Shape({a.num_elements()});
  }
}

// Whether a and b broadcast together (NumPy's rule, right-aligned).
bool broadcastable(const Shape& a, const Shape& b) {
  const std::size_t r = std::min(a.rank(), b.rank());
  for (std::size_t i = 1; i <= r; ++i) {
    const std::size_t x = a[a.rank() - i], y = b[b.rank() - i];
    if (x != y && x != 1 && y != 1) return false;
  }
  return true;
}

// ---- generation ----

// second_sizes: the same program (steps, dtypes, broadcast pattern, dim classes) at other
// extents, so its groups meet the plans the first run built.
Program generate(std::uint64_t seed, bool second_sizes = false) {
  Rng rng(seed);
  const auto pick = [&](std::size_t n) { return static_cast<std::size_t>(rng() % n); };
  Program p;
  p.seed = seed;
  const DType dts[] = {DType::F32, DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32};
  p.dt = dts[pick(6)];
  const std::size_t extents[] = {0, 1, 2, 3, 5, 7, 17, 33, 600};
  const std::size_t rank = 1 + pick(3);
  std::vector<std::size_t> dims(rank);
  std::size_t numel = 1;
  for (auto& e : dims) {
    do {
      e = extents[pick(9)];
    } while (e * numel > 2048);
    numel *= std::max<std::size_t>(e, 1);
  }
  if (second_sizes) {
    for (auto& e : dims) e = e <= 1 ? e : e + 3;
  }
  p.shape = Shape(dims);
  const std::size_t n_inputs = 1 + pick(3);
  for (std::size_t i = 0; i < n_inputs; ++i) {
    Input in;
    std::vector<std::size_t> d = dims;
    if (i > 0 && rng() % 2) d[pick(rank)] = 1;  // a broadcast input
    in.shape = Shape(d);
    const Layout ls[] = {Layout::Contiguous, Layout::Permuted, Layout::Sliced, Layout::Flipped};
    in.layout = ls[pick(4)];
    if (in.layout == Layout::Permuted && rank < 2) in.layout = Layout::Contiguous;
    in.v.resize(in.shape.num_elements());
    Rng vr(seed * 31 + i);  // values apart, so both size sets draw the same program
    for (auto& x : in.v) {
      x = p.dt == DType::I32 ? static_cast<double>(static_cast<int>(vr() % 9) - 4)
                             : std::uniform_real_distribution<double>(-3, 3)(vr);
      x = store(p.dt, x);
    }
    p.inputs.push_back(std::move(in));
  }
  // Shapes of the values so far (for choosing operands).
  std::vector<Shape> shapes;
  for (const auto& in : p.inputs) shapes.push_back(in.shape);
  const bool is_float = p.dt != DType::I32;
  const std::size_t depth = 2 + pick(11);
  // Matmul steps replace some unary steps of float programs of rank 2 and 3 (their results
  // have the operand's shape): drawn from a stream of their own, so every other program is
  // the one the seed made before they existed.
  Rng matmul_rng(seed * 0x9e3779b97f4a7c15ULL + 0x6d6d);
  // Conv steps replace some other unary steps of float programs, of values of rank 3 to 5
  // with no extent 0 (so at both size sets), from a stream of their own too.
  Rng conv_rng(seed * 0x9e3779b97f4a7c15ULL + 0x636f6e76);
  // Some reductions of values of rank 2 and more become full ones (the value flattened by a
  // reshape step first, then reduced along its one dim: a loss's sum or mean, Note
  // [Coarsened iteration space]), from a stream of their own too.
  Rng full_rng(seed * 0x9e3779b97f4a7c15ULL + 0x66756c6c);
  // Half the steps after a reduction, softmax or layer norm read its result (a row op's
  // epilogue, Note [Row epilogues]), from a stream of their own too.
  Rng epilogue_rng(seed * 0x9e3779b97f4a7c15ULL + 0x6570696c);
  // An operand whose shape broadcasts with `with` (reshaped values may not) to at most
  // kMaxBroadcast elements: a uniform pick among those that do (`a` itself always does).
  // (Seed 200000687 crossed a [600] with a [600, 1] and that with a [600, 1, 1]: 216 M
  // elements, 6.4 GB and 26 s for one program.) A cap the second size set crosses where
  // the first did not gives that set another program: harmless, it misses the plans.
  constexpr std::size_t kMaxBroadcast = std::size_t{1} << 20;
  const auto operand = [&](const Shape& with) {
    std::vector<int> ok;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      if (broadcastable(shapes[i], with) &&
          (broadcast(shapes[i], with).num_elements() <= kMaxBroadcast || shapes[i] == with)) {
        ok.push_back(static_cast<int>(i));
      }
    }
    return ok[pick(ok.size())];
  };
  for (std::size_t k = 0; k < depth; ++k) {
    Step s;
    s.keep = rng() % 4 == 0;
    const int n = static_cast<int>(shapes.size());
    s.a = static_cast<int>(pick(static_cast<std::size_t>(n)));
    if (!p.steps.empty() &&
        (p.steps.back().kind == StepKind::ReduceBack || p.steps.back().kind == StepKind::RowNorm)) {
      if (epilogue_rng() % 2 == 0) s.a = n - 1;  // (the last step's result)
    }
    const Shape& sa = shapes[static_cast<std::size_t>(s.a)];
    const std::size_t r = pick(115);
    if (r < 30) {
      s.kind = StepKind::Unary;
      s.fn =
          is_float ? static_cast<int>(kFloatUnary[pick(8)]) : static_cast<int>(kIntUnary[pick(3)]);
    } else if (r < 55) {
      s.kind = StepKind::Binary;
      s.b = operand(sa);
      s.fn = static_cast<int>(kBinary[pick(5)]);
    } else if (r < 70) {
      s.kind = StepKind::Scalar;
      s.fn = static_cast<int>(kBinary[pick(3)]);
      s.s = is_float ? std::round(std::uniform_real_distribution<double>(-1.5, 1.5)(rng) * 8) / 8
                     : static_cast<double>(static_cast<int>(pick(5)) - 2);
    } else if (r < 80) {
      s.kind = StepKind::Where;
      s.b = operand(sa);
      s.c = operand(broadcast(sa, shapes[static_cast<std::size_t>(s.b)]));
    } else if (r < 85 && is_float) {
      s.kind = StepKind::CastRound;
    } else if (r < 88 && sa.rank() <= rank && broadcast(sa, p.shape) == p.shape) {
      s.kind = StepKind::Expand;
    } else if (r < 91 && sa.rank() >= 2) {
      s.kind = StepKind::Transpose2;
    } else if (r < 96 && sa.rank() >= 1) {
      s.kind = StepKind::ReduceBack;
      s.fn = static_cast<int>(kReduce[pick(7)]);
      // Mostly along the last dim (the rows a fused reduction takes), sometimes any.
      s.dim = rng() % 3 ? sa.rank() - 1 : pick(sa.rank());
    } else if (r < 99 && is_float && sa.rank() >= 1) {
      s.kind = StepKind::RowNorm;
      s.fn = static_cast<int>(pick(4));
      s.dim = s.fn >= kLayerNorm || rng() % 3 ? sa.rank() - 1 : pick(sa.rank());
    } else if (r < 101) {
      s.kind = StepKind::Read;
    } else if (r >= 109) {
      s.kind = StepKind::Random;
      s.fn = static_cast<int>(pick(4));
    } else {
      s.kind = StepKind::Reshape;
      s.fn = static_cast<int>(pick(static_cast<std::size_t>(ReshapeRule::Count_)));
      s.dim = pick(4);
    }
    if (is_float && s.kind == StepKind::Unary && sa.rank() >= 2 && matmul_rng() % 5 == 0) {
      s.kind = StepKind::Matmul;
      s.fn = static_cast<int>(matmul_rng() % 2);
    }
    if (is_float && s.kind == StepKind::Unary && sa.rank() >= 3 && sa.rank() <= 5 &&
        sa.num_elements() > 0 && conv_rng() % 3 == 0) {
      s.kind = StepKind::Conv;
      s.fn = static_cast<int>(conv_rng() % 2);
    }
    if (s.kind == StepKind::ReduceBack && sa.rank() >= 2 && full_rng() % 3 == 0) {
      Step flat;
      flat.kind = StepKind::Reshape;
      flat.a = s.a;
      flat.fn = static_cast<int>(ReshapeRule::Flatten);
      const Shape to = reshaped(sa, ReshapeRule::Flatten, 0, p.shape);  // (sa: before the push)
      shapes.push_back(to);
      p.steps.push_back(flat);
      s.a = static_cast<int>(shapes.size()) - 1;
      s.dim = 0;
    }
    Shape out = shapes[static_cast<std::size_t>(s.a)];
    if (s.kind == StepKind::Binary) out = broadcast(out, shapes[static_cast<std::size_t>(s.b)]);
    if (s.kind == StepKind::Where) {
      out = broadcast(broadcast(out, shapes[static_cast<std::size_t>(s.b)]),
                      shapes[static_cast<std::size_t>(s.c)]);
    }
    if (s.kind == StepKind::Expand) out = p.shape;
    if (s.kind == StepKind::ReduceBack) {
      std::vector<std::size_t> d = out.dims();
      d[s.dim] = 1;
      out = Shape(d);
    }
    if (s.kind == StepKind::Reshape)
      out = reshaped(out, static_cast<ReshapeRule>(s.fn), s.dim, p.shape);
    shapes.push_back(out);
    p.steps.push_back(s);
  }
  return p;
}

// Note [Random steps]: a program's draws come from the device's generator, seeded with the
// program's seed when it starts, so the plain and the fused device draw the same counters
// and must read the same bits — the Fusion decorator reserves a draw's counters when it
// records it (Note [Reserved draws] in backend/fused_group.hpp), however it groups it. The
// f64 reference cannot know the drawn values: it skips every value read that depends on a
// draw (those are compared with the plain device bit for bit only). The concurrent rerun of
// the two-thread mode draws from the same generator as the handed-over run, in an order
// the threads decide, so programs with draws run the handover alone.
bool draws(const Program& p) {
  for (const Step& s : p.steps) {
    if (s.kind == StepKind::Random) return true;
  }
  return false;
}

// ---- running on a device ----

using ember::DynTensor;
namespace ops = ember::ops;

DynTensor make_input(const Input& in, DType dt, const Device& dev) {
  const auto host = [&](const Shape& s, const std::vector<double>& v) {
    return ops::cast(DynTensor::from_data(ember::TensorData::from<double>(v, s), dev), dt);
  };
  const std::size_t r = in.shape.rank();
  switch (in.layout) {
    case Layout::Permuted: {  // stored transposed, read through a transpose
      std::vector<std::size_t> d = in.shape.dims();
      std::swap(d[r - 1], d[r - 2]);
      const Shape st(d);
      std::vector<double> v(in.v.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        auto idx = unravel(i, in.shape);
        std::swap(idx[r - 1], idx[r - 2]);
        v[ravel(idx, st)] = in.v[i];
      }
      return ops::transpose(host(st, v));
    }
    case Layout::Sliced: {  // every other row of a buffer twice as long along dim 0
      std::vector<std::size_t> d = in.shape.dims();
      d[0] *= 2;
      const Shape big(d);
      std::vector<double> v(big.num_elements(), 99.0);
      for (std::size_t i = 0; i < in.v.size(); ++i) {
        auto idx = unravel(i, in.shape);
        idx[0] *= 2;
        v[ravel(idx, big)] = in.v[i];
      }
      std::vector<ops::Range> ranges{ops::Range(0, static_cast<std::int64_t>(d[0]), 2)};
      return ops::slice(host(big, v), ranges);
    }
    case Layout::Flipped: {
      std::vector<double> v(in.v.size());
      for (std::size_t i = 0; i < v.size(); ++i) {
        auto idx = unravel(i, in.shape);
        idx[0] = in.shape[0] - 1 - idx[0];
        v[ravel(idx, in.shape)] = in.v[i];
      }
      return ops::flip(host(in.shape, v), {0});
    }
    default:
      return host(in.shape, in.v);
  }
}

struct Observed {
  std::vector<ember::TensorData> reads;
  std::string error;
};

// Runs p's steps on dev: init() makes the inputs, step(k) records step k, finish() reads
// every value still held. The steps may be run by two threads in turn (two_threads).
class Runner {
 public:
  Runner(const Program& p, const Device& dev) : p_(p), dev_(dev), n_in_(p.inputs.size()) {}

  void init() {
    if (draws(p_)) dev_.seed(p_.seed);  // (Note [Random steps])
    for (const auto& in : p_.inputs) vals_.emplace_back(make_input(in, p_.dt, dev_));
    // Last use of each value; a value not kept is moved into its last reader.
    last_.assign(n_in_ + p_.steps.size(), 0);
    keep_.assign(n_in_ + p_.steps.size(), n_in_ > 0);
    for (std::size_t i = 0; i < n_in_; ++i) keep_[i] = (p_.seed >> i) & 1;
    for (std::size_t k = 0; k < p_.steps.size(); ++k) {
      const Step& s = p_.steps[k];
      keep_[n_in_ + k] = s.keep || k + 1 == p_.steps.size();
      for (int a : {s.a, s.b, s.c}) {
        if (a >= 0) last_[static_cast<std::size_t>(a)] = k + 1;
      }
    }
  }

  void step(std::size_t k) {
    const Step& s = p_.steps[k];
    const auto arg = [&](int id) -> DynTensor {
      const auto i = static_cast<std::size_t>(id);
      const bool again = (s.a == id) + (s.b == id) + (s.c == id) > 1;
      if (last_[i] == k + 1 && !keep_[i] && !again) {
        DynTensor t = std::move(*vals_[i]);
        vals_[i].reset();
        return t;
      }
      return *vals_[i];
    };
    DynTensor out = [&]() -> DynTensor {
      switch (s.kind) {
        case StepKind::Unary:
          return ops::unary(static_cast<UnaryFn>(s.fn), arg(s.a));
        case StepKind::Binary: {
          DynTensor x = arg(s.a);
          return ops::binary(static_cast<BinaryFn>(s.fn), std::move(x), arg(s.b));
        }
        case StepKind::Scalar:
          return ops::binary_scalar(static_cast<BinaryFn>(s.fn), arg(s.a), s.s);
        case StepKind::Where: {
          DynTensor x = arg(s.a), y = arg(s.b), z = arg(s.c);
          DynTensor m = ops::binary(BinaryFn::Gt, x, y);
          return ops::mask_where(std::move(m), std::move(x), std::move(z));
        }
        case StepKind::CastRound:
          return ops::cast(ops::cast(arg(s.a), round_trip_type(p_.dt)), p_.dt);
        case StepKind::Expand:
          return ops::expand(arg(s.a), p_.shape);
        case StepKind::Transpose2:
          return ops::transpose(ops::transpose(arg(s.a)));
        case StepKind::ReduceBack: {
          const auto fn = static_cast<ReduceFn>(s.fn);
          DynTensor r = ops::reduce(fn, arg(s.a), static_cast<std::int64_t>(s.dim));
          return is_arg(fn) ? ops::cast(std::move(r), p_.dt) : r;
        }
        case StepKind::Reshape: {
          DynTensor x = arg(s.a);
          const Shape to = reshaped(x.shape(), static_cast<ReshapeRule>(s.fn), s.dim, p_.shape);
          return ops::reshape(std::move(x), to);
        }
        case StepKind::RowNorm: {
          DynTensor x = arg(s.a);
          const auto dim = static_cast<std::int64_t>(s.dim);
          if (s.fn == kSoftmax) return ops::softmax(std::move(x), dim);
          if (s.fn == kLogSoftmax) return ops::log_softmax(std::move(x), dim);
          const std::size_t n = x.shape()[s.dim];
          std::optional<DynTensor> w, b;
          if (s.fn == kLayerNormAffine) {
            std::vector<double> wv(n), bv(n);
            for (std::size_t j = 0; j < n; ++j) {
              wv[j] = row_param(0, j);
              bv[j] = row_param(1, j);
            }
            const auto param = [&](const std::vector<double>& v) {
              return ops::cast(
                  DynTensor::from_data(ember::TensorData::from<double>(v, Shape{n}), dev_), p_.dt);
            };
            w = param(wv);
            b = param(bv);
          }
          return ops::layer_norm(std::move(x), Shape{n}, std::move(w), std::move(b), kNormEps);
        }
        case StepKind::Read: {
          DynTensor x = arg(s.a);
          o_.reads.push_back(x.to_data());
          return x;
        }
        case StepKind::Matmul: {
          DynTensor x = arg(s.a);
          const std::size_t r = x.shape().rank(), n = x.shape()[r - 1];
          std::vector<std::size_t> d(r, 1);
          d[r - 2] = d[r - 1] = n;
          std::vector<double> w(n * n);
          for (std::size_t i = 0; i < n; ++i) {
            for (std::size_t j = 0; j < n; ++j) {
              // Stored transposed (fn 1): element (i, j) of W at (j, i), read through a transpose.
              w[s.fn == 1 ? j * n + i : i * n + j] = matmul_weight(n, i, j);
            }
          }
          DynTensor wt = ops::cast(
              DynTensor::from_data(ember::TensorData::from<double>(w, Shape(d)), dev_), p_.dt);
          return ops::matmul(std::move(x), s.fn == 1 ? ops::transpose(std::move(wt)) : wt);
        }
        case StepKind::Random: {
          const Shape shape = arg(s.a).shape();
          return ops::random(shape, kRandom[s.fn], p_.dt, dev_);
        }
        case StepKind::Conv: {
          DynTensor x = arg(s.a);
          const std::size_t r = x.shape().rank(), c = x.shape()[1], g = s.fn == 1 ? c : 1;
          const std::size_t cg = c / g, k = static_cast<std::size_t>(std::pow(3, r - 2));
          std::vector<std::size_t> d(r, 3);
          d[0] = c;
          d[1] = cg;
          std::vector<double> w(c * cg * k);
          for (std::size_t oc = 0; oc < c; ++oc)
            for (std::size_t cc = 0; cc < cg; ++cc)
              for (std::size_t t = 0; t < k; ++t)
                w[(oc * cg + cc) * k + t] = conv_weight(cg, k, oc, cc, t);
          DynTensor wt = ops::cast(
              DynTensor::from_data(ember::TensorData::from<double>(w, Shape(d)), dev_), p_.dt);
          const std::vector<std::size_t> ones(r - 2, 1);
          return ember::module_ops::conv(std::move(x), std::move(wt), std::nullopt,
                                         {ones, ones, {}}, g);
        }
      }
      return arg(s.a);
    }();
    for (int id : {s.a, s.b, s.c}) {
      const auto i = static_cast<std::size_t>(id);
      if (id >= 0 && last_[i] == k + 1 && !keep_[i]) vals_[i].reset();
    }
    vals_.emplace_back(std::move(out));
    if (!keep_[n_in_ + k] && last_[n_in_ + k] == 0) vals_.back().reset();
  }

  void finish() {
    for (const auto& v : vals_) {
      if (v) o_.reads.push_back(v->to_data());
    }
    vals_.clear();
  }

  void drop() { vals_.clear(); }
  Observed& observed() { return o_; }

 private:
  const Program& p_;
  Device dev_;
  std::size_t n_in_;
  std::vector<std::optional<DynTensor>> vals_;
  std::vector<std::size_t> last_;
  std::vector<bool> keep_;
  Observed o_;
};

// Whether p runs in the two-thread mode on the fused device: a fifth of the programs.
bool two_threads(const Program& p) { return p.seed % 5 == 4 && p.steps.size() >= 2; }

Observed run_on(const Program& p, const Device& dev) {
  Runner r(p, dev);
  try {
    r.init();
    for (std::size_t k = 0; k < p.steps.size(); ++k) r.step(k);
    r.finish();
  } catch (const std::exception& e) {
    r.observed().error = e.what();
  }
  return r.observed();
}

// The two-thread mode: a second thread makes the inputs and records the first half of the
// steps, then hands over, staying alive; this thread records the rest over values still
// pending in the other thread's stream (a cross-thread use: that stream flushes first) and
// reads everything. Meanwhile the second thread runs the whole program once more on its
// own stream, concurrently; both runs must read the plain device's values. Returns the
// two observations.
std::pair<Observed, Observed> run_on_two_threads(const Program& p, const Device& dev) {
  Runner first(p, dev);
  Observed again;
  std::mutex mu;
  std::condition_variable cv;
  bool handed = false;
  const std::size_t h = p.steps.size() / 2;
  std::thread worker([&] {
    try {
      first.init();
      for (std::size_t k = 0; k < h; ++k) first.step(k);
    } catch (const std::exception& e) {
      first.observed().error = e.what();
    }
    {
      std::lock_guard lk(mu);
      handed = true;
    }
    cv.notify_all();
    if (!draws(p)) again = run_on(p, dev);  // (Note [Random steps])
  });
  {
    std::unique_lock lk(mu);
    cv.wait(lk, [&] { return handed; });
  }
  if (first.observed().error.empty()) {
    try {
      for (std::size_t k = h; k < p.steps.size(); ++k) first.step(k);
      first.finish();
    } catch (const std::exception& e) {
      first.observed().error = e.what();
    }
  }
  worker.join();
  first.drop();  // (after an error: what is left, dropped on this thread)
  return {first.observed(), again};
}

// The f64 reference of every value read, in run_on's order; drawn[i]: read i depends on a
// draw, and its reference is unknown (Note [Random steps]); scale[i]: the largest magnitude
// of read i and of every value it was computed from (Note [Reference scale]).
//
// Note [Reference scale]: a device rounds each step, and a sum of many elements is not
// correctly rounded (its order of adding is the kernel's), so a value carries an absolute
// error of a few ulps of the largest intermediate it came from, which a later step of
// slope about 1 (sin, cos, tanh, a subtraction of near values) passes on undiminished:
// sin(sum of 3015 values near -2640) is off by ulp(2640) * |cos| = 1.2e-4 with the device
// exact to the last bit (seed 94000289). So the bound adds 64 ulps of that scale at the
// program's precision to the tolerance relative to the value's own magnitude: 0.02 here,
// where a tolerance of the scale itself (0.26) would judge nothing a sine gives. (Bits are
// still compared with the plain device exactly.)
//
// Note [Costly references]: a broadcast may give a matmul step many rows of a long last
// extent (seed 110001104: 1800 rows of 1800 against its [1800, 1800] weight, 5.8e9
// multiply-adds in f64, a minute on one core for two size sets, where the devices take
// milliseconds). Past kReferenceMacs the reference is not computed (nullopt) and the
// program is judged bit for bit against the plain device alone, as Note [Fragile
// comparisons] judges its programs.
constexpr double kReferenceMacs = double(1 << 26);

std::optional<std::vector<HostTensor>> reference(const Program& p, std::vector<bool>& drawn,
                                                 std::vector<double>& scale) {
  const std::size_t n_in = p.inputs.size();
  std::vector<HostTensor> vals;
  for (const auto& in : p.inputs) vals.emplace_back(in.shape, p.dt, in.v);
  std::vector<HostTensor> reads;
  drawn.clear();
  scale.clear();
  const auto max_abs = [](const HostTensor& t) {
    double m = 0;
    for (double x : t.v) m = std::isfinite(x) ? std::max(m, std::fabs(x)) : m;
    return m;
  };
  std::vector<double> sc;  // per value: Note [Reference scale]
  for (const auto& v : vals) sc.push_back(max_abs(v));
  std::vector<bool> random(n_in + p.steps.size(), false);  // depends on a draw
  std::vector<bool> alive(n_in + p.steps.size(), true);
  std::vector<std::size_t> last(n_in + p.steps.size(), 0);
  std::vector<bool> keep(n_in + p.steps.size());
  for (std::size_t i = 0; i < n_in; ++i) keep[i] = (p.seed >> i) & 1;
  for (std::size_t k = 0; k < p.steps.size(); ++k) {
    const Step& s = p.steps[k];
    keep[n_in + k] = s.keep || k + 1 == p.steps.size();
    for (int a : {s.a, s.b, s.c}) {
      if (a >= 0) last[static_cast<std::size_t>(a)] = k + 1;
    }
  }
  const auto map = [&](std::initializer_list<const HostTensor*> xs, const Shape& out, auto f) {
    HostTensor r(out, p.dt);
    for (std::size_t i = 0; i < r.numel(); ++i) {
      const auto idx = unravel(i, out);
      std::array<double, 3> v{};
      std::size_t j = 0;
      for (const HostTensor* x : xs) v[j++] = x->v[broadcast_index(idx, x->shape)];
      r.v[i] = store(p.dt, f(v[0], v[1], v[2]));
    }
    return r;
  };
  for (std::size_t k = 0; k < p.steps.size(); ++k) {
    const Step& s = p.steps[k];
    const HostTensor& a = vals[static_cast<std::size_t>(s.a)];
    HostTensor out;
    switch (s.kind) {
      case StepKind::Unary:
        out = map({&a}, a.shape, [&](double x, double, double) {
          return ref_unary(static_cast<UnaryFn>(s.fn), x);
        });
        break;
      case StepKind::Binary: {
        const HostTensor& b = vals[static_cast<std::size_t>(s.b)];
        out = map({&a, &b}, broadcast(a.shape, b.shape), [&](double x, double y, double) {
          return ref_binary(static_cast<BinaryFn>(s.fn), x, y);
        });
        break;
      }
      case StepKind::Scalar:
        out = map({&a}, a.shape, [&](double x, double, double) {
          return ref_binary(static_cast<BinaryFn>(s.fn), x, store(p.dt, s.s));
        });
        break;
      case StepKind::Where: {
        const HostTensor& b = vals[static_cast<std::size_t>(s.b)];
        const HostTensor& c = vals[static_cast<std::size_t>(s.c)];
        out = map({&a, &b, &c}, broadcast(broadcast(a.shape, b.shape), c.shape),
                  [](double x, double y, double z) { return x > y ? x : z; });
        break;
      }
      case StepKind::CastRound:
        out = map({&a}, a.shape,
                  [&](double x, double, double) { return quantize(round_trip_type(p.dt), x); });
        break;
      case StepKind::Expand:
        out = map({&a}, p.shape, [](double x, double, double) { return x; });
        break;
      case StepKind::Transpose2:
        out = a;
        break;
      case StepKind::ReduceBack: {
        const auto fn = static_cast<ReduceFn>(s.fn);
        std::vector<std::size_t> d = a.shape.dims();
        const std::size_t n = d[s.dim];
        d[s.dim] = 1;
        out = HostTensor(Shape(d), p.dt);
        std::vector<bool> seen(out.v.size(), false);
        std::vector<double> best(out.v.size(), 0);
        for (std::size_t i = 0; i < a.numel(); ++i) {
          auto idx = unravel(i, a.shape);
          const auto pos = static_cast<double>(idx[s.dim]);
          idx[s.dim] = 0;
          const std::size_t o = ravel(idx, out.shape);
          const double x = a.v[i];
          switch (fn) {
            case ReduceFn::Max:
            case ReduceFn::Min:
              if (!seen[o] || (fn == ReduceFn::Max ? x > out.v[o] : x < out.v[o])) out.v[o] = x;
              break;
            case ReduceFn::ArgMax:
            case ReduceFn::ArgMin:  // the first extreme
              if (!seen[o] || (fn == ReduceFn::ArgMax ? x > best[o] : x < best[o])) {
                best[o] = x;
                out.v[o] = pos;
              }
              break;
            default:
              out.v[o] += x;
          }
          seen[o] = true;
        }
        if (fn == ReduceFn::Mean) {
          for (auto& x : out.v) {
            x = n == 0 ? (p.dt == DType::I32 ? 0.0 : NAN)
                       : (p.dt == DType::I32 ? std::trunc(x / static_cast<double>(n))
                                             : x / static_cast<double>(n));
          }
        }
        for (auto& x : out.v) x = store(p.dt, x);
        break;
      }
      case StepKind::Reshape:
        out = a;
        out.shape = reshaped(a.shape, static_cast<ReshapeRule>(s.fn), s.dim, p.shape);
        break;
      case StepKind::RowNorm: {  // along rows of dim s.dim, in f64, stored once
        out = a;
        const std::size_t n = a.shape[s.dim];
        std::size_t inner = 1;
        for (std::size_t d = s.dim + 1; d < a.shape.rank(); ++d) inner *= a.shape[d];
        for (std::size_t i = 0; n > 0 && i < a.numel(); ++i) {
          if ((i / inner) % n != 0) continue;  // i: the first element of a row
          const auto at = [&](std::size_t j) { return a.v[i + j * inner]; };
          double m = -INFINITY, sum = 0, mean = 0, var = 0;
          for (std::size_t j = 0; j < n; ++j) {
            m = std::max(m, at(j));
            mean += at(j) / static_cast<double>(n);
          }
          for (std::size_t j = 0; j < n; ++j) {
            sum += std::exp(at(j) - m);
            var += (at(j) - mean) * (at(j) - mean) / static_cast<double>(n);
          }
          for (std::size_t j = 0; j < n; ++j) {
            double y = 0;
            if (s.fn == kSoftmax) {
              y = std::exp(at(j) - m) / sum;
            } else if (s.fn == kLogSoftmax) {
              y = at(j) - m - std::log(sum);
            } else {
              y = (at(j) - mean) / std::sqrt(var + kNormEps);
              if (s.fn == kLayerNormAffine) {
                y = y * store(p.dt, row_param(0, j)) + store(p.dt, row_param(1, j));
              }
            }
            out.v[i + j * inner] = store(p.dt, y);
          }
        }
        break;
      }
      case StepKind::Read:
        reads.push_back(a);
        drawn.push_back(random[static_cast<std::size_t>(s.a)]);
        scale.push_back(sc[static_cast<std::size_t>(s.a)]);
        out = a;
        break;
      case StepKind::Matmul: {  // summed in f64, stored once
        out = a;
        const std::size_t n = a.shape[a.shape.rank() - 1];
        if (double(a.numel()) * double(n) > kReferenceMacs) return std::nullopt;
        // The weight as stored, once.
        std::vector<double> w(n * n);
        for (std::size_t l = 0; l < n; ++l)
          for (std::size_t j = 0; j < n; ++j) w[l * n + j] = store(p.dt, matmul_weight(n, l, j));
        // Each output's sum over l in order; the l loop outside, so w is read along its rows.
        std::vector<double> acc(n);
        for (std::size_t row = 0; n > 0 && row < a.numel() / n; ++row) {
          std::fill(acc.begin(), acc.end(), 0.0);
          for (std::size_t l = 0; l < n; ++l) {
            const double x = a.v[row * n + l];
            const double* wl = w.data() + l * n;
            for (std::size_t j = 0; j < n; ++j) acc[j] += x * wl[j];
          }
          for (std::size_t j = 0; j < n; ++j) out.v[row * n + j] = store(p.dt, acc[j]);
        }
        break;
      }
      case StepKind::Random:  // (unknown values)
        out = HostTensor(a.shape, p.dt);
        break;
      case StepKind::Conv: {  // summed in f64, stored once
        out = a;
        const std::size_t r = a.shape.rank(), sp = r - 2, n = a.shape[0], c = a.shape[1];
        const std::size_t g = s.fn == 1 ? c : 1, cg = c / g, og = c / g;
        std::array<std::size_t, 3> e{1, 1, 1}, kw{1, 1, 1};
        for (std::size_t i = 0; i < sp; ++i) {
          e[3 - sp + i] = a.shape[2 + i];
          kw[3 - sp + i] = 3;
        }
        const std::size_t l = e[0] * e[1] * e[2], k = kw[0] * kw[1] * kw[2];
        const auto pad = [&](std::size_t dd) { return kw[dd] == 3 ? 1 : 0; };
        for (std::size_t q = 0; q < n; ++q)
          for (std::size_t oc = 0; oc < c; ++oc)
            for (std::size_t z = 0; z < e[0]; ++z)
              for (std::size_t y = 0; y < e[1]; ++y)
                for (std::size_t x = 0; x < e[2]; ++x) {
                  double sum = 0;
                  for (std::size_t cc = 0; cc < cg; ++cc)
                    for (std::size_t t = 0; t < k; ++t) {
                      const std::int64_t iz = std::int64_t(z + t / (kw[1] * kw[2])) - pad(0);
                      const std::int64_t iy = std::int64_t(y + t / kw[2] % kw[1]) - pad(1);
                      const std::int64_t ix = std::int64_t(x + t % kw[2]) - pad(2);
                      if (iz < 0 || iy < 0 || ix < 0 || iz >= std::int64_t(e[0]) ||
                          iy >= std::int64_t(e[1]) || ix >= std::int64_t(e[2]))
                        continue;
                      const std::size_t ch = oc / og * cg + cc;
                      sum +=
                          a.v[(q * c + ch) * l + (std::size_t(iz) * e[1] + std::size_t(iy)) * e[2] +
                              std::size_t(ix)] *
                          store(p.dt, conv_weight(cg, k, oc, cc, t));
                    }
                  out.v[(q * c + oc) * l + (z * e[1] + y) * e[2] + x] = store(p.dt, sum);
                }
        break;
      }
    }
    bool r = s.kind == StepKind::Random;
    for (int id : {s.a, s.b, s.c}) {
      if (id >= 0 && s.kind != StepKind::Random) r = r || random[static_cast<std::size_t>(id)];
    }
    random[n_in + k] = r;
    double m = max_abs(out);
    for (int id : {s.a, s.b, s.c}) {
      if (id >= 0 && s.kind != StepKind::Random) m = std::max(m, sc[static_cast<std::size_t>(id)]);
    }
    sc.push_back(m);
    vals.push_back(std::move(out));
    for (int id : {s.a, s.b, s.c}) {
      if (id >= 0 && last[static_cast<std::size_t>(id)] == k + 1 &&
          !keep[static_cast<std::size_t>(id)])
        alive[static_cast<std::size_t>(id)] = false;
    }
    if (!keep[n_in + k] && last[n_in + k] == 0) alive[n_in + k] = false;
  }
  for (std::size_t i = 0; i < vals.size(); ++i) {
    if (!alive[i]) continue;
    reads.push_back(vals[i]);
    drawn.push_back(random[i]);
    scale.push_back(sc[i]);
  }
  return reads;
}

std::vector<double> as_f64(const ember::TensorData& t) {
  std::vector<double> v(t.shape().num_elements());
  ember::convert_elements(t.data(), t.dtype(), v.data(), DType::F64, v.size());
  return v;
}

// "" when p passes; else what differed.
std::string compare(const Program& p, const Observed& a, const Observed& b);

std::string check(const Program& p, const Device& plain, const Device& fused, bool threads) {
  const Observed a = run_on(p, plain);
  if (!threads || !two_threads(p)) return compare(p, a, run_on(p, fused));
  const auto [handed, again] = run_on_two_threads(p, fused);
  std::string why = compare(p, a, handed);
  if (!why.empty())
    return "two threads, handed over at step " + std::to_string(p.steps.size() / 2) + ": " + why;
  if (draws(p)) return "";  // no concurrent run (Note [Random steps])
  why = compare(p, a, again);
  return why.empty() ? "" : "two threads, the concurrent run: " + why;
}

// "" when the fused run b agrees with the plain run a (and the reference); else what differed.
std::string compare(const Program& p, const Observed& a, const Observed& b) {
  if (a.error != b.error) return "errors differ: plain '" + a.error + "', fused '" + b.error + "'";
  if (!a.error.empty()) return "";  // both raised the same error
  if (a.reads.size() != b.reads.size()) return "different numbers of values read";
  std::vector<bool> drawn;
  std::vector<double> scale;
  // (nullopt: bits only, Note [Costly references].)
  const std::optional<std::vector<HostTensor>> ref = reference(p, drawn, scale);
  if (ref && ref->size() != a.reads.size())
    return "the reference read a different number of values";
  // Note [Fragile comparisons]: a where's condition compares two values, and where they are
  // near-equal the branch taken depends on their last bits. The f64 reference rounds each
  // step's exact value, which a device's tanh, cos, layer norm or sum (none correctly
  // rounded) need not give, so such a program's reference may take the other branch while
  // the plain and fused devices agree with each other bit for bit. That happens by
  // construction in `gt(round_trip(v), v)` (true exactly when the cast rounded up) and by
  // chance among the many pairs a broadcast compares. So a program with a where and any
  // step that is not correctly rounded, like one with an arg reduction (whose index
  // depends on near-equal values), is judged bit for bit against the plain device only:
  // the plain device's own accuracy is the conformance harness's to check. So is `sign` of
  // a float value after such a step: a sum that is 0 exactly may come out -1e-17 on a
  // device (seed 530001246: sign of a matmul's row sums, -1 against the reference's 0).
  bool has_arg = false, has_where = false, has_sign = false, inexact = false;
  for (const Step& s : p.steps) {
    has_arg = has_arg || (s.kind == StepKind::ReduceBack && is_arg(static_cast<ReduceFn>(s.fn)));
    has_where = has_where || s.kind == StepKind::Where;
    has_sign = has_sign || (s.kind == StepKind::Unary && is_float(p.dt) &&
                            static_cast<UnaryFn>(s.fn) == UnaryFn::Sign);
    const auto fn = static_cast<UnaryFn>(s.fn);
    inexact = inexact || s.kind == StepKind::CastRound || s.kind == StepKind::RowNorm ||
              s.kind == StepKind::ReduceBack || s.kind == StepKind::Matmul ||
              s.kind == StepKind::Conv ||
              (s.kind == StepKind::Unary && is_float(p.dt) && fn != UnaryFn::Neg &&
               fn != UnaryFn::Abs && fn != UnaryFn::Relu && fn != UnaryFn::Sign);
  }
  const bool bits_only = !ref || has_arg || ((has_where || has_sign) && inexact);
  for (std::size_t i = 0; i < a.reads.size(); ++i) {
    const auto& x = a.reads[i];
    const auto& y = b.reads[i];
    if (x.shape() != y.shape() || x.dtype() != y.dtype())
      return "value " + std::to_string(i) + ": shapes or dtypes differ";
    // (memcmp only on non-empty bytes: an empty value's data may be null.)
    if (x.bytes().size() != y.bytes().size() ||
        (!x.bytes().empty() &&
         std::memcmp(x.bytes().data(), y.bytes().data(), x.bytes().size()) != 0)) {
      const auto xv = as_f64(x), yv = as_f64(y);
      for (std::size_t j = 0; j < xv.size(); ++j) {
        if (std::memcmp(&xv[j], &yv[j], sizeof(double)) != 0) {
          std::ostringstream m;
          m.precision(17);
          m << "value " << i << " " << x.shape().to_string() << " element " << j << ": plain "
            << xv[j] << ", fused " << yv[j] << " (not bit for bit)";
          // EMBER_FUSION_DUMP=1: every element that differs, not only the first.
          if (std::getenv("EMBER_FUSION_DUMP")) {
            m << "; differing elements:";
            for (std::size_t e = j; e < xv.size(); ++e) {
              if (std::memcmp(&xv[e], &yv[e], sizeof(double)) != 0)
                m << " [" << e << "] " << xv[e] << " / " << yv[e];
            }
          }
          return m.str();
        }
      }
      return "value " + std::to_string(i) + ": bytes differ";
    }
    if (ref && x.shape() != (*ref)[i].shape)
      return "value " + std::to_string(i) + ": reference shape differs";
    // Note [Fragile comparisons], Note [Costly references], Note [Random steps]
    if (bits_only || drawn[i]) continue;
    // A value near a rounding boundary of a cast's narrower type may round either way: a
    // program with a cast round trip is judged at that type's tolerance.
    const auto tol_of = [](DType t) {
      return t == DType::BF16 ? 0.08 : t == DType::F16 ? 0.02 : t == DType::I32 ? 0.0 : 1e-4;
    };
    // The unit roundoff of a float dtype (0 for integers, which are exact).
    const auto eps_of = [](DType t) {
      return t == DType::BF16  ? 0x1p-8
             : t == DType::F16 ? 0x1p-11
             : t == DType::F32 ? 0x1p-24
             : t == DType::F64 ? 0x1p-53
                               : 0.0;
    };
    double tol = tol_of(p.dt), eps = eps_of(p.dt);
    for (const Step& s : p.steps) {
      if (s.kind == StepKind::CastRound) {
        tol = std::max(tol, tol_of(round_trip_type(p.dt)));
        eps = std::max(eps, eps_of(round_trip_type(p.dt)));
      }
    }
    const auto xv = as_f64(x);
    double mag = 1;
    for (double r : (*ref)[i].v) mag = std::max(mag, std::fabs(r));
    if (mag > 1e4) continue;  // grown past what a tolerance can judge; bits were compared
    // Plus what the value inherits from the largest intermediate it came from: 64 ulps of
    // it at the program's (or its round trip's) precision (Note [Reference scale]).
    const double bound = tol * mag + 64.0 * eps * scale[i];
    for (std::size_t j = 0; j < xv.size(); ++j) {
      if (std::fabs(xv[j] - (*ref)[i].v[j]) > bound) {
        std::ostringstream m;
        m.precision(17);
        m << "value " << i << " element " << j << ": " << xv[j] << ", f64 reference "
          << (*ref)[i].v[j];
        return m.str();
      }
    }
  }
  return "";
}

// p without step k and every step that reads what it made (value ids renumbered).
std::optional<Program> without(const Program& p, std::size_t k) {
  Program q = p;
  q.steps.clear();
  const std::size_t n_in = p.inputs.size();
  std::vector<int> map(n_in + p.steps.size(), -1);
  for (std::size_t i = 0; i < n_in; ++i) map[i] = static_cast<int>(i);
  for (std::size_t i = 0; i < p.steps.size(); ++i) {
    Step s = p.steps[i];
    bool dead = i == k;
    for (int* id : {&s.a, &s.b, &s.c}) {
      if (*id < 0) continue;
      if (map[static_cast<std::size_t>(*id)] < 0) dead = true;
      *id = map[static_cast<std::size_t>(*id)];
    }
    if (dead) continue;
    map[n_in + i] = static_cast<int>(n_in + q.steps.size());
    q.steps.push_back(s);
  }
  if (q.steps.empty()) return std::nullopt;
  return q;
}

const char* reshape_rule_name(ReshapeRule r) {
  switch (r) {
    case ReshapeRule::Flatten:
      return "flatten";
    case ReshapeRule::Merge:
      return "merge dims";
    case ReshapeRule::Reverse:
      return "reversed extents";
    case ReshapeRule::Unsqueeze:
      return "a 1 inserted at";
    case ReshapeRule::ToBase:
      return "the program's shape";
    default:
      return "?";
  }
}

const char* kind_name(StepKind k) {
  switch (k) {
    case StepKind::Unary:
      return "unary";
    case StepKind::Binary:
      return "binary";
    case StepKind::Scalar:
      return "binary_scalar";
    case StepKind::Where:
      return "mask_where(gt(a, b), a, c)";
    case StepKind::CastRound:
      return "cast round trip";
    case StepKind::Expand:
      return "expand";
    case StepKind::Transpose2:
      return "transpose(transpose)";
    case StepKind::ReduceBack:
      return "reduce";
    case StepKind::Reshape:
      return "reshape";
    case StepKind::RowNorm:
      return "row";
    case StepKind::Read:
      return "to_data";
    case StepKind::Matmul:
      return "matmul";
    case StepKind::Random:
      return "random_like";
    case StepKind::Conv:
      return "conv";
  }
  return "?";
}

std::string reproducer(const Program& p, const std::string& why) {
  std::ostringstream o;
  o << "fusion differential failure, seed " << p.seed << " (test_conformance --mode fusion --seed "
    << p.seed << " --programs 2): " << why << "\n  dtype " << ember::name(p.dt) << ", shape "
    << p.shape.to_string() << "\n";
  for (std::size_t i = 0; i < p.inputs.size(); ++i) {
    o << "  v" << i << " = input " << p.inputs[i].shape.to_string() << " "
      << name(p.inputs[i].layout) << ((p.seed >> i) & 1 ? " (kept)" : "") << "\n";
  }
  for (std::size_t k = 0; k < p.steps.size(); ++k) {
    const Step& s = p.steps[k];
    o << "  v" << p.inputs.size() + k << " = " << kind_name(s.kind) << "(";
    if (s.kind == StepKind::Unary) o << ember::ir::name(static_cast<UnaryFn>(s.fn)) << ", ";
    if (s.kind == StepKind::Binary || s.kind == StepKind::Scalar)
      o << ember::ir::name(static_cast<BinaryFn>(s.fn)) << ", ";
    o << "v" << s.a;
    if (s.b >= 0) o << ", v" << s.b;
    if (s.c >= 0) o << ", v" << s.c;
    if (s.kind == StepKind::Scalar) o << ", " << s.s;
    if (s.kind == StepKind::ReduceBack)
      o << ", " << ember::ir::name(static_cast<ReduceFn>(s.fn)) << ", dim " << s.dim;
    if (s.kind == StepKind::Reshape)
      o << ", " << reshape_rule_name(static_cast<ReshapeRule>(s.fn)) << " " << s.dim;
    if (s.kind == StepKind::RowNorm) {
      const char* fns[] = {"softmax", "log_softmax", "layer_norm",
                           "layer_norm with weight and bias"};
      o << ", " << fns[s.fn] << ", dim " << s.dim;
    }
    if (s.kind == StepKind::Matmul) o << (s.fn == 1 ? ", W^T" : ", W") << " [n, n]";
    if (s.kind == StepKind::Conv) o << (s.fn == 1 ? ", depthwise" : ", dense") << " 3-wide window";
    if (s.kind == StepKind::Random) {
      const char* fns[] = {"default", "uniform(-2, 2)", "normal(0, 1.5)", "bernoulli(0.4)"};
      o << ", " << fns[s.fn];
    }
    o << ")" << (s.keep ? " (kept)" : "") << "\n";
  }
  return o.str();
}

}  // namespace

DifferentialResult run_fusion_differential(std::uint64_t seed, std::size_t programs,
                                           const Device& plain, const Device& fused, bool threads) {
  DifferentialResult r;
  for (std::size_t i = 0; i < programs; ++i) {
    Program p = generate(seed + i / 2, i % 2 == 1);
    // EMBER_FUSION_PRINT_PROGRAMS=1: every program, as a reproducer would print it.
    if (std::getenv("EMBER_FUSION_PRINT_PROGRAMS")) fputs(reproducer(p, "printed").c_str(), stderr);
    std::string why = check(p, plain, fused, threads);
    ++r.programs;
    if (why.empty()) continue;
    ++r.failures;
    for (bool shrunk = true; shrunk;) {  // drop steps while it still fails
      shrunk = false;
      for (std::size_t k = p.steps.size(); k-- > 0;) {
        auto q = without(p, k);
        if (!q) continue;
        std::string w = check(*q, plain, fused, threads);
        if (!w.empty()) {
          p = std::move(*q);
          why = std::move(w);
          shrunk = true;
          break;
        }
      }
    }
    r.reproducers.push_back(reproducer(p, why));
    if (r.reproducers.size() >= 3) break;
  }
  return r;
}

// CI: 2,000 programs on the Cpu through its fusion stack; the fuser must fire. They run in
// 20 chunks of 100 (the same programs as one run from seed 1), the report read and reset
// after each, so that the groups counted by kind — the report keeps only the last 256 —
// sample the whole run.
TEST(FusionDifferential, CpuProgramsAgreeBitForBit) {
  const Device plain = Device::cpu();
  const Device fused = Device::cpu().fusion();
  ember::fusion::reset_report(fused);
  std::size_t failures = 0, groups = 0, reductions = 0, rows = 0, built = 0, reused = 0,
              cross_thread = 0, matmuls = 0, convs = 0, drawn = 0, epilogues = 0;
  using ember::fusion::CloseReason;
  for (std::size_t chunk = 0; chunk < 20; ++chunk) {
    const DifferentialResult r = run_fusion_differential(1 + chunk * 50, 100, plain, fused);
    failures += r.failures;
    for (const auto& rep : r.reproducers) ADD_FAILURE() << rep;
    const auto rep = ember::fusion::report(fused);
    groups += rep.groups;
    reductions += rep.closed[static_cast<std::size_t>(CloseReason::Reduction)];
    built += rep.plans_built;
    reused += rep.plans_reused;
    cross_thread += rep.flushed[static_cast<std::size_t>(CloseReason::CrossThread)];
    for (const auto& g : rep.recent) {
      const std::string_view last = g.ops.empty() ? "" : g.ops.back();
      rows += last == "softmax" || last == "log_softmax" || last == "layer_norm";
      matmuls += !g.ops.empty() && g.ops.front() == "matmul";
      convs += !g.ops.empty() && g.ops.front() == "conv";
      drawn += std::find(g.ops.begin(), g.ops.end(), "random") != g.ops.end();
      // A row op before the last: its element-wise consumers are its epilogue.
      for (std::size_t i = 0; i + 1 < g.ops.size(); ++i) {
        const std::string_view op = g.ops[i];
        epilogues += op == "softmax" || op == "log_softmax" || op == "layer_norm" || op == "sum" ||
                     op == "mean" || op == "max" || op == "min" || op == "argmax" || op == "argmin";
      }
    }
    ember::fusion::reset_report(fused);
  }
  EXPECT_EQ(failures, 0u);
  EXPECT_GT(groups, 1000u) << "the fuser hardly fired";
  // Reductions along rows take their element-wise prologue (about 470 of the groups).
  EXPECT_GT(reductions, 200u) << "no reduction took its prologue";
  // So do softmax, log-softmax and layer norm (counted among each chunk's last 256 groups).
  EXPECT_GT(rows, 5u) << "no softmax or layer norm took its prologue";
  // Row ops take their element-wise consumers as an epilogue (among the last 256 groups).
  EXPECT_GT(epilogues, 40u) << "no reduction, softmax or layer norm took an epilogue";
  // Matmuls take their element-wise consumers as an epilogue (among the last 256 groups).
  EXPECT_GT(matmuls, 20u) << "no matmul took an epilogue";
  // So do convolutions.
  EXPECT_GT(convs, 5u) << "no conv took an epilogue";
  // Each program runs at two size sets: the second reuses the first's plans.
  EXPECT_GT(2 * reused, built) << "plans were not reused";
  // The two-thread programs hand pending values across threads.
  EXPECT_GT(cross_thread, 20u);
  // Draws are drawn inside groups (counted among each chunk's last 256 groups).
  EXPECT_GT(drawn, 100u) << "no draw joined a group";
}

// On the first Cuda device, where there is one: its groups run as generated kernels, which
// must give the single-op kernels' bits (Note [No contraction] in cuda/compiler.cpp).
// Longer runs: test_conformance --mode fusion --device cuda:0 --programs 20000.
TEST(FusionDifferential, CudaProgramsAgreeBitForBit) {
  const auto avail = Device::available();
  if (std::find(avail.begin(), avail.end(), "cuda:0") == avail.end()) {
    std::string why = "not registered";
    for (const auto& u : Device::unavailable()) {
      if (u.name == "cuda") why = u.why;
    }
    GTEST_SKIP() << "no CUDA device: " << why;
  }
  const Device plain = Device::cuda(0);
  const Device fused = Device::cuda(0).fusion();
  ember::fusion::reset_report(fused);
  const DifferentialResult r = run_fusion_differential(1, 1000, plain, fused);
  EXPECT_EQ(r.failures, 0u);
  for (const auto& rep : r.reproducers) ADD_FAILURE() << rep;
  const auto rep = ember::fusion::report(fused);
  EXPECT_GT(rep.groups, 500u) << "the fuser hardly fired";
}

// CI: the same on the first Vulkan device (lavapipe: each program's groups are kernels
// compiled on first use, so CI runs 200 programs; EMBER_TEST_FUSION_PROGRAMS=N runs more),
// fused groups against the device's own unfused kernels.
TEST(FusionDifferential, VulkanProgramsAgreeBitForBit) {
  const auto names = Device::available();
  if (std::find(names.begin(), names.end(), "vulkan:0") == names.end())
    GTEST_SKIP() << "no Vulkan device here";
  const Device plain = Device::parse("vulkan:0");
  const Device fused = plain.fusion();
  const char* env = std::getenv("EMBER_TEST_FUSION_PROGRAMS");
  const std::size_t programs = env ? std::stoull(env) : 200;
  ember::fusion::reset_report(fused);
  const DifferentialResult r = run_fusion_differential(1, programs, plain, fused);
  EXPECT_EQ(r.failures, 0u);
  for (const auto& rep : r.reproducers) ADD_FAILURE() << rep;
  EXPECT_GT(ember::fusion::report(fused).groups, programs / 2) << "the fuser hardly fired";
}

}  // namespace conformance
