// Tensor<D, K>: the user-facing tensor. Rank D and kind K (Float, Int, Bool) are compile
// time; the element type is a run-time DType; the backend is whatever the Device names.
// Every method is a thin typed forwarder to the op library (ember/tensor/ops.hpp), so this
// header stays cheap to include and one function holds each op's logic.
//
// Methods exist in two flavours: on an lvalue they share its buffer; on an rvalue
// (std::move(x).exp(), or a temporary) they hand the buffer to the op, which may reuse it
// when nobody else holds it.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ember/tensor/ops.hpp"

namespace ember {

class Gradients;

template <std::size_t D, class K = Float>
class Tensor {
  static_assert(D >= 1, "ember::Tensor needs rank >= 1");

 public:
  using Range = ops::Range;
  static constexpr std::size_t rank = D;

  explicit Tensor(DynTensor t) : t_(std::move(t)) {
    EMBER_CHECK(t_.rank() == D, "Tensor<" + std::to_string(D) + ">: got a tensor of rank " +
                                    std::to_string(t_.rank()) + " with shape " +
                                    t_.shape().to_string());
    EMBER_CHECK(t_.kind() == K::kind, std::string("Tensor<") + std::to_string(D) + ", " +
                                          name(K::kind) + ">: got a tensor of dtype " +
                                          ember::name(t_.dtype()));
  }

  // ---- creation ----
  static DType default_dtype(const Device& d) {
    if constexpr (K::kind == Kind::Float) return d.default_float();
    if constexpr (K::kind == Kind::Int) return d.default_int();
    return DType::Bool;
  }
  static Tensor from_data(const TensorData& data, const Device& d) {
    return Tensor(ops::from_data(data, d));
  }
  static Tensor zeros(const Shape& s, const Device& d) {
    return Tensor(ops::zeros(s, default_dtype(d), d));
  }
  static Tensor ones(const Shape& s, const Device& d) {
    return Tensor(ops::ones(s, default_dtype(d), d));
  }
  static Tensor full(const Shape& s, double v, const Device& d) {
    return Tensor(ops::full(s, v, default_dtype(d), d));
  }
  static Tensor empty(const Shape& s, const Device& d) {
    return Tensor(ops::empty(s, default_dtype(d), d));
  }
  static Tensor random(const Shape& s, const Distribution& dist, const Device& d) {
    return Tensor(ops::random(s, dist, default_dtype(d), d));
  }
  static Tensor arange(std::int64_t start, std::int64_t end, const Device& d) {
    static_assert(D == 1, "arange gives a rank-1 tensor");
    return Tensor(ops::arange(double(start), double(end), 1.0, default_dtype(d), d));
  }
  static Tensor arange_step(std::int64_t start, std::int64_t end, std::int64_t step,
                            const Device& d) {
    static_assert(D == 1, "arange_step gives a rank-1 tensor");
    return Tensor(ops::arange(double(start), double(end), double(step), default_dtype(d), d));
  }
  static Tensor linspace(double start, double end, std::size_t n, const Device& d) {
    static_assert(D == 1, "linspace gives a rank-1 tensor");
    return Tensor(ops::linspace(start, end, n, default_dtype(d), d));
  }
  static Tensor eye(std::size_t n, const Device& d) {
    static_assert(D == 2, "eye gives a rank-2 tensor");
    return Tensor(ops::eye(n, default_dtype(d), d));
  }
  Tensor zeros_like() const { return Tensor(ops::zeros(shape(), dtype(), device())); }
  Tensor ones_like() const { return Tensor(ops::ones(shape(), dtype(), device())); }
  Tensor full_like(double v) const { return Tensor(ops::full(shape(), v, dtype(), device())); }
  Tensor random_like(const Distribution& dist) const {
    return Tensor(ops::random(shape(), dist, dtype(), device()));
  }
  static Tensor<D, Bool> triu_mask(const Shape& s, std::int64_t offset, const Device& d) {
    return Tensor<D, Bool>(ops::triu_mask(s, offset, d));
  }
  static Tensor<D, Bool> tril_mask(const Shape& s, std::int64_t offset, const Device& d) {
    return Tensor<D, Bool>(ops::tril_mask(s, offset, d));
  }

