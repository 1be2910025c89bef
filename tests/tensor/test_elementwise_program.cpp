// ops::ElementwiseProgram: a multi-output element-wise program equals, bit for bit, the same
// ops run one by one (on the Cpu's fused executor, on the plain execute path of the Fusion
// decorator, in f32 and f64, with broadcast inputs); it runs in place on inputs handed over
// (memory_stats shows no new buffer); bad programs are ember::Errors naming the problem.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include <ember/ember.hpp>
#include <ember/tensor/elementwise_program.hpp>

using namespace ember;

namespace {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

DynTensor values(const Shape& s, double a, DType dt, const Device& d) {
  std::vector<double> v(s.num_elements());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(a * double(i + 1)) + 1.5;
  return ops::cast(ops::from_data(TensorData::from<double>(v, s), d), dt);
}

std::vector<double> host(const DynTensor& t) {
  return ops::cast(t, DType::F64).to_data().to_vector<double>();
}

// An Adam-like update of (p, g, m) with a broadcast row r: three outputs.
struct Outs {
  std::vector<double> p, m, s;
};

Outs by_ops(DynTensor p, DynTensor g, DynTensor m, DynTensor r) {
  using ir::BinaryFn;
  using ir::UnaryFn;
  auto m2 = ops::binary(BinaryFn::Add, ops::binary_scalar(BinaryFn::Mul, m, 0.9),
                        ops::binary_scalar(BinaryFn::Mul, g, 0.1));
  auto s = ops::unary(UnaryFn::Sqrt, ops::binary(BinaryFn::Mul, g, r));
  auto d = ops::binary(BinaryFn::Div, m2, ops::binary_scalar(BinaryFn::Add, s, 1e-3));
  auto p2 = ops::binary(BinaryFn::Sub, p, ops::binary_scalar(BinaryFn::Mul, d, 0.01));
  return {host(p2), host(m2), host(s)};
}

Outs by_program(DynTensor p, DynTensor g, DynTensor m, DynTensor r) {
  ops::ElementwiseProgram prog;
  const auto vp = prog.input(std::move(p)), vg = prog.input(std::move(g));
  const auto vm = prog.input(std::move(m)), vr = prog.input(std::move(r));
  const auto b = prog.scalar(0.9), one_b = prog.scalar(0.1), eps = prog.scalar(1e-3),
             lr = prog.scalar(0.01);
  const auto m2 = prog.add(prog.mul(vm, b), prog.mul(vg, one_b));
  const auto s = prog.sqrt(prog.mul(vg, vr));
  const auto d = prog.div(m2, prog.add(s, eps));
  const auto p2 = prog.sub(vp, prog.mul(d, lr));
  auto out = std::move(prog).run({p2, m2, s});
  return {host(out[0]), host(out[1]), host(out[2])};
}

// Odd sizes by default: vector tails and a partial last tile; rows of several tiles (the
// Cpu's are 512 elements) reach the prefetch of the next tile.
void expect_same(const Device& dev, DType dt, const Shape& s = Shape{37, 129}) {
  auto make = [&](double a) { return values(s, a, dt, dev); };
  const auto row = values(Shape{1, s[1]}, 0.37, dt, dev);
  const Outs want = by_ops(make(0.1), make(0.2), make(0.3), row);
  const Outs got = by_program(make(0.1), make(0.2), make(0.3), row);
  EXPECT_EQ(got.p, want.p);
  EXPECT_EQ(got.m, want.m);
  EXPECT_EQ(got.s, want.s);
}

TEST(ElementwiseProgram, EqualsTheOpsBitForBitOnTheCpu) {
  expect_same(Device::cpu(), DType::F32);
  expect_same(Device::cpu(), DType::F64);
  expect_same(Device::cpu(), DType::BF16);
  expect_same(Device::cpu(), DType::F32, Shape{3, 1500});
  expect_same(Device::cpu(), DType::BF16, Shape{2, 1100});
}

TEST(ElementwiseProgram, EqualsTheOpsOnADecoratedDevice) {
  expect_same(Device::cpu().fusion(), DType::F32);
}

TEST(ElementwiseProgram, RunsInPlaceOnInputsHandedOver) {
  const Device cpu = Device::cpu();
  const Shape s{512, 1024};  // 2 MiB each
  const std::size_t bytes = s.num_elements() * sizeof(float);
  auto a = ops::full(s, 2.0, DType::F32, cpu), b = ops::full(s, 3.0, DType::F32, cpu);
  const MemoryStats before = memory_stats(cpu);
  ops::ElementwiseProgram prog;
  const auto va = prog.input(std::move(a)), vb = prog.input(std::move(b));
  const auto sum = prog.add(va, vb), prod = prog.mul(va, vb);
  auto out = std::move(prog).run({sum, prod});
  const MemoryStats after = memory_stats(cpu);
  EXPECT_EQ(host(out[0])[12345], 5.0);
  EXPECT_EQ(host(out[1])[12345], 6.0);
  // Both results took the inputs' buffers: nothing of a tensor's size was allocated.
  EXPECT_LT(after.peak, before.in_use + bytes / 4) << "in use " << before.in_use;
}

// Note [Programs pass through]: on the Fusion decorator a program is not recorded op by op:
// it runs at once as one group of the inner backend, after its pending inputs, and in place
// on the inputs it is handed.
TEST(ElementwiseProgram, PassesThroughTheFusionDecorator) {
  const Device fused = Device::cpu().fusion();
  // 4 MiB each: larger than the tensors of the tests before, so the peak is this test's.
  const Shape s{1024, 1024};
  const std::size_t bytes = s.num_elements() * sizeof(float);
  // A pending input (exp, recorded and not yet run) and one ready.
  auto a = ops::unary(ir::UnaryFn::Exp, ops::full(s, 0.5, DType::F32, fused));
  auto b = ops::full(s, 3.0, DType::F32, fused);
  fused.sync();
  auto c = ops::unary(ir::UnaryFn::Neg, b);  // pending when the program runs
  fusion::reset_report(fused);
  const MemoryStats before = memory_stats(fused);
  ops::ElementwiseProgram prog;
  const auto va = prog.input(std::move(a)), vc = prog.input(std::move(c));
  const auto sum = prog.add(va, vc), prod = prog.mul(va, vc);
  auto out = std::move(prog).run({sum, prod});
  const MemoryStats after = memory_stats(fused);
  // The program's instructions were not recorded (the pending neg was, before the reset).
  EXPECT_EQ(fusion::report(fused).records, 0u);
  const float e = std::exp(0.5f);
  EXPECT_EQ(host(out[0])[4321], double(e + -3.0f));
  EXPECT_EQ(host(out[1])[4321], double(e * -3.0f));
  // The handed-over ready input gave its buffer; the pending one was computed in a fresh
  // buffer (its result), then given too: at most that one new tensor.
  EXPECT_LT(after.peak, before.in_use + bytes + bytes / 4) << "in use " << before.in_use;
}

TEST(ElementwiseProgram, BadProgramsAreErrors) {
  const Device cpu = Device::cpu();
  const auto x = ops::zeros(Shape{4, 3}, DType::F32, cpu);
  {
    ops::ElementwiseProgram prog;
    prog.input(x);
    EXPECT_NE(error_of([&] {
                prog.input(ops::zeros(Shape{4, 3}, DType::F64, cpu));
              }).find("input: dtype f64, the program's is f32"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                prog.input(ops::zeros(Shape{2, 3}, DType::F32, cpu));
              }).find("shape [2, 3] does not broadcast to the program's shape [4, 3]"),
              std::string::npos);
  }
  {
    ops::ElementwiseProgram prog;
    const auto a = prog.input(x);
    const auto b = prog.sqrt(a);
    EXPECT_NE(error_of([&] { prog.scalar(1.0); }).find("inputs come before instructions"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                prog.add(b, ops::ElementwiseProgram::Value{7});
              }).find("value 7 is not a value of this program"),
              std::string::npos);
    EXPECT_NE(error_of([&] { std::move(prog).run({a}); }).find("is an input"), std::string::npos);
  }
  EXPECT_NE(error_of([] { ops::ElementwiseProgram{}.scalar(1.0); }).find("give an input first"),
            std::string::npos);
}

}  // namespace
