// The Cuda backend against the Cpu backend: every op family runs on both with the same
// inputs (through the Backend interface, so each IR op is exercised directly) and the
// results are compared — exactly for integer, bool and data-movement results, within a
// dtype's tolerance for float math. Skips where no GPU exists (CI); run on the GPU
// machine with build/tests/test_cuda_ops.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include <cuda_runtime_api.h>

#include "cuda/codegen.hpp"
#include "cuda/context.hpp"
#include "cuda/cuda_backend.hpp"
#include "ember/backend/registry.hpp"
#include "ember/base/error.hpp"
#include "ember/base/tensor_data.hpp"
#include "ember/ir/scalar_table.hpp"

using namespace ember;
using backend::Backend;

namespace {

constexpr DType kFloats[] = {DType::F64, DType::F32, DType::F16, DType::BF16};
constexpr DType kInts[] = {DType::I64, DType::I32, DType::I16, DType::I8, DType::U8};
constexpr DType kAll[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                          DType::I32, DType::I16, DType::I8,  DType::U8,   DType::Bool};

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
      GTEST_SKIP() << "no CUDA device: "
                   << (e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount returned 0");
    }
    cpu = backend::Registry::global().backend("cpu", 0);
    gpu = backend::Registry::global().backend("cuda", 0);
  }

  // Random values of dtype: floats in [-3, 3) with a few NaN/Inf/-0 when `specials`,
  // ints in [lo, hi].
  static TensorData data(const Shape& s, DType dt, unsigned seed = 1, bool specials = true,
                         double lo = -50, double hi = 50) {
    std::mt19937 rng(seed);
    std::vector<double> v(s.num_elements());
    std::uniform_real_distribution<double> u(-3, 3);
    std::uniform_int_distribution<int> ui(static_cast<int>(lo), static_cast<int>(hi));
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (dt == DType::Bool)
        v[i] = ui(rng) % 2;
      else if (is_float(dt))
        v[i] = u(rng);
      else
        v[i] = ui(rng);
    }
    if (specials && is_float(dt) && v.size() > 8) {
      v[1] = std::numeric_limits<double>::quiet_NaN();
      v[3] = std::numeric_limits<double>::infinity();
      v[5] = -std::numeric_limits<double>::infinity();
      v[7] = -0.0;
    }
    return TensorData::from<double>(v, s).convert(dt);
  }

  static double tol(DType dt) {
    switch (dt) {
      case DType::F64:
        return 1e-9;
      case DType::F32:
        return 1e-4;
      case DType::F16:
        return 4e-3;
      case DType::BF16:
        return 2e-2;
      default:
        return 0;
    }
  }

  // Runs make(be) on both backends and compares every output.
  void compare(const std::function<ir::Op(Backend&)>& make, double rtol, const std::string& what) {
    auto c = cpu->execute(make(*cpu));
    auto g = gpu->execute(make(*gpu));
    ASSERT_EQ(c.size(), g.size()) << what;
    for (std::size_t i = 0; i < c.size(); ++i) {
      TensorData dc = cpu->to_data(c[i]), dg = gpu->to_data(g[i]);
      ASSERT_EQ(dc.dtype(), dg.dtype()) << what;
      ASSERT_EQ(dc.shape(), dg.shape()) << what;
      if (rtol == 0) {
        EXPECT_TRUE(dg.approx_eq(dc, 0, 0))
            << what << "\n cuda " << dg.to_string(16) << "\n cpu  " << dc.to_string(16);
      } else {
        EXPECT_TRUE(dg.approx_eq(dc, rtol, rtol))
            << what << "\n cuda " << dg.to_string(16) << "\n cpu  " << dc.to_string(16);
      }
    }
  }

  std::shared_ptr<Backend> cpu, gpu;
};

// A transposed (non-contiguous) view of d's [a, b] data as [b, a] on be.
ir::Handle transposed(Backend& be, const TensorData& d) {
  return be.execute(ir::Permute{be.from_data(d), {1, 0}})[0];
}

}  // namespace

TEST_F(CudaOps, Unary) {
  for (std::size_t f = 0; f < static_cast<std::size_t>(ir::UnaryFn::Count_); ++f) {
    const auto fn = static_cast<ir::UnaryFn>(f);
    for (DType dt : kAll) {
      if (!cuda::unary_supported(fn, dt)) continue;
      const bool pred = ir::sx::gives_bool(fn);
      const DType out = ir::sx::result_dtype(fn, dt);
      const TensorData d = data(Shape{37, 29}, dt, static_cast<unsigned>(f + 1));
      double p0 = 0.1, p1 = 0;
      if (fn == ir::UnaryFn::Clamp) {
        // Integer bounds arrive within the dtype's range (the tensor layer saturates them).
        p0 = dt == DType::U8 ? 0 : -1;
        p1 = 2;
      }
      if (fn == ir::UnaryFn::PowScalar) p0 = 3;
      if (fn == ir::UnaryFn::Elu) p0 = 1.0;
      const std::string what = std::string(ir::name(fn)) + " " + name(dt);
      const double rt = (fn == ir::UnaryFn::Tan || fn == ir::UnaryFn::GeluTanh) && dt == DType::F32
                            ? 1e-3
                            : tol(dt);
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::Unary{fn, be.from_data(d), out, p0, p1};
          },
          pred ? 0 : rt, what + " contiguous");
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::Unary{fn, transposed(be, d), out, p0, p1};
          },
          pred ? 0 : rt, what + " transposed");
    }
  }
}