  // ---- accessors ----
  const Shape& shape() const { return t_.shape(); }
  std::array<std::size_t, D> dims() const {
    std::array<std::size_t, D> a{};
    for (std::size_t i = 0; i < D; ++i) a[i] = shape()[i];
    return a;
  }
  DType dtype() const { return t_.dtype(); }
  const Device& device() const { return t_.device(); }
  std::size_t num_elements() const { return t_.num_elements(); }
  TensorData to_data() const { return t_.to_data(); }
  template <class T>
  T into_scalar() const {
    EMBER_CHECK(num_elements() == 1,
                "into_scalar: expected one element, got shape " + shape().to_string());
    return to_data().template to_vector<T>()[0];
  }
  const DynTensor& dyn() const& { return t_; }
  DynTensor dyn() && { return std::move(t_); }

#define EMBER_UNARY(method, fn)                                              \
  Tensor method() const& { return Tensor(ops::unary(ir::UnaryFn::fn, t_)); } \
  Tensor method()&& { return Tensor(ops::unary(ir::UnaryFn::fn, std::move(t_))); }
#define EMBER_PREDICATE(method, fn) \
  Tensor<D, Bool> method() const& { return Tensor<D, Bool>(ops::unary(ir::UnaryFn::fn, t_)); }
#define EMBER_BINARY(method, fn)                                                      \
  Tensor method(const Tensor& o) const& {                                             \
    return Tensor(ops::binary(ir::BinaryFn::fn, t_, o.t_));                           \
  }                                                                                   \
  Tensor method(const Tensor& o)&& {                                                  \
    return Tensor(ops::binary(ir::BinaryFn::fn, std::move(t_), o.t_));                \
  }                                                                                   \
  Tensor method##_scalar(double s) const& {                                           \
    return Tensor(ops::binary_scalar(ir::BinaryFn::fn, t_, same_kind(s)));            \
  }                                                                                   \
  Tensor method##_scalar(double s)&& {                                                \
    return Tensor(ops::binary_scalar(ir::BinaryFn::fn, std::move(t_), same_kind(s))); \
  }
