// The Cuda kernel generators, checked without a GPU: every kernel the generators produce
// for every supported (function, dtype) pair goes through NVRTC for sm_90, so a generator
// bug fails CI on machines that have no GPU. All kernels are compiled as one program to
// PTX with fast-compile settings (seconds); one kernel of each family is also compiled
// to a real CUBIN, the path the backend takes at run time.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <set>

#include "cuda/codegen.hpp"
#include "cuda/compiler.hpp"
#include "ember/base/error.hpp"
#include "ember/ir/scalar_table.hpp"

using namespace ember;
using namespace ember::cuda;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

TEST(CudaCodegen, KernelNamesAreUniqueAndStructural) {
  const auto ks = all_kernels();
  std::set<std::string> names;
  for (const auto& k : ks) {
    EXPECT_TRUE(names.insert(k.name).second) << "duplicate kernel name " << k.name;
    EXPECT_NE(k.body.find(k.name), std::string::npos) << k.name;
  }
  EXPECT_GT(ks.size(), 1000u);
}

// Each kernel family lists its variants (codegen.hpp's variants(), a switch over every
// Family): a family whose case lists nothing would leave its kernels out of the NVRTC
// compile test.
TEST(CudaCodegen, EveryFamilyListsItsVariants) {
  for (std::size_t f = 0; f < static_cast<std::size_t>(Family::Count_); ++f) {
    EXPECT_FALSE(variants(static_cast<Family>(f)).empty())
        << "family " << f << " has no kernel for the NVRTC test";
  }
}

// Every (function, dtype) cell the element-wise table defines is printed, contiguous and
// strided, among the kernels the NVRTC test compiles; no other cell is.
TEST(CudaCodegen, EveryTableCellHasItsKernels) {
  std::set<std::string> names;
  for (const auto& k : all_kernels()) names.insert(k.name);
  const DType dts[] = {DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64,
                       DType::I32, DType::I16, DType::I8,  DType::U8,   DType::Bool};
  std::size_t cells = 0;
  for (DType dt : dts) {
    for (std::size_t f = 0; f < static_cast<std::size_t>(ir::UnaryFn::Count_); ++f) {
      const auto fn = static_cast<ir::UnaryFn>(f);
      const bool defined = ir::sx::defined_for(fn, dt);
      EXPECT_EQ(unary_supported(fn, dt), defined) << ir::name(fn) << " " << name(dt);
      for (bool contiguous : {true, false}) {
        const std::string n =
            std::string("em_unary_") + ir::name(fn) + "_" + name(dt) + (contiguous ? "_c" : "_s");
        EXPECT_EQ(names.count(n), defined ? 1u : 0u) << n;
      }
      if (!defined) {
        EXPECT_THROW(gen_unary(fn, dt, true), Error) << ir::name(fn);
      }
      cells += defined;
    }
    for (std::size_t f = 0; f < static_cast<std::size_t>(ir::BinaryFn::Count_); ++f) {
      const auto fn = static_cast<ir::BinaryFn>(f);
      const bool defined = ir::sx::defined_for(fn, dt);
      EXPECT_EQ(binary_supported(fn, dt), defined) << ir::name(fn) << " " << name(dt);
      for (bool contiguous : {true, false}) {
        const std::string n =
            std::string("em_binary_") + ir::name(fn) + "_" + name(dt) + (contiguous ? "_c" : "_s");
        EXPECT_EQ(names.count(n), defined ? 1u : 0u) << n;
      }
      if (!defined) {
        EXPECT_THROW(gen_binary(fn, dt, true), Error) << ir::name(fn);
      }
      cells += defined;
    }
  }
  EXPECT_GT(cells, 300u);
}

