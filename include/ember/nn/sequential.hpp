// nn::Sequential: an ordered stack of type-erased layers, each fed the previous one's
// output, as torch.nn.Sequential. Its tensors' paths are the layer's index then the
// layer's own path ("0.weight", "2.bias"), as PyTorch's state_dict keys. A layer is any
// copyable type with a const forward taking one Tensor<D> or Tensor<D, Int> (rank 1 to 6)
// and returning a tensor, or with a const forward_dyn(DynTensor) (nn::Flatten).
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ember/nn/module.hpp"

namespace ember::nn {

namespace detail {

template <class T>
struct is_tensor : std::false_type {};
template <std::size_t D, class K>
struct is_tensor<Tensor<D, K>> : std::true_type {};

[[noreturn]] void no_forward_for(std::string_view layer, std::size_t index, const DynTensor& x);

// Calls layer.forward with x as the typed tensor of its rank and kind, when the layer has
// such a forward returning a tensor.
template <class L, std::size_t R = 1>
DynTensor forward_by_rank(const L& layer, DynTensor x, std::string_view type, std::size_t index) {
  if constexpr (R > 6) {
    no_forward_for(type, index, x);
  } else {
    if (x.rank() == R) {
      if (x.kind() == Kind::Int) {
        if constexpr (requires { layer.forward(std::declval<const Tensor<R, Int>&>()); }) {
          using Out =
              std::remove_cvref_t<decltype(layer.forward(std::declval<const Tensor<R, Int>&>()))>;
          if constexpr (is_tensor<Out>::value)
            return layer.forward(Tensor<R, Int>(std::move(x))).dyn();
        }
      } else if (x.kind() == Kind::Float) {
        if constexpr (requires { layer.forward(std::declval<const Tensor<R>&>()); }) {
          using Out =
              std::remove_cvref_t<decltype(layer.forward(std::declval<const Tensor<R>&>()))>;
          if constexpr (is_tensor<Out>::value) return layer.forward(Tensor<R>(std::move(x))).dyn();
        }
      }
      no_forward_for(type, index, x);
    }
    return forward_by_rank<L, R + 1>(layer, std::move(x), type, index);
  }
}

}  // namespace detail

class Sequential {
 public:
  Sequential() = default;
  template <class... L>
  requires(sizeof...(L) > 0 && (!std::is_same_v<std::remove_cvref_t<L>, Sequential> &&
                                ...)) explicit Sequential(L&&... layers) {
    (push(std::forward<L>(layers)), ...);
  }
  Sequential(const Sequential& o) { copy_from(o); }
  Sequential& operator=(const Sequential& o) {
    if (this != &o) {
      layers_.clear();
      copy_from(o);
    }
    return *this;
  }
  Sequential(Sequential&&) noexcept = default;
  Sequential& operator=(Sequential&&) noexcept = default;

  // Appends a layer (copied or moved in).
  template <class L>
  Sequential& push(L&& layer) & {
    layers_.push_back(std::make_unique<Holder<std::remove_cvref_t<L>>>(std::forward<L>(layer)));
    return *this;
  }
  template <class L>
  Sequential&& push(L&& layer) && {
    push(std::forward<L>(layer));
    return std::move(*this);
  }
  std::size_t size() const { return layers_.size(); }
  bool empty() const { return layers_.empty(); }

  // Runs the layers in order; rank and kind may change from layer to layer.
  DynTensor forward_dyn(DynTensor x) const;
  // The typed form: the output has rank DO, by default the input's.
  template <std::size_t DO = 0, std::size_t DI, class K>
  Tensor<(DO == 0 ? DI : DO)> forward(const Tensor<DI, K>& x) const {
    return Tensor<(DO == 0 ? DI : DO)>(forward_dyn(x.dyn()));
  }

  // Module-system hooks (Note [Visiting tensors]).
  void ember_visit(const std::string& path, const VisitFn& f) const;
  void ember_map(const std::string& path, const MapFn& f);
  void ember_summarize(const std::string& path, SummaryBuilder& b) const;
  bool ember_find(std::string& path, const detail::NodeRef& target, std::string& out) const;
  EMBER_MODULE_API(Sequential)

 private:
  struct Layer {
    virtual ~Layer() = default;
    virtual std::unique_ptr<Layer> clone() const = 0;
    virtual DynTensor forward(DynTensor x, std::size_t index) const = 0;
    virtual void visit(std::string& path, const VisitFn& f) const = 0;
    virtual void map(std::string& path, const MapFn& f) = 0;
    virtual void summarize(std::string& path, SummaryBuilder& b) const = 0;
    virtual bool find(std::string& path, const detail::NodeRef& target, std::string& out) const = 0;
  };
  template <class L>
  struct Holder final : Layer {
    explicit Holder(L l) : layer(std::move(l)) {}
    static std::string_view type_name() {
      if constexpr (requires { L::ember_type_name(); }) return L::ember_type_name();
      return "Layer";
    }
    std::unique_ptr<Layer> clone() const override { return std::make_unique<Holder>(layer); }
    DynTensor forward(DynTensor x, std::size_t index) const override {
      return detail::at_layer(layer, [&] {
        if constexpr (requires { layer.forward_dyn(std::move(x)); }) {
          return layer.forward_dyn(std::move(x));
        } else {
          return detail::forward_by_rank(layer, std::move(x), type_name(), index);
        }
      });
    }
    bool find(std::string& path, const detail::NodeRef& target, std::string& out) const override {
      if (static_cast<const void*>(&layer) == target.address && typeid(L) == *target.type) {
        out = path;
        return true;
      }
      if constexpr (detail::HasFields<L> || detail::HasHooks<L>) {
        return detail::find_node(path, layer, target, out);
      }
      return false;
    }
    void visit(std::string& path, const VisitFn& f) const override {
      detail::visit_node(path, layer, f);
    }
    void map(std::string& path, const MapFn& f) override { detail::map_node(path, layer, f); }
    void summarize(std::string& path, SummaryBuilder& b) const override {
      if constexpr (detail::HasFields<L> || detail::HasHooks<L>) {
        detail::summarize_node(path, layer, b);
      } else {
        b.begin_module(path, type_name());
        b.end_module();
      }
    }
    L layer;
  };
  void copy_from(const Sequential& o);

  std::vector<std::unique_ptr<Layer>> layers_;
};

// Flattens dims start_dim..end_dim into one, as torch.nn.Flatten (defaults 1, -1).
struct Flatten {
  std::int64_t start_dim = 1, end_dim = -1;
  DynTensor forward_dyn(DynTensor x) const {
    return ops::flatten(std::move(x), start_dim, end_dim);
  }
  template <std::size_t DO, std::size_t DI>
  Tensor<DO> forward(const Tensor<DI>& x) const {
    return Tensor<DO>(forward_dyn(x.dyn()));
  }
  EMBER_MODULE(Flatten)
};

}  // namespace ember::nn