TEST_F(CudaOps, Binary) {
  for (std::size_t f = 0; f < static_cast<std::size_t>(ir::BinaryFn::Count_); ++f) {
    const auto fn = static_cast<ir::BinaryFn>(f);
    const bool cmp = ir::sx::gives_bool(fn);
    for (DType dt : kAll) {
      if (!cuda::binary_supported(fn, dt)) continue;
      const bool shift = fn == ir::BinaryFn::Shl || fn == ir::BinaryFn::Shr;
      const bool div = fn == ir::BinaryFn::Div || fn == ir::BinaryFn::Rem;
      TensorData a = data(Shape{3, 1, 70}, dt, 3);
      TensorData b = shift ? data(Shape{1, 4, 70}, dt, 4, false, 0, 9)
                           : (div && !is_float(dt) ? data(Shape{1, 4, 70}, dt, 4, false, 1, 9)
                                                   : data(Shape{1, 4, 70}, dt, 4));
      if (fn == ir::BinaryFn::Pow) a = data(Shape{3, 1, 70}, dt, 3, true, 0, 3);
      const DType out = ir::sx::result_dtype(fn, dt);
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::Binary{fn, be.from_data(a), be.from_data(b), Shape{3, 4, 70}, out};
          },
          cmp ? 0 : tol(dt), std::string(ir::name(fn)) + " " + name(dt));
    }
  }
}

TEST_F(CudaOps, IntegerDivisionByZeroIsAnError) {
  const TensorData a = TensorData::from<std::int32_t>({1, 2, 3}, Shape{3});
  const TensorData b = TensorData::from<std::int32_t>({1, 0, 3}, Shape{3});
  auto out = gpu->execute(
      ir::Binary{ir::BinaryFn::Div, gpu->from_data(a), gpu->from_data(b), Shape{3}, DType::I32});
  EXPECT_THROW(gpu->to_data(out[0]), Error);
  // The device keeps working.
  auto ok = gpu->execute(
      ir::Binary{ir::BinaryFn::Add, gpu->from_data(a), gpu->from_data(b), Shape{3}, DType::I32});
  EXPECT_EQ(gpu->to_data(ok[0]).to_vector<std::int32_t>(), (std::vector<std::int32_t>{2, 2, 6}));
}

TEST_F(CudaOps, WhereAndCast) {
  for (DType dt : kAll) {
    const TensorData c = data(Shape{5, 1}, DType::Bool, 9);
    const TensorData a = data(Shape{5, 33}, dt, 10), b = data(Shape{1, 33}, dt, 11);
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::Where{be.from_data(c), be.from_data(a), be.from_data(b), Shape{5, 33}};
        },
        0, std::string("where ") + name(dt));
    for (DType to : kAll) {
      const TensorData x =
          is_float(dt) ? data(Shape{41, 7}, dt, 12, true) : data(Shape{41, 7}, dt, 12);
      TensorData big =
          TensorData::from<double>({1e10, -1e10, 300, -300, 2.5, -2.5, 0.5, 1e-3}, Shape{8})
              .convert(dt);
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::Cast{transposed(be, x), to};
          },
          0, std::string("cast ") + name(dt) + " -> " + name(to));
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::Cast{be.from_data(big), to};
          },
          0, std::string("cast extremes ") + name(dt) + " -> " + name(to));
    }
  }
}

TEST_F(CudaOps, Reductions) {
  for (DType dt : kAll) {
    for (std::size_t f = 0; f < static_cast<std::size_t>(ir::ReduceFn::Count_); ++f) {
      const auto fn = static_cast<ir::ReduceFn>(f);
      if (dt == DType::Bool && fn != ir::ReduceFn::Any && fn != ir::ReduceFn::All &&
          fn != ir::ReduceFn::ArgMax && fn != ir::ReduceFn::ArgMin) {
        continue;
      }
      const bool arg = fn == ir::ReduceFn::ArgMax || fn == ir::ReduceFn::ArgMin;
      const bool boolean = fn == ir::ReduceFn::Any || fn == ir::ReduceFn::All;
      const DType out = arg ? DType::I64 : boolean ? DType::Bool : dt;
      // Products of many values overflow: keep their rows short and values near 1.
      const bool prod = fn == ir::ReduceFn::Prod;
      std::vector<Shape> shapes{Shape{6, 1000}, Shape{4, 37, 3}, Shape{3, 5000}, Shape{2, 0, 3}};
      // Long reduced dims with few outputs take the chunked column path (dim 0 of
      // [1024, 5], dim 1 of [2, 768, 3]); products would overflow in a chunk.
      if (!prod) shapes.insert(shapes.end(), {Shape{1024, 5}, Shape{2, 768, 3}});
      for (const Shape& s : shapes) {
        Shape sp = s;
        if (prod) sp[1] = std::min<std::size_t>(sp[1], 7);
        const TensorData x = data(sp, dt, 21, !arg && !prod, prod ? -2 : -50, prod ? 2 : 50);
        for (std::size_t dim = 0; dim < sp.rank(); ++dim) {
          if (sp[dim] == 0 && (arg || fn == ir::ReduceFn::Max || fn == ir::ReduceFn::Min)) continue;
          const double rt =
              is_float(dt) && !arg
                  ? std::max(tol(dt),
                             fn == ir::ReduceFn::Sum || fn == ir::ReduceFn::Mean ? 1e-3 : 0.0) *
                        (dt == DType::F16 || dt == DType::BF16 ? 4 : 1)
                  : 0;
          compare(
              [&](Backend& be) -> ir::Op {
                return ir::Reduce{fn, be.from_data(x), dim, out};
              },
              rt,
              std::string(ir::name(fn)) + " " + name(dt) + " " + sp.to_string() + " dim " +
                  std::to_string(dim));
        }
      }
    }
  }
}

TEST_F(CudaOps, Scans) {
  for (DType dt : kAll) {
    if (dt == DType::Bool) continue;
    for (std::size_t f = 0; f < static_cast<std::size_t>(ir::ScanFn::Count_); ++f) {
      const auto fn = static_cast<ir::ScanFn>(f);
      const TensorData x = data(Shape{5, 9, 4}, dt, 31, false, -2, 2);
      for (std::size_t dim = 0; dim < 3; ++dim) {
        compare(
            [&](Backend& be) -> ir::Op {
              return ir::Scan{fn, be.from_data(x), dim};
            },
            tol(dt), std::string(ir::name(fn)) + " " + name(dt));
      }
    }
  }
}

