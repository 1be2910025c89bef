// The module system: parameters (nn::Param), buffers (nn::Buffer) and EMBER_MODULE, which
// lets generic code — optimizers, records, device moves, summaries — walk every tensor of
// a model by its dotted path ("blocks.3.fc.bias") while the model stays a plain aggregate
// struct. docs/nn.md is the reference; the contract is DESIGN §2.2.
//
// Note [Visiting tensors]
// A model is a tree. Its nodes are: modules (structs with EMBER_MODULE, or types with the
// ember_visit / ember_map / ember_summarize hooks, such as nn::Sequential), Param and
// Buffer leaves, and containers of nodes (std::vector and std::array add the element's
// index to the path, std::optional adds nothing and is skipped when empty). Any other
// member (a size, an enum, a config) is kept as it is and never visited. visit hands every
// leaf to a callback as a TensorEntry; map hands a mutable TensorEntry and writes back what
// the callback left in it (tensor, id, trainable). Paths equal PyTorch's state_dict keys
// for a struct that mirrors the PyTorch module.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <memory>
#include <mutex>  // std::lock_guard (over ember::Mutex)
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

#include "ember/base/config.hpp"
#include "ember/base/error.hpp"
#include "ember/nn/preprocessor.hpp"
#include "ember/tensor/gradients.hpp"
#include "ember/tensor/tensor.hpp"

namespace ember::nn {

// A parameter's identity: fresh (and never 0) for each new Param, kept when the Param is
// mapped, moved to another device or loaded from a record. Optimizers key their state by it.
using ParamId = std::uint64_t;
ParamId fresh_param_id();

enum class TensorRole : std::uint8_t { Param, Buffer };
const char* name(TensorRole role);

// One tensor of a module, as visit and map see it.
struct TensorEntry {
  std::string_view path;  // dotted, from the module visited: "layers.0.weight"
  TensorRole role;
  ParamId id;        // a param's id (map may set it, e.g. to a record's); 0 for a buffer
  DynTensor tensor;  // map: replace it to change the module's tensor
  bool trainable;    // a param that is not frozen; always false for a buffer
  bool scalar;       // a one-element buffer that files store with shape [] (num_batches_tracked)

  const Shape& shape() const { return tensor.shape(); }
  DType dtype() const { return tensor.dtype(); }
  bool is_param() const { return role == TensorRole::Param; }
  bool is_buffer() const { return role == TensorRole::Buffer; }
};

using VisitFn = std::function<void(const TensorEntry&)>;
using MapFn = std::function<void(TensorEntry&)>;

class SummaryBuilder;

namespace detail {
// A param's tensor as a module holds it: on an autodiff device a trainable param is a
// require_grad leaf and a frozen one is detached; elsewhere it is unchanged.
DynTensor prepare_param(DynTensor t, bool trainable);
// A buffer's tensor is never part of a graph.
DynTensor prepare_buffer(DynTensor t);
// Checks what a mapper left in an entry: rank `rank`, kind `kind`; throws naming the path.
void check_mapped(const TensorEntry& e, std::size_t rank, Kind kind);
std::ostream& write_summary(std::ostream& os, const std::string& summary);
template <std::size_t N>
std::vector<std::size_t> to_vec(const std::array<std::size_t, N>& a) {
  return {a.begin(), a.end()};
}
}  // namespace detail

template <class T>
class Param;

// A trainable tensor of a module: val() is the tensor, id() its stable ParamId.
template <std::size_t D>
class Param<Tensor<D>> {
 public:
  using tensor_type = Tensor<D>;

  explicit Param(Tensor<D> value, bool trainable = true)
      : Param(fresh_param_id(), std::move(value), trainable) {}
  Param(ParamId id, Tensor<D> value, bool trainable = true)
      : id_(id),
        trainable_(trainable),
        value_(detail::prepare_param(std::move(value).dyn(), trainable)) {}

  const Tensor<D>& val() const { return value_; }
  ParamId id() const { return id_; }
  bool is_trainable() const { return trainable_; }
  const Shape& shape() const { return value_.shape(); }
  // The same param (same id and trainability) holding v.
  Param with_value(Tensor<D> v) const { return Param(id_, std::move(v), trainable_); }

