// matmul through cuBLASLt. Row-major C = A·B is computed as the column-major C^T = B^T·A^T,
// so row-major operands need no transpose and transposed views (column stride != 1 but row
// stride 1) become cuBLAS transposes, without copies. Batch dims collapse to one strided
// batch where they can; a batch broadcast over a row-major A folds into m (x @ W); other
// batch layouts loop.
#include <cublasLt.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda/kernels/gemm.hpp"
#include "cuda/kernels/kernels.hpp"
#include "cuda/profile.hpp"
#include "ember/base/error.hpp"

namespace ember::cuda {
namespace {

void check_lt(cublasStatus_t s, const char* op, const char* call) {
  if (s != CUBLAS_STATUS_SUCCESS) {
    fail(std::string(op) + ": cuBLASLt " + call + " failed: " + cublasLtGetStatusName(s) + ": " +
         cublasLtGetStatusString(s));
  }
}

cudaDataType_t data_type(DType t) {
  switch (t) {
    case DType::F64:
      return CUDA_R_64F;
    case DType::F16:
      return CUDA_R_16F;
    case DType::BF16:
      return CUDA_R_16BF;
    default:
      return CUDA_R_32F;
  }
}

// One operand in column-major terms: rows x cols with leading dim ld, and whether cuBLAS
// transposes it.
struct Mat {
  std::int64_t rows, cols, ld;
  bool trans;
};
// The column-major operand for row-major X (R x C, strides rs/cs) used as X^T (C x R).
bool as_transposed(std::int64_t R, std::int64_t C, std::int64_t rs, std::int64_t cs, Mat& out) {
  if (cs == 1 || C == 1) {  // row-major: X^T is column-major C x R with ld rs
    const std::int64_t ld = R == 1 ? std::max<std::int64_t>(C, 1) : rs;
    if (ld >= std::max<std::int64_t>(C, 1)) {
      out = {C, R, ld, false};
      return true;
    }
  }
  if (rs == 1 || R == 1) {  // column-major X: R x C with ld cs, transposed by cuBLAS
    const std::int64_t ld = C == 1 ? std::max<std::int64_t>(R, 1) : cs;
    if (ld >= std::max<std::int64_t>(R, 1)) {
      out = {R, C, ld, true};
      return true;
    }
  }
  return false;
}

void make_layout(cublasLtMatrixLayout_t& h, cudaDataType_t t, const Mat& m, std::int64_t batch,
                 std::int64_t stride, const char* op) {
  check_lt(cublasLtMatrixLayoutCreate(&h, t, static_cast<std::uint64_t>(m.rows),
                                      static_cast<std::uint64_t>(m.cols), m.ld),
           op, "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    const std::int32_t count = static_cast<std::int32_t>(batch);
    cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
    cublasLtMatrixLayoutSetAttribute(h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                                     sizeof stride);
  }
}

// Note [GEMM plans]
// A cuBLASLt matmul needs a descriptor, three matrix layouts and an algorithm, which
// cublasLtMatmulAlgoGetHeuristic chooses; making them costs several times the host time
// of the matmul call itself, and a training step of a small model makes hundreds of
// GEMMs of a few shapes. So they are made once per plan key — dtype, compute type,
// transposes, epilogue, bias or none, the three layouts (rows, cols, leading dim, batch
// count and stride) and each operand's alignment class — and kept in the context
// (CudaContext::gemm_plans); only the bias pointer is set per call. The heuristic is told
// each pointer's alignment (up to 256 bytes), so no algorithm needing more is chosen for a
// view at an odd offset.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo{};
  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (la) cublasLtMatrixLayoutDestroy(la);
    if (lb) cublasLtMatrixLayoutDestroy(lb);
    if (lc) cublasLtMatrixLayoutDestroy(lc);
    if (desc) cublasLtMatmulDescDestroy(desc);
  }
};

using PlanKey = std::array<std::int64_t, 21>;
struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const {
    std::uint64_t h = 0xcbf29ce484222325ULL;
    for (std::int64_t v : k) h = (h ^ static_cast<std::uint64_t>(v)) * 0x100000001b3ULL;
    return static_cast<std::size_t>(h);
  }
};
struct Plans {
  std::mutex mu;
  std::unordered_map<PlanKey, std::unique_ptr<Plan>, PlanKeyHash> map;
  static constexpr std::size_t kMax = 4096;  // then the cache starts over
};

std::uint32_t alignment(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  const std::uintptr_t low = a & (~a + 1);  // the lowest set bit
  return a == 0 || low >= 256 ? 256u : static_cast<std::uint32_t>(low);
}

}  // namespace

