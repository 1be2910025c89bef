// matmul through cuBLASLt. Row-major C = A·B is computed as the column-major C^T = B^T·A^T,
// so row-major operands need no transpose and transposed views (column stride != 1 but row
// stride 1) become cuBLAS transposes, without copies. Batch dims collapse to one strided
// batch where they can; a batch broadcast over a row-major A folds into m (x @ W); other
// batch layouts loop.
#include <cublasLt.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "cuda/kernels/gemm.hpp"
#include "cuda/kernels/kernels.hpp"
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

bool tf32_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("EMBER_CUDA_TF32");
    return v && std::strcmp(v, "1") == 0;
  }();
  return on;
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

struct Layout {
  cublasLtMatrixLayout_t h = nullptr;
  Layout(cudaDataType_t t, const Mat& m, std::int64_t batch, std::int64_t stride, const char* op) {
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
  ~Layout() {
    if (h) cublasLtMatrixLayoutDestroy(h);
  }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

}  // namespace

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
  const cudaDataType_t t = data_type(g.dtype);
  const bool f64 = g.dtype == DType::F64;
  const cublasComputeType_t compute =
      f64 ? CUBLAS_COMPUTE_64F
          : (g.dtype == DType::F32 && tf32_enabled() ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                     : CUBLAS_COMPUTE_32F);
  const cudaDataType_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;

  cublasLtMatmulDesc_t desc = nullptr;
  check_lt(cublasLtMatmulDescCreate(&desc, compute, scale), op, "cublasLtMatmulDescCreate");
  struct DescGuard {
    cublasLtMatmulDesc_t d;
    ~DescGuard() { cublasLtMatmulDescDestroy(d); }
  } guard{desc};
  const cublasOperation_t ta = ma.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = mb.trans ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
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
  cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi);
  if (g.bias) {
    cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g.bias, sizeof g.bias);
  }

  const Mat mc{g.n, g.m, g.ldc, false};
  Layout la(t, ma, g.batch, g.b_bs, op), lb(t, mb, g.batch, g.a_bs, op),
      lc(t, mc, g.batch, g.c_bs, op);

  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), op, "cublasLtMatmulPreferenceCreate");
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                       &lt.workspace_bytes(), sizeof lt.workspace_bytes());
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(handle, desc, la.h, lb.h, lc.h, lc.h,
                                                           pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check_lt(hs, op, "cublasLtMatmulAlgoGetHeuristic");
  EMBER_CHECK(found > 0, std::string(op) + ": cuBLASLt has no algorithm for " + name(g.dtype) +
                             " [" + std::to_string(g.m) + ", " + std::to_string(g.k) + "] x [" +
                             std::to_string(g.k) + ", " + std::to_string(g.n) + "]");
  const float one_f = 1.f, zero_f = 0.f;
  const double one_d = 1.0, zero_d = 0.0;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  check_lt(cublasLtMatmul(handle, desc, alpha, g.b, la.h, g.a, lb.h, beta, g.c, lc.h, g.c, lc.h,
                          &result.algo, lt.workspace(), lt.workspace_bytes(), ctx.stream()),
           op, "cublasLtMatmul");
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
  const auto set_inner = [&] {
    g.a_rs = a->strides()[r - 2];
    g.a_cs = a->strides()[r - 1];
    g.b_rs = b->strides()[r - 2];
    g.b_cs = b->strides()[r - 1];
  };
  set_inner();
  if (!gemm_layout_ok(g)) {
    a = ctx.contiguous(op.a);
    b = ctx.contiguous(op.b);
    set_inner();
  }
  // Batch dims (broadcast as stride 0), collapsed.
  Space sp;
  sp.strides.resize(3);
  for (std::size_t i = 0; i + 2 < r; ++i) {
    sp.shape.push_back(static_cast<std::int64_t>(op.out_shape[i]));
    sp.strides[0].push_back(a->shape()[i] == 1 ? 0 : a->strides()[i]);
    sp.strides[1].push_back(b->shape()[i] == 1 ? 0 : b->strides()[i]);
    sp.strides[2].push_back(out->strides()[i]);
  }
  sp.collapse();
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