  // Module-system hooks (Note [Visiting tensors]).
  void ember_visit(const std::string& path, const VisitFn& f) const {
    f(TensorEntry{path, TensorRole::Param, id_, value_.dyn(), trainable_, false});
  }
  void ember_map(const std::string& path, const MapFn& f) {
    TensorEntry e{path, TensorRole::Param, id_, value_.dyn(), trainable_, false};
    f(e);
    detail::check_mapped(e, D, Kind::Float);
    value_ = Tensor<D>(detail::prepare_param(std::move(e.tensor), e.trainable));
    id_ = e.id;
    trainable_ = e.trainable;
  }
  void ember_summarize(const std::string& path, SummaryBuilder& b) const;

 private:
  ParamId id_;
  bool trainable_;
  Tensor<D> value_;
};

// Note [Running state]
// A buffer is module state that is not trained: batch norm's running statistics. Forwards
// are const, yet batch norm in training mode must update its statistics, so a Buffer's
// value lives in a slot that a const method may replace (under a mutex, so concurrent
// forwards are safe). Copying a Buffer copies the value into a new slot: a copied model
// never shares running state with the original.
template <class T>
class Buffer;

template <std::size_t D, class K>
class Buffer<Tensor<D, K>> {
 public:
  using tensor_type = Tensor<D, K>;

  // scalar: a one-element buffer that records store with shape [].
  explicit Buffer(Tensor<D, K> value, bool scalar = false)
      : slot_(std::make_unique<Slot>(Tensor<D, K>(detail::prepare_buffer(std::move(value).dyn())))),
        scalar_(scalar) {
    EMBER_CHECK(!scalar || slot_->value.num_elements() == 1,
                "nn::Buffer: a scalar buffer holds one element, got shape " +
                    slot_->value.shape().to_string());
  }
  Buffer(const Buffer& o) : slot_(std::make_unique<Slot>(o.val())), scalar_(o.scalar_) {}
  Buffer& operator=(const Buffer& o) {
    if (this != &o) {
      slot_ = std::make_unique<Slot>(o.val());
      scalar_ = o.scalar_;
    }
    return *this;
  }
  Buffer(Buffer&&) noexcept = default;
  Buffer& operator=(Buffer&&) noexcept = default;

  Tensor<D, K> val() const {
    std::lock_guard<Mutex> lock(slot_->mutex);
    return slot_->value;
  }
  // Replaces the value (interior state: callable from a const forward). The new value must
  // keep the shape; it is detached from any graph.
  void set(Tensor<D, K> v) const {
    EMBER_CHECK(v.shape() == slot_->value.shape(),
                "nn::Buffer::set: shape " + v.shape().to_string() + " differs from the buffer's " +
                    slot_->value.shape().to_string());
    Tensor<D, K> prepared(detail::prepare_buffer(std::move(v).dyn()));
    std::lock_guard<Mutex> lock(slot_->mutex);
    slot_->value = std::move(prepared);
  }
  bool is_scalar() const { return scalar_; }
  Shape shape() const { return val().shape(); }

  // Module-system hooks (Note [Visiting tensors]).
  void ember_visit(const std::string& path, const VisitFn& f) const {
    f(TensorEntry{path, TensorRole::Buffer, 0, val().dyn(), false, scalar_});
  }
  void ember_map(const std::string& path, const MapFn& f) {
    TensorEntry e{path, TensorRole::Buffer, 0, val().dyn(), false, scalar_};
    f(e);
    detail::check_mapped(e, D, K::kind);
    EMBER_CHECK(!scalar_ || e.tensor.num_elements() == 1,
                "nn::map: '" + path + "' is a scalar buffer; the mapper gave shape " +
                    e.tensor.shape().to_string());
    Tensor<D, K> prepared(detail::prepare_buffer(std::move(e.tensor)));
    std::lock_guard<Mutex> lock(slot_->mutex);
    slot_->value = std::move(prepared);
  }
  void ember_summarize(const std::string& path, SummaryBuilder& b) const;

 private:
  struct Slot {
    explicit Slot(Tensor<D, K> v) : value(std::move(v)) {}
    Mutex mutex;
    Tensor<D, K> value;
  };
  std::unique_ptr<Slot> slot_;
  bool scalar_;
};

// Collects the rows of a module summary (see nn::summary); modules with their own hooks
// (nn::Sequential) call it directly.
class SummaryBuilder {
 public:
  void begin_module(const std::string& path, std::string_view type);
  void end_module();
  void tensor(const std::string& path, const TensorEntry& e);
  std::string str() const;

