// The Cuda kernel generators, checked without a GPU: every kernel the generators produce
// for every supported (function, dtype) pair goes through NVRTC for sm_90, so a generator
// bug fails CI on machines that have no GPU. All kernels are compiled as one program to
// PTX with fast-compile settings (seconds); one kernel of each family is also compiled
// to a real CUBIN, the path the backend takes at run time.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <ember/ember.hpp>
#include <ember/fusion/fusion.hpp>
#include "cuda/codegen.hpp"
#include "cuda/codegen/printer.hpp"
#include "cuda/compiler.hpp"
#include "ember/base/error.hpp"
#include "ember/base/hash.hpp"
#include "ember/ir/scalar_table.hpp"
#include "support/forwarding_backend.hpp"

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

// Each kernel family in KernelSpecs lists its variants (Note [Kernel specs] in codegen.hpp):
// a family that listed nothing would leave its kernels out of the NVRTC compile test.
TEST(CudaCodegen, EveryFamilyListsItsVariants) {
  std::size_t families = 0;
  for_each_kernel_spec([&](auto family) {
    ++families;
    EXPECT_FALSE(decltype(family)::type::variants().empty())
        << "family " << families - 1 << " of KernelSpecs has no kernel for the NVRTC test";
  });
  EXPECT_EQ(families, std::tuple_size_v<KernelSpecs>);
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

// The first variant of every family in KernelSpecs, to a real CUBIN.
TEST(CudaCodegen, OneKernelPerFamilyCompilesToCubin) {
  std::vector<KernelSource> ks;
  for_each_kernel_spec(
      [&](auto family) { ks.push_back(decltype(family)::type::variants().front().source()); });
  std::string src = prelude();
  for (const auto& k : ks) src += k.body;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<char> cubin;
  ASSERT_NO_THROW(cubin = compile_cubin(src, 90, "one kernel per family"));
  EXPECT_GT(cubin.size(), 1000u);
  std::printf("[ codegen ] %zu kernels to CUBIN for sm_90 in %.1f s\n", ks.size(),
              seconds_since(t0));
}

// RMS norm's kernels (codegen/rows.cpp) to a real CUBIN, every stage and rows-in-registers
// shape, in f32 and bf16: the four stages of gen_rms_norm take different parameter lists.
TEST(CudaCodegen, RmsNormKernelsCompileToCubin) {
  std::string src = prelude();
  std::size_t n = 0;
  for (const auto& spec : RmsNormKernel::variants()) {
    src += spec.source().body;
    ++n;
  }
  for (const DType dt : {DType::F32, DType::BF16}) {
    for (int ept = 1; ept <= rows_max_ept(dt); ept *= 2) {
      src += gen_rms_norm_regs(dt, ept, 1).body;
      ++n;
    }
  }
  std::vector<char> cubin;
  ASSERT_NO_THROW(cubin = compile_cubin(src, 90, "rms norm kernels"));
  EXPECT_GT(cubin.size(), 1000u);
  EXPECT_EQ(n, 4u * 4u + 8u);  // four stages in four float dtypes; eight regs shapes
}

// Group norm's kernels (Note [Group splits] in codegen/batch_norm.cpp) and the batch norm
// sums they run after, every variant (with the sums of squares and RMS norm's writing pass
// that split long rows, Note [Long rows] in kernels/norm.cpp), to a real CUBIN for sm_90 and
// sm_80.
TEST(CudaCodegen, GroupNormKernelsCompileToCubin) {
  std::string src = prelude();
  std::size_t n = 0;
  const auto add = [&](const auto& variants) {
    for (const auto& spec : variants) {
      src += spec.source().body;
      ++n;
    }
  };
  add(BatchNormSumsKernel::variants());
  add(GroupNormApplyKernel::variants());
  add(GroupNormAffineGradKernel::variants());
  // Four float dtypes, one or four values a thread: sums of three kinds; apply forward and
  // gradient, of group norm and of RMS norm's rows; the affine gradient once each.
  EXPECT_EQ(n, 24u + 32u + 4u);
  for (int arch : {90, 80}) {
    std::vector<char> cubin;
    ASSERT_NO_THROW(cubin = compile_cubin(src, arch, "group norm kernels"));
    EXPECT_GT(cubin.size(), 1000u);
  }
}

// A key stands for a kernel's source (CudaContext::launch prints the spec's source only on
// its key's first use): over every variant of every family, distinct specs have distinct
// keys, and one key one source; an argument too wide for its key field stops the launch
// rather than being cut to another kernel's key.
TEST(CudaCodegen, KernelKeysStandForTheirSources) {
  std::map<std::uint64_t, std::string> by_key;
  std::size_t specs = 0;
  for_each_kernel_spec([&](auto family) {
    for (const auto& spec : decltype(family)::type::variants()) {
      ++specs;
      const KernelSource k = spec.source();
      const auto [it, fresh] = by_key.emplace(spec.key(), k.name);
      EXPECT_TRUE(fresh) << k.name << " has the key of " << it->second;
    }
  });
  std::set<std::string> names;
  for (const auto& [key, name] : by_key) names.insert(name);
  EXPECT_EQ(by_key.size(), specs);
  EXPECT_EQ(names.size(), specs);
  EXPECT_NE(UnfoldKernel(std::size_t{4}, false).key(), UnfoldKernel(std::size_t{4}, true).key());
  EXPECT_DEATH(UnfoldKernel(std::size_t{256}, false).key(), "invariant");
  EXPECT_DEATH(SoftmaxRegsKernel(DType::F32, false, -1, 1).key(), "invariant");
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
#include "cuda/cudnn.hpp"

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

// cuDNN is opened at run time (cuda/cudnn.hpp): where it is found, reason() names its
// version; where not (this machine has no libcudnn, or EMBER_CUDA_CUDNN=0), convolution
// takes the unfold + matmul path and reason() says why.
TEST(CudaCudnn, LoaderSaysWhatItFound) {
  const std::string why = cuda::cudnn::reason();
  if (cuda::cudnn::available()) {
    EXPECT_EQ(why.rfind("cuDNN 9.", 0), 0u) << why;
  } else {
    EXPECT_TRUE(why.find("libcudnn.so.9") != std::string::npos ||
                why.find("EMBER_CUDA_CUDNN=0") != std::string::npos ||
                why.find("without cudnn.h") != std::string::npos)
        << why;
  }
  EXPECT_EQ(cuda::cudnn::reason(), why);  // loaded once
}

// ---- fused element-wise groups (codegen/fused.cpp) ----
namespace {

using backend::FusedInstr;

FusedInstr unary_instr(ir::UnaryFn fn, DType dt, std::int32_t x) {
  FusedInstr in;
  in.kind = FusedInstr::Kind::Unary;
  in.unary = fn;
  in.args = {x, -1, -1};
  in.out = ir::sx::result_dtype(fn, dt);
  return in;
}
FusedInstr binary_instr(ir::BinaryFn fn, DType dt, std::int32_t a, std::int32_t b) {
  FusedInstr in;
  in.kind = FusedInstr::Kind::Binary;
  in.binary = fn;
  in.args = {a, b, -1};
  in.out = ir::sx::result_dtype(fn, dt);
  return in;
}

// The three layout variants of one group: contiguous, contiguous with input 0 one element
// (when it has inputs to spare), strided.
void add_variants(FusedSpec s, const std::string& tag, std::vector<KernelSource>& out) {
  for (int v = 0; v < 3; ++v) {
    if (v == 1 && s.inputs.size() < 2) continue;
    s.contiguous = v < 2;
    s.scalar_mask = v == 1 ? 1u : 0u;
    s.name = fused_name(hash_bytes(tag.data(), tag.size()), s.contiguous, s.scalar_mask);
    out.push_back(gen_fused(s));
  }
}

// Fused kernels covering every cell of the element-wise table: per dtype, every unary
// function of one input, every binary function of two, where and every cast, each result
// an output; and chains that feed values on (16-bit rounding between instructions, mixed
// dtypes, a value used twice, an integer division).
std::vector<KernelSource> fused_kernels() {
  std::vector<KernelSource> out;
  for (DType dt : codegen::kAllDTypes) {
    FusedSpec un, bin, misc;
    un.inputs = {dt};
    bin.inputs = {dt, dt};
    for (std::size_t f = 0; f < static_cast<std::size_t>(ir::UnaryFn::Count_); ++f) {
      const auto fn = static_cast<ir::UnaryFn>(f);
      if (!ir::sx::defined_for(fn, dt)) continue;
      un.code.push_back(unary_instr(fn, dt, 0));
      un.outputs.push_back(static_cast<std::int32_t>(un.code.size()));
    }
    for (std::size_t f = 0; f < static_cast<std::size_t>(ir::BinaryFn::Count_); ++f) {
      const auto fn = static_cast<ir::BinaryFn>(f);
      if (!ir::sx::defined_for(fn, dt)) continue;
      bin.code.push_back(binary_instr(fn, dt, 0, 1));
      bin.outputs.push_back(static_cast<std::int32_t>(1 + bin.code.size()));
    }
    misc.inputs = {dt, DType::Bool, dt};
    FusedInstr w;
    w.kind = FusedInstr::Kind::Where;
    w.args = {1, 0, 2};
    w.out = dt;
    misc.code.push_back(w);
    misc.outputs.push_back(3);
    for (DType to : codegen::kAllDTypes) {
      FusedInstr c;
      c.kind = FusedInstr::Kind::Cast;
      c.args = {3, -1, -1};
      c.out = to;
      misc.code.push_back(c);
      misc.outputs.push_back(static_cast<std::int32_t>(2 + misc.code.size()));
    }
    const std::string d = name(dt);
    if (!un.code.empty()) add_variants(un, "unary " + d, out);
    if (!bin.code.empty()) add_variants(bin, "binary " + d, out);
    add_variants(misc, "where-cast " + d, out);
  }
  // x * 0.5 -> exp -> + x -> cast f32 -> tanh; in f16 and bf16 every step rounds.
  for (DType dt : {DType::F16, DType::BF16, DType::F64}) {
    FusedSpec s;
    s.inputs = {dt, dt};
    s.code = {binary_instr(ir::BinaryFn::Mul, dt, 0, 1), unary_instr(ir::UnaryFn::Exp, dt, 2),
              binary_instr(ir::BinaryFn::Add, dt, 3, 0)};
    FusedInstr c;
    c.kind = FusedInstr::Kind::Cast;
    c.args = {4, -1, -1};
    c.out = DType::F32;
    s.code.push_back(c);
    s.code.push_back(unary_instr(ir::UnaryFn::Gelu, DType::F32, 5));
    s.code.push_back(binary_instr(ir::BinaryFn::Gt, dt, 4, 4));
    s.outputs = {6, 3, 7};
    add_variants(s, std::string("chain ") + name(dt), out);
  }
  {
    FusedSpec s;  // (a / b) % a in i32: both checked
    s.inputs = {DType::I32, DType::I32};
    s.code = {binary_instr(ir::BinaryFn::Div, DType::I32, 0, 1),
              binary_instr(ir::BinaryFn::Rem, DType::I32, 2, 0)};
    s.outputs = {3};
    add_variants(s, "idiv", out);
  }
  return out;
}

}  // namespace

TEST(CudaCodegen, FusedKernelsCompileForSm90) {
  const auto ks = fused_kernels();
  std::set<std::string> names;
  std::string src = prelude();
  for (const auto& k : ks) {
    EXPECT_TRUE(names.insert(k.name).second) << "duplicate kernel name " << k.name;
    src += k.body;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<char> ptx;
  ASSERT_NO_THROW(ptx = compile_ptx_fast(src, 90, "fused kernels"));
  const std::string text(ptx.begin(), ptx.end());
  for (const auto& k : ks) {
    EXPECT_NE(text.find(".entry " + k.name + "("), std::string::npos) << k.name;
  }
  std::printf("[ codegen ] %zu fused kernels to PTX for compute_90 in %.1f s\n", ks.size(),
              seconds_since(t0));
  EXPECT_GT(ks.size(), 80u);
}

// A fused kernel prints each instruction with its single-op kernel's code: the same
// expression text, and each value held in its storage type (16-bit values rounded as
// stored).
TEST(CudaCodegen, FusedKernelsPrintTheSingleOpCode) {
  FusedSpec s;
  s.inputs = {DType::BF16};
  s.code = {unary_instr(ir::UnaryFn::Exp, DType::BF16, 0),
            unary_instr(ir::UnaryFn::Gelu, DType::BF16, 1),
            unary_instr(ir::UnaryFn::Sqrt, DType::BF16, 2)};
  s.outputs = {3};
  s.contiguous = true;
  s.name = fused_name(42, true, 0);
  const std::string body = gen_fused(s).body;
  EXPECT_NE(body.find(codegen::unary_code(ir::UnaryFn::Sqrt, DType::BF16, "e2", "e3")),
            std::string::npos)
      << body;
  EXPECT_NE(body.find("em_gelu(x)"), std::string::npos);
  EXPECT_NE(body.find("h16 e2;"), std::string::npos);
  EXPECT_NE(body.find("e2 = em_f2b("), std::string::npos);
  EXPECT_EQ(s.name, "em_fused_000000000000002a_c");
  // The single-op kernels print the same code over their operands.
  EXPECT_NE(gen_unary(ir::UnaryFn::Exp, DType::BF16, true)
                .body.find(codegen::unary_code(ir::UnaryFn::Exp, DType::BF16, "v0.v[u]", "r.v[u]")),
            std::string::npos);
}

// Note [Fused draws]: a Random instruction prints the Random kernel's generator code, over
// its four parameter words and the element's index, its distribution's kind a constant.
TEST(CudaCodegen, FusedDrawsPrintTheRandomKernelsCode) {
  for (DType dt : {DType::F32, DType::F16, DType::F64, DType::I32}) {
    FusedSpec s;
    s.inputs.push_back(dt);
    backend::FusedInstr r;
    r.kind = backend::FusedInstr::Kind::Random;
    r.dist = Distribution::Kind::Bernoulli;
    r.out = dt;
    s.code = {r, binary_instr(ir::BinaryFn::Mul, dt, 0, 1)};
    s.outputs = {2};
    s.contiguous = true;
    s.name = fused_name(77, true, 0);
    const FusedArgs a = fused_args(s);
    EXPECT_EQ(a.param, (std::vector<int>{a.params, a.params + 4}));
    EXPECT_EQ(a.words, a.params + 6);
    const std::string p = "g.w[" + std::to_string(a.params);
    const std::string body = gen_fused(s).body;
    EXPECT_NE(
        body.find(codegen::random_code(
            dt, "3", "(u64)" + p + " + 2]", "((u64)" + p + " + 3] + (u64)i)",
            "__longlong_as_double(" + p + "])", "__longlong_as_double(" + p + " + 1])", "e1")),
        std::string::npos)
        << body;
    EXPECT_NE(gen_random(dt).body.find(
                  codegen::random_code(dt, "kind", "key", "base + (u64)i", "a", "b", "y[i]")),
              std::string::npos);
    // Note [Bernoulli in its own type]: no double 1.0 : 0.0 for ptxas to select by its high
    // word alone.
    EXPECT_EQ(body.find("? 1.0 : 0.0"), std::string::npos) << body;
    ASSERT_NO_THROW(compile_ptx_fast(prelude() + body, 90, "a fused draw"));
  }
}

// The largest group the fuser makes (16 inputs, 64 instructions, each an output) fits the
// argument block CUDA allows.
// Note [Integer selects on sm_90]: every integer min or max a fused kernel prints goes
// through em_keep, so that ptxas cannot join two of them and drop a negation between them.
TEST(CudaCodegen, IntegerSelectsAreKeptApart) {
  FusedSpec s;
  s.inputs.assign(3, DType::I32);
  FusedInstr neg = unary_instr(ir::UnaryFn::Neg, DType::I32, 0);
  s.code = {neg, binary_instr(ir::BinaryFn::Min, DType::I32, 1, 3),
            binary_instr(ir::BinaryFn::Min, DType::I32, 4, 2)};
  s.outputs = {5};
  s.contiguous = true;
  s.name = fused_name(77, true, 0);
  const std::string body = gen_fused(s).body;
  std::size_t kept = 0;
  for (std::size_t at = body.find("em_keep("); at != std::string::npos;
       at = body.find("em_keep(", at + 1)) {
    ++kept;
  }
  EXPECT_EQ(kept, 4u) << body;  // each min, in the vector loop and in the tail
  ASSERT_NO_THROW(compile_cubin(prelude() + body, 90, "integer mins"));
}

TEST(CudaCodegen, FusedArgumentsFit) {
  FusedSpec s;
  s.inputs.assign(16, DType::F32);
  for (int i = 0; i < 64; ++i) {
    s.code.push_back(binary_instr(ir::BinaryFn::Add, DType::F32, i % 16, (i + 1) % 16));
    s.outputs.push_back(16 + i);
  }
  const FusedArgs a = fused_args(s);
  EXPECT_LE(static_cast<std::size_t>(a.words) * 8, kMaxArgBytes);
  EXPECT_EQ(a.strides, 10);
  EXPECT_EQ(a.inputs, 10 + 16 * kMaxDims);
  EXPECT_EQ(a.words, a.params + 128);
  s.contiguous = true;
  EXPECT_EQ(fused_args(s).strides, -1);
  EXPECT_EQ(fused_args(s).inputs, 10);
}

// Note [No contraction]: x * y + z over two instructions stays a rounded multiply and a
// rounded add (mul.rn / add.rn, which ptxas never contracts), as in two single-op kernels.
TEST(CudaCodegen, FusedMultiplyAddIsNotContracted) {
  FusedSpec s;
  s.inputs = {DType::F32, DType::F32, DType::F32};
  s.code = {binary_instr(ir::BinaryFn::Mul, DType::F32, 0, 1),
            binary_instr(ir::BinaryFn::Add, DType::F32, 3, 2)};
  s.outputs = {4};
  s.contiguous = true;
  s.name = fused_name(9, true, 0);
  const auto ptx = compile_ptx_fast(prelude() + gen_fused(s).body, 90, "mul + add");
  const std::string text(ptx.begin(), ptx.end());
  EXPECT_NE(text.find("mul.rn.f32"), std::string::npos);
  EXPECT_NE(text.find("add.rn.f32"), std::string::npos);
  EXPECT_EQ(text.find("fma.rn.f32"), std::string::npos);
  const auto options = compile_options();
  EXPECT_NE(std::find(options.begin(), options.end(), "--fmad=false"), options.end());
}

TEST(CudaCodegen, FusedKernelCompilesToCubin) {
  FusedSpec s;
  s.inputs = {DType::F16, DType::F16};
  s.code = {binary_instr(ir::BinaryFn::Mul, DType::F16, 0, 1),
            unary_instr(ir::UnaryFn::Tanh, DType::F16, 2)};
  s.outputs = {3};
  std::string src = prelude();
  for (bool c : {true, false}) {
    s.contiguous = c;
    s.name = fused_name(7, c, 0);
    src += gen_fused(s).body;
  }
  std::vector<char> cubin;
  ASSERT_NO_THROW(cubin = compile_cubin(src, 90, "fused kernels"));
  EXPECT_GT(cubin.size(), 1000u);
}

// ---- the groups the fuser makes, printed as Cuda kernels and compiled ----
namespace {

// The Cpu backend, recording the Cuda kernel of every fused group it is handed (each layout
// variant) before running the group itself; it takes the groups the Cuda backend takes.
class RecordingCpu final : public ember::testing::ForwardingBackend {
 public:
  using ForwardingBackend::ForwardingBackend;
  // What the Cuda backend takes: scalar fills as parameters, random draws, row reductions
  // and their epilogues.
  backend::FusedCaps fused_caps() const override {
    return {
        .fills = true, .random = true, .row_reduction = &fused_reduces_rows, .row_epilogue = true};
  }
  std::vector<ir::Handle> run_fused(backend::FusedGroup g) override {
    FusedSpec s = fused_spec(g);
    // A matmul group: cuBLASLt's GEMM, then its epilogue as one kernel (Note [Matmul apart]),
    // as the Cuda backend runs it.
    if (g.starts_with_matmul()) {
      EXPECT_FALSE(fused_supported(s)) << g.signature;
      ++matmuls;
      return backend::run_matmul_apart(*this, std::move(g), [this](backend::FusedGroup p) {
        ++epilogues;
        return run_fused(std::move(p));
      });
    }
    // (a reduction keeping a prologue value runs op by op: not a kernel)
    if (has_row_reduction(s) && !fused_supported(s)) return inner_->run_fused(std::move(g));
    EXPECT_TRUE(fused_supported(s)) << g.signature;
    if (g.has_row_epilogue()) ++epilogues_of_rows;
    if (has_row_norm(s)) {  // a row in registers: the widest and the narrowest chunks,
      // inputs read linearly and through strides (Note [Fused rows over strided inputs])
      for (const bool contiguous : {true, false}) {
        s.contiguous = contiguous;
        for (const auto& [ept, vec] : {std::pair{8, 4}, std::pair{1, 1}}) {
          if (size_of(g.code[g.row_at()].out) == 8 && ept == 8) continue;
          s.name = fused_name(g.key, contiguous, 0) + "_r" + std::to_string(ept) + "v" +
                   std::to_string(vec);
          if (seen.insert(s.name).second) kernels.push_back(gen_fused_rows(s, ept, vec));
        }
      }
      return inner_->run_fused(std::move(g));
    }
    // Two variants a group: strided and contiguous (the scalar variant of each element-wise
    // cell is FusedKernelsCompileForSm90's); a reduction, contiguous and with a scalar input.
    const int first = has_row_reduction(s) ? 1 : 0;
    for (int v = first; v < first + 2; ++v) {
      s.contiguous = v > 0;
      s.scalar_mask = v == 2 ? 1u : 0u;  // input 0 read as one element
      s.name = fused_name(g.key, s.contiguous, s.scalar_mask);
      if (seen.insert(s.name).second) kernels.push_back(gen_fused(s));
    }
    return inner_->run_fused(std::move(g));
  }
  std::set<std::string> seen;
  std::vector<KernelSource> kernels;
  std::size_t matmuls = 0, epilogues = 0, epilogues_of_rows = 0;
};

Tensor<2> ramp(const Device& d, std::size_t r, std::size_t c, float scale, DType dt) {
  std::vector<float> v(r * c);
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = scale * (float(i % 13) - 6.0f) / 5.0f;
  return Tensor<2>::from_data(TensorData::from<float>(v, Shape{r, c}), d).cast(dt);
}

}  // namespace

// Programs over every kind of group input — fresh, broadcast rows and scalars, transposed
// and sliced views — and every instruction kind, in each float dtype and in i32: every
// group the fuser makes of them prints a kernel that NVRTC compiles.
TEST(CudaCodegen, FuserGroupsCompileAsKernels) {
  auto rec = std::make_shared<RecordingCpu>(Device::cpu().backend_ptr());
  const Device d(fusion::make_fusion_backend(rec, fusion::Options{}));
  for (DType dt : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    auto lw = ramp(d, 1, 33, 0.3f, dt).reshape<1>(Shape{33});   // layer norm's weight and bias,
    auto lb = ramp(d, 1, 33, -0.2f, dt).reshape<1>(Shape{33});  // stored first
    lw.to_data();
    lb.to_data();
    auto x = ramp(d, 9, 33, 1.5f, dt);
    auto y = ramp(d, 33, 9, -0.7f, dt).transpose();  // strided
    auto b = ramp(d, 1, 33, 0.4f, dt);               // broadcast rows
    auto z = (activation::sigmoid(x * y + 1.0f) * x).sqrt() - y;
    auto m = z.greater(b);
    auto w = ((b - x).tanh()).mask_where(m, (z * 2.0f).exp());
    auto g = activation::gelu(w + b) * 0.5f;
    auto s =
        x.slice({ops::Range(0, std::nullopt), ops::Range(1, 33, 2)}).abs().clamp(0.1, 0.9) + 1.0f;
    auto c = (g.cast(DType::F32) * 3.0f).cast(dt) + x;
    auto r = ((x - b) * 2.0f).exp().sum_dim(1);  // reductions with a prologue
    auto q = (x * x).tanh().mean_dim(1);
    auto a = (z + b).argmax_dim(1);
    // Reshapes of group values relabel them: the iteration space refines [9, 33] and [3, 99]
    // to [3, 3, 33], x is split to it, b ([1, 33] in frame [9, 33]) to [1, 1, 33].
    auto h = ((x * 0.5f + 1.0f).reshape<2>(Shape{3, 99}).exp() * 2.0f).reshape<2>(Shape{9, 33}) + b;
    h.to_data();
    auto hs = (x * 3.0f).reshape<3>(Shape{3, 3, 33}).exp().sum_dim(2);
    hs.to_data();
    // Softmax and layer norm with their prologue, one keeping a prologue value.
    auto sm = activation::softmax(x * 0.125f + z, 1);
    auto lsm = activation::log_softmax((x - z).tanh(), 1);
    auto res = x + z;
    auto ln = module_ops::layer_norm(res, lw, lb);
    auto ln0 = module_ops::layer_norm(x * 2.0f, Shape{33});
    sm.to_data();
    lsm.to_data();
    ln.to_data();
    ln0.to_data();
    res.to_data();
    // Row epilogues (Note [Fused row epilogues]): a softmax's and a layer norm's consumers,
    // a scaled sum (a row value) and softmax's backward pass (the sum read along the row).
    auto pe = activation::softmax(x * 0.5f, 1) * 2.0f + z;
    auto le = module_ops::layer_norm(x + z, Shape{33}) + x;
    auto se = (x * z).sum_dim(1) * 3.0f;
    auto be = x * (z - (z * x).sum_dim(1));
    auto ae = (Tensor<2>(ops::cast((x - z).exp().argmax_dim(1).dyn(), dt)) + 1.0f) * 0.5f;
    for (auto* t : {&pe, &le, &se, &be}) t->to_data();
    ae.to_data();
    // Matmul epilogues: x·Wᵀ + b then gelu, a residual, a scale and a cast; nn::Linear's
    // [B*T, n] product relabelled as [B, T, n] with its bias.
    auto wt = ramp(d, 5, 33, 0.3f, dt);
    auto mlp = activation::gelu(x.matmul(wt.transpose()) + ramp(d, 1, 5, 0.2f, dt));
    mlp.to_data();
    auto mres = (y.transpose().matmul(y) + ramp(d, 33, 33, 0.1f, dt) * 0.5f).cast(DType::F32);
    mres.to_data();
    auto lin =
        Tensor<3>(nn::detail::linear(x.reshape<3>(Shape{3, 3, 33}).dyn(), wt.dyn(),
                                     ramp(d, 1, 5, 0.6f, dt).reshape<1>(Shape{5}).dyn(), "test"));
    activation::relu(lin).to_data();
    // Random draws as sources (Note [Fused draws]): dropout, noise on a strided input, a
    // reduction of a draw, a draw relabelled by a reshape.
    auto keep = Tensor<2>(ops::random(Shape{9, 33}, Distribution::bernoulli(0.8), dt, d));
    (x * keep * 1.25f).to_data();
    (y + Tensor<2>(ops::random(Shape{9, 33}, Distribution::normal(0, 0.1), dt, d))).to_data();
    Tensor<2>(ops::random(Shape{9, 33}, Distribution::uniform(-1, 1), dt, d))
        .exp()
        .sum_dim(1)
        .to_data();
    ((Tensor<2>(ops::random(Shape{9, 33}, Distribution::default_(), dt, d)) * 2.0f)
         .reshape<2>(Shape{3, 99}) +
     1.0f)
        .to_data();
    r.to_data();
    q.to_data();
    a.to_data();
    c.to_data();
    g.to_data();
    s.to_data();
    z.to_data();
  }
  auto i = Tensor<2, Int>::from_data(
      TensorData::from<std::int32_t>({7, -3, 9, 12, 5, -8}, Shape{2, 3}), d);
  auto j = Tensor<2, Int>::from_data(
      TensorData::from<std::int32_t>({2, 5, -4, 3, 1, 6}, Shape{2, 3}), d);
  ((i / j + i % j) * 3 - j.abs()).to_data();
  (Tensor<2, Int>(ops::random(Shape{2, 3}, Distribution::uniform(-5, 5), DType::I32, d)) + i)
      .to_data();
  (i * j + 2).max_dim(1).to_data();
  ASSERT_GT(rec->kernels.size(), 20u);
  EXPECT_EQ(rec->matmuls, 12u);  // three a dtype, each with its epilogue as one kernel
  EXPECT_EQ(rec->epilogues, 12u);
  std::size_t reductions = 0;  // groups ending in a reduction: the rows kernel's loop
  for (const auto& k : rec->kernels)
    reductions += k.body.find("em_pro(row * n + j)") != std::string::npos;
  EXPECT_GE(reductions, 13u);
  std::size_t row_norms = 0, strided_rows = 0;  // groups ending in softmax or layer norm,
  for (const auto& k : rec->kernels) {          // rows computed, inputs linear or strided
    row_norms += k.body.find("em_pro((R), j, true)") != std::string::npos;
    strided_rows += k.body.find("em_row = [&](i64 R)") != std::string::npos;
  }
  EXPECT_EQ(row_norms, (6u * 4u * 2u - 6u) * 2u);  // f64: no 8 elements a thread
  EXPECT_EQ(strided_rows, 6u * 4u * 2u - 6u);
  // Row epilogues (Note [Fused row epilogues]): printed in the row kernels.
  std::size_t epilogue_kernels = 0;
  for (const auto& k : rec->kernels)
    epilogue_kernels += k.body.find("em_epi(") != std::string::npos;
  // The five groups above a dtype, their layout variants.
  EXPECT_EQ(rec->epilogues_of_rows, 20u);
  EXPECT_EQ(epilogue_kernels, 52u);
  std::size_t fills = 0;  // scalars as parameters: printed as Fill instructions
  for (const auto& k : rec->kernels) fills += k.body.find("memcpy(&e") != std::string::npos;
  EXPECT_GT(fills, 10u);
  std::size_t draws = 0;  // random draws printed in the kernel
  for (const auto& k : rec->kernels) draws += k.body.find("em_mix(") != std::string::npos;
  EXPECT_GE(draws, 20u);
  std::string src = prelude();
  for (const auto& k : rec->kernels) src += k.body;
  std::vector<char> ptx;
  ASSERT_NO_THROW(ptx = compile_ptx_fast(src, 90, "the fuser's groups"));
  const std::string text(ptx.begin(), ptx.end());
  for (const auto& k : rec->kernels) {
    EXPECT_NE(text.find(".entry " + k.name + "("), std::string::npos) << k.name;
  }
  std::printf("[ codegen ] %zu kernels of the fuser's groups compiled\n", rec->kernels.size());
}

// Every attention kernel (codegen/attention.cpp: each stage, dtype and head-dim bound;
// mask kinds and causality are arguments of each) to a CUBIN for sm_90 and sm_80: ptxas
// refuses a kernel whose static shared memory passes the 48 KB a block may declare.
TEST(CudaCodegen, AttentionKernelsCompileToCubin) {
  const auto variants = AttentionKernel::variants();
  // f16, bf16 and f32 at 32, 64 and 128; f64 at 32 and 64; the row-dot pre-pass of each;
  // the tensor-core forward, dk / dv and dq passes of f16 and bf16 at 32, 64 and 128.
  EXPECT_EQ(variants.size(), 3u * (1 + 3 * 3) + (1 + 2 * 3) + 2 * 3 * 3);
  std::string src = prelude();
  for (const auto& spec : variants) src += spec.source().body;
  for (int arch : {90, 80}) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<char> cubin;
    ASSERT_NO_THROW(cubin = compile_cubin(src, arch, "the attention kernels"));
    EXPECT_GT(cubin.size(), 1000u);
    std::printf("[ codegen ] %zu attention kernels to CUBIN for sm_%d in %.1f s\n", variants.size(),
                arch, seconds_since(t0));
  }
}

// The head-dim bound picks the smallest tile holding both head dims, and none past the
// shared-memory limit (CudaBackend::supports sends those to the composite).
TEST(CudaCodegen, AttentionHeadDimBounds) {
  EXPECT_EQ(attention_head_dim_bound(DType::BF16, 0, 0), 32);
  EXPECT_EQ(attention_head_dim_bound(DType::BF16, 32, 1), 32);
  EXPECT_EQ(attention_head_dim_bound(DType::F32, 33, 8), 64);
  EXPECT_EQ(attention_head_dim_bound(DType::F16, 64, 80), 128);
  EXPECT_EQ(attention_head_dim_bound(DType::F32, 128, 128), 128);
  EXPECT_EQ(attention_head_dim_bound(DType::F32, 129, 16), 0);
  EXPECT_EQ(attention_head_dim_bound(DType::F64, 64, 64), 64);
  EXPECT_EQ(attention_head_dim_bound(DType::F64, 16, 65), 0);
}