TEST_F(CudaOps, Matmul) {
  for (DType dt : kFloats) {
    const double rt = dt == DType::F64 ? 1e-9 : dt == DType::F32 ? 1e-4 : 3e-2;
    const TensorData a = data(Shape{2, 3, 33, 20}, dt, 41, false),
                     b = data(Shape{1, 3, 20, 17}, dt, 42, false);
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::Matmul{be.from_data(a), be.from_data(b), Shape{2, 3, 33, 17}};
        },
        rt, std::string("batched broadcast matmul ") + name(dt));
    const TensorData x = data(Shape{4, 33, 20}, dt, 43, false),
                     w = data(Shape{1, 20, 64}, dt, 44, false);
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::Matmul{be.from_data(x), be.from_data(w), Shape{4, 33, 64}};
        },
        rt, std::string("x @ W ") + name(dt));
    const TensorData p = data(Shape{20, 33}, dt, 45, false), q = data(Shape{17, 20}, dt, 46, false);
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::Matmul{transposed(be, p), transposed(be, q), Shape{33, 17}};
        },
        rt, std::string("transposed matmul ") + name(dt));
    const TensorData one = data(Shape{1, 20}, dt, 47, false),
                     col = data(Shape{20, 1}, dt, 48, false);
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::Matmul{be.from_data(one), be.from_data(col), Shape{1, 1}};
        },
        rt, std::string("dot ") + name(dt));
    // Per-head views [batch, heads, seq, head_dim] of [batch, seq, heads * head_dim], as
    // attention makes them: batch dims that do not collapse (Note [Batched views]).
    const TensorData qs = data(Shape{3, 7, 2, 8}, dt, 49, false),
                     ks = data(Shape{3, 6, 2, 8}, dt, 50, false);
    compare(
        [&](Backend& be) -> ir::Op {
          auto q = be.execute(ir::Permute{be.from_data(qs), {0, 2, 1, 3}})[0];
          auto kt = be.execute(ir::Permute{be.from_data(ks), {0, 2, 3, 1}})[0];
          return ir::Matmul{q, kt, Shape{3, 2, 7, 6}};
        },
        rt, std::string("per-head views matmul ") + name(dt));
  }
}

// Batch norm's two-launch kernels (Note [Channel splits]): shapes whose channels take one
// chunk, several chunks that start inside a run of L (16 x 8 x 33 x 17: 4 chunks of 2244),
// L = 1, a transposed input, absent weight and bias, and the gradient fed each backend's
// own statistics.
TEST_F(CudaOps, BatchNormMatchesCpu) {
  const Shape shapes[] = {Shape{3, 5, 7}, Shape{16, 8, 33, 17}, Shape{300, 3},
                          Shape{32, 64, 16, 16}};
  for (DType dt : kFloats) {
    for (std::size_t k = 0; k < std::size(shapes); ++k) {
      const Shape& s = shapes[k];
      const TensorData x = data(s, dt, 60 + unsigned(k), false);
      const TensorData g = data(s, dt, 70 + unsigned(k), false);
      const TensorData w = data(Shape{s[1]}, dt, 80 + unsigned(k), false);
      const TensorData b = data(Shape{s[1]}, dt, 90 + unsigned(k), false);
      const bool affine = k % 2 == 0;
      const std::string what = "batch_norm " + s.to_string() + " " + name(dt);
      const auto forward = [&](Backend& be) {
        return ir::BatchNorm{be.from_data(x), affine ? be.from_data(w) : ir::Handle{},
                             affine ? be.from_data(b) : ir::Handle{}, 1e-5};
      };
      compare([&](Backend& be) -> ir::Op { return forward(be); }, tol(dt), what);
      compare(
          [&](Backend& be) -> ir::Op {
            auto stats = be.execute(forward(be))[1];
            return ir::BatchNormGrad{be.from_data(x), affine ? be.from_data(w) : ir::Handle{},
                                     stats, be.from_data(g), 1e-5};
          },
          is_half(dt) ? 4 * tol(dt) : 10 * tol(dt), what + " grad");
    }
    const TensorData xt = data(Shape{9, 4}, dt, 99, false);
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::BatchNorm{transposed(be, xt), ir::Handle{}, ir::Handle{}, 1e-5};
        },
        tol(dt), std::string("batch_norm transposed ") + name(dt));
  }
}

// RMS norm's kernels (kernels/norm.cpp, the default; EMBER_CUDA_RMS_NORM=0 turns them off;
// run here directly): rows in registers (7, 33, 1024 and 4096 elements, vector and scalar
// chunks), three rows of 5001 (each split over blocks, Note [Long rows]; rows walked by a
// block are LongRowNormsMatchCpu's), one row, two normalised dims, absent weight, and the
// gradient (dx and dweight over more rows than one dweight chunk).
TEST_F(CudaOps, RmsNormMatchesCpu) {
  const std::pair<Shape, std::size_t> shapes[] = {
      {Shape{3, 7}, 1},    {Shape{1, 33}, 1},    {Shape{64, 1024}, 1}, {Shape{5, 4096}, 1},
      {Shape{3, 5001}, 1}, {Shape{4, 6, 10}, 2}, {Shape{300, 24}, 1}};
  for (DType dt : kFloats) {
    for (std::size_t k = 0; k < std::size(shapes); ++k) {
      const auto& [s, dims] = shapes[k];
      const Shape ns(
          std::vector<std::size_t>(s.dims().end() - std::ptrdiff_t(dims), s.dims().end()));
      const TensorData x = data(s, dt, 160 + unsigned(k), false);
      const TensorData g = data(s, dt, 170 + unsigned(k), false);
      const TensorData w = data(ns, dt, 180 + unsigned(k), false);
      const bool weighted = k % 2 == 0;
      const std::string what = "rms_norm " + s.to_string() + " " + name(dt);
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::RmsNorm{be.from_data(x), weighted ? be.from_data(w) : ir::Handle{}, dims,
                               1e-6};
          },
          tol(dt), what);
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::RmsNormGrad{be.from_data(x), weighted ? be.from_data(w) : ir::Handle{},
                                   be.from_data(g), dims, 1e-6};
          },
          is_half(dt) ? 4 * tol(dt) : 10 * tol(dt), what + " grad");
    }
  }
}

