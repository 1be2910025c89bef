// A Cpu-only program built against the installed package (tests/package/test_install.sh):
// it lists the devices of this machine and why the others cannot run, and computes on the
// Cpu. It exits non-zero when the Cpu is missing from Device::available(), when a backend
// that does not run has no reason, or when the result is wrong.
#include <cmath>
#include <cstdio>
#include <string>

#include <ember/ember.hpp>

int main() {
  using namespace ember;
  bool cpu = false;
  for (const std::string& name : Device::available()) {
    std::printf("available: %s\n", name.c_str());
    cpu = cpu || name == "cpu";
  }
  int unexplained = 0;
  for (const auto& u : Device::unavailable()) {
    std::printf("unavailable: %s: %s\n", u.name.c_str(), u.why.c_str());
    unexplained += u.why.empty() ? 1 : 0;
  }
  try {
    Device::cuda(0);
    std::printf("cuda(0): runs\n");
  } catch (const Error& e) {
    std::printf("cuda(0): %s\n", e.what());
  }
  // sum(exp([0, 1, 2, 3])) on the Cpu against the closed form (e^4 - 1) / (e - 1).
  Device dev = Device::parse("cpu");
  auto x = Tensor<1>::from_data(TensorData::from<double>({0, 1, 2, 3}, Shape{4}), dev);
  const double got = x.exp().sum().into_scalar<double>();
  const double want = (std::exp(4.0) - 1.0) / (std::exp(1.0) - 1.0);
  std::printf("sum(exp(0..3)) = %.12f (closed form %.12f)\n", got, want);
  const bool ok = cpu && unexplained == 0 && std::fabs(got - want) < 1e-12 * want;
  std::printf("%s\n", ok ? "consumer: ok" : "consumer: FAILED");
  return ok ? 0 : 1;
}
