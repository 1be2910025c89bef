// Guard regions and clone invariance for the ops that may write in place. The harness
// cannot see backend memory, so guards go through the data path: an op works on a view of
// a sentinel-padded parent, or on a sole-owned (moved) buffer, and afterwards every element
// the op must not touch is compared with its value before. Every value case also runs
// with kept and with moved inputs (harness.cpp); these tests pin the in-place paths down
// with sizes where a stray write would land in a neighbour's memory.
#include <gtest/gtest.h>

#include "conformance/harness.hpp"

namespace conformance {
namespace {

namespace ops = ember::ops;
using ember::TensorData;
using ember::ir::BinaryFn;
using ember::ir::UnaryFn;

std::vector<double> values(const DynTensor& t) { return t.to_data().to_vector<double>(); }

DynTensor iota(const Device& d, Shape s, DType dt = DType::F32) {
  const std::size_t n = s.num_elements();
  return ops::reshape(ops::arange(0, static_cast<double>(n), 1, dt, d), s);
}

class Guards : public testing::TestWithParam<std::string> {
 protected:
  Device dev() const {
    for (const Device& d : conformance_devices()) {
      if (d.name() == GetParam()) return d;
    }
    return Device::cpu();
  }
};

// In-place capable ops on a moved view: the parent (kept) must be untouched everywhere.
TEST_P(Guards, MovedViewNeverWritesItsParent) {
  const Device d = dev();
  for (std::size_t n : {1u, 7u, 1023u, 4097u, 70001u}) {
    auto parent = iota(d, Shape{3, n + 2});
    const auto before = values(parent);
    auto view = [&] {
      return ops::slice(parent,
                        {ops::Range(1, 2), ops::Range(1, 1 + static_cast<std::int64_t>(n))});
    };
    auto check = [&](const char* what) {
      EXPECT_EQ(values(parent), before) << what << " wrote through a view of size " << n;
    };
    (void)ops::unary(UnaryFn::Neg, view()).to_data();
    check("neg");
    (void)ops::binary_scalar(BinaryFn::Add, view(), 1).to_data();
    check("add_scalar");
    (void)ops::slice_fill(view(), {ops::Range(0, 1)}, -1).to_data();
    check("slice_fill");
    (void)ops::mask_fill(view(), ops::ones(Shape{1, n}, DType::Bool, d), 5).to_data();
    check("mask_fill");
    auto idx = ops::reshape(ops::from_data(TensorData::from<std::int64_t>({0}), d), Shape{1, 1});
    (void)ops::scatter(view(), 1, idx, ops::full(Shape{1, 1}, 9, DType::F32, d)).to_data();
    check("scatter");
    (void)ops::scatter_add(view(), 1, idx, ops::full(Shape{1, 1}, 9, DType::F32, d)).to_data();
    check("scatter_add");
    (void)ops::select_assign(view(), 0, ops::from_data(TensorData::from<std::int64_t>({0}), d),
                             ops::ones(Shape{1, n}, DType::F32, d))
        .to_data();
    check("select_assign");
    (void)ops::cast(view(), DType::F64).to_data();
    check("cast");
  }
}

// slice_assign on a sole-owned buffer (the in-place path): exactly the range changes; the
// elements either side of it (the guard) keep their values.
TEST_P(Guards, SliceAssignInPlaceWritesOnlyItsRange) {
  const Device d = dev();
  for (std::size_t n : {8u, 1025u, 70003u}) {
    auto x = iota(d, Shape{n});
    const auto want_before = values(x);
    const auto s = static_cast<std::int64_t>(n / 3), e = static_cast<std::int64_t>(2 * n / 3);
    auto y =
        ops::slice_assign(std::move(x), {ops::Range(s, e)},
                          ops::full(Shape{static_cast<std::size_t>(e - s)}, -1, DType::F32, d));
    const auto got = values(y);
    for (std::size_t i = 0; i < n; ++i) {
      const bool inside = static_cast<std::int64_t>(i) >= s && static_cast<std::int64_t>(i) < e;
      ASSERT_EQ(got[i], inside ? -1.0 : want_before[i]) << "n " << n << " index " << i;
    }
  }
}

// Clone invariance: f(std::move(x)) equals f(x) while another reference to x is kept, and
// the kept x is unchanged.
TEST_P(Guards, CloneInvariance) {
  const Device d = dev();
  using F = std::function<DynTensor(DynTensor)>;
  const std::vector<std::pair<const char*, F>> fns = {
      {"exp", [](DynTensor x) { return ops::unary(UnaryFn::Exp, std::move(x)); }},
      {"add", [](DynTensor x) { return ops::binary(BinaryFn::Add, x, x); }},
      {"mul_scalar",
       [](DynTensor x) { return ops::binary_scalar(BinaryFn::Mul, std::move(x), 3); }},
      {"clamp", [](DynTensor x) { return ops::clamp(std::move(x), 2.0, 50.0); }},
      {"slice_fill",
       [](DynTensor x) { return ops::slice_fill(std::move(x), {ops::Range(1, 3)}, 0); }},
      {"scatter",
       [d](DynTensor x) {
         auto idx =
             ops::reshape(ops::from_data(TensorData::from<std::int64_t>({2}), d), Shape{1, 1});
         return ops::scatter(std::move(x), 0, idx, ops::full(Shape{1, 1}, 7, DType::F32, d));
       }},
      {"select_assign",
       [d](DynTensor x) {
         auto idx = ops::from_data(TensorData::from<std::int64_t>({1, 1}), d);
         const std::size_t c = x.shape()[1];
         return ops::select_assign(std::move(x), 0, idx, ops::ones(Shape{2, c}, DType::F32, d));
       }},
      {"cast", [](DynTensor x) { return ops::cast(std::move(x), DType::I32); }},
  };
  for (const auto& [name, f] : fns) {
    auto kept = iota(d, Shape{5, 4099});
    const auto before = values(kept);
    const auto with_ref = values(f(kept));
    EXPECT_EQ(values(kept), before) << name << " changed an input another reference holds";
    const auto moved = values(f(iota(d, Shape{5, 4099})));
    EXPECT_EQ(moved, with_ref) << name << " gives different numbers on a moved input";
  }
}

INSTANTIATE_TEST_SUITE_P(Devices, Guards, testing::ValuesIn(Device::available()),
                         [](const testing::TestParamInfo<std::string>& i) {
                           std::string s;
                           for (char c : i.param)
                             s += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return s;
                         });

}  // namespace
}  // namespace conformance