 private:
  struct Row {
    std::size_t depth;
    std::string path, name, type;
    std::vector<std::string> tensors;
    std::size_t params = 0, trainable = 0, buffers = 0;
  };
  std::vector<Row> rows_;
  std::vector<std::size_t> open_;
};

template <std::size_t D>
void Param<Tensor<D>>::ember_summarize(const std::string& path, SummaryBuilder& b) const {
  ember_visit(path, [&](const TensorEntry& e) { b.tensor(path, e); });
}
template <std::size_t D, class K>
void Buffer<Tensor<D, K>>::ember_summarize(const std::string& path, SummaryBuilder& b) const {
  ember_visit(path, [&](const TensorEntry& e) { b.tensor(path, e); });
}

namespace detail {

template <class T>
struct is_vector_or_array : std::false_type {};
template <class T, class A>
struct is_vector_or_array<std::vector<T, A>> : std::true_type {};
template <class T, std::size_t N>
struct is_vector_or_array<std::array<T, N>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// A node with its own hooks: Param, Buffer, nn::Sequential.
template <class T>
concept HasHooks = requires(const T& c, T& m, const std::string& p, const VisitFn& v,
                            const MapFn& f, SummaryBuilder& b) {
  c.ember_visit(p, v);
  m.ember_map(p, f);
  c.ember_summarize(p, b);
};
// A struct declared with EMBER_MODULE.
template <class T>
concept HasFields = requires(const T& c) {
  c.ember_fields([](const char*, const auto&) {});
  T::ember_type_name();
};

// Whether a member type can hold tensors; everything else is a plain field.
template <class T>
constexpr bool holds_tensors() {
  if constexpr (HasHooks<T> || HasFields<T>) {
    return true;
  } else if constexpr (is_vector_or_array<T>::value || is_optional<T>::value) {
    return holds_tensors<typename T::value_type>();
  } else {
    return false;
  }
}

// Appends ".name" (or "name" at the root) to a path for the scope's lifetime.
class PathScope {
 public:
  PathScope(std::string& path, std::string_view name) : path_(path), size_(path.size()) {
    if (!path_.empty()) path_ += '.';
    path_ += name;
  }
  ~PathScope() { path_.resize(size_); }
  PathScope(const PathScope&) = delete;
  PathScope& operator=(const PathScope&) = delete;