// The kernels print the table's expressions: gelu keeps its tuned f32 form, everything
// else (f64 gelu included) is the expression itself.
TEST(CudaCodegen, ElementwiseKernelsPrintTheTable) {
  EXPECT_NE(gen_unary(ir::UnaryFn::Gelu, DType::F32, true).body.find("em_gelu(x)"),
            std::string::npos);
  EXPECT_NE(gen_unary(ir::UnaryFn::Gelu, DType::BF16, true).body.find("em_gelu(x)"),
            std::string::npos);
  ir::sx::Names x_names;
  x_names.a = "x";
  const auto f64_gelu =
      ir::sx::print(ir::sx::def(ir::UnaryFn::Gelu).flt, ir::sx::Dialect::Cuda, DType::F64, x_names);
  const std::string body = gen_unary(ir::UnaryFn::Gelu, DType::F64, true).body;
  EXPECT_EQ(body.find("em_gelu"), std::string::npos);
  EXPECT_NE(body.find(f64_gelu.value), std::string::npos);
  const auto max =
      ir::sx::print(ir::sx::def(ir::BinaryFn::Max).flt, ir::sx::Dialect::Cuda, DType::F32);
  EXPECT_NE(gen_binary(ir::BinaryFn::Max, DType::F32, false).body.find(max.value),
            std::string::npos);
  // The reductions combine with the same expression (acc, v for a, b).
  EXPECT_NE(gen_reduce(ir::ReduceFn::Max, DType::F32, true)
                .body.find("((acc != acc) || (acc > v)) ? acc : v"),
            std::string::npos);
}

TEST(CudaCodegen, AllKernelsCompileForSm90) {
  const auto ks = all_kernels();
  std::string src = prelude();
  for (const auto& k : ks) src += k.body;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<char> ptx;
  ASSERT_NO_THROW(ptx = compile_ptx_fast(src, 90, "all generated kernels"));
  const std::string text(ptx.begin(), ptx.end());
  for (const auto& k : ks) {
    EXPECT_NE(text.find(".entry " + k.name + "("), std::string::npos) << k.name;
  }
  std::printf("[ codegen ] %zu kernels to PTX for compute_90 in %.1f s\n", ks.size(),
              seconds_since(t0));
}

TEST(CudaCodegen, OneKernelPerFamilyCompilesToCubin) {
  const std::vector<KernelSource> ks = {
      gen_unary(ir::UnaryFn::Gelu, DType::BF16, false),
      gen_binary(ir::BinaryFn::Rem, DType::I8, true),
      gen_where(DType::F16, false),
      gen_cast(DType::F64, DType::I64, true),
      gen_copy(8, false),
      gen_reduce(ir::ReduceFn::ArgMax, DType::F32, true),
      gen_reduce(ir::ReduceFn::Mean, DType::F16, false),
      gen_scan(ir::ScanFn::Max, DType::F64),
      gen_softmax(DType::BF16, true),
      gen_softmax_regs(DType::F32, false, 8, 4),
      gen_layer_norm(DType::F64),
      gen_layer_norm_regs(DType::BF16, 4, 4),
      gen_fill(2),
      gen_arange(DType::I32),
      gen_random(DType::F32),
      gen_gather(4),
      gen_scatter(DType::BF16, true),
      gen_index_select(1),
      gen_index_add(DType::I16),
      gen_sort_rows(DType::F16),
      gen_sort_init(),
      gen_sort_stage(DType::F64),
      gen_sort_write(2),
      gen_nonzero_count(DType::BF16),
      gen_nonzero_write(DType::Bool),
      gen_scan_tiles(),
      gen_add_tile_offsets(),
      gen_unfold(8, false),
      gen_unfold(2, true),
      gen_fold(DType::F16, false),
      gen_fold(DType::F32, true),
  };
  std::string src = prelude();
  for (const auto& k : ks) src += k.body;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<char> cubin;
  ASSERT_NO_THROW(cubin = compile_cubin(src, 90, "one kernel per family"));
  EXPECT_GT(cubin.size(), 1000u);
  std::printf("[ codegen ] %zu kernels to CUBIN for sm_90 in %.1f s\n", ks.size(),
              seconds_since(t0));
}

