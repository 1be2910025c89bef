// The conformance runner: materialises trials on a device, runs a case's function, checks
// it against the f64 reference, and enforces clone invariance and guard regions. Also the
// input generators and index helpers every case file shares.
#include <chrono>

#include "conformance/harness.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include <ember/backend/registry.hpp>

namespace conformance {

const std::vector<DType> kFloats = {DType::F32, DType::F64};
const std::vector<DType> kAllFloats = {DType::F32, DType::F64, DType::F16, DType::BF16};
const std::vector<DType> kInts = {DType::I64, DType::I32, DType::I16, DType::I8, DType::U8};
const std::vector<DType> kSignedInts = {DType::I64, DType::I32, DType::I16, DType::I8};
const std::vector<DType> kAllDtypes = {DType::F32, DType::F64, DType::F16, DType::BF16,
                                       DType::I64, DType::I32, DType::I16, DType::I8,
                                       DType::U8,  DType::Bool};

std::vector<DType> concat(std::vector<DType> a, const std::vector<DType>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const char* name(Layout l) {
  switch (l) {
    case Layout::Contiguous:
      return "contiguous";
    case Layout::Permuted:
      return "permuted";
    case Layout::Sliced:
      return "sliced";
    case Layout::Flipped:
      return "flipped";
    case Layout::Expanded:
      return "expanded";
  }
  return "?";
}

bool is_float_dtype(DType dt) { return ember::kind_of(dt) == ember::Kind::Float; }

std::size_t normalize(std::int64_t dim, std::size_t rank) {
  return static_cast<std::size_t>(dim < 0 ? dim + static_cast<std::int64_t>(rank) : dim);
}

// ---- index helpers ----

std::vector<std::size_t> strides_of(const Shape& s) {
  std::vector<std::size_t> st(s.rank(), 1);
  for (std::size_t d = s.rank(); d-- > 1;) st[d - 1] = st[d] * s[d];
  return st;
}

std::vector<std::size_t> unravel(std::size_t p, const Shape& s) {
  std::vector<std::size_t> idx(s.rank(), 0);
  for (std::size_t d = s.rank(); d-- > 0;) {
    if (s[d] == 0) return idx;
    idx[d] = p % s[d];
    p /= s[d];
  }
  return idx;
}

std::size_t ravel(const std::vector<std::size_t>& idx, const Shape& s) {
  std::size_t p = 0;
  for (std::size_t d = 0; d < s.rank(); ++d) p = p * s[d] + idx[d];
  return p;
}

Shape broadcast(const Shape& a, const Shape& b) {
  const std::size_t r = std::max(a.rank(), b.rank());
  std::vector<std::size_t> out(r);
  for (std::size_t i = 0; i < r; ++i) {
    const std::size_t da = i < r - a.rank() ? 1 : a[i - (r - a.rank())];
    const std::size_t db = i < r - b.rank() ? 1 : b[i - (r - b.rank())];
    out[i] = da == 1 ? db : da;
  }
  return Shape(std::move(out));
}

std::size_t broadcast_index(const std::vector<std::size_t>& idx, const Shape& from) {
  const std::size_t off = idx.size() - from.rank();
  std::size_t p = 0;
  for (std::size_t d = 0; d < from.rank(); ++d) {
    p = p * from[d] + (from[d] == 1 ? 0 : idx[d + off]);
  }
  return p;
}

// Storage rounding: the value an element of dtype holds after being written v. Integers are
// expected to be generated in range; floats round to nearest (ember's f16/bf16 storage
// types define the 16-bit rounding, which is storage, not the computation under test).
double quantize(DType dt, double v) {
  switch (dt) {
    case DType::F64:
      return v;
    case DType::F32:
      return static_cast<double>(static_cast<float>(v));
    case DType::F16:
      return static_cast<double>(static_cast<float>(ember::f16(static_cast<float>(v))));
    case DType::BF16:
      return static_cast<double>(static_cast<float>(ember::bf16(static_cast<float>(v))));
    case DType::Bool:
      return v != 0.0 ? 1.0 : 0.0;
    default:
      return std::trunc(v);
  }
}

// ---- generation ----

HostTensor random_host(const Shape& s, DType dt, Rng& rng, Domain d) {
  HostTensor t(s, dt);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (double& x : t.v) {
    const double r = u(rng);
    if (dt == DType::Bool) {
      x = r < 0.5 ? 0.0 : 1.0;
      continue;
    }
    if (!is_float_dtype(dt)) {
      // Small integers keep every int op in range for every width, u8 included.
      double lo = -9, hi = 9;
      if (dt == DType::U8 || d == Domain::Positive) lo = d == Domain::NonZero ? 1 : 0;
      if (d == Domain::Positive) lo = 1;
      x = std::floor(lo + r * (hi - lo + 1));
      if (d == Domain::NonZero && x == 0) x = 1;
      continue;
    }
    switch (d) {
      case Domain::Any:
        x = -4.0 + 8.0 * r;
        break;
      case Domain::Positive:
        x = 0.1 + 3.9 * r;
        break;
      case Domain::Unit:
        x = -0.95 + 1.9 * r;
        break;
      case Domain::Small:
        x = -2.0 + 4.0 * r;
        break;
      case Domain::NonZero:
        x = -4.0 + 8.0 * r;
        if (std::fabs(x) < 0.25) x = x < 0 ? -0.5 : 0.5;
        break;
    }
    x = quantize(dt, x);
  }
  return t;
}

void add_specials(HostTensor& t, Rng& rng) {
  if (!is_float_dtype(t.dtype) || t.numel() < 4) return;
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                             std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity()};
  std::uniform_int_distribution<std::size_t> pos(0, t.numel() - 1);
  for (double s : specials) t.v[pos(rng)] = s;
}

std::vector<Shape> standard_shapes(Scale scale) {
  if (scale == Scale::Perf) return {Shape{1u << 22}};
  return {Shape{7},    Shape{0},       Shape{1},        Shape{3, 0, 4},
          Shape{1, 1}, Shape{2, 3, 4}, Shape{5, 1, 33}, Shape{1023},
          Shape{4097}, Shape{17, 130}, Shape{70001},    Shape{3, 257, 90}};
}

std::vector<Trial> unary_trials(DType dt, Scale scale, Domain d, bool specials,
                                std::uint64_t seed) {
  Rng rng(seed);
  std::vector<Trial> out;
  const Layout views[] = {Layout::Sliced, Layout::Permuted, Layout::Flipped, Layout::Expanded};
  std::size_t i = 0;
  for (const Shape& s : standard_shapes(scale)) {
    HostTensor x = random_host(s, dt, rng, d);
    if (specials) add_specials(x, rng);
    out.push_back({s.to_string(), {x}, {Layout::Contiguous}});
    if (scale == Scale::Test) {
      const Layout l = views[i++ % 4];
      out.push_back({s.to_string() + " " + name(l), {x}, {l}});
    }
  }
  return out;
}

// ---- devices ----

std::vector<Device> conformance_devices() {
  std::vector<Device> out;
  for (const std::string& n : Device::available()) {
    const auto colon = n.find(':');
    const std::string base = n.substr(0, colon);
    const int index = colon == std::string::npos ? 0 : std::stoi(n.substr(colon + 1));
    out.emplace_back(ember::backend::Registry::global().backend(base, index));
  }
  // The decorator stacks whose every op must give the plain backend's answers: Fusion
  // records lazily and fuses, so each case also runs through it on the Cpu and, where
  // there are, on the first Cuda and the first Vulkan device (whose fused groups are
  // generated kernels).
  out.push_back(Device::cpu().fusion());
  for (const std::string& n : Device::available()) {
    if (n == "cuda:0" || n == "vulkan:0") out.push_back(Device::parse(n).fusion());
  }
  return out;
}

// ---- materialising inputs ----
namespace {

// Writes host values as dtype's bytes (rounding floats, wrapping nothing: ints are in range).
ember::TensorData to_data(const HostTensor& t) {
  const std::size_t es = ember::size_of(t.dtype);
  std::vector<std::byte> bytes(t.numel() * es);
  for (std::size_t i = 0; i < t.numel(); ++i) {
    std::byte* p = bytes.data() + i * es;
    const double v = t.v[i];
    auto put = [&](auto x) { std::memcpy(p, &x, sizeof(x)); };
    switch (t.dtype) {
      case DType::F64:
        put(v);
        break;
      case DType::F32:
        put(static_cast<float>(v));
        break;
      case DType::F16:
        put(ember::f16(static_cast<float>(v)));
        break;
      case DType::BF16:
        put(ember::bf16(static_cast<float>(v)));
        break;
      case DType::I64:
        put(static_cast<std::int64_t>(v));
        break;
      case DType::I32:
        put(static_cast<std::int32_t>(v));
        break;
      case DType::I16:
        put(static_cast<std::int16_t>(v));
        break;
      case DType::I8:
        put(static_cast<std::int8_t>(v));
        break;
      case DType::U8:
        put(static_cast<std::uint8_t>(v));
        break;
      case DType::Bool:
        put(static_cast<std::uint8_t>(v != 0.0));
        break;
    }
  }
  return ember::TensorData(std::move(bytes), t.shape, t.dtype);
}

HostTensor from_device(const DynTensor& t) {
  auto d = t.to_data();
  return HostTensor(d.shape(), d.dtype(), d.to_vector<double>());
}

// Sentinel written around sliced views: representable in every dtype (bf16 and u8 too).
constexpr double kSentinel = 99.0;

struct Materialized {
  DynTensor tensor;
  std::optional<DynTensor> parent;  // the padded buffer a Sliced input views
  HostTensor logical;               // the values the function sees
};

HostTensor permute_host(const HostTensor& t, const std::vector<std::size_t>& axes) {
  std::vector<std::size_t> dims(axes.size());
  for (std::size_t i = 0; i < axes.size(); ++i) dims[i] = t.shape[axes[i]];
  HostTensor out(Shape(dims), t.dtype);
  for (std::size_t p = 0; p < out.numel(); ++p) {
    auto idx = unravel(p, out.shape);
    std::vector<std::size_t> src(axes.size());
    for (std::size_t i = 0; i < axes.size(); ++i) src[axes[i]] = idx[i];
    out.v[p] = t.v[ravel(src, t.shape)];
  }
  return out;
}

Materialized materialize(HostTensor t, Layout l, const Device& dev) {
  for (double& x : t.v) x = quantize(t.dtype, x);
  if (l == Layout::Permuted && t.rank() < 2) l = Layout::Flipped;
  if (l == Layout::Expanded && (t.rank() == 0 || t.shape[0] <= 1)) l = Layout::Sliced;
  switch (l) {
    case Layout::Contiguous:
      break;
    case Layout::Permuted: {
      // Store the transpose of the last two dims, then view it transposed back.
      std::vector<std::size_t> axes(t.rank());
      for (std::size_t i = 0; i < axes.size(); ++i) axes[i] = i;
      std::swap(axes[t.rank() - 1], axes[t.rank() - 2]);
      auto stored = ember::ops::from_data(to_data(permute_host(t, axes)), dev);
      return {ember::ops::transpose(std::move(stored)), std::nullopt, t};
    }
    case Layout::Flipped: {
      HostTensor stored(t.shape, t.dtype);
      for (std::size_t p = 0; p < t.numel(); ++p) {
        auto idx = unravel(p, t.shape);
        for (std::size_t d = 0; d < idx.size(); ++d) idx[d] = t.shape[d] - 1 - idx[d];
        stored.v[p] = t.v[ravel(idx, t.shape)];
      }
      std::vector<std::int64_t> axes;
      for (std::size_t d = 0; d < t.rank(); ++d) axes.push_back(static_cast<std::int64_t>(d));
      return {ember::ops::flip(ember::ops::from_data(to_data(stored), dev), axes), std::nullopt, t};
    }
    case Layout::Expanded: {
      // Dim 0 becomes a stride-0 broadcast of its first row; the logical values follow.
      std::vector<std::size_t> row_dims = t.shape.dims();
      row_dims[0] = 1;
      HostTensor row(Shape(row_dims), t.dtype);
      std::copy(t.v.begin(), t.v.begin() + static_cast<std::ptrdiff_t>(row.numel()), row.v.begin());
      for (std::size_t p = 0; p < t.numel(); ++p) t.v[p] = row.v[p % row.numel()];
      auto small = ember::ops::from_data(to_data(row), dev);
      return {ember::ops::expand(std::move(small), t.shape), std::nullopt, t};
    }
    case Layout::Sliced: {
      // A parent padded by one sentinel element on each side of every dim, with the last dim
      // interleaved (step 2), so the view has an offset and a non-unit stride.
      std::vector<std::size_t> pd(t.rank());
      std::vector<ember::ops::Range> ranges;
      for (std::size_t d = 0; d < t.rank(); ++d) {
        const bool last = d + 1 == t.rank();
        pd[d] = last ? 2 * t.shape[d] + 2 : t.shape[d] + 2;
        const auto len = static_cast<std::int64_t>(last ? 2 * t.shape[d] : t.shape[d]);
        ranges.emplace_back(1, 1 + len, last ? 2 : 1);
      }
      HostTensor parent(Shape(pd), t.dtype);
      std::fill(parent.v.begin(), parent.v.end(), kSentinel);
      for (std::size_t p = 0; p < t.numel(); ++p) {
        auto idx = unravel(p, t.shape);
        for (std::size_t d = 0; d < idx.size(); ++d) {
          idx[d] = d + 1 == idx.size() ? 1 + 2 * idx[d] : 1 + idx[d];
        }
        parent.v[ravel(idx, parent.shape)] = t.v[p];
      }
      auto par = ember::ops::from_data(to_data(parent), dev);
      auto view = ember::ops::slice(par, ranges);
      return {std::move(view), std::move(par), t};
    }
  }
  return {ember::ops::from_data(to_data(t), dev), std::nullopt, t};
}

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(10);
  s << v;
  return s.str();
}

Tolerance default_tolerance(DType dt) {
  switch (dt) {
    case DType::F64:
      return {1e-10, 1e-12};
    case DType::F32:
      return {1e-5, 1e-6};
    case DType::F16:
      return {2e-3, 1e-3};
    case DType::BF16:
      return {1.6e-2, 1e-2};
    default:
      return {0, 0};
  }
}

// "" when got matches want: same shape and dtype; floats within tolerance with NaN == NaN
// and infinities exact; everything else exact.
std::string compare(const HostTensor& got, const HostTensor& want, const Tolerance& tol) {
  if (got.shape != want.shape) {
    return "shape " + got.shape.to_string() + ", expected " + want.shape.to_string();
  }
  if (got.dtype != want.dtype) {
    return std::string("dtype ") + ember::name(got.dtype) + ", expected " + ember::name(want.dtype);
  }
  const bool fl = is_float_dtype(got.dtype);
  for (std::size_t i = 0; i < got.numel(); ++i) {
    // The best a dtype can give is the reference rounded to it (beyond its range: inf).
    const double a = got.v[i], b = fl ? quantize(got.dtype, want.v[i]) : want.v[i];
    bool ok;
    if (!fl || std::isnan(b) || std::isinf(b) || std::isnan(a) || std::isinf(a)) {
      ok = (std::isnan(a) && std::isnan(b)) || a == b;
    } else {
      ok = std::fabs(a - b) <= tol.atol + tol.rtol * std::fabs(b);
    }
    if (!ok) {
      return "element " + std::to_string(i) + " (index " +
             Shape(unravel(i, got.shape)).to_string() + "): got " + fmt(a) + ", expected " +
             fmt(b) + " (rtol " + fmt(tol.rtol) + ", atol " + fmt(tol.atol) + ")";
    }
  }
  return "";
}

// An op the device's backend does not support (Backend::supports) and no fallback of the
// registry runs either.
struct UnsupportedOp {
  std::string message;
};

// The device a case runs on: the backend under test, asked before every op whether it
// supports it. An op that neither it nor a registered fallback supports stops the trial
// as unsupported; everything else passes straight through. It also notes the kinds of
// the ops the case ran (Result::op_kinds).
static_assert(ember::ir::kNumOps <= 64, "Result::op_kinds has a bit per ir::OpKind");
class SupportProbe final : public ember::backend::Backend {
 public:
  SupportProbe(std::shared_ptr<Backend> inner, std::uint64_t& kinds)
      : inner_(std::move(inner)), kinds_(kinds) {}
  std::string name() const override { return inner_->name(); }
  ember::ir::Handle from_data(const ember::TensorData& data) override {
    return inner_->from_data(data);
  }
  ember::TensorData to_data(const ember::ir::Handle& x) override { return inner_->to_data(x); }
  std::vector<ember::ir::Handle> execute(ember::ir::Op op) override {
    if (!inner_->supports(op) && !ember::backend::Registry::global().fallback_for(op, *inner_)) {
      throw UnsupportedOp{std::string(ember::ir::name(ember::ir::kind_of(op))) +
                          " is not supported by " + inner_->name() + " nor by a fallback"};
    }
    kinds_ |= std::uint64_t(1) << static_cast<unsigned>(ember::ir::kind_of(op));
    return inner_->execute(std::move(op));
  }
  bool supports(const ember::ir::Op& op) const override { return inner_->supports(op); }
  void seed(std::uint64_t s) override { inner_->seed(s); }
  ember::backend::MemoryStats memory_stats() const override { return inner_->memory_stats(); }
  void empty_cache() override { inner_->empty_cache(); }
  void sync() override { inner_->sync(); }
  DType default_float() const override { return inner_->default_float(); }
  DType default_int() const override { return inner_->default_int(); }