#define EMBER_COMPARE(method, fn)                                        \
  Tensor<D, Bool> method(const Tensor& o) const {                        \
    return Tensor<D, Bool>(ops::binary(ir::BinaryFn::fn, t_, o.t_));     \
  }                                                                      \
  Tensor<D, Bool> method##_elem(double s) const {                        \
    return Tensor<D, Bool>(ops::binary_scalar(ir::BinaryFn::fn, t_, s)); \
  }

  // ---- element-wise ----
  EMBER_BINARY(add, Add)
  EMBER_BINARY(sub, Sub)
  EMBER_BINARY(mul, Mul)
  EMBER_BINARY(div, Div)
  EMBER_BINARY(rem, Rem)
  EMBER_BINARY(pow, Pow)
  EMBER_BINARY(atan2, Atan2)
  EMBER_BINARY(hypot, Hypot)
  EMBER_BINARY(logaddexp, LogAddExp)
  EMBER_BINARY(xlogy, XLogY)
  EMBER_BINARY(maximum, Max)
  EMBER_BINARY(minimum, Min)
  EMBER_BINARY(bitwise_and, BitAnd)
  EMBER_BINARY(bitwise_or, BitOr)
  EMBER_BINARY(bitwise_xor, BitXor)
  EMBER_BINARY(bitwise_left_shift, Shl)
  EMBER_BINARY(bitwise_right_shift, Shr)
  EMBER_UNARY(neg, Neg)
  EMBER_UNARY(abs, Abs)
  EMBER_UNARY(sign, Sign)
  EMBER_UNARY(recip, Recip)
  EMBER_UNARY(square, Square)
  EMBER_UNARY(sqrt, Sqrt)
  EMBER_UNARY(rsqrt, Rsqrt)
  EMBER_UNARY(exp, Exp)
  EMBER_UNARY(log, Log)
  EMBER_UNARY(log1p, Log1p)
  EMBER_UNARY(expm1, Expm1)
  EMBER_UNARY(sin, Sin)
  EMBER_UNARY(cos, Cos)
  EMBER_UNARY(tan, Tan)
  EMBER_UNARY(sinh, Sinh)
  EMBER_UNARY(cosh, Cosh)
  EMBER_UNARY(tanh, Tanh)
  EMBER_UNARY(asin, Asin)
  EMBER_UNARY(acos, Acos)
  EMBER_UNARY(atan, Atan)
  EMBER_UNARY(asinh, Asinh)
  EMBER_UNARY(acosh, Acosh)
  EMBER_UNARY(atanh, Atanh)
  EMBER_UNARY(deg2rad, Deg2Rad)
  EMBER_UNARY(rad2deg, Rad2Deg)
  EMBER_UNARY(erf, Erf)
  EMBER_UNARY(erfc, Erfc)
  EMBER_UNARY(floor, Floor)
  EMBER_UNARY(ceil, Ceil)
  EMBER_UNARY(round, Round)
  EMBER_UNARY(trunc, Trunc)
  EMBER_UNARY(bitwise_not, BitNot)
  EMBER_PREDICATE(is_nan, IsNan)
  EMBER_PREDICATE(is_inf, IsInf)
  EMBER_PREDICATE(is_finite, IsFinite)
  Tensor powf(const Tensor& o) const { return pow(o); }
  Tensor powf_scalar(double e) const& { return Tensor(ops::unary(ir::UnaryFn::PowScalar, t_, e)); }
  Tensor powf_scalar(double e) && {
    return Tensor(ops::unary(ir::UnaryFn::PowScalar, std::move(t_), e));
  }
  Tensor powi_scalar(std::int64_t n) const { return Tensor(ops::powi(t_, n)); }
  Tensor clamp(double lo, double hi) const& { return Tensor(ops::clamp(t_, lo, hi)); }
  Tensor clamp(double lo, double hi) && { return Tensor(ops::clamp(std::move(t_), lo, hi)); }
  Tensor clamp_min(double lo) const { return Tensor(ops::clamp(t_, lo, std::nullopt)); }
  Tensor clamp_max(double hi) const { return Tensor(ops::clamp(t_, std::nullopt, hi)); }
  Tensor lerp(const Tensor& end, double weight) const {
    return Tensor(ops::lerp(t_, end.t_, weight));
  }
  Tensor mask_where(const Tensor<D, Bool>& mask, const Tensor& value) const {
    return Tensor(ops::mask_where(mask.dyn(), value.t_, t_));
  }
  Tensor mask_fill(const Tensor<D, Bool>& mask, double value) const& {
    return Tensor(ops::mask_fill(t_, mask.dyn(), value));
  }
  Tensor mask_fill(const Tensor<D, Bool>& mask, double value) && {
    return Tensor(ops::mask_fill(std::move(t_), mask.dyn(), value));
  }

  // ---- comparisons and logic ----
  EMBER_COMPARE(equal, Eq)
  EMBER_COMPARE(not_equal, Ne)
  EMBER_COMPARE(greater, Gt)
  EMBER_COMPARE(greater_equal, Ge)
  EMBER_COMPARE(lower, Lt)
  EMBER_COMPARE(lower_equal, Le)
  Tensor bool_not() const { return Tensor(ops::unary(ir::UnaryFn::LogicalNot, t_)); }
  Tensor bool_and(const Tensor& o) const {
    return Tensor(ops::binary(ir::BinaryFn::And, t_, o.t_));
  }
  Tensor bool_or(const Tensor& o) const { return Tensor(ops::binary(ir::BinaryFn::Or, t_, o.t_)); }
  Tensor bool_xor(const Tensor& o) const {
    return Tensor(ops::binary(ir::BinaryFn::Xor, t_, o.t_));
  }
  Tensor<1, Bool> any() const { return Tensor<1, Bool>(ops::any(t_)); }
  Tensor<1, Bool> all() const { return Tensor<1, Bool>(ops::all(t_)); }
  Tensor<D, Bool> any_dim(std::int64_t d) const {
    return Tensor<D, Bool>(ops::reduce(ir::ReduceFn::Any, t_, d));
  }
  Tensor<D, Bool> all_dim(std::int64_t d) const {
    return Tensor<D, Bool>(ops::reduce(ir::ReduceFn::All, t_, d));
  }

  // ---- reductions ----
