// LibTorchBackend: every IR op as ATen calls on at::Tensor handles. This is the one
// translation unit that includes ATen (its headers cost tens of seconds to compile), so the
// whole backend lives here, in sections by op family.
//
// Handles: an AtenTensor holds an at::Tensor. Views are ATen views over the same storage
// (reshape where the strides allow, permute, expand, slice); flip copies, as ATen has no
// negative strides. Outputs are fresh tensors unless an op may write into an input that
// the op holds the only reference to (Note [In-place reuse] in src/cpu/context.hpp): the
// handle and the at::Tensor are sole owners of a storage the tensor covers contiguously.
//
// Semantics: ember's, not ATen's where they differ (the conformance harness compares both
// backends with the same f64 reference). The places: float sign keeps NaN; integer
// division and remainder truncate / take the divisor's sign, reject a zero divisor and
// wrap MIN / -1; the float remainder is fmod's, corrected to the divisor's sign; shifts
// by a negative or too large count give 0 (or -1); float -> int casts saturate and map NaN
// to 0; the activations' limits at -inf are -0; sums and products keep the operand's
// dtype; max / min over an empty dim give the identity; indices are checked first, with
// the Cpu's message. 16-bit floats are stored natively and computed in f32, as on the Cpu.
//
// Errors: the tensor layer validates every op before it arrives; an ATen exception that
// still escapes becomes an ember::Error naming this backend and the op.
#include "libtorch/libtorch_backend.hpp"

#include <sys/sysinfo.h>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "ember/backend/registry.hpp"
#include "ember/base/error.hpp"
#include "ember/ir/infer.hpp"
#include "ember/ir/scalar_table.hpp"

namespace ember::libtorch {
namespace {

// ---- dtypes ----

at::ScalarType to_aten(DType t) {
  switch (t) {
    case DType::F64:
      return at::kDouble;
    case DType::F32:
      return at::kFloat;
    case DType::F16:
      return at::kHalf;
    case DType::BF16:
      return at::kBFloat16;
    case DType::I64:
      return at::kLong;
    case DType::I32:
      return at::kInt;
    case DType::I16:
      return at::kShort;
    case DType::I8:
      return at::kChar;
    case DType::U8:
      return at::kByte;
    case DType::Bool:
      return at::kBool;
  }
  fail("libtorch: unknown dtype");
}

DType from_aten(at::ScalarType t) {
  switch (t) {
    case at::kDouble:
      return DType::F64;
    case at::kFloat:
      return DType::F32;
    case at::kHalf:
      return DType::F16;
    case at::kBFloat16:
      return DType::BF16;
    case at::kLong:
      return DType::I64;
    case at::kInt:
      return DType::I32;
    case at::kShort:
      return DType::I16;
    case at::kChar:
      return DType::I8;
    case at::kByte:
      return DType::U8;
    case at::kBool:
      return DType::Bool;
    default:
      break;
  }
  fail(std::string("libtorch: ATen dtype ") + c10::toString(t) + " has no ember dtype");
}

std::vector<std::int64_t> sizes_of(const Shape& s) { return {s.begin(), s.end()}; }
std::vector<std::int64_t> to_i64(const std::vector<std::size_t>& v) { return {v.begin(), v.end()}; }

Shape shape_of(const at::Tensor& t) {
  std::vector<std::size_t> d;
  for (std::int64_t e : t.sizes()) d.push_back(static_cast<std::size_t>(e));
  return Shape(std::move(d));
}

// ---- handles ----

class AtenTensor final : public ir::TensorNode {
 public:
  explicit AtenTensor(at::Tensor t)
      : TensorNode(shape_of(t), from_aten(t.scalar_type())), t_(std::move(t)) {}
  const at::Tensor& tensor() const { return t_; }

 private:
  at::Tensor t_;
};

const at::Tensor& at_of(const ir::Handle& h) { return static_cast<const AtenTensor&>(*h).tensor(); }
ir::Handle wrap(at::Tensor t) { return std::make_shared<AtenTensor>(std::move(t)); }

// Note [In-place reuse], for ATen: the op holds the only reference to the handle, the
// handle the only reference to its at::Tensor, and that tensor the only one to its storage,
// which it covers contiguously with the output's shape and dtype.
bool reusable(const ir::Handle& h, const Shape& shape, DType dtype) {
  if (!h || h.use_count() != 1 || h->shape() != shape || h->dtype() != dtype) return false;
  const at::Tensor& t = at_of(h);
  if (t.use_count() != 1 || !t.has_storage() || t.storage().use_count() != 1) return false;
  return t.is_contiguous() && t.storage_offset() == 0 &&
         t.storage().nbytes() == static_cast<std::size_t>(t.numel()) * t.element_size();
}

// ---- memory: ATen's CPU allocator, counted ----

std::size_t machine_capacity() {
  static const std::size_t cap = [] {
    constexpr std::size_t kMax = std::size_t{1} << 62;
    struct sysinfo si {};
    if (sysinfo(&si) != 0) return kMax;
    const double total =
        (static_cast<double>(si.totalram) + static_cast<double>(si.totalswap)) * si.mem_unit;
    return total >= static_cast<double>(kMax) ? kMax : static_cast<std::size_t>(total);
  }();
  return cap;
}

// Wraps ATen's default CPU allocator to count the bytes of live CPU tensors (every tensor
// of this process that ATen allocates on the CPU, ours and ATen's temporaries alike). Each
// block carries its size in a header of the allocator's alignment, so the data pointer is
// its own context, as ATen's raw_allocate needs.
class CountingAllocator final : public c10::Allocator {
 public:
  static constexpr std::size_t kHeader = 64;  // c10's CPU alignment

  explicit CountingAllocator(c10::Allocator* inner) : inner_(inner) {
    inner_deleter_ = inner->raw_deleter();
    EMBER_ASSERT(inner_deleter_ != nullptr);
  }

