// ir::Conv through cuDNN (found at run time, cuda/cudnn.hpp): Forward as
// cudnnConvolutionForward, InputGrad as cudnnConvolutionBackwardData, WeightGrad as
// cudnnConvolutionBackwardFilter, over packed NCHW (NCDHW) tensors; a 1-d convolution is a
// 2-d one of height 1. supports() (cuda_backend.cpp) admits Conv only where
// conv_supported() holds, so elsewhere — no cuDNN, EMBER_CUDA_CUDNN=0, another dtype — the
// tensor layer convolves by Unfold and Matmul.
//
// Note [cuDNN plans]
// The descriptors of a convolution and the algorithm cuDNN's heuristic ranks first
// (cudnnGetConvolution*Algorithm_v7; deterministic algorithms preferred, so a training
// run repeats bit for bit; none needing over 1 GiB of workspace) are made once per plan
// key — pass, dtype, every extent, the window, groups, the math mode — and kept in the
// context, as the GEMM plans are. With EMBER_CUDA_CUDNN_FIND=1 the algorithms are timed on
// the first call of each key instead (cudnnFindConvolution*AlgorithmEx, as PyTorch's
// cudnn.benchmark), within 256 MiB of workspace, and the fastest deterministic one kept.
// f32 runs without TF32 (CUDNN_FMA_MATH, as matmul) unless
// EMBER_CUDA_TF32=1; f16 and bf16 use tensor cores, accumulating in f32; f64 in f64. The
// workspace comes from the stream-ordered allocator for each call.
#include <array>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cuda/cudnn.hpp"
#include "cuda/kernels/gemm.hpp"
#include "cuda/kernels/kernels.hpp"
#include "cuda/profile.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {

