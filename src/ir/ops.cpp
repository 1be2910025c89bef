#include "ember/ir/ops.hpp"

#include <array>
#include <iterator>
#include <type_traits>
#include <utility>

#include "ember/base/error.hpp"

namespace ember::ir {

// name(UnaryFn) and name(BinaryFn) come from the element-wise table (scalar_expr.cpp).

const char* name(ReduceFn f) {
  static const char* const names[] = {"sum",    "prod",   "mean", "max", "min",
                                      "argmax", "argmin", "any",  "all"};
  static_assert(std::size(names) == static_cast<std::size_t>(ReduceFn::Count_));
  return names[static_cast<std::size_t>(f)];
}

const char* name(ScanFn f) {
  static const char* const names[] = {"cumsum", "cumprod", "cummax", "cummin"};
  static_assert(std::size(names) == static_cast<std::size_t>(ScanFn::Count_));
  return names[static_cast<std::size_t>(f)];
}

const char* name(OpClass c) {
  switch (c) {
    case OpClass::ElementWise:
      return "element-wise";
    case OpClass::Reduction:
      return "reduction";
    case OpClass::View:
      return "view";
    case OpClass::DataMovement:
      return "data movement";
    case OpClass::Compute:
      return "compute";
    case OpClass::Creation:
      return "creation";
  }
  return "?";
}

const char* name(PoolFn f) {
  static const char* const names[] = {"max_pool", "sum_pool"};
  static_assert(std::size(names) == static_cast<std::size_t>(PoolFn::Count_));
  return names[static_cast<std::size_t>(f)];
}

const char* name(ConvPass p) {
  static const char* const names[] = {"forward", "input_grad", "weight_grad"};
  static_assert(std::size(names) == static_cast<std::size_t>(ConvPass::Count_));
  return names[static_cast<std::size_t>(p)];
}

// Every enumerator of OpKind is its struct's variant index (both come from EMBER_IR_OPS).
#define EMBER_IR_CHECK_KIND(T) static_assert(kind_v<T> == OpKind::T);
EMBER_IR_OPS(EMBER_IR_CHECK_KIND)
#undef EMBER_IR_CHECK_KIND

namespace {

// A table over OpKind of one trait of each op struct.
template <class R, class F>
constexpr auto per_kind(F trait) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return std::array<R, kNumOps>{
        trait(std::type_identity<std::variant_alternative_t<I, Op>>{})...};
  }
  (std::make_index_sequence<kNumOps>{});
}

constexpr auto kNames = per_kind<const char*>([](auto t) { return decltype(t)::type::kName; });
constexpr auto kClasses = per_kind<OpClass>([](auto t) { return decltype(t)::type::kClass; });
constexpr auto kArithmetic = per_kind<bool>([](auto t) { return decltype(t)::type::kArithmetic; });

}  // namespace

const char* name(OpKind k) { return kNames[static_cast<std::size_t>(k)]; }
OpClass op_class(OpKind k) { return kClasses[static_cast<std::size_t>(k)]; }
bool is_arithmetic(OpKind k) { return kArithmetic[static_cast<std::size_t>(k)]; }

std::size_t operand_count(const Op& op) {
  return std::visit(
      [](const auto& o) { return std::size(std::remove_cvref_t<decltype(o)>::handles(o)); }, op);
}

Handle& operand(Op& op, std::size_t i) {
  return std::visit(
      [i](auto& o) -> Handle& {
        auto hs = std::remove_cvref_t<decltype(o)>::handles(o);
        EMBER_ASSERT(i < std::size(hs));
        return detail::deref(hs[i]);
      },
      op);
}

const Handle& operand(const Op& op, std::size_t i) {
  return std::visit(
      [i](const auto& o) -> const Handle& {
        auto hs = std::remove_cvref_t<decltype(o)>::handles(o);
        EMBER_ASSERT(i < std::size(hs));
        return detail::deref(hs[i]);
      },
      op);
}

}  // namespace ember::ir