  c10::DataPtr allocate(std::size_t n) const override {
    EMBER_CHECK(n <= machine_capacity(), "libtorch: cannot allocate " + std::to_string(n) +
                                             " bytes, more than the " +
                                             std::to_string(machine_capacity()) +
                                             " bytes of memory and swap this machine has");
    auto* base = static_cast<std::byte*>(inner_->raw_allocate(n + kHeader));
    std::memcpy(base, &n, sizeof n);
    add(n);
    void* data = base + kHeader;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  static backend::MemoryStats stats() {
    const std::size_t u = in_use_.load();
    return {u, u, peak_.load(), machine_capacity()};
  }

 private:
  static void release(void* p) {
    if (p == nullptr) return;
    std::byte* base = static_cast<std::byte*>(p) - kHeader;
    std::size_t n = 0;
    std::memcpy(&n, base, sizeof n);
    in_use_.fetch_sub(n);
    inner_deleter_(base);
  }
  static void add(std::size_t n) {
    const std::size_t now = in_use_.fetch_add(n) + n;
    std::size_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
  }

  c10::Allocator* inner_;
  static inline c10::DeleterFnPtr inner_deleter_ = nullptr;
  static inline std::atomic<std::size_t> in_use_{0}, peak_{0};
};

CountingAllocator& counting_allocator() {
  // Installed once, before the first tensor; never destroyed (tensors may outlive statics).
  static CountingAllocator* a = [] {
    auto* c = new CountingAllocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(c, /*priority=*/1);
    return c;
  }();
  return *a;
}

// ---- ember's element semantics, in ATen ops ----

// The most negative / positive value of t (floats: -inf / +inf), as ember's reductions start.
at::Scalar lowest(at::ScalarType t) {
  if (at::isFloatingType(t)) return -std::numeric_limits<double>::infinity();
  return AT_DISPATCH_INTEGRAL_TYPES_AND(at::kBool, t, "lowest", [&] {
    return at::Scalar(static_cast<std::int64_t>(std::numeric_limits<scalar_t>::lowest()));
  });
}
at::Scalar highest(at::ScalarType t) {
  if (at::isFloatingType(t)) return std::numeric_limits<double>::infinity();
  return AT_DISPATCH_INTEGRAL_TYPES_AND(at::kBool, t, "highest", [&] {
    return at::Scalar(static_cast<std::int64_t>(std::numeric_limits<scalar_t>::max()));
  });
}

// v as a value of dtype t the way ember converts a double: NaN -> 0 and saturation for
// ints, != 0 for bool.
at::Scalar scalar_as(double v, at::ScalarType t) {
  if (t == at::kBool) return v != 0.0;
  if (at::isFloatingType(t)) return v;
  if (std::isnan(v)) return std::int64_t{0};
  const double lo = lowest(t).toDouble(), hi = highest(t).toDouble();
  if (v <= lo) return lowest(t);
  if (v >= hi) return highest(t);
  return static_cast<std::int64_t>(v);
}

// ember's cast (base/tensor_data.cpp's convert_elements): ints wrap, bool is != 0, floats
// round; float -> int maps NaN to 0 and saturates outside the target's range.
at::Tensor cast(const at::Tensor& x, at::ScalarType to) {
  const at::ScalarType from = x.scalar_type();
  if (from == to) return x;
  if (to == at::kBool) return at::ne(x, 0);
  if (!at::isFloatingType(from) || at::isFloatingType(to)) return x.to(to);
  const at::Tensor v = x.to(at::kDouble);
  const double lo = lowest(to).toDouble(), hi = highest(to).toDouble();
  const at::Tensor low = at::le(v, lo), high = at::ge(v, hi);
  const at::Tensor safe = at::where(at::isnan(v) | low | high, at::zeros_like(v), v);
  at::Tensor r = safe.to(to);
  r.masked_fill_(low, lowest(to));
  r.masked_fill_(high, highest(to));
  return r;
}

// Integer division and remainder: a zero divisor is an error (as on the Cpu); MIN / -1
// wraps and MIN % -1 is 0, where the hardware would trap.
void check_divisor(const at::Tensor& y, ir::BinaryFn fn) {
  EMBER_CHECK(!at::eq(y, 0).any().item<bool>(),
              std::string(ir::name(fn)) + ": integer division by zero");
}

at::Tensor floor_rem(const at::Tensor& r, const at::Tensor& y) {
  // The truncated remainder r moved to the divisor's sign (Python's %).
  const at::Tensor fix = at::ne(r, 0) & at::ne(at::lt(r, 0), at::lt(y, 0));
  return at::where(fix, r + y, r);
}

at::Tensor int_div(const at::Tensor& x, const at::Tensor& y) {
  const at::Tensor m1 = at::eq(y, -1);
  const at::Tensor ys = at::where(m1, at::ones_like(y), y);
  return at::where(m1, at::neg(x), at::div(x, ys, "trunc"));
}

at::Tensor int_rem(const at::Tensor& x, const at::Tensor& y) {
  const at::Tensor m1 = at::eq(y, -1);
  const at::Tensor ys = at::where(m1, at::ones_like(y), y);
  const at::Tensor r = at::where(m1, at::zeros_like(x), at::fmod(x, ys));
  return floor_rem(r, y);
}

// Shifts by a count outside [0, bits) give 0 (shr of a negative value: -1).
at::Tensor shift(const at::Tensor& x, const at::Tensor& y, bool left) {
  const std::int64_t bits = 8 * static_cast<std::int64_t>(x.element_size());
  const at::Tensor ok = at::ge(y, 0) & at::lt(y, bits);
  const at::Tensor count = at::where(ok, y, at::zeros_like(y));
  const at::Tensor s = left ? at::bitwise_left_shift(x, count) : at::bitwise_right_shift(x, count);
  at::Tensor out_of_range;
  if (left) {
    out_of_range = at::zeros_like(s);
  } else {
    out_of_range = at::where(at::lt(x, 0), at::full_like(s, -1), at::zeros_like(s));
  }
  return at::where(ok, s, out_of_range);
}

// ---- element-wise functions from their definitions ----
//
// Note [Functions from the table]
// An element-wise function that ATen has with ember's meaning runs as that ATen call (the
// cases of run_one(Unary) and run_one(Binary)); every other one, and so every function
// added to the table without a line here, is its scalar expression (ir/scalar_table.hpp)
// evaluated node by node with ATen ops over whole tensors: each node once (an Expr is a
// DAG), in the compute type of the operands (execute_widened has already widened 16-bit
// floats), comparisons as kBool, with the Expr's meaning of integer division, remainder and
// shifts (ir/scalar_expr.hpp). The conformance cases check both paths against the same
// reference.

at::Tensor call(ir::sx::Math m, const at::Tensor& x, const at::Tensor& y) {
  using M = ir::sx::Math;
  switch (m) {
    case M::Fabs:
      return at::abs(x);
    case M::Sqrt:
      return at::sqrt(x);
    case M::Exp:
      return at::exp(x);
    case M::Log:
      return at::log(x);
    case M::Log1p:
      return at::log1p(x);
    case M::Expm1:
      return at::expm1(x);
    case M::Sin:
      return at::sin(x);
    case M::Cos:
      return at::cos(x);
    case M::Tan:
      return at::tan(x);
    case M::Sinh:
      return at::sinh(x);
    case M::Cosh:
      return at::cosh(x);
    case M::Tanh:
      return at::tanh(x);
    case M::Asin:
      return at::asin(x);
    case M::Acos:
      return at::acos(x);
    case M::Atan:
      return at::atan(x);
    case M::Erf:
      return at::erf(x);
    case M::Erfc:
      return at::erfc(x);
    case M::Floor:
      return at::floor(x);
    case M::Ceil:
      return at::ceil(x);
    case M::Rint:  // half to even
      return at::round(x);
    case M::Trunc:
      return at::trunc(x);
    case M::Pow:
      return at::pow(x, y);
    case M::Atan2:
      return at::atan2(x, y);
    case M::Count_:
      break;
  }
  fail("libtorch: unknown math function");
}

// The integer x / y and x % y of an Expr: truncating, 0 for a zero divisor, MIN / -1
// wrapping and MIN % -1 = 0.
at::Tensor expr_int_div(const at::Tensor& x, const at::Tensor& y, bool rem) {
  const at::Tensor zero = at::eq(y, 0), m1 = at::eq(y, -1);
  const at::Tensor ys = at::where(zero | m1, at::ones_like(y), y);
  const at::Tensor r = rem ? at::where(m1, at::zeros_like(x), at::fmod(x, ys))
                           : at::where(m1, at::neg(x), at::div(x, ys, "trunc"));
  return at::where(zero, at::zeros_like(r), r);
}

// Expression e over a (and b), with parameters p0 and p1, in a's dtype (Note [Functions
// from the table]).
at::Tensor evaluate(const ir::sx::Expr& e, const at::Tensor& a, const at::Tensor& b, double p0,
                    double p1) {
  using Op = ir::sx::Op;
  const at::ScalarType t = a.scalar_type();
  const bool integer = !at::isFloatingType(t);
  const auto constant = [&](double v) { return at::scalar_tensor(scalar_as(v, t), a.options()); };
  std::vector<at::Tensor> v(static_cast<std::size_t>(e.size));
  for (int i = 0; i < e.size; ++i) {
    const ir::sx::Node& n = e[i];
    const auto kid = [&](std::int8_t k) -> const at::Tensor& {
      return v[static_cast<std::size_t>(k)];
    };
    at::Tensor& r = v[static_cast<std::size_t>(i)];
    switch (n.op) {
      case Op::Const:
        r = constant(n.value);
        break;
      case Op::Lowest:
        r = at::scalar_tensor(lowest(t), a.options());
        break;
      case Op::Highest:
        r = at::scalar_tensor(highest(t), a.options());
        break;
      case Op::A:
        r = a;
        break;
      case Op::B:
        r = b;
        break;
      case Op::P0:
        r = constant(p0);
        break;
      case Op::P1:
        r = constant(p1);
        break;
      case Op::Neg:
        r = at::neg(kid(n.a));
        break;
      case Op::Not:
        r = at::logical_not(kid(n.a));
        break;
      case Op::BitNot:
        r = at::bitwise_not(kid(n.a));
        break;
      case Op::ToC:
        r = kid(n.a).to(t);
        break;
      case Op::Add:
        r = at::add(kid(n.a), kid(n.b));
        break;
      case Op::Sub:
        r = at::sub(kid(n.a), kid(n.b));
        break;
      case Op::Mul:
        r = at::mul(kid(n.a), kid(n.b));
        break;
      case Op::Div:
        r = integer ? expr_int_div(kid(n.a), kid(n.b), false) : at::div(kid(n.a), kid(n.b));
        break;
      case Op::Mod:
        r = integer ? expr_int_div(kid(n.a), kid(n.b), true) : at::fmod(kid(n.a), kid(n.b));
        break;
      case Op::Eq:
        r = at::eq(kid(n.a), kid(n.b));
        break;
      case Op::Ne:
        r = at::ne(kid(n.a), kid(n.b));
        break;
      case Op::Lt:
        r = at::lt(kid(n.a), kid(n.b));
        break;
      case Op::Le:
        r = at::le(kid(n.a), kid(n.b));
        break;
      case Op::Gt:
        r = at::gt(kid(n.a), kid(n.b));
        break;
      case Op::Ge:
        r = at::ge(kid(n.a), kid(n.b));
        break;
      case Op::And:
        r = at::logical_and(kid(n.a), kid(n.b));
        break;
      case Op::Or:
        r = at::logical_or(kid(n.a), kid(n.b));
        break;
      case Op::BitAnd:
        r = at::bitwise_and(kid(n.a), kid(n.b));
        break;
      case Op::BitOr:
        r = at::bitwise_or(kid(n.a), kid(n.b));
        break;
      case Op::BitXor:
        r = at::bitwise_xor(kid(n.a), kid(n.b));
        break;
      case Op::Shl:
        r = shift(kid(n.a), kid(n.b), true);
        break;
      case Op::Shr:
        r = shift(kid(n.a), kid(n.b), false);
        break;
      case Op::Select:
        r = at::where(kid(n.a), kid(n.b), kid(n.c));
        break;
      case Op::Call:
        r = call(n.fn, kid(n.a), n.b >= 0 ? kid(n.b) : at::Tensor());
        break;
      case Op::Count_:
        fail("libtorch: unknown expression node");
    }
  }
  return v[static_cast<std::size_t>(e.root())];
}

// r where x >= bound, else -0: the activations' limits toward -inf (-inf * 0 would be NaN).
at::Tensor neg_zero_below(const at::Tensor& x, double bound, const at::Tensor& r) {
  return at::where(at::lt(x, bound), at::full_like(r, -0.0), r);
}

// ---- windows (unfold, fold, pool) as strided views of a padded image ----

struct WindowGeometry {
  std::vector<std::int64_t> positions;  // window positions per spatial dim
};

WindowGeometry geometry(const std::vector<std::size_t>& spatial, const ir::Window& w) {
  return {to_i64(ir::window_positions(spatial, w))};
}

// x [N, C, *spatial] padded by w.padding with `pad` on both sides of each spatial dim.
at::Tensor pad_image(const at::Tensor& x, const ir::Window& w, const at::Scalar& pad) {
  std::vector<std::int64_t> pads;
  bool any = false;
  for (std::size_t d = w.padding.size(); d-- > 0;) {
    const auto p = static_cast<std::int64_t>(w.padding[d]);
    pads.push_back(p);
    pads.push_back(p);
    any = any || p != 0;
  }
  return any ? at::constant_pad_nd(x, pads, pad) : x;
}

// The windows of padded image p as a view [N, C, *positions, *kernel].
at::Tensor window_view(const at::Tensor& p, const ir::Window& w, const WindowGeometry& g) {
  const std::size_t sd = w.kernel.size();
  std::vector<std::int64_t> sizes = {p.size(0), p.size(1)}, strides = {p.stride(0), p.stride(1)};
  for (std::size_t d = 0; d < sd; ++d) {
    sizes.push_back(g.positions[d]);
    strides.push_back(p.stride(2 + d) * static_cast<std::int64_t>(w.stride[d]));
  }
  for (std::size_t d = 0; d < sd; ++d) {
    sizes.push_back(static_cast<std::int64_t>(w.kernel[d]));
    strides.push_back(p.stride(2 + d) * static_cast<std::int64_t>(w.dilation[d]));
  }
  return p.as_strided(sizes, strides, p.storage_offset());
}

std::vector<std::size_t> spatial_of(const Shape& s) { return {s.begin() + 2, s.end()}; }

// ---- the backend ----

class LibTorchBackend final : public backend::Backend {
 public:
  explicit LibTorchBackend(at::Device device) : device_(device) {
    if (device_.is_cpu()) counting_allocator();
    if (const char* n = std::getenv("EMBER_NUM_THREADS"); n != nullptr && std::atoi(n) > 0) {
      at::set_num_threads(std::atoi(n));
    }
    generator_ = device_.is_cpu() ? at::detail::createCPUGenerator(seed_) : at::Generator();
  }