// Note [Long rows] (kernels/norm.cpp): layer norm, RMS norm and RMS norm's gradient with each
// row split over blocks where rows are few and longer than registers hold ([4, 128, 64, 64]
// over its last three dims: 4 rows of 2^19 values; 3 rows of 9000; f64 rows of 3000, which
// the other dtypes hold in registers), and at the threshold: one row fewer than
// kSplitRowsPerSm rows an SM (split) and exactly that many (a block a row); with weight and
// bias, neither, and weight alone (layer norm's bias alone once).
TEST_F(CudaOps, LongRowNormsMatchCpu) {
  cudaDeviceProp prop{};
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  const int sm = prop.multiProcessorCount;
  const std::size_t edge = static_cast<std::size_t>(cuda::kSplitRowsPerSm * sm);
  struct Case {
    Shape x;
    std::size_t dims;
    bool split;  // for f32
  };
  const Case cases[] = {{Shape{4, 128, 64, 64}, 3, true},
                        {Shape{3, 9000}, 1, true},
                        {Shape{5, 3000}, 1, false},
                        {Shape{edge - 1, 5000}, 1, true},
                        {Shape{edge, 5000}, 1, false}};
  for (const Case& c : cases) {
    std::size_t n = 1;
    for (std::size_t d = c.x.rank() - c.dims; d < c.x.rank(); ++d) n *= c.x[d];
    const auto rows = static_cast<std::int64_t>(c.x.num_elements() / n);
    EXPECT_EQ(cuda::split_rows(rows, static_cast<std::int64_t>(n), DType::F32, sm), c.split)
        << c.x.to_string();
  }
  EXPECT_TRUE(cuda::split_rows(5, 3000, DType::F64, sm));
  for (DType dt : kFloats) {
    for (std::size_t k = 0; k < std::size(cases); ++k) {
      const auto& [s, dims, split] = cases[k];
      const Shape ns(
          std::vector<std::size_t>(s.dims().end() - std::ptrdiff_t(dims), s.dims().end()));
      const TensorData x = data(s, dt, 360 + unsigned(k), false);
      const TensorData g = data(s, dt, 370 + unsigned(k), false);
      const TensorData w = data(ns, dt, 380 + unsigned(k), false);
      const TensorData b = data(ns, dt, 390 + unsigned(k), false);
      const bool weighted = k % 3 != 1, biased = k % 3 != 2;
      const std::string what = s.to_string() + " " + name(dt);
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::LayerNorm{be.from_data(x), weighted ? be.from_data(w) : ir::Handle{},
                                 biased ? be.from_data(b) : ir::Handle{}, dims, 1e-5};
          },
          tol(dt), "layer_norm " + what);
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::RmsNorm{be.from_data(x), weighted ? be.from_data(w) : ir::Handle{}, dims,
                               1e-6};
          },
          tol(dt), "rms_norm " + what);
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::RmsNormGrad{be.from_data(x), weighted ? be.from_data(w) : ir::Handle{},
                                   be.from_data(g), dims, 1e-6};
          },
          is_half(dt) ? 4 * tol(dt) : 10 * tol(dt), "rms_norm grad " + what);
    }
  }
}

// Group norm's kernels (kernels/norm.cpp, Note [Group splits]; the default in supports(),
// off with EMBER_CUDA_GROUP_NORM=0, read at each call, which this test sets and clears): one
// group, a group a channel and in between; L = 1 and long runs; one sample and many; with
// weight and bias, neither, and weight alone; units of one value, units cut into several
// chunks that start inside a channel's run (1 x 3 x 50 x 100, one unit of 15000 values), and
// long units ([2, 32, 256, 256] in 32 groups: 64 units of 65536 values); the gradient fed
// each backend's own statistics.
TEST_F(CudaOps, GroupNormMatchesCpu) {
  struct Case {
    Shape x;
    std::size_t groups;
  };
  const Case cases[] = {
      {Shape{2, 6, 5, 7}, 3},    {Shape{1, 8, 33, 17}, 1},   {Shape{4, 12}, 12},
      {Shape{300, 6}, 2},        {Shape{3, 16, 9}, 16},      {Shape{1, 3, 50, 100}, 3},
      {Shape{5, 4, 3, 1, 2}, 2}, {Shape{32, 64, 16, 16}, 8}, {Shape{2, 32, 256, 256}, 32}};
  const auto probe = [&](std::size_t groups) {
    const TensorData x = data(Shape{2, 4, 3}, DType::F32, 1, false);
    return ir::Op(ir::GroupNorm{gpu->from_data(x), ir::Handle{}, ir::Handle{}, groups, 1e-5});
  };
  ASSERT_EQ(setenv("EMBER_CUDA_GROUP_NORM", "0", 1), 0);
  EXPECT_FALSE(gpu->supports(probe(2))) << "EMBER_CUDA_GROUP_NORM=0 turns the kernels off";
  ASSERT_EQ(unsetenv("EMBER_CUDA_GROUP_NORM"), 0);
  EXPECT_TRUE(gpu->supports(probe(2))) << "group norm's kernels are the default";
  for (DType dt : kFloats) {
    for (std::size_t k = 0; k < std::size(cases); ++k) {
      const auto& [s, groups] = cases[k];
      const TensorData x = data(s, dt, 260 + unsigned(k), false);
      const TensorData g = data(s, dt, 270 + unsigned(k), false);
      const TensorData w = data(Shape{s[1]}, dt, 280 + unsigned(k), false);
      const TensorData b = data(Shape{s[1]}, dt, 290 + unsigned(k), false);
      const bool weighted = k % 3 != 1, biased = k % 3 == 0;
      const std::string what =
          "group_norm " + s.to_string() + " groups " + std::to_string(groups) + " " + name(dt);
      const auto forward = [&](Backend& be) {
        return ir::GroupNorm{be.from_data(x), weighted ? be.from_data(w) : ir::Handle{},
                             biased ? be.from_data(b) : ir::Handle{}, groups, 1e-5};
      };
      compare([&](Backend& be) -> ir::Op { return forward(be); }, tol(dt), what);
      compare(
          [&](Backend& be) -> ir::Op {
            auto stats = be.execute(forward(be))[1];
            return ir::GroupNormGrad{be.from_data(x), weighted ? be.from_data(w) : ir::Handle{},
                                     stats,           be.from_data(g),
                                     groups,          1e-5};
          },
          is_half(dt) ? 4 * tol(dt) : 10 * tol(dt), what + " grad");
    }
  }
  ASSERT_EQ(unsetenv("EMBER_CUDA_GROUP_NORM"), 0);
}