#define EMBER_REDUCE(method, fn)                                                              \
  Tensor<1, K> method() const { return Tensor<1, K>(ops::reduce_all(ir::ReduceFn::fn, t_)); } \
  Tensor method##_dim(std::int64_t d) const { return Tensor(ops::reduce(ir::ReduceFn::fn, t_, d)); }
  EMBER_REDUCE(sum, Sum)
  EMBER_REDUCE(mean, Mean)
  EMBER_REDUCE(prod, Prod)
  EMBER_REDUCE(max, Max)
  EMBER_REDUCE(min, Min)
#undef EMBER_REDUCE
  // Over several dims at once: kept with extent 1, or removed by the _squeeze form (D2 the
  // rank left).
#define EMBER_REDUCE_DIMS(method, fn)                                              \
  Tensor method##_dims(const std::vector<std::int64_t>& ds) const {                \
    return Tensor(ops::reduce_dims(ir::ReduceFn::fn, t_, ds));                     \
  }                                                                                \
  template <std::size_t D2>                                                        \
  Tensor<D2, K> method##_dims_squeeze(const std::vector<std::int64_t>& ds) const { \
    return Tensor<D2, K>(ops::reduce_dims_squeeze(ir::ReduceFn::fn, t_, ds));      \
  }
  EMBER_REDUCE_DIMS(sum, Sum)
  EMBER_REDUCE_DIMS(mean, Mean)
  EMBER_REDUCE_DIMS(prod, Prod)
  EMBER_REDUCE_DIMS(max, Max)
  EMBER_REDUCE_DIMS(min, Min)