 private:
  std::shared_ptr<Backend> inner_;
  std::uint64_t& kinds_;
};

struct TrialFailure {
  std::string message;
  bool unsupported = false;
};

// One trial: reference, then the kept-inputs run and the moved-inputs run.
std::optional<TrialFailure> run_trial(const Case& c, const Trial& tr, const Device& dev, DType dt) {
  auto layout_of = [&](std::size_t i) {
    return i < tr.layouts.size() ? tr.layouts[i] : Layout::Contiguous;
  };
  auto build = [&] {
    std::vector<Materialized> ms;
    for (std::size_t i = 0; i < tr.inputs.size(); ++i) {
      ms.push_back(materialize(tr.inputs[i], layout_of(i), dev));
    }
    return ms;
  };
  const Tolerance base = default_tolerance(dt);
  const Tolerance tol =
      c.tol ? c.tol(dt)
            : Tolerance{base.rtol * c.tol_scale, base.atol * c.tol_scale + c.atol_extra};

  auto check_outputs = [&](const Tensors& outs, const std::vector<HostTensor>& logical,
                           const char* how) -> std::string {
    std::vector<HostTensor> got;
    for (const auto& o : outs) got.push_back(from_device(o));
    if (c.verify) {
      std::string e = c.verify(logical, got, tr.params);
      return e.empty() ? e : std::string(how) + ": " + e;
    }
    const auto want = c.ref(logical, tr.params);
    if (want.size() != got.size()) {
      return std::string(how) + ": " + std::to_string(got.size()) + " outputs, expected " +
             std::to_string(want.size());
    }
    for (std::size_t i = 0; i < want.size(); ++i) {
      std::string e = compare(got[i], want[i], tol);
      if (!e.empty()) return std::string(how) + ": output " + std::to_string(i) + ": " + e;
    }
    return "";
  };

  try {
    // Run 1: the harness keeps a reference to every input (and view parent). The function
    // must leave them as they were (clone invariance: another reference forbids reuse).
    {
      auto ms = build();
      std::vector<HostTensor> logical;
      std::vector<HostTensor> parents_before;
      Tensors args;
      for (auto& m : ms) {
        logical.push_back(m.logical);
        args.push_back(m.tensor);
      }
      auto outs = c.run(std::move(args), tr.params);
      if (auto e = check_outputs(outs, logical, "with inputs kept"); !e.empty()) {
        return TrialFailure{e};
      }
      for (std::size_t i = 0; i < ms.size(); ++i) {
        auto now = from_device(ms[i].tensor);
        if (auto e = compare(now, ms[i].logical, {0, 0}); !e.empty()) {
          return TrialFailure{"input " + std::to_string(i) +
                              " changed although another reference held it: " + e};
        }
      }
    }
    // Run 2: inputs moved in (the function may reuse their buffers), but the padded parents
    // of sliced views stay alive: their sentinels and interiors must be untouched, since a
    // view's buffer is shared and must never be written through.
    {
      auto ms = build();
      std::vector<HostTensor> logical;
      std::vector<std::pair<std::size_t, HostTensor>> parents;
      Tensors args;
      for (std::size_t i = 0; i < ms.size(); ++i) {
        logical.push_back(ms[i].logical);
        if (ms[i].parent) parents.emplace_back(i, from_device(*ms[i].parent));
        args.push_back(std::move(ms[i].tensor));
      }
      auto outs = c.run(std::move(args), tr.params);
      if (auto e = check_outputs(outs, logical, "with inputs moved"); !e.empty()) {
        return TrialFailure{e};
      }
      for (auto& [i, before] : parents) {
        auto now = from_device(*ms[i].parent);
        if (auto e = compare(now, before, {0, 0}); !e.empty()) {
          return TrialFailure{"guard: the buffer under sliced input " + std::to_string(i) +
                              " was written: " + e};
        }
      }
    }
  } catch (const UnsupportedOp& e) {
    return TrialFailure{e.message, true};
  } catch (const ember::Error& e) {
    return TrialFailure{std::string("ember::Error: ") + e.what()};
  } catch (const std::exception& e) {
    return TrialFailure{std::string("exception: ") + e.what()};
  }
  return std::nullopt;
}

}  // namespace