TEST_F(CudaOps, LayoutViewsAndCopies) {
  for (DType dt : {DType::F32, DType::F16, DType::I64, DType::Bool, DType::I8}) {
    const TensorData x = data(Shape{4, 6, 5}, dt, 51);
    compare(
        [&](Backend& be) -> ir::Op {
          auto p = be.execute(ir::Permute{be.from_data(x), {2, 0, 1}})[0];
          return ir::Reshape{p, Shape{5, 24}};
        },
        0, std::string("permute+reshape ") + name(dt));
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::Slice{be.from_data(x), {{1, 4, 2}, {0, 6, 3}, {1, 5, 1}}};
        },
        0, std::string("slice ") + name(dt));
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::Flip{be.from_data(x), {0, 2}};
        },
        0, std::string("flip ") + name(dt));
    const TensorData e = data(Shape{4, 1, 5}, dt, 52);
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::Expand{be.from_data(e), Shape{4, 3, 5}};
        },
        0, std::string("expand ") + name(dt));
    const TensorData v = data(Shape{2, 3, 5}, dt, 53);
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::SliceAssign{
              be.from_data(x), {{1, 4, 2}, {0, 6, 2}, {0, 5, 1}}, be.from_data(v)};
        },
        0, std::string("slice_assign ") + name(dt));
    const TensorData y = data(Shape{4, 2, 5}, dt, 54);
    compare(
        [&](Backend& be) -> ir::Op {
          auto t = be.execute(ir::Flip{be.from_data(y), {1}})[0];
          return ir::Cat{{be.from_data(x), t, be.from_data(x)}, 1, Shape{4, 14, 5}};
        },
        0, std::string("cat ") + name(dt));
  }
}

TEST_F(CudaOps, Indexing) {
  for (DType dt : {DType::F32, DType::F64, DType::BF16, DType::I32, DType::I8, DType::Bool}) {
    const TensorData x = data(Shape{5, 7, 3}, dt, 61, false);
    std::vector<std::int64_t> iv;
    for (int i = 0; i < 5 * 4 * 3; ++i) iv.push_back((i * 5) % 7);
    const TensorData idx = TensorData::from(iv, Shape{5, 4, 3});
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::Gather{be.from_data(x), 1, be.from_data(idx)};
        },
        0, std::string("gather ") + name(dt));
    const TensorData src = data(Shape{5, 4, 3}, dt, 62, false);
    for (bool add : {false, true}) {
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::Scatter{be.from_data(x), 1, be.from_data(idx), be.from_data(src), add};
          },
          tol(dt), std::string(add ? "scatter_add " : "scatter ") + name(dt));
    }
    const TensorData sel = TensorData::from<std::int64_t>({6, 0, 2, 2, 5}, Shape{5});
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::IndexSelect{be.from_data(x), 1, be.from_data(sel)};
        },
        0, std::string("index_select ") + name(dt));
    const TensorData src2 = data(Shape{5, 5, 3}, dt, 63, false);
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::IndexAdd{be.from_data(x), 1, be.from_data(sel), be.from_data(src2)};
        },
        tol(dt), std::string("index_add ") + name(dt));
    if (dt == DType::F32 || dt == DType::BF16) {
      // An output over 2^22 elements takes the column kernel (Note [Index add by rows]);
      // duplicate indices add in index order on both.
      const TensorData big = data(Shape{4100, 1025}, dt, 66, false);
      const TensorData rows = TensorData::from<std::int64_t>({7, 4099, 0, 7, 12}, Shape{5});
      const TensorData src3 = data(Shape{5, 1025}, dt, 67, false);
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::IndexAdd{be.from_data(big), 0, be.from_data(rows), be.from_data(src3)};
          },
          tol(dt), std::string("index_add by columns ") + name(dt));
    }
    compare([&](Backend& be) -> ir::Op { return ir::Nonzero{be.from_data(x)}; }, 0,
            std::string("nonzero ") + name(dt));
    for (bool desc : {false, true}) {
      compare(
          [&](Backend& be) -> ir::Op {
            return ir::Sort{be.from_data(data(Shape{5, 7, 3}, dt, 64)), 1, desc};
          },
          0, std::string("sort ") + name(dt));
    }
  }
}

// More dims than the Cuda indexing kernels address (kMaxDims): supports() says no, and
// execute runs the op on the registry's fallback (the Cpu) through host copies.
TEST_F(CudaOps, IndexingBeyondKernelRankRunsOnTheFallback) {
  const Shape s{2, 1, 2, 1, 2, 1, 2, 1, 3};
  ASSERT_GT(s.rank(), static_cast<std::size_t>(cuda::kMaxDims));
  const TensorData x = data(s, DType::F32, 65, false);
  std::vector<std::int64_t> iv;
  for (std::size_t i = 0; i < s.num_elements(); ++i) iv.push_back(static_cast<int>(i * 7 % 3));
  const TensorData idx = TensorData::from(iv, s);
  EXPECT_FALSE(gpu->supports(ir::Gather{gpu->from_data(x), 8, gpu->from_data(idx)}));
  EXPECT_TRUE(cpu->supports(ir::Gather{cpu->from_data(x), 8, cpu->from_data(idx)}));
  compare(
      [&](Backend& be) -> ir::Op {
        return ir::Gather{be.from_data(x), 8, be.from_data(idx)};
      },
      0, "gather of 9 dims");
  compare([&](Backend& be) -> ir::Op { return ir::Nonzero{be.from_data(x)}; }, 0,
          "nonzero of 9 dims");
}