bool tf32_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("EMBER_CUDA_TF32");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
}

void CublasLt::ensure(const char* op) {
  std::lock_guard lk(mu_);
  if (handle_) return;
  constexpr std::size_t kWorkspaceBytes = std::size_t(32) << 20;
  void* ws = nullptr;
  check(cudaMalloc(&ws, kWorkspaceBytes), std::string(op) + ": cuBLASLt workspace");
  cublasLtHandle_t h = nullptr;
  const cublasStatus_t s = cublasLtCreate(&h);
  if (s != CUBLAS_STATUS_SUCCESS) cudaFree(ws);
  check_lt(s, op, "cublasLtCreate");
  workspace_ = ws;
  workspace_bytes_ = kWorkspaceBytes;
  handle_ = h;
}

CublasLt::~CublasLt() {
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
  if (workspace_) cudaFree(workspace_);
}

bool gemm_layout_ok(const GemmArgs& g) {
  Mat x;
  return as_transposed(g.k, g.n, g.b_rs, g.b_cs, x) && as_transposed(g.m, g.k, g.a_rs, g.a_cs, x) &&
         g.ldc >= g.n;
}

void gemm(CudaContext& ctx, const GemmArgs& g, const char* op) {
  Mat ma, mb;  // cuBLAS's A is our B^T, its B our A^T
  EMBER_CHECK(
      as_transposed(g.k, g.n, g.b_rs, g.b_cs, ma) && as_transposed(g.m, g.k, g.a_rs, g.a_cs, mb),
      std::string(op) + ": internal: operand layout not accepted by cuBLASLt");
  CublasLt& lt = ctx.cublas_lt();
  lt.ensure(op);
  auto handle = static_cast<cublasLtHandle_t>(lt.handle());
  std::call_once(ctx.gemm_plans_once, [&] { ctx.gemm_plans = std::make_shared<Plans>(); });
  auto& plans = *static_cast<Plans*>(ctx.gemm_plans.get());
  const cudaDataType_t t = data_type(g.dtype);
  const bool f64 = g.dtype == DType::F64;
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F
          : (g.dtype == DType::F32 && tf32_enabled() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                     : CUBLAS_COMPUTE_32F);
  const cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;
  cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
  switch (g.epilogue) {
    case Epilogue::None:
      break;
    case Epilogue::Relu:
      epi = CUBLASLT_EPILOGUE_RELU;
      break;
    case Epilogue::Gelu:
      epi = CUBLASLT_EPILOGUE_GELU;
      break;
    case Epilogue::Bias:
      epi = CUBLASLT_EPILOGUE_BIAS;
      break;
    case Epilogue::BiasRelu:
      epi = CUBLASLT_EPILOGUE_RELU_BIAS;
      break;
    case Epilogue::BiasGelu:
      epi = CUBLASLT_EPILOGUE_GELU_BIAS;
      break;
  }
  const Mat mc{g.n, g.m, g.ldc, false};
  const std::uint32_t align_a = alignment(g.b), align_b = alignment(g.a), align_c = alignment(g.c);
  const PlanKey key{static_cast<std::int64_t>(g.dtype),
                    static_cast<std::int64_t>(compute),
                    (ma.trans ? 1 : 0) | (mb.trans ? 2 : 0) | (g.bias ? 4 : 0),
                    static_cast<std::int64_t>(epi),
                    ma.rows,
                    ma.cols,
                    ma.ld,
                    mb.rows,
                    mb.cols,
                    mb.ld,
                    mc.rows,
                    mc.cols,
                    mc.ld,
                    g.batch,
                    g.batch > 1 ? g.b_bs : 0,
                    g.batch > 1 ? g.a_bs : 0,
                    g.batch > 1 ? g.c_bs : 0,
                    align_a,
                    align_b,
                    align_c,
                    0};
  std::lock_guard lk(plans.mu);  // a plan's bias pointer is set per call
  auto it = plans.map.find(key);
  if (it == plans.map.end()) {
    if (plans.map.size() >= Plans::kMax) plans.map.clear();
    auto p = std::make_unique<Plan>();
    check_lt(cublasLtMatmulDescCreate(&p->desc, compute, scale), op, "cublasLtMatmulDescCreate");
    const cublasOperation_t ta = ma.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t tb = mb.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
    cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
    if (g.bias) {
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                     sizeof g.bias);
    }
    make_layout(p->la, t, ma, g.batch, g.b_bs, op);
    make_layout(p->lb, t, mb, g.batch, g.a_bs, op);
    make_layout(p->lc, t, mc, g.batch, g.c_bs, op);
    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), op, "cublasLtMatmulPreferenceCreate");
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &lt.workspace_bytes(), sizeof lt.workspace_bytes());
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a,
                                         sizeof align_a);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b,
                                         sizeof align_b);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c,
                                         sizeof align_c);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c,
                                         sizeof align_c);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(handle, p->desc, p->la, p->lb, p->lc,
                                                             p->lc, pref, 1, &result, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (profile::enabled()) profile::count(profile::Counter::GemmHeuristic);
    check_lt(hs, op, "cublasLtMatmulAlgoGetHeuristic");
    EMBER_CHECK(found > 0, std::string(op) + ": cuBLASLt has no algorithm for " + name(g.dtype) +
                               " [" + std::to_string(g.m) + ", " + std::to_string(g.k) + "] x [" +
                               std::to_string(g.k) + ", " + std::to_string(g.n) + "]");
    p->algo = result.algo;
    it = plans.map.emplace(key, std::move(p)).first;
  } else if (g.bias) {
    cublasLtMatmulDescSetAttribute(it->second->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias,
                                   sizeof g.bias);
  }
  const Plan& p = *it->second;
  const float one_f = 1.f, zero_f = 0.f;
  const double one_d = 1.0, zero_d = 0.0;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  if (profile::enabled()) profile::count(profile::Counter::Gemm);
  check_lt(cublasLtMatmul(handle, p.desc, alpha, g.b, p.la, g.a, p.lb, beta, g.c, p.lc, g.c, p.lc,
                          &p.algo, lt.workspace(), lt.workspace_bytes(), ctx.stream()),
           op, "cublasLtMatmul");
}