#undef EMBER_REDUCE_DIMS
  Tensor<1, K> max_abs() const { return Tensor<1, K>(ops::max_abs(t_)); }
  Tensor max_abs_dim(std::int64_t d) const { return Tensor(ops::max_abs_dim(t_, d)); }
  Tensor<1, Int> argmax() const {
    return Tensor<1, Int>(ops::reduce_all(ir::ReduceFn::ArgMax, t_));
  }
  Tensor<1, Int> argmin() const {
    return Tensor<1, Int>(ops::reduce_all(ir::ReduceFn::ArgMin, t_));
  }
  Tensor<D, Int> argmax_dim(std::int64_t d) const {
    return Tensor<D, Int>(ops::reduce(ir::ReduceFn::ArgMax, t_, d));
  }
  Tensor<D, Int> argmin_dim(std::int64_t d) const {
    return Tensor<D, Int>(ops::reduce(ir::ReduceFn::ArgMin, t_, d));
  }
  std::pair<Tensor, Tensor<D, Int>> max_dim_with_indices(std::int64_t d) const {
    auto [v, i] = ops::max_dim_with_indices(t_, d);
    return {Tensor(std::move(v)), Tensor<D, Int>(std::move(i))};
  }
  std::pair<Tensor, Tensor<D, Int>> min_dim_with_indices(std::int64_t d) const {
    auto [v, i] = ops::min_dim_with_indices(t_, d);
    return {Tensor(std::move(v)), Tensor<D, Int>(std::move(i))};
  }
  Tensor var(std::int64_t d, std::size_t correction = 1) const {
    return Tensor(ops::var(t_, d, correction));
  }
  std::pair<Tensor, Tensor> var_mean(std::int64_t d, std::size_t correction = 1) const {
    auto [v, m] = ops::var_mean(t_, d, correction);
    return {Tensor(std::move(v)), Tensor(std::move(m))};
  }
  Tensor logsumexp_dim(std::int64_t d) const { return Tensor(ops::logsumexp(t_, d)); }
  Tensor cumsum(std::int64_t d) const { return Tensor(ops::scan(ir::ScanFn::Sum, t_, d)); }
  Tensor cumprod(std::int64_t d) const { return Tensor(ops::scan(ir::ScanFn::Prod, t_, d)); }
  Tensor cummax(std::int64_t d) const { return Tensor(ops::scan(ir::ScanFn::Max, t_, d)); }
  Tensor cummin(std::int64_t d) const { return Tensor(ops::scan(ir::ScanFn::Min, t_, d)); }
  std::pair<Tensor, Tensor<D, Int>> cummax_with_indices(std::int64_t d) const {
    auto [v, i] = ops::cummax_with_indices(t_, d);
    return {Tensor(std::move(v)), Tensor<D, Int>(std::move(i))};
  }
  std::pair<Tensor, Tensor<D, Int>> cummin_with_indices(std::int64_t d) const {
    auto [v, i] = ops::cummin_with_indices(t_, d);
    return {Tensor(std::move(v)), Tensor<D, Int>(std::move(i))};
  }
  // torch.searchsorted with this tensor as the sorted sequence.
  template <std::size_t D2>
  Tensor<D2, Int> searchsorted(const Tensor<D2, K>& values, bool right = false) const {
    return Tensor<D2, Int>(ops::searchsorted(t_, values.dyn(), right));
  }
  template <class K2>
  Tensor<D, Int> bucketize(const Tensor<1, K2>& boundaries, bool right = false) const {
    return Tensor<D, Int>(ops::bucketize(t_, boundaries.dyn(), right));
  }
  Tensor<1, K> histc(std::size_t bins = 100, double min = 0, double max = 0) const {
    return Tensor<1, K>(ops::histc(t_, bins, min, max));
  }

  // ---- sorting ----
  Tensor sort(std::int64_t d, bool descending = false) const {
    return Tensor(ops::sort(t_, d, descending));
  }
  Tensor<D, Int> argsort(std::int64_t d, bool descending = false) const {
    return Tensor<D, Int>(ops::argsort(t_, d, descending));
  }
  std::pair<Tensor, Tensor<D, Int>> sort_with_indices(std::int64_t d,
                                                      bool descending = false) const {
    auto [v, i] = ops::sort_with_indices(t_, d, descending);
    return {Tensor(std::move(v)), Tensor<D, Int>(std::move(i))};
  }
  Tensor topk(std::size_t k, std::int64_t d) const { return Tensor(ops::topk(t_, k, d)); }
  std::pair<Tensor, Tensor<D, Int>> topk_with_indices(std::size_t k, std::int64_t d) const {
    auto [v, i] = ops::topk_with_indices(t_, k, d);
    return {Tensor(std::move(v)), Tensor<D, Int>(std::move(i))};
  }

  // ---- layout ----
  template <std::size_t D2>
  Tensor<D2, K> reshape(const Shape& s) const& {
    return Tensor<D2, K>(ops::reshape(t_, s));
  }
  template <std::size_t D2>
  Tensor<D2, K> reshape(const Shape& s) && {
    return Tensor<D2, K>(ops::reshape(std::move(t_), s));
  }
  // One entry may be -1 (inferred), as PyTorch.
  template <std::size_t D2>
  Tensor<D2, K> reshape(const std::array<std::int64_t, D2>& s) const {
    return Tensor<D2, K>(ops::reshape(t_, std::vector<std::int64_t>(s.begin(), s.end())));
  }
  Tensor permute(const std::array<std::int64_t, D>& axes) const {
    return Tensor(ops::permute(t_, std::vector<std::int64_t>(axes.begin(), axes.end())));
  }
  Tensor swap_dims(std::int64_t a, std::int64_t b) const {
    return Tensor(ops::swap_dims(t_, a, b));
  }
  Tensor transpose() const { return Tensor(ops::transpose(t_)); }
  Tensor flip(const std::vector<std::int64_t>& axes) const { return Tensor(ops::flip(t_, axes)); }
  template <std::size_t D2>
  Tensor<D2, K> expand(const Shape& s) const {
    return Tensor<D2, K>(ops::expand(t_, s));
  }
  Tensor repeat(const std::vector<std::size_t>& times) const {
    return Tensor(ops::repeat(t_, times));
  }
  Tensor repeat_dim(std::int64_t d, std::size_t times) const {
    return Tensor(ops::repeat_dim(t_, d, times));
  }
  template <std::size_t D2>
  Tensor<D2, K> squeeze(std::int64_t d) const {
    return Tensor<D2, K>(ops::squeeze(t_, d));
  }
  template <std::size_t D2 = D + 1>
  Tensor<D2, K> unsqueeze() const {  // new leading dims, as Burn
    DynTensor r = t_;
    for (std::size_t i = D; i < D2; ++i) r = ops::unsqueeze(std::move(r), 0);
    return Tensor<D2, K>(std::move(r));
  }
  template <std::size_t D2 = D + 1>
  Tensor<D2, K> unsqueeze_dim(std::int64_t d) const {
    return Tensor<D2, K>(ops::unsqueeze(t_, d));
  }
  template <std::size_t D2>
  Tensor<D2, K> flatten(std::int64_t start, std::int64_t end) const {
    return Tensor<D2, K>(ops::flatten(t_, start, end));
  }
  Tensor narrow(std::int64_t d, std::int64_t start, std::size_t len) const {
    return Tensor(ops::narrow(t_, d, start, len));
  }
  Tensor slice(const std::vector<Range>& ranges) const { return Tensor(ops::slice(t_, ranges)); }
  Tensor slice_assign(const std::vector<Range>& ranges, const Tensor& v) const& {
    return Tensor(ops::slice_assign(t_, ranges, v.t_));
  }
  Tensor slice_assign(const std::vector<Range>& ranges, const Tensor& v) && {
    return Tensor(ops::slice_assign(std::move(t_), ranges, v.t_));
  }
  Tensor slice_fill(const std::vector<Range>& ranges, double v) const {
    return Tensor(ops::slice_fill(t_, ranges, v));
  }
  static Tensor cat(const std::vector<Tensor>& xs, std::int64_t d) {
    return Tensor(ops::cat(dyns(xs), d));
  }
  template <std::size_t D2 = D + 1>
  static Tensor<D2, K> stack(const std::vector<Tensor>& xs, std::int64_t d) {
    return Tensor<D2, K>(ops::stack(dyns(xs), d));
  }
  std::vector<Tensor> split(std::size_t size, std::int64_t d) const {
    return wrap_all(ops::split(t_, size, d));
  }
  std::vector<Tensor> split_with_sizes(const std::vector<std::size_t>& sizes,
                                       std::int64_t d) const {
    return wrap_all(ops::split_sizes(t_, sizes, d));
  }
  std::vector<Tensor> chunk(std::size_t n, std::int64_t d) const {
    return wrap_all(ops::chunk(t_, n, d));
  }
  Tensor pad(const std::vector<std::pair<std::size_t, std::size_t>>& pads,
             ops::PadMode mode = ops::PadMode::Constant, double value = 0.0) const {
    return Tensor(ops::pad(t_, pads, mode, value));
  }
  Tensor movedim(const std::vector<std::int64_t>& source,
                 const std::vector<std::int64_t>& destination) const {
    return Tensor(ops::movedim(t_, source, destination));
  }
  Tensor movedim(std::int64_t source, std::int64_t destination) const {
    return Tensor(ops::movedim(t_, {source}, {destination}));
  }
  Tensor roll(const std::vector<std::int64_t>& shifts, const std::vector<std::int64_t>& ds) const {
    return Tensor(ops::roll(t_, shifts, ds));
  }
  Tensor roll_dim(std::int64_t shift, std::int64_t d) const {
    return Tensor(ops::roll(t_, {shift}, {d}));
  }
  Tensor tril(std::int64_t diagonal = 0) const { return Tensor(ops::tril(t_, diagonal)); }
  Tensor triu(std::int64_t diagonal = 0) const { return Tensor(ops::triu(t_, diagonal)); }

  // ---- indexing ----
  Tensor select(std::int64_t d, const Tensor<1, Int>& idx) const {
    return Tensor(ops::select(t_, d, idx.dyn()));
  }
  Tensor select_assign(std::int64_t d, const Tensor<1, Int>& idx, const Tensor& v) const {
    return Tensor(ops::select_assign(t_, d, idx.dyn(), v.t_));
  }
  Tensor gather(std::int64_t d, const Tensor<D, Int>& idx) const {
    return Tensor(ops::gather(t_, d, idx.dyn()));
  }
  Tensor scatter(std::int64_t d, const Tensor<D, Int>& idx, const Tensor& v) const {
    return Tensor(ops::scatter(t_, d, idx.dyn(), v.t_));
  }
  Tensor scatter_add(std::int64_t d, const Tensor<D, Int>& idx, const Tensor& v) const {
    return Tensor(ops::scatter_add(t_, d, idx.dyn(), v.t_));
  }
  template <std::size_t D2 = D + 1, class K2 = K>
  Tensor<D2, K2> one_hot(std::size_t num_classes) const {
    static_assert(K::kind == Kind::Int, "one_hot takes an Int tensor");
    const DType dt = K2::kind == Kind::Float ? device().default_float() : device().default_int();
    return Tensor<D2, K2>(ops::one_hot(t_, num_classes, dt));
  }
  // Burn's one_hot_fill: K2 picks the result's kind (the device's default dtype of it).
  template <std::size_t D2 = D + 1, class K2 = Float>
  Tensor<D2, K2> one_hot_fill(std::size_t num_classes, double on_value, double off_value,
                              std::int64_t axis = -1) const {
    const DType dt = K2::kind == Kind::Float ? device().default_float()
                     : K2::kind == Kind::Int ? device().default_int()
                                             : DType::Bool;
    return Tensor<D2, K2>(ops::one_hot_fill(t_, num_classes, on_value, off_value, axis, dt));
  }
  template <std::size_t D2, class K2>
  Tensor<D2, K> take(const Tensor<D2, K2>& indices) const {
    return Tensor<D2, K>(ops::take(t_, indices.dyn()));
  }
  Tensor<2, Int> nonzero() const { return Tensor<2, Int>(ops::nonzero(t_)); }

  // ---- compute, types, devices ----
  Tensor matmul(const Tensor& o) const { return Tensor(ops::matmul(t_, o.t_)); }
  Tensor cross(const Tensor& o, std::int64_t d = -1) const {
    return Tensor(ops::cross(t_, o.t_, d));
  }
  // torch.diag: rank 1 -> rank 2, rank 2 -> rank 1.
  Tensor<D == 1 ? 2 : 1, K> diag(std::int64_t diagonal = 0) const {
    static_assert(D == 1 || D == 2, "diag takes a tensor of rank 1 or 2");
    return Tensor < D == 1 ? 2 : 1, K > (ops::diag(t_, diagonal));
  }
  Tensor<D + 1, K> diag_embed(std::int64_t offset = 0) const {
    return Tensor<D + 1, K>(ops::diag_embed(t_, offset));
  }
  Tensor<1, K> trace() const {
    static_assert(D == 2, "trace takes a matrix");
    return Tensor<1, K>(ops::trace(t_));
  }
  // torch.linalg.vector_norm over every element (rank 1) or over dims (kept).
  Tensor<1, K> vector_norm(double ord = 2.0) const {
    return Tensor<1, K>(ops::vector_norm(t_, ord));
  }
  Tensor vector_norm_dims(double ord, const std::vector<std::int64_t>& ds) const {
    return Tensor(ops::vector_norm(t_, ord, ds));
  }
  Tensor matrix_norm(ops::MatrixNorm ord = ops::MatrixNorm::Frobenius) const {
    return Tensor(ops::matrix_norm(t_, ord));
  }
  Tensor cast(DType to) const { return Tensor(ops::cast(t_, to)); }
  Tensor<D, Float> float_() const {
    return Tensor<D, Float>(ops::cast(t_, device().default_float()));
  }
  Tensor<D, Int> int_() const { return Tensor<D, Int>(ops::cast(t_, device().default_int())); }
  Tensor<D, Bool> bool_() const { return Tensor<D, Bool>(ops::cast(t_, DType::Bool)); }
  Tensor to_device(const Device& d) const { return Tensor(ops::to_device(t_, d)); }

  // ---- autodiff (meaningful on an autodiff device) ----
  Tensor require_grad() const;
  bool is_require_grad() const;
  Tensor detach() const;
  Gradients backward() const;
  std::optional<Tensor> grad(const Gradients& grads) const;
  std::optional<Tensor> grad_remove(Gradients& grads) const;
  Tensor inner() const;
  static Tensor from_inner(const Tensor& t);  // onto t.device().autodiff()
  static Tensor from_inner(const Tensor& t, const Device& autodiff_device);

  // ---- operators ----
  friend Tensor operator+(const Tensor& a, const Tensor& b) { return a.add(b); }
  friend Tensor operator-(const Tensor& a, const Tensor& b) { return a.sub(b); }
  friend Tensor operator*(const Tensor& a, const Tensor& b) { return a.mul(b); }
  friend Tensor operator/(const Tensor& a, const Tensor& b) { return a.div(b); }
  friend Tensor operator%(const Tensor& a, const Tensor& b) { return a.rem(b); }
  friend Tensor operator+(Tensor&& a, const Tensor& b) { return std::move(a).add(b); }
  friend Tensor operator-(Tensor&& a, const Tensor& b) { return std::move(a).sub(b); }
  friend Tensor operator*(Tensor&& a, const Tensor& b) { return std::move(a).mul(b); }
  friend Tensor operator/(Tensor&& a, const Tensor& b) { return std::move(a).div(b); }
  friend Tensor operator+(const Tensor& a, double s) { return a.add_scalar(s); }
  friend Tensor operator-(const Tensor& a, double s) { return a.sub_scalar(s); }
  friend Tensor operator*(const Tensor& a, double s) { return a.mul_scalar(s); }
  friend Tensor operator/(const Tensor& a, double s) { return a.div_scalar(s); }
  friend Tensor operator+(Tensor&& a, double s) { return std::move(a).add_scalar(s); }
  friend Tensor operator-(Tensor&& a, double s) { return std::move(a).sub_scalar(s); }
  friend Tensor operator*(Tensor&& a, double s) { return std::move(a).mul_scalar(s); }
  friend Tensor operator/(Tensor&& a, double s) { return std::move(a).div_scalar(s); }
  friend Tensor operator+(double s, const Tensor& a) { return a.add_scalar(s); }
  friend Tensor operator*(double s, const Tensor& a) { return a.mul_scalar(s); }
  friend Tensor operator-(double s, const Tensor& a) {
    return Tensor(ops::rbinary_scalar(ir::BinaryFn::Sub, a.same_kind(s), a.t_));
  }
  friend Tensor operator/(double s, const Tensor& a) {
    return Tensor(ops::rbinary_scalar(ir::BinaryFn::Div, a.same_kind(s), a.t_));
  }
  Tensor operator-() const& { return neg(); }
  Tensor operator-() && { return std::move(*this).neg(); }