 private:
  std::string& path_;
  std::size_t size_;
};

template <class T>
void visit_node(std::string& path, const T& x, const VisitFn& f) {
  if constexpr (HasHooks<T>) {
    x.ember_visit(path, f);
  } else if constexpr (HasFields<T>) {
    x.ember_fields([&](const char* name, const auto& field) {
      if constexpr (holds_tensors<std::remove_cvref_t<decltype(field)>>()) {
        PathScope scope(path, name);
        visit_node(path, field, f);
      }
    });
  } else if constexpr (is_vector_or_array<T>::value) {
    std::size_t i = 0;
    for (const auto& e : x) {
      PathScope scope(path, std::to_string(i++));
      visit_node(path, e, f);
    }
  } else if constexpr (is_optional<T>::value) {
    if (x) visit_node(path, *x, f);
  }
}

template <class T>
void map_node(std::string& path, T& x, const MapFn& f) {
  if constexpr (HasHooks<T>) {
    x.ember_map(path, f);
  } else if constexpr (HasFields<T>) {
    x.ember_fields([&](const char* name, auto& field) {
      if constexpr (holds_tensors<std::remove_cvref_t<decltype(field)>>()) {
        PathScope scope(path, name);
        map_node(path, field, f);
      }
    });
  } else if constexpr (is_vector_or_array<T>::value) {
    std::size_t i = 0;
    for (auto& e : x) {
      PathScope scope(path, std::to_string(i++));
      map_node(path, e, f);
    }
  } else if constexpr (is_optional<T>::value) {
    if (x) map_node(path, *x, f);
  }
}

template <class T>
void summarize_node(std::string& path, const T& x, SummaryBuilder& b) {
  if constexpr (HasHooks<T>) {
    x.ember_summarize(path, b);
  } else if constexpr (HasFields<T>) {
    b.begin_module(path, T::ember_type_name());
    x.ember_fields([&](const char* name, const auto& field) {
      if constexpr (holds_tensors<std::remove_cvref_t<decltype(field)>>()) {
        PathScope scope(path, name);
        summarize_node(path, field, b);
      }
    });
    b.end_module();
  } else if constexpr (is_vector_or_array<T>::value) {
    std::size_t i = 0;
    for (const auto& e : x) {
      PathScope scope(path, std::to_string(i++));
      summarize_node(path, e, b);
    }
  } else if constexpr (is_optional<T>::value) {
    if (x) summarize_node(path, *x, b);
  }
}

// Calls f(path, node) for every node of type T under x (x itself included), depth-first in
// field order, without descending into a match.
template <class T, class X, class F>
void for_each_of_type(std::string& path, X& x, F& f) {
  using Node = std::remove_const_t<X>;
  if constexpr (std::is_same_v<Node, T>) {
    f(std::string_view(path), x);
  } else if constexpr (HasFields<Node>) {
    x.ember_fields([&](const char* name, auto& field) {
      if constexpr (holds_tensors<std::remove_cvref_t<decltype(field)>>()) {
        PathScope scope(path, name);
        for_each_of_type<T>(path, field, f);
      }
    });
  } else if constexpr (is_vector_or_array<Node>::value) {
    std::size_t i = 0;
    for (auto& e : x) {
      PathScope scope(path, std::to_string(i++));
      for_each_of_type<T>(path, e, f);
    }
  } else if constexpr (is_optional<Node>::value) {
    if (x) for_each_of_type<T>(path, *x, f);
  }
}

// Note [Layer paths in errors]
// A layer's bad-input error should say where in the model the layer is ("blocks.3.fc:
// nn::Linear: ..."), but a layer does not know its path and the success path must not pay
// for one. So two steps, both only on the error path (zero-cost exceptions):
//  - at_layer(self, body) runs a layer's forward; an ember::Error leaving it becomes a
//    LayerError carrying the layer's address and type (the origin). An error already a
//    LayerError passes unchanged, so the innermost layer is the origin. ember's layers and
//    every layer of an nn::Sequential run their forward under it.
//  - nn::forward(model, args...) (also model(args...), which EMBER_MODULE adds) runs
//    model.forward; a LayerError leaving it is rethrown with the origin's path, found by
//    walking the model's tree for the node at that address of that type (a struct and its
//    first member share an address; the type tells them apart). A user's own forward that
//    calls fc1.forward(x) needs nothing: the origin is &fc1, and the walk from the model
//    the user called finds "fc1" (or "blocks.3.fc"). An inner nn::forward gives a partial
//    path; an outer one replaces it with the full one. A layer called on a copy of itself
//    is not in the tree: its error keeps the layer's name and shapes, without a path.
struct NodeRef {
  const void* address;
  const std::type_info* type;
};

// Finds the node `target` under x; on success `out` is its path (from x's path).
template <class T>
bool find_node(std::string& path, const T& x, const NodeRef& target, std::string& out) {
  if constexpr (HasFields<T> || HasHooks<T>) {
#if EMBER_HAS_EXCEPTIONS  // errors carry paths only where they are exceptions (and RTTI exists)
    if (static_cast<const void*>(&x) == target.address && typeid(T) == *target.type) {
      out = path;
      return true;
    }
#else  // unused there: a build without exceptions (nor RTTI) raises no LayerError
    static_cast<void>(target);
#endif
  }
  if constexpr (HasHooks<T>) {
    if constexpr (requires { x.ember_find(path, target, out); }) {
      return x.ember_find(path, target, out);
    }
    return false;
  } else if constexpr (HasFields<T>) {
    bool found = false;
    x.ember_fields([&](const char* name, const auto& field) {
      if constexpr (holds_tensors<std::remove_cvref_t<decltype(field)>>()) {
        if (found) return;
        PathScope scope(path, name);
        found = find_node(path, field, target, out);
      }
    });
    return found;
  } else if constexpr (is_vector_or_array<T>::value) {
    std::size_t i = 0;
    for (const auto& e : x) {
      PathScope scope(path, std::to_string(i++));
      if (find_node(path, e, target, out)) return true;
    }
    return false;
  } else if constexpr (is_optional<T>::value) {
    return x && find_node(path, *x, target, out);
  } else {
    return false;
  }
}

}  // namespace detail

// A bad-input error raised inside a layer's forward (Note [Layer paths in errors]):
// what() is "path: message" once a model has located the layer, else the message.
class LayerError : public Error {
 public:
  LayerError(const std::string& message, detail::NodeRef origin, std::string path = {})
      : Error(path.empty() ? message : path + ": " + message),
        message_(message),
        path_(std::move(path)),
        origin_(origin) {}
  const std::string& message() const { return message_; }  // without the path
  const std::string& path() const { return path_; }        // "" when not located
  const void* origin() const { return origin_.address; }
  const std::type_info& origin_type() const { return *origin_.type; }
  detail::NodeRef origin_ref() const { return origin_; }

