// Device names: Device::parse (DESIGN §2.1) round-trips with Device::name(), and every
// malformed or unknown name gets an ember::Error saying what is wrong; Device::unavailable()
// explains each backend that cannot run here.
#include <gtest/gtest.h>

#include <functional>

#include <algorithm>
#include <string>

#include <ember/ember.hpp>

using namespace ember;

namespace {

// The message of the ember::Error that f throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST(Device, ParseNamesTheSameDevice) {
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::parse("cpu+autodiff"), Device::cpu().autodiff());
  EXPECT_EQ(Device::parse("cpu+autodiff_balanced"),
            Device::cpu().autodiff(Checkpointing::Balanced));
  EXPECT_EQ(Device::parse("cpu+autodiff+autodiff"), Device::cpu().autodiff().autodiff());
  EXPECT_TRUE(Device::parse("cpu+autodiff").is_autodiff());
  EXPECT_EQ(Device::parse("cpu+autodiff").inner(), Device::cpu());
}

TEST(Device, NamesArePrintedAsParsed) {
  EXPECT_EQ(Device::cpu().name(), "cpu");
  EXPECT_EQ(Device::cpu().autodiff().name(), "cpu+autodiff");
  EXPECT_EQ(Device::cpu().autodiff(Checkpointing::Balanced).name(), "cpu+autodiff_balanced");
}

// Every device of this machine, plain and decorated, round-trips through its name.
TEST(Device, RoundTripEveryAvailableDevice) {
  const auto avail = Device::available();
  ASSERT_FALSE(avail.empty());
  EXPECT_EQ(avail.front(), "cpu");
  for (const std::string& n : avail) {
    const Device d = Device::parse(n);
    EXPECT_EQ(d.name(), n);
    for (const Device& dd :
         {d.autodiff(), d.autodiff(Checkpointing::Balanced), d.autodiff().autodiff()}) {
      EXPECT_EQ(Device::parse(dd.name()), dd) << dd.name();
      EXPECT_EQ(Device::parse(dd.name()).name(), dd.name());
    }
  }
}

TEST(Device, ParseRejectsUnknownBackend) {
  const std::string m = error_of([] { Device::parse("metal:0"); });
  EXPECT_TRUE(has(m, "Device::parse(\"metal:0\")")) << m;
  EXPECT_TRUE(has(m, "unknown backend 'metal'")) << m;
  EXPECT_TRUE(has(m, "cpu") && has(m, "cuda") && has(m, "vulkan") && has(m, "libtorch")) << m;
  EXPECT_TRUE(has(error_of([] { Device::parse(""); }), "unknown backend ''"));
  EXPECT_TRUE(has(error_of([] { Device::parse("CPU"); }), "unknown backend 'CPU'"));
  EXPECT_TRUE(has(error_of([] { Device::parse(" cpu"); }), "unknown backend ' cpu'"));
}

TEST(Device, ParseRejectsUnknownDecorator) {
  const std::string m = error_of([] { Device::parse("cpu+fuse"); });
  EXPECT_TRUE(has(m, "Device::parse(\"cpu+fuse\")")) << m;
  EXPECT_TRUE(has(m, "unknown decorator 'fuse'")) << m;
  EXPECT_TRUE(has(m, "autodiff") && has(m, "fusion")) << m;
  EXPECT_TRUE(
      has(error_of([] { Device::parse("cpu+autodiff+grad"); }), "unknown decorator 'grad'"));
  EXPECT_TRUE(has(error_of([] { Device::parse("cpu+"); }), "unknown decorator ''"));
  EXPECT_TRUE(has(error_of([] { Device::parse("cpu++autodiff"); }), "unknown decorator ''"));
}

TEST(Device, ParseRejectsBadIndex) {
  EXPECT_TRUE(has(error_of([] { Device::parse("cpu:0"); }), "'cpu' takes no device index"));
  EXPECT_TRUE(
      has(error_of([] { Device::parse("libtorch:1"); }), "'libtorch' takes no device index"));
  for (const char* bad : {"cuda:", "cuda:x", "cuda:-1", "cuda:+1", "cuda:0x1", "cuda:1.0",
                          "cuda:99999999999", "cuda:0:1"}) {
    const std::string m = error_of([&] { Device::parse(bad); });
    EXPECT_TRUE(has(m, "is not a number")) << bad << ": " << m;
  }
}

// A known backend that cannot run here says why, through parse as through its factory.
TEST(Device, ParseOfAnUnavailableBackendSaysWhy) {
  // Every known backend this build or machine cannot run (libtorch_cuda without a CUDA
  // libtorch at least) fails in parse with its factory's message, which names the factory.
  const auto avail = Device::available();
  const auto absent = [&](const char* d) {
    return std::find(avail.begin(), avail.end(), d) == avail.end();
  };
  std::size_t checked = 0;
  const std::vector<std::pair<const char*, std::function<void()>>> cases = {
      {"libtorch", [] { Device::libtorch(); }},
      {"libtorch_cuda:0", [] { Device::libtorch_cuda(0); }},
      {"vulkan:0", [] { Device::vulkan(0); }},
      {"cuda:0", [] { Device::cuda(0); }}};
  for (const auto& [name, factory] : cases) {
    if (!absent(name)) continue;
    const std::string m = error_of([&] { Device::parse(std::string(name) + "+autodiff"); });
    EXPECT_EQ(m, error_of(factory)) << name;
    const std::string base = std::string(name).substr(0, std::string(name).find(':'));
    EXPECT_TRUE(has(m, "Device::" + base)) << m;
    ++checked;
  }
  EXPECT_GT(checked, 0u) << "every backend is available: nothing to check";
}

// Each backend is either available or explained; none is both, none is neither.
TEST(Device, UnavailableExplainsEveryOtherBackend) {
  const auto avail = Device::available();
  const auto missing = Device::unavailable();
  for (const char* name : {"cpu", "cuda", "vulkan", "libtorch"}) {
    bool runs = false;
    for (const std::string& a : avail)
      runs = runs || a == name || a.rfind(std::string(name) + ":", 0) == 0;
    int explained = 0;
    for (const auto& u : missing) {
      if (u.name == name) {
        ++explained;
        EXPECT_FALSE(u.why.empty()) << name;
      }
    }
    EXPECT_NE(runs, explained == 1) << name;
  }
  bool cuda_runs = false;
  for (const std::string& a : avail) cuda_runs = cuda_runs || a.rfind("cuda:", 0) == 0;
  if (!cuda_runs) {
    for (const auto& u : missing) {
      // Device::cuda(0)'s error carries the same reason.
      if (u.name == "cuda") {
        EXPECT_TRUE(has(error_of([] { Device::cuda(0); }), u.why)) << u.why;
      }
    }
  }
}