// Device sort against the Cpu's stable sort: every dtype, both directions, each dim of a
// 3-d tensor (strided rows), row lengths on both sides of the shared-memory limit and
// of powers of two, and many ties (values drawn from a small set) so stability shows.
TEST_F(CudaOps, SortMatchesCpu) {
  // Values in {-2, ..., 2} (u8: {0, 1, 2}; bool: {0, 1}) so ties are common, with NaN, -0
  // and +-inf among float values.
  const auto ties = [](const Shape& s, DType dt, unsigned seed) {
    std::mt19937 rng(seed);
    std::vector<double> v(s.num_elements());
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = double(int(rng() % 5) - 2);
      if (!is_float(dt)) continue;
      if (i % 7 == 3) v[i] = std::numeric_limits<double>::quiet_NaN();
      if (i % 9 == 4) v[i] = -0.0;
      if (i % 13 == 6) v[i] = (i % 2 ? 1 : -1) * std::numeric_limits<double>::infinity();
    }
    return TensorData::from<double>(v, s).convert(dt);
  };
  for (DType dt : kAll) {
    for (bool desc : {false, true}) {
      for (std::size_t dim : {0, 1, 2}) {
        const TensorData x = ties(Shape{6, 33, 5}, dt, 81 + unsigned(dim));
        compare(
            [&](Backend& be) -> ir::Op {
              return ir::Sort{be.from_data(x), dim, desc};
            },
            0, std::string("sort ") + name(dt) + " dim " + std::to_string(dim));
      }
      // Rows below, at and above the shared-memory limit (2048).
      for (std::size_t n : {1, 2, 3, 2048, 2049, 5000}) {
        const TensorData x = ties(Shape{3, n}, dt, 90);
        compare(
            [&](Backend& be) -> ir::Op {
              return ir::Sort{be.from_data(x), 1, desc};
            },
            0, std::string("sort ") + name(dt) + " n " + std::to_string(n));
      }
    }
  }
  // Random f32 (few ties), and special values kept bit for bit along a long non-last dim
  // (the global network).
  for (bool desc : {false, true}) {
    const TensorData x = data(Shape{4, 3000}, DType::F32, 93);
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::Sort{be.from_data(x), 1, desc};
        },
        0, "sort f32 random");
  }
  std::vector<float> v(3 * 3000);
  std::mt19937 rng(5);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(int(rng() % 7) - 3);
  for (std::size_t i = 0; i < v.size(); i += 11) v[i] = std::numeric_limits<float>::quiet_NaN();
  for (std::size_t i = 5; i < v.size(); i += 13) v[i] = -0.0f;
  const TensorData x = TensorData::from(v, Shape{3000, 3});
  for (bool desc : {false, true}) {
    auto c = cpu->execute(ir::Sort{cpu->from_data(x), 0, desc});
    auto g = gpu->execute(ir::Sort{gpu->from_data(x), 0, desc});
    for (std::size_t i = 0; i < 2; ++i) {
      EXPECT_TRUE(gpu->to_data(g[i]) == cpu->to_data(c[i]))  // the same bytes
          << "sort f32 long dim 0, output " << i << (desc ? " descending" : "");
    }
  }
  // Empty rows and an empty batch.
  for (const Shape& s : {Shape{0, 4}, Shape{4, 0}}) {
    compare(
        [&](Backend& be) -> ir::Op {
          return ir::Sort{be.from_data(data(s, DType::F32, 92)), 1, false};
        },
        0, "sort empty " + s.to_string());
  }
}

// Device nonzero against the Cpu: sizes that need one, two and three levels of the tile
// scan (tiles of 1024), sparse and dense inputs, every dtype, rank 0 to 4.
TEST_F(CudaOps, NonzeroMatchesCpu) {
  for (DType dt : kAll) {
    for (const Shape& s : {Shape{}, Shape{1}, Shape{7}, Shape{3, 0}, Shape{5, 7, 3}, Shape{1025},
                           Shape{3, 700, 5}, Shape{2, 3, 4, 5}}) {
      compare([&](Backend& be) -> ir::Op { return ir::Nonzero{be.from_data(data(s, dt, 101))}; }, 0,
              std::string("nonzero ") + name(dt) + " " + s.to_string());
    }
  }
  // Sparse: about one element in 50 is non-zero, across 5 * (2^18 + 1) elements (three
  // scan levels), in f32 with NaN (non-zero) and -0 (zero).
  const std::size_t n = 5 * ((std::size_t(1) << 18) + 1);  // rows of 5
  std::vector<float> v(n, 0.0f);
  std::mt19937 rng(7);
  std::size_t expected = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned r = rng() % 100;
    if (r == 0) v[i] = std::numeric_limits<float>::quiet_NaN();
    if (r == 1) v[i] = 2.5f;
    if (r == 2) v[i] = -0.0f;
    expected += r < 2;
  }
  const TensorData x = TensorData::from(v, Shape{n / 5, 5});
  auto out = gpu->execute(ir::Nonzero{gpu->from_data(x)});
  EXPECT_EQ(out[0]->shape(), (Shape{expected, 2}));
  compare([&](Backend& be) -> ir::Op { return ir::Nonzero{be.from_data(x)}; }, 0,
          "nonzero sparse f32");
  const TensorData dense = TensorData::from(std::vector<std::int32_t>(n, 3), Shape{n});
  compare([&](Backend& be) -> ir::Op { return ir::Nonzero{be.from_data(dense)}; }, 0,
          "nonzero dense i32");
}