  std::string name() const override {
    return device_.is_cpu() ? "libtorch" : "libtorch_cuda:" + std::to_string(device_.index());
  }

  ir::Handle from_data(const TensorData& data) override {
    return guarded("from_data", [&] {
      at::Tensor t = at::empty(sizes_of(data.shape()), opts(data.dtype()).device(at::kCPU));
      if (!data.bytes().empty()) std::memcpy(t.data_ptr(), data.data(), data.bytes().size());
      return wrap(device_.is_cpu() ? t : t.to(device_));
    });
  }

  TensorData to_data(const ir::Handle& x) override {
    return guarded("to_data", [&] {
      const at::Tensor c = at_of(x).to(at::kCPU).contiguous();
      const std::size_t bytes = static_cast<std::size_t>(c.numel()) * c.element_size();
      std::vector<std::byte> out(bytes);
      if (bytes) std::memcpy(out.data(), c.data_ptr(), bytes);
      return TensorData(std::move(out), x->shape(), x->dtype());
    });
  }

  // The direct convolution and the max-pooling gradient have no ATen mapping here yet: the
  // tensor layer builds them from Unfold, Matmul and Fold, which ATen runs. Nor batch norm
  // and its gradient: the tensor layer and BatchNorm's rule compose them.
  bool supports(const ir::Op& op) const override {
    if (std::holds_alternative<ir::Conv>(op) || std::holds_alternative<ir::MaxPoolGrad>(op))
      return false;
    if (std::holds_alternative<ir::BatchNorm>(op) || std::holds_alternative<ir::BatchNormGrad>(op))
      return false;
    // Nor the SVD: the registry's fallback (the Cpu) runs it.
    if (std::holds_alternative<ir::Svd>(op)) return false;
    // Nor RMS norm: the tensor layer composes it (ops::rms_norm).
    if (std::holds_alternative<ir::RmsNorm>(op) || std::holds_alternative<ir::RmsNormGrad>(op))
      return false;
    // Nor group norm: nn::GroupNorm composes it (Note [Group norm's own op]).
    if (std::holds_alternative<ir::GroupNorm>(op) || std::holds_alternative<ir::GroupNormGrad>(op))
      return false;
    // Nor attention: the tensor layer composes it from Matmul and Softmax.
    if (std::holds_alternative<ir::Attention>(op) || std::holds_alternative<ir::AttentionGrad>(op))
      return false;
    return Backend::supports(op);
  }