#undef EMBER_UNARY
#undef EMBER_PREDICATE
#undef EMBER_BINARY
#undef EMBER_COMPARE

 private:
  // The typed API keeps an op's kind: an Int tensor's arithmetic takes integral scalars
  // (ops::binary_scalar would compute a fractional one in f32, Note [Scalar promotion]).
  static double same_kind(double s) {
    if constexpr (K::kind == Kind::Int) {
      EMBER_CHECK(std::isfinite(s) && std::trunc(s) == s,
                  "Tensor<" + std::to_string(D) + ", int>: the scalar " + std::to_string(s) +
                      " is not an integer; cast the tensor to a float kind first");
    }
    return s;
  }
  static std::vector<DynTensor> dyns(const std::vector<Tensor>& xs) {
    std::vector<DynTensor> v;
    v.reserve(xs.size());
    for (const auto& x : xs) v.push_back(x.t_);
    return v;
  }
  static std::vector<Tensor> wrap_all(std::vector<DynTensor> xs) {
    std::vector<Tensor> v;
    v.reserve(xs.size());
    for (auto& x : xs) v.emplace_back(std::move(x));
    return v;
  }
  DynTensor t_;
};

}  // namespace ember

// The autodiff method definitions need Gradients complete; gradients.hpp includes this
// header first, so either include order works.
#include "ember/tensor/gradients.hpp"