Result run_case(const Case& c, const Device& dev, DType dt, Scale scale) {
  Result r;
  const bool listed = c.known_failure_dtypes.empty() ||
                      std::find(c.known_failure_dtypes.begin(), c.known_failure_dtypes.end(), dt) !=
                          c.known_failure_dtypes.end();
  if (!c.known_failure.empty() && listed) {
    r.outcome = Outcome::KnownFailure;
    r.message = c.known_failure;
    return r;
  }
  const Device probe(std::make_shared<SupportProbe>(dev.backend_ptr(), r.op_kinds));
  for (const Trial& tr : c.trials(dt, scale)) {
    ++r.trials;
    if (auto f = run_trial(c, tr, probe, dt)) {
      r.outcome = f->unsupported ? Outcome::Unsupported : Outcome::Fail;
      r.message = c.fn + " [" + ember::name(dt) + ", " + dev.name() + "] trial " + tr.label + ": " +
                  f->message;
      return r;
    }
  }
  return r;
}

// ---- grad mode: autodiff on a decorator stack against finite differences ----

std::vector<GradStacks> grad_stacks() {
  std::vector<GradStacks> out;
  for (const std::string& n : Device::available()) {
    const Device d = Device::parse(n);
    GradStacks g{n, {d.autodiff()}};
    // Checkpointing::Balanced recomputes memory-bound forward ops in backward: the
    // decorator's path, not a backend's, so the Cpu's stack stands for every backend.
    if (n == "cpu") g.stacks.push_back(d.autodiff(ember::Checkpointing::Balanced));
    if (n == "cpu" || n.rfind("cuda", 0) == 0) g.stacks.push_back(d.fusion().autodiff());
    out.push_back(std::move(g));
  }
  return out;
}

