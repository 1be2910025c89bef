// Neural-network functions that are more than one element-wise step: the free functions
// behind nn layers (ember::module_ops, as torch.nn.functional). Each validates its input
// and throws ember::Error naming itself and the shapes.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ember/tensor/tensor.hpp"

namespace ember::module_ops {

// ---- layer_norm ----
// y = (x - mean) / sqrt(var + eps) * weight + bias over x's trailing dims, with the biased
// variance, as torch.nn.functional.layer_norm. The normalised dims are normalized_shape,
// or, in the overloads taking weight, the weight's W dims. weight and bias are optional.
template <std::size_t D, std::size_t W>
Tensor<D> layer_norm(const Tensor<D>& x, const Shape& normalized_shape,
                     const std::optional<Tensor<W>>& weight, const std::optional<Tensor<W>>& bias,
                     double eps = 1e-5) {
  static_assert(W >= 1 && W <= D, "layer_norm: weight and bias have 1..D dims");
  std::optional<DynTensor> w, b;
  if (weight) w = weight->dyn();
  if (bias) b = bias->dyn();
  return Tensor<D>(ops::layer_norm(x.dyn(), normalized_shape, std::move(w), std::move(b), eps));
}
// Without weight and bias.
template <std::size_t D>
Tensor<D> layer_norm(const Tensor<D>& x, const Shape& normalized_shape, double eps = 1e-5) {
  return Tensor<D>(ops::layer_norm(x.dyn(), normalized_shape, std::nullopt, std::nullopt, eps));
}
// Over the trailing W dims of x, with a weight (and a bias) of those dims.
template <std::size_t D, std::size_t W>
Tensor<D> layer_norm(const Tensor<D>& x, const Tensor<W>& weight, const Tensor<W>& bias,
                     double eps = 1e-5) {
  static_assert(W >= 1 && W <= D, "layer_norm: weight and bias have 1..D dims");
  return Tensor<D>(ops::layer_norm(x.dyn(), weight.shape(), weight.dyn(), bias.dyn(), eps));
}
template <std::size_t D, std::size_t W>
Tensor<D> layer_norm(const Tensor<D>& x, const Tensor<W>& weight, double eps = 1e-5) {
  static_assert(W >= 1 && W <= D, "layer_norm: weight has 1..D dims");
  return Tensor<D>(ops::layer_norm(x.dyn(), weight.shape(), weight.dyn(), std::nullopt, eps));
}

// ---- rms_norm ----
// y = x / sqrt(mean(x^2) + eps) * weight over x's trailing dims, as
// torch.nn.functional.rms_norm: the normalised dims are normalized_shape, or, in the
// overload taking weight, the weight's W dims. eps absent: the epsilon of x's dtype.
template <std::size_t D, std::size_t W>
Tensor<D> rms_norm(const Tensor<D>& x, const Shape& normalized_shape,
                   const std::optional<Tensor<W>>& weight,
                   std::optional<double> eps = std::nullopt) {
  static_assert(W >= 1 && W <= D, "rms_norm: weight has 1..D dims");
  std::optional<DynTensor> w;
  if (weight) w = weight->dyn();
  return Tensor<D>(ops::rms_norm(x.dyn(), normalized_shape, std::move(w), eps));
}
// Without weight.
template <std::size_t D>
Tensor<D> rms_norm(const Tensor<D>& x, const Shape& normalized_shape,
                   std::optional<double> eps = std::nullopt) {
  return Tensor<D>(ops::rms_norm(x.dyn(), normalized_shape, std::nullopt, eps));
}
// Over the trailing W dims of x, with a weight of those dims.
template <std::size_t D, std::size_t W>
Tensor<D> rms_norm(const Tensor<D>& x, const Tensor<W>& weight,
                   std::optional<double> eps = std::nullopt) {
  static_assert(W >= 1 && W <= D, "rms_norm: weight has 1..D dims");
  return Tensor<D>(ops::rms_norm(x.dyn(), weight.shape(), weight.dyn(), eps));
}

// ---- sliding windows: convolution and pooling ----
// Images are [N, C, *spatial] with 1 to 3 spatial dims. Everything here is a composite of
// two IR ops — unfold (im2col) and its adjoint fold (col2im) — with matmul, reshape and
// reductions: convolution is unfold + matmul, transposed convolution matmul + fold, pooling
// unfold + max or mean over the window. Defaults follow PyTorch.

// The rank-generic form (DynTensor): one entry per spatial dim in each vector; an empty
// vector means the default (stride 1, or the kernel for pooling; padding 0; dilation 1).
struct WindowOptions {
  std::vector<std::size_t> stride, padding, dilation;
};

// [N, C, *spatial] -> [N, C * prod(kernel), L] (L = number of window positions), rows
// ordered channel-major then kernel offsets, as torch.nn.functional.unfold. Positions in
// the padding read pad_value.
DynTensor unfold(DynTensor x, const std::vector<std::size_t>& kernel,
                 const WindowOptions& options = {}, double pad_value = 0.0);
// The adjoint of unfold: [N, C * prod(kernel), L] -> [N, C, *output_size], summing the
// entries that overlap.
DynTensor fold(DynTensor x, const std::vector<std::size_t>& output_size,
               const std::vector<std::size_t>& kernel, const WindowOptions& options = {});
// x [N, C, *spatial], weight [O, C / groups, *kernel], bias [O].
DynTensor conv(DynTensor x, DynTensor weight, std::optional<DynTensor> bias,
               const WindowOptions& options = {}, std::size_t groups = 1);
// x [N, C, *spatial], weight [C, O / groups, *kernel], bias [O]. Each output extent is
// (in - 1) stride - 2 padding + dilation (kernel - 1) + output_padding + 1; output_padding
// must be smaller than the stride.
DynTensor conv_transpose(DynTensor x, DynTensor weight, std::optional<DynTensor> bias,
                         const WindowOptions& options = {},
                         const std::vector<std::size_t>& output_padding = {},
                         std::size_t groups = 1);
// Padding is -inf (ints: the dtype's lowest value) and at most half the kernel.
// ceil_mode: the number of positions along each dim rounds up (as PyTorch's ceil_mode),
// so a last window may hang over the padded image's end; it must start inside the image
// or the padding before it, and the overhang is -inf.
DynTensor max_pool(DynTensor x, const std::vector<std::size_t>& kernel,
                   const WindowOptions& options = {}, bool ceil_mode = false);
// count_include_pad: divide by the window's size clipped to the padded image (PyTorch's
// default) rather than by the number of positions inside the image; divisor_override,
// when given, divides every window by that number. ceil_mode as max_pool's (the overhang
// is never counted). No dilation.
DynTensor avg_pool(DynTensor x, const std::vector<std::size_t>& kernel,
                   const WindowOptions& options = {}, bool count_include_pad = true,
                   bool ceil_mode = false, std::optional<double> divisor_override = std::nullopt);

// torch.nn.functional.interpolate over x [N, C, *spatial] (1 to 3 spatial dims, floats):
// the output size is `size` (one entry for every dim, or one per dim) or
// floor(in * scale_factor) — exactly one of the two. Linear is linear, bilinear or
// trilinear by the number of spatial dims; bicubic (Keys, A = -0.75, taps clamped to the
// image) needs 2. align_corners as PyTorch's (linear and bicubic only). Differentiable.
enum class InterpolateMode : std::uint8_t { Nearest, NearestExact, Linear, Bicubic };
struct InterpolateOptions {
  std::vector<std::size_t> size;
  std::vector<double> scale_factor;
  InterpolateMode mode = InterpolateMode::Nearest;
  bool align_corners = false;
};
DynTensor interpolate(DynTensor x, const InterpolateOptions& options);
// PyTorch's mode names ("nearest", "nearest-exact", "linear", "bilinear", "trilinear",
// "bicubic"), checked against the number of spatial dims.
InterpolateMode interpolate_mode(const std::string& name, std::size_t spatial_dims);

// ---- adaptive pooling, as torch.nn.functional.adaptive_{avg,max}_pool{1,2,3}d ----
// x [N, C, *spatial] (1 to 3 spatial dims, one output size per dim, each > 0): output i
// of a dim covers input [floor(i in / out), ceil((i + 1) in / out)); the average's is the
// window's mean, the max's its largest entry. The average takes floats, the max any dtype.
// Differentiable (the max's gradient shares ties, as ember's max rule).
DynTensor adaptive_avg_pool(DynTensor x, const std::vector<std::size_t>& output);
DynTensor adaptive_max_pool(DynTensor x, const std::vector<std::size_t>& output);

// ---- embedding, as torch.nn.functional.embedding ----
// The rows of weight [n, d] that ids (Int, any shape) name: [*ids.shape, d]. An index
// outside [0, n) is an ember::Error naming the range found. Rows read at padding_idx get
// no gradient (PyTorch's padding_idx; a negative one counts from the end).
DynTensor embedding(DynTensor weight, DynTensor ids,
                    std::optional<std::int64_t> padding_idx = std::nullopt);

// ---- dropout, as torch.nn.functional.dropout ----
// In training, each element of x (floats) is kept with probability 1 - p and scaled by
// 1 / (1 - p), else zeroed, by a Bernoulli draw of the device's generator (seeded by
// Device::seed); p = 1 zeroes everything. Not training, or p = 0: x itself.
// Differentiable (the gradient is the same mask and scale). p outside [0, 1] is an error.
DynTensor dropout(DynTensor x, double p = 0.5, bool training = true);

namespace detail {
// The same, with the caller's name in their errors (the nn layers': "nn::Embedding").
DynTensor dropout(DynTensor x, double p, bool training, const char* who);
DynTensor adaptive_avg_pool(DynTensor x, const std::vector<std::size_t>& output, const char* who);
DynTensor adaptive_max_pool(DynTensor x, const std::vector<std::size_t>& output, const char* who);
DynTensor embedding(DynTensor weight, DynTensor ids, std::optional<std::int64_t> padding_idx,
                    const char* who);
}  // namespace detail

// The typed form: Tensor<3> for 1 spatial dim, Tensor<4> for 2, Tensor<5> for 3.
using Size2 = std::array<std::size_t, 2>;
using Size3 = std::array<std::size_t, 3>;

struct Conv1dOptions {
  std::size_t stride = 1, padding = 0, dilation = 1, groups = 1;
};
struct Conv2dOptions {
  Size2 stride{1, 1}, padding{0, 0}, dilation{1, 1};
  std::size_t groups = 1;
};
struct Conv3dOptions {
  Size3 stride{1, 1, 1}, padding{0, 0, 0}, dilation{1, 1, 1};
  std::size_t groups = 1;
};
struct ConvTranspose2dOptions {
  Size2 stride{1, 1}, padding{0, 0}, output_padding{0, 0}, dilation{1, 1};
  std::size_t groups = 1;
};
struct Unfold2dOptions {
  Size2 stride{1, 1}, padding{0, 0}, dilation{1, 1};
};
struct MaxPool1dOptions {
  std::size_t kernel = 1;
  std::optional<std::size_t> stride;  // default: the kernel
  std::size_t padding = 0, dilation = 1;
  bool ceil_mode = false;
};
struct MaxPool2dOptions {
  Size2 kernel{1, 1};
  std::optional<Size2> stride;  // default: the kernel
  Size2 padding{0, 0}, dilation{1, 1};
  bool ceil_mode = false;
};
struct AvgPool1dOptions {
  std::size_t kernel = 1;
  std::optional<std::size_t> stride;  // default: the kernel
  std::size_t padding = 0;
  bool count_include_pad = true, ceil_mode = false;
};
struct AvgPool2dOptions {
  Size2 kernel{1, 1};
  std::optional<Size2> stride;  // default: the kernel
  Size2 padding{0, 0};
  bool count_include_pad = true, ceil_mode = false;
};

namespace detail {
template <std::size_t N>
std::vector<std::size_t> vec(const std::array<std::size_t, N>& a) {
  return {a.begin(), a.end()};
}
inline std::optional<DynTensor> bias_of(const std::optional<Tensor<1>>& b) {
  if (!b) return std::nullopt;
  return b->dyn();
}
}  // namespace detail

inline Tensor<3> unfold(const Tensor<4>& x, Size2 kernel, const Unfold2dOptions& o = {}) {
  return Tensor<3>(
      unfold(x.dyn(), detail::vec(kernel),
             {detail::vec(o.stride), detail::vec(o.padding), detail::vec(o.dilation)}));
}
inline Tensor<4> fold(const Tensor<3>& x, Size2 output_size, Size2 kernel,
                      const Unfold2dOptions& o = {}) {
  return Tensor<4>(fold(x.dyn(), detail::vec(output_size), detail::vec(kernel),
                        {detail::vec(o.stride), detail::vec(o.padding), detail::vec(o.dilation)}));
}
inline Tensor<3> conv1d(const Tensor<3>& x, const Tensor<3>& weight,
                        const std::optional<Tensor<1>>& bias = std::nullopt,
                        const Conv1dOptions& o = {}) {
  return Tensor<3>(conv(x.dyn(), weight.dyn(), detail::bias_of(bias),
                        {{o.stride}, {o.padding}, {o.dilation}}, o.groups));
}
inline Tensor<4> conv2d(const Tensor<4>& x, const Tensor<4>& weight,
                        const std::optional<Tensor<1>>& bias = std::nullopt,
                        const Conv2dOptions& o = {}) {
  return Tensor<4>(conv(x.dyn(), weight.dyn(), detail::bias_of(bias),
                        {detail::vec(o.stride), detail::vec(o.padding), detail::vec(o.dilation)},
                        o.groups));
}
inline Tensor<5> conv3d(const Tensor<5>& x, const Tensor<5>& weight,
                        const std::optional<Tensor<1>>& bias = std::nullopt,
                        const Conv3dOptions& o = {}) {
  return Tensor<5>(conv(x.dyn(), weight.dyn(), detail::bias_of(bias),
                        {detail::vec(o.stride), detail::vec(o.padding), detail::vec(o.dilation)},
                        o.groups));
}
inline Tensor<4> conv_transpose2d(const Tensor<4>& x, const Tensor<4>& weight,
                                  const std::optional<Tensor<1>>& bias = std::nullopt,
                                  const ConvTranspose2dOptions& o = {}) {
  return Tensor<4>(
      conv_transpose(x.dyn(), weight.dyn(), detail::bias_of(bias),
                     {detail::vec(o.stride), detail::vec(o.padding), detail::vec(o.dilation)},
                     detail::vec(o.output_padding), o.groups));
}
template <class K>
Tensor<3, K> max_pool1d(const Tensor<3, K>& x, const MaxPool1dOptions& o) {
  return Tensor<3, K>(max_pool(x.dyn(), {o.kernel},
                               {{o.stride.value_or(o.kernel)}, {o.padding}, {o.dilation}},
                               o.ceil_mode));
}
template <class K>
Tensor<4, K> max_pool2d(const Tensor<4, K>& x, const MaxPool2dOptions& o) {
  return Tensor<4, K>(max_pool(
      x.dyn(), detail::vec(o.kernel),
      {detail::vec(o.stride.value_or(o.kernel)), detail::vec(o.padding), detail::vec(o.dilation)},
      o.ceil_mode));
}
inline Tensor<3> avg_pool1d(const Tensor<3>& x, const AvgPool1dOptions& o) {
  return Tensor<3>(avg_pool(x.dyn(), {o.kernel}, {{o.stride.value_or(o.kernel)}, {o.padding}, {}},
                            o.count_include_pad, o.ceil_mode));
}
inline Tensor<4> avg_pool2d(const Tensor<4>& x, const AvgPool2dOptions& o) {
  return Tensor<4>(avg_pool(x.dyn(), detail::vec(o.kernel),
                            {detail::vec(o.stride.value_or(o.kernel)), detail::vec(o.padding), {}},
                            o.count_include_pad, o.ceil_mode));
}
// torch.nn.functional.scaled_dot_product_attention (dropout_p = 0; ops.hpp states the
// contract): q [..., Lq, E], k [..., Lk, E], v [..., Lk, Ev] -> [..., Lq, Ev]. The mask is
// a Bool tensor (true: the key takes part) or a float one (added to the scores), of any
// rank up to D that broadcasts to [..., Lq, Lk].
struct AttentionMask {
  template <std::size_t M, class K>
  AttentionMask(const Tensor<M, K>& m)  // NOLINT(google-explicit-constructor): as PyTorch's
      : mask(m.dyn()) {}
  DynTensor mask;
};
template <std::size_t D>
Tensor<D> scaled_dot_product_attention(const Tensor<D>& q, const Tensor<D>& k, const Tensor<D>& v,
                                       const std::optional<AttentionMask>& attn_mask = std::nullopt,
                                       bool is_causal = false,
                                       std::optional<double> scale = std::nullopt) {
  static_assert(D >= 2, "scaled_dot_product_attention: q, k and v have rank >= 2");
  std::optional<DynTensor> m;
  if (attn_mask) m = attn_mask->mask;
  return Tensor<D>(
      ops::scaled_dot_product_attention(q.dyn(), k.dyn(), v.dyn(), std::move(m), is_causal, scale));
}

// torch.nn.functional.grid_sample (2 spatial dims): input [N, C, H, W], grid [N, Ho, Wo, 2].
struct GridSampleOptions {
  ops::GridSampleMode mode = ops::GridSampleMode::Bilinear;
  ops::GridSamplePadding padding = ops::GridSamplePadding::Zeros;
  bool align_corners = false;
};
inline Tensor<4> grid_sample(const Tensor<4>& input, const Tensor<4>& grid,
                             const GridSampleOptions& o = {}) {
  return Tensor<4>(ops::grid_sample(input.dyn(), grid.dyn(), o.mode, o.padding, o.align_corners));
}

}  // namespace ember::module_ops