  std::vector<ir::Handle> execute(ir::Op op) override {
    if (!supports(op)) return backend::execute_on_fallback(*this, std::move(op));
    const char* what = ir::name(ir::kind_of(op));
    return guarded(what, [&] {
      if (ir::computes_widened(op)) return execute_widened(std::move(op));
      return dispatch(op);
    });
  }

  void seed(std::uint64_t s) override {
    std::lock_guard lk(mu_);
    seed_ = s;
    if (device_.is_cpu()) {
      generator_ = at::detail::createCPUGenerator(s);
    } else {
      generator_ = at::Generator();
      at::manual_seed(s);
    }
  }
  backend::MemoryStats memory_stats() const override {
    if (device_.is_cpu()) return CountingAllocator::stats();
    return {};
  }
  void empty_cache() override {}
  void sync() override {}

 private:
  at::TensorOptions opts(DType t) const { return at::TensorOptions(to_aten(t)).device(device_); }

  // Runs f, turning an ATen exception into an ember::Error naming the backend and the op.
  template <class F>
  auto guarded(const char* what, F&& f) -> decltype(f()) {
    try {
      return f();
    } catch (const c10::Error& e) {
      fail(name() + ": " + what + ": " + e.what_without_backtrace());
    }
  }

  std::vector<ir::Handle> dispatch(ir::Op& op) {
    return std::visit(
        [&](auto& o) -> std::vector<ir::Handle> {
          if constexpr (std::is_same_v<decltype(run_one(o)), ir::Handle>) {
            return {run_one(o)};
          } else {
            return run_one(o);
          }
        },
        op);
  }

  // As the Cpu: the ops that compute on their operands' values take 16-bit floats in f32
  // and round their float outputs back.
  std::vector<ir::Handle> execute_widened(ir::Op op) {
    DType half = DType::F32;
    ir::for_each_operand(op, [&](ir::Handle& h) {
      if (!h || !is_half(h->dtype())) return;
      half = h->dtype();
      h = wrap(at_of(h).to(at::kFloat));
    });
    std::visit(
        [&](auto& o) {
          if constexpr (requires { o.out; }) {
            if (o.out == half) o.out = DType::F32;
          }
        },
        op);
    auto outs = dispatch(op);
    for (auto& h : outs) {
      if (h->dtype() == DType::F32) h = wrap(at_of(h).to(to_aten(half)));
    }
    return outs;
  }

  // The tensor an op writes in place: x's own tensor when reusable, else a fresh one.
  at::Tensor output_for(const ir::Handle& x, const Shape& shape, DType dtype) {
    if (reusable(x, shape, dtype)) return at_of(x);
    return at::empty(sizes_of(shape), opts(dtype));
  }
  // The tensor an op that updates part of x writes: x's own when reusable, else a copy.
  at::Tensor writable_copy(const ir::Handle& x) {
    if (reusable(x, x->shape(), x->dtype())) return at_of(x);
    return at_of(x).clone(at::MemoryFormat::Contiguous);
  }

  // Indices checked against the extent of dim in shape, with the Cpu's message.
  static void check_indices(const at::Tensor& index, std::size_t dim, const Shape& shape,
                            const char* op) {
    if (index.numel() == 0) return;
    const auto extent = static_cast<std::int64_t>(shape[dim]);
    const at::Tensor bad = at::lt(index, 0) | at::ge(index, extent);
    if (!bad.any().item<bool>()) return;
    const std::int64_t i = index.masked_select(bad).select(0, 0).item<std::int64_t>();
    fail(std::string(op) + ": index " + std::to_string(i) + " is out of range for dim " +
         std::to_string(dim) + " (extent " + std::to_string(extent) + ") of the tensor " +
         shape.to_string() + " (indices " + shape_of(index).to_string() + ")");
  }

  // ---- element-wise ----

  // The function def of operands a (and b) from its scalar expression, as a fresh
  // contiguous tensor of shape and dtype out (Note [Functions from the table]).
  ir::Handle from_definition(const ir::sx::FnDef& def, const at::Tensor& a, const at::Tensor& b,
                             double p0, double p1, const Shape& shape, DType out) const {
    const ir::sx::Expr& e = ir::sx::expr(def, kind_of(from_aten(a.scalar_type())));
    EMBER_ASSERT(!e.empty());  // the tensor layer checks the function is defined for the dtype
    at::Tensor r = evaluate(e, a, b, p0, p1).expand(sizes_of(shape)).to(to_aten(out));
    // An expression that is an operand itself, or an expanded one, aliases it: copy.
    const bool alias = r.is_alias_of(a) || (b.defined() && r.is_alias_of(b));
    return wrap(alias ? r.clone(at::MemoryFormat::Contiguous) : r.contiguous());
  }