#if defined(EMBER_CUDA_HAS_CUDNN)
namespace {

constexpr std::size_t kMaxWorkspace = std::size_t(1) << 30;
constexpr std::size_t kFindWorkspace = std::size_t(256) << 20;

bool find_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("EMBER_CUDA_CUDNN_FIND");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

void check_dnn(const cudnn::Api& api, cudnnStatus_t s, const char* call) {
  if (s != CUDNN_STATUS_SUCCESS)
    fail(std::string("conv: cuDNN ") + call + " failed: " + api.cudnnGetErrorString(s));
}

// The three shapes of a convolution whatever its pass: image [N, C, *in], filter
// [O, C / groups, *kernel], positions [N, O, *out].
struct Geometry {
  Shape image, filter, positions;
};
Geometry geometry_of(const ir::Conv& op, const Shape& out) {
  switch (op.pass) {
    case ir::ConvPass::Forward:
      return {op.x->shape(), op.w->shape(), out};
    case ir::ConvPass::InputGrad:
      return {out, op.w->shape(), op.x->shape()};
    case ir::ConvPass::WeightGrad:
    case ir::ConvPass::Count_:
      break;
  }
  return {op.x->shape(), out, op.w->shape()};
}

// cuDNN's dims of a shape: at least 4 (a 1-d shape gets a height of 1 before its length).
std::vector<int> dims_of(const Shape& s) {
  std::vector<int> d;
  for (std::size_t i = 0; i < s.rank(); ++i) {
    if (s.rank() == 3 && i == 2) d.push_back(1);
    d.push_back(static_cast<int>(s[i]));
  }
  return d;
}
std::vector<int> packed_strides(const std::vector<int>& dims) {
  std::vector<int> st(dims.size(), 1);
  for (std::size_t i = dims.size() - 1; i-- > 0;) st[i] = st[i + 1] * dims[i + 1];
  return st;
}
// A window parameter per cuDNN spatial dim (1-d: the height's `h`, then the length's).
std::vector<int> window_of(const std::vector<std::size_t>& v, int h) {
  std::vector<int> out;
  if (v.size() == 1) out.push_back(h);
  for (std::size_t x : v) out.push_back(static_cast<int>(x));
  return out;
}

cudnnDataType_t data_type(DType t) {
  switch (t) {
    case DType::F64:
      return CUDNN_DATA_DOUBLE;
    case DType::F16:
      return CUDNN_DATA_HALF;
    case DType::BF16:
      return CUDNN_DATA_BFLOAT16;
    default:
      return CUDNN_DATA_FLOAT;
  }
}
cudnnMathType_t math_type(DType t) {
  switch (t) {
    case DType::F16:
    case DType::BF16:
      return CUDNN_TENSOR_OP_MATH;
    case DType::F32:
      return tf32_enabled() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;
    default:
      return CUDNN_DEFAULT_MATH;
  }
}

struct ConvPlan {
  const cudnn::Api* api = nullptr;
  cudnnTensorDescriptor_t image = nullptr, positions = nullptr;
  cudnnFilterDescriptor_t filter = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;
  std::size_t workspace = 0;
  ConvPlan() = default;
  ConvPlan(const ConvPlan&) = delete;
  ConvPlan& operator=(const ConvPlan&) = delete;
  ~ConvPlan() {
    if (!api) return;
    if (image) api->cudnnDestroyTensorDescriptor(image);
    if (positions) api->cudnnDestroyTensorDescriptor(positions);
    if (filter) api->cudnnDestroyFilterDescriptor(filter);
    if (conv) api->cudnnDestroyConvolutionDescriptor(conv);
  }
};

// The context's cuDNN handle (on its stream; never destroyed, as the cuBLASLt handle, so
// nothing runs after the CUDA runtime's teardown at exit) and its plans.
struct ConvPlans {
  std::mutex mu;
  cudnnHandle_t handle = nullptr;
  std::map<std::vector<std::int64_t>, std::unique_ptr<ConvPlan>> map;
  static constexpr std::size_t kMax = 1024;  // then the cache starts over
};

// The first algorithm of the heuristic's ranking that ran here (status success) within
// the workspace cap, deterministic ones first; -1 when there is none.
template <class Perf>
int choose(const Perf* perf, int n, ConvPlan& plan) {
  for (int pass = 0; pass < 2; ++pass) {
    for (int i = 0; i < n; ++i) {
      const Perf& p = perf[i];
      if (p.status != CUDNN_STATUS_SUCCESS || p.memory > kMaxWorkspace) continue;
      if (pass == 0 && p.determinism != CUDNN_DETERMINISTIC) continue;
      plan.algo = static_cast<int>(p.algo);
      plan.workspace = p.memory;
      plan.api->cudnnSetConvolutionMathType(plan.conv, p.mathType);
      return plan.algo;
    }
  }
  return -1;
}

// The operands' addresses, which timing the algorithms (EMBER_CUDA_CUDNN_FIND=1) runs on:
// the image, filter and positions of the pass (its output among them, overwritten).
struct Buffers {
  const void* image;
  const void* filter;
  const void* positions;
  void* out;
};

ConvPlan& plan_for(CudaContext& ctx, const cudnn::Api& api, ConvPlans& plans, const ir::Conv& op,
                   const Geometry& g, DType dt, const Buffers& buf) {
  std::vector<std::int64_t> key{static_cast<std::int64_t>(op.pass), static_cast<std::int64_t>(dt),
                                static_cast<std::int64_t>(math_type(dt)),
                                static_cast<std::int64_t>(op.groups)};
  for (const Shape* s : {&g.image, &g.filter, &g.positions})
    for (std::size_t d : *s) key.push_back(static_cast<std::int64_t>(d));
  for (const auto* v : {&op.window.stride, &op.window.padding, &op.window.dilation})
    for (std::size_t x : *v) key.push_back(static_cast<std::int64_t>(x));
  if (auto it = plans.map.find(key); it != plans.map.end()) return *it->second;
  if (plans.map.size() >= ConvPlans::kMax) plans.map.clear();

  auto p = std::make_unique<ConvPlan>();
  p->api = &api;
  const cudnnDataType_t t = data_type(dt);
  const auto tensor = [&](cudnnTensorDescriptor_t& d, const Shape& s) {
    check_dnn(api, api.cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
    const auto dims = dims_of(s);
    const auto st = packed_strides(dims);
    check_dnn(
        api,
        api.cudnnSetTensorNdDescriptor(d, t, static_cast<int>(dims.size()), dims.data(), st.data()),
        "cudnnSetTensorNdDescriptor");
  };
  tensor(p->image, g.image);
  tensor(p->positions, g.positions);
  check_dnn(api, api.cudnnCreateFilterDescriptor(&p->filter), "cudnnCreateFilterDescriptor");
  const auto fdims = dims_of(g.filter);
  check_dnn(api,
            api.cudnnSetFilterNdDescriptor(p->filter, t, CUDNN_TENSOR_NCHW,
                                           static_cast<int>(fdims.size()), fdims.data()),
            "cudnnSetFilterNdDescriptor");
  check_dnn(api, api.cudnnCreateConvolutionDescriptor(&p->conv),
            "cudnnCreateConvolutionDescriptor");
  const auto pad = window_of(op.window.padding, 0), stride = window_of(op.window.stride, 1),
             dil = window_of(op.window.dilation, 1);
  const cudnnDataType_t compute = dt == DType::F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  check_dnn(api,
            api.cudnnSetConvolutionNdDescriptor(p->conv, static_cast<int>(pad.size()), pad.data(),
                                                stride.data(), dil.data(), CUDNN_CROSS_CORRELATION,
                                                compute),
            "cudnnSetConvolutionNdDescriptor");
  check_dnn(api, api.cudnnSetConvolutionGroupCount(p->conv, static_cast<int>(op.groups)),
            "cudnnSetConvolutionGroupCount");
  check_dnn(api, api.cudnnSetConvolutionMathType(p->conv, math_type(dt)),
            "cudnnSetConvolutionMathType");

  int found = 0, algo = -1;
  std::shared_ptr<CudaTensor> ws;
  if (find_enabled()) {
    try {
      ws = ctx.empty(Shape{kFindWorkspace}, DType::U8);
    } catch (const Error&) {  // no room to time them: the heuristic's choice
      ws = nullptr;
    }
  }
  void* wsp = ws ? static_cast<void*>(ws->data()) : nullptr;
  switch (op.pass) {
    case ir::ConvPass::Forward: {
      std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perf{};
      if (ws)
        check_dnn(
            api,
            api.cudnnFindConvolutionForwardAlgorithmEx(
                plans.handle, p->image, buf.image, p->filter, buf.filter, p->conv, p->positions,
                buf.out, int(perf.size()), &found, perf.data(), wsp, kFindWorkspace),
            "cudnnFindConvolutionForwardAlgorithmEx");
      else
        check_dnn(api,
                  api.cudnnGetConvolutionForwardAlgorithm_v7(plans.handle, p->image, p->filter,
                                                             p->conv, p->positions,
                                                             int(perf.size()), &found, perf.data()),
                  "cudnnGetConvolutionForwardAlgorithm_v7");
      algo = choose(perf.data(), found, *p);
      break;
    }
    case ir::ConvPass::InputGrad: {
      std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perf{};
      if (ws)
        check_dnn(
            api,
            api.cudnnFindConvolutionBackwardDataAlgorithmEx(
                plans.handle, p->filter, buf.filter, p->positions, buf.positions, p->conv, p->image,
                buf.out, int(perf.size()), &found, perf.data(), wsp, kFindWorkspace),
            "cudnnFindConvolutionBackwardDataAlgorithmEx");
      else
        check_dnn(api,
                  api.cudnnGetConvolutionBackwardDataAlgorithm_v7(
                      plans.handle, p->filter, p->positions, p->conv, p->image, int(perf.size()),
                      &found, perf.data()),
                  "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      algo = choose(perf.data(), found, *p);
      break;
    }
    case ir::ConvPass::WeightGrad:
    case ir::ConvPass::Count_: {
      std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>
          perf{};
      if (ws)
        check_dnn(
            api,
            api.cudnnFindConvolutionBackwardFilterAlgorithmEx(
                plans.handle, p->image, buf.image, p->positions, buf.positions, p->conv, p->filter,
                buf.out, int(perf.size()), &found, perf.data(), wsp, kFindWorkspace),
            "cudnnFindConvolutionBackwardFilterAlgorithmEx");
      else
        check_dnn(api,
                  api.cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                      plans.handle, p->image, p->positions, p->conv, p->filter, int(perf.size()),
                      &found, perf.data()),
                  "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      algo = choose(perf.data(), found, *p);
      break;
    }
  }
  EMBER_CHECK(algo >= 0, std::string("conv: cuDNN has no algorithm for the ") + ir::name(op.pass) +
                             " pass of image " + g.image.to_string() + ", filter " +
                             g.filter.to_string() + " in " + name(dt) +
                             " (EMBER_CUDA_CUDNN=0 convolves without cuDNN)");
  return *plans.map.emplace(std::move(key), std::move(p)).first->second;
}

// x as a packed tensor at an address cuDNN's kernels can load vectors from.
std::shared_ptr<const CudaTensor> packed(CudaContext& ctx, const ir::Handle& h) {
  const auto& t = as_cuda(h);
  if (t.is_contiguous() && reinterpret_cast<std::uintptr_t>(t.data()) % 256 == 0)
    return std::static_pointer_cast<const CudaTensor>(h);
  auto out = ctx.empty(t.shape(), t.dtype());
  ctx.copy(t, *out);
  return out;
}

bool fits_int(const Shape& s) {
  if (s.num_elements() >= (std::size_t(1) << 31)) return false;
  for (std::size_t d : s)
    if (d == 0 || d >= (std::size_t(1) << 31)) return false;
  return true;
}

}  // namespace
#endif

bool conv_supported(const ir::Conv& op, int arch) {
#if defined(EMBER_CUDA_HAS_CUDNN)
  const DType dt = op.x->dtype();
  if (op.w->dtype() != dt) return false;
  if (!(dt == DType::F32 || dt == DType::F64 || dt == DType::F16 ||
        (dt == DType::BF16 && arch >= 80)))
    return false;
  const std::size_t rank = op.x->shape().rank();
  if (rank < 3 || rank > 5 || op.w->shape().rank() != rank || op.groups < 1) return false;
  const Shape out = ir::out_shape(op);
  if (!fits_int(op.x->shape()) || !fits_int(op.w->shape()) || !fits_int(out)) return false;
  for (const auto* v : {&op.window.stride, &op.window.padding, &op.window.dilation})
    for (std::size_t x : *v)
      if (x >= (std::size_t(1) << 30)) return false;
  return cudnn::available();
#else
  (void)op;
  (void)arch;
  return false;
#endif
}

ir::Handle run(CudaContext& ctx, ir::Conv& op) {
#if defined(EMBER_CUDA_HAS_CUDNN)
  const cudnn::Api* api = cudnn::api();
  EMBER_CHECK(api, "conv: cuDNN is not available (" + cudnn::reason() + ")");
  const DType dt = op.x->dtype();
  auto out = ctx.empty(ir::out_shape(op), dt);
  const Geometry g = geometry_of(op, out->shape());
  auto x = packed(ctx, op.x);
  auto w = packed(ctx, op.w);
  if (!ctx.conv_plans) ctx.conv_plans = std::make_shared<ConvPlans>();
  auto& plans = *static_cast<ConvPlans*>(ctx.conv_plans.get());
  std::lock_guard lk(plans.mu);
  if (!plans.handle) {
    check_dnn(*api, api->cudnnCreate(&plans.handle), "cudnnCreate");
    check_dnn(*api, api->cudnnSetStream(plans.handle, ctx.stream()), "cudnnSetStream");
  }
  Buffers buf{x->data(), w->data(), x->data(), out->data()};
  switch (op.pass) {
    case ir::ConvPass::Forward:
      buf = {x->data(), w->data(), out->data(), out->data()};
      break;
    case ir::ConvPass::InputGrad:
      buf = {out->data(), w->data(), x->data(), out->data()};
      break;
    case ir::ConvPass::WeightGrad:
    case ir::ConvPass::Count_:
      buf = {x->data(), out->data(), w->data(), out->data()};
      break;
  }
  const ConvPlan& p = plan_for(ctx, *api, plans, op, g, dt, buf);
  std::shared_ptr<CudaTensor> ws;
  if (p.workspace) ws = ctx.empty(Shape{p.workspace}, DType::U8);
  void* wsp = ws ? static_cast<void*>(ws->data()) : nullptr;
  const float one_f = 1.f, zero_f = 0.f;
  const double one_d = 1.0, zero_d = 0.0;
  const bool f64 = dt == DType::F64;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  if (profile::enabled()) profile::count(profile::Counter::Cudnn);
  switch (op.pass) {
    case ir::ConvPass::Forward:
      check_dnn(
          *api,
          api->cudnnConvolutionForward(plans.handle, alpha, p.image, x->data(), p.filter, w->data(),
                                       p.conv, static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), wsp,
                                       p.workspace, beta, p.positions, out->data()),
          "cudnnConvolutionForward");
      break;
    case ir::ConvPass::InputGrad:
      check_dnn(*api,
                api->cudnnConvolutionBackwardData(
                    plans.handle, alpha, p.filter, w->data(), p.positions, x->data(), p.conv,
                    static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), wsp, p.workspace, beta,
                    p.image, out->data()),
                "cudnnConvolutionBackwardData");
      break;
    case ir::ConvPass::WeightGrad:
    case ir::ConvPass::Count_:
      check_dnn(*api,
                api->cudnnConvolutionBackwardFilter(
                    plans.handle, alpha, p.image, x->data(), p.positions, w->data(), p.conv,
                    static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo), wsp, p.workspace, beta,
                    p.filter, out->data()),
                "cudnnConvolutionBackwardFilter");
      break;
  }
  return out;
#else
  (void)ctx;
  (void)op;
  fail("Cuda: Conv runs through cuDNN, and this build has no cudnn.h (supports() refuses it)");
#endif
}

}  // namespace ember::cuda
