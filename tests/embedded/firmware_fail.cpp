// Bad input on the embedded build (no exceptions): ember calls the fail handler the
// application installed, with the op's message, and never returns to the failing op. The
// handler here records the message and jumps back to the case (longjmp: what the failing
// call had allocated is not given back, acceptable in a test that ends after it; firmware
// would reset). Also the arena's accounting (memory_stats) and its exhaustion: a fail
// handler call with the sizes. The exit code is the number of failed cases.
#include <csetjmp>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "board.hpp"
#include "check.hpp"
#include "ember/base/error.hpp"
#include "ember/cpu/cpu.hpp"
#include "ember/tensor/tensor.hpp"
#include "expect_fail.hpp"

using namespace ember;
using firmware::expect_fail;
using firmware::on_fail;
using firmware::report;

namespace {

alignas(64) std::byte g_arena[8 * 1024];

}  // namespace

int main() {
  set_fail_handler(on_fail);
  const Device dev = Device::cpu();
  const auto a = Tensor<2>::ones(Shape{2, 3}, dev);
  const auto b = Tensor<2>::ones(Shape{4, 5}, dev);

  expect_fail("matmul_shapes", [&] { (void)a.matmul(b); }, {"matmul", "[2, 3]", "[4, 5]"});
  expect_fail("add_broadcast", [&] { (void)(a + b); }, {"[2, 3]", "[4, 5]"});
  expect_fail("reshape_count", [&] { (void)a.reshape<1>(Shape{7}); }, {"reshape", "[2, 3]", "[7]"});
  expect_fail("slice_range", [&] { (void)a.slice({{0, 3}, {0, 3}}); }, {"slice", "[2, 3]"});
  expect_fail("from_data_size",
              [&] {
                (void)Tensor<1>::from_data(TensorData::from<float>({1, 2, 3}, Shape{4}), dev);
              },
              {"[4]"});
  expect_fail("into_scalar", [&] { (void)a.into_scalar<float>(); }, {"into_scalar", "[2, 3]"});
  expect_fail("cuda_absent", [&] { (void)Device::cuda(0); }, {"cuda", "embedded"});

  // The arena: 8 KiB. A [16] f32 tensor takes one 64-byte block.
  const Device arena(cpu::make_cpu_backend(g_arena));
  {
    MemoryStats s = memory_stats(arena);
    report("arena_capacity",
           s.capacity == sizeof g_arena && s.reserved == sizeof g_arena && s.in_use == 0);
    auto t = Tensor<1>::zeros(Shape{16}, arena);
    auto u = Tensor<1>::zeros(Shape{100}, arena);  // 400 bytes: 448 in blocks
    s = memory_stats(arena);
    report("arena_in_use", s.in_use == 64 + 448 && s.peak == 64 + 448);
  }
  report("arena_released", memory_stats(arena).in_use == 0 && memory_stats(arena).peak == 512);
  // 3000 f32 (12000 bytes) cannot fit in 8 KiB.
  expect_fail("arena_exhausted", [&] { (void)Tensor<1>::zeros(Shape{3000}, arena); },
              {"[3000]", "arena", "12000 bytes", "8192"});
  return firmware::summary();
}