  ir::Handle run_one(ir::Unary& o) {
    const at::Tensor& x = at_of(o.x);
    const bool flt = is_float(o.x->dtype());
    using F = ir::UnaryFn;
    // The functions ATen has with ember's meaning, written into the output (x's own
    // storage when reusable).
    const auto into = [&](auto&& f) {
      at::Tensor out = output_for(o.x, o.x->shape(), o.out);
      f(out, x);
      return wrap(out);
    };
    switch (o.fn) {
      case F::Neg:
        return into([](at::Tensor& y, const at::Tensor& a) { at::neg_out(y, a); });
      case F::Abs:
        return into([](at::Tensor& y, const at::Tensor& a) { at::abs_out(y, a); });
      case F::Recip:
        return into([](at::Tensor& y, const at::Tensor& a) { at::reciprocal_out(y, a); });
      case F::Square:
        return into([](at::Tensor& y, const at::Tensor& a) { at::mul_out(y, a, a); });
      case F::Sqrt:
        return into([](at::Tensor& y, const at::Tensor& a) { at::sqrt_out(y, a); });
      case F::Rsqrt:
        return into([](at::Tensor& y, const at::Tensor& a) { at::rsqrt_out(y, a); });
      case F::Exp:
        return into([](at::Tensor& y, const at::Tensor& a) { at::exp_out(y, a); });
      case F::Log:
        return into([](at::Tensor& y, const at::Tensor& a) { at::log_out(y, a); });
      case F::Log1p:
        return into([](at::Tensor& y, const at::Tensor& a) { at::log1p_out(y, a); });
      case F::Expm1:
        return into([](at::Tensor& y, const at::Tensor& a) { at::expm1_out(y, a); });
      case F::Sin:
        return into([](at::Tensor& y, const at::Tensor& a) { at::sin_out(y, a); });
      case F::Cos:
        return into([](at::Tensor& y, const at::Tensor& a) { at::cos_out(y, a); });
      case F::Tan:
        return into([](at::Tensor& y, const at::Tensor& a) { at::tan_out(y, a); });
      case F::Sinh:
        return into([](at::Tensor& y, const at::Tensor& a) { at::sinh_out(y, a); });
      case F::Cosh:
        return into([](at::Tensor& y, const at::Tensor& a) { at::cosh_out(y, a); });
      case F::Tanh:
        return into([](at::Tensor& y, const at::Tensor& a) { at::tanh_out(y, a); });
      case F::Asin:
        return into([](at::Tensor& y, const at::Tensor& a) { at::asin_out(y, a); });
      case F::Acos:
        return into([](at::Tensor& y, const at::Tensor& a) { at::acos_out(y, a); });
      case F::Atan:
        return into([](at::Tensor& y, const at::Tensor& a) { at::atan_out(y, a); });
      case F::Asinh:
        return into([](at::Tensor& y, const at::Tensor& a) { at::asinh_out(y, a); });
      case F::Acosh:
        return into([](at::Tensor& y, const at::Tensor& a) { at::acosh_out(y, a); });
      case F::Atanh:
        return into([](at::Tensor& y, const at::Tensor& a) { at::atanh_out(y, a); });
      case F::Erf:
        return into([](at::Tensor& y, const at::Tensor& a) { at::erf_out(y, a); });
      case F::Erfc:
        return into([](at::Tensor& y, const at::Tensor& a) { at::erfc_out(y, a); });
      case F::Floor:
        return into([](at::Tensor& y, const at::Tensor& a) { at::floor_out(y, a); });
      case F::Ceil:
        return into([](at::Tensor& y, const at::Tensor& a) { at::ceil_out(y, a); });
      case F::Round:  // half to even, as ember
        return into([](at::Tensor& y, const at::Tensor& a) { at::round_out(y, a); });
      case F::Trunc:
        return into([](at::Tensor& y, const at::Tensor& a) { at::trunc_out(y, a); });
      case F::Deg2Rad:
        return into([](at::Tensor& y, const at::Tensor& a) { at::deg2rad_out(y, a); });
      case F::Rad2Deg:
        return into([](at::Tensor& y, const at::Tensor& a) { at::rad2deg_out(y, a); });
      case F::Sigmoid:
        return into([](at::Tensor& y, const at::Tensor& a) { at::sigmoid_out(y, a); });
      case F::Gelu:
        return wrap(neg_zero_below(x, -40.0, at::gelu(x)));
      case F::GeluTanh:
        return wrap(neg_zero_below(x, -40.0, at::gelu(x, "tanh")));
      case F::Silu:
        return wrap(neg_zero_below(x, -200.0, at::silu(x)));
      case F::Softplus:
        return wrap(at::softplus(x, 1, 20));
      case F::Mish:
        return wrap(neg_zero_below(x, -200.0, at::mish(x)));
      case F::LeakyRelu:
        return wrap(at::leaky_relu(x, o.p0));
      case F::Elu:
        return wrap(at::elu(x, o.p0));
      case F::Clamp: {
        if (!flt) {
          return wrap(at::clamp(x, at::Scalar(static_cast<std::int64_t>(o.p0)),
                                at::Scalar(static_cast<std::int64_t>(o.p1))));
        }
        // A NaN bound is no bound.
        const c10::optional<at::Scalar> lo =
            std::isnan(o.p0) ? c10::nullopt : c10::optional<at::Scalar>(o.p0);
        const c10::optional<at::Scalar> hi =
            std::isnan(o.p1) ? c10::nullopt : c10::optional<at::Scalar>(o.p1);
        if (!lo && !hi) return wrap(x.clone());
        return wrap(at::clamp(x, lo, hi));
      }
      case F::PowScalar:  // pow(x, p0) element by element, as the C function (no ATen
                          // special cases for 0.5, 3, ...), and x * x for 2
        if (o.p0 == 2.0) return wrap(at::mul(x, x));
        return wrap(at::pow(x, at::scalar_tensor(o.p0, x.options())));
      case F::IsNan:
        return wrap(at::isnan(x));
      case F::IsInf:
        return wrap(at::isinf(x));
      case F::IsFinite:
        return wrap(at::isfinite(x));
      case F::LogicalNot:
        return wrap(at::logical_not(x));
      case F::BitNot:
        return into([](at::Tensor& y, const at::Tensor& a) { at::bitwise_not_out(y, a); });
      default:  // Note [Functions from the table]
        break;
    }
    return from_definition(ir::sx::def(o.fn), x, at::Tensor(), o.p0, o.p1, o.x->shape(), o.out);
  }

