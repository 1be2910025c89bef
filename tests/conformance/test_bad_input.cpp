// Bad input, per family: every user error is an ember::Error whose message names the op.
// Runs on every available device, like the value cases.
#include <gtest/gtest.h>

#include <limits>

#include "conformance/harness.hpp"

namespace conformance {
namespace {

namespace ops = ember::ops;
using ember::TensorData;
using ember::ir::BinaryFn;
using ember::ir::ReduceFn;
using ember::ir::UnaryFn;

// Expects stmt to throw ember::Error with `op` in its message.
#define EXPECT_ERROR_NAMING(stmt, op)                                                     \
  do {                                                                                    \
    try {                                                                                 \
      (void)(stmt);                                                                       \
      ADD_FAILURE() << #stmt << " did not throw (expected an error naming " << op << ")"; \
    } catch (const ember::Error& e) {                                                     \
      EXPECT_NE(std::string(e.what()).find(op), std::string::npos)                        \
          << "message does not name " << op << ": " << e.what();                          \
    }                                                                                     \
  } while (0)

DynTensor f32(const Device& d, Shape s) { return ops::ones(s, DType::F32, d); }
DynTensor i64(const Device& d, std::vector<std::int64_t> v) {
  return ops::from_data(TensorData::from(v), d);
}

class BadInput : public testing::TestWithParam<std::string> {
 protected:
  Device dev() const {
    for (const Device& d : conformance_devices()) {
      if (d.name() == GetParam()) return d;
    }
    return Device::cpu();
  }
};

TEST_P(BadInput, Elementwise) {
  const Device d = dev();
  EXPECT_ERROR_NAMING(ops::binary(BinaryFn::Add, f32(d, {2, 3}), f32(d, {4, 3})), "add");
  EXPECT_ERROR_NAMING(ops::unary(UnaryFn::Exp, ops::ones({3}, DType::I32, d)), "exp");
  EXPECT_ERROR_NAMING(ops::unary(UnaryFn::BitNot, f32(d, {3})), "bitwise_not");
  EXPECT_ERROR_NAMING(ops::binary(BinaryFn::And, f32(d, {3}), f32(d, {3})), "and");
  EXPECT_ERROR_NAMING(
      ops::binary(BinaryFn::Pow, ops::ones({3}, DType::I64, d), ops::ones({3}, DType::I64, d)),
      "pow");
  // Integer division by zero is rejected (the Cpu kernel checks the divisor).
  EXPECT_ERROR_NAMING(ops::binary(BinaryFn::Div, i64(d, {1, 2}), i64(d, {1, 0})).to_data(), "div");
  EXPECT_ERROR_NAMING(ops::binary_scalar(BinaryFn::Rem, i64(d, {1, 2}), 0).to_data(), "rem");
  EXPECT_ERROR_NAMING(ops::clamp(f32(d, {3}), 2.0, 1.0), "clamp");
  EXPECT_ERROR_NAMING(ops::mask_where(f32(d, {3}), f32(d, {3}), f32(d, {3})), "mask_where");
  EXPECT_ERROR_NAMING(ops::mask_fill(f32(d, {3}), ops::ones({4}, DType::Bool, d), 0), "mask_where");
}

TEST_P(BadInput, Reductions) {
  const Device d = dev();
  EXPECT_ERROR_NAMING(ops::reduce(ReduceFn::Sum, f32(d, {2, 3}), 2), "sum");
  EXPECT_ERROR_NAMING(ops::reduce(ReduceFn::Max, f32(d, {2, 0}), 1), "max");
  EXPECT_ERROR_NAMING(ops::reduce(ReduceFn::ArgMin, f32(d, {2, 3}), -3), "argmin");
  EXPECT_ERROR_NAMING(ops::var(ops::ones({3}, DType::I32, d), 0), "var");
  EXPECT_ERROR_NAMING(ops::topk(f32(d, {2, 3}), 4, 1), "topk");
  EXPECT_ERROR_NAMING(ops::sort(f32(d, {2, 3}), 5), "sort");
  EXPECT_ERROR_NAMING(ops::scan(ember::ir::ScanFn::Sum, f32(d, {2}), 1), "cumsum");
}

TEST_P(BadInput, Layout) {
  const Device d = dev();
  EXPECT_ERROR_NAMING(ops::reshape(f32(d, {2, 3}), Shape{4, 2}), "reshape");
  EXPECT_ERROR_NAMING(ops::reshape(f32(d, {2, 3}), std::vector<std::int64_t>{-1, -1}), "reshape");
  EXPECT_ERROR_NAMING(ops::permute(f32(d, {2, 3}), {0, 0}), "permute");
  EXPECT_ERROR_NAMING(ops::permute(f32(d, {2, 3}), {0}), "permute");
  EXPECT_ERROR_NAMING(ops::transpose(f32(d, {3})), "transpose");
  EXPECT_ERROR_NAMING(ops::flip(f32(d, {2, 3}), {1, -1}), "flip");
  EXPECT_ERROR_NAMING(ops::expand(f32(d, {2, 3}), Shape{2, 4}), "expand");
  EXPECT_ERROR_NAMING(ops::squeeze(f32(d, {2, 3}), 0), "squeeze");
  EXPECT_ERROR_NAMING(ops::unsqueeze(f32(d, {2, 3}), 4), "unsqueeze");
  EXPECT_ERROR_NAMING(ops::flatten(f32(d, {2, 3, 4}), 2, 1), "flatten");
  EXPECT_ERROR_NAMING(ops::narrow(f32(d, {2, 3}), 1, 2, 2), "narrow");
  EXPECT_ERROR_NAMING(ops::slice(f32(d, {2, 3}), {ops::Range(0, 3)}), "slice");
  EXPECT_ERROR_NAMING(
      ops::slice(f32(d, {2, 3}), {ops::Range(0, 1), ops::Range(0, 1), ops::Range(0, 1)}), "slice");
  EXPECT_ERROR_NAMING(ops::slice_assign(f32(d, {4, 4}), {ops::Range(0, 2)}, f32(d, {3, 4})),
                      "slice_assign");
  EXPECT_ERROR_NAMING(ops::slice_fill(f32(d, {4, 4}), {ops::Range(-5, 2)}, 0), "slice_assign");
  EXPECT_ERROR_NAMING(ops::cat({f32(d, {2, 3}), f32(d, {3, 4})}, 0), "cat");
  EXPECT_ERROR_NAMING(ops::cat({f32(d, {2, 3}), ops::ones({2, 3}, DType::F64, d)}, 0), "cat");
  EXPECT_ERROR_NAMING(ops::cat({}, 0), "cat");
  EXPECT_ERROR_NAMING(ops::stack({f32(d, {2, 3}), f32(d, {2, 4})}, 0), "stack");
  EXPECT_ERROR_NAMING(ops::split_sizes(f32(d, {2, 3}), {1, 1}, 1), "split");
  EXPECT_ERROR_NAMING(ops::chunk(f32(d, {2, 3}), 0, 1), "chunk");
  EXPECT_ERROR_NAMING(ops::pad(f32(d, {2, 3}), {{3, 0}}, ops::PadMode::Reflect), "pad");
  EXPECT_ERROR_NAMING(ops::repeat(f32(d, {2, 3}), {2}), "repeat");
}

TEST_P(BadInput, Indexing) {
  const Device d = dev();
  // Out-of-range indices are caught where the kernel reads them.
  EXPECT_ERROR_NAMING(
      ops::gather(f32(d, {2, 3}), 1, ops::reshape(i64(d, {0, 3}), Shape{1, 2})).to_data(),
      "gather");
  EXPECT_ERROR_NAMING(
      ops::gather(f32(d, {2, 3}), 1, ops::reshape(i64(d, {-1, 0}), Shape{1, 2})).to_data(),
      "gather");
  EXPECT_ERROR_NAMING(ops::select(f32(d, {2, 3}), 0, i64(d, {0, 2})).to_data(), "select");
  EXPECT_ERROR_NAMING(ops::select_assign(f32(d, {2, 3}), 0, i64(d, {5}), f32(d, {1, 3})).to_data(),
                      "select_assign");
  EXPECT_ERROR_NAMING(
      ops::scatter(f32(d, {2, 3}), 1, ops::reshape(i64(d, {3}), Shape{1, 1}), f32(d, {1, 1}))
          .to_data(),
      "scatter");
  EXPECT_ERROR_NAMING(
      ops::scatter_add(f32(d, {2, 3}), 0, ops::reshape(i64(d, {2}), Shape{1, 1}), f32(d, {1, 1}))
          .to_data(),
      "scatter_add");
  // Shape and kind errors are caught before any kernel.
  EXPECT_ERROR_NAMING(ops::gather(f32(d, {2, 3}), 1, f32(d, {2, 3})), "gather");
  EXPECT_ERROR_NAMING(ops::gather(f32(d, {2, 3}), 1, i64(d, {0})), "gather");
  EXPECT_ERROR_NAMING(
      ops::scatter(f32(d, {2, 3}), 1, ops::reshape(i64(d, {0, 1}), Shape{1, 2}), f32(d, {1, 3})),
      "scatter");
  EXPECT_ERROR_NAMING(ops::select(f32(d, {2, 3}), 2, i64(d, {0})), "select");
  EXPECT_ERROR_NAMING(ops::one_hot(i64(d, {0, 7}), 5, DType::F32), "one_hot");
  EXPECT_ERROR_NAMING(ops::one_hot(f32(d, {2}), 5, DType::F32), "one_hot");
}

TEST_P(BadInput, ComputeAndCreation) {
  const Device d = dev();
  EXPECT_ERROR_NAMING(ops::matmul(f32(d, {2, 3}), f32(d, {4, 2})), "matmul");
  EXPECT_ERROR_NAMING(ops::matmul(f32(d, {3}), f32(d, {3, 2})), "matmul");
  EXPECT_ERROR_NAMING(ops::matmul(f32(d, {2, 3}), ops::ones({3, 2}, DType::F64, d)), "matmul");
  EXPECT_ERROR_NAMING(ops::matmul(f32(d, {2, 2, 3}), f32(d, {3, 3, 2})), "matmul");
  EXPECT_ERROR_NAMING(
      ops::matmul(ops::ones({2, 2}, DType::I64, d), ops::ones({2, 2}, DType::I64, d)), "matmul");
  EXPECT_ERROR_NAMING(ops::softmax(ops::ones({3}, DType::I64, d), 0), "softmax");
  // layer_norm: int x, trailing dims unlike normalized_shape, empty or too long
  // normalized_shape, weight / bias of another shape or dtype, negative or NaN eps.
  EXPECT_ERROR_NAMING(
      ops::layer_norm(ops::ones({2, 3}, DType::I64, d), Shape{3}, std::nullopt, std::nullopt),
      "layer_norm");
  EXPECT_ERROR_NAMING(ops::layer_norm(f32(d, {2, 3}), Shape{2}, std::nullopt, std::nullopt),
                      "layer_norm");
  EXPECT_ERROR_NAMING(ops::layer_norm(f32(d, {2, 3}), Shape{}, std::nullopt, std::nullopt),
                      "layer_norm");
  EXPECT_ERROR_NAMING(ops::layer_norm(f32(d, {2, 3}), Shape{1, 2, 3}, std::nullopt, std::nullopt),
                      "layer_norm");
  EXPECT_ERROR_NAMING(ops::layer_norm(f32(d, {2, 3}), Shape{3}, f32(d, {2, 3}), std::nullopt),
                      "layer_norm");
  EXPECT_ERROR_NAMING(ops::layer_norm(f32(d, {2, 3}), Shape{3}, std::nullopt, f32(d, {4})),
                      "layer_norm");
  EXPECT_ERROR_NAMING(
      ops::layer_norm(f32(d, {2, 3}), Shape{3}, ops::ones({3}, DType::F64, d), std::nullopt),
      "layer_norm");
  EXPECT_ERROR_NAMING(ops::layer_norm(f32(d, {2, 3}), Shape{3}, std::nullopt, std::nullopt, -1.0),
                      "layer_norm");
  EXPECT_ERROR_NAMING(ops::layer_norm(f32(d, {2, 3}), Shape{3}, std::nullopt, std::nullopt,
                                      std::numeric_limits<double>::quiet_NaN()),
                      "layer_norm");
  // rms_norm: int x, trailing dims unlike normalized_shape, empty normalized_shape, weight of
  // another shape or dtype, negative or NaN eps.
  EXPECT_ERROR_NAMING(ops::rms_norm(ops::ones({2, 3}, DType::I64, d), Shape{3}, std::nullopt),
                      "rms_norm");
  EXPECT_ERROR_NAMING(ops::rms_norm(f32(d, {2, 3}), Shape{2}, std::nullopt), "rms_norm");
  EXPECT_ERROR_NAMING(ops::rms_norm(f32(d, {2, 3}), Shape{}, std::nullopt), "rms_norm");
  EXPECT_ERROR_NAMING(ops::rms_norm(f32(d, {2, 3}), Shape{3}, f32(d, {2, 3})), "rms_norm");
  EXPECT_ERROR_NAMING(ops::rms_norm(f32(d, {2, 3}), Shape{3}, ops::ones({3}, DType::F64, d)),
                      "rms_norm");
  EXPECT_ERROR_NAMING(ops::rms_norm(f32(d, {2, 3}), Shape{3}, std::nullopt, -1.0), "rms_norm");
  EXPECT_ERROR_NAMING(ops::rms_norm(f32(d, {2, 3}), Shape{3}, std::nullopt,
                                    std::numeric_limits<double>::quiet_NaN()),
                      "rms_norm");
  // group_norm: int x, rank 1, groups 0 or not dividing C, weight / bias of another shape or
  // dtype, negative eps.
  EXPECT_ERROR_NAMING(
      ops::group_norm(ops::ones({2, 4}, DType::I64, d), 2, std::nullopt, std::nullopt),
      "group_norm");
  EXPECT_ERROR_NAMING(ops::group_norm(f32(d, {4}), 2, std::nullopt, std::nullopt), "group_norm");
  EXPECT_ERROR_NAMING(ops::group_norm(f32(d, {2, 4}), 0, std::nullopt, std::nullopt), "group_norm");
  EXPECT_ERROR_NAMING(ops::group_norm(f32(d, {2, 4}), 3, std::nullopt, std::nullopt), "group_norm");
  EXPECT_ERROR_NAMING(ops::group_norm(f32(d, {2, 4}), 2, f32(d, {2}), std::nullopt), "group_norm");
  EXPECT_ERROR_NAMING(
      ops::group_norm(f32(d, {2, 4}), 2, std::nullopt, ops::ones({4}, DType::F64, d)),
      "group_norm");
  EXPECT_ERROR_NAMING(ops::group_norm(f32(d, {2, 4}), 2, std::nullopt, std::nullopt, -1.0),
                      "group_norm");
  // scaled_dot_product_attention: rank 1, E or Lk disagreeing, mixed dtypes, int q, batch
  // dims that do not broadcast, a mask of another dtype or that does not broadcast, a mask
  // with is_causal, E = 0 without a scale, a non-finite scale.
  const char* sdpa = "scaled_dot_product_attention";
  const auto attend = [&](DynTensor q, DynTensor k, DynTensor v,
                          std::optional<DynTensor> m = std::nullopt, bool causal = false,
                          std::optional<double> scale = std::nullopt) {
    return ops::scaled_dot_product_attention(std::move(q), std::move(k), std::move(v), std::move(m),
                                             causal, scale);
  };
  EXPECT_ERROR_NAMING(attend(f32(d, {3}), f32(d, {4, 3}), f32(d, {4, 2})), sdpa);
  EXPECT_ERROR_NAMING(attend(f32(d, {2, 3}), f32(d, {4, 5}), f32(d, {4, 2})), sdpa);
  EXPECT_ERROR_NAMING(attend(f32(d, {2, 3}), f32(d, {4, 3}), f32(d, {5, 2})), sdpa);
  EXPECT_ERROR_NAMING(attend(f32(d, {2, 3}), ops::ones({4, 3}, DType::F64, d), f32(d, {4, 2})),
                      sdpa);
  EXPECT_ERROR_NAMING(attend(ops::ones({2, 3}, DType::I64, d), f32(d, {4, 3}), f32(d, {4, 2})),
                      sdpa);
  EXPECT_ERROR_NAMING(attend(f32(d, {2, 2, 3}), f32(d, {3, 4, 3}), f32(d, {3, 4, 2})), sdpa);
  EXPECT_ERROR_NAMING(
      attend(f32(d, {2, 3}), f32(d, {4, 3}), f32(d, {4, 2}), ops::ones({2, 4}, DType::I64, d)),
      sdpa);
  EXPECT_ERROR_NAMING(
      attend(f32(d, {2, 3}), f32(d, {4, 3}), f32(d, {4, 2}), ops::ones({2, 4}, DType::F64, d)),
      sdpa);
  EXPECT_ERROR_NAMING(
      attend(f32(d, {2, 3}), f32(d, {4, 3}), f32(d, {4, 2}), ops::ones({3, 4}, DType::Bool, d)),
      sdpa);
  EXPECT_ERROR_NAMING(
      attend(f32(d, {2, 3}), f32(d, {4, 3}), f32(d, {4, 2}), ops::ones({1, 2, 4}, DType::Bool, d)),
      sdpa);
  EXPECT_ERROR_NAMING(attend(f32(d, {2, 3}), f32(d, {4, 3}), f32(d, {4, 2}),
                             ops::ones({2, 4}, DType::Bool, d), true),
                      sdpa);
  EXPECT_ERROR_NAMING(attend(f32(d, {2, 0}), f32(d, {4, 0}), f32(d, {4, 2})), sdpa);
  EXPECT_ERROR_NAMING(attend(f32(d, {2, 3}), f32(d, {4, 3}), f32(d, {4, 2}), std::nullopt, false,
                             std::numeric_limits<double>::infinity()),
                      sdpa);
  EXPECT_ERROR_NAMING(ops::arange(0, 5, 0, DType::F32, d), "arange");
  EXPECT_ERROR_NAMING(ops::linspace(0, 1, 5, DType::I64, d), "linspace");
  EXPECT_ERROR_NAMING(ops::random({3}, ember::Distribution::uniform(2, 1), DType::F32, d),
                      "random");
  EXPECT_ERROR_NAMING(ops::random({3}, ember::Distribution::bernoulli(2), DType::F32, d), "random");
  EXPECT_ERROR_NAMING(ops::triu_mask(Shape{3}, 0, d), "triu_mask");
}

TEST_P(BadInput, TypedFacadeAndData) {
  const Device d = dev();
  // Tensor<D> checks the rank and kind it wraps.
  EXPECT_ERROR_NAMING(ember::Tensor<2>(f32(d, {3})), "Tensor<2>");
  EXPECT_ERROR_NAMING((ember::Tensor<1, ember::Int>(f32(d, {3}))), "Tensor<1");
  EXPECT_ERROR_NAMING(ember::Tensor<1>(f32(d, {3})).into_scalar<float>(), "into_scalar");
  // TensorData checks its byte count.
  EXPECT_ERROR_NAMING(TensorData(std::vector<std::byte>(7), Shape{2}, DType::F32), "TensorData");
  EXPECT_ERROR_NAMING(TensorData::from<float>({1, 2}).get_f64(2), "get_f64");
}

TEST_P(BadInput, SlidingWindows) {
  namespace mo = ember::module_ops;
  using WO = mo::WindowOptions;
  const Device d = dev();
  const auto x = f32(d, {2, 3, 5, 5});
  // Not an image with 1 to 3 spatial dims.
  EXPECT_ERROR_NAMING(mo::unfold(f32(d, {3, 5}), {2}), "unfold");
  EXPECT_ERROR_NAMING(
      mo::conv(f32(d, {1, 1, 2, 2, 2, 2}), f32(d, {1, 1, 1, 1, 1, 1}), std::nullopt), "conv");
  // Kernel / option arity, zero stride or kernel, dilated kernel larger than padded input.
  EXPECT_ERROR_NAMING(mo::unfold(x, {2}), "kernel [2] needs 2 entries");
  EXPECT_ERROR_NAMING(mo::unfold(x, {2, 2}, WO{{1}, {}, {}}), "stride [1] needs 2 entries");
  EXPECT_ERROR_NAMING(mo::unfold(x, {2, 2}, WO{{0, 1}, {}, {}}), "must be >= 1");
  EXPECT_ERROR_NAMING(mo::unfold(x, {0, 2}), "must be >= 1");
  EXPECT_ERROR_NAMING(mo::unfold(x, {6, 2}), "more than the padded input");
  EXPECT_ERROR_NAMING(mo::unfold(x, {3, 3}, WO{{}, {}, {3, 1}}), "more than the padded input");
  EXPECT_ERROR_NAMING(mo::unfold(ops::ones({1, 1, 3}, DType::I32, d), {2}, {},
                                 std::numeric_limits<double>::quiet_NaN()),
                      "unfold");
  // fold: the column count must match the window positions of the output size.
  EXPECT_ERROR_NAMING(mo::fold(f32(d, {1, 8, 10}), {4, 4}, {2, 2}), "window positions");
  EXPECT_ERROR_NAMING(mo::fold(f32(d, {1, 7, 9}), {4, 4}, {2, 2}), "not a multiple");
  EXPECT_ERROR_NAMING(mo::fold(ops::ones({1, 4, 9}, DType::I64, d), {4, 4}, {2, 2}), "fold");
  // conv: channels against the weight and groups, bias shape, dtype and kind.
  EXPECT_ERROR_NAMING(mo::conv(x, f32(d, {4, 2, 3, 3}), std::nullopt), "conv");
  EXPECT_ERROR_NAMING(mo::conv(x, f32(d, {4, 1, 3, 3}), std::nullopt, {}, 2), "groups = 2");
  EXPECT_ERROR_NAMING(mo::conv(x, f32(d, {4, 3, 3}), std::nullopt), "weight of the input's rank");
  EXPECT_ERROR_NAMING(mo::conv(x, f32(d, {4, 3, 3, 3}), f32(d, {3})), "bias [4]");
  EXPECT_ERROR_NAMING(mo::conv(x, ops::ones({4, 3, 3, 3}, DType::F64, d), std::nullopt),
                      "input's rank and dtype");
  EXPECT_ERROR_NAMING(mo::conv(ops::ones({1, 3, 5, 5}, DType::I32, d),
                               ops::ones({4, 3, 3, 3}, DType::I32, d), std::nullopt),
                      "conv");
  EXPECT_ERROR_NAMING(mo::conv(x, f32(d, {4, 3, 7, 3}), std::nullopt), "more than the padded");
  // conv_transpose: weight [C, O / groups, *k], output padding below the stride.
  EXPECT_ERROR_NAMING(mo::conv_transpose(x, f32(d, {4, 2, 3, 3}), std::nullopt), "conv_transpose");
  EXPECT_ERROR_NAMING(
      mo::conv_transpose(x, f32(d, {3, 2, 3, 3}), std::nullopt, WO{{2, 2}, {}, {}}, {2, 0}),
      "smaller than the stride");
  EXPECT_ERROR_NAMING(mo::conv_transpose(f32(d, {1, 3, 1, 1}), f32(d, {3, 2, 1, 1}), std::nullopt,
                                         WO{{}, {1, 1}, {}}),
                      "leaves no output");
  // Pools: padding at most half the kernel; avg_pool has no dilation and needs floats.
  EXPECT_ERROR_NAMING(mo::max_pool(x, {2, 2}, WO{{}, {2, 0}, {}}), "at most half the kernel");
  EXPECT_ERROR_NAMING(mo::avg_pool(x, {2, 2}, WO{{}, {}, {2, 2}}), "no dilation");
  EXPECT_ERROR_NAMING(mo::avg_pool(ops::ones({1, 1, 4, 4}, DType::I32, d), {2, 2}), "avg_pool");
  EXPECT_ERROR_NAMING(mo::max_pool(ops::ones({1, 1, 4, 4}, DType::Bool, d), {2, 2}), "max_pool");
  // The typed facade checks ranks.
  EXPECT_ERROR_NAMING(mo::conv2d(ember::Tensor<4>(x), ember::Tensor<4>(f32(d, {2, 3, 2, 2})),
                                 ember::Tensor<1>(f32(d, {2})), {.stride = {0, 1}}),
                      "must be >= 1");
}

TEST_P(BadInput, ComposedFunctions) {
  const Device d = dev();
  const auto x = f32(d, {2, 3, 4});
  EXPECT_ERROR_NAMING(ops::reduce_dims(ReduceFn::Sum, x, {}), "sum");
  EXPECT_ERROR_NAMING(ops::reduce_dims(ReduceFn::Sum, x, {0, -3}), "sum");
  EXPECT_ERROR_NAMING(ops::reduce_dims(ReduceFn::Max, x, {3}), "max");
  EXPECT_ERROR_NAMING(ops::reduce_dims(ReduceFn::Max, f32(d, {2, 0}), {0, 1}), "max");
  EXPECT_ERROR_NAMING(ops::reduce_dims(ReduceFn::Mean, ops::ones({2}, DType::I32, d), {0}), "mean");
  EXPECT_ERROR_NAMING(ops::reduce_dims(ReduceFn::ArgMax, x, {0}), "argmax");
  EXPECT_ERROR_NAMING(ops::max_abs(ops::ones({2}, DType::Bool, d)), "max_abs");
  EXPECT_ERROR_NAMING(ops::cummax_with_indices(x, 3), "cummax");
  EXPECT_ERROR_NAMING(ops::cummin_with_indices(ops::ones({2}, DType::Bool, d), 0), "cummin");
  EXPECT_ERROR_NAMING(ops::searchsorted(f32(d, {4}), i64(d, {1})), "searchsorted");
  EXPECT_ERROR_NAMING(ops::searchsorted(f32(d, {2, 4}), f32(d, {3, 1})), "searchsorted");
  EXPECT_ERROR_NAMING(ops::bucketize(f32(d, {3}), f32(d, {2, 2})), "bucketize");
  EXPECT_ERROR_NAMING(ops::histc(i64(d, {1, 2}), 4), "histc");
  EXPECT_ERROR_NAMING(ops::histc(x, 0), "histc");
  EXPECT_ERROR_NAMING(ops::histc(x, 4, 2, 1), "histc");
  EXPECT_ERROR_NAMING(ops::movedim(x, {0, 1}, {2}), "movedim");
  EXPECT_ERROR_NAMING(ops::movedim(x, {0, 0}, {1, 2}), "movedim");
  EXPECT_ERROR_NAMING(ops::movedim(x, {0, 1}, {2, 2}), "movedim");
  EXPECT_ERROR_NAMING(ops::movedim(x, {3}, {0}), "movedim");
  EXPECT_ERROR_NAMING(ops::roll(x, {1, 2}, {}), "roll");
  EXPECT_ERROR_NAMING(ops::roll(x, {1}, {0, 1}), "roll");
  EXPECT_ERROR_NAMING(ops::roll(x, {1}, {5}), "roll");
  EXPECT_ERROR_NAMING(ops::take(x, i64(d, {24})), "take");
  EXPECT_ERROR_NAMING(ops::take(x, i64(d, {-25})), "take");
  EXPECT_ERROR_NAMING(ops::take(x, f32(d, {1})), "take");
  EXPECT_ERROR_NAMING(ops::one_hot_fill(i64(d, {0, 3}), 3, 1, 0, -1, DType::F32), "one_hot_fill");
  EXPECT_ERROR_NAMING(ops::one_hot_fill(i64(d, {-4}), 3, 1, 0, -1, DType::F32), "one_hot_fill");
  EXPECT_ERROR_NAMING(ops::one_hot_fill(i64(d, {0}), 3, 1, 0, 2, DType::F32), "one_hot_fill");
  EXPECT_ERROR_NAMING(ops::one_hot_fill(i64(d, {0}), 0, 1, 0, 0, DType::F32), "one_hot_fill");
  EXPECT_ERROR_NAMING(ops::one_hot_fill(i64(d, {0}), 2, 256, 0, 0, DType::U8), "one_hot_fill");
  EXPECT_ERROR_NAMING(ops::cross(f32(d, {4, 2}), f32(d, {4, 2})), "cross");
  EXPECT_ERROR_NAMING(ops::cross(f32(d, {4, 3}), f32(d, {5, 3})), "cross");
  EXPECT_ERROR_NAMING(ops::cross(f32(d, {3}), ops::ones({3}, DType::F64, d)), "cross");
  EXPECT_ERROR_NAMING(ops::diag(x), "diag");
  EXPECT_ERROR_NAMING(ops::trace(f32(d, {3})), "trace");
  EXPECT_ERROR_NAMING(ops::vector_norm(i64(d, {1, 2})), "vector_norm");
  EXPECT_ERROR_NAMING(ops::vector_norm(x, std::numeric_limits<double>::quiet_NaN()), "vector_norm");
  EXPECT_ERROR_NAMING(ops::vector_norm(x, 2.0, {0, 0}), "vector_norm");
  EXPECT_ERROR_NAMING(ops::matrix_norm(f32(d, {3})), "matrix_norm");
  EXPECT_ERROR_NAMING(ops::softmin(x, 3), "softmin");
  EXPECT_ERROR_NAMING(ops::quiet_softmax(i64(d, {1}), 0), "quiet_softmax");
  EXPECT_ERROR_NAMING(ops::grid_sample(x, f32(d, {2, 1, 1, 2})), "grid_sample");
  EXPECT_ERROR_NAMING(ops::grid_sample(f32(d, {2, 1, 3, 3}), f32(d, {2, 1, 1, 3})), "grid_sample");
  EXPECT_ERROR_NAMING(ops::grid_sample(f32(d, {2, 1, 3, 3}), f32(d, {1, 1, 1, 2})), "grid_sample");
  EXPECT_ERROR_NAMING(ops::grid_sample(f32(d, {1, 1, 0, 3}), f32(d, {1, 1, 1, 2})), "grid_sample");
}

INSTANTIATE_TEST_SUITE_P(Devices, BadInput, testing::ValuesIn(Device::available()),
                         [](const testing::TestParamInfo<std::string>& i) {
                           std::string s;
                           for (char c : i.param)
                             s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

// Backends that this build or machine lacks are an ember::Error, not a crash.
TEST(BadInputDevices, UnavailableBackendThrows) {
  const auto avail = Device::available();
  const bool has_cuda = std::any_of(avail.begin(), avail.end(),
                                    [](const std::string& n) { return n.rfind("cuda", 0) == 0; });
  if (has_cuda) {
    EXPECT_ERROR_NAMING(Device::cuda(1000), "cuda");
  } else {
    EXPECT_ERROR_NAMING(Device::cuda(), "cuda");
  }
  EXPECT_ERROR_NAMING(Device::cpu().inner(), "inner");
}

}  // namespace
}  // namespace conformance
