// EMBER_DETECT_NAN (Note [Detecting NaN] in src/autodiff/nan_check.hpp): with the check on,
// the first op whose output holds a NaN (or, in NonFinite mode, an infinity) throws an
// ember::Error naming it and the pass — forward, or the backward of which op; an operand
// that was bad before it reached the device is named as such; with the check off the same
// computations run and give the NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <ember/autodiff/autodiff.hpp>
#include <ember/ember.hpp>

using namespace ember;
using autodiff::NanCheck;

namespace {

// Sets the mode for one test and puts the previous one back.
struct Mode {
  explicit Mode(NanCheck m) : before(autodiff::detect_nan()) { autodiff::set_detect_nan(m); }
  ~Mode() { autodiff::set_detect_nan(before); }
  NanCheck before;
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Tensor<1> leaf(std::vector<float> v, const Device& dev) {
  const std::size_t n = v.size();
  return Tensor<1>::from_data(TensorData::from(v, Shape{n}), dev).require_grad();
}

}  // namespace

// First in the file, before any test changes the mode. ctest runs it again with
// EMBER_DETECT_NAN=inf (tests/CMakeLists.txt).
TEST(DetectNanEnv, TheInitialModeComesFromTheEnvironment) {
  const char* v = std::getenv("EMBER_DETECT_NAN");
  const std::string s = v ? v : "";
  const NanCheck expected = s.empty() || s == "0"    ? NanCheck::Off
                            : s == "inf" || s == "2" ? NanCheck::NonFinite
                                                     : NanCheck::Nan;
  EXPECT_EQ(autodiff::detect_nan(), expected) << "EMBER_DETECT_NAN='" << s << "'";
}

TEST(DetectNan, OffLetsTheNanThrough) {
  Mode m(NanCheck::Off);
  const Device ad = Device::cpu().autodiff();
  const auto y = leaf({1.f, -1.f, 2.f}, ad).log().to_data().to_vector<float>();
  EXPECT_FLOAT_EQ(y[0], 0.f);
  EXPECT_TRUE(std::isnan(y[1]));
}

TEST(DetectNan, NamesTheForwardOpAndTheElement) {
  Mode m(NanCheck::Nan);
  const Device ad = Device::cpu().autodiff();
  const auto x = leaf({1.f, -1.f, 2.f}, ad);
  const auto h = x * 2.0 + 1.0;  // finite: passes
  const std::string e = error_of([&] { (h - 2.0).log(); });
  EXPECT_NE(e.find("EMBER_DETECT_NAN: Unary(log) (forward) produced NaN at element 1 of its "
                   "output 0 (f32 [3]) from operands [3]"),
            std::string::npos)
      << e;
  // The same on a device without autodiff's tracking of this tensor (no require_grad).
  const auto plain = Tensor<1>::from_data(TensorData::from(std::vector<float>{4.f, -4.f}), ad);
  EXPECT_NE(error_of([&] { plain.sqrt(); }).find("Unary(sqrt) (forward) produced NaN at element 1"),
            std::string::npos);
}

TEST(DetectNan, InfinitiesOnlyInNonFiniteMode) {
  const Device ad = Device::cpu().autodiff();
  const auto x = leaf({0.f, 1.f}, ad);
  {
    Mode m(NanCheck::Nan);
    EXPECT_EQ(error_of([&] { x.log(); }), "");  // log(0) = -inf is no NaN
  }
  Mode m(NanCheck::NonFinite);
  EXPECT_NE(error_of([&] {
              x.log();
            }).find("Unary(log) (forward) produced -Inf at element 0 of its output 0"),
            std::string::npos);
}

TEST(DetectNan, NamesTheOpWhoseBackwardProducedIt) {
  const Device ad = Device::cpu().autodiff();
  // sqrt(0) * 0 is finite forward; its gradient 0 * 1 / (2 sqrt(0)) is NaN.
  const auto x = leaf({0.f, 4.f}, ad);
  {
    Mode m(NanCheck::Off);
    auto g = ((x.sqrt() * 0.0).sum().backward());
    const auto gx = x.grad(g).value().to_data().to_vector<float>();
    ASSERT_TRUE(std::isnan(gx[0])) << gx[0];  // what the check must find
  }
  Mode m(NanCheck::Nan);
  auto loss = (x.sqrt() * 0.0).sum();
  const std::string e = error_of([&] { loss.backward(); });
  EXPECT_NE(e.find("EMBER_DETECT_NAN: "), std::string::npos) << e;
  EXPECT_NE(e.find("(in the backward of Unary(sqrt)) produced NaN at element 0"), std::string::npos)
      << e;
}

TEST(DetectNan, AnOperandThatCameInBadIsNamedAsSuch) {
  Mode m(NanCheck::Nan);
  const Device ad = Device::cpu().autodiff();
  const auto x = Tensor<1>::from_data(
      TensorData::from(std::vector<float>{1.f, std::numeric_limits<float>::quiet_NaN()}), ad);
  const std::string e = error_of([&] { x + 1.0; });
  EXPECT_NE(e.find("EMBER_DETECT_NAN: operand 0 of Binary(add) ([2]) holds NaN at element 1 "
                   "already (it came from data or another device"),
            std::string::npos)
      << e;
}