namespace {
// sum over the float outputs of sum(out * w), w fixed per output, in f64 on the host.
double weighted(const Tensors& outs, const std::vector<HostTensor>& ws) {
  double l = 0;
  for (std::size_t k = 0; k < outs.size(); ++k) {
    if (outs[k].dtype() != DType::F64) continue;
    const auto v = outs[k].to_data().to_vector<double>();
    for (std::size_t i = 0; i < v.size(); ++i) l += v[i] * ws[k].v[i];
  }
  return l;
}
}  // namespace

namespace {
// One finite difference of the loss of a trial: along coordinate k of input `input`, or
// (k == kDirection) along the trial's random direction through every input.
constexpr std::size_t kDirection = ~std::size_t(0);
struct Difference {
  std::size_t input = 0, k = 0;
  double num = 0;     // the central difference
  bool kink = false;  // the one-sided differences disagree: not compared
};
}  // namespace

std::vector<GradResult> run_grad_case(const Case& c, const std::vector<Device>& stacks,
                                      std::size_t max_elements, std::size_t max_trials) {
  std::vector<GradResult> rs(stacks.size());
  const bool has_f64 = std::find(c.dtypes.begin(), c.dtypes.end(), DType::F64) != c.dtypes.end();
  if (!has_f64 || c.verify || !c.known_failure.empty() || !c.no_grad.empty()) return rs;
  const Device cpu = Device::cpu();
  Rng wrng(std::hash<std::string>{}(c.fn));
  std::size_t trials = 0;
  for (const Trial& tr : c.trials(DType::F64, Scale::Test)) {
    if (trials >= max_trials) break;
    bool usable = false, bounded = true, sampled = false;
    for (const HostTensor& t : tr.inputs) {
      if (t.dtype != DType::F64) continue;
      usable = usable || t.numel() > 0;
      bounded = bounded && t.numel() <= kMaxGradInput;
      sampled = sampled || t.numel() > max_elements;
      for (double v : t.v) bounded = bounded && std::isfinite(v);
    }
    if (!usable || !bounded) continue;
    const auto layout = [&](std::size_t i) {
      return i < tr.layouts.size() ? tr.layouts[i] : Layout::Contiguous;
    };
    // The function on the plain Cpu, its finite differences: once for every stack.
    std::vector<HostTensor> logical, ws;
    std::vector<std::vector<double>> dir;
    std::vector<Difference> diffs;
    double f0 = 0;
    try {
      for (std::size_t i = 0; i < tr.inputs.size(); ++i) {
        logical.push_back(materialize(tr.inputs[i], layout(i), cpu).logical);
      }
      Tensors ins;
      for (const auto& x : logical) ins.push_back(ember::ops::from_data(to_data(x), cpu));
      const Tensors outs = c.run(std::move(ins), tr.params);
      bool any_float = false;
      for (const auto& o : outs) {
        HostTensor w(o.shape(), DType::F64);
        std::uniform_real_distribution<double> u(0.5, 1.5);
        for (double& v : w.v) v = u(wrng);
        any_float = any_float || (o.dtype() == DType::F64 && o.num_elements() > 0);
        ws.push_back(std::move(w));
      }
      if (!any_float) continue;
      f0 = weighted(outs, ws);
      const auto value = [&](const std::vector<HostTensor>& xs) {
        Tensors in;
        for (const auto& x : xs) in.push_back(ember::ops::from_data(to_data(x), cpu));
        return weighted(c.run(std::move(in), tr.params), ws);
      };
      // The central difference along d (one vector per input, empty for an input not moved).
      const auto difference = [&](const std::vector<std::vector<double>>& d, Difference& out) {
        double big = 0;
        for (std::size_t i = 0; i < d.size(); ++i) {
          for (std::size_t k = 0; k < d[i].size(); ++k) {
            if (d[i][k] != 0) big = std::max(big, std::fabs(logical[i].v[k]));
          }
        }
        const double eps = 1e-6 * std::max(1.0, big);
        auto xs = logical;
        const auto moved = [&](double t) {
          for (std::size_t i = 0; i < d.size(); ++i) {
            for (std::size_t k = 0; k < d[i].size(); ++k) {
              xs[i].v[k] = logical[i].v[k] + t * d[i][k];
            }
          }
          return value(xs);
        };
        const double fp = moved(eps), fm = moved(-eps);
        const double dp = (fp - f0) / eps, dm = (f0 - fm) / eps;
        out.num = (fp - fm) / (2 * eps);
        out.kink = !std::isfinite(out.num) || std::fabs(dp - dm) > 1e-3 * (1 + std::fabs(out.num));
      };
      // Each coordinate of a small input; kSampledCoordinates random ones of a larger one.
      Rng pick(wrng());
      for (std::size_t i = 0; i < logical.size(); ++i) {
        if (logical[i].dtype != DType::F64) continue;
        const std::size_t n = logical[i].numel();
        std::vector<std::size_t> coords;
        if (n <= max_elements) {
          for (std::size_t k = 0; k < n; ++k) coords.push_back(k);
        } else {
          for (std::size_t j = 0; j < kSampledCoordinates; ++j) coords.push_back(pick() % n);
        }
        for (std::size_t k : coords) {
          std::vector<std::vector<double>> d(logical.size());
          d[i].assign(n, 0.0);
          d[i][k] = 1.0;
          Difference df{i, k};
          difference(d, df);
          diffs.push_back(df);
        }
      }
      // A trial with an input too large for every coordinate: the directional derivative
      // along a random direction through every input, <grad, v> against one central
      // difference, so every element's gradient takes part at the cost of two evaluations.
      if (sampled) {
        std::uniform_real_distribution<double> u(-1.0, 1.0);
        dir.resize(logical.size());
        for (std::size_t i = 0; i < logical.size(); ++i) {
          if (logical[i].dtype != DType::F64) continue;
          dir[i].resize(logical[i].numel());
          for (double& v : dir[i]) v = u(pick);
        }
        Difference df{0, kDirection};
        difference(dir, df);
        diffs.push_back(df);
      }
    } catch (const ember::Error& e) {
      for (std::size_t s = 0; s < stacks.size(); ++s) {
        rs[s].outcome = Outcome::Fail;
        rs[s].message = c.fn + " trial " + tr.label + ": on the plain Cpu: " + e.what();
      }
      return rs;
    }
    ++trials;
    // Autodiff on each stack, inputs in the trial's layouts; every f64 input tracked.
    for (std::size_t s = 0; s < stacks.size(); ++s) {
      GradResult& r = rs[s];
      if (r.outcome != Outcome::Pass) continue;
      const Device& stack = stacks[s];
      const std::string where = c.fn + " [" + stack.name() + "] trial " + tr.label + ": ";
      try {
        Tensors args, tracked;
        for (std::size_t i = 0; i < tr.inputs.size(); ++i) {
          Materialized m = materialize(tr.inputs[i], layout(i), stack);
          if (m.logical.dtype == DType::F64) {
            m.tensor = ember::ops::require_grad(std::move(m.tensor));
            tracked.push_back(m.tensor);
          }
          args.push_back(std::move(m.tensor));
        }
        auto outs = c.run(Tensors(args), tr.params);
        // loss = sum(out * w) + 0 * sum(inputs): every tracked input is in the graph, so one
        // the outputs do not depend on gets a zero gradient rather than none.
        DynTensor loss = ember::ops::full(Shape{1}, 0.0, DType::F64, stack);
        for (std::size_t k = 0; k < outs.size(); ++k) {
          if (outs[k].dtype() != DType::F64) continue;
          auto w = ember::ops::from_data(to_data(ws[k]), stack);
          loss = ember::ops::binary(
              ember::ir::BinaryFn::Add, loss,
              ember::ops::reduce_all(ember::ir::ReduceFn::Sum,
                                     ember::ops::binary(ember::ir::BinaryFn::Mul, outs[k], w)));
        }
        for (const auto& t : tracked) {
          loss = ember::ops::binary(
              ember::ir::BinaryFn::Add, loss,
              ember::ops::binary_scalar(ember::ir::BinaryFn::Mul,
                                        ember::ops::reduce_all(ember::ir::ReduceFn::Sum, t), 0.0));
        }
        auto grads = ember::ops::backward(loss);
        ++r.trials;
        std::vector<std::vector<double>> gvs(logical.size());
        std::size_t ti = 0;
        for (std::size_t i = 0; i < logical.size(); ++i) {
          if (logical[i].dtype != DType::F64) continue;
          const auto g = ember::ops::grad(tracked[ti++], grads);
          gvs[i] =
              g ? g->to_data().to_vector<double>() : std::vector<double>(logical[i].numel(), 0.0);
        }
        for (const Difference& df : diffs) {
          double ad = 0, scale = 0;
          if (df.k == kDirection) {
            ++r.directions;
            for (std::size_t i = 0; i < dir.size(); ++i) {
              for (std::size_t k = 0; k < dir[i].size(); ++k) {
                ad += gvs[i][k] * dir[i][k];
                scale += std::fabs(gvs[i][k] * dir[i][k]);
              }
            }
          } else {
            ad = gvs[df.input][df.k];
          }
          if (df.kink) {
            ++r.kinks;
            continue;
          }
          ++r.checked;
          if (!(std::fabs(ad - df.num) <=
                1e-5 * (1 + std::fabs(df.num) + scale) + 1e-7 * std::fabs(f0))) {
            r.outcome = Outcome::Fail;
            r.message = where +
                        (df.k == kDirection ? std::string("the directional derivative along a "
                                                          "random direction")
                                            : "input " + std::to_string(df.input) + " element " +
                                                  std::to_string(df.k)) +
                        ": gradient " + fmt(ad) + ", finite difference " + fmt(df.num);
            break;
          }
        }
      } catch (const ember::Error& e) {
        const std::string what = e.what();
        // An op with no derivative rule yet is a known gap, not a wrong gradient.
        if (what.find("no derivative rule") != std::string::npos ||
            what.find("not differentiable") != std::string::npos) {
          r.outcome = Outcome::Unsupported;
          r.message = where + what;
        } else {
          r.outcome = Outcome::Fail;
          r.message = where + "ember::Error: " + what;
        }
      }
    }
  }
  return rs;
}