  ir::Handle run_one(ir::Binary& o) {
    const at::Tensor& a = at_of(o.lhs);
    const at::Tensor& b = at_of(o.rhs);
    const bool integer = is_int(o.lhs->dtype());
    using F = ir::BinaryFn;
    const auto into = [&](auto&& f) {
      at::Tensor out = reusable(o.lhs, o.out_shape, o.out) ? at_of(o.lhs)
                                                           : output_for(o.rhs, o.out_shape, o.out);
      f(out, a, b);
      return wrap(out);
    };
    switch (o.fn) {
      case F::Add:
        return into(
            [](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) { at::add_out(y, p, q); });
      case F::Sub:
        return into(
            [](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) { at::sub_out(y, p, q); });
      case F::Mul:
        return into(
            [](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) { at::mul_out(y, p, q); });
      case F::Div:
        if (integer) {
          check_divisor(b, o.fn);
          return wrap(int_div(a, b));
        }
        return into(
            [](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) { at::div_out(y, p, q); });
      case F::Rem:
        if (integer) {
          check_divisor(b, o.fn);
          return wrap(int_rem(a, b));
        }
        return wrap(floor_rem(at::fmod(a, b), b));
      case F::Pow:
        return into(
            [](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) { at::pow_out(y, p, q); });
      case F::Atan2:
        return into([](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) {
          at::atan2_out(y, p, q);
        });
      case F::Hypot:
        return into([](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) {
          at::hypot_out(y, p, q);
        });
      case F::LogAddExp:
        return into([](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) {
          at::logaddexp_out(y, p, q);
        });
      case F::Max:
        return into([](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) {
          at::maximum_out(y, p, q);
        });
      case F::Min:
        return into([](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) {
          at::minimum_out(y, p, q);
        });
      case F::Eq:
        return wrap(at::eq(a, b));
      case F::Ne:
        return wrap(at::ne(a, b));
      case F::Gt:
        return wrap(at::gt(a, b));
      case F::Ge:
        return wrap(at::ge(a, b));
      case F::Lt:
        return wrap(at::lt(a, b));
      case F::Le:
        return wrap(at::le(a, b));
      case F::And:
        return wrap(at::logical_and(a, b));
      case F::Or:
        return wrap(at::logical_or(a, b));
      case F::Xor:
        return wrap(at::logical_xor(a, b));
      case F::BitAnd:
        return into([](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) {
          at::bitwise_and_out(y, p, q);
        });
      case F::BitOr:
        return into([](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) {
          at::bitwise_or_out(y, p, q);
        });
      case F::BitXor:
        return into([](at::Tensor& y, const at::Tensor& p, const at::Tensor& q) {
          at::bitwise_xor_out(y, p, q);
        });
      case F::Shl:
        return wrap(shift(a, b, true));
      case F::Shr:
        return wrap(shift(a, b, false));
      default:  // Note [Functions from the table]
        break;
    }
    return from_definition(ir::sx::def(o.fn), a, b, 0, 0, o.out_shape, o.out);
  }

  ir::Handle run_one(ir::Where& o) {
    return wrap(at::where(at_of(o.cond), at_of(o.a), at_of(o.b)));
  }
  ir::Handle run_one(ir::Cast& o) { return wrap(cast(at_of(o.x), to_aten(o.to))); }

  // ---- reductions ----
  ir::Handle run_one(ir::Reduce& o) {
    const at::Tensor& x = at_of(o.x);
    const auto d = static_cast<std::int64_t>(o.dim);
    const at::ScalarType t = x.scalar_type();
    const bool empty = o.x->shape()[o.dim] == 0;
    using F = ir::ReduceFn;
    switch (o.fn) {
      case F::Sum:
        return wrap(at::sum(x, {d}, true, t));
      case F::Prod:
        return wrap(at::prod(x, d, true, t));
      case F::Mean:
        if (at::isFloatingType(t)) return wrap(at::mean(x, {d}, true));
        {
          // The sum in x's dtype (wrapping), divided in i64, truncating; 0 when empty.
          if (empty) return wrap(at::zeros(sizes_of(ir::out_shape(o)), x.options()));
          const at::Tensor s = at::sum(x, {d}, true, t).to(at::kLong);
          return wrap(at::div(s, static_cast<std::int64_t>(o.x->shape()[o.dim]), "trunc").to(t));
        }
      case F::Max:
        if (empty) return wrap(at::full(sizes_of(ir::out_shape(o)), lowest(t), x.options()));
        return wrap(at::amax(x, {d}, true));
      case F::Min:
        if (empty) return wrap(at::full(sizes_of(ir::out_shape(o)), highest(t), x.options()));
        return wrap(at::amin(x, {d}, true));
      case F::ArgMax:
      case F::ArgMin: {
        const at::Tensor v = t == at::kBool ? x.to(at::kByte) : x;
        return wrap(o.fn == F::ArgMax ? at::argmax(v, d, true) : at::argmin(v, d, true));
      }
      case F::Any:
      case F::All: {
        const at::Tensor nz = t == at::kBool ? x : at::ne(x, 0);
        return wrap(o.fn == F::Any ? at::any(nz, d, true) : at::all(nz, d, true));
      }
      case F::Count_:
        break;
    }
    fail("libtorch: unknown reduction");
  }

  ir::Handle run_one(ir::Scan& o) {
    const at::Tensor& x = at_of(o.x);
    const auto d = static_cast<std::int64_t>(o.dim);
    switch (o.fn) {
      case ir::ScanFn::Sum:
        return wrap(at::cumsum(x, d, x.scalar_type()));
      case ir::ScanFn::Prod:
        return wrap(at::cumprod(x, d, x.scalar_type()));
      case ir::ScanFn::Max:
        return wrap(std::get<0>(at::cummax(x, d)));
      case ir::ScanFn::Min:
        return wrap(std::get<0>(at::cummin(x, d)));
      case ir::ScanFn::Count_:
        break;
    }
    fail("libtorch: unknown scan");
  }

  ir::Handle run_one(ir::Softmax& o) {
    const auto d = static_cast<std::int64_t>(o.dim);
    return wrap(o.log ? at::log_softmax(at_of(o.x), d) : at::softmax(at_of(o.x), d));
  }

  ir::Handle run_one(ir::LayerNorm& o) {
    const at::Tensor& x = at_of(o.x);
    const Shape& s = o.x->shape();
    const std::vector<std::int64_t> normalized(
        s.begin() + static_cast<std::ptrdiff_t>(s.rank() - o.dims), s.end());
    const c10::optional<at::Tensor> w =
        o.weight ? c10::optional<at::Tensor>(at_of(o.weight)) : c10::nullopt;
    const c10::optional<at::Tensor> b =
        o.bias ? c10::optional<at::Tensor>(at_of(o.bias)) : c10::nullopt;
    // ATen's f32 kernel takes the variance as E[x^2] - E[x]^2, which loses every digit on
    // rows far from 0; centring each row first (exact: layer norm ignores a shift) keeps
    // ember's accuracy.
    std::vector<std::int64_t> row_dims;
    for (std::size_t d = s.rank() - o.dims; d < s.rank(); ++d)
      row_dims.push_back(static_cast<std::int64_t>(d));
    const at::Tensor xc =
        x.scalar_type() == at::kFloat && x.numel() > 0 ? x - at::mean(x, row_dims, true) : x;
    return wrap(std::get<0>(at::native_layer_norm(xc, normalized, w, b, o.eps)));
  }

  // ---- compute ----
  ir::Handle run_one(ir::Matmul& o) { return wrap(at::matmul(at_of(o.a), at_of(o.b))); }

