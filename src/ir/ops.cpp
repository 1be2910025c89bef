#include "ember/ir/ops.hpp"

#include <type_traits>

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

const char* name(OpKind k) {
  static const char* const names[] = {
      "Unary",   "Binary",  "Where",       "Cast",      "Reduce", "Scan",        "Matmul",
      "Reshape", "Permute", "Expand",      "Slice",     "Flip",   "SliceAssign", "Cat",
      "Gather",  "Scatter", "IndexSelect", "IndexAdd",  "Sort",   "Nonzero",     "Fill",
      "Arange",  "Random",  "Softmax",     "LayerNorm", "Unfold", "Fold",        "Pool"};
  static_assert(std::size(names) == static_cast<std::size_t>(OpKind::Count_));
  static_assert(std::variant_size_v<Op> == static_cast<std::size_t>(OpKind::Count_));
  return names[static_cast<std::size_t>(k)];
}

OpClass op_class(OpKind k) {
  switch (k) {
    case OpKind::Unary:
    case OpKind::Binary:
    case OpKind::Where:
    case OpKind::Cast:
      return OpClass::ElementWise;
    case OpKind::Reduce:
    case OpKind::Scan:
    case OpKind::Softmax:
    case OpKind::LayerNorm:
    case OpKind::Pool:
      return OpClass::Reduction;
    case OpKind::Matmul:
    case OpKind::Sort:
      return OpClass::Compute;
    case OpKind::Reshape:
    case OpKind::Permute:
    case OpKind::Expand:
    case OpKind::Slice:
    case OpKind::Flip:
      return OpClass::View;
    case OpKind::Fill:
    case OpKind::Arange:
    case OpKind::Random:
      return OpClass::Creation;
    default:
      return OpClass::DataMovement;
  }
}

std::size_t window_positions(std::size_t in, std::size_t kernel, std::size_t stride,
                             std::size_t padding, std::size_t dilation) {
  return (in + 2 * padding - dilation * (kernel - 1) - 1) / stride + 1;
}

std::vector<const Handle*> operands(const Op& op) {
  std::vector<const Handle*> out;
  std::visit(
      [&](const auto& o) {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, Unary> || std::is_same_v<T, Cast> ||
                      std::is_same_v<T, Reduce> || std::is_same_v<T, Scan> ||
                      std::is_same_v<T, Reshape> || std::is_same_v<T, Permute> ||
                      std::is_same_v<T, Expand> || std::is_same_v<T, Slice> ||
                      std::is_same_v<T, Flip> || std::is_same_v<T, Sort> ||
                      std::is_same_v<T, Nonzero> || std::is_same_v<T, Softmax> ||
                      std::is_same_v<T, Unfold> || std::is_same_v<T, Fold> ||
                      std::is_same_v<T, Pool>) {
          out.push_back(&o.x);
        } else if constexpr (std::is_same_v<T, LayerNorm>) {
          out = {&o.x, &o.weight, &o.bias};
        } else if constexpr (std::is_same_v<T, Binary>) {
          out = {&o.lhs, &o.rhs};
        } else if constexpr (std::is_same_v<T, Where>) {
          out = {&o.cond, &o.a, &o.b};
        } else if constexpr (std::is_same_v<T, Matmul>) {
          out = {&o.a, &o.b};
        } else if constexpr (std::is_same_v<T, SliceAssign>) {
          out = {&o.x, &o.value};
        } else if constexpr (std::is_same_v<T, Cat>) {
          for (const auto& h : o.xs) out.push_back(&h);
        } else if constexpr (std::is_same_v<T, Gather> || std::is_same_v<T, IndexSelect>) {
          out = {&o.x, &o.index};
        } else if constexpr (std::is_same_v<T, Scatter> || std::is_same_v<T, IndexAdd>) {
          out = {&o.x, &o.index, &o.src};
        }
      },
      op);
  return out;
}

}  // namespace ember::ir