// A key stands for a kernel's source (CudaContext::launch compiles gen() only on a key's
// first use), so its fields must not overlap and a value too wide for its field must stop
// the launch rather than be cut to another kernel's key.
TEST(CudaCodegen, KernelKeyFieldsAreDisjointAndChecked) {
  // Each field at its widest: the family, then a, b, c, d.
  const std::uint64_t fields[] = {kernel_key(Family{0xff}), kernel_key(Family{}, 0xffff),
                                  kernel_key(Family{}, 0, 0xffff), kernel_key(Family{}, 0, 0, 0xff),
                                  kernel_key(Family{}, 0, 0, 0, 0xffff)};
  std::uint64_t seen = 0;
  for (std::uint64_t f : fields) {
    EXPECT_EQ(seen & f, 0u);
    seen |= f;
  }
  EXPECT_EQ(seen, ~std::uint64_t(0));
  EXPECT_DEATH(kernel_key(Family::Unfold, 0x10000), "invariant");
  EXPECT_DEATH(kernel_key(Family::Unary, 0, 0, 0x100), "invariant");
}

TEST(CudaCodegen, CompileErrorsCarryTheLog) {
  try {
    compile_ptx_fast(prelude() + "extern \"C\" __global__ void bad() { undefined_fn(); }\n", 90,
                     "bad");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undefined_fn"), std::string::npos) << e.what();
  }
}

TEST(CudaCodegen, DiskCacheRebuildsCorruptEntries) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("ember_cuda_cache_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ::setenv("XDG_CACHE_HOME", dir.c_str(), 1);
  const std::string src = full_source(gen_fill(4));
  std::vector<char> first;
  {
    CubinCache cache(1234);
    first = cache.get(src, 90, "fill");
    EXPECT_EQ(cache.compiles(), 1u);
    EXPECT_EQ(&cache.get(src, 90, "fill"), &cache.get(src, 90, "fill"));  // memory hit
    EXPECT_EQ(cache.compiles(), 1u);
  }
  std::filesystem::path entry;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.path().extension() == ".cubin") entry = e.path();
  }
  ASSERT_FALSE(entry.empty());
  {
    CubinCache cache(1234);  // a fresh process: served from disk
    EXPECT_EQ(cache.get(src, 90, "fill"), first);
    EXPECT_EQ(cache.compiles(), 0u);
  }
  {
    // Flip one payload byte: the checksum fails and the entry is rebuilt.
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(100);
    char c = 0;
    f.read(&c, 1);
    f.seekp(100);
    c = static_cast<char>(c ^ 0x5a);
    f.write(&c, 1);
  }
  {
    CubinCache cache(1234);
    EXPECT_EQ(cache.get(src, 90, "fill"), first);
    EXPECT_EQ(cache.compiles(), 1u);
  }
  std::filesystem::resize_file(entry, 40);  // truncated
  {
    CubinCache cache(1234);
    EXPECT_EQ(cache.get(src, 90, "fill"), first);
    EXPECT_EQ(cache.compiles(), 1u);
  }
  {
    CubinCache cache(999);  // another driver: another key
    cache.get(src, 90, "fill");
    EXPECT_EQ(cache.compiles(), 1u);
  }
  std::filesystem::remove_all(dir);
  ::unsetenv("XDG_CACHE_HOME");
}

// Without a GPU (CI) the build still starts and runs on the Cpu, and asking for the GPU
// is a clear error.
#include <ember/ember.hpp>

#include "cuda/cuda_backend.hpp"

TEST(CudaDevice, AbsentGpuIsAnErrorNotACrash) {
  if (cuda::cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is present";
  for (const auto& d : Device::available()) EXPECT_EQ(d.find("cuda"), std::string::npos) << d;
  try {
    (void)Device::cuda(0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
  auto a = Tensor<1>::arange(0, 4, Device::cpu());
  EXPECT_EQ(a.shape(), (Shape{4}));
}