  std::vector<ir::Handle> run_one(ir::Sort& o) {
    const at::Tensor& x = at_of(o.x);
    const at::Tensor v = x.scalar_type() == at::kBool ? x.to(at::kByte) : x;
    auto [values, indices] =
        at::sort(v, /*stable=*/true, static_cast<std::int64_t>(o.dim), o.descending);
    if (x.scalar_type() == at::kBool) values = values.to(at::kBool);
    return {wrap(values), wrap(indices)};
  }

  // ---- views ----
  ir::Handle run_one(ir::Reshape& o) { return wrap(at::reshape(at_of(o.x), sizes_of(o.shape))); }
  ir::Handle run_one(ir::Permute& o) { return wrap(at_of(o.x).permute(to_i64(o.axes))); }
  ir::Handle run_one(ir::Expand& o) { return wrap(at_of(o.x).expand(sizes_of(o.shape))); }
  ir::Handle run_one(ir::Slice& o) { return wrap(sliced(at_of(o.x), o.ranges)); }
  ir::Handle run_one(ir::Flip& o) {  // a copy: ATen has no negative strides
    if (o.axes.empty()) return o.x;
    return wrap(at::flip(at_of(o.x), to_i64(o.axes)));
  }

  static at::Tensor sliced(at::Tensor t, const std::vector<ir::SliceRange>& ranges) {
    for (std::size_t d = 0; d < ranges.size(); ++d) {
      const ir::SliceRange& r = ranges[d];
      if (r.start == 0 && r.step == 1 && static_cast<std::int64_t>(r.end) == t.size(d)) continue;
      t = t.slice(static_cast<std::int64_t>(d), static_cast<std::int64_t>(r.start),
                  static_cast<std::int64_t>(r.end), static_cast<std::int64_t>(r.step));
    }
    return t;
  }

  // ---- data movement ----
  ir::Handle run_one(ir::SliceAssign& o) {
    at::Tensor out = writable_copy(o.x);
    sliced(out, o.ranges).copy_(at_of(o.value));
    return wrap(out);
  }

  ir::Handle run_one(ir::Cat& o) {
    std::vector<at::Tensor> ts;
    ts.reserve(o.xs.size());
    for (const ir::Handle& h : o.xs) ts.push_back(at_of(h));
    return wrap(at::cat(ts, static_cast<std::int64_t>(o.dim)));
  }

  ir::Handle run_one(ir::Gather& o) {
    check_indices(at_of(o.index), o.dim, o.x->shape(), "gather");
    return wrap(at::gather(at_of(o.x), static_cast<std::int64_t>(o.dim), at_of(o.index)));
  }

  ir::Handle run_one(ir::Scatter& o) {
    check_indices(at_of(o.index), o.dim, o.x->shape(), o.add ? "scatter_add" : "scatter");
    const auto d = static_cast<std::int64_t>(o.dim);
    const at::Tensor& index = at_of(o.index);
    if (o.add && o.x->dtype() == DType::Bool) {  // bool adds as or
      at::Tensor acc = at_of(o.x).to(at::kLong).scatter_add_(d, index, at_of(o.src).to(at::kLong));
      return wrap(at::ne(acc, 0));
    }
    at::Tensor out = writable_copy(o.x);
    if (o.add) {
      out.scatter_add_(d, index, at_of(o.src));
    } else {
      out.scatter_(d, index, at_of(o.src));
    }
    return wrap(out);
  }

  ir::Handle run_one(ir::IndexSelect& o) {
    check_indices(at_of(o.index), o.dim, o.x->shape(), "select");
    return wrap(at::index_select(at_of(o.x), static_cast<std::int64_t>(o.dim), at_of(o.index)));
  }

  ir::Handle run_one(ir::IndexAdd& o) {
    check_indices(at_of(o.index), o.dim, o.x->shape(), "select_assign");
    const auto d = static_cast<std::int64_t>(o.dim);
    const at::Tensor& index = at_of(o.index);
    if (o.x->dtype() == DType::Bool) {  // bool adds as or
      at::Tensor acc = at_of(o.x).to(at::kLong).index_add_(d, index, at_of(o.src).to(at::kLong));
      return wrap(at::ne(acc, 0));
    }
    at::Tensor out = writable_copy(o.x);
    out.index_add_(d, index, at_of(o.src));
    return wrap(out);
  }

  ir::Handle run_one(ir::Nonzero& o) { return wrap(at::nonzero(at_of(o.x))); }

  // ---- creation ----
  ir::Handle run_one(ir::Fill& o) {
    const at::ScalarType t = to_aten(o.dtype);
    const auto sizes = sizes_of(o.shape);
    if (at::isFloatingType(t)) {  // the value rounded as ember rounds a double (inf beyond range)
      if (t == at::kDouble) return wrap(at::full(sizes, o.value, opts(o.dtype)));
      return wrap(at::full(sizes, o.value, opts(DType::F64)).to(t));
    }
    if (t == at::kBool) return wrap(at::full(sizes, o.value != 0.0, opts(o.dtype)));
    return wrap(at::full(sizes, o.int_value, opts(DType::I64)).to(t));
  }

  ir::Handle run_one(ir::Arange& o) {
    const at::Tensor v = at::arange(static_cast<std::int64_t>(o.n), opts(DType::F64));
    return wrap(cast(v * o.step + o.start, to_aten(o.dtype)));
  }

  ir::Handle run_one(ir::Random& o) {
    const at::ScalarType t = to_aten(o.dtype);
    const auto sizes = sizes_of(o.shape);
    // Floats are drawn in their own precision (16-bit ones in f32), ints in f64 and floored.
    const at::ScalarType draw = t == at::kDouble || t == at::kFloat ? t
                                : at::isFloatingType(t)             ? at::kFloat
                                                                    : at::kDouble;
    at::Tensor r = at::empty(sizes, at::TensorOptions(draw).device(device_));
    const Distribution& dist = o.dist;
    {
      std::lock_guard lk(mu_);
      const c10::optional<at::Generator> gen =
          generator_.defined() ? c10::optional<at::Generator>(generator_) : c10::nullopt;
      switch (dist.kind) {
        case Distribution::Kind::Normal:
          r.normal_(dist.a, dist.b, gen);
          break;
        case Distribution::Kind::Bernoulli:
          r.bernoulli_(dist.a, gen);
          break;
        case Distribution::Kind::Uniform:
          r.uniform_(dist.a, dist.b, gen);
          break;
        case Distribution::Kind::Default:
          r.uniform_(0.0, 1.0, gen);
          break;
      }
    }
    if (!at::isFloatingType(t)) return wrap(cast(at::floor(r), t));
    const bool bounded =
        dist.kind == Distribution::Kind::Uniform || dist.kind == Distribution::Kind::Default;
    const double lo = dist.kind == Distribution::Kind::Uniform ? dist.a : 0.0;
    const double hi = dist.kind == Distribution::Kind::Uniform ? dist.b : 1.0;
    if (bounded && hi > lo) {
      // Rounding may carry a draw up to the excluded upper bound: keep [lo, hi) in the
      // precision drawn (as the Cpu, which rounds 16-bit draws after that).
      const at::Tensor h = at::scalar_tensor(hi, r.options());
      const at::Tensor below = at::nextafter(h, at::scalar_tensor(-INFINITY, r.options()));
      if (below.item<double>() >= lo) r = at::where(at::ge(r, h), below, r);
    }
    return wrap(r.to(t));
  }