// ---- perf mode: the function alone ----

double time_case(const Case& c, const Device& dev, DType dt, Scale scale, std::size_t& trials) {
  std::vector<double> per_trial;
  trials = 0;
  for (const Trial& tr : c.trials(dt, scale)) {
    Tensors ins;
    for (std::size_t i = 0; i < tr.inputs.size(); ++i) {
      const Layout l = i < tr.layouts.size() ? tr.layouts[i] : Layout::Contiguous;
      ins.push_back(materialize(tr.inputs[i], l, dev).tensor);
    }
    try {
      (void)c.run(Tensors(ins), tr.params);  // warm-up: kernels compiled, pools filled
      dev.sync();
      std::vector<double> ms;
      for (int rep = 0; rep < 5; ++rep) {
        const auto t0 = std::chrono::steady_clock::now();
        auto outs = c.run(Tensors(ins), tr.params);
        dev.sync();
        ms.push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count());
      }
      std::sort(ms.begin(), ms.end());
      per_trial.push_back(ms[ms.size() / 2]);
      ++trials;
    } catch (const std::exception&) {
      return -1;
    }
  }
  double total = 0;
  for (double m : per_trial) total += m;
  return trials ? total / static_cast<double>(trials) : 0.0;
}

const std::vector<Case>& all_cases() {
  static const std::vector<Case> cases = [] {
    std::vector<Case> v;
    add_elementwise_cases(v);
    add_reduce_cases(v);
    add_layout_cases(v);
    add_compute_cases(v);
    add_conv_cases(v);
    add_composite_cases(v);
    add_attention_cases(v);
    return v;
  }();
  return cases;
}