 private:
  std::string message_, path_;
  detail::NodeRef origin_;
};

namespace detail {
// Inside a catch block: rethrows the current exception, an ember::Error as a LayerError
// from `origin` (a LayerError as it is).
[[noreturn]] void rethrow_from(NodeRef origin);
// Inside a catch block for a LayerError: rethrows it with its origin's path under root
// (unchanged when the origin is root itself or not under it).
template <class M>
[[noreturn]] void rethrow_located(const M& root, const LayerError& e) {
#if EMBER_HAS_EXCEPTIONS
  std::string path, out;
  if (find_node(path, root, e.origin_ref(), out) && !out.empty())
    throw LayerError(e.message(), e.origin_ref(), std::move(out));
  throw;
#else
  static_cast<void>(root);
  fail(e.what());
#endif
}
// Runs a layer's forward body (Note [Layer paths in errors]).
template <class Self, class F>
decltype(auto) at_layer(const Self& self, F&& body) {
#if EMBER_HAS_EXCEPTIONS
  try {
    return body();
  } catch (const Error&) {
    rethrow_from({static_cast<const void*>(&self), &typeid(Self)});
  }
#else
  static_cast<void>(self);
  return body();
#endif
}
}  // namespace detail

// m.forward(args...), with a layer's error located in m: "blocks.3.fc: nn::Linear: ...".
template <class M, class... A>
decltype(auto) forward(const M& m, A&&... args) {
#if EMBER_HAS_EXCEPTIONS
  try {
    return m.forward(std::forward<A>(args)...);
  } catch (const LayerError& e) {
    detail::rethrow_located(m, e);
  }
#else
  return m.forward(std::forward<A>(args)...);
#endif
}

// A type visit and map walk: an EMBER_MODULE struct or a type with the hooks.
template <class M>
concept Module = detail::HasFields<M> || detail::HasHooks<M>;

// Calls f with every param and buffer of m, depth-first in field order.
template <Module M>
void visit(const M& m, const VisitFn& f) {
  std::string path;
  detail::visit_node(path, m, f);
}
// m with every param and buffer passed through f (which edits the entry in place).
template <Module M>
[[nodiscard]] M map(M m, const MapFn& f) {
  std::string path;
  detail::map_node(path, m, f);
  return m;
}
// The number of parameter elements (buffers excluded), as PyTorch's
// sum(p.numel() for p in m.parameters()).
template <Module M>
std::size_t num_params(const M& m) {
  std::size_t n = 0;
  visit(m, [&](const TensorEntry& e) {
    if (e.is_param()) n += e.tensor.num_elements();
  });
  return n;
}
// Every tensor copied to dev; on an autodiff device trainable params require grad.
template <Module M>
[[nodiscard]] M to_device(M m, const Device& dev) {
  return map(std::move(m),
             [&](TensorEntry& e) { e.tensor = ops::to_device(ops::detach(e.tensor), dev); });
}
// A copy for validation: every tensor on the inner device of an autodiff device, outside
// any graph (on a plain device: the same tensors, detached).
template <Module M>
[[nodiscard]] M valid(M m) {
  return map(std::move(m), [](TensorEntry& e) {
    e.tensor = e.tensor.device().is_autodiff() ? ops::inner(e.tensor) : e.tensor;
  });
}
// Every param frozen (no gradient) or trainable again.
template <Module M>
[[nodiscard]] M freeze(M m) {
  return map(std::move(m), [](TensorEntry& e) { e.trainable = false; });
}
template <Module M>
[[nodiscard]] M unfreeze(M m) {
  return map(std::move(m), [](TensorEntry& e) { e.trainable = e.is_param(); });
}
// Every sub-module of type T in m with its path ("blocks.0.fc"; "" for m itself), as
// PyTorch's named_modules filtered by type: visit_modules reads them, map_modules lets f
// change them. The layers inside a node with its own hooks (nn::Sequential) are not
// reached.
template <class T, Module M, class F>
void visit_modules(const M& m, F&& f) {
  std::string path;
  auto g = [&](std::string_view p, const T& node) { f(p, node); };
  detail::for_each_of_type<T>(path, m, g);
}
template <class T, Module M, class F>
[[nodiscard]] M map_modules(M m, F&& f) {
  std::string path;
  auto g = [&](std::string_view p, T& node) { f(p, node); };
  detail::for_each_of_type<T>(path, m, g);
  return m;
}
// A table of every module with its path, type, tensor shapes and parameter count, and
// the totals, as torchinfo prints.
template <Module M>
std::string summary(const M& m) {
  SummaryBuilder b;
  std::string path;
  detail::summarize_node(path, m, b);
  return b.str();
}

}  // namespace ember::nn