  // ---- sliding windows ----
  ir::Handle run_one(ir::Unfold& o) {
    const at::Tensor& x = at_of(o.x);
    const WindowGeometry g = geometry(spatial_of(o.x->shape()), o.window);
    const at::Tensor p = pad_image(x, o.window, scalar_as(o.pad_value, x.scalar_type()));
    const at::Tensor win = window_view(p, o.window, g);  // [N, C, *positions, *kernel]
    const auto sd = static_cast<std::int64_t>(o.window.kernel.size());
    std::vector<std::int64_t> perm = {0, 1};
    for (std::int64_t d = 0; d < sd; ++d) perm.push_back(2 + sd + d);
    for (std::int64_t d = 0; d < sd; ++d) perm.push_back(2 + d);
    return wrap(at::reshape(win.permute(perm), sizes_of(ir::out_shape(o))));
  }

  ir::Handle run_one(ir::Fold& o) {
    const at::Tensor& x = at_of(o.x);
    const Shape out_shape = ir::out_shape(o);
    const ir::Window& w = o.window;
    const std::size_t sd = w.kernel.size();
    const WindowGeometry g = geometry(o.output, w);
    std::vector<std::int64_t> padded = {static_cast<std::int64_t>(out_shape[0]),
                                        static_cast<std::int64_t>(out_shape[1])};
    for (std::size_t d = 0; d < sd; ++d) {
      padded.push_back(static_cast<std::int64_t>(o.output[d] + 2 * w.padding[d]));
    }
    at::Tensor p = at::zeros(padded, x.options());
    // The columns as [N, C, *kernel, *positions]: each kernel offset adds its columns to
    // the image entries it read, a strided view without overlaps.
    std::vector<std::int64_t> cols = {padded[0], padded[1]};
    std::size_t k_total = 1;
    for (std::size_t d = 0; d < sd; ++d) {
      cols.push_back(static_cast<std::int64_t>(w.kernel[d]));
      k_total *= w.kernel[d];
    }
    for (std::int64_t n : g.positions) cols.push_back(n);
    const at::Tensor c = at::reshape(x, cols);
    const at::Tensor win = window_view(p, w, g);  // [N, C, *positions, *kernel]
    for (std::size_t k = 0; k < k_total; ++k) {
      at::Tensor dst = win, src = c;
      std::size_t rest = k;
      for (std::size_t d = sd; d-- > 0;) {
        const auto kd = static_cast<std::int64_t>(rest % w.kernel[d]);
        rest /= w.kernel[d];
        dst = dst.select(static_cast<std::int64_t>(2 + sd + d), kd);
        src = src.select(static_cast<std::int64_t>(2 + d), kd);
      }
      dst.add_(src);
    }
    std::vector<ir::SliceRange> crop = {{0, out_shape[0], 1}, {0, out_shape[1], 1}};
    for (std::size_t d = 0; d < sd; ++d) {
      crop.push_back({w.padding[d], w.padding[d] + o.output[d], 1});
    }
    return wrap(sliced(p, crop));
  }

  ir::Handle run_one(ir::Conv&) { fail("LibTorch: Conv has no kernel on this backend"); }
  ir::Handle run_one(ir::MaxPoolGrad&) {
    fail("LibTorch: MaxPoolGrad has no kernel on this backend");
  }
  std::vector<ir::Handle> run_one(ir::BatchNorm&) {
    fail("LibTorch: BatchNorm has no kernel on this backend");
  }
  std::vector<ir::Handle> run_one(ir::BatchNormGrad&) {
    fail("LibTorch: BatchNormGrad has no kernel on this backend");
  }
  std::vector<ir::Handle> run_one(ir::Svd&) { fail("LibTorch: Svd has no kernel on this backend"); }
  ir::Handle run_one(ir::RmsNorm&) { fail("LibTorch: RmsNorm has no kernel on this backend"); }
  std::vector<ir::Handle> run_one(ir::RmsNormGrad&) {
    fail("LibTorch: RmsNormGrad has no kernel on this backend");
  }
  std::vector<ir::Handle> run_one(ir::GroupNorm&) {
    fail("LibTorch: GroupNorm has no kernel on this backend");
  }
  std::vector<ir::Handle> run_one(ir::GroupNormGrad&) {
    fail("LibTorch: GroupNormGrad has no kernel on this backend");
  }
  std::vector<ir::Handle> run_one(ir::Attention&) {
    fail("LibTorch: Attention has no kernel on this backend");
  }
  std::vector<ir::Handle> run_one(ir::AttentionGrad&) {
    fail("LibTorch: AttentionGrad has no kernel on this backend");
  }

  ir::Handle run_one(ir::Pool& o) {
    const at::Tensor& x = at_of(o.x);
    const at::ScalarType t = x.scalar_type();
    const WindowGeometry g = geometry(spatial_of(o.x->shape()), o.window);
    const bool max = o.fn == ir::PoolFn::Max;
    // Padding entries are left out: -inf (the lowest int) for max, 0 for sum.
    const at::Tensor p = pad_image(x, o.window, max ? lowest(t) : at::Scalar(0));
    const at::Tensor win = window_view(p, o.window, g);
    const auto sd = static_cast<std::int64_t>(o.window.kernel.size());
    std::vector<std::int64_t> kdims;
    for (std::int64_t d = 0; d < sd; ++d) kdims.push_back(2 + sd + d);
    return wrap(max ? at::amax(win, kdims) : at::sum(win, kdims, false, t));
  }

  at::Device device_;
  std::mutex mu_;  // the generator and its seed
  std::uint64_t seed_ = 0x5eed'e3be'2026ULL;
  at::Generator generator_;
};

}  // namespace

std::shared_ptr<backend::Backend> make_libtorch_backend() {
  return std::make_shared<LibTorchBackend>(at::Device(at::kCPU));
}

std::shared_ptr<backend::Backend> make_libtorch_cuda_backend(int index) {
  EMBER_CHECK(
      index >= 0 && index < libtorch_cuda_device_count(),
      "Device::libtorch_cuda(" + std::to_string(index) + "): " + libtorch_cuda_no_device_reason());
  return std::make_shared<LibTorchBackend>(
      at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index)));
}

int libtorch_cuda_device_count() {
  try {
    return at::hasCUDA() ? static_cast<int>(at::getNumGPUs()) : 0;
  } catch (const std::exception&) {
    return 0;
  }
}

std::string libtorch_cuda_no_device_reason() {
  if (!at::hasCUDA()) {
    return "the libtorch libember_libtorch.so was built with has no CUDA (Debian's "
           "libtorch-dev is CPU-only; build against a CUDA libtorch for libtorch_cuda)";
  }
  return "libtorch has CUDA but finds no usable GPU";
}

}  // namespace ember::libtorch