// The number of cuBLASLt calls run() makes for the collapsed batch space sp: the last
// batch dim is one strided-batched call (or folds into m), the outer ones loop; a last dim
// broadcast in one operand only, that does not fold, loops too.
std::int64_t gemm_calls(const Space& sp, const GemmArgs& g, std::int64_t m, std::int64_t n) {
  const std::size_t nb = sp.shape.size();
  if (nb == 0) return 1;
  std::int64_t outer = 1;
  for (std::size_t i = 0; i + 1 < nb; ++i) outer *= sp.shape[i];
  const std::int64_t last = sp.shape[nb - 1];
  const std::int64_t a_bs = sp.strides[0][nb - 1], b_bs = sp.strides[1][nb - 1],
                     c_bs = sp.strides[2][nb - 1];
  const bool one = last == 1 || (b_bs == 0 && g.a_cs == 1 && a_bs == m * g.a_rs && c_bs == m * n) ||
                   (a_bs != 0 && b_bs != 0);
  return outer * (one ? 1 : last);
}

ir::Handle run(CudaContext& ctx, ir::Matmul& op) {
  std::shared_ptr<const CudaTensor> a = std::static_pointer_cast<const CudaTensor>(op.a);
  std::shared_ptr<const CudaTensor> b = std::static_pointer_cast<const CudaTensor>(op.b);
  const DType dt = a->dtype();
  const std::size_t r = op.out_shape.rank();
  const std::int64_t m = static_cast<std::int64_t>(op.out_shape[r - 2]);
  const std::int64_t n = static_cast<std::int64_t>(op.out_shape[r - 1]);
  const std::int64_t k = static_cast<std::int64_t>(a->shape()[r - 1]);
  auto out = ctx.empty(op.out_shape, dt);
  if (op.out_shape.num_elements() == 0) return out;
  if (k == 0) {
    check(cudaMemsetAsync(out->data(), 0, op.out_shape.num_elements() * size_of(dt), ctx.stream()),
          "matmul");
    return out;
  }
  GemmArgs g;
  g.dtype = dt;
  g.m = m;
  g.n = n;
  g.k = k;
  g.ldc = n;
  // Note [One-row operands]: the row stride of a one-row A means nothing (a contiguous
  // tensor has k there, a view made by a reshape may have 1), so it is taken as the
  // contiguous one: whether a batch of x @ W with W shared folds into one GEMM of batch
  // rows (below) then does not depend on how x was made, and the fused and the plain
  // device, whose operands may be such different views of the same values, run the same
  // GEMM and agree bit for bit (the fusion differential found batches of [1, k] rows run
  // folded on one device and as one GEMM per row on the other).
  const auto set_inner = [&] {
    g.a_rs = a->strides()[r - 2];
    g.a_cs = a->strides()[r - 1];
    g.b_rs = b->strides()[r - 2];
    g.b_cs = b->strides()[r - 1];
    if (m == 1) g.a_rs = g.a_cs * k;
  };
  set_inner();
  if (!gemm_layout_ok(g)) {
    a = ctx.contiguous(op.a);
    b = ctx.contiguous(op.b);
    set_inner();
  }
  // Batch dims (broadcast as stride 0), collapsed.
  const auto batch_space = [&] {
    Space sp;
    sp.strides.resize(3);
    for (std::size_t i = 0; i + 2 < r; ++i) {
      sp.shape.push_back(static_cast<std::int64_t>(op.out_shape[i]));
      sp.strides[0].push_back(a->shape()[i] == 1 ? 0 : a->strides()[i]);
      sp.strides[1].push_back(b->shape()[i] == 1 ? 0 : b->strides()[i]);
      sp.strides[2].push_back(out->strides()[i]);
    }
    sp.collapse();
    return sp;
  };
  Space sp = batch_space();
  // Note [Batched views]: batch dims that do not collapse to one strided batch loop over
  // cuBLASLt calls; attention's per-head views [batch, heads, seq, head_dim] of a
  // [batch, seq, d] projection make one call per batch element. Where copying the
  // non-contiguous operands costs less device time than the calls it saves cost host time
  // (a copy reads and writes each byte once, ~4 TB/s on an H200; a call costs ~4 us of
  // host time: up to 8 MB copied per call saved), they are made contiguous first and the
  // batch collapses to one call.
  if (const std::int64_t calls = gemm_calls(sp, g, m, n); calls > 1) {
    std::size_t copied = 0;
    if (!a->is_contiguous()) copied += a->shape().num_elements() * size_of(dt);
    if (!b->is_contiguous()) copied += b->shape().num_elements() * size_of(dt);
    if (copied > 0 && copied <= std::size_t(calls - 1) * (std::size_t(8) << 20)) {
      if (!a->is_contiguous()) a = ctx.contiguous(std::const_pointer_cast<CudaTensor>(a));
      if (!b->is_contiguous()) b = ctx.contiguous(std::const_pointer_cast<CudaTensor>(b));
      set_inner();
      sp = batch_space();
    }
  }
  const std::size_t e = size_of(dt);
  const auto* abase = static_cast<const std::byte*>(static_cast<const void*>(a->data()));
  const auto* bbase = static_cast<const std::byte*>(static_cast<const void*>(b->data()));
  auto* cbase = static_cast<std::byte*>(static_cast<void*>(out->data()));
  // The last batch dim goes to cuBLASLt's strided batch; outer ones loop.
  const std::size_t nb = sp.shape.size();
  std::int64_t outer = 1;
  for (std::size_t i = 0; i + 1 < nb; ++i) outer *= sp.shape[i];
  const std::int64_t last = sp.shape[nb - 1];
  const std::int64_t a_bs = sp.strides[0][nb - 1], b_bs = sp.strides[1][nb - 1],
                     c_bs = sp.strides[2][nb - 1];
  for (std::int64_t o = 0; o < outer; ++o) {
    std::int64_t ao = 0, bo = 0, co = 0, rem = o;
    for (std::size_t i = nb - 1; i-- > 0;) {
      const std::int64_t c = rem % sp.shape[i];
      rem /= sp.shape[i];
      ao += c * sp.strides[0][i];
      bo += c * sp.strides[1][i];
      co += c * sp.strides[2][i];
    }
    GemmArgs h = g;
    h.a = abase + ao * static_cast<std::int64_t>(e);
    h.b = bbase + bo * static_cast<std::int64_t>(e);
    h.c = cbase + co * static_cast<std::int64_t>(e);
    if (last == 1) {
      gemm(ctx, h);
    } else if (b_bs == 0 && g.a_cs == 1 && a_bs == m * g.a_rs && c_bs == m * n) {
      h.m = m * last;  // x @ W with W shared: one GEMM of batch * m rows
      gemm(ctx, h);
    } else if (a_bs != 0 && b_bs != 0) {
      h.batch = last;
      h.a_bs = a_bs;
      h.b_bs = b_bs;
      h.c_bs = c_bs;
      gemm(ctx, h);
    } else {
      for (std::int64_t i = 0; i < last; ++i) {
        GemmArgs s = h;
        s.a = static_cast<const std::byte*>(h.a) + i * a_bs * static_cast<std::int64_t>(e);
        s.b = static_cast<const std::byte*>(h.b) + i * b_bs * static_cast<std::int64_t>(e);
        s.c = static_cast<std::byte*>(h.c) + i * c_bs * static_cast<std::int64_t>(e);
        gemm(ctx, s);
      }
    }
  }
  return out;
}

}  // namespace ember::cuda