std::size_t export_embedded_sample(const std::string& path, std::size_t max_elements,
                                   std::size_t trials_per_case) {
  std::vector<sample::Record> records;
  const auto host = [](const HostTensor& t, bool round) {
    sample::Tensor s;
    s.dtype = static_cast<std::uint8_t>(t.dtype);
    s.dims = t.shape.dims();
    s.values = t.v;
    if (round && is_float_dtype(t.dtype)) {
      for (double& v : s.values) v = quantize(t.dtype, v);
    }
    return s;
  };
  for (const Case& c : all_cases()) {
    const bool f32 = std::find(c.dtypes.begin(), c.dtypes.end(), DType::F32) != c.dtypes.end();
    if (!c.ir_call || !f32 || !c.known_failure.empty() || c.verify) continue;
    const Tolerance base = default_tolerance(DType::F32);
    const Tolerance tol =
        c.tol ? c.tol(DType::F32)
              : Tolerance{base.rtol * c.tol_scale, base.atol * c.tol_scale + c.atol_extra};
    // The eligible trials (f32 inputs, none empty, each within max_elements): the first and
    // the largest ones, so both the smallest shapes and multi-row ones reach the device.
    std::vector<Trial> eligible;
    for (Trial& tr : c.trials(DType::F32, Scale::Test)) {
      bool fits = true;
      for (const HostTensor& t : tr.inputs) {
        fits = fits && t.numel() > 0 && t.numel() <= max_elements && t.dtype == DType::F32;
      }
      if (fits) eligible.push_back(std::move(tr));
    }
    const auto size = [](const Trial& t) {
      std::size_t n = 0;
      for (const HostTensor& h : t.inputs) n += h.numel();
      return n;
    };
    if (eligible.size() > 1) {
      std::stable_sort(eligible.begin() + 1, eligible.end(),
                       [&](const Trial& a, const Trial& b) { return size(a) > size(b); });
    }
    if (eligible.size() > trials_per_case) eligible.resize(trials_per_case);
    for (const Trial& tr : eligible) {
      sample::Record r;
      r.kind = static_cast<std::uint8_t>(c.ir_call->kind);
      r.fn = c.ir_call->fn;
      r.name = c.fn;
      r.p0 = c.ir_call->p0;
      r.p1 = c.ir_call->p1;
      r.rtol = tol.rtol;
      r.atol = tol.atol;
      r.params = tr.params;
      for (const HostTensor& t : tr.inputs) r.inputs.push_back(host(t, false));
      for (const HostTensor& t : c.ref(tr.inputs, tr.params)) r.outputs.push_back(host(t, true));
      records.push_back(std::move(r));
    }
  }
  sample::Writer w;
  const auto count = static_cast<std::uint32_t>(records.size());
  for (char ch : sample::kMagic) w.put<char>(ch);
  w.put<std::uint32_t>(sample::kSampleVersion);
  w.put<std::uint32_t>(count);
  for (const sample::Record& r : records) w.put(r);
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(w.bytes.data()),
          static_cast<std::streamsize>(w.bytes.size()));
  EMBER_CHECK(f.good(), "export_embedded_sample: cannot write " + path);
  return count;
}

}  // namespace conformance