// Note [In-place reuse]: a moved-in, sole-owned operand's buffer becomes the output; any
// other reference to it (or a broadcast, view or dtype change) gets a fresh output, and the
// numbers are the same either way (clone invariance).
TEST_F(CudaOps, ElementWiseReusesSoleOwnedOperands) {
  const auto ptr = [](const ir::Handle& h) {
    return static_cast<const cuda::CudaTensor&>(*h).data();
  };
  const TensorData x = data(Shape{37, 65}, DType::F32, 111);
  const TensorData row = data(Shape{1, 65}, DType::F32, 112);
  const TensorData expect_exp =
      cpu->to_data(cpu->execute(ir::Unary{ir::UnaryFn::Exp, cpu->from_data(x), DType::F32})[0]);
  const TensorData expect_add = cpu->to_data(cpu->execute(ir::Binary{
      ir::BinaryFn::Sub, cpu->from_data(row), cpu->from_data(x), Shape{37, 65}, DType::F32})[0]);

  ir::Handle h = gpu->from_data(x);
  const std::byte* p = ptr(h);
  ir::Handle e = gpu->execute(ir::Unary{ir::UnaryFn::Exp, std::move(h), DType::F32})[0];
  EXPECT_EQ(ptr(e), p) << "a sole-owned operand is reused";
  EXPECT_TRUE(gpu->to_data(e).approx_eq(expect_exp, 1e-6, 1e-6));

  ir::Handle k = gpu->from_data(x);
  ir::Handle kept = k;  // a second reference
  ir::Handle e2 = gpu->execute(ir::Unary{ir::UnaryFn::Exp, std::move(k), DType::F32})[0];
  EXPECT_NE(ptr(e2), ptr(kept));
  EXPECT_TRUE(gpu->to_data(e2).approx_eq(expect_exp, 1e-6, 1e-6));
  EXPECT_TRUE(gpu->to_data(kept) == x) << "the shared operand is untouched";

  // Broadcast lhs, sole-owned rhs: the output goes into rhs's buffer.
  ir::Handle r = gpu->from_data(x);
  const std::byte* rp = ptr(r);
  ir::Handle s = gpu->execute(ir::Binary{ir::BinaryFn::Sub, gpu->from_data(row), std::move(r),
                                         Shape{37, 65}, DType::F32})[0];
  EXPECT_EQ(ptr(s), rp);
  EXPECT_TRUE(gpu->to_data(s).approx_eq(expect_add, 0, 0));
  // A comparison changes the dtype: no reuse, the right answer.
  ir::Handle c = gpu->from_data(x);
  const std::byte* cp = ptr(c);
  ir::Handle lt = gpu->execute(
      ir::Binary{ir::BinaryFn::Lt, std::move(c), gpu->from_data(x), Shape{37, 65}, DType::Bool})[0];
  EXPECT_NE(ptr(lt), cp);
  EXPECT_TRUE(gpu->to_data(lt).convert(DType::U8) ==
              TensorData::from(std::vector<std::uint8_t>(37 * 65, 0), Shape{37, 65}));
}

TEST_F(CudaOps, OutOfRangeIndexIsAnErrorAtSync) {
  const TensorData x = data(Shape{4, 3}, DType::F32, 71);
  const TensorData bad = TensorData::from<std::int64_t>({0, 4}, Shape{2});
  auto out = gpu->execute(ir::IndexSelect{gpu->from_data(x), 0, gpu->from_data(bad)});
  try {
    gpu->sync();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index 4"), std::string::npos) << e.what();
  }
  auto ok = gpu->execute(ir::Unary{ir::UnaryFn::Neg, gpu->from_data(x), DType::F32});
  EXPECT_NO_THROW(gpu->to_data(ok[0]));
}

TEST_F(CudaOps, Creation) {
  for (DType dt : kAll) {
    compare(
        [&](Backend&) -> ir::Op {
          return ir::Fill{Shape{3, 1000}, dt, -2.5, -7};
        },
        0, std::string("fill ") + name(dt));
    compare(
        [&](Backend&) -> ir::Op {
          return ir::Arange{-3.0, 0.75, 999, dt};
        },
        0, std::string("arange ") + name(dt));
    for (const Distribution& dist : {Distribution::default_(), Distribution::uniform(-2, 5),
                                     Distribution::normal(1, 3), Distribution::bernoulli(0.3)}) {
      cpu->seed(1234);
      gpu->seed(1234);
      compare(
          [&](Backend&) -> ir::Op {
            return ir::Random{Shape{17, 301}, dt, dist};
          },
          is_float(dt) ? std::max(tol(dt), 1e-5) : 0, std::string("random ") + name(dt));
    }
  }
}

TEST_F(CudaOps, AllocatorRecoversFromOutOfMemory) {
  gpu->sync();
  auto keep = gpu->execute(ir::Fill{Shape{1 << 20}, DType::F32, 1.0, 1})[0];
  const auto before = gpu->memory_stats();
  EXPECT_GE(before.in_use, std::size_t(4) << 20);
  EXPECT_GE(before.reserved, before.in_use);
  // 4 TiB: more than any GPU has.
  EXPECT_THROW(gpu->execute(ir::Fill{Shape{std::size_t(1) << 40}, DType::F32, 1.0, 1}), Error);
  auto sum = gpu->execute(ir::Reduce{ir::ReduceFn::Sum, keep, 0, DType::F32})[0];
  EXPECT_EQ(gpu->to_data(sum).to_vector<float>()[0], float(1 << 20));
  // 32 MiB: more than any free block left after the out-of-memory purge, so tmp gets a
  // segment of its own, which is cached when tmp dies and returned by empty_cache.
  const std::size_t tmp_bytes = std::size_t(32) << 20;
  { auto tmp = gpu->execute(ir::Fill{Shape{tmp_bytes / 4}, DType::F32, 0.0, 0})[0]; }
  const auto mid = gpu->memory_stats();
  EXPECT_GE(mid.reserved, mid.in_use + tmp_bytes);  // tmp's segment is cached
  gpu->empty_cache();
  const auto after = gpu->memory_stats();
  EXPECT_LE(after.reserved, mid.reserved - tmp_bytes);
  EXPECT_GE(after.reserved, after.in_use);
  EXPECT_EQ(after.in_use, mid.in_use);
  EXPECT_GE(after.peak, before.in_use + tmp_bytes);
}