// EMBER_MODULE(Type, fields...): the module API over the named fields, in declaration
// order. Adds only member functions, so Type stays an aggregate.
#define EMBER_MODULE(Type, ...) EMBER_MODULE_NAMED(Type, #Type __VA_OPT__(, ) __VA_ARGS__)
// The same with the name summaries print given (for class templates: "Conv2d").
#define EMBER_MODULE_NAMED(Type, type_name, ...)                       \
  template <class F>                                                   \
  void ember_fields(F&& ember_f) const {                               \
    (void)ember_f;                                                     \
    EMBER_PP_FOR_EACH(EMBER_MODULE_FIELD_, __VA_ARGS__)                \
  }                                                                    \
  template <class F>                                                   \
  void ember_fields(F&& ember_f) {                                     \
    (void)ember_f;                                                     \
    EMBER_PP_FOR_EACH(EMBER_MODULE_FIELD_, __VA_ARGS__)                \
  }                                                                    \
  static constexpr const char* ember_type_name() { return type_name; } \
  EMBER_MODULE_API(Type)

#define EMBER_MODULE_FIELD_(field) ember_f(#field, field);

// The public member functions of a module, forwarding to the ember::nn free functions.
#define EMBER_MODULE_API(Type)                                                        \
  void visit(const ::ember::nn::VisitFn& f) const { ::ember::nn::visit(*this, f); }   \
  [[nodiscard]] Type map(const ::ember::nn::MapFn& f) const& {                        \
    return ::ember::nn::map(*this, f);                                                \
  }                                                                                   \
  [[nodiscard]] Type map(const ::ember::nn::MapFn& f)&& {                             \
    return ::ember::nn::map(std::move(*this), f);                                     \
  }                                                                                   \
  std::size_t num_params() const { return ::ember::nn::num_params(*this); }           \
  [[nodiscard]] Type to_device(const ::ember::Device& d) const& {                     \
    return ::ember::nn::to_device(*this, d);                                          \
  }                                                                                   \
  [[nodiscard]] Type to_device(const ::ember::Device& d)&& {                          \
    return ::ember::nn::to_device(std::move(*this), d);                               \
  }                                                                                   \
  [[nodiscard]] Type valid() const { return ::ember::nn::valid(*this); }              \
  [[nodiscard]] Type freeze() const& { return ::ember::nn::freeze(*this); }           \
  [[nodiscard]] Type freeze()&& { return ::ember::nn::freeze(std::move(*this)); }     \
  [[nodiscard]] Type unfreeze() const& { return ::ember::nn::unfreeze(*this); }       \
  [[nodiscard]] Type unfreeze()&& { return ::ember::nn::unfreeze(std::move(*this)); } \
  std::string summary() const { return ::ember::nn::summary(*this); }                 \
  /* forward(args...) with errors naming the layer's path (nn::forward) */            \
  template <class... EmberA, class EmberSelf = Type>                                  \
  requires requires(const EmberSelf& ember_m, EmberA&&... ember_a) {                  \
    ember_m.forward(std::forward<EmberA>(ember_a)...);                                \
  }                                                                                   \
  decltype(auto) operator()(EmberA&&... ember_a) const {                              \
    return ::ember::nn::forward(static_cast<const EmberSelf&>(*this),                 \
                                std::forward<EmberA>(ember_a)...);                    \
  }                                                                                   \
  friend std::ostream& operator<<(std::ostream& os, const Type& m) {                  \
    return ::ember::nn::detail::write_summary(os, ::ember::nn::summary(m));           \
  }