// The flash-style attention kernels (kernels/attention.cpp) against the Cpu kernel,
// forward (out and lse) and gradient, ir::Attention and ir::AttentionGrad run directly:
// extents that are no multiple of the kernels' tiles (8 queries, 32 keys), causal with
// Lq != Lk, a Bool mask broadcast over the batch with a row of no keys, an additive mask
// broadcast over the heads, E != Ev, each head-dim bound (32, 64, 128), and seq 2048 at
// head dim 128. The gradient twice: the same bits both times (one writer per row).
TEST_F(CudaOps, AttentionMatchesCpu) {
  // Every dtype's kernels, not only the 16-bit ones the backend takes by default (Note
  // [Attention kernels by default] in cuda_backend.cpp).
  setenv("EMBER_CUDA_ATTENTION", "all", 1);
  struct Restore {
    ~Restore() { unsetenv("EMBER_CUDA_ATTENTION"); }
  } restore;
  enum Mask { kNone, kBool, kFloat };
  struct Case {
    std::size_t b, h, lq, lk, e, ev;
    bool causal;
    Mask mask;
  };
  const Case cases[] = {
      {2, 3, 37, 45, 40, 56, false, kNone},      {2, 3, 37, 45, 40, 56, true, kNone},
      {1, 2, 50, 19, 24, 8, true, kNone},        {2, 2, 29, 70, 16, 30, false, kBool},
      {2, 3, 33, 41, 64, 48, false, kFloat},     {1, 2, 100, 100, 128, 128, true, kFloat},
      {1, 2, 65, 97, 96, 128, false, kBool},     {1, 1, 2048, 2048, 128, 128, false, kNone},
      {1, 1, 2048, 2048, 128, 128, true, kNone},
  };
  for (DType dt : kFloats) {
    for (std::size_t n = 0; n < std::size(cases); ++n) {
      const Case& c = cases[n];
      if (dt == DType::F64 && std::max(c.e, c.ev) > 64) continue;  // f64 kernels: up to 64
      if (c.lq == 2048 && dt != DType::BF16 && dt != DType::F32) continue;
      const auto seed = static_cast<unsigned>(200 + 10 * n);
      const TensorData q = data(Shape{c.b, c.h, c.lq, c.e}, dt, seed, false);
      const TensorData k = data(Shape{c.b, c.h, c.lk, c.e}, dt, seed + 1, false);
      const TensorData v = data(Shape{c.b, c.h, c.lk, c.ev}, dt, seed + 2, false);
      const TensorData g = data(Shape{c.b, c.h, c.lq, c.ev}, dt, seed + 3, false);
      TensorData mask;
      if (c.mask == kBool) {
        TensorData m = data(Shape{c.lq, c.lk}, DType::Bool, seed + 4, false);
        std::vector<double> mv = m.convert(DType::F64).to_vector<double>();
        for (std::size_t j = 0; j < c.lk; ++j) mv[c.lk + j] = 0;  // row 1: no key
        // (of q's rank, as the IR takes it: broadcast over batch and heads)
        mask = TensorData::from<double>(mv, Shape{1, 1, c.lq, c.lk}).convert(DType::Bool);
      } else if (c.mask == kFloat) {
        std::vector<double> mv(c.b * c.lq * c.lk);
        for (std::size_t x = 0; x < mv.size(); ++x)
          mv[x] = x % 11 == 4 ? -std::numeric_limits<double>::infinity() : std::sin(0.37 * x);
        mask = TensorData::from<double>(mv, Shape{c.b, 1, c.lq, c.lk}).convert(dt);
      }
      const double scale = 1.0 / std::sqrt(static_cast<double>(c.e));
      const std::string what = "attention q " + q.shape().to_string() + " k " +
                               k.shape().to_string() + " v " + v.shape().to_string() +
                               (c.causal ? " causal" : "") +
                               (c.mask == kBool    ? " bool mask"
                                : c.mask == kFloat ? " float mask"
                                                   : "") +
                               " " + name(dt);
      const auto forward = [&](Backend& be) {
        return ir::Attention{be.from_data(q), be.from_data(k),
                             be.from_data(v), c.mask == kNone ? ir::Handle{} : be.from_data(mask),
                             c.causal,        scale};
      };
      ASSERT_TRUE(gpu->supports(ir::Op(forward(*gpu)))) << what;
      const double rtol = dt == DType::F64 ? 1e-9 : dt == DType::F32 ? 1e-4 : tol(dt);
      compare([&](Backend& be) -> ir::Op { return forward(be); }, rtol, what);
      const auto backward = [&](Backend& be) -> ir::Op {
        ir::Attention f = forward(be);
        auto outs = be.execute(f);
        return ir::AttentionGrad{f.q,      f.k,  f.v, f.mask, outs[0], outs[1], be.from_data(g),
                                 c.causal, scale};
      };
      ASSERT_TRUE(gpu->supports(backward(*gpu))) << what;
      compare(backward, is_half(dt) ? 2 * rtol : 10 * rtol, what + " grad");
      // Deterministic: the same gradient bits from two runs.
      const ir::Op op = backward(*gpu);
      auto first = gpu->execute(op), second = gpu->execute(op);
      for (std::size_t i = 0; i < 3; ++i) {
        EXPECT_TRUE(gpu->to_data(first[i]).approx_eq(gpu->to_data(second[i]), 0, 0))
            << what << " grad output " << i << " changed between runs";
      }
    }
  }
}
